//! Bucket catalog execution counters, named and ordered like the
//! `timeseries` section of MongoDB 8.0's collStats.

use bson::{Bson, Document};

/// Counters of one time-series collection's bucket catalog.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BucketStats {
    pub num_bucket_inserts: u64,
    pub num_bucket_updates: u64,
    pub num_buckets_opened_due_to_metadata: u64,
    pub num_buckets_closed_due_to_count: u64,
    pub num_buckets_closed_due_to_schema_change: u64,
    pub num_buckets_closed_due_to_size: u64,
    pub num_buckets_closed_due_to_time_forward: u64,
    pub num_buckets_closed_due_to_time_backward: u64,
    pub num_buckets_closed_due_to_memory_threshold: u64,
    pub num_commits: u64,
    pub num_measurements_group_committed: u64,
    pub num_waits: u64,
    pub num_measurements_committed: u64,
    pub num_buckets_closed_due_to_reopening: u64,
    pub num_buckets_archived_due_to_memory_threshold: u64,
    pub num_buckets_archived_due_to_time_backward: u64,
    pub num_buckets_reopened: u64,
    pub num_buckets_kept_open_due_to_large_measurements: u64,
    pub num_buckets_closed_due_to_cache_pressure: u64,
    pub num_buckets_frozen: u64,
    pub num_compressed_buckets_converted_to_unsorted: u64,
    pub num_buckets_fetched: u64,
    pub num_buckets_queried: u64,
    pub num_bucket_fetches_failed: u64,
    pub num_bucket_queries_failed: u64,
    pub num_bucket_reopenings_failed: u64,
    pub num_duplicate_buckets_reopened: u64,
}

fn long(v: u64) -> Bson {
    Bson::Int64(i64::try_from(v).unwrap_or(i64::MAX))
}

impl BucketStats {
    /// Records the commit of `measurements` measurements into `buckets` buckets: one
    /// commit per bucket written, as MongoDB counts `numCommits`.
    pub fn record_commit(&mut self, buckets: usize, measurements: usize) {
        self.num_commits += buckets as u64;
        self.num_measurements_committed += measurements as u64;
    }

    /// Records a commit that had to wait for another writer's batch
    /// (group commit): `numWaits` and `numMeasurementsGroupCommitted`.
    pub fn record_group_commit_wait(&mut self, measurements: usize) {
        self.num_waits += 1;
        self.num_measurements_group_committed += measurements as u64;
    }

    /// The counters of several collections added up, under `to_document`'s names
    /// (`avgNumMeasurementsPerCommit` recomputed from the sums).
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a BucketStats>) -> Document {
        let mut totals = Document::new();
        for stats in all {
            for (k, v) in stats.to_document() {
                if k == "avgNumMeasurementsPerCommit" {
                    continue;
                }
                let add = match v {
                    Bson::Int64(i) => i,
                    _ => continue,
                };
                let cur = totals.get_i64(&k).unwrap_or(0);
                totals.insert(k, cur.saturating_add(add));
            }
        }
        let commits = totals.get_i64("numCommits").unwrap_or(0);
        if commits > 0 {
            let measurements = totals.get_i64("numMeasurementsCommitted").unwrap_or(0);
            totals.insert("avgNumMeasurementsPerCommit", measurements / commits);
        }
        totals
    }

    /// The counters in collStats order (values as int64);
    /// `avgNumMeasurementsPerCommit` only when `numCommits > 0`.
    pub fn to_document(&self) -> Document {
        let mut d = Document::new();
        let mut put = |k: &str, v: u64| {
            d.insert(k, long(v));
        };
        put("numBucketInserts", self.num_bucket_inserts);
        put("numBucketUpdates", self.num_bucket_updates);
        put(
            "numBucketsOpenedDueToMetadata",
            self.num_buckets_opened_due_to_metadata,
        );
        put(
            "numBucketsClosedDueToCount",
            self.num_buckets_closed_due_to_count,
        );
        put(
            "numBucketsClosedDueToSchemaChange",
            self.num_buckets_closed_due_to_schema_change,
        );
        put(
            "numBucketsClosedDueToSize",
            self.num_buckets_closed_due_to_size,
        );
        put(
            "numBucketsClosedDueToTimeForward",
            self.num_buckets_closed_due_to_time_forward,
        );
        put(
            "numBucketsClosedDueToTimeBackward",
            self.num_buckets_closed_due_to_time_backward,
        );
        put(
            "numBucketsClosedDueToMemoryThreshold",
            self.num_buckets_closed_due_to_memory_threshold,
        );
        put("numCommits", self.num_commits);
        put(
            "numMeasurementsGroupCommitted",
            self.num_measurements_group_committed,
        );
        put("numWaits", self.num_waits);
        put("numMeasurementsCommitted", self.num_measurements_committed);
        if let Some(avg) = self
            .num_measurements_committed
            .checked_div(self.num_commits)
        {
            put("avgNumMeasurementsPerCommit", avg);
        }
        put(
            "numBucketsClosedDueToReopening",
            self.num_buckets_closed_due_to_reopening,
        );
        put(
            "numBucketsArchivedDueToMemoryThreshold",
            self.num_buckets_archived_due_to_memory_threshold,
        );
        put(
            "numBucketsArchivedDueToTimeBackward",
            self.num_buckets_archived_due_to_time_backward,
        );
        put("numBucketsReopened", self.num_buckets_reopened);
        put(
            "numBucketsKeptOpenDueToLargeMeasurements",
            self.num_buckets_kept_open_due_to_large_measurements,
        );
        put(
            "numBucketsClosedDueToCachePressure",
            self.num_buckets_closed_due_to_cache_pressure,
        );
        put("numBucketsFrozen", self.num_buckets_frozen);
        put(
            "numCompressedBucketsConvertedToUnsorted",
            self.num_compressed_buckets_converted_to_unsorted,
        );
        put("numBucketsFetched", self.num_buckets_fetched);
        put("numBucketsQueried", self.num_buckets_queried);
        put("numBucketFetchesFailed", self.num_bucket_fetches_failed);
        put("numBucketQueriesFailed", self.num_bucket_queries_failed);
        put(
            "numBucketReopeningsFailed",
            self.num_bucket_reopenings_failed,
        );
        put(
            "numDuplicateBucketsReopened",
            self.num_duplicate_buckets_reopened,
        );
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_appears_only_after_a_commit() {
        let mut s = BucketStats::default();
        assert!(!s.to_document().contains_key("avgNumMeasurementsPerCommit"));
        s.record_commit(1, 10);
        s.record_commit(1, 20);
        let d = s.to_document();
        assert_eq!(d.get_i64("avgNumMeasurementsPerCommit"), Ok(15));
        let keys: Vec<&String> = d.keys().collect();
        assert_eq!(keys[0], "numBucketInserts");
        assert_eq!(keys[13], "avgNumMeasurementsPerCommit");
        assert_eq!(
            keys.last().map(|k| k.as_str()),
            Some("numDuplicateBucketsReopened")
        );
    }
}
