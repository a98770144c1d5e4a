//! `$derivative` and `$integral` in `$setWindowFields`, with MongoDB's checks: the
//! sortBy values are dates with a `unit` and numbers without one, and the inputs at
//! the window's documents are numbers (a null or missing one is an error, not a gap).

use bson::Bson;

use crate::compare::type_name;
use crate::error::QueryError;
use crate::num::Num;

fn is_date(v: &Option<Bson>) -> bool {
    matches!(v, Some(Bson::DateTime(_)))
}

fn number(v: &Option<Bson>) -> Option<Num> {
    v.as_ref().and_then(Num::from_bson)
}

/// A sortBy value on the time axis: milliseconds for a date, the number otherwise.
fn position(v: &Option<Bson>) -> Option<f64> {
    match v {
        Some(Bson::DateTime(d)) => Some(d.timestamp_millis() as f64),
        other => number(other).map(Num::as_f64),
    }
}

/// `$derivative` of each document's window `[l, h)`: the slope between the
/// window's first and last documents, per `unit` (milliseconds) when given.
pub(super) fn derivative(
    keys: &[Option<Bson>],
    ys: &[Option<Bson>],
    ranges: &[(usize, usize)],
    unit_ms: Option<i64>,
) -> Result<Vec<Option<Bson>>, QueryError> {
    let mut out = Vec::with_capacity(ranges.len());
    for &(l, h) in ranges {
        if h <= l {
            out.push(Some(Bson::Null));
            continue;
        }
        let (a, b) = (l, h - 1);
        let (ta, tb) = (&keys[a], &keys[b]);
        if unit_ms.is_some() {
            if !(is_date(ta) && is_date(tb)) {
                return Err(QueryError::loc(
                    5624900,
                    "$derivative with 'unit' expects the sortBy field to be a Date",
                ));
            }
        } else {
            if is_date(ta) || is_date(tb) {
                return Err(QueryError::loc(
                    5624901,
                    "$derivative where the sortBy is a Date requires an 'unit'",
                ));
            }
            if number(ta).is_none() || number(tb).is_none() {
                return Err(QueryError::loc(
                    5624902,
                    "$derivative (with no 'unit') expects the sortBy field to be numeric",
                ));
            }
        }
        let (ya, yb) = (&ys[a], &ys[b]);
        let nullish = |v: &Option<Bson>| matches!(v, None | Some(Bson::Null | Bson::Undefined));
        if nullish(ya) || nullish(yb) {
            return Err(QueryError::loc(
                5624903,
                "$derivative input must not be null or missing",
            ));
        }
        let (Some(na), Some(nb)) = (number(ya), number(yb)) else {
            let name = |v: &Option<Bson>| v.as_ref().map(type_name).unwrap_or("missing");
            return Err(QueryError::loc(
                16556,
                format!("can't $subtract {} from {}", name(ya), name(yb)),
            ));
        };
        let run = position(tb).unwrap_or(0.0) - position(ta).unwrap_or(0.0);
        if run == 0.0 {
            out.push(Some(Bson::Null));
            continue;
        }
        let per = unit_ms.map(|u| u as f64).unwrap_or(1.0);
        let slope = (nb.as_f64() - na.as_f64()) / run * per;
        out.push(Some(
            if matches!(na, Num::Dec(_)) || matches!(nb, Num::Dec(_)) {
                Num::Dec(crate::decimal::from_f64_result(slope)).to_bson()
            } else {
                Bson::Double(slope)
            },
        ));
    }
    Ok(out)
}

/// `$integral` of each document's window `[l, h)` by the trapezoidal rule, per
/// `unit` (milliseconds) when given.
pub(super) fn integral(
    keys: &[Option<Bson>],
    ys: &[Option<Bson>],
    ranges: &[(usize, usize)],
    unit_ms: Option<i64>,
) -> Result<Vec<Option<Bson>>, QueryError> {
    // Every document that enters a window is checked, as MongoDB adds it.
    let mut checked = vec![false; keys.len()];
    let mut check = |j: usize| -> Result<(), QueryError> {
        if checked[j] {
            return Ok(());
        }
        let (k, y) = (&keys[j], &ys[j]);
        if number(y).is_none() || !(is_date(k) || number(k).is_some()) {
            return Err(QueryError::loc(
                5423900,
                "The input value of $integral window function must be a vector of 2 value, the first value must be numeric or date type and the second must be numeric.",
            ));
        }
        if unit_ms.is_some() && !is_date(k) {
            return Err(QueryError::loc(
                5423901,
                "$integral with 'unit' expects the sortBy field to be a Date",
            ));
        }
        if unit_ms.is_none() && number(k).is_none() {
            return Err(QueryError::loc(
                5423902,
                "$integral (with no 'unit') expects the sortBy field to be numeric",
            ));
        }
        checked[j] = true;
        Ok(())
    };
    let per = unit_ms.map(|u| u as f64).unwrap_or(1.0);
    let mut out = Vec::with_capacity(ranges.len());
    for &(l, h) in ranges {
        let mut total = 0.0;
        for j in l..h {
            check(j)?;
            if j > l {
                let (x0, x1) = (position(&keys[j - 1]), position(&keys[j]));
                let (y0, y1) = (number(&ys[j - 1]), number(&ys[j]));
                if let (Some(x0), Some(x1), Some(y0), Some(y1)) = (x0, x1, y0, y1) {
                    total += (x1 - x0) / per * (y0.as_f64() + y1.as_f64()) / 2.0;
                }
            }
        }
        out.push(Some(Bson::Double(total)));
    }
    Ok(out)
}
