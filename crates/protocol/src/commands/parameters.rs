//! `getParameter`, `setParameter` and `getCmdLineOpts`.

use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::params::ParamError;
use bson::{doc, Bson, Document};

fn param_error(e: ParamError) -> CommandError {
    match e {
        ParamError::Unknown(_) | ParamError::ReadOnly(_) => {
            CommandError::invalid_options(e.to_string())
        }
        ParamError::BadValue { .. } => CommandError::bad_value(e.to_string()),
    }
}

pub fn get_parameter(req: &Request) -> CmdResult {
    let params = &req.state.params;
    let all = match req.body.get("getParameter") {
        Some(Bson::String(s)) => s == "*",
        Some(Bson::Document(d)) => d.get_bool("allParameters").unwrap_or(false),
        _ => false,
    };
    if all {
        return Ok(params.all());
    }
    let mut out = Document::new();
    for (k, _) in req.body.iter().skip(1) {
        if super::args::GENERIC_FIELDS.contains(&k.as_str()) {
            continue;
        }
        if let Some(v) = params.get(k) {
            out.insert(k.clone(), v);
        }
    }
    if out.is_empty() {
        return Err(CommandError::invalid_options("no option found to get"));
    }
    Ok(out)
}

pub fn set_parameter(req: &Request) -> CmdResult {
    let mut out = Document::new();
    for (k, v) in req.body.iter().skip(1) {
        if super::args::GENERIC_FIELDS.contains(&k.as_str()) {
            continue;
        }
        let was = req.state.params.set(k, v, false).map_err(param_error)?;
        out.insert("was", was);
        if k.starts_with("timeseries") {
            let limits = crate::state::bucket_limits(&req.state.params);
            req.state.timeseries.set_limits(limits);
        }
    }
    if out.is_empty() {
        return Err(CommandError::invalid_options(
            "no option found to set, use help:true to see options",
        ));
    }
    Ok(out)
}

pub fn get_cmd_line_opts(req: &Request) -> CmdResult {
    let c = &req.state.cmdline;
    Ok(doc! {"argv": c.argv.clone(), "parsed": c.parsed.clone()})
}

/// `getDefaultRWConcern` (admin only): a replica set member's cluster-wide read and write
/// concern defaults. None can be set here, so they are the implicit ones of a set without
/// arbiters; a standalone has none (51300, as mongod refuses it).
pub fn get_default_rw_concern(req: &Request) -> CmdResult {
    req.check_fields(&["inMemory"])?;
    let in_memory = req.opt_bool("inMemory")?.unwrap_or(false);
    if req.state.repl_set.get().is_none() {
        return Err(CommandError::new(
            51300,
            "'getDefaultRWConcern' is not supported on standalone nodes.",
        ));
    }
    let mut out = doc! {
        "defaultReadConcern": {"level": "local"},
        "defaultWriteConcern": {"w": "majority", "wtimeout": 0},
        "defaultWriteConcernSource": "implicit",
        "defaultReadConcernSource": "implicit",
        "localUpdateWallClockTime": bson::DateTime::now(),
    };
    if in_memory {
        out.insert("inMemory", true);
    }
    Ok(out)
}
