//! Numeric helpers shared by comparison, update operators and expressions:
//! exact comparison across int32/int64/double/decimal and MongoDB's type
//! promotion rules for arithmetic (int32 -> int64 -> double on overflow).

use std::cmp::Ordering;

use crate::decimal::{self, Dec};
use bson::{Bson, Decimal128};

/// A numeric BSON value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    /// Int32.
    I32(i32),
    /// Int64.
    I64(i64),
    /// Double.
    F64(f64),
    /// Decimal128, computed in decimal (see `decimal`).
    Dec(Dec),
}

/// How two numbers combine ([`Num::checked_arith`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Rem,
}

impl Arith {
    fn ints(self, a: i64, b: i64) -> Option<i64> {
        match self {
            Arith::Add => a.checked_add(b),
            Arith::Sub => a.checked_sub(b),
            Arith::Mul => a.checked_mul(b),
            Arith::Rem => a.checked_rem(b),
        }
    }

    fn doubles(self, a: f64, b: f64) -> f64 {
        match self {
            Arith::Add => a + b,
            Arith::Sub => a - b,
            Arith::Mul => a * b,
            Arith::Rem => a % b,
        }
    }

    fn decimals(self, a: Dec, b: Dec) -> Dec {
        match self {
            Arith::Add => a + b,
            Arith::Sub => a - b,
            Arith::Mul => a * b,
            Arith::Rem => a % b,
        }
    }
}

/// Converts a Decimal128 to its (approximate) double value.
pub fn decimal_to_f64(d: &Decimal128) -> f64 {
    decimal::text_to_f64(&d.to_string())
}

fn cmp_i64_f64(i: i64, f: f64) -> Ordering {
    if f.is_nan() {
        return Ordering::Greater;
    }
    if f >= 9.223_372_036_854_776e18 {
        return Ordering::Less;
    }
    if f < -9.223_372_036_854_776e18 {
        return Ordering::Greater;
    }
    let fl = f.floor();
    let fi = fl as i64;
    match i.cmp(&fi) {
        Ordering::Equal if f > fl => Ordering::Less,
        o => o,
    }
}

fn cmp_f64(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

impl Num {
    /// Extracts a number from a BSON value.
    pub fn from_bson(v: &Bson) -> Option<Num> {
        match v {
            Bson::Int32(i) => Some(Num::I32(*i)),
            Bson::Int64(i) => Some(Num::I64(*i)),
            Bson::Double(f) => Some(Num::F64(*f)),
            Bson::Decimal128(d) => Some(Num::Dec(decimal::from_bson(d))),
            _ => None,
        }
    }

    /// Converts back to BSON.
    pub fn to_bson(self) -> Bson {
        match self {
            Num::I32(i) => Bson::Int32(i),
            Num::I64(i) => Bson::Int64(i),
            Num::F64(f) => Bson::Double(f),
            Num::Dec(d) => decimal::to_bson(d),
        }
    }

    /// The value as a double.
    pub fn as_f64(self) -> f64 {
        match self {
            Num::I32(i) => f64::from(i),
            Num::I64(i) => i as f64,
            Num::F64(f) => f,
            Num::Dec(d) => decimal::to_f64(d),
        }
    }

    /// The value as an i64 if it is integral (or an exactly integral double).
    pub fn as_exact_i64(self) -> Option<i64> {
        match self {
            Num::I32(i) => Some(i64::from(i)),
            Num::I64(i) => Some(i),
            Num::F64(f) => {
                if f.fract() == 0.0 && (-9.2e18..=9.2e18).contains(&f) {
                    Some(f as i64)
                } else {
                    None
                }
            }
            Num::Dec(d) => decimal::to_exact_i64(d),
        }
    }

    /// True for zero of any type.
    pub fn is_zero(self) -> bool {
        match self {
            Num::Dec(d) => d.is_zero(),
            n => n.as_f64() == 0.0,
        }
    }

    /// Exact numeric comparison; NaN is lowest.
    pub fn compare(&self, other: &Num) -> Ordering {
        use Num::*;
        match (*self, *other) {
            (I32(a), I32(b)) => a.cmp(&b),
            (I32(a), I64(b)) => i64::from(a).cmp(&b),
            (I64(a), I32(b)) => a.cmp(&i64::from(b)),
            (I64(a), I64(b)) => a.cmp(&b),
            (I32(a), F64(b)) => cmp_i64_f64(i64::from(a), b),
            (I64(a), F64(b)) => cmp_i64_f64(a, b),
            (F64(a), I32(b)) => cmp_i64_f64(i64::from(b), a).reverse(),
            (F64(a), I64(b)) => cmp_i64_f64(b, a).reverse(),
            (F64(a), F64(b)) => cmp_f64(a, b),
            (Dec(a), Dec(b)) => decimal::compare(a, b),
            (Dec(a), I32(b)) => decimal::compare(a, decimal::Dec::from(b)),
            (Dec(a), I64(b)) => decimal::compare(a, decimal::Dec::from(b)),
            (I32(a), Dec(b)) => decimal::compare(decimal::Dec::from(a), b),
            (I64(a), Dec(b)) => decimal::compare(decimal::Dec::from(a), b),
            (Dec(a), F64(b)) => decimal::compare_f64(a, b),
            (F64(a), Dec(b)) => decimal::compare_f64(b, a).reverse(),
        }
    }

    fn is_dec(self) -> bool {
        matches!(self, Num::Dec(_))
    }

    fn is_f64(self) -> bool {
        matches!(self, Num::F64(_))
    }

    fn int_pair(self, other: Num) -> Option<(i64, i64, bool)> {
        let as_int = |n: Num| match n {
            Num::I32(i) => Some((i64::from(i), true)),
            Num::I64(i) => Some((i, false)),
            _ => None,
        };
        let (a, a32) = as_int(self)?;
        let (b, b32) = as_int(other)?;
        Some((a, b, a32 && b32))
    }

    /// The value as a decimal: integers exactly, doubles to 15 digits.
    pub fn to_dec(self) -> Dec {
        match self {
            Num::I32(i) => Dec::from(i),
            Num::I64(i) => Dec::from(i),
            Num::F64(f) => decimal::from_f64(f),
            Num::Dec(d) => d,
        }
    }

    fn int_result(v: i64, both32: bool) -> Num {
        match i32::try_from(v) {
            Ok(i) if both32 => Num::I32(i),
            _ => Num::I64(v),
        }
    }

    /// Addition with MongoDB's promotion rules; int64 overflow falls back to double.
    pub fn plus(self, other: Num) -> Num {
        self.arith(other, Arith::Add)
    }

    /// Subtraction with promotion.
    pub fn minus(self, other: Num) -> Num {
        self.arith(other, Arith::Sub)
    }

    /// Multiplication with promotion.
    pub fn times(self, other: Num) -> Num {
        self.arith(other, Arith::Mul)
    }

    /// Integer-preserving arithmetic (decimal when either is a decimal, else double when
    /// either is a double); int64 overflow yields `None`.
    pub fn checked_arith(self, other: Num, op: Arith) -> Option<Num> {
        if let Some((a, b, both32)) = self.int_pair(other) {
            return op.ints(a, b).map(|v| Num::int_result(v, both32));
        }
        if self.is_dec() || other.is_dec() {
            return Some(Num::Dec(op.decimals(self.to_dec(), other.to_dec())));
        }
        Some(Num::F64(op.doubles(self.as_f64(), other.as_f64())))
    }

    fn arith(self, other: Num, op: Arith) -> Num {
        match self.checked_arith(other, op) {
            Some(n) => n,
            None => Num::F64(op.doubles(self.as_f64(), other.as_f64())),
        }
    }

    /// True if either operand is floating point (double or decimal).
    pub fn any_float(self, other: Num) -> bool {
        self.is_f64() || other.is_f64() || self.is_dec() || other.is_dec()
    }
}

/// A running `$avg`: doubles and integers summed as doubles, decimals in decimal, the
/// two joined at the end (a decimal mean when any decimal came), as MongoDB averages.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Mean {
    pub doubles: f64,
    pub decimals: Option<Dec>,
    pub count: u64,
}

impl Mean {
    pub fn add(&mut self, n: Num) {
        match n {
            Num::Dec(d) => {
                self.decimals = Some(self.decimals.map_or(d, |t| t + d));
                self.count += 1;
            }
            n => self.add_double(n.as_f64()),
        }
    }

    /// [`Mean::add`] of a double.
    pub fn add_double(&mut self, x: f64) {
        self.doubles += x;
        self.count += 1;
    }

    /// Takes in the values of another run.
    pub fn merge(&mut self, other: Mean) {
        self.doubles += other.doubles;
        self.count += other.count;
        if let Some(d) = other.decimals {
            self.decimals = Some(self.decimals.map_or(d, |t| t + d));
        }
    }

    /// The mean; null when no value came.
    pub fn finish(&self) -> Bson {
        if self.count == 0 {
            return Bson::Null;
        }
        match self.decimals {
            Some(d) => decimal::to_bson(decimal::mean(d, self.doubles, self.count)),
            None => Bson::Double(self.doubles / self.count as f64),
        }
    }
}

/// A finite decimal split into sign, coefficient digits (no leading zeros; "0" for
/// zero) and exponent: its value is `coefficient * 10^exponent`.
pub(crate) fn decimal_parts(d: &bson::Decimal128) -> Option<(bool, String, i64)> {
    let s = d.to_string();
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.as_str()),
    };
    let (mantissa, exp) = match body.split_once(['E', 'e']) {
        Some((m, e)) => (m, e.trim_start_matches('+').parse::<i64>().ok()?),
        None => (body, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int}{frac}");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    let coeff = if trimmed.is_empty() { "0" } else { trimmed };
    let exp = exp.checked_sub(i64::try_from(frac.len()).ok()?)?;
    Some((neg, coeff.to_string(), exp))
}

/// A finite double as C's `printf("%g")` prints it (six significant digits,
/// trailing zeros dropped, exponent form below 1e-4 or from 1e6), which is how
/// MongoDB turns a double into a string.
pub fn format_g(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    let sci = format!("{f:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if (-4..6).contains(&exp) {
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        trim(&format!("{f:.decimals$}"))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int32_addition_overflow_promotes_to_int64() {
        assert_eq!(
            Num::I32(i32::MAX).plus(Num::I32(1)),
            Num::I64(i64::from(i32::MAX) + 1)
        );
        assert_eq!(Num::I32(1).plus(Num::I32(2)), Num::I32(3));
        assert_eq!(Num::I32(1).plus(Num::I64(2)), Num::I64(3));
        assert_eq!(Num::I32(1).plus(Num::F64(0.5)), Num::F64(1.5));
    }

    #[test]
    fn int64_overflow_is_reported_by_checked_arith() {
        assert_eq!(
            Num::I64(i64::MAX).checked_arith(Num::I32(1), Arith::Add),
            None
        );
    }

    #[test]
    fn decimal_round_trips_through_strings() {
        let d: Decimal128 = "1.25".parse().unwrap();
        assert_eq!(decimal_to_f64(&d), 1.25);
    }
}
