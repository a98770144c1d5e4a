//! Time-series collections through the Rust driver: create options and their errors,
//! listCollections, insert validation, bucketing into system.buckets, reads through the
//! view, drop, and durability of acknowledged measurements across `kill -9`.

use crate::common::*;
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

fn at(secs: i64) -> DateTime {
    DateTime::from_millis(T0 + secs * 1000)
}

async fn all(coll: &mongodb::Collection<Document>, filter: Document) -> Vec<Document> {
    coll.find(filter)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn create_fills_defaults_and_list_collections_shows_view_and_buckets() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ts_create");
    run_ok(&db, doc! {"create": "w", "timeseries": {"timeField": "t", "metaField": "m", "granularity": "minutes"}, "expireAfterSeconds": 3600_i64}).await;
    run_ok(&db, doc! {"create": "s", "timeseries": {"timeField": "t"}}).await;
    run_ok(&db, doc! {"create": "f", "timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 600, "bucketRoundingSeconds": 600}}).await;
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
    run_ok(
        &db,
        doc! {"create": "c", "timeseries": {"timeField": "t", "metaField": "m"}},
    )
    .await;
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
    run_ok(
        &db,
        doc! {"create": "c", "timeseries": {"timeField": "t", "metaField": "tag"}},
    )
    .await;
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
    run_ok(&db, doc! {"create": "c", "timeseries": {"timeField": "t"}}).await;
    db.collection::<Document>("c")
        .insert_one(doc! {"t": at(0)})
        .await
        .unwrap();
    db.collection::<Document>("c").drop().await.unwrap();
    assert!(db.list_collection_names().await.unwrap().is_empty());
    run_ok(
        &db,
        doc! {"create": "c", "timeseries": {"timeField": "t", "metaField": "m"}},
    )
    .await;
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
        run_ok(
            &db,
            doc! {"create": "c", "timeseries": {"timeField": "t", "metaField": "host"}},
        )
        .await;
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
    // After restart the old buckets are closed: new measurements open new buckets.
    coll.insert_one(doc! {"_id": 9999, "t": at(1), "host": "h0", "v": 1})
        .await
        .unwrap();
    let buckets = client
        .database("ts_kill")
        .collection::<Document>("system.buckets.c")
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(buckets, 5);
    assert_eq!(
        coll.count_documents(doc! {"host": "h0"}).await.unwrap(),
        151
    );
}
