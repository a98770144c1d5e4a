//! The rest of InfluxDB's API that clients call around their writes: database DDL
//! (1.x `/query` with `CREATE DATABASE`, `DROP DATABASE`, `SHOW DATABASES`; 2.x
//! `/api/v2/buckets` and `/api/v2/orgs`) and the health checks (`/ping`, `/health`,
//! `/ready`). Other InfluxQL is refused with 400: data is read through MongoDB's API.
//!
//! `/query` follows InfluxDB 1.x: statements are split on `;` outside quotes, the whole
//! query is authorized before any statement runs (403 `error authorizing query: ...`
//! otherwise), a failed statement carries its error in its result and the statements
//! after it are `not executed`, and a `CREATE`/`DROP` sent with GET runs with 1.x's
//! deprecation warning in its result's `messages` (POST is the method for them).
//!
//! A database created here with no collection yet is recorded by the catalog
//! (`Catalog::declare_database`), since MongoDB has no empty databases. Hourglass has no
//! organizations: `/api/v2/orgs` answers with the organization asked for, so that 2.x
//! clients can resolve an org name before creating a bucket.

use crate::auth::{forbidden, Caller};
use crate::body;
use crate::influx::{no_content, with_version, Api, InfluxError};
use crate::ingest;
use axum::body::Body;
use axum::extract::{Extension, Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bson::doc;
use hourglass_protocol::access::check::Tgt;
use hourglass_protocol::ServerState;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

type Params = Query<HashMap<String, String>>;

/// `GET|POST /query?q=...` (or `q` in a form-encoded POST body).
pub async fn query(
    State(state): State<Arc<ServerState>>,
    Extension(caller): Extension<Caller>,
    method: Method,
    Query(q): Params,
    body: Body,
) -> Response {
    let mut text = q.get("q").cloned().unwrap_or_default();
    if text.is_empty() {
        if let Ok(raw) = body::read(body, 1 << 20).await {
            if let Ok(form) = serde_urlencoded::from_bytes::<HashMap<String, String>>(&raw) {
                text = form.get("q").cloned().unwrap_or_default();
            }
        }
    }
    let read_only = method == Method::GET;
    let outcome =
        tokio::task::spawn_blocking(move || run_statements(&state, &caller, &text, read_only))
            .await;
    match outcome {
        Ok(Ok(results)) => with_version(Json(json!({ "results": results })).into_response()),
        Ok(Err(QueryError::Invalid(message))) => {
            InfluxError::new(Api::V1, StatusCode::BAD_REQUEST, message).into_response()
        }
        Ok(Err(QueryError::Forbidden(message))) => {
            InfluxError::new(Api::V1, StatusCode::FORBIDDEN, message).into_response()
        }
        Err(e) => InfluxError::new(Api::V1, StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            .into_response(),
    }
}

/// Why a query was refused as a whole.
#[derive(Debug, PartialEq)]
enum QueryError {
    /// 400: it does not parse, or holds a statement Hourglass does not run.
    Invalid(String),
    /// 403: the caller may not run one of its statements.
    Forbidden(String),
}

#[derive(Debug, PartialEq)]
enum Statement {
    CreateDatabase(String),
    DropDatabase(String),
    ShowDatabases,
}

impl std::fmt::Display for Statement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Statement::CreateDatabase(db) => write!(f, "CREATE DATABASE {}", quote_ident(db)),
            Statement::DropDatabase(db) => write!(f, "DROP DATABASE {}", quote_ident(db)),
            Statement::ShowDatabases => f.write_str("SHOW DATABASES"),
        }
    }
}

/// An identifier as InfluxQL writes it: bare when it can be, else double-quoted.
fn quote_ident(name: &str) -> Cow<'_, str> {
    let bare = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if bare {
        return Cow::Borrowed(name);
    }
    Cow::Owned(format!(
        "\"{}\"",
        name.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

/// The `;`-separated statements of `text`, trimmed; a `;` inside a double-quoted
/// identifier or a single-quoted string (where a backslash escapes the next character)
/// does not split.
fn split_statements(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quote, mut escaped) = (0, None, false);
    for (i, c) in text.char_indices() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == ';' => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            None => {}
        }
    }
    parts.push(&text[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Runs the statements of `text` in order, as InfluxDB does: a statement that fails
/// carries its error in its result and the later ones are not run.
fn run_statements(
    state: &Arc<ServerState>,
    caller: &Caller,
    text: &str,
    read_only: bool,
) -> Result<Vec<Value>, QueryError> {
    let statements: Vec<Statement> = split_statements(text)
        .into_iter()
        .map(parse_statement)
        .collect::<Result<_, _>>()
        .map_err(QueryError::Invalid)?;
    if statements.is_empty() {
        return Err(QueryError::Invalid(
            "missing required parameter \"q\"".into(),
        ));
    }
    authorize(state, caller, &statements)?;
    let mut failed = false;
    Ok(statements
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if failed {
                return json!({"statement_id": i, "error": "not executed"});
            }
            match execute(state, caller, s) {
                Ok(None) if read_only => json!({"statement_id": i, "messages": [{
                    "level": "warning",
                    "text": format!("deprecated use of '{s}' in a read only context, please use a POST request instead"),
                }]}),
                Ok(None) => json!({"statement_id": i}),
                Ok(Some(series)) => json!({"statement_id": i, "series": series}),
                Err(e) => {
                    failed = true;
                    json!({"statement_id": i, "error": e})
                }
            }
        })
        .collect())
}

/// Whether the caller may run every statement (SHOW DATABASES lists what it may see).
fn authorize(
    state: &ServerState,
    caller: &Caller,
    statements: &[Statement],
) -> Result<(), QueryError> {
    for s in statements {
        let (action, db) = match s {
            Statement::CreateDatabase(db) => ("createCollection", db),
            Statement::DropDatabase(db) => ("dropDatabase", db),
            Statement::ShowDatabases => continue,
        };
        if !caller.may(state, action, Tgt::Db(db.clone())) {
            let user = caller
                .0
                .session
                .lock()
                .user()
                .map(|u| format!("{u} "))
                .unwrap_or_default();
            return Err(QueryError::Forbidden(format!(
                "error authorizing query: {user}not authorized to execute statement '{s}', requires {action} on database {db}"
            )));
        }
    }
    Ok(())
}

/// Runs one statement: its series, if it has any, or its error.
fn execute(
    state: &Arc<ServerState>,
    caller: &Caller,
    s: &Statement,
) -> Result<Option<Value>, String> {
    match s {
        Statement::CreateDatabase(db) => state
            .catalog
            .declare_database(db)
            .map(|_| None)
            .map_err(|e| e.to_string()),
        Statement::DropDatabase(db) => {
            ingest::run_command(state, caller, db, doc! {"dropDatabase": 1})
                .map(|_| None)
                .map_err(|e| e.to_string())
        }
        Statement::ShowDatabases => {
            let values: Vec<Value> = state
                .catalog
                .database_names()
                .into_iter()
                .filter(|n| caller.sees_database(state, n))
                .map(|n| json!([n]))
                .collect();
            Ok(Some(
                json!([{"name": "databases", "columns": ["name"], "values": values}]),
            ))
        }
    }
}

fn parse_statement(s: &str) -> Result<Statement, String> {
    let words: Vec<&str> = s.split_whitespace().collect();
    let kw = |i: usize, w: &str| words.get(i).is_some_and(|x| x.eq_ignore_ascii_case(w));
    if kw(0, "SHOW") && kw(1, "DATABASES") && words.len() == 2 {
        return Ok(Statement::ShowDatabases);
    }
    let create = kw(0, "CREATE") && kw(1, "DATABASE");
    if create || (kw(0, "DROP") && kw(1, "DATABASE")) {
        // The identifier is what follows the second keyword.
        let rest = s.trim_start()[words[0].len()..].trim_start()[words[1].len()..].trim();
        let (name, after) = identifier(rest)?;
        if !after.trim().is_empty() {
            return Err(format!(
                "unsupported clause '{}': retention policies are not supported (set expireAfterSeconds on the collections)",
                after.trim()
            ));
        }
        return Ok(if create {
            Statement::CreateDatabase(name)
        } else {
            Statement::DropDatabase(name)
        });
    }
    Err(format!(
        "unsupported statement '{s}': Hourglass answers CREATE DATABASE, DROP DATABASE and SHOW DATABASES; query the data through the MongoDB protocol"
    ))
}

/// An InfluxQL identifier (bare, or double-quoted with `\"` and `\\` escapes) and the
/// text after it.
fn identifier(s: &str) -> Result<(String, &str), String> {
    if let Some(quoted) = s.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Ok((out, &quoted[i + 1..])),
                '\\' => match chars.next() {
                    Some((_, n)) => out.push(n),
                    None => break,
                },
                c => out.push(c),
            }
        }
        return Err("unterminated quoted identifier".into());
    }
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    if end == 0 {
        return Err("expected a database name".into());
    }
    Ok((s[..end].to_string(), &s[end..]))
}

/// A stable 16-hex-digit id for a name (InfluxDB 2.x ids have this form).
fn id_of(name: &str) -> String {
    // FNV-1a: stable across runs and versions, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn bucket_json(name: &str, org_id: &str) -> Value {
    json!({
        "id": id_of(name), "name": name, "orgID": org_id, "type": "user",
        "retentionRules": [], "labels": [], "links": {"self": format!("/api/v2/buckets/{}", id_of(name))},
    })
}

/// `POST /api/v2/buckets`: creates the database named by `name`. Retention rules are
/// refused (a collection's `expireAfterSeconds` is the way to expire data).
pub async fn create_bucket(
    State(state): State<Arc<ServerState>>,
    Extension(caller): Extension<Caller>,
    body: Body,
) -> Response {
    let invalid = |m: String| InfluxError::new(Api::V2, StatusCode::BAD_REQUEST, m).into_response();
    let raw = match body::read(body, 1 << 20).await {
        Ok(r) => r,
        Err(e) => return invalid(e.to_string()),
    };
    let req: Value = match serde_json::from_slice(&raw) {
        Ok(v) => v,
        Err(e) => return invalid(format!("invalid JSON body: {e}")),
    };
    let Some(name) = req.get("name").and_then(Value::as_str).map(str::to_string) else {
        return invalid("bucket name is required".into());
    };
    let org_id = req
        .get("orgID")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let expiring = req
        .get("retentionRules")
        .and_then(Value::as_array)
        .is_some_and(|rules| {
            rules
                .iter()
                .any(|r| r.get("everySeconds").and_then(Value::as_i64).unwrap_or(0) > 0)
        });
    if expiring {
        return invalid(
            "retention rules are not supported: set expireAfterSeconds on the collections".into(),
        );
    }
    if !caller.may(&state, "createCollection", Tgt::Db(name.clone())) {
        return forbidden(&format!("not authorized to create bucket {name}"));
    }
    if state.catalog.database_exists(&name) {
        return InfluxError::new(
            Api::V2,
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("bucket with name {name} already exists"),
        )
        .with_code("conflict")
        .into_response();
    }
    let declared = {
        let (state, name) = (state.clone(), name.clone());
        tokio::task::spawn_blocking(move || state.catalog.declare_database(&name)).await
    };
    match declared {
        Ok(Ok(())) => (StatusCode::CREATED, Json(bucket_json(&name, &org_id))).into_response(),
        Ok(Err(e)) => invalid(e.to_string()),
        Err(e) => InfluxError::new(Api::V2, StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            .into_response(),
    }
}

/// `GET /api/v2/buckets[?name=]`: the databases, as buckets.
pub async fn list_buckets(
    State(state): State<Arc<ServerState>>,
    Extension(caller): Extension<Caller>,
    Query(q): Params,
) -> Response {
    let org_id = q.get("orgID").cloned().unwrap_or_default();
    let buckets: Vec<Value> = state
        .catalog
        .database_names()
        .into_iter()
        .filter(|n| q.get("name").is_none_or(|want| want == n))
        .filter(|n| caller.sees_database(&state, n))
        .map(|n| bucket_json(&n, &org_id))
        .collect();
    Json(json!({ "buckets": buckets })).into_response()
}

/// `GET /api/v2/orgs[?org=]`: the organization asked for (Hourglass has none of its own).
pub async fn orgs(Query(q): Params) -> Response {
    let name = q.get("org").cloned().unwrap_or_else(|| "hourglass".into());
    Json(json!({"orgs": [{"id": id_of(&name), "name": name}]})).into_response()
}

/// `GET|HEAD /ping`: 204 with the version headers; with `verbose` set to anything but
/// empty, `0` or `false`, 200 with `{"version": ...}`, as 1.x answers.
pub async fn ping(Query(q): Params) -> Response {
    if q.get("verbose")
        .is_some_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
    {
        return with_version(
            Json(json!({"version": crate::influx::INFLUX_VERSION})).into_response(),
        );
    }
    no_content()
}

/// `GET /health`, as InfluxDB 2.x answers it.
pub async fn health() -> Response {
    with_version(
        Json(json!({
            "name": "influxdb", "message": "ready for queries and writes", "status": "pass",
            "checks": [], "version": crate::influx::INFLUX_VERSION,
            "commit": concat!("hourglass-", env!("CARGO_PKG_VERSION")),
        }))
        .into_response(),
    )
}

/// `GET /ready`, as InfluxDB 2.x answers it.
pub async fn ready(State(state): State<Arc<ServerState>>) -> Response {
    let up = state.started.elapsed();
    let started_ms = bson::DateTime::now().timestamp_millis() - up.as_millis() as i64;
    let started = bson::DateTime::from_millis(started_ms)
        .try_to_rfc3339_string()
        .unwrap_or_default();
    Json(json!({"status": "ready", "started": started, "up": format!("{:.3}s", up.as_secs_f64())}))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_statements_parse_with_bare_and_quoted_names() {
        assert_eq!(
            parse_statement("create database mydb"),
            Ok(Statement::CreateDatabase("mydb".into()))
        );
        assert_eq!(
            parse_statement(r#"CREATE DATABASE "my \"odd\" db""#),
            Ok(Statement::CreateDatabase(r#"my "odd" db"#.into()))
        );
        assert_eq!(
            parse_statement("DROP  DATABASE x"),
            Ok(Statement::DropDatabase("x".into()))
        );
        assert_eq!(
            parse_statement("show databases"),
            Ok(Statement::ShowDatabases)
        );
        assert!(parse_statement("CREATE DATABASE x WITH DURATION 1d").is_err());
        assert!(parse_statement("SELECT * FROM cpu").is_err());
        assert!(parse_statement(r#"CREATE DATABASE "open"#).is_err());
    }

    #[test]
    fn statements_split_on_semicolons_outside_quotes_only() {
        assert_eq!(
            split_statements(r#"CREATE DATABASE "a;b"; SHOW DATABASES;;"#),
            vec![r#"CREATE DATABASE "a;b""#, "SHOW DATABASES"]
        );
        assert_eq!(
            split_statements(r#"CREATE DATABASE "x\";y"; DROP DATABASE 'q;'"#),
            vec![r#"CREATE DATABASE "x\";y""#, "DROP DATABASE 'q;'"]
        );
        assert_eq!(
            parse_statement(split_statements(r#"CREATE DATABASE "a;b""#)[0]),
            Ok(Statement::CreateDatabase("a;b".into()))
        );
        assert!(split_statements(" ; \n").is_empty());
    }

    #[test]
    fn statements_print_as_influxql_with_names_quoted_when_needed() {
        assert_eq!(
            Statement::CreateDatabase("my_db1".into()).to_string(),
            "CREATE DATABASE my_db1"
        );
        assert_eq!(
            Statement::DropDatabase(r#"a "b"\c"#.into()).to_string(),
            r#"DROP DATABASE "a \"b\"\\c""#
        );
        assert_eq!(Statement::ShowDatabases.to_string(), "SHOW DATABASES");
    }
}
