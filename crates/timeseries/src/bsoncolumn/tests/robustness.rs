//! Malformed input, the value bound, golden vectors from MongoDB's test suite, and
//! random input (which must decode or fail, never panic or hang).

use bson::{doc, Bson};
use proptest::prelude::*;

use super::*;

#[test]
fn empty_input_is_an_error() {
    assert!(matches!(dec_err(&[]), ColumnError::Truncated(_)));
}

#[test]
fn a_column_without_its_final_eoo_is_truncated() {
    let mut bytes = column(&[lit(1)]);
    bytes.pop();
    assert!(matches!(dec_err(&bytes), ColumnError::Truncated(_)));
}

#[test]
fn truncated_blocks_and_literals_are_errors() {
    let full = column(&[lit(1.5), scaled(0xA, &[rle(1), rle(1)])]);
    for cut in 1..full.len() {
        assert!(
            decode(&full[..cut], 10_000).is_err(),
            "prefix of {cut} bytes decoded"
        );
    }
}

#[test]
fn bytes_after_the_final_eoo_are_an_error() {
    let mut bytes = column(&[lit(1)]);
    bytes.push(0);
    assert_eq!(dec_err(&bytes), ColumnError::TrailingBytes { count: 1 });
}

#[test]
fn unknown_control_bytes_are_errors() {
    for control in [0x20u8, 0x40, 0x60, 0x7E, 0xE0, 0xEF, 0xF3, 0xFE] {
        let mut bytes = vec![control];
        bytes.extend([0u8; 16]);
        bytes.push(0);
        assert!(
            matches!(dec_err(&bytes), ColumnError::UnknownControl { control: c, offset: 0 } if c == control),
            "0x{control:02x}"
        );
    }
}

#[test]
fn literal_control_bytes_of_unknown_bson_types_are_errors() {
    for control in [0x14u8, 0x1F] {
        let bytes = [control, 0, 0, 0, 0, 0, 0];
        assert!(matches!(
            dec_err(&bytes),
            ColumnError::InvalidLiteral { offset: 0, .. }
        ));
    }
    // A literal needs an empty field name.
    let bytes = [0x10, b'a', 0, 1, 0, 0, 0, 0];
    assert!(matches!(
        dec_err(&bytes),
        ColumnError::InvalidLiteral { .. }
    ));
}

#[test]
fn invalid_selectors_are_errors() {
    for word in [
        0u64,
        7 | (10 << 4),
        7 | (15 << 4),
        8 | (14 << 4),
        8 | (15 << 4),
    ] {
        let bytes = column(&[lit(1), ctl(&[word])]);
        assert!(
            matches!(dec_err(&bytes), ColumnError::InvalidSelector { .. }),
            "{word:#x}"
        );
    }
}

#[test]
fn more_values_than_max_values_is_an_error() {
    // 16 run-length blocks of 1920 values each: the bound stops decoding early.
    let bytes = column(&[lit(1), ctl(&[rle(16); 16])]);
    assert_eq!(
        decode(&bytes, 100),
        Err(ColumnError::TooManyValues { max: 100 })
    );
    assert_eq!(
        decode(&bytes, 0),
        Err(ColumnError::TooManyValues { max: 0 })
    );
    assert_eq!(decode(&bytes, 1 + 16 * 1920).map(|v| v.len()), Ok(30721));
}

#[test]
fn deeply_nested_literals_are_refused() {
    let mut value = Bson::Int32(1);
    for _ in 0..250 {
        value = Bson::Document(doc! { "a": value });
    }
    let bytes = column(&[lit(value)]);
    assert!(matches!(
        dec_err(&bytes),
        ColumnError::InvalidLiteral { .. }
    ));
}

#[test]
fn nesting_below_the_limit_is_accepted() {
    let mut value = Bson::Int32(1);
    for _ in 0..190 {
        value = Bson::Document(doc! { "a": value });
    }
    let bytes = column(&[lit(value.clone())]);
    assert_eq!(dec(&bytes), vec![Some(value)]);
}

/// Standard base64 (with padding), for the golden vectors below.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|c| *c != b'=').map(value).collect();
    let mut out = Vec::new();
    for chunk in digits.chunks(4) {
        let mut acc = 0u32;
        for (i, d) in chunk.iter().enumerate() {
            acc |= u32::from(*d) << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

// Golden vectors: base64 column binaries listed in MongoDB's
// src/mongo/bson/column/bsoncolumn_test.cpp (FuzzerDiscoveredEdgeCases and
// BlockFuzzerDiscoveredEdgeCases). Only the bytes are taken from there; the expected
// values below were worked out by hand from docs/formats/bsoncolumn.md.

#[test]
fn golden_zero_deltas_after_an_unencodable_string_repeat_it() {
    // bool false; string "\0" (unencodable: starts with NUL); control 0x80 with one
    // selector-2 block of 30 zero deltas; EOO.
    let bytes = base64("CAAAAgACAAAAAACAAgAAAAAAAAAA");
    let mut expected = vec![Bson::Boolean(false)];
    expected.extend(vec![Bson::String("\0".into()); 31]);
    assert_eq!(dec(&bytes), some(expected));
}

#[test]
fn golden_a_column_ending_with_a_literal_decodes() {
    // A double literal, a date literal, then one control 0x80 block of five 12-bit
    // delta-of-deltas (three of them skips) for the date.
    let bytes = base64("AQAACQgAAHMA7wkAQP/Q0CfU0NCACvX//////9AA");
    // The block is 0xd0ffffffffff_f50a: selector 10, slots 0xf50, three skips, 0xd0f,
    // i.e. delta-of-deltas +1960, -, -, -, -1672.
    let double = f64::from_le_bytes([0x00, 0x09, 0x08, 0x00, 0x00, 0x73, 0x00, 0xef]);
    let d0 = i64::from_le_bytes([0x40, 0xff, 0xd0, 0xd0, 0x27, 0xd4, 0xd0, 0xd0]);
    let date = |ms: i64| Some(Bson::DateTime(bson::DateTime::from_millis(ms)));
    assert_eq!(
        dec(&bytes),
        vec![
            Some(Bson::Double(double)),
            date(d0),
            date(d0 + 1960),
            None,
            None,
            None,
            date(d0 + 1960 + 288),
        ]
    );
}

#[test]
fn golden_vectors_that_mongodb_rejects_are_rejected() {
    for (vector, why) in [
        // MaxKey literal, then a block with selector 0.
        ("fwDQYG9tfwAAAAAA", "selector 0"),
        // Control byte 0x40 is not a Simple-8b control.
        ("QAEADP////+SAA==", "control 0x40"),
        // Bool deltas under a decimal scale (control 0xA0).
        ("CAAAoJb//wD/3ylEAA==", "scale on bool"),
        // An array-root interleaved run with no object.
        (
            "EAAAYTsB8gcAAAD/AAAAgsj//////////wEH//hB/7KyAP+AAP//AAA=",
            "empty run",
        ),
        // Interleaved run ending while other streams still hold values.
        (
            "8jIAAAAHVvkCAAEAAAAAAgABAAAAAAxTdGNydHVfaWQAAQAAAAABMg5faWQAAQAAAAAA/wD/AP8Aj4+Pj4+Pj4+Pj4+Pj4+Pj4//AP8A/wD/AP8A/wD/AP8A/wCPj4+Pj4+Pj4+PAAD/AP8A/wD/AP8A/wCPj4+Pj4+Pj49vj4+Pj4+Pj/8A/041j4+Pj4+Pj4+Pj48BAFXeV6t2AI+Pj4+Pj4+Pj4+Pj8SPj4+Pj4+Pj4//AP8A/wD/AP8A/wAA",
            "leftover stream values",
        ),
    ] {
        assert!(decode(&base64(vector), 100_000).is_err(), "{why}");
    }
}

/// Valid encodings exercising every feature, used as seeds for mutation.
fn seeds() -> Vec<Vec<u8>> {
    vec![
        column(&[
            lit(20.5),
            scaled(0xA, &[block(12, &[Some(2), None, Some(5)]), rle(1)]),
        ]),
        column(&[
            lit("abc"),
            ctl(&[
                ext_block(7, 9, &[Some((4, 15))]),
                block(13, &[Some(0), Some(0)]),
            ]),
            ctl(&[rle(2)]),
        ]),
        column(&[
            lit(5i64),
            ctl(&[ext_block(8, 13, &[Some((2, 1))]), block(1, &[None; 60])]),
        ]),
        column(&[
            {
                let mut v = vec![0xF1];
                v.extend(
                    bson::to_vec(&doc! { "a": 1, "b": { "c": [1.5, "x"] }, "e": {} }).unwrap(),
                );
                v
            },
            ctl(&[block(12, &[Some(0), Some(2), None])]),
            scaled(0xA, &[block(12, &[Some(0), None, Some(20)])]),
            ctl(&[block(12, &[Some(0), Some(0), Some(0)])]),
            vec![0],
            ctl(&[block(14, &[Some(0)])]),
        ]),
    ]
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A byte biased towards the values the format gives meaning to.
    fn byte(&mut self) -> u8 {
        const INTERESTING: [u8; 16] = [
            0x00, 0x01, 0x02, 0x03, 0x05, 0x10, 0x12, 0x7F, 0x80, 0x8F, 0x90, 0xA0, 0xF0, 0xF1,
            0xF2, 0xFF,
        ];
        if self.next().is_multiple_of(2) {
            INTERESTING[self.below(INTERESTING.len())]
        } else {
            self.next() as u8
        }
    }
}

fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        if bytes.is_empty() {
            bytes.push(rng.byte());
            continue;
        }
        let at = rng.below(bytes.len());
        match rng.below(5) {
            0 => bytes[at] = rng.byte(),
            1 => bytes[at] ^= 1 << rng.below(8),
            2 => bytes.truncate(at),
            3 => bytes.insert(at, rng.byte()),
            _ => {
                bytes.remove(at);
            }
        }
    }
}

#[test]
fn random_bytes_and_mutated_encodings_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let len = rng.below(80);
        let bytes: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        let _ = decode(&bytes, 2000);
    }
    let seeds = seeds();
    for seed in &seeds {
        if let Err(e) = decode(seed, 2000) {
            panic!("seed must be valid: {e}");
        }
    }
    for i in 0..6000 {
        let mut bytes = seeds[i % seeds.len()].clone();
        mutate(&mut rng, &mut bytes);
        if let Ok(values) = decode(&bytes, 2000) {
            assert!(values.len() <= 2000);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_decode_or_fail_within_the_bound(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        max in 0usize..3000,
    ) {
        if let Ok(values) = decode(&bytes, max) {
            prop_assert!(values.len() <= max);
        }
    }

    #[test]
    fn mutated_valid_encodings_decode_or_fail(
        seed in 0usize..4,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..6),
    ) {
        let mut bytes = seeds()[seed].clone();
        for (at, byte, kind) in edits {
            if bytes.is_empty() {
                break;
            }
            let at = at % bytes.len();
            match kind {
                0 => bytes[at] = byte,
                1 => bytes.insert(at, byte),
                _ => bytes.truncate(at),
            }
        }
        let _ = decode(&bytes, 5000);
    }
}
