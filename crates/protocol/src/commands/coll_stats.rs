//! `collStats` (and the `storageStats` of the `$collStats` stage): sizes and counts of a
//! collection, and for a time-series collection the `timeseries` section with the bucket
//! catalog's counters under MongoDB's names.

use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_timeseries::TimeseriesStore;

/// The statistics document of `coll`, sizes divided by `scale`.
pub fn stats_document(req: &Request, coll: &str, scale: i64) -> CmdResult {
    let ns = format!("{}.{coll}", req.db);
    let scale = scale.max(1);
    let mut out = doc! {"ns": &ns};
    match Target::resolve(req, coll) {
        Target::Regular(None) => {
            return Err(CommandError::new(
                26,
                format!("Collection [{ns}] not found."),
            ));
        }
        Target::Regular(Some(c)) => {
            let (mut count, mut size) = (0i64, 0i64);
            for d in c.scan() {
                let d = d?;
                count += 1;
                size += bson::to_vec(&d).map(|v| v.len() as i64).unwrap_or(0);
            }
            out.insert("size", size / scale);
            out.insert("count", count);
            if let Some(avg) = size.checked_div(count) {
                out.insert("avgObjSize", avg);
            }
            out.insert("numOrphanDocs", 0_i64);
            let storage = c.storage_size() as i64 / scale;
            out.insert("storageSize", storage);
            out.insert("freeStorageSize", 0_i64);
            out.insert("capped", false);
            let (_, sizes) = index_sizes(&c)?;
            out.insert("nindexes", sizes.len() as i32);
            out.insert("indexBuilds", Vec::<Bson>::new());
            let total: i64 = sizes.iter().map(|(_, n)| *n as i64 / scale).sum();
            out.insert("totalIndexSize", total);
            out.insert("totalSize", storage + total);
            let sizes: Document = sizes
                .into_iter()
                .map(|(name, n)| (name, Bson::Int64(n as i64 / scale)))
                .collect();
            out.insert("indexSizes", sizes);
        }
        Target::TimeSeries { buckets, options } | Target::Buckets { buckets, options } => {
            let (bucket_count, bytes) = TimeseriesStore::bucket_summary(&buckets)?;
            let stats = req.state.timeseries.stats(&buckets);
            let mut ts = doc! {
                "bucketsNs": format!("{}.{}", req.db, buckets.namespace().coll),
                "bucketCount": bucket_count as i64,
            };
            if let Some(avg) = bytes.checked_div(bucket_count) {
                ts.insert("avgBucketSize", avg as i64);
            }
            ts.extend(stats.to_document());
            out.insert("size", bytes as i64 / scale);
            out.insert("count", bucket_count as i64);
            out.insert("numOrphanDocs", 0_i64);
            let storage = buckets.storage_size() as i64 / scale;
            out.insert("storageSize", storage);
            out.insert("freeStorageSize", 0_i64);
            out.insert("capped", false);
            // The meta/time index lives in the buckets tree; other index specs are
            // metadata (see indexes_ts), so they take no space of their own.
            let specs = TimeseriesStore::index_specs(&buckets, &options)?;
            let sizes: Document = specs
                .iter()
                .filter_map(|s| s.get_str("name").ok())
                .map(|n| (n.to_string(), Bson::Int64(0)))
                .collect();
            out.insert("nindexes", specs.len() as i32);
            out.insert("indexBuilds", Vec::<Bson>::new());
            out.insert("totalIndexSize", 0_i64);
            out.insert("totalSize", storage);
            out.insert("indexSizes", sizes);
            out.insert("timeseries", ts);
            if let Some(archive) = archive_section(req, &buckets, &options)? {
                out.insert("archive", archive);
            }
        }
    }
    out.insert("scaleFactor", scale);
    Ok(out)
}

/// Bytes of the `_id` index of `c`: the collection is stored in `_id` order, so its tree's
/// keys are that index; their total length is its size. Walks the collection.
/// Returns the number of documents too.
pub fn id_index_size(c: &hourglass_catalog::Collection) -> Result<(u64, u64), CommandError> {
    let (mut count, mut bytes) = (0u64, 0u64);
    for kv in c.engine().snapshot().scan_prefix(c.tree(), b"") {
        let (key, _) = kv.map_err(hourglass_catalog::CatalogError::from)?;
        count += 1;
        bytes += key.len() as u64;
    }
    Ok((count, bytes))
}

/// Each index of a regular collection with its bytes, `_id_` first (unscaled), and the
/// number of documents (one walk of the collection).
pub fn index_sizes(
    c: &hourglass_catalog::Collection,
) -> Result<(u64, Vec<(String, u64)>), CommandError> {
    let (count, id_bytes) = id_index_size(c)?;
    let mut out = vec![(
        hourglass_catalog::index::ID_INDEX_NAME.to_string(),
        id_bytes,
    )];
    for i in c.indexes().iter() {
        out.push((i.spec.name.clone(), i.disk_size()));
    }
    Ok((count, out))
}

/// `{files, bytes, measurements, lastRun}` of a collection with an archive rule or
/// archived files.
fn archive_section(
    req: &Request,
    buckets: &hourglass_catalog::Collection,
    options: &hourglass_timeseries::TimeseriesOptions,
) -> Result<Option<Document>, CommandError> {
    let st = TimeseriesStore::archive_stats(buckets)?;
    let rule = hourglass_timeseries::archive_spec(buckets, options);
    if rule.is_none() && st.files == 0 {
        return Ok(None);
    }
    Ok(Some(doc! {
        "files": st.files as i64,
        "bytes": st.bytes as i64,
        "measurements": st.measurements as i64,
        "lastRun": req.state.timeseries.archive_last_run(buckets).map_or(Bson::Null, Bson::DateTime),
    }))
}

pub fn coll_stats(req: &Request) -> CmdResult {
    req.check_fields(&["scale", "verbose"])?;
    let coll = req.collection()?;
    let scale = req.opt_i64("scale")?.unwrap_or(1);
    if scale < 1 {
        return Err(CommandError::bad_value(
            "Scale factor must be a positive integer",
        ));
    }
    let mut out = stats_document(req, &coll, scale)?;
    // MongoDB's collStats of a time-series collection (or of its buckets) shows the
    // number of buckets only as `timeseries.bucketCount`: no top-level `count`.
    if out.contains_key("timeseries") {
        out.remove("count");
    }
    Ok(out)
}

/// `dataSize: "db.coll"`: the bytes and number of the collection's documents (0 and 0 for
/// a missing collection). Ranges (`keyPattern`, `min`, `max`) are refused: they need an
/// index scan this server does not do for `dataSize` yet.
pub fn data_size(req: &Request) -> CmdResult {
    req.check_fields(&["keyPattern", "min", "max", "estimate"])?;
    let started = std::time::Instant::now();
    let ns = match req.body.get("dataSize") {
        Some(Bson::String(s)) => s.clone(),
        Some(v) => return Err(req.wrong_type("dataSize", v, "string")),
        None => return Err(CommandError::missing_field("dataSize")),
    };
    if let Some(f) = ["keyPattern", "min", "max"]
        .into_iter()
        .find(|f| req.body.contains_key(*f))
    {
        return Err(CommandError::bad_value(format!(
            "dataSize with '{f}' (a key range) is not supported by this server yet"
        )));
    }
    // `estimate` only changes how a key range is measured; without one it has no effect.
    req.opt_bool("estimate")?;
    let Some((db, coll)) = ns
        .split_once('.')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
    else {
        return Err(CommandError::new(
            73,
            format!("Invalid namespace specified '{ns}'"),
        ));
    };
    let buckets = format!("{}{coll}", super::target::BUCKETS_PREFIX);
    let timeseries = req
        .state
        .catalog
        .get(db, &buckets)
        .is_some_and(|b| hourglass_timeseries::options_of(&b).is_some());
    // A time-series collection is a view on its buckets, as views are refused.
    if timeseries || super::views::is_view_in(&req.state.catalog, db, coll)? {
        return Err(CommandError::new(
            166,
            format!("Namespace {ns} is a view, not a collection"),
        ));
    }
    let (mut size, mut count) = (0i64, 0i64);
    if let Some(c) = req.state.catalog.get(db, coll) {
        for d in c.scan() {
            let d = d?;
            count += 1;
            size += bson::to_vec(&d).map(|v| v.len() as i64).unwrap_or(0);
        }
    }
    Ok(doc! {
        "size": size,
        "numObjects": count,
        "millis": started.elapsed().as_millis() as i64,
    })
}
