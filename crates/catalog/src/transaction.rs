//! The catalog side of multi-document transactions (`hourglass_storage::txn` holds their
//! writes until commit):
//!
//! - Collections a transaction creates (explicitly, implicitly by a first write, or by
//!   `createIndexes`) are pending: only it sees them (`Catalog::get` looks here first on
//!   its threads), their catalog entries are among its writes, and its commit adds them to
//!   the catalog; an abort drops their trees. A crash before the commit leaves trees no
//!   catalog entry names, dropped at the next start.
//! - Committing holds off the writers of every collection the transaction wrote, so that
//!   no write outside it can read a document before the commit and overwrite it after.

use crate::catalog::Catalog;
use crate::collection::Collection;
use crate::error::{CatalogError, Result};
use crate::index::{self, Index, IndexSpec};
use crate::index_ddl::CreateIndexesOutcome;
use crate::Namespace;
use hourglass_storage::{StorageError, Transaction};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Whether `tree` is the tree of `c` or of one of its indexes (`c<id>` / `c<id>.i<n>`).
fn belongs_to(tree: &str, c: &Collection) -> bool {
    let own = c.tree().name();
    tree == own
        || tree
            .strip_prefix(own)
            .is_some_and(|rest| rest.starts_with('.'))
}

impl Catalog {
    /// The collection `ns` that transaction `txn` created, if it did.
    pub(crate) fn pending_get(&self, txn: u64, ns: &Namespace) -> Option<Arc<Collection>> {
        self.pending.lock().get(&txn)?.get(ns).cloned()
    }

    /// `createIndexes` inside a transaction, as mongod allows it: indexes that already
    /// exist are fine anywhere; new ones only on a collection this transaction created
    /// (here or earlier) and that is still empty. Nothing to build: the index trees start
    /// empty and the transaction's later writes fill them.
    pub(crate) fn create_indexes_in_transaction(
        &self,
        txn: &Transaction,
        ns: Namespace,
        specs: Vec<IndexSpec>,
    ) -> Result<CreateIndexesOutcome> {
        let (c, created_collection) = match self.get(&ns.db, &ns.coll) {
            Some(c) => (c, false),
            None => (
                self.create(&ns.db, &ns.coll, bson::Document::new())?.0,
                true,
            ),
        };
        let _ddl = self.ddl_lock();
        let (before, wanted) = crate::index_ddl::new_specs(&c, specs)?;
        if wanted.is_empty() {
            return Ok(CreateIndexesOutcome {
                before,
                after: before,
                created_collection,
            });
        }
        let refuse = |what: &str| {
            Err(CatalogError::OperationNotSupportedInTransaction(format!(
                "Cannot create new indexes on {what} collection {ns} in a multi-document transaction."
            )))
        };
        if self.pending_get(txn.id(), &ns).is_none() {
            return refuse("existing");
        }
        let empty = c
            .engine()
            .snapshot()
            .scan_prefix(c.tree(), b"")
            .next()
            .is_none();
        if !empty {
            return refuse("non-empty");
        }
        let mut all: Vec<Arc<Index>> = c.indexes().iter().cloned().collect();
        for spec in wanted {
            let ident = c.take_ident();
            let tree = c.engine().tree(&index::tree_name(c.id, ident))?;
            all.push(Arc::new(Index::new(spec, ident, tree, false)));
        }
        let after = all.len() + 1;
        c.set_indexes_unseen(all);
        // A batch built here belongs to the transaction: the entry commits with it.
        let mut b = c.engine().batch();
        c.stage_meta(&mut b)?;
        c.engine().apply(b)?;
        Ok(CreateIndexesOutcome {
            before,
            after,
            created_collection,
        })
    }

    /// Applies `txn`'s writes atomically and durably, or fails with 112 WriteConflict when
    /// a key it wrote changed since it started (or its collection was dropped meanwhile).
    /// The transaction is over either way.
    pub fn commit_transaction(&self, txn: &Transaction) -> Result<()> {
        let created = self.pending.lock().remove(&txn.id()).unwrap_or_default();
        let trees = txn.written_trees();
        let mut colls: Vec<Arc<Collection>> = self
            .all_collections()
            .into_iter()
            .chain(created.values().cloned())
            .filter(|c| trees.iter().any(|t| belongs_to(t, c)))
            .collect();
        let known = |t: &String| {
            colls.iter().any(|c| belongs_to(t, c))
                || (!created.is_empty() && t == crate::catalog::META_TREE)
        };
        if !trees.iter().all(known) {
            self.engine().abort_transaction(txn);
            self.drop_pending(created);
            return Err(StorageError::WriteConflict.into());
        }
        colls.sort_by_key(|c| c.id);
        // Creations commit under the DDL lock, so that no create or drop of the same names
        // runs between the durable entries and the catalog's map.
        let _ddl = (!created.is_empty()).then(|| self.ddl_lock());
        let ticket = {
            let _writers: Vec<_> = colls.iter().map(|c| c.lock_writes()).collect();
            self.engine().commit_transaction(txn)
        };
        match ticket {
            Ok(ticket) => {
                self.add_committed(created);
                self.engine().wait_durable(ticket)?;
            }
            Err(e) => {
                self.drop_pending(created);
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// Drops `txn`'s writes and the collections it created.
    pub fn abort_transaction(&self, txn: &Transaction) {
        self.engine().abort_transaction(txn);
        let created = self.pending.lock().remove(&txn.id()).unwrap_or_default();
        self.drop_pending(created);
    }

    fn drop_pending(&self, created: BTreeMap<Namespace, Arc<Collection>>) {
        for c in created.values() {
            self.drop_trees_of(c);
        }
    }

    /// Drops the trees of `c` (its own and its indexes'), logging a failure: for a
    /// collection no catalog entry names, whose trees the next start drops anyway.
    pub(crate) fn drop_trees_of(&self, c: &Collection) {
        self.drop_trees(&c.indexes());
        if let Err(e) = self.engine().drop_tree(c.tree().clone()) {
            tracing::warn!(ns = %c.namespace(), error = %e, "could not drop the tree of a collection no transaction committed");
        }
    }
}
