//! Where users and roles live: documents in `admin.system.users` and `admin.system.roles`
//! with MongoDB's shapes (`_id: "<db>.<name>"`), written through the catalog like any
//! collection, so they are durable when the command answers. Every change bumps the
//! access generation, which makes open connections re-read their privileges.

use crate::error::CommandError;
use crate::state::ServerState;
use bson::{doc, Bson, Document};
use hourglass_auth::{Credential, Mechanism};
use hourglass_catalog::Collection;
use hourglass_query::filter::Filter;
use hourglass_query::update::Update;
use std::sync::Arc;

/// A user or role name and its database (`name@db`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name {
    pub name: String,
    pub db: String,
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.name, self.db)
    }
}

impl Name {
    pub fn new(name: impl Into<String>, db: impl Into<String>) -> Name {
        Name {
            name: name.into(),
            db: db.into(),
        }
    }

    /// The `_id` MongoDB gives its document.
    pub fn id(&self) -> String {
        format!("{}.{}", self.db, self.name)
    }
}

/// Which of the two collections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    User,
    Role,
}

impl Kind {
    fn collection(self) -> &'static str {
        match self {
            Kind::User => "system.users",
            Kind::Role => "system.roles",
        }
    }

    /// The field holding the name (`user` or `role`).
    pub fn field(self) -> &'static str {
        match self {
            Kind::User => "user",
            Kind::Role => "role",
        }
    }
}

fn existing(state: &ServerState, kind: Kind) -> Option<Arc<Collection>> {
    state.catalog.get("admin", kind.collection())
}

/// The stored document of `name`.
pub fn get(state: &ServerState, kind: Kind, name: &Name) -> Result<Option<Document>, CommandError> {
    match existing(state, kind) {
        Some(c) => Ok(c.get(&Bson::String(name.id()))?),
        None => Ok(None),
    }
}

/// Every stored document of `kind`, in `_id` order.
pub fn all(state: &ServerState, kind: Kind) -> Result<Vec<Document>, CommandError> {
    let Some(c) = existing(state, kind) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for d in c.scan() {
        out.push(d?);
    }
    Ok(out)
}

/// Whether any user or role exists (the localhost exception ends with the first).
pub fn any_user_or_role(state: &ServerState) -> Result<bool, CommandError> {
    for kind in [Kind::User, Kind::Role] {
        if let Some(c) = existing(state, kind) {
            if c.scan().next().transpose()?.is_some() {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Inserts a new document (its `_id` must be free: callers check first, for MongoDB's
/// own "already exists" error).
pub fn insert(state: &ServerState, kind: Kind, doc: Document) -> Result<(), CommandError> {
    let coll = state.catalog.get_or_create("admin", kind.collection())?;
    let out = coll.insert(vec![doc], true);
    state.access.changed();
    match out.errors.into_iter().next() {
        Some((_, e)) => Err(e.into()),
        None => Ok(()),
    }
}

/// Replaces the stored document with the same `_id`.
pub fn replace(state: &ServerState, kind: Kind, doc: Document) -> Result<(), CommandError> {
    let coll = state.catalog.get_or_create("admin", kind.collection())?;
    let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
    let filter = Filter::parse(&doc! {"_id": id})?;
    coll.update(&filter, &Update::Replacement(doc), false, false)?;
    state.access.changed();
    Ok(())
}

/// Deletes the documents of `kind` matching `filter`; returns how many.
pub fn delete(state: &ServerState, kind: Kind, filter: &Document) -> Result<u64, CommandError> {
    let Some(coll) = existing(state, kind) else {
        return Ok(0);
    };
    let n = coll.delete(&Filter::parse(filter)?, false)?;
    state.access.changed();
    Ok(n)
}

/// The SCRAM credential a stored user document holds for `mechanism`.
pub fn credential(user: &Document, mechanism: Mechanism) -> Option<Credential> {
    let c = user
        .get_document("credentials")
        .ok()?
        .get_document(mechanism.name())
        .ok()?;
    let iterations = u32::try_from(c.get_i32("iterationCount").ok()?).ok()?;
    Credential::from_b64(
        iterations,
        c.get_str("salt").ok()?,
        c.get_str("storedKey").ok()?,
        c.get_str("serverKey").ok()?,
    )
}

/// Whether `password` is the password of user `name` (for clients that send passwords
/// in clear over TLS or loopback: the HTTP API). Successes are remembered until users or
/// roles change.
pub fn verify_password(
    state: &ServerState,
    name: &Name,
    password: &str,
) -> Result<bool, CommandError> {
    let generation = state.access.generation();
    let key = name.id();
    if state.access.passwords.verified(&key, password, generation) {
        return Ok(true);
    }
    let Some(user) = get(state, Kind::User, name)? else {
        return Ok(false);
    };
    for mechanism in [Mechanism::Sha256, Mechanism::Sha1] {
        if let Some(c) = credential(&user, mechanism) {
            let ok = c.verify_password(mechanism, &name.name, password);
            if ok {
                state.access.passwords.remember(&key, password, generation);
            }
            return Ok(ok);
        }
    }
    Ok(false)
}

/// The `{role, db}` entries of a `roles` array.
pub fn role_names(roles: Option<&Bson>) -> Vec<Name> {
    let Some(Bson::Array(a)) = roles else {
        return Vec::new();
    };
    a.iter()
        .filter_map(|r| {
            let d = r.as_document()?;
            Some(Name::new(d.get_str("role").ok()?, d.get_str("db").ok()?))
        })
        .collect()
}

/// Names as MongoDB lists them: `[{<field>: name, db}]`.
pub fn names_doc(names: &[Name], field: &str) -> Vec<Bson> {
    names
        .iter()
        .map(|n| Bson::Document(doc! {field: &n.name, "db": &n.db}))
        .collect()
}
