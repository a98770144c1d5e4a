//! The connection handshake and session plumbing: `hello`/`isMaster`, `ping`,
//! `whatsmyuri`, `connectionStatus`, `endSessions`/`refreshSessions`.

use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};

pub const MAX_BSON_OBJECT_SIZE: i32 = hourglass_query::limits::MAX_BSON_OBJECT_SIZE as i32;
pub const MAX_MESSAGE_SIZE_BYTES: i32 = crate::wire::MAX_MESSAGE_SIZE as i32;
pub const MAX_WRITE_BATCH_SIZE: i32 = crate::wire::MAX_WRITE_BATCH as i32;
/// The wire version of MongoDB 7.0.
pub const MAX_WIRE_VERSION: i32 = 21;

/// The handshake reply; `legacy` selects `ismaster` (isMaster) over `isWritablePrimary`.
///
/// No `topologyVersion` is sent: with it, drivers switch their monitors to the streaming
/// (exhaust, awaitable `hello`) protocol, which this server does not speak; without it
/// they poll, which is all a standalone server needs.
pub fn handshake_reply(req: &Request, legacy: bool) -> CmdResult {
    let mut reply = Document::new();
    if req.body.get_bool("helloOk").unwrap_or(false) {
        reply.insert("helloOk", true);
    }
    if legacy {
        reply.insert("ismaster", true);
    } else {
        reply.insert("isWritablePrimary", true);
    }
    reply.extend(doc! {
        "maxBsonObjectSize": MAX_BSON_OBJECT_SIZE,
        "maxMessageSizeBytes": MAX_MESSAGE_SIZE_BYTES,
        "maxWriteBatchSize": MAX_WRITE_BATCH_SIZE,
        "localTime": bson::DateTime::now(),
        "logicalSessionTimeoutMinutes": 30,
        "connectionId": req.conn.id,
        "minWireVersion": 0,
        "maxWireVersion": MAX_WIRE_VERSION,
        "readOnly": false,
    });
    if let Some(rs) = req.state.repl_set.get() {
        reply.extend(rs.hello_fields(&super::replication::member_address(req)));
    }
    // The compressors the client offered that this server speaks, in its order.
    if let Ok(offered) = req.body.get_array("compression") {
        let names: Vec<String> = offered
            .iter()
            .filter_map(|c| c.as_str().map(str::to_string))
            .collect();
        reply.insert("compression", crate::wire::compression::negotiate(&names));
    }
    if let Some(mechanisms) = super::sasl::supported_mechanisms(req)? {
        reply.insert("saslSupportedMechs", mechanisms);
    }
    if let Some(first_step) = super::sasl::speculative(req)? {
        reply.insert("speculativeAuthenticate", first_step);
    }
    Ok(reply)
}

pub fn hello(req: &Request) -> CmdResult {
    remember_app_name(req);
    handshake_reply(req, false)
}

pub fn is_master(req: &Request) -> CmdResult {
    remember_app_name(req);
    handshake_reply(req, true)
}

/// The driver's `client.application.name` (sent with the first handshake), kept for
/// `failCommand`'s `appName`.
fn remember_app_name(req: &Request) {
    let name = req
        .body
        .get_document("client")
        .ok()
        .and_then(|c| c.get_document("application").ok())
        .and_then(|a| a.get_str("name").ok());
    if let Some(name) = name {
        *req.conn.app_name.lock() = Some(name.to_string());
    }
}

pub fn ping(_req: &Request) -> CmdResult {
    Ok(Document::new())
}

pub fn whats_my_uri(req: &Request) -> CmdResult {
    Ok(doc! {"you": &req.conn.peer})
}

/// `connectionStatus`: the connection's user, all its roles (inherited ones too) and,
/// with `showPrivileges`, its privileges merged per resource.
pub fn connection_status(req: &Request) -> CmdResult {
    use crate::access::{roles, session, store};
    let (users, resolved) = match session::current(&req.state, &req.conn.session)? {
        Some((name, r)) => (vec![name], r.as_ref().clone()),
        None => (Vec::new(), Default::default()),
    };
    let mut auth = doc! {
        "authenticatedUsers": store::names_doc(&users, "user"),
        "authenticatedUserRoles": store::names_doc(&resolved.all, "role"),
    };
    if req.opt_bool("showPrivileges")?.unwrap_or(false) {
        auth.insert(
            "authenticatedUserPrivileges",
            roles::privileges_bson(&resolved.privileges),
        );
    }
    Ok(doc! {"authInfo": auth})
}

/// `endSessions`: the sessions leave the local session cache.
pub fn end_sessions(req: &Request) -> CmdResult {
    let ids = session_list(req, "endSessions")?;
    req.state.sessions.end(&ids);
    req.state
        .transactions
        .end_sessions(&req.state.catalog, &ids);
    Ok(Document::new())
}

/// `refreshSessions`: the sessions are marked used now.
pub fn refresh_sessions(req: &Request) -> CmdResult {
    let user = req.user().map(|u| u.to_string());
    for lsid in session_list(req, "refreshSessions")? {
        req.state.sessions.touch(&lsid, user.clone());
    }
    Ok(Document::new())
}

/// The array a sessions command names (`endSessions: [...]`; none: empty).
pub(super) fn session_list(req: &Request, command: &str) -> Result<Vec<Bson>, CommandError> {
    match req.body.get(command) {
        Some(Bson::Array(a)) => Ok(a.clone()),
        Some(v) => Err(req.wrong_type(command, v, "array")),
        None => Ok(Vec::new()),
    }
}
