//! Index commands of regular collections: `createIndexes`, `dropIndexes`, `listIndexes`,
//! and `validate` (index/document agreement). Time-series collections are answered
//! separately (their index translation is another module's job).

use super::cursor_reply::listing_reply;
use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_catalog::index::build::validate as validate_collection;
use hourglass_catalog::index::spec::{check_id_index_spec, id_index_document};
use hourglass_catalog::index::IndexSpec;
use hourglass_catalog::{CatalogError, Collection, DropIndexes};

fn not_found(req: &Request, coll: &str) -> CommandError {
    CommandError::new(26, format!("ns does not exist: {}.{coll}", req.db))
}

/// The `listIndexes` documents of a regular collection: `_id_` then the secondary ones.
pub fn index_documents(c: &Collection) -> Vec<Document> {
    let id = match c.options().get_document("clusteredIndex") {
        Ok(clustered) => {
            let mut d = clustered.clone();
            d.insert("clustered", true);
            d
        }
        Err(_) => id_index_document(),
    };
    let mut out = vec![id];
    out.extend(c.indexes().iter().map(|i| i.spec.to_document()));
    out
}

pub fn create_indexes(req: &Request) -> CmdResult {
    req.check_fields(&[
        "indexes",
        "commitQuorum",
        "ignoreUnknownIndexOptions",
        "isTimeseriesNamespace",
    ])?;
    let coll = req.collection()?;
    super::views::refuse_on_view(req, &coll)?;
    let specs = match req.body.get("indexes") {
        Some(Bson::Array(a)) => a.clone(),
        Some(v) => return Err(req.wrong_type("indexes", v, "array")),
        None => return Err(CommandError::missing_field("createIndexes.indexes")),
    };
    if specs.is_empty() {
        return Err(CommandError::bad_value(
            "Must specify at least one index to create",
        ));
    }
    let target = Target::resolve(req, &coll);
    let specs = cluster_key_specs(&target, specs)?;
    for s in &specs {
        require_key_and_name(s)?;
    }
    if let Target::TimeSeries { buckets, options } | Target::Buckets { buckets, options } = &target
    {
        let docs = specs
            .iter()
            .map(|s| match s {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(CommandError::type_mismatch(
                    "The elements of the 'indexes' array must be objects",
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let view = matches!(target, Target::TimeSeries { .. });
        return super::indexes_ts::create(&req.state, buckets, options, &docs, view);
    }
    // An index without a collation of its own takes the collection's default one.
    let default_collation = req
        .state
        .catalog
        .get(&req.db, &coll)
        .and_then(|c| c.options().get_document("collation").ok().cloned());
    let mut parsed = Vec::with_capacity(specs.len());
    for s in &specs {
        let Bson::Document(d) = s else {
            return Err(CommandError::type_mismatch(
                "The elements of the 'indexes' array must be objects",
            ));
        };
        let mut d = d.clone();
        // A v: 1 index takes the simple collation whatever the collection's default.
        let v1 = d
            .get("v")
            .and_then(hourglass_query::num::Num::from_bson)
            .is_some_and(|n| n.as_f64() == 1.0);
        if let Some(c) = default_collation
            .as_ref()
            .filter(|_| !d.contains_key("collation") && !v1)
        {
            d.insert("collation", c.clone());
        }
        let d = &d;
        // The `_id` key's own checks come unprefixed, as in MongoDB.
        check_id_index_spec(d)?;
        let spec = IndexSpec::parse(d).map_err(|e| {
            let mut err = CommandError::from(e);
            if matches!(err.code, 14 | 67 | 197 | 224) {
                err.errmsg = format!("Error in specification {d} :: caused by :: {}", err.errmsg);
            }
            err
        })?;
        parsed.push(spec);
    }
    let out = req.state.catalog.create_indexes(&req.db, &coll, parsed)?;
    let mut reply = doc! {
        "numIndexesBefore": out.before as i32,
        "numIndexesAfter": out.after as i32,
    };
    // MongoDB answers "all indexes already exist" without createdCollectionAutomatically
    // unless the command made the collection.
    if out.before != out.after || out.created_collection {
        reply.insert("createdCollectionAutomatically", out.created_collection);
    }
    if out.before == out.after {
        reply.insert("note", "all indexes already exist");
    }
    Ok(reply)
}

/// MongoDB's `validateIndexSpec` requires `key` then `name` in every entry (9
/// FailedToParse); drivers and shells generate the name, the server never does.
fn require_key_and_name(s: &Bson) -> Result<(), CommandError> {
    let Bson::Document(d) = s else {
        return Ok(());
    };
    for field in ["key", "name"] {
        if !d.contains_key(field) {
            return Err(CommandError::new(
                9,
                format!("Error in specification {d} :: caused by :: The '{field}' field is a required property of an index specification"),
            ));
        }
    }
    Ok(())
}

/// Specs with `clustered: true` name the cluster key of a clustered collection (a buckets
/// collection, or one created with `clusteredIndex`). As in MongoDB, `{_id: 1}` with
/// `unique: true` there is that key, and creating it is a no-op: it is replaced by the `_id`
/// spec, which exists. Anywhere else, or without `unique`, the option is refused.
fn cluster_key_specs(target: &Target, specs: Vec<Bson>) -> Result<Vec<Bson>, CommandError> {
    specs
        .into_iter()
        .map(|s| {
            let Bson::Document(d) = &s else { return Ok(s) };
            let Some(flag) = d.get("clustered") else { return Ok(s) };
            let mut rest = d.clone();
            rest.remove("clustered");
            if !matches!(flag, Bson::Boolean(true)) && flag.as_i32() != Some(1) {
                return Ok(Bson::Document(rest));
            }
            if !matches!(d.get("unique"), Some(Bson::Boolean(true))) {
                return Err(CommandError::new(
                    67,
                    format!("Error in specification {d} :: caused by :: The 'clustered' option requires 'unique: true'"),
                ));
            }
            let clustered = match target {
                Target::Regular(None) => {
                    return Err(CommandError::new(
                        6100900,
                        "createIndex with the 'clustered' option cannot create a collection; create a clustered collection with the 'clusteredIndex' option instead",
                    ))
                }
                Target::Regular(Some(c)) => c.options().contains_key("clusteredIndex"),
                Target::Buckets { .. } => true,
                Target::TimeSeries { .. } => false,
            };
            let on_id = d.get_document("key").is_ok_and(|k| {
                k.len() == 1
                    && k.get("_id")
                        .and_then(hourglass_query::num::Num::from_bson)
                        .is_some_and(|n| n.as_f64() == 1.0)
            });
            if !clustered || !on_id {
                return Err(CommandError::new(
                    6243700,
                    format!("Cannot create index with option 'clustered' unless it is on the cluster key {{_id: 1}} of a clustered collection: {d}"),
                ));
            }
            Ok(Bson::Document(doc! {"key": {"_id": 1}, "name": "_id_"}))
        })
        .collect()
}

pub fn drop_indexes(req: &Request) -> CmdResult {
    req.check_fields(&["index"])?;
    let coll = req.collection()?;
    super::views::refuse_on_view(req, &coll)?;
    let which = match req.body.get("index") {
        Some(Bson::String(s)) if s == "*" => DropIndexes::All,
        Some(Bson::String(s)) => DropIndexes::Names(vec![s.clone()]),
        Some(Bson::Document(d)) => DropIndexes::KeyPattern(d.clone()),
        Some(Bson::Array(a)) => DropIndexes::Names(
            a.iter()
                .map(|v| match v {
                    Bson::String(s) => Ok(s.clone()),
                    other => Err(req.wrong_type("index", other, "string")),
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(v) => return Err(req.wrong_type("index", v, "string or object")),
        None => return Err(CommandError::missing_field("dropIndexes.index")),
    };
    match Target::resolve(req, &coll) {
        Target::TimeSeries { buckets, options } => super::indexes_ts::drop(
            &buckets,
            &options,
            req.body.get("index").unwrap_or(&Bson::Null),
            true,
        ),
        Target::Buckets { buckets, options } => super::indexes_ts::drop(
            &buckets,
            &options,
            req.body.get("index").unwrap_or(&Bson::Null),
            false,
        ),
        Target::Regular(None) => Err(CommandError::new(
            26,
            format!("ns not found {}.{coll}", req.db),
        )),
        Target::Regular(Some(_)) => {
            let was = req
                .state
                .catalog
                .drop_indexes(&req.db, &coll, &which)
                .map_err(|e| match e {
                    // MongoDB's AmbiguousIndexKeyPattern is 181.
                    CatalogError::AmbiguousIndexKeyPattern(m) => CommandError::new(181, m),
                    other => CommandError::from(other),
                })?;
            let mut reply = doc! {"nIndexesWas": was as i32};
            if which == DropIndexes::All {
                reply.insert("msg", "non-_id indexes dropped for collection");
            }
            Ok(reply)
        }
    }
}

pub fn list_indexes(req: &Request) -> CmdResult {
    req.check_fields(&["cursor", "includeBuildUUIDs", "includeIndexBuildInfo"])?;
    let coll = req.collection()?;
    super::views::refuse_on_view(req, &coll)?;
    let indexes = match Target::resolve(req, &coll) {
        Target::Regular(Some(c)) => index_documents(&c),
        // Time-series collections have no _id index in listIndexes, as in MongoDB.
        Target::TimeSeries { buckets, options } => {
            super::indexes_ts::list(&buckets, &options, true)?
        }
        Target::Buckets { buckets, options } => super::indexes_ts::list(&buckets, &options, false)?,
        Target::Regular(None) => return Err(not_found(req, &coll)),
    };
    listing_reply(req, format!("{}.{coll}", req.db), indexes)
}

pub fn validate(req: &Request) -> CmdResult {
    req.check_fields(&[
        "full",
        "repair",
        "background",
        "scandata",
        "checkBSONConformance",
        "metadata",
        "fixMultikey",
    ])?;
    let coll = req.collection()?;
    super::views::refuse_on_view(req, &coll)?;
    let (buckets, options) = match Target::resolve(req, &coll) {
        Target::Regular(Some(c)) => return validate_regular(req, &coll, &c),
        Target::TimeSeries { buckets, options } | Target::Buckets { buckets, options } => {
            (buckets, options)
        }
        Target::Regular(None) => {
            return Err(CommandError::new(
                26,
                format!("Collection '{}.{coll}' does not exist to validate.", req.db),
            ))
        }
    };
    // Every check runs in both modes (`full` adds nothing further).
    let v = hourglass_timeseries::TimeseriesStore::validate(&buckets, &options)?;
    let specs = hourglass_timeseries::TimeseriesStore::index_specs(&buckets, &options)?;
    // The indexes are answered from each bucket's meta and control fields: every
    // bucket is one entry of each.
    let keys = specs
        .iter()
        .filter_map(|s| s.get_str("name").ok())
        .map(|name| (name.to_string(), v.buckets))
        .collect();
    Ok(validate_reply(
        buckets.namespace().to_string(),
        buckets.uuid,
        Checked {
            nrecords: v.buckets,
            non_compliant: v.non_compliant,
            keys,
            warnings: v.warnings,
            errors: v.errors,
            corrupt: v.corrupt.into_iter().map(Bson::ObjectId).collect(),
        },
    ))
}

fn validate_regular(req: &Request, coll: &str, c: &Collection) -> CmdResult {
    let report = validate_collection(c)?;
    Ok(validate_reply(
        format!("{}.{coll}", req.db),
        c.uuid,
        Checked {
            nrecords: report.nrecords,
            non_compliant: 0,
            keys: report.keys_per_index,
            warnings: Vec::new(),
            errors: report.errors,
            corrupt: Vec::new(),
        },
    ))
}

/// What a `validate` checked, for its reply.
struct Checked {
    nrecords: u64,
    non_compliant: u64,
    /// Entries per index.
    keys: Vec<(String, u64)>,
    warnings: Vec<String>,
    errors: Vec<String>,
    corrupt: Vec<Bson>,
}

fn validate_reply(ns: String, uuid: bson::Uuid, c: Checked) -> Document {
    let valid = c.errors.is_empty();
    let mut keys = Document::new();
    let mut details = Document::new();
    for (name, n) in &c.keys {
        keys.insert(name.clone(), *n as i64);
        details.insert(name.clone(), doc! {"valid": valid});
    }
    doc! {
        "ns": ns,
        "uuid": uuid,
        "nInvalidDocuments": c.corrupt.len() as i64,
        "nNonCompliantDocuments": c.non_compliant as i64,
        "nrecords": c.nrecords as i64,
        "nIndexes": c.keys.len() as i32,
        "keysPerIndex": keys,
        "indexDetails": details,
        "valid": valid,
        "repaired": false,
        "warnings": c.warnings,
        "errors": c.errors,
        "extraIndexEntries": Vec::<Document>::new(),
        "missingIndexEntries": Vec::<Document>::new(),
        "corruptRecords": c.corrupt,
    }
}
