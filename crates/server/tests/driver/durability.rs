//! Data survives clean shutdowns and `kill -9` after acknowledgement.

use crate::common::*;
use bson::{doc, Document};
use futures::TryStreamExt;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

#[tokio::test]
async fn data_survives_clean_restart() {
    let mut server = TestServer::start();
    {
        let client = server.client().await;
        let db = client.database("dur_clean");
        db.create_collection("empty").await.unwrap();
        let coll = db.collection::<Document>("c");
        let docs: Vec<Document> = (0..50)
            .map(|i| doc! {"_id": i, "v": format!("v{i}")})
            .collect();
        coll.insert_many(docs).await.unwrap();
        coll.update_one(doc! {"_id": 3}, doc! {"$set": {"v": "changed"}})
            .await
            .unwrap();
        coll.delete_one(doc! {"_id": 4}).await.unwrap();
        db.collection::<Document>("gone")
            .insert_one(doc! {"x": 1})
            .await
            .unwrap();
        db.collection::<Document>("gone").drop().await.unwrap();
        client.shutdown().await;
    }
    server.stop();
    assert!(!server.is_running());
    server.restart();
    let client = server.client().await;
    let db = client.database("dur_clean");
    let mut names = db.list_collection_names().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["c", "empty"]);
    let coll = db.collection::<Document>("c");
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 49);
    assert_eq!(
        coll.find_one(doc! {"_id": 3}).await.unwrap(),
        Some(doc! {"_id": 3, "v": "changed"})
    );
    assert_eq!(coll.find_one(doc! {"_id": 4}).await.unwrap(), None);
    assert_eq!(
        coll.find_one(doc! {"_id": 49}).await.unwrap(),
        Some(doc! {"_id": 49, "v": "v49"})
    );
    // and the restarted server accepts writes
    coll.insert_one(doc! {"_id": 100}).await.unwrap();
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 50);
}

#[tokio::test]
async fn acknowledged_inserts_survive_kill_9() {
    const TASKS: i32 = 8;
    const PER_TASK: i32 = 200;
    let mut server = TestServer::start();
    let acked: Arc<Mutex<Vec<i32>>> = Arc::new(Mutex::new(Vec::new()));
    {
        let client = server.client().await;
        let coll = client.database("dur_kill").collection::<Document>("c");
        let mut handles = Vec::new();
        for t in 0..TASKS {
            let coll = coll.clone();
            let acked = acked.clone();
            handles.push(tokio::spawn(async move {
                for i in 0..PER_TASK {
                    let id = t * 10_000 + i;
                    coll.insert_one(doc! {"_id": id, "task": t, "i": i, "pad": "x".repeat(64)})
                        .await
                        .expect("insert");
                    acked.lock().unwrap().push(id);
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        // SIGKILL right after the last acknowledgement
        server.kill9();
    }
    let acked = acked.lock().unwrap().clone();
    assert_eq!(acked.len(), (TASKS * PER_TASK) as usize);
    server.restart();
    let client = server.client().await;
    let coll = client.database("dur_kill").collection::<Document>("c");
    let present: HashSet<i32> = coll
        .find(doc! {})
        .projection(doc! {"_id": 1})
        .await
        .unwrap()
        .try_collect::<Vec<Document>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    let missing: Vec<i32> = acked
        .iter()
        .copied()
        .filter(|id| !present.contains(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged documents lost after kill -9, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    let sample = coll.find_one(doc! {"_id": 70_199}).await.unwrap().unwrap();
    assert_eq!(sample.get_i32("task").ok(), Some(7));
    assert_eq!(sample.get_i32("i").ok(), Some(199));
}

#[tokio::test]
async fn acknowledged_updates_and_deletes_survive_kill_9() {
    let mut server = TestServer::start();
    {
        let client = server.client().await;
        let db = client.database("dur_upd");
        let coll = db.collection::<Document>("c");
        let docs: Vec<Document> = (0..20).map(|i| doc! {"_id": i, "n": 0}).collect();
        coll.insert_many(docs).await.unwrap();
        coll.update_many(doc! {"_id": {"$lt": 10}}, doc! {"$inc": {"n": 5}})
            .await
            .unwrap();
        coll.delete_many(doc! {"_id": {"$gte": 15}}).await.unwrap();
        db.collection::<Document>("renamed_src")
            .insert_one(doc! {"_id": 1})
            .await
            .unwrap();
        run_ok(
            &client.database("admin"),
            doc! {"renameCollection": "dur_upd.renamed_src", "to": "dur_upd.renamed_dst"},
        )
        .await;
        server.kill9();
    }
    server.restart();
    let client = server.client().await;
    let db = client.database("dur_upd");
    let coll = db.collection::<Document>("c");
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 15);
    assert_eq!(coll.count_documents(doc! {"n": 5}).await.unwrap(), 10);
    assert_eq!(coll.count_documents(doc! {"n": 0}).await.unwrap(), 5);
    let mut names = db.list_collection_names().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["c", "renamed_dst"]);
}

/// The crash loop: five rounds of `kill -9` while four clients write (two to a regular
/// collection, two to a time-series collection). After each restart every acknowledged
/// write is there exactly once and `validate` finds the collection consistent.
#[tokio::test]
async fn acknowledged_writes_survive_five_kill_9_rounds_under_four_writers() {
    const ROUNDS: i32 = 5;
    let mut server = TestServer::start();
    {
        let client = server.client().await;
        let db = client.database("crash_loop");
        db.run_command(doc! {"create": "ts", "timeseries": {"timeField": "t", "metaField": "w"}})
            .await
            .unwrap();
    }
    let acked: Arc<Mutex<Vec<(bool, i64)>>> = Arc::new(Mutex::new(Vec::new()));
    for round in 0..ROUNDS {
        let client = server.client().await;
        let db = client.database("crash_loop");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut writers = Vec::new();
        for w in 0..4i64 {
            let db = db.clone();
            let acked = acked.clone();
            let stop = stop.clone();
            writers.push(tokio::spawn(async move {
                let timeseries = w % 2 == 1;
                for i in 0.. {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return;
                    }
                    let id = i64::from(round) * 1_000_000 + w * 100_000 + i;
                    let r = if timeseries {
                        db.collection::<Document>("ts")
                            .insert_one(doc! {"t": bson::DateTime::from_millis(1_700_000_000_000 + id), "w": w, "id": id})
                            .await
                    } else {
                        db.collection::<Document>("c")
                            .insert_one(doc! {"_id": id, "w": w})
                            .await
                    };
                    match r {
                        Ok(_) => acked.lock().unwrap().push((timeseries, id)),
                        Err(_) => return, // the server is gone
                    }
                }
            }));
        }
        // Let the writers get going, then kill with writes in flight.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        server.kill9();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for h in writers {
            h.await.unwrap();
        }
        server.restart();
        let client = server.client().await;
        let db = client.database("crash_loop");
        let ids = |coll: &'static str, field: &'static str| {
            let db = db.clone();
            async move {
                let docs: Vec<Document> = db
                    .collection::<Document>(coll)
                    .find(doc! {})
                    .await
                    .unwrap()
                    .try_collect()
                    .await
                    .unwrap();
                docs.iter()
                    .map(|d| d.get_i64(field).unwrap())
                    .collect::<Vec<i64>>()
            }
        };
        for (timeseries, coll, field) in [(false, "c", "_id"), (true, "ts", "id")] {
            let present = ids(coll, field).await;
            let unique: HashSet<i64> = present.iter().copied().collect();
            assert_eq!(
                unique.len(),
                present.len(),
                "round {round}: {coll} has duplicates"
            );
            let missing: Vec<i64> = acked
                .lock()
                .unwrap()
                .iter()
                .filter(|(ts, id)| *ts == timeseries && !unique.contains(id))
                .map(|(_, id)| *id)
                .collect();
            assert!(
                missing.is_empty(),
                "round {round}: {} acknowledged writes to {coll} lost, e.g. {:?}",
                missing.len(),
                &missing[..missing.len().min(5)]
            );
        }
        let v = run_ok(&db, doc! {"validate": "c"}).await;
        assert_eq!(v.get_bool("valid").ok(), Some(true), "round {round}: {v}");
    }
    let total = acked.lock().unwrap().len();
    assert!(total > 0, "no write was acknowledged in any round");
}
