//! The archive mover: every `archiveMoverIntervalSecs` seconds (re-read each time) one
//! pass visits every time-series collection with an `archive` rule and moves up to
//! `archiveMoverMaxBucketsPerPass` of its old closed buckets to Parquet files
//! (`TimeseriesStore::archive_pass`). A pass that leaves eligible buckets behind asks
//! to run again at once, so a backlog drains without waiting, one bounded step (and one
//! short series lock) at a time. Before a collection's first pass in this process, files
//! a crash left unrecorded are deleted (`TimeseriesStore::archive_cleanup`).

use crate::state::ServerState;
use hourglass_timeseries::{archive_spec, options_of, MoverStage};

/// The mover stage a crash fail point names.
pub fn crash_point(name: &str) -> Option<MoverStage> {
    match name {
        "archiveMoverCrashBeforeCommit" => Some(MoverStage::FilesWritten),
        "archiveMoverCrashAfterCommit" => Some(MoverStage::Committed),
        _ => None,
    }
}

/// Turns a crash fail point on or off.
pub fn set_crash(state: &ServerState, stage: MoverStage, on: bool) {
    let mut at = state.archive.crash_at.lock();
    at.retain(|s| *s != stage);
    if on {
        at.push(stage);
    }
}

fn stop_at(state: &ServerState, stage: MoverStage) {
    if state.archive.crash_at.lock().contains(&stage) {
        tracing::error!(?stage, "archive mover fail point: aborting the process");
        std::process::abort();
    }
}

/// Runs one pass over every collection; returns whether some collection has more to
/// move right away.
pub fn run_pass(state: &ServerState) -> bool {
    if state.write_gate.is_locked() {
        return false;
    }
    let max = state
        .params
        .get_i64("archiveMoverMaxBucketsPerPass", 1000)
        .clamp(1, 1_000_000) as usize;
    let mut more = false;
    for (db, _) in state.catalog.databases() {
        for buckets in state.catalog.collections(&db) {
            let Some(options) = options_of(&buckets) else {
                continue;
            };
            let Some(spec) = archive_spec(&buckets, &options) else {
                continue;
            };
            let key = (buckets.id, spec.uri.clone());
            if !state.archive.cleaned.lock().contains(&key) {
                match state.timeseries.archive_cleanup(&buckets, &spec.uri) {
                    Ok(_) => {
                        state.archive.cleaned.lock().insert(key);
                    }
                    Err(e) => {
                        tracing::warn!(ns = %buckets.namespace(), error = %e, "cleaning the archive of unrecorded files failed; not archiving");
                        continue;
                    }
                }
            }
            let now = bson::DateTime::now().timestamp_millis();
            let stop_at = |stage| stop_at(state, stage);
            match state
                .timeseries
                .archive_pass(&buckets, &options, &spec, now, max, &stop_at)
            {
                Ok(outcome) => more |= outcome.more,
                Err(e) => {
                    tracing::warn!(ns = %buckets.namespace(), error = %e, "archive pass failed")
                }
            }
        }
    }
    more
}
