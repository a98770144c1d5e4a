//! The document an upsert starts from: the equalities its query implies, as MongoDB
//! extracts them. A field compared for equality (`{a: 1}`, `{a: {$eq: 1}}`, a one-value
//! `$in` or `$all`), directly, under `$and` or under a one-clause `$or`, is set; two
//! equalities on one path, or on a path and a path inside it, cannot both be honoured and
//! fail with `NotSingleValueField`. A replacement-style upsert takes only `_id`, which must
//! then be given whole (`NotExactValueField`).

use bson::{Bson, Document};

use super::paths;
use crate::error::QueryError;

/// The starting document of an upsert whose query is `query`; `replacement` for a
/// replacement-style update (which takes only `_id` from the query).
pub fn seed(query: &Document, replacement: bool) -> Result<Document, QueryError> {
    let mut found: Vec<(String, Bson)> = Vec::new();
    collect(query, &mut found);
    if replacement {
        found.retain(|(p, _)| p == "_id" || p.starts_with("_id."));
        if let Some((p, _)) = found.iter().find(|(p, _)| p != "_id") {
            return Err(QueryError::Coded(
                111,
                format!("field at '_id' must be exactly specified, field at sub-path '{p}'found"),
            ));
        }
    }
    // MongoDB checks the equalities of its canonical (path-sorted) query.
    let mut sorted: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    sorted.sort_unstable();
    for (i, path) in sorted.iter().enumerate() {
        for seen in &sorted[..i] {
            if seen == path {
                return Err(QueryError::Coded(
                    54,
                    format!("cannot infer query fields to set, path '{path}' is matched twice"),
                ));
            }
            if path.strip_prefix(seen).is_some_and(|r| r.starts_with('.')) {
                return Err(QueryError::Coded(
                    54,
                    format!(
                        "cannot infer query fields to set, both paths '{path}' and '{seen}' are matched"
                    ),
                ));
            }
        }
    }
    let mut out = Document::new();
    for (path, value) in found {
        let parts: Vec<String> = path.split('.').map(String::from).collect();
        if parts.iter().any(|p| p.is_empty() || p.starts_with('$')) {
            continue;
        }
        paths::set(&mut out, &parts, value)?;
    }
    Ok(out)
}

/// Collects the equalities of a query (an implicit `$and` of its fields).
fn collect(query: &Document, out: &mut Vec<(String, Bson)>) {
    for (key, value) in query {
        match key.as_str() {
            "$and" => {
                for clause in value.as_array().into_iter().flatten() {
                    if let Bson::Document(d) = clause {
                        collect(d, out);
                    }
                }
            }
            // A one-clause `$or` is that clause.
            "$or" => {
                if let Some([Bson::Document(d)]) = value.as_array().map(Vec::as_slice) {
                    collect(d, out);
                }
            }
            k if k.starts_with('$') => {}
            path => field_equalities(path, value, out),
        }
    }
}

fn is_operator_object(v: &Bson) -> bool {
    matches!(v, Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')))
}

/// The equalities one field's condition implies.
fn field_equalities(path: &str, cond: &Bson, out: &mut Vec<(String, Bson)>) {
    let Bson::Document(ops) = cond else {
        if !matches!(cond, Bson::RegularExpression(_)) {
            out.push((path.to_string(), cond.clone()));
        }
        return;
    };
    if !is_operator_object(cond) {
        out.push((path.to_string(), cond.clone()));
        return;
    }
    for (op, arg) in ops {
        match (op.as_str(), arg) {
            ("$eq", v) => out.push((path.to_string(), v.clone())),
            ("$in", Bson::Array(items))
                if items.len() == 1 && !matches!(items[0], Bson::RegularExpression(_)) =>
            {
                out.push((path.to_string(), items[0].clone()))
            }
            // `$all` is an equality per value (besides regexes and `$elemMatch`es).
            ("$all", Bson::Array(items)) => {
                for item in items {
                    let elem_match =
                        matches!(item, Bson::Document(d) if d.contains_key("$elemMatch"));
                    if !elem_match && !matches!(item, Bson::RegularExpression(_)) {
                        out.push((path.to_string(), item.clone()));
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn seed_takes_equalities_through_and_and_single_or() {
        let q = doc! {"a.b": 1, "c": {"$gt": 1}, "$and": [{"d": {"$eq": 2}}], "$or": [{"e": 3}], "f": {"$in": [4]}, "g": {"$all": [5]}};
        assert_eq!(
            seed(&q, false).unwrap(),
            doc! {"a": {"b": 1}, "d": 2, "e": 3, "f": 4, "g": 5}
        );
        assert_eq!(
            seed(
                &doc! {"$or": [{"x": 1}, {"y": 2}], "r": {"$regex": "a"}},
                false
            )
            .unwrap(),
            doc! {}
        );
    }

    #[test]
    fn seed_conflicts_are_not_single_value_field() {
        let e = seed(&doc! {"$and": [{"x": 1}, {"x": 2}]}, false).unwrap_err();
        assert_eq!(e.code(), 54);
        assert_eq!(
            e.to_string(),
            "cannot infer query fields to set, path 'x' is matched twice"
        );
        let e = seed(&doc! {"x.y": 1, "x": 1}, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot infer query fields to set, both paths 'x.y' and 'x' are matched"
        );
        assert_eq!(
            seed(&doc! {"x": {"$all": [1, 2]}}, false)
                .unwrap_err()
                .code(),
            54
        );
    }

    #[test]
    fn replacement_seed_takes_only_a_whole_id() {
        assert_eq!(
            seed(&doc! {"_id": 1, "x": 1, "x.y": 2}, true).unwrap(),
            doc! {"_id": 1}
        );
        let e = seed(&doc! {"_id.a": 1}, true).unwrap_err();
        assert_eq!(e.code(), 111);
    }
}
