//! `profile`: reads and sets a database's profiling level and filter, and the
//! server-wide `slowms` and `sampleRate` (see `crate::profiler`).

use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson};
use hourglass_query::filter::Filter;
use hourglass_query::num::Num;

pub fn profile(req: &Request) -> CmdResult {
    req.check_fields(&["profile", "slowms", "sampleRate", "filter"])?;
    let level = match req.body.get("profile").and_then(super::args::as_i64) {
        Some(l @ -1..=2) => l as i32,
        _ => {
            return Err(CommandError::new(
                2,
                format!(
                    "Invalid profiling level: {}; it must be -1 (read the settings), 0, 1 or 2",
                    req.body
                        .get("profile")
                        .map_or("missing".to_string(), |v| v.to_string())
                ),
            ))
        }
    };
    let slowms = match req.body.get("slowms") {
        None => None,
        Some(v) => Some(
            super::args::as_i64(v)
                .ok_or_else(|| CommandError::type_mismatch("'slowms' must be a number"))?,
        ),
    };
    let sample_rate = match req.body.get("sampleRate") {
        None => None,
        Some(v) => match Num::from_bson(v).map(Num::as_f64) {
            Some(r) if (0.0..=1.0).contains(&r) => Some(r),
            _ => {
                return Err(CommandError::new(
                    2,
                    "'sampleRate' must be between 0.0 and 1.0 inclusive",
                ))
            }
        },
    };
    let filter = match req.body.get("filter") {
        None => None,
        Some(Bson::String(s)) if s == "unset" => Some(None),
        Some(Bson::Document(d)) => Some(Some((d.clone(), Filter::parse(d)?))),
        Some(other) => {
            return Err(CommandError::type_mismatch(format!(
                "'filter' must be an object or the string 'unset', not {other}"
            )))
        }
    };
    let profiler = &req.state.profiler;
    let before = profiler.settings(&req.db);
    let mut reply = doc! {
        "was": before.level,
        "slowms": profiler.slowms(),
        "sampleRate": profiler.sample_rate(),
    };
    if let Some((f, _)) = &before.filter {
        reply.insert("filter", f.clone());
    }
    let level = (level >= 0).then_some(level);
    profiler.set(&req.db, level, slowms, sample_rate, filter);
    if profiler.settings(&req.db).filter.is_some() {
        reply.insert(
            "note",
            "When a filter expression is set, slowms and sampleRate are not used for profiling and slow-query log lines.",
        );
    }
    Ok(reply)
}
