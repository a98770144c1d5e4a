//! Sort specifications (`{a: 1, b: -1}`) and document comparison with
//! MongoDB's array semantics: an ascending key uses the smallest element of
//! an array, a descending key the largest; missing sorts like null and an
//! empty array sorts before null.

use std::cmp::Ordering;

use bson::{Bson, Document};

use crate::compare::{compare_optional, compare_values};
use crate::error::QueryError;
use crate::path::lookup_path;

/// A parsed sort specification.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SortSpec {
    keys: Vec<(String, bool)>,
}

impl SortSpec {
    /// Parses `{field: 1 | -1, ...}`.
    pub fn parse(spec: &Document) -> Result<SortSpec, QueryError> {
        let mut keys = Vec::new();
        for (k, v) in spec {
            if k.is_empty() || k.split('.').any(str::is_empty) {
                return Err(QueryError::loc(
                    15998,
                    "FieldPath field names may not be empty strings.",
                ));
            }
            if let Bson::Document(d) = v {
                if d.contains_key("$meta") {
                    return Err(QueryError::bad("$meta sort is not supported"));
                }
                return Err(QueryError::loc(
                    17312,
                    format!(
                        "Illegal key in $sort specification: {k}: {}",
                        crate::error::render(v)
                    ),
                ));
            }
            let n = crate::num::Num::from_bson(v).map(|n| n.as_f64());
            let asc = match n {
                Some(1.0) => true,
                Some(-1.0) => false,
                _ => {
                    return Err(QueryError::loc(
                        15975,
                        "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                    ))
                }
            };
            keys.push((k.clone(), asc));
        }
        Ok(SortSpec { keys })
    }

    /// True if there are no sort keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys as (path, ascending) pairs.
    pub fn keys(&self) -> &[(String, bool)] {
        &self.keys
    }

    /// Compares two documents according to the spec.
    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        self.compare_keys(&self.key_of(a), &self.key_of(b))
    }

    /// The values a document sorts by, one per key of the spec.
    pub fn key_of(&self, doc: &Document) -> Vec<Option<Bson>> {
        self.keys
            .iter()
            .map(|(path, asc)| sort_key(doc, path, *asc))
            .collect()
    }

    /// Compares two documents' [`SortSpec::key_of`] values.
    pub fn compare_keys(&self, a: &[Option<Bson>], b: &[Option<Bson>]) -> Ordering {
        for ((ka, kb), (_, asc)) in a.iter().zip(b).zip(&self.keys) {
            let ord = compare_optional(ka, kb);
            let ord = if *asc { ord } else { ord.reverse() };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    }

    /// Sorts documents in place (stable). Each document's sort key is extracted once,
    /// not at every comparison.
    pub fn sort(&self, docs: &mut [Document]) {
        if self.is_empty() || docs.len() < 2 {
            return;
        }
        let mut keyed: Vec<(Vec<Option<Bson>>, Document)> = docs
            .iter_mut()
            .map(|d| (self.key_of(d), std::mem::take(d)))
            .collect();
        keyed.sort_by(|a, b| self.compare_keys(&a.0, &b.0));
        for (slot, (_, d)) in docs.iter_mut().zip(keyed) {
            *slot = d;
        }
    }

    /// The first `k` documents of `docs` in sort order, as [`SortSpec::sort`] followed by a
    /// truncation would give them (ties keep their input order), without sorting the rest.
    pub fn top_k(&self, docs: Vec<Document>, k: usize) -> Vec<Document> {
        if k >= docs.len() {
            let mut docs = docs;
            self.sort(&mut docs);
            return docs;
        }
        if k == 0 {
            return Vec::new();
        }
        let mut keyed: Vec<(Vec<Option<Bson>>, usize, Document)> = docs
            .into_iter()
            .enumerate()
            .map(|(i, d)| (self.key_of(&d), i, d))
            .collect();
        // The input position breaks ties, so the selection agrees with a stable sort.
        let order = |a: &(Vec<Option<Bson>>, usize, Document),
                     b: &(Vec<Option<Bson>>, usize, Document)| {
            self.compare_keys(&a.0, &b.0).then(a.1.cmp(&b.1))
        };
        keyed.select_nth_unstable_by(k - 1, order);
        keyed.truncate(k);
        keyed.sort_by(order);
        keyed.into_iter().map(|(_, _, d)| d).collect()
    }
}

/// `None` stands for the empty-array key, which sorts before everything.
fn sort_key(doc: &Document, path: &str, asc: bool) -> Option<Bson> {
    let mut candidates: Vec<&Bson> = Vec::new();
    let mut saw_missing = false;
    let mut saw_empty_array = false;
    for v in lookup_path(doc, path) {
        match v {
            None => saw_missing = true,
            Some(Bson::Array(items)) => {
                if items.is_empty() {
                    saw_empty_array = true;
                }
                candidates.extend(items.iter());
            }
            Some(other) => candidates.push(other),
        }
    }
    let null = Bson::Null;
    if saw_missing {
        candidates.push(&null);
    }
    let best = if asc {
        candidates.into_iter().min_by(|x, y| compare_values(x, y))
    } else {
        candidates.into_iter().max_by(|x, y| compare_values(x, y))
    };
    match best {
        Some(v) => Some(v.clone()),
        None if saw_empty_array => None,
        None => Some(Bson::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn sorted(spec: Document, mut docs: Vec<Document>) -> Vec<i32> {
        SortSpec::parse(&spec).unwrap().sort(&mut docs);
        docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
    }

    #[test]
    fn top_k_equals_a_stable_sort_then_truncation() {
        let spec = SortSpec::parse(&doc! {"a": -1, "b": 1}).unwrap();
        let docs: Vec<Document> = (0..200)
            .map(|i| match i % 4 {
                0 => doc! {"_id": i, "a": (i * 7) % 5},
                1 => doc! {"_id": i, "a": [(i % 3), 9 - (i % 9)], "b": i % 2},
                2 => doc! {"_id": i, "b": "x"},
                _ => doc! {"_id": i, "a": (i % 5) as f64, "b": i % 3},
            })
            .collect();
        let mut all = docs.clone();
        spec.sort(&mut all);
        for k in [0, 1, 7, 50, 199, 200, 500] {
            let top = spec.top_k(docs.clone(), k);
            let ids = |v: &[Document]| {
                v.iter()
                    .map(|d| d.get_i32("_id").unwrap())
                    .collect::<Vec<_>>()
            };
            assert_eq!(ids(&top), ids(&all[..k.min(all.len())]), "k = {k}");
        }
    }

    #[test]
    fn ascending_and_descending_numbers_across_types() {
        let docs = vec![
            doc! {"_id": 1, "a": 2.5},
            doc! {"_id": 2, "a": 1i64},
            doc! {"_id": 3, "a": 3},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs.clone()), vec![2, 1, 3]);
        assert_eq!(sorted(doc! {"a": -1.0}, docs), vec![3, 1, 2]);
    }

    #[test]
    fn missing_sorts_like_null_before_numbers_and_strings_after() {
        let docs = vec![
            doc! {"_id": 1, "a": "x"},
            doc! {"_id": 2},
            doc! {"_id": 3, "a": 5},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs), vec![2, 3, 1]);
    }

    #[test]
    fn arrays_sort_by_min_ascending_and_max_descending() {
        let docs = vec![
            doc! {"_id": 1, "a": [1, 10]},
            doc! {"_id": 2, "a": [5]},
            doc! {"_id": 3, "a": []},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs.clone()), vec![3, 1, 2]);
        assert_eq!(sorted(doc! {"a": -1}, docs), vec![1, 2, 3]);
    }

    #[test]
    fn secondary_keys_break_ties() {
        let docs = vec![
            doc! {"_id": 1, "a": 1, "b": 1},
            doc! {"_id": 2, "a": 1, "b": 2},
            doc! {"_id": 3, "a": 0, "b": 0},
        ];
        assert_eq!(sorted(doc! {"a": 1, "b": -1}, docs), vec![3, 2, 1]);
    }

    #[test]
    fn invalid_directions_are_rejected_with_15975() {
        assert_eq!(SortSpec::parse(&doc! {"a": 0}).unwrap_err().code(), 15975);
        assert_eq!(SortSpec::parse(&doc! {"a": "x"}).unwrap_err().code(), 15975);
        assert_eq!(SortSpec::parse(&doc! {"a": 2}).unwrap_err().code(), 15975);
        assert!(SortSpec::parse(&doc! {"a": {"$meta": "textScore"}}).is_err());
        assert!(SortSpec::parse(&doc! {}).unwrap().is_empty());
    }

    #[test]
    fn dotted_sort_keys_traverse_arrays() {
        let docs = vec![
            doc! {"_id": 1, "a": [{"b": 3}, {"b": 0}]},
            doc! {"_id": 2, "a": {"b": 1}},
        ];
        assert_eq!(sorted(doc! {"a.b": 1}, docs), vec![1, 2]);
    }
}
