//! Building an index over a collection's existing documents, and checking that every
//! index agrees with the documents (`validate`).

use super::keys::{document_keys, key_value_document};
use super::Index;
use crate::collection::{decode, Collection};
use crate::error::{CatalogError, Result};
use hourglass_storage::Snapshot;
use std::collections::{BTreeMap, HashSet};

/// Entries written per storage batch while building.
const BUILD_CHUNK: usize = 10_000;

/// Writes the entries of every document of `snap` into `index`'s (new, empty) tree, in
/// chunks. Returns whether the index is multikey. Fails on duplicates of a unique index or
/// on documents that cannot be indexed.
pub(crate) fn build(coll: &Collection, index: &Index, snap: &Snapshot) -> Result<bool> {
    let engine = coll.engine();
    let mut batch = engine.batch();
    let mut multikey = false;
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    for entry in snap.scan_prefix(coll.tree(), b"") {
        let (id_key, bytes) = entry?;
        let doc = decode(&bytes)?;
        let (keys, multi) = document_keys(index, &doc)?;
        multikey |= multi;
        for e in keys {
            if index.spec.unique && !seen.insert(e.key.clone()) {
                return Err(CatalogError::DuplicateKey {
                    ns: coll.namespace().to_string(),
                    index: index.spec.name.clone(),
                    key_pattern: Box::new(index.spec.key.clone()),
                    key_value: Box::new(key_value_document(&index.spec.parts, &e.values)),
                });
            }
            batch.put(index.tree(), &index.entry_key(&e.key, &id_key), &id_key);
        }
        if batch.len() >= BUILD_CHUNK {
            engine.commit(std::mem::replace(&mut batch, engine.batch()))?;
        }
    }
    engine.commit(batch)?;
    Ok(multikey)
}

/// What `validate` found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ValidateReport {
    pub nrecords: u64,
    /// Entries per index, `_id_` first.
    pub keys_per_index: Vec<(String, u64)>,
    pub errors: Vec<String>,
}

/// Compares every index of `coll` with the documents, as of one snapshot.
pub fn validate(coll: &Collection) -> Result<ValidateReport> {
    let snap = coll.engine().snapshot();
    let indexes = coll.indexes();
    let mut expected: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new(); indexes.len()];
    let mut report = ValidateReport::default();
    for entry in snap.scan_prefix(coll.tree(), b"") {
        let (id_key, bytes) = entry?;
        report.nrecords += 1;
        let doc = match decode(&bytes) {
            Ok(d) => d,
            Err(e) => {
                report.errors.push(format!("corrupt record: {e}"));
                continue;
            }
        };
        for (n, index) in indexes.iter().enumerate() {
            match document_keys(index, &doc) {
                Ok((keys, _)) => {
                    for e in keys {
                        expected[n].insert(index.entry_key(&e.key, &id_key), id_key.clone());
                    }
                }
                Err(e) => report.errors.push(format!(
                    "index {} cannot index a document: {e}",
                    index.spec.name
                )),
            }
        }
    }
    report
        .keys_per_index
        .push((super::ID_INDEX_NAME.to_string(), report.nrecords));
    for (n, index) in indexes.iter().enumerate() {
        let mut count = 0u64;
        let mut missing = expected[n].clone();
        let mut extra = 0u64;
        for entry in snap.scan_prefix(index.tree(), b"") {
            let (k, v) = entry?;
            count += 1;
            match missing.remove(&k) {
                Some(id) if id == v => {}
                _ => extra += 1,
            }
        }
        if extra > 0 {
            report.errors.push(format!(
                "index {} has {extra} entries that match no document",
                index.spec.name
            ));
        }
        if !missing.is_empty() {
            report.errors.push(format!(
                "index {} is missing {} entries for existing documents",
                index.spec.name,
                missing.len()
            ));
        }
        report.keys_per_index.push((index.spec.name.clone(), count));
    }
    Ok(report)
}
