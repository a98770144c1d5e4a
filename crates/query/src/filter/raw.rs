//! A filter checked on a stored document's BSON bytes before the document is built: only
//! the paths the filter reads are converted, into a small document the filter is matched
//! against. A predicate on `a.b` reads `a.b` (all of `a` when it is not a document), so
//! the answer is the whole document's. Filters that read the whole document (`$expr`,
//! `$jsonSchema`) have no such form.

use super::{Filter, Node};
use crate::raw_pick::FieldTree;
use bson::{Document, RawDocument};
use std::collections::BTreeSet;

/// The paths of a filter and the filter, to match stored bytes with.
#[derive(Debug, Clone)]
pub struct RawFilter {
    fields: Vec<String>,
    tree: FieldTree,
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
        Some(RawFilter {
            tree: FieldTree::from_paths(fields.iter().map(String::as_str)),
            fields: fields.into_iter().collect(),
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
        match crate::raw_pick::picked_document(raw.as_bytes(), &self.tree) {
            Some(partial) => self.filter.matches(&partial),
            None => true,
        }
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
