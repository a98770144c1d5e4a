//! Which geo index a `$near`/`$nearSphere` find or a `$geoNear` stage reads: the 2dsphere
//! and 2d indexes of a regular collection, or the 2dsphere indexes on measurement fields
//! of a time-series collection. As in MongoDB, these queries need one, and `$geoNear`
//! takes its `key` from the only one there is.

use super::target::Target;
use super::Request;
use crate::error::CommandError;
use bson::{Bson, Document};
use hourglass_catalog::index::spec::KeyKind;
use hourglass_timeseries::TimeseriesStore;

/// The geo-indexed paths of `coll` (as the client names them), each with its kind.
fn geo_indexes(req: &Request, coll: &str) -> Result<Vec<(String, KeyKind)>, CommandError> {
    Ok(match Target::resolve(req, coll) {
        Target::Regular(Some(c)) => c
            .indexes()
            .iter()
            .filter(|i| !i.spec.hidden)
            .flat_map(|i| {
                i.spec
                    .parts
                    .iter()
                    .filter(|p| p.kind.is_geo())
                    .map(|p| (p.path.clone(), p.kind))
                    .collect::<Vec<_>>()
            })
            .collect(),
        Target::TimeSeries { buckets, options } => TimeseriesStore::geo_fields(&buckets, &options)?
            .into_iter()
            .map(|f| (f, KeyKind::Sphere))
            .collect(),
        _ => Vec::new(),
    })
}

/// The geo-indexed paths of `coll`.
pub fn geo_paths(req: &Request, coll: &str) -> Result<Vec<String>, CommandError> {
    Ok(geo_indexes(req, coll)?
        .into_iter()
        .map(|(p, _)| p)
        .collect())
}

fn no_index(req: &Request, coll: &str) -> CommandError {
    CommandError::new(291, format!(
            "error processing query: ns={}.{coll} planner returned error :: caused by :: unable to find index for $geoNear query",
            req.db
        ),
    )
}

fn index_not_found(msg: String) -> CommandError {
    CommandError::new(27, msg)
}

/// Checks that `path` of `coll` has a geo index, for `$near`/`$nearSphere`.
pub fn require(req: &Request, coll: &str, path: &str) -> Result<(), CommandError> {
    match geo_paths(req, coll)?.iter().any(|p| p == path) {
        true => Ok(()),
        false => Err(no_index(req, coll)),
    }
}

/// A time-series `$geoNear` as MongoDB 7.0 takes it: on a measurement field named by
/// `key`, with the filter in a following `$match` rather than `query`, and without
/// `includeLocs`.
fn check_time_series(spec: &Document) -> Result<(), CommandError> {
    let refuse = |code: i32, msg: &str| CommandError::new(code, msg);
    if !spec.contains_key("key") {
        return Err(refuse(
            5892921,
            "Must specify 'key' option for $geoNear on a time-series collection",
        ));
    }
    if spec.contains_key("query") {
        return Err(refuse(
            1938439,
            "$geoNear on a time-series collection does not support 'query'; use a $match stage after it instead",
        ));
    }
    if spec.contains_key("includeLocs") {
        return Err(refuse(
            5860208,
            "$geoNear on a time-series collection does not support 'includeLocs'",
        ));
    }
    Ok(())
}

/// Moves the `$match` stages right after a leading `$geoNear` into its `query` when they
/// read neither its `distanceField` nor its `includeLocs` (filtering before ordering by
/// distance gives the same documents in the same order), so that the scan under the
/// `$geoNear` can use them: an index or time and meta pushdown on a regular collection,
/// bucket pruning on a time-series one.
pub fn fold_following_matches(stages: &mut Vec<Document>) {
    let Some(spec) = stages.first().and_then(|s| s.get_document("$geoNear").ok()) else {
        return;
    };
    let outputs: Vec<String> = ["distanceField", "includeLocs"]
        .iter()
        .filter_map(|k| spec.get_str(k).ok().map(String::from))
        .collect();
    let independent = |m: &Document| {
        m.keys().all(|k| {
            let top = k.split('.').next().unwrap_or("");
            !k.starts_with('$') && outputs.iter().all(|o| o.split('.').next() != Some(top))
        })
    };
    let mut folded = Vec::new();
    while let Some(m) = stages.get(1).and_then(|s| s.get_document("$match").ok()) {
        if stages[1].len() != 1 || !independent(m) {
            break;
        }
        folded.push(Bson::Document(m.clone()));
        stages.remove(1);
    }
    if folded.is_empty() {
        return;
    }
    if let Ok(spec) = stages[0].get_document_mut("$geoNear") {
        if let Some(q) = spec.remove("query") {
            folded.insert(0, q);
        }
        spec.insert("query", bson::doc! {"$and": folded});
    }
}

/// Fills in the `key` of a leading `$geoNear` stage from the collection's geo index, or
/// checks the one given.
pub fn resolve_geo_near_key(
    req: &Request,
    coll: &str,
    stage: &mut Document,
) -> Result<(), CommandError> {
    let Ok(spec) = stage.get_document_mut("$geoNear") else {
        return Ok(());
    };
    if let Target::TimeSeries { .. } = Target::resolve(req, coll) {
        // Measurements are unpacked and measured whether or not an index exists.
        return check_time_series(spec);
    }
    if let Target::Regular(None) = Target::resolve(req, coll) {
        return Err(CommandError::new(
            26,
            format!(
                "$geoNear requires a geo index to run, but {}.{coll} does not exist",
                req.db
            ),
        ));
    }
    let indexes = geo_indexes(req, coll)?;
    match spec.get("key") {
        Some(Bson::String(k)) if indexes.iter().any(|(p, _)| p == k) => Ok(()),
        Some(Bson::String(_)) => Err(no_index(req, coll)),
        Some(_) => Ok(()), // the stage's parser reports the type
        None => {
            // A 2d index is preferred, as in MongoDB.
            let of = |kind: KeyKind| -> Vec<&String> {
                indexes
                    .iter()
                    .filter(|(_, k)| *k == kind)
                    .map(|(p, _)| p)
                    .collect()
            };
            let (flat, sphere) = (of(KeyKind::Flat), of(KeyKind::Sphere));
            let (chosen, kind) = match (flat.as_slice(), sphere.as_slice()) {
                ([one], _) => (Some(*one), "2d"),
                ([_, _, ..], _) => (None, "2d"),
                ([], [one]) => (Some(*one), "2dsphere"),
                ([], [_, _, ..]) => (None, "2dsphere"),
                ([], []) => {
                    return Err(index_not_found(
                        "$geoNear requires a 2d or 2dsphere index, but none were found".into(),
                    ))
                }
            };
            let Some(path) = chosen else {
                return Err(index_not_found(format!(
                    "There is more than one {kind} index on {}.{coll}; unsure which to use for $geoNear",
                    req.db
                )));
            };
            spec.insert("key", path.clone());
            Ok(())
        }
    }
}

/// The stage a `$near`/`$nearSphere` find puts over its access path (`input`), as
/// MongoDB's explain shows it: `GEO_NEAR_2DSPHERE` or `GEO_NEAR_2D`, naming the geo index
/// of the field (documents come out nearest first). `input` unchanged without `$near`.
pub fn near_stage(
    c: &hourglass_catalog::Collection,
    filter: Option<&Document>,
    input: Document,
) -> Result<Document, CommandError> {
    let Some(spec) = filter else {
        return Ok(input);
    };
    let parsed = hourglass_query::filter::Filter::parse(spec)?;
    Ok(
        match parsed.near().and_then(|(path, _)| near_head(c, path)) {
            Some(mut head) => {
                head.insert("inputStages", vec![input]);
                head
            }
            None => input,
        },
    )
}

/// The GEO_NEAR stage of a `$near` on `path` of `c`, without its inputs; None without a
/// geo index on the field.
pub fn near_head(c: &hourglass_catalog::Collection, path: &str) -> Option<Document> {
    let indexes = c.indexes();
    let found = indexes.iter().filter(|i| !i.spec.hidden).find_map(|i| {
        i.spec
            .parts
            .iter()
            .find(|p| p.kind.is_geo() && p.path == path)
            .map(|p| (i, p.kind))
    });
    let (index, kind) = found?;
    let stage = if kind == KeyKind::Sphere {
        "GEO_NEAR_2DSPHERE"
    } else {
        "GEO_NEAR_2D"
    };
    Some(bson::doc! {
        "stage": stage,
        "keyPattern": index.spec.key.clone(),
        "indexName": index.spec.name.clone(),
        "indexVersion": 2,
    })
}
