//! The object store's async calls, run to completion from synchronous code (the mover
//! and query execution run on blocking threads, or on a server runtime's worker where
//! a nested `block_on` would panic): each future is spawned on a small runtime of the
//! archive's own and its result is waited for on a channel.

use crate::ArchiveError;
use std::future::Future;
use std::sync::OnceLock;

fn runtime() -> Result<&'static tokio::runtime::Runtime, ArchiveError> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("archive-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| ArchiveError::Task(e.clone()))
}

/// Runs `f` on the archive's runtime and waits for its output.
pub fn block_on<F>(f: F) -> Result<F::Output, ArchiveError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime()?.spawn(async move {
        let _ = tx.send(f.await);
    });
    rx.recv()
        .map_err(|_| ArchiveError::Task("the archive I/O task stopped".into()))
}
