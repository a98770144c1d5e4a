//! The console's JSON API (`/console/api/`): read-only MongoDB commands run in-process
//! through `commands::dispatch`, as the HTTP caller (so the same access checks apply as
//! on the wire protocol).
//!
//! `POST /console/api/command` takes one command document in MongoDB Extended JSON, with
//! the database in `$db` as in OP_MSG, and answers with the reply document in relaxed
//! Extended JSON: 200 when `ok: 1`, 403 for a command outside [`READ_COMMANDS`], a
//! pipeline with `$out`/`$merge`, or a caller without the privilege (13 `Unauthorized`),
//! 400 for any other command error. `GET /console/api/summary?db=&coll=` gathers what the
//! console shows about a time-series collection's buckets (see [`summary`]).
//!
//! The body must be `application/json`, so that another site's page cannot send one
//! without a CORS preflight (which this API never grants); see `console::guard` for the
//! `Host` and `Origin` checks made before either route runs.

use crate::auth::Caller;
use crate::body;
use axum::body::Body;
use axum::extract::{Extension, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bson::{doc, Bson, Document};
use hourglass_protocol::commands::{dispatch, Request};
use hourglass_protocol::{CommandError, ServerState};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// The commands the console may run: reads only.
pub const READ_COMMANDS: &[&str] = &[
    "listDatabases",
    "listCollections",
    "collStats",
    "count",
    "distinct",
    "aggregate",
    "find",
    "getMore",
    "killCursors",
    "buildInfo",
];

/// Pipeline stages that write, refused anywhere in a command.
const WRITE_STAGES: &[&str] = &["$out", "$merge"];

/// Largest command body accepted (the console's commands are small).
const MAX_COMMAND_BYTES: usize = 1 << 20;

/// Measurements read to estimate their uncompressed (BSON) size.
const SAMPLE_SIZE: i32 = 1000;

/// `POST /console/api/command`.
pub async fn command(
    State(state): State<Arc<ServerState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !is_json(&headers) {
        return reply(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            CommandError::new(
                2,
                "the command must be sent as Content-Type: application/json",
            )
            .to_reply(),
        );
    }
    let raw = match body::read(body, MAX_COMMAND_BYTES).await {
        Ok(raw) => raw,
        Err(e) => {
            let status = match e {
                body::BodyError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
                _ => StatusCode::BAD_REQUEST,
            };
            return reply(status, CommandError::new(2, e.to_string()).to_reply());
        }
    };
    let (db, body) = match parse_command(&raw) {
        Ok(parsed) => parsed,
        Err((status, e)) => return reply(status, e.to_reply()),
    };
    let out = run(state, caller, db, body).await;
    let status = status_of(&out);
    reply(status, out)
}

#[derive(Deserialize)]
pub struct SummaryParams {
    db: String,
    coll: String,
}

/// `GET /console/api/summary?db=&coll=`.
pub async fn summary(
    State(state): State<Arc<ServerState>>,
    Extension(caller): Extension<Caller>,
    Query(p): Query<SummaryParams>,
) -> Response {
    let out = match tokio::task::spawn_blocking(move || {
        collection_summary(&state, &caller, &p.db, &p.coll)
    })
    .await
    {
        Ok(Ok(d)) => d,
        Ok(Err(reply)) => reply,
        Err(e) => CommandError::new(1, format!("the summary failed: {e}")).to_reply(),
    };
    let status = status_of(&out);
    reply(status, out)
}

/// The database and body of a command sent as Extended JSON, or the status and error to
/// refuse it with.
fn parse_command(raw: &[u8]) -> Result<(String, Document), (StatusCode, CommandError)> {
    let bad = |msg: String| (StatusCode::BAD_REQUEST, CommandError::new(9, msg));
    let json: Value = serde_json::from_slice(raw).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    let body = match Bson::try_from(json) {
        Ok(Bson::Document(d)) => d,
        Ok(_) => return Err(bad("the command must be a JSON object".into())),
        Err(e) => return Err(bad(format!("invalid Extended JSON: {e}"))),
    };
    let db = match body.get("$db") {
        Some(Bson::String(s)) => s.clone(),
        _ => {
            return Err((
                StatusCode::BAD_REQUEST,
                CommandError::new(40571, "the command needs a $db field naming its database"),
            ))
        }
    };
    let name = body.keys().next().cloned().unwrap_or_default();
    if !READ_COMMANDS.contains(&name.as_str()) {
        return Err((
            StatusCode::FORBIDDEN,
            CommandError::new(
                13,
                format!(
                    "the console runs only the read commands {}; '{name}' is not one",
                    READ_COMMANDS.join(", ")
                ),
            ),
        ));
    }
    if let Some(stage) = write_stage(&body) {
        return Err((
            StatusCode::FORBIDDEN,
            CommandError::new(
                13,
                format!("the console runs only reads; a pipeline with {stage} writes"),
            ),
        ));
    }
    Ok((db, body))
}

/// The first `$out` or `$merge` key anywhere in `doc` (its pipelines, sub-pipelines of
/// `$facet`, `$lookup`, `$unionWith`, ...).
fn write_stage(doc: &Document) -> Option<&'static str> {
    fn walk(v: &Bson) -> Option<&'static str> {
        match v {
            Bson::Document(d) => write_stage(d),
            Bson::Array(a) => a.iter().find_map(walk),
            _ => None,
        }
    }
    doc.iter().find_map(|(k, v)| {
        WRITE_STAGES
            .iter()
            .find(|s| **s == k.as_str())
            .copied()
            .or_else(|| walk(v))
    })
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// Runs `body` on `db` as `caller` on the blocking pool. When the HTTP client goes away
/// (axum drops this future) the operation is interrupted, as `killOp` would.
async fn run(state: Arc<ServerState>, caller: Caller, db: String, body: Document) -> Document {
    let req = Request::internal(state, caller.0, db, body);
    let interrupt = req.interrupt.clone();
    let mut kill_on_drop = OnDrop(Some(move || interrupt.kill()));
    let out = match tokio::task::spawn_blocking(move || dispatch(&req)).await {
        Ok(d) => d,
        Err(e) => CommandError::new(1, format!("the command failed: {e}")).to_reply(),
    };
    kill_on_drop.0 = None;
    out
}

/// Runs its closure when dropped (unless it was taken out first).
struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// Runs one command on the calling (blocking) thread; an error reply is `Err`.
fn run_blocking(
    state: &Arc<ServerState>,
    caller: &Caller,
    db: &str,
    body: Document,
) -> Result<Document, Document> {
    let out = dispatch(&Request::internal(
        state.clone(),
        caller.0.clone(),
        db.to_string(),
        body,
    ));
    if is_ok(&out) {
        Ok(out)
    } else {
        Err(out)
    }
}

/// What the console shows of a time-series collection's buckets: the `collStats` reply
/// (its `timeseries` section holds `bucketCount`, `avgBucketSize` and the bucket
/// catalog's counters), the number of measurements (`count`, since `collStats` counts
/// buckets), the bytes the buckets take per hot (not archived) measurement, and the
/// compression ratio: the hot measurements' size as BSON documents (estimated from up to
/// [`SAMPLE_SIZE`] of them) over the buckets' bytes. Its `archive` section (files, bytes,
/// measurements, lastRun) is shown when present.
fn collection_summary(
    state: &Arc<ServerState>,
    caller: &Caller,
    db: &str,
    coll: &str,
) -> Result<Document, Document> {
    let stats = run_blocking(state, caller, db, doc! {"collStats": coll})?;
    let count = run_blocking(state, caller, db, doc! {"count": coll})?;
    let measurements = number(count.get("n")).unwrap_or(0.0);
    let sample = run_blocking(
        state,
        caller,
        db,
        doc! {"find": coll, "limit": SAMPLE_SIZE, "batchSize": SAMPLE_SIZE, "singleBatch": true},
    )?;
    let docs = sample
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .map(|a| a.as_slice())
        .unwrap_or(&[]);
    let sample_bytes: usize = docs
        .iter()
        .filter_map(|d| match d {
            Bson::Document(d) => bson::to_vec(d).ok().map(|v| v.len()),
            _ => None,
        })
        .sum();
    let ts = stats.get_document("timeseries").ok();
    let bucket_bytes = number(stats.get("size")).unwrap_or(0.0);
    // Archived measurements are counted by `count` but take no bucket bytes.
    let archived = stats
        .get_document("archive")
        .ok()
        .and_then(|a| number(a.get("measurements")))
        .unwrap_or(0.0);
    let hot = (measurements - archived).max(0.0);
    let mut out = doc! {
        "ns": format!("{db}.{coll}"),
        "collStats": stats.clone(),
        "bucketCount": ts.and_then(|t| number(t.get("bucketCount"))).unwrap_or(0.0) as i64,
        "bucketBytes": bucket_bytes as i64,
        "measurements": measurements as i64,
        "sampleSize": docs.len() as i64,
    };
    if !docs.is_empty() {
        let avg = sample_bytes as f64 / docs.len() as f64;
        out.insert("avgMeasurementBsonSize", avg);
        if bucket_bytes > 0.0 {
            out.insert("compressionRatio", avg * hot / bucket_bytes);
        }
    }
    if hot > 0.0 {
        out.insert("bytesPerMeasurement", bucket_bytes / hot);
    }
    out.insert("ok", 1.0);
    Ok(out)
}

fn number(v: Option<&Bson>) -> Option<f64> {
    match v? {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

fn is_ok(reply: &Document) -> bool {
    number(reply.get("ok")) == Some(1.0)
}

fn status_of(reply: &Document) -> StatusCode {
    if is_ok(reply) {
        StatusCode::OK
    } else if reply.get_i32("code") == Ok(13) {
        StatusCode::FORBIDDEN
    } else {
        StatusCode::BAD_REQUEST
    }
}

/// `reply` as relaxed Extended JSON, but lossless for JavaScript (see [`exact_in_js`]).
fn reply(status: StatusCode, reply: Document) -> Response {
    let json = exact_in_js(Bson::Document(reply).into_relaxed_extjson());
    (status, Json(json)).into_response()
}

/// Integers JavaScript cannot hold exactly (beyond 2^53, as cursor ids are) in canonical
/// form, `{"$numberLong": "..."}`, which every Extended JSON reader accepts.
pub fn exact_in_js(v: Value) -> Value {
    const SAFE: i64 = (1 << 53) - 1;
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) if !(-SAFE..=SAFE).contains(&i) => {
                serde_json::json!({"$numberLong": i.to_string()})
            }
            _ => match n.as_u64() {
                Some(u) if u > SAFE as u64 => serde_json::json!({"$numberLong": u.to_string()}),
                _ => Value::Number(n),
            },
        },
        Value::Array(a) => Value::Array(a.into_iter().map(exact_in_js).collect()),
        Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, v)| (k, exact_in_js(v))).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(json: &str) -> (StatusCode, i32) {
        match parse_command(json.as_bytes()) {
            Ok(_) => (StatusCode::OK, 0),
            Err((s, e)) => (s, e.to_reply().get_i32("code").unwrap_or(0)),
        }
    }

    #[test]
    fn reads_pass_and_writes_are_refused() {
        let (db, body) = parse_command(
            br#"{"find": "c", "filter": {"t": {"$date": "2026-01-01T00:00:00Z"}}, "$db": "d"}"#,
        )
        .expect("a find is allowed");
        assert_eq!(db, "d");
        assert!(body
            .get_document("filter")
            .and_then(|f| f.get_datetime("t"))
            .is_ok());
        assert_eq!(
            refused(r#"{"insert": "c", "documents": [{}], "$db": "d"}"#),
            (StatusCode::FORBIDDEN, 13)
        );
        assert_eq!(
            refused(r#"{"aggregate": "c", "pipeline": [{"$out": "x"}], "cursor": {}, "$db": "d"}"#),
            (StatusCode::FORBIDDEN, 13)
        );
        assert_eq!(
            refused(
                r#"{"aggregate": "c", "pipeline": [{"$facet": {"a": [{"$merge": "x"}]}}], "cursor": {}, "$db": "d"}"#
            ),
            (StatusCode::FORBIDDEN, 13)
        );
        // The command name is matched exactly, as `dispatch` looks it up.
        assert_eq!(
            refused(r#"{"Find": "c", "$db": "d"}"#),
            (StatusCode::FORBIDDEN, 13)
        );
        assert_eq!(
            refused(r#"{"find": "c"}"#),
            (StatusCode::BAD_REQUEST, 40571)
        );
        assert_eq!(refused("[1]"), (StatusCode::BAD_REQUEST, 9));
        assert_eq!(refused("{"), (StatusCode::BAD_REQUEST, 9));
    }

    #[test]
    fn large_integers_stay_exact() {
        let reply = doc! {"cursor": {"id": (1_i64 << 60) + 1, "firstBatch": [{"a": 5_i64, "b": 2.5}]}, "ok": 1.0};
        let json = exact_in_js(Bson::Document(reply.clone()).into_relaxed_extjson());
        assert_eq!(
            json.to_string(),
            r#"{"cursor":{"id":{"$numberLong":"1152921504606846977"},"firstBatch":[{"a":5,"b":2.5}]},"ok":1.0}"#
        );
        let back = Bson::try_from(json).expect("Extended JSON");
        assert_eq!(
            back.as_document()
                .and_then(|d| d.get_document("cursor").ok())
                .map(|c| c.get("id")),
            Some(Some(&Bson::Int64((1 << 60) + 1)))
        );
    }
}
