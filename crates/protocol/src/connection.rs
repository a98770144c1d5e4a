//! One client connection: read a framed message, run it, write the reply, repeat.
//!
//! Framing errors (bad length, truncated frame, bad checksum, unknown opcode) are logged
//! and close only this connection; a well-framed message with malformed BSON gets an error
//! reply. Commands run on the blocking pool because storage calls block.

use crate::commands::args::ConnInfo;
use crate::commands::{self, Request};
use crate::error::CommandError;
use crate::state::ServerState;
use crate::wire::{self, Header, Message, WireError, HEADER_LEN};
use bson::{doc, Document};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

static REQUEST_IDS: AtomicI32 = AtomicI32::new(1);

fn next_request_id() -> i32 {
    REQUEST_IDS.fetch_add(1, Ordering::Relaxed)
}

/// Handshake commands a legacy OP_QUERY may carry.
const OP_QUERY_COMMANDS: &[&str] = &["isMaster", "ismaster", "hello"];

/// Serves `stream` until the client leaves, a framing error occurs, or shutdown begins
/// (checked between requests, so in-flight requests finish).
pub async fn serve(
    state: Arc<ServerState>,
    mut stream: TcpStream,
    conn: ConnInfo,
    mut shutdown: watch::Receiver<bool>,
) {
    let conn = Arc::new(conn);
    let _ = stream.set_nodelay(true);
    loop {
        let mut head = [0u8; HEADER_LEN];
        tokio::select! {
            r = stream.read_exact(&mut head) => {
                if let Err(e) = r {
                    if e.kind() != std::io::ErrorKind::UnexpectedEof {
                        tracing::debug!(conn = conn.id, error = %e, "connection read failed");
                    }
                    return;
                }
            }
            _ = shutdown.changed() => return,
        }
        let header = match Header::parse(&head) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(conn = conn.id, peer = %conn.peer, error = %e, "closing connection: bad message header");
                return;
            }
        };
        let mut whole = vec![0u8; header.message_length as usize];
        whole[..HEADER_LEN].copy_from_slice(&head);
        if let Err(e) = stream.read_exact(&mut whole[HEADER_LEN..]).await {
            tracing::warn!(conn = conn.id, peer = %conn.peer, error = %e, "closing connection: truncated message");
            return;
        }
        let reply = match wire::parse_message(&header, &whole) {
            Ok(Message::Msg(msg)) => {
                let more_to_come = msg.more_to_come();
                let reply = run(&state, &conn, msg.body, msg.sequences).await;
                if more_to_come {
                    continue;
                }
                wire::encode_op_msg(next_request_id(), header.request_id, &reply)
            }
            Ok(Message::Query(q)) => {
                let reply = answer_op_query(&state, &conn, q).await;
                wire::encode_op_reply(next_request_id(), header.request_id, 8, &reply)
            }
            Err(e @ WireError::InvalidBson(_)) if header.op_code == wire::OP_MSG => {
                tracing::warn!(conn = conn.id, peer = %conn.peer, error = %e, "malformed BSON in OP_MSG");
                let (code, name) = e.code();
                wire::encode_op_msg(
                    next_request_id(),
                    header.request_id,
                    &CommandError::new(code, name, e.to_string()).to_reply(),
                )
            }
            Err(e) => {
                tracing::warn!(conn = conn.id, peer = %conn.peer, op_code = header.op_code, error = %e, "closing connection: unusable message");
                return;
            }
        };
        let bytes = match reply {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(conn = conn.id, error = %e, "could not encode reply");
                match wire::encode_op_msg(
                    next_request_id(),
                    header.request_id,
                    &CommandError::new(10334, "BSONObjectTooLarge", e.to_string()).to_reply(),
                ) {
                    Ok(b) => b,
                    Err(_) => return,
                }
            }
        };
        if let Err(e) = stream.write_all(&bytes).await {
            tracing::debug!(conn = conn.id, error = %e, "connection write failed");
            return;
        }
    }
}

/// Runs one command on the blocking pool.
async fn run(
    state: &Arc<ServerState>,
    conn: &Arc<ConnInfo>,
    body: Document,
    sequences: Vec<(String, Vec<Document>)>,
) -> Document {
    let db = match body.get("$db") {
        Some(bson::Bson::String(s)) => s.clone(),
        _ => {
            return CommandError::new(
                40571,
                "Location40571",
                "OP_MSG requests require a $db argument",
            )
            .to_reply();
        }
    };
    let req = Request {
        state: state.clone(),
        conn: conn.clone(),
        db,
        body,
        sequences: parking_lot::Mutex::new(sequences),
    };
    state.connections.active.fetch_add(1, Ordering::Relaxed);
    let result = tokio::task::spawn_blocking(move || commands::dispatch(&req)).await;
    state.connections.active.fetch_sub(1, Ordering::Relaxed);
    match result {
        Ok(reply) => reply,
        Err(e) => {
            tracing::error!(error = %e, "command panicked");
            CommandError::new(
                1,
                "InternalError",
                "internal error while running the command",
            )
            .to_reply()
        }
    }
}

/// Answers a legacy OP_QUERY: only the handshake on `<db>.$cmd` is accepted.
async fn answer_op_query(
    state: &Arc<ServerState>,
    conn: &Arc<ConnInfo>,
    q: wire::OpQuery,
) -> Document {
    let Some(db) = q.full_collection_name.strip_suffix(".$cmd") else {
        return doc! {"$err": "OP_QUERY is only supported for the connection handshake", "code": 352, "ok": 0.0};
    };
    // Drivers may wrap the command as {$query: {...}, $readPreference: ...}.
    let mut body = match q.query.get_document("$query") {
        Ok(inner) => inner.clone(),
        Err(_) => q.query.clone(),
    };
    let name = body.keys().next().cloned().unwrap_or_default();
    if !OP_QUERY_COMMANDS.contains(&name.as_str()) {
        return doc! {
            "ok": 0.0,
            "errmsg": format!("Unsupported OP_QUERY command: {name}. The client driver may require an upgrade."),
            "code": 352,
            "codeName": "UnsupportedOpQueryCommand",
        };
    }
    body.insert("$db", db);
    run(state, conn, body, Vec::new()).await
}
