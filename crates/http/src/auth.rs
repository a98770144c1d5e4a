//! Who calls the HTTP API. With access control on (`--auth`) every route but the health
//! checks (`/ping`, `/health`, `/ready`) needs a user's credentials, in any of the forms
//! InfluxDB and Prometheus clients send: `Authorization: Basic`, InfluxDB's
//! `Authorization: Token <user>:<password>`, or the `u` and `p` query parameters. The user
//! is looked up in `admin` (or the database `authSource` names) and its password checked
//! against the stored SCRAM credential. The request then runs as that user: its writes,
//! DDL and reads need the same privileges as through the MongoDB protocol.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use hourglass_protocol::access::check::{self, Tgt};
use hourglass_protocol::access::session;
use hourglass_protocol::access::store::{self, Name};
use hourglass_protocol::{ConnInfo, ServerState};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

/// The connection a request runs as: anonymous with access control off, else logged in as
/// the user whose credentials it carried.
#[derive(Clone)]
pub struct Caller(pub Arc<ConnInfo>);

impl Caller {
    /// Whether the caller may do `action` on `target`.
    pub fn may(&self, state: &ServerState, action: &str, target: Tgt) -> bool {
        check::allowed(state, &self.0, action, target).unwrap_or(false)
    }

    /// Whether the caller may see database `db` in a listing: with `listDatabases`, or
    /// when it holds any privilege there (as MongoDB's `listDatabases` filters).
    pub fn sees_database(&self, state: &ServerState, db: &str) -> bool {
        if self.may(state, "listDatabases", Tgt::Cluster) {
            return true;
        }
        match session::current(state, &self.0.session) {
            Ok(Some((_, r))) => hourglass_auth::privilege::any_on_database(&r.privileges, db),
            _ => false,
        }
    }
}

/// Routes anyone may call.
const OPEN_PATHS: &[&str] = &["/ping", "/health", "/ready"];

fn unauthorized(message: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Basic realm=\"hourglass\"")],
        Json(json!({"code": "unauthorized", "message": message, "error": message})),
    )
        .into_response()
}

/// A forbidden request, in the JSON both InfluxDB APIs answer with.
pub fn forbidden(message: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        Json(json!({"code": "forbidden", "message": message, "error": message})),
    )
        .into_response()
}

/// The user name and password a request carries (its `Authorization` header, else the
/// `u` and `p` of its `query`), if any.
fn credentials(req: &Request, query: &HashMap<String, String>) -> Option<(String, String)> {
    if let Some(value) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let (scheme, rest) = value.split_once(' ')?;
        let pair = match scheme {
            s if s.eq_ignore_ascii_case("basic") => {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(rest.trim())
                    .ok()?;
                String::from_utf8(raw).ok()?
            }
            s if s.eq_ignore_ascii_case("token") => rest.trim().to_string(),
            _ => return None,
        };
        let (u, p) = pair.split_once(':')?;
        return Some((u.to_string(), p.to_string()));
    }
    Some((query.get("u")?.clone(), query.get("p")?.clone()))
}

/// The middleware: authenticates the request (when access control is on) and hands the
/// handlers its [`Caller`].
pub async fn authenticate(
    State(state): State<Arc<ServerState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let conn = ConnInfo::new(0, "http".into());
    if state.access.enabled() && !OPEN_PATHS.contains(&req.uri().path()) {
        let query: HashMap<String, String> =
            serde_urlencoded::from_str(req.uri().query().unwrap_or("")).unwrap_or_default();
        let Some((user, password)) = credentials(&req, &query) else {
            return unauthorized("unable to parse authentication credentials");
        };
        let source = query.get("authSource").map_or("admin", String::as_str);
        let name = Name::new(user, source);
        let checked = {
            let (state, name) = (state.clone(), name.clone());
            // PBKDF2 when the password is not cached: off the async runtime.
            tokio::task::spawn_blocking(move || store::verify_password(&state, &name, &password))
                .await
        };
        if !matches!(checked, Ok(Ok(true))) {
            tracing::info!(user = %name, "HTTP authentication failed");
            return unauthorized("authorization failed");
        }
        if conn.session.lock().login(name).is_err() {
            return unauthorized("authorization failed");
        }
    }
    req.extensions_mut().insert(Caller(Arc::new(conn)));
    next.run(req).await
}
