//! Request bodies: read within `httpMaxBodyBytes` (InfluxDB's `max-body-size`, 25 MB by
//! default), and decompressed within the same limit so that a small gzip or snappy body
//! cannot expand without bound.

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use hourglass_protocol::ServerState;
use std::io::Read;

/// InfluxDB's default `max-body-size`.
pub const DEFAULT_MAX_BODY_BYTES: i64 = 25_000_000;

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("request body is over the {0} byte limit")]
    TooLarge(usize),
    #[error("cannot read the request body: {0}")]
    Read(String),
    #[error("cannot decode the request body: {0}")]
    Decode(String),
    #[error("unsupported Content-Encoding: {0}")]
    Encoding(String),
}

/// The body limit in force now.
pub fn limit(state: &ServerState) -> usize {
    state
        .params
        .get_i64("httpMaxBodyBytes", DEFAULT_MAX_BODY_BYTES)
        .max(1) as usize
}

/// The whole body, or `TooLarge` as soon as it passes `limit` bytes.
pub async fn read(body: Body, limit: usize) -> Result<Bytes, BodyError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        // axum reports the limit as a `LengthLimitError` somewhere in the source chain.
        let mut source: Option<&dyn std::error::Error> = Some(&e);
        while let Some(s) = source {
            if s.to_string().contains("length limit") {
                return BodyError::TooLarge(limit);
            }
            source = s.source();
        }
        BodyError::Read(e.to_string())
    })
}

/// The body with its `Content-Encoding` (none, `identity` or `gzip`) undone. A gzip body
/// may hold several members (all are read, as Go's reader does); bytes after the last
/// member that do not start another are an error.
pub fn decode_gzip(headers: &HeaderMap, raw: Bytes, limit: usize) -> Result<Bytes, BodyError> {
    match content_encoding(headers).as_deref() {
        None | Some("identity") => Ok(raw),
        Some("gzip") => {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(&raw[..])
                .take(limit as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| BodyError::Decode(format!("gzip: {e}")))?;
            if out.len() > limit {
                return Err(BodyError::TooLarge(limit));
            }
            Ok(out.into())
        }
        Some(other) => Err(BodyError::Encoding(other.to_string())),
    }
}

/// A snappy block (Prometheus remote write), refused before decoding when its declared
/// length is over `limit`.
pub fn decode_snappy(raw: &[u8], limit: usize) -> Result<Vec<u8>, BodyError> {
    let len = snap::raw::decompress_len(raw).map_err(|e| BodyError::Decode(e.to_string()))?;
    if len > limit {
        return Err(BodyError::TooLarge(limit));
    }
    snap::raw::Decoder::new()
        .decompress_vec(raw)
        .map_err(|e| BodyError::Decode(e.to_string()))
}

pub fn content_encoding(headers: &HeaderMap) -> Option<String> {
    headers
        .get(axum::http::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).expect("in memory");
        e.finish().expect("in memory")
    }

    fn gzip_headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::CONTENT_ENCODING,
            axum::http::HeaderValue::from_static("gzip"),
        );
        h
    }

    fn decode(raw: Vec<u8>, limit: usize) -> Result<Bytes, BodyError> {
        decode_gzip(&gzip_headers(), raw.into(), limit)
    }

    #[test]
    fn every_member_of_a_multi_member_gzip_body_is_read() {
        let mut raw = gzip(b"m v=1 1\n");
        raw.extend(gzip(b"m v=2 2\n"));
        raw.extend(gzip(b"m v=3 3\n"));
        let out = decode(raw, 1000).expect("decodes");
        assert_eq!(&out[..], b"m v=1 1\nm v=2 2\nm v=3 3\n");
    }

    #[test]
    fn bytes_after_the_gzip_data_are_an_error() {
        for junk in [&b"garbage"[..], b"\0\0\0\0", b"\x1f"] {
            let mut raw = gzip(b"m v=1 1\n");
            raw.extend_from_slice(junk);
            assert!(
                matches!(decode(raw, 1000), Err(BodyError::Decode(_))),
                "{junk:?}"
            );
        }
    }

    #[test]
    fn the_size_limit_applies_to_all_members_together() {
        let mut raw = gzip(&[b'a'; 600]);
        raw.extend(gzip(&[b'b'; 600]));
        assert!(matches!(
            decode(raw.clone(), 1000),
            Err(BodyError::TooLarge(1000))
        ));
        assert_eq!(decode(raw, 1200).expect("fits").len(), 1200);
    }
}
