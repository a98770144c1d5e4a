//! What each command needs before it runs under `--auth`: nothing (the handshake and
//! authentication itself), any authenticated user (commands that filter their answer by
//! the user's privileges), or actions on the namespaces, databases or cluster it touches.
//! Time-series collections are checked on the name the client uses (the view), as MongoDB
//! does; reading their buckets directly needs a `system_buckets` privilege.

use super::session;
use crate::client::ConnInfo;
use crate::error::CommandError;
use crate::state::ServerState;
use crate::wire::DocSequence;
use bson::{Bson, Document};
use hourglass_auth::privilege::{self, Target};

/// A target a command acts on, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tgt {
    Cluster,
    /// Every normal collection of every database (`updateUser`'s and `updateRole`'s
    /// `revokeRole`).
    AnyNormal,
    Db(String),
    Ns(String, String),
}

impl Tgt {
    fn as_target(&self) -> Target<'_> {
        match self {
            Tgt::Cluster => Target::Cluster,
            Tgt::AnyNormal => Target::AnyNormal,
            Tgt::Db(d) => Target::Database(d),
            Tgt::Ns(d, c) => Target::Namespace(d, c),
        }
    }
}

/// What a command needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Anyone, authenticated or not.
    Nothing,
    /// Any authenticated user (the handler limits the answer to what the user may see).
    Authenticated,
    /// Every one of these actions on its target.
    Actions(Vec<(&'static str, Tgt)>),
    /// Any one of these (e.g. `create` with `createCollection` or `insert`).
    AnyOf(Vec<Need>),
}

/// Commands that run before or without authentication (MongoDB's `requiresAuth: false`).
const OPEN: &[&str] = &[
    "authenticate",
    "buildInfo",
    "buildinfo",
    "connectionStatus",
    "hello",
    "isMaster",
    "ismaster",
    "listCommands",
    "ping",
    "saslContinue",
    "saslStart",
];

/// Whether command `name` needs an authenticated client (`listCommands`' `requiresAuth`).
pub fn requires_auth(name: &str) -> bool {
    !OPEN.contains(&name)
}

/// Commands any authenticated user may run; those that list users, roles or databases
/// limit their answer (or refuse) by themselves.
const AUTHENTICATED: &[&str] = &[
    "abortTransaction",
    "commitTransaction",
    // A test command (only with enableTestCommands, never in production).
    "configureFailPoint",
    "endSessions",
    "features",
    "killCursors",
    // Only the user's own sessions unless the user may kill any (checked by the handler).
    "killSessions",
    "listDatabases",
    "logout",
    "refreshSessions",
    "startSession",
    "rolesInfo",
    "usersInfo",
    "whatsmyuri",
];

/// One action on the cluster.
const CLUSTER: &[(&str, &str)] = &[
    ("fsync", "fsync"),
    ("fsyncUnlock", "unlock"),
    ("getCmdLineOpts", "getCmdLineOpts"),
    ("getDefaultRWConcern", "getDefaultRWConcern"),
    ("getLog", "getLog"),
    ("getParameter", "getParameter"),
    ("hostInfo", "hostInfo"),
    ("killAllSessions", "killAnySession"),
    ("killOp", "killop"),
    ("lockInfo", "serverStatus"),
    ("serverStatus", "serverStatus"),
    ("setParameter", "setParameter"),
    ("top", "top"),
];

/// One action on the command's database.
const DATABASE: &[(&str, &str)] = &[
    ("dbHash", "dbHash"),
    ("dbStats", "dbStats"),
    ("dbstats", "dbStats"),
    ("dropAllRolesFromDatabase", "dropRole"),
    ("dropAllUsersFromDatabase", "dropUser"),
    ("dropDatabase", "dropDatabase"),
    ("dropRole", "dropRole"),
    ("dropUser", "dropUser"),
    ("profile", "enableProfiler"),
];

/// One action on the command's collection.
const COLLECTION: &[(&str, &str)] = &[
    ("collMod", "collMod"),
    ("collStats", "collStats"),
    ("collstats", "collStats"),
    ("compact", "compact"),
    ("count", "find"),
    ("createIndexes", "createIndex"),
    ("delete", "remove"),
    ("distinct", "find"),
    ("drop", "dropCollection"),
    ("dropIndexes", "dropIndex"),
    ("find", "find"),
    ("listIndexes", "listIndexes"),
    ("reIndex", "reIndex"),
    ("validate", "validate"),
];

fn lookup(table: &[(&str, &'static str)], name: &str) -> Option<&'static str> {
    table.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)
}

fn ns(db: &str, coll: &str) -> Tgt {
    Tgt::Ns(db.to_string(), coll.to_string())
}

/// The collection named by the command's first field, or an empty name when it is not a
/// string (the handler then reports the type error, after authorization).
fn collection_of(body: &Document) -> String {
    match body.iter().next() {
        Some((_, Bson::String(s))) => s.clone(),
        _ => String::new(),
    }
}

/// What command `name` with `body`, run in `db`, needs.
pub fn need(name: &str, db: &str, body: &Document, sequences: &[(String, DocSequence)]) -> Need {
    if OPEN.contains(&name) {
        return Need::Nothing;
    }
    if AUTHENTICATED.contains(&name) || name.starts_with("replSet") {
        return Need::Authenticated;
    }
    if let Some(a) = lookup(CLUSTER, name) {
        return Need::Actions(vec![(a, Tgt::Cluster)]);
    }
    if let Some(a) = lookup(DATABASE, name) {
        return Need::Actions(vec![(a, Tgt::Db(db.to_string()))]);
    }
    let coll = collection_of(body);
    if let Some(a) = lookup(COLLECTION, name) {
        return Need::Actions(vec![(a, ns(db, &coll))]);
    }
    let mut out = Vec::new();
    match name {
        "aggregate" => aggregate_needs(db, body, &mut out),
        "currentOp" if body.get_bool("$ownOps") == Ok(true) => return Need::Authenticated,
        "currentOp" => out.push(("inprog", Tgt::Cluster)),
        "insert" => out.push(("insert", ns(db, &coll))),
        "update" => {
            out.push(("update", ns(db, &coll)));
            if statements(body, sequences, "updates").any(|d| d.get_bool("upsert") == Ok(true)) {
                out.push(("insert", ns(db, &coll)));
            }
        }
        "findAndModify" | "findandmodify" => {
            out.push(("find", ns(db, &coll)));
            if body.get_bool("remove") == Ok(true) {
                out.push(("remove", ns(db, &coll)));
            } else {
                out.push(("update", ns(db, &coll)));
            }
            if body.get_bool("upsert") == Ok(true) {
                out.push(("insert", ns(db, &coll)));
            }
        }
        "getMore" => {
            let coll = body.get_str("collection").unwrap_or_default();
            out.push(("find", ns(db, coll)));
        }
        // `dataSize` names a full namespace, `db.coll`.
        "dataSize" => {
            let full = collection_of(body);
            let (d, c) = full.split_once('.').unwrap_or((db, full.as_str()));
            out.push(("find", ns(d, c)));
        }
        "create" => {
            let Ok(source) = body.get_str("viewOn") else {
                return Need::AnyOf(vec![
                    Need::Actions(vec![("createCollection", ns(db, &coll))]),
                    Need::Actions(vec![("insert", ns(db, &coll))]),
                ]);
            };
            out.push(("createCollection", ns(db, &coll)));
            out.push(("find", ns(db, source)));
            if let Ok(p) = body.get_array("pipeline") {
                pipeline_needs(db, p, &mut out);
            }
        }
        "listCollections" => {
            let authorized = body.get_bool("authorizedCollections") == Ok(true)
                && body.get_bool("nameOnly") == Ok(true);
            if authorized {
                return Need::Authenticated;
            }
            out.push(("listCollections", Tgt::Db(db.to_string())));
        }
        "renameCollection" => rename_needs(body, &mut out),
        "explain" => {
            return match body.get_document("explain") {
                Ok(inner) => {
                    let inner_name = inner.keys().next().cloned().unwrap_or_default();
                    need(&inner_name, db, inner, &[])
                }
                Err(_) => Need::Authenticated,
            };
        }
        "createUser" => {
            out.push(("createUser", Tgt::Db(db.to_string())));
            grant_needs(body.get("roles"), db, "grantRole", &mut out);
        }
        "updateUser" => {
            if body.contains_key("pwd") {
                out.push(("changePassword", Tgt::Db(db.to_string())));
            }
            if body.contains_key("customData") {
                out.push(("changeCustomData", Tgt::Db(db.to_string())));
            }
            if body.contains_key("roles") {
                out.push(("revokeRole", Tgt::AnyNormal));
                grant_needs(body.get("roles"), db, "grantRole", &mut out);
            }
            if body.contains_key("mechanisms") || body.contains_key("authenticationRestrictions") {
                out.push(("changePassword", Tgt::Db(db.to_string())));
            }
        }
        "grantRolesToUser" | "grantRolesToRole" => {
            grant_needs(body.get("roles"), db, "grantRole", &mut out)
        }
        "revokeRolesFromUser" | "revokeRolesFromRole" => {
            grant_needs(body.get("roles"), db, "revokeRole", &mut out)
        }
        "createRole" | "updateRole" => {
            out.push(match name {
                "createRole" => ("createRole", Tgt::Db(db.to_string())),
                _ => ("revokeRole", Tgt::AnyNormal),
            });
            grant_needs(body.get("roles"), db, "grantRole", &mut out);
            if body.contains_key("privileges") {
                out.push(("grantRole", Tgt::Db(db.to_string())));
            }
        }
        "grantPrivilegesToRole" => out.push(("grantRole", Tgt::Db(db.to_string()))),
        "revokePrivilegesFromRole" => out.push(("revokeRole", Tgt::Db(db.to_string()))),
        // Unknown here: refuse rather than let it through (a test keeps this unreached).
        _ => out.push(("internal", Tgt::Cluster)),
    }
    let writes = matches!(
        name,
        "insert" | "update" | "findAndModify" | "findandmodify" | "aggregate"
    );
    if writes && bypass_requested(body) {
        out.push(("bypassDocumentValidation", ns(db, &coll)));
    }
    Need::Actions(out)
}

/// Whether a command asks to skip collection validators (`bypassDocumentValidation`: true
/// or a non-zero number).
pub fn bypass_requested(body: &Document) -> bool {
    match body.get("bypassDocumentValidation") {
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(i)) => *i != 0,
        Some(Bson::Int64(i)) => *i != 0,
        Some(Bson::Double(d)) => *d != 0.0,
        _ => false,
    }
}

/// The statements of a write command, from its body or its document sequence.
fn statements<'a>(
    body: &'a Document,
    sequences: &'a [(String, DocSequence)],
    field: &'a str,
) -> Box<dyn Iterator<Item = Document> + 'a> {
    if let Ok(a) = body.get_array(field) {
        return Box::new(a.iter().filter_map(|d| d.as_document().cloned()));
    }
    Box::new(
        sequences
            .iter()
            .filter(move |(n, _)| n == field)
            .flat_map(|(_, s)| s.raw_documents().filter_map(|r| Document::try_from(r).ok())),
    )
}

/// `grantRole`/`revokeRole` on the database of each role named in `roles`.
fn grant_needs(
    roles: Option<&Bson>,
    db: &str,
    action: &'static str,
    out: &mut Vec<(&'static str, Tgt)>,
) {
    let Some(Bson::Array(roles)) = roles else {
        return;
    };
    for r in roles {
        let role_db = match r {
            Bson::Document(d) => d.get_str("db").unwrap_or(db),
            _ => db,
        };
        let t = Tgt::Db(role_db.to_string());
        if !out.contains(&(action, t.clone())) {
            out.push((action, t));
        }
    }
}

fn rename_needs(body: &Document, out: &mut Vec<(&'static str, Tgt)>) {
    let split = |v: Option<&Bson>| -> (String, String) {
        let s = v.and_then(Bson::as_str).unwrap_or_default();
        let (d, c) = s.split_once('.').unwrap_or((s, ""));
        (d.to_string(), c.to_string())
    };
    let (fd, fc) = split(body.get("renameCollection"));
    let (td, tc) = split(body.get("to"));
    let normal = privilege::is_normal_collection(&fc) && privilege::is_normal_collection(&tc);
    if fd == td && normal {
        out.push(("renameCollectionSameDB", Tgt::Db(fd.clone())));
    } else {
        out.push(("find", ns(&fd, &fc)));
        out.push(("dropCollection", ns(&fd, &fc)));
        out.push(("insert", ns(&td, &tc)));
        out.push(("createIndex", ns(&td, &tc)));
    }
    if body.get_bool("dropTarget") == Ok(true) {
        out.push(("dropCollection", ns(&td, &tc)));
    }
}

/// Stages that produce their own input: the pipeline does not read the collection it runs
/// on with `find`.
const SOURCE_STAGES: &[&str] = &[
    "$collStats",
    "$currentOp",
    "$documents",
    "$indexStats",
    "$listCatalog",
    "$listLocalSessions",
];

fn aggregate_needs(db: &str, body: &Document, out: &mut Vec<(&'static str, Tgt)>) {
    let coll = match body.iter().next() {
        Some((_, Bson::String(s))) => Some(s.as_str()),
        _ => None,
    };
    let pipeline = body.get_array("pipeline").map(Vec::as_slice).unwrap_or(&[]);
    let first = pipeline
        .first()
        .and_then(Bson::as_document)
        .and_then(|d| d.keys().next())
        .map(String::as_str);
    let target = match coll {
        Some(c) => ns(db, c),
        None => Tgt::Db(db.to_string()),
    };
    let first_spec = pipeline
        .first()
        .and_then(Bson::as_document)
        .and_then(|d| d.values().next());
    match first {
        Some("$collStats") => out.push(("collStats", target)),
        Some("$indexStats") => out.push(("indexStats", target)),
        Some("$currentOp") => {
            let all_users = first_spec
                .and_then(Bson::as_document)
                .is_some_and(|d| d.get_bool("allUsers") == Ok(true));
            if all_users {
                out.push(("inprog", Tgt::Cluster));
            }
        }
        Some("$listLocalSessions") => {
            let others = first_spec
                .and_then(Bson::as_document)
                .is_some_and(|d| d.get_bool("allUsers") == Ok(true) || d.contains_key("users"));
            if others {
                out.push(("listSessions", Tgt::Cluster));
            }
        }
        Some("$listCatalog") if coll.is_none() => {
            out.push(("listDatabases", Tgt::Cluster));
            out.push(("listCollections", Tgt::AnyNormal));
            out.push(("listIndexes", Tgt::AnyNormal));
        }
        Some("$listCatalog") => {
            out.push(("listCollections", target.clone()));
            out.push(("listIndexes", target));
        }
        Some(s) if SOURCE_STAGES.contains(&s) => {}
        _ => {
            if coll.is_some() {
                out.push(("find", target));
            }
        }
    }
    pipeline_needs(db, pipeline, out);
}

/// What the stages that name other collections need: reading (`$lookup`, `$graphLookup`,
/// `$unionWith`, also inside `$facet`) and writing (`$out`, `$merge`).
fn pipeline_needs(db: &str, pipeline: &[Bson], out: &mut Vec<(&'static str, Tgt)>) {
    for stage in pipeline.iter().filter_map(Bson::as_document) {
        let Some((name, spec)) = stage.iter().next() else {
            continue;
        };
        let target = |spec: &Bson, coll_key: &str| -> Option<Tgt> {
            match spec {
                Bson::String(c) => Some(ns(db, c)),
                Bson::Document(d) => {
                    let c = d.get_str(coll_key).ok()?;
                    Some(ns(d.get_str("db").unwrap_or(db), c))
                }
                _ => None,
            }
        };
        match name.as_str() {
            "$lookup" | "$graphLookup" | "$unionWith" => {
                let source_key = if name == "$unionWith" { "coll" } else { "from" };
                if let Some(t) = target(spec, source_key) {
                    out.push(("find", t));
                }
                if let Some(p) = spec
                    .as_document()
                    .and_then(|d| d.get_array("pipeline").ok())
                {
                    pipeline_needs(db, p, out);
                }
            }
            "$facet" => {
                for p in spec.as_document().into_iter().flat_map(|d| d.values()) {
                    if let Bson::Array(p) = p {
                        pipeline_needs(db, p, out);
                    }
                }
            }
            "$out" => {
                if let Some(t) = target(spec, "coll") {
                    out.push(("insert", t.clone()));
                    out.push(("remove", t));
                }
            }
            "$merge" => {
                let into = match spec {
                    Bson::Document(d) => d.get("into").cloned().unwrap_or(Bson::Null),
                    other => other.clone(),
                };
                if let Some(t) = target(&into, "coll") {
                    out.push(("insert", t.clone()));
                    out.push(("update", t));
                }
            }
            _ => {}
        }
    }
}

fn unauthenticated(name: &str) -> CommandError {
    CommandError::new(13, format!("command {name} requires authentication"))
}

/// Fields MongoDB shows as "xxx" when it prints a refused command.
const SECRET_FIELDS: &[&str] = &["pwd", "payload"];

/// MongoDB's refusal for a client without the privileges: the command is printed with
/// its secrets masked.
pub fn unauthorized(db: &str, body: &Document) -> CommandError {
    let mut shown = body.clone();
    for f in SECRET_FIELDS {
        if shown.contains_key(*f) {
            shown.insert(*f, "xxx");
        }
    }
    CommandError::new(
        13,
        format!(
            "not authorized on {db} to execute command {}",
            hourglass_query::error::render_doc(&shown)
        ),
    )
}

/// What the localhost exception grants: creating the first user in `admin` (with admin
/// roles) or `$external`.
fn localhost_privileges() -> Vec<privilege::Privilege> {
    use hourglass_auth::Resource;
    vec![
        privilege::Privilege::new(
            Resource::Database("admin".into()),
            &["createUser", "grantRole"],
        ),
        privilege::Privilege::new(Resource::Database("$external".into()), &["createUser"]),
    ]
}

fn satisfied(need: &Need, privileges: &[privilege::Privilege]) -> bool {
    match need {
        Need::Nothing | Need::Authenticated => true,
        Need::Actions(list) => list
            .iter()
            .all(|(a, t)| privilege::allows(privileges, a, &t.as_target())),
        Need::AnyOf(options) => options.iter().any(|n| satisfied(n, privileges)),
    }
}

/// Checks command `name` (with `body` and its document `sequences`, run in `db`) against
/// the connection's privileges (nothing to check when access control is off).
pub fn authorize(
    state: &ServerState,
    conn: &ConnInfo,
    name: &str,
    db: &str,
    body: &Document,
    sequences: &[(String, DocSequence)],
) -> Result<(), CommandError> {
    if !state.access.enabled() {
        return Ok(());
    }
    let need = need(name, db, body, sequences);
    if need == Need::Nothing {
        return Ok(());
    }
    let privileges = match session::current(state, &conn.session)? {
        Some((_, resolved)) => resolved.privileges.clone(),
        // The localhost exception grants creating the first user, and nothing else: the
        // client is still unauthenticated for every other command.
        None if localhost_exception(state, conn)? => {
            let privileges = localhost_privileges();
            if need == Need::Authenticated || !satisfied(&need, &privileges) {
                return Err(unauthenticated(name));
            }
            privileges
        }
        None => return Err(unauthenticated(name)),
    };
    if satisfied(&need, &privileges) {
        Ok(())
    } else {
        Err(unauthorized(db, body))
    }
}

/// Whether the localhost exception is open for this connection: a client on a loopback
/// address, while no user and no role exists and `enableLocalhostAuthBypass` is on.
fn localhost_exception(state: &ServerState, conn: &ConnInfo) -> Result<bool, CommandError> {
    Ok(conn.is_local()
        && state.params.get_bool("enableLocalhostAuthBypass", true)
        && !super::store::any_user_or_role(state)?)
}

/// Whether the connection may do `action` on `target` (always, with access control off).
pub fn allowed(
    state: &ServerState,
    conn: &ConnInfo,
    action: &str,
    target: Tgt,
) -> Result<bool, CommandError> {
    if !state.access.enabled() {
        return Ok(true);
    }
    Ok(match session::current(state, &conn.session)? {
        Some((_, r)) => privilege::allows(&r.privileges, action, &target.as_target()),
        None => false,
    })
}

/// Which names a listing shows.
pub type Visible = Box<dyn Fn(&str) -> bool>;

/// What a listing (`listDatabases`, `listCollections`) shows: every name to a connection
/// allowed `action` on `target` (or with access control off), else the names `holds`
/// finds privileges of the user on.
pub fn listing_filter(
    state: &ServerState,
    conn: &ConnInfo,
    action: &str,
    target: Tgt,
    holds: impl Fn(&[privilege::Privilege], &str) -> bool + 'static,
) -> Result<Visible, CommandError> {
    if allowed(state, conn, action, target)? {
        return Ok(Box::new(|_| true));
    }
    let privileges = match session::current(state, &conn.session)? {
        Some((_, r)) => r.privileges.clone(),
        None => Vec::new(),
    };
    Ok(Box::new(move |name| holds(&privileges, name)))
}
