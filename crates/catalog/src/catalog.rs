//! The collection catalog: which collections exist, their options, and DDL (create, drop,
//! rename), persisted in the `catalog` tree so it survives restarts.

use crate::collection::{Collection, CollectionStorage};
use crate::error::{CatalogError, Result};
use crate::index::{self, Index, IndexSpec};
use crate::namespace::{validate_collection_name, validate_db_name, Namespace};
use bson::Document;
use hourglass_storage::{Engine, Transaction, Tree};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub(crate) const META_TREE: &str = "catalog";
/// Databases declared empty (InfluxDB's `CREATE DATABASE`): MongoDB has no empty
/// databases, so they are kept apart from the collections; one key per name.
const DATABASES_TREE: &str = "databases";

/// All collections of the server.
pub struct Catalog {
    engine: Engine,
    meta: Tree,
    colls: RwLock<BTreeMap<Namespace, Arc<Collection>>>,
    declared: Tree,
    declared_names: RwLock<BTreeSet<String>>,
    next_id: AtomicU64,
    ddl: Mutex<()>,
    /// Collections created inside open transactions, by transaction id: only that
    /// transaction sees them until its commit adds them to `colls` (`transaction.rs`).
    pub(crate) pending: Mutex<HashMap<u64, BTreeMap<Namespace, Arc<Collection>>>>,
}

fn meta_key(ns: &Namespace) -> Vec<u8> {
    ns.to_string().into_bytes()
}

fn tree_name(id: u64) -> String {
    format!("c{id}")
}

impl Catalog {
    /// Loads the catalog from `engine`, dropping trees no collection refers to (left over
    /// by a crash in the middle of a drop).
    pub fn open(engine: Engine) -> Result<Catalog> {
        let meta = engine.tree(META_TREE)?;
        let mut colls = BTreeMap::new();
        let mut max_id = 0;
        let on_disk = engine.tree_names();
        let mut unfinished_drops = engine.batch();
        for entry in engine.snapshot().scan_prefix(&meta, b"") {
            let (key, value) = entry?;
            let d = bson::from_slice::<Document>(&value)
                .map_err(|e| CatalogError::Corrupt(e.to_string()))?;
            let (ns, id, uuid, options) = parse_meta(&d)?;
            max_id = max_id.max(id);
            if !on_disk.contains(&tree_name(id)) {
                // A drop deletes the trees first (it must free space on a full disk), then
                // this entry: a crash in between leaves the entry, and the drop ends here.
                tracing::info!(ns = %ns, "finishing an interrupted drop");
                unfinished_drops.delete(&meta, &key);
                continue;
            }
            let tree = engine.tree(&tree_name(id))?;
            let indexes = parse_indexes(&engine, id, &d)?;
            let c = Collection::new(
                id,
                ns.clone(),
                uuid,
                options,
                CollectionStorage {
                    tree,
                    engine: engine.clone(),
                    meta: meta.clone(),
                    indexes,
                },
            );
            colls.insert(ns, Arc::new(c));
        }
        let live: Vec<String> = colls
            .values()
            .flat_map(|c| {
                let mut names = vec![tree_name(c.id)];
                names.extend(c.indexes().iter().map(|i| index::tree_name(c.id, i.ident)));
                names
            })
            .collect();
        engine.commit(unfinished_drops)?;
        for name in engine.tree_names() {
            if name != META_TREE && name != DATABASES_TREE && !live.contains(&name) {
                tracing::info!(tree = %name, "dropping orphaned tree");
                let t = engine.tree(&name)?;
                engine.drop_tree(t)?;
            }
        }
        let declared = engine.tree(DATABASES_TREE)?;
        let mut declared_names = BTreeSet::new();
        for entry in engine.snapshot().scan_prefix(&declared, b"") {
            let (key, _) = entry?;
            declared_names.insert(String::from_utf8_lossy(&key).into_owned());
        }
        Ok(Catalog {
            engine,
            meta,
            colls: RwLock::new(colls),
            declared,
            declared_names: RwLock::new(declared_names),
            next_id: AtomicU64::new(max_id + 1),
            ddl: Mutex::new(()),
            pending: Mutex::default(),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The collection `db.coll`, if it exists (for a thread working for a transaction, also
    /// one that transaction created).
    pub fn get(&self, db: &str, coll: &str) -> Option<Arc<Collection>> {
        let ns = Namespace::new(db, coll);
        if let Some(txn) = Transaction::active() {
            if let Some(c) = self.pending_get(txn.id(), &ns) {
                return Some(c);
            }
        }
        self.colls.read().get(&ns).cloned()
    }

    /// The collection, created with default options when missing (implicit creation on
    /// the first write, as MongoDB does).
    pub fn get_or_create(&self, db: &str, coll: &str) -> Result<Arc<Collection>> {
        if let Some(c) = self.get(db, coll) {
            return Ok(c);
        }
        self.create(db, coll, Document::new()).map(|(c, _)| c)
    }

    /// Creates `db.coll` with `options`. Returns the collection and whether it was new;
    /// an existing collection with other options is `NamespaceExists`.
    ///
    /// On a thread working for a transaction, the collection and its catalog entry belong to
    /// the transaction: no one else sees it before the commit, an abort drops it, and an
    /// existing collection is always `NamespaceExists` (as in mongod).
    pub fn create(
        &self,
        db: &str,
        coll: &str,
        options: Document,
    ) -> Result<(Arc<Collection>, bool)> {
        validate_collection_name(db, coll)?;
        let _ddl = self.ddl.lock();
        let ns = Namespace::new(db, coll);
        let txn = Transaction::active();
        let pending = txn.as_ref().and_then(|t| self.pending_get(t.id(), &ns));
        if let Some(existing) = pending.or_else(|| self.colls.read().get(&ns).cloned()) {
            if txn.is_none() && existing.options() == options {
                return Ok((existing, false));
            }
            return Err(CatalogError::NamespaceExists(ns.to_string()));
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let uuid = bson::Uuid::new();
        let tree = self.engine.tree(&tree_name(id))?;
        let c = Arc::new(Collection::new(
            id,
            ns.clone(),
            uuid,
            options,
            CollectionStorage {
                tree,
                engine: self.engine.clone(),
                meta: self.meta.clone(),
                indexes: Vec::new(),
            },
        ));
        // In a transaction, the batch (and so the catalog entry) goes into the transaction.
        let mut b = self.engine.batch();
        c.stage_meta(&mut b)?;
        match txn {
            None => {
                self.engine.commit(b)?;
                self.colls.write().insert(ns, c.clone());
            }
            Some(txn) => {
                if let Err(e) = self.engine.apply(b) {
                    self.drop_trees_of(&c);
                    return Err(e.into());
                }
                self.pending
                    .lock()
                    .entry(txn.id())
                    .or_default()
                    .insert(ns, c.clone());
            }
        }
        Ok((c, true))
    }

    /// Rewrites the catalog entry of `c` durably (the caller holds the DDL lock).
    pub(crate) fn write_meta(&self, c: &Collection) -> Result<()> {
        let mut b = self.engine.batch();
        c.stage_meta(&mut b)?;
        self.engine.commit(b)?;
        Ok(())
    }

    /// Adds collections a transaction created, as its commit made them durable.
    pub(crate) fn add_committed(&self, created: BTreeMap<Namespace, Arc<Collection>>) {
        self.colls.write().extend(created);
    }

    pub(crate) fn ddl_lock(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.ddl.lock()
    }

    /// Replaces the options of `db.coll` (collMod), durably.
    pub fn set_options(&self, db: &str, coll: &str, options: Document) -> Result<()> {
        let _ddl = self.ddl.lock();
        let ns = Namespace::new(db, coll);
        let Some(c) = self.colls.read().get(&ns).cloned() else {
            return Err(CatalogError::NamespaceNotFound(format!(
                "ns does not exist: {ns}"
            )));
        };
        let _w = c.lock_writes();
        let old = c.options();
        c.set_options(options);
        if let Err(e) = self.write_meta(&c) {
            c.set_options(old);
            return Err(e);
        }
        Ok(())
    }

    /// Drops `db.coll`; returns false when it did not exist.
    pub fn drop_collection(&self, db: &str, coll: &str) -> Result<bool> {
        let _ddl = self.ddl.lock();
        self.drop_locked(&Namespace::new(db, coll))
    }

    fn drop_locked(&self, ns: &Namespace) -> Result<bool> {
        let Some(c) = self.colls.write().remove(ns) else {
            return Ok(false);
        };
        // Wait for in-flight writers of this collection before the trees go away.
        let _w = c.lock_writes();
        self.remove_storage(ns, &c)?;
        Ok(true)
    }

    /// Deletes the trees and then the catalog entry of `c`, removed from the map (the
    /// caller holds its write lock). The trees go first, so that a drop succeeds even on a
    /// full disk; the catalog entry of a collection whose tree is gone is deleted at the
    /// next start if this batch fails.
    fn remove_storage(&self, ns: &Namespace, c: &Collection) -> Result<()> {
        for i in c.indexes().iter() {
            self.engine.drop_tree(i.tree().clone())?;
        }
        self.engine.drop_tree(c.tree().clone())?;
        let mut b = self.engine.batch();
        b.delete(&self.meta, &meta_key(ns));
        if let Err(e) = self.engine.commit(b) {
            tracing::warn!(ns = %ns, error = %e, "dropped; the catalog entry goes at the next start");
        }
        Ok(())
    }

    /// Records `db` as existing while it has no collection (durable on return).
    pub fn declare_database(&self, db: &str) -> Result<()> {
        validate_db_name(db)?;
        let _ddl = self.ddl.lock();
        if self.declared_names.read().contains(db) {
            return Ok(());
        }
        let mut b = self.engine.batch();
        b.put(&self.declared, db.as_bytes(), b"");
        self.engine.commit(b)?;
        self.declared_names.write().insert(db.to_string());
        Ok(())
    }

    /// Whether `db` holds a collection or was declared.
    pub fn database_exists(&self, db: &str) -> bool {
        self.declared_names.read().contains(db) || self.colls.read().keys().any(|ns| ns.db == db)
    }

    /// Databases that hold a collection or were declared, in name order.
    pub fn database_names(&self) -> Vec<String> {
        let mut names = self.declared_names.read().clone();
        names.extend(self.colls.read().keys().map(|ns| ns.db.clone()));
        names.into_iter().collect()
    }

    /// Drops every collection of `db` (and its declaration).
    pub fn drop_database(&self, db: &str) -> Result<()> {
        validate_db_name(db)?;
        let _ddl = self.ddl.lock();
        if self.declared_names.write().remove(db) {
            let mut b = self.engine.batch();
            b.delete(&self.declared, db.as_bytes());
            self.engine.commit(b)?;
        }
        let names: Vec<Namespace> = self
            .colls
            .read()
            .keys()
            .filter(|ns| ns.db == db)
            .cloned()
            .collect();
        for ns in names {
            self.drop_locked(&ns)?;
        }
        Ok(())
    }

    /// Renames `from` to `to` (metadata only: the documents stay where they are).
    pub fn rename(&self, from: &Namespace, to: &Namespace, drop_target: bool) -> Result<()> {
        validate_collection_name(&to.db, &to.coll)?;
        let _ddl = self.ddl.lock();
        if from == to {
            return Err(CatalogError::IllegalOperation(
                "Can't rename a collection to itself".into(),
            ));
        }
        let Some(c) = self.colls.read().get(from).cloned() else {
            return Err(CatalogError::NamespaceNotFound(format!(
                "Source collection {from} does not exist"
            )));
        };
        if self.colls.read().contains_key(to) {
            if !drop_target {
                return Err(CatalogError::NamespaceExists(to.to_string()));
            }
            self.drop_locked(to)?;
        }
        let _w = c.lock_writes();
        let meta = c.meta_doc_for(to);
        let bytes = bson::to_vec(&meta).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
        let mut b = self.engine.batch();
        b.delete(&self.meta, &meta_key(from));
        b.put(&self.meta, &meta_key(to), &bytes);
        self.engine.commit(b)?;
        c.set_namespace(to.clone());
        drop(_w);
        let mut colls = self.colls.write();
        colls.remove(from);
        colls.insert(to.clone(), c);
        Ok(())
    }

    /// Names of databases that hold at least one collection, with their bytes on disk.
    pub fn databases(&self) -> Vec<(String, u64)> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (ns, c) in self.colls.read().iter() {
            *out.entry(ns.db.clone()).or_default() += c.tree().disk_space();
        }
        out.into_iter().collect()
    }

    /// Every collection of every database.
    pub fn all_collections(&self) -> Vec<Arc<Collection>> {
        self.colls.read().values().cloned().collect()
    }

    /// Collections of `db`, in name order.
    pub fn collections(&self, db: &str) -> Vec<Arc<Collection>> {
        self.colls
            .read()
            .iter()
            .filter(|(ns, _)| ns.db == db)
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// Makes everything durable and moves it out of the journal into the tables.
    pub fn flush(&self) -> Result<()> {
        self.engine.flush()?;
        Ok(())
    }

    /// Clean shutdown, the last write of the process: [`Engine::shutdown`].
    pub fn shutdown(&self) -> Result<()> {
        self.engine.shutdown()?;
        Ok(())
    }
}

/// The indexes recorded in a collection's catalog entry, with their trees.
fn parse_indexes(engine: &Engine, coll_id: u64, d: &Document) -> Result<Vec<Arc<Index>>> {
    let mut out = Vec::new();
    let Ok(entries) = d.get_array("indexes") else {
        return Ok(out);
    };
    for e in entries {
        let bad = || CatalogError::Corrupt(format!("bad index entry {e} in {d}"));
        let bson::Bson::Document(e) = e else {
            return Err(bad());
        };
        let spec = e
            .get_document("spec")
            .map_err(|_| bad())
            .and_then(IndexSpec::parse)?;
        let ident = e.get_i64("ident").map_err(|_| bad())? as u64;
        let multikey = e.get_bool("multikey").unwrap_or(false);
        let tree = engine.tree(&index::tree_name(coll_id, ident))?;
        out.push(Arc::new(Index::new(spec, ident, tree, multikey)));
    }
    Ok(out)
}

fn parse_meta(d: &Document) -> Result<(Namespace, u64, bson::Uuid, Document)> {
    let bad = || CatalogError::Corrupt(format!("bad catalog entry {d}"));
    let db = d.get_str("db").map_err(|_| bad())?;
    let name = d.get_str("name").map_err(|_| bad())?;
    let id = d.get_i64("id").map_err(|_| bad())?;
    let uuid = match d.get("uuid") {
        Some(bson::Bson::Binary(b)) => {
            bson::Uuid::from_bytes(b.bytes.clone().try_into().map_err(|_| bad())?)
        }
        _ => return Err(bad()),
    };
    let options = d.get_document("options").cloned().unwrap_or_default();
    Ok((Namespace::new(db, name), id as u64, uuid, options))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn catalog_persists_create_rename_and_drop() {
        let dir = tempfile::tempdir().unwrap();
        {
            let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
            cat.create("db", "a", doc! {}).unwrap();
            cat.create("db", "b", doc! {}).unwrap();
            let a = cat.get("db", "a").unwrap();
            a.insert(vec![doc! {"_id": 1}], true);
            cat.rename(
                &Namespace::new("db", "a"),
                &Namespace::new("db2", "z"),
                false,
            )
            .unwrap();
            cat.drop_collection("db", "b").unwrap();
        }
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        assert!(cat.get("db", "a").is_none());
        assert!(cat.get("db", "b").is_none());
        let z = cat.get("db2", "z").unwrap();
        assert_eq!(z.count().unwrap(), 1);
        assert_eq!(cat.databases().len(), 1);
    }

    #[test]
    fn create_twice_with_other_options_is_namespace_exists() {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        assert!(cat.create("db", "a", doc! {}).unwrap().1);
        assert!(!cat.create("db", "a", doc! {}).unwrap().1);
        let err = cat
            .create("db", "a", doc! {"validator": {"a": 1}})
            .err()
            .unwrap();
        assert_eq!(err.code(), 48);
    }
}
