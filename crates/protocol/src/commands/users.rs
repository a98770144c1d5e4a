//! User management: `createUser`, `updateUser`, `dropUser`, `dropAllUsersFromDatabase`,
//! `grantRolesToUser`, `revokeRolesFromUser` and `usersInfo`, with MongoDB 7.0's checks,
//! messages and stored shape (`admin.system.users`).

use super::Request;
use crate::access::check::{self, Tgt};
use crate::access::roles::{self, parse_role_list};
use crate::access::store::{self, Kind, Name};
use crate::error::{CmdResult, CommandError};
use bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use hourglass_auth::{Credential, Mechanism};
use hourglass_query::filter::Filter;

/// The name in the command's first field.
pub fn name_arg(req: &Request) -> Result<String, CommandError> {
    match req.body.iter().next() {
        Some((_, Bson::String(s))) => Ok(s.clone()),
        Some((k, _)) => Err(CommandError::type_mismatch(format!(
            "BSON field '{k}.{k}' is the wrong type, expected type 'string'"
        ))),
        None => Err(CommandError::failed_to_parse("empty command")),
    }
}

/// The `mechanisms` argument, or every SCRAM mechanism when absent.
fn mechanisms_arg(req: &Request) -> Result<Option<Vec<Mechanism>>, CommandError> {
    let Some(v) = req.body.get("mechanisms") else {
        return Ok(None);
    };
    let Bson::Array(items) = v else {
        return Err(CommandError::type_mismatch(
            "mechanisms must be an array of strings",
        ));
    };
    if items.is_empty() {
        return Err(CommandError::bad_value(
            "mechanisms field must not be empty",
        ));
    }
    let mut out = Vec::new();
    for m in items {
        let s = m.as_str().unwrap_or_default();
        let mech = Mechanism::parse(s)
            .ok_or_else(|| CommandError::bad_value(format!("Unknown auth mechanism '{s}'")))?;
        if !out.contains(&mech) {
            out.push(mech);
        }
    }
    Ok(Some(out))
}

fn password_arg(req: &Request) -> Result<Option<String>, CommandError> {
    match req.body.get("pwd") {
        None => Ok(None),
        Some(Bson::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(CommandError::type_mismatch(format!(
            "BSON field '{}.pwd' is the wrong type, expected type 'string'",
            req.command_name()
        ))),
    }
}

/// `digestPassword: false` would store a client-made digest, which SCRAM-SHA-256 cannot
/// use; MongoDB refuses it for SHA-256 and this server supports it nowhere.
fn check_digest_password(req: &Request) -> Result<(), CommandError> {
    match req.opt_bool("digestPassword")? {
        Some(false) => Err(CommandError::bad_value(
            "Use of SCRAM-SHA-256 requires undigested passwords",
        )),
        _ => Ok(()),
    }
}

/// `authenticationRestrictions` cannot be enforced here: refused unless empty.
fn check_restrictions(req: &Request) -> Result<(), CommandError> {
    match req.body.get("authenticationRestrictions") {
        None | Some(Bson::Null) => Ok(()),
        Some(Bson::Array(a)) if a.is_empty() => Ok(()),
        Some(_) => Err(CommandError::new(
            238,
            "authenticationRestrictions are not supported by this server",
        )),
    }
}

fn custom_data_arg(req: &Request) -> Result<Option<Document>, CommandError> {
    match req.body.get("customData") {
        None => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d.clone())),
        Some(_) => Err(CommandError::type_mismatch(format!(
            "BSON field '{}.customData' is the wrong type, expected type 'object'",
            req.command_name()
        ))),
    }
}

/// The `credentials` document for `password` with `mechanisms`.
fn credentials(
    req: &Request,
    user: &str,
    password: &str,
    mechanisms: &[Mechanism],
) -> Result<Document, CommandError> {
    let mut out = Document::new();
    for m in mechanisms {
        let param = match m {
            Mechanism::Sha1 => "scramIterationCount",
            Mechanism::Sha256 => "scramSHA256IterationCount",
        };
        let iterations = req
            .state
            .params
            .get_i64(param, 10_000)
            .clamp(5000, i64::from(i32::MAX)) as u32;
        let c = Credential::derive(*m, user, password, iterations)
            .map_err(|e| CommandError::bad_value(e.to_string()))?;
        out.insert(
            m.name(),
            doc! {
                "iterationCount": iterations as i32,
                "salt": c.salt_b64(),
                "storedKey": c.stored_key_b64(),
                "serverKey": c.server_key_b64(),
            },
        );
    }
    Ok(out)
}

fn new_user_id() -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Uuid,
        bytes: uuid::Uuid::new_v4().as_bytes().to_vec(),
    })
}

fn user_not_found_for_db(name: &Name) -> CommandError {
    CommandError::new(
        11,
        format!(
            "Could not find user \"{}\" for db \"{}\"",
            name.name, name.db
        ),
    )
}

/// The fields of `createUser` and `updateUser`.
const USER_FIELDS: &[&str] = &[
    "pwd",
    "customData",
    "roles",
    "digestPassword",
    "authenticationRestrictions",
    "mechanisms",
];

pub fn create_user(req: &Request) -> CmdResult {
    req.check_fields(USER_FIELDS)?;
    let name = Name::new(name_arg(req)?, &req.db);
    if req.db == "local" {
        return Err(CommandError::bad_value(
            "Cannot create users in the local database",
        ));
    }
    if name.name.contains('\0') {
        return Err(CommandError::bad_value(
            "Username cannot contain NULL characters",
        ));
    }
    if name.name.is_empty() {
        return Err(CommandError::bad_value(
            "User document needs 'user' field to be non-empty",
        ));
    }
    let password = password_arg(req)?;
    let external = req.db == "$external";
    match (&password, external) {
        (None, false) => {
            return Err(CommandError::bad_value(
                "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db",
            ))
        }
        (Some(_), true) => {
            return Err(CommandError::bad_value(
                "Cannot set the password for users defined on the '$external' database",
            ))
        }
        _ => {}
    }
    let mechanisms = mechanisms_arg(req)?.unwrap_or_else(|| Mechanism::ALL.to_vec());
    check_digest_password(req)?;
    check_restrictions(req)?;
    let custom_data = custom_data_arg(req)?;
    if !req.body.contains_key("roles") {
        return Err(CommandError::missing_field("createUser.roles"));
    }
    let granted = parse_role_list(&req.state, req.body.get("roles"), &req.db, "roles")?;
    if store::get(&req.state, Kind::User, &name)?.is_some() {
        return Err(CommandError::new(
            51003,
            format!("User \"{name}\" already exists"),
        ));
    }
    let credentials = match &password {
        Some(p) => credentials(req, &name.name, p, &mechanisms)?,
        None => doc! {"external": true},
    };
    let mut user = doc! {
        "_id": name.id(),
        "userId": new_user_id(),
        "user": &name.name,
        "db": &name.db,
        "credentials": credentials,
    };
    if let Some(c) = custom_data {
        user.insert("customData", c);
    }
    user.insert("roles", store::names_doc(&granted, "role"));
    store::insert(&req.state, Kind::User, user)?;
    Ok(Document::new())
}

pub fn update_user(req: &Request) -> CmdResult {
    req.check_fields(USER_FIELDS)?;
    let name = Name::new(name_arg(req)?, &req.db);
    let password = password_arg(req)?;
    if password.is_some() && req.db == "$external" {
        return Err(CommandError::bad_value(
            "Cannot set the password for users defined on the '$external' database",
        ));
    }
    let mechanisms = mechanisms_arg(req)?;
    check_digest_password(req)?;
    check_restrictions(req)?;
    let custom_data = custom_data_arg(req)?;
    let granted = match req.body.get("roles") {
        Some(v) => Some(parse_role_list(&req.state, Some(v), &req.db, "roles")?),
        None => None,
    };
    if password.is_none() && mechanisms.is_none() && custom_data.is_none() && granted.is_none() {
        return Err(CommandError::bad_value(
            "Must specify at least one field to update in updateUser",
        ));
    }
    let Some(mut user) = store::get(&req.state, Kind::User, &name)? else {
        return Err(CommandError::new(11, format!("User {name} not found")));
    };
    match (&password, &mechanisms) {
        (Some(p), m) => {
            let m = m.clone().unwrap_or_else(|| Mechanism::ALL.to_vec());
            user.insert("credentials", credentials(req, &name.name, p, &m)?);
        }
        (None, Some(m)) => {
            let old = user
                .get_document("credentials")
                .cloned()
                .unwrap_or_default();
            let kept: Document = old
                .into_iter()
                .filter(|(k, _)| m.iter().any(|x| x.name() == k))
                .collect();
            if kept.is_empty() {
                return Err(CommandError::bad_value(
                    "mechanisms field must contain at least one previously set known mechanism",
                ));
            }
            if kept.len() < m.len() {
                return Err(CommandError::bad_value(
                    "mechanisms field must be a subset of previously set mechanisms",
                ));
            }
            user.insert("credentials", kept);
        }
        (None, None) => {}
    }
    if let Some(c) = custom_data {
        user.insert("customData", c);
    }
    if let Some(r) = granted {
        user.insert("roles", store::names_doc(&r, "role"));
    }
    store::replace(&req.state, Kind::User, user)?;
    Ok(Document::new())
}

pub fn drop_user(req: &Request) -> CmdResult {
    req.check_fields(&[])?;
    let name = Name::new(name_arg(req)?, &req.db);
    let n = store::delete(&req.state, Kind::User, &doc! {"_id": name.id()})?;
    if n == 0 {
        return Err(CommandError::new(11, format!("User '{name}' not found")));
    }
    Ok(Document::new())
}

pub fn drop_all_users_from_database(req: &Request) -> CmdResult {
    req.check_fields(&[])?;
    let n = store::delete(&req.state, Kind::User, &doc! {"db": &req.db})?;
    Ok(doc! {"n": n as i64})
}

/// `grantRolesToUser` and `revokeRolesFromUser`.
fn change_roles(req: &Request, grant: bool) -> CmdResult {
    req.check_fields(&["roles"])?;
    let command = req.command_name().to_string();
    let name = Name::new(name_arg(req)?, &req.db);
    let changed = parse_role_list(&req.state, req.body.get("roles"), &req.db, "roles")?;
    if changed.is_empty() {
        return Err(CommandError::bad_value(format!(
            "{command} command requires a non-empty \"roles\" array"
        )));
    }
    let Some(mut user) = store::get(&req.state, Kind::User, &name)? else {
        return Err(user_not_found_for_db(&name));
    };
    let mut held = store::role_names(user.get("roles"));
    if grant {
        for r in changed {
            if !held.contains(&r) {
                held.push(r);
            }
        }
    } else {
        held.retain(|r| !changed.contains(r));
    }
    user.insert("roles", store::names_doc(&held, "role"));
    store::replace(&req.state, Kind::User, user)?;
    Ok(Document::new())
}

pub fn grant_roles_to_user(req: &Request) -> CmdResult {
    change_roles(req, true)
}

pub fn revoke_roles_from_user(req: &Request) -> CmdResult {
    change_roles(req, false)
}

/// Which users (or roles) `usersInfo` (`rolesInfo`) asks for.
pub(super) enum Wanted {
    AllOf(String),
    AllDatabases,
    Exactly(Vec<Name>),
}

/// Reads a `usersInfo`/`rolesInfo` argument: `1`, a name, `{<field>, db}` or an array of
/// those (and, for users, `{forAllDBs: true}`).
pub(super) fn wanted(req: &Request, field: &str) -> Result<Wanted, CommandError> {
    let one = |v: &Bson| -> Result<Name, CommandError> {
        match v {
            Bson::String(s) => Ok(Name::new(s, &req.db)),
            Bson::Document(d) => match (d.get_str(field), d.get_str("db")) {
                (Ok(n), Ok(db)) => Ok(Name::new(n, db)),
                _ => Err(CommandError::bad_value(format!(
                    "{} must contain string fields named: {field} and db",
                    if field == "user" {
                        "UserName"
                    } else {
                        "RoleName"
                    }
                ))),
            },
            _ => Err(CommandError::bad_value(format!(
                "{} must be either a string or an object",
                if field == "user" {
                    "UserName"
                } else {
                    "RoleName"
                }
            ))),
        }
    };
    match req.body.iter().next().map(|(_, v)| v) {
        Some(Bson::Int32(1) | Bson::Int64(1)) => Ok(Wanted::AllOf(req.db.clone())),
        Some(Bson::Double(d)) if *d == 1.0 => Ok(Wanted::AllOf(req.db.clone())),
        Some(Bson::Document(d)) if field == "user" && d.contains_key("forAllDBs") => {
            Ok(Wanted::AllDatabases)
        }
        Some(Bson::Array(a)) => Ok(Wanted::Exactly(
            a.iter().map(one).collect::<Result<_, _>>()?,
        )),
        Some(v) => Ok(Wanted::Exactly(vec![one(v)?])),
        None => Err(CommandError::failed_to_parse("empty command")),
    }
}

/// Whether the connection may see `name` with `action` (its own user or roles need no
/// privilege).
pub(super) fn may_view(
    req: &Request,
    name: &Name,
    own: &[Name],
    action: &str,
) -> Result<bool, CommandError> {
    Ok(own.contains(name) || req.allowed(action, Tgt::Db(name.db.clone()))?)
}

/// The connection's user (in a list, for `may_view`).
fn own_user(req: &Request) -> Vec<Name> {
    req.user().into_iter().collect()
}

pub fn users_info(req: &Request) -> CmdResult {
    req.check_fields(&[
        "showCredentials",
        "showCustomData",
        "showPrivileges",
        "showAuthenticationRestrictions",
        "filter",
    ])?;
    let wanted = wanted(req, "user")?;
    let show_credentials = req.opt_bool("showCredentials")?.unwrap_or(false);
    let show_custom = req.opt_bool("showCustomData")?.unwrap_or(true);
    let show_privileges = req.opt_bool("showPrivileges")?.unwrap_or(false);
    let filter = req.opt_document("filter")?.map(Filter::parse).transpose()?;
    let exact = matches!(wanted, Wanted::Exactly(_));
    if (show_privileges
        || req
            .opt_bool("showAuthenticationRestrictions")?
            .unwrap_or(false))
        && (filter.is_some() || !exact)
    {
        return Err(CommandError::new(
            20,
            "Privilege or restriction details require exact-match usersInfo queries",
        ));
    }
    let own = own_user(req);
    let refuse = || check::unauthorized(&req.db, &req.body);
    let users: Vec<Document> = match &wanted {
        Wanted::AllOf(db) => {
            if !req.allowed("viewUser", Tgt::Db(db.clone()))? {
                return Err(refuse());
            }
            store::all(&req.state, Kind::User)?
                .into_iter()
                .filter(|u| u.get_str("db") == Ok(db))
                .collect()
        }
        Wanted::AllDatabases => {
            if !req.allowed("viewUser", Tgt::Cluster)? {
                return Err(refuse());
            }
            store::all(&req.state, Kind::User)?
        }
        Wanted::Exactly(names) => {
            let mut out = Vec::new();
            for n in names {
                if !may_view(req, n, &own, "viewUser")? {
                    return Err(refuse());
                }
                out.extend(store::get(&req.state, Kind::User, n)?);
            }
            out
        }
    };
    let mut sorted = users;
    sorted.sort_by(|a, b| {
        (a.get_str("user").ok(), a.get_str("db").ok())
            .cmp(&(b.get_str("user").ok(), b.get_str("db").ok()))
    });
    let mut out = Vec::new();
    for stored in sorted {
        let mut u = Document::new();
        for k in ["_id", "userId", "user", "db"] {
            if let Some(v) = stored.get(k) {
                u.insert(k, v.clone());
            }
        }
        if show_credentials {
            if let Some(c) = stored.get("credentials") {
                u.insert("credentials", c.clone());
            }
        }
        if show_custom {
            if let Some(c) = stored.get("customData") {
                u.insert("customData", c.clone());
            }
        }
        u.insert(
            "roles",
            stored.get("roles").cloned().unwrap_or(Bson::Array(vec![])),
        );
        u.insert("mechanisms", super::sasl::mechanisms_of(&stored));
        if show_privileges {
            let r = roles::resolve(&req.state, &store::role_names(stored.get("roles")))?;
            u.insert("inheritedRoles", store::names_doc(&r.all, "role"));
            u.insert("inheritedPrivileges", roles::privileges_bson(&r.privileges));
            u.insert("inheritedAuthenticationRestrictions", Bson::Array(vec![]));
        }
        if filter.as_ref().is_none_or(|f| f.matches(&u)) {
            out.push(Bson::Document(u));
        }
    }
    Ok(doc! {"users": out})
}
