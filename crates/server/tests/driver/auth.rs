//! Access control through the Rust driver: SCRAM-SHA-256 and SCRAM-SHA-1 logins, refusals
//! for a wrong password and for missing privileges, and users that survive `kill -9`.

use crate::common::*;
use bson::{doc, Document};
use mongodb::Client;

async fn client_as(server: &TestServer, user: &str, pwd: &str, mechanism: &str) -> Client {
    let uri = format!(
        "mongodb://{user}:{pwd}@127.0.0.1:{}/?authSource=admin&authMechanism={mechanism}&directConnection=true&serverSelectionTimeoutMS=5000",
        server.port()
    );
    Client::with_uri_str(uri).await.expect("build client")
}

/// Creates the first user (root on admin) through the localhost exception.
async fn create_root(server: &TestServer) {
    let anonymous = server.client().await;
    anonymous
        .database("admin")
        .run_command(doc! {"createUser": "root", "pwd": "secret", "roles": [{"role": "root", "db": "admin"}]})
        .await
        .expect("localhost exception allows the first user");
}

#[tokio::test]
async fn rust_driver_authenticates_with_scram_sha_256_and_sha_1() {
    let server = TestServer::start_with(&["--auth"]);
    create_root(&server).await;
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-1"] {
        let client = client_as(&server, "root", "secret", mechanism).await;
        let coll = client.database("authdb").collection::<Document>("c");
        coll.insert_one(doc! {"_id": mechanism}).await.unwrap();
        assert!(coll
            .find_one(doc! {"_id": mechanism})
            .await
            .unwrap()
            .is_some());
    }
}

#[tokio::test]
async fn rust_driver_wrong_password_fails_and_unauthenticated_reads_are_refused() {
    let server = TestServer::start_with(&["--auth"]);
    create_root(&server).await;
    let wrong = client_as(&server, "root", "not-it", "SCRAM-SHA-256").await;
    let err = wrong
        .database("authdb")
        .collection::<Document>("c")
        .find_one(doc! {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Authentication failed"), "{err}");
    let anonymous = server.client().await;
    let err = anonymous
        .database("authdb")
        .run_command(doc! {"find": "c"})
        .await
        .unwrap_err();
    assert_eq!(err_code(&err), Some(13), "{err}");
}

#[tokio::test]
async fn read_role_refuses_writes_through_the_rust_driver() {
    let server = TestServer::start_with(&["--auth"]);
    create_root(&server).await;
    let root = client_as(&server, "root", "secret", "SCRAM-SHA-256").await;
    root.database("admin")
        .run_command(
            doc! {"createUser": "reader", "pwd": "pw", "roles": [{"role": "read", "db": "authdb"}]},
        )
        .await
        .unwrap();
    root.database("authdb")
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    let reader = client_as(&server, "reader", "pw", "SCRAM-SHA-256").await;
    let coll = reader.database("authdb").collection::<Document>("c");
    assert_eq!(coll.find_one(doc! {}).await.unwrap(), Some(doc! {"_id": 1}));
    let err = coll.insert_one(doc! {"_id": 2}).await.unwrap_err();
    assert_eq!(err_code(&err), Some(13), "{err}");
}

#[tokio::test]
async fn users_and_their_roles_survive_kill_9() {
    let mut server = TestServer::start_with(&["--auth"]);
    create_root(&server).await;
    {
        let root = client_as(&server, "root", "secret", "SCRAM-SHA-256").await;
        root.database("admin")
            .run_command(doc! {"createUser": "writer", "pwd": "pw", "roles": []})
            .await
            .unwrap();
        root.database("admin")
            .run_command(doc! {"grantRolesToUser": "writer", "roles": [{"role": "readWrite", "db": "authdb"}]})
            .await
            .unwrap();
    }
    server.kill9();
    server.restart();
    let writer = client_as(&server, "writer", "pw", "SCRAM-SHA-256").await;
    let coll = writer.database("authdb").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 1);
    // The localhost exception stays closed after the restart.
    let anonymous = server.client().await;
    let err = anonymous
        .database("admin")
        .run_command(doc! {"createUser": "intruder", "pwd": "x", "roles": []})
        .await
        .unwrap_err();
    assert_eq!(err_code(&err), Some(13), "{err}");
}
