//! Handshake, diagnostic and parameter commands.

use crate::common::*;
use bson::{doc, Bson, Document};

fn assert_handshake_common(reply: &Document) {
    assert_eq!(
        reply.get_i32("maxBsonObjectSize").ok(),
        Some(16_777_216),
        "{reply}"
    );
    assert_eq!(
        reply.get_i32("maxMessageSizeBytes").ok(),
        Some(48_000_000),
        "{reply}"
    );
    assert_eq!(
        reply.get_i32("maxWriteBatchSize").ok(),
        Some(100_000),
        "{reply}"
    );
    assert_eq!(num(reply, "minWireVersion"), 0, "{reply}");
    assert_eq!(num(reply, "maxWireVersion"), 21, "{reply}");
    assert!(
        matches!(reply.get("localTime"), Some(Bson::DateTime(_))),
        "localTime must be a date: {reply}"
    );
    let local = reply.get_datetime("localTime").unwrap().timestamp_millis();
    let now = bson::DateTime::now().timestamp_millis();
    assert!(
        (now - local).abs() < 60_000,
        "localTime far from now: {reply}"
    );
    assert!(num(reply, "connectionId") > 0, "{reply}");
    assert_eq!(reply.get("ok"), Some(&Bson::Double(1.0)), "{reply}");
}

#[tokio::test]
async fn hello_reports_writable_primary_and_limits() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"hello": 1}).await;
    assert_eq!(
        reply.get_bool("isWritablePrimary").ok(),
        Some(true),
        "{reply}"
    );
    assert_handshake_common(&reply);
}

#[tokio::test]
async fn is_master_both_spellings_report_ismaster_true() {
    let server = TestServer::start();
    let client = server.client().await;
    for name in ["isMaster", "ismaster"] {
        let reply = run_ok(&client.database("admin"), doc! {name: 1}).await;
        assert_eq!(
            reply.get_bool("ismaster").ok(),
            Some(true),
            "{name}: {reply}"
        );
        assert_handshake_common(&reply);
    }
}

#[tokio::test]
async fn hello_connection_ids_differ_between_connections() {
    let server = TestServer::start();
    let a = server.client().await;
    let b = server.client().await;
    let ra = run_ok(&a.database("admin"), doc! {"hello": 1}).await;
    let rb = run_ok(&b.database("admin"), doc! {"hello": 1}).await;
    assert_ne!(num(&ra, "connectionId"), num(&rb, "connectionId"));
}

#[tokio::test]
async fn ping_returns_ok() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"ping": 1}).await;
    assert_eq!(reply.get("ok"), Some(&Bson::Double(1.0)));
    // ping works against any database
    run_ok(&client.database("some_db"), doc! {"ping": 1}).await;
}

#[tokio::test]
async fn build_info_has_version_and_version_array() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"buildInfo": 1}).await;
    let version = reply.get_str("version").expect("version string");
    let arr = reply.get_array("versionArray").expect("versionArray");
    assert!(arr.len() >= 3, "{reply}");
    let parts: Vec<i64> = arr
        .iter()
        .map(|b| match b {
            Bson::Int32(i) => i64::from(*i),
            Bson::Int64(i) => *i,
            other => panic!("versionArray element {other:?}"),
        })
        .collect();
    let prefix = format!("{}.{}.{}", parts[0], parts[1], parts[2]);
    assert!(
        version.starts_with(&prefix),
        "version {version} does not match versionArray {parts:?}"
    );
    assert!(
        parts[0] >= 7,
        "version should be 7.x or later to match wire version 21: {reply}"
    );
    // the lower-case spelling is accepted too
    run_ok(&client.database("admin"), doc! {"buildinfo": 1}).await;
}

#[tokio::test]
async fn host_info_has_system_and_os() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"hostInfo": 1}).await;
    let system = reply.get_document("system").expect("system");
    assert!(system.contains_key("hostname"), "{reply}");
    assert!(system.contains_key("numCores"), "{reply}");
    assert!(reply.get_document("os").is_ok(), "{reply}");
}

#[tokio::test]
async fn whatsmyuri_reports_client_address() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"whatsmyuri": 1}).await;
    let you = reply.get_str("you").expect("you");
    let (host, port) = you.rsplit_once(':').expect("host:port");
    assert_eq!(host, "127.0.0.1", "{reply}");
    let port: u16 = port.parse().expect("numeric port");
    assert!(port > 0);
    assert_ne!(
        port,
        server.port(),
        "you must be the client's address, not the server's"
    );
}

#[tokio::test]
async fn get_parameter_feature_compatibility_version() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(
        &client.database("admin"),
        doc! {"getParameter": 1, "featureCompatibilityVersion": 1},
    )
    .await;
    let fcv = reply
        .get_document("featureCompatibilityVersion")
        .expect("fcv");
    assert_eq!(fcv.get_str("version").ok(), Some("7.0"), "{reply}");
}

#[tokio::test]
async fn get_parameter_star_returns_all_parameters() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"getParameter": "*"}).await;
    assert!(reply.contains_key("featureCompatibilityVersion"), "{reply}");
    assert!(reply.contains_key("logLevel"), "{reply}");
    assert!(reply.len() > 4, "{reply}");
}

#[tokio::test]
async fn set_parameter_returns_was_and_get_parameter_sees_new_value() {
    let server = TestServer::start();
    let client = server.client().await;
    let admin = client.database("admin");
    let before = run_ok(&admin, doc! {"getParameter": 1, "logLevel": 1}).await;
    assert_eq!(num(&before, "logLevel"), 0, "{before}");
    let set = run_ok(&admin, doc! {"setParameter": 1, "logLevel": 1}).await;
    assert_eq!(num(&set, "was"), 0, "{set}");
    let after = run_ok(&admin, doc! {"getParameter": 1, "logLevel": 1}).await;
    assert_eq!(num(&after, "logLevel"), 1, "{after}");
}

#[tokio::test]
async fn command_line_set_parameter_is_visible() {
    let server = TestServer::start_with(&["--setParameter", "ttlMonitorSleepSecs=7"]);
    let client = server.client().await;
    let reply = run_ok(
        &client.database("admin"),
        doc! {"getParameter": 1, "ttlMonitorSleepSecs": 1},
    )
    .await;
    assert_eq!(num(&reply, "ttlMonitorSleepSecs"), 7, "{reply}");
}

#[tokio::test]
async fn get_parameter_unknown_name_fails() {
    let server = TestServer::start();
    let client = server.client().await;
    let err = client
        .database("admin")
        .run_command(doc! {"getParameter": 1, "noSuchParameterXyz": 1})
        .await
        .expect_err("unknown parameter must fail");
    assert!(err_code(&err).is_some(), "{err}");
}

#[tokio::test]
async fn get_cmd_line_opts_reports_argv_and_parsed() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"getCmdLineOpts": 1}).await;
    let argv: Vec<String> = reply
        .get_array("argv")
        .expect("argv")
        .iter()
        .map(|b| b.as_str().expect("argv strings").to_string())
        .collect();
    assert!(argv.iter().any(|a| a == "--dbpath"), "{argv:?}");
    assert!(
        argv.iter().any(|a| a == &server.port().to_string()),
        "{argv:?}"
    );
    let parsed = reply.get_document("parsed").expect("parsed");
    let net = parsed.get_document("net").expect("parsed.net");
    assert_eq!(num(net, "port"), i64::from(server.port()), "{reply}");
    assert_eq!(net.get_str("bindIp").ok(), Some("127.0.0.1"), "{reply}");
    let storage = parsed.get_document("storage").expect("parsed.storage");
    assert_eq!(
        storage.get_str("dbPath").ok(),
        Some(server.dbpath().display().to_string().as_str()),
        "{reply}"
    );
}

#[tokio::test]
async fn get_log_star_lists_log_names() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"getLog": "*"}).await;
    let names: Vec<&str> = reply
        .get_array("names")
        .expect("names")
        .iter()
        .filter_map(|b| b.as_str())
        .collect();
    assert!(names.contains(&"global"), "{reply}");
    assert!(names.contains(&"startupWarnings"), "{reply}");
}

#[tokio::test]
async fn get_log_global_returns_lines() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"getLog": "global"}).await;
    let log = reply.get_array("log").expect("log array");
    assert!(
        log.iter().all(|b| b.as_str().is_some()),
        "log lines are strings: {reply}"
    );
    assert!(
        num(&reply, "totalLinesWritten") >= log.len() as i64,
        "{reply}"
    );
}

#[tokio::test]
async fn connection_status_reports_empty_auth_info() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"connectionStatus": 1}).await;
    let auth = reply.get_document("authInfo").expect("authInfo");
    assert_eq!(
        auth.get_array("authenticatedUsers").map(|a| a.len()).ok(),
        Some(0),
        "{reply}"
    );
    assert_eq!(
        auth.get_array("authenticatedUserRoles")
            .map(|a| a.len())
            .ok(),
        Some(0),
        "{reply}"
    );
}

#[tokio::test]
async fn server_status_reports_host_uptime_connections_and_mem() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), doc! {"serverStatus": 1}).await;
    assert!(!reply.get_str("host").expect("host").is_empty(), "{reply}");
    assert!(
        !reply.get_str("version").expect("version").is_empty(),
        "{reply}"
    );
    assert!(reply.contains_key("uptime"), "{reply}");
    assert!(reply.contains_key("localTime"), "{reply}");
    let conns = reply.get_document("connections").expect("connections");
    assert!(num(conns, "current") >= 1, "{reply}");
    assert!(reply.get_document("mem").is_ok(), "{reply}");
    let op = reply.get_document("opcounters").expect("opcounters");
    for key in ["insert", "query", "update", "delete", "getmore", "command"] {
        assert!(op.contains_key(key), "opcounters.{key} missing: {reply}");
    }
}

#[tokio::test]
async fn server_status_opcounters_insert_counts_inserts() {
    let server = TestServer::start();
    let client = server.client().await;
    let admin = client.database("admin");
    let before = run_ok(&admin, doc! {"serverStatus": 1}).await;
    let before = num(before.get_document("opcounters").unwrap(), "insert");
    let coll = client.database("opc").collection::<Document>("c");
    for i in 0..3 {
        coll.insert_one(doc! {"_id": i}).await.unwrap();
    }
    let after = run_ok(&admin, doc! {"serverStatus": 1}).await;
    let after = num(after.get_document("opcounters").unwrap(), "insert");
    assert_eq!(
        after - before,
        3,
        "opcounters.insert before {before} after {after}"
    );
}

#[tokio::test]
async fn unknown_command_is_command_not_found() {
    let server = TestServer::start();
    let client = server.client().await;
    assert_cmd_error(
        &client.database("admin"),
        doc! {"definitelyNotACommand": 1},
        59,
        Some("CommandNotFound"),
    )
    .await;
    // the connection is still usable afterwards
    run_ok(&client.database("admin"), doc! {"ping": 1}).await;
}

/// Drivers switch to the streaming monitoring protocol (exhaust `hello`) when the reply
/// carries a topologyVersion; the server answers requests one by one, so it must not.
#[tokio::test]
async fn hello_does_not_invite_streaming_monitoring() {
    let server = TestServer::start();
    let client = server.client().await;
    let reply = run_ok(&client.database("admin"), bson::doc! {"hello": 1}).await;
    assert!(!reply.contains_key("topologyVersion"), "{reply}");
}
