//! Replica-set commands. A standalone server (the default) answers each as a standalone
//! mongod does, 76 `NoReplicationEnabled`. With `--replSet` the server is the primary of a
//! one-member set (`crate::repl_set`): `replSetGetStatus` and `replSetGetConfig` describe
//! it, `replSetInitiate` answers that it is initiated, and the commands that would change
//! the set (reconfigure, step down, freeze, maintenance, sync source) are refused.

use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::repl_set::ReplSet;
use bson::doc;

fn repl_set(req: &Request) -> Result<&ReplSet, CommandError> {
    req.state
        .repl_set
        .get()
        .ok_or_else(|| CommandError::new(76, "not running with --replSet"))
}

/// The member's address as the requesting client sees it: the address it connected to.
pub fn member_address(req: &Request) -> String {
    if req.conn.local.is_empty() {
        format!("{}:27017", req.state.host)
    } else {
        req.conn.local.clone()
    }
}

pub fn replset_get_status(req: &Request) -> CmdResult {
    Ok(repl_set(req)?.status(&member_address(req)))
}

pub fn replset_get_config(req: &Request) -> CmdResult {
    Ok(doc! {"config": repl_set(req)?.config(&member_address(req))})
}

pub fn replset_initiate(req: &Request) -> CmdResult {
    repl_set(req)?;
    Err(CommandError::new(23, "already initialized"))
}

/// The commands that would change the set: 76 on a standalone; with `--replSet`, refused
/// (one member, nothing to reconfigure or step down to).
pub fn replset_change(req: &Request) -> CmdResult {
    let rs = repl_set(req)?;
    let name = req.body.keys().next().map(String::as_str).unwrap_or("");
    Err(CommandError::new(
        20,
        format!(
            "{name} is not supported: {} is a one-member replica set served by this server alone",
            rs.name
        ),
    ))
}
