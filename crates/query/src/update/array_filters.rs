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

/// An error of one array filter, with MongoDB's context and the cause's code.
fn in_filter(code: i32, msg: impl std::fmt::Display) -> QueryError {
    QueryError::Coded(
        code,
        format!("Error parsing array filter :: caused by :: {msg}"),
    )
}

/// Refuses the query features an array filter may not use (searching `$and`, `$or` and
/// `$nor` clauses), as MongoDB's parser does.
fn banned_feature(f: &Document) -> Option<QueryError> {
    for (key, value) in f {
        match key.as_str() {
            "$expr" => return Some(in_filter(224, "$expr is not allowed in this context")),
            "$where" => return Some(in_filter(2, "$where is not allowed in this context")),
            "$text" => return Some(in_filter(2, "$text is not allowed in this context")),
            "$and" | "$or" | "$nor" => {
                let nested = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find_map(|c| match c {
                        Bson::Document(d) => banned_feature(d),
                        _ => None,
                    });
                if nested.is_some() {
                    return nested;
                }
            }
            _ => {}
        }
    }
    None
}

/// The top-level field names of a filter's conditions, in order (through `$and`, `$or`
/// and `$nor`; operators without a path name none).
fn top_level_names(f: &Document, out: &mut Vec<String>) {
    for (key, value) in f {
        match key.as_str() {
            "$and" | "$or" | "$nor" => {
                for c in value.as_array().into_iter().flatten() {
                    if let Bson::Document(d) = c {
                        top_level_names(d, out);
                    }
                }
            }
            k if k.starts_with('$') => {}
            k => out.push(k.split('.').next().unwrap_or("").to_string()),
        }
    }
}

/// Parses `arrayFilters` documents: each is parsed as a query (without `$expr`, `$where`
/// or `$text`), then named by the one top-level field all its conditions are on.
pub fn parse(filters: &[Document]) -> Result<ArrayFilters, QueryError> {
    let mut out: ArrayFilters = Vec::new();
    for f in filters {
        if let Some(e) = banned_feature(f) {
            return Err(e);
        }
        let filter = Filter::parse(f).map_err(|e| in_filter(e.code(), e))?;
        let mut names = Vec::new();
        top_level_names(f, &mut names);
        let Some(id) = names.first().cloned() else {
            return Err(QueryError::FailedToParse(
                "Cannot use an expression without a top-level field name in arrayFilters".into(),
            ));
        };
        if let Some(other) = names.iter().find(|n| **n != id) {
            return Err(in_filter(
                9,
                format!("Expected a single top-level field name, found '{id}' and '{other}'"),
            ));
        }
        let valid = id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && id.chars().all(|c| c.is_ascii_alphanumeric());
        if !valid {
            return Err(in_filter(2, format!(
                "The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '{id}'"
            )));
        }
        if out.iter().any(|(n, _)| *n == id) {
            return Err(QueryError::FailedToParse(format!(
                "Found multiple array filters with the same top-level field name {id}"
            )));
        }
        out.push((id, filter));
    }
    Ok(out)
}

/// Checks that every `$[<id>]` of one update path has a filter (as each path is parsed,
/// before its operator's argument).
pub fn check_path(path: &[String], filters: &ArrayFilters) -> Result<(), QueryError> {
    for part in path {
        let Some(id) = array_update_identifier(part).filter(|id| !id.is_empty()) else {
            continue;
        };
        if !filters.iter().any(|(n, _)| n == id) {
            return Err(QueryError::bad(format!(
                "No array filter found for identifier '{id}' in path '{}'",
                path.join(".")
            )));
        }
    }
    Ok(())
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

/// Refuses array updates that, expanded against a document, update one element (or one
/// inside another) twice, as MongoDB does when it merges them: "Update created a conflict
/// at '<path>'", the path concrete up to where the two updates part and as written after
/// it where they agree. `expanded` holds each array update's path and its concrete paths.
pub fn check_expanded(expanded: &[(&[String], &[Vec<String>])]) -> Result<(), QueryError> {
    for (j, (raw_b, concrete_b)) in expanded.iter().enumerate() {
        for (raw_a, concrete_a) in &expanded[..j] {
            if raw_a.first() != raw_b.first() {
                continue;
            }
            let n = raw_a.len().min(raw_b.len());
            let Some(d) = (0..n).find(|&d| raw_a[d] != raw_b[d]) else {
                continue;
            };
            let reached: std::collections::HashSet<&[String]> =
                concrete_b.iter().map(|q| &q[..n]).collect();
            for p in concrete_a.iter() {
                if !reached.contains(&p[..n]) {
                    continue;
                }
                let at: Vec<&str> = (0..n)
                    .map(|i| {
                        if i > d && raw_a[i] == raw_b[i] {
                            raw_a[i].as_str()
                        } else {
                            p[i].as_str()
                        }
                    })
                    .collect();
                return Err(QueryError::ConflictingUpdateOperators(format!(
                    "Update created a conflict at '{}'",
                    at.join(".")
                )));
            }
        }
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
