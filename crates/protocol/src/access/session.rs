//! What one connection has authenticated as, and its SASL conversation in progress. As in
//! MongoDB 7.0 a connection authenticates as one user at most; its privileges are
//! resolved on first use and again whenever users or roles change.

use super::roles::{self, Resolved};
use super::store::{self, Kind, Name};
use crate::error::CommandError;
use crate::state::ServerState;
use hourglass_auth::{Mechanism, ServerConversation};
use std::sync::Arc;

/// Where a SCRAM conversation stands.
pub enum Step {
    /// The server-first message was sent; the client's proof is next. With
    /// `skipEmptyExchange` the conversation ends with the server signature.
    Proof(Box<ServerConversation>, bool),
    /// The proof checked out and the server signature was sent; an empty message ends it.
    Finished,
}

pub struct Conversation {
    pub mechanism: Mechanism,
    pub user: Name,
    pub step: Step,
    /// Whether the client sent its payloads as base64 strings (replies use the same form).
    pub base64: bool,
}

struct Authenticated {
    name: Name,
    resolved: Option<(u64, Arc<Resolved>)>,
}

#[derive(Default)]
pub struct Session {
    user: Option<Authenticated>,
    conversation: Option<Conversation>,
}

impl Session {
    pub fn user(&self) -> Option<&Name> {
        self.user.as_ref().map(|u| &u.name)
    }

    /// Makes `name` the connection's user. A connection authenticates once: another user
    /// is refused with MongoDB's errors (the same user again is allowed).
    pub fn login(&mut self, name: Name) -> Result<(), CommandError> {
        if let Some(current) = self.user() {
            if *current != name {
                let (code, msg) = if current.db == name.db {
                    (5626702, format!("Client has attempted to authenticate on multiple databases.Already authenticated as: {current}"))
                } else {
                    (5626701, format!("Each client connection may only be authenticated once. Previously authenticated as: {current}"))
                };
                return Err(CommandError::new(code, msg));
            }
            return Ok(());
        }
        self.user = Some(Authenticated {
            name,
            resolved: None,
        });
        Ok(())
    }

    pub fn logout(&mut self) {
        self.user = None;
        self.conversation = None;
    }

    /// Starts a conversation, replacing any unfinished one, so a client that never
    /// finishes holds one at most. (MongoDB numbers every conversation 1.)
    pub fn begin(&mut self, conversation: Conversation) {
        self.conversation = Some(conversation);
    }

    /// Takes the conversation out of the session (a failed step ends it).
    pub fn take_conversation(&mut self) -> Option<Conversation> {
        self.conversation.take()
    }

    pub fn put_conversation(&mut self, c: Conversation) {
        self.conversation = Some(c);
    }
}

/// The connection's user and its privileges as of the current users and roles (empty
/// when the user has been dropped since it authenticated); None when not authenticated.
pub fn current(
    state: &ServerState,
    session: &parking_lot::Mutex<Session>,
) -> Result<Option<(Name, Arc<Resolved>)>, CommandError> {
    let mut session = session.lock();
    let Some(user) = session.user.as_mut() else {
        return Ok(None);
    };
    let generation = state.access.generation();
    if let Some((g, r)) = &user.resolved {
        if *g == generation {
            return Ok(Some((user.name.clone(), r.clone())));
        }
    }
    let resolved = match store::get(state, Kind::User, &user.name)? {
        Some(d) => roles::resolve(state, &store::role_names(d.get("roles")))?,
        None => Resolved::default(),
    };
    let resolved = Arc::new(resolved);
    user.resolved = Some((generation, resolved.clone()));
    Ok(Some((user.name.clone(), resolved)))
}
