//! The session protocol of multi-document transactions, as mongod speaks it: a command
//! carrying `lsid`, `txnNumber` and `autocommit: false` is a statement of the session's
//! transaction `txnNumber`; `startTransaction: true` opens it; `commitTransaction` /
//! `abortTransaction` (run on `admin`) end it. The transactions themselves are
//! `crate::transactions`'.
//!
//! A statement runs with the thread working for the transaction
//! (`hourglass_storage::engine::txn`): its reads see the transaction's snapshot and its own
//! writes, its writes stay in the transaction until commit. A statement that fails aborts
//! the transaction, as in mongod; a command not allowed in a transaction is refused (263)
//! and leaves it open.
//!
//! `txnNumber` without `autocommit` is a retryable write: with `--replSet` it runs once per
//! session and number (a retry gets the first reply); on a standalone it is refused with
//! a standalone mongod's error (20).

use super::request_options::{read_concern_level, statements};
use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::transactions::{session_key, Retry};
use bson::{Bson, Document};
use hourglass_storage::txn::Scope;
use std::time::Duration;

/// Commands a transaction may run (mongod 7.0's list; `create` and `createIndexes` only
/// at read concern `local`, see [`check_operation`]).
const ALLOWED: &[&str] = &[
    "abortTransaction",
    "aggregate",
    "commitTransaction",
    "create",
    "createIndexes",
    "delete",
    "distinct",
    "find",
    "findAndModify",
    "findandmodify",
    "getMore",
    "insert",
    "killCursors",
    "update",
];

/// The write commands: drivers retry them (`txnNumber` without `autocommit`), and a
/// transaction may not run them on time-series collections.
const WRITES: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
];

/// A statement of a transaction, running: keeps the thread working for the transaction
/// until it is finished.
pub struct Statement {
    key: Vec<u8>,
    number: i64,
    _scope: Scope,
}

/// What a command is to the sessions' transactions.
pub enum Begun {
    /// Neither a transaction's statement nor a retryable write.
    Plain,
    Statement(Statement),
    /// A retryable write to run and remember (`--replSet`).
    Retryable {
        key: Vec<u8>,
        number: i64,
    },
    /// A retryable write that already ran: its reply.
    Replay(Document),
}

/// A retryable write (`txnNumber` without `autocommit`): with `--replSet`, run once per
/// session and number; on a standalone, refused as a standalone mongod refuses it (20).
fn retryable_write(
    req: &Request,
    name: &str,
    key: Vec<u8>,
    number: i64,
) -> Result<Begun, CommandError> {
    if req.state.repl_set.get().is_none() {
        return Err(CommandError::new(
            20,
            "Transaction numbers are only allowed on a replica set member or mongos",
        ));
    }
    if !WRITES.contains(&name) {
        return Err(CommandError::new(
            50768,
            format!("txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and {name} is not a retryable write command."),
        ));
    }
    let multi = match name {
        "update" => statements(req, "updates")?
            .iter()
            .any(|s| s.get_bool("multi").unwrap_or(false)),
        "delete" => statements(req, "deletes")?.iter().any(|s| {
            matches!(
                s.get("limit"),
                Some(Bson::Int32(0) | Bson::Int64(0)) | Some(Bson::Double(0.0))
            )
        }),
        _ => false,
    };
    if multi {
        return Err(invalid(&format!(
            "Cannot use (or request) retryable writes with {}",
            if name == "update" {
                "multi=true"
            } else {
                "limit=0"
            }
        )));
    }
    Ok(match req.state.transactions.retryable(&key, number)? {
        Retry::Run => Begun::Retryable { key, number },
        Retry::Replay(reply) => Begun::Replay(reply),
    })
}

fn invalid(msg: &str) -> CommandError {
    CommandError::invalid_options(msg)
}

fn txn_number(v: &Bson) -> Result<i64, CommandError> {
    match v {
        Bson::Int64(n) => Ok(*n),
        Bson::Int32(n) => Ok(i64::from(*n)),
        _ => Err(CommandError::type_mismatch(
            "BSON field 'txnNumber' is the wrong type, expected type 'long'",
        )),
    }
}

fn flag(body: &Document, name: &str) -> Result<Option<bool>, CommandError> {
    match body.get(name) {
        None => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(_) => Err(CommandError::type_mismatch(format!(
            "BSON field '{name}' is the wrong type, expected type 'bool'"
        ))),
    }
}

fn lifetime_limit(req: &Request) -> Duration {
    crate::transactions::lifetime_limit(&req.state.params)
}

/// `readConcern.level` of a transaction's first statement: every transaction reads a
/// snapshot here; `local` and `majority` are the same on one node.
fn check_read_concern(body: &Document, first: bool) -> Result<(), CommandError> {
    let Some(rc) = body.get("readConcern") else {
        return Ok(());
    };
    if !first {
        return Err(invalid(
            "Only the first command in a transaction may specify a readConcern",
        ));
    }
    match rc {
        Bson::Document(d) => match read_concern_level(d)? {
            None | Some("local" | "majority" | "snapshot") => Ok(()),
            Some(l) => Err(invalid(&format!(
                "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction, not '{l}'"
            ))),
        },
        _ => Err(CommandError::type_mismatch(
            "BSON field 'readConcern' is the wrong type, expected type 'object'",
        )),
    }
}

/// Refuses a command a transaction may not run (mongod's 263, or 72 for a write concern),
/// before anything changes; the transaction stays open.
fn check_allowed(req: &Request, name: &str) -> Result<(), CommandError> {
    if !ALLOWED.contains(&name) {
        return Err(CommandError::new(
            263,
            format!("Cannot run '{name}' in a multi-document transaction."),
        ));
    }
    let ends = name == "commitTransaction" || name == "abortTransaction";
    if !ends && req.body.contains_key("writeConcern") {
        return Err(invalid(
            "writeConcern is not allowed within a multi-statement transaction",
        ));
    }
    Ok(())
}

/// Refuses a statement whose operation a transaction cannot hold (263: `$out`/`$merge`, a
/// write to a time-series collection, a view or time-series collection created; 72:
/// `create`/`createIndexes` at a read concern other than `local`). Like any failed
/// statement, it aborts the transaction, as in mongod.
fn check_operation(req: &Request, name: &str, local_reads: bool) -> Result<(), CommandError> {
    let refuse = |msg: String| Err(CommandError::new(263, msg));
    if name == "create" || name == "createIndexes" {
        if !local_reads {
            return Err(invalid(&format!(
                "Cannot run '{name}' in a multi-document transaction with a read concern other than 'local'."
            )));
        }
        if req.body.contains_key("viewOn") {
            return refuse("Cannot create a view in a multi-document transaction.".into());
        }
        if req.body.contains_key("timeseries") {
            return refuse(
                "Cannot create a time-series collection in a multi-document transaction.".into(),
            );
        }
        if let Ok(coll) = req.body.get_str(name) {
            if !matches!(Target::resolve(req, coll), Target::Regular(_)) {
                return refuse(format!(
                    "Cannot run '{name}' on a time-series collection in a multi-document transaction."
                ));
            }
        }
    }
    if name == "aggregate" {
        let writes_out = req.body.get_array("pipeline").ok().and_then(|p| {
            p.iter()
                .filter_map(|s| s.as_document()?.keys().next())
                .find(|k| *k == "$out" || *k == "$merge")
        });
        if let Some(stage) = writes_out {
            return refuse(format!(
                "{stage} cannot be used in a multi-document transaction."
            ));
        }
    }
    if WRITES.contains(&name) {
        if let Ok(coll) = req.body.get_str(name) {
            if !matches!(Target::resolve(req, coll), Target::Regular(_)) {
                let verb = if name == "insert" {
                    "insert into"
                } else {
                    "write to"
                };
                return refuse(format!(
                    "Cannot {verb} a time-series collection in a multi-document transaction."
                ));
            }
        }
    }
    Ok(())
}

/// The statement `req` (command `name`) is of its session's transaction, if any;
/// `startTransaction: true` starts the transaction. Errors are the replies mongod gives,
/// before the command runs. `commitTransaction` and `abortTransaction` are checked here
/// and end the transaction in their handlers.
pub fn begin(req: &Request, name: &str) -> Result<Begun, CommandError> {
    let body = &req.body;
    let number = body.get("txnNumber").map(txn_number).transpose()?;
    let autocommit = flag(body, "autocommit")?;
    let start = flag(body, "startTransaction")?;
    if number.is_none() && autocommit.is_none() && start.is_none() {
        return Ok(Begun::Plain);
    }
    let Some(number) = number else {
        return Err(invalid(if autocommit.is_some() {
            "'autocommit' field requires a transaction number to also be specified"
        } else {
            "'startTransaction' field requires 'autocommit' field to also be specified"
        }));
    };
    let Some(key) = session_key(body.get("lsid")) else {
        return Err(invalid(
            "Transaction number requires a session ID to also be specified",
        ));
    };
    if number < 0 {
        return Err(invalid("Transaction number cannot be negative"));
    }
    match (autocommit, start) {
        (None, Some(_)) => {
            return Err(invalid(
                "'startTransaction' field requires 'autocommit' field to also be specified",
            ))
        }
        (None, None) => return retryable_write(req, name, key, number),
        (Some(true), _) => return Err(invalid("Specifying autocommit=true is not allowed.")),
        (Some(false), Some(false)) => {
            return Err(invalid("Specifying startTransaction=false is not allowed."))
        }
        _ => {}
    }
    check_allowed(req, name)?;
    if name == "commitTransaction" || name == "abortTransaction" {
        return Ok(Begun::Plain);
    }
    let txns = &req.state.transactions;
    let first = start == Some(true);
    check_read_concern(body, first)?;
    let open = if first {
        let local = match body.get_document("readConcern") {
            Ok(rc) => matches!(read_concern_level(rc)?, None | Some("local")),
            Err(_) => true,
        };
        txns.start(&req.state.catalog, &key, number, local)?
    } else {
        txns.resume(&req.state.catalog, &key, number, lifetime_limit(req))?
    };
    if let Err(e) = check_operation(req, name, open.local_reads) {
        txns.statement_failed(&req.state.catalog, &key, number);
        return Err(e);
    }
    Ok(Begun::Statement(Statement {
        key,
        number,
        _scope: open.txn.enter(),
    }))
}

/// Finishes a command with its reply (see [`finish_statement`]; a retryable write's reply
/// is remembered for its retries).
pub fn finish(req: &Request, begun: Begun, reply: &mut Document) {
    match begun {
        Begun::Statement(stmt) => finish_statement(req, stmt, reply),
        // A write that failed as a whole did not run: its retry runs it.
        Begun::Retryable { key, number } if !failed(reply) => {
            req.state.transactions.record_retryable(key, number, reply)
        }
        Begun::Retryable { .. } | Begun::Plain | Begun::Replay(_) => {}
    }
}

/// Finishes a statement with its reply: a failed statement aborts the transaction; a
/// write conflict reported as a write error becomes the command's error, labelled
/// transient, as mongod answers.
fn finish_statement(req: &Request, stmt: Statement, reply: &mut Document) {
    let conflict = reply.get_array("writeErrors").ok().and_then(|errs| {
        errs.iter()
            .filter_map(|e| e.as_document())
            .find(|e| e.get_i32("code").ok() == Some(112))
            .map(|e| e.get_str("errmsg").unwrap_or("write conflict").to_string())
    });
    if let Some(msg) = conflict {
        *reply = CommandError::new(112, msg).to_reply();
    }
    if !failed(reply) && !reply.contains_key("writeErrors") {
        return;
    }
    req.state
        .transactions
        .statement_failed(&req.state.catalog, &stmt.key, stmt.number);
}

fn failed(reply: &Document) -> bool {
    matches!(reply.get("ok"), Some(Bson::Double(v)) if *v == 0.0)
        || matches!(reply.get("ok"), Some(Bson::Int32(0)))
}

/// Codes a transaction may succeed after when run again from its start.
const TRANSIENT: &[i32] = &[24, 112, 246, 251, 267];

/// Adds the error labels mongod adds (unless the reply already has its own, e.g. a fail
/// point's): `TransientTransactionError` to a transient error of a transaction's command
/// (not to a commit that also has a write concern error), and `RetryableWriteError` to a
/// retryable write's or a commit's/abort's retriable error or write concern error.
pub fn label_errors(req: &Request, name: &str, reply: &mut Document) {
    if reply.contains_key("errorLabels") {
        return;
    }
    let in_txn = req.body.contains_key("autocommit");
    let ends = name == "commitTransaction" || name == "abortTransaction";
    let retryable =
        ends || (req.body.contains_key("txnNumber") && !in_txn && WRITES.contains(&name));
    let code = reply.get_i32("code").ok().filter(|_| failed(reply));
    let wce = reply
        .get_document("writeConcernError")
        .ok()
        .and_then(|w| w.get_i32("code").ok());
    let mut labels = Vec::new();
    if in_txn && code.is_some_and(|c| TRANSIENT.contains(&c)) && !(ends && wce.is_some()) {
        labels.push(Bson::String("TransientTransactionError".into()));
    }
    let retriable = |c: Option<i32>| c.is_some_and(hourglass_errors::is_retriable);
    if retryable && (retriable(code) || retriable(wce)) {
        labels.push(Bson::String("RetryableWriteError".into()));
    }
    if !labels.is_empty() {
        reply.insert("errorLabels", labels);
    }
}

/// The session and transaction number `commitTransaction` / `abortTransaction` ends.
fn ended(req: &Request, name: &str) -> Result<(Vec<u8>, i64), CommandError> {
    let Some(key) = session_key(req.body.get("lsid")) else {
        return Err(invalid(&format!("'{name}' must be run within a session")));
    };
    let number = match req.body.get("txnNumber") {
        Some(v) => txn_number(v)?,
        None => {
            return Err(invalid(&format!(
                "'{name}' must be run within a transaction"
            )))
        }
    };
    if req.db != "admin" {
        return Err(CommandError::new(
            13,
            format!("{name} may only be run against the admin database."),
        ));
    }
    Ok((key, number))
}

pub fn commit_transaction(req: &Request) -> CmdResult {
    let (key, number) = ended(req, "commitTransaction")?;
    let limit = lifetime_limit(req);
    req.state
        .transactions
        .commit(&req.state.catalog, &key, number, limit)?;
    Ok(Document::new())
}

pub fn abort_transaction(req: &Request) -> CmdResult {
    let (key, number) = ended(req, "abortTransaction")?;
    let limit = lifetime_limit(req);
    req.state
        .transactions
        .abort(&req.state.catalog, &key, number, limit)?;
    Ok(Document::new())
}
