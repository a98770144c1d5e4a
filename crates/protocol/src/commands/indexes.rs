//! Index commands of regular collections: `createIndexes`, `dropIndexes`, `listIndexes`,
//! and `validate` (index/document agreement). Time-series collections are answered
//! separately (their index translation is another module's job).

use super::cursor_reply::listing_reply;
use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_catalog::index::build::validate as validate_collection;
use hourglass_catalog::index::spec::id_index_document;
use hourglass_catalog::index::IndexSpec;
use hourglass_catalog::{Collection, DropIndexes};

fn not_found(req: &Request, coll: &str) -> CommandError {
    CommandError::new(
        26,
        "NamespaceNotFound",
        format!("ns does not exist: {}.{coll}", req.db),
    )
}

fn timeseries_unsupported(op: &str) -> CommandError {
    CommandError::invalid_options(format!(
        "{op} on time-series collections is not supported by this server yet"
    ))
}

/// The `listIndexes` documents of a regular collection: `_id_` then the secondary ones.
pub fn index_documents(c: &Collection) -> Vec<Document> {
    let mut out = vec![id_index_document()];
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
        for d in &docs {
            if !d.contains_key("name") {
                return Err(CommandError::new(
                    67,
                    "CannotCreateIndex",
                    format!("Error in specification {d} :: caused by :: The 'name' field is a required property of an index specification"),
                ));
            }
        }
        let view = matches!(target, Target::TimeSeries { .. });
        return super::indexes_ts::create(&req.state, buckets, options, &docs, view);
    }
    let mut parsed = Vec::with_capacity(specs.len());
    for s in &specs {
        let Bson::Document(d) = s else {
            return Err(CommandError::type_mismatch(
                "The elements of the 'indexes' array must be objects",
            ));
        };
        let spec = IndexSpec::parse(d).map_err(|e| {
            let mut err = CommandError::from(e);
            if err.code == 67 || err.code == 197 {
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
        "createdCollectionAutomatically": out.created_collection,
    };
    if out.before == out.after {
        reply.insert("note", "all indexes already exist");
    }
    Ok(reply)
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
            "NamespaceNotFound",
            format!("ns not found {}.{coll}", req.db),
        )),
        Target::Regular(Some(_)) => {
            let was = req.state.catalog.drop_indexes(&req.db, &coll, &which)?;
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
    let c = match Target::resolve(req, &coll) {
        Target::Regular(Some(c)) => c,
        // Buckets are stored in the time-series layout, not as one document per `_id`.
        Target::TimeSeries { .. } | Target::Buckets { .. } => {
            return Err(timeseries_unsupported("validate"))
        }
        Target::Regular(None) => {
            return Err(CommandError::new(
                26,
                "NamespaceNotFound",
                format!("Collection '{}.{coll}' does not exist to validate.", req.db),
            ))
        }
    };
    let report = validate_collection(&c)?;
    let mut keys = Document::new();
    let mut details = Document::new();
    for (name, n) in &report.keys_per_index {
        keys.insert(name.clone(), *n as i64);
        details.insert(name.clone(), doc! {"valid": report.errors.is_empty()});
    }
    Ok(doc! {
        "ns": format!("{}.{coll}", req.db),
        "uuid": c.uuid,
        "nInvalidDocuments": 0,
        "nNonCompliantDocuments": 0,
        "nrecords": report.nrecords as i64,
        "nIndexes": report.keys_per_index.len() as i32,
        "keysPerIndex": keys,
        "indexDetails": details,
        "valid": report.errors.is_empty(),
        "repaired": false,
        "warnings": Vec::<String>::new(),
        "errors": report.errors,
        "extraIndexEntries": Vec::<Document>::new(),
        "missingIndexEntries": Vec::<Document>::new(),
        "corruptRecords": Vec::<Document>::new(),
    })
}
