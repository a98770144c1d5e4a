//! `$bucket` (explicit boundaries, optional default bucket) and `$bucketAuto`
//! (evenly filled buckets over the sorted `groupBy` values).

use bson::{Bson, Document};

use super::accum::AccSpec;
use super::granularity::Granularity;
use super::group::{group_by, parse_accumulators};
use super::mem::{doc_size, MemLimits};
use crate::compare::{compare_values, same_bracket};
use crate::error::QueryError;
use crate::expr::Expr;

fn default_output() -> Result<Vec<(String, AccSpec)>, QueryError> {
    Ok(vec![(
        "count".into(),
        AccSpec::parse("$sum", &Bson::Int32(1))?,
    )])
}

fn group_by_expr(stage: &str, v: &Bson) -> Result<Expr, QueryError> {
    let ok = match v {
        Bson::String(s) => s.starts_with('$'),
        Bson::Document(d) => d.keys().next().is_some_and(|k| k.starts_with('$')),
        _ => false,
    };
    if !ok {
        return Err(QueryError::loc(
            if stage == "$bucket" { 40202 } else { 40239 },
            format!("The $groupBy field to {stage} must be defined as a $-prefixed path or an expression object, but found: {}", crate::error::render(v)),
        ));
    }
    Expr::parse(v)
}

/// A parsed `$bucket`.
#[derive(Debug, Clone)]
pub struct Bucket {
    group_by: Expr,
    boundaries: Vec<Bson>,
    default: Option<Bson>,
    output: Vec<(String, AccSpec)>,
}

impl Bucket {
    /// Parses the `$bucket` specification.
    pub fn parse(arg: &Bson) -> Result<Bucket, QueryError> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::loc(
                40201,
                format!(
                    "Argument to $bucket stage must be an object, but found type: {}",
                    crate::compare::type_name(arg)
                ),
            ));
        };
        let (mut group, mut bounds, mut default, mut output) = (None, None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "groupBy" => group = Some(group_by_expr("$bucket", v)?),
                "boundaries" => {
                    let Bson::Array(b) = v else {
                        return Err(QueryError::loc(40200, format!("The $bucket 'boundaries' field must be an array, but found type: {}", crate::compare::type_name(v))));
                    };
                    bounds = Some(b.clone());
                }
                "default" => default = Some(v.clone()),
                "output" => {
                    let Bson::Document(o) = v else {
                        return Err(QueryError::loc(
                            40196,
                            format!(
                                "The $bucket 'output' field must be an object, but found type: {}",
                                crate::compare::type_name(v)
                            ),
                        ));
                    };
                    output = Some(parse_accumulators(o)?);
                }
                other => {
                    return Err(QueryError::loc(
                        40197,
                        format!("Unrecognized option to $bucket: {other}."),
                    ))
                }
            }
        }
        let (Some(group_by), Some(boundaries)) = (group, bounds) else {
            return Err(QueryError::loc(
                40198,
                "$bucket requires 'groupBy' and 'boundaries' to be specified.",
            ));
        };
        if boundaries.len() < 2 {
            return Err(QueryError::loc(40192, format!("The $bucket 'boundaries' field must have at least 2 values, but found {} value(s).", boundaries.len())));
        }
        for w in boundaries.windows(2) {
            if let [a, b] = w {
                if !same_bracket(a, b) {
                    return Err(QueryError::loc(40193, "All values in the the 'boundaries' option to $bucket must have the same type."));
                }
                if !compare_values(a, b).is_lt() {
                    return Err(QueryError::loc(
                        40194,
                        "The 'boundaries' option to $bucket must be sorted in ascending order",
                    ));
                }
            }
        }
        if let (Some(def), Some(lo), Some(hi)) = (&default, boundaries.first(), boundaries.last()) {
            if same_bracket(def, lo)
                && compare_values(def, lo).is_ge()
                && compare_values(def, hi).is_lt()
            {
                return Err(QueryError::loc(40199, "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary."));
            }
        }
        Ok(Bucket {
            group_by,
            boundaries,
            default,
            output: match output {
                Some(o) => o,
                None => default_output()?,
            },
        })
    }

    /// Buckets the input.
    pub fn run(
        &self,
        docs: Vec<Document>,
        limits: &MemLimits,
    ) -> Result<Vec<Document>, QueryError> {
        let n = self.boundaries.len() - 1;
        let key = |d: &Document| -> Result<Bson, QueryError> {
            let v = self.group_by.eval(d)?;
            for i in 0..n {
                let (lo, hi) = (&self.boundaries[i], &self.boundaries[i + 1]);
                if same_bracket(&v, lo)
                    && compare_values(&v, lo).is_ge()
                    && compare_values(&v, hi).is_lt()
                {
                    return Ok(Bson::Int64(i as i64));
                }
            }
            if self.default.is_some() {
                return Ok(Bson::Int64(n as i64));
            }
            Err(QueryError::loc(40066, "$switch could not find a matching branch for an input, and no default was specified."))
        };
        let mut groups = group_by(&docs, key, &self.output, limits, "$bucket")?;
        groups.sort_by(|a, b| compare_values(&a.0, &b.0));
        Ok(groups
            .into_iter()
            .map(|(k, vals)| {
                let idx = match k {
                    Bson::Int64(i) => usize::try_from(i).unwrap_or(n),
                    _ => n,
                };
                let id = if idx < n {
                    self.boundaries[idx].clone()
                } else {
                    self.default.clone().unwrap_or(Bson::Null)
                };
                let mut out = Document::new();
                out.insert("_id", id);
                for ((name, _), v) in self.output.iter().zip(vals) {
                    out.insert(name.clone(), v);
                }
                out
            })
            .collect())
    }
}

/// A parsed `$bucketAuto`.
#[derive(Debug, Clone)]
pub struct BucketAuto {
    group_by: Expr,
    buckets: usize,
    granularity: Option<Granularity>,
    output: Vec<(String, AccSpec)>,
}

impl BucketAuto {
    /// Parses the `$bucketAuto` specification.
    pub fn parse(arg: &Bson) -> Result<BucketAuto, QueryError> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::loc(
                40240,
                format!(
                    "The argument to $bucketAuto must be an object, but found type: {}",
                    crate::compare::type_name(arg)
                ),
            ));
        };
        let (mut group, mut buckets, mut output, mut granularity) = (None, None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "groupBy" => group = Some(group_by_expr("$bucketAuto", v)?),
                "buckets" => {
                    let Some(num) = crate::num::Num::from_bson(v) else {
                        return Err(QueryError::loc(40241, format!("The $bucketAuto 'buckets' field must be a numeric value, but found type: {}", crate::compare::type_name(v))));
                    };
                    match num.as_exact_i64() {
                        Some(n) if n > 0 && n <= i64::from(i32::MAX) => buckets = Some(n as usize),
                        Some(n) if n <= 0 => return Err(QueryError::loc(40243, format!("The $bucketAuto 'buckets' field must be greater than 0, but found: {n}"))),
                        _ => return Err(QueryError::loc(40242, format!("The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but found {}", num.as_f64()))),
                    }
                }
                "output" => {
                    let Bson::Document(o) = v else {
                        return Err(QueryError::loc(40244, format!("The $bucketAuto 'output' field must be an object, but found type: {}", crate::compare::type_name(v))));
                    };
                    output = Some(parse_accumulators(o)?);
                }
                "granularity" => {
                    let Bson::String(g) = v else {
                        return Err(QueryError::loc(40261, format!("The $bucketAuto 'granularity' field must be a string, but found type: {}", crate::compare::type_name(v))));
                    };
                    granularity = Some(Granularity::parse(g)?);
                }
                other => {
                    return Err(QueryError::loc(
                        40245,
                        format!("Unrecognized option to $bucketAuto: {other}."),
                    ))
                }
            }
        }
        let (Some(group_by), Some(buckets)) = (group, buckets) else {
            return Err(QueryError::loc(
                40246,
                "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
            ));
        };
        Ok(BucketAuto {
            group_by,
            buckets,
            granularity,
            output: match output {
                Some(o) => o,
                None => default_output()?,
            },
        })
    }

    /// Sorts by `groupBy` and fills the buckets evenly (equal values stay together).
    pub fn run(
        &self,
        docs: Vec<Document>,
        limits: &MemLimits,
    ) -> Result<Vec<Document>, QueryError> {
        let mut used = 0u64;
        let mut keyed = Vec::with_capacity(docs.len());
        for d in docs {
            used += doc_size(&d);
            limits.check_group("$bucketAuto", used)?;
            keyed.push((self.group_by.eval(&d)?, d));
        }
        keyed.sort_by(|a, b| compare_values(&a.0, &b.0));
        if keyed.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(g) = &self.granularity {
            for (k, _) in &keyed {
                g.round_up(k)?;
            }
        }
        let approx = ((keyed.len() as f64 / self.buckets as f64).round() as usize).max(1);
        // (start, end, min, max) of each bucket.
        let mut ranges: Vec<(usize, usize, Bson, Bson)> = Vec::new();
        let mut start = 0;
        while start < keyed.len() {
            let last_bucket = ranges.len() + 1 == self.buckets;
            let mut end = if last_bucket {
                keyed.len()
            } else {
                (start + approx).min(keyed.len())
            };
            let own_max = keyed[end - 1].0.clone();
            let min = match (&self.granularity, ranges.last()) {
                (Some(_), Some(prev)) => prev.3.clone(),
                (Some(g), None) => g.round_down(&keyed[start].0)?,
                (None, _) => keyed[start].0.clone(),
            };
            let max = match &self.granularity {
                Some(g) => {
                    let boundary = g.round_up(&own_max)?;
                    while end < keyed.len() && compare_values(&boundary, &keyed[end].0).is_gt() {
                        end += 1;
                    }
                    let zero = crate::num::Num::from_bson(&boundary).is_some_and(|n| n.is_zero());
                    match keyed.get(end) {
                        Some(next) if zero => g.round_down(&next.0)?,
                        _ => boundary,
                    }
                }
                None => {
                    while end < keyed.len() && compare_values(&own_max, &keyed[end].0).is_eq() {
                        end += 1;
                    }
                    keyed.get(end).map(|n| n.0.clone()).unwrap_or(own_max)
                }
            };
            ranges.push((start, end, min, max));
            start = end;
        }
        let mut out = Vec::new();
        for (s, e, min, max) in ranges {
            let docs: Vec<Document> = keyed[s..e].iter().map(|(_, d)| d.clone()).collect();
            let vals = group_by(
                &docs,
                |_| Ok(Bson::Null),
                &self.output,
                limits,
                "$bucketAuto",
            )?;
            let mut o = Document::new();
            o.insert("_id", bson::doc! {"min": min, "max": max});
            if let Some((_, vals)) = vals.into_iter().next() {
                for ((name, _), v) in self.output.iter().zip(vals) {
                    o.insert(name.clone(), v);
                }
            }
            out.push(o);
        }
        Ok(out)
    }
}
