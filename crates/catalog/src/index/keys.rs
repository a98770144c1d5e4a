//! Index keys of a document: one entry per combination of values of the key pattern's
//! fields (arrays give one entry per element: multikey), encoded as the concatenation of
//! each field's key string (bytes inverted for descending fields, the key string of a
//! 64-bit hash for hashed fields). In an index with a collation, strings are replaced by
//! their collation keys first (`Collation::key_value`), so the index is in the
//! collation's order and equal strings share a key (a unique index refuses them).

use super::geo;
use super::spec::{KeyKind, KeyPart};
use super::Index;
use crate::error::{CatalogError, Result};
use crate::keystring;
use bson::{Bson, Document};
use hourglass_query::path::lookup_path;

/// One index entry of a document: the encoded key (without the `_id` suffix) and the
/// field values it was made from (for duplicate-key messages).
#[derive(Debug, Clone, PartialEq)]
pub struct EntryKey {
    pub key: Vec<u8>,
    pub values: Vec<Bson>,
}

/// The keys a document contributes to `index`, and whether any key field held an array.
pub fn document_keys(index: &Index, doc: &Document) -> Result<(Vec<EntryKey>, bool)> {
    if let Some(p) = index.partial_filter() {
        if !p.matches(doc) {
            return Ok((Vec::new(), false));
        }
    }
    let parts = &index.spec.parts;
    let mut per_field: Vec<Vec<Bson>> = Vec::with_capacity(parts.len());
    let mut array_fields: Vec<&str> = Vec::new();
    let mut any_present = false;
    let mut geo_multi = false;
    for part in parts {
        if part.kind.is_geo() {
            // A document without the geo field is not indexed (2dsphere v2+ and 2d).
            match geo::cells(&index.spec, part, doc)? {
                Some((cells, not_a_point)) => {
                    geo_multi |= not_a_point;
                    per_field.push(cells)
                }
                None => return Ok((Vec::new(), false)),
            }
            continue;
        }
        let (values, is_array, present) = field_values(doc, &part.path);
        any_present |= present;
        if is_array {
            if part.kind == KeyKind::Hashed {
                return Err(CatalogError::HashedArray(
                    "hashed indexes do not currently support array values".into(),
                ));
            }
            array_fields.push(&part.path);
        }
        per_field.push(values);
    }
    if index.spec.sparse && !any_present {
        return Ok((Vec::new(), false));
    }
    if array_fields.len() > 1 {
        return Err(CatalogError::CannotIndexParallelArrays(format!(
            "cannot index parallel arrays [{}] [{}]",
            array_fields[1], array_fields[0]
        )));
    }
    let mut out: Vec<EntryKey> = vec![EntryKey {
        key: Vec::new(),
        values: Vec::new(),
    }];
    let collation = index.spec.collation.as_deref();
    for (part, values) in parts.iter().zip(per_field) {
        let mut next = Vec::with_capacity(out.len() * values.len());
        for prefix in &out {
            for v in &values {
                let mut e = prefix.clone();
                match collation.filter(|_| !part.kind.is_geo()) {
                    Some(c) => append_field(&mut e.key, part, &c.key_value(v)),
                    None => append_field(&mut e.key, part, v),
                }
                e.values.push(v.clone());
                next.push(e);
            }
        }
        out = next;
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out.dedup_by(|a, b| a.key == b.key);
    Ok((out, !array_fields.is_empty() || geo_multi))
}

/// The values at `path` (missing = null, array elements unwound, empty array = undefined),
/// whether an array was met, and whether the path was present at all.
fn field_values(doc: &Document, path: &str) -> (Vec<Bson>, bool, bool) {
    let found = lookup_path(doc, path);
    let mut is_array = found.len() > 1;
    let mut present = false;
    let mut values = Vec::new();
    for v in found {
        match v {
            None => values.push(Bson::Null),
            Some(Bson::Array(items)) => {
                present = true;
                is_array = true;
                if items.is_empty() {
                    values.push(Bson::Undefined);
                }
                values.extend(items.iter().cloned());
            }
            Some(other) => {
                present = true;
                values.push(other.clone());
            }
        }
    }
    if path_crosses_array(doc, path) {
        is_array = true;
    }
    values.sort_by_key(keystring::encode);
    values.dedup_by(|a, b| keystring::encode(a) == keystring::encode(b));
    (values, is_array, present)
}

/// Whether walking `path` goes through an array before its last component.
fn path_crosses_array(doc: &Document, path: &str) -> bool {
    let parts: Vec<&str> = path.split('.').collect();
    let mut cur = match doc.get(parts[0]) {
        Some(v) => v,
        None => return false,
    };
    for p in &parts[1..] {
        match cur {
            Bson::Array(_) => return true,
            Bson::Document(d) => match d.get(*p) {
                Some(v) => cur = v,
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

/// Appends the encoding of `value` for `part` to `key` (bounded in length: see
/// [`keystring::bounded`]).
pub fn append_field(key: &mut Vec<u8>, part: &KeyPart, value: &Bson) {
    match part.kind {
        KeyKind::Asc => key.extend_from_slice(&keystring::bounded(keystring::encode(value))),
        KeyKind::Desc => key.extend(
            keystring::bounded(keystring::encode(value))
                .into_iter()
                .map(|b| !b),
        ),
        KeyKind::Hashed => key.extend_from_slice(&keystring::encode(&hashed_value(value))),
        // Geo values are already cells (see `geo.rs`).
        KeyKind::Sphere | KeyKind::Flat => key.extend_from_slice(&keystring::encode(value)),
    }
}

/// The value a hashed index stores for `value`: a 64-bit FNV-1a hash of its key string, so
/// that values MongoDB considers equal (`1`, `1.0`) hash alike. Stable across versions.
pub fn hashed_value(value: &Bson) -> Bson {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in keystring::encode(value) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Bson::Int64(h as i64)
}

/// The smallest byte string greater than every string starting with `prefix`, or `None`
/// when there is none (all bytes 0xFF).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The key-pattern document of a duplicate key, e.g. `{a: 1}` → `{a: <value>}`.
pub fn key_value_document(parts: &[KeyPart], values: &[Bson]) -> Document {
    parts
        .iter()
        .zip(values)
        .map(|(p, v)| (p.path.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::spec::IndexSpec;
    use bson::doc;

    fn index(spec: Document) -> Index {
        thread_local! {
            static ENGINE: (tempfile::TempDir, hourglass_storage::Engine) = {
                let dir = tempfile::tempdir().unwrap();
                let engine = hourglass_storage::Engine::open(dir.path()).unwrap();
                (dir, engine)
            };
        }
        let tree = ENGINE.with(|(_, e)| e.tree("t").unwrap());
        Index::new(IndexSpec::parse(&spec).unwrap(), 0, tree, false)
    }

    #[test]
    fn arrays_give_one_key_per_element_and_parallel_arrays_fail() {
        let i = index(doc! {"key": {"a": 1, "b": 1}});
        let (keys, multi) = document_keys(&i, &doc! {"a": [1, 2, 2], "b": "x"}).unwrap();
        assert_eq!(keys.len(), 2);
        assert!(multi);
        let err = document_keys(&i, &doc! {"a": [1], "b": [2]}).unwrap_err();
        assert_eq!(err.code(), 171);
        let (keys, multi) = document_keys(&i, &doc! {"b": 1}).unwrap();
        assert_eq!(keys[0].values, vec![Bson::Null, Bson::Int32(1)]);
        assert!(!multi);
    }

    #[test]
    fn descending_keys_sort_in_reverse() {
        let i = index(doc! {"key": {"a": -1}});
        let k = |v: i32| document_keys(&i, &doc! {"a": v}).unwrap().0[0].key.clone();
        assert!(k(1) > k(2));
        assert!(k(-5) > k(7));
    }

    #[test]
    fn sparse_and_partial_skip_documents() {
        let s = index(doc! {"key": {"a": 1}, "sparse": true});
        assert!(document_keys(&s, &doc! {"b": 1}).unwrap().0.is_empty());
        let p = index(doc! {"key": {"a": 1}, "partialFilterExpression": {"a": {"$gt": 5}}});
        assert!(document_keys(&p, &doc! {"a": 1}).unwrap().0.is_empty());
        assert_eq!(document_keys(&p, &doc! {"a": 6}).unwrap().0.len(), 1);
    }

    #[test]
    fn hashed_equal_numbers_hash_alike_and_arrays_fail() {
        assert_eq!(
            hashed_value(&Bson::Int32(1)),
            hashed_value(&Bson::Double(1.0))
        );
        let h = index(doc! {"key": {"a": "hashed"}});
        assert_eq!(
            document_keys(&h, &doc! {"a": [1]}).unwrap_err().code(),
            16766
        );
    }

    #[test]
    fn prefix_end_increments_the_last_byte_below_ff() {
        assert_eq!(prefix_end(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF]), None);
    }
}
