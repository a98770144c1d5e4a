//! Literal BSON elements inside a BSONColumn: a type byte, an empty field name (one NUL
//! byte) and the value in its ordinary BSON form (see `docs/formats/bsoncolumn.md`,
//! section "Literals").
//!
//! The element's length is computed here from its type; the bytes are then wrapped in a
//! one-field document and handed to the `bson` crate, which validates and converts them.
//! Nesting is checked first so a deeply nested literal cannot exhaust the stack.

use bson::raw::{RawBsonRef, RawDocument};
use bson::Bson;

use super::{ColumnError, MAX_NESTING};

/// Parses the literal element at the start of `rest` (its type byte), found at column
/// offset `offset`. Returns the value and the element's total length in bytes.
pub(crate) fn parse_element(rest: &[u8], offset: usize) -> Result<(Bson, usize), ColumnError> {
    let invalid = |reason: String| ColumnError::InvalidLiteral { offset, reason };
    let (&element_type, after_type) = rest
        .split_first()
        .ok_or(ColumnError::Truncated("a literal runs past the end"))?;
    let (&name_end, value) = after_type
        .split_first()
        .ok_or(ColumnError::Truncated("a literal runs past the end"))?;
    if name_end != 0 {
        return Err(invalid(
            "a literal must have an empty field name".to_string(),
        ));
    }
    let value_len = value_len(element_type, value).map_err(invalid)?;
    let value_bytes = value
        .get(..value_len)
        .ok_or(ColumnError::Truncated("a literal runs past the end"))?;

    // Wrap as { "": <value> } and let the bson crate validate it.
    let doc_len = value_len
        .checked_add(7)
        .filter(|len| i32::try_from(*len).is_ok())
        .ok_or_else(|| invalid("the literal is too large".to_string()))?;
    let mut doc = Vec::with_capacity(doc_len);
    doc.extend_from_slice(&(doc_len as i32).to_le_bytes());
    doc.push(element_type);
    doc.push(0);
    doc.extend_from_slice(value_bytes);
    doc.push(0);
    let raw = RawDocument::from_bytes(&doc).map_err(|e| invalid(e.to_string()))?;
    let mut elements = raw.iter();
    let (_, value) = elements
        .next()
        .ok_or_else(|| invalid("the literal holds no element".to_string()))?
        .map_err(|e| invalid(e.to_string()))?;
    if let Some(extra) = elements.next() {
        // Only possible if the computed length disagrees with the bson crate's view.
        let reason = match extra {
            Ok(_) => "the literal's length is inconsistent".to_string(),
            Err(e) => e.to_string(),
        };
        return Err(invalid(reason));
    }
    let bson = to_bson(value, 0).map_err(invalid)?;
    Ok((bson, value_len + 2))
}

/// Converts a raw value to [`Bson`], refusing nesting deeper than [`MAX_NESTING`].
/// `depth` is the nesting level `value` sits at.
pub(crate) fn to_bson(value: RawBsonRef<'_>, depth: usize) -> Result<Bson, String> {
    check_nesting(value, depth)?;
    Bson::try_from(value).map_err(|e| e.to_string())
}

/// Walks embedded documents, arrays and code-with-scope scopes, failing past
/// [`MAX_NESTING`] levels. The recursion is bounded by that limit.
fn check_nesting(value: RawBsonRef<'_>, depth: usize) -> Result<(), String> {
    let doc = match value {
        RawBsonRef::Document(doc) => doc,
        RawBsonRef::Array(array) => {
            RawDocument::from_bytes(array.as_bytes()).map_err(|e| e.to_string())?
        }
        RawBsonRef::JavaScriptCodeWithScope(code) => code.scope,
        _ => return Ok(()),
    };
    if depth >= MAX_NESTING {
        return Err(format!("documents nest deeper than {MAX_NESTING} levels"));
    }
    for item in doc {
        let (_, child) = item.map_err(|e| e.to_string())?;
        check_nesting(child, depth + 1)?;
    }
    Ok(())
}

/// Length of the value of a BSON element of type `element_type` whose bytes start
/// `value`. Only the length prefix (or C strings) is read; the content is validated by
/// the bson crate.
fn value_len(element_type: u8, value: &[u8]) -> Result<usize, String> {
    let prefix = |min: i32| -> Result<usize, String> {
        let head = value
            .get(..4)
            .ok_or_else(|| "the literal's length prefix runs past the end".to_string())?;
        let mut le = [0u8; 4];
        le.copy_from_slice(head);
        let len = i32::from_le_bytes(le);
        if len < min {
            return Err(format!("length prefix {len} is invalid"));
        }
        usize::try_from(len).map_err(|_| format!("length prefix {len} is invalid"))
    };
    let cstring = |from: usize| -> Result<usize, String> {
        value
            .get(from..)
            .and_then(|rest| rest.iter().position(|b| *b == 0))
            .map(|nul| nul + 1)
            .ok_or_else(|| "an unterminated C string".to_string())
    };
    let too_long = || "the literal is too large".to_string();
    Ok(match element_type {
        // double, date, timestamp, int64
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        // string, code, symbol: int32 length (including the NUL) + bytes
        0x02 | 0x0D | 0x0E => prefix(1)?.checked_add(4).ok_or_else(too_long)?,
        // document, array, code with scope: int32 total length
        0x03 | 0x04 => prefix(5)?,
        0x0F => prefix(14)?,
        // binData: int32 length + subtype + bytes
        0x05 => prefix(0)?.checked_add(5).ok_or_else(too_long)?,
        // undefined, null, maxKey, minKey
        0x06 | 0x0A | 0x7F | 0xFF => 0,
        0x07 => 12,
        0x08 => 1,
        // regex: two C strings
        0x0B => {
            let pattern = cstring(0)?;
            pattern
                .checked_add(cstring(pattern)?)
                .ok_or_else(too_long)?
        }
        // dbPointer: string + ObjectId
        0x0C => prefix(1)?.checked_add(16).ok_or_else(too_long)?,
        0x10 => 4,
        0x13 => 16,
        other => return Err(format!("unknown BSON type 0x{other:02x}")),
    })
}
