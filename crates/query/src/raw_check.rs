//! The validation of raw BSON that every request document passes on the wire, as one
//! loop over the bytes: element types, lengths, terminators, UTF-8 of keys and strings,
//! boolean bytes, the old binary subtype's inner length, code-with-scope's total length,
//! and the nesting depth, without recursion.
//!
//! It accepts exactly what the `bson` crate's raw iterator accepts (the differential test
//! below walks every single-byte change and truncation of documents holding every type
//! through both). It exists because the iterator, which builds a value for each element
//! and wraps each step's errors, was a quarter of the server's time on time-series
//! ingest; this loop does the same checks at a fraction of the cost
//! (`docs/decisions/0009-raw-insert-path.md`).

/// Why a raw document failed `limits::check_raw`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawCheckError {
    /// Malformed BSON (bad lengths, bad UTF-8, unknown element type, ...).
    Invalid(String),
    /// Nested deeper than allowed.
    TooDeep { limit: usize },
}

impl std::fmt::Display for RawCheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RawCheckError::Invalid(m) => write!(f, "{m}"),
            RawCheckError::TooDeep { limit } => {
                write!(f, "BSONObj exceeds maximum nested object depth: {limit}")
            }
        }
    }
}

/// What `limits::check_raw` learned about a valid document.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawStats {
    /// Elements at every level (a measure of the memory a decoded copy takes).
    pub elements: usize,
    /// Deepest nesting seen (1 for a flat document).
    pub depth: usize,
}

fn invalid(what: &str, at: usize) -> RawCheckError {
    RawCheckError::Invalid(format!("malformed BSON: {what} at byte {at}"))
}

/// The little-endian i32 at `at`, which must end at or before `end`.
pub(crate) fn i32_at(b: &[u8], at: usize, end: usize) -> Result<i32, RawCheckError> {
    match b.get(at..at + 4) {
        Some(x) if at + 4 <= end => Ok(i32::from_le_bytes([x[0], x[1], x[2], x[3]])),
        _ => Err(invalid("length past the end of its document", at)),
    }
}

/// Checks the document starting at `at` (its length within `limit`, its last byte 0);
/// returns the offset of that last byte.
fn document_end(b: &[u8], at: usize, limit: usize) -> Result<usize, RawCheckError> {
    let len = i32_at(b, at, limit)?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| n >= 5 && at + n <= limit)
        .ok_or_else(|| invalid("document length", at))?;
    let last = at + len - 1;
    if b[last] != 0 {
        return Err(invalid("document not terminated by 0", last));
    }
    Ok(last)
}

/// A C string at `at` ending before `end`: its bytes are UTF-8. Returns the offset after
/// its 0.
pub(crate) fn cstring(b: &[u8], at: usize, end: usize) -> Result<usize, RawCheckError> {
    let bytes = b.get(at..end).ok_or_else(|| invalid("C string", at))?;
    // Keys are short and nearly always ASCII: one pass finds the 0 and sees whether a
    // byte needs the UTF-8 check.
    let mut high = 0u8;
    let n = bytes
        .iter()
        .position(|&c| {
            high |= c;
            c == 0
        })
        .ok_or_else(|| invalid("C string without its 0", at))?;
    if high >= 0x80 {
        std::str::from_utf8(&bytes[..n]).map_err(|_| invalid("C string not UTF-8", at))?;
    }
    Ok(at + n + 1)
}

/// A length-prefixed string at `at` ending before `end`: length at least 1, last byte
/// 0, UTF-8. Returns the offset after it.
fn string(b: &[u8], at: usize, end: usize) -> Result<usize, RawCheckError> {
    let len = i32_at(b, at, end)?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| n >= 1 && at + 4 + n <= end)
        .ok_or_else(|| invalid("string length", at))?;
    let bytes = &b[at + 4..at + 4 + len];
    if bytes[len - 1] != 0 {
        return Err(invalid("string not terminated by 0", at));
    }
    std::str::from_utf8(&bytes[..len - 1]).map_err(|_| invalid("string not UTF-8", at))?;
    Ok(at + 4 + len)
}

/// `n` bytes at `at`, before `end`. Returns the offset after them.
pub(crate) fn fixed(at: usize, n: usize, end: usize) -> Result<usize, RawCheckError> {
    if at + n <= end {
        Ok(at + n)
    } else {
        Err(invalid("value past the end of its document", at))
    }
}

/// The end of the value of type `kind` at `at` (before `end`) when it is not a
/// document, array or code with scope (`None` for those).
fn scalar_end(b: &[u8], kind: u8, at: usize, end: usize) -> Result<Option<usize>, RawCheckError> {
    Ok(Some(match kind {
        0x01 | 0x09 | 0x11 | 0x12 => fixed(at, 8, end)?,
        0x10 => fixed(at, 4, end)?,
        0x07 => fixed(at, 12, end)?,
        0x13 => fixed(at, 16, end)?,
        0x06 | 0x0A | 0x7F | 0xFF => at,
        0x08 => match b.get(at) {
            Some(0 | 1) if at < end => at + 1,
            _ => return Err(invalid("boolean", at)),
        },
        0x02 | 0x0D | 0x0E => string(b, at, end)?,
        0x0B => cstring(b, cstring(b, at, end)?, end)?,
        0x0C => fixed(string(b, at, end)?, 12, end)?,
        0x05 => {
            let len = i32_at(b, at, end)?;
            let len = usize::try_from(len)
                .ok()
                .filter(|&n| at + 5 + n <= end)
                .ok_or_else(|| invalid("binary length", at))?;
            if b[at + 4] == 0x02 {
                // The old binary subtype repeats the length of what follows.
                let inner = i32_at(b, at + 5, at + 5 + len)?;
                if usize::try_from(inner).ok().map(|n| n + 4) != Some(len) {
                    return Err(invalid("old binary inner length", at));
                }
            }
            at + 5 + len
        }
        0x03 | 0x04 | 0x0F => return Ok(None),
        _ => return Err(invalid("unknown element type", at)),
    }))
}

/// Validates `b` as one BSON document (exactly its bytes) nested less than `max_depth`
/// levels deep.
pub fn check(b: &[u8], max_depth: usize) -> Result<RawStats, RawCheckError> {
    let mut stats = RawStats {
        elements: 0,
        depth: 1,
    };
    let top = document_end(b, 0, b.len())?;
    if top + 1 != b.len() {
        return Err(invalid("bytes after the document", top + 1));
    }
    // The offset of the terminating 0 of each open document, innermost last.
    let mut ends = vec![top];
    let mut at = 4;
    while let Some(&end) = ends.last() {
        if at == end {
            ends.pop();
            at += 1;
            continue;
        }
        let kind = b[at];
        let key_at = at + 1;
        at = cstring(b, key_at, end)?;
        stats.elements += 1;
        if let Some(next) = scalar_end(b, kind, at, end)? {
            at = next;
            continue;
        }
        at = match kind {
            0x03 | 0x04 => {
                let child = document_end(b, at, end)?;
                open(&mut ends, &mut stats, child, max_depth)?;
                at + 4
            }
            0x0F => {
                let total = i32_at(b, at, end)?;
                let scope = string(b, at + 4, end)?;
                let child = document_end(b, scope, end)?;
                if usize::try_from(total).ok() != Some(child + 1 - at) {
                    return Err(invalid("code with scope length", at));
                }
                open(&mut ends, &mut stats, child, max_depth)?;
                scope + 4
            }
            _ => return Err(invalid("unknown element type", key_at - 1)),
        };
    }
    Ok(stats)
}

/// Enters a nested document ending at `child`, checking the depth.
fn open(
    ends: &mut Vec<usize>,
    stats: &mut RawStats,
    child: usize,
    max_depth: usize,
) -> Result<(), RawCheckError> {
    let depth = ends.len() + 1;
    if depth >= max_depth {
        return Err(RawCheckError::TooDeep { limit: max_depth });
    }
    stats.depth = stats.depth.max(depth);
    ends.push(child);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::raw::{RawBsonRef, RawDocument};
    use bson::spec::BinarySubtype;
    use bson::{doc, Binary, Bson, DateTime, JavaScriptCodeWithScope, Regex, Timestamp};

    /// The `bson` crate's verdict: every element of every level iterated and its value
    /// read (what the wire check did before this module).
    fn by_bson_iterator(b: &[u8], max_depth: usize) -> Result<RawStats, RawCheckError> {
        let doc = RawDocument::from_bytes(b).map_err(|e| RawCheckError::Invalid(e.to_string()))?;
        let mut stats = RawStats {
            elements: 0,
            depth: 1,
        };
        let mut stack = vec![doc.into_iter()];
        while let Some(top) = stack.last_mut() {
            let Some(item) = top.next() else {
                stack.pop();
                continue;
            };
            let (_, value) = item.map_err(|e| RawCheckError::Invalid(e.to_string()))?;
            stats.elements += 1;
            let child = match value {
                RawBsonRef::Document(d) => Some(d.into_iter()),
                RawBsonRef::Array(a) => Some(
                    RawDocument::from_bytes(a.as_bytes())
                        .map_err(|e| RawCheckError::Invalid(e.to_string()))?
                        .into_iter(),
                ),
                RawBsonRef::JavaScriptCodeWithScope(c) => Some(c.scope.into_iter()),
                _ => None,
            };
            if let Some(child) = child {
                let depth = stack.len() + 1;
                if depth >= max_depth {
                    return Err(RawCheckError::TooDeep { limit: max_depth });
                }
                stats.depth = stats.depth.max(depth);
                stack.push(child);
            }
        }
        Ok(stats)
    }

    /// A document holding every element type, nested documents and arrays.
    fn every_type() -> Vec<u8> {
        let d = doc! {
            "d": 1.5, "s": "héllo", "ké": "€", "o": {"a": 1, "b": [1, "x", {"c": null}]},
            "a": [true, false], "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![9, 8] },
            "u": Bson::Undefined, "id": bson::oid::ObjectId::from_bytes([7; 12]),
            "t": true, "f": false, "date": DateTime::from_millis(42), "n": null,
            "re": Regex { pattern: "a.c".into(), options: "i".into() },
            "js": Bson::JavaScriptCode("f()".into()), "sym": Bson::Symbol("sy".into()),
            "jsw": JavaScriptCodeWithScope { code: "g()".into(), scope: doc! {"x": 1} },
            "i": 5i32, "ts": Timestamp { time: 1, increment: 2 }, "l": 6i64,
            "dec": bson::Decimal128::from_bytes([3; 16]), "max": Bson::MaxKey, "min": Bson::MinKey,
        };
        bson::to_vec(&d).unwrap()
    }

    /// `{p: DBPointer("ns", ObjectId)}` as bytes (the crate has no public constructor).
    const DBPOINTER_DOC: [u8; 27] = [
        27, 0, 0, 0, 0x0C, b'p', 0, 3, 0, 0, 0, b'n', b's', 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
        12, 0,
    ];

    /// `{a: {a: ... {}}}`, `depth` levels.
    fn nested(depth: usize) -> Vec<u8> {
        let mut d = doc! {};
        for _ in 1..depth {
            d = doc! {"a": d};
        }
        bson::to_vec(&d).unwrap()
    }

    fn agree(b: &[u8], max_depth: usize) {
        let ours = check(b, max_depth);
        let theirs = by_bson_iterator(b, max_depth);
        match (&ours, &theirs) {
            (Ok(a), Ok(t)) => assert_eq!(a, t, "stats differ on {b:?}"),
            (Err(RawCheckError::TooDeep { .. }), Err(RawCheckError::TooDeep { .. })) => {}
            (Err(RawCheckError::Invalid(_)), Err(RawCheckError::Invalid(_))) => {}
            _ => panic!("verdicts differ on {b:?}: ours {ours:?}, the bson crate's {theirs:?}"),
        }
    }

    #[test]
    fn every_single_byte_change_and_truncation_gets_the_bson_crates_verdict() {
        let docs = [every_type(), nested(4), DBPOINTER_DOC.to_vec()];
        for base in &docs {
            agree(base, 200);
            assert!(check(base, 200).is_ok());
            for cut in 0..base.len() {
                agree(&base[..cut], 200);
            }
            for i in 0..base.len() {
                for v in [
                    0u8, 1, 2, 3, 4, 5, 0x7f, 0x80, 0xff, 0xfe, 0x0f, 0x13, 0x20, b'a',
                ] {
                    let mut m = base.clone();
                    m[i] = v;
                    agree(&m, 200);
                    agree(&m, 3);
                }
            }
        }
    }

    #[test]
    fn random_changes_get_the_bson_crates_verdict() {
        let base = every_type();
        // A fixed-seed xorshift: reproducible, no dependency.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200_000 {
            let mut m = base.clone();
            for _ in 0..(next() % 4 + 1) {
                let i = (next() as usize) % m.len();
                m[i] = next() as u8;
            }
            agree(&m, 200);
        }
    }

    #[test]
    fn depth_is_counted_as_the_iterator_counts_it() {
        for depth in [1, 2, 3, 10] {
            let b = nested(depth);
            assert_eq!(check(&b, 200).unwrap().depth, depth);
            agree(&b, depth);
            agree(&b, depth + 1);
        }
    }
}
