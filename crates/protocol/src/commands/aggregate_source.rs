//! Where an aggregate over a regular collection gets its documents, decided once for its
//! execution and its explain:
//! - `$sort` then `$group` by the sort's first field, keeping only `$first` (or only
//!   `$last`) of each group, reads one document per group by DISTINCT_SCAN when an index
//!   starts with the sort's fields;
//! - otherwise the leading `$match` and `$sort` are planned together with the `hint`, and
//!   an index that gives the sort order takes the `$sort`'s place.

use super::planned::{regular_read, ReadOpts};
use crate::cursor::DocSource;
use crate::error::CommandError;
use bson::{doc, Bson, Document};
use hourglass_catalog::distinct_scan::eligible;
use hourglass_catalog::index::{Index, KeyKind};
use hourglass_catalog::plan::{Hint, IndexRef, Plan};
use hourglass_catalog::scan::{ScanStats, StoredStream};
use hourglass_catalog::Collection;
use hourglass_query::filter::Filter;
use hourglass_query::pipeline::raw_group::RawGroup;
use hourglass_query::pipeline::MemLimits;
use hourglass_query::sort::SortSpec;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A `$sort` + `$group` answered by reading one document per group.
pub struct DistinctGroup {
    pub index: Arc<Index>,
    /// Each group's document is the last of its index entries (the first otherwise).
    pub last: bool,
}

/// How the documents are read.
pub enum Access {
    Planned(Plan),
    Distinct(DistinctGroup),
}

/// An aggregate's input in progress.
pub struct AggregateRead {
    pub access: Access,
    /// The stages the read performs (a `$sort` the order of the read already gives, or
    /// the `$match` and `$group` run on bytes), which the pipeline leaves out.
    pub absorbed: Vec<usize>,
    pub stats: Arc<ScanStats>,
    pub source: DocSource,
}

impl AggregateRead {
    /// The stages left to run after the read.
    pub fn remaining(&self, stages: &[Document]) -> Vec<Document> {
        stages
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.absorbed.contains(i))
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// mongod's one-line plan summary.
    pub fn summary(&self) -> String {
        match &self.access {
            Access::Planned(p) => super::planned::plan_summary(p),
            Access::Distinct(g) => format!(
                "DISTINCT_SCAN {}",
                super::planned::pattern_summary(&IndexRef::Secondary(g.index.clone()))
            ),
        }
    }
}

fn key_pattern(index: &Arc<Index>) -> Document {
    IndexRef::Secondary(index.clone()).key_pattern()
}

/// The `$sort` that leads `stages` or follows their leading `$match`: its position and
/// the sort.
fn leading_sort(stages: &[Document]) -> Result<Option<(usize, SortSpec)>, CommandError> {
    let at = usize::from(stages.first().is_some_and(|s| s.contains_key("$match")));
    match stages.get(at).and_then(|s| s.get_document("$sort").ok()) {
        Some(spec) => Ok(Some((at, SortSpec::parse(spec)?))),
        None => Ok(None),
    }
}

/// Starts reading the input of `stages` from `c`; `filter` is the leading `$match`'s.
/// With `group` (the memory limits and spill directory of an execution, not given to
/// explain) a `$group` after the `$match` may run on the documents' bytes.
pub fn open(
    c: &Arc<Collection>,
    stages: &[Document],
    filter: Filter,
    hint: Option<&Hint>,
    group: Option<(&MemLimits, Option<&Path>)>,
) -> Result<AggregateRead, CommandError> {
    let sort = leading_sort(stages)?;
    if let (Some((0, s)), None) = (&sort, hint) {
        if let Some(group) = distinct_group(c, s, stages.get(1)) {
            let stats = Arc::new(ScanStats::default());
            let docs = c.distinct_scan(group.index.clone(), group.last, stats.clone());
            return Ok(AggregateRead {
                access: Access::Distinct(group),
                absorbed: vec![0],
                stats,
                source: Box::new(docs.map(|r| r.map_err(CommandError::from))),
            });
        }
    }
    let match_spec = stages.first().and_then(|s| s.get_document("$match").ok());
    let after: Vec<Document> = stages
        .iter()
        .skip(usize::from(match_spec.is_some()))
        .cloned()
        .collect();
    let opts = ReadOpts {
        sort: sort.as_ref().map(|(_, s)| s),
        hint,
        after: &after,
        ..Default::default()
    };
    let raw_group = group
        .zip(after.first().and_then(|s| s.get_document("$group").ok()))
        .filter(|_| !hourglass_query::collation::active())
        .and_then(|((limits, spill_dir), spec)| {
            Some(BytesGroup {
                raw: RawGroup::parse(spec)?,
                filter: filter.clone(),
                limits: *limits,
                spill_dir: spill_dir.map(Path::to_path_buf),
            })
        });
    let read = regular_read(c, filter, match_spec, &opts)?;
    let Some(bytes_group) = raw_group else {
        return Ok(AggregateRead {
            absorbed: sort
                .filter(|_| read.plan.provides_sort)
                .map(|(at, _)| at)
                .into_iter()
                .collect(),
            access: Access::Planned(read.plan),
            stats: read.stats,
            source: read.source,
        });
    };
    let group_at = usize::from(match_spec.is_some());
    let stored = c.execute_stored(&read.plan, read.stats.clone());
    let documents = (read.source, read.stats.clone());
    Ok(AggregateRead {
        absorbed: (0..=group_at).collect(),
        access: Access::Planned(read.plan),
        stats: read.stats,
        // Run when the cursor is first read.
        source: Box::new(
            std::iter::once((bytes_group, stored, documents))
                .flat_map(|(g, stored, documents)| g.run(stored, documents)),
        ),
    })
}

/// A `$group` run over the stored bytes of the documents a plan reads.
struct BytesGroup {
    raw: RawGroup,
    filter: Filter,
    limits: MemLimits,
    spill_dir: Option<PathBuf>,
}

impl BytesGroup {
    /// The groups of `stored`; when that run gives up (past the memory limit), the
    /// document path's `$group` over `documents` (the same plan's documents, filtered,
    /// whose reading `stats` counts).
    fn run(
        self,
        stored: StoredStream,
        (documents, stats): (DocSource, Arc<ScanStats>),
    ) -> Vec<Result<Document, CommandError>> {
        let stored = stored.map(|r| r.map_err(CommandError::from));
        let groups = match self.raw.run(stored, &self.filter, &self.limits) {
            Ok(Some(groups)) => Ok(groups),
            Ok(None) => {
                // The documents are read again: they are counted from zero.
                stats.reset();
                self.raw
                    .group()
                    .run_stream(documents, &self.limits, self.spill_dir.as_deref())
            }
            Err(e) => Err(e),
        };
        match groups {
            Ok(groups) => groups.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        }
    }
}

/// The DISTINCT_SCAN for `sort` followed by `group`: the group's `_id` is the sort's first
/// field, its accumulators are all `$first` or all `$last`, and an eligible index starts
/// with the sort's fields, the ones after the first all in its direction or all against
/// it (which decides whether a group's first document is its first index entry).
fn distinct_group(
    c: &Collection,
    sort: &SortSpec,
    group: Option<&Document>,
) -> Option<DistinctGroup> {
    let group = group?.get_document("$group").ok()?;
    let field = match group.get("_id") {
        Some(Bson::String(s)) => s.strip_prefix('$').filter(|f| !f.starts_with('$'))?,
        _ => return None,
    };
    let mut wants_last = None;
    for (name, acc) in group {
        if name == "_id" {
            continue;
        }
        let Bson::Document(acc) = acc else {
            return None;
        };
        let last = match acc.keys().next().map(String::as_str) {
            Some("$first") if acc.len() == 1 => false,
            Some("$last") if acc.len() == 1 => true,
            _ => return None,
        };
        if wants_last.replace(last).is_some_and(|w| w != last) {
            return None;
        }
    }
    let keys = sort.keys();
    if keys.first().map(|(p, _)| p.as_str()) != Some(field) {
        return None;
    }
    c.indexes().iter().find_map(|index| {
        let parts = &index.spec.parts;
        if !eligible(index) || parts.len() < keys.len() {
            return None;
        }
        let mut along = None;
        for ((path, asc), part) in keys.iter().zip(parts.iter()) {
            if *path != part.path {
                return None;
            }
            if path == field {
                continue;
            }
            let same = *asc == (part.kind == KeyKind::Asc);
            if along.replace(same).is_some_and(|a| a != same) {
                return None;
            }
        }
        Some(DistinctGroup {
            index: index.clone(),
            last: wants_last.unwrap_or(false) == along.unwrap_or(true),
        })
    })
}

/// explain's `winningPlan` of a DISTINCT_SCAN of `index` (each value's first entry, or
/// its last), its documents fetched whole; with `stats`, its counters and the documents it
/// returned.
pub fn distinct_plan(index: &Arc<Index>, last: bool, stats: Option<(&ScanStats, u64)>) -> Document {
    let spec = &index.spec;
    let all: Vec<Bson> = vec![Bson::String(
        if last {
            "[MaxKey, MinKey]"
        } else {
            "[MinKey, MaxKey]"
        }
        .into(),
    )];
    let bounds: Document = spec
        .parts
        .iter()
        .map(|p| (p.path.clone(), Bson::Array(all.clone())))
        .collect();
    let no_paths: Document = spec
        .parts
        .iter()
        .map(|p| (p.path.clone(), Bson::Array(Vec::new())))
        .collect();
    let mut scan = doc! {
        "stage": "DISTINCT_SCAN",
        "keyPattern": key_pattern(index),
        "indexName": spec.name.clone(),
        "isMultiKey": false,
        "multiKeyPaths": no_paths,
        "isUnique": spec.unique,
        "isSparse": false,
        "isPartial": false,
        "indexVersion": 2,
        "direction": if last { "backward" } else { "forward" },
        "indexBounds": bounds,
    };
    let mut fetch = doc! {"stage": "FETCH"};
    if let Some((s, n)) = stats {
        scan.insert("nReturned", n as i64);
        scan.insert("keysExamined", s.keys() as i64);
        fetch.insert("nReturned", n as i64);
        fetch.insert("docsExamined", s.docs() as i64);
    }
    fetch.insert("inputStage", scan);
    fetch
}

/// explain's `queryPlanner` of a DISTINCT_SCAN of `index` reading namespace `ns`.
pub fn distinct_query_planner(ns: String, index: &Arc<Index>, last: bool) -> Document {
    doc! {
        "namespace": ns,
        "indexFilterSet": false,
        "parsedQuery": {},
        "maxIndexedOrSolutionsReached": false,
        "maxIndexedAndSolutionsReached": false,
        "maxScansToExplodeReached": false,
        "winningPlan": distinct_plan(index, last, None),
        "rejectedPlans": [],
    }
}
