//! `configureFailPoint` (a test command, as in mongod: it exists only with
//! `--setParameter enableTestCommands=1`, run on `admin`). Known fail points:
//! `failCommand` (see `crate::fail_point`) and the archive mover's crash points
//! `archiveMoverCrashBeforeCommit` and `archiveMoverCrashAfterCommit` (see
//! `crate::archive_mover`).

use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::doc;

/// Whether command `name` is a test command hidden because test commands are off.
pub fn hidden(req: &Request, name: &str) -> bool {
    name == "configureFailPoint" && !req.state.params.get_bool("enableTestCommands", false)
}

pub fn configure_fail_point(req: &Request) -> CmdResult {
    if req.db != "admin" {
        return Err(CommandError::new(
            13,
            "configureFailPoint may only be run against the admin database.",
        ));
    }
    let name = req.body.get_str("configureFailPoint").map_err(|_| {
        CommandError::new(
            2,
            "configureFailPoint requires the fail point name as a string",
        )
    })?;
    let mode = req
        .body
        .get("mode")
        .ok_or_else(|| CommandError::new(2, "configureFailPoint requires 'mode'"))?;
    if let Some(stage) = crate::archive_mover::crash_point(name) {
        let on = match mode {
            bson::Bson::String(m) if m == "alwaysOn" => true,
            bson::Bson::String(m) if m == "off" => false,
            _ => {
                return Err(CommandError::new(
                    2,
                    format!("{name} takes mode \"alwaysOn\" or \"off\""),
                ))
            }
        };
        crate::archive_mover::set_crash(&req.state, stage, on);
        return Ok(doc! {"count": 0});
    }
    if name != "failCommand" {
        return Err(CommandError::new(
            2,
            format!("Cannot find fail point named: {name}"),
        ));
    }
    let data = req.body.get_document("data").ok();
    let count = req.state.fail_command.configure(mode, data)?;
    Ok(doc! {"count": count})
}
