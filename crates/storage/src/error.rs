//! Typed errors of the storage layer.

/// An error raised by the embedded engine or the file system under it.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storage engine error: {0}")]
    Engine(#[from] fjall::Error),
    #[error("storage I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("invalid tree name {0:?}")]
    InvalidTreeName(String),
}

pub type Result<T> = std::result::Result<T, StorageError>;
