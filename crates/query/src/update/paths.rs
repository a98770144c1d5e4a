//! Exact-path reads and writes used by update operators: numeric components
//! index arrays (setting past the end pads with nulls), intermediate
//! documents are created on demand, and traversing a scalar is an error.

use bson::{Bson, Document};

use crate::error::{render, QueryError};
use crate::path::array_index;

/// Validates an update path and splits it into components. `$`-prefixed field names are
/// allowed here (MongoDB 5.0+): a top-level one is refused when an update (not an upsert's
/// insert) writes it.
pub fn parse_update_path(path: &str) -> Result<Vec<String>, QueryError> {
    if path.is_empty() {
        return Err(QueryError::EmptyFieldName(
            "An empty update path is not valid.".into(),
        ));
    }
    let parts: Vec<String> = path.split('.').map(String::from).collect();
    // A longer path could only build a document deeper than may be stored.
    let max = crate::limits::MAX_USER_STORAGE_DEPTH;
    if parts.len() > max {
        return Err(QueryError::Overflow(format!(
            "Document exceeds maximum nesting depth of {max}"
        )));
    }
    for p in &parts {
        if p.is_empty() {
            return Err(QueryError::EmptyFieldName(format!(
                "The update path '{path}' contains an empty field name, which is not allowed."
            )));
        }
        if p == "$" {
            continue; // positional: resolved against the query at apply time
        }
        if array_update_identifier(p).is_some() {
            continue; // `$[]` / `$[id]`: expanded against the document at apply time
        }
    }
    if parts.iter().filter(|p| *p == "$").count() > 1 {
        return Err(QueryError::BadValue(format!(
            "Too many positional (i.e. '$') elements found in path '{path}'"
        )));
    }
    if parts[0] == "$" {
        return Err(QueryError::BadValue(format!(
            "Cannot have positional (i.e. '$') element in the first position in path '{path}'"
        )));
    }
    Ok(parts)
}

/// The identifier of an array-update component: `""` for `$[]`, `id` for `$[id]`.
pub fn array_update_identifier(part: &str) -> Option<&str> {
    part.strip_prefix("$[")?.strip_suffix(']')
}

/// Reads the value at an exact path.
pub fn get<'a>(doc: &'a Document, parts: &[String]) -> Option<&'a Bson> {
    let (first, rest) = parts.split_first()?;
    let mut cur = doc.get(first.as_str())?;
    for p in rest {
        cur = match cur {
            Bson::Document(d) => d.get(p.as_str())?,
            Bson::Array(a) => a.get(array_index(p)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// True if any strict prefix of the path is an array.
pub fn crosses_array(doc: &Document, parts: &[String]) -> bool {
    (1..parts.len()).any(|n| matches!(get(doc, &parts[..n]), Some(Bson::Array(_))))
}

fn not_viable(part: &str, parent_name: &str, parent: &Bson) -> QueryError {
    QueryError::PathNotViable(format!(
        "Cannot create field '{part}' in element {{{parent_name}: {}}}",
        render(parent)
    ))
}

/// Sets `value` at the path, creating intermediate documents.
pub fn set(doc: &mut Document, parts: &[String], value: Bson) -> Result<(), QueryError> {
    let Some((first, rest)) = parts.split_first() else {
        return Ok(());
    };
    if rest.is_empty() {
        doc.insert(first.clone(), value);
        return Ok(());
    }
    match doc.get_mut(first.as_str()) {
        Some(child) => set_in(child, first, rest, value),
        None => {
            let mut sub = Document::new();
            set(&mut sub, rest, value)?;
            doc.insert(first.clone(), sub);
            Ok(())
        }
    }
}

fn set_in(target: &mut Bson, name: &str, parts: &[String], value: Bson) -> Result<(), QueryError> {
    let Some((first, rest)) = parts.split_first() else {
        *target = value;
        return Ok(());
    };
    match target {
        Bson::Document(d) => set(d, parts, value),
        Bson::Array(items) => {
            let Some(idx) = array_index(first) else {
                return Err(not_viable(first, name, &Bson::Array(items.clone())));
            };
            if idx > items.len() + 1_500_000 {
                return Err(QueryError::bad(
                    "can't backfill array to larger than 1500000 elements",
                ));
            }
            while items.len() <= idx {
                items.push(Bson::Null);
            }
            let slot = &mut items[idx];
            if rest.is_empty() {
                *slot = value;
                return Ok(());
            }
            if matches!(slot, Bson::Null) {
                *slot = Bson::Document(Document::new());
            }
            set_in(slot, first, rest, value)
        }
        other => Err(not_viable(first, name, other)),
    }
}

/// Removes the value at the path; array elements are replaced by null.
pub fn unset(doc: &mut Document, parts: &[String]) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.remove(first.as_str());
        return;
    }
    if let Some(child) = doc.get_mut(first.as_str()) {
        unset_in(child, rest);
    }
}

fn unset_in(target: &mut Bson, parts: &[String]) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    match target {
        Bson::Document(d) => unset(d, parts),
        Bson::Array(items) => {
            if let Some(slot) = array_index(first).and_then(|i| items.get_mut(i)) {
                if rest.is_empty() {
                    *slot = Bson::Null;
                } else {
                    unset_in(slot, rest);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn p(s: &str) -> Vec<String> {
        parse_update_path(s).unwrap()
    }

    #[test]
    fn set_creates_intermediate_documents() {
        let mut d = doc! {"_id": 1};
        set(&mut d, &p("a.b.c"), Bson::Int32(1)).unwrap();
        assert_eq!(d, doc! {"_id": 1, "a": {"b": {"c": 1}}});
    }

    #[test]
    fn set_past_array_end_pads_with_null() {
        let mut d = doc! {"a": [1]};
        set(&mut d, &p("a.3"), Bson::Int32(9)).unwrap();
        assert_eq!(d, doc! {"a": [1, null, null, 9]});
        set(&mut d, &p("a.1.x"), Bson::Int32(2)).unwrap();
        assert_eq!(d, doc! {"a": [1, {"x": 2}, null, 9]});
    }

    #[test]
    fn set_through_scalar_is_path_not_viable() {
        let mut d = doc! {"a": 5};
        let e = set(&mut d, &p("a.b"), Bson::Int32(1)).unwrap_err();
        assert_eq!(e.code(), 28);
        assert_eq!(e.to_string(), "Cannot create field 'b' in element {a: 5}");
        let mut d = doc! {"a": [1]};
        assert_eq!(
            set(&mut d, &p("a.b"), Bson::Int32(1)).unwrap_err().code(),
            28
        );
    }

    #[test]
    fn unset_removes_fields_and_nulls_array_slots() {
        let mut d = doc! {"a": {"b": 1, "c": 2}, "x": [1, 2]};
        unset(&mut d, &p("a.b"));
        unset(&mut d, &p("x.0"));
        unset(&mut d, &p("nope.z"));
        assert_eq!(d, doc! {"a": {"c": 2}, "x": [null, 2]});
    }

    #[test]
    fn invalid_paths_are_rejected() {
        assert_eq!(parse_update_path("").unwrap_err().code(), 56);
        assert_eq!(parse_update_path("a..b").unwrap_err().code(), 56);
        assert!(parse_update_path("a.$").is_ok());
        assert!(parse_update_path("a.$[]").is_ok());
        assert!(parse_update_path("a.$[x].b").is_ok());
        // `$`-prefixed names are checked when the update is applied (allowed below the top
        // level, and at the top level of an upsert's insert).
        assert!(parse_update_path("a.$x").is_ok());
        assert_eq!(
            parse_update_path("a.$.b.$").unwrap_err().to_string(),
            "Too many positional (i.e. '$') elements found in path 'a.$.b.$'"
        );
        assert_eq!(parse_update_path("$").unwrap_err().code(), 2);
    }
}
