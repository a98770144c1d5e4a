//! `insert`: ordered and unordered, with per-document `writeErrors`.

use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::state::OpCounters;
use bson::{doc, Document, RawDocument};

/// MongoDB's refusal of a document with two top-level `_id` fields (time-series
/// measurements get it from the bucket catalog).
const MULTIPLE_IDS: &str = "can't have multiple _id fields in one document";

pub fn insert(req: &Request) -> CmdResult {
    req.check_fields(&["documents", "ordered"])?;
    let coll = req.collection()?;
    super::views::refuse_on_view(req, &coll)?;
    let batch = req.insert_documents()?;
    let statements = batch.docs();
    let ordered = req.opt_bool("ordered")?.unwrap_or(true);
    let n = statements.len() as u64;
    let (inserted, mut errors, refused): (usize, Vec<Document>, Vec<Document>) =
        match Target::resolve(req, &coll) {
            Target::TimeSeries { buckets, options } => {
                // Measurements go to the bucket catalog raw, never decoded into documents.
                let (docs, index_of, refused) = accept(&statements, ordered, Ok);
                let out = req
                    .state
                    .timeseries
                    .insert(&buckets, &options, docs, ordered)?;
                (out.inserted, write_errors(out.errors, &index_of), refused)
            }
            // Bucket documents written directly (a restore): checked and stored closed.
            Target::Buckets { buckets, options } => {
                let (docs, index_of, refused) = accept(&statements, ordered, decode);
                let out = req
                    .state
                    .timeseries
                    .insert_buckets(&buckets, &options, &docs, ordered)?;
                (out.inserted, write_errors(out.errors, &index_of), refused)
            }
            Target::Regular(_) => {
                let (docs, index_of, refused) = accept(&statements, ordered, |raw| {
                    let ids = raw
                        .into_iter()
                        .filter(|f| matches!(f, Ok((k, _)) if *k == "_id"))
                        .count();
                    if ids > 1 {
                        return Err(CommandError::bad_value(MULTIPLE_IDS));
                    }
                    decode(raw)
                });
                let collection = req.state.catalog.get_or_create(&req.db, &coll)?;
                let out = collection.insert(docs, ordered);
                (out.inserted, write_errors(out.errors, &index_of), refused)
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

fn decode(raw: &RawDocument) -> Result<Document, CommandError> {
    bson::from_slice::<Document>(raw.as_bytes()).map_err(|e| CommandError::new(22, e.to_string()))
}

/// The write's errors as `writeErrors`, numbered by statement (`index_of` maps the
/// documents passed on to the write to statement indexes).
fn write_errors<E: Into<CommandError>>(
    errors: Vec<(usize, E)>,
    index_of: &[usize],
) -> Vec<Document> {
    errors
        .into_iter()
        .map(|(j, e)| e.into().write_error(index_of.get(j).copied().unwrap_or(j)))
        .collect()
}

/// The documents `take` passes on to the write, the statement index of each, and those
/// it refuses as write errors (an ordered insert stops at the first).
fn accept<'a, T>(
    statements: &[&'a RawDocument],
    ordered: bool,
    take: impl Fn(&'a RawDocument) -> Result<T, CommandError>,
) -> (Vec<T>, Vec<usize>, Vec<Document>) {
    let mut refused = Vec::new();
    let mut docs = Vec::with_capacity(statements.len());
    let mut index_of = Vec::with_capacity(statements.len());
    for (i, s) in statements.iter().enumerate() {
        match take(s) {
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
    (docs, index_of, refused)
}
