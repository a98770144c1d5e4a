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
    #[error("a storage key of {0} bytes is over the engine's limit of 65535")]
    KeyTooLarge(usize),
    #[error("a stored value of {0} bytes is over the engine's limit")]
    ValueTooLarge(usize),
}

pub type Result<T> = std::result::Result<T, StorageError>;
