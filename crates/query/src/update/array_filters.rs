//! `arrayFilters` and the array-update path components `$[]` (every element) and
//! `$[<id>]` (the elements the filter named `<id>` matches): parsed and checked against the
//! update's paths as MongoDB checks them, and expanded into concrete paths against each
//! document before the operators apply.

use super::paths::{self, array_update_identifier};
use super::FieldOp;
use crate::error::{render, QueryError};
use crate::filter::Filter;
use bson::{Bson, Document};

/// Parsed array filters: identifier and the filter its elements must match (tried on the
/// document `{<id>: element}`).
pub type ArrayFilters = Vec<(String, Filter)>;

fn parse_error(msg: String) -> QueryError {
    QueryError::FailedToParse(format!("Error parsing array filter :: caused by :: {msg}"))
}

/// Parses `arrayFilters` documents.
pub fn parse(filters: &[Document]) -> Result<ArrayFilters, QueryError> {
    let mut out: ArrayFilters = Vec::new();
    for f in filters {
        let mut id: Option<&str> = None;
        for key in f.keys() {
            let top = key.split('.').next().unwrap_or("");
            match id {
                Some(seen) if seen != top => {
                    return Err(parse_error(format!(
                        "Expected a single top-level field name, found '{seen}' and '{top}'"
                    )))
                }
                _ => id = Some(top),
            }
        }
        let Some(id) = id else {
            return Err(parse_error(
                "Cannot use an expression without a top-level field name in arrayFilters".into(),
            ));
        };
        let valid = id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && id.chars().all(|c| c.is_ascii_alphanumeric());
        if !valid {
            return Err(parse_error(format!(
                "The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '{id}'"
            )));
        }
        if out.iter().any(|(n, _)| n == id) {
            return Err(QueryError::FailedToParse(format!(
                "Found multiple array filters with the same top-level field name {id}"
            )));
        }
        out.push((id.to_string(), Filter::parse(f)?));
    }
    Ok(out)
}

/// Checks that every `$[<id>]` of `ops` has a filter and every filter is used.
pub fn check(ops: &[FieldOp], filters: &ArrayFilters, spec: &Document) -> Result<(), QueryError> {
    let mut used = vec![false; filters.len()];
    for op in ops {
        for part in &op.path {
            let Some(id) = array_update_identifier(part).filter(|id| !id.is_empty()) else {
                continue;
            };
            match filters.iter().position(|(n, _)| n == id) {
                Some(i) => used[i] = true,
                None => {
                    return Err(QueryError::bad(format!(
                        "No array filter found for identifier '{id}' in path '{}'",
                        op.path.join(".")
                    )))
                }
            }
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(QueryError::FailedToParse(format!(
            "The array filter for identifier '{}' was not used in the update {}",
            filters[i].0,
            render(&Bson::Document(spec.clone()))
        )));
    }
    Ok(())
}

/// Whether `path` has an array-update component.
pub fn is_array_update(path: &[String]) -> bool {
    path.iter().any(|p| array_update_identifier(p).is_some())
}

/// The concrete paths `path` stands for in `doc`: each `$[]` becomes every index of the
/// array there, each `$[<id>]` the indexes of the elements its filter matches.
pub fn expand(
    doc: &Document,
    path: &[String],
    filters: &ArrayFilters,
) -> Result<Vec<Vec<String>>, QueryError> {
    let mut prefixes: Vec<Vec<String>> = vec![Vec::new()];
    for part in path {
        let Some(id) = array_update_identifier(part) else {
            for p in &mut prefixes {
                p.push(part.clone());
            }
            continue;
        };
        let filter = filters.iter().find(|(n, _)| n == id).map(|(_, f)| f);
        let mut next = Vec::new();
        for prefix in prefixes {
            let items = match paths::get(doc, &prefix) {
                Some(Bson::Array(items)) => items,
                None => {
                    return Err(QueryError::bad(format!(
                        "The path '{}' must exist in the document in order to apply array updates.",
                        prefix.join(".")
                    )))
                }
                Some(other) => {
                    return Err(QueryError::bad(format!(
                        "Cannot apply array updates to non-array element {}: {}",
                        prefix.last().map(String::as_str).unwrap_or(""),
                        render(other)
                    )))
                }
            };
            for (i, item) in items.iter().enumerate() {
                let hit = match filter {
                    None => true,
                    Some(f) => {
                        let mut probe = Document::new();
                        probe.insert(id, item.clone());
                        f.matches(&probe)
                    }
                };
                if hit {
                    let mut p = prefix.clone();
                    p.push(i.to_string());
                    next.push(p);
                }
            }
        }
        prefixes = next;
    }
    Ok(prefixes)
}
