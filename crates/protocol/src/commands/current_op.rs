//! `currentOp` and `killOp` (admin only), over the registry of running operations.

use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson};
use hourglass_query::filter::Filter;

fn admin_only(req: &Request, name: &str) -> Result<(), CommandError> {
    if req.db != "admin" {
        return Err(CommandError::new(
            13,
            "Unauthorized",
            format!("{name} may only be run against the admin database."),
        ));
    }
    Ok(())
}

pub fn current_op(req: &Request) -> CmdResult {
    admin_only(req, "currentOp")?;
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
    Ok(doc! {"inprog": inprog})
}

pub fn kill_op(req: &Request) -> CmdResult {
    admin_only(req, "killOp")?;
    let opid = match req.body.get("op") {
        None => {
            return Err(CommandError::new(
                4,
                "NoSuchKey",
                "Missing expected field \"op\"",
            ))
        }
        Some(v) => super::args::as_i64(v).ok_or_else(|| req.wrong_type("op", v, "long"))?,
    };
    if let Ok(opid) = u64::try_from(opid) {
        let found = req.state.ops.kill(opid);
        tracing::info!(opid, found, "going to kill op");
    }
    Ok(doc! {"info": "attempting to kill op"})
}
