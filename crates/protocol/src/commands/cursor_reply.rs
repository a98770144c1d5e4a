//! The cursor part of read replies: the first batch, the server cursor for the rest, and
//! the batch size arguments (shared by `find`, `aggregate` and the listing commands).

use super::args::as_i64;
use super::Request;
use crate::cursor::{rows, take_batch, DocSource, RawBatch, Row, RowSource};
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};

/// Documents in a first batch when the client gives no batchSize.
pub const DEFAULT_FIRST_BATCH: usize = 101;

/// Sends the first batch of `source` and keeps a server cursor for the rest.
pub fn cursor_reply(
    req: &Request,
    ns: String,
    source: DocSource,
    batch_size: Option<usize>,
    single_batch: bool,
) -> CmdResult {
    row_cursor_reply(req, ns, rows(source), batch_size, single_batch)
}

/// [`cursor_reply`] of rows, some of which may be BSON bytes to send as they are.
pub fn row_cursor_reply(
    req: &Request,
    ns: String,
    mut source: RowSource,
    batch_size: Option<usize>,
    single_batch: bool,
) -> CmdResult {
    let mut pending = None;
    // `batchSize: 0` asks for a cursor and an empty first batch (MongoDB then does no
    // work until the first getMore); drivers use it to open a cursor cheaply.
    let (docs, more) = match batch_size.unwrap_or(DEFAULT_FIRST_BATCH) {
        0 => (Vec::new(), true),
        n => take_batch(&mut source, &mut pending, Some(n))?,
    };
    let id = if more && !single_batch {
        req.state.cursors.open(
            ns.clone(),
            req.cursor_owner(),
            source,
            pending,
            req.interrupt.remaining(),
        )
    } else {
        0
    };
    let docs = batch_documents(req, docs)?;
    Ok(doc! {"cursor": {"firstBatch": docs, "id": id, "ns": ns}})
}

/// The documents to put in a reply's batch. When the batch holds rows written from
/// columns and the request is answered on the wire, the rows stay bytes: they go to the
/// request's raw batch, which the encoder writes in place of the (empty) array returned
/// here. Otherwise every row is a document.
pub fn batch_documents(req: &Request, batch: Vec<Row>) -> Result<Vec<Document>, CommandError> {
    match &req.raw_batch {
        Some(slot) if batch.iter().any(|r| matches!(r, Row::Raw(_))) => {
            *slot.lock() = Some(RawBatch::new(batch));
            Ok(Vec::new())
        }
        _ => batch.into_iter().map(Row::into_document).collect(),
    }
}

/// A non-negative batch size argument.
pub fn batch_size(req: &Request, field: &str) -> Result<Option<usize>, CommandError> {
    non_negative_batch_size(req.opt_i64(field)?)
}

/// MongoDB's error for a negative value of a field that must be at least 0.
pub fn negative(field: &str, n: i64) -> CommandError {
    CommandError::new(
        51024,
        format!("BSON field '{field}' value must be >= 0, actual value '{n}'"),
    )
}

/// Checks a batch size value (`None` = not given).
pub fn non_negative_batch_size(n: Option<i64>) -> Result<Option<usize>, CommandError> {
    match n {
        None => Ok(None),
        Some(n) if n < 0 => Err(negative("batchSize", n)),
        Some(n) => Ok(Some(n as usize)),
    }
}

/// The `cursor.batchSize` of an aggregate.
pub fn cursor_batch_size(
    req: &Request,
    cursor_opts: Option<&Document>,
) -> Result<Option<usize>, CommandError> {
    match cursor_opts.and_then(|d| d.get("batchSize")) {
        None | Some(Bson::Null) => Ok(None),
        Some(v) => non_negative_batch_size(Some(
            as_i64(v).ok_or_else(|| req.wrong_type("cursor.batchSize", v, "long"))?,
        )),
    }
}

/// The reply of a listing command (`listIndexes`, `listCollections`): its documents
/// under a cursor, the first batch as large as `cursor.batchSize` asks.
pub fn listing_reply(req: &Request, ns: String, docs: Vec<Document>) -> CmdResult {
    let cursor = match req.body.get("cursor") {
        Some(Bson::Document(d)) => Some(d.clone()),
        Some(v) => return Err(req.wrong_type("cursor", v, "object")),
        None => None,
    };
    let batch = cursor_batch_size(req, cursor.as_ref())?;
    cursor_reply(req, ns, Box::new(docs.into_iter().map(Ok)), batch, false)
}
