//! The HTTP front end, off unless `--httpPort` is given: InfluxDB line-protocol writes
//! (1.x `/write`, 2.x `/api/v2/write`, with `/ping`, `/health`, `/ready`, `/query` for
//! database DDL and `/api/v2/buckets`), Prometheus remote write (`/api/v1/write`), the
//! server's own metrics (`/metrics`) and a web console (`/console`) that browses the
//! time-series collections and charts their series. Writes go through the same bucket
//! catalog and group commit as MongoDB inserts and are durable before the success status
//! is sent.
//!
//! With `--auth`, [`auth`] authenticates every request but the health checks and each
//! runs as its user. Routes by module: [`influx`] (line-protocol writes), [`influx_admin`] (database DDL
//! and health checks), [`remote_write`] (Prometheus), [`metrics`], [`console`] (the console's
//! page and files) and [`console_api`] (its read-only command API); [`ingest`] is what both write paths share (database existence, creating
//! the time-series collection, inserting), [`measurement_bson`] writes their measurement documents as BSON bytes, [`body`] reads a request body within the size
//! limit and undoes its content encoding.

mod auth;
mod body;
mod console;
mod console_api;
mod influx;
mod influx_admin;
mod ingest;
pub mod line_protocol;
mod measurement_bson;
mod metrics;
mod remote_write;

use axum::routing::{get, post};
use axum::Router;
use hourglass_protocol::ServerState;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The router of every HTTP route.
pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/write", post(influx::write_v1))
        .route("/api/v2/write", post(influx::write_v2))
        .route("/query", get(influx_admin::query).post(influx_admin::query))
        .route(
            "/api/v2/buckets",
            get(influx_admin::list_buckets).post(influx_admin::create_bucket),
        )
        .route("/api/v2/orgs", get(influx_admin::orgs))
        .route("/ping", get(influx_admin::ping).head(influx_admin::ping))
        .route("/health", get(influx_admin::health))
        .route("/ready", get(influx_admin::ready))
        .route("/api/v1/write", post(remote_write::write))
        .route("/metrics", get(metrics::metrics))
        .merge(console::routes(state.clone()))
        // Bodies are read by `body::read` against `httpMaxBodyBytes`, which a client may
        // change at run time with `setParameter`.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .with_state(state)
}

/// Serves HTTP on `listener` until `stop` turns true; requests in flight finish first.
pub async fn serve(
    listener: TcpListener,
    state: Arc<ServerState>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
}
