//! Deletes and updates of measurements (MongoDB 7.0 arbitrary deletes, 8.0 arbitrary
//! updates), done on buckets under the series lock so that no insert lands in a bucket
//! being rewritten, and committed as one atomic, durable batch.
//!
//! * A filter only on the meta field deletes whole buckets without decoding a column.
//! * An operator update touching only meta-field paths, with a meta-only filter,
//!   rewrites each matching bucket's `meta` in place (same `_id`); the series' open
//!   bucket is closed first, so later inserts of either meta open the right bucket.
//! * Anything else decodes the candidate buckets (pruned by time, meta and control
//!   min/max), removes the matching measurements and rewrites the buckets (control
//!   recomputed, empty buckets removed); updated measurements are inserted again
//!   through the bucket catalog, as MongoDB 8.0 does.

use super::archive_read::refuse_archived_match;
use super::insert_log::{stage_retire, Retired};
use super::keys::*;
use super::scan::scan_locked;
use super::{
    meta_key, raw_measurements, stage_remove, stage_store, BucketPredicate, BucketView, Series,
    StoreError, TimeseriesStore,
};
use crate::bucket::Bucket;
use crate::meta::is_meta_path;
use crate::options::TimeseriesOptions;
use bson::oid::ObjectId;
use bson::{Bson, Document};
use hourglass_catalog::writes::{FindAndModify, FindAndModifyOutcome, UpdateOutcome};
use hourglass_catalog::Collection;
use hourglass_query::filter::Filter;
use hourglass_query::update::Update;
use hourglass_storage::Batch;
use parking_lot::{Mutex, MutexGuard};
use std::collections::HashSet;
use std::sync::Arc;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DeleteOutcome {
    pub deleted: u64,
}

/// An update as the client sent it: the parsed form and, for operator updates, the
/// operator document (to tell meta-only updates apart).
pub struct TsUpdate<'a> {
    pub update: &'a Update,
    pub operators: Option<&'a Document>,
}

/// The series lock, once no bucket of the series is being stored outside it (a
/// rewrite must not race the store of the same bucket).
pub(super) fn lock_settled(series: &Mutex<Series>) -> MutexGuard<'_, Series> {
    loop {
        let s = series.lock();
        if s.closing.is_empty() {
            return s;
        }
        drop(s);
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Whether every path an operator update writes lies in the meta field.
fn only_meta_updates(ops: &Document, mf: &str) -> bool {
    ops.iter().all(|(op, fields)| {
        let Bson::Document(fields) = fields else {
            return false;
        };
        fields.iter().all(|(path, v)| {
            is_meta_path(path, mf)
                && (op != "$rename" || matches!(v, Bson::String(to) if is_meta_path(to, mf)))
        })
    })
}

/// A bucket to rewrite: its new measurements (with meta) and meta.
pub(super) struct Rewrite {
    pub(super) view: BucketView,
    pub(super) remaining: Vec<Document>,
    pub(super) meta: Option<Bson>,
}

impl TimeseriesStore {
    /// Deletes the measurements matching `filter` (only the first one when
    /// `limit_one`).
    pub fn delete(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        filter_doc: &Document,
        limit_one: bool,
    ) -> Result<DeleteOutcome, StoreError> {
        let predicate = BucketPredicate::from_filter(filter_doc, options)?;
        let filter = Filter::parse(filter_doc)?;
        let series = self.series(buckets, options)?;
        let mut s = lock_settled(&series);
        let mut deleted = 0u64;
        let mut rewrites = Vec::new();
        for view in scan_locked(&mut s, buckets, options, &predicate, None)? {
            hourglass_query::interrupt::check()?;
            let view = view?;
            if view.is_archived() {
                refuse_archived_match(&view, options, &filter)?;
                continue;
            }
            if predicate.meta_only && !limit_one {
                deleted += view.count() as u64;
                let meta = view.meta().cloned();
                rewrites.push(Rewrite {
                    view,
                    remaining: Vec::new(),
                    meta,
                });
                continue;
            }
            let mut remaining = Vec::new();
            let mut hit = 0u64;
            for m in view.unpack(options, None)? {
                if (!limit_one || deleted + hit == 0) && filter.matches(&m) {
                    hit += 1;
                } else {
                    remaining.push(m);
                }
            }
            if hit > 0 {
                deleted += hit;
                let meta = view.meta().cloned();
                rewrites.push(Rewrite {
                    view,
                    remaining,
                    meta,
                });
                if limit_one {
                    break;
                }
            }
        }
        commit_rewrites(&mut s, buckets, options, rewrites)?;
        Ok(DeleteOutcome { deleted })
    }

    /// Updates the measurements matching `filter` (every one when `multi`), inserting
    /// one when none matches and `upsert`.
    pub fn update(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        filter_doc: &Document,
        update: TsUpdate<'_>,
        multi: bool,
        upsert: bool,
    ) -> Result<UpdateOutcome, StoreError> {
        let predicate = BucketPredicate::from_filter(filter_doc, options)?;
        let filter = Filter::parse(filter_doc)?;
        let series = self.series(buckets, options)?;
        let mut s = lock_settled(&series);
        let meta_in_place = match (&options.meta_field, update.operators) {
            (Some(mf), Some(ops)) => predicate.meta_only && multi && only_meta_updates(ops, mf),
            _ => false,
        };
        let mut out = UpdateOutcome::default();
        let mut rewrites = Vec::new();
        let mut reinsert = Vec::new();
        for view in scan_locked(&mut s, buckets, options, &predicate, None)? {
            hourglass_query::interrupt::check()?;
            let view = view?;
            if view.is_archived() {
                refuse_archived_match(&view, options, &filter)?;
                continue;
            }
            if meta_in_place {
                let Some(mf) = options.meta_field.as_deref() else {
                    continue;
                };
                let mut d = Document::new();
                if let Some(m) = view.meta() {
                    d.insert(mf, m.clone());
                }
                // The filter names only meta fields, so it resolves a positional `$`
                // against `{<metaField>: meta}` as it would against each measurement.
                let changed = update.update.apply_matched(&mut d, false, Some(&filter))?;
                out.matched += view.count() as u64;
                if changed {
                    out.modified += view.count() as u64;
                    let meta = d.get(mf).cloned();
                    rewrites.push(Rewrite {
                        remaining: view.unpack(options, None)?,
                        view,
                        meta,
                    });
                }
                continue;
            }
            let mut remaining = Vec::new();
            let mut touched = false;
            for m in view.unpack(options, None)? {
                if (multi || out.matched == 0) && filter.matches(&m) {
                    out.matched += 1;
                    let mut new = m.clone();
                    if update
                        .update
                        .apply_matched(&mut new, false, Some(&filter))?
                    {
                        s.catalog.check_time(&new)?;
                        out.modified += 1;
                        touched = true;
                        reinsert.push(new);
                        continue;
                    }
                }
                remaining.push(m);
            }
            if touched {
                let meta = view.meta().cloned();
                rewrites.push(Rewrite {
                    view,
                    remaining,
                    meta,
                });
            }
            if !multi && out.matched > 0 {
                break;
            }
        }
        if out.matched == 0 && upsert {
            let mut new = filter.equality_seed();
            update.update.apply_matched(&mut new, true, Some(&filter))?;
            if !new.contains_key("_id") {
                new.insert("_id", ObjectId::new());
            }
            s.catalog.check_time(&new)?;
            out.upserted = new.get("_id").cloned();
            reinsert.push(new);
        }
        let mut batch = buckets.engine().batch();
        let mut retired = Vec::new();
        let meta_changed = rewrites.iter().any(|r| r.meta.as_ref() != r.view.meta());
        let rewritten: HashSet<ObjectId> = rewrites.iter().map(|r| r.view.id()).collect();
        for r in rewrites {
            stage_rewrite(&mut s, &mut batch, buckets, options, r, &mut retired);
        }
        if meta_changed {
            s.directory = None;
        }
        Self::stage_reinsert(&mut s, &mut batch, &reinsert, &rewritten, &mut retired)?;
        s.commit_retiring(batch, retired)?;
        Ok(out)
    }
}

/// The last time MongoDB 7.0 keeps without extended-range support: 2^31 - 1 seconds
/// after the epoch (2038-01-19T03:14:07Z), in milliseconds.
const EXTENDED_RANGE_MS: i64 = (i32::MAX as i64) * 1000 + 999;

impl TimeseriesStore {
    /// TTL: removes up to `limit` whole buckets whose minimum time is at or before
    /// `cutoff_ms` (now − expireAfterSeconds − bucketMaxSpanSeconds, MongoDB's rule) and,
    /// for a partial TTL index, whose `{meta: ...}` matches `only` (its bucket-level
    /// `partialFilterExpression`), in one atomic batch. Returns how many buckets and
    /// measurements went: none while the collection holds a time before 1970 or after
    /// 2038-01-19 (MongoDB 7.0 does no TTL deletes there).
    pub fn expire(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        cutoff_ms: i64,
        only: Option<&Filter>,
        limit: usize,
    ) -> Result<(u64, u64), StoreError> {
        let selected = |meta: Option<&Bson>| {
            only.is_none_or(|f| {
                let mut d = Document::new();
                if let Some(m) = meta {
                    d.insert("meta", m.clone());
                }
                f.matches(&d)
            })
        };
        let series = self.series(buckets, options)?;
        let mut s = lock_settled(&series);
        let engine = buckets.engine().clone();
        // MongoDB 7.0 does no TTL deletes in a collection holding times it cannot keep in
        // 32-bit seconds (before 1970 or after 2038-01-19).
        let extended = |min_ms: i64, max_ms: i64| min_ms < 0 || max_ms > EXTENDED_RANGE_MS;
        if s.catalog
            .open_buckets()
            .any(|b| extended(b.min_time_ms, b.max_time_ms))
        {
            return Ok((0, 0));
        }
        let snap = engine.snapshot();
        for reverse in [false, true] {
            let closed = snap.range(buckets.tree(), &[CLOSED], Some(&[CLOSED + 1]), reverse);
            if let Some(entry) = closed.into_iter().next() {
                let b = crate::bucket::decode_compressed(&entry?.1)?;
                // The last bucket by minimum time ends at most a span later.
                let span_ms = options.bucket_max_span_seconds.saturating_mul(1000);
                let max = b
                    .max_time_ms
                    .unwrap_or(b.min_time_ms.saturating_add(span_ms));
                if extended(b.min_time_ms, max) {
                    return Ok((0, 0));
                }
            }
        }
        let mut batch = engine.batch();
        let (mut n, mut measurements) = (0u64, 0u64);
        let open: Vec<ObjectId> = s
            .catalog
            .open_buckets()
            .filter(|b| b.min_time_ms <= cutoff_ms && selected(b.meta.as_ref()))
            .map(|b| b.id)
            .take(limit)
            .collect();
        let mut retired = Vec::new();
        for (b, seqs) in s.take_open(&open) {
            stage_retire(&mut batch, buckets.tree(), &b.id, &seqs);
            retired.push((b.id, seqs));
            n += 1;
            measurements += b.count() as u64;
        }
        let end = closed_time_key(cutoff_ms.div_euclid(1000).saturating_add(1).max(1));
        for entry in snap.range(buckets.tree(), &[CLOSED], Some(&end), false) {
            if n as usize >= limit {
                break;
            }
            let (_, bytes) = entry?;
            let b = crate::bucket::decode_compressed(&bytes)?;
            if b.min_time_ms > cutoff_ms || !selected(b.meta()) {
                continue;
            }
            stage_remove(&mut batch, buckets, &b.id, b.meta(), b.min_time_ms);
            n += 1;
            measurements += b.count as u64;
        }
        if n > 0 {
            s.commit_retiring(batch, retired)?;
        }
        Ok((n, measurements))
    }
}

impl TimeseriesStore {
    /// findAndModify on measurements: picks the first match (in `sort` order when
    /// given), removes it or updates it (re-inserting the new version), or upserts.
    pub fn find_and_modify(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        filter_doc: &Document,
        fam: &FindAndModify<'_>,
    ) -> Result<FindAndModifyOutcome, StoreError> {
        let predicate = BucketPredicate::from_filter(filter_doc, options)?;
        let series = self.series(buckets, options)?;
        let mut s = lock_settled(&series);
        // The chosen measurement: its bucket, its row, itself.
        let mut views: Vec<BucketView> = Vec::new();
        let mut best: Option<(usize, usize, Document)> = None;
        'scan: for view in scan_locked(&mut s, buckets, options, &predicate, None)? {
            hourglass_query::interrupt::check()?;
            let view = view?;
            if view.is_archived() {
                refuse_archived_match(&view, options, fam.filter)?;
                continue;
            }
            for (row, d) in view.unpack(options, None)?.into_iter().enumerate() {
                if !fam.filter.matches(&d) {
                    continue;
                }
                let take = match (&best, fam.sort) {
                    (None, _) => true,
                    (Some((_, _, cur)), Some(sort)) => sort.compare(&d, cur).is_lt(),
                    _ => false,
                };
                if take {
                    best = Some((views.len(), row, d));
                    if fam.sort.is_none() {
                        views.push(view);
                        break 'scan;
                    }
                }
            }
            views.push(view);
        }
        let chosen = best.map(|(v, row, d)| (views.swap_remove(v), row, d));
        let mut batch = buckets.engine().batch();
        let mut retired = Vec::new();
        let mut out = FindAndModifyOutcome::default();
        let mut reinsert = Vec::new();
        let mut rewritten = HashSet::new();
        match chosen {
            Some((view, row, old)) => {
                out.n = 1;
                rewritten.insert(view.id());
                let mut remaining = view.unpack(options, None)?;
                remaining.remove(row);
                match fam.update {
                    None => out.value = Some(old),
                    Some(update) => {
                        out.updated_existing = true;
                        let mut new = old.clone();
                        update.apply_matched(&mut new, false, Some(fam.filter))?;
                        s.catalog.check_time(&new)?;
                        out.value = Some(if fam.return_new { new.clone() } else { old });
                        reinsert.push(new);
                    }
                }
                let meta = view.meta().cloned();
                stage_rewrite(
                    &mut s,
                    &mut batch,
                    buckets,
                    options,
                    Rewrite {
                        view,
                        remaining,
                        meta,
                    },
                    &mut retired,
                );
            }
            None => {
                if let (Some(update), true) = (fam.update, fam.upsert) {
                    let mut new = fam.filter.equality_seed();
                    update.apply_matched(&mut new, true, Some(fam.filter))?;
                    if !new.contains_key("_id") {
                        new.insert("_id", ObjectId::new());
                    }
                    s.catalog.check_time(&new)?;
                    out.n = 1;
                    out.upserted = new.get("_id").cloned();
                    if fam.return_new {
                        out.value = Some(new.clone());
                    }
                    reinsert.push(new);
                }
            }
        }
        Self::stage_reinsert(&mut s, &mut batch, &reinsert, &rewritten, &mut retired)?;
        s.commit_retiring(batch, retired)?;
        Ok(out)
    }

    /// Stages the insert of updated (or upserted) measurements into `batch`, with the
    /// buckets it closes stored in the same batch (they join `retired`); the first
    /// measurement refused fails the write. The buckets they came from (`rewritten`,
    /// staged in the same batch) are not reopened for them.
    fn stage_reinsert(
        s: &mut Series,
        batch: &mut Batch,
        measurements: &[Document],
        rewritten: &HashSet<ObjectId>,
        retired: &mut Vec<Retired>,
    ) -> Result<(), StoreError> {
        if measurements.is_empty() {
            return Ok(());
        }
        let raw = raw_measurements(measurements)?;
        let raw: Vec<&bson::RawDocument> = raw.iter().map(|r| &**r).collect();
        let read = s.catalog.reader().read(&raw);
        let (ins, closed) = Self::stage_insert(s, batch, read, true, rewritten)?;
        if let Some((_, e)) = ins.errors.into_iter().next() {
            return Err(e);
        }
        let buckets = s.buckets.clone();
        for (b, seqs) in closed {
            super::stage_close(batch, &buckets, &b, &seqs);
            s.closing.remove(&b.id);
            retired.push((b.id, seqs));
        }
        Ok(())
    }
}

/// Stages one bucket rewrite: an open bucket is taken out of the catalog (its stored
/// mark covers its log entries; it joins `retired`) and its stored copy, if it was
/// reopened, removed; the bucket is stored again with its remaining measurements, or
/// removed.
/// Stages `rewrites` in one batch and commits it durably.
pub(super) fn commit_rewrites(
    s: &mut Series,
    buckets: &Collection,
    options: &TimeseriesOptions,
    rewrites: Vec<Rewrite>,
) -> Result<(), StoreError> {
    let mut batch = buckets.engine().batch();
    let mut retired = Vec::new();
    for r in rewrites {
        stage_rewrite(s, &mut batch, buckets, options, r, &mut retired);
    }
    s.commit_retiring(batch, retired)
}

fn stage_rewrite(
    s: &mut Series,
    batch: &mut Batch,
    buckets: &Collection,
    options: &TimeseriesOptions,
    r: Rewrite,
    retired: &mut Vec<Retired>,
) {
    let id = r.view.id();
    let min_time_ms = r.view.min_time_ms();
    match &r.view {
        // Never staged: writes skip archived views (refuse_archived_match).
        BucketView::Archived(_) => return,
        BucketView::Open(_) => {
            for (_, seqs) in s.take_open(&[id]) {
                stage_retire(batch, buckets.tree(), &id, &seqs);
                retired.push((id, seqs));
            }
        }
        BucketView::Stored(_) => {}
    }
    // What is stored of the bucket (an open one that was reopened is also stored, closed,
    // with what it held before) goes, or its meta index key when its meta changes.
    if r.remaining.is_empty() {
        stage_remove(batch, buckets, &id, r.view.meta(), min_time_ms);
    } else if r.meta.as_ref() != r.view.meta() {
        batch.delete(
            buckets.tree(),
            &meta_index_key(&meta_key(r.view.meta()), min_time_ms, &id),
        );
    }
    if !r.remaining.is_empty() {
        let mut bucket = Bucket::with_id(options, id, r.meta, min_time_ms);
        for m in r.remaining {
            bucket.add(m);
        }
        stage_store(batch, buckets, &bucket);
        s.note_closed(&bucket);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::BucketPredicate;
    use bson::doc;
    use hourglass_catalog::Catalog;

    const T0: i64 = 1_700_000_000_000;

    fn setup(
        dir: &std::path::Path,
    ) -> (Catalog, Arc<Collection>, TimeseriesOptions, TimeseriesStore) {
        let (cat, c, opts) = crate::store::test_collection(dir, "t", "tag");
        let store = TimeseriesStore::default();
        // 1500 measurements of host a (one closed bucket, one open), 10 of host b.
        let mut docs: Vec<Document> = (0..1500)
            .map(|i| doc! {"t": bson::DateTime::from_millis(T0 + i * 1000), "tag": {"host": "a"}, "v": i})
            .collect();
        docs.extend((0..10).map(|i| doc! {"t": bson::DateTime::from_millis(T0 + i * 1000), "tag": {"host": "b"}, "v": i}));
        store.insert_docs(&c, &opts, docs, true).unwrap();
        (cat, c, opts, store)
    }

    /// An operator update of measurements.
    fn update(
        store: &TimeseriesStore,
        c: &Arc<Collection>,
        o: &TimeseriesOptions,
        filter: Document,
        ops: Document,
        multi: bool,
        upsert: bool,
    ) -> Result<UpdateOutcome, StoreError> {
        let u = Update::parse(&ops).unwrap();
        let update = TsUpdate {
            update: &u,
            operators: Some(&ops),
        };
        store.update(c, o, &filter, update, multi, upsert)
    }

    fn all(store: &TimeseriesStore, c: &Arc<Collection>, o: &TimeseriesOptions) -> Vec<Document> {
        store
            .measurements(c, o, &BucketPredicate::all(), None)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn expire_removes_whole_buckets_up_to_the_cutoff_in_bounded_batches() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, o, store) = setup(dir.path());
        // Buckets: a [T0, +1000s) closed, a [T0+1000s..) open, b [T0..) open.
        let r = o.round_down_time(T0);
        assert_eq!(store.expire(&c, &o, r - 1, None, 10).unwrap(), (0, 0));
        assert_eq!(
            store.expire(&c, &o, r, None, 1).unwrap().0,
            1,
            "the limit bounds a batch"
        );
        assert_eq!(store.expire(&c, &o, r, None, 10).unwrap().0, 1);
        assert_eq!(
            all(&store, &c, &o).len(),
            500,
            "only the later bucket of a is left"
        );
        let (n, m) = store.expire(&c, &o, T0 + 1_000_000, None, 10).unwrap();
        assert_eq!((n, m), (1, 500));
        assert!(all(&store, &c, &o).is_empty());
    }

    #[test]
    fn expire_deletes_nothing_while_a_time_needs_extended_range() {
        for t in [-86_400_000_i64, 2_200_000_000_000] {
            let dir = tempfile::tempdir().unwrap();
            let (_cat, c, o, store) = setup(dir.path());
            let far = doc! {"t": bson::DateTime::from_millis(t), "tag": {"host": "z"}, "v": 0};
            store.insert_docs(&c, &o, vec![far], true).unwrap();
            let (n, _) = store.expire(&c, &o, T0 + 1_000_000, None, 10).unwrap();
            assert_eq!(n, 0, "a measurement at {t} ms stops TTL");
            assert_eq!(all(&store, &c, &o).len(), 1511);
        }
    }

    #[test]
    fn expire_with_a_meta_filter_removes_only_the_matching_series_buckets() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, o, store) = setup(dir.path());
        let only_b = Filter::parse(&doc! {"meta.host": "b"}).unwrap();
        let (n, m) = store
            .expire(&c, &o, T0 + 10_000_000, Some(&only_b), 10)
            .unwrap();
        assert_eq!((n, m), (1, 10));
        let left = all(&store, &c, &o);
        assert_eq!(left.len(), 1500);
        assert!(left
            .iter()
            .all(|d| d.get_document("tag").unwrap() == &doc! {"host": "a"}));
    }

    #[test]
    fn delete_by_meta_removes_whole_buckets() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, o, store) = setup(dir.path());
        let out = store
            .delete(&c, &o, &doc! {"tag.host": "a"}, false)
            .unwrap();
        assert_eq!(out.deleted, 1500);
        let left = all(&store, &c, &o);
        assert_eq!(left.len(), 10);
        assert!(left
            .iter()
            .all(|m| m.get_document("tag").unwrap().get_str("host") == Ok("b")));
        assert_eq!(store.bucket_documents(&c, &o).unwrap().len(), 1);
    }

    #[test]
    fn delete_by_measurement_rewrites_buckets_and_recomputes_control() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, o, store) = setup(dir.path());
        let out = store
            .delete(&c, &o, &doc! {"v": {"$lt": 995}}, false)
            .unwrap();
        assert_eq!(out.deleted, 995 + 10);
        assert_eq!(all(&store, &c, &o).len(), 505);
        let first = &store.bucket_documents(&c, &o).unwrap()[0];
        let min = first
            .get_document("control")
            .unwrap()
            .get_document("min")
            .unwrap();
        assert_eq!(min.get_i64("v").unwrap(), 995);
        // A deleteOne removes exactly one.
        assert_eq!(store.delete(&c, &o, &doc! {}, true).unwrap().deleted, 1);
        assert_eq!(all(&store, &c, &o).len(), 504);
    }

    #[test]
    fn meta_update_rewrites_meta_in_place_and_new_inserts_follow() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, o, store) = setup(dir.path());
        let before: Vec<Bson> = store
            .bucket_documents(&c, &o)
            .unwrap()
            .iter()
            .map(|b| b.get("_id").unwrap().clone())
            .collect();
        let out = update(
            &store,
            &c,
            &o,
            doc! {"tag.host": "b"},
            doc! {"$set": {"tag.host": "z"}},
            true,
            false,
        )
        .unwrap();
        assert_eq!((out.matched, out.modified), (10, 10));
        let after = store.bucket_documents(&c, &o).unwrap();
        let ids: Vec<Bson> = after
            .iter()
            .map(|b| b.get("_id").unwrap().clone())
            .collect();
        assert_eq!(before.len(), ids.len());
        assert!(
            before.iter().all(|id| ids.contains(id)),
            "buckets keep their _id"
        );
        let z: Vec<&Document> = after
            .iter()
            .filter(|b| b.get_document("meta").unwrap().get_str("host") == Ok("z"))
            .collect();
        assert_eq!(z.len(), 1);
        // A new measurement for the old meta opens a new bucket; the meta index finds z.
        store
            .insert_docs(
                &c,
                &o,
                vec![doc! {"t": bson::DateTime::from_millis(T0), "tag": {"host": "b"}}],
                true,
            )
            .unwrap();
        let p = BucketPredicate::from_filter(&doc! {"tag.host": "z"}, &o).unwrap();
        let n: usize = store.measurements(&c, &o, &p, None).unwrap().count();
        assert_eq!(n, 10);
    }

    #[test]
    fn measurement_update_reinserts_and_rejects_a_non_date_time() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, o, store) = setup(dir.path());
        let out = update(
            &store,
            &c,
            &o,
            doc! {"v": {"$gte": 1490}},
            doc! {"$inc": {"v": 1000000}},
            true,
            false,
        )
        .unwrap();
        assert_eq!((out.matched, out.modified), (10, 10));
        let ms = all(&store, &c, &o);
        assert_eq!(ms.len(), 1510);
        assert_eq!(
            ms.iter()
                .filter(|m| m.get_i64("v").is_ok_and(|v| v >= 1_000_000))
                .count(),
            10
        );
        let e = update(
            &store,
            &c,
            &o,
            doc! {"v": 3},
            doc! {"$set": {"t": "soon"}},
            false,
            false,
        )
        .unwrap_err();
        assert_eq!(e.code(), 2);
        assert_eq!(
            all(&store, &c, &o).len(),
            1510,
            "a failed update changes nothing"
        );
        let out = update(
            &store,
            &c,
            &o,
            doc! {"t": bson::DateTime::from_millis(T0 - 5), "tag": "new"},
            doc! {"$set": {"v": -1}},
            false,
            true,
        )
        .unwrap();
        assert!(out.upserted.is_some());
        assert_eq!(all(&store, &c, &o).len(), 1511);
    }
}
