//! Updates and deletes on time-series collections through the Rust driver (meta-only
//! rewrites onto buckets, arbitrary deletes and updates of measurements, rejected
//! forms, concurrency with inserts), and reads pushed into the bucket scan (explain).

use crate::common::*;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;

/// A time-series collection `name` (time `t`, meta `tag`) with `n` measurements for each
/// tag in `tags`, one per second, `v` = the index.
async fn seeded(
    db: &mongodb::Database,
    name: &str,
    tags: &[Document],
    n: i64,
) -> mongodb::Collection<Document> {
    run_ok(
        db,
        doc! {"create": name, "timeseries": {"timeField": "t", "metaField": "tag"}},
    )
    .await;
    let coll = db.collection::<Document>(name);
    let mut docs = Vec::new();
    for tag in tags {
        for i in 0..n {
            docs.push(doc! {"t": at(i), "tag": tag.clone(), "v": i});
        }
    }
    coll.insert_many(docs).await.unwrap();
    coll
}

#[tokio::test]
async fn meta_updates_are_rewritten_onto_bucket_meta() {
    let server = TestServer::start();
    let db = server.client().await.database("tsw");
    let coll = seeded(
        &db,
        "m",
        &[doc! {"a": "a", "b": "x"}, doc! {"a": "other", "b": "y"}],
        10,
    )
    .await;
    let buckets_before = all(&db.collection("system.buckets.m"), doc! {}).await.len();
    let r = coll
        .update_many(
            doc! {"tag.a": "a"},
            doc! {"$set": {"tag.z": 1}, "$rename": {"tag.b": "tag.c"}},
        )
        .await
        .unwrap();
    assert_eq!(r.matched_count, 10);
    assert_eq!(r.modified_count, 10);
    let buckets = all(&db.collection("system.buckets.m"), doc! {}).await;
    assert_eq!(buckets.len(), buckets_before, "meta is rewritten in place");
    let metas: Vec<&Document> = buckets
        .iter()
        .map(|b| b.get_document("meta").unwrap())
        .collect();
    assert!(
        metas.contains(&&doc! {"a": "a", "c": "x", "z": 1}),
        "{metas:?}"
    );
    assert!(metas.contains(&&doc! {"a": "other", "b": "y"}));
    // Later inserts with the new meta are found by it, the old meta opens a new bucket.
    coll.insert_one(doc! {"t": at(100), "tag": {"a": "a", "b": "x"}, "v": 100})
        .await
        .unwrap();
    assert_eq!(all(&coll, doc! {"tag.c": "x"}).await.len(), 10);
    assert_eq!(all(&coll, doc! {"tag.b": "x"}).await.len(), 1);
    assert_eq!(
        all(&db.collection("system.buckets.m"), doc! {}).await.len(),
        buckets_before + 1
    );
}

#[tokio::test]
async fn deletes_by_meta_time_range_and_measurement_value() {
    let server = TestServer::start();
    let db = server.client().await.database("tsw");
    let coll = seeded(
        &db,
        "d",
        &[doc! {"h": 1}, doc! {"h": 2}, doc! {"h": 3}],
        1200,
    )
    .await;
    let r = coll.delete_many(doc! {"tag.h": 1}).await.unwrap();
    assert_eq!(r.deleted_count, 1200);
    let r = coll
        .delete_many(doc! {"t": {"$gte": at(1000)}})
        .await
        .unwrap();
    assert_eq!(r.deleted_count, 400);
    let r = coll
        .delete_many(doc! {"v": {"$lt": 100}, "tag.h": 3})
        .await
        .unwrap();
    assert_eq!(r.deleted_count, 100);
    let r = coll.delete_one(doc! {"tag.h": 2}).await.unwrap();
    assert_eq!(r.deleted_count, 1);
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 1000 + 900 - 1);
    assert_eq!(
        coll.count_documents(doc! {"t": {"$gte": at(1000)}})
            .await
            .unwrap(),
        0
    );
    // Control min/max of rewritten buckets follow what is left.
    for b in all(&db.collection("system.buckets.d"), doc! {"meta.h": 3}).await {
        let min = b
            .get_document("control")
            .unwrap()
            .get_document("min")
            .unwrap();
        assert!(num(min, "v") >= 100, "{b}");
    }
    // Nothing left for a meta: no bucket either.
    assert!(all(&db.collection("system.buckets.d"), doc! {"meta.h": 1})
        .await
        .is_empty());
}

#[tokio::test]
async fn measurement_updates_and_upserts_and_rejected_forms() {
    let server = TestServer::start();
    let db = server.client().await.database("tsw");
    let coll = seeded(&db, "u", &[doc! {"h": 1}], 50).await;
    let r = coll
        .update_many(
            doc! {"v": {"$gte": 40}},
            doc! {"$inc": {"v": 1000}, "$set": {"flag": true}},
        )
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (10, 10));
    assert_eq!(
        all(&coll, doc! {"flag": true, "v": {"$gte": 1040}})
            .await
            .len(),
        10
    );
    let r = coll
        .update_one(doc! {"v": {"$lt": 10}}, doc! {"$set": {"one": 1}})
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    assert_eq!(all(&coll, doc! {"one": 1}).await.len(), 1);
    let r = coll
        .update_one(
            doc! {"t": at(-5), "tag": {"h": 9}},
            doc! {"$set": {"v": -1}},
        )
        .upsert(true)
        .await
        .unwrap();
    assert!(r.upserted_id.is_some());
    assert_eq!(all(&coll, doc! {"tag.h": 9, "v": -1}).await.len(), 1);
    // The time field must stay a date.
    for bad in [doc! {"$set": {"t": "soon"}}, doc! {"$unset": {"t": ""}}] {
        let e = coll.update_many(doc! {"v": 1}, bad).await.unwrap_err();
        assert_eq!(err_code(&e), Some(2), "{e}");
    }
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 51);
    let e = coll
        .update_many(doc! {}, doc! {"$set": {"a.$[x]": 1}})
        .array_filters(vec![doc! {"x": 1}])
        .await
        .unwrap_err();
    assert!(err_code(&e).is_some());
}

#[tokio::test]
async fn concurrent_inserts_during_updates_and_deletes_lose_nothing() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("tsw");
    let coll = seeded(&db, "c", &[doc! {"h": 0}], 10).await;
    let mut tasks = Vec::new();
    for w in 0..4i64 {
        let coll = coll.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..50i64 {
                let docs: Vec<Document> = (0..20)
                    .map(|k| doc! {"t": at(i * 20 + k), "tag": {"h": w + 1}, "v": 1, "keep": true})
                    .collect();
                coll.insert_many(docs).await.unwrap();
            }
        }));
    }
    for i in 0..30 {
        coll.update_many(
            doc! {"keep": true, "v": 1},
            doc! {"$set": {"v": 1, "seen": i}},
        )
        .await
        .unwrap();
        coll.delete_many(doc! {"tag.h": 0}).await.unwrap();
        coll.delete_many(doc! {"keep": {"$exists": false}})
            .await
            .unwrap();
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        coll.count_documents(doc! {"keep": true}).await.unwrap(),
        4 * 50 * 20
    );
    assert_eq!(coll.count_documents(doc! {"tag.h": 0}).await.unwrap(), 0);
}

/// The `$_internalUnpackBucket` stage of the pipeline's explain at `executionStats`
/// verbosity (`aggregate` with `explain: true` alone does not run the pipeline).
async fn explain(db: &mongodb::Database, coll: &str, pipeline: Vec<Document>) -> Document {
    let reply = run_ok(
        db,
        doc! {
            "explain": {"aggregate": coll, "pipeline": pipeline, "cursor": {}},
            "verbosity": "executionStats",
        },
    )
    .await;
    let stages = reply.get_array("stages").unwrap();
    stages[1]
        .as_document()
        .unwrap()
        .get_document("$_internalUnpackBucket")
        .unwrap()
        .clone()
}

#[tokio::test]
async fn aggregate_pushes_filters_and_columns_into_the_bucket_scan() {
    let server = TestServer::start();
    let db = server.client().await.database("tsw");
    let tags: Vec<Document> = (0..20).map(|h| doc! {"host": format!("h{h}")}).collect();
    let coll = seeded(&db, "p", &tags, 3000).await;
    // Meta + time: one series, one bucket of it.
    let pipeline = vec![
        doc! {"$match": {"tag.host": "h7", "t": {"$gte": at(1000), "$lt": at(1100)}}},
        doc! {"$group": {"_id": null, "m": {"$max": "$v"}, "n": {"$count": {}}}},
    ];
    let out: Vec<Document> = coll
        .aggregate(pipeline.clone())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(out, vec![doc! {"_id": Bson::Null, "m": 1099i64, "n": 100}]);
    let e = explain(&db, "p", pipeline).await;
    let stats = e.get_document("executionStats").unwrap();
    assert!(stats.get_bool("usedMetaIndex").unwrap());
    assert_eq!(num(stats, "seriesMatched"), 1);
    assert!(num(stats, "bucketsExamined") <= 2, "{e}");
    assert!(e.get_bool("vectorizedGroup").unwrap());
    assert_eq!(
        e.get_array("include").unwrap(),
        &vec![Bson::from("t"), Bson::from("tag"), Bson::from("v")],
        "the fields the group and the filter read, meta included"
    );
    // A measurement range prunes by control max without decoding.
    let pipeline = vec![doc! {"$match": {"v": {"$gte": 2999}}}, doc! {"$count": "n"}];
    let out: Vec<Document> = coll
        .aggregate(pipeline.clone())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(out, vec![doc! {"n": 20}]);
    let e = explain(&db, "p", pipeline).await;
    let stats = e.get_document("executionStats").unwrap();
    assert!(num(stats, "bucketsPruned") >= 40, "{e}");
    assert!(num(stats, "bucketsUnpacked") <= 20, "{e}");
    assert_eq!(e.get_array("include").unwrap(), &vec![Bson::from("v")]);
}

#[tokio::test]
async fn statistics_follow_the_operations() {
    let server = TestServer::start();
    let client = server.client().await;
    let admin = client.database("admin");
    let status = run_ok(&admin, doc! {"serverStatus": 1}).await;
    assert!(
        !status.contains_key("bucketCatalog"),
        "absent before any time-series write"
    );
    let db = client.database("tsstats");
    let coll = seeded(&db, "s", &[doc! {"h": 1}], 2500).await;
    db.collection::<Document>("plain")
        .insert_one(doc! {"a": 1})
        .await
        .unwrap();
    let status = run_ok(&admin, doc! {"serverStatus": 1}).await;
    let bc = status.get_document("bucketCatalog").unwrap();
    assert_eq!(num(bc, "numOpenBuckets"), 1);
    assert_eq!(num(bc, "numBucketsClosedDueToCount"), 2);
    assert!(num(bc, "memoryUsage") > 0);
    let before = num(status.get_document("opcounters").unwrap(), "delete");
    coll.delete_many(doc! {"v": {"$lt": 10}}).await.unwrap();
    let status = run_ok(&admin, doc! {"serverStatus": 1}).await;
    assert_eq!(
        num(status.get_document("opcounters").unwrap(), "delete"),
        before + 1
    );
    let stats = run_ok(&db, doc! {"dbStats": 1}).await;
    assert_eq!(num(&stats, "views"), 1, "{stats}");
    assert_eq!(
        num(&stats, "collections"),
        3,
        "plain, system.buckets.s, system.views: {stats}"
    );
    assert_eq!(
        num(&stats, "objects"),
        3 + 1 + 1,
        "three buckets, one document and the view definition in system.views: {stats}"
    );
    let cs = run_ok(&db, doc! {"collStats": "s"}).await;
    let ts = cs.get_document("timeseries").unwrap();
    assert_eq!(num(ts, "bucketCount"), 3);
    assert_eq!(num(ts, "numBucketsClosedDueToCount"), 2);
}

#[tokio::test]
async fn current_op_lists_operations_and_kill_op_answers_like_mongodb() {
    let server = TestServer::start();
    let client = server.client().await;
    let admin = client.database("admin");
    let reply = run_ok(&admin, doc! {"currentOp": 1}).await;
    let ops = reply.get_array("inprog").unwrap();
    let me = ops
        .iter()
        .filter_map(Bson::as_document)
        .find(|o| {
            o.get_document("command")
                .is_ok_and(|c| c.contains_key("currentOp"))
        })
        .expect("currentOp sees itself");
    assert!(me.get_bool("active").unwrap());
    assert_eq!(me.get_str("op").unwrap(), "command");
    let opid = me.get("opid").unwrap().clone();
    let reply = run_ok(&admin, doc! {"killOp": 1, "op": opid}).await;
    assert_eq!(reply.get_str("info").unwrap(), "attempting to kill op");
    run_ok(&admin, doc! {"killOp": 1, "op": 123456789}).await;
    assert_cmd_error(&admin, doc! {"killOp": 1}, 4, Some("NoSuchKey")).await;
    assert_cmd_error(
        &client.database("x"),
        doc! {"killOp": 1, "op": 1},
        13,
        Some("Unauthorized"),
    )
    .await;
    assert_cmd_error(
        &client.database("x"),
        doc! {"currentOp": 1},
        13,
        Some("Unauthorized"),
    )
    .await;
}

#[tokio::test]
async fn find_and_modify_removes_or_updates_one_measurement() {
    let server = TestServer::start();
    let db = server.client().await.database("tsw");
    let coll = seeded(&db, "f", &[doc! {"h": 1}, doc! {"h": 2}], 20).await;
    let gone = coll
        .find_one_and_delete(doc! {"tag.h": 2})
        .sort(doc! {"v": -1})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (num(&gone, "v"), gone.get_document("tag").unwrap().clone()),
        (19, doc! {"h": 2})
    );
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 39);
    let new = coll
        .find_one_and_update(doc! {"tag.h": 1, "v": 5}, doc! {"$set": {"v": 500}})
        .return_document(mongodb::options::ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(num(&new, "v"), 500);
    assert_eq!(new.get_datetime("t").unwrap(), &at(5));
    assert_eq!(
        coll.count_documents(doc! {"v": 5, "tag.h": 1})
            .await
            .unwrap(),
        0
    );
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 39);
    let none = coll.find_one_and_delete(doc! {"v": 12345}).await.unwrap();
    assert!(none.is_none());
    let e = coll
        .find_one_and_update(doc! {"v": 1}, doc! {"$set": {"t": 1}})
        .await
        .unwrap_err();
    assert_eq!(err_code(&e), Some(2));
}
