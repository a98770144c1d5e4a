//! What both HTTP write paths share: whether a database exists, the time-series
//! collection a write goes to (created on first use through the `create` command, so the
//! same validation applies), and the insert itself through the time-series store (the
//! same bucket catalog and group commit as a MongoDB `insert`; durable on return).

use crate::auth::Caller;
use crate::measurement_bson::DocBuffer;
use bson::{doc, Bson, Document};
use hourglass_catalog::Collection;
use hourglass_protocol::access::check::Tgt;
use hourglass_protocol::commands::{dispatch, Request};
use hourglass_protocol::state::OpCounters;
use hourglass_protocol::ServerState;
use hourglass_timeseries::{options_of, TimeseriesOptions};
use std::sync::Arc;

const BUCKETS_PREFIX: &str = "system.buckets.";

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("database not found: \"{0}\"")]
    DatabaseNotFound(String),
    /// The request cannot succeed as sent (a name MongoDB refuses, a collection of the
    /// wrong kind): not worth retrying.
    #[error("{0}")]
    Invalid(String),
    /// Worth retrying later (the disk is full).
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
    /// The caller lacks the privilege.
    #[error("{0}")]
    Forbidden(String),
}

/// Whether writes to `db` (a name the caller checked is not empty) may go ahead: it
/// exists, or `httpAutoCreateDatabase` is on.
pub fn check_database(state: &ServerState, db: &str) -> Result<(), IngestError> {
    if state.catalog.database_exists(db) || state.params.get_bool("httpAutoCreateDatabase", false) {
        return Ok(());
    }
    Err(IngestError::DatabaseNotFound(db.to_string()))
}

/// A time-series collection writes go to.
pub struct Destination {
    pub buckets: Arc<Collection>,
    pub options: TimeseriesOptions,
}

/// The time-series collection `db.coll`, created with `timeField: "time"`, `metaField`
/// and the `httpIngestGranularity` granularity when missing. A collection created
/// beforehand by the user keeps its own field names (the caller builds documents with
/// `options.time_field` and `options.meta_field`).
pub fn destination(
    state: &Arc<ServerState>,
    caller: &Caller,
    db: &str,
    coll: &str,
    meta_field: &str,
) -> Result<Destination, IngestError> {
    check_insert(state, caller, db, coll)?;
    if let Some(d) = existing(state, db, coll)? {
        return Ok(d);
    }
    let granularity = state.params.get_string("httpIngestGranularity", "seconds");
    run_command(
        state,
        caller,
        db,
        doc! {
            "create": coll,
            "timeseries": {"timeField": "time", "metaField": meta_field, "granularity": granularity},
        },
    )?;
    existing(state, db, coll)?
        .ok_or_else(|| IngestError::Internal(format!("{db}.{coll} vanished after its creation")))
}

/// Whether the caller may insert into `db.coll` (`Forbidden` if not).
pub fn check_insert(
    state: &ServerState,
    caller: &Caller,
    db: &str,
    coll: &str,
) -> Result<(), IngestError> {
    if caller.may(state, "insert", Tgt::Ns(db.to_string(), coll.to_string())) {
        return Ok(());
    }
    Err(IngestError::Forbidden(format!(
        "not authorized to write to {db}.{coll}"
    )))
}

/// The options of the time-series collection `db.coll` if it exists (`Invalid` when
/// `db.coll` is a collection of another kind); nothing is created.
pub fn existing_options(
    state: &ServerState,
    db: &str,
    coll: &str,
) -> Result<Option<TimeseriesOptions>, IngestError> {
    Ok(existing(state, db, coll)?.map(|d| d.options))
}

fn existing(state: &ServerState, db: &str, coll: &str) -> Result<Option<Destination>, IngestError> {
    if let Some(buckets) = state.catalog.get(db, &format!("{BUCKETS_PREFIX}{coll}")) {
        if let Some(options) = options_of(&buckets) {
            return Ok(Some(Destination { buckets, options }));
        }
    }
    if state.catalog.get(db, coll).is_some() {
        return Err(IngestError::Invalid(format!(
            "{db}.{coll} is not a time-series collection"
        )));
    }
    Ok(None)
}

/// Runs a MongoDB command as the caller; an error reply becomes `Invalid` (`Unavailable`
/// on a full disk, `Forbidden` without the privilege).
pub fn run_command(
    state: &Arc<ServerState>,
    caller: &Caller,
    db: &str,
    body: Document,
) -> Result<Document, IngestError> {
    let req = Request::internal(state.clone(), caller.0.clone(), db.to_string(), body);
    let reply = dispatch(&req);
    if matches!(reply.get("ok"), Some(Bson::Double(d)) if *d == 1.0) {
        return Ok(reply);
    }
    let msg = reply
        .get_str("errmsg")
        .unwrap_or("command failed")
        .to_string();
    Err(match reply.get_i32("code") {
        Ok(13) => IngestError::Forbidden(msg),
        // A full disk, or an error MongoDB classes as retriable (shutting down, ...).
        Ok(c) if c == 14031 || hourglass_errors::is_retriable(c) => IngestError::Unavailable(msg),
        _ => IngestError::Invalid(msg),
    })
}

/// What an insert did: how many documents were written, and why each refused one
/// (by its position in the input) was refused.
#[derive(Debug, Default)]
pub struct Written {
    pub written: usize,
    pub rejected: Vec<(usize, String)>,
}

/// Inserts measurements (unordered: a bad one does not stop the others) and returns once
/// they are durable. Blocking: call it off the async runtime.
pub fn insert(
    state: &ServerState,
    dest: &Destination,
    docs: &DocBuffer,
) -> Result<Written, IngestError> {
    let n = docs.len() as u64;
    let docs = docs.documents();
    state.write_gate.wait_open(None);
    let out = state
        .timeseries
        .insert(&dest.buckets, &dest.options, docs, false)
        .map_err(|e| {
            if e.is_out_of_space() {
                IngestError::Unavailable(e.to_string())
            } else {
                IngestError::Internal(e.to_string())
            }
        })?;
    OpCounters::add(&state.opcounters.insert, n);
    Ok(Written {
        written: out.inserted,
        rejected: out
            .errors
            .into_iter()
            .map(|(i, e)| (i, e.to_string()))
            .collect(),
    })
}
