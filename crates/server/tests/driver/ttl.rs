//! The TTL monitor on regular collections, run every second through
//! `--setParameter ttlMonitorSleepSecs=1`: expired documents disappear (polled with a
//! timeout), fresh ones, non-dates and documents without the field stay, arrays expire by
//! their earliest date, and `collMod` changes the expiry.

use crate::common::*;
use bson::{doc, DateTime, Document};
use mongodb::Collection;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

/// Polls until `coll` holds exactly `ids` (sorted), or panics after [`WAIT`].
async fn wait_for_ids(coll: &Collection<Document>, ids: &[i32]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut cursor = coll.find(doc! {}).await.unwrap();
        let mut got = Vec::new();
        while cursor.advance().await.unwrap() {
            got.push(
                cursor
                    .deserialize_current()
                    .unwrap()
                    .get_i32("_id")
                    .unwrap(),
            );
        }
        got.sort();
        if got == ids {
            return;
        }
        assert!(Instant::now() < deadline, "still {got:?}, want {ids:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn ttl_monitor_deletes_expired_documents_only() {
    let server = TestServer::start_with(&["--setParameter", "ttlMonitorSleepSecs=1"]);
    let client = server.client().await;
    let db = client.database("ttl_regular");
    let coll = db.collection::<Document>("c");
    let now = DateTime::now().timestamp_millis();
    let old = DateTime::from_millis(now - 3_600_000);
    let fresh = DateTime::from_millis(now + 3_600_000);
    coll.insert_many(vec![
        doc! {"_id": 1, "t": old},
        doc! {"_id": 2, "t": fresh},
        doc! {"_id": 3, "t": "yesterday"},
        doc! {"_id": 4},
        doc! {"_id": 5, "t": [fresh, old]},
        doc! {"_id": 6, "t": [fresh]},
        doc! {"_id": 7, "t": now - 3_600_000},
    ])
    .await
    .unwrap();
    run_ok(
        &db,
        doc! {"createIndexes": "c", "indexes": [{"key": {"t": 1}, "name": "t_1", "expireAfterSeconds": 60}]},
    )
    .await;
    wait_for_ids(&coll, &[2, 3, 4, 6, 7]).await;
    // The pass that deleted them may still be going over other collections: its count
    // of passes comes at its end.
    let deadline = Instant::now() + WAIT;
    loop {
        let status = run_ok(&client.database("admin"), doc! {"serverStatus": 1}).await;
        let ttl = status
            .get_document("metrics")
            .unwrap()
            .get_document("ttl")
            .unwrap()
            .clone();
        if num(&ttl, "deletedDocuments") >= 2 && num(&ttl, "passes") >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{ttl}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let v = run_ok(&db, doc! {"validate": "c"}).await;
    assert_eq!(v.get_bool("valid"), Ok(true), "{v}");

    // Lowering expireAfterSeconds with collMod expires documents that were fresh before.
    coll.insert_one(doc! {"_id": 8, "t": DateTime::from_millis(now - 30_000)})
        .await
        .unwrap();
    let r = run_ok(
        &db,
        doc! {"collMod": "c", "index": {"keyPattern": {"t": 1}, "expireAfterSeconds": 10}},
    )
    .await;
    assert_eq!(num(&r, "expireAfterSeconds_old"), 60);
    assert_eq!(num(&r, "expireAfterSeconds_new"), 10);
    wait_for_ids(&coll, &[2, 3, 4, 6, 7]).await;
}

#[tokio::test]
async fn ttl_deletes_large_backlogs_in_batches_and_descending_indexes_work() {
    let server = TestServer::start_with(&["--setParameter", "ttlMonitorSleepSecs=1"]);
    let client = server.client().await;
    let db = client.database("ttl_batches");
    let coll = db.collection::<Document>("c");
    let old = DateTime::from_millis(DateTime::now().timestamp_millis() - 10_000);
    let mut docs: Vec<Document> = (0..2500).map(|i| doc! {"_id": i, "t": old}).collect();
    docs.push(doc! {"_id": 5000, "t": DateTime::from_millis(i64::MAX / 2)});
    coll.insert_many(docs).await.unwrap();
    run_ok(
        &db,
        doc! {"createIndexes": "c", "indexes": [{"key": {"t": -1}, "name": "t_-1", "expireAfterSeconds": 0}]},
    )
    .await;
    wait_for_ids(&coll, &[5000]).await;
}
