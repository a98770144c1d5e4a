//! Inserts, queries, cursors, updates, deletes, findAndModify and aggregation.

use crate::common::*;
use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::ReturnDocument;
use mongodb::{Collection, Database};

async fn setup(server: &TestServer, db: &str) -> (Database, Collection<Document>) {
    let client = server.client().await;
    let db = client.database(db);
    let coll = db.collection::<Document>("c");
    (db, coll)
}

async fn ids(coll: &Collection<Document>, filter: Document) -> Vec<i32> {
    let shown = filter.clone();
    let docs: Vec<Document> = coll
        .find(filter)
        .sort(doc! {"_id": 1})
        .await
        .unwrap_or_else(|e| panic!("find {shown}: {e}"))
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("find {shown}: {e}"));
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

async fn one(coll: &Collection<Document>, id: i32) -> Document {
    coll.find_one(doc! {"_id": id})
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("document {id} missing"))
}

// ---------------------------------------------------------------- inserts

#[tokio::test]
async fn insert_assigns_object_id_when_missing() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "ins_oid").await;
    let res = coll.insert_one(doc! {"x": 1}).await.unwrap();
    let id = res
        .inserted_id
        .as_object_id()
        .expect("driver generated ObjectId");
    let stored = coll.find_one(doc! {"x": 1}).await.unwrap().unwrap();
    assert_eq!(stored.get_object_id("_id").unwrap(), id);

    // a raw insert without _id gets an ObjectId from the server
    let db = server.client().await.database("ins_oid");
    let reply = run_ok(&db, doc! {"insert": "raw", "documents": [{"y": 2}]}).await;
    assert_eq!(num(&reply, "n"), 1);
    let stored = db
        .collection::<Document>("raw")
        .find_one(doc! {})
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(stored.get("_id"), Some(Bson::ObjectId(_))),
        "{stored}"
    );
    assert_eq!(
        stored.keys().next().map(String::as_str),
        Some("_id"),
        "_id first: {stored}"
    );
}

#[tokio::test]
async fn ordered_insert_stops_at_first_duplicate() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "ins_ord").await;
    let reply = run_ok(
        &db,
        doc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 1}, {"_id": 2}], "ordered": true},
    )
    .await;
    assert_eq!(num(&reply, "n"), 1, "{reply}");
    let errs = reply.get_array("writeErrors").expect("writeErrors");
    assert_eq!(errs.len(), 1, "{reply}");
    let e = errs[0].as_document().unwrap();
    assert_eq!(num(e, "index"), 1, "{e}");
    assert_eq!(num(e, "code"), 11000, "{e}");
    let msg = e.get_str("errmsg").expect("errmsg");
    assert!(
        msg.contains("E11000") && msg.contains("duplicate key"),
        "{msg}"
    );
    assert_eq!(ids(&coll, doc! {}).await, vec![1]);
}

#[tokio::test]
async fn unordered_insert_continues_after_duplicate() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "ins_unord").await;
    let reply = run_ok(
        &db,
        doc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 1}, {"_id": 2}, {"_id": 2}, {"_id": 3}], "ordered": false},
    )
    .await;
    assert_eq!(num(&reply, "n"), 3, "{reply}");
    let errs = reply.get_array("writeErrors").expect("writeErrors");
    let idx: Vec<i64> = errs
        .iter()
        .map(|e| num(e.as_document().unwrap(), "index"))
        .collect();
    assert_eq!(idx, vec![1, 3], "{reply}");
    for e in errs {
        assert_eq!(num(e.as_document().unwrap(), "code"), 11000);
    }
    assert_eq!(ids(&coll, doc! {}).await, vec![1, 2, 3]);
}

#[tokio::test]
async fn driver_insert_many_reports_duplicate_key() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "ins_drv").await;
    coll.insert_one(doc! {"_id": 5}).await.unwrap();
    let err = coll
        .insert_many(vec![doc! {"_id": 4}, doc! {"_id": 5}, doc! {"_id": 6}])
        .await
        .expect_err("duplicate must fail");
    match &*err.kind {
        mongodb::error::ErrorKind::InsertMany(im) => {
            let we = im.write_errors.as_ref().expect("write errors");
            assert_eq!(we.len(), 1);
            assert_eq!(we[0].index, 1);
            assert_eq!(we[0].code, 11000);
        }
        other => panic!("expected InsertMany error, got {other:?}"),
    }
    assert_eq!(ids(&coll, doc! {}).await, vec![4, 5]);

    let err = coll
        .insert_many(vec![doc! {"_id": 5}, doc! {"_id": 7}])
        .ordered(false)
        .await
        .expect_err("duplicate must fail");
    assert_eq!(err_code(&err), Some(11000), "{err}");
    assert_eq!(ids(&coll, doc! {}).await, vec![4, 5, 7]);

    let err = coll.insert_one(doc! {"_id": 7}).await.expect_err("dup");
    assert_eq!(err_code(&err), Some(11000), "{err}");
}

#[tokio::test]
async fn ids_of_different_numeric_types_are_the_same_key() {
    // {_id: 1} and {_id: 1.0} and {_id: NumberLong(1)} are equal in MongoDB.
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "ins_num").await;
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    let err = coll.insert_one(doc! {"_id": 1.0}).await.expect_err("dup");
    assert_eq!(err_code(&err), Some(11000));
    let err = coll.insert_one(doc! {"_id": 1_i64}).await.expect_err("dup");
    assert_eq!(err_code(&err), Some(11000));
    assert_eq!(coll.count_documents(doc! {"_id": 1.0}).await.unwrap(), 1);
}

// ---------------------------------------------------------------- find

async fn insert_n(coll: &Collection<Document>, n: i32) {
    let docs: Vec<Document> = (0..n)
        .map(|i| doc! {"_id": i, "n": i, "even": i % 2 == 0})
        .collect();
    coll.insert_many(docs).await.unwrap();
}

#[tokio::test]
async fn find_iterates_more_than_one_batch() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "find_many").await;
    insert_n(&coll, 250).await;
    let docs: Vec<Document> = coll
        .find(doc! {})
        .sort(doc! {"n": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(docs.len(), 250);
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(d.get_i32("n").unwrap(), i as i32);
    }
    // a small batch size forces many getMores
    let docs: Vec<Document> = coll
        .find(doc! {"even": true})
        .batch_size(7)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(docs.len(), 125);
}

#[tokio::test]
async fn find_first_batch_is_101_and_get_more_returns_rest() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "find_gm").await;
    insert_n(&coll, 150).await;
    let reply = run_ok(&db, doc! {"find": "c", "filter": {}, "sort": {"n": 1}}).await;
    let cursor = reply.get_document("cursor").unwrap();
    assert_eq!(cursor.get_str("ns").ok(), Some("find_gm.c"), "{cursor}");
    assert_eq!(cursor.get_array("firstBatch").unwrap().len(), 101);
    let id = cursor.get_i64("id").expect("cursor id is a long");
    assert_ne!(id, 0);
    let reply = run_ok(
        &db,
        doc! {"getMore": id, "collection": "c", "batchSize": 30},
    )
    .await;
    let cursor = reply.get_document("cursor").unwrap();
    let batch = cursor.get_array("nextBatch").unwrap();
    assert_eq!(batch.len(), 30);
    assert_eq!(batch[0].as_document().unwrap().get_i32("n").ok(), Some(101));
    assert_eq!(cursor.get_i64("id").ok(), Some(id));
    let reply = run_ok(&db, doc! {"getMore": id, "collection": "c"}).await;
    let cursor = reply.get_document("cursor").unwrap();
    assert_eq!(cursor.get_array("nextBatch").unwrap().len(), 19);
    assert_eq!(
        cursor.get_i64("id").ok(),
        Some(0),
        "exhausted cursor has id 0"
    );
    // the exhausted cursor is gone
    assert_cmd_error(
        &db,
        doc! {"getMore": id, "collection": "c"},
        43,
        Some("CursorNotFound"),
    )
    .await;
}

#[tokio::test]
async fn find_projection_sort_skip_limit() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "find_psl").await;
    let docs: Vec<Document> = (0..20)
        .map(|i| doc! {"_id": i, "n": 19 - i, "a": i * 10, "b": {"c": i, "d": "x"}})
        .collect();
    coll.insert_many(docs).await.unwrap();
    let got: Vec<Document> = coll
        .find(doc! {"n": {"$gte": 3}})
        .sort(doc! {"n": 1})
        .skip(2)
        .limit(3)
        .projection(doc! {"n": 1, "b.c": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        got,
        vec![
            doc! {"_id": 14, "n": 5, "b": {"c": 14}},
            doc! {"_id": 13, "n": 6, "b": {"c": 13}},
            doc! {"_id": 12, "n": 7, "b": {"c": 12}},
        ]
    );
    // _id can be excluded from an inclusion projection
    let got = coll
        .find_one(doc! {"_id": 0})
        .projection(doc! {"_id": 0, "a": 1})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, doc! {"a": 0});
    // exclusion projection
    let got = coll
        .find_one(doc! {"_id": 1})
        .projection(doc! {"b": 0, "n": 0})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, doc! {"_id": 1, "a": 10});
    // descending sort with limit
    let got: Vec<i32> = coll
        .find(doc! {})
        .sort(doc! {"a": -1})
        .limit(2)
        .await
        .unwrap()
        .try_collect::<Vec<Document>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(got, vec![19, 18]);
}

#[tokio::test]
async fn find_single_batch_closes_cursor() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "find_sb").await;
    insert_n(&coll, 30).await;
    let reply = run_ok(
        &db,
        doc! {"find": "c", "filter": {}, "batchSize": 5, "singleBatch": true},
    )
    .await;
    let cursor = reply.get_document("cursor").unwrap();
    assert_eq!(cursor.get_array("firstBatch").unwrap().len(), 5);
    assert_eq!(num(cursor, "id"), 0, "singleBatch must close the cursor");
    // limit smaller than batch: cursor is closed too
    let reply = run_ok(&db, doc! {"find": "c", "filter": {}, "limit": 4}).await;
    let cursor = reply.get_document("cursor").unwrap();
    assert_eq!(cursor.get_array("firstBatch").unwrap().len(), 4);
    assert_eq!(num(cursor, "id"), 0);
}

#[tokio::test]
async fn kill_cursors_reports_killed_and_cursor_is_gone() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "kc").await;
    insert_n(&coll, 10).await;
    let reply = run_ok(&db, doc! {"find": "c", "batchSize": 2}).await;
    let id = reply.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    let reply = run_ok(&db, doc! {"killCursors": "c", "cursors": [id, 424_242_i64]}).await;
    assert_eq!(
        reply.get_array("cursorsKilled").unwrap(),
        &vec![Bson::Int64(id)],
        "{reply}"
    );
    assert_eq!(
        reply.get_array("cursorsNotFound").unwrap(),
        &vec![Bson::Int64(424_242)],
        "{reply}"
    );
    assert!(reply.get_array("cursorsAlive").unwrap().is_empty());
    assert_cmd_error(
        &db,
        doc! {"getMore": id, "collection": "c"},
        43,
        Some("CursorNotFound"),
    )
    .await;
}

#[tokio::test]
async fn get_more_unknown_cursor_is_cursor_not_found() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "gmu").await;
    insert_n(&coll, 3).await;
    assert_cmd_error(
        &db,
        doc! {"getMore": 987_654_321_i64, "collection": "c"},
        43,
        Some("CursorNotFound"),
    )
    .await;
}

#[tokio::test]
async fn count_and_count_documents() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "cnt").await;
    insert_n(&coll, 40).await;
    let reply = run_ok(&db, doc! {"count": "c", "query": {"even": true}}).await;
    assert_eq!(num(&reply, "n"), 20);
    let reply = run_ok(
        &db,
        doc! {"count": "c", "query": {"n": {"$lt": 10}}, "skip": 2, "limit": 5},
    )
    .await;
    assert_eq!(num(&reply, "n"), 5);
    let reply = run_ok(&db, doc! {"count": "missing"}).await;
    assert_eq!(num(&reply, "n"), 0);
    assert_eq!(
        coll.count_documents(doc! {"n": {"$gte": 35}})
            .await
            .unwrap(),
        5
    );
    assert_eq!(coll.estimated_document_count().await.unwrap(), 40);
}

#[tokio::test]
async fn distinct_unwinds_arrays() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "dist").await;
    coll.insert_many(vec![
        doc! {"_id": 1, "tag": ["a", "b"], "k": 1, "s": {"t": "x"}},
        doc! {"_id": 2, "tag": "b", "k": 1, "s": {"t": "y"}},
        doc! {"_id": 3, "tag": ["c"], "k": 2, "s": {"t": "x"}},
        doc! {"_id": 4, "k": 2},
    ])
    .await
    .unwrap();
    let mut vals: Vec<String> = coll
        .distinct("tag", doc! {})
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.as_str().unwrap().to_string())
        .collect();
    vals.sort();
    assert_eq!(vals, vec!["a", "b", "c"]);
    let reply = run_ok(&db, doc! {"distinct": "c", "key": "tag", "query": {"k": 1}}).await;
    let mut vals: Vec<String> = reply
        .get_array("values")
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap().to_string())
        .collect();
    vals.sort();
    assert_eq!(vals, vec!["a", "b"]);
    let mut vals: Vec<String> = coll
        .distinct("s.t", doc! {})
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.as_str().unwrap().to_string())
        .collect();
    vals.sort();
    assert_eq!(vals, vec!["x", "y"]);
}

// ---------------------------------------------------------------- deletes

#[tokio::test]
async fn delete_limit_zero_and_one() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "del").await;
    insert_n(&coll, 10).await;
    let reply = run_ok(
        &db,
        doc! {"delete": "c", "deletes": [{"q": {"even": true}, "limit": 1}]},
    )
    .await;
    assert_eq!(num(&reply, "n"), 1);
    assert_eq!(coll.count_documents(doc! {"even": true}).await.unwrap(), 4);
    let reply = run_ok(
        &db,
        doc! {"delete": "c", "deletes": [{"q": {"even": true}, "limit": 0}]},
    )
    .await;
    assert_eq!(num(&reply, "n"), 4);
    assert_eq!(ids(&coll, doc! {}).await, vec![1, 3, 5, 7, 9]);
    let res = coll.delete_many(doc! {"n": {"$gt": 4}}).await.unwrap();
    assert_eq!(res.deleted_count, 3);
    let res = coll.delete_one(doc! {}).await.unwrap();
    assert_eq!(res.deleted_count, 1);
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 1);
    let res = coll.delete_many(doc! {"nope": 1}).await.unwrap();
    assert_eq!(res.deleted_count, 0);
}

// ---------------------------------------------------------------- updates

#[tokio::test]
async fn update_multi_and_single() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "upd_multi").await;
    insert_n(&coll, 6).await;
    let reply = run_ok(
        &db,
        doc! {"update": "c", "updates": [{"q": {"even": true}, "u": {"$set": {"tag": "e"}}, "multi": true}]},
    )
    .await;
    assert_eq!(num(&reply, "n"), 3, "{reply}");
    assert_eq!(num(&reply, "nModified"), 3, "{reply}");
    assert_eq!(ids(&coll, doc! {"tag": "e"}).await, vec![0, 2, 4]);
    // running it again matches but modifies nothing
    let reply = run_ok(
        &db,
        doc! {"update": "c", "updates": [{"q": {"even": true}, "u": {"$set": {"tag": "e"}}, "multi": true}]},
    )
    .await;
    assert_eq!(num(&reply, "n"), 3, "{reply}");
    assert_eq!(num(&reply, "nModified"), 0, "{reply}");
    let res = coll
        .update_one(doc! {"even": false}, doc! {"$set": {"tag": "o"}})
        .await
        .unwrap();
    assert_eq!((res.matched_count, res.modified_count), (1, 1));
    assert_eq!(coll.count_documents(doc! {"tag": "o"}).await.unwrap(), 1);
    let res = coll
        .update_many(doc! {"n": {"$gte": 4}}, doc! {"$set": {"big": true}})
        .await
        .unwrap();
    assert_eq!((res.matched_count, res.modified_count), (2, 2));
}

#[tokio::test]
async fn upsert_reports_upserted_id() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "upsert").await;
    let reply = run_ok(
        &db,
        doc! {"update": "c", "updates": [{"q": {"k": "a"}, "u": {"$inc": {"n": 1}}, "upsert": true}]},
    )
    .await;
    assert_eq!(num(&reply, "n"), 1, "{reply}");
    assert_eq!(num(&reply, "nModified"), 0, "{reply}");
    let ups = reply.get_array("upserted").expect("upserted");
    let up = ups[0].as_document().unwrap();
    assert_eq!(num(up, "index"), 0);
    let id = up.get_object_id("_id").expect("generated ObjectId");
    let stored = coll.find_one(doc! {"k": "a"}).await.unwrap().unwrap();
    assert_eq!(stored, doc! {"_id": id, "k": "a", "n": 1});

    // second upsert on the same filter updates
    let res = coll
        .update_one(doc! {"k": "a"}, doc! {"$inc": {"n": 1}})
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(res.matched_count, 1);
    assert!(res.upserted_id.is_none());
    assert_eq!(
        coll.find_one(doc! {"k": "a"})
            .await
            .unwrap()
            .unwrap()
            .get_i32("n")
            .ok(),
        Some(2)
    );

    // upsert with an _id in the query uses it
    let res = coll
        .update_one(doc! {"_id": 77}, doc! {"$set": {"v": 1}})
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(res.upserted_id, Some(Bson::Int32(77)));
    assert_eq!(one(&coll, 77).await, doc! {"_id": 77, "v": 1});
}

#[tokio::test]
async fn replacement_document_keeps_id() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "repl").await;
    coll.insert_one(doc! {"_id": 1, "a": 1, "b": 2})
        .await
        .unwrap();
    let res = coll
        .replace_one(doc! {"_id": 1}, doc! {"c": 3})
        .await
        .unwrap();
    assert_eq!(res.modified_count, 1);
    assert_eq!(one(&coll, 1).await, doc! {"_id": 1, "c": 3});
    // replacement upsert
    let res = coll
        .replace_one(doc! {"_id": 2}, doc! {"z": 1})
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(res.upserted_id, Some(Bson::Int32(2)));
    assert_eq!(one(&coll, 2).await, doc! {"_id": 2, "z": 1});
}

async fn apply(coll: &Collection<Document>, start: Document, update: Document) -> Document {
    coll.delete_many(doc! {}).await.unwrap();
    let mut start = start;
    start.insert("_id", 1);
    coll.insert_one(start).await.unwrap();
    let shown = update.clone();
    coll.update_one(doc! {"_id": 1}, update)
        .await
        .unwrap_or_else(|e| panic!("update {shown}: {e}"));
    let mut got = one(coll, 1).await;
    got.remove("_id");
    got
}

#[tokio::test]
async fn update_operators_set_unset_inc_mul() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "ops1").await;
    assert_eq!(
        apply(&coll, doc! {"a": 1}, doc! {"$set": {"a": 2, "b.c": "x"}}).await,
        doc! {"a": 2, "b": {"c": "x"}}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"a": 1, "b": 2, "c": {"d": 1, "e": 2}},
            doc! {"$unset": {"b": "", "c.d": 1, "zz": 1}}
        )
        .await,
        doc! {"a": 1, "c": {"e": 2}}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"a": 1, "f": 1.5},
            doc! {"$inc": {"a": 2, "f": 1, "new": 5}}
        )
        .await,
        doc! {"a": 3, "f": 2.5, "new": 5}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"a": 3, "l": 2_i64},
            doc! {"$mul": {"a": 4, "l": 3, "missing": 2}}
        )
        .await,
        doc! {"a": 12, "l": 6_i64, "missing": 0}
    );
}

#[tokio::test]
async fn update_operators_min_max_rename() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "ops2").await;
    assert_eq!(
        apply(
            &coll,
            doc! {"lo": 5, "hi": 5},
            doc! {"$min": {"lo": 3, "hi": 9}}
        )
        .await,
        doc! {"lo": 3, "hi": 5}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"lo": 5, "hi": 5},
            doc! {"$max": {"lo": 3, "hi": 9, "n": 1}}
        )
        .await,
        doc! {"lo": 5, "hi": 9, "n": 1}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"a": 1, "b": {"c": 2}},
            doc! {"$rename": {"a": "y", "b.c": "z"}}
        )
        .await,
        doc! {"b": {}, "y": 1, "z": 2}
    );
}

#[tokio::test]
async fn update_operator_set_on_insert_only_applies_on_insert() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "soi").await;
    coll.update_one(
        doc! {"_id": 1},
        doc! {"$set": {"a": 1}, "$setOnInsert": {"created": true}},
    )
    .upsert(true)
    .await
    .unwrap();
    assert_eq!(
        one(&coll, 1).await,
        doc! {"_id": 1, "a": 1, "created": true}
    );
    coll.update_one(
        doc! {"_id": 1},
        doc! {"$set": {"a": 2}, "$setOnInsert": {"created": false, "other": 1}},
    )
    .upsert(true)
    .await
    .unwrap();
    assert_eq!(
        one(&coll, 1).await,
        doc! {"_id": 1, "a": 2, "created": true}
    );
}

#[tokio::test]
async fn update_operator_current_date() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "cd").await;
    let before = bson::DateTime::now().timestamp_millis();
    let got = apply(
        &coll,
        doc! {"a": 1},
        doc! {"$currentDate": {"d": true, "ts": {"$type": "timestamp"}, "d2": {"$type": "date"}}},
    )
    .await;
    let after = bson::DateTime::now().timestamp_millis();
    for key in ["d", "d2"] {
        let d = got
            .get_datetime(key)
            .unwrap_or_else(|_| panic!("{key} is a date: {got}"));
        assert!(
            d.timestamp_millis() >= before - 1000 && d.timestamp_millis() <= after + 1000,
            "{got}"
        );
    }
    assert!(matches!(got.get("ts"), Some(Bson::Timestamp(_))), "{got}");
}

#[tokio::test]
async fn update_operator_push_with_modifiers() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "push").await;
    assert_eq!(
        apply(&coll, doc! {"a": [1]}, doc! {"$push": {"a": 2, "new": "x"}}).await,
        doc! {"a": [1, 2], "new": ["x"]}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"a": [3]},
            doc! {"$push": {"a": {"$each": [5, 1, 4]}}}
        )
        .await,
        doc! {"a": [3, 5, 1, 4]}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"a": [3]},
            doc! {"$push": {"a": {"$each": [5, 1, 4], "$sort": 1, "$slice": 3}}}
        )
        .await,
        doc! {"a": [1, 3, 4]}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"a": [1, 2, 3]},
            doc! {"$push": {"a": {"$each": [4, 5], "$slice": -2}}}
        )
        .await,
        doc! {"a": [4, 5]}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"a": [{"s": 2}, {"s": 9}]},
            doc! {"$push": {"a": {"$each": [{"s": 5}], "$sort": {"s": -1}}}}
        )
        .await,
        doc! {"a": [{"s": 9}, {"s": 5}, {"s": 2}]}
    );
}

#[tokio::test]
async fn update_operators_add_to_set_pull_pop() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "sets").await;
    assert_eq!(
        apply(&coll, doc! {"a": [1, 2]}, doc! {"$addToSet": {"a": 2}}).await,
        doc! {"a": [1, 2]}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"a": [1, 2]},
            doc! {"$addToSet": {"a": {"$each": [2, 3, 3, 4]}}}
        )
        .await,
        doc! {"a": [1, 2, 3, 4]}
    );
    assert_eq!(
        apply(
            &coll,
            doc! {"a": [1, 5, 2, 6, 3]},
            doc! {"$pull": {"a": {"$gte": 3}}}
        )
        .await,
        doc! {"a": [1, 2]}
    );
    assert_eq!(
        apply(&coll, doc! {"a": [1, 2, 1]}, doc! {"$pull": {"a": 1}}).await,
        doc! {"a": [2]}
    );
    assert_eq!(
        apply(&coll, doc! {"a": [1, 2, 3]}, doc! {"$pop": {"a": 1}}).await,
        doc! {"a": [1, 2]}
    );
    assert_eq!(
        apply(&coll, doc! {"a": [1, 2, 3]}, doc! {"$pop": {"a": -1}}).await,
        doc! {"a": [2, 3]}
    );
}

#[tokio::test]
async fn update_errors_have_mongodb_codes() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "upd_err").await;
    coll.insert_one(doc! {"_id": 1, "s": "text", "n": 1})
        .await
        .unwrap();

    let err = coll
        .update_one(doc! {"_id": 1}, doc! {"$inc": {"s": 1}})
        .await
        .expect_err("$inc on a string");
    assert_eq!(err_code(&err), Some(14), "{err}");
    assert_eq!(
        err_code_name(&err).as_deref(),
        Some("TypeMismatch"),
        "{err}"
    );

    let err = coll
        .update_one(doc! {"_id": 1}, doc! {"$frobnicate": {"n": 1}})
        .await
        .expect_err("unknown modifier");
    assert_eq!(err_code(&err), Some(9), "{err}");
    assert_eq!(
        err_code_name(&err).as_deref(),
        Some("FailedToParse"),
        "{err}"
    );

    let err = coll
        .update_one(doc! {"_id": 1}, doc! {"$set": {"_id": 2}})
        .await
        .expect_err("modifying _id");
    assert_eq!(err_code(&err), Some(66), "{err}");
    assert_eq!(
        err_code_name(&err).as_deref(),
        Some("ImmutableField"),
        "{err}"
    );

    // raw reply: ok 1 with writeErrors
    let reply = run_ok(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"s": 1}}}]},
    )
    .await;
    let errs = reply.get_array("writeErrors").expect("writeErrors");
    let e = errs[0].as_document().unwrap();
    assert_eq!(num(e, "index"), 0);
    assert_eq!(num(e, "code"), 14);
    // the document is untouched
    assert_eq!(one(&coll, 1).await, doc! {"_id": 1, "s": "text", "n": 1});
}

// ---------------------------------------------------------------- findAndModify

#[tokio::test]
async fn find_one_and_update_returns_old_or_new() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "fam").await;
    coll.insert_one(doc! {"_id": 1, "n": 1}).await.unwrap();
    let old = coll
        .find_one_and_update(doc! {"_id": 1}, doc! {"$inc": {"n": 1}})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old, doc! {"_id": 1, "n": 1});
    let new = coll
        .find_one_and_update(doc! {"_id": 1}, doc! {"$inc": {"n": 1}})
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(new, doc! {"_id": 1, "n": 3});
    let none = coll
        .find_one_and_update(doc! {"_id": 2}, doc! {"$inc": {"n": 1}})
        .await
        .unwrap();
    assert!(none.is_none());
    let up = coll
        .find_one_and_update(doc! {"_id": 2}, doc! {"$inc": {"n": 10}})
        .upsert(true)
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(up, doc! {"_id": 2, "n": 10});

    // raw reply shape: lastErrorObject
    let reply = run_ok(
        &db,
        doc! {"findAndModify": "c", "query": {"_id": 3}, "update": {"$set": {"x": 1}}, "upsert": true, "new": true},
    )
    .await;
    let leo = reply
        .get_document("lastErrorObject")
        .expect("lastErrorObject");
    assert_eq!(num(leo, "n"), 1, "{reply}");
    assert_eq!(leo.get_bool("updatedExisting").ok(), Some(false), "{reply}");
    assert_eq!(leo.get("upserted"), Some(&Bson::Int32(3)), "{reply}");
    assert_eq!(
        reply.get_document("value").ok(),
        Some(&doc! {"_id": 3, "x": 1})
    );

    let removed = coll
        .find_one_and_delete(doc! {"_id": 1})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(removed, doc! {"_id": 1, "n": 3});
    assert_eq!(ids(&coll, doc! {}).await, vec![2, 3]);

    let replaced = coll
        .find_one_and_replace(doc! {"_id": 2}, doc! {"r": true})
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replaced, doc! {"_id": 2, "r": true});
}

#[tokio::test]
async fn find_one_and_update_with_sort_picks_first() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "fams").await;
    insert_n(&coll, 5).await;
    let got = coll
        .find_one_and_update(doc! {"even": true}, doc! {"$set": {"picked": true}})
        .sort(doc! {"n": -1})
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.get_i32("_id").ok(), Some(4));
    assert_eq!(ids(&coll, doc! {"picked": true}).await, vec![4]);
}

#[tokio::test]
async fn end_sessions_is_ok() {
    let server = TestServer::start();
    let client = server.client().await;
    let id = bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: vec![7u8; 16],
    };
    run_ok(
        &client.database("admin"),
        doc! {"endSessions": [{"id": id}]},
    )
    .await;
    // explicit driver sessions work end to end
    let mut session = client.start_session().await.unwrap();
    let coll = client.database("sess").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1})
        .session(&mut session)
        .await
        .unwrap();
    assert_eq!(
        coll.count_documents(doc! {})
            .session(&mut session)
            .await
            .unwrap(),
        1
    );
}

// ---------------------------------------------------------------- aggregation

#[tokio::test]
async fn aggregate_match_project_sort_skip_limit() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "agg1").await;
    insert_n(&coll, 20).await;
    let got: Vec<Document> = coll
        .aggregate(vec![
            doc! {"$match": {"even": true}},
            doc! {"$sort": {"n": -1}},
            doc! {"$skip": 1},
            doc! {"$limit": 3},
            doc! {"$project": {"_id": 0, "n": 1}},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(got, vec![doc! {"n": 16}, doc! {"n": 14}, doc! {"n": 12}]);
}

#[tokio::test]
async fn aggregate_count_and_group() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "agg2").await;
    coll.insert_many(vec![
        doc! {"_id": 1, "k": "a", "v": 1},
        doc! {"_id": 2, "k": "b", "v": 2},
        doc! {"_id": 3, "k": "a", "v": 3},
        doc! {"_id": 4, "k": "b", "v": 4},
        doc! {"_id": 5, "k": "a", "v": 5},
    ])
    .await
    .unwrap();
    let got: Vec<Document> = coll
        .aggregate(vec![
            doc! {"$match": {"v": {"$gt": 1}}},
            doc! {"$count": "total"},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(got, vec![doc! {"total": 4}]);

    let got: Vec<Document> = coll
        .aggregate(vec![
            doc! {"$group": {
                "_id": "$k",
                "sum": {"$sum": "$v"},
                "n": {"$sum": 1},
                "avg": {"$avg": "$v"},
                "min": {"$min": "$v"},
                "max": {"$max": "$v"},
                "all": {"$push": "$v"},
            }},
            doc! {"$sort": {"_id": 1}},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        got,
        vec![
            doc! {"_id": "a", "sum": 9, "n": 3, "avg": 3.0, "min": 1, "max": 5, "all": [1, 3, 5]},
            doc! {"_id": "b", "sum": 6, "n": 2, "avg": 3.0, "min": 2, "max": 4, "all": [2, 4]},
        ]
    );
    let got: Vec<Document> = coll
        .aggregate(vec![
            doc! {"$group": {"_id": Bson::Null, "total": {"$sum": "$v"}}},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(got, vec![doc! {"_id": Bson::Null, "total": 15}]);
}

#[tokio::test]
async fn aggregate_cursor_spans_batches() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "agg3").await;
    insert_n(&coll, 130).await;
    let got: Vec<Document> = coll
        .aggregate(vec![doc! {"$sort": {"n": 1}}])
        .batch_size(50)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(got.len(), 130);
    assert_eq!(got[129].get_i32("n").ok(), Some(129));
}

#[tokio::test]
async fn aggregate_unknown_stage_is_40324() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "agg_err").await;
    coll.insert_one(doc! {"x": 1}).await.unwrap();
    assert_cmd_error(
        &db,
        doc! {"aggregate": "c", "pipeline": [{"$noSuchStage": {}}], "cursor": {}},
        40324,
        None,
    )
    .await;
}

// ---------------------------------------------------------------- query operators

async fn query_fixture(server: &TestServer, name: &str) -> Collection<Document> {
    let (_db, coll) = setup(server, name).await;
    coll.insert_many(vec![
        doc! {"_id": 1, "a": 1, "s": "apple", "tags": ["x", "y"], "sub": {"v": 10}, "arr": [{"b": 1}, {"b": 2}]},
        doc! {"_id": 2, "a": 5, "s": "Banana", "tags": ["y"], "sub": {"v": 20}, "arr": [{"b": 3}]},
        doc! {"_id": 3, "a": 10, "s": "cherry", "tags": [], "sub": {"v": 30, "w": 1}},
        doc! {"_id": 4, "a": "str", "tags": ["x", "y", "z"]},
        doc! {"_id": 5, "a": Bson::Null},
        doc! {"_id": 6},
        doc! {"_id": 7, "a": [2, 8]},
        doc! {"_id": 8, "a": 2.5},
    ])
    .await
    .unwrap();
    coll
}

#[tokio::test]
async fn query_comparison_operators() {
    let server = TestServer::start();
    let c = query_fixture(&server, "q_cmp").await;
    assert_eq!(ids(&c, doc! {"a": {"$eq": 5}}).await, vec![2]);
    assert_eq!(
        ids(&c, doc! {"a": 2}).await,
        vec![7],
        "equality matches array elements"
    );
    assert_eq!(
        ids(&c, doc! {"a": {"$ne": 5}}).await,
        vec![1, 3, 4, 5, 6, 7, 8]
    );
    assert_eq!(ids(&c, doc! {"a": {"$gt": 4}}).await, vec![2, 3, 7]);
    assert_eq!(ids(&c, doc! {"a": {"$gte": 5}}).await, vec![2, 3, 7]);
    assert_eq!(ids(&c, doc! {"a": {"$lt": 2.5}}).await, vec![1, 7]);
    assert_eq!(ids(&c, doc! {"a": {"$lte": 2.5}}).await, vec![1, 7, 8]);
    assert_eq!(
        ids(&c, doc! {"a": {"$gt": "a"}}).await,
        vec![4],
        "type bracketing"
    );
    assert_eq!(
        ids(&c, doc! {"a": {"$in": [1, "str", Bson::Null]}}).await,
        vec![1, 4, 5, 6]
    );
    assert_eq!(
        ids(&c, doc! {"a": {"$nin": [1, "str", Bson::Null]}}).await,
        vec![2, 3, 7, 8]
    );
    assert_eq!(
        ids(&c, doc! {"a": Bson::Null}).await,
        vec![5, 6],
        "null matches missing"
    );
    assert_eq!(
        ids(&c, doc! {"a": [2, 8]}).await,
        vec![7],
        "whole-array equality"
    );
}

#[tokio::test]
async fn query_logical_operators() {
    let server = TestServer::start();
    let c = query_fixture(&server, "q_log").await;
    assert_eq!(
        ids(&c, doc! {"$and": [{"a": {"$gt": 1}}, {"a": {"$lt": 9}}]}).await,
        vec![2, 7, 8]
    );
    assert_eq!(
        ids(&c, doc! {"$or": [{"a": 1}, {"s": "cherry"}]}).await,
        vec![1, 3]
    );
    assert_eq!(
        ids(
            &c,
            doc! {"$nor": [{"a": {"$type": "number"}}, {"a": Bson::Null}]}
        )
        .await,
        vec![4]
    );
    assert_eq!(
        ids(&c, doc! {"a": {"$not": {"$gt": 4}}}).await,
        vec![1, 4, 5, 6, 8]
    );
}

#[tokio::test]
async fn query_element_operators() {
    let server = TestServer::start();
    let c = query_fixture(&server, "q_elem").await;
    assert_eq!(
        ids(&c, doc! {"a": {"$exists": true}}).await,
        vec![1, 2, 3, 4, 5, 7, 8]
    );
    assert_eq!(ids(&c, doc! {"a": {"$exists": false}}).await, vec![6]);
    assert_eq!(ids(&c, doc! {"a": {"$type": "string"}}).await, vec![4]);
    assert_eq!(ids(&c, doc! {"a": {"$type": 2}}).await, vec![4]);
    assert_eq!(ids(&c, doc! {"a": {"$type": "null"}}).await, vec![5]);
    assert_eq!(ids(&c, doc! {"a": {"$type": "array"}}).await, vec![7]);
    assert_eq!(ids(&c, doc! {"a": {"$type": 1}}).await, vec![8]);
    assert_eq!(
        ids(&c, doc! {"a": {"$type": "number"}}).await,
        vec![1, 2, 3, 7, 8]
    );
    assert_eq!(
        ids(&c, doc! {"a": {"$type": ["string", "double"]}}).await,
        vec![4, 8]
    );
}

#[tokio::test]
async fn query_evaluation_and_array_operators() {
    let server = TestServer::start();
    let c = query_fixture(&server, "q_eval").await;
    assert_eq!(
        ids(&c, doc! {"s": {"$regex": "^b", "$options": "i"}}).await,
        vec![2]
    );
    assert_eq!(
        ids(&c, doc! {"s": {"$regex": "^b"}}).await,
        Vec::<i32>::new()
    );
    assert_eq!(
        ids(
            &c,
            doc! {"s": bson::Regex { pattern: "rr".into(), options: String::new() }}
        )
        .await,
        vec![3]
    );
    assert_eq!(
        ids(&c, doc! {"arr": {"$elemMatch": {"b": {"$gte": 2}}}}).await,
        vec![1, 2]
    );
    assert_eq!(
        ids(&c, doc! {"a": {"$elemMatch": {"$gt": 5, "$lt": 9}}}).await,
        vec![7]
    );
    assert_eq!(ids(&c, doc! {"tags": {"$size": 2}}).await, vec![1]);
    assert_eq!(ids(&c, doc! {"tags": {"$size": 0}}).await, vec![3]);
    assert_eq!(
        ids(&c, doc! {"tags": {"$all": ["x", "y"]}}).await,
        vec![1, 4]
    );
    assert_eq!(ids(&c, doc! {"a": {"$mod": [5, 0]}}).await, vec![2, 3]);
}

#[tokio::test]
async fn query_dotted_paths_through_documents_and_arrays() {
    let server = TestServer::start();
    let c = query_fixture(&server, "q_dot").await;
    assert_eq!(ids(&c, doc! {"sub.v": {"$gte": 20}}).await, vec![2, 3]);
    assert_eq!(ids(&c, doc! {"sub.w": {"$exists": true}}).await, vec![3]);
    assert_eq!(ids(&c, doc! {"arr.b": 3}).await, vec![2]);
    assert_eq!(ids(&c, doc! {"arr.b": {"$gt": 1}}).await, vec![1, 2]);
    assert_eq!(ids(&c, doc! {"tags.1": "y"}).await, vec![1, 4]);
    assert_eq!(ids(&c, doc! {"arr.0.b": 1}).await, vec![1]);
    assert_eq!(ids(&c, doc! {"a.1": 8}).await, vec![7]);
}

#[tokio::test]
async fn sort_uses_mongodb_cross_type_order() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "xsort").await;
    let oid = ObjectId::new();
    let date = bson::DateTime::from_millis(1_700_000_000_000);
    coll.insert_many(vec![
        doc! {"_id": 12, "v": date},
        doc! {"_id": 6, "v": "a"},
        doc! {"_id": 9, "v": oid},
        doc! {"_id": 1, "v": Bson::Null},
        doc! {"_id": 5, "v": 10},
        doc! {"_id": 8, "v": {"x": 1}},
        doc! {"_id": 11, "v": true},
        doc! {"_id": 3, "v": 2.5},
        doc! {"_id": 7, "v": "b"},
        doc! {"_id": 2, "v": 1_i64},
        doc! {"_id": 10, "v": false},
        // arrays sort by their smallest element ascending, their largest descending
        doc! {"_id": 4, "v": [7, "m"]},
    ])
    .await
    .unwrap();
    let asc: Vec<i32> = coll
        .find(doc! {})
        .sort(doc! {"v": 1})
        .await
        .unwrap()
        .try_collect::<Vec<Document>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(asc, vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    let desc: Vec<i32> = coll
        .find(doc! {})
        .sort(doc! {"v": -1})
        .await
        .unwrap()
        .try_collect::<Vec<Document>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(desc, vec![12, 11, 10, 9, 8, 4, 7, 6, 5, 3, 2, 1]);
}

#[tokio::test]
async fn sort_on_compound_keys() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "csort").await;
    coll.insert_many(vec![
        doc! {"_id": 1, "a": 1, "b": 2},
        doc! {"_id": 2, "a": 2, "b": 1},
        doc! {"_id": 3, "a": 1, "b": 1},
        doc! {"_id": 4, "a": 2, "b": 3},
    ])
    .await
    .unwrap();
    let got: Vec<i32> = coll
        .find(doc! {})
        .sort(doc! {"a": 1, "b": -1})
        .await
        .unwrap()
        .try_collect::<Vec<Document>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(got, vec![1, 3, 4, 2]);
}

#[tokio::test]
async fn documents_round_trip_all_common_bson_types() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "types").await;
    let original = doc! {
        "_id": 1,
        "double": 1.5,
        "string": "héllo",
        "doc": {"nested": {"deep": [1, 2, {"x": "y"}]}},
        "array": [1, "two", 3.0, Bson::Null],
        "binary": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0, 1, 2, 255] },
        "oid": ObjectId::parse_str("64b7f0f0f0f0f0f0f0f0f0f0").unwrap(),
        "bool": false,
        "date": bson::DateTime::from_millis(-5),
        "null": Bson::Null,
        "regex": bson::Regex { pattern: "a.c".into(), options: "i".into() },
        "int32": 42,
        "timestamp": bson::Timestamp { time: 10, increment: 3 },
        "int64": 1_i64 << 40,
        "decimal": bson::Decimal128::from_bytes([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x30]),
        "min": Bson::MinKey,
        "max": Bson::MaxKey,
    };
    coll.insert_one(original.clone()).await.unwrap();
    assert_eq!(one(&coll, 1).await, original);
}

#[tokio::test]
async fn positional_operator_updates_matched_element() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "posop").await;
    coll.insert_one(doc! {"_id": 1, "a": [1, 2, 3], "o": [{"k": "x", "v": 1}, {"k": "y", "v": 2}]})
        .await
        .unwrap();
    coll.update_one(doc! {"_id": 1, "a": 2}, doc! {"$set": {"a.$": 20}})
        .await
        .unwrap();
    coll.update_one(doc! {"_id": 1, "o.k": "y"}, doc! {"$inc": {"o.$.v": 10}})
        .await
        .unwrap();
    assert_eq!(
        one(&coll, 1).await,
        doc! {"_id": 1, "a": [1, 20, 3], "o": [{"k": "x", "v": 1}, {"k": "y", "v": 12}]}
    );
}

#[tokio::test]
async fn unknown_query_operator_is_bad_value() {
    let server = TestServer::start();
    let (db, coll) = setup(&server, "badop").await;
    coll.insert_one(doc! {"a": 1}).await.unwrap();
    assert_cmd_error(
        &db,
        doc! {"find": "c", "filter": {"a": {"$frobnicate": 1}}},
        2,
        Some("BadValue"),
    )
    .await;
}

#[tokio::test]
async fn find_on_missing_collection_is_empty() {
    let server = TestServer::start();
    let (db, _coll) = setup(&server, "findmiss").await;
    let reply = run_ok(&db, doc! {"find": "nothing_here", "filter": {}}).await;
    let cursor = reply.get_document("cursor").unwrap();
    assert_eq!(num(cursor, "id"), 0);
    assert!(cursor.get_array("firstBatch").unwrap().is_empty());
    // reading does not create the collection
    assert!(db.list_collection_names().await.unwrap().is_empty());
}

#[tokio::test]
async fn sort_treats_missing_field_like_null() {
    let server = TestServer::start();
    let (_db, coll) = setup(&server, "sortmiss").await;
    coll.insert_many(vec![
        doc! {"_id": 1, "v": 5},
        doc! {"_id": 2},
        doc! {"_id": 3, "v": "s"},
        doc! {"_id": 4, "v": -1},
    ])
    .await
    .unwrap();
    let got: Vec<i32> = coll
        .find(doc! {})
        .sort(doc! {"v": 1, "_id": 1})
        .await
        .unwrap()
        .try_collect::<Vec<Document>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(got, vec![2, 4, 1, 3]);
}
