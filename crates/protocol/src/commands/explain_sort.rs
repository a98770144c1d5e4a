//! What a read's blocking SORT stage did, for explain at `executionStats`: the documents
//! are sorted as the read sorts them (`find_shape::shape`: in memory up to the sort memory limit,
//! spilled to files past it when the disk may be used), and the SORT stage reports the
//! bytes it sorted and its spills, as mongod 7.0 prints them:
//! `..., type: "simple", totalDataSizeSorted, usedDisk, spills, spilledDataStorageSize,
//! inputStage`.

use super::Request;
use crate::cursor::DocSource;
use crate::error::CommandError;
use bson::{Bson, Document};
use hourglass_query::pipeline::mem::MemLimits;
use hourglass_query::pipeline::spill::{thread_spills, Spills};
use hourglass_query::sort::SortSpec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The counts of one blocking sort.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct SortRun {
    /// Documents that entered the sort.
    pub input: u64,
    /// Their BSON bytes.
    pub bytes: u64,
    /// What it wrote to disk.
    pub spilled: Spills,
}

/// Sorts `source` by `sort` as a read does, then skips and limits; returns the documents
/// and what the sort did.
pub(super) fn sort_measured(
    req: &Request,
    limits: &MemLimits,
    source: DocSource,
    sort: &SortSpec,
    skip: usize,
    limit: Option<usize>,
) -> Result<(Vec<Document>, SortRun), CommandError> {
    let seen = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let counter = seen.clone();
    let source: DocSource = Box::new(source.inspect(move |d| {
        if let Ok(d) = d {
            counter.0.fetch_add(1, Ordering::Relaxed);
            let size = hourglass_query::bson_size::bson_size(d) as u64;
            counter.1.fetch_add(size, Ordering::Relaxed);
        }
    }));
    let before = thread_spills();
    let sorted =
        super::find_shape::shape(req, limits, source, Some(sort.clone()), skip, limit, None)?;
    let docs = sorted.collect::<Result<Vec<_>, _>>()?;
    let run = SortRun {
        input: seen.0.load(Ordering::Relaxed),
        bytes: seen.1.load(Ordering::Relaxed),
        spilled: thread_spills().since(before),
    };
    Ok((docs, run))
}

impl SortRun {
    /// Adds the counts to the first SORT stage of the `stages` tree (down its
    /// `inputStage`s), before its `inputStage`.
    pub(super) fn annotate(&self, stages: &mut Document) {
        if stages.get_str("stage") != Ok("SORT") {
            if let Ok(input) = stages.get_document_mut("inputStage") {
                self.annotate(input);
            }
            return;
        }
        let input = stages.remove("inputStage");
        stages.insert("totalDataSizeSorted", self.bytes as i64);
        stages.insert("usedDisk", self.spilled.runs > 0);
        stages.insert("spills", self.spilled.runs as i64);
        stages.insert("spilledDataStorageSize", self.spilled.bytes as i64);
        if let Some(input) = input {
            stages.insert("inputStage", input);
        }
    }
}

/// The blocking sort memory limit, shown as a SORT stage's `memLimit`.
pub(super) fn sort_mem_limit(req: &Request) -> Result<i64, CommandError> {
    let bytes = super::pipeline_context::mem_limits(req)?.sort_bytes;
    Ok(bytes.min(i64::MAX as u64) as i64)
}

/// A SORT stage document (`queryPlanner` form) with `sortPattern`, the memory limit and
/// `inputStage`.
pub(super) fn sort_stage(pattern: &Document, mem_limit: i64, input: Document) -> Document {
    let mut stage = Document::new();
    stage.insert("stage", "SORT");
    stage.insert("sortPattern", pattern.clone());
    stage.insert("memLimit", Bson::Int64(mem_limit));
    stage.insert("type", "simple");
    stage.insert("inputStage", input);
    stage
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn the_counts_go_to_the_sort_stage_before_its_input() {
        let mut tree = doc! {"stage": "LIMIT", "inputStage": sort_stage(&doc! {"a": 1}, 100, doc! {"stage": "COLLSCAN"})};
        let run = SortRun {
            input: 2,
            bytes: 40,
            spilled: Spills {
                runs: 1,
                bytes: 50,
                records: 2,
            },
        };
        run.annotate(&mut tree);
        let sort = tree.get_document("inputStage").unwrap();
        let keys: Vec<&str> = sort.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "stage",
                "sortPattern",
                "memLimit",
                "type",
                "totalDataSizeSorted",
                "usedDisk",
                "spills",
                "spilledDataStorageSize",
                "inputStage"
            ]
        );
        assert_eq!(sort.get_bool("usedDisk"), Ok(true));
    }
}
