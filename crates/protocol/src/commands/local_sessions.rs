//! The local session cache (`crate::sessions`) as commands see it: the
//! `$listLocalSessions` stage (the sessions of the current user by default, of every user
//! with `allUsers: true`, or of the `users` named), `startSession`, `killSessions` and
//! `killAllSessions`.

use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::sessions::Listing;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};

/// Minutes a session lives unused (mongod's `localLogicalSessionTimeoutMinutes` default).
const TIMEOUT_MINUTES: i32 = 30;

/// `startSession`: a new session id, registered as a driver's implicit session is on its
/// first use.
pub fn start_session(req: &Request) -> CmdResult {
    req.check_fields(&[])?;
    let lsid = doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: bson::Uuid::new().bytes().to_vec() }};
    let user = req.user().map(|u| u.to_string());
    req.state
        .sessions
        .touch(&Bson::Document(lsid.clone()), user);
    Ok(doc! {"id": lsid, "timeoutMinutes": TIMEOUT_MINUTES})
}

/// `killSessions: [lsid...]`: ends the sessions named (an empty list: every session, or
/// with access control on, the user's), aborting their transactions.
pub fn kill_sessions(req: &Request) -> CmdResult {
    req.check_fields(&[])?;
    let named = super::handshake::session_list(req, "killSessions")?;
    for (i, lsid) in named.iter().enumerate() {
        match lsid {
            Bson::Document(d) if d.contains_key("id") => {
                if crate::sessions::session_id(lsid).is_none() {
                    return Err(req.wrong_type(
                        &format!("killSessions.{i}.id"),
                        d.get("id").unwrap_or(&Bson::Null),
                        "binData",
                    ));
                }
            }
            Bson::Document(_) => {
                return Err(CommandError::missing_field(&format!("killSessions.{i}.id")))
            }
            other => return Err(req.wrong_type(&format!("killSessions.{i}"), other, "object")),
        }
    }
    let lsids = if !named.is_empty() {
        named
    } else if req.state.access.enabled() {
        let user = req.user().map(|u| u.to_string());
        req.state.sessions.ids(&Listing::Users(vec![user]))
    } else {
        req.state.sessions.ids(&Listing::All)
    };
    end(req, &lsids);
    Ok(Document::new())
}

/// `killAllSessions: [{user, db}...]`: ends every session of the users named (of every
/// user with an empty list), aborting their transactions.
pub fn kill_all_sessions(req: &Request) -> CmdResult {
    req.check_fields(&[])?;
    let users = super::handshake::session_list(req, "killAllSessions")?;
    let listing = if users.is_empty() {
        Listing::All
    } else {
        let names = users
            .iter()
            .enumerate()
            .map(|(i, u)| match u {
                Bson::Document(d) => match (d.get_str("user"), d.get_str("db")) {
                    (Ok(user), Ok(db)) => Ok(Some(format!("{user}@{db}"))),
                    (Err(_), _) => Err(CommandError::missing_field(&format!(
                        "killAllSessions.{i}.user"
                    ))),
                    (_, Err(_)) => Err(CommandError::missing_field(&format!(
                        "killAllSessions.{i}.db"
                    ))),
                },
                other => Err(req.wrong_type(&format!("killAllSessions.{i}"), other, "object")),
            })
            .collect::<Result<_, _>>()?;
        Listing::Users(names)
    };
    let lsids = req.state.sessions.ids(&listing);
    end(req, &lsids);
    Ok(Document::new())
}

/// Ends `lsids` as `endSessions` does: out of the cache, their transactions aborted.
fn end(req: &Request, lsids: &[Bson]) {
    req.state.sessions.end(lsids);
    req.state
        .transactions
        .end_sessions(&req.state.catalog, lsids);
}

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
