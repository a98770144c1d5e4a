//! `configureFailPoint` (a test command, as in mongod: it exists only with
//! `--setParameter enableTestCommands=1`, run on `admin`). Only the `failCommand` fail
//! point is known; see `crate::fail_point`.

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
    if name != "failCommand" {
        return Err(CommandError::new(
            2,
            format!("Cannot find fail point named: {name} (this server has only failCommand)"),
        ));
    }
    let mode = req
        .body
        .get("mode")
        .ok_or_else(|| CommandError::new(2, "configureFailPoint requires 'mode'"))?;
    let data = req.body.get_document("data").ok();
    let count = req.state.fail_command.configure(mode, data)?;
    Ok(doc! {"count": count})
}
