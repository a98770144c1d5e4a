//! Index DDL on regular collections: create (with a build over existing documents), drop,
//! and modify (`collMod` of `expireAfterSeconds`, `hidden` and the unique conversions of
//! `index_unique.rs`). Each runs under the DDL lock
//! and the collection's write lock, and persists the new index list in the catalog entry.

use crate::catalog::Catalog;
use crate::collection::Collection;
use crate::error::{CatalogError, Result};
use crate::index::{self, build, Index, IndexSpec, ID_INDEX_NAME};
use crate::Namespace;
use bson::Document;
use hourglass_storage::{Snapshot, Transaction};
use std::sync::Arc;

/// Most indexes per collection, `_id` included (as MongoDB).
pub const MAX_INDEXES: usize = 64;

/// What `createIndexes` did.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateIndexesOutcome {
    /// Index counts, `_id` included.
    pub before: usize,
    pub after: usize,
    pub created_collection: bool,
}

/// Which indexes `dropIndexes` drops.
#[derive(Debug, Clone, PartialEq)]
pub enum DropIndexes {
    /// `"*"`: every index but `_id`.
    All,
    Names(Vec<String>),
    KeyPattern(Document),
}

/// The index `collMod` changes, by name or key pattern.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexSelector {
    Name(String),
    KeyPattern(Document),
}

/// What `collMod` changes in one index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexChanges {
    pub expire: Option<i64>,
    pub hidden: Option<bool>,
    pub prepare_unique: Option<bool>,
    /// `unique: true`: convert to unique (after `prepareUnique`).
    pub unique: bool,
    /// `forceNonUnique: true`: convert a unique index to non-unique.
    pub force_non_unique: bool,
    /// Only check that `unique` could be done.
    pub dry_run: bool,
}

/// Old and new values `collMod` reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexModification {
    pub expire_old: Option<i64>,
    pub expire_new: Option<i64>,
    pub hidden_old: Option<bool>,
    pub hidden_new: Option<bool>,
    pub prepare_unique_old: Option<bool>,
    pub prepare_unique_new: Option<bool>,
    pub unique_new: bool,
    pub force_non_unique_new: bool,
}

impl Catalog {
    fn existing(&self, db: &str, coll: &str) -> Result<Arc<Collection>> {
        self.get(db, coll).ok_or_else(|| {
            CatalogError::NamespaceNotFound(format!("ns does not exist: {db}.{coll}"))
        })
    }

    /// Creates the indexes in `specs` on `db.coll` (creating the collection when missing),
    /// all or none. Indexes that already exist with the same spec are skipped.
    pub fn create_indexes(
        &self,
        db: &str,
        coll: &str,
        specs: Vec<IndexSpec>,
    ) -> Result<CreateIndexesOutcome> {
        if let Some(txn) = Transaction::active() {
            return self.create_indexes_in_transaction(&txn, Namespace::new(db, coll), specs);
        }
        let created_collection = match self.get(db, coll) {
            Some(_) => false,
            None => self.create(db, coll, Document::new())?.1,
        };
        let _ddl = self.ddl_lock();
        // Looked up again under the DDL lock: a concurrent drop may have removed it.
        let c = self.existing(db, coll)?;
        let _w = c.lock_writes();
        let current = c.indexes();
        let (before, wanted) = new_specs(&c, specs)?;
        if wanted.is_empty() {
            return Ok(CreateIndexesOutcome {
                before,
                after: before,
                created_collection,
            });
        }
        let snap = c.engine().snapshot();
        let mut built: Vec<Arc<Index>> = Vec::new();
        for spec in wanted {
            match self.build_new(&c, spec, &snap) {
                Ok(idx) => built.push(idx),
                Err(e) => {
                    self.drop_trees(&built);
                    return Err(e);
                }
            }
        }
        let mut all: Vec<Arc<Index>> = current.iter().cloned().collect();
        all.extend(built.iter().cloned());
        let after = all.len() + 1;
        self.install(&c, &current, all, &built)?;
        Ok(CreateIndexesOutcome {
            before,
            after,
            created_collection,
        })
    }

    /// Builds `spec` into a new tree of `c` from the documents of `snap`; a build that
    /// fails drops its tree.
    pub(crate) fn build_new(
        &self,
        c: &Collection,
        spec: IndexSpec,
        snap: &Snapshot,
    ) -> Result<Arc<Index>> {
        let ident = c.take_ident();
        let tree = c.engine().tree(&index::tree_name(c.id, ident))?;
        let idx = Arc::new(Index::new(spec, ident, tree, false));
        match build::build(c, &idx, snap) {
            Ok(multikey) => {
                if multikey {
                    idx.set_multikey();
                }
                Ok(idx)
            }
            Err(e) => {
                self.drop_trees(&[idx]);
                Err(e)
            }
        }
    }

    /// Makes `all` the indexes of `c` and persists them (the commit point of a build);
    /// when that fails, `current` is back and the trees of `built` are dropped.
    pub(crate) fn install(
        &self,
        c: &Collection,
        current: &[Arc<Index>],
        all: Vec<Arc<Index>>,
        built: &[Arc<Index>],
    ) -> Result<()> {
        c.set_indexes(all);
        if let Err(e) = self.write_meta(c) {
            c.set_indexes(current.to_vec());
            self.drop_trees(built);
            return Err(e);
        }
        Ok(())
    }

    pub(crate) fn drop_trees(&self, indexes: &[Arc<Index>]) {
        for i in indexes {
            if let Err(e) = self.engine().drop_tree(i.tree().clone()) {
                tracing::warn!(index = %i.spec.name, error = %e, "dropping an index tree failed");
            }
        }
    }

    /// Drops indexes of `db.coll`; returns the number of indexes before (`_id` included).
    pub fn drop_indexes(&self, db: &str, coll: &str, which: &DropIndexes) -> Result<usize> {
        let _ddl = self.ddl_lock();
        let c = self.existing(db, coll)?;
        let _w = c.lock_writes();
        let current = c.indexes();
        let was = current.len() + 1;
        let ns = format!("{db}.{coll}");
        let doomed: Vec<Arc<Index>> = match which {
            DropIndexes::All => current.iter().cloned().collect(),
            DropIndexes::Names(names) => {
                let mut out = Vec::new();
                for n in names {
                    if n == ID_INDEX_NAME {
                        return Err(CatalogError::InvalidOptions("cannot drop _id index".into()));
                    }
                    match current.iter().find(|i| &i.spec.name == n) {
                        Some(i) => out.push(i.clone()),
                        None => {
                            return Err(CatalogError::IndexNotFound(format!(
                                "index not found with name [{n}]"
                            )))
                        }
                    }
                }
                out
            }
            DropIndexes::KeyPattern(k) => {
                let parts = index::spec::parse_key_pattern(k).map_err(|_| {
                    CatalogError::IndexNotFound(format!("can't find index with key: {k}"))
                })?;
                if parts.len() == 1 && parts[0].path == "_id" {
                    return Err(CatalogError::InvalidOptions("cannot drop _id index".into()));
                }
                let found: Vec<Arc<Index>> = current
                    .iter()
                    .filter(|i| i.spec.parts == parts)
                    .cloned()
                    .collect();
                match found.len() {
                    0 => {
                        return Err(CatalogError::IndexNotFound(format!(
                            "can't find index with key: {k}"
                        )))
                    }
                    1 => found,
                    _ => {
                        return Err(CatalogError::AmbiguousIndexKeyPattern(format!(
                            "{} indexes found for key: {k}, identify by name instead. Conflicting indexes: {}",
                            found.len(),
                            found.iter().map(|i| i.spec.name.clone()).collect::<Vec<_>>().join(", ")
                        )))
                    }
                }
            }
        };
        if doomed.is_empty() {
            return Ok(was);
        }
        let keep: Vec<Arc<Index>> = current
            .iter()
            .filter(|i| !doomed.iter().any(|d| d.ident == i.ident))
            .cloned()
            .collect();
        c.set_indexes(keep);
        if let Err(e) = self.write_meta(&c) {
            c.set_indexes(current.iter().cloned().collect());
            return Err(e);
        }
        tracing::debug!(ns = %ns, count = doomed.len(), "dropped indexes");
        self.drop_trees(&doomed);
        Ok(was)
    }

    /// Changes `expireAfterSeconds` and/or `hidden` of one index (`collMod`).
    pub fn modify_index(
        &self,
        db: &str,
        coll: &str,
        selector: &IndexSelector,
        changes: &IndexChanges,
    ) -> Result<IndexModification> {
        let (expire, hidden) = (changes.expire, changes.hidden);
        let _ddl = self.ddl_lock();
        let c = self.existing(db, coll)?;
        let _w = c.lock_writes();
        let current = c.indexes();
        let is_id = match selector {
            IndexSelector::Name(n) => n == ID_INDEX_NAME,
            IndexSelector::KeyPattern(k) => {
                k.len() == 1 && k.keys().next().is_some_and(|f| f == "_id")
            }
        };
        if is_id {
            if hidden.is_some() {
                return Err(CatalogError::BadValue("can't hide _id index".into()));
            }
            return Err(CatalogError::InvalidOptions(
                "no expireAfterSeconds field to update".into(),
            ));
        }
        let pos = match selector {
            IndexSelector::Name(n) => current.iter().position(|i| &i.spec.name == n),
            IndexSelector::KeyPattern(k) => {
                let parts = index::spec::parse_key_pattern(k).ok();
                current
                    .iter()
                    .position(|i| Some(&i.spec.parts) == parts.as_ref())
            }
        };
        let Some(pos) = pos else {
            let what = match selector {
                IndexSelector::Name(n) => n.clone(),
                IndexSelector::KeyPattern(k) => k.to_string(),
            };
            return Err(CatalogError::IndexNotFound(format!(
                "cannot find index {what} for ns {db}.{coll}"
            )));
        };
        let old = &current[pos];
        let mut spec = old.spec.clone();
        let mut out = IndexModification::default();
        if let Some(e) = expire {
            // A single-field index becomes a TTL index (MongoDB 5.1+); compound, hashed and
            // geo ones cannot.
            if spec.expire_after_seconds.is_none() {
                if spec.parts.len() != 1 {
                    return Err(CatalogError::InvalidOptions(format!(
                        "TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: {}",
                        spec.to_document()
                    )));
                }
                if !matches!(
                    spec.parts[0].kind,
                    index::KeyKind::Asc | index::KeyKind::Desc
                ) {
                    return Err(CatalogError::InvalidOptions(
                        "TTL on hashed, 2d and 2dsphere indexes is not supported by this server"
                            .into(),
                    ));
                }
            }
            out.expire_old = spec.expire_after_seconds;
            out.expire_new = Some(e);
            spec.expire_after_seconds = Some(e);
        }
        // An unchanged `hidden` is not reported, as in MongoDB.
        if let Some(h) = hidden.filter(|h| *h != spec.hidden) {
            out.hidden_old = Some(spec.hidden);
            out.hidden_new = Some(h);
            spec.hidden = h;
        }
        // A unique index stays unique (a no-op, as in MongoDB); prepareUnique first.
        let mut relayout = false;
        if changes.unique && !spec.unique {
            if !spec.prepare_unique {
                return Err(CatalogError::InvalidOptions(
                    "Cannot make index unique with 'prepareUnique=false'. Run collMod to set it first."
                        .into(),
                ));
            }
            crate::index_unique::check_no_duplicates(&c, old, &c.engine().snapshot())?;
            (spec.unique, spec.prepare_unique, relayout) = (true, false, true);
            out.unique_new = true;
        }
        if changes.dry_run {
            return Ok(IndexModification::default());
        }
        if let Some(p) = changes.prepare_unique.filter(|p| *p != spec.prepare_unique) {
            if !spec.unique {
                out.prepare_unique_old = Some(spec.prepare_unique);
                out.prepare_unique_new = Some(p);
                spec.prepare_unique = p;
            }
        }
        if changes.force_non_unique && spec.unique {
            (spec.unique, relayout) = (false, true);
            out.force_non_unique_new = true;
        }
        if relayout {
            self.rebuild_index(&c, pos, spec)?;
            return Ok(out);
        }
        let mut all: Vec<Arc<Index>> = current.iter().cloned().collect();
        all[pos] = Arc::new(old.with_spec(spec));
        c.set_indexes(all);
        if let Err(e) = self.write_meta(&c) {
            c.set_indexes(current.iter().cloned().collect());
            return Err(e);
        }
        Ok(out)
    }
}

/// Whether `spec` is new; an index already present with the same spec is not (`false`),
/// one conflicting by name or key pattern is an error.
/// The index count of `c` (`_id` included) and the specs of `specs` it lacks, checked
/// against its indexes and each other (one identical to an existing index is skipped).
pub(crate) fn new_specs(c: &Collection, specs: Vec<IndexSpec>) -> Result<(usize, Vec<IndexSpec>)> {
    let current = c.indexes();
    let before = current.len() + 1;
    let mut wanted: Vec<IndexSpec> = Vec::new();
    for spec in specs {
        if spec.is_id_pattern() && spec.name == ID_INDEX_NAME {
            continue;
        }
        let all = current.iter().map(|i| &i.spec).chain(wanted.iter());
        if !check_new(&spec, all)? {
            continue;
        }
        wanted.push(spec);
    }
    if before + wanted.len() > MAX_INDEXES {
        let ns = c.namespace();
        return Err(CatalogError::CannotCreateIndex(format!(
            "add index fails, too many indexes for {ns}"
        )));
    }
    Ok((before, wanted))
}

fn check_new<'a>(spec: &IndexSpec, existing: impl Iterator<Item = &'a IndexSpec>) -> Result<bool> {
    if spec.is_id_pattern() {
        return Err(CatalogError::IndexOptionsConflict(format!(
            "Index already exists with a different name: {ID_INDEX_NAME}"
        )));
    }
    if spec.name == ID_INDEX_NAME {
        return Err(CatalogError::BadValue(format!(
            "The index name '_id_' is reserved for the _id index, which must have key pattern {{_id: 1}}, found key: {}",
            spec.key
        )));
    }
    for e in existing {
        if e.name == spec.name {
            if e.same_key(spec) && e.same_options(spec) {
                return Ok(false);
            }
            if e.same_key(spec) {
                return Err(CatalogError::IndexOptionsConflict(format!(
                    "An equivalent index already exists with the same name but different options. Requested index: {}, existing index: {}",
                    spec.to_document(),
                    e.to_document()
                )));
            }
            return Err(CatalogError::IndexKeySpecsConflict(format!(
                "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                spec.to_document(),
                e.to_document()
            )));
        }
        // One key pattern may be indexed again with another partial filter or collation.
        if e.same_key(spec) && e.partial == spec.partial && e.collation == spec.collation {
            return Err(CatalogError::IndexOptionsConflict(format!(
                "Index already exists with a different name: {}",
                e.name
            )));
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{plan, Access, Query};
    use crate::scan::ScanStats;
    use bson::{doc, Bson};
    use hourglass_query::filter::Filter;
    use hourglass_query::update::Update;
    use hourglass_storage::Engine;

    fn spec(d: Document) -> IndexSpec {
        IndexSpec::parse(&d).unwrap()
    }

    #[test]
    fn unique_index_is_maintained_by_every_write_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
            let c = cat.get_or_create("db", "c").unwrap();
            c.insert(vec![doc! {"_id": 1, "a": 1}, doc! {"_id": 2, "a": 2}], true);
            let out = cat
                .create_indexes(
                    "db",
                    "c",
                    vec![spec(doc! {"key": {"a": 1}, "unique": true})],
                )
                .unwrap();
            assert_eq!((out.before, out.after), (1, 2));
            let dup = c.insert(vec![doc! {"_id": 3, "a": 1}], true);
            assert_eq!(dup.errors[0].1.code(), 11000);
            assert!(dup.errors[0]
                .1
                .to_string()
                .contains("index: a_1 dup key: { a: 1 }"));
            let f = Filter::parse(&doc! {"_id": 2}).unwrap();
            let u = Update::parse(&doc! {"$set": {"a": 1}}).unwrap();
            assert_eq!(c.update(&f, &u, false, false).unwrap_err().code(), 11000);
            let u = Update::parse(&doc! {"$set": {"a": 5}}).unwrap();
            c.update(&f, &u, false, false).unwrap();
            c.insert(vec![doc! {"_id": 3, "a": 2}], true);
            c.delete(&Filter::parse(&doc! {"a": 1}).unwrap(), false)
                .unwrap();
            let report = index::build::validate(&c).unwrap();
            assert!(report.errors.is_empty(), "{:?}", report.errors);
            assert_eq!(report.keys_per_index[1], ("a_1".to_string(), 2));
        }
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        let c = cat.get("db", "c").unwrap();
        assert_eq!(c.indexes().len(), 1);
        let f = Filter::parse(&doc! {"a": {"$gte": 3}}).unwrap();
        let p = plan(
            &c,
            &Query {
                filter: Some(&f),
                ..Query::default()
            },
        )
        .unwrap();
        assert!(matches!(p.access, Access::IndexScan { .. }));
        let stats = std::sync::Arc::new(ScanStats::default());
        let docs: Vec<Document> = c.execute(&p, stats.clone()).map(|d| d.unwrap()).collect();
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].get("_id"), Some(&Bson::Int32(2)));
        assert_eq!(stats.keys(), 1);
    }

    #[test]
    fn build_over_duplicates_fails_and_leaves_no_index() {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        let c = cat.get_or_create("db", "c").unwrap();
        c.insert(vec![doc! {"a": 1}, doc! {"a": 1}], true);
        let err = cat
            .create_indexes(
                "db",
                "c",
                vec![spec(doc! {"key": {"a": 1}, "unique": true})],
            )
            .unwrap_err();
        assert_eq!(err.code(), 11000);
        assert!(c.indexes().is_empty());
        let conflict = cat
            .create_indexes(
                "db",
                "c",
                vec![
                    spec(doc! {"key": {"a": 1}, "name": "x"}),
                    spec(doc! {"key": {"b": 1}, "name": "x"}),
                ],
            )
            .unwrap_err();
        assert_eq!(conflict.code(), 86);
        cat.create_indexes("db", "c", vec![spec(doc! {"key": {"a": 1}})])
            .unwrap();
        let again = cat
            .create_indexes("db", "c", vec![spec(doc! {"key": {"a": 1}})])
            .unwrap();
        assert_eq!(again.before, again.after);
        let other_name = cat
            .create_indexes("db", "c", vec![spec(doc! {"key": {"a": 1}, "name": "y"})])
            .unwrap_err();
        assert_eq!(other_name.code(), 85);
        assert_eq!(cat.drop_indexes("db", "c", &DropIndexes::All).unwrap(), 2);
        assert!(c.indexes().is_empty());
    }

    #[test]
    fn validate_reports_missing_and_extra_entries() {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        let c = cat.get_or_create("db", "c").unwrap();
        c.insert(vec![doc! {"_id": 1, "a": 1}, doc! {"_id": 2, "a": 2}], true);
        cat.create_indexes("db", "c", vec![spec(doc! {"key": {"a": 1}})])
            .unwrap();
        let idx = c.indexes()[0].clone();
        // Remove a document behind the index's back: its entry becomes extra.
        let mut b = c.engine().batch();
        b.delete(c.tree(), &crate::keystring::encode(&Bson::Int32(1)));
        c.engine().commit(b).unwrap();
        let report = index::build::validate(&c).unwrap();
        assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
        // Add a document behind its back: its entry is missing.
        let mut b = c.engine().batch();
        let d = doc! {"_id": 3, "a": 3};
        b.put(
            c.tree(),
            &crate::keystring::encode(&Bson::Int32(3)),
            &bson::to_vec(&d).unwrap(),
        );
        c.engine().commit(b).unwrap();
        let report = index::build::validate(&c).unwrap();
        assert_eq!(report.errors.len(), 2, "{:?}", report.errors);
        assert_eq!(report.nrecords, 2);
        assert_eq!(report.keys_per_index[1], (idx.spec.name.clone(), 2));
    }

    #[test]
    fn orphan_index_trees_are_dropped_at_open_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        {
            let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
            let c = cat.get_or_create("db", "c").unwrap();
            c.insert(vec![doc! {"a": 1}], true);
            cat.create_indexes("db", "c", vec![spec(doc! {"key": {"a": 1}})])
                .unwrap();
            // As if a crash interrupted a build before its catalog entry was written.
            cat.engine().tree(&index::tree_name(c.id, 99)).unwrap();
        }
        let engine = Engine::open(dir.path()).unwrap();
        let cat = Catalog::open(engine.clone()).unwrap();
        let c = cat.get("db", "c").unwrap();
        let names = engine.tree_names();
        assert!(!names.contains(&index::tree_name(c.id, 99)));
        assert!(names.contains(&index::tree_name(c.id, c.indexes()[0].ident)));
        assert!(index::build::validate(&c).unwrap().errors.is_empty());
    }
}
