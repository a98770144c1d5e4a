//! What a query filter on a time-series collection says about whole buckets: bounds on
//! the time field, a predicate on the meta value (evaluated once per series, never per
//! measurement), and range conditions on measurement fields that control min/max can
//! refute. The full filter is still applied to each unpacked measurement, so pruning
//! only has to be conservative: it never drops a bucket the filter could match.

use bson::{doc, Bson, Document};
use hourglass_query::compare::{compare_values, same_bracket};
use hourglass_query::filter::Filter;
use hourglass_query::geo::bbox::GeoBox;
use hourglass_query::geo::shape::{self, Pos};
use hourglass_query::geo::GeoPred;
use hourglass_query::QueryError;
use std::cmp::Ordering;

use crate::options::TimeseriesOptions;

/// Inclusive bounds on the time field, in milliseconds, used to prune buckets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeBounds {
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl TimeBounds {
    /// Whether a bucket spanning [`lo`, `hi`] holds no time inside the bounds.
    pub fn excludes(&self, lo: Option<i64>, hi: Option<i64>) -> bool {
        matches!((self.min, hi), (Some(min), Some(hi)) if hi < min)
            || matches!((self.max, lo), (Some(max), Some(lo)) if lo > max)
    }

    /// Whether `t` lies inside the bounds.
    pub fn contains(&self, t: i64) -> bool {
        self.min.is_none_or(|m| t >= m) && self.max.is_none_or(|m| t <= m)
    }

    pub fn is_unbounded(&self) -> bool {
        self.min.is_none() && self.max.is_none()
    }

    /// Narrows the bounds by `other` (both must hold).
    pub fn intersect(self, other: TimeBounds) -> TimeBounds {
        TimeBounds {
            min: match (self.min, other.min) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
            max: match (self.max, other.max) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// The bounds a query filter puts on `time_field`: top-level (or `$and`ed) equality
    /// and `$gt/$gte/$lt/$lte/$eq` on dates. Anything else leaves the bounds open.
    pub fn from_filter(filter: &Document, time_field: &str) -> TimeBounds {
        let mut b = TimeBounds::default();
        for (k, v) in conjuncts(filter) {
            if k == time_field {
                b = b.intersect(TimeBounds::from_condition(v));
            }
        }
        b
    }

    /// The bounds one condition on the time field puts (inclusive: `$gt t` is
    /// `$gte t + 1 ms`, dates being whole milliseconds).
    pub fn from_condition(v: &Bson) -> TimeBounds {
        let ms = |v: &Bson| match v {
            Bson::DateTime(d) => Some(d.timestamp_millis()),
            _ => None,
        };
        match v {
            Bson::DateTime(d) => TimeBounds {
                min: Some(d.timestamp_millis()),
                max: Some(d.timestamp_millis()),
            },
            Bson::Document(ops) if ops.keys().all(|k| k.starts_with('$')) => {
                let mut b = TimeBounds::default();
                for (op, arg) in ops {
                    let t = ms(arg);
                    let one = match op.as_str() {
                        // Dates are whole milliseconds: `$gt t` is `$gte t + 1`.
                        "$gt" => TimeBounds {
                            min: t.map(|t| t.saturating_add(1)),
                            max: None,
                        },
                        "$gte" => TimeBounds { min: t, max: None },
                        "$lt" => TimeBounds {
                            min: None,
                            max: t.map(|t| t.saturating_sub(1)),
                        },
                        "$lte" => TimeBounds { min: None, max: t },
                        "$eq" => TimeBounds { min: t, max: t },
                        _ => TimeBounds::default(),
                    };
                    b = b.intersect(one);
                }
                b
            }
            _ => TimeBounds::default(),
        }
    }
}

/// The top-level conjuncts of a filter, with nested `$and`s flattened.
pub fn conjuncts(filter: &Document) -> Vec<(&str, &Bson)> {
    let mut out = Vec::new();
    for (k, v) in filter {
        match (k.as_str(), v) {
            ("$and", Bson::Array(items)) => {
                for item in items.iter().filter_map(Bson::as_document) {
                    out.extend(conjuncts(item));
                }
            }
            _ => out.push((k.as_str(), v)),
        }
    }
    out
}

/// Whether `path` is the meta field or a path inside it.
fn is_meta_path(path: &str, meta_field: &str) -> bool {
    path == meta_field
        || path
            .strip_prefix(meta_field)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// Whether every field path a filter expression touches lies in the meta field.
pub(crate) fn only_meta_paths(k: &str, v: &Bson, meta_field: &str) -> bool {
    match k {
        "$or" | "$nor" | "$and" => match v {
            Bson::Array(items) => items.iter().all(|i| match i {
                Bson::Document(d) => d.iter().all(|(k, v)| only_meta_paths(k, v, meta_field)),
                _ => false,
            }),
            _ => false,
        },
        "$comment" => true,
        k if k.starts_with('$') => false,
        k => is_meta_path(k, meta_field),
    }
}

/// The box a geo condition (`{$geoWithin: ...}`, `{$geoIntersects: ...}`, `{$near: ...}`)
/// can match inside, if it has one.
fn geo_box(v: &Bson) -> Option<GeoBox> {
    let Bson::Document(ops) = v else {
        return None;
    };
    ops.iter().find_map(|(op, arg)| match op.as_str() {
        "$geoWithin" | "$within" | "$geoIntersects" | "$near" | "$nearSphere" => {
            hourglass_query::geo::bbox::of(&GeoPred::parse(op, arg, ops).ok()?)
        }
        _ => None,
    })
}

/// The `[longitude, latitude]` of a control min or max of GeoJSON points (the
/// per-field extremes of their `coordinates`). Only a bound exactly of the form
/// `{type: "Point", coordinates: [x, y]}` counts: any other value in the bucket (another
/// geometry type, a legacy pair or `{lng, lat}` document, three coordinates) shows in
/// the bound's type, fields or length, and then the bucket has no point extent.
pub(crate) fn point_extent(v: &Bson) -> Option<Pos> {
    let d = v.as_document()?;
    if d.len() != 2 || d.get_str("type").ok()? != "Point" {
        return None;
    }
    match d.get_array("coordinates").ok()?.as_slice() {
        [x, y] => Some(Pos {
            x: shape::number(x)?,
            y: shape::number(y)?,
        }),
        _ => None,
    }
}

/// The box a bucket's `field` values lie in, when they are all GeoJSON points
/// ([`point_extent`] of its control min and max).
pub fn bucket_point_box(view: &super::BucketView, field: &str) -> Option<(Pos, Pos)> {
    let (lo, hi) = view.control_bounds(field)?;
    Some((point_extent(&lo)?, point_extent(&hi)?))
}

/// A range condition on a top-level measurement field that control min/max can refute
/// (or on a meta path, which an archived row group's statistics can refute).
#[derive(Debug, Clone)]
struct FieldRange {
    field: String,
    op: RangeOp,
    value: Bson,
}

#[derive(Debug, Clone, Copy)]
enum RangeOp {
    Gt,
    Gte,
    Lt,
    Lte,
    Eq,
    /// `$in` of scalars (the value is their array; meta paths only): refuted when each
    /// would be by `Eq`.
    In,
}

/// What a filter says about whole buckets.
#[derive(Debug, Clone, Default)]
pub struct BucketPredicate {
    pub bounds: TimeBounds,
    /// The conjuncts on the meta field, matched against `{<metaField>: meta}`.
    pub meta: Option<Filter>,
    /// The meta conjuncts as given (for explain).
    pub meta_spec: Option<Document>,
    /// The same conjuncts relative to the meta value (`{"<meta>.a": 1}` becomes
    /// `{a: 1}`), matched against a document meta without copying it; `None` when some
    /// conjunct names the meta field itself.
    meta_relative: Option<Filter>,
    /// True when the whole filter is on the meta field: a bucket matches entirely or
    /// not at all.
    pub meta_only: bool,
    ranges: Vec<FieldRange>,
    /// The meta conjuncts' range conditions on meta paths (`tags.hostname`).
    meta_ranges: Vec<FieldRange>,
    /// Geo conditions on top-level measurement fields, as the box of longitudes and
    /// latitudes they can match inside (refuted by the bucket's point extent).
    geo: Vec<(String, GeoBox)>,
}

impl BucketPredicate {
    /// Every bucket.
    pub fn all() -> BucketPredicate {
        BucketPredicate {
            meta_only: true,
            ..BucketPredicate::default()
        }
    }

    pub fn from_filter(
        filter: &Document,
        options: &TimeseriesOptions,
    ) -> Result<BucketPredicate, QueryError> {
        let mut p = BucketPredicate {
            meta_only: true,
            ..BucketPredicate::default()
        };
        let mut meta = Vec::new();
        for (k, v) in conjuncts(filter) {
            if let Some(mf) = options.meta_field.as_deref() {
                if only_meta_paths(k, v, mf) {
                    if k != "$comment" {
                        meta.push(Bson::Document(doc! {k: v.clone()}));
                    }
                    if !k.starts_with('$') {
                        p.meta_ranges.extend(field_ranges(k, v));
                        p.meta_ranges.extend(in_range(k, v));
                    }
                    continue;
                }
            }
            p.meta_only = false;
            if k == options.time_field {
                p.bounds = p.bounds.intersect(TimeBounds::from_condition(v));
            } else if !k.starts_with('$') && !k.contains('.') {
                p.ranges.extend(field_ranges(k, v));
                p.geo.extend(geo_box(v).map(|b| (k.to_string(), b)));
            }
        }
        if hourglass_query::collation::active() {
            // Control min/max and stored meta bounds are in binary string order: under a
            // collation only ranges free of strings may refute a bucket.
            p.ranges.retain(|r| !holds_string(&r.value));
            p.meta_ranges.retain(|r| !holds_string(&r.value));
        }
        if !meta.is_empty() {
            let spec = doc! {"$and": meta};
            p.meta = Some(Filter::parse(&spec)?);
            if let Some(mf) = options.meta_field.as_deref() {
                if let Some(rel) = relative_to_meta(&spec, mf) {
                    p.meta_relative = Filter::parse(&rel).ok();
                }
            }
            p.meta_spec = Some(spec);
        }
        Ok(p)
    }

    /// Whether there are measurement ranges to check against control min/max.
    pub fn has_ranges(&self) -> bool {
        !self.ranges.is_empty() || !self.geo.is_empty()
    }

    /// The geo boxes buckets are pruned by, for explain: `{<field>: {lat: [lo, hi],
    /// lon: [lo, hi] or null}}`.
    pub fn geo_explain(&self) -> Document {
        self.geo
            .iter()
            .map(|(f, b)| {
                let lon = b
                    .lon
                    .map(|(lo, hi)| Bson::Array(vec![lo.into(), hi.into()]));
                (
                    f.clone(),
                    Bson::Document(doc! {"lat": [b.lat.0, b.lat.1], "lon": lon}),
                )
            })
            .collect()
    }

    /// Whether a series with this meta value may match.
    pub fn meta_matches(&self, meta_field: Option<&str>, meta: Option<&Bson>) -> bool {
        let Some(filter) = &self.meta else {
            return true;
        };
        if let (Some(rel), Some(Bson::Document(m))) = (&self.meta_relative, meta) {
            return rel.matches(m);
        }
        let mut d = Document::new();
        if let (Some(mf), Some(m)) = (meta_field, meta) {
            d.insert(mf, m.clone());
        }
        filter.matches(&d)
    }

    /// Whether control min/max (documents of per-field minimums and maximums) rule
    /// the bucket out for a range condition on a measurement field.
    pub fn refuted_by_control(&self, min: &Document, max: &Document) -> bool {
        self.refuted_by_bounds(|f| Some((min.get(f)?.clone(), max.get(f)?.clone())))
    }

    /// [`BucketPredicate::refuted_by_control`] with `bounds(field)` giving a field's
    /// control (min, max), so a stored bucket reads only the fields the ranges name.
    /// Whether an in-memory bucket (open, or archived rows) may hold a match: its time
    /// span, meta and control min/max.
    pub fn may_match_bucket(&self, options: &TimeseriesOptions, b: &crate::bucket::Bucket) -> bool {
        !self
            .bounds
            .excludes(Some(b.min_time_ms), Some(b.max_time_ms))
            && self.meta_matches(options.meta_field.as_deref(), b.meta.as_ref())
            && !self.refuted_by_control(&b.control_min(), &b.control_max())
    }

    pub fn refuted_by_bounds(&self, bounds: impl Fn(&str) -> Option<(Bson, Bson)>) -> bool {
        let outside_box = self.geo.iter().any(|(field, b)| match bounds(field) {
            Some((lo, hi)) => match (point_extent(&lo), point_extent(&hi)) {
                (Some(lo), Some(hi)) => b.excludes(lo, hi),
                _ => false,
            },
            None => false,
        });
        outside_box || any_refuted(&self.ranges, &bounds)
    }

    /// Whether the meta conditions' ranges (`$eq`, `$in`, `$gt`... on meta paths) cannot
    /// hold for values within `bounds` of the flattened meta paths (an archived row
    /// group's statistics).
    pub fn meta_refuted_by_bounds(&self, bounds: impl Fn(&str) -> Option<(Bson, Bson)>) -> bool {
        any_refuted(&self.meta_ranges, &bounds)
    }
}

/// Whether some range cannot hold for values within its field's `bounds`.
/// Whether `v` is or contains a string (compared by the collation, not by bytes).
fn holds_string(v: &Bson) -> bool {
    match v {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Array(a) => a.iter().any(holds_string),
        Bson::Document(d) => d.values().any(holds_string),
        _ => false,
    }
}

fn any_refuted(ranges: &[FieldRange], bounds: &dyn Fn(&str) -> Option<(Bson, Bson)>) -> bool {
    ranges
        .iter()
        .any(|r| bounds(&r.field).is_some_and(|(lo, hi)| range_refuted(r.op, &r.value, &lo, &hi)))
}

/// Whether `op value` cannot hold for a value between `lo` and `hi`.
fn range_refuted(op: RangeOp, v: &Bson, lo: &Bson, hi: &Bson) -> bool {
    if let (RangeOp::In, Bson::Array(values)) = (op, v) {
        return !values.is_empty() && values.iter().all(|v| range_refuted(RangeOp::Eq, v, lo, hi));
    }
    // Only same-bracket scalars compare meaningfully; arrays and objects could match
    // element-wise, so they never refute.
    if !(same_bracket(lo, v) && same_bracket(hi, v))
        || matches!(lo, Bson::Array(_) | Bson::Document(_))
        || matches!(hi, Bson::Array(_) | Bson::Document(_))
    {
        return false;
    }
    match op {
        RangeOp::Gt => compare_values(hi, v) != Ordering::Greater,
        RangeOp::Gte => compare_values(hi, v) == Ordering::Less,
        RangeOp::Lt => compare_values(lo, v) != Ordering::Less,
        RangeOp::Lte => compare_values(lo, v) == Ordering::Greater,
        RangeOp::Eq => {
            compare_values(hi, v) == Ordering::Less || compare_values(lo, v) == Ordering::Greater
        }
        RangeOp::In => false,
    }
}

/// `filter` (conjuncts on meta paths) with every path made relative to the meta
/// value; `None` when a path is the meta field itself.
fn relative_to_meta(filter: &Document, mf: &str) -> Option<Document> {
    let mut out = Document::new();
    for (k, v) in filter {
        match k.as_str() {
            "$and" | "$or" | "$nor" => {
                let items = v
                    .as_array()?
                    .iter()
                    .map(|i| relative_to_meta(i.as_document()?, mf).map(Bson::Document))
                    .collect::<Option<Vec<_>>>()?;
                out.insert(k.clone(), items);
            }
            "$comment" => {}
            k if k.starts_with('$') => return None,
            k => {
                let rest = k.strip_prefix(mf)?.strip_prefix('.')?;
                out.insert(rest, v.clone());
            }
        }
    }
    Some(out)
}

/// A value a range condition compares with (NaN never matches a range).
fn range_scalar(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Double(_)
            | Bson::Int32(_)
            | Bson::Int64(_)
            | Bson::DateTime(_)
            | Bson::String(_)
            | Bson::Boolean(_)
    ) && !matches!(v, Bson::Double(d) if d.is_nan())
}

/// `{field: {$in: [scalars]}}` as an [`RangeOp::In`] range.
fn in_range(field: &str, v: &Bson) -> Option<FieldRange> {
    let Bson::Document(ops) = v else {
        return None;
    };
    match ops.get("$in")? {
        Bson::Array(values) if values.iter().all(range_scalar) => Some(FieldRange {
            field: field.to_string(),
            op: RangeOp::In,
            value: Bson::Array(values.clone()),
        }),
        _ => None,
    }
}

fn field_ranges(field: &str, v: &Bson) -> Vec<FieldRange> {
    let scalar = range_scalar;
    let one = |op, v: &Bson| FieldRange {
        field: field.to_string(),
        op,
        value: v.clone(),
    };
    match v {
        Bson::Document(ops) if ops.keys().all(|k| k.starts_with('$')) => ops
            .iter()
            .filter(|(_, a)| scalar(a))
            .filter_map(|(op, a)| {
                let op = match op.as_str() {
                    "$gt" => RangeOp::Gt,
                    "$gte" => RangeOp::Gte,
                    "$lt" => RangeOp::Lt,
                    "$lte" => RangeOp::Lte,
                    "$eq" => RangeOp::Eq,
                    _ => return None,
                };
                Some(one(op, a))
            })
            .collect(),
        v if scalar(v) => vec![one(RangeOp::Eq, v)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> TimeseriesOptions {
        TimeseriesOptions::parse(&doc! {"timeField": "t", "metaField": "m"}).unwrap()
    }

    #[test]
    fn meta_conditions_are_refuted_only_by_bounds_that_exclude_every_value() {
        let bounds = |path: &str| match path {
            "m.h" => Some((Bson::String("b".into()), Bson::String("d".into()))),
            "m.x" => Some((Bson::Double(1.0), Bson::Double(2.0))),
            _ => None,
        };
        let refuted = |filter: Document| {
            BucketPredicate::from_filter(&filter, &opts())
                .unwrap()
                .meta_refuted_by_bounds(bounds)
        };
        assert!(refuted(doc! {"$and": [{"m.h": "a"}]}));
        assert!(!refuted(doc! {"$and": [{"m.h": "c"}]}));
        assert!(refuted(doc! {"m.h": {"$in": ["a", "z"]}}));
        assert!(!refuted(doc! {"m.h": {"$in": ["a", "c"]}}));
        assert!(refuted(doc! {"m.h": {"$gt": "d"}}));
        assert!(!refuted(doc! {"m.h": {"$gte": "d"}}));
        assert!(refuted(doc! {"m.h": {"$lt": "b"}}));
        assert!(!refuted(doc! {"m.h": {"$ne": "c"}}));
        assert!(!refuted(doc! {"m.other": "a"}), "no statistics: kept");
        assert!(
            !refuted(doc! {"m.x": f64::NAN}),
            "NaN is not in the statistics"
        );
        assert!(refuted(doc! {"m.x": 3}));
    }

    #[test]
    fn time_bounds_come_from_top_level_and_anded_conditions_only() {
        let t = bson::DateTime::from_millis;
        let b = TimeBounds::from_filter(
            &doc! {"t": {"$gte": t(10)}, "$and": [{"t": {"$lt": t(20)}}]},
            "t",
        );
        assert_eq!(
            b,
            TimeBounds {
                min: Some(10),
                max: Some(19)
            }
        );
        assert!(b.excludes(Some(20), Some(30)), "$lt is exclusive");
        assert!(b.excludes(Some(0), Some(9)));
        assert!(!b.excludes(Some(0), Some(10)));
        let open = TimeBounds::from_filter(&doc! {"$or": [{"t": t(1)}], "t": {"$ne": t(5)}}, "t");
        assert_eq!(open, TimeBounds::default());
    }

    #[test]
    fn splits_meta_conjuncts_from_the_rest() {
        let p = BucketPredicate::from_filter(
            &doc! {"m.host": "a", "$or": [{"m.dc": 1}, {"m": null}], "v": {"$gt": 5}},
            &opts(),
        )
        .unwrap();
        assert!(!p.meta_only);
        assert!(p.meta_matches(
            Some("m"),
            Some(&Bson::Document(doc! {"host": "a", "dc": 1}))
        ));
        assert!(!p.meta_matches(
            Some("m"),
            Some(&Bson::Document(doc! {"host": "b", "dc": 1}))
        ));
        let only = BucketPredicate::from_filter(&doc! {"m": {"$in": [1, 2]}}, &opts()).unwrap();
        assert!(only.meta_only);
        assert!(!only.meta_matches(Some("m"), None));
        let mixed =
            BucketPredicate::from_filter(&doc! {"$or": [{"m": 1}, {"v": 1}]}, &opts()).unwrap();
        assert!(mixed.meta.is_none() && !mixed.meta_only);
    }

    #[test]
    fn control_min_max_refute_only_same_type_ranges() {
        let p = BucketPredicate::from_filter(&doc! {"v": {"$gt": 90.0}}, &opts()).unwrap();
        assert!(p.refuted_by_control(&doc! {"v": 1.0}, &doc! {"v": 90}));
        assert!(!p.refuted_by_control(&doc! {"v": 1.0}, &doc! {"v": 90.5}));
        assert!(!p.refuted_by_control(&doc! {"v": 1.0}, &doc! {"v": "zzz"}));
        assert!(!p.refuted_by_control(&doc! {}, &doc! {}));
        let eq = BucketPredicate::from_filter(&doc! {"v": 5}, &opts()).unwrap();
        assert!(eq.refuted_by_control(&doc! {"v": 6}, &doc! {"v": 9}));
        assert!(!eq.refuted_by_control(&doc! {"v": 5.0}, &doc! {"v": 9}));
        let arr = BucketPredicate::from_filter(&doc! {"v": {"$lt": 0}}, &opts()).unwrap();
        assert!(!arr.refuted_by_control(&doc! {"v": [5]}, &doc! {"v": [9]}));
    }
}
