//! Command-level variables: `let` on `find`, `aggregate`, `update`, `delete`,
//! `findAndModify` (and `c` on one update statement), and `$lookup`'s `let`. Each variable
//! is bound once to a constant and substituted as `{$literal: value}` wherever the
//! command's expressions read `$$name`: inside `$expr` in filters, and in pipeline stages,
//! but not in a plain field predicate, where `"$$x"` is a string like any other.

use crate::error::QueryError;
use crate::expr::Expr;
use bson::{Bson, Document};

/// Bound variables, in the order given.
pub type Vars = Vec<(String, Bson)>;

/// Checks a user variable name as MongoDB does: a lowercase ASCII letter or a non-ASCII
/// character first, then letters, digits, `_` or non-ASCII.
pub fn check_name(name: &str) -> Result<(), QueryError> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(QueryError::loc(
            16866,
            "empty variable names are not allowed",
        ));
    };
    if !first.is_ascii_lowercase() && first.is_ascii() {
        return Err(QueryError::loc(
            16867,
            format!("'{name}' starts with an invalid character for a user variable name"),
        ));
    }
    if let Some(c) = chars.find(|c| c.is_ascii() && !(c.is_ascii_alphanumeric() || *c == '_')) {
        return Err(QueryError::loc(
            16868,
            format!("'{name}' contains an invalid character for a variable name: '{c}'"),
        ));
    }
    Ok(())
}

/// Evaluates a `let` document: each value is an expression of constants (no document is
/// in scope) and may read the variables bound before it in `outer`.
pub fn bind(lets: &Document, outer: &Vars) -> Result<Vars, QueryError> {
    let mut vars = outer.clone();
    for (name, e) in lets {
        check_name(name)?;
        let value = Expr::parse(&substitute(e, &vars))?.eval(&Document::new())?;
        vars.retain(|(n, _)| n != name);
        vars.push((name.clone(), value));
    }
    Ok(vars)
}

/// Replaces `$$name` / `$$name.path` strings by `{$literal: value}` everywhere in `v`.
pub fn substitute(v: &Bson, vars: &[(String, Bson)]) -> Bson {
    if vars.is_empty() {
        return v.clone();
    }
    match v {
        Bson::String(s) => {
            if let Some(rest) = s.strip_prefix("$$") {
                let mut parts = rest.split('.');
                let name = parts.next().unwrap_or("");
                if let Some((_, val)) = vars.iter().find(|(k, _)| k == name) {
                    let path: Vec<String> = parts.map(String::from).collect();
                    let value = if path.is_empty() {
                        Some(val.clone())
                    } else {
                        let mut w = Document::new();
                        w.insert("v", val.clone());
                        let mut full = vec!["v".to_string()];
                        full.extend(path);
                        crate::path::get_agg_path(&w, &full)
                    };
                    return match value {
                        Some(x) => Bson::Document(bson::doc! {"$literal": x}),
                        None => Bson::String("$$REMOVE".into()),
                    };
                }
            }
            v.clone()
        }
        Bson::Array(items) => Bson::Array(items.iter().map(|i| substitute(i, vars)).collect()),
        Bson::Document(d) => Bson::Document(
            d.iter()
                .map(|(k, x)| (k.clone(), substitute(x, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A filter with the variables substituted inside its `$expr` parts only.
pub fn in_filter(filter: &Document, vars: &Vars) -> Document {
    filter
        .iter()
        .map(|(k, v)| {
            let v = match (k.as_str(), v) {
                ("$expr", e) => substitute(e, vars),
                ("$and" | "$or" | "$nor", Bson::Array(items)) => Bson::Array(
                    items
                        .iter()
                        .map(|i| match i {
                            Bson::Document(d) => Bson::Document(in_filter(d, vars)),
                            other => other.clone(),
                        })
                        .collect(),
                ),
                _ => v.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// Pipeline stages with the variables substituted (`$match` as a filter).
pub fn in_pipeline(stages: &[Document], vars: &Vars) -> Vec<Document> {
    stages
        .iter()
        .map(|stage| match stage.get_document("$match") {
            Ok(m) if stage.len() == 1 => bson::doc! {"$match": in_filter(m, vars)},
            _ => match substitute(&Bson::Document(stage.clone()), vars) {
                Bson::Document(d) => d,
                _ => stage.clone(),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn variables_are_constants_substituted_in_expr_only() {
        let vars = bind(
            &doc! {"lim": 5, "twice": {"$multiply": ["$$lim", 2]}},
            &Vec::new(),
        )
        .unwrap();
        assert_eq!(vars[1].1, Bson::Int32(10));
        let f = in_filter(
            &doc! {"a": "$$lim", "$expr": {"$lt": ["$a", "$$twice"]}},
            &vars,
        );
        assert_eq!(
            f,
            doc! {"a": "$$lim", "$expr": {"$lt": ["$a", {"$literal": 10}]}}
        );
    }

    #[test]
    fn bad_variable_names_get_mongodb_codes() {
        assert_eq!(check_name("Upper").unwrap_err().code(), 16867);
        assert_eq!(check_name("a-b").unwrap_err().code(), 16868);
        assert_eq!(check_name("").unwrap_err().code(), 16866);
        assert!(check_name("ok_1").is_ok());
    }
}
