//! `insert`: ordered and unordered, with per-document `writeErrors`.

use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::state::OpCounters;
use bson::{doc, Document};
use hourglass_catalog::CatalogError;

/// One entry of `writeErrors`.
pub fn write_error(index: usize, e: &CatalogError) -> Document {
    let mut d = doc! {"index": index as i32, "code": e.code(), "codeName": e.code_name(), "errmsg": e.to_string()};
    if let CatalogError::DuplicateKey {
        key_pattern,
        key_value,
        ..
    } = e
    {
        d.insert("keyPattern", key_pattern.as_ref().clone());
        d.insert("keyValue", key_value.as_ref().clone());
    }
    d
}

pub fn insert(req: &Request) -> CmdResult {
    req.check_fields(&["documents", "ordered"])?;
    let coll = req.collection()?;
    let docs = req.write_statements("documents")?;
    let ordered = req.opt_bool("ordered")?.unwrap_or(true);
    let n = docs.len() as u64;
    let (inserted, errors): (usize, Vec<Document>) = match Target::resolve(req, &coll) {
        Target::TimeSeries { buckets, options } => {
            let out = req
                .state
                .timeseries
                .insert(&buckets, &options, docs, ordered)?;
            let errors = out
                .errors
                .into_iter()
                .map(|(i, e)| CommandError::from(e).write_error(i))
                .collect();
            (out.inserted, errors)
        }
        Target::Buckets { .. } => {
            return Err(CommandError::invalid_options(
                "direct inserts into a time-series buckets collection are not supported",
            ))
        }
        Target::Regular(_) => {
            let collection = req.state.catalog.get_or_create(&req.db, &coll)?;
            let out = collection.insert(docs, ordered);
            let errors = out.errors.iter().map(|(i, e)| write_error(*i, e)).collect();
            (out.inserted, errors)
        }
    };
    OpCounters::add(&req.state.opcounters.insert, n);
    let mut reply = doc! {"n": inserted as i32};
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(reply)
}
