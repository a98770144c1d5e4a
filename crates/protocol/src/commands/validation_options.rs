//! The validation options of `create` and `collMod` (`validator`, `validationLevel`,
//! `validationAction`), checked as MongoDB 7.0 checks them before they are stored in the
//! collection's options (enforcement: `hourglass_catalog::validation`).

use super::Request;
use crate::error::CommandError;
use bson::Bson;
use hourglass_catalog::validation::{parse_validator, Action, Level};

/// The option names.
pub const KEYS: [&str; 3] = ["validator", "validationLevel", "validationAction"];

/// Databases where MongoDB refuses validators.
const INTERNAL_DBS: [&str; 3] = ["admin", "local", "config"];

/// Checks one validation option of `req` (a `create` or `collMod` of `coll`); returns the
/// value to store.
pub fn check(req: &Request, coll: &str, key: &str, v: &Bson) -> Result<Bson, CommandError> {
    match key {
        "validator" => {
            let Bson::Document(spec) = v else {
                return Err(req.wrong_type(key, v, "object"));
            };
            if !spec.is_empty() && INTERNAL_DBS.contains(&req.db.as_str()) {
                return Err(CommandError::invalid_options(format!(
                    "Document validators are not allowed on collection {}.{coll} in the {} internal database",
                    req.db, req.db
                )));
            }
            parse_validator(spec)?;
            Ok(v.clone())
        }
        "validationLevel" | "validationAction" => {
            let Bson::String(s) = v else {
                return Err(req.wrong_type(key, v, "string"));
            };
            let known = match key {
                "validationLevel" => Level::parse(s).is_some(),
                _ => Action::parse(s).is_some(),
            };
            if !known {
                return Err(CommandError::bad_value(format!(
                    "Enumeration value '{s}' for field '{}.{key}' is not a valid value.",
                    req.command_name()
                )));
            }
            Ok(v.clone())
        }
        other => Err(CommandError::unknown_field(req.command_name(), other)),
    }
}

/// Whether a command asks to skip validation (`bypassDocumentValidation`, a bool or a
/// number as MongoDB's `safeBool`).
pub fn bypass_requested(req: &Request) -> bool {
    crate::access::check::bypass_requested(&req.body)
}
