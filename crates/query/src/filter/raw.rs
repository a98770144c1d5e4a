//! A filter checked on a stored document's BSON bytes before the document is built: the
//! paths the filter reads are located in one walk of the bytes ([`PathSlots`]), and the
//! filter runs on their values. Where a path crosses an array (or the walk cannot answer),
//! those paths are picked into a small document the filter is matched against
//! (`raw_pick`): a predicate on `a.b` then reads all of `a` when it is not a document. So
//! the answer is the whole document's. Filters that read the whole document (`$expr`,
//! `$jsonSchema`) have no such form.

use super::{eval, Filter, Node};
use crate::raw_pick::FieldTree;
use crate::raw_slots::{to_bson, Found, PathSlots};
use bson::{Bson, Document, RawDocument};
use std::collections::BTreeSet;

/// The paths of a filter and the filter, to match stored bytes with.
#[derive(Debug, Clone)]
pub struct RawFilter {
    fields: Vec<String>,
    tree: FieldTree,
    slots: PathSlots,
    /// The slot of each of `fields` in `slots` (in order: `0..fields.len()`).
    own_slots: Vec<usize>,
    filter: Filter,
}

fn paths(node: &Node, out: &mut BTreeSet<String>) -> bool {
    match node {
        Node::And(children) | Node::Or(children) | Node::Nor(children) => {
            children.iter().all(|c| paths(c, out))
        }
        Node::Field { path, .. } => {
            out.insert(path.clone());
            true
        }
        Node::Expr(_) | Node::Schema(_) => false,
    }
}

impl RawFilter {
    /// The raw form of `filter`, or `None` when it reads the whole document.
    pub fn new(filter: &Filter) -> Option<RawFilter> {
        let mut fields = BTreeSet::new();
        if !paths(filter.root(), &mut fields) {
            return None;
        }
        let fields: Vec<String> = fields.into_iter().collect();
        Some(RawFilter {
            tree: FieldTree::from_paths(fields.iter().map(String::as_str)),
            slots: PathSlots::new(&fields),
            own_slots: (0..fields.len()).collect(),
            fields,
            filter: filter.clone(),
        })
    }

    /// The paths the filter reads.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// Whether the document `raw` matches; bytes that do not decode answer `true`,
    /// leaving the error to the full decoding that follows.
    pub fn matches(&self, raw: &RawDocument) -> bool {
        if self.fields.is_empty() {
            return self.filter.matches(&Document::new());
        }
        let b = raw.as_bytes();
        let mut found = Vec::new();
        if self.slots.find(b, &mut found) && !found.contains(&Found::ThroughArray) {
            // Bytes that do not convert: the full decoding reports them.
            return self
                .matches_values(b, &found, &self.own_slots, &mut Vec::new())
                .unwrap_or(true);
        }
        match crate::raw_pick::picked_document(b, &self.tree) {
            Some(partial) => self.filter.matches(&partial),
            None => true,
        }
    }

    /// Whether the document `b` matches, its paths located in `found` (none through an
    /// array) with the filter's `fields()[i]` at `found[at[i]]`; `values` is scratch
    /// space. `None` when a value's bytes do not convert.
    pub(crate) fn matches_values(
        &self,
        b: &[u8],
        found: &[Found],
        at: &[usize],
        values: &mut Vec<Option<Bson>>,
    ) -> Option<bool> {
        values.clear();
        for &i in at {
            values.push(match found.get(i).copied() {
                Some(Found::Missing) | None => None,
                Some(f) => Some(to_bson(b, f)?),
            });
        }
        let values: &[Option<Bson>] = values;
        let value = |p: &str| {
            self.fields
                .iter()
                .position(|f| f == p)
                .and_then(|i| values.get(i))
                .and_then(Option::as_ref)
        };
        Some(eval::node_matches_values(self.filter.root(), &value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    fn raw(d: &Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(d).expect("raw")
    }

    #[test]
    fn a_raw_filter_answers_as_the_filter_on_the_whole_document() {
        let docs = [
            doc! {"_id": 1, "a": {"b": [1, 5]}, "c": "x", "d": null},
            doc! {"_id": 2, "a": {"b": 3}, "c": "y"},
            doc! {"_id": 3, "a": [{"b": 7}, {"b": 2}], "e": 1.5},
            doc! {"_id": 4},
            doc! {"_id": 5, "a": 7, "c": null, "e": [1, [2, 3]], "t": {"u": {"v": 1.0}}},
            doc! {"_id": 6, "a": {"b": null}, "c": ["x", "y"], "t": {"u": 5}},
        ];
        let filters = [
            doc! {},
            doc! {"a.b": {"$gt": 4}},
            doc! {"a.b": 3, "c": "y"},
            doc! {"$or": [{"c": "x"}, {"e": {"$exists": true}}]},
            doc! {"d": null},
            doc! {"a": {"$elemMatch": {"b": {"$lt": 3}}}},
            doc! {"$nor": [{"_id": {"$in": [1, 2]}}]},
            doc! {"c": {"$not": {"$regex": "^x"}}},
            doc! {"a.b": {"$bitsAnySet": [0, 2]}, "e": {"$bitsAllClear": 1}},
            doc! {"a.b": null},
            doc! {"a.b": {"$exists": false}},
            doc! {"t.u.v": 1},
            doc! {"t.u.v": {"$exists": true}, "_id": {"$gte": 5}},
            doc! {"c": {"$size": 2}},
            doc! {"c": {"$in": [null, "y"]}},
            doc! {"e": {"$elemMatch": {"$gt": 0}}},
            doc! {"e": 2},
            doc! {"a": {"$type": "object"}},
            doc! {"$or": [{"a.b": {"$gt": 4}}, {"t.u": 5}], "c": {"$ne": "x"}},
        ];
        for spec in &filters {
            let f = Filter::parse(spec).expect("filter");
            let r = RawFilter::new(&f).expect("raw form");
            for d in &docs {
                assert_eq!(r.matches(&raw(d)), f.matches(d), "{spec} on {d}");
            }
        }
    }

    #[test]
    fn filters_reading_the_whole_document_have_no_raw_form() {
        let f = Filter::parse(&doc! {"a": 1, "$expr": {"$eq": ["$a", "$b"]}}).expect("filter");
        assert!(RawFilter::new(&f).is_none());
    }
}
