//! InfluxDB line-protocol writes: 1.x `/write` and 2.x `/api/v2/write` (the rest of
//! InfluxDB's API that clients use is in `influx_admin.rs`).
//!
//! Each measurement becomes the time-series collection `<db>.<measurement>` (time field
//! `time`, meta field `tags`); see [`crate::line_protocol`] for the syntax and
//! `docs/design.md` "HTTP writes" for the document each line becomes. Answers and errors
//! have InfluxDB's shapes: 204 on success; 400 naming the first malformed line, after
//! writing the good lines of the same body (1.x) or writing nothing (2.x); 404 for an
//! unknown database; 413 over the body limit; 5xx only when a retry may succeed.

use crate::auth::Caller;
use crate::body::{self, BodyError};
use crate::ingest::{self, IngestError};
use crate::line_protocol::{self, FieldValue, Point};
use crate::measurement_bson::{BadKey, DocBuffer, DocWriter};
use axum::body::Body;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hourglass_protocol::ServerState;
use serde_json::json;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// The InfluxDB version clients are told (the 1.x API they speak).
pub(crate) const INFLUX_VERSION: &str = "1.8.10";

type Params = Query<HashMap<String, String>>;

/// Which API a request came through: errors take that API's shape.
#[derive(Clone, Copy)]
pub(crate) enum Api {
    V1,
    V2,
}

pub(crate) struct InfluxError {
    api: Api,
    status: StatusCode,
    message: String,
    /// The 2.x `code` when the status alone does not tell it.
    code: Option<&'static str>,
}

impl InfluxError {
    pub(crate) fn new(api: Api, status: StatusCode, message: impl Into<String>) -> InfluxError {
        InfluxError {
            api,
            status,
            message: message.into(),
            code: None,
        }
    }

    /// The same error with the 2.x `code` given (`conflict` for a 422).
    pub(crate) fn with_code(self, code: &'static str) -> InfluxError {
        InfluxError {
            code: Some(code),
            ..self
        }
    }

    fn from_ingest(api: Api, e: IngestError) -> InfluxError {
        let status = match &e {
            IngestError::DatabaseNotFound(_) => StatusCode::NOT_FOUND,
            IngestError::Invalid(_) => StatusCode::BAD_REQUEST,
            IngestError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            IngestError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            IngestError::Forbidden(_) => StatusCode::FORBIDDEN,
        };
        let message = match (api, &e) {
            (Api::V2, IngestError::DatabaseNotFound(db)) => format!("bucket \"{db}\" not found"),
            _ => e.to_string(),
        };
        InfluxError::new(api, status, message)
    }

    fn from_body(api: Api, e: BodyError) -> InfluxError {
        let status = match e {
            BodyError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::Encoding(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            BodyError::Read(_) | BodyError::Decode(_) => StatusCode::BAD_REQUEST,
        };
        InfluxError::new(api, status, e.to_string())
    }
}

impl IntoResponse for InfluxError {
    fn into_response(self) -> Response {
        let body = match self.api {
            Api::V1 => json!({"error": self.message}),
            Api::V2 => {
                let code = self.code.unwrap_or(match self.status {
                    StatusCode::UNAUTHORIZED => "unauthorized",
                    StatusCode::FORBIDDEN => "forbidden",
                    StatusCode::NOT_FOUND => "not found",
                    StatusCode::PAYLOAD_TOO_LARGE => "request too large",
                    StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported media type",
                    StatusCode::SERVICE_UNAVAILABLE => "unavailable",
                    s if s.is_server_error() => "internal error",
                    _ => "invalid",
                });
                json!({"code": code, "message": self.message})
            }
        };
        let mut r = (self.status, Json(body)).into_response();
        if let Ok(v) = HeaderValue::from_str(&self.message.replace(['\r', '\n'], " ")) {
            r.headers_mut().insert("X-Influxdb-Error", v);
        }
        with_version(r)
    }
}

pub(crate) fn with_version(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        "X-Influxdb-Version",
        HeaderValue::from_static(INFLUX_VERSION),
    );
    h.insert("X-Influxdb-Build", HeaderValue::from_static("OSS"));
    r
}

pub(crate) fn no_content() -> Response {
    with_version(StatusCode::NO_CONTENT.into_response())
}

/// Nanoseconds per unit of a write's `precision` (1.x names `n u ms s m h`, 2.x names
/// `ns us ms s`; both accepted on both APIs).
fn precision_ns(api: Api, p: Option<&str>) -> Result<i64, InfluxError> {
    Ok(match p.unwrap_or("") {
        "" | "n" | "ns" => 1,
        "u" | "us" | "µ" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        other => {
            return Err(InfluxError::new(
                api,
                StatusCode::BAD_REQUEST,
                format!("invalid precision \"{other}\" (use ns, us, ms or s)"),
            ))
        }
    })
}

/// 1.x `consistency`, a cluster setting a single server accepts and ignores: `any`,
/// `one`, `quorum` or `all`, in any case.
fn check_consistency(level: Option<&str>) -> Result<(), InfluxError> {
    match level.map(str::to_ascii_lowercase).as_deref() {
        None | Some("" | "any" | "one" | "quorum" | "all") => Ok(()),
        Some(_) => Err(InfluxError::new(
            Api::V1,
            StatusCode::BAD_REQUEST,
            "invalid consistency level",
        )),
    }
}

/// The time of a point written without one: the server's clock in milliseconds,
/// truncated to the request's precision as InfluxDB does (`h`: the start of the hour).
fn arrival_ms(unit_ns: i64) -> i64 {
    let now = bson::DateTime::now().timestamp_millis();
    let step = (unit_ns / 1_000_000).max(1);
    now - now.rem_euclid(step)
}

/// `POST /write?db=&rp=&precision=&consistency=`.
pub async fn write_v1(
    State(state): State<Arc<ServerState>>,
    Extension(caller): Extension<Caller>,
    Query(q): Params,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let db = q.get("db").map(String::as_str).unwrap_or("");
    let rp = q.get("rp").map(String::as_str);
    write(state, caller, Api::V1, db, rp, &q, headers, body).await
}

/// `POST /api/v2/write?org=&bucket=&precision=`. The bucket is the database (`db/rp`
/// names the database before the slash). Hourglass has no organizations: `org` names
/// none and is not checked.
pub async fn write_v2(
    State(state): State<Arc<ServerState>>,
    Extension(caller): Extension<Caller>,
    Query(q): Params,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let bucket = q.get("bucket").map(String::as_str).unwrap_or("");
    let (db, rp) = match bucket.split_once('/') {
        Some((db, rp)) => (db, Some(rp)),
        None => (bucket, None),
    };
    write(state, caller, Api::V2, db, rp, &q, headers, body).await
}

/// The database a write goes to: it must be named, and a retention policy may only be
/// the default one (Hourglass has no others).
fn database(api: Api, db: &str, rp: Option<&str>) -> Result<String, InfluxError> {
    if db.is_empty() {
        let missing = match api {
            Api::V1 => "database is required",
            Api::V2 => "bucket is required",
        };
        return Err(InfluxError::new(api, StatusCode::BAD_REQUEST, missing));
    }
    match rp {
        None | Some("" | "autogen") => Ok(db.to_string()),
        Some(rp) => Err(InfluxError::new(
            api,
            StatusCode::NOT_FOUND,
            format!("retention policy not found: {rp}"),
        )),
    }
}

#[allow(clippy::too_many_arguments)]
async fn write(
    state: Arc<ServerState>,
    caller: Caller,
    api: Api,
    db: &str,
    rp: Option<&str>,
    q: &HashMap<String, String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let db = database(api, db, rp)?;
        let unit = precision_ns(api, q.get("precision").map(String::as_str))?;
        if let Err(e) = ingest::check_database(&state, &db) {
            return Err(InfluxError::from_ingest(api, e));
        }
        if let Api::V1 = api {
            check_consistency(q.get("consistency").map(String::as_str))?;
        }
        let limit = body::limit(&state);
        let raw = body::read(body, limit)
            .await
            .map_err(|e| InfluxError::from_body(api, e))?;
        let lines =
            body::decode_gzip(&headers, raw, limit).map_err(|e| InfluxError::from_body(api, e))?;
        // 2.x refuses an empty body; 1.x writes nothing and answers 204.
        if matches!(api, Api::V2) && lines.is_empty() {
            return Err(InfluxError::new(
                api,
                StatusCode::BAD_REQUEST,
                "writing requires points",
            ));
        }
        let state = state.clone();
        let all_or_nothing = matches!(api, Api::V2);
        let arrival = arrival_ms(unit);
        tokio::task::spawn_blocking(move || {
            write_lines(&state, &caller, &db, &lines, unit, arrival, all_or_nothing)
        })
        .await
        .map_err(|e| InfluxError::new(api, StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(|e| InfluxError::from_ingest(api, e))
    }
    .await;
    match result {
        Ok(report) if report.errors.is_empty() => no_content(),
        Ok(report) => {
            InfluxError::new(api, StatusCode::BAD_REQUEST, report.message()).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// What a write did with the lines of its body.
struct WriteReport {
    written: usize,
    /// (line number, message), in line order.
    errors: Vec<(usize, String)>,
}

impl WriteReport {
    /// InfluxDB's message: the first bad line, and how many were dropped when others
    /// were written.
    fn message(&self) -> String {
        let first = self.errors.first().map(|(_, m)| m.as_str()).unwrap_or("");
        if self.written > 0 {
            format!("partial write: {first} dropped={}", self.errors.len())
        } else {
            first.to_string()
        }
    }
}

/// The documents of one measurement, and the line of each.
struct Batch {
    measurement: String,
    docs: DocBuffer,
    lines: Vec<usize>,
}

/// Parses the body and writes each measurement's points to its collection. Every
/// document is built (and every line checked) before the first insert, so that with
/// `all_or_nothing` (2.x) a bad line writes nothing; otherwise (1.x) the good lines are
/// written.
fn write_lines(
    state: &Arc<ServerState>,
    caller: &Caller,
    db: &str,
    body: &[u8],
    unit_ns: i64,
    arrival_ms: i64,
    all_or_nothing: bool,
) -> Result<WriteReport, IngestError> {
    let (points, parse_errors) = line_protocol::parse(body);
    let mut errors: Vec<(usize, String)> = parse_errors
        .into_iter()
        .map(|e| (e.line, e.to_string()))
        .collect();
    if all_or_nothing && !errors.is_empty() {
        return Ok(WriteReport { written: 0, errors });
    }
    // Points by measurement, in the order each measurement first appears.
    let total = points.len();
    let mut order: Vec<String> = Vec::new();
    let mut groups: HashMap<String, Vec<(usize, Point)>> = HashMap::new();
    for (line, p) in points {
        match groups.get_mut(p.measurement.as_ref()) {
            Some(g) => g.push((line, p)),
            None => {
                order.push(p.measurement.to_string());
                groups.insert(p.measurement.to_string(), vec![(line, p)]);
            }
        }
    }
    let mut batches = Vec::with_capacity(order.len());
    for measurement in order {
        let group = groups.remove(&measurement).unwrap_or_default();
        ingest::check_insert(state, caller, db, &measurement)?;
        // The field names of the collection, or of the one the first insert creates.
        let options = match ingest::existing_options(state, db, &measurement) {
            Ok(o) => o,
            Err(IngestError::Invalid(reason)) => {
                errors.extend(
                    group
                        .iter()
                        .map(|(line, _)| (*line, point_error(*line, &reason))),
                );
                continue;
            }
            Err(e) => return Err(e),
        };
        let names = Names {
            time: options.as_ref().map_or("time", |o| &o.time_field).into(),
            meta: options
                .as_ref()
                .and_then(|o| o.meta_field.clone())
                .unwrap_or_else(|| "tags".into()),
        };
        // The documents take about the room of their lines.
        let room = body.len() / total.max(1) * group.len() + 4096;
        let mut docs = DocBuffer::with_capacity(group.len(), room);
        let mut lines = Vec::with_capacity(group.len());
        for (line, p) in group {
            match write_point(&mut docs, p, unit_ns, arrival_ms, &names) {
                Ok(()) => lines.push(line),
                Err(reason) => errors.push((line, point_error(line, &reason))),
            }
        }
        batches.push(Batch {
            measurement,
            docs,
            lines,
        });
    }
    if all_or_nothing && !errors.is_empty() {
        errors.sort_by_key(|(line, _)| *line);
        return Ok(WriteReport { written: 0, errors });
    }
    let mut written = 0;
    for batch in batches.into_iter().filter(|b| !b.docs.is_empty()) {
        let dest = match ingest::destination(state, caller, db, &batch.measurement, "tags") {
            Ok(d) => d,
            Err(IngestError::Invalid(reason)) => {
                errors.extend(
                    batch
                        .lines
                        .iter()
                        .map(|line| (*line, point_error(*line, &reason))),
                );
                continue;
            }
            Err(e) => return Err(e),
        };
        let out = ingest::insert(state, &dest, &batch.docs)?;
        written += out.written;
        for (i, reason) in out.rejected {
            let line = batch.lines.get(i).copied().unwrap_or(0);
            errors.push((line, point_error(line, &reason)));
        }
    }
    errors.sort_by_key(|(line, _)| *line);
    Ok(WriteReport { written, errors })
}

fn point_error(line: usize, reason: &str) -> String {
    format!("unable to write point (line {line}): {reason}")
}

/// Writes the measurement document of one point: the time, the tags under the meta
/// field (sorted by key, absent when there are none), the fields, and `ns` with the
/// nanoseconds below the millisecond when there are any.
fn write_point(
    docs: &mut DocBuffer,
    p: Point,
    unit_ns: i64,
    arrival_ms: i64,
    names: &Names,
) -> Result<(), String> {
    let (ms, sub_ms_ns) = match p.timestamp {
        None => (arrival_ms, 0),
        Some(t) => {
            let ns = t.checked_mul(unit_ns).ok_or("time outside range")?;
            (ns.div_euclid(1_000_000), ns.rem_euclid(1_000_000))
        }
    };
    if p.tags.iter().any(|(k, _)| k == &names.time) {
        return Err(format!(
            "invalid tag key \"{}\": it names the point's time",
            names.time
        ));
    }
    for (key, _) in &p.fields {
        if key == &names.time || key == &names.meta || (key == "ns" && sub_ms_ns != 0) {
            return Err(format!(
                "invalid field name \"{key}\": it holds the point's {}",
                if key == &names.meta { "tags" } else { "time" }
            ));
        }
    }
    let mut tags = p.tags;
    // Sorted (the parser refused repeated keys), so that one series has one meta. The
    // first bytes decide most comparisons without a call to compare text.
    tags.sort_unstable_by(|a, b| {
        let (a, b) = (a.0.as_bytes(), b.0.as_bytes());
        a.first().cmp(&b.first()).then_with(|| a.cmp(b))
    });
    let fields = p.fields;
    docs.push(|w| {
        w.date(&names.time, ms)?;
        if !tags.is_empty() {
            w.document(&names.meta, |t| {
                tags.iter().try_for_each(|(k, v)| t.string(k, v))
            })?;
        }
        for i in distinct_fields(&fields) {
            write_field(w, &fields[i].0, &fields[i].1)?;
        }
        if sub_ms_ns != 0 {
            w.int32("ns", sub_ms_ns as i32)?;
        }
        Ok(())
    })
    .map_err(|BadKey| "invalid name: it holds a NUL byte".to_string())
}

/// The fields to write, by index: a repeated key keeps its first position and its last
/// value. Pairwise for the few fields of a usual point, by a map for many (a hostile line
/// of 100,000 fields stays linear).
fn distinct_fields(fields: &[(Cow<'_, str>, FieldValue<'_>)]) -> Vec<usize> {
    if fields.len() <= 32 {
        return (0..fields.len())
            .filter(|&i| !fields[..i].iter().any(|(k, _)| same_key(k, &fields[i].0)))
            .map(|i| {
                let key = &fields[i].0;
                fields
                    .iter()
                    .rposition(|(k, _)| same_key(k, key))
                    .unwrap_or(i)
            })
            .collect();
    }
    let mut by_key: HashMap<&str, (usize, usize)> = HashMap::with_capacity(fields.len());
    for (i, (k, _)) in fields.iter().enumerate() {
        by_key
            .entry(k.as_ref())
            .and_modify(|e| e.1 = i)
            .or_insert((i, i));
    }
    let mut order: Vec<(usize, usize)> = by_key.into_values().collect();
    order.sort_unstable();
    order.into_iter().map(|(_, last)| last).collect()
}

/// Whether two keys are the same, comparing their length and last byte before
/// their text (most keys of a point differ there).
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().last() == b.as_bytes().last() && a == b
}

/// The time and meta field names of a destination.
struct Names {
    time: String,
    meta: String,
}

fn write_field(w: &mut DocWriter, key: &str, v: &FieldValue) -> Result<(), BadKey> {
    match v {
        FieldValue::Float(f) => w.double(key, *f),
        FieldValue::Int(i) => w.int64(key, *i),
        FieldValue::UInt(u) => match i64::try_from(*u) {
            Ok(i) => w.int64(key, i),
            Err(_) => w.decimal128(key, decimal128_of(*u)),
        },
        FieldValue::Str(s) => w.string(key, s),
        FieldValue::Bool(b) => w.boolean(key, *b),
    }
}

/// An unsigned integer as an exact Decimal128 (IEEE 754-2008 BID: sign 0, biased
/// exponent 6176 for 10^0, the integer as the 113-bit coefficient).
fn decimal128_of(u: u64) -> bson::Decimal128 {
    let bits = (6176u128 << 113) | u128::from(u);
    bson::Decimal128::from_bytes(bits.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(keys: &[String]) -> Vec<(Cow<'_, str>, FieldValue<'static>)> {
        keys.iter()
            .enumerate()
            .map(|(i, k)| (Cow::Borrowed(k.as_str()), FieldValue::Int(i as i64)))
            .collect()
    }

    #[test]
    fn a_point_without_time_gets_the_arrival_time_truncated_to_the_precision() {
        for unit_ns in [
            1,
            1_000,
            1_000_000,
            1_000_000_000,
            60_000_000_000,
            3_600_000_000_000,
        ] {
            let step_ms = (unit_ns / 1_000_000).max(1);
            let before = bson::DateTime::now().timestamp_millis();
            let ms = arrival_ms(unit_ns);
            let after = bson::DateTime::now().timestamp_millis();
            assert_eq!(ms % step_ms, 0, "{unit_ns}");
            assert!(before - step_ms < ms && ms <= after, "{unit_ns}");
        }
    }

    #[test]
    fn consistency_is_any_one_quorum_or_all_in_any_case() {
        for ok in [
            None,
            Some(""),
            Some("any"),
            Some("ONE"),
            Some("Quorum"),
            Some("all"),
        ] {
            assert!(check_consistency(ok).is_ok(), "{ok:?}");
        }
        for bad in ["two", "al", " one"] {
            let e = check_consistency(Some(bad)).expect_err("refused");
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert_eq!(e.message, "invalid consistency level");
        }
    }

    #[test]
    fn a_repeated_field_keeps_its_first_position_and_last_value_however_many_fields() {
        let few: Vec<String> = ["a", "b", "a", "c", "b"].map(String::from).to_vec();
        assert_eq!(distinct_fields(&fields(&few)), vec![2, 4, 3]);
        // Past 32 fields the map gives the same answer as the pairwise search.
        let many: Vec<String> = (0..100).map(|i| format!("k{}", (i * 7) % 40)).collect();
        let f = fields(&many);
        let pairwise: Vec<usize> = (0..f.len())
            .filter(|&i| !f[..i].iter().any(|(k, _)| k == &f[i].0))
            .map(|i| f.iter().rposition(|(k, _)| k == &f[i].0).unwrap())
            .collect();
        assert_eq!(distinct_fields(&f), pairwise);
        assert_eq!(pairwise.len(), 40);
    }
}
