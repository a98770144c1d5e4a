//! Implementations of eagerly evaluated expression operators (arithmetic,
//! comparison, string, array, type conversion). Each operator receives its
//! already evaluated arguments; `None` means "missing".

use bson::Bson;

use super::{is_nullish, tname, R};
use crate::compare::compare_optional as cmp_opt;
use crate::compare::type_name;
use crate::error::QueryError;
use crate::num::Num;

const OPS: &[(&str, usize, usize)] = &[
    ("$add", 0, usize::MAX),
    ("$subtract", 2, 2),
    ("$multiply", 0, usize::MAX),
    ("$divide", 2, 2),
    ("$mod", 2, 2),
    ("$abs", 1, 1),
    ("$ceil", 1, 1),
    ("$floor", 1, 1),
    ("$round", 1, 2),
    ("$trunc", 1, 2),
    ("$sqrt", 1, 1),
    ("$pow", 2, 2),
    ("$exp", 1, 1),
    ("$ln", 1, 1),
    ("$log10", 1, 1),
    ("$log", 2, 2),
    ("$eq", 2, 2),
    ("$ne", 2, 2),
    ("$gt", 2, 2),
    ("$gte", 2, 2),
    ("$lt", 2, 2),
    ("$lte", 2, 2),
    ("$cmp", 2, 2),
    ("$not", 1, 1),
    ("$concat", 0, usize::MAX),
    ("$toUpper", 1, 1),
    ("$toLower", 1, 1),
    ("$substr", 3, 3),
    ("$substrBytes", 3, 3),
    ("$substrCP", 3, 3),
    ("$strLenBytes", 1, 1),
    ("$strLenCP", 1, 1),
    ("$strcasecmp", 2, 2),
    ("$split", 2, 2),
    ("$size", 1, 1),
    ("$arrayElemAt", 2, 2),
    ("$first", 1, 1),
    ("$last", 1, 1),
    ("$in", 2, 2),
    ("$isArray", 1, 1),
    ("$concatArrays", 0, usize::MAX),
    ("$reverseArray", 1, 1),
    ("$mergeObjects", 0, usize::MAX),
    ("$toString", 1, 1),
    ("$toInt", 1, 1),
    ("$toLong", 1, 1),
    ("$toDouble", 1, 1),
    ("$toDecimal", 1, 1),
    ("$toDate", 1, 1),
    ("$toBool", 1, 1),
    ("$toObjectId", 1, 1),
    ("$type", 1, 1),
    ("$isNumber", 1, 1),
    ("$year", 1, 1),
    ("$month", 1, 1),
    ("$dayOfMonth", 1, 1),
    ("$hour", 1, 1),
    ("$minute", 1, 1),
    ("$second", 1, 1),
    ("$millisecond", 1, 1),
    ("$dayOfWeek", 1, 1),
    ("$dayOfYear", 1, 1),
    ("$week", 1, 1),
    ("$isoWeek", 1, 1),
    ("$isoWeekYear", 1, 1),
    ("$isoDayOfWeek", 1, 1),
    ("$slice", 2, 3),
    ("$range", 2, 3),
    ("$indexOfArray", 2, 4),
    ("$indexOfCP", 2, 4),
    ("$indexOfBytes", 2, 4),
    ("$objectToArray", 1, 1),
    ("$arrayToObject", 1, 1),
    ("$allElementsTrue", 1, 1),
    ("$anyElementTrue", 1, 1),
    ("$setUnion", 0, usize::MAX),
    ("$setIntersection", 0, usize::MAX),
    ("$setDifference", 2, 2),
    ("$setEquals", 2, usize::MAX),
    ("$setIsSubset", 2, 2),
    ("$tsSecond", 1, 1),
    ("$tsIncrement", 1, 1),
    ("$sum", 0, usize::MAX),
    ("$avg", 0, usize::MAX),
    ("$min", 0, usize::MAX),
    ("$max", 0, usize::MAX),
    ("$stdDevPop", 0, usize::MAX),
    ("$stdDevSamp", 0, usize::MAX),
    ("$binarySize", 1, 1),
    ("$bsonSize", 1, 1),
];

/// Looks up an operator: its static name and (min, max) argument count.
pub(super) fn arity(name: &str) -> Option<(&'static str, usize, usize)> {
    OPS.iter().find(|(n, _, _)| *n == name).copied()
}

fn first(args: &[Option<Bson>]) -> &Option<Bson> {
    args.first().unwrap_or(&None)
}

fn num_of(v: &Option<Bson>) -> Option<Num> {
    v.as_ref().and_then(Num::from_bson)
}

pub(super) fn eval_op(name: &str, args: Vec<Option<Bson>>) -> R {
    let a0 = first(&args);
    let a1 = args.get(1).unwrap_or(&None);
    match name {
        "$add" => add(&args),
        "$subtract" => subtract(a0, a1),
        "$multiply" => multiply(&args),
        "$divide" => divide(a0, a1),
        "$mod" => modulo(a0, a1),
        "$abs" | "$ceil" | "$floor" | "$sqrt" | "$exp" | "$ln" | "$log10" => unary_math(name, a0),
        "$round" | "$trunc" => round(name, a0, a1),
        "$tsSecond" | "$tsIncrement" => timestamp_part(name, a0),
        "$pow" | "$log" => binary_math(name, a0, a1),
        "$eq" => Ok(Some(Bson::Boolean(cmp_opt(a0, a1).is_eq()))),
        "$ne" => Ok(Some(Bson::Boolean(!cmp_opt(a0, a1).is_eq()))),
        "$gt" => Ok(Some(Bson::Boolean(cmp_opt(a0, a1).is_gt()))),
        "$gte" => Ok(Some(Bson::Boolean(cmp_opt(a0, a1).is_ge()))),
        "$lt" => Ok(Some(Bson::Boolean(cmp_opt(a0, a1).is_lt()))),
        "$lte" => Ok(Some(Bson::Boolean(cmp_opt(a0, a1).is_le()))),
        "$cmp" => Ok(Some(Bson::Int32(cmp_opt(a0, a1) as i32))),
        "$not" => Ok(Some(Bson::Boolean(!a0.as_ref().is_some_and(super::truthy)))),
        "$concat" => concat(&args),
        "$toUpper" | "$toLower" => {
            let s = string_like(name, a0)?;
            // MongoDB changes the case of ASCII letters only.
            Ok(Some(Bson::String(if name == "$toUpper" {
                s.to_ascii_uppercase()
            } else {
                s.to_ascii_lowercase()
            })))
        }
        "$substr" | "$substrBytes" | "$substrCP" => substr(name, &args),
        "$strLenBytes" | "$strLenCP" => match a0 {
            Some(Bson::String(s)) => {
                let n = if name == "$strLenBytes" {
                    s.len()
                } else {
                    s.chars().count()
                };
                Ok(Some(Bson::Int32(i32::try_from(n).unwrap_or(i32::MAX))))
            }
            other => Err(QueryError::loc(
                if name == "$strLenBytes" { 34473 } else { 34471 },
                format!("{name} requires a string argument, found: {}", tname(other)),
            )),
        },
        "$strcasecmp" => {
            let x = string_like(name, a0)?.to_ascii_uppercase();
            let y = string_like(name, a1)?.to_ascii_uppercase();
            Ok(Some(Bson::Int32(x.as_bytes().cmp(y.as_bytes()) as i32)))
        }
        "$split" => split(a0, a1),
        "$binarySize" => super::accum_ops::binary_size(a0),
        "$bsonSize" => super::accum_ops::bson_size(a0),
        _ if super::accum_ops::ACCUMULATOR_OPS.contains(&name) => {
            super::accum_ops::eval_accumulator(name, args)
        }
        _ => super::convert::eval_more(name, &args),
    }
}

fn add(args: &[Option<Bson>]) -> R {
    let mut total = Num::I32(0);
    let mut date: Option<i64> = None;
    for a in args {
        if is_nullish(a) {
            return Ok(Some(Bson::Null));
        }
        match a {
            Some(Bson::DateTime(d)) => {
                if date.is_some() {
                    return Err(QueryError::loc(
                        16612,
                        "only one date allowed in an $add expression",
                    ));
                }
                date = Some(d.timestamp_millis());
            }
            other => match num_of(other) {
                Some(n) => total = total.plus(n),
                None => {
                    return Err(QueryError::loc(
                        16554,
                        format!(
                            "$add only supports numeric or date types, not {}",
                            tname(other)
                        ),
                    ))
                }
            },
        }
    }
    match date {
        Some(ms) => {
            let delta = match total {
                Num::I32(i) => i64::from(i),
                Num::I64(i) => i,
                other => other.as_f64().round() as i64,
            };
            Ok(Some(Bson::DateTime(bson::DateTime::from_millis(
                ms.wrapping_add(delta),
            ))))
        }
        None => Ok(Some(total.to_bson())),
    }
}

fn subtract(a: &Option<Bson>, b: &Option<Bson>) -> R {
    if is_nullish(a) || is_nullish(b) {
        return Ok(Some(Bson::Null));
    }
    match (a, b) {
        (Some(Bson::DateTime(x)), Some(Bson::DateTime(y))) => Ok(Some(Bson::Int64(
            x.timestamp_millis().wrapping_sub(y.timestamp_millis()),
        ))),
        (Some(Bson::DateTime(x)), other) if num_of(other).is_some() => {
            let n = num_of(other)
                .map(|n| n.as_f64().round() as i64)
                .unwrap_or(0);
            Ok(Some(Bson::DateTime(bson::DateTime::from_millis(
                x.timestamp_millis().wrapping_sub(n),
            ))))
        }
        _ => match (num_of(a), num_of(b)) {
            (Some(x), Some(y)) => Ok(Some(x.minus(y).to_bson())),
            _ => Err(QueryError::loc(
                16556,
                format!("can't $subtract {} from {}", tname(b), tname(a)),
            )),
        },
    }
}

fn multiply(args: &[Option<Bson>]) -> R {
    let mut total = Num::I32(1);
    for a in args {
        if is_nullish(a) {
            return Ok(Some(Bson::Null));
        }
        match num_of(a) {
            Some(n) => total = total.times(n),
            None => {
                return Err(QueryError::loc(
                    16555,
                    format!("$multiply only supports numeric types, not {}", tname(a)),
                ))
            }
        }
    }
    Ok(Some(total.to_bson()))
}

fn divide(a: &Option<Bson>, b: &Option<Bson>) -> R {
    if is_nullish(a) || is_nullish(b) {
        return Ok(Some(Bson::Null));
    }
    match (num_of(a), num_of(b)) {
        (Some(x), Some(y)) => {
            if y.is_zero() {
                return Err(QueryError::bad("can't $divide by zero"));
            }
            Ok(Some(
                if matches!(x, Num::Dec(_)) || matches!(y, Num::Dec(_)) {
                    Num::Dec(x.to_dec() / y.to_dec()).to_bson()
                } else {
                    Bson::Double(x.as_f64() / y.as_f64())
                },
            ))
        }
        _ => Err(QueryError::loc(
            16609,
            format!(
                "$divide only supports numeric types, not {} and {}",
                tname(a),
                tname(b)
            ),
        )),
    }
}

fn modulo(a: &Option<Bson>, b: &Option<Bson>) -> R {
    if is_nullish(a) || is_nullish(b) {
        return Ok(Some(Bson::Null));
    }
    match (num_of(a), num_of(b)) {
        (Some(x), Some(y)) => {
            if y.is_zero() {
                return Err(QueryError::loc(16610, "can't $mod by zero"));
            }
            let r = x.checked_arith(y, crate::num::Arith::Rem);
            Ok(Some(r.unwrap_or(Num::I64(0)).to_bson()))
        }
        _ => Err(QueryError::loc(
            16611,
            format!(
                "$mod only supports numeric types, not {} and {}",
                tname(a),
                tname(b)
            ),
        )),
    }
}

fn unary_math(name: &str, a: &Option<Bson>) -> R {
    if is_nullish(a) {
        return Ok(Some(Bson::Null));
    }
    let Some(n) = num_of(a) else {
        return Err(QueryError::loc(
            28765,
            format!("{name} only supports numeric types, not {}", tname(a)),
        ));
    };
    let f = n.as_f64();
    let float = |v: f64| -> Num {
        if matches!(n, Num::Dec(_)) {
            Num::Dec(crate::decimal::from_f64_result(v))
        } else {
            Num::F64(v)
        }
    };
    let out = match name {
        "$abs" => match n {
            Num::I32(i) => i
                .checked_abs()
                .map(Num::I32)
                .unwrap_or(Num::I64(-i64::from(i))),
            Num::I64(i) => match i.checked_abs() {
                Some(v) => Num::I64(v),
                None => return Err(QueryError::loc(28680, "can't take $abs of long long min")),
            },
            Num::Dec(d) => Num::Dec(if d.is_negative() { -d } else { d }),
            _ => float(f.abs()),
        },
        "$ceil" | "$floor" => match n {
            Num::I32(_) | Num::I64(_) => n,
            Num::Dec(d) => Num::Dec(crate::decimal::to_integral(d, name == "$ceil")),
            _ => float(if name == "$ceil" { f.ceil() } else { f.floor() }),
        },
        "$sqrt" => {
            if f < 0.0 {
                return Err(QueryError::loc(
                    28714,
                    "$sqrt's argument must be greater than or equal to 0",
                ));
            }
            float(f.sqrt())
        }
        "$exp" => float(f.exp()),
        _ => {
            if f <= 0.0 {
                let code = if name == "$ln" { 28766 } else { 28761 };
                return Err(QueryError::loc(
                    code,
                    format!("{name}'s argument must be a positive number, but is {f}"),
                ));
            }
            float(if name == "$ln" { f.ln() } else { f.log10() })
        }
    };
    Ok(Some(out.to_bson()))
}

fn round(name: &str, a: &Option<Bson>, places: &Option<Bson>) -> R {
    if is_nullish(a) {
        return Ok(Some(Bson::Null));
    }
    let Some(n) = num_of(a) else {
        return Err(QueryError::loc(
            51081,
            format!("{name} only supports numeric types, not {}", tname(a)),
        ));
    };
    let p = match places {
        None => 0,
        Some(v) => match Num::from_bson(v).and_then(|n| n.as_exact_i64()) {
            Some(p) if (-20..=100).contains(&p) => p,
            _ => {
                return Err(QueryError::loc(
                    51083,
                    format!("{name} requires an integral 'place' argument between -20 and 100"),
                ))
            }
        },
    };
    let apply = |f: f64| -> f64 {
        let m = 10f64.powi(p as i32);
        let x = f * m;
        if !x.is_finite() || x.abs() >= 4_503_599_627_370_496.0 {
            // No fractional digits left at this scale: nothing to round.
            return f;
        }
        let r = if name == "$trunc" {
            x.trunc()
        } else {
            let r = x.round();
            if (x - x.trunc()).abs() == 0.5 {
                2.0 * (x / 2.0).round()
            } else {
                r
            }
        };
        r / m
    };
    let trunc = name == "$trunc";
    let out = match n {
        Num::I32(_) | Num::I64(_) if p >= 0 => n,
        Num::I32(i) => {
            let r = round_int(i128::from(i), p, trunc);
            match i32::try_from(r) {
                Ok(v) => Num::I32(v),
                // Rounding up past the int range promotes to a long.
                Err(_) => Num::I64(i64::try_from(r).unwrap_or(i64::MAX)),
            }
        }
        Num::I64(i) => match i64::try_from(round_int(i128::from(i), p, trunc)) {
            Ok(v) => Num::I64(v),
            Err(_) => {
                return Err(QueryError::loc(
                    51080,
                    format!("invalid conversion from Decimal128 result in {name} resulting from arguments: [{i}, {p}]"),
                ))
            }
        },
        Num::F64(f) => Num::F64(apply(f)),
        Num::Dec(_) => {
            if let Some(Bson::Decimal128(d)) = a {
                return Ok(Some(round_decimal(d, p, trunc)));
            }
            return Ok(a.clone());
        }
    };
    Ok(Some(out.to_bson()))
}

/// `$tsSecond` / `$tsIncrement`: a part of a Timestamp, as a long.
fn timestamp_part(name: &str, a: &Option<Bson>) -> R {
    match a {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Timestamp(ts)) => Ok(Some(Bson::Int64(i64::from(if name == "$tsSecond" {
            ts.time
        } else {
            ts.increment
        })))),
        Some(other) => Err(QueryError::loc(
            if name == "$tsSecond" {
                5687301
            } else {
                5687302
            },
            format!(
                " Argument to {name} must be a timestamp, but is {}",
                type_name(other)
            ),
        )),
    }
}

/// Rounds (half to even) or truncates an integer to `places` (negative: tens,
/// hundreds, ...).
fn round_int(x: i128, places: i64, trunc: bool) -> i128 {
    if places >= 0 {
        return x;
    }
    let Some(m) = u32::try_from(-places)
        .ok()
        .and_then(|e| 10i128.checked_pow(e))
    else {
        return 0;
    };
    let (q, r) = (x / m, x % m);
    if trunc || r == 0 {
        return q * m;
    }
    let twice = 2 * r.abs();
    let away = twice > m || (twice == m && q % 2 != 0);
    if away {
        (q + x.signum()) * m
    } else {
        q * m
    }
}

/// `$round` / `$trunc` of a Decimal128 to `places`: the result has exponent
/// `-places` (rounding half to even, or truncating), as a decimal quantize does;
/// when that needs more than 34 digits, it keeps 34. NaN and infinities are
/// returned as they are.
fn round_decimal(d: &bson::Decimal128, places: i64, trunc: bool) -> Bson {
    const MAX_DIGITS: usize = 34;
    let Some((neg, coeff, exp)) = crate::num::decimal_parts(d) else {
        return Bson::Decimal128(*d);
    };
    let target = -places;
    let (coeff, exp) = if exp >= target {
        // Pad with zeros down to the target exponent (or to 34 digits).
        let want = usize::try_from(exp - target).unwrap_or(0);
        let pad = if coeff == "0" {
            want
        } else {
            want.min(MAX_DIGITS.saturating_sub(coeff.len()))
        };
        let exp = exp - i64::try_from(pad).unwrap_or(0);
        let coeff = if coeff == "0" {
            coeff
        } else {
            format!("{coeff}{}", "0".repeat(pad))
        };
        (coeff, exp)
    } else {
        let drop = usize::try_from(target - exp).unwrap_or(usize::MAX);
        let (kept, dropped) = if drop >= coeff.len() {
            ("", coeff.as_str())
        } else {
            coeff.split_at(coeff.len() - drop)
        };
        let mut k: u128 = kept.parse().unwrap_or(0);
        if !trunc && drop <= coeff.len() {
            let mut rest = dropped.bytes();
            let first = rest.next().unwrap_or(b'0');
            let tail_nonzero = rest.any(|b| b != b'0');
            let up = match first.cmp(&b'5') {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Less => false,
                std::cmp::Ordering::Equal => tail_nonzero || k % 2 == 1,
            };
            if up {
                k += 1;
            }
        }
        (k.to_string(), target)
    };
    let text = format!("{}{coeff}E{exp}", if neg { "-" } else { "" });
    match text.parse::<bson::Decimal128>() {
        Ok(v) => Bson::Decimal128(v),
        Err(_) => Bson::Decimal128(*d),
    }
}

fn binary_math(name: &str, a: &Option<Bson>, b: &Option<Bson>) -> R {
    if is_nullish(a) || is_nullish(b) {
        return Ok(Some(Bson::Null));
    }
    let (Some(x), Some(y)) = (num_of(a), num_of(b)) else {
        return Err(QueryError::loc(
            28762,
            format!(
                "{name} only supports numeric types, not {} and {}",
                tname(a),
                tname(b)
            ),
        ));
    };
    if name == "$log" {
        if x.as_f64() <= 0.0 || y.as_f64() <= 0.0 || y.as_f64() == 1.0 {
            return Err(QueryError::loc(
                28758,
                "$log's argument must be a positive number and base must be positive and not 1",
            ));
        }
        return Ok(Some(Bson::Double(x.as_f64().ln() / y.as_f64().ln())));
    }
    if x.is_zero() && y.as_f64() < 0.0 {
        return Err(QueryError::loc(
            28764,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    if let (Some(bi), Some(ei)) = (int_of(x), int_of(y)) {
        let both32 = matches!(x, Num::I32(_)) && matches!(y, Num::I32(_));
        // A negative exponent keeps an integer result only for a base of 1 or -1.
        if ei < 0 && (bi == 1 || bi == -1) {
            let r = if bi == 1 || ei % 2 == 0 { 1 } else { -1 };
            return Ok(Some(if both32 {
                Bson::Int32(r)
            } else {
                Bson::Int64(i64::from(r))
            }));
        }
        if ei >= 0 {
            if let Some(r) = u32::try_from(ei).ok().and_then(|e| bi.checked_pow(e)) {
                return Ok(Some(match i32::try_from(r) {
                    Ok(v) if both32 => Bson::Int32(v),
                    _ => Bson::Int64(r),
                }));
            }
        }
    }
    let r = x.as_f64().powf(y.as_f64());
    Ok(Some(
        if matches!(x, Num::Dec(_)) || matches!(y, Num::Dec(_)) {
            Num::Dec(crate::decimal::from_f64_result(r)).to_bson()
        } else {
            Bson::Double(r)
        },
    ))
}

fn int_of(n: Num) -> Option<i64> {
    match n {
        Num::I32(i) => Some(i64::from(i)),
        Num::I64(i) => Some(i),
        _ => None,
    }
}

fn concat(args: &[Option<Bson>]) -> R {
    let mut out = String::new();
    for a in args {
        match a {
            None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
            Some(Bson::String(s)) => out.push_str(s),
            other => {
                return Err(QueryError::loc(
                    16702,
                    format!("$concat only supports strings, not {}", tname(other)),
                ))
            }
        }
    }
    Ok(Some(Bson::String(out)))
}

/// Coerces a value to a string as `$toUpper`/`$toLower`/`$strcasecmp` do.
fn string_like(name: &str, v: &Option<Bson>) -> Result<String, QueryError> {
    Ok(match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => String::new(),
        Some(Bson::String(s)) | Some(Bson::Symbol(s)) => s.clone(),
        Some(Bson::DateTime(d)) => super::convert::date_to_iso(*d),
        Some(other) if Num::from_bson(other).is_some() => super::convert::to_string_value(other),
        Some(other) => {
            return Err(QueryError::loc(
                16007,
                format!(
                    "can't convert from BSON type {} to String in {name}",
                    type_name(other)
                ),
            ))
        }
    })
}

fn substr(name: &str, args: &[Option<Bson>]) -> R {
    let s = string_like(name, first(args))?;
    let start = num_of(args.get(1).unwrap_or(&None));
    let len = num_of(args.get(2).unwrap_or(&None));
    let (Some(start), Some(len)) = (start, len) else {
        return Err(QueryError::loc(
            16034,
            format!("{name}: starting index and length must be numeric"),
        ));
    };
    let start_f = start.as_f64();
    if start_f < 0.0 && name == "$substrCP" {
        return Err(QueryError::loc(
            34455,
            "$substrCP: starting index must be non-negative",
        ));
    }
    let start = if start_f < 0.0 {
        usize::MAX
    } else {
        start_f as usize
    };
    let len_f = len.as_f64();
    if name == "$substrCP" {
        if len_f < 0.0 {
            return Err(QueryError::loc(
                34456,
                "$substrCP: length must be a nonnegative integer.",
            ));
        }
        let out: String = s.chars().skip(start).take(len_f as usize).collect();
        return Ok(Some(Bson::String(out)));
    }
    if start >= s.len() {
        return Ok(Some(Bson::String(String::new())));
    }
    let end = if len_f < 0.0 {
        s.len()
    } else {
        start.saturating_add(len_f as usize).min(s.len())
    };
    if !s.is_char_boundary(start) {
        return Err(QueryError::loc(
            28656,
            "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
        ));
    }
    if !s.is_char_boundary(end) {
        return Err(QueryError::loc(
            28657,
            "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.",
        ));
    }
    Ok(Some(Bson::String(
        s.get(start..end).unwrap_or("").to_string(),
    )))
}

fn split(a: &Option<Bson>, b: &Option<Bson>) -> R {
    if is_nullish(a) {
        return Ok(Some(Bson::Null));
    }
    match (a, b) {
        (Some(Bson::String(s)), Some(Bson::String(sep))) => {
            if sep.is_empty() {
                return Err(QueryError::loc(40087, "$split requires a non-empty separator"));
            }
            Ok(Some(Bson::Array(s.split(sep.as_str()).map(|p| Bson::String(p.into())).collect())))
        }
        (Some(Bson::String(_)), _) => Err(QueryError::loc(40086, format!("$split requires a string as the second argument, found: {}", tname(b)))),
        _ => Err(QueryError::loc(40085, format!("$split requires an expression that evaluates to a string as a first argument, found: {}", tname(a)))),
    }
}
