//! `distinct` by DISTINCT_SCAN: without a query or hint, an index that starts with the
//! key (one entry per document) is read one value at a time; the command and its explain
//! both decide here.

use super::planned::{parse_hint, regular_read, ReadOpts};
use super::target::Target;
use super::Request;
use crate::error::CommandError;
use bson::{doc, Bson, Document};
use hourglass_catalog::distinct_scan::index_starting_with;
use hourglass_catalog::index::Index;
use hourglass_catalog::plan::Hint;
use hourglass_catalog::scan::ScanStats;
use hourglass_catalog::Collection;
use hourglass_query::compare::{compare_values, values_equal};
use hourglass_query::filter::Filter;
use hourglass_query::path::distinct_values;
use std::sync::Arc;

pub fn key_of(req: &Request, body: &Document) -> Result<String, CommandError> {
    match body.get("key") {
        Some(Bson::String(s)) => Ok(s.clone()),
        Some(v) => Err(req.wrong_type("key", v, "string")),
        None => Err(CommandError::missing_field("distinct.key")),
    }
}

pub fn values_of(doc: &Document, key: &str) -> Vec<Bson> {
    let path: Vec<&str> = key.split('.').collect();
    let mut found = Vec::new();
    distinct_values(&Bson::Document(doc.clone()), &path, &mut found);
    found
}

pub fn sorted_distinct(mut values: Vec<Bson>) -> Vec<Bson> {
    values.sort_by(compare_values);
    values.dedup_by(|a, b| values_equal(a, b));
    values
}

/// The regular collection and index a `distinct` of `key` reads by DISTINCT_SCAN: no
/// query, no hint, and an index that starts with `key` and has one entry per document.
pub fn by_scan(
    target: &Target,
    key: &str,
    query: Option<&Document>,
    hint: Option<&Hint>,
) -> Option<(Arc<Collection>, Arc<Index>)> {
    let Target::Regular(Some(c)) = target else {
        return None;
    };
    if query.is_some_and(|q| !q.is_empty()) || hint.is_some() {
        return None;
    }
    index_starting_with(c, key).map(|i| (c.clone(), i))
}

/// The distinct values of `key` read from `index`, and the scan's counters. The index keeps
/// documents without the field under null, with those holding an explicit null: when the
/// document the scan found for null lacks the field, the others under null are read for
/// an explicit one.
pub fn scanned_values(
    c: &Arc<Collection>,
    index: &Arc<Index>,
    key: &str,
) -> Result<(Vec<Bson>, Arc<ScanStats>), CommandError> {
    let stats = Arc::new(ScanStats::default());
    let mut values = Vec::new();
    let mut missing = false;
    for doc in c.distinct_scan(index.clone(), false, stats.clone()) {
        let found = values_of(&doc?, key);
        missing |= found.is_empty();
        values.extend(found);
    }
    if missing {
        let hint = Hint::Name(index.spec.name.clone());
        let spec = doc! {key: Bson::Null};
        let opts = ReadOpts {
            sort: None,
            hint: Some(&hint),
            after: &[],
            ..Default::default()
        };
        let nulls = regular_read(c, Filter::parse(&spec)?, Some(&spec), &opts)?;
        for doc in nulls.source {
            if values_of(&doc?, key).contains(&Bson::Null) {
                values.push(Bson::Null);
                break;
            }
        }
    }
    Ok((sorted_distinct(values), stats))
}

/// `explain` of a `distinct` read by DISTINCT_SCAN (`None` for any other `distinct`).
pub fn explain_by_scan(
    req: &Request,
    inner: &Document,
    coll: &str,
    execute: bool,
) -> Result<Option<Document>, CommandError> {
    let key = key_of(req, inner)?;
    let query = match inner.get("query") {
        Some(Bson::Document(d)) => Some(d),
        _ => None,
    };
    let hint = parse_hint(inner.get("hint"))?;
    let Some((c, index)) = by_scan(&Target::resolve(req, coll), &key, query, hint.as_ref()) else {
        return Ok(None);
    };
    let plan = |stats| super::aggregate_source::distinct_plan(&index, false, stats);
    let ns = format!("{}.{coll}", req.db);
    let planner = super::aggregate_source::distinct_query_planner(ns, &index, false);
    let mut reply = doc! {"explainVersion": "1", "queryPlanner": planner};
    if execute {
        let started = std::time::Instant::now();
        let (values, stats) = scanned_values(&c, &index, &key)?;
        let n = values.len() as u64;
        reply.insert(
            "executionStats",
            doc! {
                "executionSuccess": true,
                "nReturned": n as i64,
                "executionTimeMillis": started.elapsed().as_millis() as i64,
                "totalKeysExamined": stats.keys() as i64,
                "totalDocsExamined": stats.docs() as i64,
                "executionStages": plan(Some((&stats, n))),
            },
        );
    }
    Ok(Some(reply))
}
