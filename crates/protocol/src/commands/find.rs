//! `find`, `getMore`, `killCursors`, and the cursor reply shapes they share with
//! `aggregate` and the listing commands.

use super::cursor_reply::{batch_size, row_cursor_reply, DEFAULT_FIRST_BATCH};
use super::planned::{natural_sort_as_hint, parse_hint, ReadOpts};
use super::target::Target;
use super::Request;
use crate::access::check::{self, Tgt};
use crate::cursor::{rows, DocSource, RowSource};
use crate::error::{CmdResult, CommandError};
use crate::state::OpCounters;
use bson::{doc, Bson};
use hourglass_query::filter::Filter;
use hourglass_query::projection::Projection;
use hourglass_query::sort::SortSpec;

pub fn find(req: &Request) -> CmdResult {
    req.check_fields(&[
        "filter",
        "projection",
        "sort",
        "skip",
        "limit",
        "batchSize",
        "singleBatch",
        "hint",
        "min",
        "max",
        "returnKey",
        "showRecordId",
        "tailable",
        "oplogReplay",
        "noCursorTimeout",
        "awaitData",
        "allowPartialResults",
        "collation",
        "let",
        "readOnce",
        "allowSpeculativeMajorityRead",
        "allowDiskUse",
        "$queryOptions",
        "ntoreturn",
    ])?;
    OpCounters::add(&req.state.opcounters.query, 1);
    let coll = req.collection()?;
    if super::views::is_view(req, &coll)? {
        return super::view_reads::find(req, &coll);
    }
    if req.opt_bool("showRecordId")? == Some(true)
        && matches!(Target::resolve(req, &coll), Target::TimeSeries { .. })
    {
        // A time-series read is an aggregation over the buckets, as in MongoDB.
        return Err(super::view_reads::show_record_id_error());
    }
    let tailable = req.opt_bool("tailable")?.unwrap_or(false);
    if req.opt_bool("awaitData")? == Some(true) && !tailable {
        return Err(CommandError::failed_to_parse(
            "Cannot set 'awaitData' without also setting 'tailable'",
        ));
    }
    if tailable {
        // Only a capped collection has tailable cursors, and this server has none.
        return Err(CommandError::bad_value(format!(
            "error processing query: ns={}.{coll} tailable cursor requested on non capped collection",
            req.db
        )));
    }
    for option in ["returnKey", "showRecordId"] {
        if req.opt_bool(option)? == Some(true) {
            return Err(CommandError::bad_value(format!(
                "find's {option} is not supported by this server"
            )));
        }
    }
    let filter = match req.opt_document("filter")? {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    req.opt_document("sort")?;
    let (sort_doc, hint) = natural_sort_as_hint(&req.body);
    let sort = sort_doc.map(SortSpec::parse).transpose()?;
    let projection = req
        .opt_document("projection")?
        .filter(|p| !p.is_empty())
        .map(|p| Projection::parse_find(p, &filter))
        .transpose()?;
    // The find command has no negative values (a driver sends a shell's negative limit
    // as `limit` and `singleBatch`), nor the legacy `ntoreturn`.
    if req.body.contains_key("ntoreturn") {
        if req.body.contains_key("limit") || req.body.contains_key("batchSize") {
            return Err(CommandError::bad_value(
                "'limit' or 'batchSize' fields can not be set with 'ntoreturn' field.",
            ));
        }
        return Err(CommandError::new(
            5746101,
            "the 'ntoreturn' field is not supported by the find command; use 'limit' and 'batchSize'",
        ));
    }
    let skip = non_negative(req, "skip")?.unwrap_or(0);
    let single_batch = req.opt_bool("singleBatch")?.unwrap_or(false);
    let limit = non_negative(req, "limit")?.filter(|l| *l > 0);
    let mut batch = batch_size(req, "batchSize")?;
    if single_batch && batch.is_none() {
        batch = limit;
    }
    // What the sort and projection read (a time-series scan decodes only that).
    let mut needs = Vec::new();
    if let Some(s) = sort_doc {
        needs.push(doc! {"$sort": s.clone()});
    }
    if let Some(p) = req.opt_document("projection")?.filter(|p| !p.is_empty()) {
        needs.push(doc! {"$project": p.clone()});
    }
    let hint = parse_hint(hint)?;
    let (min, max) = min_max(req)?;
    if (min.is_some() || max.is_some())
        && !matches!(Target::resolve(req, &coll), Target::Regular(_))
    {
        return Err(CommandError::bad_value(
            "min() and max() read an index of a regular collection; this is not one",
        ));
    }
    let opts = ReadOpts {
        sort: sort.as_ref(),
        hint: hint.as_ref(),
        after: &needs,
        min,
        max,
    };
    if let Target::TimeSeries { .. } = Target::resolve(req, &coll) {
        // A time-series read is an aggregation, where MongoDB allows no $near.
        filter.refuse_near()?;
    }
    let near = filter.near().map(|(p, n)| (p.to_string(), n.clone()));
    if let Some((path, _)) = &near {
        super::geo_index::require(req, &coll, path)?;
    }
    let target = Target::resolve(req, &coll);
    // A find that returns documents as they are sends their bytes: a regular
    // collection's as stored, a time-series collection's written from the columns (no
    // document is built per document).
    let raw = match (&near, sort.as_ref().filter(|s| !s.is_empty()), &projection) {
        (None, None, None) if req.raw_batch.is_some() => {
            target.raw_rows(req, req.opt_document("filter")?, &opts)?
        }
        _ => None,
    };
    let source: RowSource = match raw {
        Some(rows) => {
            let rows = rows.skip(skip);
            match limit {
                Some(l) => Box::new(rows.take(l)),
                None => Box::new(rows),
            }
        }
        None => {
            // `$near`/`$nearSphere` (regular collections only): nearest first (a `sort`
            // then reorders them).
            let (docs, sorted): (DocSource, bool) = match (near, target) {
                (Some((path, n)), Target::Regular(Some(c))) => {
                    let spec = req.opt_document("filter")?;
                    let docs = super::near_find::nearest_first(&c, filter, spec, &path, &n, None)?;
                    (docs, false)
                }
                (_, target) => target.scan_with(req, filter, req.opt_document("filter")?, &opts)?,
            };
            rows(super::find_shape::shape(
                req,
                &super::pipeline_context::mem_limits(req)?,
                docs,
                if sorted { None } else { sort },
                skip,
                limit,
                projection,
            )?)
        }
    };
    row_cursor_reply(
        req,
        format!("{}.{coll}", req.db),
        source,
        batch.or(Some(DEFAULT_FIRST_BATCH)),
        single_batch,
    )
}

/// The value of a field that must not be negative (51024 otherwise, as MongoDB's
/// command parser).
fn non_negative(req: &Request, field: &str) -> Result<Option<usize>, CommandError> {
    match req.opt_i64(field)? {
        Some(n) if n < 0 => Err(super::cursor_reply::negative(field, n)),
        n => Ok(n.map(|n| n as usize)),
    }
}

/// A find's `min` and `max` bounds (an empty one is none).
pub fn min_max(
    req: &Request,
) -> Result<(Option<&bson::Document>, Option<&bson::Document>), CommandError> {
    let bound = |k: &str| -> Result<Option<&bson::Document>, CommandError> {
        Ok(req.opt_document(k)?.filter(|d| !d.is_empty()))
    };
    Ok((bound("min")?, bound("max")?))
}

pub fn get_more(req: &Request) -> CmdResult {
    req.check_fields(&[
        "collection",
        "batchSize",
        "term",
        "lastKnownCommittedOpTime",
    ])?;
    OpCounters::add(&req.state.opcounters.getmore, 1);
    let id = match req.body.get("getMore") {
        Some(Bson::Int64(i)) => *i,
        Some(v) => return Err(req.wrong_type("getMore", v, "long")),
        None => {
            return Err(CommandError::failed_to_parse(
                "getMore requires a cursor id",
            ))
        }
    };
    let coll = match req.body.get("collection") {
        Some(Bson::String(s)) => s.clone(),
        Some(v) => return Err(req.wrong_type("collection", v, "string")),
        None => return Err(CommandError::missing_field("getMore.collection")),
    };
    let ns = format!("{}.{coll}", req.db);
    let not_found = || CommandError::new(43, format!("cursor id {id} not found"));
    match req.state.cursors.describe(id) {
        None => return Err(not_found()),
        Some((cursor_ns, _)) if cursor_ns != ns => {
            return Err(CommandError::new(13, format!("Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {cursor_ns}"),
            ))
        }
        Some((_, owner)) if owner != req.cursor_owner() => {
            return Err(CommandError::new(13, format!("cursor id {id} was not created by the authenticated user"),
            ))
        }
        Some(_) => {}
    }
    if req.body.contains_key("maxTimeMS") {
        // Only awaitData (tailable) cursors take a time per getMore; there are none here.
        return Err(CommandError::bad_value(
            "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
        ));
    }
    let batch = batch_size(req, "batchSize")?;
    let (ns, rows, open) = req
        .state
        .cursors
        .get_more(id, batch, &req.interrupt)
        .ok_or_else(not_found)??;
    let docs = super::cursor_reply::batch_documents(req, rows)?;
    Ok(doc! {"cursor": {"nextBatch": docs, "id": if open { id } else { 0 }, "ns": ns}})
}

pub fn kill_cursors(req: &Request) -> CmdResult {
    req.check_fields(&["cursors"])?;
    req.collection()?;
    let ids = match req.body.get("cursors") {
        Some(Bson::Array(a)) => a.clone(),
        Some(v) => return Err(req.wrong_type("cursors", v, "array")),
        None => return Err(CommandError::missing_field("killCursors.cursors")),
    };
    let mut killed = Vec::new();
    let mut not_found = Vec::new();
    for id in ids {
        let Bson::Int64(i) = id else {
            return Err(req.wrong_type("cursors", &id, "long"));
        };
        let owned = match req.state.cursors.describe(i) {
            Some((ns, owner)) => {
                let (db, coll) = ns.split_once('.').unwrap_or((&ns, ""));
                owner == req.cursor_owner()
                    || req.allowed("killAnyCursor", Tgt::Cluster)?
                    || req.allowed("killAnyCursor", Tgt::Ns(db.into(), coll.into()))?
            }
            None => true,
        };
        if !owned {
            return Err(check::unauthorized(&req.db, &req.body));
        }
        if req.state.cursors.kill(i) {
            killed.push(i);
        } else {
            not_found.push(i);
        }
    }
    Ok(doc! {
        "cursorsKilled": killed,
        "cursorsNotFound": not_found,
        "cursorsAlive": Vec::<i64>::new(),
        "cursorsUnknown": Vec::<i64>::new(),
    })
}
