//! `aggregate` on a time-series collection: the leading `$match` and a following
//! `$group` are planned over the buckets (pruning, column selection, vectorized
//! grouping: `hourglass_timeseries::exec`); the query layer runs the remaining stages.
//! `explain` shows what was pushed down and, after running the scan, what it examined.

use super::cursor_reply::{cursor_batch_size, row_cursor_reply};
use super::explain_stages::{millis_since, run_counted, with_counts};
use super::explain_ts;
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
                let (run, counters) = run_for_explain(req, buckets, options, &plan, stages)?;
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

/// The number of leading `$match` stages (merged into the plan's filter; the stages
/// after them are shown after the unpacking).
fn leading_matches(stages: &[Document]) -> usize {
    stages
        .iter()
        .take_while(|s| s.len() == 1 && matches!(s.get("$match"), Some(Bson::Document(_))))
        .count()
}

/// Runs the pipeline for its explain: the scan with what was pushed into it, then the
/// stages after it one by one, each counted (their output is not returned), except a
/// stage that writes: explain never writes. Stages the scan ran itself (a vectorized
/// `$group`, a columnar `$project`/`$sort`/`$limit`, ...) are counted by running the
/// pipeline up to each of them.
fn run_for_explain(
    req: &Request,
    buckets: &Arc<Collection>,
    options: &TimeseriesOptions,
    plan: &TsPlan,
    stages: &[Document],
) -> Result<(ExplainRun, Arc<hourglass_timeseries::ScanCounters>), CommandError> {
    let started = std::time::Instant::now();
    let ex = req.state.timeseries.execute(buckets, options, plan)?;
    let counters = ex.counters.clone();
    let rows = ex.rows.documents().collect::<Result<Vec<Document>, _>>()?;
    let scan_millis = millis_since(started);
    let ctx = super::pipeline_context::CatalogContext::new(req);
    let opts = ctx.run_options()?;
    let shown = leading_matches(stages).min(plan.consumed);
    let mut counted = Vec::new();
    let unpacked = if plan.consumed > shown {
        let mut count = stages[..shown].to_vec();
        count.push(doc! {"$group": {"_id": Bson::Null, "n": {"$sum": 1}}});
        let out = prefix_output(req, buckets, options, &count, &opts)?;
        out.first()
            .and_then(|d| d.get("n"))
            .and_then(super::args::as_i64)
            .unwrap_or(0) as usize
    } else {
        rows.len()
    };
    // The stages the scan absorbed, counted by what each prefix of the pipeline outputs.
    // The columnar executor holds their state in memory: nothing spills.
    for i in shown..plan.consumed {
        let prefix;
        let output = match i + 1 == plan.consumed {
            true => &rows,
            false => {
                prefix = prefix_output(req, buckets, options, &stages[..=i], &opts)?;
                &prefix
            }
        };
        let mut stage = stages[i].clone();
        // A sort outputs the documents it sorted.
        let sorted = super::explain_stages::sorted_bytes(&stage, output);
        super::explain_stages::add_stage_stats(&mut stage, sorted, output, Default::default());
        counted.push(Bson::Document(with_counts(
            stage,
            output.len(),
            scan_millis,
        )));
    }
    let (rest, returned) = run_counted(&stages[plan.consumed..], rows, &opts, started)?;
    counted.extend(rest);
    let run = ExplainRun {
        unpacked,
        returned,
        // The stages the scan absorbed are printed as mongod prints them too.
        stages: super::explain_stages::printed(counted),
        scan_millis,
        millis: millis_since(started),
    };
    Ok((run, counters))
}

/// What the pipeline `stages` outputs, planned over the buckets as a read runs it.
fn prefix_output(
    req: &Request,
    buckets: &Arc<Collection>,
    options: &TimeseriesOptions,
    stages: &[Document],
    opts: &hourglass_query::pipeline::RunOptions<'_>,
) -> Result<Vec<Document>, CommandError> {
    let mut plan = TsPlan::new(stages, options)?;
    plan.limits = opts.limits;
    let ex = req.state.timeseries.execute(buckets, options, &plan)?;
    let rows = ex.rows.documents().collect::<Result<Vec<Document>, _>>()?;
    Ok(Pipeline::parse(&stages[plan.consumed..])?.run_with(rows, opts)?)
}

/// What running a pipeline for explain produced.
struct ExplainRun {
    /// Measurements the unpacking (with the event filter) produced.
    unpacked: usize,
    /// Documents the whole pipeline returned (`None` when it was not run to the end).
    returned: Option<usize>,
    /// The stages after the unpacking, with their counts.
    stages: Vec<Bson>,
    /// Time of the bucket scan, and of the whole pipeline.
    scan_millis: i64,
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
    let split = explain_ts::split(&plan.filter_spec, options);
    let shown = leading_matches(stages).min(plan.consumed);
    let mut unpack = explain_ts::unpack_spec(options, plan, &split, &stages[shown..]);
    unpack.extend(plan.explain(run.map(|_| counters)));
    let scan = run.map(|r| explain_ts::ScanRun {
        millis: r.scan_millis,
    });
    // The buckets read, also when the aggregate names a view over the collection.
    let namespace = buckets.namespace().to_string();
    let cursor = explain_ts::cursor_stage(namespace, options, &split, counters, scan.as_ref());
    let query_planner = cursor
        .get_document("$cursor")
        .and_then(|c| c.get_document("queryPlanner"))
        .cloned()
        .unwrap_or_default();
    let mut unpack = doc! {"$_internalUnpackBucket": unpack};
    let mut out_stages = vec![Bson::Document(cursor)];
    match run {
        Some(r) => {
            unpack = with_counts(unpack, r.unpacked, r.scan_millis);
            out_stages.push(Bson::Document(unpack));
            out_stages.extend(r.stages.iter().cloned());
        }
        None => {
            out_stages.push(Bson::Document(unpack));
            out_stages.extend(super::explain_stages::unrun(&stages[shown..]));
        }
    }
    let examined = (C::get(&counters.buckets_pruned) + C::get(&counters.buckets_returned))
        .max(C::get(&counters.buckets_examined)) as i64;
    let index = C::get(&counters.used_meta_index) > 0;
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
    super::explain_reply::finish_aggregate(req, &mut reply);
    reply
}
