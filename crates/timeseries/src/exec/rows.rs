//! Per-measurement filtering over decoded columns: the conjuncts of a `$match` on the
//! time field (date comparisons) and on top-level numeric measurement fields (number
//! comparisons), and `$geoWithin`/`$geoIntersects` on top-level measurement fields (the
//! geo predicate on each row's value), evaluated on columns without building documents.
//! Conjuncts on the meta field are decided per bucket by the scan. Any other conjunct
//! makes the filter unsupported (the caller then matches unpacked documents).

use super::col::{Col, Cols, GeoCol, GeoValue};
use crate::column::{NumericValues, TypedColumn};
use crate::options::TimeseriesOptions;
use crate::store::{conjuncts, only_meta_paths};
use crate::TsError;
use bson::{Bson, Document};
use hourglass_query::geo::bbox::GeoBox;
use hourglass_query::geo::shape::Shape;
use hourglass_query::geo::GeoPred;
use hourglass_query::num::Num;
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy)]
enum Op {
    Gt,
    Gte,
    Lt,
    Lte,
    Eq,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "$gt" => Op::Gt,
            "$gte" => Op::Gte,
            "$lt" => Op::Lt,
            "$lte" => Op::Lte,
            "$eq" => Op::Eq,
            _ => return None,
        })
    }
    fn holds(self, o: Ordering) -> bool {
        match self {
            Op::Gt => o.is_gt(),
            Op::Gte => o.is_ge(),
            Op::Lt => o.is_lt(),
            Op::Lte => o.is_le(),
            Op::Eq => o.is_eq(),
        }
    }
}

#[derive(Debug, Clone)]
enum Cond {
    /// A date comparison on the time field.
    Time(Op, i64),
    /// A number comparison on a top-level measurement field.
    Number(String, Op, Num),
    /// `$geoWithin`/`$geoIntersects` on a top-level measurement field, with the box
    /// outside which no point can match (the bucket extent's box, checked first).
    Geo(String, Box<GeoPred>, Option<GeoBox>),
}

/// A vectorizable row filter. It exists only when it decides the whole filter: every
/// conjunct is either one of its conditions or on the meta field alone, so rows its mask
/// passes in buckets the scan's meta predicate passes need no further check.
#[derive(Debug, Clone, Default)]
pub struct RowFilter {
    conds: Vec<Cond>,
}

impl RowFilter {
    /// The row filter of `filter`, or `None` when some conjunct is not vectorizable.
    pub fn from_filter(filter: &Document, options: &TimeseriesOptions) -> Option<RowFilter> {
        let mut conds = Vec::new();
        for (k, v) in conjuncts(filter) {
            // Decided per bucket, exactly, by the scan's meta predicate.
            if let Some(mf) = options.meta_field.as_deref() {
                if only_meta_paths(k, v, mf) {
                    continue;
                }
            }
            if k.starts_with('$') || k.contains('.') {
                return None;
            }
            if let Some(geo) = geo_condition(k, v, options) {
                conds.push(geo?);
                continue;
            }
            let ops: Vec<(Op, &Bson)> = match v {
                Bson::Document(d) if d.keys().all(|o| o.starts_with('$')) => d
                    .iter()
                    .map(|(o, a)| Op::parse(o).map(|op| (op, a)))
                    .collect::<Option<_>>()?,
                Bson::Document(_) | Bson::Array(_) | Bson::Null | Bson::RegularExpression(_) => {
                    return None
                }
                v => vec![(Op::Eq, v)],
            };
            for (op, arg) in ops {
                if k == options.time_field {
                    match arg {
                        Bson::DateTime(d) => conds.push(Cond::Time(op, d.timestamp_millis())),
                        _ => return None,
                    }
                } else {
                    match arg {
                        Bson::Double(d) if d.is_nan() => return None,
                        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) => {
                            conds.push(Cond::Number(k.to_string(), op, Num::from_bson(arg)?))
                        }
                        _ => return None,
                    }
                }
            }
        }
        Some(RowFilter { conds })
    }

    /// True when no condition is vectorized (meta-only or empty filters).
    pub fn is_empty(&self) -> bool {
        self.conds.is_empty()
    }

    /// The rows of `bucket` that pass, as a mask; `None` when a column holds values
    /// the vectorized comparison cannot decide (arrays), so the caller falls back.
    pub fn mask(&self, cols: &Cols<'_>, time_field: &str) -> Result<Option<Vec<bool>>, TsError> {
        let n = cols.view.count();
        let mut mask = vec![true; n];
        for c in &self.conds {
            match c {
                Cond::Time(op, t) => {
                    // A bucket whose time range passes passes whole (its control min is
                    // rounded down, so at most the smallest time).
                    let (lo, hi) = (cols.view.min_time_ms(), cols.view.max_time_ms());
                    if hi.is_some_and(|hi| op.holds(lo.cmp(t)) && op.holds(hi.cmp(t))) {
                        continue;
                    }
                    let col = cols.get(time_field)?;
                    for (i, m) in mask.iter_mut().enumerate() {
                        *m &= col.date_ms(i).is_some_and(|ms| op.holds(ms.cmp(t)));
                    }
                }
                Cond::Geo(field, pred, bounds) => {
                    let col = GeoCol::load(cols, field)?;
                    for (i, m) in mask.iter_mut().enumerate() {
                        match col.get(i)? {
                            // An array's elements are matched one by one by the filter.
                            GeoValue::Value(v) if matches!(*v, Bson::Array(_)) => return Ok(None),
                            _ if !*m => {}
                            GeoValue::Point(p) => {
                                *m = !bounds.is_some_and(|b| b.excludes(p, p))
                                    && pred.matches_shape(&Shape::Point(p))
                            }
                            GeoValue::Value(v) => *m = pred.matches(&v),
                            GeoValue::Missing => *m = false,
                        }
                    }
                }
                Cond::Number(field, op, x) => {
                    let col = cols.get(field)?;
                    if col.may_hold_arrays() {
                        return Ok(None);
                    }
                    if let Col::Typed(TypedColumn {
                        values: NumericValues::Doubles(v),
                        present: None,
                    }) = &*col
                    {
                        let x = x.as_f64();
                        for (m, d) in mask.iter_mut().zip(v) {
                            *m &= !d.is_nan()
                                && op.holds(d.partial_cmp(&x).unwrap_or(Ordering::Less));
                        }
                        continue;
                    }
                    for (i, m) in mask.iter_mut().enumerate() {
                        *m &= match col.get(i).as_ref().and_then(Num::from_bson) {
                            Some(n) if !n.as_f64().is_nan() => op.holds(n.compare(x)),
                            _ => false,
                        };
                    }
                }
            }
        }
        Ok(Some(mask))
    }
}

/// The row condition of conjunct `{k: v}` when it is a `$geoWithin`/`$geoIntersects` on a
/// top-level measurement field (`Some(None)`: a geo operator it cannot take).
fn geo_condition(k: &str, v: &Bson, options: &TimeseriesOptions) -> Option<Option<Cond>> {
    let Bson::Document(d) = v else { return None };
    let (op, arg) = d.iter().next()?;
    if d.len() != 1 || !matches!(op.as_str(), "$geoWithin" | "$geoIntersects") {
        return None;
    }
    if k == options.time_field || k.starts_with('$') || k.contains('.') {
        return Some(None);
    }
    Some(GeoPred::parse(op, arg, d).ok().map(|p| {
        let bounds = hourglass_query::geo::bbox::of(&p);
        Cond::Geo(k.to_string(), Box::new(p), bounds)
    }))
}
