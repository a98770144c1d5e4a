//! Roles to privileges: built-in roles from `hourglass_auth`, user-defined ones from
//! `admin.system.roles`, followed through the roles they inherit; and the BSON forms of
//! privileges and resources that roles and replies use.

use super::store::{self, Kind, Name};
use crate::error::CommandError;
use bson::{doc, Bson, Document};
use hourglass_auth::builtin_roles;
use hourglass_auth::privilege::{self, Privilege, Resource};
use std::collections::BTreeSet;

/// What a set of roles adds up to.
#[derive(Debug, Default, Clone)]
pub struct Resolved {
    /// The roles granted directly.
    pub direct: Vec<Name>,
    /// Those and every role they inherit, each once.
    pub all: Vec<Name>,
    pub privileges: Vec<Privilege>,
}

pub fn role_not_found(name: &Name) -> CommandError {
    CommandError::new(31, format!("Could not find role: {name}"))
}

/// Whether role `name` exists (built in or stored).
pub fn exists(state: &crate::ServerState, name: &Name) -> Result<bool, CommandError> {
    Ok(builtin_roles::is_builtin(&name.name, &name.db)
        || store::get(state, Kind::Role, name)?.is_some())
}

/// Follows `direct` and the roles they inherit. A role that no longer exists grants nothing
/// (as in MongoDB, where dropping a role takes it from its holders).
pub fn resolve(state: &crate::ServerState, direct: &[Name]) -> Result<Resolved, CommandError> {
    let mut seen = BTreeSet::new();
    let mut queue: Vec<Name> = direct.to_vec();
    let mut all = Vec::new();
    let mut privileges = Vec::new();
    while let Some(role) = queue.pop() {
        if !seen.insert(role.clone()) {
            continue;
        }
        if let Some(p) = builtin_roles::builtin_privileges(&role.name, &role.db) {
            privileges.extend(p);
        } else if let Some(d) = store::get(state, Kind::Role, &role)? {
            privileges.extend(parse_privileges(d.get("privileges"))?);
            queue.extend(store::role_names(d.get("roles")));
        } else {
            continue;
        }
        all.push(role);
    }
    all.sort();
    Ok(Resolved {
        direct: direct.to_vec(),
        all,
        privileges: privilege::merge(privileges),
    })
}

/// Reads a resource document: `{db, collection}`, `{db, system_buckets}`, `{cluster: true}`
/// or `{anyResource: true}`.
pub fn parse_resource(d: &Document) -> Result<Resource, CommandError> {
    let bad = || CommandError::failed_to_parse(format!("Invalid resource pattern: {d}"));
    let string = |k: &str| match d.get(k) {
        Some(Bson::String(s)) => Ok(Some(s.clone())),
        None => Ok(None),
        Some(_) => Err(bad()),
    };
    if d.get_bool("cluster") == Ok(true) && d.len() == 1 {
        return Ok(Resource::Cluster);
    }
    if d.get_bool("anyResource") == Ok(true) && d.len() == 1 {
        return Ok(Resource::AnyResource);
    }
    let (db, coll, buckets) = (
        string("db")?,
        string("collection")?,
        string("system_buckets")?,
    );
    match (db, coll, buckets) {
        (Some(db), Some(c), None) if d.len() == 2 => Ok(match (db.is_empty(), c.is_empty()) {
            (true, true) => Resource::AnyNormal,
            (false, true) => Resource::Database(db),
            (true, false) => Resource::CollectionName(c),
            (false, false) => Resource::Namespace(db, c),
        }),
        (db, None, Some(b)) if d.len() == 1 + usize::from(db.is_some()) => {
            Ok(Resource::SystemBuckets(db.unwrap_or_default(), b))
        }
        _ => Err(bad()),
    }
}

pub fn resource_doc(r: &Resource) -> Document {
    match r {
        Resource::Cluster => doc! {"cluster": true},
        Resource::AnyResource => doc! {"anyResource": true},
        Resource::AnyNormal => doc! {"db": "", "collection": ""},
        Resource::Database(d) => doc! {"db": d, "collection": ""},
        Resource::CollectionName(c) => doc! {"db": "", "collection": c},
        Resource::Namespace(d, c) => doc! {"db": d, "collection": c},
        Resource::SystemBuckets(d, c) if d.is_empty() => doc! {"system_buckets": c},
        Resource::SystemBuckets(d, c) => doc! {"db": d, "system_buckets": c},
    }
}

pub fn privilege_doc(p: &Privilege) -> Document {
    doc! {
        "resource": resource_doc(&p.resource),
        "actions": p.actions.iter().map(|a| Bson::String(a.to_string())).collect::<Vec<_>>(),
    }
}

/// Privileges as a BSON array of `{resource, actions}`.
pub fn privileges_bson(p: &[Privilege]) -> Vec<Bson> {
    p.iter().map(|p| Bson::Document(privilege_doc(p))).collect()
}

/// Reads a `privileges` array (`[{resource, actions}]`), refusing unknown actions with
/// MongoDB's message.
pub fn parse_privileges(v: Option<&Bson>) -> Result<Vec<Privilege>, CommandError> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let Bson::Array(items) = v else {
        return Err(CommandError::type_mismatch(
            "\"privileges\" must be an array",
        ));
    };
    let mut out = Vec::new();
    for item in items {
        let d = item
            .as_document()
            .ok_or_else(|| CommandError::type_mismatch("each privilege must be an object"))?;
        let resource = d
            .get_document("resource")
            .map_err(|_| CommandError::failed_to_parse("a privilege needs a 'resource' object"))
            .and_then(parse_resource)?;
        let actions = d
            .get_array("actions")
            .map_err(|_| CommandError::failed_to_parse("a privilege needs an 'actions' array"))?;
        let mut names = Vec::new();
        for a in actions {
            let s = a.as_str().unwrap_or_default();
            names.push(privilege::action(s).ok_or_else(|| {
                CommandError::bad_value(format!("Unrecognized action privilege string: {s}"))
            })?);
        }
        out.push(Privilege::new(resource, &names));
    }
    Ok(out)
}

/// Reads a `roles` argument: names (in `default_db`) or `{role, db}` documents; every role
/// must exist.
pub fn parse_role_list(
    state: &crate::ServerState,
    v: Option<&Bson>,
    default_db: &str,
    field: &str,
) -> Result<Vec<Name>, CommandError> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let Bson::Array(items) = v else {
        return Err(CommandError::type_mismatch(format!(
            "\"{field}\" must be an array"
        )));
    };
    let mut out = Vec::new();
    for item in items {
        let name = match item {
            Bson::String(s) => Name::new(s, default_db),
            Bson::Document(d) => match (d.get_str("role"), d.get_str("db")) {
                (Ok(r), Ok(db)) => Name::new(r, db),
                _ => {
                    return Err(CommandError::failed_to_parse(format!(
                        "Expected a role document with 'role' and 'db' strings, got {d}"
                    )))
                }
            },
            other => {
                return Err(CommandError::bad_value(format!(
                    "Role names must be either strings or objects, not {other}"
                )))
            }
        };
        if !exists(state, &name)? {
            return Err(role_not_found(&name));
        }
        if !out.contains(&name) {
            out.push(name);
        }
    }
    Ok(out)
}
