//! The archive tier of a time-series collection: its rule (the collection's `archive`
//! option), the mover that turns old closed buckets into Parquet files, the manifest
//! that records those files in the buckets tree (`A` keys), their expiry and their
//! statistics. Reads of archived rows are in `archive_read`.
//!
//! A mover pass over one collection:
//! 1. From a snapshot, picks up to `max_buckets` closed buckets whose largest time is
//!    older than now − `afterSeconds` (in `_id`, that is time, order).
//! 2. Splits their measurements by UTC day and `partitionBy` values, sorts each part
//!    by series then time, and writes each part as one Parquet file at
//!    `db=<db>/coll=<coll>/date=<day>/part-<min time>-<nonce>.parquet` under the URI.
//!    The put is durable (local: synced file and directory; S3: confirmed upload).
//! 3. Under the series lock, checks that every picked bucket is still stored exactly
//!    as read and is not open, reopened or being closed in memory; then one atomic,
//!    durable batch records the files in the manifest and deletes the buckets. If a
//!    check fails the files are deleted and the buckets stay (the next pass retries).
//!
//! A crash before step 3's commit leaves the buckets and a file no manifest entry
//! names: [`TimeseriesStore::archive_cleanup`] deletes such orphans when the mover
//! first visits the collection after start-up. A crash after it leaves the files
//! recorded and the buckets gone. Either way every measurement is counted once.

use super::keys::*;
use super::{stage_remove, StoreError, TimeseriesStore};
use crate::bucket::decode_compressed;
use crate::meta::meta_key;
use crate::options::TimeseriesOptions;
use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document};
use hourglass_archive::columnar::{flatten, Columns, Typing};
use hourglass_archive::location::hive_part;
use hourglass_archive::manifest::MAX_METAS;
use hourglass_archive::{parquet_file, ArchiveSpec, FileEntry, Location};
use hourglass_catalog::Collection;
use hourglass_query::compare::compare_values;
use hourglass_query::path::get_path;
use hourglass_storage::Snapshot;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The archive rule of a buckets collection, if it has one.
pub fn archive_spec(buckets: &Collection, options: &TimeseriesOptions) -> Option<ArchiveSpec> {
    let v = buckets.options().get("archive").cloned()?;
    ArchiveSpec::parse(&v, options.meta_field.as_deref()).ok()
}

/// The manifest as of `snap`.
pub(super) fn manifest(
    snap: &Snapshot,
    buckets: &Collection,
) -> Result<Vec<FileEntry>, StoreError> {
    let mut out = Vec::new();
    for entry in snap.scan_prefix(buckets.tree(), &[ARCHIVED]) {
        let (_, v) = entry?;
        let d = Document::from_reader(v.as_slice())
            .map_err(|e| super::corrupt(format!("archive manifest entry: {e}")))?;
        out.push(FileEntry::from_document(&d)?);
    }
    Ok(out)
}

/// Points of a mover pass where a test fail point may stop the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoverStage {
    /// Files are written and durable; the manifest does not name them yet.
    FilesWritten,
    /// The manifest names the files and the buckets are deleted.
    Committed,
}

/// What one mover pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MoveOutcome {
    pub files: u64,
    pub buckets: u64,
    pub measurements: u64,
    /// More buckets were eligible than one pass takes.
    pub more: bool,
}

/// Archived files, bytes and measurements of one collection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveStats {
    pub files: u64,
    pub bytes: u64,
    pub measurements: u64,
}

/// A bucket picked for archiving: its `_id`, stored bytes, meta and minimum time.
struct Picked {
    id: ObjectId,
    bytes: Vec<u8>,
    meta: Option<Bson>,
    min_time_ms: i64,
}

/// Rows of one file to be: (series key, time, measurement with meta).
#[derive(Default)]
struct Part {
    partition: Document,
    rows: Vec<(Vec<u8>, i64, Document)>,
}

const DAY_MS: i64 = 86_400_000;

fn day_of(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms.div_euclid(DAY_MS) * DAY_MS)
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_else(|| "out-of-range".into())
}

/// The collection's folder below the archive root.
fn collection_dir(buckets: &Collection) -> String {
    let ns = buckets.namespace();
    let coll = ns.coll.strip_prefix("system.buckets.").unwrap_or(&ns.coll);
    format!("{}/{}", hive_part("db", &ns.db), hive_part("coll", coll))
}

impl TimeseriesStore {
    /// One mover pass over a collection (see the module docs). `stop_at` is called at
    /// each [`MoverStage`] (test fail points).
    pub fn archive_pass(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        spec: &ArchiveSpec,
        now_ms: i64,
        max_buckets: usize,
        stop_at: &dyn Fn(MoverStage),
    ) -> Result<MoveOutcome, StoreError> {
        let cutoff = now_ms.saturating_sub(spec.after_seconds.saturating_mul(1000));
        let (picked, more) = pick(buckets, cutoff, max_buckets.max(1))?;
        let mut outcome = MoveOutcome {
            more,
            ..MoveOutcome::default()
        };
        if picked.is_empty() {
            self.note_archive_run(buckets, now_ms);
            return Ok(outcome);
        }
        let parts = split(&picked, options, spec)?;
        let location = Location::open(&spec.uri)?;
        let dir = collection_dir(buckets);
        let mut written: Vec<FileEntry> = Vec::new();
        let result = (|| -> Result<(), StoreError> {
            for part in parts {
                written.push(write_part(&location, &spec.uri, &dir, options, part)?);
            }
            Ok(())
        })();
        if let Err(e) = result {
            remove_files(&location, &written);
            return Err(e);
        }
        stop_at(MoverStage::FilesWritten);
        let series = self.series(buckets, options)?;
        // Not waiting for the compressor: a bucket it still holds is in `closing`.
        let s = series.lock();
        let snap = buckets.engine().snapshot();
        let mut unchanged = true;
        for p in &picked {
            let in_memory = s.catalog.open_bucket(p.id).is_some()
                || s.closing.contains_key(&p.id)
                || s.reopened.contains(&p.id);
            let stored = snap.get(buckets.tree(), &bucket_key(CLOSED, &p.id))?;
            if in_memory || stored.as_deref() != Some(p.bytes.as_slice()) {
                unchanged = false;
                break;
            }
        }
        if !unchanged {
            drop(s);
            tracing::info!(ns = %buckets.namespace(), "buckets changed while being archived; the next pass retries");
            remove_files(&location, &written);
            outcome.more = true;
            return Ok(outcome);
        }
        let engine = buckets.engine().clone();
        let mut batch = engine.batch();
        for f in &written {
            let mut bytes = Vec::new();
            f.to_document()
                .to_writer(&mut bytes)
                .map_err(|e| super::corrupt(e.to_string()))?;
            batch.put(buckets.tree(), &archived_key(&f.path), &bytes);
        }
        for p in &picked {
            stage_remove(&mut batch, buckets, &p.id, p.meta.as_ref(), p.min_time_ms);
        }
        if let Err(e) = engine.commit(batch) {
            // Refused for disk space: nothing was applied, so the files are unrecorded and
            // go now (else each pass would leave another set). Any other failure may have
            // applied the batch: the files stay (start-up cleanup removes them if not).
            if e.is_out_of_space() {
                remove_files(&location, &written);
            }
            return Err(e.into());
        }
        drop(s);
        stop_at(MoverStage::Committed);
        outcome.files = written.len() as u64;
        outcome.buckets = picked.len() as u64;
        outcome.measurements = written.iter().map(|f| f.rows).sum();
        self.note_archive_run(buckets, now_ms);
        tracing::info!(ns = %buckets.namespace(), files = outcome.files, buckets = outcome.buckets, measurements = outcome.measurements, "archived buckets");
        Ok(outcome)
    }

    fn note_archive_run(&self, buckets: &Collection, now_ms: i64) {
        self.archive_runs
            .lock()
            .insert(buckets.id, DateTime::from_millis(now_ms));
    }

    /// When the mover last finished a pass over the collection (in this process).
    pub fn archive_last_run(&self, buckets: &Collection) -> Option<DateTime> {
        self.archive_runs.lock().get(&buckets.id).copied()
    }

    /// Deletes the files under the collection's folder of `uri` that no manifest entry
    /// names (left by a crash between a file's write and its commit). Run before the
    /// collection's first mover pass of a process; returns how many went.
    pub fn archive_cleanup(&self, buckets: &Arc<Collection>, uri: &str) -> Result<u64, StoreError> {
        let location = Location::open(uri)?;
        let listed = location.list(&collection_dir(buckets))?;
        let recorded: std::collections::HashSet<String> =
            manifest(&buckets.engine().snapshot(), buckets)?
                .into_iter()
                .filter(|f| f.uri == uri)
                .map(|f| f.path)
                .collect();
        let mut removed = 0;
        for (path, _) in listed {
            if !recorded.contains(&path) {
                location.delete(&path)?;
                tracing::info!(%uri, %path, "deleted an archive file no manifest entry names");
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The collection's archived files.
    pub fn archived_files(buckets: &Collection) -> Result<Vec<FileEntry>, StoreError> {
        manifest(&buckets.engine().snapshot(), buckets)
    }

    /// Files, bytes and measurements archived.
    pub fn archive_stats(buckets: &Collection) -> Result<ArchiveStats, StoreError> {
        let mut st = ArchiveStats::default();
        for f in Self::archived_files(buckets)? {
            st.files += 1;
            st.bytes += f.bytes;
            st.measurements += f.rows;
        }
        Ok(st)
    }

    /// Deletes the archived files whose every measurement is older than `cutoff_ms`
    /// (TTL): their manifest entries in one atomic batch, then the objects. Returns the
    /// files and measurements removed.
    pub fn expire_archived(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        cutoff_ms: i64,
    ) -> Result<(u64, u64), StoreError> {
        let series = self.series(buckets, options)?;
        let s = series.lock();
        let engine = buckets.engine().clone();
        let expired: Vec<FileEntry> = manifest(&engine.snapshot(), buckets)?
            .into_iter()
            .filter(|f| f.max_time_ms < cutoff_ms)
            .collect();
        if expired.is_empty() {
            return Ok((0, 0));
        }
        let mut batch = engine.batch();
        for f in &expired {
            batch.delete(buckets.tree(), &archived_key(&f.path));
        }
        engine.commit(batch)?;
        drop(s);
        delete_recorded(&expired);
        Ok((expired.len() as u64, expired.iter().map(|f| f.rows).sum()))
    }
}

/// Deletes the objects of files no longer (or never) recorded; failures are logged
/// (start-up cleanup catches what is left under a live rule).
pub fn delete_recorded(files: &[FileEntry]) {
    for f in files {
        let done = Location::open(&f.uri).and_then(|l| l.delete(&f.path));
        hourglass_archive::parquet_file::OpenedFile::forget(&f.uri, &f.path);
        if let Err(e) = done {
            tracing::warn!(uri = %f.uri, path = %f.path, error = %e, "deleting an archive file failed");
        }
    }
}

fn remove_files(location: &Location, files: &[FileEntry]) {
    for f in files {
        if let Err(e) = location.delete(&f.path) {
            tracing::warn!(path = %f.path, error = %e, "removing an unrecorded archive file failed");
        }
    }
}

/// Measurements one pass takes at most (they are held decoded while files are built).
const PASS_MEASUREMENTS: usize = 100_000;

/// Closed buckets whose largest time is before `cutoff`, oldest first, at most `max`
/// (and [`PASS_MEASUREMENTS`]); and whether more were eligible.
fn pick(buckets: &Collection, cutoff: i64, max: usize) -> Result<(Vec<Picked>, bool), StoreError> {
    let snap = buckets.engine().snapshot();
    let end = closed_time_key(cutoff.div_euclid(1000).saturating_add(1).max(1));
    let mut out = Vec::new();
    let mut measurements = 0;
    for entry in snap.range(buckets.tree(), &[CLOSED], Some(&end), false) {
        let (_, bytes) = entry?;
        let b = decode_compressed(&bytes)?;
        if b.max_time_ms.is_none_or(|t| t >= cutoff) {
            continue;
        }
        if out.len() == max || (measurements >= PASS_MEASUREMENTS && !out.is_empty()) {
            return Ok((out, true));
        }
        measurements += b.count;
        out.push(Picked {
            id: b.id,
            meta: b.meta().cloned(),
            min_time_ms: b.min_time_ms,
            bytes,
        });
    }
    Ok((out, false))
}

/// The picked buckets' measurements split into files: by UTC day, then partition values.
fn split(
    picked: &[Picked],
    options: &TimeseriesOptions,
    spec: &ArchiveSpec,
) -> Result<Vec<Part>, StoreError> {
    let mut parts: BTreeMap<(i64, Vec<u8>), Part> = BTreeMap::new();
    for p in picked {
        let b = decode_compressed(&p.bytes)?;
        let key = meta_key(b.meta());
        for m in b.unpack(None)? {
            let t = match m.get(&options.time_field) {
                Some(Bson::DateTime(t)) => t.timestamp_millis(),
                _ => return Err(super::corrupt("an archived measurement lacks its time")),
            };
            let mut partition = Document::new();
            for path in &spec.partition_by {
                partition.insert(
                    path.clone(),
                    get_path(&m, path).cloned().unwrap_or(Bson::Null),
                );
            }
            let mut pkey = Vec::new();
            partition
                .to_writer(&mut pkey)
                .map_err(|e| super::corrupt(e.to_string()))?;
            let part = parts.entry((t.div_euclid(DAY_MS), pkey)).or_default();
            part.partition = partition;
            part.rows.push((key.clone(), t, m));
        }
    }
    Ok(parts.into_values().collect())
}

/// Puts rows in the order a file holds them: by the meta's flattened leaves, the leaf
/// with the most distinct values first (then the others in name order), then by time.
/// A row group then spans few values of the most selective meta path (`tags.hostname`,
/// not `tags.arch`, which sorts first in the normalized meta) and its statistics rule
/// the others out; each series' rows stay together, in time order.
fn sort_rows(rows: &mut [(Vec<u8>, i64, Document)], options: &TimeseriesOptions) {
    let Some(mf) = options.meta_field.as_deref() else {
        rows.sort_by_key(|r| r.1);
        return;
    };
    let leaves = |d: &Document| {
        let mut out: Vec<(String, Bson)> = Vec::new();
        if let Some(meta) = d.get(mf) {
            let wrapped = bson::doc! {mf: meta.clone()};
            flatten(&wrapped, "", &mut |name, v| out.push((name, v.clone())));
        }
        out
    };
    let mut distinct: BTreeMap<String, std::collections::HashSet<String>> = BTreeMap::new();
    let mut keyed: Vec<Vec<(String, Bson)>> = Vec::with_capacity(rows.len());
    for r in rows.iter() {
        let l = leaves(&r.2);
        for (name, v) in &l {
            distinct
                .entry(name.clone())
                .or_default()
                .insert(v.to_string());
        }
        keyed.push(l);
    }
    let mut order: Vec<(&String, usize)> = distinct.iter().map(|(n, s)| (n, s.len())).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let names: Vec<&String> = order.into_iter().map(|(n, _)| n).collect();
    let mut index: Vec<usize> = (0..rows.len()).collect();
    let value =
        |row: usize, name: &String| keyed[row].iter().find(|(n, _)| n == name).map(|(_, v)| v);
    index.sort_by(|&a, &b| {
        for name in &names {
            let o = match (value(a, name), value(b, name)) {
                (Some(x), Some(y)) => compare_values(x, y),
                (x, y) => x.is_some().cmp(&y.is_some()),
            };
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        (&rows[a].0, rows[a].1).cmp(&(&rows[b].0, rows[b].1))
    });
    let mut sorted: Vec<(Vec<u8>, i64, Document)> = index
        .into_iter()
        .map(|i| std::mem::take(&mut rows[i]))
        .collect();
    rows.swap_with_slice(&mut sorted);
}

/// Writes one part as a Parquet file; returns its manifest entry.
fn write_part(
    location: &Location,
    uri: &str,
    dir: &str,
    options: &TimeseriesOptions,
    mut part: Part,
) -> Result<FileEntry, StoreError> {
    sort_rows(&mut part.rows, options);
    let min = part.rows.iter().map(|r| r.1).min().unwrap_or(0);
    let max = part.rows.iter().map(|r| r.1).max().unwrap_or(0);
    let docs: Vec<Document> = part.rows.into_iter().map(|r| r.2).collect();
    // The distinct metas, listed only when every row has one and there are few.
    let mut metas: Option<Vec<Bson>> = options.meta_field.as_ref().map(|_| Vec::new());
    let mut last_key: Option<Vec<u8>> = None;
    if let Some(mf) = &options.meta_field {
        for d in &docs {
            let meta = d.get(mf);
            let key = meta_key(meta);
            if last_key.as_ref() == Some(&key) {
                continue;
            }
            last_key = Some(key);
            match (meta, &mut metas) {
                (Some(m), Some(list)) if list.len() < MAX_METAS => {
                    if !list.contains(m) {
                        list.push(m.clone());
                    }
                }
                _ => metas = None,
            }
        }
    }
    let mut columns = Columns::new(Typing::Exact);
    docs.iter().for_each(|d| columns.learn(d));
    let mut first = vec![options.time_field.as_str()];
    first.extend(options.meta_field.as_deref());
    columns.put_first(&first);
    let batch = columns
        .batch(&docs)
        .map_err(hourglass_archive::ArchiveError::from)?;
    let bytes = parquet_file::encode(&batch)?;
    let nonce = ObjectId::new().to_hex();
    let path = format!(
        "{dir}/{}/part-{min}-{}.parquet",
        hive_part("date", &day_of(min)),
        &nonce[8..]
    );
    let size = bytes.len() as u64;
    location.put(&path, bytes)?;
    Ok(FileEntry {
        path,
        uri: uri.to_string(),
        min_time_ms: min,
        max_time_ms: max,
        rows: docs.len() as u64,
        bytes: size,
        partition: part.partition,
        metas,
        columns: columns.names().to_vec(),
        created: DateTime::now(),
    })
}
