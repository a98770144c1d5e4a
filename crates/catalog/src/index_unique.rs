//! Converting an index between non-unique and unique, as `collMod` does (MongoDB 6.0+):
//! `prepareUnique: true` makes the index refuse new duplicate keys while it keeps its
//! non-unique layout (`index/staging.rs`); `unique: true` then checks that no key is held
//! by two documents (CannotConvertIndexToUnique 359, listing them) and rebuilds the
//! index in the unique layout (one entry per key, `entry_key`); `forceNonUnique: true`
//! rebuilds a unique index in the non-unique layout.
//!
//! A rebuild writes a new tree and then the catalog entry naming it, which is the commit
//! point: a crash before it leaves an orphan tree, one after it the old tree, and both are
//! dropped at the next start (`catalog.rs`, orphan trees).

use crate::catalog::Catalog;
use crate::collection::{decode, Collection};
use crate::error::{CatalogError, Result};
use crate::index::keys::document_keys;
use crate::index::{Index, IndexSpec};
use bson::Bson;
use hourglass_storage::Snapshot;
use std::collections::BTreeMap;
use std::sync::Arc;

/// CannotConvertIndexToUnique, with the `_id`s of the documents sharing each key (in key
/// order), when `index` has duplicate keys as of `snap`.
pub(crate) fn check_no_duplicates(c: &Collection, index: &Index, snap: &Snapshot) -> Result<()> {
    let mut holders: BTreeMap<Vec<u8>, Vec<Bson>> = BTreeMap::new();
    for entry in snap.scan_prefix(c.tree(), b"") {
        let (_, bytes) = entry?;
        hourglass_query::interrupt::check()?;
        let doc = decode(&bytes)?;
        let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
        for e in document_keys(index, &doc)?.0 {
            holders.entry(e.key).or_default().push(id.clone());
        }
    }
    let violations: Vec<Vec<Bson>> = holders.into_values().filter(|ids| ids.len() > 1).collect();
    if violations.is_empty() {
        return Ok(());
    }
    Err(CatalogError::CannotConvertIndexToUnique(violations))
}

impl Catalog {
    /// Builds `spec` (the index at `pos` of `c`, with its layout changed) into a new tree
    /// and swaps it in; the caller holds the DDL and write locks.
    pub(crate) fn rebuild_index(
        &self,
        c: &Arc<Collection>,
        pos: usize,
        spec: IndexSpec,
    ) -> Result<()> {
        let current = c.indexes();
        let rebuilt = self.build_new(c, spec, &c.engine().snapshot())?;
        let mut all: Vec<Arc<Index>> = current.iter().cloned().collect();
        all[pos] = rebuilt.clone();
        self.install(c, &current, all, &[rebuilt])?;
        self.drop_trees(&[current[pos].clone()]);
        Ok(())
    }
}
