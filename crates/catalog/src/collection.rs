//! One collection: its metadata and its documents, stored as BSON under the key-string of
//! their `_id`. Reads go through MVCC snapshots (never blocking writers); writes to one
//! collection are serialized by a per-collection lock held only while the batch is built
//! and applied, not while it is synced.

use crate::error::{CatalogError, Result};
use crate::index::Index;
use crate::keystring;
use crate::namespace::Namespace;
use crate::validation::Validator;
use bson::{doc, oid::ObjectId, Bson, Document};
use hourglass_storage::{Batch, Engine, Snapshot, Tree};
use parking_lot::{Mutex, MutexGuard, RwLock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use hourglass_query::limits::MAX_BSON_OBJECT_SIZE;

pub struct Collection {
    pub id: u64,
    pub uuid: bson::Uuid,
    ns: RwLock<Namespace>,
    options: RwLock<Document>,
    /// The validator compiled from `options`.
    validator: RwLock<Option<Arc<Validator>>>,
    tree: Tree,
    engine: Engine,
    write_lock: Mutex<()>,
    /// The catalog tree, where this collection's entry lives.
    meta: Tree,
    /// Secondary indexes (the `_id` index is the collection tree itself).
    indexes: RwLock<Arc<Vec<Arc<Index>>>>,
    /// Next index number.
    next_ident: AtomicU64,
}

/// Where a collection lives: its tree, the engine, the catalog tree holding its entry, and
/// its secondary indexes.
pub(crate) struct CollectionStorage {
    pub tree: Tree,
    pub engine: Engine,
    pub meta: Tree,
    pub indexes: Vec<Arc<Index>>,
}

/// The validator of `options` (checked by `create`/`collMod` before they are stored; one
/// that no longer parses is logged and not enforced).
fn compile_validator(ns: &Namespace, options: &Document) -> Option<Arc<Validator>> {
    match Validator::from_options(options) {
        Ok(v) => v.map(Arc::new),
        Err(e) => {
            tracing::error!(ns = %ns, error = %e, "stored collection validator does not parse; not enforced");
            None
        }
    }
}

/// A stream of documents read from one snapshot.
pub type DocStream = Box<dyn Iterator<Item = Result<Document>> + Send>;

impl Collection {
    pub(crate) fn new(
        id: u64,
        ns: Namespace,
        uuid: bson::Uuid,
        options: Document,
        storage: CollectionStorage,
    ) -> Collection {
        let CollectionStorage {
            tree,
            engine,
            meta,
            indexes,
        } = storage;
        let next = indexes.iter().map(|i| i.ident + 1).max().unwrap_or(1);
        let validator = compile_validator(&ns, &options);
        Collection {
            id,
            uuid,
            ns: RwLock::new(ns),
            options: RwLock::new(options),
            validator: RwLock::new(validator),
            tree,
            engine,
            write_lock: Mutex::new(()),
            meta,
            indexes: RwLock::new(Arc::new(indexes)),
            next_ident: AtomicU64::new(next),
        }
    }

    /// The secondary indexes, in creation order.
    pub fn indexes(&self) -> Arc<Vec<Arc<Index>>> {
        self.indexes.read().clone()
    }

    /// Replaces the index set (under the write lock); open transactions that wrote to this
    /// collection staged entries for the old set, and now fail with a write conflict.
    pub(crate) fn set_indexes(&self, indexes: Vec<Arc<Index>>) {
        *self.indexes.write() = Arc::new(indexes);
        self.engine
            .invalidate_transactions_writing(self.tree.name());
    }

    /// Replaces the index set of a collection only the transaction creating it sees: no
    /// other transaction can have written to it.
    pub(crate) fn set_indexes_unseen(&self, indexes: Vec<Arc<Index>>) {
        *self.indexes.write() = Arc::new(indexes);
    }

    pub(crate) fn take_ident(&self) -> u64 {
        self.next_ident.fetch_add(1, Ordering::SeqCst)
    }

    /// This collection's catalog entry under namespace `ns`.
    pub(crate) fn meta_doc_for(&self, ns: &Namespace) -> Document {
        let indexes: Vec<Document> = self.indexes().iter().map(|i| i.catalog_entry()).collect();
        doc! {
            "db": &ns.db, "name": &ns.coll, "id": self.id as i64, "uuid": self.uuid,
            "options": self.options(), "indexes": indexes,
        }
    }

    /// Stages this collection's catalog entry (current name, options and indexes).
    pub(crate) fn stage_meta(&self, batch: &mut Batch) -> Result<()> {
        let ns = self.namespace();
        let bytes = bson::to_vec(&self.meta_doc_for(&ns))
            .map_err(|e| CatalogError::Corrupt(e.to_string()))?;
        batch.put(&self.meta, ns.to_string().as_bytes(), &bytes);
        Ok(())
    }

    pub fn namespace(&self) -> Namespace {
        self.ns.read().clone()
    }

    pub(crate) fn set_namespace(&self, ns: Namespace) {
        *self.ns.write() = ns;
    }

    /// The collection's options (a copy: `collMod` may change them).
    pub fn options(&self) -> Document {
        self.options.read().clone()
    }

    /// Replaces the options (under the write lock); open transactions that wrote to this
    /// collection were validated against the old ones, and now fail with a write conflict.
    pub(crate) fn set_options(&self, options: Document) {
        *self.validator.write() = compile_validator(&self.namespace(), &options);
        *self.options.write() = options;
        self.engine
            .invalidate_transactions_writing(self.tree.name());
    }

    /// The collection's validator, if it has one.
    pub fn validator(&self) -> Option<Arc<Validator>> {
        self.validator.read().clone()
    }

    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Serializes writers of this collection.
    pub(crate) fn lock_writes(&self) -> MutexGuard<'_, ()> {
        self.write_lock.lock()
    }

    /// Bytes this collection uses on disk.
    /// Compacts the collection's tree and its indexes' (MongoDB's `compact`); returns
    /// the bytes freed. Refused on a full disk, since compaction writes new tables first.
    pub fn compact(&self) -> Result<u64> {
        self.engine().check_space(0)?;
        let mut freed = self.tree().compact()?;
        for i in self.indexes().iter() {
            freed += i.compact()?;
        }
        Ok(freed)
    }

    pub fn storage_size(&self) -> u64 {
        self.tree.disk_space()
    }

    /// Streams all documents in `_id` order from a fresh snapshot.
    pub fn scan(&self) -> DocStream {
        self.scan_in(&self.engine.snapshot())
    }

    /// Streams all documents in `_id` order as of `snap`.
    pub(crate) fn scan_in(&self, snap: &Snapshot) -> DocStream {
        Box::new(snap.scan_prefix(&self.tree, b"").map(|r| {
            let (_, v) = r?;
            decode(&v)
        }))
    }

    /// Number of documents (exact; walks the collection's keys, sharing the values with
    /// the block cache rather than copying them). Stops at the operation's deadline.
    pub fn count(&self) -> Result<u64> {
        let snap = self.engine.snapshot();
        let mut n = 0u64;
        for r in snap.range_shared(&self.tree, b"", None, false) {
            r?;
            n += 1;
            if n.is_multiple_of(4096) {
                hourglass_query::interrupt::check()?;
            }
        }
        Ok(n)
    }

    /// The document whose `_id` equals `id`.
    pub fn get(&self, id: &Bson) -> Result<Option<Document>> {
        self.get_in(&self.engine.snapshot(), id)
    }

    pub(crate) fn get_in(&self, snap: &Snapshot, id: &Bson) -> Result<Option<Document>> {
        match snap.get(&self.tree, &keystring::id_key(id))? {
            Some(v) => decode(&v).map(Some),
            None => Ok(None),
        }
    }

    /// The `_id` index's duplicate-key error (11000) for `id`.
    pub fn duplicate(&self, id: &Bson) -> CatalogError {
        CatalogError::DuplicateKey {
            ns: self.namespace().to_string(),
            index: crate::index::ID_INDEX_NAME.to_string(),
            key_pattern: Box::new(doc! {"_id": 1}),
            key_value: Box::new(doc! {"_id": id.clone()}),
        }
    }
}

/// Gives `doc` its `_id` first (an ObjectId when it has none) and fills its empty
/// timestamps, as [`add_id`]; checks the `_id` type.
pub fn with_id(doc: Document) -> Result<Document> {
    check_id(&doc)?;
    Ok(add_id(doc))
}

/// `doc` as MongoDB stores an inserted document: `_id` first (an ObjectId when it has
/// none), and each top-level empty timestamp (`Timestamp(0, 0)`) replaced by the current
/// time.
pub(crate) fn add_id(mut doc: Document) -> Document {
    for (_, v) in doc.iter_mut() {
        if matches!(v, Bson::Timestamp(t) if t.time == 0 && t.increment == 0) {
            *v = Bson::Timestamp(now_timestamp());
        }
    }
    if doc.keys().next().is_some_and(|k| k == "_id") {
        return doc;
    }
    let id = doc
        .remove("_id")
        .unwrap_or_else(|| Bson::ObjectId(ObjectId::new()));
    let mut d = Document::new();
    d.insert("_id", id);
    d.extend(doc);
    d
}

/// The current time as a timestamp: seconds, and an increment that grows across calls.
fn now_timestamp() -> bson::Timestamp {
    static INCREMENT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let secs = bson::DateTime::now().timestamp_millis() / 1000;
    bson::Timestamp {
        time: u32::try_from(secs).unwrap_or(u32::MAX),
        increment: INCREMENT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
    }
}

/// Refuses an `_id` MongoDB cannot store: an array, a regex, undefined, or a document with
/// a `$`-prefixed field.
pub(crate) fn check_id(doc: &Document) -> Result<()> {
    match doc.get("_id") {
        Some(Bson::Array(_)) => Err(CatalogError::InvalidIdField(
            "The '_id' value cannot be of type array".into(),
        )),
        Some(Bson::RegularExpression(_)) => Err(CatalogError::InvalidIdField(
            "The '_id' value cannot be of type regex".into(),
        )),
        Some(Bson::Undefined) => Err(CatalogError::InvalidIdField(
            "can't use a undefined for _id".into(),
        )),
        Some(Bson::Document(id)) => match dollar_key(id) {
            Some(k) => Err(CatalogError::Query(hourglass_query::QueryError::Coded(
                52,
                format!(
                    "_id fields may not contain '$'-prefixed fields: {k} is not valid for storage."
                ),
            ))),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The first `$`-prefixed key anywhere in `d` (an `_id` may hold none).
fn dollar_key(d: &Document) -> Option<&str> {
    fn in_value(v: &Bson) -> Option<&str> {
        match v {
            Bson::Document(d) => dollar_key(d),
            Bson::Array(a) => a.iter().find_map(in_value),
            _ => None,
        }
    }
    d.iter().find_map(|(k, v)| {
        if k.starts_with('$') {
            Some(k.as_str())
        } else {
            in_value(v)
        }
    })
}

/// What a document is being stored for: the limits are MongoDB's, but the errors differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFor {
    Insert,
    Update,
}

/// Serializes a document to store, enforcing MongoDB's nesting depth (180 levels for user
/// documents) and size (16 MiB) limits with the errors MongoDB gives for each write kind.
pub fn encode(doc: &Document, why: StoreFor) -> Result<Vec<u8>> {
    use hourglass_query::limits::{depth_of, MAX_USER_STORAGE_DEPTH};
    if depth_of(doc) > MAX_USER_STORAGE_DEPTH {
        let msg = match why {
            StoreFor::Insert => format!(
                "cannot insert document because it exceeds {MAX_USER_STORAGE_DEPTH} levels of nesting"
            ),
            StoreFor::Update => {
                format!("Document exceeds maximum nesting depth of {MAX_USER_STORAGE_DEPTH}")
            }
        };
        return Err(CatalogError::Query(hourglass_query::QueryError::Overflow(
            msg,
        )));
    }
    let bytes = bson::to_vec(doc).map_err(|e| CatalogError::BadValue(e.to_string()))?;
    if bytes.len() > MAX_BSON_OBJECT_SIZE {
        return Err(match why {
            StoreFor::Insert => CatalogError::BadValue(format!(
                "object to insert too large. size in bytes: {}, max size: {MAX_BSON_OBJECT_SIZE}",
                bytes.len()
            )),
            StoreFor::Update => CatalogError::Query(hourglass_query::QueryError::Coded(
                17419,
                format!("Resulting document after update is larger than {MAX_BSON_OBJECT_SIZE}"),
            )),
        });
    }
    Ok(bytes)
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Document> {
    bson::from_slice(bytes).map_err(|e| CatalogError::Corrupt(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use bson::doc;

    fn collection() -> (tempfile::TempDir, std::sync::Arc<Collection>) {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        let c = cat.get_or_create("db", "c").unwrap();
        (dir, c)
    }

    #[test]
    fn insert_assigns_object_id_first_and_detects_duplicates() {
        let (_d, c) = collection();
        let out = c.insert(
            vec![doc! {"a": 1}, doc! {"_id": 1}, doc! {"_id": 1.0}],
            false,
        );
        assert_eq!(out.inserted, 2);
        assert_eq!(out.errors.len(), 1);
        assert_eq!(out.errors[0].0, 2);
        assert_eq!(out.errors[0].1.code(), 11000);
        let docs: Vec<Document> = c.scan().collect::<Result<_>>().unwrap();
        assert_eq!(docs.len(), 2);
        let generated = docs.iter().find(|d| d.contains_key("a")).unwrap();
        assert_eq!(generated.keys().next().unwrap(), "_id");
    }

    #[test]
    fn ordered_insert_stops_at_first_error() {
        let (_d, c) = collection();
        let out = c.insert(
            vec![doc! {"_id": 1}, doc! {"_id": 1}, doc! {"_id": 2}],
            true,
        );
        assert_eq!(out.inserted, 1);
        assert_eq!(c.count().unwrap(), 1);
        assert!(c.get(&Bson::Int32(2)).unwrap().is_none());
    }

    #[test]
    fn array_id_is_rejected() {
        let (_d, c) = collection();
        let out = c.insert(vec![doc! {"_id": [1, 2]}], true);
        assert_eq!(out.errors[0].1.code(), 53);
    }
}
