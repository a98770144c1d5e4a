//! `compact` and `reIndex`, as a standalone MongoDB 7.0 answers them: `compact` rewrites
//! a collection's tables (a time-series collection's buckets) without the space of
//! deleted and overwritten entries and reports `bytesFreed`; `reIndex` drops and rebuilds
//! every secondary index of a regular collection (not atomically: a crash in between
//! leaves the indexes dropped, as MongoDB's does).

use super::indexes::index_documents;
use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson};
use hourglass_catalog::index::spec::IndexSpec;
use hourglass_catalog::DropIndexes;

fn not_found() -> CommandError {
    CommandError::new(26, "collection does not exist")
}

fn on_view(what: &str) -> CommandError {
    CommandError::new(166, format!("can't {what} a view"))
}

pub fn compact(req: &Request) -> CmdResult {
    req.check_fields(&["force"])?;
    let coll = req.collection()?;
    if super::views::is_view(req, &coll)? {
        return Err(on_view("compact"));
    }
    let c = match Target::resolve(req, &coll) {
        Target::Regular(Some(c)) => c,
        Target::TimeSeries { buckets, .. } | Target::Buckets { buckets, .. } => buckets,
        Target::Regular(None) => return Err(not_found()),
    };
    let freed = c.compact()?;
    let freed = i32::try_from(freed)
        .map(Bson::Int32)
        .unwrap_or(Bson::Int64(i64::try_from(freed).unwrap_or(i64::MAX)));
    Ok(doc! {"bytesFreed": freed})
}

pub fn re_index(req: &Request) -> CmdResult {
    req.check_fields(&[])?;
    let coll = req.collection()?;
    if super::views::is_view(req, &coll)? {
        return Err(on_view("re-index"));
    }
    let c = match Target::resolve(req, &coll) {
        Target::Regular(Some(c)) => c,
        // A time-series collection is a view over its buckets in MongoDB 7.0.
        Target::TimeSeries { .. } => return Err(on_view("re-index")),
        Target::Buckets { buckets, .. } => buckets,
        Target::Regular(None) => return Err(not_found()),
    };
    tracing::warn!(ns = %format!("{}.{coll}", req.db), "reIndex is deprecated");
    let specs: Vec<IndexSpec> = c.indexes().iter().map(|i| i.spec.clone()).collect();
    let was = req
        .state
        .catalog
        .drop_indexes(&req.db, &c.namespace().coll, &DropIndexes::All)?;
    if !specs.is_empty() {
        req.state
            .catalog
            .create_indexes(&req.db, &c.namespace().coll, specs)?;
    }
    let rebuilt = req
        .state
        .catalog
        .get(&req.db, &c.namespace().coll)
        .ok_or_else(not_found)?;
    let indexes = index_documents(&rebuilt);
    Ok(doc! {"nIndexesWas": was as i32, "nIndexes": indexes.len() as i32, "indexes": indexes})
}
