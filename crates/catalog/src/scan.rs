//! Executing a [`Plan`]: streams the candidate documents from one snapshot (the caller
//! applies the filter) and counts keys and documents examined for `explain`.

use crate::collection::{decode, Collection, DocStream};
use crate::error::Result;
use crate::plan::{Access, IndexRef, Plan};
use hourglass_storage::Snapshot;
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
    fn key(&self) {
        self.keys_examined.fetch_add(1, Ordering::Relaxed);
    }
    fn doc(&self) {
        self.docs_examined.fetch_add(1, Ordering::Relaxed);
    }
}

impl Collection {
    /// The documents `plan` reads, from a fresh snapshot.
    pub fn execute(&self, plan: &Plan, stats: Arc<ScanStats>) -> DocStream {
        self.execute_in(&self.engine().snapshot(), plan, stats)
    }

    /// The documents `plan` reads as of `snap`.
    pub(crate) fn execute_in(
        &self,
        snap: &Snapshot,
        plan: &Plan,
        stats: Arc<ScanStats>,
    ) -> DocStream {
        match &plan.access {
            Access::CollScan { reverse } => {
                Box::new(snap.range(self.tree(), b"", None, *reverse).map(move |r| {
                    stats.doc();
                    let (_, v) = r?;
                    decode(&v)
                }))
            }
            Access::IdPoint(id) => {
                stats.key();
                let found = self.get_in(snap, id).transpose();
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
                        Box::new(ranges.clone().into_iter().flat_map(move |(s, e)| {
                            let stats = stats.clone();
                            snap2.range(&tree, &s, e.as_deref(), reverse).map(move |r| {
                                stats.key();
                                stats.doc();
                                let (_, v) = r?;
                                decode(&v)
                            })
                        }))
                    }
                    IndexRef::Secondary(ix) => {
                        let itree = ix.tree().clone();
                        let ranges = ranges.clone();
                        let keys_snap = snap.clone();
                        let entries = ranges.into_iter().flat_map(move |(s, e)| {
                            keys_snap.range(&itree, &s, e.as_deref(), reverse)
                        });
                        let mut seen: HashSet<Vec<u8>> = HashSet::new();
                        let snap = snap.clone();
                        let coll_tree = self.tree().clone();
                        Box::new(entries.filter_map(move |r| {
                            stats.key();
                            let id_key = match r {
                                Ok((_, v)) => v,
                                Err(e) => return Some(Err(e.into())),
                            };
                            if !seen.insert(id_key.clone()) {
                                return None;
                            }
                            match snap.get(&coll_tree, &id_key) {
                                Ok(Some(bytes)) => {
                                    stats.doc();
                                    Some(decode(&bytes))
                                }
                                Ok(None) => None,
                                Err(e) => Some(Err(e.into())),
                            }
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
        for doc in self.execute_in(snap, plan, Arc::new(ScanStats::default())) {
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
