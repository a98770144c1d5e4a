//! Executing a [`Plan`]: streams the candidate documents from one snapshot (the caller
//! applies the filter) and counts keys and documents examined for `explain`.

use crate::collection::{decode, Collection, DocStream};
use crate::error::Result;
use crate::plan::{Access, IndexRef, Plan};
use hourglass_query::filter::raw::RawFilter;
use hourglass_query::raw_pick::{picked_document, FieldTree};
use hourglass_storage::read_ahead::ReadAhead;
use hourglass_storage::{SharedValue, Snapshot};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Work done by a scan.
#[derive(Debug, Default)]
pub struct ScanStats {
    pub keys_examined: AtomicU64,
    pub docs_examined: AtomicU64,
}

impl ScanStats {
    pub fn keys(&self) -> u64 {
        self.keys_examined.load(Ordering::Relaxed)
    }
    pub fn docs(&self) -> u64 {
        self.docs_examined.load(Ordering::Relaxed)
    }
    /// Counts from zero again (a read that starts over).
    pub fn reset(&self) {
        self.keys_examined.store(0, Ordering::Relaxed);
        self.docs_examined.store(0, Ordering::Relaxed);
    }

    pub(crate) fn key(&self) {
        self.keys_examined.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn doc(&self) {
        self.docs_examined.fetch_add(1, Ordering::Relaxed);
    }
}

/// The stored bytes of documents, in a plan's order.
pub type StoredStream = Box<dyn Iterator<Item = Result<SharedValue>> + Send>;

/// What a read may leave out of the stored documents it scans.
#[derive(Debug, Clone, Default)]
pub struct Narrowing {
    /// Documents this rules out from their bytes are not built.
    pub pre: Option<RawFilter>,
    /// Only these parts are built (`None`: all of them), of the documents `pre` lets
    /// through; they include the paths of `pre`, so the caller's filter can run on them.
    pub fields: Option<Arc<FieldTree>>,
}

/// The document in `bytes` as `narrow` allows: `None` when the raw filter rules it out;
/// else with fields named only they are built (they include the filter's, which the
/// caller applies), or the whole document.
fn decode_if(bytes: &[u8], narrow: &Narrowing) -> Option<Result<bson::Document>> {
    if let (Some(pre), Ok(raw)) = (&narrow.pre, bson::RawDocument::from_bytes(bytes)) {
        if !pre.matches(raw) {
            return None;
        }
    }
    if let Some(fields) = &narrow.fields {
        // Damaged bytes: the full decoding says what is wrong.
        return Some(picked_document(bytes, fields).map_or_else(|| decode(bytes), Ok));
    }
    Some(decode(bytes))
}

impl Collection {
    /// The documents `plan` reads, from a fresh snapshot.
    pub fn execute(&self, plan: &Plan, stats: Arc<ScanStats>) -> DocStream {
        self.execute_in(&self.engine().snapshot(), plan, stats, Narrowing::default())
    }

    /// [`Collection::execute`] building only what `narrow` allows (the caller still
    /// applies its filter to what comes out).
    pub fn execute_filtered(
        &self,
        plan: &Plan,
        stats: Arc<ScanStats>,
        narrow: Narrowing,
    ) -> DocStream {
        self.execute_in(&self.engine().snapshot(), plan, stats, narrow)
    }

    /// The documents `plan` reads as of `snap`, as `narrow` allows.
    pub(crate) fn execute_in(
        &self,
        snap: &Snapshot,
        plan: &Plan,
        stats: Arc<ScanStats>,
        narrow: Narrowing,
    ) -> DocStream {
        Box::new(
            self.stored_in(snap, plan, stats)
                .filter_map(move |r| match r {
                    Ok(bytes) => decode_if(&bytes, &narrow),
                    Err(e) => Some(Err(e)),
                }),
        )
    }

    /// The stored bytes of the documents `plan` reads, from a fresh snapshot, for a
    /// reader that works on bytes (the caller applies the filter).
    pub fn execute_stored(&self, plan: &Plan, stats: Arc<ScanStats>) -> StoredStream {
        self.stored_in(&self.engine().snapshot(), plan, stats)
    }

    /// The stored bytes of the documents `plan` reads as of `snap`.
    fn stored_in(&self, snap: &Snapshot, plan: &Plan, stats: Arc<ScanStats>) -> StoredStream {
        match &plan.access {
            // A long scan reads the engine on a thread of its own (read_ahead.rs).
            Access::CollScan { reverse } => Box::new(
                ReadAhead::new(snap.range_shared(self.tree(), b"", None, *reverse)).map(move |r| {
                    stats.doc();
                    r.map(|(_, v)| v).map_err(Into::into)
                }),
            ),
            Access::IdPoint(id) => {
                stats.key();
                let found = snap
                    .get_shared(self.tree(), &crate::keystring::id_key(id))
                    .map_err(Into::into)
                    .transpose();
                if found.is_some() {
                    stats.doc();
                }
                Box::new(found.into_iter())
            }
            Access::IndexScan {
                index,
                ranges,
                reverse,
                ..
            } => {
                let reverse = *reverse;
                match index {
                    IndexRef::Id => {
                        let tree = self.tree().clone();
                        let snap2 = snap.clone();
                        let entries = ranges.clone().into_iter().flat_map(move |(s, e)| {
                            snap2.range_shared(&tree, &s, e.as_deref(), reverse)
                        });
                        Box::new(ReadAhead::new(entries).map(move |r| {
                            stats.key();
                            stats.doc();
                            r.map(|(_, v)| v).map_err(Into::into)
                        }))
                    }
                    IndexRef::Secondary(ix) => {
                        let itree = ix.tree().clone();
                        let ranges = ranges.clone();
                        let keys_snap = snap.clone();
                        let entries = ranges.into_iter().flat_map(move |(s, e)| {
                            keys_snap.range(&itree, &s, e.as_deref(), reverse)
                        });
                        // Only a multikey index has several entries per document (the
                        // flag is set before any such entry commits, so before `snap`).
                        let mut seen: Option<HashSet<Vec<u8>>> =
                            ix.is_multikey().then(HashSet::new);
                        let snap = snap.clone();
                        let coll_tree = self.tree().clone();
                        // One item per key examined, with the document it fetched (None
                        // for a key already seen or without a document): the fetches may
                        // run ahead, the counting happens as the caller takes them.
                        let fetched = entries.map(move |r| {
                            let id_key = match r {
                                Ok((_, v)) => v,
                                Err(e) => return Some(Err(e)),
                            };
                            if seen.as_mut().is_some_and(|s| !s.insert(id_key.clone())) {
                                return None;
                            }
                            snap.get_shared(&coll_tree, &id_key).transpose()
                        });
                        Box::new(ReadAhead::new(fetched).filter_map(move |r| {
                            stats.key();
                            let bytes = r?;
                            if bytes.is_ok() {
                                stats.doc();
                            }
                            Some(bytes.map_err(Into::into))
                        }))
                    }
                }
            }
        }
    }

    /// Documents matching `filter` per `plan`, in plan order.
    pub(crate) fn matching_docs(
        &self,
        snap: &Snapshot,
        plan: &Plan,
        filter: &hourglass_query::filter::Filter,
        limit: Option<usize>,
    ) -> Result<Vec<bson::Document>> {
        let mut out = Vec::new();
        let narrow = Narrowing {
            pre: RawFilter::new(filter),
            fields: None,
        };
        for doc in self.execute_in(snap, plan, Arc::new(ScanStats::default()), narrow) {
            // Writes read their documents here: maxTimeMS and killOp stop them before
            // anything is written.
            hourglass_query::interrupt::check()?;
            let doc = doc?;
            if filter.matches(&doc) {
                out.push(doc);
                if limit.is_some_and(|l| out.len() >= l) {
                    break;
                }
            }
        }
        Ok(out)
    }
}
