//! `currentOp` and `killOp` (admin only), over the registry of running operations.

use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_query::filter::Filter;

pub fn current_op(req: &Request) -> CmdResult {
    req.admin_only()?;
    // Fields other than the command name and $-options filter the output.
    let mut filter = bson::Document::new();
    for (k, v) in req.body.iter().skip(1) {
        if !k.starts_with('$') && !super::args::GENERIC_FIELDS.contains(&k.as_str()) {
            filter.insert(k.clone(), v.clone());
        }
    }
    let filter = Filter::parse(&filter)?;
    let own = req.body.get_bool("$ownOps").unwrap_or(false);
    let inprog: Vec<Bson> = req
        .state
        .ops
        .all()
        .into_iter()
        .filter(|op| !own || op.conn_id == req.conn.id)
        .map(|op| op.to_document(&req.state.host))
        .filter(|d| filter.matches(d))
        .map(Bson::Document)
        .collect();
    let mut reply = doc! {"inprog": inprog};
    if req.state.write_gate.is_locked() {
        reply.insert("fsyncLock", true);
    }
    Ok(reply)
}

/// The input of a `$currentOp` stage (`{aggregate: 1}` on `admin`): the operations in
/// progress, the connection's own unless `allUsers`. Idle connections and sessions are
/// not tracked, so asking for them is refused rather than answered without them.
pub fn stage_input(
    req: &Request,
    spec: &Document,
    collectionless: bool,
) -> Result<Vec<Document>, CommandError> {
    if req.db != "admin" || !collectionless {
        return Err(CommandError::new(
            73,
            "$currentOp must be run against the 'admin' database with {aggregate: 1}",
        ));
    }
    let mut all_users = false;
    for (k, v) in spec {
        let flag = match v {
            Bson::Boolean(b) => *b,
            _ => {
                return Err(CommandError::failed_to_parse(format!(
                    "The '{k}' parameter of the $currentOp stage must be a boolean value, but found: {v}"
                )))
            }
        };
        match k.as_str() {
            "allUsers" => all_users = flag,
            "localOps" | "truncateOps" | "backtrace" => {}
            "idleConnections" | "idleSessions" | "idleCursors" if flag => {
                return Err(CommandError::invalid_options(format!(
                    "$currentOp: '{k}: true' is not supported by this server (it tracks operations in progress only)"
                )))
            }
            "idleConnections" | "idleSessions" | "idleCursors" => {}
            other => {
                return Err(CommandError::failed_to_parse(format!(
                    "Unrecognized option '{other}' in $currentOp stage."
                )))
            }
        }
    }
    Ok(req
        .state
        .ops
        .all()
        .into_iter()
        .filter(|op| all_users || op.conn_id == req.conn.id)
        .map(|op| op.to_document(&req.state.host))
        .collect())
}

pub fn kill_op(req: &Request) -> CmdResult {
    req.admin_only()?;
    let opid = match req.body.get("op") {
        None => return Err(CommandError::new(4, "Missing expected field \"op\"")),
        Some(v) => super::args::as_i64(v).ok_or_else(|| req.wrong_type("op", v, "long"))?,
    };
    if let Ok(opid) = u64::try_from(opid) {
        let found = req.state.ops.kill(opid);
        tracing::info!(opid, found, "going to kill op");
    }
    Ok(doc! {"info": "attempting to kill op"})
}
