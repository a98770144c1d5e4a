//! Decoder for MongoDB's BSONColumn binary format (BinData subtype 7), the encoding of
//! the `data` fields of compressed time-series buckets (`control.version` 2) as MongoDB
//! 7.0 and 8.0 write them. The format is described field by field in
//! `docs/formats/bsoncolumn.md`; this module follows that description.
//!
//! Layout of the code:
//! - this file: the public [`decode`] entry point, the byte reader, control bytes, the
//!   per-stream decoding state (literals, delta and delta-of-delta reconstruction for
//!   every BSON type) and the regular (non-interleaved) decoding loop;
//! - [`literal`]: parsing of literal BSON elements and their conversion to [`Bson`];
//! - [`interleaved`]: interleaved mode (objects and arrays decoded field by field);
//! - [`types`]: the integer encoding of each BSON type and its inverse;
//! - [`simple8b`]: Simple-8b blocks.
//!
//! Decoding is bounded: the caller passes the number of values it expects (the bucket's
//! `control.count`) and decoding more values than that is an error. Values are produced
//! one at a time, so a run-length block or a run of blocks never allocates beyond that
//! bound, and every step either yields a value or consumes input, so decoding always
//! terminates.

mod interleaved;
mod literal;
mod simple8b;
#[cfg(test)]
mod tests;
mod types;

use bson::Bson;
use simple8b::{Cursor, Slot};
use types::{
    encode_binary, encode_double, encode_object_id, encode_string, materialize128, materialize64,
    type_name, zigzag128, zigzag64,
};

/// Deepest nesting of embedded documents/arrays accepted in literals and interleaved
/// reference objects (MongoDB itself refuses deeper documents long before this).
pub const MAX_NESTING: usize = 200;

/// Control byte ending the column, or ending an interleaved run.
const EOO: u8 = 0x00;
/// Interleaved start: object root, arrays are scalars (the first, "legacy" variant).
const INTERLEAVED_LEGACY: u8 = 0xF0;
/// Interleaved start: object root, arrays are traversed like objects.
const INTERLEAVED_OBJECT: u8 = 0xF1;
/// Interleaved start: array root, arrays are traversed like objects.
const INTERLEAVED_ARRAY: u8 = 0xF2;
/// Scale index of the "raw memory" encoding (the 64 bits of the value as an integer);
/// the only scale index allowed for values that are not doubles.
const SCALE_MEMORY: u8 = 5;
/// Multipliers of scale indexes 0 to 4 (doubles only).
const SCALE_MULTIPLIERS: [f64; 5] = [1.0, 10.0, 100.0, 10_000.0, 100_000_000.0];

/// Why a BSONColumn binary could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ColumnError {
    /// The input ends early (before a value, a block or the final EOO byte).
    #[error("BSONColumn data is truncated: {0}")]
    Truncated(&'static str),
    /// A control byte that is none of EOO, a literal type, a Simple-8b control or an
    /// interleaved start.
    #[error("unknown BSONColumn control byte 0x{control:02x} at offset {offset}")]
    UnknownControl {
        /// The control byte.
        control: u8,
        /// Its offset in the column.
        offset: usize,
    },
    /// A Simple-8b control byte whose scale does not suit the type it applies to (only
    /// doubles may use a decimal scale).
    #[error(
        "BSONColumn control byte 0x{control:02x} at offset {offset} has a scale that a \
         {value_type} value cannot use"
    )]
    InvalidScale {
        /// The control byte.
        control: u8,
        /// Its offset in the column.
        offset: usize,
        /// BSON type of the previous value.
        value_type: &'static str,
    },
    /// A Simple-8b block with a selector (or selector extension) that encodes nothing.
    #[error("invalid Simple-8b selector {selector} with extension {extension}")]
    InvalidSelector {
        /// The low 4 bits of the block.
        selector: u8,
        /// The next 4 bits.
        extension: u8,
    },
    /// A non-zero delta applied to a value whose type only allows repeats.
    #[error("a non-zero delta was applied to a {0} value, which cannot be delta-encoded")]
    NonDeltaType(&'static str),
    /// A decoded quantity does not fit where it has to go.
    #[error("BSONColumn value overflow: {0}")]
    Overflow(&'static str),
    /// The previous double cannot be expressed exactly at the scale of the next block.
    #[error("the double {value} cannot be rescaled to the scale index {scale} of the next block")]
    DoubleRescale {
        /// The previous double.
        value: f64,
        /// The scale index of the block.
        scale: u8,
    },
    /// More values than the caller allowed.
    #[error("the column holds more than the expected {max} values")]
    TooManyValues {
        /// The bound passed to [`decode`].
        max: usize,
    },
    /// A literal BSON element that is malformed or of an unknown type.
    #[error("invalid literal BSON element at offset {offset}: {reason}")]
    InvalidLiteral {
        /// Offset of the literal's type byte.
        offset: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// An interleaved run that breaks the rules of interleaved mode.
    #[error("invalid interleaved run at offset {offset}: {reason}")]
    InvalidInterleaved {
        /// Offset at which the problem was found.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// Bytes follow the final EOO byte.
    #[error("{count} bytes follow the final EOO byte of the column")]
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// A string rebuilt from a delta is not valid UTF-8.
    #[error("a delta-decoded string is not valid UTF-8")]
    InvalidUtf8,
}

/// Decodes one BSONColumn binary (the payload of a BinData subtype 7 value).
///
/// Returns one entry per value of the column, in order: `None` where the column holds a
/// skip (the measurement lacks the field). `max_values` bounds the number of values
/// (pass the bucket's `control.count`): a column holding more is an error.
pub fn decode(bytes: &[u8], max_values: usize) -> Result<Vec<Option<Bson>>, ColumnError> {
    if bytes.is_empty() {
        return Err(ColumnError::Truncated("the column is empty"));
    }
    let mut reader = Reader::new(bytes);
    let mut out = Output::new(max_values);
    let mut state = StreamState::default();
    loop {
        if let Some(value) = state.next_pending()? {
            out.push(value)?;
            continue;
        }
        let offset = reader.pos;
        let control = reader.peek()?;
        match control {
            EOO => {
                reader.advance(1)?;
                let rest = reader.remaining();
                if rest != 0 {
                    return Err(ColumnError::TrailingBytes { count: rest });
                }
                return Ok(out.into_values());
            }
            c if is_interleaved_start(c) => {
                let last = interleaved::decode_run(&mut reader, &mut out)?;
                state = StreamState::after_interleaved(last);
            }
            c if is_literal(c) => {
                let value = reader.literal()?;
                state.load_literal(&value);
                out.push(Some(value))?;
            }
            c => {
                let first = state.load_control(&mut reader, c, offset)?;
                out.push(first)?;
            }
        }
    }
}

/// Whether `control` starts a literal BSON element (its value is the element's type).
fn is_literal(control: u8) -> bool {
    control != EOO && (control & 0xE0 == 0 || control == 0x7F || control == 0xFF)
}

/// Whether `control` starts an interleaved run.
fn is_interleaved_start(control: u8) -> bool {
    matches!(
        control,
        INTERLEAVED_LEGACY | INTERLEAVED_OBJECT | INTERLEAVED_ARRAY
    )
}

/// Scale index of a Simple-8b control byte (high nibble), `None` for other bytes.
fn scale_for_control(control: u8) -> Option<u8> {
    match control >> 4 {
        0x8 => Some(SCALE_MEMORY),
        0x9 => Some(0),
        0xA => Some(1),
        0xB => Some(2),
        0xC => Some(3),
        0xD => Some(4),
        _ => None,
    }
}

/// The values decoded so far, bounded by the caller's count.
pub(crate) struct Output {
    values: Vec<Option<Bson>>,
    max: usize,
}

impl Output {
    fn new(max: usize) -> Output {
        Output {
            values: Vec::with_capacity(max.min(1024)),
            max,
        }
    }

    pub(crate) fn push(&mut self, value: Option<Bson>) -> Result<(), ColumnError> {
        if self.values.len() >= self.max {
            return Err(ColumnError::TooManyValues { max: self.max });
        }
        self.values.push(value);
        Ok(())
    }

    fn into_values(self) -> Vec<Option<Bson>> {
        self.values
    }
}

/// A position in the column.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The byte at the current position.
    pub(crate) fn peek(&self) -> Result<u8, ColumnError> {
        self.bytes
            .get(self.pos)
            .copied()
            .ok_or(ColumnError::Truncated(
                "the column ends without its final EOO byte",
            ))
    }

    pub(crate) fn advance(&mut self, n: usize) -> Result<(), ColumnError> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.bytes.len() => {
                self.pos = end;
                Ok(())
            }
            _ => Err(ColumnError::Truncated("a value runs past the end")),
        }
    }

    /// `n` bytes from the current position, consumed.
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ColumnError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or(ColumnError::Truncated(what))?;
        let slice = self
            .bytes
            .get(self.pos..end)
            .ok_or(ColumnError::Truncated(what))?;
        self.pos = end;
        Ok(slice)
    }

    /// Reads the literal element starting at the current position (its type byte).
    pub(crate) fn literal(&mut self) -> Result<Bson, ColumnError> {
        let offset = self.pos;
        let rest = self.bytes.get(offset..).unwrap_or_default();
        let (value, len) = literal::parse_element(rest, offset)?;
        self.advance(len)?;
        Ok(value)
    }

    /// Reads the Simple-8b blocks of the control byte at the current position.
    fn blocks(&mut self) -> Result<([u64; 16], usize), ColumnError> {
        let control = self.peek()?;
        let count = usize::from(control & 0x0F) + 1;
        self.advance(1)?;
        let bytes = self.take(count * 8, "a Simple-8b block runs past the end")?;
        let mut words = [0u64; 16];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut le = [0u8; 8];
            le.copy_from_slice(chunk);
            *word = u64::from_le_bytes(le);
        }
        Ok((words, count))
    }

    /// Reads an embedded BSON document (an interleaved reference object) at the current
    /// position, consumed.
    pub(crate) fn document(&mut self) -> Result<&'a [u8], ColumnError> {
        let head = self
            .bytes
            .get(self.pos..)
            .and_then(|rest| rest.get(..4))
            .ok_or(ColumnError::Truncated(
                "a reference object runs past the end",
            ))?;
        let mut le = [0u8; 4];
        le.copy_from_slice(head);
        let len = i32::from_le_bytes(le);
        let len = usize::try_from(len)
            .ok()
            .filter(|len| *len >= 5)
            .ok_or_else(|| ColumnError::InvalidInterleaved {
                offset: self.pos,
                reason: format!("reference object length {len} is invalid"),
            })?;
        self.take(len, "a reference object runs past the end")
    }
}

/// How the deltas of one stream are accumulated; chosen by the type of the last literal.
#[derive(Debug, Clone, Copy)]
enum Codec {
    /// 64-bit arithmetic: doubles, ObjectId, bool, int32, int64, date, timestamp and the
    /// types that only allow zero deltas.
    Bits64 {
        /// Delta-of-delta (ObjectId, date, timestamp) rather than delta.
        delta_of_delta: bool,
        /// The last encoded value (delta mode) or the last delta (delta-of-delta mode).
        running: i64,
        /// The last encoded value in delta-of-delta mode.
        dod_value: i64,
        /// Scale index of the current control byte.
        scale: u8,
    },
    /// 128-bit arithmetic: string, code, binData, decimal128.
    Bits128 {
        /// The last encoded value.
        running: i128,
    },
}

impl Default for Codec {
    fn default() -> Codec {
        Codec::Bits64 {
            delta_of_delta: false,
            running: 0,
            dod_value: 0,
            scale: SCALE_MEMORY,
        }
    }
}

/// Decoding state of one stream of values: the whole column in regular mode, or one
/// scalar field of the reference object in interleaved mode.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamState {
    /// The last value produced (deltas apply to it); `None` before any literal.
    last: Option<Bson>,
    codec: Codec,
    /// The Simple-8b blocks of the current control byte; `None` right after a literal.
    cursor: Option<Cursor>,
}

impl StreamState {
    /// The state of a stream seeded with `value` (a literal or a reference field).
    pub(crate) fn seeded(value: &Bson) -> StreamState {
        let mut state = StreamState::default();
        state.load_literal(value);
        state
    }

    /// The regular-mode state after an interleaved run whose last value was `last`.
    fn after_interleaved(last: Option<Bson>) -> StreamState {
        StreamState {
            last,
            ..StreamState::default()
        }
    }

    /// Makes `value` the base of the following deltas.
    pub(crate) fn load_literal(&mut self, value: &Bson) {
        self.codec = match value {
            Bson::String(s) | Bson::JavaScriptCode(s) => Codec::Bits128 {
                running: encode_string(s.as_bytes()),
            },
            Bson::Binary(b) => Codec::Bits128 {
                running: encode_binary(&b.bytes),
            },
            Bson::Decimal128(d) => Codec::Bits128 {
                running: i128::from_le_bytes(d.bytes()),
            },
            Bson::ObjectId(oid) => delta_of_delta(encode_object_id(&oid.bytes())),
            Bson::DateTime(d) => delta_of_delta(d.timestamp_millis()),
            Bson::Timestamp(ts) => {
                delta_of_delta(((u64::from(ts.time) << 32) | u64::from(ts.increment)) as i64)
            }
            Bson::Boolean(b) => delta(i64::from(*b)),
            Bson::Int32(i) => delta(i64::from(*i)),
            Bson::Int64(i) => delta(*i),
            // Doubles are encoded when a control byte gives their scale.
            _ => delta(0),
        };
        self.cursor = None;
        self.last = Some(value.clone());
    }

    /// The next value of the current control byte's blocks, `None` once they are used up
    /// (or before any control byte).
    pub(crate) fn next_pending(&mut self) -> Result<Option<Option<Bson>>, ColumnError> {
        let Some(cursor) = self.cursor.as_mut() else {
            return Ok(None);
        };
        match cursor.next_slot()? {
            Some(slot) => self.apply(slot).map(Some),
            None => Ok(None),
        }
    }

    /// Whether the current control byte's blocks still hold values (consumes one).
    pub(crate) fn has_pending(&mut self) -> Result<bool, ColumnError> {
        match self.cursor.as_mut() {
            Some(cursor) => Ok(cursor.next_slot()?.is_some()),
            None => Ok(false),
        }
    }

    /// Reads the Simple-8b control byte at the reader's position and its blocks, and
    /// returns the first value they hold.
    pub(crate) fn load_control(
        &mut self,
        reader: &mut Reader<'_>,
        control: u8,
        offset: usize,
    ) -> Result<Option<Bson>, ColumnError> {
        let scale =
            scale_for_control(control).ok_or(ColumnError::UnknownControl { control, offset })?;
        let invalid_scale = |last: &Option<Bson>| ColumnError::InvalidScale {
            control,
            offset,
            value_type: last.as_ref().map_or("missing", type_name),
        };
        match (&mut self.codec, &self.last) {
            (
                Codec::Bits64 {
                    running,
                    scale: current,
                    ..
                },
                Some(Bson::Double(d)),
            ) => {
                *running = encode_double(*d, scale)
                    .ok_or(ColumnError::DoubleRescale { value: *d, scale })?;
                *current = scale;
            }
            (Codec::Bits64 { scale: current, .. }, last) => {
                if scale != SCALE_MEMORY {
                    return Err(invalid_scale(last));
                }
                *current = scale;
            }
            (Codec::Bits128 { .. }, last) => {
                if scale != SCALE_MEMORY {
                    return Err(invalid_scale(last));
                }
            }
        }
        let (words, count) = reader.blocks()?;
        let previous = self.cursor.as_ref().map_or(Slot::Value(0), Cursor::last);
        let blocks = words
            .get(..count)
            .ok_or(ColumnError::Truncated("a control byte announces no blocks"))?;
        self.cursor = Some(Cursor::new(blocks, previous)?);
        // Every valid block holds at least one value.
        self.next_pending()?
            .ok_or(ColumnError::Truncated("a Simple-8b block holds no value"))
    }

    /// Applies one Simple-8b slot to the last value.
    fn apply(&mut self, slot: Slot) -> Result<Option<Bson>, ColumnError> {
        let Slot::Value(raw) = slot else {
            return Ok(None);
        };
        // Deltas before any literal decode as skips.
        let Some(last) = &self.last else {
            return Ok(None);
        };
        let value = match &mut self.codec {
            Codec::Bits64 {
                delta_of_delta,
                running,
                dod_value,
                scale,
            } => {
                let raw = u64::try_from(raw)
                    .map_err(|_| ColumnError::Overflow("a 64-bit delta is wider than 64 bits"))?;
                if !*delta_of_delta && raw == 0 {
                    return Ok(Some(last.clone()));
                }
                *running = running.wrapping_add(zigzag64(raw));
                let encoded = if *delta_of_delta {
                    *dod_value = dod_value.wrapping_add(*running);
                    *dod_value
                } else {
                    *running
                };
                materialize64(last, encoded, *scale)?
            }
            Codec::Bits128 { running } => {
                if raw == 0 {
                    return Ok(Some(last.clone()));
                }
                *running = running.wrapping_add(zigzag128(raw));
                materialize128(last, *running)?
            }
        };
        self.last = Some(value.clone());
        Ok(Some(value))
    }
}

fn delta(running: i64) -> Codec {
    Codec::Bits64 {
        delta_of_delta: false,
        running,
        dod_value: 0,
        scale: SCALE_MEMORY,
    }
}

fn delta_of_delta(value: i64) -> Codec {
    Codec::Bits64 {
        delta_of_delta: true,
        running: 0,
        dod_value: value,
        scale: SCALE_MEMORY,
    }
}
