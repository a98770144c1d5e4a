//! The bucket catalog of one time-series collection: the open bucket of each
//! series (normalized meta value), MongoDB's rollover rules, memory-pressure
//! closing and the execution counters.
//!
//! Rollover checks for a measurement at time `t` against the series' open
//! bucket, in MongoDB's order (the first that applies closes the bucket and
//! a new one is opened):
//! 1. `t - min_time >= bucketMaxSpanSeconds` -> time forward;
//! 2. `t < min_time` -> time backward (MongoDB 8.0 archives such buckets;
//!    here they are closed and counted in `numBucketsClosedDueToTimeBackward`);
//! 3. `count == max_count` -> count;
//! 4. `size + measurement size > max_size` -> size, except while the bucket
//!    has fewer than `min_count` measurements, where it stays open
//!    ("large measurements") up to `large_max_size`;
//! 5. a field changes type bracket, or scalar <-> object/array -> schema change.
//!
//! After each insert, while the open buckets' total size exceeds
//! `idle_memory_threshold`, the least recently used buckets not touched by
//! that insert are closed (`numBucketsClosedDueToMemoryThreshold`).

use rustc_hash::{FxHashMap, FxHashSet};

use bson::oid::ObjectId;
use bson::{Bson, Document};

use crate::bucket::{Bucket, Fields};
use crate::error::TsError;
use crate::measurement::{time_error, MeasurementBatch, MeasurementReader, Read};
use crate::meta::meta_key;
use crate::options::TimeseriesOptions;
use crate::stats::BucketStats;
use std::sync::Arc;

/// Bucketing limits (MongoDB's server parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `timeseriesBucketMaxCount`, default 1000.
    pub max_count: usize,
    /// `timeseriesBucketMaxSize`, default 125 * 1024 bytes.
    pub max_size: usize,
    /// `timeseriesBucketMinCount`, default 10.
    pub min_count: usize,
    /// Size cap of a bucket kept open for large measurements (12 MB).
    pub large_max_size: usize,
    /// Memory of the open buckets of all collections together above which idle buckets
    /// are closed (`timeseriesIdleBucketExpiryMemoryUsageThreshold`). One threshold for
    /// the whole server, as MongoDB's.
    pub idle_memory_threshold: usize,
}

/// What every collection's bucket catalog shares: the limits (changed at run time by
/// `setParameter`) and the memory all open buckets hold.
#[derive(Debug, Default)]
pub struct CatalogBudget {
    limits: parking_lot::RwLock<Limits>,
    memory: std::sync::atomic::AtomicUsize,
}

impl CatalogBudget {
    pub fn limits(&self) -> Limits {
        *self.limits.read()
    }

    pub fn set_limits(&self, limits: Limits) {
        *self.limits.write() = limits;
    }

    /// Bytes held by the open buckets of every collection.
    pub fn memory(&self) -> usize {
        self.memory.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn add(&self, bytes: usize) {
        self.memory
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    fn sub(&self, bytes: usize) {
        let _ = self.memory.fetch_update(
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
            |m| Some(m.saturating_sub(bytes)),
        );
    }

    pub fn over_threshold(&self) -> bool {
        self.memory() > self.limits().idle_memory_threshold
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_count: 1000,
            max_size: 125 * 1024,
            min_count: 10,
            large_max_size: 12 * 1024 * 1024,
            idle_memory_threshold: 100 * 1024 * 1024,
        }
    }
}

/// Why a bucket was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseReason {
    TimeForward,
    TimeBackward,
    Count,
    Size,
    SchemaChange,
    MemoryThreshold,
}

/// What one [`BucketCatalog::insert`] call did.
#[derive(Debug, Default)]
pub struct InsertOutcome {
    /// Number of measurements placed in buckets.
    pub inserted: usize,
    /// Per-document errors: index in the input and the error (code 2).
    pub errors: Vec<(usize, TsError)>,
    /// For each bucket that received measurements in this call, still open or closed by
    /// it: the new measurements without their meta field, as BSON documents back to
    /// back (the bucket's entry in the insert's log record; a closed bucket is durable
    /// through its entries until it is stored compressed).
    pub deltas: Vec<(ObjectId, Vec<u8>)>,
    /// Buckets closed by this call, complete (including measurements added
    /// by this call); they are no longer open.
    pub closed: Vec<Bucket>,
    /// Buckets opened by this call (some may also be in `closed`).
    pub opened: Vec<ObjectId>,
    /// Closed buckets this call reopened (some may also be in `closed`).
    pub reopened: Vec<ObjectId>,
}

/// What a query for a closed bucket to reopen found.
pub enum Reopening {
    Found(Box<Bucket>),
    None,
    /// The query failed (the insert goes on with a new bucket).
    Failed,
}

#[derive(Debug)]
struct OpenBucket {
    /// Shared with reads (copy-on-write: a read holding it makes the next append copy).
    bucket: Arc<Bucket>,
    last_used: u64,
    kept_open_for_large: bool,
    /// The insert (by epoch) that last appended to the bucket, and the bucket's slot in
    /// that insert's list of touched buckets.
    touched: Option<(u64, usize)>,
}

/// Open buckets of one time-series collection.
#[derive(Debug)]
pub struct BucketCatalog {
    options: TimeseriesOptions,
    budget: Arc<CatalogBudget>,
    by_meta: FxHashMap<Vec<u8>, ObjectId>,
    /// By bucket `_id` (ids are made here, so a fast hash is safe).
    buckets: FxHashMap<ObjectId, OpenBucket>,
    stats: BucketStats,
    clock: u64,
    memory: usize,
    /// Reads measurements outside the series lock, with the meta cache of this
    /// collection's inserts.
    reader: MeasurementReader,
}

impl BucketCatalog {
    pub fn new(options: TimeseriesOptions, budget: Arc<CatalogBudget>) -> BucketCatalog {
        let reader = MeasurementReader::new(&options.time_field, options.meta_field.as_deref());
        BucketCatalog {
            options,
            budget,
            by_meta: FxHashMap::default(),
            buckets: FxHashMap::default(),
            stats: BucketStats::default(),
            clock: 0,
            memory: 0,
            reader,
        }
    }

    pub fn options(&self) -> &TimeseriesOptions {
        &self.options
    }

    /// What reads this collection's measurements for [`BucketCatalog::insert`], to use
    /// without the series lock.
    pub fn reader(&self) -> MeasurementReader {
        self.reader.clone()
    }

    pub fn limits(&self) -> Limits {
        self.budget.limits()
    }

    /// Counts `bytes` more held by this catalog's open buckets (and the shared budget).
    fn charge(&mut self, bytes: usize) {
        self.memory += bytes;
        self.budget.add(bytes);
    }

    /// Counts `bytes` released by this catalog's open buckets.
    fn release(&mut self, bytes: usize) {
        let bytes = bytes.min(self.memory);
        self.memory -= bytes;
        self.budget.sub(bytes);
    }

    /// Replaces the options (collMod); all open buckets are closed and
    /// returned, as MongoDB clears the catalog for the collection.
    pub fn set_options(&mut self, options: TimeseriesOptions) -> Vec<Bucket> {
        self.reader = self
            .reader
            .renamed(&options.time_field, options.meta_field.as_deref());
        self.options = options;
        self.close_all()
    }

    /// Validates a measurement's time: a BSON date in the time field.
    pub fn check_time(&self, m: &Document) -> Result<i64, TsError> {
        let size = hourglass_query::bson_size::bson_size(m);
        let max = hourglass_query::limits::MAX_BSON_OBJECT_SIZE;
        if size > max {
            return Err(TsError::TooLarge(format!(
                "Measurement of {size} bytes is over the maximum document size of {max} bytes"
            )));
        }
        match m.get(&self.options.time_field) {
            Some(Bson::DateTime(d)) => Ok(d.timestamp_millis()),
            _ => Err(time_error(&self.options.time_field)),
        }
    }

    fn rollover_reason(
        &mut self,
        id: ObjectId,
        t: i64,
        size: usize,
        fields: &Fields<'_>,
    ) -> Option<CloseReason> {
        let span = self.options.max_span_millis();
        let limits = self.budget.limits();
        let ob = self.buckets.get_mut(&id)?;
        let b = &ob.bucket;
        if t.saturating_sub(b.min_time_ms) >= span {
            return Some(CloseReason::TimeForward);
        }
        if t < b.min_time_ms {
            return Some(CloseReason::TimeBackward);
        }
        if b.count() >= limits.max_count {
            return Some(CloseReason::Count);
        }
        let new_size = b.size_bytes + size;
        if new_size > limits.max_size {
            if b.count() < limits.min_count && new_size <= limits.large_max_size {
                if !ob.kept_open_for_large {
                    ob.kept_open_for_large = true;
                    self.stats.num_buckets_kept_open_due_to_large_measurements += 1;
                }
            } else {
                return Some(CloseReason::Size);
            }
        }
        if !ob.bucket.accepts(fields) {
            return Some(CloseReason::SchemaChange);
        }
        None
    }

    fn count_close(&mut self, reason: CloseReason) {
        let s = &mut self.stats;
        match reason {
            CloseReason::TimeForward => s.num_buckets_closed_due_to_time_forward += 1,
            CloseReason::TimeBackward => s.num_buckets_closed_due_to_time_backward += 1,
            CloseReason::Count => s.num_buckets_closed_due_to_count += 1,
            CloseReason::Size => s.num_buckets_closed_due_to_size += 1,
            CloseReason::SchemaChange => s.num_buckets_closed_due_to_schema_change += 1,
            CloseReason::MemoryThreshold => s.num_buckets_closed_due_to_memory_threshold += 1,
        }
    }

    /// Removes an open bucket without counting a close reason.
    fn take(&mut self, id: ObjectId) -> Option<Bucket> {
        let ob = self.buckets.remove(&id)?;
        let key = meta_key(ob.bucket.meta.as_ref());
        if self.by_meta.get(&key) == Some(&id) {
            self.by_meta.remove(&key);
        }
        self.release(ob.bucket.heap_bytes);
        Some(Arc::unwrap_or_clone(ob.bucket))
    }

    /// Inserts measurements in order. Each must hold a BSON date in the
    /// time field, else it gets a code-2 error; `ordered` stops at the first
    /// error, otherwise the remaining measurements are still inserted.
    ///
    /// When a measurement finds no open bucket of its series that takes it (none open, or
    /// its time is outside the open one's span), `reopen` is asked for a closed bucket of
    /// the series (by series key) whose span holds the time and that has room; such a
    /// bucket becomes the series' open bucket again (MongoDB 6.3+'s bucket reopening) and
    /// is returned in `reopened`.
    pub fn insert(
        &mut self,
        batch: MeasurementBatch<'_>,
        ordered: bool,
        reopen: &mut dyn FnMut(&[u8], i64) -> Reopening,
    ) -> InsertOutcome {
        let mut out = InsertOutcome::default();
        self.clock += 1;
        let epoch = self.clock;
        // Buckets that received measurements, with the new rows' bytes for their log entry.
        let mut touched: Vec<(ObjectId, Vec<u8>)> = Vec::new();
        let mut opened_now: FxHashSet<ObjectId> = FxHashSet::default();
        let MeasurementBatch {
            reads,
            fields,
            series,
        } = batch;
        // Rows of one bucket in this batch, about (a bucket holds at most `max_count`):
        // its log entry's bytes grow once.
        let per_series = (reads.len() / series.max(1) + 1).min(self.budget.limits().max_count);
        for (i, read) in reads.into_iter().enumerate() {
            let Read { m, time: t, series } = match read {
                Ok(r) => r,
                Err(e) => {
                    out.errors.push((i, e));
                    if ordered {
                        break;
                    }
                    continue;
                }
            };
            let m_fields = &fields[m.fields.clone()];
            let (meta, key) = &*series;
            let size = m.size_without_meta();
            let mut target = self.by_meta.get(key).copied();
            let mut backward = false;
            let had_open = target.is_some();
            let mut may_reopen = !had_open;
            if let Some(id) = target {
                if let Some(reason) = self.rollover_reason(id, t, size, m_fields) {
                    if let Some(b) = self.take(id) {
                        self.count_close(reason);
                        out.closed.push(b);
                    }
                    target = None;
                    backward = reason == CloseReason::TimeBackward;
                    may_reopen =
                        matches!(reason, CloseReason::TimeBackward | CloseReason::TimeForward);
                }
            }
            if may_reopen {
                target = self.try_reopen(key, t, reopen, &mut out);
            }
            if target.is_none() && !had_open {
                self.stats.num_buckets_opened_due_to_metadata += 1;
            }
            let id = match target {
                Some(id) => id,
                None => {
                    // Going back in time, a new bucket ends at the measurement rather than
                    // starting there, so that a series sent backwards fills buckets as
                    // fully as one sent forwards.
                    let first = if backward {
                        let unit = self.options.bucket_rounding_seconds.saturating_mul(1000);
                        t.saturating_sub(self.options.max_span_millis())
                            .saturating_add(unit)
                    } else {
                        t
                    };
                    let b = Bucket::new(&self.options, meta.clone(), first.min(t));
                    let id = b.id;
                    self.charge(b.heap_bytes);
                    self.by_meta.insert(key.clone(), id);
                    self.buckets.insert(
                        id,
                        OpenBucket {
                            bucket: Arc::new(b),
                            last_used: epoch,
                            kept_open_for_large: false,
                            touched: None,
                        },
                    );
                    out.opened.push(id);
                    opened_now.insert(id);
                    id
                }
            };
            if let Some(ob) = self.buckets.get_mut(&id) {
                let slot = match ob.touched {
                    Some((e, slot)) if e == epoch => slot,
                    _ => {
                        touched.push((id, Vec::with_capacity(size * per_series)));
                        ob.touched = Some((epoch, touched.len() - 1));
                        touched.len() - 1
                    }
                };
                let rows = &mut touched[slot].1;
                m.write_without_meta(rows);
                let before = ob.bucket.heap_bytes;
                Arc::make_mut(&mut ob.bucket).add_fields(m_fields, size);
                ob.last_used = epoch;
                let grown = ob.bucket.heap_bytes.saturating_sub(before);
                self.charge(grown);
                out.inserted += 1;
            }
        }
        for (id, _) in &touched {
            if opened_now.contains(id) {
                self.stats.num_bucket_inserts += 1;
            } else {
                self.stats.num_bucket_updates += 1;
            }
        }
        if out.inserted > 0 {
            self.stats.record_commit(touched.len(), out.inserted);
        }
        MeasurementReader::give_back(fields);
        out.closed.extend(self.close_idle(epoch));
        out.deltas = touched;
        out
    }

    /// Asks `reopen` for a closed bucket of series `key` that takes time `t` and makes it
    /// the series' open bucket.
    fn try_reopen(
        &mut self,
        key: &[u8],
        t: i64,
        reopen: &mut dyn FnMut(&[u8], i64) -> Reopening,
        out: &mut InsertOutcome,
    ) -> Option<ObjectId> {
        self.stats.num_buckets_queried += 1;
        let bucket = match reopen(key, t) {
            Reopening::Found(b) => *b,
            Reopening::None => return None,
            Reopening::Failed => {
                self.stats.num_bucket_queries_failed += 1;
                return None;
            }
        };
        if out.closed.iter().any(|b| b.id == bucket.id) || self.buckets.contains_key(&bucket.id) {
            // Closed earlier in this call (its stored copy is older) or open already.
            return None;
        }
        let limits = self.budget.limits();
        if bucket.count() >= limits.max_count || bucket.size_bytes >= limits.max_size {
            self.stats.num_bucket_reopenings_failed += 1;
            return None;
        }
        self.stats.num_buckets_fetched += 1;
        self.stats.num_buckets_reopened += 1;
        let id = bucket.id;
        if let Some(displaced) = self.restore(bucket) {
            self.stats.num_buckets_closed_due_to_reopening += 1;
            out.closed.push(displaced);
        }
        out.reopened.push(id);
        Some(id)
    }

    /// Closes this collection's least recently used buckets while the open buckets of all
    /// collections exceed the threshold (another collection's insert asks).
    pub fn expire_idle(&mut self) -> Vec<Bucket> {
        let after_every_insert = self.clock + 1;
        self.close_idle(after_every_insert)
    }

    /// Closes this collection's least recently used buckets not used at `epoch` while the
    /// open buckets of all collections together exceed the threshold.
    fn close_idle(&mut self, epoch: u64) -> Vec<Bucket> {
        let mut closed = Vec::new();
        if !self.budget.over_threshold() {
            return closed;
        }
        let mut candidates: Vec<(u64, ObjectId)> = self
            .buckets
            .iter()
            .filter(|(_, ob)| ob.last_used < epoch)
            .map(|(id, ob)| (ob.last_used, *id))
            .collect();
        candidates.sort();
        for (_, id) in candidates {
            if !self.budget.over_threshold() {
                break;
            }
            if let Some(b) = self.take(id) {
                self.count_close(CloseReason::MemoryThreshold);
                closed.push(b);
            }
        }
        closed
    }

    /// The open bucket with this id.
    pub fn open_bucket(&self, id: ObjectId) -> Option<&Bucket> {
        self.buckets.get(&id).map(|ob| &*ob.bucket)
    }

    /// The open bucket of a series (meta value, not necessarily normalized).
    pub fn open_bucket_for_meta(&self, meta: Option<&Bson>) -> Option<&Bucket> {
        let id = self.by_meta.get(&meta_key(meta))?;
        self.open_bucket(*id)
    }

    /// All open buckets, shared (reads take these without copying).
    pub fn shared_open_buckets(&self) -> impl Iterator<Item = &Arc<Bucket>> {
        self.buckets.values().map(|ob| &ob.bucket)
    }

    /// All open buckets (unspecified order).
    pub fn open_buckets(&self) -> impl Iterator<Item = &Bucket> {
        self.buckets.values().map(|ob| &*ob.bucket)
    }

    /// Closes every open bucket (shutdown, restart) without counting a
    /// close reason; returns them.
    pub fn close_all(&mut self) -> Vec<Bucket> {
        self.by_meta.clear();
        self.release(self.memory);
        let mut v: Vec<Bucket> = self
            .buckets
            .drain()
            .map(|(_, ob)| Arc::unwrap_or_clone(ob.bucket))
            .collect();
        v.sort_by_key(|b| b.id);
        v
    }

    /// Forgets the open bucket of one series so later inserts open a new one
    /// (e.g. after an update of meta values); returns it.
    pub fn clear_meta(&mut self, meta: Option<&Bson>) -> Option<Bucket> {
        let id = *self.by_meta.get(&meta_key(meta))?;
        self.take(id)
    }

    /// Forgets every open bucket; same as [`BucketCatalog::close_all`].
    pub fn clear(&mut self) -> Vec<Bucket> {
        self.close_all()
    }

    /// Makes `bucket` the open bucket of its series (rebuild after a restart);
    /// returns the bucket it displaced, if any.
    pub fn restore(&mut self, bucket: Bucket) -> Option<Bucket> {
        let key = meta_key(bucket.meta.as_ref());
        let displaced = self.by_meta.get(&key).copied().and_then(|id| self.take(id));
        self.clock += 1;
        self.charge(bucket.heap_bytes);
        self.by_meta.insert(key, bucket.id);
        self.buckets.insert(
            bucket.id,
            OpenBucket {
                bucket: Arc::new(bucket),
                last_used: self.clock,
                kept_open_for_large: false,
                touched: None,
            },
        );
        displaced
    }

    pub fn stats(&self) -> &BucketStats {
        &self.stats
    }

    /// Mutable counters, for the integrator's group-commit bookkeeping.
    pub fn stats_mut(&mut self) -> &mut BucketStats {
        &mut self.stats
    }

    /// Memory held by this collection's open buckets (see `Bucket::heap_bytes`).
    pub fn memory_usage(&self) -> usize {
        self.memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::RawDocument;

    /// Inserts documents through the raw path.
    trait InsertDocs {
        fn insert_docs(&mut self, docs: Vec<Document>, ordered: bool) -> InsertOutcome;
    }

    impl InsertDocs for BucketCatalog {
        fn insert_docs(&mut self, docs: Vec<Document>, ordered: bool) -> InsertOutcome {
            let raw = crate::store::raw_measurements(&docs).unwrap();
            let raw: Vec<&RawDocument> = raw.iter().map(|r| &**r).collect();
            let batch = self.reader().read(&raw);
            self.insert(batch, ordered, &mut |_, _| Reopening::None)
        }
    }

    /// Each delta's bucket and number of rows.
    fn delta_rows(out: &InsertOutcome) -> Vec<(ObjectId, usize)> {
        out.deltas
            .iter()
            .map(|(id, rows)| (*id, crate::store::split_documents(rows).count()))
            .collect()
    }
    use bson::{doc, DateTime};

    const T0: i64 = 1_700_000_040_000; // a whole minute

    fn date(ms: i64) -> Bson {
        Bson::DateTime(DateTime::from_millis(ms))
    }

    fn catalog() -> BucketCatalog {
        with_limits(TimeseriesOptions::new("t", Some("m")), Limits::default())
    }

    fn series(n: i64, meta: &str) -> Vec<Document> {
        (0..n)
            .map(|i| doc! {"t": date(T0 + i * 1000), "m": meta, "v": i as f64})
            .collect()
    }

    #[test]
    fn twenty_five_hundred_measurements_make_three_buckets() {
        let mut c = catalog();
        let out = c.insert_docs(series(2500, "a"), true);
        assert_eq!(out.inserted, 2500);
        assert_eq!(out.opened.len(), 3);
        assert_eq!(out.closed.len(), 2);
        assert!(out.closed.iter().all(|b| b.count() == 1000));
        assert_eq!(c.open_buckets().count(), 1);
        assert_eq!(c.open_buckets().next().map(Bucket::count), Some(500));
        let s = c.stats();
        assert_eq!(s.num_buckets_closed_due_to_count, 2);
        assert_eq!(s.num_bucket_inserts, 3);
        assert_eq!(s.num_buckets_opened_due_to_metadata, 1);
        assert_eq!((s.num_commits, s.num_measurements_committed), (3, 2500));
        let opened = &out.opened;
        assert_eq!(
            delta_rows(&out),
            vec![(opened[0], 1000), (opened[1], 1000), (opened[2], 500)],
            "the closed buckets' rows are in deltas too"
        );
    }

    #[test]
    fn deltas_hold_the_new_rows_of_each_open_bucket() {
        let mut c = catalog();
        let a = c.insert_docs(series(2, "a"), true);
        let id = a.opened[0];
        assert_eq!(delta_rows(&a), vec![(id, 2)]);
        let b = c.insert_docs(vec![doc! {"t": date(T0 + 5000), "m": "a", "v": 7.5}], true);
        assert_eq!(delta_rows(&b), vec![(id, 1)]);
        let row: Document = bson::from_slice(&b.deltas[0].1).unwrap();
        assert_eq!(row, doc! {"t": date(T0 + 5000), "v": 7.5}, "meta left out");
        assert!(b.opened.is_empty());
        assert_eq!(c.stats().num_bucket_updates, 1);
    }

    #[test]
    fn time_forward_closes_at_the_span() {
        let mut c = catalog();
        c.insert_docs(vec![doc! {"t": date(T0 + 1500), "m": 1}], true);
        let out = c.insert_docs(vec![doc! {"t": date(T0 + 3_599_999), "m": 1}], true);
        assert!(out.closed.is_empty());
        let out = c.insert_docs(vec![doc! {"t": date(T0 + 3_600_000), "m": 1}], true);
        assert_eq!(out.closed.len(), 1);
        assert_eq!(c.stats().num_buckets_closed_due_to_time_forward, 1);
    }

    #[test]
    fn time_backward_closes_only_before_the_rounded_min() {
        let mut c = catalog();
        c.insert_docs(vec![doc! {"t": date(T0 + 30_000), "m": 1}], true);
        let out = c.insert_docs(vec![doc! {"t": date(T0 + 1), "m": 1}], true);
        assert!(out.closed.is_empty(), "same rounded minute");
        let out = c.insert_docs(vec![doc! {"t": date(T0 - 1), "m": 1}], true);
        assert_eq!(out.closed.len(), 1);
        assert_eq!(c.stats().num_buckets_closed_due_to_time_backward, 1);
        assert_eq!(
            c.open_buckets().next().map(|b| b.min_time_ms),
            Some(T0 - 3_600_000),
            "a bucket opened going back in time ends at the measurement"
        );
    }

    #[test]
    fn size_closes_after_min_count_and_large_measurements_stay_open() {
        let mut c = catalog();
        let big = "x".repeat(20_000);
        let docs: Vec<Document> = (0..12)
            .map(|i| doc! {"t": date(T0 + i), "m": 1, "s": big.clone()})
            .collect();
        let out = c.insert_docs(docs, true);
        // 7 fit in 125 KB; 8th and 9th/10th stay open while count < 10.
        assert_eq!(out.closed.len(), 1);
        assert_eq!(out.closed[0].count(), 10);
        assert_eq!(c.stats().num_buckets_closed_due_to_size, 1);
        assert_eq!(c.stats().num_buckets_kept_open_due_to_large_measurements, 1);
    }

    #[test]
    fn size_closes_at_the_large_cap() {
        let limits = Limits {
            max_size: 100,
            large_max_size: 1000,
            ..Limits::default()
        };
        let mut c = with_limits(TimeseriesOptions::new("t", None), limits);
        let s = "y".repeat(300);
        let out = c.insert_docs(
            (0..5)
                .map(|i| doc! {"t": date(T0 + i), "s": s.clone()})
                .collect(),
            true,
        );
        assert_eq!(out.closed.len(), 1);
        assert_eq!(out.closed[0].count(), 3);
        assert_eq!(c.stats().num_buckets_closed_due_to_size, 1);
    }

    #[test]
    fn schema_change_closes() {
        let mut c = catalog();
        c.insert_docs(vec![doc! {"t": date(T0), "m": 1, "x": 1}], true);
        let out = c.insert_docs(vec![doc! {"t": date(T0 + 1), "m": 1, "x": 2.5}], true);
        assert!(out.closed.is_empty());
        let out = c.insert_docs(vec![doc! {"t": date(T0 + 2), "m": 1, "x": "s"}], true);
        assert_eq!(out.closed.len(), 1);
        assert_eq!(c.stats().num_buckets_closed_due_to_schema_change, 1);
    }

    fn with_limits(options: TimeseriesOptions, limits: Limits) -> BucketCatalog {
        let budget = Arc::new(CatalogBudget::default());
        budget.set_limits(limits);
        BucketCatalog::new(options, budget)
    }

    /// The memory one open bucket of `series(3, ..)` takes.
    fn one_bucket_memory() -> usize {
        let mut c = catalog();
        c.insert_docs(series(3, "a"), true);
        c.memory_usage()
    }

    #[test]
    fn memory_threshold_closes_idle_buckets_first() {
        let one = one_bucket_memory();
        let limits = Limits {
            idle_memory_threshold: one * 3 / 2,
            ..Limits::default()
        };
        let mut c = with_limits(TimeseriesOptions::new("t", Some("m")), limits);
        assert!(c.insert_docs(series(3, "a"), true).closed.is_empty());
        let out = c.insert_docs(series(3, "b"), true);
        let metas: Vec<_> = out.closed.iter().map(|b| b.meta.clone()).collect();
        assert_eq!(metas, vec![Some(Bson::String("a".into()))]);
        let out = c.insert_docs(series(3, "c"), true);
        let metas: Vec<_> = out.closed.iter().map(|b| b.meta.clone()).collect();
        assert_eq!(metas, vec![Some(Bson::String("b".into()))]);
        assert_eq!(c.stats().num_buckets_closed_due_to_memory_threshold, 2);
        assert_eq!(
            c.open_buckets().count(),
            1,
            "the bucket used by this insert stays"
        );
        assert!(c.memory_usage() > 0 && c.memory_usage() <= one * 3 / 2);
        assert!(out
            .deltas
            .iter()
            .all(|(id, _)| c.open_bucket(*id).is_some() || out.closed.iter().any(|b| b.id == *id)));
    }

    #[test]
    fn equal_metas_in_any_field_order_share_a_bucket() {
        let mut c = catalog();
        let out = c.insert_docs(
            vec![
                doc! {"t": date(T0), "m": {"a": 1, "b": 2}},
                doc! {"t": date(T0 + 1), "m": {"b": 2, "a": 1}},
                doc! {"t": date(T0 + 2)},
                doc! {"t": date(T0 + 3), "m": null},
            ],
            true,
        );
        assert_eq!(out.opened.len(), 3);
        let b = c
            .open_bucket_for_meta(Some(&Bson::Document(doc! {"b": 2, "a": 1})))
            .unwrap();
        assert_eq!(b.count(), 2);
        assert_eq!(b.meta, Some(Bson::Document(doc! {"a": 1, "b": 2})));
        assert_eq!(c.stats().num_buckets_opened_due_to_metadata, 3);
    }

    #[test]
    fn ordered_insert_stops_at_the_first_bad_time() {
        let mut c = catalog();
        let out = c.insert_docs(
            vec![
                doc! {"t": date(T0)},
                doc! {"t": 5},
                doc! {"t": date(T0 + 1)},
            ],
            true,
        );
        assert_eq!(out.inserted, 1);
        assert_eq!(out.errors.len(), 1);
        let (i, e) = &out.errors[0];
        assert_eq!((*i, e.code(), &*e.code_name()), (1, 2, "BadValue"));
        assert_eq!(
            e.message(),
            "'t' must be present and contain a valid BSON UTC datetime value"
        );
    }

    #[test]
    fn unordered_insert_reports_every_bad_time() {
        let mut c = catalog();
        let out = c.insert_docs(
            vec![
                doc! {"x": 1},
                doc! {"t": date(T0)},
                doc! {"t": "2020"},
                doc! {"t": date(T0 + 1)},
            ],
            false,
        );
        assert_eq!(out.inserted, 2);
        assert_eq!(
            out.errors.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![0, 2]
        );
    }

    #[test]
    fn clear_and_restore_manage_open_buckets() {
        let mut c = catalog();
        c.insert_docs(series(2, "a"), true);
        c.insert_docs(series(2, "b"), true);
        let a = c.clear_meta(Some(&Bson::String("a".into()))).unwrap();
        assert_eq!(a.count(), 2);
        assert_eq!(c.open_buckets().count(), 1);
        assert!(c.restore(a.clone()).is_none());
        assert_eq!(c.open_bucket(a.id).map(Bucket::count), Some(2));
        let out = c.insert_docs(series(1, "a"), true);
        assert_eq!(delta_rows(&out), vec![(a.id, 1)]);
        assert_eq!(c.close_all().len(), 2);
        assert_eq!(c.memory_usage(), 0);
        assert_eq!(c.stats().num_buckets_closed_due_to_count, 0);
    }

    #[test]
    fn memory_of_an_open_bucket_counts_its_documents_not_only_their_bson() {
        let one = one_bucket_memory();
        let bson: usize = series(3, "a")
            .iter()
            .map(hourglass_query::bson_size::bson_size)
            .sum();
        assert!(
            one > 2 * bson,
            "{one} bytes counted for {bson} bytes of BSON"
        );
    }

    #[test]
    fn memory_threshold_counts_all_collections_together() {
        let one = one_bucket_memory();
        let budget = Arc::new(CatalogBudget::default());
        budget.set_limits(Limits {
            idle_memory_threshold: one * 3 / 2,
            ..Limits::default()
        });
        let opts = TimeseriesOptions::new("t", Some("m"));
        let mut a = BucketCatalog::new(opts.clone(), budget.clone());
        let mut b = BucketCatalog::new(opts, budget.clone());
        assert!(a.insert_docs(series(3, "a"), true).closed.is_empty());
        // b's only bucket is the one this insert uses: nothing of b can close yet.
        assert!(b.insert_docs(series(3, "b"), true).closed.is_empty());
        assert!(budget.memory() > one * 3 / 2);
        // a's next insert sees the total of both collections and closes its idle bucket.
        let out = a.insert_docs(series(3, "c"), true);
        assert_eq!(out.closed.len(), 1);
        assert_eq!(budget.memory(), a.memory_usage() + b.memory_usage());
    }

    #[test]
    fn limits_changed_at_run_time_apply_to_open_catalogs() {
        let budget = Arc::new(CatalogBudget::default());
        budget.set_limits(Limits::default());
        let mut c = BucketCatalog::new(TimeseriesOptions::new("t", Some("m")), budget.clone());
        assert!(c.insert_docs(series(2, "a"), true).closed.is_empty());
        budget.set_limits(Limits {
            max_count: 2,
            ..Limits::default()
        });
        let out = c.insert_docs(series(1, "a"), true);
        assert_eq!(out.closed.len(), 1);
        assert_eq!(c.stats().num_buckets_closed_due_to_count, 1);
    }
}
