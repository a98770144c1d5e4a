//! Dotted field paths.
//!
//! Two flavours exist in MongoDB:
//! * query paths ([`lookup_path`]) traverse arrays of documents implicitly
//!   (`"a.b"` on `{a: [{b: 1}, {b: 2}]}` yields `1` and `2`) and numeric
//!   components index arrays (`"a.0"`); missing branches are reported so
//!   `{a: null}`-style predicates can match them;
//! * exact paths ([`get_path`]) used by updates, where a numeric component
//!   indexes an array and nothing else is expanded.

use bson::{Bson, Document};

/// Splits a dotted path into its components.
pub fn split_path(path: &str) -> Vec<&str> {
    path.split('.').collect()
}

/// Parses an array index component (digits only).
pub fn array_index(part: &str) -> Option<usize> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// Resolves a query path. Each entry is one reachable terminal value, or
/// `None` where a branch of the path is missing. Terminal arrays are returned
/// whole; callers decide whether to also look at their elements.
pub fn lookup_path<'a>(doc: &'a Document, path: &str) -> Vec<Option<&'a Bson>> {
    let parts = split_path(path);
    let mut out = Vec::new();
    match parts.split_first() {
        Some((first, rest)) => walk(doc.get(*first), rest, &mut out),
        None => out.push(None),
    }
    out
}

fn walk<'a>(cur: Option<&'a Bson>, rest: &[&str], out: &mut Vec<Option<&'a Bson>>) {
    let Some(value) = cur else {
        out.push(None);
        return;
    };
    let Some((part, tail)) = rest.split_first() else {
        out.push(Some(value));
        return;
    };
    match value {
        Bson::Document(d) => walk(d.get(*part), tail, out),
        Bson::Array(items) => {
            if let Some(idx) = array_index(part) {
                if let Some(elem) = items.get(idx) {
                    walk(Some(elem), tail, out);
                    return;
                }
            }
            let before = out.len();
            for item in items {
                if let Bson::Document(d) = item {
                    walk(d.get(*part), tail, out);
                }
            }
            if out.len() == before {
                out.push(None);
            }
        }
        _ => out.push(None),
    }
}

/// Resolves an exact path: documents by field name, arrays by numeric index.
pub fn get_path<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let parts = split_path(path);
    let (first, rest) = parts.split_first()?;
    let mut cur = doc.get(*first)?;
    for part in rest {
        cur = match cur {
            Bson::Document(d) => d.get(*part)?,
            Bson::Array(a) => a.get(array_index(part)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Resolves an aggregation field path: documents by name, arrays are mapped
/// over their document elements (numeric components are plain field names).
pub fn get_agg_path(doc: &Document, parts: &[String]) -> Option<Bson> {
    let (first, rest) = parts.split_first()?;
    agg_walk(doc.get(first.as_str())?, rest)
}

fn agg_walk(value: &Bson, rest: &[String]) -> Option<Bson> {
    let Some((part, tail)) = rest.split_first() else {
        return Some(value.clone());
    };
    match value {
        Bson::Document(d) => agg_walk(d.get(part.as_str())?, tail),
        Bson::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    Bson::Document(_) | Bson::Array(_) => {
                        if let Some(v) = agg_walk(item, rest) {
                            out.push(v);
                        }
                    }
                    _ => {}
                }
            }
            Some(Bson::Array(out))
        }
        _ => None,
    }
}

/// Sets a value at a path of documents only (creating intermediate documents, replacing
/// any other value on the way, arrays included): stages that build their output
/// documents ($unwind, $lookup, $densify, window outputs). `$addFields` uses
/// [`set_field_path`], which reaches into arrays.
pub fn set_doc_path(doc: &mut Document, parts: &[&str], value: Bson) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(*first, value);
        return;
    }
    if !matches!(doc.get(*first), Some(Bson::Document(_))) {
        doc.insert(*first, Document::new());
    }
    if let Some(Bson::Document(sub)) = doc.get_mut(*first) {
        set_doc_path(sub, rest, value);
    }
}

/// Sets `value` at `parts` as `$addFields`/`$set` do: an array on the way gets the rest
/// of the path set in each element (documents in place, nested arrays element by
/// element, any other value replaced by a document holding only the rest of the path);
/// any other non-document on the way is replaced by a document.
pub fn set_field_path(doc: &mut Document, parts: &[&str], value: Bson) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(*first, value);
        return;
    }
    match doc.get_mut(*first) {
        Some(Bson::Document(sub)) => set_field_path(sub, rest, value),
        Some(Bson::Array(items)) => set_in_elements(items, rest, &value),
        _ => {
            let mut sub = Document::new();
            set_field_path(&mut sub, rest, value);
            doc.insert(*first, sub);
        }
    }
}

fn set_in_elements(items: &mut [Bson], parts: &[&str], value: &Bson) {
    for item in items {
        match item {
            Bson::Document(d) => set_field_path(d, parts, value.clone()),
            Bson::Array(inner) => set_in_elements(inner, parts, value),
            other => {
                let mut d = Document::new();
                set_field_path(&mut d, parts, value.clone());
                *other = Bson::Document(d);
            }
        }
    }
}

/// The values `distinct` takes from `value` at `path`: arrays at the end unwound one
/// level, arrays of documents on the way descended into, numeric parts as indexes.
pub fn distinct_values(value: &Bson, path: &[&str], out: &mut Vec<Bson>) {
    match (path.split_first(), value) {
        (None, Bson::Array(items)) => out.extend(items.iter().cloned()),
        (None, v) => out.push(v.clone()),
        (Some((head, rest)), Bson::Document(d)) => {
            if let Some(v) = d.get(*head) {
                distinct_values(v, rest, out);
            }
        }
        (Some((head, rest)), Bson::Array(items)) => {
            if let Ok(i) = head.parse::<usize>() {
                if let Some(v) = items.get(i) {
                    distinct_values(v, rest, out);
                }
            } else {
                for item in items {
                    if matches!(item, Bson::Document(_)) {
                        distinct_values(item, path, out);
                    }
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

    #[test]
    fn query_path_traverses_arrays_of_documents() {
        let d = doc! {"a": [{"b": 1}, {"b": 2}, {"c": 3}, 7]};
        let v = lookup_path(&d, "a.b");
        assert_eq!(v, vec![Some(&Bson::Int32(1)), Some(&Bson::Int32(2)), None]);
    }

    #[test]
    fn query_path_numeric_component_indexes_array() {
        let d = doc! {"a": [10, 20], "b": [{"c": 1}, {"c": 2}]};
        assert_eq!(lookup_path(&d, "a.1"), vec![Some(&Bson::Int32(20))]);
        assert_eq!(lookup_path(&d, "b.1.c"), vec![Some(&Bson::Int32(2))]);
        assert_eq!(lookup_path(&d, "a.5"), vec![None]);
    }

    #[test]
    fn query_path_reports_missing() {
        let d = doc! {"a": 1};
        assert_eq!(lookup_path(&d, "x"), vec![None]);
        assert_eq!(lookup_path(&d, "a.b"), vec![None]);
    }

    #[test]
    fn exact_path_indexes_arrays_only_numerically() {
        let d = doc! {"a": [{"b": 1}], "c": {"d": 2}};
        assert_eq!(get_path(&d, "a.0.b"), Some(&Bson::Int32(1)));
        assert_eq!(get_path(&d, "a.b"), None);
        assert_eq!(get_path(&d, "c.d"), Some(&Bson::Int32(2)));
    }

    #[test]
    fn agg_path_maps_over_arrays() {
        let d = doc! {"a": [{"b": 1}, {"b": 2}, 5]};
        let parts = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            get_agg_path(&d, &parts),
            Some(Bson::Array(vec![1.into(), 2.into()]))
        );
    }

    #[test]
    fn set_doc_path_creates_subdocuments() {
        let mut d = doc! {"a": 1};
        set_doc_path(&mut d, &["b", "c"], Bson::Int32(2));
        assert_eq!(d, doc! {"a": 1, "b": {"c": 2}});
    }

    #[test]
    fn distinct_values_unwinds_arrays_and_walks_arrays_of_documents() {
        let d = Bson::Document(doc! {"a": [{"b": 1}, {"b": [2, 3]}], "c": [4, 5]});
        let mut out = Vec::new();
        distinct_values(&d, &["a", "b"], &mut out);
        assert_eq!(out, vec![Bson::Int32(1), Bson::Int32(2), Bson::Int32(3)]);
        out.clear();
        distinct_values(&d, &["c"], &mut out);
        assert_eq!(out.len(), 2);
    }
}
