//! The archive tier: time-series measurements moved out of the storage engine into
//! Parquet files on object storage (a local directory or S3), and read back from there.
//!
//! This crate knows files, not buckets: [`location`] opens an archive URI as an object
//! store (durable puts, listing, deletes), [`parquet_file`] writes one record batch as a
//! Parquet file and reads a file's row groups back with their statistics, [`manifest`]
//! is the record of one archived file, [`columnar`] converts documents to and from
//! Arrow columns (also used by `hourglass import`/`export`), and [`io`] runs the object
//! store's async calls from synchronous code. Which buckets move, when, and how reads
//! merge archived rows with hot buckets is the time-series store's part
//! (`hourglass_timeseries::store::archive`).

pub mod columnar;
pub mod io;
pub mod location;
pub mod manifest;
pub mod parquet_file;

pub use location::{ArchiveSpec, Location};
pub use manifest::FileEntry;

/// Errors of the archive tier.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// An archive specification or URI that cannot be used (BadValue).
    #[error("{0}")]
    BadSpec(String),
    #[error("archive object store: {0}")]
    Store(#[from] object_store::Error),
    #[error("archive Parquet file: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("archive columns: {0}")]
    Columnar(#[from] columnar::ColumnarError),
    #[error("archive manifest entry: {0}")]
    Manifest(String),
    #[error("archive I/O task failed: {0}")]
    Task(String),
}

impl ArchiveError {
    /// MongoDB's code for the error: BadValue for a bad specification, else
    /// InternalError (an unreadable or unreachable archive).
    pub fn code(&self) -> i32 {
        match self {
            ArchiveError::BadSpec(_) => 2,
            _ => 1,
        }
    }

    /// Whether the object did not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            ArchiveError::Store(object_store::Error::NotFound { .. })
        )
    }
}
