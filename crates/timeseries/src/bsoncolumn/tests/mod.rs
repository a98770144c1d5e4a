//! Unit tests of the BSONColumn decoder. Every byte vector is built by hand from the
//! description in `docs/formats/bsoncolumn.md`, with the small builders below.

mod interleaved;
mod regular;
mod robustness;

use bson::{doc, Bson};

use super::simple8b::{classify, BlockKind};
use super::{decode, ColumnError};

/// The bytes of `value` as a literal: type byte, empty field name, value.
pub(super) fn lit(value: impl Into<Bson>) -> Vec<u8> {
    let bytes = bson::to_vec(&doc! { "": value.into() }).expect("serializable");
    // Strip the document's length prefix and trailing NUL.
    bytes[4..bytes.len() - 1].to_vec()
}

/// Zigzag encoding of a signed delta.
pub(super) fn zz(delta: i64) -> u64 {
    ((delta << 1) ^ (delta >> 63)) as u64
}

pub(super) fn zz128(delta: i128) -> u128 {
    ((delta << 1) ^ (delta >> 127)) as u128
}

/// A block with base selector `selector`; `None` slots are skips. The number of slots
/// must be the selector's slot count.
pub(super) fn block(selector: u8, slots: &[Option<u64>]) -> u64 {
    let BlockKind::Packed(layout) = classify(u64::from(selector)).expect("valid selector") else {
        panic!("selector {selector} is RLE");
    };
    assert_eq!(layout.count_bits, 0, "use ext_block for extended selectors");
    assert_eq!(
        slots.len(),
        layout.slots as usize,
        "slot count of selector {selector}"
    );
    let bits = layout.value_bits;
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let mut word = u64::from(selector);
    for (i, slot) in slots.iter().enumerate() {
        let raw = slot.unwrap_or(mask);
        assert!(
            raw < mask || slot.is_none(),
            "{raw} does not fit in {bits} bits"
        );
        word |= raw << (layout.first_shift + bits * i as u32);
    }
    word
}

/// A block with selector 7 or 8 and a non-zero extension; slots are
/// `(value, trailing-zero count)` pairs, `None` for skips.
pub(super) fn ext_block(selector: u8, extension: u8, slots: &[Option<(u64, u64)>]) -> u64 {
    let word = u64::from(selector) | (u64::from(extension) << 4);
    let BlockKind::Packed(layout) = classify(word).expect("valid selector") else {
        panic!("not packed");
    };
    assert!(layout.count_bits > 0);
    assert_eq!(slots.len(), layout.slots as usize);
    let bits = layout.value_bits + layout.count_bits;
    let mask = (1u64 << bits) - 1;
    let mut word = word;
    for (i, slot) in slots.iter().enumerate() {
        let raw = match slot {
            Some((value, count)) => {
                assert!(*value < (1u64 << layout.value_bits));
                assert!(*count < (1u64 << layout.count_bits));
                (value << layout.count_bits) | count
            }
            None => mask,
        };
        word |= raw << (layout.first_shift + bits * i as u32);
    }
    word
}

/// A run-length block repeating the previous value `units` × 120 times.
pub(super) fn rle(units: u64) -> u64 {
    assert!((1..=16).contains(&units));
    15 | ((units - 1) << 4)
}

/// Control byte 0x80 (no scaling) followed by `blocks`.
pub(super) fn ctl(blocks: &[u64]) -> Vec<u8> {
    scaled(0x8, blocks)
}

/// Control byte with high nibble `nibble` (0x8 raw, 0x9..=0xD scale index 0..=4).
pub(super) fn scaled(nibble: u8, blocks: &[u64]) -> Vec<u8> {
    assert!((1..=16).contains(&blocks.len()));
    let mut out = vec![(nibble << 4) | (blocks.len() as u8 - 1)];
    for b in blocks {
        out.extend_from_slice(&b.to_le_bytes());
    }
    out
}

/// Concatenates parts and appends the final EOO byte.
pub(super) fn column(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out: Vec<u8> = parts.concat();
    out.push(0);
    out
}

/// Decodes with a generous bound, panicking on error.
pub(super) fn dec(bytes: &[u8]) -> Vec<Option<Bson>> {
    match decode(bytes, 100_000) {
        Ok(values) => values,
        Err(e) => panic!("decode failed: {e}"),
    }
}

/// Decodes expecting an error.
pub(super) fn dec_err(bytes: &[u8]) -> ColumnError {
    match decode(bytes, 100_000) {
        Ok(values) => panic!("expected an error, decoded {values:?}"),
        Err(e) => e,
    }
}

pub(super) fn some(values: Vec<Bson>) -> Vec<Option<Bson>> {
    values.into_iter().map(Some).collect()
}
