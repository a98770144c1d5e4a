//! Persistence of one time-series collection's buckets in its `system.buckets.<coll>`
//! tree, and the bucket catalogs of all time-series collections. Key layout: `keys`.
//!
//! An insert appends one insert-log record holding the new measurements of every open
//! bucket it touched (never rewriting a bucket); every bucket closed is then written
//! compressed, with its meta-index and series-directory entries and its stored mark, and
//! log records no open bucket needs are deleted — all in atomic, durable storage batches.
//! On first use after a restart every open bucket left in the log is closed (as MongoDB
//! closes all buckets on restart). Reads take the open
//! buckets from memory and the closed ones from one storage snapshot taken under the
//! same lock, so they see every committed measurement exactly once.

mod archive;
mod archive_read;
mod bucket_writes;
mod compressor;
mod counters;
mod geo;
mod indexes;
mod insert_log;
mod keys;
mod latest;
mod modify;
mod predicate;
mod restore;
mod scan;
mod validate;
mod view;

pub use archive::{archive_spec, delete_recorded, ArchiveStats, MoveOutcome, MoverStage};
pub use counters::ScanCounters;
pub use geo::fields_of_spec as geo_fields_of_spec;
pub use modify::{DeleteOutcome, TsUpdate};
pub(crate) use predicate::only_meta_paths;
pub use predicate::{bucket_point_box, conjuncts, BucketPredicate, TimeBounds};
pub use scan::{BucketScan, ScanOrder, Scanned, StopAt};
pub use validate::Validation;
pub use view::BucketView;

use crate::bucket::decode_compressed_owned;
use crate::bucket::Bucket;
use crate::bucket_catalog::{BucketCatalog, CatalogBudget, Limits, Reopening};
use crate::error::TsError;
use crate::measurement::MeasurementBatch;
use crate::meta::meta_key;
use crate::options::TimeseriesOptions;
use crate::stats::BucketStats;
use bson::oid::ObjectId;
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use hourglass_catalog::{CatalogError, Collection};
use hourglass_storage::{Batch, Snapshot, StorageError};
use insert_log::{InsertLog, Retired, StoredMarks};
use keys::*;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, HashSet};
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
    /// Code 121 `DocumentValidationFailure`: a bucket document inserted directly is not a
    /// valid bucket.
    #[error("{0}")]
    InvalidBucket(String),
    /// Code 238 `NotImplemented`.
    #[error("{0}")]
    NotImplemented(String),
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
            StoreError::InvalidBucket(_) => 121,
            StoreError::NotImplemented(_) => 238,
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

/// Buckets taken out of the catalog to be stored, with their insert-log records.
type Closing = Vec<(Arc<Bucket>, Vec<u64>)>;

/// In-memory state of one time-series collection.
struct Series {
    buckets: Arc<Collection>,
    catalog: BucketCatalog,
    /// The insert log's bookkeeping: which records hold which open buckets' entries.
    log: InsertLog,
    /// Buckets taken out of the catalog whose compressed form is not applied to
    /// storage yet; reads take them from here.
    closing: HashMap<ObjectId, Arc<Bucket>>,
    /// Cached series directory (meta key -> meta), loaded on first use.
    directory: Option<Arc<Directory>>,
    /// The collection was dropped: closed buckets still queued are not stored.
    dropped: bool,
    /// Buckets reopened whose first log entry is not written yet.
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

    /// Takes open buckets out of the catalog for a rewrite, with their log records.
    fn take_open(&mut self, ids: &[ObjectId]) -> Vec<(Bucket, Vec<u64>)> {
        let mut out = Vec::new();
        for id in ids {
            let meta = match self.catalog.open_bucket(*id) {
                Some(b) => b.meta.clone(),
                None => continue,
            };
            if let Some(b) = self.catalog.clear_meta(meta.as_ref()) {
                let seqs = self.log.retire(&b.id);
                out.push((b, seqs));
            }
        }
        out
    }

    /// Commits a batch that stores or removes the `retired` buckets, then releases their
    /// log records; records and marks nothing needs any more go with the next batch.
    fn commit_retiring(
        &mut self,
        mut batch: Batch,
        retired: Vec<Retired>,
    ) -> Result<(), StoreError> {
        let engine = self.buckets.engine().clone();
        self.log.stage_garbage(&mut batch, self.buckets.tree());
        engine.commit(batch)?;
        self.log.garbage_applied();
        for r in retired {
            self.log.release(r);
        }
        Ok(())
    }

    /// Deletes the log records and marks no longer needed now rather than with the next
    /// batch (closing everything: nothing else may come).
    fn collect_garbage(&mut self) -> Result<(), StoreError> {
        if !self.log.has_garbage() {
            return Ok(());
        }
        let engine = self.buckets.engine().clone();
        self.commit_retiring(engine.batch(), Vec::new())
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

/// The open buckets stored in a snapshot (in the insert log, or as legacy deltas), and
/// every log record, stored mark and delta key holding them.
#[derive(Default)]
struct Leftovers {
    buckets: Vec<Bucket>,
    keys: Vec<Vec<u8>>,
    /// Position of each bucket in `buckets`.
    index: HashMap<ObjectId, usize>,
}

impl Leftovers {
    /// The bucket with id `id`, rebuilt first from `header` (and its stored form when it
    /// was reopened) if not seen yet.
    fn bucket(
        &mut self,
        ctx: (&Snapshot, &Collection, &TimeseriesOptions),
        id: ObjectId,
        header: Option<(i64, Option<Bson>)>,
        reopened: bool,
    ) -> Result<&mut Bucket, StoreError> {
        let i = match self.index.get(&id) {
            Some(&i) => i,
            None => {
                let (snap, buckets, options) = ctx;
                let (min, meta) = header
                    .ok_or_else(|| corrupt("the first entry of an open bucket lacks its header"))?;
                let stored = match reopened {
                    true => snap.get(buckets.tree(), &bucket_key(CLOSED, &id))?,
                    false => None,
                };
                let bucket = match stored {
                    Some(bytes) => decode_compressed_owned(bytes)?.to_bucket()?,
                    None => Bucket::with_id(options, id, meta, min),
                };
                self.buckets.push(bucket);
                self.index.insert(id, self.buckets.len() - 1);
                self.buckets.len() - 1
            }
        };
        Ok(&mut self.buckets[i])
    }
}

/// Rebuilds the open buckets left in `snap`: from the insert log, skipping the entries a
/// bucket's stored mark covers, and from legacy delta records.
fn open_buckets_in(
    snap: &Snapshot,
    buckets: &Collection,
    options: &TimeseriesOptions,
) -> Result<Leftovers, StoreError> {
    let mut out = Leftovers::default();
    let ctx = (snap, buckets, options);
    let tree = buckets.tree();
    let marks = StoredMarks::read(snap, tree)?;
    out.keys.extend(marks.keys());
    for entry in snap.scan_prefix(tree, &[LOG]) {
        let (k, v) = entry?;
        let seq = log_seq(&k).ok_or_else(|| corrupt("short insert-log key"))?;
        for e in insert_log::entries(&v) {
            let e = e?;
            if marks.covers(&e.id, seq) {
                continue;
            }
            let bucket = out.bucket(ctx, e.id, e.header, e.reopened)?;
            for m in split_documents(e.rows) {
                bucket.add(m?);
            }
        }
        out.keys.push(k);
    }
    for entry in snap.scan_prefix(tree, &[DELTA]) {
        let (k, v) = entry?;
        let id = object_id_at(&k).ok_or_else(|| corrupt("short delta key"))?;
        let mut docs = split_documents(&v);
        let header = docs.next().ok_or_else(|| corrupt("empty delta"))??;
        let first = match header.get_i64("min") {
            Ok(min) => Some((min, header.get("meta").cloned())),
            Err(_) => None,
        };
        let reopened = header.get_bool("reopened").unwrap_or(false);
        let bucket = out.bucket(ctx, id, first, reopened)?;
        for m in docs {
            bucket.add(m?);
        }
        out.keys.push(k);
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

/// The BSON documents stored back to back in `bytes` (an insert-log entry's rows).
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

/// A closed bucket of series `key` whose span holds time `t`, to reopen: the newest one
/// starting within a span before `t` that is not in memory already.
fn reopen_candidate(
    snap: &Snapshot,
    buckets: &Collection,
    closing: &HashMap<ObjectId, Arc<Bucket>>,
    rewritten: &HashSet<ObjectId>,
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
            if closing.contains_key(&id) || rewritten.contains(&id) {
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
/// series-directory entries, and its stored mark over its log records `seqs`.
fn stage_close(batch: &mut Batch, buckets: &Collection, bucket: &Bucket, seqs: &[u64]) {
    stage_store(batch, buckets, bucket);
    insert_log::stage_retire(batch, buckets.tree(), &bucket.id, seqs);
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
        if !leftovers.keys.is_empty() {
            // One batch: the buckets stored, every log record, mark and delta gone, so the
            // log starts again from sequence 0.
            let mut batch = engine.batch();
            for bucket in &leftovers.buckets {
                stage_store(&mut batch, buckets, bucket);
            }
            for k in &leftovers.keys {
                batch.delete(buckets.tree(), k);
            }
            engine.commit(batch)?;
            tracing::info!(ns = %buckets.namespace(), count = leftovers.buckets.len(), "closed buckets left open by the previous run");
        }
        let series = Arc::new(Mutex::new(Series {
            buckets: buckets.clone(),
            catalog: BucketCatalog::new(options.clone(), self.budget.clone()),
            log: InsertLog::default(),
            closing: HashMap::new(),
            directory: None,
            dropped: false,
            reopened: Default::default(),
        }));
        all.insert(buckets.id, series.clone());
        Ok(series)
    }

    /// Closes every open bucket of every collection (clean shutdown): compressed
    /// buckets in, the insert log emptied.
    pub fn close_all(&self) -> Result<(), StoreError> {
        self.compressor.drain();
        let all: Vec<Arc<Mutex<Series>>> = self.series.lock().values().cloned().collect();
        for series in all {
            let mut s = series.lock();
            let closed = s.catalog.close_all();
            Self::commit_closed(&mut s, closed)?;
            s.collect_garbage()?;
        }
        Ok(())
    }

    /// Writes buckets just taken out of the catalog (under the series lock).
    fn commit_closed(s: &mut Series, closed: Vec<Bucket>) -> Result<(), StoreError> {
        let engine = s.buckets.engine().clone();
        let mut batch = engine.batch();
        let mut retired = Vec::with_capacity(closed.len());
        for bucket in &closed {
            let seqs = s.log.retire(&bucket.id);
            stage_close(&mut batch, &s.buckets, bucket, &seqs);
            s.note_closed(bucket);
            retired.push((bucket.id, seqs));
        }
        s.commit_retiring(batch, retired)
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

    /// Inserts measurements: one atomic, durable batch holding their insert-log record.
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
        // Read without the series lock: concurrent inserts walk their measurements and
        // normalize their metas in parallel; the lock is held to route and append.
        let reader = series.lock().catalog.reader();
        let read = reader.read(&measurements);
        let mut s = series.lock();
        let mut batch = engine.batch();
        let (out, closing) =
            Self::stage_insert(&mut s, &mut batch, read, ordered, &HashSet::new())?;
        let appended = engine.apply(batch);
        if appended.is_ok() {
            s.log.garbage_applied();
        }
        drop(s);
        let appended = appended?;
        // The closed buckets are compressed and stored off the request path: their log
        // entries are durable, and reads find them in `closing` until they are stored.
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
                tracing::warn!(ns = %s.buckets.namespace(), error = %e, "closing idle buckets failed; they stay in the insert log until the next start");
            }
        }
    }

    /// Stages an insert under the series lock: one log record with the new measurements
    /// of every bucket it appends to goes into `batch`; the buckets it closes are
    /// returned (and listed in `closing`) for the caller to store.
    ///
    /// Buckets in `rewritten` (staged in `batch` by an update) are not reopened: the
    /// snapshot reopening reads from still holds their old contents.
    fn stage_insert(
        s: &mut Series,
        batch: &mut Batch,
        measurements: MeasurementBatch<'_>,
        ordered: bool,
        rewritten: &HashSet<ObjectId>,
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
            reopen_candidate(snap, buckets, closing, rewritten, key, t, span)
        };
        let out = catalog.insert(measurements, ordered, &mut reopen);
        for id in &out.reopened {
            s.reopened.insert(*id);
            s.log.reopened(id);
        }
        // Every measurement goes into the log record, also those of buckets this insert
        // closes: the insert is acknowledged once the record is durable, before the closed
        // buckets are compressed and stored.
        let tree = s.buckets.tree().clone();
        let closed: HashMap<ObjectId, &Bucket> = out.closed.iter().map(|b| (b.id, b)).collect();
        let rows: usize = out.deltas.iter().map(|(_, r)| r.len()).sum();
        let mut record = s.log.writer(rows, out.deltas.len());
        for (id, rows) in &out.deltas {
            let Some(bucket) = s
                .catalog
                .open_bucket(*id)
                .or_else(|| closed.get(id).copied())
            else {
                continue;
            };
            let first = s.log.note(*id);
            let reopened = first && s.reopened.remove(id);
            record.entry(bucket, first, reopened, rows);
        }
        drop(closed);
        s.log.append(batch, &tree, record);
        let mut closing = Vec::with_capacity(out.closed.len());
        for b in out.closed {
            s.reopened.remove(&b.id);
            let seqs = s.log.retire(&b.id);
            s.note_closed(&b);
            let b = Arc::new(b);
            s.closing.insert(b.id, b.clone());
            closing.push((b, seqs));
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

    /// Number of buckets (closed and open) and their bytes as stored (the insert log's
    /// bytes count for the open buckets).
    pub fn bucket_summary(buckets: &Collection) -> Result<(u64, u64), StoreError> {
        let snap = buckets.engine().snapshot();
        let tree = buckets.tree();
        let (mut count, mut bytes) = (0u64, 0u64);
        for entry in snap.scan_prefix(tree, &[CLOSED]) {
            let (_, v) = entry?;
            count += 1;
            bytes += v.len() as u64;
        }
        let marks = StoredMarks::read(&snap, tree)?;
        // Open buckets not stored (a reopened one is counted above).
        let mut open = std::collections::HashSet::new();
        for entry in snap
            .scan_prefix(tree, &[LOG])
            .chain(snap.scan_prefix(tree, &[DELTA]))
        {
            let (k, v) = entry?;
            bytes += v.len() as u64;
            if k[0] == DELTA {
                open.extend(object_id_at(&k));
                continue;
            }
            let seq = log_seq(&k).unwrap_or(0);
            for e in insert_log::entries(&v) {
                let e = e?;
                if !marks.covers(&e.id, seq) && !e.reopened && e.header.is_some() {
                    open.insert(e.id);
                }
            }
        }
        Ok((count + open.len() as u64, bytes))
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
mod insert_test;

#[cfg(test)]
mod archive_test;
