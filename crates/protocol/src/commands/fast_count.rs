//! A `count` without a query (nor a hint) on a regular collection: mongod answers it from
//! the record store's count, explained as one `RECORD_STORE_FAST_COUNT` stage that
//! examines no key and no document. Hourglass counts the stored documents without
//! decoding them (`Collection::count`), which is that stage's work; the `count` command
//! and its explain both count here.

use super::explain_counters::with_common;
use crate::error::CommandError;
use bson::{doc, Document};
use hourglass_catalog::Collection;
use std::time::Instant;

/// Whether `count` of `query` with `hint` is a fast count.
pub(super) fn applies(query: Option<&Document>, hint: Option<&bson::Bson>) -> bool {
    let no_hint = match hint {
        None | Some(bson::Bson::Null) => true,
        Some(bson::Bson::Document(h)) => h.is_empty(),
        Some(_) => false,
    };
    query.is_none_or(Document::is_empty) && no_hint
}

/// The documents `c` counts after `skip` and within `limit`, and those skipped.
pub(super) fn count(
    c: &Collection,
    skip: u64,
    limit: Option<u64>,
) -> Result<(u64, u64), CommandError> {
    let total = c.count()?;
    let skipped = total.min(skip);
    Ok(((total - skipped).min(limit.unwrap_or(u64::MAX)), skipped))
}

/// `planner` with the fast count as its winning plan and, when `execute`, the
/// `executionStats` of counting `c` with `skip` and `limit`.
pub(super) fn explain(
    c: &Collection,
    mut planner: Document,
    skip: Option<i64>,
    limit: Option<i64>,
    execute: bool,
) -> Result<Document, CommandError> {
    planner.insert("winningPlan", doc! {"stage": "RECORD_STORE_FAST_COUNT"});
    let mut reply = doc! {"explainVersion": "1", "queryPlanner": planner};
    if !execute {
        return Ok(reply);
    }
    let started = Instant::now();
    let skip = skip.unwrap_or(0).max(0) as u64;
    let (counted, skipped) = count(c, skip, limit.map(i64::unsigned_abs))?;
    let millis = started.elapsed().as_millis() as i64;
    let mut stage = with_common(
        doc! {"stage": "RECORD_STORE_FAST_COUNT", "nReturned": 0_i64},
        1,
        true,
        millis,
    );
    stage.insert("nCounted", counted as i64);
    stage.insert("nSkipped", skipped as i64);
    reply.insert(
        "executionStats",
        doc! {
            "executionSuccess": true,
            "nReturned": 0_i64,
            "executionTimeMillis": millis,
            "totalKeysExamined": 0_i64,
            "totalDocsExamined": 0_i64,
            "executionStages": stage,
        },
    );
    Ok(reply)
}
