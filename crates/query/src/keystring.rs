//! Order-preserving byte encoding of BSON values ("key strings").
//!
//! `encode(a) < encode(b)` (bytewise) whenever `a < b` in MongoDB's comparison order, and
//! values MongoDB considers equal (`1`, `1.0`, `NumberLong(1)`) encode identically, so a
//! key serves for equality (grouping, uniqueness) as well as for ordered range scans.
//! Strings compare bytewise (the simple collation): under another collation, encode
//! its collation keys instead.
//!
//! Layout: one type-bracket byte (MongoDB's canonical type order), then a body:
//! numbers as an order-preserving f64 and a tail byte placing a lossy i64 around it;
//! strings as bytes with 0x00 escaped as 0x00 0xFF and terminated by 0x00 0x00;
//! objects as (name, value) pairs ended by 0x00; arrays as values ended by 0x00;
//! ObjectId as its 12 bytes; booleans as one byte; dates and timestamps as sign-flipped
//! big-endian integers; anything else as its BSON bytes.

use crate::compare::canonical_type_rank;
use bson::Bson;

/// Encodes `value` into a fresh buffer.
pub fn encode(value: &Bson) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    encode_into(value, &mut out);
    out
}

/// The key a `$group` tells its groups apart by: [`encode`]'s, except that a Decimal128
/// no double equals gets its exact value after the tail byte (0x03, its reduced digits,
/// 0x00), so it is neither grouped with the double nearest it nor with another decimal
/// that double is nearest to. Index key strings keep the stored form, which does not.
pub fn group_key(value: &Bson) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    encode_with(value, true, &mut out);
    out
}

fn put_str(s: &[u8], out: &mut Vec<u8>) {
    for &b in s {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

fn ordered_f64(f: f64) -> [u8; 8] {
    let f = if f == 0.0 { 0.0 } else { f }; // -0.0 == 0.0
    let bits = if f.is_nan() {
        0 // NaN sorts below every other number
    } else {
        let b = f.to_bits();
        if b >> 63 == 1 {
            !b
        } else {
            b | (1 << 63)
        }
    };
    bits.to_be_bytes()
}

fn put_number(f: f64, exact: Option<i64>, out: &mut Vec<u8>) {
    out.extend_from_slice(&ordered_f64(f));
    // i64 values beyond 2^53 may not be exact as f64: a tail byte orders the values that
    // share one f64 (0x00 below it, 0x01 exactly it, 0x02 above it), followed by the
    // distance to it when inexact (always below 2^12 for an i64).
    let diff = match exact {
        Some(i) if f.is_finite() => i128::from(i) - f as i128,
        _ => 0,
    };
    match diff.cmp(&0) {
        std::cmp::Ordering::Equal => out.push(1),
        std::cmp::Ordering::Less => out.push(0),
        std::cmp::Ordering::Greater => out.push(2),
    }
    if diff != 0 {
        let biased = (diff + 32768).clamp(0, 65535) as u16;
        out.extend_from_slice(&biased.to_be_bytes());
    }
}

pub fn encode_into(value: &Bson, out: &mut Vec<u8>) {
    encode_with(value, false, out)
}

fn encode_with(value: &Bson, exact_decimals: bool, out: &mut Vec<u8>) {
    out.push(canonical_type_rank(value));
    match value {
        Bson::Int32(i) => put_number(f64::from(*i), None, out),
        Bson::Int64(i) => put_number(*i as f64, Some(*i), out),
        Bson::Double(d) => put_number(*d, None, out),
        Bson::Decimal128(d) => {
            let f = crate::num::decimal_to_f64(d);
            put_number(f, None, out);
            if exact_decimals {
                let dec = crate::decimal::from_bson(d);
                if !dec.is_nan() && crate::decimal::compare_f64(dec, f).is_ne() {
                    out.push(3);
                    out.extend_from_slice(crate::decimal::reduced(dec).as_bytes());
                    out.push(0);
                }
            }
        }
        Bson::String(s) => put_str(s.as_bytes(), out),
        Bson::Symbol(s) => put_str(s.as_bytes(), out),
        Bson::Document(doc) => {
            for (k, v) in doc {
                out.push(canonical_type_rank(v));
                put_str(k.as_bytes(), out);
                encode_with(v, exact_decimals, out);
            }
            out.push(0);
        }
        Bson::Array(items) => {
            for v in items {
                encode_with(v, exact_decimals, out);
            }
            out.push(0);
        }
        Bson::ObjectId(oid) => out.extend_from_slice(&oid.bytes()),
        Bson::Boolean(b) => out.push(u8::from(*b)),
        Bson::DateTime(dt) => {
            out.extend_from_slice(&((dt.timestamp_millis() as u64) ^ (1 << 63)).to_be_bytes())
        }
        Bson::Timestamp(ts) => {
            out.extend_from_slice(&ts.time.to_be_bytes());
            out.extend_from_slice(&ts.increment.to_be_bytes());
        }
        Bson::Binary(b) => {
            out.extend_from_slice(&(b.bytes.len() as u32).to_be_bytes());
            out.push(u8::from(b.subtype));
            out.extend_from_slice(&b.bytes);
        }
        Bson::Null | Bson::Undefined | Bson::MinKey | Bson::MaxKey => {}
        other => {
            let doc = bson::doc! { "": other.clone() };
            if let Ok(bytes) = bson::to_vec(&doc) {
                out.extend_from_slice(&bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare_values;
    use bson::{doc, oid::ObjectId, Bson};

    #[test]
    fn equal_numbers_of_different_types_share_a_key() {
        assert_eq!(encode(&Bson::Int32(1)), encode(&Bson::Double(1.0)));
        assert_eq!(encode(&Bson::Int64(1)), encode(&Bson::Int32(1)));
        assert_ne!(encode(&Bson::Int64(1)), encode(&Bson::Int64(2)));
    }

    #[test]
    fn byte_order_follows_mongodb_comparison_order() {
        let values = vec![
            Bson::MinKey,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Double(-1e300),
            Bson::Int64(-5),
            Bson::Int32(0),
            Bson::Double(0.5),
            Bson::Int64((1 << 53) + 1),
            Bson::Int64((1 << 53) + 3),
            Bson::Double(((1_i64 << 53) + 4) as f64),
            Bson::Int64((1 << 53) + 5),
            Bson::Int64(i64::MAX - 1),
            Bson::Int64(i64::MAX),
            Bson::String(String::new()),
            Bson::String("a".into()),
            Bson::String("a\0b".into()),
            Bson::String("ab".into()),
            Bson::Document(doc! {}),
            Bson::Document(doc! {"a": 1}),
            Bson::Document(doc! {"a": 2}),
            Bson::Document(doc! {"b": 1}),
            Bson::Array(vec![]),
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::ObjectId(ObjectId::from_bytes([0; 12])),
            Bson::ObjectId(ObjectId::from_bytes([1; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(bson::DateTime::from_millis(-1)),
            Bson::DateTime(bson::DateTime::from_millis(1)),
            Bson::MaxKey,
        ];
        for w in values.windows(2) {
            assert!(
                encode(&w[0]) < encode(&w[1]),
                "{:?} should encode below {:?}",
                w[0],
                w[1]
            );
            assert_eq!(
                compare_values(&w[0], &w[1]),
                std::cmp::Ordering::Less,
                "{:?} < {:?}",
                w[0],
                w[1]
            );
        }
    }

    #[test]
    fn group_keys_tell_a_decimal_from_the_double_nearest_it() {
        let dec = |s: &str| Bson::Decimal128(s.parse().unwrap());
        assert_ne!(group_key(&dec("0.1")), group_key(&Bson::Double(0.1)));
        assert_eq!(group_key(&dec("0.10")), group_key(&dec("0.1")));
        assert_eq!(group_key(&dec("1.0")), group_key(&Bson::Int32(1)));
        assert_eq!(group_key(&dec("0.5")), group_key(&Bson::Double(0.5)));
        assert_ne!(
            group_key(&dec("0.1000000000000000000000000001")),
            group_key(&dec("0.1"))
        );
        // Index key strings keep the stored form.
        assert_eq!(encode(&dec("0.1")), encode(&Bson::Double(0.1)));
    }
}
