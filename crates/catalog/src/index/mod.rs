//! Secondary indexes of regular collections. Each index is its own storage tree
//! (`c<collection id>.i<ident>`); an entry's key is the document's index key (see
//! [`keys`]) followed, for non-unique indexes, by the key string of its `_id`; the value is
//! always the `_id` key string (the document's key in the collection tree). Specs persist
//! in the collection's catalog entry.

pub mod build;
mod geo;
pub mod keys;
pub mod spec;
mod spec_checks;
pub mod staging;

use bson::{doc, Document};
use hourglass_query::filter::Filter;
use hourglass_storage::Tree;
use std::sync::atomic::{AtomicBool, Ordering};

pub use spec::{IndexSpec, KeyKind, KeyPart, ID_INDEX_NAME};

/// A secondary index: its spec, its tree, and whether any document made it multikey.
pub struct Index {
    pub spec: IndexSpec,
    /// Number of the index within its collection (names its tree).
    pub ident: u64,
    tree: Tree,
    partial: Option<Filter>,
    multikey: AtomicBool,
}

/// Name of the tree of index `ident` of collection `coll_id`.
pub fn tree_name(coll_id: u64, ident: u64) -> String {
    format!("c{coll_id}.i{ident}")
}

impl Index {
    /// Bytes of the index's tree on disk.
    pub fn disk_size(&self) -> u64 {
        self.tree.disk_space()
    }

    /// Compacts the index's tree; returns the bytes freed.
    pub fn compact(&self) -> Result<u64, hourglass_storage::StorageError> {
        self.tree.compact()
    }

    pub(crate) fn new(spec: IndexSpec, ident: u64, tree: Tree, multikey: bool) -> Index {
        let partial = spec.partial.as_ref().and_then(|p| Filter::parse(p).ok());
        Index {
            spec,
            ident,
            tree,
            partial,
            multikey: AtomicBool::new(multikey),
        }
    }

    /// The same index with another spec (collMod), sharing the tree.
    pub(crate) fn with_spec(&self, spec: IndexSpec) -> Index {
        Index {
            spec,
            ident: self.ident,
            tree: self.tree.clone(),
            partial: self.partial.clone(),
            multikey: AtomicBool::new(self.is_multikey()),
        }
    }

    /// The index's tree.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    pub fn partial_filter(&self) -> Option<&Filter> {
        self.partial.as_ref()
    }

    pub fn is_multikey(&self) -> bool {
        self.multikey.load(Ordering::Relaxed)
    }

    pub(crate) fn set_multikey(&self) {
        self.multikey.store(true, Ordering::Relaxed);
    }

    /// The entry persisted in the collection's catalog document.
    pub(crate) fn catalog_entry(&self) -> Document {
        doc! {
            "spec": self.spec.to_document(),
            "ident": self.ident as i64,
            "multikey": self.is_multikey(),
        }
    }

    /// The storage key of the entry for `key` of the document whose `_id` key string is `id`.
    pub fn entry_key(&self, key: &[u8], id: &[u8]) -> Vec<u8> {
        let mut k = key.to_vec();
        if !self.spec.unique {
            k.extend_from_slice(id);
        }
        k
    }
}
