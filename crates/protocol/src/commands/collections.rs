//! Collection DDL and listing: `create`, `drop`, `renameCollection`, `listCollections`,
//! `listIndexes`.

use super::find::single_batch_cursor;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_catalog::{Collection, Namespace};
use hourglass_query::filter::Filter;

/// Options `create` accepts and stores for a regular collection.
const CREATE_OPTIONS: &[&str] = &[
    "validator",
    "validationLevel",
    "validationAction",
    "storageEngine",
    "indexOptionDefaults",
    "collation",
    "idIndex",
    "changeStreamPreAndPostImages",
    "autoIndexId",
    "flags",
    "temp",
];
/// Options MongoDB knows that Hourglass does not implement yet: rejected clearly.
const UNSUPPORTED_OPTIONS: &[&str] = &[
    "capped",
    "size",
    "max",
    "timeseries",
    "expireAfterSeconds",
    "viewOn",
    "pipeline",
    "clusteredIndex",
    "encryptedFields",
    "recordPreImages",
];

pub fn create(req: &Request) -> CmdResult {
    let coll = req.collection()?;
    let mut options = Document::new();
    for (k, v) in req.body.iter().skip(1) {
        if super::args::GENERIC_FIELDS.contains(&k.as_str()) {
            continue;
        }
        if UNSUPPORTED_OPTIONS.contains(&k.as_str()) {
            let off = matches!(v, Bson::Boolean(false)) && k == "capped";
            if !off {
                return Err(CommandError::invalid_options(format!(
                    "the create option '{k}' is not supported by this server yet"
                )));
            }
            continue;
        }
        if !CREATE_OPTIONS.contains(&k.as_str()) {
            return Err(CommandError::unknown_field("create", k));
        }
        options.insert(k.clone(), v.clone());
    }
    let (_, created) = req.state.catalog.create(&req.db, &coll, options)?;
    if !created {
        tracing::debug!(ns = %format!("{}.{coll}", req.db), "create: collection already exists with the same options");
    }
    Ok(Document::new())
}

pub fn drop(req: &Request) -> CmdResult {
    let coll = req.collection()?;
    let ns = format!("{}.{coll}", req.db);
    if req.state.catalog.drop_collection(&req.db, &coll)? {
        Ok(doc! {"nIndexesWas": 1, "ns": ns})
    } else {
        Ok(Document::new())
    }
}

fn split_ns(req: &Request, field: &str) -> Result<Namespace, CommandError> {
    match req.body.get(field) {
        Some(Bson::String(s)) => match s.split_once('.') {
            Some((db, coll)) if !db.is_empty() && !coll.is_empty() => Ok(Namespace::new(db, coll)),
            _ => Err(CommandError::new(
                73,
                "InvalidNamespace",
                format!("Invalid namespace specified '{s}'"),
            )),
        },
        Some(v) => Err(req.wrong_type(field, v, "string")),
        None => Err(CommandError::new(
            40414,
            "Location40414",
            format!("BSON field 'renameCollection.{field}' is missing but a required field"),
        )),
    }
}

pub fn rename_collection(req: &Request) -> CmdResult {
    req.check_fields(&["to", "dropTarget", "stayTemp"])?;
    let from = split_ns(req, "renameCollection")?;
    let to = split_ns(req, "to")?;
    let drop_target = req.opt_bool("dropTarget")?.unwrap_or(false);
    req.state.catalog.rename(&from, &to, drop_target)?;
    Ok(Document::new())
}

fn id_index() -> Document {
    doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"}
}

fn describe(c: &Collection) -> Document {
    doc! {
        "name": c.namespace().coll,
        "type": "collection",
        "options": c.options().clone(),
        "info": {"readOnly": false, "uuid": c.uuid},
        "idIndex": id_index(),
    }
}

pub fn list_collections(req: &Request) -> CmdResult {
    req.check_fields(&["filter", "nameOnly", "authorizedCollections", "cursor"])?;
    let filter = match req.opt_document("filter")? {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    let name_only = req.opt_bool("nameOnly")?.unwrap_or(false);
    let docs: Vec<Document> = req
        .state
        .catalog
        .collections(&req.db)
        .iter()
        .map(|c| describe(c))
        .filter(|d| filter.matches(d))
        .map(|d| {
            if name_only {
                doc! {"name": d.get("name").cloned().unwrap_or(Bson::Null), "type": "collection"}
            } else {
                d
            }
        })
        .collect();
    Ok(single_batch_cursor(
        &format!("{}.$cmd.listCollections", req.db),
        docs,
    ))
}

pub fn list_indexes(req: &Request) -> CmdResult {
    let coll = req.collection()?;
    if req.state.catalog.get(&req.db, &coll).is_none() {
        return Err(CommandError::new(
            26,
            "NamespaceNotFound",
            format!("ns does not exist: {}.{coll}", req.db),
        ));
    }
    Ok(single_batch_cursor(
        &format!("{}.{coll}", req.db),
        vec![id_index()],
    ))
}
