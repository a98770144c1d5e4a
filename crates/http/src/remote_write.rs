//! Prometheus remote write 1.0: `POST /api/v1/write[?db=]`, a snappy-compressed protobuf
//! `prometheus.WriteRequest`.
//!
//! Samples go to the time-series collection `<db>.samples` (`db` defaults to
//! `prometheus`), created on first write with `timeField: "time"` and
//! `metaField: "labels"`: one document `{time, labels: {__name__, ...}, value}` per
//! sample, the value bit for bit (NaN and the staleness marker included). Metric
//! metadata (type, help, unit) is upserted into the regular collection `<db>.metadata`,
//! one document per metric family (`_id` is the family name).
//!
//! Series are checked as Prometheus' own receiver checks them: labels with an empty value
//! are absent, and a series without a metric name (`__name__`), with an empty label name
//! or with a label name twice is not written. Exemplars and native histogram samples are
//! not stored: they are counted and logged, and the float samples of their series are
//! written (Prometheus' receiver too only logs exemplars it cannot store).
//!
//! Status codes follow the spec so that Prometheus retries only what may succeed later:
//! 204 written; 400 for a body that cannot be decoded or for series or samples refused
//! (after writing the others), which Prometheus drops; 415 for remote write 2.0; 503 on a
//! full disk and 500 on a storage failure, which Prometheus retries.

use crate::auth::Caller;
use crate::body::{self, BodyError};
use crate::ingest::{self, IngestError};
use crate::measurement_bson::DocBuffer;
use axum::body::Body;
use axum::extract::{Extension, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bson::{doc, Document};
use hourglass_protocol::ServerState;
use prost::Message;
use std::collections::HashMap;
use std::sync::Arc;

/// `prometheus.WriteRequest` (remote-write 1.0; field numbers from Prometheus'
/// `prompb/remote.proto` and `prompb/types.proto`).
#[derive(Clone, PartialEq, Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
    #[prost(message, repeated, tag = "3")]
    pub metadata: Vec<MetricMetadata>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// Exemplars and native histograms are messages; they are kept undecoded since
    /// only how many were sent matters (they are not stored).
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub exemplars: Vec<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "4")]
    pub histograms: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct MetricMetadata {
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    #[prost(string, tag = "2")]
    pub metric_family_name: String,
    #[prost(string, tag = "4")]
    pub help: String,
    #[prost(string, tag = "5")]
    pub unit: String,
}

/// `MetricMetadata.MetricType` by number.
const METRIC_TYPES: [&str; 8] = [
    "unknown",
    "counter",
    "gauge",
    "histogram",
    "gaugehistogram",
    "summary",
    "info",
    "stateset",
];

fn reply(status: StatusCode, message: String) -> Response {
    if status.is_server_error() {
        tracing::warn!(status = %status, error = %message, "remote write failed");
    }
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

fn ingest_status(e: &IngestError) -> StatusCode {
    match e {
        IngestError::DatabaseNotFound(_) | IngestError::Invalid(_) => StatusCode::BAD_REQUEST,
        IngestError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        IngestError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        IngestError::Forbidden(_) => StatusCode::FORBIDDEN,
    }
}

pub async fn write(
    State(state): State<Arc<ServerState>>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.contains("io.prometheus.write.v2") {
        return reply(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "remote write 2.0 is not supported; send prometheus.WriteRequest (remote write 1.0)"
                .into(),
        );
    }
    match body::content_encoding(&headers).as_deref() {
        None | Some("snappy") => {}
        Some(other) => {
            return reply(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                "unsupported Content-Encoding {other}: remote write bodies are snappy-compressed"
            ),
            )
        }
    }
    let db = q
        .get("db")
        .filter(|d| !d.is_empty())
        .cloned()
        .unwrap_or_else(|| "prometheus".into());
    let limit = body::limit(&state);
    let decoded = match body::read(body, limit).await {
        Ok(raw) => body::decode_snappy(&raw, limit),
        Err(e) => Err(e),
    };
    let request = match decoded {
        Ok(bytes) => WriteRequest::decode(&bytes[..]).map_err(|e| e.to_string()),
        Err(BodyError::TooLarge(n)) => {
            return reply(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body is over the {n} byte limit"),
            )
        }
        Err(e) => Err(e.to_string()),
    };
    let mut request = match request {
        Ok(r) => r,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                format!("cannot decode the write request: {e}"),
            )
        }
    };
    let invalid = keep_valid_series(&mut request);
    let outcome = tokio::task::spawn_blocking(move || store(&state, &caller, &db, request)).await;
    match outcome {
        Ok(Ok(rejected)) if rejected.is_empty() && invalid.is_empty() => {
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(Ok(rejected)) => {
            let mut problems = Vec::new();
            if let Some(first) = invalid.first() {
                problems.push(format!(
                    "{} series with invalid labels not written; first: {first}",
                    invalid.len()
                ));
            }
            if let Some(first) = rejected.first() {
                problems.push(format!(
                    "{} samples refused; first: {first}",
                    rejected.len()
                ));
            }
            reply(StatusCode::BAD_REQUEST, problems.join("; "))
        }
        Ok(Err(e)) => reply(ingest_status(&e), e.to_string()),
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Drops the series Prometheus' receiver refuses (see [`check_labels`]) and returns why
/// each was refused; logs the exemplars and native histogram samples, which are not
/// stored, by count.
fn keep_valid_series(request: &mut WriteRequest) -> Vec<String> {
    let (mut exemplars, mut histograms) = (0, 0);
    let mut invalid = Vec::new();
    request.timeseries.retain_mut(|ts| {
        exemplars += ts.exemplars.len();
        histograms += ts.histograms.len();
        match check_labels(&mut ts.labels) {
            Ok(()) => true,
            Err(reason) => {
                invalid.push(reason);
                false
            }
        }
    });
    if exemplars > 0 {
        tracing::debug!(exemplars, "remote write: exemplars are not stored");
    }
    if histograms > 0 {
        tracing::warn!(
            histograms,
            "remote write: native histogram samples are not stored (turn off send_native_histograms)"
        );
    }
    if let Some(first) = invalid.first() {
        tracing::warn!(series = invalid.len(), first = %first, "remote write: series with invalid labels not stored");
    }
    invalid
}

/// Sorts a series' labels by name after dropping those with an empty value (absent, for
/// Prometheus); refuses them without a metric name, with an empty name or a name twice.
fn check_labels(labels: &mut Vec<Label>) -> Result<(), String> {
    labels.retain(|l| !l.value.is_empty());
    labels.sort_by(|a, b| a.name.cmp(&b.name));
    let shown = || {
        let pairs: Vec<String> = labels
            .iter()
            .map(|l| format!("{}={:?}", l.name, l.value))
            .collect();
        format!("{{{}}}", pairs.join(", "))
    };
    if !labels.iter().any(|l| l.name == "__name__") || labels.iter().any(|l| l.name.is_empty()) {
        return Err(format!("invalid metric name or labels, got {}", shown()));
    }
    if let Some(w) = labels.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(format!(
            "invalid labels for series, labels {}, duplicated label {}",
            shown(),
            w[0].name
        ));
    }
    Ok(())
}

/// Writes the samples and the metadata; returns why each refused sample was refused.
fn store(
    state: &Arc<ServerState>,
    caller: &Caller,
    db: &str,
    request: WriteRequest,
) -> Result<Vec<String>, IngestError> {
    let mut rejected = Vec::new();
    let samples: usize = request.timeseries.iter().map(|t| t.samples.len()).sum();
    if samples > 0 {
        let dest = ingest::destination(state, caller, db, "samples", "labels")?;
        let time_field = dest.options.time_field.clone();
        let meta_field = dest
            .options
            .meta_field
            .clone()
            .unwrap_or_else(|| "labels".into());
        let mut docs = DocBuffer::with_capacity(samples, samples * 64);
        for ts in request.timeseries {
            // Sorted by `check_labels`.
            let labels = ts.labels;
            for s in ts.samples {
                let written = docs.push(|w| {
                    w.date(&time_field, s.timestamp)?;
                    w.document(&meta_field, |m| {
                        labels.iter().try_for_each(|l| m.string(&l.name, &l.value))
                    })?;
                    w.double("value", s.value)
                });
                if written.is_err() {
                    rejected.push("label name holds a NUL byte".to_string());
                }
            }
        }
        let out = ingest::insert(state, &dest, &docs)?;
        rejected.extend(out.rejected.into_iter().map(|(_, e)| e));
    }
    if !request.metadata.is_empty() {
        let updates: Vec<Document> = request
            .metadata
            .into_iter()
            .map(|m| {
                let kind = usize::try_from(m.r#type)
                    .ok()
                    .and_then(|i| METRIC_TYPES.get(i))
                    .copied()
                    .unwrap_or("unknown");
                doc! {
                    "q": {"_id": &m.metric_family_name},
                    "u": {"_id": &m.metric_family_name, "type": kind, "help": m.help, "unit": m.unit},
                    "upsert": true,
                }
            })
            .collect();
        let reply = ingest::run_command(
            state,
            caller,
            db,
            doc! {"update": "metadata", "updates": updates, "ordered": false},
        )?;
        if let Ok(errors) = reply.get_array("writeErrors") {
            rejected.extend(errors.iter().map(|e| format!("metadata: {e}")));
        }
    }
    Ok(rejected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<Label> {
        pairs
            .iter()
            .map(|(n, v)| Label {
                name: n.to_string(),
                value: v.to_string(),
            })
            .collect()
    }

    fn names(labels: &[Label]) -> Vec<&str> {
        labels.iter().map(|l| l.name.as_str()).collect()
    }

    #[test]
    fn labels_are_sorted_and_those_with_an_empty_value_dropped() {
        let mut l = labels(&[("job", "j"), ("empty", ""), ("__name__", "up")]);
        assert_eq!(check_labels(&mut l), Ok(()));
        assert_eq!(names(&l), vec!["__name__", "job"]);
    }

    #[test]
    fn a_series_without_a_name_with_an_empty_label_name_or_a_name_twice_is_refused() {
        for bad in [
            labels(&[]),
            labels(&[("job", "j")]),
            labels(&[("__name__", ""), ("job", "j")]),
            labels(&[("__name__", "up"), ("", "x")]),
            labels(&[("__name__", "up"), ("job", "a"), ("job", "b")]),
        ] {
            let shown = format!("{:?}", names(&bad));
            assert!(check_labels(&mut bad.clone()).is_err(), "{shown}");
        }
        let mut twice = labels(&[("job", "a"), ("__name__", "up"), ("job", "b")]);
        let e = check_labels(&mut twice).expect_err("refused");
        assert!(e.ends_with("duplicated label job"), "{e}");
    }

    #[test]
    fn invalid_series_are_dropped_and_exemplars_and_histograms_do_not_drop_a_series() {
        let series = |l: Vec<Label>, extra: bool| TimeSeries {
            labels: l,
            samples: vec![Sample {
                value: 1.0,
                timestamp: 1,
            }],
            exemplars: if extra { vec![vec![1]] } else { vec![] },
            histograms: if extra { vec![vec![2]] } else { vec![] },
        };
        let mut request = WriteRequest {
            timeseries: vec![
                series(labels(&[("__name__", "a")]), true),
                series(labels(&[("job", "nameless")]), false),
                series(labels(&[("__name__", "b")]), false),
            ],
            metadata: vec![],
        };
        let invalid = keep_valid_series(&mut request);
        assert_eq!(invalid.len(), 1);
        let kept: Vec<&str> = request
            .timeseries
            .iter()
            .map(|t| t.labels[0].value.as_str())
            .collect();
        assert_eq!(kept, vec!["a", "b"]);
    }
}
