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
//! `txnNumber` without `autocommit` (a retryable write) is refused with the error of a
//! standalone mongod (20): this server does not keep the statement history retryable writes
//! need.

use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::transactions::{session_key, transient};
use bson::{Bson, Document};
use hourglass_storage::txn::Scope;
use std::time::Duration;

/// Commands a transaction may run (mongod 7.0's list, without the DDL ones it allows in
/// some cases: `create` and `createIndexes` are refused here).
const ALLOWED: &[&str] = &[
    "abortTransaction",
    "aggregate",
    "commitTransaction",
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

/// Write commands, refused in a transaction on time-series collections.
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
    let secs = req
        .state
        .params
        .get_i64("transactionLifetimeLimitSeconds", 60)
        .max(1);
    Duration::from_secs(secs as u64)
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
        Bson::Document(d) => match d.get("level") {
            None | Some(Bson::Null) => Ok(()),
            Some(Bson::String(l)) if matches!(l.as_str(), "local" | "majority" | "snapshot") => {
                Ok(())
            }
            Some(Bson::String(l)) => Err(invalid(&format!(
                "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction, not '{l}'"
            ))),
            Some(_) => Err(CommandError::type_mismatch(
                "BSON field 'readConcern.level' is the wrong type, expected type 'string'",
            )),
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
/// write to a time-series collection). Like any failed statement, it aborts the
/// transaction, as in mongod.
fn check_operation(req: &Request, name: &str) -> Result<(), CommandError> {
    let refuse = |msg: String| Err(CommandError::new(263, msg));
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
pub fn begin(req: &Request, name: &str) -> Result<Option<Statement>, CommandError> {
    let body = &req.body;
    let number = body.get("txnNumber").map(txn_number).transpose()?;
    let autocommit = flag(body, "autocommit")?;
    let start = flag(body, "startTransaction")?;
    if number.is_none() && autocommit.is_none() && start.is_none() {
        return Ok(None);
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
        // A retryable write's: refused as a standalone mongod refuses it.
        (None, None) => {
            return Err(CommandError::new(
                20,
                "Transaction numbers are only allowed on a replica set member or mongos",
            ))
        }
        (Some(true), _) => return Err(invalid("Specifying autocommit=true is not allowed.")),
        (Some(false), Some(false)) => {
            return Err(invalid("Specifying startTransaction=false is not allowed."))
        }
        _ => {}
    }
    check_allowed(req, name)?;
    if name == "commitTransaction" || name == "abortTransaction" {
        return Ok(None);
    }
    let engine = req.state.catalog.engine();
    let txns = &req.state.transactions;
    let first = start == Some(true);
    check_read_concern(body, first)?;
    let txn = if first {
        txns.start(engine, &key, number)?
    } else {
        txns.resume(engine, &key, number, lifetime_limit(req))?
    };
    if let Err(e) = check_operation(req, name) {
        txns.statement_failed(engine, &key, number);
        return Err(e);
    }
    Ok(Some(Statement {
        key,
        number,
        _scope: txn.enter(),
    }))
}

/// Finishes a statement with its reply: a failed statement aborts the transaction; a
/// write conflict reported as a write error becomes the command's error, labelled
/// transient, as mongod answers.
pub fn finish(req: &Request, stmt: Statement, reply: &mut Document) {
    let conflict = reply.get_array("writeErrors").ok().and_then(|errs| {
        errs.iter()
            .filter_map(|e| e.as_document())
            .find(|e| e.get_i32("code").ok() == Some(112))
            .map(|e| e.get_str("errmsg").unwrap_or("write conflict").to_string())
    });
    if let Some(msg) = conflict {
        *reply = transient(CommandError::new(112, msg)).to_reply();
    }
    let failed = matches!(reply.get("ok"), Some(Bson::Double(v)) if *v == 0.0)
        || matches!(reply.get("ok"), Some(Bson::Int32(0)))
        || reply.contains_key("writeErrors");
    if !failed {
        return;
    }
    if matches!(reply.get_i32("code"), Ok(112 | 251)) && !reply.contains_key("errorLabels") {
        let labels = Bson::Array(vec![Bson::String("TransientTransactionError".into())]);
        reply.insert("errorLabels", labels);
    }
    req.state
        .transactions
        .statement_failed(req.state.catalog.engine(), &stmt.key, stmt.number);
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
        .abort(req.state.catalog.engine(), &key, number, limit)?;
    Ok(Document::new())
}
