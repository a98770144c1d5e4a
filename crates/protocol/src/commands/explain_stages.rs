//! The per-stage counts of an explained pipeline at `executionStats` verbosity, as
//! mongod 7.0 prints them: every stage document of `stages` gets `nReturned` (the
//! documents it output) and `executionTimeMillisEstimate` (the time until it had output
//! them all, its inputs' time included) next to its stage name, both as 64-bit integers:
//! `{$group: {...}, nReturned: 3, executionTimeMillisEstimate: 0}`. (mongod's
//! `appendCommonExecStats` adds them to each serialized stage.) A `$sort` also reports the
//! bytes it sorted and its spills to disk; a `$group` its accumulators' memory, the bytes
//! it output and its spills.
//!
//! The stages are explained in the form mongod's optimizer gives the pipeline
//! ([`optimized`], then [`printed`]): a `$limit` after a `$skip` moves before it, grown by
//! the skip; consecutive `$limit`s and `$skip`s coalesce; a `$sort` shows its `sortKey`
//! and takes in the `$limit` after it: `{$sort: {sortKey: {a: 1}, limit: 15}}`.

use crate::error::CommandError;
use bson::{Bson, Document};
use hourglass_query::pipeline::spill::{thread_spills, Spills};
use hourglass_query::pipeline::{Pipeline, RunOptions};
use std::time::Instant;

/// `stage` (a stage document such as `{$cursor: {...}}`) with its counts appended.
pub(super) fn with_counts(mut stage: Document, returned: usize, millis: i64) -> Document {
    stage.insert("nReturned", returned as i64);
    stage.insert("executionTimeMillisEstimate", millis);
    stage
}

/// Milliseconds since `started`, as explain prints them.
pub(super) fn millis_since(started: Instant) -> i64 {
    started.elapsed().as_millis() as i64
}

/// Runs `stages` one after the other over `input` (each stage's output is the next one's
/// input, as in the pipeline) and returns the stage documents with their counts, plus the
/// number of documents the last stage output. A stage that writes (`$out`, `$merge`) is
/// not run (explain never writes): it and any stage after it are returned without
/// counts, and the output count is `None`.
pub(super) fn run_counted(
    stages: &[Document],
    input: Vec<Document>,
    opts: &RunOptions<'_>,
    started: Instant,
) -> Result<(Vec<Bson>, Option<usize>), CommandError> {
    let mut docs = input;
    let stages = optimized(stages);
    let mut out = Vec::with_capacity(stages.len());
    let mut ran = true;
    for stage in stages {
        let one = Pipeline::parse(std::slice::from_ref(&stage))?;
        if !ran || one.writes() {
            ran = false;
            out.push(Bson::Document(stage));
            continue;
        }
        let sorted_bytes = sorted_bytes(&stage, &docs);
        let before = thread_spills();
        docs = one.run_with(std::mem::take(&mut docs), opts)?;
        let mut stage = stage;
        add_stage_stats(
            &mut stage,
            sorted_bytes,
            &docs,
            thread_spills().since(before),
        );
        let counted = with_counts(stage, docs.len(), millis_since(started));
        out.push(Bson::Document(counted));
    }
    Ok((printed(out), ran.then_some(docs.len())))
}

/// The BSON bytes of `docs`.
fn bytes_of(docs: &[Document]) -> usize {
    docs.iter().map(hourglass_query::bson_size::bson_size).sum()
}

/// What `stage` reports as sorted when `docs` are the documents it sorts: their bytes for
/// a `$sort`, 0 for any other stage.
pub(super) fn sorted_bytes(stage: &Document, docs: &[Document]) -> usize {
    if stage.contains_key("$sort") {
        bytes_of(docs)
    } else {
        0
    }
}

/// Adds what a counted blocking stage reports besides its counts, as mongod 7.0 prints
/// it: a `$sort` the bytes it sorted (`sorted_bytes`, its input's), a `$group` its
/// accumulators' memory and the bytes it output (`output`, its documents), both their
/// spills to disk.
pub(super) fn add_stage_stats(
    stage: &mut Document,
    sorted_bytes: usize,
    output: &[Document],
    spilled: Spills,
) {
    let sorts = stage.contains_key("$sort");
    let groups = match stage.get_document("$group") {
        Ok(spec) => {
            let accumulators = max_accumulator_bytes(spec, output);
            stage.insert("maxAccumulatorMemoryUsageBytes", accumulators);
            stage.insert("totalOutputDataSizeBytes", bytes_of(output) as i64);
            true
        }
        Err(_) => false,
    };
    if sorts {
        stage.insert("totalDataSizeSortedBytesEstimate", sorted_bytes as i64);
    }
    if sorts || groups {
        stage.insert("usedDisk", spilled.runs > 0);
        stage.insert("spills", spilled.runs as i64);
        stage.insert("spilledDataStorageSize", spilled.bytes as i64);
    }
    if groups {
        stage.insert("numBytesSpilledEstimate", spilled.bytes as i64);
        stage.insert("spilledRecords", spilled.records as i64);
    }
}

/// A `$group`'s `maxAccumulatorMemoryUsageBytes`: for each accumulated field, the memory
/// its values hold across all the groups (as mongod's per-field memory tracker reports
/// it), estimated from the groups' output values.
fn max_accumulator_bytes(spec: &Document, groups: &[Document]) -> Document {
    let mut out = Document::new();
    for field in spec.keys().filter(|k| k.as_str() != "_id") {
        let held: u64 = groups
            .iter()
            .filter_map(|g| g.get(field))
            .map(hourglass_query::pipeline::mem::approx_size)
            .sum();
        out.insert(field.clone(), held as i64);
    }
    out
}

/// The stages of a pipeline explained without running it, as mongod prints them.
pub(super) fn unrun(stages: &[Document]) -> Vec<Bson> {
    printed(optimized(stages).into_iter().map(Bson::Document).collect())
}

/// A `$limit` or `$skip` stage with a whole amount.
#[derive(Clone, Copy)]
enum Amount {
    Limit(i64),
    Skip(i64),
}

/// The amount of `stage` when it is only a `$limit` or a `$skip`.
fn stage_amount(stage: &Document) -> Option<Amount> {
    (stage.len() == 1).then(|| first_amount(stage)).flatten()
}

/// The amount of a `$limit` or `$skip` stage document, counts beside it or not.
fn first_amount(stage: &Document) -> Option<Amount> {
    let (name, value) = stage.iter().next()?;
    let n = match value {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e18 => *d as i64,
        _ => return None,
    };
    match name.as_str() {
        "$limit" if n > 0 => Some(Amount::Limit(n)),
        "$skip" if n >= 0 => Some(Amount::Skip(n)),
        _ => None,
    }
}

fn amount_stage(a: Amount) -> Document {
    match a {
        Amount::Limit(n) => bson::doc! {"$limit": n},
        Amount::Skip(n) => bson::doc! {"$skip": n},
    }
}

/// `stages` as mongod's optimizer rewrites their `$skip`s and `$limit`s (the same
/// results): `$skip: s, $limit: l` becomes `$limit: s + l, $skip: s`; `$limit: a, $limit: b`
/// becomes `$limit: min(a, b)`; `$skip: a, $skip: b` becomes `$skip: a + b`. Amounts are
/// 64-bit. A stage with an invalid amount is left for the run to refuse.
pub(super) fn optimized(stages: &[Document]) -> Vec<Document> {
    let mut out: Vec<Document> = stages.to_vec();
    for stage in &mut out {
        if let Some(a) = stage_amount(stage) {
            *stage = amount_stage(a);
        }
    }
    let mut i = 0;
    while i + 1 < out.len() {
        let pair = (stage_amount(&out[i]), stage_amount(&out[i + 1]));
        let merged = match pair {
            (Some(Amount::Skip(s)), Some(Amount::Limit(l))) => {
                out[i] = amount_stage(Amount::Limit(s.saturating_add(l)));
                out[i + 1] = amount_stage(Amount::Skip(s));
                // The grown limit may now meet a limit before it.
                i = i.saturating_sub(1);
                continue;
            }
            (Some(Amount::Limit(a)), Some(Amount::Limit(b))) => Amount::Limit(a.min(b)),
            (Some(Amount::Skip(a)), Some(Amount::Skip(b))) => Amount::Skip(a.saturating_add(b)),
            _ => {
                i += 1;
                continue;
            }
        };
        out[i] = amount_stage(merged);
        out.remove(i + 1);
        i = i.saturating_sub(1);
    }
    out
}

/// Stage documents (counted or not) as mongod prints them: `{$sort: spec}` as
/// `{$sort: {sortKey: spec}}`, and a `$limit` right after a `$sort` taken into it as its
/// `limit`, the merged stage counting what the limit returned.
pub(super) fn printed(stages: Vec<Bson>) -> Vec<Bson> {
    let mut out: Vec<Bson> = Vec::with_capacity(stages.len());
    for stage in stages {
        let Bson::Document(mut stage) = stage else {
            out.push(stage);
            continue;
        };
        let limit = match first_amount(&stage) {
            Some(Amount::Limit(l)) => Some(l),
            _ => None,
        };
        let sort_before = out.last_mut().and_then(|b| match b {
            Bson::Document(d) if matches!(d.get("$sort"), Some(Bson::Document(_))) => Some(d),
            _ => None,
        });
        if let (Some(l), Some(sort)) = (limit, sort_before) {
            if let Ok(spec) = sort.get_document_mut("$sort") {
                let l = match spec.get_i64("limit") {
                    Ok(before) => before.min(l),
                    Err(_) => l,
                };
                spec.insert("limit", l);
            }
            for key in ["nReturned", "executionTimeMillisEstimate"] {
                if let Some(v) = stage.get(key) {
                    sort.insert(key, v.clone());
                }
            }
            continue;
        }
        if let Some(Bson::Document(spec)) = stage.get("$sort") {
            if !matches!(spec.get("sortKey"), Some(Bson::Document(_))) {
                let spec = bson::doc! {"sortKey": spec.clone()};
                let mut with_key = bson::doc! {"$sort": spec};
                stage.remove("$sort");
                with_key.extend(stage);
                stage = with_key;
            }
        }
        out.push(Bson::Document(stage));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn every_stage_is_counted_with_what_it_output() {
        let input = (0..5).map(|i| doc! {"a": i % 2}).collect();
        let stages = [doc! {"$match": {"a": 1}}, doc! {"$group": {"_id": "$a"}}];
        let (out, n) = run_counted(&stages, input, &RunOptions::default(), Instant::now()).unwrap();
        assert_eq!(n, Some(1));
        let first = out[0].as_document().unwrap();
        assert_eq!(first.get_i64("nReturned").unwrap(), 2);
        assert!(first.get_i64("executionTimeMillisEstimate").is_ok());
        assert_eq!(
            out[1].as_document().unwrap().get_i64("nReturned").unwrap(),
            1
        );
    }

    #[test]
    fn a_stage_that_writes_is_not_run_nor_counted() {
        let stages = [doc! {"$out": "elsewhere"}];
        let (out, n) = run_counted(
            &stages,
            vec![doc! {}],
            &RunOptions::default(),
            Instant::now(),
        )
        .unwrap();
        assert_eq!(n, None);
        assert_eq!(out[0].as_document().unwrap(), &doc! {"$out": "elsewhere"});
    }

    #[test]
    fn skips_and_limits_are_reordered_and_coalesced_as_mongod_optimizes_them() {
        let stages = [
            doc! {"$sort": {"a": 1}},
            doc! {"$skip": 2},
            doc! {"$limit": 3},
            doc! {"$skip": 1_i64},
            doc! {"$limit": 1.0},
        ];
        // skip 2, limit 3 -> limit 5, skip 2; skip 2, skip 1 -> skip 3; skip 3, limit 1 ->
        // limit 4, skip 3; limit 5, limit 4 -> limit 4.
        let want = [
            doc! {"$sort": {"a": 1}},
            doc! {"$limit": 4_i64},
            doc! {"$skip": 3_i64},
        ];
        assert_eq!(optimized(&stages), want);
        // An amount the run refuses is left for it to refuse.
        let bad = [doc! {"$skip": -1}, doc! {"$limit": 0}];
        assert_eq!(optimized(&bad), bad);
    }

    #[test]
    fn a_limit_after_a_sort_is_printed_inside_it_with_the_limits_counts() {
        let stages = vec![
            Bson::Document(doc! {"$sort": {"a": 1}, "nReturned": 9_i64}),
            Bson::Document(doc! {"$limit": 4_i64, "nReturned": 4_i64}),
            Bson::Document(doc! {"$skip": 3_i64, "nReturned": 1_i64}),
        ];
        let want = vec![
            Bson::Document(
                doc! {"$sort": {"sortKey": {"a": 1}, "limit": 4_i64}, "nReturned": 4_i64},
            ),
            Bson::Document(doc! {"$skip": 3_i64, "nReturned": 1_i64}),
        ];
        assert_eq!(printed(stages), want);
    }
}
