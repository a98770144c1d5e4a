//! Time-series collections through the Rust driver: create options and their errors,
//! listCollections, insert validation, bucketing into system.buckets, reads through the
//! view, drop, and durability of acknowledged measurements across `kill -9`.

use crate::common::*;
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;

/// Creates time-series collection `name` with the `timeseries` options `spec`.
async fn create_ts(db: &mongodb::Database, name: &str, spec: Document) {
    run_ok(db, doc! {"create": name, "timeseries": spec}).await;
}

/// The listCollections entry of `name`.
async fn collection_info(db: &mongodb::Database, name: &str) -> Document {
    let reply = run_ok(db, doc! {"listCollections": 1, "filter": {"name": name}}).await;
    let batch = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    batch[0].as_document().unwrap().clone()
}

#[tokio::test]
async fn create_fills_defaults_and_list_collections_shows_view_and_buckets() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_create");
    run_ok(&db, doc! {"create": "w", "timeseries": {"timeField": "t", "metaField": "m", "granularity": "minutes"}, "expireAfterSeconds": 3600_i64}).await;
    create_ts(&db, "s", doc! {"timeField": "t"}).await;
    create_ts(
        &db,
        "f",
        doc! {"timeField": "t", "bucketMaxSpanSeconds": 600, "bucketRoundingSeconds": 600},
    )
    .await;
    let reply = run_ok(&db, doc! {"listCollections": 1}).await;
    let batch = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let entry = |name: &str| -> Document {
        batch
            .iter()
            .filter_map(Bson::as_document)
            .find(|d| d.get_str("name").unwrap() == name)
            .unwrap_or_else(|| panic!("{name} missing from {batch:?}"))
            .clone()
    };
    let w = entry("w");
    assert_eq!(w.get_str("type").unwrap(), "timeseries");
    let opts = w.get_document("options").unwrap();
    assert_eq!(
        opts.get_document("timeseries").unwrap(),
        &doc! {"timeField": "t", "metaField": "m", "granularity": "minutes", "bucketMaxSpanSeconds": 86400}
    );
    assert_eq!(num(opts, "expireAfterSeconds"), 3600);
    assert_eq!(
        entry("s")
            .get_document("options")
            .unwrap()
            .get_document("timeseries")
            .unwrap(),
        &doc! {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}
    );
    assert_eq!(
        entry("f")
            .get_document("options")
            .unwrap()
            .get_document("timeseries")
            .unwrap(),
        &doc! {"timeField": "t", "bucketRoundingSeconds": 600, "bucketMaxSpanSeconds": 600}
    );
    let buckets = entry("system.buckets.w");
    assert_eq!(buckets.get_str("type").unwrap(), "collection");
    assert!(buckets
        .get_document("options")
        .unwrap()
        .get_bool("clusteredIndex")
        .unwrap());
}

#[tokio::test]
async fn create_twice_and_invalid_options_get_mongodb_errors() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_errors");
    let spec = doc! {"timeField": "t", "metaField": "m"};
    run_ok(&db, doc! {"create": "c", "timeseries": spec.clone()}).await;
    run_ok(&db, doc! {"create": "c", "timeseries": spec}).await;
    assert_cmd_error(
        &db,
        doc! {"create": "c", "timeseries": {"timeField": "t", "metaField": "x"}},
        48,
        Some("NamespaceExists"),
    )
    .await;
    assert_cmd_error(&db, doc! {"create": "c"}, 48, Some("NamespaceExists")).await;
    db.collection::<Document>("regular")
        .insert_one(doc! {"a": 1})
        .await
        .unwrap();
    assert_cmd_error(
        &db,
        doc! {"create": "regular", "timeseries": {"timeField": "t"}},
        48,
        Some("NamespaceExists"),
    )
    .await;
    let cases = [
        (doc! {"metaField": "m"}, 40414),
        (doc! {"timeField": 1}, 14),
        (doc! {"timeField": "t", "metaField": "_id"}, 72),
        (doc! {"timeField": "t", "metaField": "t"}, 72),
        (doc! {"timeField": "a.b"}, 72),
        (doc! {"timeField": "t", "granularity": "days"}, 2),
        (doc! {"timeField": "t", "bucketMaxSpanSeconds": 100}, 72),
        (
            doc! {"timeField": "t", "bucketMaxSpanSeconds": 100, "bucketRoundingSeconds": 50},
            72,
        ),
        (
            doc! {"timeField": "t", "granularity": "hours", "bucketRoundingSeconds": 86400},
            72,
        ),
        (doc! {"timeField": "t", "unknown": 1}, 40415),
    ];
    for (spec, code) in cases {
        assert_cmd_error(&db, doc! {"create": "bad", "timeseries": spec}, code, None).await;
    }
    assert_cmd_error(
        &db,
        doc! {"create": "bad", "timeseries": {"timeField": "t"}, "capped": true},
        72,
        Some("InvalidOptions"),
    )
    .await;
    assert_cmd_error(
        &db,
        doc! {"create": "bad", "timeseries": {"timeField": "t"}, "expireAfterSeconds": -1},
        72,
        Some("InvalidOptions"),
    )
    .await;
    assert_cmd_error(
        &db,
        doc! {"create": "bad2", "expireAfterSeconds": 10},
        72,
        Some("InvalidOptions"),
    )
    .await;
    let names = db.list_collection_names().await.unwrap();
    assert!(!names.iter().any(|n| n.contains("bad")), "{names:?}");
}

#[tokio::test]
async fn measurements_missing_or_bad_time_are_rejected_individually() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_insert");
    create_ts(&db, "c", doc! {"timeField": "t", "metaField": "m"}).await;
    let docs = vec![
        doc! {"t": at(0), "m": 1, "v": 1},
        doc! {"m": 1, "v": 2},
        doc! {"t": "yesterday", "m": 1},
        doc! {"t": at(1), "m": 1, "v": 3},
    ];
    let reply = db
        .run_command(doc! {"insert": "c", "documents": docs.clone(), "ordered": false})
        .await
        .unwrap();
    assert_eq!(num(&reply, "n"), 2);
    let errors = reply.get_array("writeErrors").unwrap();
    let got: Vec<(i64, i64)> = errors
        .iter()
        .filter_map(Bson::as_document)
        .map(|e| (num(e, "index"), num(e, "code")))
        .collect();
    assert_eq!(got, vec![(1, 2), (2, 2)]);
    let msg = errors[0].as_document().unwrap().get_str("errmsg").unwrap();
    assert!(
        msg.contains("'t' must be present and contain a valid BSON UTC datetime value"),
        "{msg}"
    );
    let reply = db
        .run_command(doc! {"insert": "c", "documents": docs, "ordered": true})
        .await
        .unwrap();
    assert_eq!(
        num(&reply, "n"),
        1,
        "ordered stops at the first bad measurement: {reply}"
    );
    let coll = db.collection::<Document>("c");
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 3);
}

#[tokio::test]
async fn measurements_are_bucketed_by_meta_and_count_and_read_back_through_the_view() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_buckets");
    create_ts(&db, "c", doc! {"timeField": "t", "metaField": "tag"}).await;
    let coll = db.collection::<Document>("c");
    // 2500 measurements of one series, one per second, with meta fields in both orders.
    let docs: Vec<Document> = (0..2500)
        .map(|i| {
            let tag = if i % 2 == 0 {
                doc! {"a": 1, "b": 2}
            } else {
                doc! {"b": 2, "a": 1}
            };
            doc! {"_id": i, "t": at(i), "tag": tag, "v": i as f64 * 0.25}
        })
        .collect();
    coll.insert_many(docs).await.unwrap();
    coll.insert_one(doc! {"_id": -1, "t": at(5), "tag": "other", "v": 1.0})
        .await
        .unwrap();
    let buckets = all(&db.collection::<Document>("system.buckets.c"), doc! {}).await;
    assert_eq!(
        buckets.len(),
        4,
        "3 buckets of the main series (1000+1000+500) and one other"
    );
    let main: Vec<&Document> = buckets
        .iter()
        .filter(|b| b.get_document("meta").is_ok())
        .collect();
    assert_eq!(main.len(), 3);
    for b in &main {
        assert_eq!(
            b.get_document("meta").unwrap(),
            &doc! {"a": 1, "b": 2},
            "meta is normalized"
        );
        let control = b.get_document("control").unwrap();
        let min_t = control
            .get_document("min")
            .unwrap()
            .get_datetime("t")
            .unwrap();
        assert_eq!(
            min_t.timestamp_millis() % 60_000,
            0,
            "min time rounded down to the minute"
        );
        let oid = b.get_object_id("_id").unwrap();
        assert_eq!(oid.timestamp().timestamp_millis(), min_t.timestamp_millis());
        assert!(b.get_document("data").unwrap().contains_key("v"));
    }
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 2501);
    let one = coll.find_one(doc! {"_id": 1234}).await.unwrap().unwrap();
    assert_eq!(one.get_datetime("t").unwrap(), &at(1234));
    assert_eq!(one.get_f64("v").unwrap(), 1234.0 * 0.25);
    assert_eq!(one.get_document("tag").unwrap(), &doc! {"a": 1, "b": 2});
    let high = all(&coll, doc! {"v": {"$gte": 600.0}}).await;
    assert_eq!(high.len(), 100);
    let agg: Vec<Document> = coll
        .aggregate(vec![
            doc! {"$match": {"tag": "other"}},
            doc! {"$project": {"_id": 1, "v": 1}},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(agg, vec![doc! {"_id": -1, "v": 1.0}]);
}

#[tokio::test]
async fn drop_removes_view_and_buckets() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_drop");
    create_ts(&db, "c", doc! {"timeField": "t"}).await;
    db.collection::<Document>("c")
        .insert_one(doc! {"t": at(0)})
        .await
        .unwrap();
    db.collection::<Document>("c").drop().await.unwrap();
    // As in MongoDB, system.views stays, without the collection's definition.
    assert_eq!(
        db.list_collection_names().await.unwrap(),
        vec!["system.views"]
    );
    assert_eq!(
        db.collection::<Document>("system.views")
            .count_documents(doc! {})
            .await
            .unwrap(),
        0
    );
    create_ts(&db, "c", doc! {"timeField": "t", "metaField": "m"}).await;
    assert_eq!(
        db.collection::<Document>("c")
            .count_documents(doc! {})
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn acknowledged_measurements_survive_kill_9() {
    let mut server = TestServer::start();
    {
        let client = server.client().await;
        let db = client.database("ts_kill");
        create_ts(&db, "c", doc! {"timeField": "t", "metaField": "host"}).await;
        let coll = db.collection::<Document>("c");
        let mut tasks = Vec::new();
        for h in 0..4 {
            let coll = coll.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..150 {
                    coll.insert_one(
                        doc! {"_id": h * 1000 + i, "t": at(i), "host": format!("h{h}"), "v": i},
                    )
                    .await
                    .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    }
    server.kill9();
    server.restart();
    let client = server.client().await;
    let coll = client.database("ts_kill").collection::<Document>("c");
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 600);
    // After restart the old buckets are closed; a measurement for the same hour reopens
    // its series' bucket instead of opening a new one.
    coll.insert_one(doc! {"_id": 9999, "t": at(1), "host": "h0", "v": 1})
        .await
        .unwrap();
    let buckets = client
        .database("ts_kill")
        .collection::<Document>("system.buckets.c")
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(buckets, 4);
    assert_eq!(
        coll.count_documents(doc! {"host": "h0"}).await.unwrap(),
        151
    );
}

async fn buckets_of(db: &mongodb::Database, coll: &str) -> Vec<Document> {
    all(
        &db.collection::<Document>(&format!("system.buckets.{coll}")),
        doc! {},
    )
    .await
}

fn min_time(bucket: &Document, field: &str) -> i64 {
    bucket
        .get_document("control")
        .unwrap()
        .get_document("min")
        .unwrap()
        .get_datetime(field)
        .unwrap()
        .timestamp_millis()
}

#[tokio::test]
async fn control_min_time_is_rounded_per_granularity_and_rounding_seconds() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_round");
    // 2026-01-01T05:37:29.123Z
    let t = DateTime::from_millis(T0 + ((5 * 60 + 37) * 60 + 29) * 1000 + 123);
    let cases = [
        (
            "sec",
            doc! {"timeField": "t", "granularity": "seconds"},
            T0 + (5 * 60 + 37) * 60_000,
        ),
        (
            "min",
            doc! {"timeField": "t", "granularity": "minutes"},
            T0 + 5 * 3_600_000,
        ),
        ("hrs", doc! {"timeField": "t", "granularity": "hours"}, T0),
        (
            "fix",
            doc! {"timeField": "t", "bucketMaxSpanSeconds": 900, "bucketRoundingSeconds": 900},
            T0 + (5 * 60 + 30) * 60_000,
        ),
    ];
    for (name, spec, expected) in cases {
        run_ok(&db, doc! {"create": name, "timeseries": spec}).await;
        db.collection::<Document>(name)
            .insert_one(doc! {"t": t, "x": 1})
            .await
            .unwrap();
        let b = buckets_of(&db, name).await;
        assert_eq!(b.len(), 1);
        assert_eq!(min_time(&b[0], "t"), expected, "{name}");
        assert_eq!(
            b[0].get_object_id("_id")
                .unwrap()
                .timestamp()
                .timestamp_millis(),
            expected,
            "{name}: bucket _id timestamp"
        );
    }
}

#[tokio::test]
async fn bucket_boundaries_follow_meta_count_and_span() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_bounds");
    create_ts(&db, "c", doc! {"timeField": "t", "metaField": "m"}).await;
    let coll = db.collection::<Document>("c");
    // 1001 measurements of meta "a" within the span: the 1001st opens a second bucket.
    let docs: Vec<Document> = (0..1001)
        .map(|i| doc! {"t": at(i % 600), "m": "a", "i": i})
        .collect();
    coll.insert_many(docs).await.unwrap();
    assert_eq!(buckets_of(&db, "c").await.len(), 2);
    // Another meta value: its own bucket.
    coll.insert_one(doc! {"t": at(0), "m": "b"}).await.unwrap();
    assert_eq!(buckets_of(&db, "c").await.len(), 3);
    // A measurement of meta "b" one hour after its bucket's min time: past the span.
    coll.insert_one(doc! {"t": at(3600), "m": "b"})
        .await
        .unwrap();
    assert_eq!(buckets_of(&db, "c").await.len(), 4);
    // A measurement of "b" within the span goes to the open bucket.
    coll.insert_one(doc! {"t": at(3601), "m": "b"})
        .await
        .unwrap();
    assert_eq!(buckets_of(&db, "c").await.len(), 4);
    // Schema change: field i changes type.
    coll.insert_one(doc! {"t": at(3602), "m": "b", "i": 1})
        .await
        .unwrap();
    coll.insert_one(doc! {"t": at(3603), "m": "b", "i": "one"})
        .await
        .unwrap();
    assert_eq!(buckets_of(&db, "c").await.len(), 5);

    let stats = run_ok(&db, doc! {"collStats": "c"}).await;
    let ts = stats.get_document("timeseries").unwrap();
    assert_eq!(
        ts.get_str("bucketsNs").unwrap(),
        "ts_bounds.system.buckets.c"
    );
    assert_eq!(num(ts, "bucketCount"), 5);
    assert_eq!(num(ts, "numBucketsClosedDueToCount"), 1);
    assert_eq!(num(ts, "numBucketsClosedDueToTimeForward"), 1);
    assert_eq!(num(ts, "numBucketsClosedDueToSchemaChange"), 1);
    assert_eq!(num(ts, "numBucketInserts"), 5);
}

#[tokio::test]
async fn collstats_counts_2500_measurements_of_one_series_as_three_buckets() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_stats");
    create_ts(&db, "c", doc! {"timeField": "t", "metaField": "m"}).await;
    let docs: Vec<Document> = (0..2500)
        .map(|i| doc! {"t": at(i), "m": 7, "v": i})
        .collect();
    db.collection::<Document>("c")
        .insert_many(docs)
        .await
        .unwrap();
    let reply: Vec<Document> = db
        .collection::<Document>("c")
        .aggregate(vec![doc! {"$collStats": {"storageStats": {}}}])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let ts = reply[0]
        .get_document("storageStats")
        .unwrap()
        .get_document("timeseries")
        .unwrap();
    assert_eq!(num(ts, "bucketCount"), 3);
    assert_eq!(num(ts, "numBucketsClosedDueToCount"), 2);
    assert!(num(ts, "numMeasurementsCommitted") >= 2500, "{ts}");
}

#[tokio::test]
async fn every_bson_type_round_trips_as_field_and_as_meta() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_types");
    create_ts(&db, "c", doc! {"timeField": "t", "metaField": "m"}).await;
    let coll = db.collection::<Document>("c");
    let values: Vec<Bson> = vec![
        Bson::Double(1.5),
        Bson::String("s".into()),
        Bson::Document(doc! {"x": 1, "y": [1, 2]}),
        Bson::Array(vec![Bson::Int32(1), Bson::String("a".into())]),
        Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: vec![1, 2, 3],
        }),
        Bson::ObjectId(bson::oid::ObjectId::new()),
        Bson::Boolean(true),
        Bson::DateTime(at(99)),
        Bson::Null,
        Bson::RegularExpression(bson::Regex {
            pattern: "a.b".into(),
            options: "i".into(),
        }),
        Bson::Int32(-7),
        Bson::Timestamp(bson::Timestamp {
            time: 5,
            increment: 6,
        }),
        Bson::Int64(1 << 40),
        Bson::Decimal128("1.25".parse().unwrap()),
        Bson::MinKey,
        Bson::MaxKey,
        Bson::JavaScriptCode("x = 1".into()),
    ];
    for (i, v) in values.iter().enumerate() {
        let d = doc! {"t": at(i as i64), "m": v.clone(), "_id": i as i32, "f": v.clone()};
        coll.insert_one(d).await.unwrap();
    }
    for (i, v) in values.iter().enumerate() {
        let got = coll
            .find_one(doc! {"_id": i as i32})
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.get("f"), Some(v), "field of type {v:?}");
        assert_eq!(got.get("m"), Some(v), "meta of type {v:?}");
        assert_eq!(got.get_datetime("t").unwrap(), &at(i as i64));
    }
}

#[tokio::test]
async fn concurrent_inserters_lose_nothing_and_time_range_queries_prune_correctly() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_conc");
    create_ts(&db, "c", doc! {"timeField": "t", "metaField": "host"}).await;
    let coll = db.collection::<Document>("c");
    let mut tasks = Vec::new();
    for h in 0..8 {
        let coll = coll.clone();
        tasks.push(tokio::spawn(async move {
            for batch in 0..10 {
                let docs: Vec<Document> = (0..50)
                    .map(|i| {
                        let n = batch * 50 + i;
                        doc! {"t": at(n * 10), "host": h % 3, "w": h, "n": n}
                    })
                    .collect();
                coll.insert_many(docs).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 4000);
    for w in 0..8 {
        assert_eq!(coll.count_documents(doc! {"w": w}).await.unwrap(), 500);
    }
    // Times span 0..4990 s: more than one bucket per host; a range must find exactly
    // the measurements inside it, whichever buckets hold them.
    let range = doc! {"t": {"$gte": at(1000), "$lt": at(2000)}};
    assert_eq!(coll.count_documents(range.clone()).await.unwrap(), 8 * 100);
    let exact = doc! {"$and": [{"t": {"$gt": at(3990)}}, {"t": {"$lte": at(4000)}}]};
    assert_eq!(coll.count_documents(exact).await.unwrap(), 8);
}

#[tokio::test]
async fn clean_shutdown_closes_open_buckets_and_keeps_measurements() {
    let mut server = TestServer::start();
    {
        let client = server.client().await;
        let db = client.database("ts_clean");
        create_ts(&db, "c", doc! {"timeField": "t", "metaField": "m"}).await;
        let docs: Vec<Document> = (0..30)
            .map(|i| doc! {"t": at(i), "m": i % 3, "v": i})
            .collect();
        db.collection::<Document>("c")
            .insert_many(docs)
            .await
            .unwrap();
        client.shutdown().await;
    }
    server.stop();
    server.restart();
    let client = server.client().await;
    let db = client.database("ts_clean");
    assert_eq!(
        db.collection::<Document>("c")
            .count_documents(doc! {})
            .await
            .unwrap(),
        30
    );
    let buckets = buckets_of(&db, "c").await;
    assert_eq!(buckets.len(), 3);
    // Closed buckets come back from their compressed form with every measurement.
    for b in &buckets {
        let data = b.get_document("data").unwrap();
        assert_eq!(data.get_document("v").unwrap().len(), 10, "{b}");
    }
}

#[tokio::test]
async fn coll_mod_only_coarsens_granularity_and_sets_expire_after_seconds() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_collmod");
    create_ts(&db, "c", doc! {"timeField": "t", "metaField": "m"}).await;
    let coll = db.collection::<Document>("c");
    coll.insert_one(doc! {"t": at(90), "m": 1}).await.unwrap();
    run_ok(
        &db,
        doc! {"collMod": "c", "timeseries": {"granularity": "minutes"}},
    )
    .await;
    assert_cmd_error(
        &db,
        doc! {"collMod": "c", "timeseries": {"granularity": "seconds"}},
        72,
        Some("InvalidOptions"),
    )
    .await;
    run_ok(
        &db,
        doc! {"collMod": "c", "timeseries": {"granularity": "hours"}, "expireAfterSeconds": 600},
    )
    .await;
    assert_cmd_error(
        &db,
        doc! {"collMod": "c", "timeseries": {"granularity": "minutes"}},
        72,
        Some("InvalidOptions"),
    )
    .await;
    assert_cmd_error(
        &db,
        doc! {"collMod": "missing", "expireAfterSeconds": 1},
        26,
        Some("NamespaceNotFound"),
    )
    .await;
    let entry = collection_info(&db, "c").await;
    let opts = entry.get_document("options").unwrap();
    assert_eq!(
        opts.get_document("timeseries").unwrap(),
        &doc! {"timeField": "t", "metaField": "m", "granularity": "hours", "bucketMaxSpanSeconds": 2592000}
    );
    assert_eq!(num(opts, "expireAfterSeconds"), 600);
    // New buckets follow the new granularity: min time rounded down to the day.
    coll.insert_one(doc! {"t": at(7200), "m": 2}).await.unwrap();
    let newest = buckets_of(&db, "c")
        .await
        .into_iter()
        .find(|b| b.get("meta") == Some(&Bson::Int32(2)))
        .unwrap();
    assert_eq!(min_time(&newest, "t"), T0);
    run_ok(&db, doc! {"collMod": "c", "expireAfterSeconds": "off"}).await;
    let entry = collection_info(&db, "c").await;
    assert!(!entry
        .get_document("options")
        .unwrap()
        .contains_key("expireAfterSeconds"));
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 2);
}
