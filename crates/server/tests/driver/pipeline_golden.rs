//! Golden aggregation tests through the Rust driver: the same documents go into a
//! regular collection (`reg`) and a time-series collection (`ts`, timeField `t`,
//! metaField `m`); each pipeline must give the same output on both, equal to the
//! expected output written here. Also the cross-collection stages, error codes and
//! the blocking-stage memory limit.

use crate::common::*;
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use mongodb::Database;

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z, a Thursday
const HOUR: i64 = 3_600_000;

fn at(ms: i64) -> DateTime {
    DateTime::from_millis(T0 + ms)
}

fn sample() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "t": at(0), "m": "a", "v": 10, "s": " Hi "},
        doc! {"_id": 2, "t": at(HOUR), "m": "a", "v": 20, "s": "hello"},
        doc! {"_id": 3, "t": at(3 * HOUR), "m": "a", "v": 40},
        doc! {"_id": 4, "t": at(HOUR / 2), "m": "b", "v": 5, "s": "b1"},
        doc! {"_id": 5, "t": at(2 * HOUR), "m": "b", "v": 15, "s": "b2"},
        doc! {"_id": 6, "t": at(HOUR), "m": "b"},
    ]
}

/// Starts a server with `reg` and `ts` holding [`sample`].
async fn setup() -> (TestServer, Database) {
    let server = TestServer::start();
    let db = server.client().await.database("golden");
    run_ok(
        &db,
        doc! {"create": "ts", "timeseries": {"timeField": "t", "metaField": "m"}},
    )
    .await;
    for coll in ["reg", "ts"] {
        db.collection::<Document>(coll)
            .insert_many(sample())
            .await
            .unwrap();
    }
    (server, db)
}

/// Sorts the keys of every (nested) document, so that field order does not matter.
fn normalize(v: Bson) -> Bson {
    match v {
        Bson::Document(d) => Bson::Document(normalize_doc(d)),
        Bson::Array(a) => Bson::Array(a.into_iter().map(normalize).collect()),
        other => other,
    }
}

fn normalize_doc(d: Document) -> Document {
    let mut pairs: Vec<(String, Bson)> = d.into_iter().map(|(k, v)| (k, normalize(v))).collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    pairs.into_iter().collect()
}

async fn agg(
    db: &Database,
    coll: &str,
    pipeline: &[Document],
) -> Result<Vec<Document>, mongodb::error::Error> {
    db.collection::<Document>(coll)
        .aggregate(pipeline.to_vec())
        .await?
        .try_collect()
        .await
}

/// Runs `pipeline` on both collections; both outputs must equal `expected`.
async fn golden(db: &Database, pipeline: Vec<Document>, expected: Vec<Document>) {
    let expected: Vec<Document> = expected.into_iter().map(normalize_doc).collect();
    let mut outs = Vec::new();
    for coll in ["reg", "ts"] {
        let out = agg(db, coll, &pipeline)
            .await
            .unwrap_or_else(|e| panic!("{coll}: pipeline {pipeline:?} failed: {e}"));
        let out: Vec<Document> = out.into_iter().map(normalize_doc).collect();
        assert_eq!(out, expected, "{coll}: pipeline {pipeline:?}");
        outs.push(out);
    }
    assert_eq!(outs[0], outs[1]);
}

async fn agg_error(db: &Database, coll: &str, pipeline: Vec<Document>) -> (i32, String) {
    error_of(coll, &pipeline, agg(db, coll, &pipeline).await)
}

/// [`agg_error`] with the command's `allowDiskUse`.
async fn agg_error_with(
    db: &Database,
    coll: &str,
    pipeline: Vec<Document>,
    allow_disk_use: bool,
) -> (i32, String) {
    let out = async {
        db.collection::<Document>(coll)
            .aggregate(pipeline.clone())
            .allow_disk_use(allow_disk_use)
            .await?
            .try_collect::<Vec<Document>>()
            .await
    };
    error_of(coll, &pipeline, out.await)
}

fn error_of(
    coll: &str,
    pipeline: &[Document],
    out: Result<Vec<Document>, mongodb::error::Error>,
) -> (i32, String) {
    match out {
        Ok(out) => panic!("{coll}: pipeline {pipeline:?} should fail, got {out:?}"),
        Err(e) => (
            err_code(&e).unwrap_or(-1),
            err_code_name(&e).unwrap_or_default(),
        ),
    }
}

#[tokio::test]
async fn date_string_array_math_and_conversion_expressions() {
    let (_s, db) = setup().await;
    let pipeline = vec![
        doc! {"$project": {
            "hour": {"$dateTrunc": {"date": "$t", "unit": "hour"}},
            "bin45": {"$dateTrunc": {"date": "$t", "unit": "minute", "binSize": 45}},
            "local": {"$dateToString": {"date": "$t", "format": "%Y-%m-%d %H:%M", "timezone": "America/New_York"}},
            "h": {"$hour": {"date": "$t", "timezone": "+05:30"}},
            "plus": {"$dateAdd": {"startDate": "$t", "unit": "month", "amount": 1}},
            "diff": {"$dateDiff": {"startDate": at(0), "endDate": "$t", "unit": "minute"}},
            "dow": {"$isoDayOfWeek": "$t"},
            "wk": {"$isoWeek": "$t"},
            "up": {"$toUpper": "$s"},
            "trim": {"$trim": {"input": "$s"}},
            "dbl": {"$multiply": ["$v", 2]},
            "str": {"$toString": "$v"},
            "cond": {"$cond": [{"$gte": ["$v", 15]}, "hi", "lo"]},
            "ifn": {"$ifNull": ["$v", -1]},
            "arr": {"$slice": [{"$range": [0, {"$ifNull": ["$v", 0]}, 10]}, 2]},
            "sw": {"$switch": {"branches": [{"case": {"$eq": ["$m", "a"]}, "then": 1}], "default": 2}},
            "conv": {"$convert": {"input": "$s", "to": "int", "onError": "bad", "onNull": "none"}},
            "rnd": {"$round": [{"$divide": ["$v", 3]}, 1]},
        }},
        doc! {"$sort": {"_id": 1}},
    ];
    let row = |id: i32, ms: i64, local: &str, h: i32, s: Option<&str>, v: Option<i32>, m: &str| {
        let bin = T0 + (ms / (45 * 60_000)) * 45 * 60_000;
        let vb = |f: fn(i32) -> Bson| v.map(f).unwrap_or(Bson::Null);
        doc! {
            "_id": id,
            "hour": at(ms - ms % HOUR),
            "bin45": DateTime::from_millis(bin),
            "local": local,
            "h": h,
            "plus": DateTime::from_millis(T0 + 31 * 24 * HOUR + ms),
            "diff": ms / 60_000,
            "dow": 4,
            "wk": 1,
            "up": s.map(|x| x.to_uppercase()).unwrap_or_default(),
            "trim": s.map(|x| Bson::String(x.trim().to_string())).unwrap_or(Bson::Null),
            "dbl": vb(|x| Bson::Int32(x * 2)),
            "str": vb(|x| Bson::String(x.to_string())),
            "cond": if v.unwrap_or(0) >= 15 { "hi" } else { "lo" },
            "ifn": v.unwrap_or(-1),
            "arr": (0..v.unwrap_or(0)).step_by(10).take(2).map(Bson::Int32).collect::<Vec<_>>(),
            "sw": if m == "a" { 1 } else { 2 },
            "conv": if s.is_some() { "bad" } else { "none" },
            "rnd": vb(|x| Bson::Double((f64::from(x) / 3.0 * 10.0).round() / 10.0)),
        }
    };
    golden(
        &db,
        pipeline,
        vec![
            row(1, 0, "2025-12-31 19:00", 5, Some(" Hi "), Some(10), "a"),
            row(2, HOUR, "2025-12-31 20:00", 6, Some("hello"), Some(20), "a"),
            row(3, 3 * HOUR, "2025-12-31 22:00", 8, None, Some(40), "a"),
            row(4, HOUR / 2, "2025-12-31 19:30", 6, Some("b1"), Some(5), "b"),
            row(
                5,
                2 * HOUR,
                "2025-12-31 21:00",
                7,
                Some("b2"),
                Some(15),
                "b",
            ),
            row(6, HOUR, "2025-12-31 20:00", 6, None, None, "b"),
        ],
    )
    .await;
}

#[tokio::test]
async fn group_accumulators() {
    let (_s, db) = setup().await;
    let pipeline = vec![
        doc! {"$sort": {"t": 1, "_id": 1}},
        doc! {"$group": {
            "_id": "$m",
            "sum": {"$sum": "$v"}, "avg": {"$avg": "$v"}, "min": {"$min": "$v"}, "max": {"$max": "$v"},
            "first": {"$first": "$v"}, "last": {"$last": "$v"}, "push": {"$push": "$v"},
            "set": {"$addToSet": "$m"}, "n": {"$count": {}}, "sd": {"$stdDevPop": "$v"},
            "top": {"$top": {"output": "$_id", "sortBy": {"v": -1}}},
            "botN": {"$bottomN": {"output": "$v", "sortBy": {"v": 1}, "n": 2}},
            "firstN": {"$firstN": {"input": "$_id", "n": 2}},
            "maxN": {"$maxN": {"input": "$v", "n": 2}},
            "med": {"$median": {"input": "$v", "method": "approximate"}},
            "pct": {"$percentile": {"input": "$v", "p": [0.5, 0.9], "method": "approximate"}},
            "mo": {"$mergeObjects": {"k": "$s"}},
        }},
        doc! {"$set": {"sd": {"$round": ["$sd", 4]}, "avg": {"$round": ["$avg", 4]}}},
        doc! {"$sort": {"_id": 1}},
    ];
    golden(
        &db,
        pipeline,
        vec![
            doc! {"_id": "a", "sum": 70, "avg": 23.3333, "min": 10, "max": 40, "first": 10, "last": 40,
                "push": [10, 20, 40], "set": ["a"], "n": 3, "sd": 12.4722, "top": 3, "botN": [20, 40],
                "firstN": [1, 2], "maxN": [40, 20], "med": 20.0, "pct": [20.0, 40.0], "mo": {"k": "hello"}},
            doc! {"_id": "b", "sum": 20, "avg": 10.0, "min": 5, "max": 15, "first": 5, "last": 15,
                "push": [5, 15], "set": ["b"], "n": 3, "sd": 5.0, "top": 5, "botN": [5, 15],
                "firstN": [4, 6], "maxN": [15, 5], "med": 5.0, "pct": [5.0, 15.0], "mo": {"k": "b2"}},
        ],
    )
    .await;
}

#[tokio::test]
async fn bucket_facet_sample_densify_fill_redact() {
    let (_s, db) = setup().await;
    golden(
        &db,
        vec![
            doc! {"$sort": {"_id": 1}},
            doc! {"$bucket": {"groupBy": "$v", "boundaries": [0, 10, 30], "default": "other",
            "output": {"n": {"$sum": 1}, "ids": {"$push": "$_id"}}}},
        ],
        vec![
            doc! {"_id": 0, "n": 1, "ids": [4]},
            doc! {"_id": 10, "n": 3, "ids": [1, 2, 5]},
            doc! {"_id": "other", "n": 2, "ids": [3, 6]},
        ],
    )
    .await;
    golden(
        &db,
        vec![doc! {"$bucketAuto": {"groupBy": "$_id", "buckets": 3}}],
        vec![
            doc! {"_id": {"min": 1, "max": 3}, "count": 2},
            doc! {"_id": {"min": 3, "max": 5}, "count": 2},
            doc! {"_id": {"min": 5, "max": 6}, "count": 2},
        ],
    )
    .await;
    golden(
        &db,
        vec![
            doc! {"$match": {"v": {"$exists": true}}},
            doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "1-2-5",
            "output": {"n": {"$sum": 1}, "avg": {"$avg": "$v"}}}},
        ],
        vec![
            doc! {"_id": {"min": 2.0, "max": 20.0}, "n": 3, "avg": 10.0},
            doc! {"_id": {"min": 20.0, "max": 50.0}, "n": 2, "avg": 30.0},
        ],
    )
    .await;
    golden(
        &db,
        vec![doc! {"$facet": {
            "cnt": [{"$count": "n"}],
            "byM": [{"$group": {"_id": "$m", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
        }}],
        vec![doc! {"cnt": [{"n": 6}], "byM": [{"_id": "a", "n": 3}, {"_id": "b", "n": 3}]}],
    )
    .await;
    golden(
        &db,
        vec![doc! {"$sample": {"size": 4}}, doc! {"$count": "n"}],
        vec![doc! {"n": 4}],
    )
    .await;
    let dens = |m: &str, ms: i64| doc! {"m": m, "t": at(ms)};
    golden(
        &db,
        vec![
            doc! {"$project": {"_id": 0, "t": 1, "m": 1}},
            doc! {"$densify": {"field": "t", "partitionByFields": ["m"],
            "range": {"step": 1, "unit": "hour", "bounds": "partition"}}},
            doc! {"$sort": {"m": 1, "t": 1}},
        ],
        vec![
            dens("a", 0),
            dens("a", HOUR),
            dens("a", 2 * HOUR),
            dens("a", 3 * HOUR),
            dens("b", HOUR / 2),
            dens("b", HOUR),
            dens("b", 3 * HOUR / 2),
            dens("b", 2 * HOUR),
        ],
    )
    .await;
    golden(
        &db,
        vec![
            doc! {"$project": {"_id": 0, "t": 1, "m": 1}},
            doc! {"$densify": {"field": "t", "partitionByFields": ["m"],
            "range": {"step": 1, "unit": "hour", "bounds": "full"}}},
            doc! {"$sort": {"m": 1, "t": 1}},
        ],
        vec![
            dens("a", 0),
            dens("a", HOUR),
            dens("a", 2 * HOUR),
            dens("a", 3 * HOUR),
            dens("b", 0),
            dens("b", HOUR / 2),
            dens("b", HOUR),
            dens("b", 2 * HOUR),
            dens("b", 3 * HOUR),
        ],
    )
    .await;
    golden(
        &db,
        vec![
            doc! {"$match": {"m": "b"}},
            doc! {"$project": {"_id": 0, "t": 1}},
            doc! {"$densify": {"field": "t", "range": {"step": 30, "unit": "minute", "bounds": [at(0), at(HOUR)]}}},
            doc! {"$sort": {"t": 1}},
        ],
        vec![
            doc! {"t": at(0)},
            doc! {"t": at(HOUR / 2)},
            doc! {"t": at(HOUR)},
            doc! {"t": at(2 * HOUR)},
        ],
    )
    .await;
    golden(
        &db,
        vec![
            doc! {"$project": {"m": 1, "t": 1, "v": 1, "s": 1}},
            doc! {"$fill": {"partitionByFields": ["m"], "sortBy": {"t": 1},
            "output": {"v": {"method": "locf"}, "s": {"value": "none"}}}},
            doc! {"$sort": {"_id": 1}},
        ],
        sample()
            .into_iter()
            .map(|mut d| {
                if d.get("v").is_none() {
                    d.insert("v", 5);
                }
                if d.get("s").is_none() {
                    d.insert("s", "none");
                }
                d
            })
            .collect(),
    )
    .await;
    golden(
        &db,
        vec![
            doc! {"$redact": {"$cond": [{"$eq": ["$m", "a"]}, "$$KEEP", "$$PRUNE"]}},
            doc! {"$count": "n"},
        ],
        vec![doc! {"n": 3}],
    )
    .await;
}

#[tokio::test]
async fn set_window_fields_functions() {
    let (_s, db) = setup().await;
    // `_id: 6` has no `v`: $derivative and $integral fail on a missing input (5624903,
    // 5423900), so it counts as 0 here.
    let pipeline = vec![
        doc! {"$set": {"v": {"$ifNull": ["$v", 0]}}},
        doc! {"$setWindowFields": {"partitionBy": "$m", "sortBy": {"t": 1}, "output": {
            "run": {"$sum": "$v", "window": {"documents": ["unbounded", "current"]}},
            "rank": {"$rank": {}},
            "prev": {"$shift": {"output": "$_id", "by": -1, "default": 0}},
            "last2h": {"$sum": "$v", "window": {"range": [-2, 0], "unit": "hour"}},
            "rate": {"$derivative": {"input": "$v", "unit": "hour"}, "window": {"documents": [-1, 0]}},
            "ema": {"$expMovingAvg": {"input": "$v", "alpha": 0.5}},
            "area": {"$integral": {"input": "$v", "unit": "hour"}, "window": {"documents": ["unbounded", "current"]}},
            "n": {"$count": {}, "window": {"documents": ["unbounded", "unbounded"]}},
        }}},
        doc! {"$project": {"run": 1, "rank": 1, "prev": 1, "last2h": 1, "rate": 1, "ema": 1, "area": 1, "n": 1}},
        doc! {"$sort": {"_id": 1}},
    ];
    let row = |id: i32,
               run: i32,
               rank: i32,
               prev: i32,
               last2h: i32,
               rate: Bson,
               ema: Bson,
               area: f64| {
        doc! {"_id": id, "run": run, "rank": rank, "prev": prev, "last2h": last2h, "rate": rate, "ema": ema, "area": area, "n": 3}
    };
    // A slope is the rise over the run in milliseconds, times the unit's milliseconds.
    let h = HOUR as f64;
    let slope = |rise: f64, run: f64| Bson::Double(rise / run * h);
    golden(
        &db,
        pipeline,
        vec![
            row(1, 10, 1, 0, 10, Bson::Null, Bson::Double(10.0), 0.0),
            row(2, 30, 2, 1, 30, slope(10.0, h), Bson::Double(15.0), 15.0),
            row(
                3,
                70,
                3,
                2,
                60,
                slope(20.0, 2.0 * h),
                Bson::Double(27.5),
                75.0,
            ),
            row(4, 5, 1, 0, 5, Bson::Null, Bson::Double(5.0), 0.0),
            row(5, 20, 3, 6, 20, slope(15.0, h), Bson::Double(8.75), 8.75),
            row(6, 5, 2, 4, 5, slope(-5.0, h / 2.0), Bson::Double(2.5), 1.25),
        ],
    )
    .await;
}

async fn sorted_find(db: &Database, coll: &str) -> Vec<Document> {
    db.collection::<Document>(coll)
        .find(doc! {})
        .sort(doc! {"_id": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn lookup_union_with_out_and_merge() {
    let (_s, db) = setup().await;
    db.collection::<Document>("names")
        .insert_many(vec![
            doc! {"_id": "a", "name": "Alpha"},
            doc! {"_id": "b", "name": "Beta"},
        ])
        .await
        .unwrap();
    golden(
        &db,
        vec![
            doc! {"$lookup": {"from": "names", "localField": "m", "foreignField": "_id", "as": "meta"}},
            doc! {"$project": {"nm": {"$first": "$meta.name"}}},
            doc! {"$sort": {"_id": 1}},
        ],
        (1..=6)
            .map(|i| doc! {"_id": i, "nm": if i <= 3 { "Alpha" } else { "Beta" }})
            .collect(),
    )
    .await;
    golden(
        &db,
        vec![
            doc! {"$match": {"_id": {"$in": [1, 4]}}},
            doc! {"$lookup": {"from": "names", "let": {"mm": "$m"}, "pipeline": [
                {"$match": {"$expr": {"$eq": ["$_id", "$$mm"]}}}, {"$project": {"_id": 0, "name": 1}}], "as": "meta"}},
            doc! {"$project": {"meta": 1}},
            doc! {"$sort": {"_id": 1}},
        ],
        vec![doc! {"_id": 1, "meta": [{"name": "Alpha"}]}, doc! {"_id": 4, "meta": [{"name": "Beta"}]}],
    )
    .await;
    golden(
        &db,
        vec![
            doc! {"$project": {"_id": 1}},
            doc! {"$unionWith": {"coll": "names", "pipeline": [{"$project": {"_id": 1}}]}},
            doc! {"$sort": {"_id": 1}},
        ],
        vec![
            doc! {"_id": 1},
            doc! {"_id": 2},
            doc! {"_id": 3},
            doc! {"_id": 4},
            doc! {"_id": 5},
            doc! {"_id": 6},
            doc! {"_id": "a"},
            doc! {"_id": "b"},
        ],
    )
    .await;
    // $lookup from a regular collection into the time-series one and the regular one.
    for from in ["ts", "reg"] {
        let out = agg(
            &db,
            "names",
            &[
                doc! {"$lookup": {"from": from, "localField": "_id", "foreignField": "m", "as": "pts",
                    "pipeline": [{"$match": {"v": {"$gte": 10}}}]}},
                doc! {"$project": {"n": {"$size": "$pts"}}},
                doc! {"$sort": {"_id": 1}},
            ],
        )
        .await
        .unwrap();
        assert_eq!(
            out,
            vec![doc! {"_id": "a", "n": 3}, doc! {"_id": "b", "n": 1}],
            "from {from}"
        );
    }
    // $out from both collections gives the same new collection.
    for coll in ["reg", "ts"] {
        let target = format!("out_{coll}");
        let out = agg(
            &db,
            coll,
            &[
                doc! {"$match": {"m": "a"}},
                doc! {"$project": {"v": 1}},
                doc! {"$out": &target},
            ],
        )
        .await
        .unwrap();
        assert!(out.is_empty());
        assert_eq!(
            sorted_find(&db, &target).await,
            vec![
                doc! {"_id": 1, "v": 10},
                doc! {"_id": 2, "v": 20},
                doc! {"_id": 3, "v": 40}
            ]
        );
    }
    // $out replaces earlier contents.
    agg(
        &db,
        "reg",
        &[
            doc! {"$match": {"_id": 5}},
            doc! {"$project": {"v": 1}},
            doc! {"$out": "out_reg"},
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        sorted_find(&db, "out_reg").await,
        vec![doc! {"_id": 5, "v": 15}]
    );
    // $merge into a seeded collection.
    for coll in ["reg", "ts"] {
        let target = format!("merged_{coll}");
        db.collection::<Document>(&target)
            .insert_one(doc! {"_id": 4, "old": 1})
            .await
            .unwrap();
        agg(
            &db,
            coll,
            &[
                doc! {"$match": {"m": "b"}},
                doc! {"$project": {"v": 1}},
                doc! {"$merge": {"into": &target, "whenMatched": "merge", "whenNotMatched": "insert"}},
            ],
        )
        .await
        .unwrap();
        assert_eq!(
            sorted_find(&db, &target).await,
            vec![
                doc! {"_id": 4, "old": 1, "v": 5},
                doc! {"_id": 5, "v": 15},
                doc! {"_id": 6}
            ]
        );
        let (code, _) = agg_error(
            &db,
            coll,
            vec![doc! {"$merge": {"into": &target, "whenMatched": "fail", "whenNotMatched": "discard"}}],
        )
        .await;
        assert_eq!(code, 11000);
    }
    // $merge into a time-series collection is refused; $out replaces its measurements
    // (MongoDB 7.0.3+).
    let (code, name) = agg_error(&db, "reg", vec![doc! {"$merge": {"into": "ts"}}]).await;
    assert_eq!((code, name.as_str()), (72, "InvalidOptions"));
    agg(&db, "reg", &[doc! {"$out": "ts"}]).await.unwrap();
    let count = |c: &'static str| {
        let db = db.clone();
        async move {
            db.collection::<Document>(c)
                .count_documents(doc! {})
                .await
                .unwrap()
        }
    };
    assert_eq!(count("ts").await, count("reg").await);
}

#[tokio::test]
async fn documents_stage_without_a_collection() {
    let (_s, db) = setup().await;
    let out: Vec<Document> = db
        .aggregate(vec![
            doc! {"$documents": [{"x": 1}, {"x": 2}]},
            doc! {"$project": {"_id": 0, "y": {"$add": ["$x", 1]}}},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(out, vec![doc! {"y": 2}, doc! {"y": 3}]);
}

#[tokio::test]
async fn errors_use_mongodb_codes() {
    let (_s, db) = setup().await;
    for coll in ["reg", "ts"] {
        let (code, name) = agg_error(&db, coll, vec![doc! {"$foo": 1}]).await;
        assert_eq!((code, name.as_str()), (40324, "Location40324"));
        let (code, _) = agg_error(&db, coll, vec![doc! {"$project": {"y": {"$year": "$m"}}}]).await;
        assert_eq!(code, 16006);
        let (code, _) = agg_error(
            &db,
            coll,
            vec![doc! {"$project": {"c": {"$concat": ["$m", "$v"]}}}],
        )
        .await;
        assert_eq!(code, 16702);
        let (code, _) = agg_error(
            &db,
            coll,
            vec![doc! {"$project": {"c": {"$dateToString": {"date": "$t", "format": "%Q"}}}}],
        )
        .await;
        assert_eq!(code, 18536);
        let (code, _) = agg_error(&db, coll, vec![doc! {"$project": {"c": {"$dateToString": {"date": "$t", "timezone": "Nowhere/Land"}}}}]).await;
        assert_eq!(code, 40485);
        let (code, name) =
            agg_error(&db, coll, vec![doc! {"$project": {"c": {"$bogus": 1}}}]).await;
        assert_eq!((code, name.as_str()), (168, "InvalidPipelineOperator"));
    }
}

#[tokio::test]
async fn blocking_stages_past_their_memory_limit_spill_unless_allow_disk_use_is_false() {
    let (_s, db) = setup().await;
    let admin = db.client().database("admin");
    run_ok(
        &admin,
        doc! {"setParameter": 1, "internalDocumentSourceGroupMaxMemoryBytes": 200},
    )
    .await;
    run_ok(
        &admin,
        doc! {"setParameter": 1, "internalQueryMaxBlockingSortMemoryUsageBytes": 200},
    )
    .await;
    let group = vec![
        doc! {"$group": {"_id": "$_id", "all": {"$push": "$$ROOT"}}},
        doc! {"$count": "n"},
    ];
    let sort = vec![doc! {"$sort": {"v": 1}}, doc! {"$count": "n"}];
    for p in [&group, &sort] {
        // MongoDB 7.0's default (allowDiskUseByDefault): the stage spills.
        golden(&db, p.clone(), vec![doc! {"n": 6}]).await;
        for coll in ["reg", "ts"] {
            let (code, name) = agg_error_with(&db, coll, p.clone(), false).await;
            assert_eq!(
                (code, name.as_str()),
                (292, "QueryExceededMemoryLimitNoDiskUseAllowed")
            );
        }
    }
    run_ok(
        &admin,
        doc! {"setParameter": 1, "internalDocumentSourceGroupMaxMemoryBytes": 104_857_600_i64},
    )
    .await;
    run_ok(
        &admin,
        doc! {"setParameter": 1, "internalQueryMaxBlockingSortMemoryUsageBytes": 104_857_600_i64},
    )
    .await;
}

#[tokio::test]
async fn every_projection_form_gives_the_same_documents_on_both_kinds() {
    let (_s, db) = setup().await;
    let one = |id: i32| sample().into_iter().find(|d| d.get_i32("_id") == Ok(id));
    let full4 = one(4).unwrap();
    let cases: Vec<(Document, Document)> = vec![
        // `{_id: 0}` alone excludes only `_id`: every measurement field stays.
        (doc! {"_id": 0}, {
            let mut d = full4.clone();
            d.remove("_id");
            d
        }),
        (doc! {"_id": 0, "v": 1}, doc! {"v": 5}),
        (doc! {"v": 1}, doc! {"_id": 4, "v": 5}),
        (
            doc! {"v": 0, "s": 0},
            doc! {"_id": 4, "t": at(HOUR / 2), "m": "b"},
        ),
        (doc! {"m": 1, "_id": 0}, doc! {"m": "b"}),
        (
            doc! {"_id": 0, "x": {"$add": ["$v", 1]}, "meta": "$m"},
            doc! {"x": 6, "meta": "b"},
        ),
    ];
    for (projection, expected) in cases {
        let expected = normalize_doc(expected);
        for coll in ["reg", "ts"] {
            let c = db.collection::<Document>(coll);
            let found = c
                .find_one(doc! {"_id": 4})
                .projection(projection.clone())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(normalize_doc(found), expected, "{coll}: find {projection}");
            let by_meta: Vec<Document> = c
                .find(doc! {"m": "b", "v": 5})
                .projection(projection.clone())
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            assert_eq!(
                by_meta.into_iter().map(normalize_doc).collect::<Vec<_>>(),
                vec![expected.clone()],
                "{coll}: find by meta {projection}"
            );
        }
        golden(
            &db,
            vec![doc! {"$match": {"_id": 4}}, doc! {"$project": projection}],
            vec![expected],
        )
        .await;
    }
}
