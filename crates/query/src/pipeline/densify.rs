//! Gap filling stages: `$densify` (numeric and date ranges, partitions,
//! bounds `"full"`, `"partition"` or `[lo, hi]`) and `$fill` (`value`,
//! `locf` and `linear` methods, partitions, `sortBy`).

use bson::{Bson, Document};

use crate::compare::{compare_values, OrdBson};
use crate::error::QueryError;
use crate::expr::{Expr, Unit, Zone};
use crate::num::Num;
use crate::sort::SortSpec;

fn fail(msg: impl Into<String>) -> QueryError {
    QueryError::FailedToParse(msg.into())
}

/// Splits documents into partitions keyed by `key`, in first-seen order.
pub(crate) fn partition(
    docs: Vec<Document>,
    key: impl Fn(&Document) -> Result<Bson, QueryError>,
) -> Result<Vec<(Bson, Vec<Document>)>, QueryError> {
    let mut index: std::collections::BTreeMap<OrdBson, usize> = Default::default();
    let mut parts: Vec<(Bson, Vec<Document>)> = Vec::new();
    for d in docs {
        let k = key(&d)?;
        match index.get(&OrdBson(k.clone())) {
            Some(i) => {
                if let Some(p) = parts.get_mut(*i) {
                    p.1.push(d);
                }
            }
            None => {
                index.insert(OrdBson(k.clone()), parts.len());
                parts.push((k, vec![d]));
            }
        }
    }
    Ok(parts)
}

fn fields_key(fields: &[String], d: &Document) -> Bson {
    let mut k = Document::new();
    for f in fields {
        k.insert(
            f.clone(),
            crate::path::get_path(d, f).cloned().unwrap_or(Bson::Null),
        );
    }
    Bson::Document(k)
}

/// MongoDB's default `internalQueryMaxAllowedDensifyDocs`.
const MAX_DENSIFY_DOCS: u64 = 500_000;

#[derive(Debug, Clone)]
enum Bounds {
    Full,
    Partition,
    Explicit(Box<(Bson, Bson)>),
}

/// A parsed `$densify`.
#[derive(Debug, Clone)]
pub struct Densify {
    field: String,
    partition_by: Vec<String>,
    step: Num,
    unit: Option<Unit>,
    bounds: Bounds,
}

fn utc() -> Result<Zone, QueryError> {
    crate::expr::parse_zone("UTC")
}

impl Densify {
    /// Parses the `$densify` specification.
    pub fn parse(arg: &Bson) -> Result<Densify, QueryError> {
        let Bson::Document(d) = arg else {
            return Err(fail("$densify specification must be an object"));
        };
        let field = match d.get("field") {
            Some(Bson::String(s)) if !s.starts_with('$') => s.clone(),
            Some(Bson::String(_)) => {
                return Err(QueryError::loc(
                    5733407,
                    "Cannot densify field that starts with '$'",
                ))
            }
            _ => {
                return Err(QueryError::loc(
                    40414,
                    "BSON field '$densify.field' is missing but a required field",
                ))
            }
        };
        let partition_by = match d.get("partitionByFields") {
            None => Vec::new(),
            Some(Bson::Array(items)) => items
                .iter()
                .map(|i| match i {
                    Bson::String(s) => Ok(s.clone()),
                    _ => Err(fail("$densify partitionByFields must be strings")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(QueryError::TypeMismatch(
                "BSON field '$densify.partitionByFields' is the wrong type, expected type 'array'"
                    .into(),
            )),
        };
        let Some(Bson::Document(range)) = d.get("range") else {
            return Err(QueryError::loc(
                40414,
                "BSON field '$densify.range' is missing but a required field",
            ));
        };
        if let Some(k) = d
            .keys()
            .find(|k| !matches!(k.as_str(), "field" | "partitionByFields" | "range"))
        {
            return Err(QueryError::loc(
                40415,
                format!("BSON field '$densify.{k}' is an unknown field."),
            ));
        }
        let step = range
            .get("step")
            .and_then(Num::from_bson)
            .filter(|n| n.as_f64() > 0.0)
            .ok_or_else(|| QueryError::loc(5733401, "the step parameter in a range statement must be a strictly positive numeric value"))?;
        let unit =
            match range.get("unit") {
                None => None,
                Some(Bson::String(u)) => Some(
                    Unit::parse(u)
                        .ok_or_else(|| QueryError::bad(format!("unknown time unit value: {u}")))?,
                ),
                Some(_) => return Err(QueryError::TypeMismatch(
                    "BSON field '$densify.range.unit' is the wrong type, expected type 'string'"
                        .into(),
                )),
            };
        if unit.is_some() && step.as_exact_i64().is_none() {
            return Err(QueryError::loc(
                5733402,
                "a bounding array in a range statement with a unit must have an integral step",
            ));
        }
        let bounds = match range.get("bounds") {
            Some(Bson::String(s)) if s == "full" => Bounds::Full,
            Some(Bson::String(s)) if s == "partition" => Bounds::Partition,
            Some(Bson::Array(b)) if b.len() == 2 => {
                let (lo, hi) = (b[0].clone(), b[1].clone());
                let ok = match unit {
                    Some(_) => matches!((&lo, &hi), (Bson::DateTime(_), Bson::DateTime(_))),
                    None => Num::from_bson(&lo).is_some() && Num::from_bson(&hi).is_some(),
                };
                if !ok {
                    return Err(QueryError::loc(5733403, "a bounding array must contain either both dates or both numeric types"));
                }
                if compare_values(&lo, &hi).is_gt() {
                    return Err(QueryError::loc(5733406, "the lower bound in a bounding array must be less than or equal to the upper bound"));
                }
                Bounds::Explicit(Box::new((lo, hi)))
            }
            _ => return Err(QueryError::loc(5946802, "the bounds in a range statement must be the string 'full', 'partition', or an ascending array of two numbers or two dates")),
        };
        if !partition_by.is_empty() && partition_by.contains(&field) {
            return Err(QueryError::loc(
                8993000,
                "BSON field '$densify.field' may not be one of the partitionByFields",
            ));
        }
        Ok(Densify {
            field,
            partition_by,
            step,
            unit,
            bounds,
        })
    }

    fn next(&self, v: &Bson) -> Result<Bson, QueryError> {
        match (v, self.unit) {
            (Bson::DateTime(d), Some(unit)) => {
                let ms = crate::expr::add_units(
                    d.timestamp_millis(),
                    unit,
                    self.step.as_exact_i64().unwrap_or(1),
                    utc()?,
                )?;
                Ok(Bson::DateTime(bson::DateTime::from_millis(ms)))
            }
            (other, None) => match Num::from_bson(other) {
                Some(n) => Ok(n.plus(self.step).to_bson()),
                None => Err(QueryError::loc(
                    5733201,
                    "Densify field type must be numeric",
                )),
            },
            _ => Err(QueryError::loc(
                5733501,
                "Densify field type must be a date when a unit is given",
            )),
        }
    }

    fn check_type(&self, v: &Bson) -> Result<(), QueryError> {
        let ok = match self.unit {
            Some(_) => matches!(v, Bson::DateTime(_)),
            None => Num::from_bson(v).is_some(),
        };
        if ok {
            Ok(())
        } else {
            Err(QueryError::loc(
                5733201,
                format!(
                    "Densify field type must be {}, found {}",
                    if self.unit.is_some() {
                        "a date"
                    } else {
                        "numeric"
                    },
                    crate::compare::type_name(v)
                ),
            ))
        }
    }

    /// Fills the gaps.
    pub fn run(&self, docs: Vec<Document>) -> Result<Vec<Document>, QueryError> {
        let mut passthrough = Vec::new();
        let mut with = Vec::new();
        for d in docs {
            match crate::path::get_path(&d, &self.field) {
                None | Some(Bson::Null) | Some(Bson::Undefined) => passthrough.push(d),
                Some(v) => {
                    self.check_type(v)?;
                    with.push(d);
                }
            }
        }
        let value = |d: &Document| {
            crate::path::get_path(d, &self.field)
                .cloned()
                .unwrap_or(Bson::Null)
        };
        let global = {
            let mut vals: Vec<Bson> = with.iter().map(value).collect();
            vals.sort_by(compare_values);
            (vals.first().cloned(), vals.last().cloned())
        };
        let mut parts = partition(with, |d| Ok(fields_key(&self.partition_by, d)))?;
        if parts.is_empty()
            && self.partition_by.is_empty()
            && matches!(self.bounds, Bounds::Explicit(_))
        {
            // Explicit bounds generate values even from no documents.
            parts.push((Bson::Document(Document::new()), Vec::new()));
        }
        let mut out = Vec::new();
        for (key, mut docs) in parts {
            docs.sort_by(|a, b| compare_values(&value(a), &value(b)));
            let (lo, hi, inclusive_hi) = match &self.bounds {
                Bounds::Full => (global.0.clone(), global.1.clone(), true),
                Bounds::Partition => (docs.first().map(value), docs.last().map(value), true),
                Bounds::Explicit(b) => (Some(b.0.clone()), Some(b.1.clone()), false),
            };
            let (Some(lo), Some(hi)) = (lo, hi) else {
                out.extend(docs);
                continue;
            };
            let mut generated = Vec::new();
            let mut cur = lo;
            let mut guard = 0u64;
            // `docs` is sorted: walk it alongside the generated values.
            let existing: Vec<Bson> = docs.iter().map(value).collect();
            let mut next_existing = 0usize;
            // "full" and "partition" include the upper bound; explicit bounds exclude it.
            while compare_values(&cur, &hi).is_lt()
                || (inclusive_hi && compare_values(&cur, &hi).is_eq())
            {
                while existing
                    .get(next_existing)
                    .is_some_and(|e| compare_values(e, &cur).is_lt())
                {
                    next_existing += 1;
                }
                let present = existing
                    .get(next_existing)
                    .is_some_and(|e| compare_values(e, &cur).is_eq());
                if !present {
                    let mut g = Document::new();
                    if let Bson::Document(k) = &key {
                        for (f, v) in k {
                            if !matches!(v, Bson::Null) {
                                let parts: Vec<&str> = f.split('.').collect();
                                crate::path::set_doc_path(&mut g, &parts, v.clone());
                            }
                        }
                    }
                    let parts: Vec<&str> = self.field.split('.').collect();
                    crate::path::set_doc_path(&mut g, &parts, cur.clone());
                    generated.push(g);
                }
                cur = self.next(&cur)?;
                guard += 1;
                if guard > MAX_DENSIFY_DOCS {
                    return Err(QueryError::loc(
                        5897900,
                        format!("Generated {guard} documents in $densify, which is over the limit of {MAX_DENSIFY_DOCS}. Increase the 'internalQueryMaxAllowedDensifyDocs' parameter to allow more generated documents"),
                    ));
                }
            }
            docs.extend(generated);
            docs.sort_by(|a, b| compare_values(&value(a), &value(b)));
            out.extend(docs);
        }
        out.extend(passthrough);
        Ok(out)
    }
}

#[derive(Debug, Clone)]
enum FillMethod {
    Value(Expr),
    Locf,
    Linear,
}

/// A parsed `$fill`.
#[derive(Debug, Clone)]
pub struct Fill {
    partition_by: Option<Expr>,
    partition_fields: Vec<String>,
    sort: Option<SortSpec>,
    output: Vec<(String, FillMethod)>,
}

impl Fill {
    /// Parses the `$fill` specification.
    pub fn parse(arg: &Bson) -> Result<Fill, QueryError> {
        let Bson::Document(d) = arg else {
            return Err(fail("$fill specification must be an object"));
        };
        let mut f = Fill {
            partition_by: None,
            partition_fields: Vec::new(),
            sort: None,
            output: Vec::new(),
        };
        for (k, v) in d {
            match (k.as_str(), v) {
                ("partitionBy", _) => f.partition_by = Some(Expr::parse(v)?),
                ("partitionByFields", Bson::Array(items)) => {
                    f.partition_fields = items
                        .iter()
                        .map(|i| match i {
                            Bson::String(s) => Ok(s.clone()),
                            _ => Err(fail("$fill partitionByFields must be strings")),
                        })
                        .collect::<Result<_, _>>()?
                }
                ("sortBy", Bson::Document(s)) => f.sort = Some(SortSpec::parse(s)?),
                ("output", Bson::Document(o)) => {
                    for (field, spec) in o {
                        let Bson::Document(s) = spec else {
                            return Err(QueryError::loc(
                                6050200,
                                "Each fill output specification must be an object with exactly one field",
                            ));
                        };
                        let m = match (s.get("method"), s.get("value")) {
                            (Some(Bson::String(m)), None) if m == "locf" => FillMethod::Locf,
                            (Some(Bson::String(m)), None) if m == "linear" => FillMethod::Linear,
                            (None, Some(v)) => FillMethod::Value(Expr::parse(v)?),
                            (Some(_), Some(_)) => return Err(QueryError::loc(6050201, "Each fill output specification must have exactly one of 'method' or 'value' fields, not both")),
                            _ => return Err(QueryError::loc(6050202, "Method must be either locf or linear")),
                        };
                        if matches!(m, FillMethod::Linear | FillMethod::Locf)
                            && f.sort.is_none()
                            && !d.contains_key("sortBy")
                            && matches!(m, FillMethod::Linear)
                        {
                            return Err(QueryError::loc(
                                605001,
                                "$linearFill must be specified with a top level sortBy expression with exactly one element",
                            ));
                        }
                        f.output.push((field.clone(), m));
                    }
                }
                _ => {
                    return Err(QueryError::loc(
                        40415,
                        format!("BSON field '$fill.{k}' is an unknown field."),
                    ))
                }
            }
        }
        if f.output.is_empty() {
            return Err(QueryError::loc(
                40414,
                "BSON field '$fill.output' is missing but a required field",
            ));
        }
        if f.partition_by.is_some() && !f.partition_fields.is_empty() {
            return Err(QueryError::loc(
                6050204,
                "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'",
            ));
        }
        Ok(f)
    }

    /// Fills null or missing values.
    pub fn run(&self, mut docs: Vec<Document>) -> Result<Vec<Document>, QueryError> {
        // Only `value` outputs: MongoDB runs just an `$addFields`, keeping the order.
        if self
            .output
            .iter()
            .all(|(_, m)| matches!(m, FillMethod::Value(_)))
        {
            self.fill_values(&mut docs)?;
            return Ok(docs);
        }
        let parts = partition(docs, |d| match &self.partition_by {
            Some(e) => e.eval(d),
            None => Ok(fields_key(&self.partition_fields, d)),
        })?;
        let mut out = Vec::new();
        for (_, mut docs) in parts {
            if let Some(s) = &self.sort {
                s.sort(&mut docs);
            }
            for (field, method) in &self.output {
                let parts: Vec<&str> = field.split('.').collect();
                let get = |d: &Document| {
                    crate::path::get_path(d, field)
                        .cloned()
                        .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
                };
                match method {
                    // Applied after the window outputs, as MongoDB's `$addFields`.
                    FillMethod::Value(_) => {}
                    // As `$setWindowFields` with `$locf`, the field is always written:
                    // null before the first value.
                    FillMethod::Locf => {
                        let mut last: Option<Bson> = None;
                        for d in docs.iter_mut() {
                            match get(d) {
                                Some(v) => last = Some(v),
                                None => crate::path::set_doc_path(
                                    d,
                                    &parts,
                                    last.clone().unwrap_or(Bson::Null),
                                ),
                            }
                        }
                    }
                    FillMethod::Linear => {
                        let sort_field = self
                            .sort
                            .as_ref()
                            .and_then(|s| s.keys().first())
                            .map(|k| k.0.clone())
                            .unwrap_or_default();
                        let xs: Vec<Option<f64>> = docs
                            .iter()
                            .map(|d| crate::path::get_path(d, &sort_field).and_then(axis))
                            .collect();
                        let ys: Vec<Option<Bson>> = docs.iter().map(get).collect();
                        let filled = linear_fill(&xs, &ys)?;
                        // `$linearFill` writes null where it cannot interpolate.
                        for (d, v) in docs.iter_mut().zip(filled) {
                            if get(d).is_none() {
                                crate::path::set_doc_path(d, &parts, v.unwrap_or(Bson::Null));
                            }
                        }
                    }
                }
            }
            self.fill_values(&mut docs)?;
            out.extend(docs);
        }
        Ok(out)
    }

    /// The `value` outputs: `{$ifNull: ["$field", value]}`.
    fn fill_values(&self, docs: &mut [Document]) -> Result<(), QueryError> {
        for (field, method) in &self.output {
            let FillMethod::Value(e) = method else {
                continue;
            };
            let parts: Vec<&str> = field.split('.').collect();
            for d in docs.iter_mut() {
                let present = crate::path::get_path(d, field)
                    .is_some_and(|v| !matches!(v, Bson::Null | Bson::Undefined));
                if !present {
                    let v = e.eval(d)?;
                    crate::path::set_doc_path(d, &parts, v);
                }
            }
        }
        Ok(())
    }
}

/// A numeric position on the sort axis (numbers, or dates as milliseconds).
pub(crate) fn axis(v: &Bson) -> Option<f64> {
    match v {
        Bson::DateTime(d) => Some(d.timestamp_millis() as f64),
        other => Num::from_bson(other).map(Num::as_f64),
    }
}

/// Linear interpolation of missing `ys` between known neighbours; returns the
/// values to set (only for gaps with a known value on both sides).
pub(crate) fn linear_fill(
    xs: &[Option<f64>],
    ys: &[Option<Bson>],
) -> Result<Vec<Option<Bson>>, QueryError> {
    let mut out = vec![None; ys.len()];
    let known: Vec<usize> = (0..ys.len()).filter(|i| ys[*i].is_some()).collect();
    for w in known.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (Some(ya), Some(yb)) = (
            ys[a].as_ref().and_then(Num::from_bson),
            ys[b].as_ref().and_then(Num::from_bson),
        ) else {
            if b > a + 1 {
                return Err(QueryError::loc(
                    6050106,
                    "Value to be filled must be numeric",
                ));
            }
            continue;
        };
        let (Some(xa), Some(xb)) = (xs[a], xs[b]) else {
            continue;
        };
        for (i, slot) in out.iter_mut().enumerate().take(b).skip(a + 1) {
            let Some(xi) = xs[i] else { continue };
            let t = if xb == xa { 0.0 } else { (xi - xa) / (xb - xa) };
            *slot = Some(Bson::Double(ya.as_f64() + t * (yb.as_f64() - ya.as_f64())));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn densify_numeric_full_range_per_partition() {
        let d = Densify::parse(&Bson::Document(
            doc! {"field": "x", "partitionByFields": ["p"], "range": {"step": 1, "bounds": "full"}},
        ))
        .unwrap();
        let out = d
            .run(vec![
                doc! {"p": "a", "x": 1},
                doc! {"p": "a", "x": 3},
                doc! {"p": "b", "x": 2},
            ])
            .unwrap();
        let xs: Vec<(String, i32)> = out
            .iter()
            .map(|d| (d.get_str("p").unwrap().to_string(), d.get_i32("x").unwrap()))
            .collect();
        assert_eq!(
            xs,
            vec![
                ("a".into(), 1),
                ("a".into(), 2),
                ("a".into(), 3),
                ("b".into(), 1),
                ("b".into(), 2),
                ("b".into(), 3)
            ]
        );
    }

    #[test]
    fn densify_dates_with_explicit_bounds() {
        let t = |h: i64| bson::DateTime::from_millis(h * 3_600_000);
        let d = Densify::parse(&Bson::Document(
            doc! {"field": "t", "range": {"step": 1, "unit": "hour", "bounds": [t(0), t(3)]}},
        ))
        .unwrap();
        let out = d.run(vec![doc! {"t": t(1), "v": 1}]).unwrap();
        let ts: Vec<i64> = out
            .iter()
            .map(|d| d.get_datetime("t").unwrap().timestamp_millis() / 3_600_000)
            .collect();
        assert_eq!(ts, vec![0, 1, 2]);
    }

    #[test]
    fn fill_locf_linear_and_value() {
        let f = Fill::parse(&Bson::Document(doc! {"sortBy": {"x": 1}, "output": {"a": {"method": "locf"}, "b": {"method": "linear"}, "c": {"value": 0}}})).unwrap();
        let out = f
            .run(vec![
                doc! {"x": 1, "a": 5, "b": 10},
                doc! {"x": 2},
                doc! {"x": 3, "b": 30, "c": 1},
            ])
            .unwrap();
        assert_eq!(out[1], doc! {"x": 2, "a": 5, "b": 20.0, "c": 0});
        assert_eq!(out[2].get_i32("c").unwrap(), 1);
    }
}
