//! `aggregate` over regular collections: the pipeline runs document-at-a-time in the query
//! layer; a leading `$match` is applied while scanning.

use super::coll_stats::stats_document;
use super::cursor_reply::{cursor_batch_size, cursor_reply};
use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::state::OpCounters;
use bson::{doc, Bson, Document};
use hourglass_query::filter::Filter;
use hourglass_query::pipeline::Pipeline;
use hourglass_query::sort::SortSpec;

/// Set by the `explain` command on the aggregate it explains at `executionStats` or
/// `allPlansExecution` verbosity: run the pipeline and report its counts. An aggregate
/// with `explain: true` alone reports the plan without running it, as MongoDB's does.
pub(super) const EXPLAIN_EXECUTES: &str = "$_explainExecutes";

pub fn aggregate(req: &Request) -> CmdResult {
    req.check_fields(&[
        "pipeline",
        "cursor",
        "explain",
        EXPLAIN_EXECUTES,
        "allowDiskUse",
        "hint",
        "collation",
        "let",
        "fromMongos",
        "needsMerge",
        "isMapReduceCommand",
        "exchange",
    ])?;
    OpCounters::add(&req.state.opcounters.command, 1);
    let coll = match req.body.iter().next() {
        Some((_, Bson::Int32(1))) | Some((_, Bson::Int64(1))) | Some((_, Bson::Double(_))) => None,
        _ => Some(req.collection()?),
    };
    let mut stages = req.documents("pipeline")?;
    // $collStats produces the pipeline's input: anywhere but first is refused, as MongoDB
    // validates stage positions.
    if stages.iter().skip(1).any(|s| s.contains_key("$collStats")) {
        return Err(CommandError::new(
            40602,
            "$collStats is only valid as the first stage in a pipeline",
        ));
    }
    // A view reads its source with the view's pipeline in front; the cursor stays the
    // view's.
    let source = match &coll {
        Some(c) => match super::views::resolve(req, c)? {
            Some(view) => {
                let mut all = view.pipeline;
                all.append(&mut stages);
                stages = all;
                Some(view.source)
            }
            None => Some(c.clone()),
        },
        None => None,
    };
    // A leading $geoNear reads the collection's geo index key.
    if let (Some(first), Some(src)) = (stages.first_mut(), &source) {
        super::geo_index::resolve_geo_near_key(req, src, first)?;
        super::geo_index::fold_following_matches(&mut stages);
    }
    // A leading $collStats produces the input; the rest runs as usual.
    let coll_stats = stages
        .first()
        .and_then(|s| s.get_document("$collStats").ok())
        .cloned();
    // So does a leading $indexStats.
    let index_stats = stages
        .first()
        .is_some_and(|s| s.contains_key("$indexStats"));
    // And a leading $listCatalog (for `{aggregate: 1}` on admin too).
    let list_catalog = match stages.first().filter(|s| s.contains_key("$listCatalog")) {
        Some(s) => {
            super::list_catalog::check_spec(s)?;
            true
        }
        None => false,
    };
    // And a leading $currentOp (`{aggregate: 1}` on admin) or $listLocalSessions
    // (`{aggregate: 1}`): the documents they produce.
    let first_spec = |name: &str| stages.first().and_then(|s| s.get_document(name).ok());
    let produced = match (first_spec("$currentOp"), first_spec("$listLocalSessions")) {
        (Some(spec), _) => Some(super::current_op::stage_input(req, spec, coll.is_none())?),
        (None, Some(spec)) => Some(super::local_sessions::stage_input(
            req,
            spec,
            coll.is_none(),
        )?),
        (None, None) => None,
    };
    let rest = if coll_stats.is_some() || index_stats || list_catalog || produced.is_some() {
        &stages[1..]
    } else {
        &stages[..]
    };
    // Change streams read a replica set's oplog, which the one-member set does not keep:
    // it refuses them as unsupported (a standalone gets MongoDB's 40573 from the parse).
    if req.state.repl_set.get().is_some() && rest.iter().any(|s| s.contains_key("$changeStream")) {
        return Err(CommandError::new(
            115,
            "$changeStream is not supported by this server: its replica set keeps no oplog",
        ));
    }
    let mut pipeline = Pipeline::parse(rest)?;
    let explain = req.opt_bool("explain")?.unwrap_or(false);
    let cursor_opts =
        match req.body.get("cursor") {
            Some(Bson::Document(d)) => Some(d.clone()),
            Some(v) => return Err(req.wrong_type("cursor", v, "object")),
            None if explain => None,
            None => return Err(CommandError::failed_to_parse(
                "The 'cursor' option is required, except for aggregate with the explain argument",
            )),
        };
    // A collectionless aggregate is allowed when the pipeline starts with $documents
    // or $listCatalog.
    let documents_only = coll.is_none() && pipeline.starts_with_documents();
    let stage_input = match list_catalog {
        true => Some(super::list_catalog::entries(req, coll.as_deref())?),
        false => produced,
    };
    let coll = coll.or_else(|| {
        (documents_only || stage_input.is_some()).then(|| "$cmd.aggregate".to_string())
    });
    let Some(coll) = coll else {
        return Err(CommandError::invalid_options(
            "collectionless aggregate ({aggregate: 1}) is not supported by this server yet",
        ));
    };
    let filter = pipeline
        .leading_match()
        .cloned()
        .unwrap_or_else(Filter::match_all);
    let source = source.unwrap_or_else(|| coll.clone());
    let target = Target::resolve(req, &source);
    if let (Target::TimeSeries { buckets, options }, None, false, false) =
        (&target, &coll_stats, index_stats, list_catalog)
    {
        if let Some(hint) = super::planned::parse_hint(req.body.get("hint"))? {
            super::indexes_ts::check_hint(buckets, options, true, &hint)?;
        }
        return super::aggregate_ts::aggregate_view(
            req,
            &coll,
            buckets,
            options,
            rest,
            explain.then_some(req.opt_bool(EXPLAIN_EXECUTES)?.unwrap_or(false)),
            cursor_opts.as_ref(),
        );
    }
    if explain && coll_stats.is_none() {
        if let Target::Regular(_) = &target {
            let execute = req.opt_bool(EXPLAIN_EXECUTES)?.unwrap_or(false);
            return explain_regular(req, &source, &stages, execute);
        }
    }
    if explain {
        return Ok(doc! {
            "explainVersion": "1",
            "stages": stages.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
            "command": req.body.clone(),
        });
    }
    // A pipeline that only filters a regular collection returns its documents as stored.
    let only_match = match rest {
        [] => true,
        [m] => m.len() == 1 && m.contains_key("$match"),
        _ => false,
    };
    if let (Target::Regular(_), None, None, false, true, true) = (
        &target,
        &coll_stats,
        &stage_input,
        index_stats,
        only_match,
        req.raw_batch.is_some(),
    ) {
        let hint = super::planned::parse_hint(req.body.get("hint"))?;
        let read = super::planned::ReadOpts {
            hint: hint.as_ref(),
            ..Default::default()
        };
        let spec = rest.first().and_then(|s| s.get_document("$match").ok());
        if let Some(rows) = target.raw_rows(req, spec, &read)? {
            let batch = cursor_batch_size(req, cursor_opts.as_ref())?;
            let ns = format!("{}.{coll}", req.db);
            return super::cursor_reply::row_cursor_reply(req, ns, rows, batch, false);
        }
    }
    let ctx = super::pipeline_context::CatalogContext::new(req);
    let opts = ctx.run_options()?;
    let all = |docs: Vec<Document>| -> hourglass_query::pipeline::DocStream {
        Box::new(docs.into_iter().map(Ok))
    };
    let output = match coll_stats {
        _ if documents_only => all(pipeline.run_with(Vec::new(), &opts)?),
        _ if stage_input.is_some() => {
            all(pipeline.run_with(stage_input.unwrap_or_default(), &opts)?)
        }
        Some(spec) => all(pipeline.run_with(vec![coll_stats_stage(req, &coll, &spec)?], &opts)?),
        None if index_stats => all(pipeline.run_with(index_stats_stage(req, target), &opts)?),
        // Documents stream from the scan into the leading stages; the scan builds only
        // the fields the stages read.
        None => match &target {
            // The leading $match and $sort are planned with the hint, as explain shows:
            // an index that gives the order takes the $sort's place.
            Target::Regular(Some(c)) => {
                let hint = super::planned::parse_hint(req.body.get("hint"))?;
                let group = Some((&opts.limits, opts.spill_dir));
                let read = super::aggregate_source::open(c, rest, filter, hint.as_ref(), group)?;
                *req.plan_summary.lock() = Some(read.summary());
                if !read.absorbed.is_empty() {
                    pipeline = Pipeline::parse(&read.remaining(rest))?;
                }
                let docs = Box::new(read.source.map(super::target::interruptible));
                pipeline.run_stream(docs, &opts)?
            }
            _ => {
                let read = super::planned::ReadOpts {
                    sort: None,
                    hint: None,
                    after: rest,
                    ..Default::default()
                };
                let spec = rest.first().and_then(|s| s.get_document("$match").ok());
                pipeline.run_stream(target.scan_with(req, filter, spec, &read)?.0, &opts)?
            }
        },
    };
    let batch = cursor_batch_size(req, cursor_opts.as_ref())?;
    // A pipeline ending in $out or $merge returns nothing: its cursor is closed at
    // once, even for `batchSize: 0`, as MongoDB's.
    cursor_reply(
        req,
        format!("{}.{coll}", req.db),
        Box::new(output.map(|r| r.map_err(CommandError::from))),
        batch,
        pipeline.writes(),
    )
}

/// `explain` of a pipeline over a regular collection: the plan of its leading `$match` /
/// `$sort` as a top-level `queryPlanner` when the pipeline only filters, sorts, skips and
/// limits, else as the `$cursor` stage in front of the remaining stages. With `execute`
/// (`executionStats` verbosity and above) the pipeline runs and `executionStats` carries
/// its counts.
fn explain_regular(req: &Request, coll: &str, stages: &[Document], execute: bool) -> CmdResult {
    if let Target::Regular(Some(c)) = Target::resolve(req, coll) {
        let hint = super::planned::parse_hint(req.body.get("hint"))?;
        let filter = match stages.first().and_then(|s| s.get_document("$match").ok()) {
            Some(m) => Filter::parse(m)?,
            None => Filter::match_all(),
        };
        let read = super::aggregate_source::open(&c, stages, filter, hint.as_ref(), None)?;
        let remaining = read.remaining(stages);
        if let super::aggregate_source::Access::Distinct(group) = read.access {
            let input = (read.source, read.stats.as_ref());
            return explain_distinct(req, coll, remaining, &group, input, execute);
        }
    }
    let mut used = 0;
    let match_spec = stages.first().and_then(|s| s.get_document("$match").ok());
    if match_spec.is_some() {
        used = 1;
    }
    let sort_doc = stages.get(used).and_then(|s| s.get_document("$sort").ok());
    let sort = sort_doc.map(SortSpec::parse).transpose()?;
    if sort.is_some() {
        used += 1;
    }
    let (mut planner, plan) = super::query_planner::query_planner(
        req,
        coll,
        match_spec,
        sort.as_ref(),
        req.body.get("hint"),
        (None, None),
    )?;
    // A sort no index gives runs on the documents read, as MongoDB's SORT stage.
    if let (Some(s), Ok(w)) = (sort_doc, planner.get_document("winningPlan")) {
        if !plan.as_ref().is_some_and(|p| p.provides_sort) {
            let sorted = super::explain_sort::sort_stage(
                s,
                super::explain_sort::sort_mem_limit(req)?,
                w.clone(),
            );
            planner.insert("winningPlan", sorted);
        }
    }
    let run = match execute {
        true => Some(execution_stats(
            req,
            coll,
            stages,
            (used, match_spec),
            sort_doc.zip(sort.as_ref()),
        )?),
        false => None,
    };
    // Only the leading `$match` is in the plan: a later one (a view's pipeline followed
    // by the query's filter) is shown as a stage.
    let simple = stages.iter().enumerate().all(|(i, s)| {
        s.keys().next().is_some_and(|k| {
            ["$sort", "$limit", "$skip"].contains(&k.as_str()) || (k == "$match" && i == 0)
        })
    });
    let mut reply = doc! {"explainVersion": "1"};
    if simple {
        reply.insert("queryPlanner", planner);
    } else {
        let mut cursor = doc! {"queryPlanner": planner};
        let mut out: Vec<Bson> = Vec::new();
        match &run {
            // At executionStats every stage carries its counts, as mongod 7.0 prints them.
            Some(r) => {
                cursor.insert("executionStats", r.stats.clone());
                let cursor = doc! {"$cursor": cursor};
                let cursor = super::explain_stages::with_counts(cursor, r.read, r.read_millis);
                out.push(Bson::Document(cursor));
                out.extend(r.stages.iter().cloned());
            }
            None => {
                out.push(Bson::Document(doc! {"$cursor": cursor}));
                out.extend(super::explain_stages::unrun(&stages[used..]));
            }
        }
        reply.insert("stages", out);
    }
    if let Some(r) = run {
        reply.insert("executionStats", r.whole());
    }
    super::explain_reply::finish_aggregate(req, &mut reply);
    Ok(reply)
}

/// `explain` of a `$sort` + `$group` read by DISTINCT_SCAN: the scan under `$cursor`, then
/// the stages that run on its documents.
fn explain_distinct(
    req: &Request,
    coll: &str,
    remaining: Vec<Document>,
    group: &super::aggregate_source::DistinctGroup,
    (source, scan): (
        crate::cursor::DocSource,
        &hourglass_catalog::scan::ScanStats,
    ),
    execute: bool,
) -> CmdResult {
    let ns = format!("{}.{coll}", req.db);
    let mut planner = super::aggregate_source::distinct_query_planner(ns, &group.index, group.last);
    let mut cursor = Document::new();
    cursor.insert("queryPlanner", std::mem::take(&mut planner));
    let mut top = None;
    let out: Vec<Bson> = if execute {
        let started = std::time::Instant::now();
        let docs = source.collect::<Result<Vec<Document>, _>>()?;
        let read_n = docs.len();
        let read_millis = super::explain_stages::millis_since(started);
        let ctx = super::pipeline_context::CatalogContext::new(req);
        let opts = ctx.run_options()?;
        let (counted, returned) =
            super::explain_stages::run_counted(&remaining, docs, &opts, started)?;
        let mut s = doc! {
            "executionSuccess": true,
            "nReturned": read_n as i64,
            "executionTimeMillis": read_millis,
            "totalKeysExamined": scan.keys() as i64,
            "totalDocsExamined": scan.docs() as i64,
            "executionStages": super::aggregate_source::distinct_plan(&group.index, group.last, Some((scan, read_n as u64))),
        };
        cursor.insert("executionStats", s.clone());
        // The top-level summary counts the whole pipeline.
        s.insert("nReturned", returned.unwrap_or(0) as i64);
        s.insert(
            "executionTimeMillis",
            super::explain_stages::millis_since(started),
        );
        top = Some(s);
        let cursor =
            super::explain_stages::with_counts(doc! {"$cursor": cursor}, read_n, read_millis);
        std::iter::once(Bson::Document(cursor))
            .chain(counted)
            .collect()
    } else {
        let cursor = Bson::Document(doc! {"$cursor": cursor});
        std::iter::once(cursor)
            .chain(super::explain_stages::unrun(&remaining))
            .collect()
    };
    let mut reply = doc! {"explainVersion": "1", "stages": out};
    if let Some(s) = top {
        reply.insert("executionStats", s);
    }
    super::explain_reply::finish_aggregate(req, &mut reply);
    Ok(reply)
}

/// What running a pipeline over a regular collection for its explain gave.
struct ExplainRun {
    /// The `$cursor`'s `executionStats`: what the read returned.
    stats: Document,
    /// Documents the read handed to the stages after it, and its time.
    read: usize,
    read_millis: i64,
    /// The stages after the read, with their counts.
    stages: Vec<Bson>,
    /// Documents the whole pipeline returned, and its time.
    returned: usize,
    millis: i64,
}

impl ExplainRun {
    /// The top-level `executionStats`: the read's, with the whole pipeline's `nReturned`
    /// and time (what a pipeline the plan answers whole, or mongosh's summary, shows).
    fn whole(mut self) -> Document {
        self.stats.insert("nReturned", self.returned as i64);
        self.stats.insert("executionTimeMillis", self.millis);
        self.stats
    }
}

/// Runs the pipeline for its explain: the documents the plan fetched (with the access
/// path's per-stage counters, as a find's explain has them) and what each later stage
/// returned (not the output of a stage that writes: explain never writes). `used` is the
/// number of leading stages the plan answers (`$match`, `$sort`).
fn execution_stats(
    req: &Request,
    coll: &str,
    stages: &[Document],
    (used, match_spec): (usize, Option<&Document>),
    sort: Option<(&Document, &SortSpec)>,
) -> Result<ExplainRun, CommandError> {
    let started = std::time::Instant::now();
    let Target::Regular(Some(c)) = Target::resolve(req, coll) else {
        let stats = doc! {
            "executionSuccess": true, "nReturned": 0_i64, "executionTimeMillis": 0_i64,
            "totalKeysExamined": 0_i64, "totalDocsExamined": 0_i64,
            "executionStages": {"stage": "EOF", "nReturned": 0_i64},
        };
        let ctx = super::pipeline_context::CatalogContext::new(req);
        let opts = ctx.run_options()?;
        let (counted, _) =
            super::explain_stages::run_counted(&stages[used..], Vec::new(), &opts, started)?;
        return Ok(ExplainRun {
            stats,
            read: 0,
            read_millis: 0,
            stages: counted,
            returned: 0,
            millis: 0,
        });
    };
    let filter = match match_spec {
        Some(m) => Filter::parse(m)?,
        None => Filter::match_all(),
    };
    let hint = super::planned::parse_hint(req.body.get("hint"))?;
    let rest = &stages[usize::from(match_spec.is_some())..];
    let opts = super::planned::ReadOpts {
        sort: sort.map(|(_, s)| s),
        hint: hint.as_ref(),
        after: rest,
        ..Default::default()
    };
    let read = super::planned::regular_read(&c, filter, match_spec, &opts)?;
    // A `$sort` the plan does not answer is a SORT stage over the access path.
    let blocking = sort.filter(|_| !read.plan.provides_sort);
    let (fetched, sort_run) = match blocking {
        Some((_, spec)) => {
            let limits = super::pipeline_context::mem_limits(req)?;
            let (docs, run) =
                super::explain_sort::sort_measured(req, &limits, read.source, spec, 0, None)?;
            (docs, Some(run))
        }
        None => (read.source.collect::<Result<Vec<Document>, _>>()?, None),
    };
    let read_n = fetched.len();
    let read_millis = super::explain_stages::millis_since(started);
    let ranges = match &read.plan.access {
        hourglass_catalog::plan::Access::IndexScan { ranges, .. } => ranges.len(),
        _ => 0,
    };
    let access =
        super::planned::plan_stages(&read.plan, match_spec, Some((&read.stats, read_n as u64)));
    let (mut access, _) = super::explain_counters::count_access(access, true, ranges, read_millis);
    if let (Some((pattern, _)), Some(run)) = (blocking, sort_run) {
        let mut sorted = super::explain_sort::sort_stage(
            pattern,
            super::explain_sort::sort_mem_limit(req)?,
            access,
        );
        run.annotate(&mut sorted);
        access = super::explain_counters::count_wrappers(sorted, read_millis).0;
    }
    let ctx = super::pipeline_context::CatalogContext::new(req);
    let run_opts = ctx.run_options()?;
    let (counted, returned) =
        super::explain_stages::run_counted(&stages[used..], fetched, &run_opts, started)?;
    let stats = doc! {
        "executionSuccess": true,
        "nReturned": read_n as i64,
        "executionTimeMillis": read_millis,
        "totalKeysExamined": read.stats.keys() as i64,
        "totalDocsExamined": read.stats.docs() as i64,
        "executionStages": access,
    };
    Ok(ExplainRun {
        stats,
        read: read_n,
        read_millis,
        stages: counted,
        returned: returned.unwrap_or(0),
        millis: super::explain_stages::millis_since(started),
    })
}

/// The documents `$indexStats` outputs: one per index, with its spec.
fn index_stats_stage(req: &Request, target: Target) -> Vec<Document> {
    match target {
        Target::TimeSeries { buckets, options } => {
            super::indexes_ts::index_stats(req, &buckets, &options, true).unwrap_or_default()
        }
        Target::Buckets { buckets, options } => {
            super::indexes_ts::index_stats(req, &buckets, &options, false).unwrap_or_default()
        }
        Target::Regular(Some(c)) => super::indexes::index_documents(&c)
            .into_iter()
            .map(|spec| super::indexes_ts::index_stats_entry(req, spec))
            .collect(),
        _ => Vec::new(),
    }
}

/// The one document `$collStats` outputs: `storageStats` and `count` when asked for.
fn coll_stats_stage(req: &Request, coll: &str, spec: &Document) -> Result<Document, CommandError> {
    let mut out = doc! {
        "ns": format!("{}.{coll}", req.db),
        "host": &req.state.host,
        "localTime": bson::DateTime::now(),
    };
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("storageStats", Bson::Document(o)) => {
                let scale = o.get("scale").and_then(super::args::as_i64).unwrap_or(1);
                out.insert("storageStats", stats_document(req, coll, scale)?);
            }
            ("count", Bson::Document(_)) => {
                let stats = stats_document(req, coll, 1)?;
                out.insert(
                    "count",
                    doc! {"count": stats.get("count").cloned().unwrap_or(Bson::Int64(0))},
                );
            }
            ("latencyStats", Bson::Document(o)) => {
                if o.get_bool("histograms").unwrap_or(false) {
                    return Err(CommandError::bad_value(
                        "$collStats latencyStats histograms are not kept by this server",
                    ));
                }
                let ns = format!("{}.{coll}", req.db);
                out.insert("latencyStats", req.state.top.latency_stats(&ns));
            }
            ("queryExecStats", Bson::Document(_)) => {
                return Err(CommandError::bad_value(
                    "$collStats queryExecStats is not kept by this server",
                ))
            }
            _ => {
                return Err(CommandError::failed_to_parse(format!(
                    "unrecognized option to $collStats: {k}"
                )))
            }
        }
    }
    Ok(out)
}
