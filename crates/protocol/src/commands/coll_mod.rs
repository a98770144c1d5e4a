//! `collMod`: for time-series collections (by their name or their buckets'),
//! `timeseries.granularity` (only coarser),
//! `timeseries.bucketMaxSpanSeconds`/`bucketRoundingSeconds` (only larger, together) and
//! `expireAfterSeconds` (a number, or "off") and `archive` (a rule, or "off": files already
//! archived stay and stay queryable). For regular collections, `index` changes
//! one index's `expireAfterSeconds`, `hidden`, or converts it to unique (`prepareUnique`,
//! then `unique`, checked first with `dryRun`) or back (`forceNonUnique`), and the
//! validation options
//! (`validator`, `validationLevel`, `validationAction`). For views, `viewOn` and `pipeline`
//! (in `views.rs`).

use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{Bson, Document};
use hourglass_catalog::index::spec::parse_expire_after_seconds;
use hourglass_catalog::{IndexChanges, IndexSelector};
use hourglass_timeseries::{validate_expire_after_seconds, Granularity};

/// MongoDB 7.0's flag that buckets may hold mixed-schema data. Hourglass reads every
/// bucket column as possibly mixed (a column's values are compared by MongoDB's order
/// whatever their types), so the flag is stored and shown and changes no read.
pub const MIXED_SCHEMA: &str = "timeseriesBucketsMayHaveMixedSchemaData";

pub fn coll_mod(req: &Request) -> CmdResult {
    if let Ok(coll) = req.collection() {
        if super::views::is_view(req, &coll)? {
            return super::views::modify_view(req, &coll);
        }
    }
    req.check_fields(&[
        "timeseries",
        "expireAfterSeconds",
        "archive",
        MIXED_SCHEMA,
        "index",
        "validator",
        "validationLevel",
        "validationAction",
        "dryRun",
    ])?;
    let coll = req.collection()?;
    let (buckets, mut options) = match Target::resolve(req, &coll) {
        // MongoDB modifies a time-series collection through its buckets collection, and
        // takes the same options on `system.buckets.<coll>` itself.
        Target::TimeSeries { buckets, options } | Target::Buckets { buckets, options } => {
            (buckets, options)
        }
        Target::Regular(None) => {
            return Err(CommandError::new(
                26,
                format!("ns does not exist: {}.{coll}", req.db),
            ))
        }
        Target::Regular(Some(_)) if req.body.contains_key(MIXED_SCHEMA) => {
            return Err(CommandError::invalid_options(format!(
                "{MIXED_SCHEMA} is only supported on time-series collections"
            )))
        }
        Target::Regular(Some(_)) => return coll_mod_regular(req, &coll),
    };
    for k in ["validator", "validationLevel", "validationAction"] {
        if req.body.contains_key(k) {
            return Err(CommandError::invalid_options(format!(
                "option not supported on a time-series collection: {k}"
            )));
        }
    }
    // Its indexes cannot become unique, so there is nothing to dry-run.
    if req.opt_bool("dryRun")?.unwrap_or(false) {
        return Err(CommandError::invalid_options(
            "dry run mode requires an index modification with unique: true, which time-series collections do not support",
        ));
    }
    let mut stored = buckets.options();
    if let Some(ts) = req.opt_document("timeseries")? {
        let mut granularity = None;
        let (mut span, mut rounding) = (None, None);
        for (k, v) in ts {
            match (k.as_str(), v) {
                ("granularity", Bson::String(g)) => {
                    granularity = Some(Granularity::parse(g).ok_or_else(|| {
                        CommandError::bad_value(format!(
                            "Enumeration value '{g}' for field 'collMod.timeseries.granularity' is not a valid value."
                        ))
                    })?)
                }
                ("bucketMaxSpanSeconds", v) => span = Some(parse_seconds(k, v)?),
                ("bucketRoundingSeconds", v) => rounding = Some(parse_seconds(k, v)?),
                ("granularity", v) => return Err(req.wrong_type("timeseries.granularity", v, "string")),
                (other, _) => return Err(CommandError::unknown_field("collMod.timeseries", other)),
            }
        }
        options = options.apply_coll_mod(granularity, span, rounding)?;
        stored.insert("timeseries", options.to_document());
        let view = coll
            .strip_prefix(super::target::BUCKETS_PREFIX)
            .unwrap_or(&coll);
        super::views::put_timeseries_definition(&req.state.catalog, &req.db, view, &options)?;
    }
    match req.body.get("expireAfterSeconds") {
        None => {}
        Some(Bson::String(s)) if s == "off" => {
            stored.remove("expireAfterSeconds");
        }
        Some(Bson::String(s)) => {
            return Err(CommandError::invalid_options(format!(
                "Invalid string value for the 'clusteredIndex::expireAfterSeconds' option. Got: '{s}'. Accepted value is 'off'"
            )))
        }
        Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_))) => {
            stored.insert("expireAfterSeconds", validate_expire_after_seconds(v)?);
        }
        Some(v) => {
            return Err(CommandError::new(
                14,
                format!(
                    "BSON field 'collMod.expireAfterSeconds' is the wrong type '{}', expected types '[string, long, int, decimal, double]'",
                    super::args::type_name(v)
                ),
            ))
        }
    }
    match req.body.get("archive") {
        None => {}
        Some(Bson::String(s)) if s == "off" => {
            stored.remove("archive");
        }
        Some(v) => {
            stored.insert("archive", super::archive_rule::archive_option(v, &options)?);
        }
    }
    if let Some(mixed) = req.opt_bool(MIXED_SCHEMA)? {
        stored.insert(MIXED_SCHEMA, mixed);
    }
    let mut reply = Document::new();
    if let Some(index) = req.opt_document("index")? {
        reply = super::indexes_ts::set_hidden(&buckets, &options, index)?;
    }
    if ["timeseries", "expireAfterSeconds", "archive", MIXED_SCHEMA]
        .iter()
        .any(|k| req.body.contains_key(*k))
    {
        let name = buckets.namespace().coll;
        req.state.catalog.set_options(&req.db, &name, stored)?;
        // Only new bucketing options close the open buckets.
        if req.body.contains_key("timeseries") {
            req.state.timeseries.set_options(&buckets, &options)?;
        }
    }
    Ok(reply)
}

/// `collMod.timeseries.bucketMaxSpanSeconds` / `bucketRoundingSeconds`: a number from 1
/// to one year (14 for another type, 2 out of range), checked before any transition rule.
fn parse_seconds(name: &str, v: &Bson) -> Result<i64, CommandError> {
    Ok(hourglass_timeseries::options::parse_bucket_seconds_in(
        "collMod", name, v,
    )?)
}

/// collMod of a regular collection: the `index` option and the validation options.
fn coll_mod_regular(req: &Request, coll: &str) -> CmdResult {
    if req.body.contains_key("timeseries") {
        return Err(CommandError::invalid_options(
            "option only supported on a time-series collection: timeseries",
        ));
    }
    for k in ["expireAfterSeconds", "archive"] {
        if req.body.contains_key(k) {
            return Err(CommandError::invalid_options(format!(
                "collMod option '{k}' is not supported on regular collections by this server yet"
            )));
        }
    }
    let mut validation = Vec::new();
    for k in super::validation_options::KEYS {
        if let Some(v) = req.body.get(k) {
            validation.push((k, super::validation_options::check(req, coll, k, v)?));
        }
    }
    let dry_run = req.opt_bool("dryRun")?.unwrap_or(false);
    let index = match req.opt_document("index")? {
        Some(spec) => Some(index_changes(req, spec, dry_run)?),
        None if dry_run => {
            return Err(CommandError::invalid_options(
                "dry run mode requires an valid index modification.",
            ))
        }
        None => None,
    };
    if let Some((_, changes, n)) = &index {
        let modifications = n + validation.len();
        if changes.prepare_unique.is_some() && modifications > 1 {
            return Err(CommandError::invalid_options(
                "prepareUnique cannot be combined with any other modification.",
            ));
        }
        if dry_run && modifications > 1 {
            return Err(CommandError::invalid_options(
                "unique: true cannot be combined with any other modification in dry run mode.",
            ));
        }
    }
    let reply = match index {
        Some((selector, changes, _)) => modify_index(req, coll, &selector, &changes)?,
        None => Document::new(),
    };
    if !validation.is_empty() {
        let Some(c) = req.state.catalog.get(&req.db, coll) else {
            return Err(CommandError::new(
                26,
                format!("ns does not exist: {}.{coll}", req.db),
            ));
        };
        let mut options = c.options();
        for (k, v) in validation {
            options.insert(k, v);
        }
        req.state.catalog.set_options(&req.db, coll, options)?;
    }
    Ok(reply)
}

/// collMod's `index`: which index, what changes (`expireAfterSeconds`, `hidden`, and the
/// unique conversion's `prepareUnique`, `unique`, `forceNonUnique`), and how many.
fn index_changes(
    req: &Request,
    spec: &Document,
    dry_run: bool,
) -> Result<(IndexSelector, IndexChanges, usize), CommandError> {
    // `prepareUnique`, `unique` and `forceNonUnique` are booleans that take numbers too.
    let flag = |k: &str, v: &Bson| match (v, hourglass_query::num::Num::from_bson(v)) {
        (Bson::Boolean(b), _) => Ok(*b),
        (_, Some(n)) => Ok(n.as_f64() != 0.0),
        _ => Err(req.wrong_type(&format!("index.{k}"), v, "bool")),
    };
    let mut selector = None;
    let mut changes = IndexChanges {
        dry_run,
        ..IndexChanges::default()
    };
    let (mut unique, mut force) = (None, None);
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("name", Bson::String(n)) => selector = Some(IndexSelector::Name(n.clone())),
            ("keyPattern", Bson::Document(d)) => {
                selector = Some(IndexSelector::KeyPattern(d.clone()))
            }
            ("expireAfterSeconds", v) => {
                changes.expire = Some(parse_expire_after_seconds(v).map_err(CommandError::from)?)
            }
            ("hidden", Bson::Boolean(b)) => changes.hidden = Some(*b),
            ("prepareUnique", v) => changes.prepare_unique = Some(flag(k, v)?),
            ("unique", v) => unique = Some(flag(k, v)?),
            ("forceNonUnique", v) => force = Some(flag(k, v)?),
            ("name", v) => return Err(req.wrong_type("index.name", v, "string")),
            ("keyPattern", v) => return Err(req.wrong_type("index.keyPattern", v, "object")),
            ("hidden", v) => return Err(req.wrong_type("index.hidden", v, "bool")),
            (other, _) => return Err(CommandError::unknown_field("collMod.index", other)),
        }
    }
    if dry_run && unique != Some(true) {
        return Err(CommandError::invalid_options(
            "dry run mode requires an index modification with unique: true.",
        ));
    }
    let Some(selector) = selector else {
        return Err(CommandError::invalid_options(
            "collMod 'index' requires either the 'name' or 'keyPattern' field",
        ));
    };
    let n = [
        changes.expire.is_some(),
        changes.hidden.is_some(),
        changes.prepare_unique.is_some(),
        unique.is_some(),
        force.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count();
    if n == 0 {
        return Err(CommandError::invalid_options(
            "no expireAfterSeconds, hidden, prepareUnique, unique or forceNonUnique field",
        ));
    }
    if unique == Some(true) && force == Some(true) {
        return Err(CommandError::invalid_options(
            "collMod does not support 'unique' and 'forceNonUnique' options at the same time",
        ));
    }
    if unique == Some(false) {
        return Err(CommandError::bad_value("Cannot make index non-unique"));
    }
    if force == Some(false) {
        return Err(CommandError::bad_value(
            "'forceNonUnique: false' is not supported",
        ));
    }
    changes.unique = unique == Some(true);
    changes.force_non_unique = force == Some(true);
    Ok((selector, changes, n))
}

/// Applies `changes` to the index `selector` names; the reply's old and new values.
fn modify_index(
    req: &Request,
    coll: &str,
    selector: &IndexSelector,
    changes: &IndexChanges,
) -> CmdResult {
    let m = req
        .state
        .catalog
        .modify_index(&req.db, coll, selector, changes)?;
    let mut reply = Document::new();
    if let (Some(o), Some(n)) = (m.expire_old, m.expire_new) {
        reply.insert("expireAfterSeconds_old", o);
        reply.insert("expireAfterSeconds_new", n);
    }
    if let (Some(o), Some(n)) = (m.hidden_old, m.hidden_new) {
        reply.insert("hidden_old", o);
        reply.insert("hidden_new", n);
    }
    if m.unique_new {
        reply.insert("unique_new", true);
    }
    if let (Some(o), Some(n)) = (m.prepare_unique_old, m.prepare_unique_new) {
        reply.insert("prepareUnique_old", o);
        reply.insert("prepareUnique_new", n);
    }
    if m.force_non_unique_new {
        reply.insert("forceNonUnique_new", true);
    }
    Ok(reply)
}
