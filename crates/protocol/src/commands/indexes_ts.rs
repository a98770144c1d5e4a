//! Index commands on time-series collections: specs given on the view are checked and
//! translated to the bucket shape (`hourglass_timeseries::index_spec`), stored with the
//! collection, and translated back by `listIndexes` on the view; `system.buckets.<coll>`
//! shows and takes the bucket shape directly.

use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_catalog::Collection;
use hourglass_timeseries::index_spec::{
    to_bucket_key_for, translate_index_spec, view_index_specs, IndexSpecError, KeyUse,
};
use hourglass_timeseries::{TimeseriesOptions, TimeseriesStore};

impl From<IndexSpecError> for CommandError {
    fn from(e: IndexSpecError) -> Self {
        CommandError::new(e.code(), e.message())
    }
}

/// Options of a spec besides `v`, `name`, `key` and `originalSpec`, for conflict checks.
fn options_of_spec(spec: &Document) -> Document {
    spec.iter()
        .filter(|(k, _)| !matches!(k.as_str(), "v" | "name" | "key" | "originalSpec"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn key_of(spec: &Document) -> Document {
    spec.get_document("key").cloned().unwrap_or_default()
}

/// Same fields in the same order with the same values (index keys are ordered).
fn same_key(a: &Document, b: &Document) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && hourglass_query::compare::values_equal(va, vb))
}

/// `spec` with its collation as MongoDB lists it: its own with every option filled in,
/// else the collection's default; none for the simple one.
fn with_collation(mut spec: Document, buckets: &Collection) -> Result<Document, CommandError> {
    match spec.get("collation") {
        Some(v) => match hourglass_query::collation::parse(v)? {
            Some(c) => spec.insert("collation", c.spec().clone()),
            None => spec.remove("collation"),
        },
        None => match buckets.options().get_document("collation") {
            Ok(c) => spec.insert("collation", c.clone()),
            Err(_) => None,
        },
    };
    Ok(spec)
}

/// `createIndexes` on a time-series view (`translate`) or on its buckets collection.
pub fn create(
    state: &crate::ServerState,
    buckets: &std::sync::Arc<Collection>,
    options: &TimeseriesOptions,
    specs: &[Document],
    translate: bool,
) -> CmdResult {
    let mut current = TimeseriesStore::index_specs(buckets, options)?;
    let before = current.len();
    for spec in specs {
        let bucket_spec = if translate {
            let mut s = spec.clone();
            if !s.contains_key("v") {
                s.insert("v", 2);
            }
            let mut t = translate_index_spec(options, &s)?;
            if !t.contains_key("v") {
                t.insert("v", 2);
            }
            t
        } else {
            spec.clone()
        };
        // `{_id: 1}` on the buckets is their cluster key, which exists: a no-op under any
        // name, as on every clustered collection in MongoDB.
        if !translate && same_key(&key_of(&bucket_spec), &doc! {"_id": 1}) {
            continue;
        }
        // The buckets collection checks the key pattern as any collection does.
        hourglass_timeseries::index_spec::validate_bucket_key_pattern(&bucket_spec)?;
        let bucket_spec = with_collation(bucket_spec, buckets)?;
        let name = bucket_spec.get_str("name").unwrap_or_default().to_string();
        let key = key_of(&bucket_spec);
        if let Some(existing) = current
            .iter()
            .find(|s| s.get_str("name") == Ok(name.as_str()))
        {
            if !same_key(&key_of(existing), &key) {
                return Err(CommandError::new(86, format!("An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {spec}, existing index: {existing}"),
                ));
            }
            if options_of_spec(existing) != options_of_spec(&bucket_spec) {
                return Err(CommandError::new(85, format!("An equivalent index already exists with the same name but different options. Requested index: {spec}, existing index: {existing}"),
                ));
            }
            continue;
        }
        if let Some(existing) = current.iter().find(|s| {
            same_key(&key_of(s), &key) && options_of_spec(s) == options_of_spec(&bucket_spec)
        }) {
            return Err(CommandError::new(
                85,
                format!(
                    "Index already exists with a different name: {}",
                    existing.get_str("name").unwrap_or_default()
                ),
            ));
        }
        current.push(bucket_spec);
    }
    let after = current.len();
    if after != before {
        let new_geo: Vec<String> = current[before..]
            .iter()
            .flat_map(hourglass_timeseries::store::geo_fields_of_spec)
            .collect();
        state.timeseries.check_geo(buckets, options, &new_geo)?;
        TimeseriesStore::set_index_specs(buckets, &current)?;
    }
    let mut reply = doc! {
        "numIndexesBefore": before as i32,
        "numIndexesAfter": after as i32,
        "createdCollectionAutomatically": false,
    };
    if before == after {
        reply.insert("note", "all indexes already exist");
    }
    Ok(reply)
}

/// `listIndexes`: the user's specs on the view, the bucket specs on the buckets.
/// Checks a `hint` on a time-series collection (`view`) or on its buckets collection:
/// `$natural`, or an index that exists and is not hidden, else 2 BadValue as MongoDB.
/// Bucket reads do not use secondary indexes, so a valid hint changes no result.
pub fn check_hint(
    buckets: &Collection,
    options: &TimeseriesOptions,
    view: bool,
    hint: &hourglass_catalog::plan::Hint,
) -> Result<(), CommandError> {
    use hourglass_catalog::plan::Hint;
    let specs = list(buckets, options, view)?;
    let found = match hint {
        Hint::Natural(_) => return Ok(()),
        Hint::Name(n) => specs.iter().find(|s| s.get_str("name") == Ok(n.as_str())),
        Hint::KeyPattern(k) => specs.iter().find(|s| {
            s.get_document("key")
                .is_ok_and(|key| key.iter().eq(k.iter()))
        }),
    };
    match found {
        Some(s) if !s.get_bool("hidden").unwrap_or(false) => Ok(()),
        _ => Err(CommandError::bad_value(
            "hint provided does not correspond to an existing index",
        )),
    }
}

pub fn list(
    buckets: &Collection,
    options: &TimeseriesOptions,
    view: bool,
) -> Result<Vec<Document>, CommandError> {
    let specs = TimeseriesStore::index_specs(buckets, options)?;
    let listed = if view {
        view_index_specs(options, &specs)
    } else {
        specs
    };
    Ok(listed.into_iter().map(mongod_field_order).collect())
}

/// An index spec with `v`, `key` and `name` first, as mongod lists them.
fn mongod_field_order(spec: Document) -> Document {
    let mut out = Document::new();
    for k in ["v", "key", "name"] {
        if let Some(v) = spec.get(k) {
            out.insert(k, v.clone());
        }
    }
    for (k, v) in spec {
        if !out.contains_key(&k) {
            out.insert(k, v);
        }
    }
    out
}

/// Finds an index by name or key pattern (user shape on the view).
fn position(
    specs: &[Document],
    options: &TimeseriesOptions,
    which: &Bson,
    view: bool,
    usage: KeyUse,
) -> Result<usize, CommandError> {
    match which {
        Bson::String(name) => specs
            .iter()
            .position(|s| s.get_str("name") == Ok(name.as_str()))
            .ok_or_else(|| CommandError::new(27, format!("index not found with name [{name}]"))),
        Bson::Document(key) => {
            let bucket_key = if view {
                to_bucket_key_for(options, key, usage)?
            } else {
                key.clone()
            };
            specs
                .iter()
                .position(|s| same_key(&key_of(s), &bucket_key))
                .ok_or_else(|| CommandError::new(27, format!("can't find index with key: {key}")))
        }
        _ => Err(CommandError::type_mismatch(
            "index must be a name or a key pattern",
        )),
    }
}

/// `dropIndexes` by name, key pattern, list of names or `"*"`.
pub fn drop(
    buckets: &Collection,
    options: &TimeseriesOptions,
    which: &Bson,
    view: bool,
) -> CmdResult {
    let mut specs = TimeseriesStore::index_specs(buckets, options)?;
    let was = specs.len() as i32;
    match which {
        Bson::String(s) if s == "*" => specs.clear(),
        Bson::Array(names) => {
            for n in names {
                let i = position(&specs, options, n, view, KeyUse::DropIndexes)?;
                specs.remove(i);
            }
        }
        w => {
            let i = position(&specs, options, w, view, KeyUse::DropIndexes)?;
            specs.remove(i);
        }
    }
    TimeseriesStore::set_index_specs(buckets, &specs)?;
    let mut reply = doc! {"nIndexesWas": was};
    if matches!(which, Bson::String(s) if s == "*") {
        reply.insert("msg", "non-_id indexes dropped for collection");
    }
    Ok(reply)
}

/// `collMod` `index: {name | keyPattern, hidden}` on a time-series collection.
pub fn set_hidden(
    buckets: &Collection,
    options: &TimeseriesOptions,
    spec: &Document,
) -> Result<Document, CommandError> {
    for k in spec.keys() {
        match k.as_str() {
            "name" | "keyPattern" | "hidden" => {}
            "expireAfterSeconds" => {
                return Err(CommandError::invalid_options(
                    "TTL indexes are not supported on time-series collections: set expireAfterSeconds on the collection",
                ))
            }
            other => {
                return Err(CommandError::invalid_options(format!(
                    "collMod index option '{other}' is not supported on time-series collections"
                )))
            }
        }
    }
    let mut specs = TimeseriesStore::index_specs(buckets, options)?;
    let which = match (spec.get("name"), spec.get("keyPattern")) {
        (Some(n), None) => n.clone(),
        (None, Some(k)) => k.clone(),
        _ => {
            return Err(CommandError::invalid_options(
                "must specify either index name or key pattern",
            ))
        }
    };
    let i = position(&specs, options, &which, true, KeyUse::CollMod)?;
    let mut reply = Document::new();
    if let Some(h) = spec.get("hidden") {
        let Bson::Boolean(hidden) = h else {
            return Err(CommandError::type_mismatch("hidden must be a boolean"));
        };
        let s = &mut specs[i];
        let old = s.get_bool("hidden").unwrap_or(false);
        if *hidden {
            s.insert("hidden", true);
        } else {
            s.remove("hidden");
        }
        if let Ok(orig) = s.get_document_mut("originalSpec") {
            if *hidden {
                orig.insert("hidden", true);
            } else {
                orig.remove("hidden");
            }
        }
        reply.insert("hidden_old", old);
        reply.insert("hidden_new", *hidden);
    }
    TimeseriesStore::set_index_specs(buckets, &specs)?;
    Ok(reply)
}

/// When the server started (access counts start then).
fn started(req: &Request) -> bson::DateTime {
    let now = bson::DateTime::now().timestamp_millis();
    bson::DateTime::from_millis(now - req.state.started.elapsed().as_millis() as i64)
}

/// One `$indexStats` document: the index's name, key and spec (access counts are not
/// kept, so `ops` is 0 since startup).
pub fn index_stats_entry(req: &Request, spec: Document) -> Document {
    doc! {
        "name": spec.get("name").cloned().unwrap_or(Bson::Null),
        "key": spec.get("key").cloned().unwrap_or(Bson::Null),
        "host": req.state.host.clone(),
        "accesses": {"ops": 0i64, "since": started(req)},
        "spec": spec,
    }
}

/// The `$indexStats` documents of a time-series collection (`view`) or of its buckets
/// collection.
pub fn index_stats(
    req: &Request,
    buckets: &Collection,
    options: &TimeseriesOptions,
    view: bool,
) -> Result<Vec<Document>, CommandError> {
    Ok(list(buckets, options, view)?
        .into_iter()
        .map(|spec| index_stats_entry(req, spec))
        .collect())
}
