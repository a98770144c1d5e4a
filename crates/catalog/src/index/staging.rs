//! One write operation's staged changes: documents and their index entries go into the
//! same storage batch, so data and indexes never disagree after a crash. Unique indexes
//! are checked against the snapshot plus the entries this batch already staged.

use super::keys::{document_keys, key_value_document, EntryKey};
use super::Index;
use crate::collection::{encode, Collection, StoreFor};
use crate::error::{CatalogError, Result};
use crate::keystring;
use bson::{Bson, Document};
use hourglass_storage::{Batch, Snapshot};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Staged writes of one operation (built under the collection's write lock).
pub(crate) struct Staging<'a> {
    coll: &'a Collection,
    pub snap: Snapshot,
    pub batch: Batch,
    indexes: Arc<Vec<Arc<Index>>>,
    /// `_id` keys inserted by this batch.
    pending_ids: HashSet<Vec<u8>>,
    /// Unique-index entries staged by this batch: `Some(id)` added, `None` removed.
    unique: HashMap<(usize, Vec<u8>), Option<Vec<u8>>>,
    /// Entries this batch removed from `prepareUnique` indexes (whose keys may still have
    /// other, older entries).
    removed_prepared: HashSet<(usize, Vec<u8>)>,
    became_multikey: bool,
}

type DocKeys = Vec<(Vec<EntryKey>, bool)>;

impl<'a> Staging<'a> {
    pub fn new(coll: &'a Collection) -> Staging<'a> {
        Staging {
            coll,
            snap: coll.engine().snapshot(),
            batch: coll.engine().document_batch(),
            indexes: coll.indexes(),
            pending_ids: HashSet::new(),
            unique: HashMap::new(),
            removed_prepared: HashSet::new(),
            became_multikey: false,
        }
    }

    fn keys_of(&self, doc: &Document) -> Result<DocKeys> {
        self.indexes.iter().map(|i| document_keys(i, doc)).collect()
    }

    /// Fails with DuplicateKey when a unique (or `prepareUnique`) index already holds
    /// `key` for another document.
    fn check_unique(&self, n: usize, e: &EntryKey, id: &[u8]) -> Result<()> {
        let index = &self.indexes[n];
        if !index.spec.unique && !index.spec.prepare_unique {
            return Ok(());
        }
        let holder = match self.unique.get(&(n, e.key.clone())) {
            Some(Some(staged)) => Some(staged.clone()),
            _ if index.spec.prepare_unique && !index.spec.unique => {
                self.prepared_holder(n, e, id)?
            }
            Some(None) => None,
            None => self.snap.get(index.tree(), &e.key)?,
        };
        match holder {
            Some(other) if other != id => Err(CatalogError::DuplicateKey {
                ns: self.coll.namespace().to_string(),
                index: index.spec.name.clone(),
                key_pattern: Box::new(index.spec.key.clone()),
                key_value: Box::new(key_value_document(&index.spec.parts, &e.values)),
            }),
            _ => Ok(()),
        }
    }

    /// Another document holding `key` in a `prepareUnique` index, which keeps the
    /// non-unique layout (key, then `_id`; key strings are prefix-free, so the entries
    /// starting with `key` are exactly its entries), less those this batch removed.
    fn prepared_holder(&self, n: usize, e: &EntryKey, id: &[u8]) -> Result<Option<Vec<u8>>> {
        let index = &self.indexes[n];
        for entry in self.snap.scan_prefix(index.tree(), &e.key) {
            let (k, holder) = entry?;
            if holder != id && !self.removed_prepared.contains(&(n, k)) {
                return Ok(Some(holder));
            }
        }
        Ok(None)
    }

    fn put_entry(&mut self, n: usize, e: &EntryKey, id: &[u8]) {
        let index = self.indexes[n].clone();
        let key = index.entry_key(&e.key, id);
        self.batch.put(index.tree(), &key, id);
        if index.spec.unique || index.spec.prepare_unique {
            self.unique.insert((n, e.key.clone()), Some(id.to_vec()));
            self.removed_prepared.remove(&(n, key));
        }
    }

    fn delete_entry(&mut self, n: usize, e: &EntryKey, id: &[u8]) {
        let index = self.indexes[n].clone();
        let key = index.entry_key(&e.key, id);
        self.batch.delete(index.tree(), &key);
        if index.spec.unique || index.spec.prepare_unique {
            self.unique.insert((n, e.key.clone()), None);
        }
        if index.spec.prepare_unique && !index.spec.unique {
            self.removed_prepared.insert((n, key));
        }
    }

    fn note_multikey(&mut self, keys: &DocKeys) {
        for (n, (_, multi)) in keys.iter().enumerate() {
            if *multi && !self.indexes[n].is_multikey() {
                self.indexes[n].set_multikey();
                self.became_multikey = true;
            }
        }
    }

    /// Stages a new document (which must already carry its `_id`).
    pub fn insert(&mut self, doc: &Document) -> Result<()> {
        let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
        let id_key = keystring::id_key(&id);
        if self.pending_ids.contains(&id_key) || self.snap.get(self.coll.tree(), &id_key)?.is_some()
        {
            return Err(self.coll.duplicate(&id));
        }
        let bytes = encode(doc, StoreFor::Insert)?;
        let keys = self.keys_of(doc)?;
        for (n, (entries, _)) in keys.iter().enumerate() {
            for e in entries {
                self.check_unique(n, e, &id_key)?;
            }
        }
        self.note_multikey(&keys);
        for (n, (entries, _)) in keys.iter().enumerate() {
            for e in entries {
                self.put_entry(n, e, &id_key);
            }
        }
        self.batch.put(self.coll.tree(), &id_key, &bytes);
        self.pending_ids.insert(id_key);
        Ok(())
    }

    /// Stages the replacement of `old` by `new` (same `_id`).
    pub fn replace(&mut self, old: &Document, new: &Document) -> Result<()> {
        let id = new.get("_id").cloned().unwrap_or(Bson::Null);
        let id_key = keystring::id_key(&id);
        let bytes = encode(new, StoreFor::Update)?;
        let old_keys = self.keys_of(old)?;
        let new_keys = self.keys_of(new)?;
        let mut changes = Vec::with_capacity(old_keys.len());
        for (n, ((old_e, _), (new_e, _))) in old_keys.iter().zip(&new_keys).enumerate() {
            let removed: Vec<&EntryKey> = old_e.iter().filter(|e| !new_e.contains(e)).collect();
            let added: Vec<&EntryKey> = new_e.iter().filter(|e| !old_e.contains(e)).collect();
            for e in &added {
                self.check_unique(n, e, &id_key)?;
            }
            changes.push((removed, added));
        }
        self.note_multikey(&new_keys);
        for (n, (removed, added)) in changes.into_iter().enumerate() {
            for e in removed {
                self.delete_entry(n, e, &id_key);
            }
            for e in added {
                self.put_entry(n, e, &id_key);
            }
        }
        self.batch.put(self.coll.tree(), &id_key, &bytes);
        Ok(())
    }

    /// Stages the removal of `old` and its index entries.
    pub fn remove(&mut self, old: &Document) -> Result<()> {
        let id = old.get("_id").cloned().unwrap_or(Bson::Null);
        let id_key = keystring::id_key(&id);
        // A stored document whose keys can no longer be computed still has to go.
        let keys = self.keys_of(old).unwrap_or_default();
        for (n, (entries, _)) in keys.iter().enumerate() {
            for e in entries {
                self.delete_entry(n, e, &id_key);
            }
        }
        self.batch.delete(self.coll.tree(), &id_key);
        Ok(())
    }

    /// The batch to apply, with the catalog entry rewritten when an index became multikey.
    pub fn finish(mut self) -> Result<Batch> {
        if self.became_multikey {
            self.coll.stage_meta(&mut self.batch)?;
        }
        Ok(self.batch)
    }
}
