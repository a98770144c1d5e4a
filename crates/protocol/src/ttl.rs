//! The TTL monitor: every `ttlMonitorSleepSecs` seconds (re-read each pass) one pass walks
//! every collection of every database and expires documents with the function for the
//! collection's kind. Regular collections: each TTL index deletes documents whose indexed
//! date is older than now − expireAfterSeconds, in bounded batches (each its own commit,
//! so writers are never held up for long). Time-series bucket expiry plugs in as another
//! kind ([`expire_timeseries`]).

use crate::state::ServerState;
use hourglass_catalog::Collection;
use hourglass_timeseries::index_spec::ttl_cutoff_millis;
use hourglass_timeseries::options_of;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Documents deleted per batch (one commit each).
pub const TTL_BATCH: usize = 1000;

/// Which expiry function a collection gets.
enum Kind {
    Regular,
    TimeseriesBuckets,
}

fn kind_of(c: &Collection) -> Kind {
    if options_of(c).is_some() {
        Kind::TimeseriesBuckets
    } else {
        Kind::Regular
    }
}

/// Runs one pass over every collection; returns the number of documents deleted.
pub fn run_pass(state: &ServerState) -> u64 {
    let enabled = !matches!(
        state.params.get("ttlMonitorEnabled"),
        Some(bson::Bson::Boolean(false))
    );
    // While fsyncLock holds, the pass waits for the next one.
    if !enabled || state.write_gate.is_locked() {
        return 0;
    }
    let mut deleted = 0;
    for (db, _) in state.catalog.databases() {
        for c in state.catalog.collections(&db) {
            let n = match kind_of(&c) {
                Kind::Regular => expire_regular(&c),
                Kind::TimeseriesBuckets => expire_timeseries(state, &c),
            };
            // Counted as each collection is done, so the counter follows the deletions.
            state.ttl.deleted_documents.fetch_add(n, Ordering::Relaxed);
            deleted += n;
        }
    }
    state.ttl.passes.fetch_add(1, Ordering::Relaxed);
    deleted
}

/// Expires documents of a regular collection through each of its TTL indexes.
pub fn expire_regular(c: &Collection) -> u64 {
    let mut deleted = 0u64;
    for index in c.indexes().iter() {
        let Some(secs) = index.spec.expire_after_seconds else {
            continue;
        };
        let now = bson::DateTime::now().timestamp_millis();
        let cutoff = bson::DateTime::from_millis(now.saturating_sub(secs.saturating_mul(1000)));
        loop {
            match c.delete_expired(index.ident, cutoff, TTL_BATCH) {
                Ok(n) => {
                    deleted += n as u64;
                    if n < TTL_BATCH {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(ns = %c.namespace(), index = %index.spec.name, error = %e, "TTL deletion failed");
                    break;
                }
            }
        }
    }
    deleted
}

/// Expires whole buckets of a time-series collection (`system.buckets.*`) with a
/// collection-level `expireAfterSeconds`: a bucket goes once its min time + bucket span
/// + expireAfterSeconds is past (MongoDB's rule). Counts buckets, as MongoDB does.
pub fn expire_timeseries(state: &ServerState, buckets: &Arc<Collection>) -> u64 {
    let Some(options) = options_of(buckets) else {
        return 0;
    };
    let secs = match buckets.options().get("expireAfterSeconds") {
        Some(bson::Bson::Int32(n)) => i64::from(*n),
        Some(bson::Bson::Int64(n)) => *n,
        Some(bson::Bson::Double(d)) => *d as i64,
        _ => return 0,
    };
    let now = bson::DateTime::now().timestamp_millis();
    let cutoff = ttl_cutoff_millis(&options, now, secs);
    let mut deleted = 0u64;
    loop {
        match state
            .timeseries
            .expire(buckets, &options, cutoff, TTL_BATCH)
        {
            Ok((n, _)) => {
                deleted += n;
                if (n as usize) < TTL_BATCH {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(ns = %buckets.namespace(), error = %e, "TTL deletion of buckets failed");
                break;
            }
        }
    }
    deleted
}
