//! Per-type rules: how a value of each BSON type is encoded as a 64- or 128-bit integer
//! for delta arithmetic, and how a value is rebuilt from that integer (see
//! `docs/formats/bsoncolumn.md`, section "Reconstructing values").

use bson::spec::{BinarySubtype, ElementType};
use bson::Bson;

use super::{ColumnError, SCALE_MEMORY, SCALE_MULTIPLIERS};

/// Builds the value of `last`'s type from a 64-bit encoded value.
pub(super) fn materialize64(last: &Bson, encoded: i64, scale: u8) -> Result<Bson, ColumnError> {
    Ok(match last {
        Bson::Double(_) => Bson::Double(decode_double(encoded, scale)),
        Bson::ObjectId(oid) => Bson::ObjectId(decode_object_id(encoded, &oid.bytes())),
        Bson::DateTime(_) => Bson::DateTime(bson::DateTime::from_millis(encoded)),
        Bson::Int64(_) => Bson::Int64(encoded),
        // The value is stored in 32 bits: the high half is dropped.
        Bson::Int32(_) => Bson::Int32(encoded as i32),
        Bson::Boolean(_) => Bson::Boolean(encoded != 0),
        Bson::Timestamp(_) => {
            let bits = encoded as u64;
            Bson::Timestamp(bson::Timestamp {
                time: (bits >> 32) as u32,
                increment: bits as u32,
            })
        }
        other => return Err(ColumnError::NonDeltaType(type_name(other))),
    })
}

/// Builds the value of `last`'s type from a 128-bit encoded value.
pub(super) fn materialize128(last: &Bson, encoded: i128) -> Result<Bson, ColumnError> {
    let bytes = encoded.to_le_bytes();
    Ok(match last {
        Bson::String(_) => Bson::String(decode_string(&bytes)?),
        Bson::JavaScriptCode(_) => Bson::JavaScriptCode(decode_string(&bytes)?),
        Bson::Binary(b) => {
            if b.subtype == BinarySubtype::BinaryOld {
                return Err(ColumnError::NonDeltaType("binData subtype 2"));
            }
            let data = bytes.get(..b.bytes.len()).ok_or(ColumnError::Overflow(
                "a delta applies to a binData value longer than 16 bytes",
            ))?;
            Bson::Binary(bson::Binary {
                subtype: b.subtype,
                bytes: data.to_vec(),
            })
        }
        Bson::Decimal128(_) => Bson::Decimal128(bson::Decimal128::from_bytes(bytes)),
        other => return Err(ColumnError::NonDeltaType(type_name(other))),
    })
}

/// Zigzag decoding: even numbers are non-negative, odd numbers negative.
pub(super) fn zigzag64(raw: u64) -> i64 {
    ((raw >> 1) as i64) ^ -((raw & 1) as i64)
}

pub(super) fn zigzag128(raw: u128) -> i128 {
    ((raw >> 1) as i128) ^ -((raw & 1) as i128)
}

/// The 64-bit integer a double is delta-encoded as at `scale`, if exact.
pub(super) fn encode_double(value: f64, scale: u8) -> Option<i64> {
    if scale == SCALE_MEMORY {
        return Some(value.to_bits() as i64);
    }
    let multiplier = *SCALE_MULTIPLIERS.get(usize::from(scale))?;
    let scaled = value * multiplier;
    // Only integers up to 2^53 are exact in a double; this also rejects NaN.
    const LIMIT: f64 = 9_007_199_254_740_992.0;
    if !(-LIMIT..=LIMIT).contains(&scaled) {
        return None;
    }
    // Rounds half away from zero, as the encoder does.
    let encoded = scaled.round() as i64;
    // Numeric comparison: -0.0 encodes as 0 (MongoDB 7.0 accepted it; 8.0 refuses).
    if encoded as f64 / multiplier != value {
        return None;
    }
    Some(encoded)
}

pub(super) fn decode_double(encoded: i64, scale: u8) -> f64 {
    match SCALE_MULTIPLIERS.get(usize::from(scale)) {
        Some(multiplier) => encoded as f64 / multiplier,
        None => f64::from_bits(encoded as u64),
    }
}

/// The bytes of an ObjectId that change between ids (timestamp and counter), interleaved
/// so the fastest-changing bytes are least significant: counter byte 2, timestamp byte
/// 3, counter 1, timestamp 2, counter 0, timestamp 1, timestamp 0 (least significant
/// first). The 5 process-unique bytes are not encoded.
pub(super) fn encode_object_id(oid: &[u8; 12]) -> i64 {
    i64::from_le_bytes([oid[11], oid[3], oid[10], oid[2], oid[9], oid[1], oid[0], 0])
}

/// Inverse of [`encode_object_id`], taking the process-unique bytes from `previous`.
pub(super) fn decode_object_id(encoded: i64, previous: &[u8; 12]) -> bson::oid::ObjectId {
    let e = encoded.to_le_bytes();
    let mut oid = *previous;
    oid[0] = e[6];
    oid[1] = e[5];
    oid[2] = e[3];
    oid[3] = e[1];
    oid[9] = e[4];
    oid[10] = e[2];
    oid[11] = e[0];
    bson::oid::ObjectId::from_bytes(oid)
}

/// A string of at most 16 bytes, reversed, as a little-endian 128-bit integer. Longer
/// strings, and strings starting with a NUL byte, encode as 0.
pub(super) fn encode_string(s: &[u8]) -> i128 {
    if s.len() > 16 || s.first() == Some(&0) {
        return 0;
    }
    let mut bytes = [0u8; 16];
    for (dst, src) in bytes.iter_mut().zip(s.iter().rev()) {
        *dst = *src;
    }
    i128::from_le_bytes(bytes)
}

/// Inverse of [`encode_string`]: the length is up to the last non-zero byte.
pub(super) fn decode_string(bytes: &[u8; 16]) -> Result<String, ColumnError> {
    let len = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    let mut s: Vec<u8> = bytes.iter().take(len).copied().collect();
    s.reverse();
    String::from_utf8(s).map_err(|_| ColumnError::InvalidUtf8)
}

/// Binary data of at most 16 bytes as a little-endian 128-bit integer; longer data
/// encodes as 0.
pub(super) fn encode_binary(data: &[u8]) -> i128 {
    if data.len() > 16 {
        return 0;
    }
    let mut bytes = [0u8; 16];
    for (dst, src) in bytes.iter_mut().zip(data) {
        *dst = *src;
    }
    i128::from_le_bytes(bytes)
}

/// The BSON type name MongoDB uses for `value`'s type.
pub(super) fn type_name(value: &Bson) -> &'static str {
    match value.element_type() {
        ElementType::Double => "double",
        ElementType::String => "string",
        ElementType::EmbeddedDocument => "object",
        ElementType::Array => "array",
        ElementType::Binary => "binData",
        ElementType::Undefined => "undefined",
        ElementType::ObjectId => "objectId",
        ElementType::Boolean => "bool",
        ElementType::DateTime => "date",
        ElementType::Null => "null",
        ElementType::RegularExpression => "regex",
        ElementType::DbPointer => "dbPointer",
        ElementType::JavaScriptCode => "javascript",
        ElementType::Symbol => "symbol",
        ElementType::JavaScriptCodeWithScope => "javascriptWithScope",
        ElementType::Int32 => "int",
        ElementType::Timestamp => "timestamp",
        ElementType::Int64 => "long",
        ElementType::Decimal128 => "decimal",
        ElementType::MaxKey => "maxKey",
        ElementType::MinKey => "minKey",
    }
}
