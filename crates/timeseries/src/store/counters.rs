//! What a bucket scan did, for explain and statistics.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a scan did, for explain and statistics.
#[derive(Debug, Default)]
pub struct ScanCounters {
    /// Buckets whose header was read.
    pub buckets_examined: AtomicU64,
    /// Buckets ruled out by control min/max or meta after their header was read, or
    /// open buckets ruled out in memory.
    pub buckets_pruned: AtomicU64,
    /// Buckets returned.
    pub buckets_returned: AtomicU64,
    /// Series in the directory and series whose meta matched (meta predicates only).
    pub series_total: AtomicU64,
    pub series_matched: AtomicU64,
    /// True when the meta index picked the buckets.
    pub used_meta_index: AtomicU64,
    /// Archived files read and ruled out by their manifest entry (time range, metas).
    pub archive_files_examined: AtomicU64,
    pub archive_files_pruned: AtomicU64,
    /// Row groups of the files read, decoded and ruled out by their statistics.
    pub archive_row_groups_examined: AtomicU64,
    pub archive_row_groups_pruned: AtomicU64,
    /// Buckets returned but not decoded: a `$geoNear` with a limit had its k nearer
    /// than every point of their box.
    pub buckets_passed_over: AtomicU64,
    /// Buckets returned but not decoded: a group followed by `$sort` on its time key
    /// and `$limit k` already had k keys later (earlier) than any of their rows'.
    pub buckets_passed_over_by_key: AtomicU64,
}

impl ScanCounters {
    pub(super) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}
