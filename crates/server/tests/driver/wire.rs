//! Raw wire-protocol tests: hand-built frames over a plain TCP socket.

use crate::common::*;
use bson::{doc, Bson, Document};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const OP_REPLY: i32 = 1;
const OP_QUERY: i32 = 2004;
const OP_MSG: i32 = 2013;
const CHECKSUM_PRESENT: u32 = 1;
const MORE_TO_COME: u32 = 1 << 1;

/// CRC-32C (Castagnoli), bitwise; small inputs only.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0x82F6_3B78 & mask);
        }
    }
    !crc
}

#[test]
fn crc32c_known_vector() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
}

fn header(len: usize, request_id: i32, response_to: i32, opcode: i32) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&(len as i32).to_le_bytes());
    v.extend_from_slice(&request_id.to_le_bytes());
    v.extend_from_slice(&response_to.to_le_bytes());
    v.extend_from_slice(&opcode.to_le_bytes());
    v
}

/// An OP_MSG frame with one kind-0 section holding `body` (already-encoded BSON bytes).
fn op_msg_raw(request_id: i32, flags: u32, body: &[u8], checksum: Option<u32>) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend_from_slice(&flags.to_le_bytes());
    payload.push(0);
    payload.extend_from_slice(body);
    let total = 16
        + payload.len()
        + if checksum.is_some() || flags & CHECKSUM_PRESENT != 0 {
            4
        } else {
            0
        };
    let mut frame = header(total, request_id, 0, OP_MSG);
    frame.extend_from_slice(&payload);
    if flags & CHECKSUM_PRESENT != 0 {
        let crc = checksum.unwrap_or_else(|| crc32c(&frame));
        frame.extend_from_slice(&crc.to_le_bytes());
    }
    frame
}

fn op_msg(request_id: i32, flags: u32, cmd: &Document) -> Vec<u8> {
    op_msg_raw(request_id, flags, &bson::to_vec(cmd).unwrap(), None)
}

struct Reply {
    response_to: i32,
    opcode: i32,
    body: Vec<u8>,
}

async fn read_frame(stream: &mut TcpStream) -> std::io::Result<Reply> {
    let mut head = [0u8; 16];
    stream.read_exact(&mut head).await?;
    let len = i32::from_le_bytes(head[0..4].try_into().unwrap());
    assert!((16..=48_000_000).contains(&len), "reply length {len}");
    let mut body = vec![0u8; len as usize - 16];
    stream.read_exact(&mut body).await?;
    Ok(Reply {
        response_to: i32::from_le_bytes(head[8..12].try_into().unwrap()),
        opcode: i32::from_le_bytes(head[12..16].try_into().unwrap()),
        body,
    })
}

/// Parses the kind-0 section of an OP_MSG reply body.
fn op_msg_doc(reply: &Reply) -> Document {
    assert_eq!(reply.opcode, OP_MSG, "reply opcode");
    let body = &reply.body;
    assert_eq!(body[4], 0, "first section kind");
    let doc_len = i32::from_le_bytes(body[5..9].try_into().unwrap()) as usize;
    bson::from_slice(&body[5..5 + doc_len]).expect("reply BSON")
}

async fn connect(server: &TestServer) -> TcpStream {
    TcpStream::connect(server.addr()).await.expect("connect")
}

async fn command(stream: &mut TcpStream, request_id: i32, cmd: Document) -> Document {
    stream
        .write_all(&op_msg(request_id, 0, &cmd))
        .await
        .unwrap();
    let reply = timeout(Duration::from_secs(10), read_frame(stream))
        .await
        .expect("reply within 10 s")
        .expect("read reply");
    assert_eq!(reply.response_to, request_id);
    op_msg_doc(&reply)
}

/// Waits until the server closes the connection (EOF or reset), ignoring any bytes it sends.
async fn expect_closed(stream: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 4096];
    let res = timeout(Duration::from_secs(5), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(
        res.is_ok(),
        "server did not close the connection after {what}"
    );
}

/// What the server did with a bad frame: replied (with this document) or closed.
async fn reaction(stream: &mut TcpStream) -> Option<Document> {
    match timeout(Duration::from_secs(5), read_frame(stream)).await {
        Ok(Ok(reply)) if reply.opcode == OP_MSG => Some(op_msg_doc(&reply)),
        Ok(Ok(reply)) => panic!("unexpected reply opcode {}", reply.opcode),
        Ok(Err(_)) => None,
        Err(_) => None,
    }
}

/// A normal driver client still works against the server.
async fn assert_server_healthy(server: &mut TestServer, tag: &str) {
    assert!(
        server.is_running(),
        "server died after {tag}:\n{}",
        server.output()
    );
    let client = server.client().await;
    run_ok(&client.database("admin"), doc! {"ping": 1}).await;
    let coll = client.database("wire_health").collection::<Document>(tag);
    coll.insert_one(doc! {"_id": 1, "tag": tag}).await.unwrap();
    assert_eq!(
        coll.find_one(doc! {"_id": 1}).await.unwrap(),
        Some(doc! {"_id": 1, "tag": tag})
    );
}

#[tokio::test]
async fn raw_op_msg_ping_round_trip() {
    let server = TestServer::start();
    let mut s = connect(&server).await;
    let reply = command(&mut s, 7, doc! {"ping": 1, "$db": "admin"}).await;
    assert_eq!(ok_value(&reply), Some(1.0), "{reply}");
    // several requests on the same connection
    let reply = command(&mut s, 8, doc! {"hello": 1, "$db": "admin"}).await;
    assert_eq!(
        reply.get_bool("isWritablePrimary").ok(),
        Some(true),
        "{reply}"
    );
}

#[tokio::test]
async fn raw_op_msg_document_sequence_insert() {
    let mut server = TestServer::start();
    let mut s = connect(&server).await;
    let cmd = doc! {"insert": "seq", "$db": "wire"};
    let mut payload = Vec::new();
    payload.extend_from_slice(&0u32.to_le_bytes());
    payload.push(0);
    payload.extend_from_slice(&bson::to_vec(&cmd).unwrap());
    // kind-1 section: size, identifier, documents
    let mut seq = Vec::new();
    seq.extend_from_slice(b"documents\0");
    for i in 0..3 {
        seq.extend_from_slice(&bson::to_vec(&doc! {"_id": i}).unwrap());
    }
    payload.push(1);
    payload.extend_from_slice(&((seq.len() + 4) as i32).to_le_bytes());
    payload.extend_from_slice(&seq);
    let mut frame = header(16 + payload.len(), 99, 0, OP_MSG);
    frame.extend_from_slice(&payload);
    s.write_all(&frame).await.unwrap();
    let reply = timeout(Duration::from_secs(10), read_frame(&mut s))
        .await
        .unwrap()
        .unwrap();
    let d = op_msg_doc(&reply);
    assert_eq!(ok_value(&d), Some(1.0), "{d}");
    assert_eq!(num(&d, "n"), 3, "{d}");
    let client = server.client().await;
    assert_eq!(
        client
            .database("wire")
            .collection::<Document>("seq")
            .count_documents(doc! {})
            .await
            .unwrap(),
        3
    );
    assert_server_healthy(&mut server, "seq").await;
}

#[tokio::test]
async fn truncated_frame_then_close_leaves_server_healthy() {
    let mut server = TestServer::start();
    let mut s = connect(&server).await;
    let frame = op_msg(1, 0, &doc! {"ping": 1, "$db": "admin"});
    s.write_all(&frame[..frame.len() / 2]).await.unwrap();
    s.shutdown().await.unwrap();
    drop(s);
    // header only, no body
    let mut s = connect(&server).await;
    s.write_all(&frame[..10]).await.unwrap();
    drop(s);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_server_healthy(&mut server, "truncated").await;
}

#[tokio::test]
async fn oversized_message_length_closes_connection() {
    let mut server = TestServer::start();
    let mut s = connect(&server).await;
    let mut frame = header(48_000_001, 1, 0, OP_MSG);
    frame.extend_from_slice(&[0u8; 64]);
    s.write_all(&frame).await.unwrap();
    expect_closed(&mut s, "messageLength 48000001").await;
    // a negative / tiny length is rejected too
    let mut s = connect(&server).await;
    s.write_all(&header(4, 1, 0, OP_MSG)).await.unwrap();
    expect_closed(&mut s, "messageLength 4").await;
    assert_server_healthy(&mut server, "oversized").await;
}

#[tokio::test]
async fn garbage_bytes_close_connection() {
    let mut server = TestServer::start();
    let mut s = connect(&server).await;
    // "GET " read as a little-endian length is ~542 MB: far over the limit.
    let mut garbage = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    let mut x: u32 = 0x1234_5678;
    for _ in 0..512 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        garbage.push(x as u8);
    }
    let _ = s.write_all(&garbage).await;
    expect_closed(&mut s, "garbage").await;
    // pure pseudo-random bytes on another connection
    let mut s = connect(&server).await;
    let _ = s.write_all(&garbage[27..]).await;
    let _ = s.shutdown().await;
    drop(s);
    assert_server_healthy(&mut server, "garbage").await;
}

#[tokio::test]
async fn malformed_bson_body_is_rejected() {
    let mut server = TestServer::start();
    let mut s = connect(&server).await;
    // claims 200 bytes, has 12, then junk element types
    let mut bad = Vec::new();
    bad.extend_from_slice(&200i32.to_le_bytes());
    bad.extend_from_slice(&[0x7f, b'x', 0, 1, 2, 3, 4, 5]);
    let frame = op_msg_raw(1, 0, &bad, None);
    s.write_all(&frame).await.unwrap();
    if let Some(reply) = reaction(&mut s).await {
        assert_eq!(
            ok_value(&reply),
            Some(0.0),
            "malformed BSON must not succeed: {reply}"
        );
    }
    // a well-sized document with an invalid element type
    let mut s = connect(&server).await;
    let mut bad = Vec::new();
    bad.extend_from_slice(&13i32.to_le_bytes());
    // element type 0x55 does not exist
    bad.extend_from_slice(&[0x55, b'p', b'i', b'n', b'g', 0, 1, 0, 0, 0]);
    bad.push(0);
    let frame = op_msg_raw(2, 0, &bad, None);
    s.write_all(&frame).await.unwrap();
    if let Some(reply) = reaction(&mut s).await {
        assert_eq!(
            ok_value(&reply),
            Some(0.0),
            "malformed BSON must not succeed: {reply}"
        );
    }
    assert_server_healthy(&mut server, "badbson").await;
}

#[tokio::test]
async fn correct_checksum_is_accepted() {
    let mut server = TestServer::start();
    let mut s = connect(&server).await;
    let cmd = doc! {"insert": "crc_ok", "documents": [{"_id": 1}], "$db": "wire"};
    s.write_all(&op_msg(3, CHECKSUM_PRESENT, &cmd))
        .await
        .unwrap();
    let reply = timeout(Duration::from_secs(10), read_frame(&mut s))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply.response_to, 3);
    let d = op_msg_doc(&reply);
    assert_eq!(ok_value(&d), Some(1.0), "{d}");
    assert_eq!(num(&d, "n"), 1, "{d}");
    assert_server_healthy(&mut server, "crc_ok").await;
}

#[tokio::test]
async fn wrong_checksum_is_rejected_and_not_executed() {
    let mut server = TestServer::start();
    let mut s = connect(&server).await;
    let cmd = doc! {"insert": "crc_bad", "documents": [{"_id": 1}], "$db": "wire"};
    let body = bson::to_vec(&cmd).unwrap();
    let frame = op_msg_raw(4, CHECKSUM_PRESENT, &body, Some(0xDEAD_BEEF));
    // make sure 0xDEADBEEF really is wrong for this frame
    assert_ne!(crc32c(&frame[..frame.len() - 4]), 0xDEAD_BEEF);
    s.write_all(&frame).await.unwrap();
    if let Some(reply) = reaction(&mut s).await {
        assert_eq!(
            ok_value(&reply),
            Some(0.0),
            "bad checksum must not succeed: {reply}"
        );
    }
    let client = server.client().await;
    assert_eq!(
        client
            .database("wire")
            .collection::<Document>("crc_bad")
            .count_documents(doc! {})
            .await
            .unwrap(),
        0,
        "a message with a wrong checksum must not be executed"
    );
    assert_server_healthy(&mut server, "crc_bad").await;
}

#[tokio::test]
async fn unknown_opcode_leaves_server_healthy() {
    let mut server = TestServer::start();
    let mut s = connect(&server).await;
    let body = bson::to_vec(&doc! {"ping": 1}).unwrap();
    let mut frame = header(16 + body.len(), 5, 0, 9999);
    frame.extend_from_slice(&body);
    s.write_all(&frame).await.unwrap();
    if let Ok(Ok(reply)) = timeout(Duration::from_secs(2), read_frame(&mut s)).await {
        if reply.opcode == OP_MSG {
            let d = op_msg_doc(&reply);
            assert_eq!(
                ok_value(&d),
                Some(0.0),
                "unknown opcode must not succeed: {d}"
            );
        }
    }
    assert_server_healthy(&mut server, "opcode").await;
}

#[tokio::test]
async fn more_to_come_insert_gets_no_reply_but_is_applied() {
    let server = TestServer::start();
    let mut s = connect(&server).await;
    let cmd = doc! {
        "insert": "mtc",
        "documents": [{"_id": 1, "v": "fire-and-forget"}],
        "writeConcern": {"w": 0},
        "$db": "wire",
    };
    s.write_all(&op_msg(10, MORE_TO_COME, &cmd)).await.unwrap();
    // the next reply on this connection must answer request 11, not request 10
    let reply = command(&mut s, 11, doc! {"ping": 1, "$db": "admin"}).await;
    assert_eq!(ok_value(&reply), Some(1.0));
    let client = server.client().await;
    let coll = client.database("wire").collection::<Document>("mtc");
    let mut found = None;
    for _ in 0..50 {
        found = coll.find_one(doc! {"_id": 1}).await.unwrap();
        if found.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(found, Some(doc! {"_id": 1, "v": "fire-and-forget"}));
}

#[tokio::test]
async fn legacy_op_query_is_master_gets_op_reply() {
    let server = TestServer::start();
    let mut s = connect(&server).await;
    let query = bson::to_vec(&doc! {"isMaster": 1}).unwrap();
    let mut payload = Vec::new();
    payload.extend_from_slice(&0i32.to_le_bytes()); // flags
    payload.extend_from_slice(b"admin.$cmd\0");
    payload.extend_from_slice(&0i32.to_le_bytes()); // numberToSkip
    payload.extend_from_slice(&(-1i32).to_le_bytes()); // numberToReturn
    payload.extend_from_slice(&query);
    let mut frame = header(16 + payload.len(), 42, 0, OP_QUERY);
    frame.extend_from_slice(&payload);
    s.write_all(&frame).await.unwrap();
    let reply = timeout(Duration::from_secs(10), read_frame(&mut s))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply.opcode, OP_REPLY);
    assert_eq!(reply.response_to, 42);
    let b = &reply.body;
    let cursor_id = i64::from_le_bytes(b[4..12].try_into().unwrap());
    let number_returned = i32::from_le_bytes(b[16..20].try_into().unwrap());
    assert_eq!(cursor_id, 0);
    assert_eq!(number_returned, 1);
    let d: Document = bson::from_slice(&b[20..]).expect("OP_REPLY document");
    assert_eq!(d.get_bool("ismaster").ok(), Some(true), "{d}");
    assert_eq!(num(&d, "maxWireVersion"), 21, "{d}");
    assert_eq!(d.get("ok"), Some(&Bson::Double(1.0)), "{d}");
    // the same connection can then speak OP_MSG
    let reply = command(&mut s, 43, doc! {"ping": 1, "$db": "admin"}).await;
    assert_eq!(ok_value(&reply), Some(1.0));
}
