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
    /// Another process holds the data directory's lock (mongod's DBPathInUse).
    #[error("DBPathInUse: another server is already using the data directory {0}")]
    DbPathInUse(std::path::PathBuf),
    #[error("Out of disk space: {free} bytes free on the data directory's file system, {needed} needed for this write")]
    OutOfDiskSpace { free: u64, needed: u64 },
    /// A transaction wrote a key that changed since it started, or that another open
    /// transaction holds.
    #[error("Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.")]
    WriteConflict,
    /// A write outside transactions changes a key open transaction `0` holds: the caller
    /// waits for it to end ([`crate::Engine::wait_for_transaction`]) and tries again.
    #[error("a key this write changes is held by open transaction {0}")]
    HeldByTransaction(u64),
    /// A transaction's writes would take more memory than one transaction may hold.
    #[error("Total size of all transaction operations must be less than {limit} bytes")]
    TransactionTooLarge { limit: u64 },
}

impl StorageError {
    /// Whether the file system is full (our own guard, or ENOSPC from the engine).
    pub fn is_out_of_space(&self) -> bool {
        if matches!(self, StorageError::OutOfDiskSpace { .. }) {
            return true;
        }
        // ENOSPC anywhere in the chain (fjall wraps the LSM tree's I/O errors).
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = cur {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::StorageFull || io.raw_os_error() == Some(28) {
                    return true;
                }
            }
            cur = e.source();
        }
        false
    }

    /// MongoDB's code: 14031 OutOfDiskSpace for a full disk, 98 DBPathInUse, else 1
    /// InternalError.
    pub fn code(&self) -> i32 {
        match self {
            _ if self.is_out_of_space() => 14031,
            StorageError::DbPathInUse(_) => 98,
            StorageError::WriteConflict | StorageError::HeldByTransaction(_) => 112,
            StorageError::TransactionTooLarge { .. } => 257,
            _ => 1,
        }
    }
}

pub type Result<T> = std::result::Result<T, StorageError>;
