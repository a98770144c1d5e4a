//! Hourglass time-series collections: options validation, meta normalization, the
//! bucket catalog (open buckets and MongoDB's rollover rules), the bucket document and
//! its compressed physical format, column codecs, the bucket store (buckets kept in the
//! catalog crate's collections: inserts, scans, updates and deletes, TTL), index
//! translation, the execution of reads over bucket columns (`exec`) and the collStats
//! counters. No networking and no async: the protocol layer calls in.

#![forbid(unsafe_code)]

pub mod bsoncolumn;
pub mod bucket;
pub mod bucket_catalog;
pub mod column;
pub mod column_builder;
pub mod error;
pub mod exec;
pub mod gorilla;
pub mod index_spec;
pub mod measurement;
pub mod meta;
pub mod options;
pub mod stats;
pub mod store;
mod threads;

pub use bucket::{
    decode_compressed, decode_compressed_owned, unpack_measurements, Bucket, DecodedBucket,
};
pub use bucket_catalog::{BucketCatalog, CloseReason, InsertOutcome, Limits};
pub use column::{column_codec, decode_column, encode_column, ColumnCodec};
pub use error::TsError;
pub use exec::{TsExecution, TsPlan, TsRows};
pub use meta::{meta_key, normalize_meta};
pub use options::{validate_expire_after_seconds, Granularity, TimeseriesOptions};
pub use stats::BucketStats;
pub use store::{
    archive_spec, delete_recorded, options_of, ArchiveStats, BucketPredicate, BucketScan,
    BucketView, CatalogSummary, DeleteOutcome, MeasurementStream, MoveOutcome, MoverStage,
    ScanCounters, StoreError, TimeBounds, TimeseriesStore, TsInsertOutcome, TsUpdate, Validation,
};
