//! Translation of a `partialFilterExpression` written against the
//! time-series view into the bucket-level filter stored on the
//! `system.buckets` index, following MongoDB's `BucketSpec::pushdownPredicate`
//! with `IneligiblePredicatePolicy::kError` (errors are code 5916301).
//!
//! * Conjuncts that only read the metaField are split off and renamed
//!   (`<meta>` / `<meta>.x` -> `meta` / `meta.x`), implicit equality becomes
//!   `{$eq: v}`.
//! * The rest is mapped to `control.min` / `control.max` predicates with the
//!   `$_internalExpr*` operators: on a measurement `$eq` -> min `<=` v and
//!   max `>=` v, `$gt(e)` -> max, `$lt(e)` -> min; on the timeField the
//!   bounds are widened by `bucketMaxSpanSeconds` (`$gt: t` -> max `>` t and
//!   min `>` t - span; `$lt: t` -> min `<` t and max `<` t + span; `$eq` gets
//!   all four). `{$exists: true}` -> `$exists` on min and max; `$in` -> `$or`
//!   of the `$eq` translations; `$and` / `$or` recurse; meta leaves inside a
//!   mixed `$or` are renamed.
//! * Anything else (`$ne`, `$nin`, `$not`, `$nor`, `{$exists: false}`, a
//!   regex, `$type`, `$expr`, ...), object/array/null operands and non-Date
//!   operands on the timeField fail with 5916301.
//!
//! Meta predicates other than comparisons, `$in` and `$exists` are kept in
//! the form given (MongoDB re-serializes its parsed expression, so e.g. a
//! `$ne` or a regex may be spelled differently there); unknown operators are
//! not rejected here (MongoDB's parser fails with 2 first).
//!
//! The result reports whether a measurement/time predicate remained, which
//! decides whether a TTL index is allowed (MongoDB requires the filter to
//! be on the metaField only).

use bson::{doc, Bson, Document};

use super::display::doc_to_string;
use super::{IndexSpecError, CONTROL_MAX_PREFIX, CONTROL_MIN_PREFIX};
use crate::options::TimeseriesOptions;

/// A translated partial filter.
#[derive(Debug, Clone, PartialEq)]
pub struct PartialFilter {
    /// The bucket-level `partialFilterExpression`.
    pub bucket_filter: Document,
    /// True when some predicate is not on the metaField (a measurement or the
    /// timeField); such an index cannot be a TTL index.
    pub has_measurement_predicate: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Gt,
    Gte,
    Lt,
    Lte,
}

impl CmpOp {
    fn parse(op: &str) -> Option<CmpOp> {
        match op {
            "$eq" => Some(CmpOp::Eq),
            "$gt" => Some(CmpOp::Gt),
            "$gte" => Some(CmpOp::Gte),
            "$lt" => Some(CmpOp::Lt),
            "$lte" => Some(CmpOp::Lte),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "$eq",
            CmpOp::Gt => "$gt",
            CmpOp::Gte => "$gte",
            CmpOp::Lt => "$lt",
            CmpOp::Lte => "$lte",
        }
    }
}

/// One parsed predicate.
#[derive(Debug, Clone, PartialEq)]
enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    /// `$nor`: never translatable off the metaField.
    Nor(Vec<Expr>),
    Cmp {
        path: String,
        op: CmpOp,
        value: Bson,
    },
    In {
        path: String,
        values: Vec<Bson>,
    },
    Exists {
        path: String,
    },
    /// Any other leaf (`$ne`, `$not`, regex, `$type`, `{$exists: false}`,
    /// ...), kept in its serialized form `{path: {...}}`.
    Other {
        path: String,
        serialized: Document,
    },
    /// A top-level operator without a path (`$expr`, `$where`, ...).
    Pathless(Document),
}

fn bad_value(msg: impl Into<String>) -> IndexSpecError {
    IndexSpecError::BadValue(msg.into())
}

fn parse_filter(filter: &Document) -> Result<Expr, IndexSpecError> {
    let mut children = Vec::new();
    for (k, v) in filter {
        parse_clause(k, v, &mut children)?;
    }
    Ok(Expr::And(children))
}

fn parse_logical(op: &str, v: &Bson) -> Result<Vec<Expr>, IndexSpecError> {
    let Bson::Array(items) = v else {
        return Err(bad_value(format!("{op} must be an array")));
    };
    if items.is_empty() {
        return Err(bad_value("$and/$or/$nor must be a nonempty array"));
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Bson::Document(d) = item else {
            return Err(bad_value(format!(
                "{op} argument's entries must be objects"
            )));
        };
        out.push(simplify(parse_filter(d)?));
    }
    Ok(out)
}

/// A single-child `$and` is its child (the match parser's simplification).
fn simplify(e: Expr) -> Expr {
    match e {
        Expr::And(mut c) if c.len() == 1 => c.pop().unwrap_or(Expr::And(Vec::new())),
        other => other,
    }
}

fn parse_clause(k: &str, v: &Bson, out: &mut Vec<Expr>) -> Result<(), IndexSpecError> {
    match k {
        "$and" => out.push(Expr::And(parse_logical(k, v)?)),
        "$or" => out.push(Expr::Or(parse_logical(k, v)?)),
        "$nor" => out.push(Expr::Nor(parse_logical(k, v)?)),
        "$comment" => {}
        _ if k.starts_with('$') => out.push(Expr::Pathless(doc! { k: v.clone() })),
        _ => parse_path(k, v, out)?,
    }
    Ok(())
}

fn is_operator_doc(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

fn parse_path(path: &str, v: &Bson, out: &mut Vec<Expr>) -> Result<(), IndexSpecError> {
    let ops = match v {
        Bson::Document(d) if is_operator_doc(d) => d,
        Bson::RegularExpression(_) => {
            out.push(Expr::Other {
                path: path.to_string(),
                serialized: doc! { path: v.clone() },
            });
            return Ok(());
        }
        _ => {
            out.push(Expr::Cmp {
                path: path.to_string(),
                op: CmpOp::Eq,
                value: v.clone(),
            });
            return Ok(());
        }
    };
    for (op, arg) in ops {
        if let Some(cmp) = CmpOp::parse(op) {
            out.push(Expr::Cmp {
                path: path.to_string(),
                op: cmp,
                value: arg.clone(),
            });
            continue;
        }
        match op.as_str() {
            "$in" => {
                let Bson::Array(values) = arg else {
                    return Err(bad_value("$in needs an array"));
                };
                out.push(Expr::In {
                    path: path.to_string(),
                    values: values.clone(),
                });
            }
            "$exists" if truthy(arg) => out.push(Expr::Exists {
                path: path.to_string(),
            }),
            "$exists" => out.push(Expr::Other {
                path: path.to_string(),
                serialized: doc! { path: { "$not": { "$exists": true } } },
            }),
            "$options" if ops.contains_key("$regex") => {}
            _ => {
                let mut inner = doc! { op.clone(): arg.clone() };
                if op == "$regex" {
                    if let Some(o) = ops.get("$options") {
                        inner.insert("$options", o.clone());
                    }
                }
                out.push(Expr::Other {
                    path: path.to_string(),
                    serialized: doc! { path: inner },
                });
            }
        }
    }
    Ok(())
}

fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(d) => *d != 0.0,
        Bson::Null | Bson::Undefined => false,
        _ => true,
    }
}

fn on_meta(path: &str, meta: Option<&str>) -> bool {
    meta.is_some_and(|m| {
        path == m
            || (path.len() > m.len() && path.starts_with(m) && path[m.len()..].starts_with('.'))
    })
}

fn meta_only(e: &Expr, meta: Option<&str>) -> bool {
    match e {
        Expr::And(c) | Expr::Or(c) | Expr::Nor(c) => c.iter().all(|x| meta_only(x, meta)),
        Expr::Cmp { path, .. }
        | Expr::In { path, .. }
        | Expr::Exists { path }
        | Expr::Other { path, .. } => on_meta(path, meta),
        Expr::Pathless(_) => false,
    }
}

/// Splits off the metaField-only conjuncts, recursing into `$and`.
fn split(e: Expr, meta: Option<&str>) -> (Option<Expr>, Option<Expr>) {
    if meta.is_none() {
        return (None, Some(e));
    }
    if meta_only(&e, meta) {
        return (Some(e), None);
    }
    match e {
        Expr::And(children) => {
            let mut metas = Vec::new();
            let mut rest = Vec::new();
            let original = children.clone();
            for c in children {
                let (m, r) = split(c, meta);
                metas.extend(m);
                rest.extend(r);
            }
            if metas.is_empty() {
                return (None, Some(Expr::And(original)));
            }
            let m = simplify(Expr::And(metas));
            let r = (!rest.is_empty()).then(|| simplify(Expr::And(rest)));
            (Some(m), r)
        }
        other => (None, Some(other)),
    }
}

fn rename_meta(path: &str, meta: &str) -> String {
    format!("meta{}", &path[meta.len()..])
}

/// Serializes a metaField-only expression with `meta` paths.
fn serialize_meta(e: &Expr, meta: &str) -> Document {
    match e {
        Expr::And(c) if c.is_empty() => Document::new(),
        Expr::And(c) => {
            doc! { "$and": c.iter().map(|x| Bson::Document(serialize_meta(x, meta))).collect::<Vec<_>>() }
        }
        Expr::Or(c) => {
            doc! { "$or": c.iter().map(|x| Bson::Document(serialize_meta(x, meta))).collect::<Vec<_>>() }
        }
        Expr::Nor(c) => {
            doc! { "$nor": c.iter().map(|x| Bson::Document(serialize_meta(x, meta))).collect::<Vec<_>>() }
        }
        Expr::Cmp { path, op, value } => {
            doc! { rename_meta(path, meta): { op.name(): value.clone() } }
        }
        Expr::In { path, values } => doc! { rename_meta(path, meta): { "$in": values.clone() } },
        Expr::Exists { path } => doc! { rename_meta(path, meta): { "$exists": true } },
        Expr::Other { path, serialized } => {
            let v = serialized.get(path).cloned().unwrap_or(Bson::Null);
            doc! { rename_meta(path, meta): v }
        }
        Expr::Pathless(d) => d.clone(),
    }
}

/// The view-level serialized form, for error messages.
fn serialize_plain(e: &Expr) -> Document {
    match e {
        Expr::And(c) => {
            doc! { "$and": c.iter().map(|x| Bson::Document(serialize_plain(x))).collect::<Vec<_>>() }
        }
        Expr::Or(c) => {
            doc! { "$or": c.iter().map(|x| Bson::Document(serialize_plain(x))).collect::<Vec<_>>() }
        }
        Expr::Nor(c) => {
            doc! { "$nor": c.iter().map(|x| Bson::Document(serialize_plain(x))).collect::<Vec<_>>() }
        }
        Expr::Cmp { path, op, value } => doc! { path.clone(): { op.name(): value.clone() } },
        Expr::In { path, values } => doc! { path.clone(): { "$in": values.clone() } },
        Expr::Exists { path } => doc! { path.clone(): { "$exists": true } },
        Expr::Other { serialized, .. } => serialized.clone(),
        Expr::Pathless(d) => d.clone(),
    }
}

fn ineligible(why: &str, e: &Expr) -> IndexSpecError {
    IndexSpecError::PartialFilter(format!(
        "Error translating non-metadata time-series predicate to operate on buckets: {why}: {}",
        doc_to_string(&serialize_plain(e))
    ))
}

struct Ctx<'a> {
    time_field: &'a str,
    meta: Option<&'a str>,
    span_millis: i64,
}

fn internal(op: &str, path: String, v: Bson) -> Document {
    doc! { path: { op: v } }
}

fn and_of(parts: Vec<Document>) -> Document {
    doc! { "$and": parts.into_iter().map(Bson::Document).collect::<Vec<_>>() }
}

fn shift(v: &Bson, millis: i64) -> Bson {
    match v {
        Bson::DateTime(dt) => Bson::DateTime(bson::DateTime::from_millis(
            dt.timestamp_millis().saturating_add(millis),
        )),
        other => other.clone(),
    }
}

/// The loose bucket-level predicate of one comparison (also used per `$in`
/// value); errors name `shown`.
fn comparison(
    ctx: &Ctx,
    path: &str,
    op: CmpOp,
    value: &Bson,
    shown: &Expr,
) -> Result<Document, IndexSpecError> {
    match value {
        Bson::Document(_) | Bson::Array(_) => {
            return Err(ineligible("operand can't be an object or array", shown))
        }
        Bson::Null => return Err(ineligible("can't handle {$eq: null}", shown)),
        _ => {}
    }
    let min = format!("{CONTROL_MIN_PREFIX}{path}");
    let max = format!("{CONTROL_MAX_PREFIX}{path}");
    let v = value.clone();
    if path == ctx.time_field {
        if !matches!(value, Bson::DateTime(_)) {
            return Err(ineligible(
                "This predicate will never be true, because the time field always contains a Date",
                shown,
            ));
        }
        let lower = shift(value, -ctx.span_millis);
        let upper = shift(value, ctx.span_millis);
        return Ok(match op {
            CmpOp::Eq => and_of(vec![
                internal("$_internalExprLte", min.clone(), v.clone()),
                internal("$_internalExprGte", min, lower),
                internal("$_internalExprGte", max.clone(), v),
                internal("$_internalExprLte", max, upper),
            ]),
            CmpOp::Gt => and_of(vec![
                internal("$_internalExprGt", max, v),
                internal("$_internalExprGt", min, lower),
            ]),
            CmpOp::Gte => and_of(vec![
                internal("$_internalExprGte", max, v),
                internal("$_internalExprGte", min, lower),
            ]),
            CmpOp::Lt => and_of(vec![
                internal("$_internalExprLt", min, v),
                internal("$_internalExprLt", max, upper),
            ]),
            CmpOp::Lte => and_of(vec![
                internal("$_internalExprLte", min, v),
                internal("$_internalExprLte", max, upper),
            ]),
        });
    }
    Ok(match op {
        CmpOp::Eq => and_of(vec![
            internal("$_internalExprLte", min, v.clone()),
            internal("$_internalExprGte", max, v),
        ]),
        CmpOp::Gt => internal("$_internalExprGt", max, v),
        CmpOp::Gte => internal("$_internalExprGte", max, v),
        CmpOp::Lt => internal("$_internalExprLt", min, v),
        CmpOp::Lte => internal("$_internalExprLte", min, v),
    })
}

/// `createPredicatesOnBucketLevelField` (loose predicate, error policy).
/// `None` means "always true" (no predicate).
fn bucket_level(ctx: &Ctx, e: &Expr) -> Result<Option<Document>, IndexSpecError> {
    if let Some(meta) = ctx.meta {
        let path = match e {
            Expr::Cmp { path, .. }
            | Expr::In { path, .. }
            | Expr::Exists { path }
            | Expr::Other { path, .. } => Some(path),
            _ => None,
        };
        if path.is_some_and(|p| on_meta(p, Some(meta))) {
            return Ok(Some(serialize_meta(e, meta)));
        }
    }
    match e {
        Expr::And(children) => {
            let mut parts = Vec::new();
            for c in children {
                parts.extend(bucket_level(ctx, c)?);
            }
            Ok(match parts.len() {
                0 => None,
                1 => parts.pop(),
                _ => Some(and_of(parts)),
            })
        }
        Expr::Or(children) => {
            let mut parts = Vec::new();
            let mut always_true = false;
            for c in children {
                match bucket_level(ctx, c)? {
                    Some(p) => parts.push(p),
                    None => always_true = true,
                }
            }
            if always_true {
                return Ok(None);
            }
            Ok(match parts.len() {
                1 => parts.pop(),
                _ => Some(or_of(parts)),
            })
        }
        Expr::Cmp { path, op, value } => comparison(ctx, path, *op, value, e).map(Some),
        Expr::Exists { path } => Ok(Some(and_of(vec![
            doc! { format!("{CONTROL_MIN_PREFIX}{path}"): { "$exists": true } },
            doc! { format!("{CONTROL_MAX_PREFIX}{path}"): { "$exists": true } },
        ]))),
        Expr::In { path, values } => {
            if values
                .iter()
                .any(|v| matches!(v, Bson::RegularExpression(_)))
            {
                return Err(ineligible(
                    "can't handle $regex predicate (inside $in predicate)",
                    e,
                ));
            }
            if values.iter().any(|v| matches!(v, Bson::Null)) {
                return Err(ineligible(
                    "can't handle {$eq: null} predicate (inside $in predicate)",
                    e,
                ));
            }
            let mut parts = Vec::with_capacity(values.len());
            for v in values {
                let shown = Expr::Cmp {
                    path: path.clone(),
                    op: CmpOp::Eq,
                    value: v.clone(),
                };
                parts.push(comparison(ctx, path, CmpOp::Eq, v, &shown)?);
            }
            Ok(Some(or_of(parts)))
        }
        Expr::Nor(_) | Expr::Other { .. } | Expr::Pathless(_) => {
            Err(ineligible("can't handle this predicate", e))
        }
    }
}

fn or_of(parts: Vec<Document>) -> Document {
    if parts.is_empty() {
        return doc! { "$alwaysFalse": 1 };
    }
    doc! { "$or": parts.into_iter().map(Bson::Document).collect::<Vec<_>>() }
}

/// Translates a view-level `partialFilterExpression` into the bucket-level
/// filter MongoDB stores on the buckets index.
///
/// The result is `{<meta part>, <bucket part>}`. If both parts serialize to
/// the same top-level operator (e.g. both are `$and`), they are combined as
/// `{$and: [<meta part>, <bucket part>]}` because a BSON document here cannot
/// hold duplicate keys (MongoDB writes the duplicate key).
pub fn translate_partial_filter(
    options: &TimeseriesOptions,
    filter: &Document,
) -> Result<PartialFilter, IndexSpecError> {
    let meta = options.meta_field.as_deref();
    let root = simplify(parse_filter(filter)?);
    let (meta_part, residual) = split(root, meta);
    let ctx = Ctx {
        time_field: &options.time_field,
        meta,
        span_millis: options.bucket_max_span_seconds.saturating_mul(1000),
    };
    let meta_doc = match (&meta_part, meta) {
        (Some(m), Some(name)) => serialize_meta(m, name),
        _ => Document::new(),
    };
    let bucket = match &residual {
        Some(Expr::And(c)) if c.is_empty() => None,
        Some(r) => bucket_level(&ctx, r)?,
        None => None,
    };
    let has_measurement_predicate = bucket.is_some();
    let bucket_filter = match bucket {
        None => meta_doc,
        Some(b) if b.keys().any(|k| meta_doc.contains_key(k)) => {
            doc! { "$and": [Bson::Document(meta_doc), Bson::Document(b)] }
        }
        Some(b) => {
            let mut out = meta_doc;
            out.extend(b);
            out
        }
    };
    Ok(PartialFilter {
        bucket_filter,
        has_measurement_predicate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::DateTime;

    fn opts() -> TimeseriesOptions {
        TimeseriesOptions::new("time", Some("m"))
    }

    fn ok(filter: Document) -> Document {
        translate_partial_filter(&opts(), &filter)
            .unwrap()
            .bucket_filter
    }

    fn disallowed(filter: Document) -> IndexSpecError {
        let e = translate_partial_filter(&opts(), &filter).unwrap_err();
        assert_same!(e.code(), 5916301, "{e:?}");
        e
    }

    fn date(s: &str) -> Bson {
        Bson::DateTime(DateTime::parse_rfc3339_str(s).unwrap())
    }

    #[test]
    fn empty_filter_is_empty_and_meta_only() {
        let p = translate_partial_filter(&opts(), &doc! {}).unwrap();
        assert_same!(p.bucket_filter, doc! {});
        assert!(!p.has_measurement_predicate);
    }

    #[test]
    fn scalar_eq_on_measurement() {
        assert_same!(
            ok(doc! {"a": 5}),
            doc! {"$and": [
                {"control.min.a": {"$_internalExprLte": 5}},
                {"control.max.a": {"$_internalExprGte": 5}},
            ]}
        );
    }

    #[test]
    fn range_operators_on_measurement() {
        assert_same!(
            ok(doc! {"b": {"$lt": 12}}),
            doc! {"control.min.b": {"$_internalExprLt": 12}}
        );
        assert_same!(
            ok(doc! {"b": {"$gte": 0}}),
            doc! {"control.max.b": {"$_internalExprGte": 0}}
        );
        assert_same!(
            ok(doc! {"b": {"$gt": 1, "$lte": 9}}),
            doc! {"$and": [
                {"control.max.b": {"$_internalExprGt": 1}},
                {"control.min.b": {"$_internalExprLte": 9}},
            ]}
        );
    }

    #[test]
    fn mixed_meta_time_measurement_and() {
        let filter = doc! {"$and": [
            {"time": {"$gt": date("2000-01-01T00:00:00Z")}},
            {"m.bucket": {"$gte": "B"}},
            {"b": {"$gte": 0}},
        ]};
        let p = translate_partial_filter(&opts(), &filter).unwrap();
        assert!(p.has_measurement_predicate);
        assert_same!(
            p.bucket_filter,
            doc! {
                "meta.bucket": {"$gte": "B"},
                "$and": [
                    {"$and": [
                        {"control.max.time": {"$_internalExprGt": date("2000-01-01T00:00:00Z")}},
                        {"control.min.time": {"$_internalExprGt": date("1999-12-31T23:00:00Z")}},
                    ]},
                    {"control.max.b": {"$_internalExprGte": 0}},
                ],
            }
        );
    }

    #[test]
    fn time_predicates_are_widened_by_the_bucket_span() {
        let t = date("2020-01-01T00:00:00Z");
        assert_same!(
            ok(doc! {"time": {"$lt": t.clone()}}),
            doc! {"$and": [
                {"control.min.time": {"$_internalExprLt": t.clone()}},
                {"control.max.time": {"$_internalExprLt": date("2020-01-01T01:00:00Z")}},
            ]}
        );
        assert_same!(
            ok(doc! {"time": {"$lte": t.clone()}}),
            doc! {"$and": [
                {"control.min.time": {"$_internalExprLte": t.clone()}},
                {"control.max.time": {"$_internalExprLte": date("2020-01-01T01:00:00Z")}},
            ]}
        );
        assert_same!(
            ok(doc! {"time": {"$gte": t.clone()}}),
            doc! {"$and": [
                {"control.max.time": {"$_internalExprGte": t.clone()}},
                {"control.min.time": {"$_internalExprGte": date("2019-12-31T23:00:00Z")}},
            ]}
        );
        assert_same!(
            ok(doc! {"time": {"$eq": t.clone()}}),
            doc! {"$and": [
                {"control.min.time": {"$_internalExprLte": t.clone()}},
                {"control.min.time": {"$_internalExprGte": date("2019-12-31T23:00:00Z")}},
                {"control.max.time": {"$_internalExprGte": t.clone()}},
                {"control.max.time": {"$_internalExprLte": date("2020-01-01T01:00:00Z")}},
            ]}
        );
        // The span follows the collection's bucketMaxSpanSeconds.
        let hours = TimeseriesOptions::with_granularity(
            "time",
            Some("m"),
            crate::options::Granularity::Minutes,
        );
        let f = translate_partial_filter(&hours, &doc! {"time": {"$lt": t.clone()}})
            .unwrap()
            .bucket_filter;
        assert_same!(
            f,
            doc! {"$and": [
                {"control.min.time": {"$_internalExprLt": t}},
                {"control.max.time": {"$_internalExprLt": date("2020-01-02T00:00:00Z")}},
            ]}
        );
    }

    #[test]
    fn exists_true_maps_to_min_and_max() {
        assert_same!(
            ok(doc! {"a": {"$exists": true}}),
            doc! {"$and": [
                {"control.min.a": {"$exists": true}},
                {"control.max.a": {"$exists": true}},
            ]}
        );
        disallowed(doc! {"a": {"$exists": false}});
    }

    #[test]
    fn or_on_meta_metric_and_both() {
        let p = translate_partial_filter(
            &opts(),
            &doc! {"$or": [{"m.a": {"$lt": 5}}, {"m.b": {"$lt": 6}}]},
        )
        .unwrap();
        assert_same!(
            p.bucket_filter,
            doc! {"$or": [{"meta.a": {"$lt": 5}}, {"meta.b": {"$lt": 6}}]}
        );
        assert!(!p.has_measurement_predicate);
        assert_same!(
            ok(doc! {"$or": [{"a": {"$lt": 5}}, {"b": {"$lt": 6}}]}),
            doc! {"$or": [
                {"control.min.a": {"$_internalExprLt": 5}},
                {"control.min.b": {"$_internalExprLt": 6}},
            ]}
        );
        assert_same!(
            ok(doc! {"$or": [{"a": {"$lt": 5}}, {"m.b": {"$lt": 6}}]}),
            doc! {"$or": [{"control.min.a": {"$_internalExprLt": 5}}, {"meta.b": {"$lt": 6}}]}
        );
        disallowed(doc! {"$or": [{}, {"a": {}}]});
    }

    #[test]
    fn in_on_meta_and_metric() {
        assert_same!(
            ok(doc! {"m.a": {"$in": [1, 2, 5]}}),
            doc! {"meta.a": {"$in": [1, 2, 5]}}
        );
        assert_same!(
            ok(doc! {"a": {"$in": [1, 2]}}),
            doc! {"$or": [
                {"$and": [
                    {"control.min.a": {"$_internalExprLte": 1}},
                    {"control.max.a": {"$_internalExprGte": 1}},
                ]},
                {"$and": [
                    {"control.min.a": {"$_internalExprLte": 2}},
                    {"control.max.a": {"$_internalExprGte": 2}},
                ]},
            ]}
        );
        disallowed(doc! {"a": {"$in": [null]}});
        let e = disallowed(doc! {"a": {"$in": [Bson::RegularExpression(bson::Regex {
            pattern: "abc".into(),
            options: String::new(),
        })]}});
        assert!(e
            .message()
            .contains("can't handle $regex predicate (inside $in predicate)"));
    }

    #[test]
    fn meta_equality_becomes_eq_and_is_meta_only() {
        let p = translate_partial_filter(&opts(), &doc! {"m": 5}).unwrap();
        assert_same!(p.bucket_filter, doc! {"meta": {"$eq": 5}});
        assert!(!p.has_measurement_predicate);
        let p = translate_partial_filter(&opts(), &doc! {"m.x": 1, "m.y": {"$gt": 2}}).unwrap();
        assert_same!(
            p.bucket_filter,
            doc! {"$and": [{"meta.x": {"$eq": 1}}, {"meta.y": {"$gt": 2}}]}
        );
        // A field that only shares a prefix with the metaField is a measurement.
        let p = translate_partial_filter(&opts(), &doc! {"mx": 1}).unwrap();
        assert!(p.has_measurement_predicate);
    }

    #[test]
    fn disallowed_predicates_are_5916301() {
        let e = disallowed(doc! {"a": {}});
        assert_same!(&*e.code_name(), "Location5916301");
        assert_same!(
            e.message(),
            "Error translating non-metadata time-series predicate to operate on buckets: \
             operand can't be an object or array: { a: { $eq: {} } }"
        );
        disallowed(doc! {"a": {"b": 3}});
        disallowed(doc! {"a": []});
        disallowed(doc! {"a": [1, 2]});
        let e = disallowed(doc! {"time": 7});
        assert!(e
            .message()
            .contains("because the time field always contains a Date"));
        disallowed(doc! {"time": "abc"});
        let e = disallowed(doc! {"a": null});
        assert!(e.message().contains("can't handle {$eq: null}"));
        disallowed(doc! {"a": {"$eq": null}});
        disallowed(doc! {"a": {"$ne": null}});
        disallowed(doc! {"a": {"$ne": 3}});
        disallowed(doc! {"a": {"$nin": [3]}});
        disallowed(doc! {"$nor": [{"a": 1}]});
        disallowed(doc! {"a": {"$type": "int"}});
        let re = Bson::RegularExpression(bson::Regex {
            pattern: "a".into(),
            options: String::new(),
        });
        let e = disallowed(doc! {"a": re.clone()});
        assert!(e.message().contains("can't handle this predicate"));
        // {$eq: /a/} is a plain comparison, not a regex query.
        assert_same!(
            ok(doc! {"a": {"$eq": re.clone()}}),
            doc! {"$and": [
                {"control.min.a": {"$_internalExprLte": re.clone()}},
                {"control.max.a": {"$_internalExprGte": re}},
            ]}
        );
    }

    #[test]
    fn meta_predicates_of_any_kind_pass_through() {
        let p = translate_partial_filter(&opts(), &doc! {"m.a": {"$ne": null}}).unwrap();
        assert_same!(p.bucket_filter, doc! {"meta.a": {"$ne": null}});
        let p = translate_partial_filter(&opts(), &doc! {"$nor": [{"m.a": 1}]}).unwrap();
        assert_same!(p.bucket_filter, doc! {"$nor": [{"meta.a": {"$eq": 1}}]});
        assert!(!p.has_measurement_predicate);
    }

    #[test]
    fn without_meta_field_everything_is_a_measurement() {
        let o = TimeseriesOptions::new("time", None);
        let p = translate_partial_filter(&o, &doc! {"m": 1}).unwrap();
        assert!(p.has_measurement_predicate);
        assert_same!(
            p.bucket_filter,
            doc! {"$and": [
                {"control.min.m": {"$_internalExprLte": 1}},
                {"control.max.m": {"$_internalExprGte": 1}},
            ]}
        );
    }

    #[test]
    fn malformed_logical_operators_are_bad_value() {
        let e = translate_partial_filter(&opts(), &doc! {"$and": 1}).unwrap_err();
        assert_same!((e.code(), e.message()), (2, "$and must be an array"));
        let e = translate_partial_filter(&opts(), &doc! {"$or": []}).unwrap_err();
        assert_same!(e.message(), "$and/$or/$nor must be a nonempty array");
        let e = translate_partial_filter(&opts(), &doc! {"a": {"$in": 1}}).unwrap_err();
        assert_same!(e.code(), 2);
    }

    #[test]
    fn duplicate_top_level_operators_are_combined() {
        let f = ok(doc! {"m.x": 1, "m.y": 2, "a": 1, "b": 2});
        assert_same!(
            f,
            doc! {"$and": [
                {"$and": [{"meta.x": {"$eq": 1}}, {"meta.y": {"$eq": 2}}]},
                {"$and": [
                    {"$and": [
                        {"control.min.a": {"$_internalExprLte": 1}},
                        {"control.max.a": {"$_internalExprGte": 1}},
                    ]},
                    {"$and": [
                        {"control.min.b": {"$_internalExprLte": 2}},
                        {"control.max.b": {"$_internalExprGte": 2}},
                    ]},
                ]},
            ]}
        );
    }
}
