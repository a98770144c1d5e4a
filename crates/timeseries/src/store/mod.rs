//! Persistence of one time-series collection's buckets in its `system.buckets.<coll>`
//! tree, and the bucket catalogs of all time-series collections. Key layout: `keys`.
//!
//! An insert appends one small delta per touched open bucket (never rewriting the
//! bucket) and, for every bucket it closes, writes the compressed bucket, its meta-index
//! entry and series-directory entry and deletes the bucket's deltas — all in atomic,
//! durable storage batches. On first use after a restart every open bucket left as
//! deltas is closed (as MongoDB closes all buckets on restart). Reads take the open
//! buckets from memory and the closed ones from one storage snapshot taken under the
//! same lock, so they see every committed measurement exactly once.

mod archive;
mod archive_read;
mod compressor;
mod counters;
mod geo;
mod indexes;
mod keys;
mod latest;
mod modify;
mod predicate;
mod scan;
mod validate;
mod view;

pub use archive::{archive_spec, delete_recorded, ArchiveStats, MoveOutcome, MoverStage};
pub use counters::ScanCounters;
pub use geo::fields_of_spec as geo_fields_of_spec;
pub use modify::{DeleteOutcome, TsUpdate};
pub(crate) use predicate::only_meta_paths;
pub use predicate::{conjuncts, BucketPredicate, TimeBounds};
pub use scan::BucketScan;
pub use validate::Validation;
pub use view::BucketView;

use crate::bucket::decode_compressed_owned;
use crate::bucket::Bucket;
use crate::bucket_catalog::{BucketCatalog, CatalogBudget, Limits, Reopening};
use crate::error::TsError;
use crate::meta::meta_key;
use crate::options::TimeseriesOptions;
use crate::stats::BucketStats;
use bson::oid::ObjectId;
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use hourglass_catalog::{CatalogError, Collection};
use hourglass_storage::{Batch, Snapshot, StorageError};
use keys::*;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Errors of the time-series store, each with MongoDB's code.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Ts(#[from] TsError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Query(#[from] hourglass_query::QueryError),
    #[error(transparent)]
    Archive(#[from] hourglass_archive::ArchiveError),
    /// Code 20 `IllegalOperation`: a write would change archived measurements.
    #[error("{0}")]
    ArchivedReadOnly(String),
}

impl StoreError {
    /// Whether the write failed for want of disk space.
    pub fn is_out_of_space(&self) -> bool {
        match self {
            StoreError::Storage(e) | StoreError::Catalog(CatalogError::Storage(e)) => {
                e.is_out_of_space()
            }
            _ => false,
        }
    }

    pub fn code(&self) -> i32 {
        match self {
            StoreError::Ts(e) => e.code(),
            StoreError::Catalog(e) => e.code(),
            StoreError::Storage(e) => e.code(),
            StoreError::Query(e) => e.code(),
            StoreError::Archive(e) => e.code(),
            StoreError::ArchivedReadOnly(_) => 20,
        }
    }
    pub fn code_name(&self) -> std::borrow::Cow<'static, str> {
        hourglass_errors::name(self.code())
    }
}

/// The options of a buckets collection, if it is one.
pub fn options_of(buckets: &Collection) -> Option<TimeseriesOptions> {
    let options = buckets.options();
    let spec = options.get_document("timeseries").ok()?;
    TimeseriesOptions::parse(spec).ok()
}

/// The series directory: meta key -> meta value.
pub(crate) type Directory = BTreeMap<Vec<u8>, Option<Bson>>;

/// Buckets taken out of the catalog to be stored, with their delta counts.
type Closing = Vec<(Arc<Bucket>, u32)>;

/// In-memory state of one time-series collection.
struct Series {
    buckets: Arc<Collection>,
    catalog: BucketCatalog,
    /// Next delta sequence number of each open bucket.
    next_seq: HashMap<ObjectId, u32>,
    /// Buckets taken out of the catalog whose compressed form is not applied to
    /// storage yet; reads take them from here.
    closing: HashMap<ObjectId, Arc<Bucket>>,
    /// Cached series directory (meta key -> meta), loaded on first use.
    directory: Option<Arc<Directory>>,
    /// The collection was dropped: closed buckets still queued are not stored.
    dropped: bool,
    /// Buckets reopened whose first delta is not written yet.
    reopened: std::collections::HashSet<ObjectId>,
}

impl Series {
    /// Records that `bucket` is closed (its series is in the directory from now on).
    fn note_closed(&mut self, bucket: &Bucket) {
        if let Some(dir) = &mut self.directory {
            let key = meta_key(bucket.meta.as_ref());
            if !dir.contains_key(&key) {
                Arc::make_mut(dir).insert(key, bucket.meta.clone());
            }
        }
    }

    /// Takes open buckets out of the catalog for a rewrite, with their delta counts.
    fn take_open(&mut self, ids: &[ObjectId]) -> Vec<(Bucket, u32)> {
        let mut out = Vec::new();
        for id in ids {
            let meta = match self.catalog.open_bucket(*id) {
                Some(b) => b.meta.clone(),
                None => continue,
            };
            if let Some(b) = self.catalog.clear_meta(meta.as_ref()) {
                let deltas = self.next_seq.remove(&b.id).unwrap_or(0);
                out.push((b, deltas));
            }
        }
        out
    }
}

/// Outcome of an insert into a time-series collection.
#[derive(Debug, Default)]
pub struct TsInsertOutcome {
    pub inserted: usize,
    pub errors: Vec<(usize, StoreError)>,
}

/// Bucket catalogs of every time-series collection, by buckets-collection id.
#[derive(Default)]
pub struct TimeseriesStore {
    series: Mutex<HashMap<u64, Arc<Mutex<Series>>>>,
    budget: Arc<CatalogBudget>,
    compressor: Arc<compressor::Compressor>,
    /// When the archive mover last finished a pass, by buckets-collection id.
    archive_runs: Mutex<HashMap<u64, bson::DateTime>>,
}

fn corrupt(msg: impl Into<String>) -> StoreError {
    StoreError::Catalog(CatalogError::Corrupt(msg.into()))
}

/// Rebuilds the open buckets left as deltas in `snap`, in `_id` order, with the number
/// of deltas each has.
fn open_buckets_in(
    snap: &Snapshot,
    buckets: &Collection,
    options: &TimeseriesOptions,
) -> Result<Vec<(Bucket, u32)>, StoreError> {
    let mut out: Vec<(Bucket, u32)> = Vec::new();
    for entry in snap.scan_prefix(buckets.tree(), &[DELTA]) {
        let (k, v) = entry?;
        let id = object_id_at(&k).ok_or_else(|| corrupt("short delta key"))?;
        let mut docs = split_documents(&v);
        let header = docs.next().ok_or_else(|| corrupt("empty delta"))??;
        if out.last().map(|(b, _)| b.id) != Some(id) {
            let min = header
                .get_i64("min")
                .map_err(|_| corrupt("first delta of a bucket lacks its min time"))?;
            let stored = match header.get_bool("reopened") {
                Ok(true) => snap.get(buckets.tree(), &bucket_key(CLOSED, &id))?,
                _ => None,
            };
            let bucket = match stored {
                Some(bytes) => decode_compressed_owned(bytes)?.to_bucket()?,
                None => Bucket::with_id(options, id, header.get("meta").cloned(), min),
            };
            out.push((bucket, 0));
        }
        let Some((bucket, n)) = out.last_mut() else {
            continue;
        };
        for m in docs {
            bucket.add(m?);
        }
        *n += 1;
    }
    Ok(out)
}

/// The series directory as stored: meta key -> meta value.
fn load_directory(snap: &Snapshot, buckets: &Collection) -> Result<Directory, StoreError> {
    let mut dir = BTreeMap::new();
    for entry in snap.scan_prefix(buckets.tree(), &[SERIES]) {
        let (k, v) = entry?;
        let d = Document::from_reader(v.as_slice()).map_err(|e| corrupt(e.to_string()))?;
        dir.insert(k[1..].to_vec(), d.get("").cloned());
    }
    Ok(dir)
}

/// The BSON documents stored back to back in `bytes` (a delta record).
pub(crate) fn split_documents(
    bytes: &[u8],
) -> impl Iterator<Item = Result<Document, StoreError>> + '_ {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = rest
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_le_bytes)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n >= 5 && n <= rest.len());
        let Some(len) = len else {
            rest = &[];
            return Some(Err(corrupt("bad document length in a delta")));
        };
        let (doc, tail) = rest.split_at(len);
        rest = tail;
        Some(bson::from_slice(doc).map_err(|e| corrupt(e.to_string())))
    })
}

/// A delta record: a header document (`{min, meta, reopened?}` for a bucket's first
/// delta, else empty) followed by the new measurements (`rows`: BSON documents back to
/// back). `reopened: true` says the bucket is also stored closed, with the measurements
/// it had when it was reopened: a restart rebuilds it from that and its deltas.
fn encode_delta(
    bucket: &Bucket,
    first: bool,
    reopened: bool,
    rows: &[u8],
) -> Result<Vec<u8>, StoreError> {
    let mut header = Document::new();
    if first {
        header.insert("min", bucket.min_time_ms);
        if let Some(meta) = &bucket.meta {
            header.insert("meta", meta.clone());
        }
        if reopened {
            header.insert("reopened", true);
        }
    }
    let mut out = Vec::with_capacity(64 + rows.len());
    header
        .to_writer(&mut out)
        .map_err(|e| corrupt(e.to_string()))?;
    out.extend_from_slice(rows);
    Ok(out)
}

/// A closed bucket of series `key` whose span holds time `t`, to reopen: the newest one
/// starting within a span before `t` that is not in memory already.
fn reopen_candidate(
    snap: &Snapshot,
    buckets: &Collection,
    closing: &HashMap<ObjectId, Arc<Bucket>>,
    key: &[u8],
    t: i64,
    span: i64,
) -> Reopening {
    let lo = t.saturating_sub(span).saturating_add(1);
    let (start, end) = meta_index_range(key, lo, t);
    let found = (|| -> Result<Option<Bucket>, StoreError> {
        for entry in snap.range(buckets.tree(), &start, Some(&end), true) {
            let (k, _) = entry?;
            let Some(id) = meta_index_id(&k) else {
                continue;
            };
            if closing.contains_key(&id) {
                continue;
            }
            let Some(bytes) = snap.get(buckets.tree(), &bucket_key(CLOSED, &id))? else {
                continue;
            };
            return Ok(Some(decode_compressed_owned(bytes)?.to_bucket()?));
        }
        Ok(None)
    })();
    match found {
        Ok(Some(b)) => Reopening::Found(Box::new(b)),
        Ok(None) => Reopening::None,
        Err(e) => {
            tracing::warn!(ns = %buckets.namespace(), error = %e, "looking for a bucket to reopen failed");
            Reopening::Failed
        }
    }
}

/// Measurements given as documents, in the raw form inserts take.
pub fn raw_measurements(docs: &[Document]) -> Result<Vec<RawDocumentBuf>, StoreError> {
    docs.iter()
        .map(|d| {
            RawDocumentBuf::from_document(d)
                .map_err(|e| StoreError::Ts(TsError::BadValue(e.to_string())))
        })
        .collect()
}

/// Stages the writes that close `bucket`: its compressed form, meta-index and
/// series-directory entries in, its deltas out.
fn stage_close(batch: &mut Batch, buckets: &Collection, bucket: &Bucket, deltas: u32) {
    stage_store(batch, buckets, bucket);
    for seq in 0..deltas {
        batch.delete(buckets.tree(), &delta_key(&bucket.id, seq));
    }
}

/// Stages `bucket` as a closed bucket (new, or replacing one with the same id, meta
/// and minimum time).
fn stage_store(batch: &mut Batch, buckets: &Collection, bucket: &Bucket) {
    let tree = buckets.tree();
    batch.put(
        tree,
        &bucket_key(CLOSED, &bucket.id),
        &bucket.encode_compressed(),
    );
    let mk = meta_key(bucket.meta.as_ref());
    batch.put(
        tree,
        &meta_index_key(&mk, bucket.min_time_ms, &bucket.id),
        &[],
    );
    batch.put(tree, &series_key(&mk), &series_value(bucket.meta.as_ref()));
}

/// Stages the removal of a closed bucket.
fn stage_remove(
    batch: &mut Batch,
    buckets: &Collection,
    id: &ObjectId,
    meta: Option<&Bson>,
    min_time_ms: i64,
) {
    let tree = buckets.tree();
    batch.delete(tree, &bucket_key(CLOSED, id));
    batch.delete(tree, &meta_index_key(&meta_key(meta), min_time_ms, id));
}

fn series_value(meta: Option<&Bson>) -> Vec<u8> {
    let mut d = Document::new();
    if let Some(m) = meta {
        d.insert("", m.clone());
    }
    let mut out = Vec::new();
    // An in-memory document with an empty key always serializes.
    let _ = d.to_writer(&mut out);
    out
}

impl TimeseriesStore {
    /// Sets the bucket limits of every collection's catalog, open ones included.
    pub fn set_limits(&self, limits: Limits) {
        self.budget.set_limits(limits);
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.budget.limits()
    }

    /// The state of `buckets`, loading it (and closing buckets left open by a previous
    /// run) on first use.
    fn series(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
    ) -> Result<Arc<Mutex<Series>>, StoreError> {
        let mut all = self.series.lock();
        if let Some(s) = all.get(&buckets.id) {
            return Ok(s.clone());
        }
        let engine = buckets.engine();
        let leftovers = open_buckets_in(&engine.snapshot(), buckets, options)?;
        if !leftovers.is_empty() {
            let mut batch = engine.batch();
            for (bucket, deltas) in &leftovers {
                stage_close(&mut batch, buckets, bucket, *deltas);
            }
            engine.commit(batch)?;
            tracing::info!(ns = %buckets.namespace(), count = leftovers.len(), "closed buckets left open by the previous run");
        }
        let series = Arc::new(Mutex::new(Series {
            buckets: buckets.clone(),
            catalog: BucketCatalog::new(options.clone(), self.budget.clone()),
            next_seq: HashMap::new(),
            closing: HashMap::new(),
            directory: None,
            dropped: false,
            reopened: Default::default(),
        }));
        all.insert(buckets.id, series.clone());
        Ok(series)
    }

    /// Closes every open bucket of every collection (clean shutdown): compressed
    /// buckets in, deltas out.
    pub fn close_all(&self) -> Result<(), StoreError> {
        self.compressor.drain();
        let all: Vec<Arc<Mutex<Series>>> = self.series.lock().values().cloned().collect();
        for series in all {
            let mut s = series.lock();
            let closed = s.catalog.close_all();
            Self::commit_closed(&mut s, closed)?;
        }
        Ok(())
    }

    /// Writes buckets just taken out of the catalog (under the series lock).
    fn commit_closed(s: &mut Series, closed: Vec<Bucket>) -> Result<(), StoreError> {
        let engine = s.buckets.engine().clone();
        let mut batch = engine.batch();
        for bucket in &closed {
            let deltas = s.next_seq.remove(&bucket.id).unwrap_or(0);
            stage_close(&mut batch, &s.buckets, bucket, deltas);
            s.note_closed(bucket);
        }
        engine.commit(batch)?;
        Ok(())
    }

    /// Switches a collection to new options (collMod): its open buckets are closed, new
    /// buckets follow the new options; closed buckets keep theirs.
    pub fn set_options(
        &self,
        buckets: &Collection,
        options: &TimeseriesOptions,
    ) -> Result<(), StoreError> {
        let Some(series) = self.series.lock().get(&buckets.id).cloned() else {
            return Ok(());
        };
        let mut s = series.lock();
        let closed = s.catalog.set_options(options.clone());
        Self::commit_closed(&mut s, closed)
    }

    /// Forgets the state of a dropped buckets collection.
    pub fn forget(&self, buckets: &Collection) {
        if let Some(series) = self.series.lock().remove(&buckets.id) {
            series.lock().dropped = true;
        }
    }

    /// Inserts measurements: one atomic, durable batch of deltas and closed buckets.
    pub fn insert(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        measurements: Vec<&RawDocument>,
        ordered: bool,
    ) -> Result<TsInsertOutcome, StoreError> {
        let series = self.series(buckets, options)?;
        let engine = buckets.engine();
        let (measurements, positions, refused) =
            Self::refuse_bad_geometry(buckets, options, measurements, ordered)?;
        // Refused before the catalog takes any measurement, so a full disk leaves nothing
        // of the insert visible.
        let bytes: usize = measurements.iter().map(|m| m.as_bytes().len()).sum();
        engine.check_space(bytes as u64)?;
        let mut s = series.lock();
        let mut batch = engine.batch();
        let (out, closing) = Self::stage_insert(&mut s, &mut batch, &measurements, ordered)?;
        let appended = engine.apply(batch);
        drop(s);
        let appended = appended?;
        // The closed buckets are compressed and stored off the request path: their deltas
        // are durable, and reads find them in `closing` until they are stored.
        self.compressor.submit(&series, closing);
        if engine.wait_durable_shared(appended)? && out.inserted > 0 {
            // Another insert's sync made these measurements durable: group commit.
            series
                .lock()
                .catalog
                .stats_mut()
                .record_group_commit_wait(out.inserted);
        }
        self.expire_idle_elsewhere(buckets.id);
        Ok(Self::with_refused(out, positions, refused, ordered))
    }

    /// [`TimeseriesStore::insert`] of measurements given as documents.
    #[cfg(test)]
    pub(crate) fn insert_docs(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        measurements: Vec<Document>,
        ordered: bool,
    ) -> Result<TsInsertOutcome, StoreError> {
        let raw = raw_measurements(&measurements)?;
        self.insert(
            buckets,
            options,
            raw.iter().map(|r| &**r).collect(),
            ordered,
        )
    }

    /// Takes out the measurements the collection's 2dsphere indexes cannot hold (with an
    /// ordered insert, those from the first one on); returns the kept ones, their
    /// positions in the input, and the refusals.
    #[allow(clippy::type_complexity)]
    fn refuse_bad_geometry<'a>(
        buckets: &Collection,
        options: &TimeseriesOptions,
        measurements: Vec<&'a RawDocument>,
        ordered: bool,
    ) -> Result<
        (
            Vec<&'a RawDocument>,
            Option<Vec<usize>>,
            Vec<(usize, StoreError)>,
        ),
        StoreError,
    > {
        let fields = Self::geo_fields(buckets, options)?;
        if fields.is_empty() {
            return Ok((measurements, None, Vec::new()));
        }
        let mut kept = Vec::with_capacity(measurements.len());
        let mut positions = Vec::with_capacity(measurements.len());
        let mut refused = Vec::new();
        for (i, m) in measurements.into_iter().enumerate() {
            let checked = bson::from_slice::<Document>(m.as_bytes())
                .map_err(|e| StoreError::Ts(TsError::BadValue(e.to_string())))
                .and_then(|d| geo::check(&d, &fields));
            match checked {
                Ok(()) => {
                    kept.push(m);
                    positions.push(i);
                }
                Err(e) => {
                    refused.push((i, e));
                    if ordered {
                        break;
                    }
                }
            }
        }
        Ok((kept, Some(positions), refused))
    }

    /// The outcome over the whole input: errors renumbered to input positions, with the
    /// geometry refusals (an ordered insert reports only its first error).
    fn with_refused(
        mut out: TsInsertOutcome,
        positions: Option<Vec<usize>>,
        refused: Vec<(usize, StoreError)>,
        ordered: bool,
    ) -> TsInsertOutcome {
        let Some(positions) = positions else {
            return out;
        };
        for (i, _) in &mut out.errors {
            *i = positions.get(*i).copied().unwrap_or(*i);
        }
        if !ordered || out.errors.is_empty() {
            out.errors.extend(refused);
        }
        out.errors.sort_by_key(|(i, _)| *i);
        out
    }

    /// While the open buckets of all collections exceed the memory threshold, closes the
    /// least recently used buckets of the *other* collections (the inserting one closed
    /// its own already): one threshold for the whole server, as MongoDB's. A collection
    /// busy with its own insert is skipped (never waited for).
    fn expire_idle_elsewhere(&self, this: u64) {
        if !self.budget.over_threshold() {
            return;
        }
        let others: Vec<Arc<Mutex<Series>>> = self
            .series
            .lock()
            .iter()
            .filter(|(id, _)| **id != this)
            .map(|(_, s)| s.clone())
            .collect();
        for series in others {
            if !self.budget.over_threshold() {
                return;
            }
            let Some(mut s) = series.try_lock() else {
                continue;
            };
            let closed = s.catalog.expire_idle();
            if closed.is_empty() {
                continue;
            }
            if let Err(e) = Self::commit_closed(&mut s, closed) {
                tracing::warn!(ns = %s.buckets.namespace(), error = %e, "closing idle buckets failed; they stay as deltas until the next start");
            }
        }
    }

    /// Stages an insert under the series lock: deltas for the open buckets it appends
    /// to go into `batch`; the buckets it closes are returned (and listed in
    /// `closing`) for the caller to store.
    fn stage_insert(
        s: &mut Series,
        batch: &mut Batch,
        measurements: &[&RawDocument],
        ordered: bool,
    ) -> Result<(TsInsertOutcome, Closing), StoreError> {
        // Only series with a closed bucket (the series directory) are queried: a new
        // series has nothing to reopen.
        let known = match &s.directory {
            Some(d) => d.clone(),
            None => {
                let engine = s.buckets.engine().clone();
                let buckets = s.buckets.clone();
                scan::directory(s, &engine.snapshot(), &buckets)?
            }
        };
        let Series {
            buckets,
            catalog,
            closing,
            ..
        } = &mut *s;
        let span = catalog.options().max_span_millis();
        // One snapshot for the insert's reopening queries, taken at the first one.
        let mut snap = None;
        let mut reopen = |key: &[u8], t: i64| {
            if !known.contains_key(key) {
                return Reopening::None;
            }
            let snap = snap.get_or_insert_with(|| buckets.engine().snapshot());
            reopen_candidate(snap, buckets, closing, key, t, span)
        };
        let out = catalog.insert(measurements, ordered, &mut reopen);
        s.reopened.extend(out.reopened.iter().copied());
        // Every measurement goes into a delta, also those of buckets this insert closes:
        // the insert is acknowledged once its deltas are durable, before the closed
        // buckets are compressed and stored.
        let tree = s.buckets.tree().clone();
        let closed: HashMap<ObjectId, &Bucket> = out.closed.iter().map(|b| (b.id, b)).collect();
        for (id, rows) in &out.deltas {
            let Some(bucket) = s
                .catalog
                .open_bucket(*id)
                .or_else(|| closed.get(id).copied())
            else {
                continue;
            };
            let seq = s.next_seq.get(id).copied().unwrap_or(0);
            let reopened = seq == 0 && s.reopened.remove(id);
            let bytes = encode_delta(bucket, seq == 0, reopened, rows)?;
            batch.put(&tree, &delta_key(id, seq), &bytes);
            s.next_seq.insert(*id, seq + 1);
        }
        drop(closed);
        let mut closing = Vec::with_capacity(out.closed.len());
        for b in out.closed {
            s.reopened.remove(&b.id);
            let deltas = s.next_seq.remove(&b.id).unwrap_or(0);
            s.note_closed(&b);
            let b = Arc::new(b);
            s.closing.insert(b.id, b.clone());
            closing.push((b, deltas));
        }
        Ok((
            TsInsertOutcome {
                inserted: out.inserted,
                errors: out
                    .errors
                    .into_iter()
                    .map(|(i, e)| (i, StoreError::Ts(e)))
                    .collect(),
            },
            closing,
        ))
    }

    /// The catalog counters of a time-series collection (zero before first use).
    pub fn stats(&self, buckets: &Collection) -> BucketStats {
        match self.series.lock().get(&buckets.id) {
            Some(s) => s.lock().catalog.stats().clone(),
            None => BucketStats::default(),
        }
    }

    /// Open buckets, idle buckets and their memory, over every collection (serverStatus).
    pub fn catalog_summary(&self) -> CatalogSummary {
        let all: Vec<Arc<Mutex<Series>>> = self.series.lock().values().cloned().collect();
        let mut out = CatalogSummary::default();
        for series in all {
            let s = series.lock();
            let open = s.catalog.open_buckets().count() as u64;
            out.open_buckets += open;
            out.memory_usage += s.catalog.memory_usage() as u64;
            out.collections += 1;
            let ns = s.buckets.namespace();
            let coll = ns.coll.strip_prefix("system.buckets.").unwrap_or(&ns.coll);
            let view = format!("{}.{coll}", ns.db);
            out.stats.push((view, s.catalog.stats().clone()));
        }
        out
    }

    /// Number of buckets (closed and open) and their bytes as stored.
    pub fn bucket_summary(buckets: &Collection) -> Result<(u64, u64), StoreError> {
        let snap = buckets.engine().snapshot();
        let (mut count, mut bytes) = (0u64, 0u64);
        for entry in snap.scan_prefix(buckets.tree(), &[CLOSED]) {
            let (_, v) = entry?;
            count += 1;
            bytes += v.len() as u64;
        }
        let mut last = None;
        for entry in snap.scan_prefix(buckets.tree(), &[DELTA]) {
            let (k, v) = entry?;
            let id = object_id_at(&k);
            if id != last {
                count += 1;
                last = id;
            }
            bytes += v.len() as u64;
        }
        Ok((count, bytes))
    }

    /// Every bucket as MongoDB's bucket document (closed ones in `_id` order, then
    /// open ones), as a read of `system.buckets.<coll>` returns them.
    pub fn bucket_documents(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
    ) -> Result<Vec<Document>, StoreError> {
        let scan = self.scan(buckets, options, &BucketPredicate::all())?;
        let mut out = Vec::new();
        for view in scan {
            out.push(match view? {
                BucketView::Stored(b) => b.to_document()?,
                BucketView::Open(b) => b.to_document(false),
                // Archived rows are no longer buckets.
                BucketView::Archived(_) => continue,
            });
        }
        Ok(out)
    }

    /// Every measurement of the buckets `filter` may match, unpacked one bucket at a
    /// time (memory stays bounded by one bucket). The caller still applies the filter
    /// to each measurement.
    pub fn measurements(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        predicate: &BucketPredicate,
        fields: Option<Vec<String>>,
    ) -> Result<MeasurementStream, StoreError> {
        let scan = self.scan(buckets, options, predicate)?;
        let options = options.clone();
        Ok(Box::new(scan.flat_map(
            move |view| -> Vec<Result<Document, StoreError>> {
                let wanted: Option<Vec<&str>> = fields
                    .as_ref()
                    .map(|f| f.iter().map(String::as_str).collect());
                match view.and_then(|v| Ok(v.unpack(&options, wanted.as_deref())?)) {
                    Ok(docs) => docs.into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                }
            },
        )))
    }
}

/// Totals over every collection's bucket catalog.
#[derive(Debug, Default, Clone)]
pub struct CatalogSummary {
    pub collections: u64,
    pub open_buckets: u64,
    pub memory_usage: u64,
    /// Each collection's counters, by the namespace of its view (`db.coll`).
    pub stats: Vec<(String, BucketStats)>,
}

/// Measurements streamed from a time-series collection.
pub type MeasurementStream = Box<dyn Iterator<Item = Result<Document, StoreError>> + Send>;

/// A catalog in `dir` with one time-series buckets collection (tests).
#[cfg(test)]
pub(crate) fn test_collection(
    dir: &std::path::Path,
    time_field: &str,
    meta_field: &str,
) -> (
    hourglass_catalog::Catalog,
    Arc<Collection>,
    TimeseriesOptions,
) {
    let cat =
        hourglass_catalog::Catalog::open(hourglass_storage::Engine::open(dir).unwrap()).unwrap();
    let opts =
        TimeseriesOptions::parse(&bson::doc! {"timeField": time_field, "metaField": meta_field})
            .unwrap();
    let (c, _) = cat
        .create(
            "db",
            "system.buckets.m",
            bson::doc! {"timeseries": opts.to_document()},
        )
        .unwrap();
    (cat, c, opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use hourglass_catalog::Catalog;
    use hourglass_storage::Engine;

    fn measurement(i: i64, host: &str) -> Document {
        doc! {"t": bson::DateTime::from_millis(1_700_000_000_000 + i * 1000), "host": host, "v": i as f64 / 4.0}
    }

    fn collect(s: Result<MeasurementStream, StoreError>) -> Vec<Document> {
        s.unwrap().collect::<Result<_, _>>().unwrap()
    }

    fn open(dir: &std::path::Path) -> (Catalog, Arc<Collection>, TimeseriesOptions) {
        test_collection(dir, "t", "host")
    }

    #[test]
    fn insert_persists_deltas_and_closes_full_buckets() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, opts) = open(dir.path());
        let store = TimeseriesStore::default();
        let docs: Vec<Document> = (0..2500).map(|i| measurement(i, "a")).collect();
        let out = store.insert_docs(&c, &opts, docs, true).unwrap();
        assert_eq!(out.inserted, 2500);
        assert_eq!(store.stats(&c).num_buckets_closed_due_to_count, 2);
        let buckets = store.bucket_documents(&c, &opts).unwrap();
        assert_eq!(buckets.len(), 3);
        let ms = collect(store.measurements(&c, &opts, &BucketPredicate::all(), None));
        assert_eq!(ms.len(), 2500);
        // Times 0..2500 s after T0; bounds on the first 100 s keep only the first bucket.
        let lo = 1_700_000_000_000;
        let f = doc! {"t": {"$gte": bson::DateTime::from_millis(lo), "$lt": bson::DateTime::from_millis(lo + 100_000)}};
        let pruned = collect(store.measurements(
            &c,
            &opts,
            &BucketPredicate::from_filter(&f, &opts).unwrap(),
            None,
        ));
        assert_eq!(pruned.len(), 1000, "only the first bucket is decoded");
        assert_eq!(ms[0].get_str("host").unwrap(), "a");
    }

    #[test]
    fn delta_records_round_trip_and_reject_bad_lengths() {
        let opts = TimeseriesOptions::parse(&doc! {"timeField": "t", "metaField": "m"}).unwrap();
        let b = Bucket::new(&opts, Some(Bson::Int32(1)), 0);
        let ms = vec![
            doc! {"t": bson::DateTime::from_millis(1), "v": 1},
            doc! {"t": bson::DateTime::from_millis(2)},
        ];
        let rows: Vec<u8> = raw_measurements(&ms)
            .unwrap()
            .iter()
            .flat_map(|r| r.as_bytes().to_vec())
            .collect();
        let bytes = encode_delta(&b, true, false, &rows).unwrap();
        let docs: Vec<Document> = split_documents(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[0].get_i64("min").unwrap(), 0);
        assert_eq!(&docs[1..], &ms[..]);
        assert!(split_documents(&bytes[..bytes.len() - 1]).any(|r| r.is_err()));
        assert!(split_documents(&[9, 0, 0]).any(|r| r.is_err()));
    }

    #[test]
    fn restart_closes_open_buckets_without_losing_measurements() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (_cat, c, opts) = open(dir.path());
            let store = TimeseriesStore::default();
            for i in 0..10 {
                store
                    .insert_docs(
                        &c,
                        &opts,
                        vec![measurement(i, "a"), measurement(i, "b")],
                        true,
                    )
                    .unwrap();
            }
        }
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        let c = cat.get("db", "system.buckets.m").unwrap();
        let opts = options_of(&c).unwrap();
        let store = TimeseriesStore::default();
        store
            .insert_docs(&c, &opts, vec![measurement(100, "a")], true)
            .unwrap();
        let buckets = store.bucket_documents(&c, &opts).unwrap();
        assert_eq!(
            buckets.len(),
            2,
            "two closed at restart, one of them reopened for the same hour"
        );
        assert_eq!(store.stats(&c).num_buckets_reopened, 1);
        assert_eq!(
            collect(store.measurements(&c, &opts, &BucketPredicate::all(), None)).len(),
            21
        );
        // A crash now: the reopened bucket is stored with its 10 measurements and its
        // delta holds the 11th; the next start rebuilds it from both.
        drop((store, c, cat));
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        let c = cat.get("db", "system.buckets.m").unwrap();
        let store = TimeseriesStore::default();
        assert_eq!(
            collect(store.measurements(&c, &opts, &BucketPredicate::all(), None)).len(),
            21,
            "a reopened bucket survives a crash with its stored and new measurements"
        );
        assert_eq!(store.bucket_documents(&c, &opts).unwrap().len(), 2);
    }
}

#[cfg(test)]
mod archive_test;
