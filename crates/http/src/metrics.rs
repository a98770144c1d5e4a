//! `GET /metrics`: the server's own health in Prometheus' exposition format (OpenMetrics
//! text, encoded by `prometheus-client`). Counters and gauges are read from the server's
//! state at each scrape into a fresh registry; the command and journal-sync latency
//! histograms are the live ones the server records into.

use crate::auth::{forbidden, Caller};
use axum::extract::{Extension, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use hourglass_protocol::access::check::Tgt;
use hourglass_protocol::ServerState;
use hourglass_timeseries::{BucketStats, TimeseriesStore};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `GET /metrics`; with access control on, for users allowed `serverStatus`.
pub async fn metrics(
    State(state): State<Arc<ServerState>>,
    Extension(caller): Extension<Caller>,
) -> Response {
    if !caller.may(&state, "serverStatus", Tgt::Cluster) {
        return forbidden("not authorized to read the server's metrics");
    }
    // Bucket counts read storage: off the async runtime.
    match tokio::task::spawn_blocking(move || render(&state)).await {
        Ok(Ok(text)) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

type Labeled<M> = Family<Vec<(&'static str, LabelValue)>, M>;

/// A label value escaped as the exposition formats require (backslash, double quote and
/// line feed as `\\`, `\"` and `\n`): `prometheus-client` writes values as they are,
/// and a collection name may hold any of them.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct LabelValue(String);

impl EncodeLabelValue for LabelValue {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

fn label(name: &'static str, value: impl Into<String>) -> Vec<(&'static str, LabelValue)> {
    vec![(name, LabelValue(value.into()))]
}

fn counter(r: &mut Registry, name: &str, help: &str, v: u64) {
    r.register(name, help, ConstCounter::new(v));
}

fn gauge(r: &mut Registry, name: &str, help: &str, v: i64) {
    r.register(name, help, ConstGauge::new(v));
}

fn labeled_counters<'a>(
    r: &mut Registry,
    name: &str,
    help: &str,
    label_name: &'static str,
    values: impl IntoIterator<Item = (&'a str, u64)>,
) {
    let family = Labeled::<Counter>::default();
    for (l, v) in values {
        family.get_or_create(&label(label_name, l)).inc_by(v);
    }
    r.register(name, help, family);
}

fn render(state: &ServerState) -> Result<String, std::fmt::Error> {
    let mut r = Registry::default();
    let c = &state.connections;
    gauge(
        &mut r,
        "hourglass_connections_current",
        "Client connections open",
        c.current.load(Ordering::Relaxed),
    );
    gauge(
        &mut r,
        "hourglass_connections_active",
        "Client connections running a command",
        c.active.load(Ordering::Relaxed),
    );
    counter(
        &mut r,
        "hourglass_connections_created",
        "Client connections accepted since start",
        c.total_created.load(Ordering::Relaxed),
    );
    counter(
        &mut r,
        "hourglass_connections_rejected",
        "Connections closed at accept because maxConns were open",
        c.rejected.load(Ordering::Relaxed),
    );
    let o = &state.opcounters;
    labeled_counters(
        &mut r,
        "hourglass_opcounters",
        "Operations since start, by type (serverStatus.opcounters)",
        "type",
        [
            ("insert", &o.insert),
            ("query", &o.query),
            ("update", &o.update),
            ("delete", &o.delete),
            ("getmore", &o.getmore),
            ("command", &o.command),
        ]
        .map(|(k, v)| (k, v.load(Ordering::Relaxed))),
    );
    r.register(
        "hourglass_command_duration_seconds",
        "Time each command took, by command",
        state.command_latency.clone(),
    );
    gauge(
        &mut r,
        "hourglass_cursors_open",
        "Cursors open",
        state.cursors.len() as i64,
    );
    gauge(
        &mut r,
        "hourglass_uptime_seconds",
        "Seconds since the server started",
        state.started.elapsed().as_secs() as i64,
    );
    bucket_catalog(&mut r, state);
    timeseries_collections(&mut r, state);
    let engine = state.catalog.engine();
    gauge(
        &mut r,
        "hourglass_storage_bytes",
        "Bytes the storage engine holds on disk",
        engine.disk_space() as i64,
    );
    counter(
        &mut r,
        "hourglass_journal_syncs",
        "Journal syncs (one per group of commits)",
        engine.sync_count(),
    );
    r.register(
        "hourglass_journal_sync_duration_seconds",
        "Time each journal sync took",
        engine.sync_latency().clone(),
    );
    counter(
        &mut r,
        "hourglass_ttl_passes",
        "Passes of the TTL monitor",
        state.ttl.passes.load(Ordering::Relaxed),
    );
    counter(
        &mut r,
        "hourglass_ttl_deleted_documents",
        "Documents the TTL monitor deleted",
        state.ttl.deleted_documents.load(Ordering::Relaxed),
    );
    let mut out = String::new();
    encode(&mut out, &r)?;
    Ok(out)
}

/// The bucket catalog over all time-series collections: open buckets, their memory,
/// and why buckets were closed or archived.
fn bucket_catalog(r: &mut Registry, state: &ServerState) {
    let summary = state.timeseries.catalog_summary();
    gauge(
        r,
        "hourglass_bucket_catalog_open_buckets",
        "Open buckets",
        summary.open_buckets as i64,
    );
    gauge(
        r,
        "hourglass_bucket_catalog_memory_bytes",
        "Memory the open buckets take",
        summary.memory_usage as i64,
    );
    let total = BucketStats::sum(summary.stats.iter().map(|(_, s)| s));
    let n = |k: &str| total.get_i64(k).unwrap_or(0).max(0) as u64;
    labeled_counters(
        r,
        "hourglass_bucket_catalog_buckets_closed",
        "Buckets closed, by reason",
        "reason",
        [
            ("count", "Count"),
            ("size", "Size"),
            ("schema_change", "SchemaChange"),
            ("time_forward", "TimeForward"),
            ("time_backward", "TimeBackward"),
            ("memory_threshold", "MemoryThreshold"),
            ("reopening", "Reopening"),
            ("cache_pressure", "CachePressure"),
        ]
        .map(|(label, key)| (label, n(&format!("numBucketsClosedDueTo{key}")))),
    );
    labeled_counters(
        r,
        "hourglass_bucket_catalog_buckets_archived",
        "Buckets archived (kept for reopening), by reason",
        "reason",
        [
            ("memory_threshold", "MemoryThreshold"),
            ("time_backward", "TimeBackward"),
        ]
        .map(|(label, key)| (label, n(&format!("numBucketsArchivedDueTo{key}")))),
    );
    counter(
        r,
        "hourglass_bucket_catalog_buckets_reopened",
        "Closed buckets reopened for a late measurement",
        n("numBucketsReopened"),
    );
    let committed = summary
        .stats
        .iter()
        .map(|(ns, s)| (ns.as_str(), s.num_measurements_committed));
    labeled_counters(
        r,
        "hourglass_timeseries_measurements_committed",
        "Measurements inserted since start, by time-series collection",
        "namespace",
        committed,
    );
}

/// Each time-series collection's buckets and their bytes as stored, and its archived
/// files, bytes and measurements (collections with archived files only).
fn timeseries_collections(r: &mut Registry, state: &ServerState) {
    let buckets = Labeled::<Gauge>::default();
    let bytes = Labeled::<Gauge>::default();
    let archive = [
        Labeled::<Gauge>::default(),
        Labeled::<Gauge>::default(),
        Labeled::<Gauge>::default(),
    ];
    for db in state.catalog.database_names() {
        for c in state.catalog.collections(&db) {
            let ns = c.namespace();
            let Some(view) = ns.coll.strip_prefix("system.buckets.") else {
                continue;
            };
            let Ok((n, b)) = TimeseriesStore::bucket_summary(&c) else {
                continue;
            };
            let label = label("namespace", format!("{db}.{view}"));
            buckets.get_or_create(&label).set(n as i64);
            bytes.get_or_create(&label).set(b as i64);
            if let Ok(st) = TimeseriesStore::archive_stats(&c) {
                if st.files > 0 {
                    for (g, v) in archive.iter().zip([st.files, st.bytes, st.measurements]) {
                        g.get_or_create(&label).set(v as i64);
                    }
                }
            }
        }
    }
    let [files, archived_bytes, measurements] = archive;
    r.register(
        "hourglass_archive_files",
        "Archived Parquet files of each time-series collection",
        files,
    );
    r.register(
        "hourglass_archive_bytes",
        "Bytes of each time-series collection's archived files",
        archived_bytes,
    );
    r.register(
        "hourglass_archive_measurements",
        "Measurements in each time-series collection's archived files",
        measurements,
    );
    r.register(
        "hourglass_timeseries_buckets",
        "Buckets of each time-series collection",
        buckets,
    );
    r.register(
        "hourglass_timeseries_bucket_bytes",
        "Bytes of each time-series collection's buckets as stored",
        bytes,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslashes_quotes_and_line_feeds() {
        let mut r = Registry::default();
        let family = Labeled::<Gauge>::default();
        family
            .get_or_create(&label("namespace", "db.q\"u\\o\nte"))
            .set(1);
        r.register("hourglass_test", "A test", family);
        let mut out = String::new();
        encode(&mut out, &r).expect("encodes");
        assert!(
            out.contains(r#"hourglass_test{namespace="db.q\"u\\o\nte"} 1"#),
            "{out}"
        );
    }
}
