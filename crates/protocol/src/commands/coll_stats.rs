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
            out.insert("storageSize", c.storage_size() as i64 / scale);
            let indexes = c.indexes();
            let mut sizes = doc! {"_id_": 0_i64};
            let mut total = 0i64;
            for i in indexes.iter() {
                let n = i.disk_size() as i64 / scale;
                total += n;
                sizes.insert(i.spec.name.clone(), n);
            }
            out.insert("nindexes", 1 + indexes.len() as i32);
            out.insert("totalIndexSize", total);
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
            out.insert("storageSize", buckets.storage_size() as i64 / scale);
            // The meta/time index lives in the buckets tree; other index specs are
            // metadata (see indexes_ts), so they take no space of their own.
            let specs = TimeseriesStore::index_specs(&buckets, &options)?;
            let sizes: Document = specs
                .iter()
                .filter_map(|s| s.get_str("name").ok())
                .map(|n| (n.to_string(), Bson::Int64(0)))
                .collect();
            out.insert("nindexes", specs.len() as i32);
            out.insert("totalIndexSize", 0_i64);
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
    stats_document(req, &coll, scale)
}
