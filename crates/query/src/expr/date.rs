//! Date expression operators with time zones: the date-part operators
//! (`$year` ... `$isoDayOfWeek`, positional or `{date, timezone}` form),
//! `$dateTrunc`, `$dateAdd`, `$dateSubtract`, `$dateDiff`, `$dateToString`,
//! `$dateFromString`, `$dateToParts` and `$dateFromParts`. Time zones are Olson
//! names (via `chrono-tz`) or fixed `+hh:mm` / `+hhmm` / `+hh` offsets.

use bson::Bson;
use chrono::{
    DateTime, Datelike, Duration, FixedOffset, NaiveDate, NaiveDateTime, Offset, TimeZone,
    Timelike, Utc,
};

use super::{is_nullish, tname, Named, R};
#[cfg(test)]
use text::format_date;
pub(super) use text::parse_date_utc;
use text::{date_from_parts, date_from_string, date_to_parts, date_to_string};

mod text;
use crate::compare::type_name;
use crate::error::QueryError;
use crate::num::Num;

/// A resolved time zone.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Zone {
    Fixed(FixedOffset),
    Named(chrono_tz::Tz),
}

const UTC: Zone = Zone::Fixed(match FixedOffset::east_opt(0) {
    Some(z) => z,
    None => unreachable!(),
});

/// Parses a `+hh:mm`, `+hhmm` or `+hh` offset.
fn parse_offset(s: &str) -> Option<FixedOffset> {
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (h, m) = match digits.len() {
        2 => (digits.parse::<i32>().ok()?, 0),
        4 => (
            digits.get(..2)?.parse::<i32>().ok()?,
            digits.get(2..)?.parse::<i32>().ok()?,
        ),
        _ => return None,
    };
    if rest.contains(':') && rest.len() != 5 {
        return None;
    }
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
}

/// Resolves a time zone name; `Ok(None)` for a null/missing timezone value
/// (which makes the whole expression null).
pub(crate) fn zone_of(v: &Option<Bson>) -> Result<Option<Zone>, QueryError> {
    match v {
        None => Ok(Some(UTC)),
        Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::String(s)) => parse_zone(s).map(Some),
        Some(other) => Err(QueryError::loc(
            40517,
            format!(
                "timezone must evaluate to a string, found {}",
                type_name(other)
            ),
        )),
    }
}

/// Parses an Olson name or fixed offset.
pub(crate) fn parse_zone(s: &str) -> Result<Zone, QueryError> {
    if let Some(off) = parse_offset(s) {
        return Ok(Zone::Fixed(off));
    }
    if s == "Z" || s == "UTC" || s == "GMT" {
        return Ok(UTC);
    }
    s.parse::<chrono_tz::Tz>()
        .map(Zone::Named)
        .map_err(|_| QueryError::loc(40485, format!("unrecognized time zone identifier: \"{s}\"")))
}

impl Zone {
    /// Offset from UTC in seconds at the UTC instant `ms`.
    fn offset_at(self, ms: i64) -> i64 {
        let Some(utc) = DateTime::<Utc>::from_timestamp_millis(ms) else {
            return 0;
        };
        match self {
            Zone::Fixed(f) => i64::from(f.local_minus_utc()),
            Zone::Named(tz) => i64::from(
                tz.offset_from_utc_datetime(&utc.naive_utc())
                    .fix()
                    .local_minus_utc(),
            ),
        }
    }

    /// The local wall-clock time of the UTC instant `ms`.
    fn local(self, ms: i64) -> Result<NaiveDateTime, QueryError> {
        let local_ms = ms.saturating_add(self.offset_at(ms) * 1000);
        DateTime::<Utc>::from_timestamp_millis(local_ms)
            .map(|d| d.naive_utc())
            .ok_or_else(|| QueryError::bad("date out of range"))
    }

    /// The UTC instant of a local wall-clock time (earliest when ambiguous;
    /// times in a gap move forward by the gap).
    fn to_utc(self, local: NaiveDateTime) -> i64 {
        let naive_ms = local.and_utc().timestamp_millis();
        match self {
            Zone::Fixed(f) => naive_ms - i64::from(f.local_minus_utc()) * 1000,
            Zone::Named(tz) => match tz.from_local_datetime(&local).earliest() {
                Some(d) => d.timestamp_millis(),
                None => {
                    let off = tz.offset_from_utc_datetime(&local).fix().local_minus_utc();
                    naive_ms - i64::from(off) * 1000
                }
            },
        }
    }
}

/// Coerces a value to a UTC millisecond instant (dates, timestamps, ObjectIds).
fn date_ms(v: &Bson) -> Option<i64> {
    match v {
        Bson::DateTime(d) => Some(d.timestamp_millis()),
        Bson::Timestamp(t) => Some(i64::from(t.time) * 1000),
        Bson::ObjectId(o) => Some(o.timestamp().timestamp_millis()),
        _ => None,
    }
}

fn require_date(v: &Bson) -> Result<i64, QueryError> {
    date_ms(v).ok_or_else(|| {
        QueryError::loc(
            16006,
            format!("can't convert from BSON type {} to Date", type_name(v)),
        )
    })
}

fn mkdate(ms: i64) -> Bson {
    Bson::DateTime(bson::DateTime::from_millis(ms))
}

/// Week of the year with weeks starting on Sunday (0-53), as `%U`.
fn sunday_week(d: &NaiveDateTime) -> i64 {
    let ord0 = i64::from(d.ordinal0());
    let wd = i64::from(d.weekday().num_days_from_sunday());
    (ord0 + 7 - wd) / 7
}

fn part(name: &str, d: &NaiveDateTime) -> Option<i64> {
    Some(match name {
        "$year" => i64::from(d.year()),
        "$month" => i64::from(d.month()),
        "$dayOfMonth" => i64::from(d.day()),
        "$hour" => i64::from(d.hour()),
        "$minute" => i64::from(d.minute()),
        "$second" => i64::from(d.second()),
        "$millisecond" => i64::from(d.nanosecond() / 1_000_000),
        "$dayOfWeek" => i64::from(d.weekday().number_from_sunday()),
        "$dayOfYear" => i64::from(d.ordinal()),
        "$week" => sunday_week(d),
        "$isoWeek" => i64::from(d.iso_week().week()),
        "$isoWeekYear" => i64::from(d.iso_week().year()),
        "$isoDayOfWeek" => i64::from(d.weekday().number_from_monday()),
        _ => return None,
    })
}

/// Names of the date-part operators.
pub(super) const PART_OPS: &[&str] = &[
    "$year",
    "$month",
    "$dayOfMonth",
    "$hour",
    "$minute",
    "$second",
    "$millisecond",
    "$dayOfWeek",
    "$dayOfYear",
    "$week",
    "$isoWeek",
    "$isoWeekYear",
    "$isoDayOfWeek",
];

/// A date-part operator over a date and optional time zone.
pub(super) fn date_part(name: &str, date: &Option<Bson>, tz: &Option<Bson>) -> R {
    let Some(date) = date
        .as_ref()
        .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
    else {
        return Ok(Some(Bson::Null));
    };
    let Some(zone) = zone_of(tz)? else {
        return Ok(Some(Bson::Null));
    };
    let ms = require_date(date)?;
    let local = zone.local(ms)?;
    let n = part(name, &local).ok_or_else(|| {
        QueryError::InvalidPipelineOperator(format!("Unrecognized expression '{name}'"))
    })?;
    Ok(Some(Bson::Int32(i32::try_from(n).unwrap_or(0))))
}

/// Time units of `$dateTrunc`, `$dateAdd`, `$dateDiff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Unit {
    /// Parses a unit name.
    pub(crate) fn parse(s: &str) -> Option<Unit> {
        Some(match s {
            "millisecond" => Unit::Millisecond,
            "second" => Unit::Second,
            "minute" => Unit::Minute,
            "hour" => Unit::Hour,
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "quarter" => Unit::Quarter,
            "year" => Unit::Year,
            _ => return None,
        })
    }

    /// Fixed length in milliseconds for units up to a week.
    pub(crate) fn millis(self) -> Option<i64> {
        Some(match self {
            Unit::Millisecond => 1,
            Unit::Second => 1000,
            Unit::Minute => 60_000,
            Unit::Hour => 3_600_000,
            Unit::Day => 86_400_000,
            Unit::Week => 7 * 86_400_000,
            _ => return None,
        })
    }

    fn months(self) -> Option<i64> {
        match self {
            Unit::Month => Some(1),
            Unit::Quarter => Some(3),
            Unit::Year => Some(12),
            _ => None,
        }
    }
}

fn unit_arg(op: &str, v: &Option<Bson>) -> Result<Option<Unit>, QueryError> {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::String(s)) => Unit::parse(s).map(Some).ok_or_else(|| {
            QueryError::loc(
                5439014,
                format!("{op} parameter 'unit' value cannot be recognized as a time unit: {s}"),
            )
        }),
        Some(other) => Err(QueryError::loc(
            5439013,
            format!(
                "{op} requires 'unit' to be a string, but got {}",
                type_name(other)
            ),
        )),
    }
}

fn start_of_week(op: &str, v: &Option<Bson>) -> Result<Option<u32>, QueryError> {
    let days = [
        "sunday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
    ];
    match v {
        None => Ok(Some(0)),
        Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::String(s)) => {
            let l = s.to_ascii_lowercase();
            days.iter()
                .position(|d| *d == l || d.get(..3) == Some(l.as_str()))
                .map(|p| Some(p as u32))
                .ok_or_else(|| {
                    QueryError::loc(5439016, format!(
                        "{op} parameter 'startOfWeek' value cannot be recognized as a day of a week: {s}"
                    ))
                })
        }
        Some(other) => Err(QueryError::loc(
            5439015,
            format!(
                "{op} requires 'startOfWeek' to be a string, but got {}",
                type_name(other)
            ),
        )),
    }
}

fn midnight(d: NaiveDate) -> NaiveDateTime {
    d.and_hms_opt(0, 0, 0).unwrap_or_default()
}

/// Truncates a UTC instant to a bin of `bin` units in `zone`.
pub(crate) fn truncate(
    ms: i64,
    unit: Unit,
    bin: i64,
    zone: Zone,
    sow: u32,
) -> Result<i64, QueryError> {
    let local = zone.local(ms)?;
    let reference = midnight(NaiveDate::from_ymd_opt(2000, 1, 1).unwrap_or_default());
    if let Some(months) = unit.months() {
        let idx = (i64::from(local.year()) - 2000) * 12 + i64::from(local.month0());
        let span = months * bin;
        let start = idx.div_euclid(span) * span;
        let year = 2000 + start.div_euclid(12);
        let month = start.rem_euclid(12) + 1;
        let d = NaiveDate::from_ymd_opt(
            i32::try_from(year).map_err(|_| QueryError::bad("date out of range"))?,
            month as u32,
            1,
        )
        .ok_or_else(|| QueryError::bad("date out of range"))?;
        return Ok(zone.to_utc(midnight(d)));
    }
    let unit_ms = unit.millis().unwrap_or(1);
    let mut reference = reference;
    if unit == Unit::Week {
        // 2000-01-01 was a Saturday; move to the first `sow` day on or after it.
        let wd = reference.weekday().num_days_from_sunday();
        let ahead = (sow + 7 - wd) % 7;
        reference += Duration::days(i64::from(ahead));
    }
    let span = unit_ms.saturating_mul(bin);
    let local_ms = local.and_utc().timestamp_millis();
    let ref_ms = reference.and_utc().timestamp_millis();
    let start = ref_ms + (local_ms - ref_ms).div_euclid(span) * span;
    let start_local = DateTime::<Utc>::from_timestamp_millis(start)
        .map(|d| d.naive_utc())
        .ok_or_else(|| QueryError::bad("date out of range"))?;
    if matches!(
        unit,
        Unit::Millisecond | Unit::Second | Unit::Minute | Unit::Hour
    ) {
        if let Zone::Fixed(_) = zone {
            return Ok(zone.to_utc(start_local));
        }
        // Sub-day units: keep the same offset as the input instant.
        return Ok(start - zone.offset_at(ms) * 1000);
    }
    Ok(zone.to_utc(start_local))
}

/// Adds `amount` units to a UTC instant, calendar-aware in `zone` for units of a day or more.
pub(crate) fn add_units(ms: i64, unit: Unit, amount: i64, zone: Zone) -> Result<i64, QueryError> {
    let overflow = || QueryError::bad("$dateAdd overflowed");
    match unit {
        Unit::Millisecond | Unit::Second | Unit::Minute | Unit::Hour => {
            let step = unit.millis().unwrap_or(1);
            amount
                .checked_mul(step)
                .and_then(|d| ms.checked_add(d))
                .ok_or_else(overflow)
        }
        Unit::Day | Unit::Week => {
            let days = if unit == Unit::Week {
                amount.checked_mul(7).ok_or_else(overflow)?
            } else {
                amount
            };
            let local = zone.local(ms)?;
            let moved = local
                .checked_add_signed(Duration::try_days(days).ok_or_else(overflow)?)
                .ok_or_else(overflow)?;
            Ok(zone.to_utc(moved))
        }
        _ => {
            let months = amount
                .checked_mul(unit.months().unwrap_or(1))
                .ok_or_else(overflow)?;
            let local = zone.local(ms)?;
            let m =
                chrono::Months::new(u32::try_from(months.unsigned_abs()).map_err(|_| overflow())?);
            let moved = if months >= 0 {
                local.checked_add_months(m)
            } else {
                local.checked_sub_months(m)
            }
            .ok_or_else(overflow)?;
            Ok(zone.to_utc(moved))
        }
    }
}

fn diff_units(start: i64, end: i64, unit: Unit, zone: Zone, sow: u32) -> Result<i64, QueryError> {
    let (a, b) = (zone.local(start)?, zone.local(end)?);
    Ok(match unit {
        Unit::Year => i64::from(b.year()) - i64::from(a.year()),
        Unit::Quarter => {
            let q = |d: &NaiveDateTime| i64::from(d.year()) * 4 + i64::from(d.month0() / 3);
            q(&b) - q(&a)
        }
        Unit::Month => {
            let m = |d: &NaiveDateTime| i64::from(d.year()) * 12 + i64::from(d.month0());
            m(&b) - m(&a)
        }
        Unit::Week => {
            let ta = truncate(start, Unit::Week, 1, zone, sow)?;
            let tb = truncate(end, Unit::Week, 1, zone, sow)?;
            let da = zone.local(ta)?.date();
            let db = zone.local(tb)?.date();
            (db - da).num_days().div_euclid(7)
        }
        Unit::Day => (b.date() - a.date()).num_days(),
        other => {
            let u = other.millis().unwrap_or(1);
            let la = a.and_utc().timestamp_millis();
            let lb = b.and_utc().timestamp_millis();
            if other == Unit::Millisecond {
                end - start
            } else {
                lb.div_euclid(u) - la.div_euclid(u)
            }
        }
    })
}

fn integral(v: &Bson) -> Option<i64> {
    Num::from_bson(v).and_then(Num::as_exact_i64)
}

/// `$dateTrunc`.
fn date_trunc(a: &Named) -> R {
    let op = "$dateTrunc";
    let date = a.get("date");
    let Some(date_v) = date.as_ref().filter(|_| !is_nullish(&date)) else {
        return Ok(Some(Bson::Null));
    };
    let ms = date_ms(date_v).ok_or_else(|| {
        QueryError::loc(
            5166307,
            format!(
                "{op} requires 'date' to be a date, but got {}",
                type_name(date_v)
            ),
        )
    })?;
    let Some(unit) = unit_arg(op, &a.get("unit"))? else {
        return Ok(Some(Bson::Null));
    };
    let bin = match a.get("binSize") {
        None => 1,
        Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(v) => match integral(&v) {
            Some(b) if b > 0 => b,
            Some(b) => {
                return Err(QueryError::loc(
                    5439018,
                    format!("{op} requires 'binSize' to be greater than 0, but got value {b}"),
                ))
            }
            None => {
                return Err(QueryError::loc(
                    5439017,
                    format!(
                    "{op} requires 'binSize' to be a 64-bit integer, but got value '{}' of type {}",
                    crate::error::render(&v),
                    type_name(&v)
                ),
                ))
            }
        },
    };
    let Some(zone) = zone_of(&a.get("timezone"))? else {
        return Ok(Some(Bson::Null));
    };
    let sow = if unit == Unit::Week {
        match start_of_week(op, &a.get("startOfWeek"))? {
            Some(s) => s,
            None => return Ok(Some(Bson::Null)),
        }
    } else {
        0
    };
    Ok(Some(mkdate(truncate(ms, unit, bin, zone, sow)?)))
}

/// `$dateAdd` / `$dateSubtract`.
fn date_add(op: &str, a: &Named) -> R {
    let start = a.get("startDate");
    let amount = a.get("amount");
    let unit = a.get("unit");
    if is_nullish(&start) || is_nullish(&amount) || is_nullish(&unit) {
        return Ok(Some(Bson::Null));
    }
    let Some(zone) = zone_of(&a.get("timezone"))? else {
        return Ok(Some(Bson::Null));
    };
    let start = start.as_ref().and_then(date_ms).ok_or_else(|| {
        QueryError::loc(
            5166403,
            format!("{op} requires startDate to be convertible to a date"),
        )
    })?;
    let Some(unit) = unit_arg(op, &unit)? else {
        return Ok(Some(Bson::Null));
    };
    let amount = amount.as_ref().and_then(integral).ok_or_else(|| {
        QueryError::loc(
            5166405,
            format!("{op} expects integer amount of time units"),
        )
    })?;
    let amount = if op == "$dateSubtract" {
        amount.checked_neg().ok_or_else(|| {
            QueryError::loc(
                6045000,
                format!("invalid {op} 'amount' parameter value: {amount}"),
            )
        })?
    } else {
        amount
    };
    Ok(Some(mkdate(add_units(start, unit, amount, zone)?)))
}

/// `$dateDiff`.
fn date_diff(a: &Named) -> R {
    let op = "$dateDiff";
    let (s, e, u) = (a.get("startDate"), a.get("endDate"), a.get("unit"));
    if is_nullish(&s) || is_nullish(&e) || is_nullish(&u) {
        return Ok(Some(Bson::Null));
    }
    let Some(zone) = zone_of(&a.get("timezone"))? else {
        return Ok(Some(Bson::Null));
    };
    let get = |v: &Option<Bson>, which: &str| {
        v.as_ref().and_then(date_ms).ok_or_else(|| {
            QueryError::loc(
                5166307,
                format!("{op} requires '{which}' to be a date, but got {}", tname(v)),
            )
        })
    };
    let start = get(&s, "startDate")?;
    let end = get(&e, "endDate")?;
    let Some(unit) = unit_arg(op, &u)? else {
        return Ok(Some(Bson::Null));
    };
    let sow = match start_of_week(op, &a.get("startOfWeek"))? {
        Some(s) => s,
        None if unit == Unit::Week => return Ok(Some(Bson::Null)),
        None => 0,
    };
    Ok(Some(Bson::Int64(diff_units(start, end, unit, zone, sow)?)))
}

/// Named-argument date operators: allowed and required argument names.
pub(super) const NAMED: &[(&str, &[&str], &[&str])] = &[
    (
        "$dateTrunc",
        &["date", "unit", "binSize", "timezone", "startOfWeek"],
        &["date", "unit"],
    ),
    (
        "$dateAdd",
        &["startDate", "unit", "amount", "timezone"],
        &["startDate", "unit", "amount"],
    ),
    (
        "$dateSubtract",
        &["startDate", "unit", "amount", "timezone"],
        &["startDate", "unit", "amount"],
    ),
    (
        "$dateDiff",
        &["startDate", "endDate", "unit", "timezone", "startOfWeek"],
        &["startDate", "endDate", "unit"],
    ),
    (
        "$dateToString",
        &["date", "format", "timezone", "onNull"],
        &["date"],
    ),
    (
        "$dateFromString",
        &["dateString", "format", "timezone", "onError", "onNull"],
        &["dateString"],
    ),
    ("$dateToParts", &["date", "timezone", "iso8601"], &["date"]),
    (
        "$dateFromParts",
        &[
            "year",
            "month",
            "day",
            "hour",
            "minute",
            "second",
            "millisecond",
            "isoWeekYear",
            "isoWeek",
            "isoDayOfWeek",
            "timezone",
        ],
        &[],
    ),
];

/// Evaluates a named-argument date operator.
pub(super) fn eval_named(name: &str, a: &Named) -> R {
    match name {
        "$dateTrunc" => date_trunc(a),
        "$dateAdd" | "$dateSubtract" => date_add(name, a),
        "$dateDiff" => date_diff(a),
        "$dateToString" => date_to_string(a),
        "$dateFromString" => date_from_string(a),
        "$dateToParts" => date_to_parts(a),
        "$dateFromParts" => date_from_parts(a),
        _ if PART_OPS.contains(&name) => date_part(name, &a.get("date"), &a.get("timezone")),
        _ => Err(QueryError::InvalidPipelineOperator(format!(
            "Unrecognized expression '{name}'"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis()
    }

    #[test]
    fn zones_parse_olson_names_and_offsets() {
        assert!(matches!(parse_zone("+05:30"), Ok(Zone::Fixed(f)) if f.local_minus_utc() == 19800));
        assert!(matches!(parse_zone("-0400"), Ok(Zone::Fixed(f)) if f.local_minus_utc() == -14400));
        assert!(matches!(parse_zone("America/New_York"), Ok(Zone::Named(_))));
        assert_eq!(parse_zone("Nowhere/City").unwrap_err().code(), 40485);
    }

    #[test]
    fn truncation_by_units_bins_and_weeks() {
        let t = ms("2021-03-17T13:47:12.345Z");
        let z = parse_zone("UTC").unwrap();
        let tr = |u, b| truncate(t, u, b, z, 0).unwrap();
        assert_eq!(tr(Unit::Hour, 1), ms("2021-03-17T13:00:00Z"));
        assert_eq!(tr(Unit::Minute, 15), ms("2021-03-17T13:45:00Z"));
        assert_eq!(tr(Unit::Day, 1), ms("2021-03-17T00:00:00Z"));
        assert_eq!(tr(Unit::Month, 1), ms("2021-03-01T00:00:00Z"));
        assert_eq!(tr(Unit::Quarter, 1), ms("2021-01-01T00:00:00Z"));
        assert_eq!(tr(Unit::Year, 1), ms("2021-01-01T00:00:00Z"));
        // 2021-03-17 is a Wednesday: the Sunday week starts on the 14th, the Monday week on the 15th.
        assert_eq!(tr(Unit::Week, 1), ms("2021-03-14T00:00:00Z"));
        assert_eq!(
            truncate(t, Unit::Week, 1, z, 1).unwrap(),
            ms("2021-03-15T00:00:00Z")
        );
        let ny = parse_zone("America/New_York").unwrap();
        assert_eq!(
            truncate(t, Unit::Day, 1, ny, 0).unwrap(),
            ms("2021-03-17T04:00:00Z")
        );
    }

    #[test]
    fn adding_months_clamps_to_month_end_and_days_follow_dst() {
        let z = parse_zone("UTC").unwrap();
        assert_eq!(
            add_units(ms("2021-01-31T10:00:00Z"), Unit::Month, 1, z).unwrap(),
            ms("2021-02-28T10:00:00Z")
        );
        let ny = parse_zone("America/New_York").unwrap();
        // DST starts 2021-03-14 in New York: one calendar day is 23 hours.
        assert_eq!(
            add_units(ms("2021-03-13T17:00:00Z"), Unit::Day, 1, ny).unwrap(),
            ms("2021-03-14T16:00:00Z")
        );
    }

    #[test]
    fn formats_with_all_specifiers() {
        let t = ms("2021-01-03T04:05:06.007Z");
        let z = parse_zone("+05:30").unwrap();
        assert_eq!(
            format_date(t, "%Y-%m-%d %H:%M:%S.%L %j %w %u %U %V %G %Z %z %%", z).unwrap(),
            "2021-01-03 09:35:06.007 003 1 7 01 53 2020 330 +0530 %"
        );
        assert_eq!(format_date(t, "%Q", z).unwrap_err().code(), 18536);
        assert_eq!(format_date(t, "abc%", z).unwrap_err().code(), 18535);
    }

    #[test]
    fn diff_counts_unit_boundaries() {
        let z = parse_zone("UTC").unwrap();
        let a = ms("2020-12-31T23:59:59Z");
        let b = ms("2021-01-01T00:00:01Z");
        assert_eq!(diff_units(a, b, Unit::Year, z, 0).unwrap(), 1);
        assert_eq!(diff_units(a, b, Unit::Day, z, 0).unwrap(), 1);
        assert_eq!(diff_units(a, b, Unit::Second, z, 0).unwrap(), 2);
        assert_eq!(diff_units(a, b, Unit::Millisecond, z, 0).unwrap(), 2000);
    }
}
