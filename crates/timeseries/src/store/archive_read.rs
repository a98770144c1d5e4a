//! Reads of archived measurements, merged into every bucket scan: the manifest (read
//! from the scan's own snapshot, so a file and the buckets it replaced are never both
//! seen) is pruned by each file's time range and distinct metas, each remaining file's
//! row groups by their statistics (time, and the measurement ranges the predicate
//! names), and the rows of the row groups left become in-memory buckets — runs of one
//! series, at most [`ARCHIVED_BUCKET_ROWS`] rows — that the query paths read like open
//! buckets. Files are opened lazily, in manifest order.
//!
//! Archived rows are read-only: an update or delete whose filter matches one is refused
//! with `IllegalOperation` before anything changes ([`refuse_archived_match`]).

use super::archive::manifest;
use super::counters::ScanCounters;
use super::{BucketPredicate, BucketView, StoreError};
use crate::bucket::Bucket;
use crate::options::TimeseriesOptions;
use bson::oid::ObjectId;
use bson::{Bson, Document};
use hourglass_archive::columnar::documents;
use hourglass_archive::parquet_file::OpenedFile;
use hourglass_archive::{ArchiveError, FileEntry};
use hourglass_catalog::Collection;
use hourglass_query::filter::Filter;
use hourglass_storage::Snapshot;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Rows of one in-memory bucket made from archived rows.
pub const ARCHIVED_BUCKET_ROWS: usize = 1000;

type Views = Box<dyn Iterator<Item = Result<BucketView, StoreError>> + Send>;

/// The archived buckets `predicate` may match, from the manifest in `snap`.
pub(super) fn archived_views(
    snap: &Snapshot,
    buckets: &Collection,
    options: &TimeseriesOptions,
    predicate: &BucketPredicate,
    counters: Arc<ScanCounters>,
) -> Result<Views, StoreError> {
    let files = manifest(snap, buckets)?;
    if files.is_empty() {
        return Ok(Box::new(std::iter::empty()));
    }
    let mf = options.meta_field.clone();
    let kept: Vec<FileEntry> = files
        .into_iter()
        .filter(|f| {
            let by_time = predicate
                .bounds
                .excludes(Some(f.min_time_ms), Some(f.max_time_ms));
            let by_meta = predicate.meta.is_some()
                && f.metas.as_ref().is_some_and(|metas| {
                    !metas
                        .iter()
                        .any(|m| predicate.meta_matches(mf.as_deref(), Some(m)))
                });
            let pruned = by_time || by_meta;
            let c = if pruned {
                &counters.archive_files_pruned
            } else {
                &counters.archive_files_examined
            };
            c.fetch_add(1, Ordering::Relaxed);
            !pruned
        })
        .collect();
    let options = options.clone();
    let predicate = predicate.clone();
    Ok(Box::new(kept.into_iter().flat_map(
        move |f| match file_views(&f, &options, &predicate, &counters) {
            Ok(views) => views.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        },
    )))
}

/// The buckets of one file's row groups that `predicate` may match.
fn file_views(
    f: &FileEntry,
    options: &TimeseriesOptions,
    predicate: &BucketPredicate,
    counters: &ScanCounters,
) -> Result<Vec<BucketView>, StoreError> {
    let file = match OpenedFile::open(&f.uri, &f.path, f.bytes) {
        Ok(file) => file,
        // Expired by TTL after this read's snapshot: its rows are gone.
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut rgs = Vec::new();
    for rg in 0..file.row_groups() {
        let time = file.bounds(rg, &options.time_field);
        let ms = |v: &Bson| match v {
            Bson::DateTime(d) => Some(d.timestamp_millis()),
            _ => None,
        };
        let by_time = time
            .as_ref()
            .is_some_and(|(lo, hi)| predicate.bounds.excludes(ms(lo), ms(hi)));
        let by_range =
            predicate.has_ranges() && predicate.refuted_by_bounds(|c| file.bounds(rg, c));
        if by_time || by_range {
            counters
                .archive_row_groups_pruned
                .fetch_add(1, Ordering::Relaxed);
        } else {
            counters
                .archive_row_groups_examined
                .fetch_add(1, Ordering::Relaxed);
            rgs.push(rg);
        }
    }
    let batches = match file.read(rgs, None) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for batch in &batches {
        let rows = documents(batch).map_err(ArchiveError::from)?;
        for b in buckets_of(rows, options) {
            if predicate.may_match_bucket(options, &b) {
                out.push(BucketView::Archived(Arc::new(b)));
            } else {
                counters.buckets_pruned.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(out)
}

/// A fresh `_id` for an in-memory archived bucket: its minimum time, then a counter.
fn archived_bucket_id(min_time_ms: i64) -> ObjectId {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let secs = min_time_ms.div_euclid(1000).clamp(0, i64::from(u32::MAX)) as u32;
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&secs.to_be_bytes());
    bytes[4..].copy_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    ObjectId::from_bytes(bytes)
}

/// Rows (sorted by series, then time) as buckets: runs of one meta value.
fn buckets_of(rows: Vec<Document>, options: &TimeseriesOptions) -> Vec<Bucket> {
    let mut out: Vec<Bucket> = Vec::new();
    let mut last_meta: Option<Bson> = None;
    let time_of = |d: &Document| match d.get(&options.time_field) {
        Some(Bson::DateTime(t)) => t.timestamp_millis(),
        _ => 0,
    };
    for row in rows {
        let meta = options
            .meta_field
            .as_ref()
            .and_then(|mf| row.get(mf))
            .cloned();
        let fits = out
            .last()
            .is_some_and(|b| b.count() < ARCHIVED_BUCKET_ROWS && last_meta == meta);
        if !fits {
            let min = options.round_down_time(time_of(&row));
            out.push(Bucket::with_id(
                options,
                archived_bucket_id(min),
                meta.clone(),
                min,
            ));
            last_meta = meta;
        }
        if let Some(b) = out.last_mut() {
            b.add(row);
        }
    }
    out
}

/// Refuses an update or delete (code 20) when one of the archived bucket's
/// measurements matches `filter`.
pub(super) fn refuse_archived_match(
    view: &BucketView,
    options: &TimeseriesOptions,
    filter: &Filter,
) -> Result<(), StoreError> {
    if view
        .unpack(options, None)?
        .iter()
        .any(|m| filter.matches(m))
    {
        return Err(StoreError::ArchivedReadOnly(
            "the filter matches archived measurements, which are read-only; they go only \
             when expireAfterSeconds expires their files"
                .into(),
        ));
    }
    Ok(())
}
