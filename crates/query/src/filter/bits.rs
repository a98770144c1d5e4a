//! The bitwise query operators `$bitsAllSet`, `$bitsAnySet`, `$bitsAllClear` and
//! `$bitsAnyClear`: parsing of their argument (a non-negative integral number, a BinData
//! or an array of bit positions) and matching against numbers and BinData values.
//!
//! MongoDB 7.0's behaviour, as documented and as observed:
//! - numbers are tested as 64-bit two's complement integers, so a bit position past 63
//!   reads the sign bit; doubles that are NaN, fractional or outside the 64-bit range
//!   never match; Decimal128 values are rounded to the nearest integer (ties to even),
//!   and one that is NaN, infinite or out of range reads as the 64-bit minimum;
//! - BinData values are tested bit by bit (byte 0 holds bits 0-7, least significant
//!   first); positions past the end read as clear;
//! - a BinData bitmask's first eight bytes give the mask numbers are tested with, each
//!   byte widened as a signed char (a byte of 0x80 or more sets every higher bit too),
//!   and any non-zero byte after the eighth sets the sign bit;
//! - subtype 2 (old binary) data is seen with its inner length prefix.

use std::borrow::Cow;

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Decimal128};

use crate::error::QueryError;

/// Which of the four bit tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitsOp {
    /// `$bitsAllSet`
    AllSet,
    /// `$bitsAnySet`
    AnySet,
    /// `$bitsAllClear`
    AllClear,
    /// `$bitsAnyClear`
    AnyClear,
}

impl BitsOp {
    /// The operator for a filter key such as `$bitsAllSet`.
    pub fn from_name(name: &str) -> Option<BitsOp> {
        Some(match name {
            "$bitsAllSet" => BitsOp::AllSet,
            "$bitsAnySet" => BitsOp::AnySet,
            "$bitsAllClear" => BitsOp::AllClear,
            "$bitsAnyClear" => BitsOp::AnyClear,
            _ => return None,
        })
    }

    /// The operator's name.
    pub fn name(self) -> &'static str {
        match self {
            BitsOp::AllSet => "$bitsAllSet",
            BitsOp::AnySet => "$bitsAnySet",
            BitsOp::AllClear => "$bitsAllClear",
            BitsOp::AnyClear => "$bitsAnyClear",
        }
    }

    /// Whether the test wants the bits set (`true`) or clear.
    fn wants_set(self) -> bool {
        matches!(self, BitsOp::AllSet | BitsOp::AnySet)
    }

    /// Whether every bit must pass (`true`) or one is enough.
    fn wants_all(self) -> bool {
        matches!(self, BitsOp::AllSet | BitsOp::AllClear)
    }
}

/// A parsed bit test: the mask numbers are tested with and the bit positions BinData
/// values are tested with.
#[derive(Debug, Clone, PartialEq)]
pub struct BitTest {
    op: BitsOp,
    mask: u64,
    positions: Vec<u32>,
}

/// The bytes of a BinData as MongoDB sees them (subtype 2 keeps its length prefix).
fn binary_bytes(b: &Binary) -> Cow<'_, [u8]> {
    match b.subtype {
        BinarySubtype::BinaryOld => {
            let len = i32::try_from(b.bytes.len()).unwrap_or(i32::MAX);
            let mut out = Vec::with_capacity(b.bytes.len() + 4);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&b.bytes);
            Cow::Owned(out)
        }
        _ => Cow::Borrowed(&b.bytes),
    }
}

/// A value the way MongoDB prints an element's value inside these error messages.
fn shown(v: &Bson) -> String {
    match v {
        Bson::Decimal128(d) => d.to_string(),
        other => crate::error::render(other),
    }
}

/// A number argument as a 64-bit integer, or why it is not one (MongoDB's words, for
/// the element `name: value`).
fn integer_arg(name: &str, v: &Bson) -> Result<i64, String> {
    let elem = format!("{name}: {}", shown(v));
    match v {
        Bson::Int32(i) => Ok(i64::from(*i)),
        Bson::Int64(i) => Ok(*i),
        Bson::Double(f) => {
            if f.is_nan() {
                return Err(format!("Expected an integer, but found NaN in: {elem}"));
            }
            if *f >= 9_223_372_036_854_775_808.0 || *f < -9_223_372_036_854_775_808.0 {
                return Err(format!("Cannot represent as a 64-bit integer: {elem}"));
            }
            if f.fract() != 0.0 {
                return Err(format!("Expected an integer: {elem}"));
            }
            Ok(*f as i64)
        }
        Bson::Decimal128(d) => decimal_exact_i64(d)
            .ok_or_else(|| format!("Cannot represent as a 64-bit integer: {elem}")),
        _ => Err(format!("Expected a number in: {elem}")),
    }
}

/// A bit position of an array argument (element `index`): a non-negative number that
/// fits a 32-bit int.
fn bit_position(index: usize, v: &Bson) -> Result<u32, QueryError> {
    let fail = |reason: String| QueryError::bad(format!("Failed to parse bit position. {reason}"));
    let name = index.to_string();
    let n = integer_arg(&name, v).map_err(fail)?;
    let Ok(n) = i32::try_from(n) else {
        return Err(fail(format!(
            "Cannot represent {name}: {} in an int",
            shown(v)
        )));
    };
    u32::try_from(n).map_err(|_| {
        fail(format!(
            "Expected a non-negative number in: {name}: {}",
            shown(v)
        ))
    })
}

impl BitTest {
    /// Parses the argument of `op` on the field `path` (`""` inside a value
    /// `$elemMatch`).
    pub fn parse(op: BitsOp, path: &str, arg: &Bson) -> Result<BitTest, QueryError> {
        match arg {
            Bson::Array(items) => {
                let positions = items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| bit_position(i, v))
                    .collect::<Result<Vec<u32>, QueryError>>()?;
                // Past bit 63 a number's bits are copies of its sign bit.
                let mask = positions.iter().fold(0u64, |m, &p| m | (1u64 << p.min(63)));
                Ok(BitTest {
                    op,
                    mask,
                    positions,
                })
            }
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                let n = integer_arg(op.name(), arg).map_err(QueryError::FailedToParse)?;
                let Ok(mask) = u64::try_from(n) else {
                    return Err(QueryError::FailedToParse(format!(
                        "Expected a non-negative number in: {}: {}",
                        op.name(),
                        shown(arg)
                    )));
                };
                let positions = (0..64u32).filter(|b| mask & (1u64 << b) != 0).collect();
                Ok(BitTest {
                    op,
                    mask,
                    positions,
                })
            }
            Bson::Binary(b) => {
                let bytes = binary_bytes(b);
                let mut mask = 0u64;
                let mut positions = Vec::new();
                for (i, &byte) in bytes.iter().enumerate() {
                    if byte == 0 {
                        continue;
                    }
                    if i < 8 {
                        // The byte is widened as a signed char: 0x80 and up extend with ones.
                        mask |= (i64::from(byte as i8) as u64) << (i * 8);
                    } else {
                        mask |= 1u64 << 63;
                    }
                    let base = u32::try_from(i).unwrap_or(u32::MAX / 8).saturating_mul(8);
                    positions.extend(
                        (0..8u32)
                            .filter(|bit| byte & (1u8 << bit) != 0)
                            .map(|bit| base.saturating_add(bit)),
                    );
                }
                Ok(BitTest {
                    op,
                    mask,
                    positions,
                })
            }
            other => Err(QueryError::bad(format!(
                "{path} takes an Array, a number, or a BinData but received: {}: {}",
                op.name(),
                shown(other)
            ))),
        }
    }

    /// Whether one value (no array expansion) passes the test.
    pub fn matches(&self, v: &Bson) -> bool {
        match v {
            Bson::Binary(b) => self.matches_bytes(&binary_bytes(b)),
            Bson::Int32(i) => self.matches_i64(i64::from(*i)),
            Bson::Int64(i) => self.matches_i64(*i),
            Bson::Double(f) => {
                let in_range =
                    *f >= -9_223_372_036_854_775_808.0 && *f < 9_223_372_036_854_775_808.0;
                // NaN fails the range check.
                in_range && f.fract() == 0.0 && self.matches_i64(*f as i64)
            }
            Bson::Decimal128(d) => self.matches_i64(decimal_rounded_i64(d).unwrap_or(i64::MIN)),
            _ => false,
        }
    }

    fn matches_i64(&self, v: i64) -> bool {
        let bits = (if self.op.wants_set() { v } else { !v }) as u64;
        if self.op.wants_all() {
            bits & self.mask == self.mask
        } else {
            bits & self.mask != 0
        }
    }

    fn matches_bytes(&self, bytes: &[u8]) -> bool {
        let passes = |&p: &u32| {
            let byte = usize::try_from(p / 8)
                .ok()
                .and_then(|i| bytes.get(i))
                .copied()
                .unwrap_or(0);
            let set = byte & (1u8 << (p % 8)) != 0;
            set == self.op.wants_set()
        };
        if self.op.wants_all() {
            self.positions.iter().all(passes)
        } else {
            self.positions.iter().any(passes)
        }
    }
}

/// A finite decimal's sign, coefficient digits (as numbers) and exponent.
fn decimal_parts(d: &Decimal128) -> Option<(bool, Vec<u8>, i64)> {
    let (neg, coeff, exp) = crate::num::decimal_parts(d)?;
    Some((neg, coeff.bytes().map(|b| b - b'0').collect(), exp))
}

/// The integer `digits * 10^exp` (non-negative `exp`), when it stays below 2^64.
fn digits_value(digits: &[u8], exp: i64) -> Option<u128> {
    let mut v: u128 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u128::from(d))?;
        if v > u128::from(u64::MAX) {
            return None;
        }
    }
    for _ in 0..exp {
        if v == 0 {
            break;
        }
        v = v.checked_mul(10)?;
        if v > u128::from(u64::MAX) {
            return None;
        }
    }
    Some(v)
}

/// The signed value of a magnitude, when it fits 64 bits.
fn signed(neg: bool, magnitude: u128) -> Option<i64> {
    let m = i128::try_from(magnitude).ok()?;
    i64::try_from(if neg { -m } else { m }).ok()
}

/// A Decimal128's sign, integer part (when it fits 64 bits) and fraction digits (a zero
/// in front when the exponent puts zeros between the point and the digits).
fn decimal_split(d: &Decimal128) -> Option<(bool, u128, Vec<u8>)> {
    let (neg, digits, exp) = decimal_parts(d)?;
    if exp >= 0 {
        return Some((neg, digits_value(&digits, exp)?, Vec::new()));
    }
    let cut = usize::try_from(exp.unsigned_abs()).unwrap_or(usize::MAX);
    let split = digits.len().saturating_sub(cut);
    let mut frac = vec![0u8; usize::from(cut > digits.len())];
    frac.extend_from_slice(&digits[split..]);
    Some((neg, digits_value(&digits[..split], 0)?, frac))
}

/// A Decimal128 rounded to the nearest integer (ties to even), when that fits 64 bits.
fn decimal_rounded_i64(d: &Decimal128) -> Option<i64> {
    let (neg, int_value, frac) = decimal_split(d)?;
    let rest_nonzero = frac.iter().skip(1).any(|&x| x != 0);
    let round_up = match frac.first().copied().unwrap_or(0) {
        6..=9 => true,
        5 if rest_nonzero => true,
        5 => int_value % 2 == 1,
        _ => false,
    };
    signed(neg, int_value + u128::from(round_up))
}

/// A Decimal128 that is exactly a 64-bit integer.
fn decimal_exact_i64(d: &Decimal128) -> Option<i64> {
    let (neg, int_value, frac) = decimal_split(d)?;
    if frac.iter().any(|&x| x != 0) {
        return None;
    }
    signed(neg, int_value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal128 {
        s.parse().expect("decimal")
    }

    #[test]
    fn decimals_round_to_nearest_integer_with_ties_to_even() {
        assert_eq!(decimal_rounded_i64(&dec("1.5")), Some(2));
        assert_eq!(decimal_rounded_i64(&dec("2.5")), Some(2));
        assert_eq!(decimal_rounded_i64(&dec("2.51")), Some(3));
        assert_eq!(decimal_rounded_i64(&dec("-1.1")), Some(-1));
        assert_eq!(decimal_rounded_i64(&dec("0.05")), Some(0));
        assert_eq!(decimal_rounded_i64(&dec("1E+3")), Some(1000));
        assert_eq!(
            decimal_rounded_i64(&dec("-9223372036854775808")),
            Some(i64::MIN)
        );
        assert_eq!(decimal_rounded_i64(&dec("9223372036854775808")), None);
        assert_eq!(decimal_rounded_i64(&dec("NaN")), None);
        assert_eq!(decimal_rounded_i64(&dec("Infinity")), None);
    }

    #[test]
    fn only_integral_decimals_are_exact_integers() {
        assert_eq!(decimal_exact_i64(&dec("12.000")), Some(12));
        assert_eq!(decimal_exact_i64(&dec("12.5")), None);
        assert_eq!(decimal_exact_i64(&dec("1E+30")), None);
        assert_eq!(decimal_exact_i64(&dec("0E-6176")), Some(0));
    }

    #[test]
    fn a_binary_mask_widens_its_first_eight_bytes_as_signed_chars() {
        let t = BitTest::parse(
            BitsOp::AllSet,
            "a",
            &Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![0x80],
            }),
        )
        .expect("parse");
        assert_eq!(t.mask, 0xFFFF_FFFF_FFFF_FF80);
        assert_eq!(t.positions, vec![7]);
        assert!(t.matches(&Bson::Int32(-128)));
        assert!(!t.matches(&Bson::Int32(128)));
        let far = BitTest::parse(
            BitsOp::AnySet,
            "a",
            &Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            }),
        )
        .expect("parse");
        assert_eq!(far.mask, 1 << 63);
        assert_eq!(far.positions, vec![72]);
    }
}
