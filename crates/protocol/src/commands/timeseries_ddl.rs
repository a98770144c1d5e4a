//! Time-series DDL: `create` with `timeseries` options, and how `listCollections` shows a
//! time-series collection (the view entry and its `system.buckets.<coll>` entry).

use super::target::{Target, BUCKETS_PREFIX};
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_catalog::{CatalogError, Collection};
use hourglass_timeseries::{validate_expire_after_seconds, TimeseriesOptions};

/// Options MongoDB accepts beside `timeseries` in `create`.
const ALLOWED_WITH_TIMESERIES: &[&str] = &[
    "timeseries",
    "expireAfterSeconds",
    "storageEngine",
    "indexOptionDefaults",
    "collation",
    "archive",
    super::coll_mod::MIXED_SCHEMA,
];

/// `create`'s own fields in the order of MongoDB's IDL, which is the order its check of
/// the options allowed beside `timeseries` meets them.
const CREATE_FIELDS: &[&str] = &[
    "capped",
    "autoIndexId",
    "idIndex",
    "size",
    "max",
    "storageEngine",
    "validator",
    "validationLevel",
    "validationAction",
    "indexOptionDefaults",
    "viewOn",
    "pipeline",
    "collation",
    "recordPreImages",
    "changeStreamPreAndPostImages",
    "timeseries",
    "clusteredIndex",
    "expireAfterSeconds",
    "encryptedFields",
    "temp",
    "flags",
];

/// A `safeBool` field's value: booleans, and numbers other than zero.
fn truthy(v: Option<&Bson>) -> bool {
    match v {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(i)) => *i != 0,
        Some(Bson::Int64(i)) => *i != 0,
        Some(Bson::Double(d)) => *d != 0.0,
        Some(_) => true,
    }
}

/// The checks MongoDB's `create` makes, in its order, before it creates a time-series
/// collection: unknown fields (40415), then capped/size/max, temp, pipeline and
/// encryptedFields (72, 6367301, 6346401), then each option not allowed with
/// `timeseries` (72).
fn check_create_fields(req: &Request, ns: &str) -> Result<(), CommandError> {
    let body = &req.body;
    for (k, _) in body.iter().skip(1) {
        let k = k.as_str();
        if !super::args::GENERIC_FIELDS.contains(&k)
            && !CREATE_FIELDS.contains(&k)
            && !ALLOWED_WITH_TIMESERIES.contains(&k)
        {
            return Err(CommandError::unknown_field("create", k));
        }
    }
    let capped = truthy(body.get("capped"));
    if !body.contains_key("clusteredIndex") {
        if capped && !body.contains_key("size") {
            return Err(CommandError::invalid_options(
                "the 'size' field is required when 'capped' is true",
            ));
        }
        if (body.contains_key("size") || body.contains_key("max")) && !capped {
            return Err(CommandError::invalid_options(
                "the 'capped' field needs to be true when either the 'size' or 'max' fields are present",
            ));
        }
    }
    if truthy(body.get("temp")) {
        return Err(CommandError::invalid_options(
            "the 'temp' field is an invalid option",
        ));
    }
    if body.contains_key("pipeline") && !body.contains_key("viewOn") {
        return Err(CommandError::invalid_options(
            "'pipeline' requires 'viewOn' to also be specified",
        ));
    }
    if body.contains_key("encryptedFields") {
        if capped {
            return Err(CommandError::new(
                6367301,
                "Encrypted fields cannot be used with capped collections",
            ));
        }
        return Err(CommandError::new(
            6346401,
            "Encrypted fields cannot be used with views or timeseries collections",
        ));
    }
    for k in CREATE_FIELDS {
        let Some(v) = body.get(*k) else { continue };
        if (*k == "capped" && !truthy(Some(v))) || ALLOWED_WITH_TIMESERIES.contains(k) {
            continue;
        }
        if *k == "temp" && !truthy(Some(v)) {
            continue;
        }
        return Err(CommandError::invalid_options(format!(
            "{ns}: 'timeseries' is not allowed with '{k}'"
        )));
    }
    Ok(())
}

/// `create` of a time-series collection: validates the options as MongoDB does and
/// creates `system.buckets.<coll>` carrying them.
pub fn create_timeseries(req: &Request, coll: &str) -> CmdResult {
    let ns = format!("{}.{coll}", req.db);
    let mut stored = Document::new();
    check_create_fields(req, &ns)?;
    let spec = req.body.get("timeseries").unwrap_or(&Bson::Null);
    let options = TimeseriesOptions::parse_value(Some(&ns), spec)?;
    stored.insert("timeseries", options.to_document());
    if let Some(v) = req.body.get("expireAfterSeconds") {
        stored.insert("expireAfterSeconds", validate_expire_after_seconds(v)?);
    }
    if let Some(v) = req.body.get("archive") {
        stored.insert("archive", super::archive_rule::archive_option(v, &options)?);
    }
    // The default collation of its reads, writes and indexes (stored with every option
    // filled in; the simple one is none).
    if let Some(v) = req.body.get("collation") {
        if let Some(c) = hourglass_query::collation::parse(v)? {
            stored.insert("collation", c.spec().clone());
        }
    }
    // Empty ones are no options (MongoDB neither shows nor compares them).
    for k in ["storageEngine", "indexOptionDefaults"] {
        match req.body.get(k) {
            Some(Bson::Document(d)) if d.is_empty() => {}
            Some(v) => {
                stored.insert(k, v.clone());
            }
            None => {}
        }
    }
    if let Some(mixed) = req.opt_bool(super::coll_mod::MIXED_SCHEMA)? {
        stored.insert(super::coll_mod::MIXED_SCHEMA, mixed);
    }
    // The collection is reached through its view name whichever name created it, so that
    // name must not be a regular collection or a view already (MongoDB 7.0 creates the
    // buckets namespace then anyway, leaving a collection it cannot read as time series).
    let view_name = coll.strip_prefix(BUCKETS_PREFIX).unwrap_or(coll);
    if matches!(Target::resolve(req, view_name), Target::Regular(Some(_)))
        || super::views::is_view(req, view_name)?
    {
        return Err(CommandError::new(
            48,
            format!("Collection {}.{view_name} already exists.", req.db),
        ));
    }
    let buckets_name = format!("{BUCKETS_PREFIX}{view_name}");
    match req.state.catalog.create(&req.db, &buckets_name, stored) {
        Ok((_, created)) => {
            if created {
                super::views::put_timeseries_definition(
                    &req.state.catalog,
                    &req.db,
                    view_name,
                    &options,
                )?;
            }
            Ok(Document::new())
        }
        Err(CatalogError::NamespaceExists(_)) => Err(CommandError::new(
            48,
            format!("A timeseries collection already exists. NS: {ns}"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// The schema MongoDB 7.0 puts on a buckets collection.
fn bucket_validator(time_field: &str) -> Document {
    let time_bound = doc! {"bsonType": "object", "required": [time_field], "properties": {time_field: {"bsonType": "date"}}};
    doc! {"$jsonSchema": {
        "bsonType": "object",
        "required": ["_id", "control", "data"],
        "properties": {
            "_id": {"bsonType": "objectId"},
            "control": {
                "bsonType": "object",
                "required": ["version", "min", "max"],
                "properties": {
                    "version": {"bsonType": "number"},
                    "min": time_bound.clone(),
                    "max": time_bound,
                    "closed": {"bsonType": "bool"},
                },
            },
            "data": {"bsonType": "object"},
            "meta": {},
        },
        "additionalProperties": false,
    }}
}

/// The two `listCollections` entries of a time-series collection whose buckets
/// collection is `buckets`: the view, then the buckets collection.
pub fn describe_timeseries(buckets: &Collection, options: &TimeseriesOptions) -> [Document; 2] {
    let name = buckets.namespace().coll;
    let view_name = name
        .strip_prefix(BUCKETS_PREFIX)
        .unwrap_or(&name)
        .to_string();
    let view = doc! {
        "name": view_name,
        "type": "timeseries",
        "options": buckets.options(),
        "info": {"readOnly": false},
    };
    let mut bucket_options =
        doc! {"validator": bucket_validator(&options.time_field), "clusteredIndex": true};
    bucket_options.extend(buckets.options());
    let bucket_entry = doc! {
        "name": name,
        "type": "collection",
        "options": bucket_options,
        "info": {"readOnly": false, "uuid": buckets.uuid},
    };
    [view, bucket_entry]
}
