//! `delete`: a list of delete statements (`q`, `limit` 0 = all, 1 = one).

use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::state::OpCounters;
use bson::{doc, Bson, Document};
use hourglass_query::filter::Filter;

/// Whether a statement deletes one document (`limit: 1`) or all it matches (`0`).
fn statement_limit(stmt: &Document) -> Result<bool, CommandError> {
    match stmt.get("limit").and_then(super::args::as_i64) {
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        Some(n) => Err(CommandError::failed_to_parse(format!(
            "The limit field in delete objects must be 0 or 1. Got {n}"
        ))),
        None => Err(CommandError::missing_field("delete.deletes.limit")),
    }
}

fn run_statement(req: &Request, coll: &str, stmt: &Document) -> Result<u64, CommandError> {
    let q = match stmt.get("q") {
        Some(Bson::Document(d)) => d,
        _ => return Err(CommandError::missing_field("delete.deletes.q")),
    };
    let limit = statement_limit(stmt)?;
    let filter = Filter::parse(q)?;
    match Target::resolve(req, coll) {
        Target::TimeSeries { buckets, options } => Ok(req
            .state
            .timeseries
            .delete(&buckets, &options, q, limit)?
            .deleted),
        Target::Buckets { buckets, options } => Ok(req
            .state
            .timeseries
            .delete_buckets(&buckets, &options, &filter, limit)?
            .deleted),
        target => match target.require_regular("delete")? {
            Some(c) => {
                let hint = super::planned::parse_hint(stmt.get("hint"))?;
                Ok(c.delete_hinted(&filter, limit, hint.as_ref())?)
            }
            None => Ok(0),
        },
    }
}

pub fn delete(req: &Request) -> CmdResult {
    req.check_fields(&["deletes", "ordered", "let"])?;
    let coll = req.collection()?;
    super::views::refuse_on_view(req, &coll)?;
    let stmts = req.write_statements("deletes")?;
    super::args::check_statements(
        &stmts,
        "delete.deletes",
        &["q", "limit", "collation", "hint"],
        &["q", "limit"],
    )?;
    // A bad limit fails the command as it is parsed, before any statement runs.
    for stmt in &stmts {
        statement_limit(stmt)?;
    }
    let ordered = req.opt_bool("ordered")?.unwrap_or(true);
    let mut n = 0u64;
    let mut errors = Vec::new();
    for (i, stmt) in stmts.iter().enumerate() {
        OpCounters::add(&req.state.opcounters.delete, 1);
        let collation = super::request_options::statement_collation(stmt);
        let result = collation.and_then(|_scope| run_statement(req, &coll, stmt));
        match result {
            Ok(k) => n += k,
            Err(e) => {
                errors.push(e.write_error(i));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut reply = doc! {"n": n as i32};
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(reply)
}
