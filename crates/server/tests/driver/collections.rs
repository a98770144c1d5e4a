//! Databases, collections and index listing.

use crate::common::*;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;

async fn names_of_collections(db: &mongodb::Database) -> Vec<String> {
    let mut names = db.list_collection_names().await.expect("listCollections");
    names.sort();
    names
}

#[tokio::test]
async fn list_databases_reports_sizes_and_empty() {
    let server = TestServer::start();
    let client = server.client().await;
    client
        .database("lda")
        .collection::<Document>("c")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    client
        .database("ldb")
        .collection::<Document>("c")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    let reply = run_ok(&client.database("admin"), doc! {"listDatabases": 1}).await;
    let dbs = reply.get_array("databases").expect("databases");
    let mut found = 0;
    for d in dbs {
        let d = d.as_document().expect("database entry is a document");
        let name = d.get_str("name").expect("name");
        assert!(d.contains_key("sizeOnDisk"), "{d}");
        assert!(d.get_bool("empty").is_ok(), "{d}");
        if name == "lda" || name == "ldb" {
            found += 1;
            assert_eq!(d.get_bool("empty").ok(), Some(false), "{d}");
        }
    }
    assert_eq!(found, 2, "{reply}");
    assert!(reply.contains_key("totalSize"), "{reply}");
}

#[tokio::test]
async fn list_databases_filter_and_name_only() {
    let server = TestServer::start();
    let client = server.client().await;
    for name in ["fa", "fb", "gc"] {
        client
            .database(name)
            .collection::<Document>("c")
            .insert_one(doc! {"x": 1})
            .await
            .unwrap();
    }
    let reply = run_ok(
        &client.database("admin"),
        doc! {"listDatabases": 1, "filter": {"name": {"$regex": "^f"}}},
    )
    .await;
    let mut names: Vec<String> = reply
        .get_array("databases")
        .unwrap()
        .iter()
        .map(|d| {
            d.as_document()
                .unwrap()
                .get_str("name")
                .unwrap()
                .to_string()
        })
        .collect();
    names.sort();
    assert_eq!(names, vec!["fa", "fb"]);

    let reply = run_ok(
        &client.database("admin"),
        doc! {"listDatabases": 1, "nameOnly": true},
    )
    .await;
    let dbs = reply.get_array("databases").unwrap();
    assert!(dbs.len() >= 3);
    for d in dbs {
        let d = d.as_document().unwrap();
        assert_eq!(
            d.keys().collect::<Vec<_>>(),
            vec!["name"],
            "nameOnly entry: {d}"
        );
    }
    // the driver helper agrees
    let mut via_driver = client.list_database_names().await.unwrap();
    via_driver.sort();
    for name in ["fa", "fb", "gc"] {
        assert!(via_driver.contains(&name.to_string()), "{via_driver:?}");
    }
}

#[tokio::test]
async fn list_collections_cursor_shape_and_filter() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("lc");
    db.create_collection("alpha").await.unwrap();
    db.create_collection("beta").await.unwrap();
    db.collection::<Document>("gamma")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();

    let reply = run_ok(&db, doc! {"listCollections": 1}).await;
    let cursor = reply.get_document("cursor").expect("cursor");
    assert_eq!(num(cursor, "id"), 0, "{reply}");
    assert_eq!(
        cursor.get_str("ns").ok(),
        Some("lc.$cmd.listCollections"),
        "{reply}"
    );
    let batch = cursor.get_array("firstBatch").expect("firstBatch");
    let mut names: Vec<&str> = batch
        .iter()
        .map(|b| {
            let d = b.as_document().unwrap();
            assert_eq!(d.get_str("type").ok(), Some("collection"), "{d}");
            assert!(d.get_document("options").is_ok(), "{d}");
            assert!(d.get_document("info").is_ok(), "{d}");
            d.get_str("name").unwrap()
        })
        .collect();
    names.sort();
    assert_eq!(names, vec!["alpha", "beta", "gamma"]);

    let reply = run_ok(&db, doc! {"listCollections": 1, "filter": {"name": "beta"}}).await;
    let batch = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 1, "{reply}");
    assert_eq!(
        batch[0].as_document().unwrap().get_str("name").ok(),
        Some("beta")
    );

    let reply = run_ok(&db, doc! {"listCollections": 1, "nameOnly": true}).await;
    let batch = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 3, "{reply}");
    for b in batch {
        let d = b.as_document().unwrap();
        assert!(d.contains_key("name") && d.contains_key("type"), "{d}");
        assert!(
            !d.contains_key("options"),
            "nameOnly entries carry only name and type: {d}"
        );
    }

    // driver helper with a filter
    let specs: Vec<_> = db
        .list_collections()
        .filter(doc! {"name": {"$in": ["alpha", "gamma"]}})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut names: Vec<String> = specs.into_iter().map(|s| s.name).collect();
    names.sort();
    assert_eq!(names, vec!["alpha", "gamma"]);
}

#[tokio::test]
async fn create_existing_collection_with_other_options_is_namespace_exists() {
    // MongoDB 7.0: creating an existing collection with identical options is a no-op success;
    // with different options it fails with NamespaceExists (48).
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cr");
    run_ok(&db, doc! {"create": "c"}).await;
    run_ok(&db, doc! {"create": "c"}).await;
    assert_cmd_error(
        &db,
        doc! {"create": "c", "validationAction": "warn"},
        48,
        Some("NamespaceExists"),
    )
    .await;
    db.collection::<Document>("d")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    assert_cmd_error(
        &db,
        doc! {"create": "d", "validationLevel": "moderate"},
        48,
        Some("NamespaceExists"),
    )
    .await;
    assert_eq!(names_of_collections(&db).await, vec!["c", "d"]);
}

#[tokio::test]
async fn drop_removes_collection_and_its_documents() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("dr");
    let coll = db.collection::<Document>("c");
    coll.insert_many(vec![doc! {"a": 1}, doc! {"a": 2}])
        .await
        .unwrap();
    db.collection::<Document>("keep")
        .insert_one(doc! {"a": 1})
        .await
        .unwrap();
    run_ok(&db, doc! {"drop": "c"}).await;
    assert_eq!(names_of_collections(&db).await, vec!["keep"]);
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 0);
    // the driver helper works too
    db.collection::<Document>("keep").drop().await.unwrap();
    assert!(names_of_collections(&db).await.is_empty());
}

#[tokio::test]
async fn drop_missing_collection_is_ok() {
    // MongoDB 7.0 (wire version 21) made dropping a missing collection a no-op success.
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("drm");
    run_ok(&db, doc! {"drop": "nope"}).await;
    db.collection::<Document>("nope").drop().await.unwrap();
}

#[tokio::test]
async fn drop_database_removes_all_collections() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("ddb");
    db.collection::<Document>("a")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    db.collection::<Document>("b")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    let other = client.database("ddb_other");
    other
        .collection::<Document>("a")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    let reply = run_ok(&db, doc! {"dropDatabase": 1}).await;
    assert_eq!(ok_value(&reply), Some(1.0));
    assert!(names_of_collections(&db).await.is_empty());
    let dbs = client.list_database_names().await.unwrap();
    assert!(!dbs.contains(&"ddb".to_string()), "{dbs:?}");
    assert!(dbs.contains(&"ddb_other".to_string()), "{dbs:?}");
    assert_eq!(
        other
            .collection::<Document>("a")
            .count_documents(doc! {})
            .await
            .unwrap(),
        1
    );
    // dropping a database that does not exist is fine
    run_ok(&client.database("never_existed"), doc! {"dropDatabase": 1}).await;
}

#[tokio::test]
async fn rename_collection_moves_documents() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("rn");
    db.collection::<Document>("src")
        .insert_many(vec![doc! {"_id": 1}, doc! {"_id": 2}])
        .await
        .unwrap();
    run_ok(
        &client.database("admin"),
        doc! {"renameCollection": "rn.src", "to": "rn.dst"},
    )
    .await;
    assert_eq!(names_of_collections(&db).await, vec!["dst"]);
    let ids: Vec<Document> = db
        .collection::<Document>("dst")
        .find(doc! {})
        .sort(doc! {"_id": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids, vec![doc! {"_id": 1}, doc! {"_id": 2}]);
}

#[tokio::test]
async fn rename_collection_onto_existing_target_needs_drop_target() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("rt");
    let admin = client.database("admin");
    db.collection::<Document>("a")
        .insert_one(doc! {"_id": "from_a"})
        .await
        .unwrap();
    db.collection::<Document>("b")
        .insert_one(doc! {"_id": "from_b"})
        .await
        .unwrap();
    assert_cmd_error(
        &admin,
        doc! {"renameCollection": "rt.a", "to": "rt.b"},
        48,
        Some("NamespaceExists"),
    )
    .await;
    // nothing changed
    assert_eq!(names_of_collections(&db).await, vec!["a", "b"]);
    run_ok(
        &admin,
        doc! {"renameCollection": "rt.a", "to": "rt.b", "dropTarget": true},
    )
    .await;
    assert_eq!(names_of_collections(&db).await, vec!["b"]);
    let docs: Vec<Document> = db
        .collection::<Document>("b")
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(docs, vec![doc! {"_id": "from_a"}]);
}

#[tokio::test]
async fn rename_missing_source_is_namespace_not_found() {
    let server = TestServer::start();
    let client = server.client().await;
    client
        .database("rm")
        .collection::<Document>("other")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    assert_cmd_error(
        &client.database("admin"),
        doc! {"renameCollection": "rm.missing", "to": "rm.dst"},
        26,
        Some("NamespaceNotFound"),
    )
    .await;
}

#[tokio::test]
async fn list_indexes_reports_id_index() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("li");
    db.collection::<Document>("c")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    let reply = run_ok(&db, doc! {"listIndexes": "c"}).await;
    let cursor = reply.get_document("cursor").expect("cursor");
    assert_eq!(num(cursor, "id"), 0);
    assert_eq!(cursor.get_str("ns").ok(), Some("li.c"), "{reply}");
    let batch = cursor.get_array("firstBatch").unwrap();
    assert_eq!(batch.len(), 1, "{reply}");
    let idx = batch[0].as_document().unwrap();
    assert_eq!(num(idx, "v"), 2, "{idx}");
    assert_eq!(
        idx.get_document("key").ok(),
        Some(&doc! {"_id": 1}),
        "{idx}"
    );
    assert_eq!(idx.get_str("name").ok(), Some("_id_"), "{idx}");

    let names = db
        .collection::<Document>("c")
        .list_index_names()
        .await
        .unwrap();
    assert_eq!(names, vec!["_id_"]);
}

#[tokio::test]
async fn list_indexes_missing_collection_is_namespace_not_found() {
    let server = TestServer::start();
    let client = server.client().await;
    assert_cmd_error(
        &client.database("lim"),
        doc! {"listIndexes": "nope"},
        26,
        Some("NamespaceNotFound"),
    )
    .await;
}

#[tokio::test]
async fn implicit_creation_on_insert_shows_in_listings() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("imp");
    assert!(names_of_collections(&db).await.is_empty());
    db.collection::<Document>("made")
        .insert_one(doc! {"v": Bson::Null})
        .await
        .unwrap();
    assert_eq!(names_of_collections(&db).await, vec!["made"]);
}
