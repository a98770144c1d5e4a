//! `count`: documents matching a query, after skip and limit.

use super::planned::{parse_hint, ReadOpts};
use super::target::Target;
use super::Request;
use crate::error::CmdResult;
use crate::error::CommandError;
use crate::state::OpCounters;
use bson::{doc, Bson, Document};
use hourglass_catalog::Collection;
use hourglass_query::filter::Filter;
use hourglass_timeseries::exec::TsPlan;
use hourglass_timeseries::options::TimeseriesOptions;
use std::sync::Arc;

pub fn count(req: &Request) -> CmdResult {
    req.check_fields(&[
        "query",
        "limit",
        "skip",
        "hint",
        "collation",
        "fields",
        "readConcern",
    ])?;
    OpCounters::add(&req.state.opcounters.command, 1);
    let coll = req.collection()?;
    if super::views::is_view(req, &coll)? {
        return super::view_reads::count(req, &coll);
    }
    let filter = match req.opt_document("query")? {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    let skip = req.opt_i64("skip")?.unwrap_or(0).max(0) as usize;
    let limit = req
        .opt_i64("limit")?
        .map(|l| l.unsigned_abs() as usize)
        .filter(|&l| l > 0);
    let hint = parse_hint(req.body.get("hint"))?;
    let target = Target::resolve(req, &coll);
    if let (Target::TimeSeries { buckets, options }, None) = (&target, &hint) {
        let query = req.opt_document("query")?.cloned().unwrap_or_default();
        if let Some(matched) = ts_count(req, buckets, options, query)? {
            let n = matched
                .saturating_sub(skip)
                .min(limit.unwrap_or(usize::MAX));
            return Ok(doc! {"n": n as i32});
        }
    }
    if let Target::Regular(Some(c)) = &target {
        if super::fast_count::applies(req.opt_document("query")?, req.body.get("hint")) {
            *req.plan_summary.lock() = Some("RECORD_STORE_FAST_COUNT".to_string());
            let (n, _) = super::fast_count::count(c, skip as u64, limit.map(|l| l as u64))?;
            return Ok(doc! {"n": n as i32});
        }
    }
    let mut n = 0usize;
    let after = [doc! {"$count": "n"}];
    let opts = ReadOpts {
        sort: None,
        hint: hint.as_ref(),
        after: &after,
        ..Default::default()
    };
    for doc in target
        .scan_with(req, filter, req.opt_document("query")?, &opts)?
        .0
        .skip(skip)
    {
        doc?;
        n += 1;
        if limit.is_some_and(|l| n >= l) {
            break;
        }
    }
    Ok(doc! {"n": n as i32})
}

/// The measurements of a time-series collection matching `query`, counted over bucket
/// columns by the vectorized group (`$match` + `$group {_id: null, n: {$sum: 1}}`), not
/// document by document. `None` when that plan cannot take the whole count (under a
/// collation, or a filter it cannot split): the caller counts documents.
fn ts_count(
    req: &Request,
    buckets: &Arc<Collection>,
    options: &TimeseriesOptions,
    query: Document,
) -> Result<Option<usize>, CommandError> {
    let stages = [
        doc! {"$match": query},
        doc! {"$group": {"_id": null, "n": {"$sum": 1}}},
    ];
    let plan = TsPlan::new(&stages, options)?;
    if plan.consumed != stages.len() {
        return Ok(None);
    }
    *req.plan_summary.lock() = Some("COLLSCAN".to_string());
    let ex = req.state.timeseries.execute(buckets, options, &plan)?;
    let mut n = 0;
    for group in ex.rows.documents() {
        let group = group?;
        crate::operations::check_interrupt()?;
        n += match group.get("n") {
            Some(Bson::Int32(k)) => usize::try_from(*k).unwrap_or(0),
            Some(Bson::Int64(k)) => usize::try_from(*k).unwrap_or(0),
            _ => 0,
        };
    }
    Ok(Some(n))
}
