//! Document-level writes: insert, and those that read before they write: update (with
//! upsert), delete and findAndModify. Each runs under the collection's write lock against
//! one snapshot and commits all its changes as one atomic, durable batch. A write that
//! changes a document an open transaction holds waits, without the lock, for that
//! transaction to end and runs again (as mongod makes it wait): see [`Collection::retrying`].

use crate::collection::{add_id, check_id, with_id, Collection};
use crate::error::{CatalogError, Result};
use crate::index::staging::Staging;
use crate::plan::{Hint, Query};
use bson::{Bson, Document};
use hourglass_query::filter::Filter;
use hourglass_query::sort::SortSpec;
use hourglass_query::update::Update;
use hourglass_storage::{Snapshot, StorageError};
use std::time::Duration;

/// Outcome of an insert: how many were written and the per-document errors by index.
#[derive(Debug, Default)]
pub struct InsertOutcome {
    pub inserted: usize,
    pub errors: Vec<(usize, CatalogError)>,
}

/// What an update did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct UpdateOutcome {
    pub matched: u64,
    pub modified: u64,
    pub upserted: Option<Bson>,
}

/// A findAndModify request, already parsed.
pub struct FindAndModify<'a> {
    pub filter: &'a Filter,
    pub sort: Option<&'a SortSpec>,
    /// `None` means remove.
    pub update: Option<&'a Update>,
    pub return_new: bool,
    pub upsert: bool,
    pub hint: Option<&'a Hint>,
    /// The query as given, from which an upsert takes its fields (MongoDB's rules,
    /// conflicts refused); without it, the filter's equalities.
    pub query: Option<&'a Document>,
}

/// What findAndModify did: the document to return and the lastErrorObject fields.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FindAndModifyOutcome {
    pub value: Option<Document>,
    pub n: u64,
    pub updated_existing: bool,
    pub upserted: Option<Bson>,
}

impl Collection {
    /// Runs `attempt` (which builds a write under the write lock, applies it, lets go of
    /// the lock and returns its outcome and durability ticket) until no open transaction
    /// holds a key it writes, waiting for each such transaction to end (interruptible, e.g.
    /// by `maxTimeMS`); then waits for durability.
    fn retrying<T>(&self, mut attempt: impl FnMut() -> Result<(T, u64)>) -> Result<T> {
        loop {
            match attempt() {
                Ok((out, ticket)) => {
                    self.engine().wait_durable(ticket)?;
                    return Ok(out);
                }
                Err(CatalogError::Storage(StorageError::HeldByTransaction(id))) => {
                    while !self
                        .engine()
                        .wait_for_transaction(id, Duration::from_millis(100))
                    {
                        hourglass_query::interrupt::check()?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Inserts `docs`, giving each without `_id` a new ObjectId (as the first field). With
    /// `ordered`, stops at the first failing document; otherwise keeps going. Documents
    /// before (or besides) the failures are committed in one durable batch.
    pub fn insert(&self, docs: Vec<Document>, ordered: bool) -> InsertOutcome {
        // With their `_id`; one whose `_id` is refused is kept as given, to fail again in
        // each attempt.
        let docs: Vec<std::result::Result<Document, Document>> = docs
            .into_iter()
            .map(|d| match check_id(&d) {
                Ok(()) => Ok(add_id(d)),
                Err(_) => Err(d),
            })
            .collect();
        let validator = self.validator();
        let ns = self.namespace().to_string();
        let mut out = InsertOutcome::default();
        let committed = self.retrying(|| {
            out = InsertOutcome::default();
            let guard = self.lock_writes();
            let mut staging = Staging::new(self);
            for (i, doc) in docs.iter().enumerate() {
                let checked = match doc {
                    Ok(d) => match &validator {
                        Some(v) => v.check_insert(&ns, d),
                        None => Ok(()),
                    }
                    .and_then(|()| staging.insert(d)),
                    Err(refused) => check_id(refused),
                };
                match checked {
                    Ok(()) => out.inserted += 1,
                    Err(e) => {
                        out.errors.push((i, e));
                        if ordered {
                            break;
                        }
                    }
                }
            }
            let ticket = self.engine().apply(staging.finish()?)?;
            drop(guard);
            Ok(((), ticket))
        });
        if let Err(e) = committed {
            let failed = out.inserted;
            out.inserted = 0;
            out.errors.insert(0, (0, e));
            tracing::error!(inserted = failed, "insert batch failed to commit");
        }
        out
    }

    /// Documents matching `filter` in the snapshot (read through the planner), stopping
    /// after `limit` when given; with `sort`, in that order.
    fn matching(
        &self,
        snap: &Snapshot,
        filter: &Filter,
        sort: Option<&SortSpec>,
        hint: Option<&Hint>,
        limit: Option<usize>,
    ) -> Result<Vec<Document>> {
        let sort = sort.filter(|s| !s.is_empty());
        let plan = crate::plan::plan(
            self,
            &Query {
                filter: Some(filter),
                sort,
                hint,
                spec: None,
            },
        )?;
        match sort {
            Some(s) if !plan.provides_sort => {
                let docs = self.matching_docs(snap, &plan, filter, None)?;
                Ok(s.top_k(docs, limit.unwrap_or(usize::MAX)))
            }
            _ => self.matching_docs(snap, &plan, filter, limit),
        }
    }

    /// Checks a new document against the collection's validator.
    fn validate_insert(&self, doc: &Document) -> Result<()> {
        match self.validator() {
            Some(v) => v.check_insert(&self.namespace().to_string(), doc),
            None => Ok(()),
        }
    }

    /// Checks an updated document against the collection's validator.
    fn validate_update(&self, old: &Document, new: &Document) -> Result<()> {
        match self.validator() {
            Some(v) => v.check_update(&self.namespace().to_string(), old, new),
            None => Ok(()),
        }
    }

    /// Builds the document an upsert inserts: the query's equality fields (only `_id` for a
    /// replacement), then the update.
    fn upsert_document(
        filter: &Filter,
        query: Option<&Document>,
        update: &Update,
    ) -> Result<Document> {
        let replacement = matches!(update, Update::Replacement(_));
        let seed = match query {
            Some(q) => hourglass_query::update::upsert::seed(q, replacement)?,
            None => filter.equality_seed(),
        };
        let doc = match update {
            Update::Replacement(repl) => {
                let mut d = Document::new();
                if let Some(id) = seed.get("_id").filter(|_| !repl.contains_key("_id")) {
                    d.insert("_id", id.clone());
                }
                d.extend(repl.clone());
                d
            }
            _ => {
                let mut d = seed;
                update.apply(&mut d, true)?;
                d
            }
        };
        with_id(doc)
    }

    /// Applies `update` to the first (or, with `multi`, every) document matching `filter`;
    /// with `upsert` and no match, inserts one.
    pub fn update(
        &self,
        filter: &Filter,
        update: &Update,
        multi: bool,
        upsert: bool,
    ) -> Result<UpdateOutcome> {
        self.update_hinted(filter, update, multi, upsert, None, None)
    }

    /// [`Collection::update`] reading the matches through the index `hint` names; an
    /// upsert takes its fields from `query` (the filter as given) when there is one.
    pub fn update_hinted(
        &self,
        filter: &Filter,
        update: &Update,
        multi: bool,
        upsert: bool,
        hint: Option<&Hint>,
        query: Option<&Document>,
    ) -> Result<UpdateOutcome> {
        self.retrying(|| {
            let guard = self.lock_writes();
            let mut st = Staging::new(self);
            let docs = self.matching(
                &st.snap,
                filter,
                None,
                hint,
                if multi { None } else { Some(1) },
            )?;
            let mut out = UpdateOutcome::default();
            for old in docs {
                hourglass_query::interrupt::check()?;
                out.matched += 1;
                let mut new = old.clone();
                if update.apply_matched(&mut new, false, Some(filter))? && new != old {
                    self.validate_update(&old, &new)?;
                    st.replace(&old, &new)?;
                    out.modified += 1;
                }
            }
            if out.matched == 0 && upsert {
                let doc = Self::upsert_document(filter, query, update)?;
                let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
                self.validate_insert(&doc)?;
                st.insert(&doc)?;
                out.upserted = Some(id);
            }
            let ticket = self.engine().apply(st.finish()?)?;
            drop(guard);
            Ok((out, ticket))
        })
    }

    /// Deletes the first (`limit_one`) or every document matching `filter`.
    pub fn delete(&self, filter: &Filter, limit_one: bool) -> Result<u64> {
        self.delete_hinted(filter, limit_one, None)
    }

    /// [`Collection::delete`] reading the matches through the index `hint` names.
    pub fn delete_hinted(
        &self,
        filter: &Filter,
        limit_one: bool,
        hint: Option<&Hint>,
    ) -> Result<u64> {
        self.retrying(|| {
            let guard = self.lock_writes();
            let mut st = Staging::new(self);
            let docs = self.matching(&st.snap, filter, None, hint, limit_one.then_some(1))?;
            for d in &docs {
                hourglass_query::interrupt::check()?;
                st.remove(d)?;
            }
            let ticket = self.engine().apply(st.finish()?)?;
            drop(guard);
            Ok((docs.len() as u64, ticket))
        })
    }

    /// findAndModify: picks the first match (by `sort` when given), then removes or updates
    /// it (or upserts), returning the document before or after.
    pub fn find_and_modify(&self, req: &FindAndModify<'_>) -> Result<FindAndModifyOutcome> {
        self.retrying(|| self.find_and_modify_once(req))
    }

    fn find_and_modify_once(&self, req: &FindAndModify<'_>) -> Result<(FindAndModifyOutcome, u64)> {
        let guard = self.lock_writes();
        let mut st = Staging::new(self);
        let target = self
            .matching(&st.snap, req.filter, req.sort, req.hint, Some(1))?
            .into_iter()
            .next();
        let mut out = FindAndModifyOutcome::default();
        match (target, req.update) {
            (Some(old), None) => {
                st.remove(&old)?;
                out.n = 1;
                out.value = Some(old);
            }
            (Some(old), Some(update)) => {
                let mut new = old.clone();
                if update.apply_matched(&mut new, false, Some(req.filter))? && new != old {
                    self.validate_update(&old, &new)?;
                    st.replace(&old, &new)?;
                }
                out.n = 1;
                out.updated_existing = true;
                out.value = Some(if req.return_new { new } else { old });
            }
            (None, Some(update)) if req.upsert => {
                let doc = Self::upsert_document(req.filter, req.query, update)?;
                let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
                self.validate_insert(&doc)?;
                st.insert(&doc)?;
                out.n = 1;
                out.upserted = Some(id);
                out.value = req.return_new.then_some(doc);
            }
            (None, _) => {}
        }
        let ticket = self.engine().apply(st.finish()?)?;
        drop(guard);
        Ok((out, ticket))
    }
}

#[cfg(test)]
mod tests {
    use crate::Catalog;
    use bson::{doc, Bson};
    use hourglass_query::filter::Filter;
    use hourglass_query::update::Update;
    use hourglass_storage::Engine;

    #[test]
    fn update_upsert_seeds_from_filter_and_applies_inc() {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        let c = cat.get_or_create("db", "c").unwrap();
        let f = Filter::parse(&doc! {"name": "x"}).unwrap();
        let u = Update::parse(&doc! {"$inc": {"n": 1}}).unwrap();
        let first = c.update(&f, &u, false, true).unwrap();
        assert!(first.upserted.is_some());
        let second = c.update(&f, &u, false, true).unwrap();
        assert_eq!((second.matched, second.modified), (1, 1));
        let d = c.scan().next().unwrap().unwrap();
        assert_eq!(d.get("n"), Some(&Bson::Int32(2)));
        assert_eq!(d.get_str("name").unwrap(), "x");
    }

    #[test]
    fn delete_limit_one_removes_a_single_match() {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        let c = cat.get_or_create("db", "c").unwrap();
        c.insert(vec![doc! {"a": 1}, doc! {"a": 1}, doc! {"a": 2}], true);
        let f = Filter::parse(&doc! {"a": 1}).unwrap();
        assert_eq!(c.delete(&f, true).unwrap(), 1);
        assert_eq!(c.delete(&f, false).unwrap(), 1);
        assert_eq!(c.count().unwrap(), 1);
    }
}
