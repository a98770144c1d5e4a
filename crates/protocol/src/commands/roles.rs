//! Role management: `createRole`, `updateRole`, `dropRole`, `dropAllRolesFromDatabase`,
//! `grantPrivilegesToRole`, `revokePrivilegesFromRole`, `grantRolesToRole`,
//! `revokeRolesFromRole` and `rolesInfo`, stored in `admin.system.roles` as MongoDB does.

use super::users::{may_view, name_arg, wanted, Wanted};
use super::Request;
use crate::access::check::{self, Tgt};
use crate::access::roles::{
    self, parse_privileges, parse_role_list, privileges_bson, role_not_found,
};
use crate::access::store::{self, Kind, Name};
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_auth::builtin_roles;
use hourglass_auth::privilege::{self, Privilege};

fn invalid_modification(msg: String) -> CommandError {
    CommandError::new(49, msg)
}

/// A role outside `admin` may only hold roles and privileges of its own database.
fn check_scope(role: &Name, held: &[Name], privileges: &[Privilege]) -> Result<(), CommandError> {
    if role.db == "admin" {
        return Ok(());
    }
    if held.iter().any(|r| r.db != role.db) {
        return Err(invalid_modification(format!(
            "Roles on the '{}' database cannot be granted roles from other databases",
            role.db
        )));
    }
    if privileges
        .iter()
        .any(|p| p.resource.database() != Some(role.db.as_str()))
    {
        return Err(invalid_modification(format!(
            "Roles on the '{}' database cannot be granted privileges that target other databases or the cluster",
            role.db
        )));
    }
    Ok(())
}

/// Refuses a role graph where `role` would inherit itself.
fn check_cycle(state: &crate::ServerState, role: &Name, held: &[Name]) -> Result<(), CommandError> {
    if held.contains(role) {
        return Err(invalid_modification(format!(
            "Cannot grant role {role} to itself."
        )));
    }
    if roles::resolve(state, held)?.all.contains(role) {
        return Err(invalid_modification(format!(
            "Granting roles to {role} would introduce a cycle in the role graph"
        )));
    }
    Ok(())
}

fn required_array<'a>(req: &'a Request, field: &str) -> Result<&'a Bson, CommandError> {
    req.body
        .get(field)
        .ok_or_else(|| CommandError::missing_field(&format!("{}.{field}", req.command_name())))
}

pub fn create_role(req: &Request) -> CmdResult {
    req.check_fields(&["privileges", "roles", "authenticationRestrictions"])?;
    let name = Name::new(name_arg(req)?, &req.db);
    if name.name.is_empty() {
        return Err(CommandError::bad_value("Role name must be non-empty"));
    }
    for (db, msg) in [
        ("local", "Cannot create roles in the local database"),
        ("$external", "Cannot create roles in the $external database"),
    ] {
        if req.db == db {
            return Err(CommandError::bad_value(msg));
        }
    }
    if builtin_roles::is_builtin(&name.name, &name.db) {
        return Err(CommandError::bad_value(
            "Cannot create roles with the same name as a built-in role",
        ));
    }
    if req
        .body
        .get("authenticationRestrictions")
        .is_some_and(|r| !matches!(r, Bson::Array(a) if a.is_empty()))
    {
        return Err(CommandError::new(
            238,
            "authenticationRestrictions are not supported by this server",
        ));
    }
    let privileges = parse_privileges(Some(required_array(req, "privileges")?))?;
    let held = parse_role_list(
        &req.state,
        Some(required_array(req, "roles")?),
        &req.db,
        "roles",
    )?;
    check_scope(&name, &held, &privileges)?;
    if store::get(&req.state, Kind::Role, &name)?.is_some() {
        return Err(CommandError::new(
            51002,
            format!("Role \"{name}\" already exists"),
        ));
    }
    store::insert(
        &req.state,
        Kind::Role,
        doc! {
            "_id": name.id(),
            "role": &name.name,
            "db": &name.db,
            "privileges": privileges_bson(&privileges),
            "roles": store::names_doc(&held, "role"),
        },
    )?;
    Ok(Document::new())
}

/// The stored role `name`, refusing built-in roles (which cannot change) and missing ones
/// (`not_found` gives the command's message).
fn stored_role(
    req: &Request,
    name: &Name,
    not_found: fn(&Name) -> CommandError,
) -> Result<Document, CommandError> {
    if builtin_roles::is_builtin(&name.name, &name.db) {
        return Err(invalid_modification(format!(
            "{name} is a built-in role and cannot be modified"
        )));
    }
    store::get(&req.state, Kind::Role, name)?.ok_or_else(|| not_found(name))
}

fn role_missing(name: &Name) -> CommandError {
    CommandError::new(31, format!("Role {name} not found"))
}

/// Writes role `doc` with new privileges and roles, after the scope and cycle checks.
fn save_role(
    req: &Request,
    name: &Name,
    mut stored: Document,
    privileges: Vec<Privilege>,
    held: Vec<Name>,
) -> CmdResult {
    check_scope(name, &held, &privileges)?;
    check_cycle(&req.state, name, &held)?;
    stored.insert("privileges", privileges_bson(&privileges));
    stored.insert("roles", store::names_doc(&held, "role"));
    store::replace(&req.state, Kind::Role, stored)?;
    Ok(Document::new())
}

pub fn update_role(req: &Request) -> CmdResult {
    req.check_fields(&["privileges", "roles", "authenticationRestrictions"])?;
    let name = Name::new(name_arg(req)?, &req.db);
    if !req.body.contains_key("privileges") && !req.body.contains_key("roles") {
        return Err(CommandError::bad_value(
            "Must specify at least one field to update in updateRole",
        ));
    }
    let stored = stored_role(req, &name, role_not_found)?;
    let privileges = match req.body.get("privileges") {
        Some(p) => parse_privileges(Some(p))?,
        None => parse_privileges(stored.get("privileges"))?,
    };
    let held = match req.body.get("roles") {
        Some(r) => parse_role_list(&req.state, Some(r), &req.db, "roles")?,
        None => store::role_names(stored.get("roles")),
    };
    save_role(req, &name, stored, privileges, held)
}

/// `grantPrivilegesToRole` and `revokePrivilegesFromRole`.
fn change_privileges(req: &Request, grant: bool) -> CmdResult {
    req.check_fields(&["privileges"])?;
    let name = Name::new(name_arg(req)?, &req.db);
    let changed = parse_privileges(Some(required_array(req, "privileges")?))?;
    if changed.is_empty() {
        return Err(CommandError::bad_value(format!(
            "{} command requires a non-empty \"privileges\" array",
            req.command_name()
        )));
    }
    let stored = stored_role(req, &name, role_missing)?;
    let mut privileges = parse_privileges(stored.get("privileges"))?;
    if grant {
        privileges = privilege::merge(privileges.into_iter().chain(changed));
    } else {
        for c in &changed {
            for p in privileges.iter_mut().filter(|p| p.resource == c.resource) {
                p.actions.retain(|a| !c.actions.contains(a));
            }
        }
        privileges.retain(|p| !p.actions.is_empty());
    }
    let held = store::role_names(stored.get("roles"));
    save_role(req, &name, stored, privileges, held)
}

pub fn grant_privileges_to_role(req: &Request) -> CmdResult {
    change_privileges(req, true)
}

pub fn revoke_privileges_from_role(req: &Request) -> CmdResult {
    change_privileges(req, false)
}

/// `grantRolesToRole` and `revokeRolesFromRole`.
fn change_inherited(req: &Request, grant: bool) -> CmdResult {
    req.check_fields(&["roles"])?;
    let name = Name::new(name_arg(req)?, &req.db);
    let changed = parse_role_list(
        &req.state,
        Some(required_array(req, "roles")?),
        &req.db,
        "roles",
    )?;
    if changed.is_empty() {
        return Err(CommandError::bad_value(format!(
            "{} command requires a non-empty \"roles\" array",
            req.command_name()
        )));
    }
    let stored = stored_role(req, &name, role_missing)?;
    let privileges = parse_privileges(stored.get("privileges"))?;
    let mut held = store::role_names(stored.get("roles"));
    if grant {
        held.extend(
            changed
                .into_iter()
                .filter(|r| !held.contains(r))
                .collect::<Vec<_>>(),
        );
    } else {
        held.retain(|r| !changed.contains(r));
    }
    save_role(req, &name, stored, privileges, held)
}

pub fn grant_roles_to_role(req: &Request) -> CmdResult {
    change_inherited(req, true)
}

pub fn revoke_roles_from_role(req: &Request) -> CmdResult {
    change_inherited(req, false)
}

/// Takes the dropped roles out of every user and role that held them.
fn forget_roles(req: &Request, dropped: &[Name]) -> Result<(), CommandError> {
    for kind in [Kind::User, Kind::Role] {
        for mut d in store::all(&req.state, kind)? {
            let held = store::role_names(d.get("roles"));
            if held.iter().any(|r| dropped.contains(r)) {
                let kept: Vec<Name> = held.into_iter().filter(|r| !dropped.contains(r)).collect();
                d.insert("roles", store::names_doc(&kept, "role"));
                store::replace(&req.state, kind, d)?;
            }
        }
    }
    Ok(())
}

pub fn drop_role(req: &Request) -> CmdResult {
    req.check_fields(&[])?;
    let name = Name::new(name_arg(req)?, &req.db);
    stored_role(req, &name, role_not_found)?;
    store::delete(&req.state, Kind::Role, &doc! {"_id": name.id()})?;
    forget_roles(req, std::slice::from_ref(&name))?;
    Ok(Document::new())
}

pub fn drop_all_roles_from_database(req: &Request) -> CmdResult {
    req.check_fields(&[])?;
    let dropped: Vec<Name> = store::all(&req.state, Kind::Role)?
        .iter()
        .filter(|d| d.get_str("db") == Ok(&req.db))
        .filter_map(|d| Some(Name::new(d.get_str("role").ok()?, &req.db)))
        .collect();
    let n = store::delete(&req.state, Kind::Role, &doc! {"db": &req.db})?;
    forget_roles(req, &dropped)?;
    Ok(doc! {"n": n as i64})
}

/// How `rolesInfo` shows privileges.
#[derive(PartialEq)]
enum ShowPrivileges {
    No,
    Yes,
    AsUserFragment,
}

/// One role as `rolesInfo` describes it.
fn describe(
    req: &Request,
    name: &Name,
    stored: Option<&Document>,
    show: &ShowPrivileges,
) -> Result<Document, CommandError> {
    let builtin = stored.is_none();
    let own_privileges = match stored {
        Some(d) => parse_privileges(d.get("privileges"))?,
        None => builtin_roles::builtin_privileges(&name.name, &name.db).unwrap_or_default(),
    };
    let held = stored
        .map(|d| store::role_names(d.get("roles")))
        .unwrap_or_default();
    let inherited = roles::resolve(&req.state, &held)?;
    let mut out = match stored {
        Some(d) => {
            doc! {"_id": d.get("_id").cloned().unwrap_or(Bson::Null), "role": &name.name, "db": &name.db}
        }
        None => doc! {"role": &name.name, "db": &name.db},
    };
    if *show == ShowPrivileges::Yes {
        out.insert("privileges", privileges_bson(&own_privileges));
    }
    out.insert("roles", store::names_doc(&held, "role"));
    out.insert("inheritedRoles", store::names_doc(&inherited.all, "role"));
    if *show == ShowPrivileges::Yes {
        let all = privilege::merge(own_privileges.into_iter().chain(inherited.privileges));
        out.insert("inheritedPrivileges", privileges_bson(&all));
    }
    out.insert("isBuiltin", builtin);
    Ok(out)
}

pub fn roles_info(req: &Request) -> CmdResult {
    req.check_fields(&[
        "showPrivileges",
        "showBuiltinRoles",
        "showAuthenticationRestrictions",
    ])?;
    let show = match req.body.get("showPrivileges") {
        Some(Bson::String(s)) if s == "asUserFragment" => ShowPrivileges::AsUserFragment,
        Some(_) if req.opt_bool("showPrivileges")?.unwrap_or(false) => ShowPrivileges::Yes,
        _ => ShowPrivileges::No,
    };
    let show_builtin = req.opt_bool("showBuiltinRoles")?.unwrap_or(false);
    let wanted = wanted(req, "role")?;
    let own = match crate::access::session::current(&req.state, &req.conn.session)? {
        Some((_, r)) => r.all.clone(),
        None => Vec::new(),
    };
    let refuse = || check::unauthorized(&req.db, &req.body);
    let names: Vec<(Name, Option<Document>)> = match wanted {
        Wanted::AllOf(db) => {
            if show == ShowPrivileges::AsUserFragment {
                return Err(CommandError::new(
                    20,
                    "Cannot get user fragment for all roles in a database",
                ));
            }
            if !req.allowed("viewRole", Tgt::Db(db.clone()))? {
                return Err(refuse());
            }
            let mut out: Vec<(Name, Option<Document>)> = Vec::new();
            if show_builtin {
                out.extend(
                    builtin_roles::builtin_roles_of(&db)
                        .into_iter()
                        .map(|r| (Name::new(r, &db), None)),
                );
            }
            for d in store::all(&req.state, Kind::Role)? {
                if d.get_str("db") == Ok(&db) {
                    let n = Name::new(d.get_str("role").unwrap_or_default(), &db);
                    out.push((n, Some(d)));
                }
            }
            out
        }
        // Only `usersInfo` reads `forAllDBs`.
        Wanted::AllDatabases => {
            return Err(CommandError::bad_value("rolesInfo does not take forAllDBs"))
        }
        Wanted::Exactly(names) => {
            let mut out = Vec::new();
            for n in names {
                if !may_view(req, &n, &own, "viewRole")? {
                    return Err(refuse());
                }
                if builtin_roles::is_builtin(&n.name, &n.db) {
                    out.push((n, None));
                } else if let Some(d) = store::get(&req.state, Kind::Role, &n)? {
                    out.push((n, Some(d)));
                }
            }
            out
        }
    };
    if show == ShowPrivileges::AsUserFragment {
        let held: Vec<Name> = names.into_iter().map(|(n, _)| n).collect();
        let r = roles::resolve(&req.state, &held)?;
        return Ok(doc! {"userFragment": {
            "roles": store::names_doc(&held, "role"),
            "inheritedRoles": store::names_doc(&r.all, "role"),
            "inheritedPrivileges": privileges_bson(&r.privileges),
            "inheritedAuthenticationRestrictions": [],
        }});
    }
    let mut out = Vec::new();
    for (n, stored) in &names {
        out.push(Bson::Document(describe(req, n, stored.as_ref(), &show)?));
    }
    Ok(doc! {"roles": out})
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_auth::Resource;

    #[test]
    fn roles_outside_admin_cannot_reach_other_databases_or_the_cluster() {
        let role = Name::new("r", "test");
        let other = vec![Privilege::new(Resource::Database("x".into()), &["find"])];
        assert_eq!(check_scope(&role, &[], &other).unwrap_err().code, 49);
        let cluster = vec![Privilege::new(Resource::Cluster, &["serverStatus"])];
        assert_eq!(check_scope(&role, &[], &cluster).unwrap_err().code, 49);
        let own = vec![Privilege::new(
            Resource::Namespace("test".into(), "c".into()),
            &["find"],
        )];
        assert!(check_scope(&role, &[], &own).is_ok());
        assert!(check_scope(&Name::new("r", "admin"), &[], &cluster).is_ok());
    }
}
