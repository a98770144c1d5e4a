//! `$rename`: checked as MongoDB checks it when parsed (different, unrelated, non-dynamic
//! paths) and when applied (a source that goes through a scalar is not viable; neither the
//! source nor the destination may be inside an array; a missing source is a no-op).

use bson::{Bson, Document};

use super::paths::{self, array_update_identifier};
use crate::error::{render, QueryError};
use crate::path::array_index;

/// Checks a `$rename` of `from` to `to` (both already split) as it is parsed; `spec` is
/// the `to` string as given.
pub fn check(from: &[String], to: &[String], spec: &str) -> Result<(), QueryError> {
    let from_str = from.join(".");
    if from == to {
        return Err(QueryError::BadValue(format!(
            "The source and target field for $rename must differ: {from_str}: \"{spec}\""
        )));
    }
    let n = from.len().min(to.len());
    if from[..n] == to[..n] {
        return Err(QueryError::BadValue(format!(
            "The source and target field for $rename must not be on the same path: {from_str}: \"{spec}\""
        )));
    }
    let dynamic = |p: &[String]| {
        p.iter()
            .any(|c| c == "$" || array_update_identifier(c).is_some())
    };
    if dynamic(from) {
        return Err(QueryError::BadValue(format!(
            "The source field for $rename may not be dynamic: {from_str}"
        )));
    }
    if dynamic(to) {
        return Err(QueryError::BadValue(format!(
            "The destination field for $rename may not be dynamic: {}",
            to.join(".")
        )));
    }
    Ok(())
}

/// How far a path resolves in a document.
enum Walk<'a> {
    /// The whole path exists.
    Found,
    /// Resolution stopped (missing field or index) after this many components.
    Stopped(usize),
    /// Component `i` cannot be looked up in the value before it (a scalar, or an array
    /// and a non-numeric component).
    NotViable(usize, &'a Bson),
}

fn walk<'a>(doc: &'a Document, parts: &[String]) -> Walk<'a> {
    let Some(first) = parts.first() else {
        return Walk::Found;
    };
    let Some(mut cur) = doc.get(first.as_str()) else {
        return Walk::Stopped(0);
    };
    for (i, p) in parts.iter().enumerate().skip(1) {
        let next = match cur {
            Bson::Document(d) => d.get(p.as_str()),
            Bson::Array(a) => match array_index(p) {
                Some(idx) => a.get(idx),
                None => return Walk::NotViable(i, cur),
            },
            _ => return Walk::NotViable(i, cur),
        };
        match next {
            Some(v) => cur = v,
            None => return Walk::Stopped(i),
        }
    }
    Walk::Found
}

/// The name of the deepest array among the values at `parts[..n]` for `n` in `1..=upto`.
fn array_ancestor(doc: &Document, parts: &[String], upto: usize) -> Option<String> {
    (1..=upto)
        .rev()
        .find(|&n| matches!(paths::get(doc, &parts[..n]), Some(Bson::Array(_))))
        .map(|n| parts[n - 1].clone())
}

fn in_array(side: &str, path: &[String], doc: &Document, field: &str) -> QueryError {
    let id = doc
        .get("_id")
        .map(|id| format!("_id: {}", render(id)))
        .unwrap_or_else(|| "no id".into());
    QueryError::BadValue(format!(
        "The {side} field cannot be an array element, '{}' in doc with {id} has an array field called '{field}'",
        path.join(".")
    ))
}

/// Moves the value at `from` to `to`.
pub fn apply(doc: &mut Document, from: &[String], to: &[String]) -> Result<(), QueryError> {
    match walk(doc, from) {
        Walk::Found => {}
        Walk::Stopped(_) => return Ok(()),
        Walk::NotViable(i, value) => {
            return Err(QueryError::PathNotViable(format!(
                "Cannot use the part ({}) of ({}) to traverse the element ({{{}: {}}})",
                from[i],
                from.join("."),
                from[i - 1],
                render(value)
            )))
        }
    }
    if let Some(field) = array_ancestor(doc, from, from.len() - 1) {
        return Err(in_array("source", from, doc, &field));
    }
    // The destination's deepest existing element, when it is created below it, or else the
    // element it overwrites (whose own type does not matter), and their ancestors.
    let upto = match walk(doc, to) {
        Walk::Found => to.len() - 1,
        Walk::Stopped(n) | Walk::NotViable(n, _) => n,
    };
    if let Some(field) = array_ancestor(doc, to, upto) {
        return Err(in_array("destination", to, doc, &field));
    }
    let Some(value) = paths::get(doc, from).cloned() else {
        return Ok(());
    };
    paths::unset(doc, from);
    paths::set(doc, to, value)
}
