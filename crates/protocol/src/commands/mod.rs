//! Command dispatch: one alphabetical table of every command with its handler and its
//! `listCommands` help (aliases are rows of their own), plus the argument helpers that
//! handlers share. Each command (or tight family of commands) has its own file.

mod aggregate;
mod aggregate_source;
mod aggregate_ts;
mod archive_rule;
mod args;
mod coll_mod;
mod coll_stats;
mod collection_uuid;
mod collections;
mod compact;
mod configure_fail_point;
mod count;
mod current_op;
mod cursor_reply;
mod databases;
mod db_hash;
mod db_stats;
mod delete;
mod diagnostics;
mod distinct;
mod distinct_scan;
mod explain;
mod explain_counters;
mod explain_reply;
mod explain_sort;
mod explain_stages;
mod explain_ts;
mod explain_write;
mod fast_count;
mod find;
mod find_and_modify;
mod find_shape;
mod fsync;
mod geo_index;
mod handshake;
mod indexes;
mod indexes_ts;
mod insert;
mod list_catalog;
mod local_sessions;
mod near_find;
mod out_timeseries;
mod parameters;
mod pipeline_context;
mod planned;
mod profile;
mod query_planner;
mod query_shape_hash;
mod replication;
mod request_options;
mod roles;
mod sasl;
mod target;
mod timeseries_ddl;
mod transaction;
mod update;
mod users;
mod validation_options;
mod view_reads;
mod views;
mod write_concern;

pub use args::Request;

use crate::error::{CmdResult, CommandError};
use crate::profiler::Finished;
use crate::state::OpCounters;
use bson::{doc, Bson, Document};

pub type Handler = fn(&Request) -> CmdResult;

pub struct Command {
    pub name: &'static str,
    pub handler: Handler,
    pub help: &'static str,
    /// Whether the command is a CRUD operation counted in its own opcounter (else `command`).
    pub crud: bool,
    /// Whether the command runs only against the `admin` database (13 elsewhere, checked by
    /// `dispatch` before authorization, as mongod checks it).
    pub admin_only: bool,
}

const fn cmd(name: &'static str, handler: Handler, help: &'static str) -> Command {
    Command {
        name,
        handler,
        help,
        crud: false,
        admin_only: false,
    }
}

const fn crud(name: &'static str, handler: Handler, help: &'static str) -> Command {
    Command {
        name,
        handler,
        help,
        crud: true,
        admin_only: false,
    }
}

/// A command that runs only against the `admin` database.
const fn admin(name: &'static str, handler: Handler, help: &'static str) -> Command {
    Command {
        name,
        handler,
        help,
        crud: false,
        admin_only: true,
    }
}

/// Every command, in alphabetical order (checked by a test).
pub static COMMANDS: &[Command] = &[
    cmd(
        "abortTransaction",
        transaction::abort_transaction,
        "Aborts the session's multi-document transaction.",
    ),
    crud(
        "aggregate",
        aggregate::aggregate,
        "Runs an aggregation pipeline and returns a cursor.",
    ),
    cmd(
        "authenticate",
        sasl::authenticate,
        "Authenticates with MONGODB-X509 (the TLS client certificate).",
    ),
    cmd(
        "buildInfo",
        diagnostics::build_info,
        "Returns the server version and build details.",
    ),
    cmd("buildinfo", diagnostics::build_info, "Alias of buildInfo."),
    cmd(
        "collMod",
        coll_mod::coll_mod,
        "Changes the options of a collection.",
    ),
    cmd(
        "collStats",
        coll_stats::coll_stats,
        "Returns sizes, counts and time-series bucket statistics of a collection.",
    ),
    cmd("collstats", coll_stats::coll_stats, "Alias of collStats."),
    cmd(
        "commitTransaction",
        transaction::commit_transaction,
        "Commits the session's multi-document transaction atomically and durably.",
    ),
    cmd(
        "compact",
        compact::compact,
        "Rewrites a collection's tables without the space of deleted entries.",
    ),
    cmd(
        "configureFailPoint",
        configure_fail_point::configure_fail_point,
        "Sets the failCommand fail point (a test command: with enableTestCommands only).",
    ),
    cmd(
        "connectionStatus",
        handshake::connection_status,
        "Returns authentication information for this connection.",
    ),
    crud(
        "count",
        count::count,
        "Counts the documents matching a query.",
    ),
    cmd("create", collections::create, "Creates a collection."),
    cmd(
        "createIndexes",
        indexes::create_indexes,
        "Creates indexes on a collection.",
    ),
    cmd(
        "createRole",
        roles::create_role,
        "Creates a user-defined role.",
    ),
    cmd(
        "createUser",
        users::create_user,
        "Creates a user with SCRAM credentials (or an $external user).",
    ),
    admin(
        "currentOp",
        current_op::current_op,
        "Lists the operations in progress (admin only).",
    ),
    cmd(
        "dataSize",
        coll_stats::data_size,
        "Returns the bytes and number of a collection's documents.",
    ),
    cmd(
        "dbHash",
        db_hash::db_hash,
        "Returns an MD5 of each collection's documents and of the database.",
    ),
    cmd(
        "dbStats",
        db_stats::db_stats,
        "Returns counts and sizes of a database.",
    ),
    cmd("dbstats", db_stats::db_stats, "Alias of dbStats."),
    crud("delete", delete::delete, "Deletes documents."),
    crud(
        "distinct",
        distinct::distinct,
        "Returns the distinct values of a field.",
    ),
    cmd("drop", collections::drop, "Drops a collection."),
    cmd(
        "dropAllRolesFromDatabase",
        roles::drop_all_roles_from_database,
        "Drops every user-defined role of the database.",
    ),
    cmd(
        "dropAllUsersFromDatabase",
        users::drop_all_users_from_database,
        "Drops every user of the database.",
    ),
    cmd(
        "dropDatabase",
        databases::drop_database,
        "Drops the current database.",
    ),
    cmd(
        "dropIndexes",
        indexes::drop_indexes,
        "Drops indexes of a collection.",
    ),
    cmd("dropRole", roles::drop_role, "Drops a user-defined role."),
    cmd("dropUser", users::drop_user, "Drops a user."),
    cmd(
        "endSessions",
        handshake::end_sessions,
        "Ends logical sessions.",
    ),
    cmd(
        "explain",
        explain::explain,
        "Describes how a command would run (query plan and execution statistics).",
    ),
    cmd(
        "features",
        diagnostics::features,
        "Returns the machine part of the ObjectIds this server generates.",
    ),
    crud(
        "find",
        find::find,
        "Queries a collection and returns a cursor.",
    ),
    crud(
        "findAndModify",
        find_and_modify::find_and_modify,
        "Atomically modifies and returns one document.",
    ),
    crud(
        "findandmodify",
        find_and_modify::find_and_modify,
        "Alias of findAndModify.",
    ),
    admin(
        "fsync",
        fsync::fsync,
        "Flushes all data to disk; with lock: true, holds writes until fsyncUnlock (admin only).",
    ),
    admin(
        "fsyncUnlock",
        fsync::fsync_unlock,
        "Releases one fsync lock (admin only).",
    ),
    admin(
        "getCmdLineOpts",
        parameters::get_cmd_line_opts,
        "Returns the command line the server was started with.",
    ),
    admin(
        "getDefaultRWConcern",
        parameters::get_default_rw_concern,
        "Returns the implicit read and write concern defaults (replica set members only).",
    ),
    admin("getLog", diagnostics::get_log, "Returns recent log lines."),
    crud(
        "getMore",
        find::get_more,
        "Returns the next batch of a cursor.",
    ),
    admin(
        "getParameter",
        parameters::get_parameter,
        "Returns server parameters.",
    ),
    cmd(
        "grantPrivilegesToRole",
        roles::grant_privileges_to_role,
        "Adds privileges to a role.",
    ),
    cmd(
        "grantRolesToRole",
        roles::grant_roles_to_role,
        "Makes a role inherit other roles.",
    ),
    cmd(
        "grantRolesToUser",
        users::grant_roles_to_user,
        "Grants roles to a user.",
    ),
    cmd(
        "hello",
        handshake::hello,
        "Describes this server (connection handshake).",
    ),
    cmd(
        "hostInfo",
        diagnostics::host_info,
        "Describes the host the server runs on.",
    ),
    crud("insert", insert::insert, "Inserts documents."),
    cmd("isMaster", handshake::is_master, "Legacy name of hello."),
    cmd("ismaster", handshake::is_master, "Legacy name of hello."),
    cmd(
        "killAllSessions",
        local_sessions::kill_all_sessions,
        "Ends every session of the users named (of all users with an empty list).",
    ),
    cmd("killCursors", find::kill_cursors, "Closes cursors."),
    admin(
        "killOp",
        current_op::kill_op,
        "Asks a running operation to stop (admin only).",
    ),
    cmd(
        "killSessions",
        local_sessions::kill_sessions,
        "Ends the sessions named, aborting their transactions.",
    ),
    cmd(
        "listCollections",
        collections::list_collections,
        "Lists the collections of a database.",
    ),
    cmd(
        "listCommands",
        diagnostics::list_commands,
        "Lists the commands this server supports.",
    ),
    admin(
        "listDatabases",
        databases::list_databases,
        "Lists databases.",
    ),
    cmd(
        "listIndexes",
        indexes::list_indexes,
        "Lists the indexes of a collection.",
    ),
    admin(
        "lockInfo",
        diagnostics::lock_info,
        "Lists the locks operations hold or await (none: Hourglass takes no such locks).",
    ),
    cmd(
        "logout",
        sasl::logout,
        "Ends the authentication of this connection (deprecated).",
    ),
    cmd("ping", handshake::ping, "Checks that the server answers."),
    cmd(
        "profile",
        profile::profile,
        "Reads or sets the database's profiling level, slowms, sampleRate and filter.",
    ),
    cmd(
        "refreshSessions",
        handshake::refresh_sessions,
        "Keeps logical sessions alive.",
    ),
    cmd(
        "reIndex",
        compact::re_index,
        "Drops and rebuilds the indexes of a collection (deprecated).",
    ),
    admin(
        "renameCollection",
        collections::rename_collection,
        "Renames a collection.",
    ),
    cmd(
        "replSetFreeze",
        replication::replset_change,
        "Replica sets only: 76 on a standalone; refused on a one-member set.",
    ),
    cmd(
        "replSetGetConfig",
        replication::replset_get_config,
        "The one-member set's configuration (76 on a standalone).",
    ),
    cmd(
        "replSetGetStatus",
        replication::replset_get_status,
        "The one-member set's status (76 on a standalone).",
    ),
    cmd(
        "replSetInitiate",
        replication::replset_initiate,
        "23 AlreadyInitialized on a one-member set (76 on a standalone).",
    ),
    cmd(
        "replSetMaintenance",
        replication::replset_change,
        "Replica sets only: 76 on a standalone; refused on a one-member set.",
    ),
    cmd(
        "replSetReconfig",
        replication::replset_change,
        "Replica sets only: 76 on a standalone; refused on a one-member set.",
    ),
    cmd(
        "replSetStepDown",
        replication::replset_change,
        "Replica sets only: 76 on a standalone; refused on a one-member set.",
    ),
    cmd(
        "replSetSyncFrom",
        replication::replset_change,
        "Replica sets only: 76 on a standalone; refused on a one-member set.",
    ),
    cmd(
        "revokePrivilegesFromRole",
        roles::revoke_privileges_from_role,
        "Removes privileges from a role.",
    ),
    cmd(
        "revokeRolesFromRole",
        roles::revoke_roles_from_role,
        "Removes inherited roles from a role.",
    ),
    cmd(
        "revokeRolesFromUser",
        users::revoke_roles_from_user,
        "Revokes roles from a user.",
    ),
    cmd(
        "rolesInfo",
        roles::roles_info,
        "Describes roles, with their privileges on request.",
    ),
    cmd(
        "saslContinue",
        sasl::sasl_continue,
        "Continues a SASL (SCRAM) conversation.",
    ),
    cmd(
        "saslStart",
        sasl::sasl_start,
        "Starts a SASL (SCRAM-SHA-1 or SCRAM-SHA-256) conversation.",
    ),
    cmd(
        "serverStatus",
        diagnostics::server_status,
        "Returns server statistics.",
    ),
    admin(
        "setParameter",
        parameters::set_parameter,
        "Changes server parameters.",
    ),
    cmd(
        "startSession",
        local_sessions::start_session,
        "Starts a logical session and returns its id.",
    ),
    admin(
        "top",
        diagnostics::top,
        "Returns time and counts per collection and kind of operation (admin only).",
    ),
    crud("update", update::update, "Updates documents."),
    cmd(
        "updateRole",
        roles::update_role,
        "Replaces a role's privileges or inherited roles.",
    ),
    cmd(
        "updateUser",
        users::update_user,
        "Changes a user's password, mechanisms, roles or custom data.",
    ),
    cmd("usersInfo", users::users_info, "Describes users."),
    cmd(
        "validate",
        indexes::validate,
        "Checks a collection's documents against its indexes.",
    ),
    cmd(
        "whatsmyuri",
        handshake::whats_my_uri,
        "Returns the client's address as the server sees it.",
    ),
];

pub fn lookup(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// Runs the command in `req` and returns its reply document (`ok: 1` or the error shape).
pub fn dispatch(req: &Request) -> Document {
    let Some(name) = req.body.keys().next().cloned() else {
        return CommandError::failed_to_parse("empty command document").to_reply();
    };
    let Some(command) = lookup(&name).filter(|c| !configure_fail_point::hidden(req, c.name)) else {
        return CommandError::new(59, format!("no such command: '{name}'")).to_reply();
    };
    if !command.crud {
        OpCounters::add(&req.state.opcounters.command, 1);
    }
    let prepared = match request_options::prepare(req, &name) {
        Ok(p) => p,
        Err(e) => return e.to_reply(),
    };
    let req = prepared.as_ref().unwrap_or(req);
    let ns = match (req.body.get(&name), req.body.get("collection")) {
        (Some(Bson::String(c)), _) => format!("{}.{c}", req.db),
        (_, Some(Bson::String(c))) if name == "getMore" => format!("{}.{c}", req.db),
        _ => format!("{}.$cmd", req.db),
    };
    let top_ns = ns.clone();
    if command.admin_only && req.db != "admin" {
        return CommandError::new(
            13,
            format!("{name} may only be run against the admin database."),
        )
        .to_reply();
    }
    let kind = match name.as_str() {
        "insert" => "insert",
        "update" => "update",
        "delete" => "remove",
        "find" => "query",
        "getMore" => "getmore",
        _ => "command",
    };
    if let Err(e) = crate::access::check::authorize(
        &req.state,
        &req.conn,
        &name,
        &req.db,
        &req.body,
        &req.sequences.lock(),
    )
    .and_then(|()| apply_max_time(req))
    .and_then(|()| collection_uuid::check(req, &name))
    {
        return e.to_reply();
    }
    // A write concern a standalone cannot meet is refused before the command runs; the
    // replica set runs it and reports the concern in `writeConcernError`.
    let unmet_write_concern = match write_concern::check(req) {
        Ok(w) => w,
        Err(e) => return e.to_reply(),
    };
    if let Some(lsid) = req.body.get("lsid") {
        let user = req.conn.session.lock().user().map(|u| u.to_string());
        req.state.sessions.touch(lsid, user);
    }
    let begun = match transaction::begin(req, &name) {
        Ok(transaction::Begun::Replay(reply)) => return stamped(req, reply),
        Ok(b) => b,
        Err(e) => {
            let mut reply = e.to_reply();
            transaction::label_errors(req, &name, &mut reply);
            return stamped(req, reply);
        }
    };
    let _op = req.state.ops.begin(
        req.conn.id,
        &req.conn.peer,
        ns,
        kind,
        &req.body,
        req.interrupt.clone(),
    );
    // While fsyncLock holds, a write waits here, visible to currentOp and killOp.
    let writes = fsync::WRITING.contains(&name.as_str());
    if writes && !req.state.write_gate.wait_open(Some(&req.interrupt)) {
        return CommandError::new(
            11601,
            "operation was interrupted while waiting for fsyncUnlock",
        )
        .to_reply();
    }
    let started = std::time::Instant::now();
    // `bypassDocumentValidation: true` skips collection validators for this command.
    let bypass = hourglass_catalog::validation::bypass(validation_options::bypass_requested(req));
    let collation = match request_options::collation_of(req, &name) {
        Ok(c) => hourglass_query::collation::scope(c),
        Err(e) => return e.to_reply(),
    };
    let fail_point = if req.state.fail_command.armed() {
        let app_name = req.conn.app_name.lock().clone();
        req.state.fail_command.check(&name, app_name.as_deref())
    } else {
        None
    };
    if let Some((action, block_ms)) = &fail_point {
        if let Some(ms) = block_ms {
            std::thread::sleep(std::time::Duration::from_millis(*ms));
        }
        if action.close_connection {
            req.conn.close_instead_of_reply();
        }
    }
    // A fail point's error, or its closed connection, stands in for the command: it does
    // not run (as in mongod, where the connection closes before the command executes).
    let result = match &fail_point {
        Some((action, _)) if action.error.is_some() => Ok(action.error.clone().unwrap_or_default()),
        Some((action, _)) if action.close_connection => Err(CommandError::new(
            1,
            "connection closed by the failCommand fail point",
        )),
        _ => (command.handler)(req),
    };
    drop(bypass);
    drop(collation);
    let elapsed = started.elapsed();
    req.state
        .command_latency
        .get_or_create(&[("command", command.name)])
        .observe(elapsed.as_secs_f64());
    req.state
        .top
        .record(&top_ns, &name, writes, elapsed.as_micros() as u64);
    let mut reply = match result {
        Ok(mut reply) => {
            if !reply.contains_key("ok") {
                reply.insert("ok", 1.0);
            }
            reply
        }
        Err(e) => {
            tracing::debug!(command = %name, error = %e, "command failed");
            e.to_reply()
        }
    };
    // A command a fail point stood in for never ran: its transaction stays as it was. Either
    // way the thread works for no transaction from here on (the profiler writes below).
    let stood_in = matches!(&fail_point, Some((a, _)) if a.error.is_some() || a.close_connection);
    if stood_in {
        drop(begun);
    } else {
        transaction::finish(req, begun, &mut reply);
    }
    let mut reply = stamped(req, reply);
    if let (Some(wce), Ok(1.0)) = (unmet_write_concern, reply.get_f64("ok")) {
        reply.insert("writeConcernError", wce);
    }
    if let Some((action, _)) = fail_point {
        if let (Some(wce), None) = (action.write_concern_error, action.error) {
            reply.insert(
                "writeConcernError",
                crate::fail_point::write_concern_error(&wce),
            );
        }
    }
    transaction::label_errors(req, &name, &mut reply);
    if req.state.profiler.may_record(elapsed) {
        let user = req.conn.session.lock().user().map(|u| u.to_string());
        let op = Finished {
            db: &req.db,
            ns: &top_ns,
            op: kind,
            command: &req.body,
            reply: &reply,
            raw_batch: req
                .raw_batch
                .as_ref()
                .and_then(|b| b.lock().as_ref().map(|b| (b.count(), b.elements_len()))),
            elapsed,
            plan_summary: req.plan_summary.lock().take(),
            client: &req.conn.peer,
            user,
        };
        req.state.profiler.finished(&req.state.catalog, &op);
    }
    reply
}

/// The reply with a replica set member's cluster time (`--replSet`); as it is otherwise.
fn stamped(req: &Request, mut reply: Document) -> Document {
    if let Some(rs) = req.state.repl_set.get() {
        rs.stamp(&mut reply);
    }
    reply
}

/// Sets the deadline of `maxTimeMS` (a non-negative 32-bit count of milliseconds; 0 means
/// none), as MongoDB parses it.
fn apply_max_time(req: &Request) -> Result<(), CommandError> {
    let Some(v) = req.body.get("maxTimeMS") else {
        return Ok(());
    };
    let ms = match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => Some(*d as i64),
        Bson::Null => Some(0),
        _ => None,
    };
    match ms {
        Some(ms) if (0..=i64::from(i32::MAX)).contains(&ms) => {
            if ms > 0 {
                req.interrupt.set_deadline(
                    std::time::Instant::now() + std::time::Duration::from_millis(ms as u64),
                );
            }
            Ok(())
        }
        Some(_) => Err(CommandError::new(
            2,
            format!("{v} value for maxTimeMS is out of range [0, 2147483647]"),
        )),
        None => Err(CommandError::new(2, "maxTimeMS must be a number")),
    }
}

/// The `commands` document of `listCommands`.
pub fn list_commands_doc() -> Document {
    let mut out = Document::new();
    for c in COMMANDS {
        out.insert(
            c.name,
            doc! {"help": c.help, "requiresAuth": crate::access::check::requires_auth(c.name), "adminOnly": c.admin_only, "slaveOk": true},
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_table_is_alphabetical_and_unique() {
        for w in COMMANDS.windows(2) {
            assert!(
                w[0].name.to_lowercase() <= w[1].name.to_lowercase(),
                "{} must come before {}",
                w[1].name,
                w[0].name
            );
            assert_ne!(w[0].name, w[1].name);
        }
    }

    #[test]
    fn every_command_in_the_table_has_a_known_need() {
        // `access::check::need` falls back to the impossible `internal` action for
        // commands it does not know; no command of the table may reach that.
        use crate::access::check::{need, Need};
        for c in COMMANDS {
            let body = doc! {c.name: "c"};
            let n = need(c.name, "d", &body, &[]);
            let internal =
                matches!(&n, Need::Actions(a) if a.iter().any(|(x, _)| *x == "internal"));
            assert!(!internal, "{}: has no entry in access::check", c.name);
        }
    }

    #[test]
    fn admin_only_commands_are_refused_outside_admin_before_running() {
        for name in [
            "renameCollection",
            "listDatabases",
            "getCmdLineOpts",
            "getLog",
            "getParameter",
            "setParameter",
            "getDefaultRWConcern",
            "lockInfo",
        ] {
            assert!(lookup(name).is_some_and(|c| c.admin_only), "{name}");
        }
        assert!(!lookup("find").is_some_and(|c| c.admin_only));
        let listed = list_commands_doc();
        let entry = listed.get_document("listDatabases").unwrap();
        assert_eq!(entry.get_bool("adminOnly"), Ok(true));
    }
}
