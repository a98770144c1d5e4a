//! `explain`: describes how `find`, `count`, `distinct`, `update`, `delete`,
//! `findAndModify` or `aggregate` would run on a regular collection — the chosen plan
//! (`queryPlanner`) and, with `executionStats`/`allPlansExecution`, the counters of running
//! its read part (writes are not performed). On a time-series collection the command is
//! explained as the pipeline it runs over the buckets (`aggregate_ts`).

use super::explain_counters::{count_access, count_wrappers, with_common};
use super::explain_sort::sort_measured;
use super::explain_write::{self, WriteShape};
use super::planned::{natural_sort_as_hint, parse_hint, plan_stages, regular_read, ReadOpts};
use super::query_planner::query_planner;
use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_catalog::plan::Access;
use hourglass_query::filter::Filter;
use hourglass_query::sort::SortSpec;
use std::time::Instant;

#[derive(Clone, Copy, PartialEq)]
enum Verbosity {
    QueryPlanner,
    ExecutionStats,
    AllPlansExecution,
}

/// What a read command reads (the inner command of an explain, or a read of a view).
pub(super) struct ReadShape<'a> {
    coll: String,
    filter: Option<&'a Document>,
    sort: Option<&'a Document>,
    hint: Option<&'a Bson>,
    skip: Option<i64>,
    limit: Option<i64>,
    projection: Option<&'a Document>,
    /// A find's `min` and `max` (non-empty).
    min: Option<&'a Document>,
    max: Option<&'a Document>,
    /// Stage wrapping the read (`COUNT`, `UPDATE`, `DELETE`, `BATCHED_DELETE`), if any.
    wrapper: Option<&'static str>,
    /// What a write does with the documents it reads.
    write: Option<WriteShape<'a>>,
    /// Bytes a blocking sort may hold (`internalQueryMaxBlockingSortMemoryUsageBytes`),
    /// shown as the SORT stage's `memLimit`.
    sort_mem: i64,
}

fn opt_doc<'a>(d: &'a Document, k: &str) -> Result<Option<&'a Document>, CommandError> {
    match d.get(k) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(x)) => Ok(Some(x)),
        Some(v) => Err(CommandError::type_mismatch(format!(
            "BSON field '{k}' is the wrong type '{}', expected type 'object'",
            super::args::type_name(v)
        ))),
    }
}

fn first_statement<'a>(d: &'a Document, k: &str) -> Result<&'a Document, CommandError> {
    match d.get(k) {
        Some(Bson::Array(a)) => match a.first() {
            Some(Bson::Document(s)) => Ok(s),
            _ => Err(CommandError::failed_to_parse(format!(
                "explain of {k} needs one statement"
            ))),
        },
        _ => Err(CommandError::missing_field(&format!("explain.{k}"))),
    }
}

pub(super) fn shape_of<'a>(name: &str, inner: &'a Document) -> Result<ReadShape<'a>, CommandError> {
    let coll = match inner.get(name) {
        Some(Bson::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(CommandError::new(
                73,
                "explain: the inner command must name a collection",
            ))
        }
    };
    let num = |k: &str| inner.get(k).and_then(super::args::as_i64);
    let mut s = ReadShape {
        coll,
        filter: None,
        sort: None,
        hint: inner.get("hint"),
        skip: None,
        limit: None,
        projection: None,
        min: None,
        max: None,
        wrapper: None,
        write: None,
        sort_mem: hourglass_query::pipeline::mem::DEFAULT_LIMIT as i64,
    };
    match name {
        "find" => {
            s.filter = opt_doc(inner, "filter")?;
            opt_doc(inner, "sort")?;
            (s.sort, s.hint) = natural_sort_as_hint(inner);
            s.skip = num("skip");
            s.limit = num("limit").filter(|l| *l != 0);
            for (field, n) in [("skip", s.skip), ("limit", s.limit)] {
                if let Some(n) = n.filter(|n| *n < 0) {
                    return Err(super::cursor_reply::negative(field, n));
                }
            }
            s.projection = opt_doc(inner, "projection")?.filter(|p| !p.is_empty());
            s.min = opt_doc(inner, "min")?.filter(|p| !p.is_empty());
            s.max = opt_doc(inner, "max")?.filter(|p| !p.is_empty());
        }
        "count" => {
            s.filter = opt_doc(inner, "query")?;
            s.skip = num("skip");
            s.limit = num("limit").filter(|l| *l != 0).map(i64::abs);
            s.wrapper = Some("COUNT");
        }
        "distinct" => {
            s.filter = opt_doc(inner, "query")?;
        }
        "update" => {
            let st = first_statement(inner, "updates")?;
            s.filter = opt_doc(st, "q")?;
            s.hint = st.get("hint");
            s.write = Some(WriteShape::update_statement(st));
        }
        "delete" => {
            let st = first_statement(inner, "deletes")?;
            s.filter = opt_doc(st, "q")?;
            s.hint = st.get("hint");
            s.write = Some(WriteShape::delete_statement(st));
        }
        "findAndModify" | "findandmodify" => {
            s.filter = opt_doc(inner, "query")?;
            s.sort = opt_doc(inner, "sort")?;
            s.write = Some(WriteShape::find_and_modify(inner));
        }
        other => {
            return Err(CommandError::new(
                59,
                format!("Explain failed due to unknown command: {other}"),
            ))
        }
    }
    if let Some(w) = &s.write {
        s.wrapper = Some(w.stage);
        // mongod reads a write's documents with a limit of one only when one document is
        // chosen by a sort (a top-k sort); otherwise the write stage itself stops.
        if w.single && s.sort.is_some_and(|d| !d.is_empty()) {
            s.limit = Some(1);
        }
    }
    Ok(s)
}

/// Wraps `input` in the stages that sort, skip, limit and project above the access path.
fn wrap_stages(mut input: Document, shape: &ReadShape<'_>, sorted: bool) -> Document {
    let (sort, skip, limit, wrapper) = (shape.sort, shape.skip, shape.limit, shape.wrapper);
    if let Some(s) = sort.filter(|s| !s.is_empty() && !sorted) {
        let mut stage =
            doc! {"stage": "SORT", "sortPattern": s.clone(), "memLimit": shape.sort_mem};
        // A sort under a skip and a limit keeps only the first skip + limit documents.
        if let Some(l) = limit {
            stage.insert("limitAmount", l.saturating_add(skip.unwrap_or(0).max(0)));
        }
        stage.insert("type", "simple");
        stage.insert("inputStage", input);
        input = stage;
    }
    // A COUNT stage skips and limits itself.
    let counts = wrapper == Some("COUNT");
    if let Some(k) = skip.filter(|k| *k > 0 && !counts) {
        input = doc! {"stage": "SKIP", "skipAmount": k, "inputStage": input};
    }
    if let Some(l) = limit.filter(|_| !counts) {
        input = doc! {"stage": "LIMIT", "limitAmount": l, "inputStage": input};
    }
    if let Some(p) = shape.projection {
        input = doc! {"stage": projection_stage(p), "transformBy": p.clone(), "inputStage": input};
    }
    if let Some(w) = wrapper {
        input = doc! {"stage": w, "inputStage": input};
    }
    // findAndModify projects the document its write stage returns.
    if let Some(f) = shape.write.as_ref().and_then(|w| w.fields) {
        input = doc! {"stage": "PROJECTION_DEFAULT", "transformBy": f.clone(), "inputStage": input};
    }
    input
}

/// `stages` with, when it is a COUNT, the documents it counted (`n`) and skipped of the
/// `matched` its input returned.
fn counted(mut stages: Document, n: u64, matched: u64) -> Document {
    if stages.get_str("stage") == Ok("COUNT") {
        let input = stages.remove("inputStage");
        stages.insert("nCounted", n as i64);
        stages.insert("nSkipped", matched.saturating_sub(n) as i64);
        if let Some(input) = input {
            stages.insert("inputStage", input);
        }
    }
    stages
}

/// mongod's name for a find's projection stage: `PROJECTION_SIMPLE` for an inclusion or
/// exclusion of top-level fields only, `PROJECTION_DEFAULT` for any other (computed
/// fields, dotted paths, `$slice`, `$elemMatch`, positional).
fn projection_stage(p: &Document) -> &'static str {
    let simple = p.iter().all(|(k, v)| {
        !k.contains('.')
            && !k.contains('$')
            && matches!(
                v,
                Bson::Boolean(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)
            )
    });
    if simple {
        "PROJECTION_SIMPLE"
    } else {
        "PROJECTION_DEFAULT"
    }
}

/// Runs `source` as a find with `skip` and `limit` would: the documents returned (at most
/// `limit`) and the documents read, stopping at the limit when `early` (the order read is
/// the final one).
/// Also tells whether the read ran to its end.
fn run_counting(
    source: crate::cursor::DocSource,
    skip: usize,
    limit: Option<i64>,
    early: bool,
) -> Result<(u64, u64, bool), CommandError> {
    let (mut n, mut matched, mut eof) = (0u64, 0u64, true);
    for d in source {
        d?;
        matched += 1;
        if matched > skip as u64 {
            n += 1;
        }
        if early && limit.is_some_and(|l| n >= l as u64) {
            eof = false;
            break;
        }
    }
    Ok((limit.map_or(n, |l| n.min(l as u64)), matched, eof))
}

pub fn explain(req: &Request) -> CmdResult {
    req.check_fields(&["verbosity"])?;
    let inner = match req.body.get("explain") {
        Some(Bson::Document(d)) => d.clone(),
        Some(v) => return Err(req.wrong_type("explain", v, "object")),
        None => return Err(CommandError::missing_field("explain.explain")),
    };
    let verbosity = match req.body.get("verbosity") {
        None => Verbosity::AllPlansExecution,
        Some(Bson::String(s)) => match s.as_str() {
            "queryPlanner" => Verbosity::QueryPlanner,
            "executionStats" => Verbosity::ExecutionStats,
            "allPlansExecution" => Verbosity::AllPlansExecution,
            other => {
                return Err(CommandError::bad_value(format!(
                    "verbosity string must be one of {{'queryPlanner', 'executionStats', 'allPlansExecution'}}, got: {other}"
                )))
            }
        },
        Some(v) => return Err(req.wrong_type("verbosity", v, "string")),
    };
    let Some(name) = inner.keys().next().cloned() else {
        return Err(CommandError::failed_to_parse("explain of an empty command"));
    };
    let db = match inner.get("$db") {
        Some(Bson::String(d)) => d.clone(),
        _ => req.db.clone(),
    };
    if name == "aggregate" {
        let mut body = inner.clone();
        body.remove("cursor");
        return explain_aggregate(req, db, body, inner, verbosity);
    }
    let mut shape = shape_of(&name, &inner)?;
    shape.sort_mem = super::explain_sort::sort_mem_limit(req)?;
    let on_view = super::views::is_view(req, &shape.coll)?;
    if on_view && !["find", "count", "distinct"].contains(&name.as_str()) {
        super::views::refuse_on_view(req, &shape.coll)?;
    }
    if name == "distinct" && !on_view {
        let execute = verbosity != Verbosity::QueryPlanner;
        if let Some(mut reply) =
            super::distinct_scan::explain_by_scan(req, &inner, &shape.coll, execute)?
        {
            super::explain_reply::finish(req, &mut reply, inner, &db);
            return Ok(reply);
        }
    }
    if on_view || matches!(Target::resolve(req, &shape.coll), Target::TimeSeries { .. }) {
        // A read of a view (a time-series collection is one over its buckets) runs as a
        // pipeline, and is explained as one, as MongoDB explains any read of a view.
        let mut body = doc! {"aggregate": shape.coll.clone()};
        body.insert("pipeline", view_pipeline(&name, &shape, &inner));
        return explain_aggregate(req, db, body, inner, verbosity);
    }
    let sort = shape.sort.map(SortSpec::parse).transpose()?;
    let (mut planner, plan) = query_planner(
        req,
        &shape.coll,
        shape.filter,
        sort.as_ref(),
        shape.hint,
        (shape.min, shape.max),
    )?;
    if name == "count" && super::fast_count::applies(shape.filter, shape.hint) {
        if let Target::Regular(Some(c)) = Target::resolve(req, &shape.coll) {
            let execute = verbosity != Verbosity::QueryPlanner;
            let mut reply =
                super::fast_count::explain(&c, planner, shape.skip, shape.limit, execute)?;
            if let (Verbosity::AllPlansExecution, Ok(stats)) =
                (verbosity, reply.get_document_mut("executionStats"))
            {
                stats.insert("allPlansExecution", Vec::<Document>::new());
            }
            super::explain_reply::finish(req, &mut reply, inner, &db);
            return Ok(reply);
        }
    }
    if let Some(p) = shape.projection {
        for k in ["queryHash", "planCacheKey"] {
            if let Ok(h) = planner.get_str(k) {
                let h = super::query_shape_hash::with_projection(h, p);
                planner.insert(k, h);
            }
        }
    }
    // `$near` orders by distance; a sort then reorders.
    let near = matches!(shape.filter.map(Filter::parse), Some(Ok(f)) if f.near().is_some());
    let sorted = !near && plan.as_ref().is_some_and(|p| p.provides_sort);
    let coll = match Target::resolve(req, &shape.coll) {
        Target::Regular(c) => c,
        _ => None,
    };
    let near_over = |input: Document| match &coll {
        Some(c) => super::geo_index::near_stage(c, shape.filter, input),
        None => Ok(input),
    };
    if let Ok(w) = planner.get_document("winningPlan") {
        let wrapped = wrap_stages(near_over(w.clone())?, &shape, sorted);
        planner.insert("winningPlan", wrapped);
    }
    let mut reply = doc! {"explainVersion": "1", "queryPlanner": planner};
    if verbosity != Verbosity::QueryPlanner {
        let started = Instant::now();
        let filter = match shape.filter {
            Some(f) => Filter::parse(f)?,
            None => Filter::match_all(),
        };
        let hint = parse_hint(shape.hint)?;
        let opts = ReadOpts {
            sort: sort.as_ref(),
            hint: hint.as_ref(),
            after: &[],
            min: shape.min,
            max: shape.max,
        };
        let rings = match (filter.near(), &coll) {
            (Some((path, near)), Some(c)) if super::near_find::reads_rings(c, path, near) => {
                super::geo_index::near_head(c, path)
                    .map(|head| (path.to_string(), near.clone(), head))
            }
            _ => None,
        };
        let skip = shape.skip.unwrap_or(0).max(0) as usize;
        let (n, keys, docs, stages) = match (Target::resolve(req, &shape.coll), rings) {
            // A `$near` that reads rings is explained by running them.
            (Target::Regular(Some(c)), Some((path, near, head))) => {
                let log = super::near_find::IntervalLog::default();
                let source = super::near_find::nearest_first(
                    &c,
                    filter,
                    shape.filter,
                    &path,
                    &near,
                    Some(log.clone()),
                )?;
                // Nearest first is the final order unless a sort reorders.
                let (n, matched, _) = run_counting(source, skip, shape.limit, sort.is_none())?;
                // The near stage hands the documents it read to the skip and the limit.
                let (stage, keys, docs) = super::near_find::explain_rings(&log, head, matched);
                let millis = started.elapsed().as_millis() as i64;
                let stages = count_wrappers(wrap_stages(stage, &shape, sorted), millis).0;
                (n, keys, docs, stages)
            }
            (Target::Regular(Some(c)), None) => {
                let read = regular_read(&c, filter, shape.filter, &opts)?;
                let ranges = match &read.plan.access {
                    Access::IndexScan { ranges, .. } => ranges.len(),
                    _ => 0,
                };
                if let Some(w) = &shape.write {
                    let counts = explain_write::run(read.source, w, shape.filter)?;
                    let millis = started.elapsed().as_millis() as i64;
                    let access = plan_stages(
                        &read.plan,
                        shape.filter,
                        Some((&read.stats, counts.matched)),
                    );
                    let (access, works) = count_access(access, counts.input_eof, ranges, millis);
                    let stages = wrap_stages(near_over(access)?, &shape, sorted);
                    let stages = write_stages(stages, w, &counts, works, millis);
                    (
                        counts.returned,
                        read.stats.keys(),
                        read.stats.docs(),
                        stages,
                    )
                } else {
                    let blocking = sort.as_ref().filter(|s| !s.is_empty() && !sorted);
                    let (n, matched, eof, sort_run) = match blocking {
                        // The SORT stage sorts as the find would, and reports it.
                        Some(s) => {
                            let limit = shape.limit.map(|l| l.max(0) as usize);
                            // The find's own `allowDiskUse`, not the explain's.
                            let mut limits = super::pipeline_context::mem_limits(req)?;
                            if let Some(allow) = super::args::opt_bool_of(&inner, "allowDiskUse")? {
                                limits.allow_disk_use = allow;
                            }
                            let source = read.source;
                            let (docs, run) = sort_measured(req, &limits, source, s, skip, limit)?;
                            (docs.len() as u64, run.input, true, Some(run))
                        }
                        // Without a sort to do, a limit stops the scan early.
                        None => {
                            let (n, matched, eof) =
                                run_counting(read.source, skip, shape.limit, true)?;
                            (n, matched, eof, None)
                        }
                    };
                    let millis = started.elapsed().as_millis() as i64;
                    let access =
                        plan_stages(&read.plan, shape.filter, Some((&read.stats, matched)));
                    let (access, _) = count_access(access, eof, ranges, millis);
                    let mut stages = wrap_stages(near_over(access)?, &shape, sorted);
                    if let Some(run) = sort_run {
                        run.annotate(&mut stages);
                    }
                    let stages = count_wrappers(counted(stages, n, matched), millis).0;
                    (n, read.stats.keys(), read.stats.docs(), stages)
                }
            }
            // No collection: the plan's stages over an EOF that works once.
            (_, _) => {
                let millis = started.elapsed().as_millis() as i64;
                let eof = with_common(doc! {"stage": "EOF", "nReturned": 0_i64}, 1, true, millis);
                let stages = wrap_stages(eof, &shape, sorted);
                let stages = match &shape.write {
                    Some(w) => {
                        let counts = explain_write::run(Box::new(std::iter::empty()), w, None)?;
                        write_stages(stages, w, &counts, 1, millis)
                    }
                    None => count_wrappers(counted(stages, 0, 0), millis).0,
                };
                let n = stages.get_i64("nReturned").unwrap_or_default() as u64;
                (n, 0, 0, stages)
            }
        };
        // A COUNT stage returns no documents.
        let n = if shape.wrapper == Some("COUNT") { 0 } else { n };
        let mut stats = doc! {
            "executionSuccess": true,
            "nReturned": n as i64,
            "executionTimeMillis": started.elapsed().as_millis() as i64,
            "totalKeysExamined": keys as i64,
            "totalDocsExamined": docs as i64,
            "executionStages": stages,
        };
        if verbosity == Verbosity::AllPlansExecution {
            stats.insert("allPlansExecution", Vec::<Document>::new());
        }
        reply.insert("executionStats", stats);
    }
    super::explain_reply::finish(req, &mut reply, inner, &db);
    Ok(reply)
}

/// `stages` (built by `wrap_stages` for a write) with the write stage's counters and,
/// for a findAndModify that projects, the projection's: it returns what the write stage
/// returns, working once per work of it.
fn write_stages(
    mut stages: Document,
    w: &WriteShape<'_>,
    counts: &explain_write::WriteCounts,
    input_works: i64,
    millis: i64,
) -> Document {
    if w.fields.is_none() {
        return write_stage(stages, w, counts, input_works, millis);
    }
    let input = stages
        .get_document("inputStage")
        .cloned()
        .unwrap_or_default();
    let input = write_stage(input, w, counts, input_works, millis);
    let works = input.get_i64("works").unwrap_or_default();
    stages.insert("inputStage", input);
    stages.insert("nReturned", counts.returned as i64);
    with_common(stages, works, true, millis)
}

/// The write stage at the root of `stages` (built by `wrap_stages`) with its counters:
/// it works once per work of its input, plus once to stop after its one document or to
/// upsert (the input's works stand for those of any SORT between them), and always ends.
fn write_stage(
    mut stages: Document,
    w: &WriteShape<'_>,
    counts: &explain_write::WriteCounts,
    input_works: i64,
    millis: i64,
) -> Document {
    stages.insert("nReturned", counts.returned as i64);
    let extra = !counts.input_eof || counts.would_upsert > 0;
    let mut out = with_common(stages, input_works + extra as i64, true, millis);
    let input = out.remove("inputStage");
    out.extend(explain_write::stage_counters(w, counts));
    if let Some(input) = input {
        out.insert("inputStage", input);
    }
    out
}

/// Explains the aggregate `body` (run in `db`) and reports it as the explain of `inner`.
fn explain_aggregate(
    req: &Request,
    db: String,
    mut body: Document,
    inner: Document,
    verbosity: Verbosity,
) -> CmdResult {
    body.insert("explain", true);
    if verbosity != Verbosity::QueryPlanner {
        body.insert(super::aggregate::EXPLAIN_EXECUTES, true);
    }
    let mut sub = req.sub_request(body);
    sub.db = db.clone();
    let mut reply = super::aggregate::aggregate(&sub)?;
    if verbosity == Verbosity::AllPlansExecution {
        with_all_plans(&mut reply);
    }
    super::explain_reply::finish(req, &mut reply, inner, &db);
    Ok(reply)
}

/// At `allPlansExecution` the read's `executionStats` (the `$cursor` stage's, or the
/// top-level one of a pipeline the plan answers whole) list the plans the planner ran
/// against each other: none, as Hourglass runs only the plan it chose.
fn with_all_plans(reply: &mut Document) {
    let add = |stats: &mut Document| {
        if !stats.contains_key("allPlansExecution") {
            stats.insert("allPlansExecution", Vec::<Document>::new());
        }
    };
    if let Ok(stages) = reply.get_array_mut("stages") {
        let cursor = stages
            .first_mut()
            .and_then(|s| match s {
                Bson::Document(d) => d.get_document_mut("$cursor").ok(),
                _ => None,
            })
            .and_then(|c| c.get_document_mut("executionStats").ok());
        if let Some(stats) = cursor {
            add(stats);
        }
    } else if let Ok(stats) = reply.get_document_mut("executionStats") {
        add(stats);
    }
}

/// The pipeline a read command `name` runs as over a view: `find` as
/// `$match`/`$sort`/`$skip`/`$limit`/`$project`, `count` ending in `$count` (of field
/// `count`), `distinct` as a `$group` collecting the key's values; writes explain the
/// read that selects their documents. `view_reads.rs` runs `find` and `count` of views
/// with it, so their explain shows what runs.
pub(super) fn view_pipeline(name: &str, shape: &ReadShape<'_>, inner: &Document) -> Vec<Document> {
    let mut stages = vec![doc! {"$match": shape.filter.cloned().unwrap_or_default()}];
    if let Some(s) = shape.sort.filter(|s| !s.is_empty()) {
        stages.push(doc! {"$sort": s.clone()});
    }
    if let Some(k) = shape.skip.filter(|k| *k > 0) {
        stages.push(doc! {"$skip": k});
    }
    if let Some(l) = shape.limit {
        stages.push(doc! {"$limit": l});
    }
    if let Some(p) = shape.projection {
        stages.push(doc! {"$project": p.clone()});
    }
    match name {
        "count" => stages.push(doc! {"$count": "count"}),
        "distinct" => {
            let key = inner.get_str("key").unwrap_or_default();
            stages.push(
                doc! {"$group": {"_id": Bson::Null, "distinct": {"$addToSet": format!("${key}")}}},
            );
        }
        _ => {}
    }
    stages
}
