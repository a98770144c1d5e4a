//! The parts of the explain of a time-series read that follow mongod 7.0: the `$cursor`
//! stage reading `<db>.system.buckets.<coll>` (a COLLSCAN, or FETCH over the meta
//! index's IXSCAN, with the bucket-level filter the measurement filter implies) and the
//! `$_internalUnpackBucket` stage as mongod serializes it: `include`/`exclude` first,
//! then `timeField`, `metaField`, `bucketMaxSpanSeconds`, `assumeNoMixedSchemaData`,
//! `wholeBucketFilter` and `eventFilter` (the predicates on measurements; those on the
//! meta field go to the buckets' `meta` instead). Hourglass's own details of the scan
//! (`bucketFilter`, `vectorizedGroup`, its `executionStats` counters, ...) follow them.

use super::explain_counters::count_access;
use super::planned::parsed_query;
use super::query_shape_hash::{plan_cache_key, query_hash};
use bson::{doc, Bson, Document};
use hourglass_query::pipeline::deps::pipeline_fields;
use hourglass_timeseries::meta::is_meta_path;
use hourglass_timeseries::ScanCounters as C;
use hourglass_timeseries::{TimeseriesOptions, TsPlan};

/// The top-level conjuncts of a filter in the form explain prints them: `{a: {$eq: 1}}`
/// for a value, one conjunct per operator of a field (`{a: {$gt: 1, $lt: 5}}` is two),
/// the members of an `$and` in its place; other operators (`$or`, `$expr`, ...) whole.
pub(super) fn conjuncts(spec: &Document) -> Vec<Document> {
    let mut out = Vec::new();
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("$and", Bson::Array(items)) => {
                for item in items {
                    if let Bson::Document(d) = item {
                        out.extend(conjuncts(d));
                    }
                }
            }
            (k, Bson::Document(ops))
                if !k.starts_with('$') && ops.keys().next().is_some_and(|o| o.starts_with('$')) =>
            {
                out.extend(ops.iter().map(|(op, x)| doc! {k: {op: x.clone()}}));
            }
            (k, _) if k.starts_with('$') => out.push(doc! {k: v.clone()}),
            _ => out.push(parsed_query(Some(&doc! {k: v.clone()}))),
        }
    }
    out
}

/// One predicate, or their `$and`; none is no filter.
fn and_of(mut parts: Vec<Document>) -> Option<Document> {
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(doc! {"$and": parts}),
    }
}

/// A conjunct `{path: {op: value}}` as its parts.
fn comparison(c: &Document) -> Option<(&str, &str, &Bson)> {
    let (path, ops) = c.iter().next()?;
    let Bson::Document(ops) = ops else {
        return None;
    };
    let (op, v) = ops.iter().next()?;
    (c.len() == 1 && ops.len() == 1 && !path.starts_with('$')).then_some((path, op, v))
}

/// Whether the conjunct reads only the meta field (a predicate on the buckets' `meta`).
fn on_meta(c: &Document, meta: Option<&str>) -> bool {
    let Some(meta) = meta else {
        return false;
    };
    c.len() == 1 && c.keys().all(|k| is_meta_path(k, meta))
}

/// The filter split as mongod splits it for the unpacking: the predicates on the meta
/// field (renamed to the buckets' `meta`) and those on measurements (the event filter).
pub(super) struct Split {
    pub meta: Vec<Document>,
    pub event: Vec<Document>,
}

pub(super) fn split(spec: &Document, options: &TimeseriesOptions) -> Split {
    let meta_field = options.meta_field.as_deref();
    let (mut meta, mut event) = (Vec::new(), Vec::new());
    for c in conjuncts(spec) {
        let renamed = c
            .iter()
            .next()
            .filter(|_| on_meta(&c, meta_field))
            .map(|(k, v)| {
                let rest = &k[meta_field.unwrap_or_default().len()..];
                doc! {format!("meta{rest}"): v.clone()}
            });
        match renamed {
            Some(d) => meta.push(d),
            None => event.push(c),
        }
    }
    Split { meta, event }
}

/// A value a bucket's control min/max bound (a scalar compared within its type).
fn bounded(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Double(_)
            | Bson::Int32(_)
            | Bson::Int64(_)
            | Bson::Decimal128(_)
            | Bson::String(_)
            | Bson::DateTime(_)
            | Bson::Boolean(_)
            | Bson::ObjectId(_)
            | Bson::Timestamp(_)
    )
}

/// `d` moved by `ms` milliseconds.
fn shifted(d: &Bson, ms: i64) -> Bson {
    match d {
        Bson::DateTime(t) => Bson::DateTime(bson::DateTime::from_millis(
            t.timestamp_millis().saturating_add(ms),
        )),
        other => other.clone(),
    }
}

/// The predicates on the buckets' control fields implied by a measurement predicate
/// (mongod's `createPredicatesOnBucketLevelField` for a collection without mixed-schema
/// buckets): a bucket may hold a match only if its max (min) passes a lower (upper)
/// bound; the time field's min is also at most `bucketMaxSpanSeconds` before its max.
fn bucket_predicates(c: &Document, options: &TimeseriesOptions) -> Vec<Document> {
    let Some((path, op, v)) = comparison(c) else {
        return Vec::new();
    };
    if !bounded(v) {
        return Vec::new();
    }
    let (min, max) = (format!("control.min.{path}"), format!("control.max.{path}"));
    let span = options.bucket_max_span_seconds.saturating_mul(1000);
    let time = path == options.time_field && matches!(v, Bson::DateTime(_));
    let p = |field: &str, op: &str, x: Bson| doc! {field: {op: x}};
    match (op, time) {
        ("$gt" | "$gte", _) => {
            let op = if op == "$gt" {
                "$_internalExprGt"
            } else {
                "$_internalExprGte"
            };
            let mut out = vec![p(&max, op, v.clone())];
            if time {
                out.push(p(&min, op, shifted(v, -span)));
            }
            out
        }
        ("$lt" | "$lte", _) => {
            let op = if op == "$lt" {
                "$_internalExprLt"
            } else {
                "$_internalExprLte"
            };
            let mut out = vec![p(&min, op, v.clone())];
            if time {
                out.push(p(&max, op, shifted(v, span)));
            }
            out
        }
        ("$eq", false) => vec![
            p(&min, "$_internalExprLte", v.clone()),
            p(&max, "$_internalExprGte", v.clone()),
        ],
        ("$eq", true) => vec![
            p(&min, "$_internalExprLte", v.clone()),
            p(&min, "$_internalExprGte", shifted(v, -span)),
            p(&max, "$_internalExprGte", v.clone()),
            p(&max, "$_internalExprLte", shifted(v, span)),
        ],
        _ => Vec::new(),
    }
}

/// The filter the bucket scan applies: the meta predicates, then the control-field
/// predicates of the event filter.
pub(super) fn bucket_filter(s: &Split, options: &TimeseriesOptions) -> Option<Document> {
    let mut parts = s.meta.clone();
    for c in &s.event {
        parts.extend(bucket_predicates(c, options));
    }
    and_of(parts)
}

/// mongod's `wholeBucketFilter`: when every event predicate is a comparison of the time
/// field, the bucket predicate under which all its measurements match (its min after a
/// lower bound, its max before an upper bound, both for an equality).
fn whole_bucket_filter(event: &[Document], time_field: &str) -> Option<Document> {
    let mut parts = Vec::new();
    for c in event {
        let (path, op, v) = comparison(c)?;
        if path != time_field || !matches!(v, Bson::DateTime(_)) {
            return None;
        }
        let (min, max) = (format!("control.min.{path}"), format!("control.max.{path}"));
        match op {
            "$gt" | "$gte" => parts.push(doc! {min: {op: v.clone()}}),
            "$lt" | "$lte" => parts.push(doc! {max: {op: v.clone()}}),
            "$eq" => parts.push(doc! {"$and": [{min: {op: v.clone()}}, {max: {op: v.clone()}}]}),
            _ => return None,
        }
    }
    and_of(parts)
}

fn int(n: i64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

/// The `$_internalUnpackBucket` stage's spec; `after` are the stages after the unpacking.
pub(super) fn unpack_spec(
    options: &TimeseriesOptions,
    plan: &TsPlan,
    s: &Split,
    after: &[Document],
) -> Document {
    let mut d = match &plan.fields {
        Some(f) => {
            // The fields the scan decodes; the meta field (read from the bucket, not
            // decoded) is listed last when a later stage reads it, as mongod lists it.
            let mut fields = f.clone();
            if let Some(m) = &options.meta_field {
                let read = pipeline_fields(after).is_some_and(|r| r.contains(m));
                if read && !fields.contains(m) {
                    fields.push(m.clone());
                }
            }
            doc! {"include": fields}
        }
        // Every field: nothing excluded.
        None => doc! {"exclude": []},
    };
    d.insert("timeField", options.time_field.clone());
    if let Some(m) = &options.meta_field {
        d.insert("metaField", m.clone());
    }
    d.insert("bucketMaxSpanSeconds", int(options.bucket_max_span_seconds));
    // Every bucket holds one type per field's control min/max (Hourglass writes no
    // mixed-schema buckets), which mongod says so for collections created by 7.0.
    d.insert("assumeNoMixedSchemaData", true);
    if let Some(w) = whole_bucket_filter(&s.event, &options.time_field) {
        d.insert("wholeBucketFilter", w);
    }
    if let Some(e) = and_of(s.event.clone()) {
        d.insert("eventFilter", e);
    }
    d
}

/// The bucket access path: FETCH over the meta index's IXSCAN when the meta index chose
/// the buckets, else a COLLSCAN, with the bucket filter.
fn winning_plan(options: &TimeseriesOptions, s: &Split, index: bool) -> Document {
    let filter = bucket_filter(s, options);
    let filter = filter.as_ref();
    let time = &options.time_field;
    let Some(meta) = options.meta_field.as_ref().filter(|_| index) else {
        let mut d = doc! {"stage": "COLLSCAN"};
        if let Some(f) = filter {
            d.insert("filter", f.clone());
        }
        d.insert("direction", "forward");
        return d;
    };
    let key = doc! {"meta": 1, format!("control.min.{time}"): 1, format!("control.max.{time}"): 1};
    let all = || Bson::Array(vec![Bson::String("[MinKey, MaxKey]".into())]);
    let paths: Document = key
        .keys()
        .map(|k| (k.clone(), Bson::Array(Vec::new())))
        .collect();
    let mut bounds: Document = key.keys().map(|k| (k.clone(), all())).collect();
    // An equality on the whole meta value is the scan's bounds on `meta`, which then
    // answer it: the FETCH filters by the rest.
    let point = match s.meta.as_slice() {
        [c] => c
            .get_document("meta")
            .ok()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.get("$eq"))
            .filter(|v| bounded(v)),
        _ => None,
    };
    let rest;
    let filter = match point {
        Some(v) => {
            let p = show_bound(v);
            bounds.insert("meta", vec![Bson::String(format!("[{p}, {p}]"))]);
            let event = Split {
                meta: Vec::new(),
                event: s.event.clone(),
            };
            rest = bucket_filter(&event, options);
            rest.as_ref()
        }
        None => filter,
    };
    let ixscan = doc! {
        "stage": "IXSCAN",
        "keyPattern": key.clone(),
        "indexName": format!("{meta}_1_{time}_1"),
        "isMultiKey": false,
        "multiKeyPaths": paths,
        "isUnique": false,
        "isSparse": false,
        "isPartial": false,
        "indexVersion": 2,
        "direction": "forward",
        "indexBounds": bounds,
    };
    let mut fetch = doc! {"stage": "FETCH"};
    if let Some(f) = filter {
        fetch.insert("filter", f.clone());
    }
    fetch.insert("inputStage", ixscan);
    fetch
}

/// A value as mongod prints it in index bounds.
fn show_bound(v: &Bson) -> String {
    match v {
        Bson::String(s) => format!("\"{s}\""),
        Bson::DateTime(d) => format!("new Date({})", d.timestamp_millis()),
        other => other.to_string(),
    }
}

/// What the bucket scan did, for `executionStats`.
pub(super) struct ScanRun {
    pub millis: i64,
}

/// Buckets the scan looked at (pruned or returned; a bucket still open in memory is
/// looked at without its header being read) and returned.
fn buckets(counters: &C) -> (i64, i64) {
    let returned = C::get(&counters.buckets_returned) as i64;
    let seen = (C::get(&counters.buckets_pruned) as i64 + returned)
        .max(C::get(&counters.buckets_examined) as i64);
    (seen, returned)
}

/// The `$cursor` stage document (`{$cursor: {...}}`, with its counts when it ran).
pub(super) fn cursor_stage(
    namespace: String,
    options: &TimeseriesOptions,
    s: &Split,
    counters: &C,
    run: Option<&ScanRun>,
) -> Document {
    let filter = bucket_filter(s, options);
    let index = C::get(&counters.used_meta_index) > 0;
    let winning = winning_plan(options, s, index);
    let parsed = filter.clone().unwrap_or_default();
    let planner = doc! {
        "namespace": namespace,
        "indexFilterSet": false,
        "parsedQuery": parsed.clone(),
        "queryHash": query_hash(Some(&parsed), None, None),
        "planCacheKey": plan_cache_key(Some(&parsed), None, None, &[]),
        "maxIndexedOrSolutionsReached": false,
        "maxIndexedAndSolutionsReached": false,
        "maxScansToExplodeReached": false,
        "winningPlan": winning.clone(),
        "rejectedPlans": [],
    };
    let mut cursor = doc! {"queryPlanner": planner};
    let Some(run) = run else {
        return doc! {"$cursor": cursor};
    };
    let (seen, returned) = buckets(counters);
    let keys = if index { seen } else { 0 };
    let stages = with_scan_counts(winning, seen, returned);
    let (stages, _) = count_access(stages, true, 1, run.millis);
    cursor.insert(
        "executionStats",
        doc! {
            "executionSuccess": true,
            "nReturned": returned,
            "executionTimeMillis": run.millis,
            "totalKeysExamined": keys,
            "totalDocsExamined": seen,
            "executionStages": stages,
        },
    );
    super::explain_stages::with_counts(doc! {"$cursor": cursor}, returned as usize, run.millis)
}

/// The access path with the counts `count_access` derives its counters from.
fn with_scan_counts(mut stage: Document, seen: i64, returned: i64) -> Document {
    match stage.get_str("stage").unwrap_or_default() {
        "FETCH" => {
            if let Ok(ix) = stage.get_document_mut("inputStage") {
                ix.insert("nReturned", seen);
                ix.insert("keysExamined", seen);
            }
            let input = stage.remove("inputStage");
            stage.insert("nReturned", returned);
            stage.insert("docsExamined", seen);
            if let Some(input) = input {
                stage.insert("inputStage", input);
            }
        }
        _ => {
            stage.insert("nReturned", returned);
            stage.insert("docsExamined", seen);
        }
    }
    stage
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> TimeseriesOptions {
        let mut o = TimeseriesOptions::new("t", Some("m"));
        o.bucket_max_span_seconds = 3600;
        o
    }

    #[test]
    fn meta_predicates_go_to_the_buckets_and_the_rest_is_the_event_filter() {
        let s = split(&doc! {"v": {"$gt": 3, "$lt": 9}, "m.host": "a"}, &options());
        assert_eq!(s.meta, vec![doc! {"meta.host": {"$eq": "a"}}]);
        assert_eq!(
            s.event,
            vec![doc! {"v": {"$gt": 3}}, doc! {"v": {"$lt": 9}}]
        );
        let f = bucket_filter(&s, &options()).unwrap();
        assert_eq!(
            f,
            doc! {"$and": [
                {"meta.host": {"$eq": "a"}},
                {"control.max.v": {"$_internalExprGt": 3}},
                {"control.min.v": {"$_internalExprLt": 9}},
            ]}
        );
    }

    #[test]
    fn a_time_bound_gives_a_whole_bucket_filter_and_widens_by_the_span() {
        let d = bson::DateTime::from_millis(7_200_000);
        let s = split(&doc! {"t": {"$gte": d}}, &options());
        assert_eq!(
            whole_bucket_filter(&s.event, "t"),
            Some(doc! {"control.min.t": {"$gte": d}})
        );
        let f = bucket_filter(&s, &options()).unwrap();
        let early = bson::DateTime::from_millis(3_600_000);
        assert_eq!(
            f,
            doc! {"$and": [
                {"control.max.t": {"$_internalExprGte": d}},
                {"control.min.t": {"$_internalExprGte": early}},
            ]}
        );
        let s = split(&doc! {"t": {"$gte": d}, "v": 1}, &options());
        assert_eq!(whole_bucket_filter(&s.event, "t"), None);
    }
}
