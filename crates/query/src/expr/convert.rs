//! Array, type-conversion and date expression operators (`$size`, `$in`,
//! `$toInt`, `$toString`, `$type`, `$year`, ...). Dates are evaluated in UTC.

use bson::{Bson, Document};

use super::{is_nullish, tname, R};
use crate::compare::{type_name, values_equal};
use crate::error::QueryError;
use crate::num::Num;

/// Formats a date as MongoDB's ISO-8601 string (`2020-01-02T03:04:05.678Z`).
pub(super) fn date_to_iso(d: bson::DateTime) -> String {
    let p = Parts::from_millis(d.timestamp_millis());
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        p.year, p.month, p.day, p.hour, p.minute, p.second, p.millis
    )
}

/// Calendar fields of a UTC instant.
struct Parts {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    millis: i64,
}

impl Parts {
    fn from_millis(ms: i64) -> Parts {
        let days = ms.div_euclid(86_400_000);
        let rem = ms.rem_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        Parts {
            year,
            month,
            day,
            hour: rem / 3_600_000,
            minute: rem / 60_000 % 60,
            second: rem / 1000 % 60,
            millis: rem % 1000,
        }
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Merges documents left to right (`$mergeObjects`).
fn merge_objects(args: &[Option<Bson>]) -> R {
    let mut out = Document::new();
    for a in args {
        match a {
            None | Some(Bson::Null) | Some(Bson::Undefined) => {}
            Some(Bson::Document(d)) => {
                for (k, v) in d {
                    out.insert(k.clone(), v.clone());
                }
            }
            other => {
                return Err(QueryError::loc(
                    40400,
                    format!(
                        "$mergeObjects requires object inputs, but input {} is of type {}",
                        other.as_ref().map(crate::error::render).unwrap_or_default(),
                        tname(other)
                    ),
                ))
            }
        }
    }
    Ok(Some(Bson::Document(out)))
}

#[cfg(test)]
/// (year, month, day) to days since 1970-01-01.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses a decimal string keeping its digits (`"1.50"` stays `1.50`).
fn parse_decimal(s: &str) -> Option<Bson> {
    s.parse::<bson::Decimal128>().ok().map(Bson::Decimal128)
}

/// `$toDecimal`: integers and dates exactly, a double rounded to 15 significant
/// digits (`2.5` is `2.50000000000000`, as MongoDB's documentation shows), a
/// string with the digits it has.
fn to_decimal(v: &Bson) -> Result<Bson, QueryError> {
    let exact = |i: i64| parse_decimal(&i.to_string()).unwrap_or(Bson::Null);
    Ok(match v {
        Bson::Decimal128(_) => v.clone(),
        Bson::Boolean(b) => exact(i64::from(*b)),
        Bson::Int32(i) => exact(i64::from(*i)),
        Bson::Int64(i) => exact(*i),
        Bson::DateTime(d) => exact(d.timestamp_millis()),
        Bson::Double(f) => crate::decimal::to_bson(crate::decimal::from_f64(*f)),
        Bson::String(s) => parse_decimal(s).ok_or_else(|| {
            QueryError::ConversionFailure(format!(
                "Failed to parse number '{s}' in $convert with no onError value"
            ))
        })?,
        other => return Err(conv_err(other, "decimal")),
    })
}

/// `$toString` of a scalar value.
pub(super) fn to_string_value(v: &Bson) -> String {
    match v {
        Bson::String(s) | Bson::Symbol(s) => s.clone(),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Double(f) => {
            if f.is_nan() {
                "NaN".into()
            } else if f.is_infinite() {
                if *f > 0.0 { "Infinity" } else { "-Infinity" }.into()
            } else if *f == 0.0 && f.is_sign_negative() {
                "-0".into()
            } else {
                crate::num::format_g(*f)
            }
        }
        Bson::Decimal128(d) => d.to_string(),
        Bson::Boolean(b) => b.to_string(),
        Bson::ObjectId(o) => o.to_hex(),
        Bson::DateTime(d) => date_to_iso(*d),
        other => crate::error::render(other),
    }
}

fn conv_err(from: &Bson, to: &str) -> QueryError {
    QueryError::ConversionFailure(format!(
        "Unsupported conversion from {} to {to} in $convert with no onError value",
        type_name(from)
    ))
}

pub(super) fn eval_more(name: &str, args: &[Option<Bson>]) -> R {
    let a0 = args.first().unwrap_or(&None);
    let a1 = args.get(1).unwrap_or(&None);
    match name {
        "$size" => match a0 {
            Some(Bson::Array(a)) => Ok(Some(Bson::Int32(
                i32::try_from(a.len()).unwrap_or(i32::MAX),
            ))),
            other => Err(QueryError::loc(
                17124,
                format!(
                    "The argument to $size must be an array. Type of argument was: {}",
                    tname(other)
                ),
            )),
        },
        "$arrayElemAt" => {
            if is_nullish(a0) || is_nullish(a1) {
                return Ok(Some(Bson::Null));
            }
            let Some(Bson::Array(items)) = a0 else {
                return Err(QueryError::loc(
                    28689,
                    format!(
                        "$arrayElemAt's first argument must be an array, but is {}",
                        tname(a0)
                    ),
                ));
            };
            let idx = a1
                .as_ref()
                .and_then(Num::from_bson)
                .and_then(|n| n.as_exact_i64());
            let Some(idx) = idx else {
                return Err(QueryError::loc(
                    28690,
                    format!(
                        "$arrayElemAt's second argument must be a numeric value, but is {}",
                        tname(a1)
                    ),
                ));
            };
            let len = items.len() as i64;
            let pos = if idx < 0 { len + idx } else { idx };
            Ok(usize::try_from(pos)
                .ok()
                .and_then(|p| items.get(p))
                .cloned())
        }
        "$first" | "$last" => match a0 {
            None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
            Some(Bson::Array(items)) => Ok(if name == "$first" {
                items.first()
            } else {
                items.last()
            }
            .cloned()),
            other => Err(QueryError::loc(
                28689,
                format!(
                    "{name}'s argument must be an array, but is {}",
                    tname(other)
                ),
            )),
        },
        "$in" => match a1 {
            Some(Bson::Array(items)) => {
                let v = a0.clone().unwrap_or(Bson::Undefined);
                let found = a0.is_some() && items.iter().any(|i| values_equal(i, &v));
                Ok(Some(Bson::Boolean(found)))
            }
            other => Err(QueryError::loc(
                40081,
                format!(
                    "$in requires an array as a second argument, found: {}",
                    tname(other)
                ),
            )),
        },
        "$isArray" => Ok(Some(Bson::Boolean(matches!(a0, Some(Bson::Array(_)))))),
        "$isNumber" => Ok(Some(Bson::Boolean(
            a0.as_ref().and_then(Num::from_bson).is_some(),
        ))),
        "$concatArrays" => {
            let mut out = Vec::new();
            for a in args {
                match a {
                    None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
                    Some(Bson::Array(items)) => out.extend(items.iter().cloned()),
                    other => {
                        return Err(QueryError::loc(
                            28664,
                            format!("$concatArrays only supports arrays, not {}", tname(other)),
                        ))
                    }
                }
            }
            Ok(Some(Bson::Array(out)))
        }
        "$reverseArray" => match a0 {
            None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
            Some(Bson::Array(items)) => {
                Ok(Some(Bson::Array(items.iter().rev().cloned().collect())))
            }
            other => Err(QueryError::loc(
                34435,
                format!(
                    "The argument to $reverseArray must be an array, but was of type: {}",
                    tname(other)
                ),
            )),
        },
        "$mergeObjects" => merge_objects(args),
        "$type" => Ok(Some(Bson::String(tname(a0).into()))),
        "$toString" | "$toInt" | "$toLong" | "$toDouble" | "$toDecimal" | "$toDate" | "$toBool"
        | "$toObjectId" => convert(name, a0),
        _ if super::date::PART_OPS.contains(&name) => super::date::date_part(name, a0, &None),
        _ => super::arrays::eval_positional(name, args),
    }
}

pub(super) fn convert(name: &str, v: &Option<Bson>) -> R {
    let Some(v) = v
        .as_ref()
        .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
    else {
        return Ok(Some(Bson::Null));
    };
    let out = match name {
        "$toString" => match v {
            Bson::Document(_)
            | Bson::Array(_)
            | Bson::Binary(_)
            | Bson::RegularExpression(_)
            | Bson::MinKey
            | Bson::MaxKey => return Err(conv_err(v, "string")),
            other => Bson::String(to_string_value(other)),
        },
        "$toBool" => match v {
            Bson::String(_) | Bson::Symbol(_) => Bson::Boolean(true),
            other => Bson::Boolean(super::truthy(other)),
        },
        "$toDecimal" => to_decimal(v)?,
        "$toDouble" => {
            let f = match v {
                Bson::Boolean(b) => f64::from(u8::from(*b)),
                Bson::DateTime(d) => d.timestamp_millis() as f64,
                Bson::String(s) => s.trim().parse::<f64>().map_err(|_| {
                    QueryError::ConversionFailure(format!(
                        "Failed to parse number '{s}' in $convert with no onError value"
                    ))
                })?,
                other => Num::from_bson(other)
                    .ok_or_else(|| conv_err(other, "double"))?
                    .as_f64(),
            };
            Bson::Double(f)
        }
        "$toInt" | "$toLong" => {
            let i: i64 = match v {
                Bson::Boolean(b) => i64::from(*b),
                Bson::DateTime(d) if name == "$toLong" => d.timestamp_millis(),
                Bson::String(s) => s.trim().parse::<i64>().map_err(|_| {
                    QueryError::ConversionFailure(format!(
                        "Failed to parse number '{s}' in $convert with no onError value"
                    ))
                })?,
                other => match Num::from_bson(other) {
                    Some(Num::I32(i)) => i64::from(i),
                    Some(Num::I64(i)) => i,
                    Some(n) => {
                        let f = n.as_f64().trunc();
                        if !f.is_finite() || f.abs() > 9.2e18 {
                            return Err(QueryError::ConversionFailure(format!(
                                "Conversion would overflow target type in $convert with no onError value: {f}"
                            )));
                        }
                        f as i64
                    }
                    None => {
                        return Err(conv_err(
                            other,
                            if name == "$toInt" { "int" } else { "long" },
                        ))
                    }
                },
            };
            if name == "$toLong" {
                Bson::Int64(i)
            } else {
                Bson::Int32(i32::try_from(i).map_err(|_| {
                    QueryError::ConversionFailure(format!(
                        "Conversion would overflow target type in $convert with no onError value: {i}"
                    ))
                })?)
            }
        }
        "$toDate" => match v {
            Bson::DateTime(_) => v.clone(),
            Bson::ObjectId(o) => Bson::DateTime(bson::DateTime::from_millis(
                o.timestamp().timestamp_millis(),
            )),
            Bson::Timestamp(t) => {
                Bson::DateTime(bson::DateTime::from_millis(i64::from(t.time) * 1000))
            }
            Bson::String(s) => {
                Bson::DateTime(bson::DateTime::from_millis(super::date::parse_date_utc(s)?))
            }
            other => match Num::from_bson(other) {
                Some(Num::I32(_)) | None => return Err(conv_err(other, "date")),
                Some(Num::I64(i)) => Bson::DateTime(bson::DateTime::from_millis(i)),
                Some(n) => Bson::DateTime(bson::DateTime::from_millis(n.as_f64() as i64)),
            },
        },
        _ => match v {
            Bson::ObjectId(_) => v.clone(),
            Bson::String(s) => Bson::ObjectId(bson::oid::ObjectId::parse_str(s).map_err(|_| {
                QueryError::ConversionFailure(format!(
                    "Failed to parse objectId '{s}' in $convert with no onError value"
                ))
            })?),
            other => return Err(conv_err(other, "objectId")),
        },
    };
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_date_round_trips() {
        for days in [-800_000i64, -1, 0, 1, 11_016, 19_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }

    #[test]
    fn to_decimal_keeps_fifteen_digits_of_a_double() {
        let d = |v: Bson| match to_decimal(&v) {
            Ok(Bson::Decimal128(d)) => d.to_string(),
            other => format!("{other:?}"),
        };
        assert_eq!(d(Bson::Double(2.5)), "2.50000000000000");
        assert_eq!(d(Bson::Double(0.1)), "0.100000000000000");
        assert_eq!(d(Bson::Double(1e20)), "1.00000000000000E+20");
        assert_eq!(d(Bson::Boolean(true)), "1");
        assert_eq!(d(Bson::Int64(10000)), "10000");
        assert_eq!(d(Bson::String("-5.50".into())), "-5.50");
    }

    #[test]
    fn doubles_format_like_printf_g() {
        let cases = [
            (1e20, "1e+20"),
            (0.1, "0.1"),
            (2.5, "2.5"),
            (1e-7, "1e-07"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (1.23456789, "1.23457"),
            (0.0001, "0.0001"),
            (-99999.95, "-99999.9"),
            (999999.5, "1e+06"),
            (1.5e300, "1.5e+300"),
        ];
        for (f, want) in cases {
            assert_eq!(crate::num::format_g(f), want, "{f}");
        }
    }

    #[test]
    fn iso_format_has_millis_and_z() {
        let d = bson::DateTime::from_millis(1_577_934_245_678);
        assert_eq!(date_to_iso(d), "2020-01-02T03:04:05.678Z");
    }
}
