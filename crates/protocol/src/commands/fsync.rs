//! `fsync` (with `lock`) and `fsyncUnlock`: flush everything to disk, and hold writes back
//! until unlocked (`state.write_gate`; `dispatch` makes writing commands wait on it).

use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::doc;

/// Commands that write (they wait while `fsyncLock` holds).
pub const WRITING: &[&str] = &[
    "collMod",
    "compact",
    "create",
    "createIndexes",
    "createRole",
    "createUser",
    "delete",
    "drop",
    "dropAllRolesFromDatabase",
    "dropAllUsersFromDatabase",
    "dropDatabase",
    "dropIndexes",
    "dropRole",
    "dropUser",
    "findAndModify",
    "findandmodify",
    "grantPrivilegesToRole",
    "grantRolesToRole",
    "grantRolesToUser",
    "insert",
    "reIndex",
    "renameCollection",
    "revokePrivilegesFromRole",
    "revokeRolesFromRole",
    "revokeRolesFromUser",
    "update",
    "updateRole",
    "updateUser",
];

pub fn fsync(req: &Request) -> CmdResult {
    req.admin_only()?;
    req.check_fields(&["lock", "async", "forBackup"])?;
    if req.opt_bool("async")? == Some(true) {
        return Err(CommandError::invalid_options(
            "fsync: async is not supported by this server",
        ));
    }
    let lock = req.opt_bool("lock")?.unwrap_or(false);
    if lock {
        // Writes already running finish before the flush; new ones wait from now on.
        let n = req.state.write_gate.lock();
        req.state.catalog.flush()?;
        tracing::warn!(
            lock_count = n,
            "fsyncLock: writes are held until fsyncUnlock"
        );
        return Ok(doc! {
            "numFiles": 1,
            "lockCount": n as i64,
            "info": "now locked against writes, use db.fsyncUnlock() to unlock",
            "seeAlso": "http://dochub.mongodb.org/core/fsynccommand",
        });
    }
    req.state.catalog.flush()?;
    Ok(doc! {"numFiles": 1})
}

pub fn fsync_unlock(req: &Request) -> CmdResult {
    req.admin_only()?;
    req.check_fields(&[])?;
    match req.state.write_gate.unlock() {
        None => Err(CommandError::new(125, "fsyncUnlock called when not locked")),
        Some(n) => {
            tracing::info!(lock_count = n, "fsyncUnlock");
            Ok(doc! {"info": "fsyncUnlock completed", "lockCount": n as i64})
        }
    }
}
