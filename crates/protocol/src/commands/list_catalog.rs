//! `$listCatalog` (MongoDB 7.0): the catalog entries of collections and views as
//! documents. `{aggregate: 1}` on `admin` lists every database's; `aggregate: <coll>`
//! that collection's only. A collection: `{db, name, type: "collection", ns, md: {ns,
//! options, indexes: [{spec, ready, multikey}]}}`; a view: `{db, name, type: "view", ns,
//! _id, viewOn, pipeline}`; a time-series collection: a view-like entry of type
//! `timeseries` over `system.buckets.<name>` (with the `$_internalUnpackBucket` stage),
//! and its buckets collection's entry. Storage identifiers (WiredTiger's `ident`) have
//! no counterpart here and are not shown.

use super::indexes::index_documents;
use super::target::BUCKETS_PREFIX;
use super::Request;
use crate::error::CommandError;
use bson::{doc, Bson, Document};
use hourglass_catalog::Collection;
use hourglass_timeseries::options_of;

/// Checks the stage's argument (`{}` only).
pub fn check_spec(stage: &Document) -> Result<(), CommandError> {
    match stage.get("$listCatalog") {
        Some(Bson::Document(d)) if d.is_empty() => Ok(()),
        _ => Err(CommandError::new(
            6200600,
            "The $listCatalog stage specification must be an empty object",
        )),
    }
}

/// The entries `$listCatalog` outputs: of `coll` in the request's database, or (no
/// collection) of every database, which must be asked on `admin`.
pub fn entries(req: &Request, coll: Option<&str>) -> Result<Vec<Document>, CommandError> {
    let dbs = match coll {
        Some(_) => vec![req.db.clone()],
        None if req.db == "admin" => req.state.catalog.database_names(),
        None => {
            return Err(CommandError::new(73, "Collectionless $listCatalog must be run against the 'admin' database with {aggregate: 1}",
            ))
        }
    };
    let mut out = Vec::new();
    for db in dbs {
        for c in req.state.catalog.collections(&db) {
            if let Some(view) = timeseries_entry(&db, &c) {
                out.push(view);
            }
            out.push(collection_entry(&db, &c));
        }
        for (name, d) in super::views::definitions(&req.state.catalog, &db)? {
            out.push(doc! {
                "db": &db,
                "name": &name,
                "type": "view",
                "ns": format!("{db}.{name}"),
                "_id": format!("{db}.{name}"),
                "viewOn": d.get("viewOn").cloned().unwrap_or(Bson::Null),
                "pipeline": d.get("pipeline").cloned().unwrap_or(Bson::Array(Vec::new())),
            });
        }
    }
    if let Some(coll) = coll {
        out.retain(|e| e.get_str("name") == Ok(coll));
    }
    Ok(out)
}

fn collection_entry(db: &str, c: &Collection) -> Document {
    let name = c.namespace().coll;
    let ns = format!("{db}.{name}");
    let mut options = doc! {"uuid": c.uuid};
    options.extend(c.options());
    let indexes: Vec<Document> = index_documents(c)
        .into_iter()
        .map(|spec| doc! {"spec": spec, "ready": true, "multikey": false})
        .collect();
    doc! {
        "db": db,
        "name": &name,
        "type": "collection",
        "ns": &ns,
        "md": {"ns": &ns, "options": options, "indexes": indexes},
    }
}

/// The view-like entry of the time-series collection whose buckets collection is `c`.
fn timeseries_entry(db: &str, c: &Collection) -> Option<Document> {
    let buckets = c.namespace().coll;
    let name = buckets.strip_prefix(BUCKETS_PREFIX)?;
    let options = options_of(c)?;
    let mut unpack = super::views::unpack_spec(&options);
    unpack.insert("exclude", Bson::Array(Vec::new()));
    Some(doc! {
        "db": db,
        "name": name,
        "type": "timeseries",
        "ns": format!("{db}.{name}"),
        "_id": format!("{db}.{name}"),
        "viewOn": &buckets,
        "pipeline": [{"$_internalUnpackBucket": unpack}],
    })
}
