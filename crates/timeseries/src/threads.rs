//! The threads one query splits its work across: how many, and joining them.

use crate::store::StoreError;
use std::thread::ScopedJoinHandle;

/// Most threads one query uses (the machine's cores, at most this).
const MAX_WORKERS: usize = 8;

/// Threads a split query uses: the machine's cores, at most [`MAX_WORKERS`]. Asked once
/// (on Linux the answer reads the cgroup's CPU quota from files).
pub(crate) fn workers() -> usize {
    static WORKERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *WORKERS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_WORKERS)
    })
}

/// Waits for every thread: their outputs in order, or the first error (after all have
/// stopped); a thread's panic goes on in the caller.
pub(crate) fn join_all<T>(
    handles: Vec<ScopedJoinHandle<'_, Result<T, StoreError>>>,
) -> Result<Vec<T>, StoreError> {
    let mut outputs = Vec::with_capacity(handles.len());
    let mut failed = None;
    for h in handles {
        match h.join() {
            Ok(Ok(out)) => outputs.push(out),
            Ok(Err(e)) => {
                failed.get_or_insert(e);
            }
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(outputs),
    }
}
