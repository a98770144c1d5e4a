//! The per-stage execution counters of an explain at `executionStats` (`works`,
//! `advanced`, `needTime`, `needYield`, `saveState`, `restoreState`, `isEOF`,
//! `executionTimeMillisEstimate`, and IXSCAN's `seeks`/`dupsTested`/`dupsDropped`,
//! FETCH's `alreadyHasObj`), derived from the counts a read really made.
//!
//! mongod's classic engine calls `work()` on the root stage until it returns EOF; every
//! call is one of ADVANCED (a result), NEED_TIME (no result this time) or IS_EOF. So for a
//! leaf scan each key or document examined is one work, plus one final work that finds the
//! end when the scan ran to it (`isEOF: 1`); a scan stopped early (a limit, a write of one
//! document) makes no final work and reports `isEOF: 0`. A FETCH works once per work of
//! its input. `advanced` is `nReturned`; `needTime` is the works that were neither an
//! advance nor the final EOF. Hourglass never yields during a read, so `needYield`,
//! `saveState` and `restoreState` are 0. `executionTimeMillisEstimate` is the time of the
//! whole read: mongod's per-stage estimate includes its children's, so the read's time is
//! each stage's upper bound (and the root's value).

use bson::{Bson, Document};

fn int(d: &Document, k: &str) -> i64 {
    match d.get(k) {
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => *n as i64,
        _ => 0,
    }
}

/// `stage` with the common counters inserted after its `nReturned`, in mongod's order
/// (`stage`, `filter`, `nReturned`, `executionTimeMillisEstimate`, `works`, ..., `isEOF`,
/// then the stage's own fields).
pub(super) fn with_common(stage: Document, works: i64, eof: bool, millis: i64) -> Document {
    let advanced = int(&stage, "nReturned");
    let mut out = Document::new();
    for k in ["stage", "filter", "nReturned"] {
        if let Some(v) = stage.get(k) {
            out.insert(k, v.clone());
        }
    }
    out.insert("nReturned", advanced);
    out.insert("executionTimeMillisEstimate", millis);
    out.insert("works", works);
    out.insert("advanced", advanced);
    out.insert("needTime", (works - advanced - eof as i64).max(0));
    out.insert("needYield", 0_i64);
    out.insert("saveState", 0_i64);
    out.insert("restoreState", 0_i64);
    out.insert("isEOF", eof as i32);
    for (k, v) in stage {
        if !out.contains_key(&k) {
            out.insert(k, v);
        }
    }
    out
}

/// Adds the counters to an access path built by `plan_stages` with stats (`COLLSCAN`,
/// `IDHACK`, `FETCH` over `IXSCAN`, or a `GEO_NEAR`-style stage left as it is), `eof`
/// telling whether the read ran to its end. `ranges` is the number of key ranges an index
/// scan reads (each entered with a seek). Returns the stage and its works.
pub(super) fn count_access(
    stage: Document,
    eof: bool,
    ranges: usize,
    millis: i64,
) -> (Document, i64) {
    let name = stage.get_str("stage").unwrap_or_default().to_string();
    match name.as_str() {
        "COLLSCAN" => {
            let works = int(&stage, "docsExamined") + eof as i64;
            (with_common(stage, works, eof, millis), works)
        }
        // Found: one work returns the document and, run to its end, a second finds EOF;
        // not found: the one work finds EOF.
        "IDHACK" => {
            let works = int(&stage, "nReturned") + eof as i64;
            (with_common(stage, works, eof, millis), works)
        }
        "IXSCAN" => {
            let keys = int(&stage, "keysExamined");
            let works = keys + eof as i64;
            let multikey = matches!(stage.get("isMultiKey"), Some(Bson::Boolean(true)));
            let returned = int(&stage, "nReturned");
            let mut d = with_common(stage, works, eof, millis);
            // Each range is entered with one seek; a scan stopped early may not have
            // reached them all, so the count is only given when it is certain.
            if eof || ranges <= 1 {
                d.insert("seeks", ranges.max(1) as i64);
            }
            // A multikey index tests every key's record for a duplicate; the keys that
            // did not become a distinct document were dropped.
            let (tested, dropped) = if multikey {
                (keys, (keys - returned).max(0))
            } else {
                (0, 0)
            };
            d.insert("dupsTested", tested);
            d.insert("dupsDropped", dropped);
            (d, works)
        }
        "FETCH" => {
            let mut stage = stage;
            let (input, works) = match stage.remove("inputStage") {
                Some(Bson::Document(child)) => count_access(child, eof, ranges, millis),
                _ => (Document::new(), 0),
            };
            // An index scan hands FETCH keys, never documents.
            stage.insert("alreadyHasObj", 0_i64);
            let mut d = with_common(stage, works, eof, millis);
            if !input.is_empty() {
                d.insert("inputStage", input);
            }
            (d, works)
        }
        _ => (stage, 0),
    }
}

/// Adds the counters to the stages a find puts above its access path (`SORT`, `SKIP`,
/// `LIMIT`, `PROJECTION_*`, `COUNT`), whose own counters `count_access` set, from the
/// count each stage passes on: a SORT returns at most its `limitAmount` after working once per work
/// of its input, once per document it returns and once to find its end; a SKIP drops its
/// `skipAmount`; a LIMIT works once more to stop at its `limitAmount`; a projection
/// returns what it reads. Returns the stage, its works, `nReturned` and `isEOF`.
pub(super) fn count_wrappers(stage: Document, millis: i64) -> (Document, i64, i64, bool) {
    let name = stage.get_str("stage").unwrap_or_default().to_string();
    let wraps = matches!(
        name.as_str(),
        "SORT" | "SKIP" | "LIMIT" | "PROJECTION_SIMPLE" | "PROJECTION_DEFAULT" | "COUNT"
    );
    let mut stage = stage;
    let child = match stage.remove("inputStage") {
        Some(Bson::Document(child)) if wraps => child,
        other => {
            if let Some(input) = other {
                stage.insert("inputStage", input);
            }
            let eof = !matches!(stage.get("isEOF"), Some(Bson::Int32(0)));
            let (works, n) = (int(&stage, "works"), int(&stage, "nReturned"));
            return (stage, works, n, eof);
        }
    };
    let (child, input_works, input_n, input_eof) = count_wrappers(child, millis);
    let (works, n, eof) = match name.as_str() {
        "SORT" => {
            let n = match stage.get("limitAmount") {
                Some(_) => input_n.min(int(&stage, "limitAmount")),
                None => input_n,
            };
            (input_works + n + 1, n, true)
        }
        "SKIP" => (
            input_works,
            (input_n - int(&stage, "skipAmount")).max(0),
            input_eof,
        ),
        "LIMIT" => {
            let limit = int(&stage, "limitAmount");
            let n = input_n.min(limit);
            let stopped = n >= limit;
            (input_works + stopped as i64, n, input_eof || stopped)
        }
        // A COUNT returns nothing; it works once more to stop at its limit.
        "COUNT" => {
            let stopped = !input_eof;
            (input_works + stopped as i64, 0, true)
        }
        _ => (input_works, input_n, input_eof),
    };
    stage.insert("nReturned", n);
    let mut d = with_common(stage, works, eof, millis);
    d.insert("inputStage", child);
    (d, works, n, eof)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn a_collscan_run_to_its_end_works_once_per_document_and_once_more() {
        let s = doc! {"stage": "COLLSCAN", "nReturned": 2_i64, "docsExamined": 5_i64};
        let (d, works) = count_access(s, true, 0, 0);
        assert_eq!(works, 6);
        assert_eq!(d.get_i64("needTime").unwrap(), 3);
        assert_eq!(d.get_i32("isEOF").unwrap(), 1);
    }

    #[test]
    fn a_fetch_works_as_often_as_its_index_scan() {
        let ix =
            doc! {"stage": "IXSCAN", "isMultiKey": true, "nReturned": 2_i64, "keysExamined": 3_i64};
        let f =
            doc! {"stage": "FETCH", "nReturned": 1_i64, "docsExamined": 2_i64, "inputStage": ix};
        let (d, works) = count_access(f, true, 1, 0);
        assert_eq!(works, 4);
        let ix = d.get_document("inputStage").unwrap();
        assert_eq!(ix.get_i64("dupsDropped").unwrap(), 1);
        assert_eq!(ix.get_i64("seeks").unwrap(), 1);
        assert_eq!(d.get_i64("needTime").unwrap(), 2);
    }

    #[test]
    fn stages_above_the_access_path_count_what_each_passes_on() {
        let scan = doc! {"stage": "COLLSCAN", "nReturned": 90_i64, "docsExamined": 100_i64};
        let (scan, _) = count_access(scan, true, 0, 0);
        let sort = doc! {"stage": "SORT", "limitAmount": 7_i64, "inputStage": scan};
        let skip = doc! {"stage": "SKIP", "skipAmount": 2_i64, "inputStage": sort};
        let limit = doc! {"stage": "LIMIT", "limitAmount": 5_i64, "inputStage": skip};
        let root = doc! {"stage": "PROJECTION_SIMPLE", "inputStage": limit};
        let (d, works, n, eof) = count_wrappers(root, 0);
        assert_eq!((n, eof), (5, true));
        let limit = d.get_document("inputStage").unwrap();
        let skip = limit.get_document("inputStage").unwrap();
        let sort = skip.get_document("inputStage").unwrap();
        assert_eq!(sort.get_i64("nReturned").unwrap(), 7);
        // 101 works of the scan, 7 returns, one end.
        assert_eq!(sort.get_i64("works").unwrap(), 109);
        assert_eq!(skip.get_i64("nReturned").unwrap(), 5);
        assert_eq!(limit.get_i64("works").unwrap(), 110);
        assert_eq!(works, 110);
        assert_eq!(d.get_i64("advanced").unwrap(), 5);
    }
}
