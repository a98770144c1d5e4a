//! Persistence of one time-series collection's buckets in its `system.buckets.<coll>`
//! tree, and the bucket catalogs of all time-series collections.
//!
//! Keys of a buckets tree:
//!
//! | key | value |
//! |---|---|
//! | `B` + bucket `_id` (12 bytes) | a closed bucket, compressed (`Bucket::encode_compressed`) |
//! | `D` + bucket `_id` + seq (u32 big-endian) | a delta of an open bucket: a header BSON document (seq 0: `{min: rounded min time as int64 ms, meta}`, else `{}`), then the new measurements as BSON documents back to back |
//!
//! An insert appends one small delta per touched open bucket (never rewriting the
//! bucket) and, for every bucket it closes, writes the compressed bucket and deletes the
//! bucket's deltas — all in one atomic, durable storage batch. On first use after a
//! restart every open bucket left as deltas is closed (as MongoDB closes all buckets on
//! restart). Reads go through one storage snapshot, so they see exactly the committed
//! measurements.

use crate::bucket::{decode_compressed, unpack_measurements, Bucket};
use crate::catalog::{BucketCatalog, Limits};
use crate::error::TsError;
use crate::options::TimeseriesOptions;
use crate::stats::BucketStats;
use bson::oid::ObjectId;
use bson::{Bson, Document};
use hourglass_catalog::{CatalogError, Collection};
use hourglass_storage::{Batch, Snapshot, StorageError};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

const CLOSED: u8 = b'B';
const DELTA: u8 = b'D';

/// Errors of the time-series store, each with MongoDB's code.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Ts(#[from] TsError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl StoreError {
    pub fn code(&self) -> i32 {
        match self {
            StoreError::Ts(e) => e.code(),
            StoreError::Catalog(e) => e.code(),
            StoreError::Storage(_) => 1,
        }
    }
    pub fn code_name(&self) -> &'static str {
        match self {
            StoreError::Ts(e) => e.code_name(),
            StoreError::Catalog(e) => e.code_name(),
            StoreError::Storage(_) => "InternalError",
        }
    }
}

/// The options of a buckets collection, if it is one.
pub fn options_of(buckets: &Collection) -> Option<TimeseriesOptions> {
    let options = buckets.options();
    let spec = options.get_document("timeseries").ok()?;
    TimeseriesOptions::parse(spec).ok()
}

/// In-memory state of one time-series collection.
struct Series {
    buckets: Arc<Collection>,
    catalog: BucketCatalog,
    /// Next delta sequence number of each open bucket.
    next_seq: HashMap<ObjectId, u32>,
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
    limits: Mutex<Limits>,
}

fn key(kind: u8, id: &ObjectId) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(kind);
    k.extend_from_slice(&id.bytes());
    k
}

fn delta_key(id: &ObjectId, seq: u32) -> Vec<u8> {
    let mut k = key(DELTA, id);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn object_id_at(k: &[u8]) -> Option<ObjectId> {
    let b: [u8; 12] = k.get(1..13)?.try_into().ok()?;
    Some(ObjectId::from_bytes(b))
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
            let bucket = Bucket::with_id(options, id, header.get("meta").cloned(), min);
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

/// The BSON documents stored back to back in `bytes` (a delta record).
fn split_documents(bytes: &[u8]) -> impl Iterator<Item = Result<Document, StoreError>> + '_ {
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

/// A delta record: a header document (`{min, meta}` for a bucket's first delta, else
/// empty) followed by the new measurements, each as BSON, back to back.
fn encode_delta(bucket: &Bucket, first: bool, new: &[Document]) -> Result<Vec<u8>, StoreError> {
    let mut header = Document::new();
    if first {
        header.insert("min", bucket.min_time_ms);
        if let Some(meta) = &bucket.meta {
            header.insert("meta", meta.clone());
        }
    }
    let mut out = Vec::with_capacity(64 + new.len() * 256);
    header
        .to_writer(&mut out)
        .map_err(|e| corrupt(e.to_string()))?;
    for m in new {
        m.to_writer(&mut out).map_err(|e| corrupt(e.to_string()))?;
    }
    Ok(out)
}

/// Stages the writes that close `bucket`: its compressed form in, its deltas out.
fn stage_close(batch: &mut Batch, buckets: &Collection, bucket: &Bucket, deltas: u32) {
    batch.put(
        buckets.tree(),
        &key(CLOSED, &bucket.id),
        &bucket.encode_compressed(),
    );
    for seq in 0..deltas {
        batch.delete(buckets.tree(), &delta_key(&bucket.id, seq));
    }
}

impl TimeseriesStore {
    /// Sets the bucket limits used by catalogs created from now on.
    pub fn set_limits(&self, limits: Limits) {
        *self.limits.lock() = limits;
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
            catalog: BucketCatalog::new(options.clone(), *self.limits.lock()),
            next_seq: HashMap::new(),
        }));
        all.insert(buckets.id, series.clone());
        Ok(series)
    }

    /// Closes every open bucket of every collection (clean shutdown): compressed
    /// buckets in, deltas out.
    pub fn close_all(&self) -> Result<(), StoreError> {
        let all: Vec<Arc<Mutex<Series>>> = self.series.lock().values().cloned().collect();
        for series in all {
            let mut s = series.lock();
            let closed = s.catalog.close_all();
            let engine = s.buckets.engine().clone();
            let mut batch = engine.batch();
            for bucket in &closed {
                let deltas = s.next_seq.remove(&bucket.id).unwrap_or(0);
                stage_close(&mut batch, &s.buckets, bucket, deltas);
            }
            engine.commit(batch)?;
        }
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
        let engine = buckets.engine();
        let mut batch = engine.batch();
        for bucket in &closed {
            let deltas = s.next_seq.remove(&bucket.id).unwrap_or(0);
            stage_close(&mut batch, buckets, bucket, deltas);
        }
        engine.commit(batch)?;
        Ok(())
    }

    /// Forgets the state of a dropped buckets collection.
    pub fn forget(&self, buckets: &Collection) {
        self.series.lock().remove(&buckets.id);
    }

    /// Inserts measurements: one atomic, durable batch of deltas and closed buckets.
    pub fn insert(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        measurements: Vec<Document>,
        ordered: bool,
    ) -> Result<TsInsertOutcome, StoreError> {
        let series = self.series(buckets, options)?;
        let engine = buckets.engine();
        let mut s = series.lock();
        let out = s.catalog.insert(measurements, ordered);
        let closing: Vec<(Bucket, u32)> = out
            .closed
            .into_iter()
            .map(|b| {
                let deltas = s.next_seq.remove(&b.id).unwrap_or(0);
                (b, deltas)
            })
            .collect();
        let mut batch = engine.batch();
        for (id, range) in &out.appended {
            let Some(bucket) = s.catalog.open_bucket(*id) else {
                continue;
            };
            let slice = bucket.measurements.get(range.clone()).unwrap_or(&[]);
            let seq = s.next_seq.get(id).copied().unwrap_or(0);
            let bytes = encode_delta(bucket, seq == 0, slice)?;
            batch.put(buckets.tree(), &delta_key(id, seq), &bytes);
            s.next_seq.insert(*id, seq + 1);
        }
        let appended = engine.apply(batch);
        drop(s);
        let appended = appended?;
        // Compress the closed buckets outside the lock so that other inserters go on:
        // a closed bucket takes no more measurements, and its close (compressed bucket
        // in, deltas out) is one atomic batch of its own. The reply waits for both.
        let mut close = engine.batch();
        for (bucket, deltas) in &closing {
            stage_close(&mut close, buckets, bucket, *deltas);
        }
        let closed = engine.apply(close)?;
        engine.wait_durable(appended.max(closed))?;
        Ok(TsInsertOutcome {
            inserted: out.inserted,
            errors: out
                .errors
                .into_iter()
                .map(|(i, e)| (i, StoreError::Ts(e)))
                .collect(),
        })
    }

    /// The catalog counters of a time-series collection (zero before first use).
    pub fn stats(&self, buckets: &Collection) -> BucketStats {
        match self.series.lock().get(&buckets.id) {
            Some(s) => s.lock().catalog.stats().clone(),
            None => BucketStats::default(),
        }
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

    /// Every bucket as MongoDB's bucket document (closed ones first, in `_id` order, then
    /// open ones), as a read of `system.buckets.<coll>` returns them.
    pub fn bucket_documents(
        buckets: &Collection,
        options: &TimeseriesOptions,
    ) -> Result<Vec<Document>, StoreError> {
        let snap = buckets.engine().snapshot();
        let mut out = Vec::new();
        for entry in snap.scan_prefix(buckets.tree(), &[CLOSED]) {
            let (_, v) = entry?;
            out.push(decode_compressed(&v)?.to_document()?);
        }
        for (bucket, _) in open_buckets_in(&snap, buckets, options)? {
            out.push(bucket.to_document(false));
        }
        Ok(out)
    }

    /// Every measurement whose time may lie in `bounds` (inclusive milliseconds; `None`
    /// = unbounded), unpacked from closed and open buckets of one snapshot, one bucket
    /// at a time (memory stays bounded by one bucket). Buckets whose control min/max
    /// time lie outside the bounds are skipped without decoding a column.
    pub fn measurements(
        buckets: &Collection,
        options: &TimeseriesOptions,
        bounds: TimeBounds,
    ) -> Result<MeasurementStream, StoreError> {
        let snap = buckets.engine().snapshot();
        let open: Vec<Document> = open_buckets_in(&snap, buckets, options)?
            .into_iter()
            .filter(|(b, _)| !bounds.excludes(Some(b.min_time_ms), Some(b.max_time_ms)))
            .flat_map(|(b, _)| unpack_measurements(&b, options))
            .collect();
        let time_field = options.time_field.clone();
        let closed = snap.scan_prefix(buckets.tree(), &[CLOSED]).flat_map(
            move |entry| -> Vec<Result<Document, StoreError>> {
                match closed_measurements(entry, &time_field, bounds) {
                    Ok(docs) => docs.into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                }
            },
        );
        Ok(Box::new(closed.chain(open.into_iter().map(Ok))))
    }
}

/// Measurements streamed from a time-series collection.
pub type MeasurementStream = Box<dyn Iterator<Item = Result<Document, StoreError>> + Send>;

/// The measurements of one stored closed bucket, or none when its time range lies
/// outside `bounds`.
fn closed_measurements(
    entry: Result<(Vec<u8>, Vec<u8>), StorageError>,
    time_field: &str,
    bounds: TimeBounds,
) -> Result<Vec<Document>, StoreError> {
    let (_, v) = entry?;
    let bucket = decode_compressed(&v)?;
    let control = bucket.control_document();
    let time = |side: &str| {
        control
            .get_document(side)
            .ok()
            .and_then(|d| d.get_datetime(time_field).ok())
            .map(|t| t.timestamp_millis())
    };
    if bounds.excludes(time("min"), time("max")) {
        return Ok(Vec::new());
    }
    Ok(bucket.unpack(None)?)
}

/// Inclusive bounds on the time field, in milliseconds, used to prune buckets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeBounds {
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl TimeBounds {
    /// Whether a bucket spanning [`lo`, `hi`] holds no time inside the bounds.
    pub fn excludes(&self, lo: Option<i64>, hi: Option<i64>) -> bool {
        matches!((self.min, hi), (Some(min), Some(hi)) if hi < min)
            || matches!((self.max, lo), (Some(max), Some(lo)) if lo > max)
    }

    /// Narrows the bounds by `other` (both must hold).
    pub fn intersect(self, other: TimeBounds) -> TimeBounds {
        TimeBounds {
            min: match (self.min, other.min) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
            max: match (self.max, other.max) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// The bounds a query filter puts on `time_field`: top-level (or `$and`ed) equality
    /// and `$gt/$gte/$lt/$lte/$eq` on dates. Anything else leaves the bounds open, so
    /// pruning never drops a bucket the filter could match.
    pub fn from_filter(filter: &Document, time_field: &str) -> TimeBounds {
        let mut b = TimeBounds::default();
        for (k, v) in filter {
            if k == "$and" {
                if let Bson::Array(items) = v {
                    for item in items.iter().filter_map(Bson::as_document) {
                        b = b.intersect(TimeBounds::from_filter(item, time_field));
                    }
                }
            } else if k == time_field {
                b = b.intersect(TimeBounds::from_condition(v));
            }
        }
        b
    }

    fn from_condition(v: &Bson) -> TimeBounds {
        let ms = |v: &Bson| match v {
            Bson::DateTime(d) => Some(d.timestamp_millis()),
            _ => None,
        };
        match v {
            Bson::DateTime(d) => TimeBounds {
                min: Some(d.timestamp_millis()),
                max: Some(d.timestamp_millis()),
            },
            Bson::Document(ops) => {
                let mut b = TimeBounds::default();
                for (op, arg) in ops {
                    let t = ms(arg);
                    let one = match op.as_str() {
                        "$gt" | "$gte" => TimeBounds { min: t, max: None },
                        "$lt" | "$lte" => TimeBounds { min: None, max: t },
                        "$eq" => TimeBounds { min: t, max: t },
                        _ => TimeBounds::default(),
                    };
                    b = b.intersect(one);
                }
                b
            }
            _ => TimeBounds::default(),
        }
    }
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
        let cat = Catalog::open(Engine::open(dir).unwrap()).unwrap();
        let opts = TimeseriesOptions::parse(&doc! {"timeField": "t", "metaField": "host"}).unwrap();
        let (c, _) = cat
            .create(
                "db",
                "system.buckets.m",
                doc! {"timeseries": opts.to_document()},
            )
            .unwrap();
        (cat, c, opts)
    }

    #[test]
    fn insert_persists_deltas_and_closes_full_buckets() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, opts) = open(dir.path());
        let store = TimeseriesStore::default();
        let docs: Vec<Document> = (0..2500).map(|i| measurement(i, "a")).collect();
        let out = store.insert(&c, &opts, docs, true).unwrap();
        assert_eq!(out.inserted, 2500);
        assert_eq!(store.stats(&c).num_buckets_closed_due_to_count, 2);
        let buckets = TimeseriesStore::bucket_documents(&c, &opts).unwrap();
        assert_eq!(buckets.len(), 3);
        let ms = collect(TimeseriesStore::measurements(
            &c,
            &opts,
            TimeBounds::default(),
        ));
        assert_eq!(ms.len(), 2500);
        // Times 0..2500 s after T0; bounds on the first 100 s keep only the first bucket.
        let lo = 1_700_000_000_000;
        let f = doc! {"t": {"$gte": bson::DateTime::from_millis(lo), "$lt": bson::DateTime::from_millis(lo + 100_000)}};
        let pruned = collect(TimeseriesStore::measurements(
            &c,
            &opts,
            TimeBounds::from_filter(&f, "t"),
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
        let bytes = encode_delta(&b, true, &ms).unwrap();
        let docs: Vec<Document> = split_documents(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[0].get_i64("min").unwrap(), 0);
        assert_eq!(&docs[1..], &ms[..]);
        assert!(split_documents(&bytes[..bytes.len() - 1]).any(|r| r.is_err()));
        assert!(split_documents(&[9, 0, 0]).any(|r| r.is_err()));
    }

    #[test]
    fn time_bounds_come_from_top_level_and_anded_conditions_only() {
        let t = |ms| bson::DateTime::from_millis(ms);
        let b = TimeBounds::from_filter(
            &doc! {"t": {"$gte": t(10)}, "$and": [{"t": {"$lt": t(20)}}]},
            "t",
        );
        assert_eq!(
            b,
            TimeBounds {
                min: Some(10),
                max: Some(20)
            }
        );
        assert!(b.excludes(Some(21), Some(30)));
        assert!(b.excludes(Some(0), Some(9)));
        assert!(!b.excludes(Some(0), Some(10)));
        let open = TimeBounds::from_filter(&doc! {"$or": [{"t": t(1)}], "t": {"$ne": t(5)}}, "t");
        assert_eq!(open, TimeBounds::default());
    }

    #[test]
    fn restart_closes_open_buckets_without_losing_measurements() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (_cat, c, opts) = open(dir.path());
            let store = TimeseriesStore::default();
            for i in 0..10 {
                store
                    .insert(
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
            .insert(&c, &opts, vec![measurement(100, "a")], true)
            .unwrap();
        let buckets = TimeseriesStore::bucket_documents(&c, &opts).unwrap();
        assert_eq!(
            buckets.len(),
            3,
            "two closed at restart, one new open bucket"
        );
        assert_eq!(
            collect(TimeseriesStore::measurements(
                &c,
                &opts,
                TimeBounds::default()
            ))
            .len(),
            21
        );
    }
}
