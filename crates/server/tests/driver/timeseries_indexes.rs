//! Indexes and TTL on time-series collections through the Rust driver: the default
//! index, translation of specs to the bucket shape and back, rejected index kinds,
//! dropIndexes, collMod `hidden`, `$indexStats`, and whole-bucket TTL.

use crate::common::*;
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use std::time::{Duration, Instant};

fn by_name<'a>(specs: &'a [Document], name: &str) -> &'a Document {
    specs
        .iter()
        .find(|s| s.get_str("name") == Ok(name))
        .unwrap_or_else(|| panic!("no index {name} in {specs:?}"))
}

/// Keys in order, as `(field, value)` pairs (Document equality ignores order).
fn key_fields(spec: &Document) -> Vec<(String, Bson)> {
    spec.get_document("key")
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[tokio::test]
async fn default_index_and_translation_both_ways() {
    let server = TestServer::start();
    let db = server.client().await.database("tsi");
    run_ok(
        &db,
        doc! {"create": "w", "timeseries": {"timeField": "t", "metaField": "m"}},
    )
    .await;
    let view = list_indexes(&db, "w").await;
    assert_eq!(view.len(), 1, "{view:?}");
    assert_eq!(view[0].get_str("name").unwrap(), "m_1_t_1");
    assert_eq!(
        key_fields(&view[0]),
        vec![("m".into(), Bson::Int32(1)), ("t".into(), Bson::Int32(1))]
    );
    let buckets = list_indexes(&db, "system.buckets.w").await;
    assert_eq!(
        key_fields(&buckets[0]),
        vec![
            ("meta".into(), Bson::Int32(1)),
            ("control.min.t".into(), Bson::Int32(1)),
            ("control.max.t".into(), Bson::Int32(1)),
        ]
    );
    let reply = run_ok(
        &db,
        doc! {"createIndexes": "w", "indexes": [
            {"key": {"t": -1}, "name": "t_desc"},
            {"key": {"m.site": 1, "t": 1}, "name": "site_t"},
            {"key": {"temp": 1}, "name": "temp_asc"},
            {"key": {"temp": -1, "m": 1}, "name": "temp_desc_m"},
        ]},
    )
    .await;
    assert_eq!(
        (
            num(&reply, "numIndexesBefore"),
            num(&reply, "numIndexesAfter")
        ),
        (1, 5)
    );
    let b = list_indexes(&db, "system.buckets.w").await;
    let k = |n: &str| {
        key_fields(by_name(&b, n))
            .into_iter()
            .map(|(f, v)| format!("{f}:{v}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(k("t_desc"), ["control.max.t:-1", "control.min.t:-1"]);
    assert_eq!(
        k("site_t"),
        ["meta.site:1", "control.min.t:1", "control.max.t:1"]
    );
    assert_eq!(k("temp_asc"), ["control.min.temp:1", "control.max.temp:1"]);
    assert_eq!(
        k("temp_desc_m"),
        ["control.max.temp:-1", "control.min.temp:-1", "meta:1"]
    );
    let v = list_indexes(&db, "w").await;
    for (name, key) in [
        ("t_desc", doc! {"t": -1}),
        ("site_t", doc! {"m.site": 1, "t": 1}),
        ("temp_asc", doc! {"temp": 1}),
        ("temp_desc_m", doc! {"temp": -1, "m": 1}),
    ] {
        let got = key_fields(by_name(&v, name));
        let want: Vec<(String, Bson)> = key.into_iter().collect();
        assert_eq!(got, want, "{name}");
    }
    // The same spec again is a no-op; a new name for the same key conflicts.
    let again = run_ok(
        &db,
        doc! {"createIndexes": "w", "indexes": [{"key": {"t": -1}, "name": "t_desc"}]},
    )
    .await;
    assert_eq!(again.get_str("note").unwrap(), "all indexes already exist");
    assert_cmd_error(
        &db,
        doc! {"createIndexes": "w", "indexes": [{"key": {"t": -1}, "name": "other"}]},
        85,
        Some("IndexOptionsConflict"),
    )
    .await;
    assert_cmd_error(
        &db,
        doc! {"createIndexes": "w", "indexes": [{"key": {"t": 1}, "name": "t_desc"}]},
        86,
        Some("IndexKeySpecsConflict"),
    )
    .await;
}

#[tokio::test]
async fn unsupported_index_kinds_are_rejected_like_mongodb() {
    let server = TestServer::start();
    let db = server.client().await.database("tsi");
    run_ok(
        &db,
        doc! {"create": "r", "timeseries": {"timeField": "t", "metaField": "m"}},
    )
    .await;
    for (spec, code) in [
        (doc! {"key": {"m": 1}, "name": "u", "unique": true}, 72),
        (doc! {"key": {"x": "text"}, "name": "txt"}, 72),
        (doc! {"key": {"x": 1}, "name": "sp", "sparse": true}, 72),
        (doc! {"key": {"x": "hashed"}, "name": "h"}, 67),
    ] {
        assert_cmd_error(
            &db,
            doc! {"createIndexes": "r", "indexes": [spec]},
            code,
            None,
        )
        .await;
    }
    assert_eq!(list_indexes(&db, "r").await.len(), 1, "nothing was created");
    // Hashed and sparse on the meta field are fine.
    run_ok(&db, doc! {"createIndexes": "r", "indexes": [{"key": {"m.a": "hashed"}, "name": "mh"}, {"key": {"m.b": 1}, "name": "ms", "sparse": true}]}).await;
    assert_eq!(list_indexes(&db, "r").await.len(), 3);
}

#[tokio::test]
async fn drop_indexes_hidden_and_index_stats() {
    let server = TestServer::start();
    let db = server.client().await.database("tsi");
    run_ok(
        &db,
        doc! {"create": "d", "timeseries": {"timeField": "t", "metaField": "m"}},
    )
    .await;
    run_ok(&db, doc! {"createIndexes": "d", "indexes": [{"key": {"v": 1}, "name": "v_1"}, {"key": {"m": 1}, "name": "m_1"}]}).await;
    let r = run_ok(
        &db,
        doc! {"collMod": "d", "index": {"keyPattern": {"v": 1}, "hidden": true}},
    )
    .await;
    assert_eq!(
        (
            r.get_bool("hidden_old").unwrap(),
            r.get_bool("hidden_new").unwrap()
        ),
        (false, true)
    );
    assert!(by_name(&list_indexes(&db, "d").await, "v_1")
        .get_bool("hidden")
        .unwrap());
    assert_cmd_error(
        &db,
        doc! {"collMod": "d", "index": {"name": "nope", "hidden": true}},
        27,
        Some("IndexNotFound"),
    )
    .await;
    let stats: Vec<Document> = db
        .collection::<Document>("d")
        .aggregate(vec![doc! {"$indexStats": {}}, doc! {"$sort": {"name": 1}}])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let names: Vec<&str> = stats.iter().map(|s| s.get_str("name").unwrap()).collect();
    assert_eq!(names, ["m_1", "m_1_t_1", "v_1"]);
    assert_eq!(stats[2].get_document("key").unwrap(), &doc! {"v": 1});
    assert!(stats[0]
        .get_document("accesses")
        .unwrap()
        .contains_key("ops"));
    let r = run_ok(&db, doc! {"dropIndexes": "d", "index": {"v": 1}}).await;
    assert_eq!(num(&r, "nIndexesWas"), 3);
    run_ok(&db, doc! {"dropIndexes": "d", "index": "m_1"}).await;
    assert_cmd_error(
        &db,
        doc! {"dropIndexes": "d", "index": "m_1"},
        27,
        Some("IndexNotFound"),
    )
    .await;
    assert_eq!(list_indexes(&db, "d").await.len(), 1);
    run_ok(&db, doc! {"dropIndexes": "d", "index": "*"}).await;
    assert!(list_indexes(&db, "d").await.is_empty());
    // Indexes survive a restart.
    run_ok(
        &db,
        doc! {"createIndexes": "d", "indexes": [{"key": {"v": -1}, "name": "vd"}]},
    )
    .await;
    let mut server = server;
    server.restart();
    let db = server.client().await.database("tsi");
    assert_eq!(list_indexes(&db, "d").await.len(), 1);
}

#[tokio::test]
async fn ttl_removes_whole_expired_buckets() {
    let server = TestServer::start_with(&["--setParameter", "ttlMonitorSleepSecs=1"]);
    let db = server.client().await.database("tsi");
    run_ok(&db, doc! {"create": "e", "timeseries": {"timeField": "t", "metaField": "m"}, "expireAfterSeconds": 3600}).await;
    let coll = db.collection::<Document>("e");
    let now = DateTime::now().timestamp_millis();
    let old: Vec<Document> = (0..10)
        .map(|i| doc! {"t": DateTime::from_millis(now - 3 * 86_400_000 + i), "m": 1})
        .collect();
    let recent: Vec<Document> = (0..10)
        .map(|i| doc! {"t": DateTime::from_millis(now - 60_000 + i), "m": 2})
        .collect();
    coll.insert_many(old).await.unwrap();
    coll.insert_many(recent).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = coll.count_documents(doc! {}).await.unwrap();
        if left == 10 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "old buckets not expired, {left} left"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(coll.count_documents(doc! {"m": 2}).await.unwrap(), 10);
    // Lowering expireAfterSeconds with collMod (below the recent ones' age + span is
    // not possible here: the bucket span is an hour), turning it off keeps data.
    run_ok(&db, doc! {"collMod": "e", "expireAfterSeconds": "off"}).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 10);
}
