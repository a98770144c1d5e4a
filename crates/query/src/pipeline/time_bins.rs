//! The fixed-width bins of a `$dateTrunc` in UTC (units up to a day, any `binSize`):
//! every date of one bin truncates to the bin's start, so a grouping may key its rows by
//! the bin and evaluate the `_id` expression once per bin, on the bin's start.

use bson::{Bson, Document};

/// `$dateTrunc`'s reference point for bins (2000-01-01T00:00:00Z).
pub const REFERENCE_MS: i64 = 946_684_800_000;

/// Width in ms of a fixed-width `$dateTrunc` unit.
pub fn unit_ms(unit: &str) -> Option<i64> {
    Some(match unit {
        "millisecond" => 1,
        "second" => 1000,
        "minute" => 60_000,
        "hour" => 3_600_000,
        "day" => 86_400_000,
        _ => return None,
    })
}

/// Whether a `$dateTrunc` spec truncates in UTC (no timezone, or UTC named): no
/// daylight-saving shifts, so its bins are fixed widths and its result never decreases
/// as the date grows.
pub fn in_utc(date_trunc: &Document) -> bool {
    match date_trunc.get("timezone") {
        None => true,
        Some(Bson::String(z)) => z == "UTC" || z == "GMT" || z == "Z",
        _ => false,
    }
}

/// The field path and bin width (ms) of an expression that is exactly
/// `{$dateTrunc: {date: "$<path>", unit, binSize?, timezone?}}` with fixed-width bins;
/// `None` for any other expression.
pub fn fixed_date_trunc(expr: &Document) -> Option<(&str, i64)> {
    let Some(Bson::Document(t)) = expr.get("$dateTrunc") else {
        return None;
    };
    let path = t.get_str("date").ok()?.strip_prefix('$')?;
    let plain = expr.len() == 1
        && !path.starts_with('$')
        && in_utc(t)
        && t.keys()
            .all(|k| matches!(k.as_str(), "date" | "unit" | "binSize" | "timezone"));
    if !plain {
        return None;
    }
    let unit = unit_ms(t.get_str("unit").ok()?)?;
    let size = match t.get("binSize") {
        None => 1,
        Some(Bson::Int32(n)) if *n > 0 => i64::from(*n),
        Some(Bson::Int64(n)) if *n > 0 => *n,
        _ => return None,
    };
    Some((path, unit.checked_mul(size)?))
}

/// The start of the bin of `width` ms holding the date `ms` (`None` on overflow).
pub fn bin_start(ms: i64, width: i64) -> Option<i64> {
    if width == 1 {
        return Some(ms);
    }
    let offset = ms.checked_sub(REFERENCE_MS)?.div_euclid(width);
    REFERENCE_MS.checked_add(offset.checked_mul(width)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use bson::{doc, DateTime};

    #[test]
    fn every_date_of_a_bin_truncates_to_the_bin_start() {
        let specs = [
            doc! {"$dateTrunc": {"date": "$t", "unit": "hour"}},
            doc! {"$dateTrunc": {"date": "$t", "unit": "minute", "binSize": 7}},
            doc! {"$dateTrunc": {"date": "$t", "unit": "day", "binSize": 3_i64, "timezone": "UTC"}},
            doc! {"$dateTrunc": {"date": "$t", "unit": "second", "binSize": 45}},
        ];
        for spec in &specs {
            let (path, width) = fixed_date_trunc(spec).expect("fixed width");
            assert_eq!(path, "t");
            let e = Expr::parse(&Bson::Document(spec.clone())).expect("expr");
            for ms in [
                0_i64,
                -1,
                1_451_606_400_123,
                -86_400_001,
                946_684_800_000,
                4_000_000_000_000,
            ] {
                let want = e
                    .eval(&doc! {"t": DateTime::from_millis(ms)})
                    .expect("eval");
                let start = bin_start(ms, width).expect("in range");
                assert_eq!(
                    want,
                    Bson::DateTime(DateTime::from_millis(start)),
                    "{spec} {ms}"
                );
            }
        }
    }

    #[test]
    fn other_truncations_have_no_fixed_bins() {
        for spec in [
            doc! {"$dateTrunc": {"date": "$t", "unit": "month"}},
            doc! {"$dateTrunc": {"date": "$t", "unit": "hour", "timezone": "+01:00"}},
            doc! {"$dateTrunc": {"date": "$t", "unit": "week", "startOfWeek": "monday"}},
            doc! {"$dateTrunc": {"date": "$$NOW", "unit": "hour"}},
            doc! {"$dateTrunc": {"date": "$t", "unit": "hour", "binSize": 0}},
            doc! {"$dateTrunc": {"date": "$t", "unit": "hour"}, "x": 1},
        ] {
            assert_eq!(fixed_date_trunc(&spec), None, "{spec}");
        }
    }
}
