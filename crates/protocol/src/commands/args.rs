//! What a handler receives, and helpers to read command arguments with MongoDB's type
//! errors.

use crate::access::check::{self, Tgt, Visible};
use crate::access::store::Name;
use crate::client::ConnInfo;
use crate::error::CommandError;
use crate::state::ServerState;
use crate::wire::{DocSequence, MAX_WRITE_BATCH};
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use std::sync::Arc;

/// `insert`'s documents as the request holds them.
pub enum InsertDocuments {
    Sequence(DocSequence),
    Body(Vec<RawDocumentBuf>),
}

impl InsertDocuments {
    /// The documents, borrowed.
    pub fn docs(&self) -> Vec<&RawDocument> {
        match self {
            InsertDocuments::Sequence(seq) => seq.raw_documents().collect(),
            InsertDocuments::Body(docs) => docs.iter().map(|d| &**d).collect(),
        }
    }
}

pub struct Request {
    pub state: Arc<ServerState>,
    pub conn: Arc<ConnInfo>,
    pub db: String,
    pub body: Document,
    /// OP_MSG kind-1 document sequences (e.g. insert's `documents`), kept apart from
    /// the body so that handlers can take them without copying.
    pub sequences: parking_lot::Mutex<Vec<(String, DocSequence)>>,
    /// Stops the command: killOp, maxTimeMS, or the client disconnecting.
    pub interrupt: Arc<hourglass_query::interrupt::Interrupt>,
    /// The plan a read chose (`COLLSCAN`, `IXSCAN { a: 1 }`), for the slow-operation log
    /// and the profiler; shared with sub-requests (a view's read runs as one).
    pub plan_summary: Arc<parking_lot::Mutex<Option<String>>>,
    /// Where a read answered on the wire leaves its batch when the batch holds rows
    /// written from columns ([`crate::cursor::Row::Raw`]): the reply carries an empty
    /// array that the encoder fills with these bytes. `None` for requests whose reply is
    /// read as a document (a view's aggregate, the HTTP console): they get documents.
    pub raw_batch: Option<parking_lot::Mutex<Option<crate::cursor::RawBatch>>>,
}

/// Checks the number of statements in a write command.
pub fn check_batch_len(n: usize) -> Result<(), CommandError> {
    if n == 0 {
        return Err(batch_len_error(n));
    }
    check_batch_len_below(n, MAX_WRITE_BATCH)
}

fn check_batch_len_below(n: usize, max: usize) -> Result<(), CommandError> {
    if n > max {
        return Err(batch_len_error(n));
    }
    Ok(())
}

/// Checks the shape of write statements before any runs: a field not in `allowed` or a
/// missing `required` one fails the whole command (40415/40414 at `path`, e.g.
/// `update.updates`), as MongoDB's parser fails it.
pub fn check_statements(
    stmts: &[Document],
    path: &str,
    allowed: &[&str],
    required: &[&str],
) -> Result<(), CommandError> {
    for stmt in stmts {
        if let Some(k) = stmt.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(CommandError::unknown_field(path, k));
        }
        if let Some(f) = required.iter().find(|f| !stmt.contains_key(**f)) {
            return Err(CommandError::missing_field(&format!("{path}.{f}")));
        }
    }
    Ok(())
}

fn batch_len_error(n: usize) -> CommandError {
    CommandError::new(
        16,
        format!("Write batch sizes must be between 1 and {MAX_WRITE_BATCH}. Got {n} operations."),
    )
}

/// Fields every command may carry that handlers do not interpret.
pub const GENERIC_FIELDS: &[&str] = &[
    "$db",
    "lsid",
    "$clusterTime",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "writeConcern",
    "readConcern",
    "$readPreference",
    "comment",
    "maxTimeMS",
    // Checked by `dispatch` (`collection_uuid.rs`) for the commands that take it.
    "collectionUUID",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "$audit",
    "$client",
    "mayBypassWriteBlocking",
    "bypassDocumentValidation",
];

impl Request {
    /// A request made inside the server (HTTP routes, the console): no document
    /// sequences, a fresh interrupt.
    pub fn internal(
        state: Arc<ServerState>,
        conn: Arc<ConnInfo>,
        db: String,
        body: Document,
    ) -> Request {
        Request {
            state,
            conn,
            db,
            body,
            sequences: Default::default(),
            interrupt: Default::default(),
            plan_summary: Default::default(),
            raw_batch: None,
        }
    }

    /// Whether the connection may do `action` on `target` (always, with access control
    /// off).
    pub fn allowed(&self, action: &str, target: Tgt) -> Result<bool, CommandError> {
        check::allowed(&self.state, &self.conn, action, target)
    }

    /// The connection's user, when it has authenticated.
    pub fn user(&self) -> Option<Name> {
        self.conn.session.lock().user().cloned()
    }

    /// Who owns the cursors this command opens: its user (`name@db`) with access control
    /// on.
    pub fn cursor_owner(&self) -> Option<String> {
        match self.state.access.enabled() {
            true => self.user().map(|u| u.to_string()),
            false => None,
        }
    }

    /// See [`check::listing_filter`].
    pub fn listing_filter(
        &self,
        action: &str,
        target: Tgt,
        holds: impl Fn(&[hourglass_auth::Privilege], &str) -> bool + 'static,
    ) -> Result<Visible, CommandError> {
        check::listing_filter(&self.state, &self.conn, action, target, holds)
    }

    /// Refuses an admin-only command run in another database (13, as MongoDB words it).
    pub fn admin_only(&self) -> Result<(), CommandError> {
        if self.db != "admin" {
            return Err(CommandError::new(
                13,
                format!(
                    "{} may only be run against the admin database.",
                    self.command_name()
                ),
            ));
        }
        Ok(())
    }

    pub fn command_name(&self) -> &str {
        self.body.keys().next().map(String::as_str).unwrap_or("")
    }

    /// The collection named by the command's first field.
    pub fn collection(&self) -> Result<String, CommandError> {
        match self.body.iter().next() {
            Some((_, Bson::String(s))) if !s.is_empty() => Ok(s.clone()),
            Some((_, Bson::String(_))) => Err(CommandError::new(
                73,
                format!("Invalid namespace specified '{}.'", self.db),
            )),
            Some((_, v)) => Err(CommandError::new(
                73,
                format!("collection name has invalid type {}", type_name(v)),
            )),
            None => Err(CommandError::failed_to_parse("empty command")),
        }
    }

    /// `db.coll` for the command's collection.
    pub fn namespace(&self) -> Result<String, CommandError> {
        Ok(format!("{}.{}", self.db, self.collection()?))
    }

    /// Rejects fields other than the command name, `allowed` and the generic ones.
    /// Another command in this request's database, connection and operation (its
    /// deadline and kill flag), as a view read runs its aggregate.
    pub fn sub_request(&self, body: Document) -> Request {
        Request {
            state: self.state.clone(),
            conn: self.conn.clone(),
            db: self.db.clone(),
            body,
            sequences: Default::default(),
            interrupt: self.interrupt.clone(),
            plan_summary: self.plan_summary.clone(),
            raw_batch: None,
        }
    }

    pub fn check_fields(&self, allowed: &[&str]) -> Result<(), CommandError> {
        let name = self.command_name().to_string();
        let sequences = self.sequences.lock();
        let sequence_names = sequences.iter().map(|(n, _)| n);
        for k in self.body.keys().skip(1).chain(sequence_names) {
            if !allowed.contains(&k.as_str()) && !GENERIC_FIELDS.contains(&k.as_str()) {
                return Err(CommandError::unknown_field(&name, k));
            }
        }
        Ok(())
    }

    pub fn opt_document(&self, field: &str) -> Result<Option<&Document>, CommandError> {
        match self.body.get(field) {
            None | Some(Bson::Null) => Ok(None),
            Some(Bson::Document(d)) => Ok(Some(d)),
            Some(v) => Err(self.wrong_type(field, v, "object")),
        }
    }

    pub fn opt_bool(&self, field: &str) -> Result<Option<bool>, CommandError> {
        opt_bool_of(&self.body, field)
    }

    pub fn opt_i64(&self, field: &str) -> Result<Option<i64>, CommandError> {
        match self.body.get(field) {
            None | Some(Bson::Null) => Ok(None),
            Some(v) => as_i64(v)
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, v, "long")),
        }
    }

    /// An array of documents (e.g. `documents`, `updates`, `deletes`, `pipeline`), from
    /// the document sequence of that name (taken, not copied: call once per field) or
    /// from the body.
    pub fn documents(&self, field: &str) -> Result<Vec<Document>, CommandError> {
        self.documents_bounded(field, usize::MAX)
    }

    /// The statements of a write command (`documents`, `updates`, `deletes`): between 1 and
    /// maxWriteBatchSize of them, counted before any is decoded.
    pub fn write_statements(&self, field: &str) -> Result<Vec<Document>, CommandError> {
        let docs = self.documents_bounded(field, MAX_WRITE_BATCH)?;
        check_batch_len(docs.len())?;
        Ok(docs)
    }

    /// `insert`'s documents, raw: the request's document sequence itself (each document
    /// checked as BSON by the wire layer), or the body's array encoded.
    pub fn insert_documents(&self) -> Result<InsertDocuments, CommandError> {
        let seq = {
            let mut sequences = self.sequences.lock();
            let pos = sequences.iter().position(|(name, _)| name == "documents");
            pos.map(|p| sequences.swap_remove(p).1)
        };
        let Some(seq) = seq else {
            return self
                .write_statements("documents")?
                .iter()
                .map(|d| {
                    RawDocumentBuf::from_document(d)
                        .map_err(|e| CommandError::new(22, e.to_string()))
                })
                .collect::<Result<_, _>>()
                .map(InsertDocuments::Body);
        };
        check_batch_len(seq.len())?;
        Ok(InsertDocuments::Sequence(seq))
    }

    fn documents_bounded(&self, field: &str, max: usize) -> Result<Vec<Document>, CommandError> {
        let mut sequences = self.sequences.lock();
        if let Some(pos) = sequences.iter().position(|(name, _)| name == field) {
            let seq = sequences.swap_remove(pos).1;
            drop(sequences);
            check_batch_len_below(seq.len(), max)?;
            return seq
                .decode()
                .map_err(|e| CommandError::new(e.code(), e.to_string()));
        }
        drop(sequences);
        match self.body.get(field) {
            Some(Bson::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Bson::Document(d) => Ok(d.clone()),
                    other => Err(self.wrong_type(field, other, "object")),
                })
                .collect(),
            Some(v) => Err(self.wrong_type(field, v, "array")),
            None => Err(CommandError::missing_field(&format!(
                "{}.{field}",
                self.command_name()
            ))),
        }
    }

    pub fn wrong_type(&self, field: &str, v: &Bson, expected: &str) -> CommandError {
        CommandError::type_mismatch(format!(
            "BSON field '{}.{field}' is the wrong type '{}', expected type '{expected}'",
            self.command_name(),
            type_name(v)
        ))
    }
}

/// Optional bool `field` of the command document `body` (a number counts as true unless
/// 0), as MongoDB reads a command's bool options; refused as its wrong type otherwise.
pub fn opt_bool_of(body: &Document, field: &str) -> Result<Option<bool>, CommandError> {
    match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(Bson::Int32(i)) => Ok(Some(*i != 0)),
        Some(Bson::Int64(i)) => Ok(Some(*i != 0)),
        Some(Bson::Double(d)) => Ok(Some(*d != 0.0)),
        Some(v) => {
            let command = body.keys().next().map(String::as_str).unwrap_or("");
            Err(CommandError::type_mismatch(format!(
                "BSON field '{command}.{field}' is the wrong type '{}', expected type 'bool'",
                type_name(v)
            )))
        }
    }
}

/// A number as i64 when it is integral.
pub fn as_i64(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => Some(*d as i64),
        _ => None,
    }
}

pub use hourglass_query::compare::type_name;
