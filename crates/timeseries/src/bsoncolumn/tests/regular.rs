//! Regular (non-interleaved) mode: literals, Simple-8b selectors, run-length blocks,
//! skips and the per-type delta rules.

use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, DateTime, Decimal128, JavaScriptCodeWithScope, Regex, Timestamp};

use super::*;
use crate::bsoncolumn::types::encode_object_id;

#[test]
fn an_empty_column_is_a_single_eoo_byte() {
    assert_eq!(dec(&[0x00]), Vec::<Option<Bson>>::new());
}

#[test]
fn every_bson_type_decodes_from_a_literal() {
    let values = vec![
        Bson::Double(-2.5),
        Bson::String("héllo".into()),
        Bson::Document(doc! { "a": 1, "b": { "c": [1, "x"] } }),
        Bson::Array(vec![Bson::Int32(1), Bson::Null]),
        Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![1, 2, 3],
        }),
        Bson::Binary(Binary {
            subtype: BinarySubtype::BinaryOld,
            bytes: vec![9, 8],
        }),
        Bson::Undefined,
        Bson::ObjectId(ObjectId::from_bytes([7; 12])),
        Bson::Boolean(true),
        Bson::DateTime(DateTime::from_millis(1_700_000_000_000)),
        Bson::Null,
        Bson::RegularExpression(Regex {
            pattern: "^a.*".into(),
            options: "i".into(),
        }),
        Bson::JavaScriptCode("x = 1".into()),
        Bson::Symbol("sym".into()),
        Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
            code: "f()".into(),
            scope: doc! { "v": 2 },
        }),
        Bson::Int32(-7),
        Bson::Timestamp(Timestamp {
            time: 5,
            increment: 6,
        }),
        Bson::Int64(1 << 40),
        Bson::Decimal128(Decimal128::from_bytes([3; 16])),
        Bson::MaxKey,
        Bson::MinKey,
    ];
    let parts: Vec<Vec<u8>> = values.iter().map(|v| lit(v.clone())).collect();
    assert_eq!(dec(&column(&parts)), some(values));
}

#[test]
fn min_key_and_max_key_literals_use_their_type_bytes_as_control() {
    assert_eq!(lit(Bson::MinKey), vec![0xFF, 0x00]);
    assert_eq!(lit(Bson::MaxKey), vec![0x7F, 0x00]);
    let bytes = column(&[lit(Bson::MinKey), ctl(&[block(13, &[Some(0), Some(0)])])]);
    assert_eq!(dec(&bytes), some(vec![Bson::MinKey; 3]));
}

#[test]
fn int32_deltas_accumulate_with_zigzag_signs() {
    let bytes = column(&[
        lit(100),
        ctl(&[block(
            11,
            &[Some(zz(1)), Some(zz(-3)), Some(zz(0)), Some(zz(1000))],
        )]),
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![
            100.into(),
            101.into(),
            98.into(),
            98.into(),
            1098.into()
        ])
    );
}

#[test]
fn int32_values_keep_the_low_32_bits_and_int64_values_wrap() {
    let bytes = column(&[lit(i32::MAX), ctl(&[block(14, &[Some(zz(1))])])]);
    assert_eq!(dec(&bytes), some(vec![i32::MAX.into(), i32::MIN.into()]));
    let bytes = column(&[lit(i64::MAX), ctl(&[block(14, &[Some(zz(1))])])]);
    assert_eq!(dec(&bytes), some(vec![i64::MAX.into(), i64::MIN.into()]));
}

#[test]
fn bools_decode_from_deltas() {
    let bytes = column(&[
        lit(false),
        ctl(&[block(11, &[Some(zz(1)), Some(0), Some(zz(-1)), None])]),
    ]);
    assert_eq!(
        dec(&bytes),
        vec![
            Some(false.into()),
            Some(true.into()),
            Some(true.into()),
            Some(false.into()),
            None
        ]
    );
}

#[test]
fn a_run_of_equal_doubles_decodes_from_one_rle_block() {
    let bytes = column(&[lit(1.5), scaled(0xA, &[rle(1)])]);
    assert_eq!(dec(&bytes), some(vec![Bson::Double(1.5); 121]));
}

#[test]
fn doubles_scaled_by_ten_decode_exactly() {
    let bytes = column(&[
        lit(20.5),
        scaled(0xA, &[block(12, &[Some(zz(1)), Some(zz(1)), Some(zz(-3))])]),
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![20.5.into(), 20.6.into(), 20.7.into(), 20.4.into()])
    );
}

#[test]
fn doubles_decode_exactly_at_every_scale() {
    let cases: [(u8, f64, i64, f64); 5] = [
        (0x9, 3.0, 2, 5.0),
        (0xB, 1.25, 1, 1.26),
        (0xC, 123.123, 7, 123.1237),
        (0xD, 1.123_456_78, 1, 1.123_456_79),
        (0x8, 0.1, 1, f64::from_bits(0.1f64.to_bits() + 1)),
    ];
    for (nibble, first, delta, second) in cases {
        let bytes = column(&[lit(first), scaled(nibble, &[block(14, &[Some(zz(delta))])])]);
        assert_eq!(
            dec(&bytes),
            some(vec![first.into(), second.into()]),
            "nibble {nibble:x}"
        );
    }
}

#[test]
fn a_scale_change_rescales_the_previous_double() {
    let bytes = column(&[
        lit(1.0),
        scaled(0x9, &[block(14, &[Some(zz(1))])]),
        scaled(0xA, &[block(14, &[Some(zz(5))])]),
    ]);
    assert_eq!(dec(&bytes), some(vec![1.0.into(), 2.0.into(), 2.5.into()]));
}

#[test]
fn a_double_that_cannot_be_rescaled_is_an_error() {
    let bytes = column(&[lit(0.123), scaled(0x9, &[block(14, &[Some(zz(1))])])]);
    assert!(matches!(
        dec_err(&bytes),
        ColumnError::DoubleRescale { scale: 0, .. }
    ));
}

#[test]
fn a_decimal_scale_on_a_value_that_is_not_a_double_is_an_error() {
    let bytes = column(&[lit(1), scaled(0xA, &[block(14, &[Some(0)])])]);
    assert!(matches!(
        dec_err(&bytes),
        ColumnError::InvalidScale {
            value_type: "int",
            ..
        }
    ));
    let bytes = column(&[lit("a"), scaled(0x9, &[block(14, &[Some(0)])])]);
    assert!(matches!(
        dec_err(&bytes),
        ColumnError::InvalidScale {
            value_type: "string",
            ..
        }
    ));
}

#[test]
fn skips_decode_as_none() {
    let bytes = column(&[lit(5), ctl(&[block(12, &[Some(zz(1)), None, Some(zz(1))])])]);
    assert_eq!(
        dec(&bytes),
        vec![Some(5.into()), Some(6.into()), None, Some(7.into())]
    );
}

#[test]
fn values_before_any_literal_decode_as_none() {
    let bytes = column(&[
        ctl(&[block(11, &[None, None, Some(0), Some(zz(3))])]),
        lit(1),
    ]);
    assert_eq!(dec(&bytes), vec![None, None, None, None, Some(1.into())]);
}

#[test]
fn rle_repeats_skips() {
    let bytes = column(&[lit(1), ctl(&[block(1, &[None; 60]), rle(1)])]);
    let values = dec(&bytes);
    assert_eq!(values.len(), 181);
    assert_eq!(values[0], Some(1.into()));
    assert!(values[1..].iter().all(Option::is_none));
}

#[test]
fn rle_repeats_the_last_delta() {
    let bytes = column(&[lit(10i64), ctl(&[block(14, &[Some(zz(1))]), rle(1)])]);
    let expected: Vec<Bson> = (10i64..=131).map(Bson::Int64).collect();
    assert_eq!(dec(&bytes), some(expected));
}

#[test]
fn rle_right_after_a_literal_repeats_the_literal() {
    let bytes = column(&[lit(7), ctl(&[rle(2)])]);
    assert_eq!(dec(&bytes), some(vec![Bson::Int32(7); 241]));
}

#[test]
fn rle_carries_the_last_delta_across_control_bytes() {
    let bytes = column(&[lit(0i64), ctl(&[block(14, &[Some(zz(2))])]), ctl(&[rle(1)])]);
    let expected: Vec<Bson> = (0i64..=121).map(|i| Bson::Int64(2 * i)).collect();
    assert_eq!(dec(&bytes), some(expected));
}

#[test]
fn a_new_literal_resets_the_previous_value_and_the_rle_value() {
    let bytes = column(&[
        lit(0i64),
        ctl(&[block(14, &[Some(zz(2))])]),
        lit(100i64),
        ctl(&[rle(1)]),
    ]);
    let mut expected = vec![Bson::Int64(0), Bson::Int64(2)];
    expected.extend(vec![Bson::Int64(100); 121]);
    assert_eq!(dec(&bytes), some(expected));
}

#[test]
fn a_control_byte_holds_up_to_sixteen_blocks() {
    let blocks = vec![block(14, &[Some(zz(1))]); 16];
    let bytes = column(&[lit(0i64), ctl(&blocks)]);
    assert_eq!(bytes[10], 0x8F);
    let expected: Vec<Bson> = (0i64..=16).map(Bson::Int64).collect();
    assert_eq!(dec(&bytes), some(expected));
}

#[test]
fn dates_use_delta_of_delta() {
    let start = 1_000_000i64;
    let bytes = column(&[
        lit(DateTime::from_millis(start)),
        ctl(&[block(
            10,
            &[Some(zz(1000)), Some(0), Some(zz(500)), None, Some(0)],
        )]),
    ]);
    let date = |ms: i64| Some(Bson::DateTime(DateTime::from_millis(ms)));
    assert_eq!(
        dec(&bytes),
        vec![
            date(start),
            date(start + 1000),
            date(start + 2000),
            date(start + 3500),
            None,
            date(start + 5000),
        ]
    );
}

#[test]
fn timestamps_use_delta_of_delta() {
    let ts = |time, increment| Bson::Timestamp(Timestamp { time, increment });
    let bytes = column(&[
        lit(ts(100, 1)),
        ctl(&[
            block(13, &[Some(zz(1)), Some(0)]),
            block(14, &[Some(zz((1i64 << 32) - 4))]),
        ]),
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![ts(100, 1), ts(100, 2), ts(100, 3), ts(101, 0)])
    );
}

#[test]
fn object_ids_use_delta_of_delta_and_keep_the_process_unique_bytes() {
    let oid = |ts3: u8, counter2: u8| {
        Bson::ObjectId(ObjectId::from_bytes([
            0x65, 0, 0, ts3, 1, 2, 3, 4, 5, 0, 0, counter2,
        ]))
    };
    let bytes = column(&[
        lit(oid(0x10, 0x20)),
        ctl(&[block(12, &[Some(zz(1)), Some(0), Some(zz(0x100))])]),
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![
            oid(0x10, 0x20),
            oid(0x10, 0x21),
            oid(0x10, 0x22),
            oid(0x11, 0x23)
        ])
    );
}

#[test]
fn object_id_encoding_matches_mongodbs_published_example() {
    // simple8b_type_util_test.cpp (TestObjectId): 112233445566778899AABBCC encodes as
    // 0x1122AA33BB44CC.
    let oid = [
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC,
    ];
    assert_eq!(encode_object_id(&oid), 0x0011_22AA_33BB_44CC);
}

#[test]
fn strings_decode_from_128_bit_deltas() {
    // "abc" encodes as 0x616263 (reversed, little-endian): "abd" is +1.
    let bytes = column(&[lit("abc"), ctl(&[block(13, &[Some(zz(1)), Some(zz(-1))])])]);
    assert_eq!(
        dec(&bytes),
        some(vec!["abc".into(), "abd".into(), "abc".into()])
    );
}

#[test]
fn code_decodes_like_strings() {
    let bytes = column(&[
        lit(Bson::JavaScriptCode("x=1".into())),
        ctl(&[block(14, &[Some(zz(1))])]),
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![
            Bson::JavaScriptCode("x=1".into()),
            Bson::JavaScriptCode("x=2".into())
        ])
    );
}

#[test]
fn a_delta_that_breaks_utf8_is_an_error() {
    let bytes = column(&[lit("a"), ctl(&[block(14, &[Some(zz(0xFF - 0x61))])])]);
    assert_eq!(dec_err(&bytes), ColumnError::InvalidUtf8);
}

#[test]
fn an_unencodable_long_string_repeats_with_zero_deltas_and_later_deltas_start_from_zero() {
    let long = "a string longer than sixteen bytes";
    let bytes = column(&[
        lit(long),
        ctl(&[block(12, &[Some(0), Some(0), Some(zz(0x61))])]),
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![long.into(), long.into(), long.into(), "a".into()])
    );
}

#[test]
fn bin_data_deltas_keep_length_and_subtype() {
    let bin = |bytes: Vec<u8>| {
        Bson::Binary(Binary {
            subtype: BinarySubtype::UserDefined(0x80),
            bytes,
        })
    };
    let bytes = column(&[
        lit(bin(vec![1, 2, 3, 4])),
        ctl(&[block(13, &[Some(zz(1)), Some(zz(0x100))])]),
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![
            bin(vec![1, 2, 3, 4]),
            bin(vec![2, 2, 3, 4]),
            bin(vec![2, 3, 3, 4])
        ])
    );
}

#[test]
fn a_delta_on_bin_data_longer_than_sixteen_bytes_is_an_error() {
    let long = Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes: vec![0; 20],
    });
    let bytes = column(&[lit(long.clone()), ctl(&[block(13, &[Some(0), Some(0)])])]);
    assert_eq!(dec(&bytes), some(vec![long.clone(); 3]));
    let bytes = column(&[lit(long), ctl(&[block(14, &[Some(zz(1))])])]);
    assert!(matches!(dec_err(&bytes), ColumnError::Overflow(_)));
}

#[test]
fn decimal128_decodes_from_128_bit_deltas() {
    let mut one = [0u8; 16];
    one[0] = 1;
    one[14] = 0x40;
    one[15] = 0x30;
    let plus = |delta: u128| {
        Bson::Decimal128(Decimal128::from_bytes(
            (u128::from_le_bytes(one) + delta).to_le_bytes(),
        ))
    };
    let bytes = column(&[
        lit(Bson::Decimal128(Decimal128::from_bytes(one))),
        ctl(&[block(14, &[Some(zz(5))])]),
    ]);
    assert_eq!(dec(&bytes), some(vec![plus(0), plus(5)]));
}

#[test]
fn selector_seven_extension_decodes_a_128_bit_delta_with_trailing_zeros() {
    // "abc" -> "bbc" changes the third byte: delta 1 << 16, zigzag 1 << 17, stored as
    // value 4 with 15 trailing zeros (the most selector 7 can count).
    assert_eq!(zz128(1 << 16), 4 << 15);
    let bytes = column(&[lit("abc"), ctl(&[ext_block(7, 9, &[Some((4, 15))])])]);
    assert_eq!(dec(&bytes), some(vec!["abc".into(), "bbc".into()]));
    // A full extension-1 block: nine slots of 2 value bits + 4 count bits.
    let slots = [Some((1, 1)); 9]; // each 2: a delta of +1
    let bytes = column(&[lit(0i64), ctl(&[ext_block(7, 1, &slots)])]);
    let expected: Vec<Bson> = (0i64..=9).map(Bson::Int64).collect();
    assert_eq!(dec(&bytes), some(expected));
}

#[test]
fn selector_eight_extensions_decode_nibble_shifted_deltas() {
    // Small: int64 delta 1 << 40, zigzag 1 << 41 = 2 shifted by 10 nibbles.
    let bytes = column(&[lit(5i64), ctl(&[ext_block(8, 7, &[Some((2, 10))])])]);
    assert_eq!(
        dec(&bytes),
        some(vec![5i64.into(), (5i64 + (1 << 40)).into()])
    );
    // Small, seven slots: value 1 shifted by one nibble = zigzag 16 = +8.
    let bytes = column(&[lit(0i64), ctl(&[ext_block(8, 1, &[Some((1, 1)); 7])])]);
    let expected: Vec<Bson> = (0i64..=7).map(|i| Bson::Int64(8 * i)).collect();
    assert_eq!(dec(&bytes), some(expected));
    // Large: decimal128 delta 1 << 100, zigzag 1 << 101 = 2 shifted by 25 nibbles.
    let base = [9u8; 16];
    let bytes = column(&[
        lit(Bson::Decimal128(Decimal128::from_bytes(base))),
        ctl(&[ext_block(8, 13, &[Some((2, 25))])]),
    ]);
    let next = (u128::from_le_bytes(base).wrapping_add(1 << 100)).to_le_bytes();
    assert_eq!(
        dec(&bytes),
        some(vec![
            Bson::Decimal128(Decimal128::from_bytes(base)),
            Bson::Decimal128(Decimal128::from_bytes(next))
        ])
    );
}

#[test]
fn a_64_bit_delta_wider_than_64_bits_is_an_error() {
    // 1 shifted by 25 nibbles does not fit an int64 stream.
    let bytes = column(&[lit(5i64), ctl(&[ext_block(8, 13, &[Some((1, 25))])])]);
    assert!(matches!(dec_err(&bytes), ColumnError::Overflow(_)));
}

fn zero_delta_only_values() -> Vec<Bson> {
    vec![
        Bson::Null,
        Bson::Undefined,
        Bson::MinKey,
        Bson::MaxKey,
        Bson::RegularExpression(Regex {
            pattern: "x".into(),
            options: String::new(),
        }),
        Bson::Symbol("s".into()),
        Bson::Document(doc! { "a": 1 }),
        Bson::Array(vec![Bson::Int32(1)]),
        Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
            code: "c".into(),
            scope: doc! {},
        }),
    ]
}

#[test]
fn types_without_arithmetic_repeat_their_literal_on_zero_deltas() {
    for value in zero_delta_only_values() {
        let bytes = column(&[
            lit(value.clone()),
            ctl(&[block(12, &[Some(0), None, Some(0)])]),
        ]);
        assert_eq!(
            dec(&bytes),
            vec![Some(value.clone()), Some(value.clone()), None, Some(value)]
        );
    }
}

#[test]
fn a_non_zero_delta_on_a_type_without_arithmetic_is_an_error() {
    let mut values = zero_delta_only_values();
    values.push(Bson::Binary(Binary {
        subtype: BinarySubtype::BinaryOld,
        bytes: vec![1],
    }));
    for value in values {
        let bytes = column(&[lit(value.clone()), ctl(&[block(14, &[Some(zz(1))])])]);
        assert!(
            matches!(dec_err(&bytes), ColumnError::NonDeltaType(_)),
            "{value:?}"
        );
    }
}
