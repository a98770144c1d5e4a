//! `aggregate` over regular collections: the pipeline runs document-at-a-time in the query
//! layer; a leading `$match` is applied while scanning.

use super::args::as_i64;
use super::coll_stats::stats_document;
use super::find::{cursor_reply, non_negative_batch_size};
use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::state::OpCounters;
use bson::{doc, Bson, Document};
use hourglass_query::filter::Filter;
use hourglass_query::pipeline::Pipeline;

pub fn aggregate(req: &Request) -> CmdResult {
    req.check_fields(&[
        "pipeline",
        "cursor",
        "explain",
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
    let stages = req.documents("pipeline")?;
    // A leading $collStats produces the input; the rest runs as usual.
    let coll_stats = stages
        .first()
        .and_then(|s| s.get_document("$collStats").ok())
        .cloned();
    let rest = if coll_stats.is_some() {
        &stages[1..]
    } else {
        &stages[..]
    };
    let pipeline = Pipeline::parse(rest)?;
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
    // A collectionless aggregate is allowed when the pipeline starts with $documents.
    let documents_only = coll.is_none() && pipeline.starts_with_documents();
    let coll = coll.or_else(|| documents_only.then(|| "$cmd.aggregate".to_string()));
    let Some(coll) = coll else {
        return Err(CommandError::invalid_options(
            "collectionless aggregate ({aggregate: 1}) is not supported by this server yet",
        ));
    };
    let filter = pipeline
        .leading_match()
        .cloned()
        .unwrap_or_else(Filter::match_all);
    if explain {
        return Ok(doc! {
            "explainVersion": "1",
            "stages": stages.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
            "command": req.body.clone(),
        });
    }
    let input = match coll_stats {
        _ if documents_only => Vec::new(),
        Some(spec) => vec![coll_stats_stage(req, &coll, &spec)?],
        None => Target::resolve(req, &coll)
            .scan(
                filter,
                rest.first().and_then(|s| s.get_document("$match").ok()),
            )?
            .collect::<Result<Vec<Document>, _>>()?,
    };
    let ctx = super::pipeline_context::CatalogContext::new(req);
    let output = pipeline.run_with(input, &ctx.run_options()?)?;
    let requested = cursor_opts.as_ref().and_then(|d| d.get("batchSize"));
    let batch = match requested {
        None | Some(Bson::Null) => None,
        Some(v) => non_negative_batch_size(Some(
            as_i64(v).ok_or_else(|| req.wrong_type("cursor.batchSize", v, "long"))?,
        ))?,
    };
    cursor_reply(
        req,
        format!("{}.{coll}", req.db),
        Box::new(output.into_iter().map(Ok)),
        batch,
        false,
    )
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
            ("latencyStats" | "queryExecStats", Bson::Document(_)) => {}
            _ => {
                return Err(CommandError::failed_to_parse(format!(
                    "unrecognized option to $collStats: {k}"
                )))
            }
        }
    }
    Ok(out)
}
