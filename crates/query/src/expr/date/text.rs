//! Text and parts conversions of dates: `$dateToString` (MongoDB format
//! specifiers), `$dateFromString` (ISO-8601 forms or a format), `$dateToParts`
//! and `$dateFromParts`.

use bson::{Bson, Document};
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, Timelike};

use super::{
    integral, is_nullish, midnight, mkdate, require_date, sunday_week, zone_of, Zone, R, UTC,
};
use crate::compare::type_name;
use crate::error::QueryError;
use crate::expr::Named;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Formats a UTC instant with a MongoDB format string.
pub(crate) fn format_date(ms: i64, fmt: &str, zone: Zone) -> Result<String, QueryError> {
    let d = zone.local(ms)?;
    let off = zone.offset_at(ms);
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else {
            return Err(QueryError::loc(
                18535,
                "Unmatched '%' at end of format string",
            ));
        };
        match spec {
            'Y' | 'G' => {
                let y = if spec == 'Y' {
                    d.year()
                } else {
                    d.iso_week().year()
                };
                if !(0..=9999).contains(&y) {
                    return Err(QueryError::loc(
                        18537,
                        format!("Could not convert date to string: date component was outside the supported range of 0-9999: {y}"),
                    ));
                }
                out.push_str(&format!("{y:04}"));
            }
            'm' => out.push_str(&format!("{:02}", d.month())),
            // Month names (new in 7.0), in English title case.
            'b' | 'B' => {
                let name = MONTHS.get(d.month0() as usize).copied().unwrap_or_default();
                out.push_str(if spec == 'b' {
                    name.get(..3).unwrap_or(name)
                } else {
                    name
                });
            }
            'd' => out.push_str(&format!("{:02}", d.day())),
            'H' => out.push_str(&format!("{:02}", d.hour())),
            'M' => out.push_str(&format!("{:02}", d.minute())),
            'S' => out.push_str(&format!("{:02}", d.second())),
            'L' => out.push_str(&format!("{:03}", d.nanosecond() / 1_000_000)),
            'j' => out.push_str(&format!("{:03}", d.ordinal())),
            'w' => out.push_str(&d.weekday().number_from_sunday().to_string()),
            'u' => out.push_str(&d.weekday().number_from_monday().to_string()),
            'U' => out.push_str(&format!("{:02}", sunday_week(&d))),
            'V' => out.push_str(&format!("{:02}", d.iso_week().week())),
            'Z' => out.push_str(&(off / 60).to_string()),
            'z' => {
                let mins = off.abs() / 60;
                out.push_str(&format!(
                    "{}{:02}{:02}",
                    if off < 0 { '-' } else { '+' },
                    mins / 60,
                    mins % 60
                ));
            }
            '%' => out.push('%'),
            other => {
                return Err(QueryError::loc(
                    18536,
                    format!("Invalid format character '%{other}' in format string"),
                ))
            }
        }
    }
    Ok(out)
}

/// `$dateToString`.
pub(super) fn date_to_string(a: &Named) -> R {
    let date = a.get("date");
    if is_nullish(&date) {
        return Ok(a.get_present("onNull").or(Some(Bson::Null)));
    }
    let fmt = match a.get("format") {
        None => "%Y-%m-%dT%H:%M:%S.%LZ".to_string(),
        Some(Bson::String(s)) => s,
        Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(other) => {
            return Err(QueryError::loc(
                18533,
                format!(
                    "$dateToString requires that 'format' be a string, found: {} with value {}",
                    type_name(&other),
                    crate::error::render(&other)
                ),
            ))
        }
    };
    let Some(zone) = zone_of(&a.get("timezone"))? else {
        return Ok(Some(Bson::Null));
    };
    let ms = date.as_ref().map(require_date).transpose()?.unwrap_or(0);
    Ok(Some(Bson::String(format_date(ms, &fmt, zone)?)))
}

/// Translates a MongoDB `$dateFromString` format to a chrono format.
fn chrono_format(fmt: &str) -> Result<String, QueryError> {
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let spec = chars
            .next()
            .ok_or_else(|| QueryError::loc(18535, "Unmatched '%' at end of format string"))?;
        out.push_str(match spec {
            'Y' => "%Y",
            'm' => "%m",
            'd' => "%d",
            'H' => "%H",
            'M' => "%M",
            'S' => "%S",
            'L' => "%3f",
            'j' => "%j",
            'z' => "%z",
            'Z' => "%z",
            'G' => "%G",
            'V' => "%V",
            'u' => "%u",
            '%' => "%%",
            other => {
                return Err(QueryError::loc(
                    18536,
                    format!("Invalid format character '%{other}' in format string"),
                ))
            }
        });
    }
    Ok(out)
}

/// Whether a zone is UTC (the default when no `timezone` is given).
fn is_utc(zone: Zone) -> bool {
    matches!(zone, Zone::Fixed(f) if f.local_minus_utc() == 0)
}

/// A date string that carries its own GMT offset (or `Z`) cannot be combined with a
/// `timezone` argument other than UTC.
fn offset_with_zone(zone: Zone) -> Result<(), QueryError> {
    if is_utc(zone) {
        Ok(())
    } else {
        Err(QueryError::ConversionFailure(
            "you cannot pass in a date/time string with GMT offset together with a timezone argument"
                .into(),
        ))
    }
}

/// Parses a date string; returns the UTC instant.
fn parse_date_string(s: &str, fmt: Option<&str>, zone: Zone) -> Result<i64, QueryError> {
    let fail = || QueryError::ConversionFailure(format!("Error parsing date string '{s}'"));
    if let Some(fmt) = fmt {
        let cf = chrono_format(fmt)?;
        let mut p = chrono::format::Parsed::new();
        chrono::format::parse(&mut p, s, chrono::format::StrftimeItems::new(&cf))
            .map_err(|_| fail())?;
        let date = p.to_naive_date().map_err(|_| fail())?;
        // Time parts not in the format are zero.
        let hour = p.hour_div_12().unwrap_or(0) * 12 + p.hour_mod_12().unwrap_or(0);
        let time = chrono::NaiveTime::from_hms_nano_opt(
            hour,
            p.minute().unwrap_or(0),
            p.second().unwrap_or(0),
            p.nanosecond().unwrap_or(0),
        )
        .ok_or_else(fail)?;
        let local = date.and_time(time);
        return match p.offset() {
            Some(off) => {
                offset_with_zone(zone)?;
                Ok(local.and_utc().timestamp_millis() - i64::from(off) * 1000)
            }
            None => Ok(zone.to_utc(local)),
        };
    }
    let t = s.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        offset_with_zone(zone)?;
        return Ok(d.timestamp_millis());
    }
    for f in ["%Y-%m-%dT%H:%M:%S%.f%#z", "%Y-%m-%d %H:%M:%S%.f%#z"] {
        if let Ok(d) = DateTime::parse_from_str(t, f) {
            offset_with_zone(zone)?;
            return Ok(d.timestamp_millis());
        }
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
        "%Y/%m/%d %H:%M:%S%.f",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(t, f) {
            return Ok(zone.to_utc(d));
        }
    }
    for f in ["%Y-%m-%d", "%Y/%m/%d", "%B %d, %Y", "%b %d, %Y"] {
        if let Ok(d) = NaiveDate::parse_from_str(t, f) {
            return Ok(zone.to_utc(midnight(d)));
        }
    }
    Err(fail())
}

/// Parses a date string the way `$toDate` does (ISO-8601 forms, UTC unless the
/// string carries an offset).
pub(in crate::expr) fn parse_date_utc(s: &str) -> Result<i64, QueryError> {
    parse_date_string(s, None, UTC)
}

/// `$dateFromString`.
pub(super) fn date_from_string(a: &Named) -> R {
    let s = a.get("dateString");
    let run = || -> R {
        let s = match &s {
            None | Some(Bson::Null) | Some(Bson::Undefined) => {
                return Ok(a.get_present("onNull").or(Some(Bson::Null)))
            }
            Some(Bson::String(s)) => s.clone(),
            Some(other) => {
                return Err(QueryError::ConversionFailure(format!(
                "$dateFromString requires that 'dateString' be a string, found: {} with value {}",
                type_name(other),
                crate::error::render(other)
            )))
            }
        };
        let fmt = match a.get("format") {
            None => None,
            Some(Bson::String(f)) => Some(f),
            Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
            Some(other) => {
                return Err(QueryError::loc(
                    40684,
                    format!(
                    "$dateFromString requires that 'format' be a string, found: {} with value {}",
                    type_name(&other),
                    crate::error::render(&other)
                ),
                ))
            }
        };
        let Some(zone) = zone_of(&a.get("timezone"))? else {
            return Ok(Some(Bson::Null));
        };
        Ok(Some(mkdate(parse_date_string(&s, fmt.as_deref(), zone)?)))
    };
    match run() {
        Err(QueryError::ConversionFailure(m)) => match a.get_present("onError") {
            Some(v) => Ok(Some(v)),
            None => Err(QueryError::ConversionFailure(m)),
        },
        other => other,
    }
}

/// `$dateToParts`.
pub(super) fn date_to_parts(a: &Named) -> R {
    let date = a.get("date");
    if is_nullish(&date) {
        return Ok(Some(Bson::Null));
    }
    let Some(zone) = zone_of(&a.get("timezone"))? else {
        return Ok(Some(Bson::Null));
    };
    let iso = match a.get("iso8601") {
        None => false,
        Some(Bson::Boolean(b)) => b,
        Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(other) => {
            return Err(QueryError::loc(
                40521,
                format!(
                    "iso8601 must evaluate to a bool, found {}",
                    type_name(&other)
                ),
            ))
        }
    };
    let ms = date.as_ref().map(require_date).transpose()?.unwrap_or(0);
    let d = zone.local(ms)?;
    let i = |n: u32| Bson::Int32(i32::try_from(n).unwrap_or(0));
    let mut out = Document::new();
    if iso {
        out.insert("isoWeekYear", d.iso_week().year());
        out.insert("isoWeek", i(d.iso_week().week()));
        out.insert("isoDayOfWeek", i(d.weekday().number_from_monday()));
    } else {
        out.insert("year", d.year());
        out.insert("month", i(d.month()));
        out.insert("day", i(d.day()));
    }
    out.insert("hour", i(d.hour()));
    out.insert("minute", i(d.minute()));
    out.insert("second", i(d.second()));
    out.insert("millisecond", i(d.nanosecond() / 1_000_000));
    Ok(Some(Bson::Document(out)))
}

/// `$dateFromParts`.
pub(super) fn date_from_parts(a: &Named) -> R {
    let iso = a.has("isoWeekYear");
    if !iso && !a.has("year") {
        return Err(QueryError::loc(
            40516,
            "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
        ));
    }
    let natural = ["year", "month", "day"].iter().any(|k| a.has(k));
    let iso_part = ["isoWeekYear", "isoWeek", "isoDayOfWeek"]
        .iter()
        .any(|k| a.has(k));
    if (a.has("year") && iso_part) || (iso && natural) {
        return Err(QueryError::loc(
            40489,
            "$dateFromParts does not allow mixing natural dates with ISO dates",
        ));
    }
    let keys: &[(&str, i64)] = if iso {
        &[
            ("isoWeekYear", 1),
            ("isoWeek", 1),
            ("isoDayOfWeek", 1),
            ("hour", 0),
            ("minute", 0),
            ("second", 0),
            ("millisecond", 0),
        ]
    } else {
        &[
            ("year", 1),
            ("month", 1),
            ("day", 1),
            ("hour", 0),
            ("minute", 0),
            ("second", 0),
            ("millisecond", 0),
        ]
    };
    let mut vals = [0i64; 7];
    for (slot, (k, default)) in vals.iter_mut().zip(keys) {
        *slot = match a.get(k) {
            // A part given but evaluating to missing (`"$nope"`) is null, as MongoDB.
            None if a.has(k) => return Ok(Some(Bson::Null)),
            None => *default,
            Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
            Some(v) => integral(&v).ok_or_else(|| {
                QueryError::loc(
                    40515,
                    format!(
                        "'{k}' must evaluate to an integer, found {} with value {}",
                        type_name(&v),
                        crate::error::render(&v)
                    ),
                )
            })?,
        };
        // Years 1..=9999; seconds and milliseconds carry over unbounded; the other
        // parts within a 16-bit range.
        if *k == "year" || *k == "isoWeekYear" {
            if !(1..=9999).contains(slot) {
                return Err(QueryError::loc(
                    if *k == "year" { 40523 } else { 31095 },
                    format!(
                        "'{k}' must evaluate to an integer in the range 1 to 9999, found {slot}"
                    ),
                ));
            }
        } else if *k != "second" && *k != "millisecond" && !(-32768..=32767).contains(slot) {
            return Err(QueryError::loc(
                31034,
                format!("'{k}' must evaluate to a value in the range [-32768, 32767]; value {slot} is not in range"),
            ));
        }
    }
    let Some(zone) = zone_of(&a.get("timezone"))? else {
        return Ok(Some(Bson::Null));
    };
    let range = || QueryError::bad("$dateFromParts: date out of range");
    let year = i32::try_from(vals[0]).map_err(|_| range())?;
    let base = if iso {
        NaiveDate::from_isoywd_opt(year, 1, chrono::Weekday::Mon)
            .ok_or_else(range)?
            .checked_add_signed(Duration::days((vals[1] - 1) * 7 + (vals[2] - 1)))
            .ok_or_else(range)?
    } else {
        let jan = NaiveDate::from_ymd_opt(year, 1, 1).ok_or_else(range)?;
        let months = vals[1] - 1;
        let jan = if months >= 0 {
            jan.checked_add_months(chrono::Months::new(months as u32))
        } else {
            jan.checked_sub_months(chrono::Months::new(months.unsigned_abs() as u32))
        }
        .ok_or_else(range)?;
        jan.checked_add_signed(Duration::days(vals[2] - 1))
            .ok_or_else(range)?
    };
    let overflow = || {
        QueryError::bad(
            "Overflow casting from a lower-precision duration to a higher-precision duration",
        )
    };
    let offsets = [
        Duration::try_hours(vals[3]),
        Duration::try_minutes(vals[4]),
        Duration::try_seconds(vals[5]),
        Duration::try_milliseconds(vals[6]),
    ];
    let mut local = midnight(base);
    for d in offsets {
        local = local
            .checked_add_signed(d.ok_or_else(overflow)?)
            .ok_or_else(overflow)?;
    }
    Ok(Some(mkdate(zone.to_utc(local))))
}
