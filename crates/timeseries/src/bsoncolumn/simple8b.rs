//! Simple-8b block decoding as used inside BSONColumn control blocks (see
//! `docs/formats/bsoncolumn.md`, section "Simple-8b blocks").
//!
//! A block is one little-endian 64-bit word. Its low 4 bits are the selector; the
//! remaining bits hold equally sized slots, the first slot in the least significant
//! bits. A slot whose bits are all ones is a "missing" value (a skip). Selectors 7 and
//! 8 use the next 4 bits as an extension: when non-zero the slots carry a trailing-zero
//! count in their low bits. Selector 15 is run-length encoding of the previous value.
//!
//! [`Cursor`] walks the values of the blocks that follow one control byte lazily, so a
//! run-length block never allocates: it only counts down.

use super::ColumnError;

/// One decoded slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The slot held the all-ones pattern: the measurement lacks the value.
    Missing,
    /// An unsigned (zigzag-encoded) delta. Up to 128 bits wide: extended selectors can
    /// shift a value left by up to 124 bits for 128-bit streams.
    Value(u128),
}

/// Selector value that marks a run-length block.
const RLE_SELECTOR: u8 = 15;
/// Values a run-length block repeats per unit of its count nibble.
const RLE_MULTIPLIER: u32 = 120;

/// How the slots of one non-RLE block are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Bit position of the first slot.
    pub(crate) first_shift: u32,
    /// Bits of the value part of a slot.
    pub(crate) value_bits: u32,
    /// Bits of the trailing-zero count part of a slot (0, 4 or 5), stored below the value.
    pub(crate) count_bits: u32,
    /// Zeros appended per unit of the trailing-zero count (1 or 4).
    pub(crate) count_scale: u32,
    /// Number of slots in the block.
    pub(crate) slots: u32,
}

impl Layout {
    const fn base(value_bits: u32, slots: u32, first_shift: u32) -> Layout {
        Layout {
            first_shift,
            value_bits,
            count_bits: 0,
            count_scale: 0,
            slots,
        }
    }

    const fn extended(value_bits: u32, count_bits: u32, count_scale: u32, slots: u32) -> Layout {
        Layout {
            first_shift: 8,
            value_bits,
            count_bits,
            count_scale,
            slots,
        }
    }

    fn slot_bits(&self) -> u32 {
        self.value_bits + self.count_bits
    }
}

/// What a block word is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    /// Packed slots.
    Packed(Layout),
    /// Repeat the previous value this many times.
    Rle(u32),
}

/// Classifies one block word by its selector (and extension nibble).
pub(crate) fn classify(word: u64) -> Result<BlockKind, ColumnError> {
    let selector = (word & 0x0F) as u8;
    let extension = ((word >> 4) & 0x0F) as u8;
    let bad = || ColumnError::InvalidSelector {
        selector,
        extension,
    };
    let layout = match selector {
        0 => return Err(bad()),
        1 => Layout::base(1, 60, 4),
        2 => Layout::base(2, 30, 4),
        3 => Layout::base(3, 20, 4),
        4 => Layout::base(4, 15, 4),
        5 => Layout::base(5, 12, 4),
        6 => Layout::base(6, 10, 4),
        // Selectors 7 and 8 leave 4 bits unused; they hold the extension nibble, so the
        // slots start at bit 8 even when the extension is zero.
        7 => match extension {
            0 => Layout::base(7, 8, 8),
            1 => Layout::extended(2, 4, 1, 9),
            2 => Layout::extended(3, 4, 1, 8),
            3 => Layout::extended(4, 4, 1, 7),
            4 => Layout::extended(5, 4, 1, 6),
            5 => Layout::extended(7, 4, 1, 5),
            6 => Layout::extended(10, 4, 1, 4),
            7 => Layout::extended(14, 4, 1, 3),
            8 => Layout::extended(24, 4, 1, 2),
            9 => Layout::extended(52, 4, 1, 1),
            _ => return Err(bad()),
        },
        8 => match extension {
            0 => Layout::base(8, 7, 8),
            1 => Layout::extended(4, 4, 4, 7),
            2 => Layout::extended(5, 4, 4, 6),
            3 => Layout::extended(7, 4, 4, 5),
            4 => Layout::extended(10, 4, 4, 4),
            5 => Layout::extended(14, 4, 4, 3),
            6 => Layout::extended(24, 4, 4, 2),
            7 => Layout::extended(52, 4, 4, 1),
            8 => Layout::extended(4, 5, 4, 6),
            9 => Layout::extended(6, 5, 4, 5),
            10 => Layout::extended(9, 5, 4, 4),
            11 => Layout::extended(13, 5, 4, 3),
            12 => Layout::extended(23, 5, 4, 2),
            13 => Layout::extended(51, 5, 4, 1),
            _ => return Err(bad()),
        },
        9 => Layout::base(10, 6, 4),
        10 => Layout::base(12, 5, 4),
        11 => Layout::base(15, 4, 4),
        12 => Layout::base(20, 3, 4),
        13 => Layout::base(30, 2, 4),
        14 => Layout::base(60, 1, 4),
        RLE_SELECTOR => return Ok(BlockKind::Rle((u32::from(extension) + 1) * RLE_MULTIPLIER)),
        _ => return Err(bad()),
    };
    Ok(BlockKind::Packed(layout))
}

/// Reads slot `index` of a packed block.
pub(crate) fn read_slot(word: u64, layout: &Layout, index: u32) -> Result<Slot, ColumnError> {
    let bits = layout.slot_bits();
    let shift = layout.first_shift + bits * index;
    // Layouts never exceed 64 bits, but stay defensive: a shift past the word is a bug
    // in the table, reported as a bad selector rather than a panic.
    if bits == 0 || bits > 64 || shift + bits > 64 {
        return Err(ColumnError::InvalidSelector {
            selector: (word & 0x0F) as u8,
            extension: ((word >> 4) & 0x0F) as u8,
        });
    }
    let mask: u64 = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let raw = (word >> shift) & mask;
    if raw == mask {
        return Ok(Slot::Missing);
    }
    if layout.count_bits == 0 {
        return Ok(Slot::Value(u128::from(raw)));
    }
    let count_mask = (1u64 << layout.count_bits) - 1;
    let zeros = (raw & count_mask) as u32 * layout.count_scale;
    let value = u128::from(raw >> layout.count_bits);
    shift_left_exact(value, zeros)
        .map(Slot::Value)
        .ok_or(ColumnError::Overflow(
            "an extended Simple-8b slot shifts its value past 128 bits",
        ))
}

/// `value << zeros`, or `None` when bits would be shifted out.
fn shift_left_exact(value: u128, zeros: u32) -> Option<u128> {
    if value == 0 {
        return Some(0);
    }
    if zeros >= 128 || value.leading_zeros() < zeros {
        return None;
    }
    Some(value << zeros)
}

/// Lazily yields the values of the Simple-8b blocks following one control byte.
#[derive(Debug, Clone)]
pub(crate) struct Cursor {
    words: [u64; 16],
    len: usize,
    /// Index of the next word to load.
    next_word: usize,
    /// The block being walked.
    current: Current,
    /// The last value yielded (or the value handed in from before these blocks), which a
    /// run-length block repeats.
    last: Slot,
}

#[derive(Debug, Clone, Copy)]
enum Current {
    /// No block loaded (start, or the previous block is used up).
    None,
    Packed {
        word: u64,
        layout: Layout,
        next_slot: u32,
    },
    Rle {
        remaining: u32,
    },
}

impl Cursor {
    /// A cursor over `words` (1 to 16 blocks). `previous` is the value a leading
    /// run-length block repeats: the last value of this stream's previous control block,
    /// or zero right after a literal.
    pub(crate) fn new(words: &[u64], previous: Slot) -> Result<Cursor, ColumnError> {
        let mut buf = [0u64; 16];
        if words.is_empty() || words.len() > buf.len() {
            return Err(ColumnError::Truncated("a control byte announces no blocks"));
        }
        for (dst, src) in buf.iter_mut().zip(words) {
            *dst = *src;
        }
        Ok(Cursor {
            words: buf,
            len: words.len(),
            next_word: 0,
            current: Current::None,
            last: previous,
        })
    }

    /// The last value yielded (the value a run-length block would repeat next).
    pub(crate) fn last(&self) -> Slot {
        self.last
    }

    /// The next value, `Ok(None)` once every block is used up.
    pub(crate) fn next_slot(&mut self) -> Result<Option<Slot>, ColumnError> {
        loop {
            match &mut self.current {
                Current::Packed {
                    word,
                    layout,
                    next_slot,
                } if *next_slot < layout.slots => {
                    let slot = read_slot(*word, layout, *next_slot)?;
                    *next_slot += 1;
                    self.last = slot;
                    return Ok(Some(slot));
                }
                Current::Rle { remaining } if *remaining > 0 => {
                    *remaining -= 1;
                    return Ok(Some(self.last));
                }
                _ => {}
            }
            // Load the next block, if any.
            let word = match self.words.get(self.next_word) {
                Some(word) if self.next_word < self.len => *word,
                _ => {
                    self.current = Current::None;
                    return Ok(None);
                }
            };
            self.next_word += 1;
            self.current = match classify(word)? {
                BlockKind::Packed(layout) => Current::Packed {
                    word,
                    layout,
                    next_slot: 0,
                },
                BlockKind::Rle(count) => Current::Rle { remaining: count },
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(words: &[u64], previous: Slot) -> Result<Vec<Slot>, ColumnError> {
        let mut cursor = Cursor::new(words, previous)?;
        let mut out = Vec::new();
        while let Some(slot) = cursor.next_slot()? {
            out.push(slot);
        }
        Ok(out)
    }

    #[test]
    fn every_base_selector_has_the_documented_slot_count_and_width() {
        let expected: [(u8, u32, u32); 14] = [
            (1, 1, 60),
            (2, 2, 30),
            (3, 3, 20),
            (4, 4, 15),
            (5, 5, 12),
            (6, 6, 10),
            (7, 7, 8),
            (8, 8, 7),
            (9, 10, 6),
            (10, 12, 5),
            (11, 15, 4),
            (12, 20, 3),
            (13, 30, 2),
            (14, 60, 1),
        ];
        for (selector, bits, slots) in expected {
            let BlockKind::Packed(layout) = classify(u64::from(selector)).unwrap() else {
                panic!("selector {selector} is not packed");
            };
            assert_eq!((layout.value_bits, layout.slots), (bits, slots));
            assert!(layout.first_shift + layout.slot_bits() * layout.slots <= 64);
            // A word of zero slots decodes to that many zeros.
            let values = all(&[u64::from(selector)], Slot::Value(0)).unwrap();
            assert_eq!(values, vec![Slot::Value(0); slots as usize]);
        }
    }

    #[test]
    fn selector_zero_and_unused_extensions_are_rejected() {
        assert!(classify(0).is_err());
        for ext in 10u64..16 {
            assert!(classify(7 | (ext << 4)).is_err(), "7/{ext}");
        }
        for ext in 14u64..16 {
            assert!(classify(8 | (ext << 4)).is_err(), "8/{ext}");
        }
    }

    #[test]
    fn an_all_ones_slot_is_missing() {
        // Selector 14: one 60-bit slot.
        let word = 14u64 | (((1u64 << 60) - 1) << 4);
        assert_eq!(all(&[word], Slot::Value(0)).unwrap(), vec![Slot::Missing]);
        // Selector 12: three 20-bit slots, the middle one all ones.
        let word = 12u64 | (5 << 4) | (((1u64 << 20) - 1) << 24) | (7 << 44);
        assert_eq!(
            all(&[word], Slot::Value(0)).unwrap(),
            vec![Slot::Value(5), Slot::Missing, Slot::Value(7)]
        );
    }

    #[test]
    fn rle_repeats_the_previous_value_in_multiples_of_120() {
        let rle = |count: u64| 15u64 | ((count - 1) << 4);
        let values = all(&[rle(1)], Slot::Value(9)).unwrap();
        assert_eq!(values, vec![Slot::Value(9); 120]);
        let values = all(&[rle(16)], Slot::Missing).unwrap();
        assert_eq!(values, vec![Slot::Missing; 1920]);
        // After a packed block the RLE repeats that block's last slot.
        let word = 13u64 | (3 << 4) | (4 << 34);
        let values = all(&[word, rle(2)], Slot::Value(0)).unwrap();
        assert_eq!(values.len(), 2 + 240);
        assert!(values[2..].iter().all(|v| *v == Slot::Value(4)));
    }

    #[test]
    fn selector_seven_extension_shifts_by_single_zeros() {
        // Extension 9: one slot, 52 value bits + 4 count bits. Value 3 with 15 zeros.
        let slot = (3u64 << 4) | 15;
        let word = 7u64 | (9 << 4) | (slot << 8);
        assert_eq!(
            all(&[word], Slot::Value(0)).unwrap(),
            vec![Slot::Value(3 << 15)]
        );
    }

    #[test]
    fn selector_eight_extensions_shift_by_nibbles() {
        // Small (ext 7): one slot of 52 + 4 bits; count 15 means 60 zeros.
        let slot = (1u64 << 4) | 15;
        let word = 8u64 | (7 << 4) | (slot << 8);
        assert_eq!(
            all(&[word], Slot::Value(0)).unwrap(),
            vec![Slot::Value(1 << 60)]
        );
        // Large (ext 13): one slot of 51 + 5 bits; count 31 means 124 zeros.
        let slot = (1u64 << 5) | 31;
        let word = 8u64 | (13 << 4) | (slot << 8);
        assert_eq!(
            all(&[word], Slot::Value(0)).unwrap(),
            vec![Slot::Value(1 << 124)]
        );
        // Value 16 shifted by 124 needs 129 bits: overflow, not a panic.
        let slot = (16u64 << 5) | 31;
        let word = 8u64 | (13 << 4) | (slot << 8);
        assert!(all(&[word], Slot::Value(0)).is_err());
    }
}
