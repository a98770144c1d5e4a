//! Checks of a `createIndexes` entry that MongoDB makes apart from the field-by-field
//! parse: the partial filter's allowed expressions and the `_id` key's own rules.

use crate::error::{CatalogError, Result};

/// The name of the `_id` index.
pub const ID_INDEX_NAME: &str = "_id_";

fn cannot_create(msg: impl Into<String>) -> CatalogError {
    CatalogError::CannotCreateIndex(msg.into())
}
use bson::{Bson, Document};

/// Checks that a partial filter uses only what MongoDB allows in one: equality (not to a
/// regular expression), `$exists: true`, `$gt`/`$gte`/`$lt`/`$lte`, `$type`, `$in`, under
/// `$and`/`$or`.
pub(super) fn check_partial(filter: &Document) -> Result<()> {
    let refuse =
        |what: &str| cannot_create(format!("Expression not supported in partial index: {what}"));
    for (k, v) in filter {
        match (k.as_str(), v) {
            ("$and" | "$or", Bson::Array(items)) => {
                for item in items {
                    match item {
                        Bson::Document(d) => check_partial(d)?,
                        _ => return Err(refuse(k)),
                    }
                }
            }
            (op, _) if op.starts_with('$') => return Err(refuse(op)),
            (_, Bson::RegularExpression(_)) => return Err(refuse(&format!("{k} regex"))),
            (_, Bson::Document(d)) if d.keys().next().is_some_and(|o| o.starts_with('$')) => {
                for (op, arg) in d {
                    let allowed = match op.as_str() {
                        "$eq" => !matches!(arg, Bson::RegularExpression(_)),
                        "$gt" | "$gte" | "$lt" | "$lte" | "$type" => true,
                        "$exists" => hourglass_query::expr::truthy(arg),
                        "$in" => {
                            matches!(arg, Bson::Array(a) if !a.iter().any(|i| matches!(i, Bson::RegularExpression(_))))
                        }
                        _ => false,
                    };
                    if !allowed {
                        return Err(refuse(&format!("{k} {op}")));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// MongoDB parses a partial filter with the special query features banned (224
/// QueryFeatureNotAllowed), before any other check of it.
pub(super) fn check_special_features(filter: &Document) -> Result<()> {
    for (k, v) in filter {
        match (k.as_str(), v) {
            ("$expr" | "$where" | "$text" | "$jsonSchema", _) => {
                return Err(hourglass_query::QueryError::loc(
                    224,
                    format!("{k} is not allowed in this context"),
                )
                .into())
            }
            ("$and" | "$or" | "$nor", Bson::Array(items)) => {
                for item in items {
                    if let Bson::Document(d) = item {
                        check_special_features(d)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Fields an `_id` index specification may carry (MongoDB's `validateIdIndexSpec`).
const ID_INDEX_FIELDS: &[&str] = &["key", "name", "ns", "v", "collation"];

/// MongoDB's checks of a `createIndexes` entry on the `_id` key (`{_id: 1}` or `{_id: -1}`)
/// or named `_id_`, made after the generic ones and reported without the "Error in
/// specification" context: any option but `name`/`v`/`collation` is 197
/// InvalidIndexSpecificationOption, `{_id: -1}` and `_id_` on another key are 2 BadValue.
pub fn check_id_index_spec(d: &Document) -> Result<()> {
    let Ok(key) = d.get_document("key") else {
        return Ok(());
    };
    let id_value = match (key.len(), key.iter().next()) {
        (1, Some((field, v))) if field == "_id" => {
            hourglass_query::num::Num::from_bson(v).map(|n| n.as_f64().trunc())
        }
        _ => None,
    };
    match id_value {
        Some(n) if n == 1.0 || n == -1.0 => {
            let mut shown = d.clone();
            if !shown.contains_key("v") {
                shown.insert("v", 2);
            }
            if let Some(f) = d.keys().find(|f| !ID_INDEX_FIELDS.contains(&f.as_str())) {
                return Err(CatalogError::InvalidIndexSpecificationOption(format!(
                    "The field '{f}' is not valid for an _id index specification. Specification: {shown}"
                )));
            }
            if n == -1.0 {
                return Err(CatalogError::BadValue(format!(
                    "The field 'key' for an _id index must be {{_id: 1}}, but got {key}"
                )));
            }
            Ok(())
        }
        _ if d.get_str("name") == Ok(ID_INDEX_NAME) => Err(CatalogError::BadValue(format!(
            "The index name '_id_' is reserved for the _id index, which must have key pattern {{_id: 1}}, found key: {key}"
        ))),
        _ => Ok(()),
    }
}
