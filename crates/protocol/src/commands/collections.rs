//! Collection DDL and listing: `create`, `drop`, `renameCollection`, `listCollections`,
//! (`listIndexes` lives with the index commands).

use super::cursor_reply::listing_reply;
use super::target::{Target, BUCKETS_PREFIX};
use super::timeseries_ddl::{create_timeseries, describe_timeseries};
use super::Request;
use crate::access::check;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_catalog::index::spec::id_index_document;
use hourglass_catalog::{Collection, Namespace};
use hourglass_query::filter::Filter;
use hourglass_timeseries::options_of;

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
    "viewOn",
    "pipeline",
    "encryptedFields",
    "recordPreImages",
];

pub fn create(req: &Request) -> CmdResult {
    let coll = req.collection()?;
    // MongoDB checks the options allowed beside `timeseries` before anything about views
    // (`viewOn` with `timeseries` is 72 "'timeseries' is not allowed with 'viewOn'").
    if req.body.contains_key("timeseries") {
        return create_timeseries(req, &coll);
    }
    if req.body.contains_key("viewOn") {
        return super::views::create_view(req, &coll);
    }
    if super::views::is_view(req, &coll)? {
        return Err(CommandError::new(
            48,
            format!("Namespace {}.{coll} already exists", req.db),
        ));
    }
    if req.body.contains_key("archive") {
        return Err(CommandError::invalid_options(
            "'archive' is only supported on time-series collections",
        ));
    }
    if req.body.contains_key("expireAfterSeconds") && !req.body.contains_key("clusteredIndex") {
        return Err(CommandError::invalid_options(
            "'expireAfterSeconds' is only supported on time-series collections or when the 'clusteredIndex' option is specified",
        ));
    }
    if let Target::TimeSeries { .. } = Target::resolve(req, &coll) {
        return Err(CommandError::new(
            48,
            format!(
                "namespace {}.{coll} already exists, but is a time-series collection",
                req.db
            ),
        ));
    }
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
        if k == "clusteredIndex" {
            options.insert(k.clone(), clustered_index(v)?);
            continue;
        }
        if k == "expireAfterSeconds" {
            options.insert(
                k.clone(),
                hourglass_timeseries::validate_expire_after_seconds(v)?,
            );
            continue;
        }
        if !CREATE_OPTIONS.contains(&k.as_str()) {
            return Err(CommandError::unknown_field("create", k));
        }
        if k == "collation" {
            // Stored with every option filled in, as MongoDB shows it; the simple
            // collation is the default and is not stored.
            if let Some(c) = hourglass_query::collation::parse(v)? {
                options.insert(k.clone(), c.spec().clone());
            }
            continue;
        }
        if super::validation_options::KEYS.contains(&k.as_str()) {
            options.insert(
                k.clone(),
                super::validation_options::check(req, &coll, k, v)?,
            );
            continue;
        }
        options.insert(k.clone(), v.clone());
    }
    let (_, created) = req.state.catalog.create(&req.db, &coll, options)?;
    if !created {
        tracing::debug!(ns = %format!("{}.{coll}", req.db), "create: collection already exists with the same options");
    }
    Ok(Document::new())
}

/// A collection clustered by `_id` (`clusteredIndex: {key: {_id: 1}, unique: true}`), as
/// MongoDB shows the option: `{v: 2, key: {_id: 1}, name: "_id_", unique: true}`. Every
/// collection is stored in `_id` order, so clustering changes what is shown and allows a
/// collection-level `expireAfterSeconds` on dates in `_id`.
fn clustered_index(v: &Bson) -> Result<Document, CommandError> {
    let Bson::Document(spec) = v else {
        return Err(CommandError::type_mismatch(format!(
            "BSON field 'create.clusteredIndex' is the wrong type '{}', expected type 'object'",
            super::args::type_name(v)
        )));
    };
    let mut name = hourglass_catalog::index::ID_INDEX_NAME.to_string();
    let mut unique = None;
    let mut key = None;
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("key", Bson::Document(d)) => key = Some(d.clone()),
            ("unique", Bson::Boolean(b)) => unique = Some(*b),
            ("name", Bson::String(s)) => name = s.clone(),
            ("v", v) if super::args::as_i64(v) == Some(2) => {}
            ("key" | "unique" | "name" | "v", other) => {
                return Err(CommandError::type_mismatch(format!(
                    "BSON field 'create.clusteredIndex.{k}' has the wrong type or value {other}"
                )))
            }
            _ => return Err(CommandError::unknown_field("create.clusteredIndex", k)),
        }
    }
    let Some(key) = key else {
        return Err(CommandError::missing_field("create.clusteredIndex.key"));
    };
    if key != doc! {"_id": 1} {
        return Err(CommandError::invalid_options(format!(
            "Only the _id field may be the cluster key of a collection, in ascending order, not {key}"
        )));
    }
    match unique {
        Some(true) => Ok(doc! {"v": 2, "key": key, "name": name, "unique": true}),
        Some(false) => Err(CommandError::invalid_options(
            "The clusteredIndex option requires unique: true",
        )),
        None => Err(CommandError::missing_field("create.clusteredIndex.unique")),
    }
}

pub fn drop(req: &Request) -> CmdResult {
    let coll = req.collection()?;
    if super::views::is_view(req, &coll)? {
        return super::views::drop_view(req, &coll);
    }
    let ns = format!("{}.{coll}", req.db);
    if let Target::TimeSeries { buckets, options } | Target::Buckets { buckets, options } =
        Target::resolve(req, &coll)
    {
        // MongoDB drops the buckets through the view's name and answers with the number
        // of the buckets' indexes (no `_id` index: they are clustered) and the view's ns.
        let n_indexes =
            hourglass_timeseries::TimeseriesStore::index_specs(&buckets, &options)?.len();
        req.state.timeseries.forget(&buckets);
        let archived = hourglass_timeseries::TimeseriesStore::archived_files(&buckets)?;
        let buckets_name = buckets.namespace().coll;
        let view = buckets_name
            .strip_prefix(BUCKETS_PREFIX)
            .unwrap_or(&buckets_name);
        super::views::remove_timeseries_definition(&req.state.catalog, &req.db, view)?;
        req.state.catalog.drop_collection(&req.db, &buckets_name)?;
        // The archived files go with the collection (after the drop is durable).
        hourglass_timeseries::delete_recorded(&archived);
        return Ok(doc! {"nIndexesWas": n_indexes as i32, "ns": format!("{}.{view}", req.db)});
    }
    if coll == "system.profile" {
        req.state.profiler.forget(&req.db);
    }
    let n_indexes = req
        .state
        .catalog
        .get(&req.db, &coll)
        .map_or(1, |c| c.indexes().len() + 1);
    if req.state.catalog.drop_collection(&req.db, &coll)? {
        Ok(doc! {"nIndexesWas": n_indexes as i32, "ns": ns})
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
                format!("Invalid namespace specified '{s}'"),
            )),
        },
        Some(v) => Err(req.wrong_type(field, v, "string")),
        None => Err(CommandError::missing_field(&format!(
            "renameCollection.{field}"
        ))),
    }
}

pub fn rename_collection(req: &Request) -> CmdResult {
    req.check_fields(&["to", "dropTarget", "stayTemp"])?;
    let from = split_ns(req, "renameCollection")?;
    let to = split_ns(req, "to")?;
    let drop_target = req.opt_bool("dropTarget")?.unwrap_or(false);
    rename_writable(&from, "source")?;
    rename_writable(&to, "target")?;
    for special in ["system.views", "system.js", "system.users"] {
        if from.coll == special || to.coll == special {
            return Err(CommandError::new(
                20,
                format!("renaming {special} collection or renaming to {special} is not allowed"),
            ));
        }
    }
    let buckets_of = |ns: &Namespace| format!("{BUCKETS_PREFIX}{}", ns.coll);
    if super::views::is_view_in(&req.state.catalog, &from.db, &from.coll)? {
        return Err(CommandError::new(
            166,
            format!("cannot rename view: {}.{}", from.db, from.coll),
        ));
    }
    if req
        .state
        .catalog
        .get(&from.db, &buckets_of(&from))
        .is_some()
        || from.coll.starts_with(BUCKETS_PREFIX)
    {
        return Err(CommandError::new(
            20,
            format!(
                "Renaming a time-series collection is not allowed: {}.{}",
                from.db, from.coll
            ),
        ));
    }
    // A view (a time-series collection included) is not replaced, not even with
    // dropTarget.
    if super::views::is_view_in(&req.state.catalog, &to.db, &to.coll)?
        || req.state.catalog.get(&to.db, &buckets_of(&to)).is_some()
    {
        return Err(CommandError::new(
            48,
            format!(
                "a view already exists with that name: {}.{}",
                to.db, to.coll
            ),
        ));
    }
    match req.state.catalog.rename(&from, &to, drop_target) {
        Err(hourglass_catalog::CatalogError::NamespaceExists(_)) => {
            Err(CommandError::new(48, "target namespace exists"))
        }
        other => other.map(|()| Document::new()).map_err(Into::into),
    }
}

/// Refuses a rename from or to a namespace users may not write (the profiler's collection,
/// a system namespace users may not create), as MongoDB words it (20).
fn rename_writable(ns: &Namespace, which: &str) -> Result<(), CommandError> {
    let refused = if ns.coll == "system.profile" {
        Some(format!("cannot write to {ns}"))
    } else {
        hourglass_catalog::namespace::check_system_namespace(&ns.db, &ns.coll)
            .err()
            .map(|e| e.to_string())
    };
    match refused {
        Some(reason) => Err(CommandError::new(
            20,
            format!("error with {which} namespace: {reason}"),
        )),
        None => Ok(()),
    }
}

/// A collection's `listCollections` entry; a clustered collection has no `idIndex` (its
/// `_id` is the cluster key, shown in `options.clusteredIndex`), as MongoDB lists it.
fn describe(c: &Collection) -> Document {
    let options = c.options();
    let clustered = options.contains_key("clusteredIndex");
    let mut out = doc! {
        "name": c.namespace().coll,
        "type": "collection",
        "options": options,
        "info": {"readOnly": false, "uuid": c.uuid},
    };
    if !clustered {
        out.insert("idIndex", id_index_document());
    }
    out
}

/// Which collections `listCollections` shows: all, unless a user without the
/// `listCollections` action asks for `authorizedCollections` (then those it holds a
/// privilege on).
fn authorized_collections(req: &Request) -> Result<check::Visible, CommandError> {
    let db = req.db.clone();
    req.listing_filter(
        "listCollections",
        check::Tgt::Db(req.db.clone()),
        move |p, coll| hourglass_auth::privilege::any_on_namespace(p, &db, coll),
    )
}

pub fn list_collections(req: &Request) -> CmdResult {
    req.check_fields(&["filter", "nameOnly", "authorizedCollections", "cursor"])?;
    let filter = match req.opt_document("filter")? {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    let name_only = req.opt_bool("nameOnly")?.unwrap_or(false);
    let authorized = authorized_collections(req)?;
    let views = super::views::list_entries(req)?;
    let docs: Vec<Document> = req
        .state
        .catalog
        .collections(&req.db)
        .iter()
        .flat_map(|c| match options_of(c) {
            Some(options) if c.namespace().coll.starts_with(BUCKETS_PREFIX) => {
                describe_timeseries(c, &options).to_vec()
            }
            _ => vec![describe(c)],
        })
        .chain(views)
        .filter(|d| authorized(d.get_str("name").unwrap_or_default()))
        .filter(|d| filter.matches(d))
        .map(|d| {
            if name_only {
                doc! {"name": d.get("name").cloned().unwrap_or(Bson::Null), "type": d.get("type").cloned().unwrap_or(Bson::Null)}
            } else {
                d
            }
        })
        .collect();
    listing_reply(req, format!("{}.$cmd.listCollections", req.db), docs)
}
