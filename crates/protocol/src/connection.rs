//! One client connection: read a framed message, run it, write the reply, repeat.
//!
//! Framing errors (bad length, truncated frame, bad checksum, unknown opcode) are logged
//! and close only this connection; a well-framed message with malformed BSON gets an error
//! reply. Commands run on the blocking pool because storage calls block.

use crate::client::ConnInfo;
use crate::commands::{self, Request};
use crate::error::CommandError;
use crate::state::ServerState;
use crate::wire::{self, DocSequence, Header, Message, HEADER_LEN};
use bson::{doc, Document};
use hourglass_query::interrupt::Interrupt;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::watch;

static REQUEST_IDS: AtomicI32 = AtomicI32::new(1);

fn next_request_id() -> i32 {
    REQUEST_IDS.fetch_add(1, Ordering::Relaxed)
}

/// Handshake commands a legacy OP_QUERY may carry.
const OP_QUERY_COMMANDS: &[&str] = &["isMaster", "ismaster", "hello"];

/// Requests below this size are never held back by the in-flight budget, so small
/// commands (`ping`, a `find`) are answered while large frames wait for memory.
const SMALL_REQUEST: usize = 1 << 20;

/// What a decoded request costs in memory compared with its frame: the frame itself plus
/// the decoded documents.
const DECODED_FACTOR: usize = 4;

/// A client's byte stream: plain TCP or TLS.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send> ClientStream for S {}

/// Serves `stream` until the client leaves, a framing error occurs, or shutdown begins
/// (checked between requests, so in-flight requests finish).
pub async fn serve<S: ClientStream>(
    state: Arc<ServerState>,
    stream: S,
    conn: ConnInfo,
    mut shutdown: watch::Receiver<bool>,
) {
    let conn = Arc::new(conn);
    // Buffered so that a running command can watch for the client leaving (`fill_buf`
    // peeks without consuming a pipelined request), over TCP and TLS alike.
    let mut stream = BufReader::new(stream);
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
        let idle = Duration::from_millis(
            state
                .params
                .get_i64("frameReadTimeoutMillis", 30_000)
                .max(1) as u64,
        );
        let whole = match read_frame(&mut stream, &head, header.message_length as usize, idle).await
        {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(conn = conn.id, peer = %conn.peer, error = %e, "closing connection: truncated message");
                return;
            }
        };
        // A compressed frame takes the budget of the message it inflates to.
        let size = wire::compression::announced_size(&header, &whole).unwrap_or(whole.len());
        let _budget = match reserve(&state, size.max(whole.len())).await {
            Some(p) => p,
            None => return,
        };
        let interrupt = Arc::new(Interrupt::default());
        let task = {
            let (state, conn, interrupt) = (state.clone(), conn.clone(), interrupt.clone());
            tokio::task::spawn_blocking(move || handle(&state, &conn, &header, &whole, interrupt))
        };
        let outcome = run_watching_client(&mut stream, task, &interrupt).await;
        let bytes = match outcome {
            Outcome::Reply(b) => b,
            Outcome::NoReply => continue,
            Outcome::Close => return,
        };
        let delay = conn.take_reply_delay();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let written = match stream.write_all(&bytes).await {
            Ok(()) => stream.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            tracing::debug!(conn = conn.id, error = %e, "connection write failed");
            return;
        }
    }
}

/// Reads the rest of a frame of `len` bytes as it arrives (the buffer grows with the data,
/// never to the length a header claims up front), failing when no byte comes for `idle`.
async fn read_frame<S: ClientStream>(
    stream: &mut BufReader<S>,
    head: &[u8; HEADER_LEN],
    len: usize,
    idle: Duration,
) -> std::io::Result<Vec<u8>> {
    let mut whole = Vec::with_capacity(len.min(64 * 1024));
    whole.extend_from_slice(head);
    while whole.len() < len {
        let want = (len - whole.len()).min(whole.capacity().max(4096));
        whole.reserve(want);
        let mut limited = (&mut *stream).take(want as u64);
        match tokio::time::timeout(idle, limited.read_buf(&mut whole)).await {
            Ok(Ok(0)) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no data for {} ms with {} of {len} bytes read",
                        idle.as_millis(),
                        whole.len()
                    ),
                ))
            }
        }
    }
    Ok(whole)
}

/// Takes this request's share of the process-wide budget for requests in flight
/// (`maxInFlightRequestBytes`), waiting while larger requests hold it. Small requests pass
/// freely. None when the server is shutting down the budget.
async fn reserve(
    state: &ServerState,
    frame_len: usize,
) -> Option<Option<tokio::sync::SemaphorePermit<'_>>> {
    if frame_len < SMALL_REQUEST {
        return Some(None);
    }
    let want = frame_len
        .saturating_mul(DECODED_FACTOR)
        .min(state.in_flight.capacity);
    let permits = u32::try_from(want.div_ceil(1024)).unwrap_or(u32::MAX);
    state
        .in_flight
        .semaphore
        .acquire_many(permits)
        .await
        .ok()
        .map(Some)
}

enum Outcome {
    Reply(Vec<u8>),
    NoReply,
    Close,
}

/// Waits for the command while watching the socket: a client that disconnects interrupts
/// its operation (which then stops at its next interruption check).
async fn run_watching_client<S: ClientStream>(
    stream: &mut BufReader<S>,
    mut task: tokio::task::JoinHandle<Outcome>,
    interrupt: &Interrupt,
) -> Outcome {
    let joined = tokio::select! {
        r = &mut task => r,
        r = stream.fill_buf() => {
            if r.map_or(true, |b| b.is_empty()) {
                interrupt.kill();
            }
            // More bytes (a pipelined request) or a closed socket: just wait for the command.
            task.await
        }
    };
    joined.unwrap_or_else(|e| {
        tracing::error!(error = %e, "command panicked");
        Outcome::Reply(
            wire::encode_op_msg(
                next_request_id(),
                0,
                &CommandError::new(1, "internal error while running the command").to_reply(),
            )
            .unwrap_or_default(),
        )
    })
}

/// Parses, runs and encodes one request on a blocking thread.
fn handle(
    state: &Arc<ServerState>,
    conn: &Arc<ConnInfo>,
    header: &Header,
    whole: &[u8],
    interrupt: Arc<Interrupt>,
) -> Outcome {
    // A compressed message is handled as the one inside it; its reply is compressed the
    // same way unless the specification keeps it plain.
    let inner;
    let (header, whole, compressor) = if header.op_code == wire::OP_COMPRESSED {
        match wire::compression::decompress(header, whole) {
            Ok((h, bytes, compressor)) => {
                inner = (h, bytes);
                (&inner.0, inner.1.as_slice(), Some(compressor))
            }
            Err(e) => {
                tracing::warn!(conn = conn.id, peer = %conn.peer, error = %e, "closing connection: unusable compressed message");
                return Outcome::Close;
            }
        }
    } else {
        (header, whole, None)
    };
    let reply = match wire::parse_message(header, whole) {
        Ok(Message::Msg(msg)) => {
            let more_to_come = msg.more_to_come();
            let compress = compressor.filter(|_| {
                msg.body
                    .keys()
                    .next()
                    .is_some_and(|c| wire::compression::may_compress_reply(c))
            });
            let (reply, batch) = run(state, conn, msg.body, msg.sequences, interrupt, true);
            if conn.take_close_request() {
                return Outcome::Close;
            }
            if more_to_come {
                return Outcome::NoReply;
            }
            wire::encode_op_msg_with_batch(
                next_request_id(),
                header.request_id,
                &reply,
                batch.as_ref(),
            )
            .and_then(|plain| match compress {
                Some(c) => wire::compression::compress(&plain, c),
                None => Ok(plain),
            })
        }
        Ok(Message::Query(q)) => {
            let reply = answer_op_query(state, conn, q, interrupt);
            wire::encode_op_reply(next_request_id(), header.request_id, 8, &reply)
        }
        Err(e) if e.answerable() && header.op_code == wire::OP_MSG => {
            tracing::warn!(conn = conn.id, peer = %conn.peer, error = %e, "refused OP_MSG content");
            wire::encode_op_msg(
                next_request_id(),
                header.request_id,
                &CommandError::new(e.code(), e.to_string()).to_reply(),
            )
        }
        Err(e) => {
            tracing::warn!(conn = conn.id, peer = %conn.peer, op_code = header.op_code, error = %e, "closing connection: unusable message");
            return Outcome::Close;
        }
    };
    match reply {
        Ok(b) => Outcome::Reply(b),
        Err(e) => {
            tracing::error!(conn = conn.id, error = %e, "could not encode reply");
            match wire::encode_op_msg(
                next_request_id(),
                header.request_id,
                &CommandError::new(10334, e.to_string()).to_reply(),
            ) {
                Ok(b) => Outcome::Reply(b),
                Err(_) => Outcome::Close,
            }
        }
    }
}

/// Runs one command (on the calling blocking thread).
fn run(
    state: &Arc<ServerState>,
    conn: &Arc<ConnInfo>,
    body: Document,
    sequences: Vec<(String, DocSequence)>,
    interrupt: Arc<Interrupt>,
    // Whether the reply may carry rows as bytes (OP_MSG; not the OP_QUERY handshake).
    raw_batches: bool,
) -> (Document, Option<crate::cursor::RawBatch>) {
    let db = match body.get("$db") {
        Some(bson::Bson::String(s)) => s.clone(),
        _ => {
            let e = CommandError::new(40571, "OP_MSG requests require a $db argument");
            return (e.to_reply(), None);
        }
    };
    let req = Request {
        state: state.clone(),
        conn: conn.clone(),
        db,
        body,
        sequences: parking_lot::Mutex::new(sequences),
        interrupt,
        plan_summary: Default::default(),
        raw_batch: raw_batches.then(Default::default),
    };
    state.connections.active.fetch_add(1, Ordering::Relaxed);
    let reply = commands::dispatch(&req);
    state.connections.active.fetch_sub(1, Ordering::Relaxed);
    let batch = req.raw_batch.and_then(|b| b.into_inner());
    (reply, batch)
}

/// Answers a legacy OP_QUERY: only the handshake on `<db>.$cmd` is accepted.
fn answer_op_query(
    state: &Arc<ServerState>,
    conn: &Arc<ConnInfo>,
    q: wire::OpQuery,
    interrupt: Arc<Interrupt>,
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
        return CommandError::new(
            352,
            format!(
                "Unsupported OP_QUERY command: {name}. The client driver may require an upgrade."
            ),
        )
        .to_reply();
    }
    body.insert("$db", db);
    run(state, conn, body, Vec::new(), interrupt, false).0
}
