//! The newest measurement of every series, for "last point" queries: per series only
//! its newest buckets are read (the meta index backwards, stopping one bucket span
//! below the newest bucket's start), the open bucket from memory, and archived files
//! only when one may hold a newer measurement than those.

use super::archive::manifest;
use super::archive_read::file_buckets;
use super::keys::*;
use super::scan::directory;
use super::{StoreError, TimeseriesStore};
use crate::bucket::{decode_compressed_owned, Bucket};
use crate::column::NumericValues;
use crate::meta::meta_key;
use crate::options::TimeseriesOptions;
use bson::{Bson, Document};
use hourglass_catalog::Collection;
use hourglass_query::interrupt;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// Index and time of the newest measurement in a time column (first one on ties).
fn newest(times: impl Iterator<Item = Option<i64>>) -> Option<(usize, i64)> {
    let mut best: Option<(usize, i64)> = None;
    for (i, t) in times.enumerate() {
        if let Some(t) = t {
            if best.is_none_or(|(_, b)| t > b) {
                best = Some((i, t));
            }
        }
    }
    best
}

/// Measurement `i` of an open bucket in unpack order (time, meta, data fields).
fn open_row(b: &Bucket, i: usize, options: &TimeseriesOptions) -> Option<Document> {
    let m = b.row(i)?;
    let tf = options.time_field.as_str();
    let mut d = Document::new();
    if let Some(t) = m.get(tf) {
        d.insert(tf, t.clone());
    }
    if let (Some(mf), Some(meta)) = (&options.meta_field, &b.meta) {
        d.insert(mf.clone(), meta.clone());
    }
    for (f, v) in m {
        if f != tf {
            d.insert(f, v);
        }
    }
    Some(d)
}

/// A row mask selecting row `i` only.
fn only(i: usize) -> Vec<bool> {
    let mut m = vec![false; i + 1];
    m[i] = true;
    m
}

fn time_of(v: Option<&Bson>) -> Option<i64> {
    match v {
        Some(Bson::DateTime(d)) => Some(d.timestamp_millis()),
        _ => None,
    }
}

/// Newest measurement per series key: meta, time, measurement.
type Best = BTreeMap<Vec<u8>, (Option<Bson>, i64, Document)>;

fn offer(best: &mut Best, meta: Option<&Bson>, t: i64, doc: &dyn Fn() -> Option<Document>) {
    let key = meta_key(meta);
    if best.get(&key).is_some_and(|(_, b, _)| *b >= t) {
        return;
    }
    if let Some(d) = doc() {
        best.insert(key, (meta.cloned(), t, d));
    }
}

impl TimeseriesStore {
    /// For each series: its meta value and its newest measurement (unpacked).
    pub fn latest_per_series(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
    ) -> Result<Vec<(Option<Bson>, Document)>, StoreError> {
        let series = self.series(buckets, options)?;
        let mut s = series.lock();
        let tf = options.time_field.as_str();
        let mut best: Best = BTreeMap::new();
        let mut in_memory = HashSet::new();
        let open: Vec<Arc<Bucket>> = s
            .catalog
            .shared_open_buckets()
            .cloned()
            .chain(s.closing.values().cloned())
            .collect();
        for b in &open {
            in_memory.insert(b.id);
            let times = b.column_values(tf).unwrap_or_default();
            if let Some((i, t)) = newest(times.iter().map(|v| time_of(v.as_ref()))) {
                offer(&mut best, b.meta.as_ref(), t, &|| open_row(b, i, options));
            }
        }
        let snap = buckets.engine().snapshot();
        let dir = directory(&mut s, &snap, buckets)?;
        drop(s);
        let series: Vec<(&Vec<u8>, &Option<Bson>)> = dir.iter().collect();
        let newest_of = |&(key, _): &(&Vec<u8>, &Option<Bson>)| {
            let bar = best.get(key).map(|(_, t, _)| *t);
            stored_newest(&snap, buckets, options, &in_memory, key, bar)
        };
        for (found, (_, meta)) in split_series(&series, &newest_of)?.into_iter().zip(&series) {
            if let Some((t, d)) = found {
                offer(&mut best, meta.as_ref(), t, &|| Some(d.clone()));
            }
        }
        // Archived rows, newest files first: a file is read only when it may hold a
        // series' newest measurement (its max time is newer than that series' best).
        let mut files = manifest(&snap, buckets)?;
        files.sort_by_key(|f| std::cmp::Reverse(f.max_time_ms));
        for f in files {
            let newer = |key: &[u8]| best.get(key).is_none_or(|(_, t, _)| *t < f.max_time_ms);
            let may_hold = match &f.metas {
                Some(metas) => metas.iter().any(|m| newer(&meta_key(Some(m)))),
                None => dir.is_empty() || dir.keys().any(|k| newer(k)),
            };
            if !may_hold {
                continue;
            }
            for b in file_buckets(&f, options)? {
                let times = b.column_values(tf).unwrap_or_default();
                if let Some((i, t)) = newest(times.iter().map(|v| time_of(v.as_ref()))) {
                    offer(&mut best, b.meta.as_ref(), t, &|| open_row(&b, i, options));
                }
            }
        }
        Ok(best.into_values().map(|(m, _, d)| (m, d)).collect())
    }
}

/// Series past which [`split_series`] uses threads: below it the query takes well under
/// a millisecond a series and threads would not pay.
const SERIAL_SERIES: usize = 64;

/// `newest_of` of every series, in order; past [`SERIAL_SERIES`] the series are split in
/// contiguous parts across the machine's cores (at most 8), each part under the
/// operation's interrupt. The first error is the result.
fn split_series<T, R>(
    series: &[T],
    newest_of: &(dyn Fn(&T) -> Result<R, StoreError> + Sync),
) -> Result<Vec<R>, StoreError>
where
    T: Sync,
    R: Send,
{
    let run = |part: &[T]| -> Result<Vec<R>, StoreError> {
        part.iter()
            .map(|x| {
                interrupt::check()?;
                newest_of(x)
            })
            .collect()
    };
    let threads = crate::threads::workers();
    if threads < 2 || series.len() <= SERIAL_SERIES {
        return run(series);
    }
    let operation = interrupt::current();
    std::thread::scope(|s| {
        let handles: Vec<_> = series
            .chunks(series.len().div_ceil(threads))
            .map(|part| {
                let operation = operation.clone();
                s.spawn(move || {
                    let _entered = operation.map(interrupt::enter);
                    run(part)
                })
            })
            .collect();
        let parts = crate::threads::join_all(handles)?;
        Ok(parts.into_iter().flatten().collect())
    })
}

/// The newest stored (closed) measurement of the series `key` and its time, when newer
/// than `bar` (the newest found in memory): its buckets are read newest first through the
/// meta index, stopping one bucket span below the newest bucket's start.
fn stored_newest(
    snap: &hourglass_storage::Snapshot,
    buckets: &Collection,
    options: &TimeseriesOptions,
    in_memory: &HashSet<bson::oid::ObjectId>,
    key: &[u8],
    bar: Option<i64>,
) -> Result<Option<(i64, Document)>, StoreError> {
    let span = options.bucket_max_span_seconds.saturating_mul(1000);
    let tree = buckets.tree();
    let tf = options.time_field.as_str();
    let (start, end) = meta_index_range(key, i64::MIN, i64::MAX);
    let mut top: Option<i64> = None;
    let mut found: Option<(i64, Document)> = None;
    for entry in snap.range(tree, &start, Some(&end), true) {
        let (k, _) = entry?;
        let (Some(id), Some(min)) = (meta_index_id(&k), meta_index_min_time(&k)) else {
            continue;
        };
        match top {
            Some(t) if min < t.saturating_sub(span) => break,
            None => top = Some(min),
            _ => {}
        }
        if in_memory.contains(&id) {
            continue;
        }
        let best = found.as_ref().map(|(t, _)| *t).max(bar);
        if best.is_some_and(|b| b >= min.saturating_add(span)) {
            break;
        }
        let Some(bytes) = snap.get_shared(tree, &bucket_key(CLOSED, &id))? else {
            continue;
        };
        let b = decode_compressed_owned(bytes)?;
        // Times decoded as numbers when stored so; else as BSON values.
        let typed = b.typed_column(tf)?;
        let newest_row = match typed.as_ref().map(|c| (c, &c.values)) {
            Some((col, NumericValues::Dates(times))) => newest(
                times
                    .iter()
                    .enumerate()
                    .map(|(i, t)| col.has(i).then_some(*t)),
            ),
            _ => {
                let times = b.column(tf)?.unwrap_or_default();
                newest(times.iter().map(|v| time_of(v.as_ref())))
            }
        };
        if let Some((i, t)) = newest_row {
            if best.is_none_or(|b| b < t) {
                // A row that does not unpack is passed over, as from an open bucket.
                if let Some(d) = b
                    .unpack_rows(None, Some(&only(i)))
                    .ok()
                    .and_then(|mut r| r.pop())
                {
                    found = Some((t, d));
                }
            }
        }
    }
    Ok(found)
}
