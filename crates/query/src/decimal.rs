//! Decimal128 arithmetic as MongoDB computes it: IEEE 754-2008 decimal with 34 digits,
//! rounding half to even (libdecnumber, through the `dec` crate), not a double.
//!
//! BSON stores a Decimal128 in the binary integer encoding and decNumber in the densely
//! packed one, so values cross between the two as their scientific strings, which both
//! write and read by the same standard.
//!
//! A double meets a decimal as MongoDB converts it: rounded to 15 significant digits in
//! arithmetic (`Decimal128(double)`'s default precision), to 34 in comparisons.

use bson::Bson;
use std::cmp::Ordering;

pub type Dec = dec::Decimal128;

/// The decimal of a BSON Decimal128 (NaN if its text does not parse, which a valid
/// Decimal128 always does).
pub fn from_bson(d: &bson::Decimal128) -> Dec {
    d.to_string().parse().unwrap_or(Dec::NAN)
}

/// The BSON Decimal128 of `d`.
pub fn to_bson(d: Dec) -> Bson {
    match d.to_string().parse::<bson::Decimal128>() {
        Ok(b) => Bson::Decimal128(b),
        Err(_) => Bson::Double(to_f64(d)),
    }
}

/// The double nearest to `d`.
pub fn to_f64(d: Dec) -> f64 {
    text_to_f64(&d.to_string())
}

/// The double nearest to a decimal's scientific string (BSON's or decNumber's: both
/// write NaN and the infinities by name).
pub fn text_to_f64(s: &str) -> f64 {
    s.parse::<f64>().unwrap_or_else(|_| {
        let l = s.to_ascii_lowercase();
        if l.contains("nan") {
            f64::NAN
        } else if l.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }
    })
}

/// `f` as a decimal of `digits` significant digits (1 to 34).
fn from_f64_digits(f: f64, digits: usize) -> Dec {
    if f.is_nan() {
        return Dec::NAN;
    }
    if f.is_infinite() {
        let inf: Dec = "Infinity".parse().unwrap_or(Dec::NAN);
        return if f > 0.0 { inf } else { -inf };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            -Dec::ZERO
        } else {
            Dec::ZERO
        };
    }
    format!("{f:.prec$e}", prec = digits - 1)
        .parse()
        .unwrap_or(Dec::NAN)
}

/// A double as arithmetic with a decimal takes it: 15 significant digits.
pub fn from_f64(f: f64) -> Dec {
    from_f64_digits(f, 15)
}

/// A double to 34 significant digits (a sum of doubles joining a decimal sum).
pub fn from_f64_full(f: f64) -> Dec {
    from_f64_digits(f, 34)
}

/// A double computed for a decimal operand (the functions Hourglass evaluates in double
/// precision: `$sqrt`, `$exp`, `$ln`, `$log10`, `$pow`, window slopes and averages) as a
/// decimal of its shortest round-trip digits.
pub fn from_f64_result(f: f64) -> Dec {
    if !f.is_finite() || f == 0.0 {
        return from_f64_digits(f, 1);
    }
    format!("{f:e}").parse().unwrap_or(Dec::NAN)
}

/// The mean of a decimal total and a double total over `count` values, in decimal.
pub fn mean(decimal_total: Dec, double_total: f64, count: u64) -> Dec {
    (decimal_total + from_f64_full(double_total)) / Dec::from(count)
}

/// MongoDB's order of two decimals: NaN lowest and equal to itself.
pub fn compare(a: Dec, b: Dec) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// MongoDB's order of a decimal and a double (the double taken to 34 digits).
pub fn compare_f64(a: Dec, b: f64) -> Ordering {
    compare(a, from_f64_full(b))
}

/// `d` rounded to an integer up (`ceil`) or down.
pub fn to_integral(d: Dec, ceil: bool) -> Dec {
    let mut cx = dec::Context::<Dec>::default();
    cx.set_rounding(if ceil {
        dec::Rounding::Ceiling
    } else {
        dec::Rounding::Floor
    });
    cx.round(d)
}

/// `d` without trailing zeros in its coefficient (`0.10` is `0.1`, `1.0E+3` is `1E+3`):
/// one text for each value.
pub fn reduced(d: Dec) -> String {
    dec::Context::<Dec>::default().reduce(d).to_string()
}

/// The integer value of `d` when it is an integer within int64.
pub fn to_exact_i64(d: Dec) -> Option<i64> {
    if !d.is_finite() || !d.is_integer() {
        return None;
    }
    // An integer set to exponent 0 prints as its plain digits (at most 34 of them).
    dec::Context::<Dec>::default()
        .quantize(d, Dec::ZERO)
        .to_string()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        s.parse().unwrap()
    }

    #[test]
    fn a_hundred_tenths_sum_to_exactly_ten() {
        let tenth = d("0.1");
        let total = (0..100).fold(Dec::ZERO, |s, _| s + tenth);
        assert_eq!(total.to_string(), "10.0");
        assert_eq!(to_bson(total), Bson::Decimal128("10.0".parse().unwrap()));
    }

    #[test]
    fn bson_decimals_cross_without_loss() {
        for s in [
            "1E+3",
            "-0.00",
            "12345678901234567890123456789012.34",
            "NaN",
            "-Infinity",
        ] {
            let b: bson::Decimal128 = s.parse().unwrap();
            assert_eq!(to_bson(from_bson(&b)), Bson::Decimal128(b), "{s}");
        }
    }

    #[test]
    fn doubles_meet_decimals_at_mongodb_precision() {
        assert_eq!(from_f64(0.1).to_string(), "0.100000000000000");
        assert_eq!(compare_f64(d("0.1"), 0.1), Ordering::Less);
        assert_eq!(compare_f64(d("2"), 2.0), Ordering::Equal);
        assert_eq!(compare(Dec::NAN, d("-1E+6000")), Ordering::Less);
    }

    #[test]
    fn integral_decimals_within_int64_convert_exactly() {
        assert_eq!(to_exact_i64(d("1.000E+3")), Some(1000));
        assert_eq!(to_exact_i64(d("-9223372036854775808")), Some(i64::MIN));
        assert_eq!(to_exact_i64(d("9223372036854775808")), None);
        assert_eq!(to_exact_i64(d("2.5")), None);
    }
}
