//! Secondary indexes on regular collections: createIndexes/listIndexes/dropIndexes, the
//! index kinds (compound, descending, multikey, sparse, partial, hashed, unique, hidden),
//! the planner as seen through `explain`, hints, collMod, persistence across restarts and
//! index/data agreement after `kill -9` (checked with `validate`).

use crate::common::*;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::{Collection, Database};

async fn create_index(db: &Database, coll: &str, spec: Document) -> Document {
    run_ok(db, doc! {"createIndexes": coll, "indexes": [spec]}).await
}

async fn explain(db: &Database, cmd: Document) -> Document {
    run_ok(db, doc! {"explain": cmd, "verbosity": "executionStats"}).await
}

/// The access stage under FETCH/SORT/LIMIT wrappers: IXSCAN, COLLSCAN, IDHACK or EOF.
fn access_stage(plan: &Document) -> Document {
    let mut cur = plan.clone();
    while let Ok(input) = cur.get_document("inputStage") {
        cur = input.clone();
    }
    cur
}

fn winning(reply: &Document) -> Document {
    reply
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap()
        .clone()
}

fn exec_stats(reply: &Document) -> (i64, i64, i64) {
    let s = reply.get_document("executionStats").unwrap();
    (
        num(s, "nReturned"),
        num(s, "totalKeysExamined"),
        num(s, "totalDocsExamined"),
    )
}

async fn seed(coll: &Collection<Document>, n: i32) {
    let docs: Vec<Document> = (0..n)
        .map(|i| doc! {"_id": i, "a": i % 10, "b": i, "s": format!("s{i:03}")})
        .collect();
    coll.insert_many(docs).await.unwrap();
}

#[tokio::test]
async fn create_list_and_drop_indexes_with_mongodb_reply_shapes() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ix_ddl");
    let reply = create_index(&db, "c", doc! {"key": {"a": 1}, "name": "a_1"}).await;
    assert_eq!(num(&reply, "numIndexesBefore"), 1);
    assert_eq!(num(&reply, "numIndexesAfter"), 2);
    assert_eq!(reply.get_bool("createdCollectionAutomatically"), Ok(true));
    let again = create_index(&db, "c", doc! {"key": {"a": 1}, "name": "a_1"}).await;
    assert_eq!(again.get_str("note"), Ok("all indexes already exist"));
    assert_eq!(num(&again, "numIndexesAfter"), 2);
    run_ok(
        &db,
        doc! {"createIndexes": "c", "indexes": [
            {"key": {"b": -1, "a": 1}, "name": "b_-1_a_1"},
            {"key": {"t": 1}, "name": "t_ttl", "expireAfterSeconds": 3600},
            {"key": {"h": "hashed"}, "name": "h_hashed"},
            {"key": {"u": 1}, "name": "u_1", "unique": true, "sparse": true},
            {"key": {"p": 1}, "name": "p_1", "partialFilterExpression": {"p": {"$gt": 5}}},
            {"key": {"x": 1}, "name": "x_1", "hidden": true},
        ]},
    )
    .await;
    let listed = list_indexes(&db, "c").await;
    assert_eq!(listed[0], doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"});
    assert_eq!(listed[1], doc! {"v": 2, "key": {"a": 1}, "name": "a_1"});
    assert_eq!(
        listed[3],
        doc! {"v": 2, "key": {"t": 1}, "name": "t_ttl", "expireAfterSeconds": 3600_i64}
    );
    assert_eq!(
        listed[5],
        doc! {"v": 2, "key": {"u": 1}, "name": "u_1", "unique": true, "sparse": true}
    );
    assert_eq!(listed[7].get_bool("hidden"), Ok(true));
    assert_eq!(listed.len(), 8);

    // Conflicts and bad specs.
    assert_cmd_error(
        &db,
        doc! {"createIndexes": "c", "indexes": [{"key": {"zz": 1}, "name": "a_1"}]},
        86,
        Some("IndexKeySpecsConflict"),
    )
    .await;
    assert_cmd_error(
        &db,
        doc! {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "other"}]},
        85,
        Some("IndexOptionsConflict"),
    )
    .await;
    for bad in [
        doc! {"key": {"t": "text"}, "name": "t_text"},
        doc! {"key": {"g": "geoHaystack"}, "name": "g"},
        doc! {"key": {"$**": 1}, "name": "w"},
        doc! {"key": {"a": 1, "b": 1}, "name": "ab", "expireAfterSeconds": 1},
    ] {
        assert_cmd_error(
            &db,
            doc! {"createIndexes": "c", "indexes": [bad]},
            67,
            Some("CannotCreateIndex"),
        )
        .await;
    }
    // A collation MongoDB does not know (collated indexes themselves: test_collation_indexes.py).
    assert_cmd_error(
        &db,
        doc! {"createIndexes": "c", "indexes": [{"key": {"q": 1}, "name": "q", "collation": {"locale": "xx"}}]},
        2,
        Some("BadValue"),
    )
    .await;

    // dropIndexes: by name, by key pattern, by list, "*", and the errors.
    let r = run_ok(&db, doc! {"dropIndexes": "c", "index": "a_1"}).await;
    assert_eq!(num(&r, "nIndexesWas"), 8);
    run_ok(&db, doc! {"dropIndexes": "c", "index": {"b": -1, "a": 1}}).await;
    run_ok(
        &db,
        doc! {"dropIndexes": "c", "index": ["t_ttl", "h_hashed"]},
    )
    .await;
    assert_cmd_error(
        &db,
        doc! {"dropIndexes": "c", "index": "_id_"},
        72,
        Some("InvalidOptions"),
    )
    .await;
    assert_cmd_error(
        &db,
        doc! {"dropIndexes": "c", "index": "nope"},
        27,
        Some("IndexNotFound"),
    )
    .await;
    assert_eq!(list_indexes(&db, "c").await.len(), 4);
    let r = run_ok(&db, doc! {"dropIndexes": "c", "index": "*"}).await;
    assert_eq!(num(&r, "nIndexesWas"), 4);
    assert_eq!(list_indexes(&db, "c").await.len(), 1);

    // The driver's own helpers agree.
    let coll = db.collection::<Document>("c");
    coll.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"k": 1, "j": -1})
            .build(),
    )
    .await
    .unwrap();
    let names = coll.list_index_names().await.unwrap();
    assert_eq!(names, vec!["_id_".to_string(), "k_1_j_-1".to_string()]);
    coll.drop_index("k_1_j_-1").await.unwrap();
    let dropped = run_ok(&db, doc! {"drop": "c"}).await;
    assert_eq!(num(&dropped, "nIndexesWas"), 1);
}

#[tokio::test]
async fn planner_uses_indexes_and_explain_reports_the_work() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ix_plan");
    let coll = db.collection::<Document>("c");
    seed(&coll, 200).await;

    // No index: a collection scan examines every document.
    let e = explain(&db, doc! {"find": "c", "filter": {"a": 3}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("stage"), Ok("COLLSCAN"));
    assert_eq!(exec_stats(&e), (20, 0, 200));
    assert_eq!(
        e.get_document("queryPlanner")
            .unwrap()
            .get_document("parsedQuery")
            .unwrap(),
        &doc! {"a": {"$eq": 3}}
    );

    create_index(&db, "c", doc! {"key": {"a": 1}, "name": "a_1"}).await;
    let e = explain(&db, doc! {"find": "c", "filter": {"a": 3}}).await;
    let w = winning(&e);
    assert_eq!(w.get_str("stage"), Ok("FETCH"));
    let ix = access_stage(&w);
    assert_eq!(ix.get_str("stage"), Ok("IXSCAN"));
    assert_eq!(ix.get_str("indexName"), Ok("a_1"));
    assert_eq!(ix.get_document("keyPattern").unwrap(), &doc! {"a": 1});
    assert_eq!(ix.get_bool("isMultiKey"), Ok(false));
    assert_eq!(ix.get_str("direction"), Ok("forward"));
    assert_eq!(
        ix.get_document("indexBounds").unwrap(),
        &doc! {"a": ["[3, 3]"]}
    );
    assert_eq!(exec_stats(&e), (20, 20, 20));
    let found: Vec<Document> = coll
        .find(doc! {"a": 3})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 20);
    assert!(found.iter().all(|d| d.get_i32("a") == Ok(3)));

    // $in and ranges.
    let e = explain(&db, doc! {"find": "c", "filter": {"a": {"$in": [1, 2]}}}).await;
    assert_eq!(exec_stats(&e), (40, 40, 40));
    let e = explain(
        &db,
        doc! {"find": "c", "filter": {"a": {"$gte": 7, "$lt": 9}}},
    )
    .await;
    assert_eq!(exec_stats(&e), (40, 40, 40));
    assert_eq!(
        access_stage(&winning(&e))
            .get_document("indexBounds")
            .unwrap(),
        &doc! {"a": ["[7, 9)"]}
    );
    // A type-bracketed range does not see strings.
    coll.insert_one(doc! {"_id": "str", "a": "x"})
        .await
        .unwrap();
    let n = coll.count_documents(doc! {"a": {"$gt": 8}}).await.unwrap();
    assert_eq!(n, 20);

    // Compound: equality then range; the best prefix wins.
    create_index(
        &db,
        "c",
        doc! {"key": {"a": 1, "b": -1}, "name": "a_1_b_-1"},
    )
    .await;
    let e = explain(
        &db,
        doc! {"find": "c", "filter": {"a": 5, "b": {"$gt": 100}}},
    )
    .await;
    let ix = access_stage(&winning(&e));
    assert_eq!(ix.get_str("indexName"), Ok("a_1_b_-1"));
    let expected: Vec<Document> = coll
        .find(doc! {"a": 5, "b": {"$gt": 100}})
        .hint(mongodb::options::Hint::Name("_id_".into()))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        exec_stats(&e),
        (
            expected.len() as i64,
            expected.len() as i64,
            expected.len() as i64
        )
    );

    // Sort by the index: no SORT stage, results in order, limit stops early.
    let e = explain(
        &db,
        doc! {"find": "c", "filter": {"a": 5}, "sort": {"b": -1}, "limit": 3},
    )
    .await;
    let w = winning(&e);
    assert_eq!(w.get_str("stage"), Ok("LIMIT"));
    assert_eq!(
        w.get_document("inputStage").unwrap().get_str("stage"),
        Ok("FETCH")
    );
    assert_eq!(exec_stats(&e).0, 3);
    assert!(exec_stats(&e).1 <= 4);
    let sorted: Vec<Document> = coll
        .find(doc! {"a": 5})
        .sort(doc! {"b": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let bs: Vec<i32> = sorted.iter().map(|d| d.get_i32("b").unwrap()).collect();
    let mut want = bs.clone();
    want.sort();
    assert_eq!(bs, want);
    assert_eq!(bs.len(), 20);

    // Hints by name and key pattern; $natural; a bad hint.
    let e = explain(&db, doc! {"find": "c", "filter": {"a": 5}, "hint": "a_1"}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("indexName"), Ok("a_1"));
    let e = explain(
        &db,
        doc! {"find": "c", "filter": {"a": 5}, "hint": {"a": 1, "b": -1}},
    )
    .await;
    assert_eq!(
        access_stage(&winning(&e)).get_str("indexName"),
        Ok("a_1_b_-1")
    );
    let e = explain(
        &db,
        doc! {"find": "c", "filter": {"a": 5}, "hint": {"$natural": 1}},
    )
    .await;
    assert_eq!(access_stage(&winning(&e)).get_str("stage"), Ok("COLLSCAN"));
    assert_cmd_error(
        &db,
        doc! {"find": "c", "filter": {"a": 5}, "hint": "nope"},
        2,
        Some("BadValue"),
    )
    .await;
    let hinted = coll
        .find(doc! {"b": {"$lt": 5}})
        .hint(mongodb::options::Hint::Keys(doc! {"a": 1}))
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    assert_eq!(hinted.len(), 5);

    // _id equality is a point lookup; _id ranges use the _id index.
    let e = explain(&db, doc! {"find": "c", "filter": {"_id": 7}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("stage"), Ok("IDHACK"));
    let e = explain(&db, doc! {"find": "c", "filter": {"_id": {"$lt": 10}}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("indexName"), Ok("_id_"));
    assert_eq!(exec_stats(&e), (10, 10, 10));

    // count, distinct, update, delete and findAndModify explain through the same planner.
    for cmd in [
        doc! {"count": "c", "query": {"a": 4}},
        doc! {"distinct": "c", "key": "b", "query": {"a": 4}},
        doc! {"update": "c", "updates": [{"q": {"a": 4}, "u": {"$set": {"z": 1}}}]},
        doc! {"delete": "c", "deletes": [{"q": {"a": 4}, "limit": 0}]},
        doc! {"findAndModify": "c", "query": {"a": 4}, "remove": true},
    ] {
        let e = explain(&db, cmd.clone()).await;
        assert_eq!(
            access_stage(&winning(&e)).get_str("stage"),
            Ok("IXSCAN"),
            "{cmd}"
        );
    }
    // Writes honour hints too; a bad hint is a write error.
    let r = run_ok(&db, doc! {"update": "c", "updates": [{"q": {"a": 6}, "u": {"$set": {"w": 1}}, "multi": true, "hint": "a_1_b_-1"}]}).await;
    assert_eq!(num(&r, "nModified"), 20);
    let r = run_ok(
        &db,
        doc! {"update": "c", "updates": [{"q": {"a": 6}, "u": {"$set": {"w": 2}}, "hint": "zz"}]},
    )
    .await;
    let we = r.get_array("writeErrors").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(num(&we, "code"), 2);
    let r = run_ok(
        &db,
        doc! {"delete": "c", "deletes": [{"q": {"a": 6}, "limit": 0, "hint": {"nope": 1}}]},
    )
    .await;
    assert!(r.get_array("writeErrors").is_ok());
    assert_cmd_error(
        &db,
        doc! {"findAndModify": "c", "query": {"a": 6}, "remove": true, "hint": "zz"},
        2,
        Some("BadValue"),
    )
    .await;
    assert_eq!(
        coll.count_documents(doc! {"a": 6, "w": 1}).await.unwrap(),
        20
    );
    // Explain does not write.
    assert_eq!(coll.count_documents(doc! {"a": 4}).await.unwrap(), 20);
    let qp = run_ok(
        &db,
        doc! {"explain": {"count": "c", "query": {"a": 4}}, "verbosity": "queryPlanner"},
    )
    .await;
    assert!(qp.get("executionStats").is_none());
    assert_eq!(winning(&qp).get_str("stage"), Ok("COUNT"));

    // aggregate: a $match/$sort pipeline gets a top-level queryPlanner, others a $cursor stage.
    let e = run_ok(
        &db,
        doc! {"explain": {"aggregate": "c", "pipeline": [{"$match": {"a": 2}}], "cursor": {}}},
    )
    .await;
    assert_eq!(access_stage(&winning(&e)).get_str("indexName"), Ok("a_1"));
    let e = run_ok(&db, doc! {"aggregate": "c", "pipeline": [{"$match": {"a": 2}}, {"$group": {"_id": "$a"}}], "explain": true}).await;
    let stages = e.get_array("stages").unwrap();
    let cursor = stages[0]
        .as_document()
        .unwrap()
        .get_document("$cursor")
        .unwrap();
    assert_eq!(
        access_stage(
            cursor
                .get_document("queryPlanner")
                .unwrap()
                .get_document("winningPlan")
                .unwrap()
        )
        .get_str("stage"),
        Ok("IXSCAN")
    );
    assert_eq!(
        stages[1].as_document().unwrap().keys().next().unwrap(),
        "$group"
    );
    let n: Vec<Document> = coll
        .aggregate(vec![doc! {"$match": {"a": 2}}, doc! {"$count": "n"}])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(n[0].get_i32("n"), Ok(20));
}

#[tokio::test]
async fn hidden_indexes_are_not_used_until_unhidden_with_coll_mod() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ix_hidden");
    seed(&db.collection("c"), 50).await;
    create_index(
        &db,
        "c",
        doc! {"key": {"b": 1}, "name": "b_1", "hidden": true},
    )
    .await;
    let e = explain(&db, doc! {"find": "c", "filter": {"b": 3}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("stage"), Ok("COLLSCAN"));
    assert_cmd_error(
        &db,
        doc! {"find": "c", "filter": {"b": 3}, "hint": "b_1"},
        2,
        Some("BadValue"),
    )
    .await;
    let r = run_ok(
        &db,
        doc! {"collMod": "c", "index": {"name": "b_1", "hidden": false}},
    )
    .await;
    assert_eq!(r.get_bool("hidden_old"), Ok(true));
    assert_eq!(r.get_bool("hidden_new"), Ok(false));
    let e = explain(&db, doc! {"find": "c", "filter": {"b": 3}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("indexName"), Ok("b_1"));
    assert_eq!(exec_stats(&e), (1, 1, 1));
    let r = run_ok(
        &db,
        doc! {"collMod": "c", "index": {"keyPattern": {"b": 1}, "hidden": true}},
    )
    .await;
    assert_eq!(r.get_bool("hidden_new"), Ok(true));
    let e = explain(&db, doc! {"find": "c", "filter": {"b": 3}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("stage"), Ok("COLLSCAN"));
    assert_cmd_error(
        &db,
        doc! {"collMod": "c", "index": {"name": "zz", "hidden": true}},
        27,
        Some("IndexNotFound"),
    )
    .await;
    // MongoDB 5.1+ turns a single-field index into a TTL index through collMod.
    run_ok(
        &db,
        doc! {"collMod": "c", "index": {"name": "b_1", "expireAfterSeconds": 5}},
    )
    .await;

    create_index(
        &db,
        "c",
        doc! {"key": {"t": 1}, "name": "t_1", "expireAfterSeconds": 100},
    )
    .await;
    let r = run_ok(
        &db,
        doc! {"collMod": "c", "index": {"name": "t_1", "expireAfterSeconds": 50}},
    )
    .await;
    assert_eq!(num(&r, "expireAfterSeconds_old"), 100);
    assert_eq!(num(&r, "expireAfterSeconds_new"), 50);
    let listed = list_indexes(&db, "c").await;
    assert_eq!(num(&listed[2], "expireAfterSeconds"), 50);
}

fn write_error_of(e: &mongodb::error::Error) -> (i32, String, Option<Document>) {
    match &*e.kind {
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            (w.code, w.message.clone(), w.details.clone())
        }
        ErrorKind::InsertMany(im) => {
            let w = &im.write_errors.as_ref().unwrap()[0];
            (w.code, w.message.clone(), w.details.clone())
        }
        ErrorKind::Command(c) => (c.code, c.message.clone(), None),
        other => panic!("unexpected error {other:?}"),
    }
}

#[tokio::test]
async fn unique_indexes_reject_duplicates_on_every_write_path() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ix_unique");
    let coll = db.collection::<Document>("c");
    coll.insert_many(vec![
        doc! {"_id": 1, "e": "a@x"},
        doc! {"_id": 2, "e": "b@x"},
    ])
    .await
    .unwrap();
    create_index(
        &db,
        "c",
        doc! {"key": {"e": 1}, "name": "e_1", "unique": true},
    )
    .await;

    let err = coll
        .insert_one(doc! {"_id": 3, "e": "a@x"})
        .await
        .unwrap_err();
    let (code, msg, _) = write_error_of(&err);
    assert_eq!(code, 11000);
    assert_eq!(
        msg,
        "E11000 duplicate key error collection: ix_unique.c index: e_1 dup key: { e: \"a@x\" }"
    );
    let raw = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 4, "e": "b@x"}]})
        .await
        .unwrap();
    let we = raw.get_array("writeErrors").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(we.get_document("keyPattern").unwrap(), &doc! {"e": 1});
    assert_eq!(we.get_document("keyValue").unwrap(), &doc! {"e": "b@x"});

    let err = coll
        .update_one(doc! {"_id": 2}, doc! {"$set": {"e": "a@x"}})
        .await
        .unwrap_err();
    assert_eq!(write_error_of(&err).0, 11000);
    let err = coll
        .find_one_and_update(doc! {"_id": 2}, doc! {"$set": {"e": "a@x"}})
        .await
        .unwrap_err();
    assert_eq!(err_code(&err), Some(11000));
    // Changing one's own key, or moving to a free key, is fine.
    coll.update_one(doc! {"_id": 2}, doc! {"$set": {"e": "c@x"}})
        .await
        .unwrap();
    coll.insert_one(doc! {"_id": 5, "e": "b@x"}).await.unwrap();
    // A missing field is indexed as null: only one document may lack it.
    coll.insert_one(doc! {"_id": 6}).await.unwrap();
    let err = coll.insert_one(doc! {"_id": 7}).await.unwrap_err();
    assert_eq!(write_error_of(&err).0, 11000);
    // Duplicates inside one unordered batch.
    let raw = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 8, "e": "z"}, {"_id": 9, "e": "z"}], "ordered": false})
        .await
        .unwrap();
    assert_eq!(num(&raw, "n"), 1);

    // Building a unique index over existing duplicates fails and leaves no index.
    coll.insert_many(vec![
        doc! {"_id": 20, "d": 1, "e": "d1"},
        doc! {"_id": 21, "d": 1, "e": "d2"},
    ])
    .await
    .unwrap();
    assert_cmd_error(
        &db,
        doc! {"createIndexes": "c", "indexes": [{"key": {"d": 1}, "name": "d_1", "unique": true}]},
        11000,
        Some("DuplicateKey"),
    )
    .await;
    let names: Vec<String> = list_indexes(&db, "c")
        .await
        .iter()
        .map(|d| d.get_str("name").unwrap().to_string())
        .collect();
    assert_eq!(names, vec!["_id_", "e_1"]);
    let v = run_ok(&db, doc! {"validate": "c"}).await;
    assert_eq!(v.get_bool("valid"), Ok(true), "{v}");
}

#[tokio::test]
async fn multikey_sparse_partial_and_hashed_indexes() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ix_kinds");
    let coll = db.collection::<Document>("c");
    coll.insert_many(vec![
        doc! {"_id": 1, "tags": ["a", "b"], "n": 1, "q": 10},
        doc! {"_id": 2, "tags": ["b", "c"], "n": 2},
        doc! {"_id": 3, "tags": "c", "q": 3},
        doc! {"_id": 4, "tags": [], "n": 4, "q": 20},
    ])
    .await
    .unwrap();

    // Multikey: one entry per element; a document appears once.
    create_index(&db, "c", doc! {"key": {"tags": 1}, "name": "tags_1"}).await;
    let e = explain(
        &db,
        doc! {"find": "c", "filter": {"tags": {"$in": ["a", "b"]}}},
    )
    .await;
    let ix = access_stage(&winning(&e));
    assert_eq!(ix.get_bool("isMultiKey"), Ok(true));
    assert_eq!(exec_stats(&e).0, 2);
    let found: Vec<Document> = coll
        .find(doc! {"tags": "c"})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    // Two array fields in one compound key: CannotIndexParallelArrays.
    create_index(
        &db,
        "c",
        doc! {"key": {"tags": 1, "arr": 1}, "name": "tags_arr"},
    )
    .await;
    let err = coll
        .insert_one(doc! {"_id": 9, "tags": [1], "arr": [2]})
        .await
        .unwrap_err();
    assert_eq!(write_error_of(&err).0, 171);
    run_ok(&db, doc! {"dropIndexes": "c", "index": "tags_arr"}).await;

    // Sparse: documents without the field are not indexed; {n: null} cannot use it.
    create_index(
        &db,
        "c",
        doc! {"key": {"n": 1}, "name": "n_1", "sparse": true},
    )
    .await;
    let v = run_ok(&db, doc! {"validate": "c"}).await;
    assert_eq!(num(v.get_document("keysPerIndex").unwrap(), "n_1"), 3);
    let e = explain(&db, doc! {"find": "c", "filter": {"n": {"$gte": 2}}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("indexName"), Ok("n_1"));
    assert_eq!(exec_stats(&e).0, 2);
    let e = explain(&db, doc! {"find": "c", "filter": {"n": null}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("stage"), Ok("COLLSCAN"));
    assert_eq!(exec_stats(&e).0, 1);

    // Partial: used only when the query implies the partial filter.
    create_index(
        &db,
        "c",
        doc! {"key": {"q": 1}, "name": "q_1", "partialFilterExpression": {"q": {"$gt": 5}}},
    )
    .await;
    let v = run_ok(&db, doc! {"validate": "c"}).await;
    assert_eq!(num(v.get_document("keysPerIndex").unwrap(), "q_1"), 2);
    let e = explain(&db, doc! {"find": "c", "filter": {"q": 10}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("indexName"), Ok("q_1"));
    assert_eq!(exec_stats(&e).0, 1);
    let e = explain(&db, doc! {"find": "c", "filter": {"q": {"$gt": 5}}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("indexName"), Ok("q_1"));
    let e = explain(&db, doc! {"find": "c", "filter": {"q": 3}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("stage"), Ok("COLLSCAN"));
    assert_eq!(exec_stats(&e).0, 1);

    // Hashed: equality uses it, ranges do not; arrays are refused.
    create_index(&db, "c", doc! {"key": {"h": "hashed"}, "name": "h_hashed"}).await;
    coll.insert_many(
        (100..150)
            .map(|i| doc! {"_id": i, "h": i})
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    let e = explain(&db, doc! {"find": "c", "filter": {"h": 120}}).await;
    assert_eq!(
        access_stage(&winning(&e)).get_str("indexName"),
        Ok("h_hashed")
    );
    assert_eq!(exec_stats(&e), (1, 1, 1));
    let e = explain(&db, doc! {"find": "c", "filter": {"h": {"$gt": 120}}}).await;
    assert_eq!(access_stage(&winning(&e)).get_str("stage"), Ok("COLLSCAN"));
    assert_eq!(exec_stats(&e).0, 29);
    let err = coll
        .insert_one(doc! {"_id": 200, "h": [1]})
        .await
        .unwrap_err();
    assert_eq!(write_error_of(&err).0, 16766);

    // Updates and deletes keep every index in step.
    coll.update_many(
        doc! {"tags": "b"},
        doc! {"$push": {"tags": "z"}, "$unset": {"n": ""}},
    )
    .await
    .unwrap();
    coll.delete_one(doc! {"q": 10}).await.unwrap();
    let found: Vec<Document> = coll
        .find(doc! {"tags": "z"})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    let v = run_ok(&db, doc! {"validate": "c"}).await;
    assert_eq!(v.get_bool("valid"), Ok(true), "{v}");
    assert_eq!(num(&v, "nIndexes"), 5);
}

#[tokio::test]
async fn indexes_survive_restart_and_rename() {
    let mut server = TestServer::start();
    {
        let client = server.client().await;
        let db = client.database("ix_restart");
        seed(&db.collection("c"), 30).await;
        create_index(
            &db,
            "c",
            doc! {"key": {"s": -1}, "name": "s_-1", "unique": true},
        )
        .await;
        create_index(&db, "c", doc! {"key": {"a": 1, "b": 1}, "name": "a_b"}).await;
        run_ok(
            &client.database("admin"),
            doc! {"renameCollection": "ix_restart.c", "to": "ix_restart.d"},
        )
        .await;
        client.shutdown().await;
    }
    server.restart();
    let client = server.client().await;
    let db = client.database("ix_restart");
    let listed = list_indexes(&db, "d").await;
    assert_eq!(
        listed,
        vec![
            doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"},
            doc! {"v": 2, "key": {"s": -1}, "name": "s_-1", "unique": true},
            doc! {"v": 2, "key": {"a": 1, "b": 1}, "name": "a_b"},
        ]
    );
    let e = explain(
        &db,
        doc! {"find": "d", "filter": {"a": 1, "b": {"$lte": 11}}},
    )
    .await;
    assert_eq!(access_stage(&winning(&e)).get_str("indexName"), Ok("a_b"));
    assert_eq!(exec_stats(&e), (2, 2, 2));
    let err = db
        .collection::<Document>("d")
        .insert_one(doc! {"s": "s005"})
        .await
        .unwrap_err();
    assert_eq!(write_error_of(&err).0, 11000);
    let v = run_ok(&db, doc! {"validate": "d"}).await;
    assert_eq!(v.get_bool("valid"), Ok(true), "{v}");
    // Dropping the database drops the index trees with it.
    db.drop().await.unwrap();
    assert_cmd_error(
        &db,
        doc! {"listIndexes": "d"},
        26,
        Some("NamespaceNotFound"),
    )
    .await;
}

#[tokio::test]
async fn indexes_and_documents_agree_after_kill_9_under_write_load() {
    const TASKS: i64 = 4;
    let mut server = TestServer::start();
    {
        let client = server.client().await;
        let db = client.database("ix_crash");
        create_index(&db, "c", doc! {"key": {"k": 1}, "name": "k_1"}).await;
        create_index(
            &db,
            "c",
            doc! {"key": {"u": 1}, "name": "u_1", "unique": true, "sparse": true},
        )
        .await;
        create_index(&db, "c", doc! {"key": {"arr": 1}, "name": "arr_1"}).await;
        let mut handles = Vec::new();
        for t in 0..TASKS {
            let coll = db.collection::<Document>("c");
            handles.push(tokio::spawn(async move {
                let mut i: i64 = 0;
                loop {
                    let id = t * 1_000_000 + i;
                    let r = coll
                        .insert_one(doc! {"_id": id, "k": i % 7, "u": id, "arr": [i, i + 1]})
                        .await;
                    if r.is_err() {
                        return;
                    }
                    if i % 3 == 0 {
                        let _ = coll
                            .update_one(
                                doc! {"_id": id},
                                doc! {"$set": {"k": 100 + i % 5}, "$push": {"arr": -i}},
                            )
                            .await;
                    }
                    if i % 5 == 0 {
                        let _ = coll.delete_one(doc! {"_id": id - 1}).await;
                    }
                    i += 1;
                }
            }));
        }
        // Let the load run until a few hundred documents exist, then kill the server.
        let coll = db.collection::<Document>("c");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while coll.estimated_document_count().await.unwrap_or(0) < 300
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        server.kill9();
        for h in handles {
            let _ = h.await;
        }
    }
    server.restart();
    let client = server.client().await;
    let db = client.database("ix_crash");
    let v = run_ok(&db, doc! {"validate": "c"}).await;
    assert_eq!(v.get_bool("valid"), Ok(true), "{v}");
    let nrecords = num(&v, "nrecords");
    assert!(nrecords > 0);
    let keys = v.get_document("keysPerIndex").unwrap();
    assert_eq!(num(keys, "u_1"), nrecords);
    assert_eq!(num(keys, "_id_"), nrecords);
    // Every document is found through the index and through a collection scan alike.
    let coll = db.collection::<Document>("c");
    let ids = |docs: Vec<Document>| {
        let mut v: Vec<Bson> = docs
            .into_iter()
            .map(|d| d.get("_id").unwrap().clone())
            .collect();
        v.sort_by_key(|b| b.as_i64().unwrap_or_default());
        v
    };
    for filter in [
        doc! {"k": {"$gte": 0}},
        doc! {"u": {"$gte": 0}},
        doc! {"arr": {"$gte": 0}},
    ] {
        let by_index: Vec<Document> = coll
            .find(filter.clone())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let by_scan: Vec<Document> = coll
            .find(filter.clone())
            .hint(mongodb::options::Hint::Keys(doc! {"$natural": 1}))
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(ids(by_index), ids(by_scan), "{filter}");
    }
}
