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
    super::views::refuse_on_view(req, &coll)?;
    let statements = req.insert_documents()?;
    let ordered = req.opt_bool("ordered")?.unwrap_or(true);
    let n = statements.len() as u64;
    // Documents refused before the write (an ordered insert stops at the first), and the
    // statement index of each document passed on.
    let mut refused: Vec<Document> = Vec::new();
    let mut docs = Vec::with_capacity(statements.len());
    let mut index_of = Vec::with_capacity(statements.len());
    for (i, s) in statements.into_iter().enumerate() {
        match s {
            Ok(d) => {
                docs.push(d);
                index_of.push(i);
            }
            Err(e) => {
                refused.push(e.write_error(i));
                if ordered {
                    break;
                }
            }
        }
    }
    let statement = |j: usize| index_of.get(j).copied().unwrap_or(j);
    let (inserted, mut errors): (usize, Vec<Document>) = match Target::resolve(req, &coll) {
        Target::TimeSeries { buckets, options } => {
            let out = req
                .state
                .timeseries
                .insert(&buckets, &options, docs, ordered)?;
            let errors = out
                .errors
                .into_iter()
                .map(|(j, e)| CommandError::from(e).write_error(statement(j)))
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
            let errors = out
                .errors
                .iter()
                .map(|(j, e)| write_error(statement(*j), e))
                .collect();
            (out.inserted, errors)
        }
    };
    // An ordered insert reports only the first failure: one of the write's, which comes
    // before the refused document, or else the refused document.
    if !ordered || errors.is_empty() {
        errors.extend(refused);
    }
    errors.sort_by_key(|e| e.get_i32("index").unwrap_or(0));
    OpCounters::add(&req.state.opcounters.insert, n);
    let mut reply = doc! {"n": inserted as i32};
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(reply)
}
