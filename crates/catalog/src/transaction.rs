//! Committing a multi-document transaction (`hourglass_storage::txn` holds its writes until
//! then): the writers of every collection it wrote are held off while its keys are checked
//! and its writes applied, so that no write outside it can read a document before the
//! commit and overwrite it after.

use crate::catalog::Catalog;
use crate::collection::Collection;
use crate::error::Result;
use hourglass_storage::{StorageError, Transaction};
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
    /// Applies `txn`'s writes atomically and durably, or fails with 112 WriteConflict when
    /// a key it wrote changed since it started (or its collection was dropped meanwhile).
    /// The transaction is over either way.
    pub fn commit_transaction(&self, txn: &Transaction) -> Result<()> {
        let trees = txn.written_trees();
        let mut colls: Vec<Arc<Collection>> = self
            .all_collections()
            .into_iter()
            .filter(|c| trees.iter().any(|t| belongs_to(t, c)))
            .collect();
        if trees
            .iter()
            .any(|t| !colls.iter().any(|c| belongs_to(t, c)))
        {
            self.abort_transaction(txn);
            return Err(StorageError::WriteConflict.into());
        }
        colls.sort_by_key(|c| c.id);
        let ticket = {
            let _writers: Vec<_> = colls.iter().map(|c| c.lock_writes()).collect();
            self.engine().commit_transaction(txn)
        };
        let created = self.created_in.lock().remove(&txn.id());
        match ticket {
            Ok(ticket) => self.engine().wait_durable(ticket)?,
            Err(e) => {
                self.drop_created(created);
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// Drops `txn`'s writes; collections its inserts created are dropped again while still
    /// empty (mongod creates them inside the transaction, so an abort leaves none).
    pub fn abort_transaction(&self, txn: &Transaction) {
        self.engine().abort_transaction(txn);
        let created = self.created_in.lock().remove(&txn.id());
        self.drop_created(created);
    }

    fn drop_created(&self, created: Option<Vec<crate::Namespace>>) {
        let Some(created) = created else {
            return;
        };
        // Read the collections as they are, not through the transaction's snapshot.
        let _outside = Transaction::suspend();
        let _ddl = self.ddl_lock();
        for ns in created {
            if let Err(e) = self.drop_if_empty_locked(&ns) {
                tracing::warn!(ns = %ns, error = %e, "could not drop a collection an aborted transaction created");
            }
        }
    }
}
