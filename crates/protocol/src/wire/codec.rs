//! Byte-level codec of MongoDB wire messages.

use crate::cursor::RawBatch;
use bson::{Bson, Document, RawDocument};
use hourglass_query::limits::{check_raw_document, RawCheckError, MAX_BSON_DEPTH};

pub const HEADER_LEN: usize = 16;
/// maxMessageSizeBytes advertised by `hello`.
pub const MAX_MESSAGE_SIZE: usize = 48_000_000;
pub const OP_REPLY: i32 = 1;
pub const OP_QUERY: i32 = 2004;
pub const OP_COMPRESSED: i32 = 2012;
pub const OP_MSG: i32 = 2013;

const FLAG_CHECKSUM_PRESENT: u32 = 1;
const FLAG_MORE_TO_COME: u32 = 1 << 1;
const FLAG_EXHAUST_ALLOWED: u32 = 1 << 16;
/// Flag bits a client may set on OP_MSG; any other *required* bit (0..15) is an error.
const KNOWN_FLAGS: u32 = FLAG_CHECKSUM_PRESENT | FLAG_MORE_TO_COME | FLAG_EXHAUST_ALLOWED;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WireError {
    #[error("message length {0} is invalid (must be between 16 and {MAX_MESSAGE_SIZE})")]
    BadLength(i64),
    #[error("message truncated: {0}")]
    Truncated(&'static str),
    #[error("invalid BSON in message: {0}")]
    InvalidBson(String),
    #[error("OP_MSG checksum mismatch: computed {computed:#010x}, message says {claimed:#010x}")]
    ChecksumMismatch { computed: u32, claimed: u32 },
    #[error("unsupported opcode {0}")]
    UnsupportedOpcode(i32),
    #[error("OP_MSG has unknown required flag bits {0:#x}")]
    UnknownFlags(u32),
    #[error("OP_MSG section kind {0} is not supported")]
    BadSectionKind(u8),
    #[error("OP_MSG must have exactly one body section, found {0}")]
    BodyCount(usize),
    #[error("BSONObj exceeds maximum nested object depth: {0}")]
    TooDeep(usize),
    #[error("Write batch sizes must be between 1 and {MAX_WRITE_BATCH}. Got {0} operations.")]
    BatchTooLarge(usize),
    #[error("Duplicate document sequence: {0}")]
    DuplicateSequence(String),
    #[error("Duplicate field between body and document sequence {0}")]
    DuplicateField(String),
    #[error("invalid OP_COMPRESSED message: {0}")]
    InvalidCompressed(String),
}

/// maxWriteBatchSize advertised by `hello`: statements in one insert, update or delete.
pub const MAX_WRITE_BATCH: usize = 100_000;

/// Commands whose statements arrive as one array and are bounded by [`MAX_WRITE_BATCH`],
/// with the name of that array.
const WRITE_BATCHES: &[(&str, &str)] = &[
    ("insert", "documents"),
    ("update", "updates"),
    ("delete", "deletes"),
];

impl WireError {
    /// MongoDB's error code for this failure, used when the connection can still answer.
    /// Whether the connection can still answer with an error reply (the frame was read
    /// whole, only its content is refused).
    pub fn answerable(&self) -> bool {
        matches!(
            self,
            WireError::InvalidBson(_)
                | WireError::TooDeep(_)
                | WireError::BatchTooLarge(_)
                | WireError::DuplicateSequence(_)
                | WireError::DuplicateField(_)
        )
    }

    /// MongoDB's code: 22 InvalidBSON, 15 Overflow, 16 InvalidLength, 10334
    /// BSONObjectTooLarge, else 9 FailedToParse.
    pub fn code(&self) -> i32 {
        match self {
            WireError::InvalidBson(_) => 22,
            WireError::TooDeep(_) => 15,
            WireError::BatchTooLarge(_) => 16,
            WireError::DuplicateSequence(_) => 40431,
            WireError::DuplicateField(_) => 40433,
            WireError::ChecksumMismatch { .. } => 9,
            WireError::BadLength(_) => 10334,
            _ => 9,
        }
    }
}

/// The 16-byte header every message starts with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    pub message_length: i32,
    pub request_id: i32,
    pub response_to: i32,
    pub op_code: i32,
}

impl Header {
    /// Parses a header and checks the length it announces.
    pub fn parse(b: &[u8; HEADER_LEN]) -> Result<Header, WireError> {
        let h = Header {
            message_length: i32_at(b, 0),
            request_id: i32_at(b, 4),
            response_to: i32_at(b, 8),
            op_code: i32_at(b, 12),
        };
        let len = i64::from(h.message_length);
        if len < HEADER_LEN as i64 || len > MAX_MESSAGE_SIZE as i64 {
            return Err(WireError::BadLength(len));
        }
        Ok(h)
    }
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    i32::from_le_bytes(x)
}

/// An OP_MSG: flags, the body document, and kind-1 document sequences.
#[derive(Debug, Clone, PartialEq)]
pub struct OpMsg {
    pub flags: u32,
    pub body: Document,
    pub sequences: Vec<(String, DocSequence)>,
    /// Elements in the whole message, at every level: what a decoded copy costs.
    pub elements: usize,
}

/// A kind-1 document sequence, validated but not decoded: a handler decodes it when it
/// takes it, after checking how many documents it holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DocSequence {
    bytes: Vec<u8>,
    count: usize,
}

impl DocSequence {
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Decodes the documents (each was validated when the message was read).
    pub fn decode(&self) -> Result<Vec<Document>, WireError> {
        let mut out = Vec::with_capacity(self.count);
        let mut rest = &self.bytes[..];
        while !rest.is_empty() {
            let (doc, used) = read_document(rest)?;
            out.push(doc);
            rest = &rest[used..];
        }
        Ok(out)
    }

    /// The documents, undecoded (each was validated when the message was read).
    pub fn raw_documents(&self) -> impl Iterator<Item = &RawDocument> + '_ {
        let mut rest = &self.bytes[..];
        std::iter::from_fn(move || {
            let len = framed_len(rest).ok()?;
            let doc = RawDocument::from_bytes(&rest[..len]).ok()?;
            rest = &rest[len..];
            Some(doc)
        })
    }

    /// A sequence of already-valid documents (for requests built by the server itself).
    pub fn from_documents(docs: &[Document]) -> Result<DocSequence, WireError> {
        let mut bytes = Vec::new();
        for d in docs {
            d.to_writer(&mut bytes)
                .map_err(|e| WireError::InvalidBson(e.to_string()))?;
        }
        Ok(DocSequence {
            bytes,
            count: docs.len(),
        })
    }
}

impl OpMsg {
    pub fn more_to_come(&self) -> bool {
        self.flags & FLAG_MORE_TO_COME != 0
    }
}

/// A legacy OP_QUERY (accepted only for the connection handshake).
#[derive(Debug, Clone, PartialEq)]
pub struct OpQuery {
    pub flags: i32,
    pub full_collection_name: String,
    pub number_to_skip: i32,
    pub number_to_return: i32,
    pub query: Document,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Msg(OpMsg),
    Query(OpQuery),
}

/// Checks the BSON document at the start of `b` (structure and nesting depth, without
/// recursion), returning it and its length.
fn check_document(b: &[u8]) -> Result<(&RawDocument, usize, usize), WireError> {
    let len = framed_len(b)?;
    let raw =
        RawDocument::from_bytes(&b[..len]).map_err(|e| WireError::InvalidBson(e.to_string()))?;
    let stats = check_raw_document(raw, MAX_BSON_DEPTH).map_err(|e| match e {
        RawCheckError::Invalid(m) => WireError::InvalidBson(m),
        RawCheckError::TooDeep { limit } => WireError::TooDeep(limit),
    })?;
    Ok((raw, len, stats.elements))
}

/// Reads one BSON document at the start of `b` (checked first: decoding recurses, so the
/// depth must be known to be bounded), returning it and its length.
fn read_document(b: &[u8]) -> Result<(Document, usize), WireError> {
    let (raw, len, _) = check_document(b)?;
    let doc = raw_to_document(raw)?;
    Ok((doc, len))
}

fn raw_to_document(raw: &RawDocument) -> Result<Document, WireError> {
    bson::from_slice::<Document>(raw.as_bytes()).map_err(|e| WireError::InvalidBson(e.to_string()))
}

/// The length a document at the start of `b` announces, checked against the bytes there.
fn framed_len(b: &[u8]) -> Result<usize, WireError> {
    if b.len() < 5 {
        return Err(WireError::Truncated("document length"));
    }
    let len = i32_at(b, 0);
    if len < 5 || len as usize > b.len() {
        return Err(WireError::InvalidBson(format!(
            "document length {len} does not fit in the {} bytes left",
            b.len()
        )));
    }
    Ok(len as usize)
}

/// An insert's `documents` array in the body becomes a document sequence, as drivers send
/// it anyway, so that the handler sees each document raw (and can refuse one as MongoDB
/// does, e.g. with two `_id` fields) whichever way it came. Returns the rest of the body
/// and the sequence; None when there is nothing to lift (or an element is not a document,
/// left for the handler's type error).
fn lift_insert_documents(
    body: &RawDocument,
    sequences: &[(String, DocSequence)],
) -> Option<(Document, DocSequence)> {
    let mut fields = body.into_iter();
    let (name, _) = fields.next()?.ok()?;
    if name != "insert" || sequences.iter().any(|(n, _)| n == "documents") {
        return None;
    }
    let Ok(Some(bson::raw::RawBsonRef::Array(items))) = body.get("documents") else {
        return None;
    };
    let mut seq = DocSequence::default();
    for item in items {
        let bson::raw::RawBsonRef::Document(d) = item.ok()? else {
            return None;
        };
        seq.bytes.extend_from_slice(d.as_bytes());
        seq.count += 1;
    }
    let mut rest = Document::new();
    for field in body {
        let (k, v) = field.ok()?;
        if k != "documents" {
            rest.insert(k, bson::Bson::try_from(v.to_raw_bson()).ok()?);
        }
    }
    Some((rest, seq))
}

/// Refuses an insert/update/delete body whose statement array is over [`MAX_WRITE_BATCH`],
/// before anything of it is decoded.
fn check_write_batch(body: &RawDocument) -> Result<(), WireError> {
    let Some(Ok((name, _))) = body.into_iter().next() else {
        return Ok(());
    };
    let Some((_, field)) = WRITE_BATCHES.iter().find(|(c, _)| *c == name) else {
        return Ok(());
    };
    if let Ok(Some(bson::raw::RawBsonRef::Array(items))) = body.get(field) {
        let n = items.into_iter().count();
        if n > MAX_WRITE_BATCH {
            return Err(WireError::BatchTooLarge(n));
        }
    }
    Ok(())
}

fn read_cstring(b: &[u8]) -> Result<(String, usize), WireError> {
    let end = b
        .iter()
        .position(|&c| c == 0)
        .ok_or(WireError::Truncated("cstring"))?;
    let s = std::str::from_utf8(&b[..end])
        .map_err(|_| WireError::InvalidBson("cstring is not UTF-8".into()))?;
    Ok((s.to_string(), end + 1))
}

/// Parses the message body (everything after the header) for `header.op_code`.
pub fn parse_message(header: &Header, whole: &[u8]) -> Result<Message, WireError> {
    let body = &whole[HEADER_LEN.min(whole.len())..];
    match header.op_code {
        OP_MSG => parse_op_msg(whole, body).map(Message::Msg),
        OP_QUERY => parse_op_query(body).map(Message::Query),
        other => Err(WireError::UnsupportedOpcode(other)),
    }
}

fn parse_op_msg(whole: &[u8], body: &[u8]) -> Result<OpMsg, WireError> {
    if body.len() < 4 {
        return Err(WireError::Truncated("OP_MSG flags"));
    }
    let flags = i32_at(body, 0) as u32;
    let required = flags & 0xFFFF;
    if required & !KNOWN_FLAGS != 0 {
        return Err(WireError::UnknownFlags(required & !KNOWN_FLAGS));
    }
    let mut sections = &body[4..];
    if flags & FLAG_CHECKSUM_PRESENT != 0 {
        if sections.len() < 4 {
            return Err(WireError::Truncated("OP_MSG checksum"));
        }
        let claimed = u32::from_le_bytes([
            whole[whole.len() - 4],
            whole[whole.len() - 3],
            whole[whole.len() - 2],
            whole[whole.len() - 1],
        ]);
        let computed = crc32c::crc32c(&whole[..whole.len() - 4]);
        if claimed != computed {
            return Err(WireError::ChecksumMismatch { computed, claimed });
        }
        sections = &sections[..sections.len() - 4];
    }
    let mut bodies = Vec::new();
    let mut sequences = Vec::new();
    let mut elements = 0;
    while !sections.is_empty() {
        let kind = sections[0];
        sections = &sections[1..];
        match kind {
            0 => {
                let (raw, used, n) = check_document(sections)?;
                elements += n;
                bodies.push(raw);
                sections = &sections[used..];
            }
            1 => {
                if sections.len() < 4 {
                    return Err(WireError::Truncated("document sequence size"));
                }
                let size = i32_at(sections, 0);
                if size < 4 || size as usize > sections.len() {
                    return Err(WireError::Truncated("document sequence"));
                }
                let mut seq = &sections[4..size as usize];
                let (name, used) = read_cstring(seq)?;
                seq = &seq[used..];
                let bytes = seq.to_vec();
                let mut count = 0;
                while !seq.is_empty() {
                    let (_, used, n) = check_document(seq)?;
                    elements += n + 1;
                    count += 1;
                    seq = &seq[used..];
                }
                if count > MAX_WRITE_BATCH {
                    return Err(WireError::BatchTooLarge(count));
                }
                sequences.push((name, DocSequence { bytes, count }));
                sections = &sections[size as usize..];
            }
            k => return Err(WireError::BadSectionKind(k)),
        }
    }
    let [raw_body] = bodies[..] else {
        return Err(WireError::BodyCount(bodies.len()));
    };
    check_write_batch(raw_body)?;
    for (i, (name, _)) in sequences.iter().enumerate() {
        if sequences[..i].iter().any(|(n, _)| n == name) {
            return Err(WireError::DuplicateSequence(name.clone()));
        }
        if raw_body.get(name).ok().flatten().is_some() {
            return Err(WireError::DuplicateField(name.clone()));
        }
    }
    let body = match lift_insert_documents(raw_body, &sequences) {
        Some((rest, docs)) => {
            sequences.push(("documents".to_string(), docs));
            rest
        }
        None => raw_to_document(raw_body)?,
    };
    Ok(OpMsg {
        flags,
        body,
        sequences,
        elements,
    })
}

fn parse_op_query(b: &[u8]) -> Result<OpQuery, WireError> {
    if b.len() < 4 {
        return Err(WireError::Truncated("OP_QUERY flags"));
    }
    let flags = i32_at(b, 0);
    let (full_collection_name, used) = read_cstring(&b[4..])?;
    let rest = &b[4 + used..];
    if rest.len() < 8 {
        return Err(WireError::Truncated("OP_QUERY skip/return"));
    }
    let number_to_skip = i32_at(rest, 0);
    let number_to_return = i32_at(rest, 4);
    let (query, _) = read_document(&rest[8..])?;
    Ok(OpQuery {
        flags,
        full_collection_name,
        number_to_skip,
        number_to_return,
        query,
    })
}

fn header_bytes(len: usize, request_id: i32, response_to: i32, op: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&(len as i32).to_le_bytes());
    out.extend_from_slice(&request_id.to_le_bytes());
    out.extend_from_slice(&response_to.to_le_bytes());
    out.extend_from_slice(&op.to_le_bytes());
    out
}

/// Encodes an OP_MSG reply with one body section.
pub fn encode_op_msg(
    request_id: i32,
    response_to: i32,
    body: &Document,
) -> Result<Vec<u8>, WireError> {
    encode_op_msg_with_batch(request_id, response_to, body, None)
}

/// Encodes an OP_MSG reply whose `cursor.firstBatch` (or `nextBatch`), an empty array in
/// `body`, holds `batch` (rows sent as they are).
pub fn encode_op_msg_with_batch(
    request_id: i32,
    response_to: i32,
    body: &Document,
    batch: Option<&RawBatch>,
) -> Result<Vec<u8>, WireError> {
    let size =
        hourglass_query::bson_size::bson_size(body) + batch.map_or(0, RawBatch::elements_len);
    let len = HEADER_LEN + 4 + 1 + size;
    let mut out = header_bytes(len, request_id, response_to, OP_MSG);
    out.reserve(len.saturating_sub(out.len()));
    out.extend_from_slice(&0u32.to_le_bytes());
    out.push(0);
    match batch {
        None => hourglass_query::bson_write::write_document(body, &mut out),
        Some(batch) => write_with_batch(body, batch, &mut out),
    }
    .map_err(WireError::InvalidBson)?;
    // The header's length is exact: bson_size equals the bytes written (tested).
    let written = out.len();
    if let Ok(n) = i32::try_from(written) {
        out[0..4].copy_from_slice(&n.to_le_bytes());
    }
    Ok(out)
}

/// Writes `body` with `batch` as the elements of its `cursor`'s empty batch array.
fn write_with_batch(body: &Document, batch: &RawBatch, out: &mut Vec<u8>) -> Result<(), String> {
    use bson::spec::ElementType;
    use hourglass_query::bson_write::{write_element, write_header, write_len_prefixed};
    write_len_prefixed(out, |out| {
        for (k, v) in body {
            match v {
                Bson::Document(cursor) if k == "cursor" => {
                    write_header(ElementType::EmbeddedDocument, k, out)?;
                    write_len_prefixed(out, |out| {
                        for (ck, cv) in cursor {
                            let is_batch = matches!(ck.as_str(), "firstBatch" | "nextBatch");
                            match cv {
                                Bson::Array(a) if is_batch && a.is_empty() => {
                                    write_header(ElementType::Array, ck, out)?;
                                    write_len_prefixed(out, |out| batch.write_elements(out))?;
                                }
                                _ => write_element(ck, cv, out)?,
                            }
                        }
                        Ok(())
                    })?;
                }
                _ => write_element(k, v, out)?,
            }
        }
        Ok(())
    })
}

/// Encodes an OP_REPLY carrying one document (the answer to an OP_QUERY handshake).
pub fn encode_op_reply(
    request_id: i32,
    response_to: i32,
    flags: i32,
    doc: &Document,
) -> Result<Vec<u8>, WireError> {
    let d = bson::to_vec(doc).map_err(|e| WireError::InvalidBson(e.to_string()))?;
    let len = HEADER_LEN + 4 + 8 + 4 + 4 + d.len();
    let mut out = header_bytes(len, request_id, response_to, OP_REPLY);
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&0i64.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&1i32.to_le_bytes());
    out.extend_from_slice(&d);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use proptest::prelude::*;

    fn op_msg_bytes(flags: u32, sections: &[u8], checksum: bool) -> Vec<u8> {
        let mut len = HEADER_LEN + 4 + sections.len();
        if checksum {
            len += 4;
        }
        let mut out = header_bytes(len, 7, 0, OP_MSG);
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(sections);
        if checksum {
            let crc = crc32c::crc32c(&out);
            out.extend_from_slice(&crc.to_le_bytes());
        }
        out
    }

    fn parse(bytes: &[u8]) -> Result<Message, WireError> {
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&bytes[..HEADER_LEN]);
        let header = Header::parse(&h)?;
        parse_message(&header, bytes)
    }

    #[test]
    fn a_sequence_named_like_a_body_field_or_another_sequence_is_refused() {
        let sequence = |name: &str| {
            let mut seq = format!("{name}\0").into_bytes();
            seq.extend(bson::to_vec(&doc! {"a": 1}).unwrap());
            let mut out = vec![1u8];
            out.extend(((seq.len() + 4) as i32).to_le_bytes());
            out.extend(seq);
            out
        };
        let body = |d: Document| {
            let mut out = vec![0u8];
            out.extend(bson::to_vec(&d).unwrap());
            out
        };
        let mut sections = body(doc! {"insert": "c", "documents": [{"a": 2}], "$db": "t"});
        sections.extend(sequence("documents"));
        let err = parse(&op_msg_bytes(0, &sections, false)).unwrap_err();
        assert_eq!((err.code(), err.answerable()), (40433, true));
        let mut sections = body(doc! {"insert": "c", "$db": "t"});
        sections.extend(sequence("documents"));
        sections.extend(sequence("documents"));
        let err = parse(&op_msg_bytes(0, &sections, false)).unwrap_err();
        assert_eq!(err.code(), 40431);
    }

    #[test]
    fn op_msg_with_body_and_document_sequence() {
        let mut sections = vec![0u8];
        sections.extend(bson::to_vec(&doc! {"insert": "c", "$db": "test"}).unwrap());
        let mut seq = b"documents\0".to_vec();
        seq.extend(bson::to_vec(&doc! {"a": 1}).unwrap());
        seq.extend(bson::to_vec(&doc! {"a": 2}).unwrap());
        sections.push(1);
        sections.extend(((seq.len() + 4) as i32).to_le_bytes());
        sections.extend(seq);
        let Message::Msg(m) = parse(&op_msg_bytes(0, &sections, false)).unwrap() else {
            panic!("not OP_MSG")
        };
        assert_eq!(m.sequences.len(), 1);
        assert_eq!(m.sequences[0].0, "documents");
        assert_eq!(m.sequences[0].1.len(), 2);
        assert_eq!(m.sequences[0].1.decode().unwrap().len(), 2);
    }

    #[test]
    fn checksum_is_verified() {
        let mut sections = vec![0u8];
        sections.extend(bson::to_vec(&doc! {"ping": 1}).unwrap());
        let good = op_msg_bytes(FLAG_CHECKSUM_PRESENT, &sections, true);
        assert!(parse(&good).is_ok());
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 1] ^= 0xFF;
        assert!(matches!(
            parse(&bad),
            Err(WireError::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn bad_lengths_and_bson_are_errors() {
        let mut h = [0u8; HEADER_LEN];
        h[..4].copy_from_slice(&(MAX_MESSAGE_SIZE as i32 + 1).to_le_bytes());
        assert!(Header::parse(&h).is_err());
        h[..4].copy_from_slice(&3i32.to_le_bytes());
        assert!(Header::parse(&h).is_err());
        let sections = [0u8, 0xFF, 0xFF, 0, 0, 1];
        assert!(parse(&op_msg_bytes(0, &sections, false)).is_err());
    }

    #[test]
    fn op_reply_round_trip_shape() {
        let r = encode_op_reply(1, 9, 8, &doc! {"ok": 1.0}).unwrap();
        assert_eq!(i32_at(&r, 0) as usize, r.len());
        assert_eq!(i32_at(&r, 12), OP_REPLY);
        assert_eq!(i32_at(&r, 8), 9);
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(op in prop_oneof![Just(OP_MSG), Just(OP_QUERY), any::<i32>()], body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut bytes = header_bytes(HEADER_LEN + body.len(), 1, 0, op);
            bytes.extend(body);
            let _ = parse(&bytes);
        }
    }
}
