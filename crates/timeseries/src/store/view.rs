//! One bucket as a read sees it: a stored (closed, compressed) bucket whose columns are
//! decoded on demand, a snapshot of an open bucket held in memory, or archived rows
//! gathered into a bucket.

use crate::bucket::{unpack_measurement_rows, unpack_measurement_rows_raw, Bucket, DecodedBucket};
use crate::error::TsError;
use crate::options::TimeseriesOptions;
use bson::oid::ObjectId;
use bson::{Bson, Document};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub enum BucketView {
    Stored(Box<DecodedBucket>),
    Open(Arc<Bucket>),
    /// Rows of an archived Parquet file, gathered into a bucket in memory (read-only).
    Archived(Arc<Bucket>),
}

impl BucketView {
    pub fn is_archived(&self) -> bool {
        matches!(self, BucketView::Archived(_))
    }

    pub fn id(&self) -> ObjectId {
        match self {
            BucketView::Stored(b) => b.id,
            BucketView::Open(b) | BucketView::Archived(b) => b.id,
        }
    }

    pub fn meta(&self) -> Option<&Bson> {
        match self {
            BucketView::Stored(b) => b.meta(),
            BucketView::Open(b) | BucketView::Archived(b) => b.meta.as_ref(),
        }
    }

    pub fn count(&self) -> usize {
        match self {
            BucketView::Stored(b) => b.count,
            BucketView::Open(b) | BucketView::Archived(b) => b.count(),
        }
    }

    /// The rounded minimum time the bucket was opened with (its `_id` time).
    pub fn min_time_ms(&self) -> i64 {
        match self {
            BucketView::Stored(b) => b.min_time_ms,
            BucketView::Open(b) | BucketView::Archived(b) => b.min_time_ms,
        }
    }

    /// A field's control `min` and `max` (read from the stored header alone).
    pub fn control_bounds(&self, field: &str) -> Option<(Bson, Bson)> {
        match self {
            BucketView::Stored(b) => b.control_bounds(field),
            BucketView::Open(b) | BucketView::Archived(b) => b.control_bounds(field),
        }
    }

    /// The largest measurement time.
    pub fn max_time_ms(&self) -> Option<i64> {
        match self {
            BucketView::Open(b) | BucketView::Archived(b) => Some(b.max_time_ms),
            BucketView::Stored(b) => b.max_time_ms,
        }
    }

    /// Data field names.
    pub fn field_names(&self) -> Vec<&str> {
        match self {
            BucketView::Stored(b) => b.field_names().collect(),
            BucketView::Open(b) | BucketView::Archived(b) => b.fields().collect(),
        }
    }

    /// One column's values (`None`: the bucket has no such field).
    pub fn column(&self, field: &str) -> Result<Option<Vec<Option<Bson>>>, TsError> {
        match self {
            BucketView::Stored(b) => b.column(field),
            BucketView::Open(b) | BucketView::Archived(b) => Ok(b.column_values(field)),
        }
    }

    /// The measurements, in MongoDB's unpack order; `fields` limits which fields are
    /// decoded (the meta field is included when listed).
    pub fn unpack(
        &self,
        options: &TimeseriesOptions,
        fields: Option<&[&str]>,
    ) -> Result<Vec<Document>, TsError> {
        self.unpack_rows(options, fields, None)
    }

    /// [`BucketView::unpack`] of only the rows set in `rows`.
    pub fn unpack_rows(
        &self,
        options: &TimeseriesOptions,
        fields: Option<&[&str]>,
        rows: Option<&[bool]>,
    ) -> Result<Vec<Document>, TsError> {
        match self {
            BucketView::Stored(b) => b.unpack_rows(fields, rows),
            BucketView::Open(b) | BucketView::Archived(b) => {
                Ok(unpack_measurement_rows(b, options, fields, rows))
            }
        }
    }

    /// [`BucketView::unpack_rows`] as BSON bytes, written from the columns.
    pub fn unpack_rows_raw(
        &self,
        options: &TimeseriesOptions,
        fields: Option<&[&str]>,
        rows: Option<&[bool]>,
    ) -> Result<Vec<bson::RawDocumentBuf>, TsError> {
        match self {
            BucketView::Stored(b) => b.unpack_rows_raw(fields, rows),
            BucketView::Open(b) | BucketView::Archived(b) => {
                unpack_measurement_rows_raw(b, options, fields, rows)
            }
        }
    }

    /// An open bucket with the same id, meta and minimum time holding every
    /// measurement (without meta), to rewrite after a delete or update.
    pub fn to_bucket(&self) -> Result<Bucket, TsError> {
        match self {
            BucketView::Stored(b) => b.to_bucket(),
            BucketView::Open(b) | BucketView::Archived(b) => Ok((**b).clone()),
        }
    }
}
