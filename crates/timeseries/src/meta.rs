//! Meta-field normalization: buckets are matched (and store their `meta`) by
//! the normalized value, in which object fields are sorted by name
//! (byte-wise) recursively, also inside arrays; arrays keep their order.

use bson::{Bson, Document};

/// Whether `path` is the meta field `mf` or a path inside it.
pub fn is_meta_path(path: &str, mf: &str) -> bool {
    path == mf || path.strip_prefix(mf).is_some_and(|r| r.starts_with('.'))
}

/// Returns `v` with every object's fields sorted by name, recursively.
pub fn normalize_meta(v: &Bson) -> Bson {
    match v {
        Bson::Document(d) => Bson::Document(normalize_document(d)),
        Bson::Array(a) => Bson::Array(a.iter().map(normalize_meta).collect()),
        other => other.clone(),
    }
}

fn normalize_document(d: &Document) -> Document {
    let mut fields: Vec<(&String, &Bson)> = d.iter().collect();
    fields.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    fields
        .into_iter()
        .map(|(k, v)| (k.clone(), normalize_meta(v)))
        .collect()
}

/// A byte key that is equal for metas that normalize to the same value.
/// A missing meta (`None`) gets the empty key; any present value (also
/// `null`) gets the BSON bytes of `{"": <normalized>}`, which are never empty.
pub fn meta_key(v: Option<&Bson>) -> Vec<u8> {
    match v {
        None => Vec::new(),
        Some(v) => {
            let mut d = Document::new();
            d.insert("", normalize_meta(v));
            let mut out = Vec::new();
            // Serializing an in-memory document only fails for keys with NUL
            // bytes; fall back to the debug form, still unique per value.
            if d.to_writer(&mut out).is_err() {
                out = format!("{d:?}").into_bytes();
                out.insert(0, 0xff);
            }
            // Bounded so that a meta value of any size can be part of a storage key.
            hourglass_catalog::keystring::bounded(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    #[test]
    fn sorts_fields_recursively_like_the_readme_example() {
        let v = bson!({"m": {"c": 1, "b": {"f": true, "d": 0}}});
        assert_eq!(
            normalize_meta(&v),
            bson!({"m": {"b": {"d": 0, "f": true}, "c": 1}})
        );
    }

    #[test]
    fn arrays_keep_order_but_objects_inside_are_sorted() {
        let v = bson!([3, {"z": 1, "a": 2}, 1]);
        let n = normalize_meta(&v);
        assert_eq!(n, bson!([3, {"a": 2, "z": 1}, 1]));
        if let Bson::Array(a) = &n {
            if let Bson::Document(d) = &a[1] {
                assert_eq!(d.keys().collect::<Vec<_>>(), ["a", "z"]);
            }
        }
    }

    #[test]
    fn key_ignores_field_order_and_distinguishes_missing_from_null() {
        let a = Bson::Document(doc! {"a": 1, "b": 2});
        let b = Bson::Document(doc! {"b": 2, "a": 1});
        assert_eq!(meta_key(Some(&a)), meta_key(Some(&b)));
        assert_ne!(meta_key(None), meta_key(Some(&Bson::Null)));
        assert_ne!(
            meta_key(Some(&Bson::Int32(1))),
            meta_key(Some(&Bson::Int64(1)))
        );
    }
}
