//! `aggregate` on a time-series collection: the leading `$match` and a following
//! `$group` are planned over the buckets (pruning, column selection, vectorized
//! grouping: `hourglass_timeseries::exec`); the query layer runs the remaining stages.
//! `explain` shows what was pushed down and, after running the scan, what it examined.

use super::cursor_reply::{cursor_batch_size, row_cursor_reply};
use super::target::ts_rows;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_catalog::Collection;
use hourglass_query::pipeline::Pipeline;
use hourglass_timeseries::{TimeseriesOptions, TsPlan};
use std::sync::Arc;

/// A leading `$geoNear` whose `query` came from the `$match` stages after it
/// (`geo_index::fold_following_matches`): the query goes first, as a `$match` the bucket
/// scan prunes with, and the `$geoNear` orders what it lets through.
fn split_geo_near_query(stages: &[Document]) -> Option<Vec<Document>> {
    let spec = stages.first()?.get_document("$geoNear").ok()?;
    let query = spec.get_document("query").ok()?.clone();
    let mut geo_near = spec.clone();
    geo_near.remove("query");
    let mut out = vec![doc! {"$match": query}, doc! {"$geoNear": geo_near}];
    out.extend_from_slice(&stages[1..]);
    Some(out)
}

pub fn aggregate_view(
    req: &Request,
    coll: &str,
    buckets: &Arc<Collection>,
    options: &TimeseriesOptions,
    stages: &[Document],
    // Some(whether to run the pipeline) for an explain.
    explain: Option<bool>,
    cursor_opts: Option<&Document>,
) -> CmdResult {
    let ctx = super::pipeline_context::CatalogContext::new(req);
    let split;
    let stages = match split_geo_near_query(stages) {
        Some(s) => {
            split = s;
            &split[..]
        }
        None => stages,
    };
    let mut plan = TsPlan::new(stages, options)?;
    plan.limits = ctx.run_options()?.limits;
    let rest = Pipeline::parse(&stages[plan.consumed..])?;
    let store = &req.state.timeseries;
    if let Some(execute) = explain {
        let (run, counters) = match execute {
            true => {
                let (run, counters) = run_for_explain(req, buckets, options, &plan, &rest)?;
                (Some(run), counters)
            }
            // queryPlanner: the bucket access path is chosen; nothing is read or run.
            false => (
                None,
                store.scan(buckets, options, &plan.predicate)?.counters,
            ),
        };
        return Ok(explain_reply(
            req,
            buckets,
            options,
            &plan,
            stages,
            run.as_ref(),
            &counters,
        ));
    }
    // With nothing left to run, measurements stream to the cursor bucket by bucket, as
    // BSON written from the columns when the reply goes on the wire.
    let nothing_left = stages.len() == plan.consumed;
    plan.raw_output = nothing_left && req.raw_batch.is_some();
    let ex = store.execute(buckets, options, &plan)?;
    let output = if nothing_left {
        ts_rows(ex.rows)
    } else {
        let input = ex.rows.documents().collect::<Result<Vec<Document>, _>>()?;
        crate::cursor::rows(Box::new(
            rest.run_with(input, &ctx.run_options()?)?
                .into_iter()
                .map(Ok),
        ))
    };
    row_cursor_reply(
        req,
        format!("{}.{coll}", req.db),
        output,
        cursor_batch_size(req, cursor_opts)?,
        false,
    )
}

/// Runs the pipeline for its explain: the scan with what was pushed into it, then the
/// stages after it (their output is counted, not returned), except a pipeline that
/// writes: explain never writes.
fn run_for_explain(
    req: &Request,
    buckets: &Arc<Collection>,
    options: &TimeseriesOptions,
    plan: &TsPlan,
    rest: &Pipeline,
) -> Result<(ExplainRun, Arc<hourglass_timeseries::ScanCounters>), CommandError> {
    let started = std::time::Instant::now();
    let ex = req.state.timeseries.execute(buckets, options, plan)?;
    let input = ex.rows.documents().collect::<Result<Vec<Document>, _>>()?;
    let unpacked = input.len();
    let returned = if rest.writes() {
        None
    } else {
        let ctx = super::pipeline_context::CatalogContext::new(req);
        Some(rest.run_with(input, &ctx.run_options()?)?.len())
    };
    let run = ExplainRun {
        unpacked,
        returned,
        millis: started.elapsed().as_millis() as i64,
    };
    Ok((run, ex.counters))
}

/// What running a pipeline for explain produced.
struct ExplainRun {
    /// Measurements the bucket scan (and the stages pushed into it) produced.
    unpacked: usize,
    /// Documents the whole pipeline returned (`None` when it was not run to the end).
    returned: Option<usize>,
    millis: i64,
}

fn explain_reply(
    req: &Request,
    buckets: &Collection,
    options: &TimeseriesOptions,
    plan: &TsPlan,
    stages: &[Document],
    // `None` at queryPlanner verbosity: nothing ran, so no counts are shown.
    run: Option<&ExplainRun>,
    counters: &hourglass_timeseries::ScanCounters,
) -> Document {
    use hourglass_timeseries::ScanCounters as C;
    let pushed = plan.explain(run.map(|_| counters));
    let examined = C::get(&counters.buckets_examined) as i64;
    let index = C::get(&counters.used_meta_index) > 0;
    let winning = if index {
        let meta = options.meta_field.clone().unwrap_or_default();
        doc! {"stage": "FETCH", "inputStage": {"stage": "IXSCAN", "indexName": format!("{meta}_1_{}_1", options.time_field), "keyPattern": {"meta": 1, format!("control.min.{}", options.time_field): 1, format!("control.max.{}", options.time_field): 1}}}
    } else {
        doc! {"stage": "COLLSCAN", "direction": "forward"}
    };
    let mut unpack = doc! {
        "timeField": options.time_field.clone(),
        "bucketMaxSpanSeconds": options.bucket_max_span_seconds,
    };
    if let Some(mf) = &options.meta_field {
        unpack.insert("metaField", mf.clone());
    }
    unpack.extend(pushed);
    if let Some(run) = run {
        unpack.insert("nReturned", run.unpacked as i64);
    }
    let query_planner = doc! {
        // The buckets read, also when the aggregate names a view over the collection.
        "namespace": buckets.namespace().to_string(),
        "winningPlan": winning,
        "rejectedPlans": [],
    };
    let mut cursor = doc! {"queryPlanner": query_planner.clone()};
    if run.is_some() {
        cursor.insert(
            "executionStats",
            doc! {
                "executionSuccess": true,
                "nReturned": C::get(&counters.buckets_returned) as i64,
                "totalKeysExamined": if index { examined } else { 0 },
                "totalDocsExamined": examined,
            },
        );
    }
    let mut out_stages = vec![
        Bson::Document(doc! {"$cursor": cursor}),
        Bson::Document(doc! {"$_internalUnpackBucket": unpack}),
    ];
    out_stages.extend(stages[plan.consumed..].iter().cloned().map(Bson::Document));
    // Tools that read only the top-level sections (mongosh's and Compass's summaries)
    // find the bucket access path and the whole pipeline's counts there.
    let mut reply = doc! {
        "explainVersion": "1",
        "queryPlanner": query_planner,
        "stages": out_stages,
    };
    if let Some((n, run)) = run.and_then(|r| Some((r.returned?, r))) {
        reply.insert(
            "executionStats",
            doc! {
                "executionSuccess": true,
                "nReturned": n as i64,
                "executionTimeMillis": run.millis,
                "totalKeysExamined": if index { examined } else { 0 },
                "totalDocsExamined": examined,
            },
        );
    }
    reply.insert("command", req.body.clone());
    reply.insert(
        "serverInfo",
        doc! {"host": req.state.host.clone(), "version": super::diagnostics::COMPAT_VERSION},
    );
    reply
}
