//! `$setWindowFields`: partitions, `sortBy`, and per-output window
//! functions over `documents` or `range` windows (with time units):
//! accumulators, `$shift`, `$derivative`, `$integral`, `$expMovingAvg`,
//! `$rank`, `$denseRank`, `$documentNumber`, `$locf`, `$linearFill`.

use bson::{Bson, Document};

use super::accum::{AccKind, AccSpec};
use super::densify::{axis, linear_fill, partition};
use super::mem::{doc_size, MemLimits};
use crate::compare::compare_values;
use crate::error::QueryError;
use crate::expr::{Expr, Unit};
use crate::num::Num;
use crate::sort::SortSpec;

fn fail(msg: impl Into<String>) -> QueryError {
    QueryError::FailedToParse(msg.into())
}

#[derive(Debug, Clone, Copy)]
enum Bound {
    Unbounded,
    Current,
    Offset(f64),
}

#[derive(Debug, Clone)]
enum Window {
    Documents(Bound, Bound),
    Range(Bound, Bound, Option<Unit>),
}

#[derive(Debug, Clone)]
enum Func {
    Acc(AccSpec),
    Shift {
        output: Expr,
        by: i64,
        default: Bson,
    },
    Derivative {
        input: Expr,
        unit: Option<Unit>,
    },
    Integral {
        input: Expr,
        unit: Option<Unit>,
    },
    ExpMovingAvg {
        input: Expr,
        alpha: f64,
    },
    Rank,
    DenseRank,
    DocumentNumber,
    Locf(Expr),
    LinearFill(Expr),
    /// `$covariancePop` / `$covarianceSamp` of `[x, y]` pairs.
    Covariance {
        input: Expr,
        samp: bool,
    },
}

#[derive(Debug, Clone)]
struct Output {
    path: Vec<String>,
    func: Func,
    window: Option<Window>,
}

impl Output {
    /// True if computing this output needs documents up to the end of the partition.
    fn needs_whole_partition(&self) -> bool {
        matches!(
            (&self.func, &self.window),
            (Func::LinearFill(_), _)
                | (Func::Acc(_) | Func::Covariance { .. }, None)
                | (_, Some(Window::Documents(_, Bound::Unbounded)))
                | (_, Some(Window::Range(_, Bound::Unbounded, _)))
        )
    }
}

/// A parsed `$setWindowFields`.
#[derive(Debug, Clone)]
pub struct SetWindowFields {
    partition_by: Option<Expr>,
    sort: Option<SortSpec>,
    outputs: Vec<Output>,
}

fn parse_bound(v: &Bson) -> Result<Bound, QueryError> {
    match v {
        Bson::String(s) if s == "unbounded" => Ok(Bound::Unbounded),
        Bson::String(s) if s == "current" => Ok(Bound::Current),
        other => Num::from_bson(other)
            .map(|n| Bound::Offset(n.as_f64()))
            .ok_or_else(|| {
                fail(format!(
                    "Window bounds must be 'unbounded', 'current', or a number, found {}",
                    crate::error::render(other)
                ))
            }),
    }
}

fn parse_window(w: &Document) -> Result<Window, QueryError> {
    let pair = |v: &Bson| -> Result<(Bound, Bound), QueryError> {
        match v {
            Bson::Array(b) if b.len() == 2 => Ok((parse_bound(&b[0])?, parse_bound(&b[1])?)),
            _ => Err(fail("Window bounds must be a 2-element array")),
        }
    };
    let unit = match w.get("unit") {
        None => None,
        Some(Bson::String(u)) => {
            Some(Unit::parse(u).ok_or_else(|| fail(format!("unknown time unit value: {u}")))?)
        }
        Some(_) => return Err(fail("'unit' must be a string")),
    };
    match (w.get("documents"), w.get("range")) {
        (Some(d), None) => {
            if unit.is_some() {
                return Err(fail(
                    "Window bounds can only specify 'unit' with range-based bounds.",
                ));
            }
            let (lo, hi) = pair(d)?;
            if let (Bound::Offset(_) | Bound::Current, Bound::Offset(_) | Bound::Current) = (lo, hi)
            {
                let l = if let Bound::Offset(x) = lo { x } else { 0.0 };
                let h = if let Bound::Offset(x) = hi { x } else { 0.0 };
                if l > h || l.fract() != 0.0 || h.fract() != 0.0 {
                    return Err(fail("Lower bound must not exceed upper bound, and document bounds must be integers"));
                }
            }
            Ok(Window::Documents(lo, hi))
        }
        (None, Some(r)) => {
            let (lo, hi) = pair(r)?;
            Ok(Window::Range(lo, hi, unit))
        }
        (None, None) => Err(fail(
            "'window' field must specify either 'documents' or 'range'",
        )),
        _ => Err(fail(
            "Window bounds can specify either 'documents' or 'range', not both",
        )),
    }
}

fn parse_output(field: &str, spec: &Bson) -> Result<Output, QueryError> {
    let Bson::Document(d) = spec else {
        return Err(fail(format!(
            "$setWindowFields output field '{field}' must be an object"
        )));
    };
    const RANKS: [&str; 3] = ["$rank", "$denseRank", "$documentNumber"];
    if d.keys().any(|k| RANKS.contains(&k.as_str())) && d.len() != 1 {
        return Err(QueryError::loc(
            5371601,
            "Rank style window functions take no other arguments",
        ));
    }
    let mut window = None;
    let mut func = None;
    for (k, v) in d {
        if k == "window" {
            let Bson::Document(w) = v else {
                return Err(fail("'window' field must be an object"));
            };
            window = Some(parse_window(w)?);
            continue;
        }
        if func.is_some() {
            return Err(fail("Cannot specify two functions in window function spec"));
        }
        let obj = || match v {
            Bson::Document(o) => Ok(o),
            _ => Err(fail(format!("Argument to {k} must be an object"))),
        };
        let unit_of = |o: &Document| -> Result<Option<Unit>, QueryError> {
            match o.get("unit") {
                None => Ok(None),
                Some(Bson::String(u)) => Unit::parse(u)
                    .map(Some)
                    .ok_or_else(|| fail(format!("unknown time unit value: {u}"))),
                Some(_) => Err(fail("'unit' must be a string")),
            }
        };
        func = Some(match k.as_str() {
            "$shift" => {
                let (output, by, default) = super::window_shift::parse(d, v)?;
                Func::Shift {
                    output,
                    by,
                    default,
                }
            }
            "$derivative" | "$integral" => {
                let o = obj()?;
                let input = Expr::parse(
                    o.get("input")
                        .ok_or_else(|| fail(format!("{k} requires an 'input' expression")))?,
                )?;
                let unit = unit_of(o)?;
                if k == "$derivative" {
                    Func::Derivative { input, unit }
                } else {
                    Func::Integral { input, unit }
                }
            }
            "$expMovingAvg" => {
                let (input, alpha) = super::window_ema::parse(d, v)?;
                Func::ExpMovingAvg { input, alpha }
            }
            "$rank" | "$denseRank" | "$documentNumber" => {
                if !matches!(v, Bson::Document(o) if o.is_empty()) {
                    return Err(QueryError::loc(
                        5371603,
                        format!("{k} must be specified with '{{}}' as the value"),
                    ));
                }
                match k.as_str() {
                    "$rank" => Func::Rank,
                    "$denseRank" => Func::DenseRank,
                    _ => Func::DocumentNumber,
                }
            }
            "$covariancePop" | "$covarianceSamp" => Func::Covariance {
                input: Expr::parse(v)?,
                samp: k == "$covarianceSamp",
            },
            "$locf" => Func::Locf(Expr::parse(v)?),
            "$linearFill" => Func::LinearFill(Expr::parse(v)?),
            name if !name.starts_with('$') => {
                let first = d.keys().next().map(String::as_str).unwrap_or_default();
                return Err(fail(format!(
                    "Expected a $-prefixed window function, {first}"
                )));
            }
            name => {
                let spec = AccSpec::parse(name, v).map_err(|e| match e {
                    QueryError::Coded(15952, _) => {
                        fail(format!("Unrecognized window function, {name}"))
                    }
                    other => other,
                })?;
                Func::Acc(spec)
            }
        });
    }
    let func = func.ok_or_else(|| fail("Must specify a window function in output field"))?;
    if matches!(func, Func::Derivative { .. }) && window.is_none() {
        return Err(fail("$derivative requires explicit window bounds"));
    }
    if window.is_some()
        && !matches!(
            func,
            Func::Acc(_)
                | Func::Derivative { .. }
                | Func::Integral { .. }
                | Func::Covariance { .. }
        )
    {
        return Err(fail(
            "this window function does not accept a 'window' argument",
        ));
    }
    Ok(Output {
        path: field.split('.').map(String::from).collect(),
        func,
        window,
    })
}

impl SetWindowFields {
    /// Parses the `$setWindowFields` specification.
    pub fn parse(arg: &Bson) -> Result<SetWindowFields, QueryError> {
        let Bson::Document(d) = arg else {
            return Err(fail(
                "the $setWindowFields stage specification must be an object",
            ));
        };
        let mut s = SetWindowFields {
            partition_by: None,
            sort: None,
            outputs: Vec::new(),
        };
        let mut has_output = false;
        for (k, v) in d {
            match (k.as_str(), v) {
                ("partitionBy", _) => s.partition_by = Some(Expr::parse(v)?),
                ("sortBy", Bson::Document(sd)) => s.sort = Some(SortSpec::parse(sd)?),
                ("output", Bson::Document(o)) => {
                    has_output = true;
                    for (f, spec) in o {
                        s.outputs.push(parse_output(f, spec)?);
                    }
                }
                _ => {
                    return Err(QueryError::loc(
                        40415,
                        format!("BSON field '$setWindowFields.{k}' is an unknown field."),
                    ))
                }
            }
        }
        if !has_output {
            return Err(QueryError::loc(
                40414,
                "BSON field '$setWindowFields.output' is missing but a required field",
            ));
        }
        for o in &s.outputs {
            let rank = match o.func {
                Func::Rank => Some("$rank"),
                Func::DenseRank => Some("$denseRank"),
                Func::DocumentNumber => Some("$documentNumber"),
                _ => None,
            };
            if let Some(name) = rank {
                if s.sort.as_ref().is_none_or(|x| x.keys().len() != 1) {
                    return Err(QueryError::loc(
                        5371602,
                        format!("{name} must be specified with a top level sortBy expression with exactly one element"),
                    ));
                }
            }
            let needs_sort = matches!(
                o.func,
                Func::Shift { .. }
                    | Func::ExpMovingAvg { .. }
                    | Func::Derivative { .. }
                    | Func::Integral { .. }
                    | Func::LinearFill(_)
            ) || matches!(o.window, Some(Window::Range(..)))
                || matches!(o.window, Some(Window::Documents(lo, hi)) if !matches!((lo, hi), (Bound::Unbounded, Bound::Unbounded)));
            if matches!(o.func, Func::LinearFill(_))
                && s.sort.as_ref().is_none_or(|x| x.keys().len() != 1)
            {
                return Err(QueryError::loc(
                    605001,
                    "$linearFill must be specified with a top level sortBy expression with exactly one element",
                ));
            }
            if needs_sort && s.sort.is_none() {
                return Err(fail(match o.func {
                    Func::ExpMovingAvg { .. } => "$expMovingAvg requires an explicit 'sortBy'",
                    Func::Shift { .. } => "'$shift' requires a sortBy",
                    Func::Derivative { .. } => "$derivative requires a sortBy",
                    Func::Integral { .. } => "$integral requires a sortBy",
                    _ => "this window function requires a sortBy",
                }));
            }
            if matches!(o.func, Func::Derivative { .. } | Func::Integral { .. })
                && s.sort.as_ref().is_some_and(|x| x.keys().len() != 1)
            {
                let name = if matches!(o.func, Func::Derivative { .. }) {
                    "$derivative"
                } else {
                    "$integral"
                };
                return Err(fail(format!("{name} requires a non-compound sortBy")));
            }
            if matches!(o.window, Some(Window::Range(..)))
                && s.sort.as_ref().is_some_and(|x| x.keys().len() != 1)
            {
                return Err(fail(
                    "range-based windows and rank functions require a sortBy with exactly one field",
                ));
            }
        }
        Ok(s)
    }

    /// Computes the outputs for every document.
    pub fn run(
        &self,
        docs: Vec<Document>,
        limits: &MemLimits,
    ) -> Result<Vec<Document>, QueryError> {
        let mut parts = partition(docs, |d| match &self.partition_by {
            Some(e) => e.eval(d),
            None => Ok(Bson::Null),
        })?;
        // Functions that look ahead to the end of the partition hold the whole
        // partition in memory; that is what counts against the limit.
        if self.outputs.iter().any(Output::needs_whole_partition) {
            for (_, docs) in &parts {
                let used: u64 = docs.iter().map(doc_size).sum();
                limits.check_group("$setWindowFields", used)?;
            }
        }
        if self.partition_by.is_some() {
            parts.sort_by(|a, b| compare_values(&a.0, &b.0));
        }
        let mut out = Vec::new();
        for (_, mut docs) in parts {
            if let Some(s) = &self.sort {
                s.sort(&mut docs);
            }
            let sort_field = self.sort.as_ref().and_then(|s| s.keys().first().cloned());
            let keys: Vec<Option<Bson>> = docs
                .iter()
                .map(|d| {
                    sort_field
                        .as_ref()
                        .and_then(|(f, _)| crate::path::get_path(d, f).cloned())
                })
                .collect();
            let desc = sort_field.as_ref().is_some_and(|(_, asc)| !asc);
            let mut values: Vec<Vec<Option<Bson>>> = Vec::new();
            for o in &self.outputs {
                values.push(self.compute(o, &docs, &keys, desc)?);
            }
            for (i, mut d) in docs.into_iter().enumerate() {
                for (o, vals) in self.outputs.iter().zip(&values) {
                    let parts: Vec<&str> = o.path.iter().map(String::as_str).collect();
                    if let Some(Some(v)) = vals.get(i) {
                        crate::path::set_doc_path(&mut d, &parts, v.clone());
                    }
                }
                out.push(d);
            }
        }
        Ok(out)
    }

    fn window_range(
        w: &Option<Window>,
        i: usize,
        n: usize,
        keys: &[Option<Bson>],
        desc: bool,
    ) -> Result<(usize, usize), QueryError> {
        match w {
            None => Ok((0, n)),
            Some(Window::Documents(lo, hi)) => {
                let pos = |b: &Bound, default: i64| -> i64 {
                    match b {
                        Bound::Unbounded => default,
                        Bound::Current => i as i64,
                        Bound::Offset(x) => (i as i64).saturating_add(*x as i64),
                    }
                };
                let l = pos(lo, 0).clamp(0, n as i64) as usize;
                let h = (pos(hi, n as i64 - 1) + 1).clamp(0, n as i64) as usize;
                Ok((l, h.max(l)))
            }
            Some(Window::Range(lo, hi, unit)) => {
                let Some(cur) = keys.get(i).cloned().flatten() else {
                    return Err(fail(
                        "Invalid range: Expected the sortBy field to be a number or a date",
                    ));
                };
                let shift = |b: &Bound| -> Result<Option<Bson>, QueryError> {
                    Ok(match b {
                        Bound::Unbounded => None,
                        Bound::Current => Some(cur.clone()),
                        Bound::Offset(x) => {
                            let x = if desc { -*x } else { *x };
                            Some(match (&cur, unit) {
                                (Bson::DateTime(d), Some(u)) => {
                                    let ms = crate::expr::add_units(d.timestamp_millis(), *u, x as i64, crate::expr::parse_zone("UTC")?)?;
                                    Bson::DateTime(bson::DateTime::from_millis(ms))
                                }
                                (Bson::DateTime(_), None) => return Err(fail("Invalid range: Expected the sortBy field to be a number, but it was Date")),
                                (other, None) => match Num::from_bson(other) {
                                    Some(n) => Num::F64(n.as_f64() + x).to_bson(),
                                    None => return Err(fail("Invalid range: Expected the sortBy field to be a number")),
                                },
                                (_, Some(_)) => return Err(fail("Invalid range: Expected the sortBy field to be a Date")),
                            })
                        }
                    })
                };
                let (a, b) = (shift(lo)?, shift(hi)?);
                let (low, high) = if desc { (b, a) } else { (a, b) };
                // The partition is sorted on the key, so the window is a contiguous
                // run found by binary search (missing keys sort first ascending, last descending).
                let below = |k: &Bson, bound: &Option<Bson>| {
                    bound.as_ref().is_some_and(|b| compare_values(k, b).is_lt())
                };
                let above = |k: &Bson, bound: &Option<Bson>| {
                    bound.as_ref().is_some_and(|b| compare_values(k, b).is_gt())
                };
                let (l, h) = if desc {
                    let l = keys.partition_point(|k| k.as_ref().is_some_and(|k| above(k, &high)));
                    let h = keys.partition_point(|k| k.as_ref().is_some_and(|k| !below(k, &low)));
                    (l, h)
                } else {
                    let l = keys.partition_point(|k| k.as_ref().is_none_or(|k| below(k, &low)));
                    let h = keys.partition_point(|k| k.as_ref().is_none_or(|k| !above(k, &high)));
                    (l, h)
                };
                if l < h {
                    Ok((l, h))
                } else {
                    Ok((i, i))
                }
            }
        }
    }

    fn compute(
        &self,
        o: &Output,
        docs: &[Document],
        keys: &[Option<Bson>],
        desc: bool,
    ) -> Result<Vec<Option<Bson>>, QueryError> {
        let n = docs.len();
        let mut out = Vec::with_capacity(n);
        match &o.func {
            Func::Acc(spec) => {
                let empty = Document::new();
                let whole = matches!(
                    o.window,
                    None | Some(Window::Documents(Bound::Unbounded, Bound::Unbounded))
                );
                let running = matches!(
                    o.window,
                    Some(Window::Documents(Bound::Unbounded, Bound::Current))
                );
                if whole || running {
                    // One pass: the whole partition, or a running accumulation.
                    let mut acc = spec.start();
                    if whole {
                        for d in docs {
                            spec.add(&mut acc, d, &empty)?;
                        }
                        let v = spec.finish(&acc);
                        out.extend(vec![Some(v); n]);
                    } else {
                        for d in docs {
                            spec.add(&mut acc, d, &empty)?;
                            out.push(Some(spec.finish(&acc)));
                        }
                    }
                    return Ok(out);
                }
                for i in 0..n {
                    let (l, h) = Self::window_range(&o.window, i, n, keys, desc)?;
                    let mut acc = spec.start();
                    for d in &docs[l..h] {
                        spec.add(&mut acc, d, &Document::new())?;
                    }
                    let v = spec.finish(&acc);
                    out.push(Some(
                        if l == h && matches!(spec.kind, AccKind::Sum | AccKind::Count) {
                            Bson::Int32(0)
                        } else {
                            v
                        },
                    ));
                }
            }
            Func::Covariance { input, samp } => {
                let mut pairs = Vec::with_capacity(n);
                for d in docs {
                    pairs.push(numeric_pair(&input.eval(d)?));
                }
                for i in 0..n {
                    let (l, h) = Self::window_range(&o.window, i, n, keys, desc)?;
                    let window = pairs.get(l..h).unwrap_or_default();
                    out.push(Some(covariance(window.iter().flatten(), *samp)));
                }
            }
            Func::Shift {
                output,
                by,
                default,
            } => {
                for i in 0..n {
                    let target = (i as i64)
                        .checked_add(*by)
                        .and_then(|j| usize::try_from(j).ok())
                        .and_then(|j| docs.get(j));
                    let v = match target {
                        Some(d) => output.eval(d)?,
                        None => default.clone(),
                    };
                    out.push(Some(v));
                }
            }
            Func::Derivative { input, unit } | Func::Integral { input, unit } => {
                let unit_ms = match unit {
                    Some(u) => Some(
                        u.millis()
                            .ok_or_else(|| fail("unit must be week or smaller"))?,
                    ),
                    None => None,
                };
                let ys = docs
                    .iter()
                    .map(|d| input.eval_optional(d))
                    .collect::<Result<Vec<_>, _>>()?;
                let ranges = (0..n)
                    .map(|i| Self::window_range(&o.window, i, n, keys, desc))
                    .collect::<Result<Vec<_>, _>>()?;
                out = if matches!(o.func, Func::Derivative { .. }) {
                    super::window_calc::derivative(keys, &ys, &ranges, unit_ms)?
                } else {
                    super::window_calc::integral(keys, &ys, &ranges, unit_ms)?
                };
            }
            Func::ExpMovingAvg { input, alpha } => {
                super::window_ema::run(input, *alpha, docs, &mut out)?;
            }
            Func::Rank | Func::DenseRank | Func::DocumentNumber => {
                let mut rank = 0i64;
                let mut dense = 0i64;
                for i in 0..n {
                    let same =
                        i > 0 && crate::compare::compare_optional(&keys[i], &keys[i - 1]).is_eq();
                    if !same {
                        rank = i as i64 + 1;
                        dense += 1;
                    }
                    let v = match o.func {
                        Func::Rank => rank,
                        Func::DenseRank => dense,
                        _ => i as i64 + 1,
                    };
                    out.push(Some(
                        i32::try_from(v).map(Bson::Int32).unwrap_or(Bson::Int64(v)),
                    ));
                }
            }
            Func::Locf(e) => {
                let mut last = Bson::Null;
                for d in docs {
                    match e.eval(d)? {
                        Bson::Null | Bson::Undefined => out.push(Some(last.clone())),
                        v => {
                            last = v.clone();
                            out.push(Some(v));
                        }
                    }
                }
            }
            Func::LinearFill(e) => {
                let xs: Vec<Option<f64>> = keys.iter().map(|k| k.as_ref().and_then(axis)).collect();
                let mut ys = Vec::with_capacity(n);
                for d in docs {
                    ys.push(
                        Some(e.eval(d)?).filter(|v| !matches!(v, Bson::Null | Bson::Undefined)),
                    );
                }
                let filled = linear_fill(&xs, &ys)?;
                for (y, f) in ys.into_iter().zip(filled) {
                    out.push(Some(y.or(f).unwrap_or(Bson::Null)));
                }
            }
        }
        Ok(out)
    }
}

/// The `[x, y]` of a covariance input when both are numbers.
fn numeric_pair(v: &Bson) -> Option<(f64, f64)> {
    match v {
        Bson::Array(a) if a.len() == 2 => {
            let x = Num::from_bson(&a[0])?.as_f64();
            let y = Num::from_bson(&a[1])?.as_f64();
            Some((x, y))
        }
        _ => None,
    }
}

/// Population (or sample) covariance of the pairs; null without enough of them.
fn covariance<'a>(pairs: impl Iterator<Item = &'a (f64, f64)> + Clone, samp: bool) -> Bson {
    let (mut n, mut sx, mut sy) = (0u64, 0.0, 0.0);
    for (x, y) in pairs.clone() {
        n += 1;
        sx += x;
        sy += y;
    }
    let denom = if samp { n.saturating_sub(1) } else { n };
    if denom == 0 {
        return Bson::Null;
    }
    let (mx, my) = (sx / n as f64, sy / n as f64);
    let c: f64 = pairs.map(|(x, y)| (x - mx) * (y - my)).sum();
    Bson::Double(c / denom as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn run(spec: Document, docs: Vec<Document>) -> Vec<Document> {
        SetWindowFields::parse(&Bson::Document(spec))
            .unwrap()
            .run(docs, &MemLimits::default())
            .unwrap()
    }

    fn input() -> Vec<Document> {
        vec![
            doc! {"p": "a", "t": 1, "v": 10},
            doc! {"p": "a", "t": 2, "v": 20},
            doc! {"p": "b", "t": 1, "v": 5},
            doc! {"p": "a", "t": 4, "v": 40},
        ]
    }

    #[test]
    fn running_sums_over_document_and_range_windows() {
        let out = run(
            doc! {"partitionBy": "$p", "sortBy": {"t": 1}, "output": {
                "run": {"$sum": "$v", "window": {"documents": ["unbounded", "current"]}},
                "near": {"$sum": "$v", "window": {"range": [-1, 0]}},
                "rank": {"$rank": {}},
            }},
            input(),
        );
        let got: Vec<(i32, i32, i32)> = out
            .iter()
            .map(|d| {
                (
                    d.get_i32("run").unwrap(),
                    d.get_i32("near").unwrap(),
                    d.get_i32("rank").unwrap(),
                )
            })
            .collect();
        assert_eq!(got, vec![(10, 10, 1), (30, 30, 2), (70, 40, 3), (5, 5, 1)]);
    }

    #[test]
    fn shift_derivative_integral_and_ema() {
        let out = run(
            doc! {"sortBy": {"t": 1}, "partitionBy": "$p", "output": {
                "prev": {"$shift": {"output": "$v", "by": -1, "default": 0}},
                "d": {"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}},
                "i": {"$integral": {"input": "$v"}, "window": {"documents": ["unbounded", "current"]}},
                "e": {"$expMovingAvg": {"input": "$v", "alpha": 0.5}},
            }},
            input(),
        );
        assert_eq!(out[1].get_i32("prev").unwrap(), 10);
        assert_eq!(out[2].get_f64("d").unwrap(), 10.0);
        assert_eq!(out[2].get_f64("i").unwrap(), 15.0 + 60.0);
        assert_eq!(out[1].get_f64("e").unwrap(), 15.0);
    }

    #[test]
    fn invalid_window_specs_are_rejected() {
        let code = |d: Document| {
            SetWindowFields::parse(&Bson::Document(d))
                .unwrap_err()
                .code()
        };
        assert_eq!(
            code(doc! {"sortBy": {"t": 1}, "output": {"d": {"$derivative": {"input": "$v"}}}}),
            9
        );
        assert_eq!(code(doc! {"output": {"f": {"$linearFill": "$v"}}}), 605001);
        assert_eq!(code(doc! {"output": {"x": {"$sum": 1, "$avg": 1}}}), 9);
        assert_eq!(code(doc! {"output": {"x": {"$rank": {}}}}), 5371602);
        assert_eq!(
            code(
                doc! {"sortBy": {"t": 1}, "output": {"x": {"$sum": 1, "window": {"documents": [1, 0]}}}}
            ),
            9
        );
        assert_eq!(code(doc! {"partitionBy": "$p"}), 40414);
    }

    #[test]
    fn descending_range_windows_look_backwards_in_sort_order() {
        let out = run(
            doc! {"partitionBy": "$p", "sortBy": {"t": -1}, "output": {
                "near": {"$sum": "$v", "window": {"range": [-1, 0]}},
                "all": {"$push": "$t", "window": {"documents": ["unbounded", "current"]}},
            }},
            input(),
        );
        let got: Vec<(i32, i32)> = out
            .iter()
            .map(|d| (d.get_i32("t").unwrap(), d.get_i32("near").unwrap()))
            .collect();
        assert_eq!(got, vec![(4, 40), (2, 20), (1, 30), (1, 5)]);
        assert_eq!(
            out[2].get_array("all").unwrap(),
            &vec![Bson::Int32(4), Bson::Int32(2), Bson::Int32(1)]
        );
    }
    #[test]
    fn rank_functions_need_one_sort_key_and_take_no_window() {
        let err = |d: Document| SetWindowFields::parse(&Bson::Document(d)).unwrap_err();
        for f in ["$rank", "$denseRank", "$documentNumber"] {
            let e = err(doc! {"output": {"r": {f: {}}}});
            assert_eq!(e.code(), 5371602);
            assert_eq!(
                e.message(),
                format!("{f} must be specified with a top level sortBy expression with exactly one element")
            );
            assert_eq!(
                err(doc! {"sortBy": {"a": 1, "b": 1}, "output": {"r": {f: {}}}}).code(),
                5371602
            );
            let e = err(
                doc! {"sortBy": {"a": 1}, "output": {"r": {f: {}, "window": {"documents": [-1, 0]}}}},
            );
            assert_eq!(e.code(), 5371601);
            assert_eq!(
                e.message(),
                "Rank style window functions take no other arguments"
            );
            assert_eq!(
                err(doc! {"sortBy": {"a": 1}, "output": {"r": {f: 1}}}).code(),
                5371603
            );
        }
    }

    #[test]
    fn covariance_pop_and_samp_over_partitions_and_windows() {
        let docs = vec![
            doc! {"t": 1, "x": 1, "y": 2},
            doc! {"t": 2, "x": 2, "y": 4},
            doc! {"t": 3, "x": "skip", "y": 100},
            doc! {"t": 4, "x": 3, "y": 9},
        ];
        let out = run(
            doc! {"sortBy": {"t": 1}, "output": {
                "pop": {"$covariancePop": ["$x", "$y"]},
                "samp": {"$covarianceSamp": ["$x", "$y"]},
                "run": {"$covarianceSamp": ["$x", "$y"], "window": {"documents": ["unbounded", "current"]}},
                "near": {"$covariancePop": ["$x", "$y"], "window": {"range": [-1, 0]}},
            }},
            docs,
        );
        // Pairs (1,2), (2,4), (3,9): means 2 and 5; sum of products of deviations 7.
        assert_eq!(out[0].get_f64("pop").unwrap(), 7.0 / 3.0);
        assert_eq!(out[3].get_f64("samp").unwrap(), 3.5);
        assert_eq!(out[0].get("run"), Some(&Bson::Null));
        assert_eq!(out[1].get_f64("run").unwrap(), 1.0);
        assert_eq!(out[2].get_f64("run").unwrap(), 1.0);
        assert_eq!(out[3].get_f64("run").unwrap(), 3.5);
        assert_eq!(out[0].get_f64("near").unwrap(), 0.0);
        assert_eq!(out[1].get_f64("near").unwrap(), 0.5);
        assert_eq!(out[2].get_f64("near").unwrap(), 0.0);
        assert_eq!(out[3].get_f64("near").unwrap(), 0.0);
    }
}
