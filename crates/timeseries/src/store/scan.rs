//! Bucket selection for reads, updates and deletes: which buckets a
//! [`BucketPredicate`] may match, found without decoding a column.
//!
//! * With a predicate on the meta field, the series directory (cached in memory) is
//!   matched once per series, and only the matching series' meta-index ranges within
//!   the time bounds are read: a point query touches only its own buckets.
//! * Otherwise the closed buckets are read in `_id` (= minimum time) order over the
//!   key range the time bounds allow (a bucket starts at most one span before the lower
//!   bound).
//!
//! Each candidate is then checked against its control min/max (time and measurement
//! ranges) before it is yielded. Open buckets come from memory. A scan split across
//! threads takes stored buckets unparsed ([`BucketScan::next_scanned`]) and leaves the
//! parsing and the check to its workers ([`Scanned::resolve`]).

use super::counters::ScanCounters;
use super::keys::*;
use super::{
    load_directory, BucketPredicate, BucketView, Directory, Series, StoreError, TimeseriesStore,
};
use crate::bucket::decode_compressed_owned;
use crate::meta::meta_key;
use crate::options::TimeseriesOptions;
use bson::oid::ObjectId;
use hourglass_catalog::Collection;
use hourglass_storage::{SharedValue, Snapshot};
use std::collections::HashSet;
use std::sync::Arc;

/// The selected buckets: archived rows first, then stored buckets (in time order, or
/// per series), then open ones; or all of that backwards
/// ([`ScanOrder::newest_first`]).
pub struct BucketScan {
    archived: Box<dyn Iterator<Item = Result<BucketView, StoreError>> + Send>,
    stored: Box<dyn Iterator<Item = Result<Scanned, StoreError>> + Send>,
    open: std::vec::IntoIter<BucketView>,
    newest_first: bool,
    pub counters: Arc<ScanCounters>,
}

/// Ends the scan of stored buckets early: given a stored bucket's minimum time (ms,
/// from its key), true when neither it nor any stored bucket after it in the scan's
/// order can matter to the reader.
pub type StopAt = Arc<dyn Fn(i64) -> bool + Send + Sync>;

/// The order a scan yields buckets in, and when it may stop.
#[derive(Clone, Default)]
pub struct ScanOrder {
    /// Open buckets, then stored ones by descending minimum time, then archived rows
    /// (the reverse of the usual order).
    pub newest_first: bool,
    /// Asked of each stored bucket when they are read in time order (not through the
    /// meta index). Buckets before 1970 all carry the key time 0, unordered among
    /// themselves, so it is not asked at that time when reading oldest first.
    pub stop: Option<StopAt>,
}

/// A bucket as the scan reads it: a view (open and archived buckets), or a stored
/// bucket's bytes, not yet parsed nor checked against its control min/max.
pub enum Scanned {
    View(BucketView),
    Stored(SharedValue, Arc<StoredCheck>),
}

/// What a stored bucket is checked against, and where the outcome is counted.
pub struct StoredCheck {
    predicate: BucketPredicate,
    options: TimeseriesOptions,
    /// Whether the meta predicate is still to check (not when the meta index chose the
    /// bucket).
    check_meta: bool,
    counters: Arc<ScanCounters>,
}

impl Scanned {
    /// The bucket's view, or `None` when its control min/max rule it out (counted as
    /// pruned). A bucket whose bytes do not parse is an error.
    pub fn resolve(self) -> Option<Result<BucketView, StoreError>> {
        let (bytes, check) = match self {
            Scanned::View(v) => return Some(Ok(v)),
            Scanned::Stored(bytes, check) => (bytes, check),
        };
        let view = match decode_compressed_owned(bytes) {
            Ok(b) => BucketView::Stored(Box::new(b)),
            Err(e) => return Some(Err(e.into())),
        };
        let counters = &check.counters;
        if stored_may_match(&check.predicate, &check.options, &view, check.check_meta) {
            ScanCounters::add(&counters.buckets_returned, 1);
            Some(Ok(view))
        } else {
            ScanCounters::add(&counters.buckets_pruned, 1);
            None
        }
    }
}

impl BucketScan {
    /// The next bucket, stored ones unparsed: [`Scanned::resolve`] gives its view.
    pub fn next_scanned(&mut self) -> Option<Result<Scanned, StoreError>> {
        let view = |v: Option<Result<BucketView, StoreError>>| v.map(|v| v.map(Scanned::View));
        let next = if self.newest_first {
            view(self.open.next_back().map(Ok))
                .or_else(|| self.stored.next())
                .or_else(|| view(self.archived.next()))
        } else {
            view(self.archived.next())
                .or_else(|| self.stored.next())
                .or_else(|| view(self.open.next().map(Ok)))
        };
        if let Some(Ok(Scanned::View(_))) = next {
            ScanCounters::add(&self.counters.buckets_returned, 1);
        }
        next
    }
}

impl Iterator for BucketScan {
    type Item = Result<BucketView, StoreError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.next_scanned()? {
                Ok(scanned) => {
                    if let Some(view) = scanned.resolve() {
                        return Some(view);
                    }
                }
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

fn stored_may_match(
    p: &BucketPredicate,
    options: &TimeseriesOptions,
    v: &BucketView,
    check_meta: bool,
) -> bool {
    let lo = Some(v.min_time_ms());
    let hi = v.max_time_ms();
    if p.bounds.excludes(lo, hi) {
        return false;
    }
    if check_meta && p.meta.is_some() && !p.meta_matches(options.meta_field.as_deref(), v.meta()) {
        return false;
    }
    if p.has_ranges() {
        return !p.refuted_by_bounds(|f| v.control_bounds(f));
    }
    true
}

impl TimeseriesStore {
    /// The buckets `predicate` may match, from one consistent view.
    pub fn scan(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        predicate: &BucketPredicate,
    ) -> Result<BucketScan, StoreError> {
        self.scan_fields(buckets, options, predicate, None, ScanOrder::default())
    }

    /// [`TimeseriesStore::scan`] of a read that needs only `fields` (top-level names)
    /// beside time and meta: archived files decode only those columns.
    pub fn scan_fields(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        predicate: &BucketPredicate,
        fields: Option<&[String]>,
        order: ScanOrder,
    ) -> Result<BucketScan, StoreError> {
        let series = self.series(buckets, options)?;
        let mut s = series.lock();
        scan_locked_in(&mut s, buckets, options, predicate, fields, order)
    }
}

/// [`TimeseriesStore::scan`] with the series lock held by the caller.
pub(super) fn scan_locked(
    s: &mut Series,
    buckets: &Collection,
    options: &TimeseriesOptions,
    predicate: &BucketPredicate,
    fields: Option<&[String]>,
) -> Result<BucketScan, StoreError> {
    scan_locked_in(s, buckets, options, predicate, fields, ScanOrder::default())
}

/// [`scan_locked`] in `order`.
fn scan_locked_in(
    s: &mut Series,
    buckets: &Collection,
    options: &TimeseriesOptions,
    predicate: &BucketPredicate,
    fields: Option<&[String]>,
    order: ScanOrder,
) -> Result<BucketScan, StoreError> {
    let counters = Arc::new(ScanCounters::default());
    let (open, in_memory) = open_views(s, predicate, options, &counters);
    let snap = buckets.engine().snapshot();
    let directory = match (&predicate.meta, &options.meta_field) {
        (Some(_), Some(_)) => Some(directory(s, &snap, buckets)?),
        _ => None,
    };
    let archived = super::archive_read::archived_views(
        &snap,
        buckets,
        options,
        predicate,
        fields,
        counters.clone(),
    )?;
    let newest_first = order.newest_first;
    let source = StoredSource {
        snap,
        directory,
        in_memory,
    };
    let stored = stored_views(source, buckets, options, predicate, order, counters.clone());
    Ok(BucketScan {
        archived,
        stored,
        open: open.into_iter(),
        newest_first,
        counters,
    })
}

/// Snapshots of the open (and closing) buckets that may match, and the ids of all of
/// them (stored copies of these are skipped).
fn open_views(
    s: &Series,
    predicate: &BucketPredicate,
    options: &TimeseriesOptions,
    counters: &ScanCounters,
) -> (Vec<BucketView>, HashSet<ObjectId>) {
    let mut ids = HashSet::new();
    let mut views = Vec::new();
    for b in s.catalog.shared_open_buckets() {
        ids.insert(b.id);
        if predicate.may_match_bucket(options, b) {
            views.push(BucketView::Open(b.clone()));
        } else {
            ScanCounters::add(&counters.buckets_pruned, 1);
        }
    }
    for b in s.closing.values() {
        ids.insert(b.id);
        if predicate.may_match_bucket(options, b) {
            views.push(BucketView::Open(b.clone()));
        } else {
            ScanCounters::add(&counters.buckets_pruned, 1);
        }
    }
    views.sort_by_key(BucketView::id);
    (views, ids)
}

/// The series directory, loaded from `snap` on first use (under the series lock).
pub(super) fn directory(
    s: &mut Series,
    snap: &Snapshot,
    buckets: &Collection,
) -> Result<Arc<Directory>, StoreError> {
    if let Some(d) = &s.directory {
        return Ok(d.clone());
    }
    let mut dir = load_directory(snap, buckets)?;
    for b in s.closing.values() {
        dir.insert(meta_key(b.meta.as_ref()), b.meta.clone());
    }
    let dir = Arc::new(dir);
    s.directory = Some(dir.clone());
    Ok(dir)
}

/// Where the stored buckets of a scan are read from.
struct StoredSource {
    snap: Snapshot,
    /// The series directory, when the predicate names the meta field.
    directory: Option<Arc<Directory>>,
    /// Buckets held in memory (their stored copies are skipped).
    in_memory: HashSet<ObjectId>,
}

fn stored_views(
    source: StoredSource,
    buckets: &Collection,
    options: &TimeseriesOptions,
    predicate: &BucketPredicate,
    order: ScanOrder,
    counters: Arc<ScanCounters>,
) -> Box<dyn Iterator<Item = Result<Scanned, StoreError>> + Send> {
    let StoredSource {
        snap,
        directory,
        in_memory,
    } = source;
    let tree = buckets.tree().clone();
    let span_ms = options.bucket_max_span_seconds.saturating_mul(1000);
    let bounds = predicate.bounds;
    let lo = bounds
        .min
        .map(|m| m.saturating_sub(span_ms))
        .unwrap_or(i64::MIN);
    let hi = bounds.max.unwrap_or(i64::MAX);
    let check = |check_meta| {
        Arc::new(StoredCheck {
            predicate: predicate.clone(),
            options: options.clone(),
            check_meta,
            counters: counters.clone(),
        })
    };
    let predicate = predicate.clone();
    let meta_field = options.meta_field.clone();
    match directory {
        Some(dir) => {
            // Meta index: matching series, then each one's buckets in the time range.
            ScanCounters::add(&counters.used_meta_index, 1);
            ScanCounters::add(&counters.series_total, dir.len() as u64);
            let mut ids: Vec<ObjectId> = Vec::new();
            let mut error = None;
            for (key, meta) in dir.iter() {
                if !predicate.meta_matches(meta_field.as_deref(), meta.as_ref()) {
                    continue;
                }
                ScanCounters::add(&counters.series_matched, 1);
                let (start, end) = meta_index_range(key, lo, hi);
                for entry in snap.range(&tree, &start, Some(&end), false) {
                    match entry {
                        Ok((k, _)) => {
                            ids.extend(meta_index_id(&k).filter(|id| !in_memory.contains(id)))
                        }
                        Err(e) => error = Some(StoreError::from(e)),
                    }
                }
            }
            if order.newest_first {
                ids.reverse();
            }
            let head = error.map(Err).into_iter();
            let check = check(false);
            let rest = ids.into_iter().filter_map(move |id| {
                let bytes = match snap.get_shared(&tree, &bucket_key(CLOSED, &id)) {
                    Ok(Some(b)) => b,
                    Ok(None) => return None,
                    Err(e) => return Some(Err(e.into())),
                };
                ScanCounters::add(&check.counters.buckets_examined, 1);
                Some(Ok(Scanned::Stored(bytes, check.clone())))
            });
            Box::new(head.chain(rest))
        }
        None => {
            let start = closed_time_key(lo.div_euclid(1000));
            // Buckets before 1970 all carry the `_id` time 0 (it is unsigned), so an
            // upper bound before 1970 still reads those keys.
            let check = check(true);
            let end = match hi.div_euclid(1000).checked_add(1) {
                Some(h) if h <= i64::from(u32::MAX) => closed_time_key(h.max(1)),
                _ => vec![CLOSED + 1],
            };
            Box::new(
                snap.range_shared(&tree, &start, Some(&end), order.newest_first)
                    .take_while(move |entry| {
                        let secs = match entry {
                            Ok((k, _)) => {
                                object_id_at(k).map(|id| id.timestamp().timestamp_millis() / 1000)
                            }
                            Err(_) => None,
                        };
                        let ordered = secs.is_some_and(|s| {
                            s < i64::from(u32::MAX) && (order.newest_first || s > 0)
                        });
                        match (&order.stop, secs) {
                            (Some(stop), Some(s)) if ordered => !stop(s * 1000),
                            _ => true,
                        }
                    })
                    .filter_map(move |entry| {
                        let (k, bytes) = match entry {
                            Ok(kv) => kv,
                            Err(e) => return Some(Err(e.into())),
                        };
                        if object_id_at(&k).is_some_and(|id| in_memory.contains(&id)) {
                            return None;
                        }
                        ScanCounters::add(&check.counters.buckets_examined, 1);
                        Some(Ok(Scanned::Stored(bytes, check.clone())))
                    }),
            )
        }
    }
}
