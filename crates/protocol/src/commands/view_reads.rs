//! `find`, `count` and `distinct` of a view, run as an `aggregate` of the view (which
//! puts the view's pipeline in front, see `views.rs`): `find` and `count` as the pipeline
//! their explain shows (`explain::view_pipeline`), `distinct` over the documents the view
//! yields. Each is called by its command when the name is a view.

use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_query::compare::{compare_values, values_equal};
use hourglass_query::path::distinct_values;

/// Runs `pipeline` as an aggregate on `coll` (a view) for a command of another kind;
/// `cursor` is the aggregate's cursor document.
fn aggregate_on(
    req: &Request,
    coll: &str,
    pipeline: Vec<Document>,
    cursor: Document,
    extra: &[&str],
) -> CmdResult {
    let mut body = doc! {"aggregate": coll, "pipeline": pipeline, "cursor": cursor};
    for k in extra {
        if let Some(v) = req.body.get(*k) {
            body.insert(*k, v.clone());
        }
    }
    super::aggregate::aggregate(&req.sub_request(body))
}

/// Every document of an aggregate reply, its cursor drained.
fn drain(req: &Request, reply: &Document) -> Result<Vec<Document>, CommandError> {
    let cursor = reply
        .get_document("cursor")
        .map_err(|e| CommandError::bad_value(e.to_string()))?;
    let mut docs: Vec<Document> = cursor
        .get_array("firstBatch")
        .map(|a| a.iter().filter_map(|d| d.as_document().cloned()).collect())
        .unwrap_or_default();
    let mut id = cursor.get_i64("id").unwrap_or(0);
    while id != 0 {
        match req.state.cursors.get_more(id, None, &req.interrupt) {
            Some(Ok((_, more, open))) => {
                for row in more {
                    docs.push(row.into_document()?);
                }
                if !open {
                    id = 0;
                }
            }
            Some(Err(e)) => return Err(e),
            None => id = 0,
        }
    }
    Ok(docs)
}

/// Find options MongoDB does not pass on to a view's aggregate.
const FIND_ONLY: &[&str] = &[
    "tailable",
    "awaitData",
    "oplogReplay",
    "noCursorTimeout",
    "returnKey",
    "min",
    "max",
];

/// A find with `showRecordId` on a view (time-series collections included): MongoDB runs
/// it as an aggregation, which has no record ids.
pub fn show_record_id_error() -> CommandError {
    CommandError::new(168, "Option showRecordId not supported in aggregation.")
}

/// `find` on a view: `$match`, `$sort`, `$skip`, `$limit` and `$project` after the
/// view's pipeline.
pub fn find(req: &Request, coll: &str) -> CmdResult {
    if req.opt_bool("showRecordId")? == Some(true) {
        return Err(show_record_id_error());
    }
    for k in FIND_ONLY {
        if req
            .body
            .get(*k)
            .is_some_and(|v| !matches!(v, Bson::Boolean(false)))
        {
            return Err(CommandError::invalid_options(format!(
                "'{k}' is not supported on a view"
            )));
        }
    }
    let shape = super::explain::shape_of("find", &req.body)?;
    let pipeline = super::explain::view_pipeline("find", &shape, &req.body);
    let single_batch =
        req.opt_bool("singleBatch")?.unwrap_or(false) || req.opt_i64("limit")?.unwrap_or(0) < 0;
    let mut cursor = Document::new();
    if let Some(b) = req.body.get("batchSize") {
        cursor.insert("batchSize", b.clone());
    }
    let mut reply = aggregate_on(
        req,
        coll,
        pipeline,
        cursor,
        &["hint", "let", "allowDiskUse", "collation"],
    )?;
    if single_batch {
        if let Ok(c) = reply.get_document_mut("cursor") {
            let id = c.get_i64("id").unwrap_or(0);
            req.state.cursors.kill(id);
            c.insert("id", 0_i64);
        }
    }
    Ok(reply)
}

/// `count` on a view.
pub fn count(req: &Request, coll: &str) -> CmdResult {
    let shape = super::explain::shape_of("count", &req.body)?;
    let pipeline = super::explain::view_pipeline("count", &shape, &req.body);
    let reply = aggregate_on(req, coll, pipeline, Document::new(), &["hint", "collation"])?;
    let n = drain(req, &reply)?
        .first()
        .and_then(|d| d.get("count").and_then(super::args::as_i64))
        .unwrap_or(0);
    Ok(doc! {"n": i32::try_from(n).map(Bson::Int32).unwrap_or(Bson::Int64(n))})
}

/// `distinct` on a view.
pub fn distinct(req: &Request, coll: &str, key: &str) -> CmdResult {
    let mut pipeline = Vec::new();
    if let Some(q) = req.opt_document("query")?.filter(|q| !q.is_empty()) {
        pipeline.push(doc! {"$match": q.clone()});
    }
    let reply = aggregate_on(req, coll, pipeline, Document::new(), &["hint", "collation"])?;
    let path: Vec<&str> = key.split('.').collect();
    let mut values = Vec::new();
    for d in drain(req, &reply)? {
        distinct_values(&Bson::Document(d), &path, &mut values);
    }
    values.sort_by(compare_values);
    values.dedup_by(|a, b| values_equal(a, b));
    Ok(doc! {"values": values})
}
