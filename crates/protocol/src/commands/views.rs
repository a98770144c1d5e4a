//! Non-materialized views, as MongoDB 7.0 has them: `create` with `viewOn` and
//! `pipeline` stores `{_id: "<db>.<view>", viewOn, pipeline}` in the regular collection
//! `<db>.system.views`. A read of a view (`aggregate`, `find`, `count`, `distinct`) runs
//! as an aggregate over the view's source with the view's pipeline in front (views on
//! views resolve to the first collection, at most 20 deep: 165; `aggregate` resolves
//! here, `find`, `count` and `distinct` become aggregates in `view_reads.rs`); its
//! cursor belongs to the view's namespace. Writes and index commands on a view answer 166
//! `CommandNotSupportedOnView`; `drop` deletes the definition, `collMod` replaces it.

use super::args::GENERIC_FIELDS;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_query::pipeline::Pipeline;

pub const VIEWS: &str = "system.views";
/// MongoDB's `ViewGraph::kMaxViewDepth`.
const MAX_DEPTH: usize = 20;

/// A view resolved down to a collection.
pub struct ResolvedView {
    /// The collection (or time-series collection) under the views.
    pub source: String,
    /// Every view's pipeline, innermost view first.
    pub pipeline: Vec<Document>,
}

/// The stored definition of view `coll`, if it is one.
fn definition(req: &Request, coll: &str) -> Result<Option<Document>, CommandError> {
    definition_in(&req.state.catalog, &req.db, coll)
}

fn definition_in(
    catalog: &hourglass_catalog::Catalog,
    db: &str,
    coll: &str,
) -> Result<Option<Document>, CommandError> {
    let Some(views) = catalog.get(db, VIEWS) else {
        return Ok(None);
    };
    Ok(views
        .get(&Bson::String(format!("{db}.{coll}")))?
        .filter(|d| !is_timeseries_definition(d)))
}

/// Whether a stored definition is a time-series collection's (MongoDB 7.0 keeps one in
/// `system.views` for each; reads of those go through the bucket store, not a pipeline).
fn is_timeseries_definition(d: &Document) -> bool {
    d.get_str("viewOn")
        .is_ok_and(|v| v.starts_with(super::target::BUCKETS_PREFIX))
}

/// The `$_internalUnpackBucket` spec of a time-series collection, as its view definition
/// and `$listCatalog` show it.
pub fn unpack_spec(options: &hourglass_timeseries::TimeseriesOptions) -> Document {
    let mut unpack = doc! {"timeField": &options.time_field};
    if let Some(m) = &options.meta_field {
        unpack.insert("metaField", m);
    }
    unpack.insert(
        "bucketMaxSpanSeconds",
        options.bucket_max_span_seconds as i32,
    );
    unpack
}

/// Stores (or replaces) the `system.views` entry of time-series collection `view` with
/// `options`, as MongoDB 7.0 defines it: a view on its buckets collection that unpacks them.
pub fn put_timeseries_definition(
    catalog: &hourglass_catalog::Catalog,
    db: &str,
    view: &str,
    options: &hourglass_timeseries::TimeseriesOptions,
) -> Result<(), CommandError> {
    let unpack = unpack_spec(options);
    let id = format!("{db}.{view}");
    let definition = doc! {
        "_id": &id,
        "viewOn": format!("{}{view}", super::target::BUCKETS_PREFIX),
        "pipeline": [{"$_internalUnpackBucket": unpack}],
    };
    remove_timeseries_definition(catalog, db, view)?;
    let views = catalog.get_or_create(db, VIEWS)?;
    let out = views.insert(vec![definition], true);
    match out.errors.into_iter().next() {
        Some((_, e)) => Err(e.into()),
        None => Ok(()),
    }
}

/// Deletes the `system.views` entry of time-series collection `view`, if any.
pub fn remove_timeseries_definition(
    catalog: &hourglass_catalog::Catalog,
    db: &str,
    view: &str,
) -> Result<(), CommandError> {
    if let Some(views) = catalog.get(db, VIEWS) {
        let filter = hourglass_query::filter::Filter::parse(&doc! {"_id": format!("{db}.{view}")})?;
        views.delete(&filter, true)?;
    }
    Ok(())
}

pub fn is_view(req: &Request, coll: &str) -> Result<bool, CommandError> {
    Ok(definition(req, coll)?.is_some())
}

/// Whether `db.coll` is a view (for commands that name a namespace in another database,
/// as `renameCollection` does from `admin`).
pub fn is_view_in(
    catalog: &hourglass_catalog::Catalog,
    db: &str,
    coll: &str,
) -> Result<bool, CommandError> {
    Ok(definition_in(catalog, db, coll)?.is_some())
}

fn depth_error() -> CommandError {
    CommandError::new(
        165,
        format!("View depth too deep or view cycle detected. Maximum depth is {MAX_DEPTH}"),
    )
}

/// `coll` resolved through its chain of views; `None` when it is not a view.
pub fn resolve(req: &Request, coll: &str) -> Result<Option<ResolvedView>, CommandError> {
    let mut name = coll.to_string();
    let mut pipeline: Vec<Document> = Vec::new();
    let mut depth = 0;
    while let Some(d) = definition(req, &name)? {
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(depth_error());
        }
        let mut stages = stored_pipeline(&d);
        stages.append(&mut pipeline);
        pipeline = stages;
        name = d.get_str("viewOn").unwrap_or_default().to_string();
    }
    Ok((depth > 0).then_some(ResolvedView {
        source: name,
        pipeline,
    }))
}

fn stored_pipeline(d: &Document) -> Vec<Document> {
    d.get_array("pipeline")
        .map(|a| a.iter().filter_map(|s| s.as_document().cloned()).collect())
        .unwrap_or_default()
}

/// 166 when `coll` is a view (writes and index commands).
pub fn refuse_on_view(req: &Request, coll: &str) -> Result<(), CommandError> {
    if is_view(req, coll)? {
        return Err(CommandError::new(
            166,
            format!("Namespace {}.{coll} is a view, not a collection", req.db),
        ));
    }
    Ok(())
}

/// `viewOn` and `pipeline` of a `create` or `collMod`, validated: the pipeline parses,
/// writes no collection, and the view would not be part of a cycle or too deep.
fn checked_definition(req: &Request, coll: &str) -> Result<Document, CommandError> {
    let view_on = match req.body.get("viewOn") {
        Some(Bson::String(s)) if !s.is_empty() => s.clone(),
        Some(Bson::String(_)) => {
            return Err(CommandError::bad_value("'viewOn' cannot be empty"));
        }
        Some(v) => return Err(req.wrong_type("viewOn", v, "string")),
        None => return Err(CommandError::invalid_options("'viewOn' is required")),
    };
    // MongoDB 6.1+: a view cannot read a time-series collection's buckets.
    if view_on.starts_with("system.buckets.") {
        return Err(CommandError::new(
            73,
            format!(
                "Invalid viewOn: {}.{view_on}: cannot create a view on a time-series bucket collection",
                req.db
            ),
        ));
    }
    let pipeline = match req.body.get("pipeline") {
        None => Vec::new(),
        Some(_) => req.documents("pipeline")?,
    };
    for stage in &pipeline {
        if let Some(name @ ("$out" | "$merge")) = stage.keys().next().map(String::as_str) {
            return Err(CommandError::new(
                40600,
                format!("{name} cannot be used in a view definition"),
            ));
        }
    }
    Pipeline::parse(&pipeline)?;
    // The chain under the new definition must not come back to `coll`.
    let mut name = view_on.clone();
    let mut depth = 1;
    loop {
        if name == coll {
            return Err(CommandError::new(
                5,
                format!(
                    "View cycle detected: {}.{coll} => {}.{view_on}",
                    req.db, req.db
                ),
            ));
        }
        let Some(d) = definition(req, &name)? else {
            break;
        };
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(depth_error());
        }
        name = d.get_str("viewOn").unwrap_or_default().to_string();
    }
    Ok(doc! {
        "_id": format!("{}.{coll}", req.db),
        "viewOn": view_on,
        "pipeline": pipeline,
    })
}

/// A view takes only `viewOn` and `pipeline` (collation, validators, capped... are
/// refused, 72).
fn check_view_options(req: &Request) -> Result<(), CommandError> {
    for k in req.body.keys().skip(1) {
        if !["viewOn", "pipeline"].contains(&k.as_str()) && !GENERIC_FIELDS.contains(&k.as_str()) {
            return Err(CommandError::invalid_options(format!(
                "option '{k}' is not supported on a view"
            )));
        }
    }
    Ok(())
}

/// `create` with `viewOn`.
pub fn create_view(req: &Request, coll: &str) -> CmdResult {
    check_view_options(req)?;
    let exists = super::target::namespace_exists(req, coll) || is_view(req, coll)?;
    if exists {
        return Err(CommandError::new(
            48,
            format!("Namespace {}.{coll} already exists", req.db),
        ));
    }
    let definition = checked_definition(req, coll)?;
    let views = req.state.catalog.get_or_create(&req.db, VIEWS)?;
    let out = views.insert(vec![definition], true);
    if let Some((_, e)) = out.errors.into_iter().next() {
        return Err(e.into());
    }
    Ok(Document::new())
}

/// `collMod` of a view: `viewOn` and `pipeline` together replace its definition.
pub fn modify_view(req: &Request, coll: &str) -> CmdResult {
    check_view_options(req)?;
    if !req.body.contains_key("viewOn") || !req.body.contains_key("pipeline") {
        return Err(CommandError::invalid_options(
            "must specify both 'viewOn' and 'pipeline' when modifying a view",
        ));
    }
    let definition = checked_definition(req, coll)?;
    let views = req.state.catalog.get_or_create(&req.db, VIEWS)?;
    let filter = hourglass_query::filter::Filter::parse(
        &doc! {"_id": definition.get("_id").cloned().unwrap_or(Bson::Null)},
    )?;
    views.delete(&filter, true)?;
    let out = views.insert(vec![definition], true);
    if let Some((_, e)) = out.errors.into_iter().next() {
        return Err(e.into());
    }
    Ok(Document::new())
}

/// `drop` of a view: deletes its definition.
pub fn drop_view(req: &Request, coll: &str) -> CmdResult {
    let Some(views) = req.state.catalog.get(&req.db, VIEWS) else {
        return Ok(Document::new());
    };
    let filter =
        hourglass_query::filter::Filter::parse(&doc! {"_id": format!("{}.{coll}", req.db)})?;
    views.delete(&filter, true)?;
    Ok(doc! {"ns": format!("{}.{coll}", req.db)})
}

/// The stored definitions of the views of `db`, each with the view's name.
pub fn definitions(
    catalog: &hourglass_catalog::Catalog,
    db: &str,
) -> Result<Vec<(String, Document)>, CommandError> {
    let Some(views) = catalog.get(db, VIEWS) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{db}.");
    let mut out = Vec::new();
    for d in views.scan() {
        let d = d?;
        if is_timeseries_definition(&d) {
            continue;
        }
        if let Some(name) = d
            .get_str("_id")
            .ok()
            .and_then(|id| id.strip_prefix(&prefix))
        {
            out.push((name.to_string(), d.clone()));
        }
    }
    Ok(out)
}

/// The `listCollections` entries of the database's views.
pub fn list_entries(req: &Request) -> Result<Vec<Document>, CommandError> {
    Ok(definitions(&req.state.catalog, &req.db)?
        .into_iter()
        .map(|(name, d)| {
            doc! {
                "name": name,
                "type": "view",
                "options": {"viewOn": d.get_str("viewOn").unwrap_or_default(), "pipeline": stored_pipeline(&d)},
                "info": {"readOnly": true},
            }
        })
        .collect())
}
