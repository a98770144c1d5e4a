//! `findAndModify`: atomically update, upsert or remove one document and return it.

use super::planned::parse_hint;
use super::target::Target;
use super::update::parse_update;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::state::OpCounters;
use bson::{doc, Bson};
use hourglass_catalog::writes::FindAndModify;
use hourglass_query::filter::Filter;
use hourglass_query::projection::Projection;
use hourglass_query::sort::SortSpec;

/// An error raised while the document is found, updated or inserted (not one of parsing
/// the command) carries MongoDB's context for the plan that ran the write; the code and
/// any extra fields (`keyPattern`, `errInfo`, ...) stay as they were. A `hint` naming no
/// index is refused before any plan runs.
fn executor_error(e: CommandError) -> CommandError {
    if e.code == 2 && e.errmsg == "hint provided does not correspond to an existing index" {
        return e;
    }
    CommandError {
        errmsg: format!(
            "Plan executor error during findAndModify :: caused by :: {}",
            e.errmsg
        ),
        ..e
    }
}

pub fn find_and_modify(req: &Request) -> CmdResult {
    req.check_fields(&[
        "query",
        "sort",
        "remove",
        "update",
        "new",
        "fields",
        "upsert",
        "arrayFilters",
        "hint",
        "collation",
        "let",
    ])?;
    let coll = req.collection()?;
    super::views::refuse_on_view(req, &coll)?;
    let filter = match req.opt_document("query")? {
        Some(q) => Filter::parse(q)?,
        None => Filter::match_all(),
    };
    let sort = req.opt_document("sort")?.map(SortSpec::parse).transpose()?;
    let fields = req
        .opt_document("fields")?
        .filter(|f| !f.is_empty())
        .map(|p| Projection::parse_find(p, &filter))
        .transpose()?;
    let remove = req.opt_bool("remove")?.unwrap_or(false);
    let return_new = req.opt_bool("new")?.unwrap_or(false);
    let upsert = req.opt_bool("upsert")?.unwrap_or(false);
    let update = match (remove, req.body.get("update")) {
        (true, Some(_)) => return Err(CommandError::failed_to_parse("Cannot specify both an update and remove=true")),
        (true, None) if upsert => return Err(CommandError::failed_to_parse("Cannot specify both upsert=true and remove=true ")),
        (true, None) if return_new => {
            return Err(CommandError::failed_to_parse("Cannot specify both new=true and remove=true; 'remove' always returns the deleted document"))
        }
        (true, None) if req.body.get("arrayFilters").is_some() => {
            return Err(CommandError::failed_to_parse("Cannot specify arrayFilters and remove=true"))
        }
        (true, None) => None,
        (false, Some(Bson::Array(_))) if req.body.get("arrayFilters").is_some() => {
            return Err(CommandError::failed_to_parse("Cannot specify arrayFilters and a pipeline update"))
        }
        (false, None) => return Err(CommandError::failed_to_parse("Either an update or remove=true must be specified")),
        (false, u) => Some(parse_update(
            u,
            req.body.get("arrayFilters"),
            "findAndModify.arrayFilters",
        )?),
    };
    if remove {
        OpCounters::add(&req.state.opcounters.delete, 1);
    } else {
        OpCounters::add(&req.state.opcounters.update, 1);
    }
    let hint = parse_hint(req.body.get("hint"))?;
    let fam = FindAndModify {
        filter: &filter,
        sort: sort.as_ref(),
        update: update.as_ref(),
        return_new,
        upsert,
        hint: hint.as_ref(),
        query: req.opt_document("query")?,
    };
    let target = Target::resolve(req, &coll);
    let out = if let Target::TimeSeries { buckets, options } = &target {
        let spec = req.opt_document("query")?.cloned().unwrap_or_default();
        req.state
            .timeseries
            .find_and_modify(buckets, options, &spec, &fam)
            .map_err(|e| executor_error(e.into()))?
    } else if let Target::Buckets { buckets, options } = &target {
        if upsert {
            return Err(CommandError::invalid_options(
                "upsert of bucket documents is not supported by this server; insert the bucket instead",
            ));
        }
        req.state
            .timeseries
            .find_and_modify_buckets(buckets, options, &fam)
            .map_err(|e| executor_error(e.into()))?
    } else {
        let collection = match target.require_regular("findAndModify")? {
            Some(c) => c,
            None if upsert => req.state.catalog.get_or_create(&req.db, &coll)?,
            None => {
                return Ok(
                    doc! {"lastErrorObject": {"n": 0, "updatedExisting": false}, "value": Bson::Null},
                )
            }
        };
        collection
            .find_and_modify(&fam)
            .map_err(|e| executor_error(e.into()))?
    };
    let mut last = doc! {"n": out.n as i32};
    if !remove {
        last.insert("updatedExisting", out.updated_existing);
    }
    if let Some(id) = out.upserted {
        last.insert("upserted", id);
    }
    let value = match (out.value, fields) {
        (Some(d), Some(p)) => Bson::Document(p.apply(&d)),
        (Some(d), None) => Bson::Document(d),
        (None, _) => Bson::Null,
    };
    Ok(doc! {"lastErrorObject": last, "value": value})
}
