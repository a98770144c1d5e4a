//! The `$listLocalSessions` stage: the sessions in the local session cache
//! (`crate::sessions`), of the current user by default, of every user with
//! `allUsers: true`, or of the `users` named.

use super::Request;
use crate::error::CommandError;
use crate::sessions::Listing;
use bson::{Bson, Document};

/// The documents `{$listLocalSessions: spec}` starts the pipeline with.
pub fn stage_input(
    req: &Request,
    spec: &Document,
    collectionless: bool,
) -> Result<Vec<Document>, CommandError> {
    if !collectionless {
        return Err(CommandError::new(
            73,
            "$listLocalSessions must be run against a database with {aggregate: 1}",
        ));
    }
    let mut listing = Listing::Users(vec![req.user().map(|u| u.to_string())]);
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("allUsers", Bson::Boolean(true)) => listing = Listing::All,
            ("allUsers", Bson::Boolean(false)) => {}
            ("users", Bson::Array(users)) => {
                let names = users
                    .iter()
                    .map(|u| match u {
                        Bson::Document(d) => match (d.get_str("user"), d.get_str("db")) {
                            (Ok(user), Ok(db)) => Ok(Some(format!("{user}@{db}"))),
                            _ => Err(CommandError::missing_field("$listLocalSessions.users.user")),
                        },
                        other => Err(req.wrong_type("$listLocalSessions.users", other, "object")),
                    })
                    .collect::<Result<_, _>>()?;
                listing = Listing::Users(names);
            }
            ("allUsers" | "users", other) => {
                let expected = if k == "allUsers" { "bool" } else { "array" };
                return Err(req.wrong_type(&format!("$listLocalSessions.{k}"), other, expected));
            }
            _ => return Err(CommandError::unknown_field("$listLocalSessions", k)),
        }
    }
    Ok(req.state.sessions.list(&listing))
}
