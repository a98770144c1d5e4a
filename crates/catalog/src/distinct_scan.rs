//! DISTINCT_SCAN: one document per distinct value of an index's first field, found by
//! seeking past each value instead of reading every entry.
//!
//! An entry's key starts with the encoding of its first field's value (see
//! [`crate::index::keys`]), and key strings of one field are prefix-free, so the entries
//! sharing a value are exactly those starting with its encoding: the scan reads the first
//! entry at or after a position, fetches its document, encodes that document's value to
//! learn the prefix, and continues at the end of the prefix. Of each value's entries it
//! returns the document of the first (in the index's order) or of the last.
//!
//! Only a plain index qualifies (see [`eligible`]): a multikey index has several entries
//! per document, a sparse or partial one lacks documents, and a hashed or geo first field
//! does not keep values apart.

use crate::collection::{decode, Collection, DocStream};
use crate::error::{CatalogError, Result};
use crate::index::keys::{append_field, prefix_end};
use crate::index::{Index, KeyKind};
use crate::scan::ScanStats;
use bson::{Bson, Document};
use hourglass_query::path::lookup_path;
use hourglass_storage::{Snapshot, Tree};
use std::sync::Arc;

/// Whether `index` can be read one value of its first field at a time: ascending or
/// descending fields, never multikey, every document in it, strings in the query's
/// collation, and visible to the planner.
pub fn eligible(index: &Index) -> bool {
    let spec = &index.spec;
    !spec.hidden
        && !spec.sparse
        && spec.partial.is_none()
        && !index.is_multikey()
        && spec.collation.as_deref() == hourglass_query::collation::current().as_deref()
        && spec
            .parts
            .iter()
            .all(|p| matches!(p.kind, KeyKind::Asc | KeyKind::Desc))
}

/// The first index of `coll` that [`eligible`] allows and that starts with `path`.
pub fn index_starting_with(coll: &Collection, path: &str) -> Option<Arc<Index>> {
    coll.indexes()
        .iter()
        .find(|i| eligible(i) && i.spec.parts.first().is_some_and(|p| p.path == path))
        .cloned()
}

/// The value of `index`'s first field in `doc` as the index stores it (null when missing).
pub fn first_key_value(index: &Index, doc: &Document) -> Bson {
    let path = index.spec.parts.first().map_or("", |p| p.path.as_str());
    match lookup_path(doc, path).into_iter().next() {
        Some(Some(v)) => v.clone(),
        _ => Bson::Null,
    }
}

impl Collection {
    /// One document per distinct value of `index`'s first field, in the index's order: of
    /// the entries sharing the value, the first one's document (`last`: the last one's).
    /// The caller checks [`eligible`] first.
    pub fn distinct_scan(&self, index: Arc<Index>, last: bool, stats: Arc<ScanStats>) -> DocStream {
        Box::new(DistinctScan {
            snap: self.engine().snapshot(),
            coll_tree: self.tree().clone(),
            index,
            last,
            stats,
            next: Some(Vec::new()),
        })
    }
}

struct DistinctScan {
    snap: Snapshot,
    coll_tree: Tree,
    index: Arc<Index>,
    last: bool,
    stats: Arc<ScanStats>,
    /// Where the next value's entries start (at or after); `None` once past the end.
    next: Option<Vec<u8>>,
}

impl DistinctScan {
    /// The first entry of the index tree in `[start, end)` (the last when `reverse`),
    /// as its document.
    fn entry(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        reverse: bool,
    ) -> Result<Option<(Vec<u8>, Document)>> {
        let Some(entry) = self
            .snap
            .range(self.index.tree(), start, end, reverse)
            .next()
        else {
            return Ok(None);
        };
        let (key, id_key) = entry?;
        self.stats.key();
        let bytes = self.snap.get(&self.coll_tree, &id_key)?.ok_or_else(|| {
            CatalogError::Corrupt(format!(
                "index {} has an entry for a document that does not exist",
                self.index.spec.name
            ))
        })?;
        self.stats.doc();
        Ok(Some((key, decode(&bytes)?)))
    }

    fn step(&mut self) -> Result<Option<Document>> {
        let Some(start) = self.next.take() else {
            return Ok(None);
        };
        let Some((key, first)) = self.entry(&start, None, false)? else {
            return Ok(None);
        };
        let Some(part) = self.index.spec.parts.first() else {
            return Ok(None);
        };
        // As the index encodes it: in its collation's keys when it has one.
        let value = first_key_value(&self.index, &first);
        let value = match self.index.spec.collation.as_deref() {
            Some(c) => c.key_value(&value),
            None => value,
        };
        let mut prefix = Vec::new();
        append_field(&mut prefix, part, &value);
        if !key.starts_with(&prefix) {
            return Err(CatalogError::Corrupt(format!(
                "index {} has an entry whose key does not start with its document's value",
                self.index.spec.name
            )));
        }
        self.next = prefix_end(&prefix);
        if !self.last {
            return Ok(Some(first));
        }
        Ok(self
            .entry(&prefix, self.next.as_deref(), true)?
            .map(|(_, doc)| doc))
    }
}

impl Iterator for DistinctScan {
    type Item = Result<Document>;

    fn next(&mut self) -> Option<Self::Item> {
        let out = self.step();
        if out.is_err() {
            self.next = None;
        }
        out.transpose()
    }
}
