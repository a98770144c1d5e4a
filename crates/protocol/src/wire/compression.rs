//! OP_COMPRESSED: a message whose body is compressed with snappy, zlib or zstd (or not
//! at all: noop). A client names the compressors it offers in its handshake
//! (`compression: [...]`); the server answers with those it supports, in the client's
//! order, and the client then sends compressed messages, which the server answers
//! compressed the same way, except the replies the specification keeps plain (the
//! handshake and authentication commands).
//!
//! Layout after the header: the original opcode (i32), the uncompressed size of the body
//! (i32), the compressor id (u8), then the compressed body.

use super::codec::{Header, WireError, HEADER_LEN, MAX_MESSAGE_SIZE, OP_COMPRESSED};
use std::io::Read;

/// The compressors this server speaks, by name and wire id.
const COMPRESSORS: &[(&str, u8)] = &[("snappy", 1), ("zlib", 2), ("zstd", 3)];

const NOOP: u8 = 0;

/// Commands whose replies are never compressed (the handshake and authentication).
const PLAIN_REPLIES: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "saslStart",
    "saslContinue",
    "getnonce",
    "authenticate",
    "createUser",
    "updateUser",
    "copydbSaslStart",
    "copydbgetnonce",
    "copydb",
];

/// The compressors of a handshake's `compression` list this server supports, in the
/// client's order.
pub fn negotiate(offered: &[String]) -> Vec<String> {
    offered
        .iter()
        .filter(|name| COMPRESSORS.iter().any(|(n, _)| n == name))
        .cloned()
        .collect()
}

/// Whether the reply to `command` may be compressed.
pub fn may_compress_reply(command: &str) -> bool {
    !PLAIN_REPLIES.contains(&command)
}

/// The size an OP_COMPRESSED message announces for the message inside it (header
/// included); `None` for any other message.
pub fn announced_size(header: &Header, whole: &[u8]) -> Option<usize> {
    if header.op_code != OP_COMPRESSED {
        return None;
    }
    let b = whole.get(HEADER_LEN + 4..HEADER_LEN + 8)?;
    let size = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    usize::try_from(size)
        .ok()
        .map(|s| s.saturating_add(HEADER_LEN))
}

/// The message inside an OP_COMPRESSED one: its header and whole bytes as if it had been
/// sent plain, and the compressor it came with (for the reply).
pub fn decompress(header: &Header, whole: &[u8]) -> Result<(Header, Vec<u8>, u8), WireError> {
    let body = whole.get(HEADER_LEN..).unwrap_or_default();
    if body.len() < 9 {
        return Err(WireError::Truncated("OP_COMPRESSED header"));
    }
    let op_code = i32::from_le_bytes([body[0], body[1], body[2], body[3]]);
    let size = i32::from_le_bytes([body[4], body[5], body[6], body[7]]);
    let compressor = body[8];
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= MAX_MESSAGE_SIZE - HEADER_LEN)
        .ok_or(WireError::BadLength(i64::from(size)))?;
    let data = &body[9..];
    let plain = match compressor {
        NOOP => data.to_vec(),
        1 => {
            let n = snap::raw::decompress_len(data).map_err(|e| invalid(&e))?;
            if n != size {
                return Err(WireError::InvalidCompressed("size mismatch".into()));
            }
            snap::raw::Decoder::new()
                .decompress_vec(data)
                .map_err(|e| invalid(&e))?
        }
        2 => read_limited(flate2::read::ZlibDecoder::new(data), size)?,
        3 => read_limited(
            zstd::stream::read::Decoder::new(data).map_err(|e| invalid(&e))?,
            size,
        )?,
        other => {
            return Err(WireError::InvalidCompressed(format!(
                "unknown compressor id {other}"
            )))
        }
    };
    if plain.len() != size {
        return Err(WireError::InvalidCompressed(format!(
            "the body is {} bytes, the message said {size}",
            plain.len()
        )));
    }
    let inner = Header {
        message_length: i32::try_from(HEADER_LEN + size).unwrap_or(i32::MAX),
        request_id: header.request_id,
        response_to: header.response_to,
        op_code,
    };
    let mut out = Vec::with_capacity(HEADER_LEN + size);
    out.extend_from_slice(&inner.message_length.to_le_bytes());
    out.extend_from_slice(&inner.request_id.to_le_bytes());
    out.extend_from_slice(&inner.response_to.to_le_bytes());
    out.extend_from_slice(&inner.op_code.to_le_bytes());
    out.extend_from_slice(&plain);
    Ok((inner, out, compressor))
}

/// The encoded message `plain` (header included) compressed with `compressor`.
pub fn compress(plain: &[u8], compressor: u8) -> Result<Vec<u8>, WireError> {
    let (head, body) = plain.split_at(HEADER_LEN.min(plain.len()));
    if head.len() < HEADER_LEN {
        return Err(WireError::Truncated("reply header"));
    }
    let packed = match compressor {
        NOOP => body.to_vec(),
        1 => snap::raw::Encoder::new()
            .compress_vec(body)
            .map_err(|e| invalid(&e))?,
        2 => {
            use std::io::Write;
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(body).map_err(|e| invalid(&e))?;
            z.finish().map_err(|e| invalid(&e))?
        }
        3 => zstd::bulk::compress(body, 1).map_err(|e| invalid(&e))?,
        other => {
            return Err(WireError::InvalidCompressed(format!(
                "unknown compressor id {other}"
            )))
        }
    };
    let len = HEADER_LEN + 9 + packed.len();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&i32::try_from(len).unwrap_or(i32::MAX).to_le_bytes());
    out.extend_from_slice(&head[4..12]);
    out.extend_from_slice(&OP_COMPRESSED.to_le_bytes());
    out.extend_from_slice(&head[12..16]);
    out.extend_from_slice(&i32::try_from(body.len()).unwrap_or(i32::MAX).to_le_bytes());
    out.push(compressor);
    out.extend_from_slice(&packed);
    Ok(out)
}

fn invalid(e: &dyn std::fmt::Display) -> WireError {
    WireError::InvalidCompressed(e.to_string())
}

/// Reads at most `size + 1` bytes (one more than announced shows a lying header without
/// inflating a bomb).
fn read_limited(r: impl Read, size: usize) -> Result<Vec<u8>, WireError> {
    // Grown as bytes come, never to the announced size up front.
    let mut out = Vec::with_capacity(size.min(64 * 1024));
    r.take(size as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| invalid(&e))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_compressor_round_trips_a_message_and_keeps_its_header() {
        let mut plain = Vec::new();
        plain.extend_from_slice(&(HEADER_LEN as i32 + 40).to_le_bytes());
        plain.extend_from_slice(&7_i32.to_le_bytes());
        plain.extend_from_slice(&3_i32.to_le_bytes());
        plain.extend_from_slice(&2013_i32.to_le_bytes());
        plain.extend((0..40u8).map(|i| i % 5));
        for (_, id) in COMPRESSORS.iter().copied().chain([("noop", NOOP)]) {
            let packed = compress(&plain, id).unwrap();
            let mut h = [0u8; HEADER_LEN];
            h.copy_from_slice(&packed[..HEADER_LEN]);
            let header = Header::parse(&h).unwrap();
            assert_eq!(header.op_code, OP_COMPRESSED);
            let (inner, whole, used) = decompress(&header, &packed).unwrap();
            assert_eq!((inner.op_code, inner.request_id, used), (2013, 7, id));
            assert_eq!(whole, plain);
            assert_eq!(announced_size(&header, &packed), Some(plain.len()));
        }
    }

    #[test]
    fn a_body_longer_than_announced_is_refused() {
        let mut plain = vec![0u8; HEADER_LEN];
        plain.extend(vec![1u8; 100]);
        let mut packed = compress(&plain, 2).unwrap();
        // Announce 50 bytes where 100 come.
        packed[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&50_i32.to_le_bytes());
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&packed[..HEADER_LEN]);
        let header = Header::parse(&h).unwrap();
        assert!(decompress(&header, &packed).is_err());
    }

    #[test]
    fn only_supported_compressors_are_negotiated_in_the_clients_order() {
        let offered = ["zstd", "lz4", "zlib"].map(String::from);
        assert_eq!(negotiate(&offered), vec!["zstd", "zlib"]);
    }
}
