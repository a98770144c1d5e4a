//! Reads of archived measurements, merged into every bucket scan: the manifest (read
//! from the scan's own snapshot, so a file and the buckets it replaced are never both
//! seen) is pruned by each file's time range and distinct metas, each remaining file's
//! row groups by their statistics (time, the measurement ranges the predicate names, its
//! meta conditions), and the rows of the row groups left (those of series and times the
//! predicate allows) become in-memory buckets — runs of one
//! series, at most [`ARCHIVED_BUCKET_ROWS`] rows — that the query paths read like open
//! buckets. Files are opened lazily, in manifest order.
//!
//! Archived rows are read-only: an update or delete whose filter matches one is refused
//! with `IllegalOperation` before anything changes ([`refuse_archived_match`]).

use super::archive::manifest;
use super::counters::ScanCounters;
use super::{BucketPredicate, BucketView, StoreError};
use crate::bucket::Bucket;
use crate::meta::is_meta_path;
use crate::options::TimeseriesOptions;
use arrow_array::cast::AsArray;
use arrow_array::types::TimestampMillisecondType;
use arrow_array::{Array, RecordBatch};
use bson::oid::ObjectId;
use bson::Bson;
use hourglass_archive::columnar::{documents, Cells};
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
    fields: Option<&[String]>,
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
    let fields: Option<Vec<String>> = fields.map(<[String]>::to_vec);
    Ok(Box::new(kept.into_iter().flat_map(move |f| {
        let columns = fields
            .as_ref()
            .map(|wanted| columns_for(&f, &options, wanted));
        match file_views(&f, &options, &predicate, columns.as_deref(), &counters) {
            Ok(views) => views.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        }
    })))
}

/// The columns of `f` a read of the top-level `wanted` fields needs: theirs, the time
/// field's and the meta field's (buckets are runs of one meta value).
fn columns_for(f: &FileEntry, options: &TimeseriesOptions, wanted: &[String]) -> Vec<String> {
    f.columns
        .iter()
        .filter(|c| {
            let top = c.split('.').next().unwrap_or(c);
            top == options.time_field
                || Some(top) == options.meta_field.as_deref()
                || wanted.iter().any(|w| w == top)
        })
        .cloned()
        .collect()
}

/// The buckets of one file's row groups that `predicate` may match, with only
/// `columns` decoded when given.
fn file_views(
    f: &FileEntry,
    options: &TimeseriesOptions,
    predicate: &BucketPredicate,
    columns: Option<&[String]>,
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
        // Parquet orders strings by bytes: no meta pruning under a collation.
        let by_meta = !hourglass_query::collation::active()
            && predicate.meta_refuted_by_bounds(|c| file.bounds(rg, c));
        if by_time || by_range || by_meta {
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
    let mut out = Vec::new();
    for b in read_buckets(&file, rgs, columns, options, Some(predicate))? {
        if predicate.may_match_bucket(options, &b) {
            out.push(BucketView::Archived(Arc::new(b)));
        } else {
            counters.buckets_pruned.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(out)
}

/// Every row of an archived file as buckets (a file gone is empty).
pub(super) fn file_buckets(
    f: &FileEntry,
    options: &TimeseriesOptions,
) -> Result<Vec<Bucket>, StoreError> {
    match OpenedFile::open(&f.uri, &f.path, f.bytes) {
        Ok(file) => read_buckets(&file, (0..file.row_groups()).collect(), None, options, None),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// Row groups `rgs` of `file` (only `columns` when given) as buckets.
fn read_buckets(
    file: &OpenedFile,
    rgs: Vec<usize>,
    columns: Option<&[String]>,
    options: &TimeseriesOptions,
    predicate: Option<&BucketPredicate>,
) -> Result<Vec<Bucket>, StoreError> {
    let batches = match file.read(rgs, columns) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for batch in &batches {
        out.extend(buckets_of(batch, options, predicate)?);
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

/// The rows of a batch (sorted by series, then time) as buckets: each run of one meta
/// value (found column-wise over the meta columns) cut into buckets of at most
/// [`ARCHIVED_BUCKET_ROWS`]. With a predicate, series its meta conditions rule out and
/// rows outside its time bounds are skipped before any value is converted. Values go
/// into the bucket without a document per row, except for nested measurement fields
/// (dotted columns).
fn buckets_of(
    batch: &RecordBatch,
    options: &TimeseriesOptions,
    predicate: Option<&BucketPredicate>,
) -> Result<Vec<Bucket>, StoreError> {
    let schema = batch.schema();
    let is_meta = |name: &str| {
        options
            .meta_field
            .as_deref()
            .is_some_and(|mf| is_meta_path(name, mf))
    };
    let (meta_cols, data_cols): (Vec<usize>, Vec<usize>) =
        (0..schema.fields().len()).partition(|&i| is_meta(schema.field(i).name()));
    let nested = data_cols
        .iter()
        .any(|&i| schema.field(i).name().contains('.'));
    let runs = if meta_cols.is_empty() {
        std::iter::once(0..batch.num_rows()).collect()
    } else {
        let arrays: Vec<_> = meta_cols.iter().map(|&i| batch.column(i).clone()).collect();
        arrow_ord::partition::partition(&arrays)
            .map_err(|e| ArchiveError::Columnar(e.into()))?
            .ranges()
    };
    let meta_batch = batch
        .project(&meta_cols)
        .map_err(|e| ArchiveError::Columnar(e.into()))?;
    let cells: Vec<(&str, Cells<'_>)> = data_cols
        .iter()
        .map(|&i| {
            let f = schema.field(i);
            (f.name().as_str(), Cells::new(f, batch.column(i).as_ref()))
        })
        .collect();
    let time = cells.iter().position(|(n, _)| *n == options.time_field);
    let times = time.and_then(|t| {
        batch
            .column(data_cols[t])
            .as_primitive_opt::<TimestampMillisecondType>()
    });
    let bounds = predicate.map(|p| p.bounds).unwrap_or_default();
    let mut out = Vec::new();
    for run in runs {
        let meta = match &options.meta_field {
            Some(mf) if !meta_cols.is_empty() => documents(&meta_batch.slice(run.start, 1))
                .map_err(ArchiveError::from)?
                .pop()
                .and_then(|mut d| d.remove(mf)),
            _ => None,
        };
        // A series the predicate's meta conditions rule out is not converted at all.
        if predicate.is_some_and(|p| !p.meta_matches(options.meta_field.as_deref(), meta.as_ref()))
        {
            continue;
        }
        // Rows outside the time bounds cannot match: they are skipped before conversion.
        let kept: Vec<usize> = run
            .filter(|&r| {
                bounds.is_unbounded()
                    || times.is_none_or(|t| t.is_null(r) || bounds.contains(t.value(r)))
            })
            .collect();
        for chunk in kept.chunks(ARCHIVED_BUCKET_ROWS) {
            let first = match time
                .map(|t| cells[t].1.get(chunk[0]))
                .transpose()
                .map_err(ArchiveError::from)?
            {
                Some(Some(Bson::DateTime(t))) => t.timestamp_millis(),
                _ => 0,
            };
            let min = options.round_down_time(first);
            let mut b = Bucket::with_id(options, archived_bucket_id(min), meta.clone(), min);
            for &r in chunk {
                if nested {
                    let row = documents(&batch.slice(r, 1)).map_err(ArchiveError::from)?;
                    row.into_iter().for_each(|d| b.add(d));
                    continue;
                }
                let mut fields: Vec<(&str, Bson)> = Vec::with_capacity(cells.len());
                for (name, c) in &cells {
                    if let Some(v) = c.get(r).map_err(ArchiveError::from)? {
                        fields.push((name, v));
                    }
                }
                b.add_fields(&fields, 0);
            }
            out.push(b);
        }
    }
    Ok(out)
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
