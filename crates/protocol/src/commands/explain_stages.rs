//! The per-stage counts of an explained pipeline at `executionStats` verbosity, as
//! mongod 7.0 prints them: every stage document of `stages` gets `nReturned` (the
//! documents it output) and `executionTimeMillisEstimate` (the time until it had output
//! them all, its inputs' time included) next to its stage name, both as 64-bit integers:
//! `{$group: {...}, nReturned: 3, executionTimeMillisEstimate: 0}`. (mongod's
//! `appendCommonExecStats` adds them to each serialized stage.)

use crate::error::CommandError;
use bson::{Bson, Document};
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
    let mut out = Vec::with_capacity(stages.len());
    let mut ran = true;
    for stage in stages {
        let one = Pipeline::parse(std::slice::from_ref(stage))?;
        if !ran || one.writes() {
            ran = false;
            out.push(Bson::Document(stage.clone()));
            continue;
        }
        docs = one.run_with(std::mem::take(&mut docs), opts)?;
        let counted = with_counts(stage.clone(), docs.len(), millis_since(started));
        out.push(Bson::Document(counted));
    }
    Ok((out, ran.then_some(docs.len())))
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
}
