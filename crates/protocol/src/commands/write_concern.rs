//! A command's `writeConcern`, checked as mongod checks it. A standalone server refuses
//! acknowledgement from more than one member (`w > 1`) or by a tag; the one-member replica
//! set takes the write and reports the concern it cannot satisfy in `writeConcernError`,
//! as a replica set whose other members never answer does.

use super::Request;
use crate::error::CommandError;
use bson::{doc, Bson, Document};

/// What the write concern asks that this server cannot give.
enum Unsatisfiable {
    Members,
    Tag(String),
}

/// Checks the `writeConcern` of `req`: an error for a standalone server; for the replica
/// set, the `writeConcernError` to add to the reply, if any.
pub fn check(req: &Request) -> Result<Option<Document>, CommandError> {
    let Some(wc) = req.body.get("writeConcern") else {
        return Ok(None);
    };
    let wc = match wc {
        Bson::Document(d) => d,
        v => return Err(req.wrong_type("writeConcern", v, "object")),
    };
    let unsatisfiable = match wc.get("w") {
        None | Some(Bson::Null) => None,
        Some(Bson::String(mode)) if mode == "majority" => None,
        Some(Bson::String(mode)) => Some(Unsatisfiable::Tag(mode.clone())),
        Some(v) => match super::args::as_i64(v) {
            Some(n) if !(0..=50).contains(&n) => {
                return Err(CommandError::failed_to_parse(format!(
                    "w has to be a non-negative number and not greater than 50; found: {n}"
                )))
            }
            Some(n) if n > 1 => Some(Unsatisfiable::Members),
            Some(_) => None,
            None => {
                return Err(CommandError::failed_to_parse(
                    "w has to be a number or a string",
                ))
            }
        },
    };
    let Some(what) = unsatisfiable else {
        return Ok(None);
    };
    if req.state.repl_set.get().is_none() {
        return Err(CommandError::bad_value(match what {
            Unsatisfiable::Members => "cannot use 'w' > 1 when a host is not replicated".to_string(),
            Unsatisfiable::Tag(mode) => format!(
                "cannot use non-majority 'w' mode {mode} when a host is not a member of a replica set"
            ),
        }));
    }
    Ok(Some(match what {
        Unsatisfiable::Members => doc! {
            "code": 100,
            "codeName": "UnsatisfiableWriteConcern",
            "errmsg": "Not enough data-bearing nodes",
            "errInfo": {"writeConcern": wc.clone()},
        },
        Unsatisfiable::Tag(mode) => doc! {
            "code": 79,
            "codeName": "UnknownReplWriteConcern",
            "errmsg": format!("No write concern mode named '{mode}' found in replica set configuration"),
            "errInfo": {"writeConcern": wc.clone()},
        },
    }))
}
