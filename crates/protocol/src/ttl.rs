//! The TTL monitor: every `ttlMonitorSleepSecs` seconds (re-read each pass) one pass walks
//! every collection of every database and expires documents with the function for the
//! collection's kind. Regular collections: each TTL index deletes documents whose indexed
//! date is older than now − expireAfterSeconds, in bounded batches (each its own commit,
//! so writers are never held up for long). Time-series bucket expiry plugs in as another
//! kind ([`expire_timeseries`]).

use crate::state::ServerState;
use hourglass_catalog::index::ID_INDEX_NAME;
use hourglass_catalog::{Collection, ExpireBy};
use hourglass_query::filter::Filter;
use hourglass_timeseries::index_spec::ttl_cutoff_millis;
use hourglass_timeseries::{options_of, TimeseriesStore};
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
    // A clustered collection's `expireAfterSeconds` expires documents by their `_id` date.
    let clustered = c.options().contains_key("clusteredIndex");
    let by_id = seconds(c.options().get("expireAfterSeconds"))
        .filter(|_| clustered)
        .map(|secs| (ExpireBy::Id, secs, ID_INDEX_NAME.to_string()));
    let by_index: Vec<_> = c
        .indexes()
        .iter()
        .filter_map(|index| {
            let secs = index.spec.expire_after_seconds?;
            Some((ExpireBy::Index(index.ident), secs, index.spec.name.clone()))
        })
        .collect();
    for (by, secs, name) in by_id.into_iter().chain(by_index) {
        let now = bson::DateTime::now().timestamp_millis();
        let cutoff = bson::DateTime::from_millis(now.saturating_sub(secs.saturating_mul(1000)));
        loop {
            match c.delete_expired(by, cutoff, TTL_BATCH) {
                Ok(n) => {
                    deleted += n as u64;
                    if n < TTL_BATCH {
                        break;
                    }
                }
                // A document an open transaction holds: the next pass tries again.
                Err(hourglass_catalog::CatalogError::Storage(
                    hourglass_storage::StorageError::HeldByTransaction(_),
                )) => break,
                Err(e) => {
                    tracing::warn!(ns = %c.namespace(), index = %name, error = %e, "TTL deletion failed");
                    break;
                }
            }
        }
    }
    deleted
}

/// Expires whole buckets of a time-series collection (`system.buckets.*`) with a
/// collection-level `expireAfterSeconds`, and those whose meta matches a partial TTL
/// index (MongoDB 7.0: `partialFilterExpression` on the metaField with
/// `expireAfterSeconds`): a bucket goes once its min time + bucket span +
/// expireAfterSeconds is past (MongoDB's rule). Counts buckets, as MongoDB does, and
/// archived files ([`expire_archived`]).
pub fn expire_timeseries(state: &ServerState, buckets: &Arc<Collection>) -> u64 {
    let Some(options) = options_of(buckets) else {
        return 0;
    };
    // (expireAfterSeconds, the meta filter of a partial index)
    let mut rules: Vec<(i64, Option<Filter>)> = Vec::new();
    let mut deleted = 0u64;
    if let Some(secs) = seconds(buckets.options().get("expireAfterSeconds")) {
        rules.push((secs, None));
        deleted += expire_archived(state, buckets, &options, secs);
    }
    match TimeseriesStore::index_specs(buckets, &options) {
        Ok(specs) => {
            for spec in specs {
                let secs = seconds(spec.get("expireAfterSeconds"));
                let partial = spec.get_document("partialFilterExpression");
                if let (Some(secs), Ok(partial)) = (secs, partial) {
                    match Filter::parse(partial) {
                        Ok(f) => rules.push((secs, Some(f))),
                        Err(e) => {
                            tracing::warn!(ns = %buckets.namespace(), error = %e, "a partial TTL index's filter cannot be read")
                        }
                    }
                }
            }
        }
        Err(e) => {
            tracing::warn!(ns = %buckets.namespace(), error = %e, "reading the TTL indexes failed")
        }
    }
    let now = bson::DateTime::now().timestamp_millis();
    for (secs, only) in rules {
        let cutoff = ttl_cutoff_millis(&options, now, secs);
        loop {
            match state
                .timeseries
                .expire(buckets, &options, cutoff, only.as_ref(), TTL_BATCH)
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
    }
    deleted
}

/// Deletes the archived files of a time-series collection whose newest measurement is
/// older than now − `secs` (a file goes whole, so it may outlive its oldest rows by up
/// to its time span: a day at most). Counts files.
fn expire_archived(
    state: &ServerState,
    buckets: &Arc<Collection>,
    options: &hourglass_timeseries::TimeseriesOptions,
    secs: i64,
) -> u64 {
    let cutoff = bson::DateTime::now()
        .timestamp_millis()
        .saturating_sub(secs.saturating_mul(1000));
    match state.timeseries.expire_archived(buckets, options, cutoff) {
        Ok((files, _)) => files,
        Err(e) => {
            tracing::warn!(ns = %buckets.namespace(), error = %e, "TTL deletion of archived files failed");
            0
        }
    }
}

/// An `expireAfterSeconds` value as whole seconds.
fn seconds(v: Option<&bson::Bson>) -> Option<i64> {
    match v? {
        bson::Bson::Int32(n) => Some(i64::from(*n)),
        bson::Bson::Int64(n) => Some(*n),
        bson::Bson::Double(d) => Some(*d as i64),
        _ => None,
    }
}
