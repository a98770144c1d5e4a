//! Accumulators shared by `$group`, `$bucket`, `$bucketAuto` and
//! `$setWindowFields`: `$sum $avg $min $max $first $last $push $addToSet
//! $count $stdDevPop $stdDevSamp $mergeObjects $top $bottom $topN $bottomN
//! $firstN $lastN $minN $maxN $median $percentile`.

use bson::{Bson, Document};

use crate::compare::{compare_values, values_equal};
use crate::error::QueryError;
use crate::expr::Expr;
use crate::num::{Mean, Num};
use crate::sort::SortSpec;

use super::mem::approx_size;

/// Accumulator operators.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AccKind {
    /// `$sum`
    Sum,
    /// `$avg`
    Avg,
    /// `$min`
    Min,
    /// `$max`
    Max,
    /// `$first`
    First,
    /// `$last`
    Last,
    /// `$push`
    Push,
    /// `$addToSet`
    AddToSet,
    /// `$count`
    Count,
    /// `$stdDevPop`
    StdDevPop,
    /// `$stdDevSamp`
    StdDevSamp,
    /// `$mergeObjects`
    MergeObjects,
    /// `$top`
    Top,
    /// `$bottom`
    Bottom,
    /// `$topN`
    TopN,
    /// `$bottomN`
    BottomN,
    /// `$firstN`
    FirstN,
    /// `$lastN`
    LastN,
    /// `$minN`
    MinN,
    /// `$maxN`
    MaxN,
    /// `$median`
    Median,
    /// `$percentile`
    Percentile,
}

/// A parsed accumulator: operator, input expression and options.
#[derive(Debug, Clone)]
pub struct AccSpec {
    /// The operator.
    pub kind: AccKind,
    expr: Expr,
    n: Option<Expr>,
    sort: Option<SortSpec>,
    p: Vec<f64>,
}

fn obj<'a>(name: &str, arg: &'a Bson) -> Result<&'a Document, QueryError> {
    match arg {
        Bson::Document(d) => Ok(d),
        _ => Err(QueryError::loc(
            5787801,
            format!(
                "specification must be an object; found {}",
                crate::error::render(arg)
            ),
        ))
        .map_err(|e| match e {
            QueryError::Coded(c, m) => QueryError::Coded(c, format!("{name} {m}")),
            other => other,
        }),
    }
}

use crate::expr::quantile::required as field;

impl AccSpec {
    /// Parses `{<op>: <arg>}`'s operator and argument.
    pub fn parse(name: &str, arg: &Bson) -> Result<AccSpec, QueryError> {
        let simple = |kind| -> Result<AccSpec, QueryError> {
            Ok(AccSpec {
                kind,
                expr: Expr::parse(arg)?,
                n: None,
                sort: None,
                p: Vec::new(),
            })
        };
        let kind = match name {
            "$sum" => return simple(AccKind::Sum),
            "$avg" => return simple(AccKind::Avg),
            "$min" => return simple(AccKind::Min),
            "$max" => return simple(AccKind::Max),
            "$first" => return simple(AccKind::First),
            "$last" => return simple(AccKind::Last),
            "$push" => return simple(AccKind::Push),
            "$addToSet" => return simple(AccKind::AddToSet),
            "$stdDevPop" => return simple(AccKind::StdDevPop),
            "$stdDevSamp" => return simple(AccKind::StdDevSamp),
            "$mergeObjects" => return simple(AccKind::MergeObjects),
            "$count" => {
                if !matches!(arg, Bson::Document(a) if a.is_empty()) {
                    return Err(QueryError::loc(
                        40237,
                        "$count takes no arguments, i.e. $count:{}",
                    ));
                }
                return Ok(AccSpec {
                    kind: AccKind::Count,
                    expr: Expr::literal(Bson::Int32(1)),
                    n: None,
                    sort: None,
                    p: Vec::new(),
                });
            }
            "$top" => AccKind::Top,
            "$bottom" => AccKind::Bottom,
            "$topN" => AccKind::TopN,
            "$bottomN" => AccKind::BottomN,
            "$firstN" => AccKind::FirstN,
            "$lastN" => AccKind::LastN,
            "$minN" => AccKind::MinN,
            "$maxN" => AccKind::MaxN,
            "$median" => AccKind::Median,
            "$percentile" => AccKind::Percentile,
            other => {
                return Err(QueryError::loc(
                    15952,
                    format!("unknown group operator '{other}'"),
                ))
            }
        };
        let d = obj(name, arg)?;
        let mut spec = AccSpec {
            kind,
            expr: Expr::literal(Bson::Null),
            n: None,
            sort: None,
            p: Vec::new(),
        };
        let allowed: &[&str] = match kind {
            AccKind::Top | AccKind::Bottom => &["output", "sortBy"],
            AccKind::TopN | AccKind::BottomN => &["output", "sortBy", "n"],
            AccKind::Median => &["input", "method"],
            AccKind::Percentile => &["input", "method", "p"],
            _ => &["input", "n"],
        };
        let n_kind = matches!(
            kind,
            AccKind::FirstN | AccKind::LastN | AccKind::MinN | AccKind::MaxN
        );
        if let Some(k) = d.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(QueryError::loc(
                5787901,
                if n_kind {
                    format!("Unknown argument for 'n' operator: {k}")
                } else {
                    format!("Unknown argument for {name}: {k}")
                },
            ));
        }
        if n_kind {
            // MongoDB wants 'n' (5787906) before 'input' (5787907).
            for (k, code) in [("n", 5787906), ("input", 5787907)] {
                if !d.contains_key(k) {
                    return Err(QueryError::loc(code, format!("Missing value for '{k}'")));
                }
            }
        }
        match kind {
            AccKind::Top | AccKind::Bottom | AccKind::TopN | AccKind::BottomN => {
                spec.expr = Expr::parse(field(name, d, "output")?)?;
                let Bson::Document(s) = field(name, d, "sortBy")? else {
                    return Err(QueryError::loc(
                        5788604,
                        format!("{name} requires 'sortBy' to be an object"),
                    ));
                };
                spec.sort = Some(SortSpec::parse(s)?);
            }
            _ => spec.expr = Expr::parse(field(name, d, "input")?)?,
        }
        if matches!(
            kind,
            AccKind::TopN
                | AccKind::BottomN
                | AccKind::FirstN
                | AccKind::LastN
                | AccKind::MinN
                | AccKind::MaxN
        ) {
            spec.n = Some(Expr::parse(field(name, d, "n")?)?);
        }
        if matches!(kind, AccKind::Median | AccKind::Percentile) {
            spec.p = crate::expr::quantile::parse_spec(name, d)?;
        }
        Ok(spec)
    }

    /// A fresh accumulator state.
    pub fn start(&self) -> Acc {
        Acc {
            state: match self.kind {
                AccKind::Sum | AccKind::Count => State::Sum(Num::I32(0)),
                AccKind::Avg => State::Avg(Mean::default()),
                AccKind::StdDevPop | AccKind::StdDevSamp => State::Std(0, 0.0, 0.0),
                AccKind::MergeObjects => State::Merge(Document::new()),
                AccKind::First => State::First(None),
                _ => State::Vals(Vec::new()),
            },
            n: None,
            bytes: 0,
        }
    }

    fn n_value(&self, doc: &Document) -> Result<Option<usize>, QueryError> {
        let Some(e) = &self.n else { return Ok(None) };
        crate::expr::validate_n(&e.eval_optional(doc)?).map(Some)
    }

    /// Adds one input document; `n_doc` is what `n` is evaluated against
    /// (the group key as `{_id: ...}` in `$group`).
    pub fn add(&self, acc: &mut Acc, doc: &Document, n_doc: &Document) -> Result<(), QueryError> {
        if acc.n.is_none() && self.n.is_some() {
            acc.n = self.n_value(n_doc)?;
        }
        let v = self.expr.eval_optional(doc)?;
        self.add_input(acc, v, doc)
    }

    /// Whether the input is the expression's value alone: no `n`, no sort reading the
    /// whole document, no quantiles ([`AccSpec::add_value`] applies).
    pub(crate) fn takes_values(&self) -> bool {
        self.n.is_none()
            && self.sort.is_none()
            && !matches!(self.kind, AccKind::Median | AccKind::Percentile)
    }

    /// Adds the value `v` of the input expression for one document, for accumulators
    /// that read nothing else ([`AccSpec::takes_values`]).
    pub(crate) fn add_value(&self, acc: &mut Acc, v: Option<Bson>) -> Result<(), QueryError> {
        self.add_input(acc, v, &Document::new())
    }

    fn add_input(&self, acc: &mut Acc, v: Option<Bson>, doc: &Document) -> Result<(), QueryError> {
        let before = acc.bytes;
        match (&mut acc.state, self.kind) {
            (State::Sum(total), _) => {
                if let Some(n) = v.as_ref().and_then(Num::from_bson) {
                    *total = total.plus(n);
                }
            }
            (State::Avg(mean), _) => {
                if let Some(n) = v.as_ref().and_then(Num::from_bson) {
                    mean.add(n);
                }
            }
            (State::Std(count, mean, m2), _) => {
                if let Some(x) = v.as_ref().and_then(Num::from_bson).map(Num::as_f64) {
                    *count += 1;
                    let delta = x - *mean;
                    *mean += delta / *count as f64;
                    *m2 += delta * (x - *mean);
                }
            }
            (State::Merge(out), _) => match v {
                None | Some(Bson::Null) | Some(Bson::Undefined) => {}
                Some(Bson::Document(d)) => {
                    for (k, val) in d {
                        out.insert(k, val);
                    }
                }
                Some(other) => {
                    return Err(QueryError::loc(
                        40400,
                        format!(
                            "$mergeObjects requires object inputs, but input {} is of type {}",
                            crate::error::render(&other),
                            crate::compare::type_name(&other)
                        ),
                    ))
                }
            },
            (State::First(first), _) => {
                if first.is_none() {
                    let v = v.unwrap_or(Bson::Null);
                    acc.bytes += approx_size(&v);
                    *first = Some(v);
                }
            }
            (State::Vals(items), kind) => match kind {
                AccKind::Min | AccKind::Max => {
                    if let Some(v) = v.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) {
                        let replace = match items.first() {
                            None => true,
                            Some((b, _)) => {
                                let o = compare_values(&v, b);
                                if kind == AccKind::Min {
                                    o.is_lt()
                                } else {
                                    o.is_gt()
                                }
                            }
                        };
                        if replace {
                            acc.bytes = approx_size(&v);
                            items.clear();
                            items.push((v, None));
                        }
                    }
                }
                AccKind::Last => {
                    let v = v.unwrap_or(Bson::Null);
                    acc.bytes = approx_size(&v);
                    items.clear();
                    items.push((v, None));
                }
                AccKind::Push => {
                    if let Some(v) = v {
                        acc.bytes += approx_size(&v);
                        items.push((v, None));
                    }
                }
                AccKind::AddToSet => {
                    if let Some(v) = v {
                        if !items.iter().any(|(i, _)| values_equal(i, &v)) {
                            acc.bytes += approx_size(&v);
                            items.push((v, None));
                        }
                    }
                }
                AccKind::Top | AccKind::Bottom | AccKind::TopN | AccKind::BottomN => {
                    let v = v.unwrap_or(Bson::Null);
                    acc.bytes += approx_size(&v) + super::mem::doc_size(doc);
                    items.push((v, Some(doc.clone())));
                    self.trim_sorted(acc);
                }
                AccKind::FirstN if items.len() < acc.n.unwrap_or(usize::MAX) => {
                    let v = v.unwrap_or(Bson::Null);
                    acc.bytes += approx_size(&v);
                    items.push((v, None));
                }
                AccKind::LastN => {
                    let v = v.unwrap_or(Bson::Null);
                    acc.bytes += approx_size(&v);
                    items.push((v, None));
                    if items.len() > acc.n.unwrap_or(usize::MAX) {
                        let (old, _) = items.remove(0);
                        acc.bytes = acc.bytes.saturating_sub(approx_size(&old));
                    }
                }
                AccKind::MinN | AccKind::MaxN => {
                    if let Some(v) = v.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) {
                        acc.bytes += approx_size(&v);
                        items.push((v, None));
                        let max = kind == AccKind::MaxN;
                        items.sort_by(|(a, _), (b, _)| {
                            let o = compare_values(a, b);
                            if max {
                                o.reverse()
                            } else {
                                o
                            }
                        });
                        if items.len() > acc.n.unwrap_or(usize::MAX) {
                            if let Some((old, _)) = items.pop() {
                                acc.bytes = acc.bytes.saturating_sub(approx_size(&old));
                            }
                        }
                    }
                }
                AccKind::Median | AccKind::Percentile => {
                    if let Some(n) = v.as_ref().and_then(Num::from_bson) {
                        acc.bytes += 16;
                        items.push((Bson::Double(n.as_f64()), None));
                    }
                }
                _ => {}
            },
        }
        let _ = before;
        Ok(())
    }

    fn trim_sorted(&self, acc: &mut Acc) {
        let State::Vals(items) = &mut acc.state else {
            return;
        };
        let keep = match self.kind {
            AccKind::Top | AccKind::Bottom => 1,
            _ => acc.n.unwrap_or(usize::MAX),
        };
        let Some(sort) = &self.sort else { return };
        let bottom = matches!(self.kind, AccKind::Bottom | AccKind::BottomN);
        items.sort_by(|(_, a), (_, b)| {
            let (a, b) = (a.as_ref(), b.as_ref());
            match (a, b) {
                (Some(a), Some(b)) => sort.compare(a, b),
                _ => std::cmp::Ordering::Equal,
            }
        });
        while items.len() > keep {
            let removed = if bottom {
                items.remove(0)
            } else {
                match items.pop() {
                    Some(x) => x,
                    None => break,
                }
            };
            acc.bytes = acc.bytes.saturating_sub(
                approx_size(&removed.0) + removed.1.as_ref().map(super::mem::doc_size).unwrap_or(0),
            );
        }
    }

    /// The accumulated result.
    pub fn finish(&self, acc: &Acc) -> Bson {
        match &acc.state {
            State::Sum(n) => n.to_bson(),
            State::Avg(mean) => mean.finish(),
            State::Std(count, _, m2) => {
                let denom = match self.kind {
                    AccKind::StdDevSamp if *count >= 2 => *count - 1,
                    AccKind::StdDevPop if *count >= 1 => *count,
                    _ => return Bson::Null,
                };
                Bson::Double((m2 / denom as f64).max(0.0).sqrt())
            }
            State::Merge(d) => Bson::Document(d.clone()),
            State::First(v) => v.clone().unwrap_or(Bson::Null),
            State::Vals(items) => match self.kind {
                AccKind::Min | AccKind::Max | AccKind::Last | AccKind::Top | AccKind::Bottom => {
                    items.first().map(|(v, _)| v.clone()).unwrap_or(Bson::Null)
                }
                AccKind::Median | AccKind::Percentile => {
                    let xs: Vec<f64> = items
                        .iter()
                        .filter_map(|(v, _)| Num::from_bson(v).map(Num::as_f64))
                        .collect();
                    if self.kind == AccKind::Median {
                        crate::expr::quantile::percentiles(xs, &[0.5])
                            .pop()
                            .unwrap_or(Bson::Null)
                    } else {
                        Bson::Array(crate::expr::quantile::percentiles(xs, &self.p))
                    }
                }
                _ => Bson::Array(items.iter().map(|(v, _)| v.clone()).collect()),
            },
        }
    }
}

#[derive(Debug, Clone)]
enum State {
    Sum(Num),
    Avg(Mean),
    /// Welford: count, mean, sum of squared deviations.
    Std(u64, f64, f64),
    Merge(Document),
    First(Option<Bson>),
    /// Values, with the input document for sorted accumulators.
    Vals(Vec<(Bson, Option<Document>)>),
}

/// The running state of one accumulator.
#[derive(Debug, Clone)]
pub struct Acc {
    state: State,
    n: Option<usize>,
    /// Approximate bytes held.
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn acc(name: &str, arg: Bson, docs: &[Document]) -> Bson {
        let spec = AccSpec::parse(name, &arg).unwrap();
        let mut a = spec.start();
        for d in docs {
            spec.add(&mut a, d, &doc! {}).unwrap();
        }
        spec.finish(&a)
    }

    fn docs() -> Vec<Document> {
        vec![
            doc! {"v": 4, "t": 2},
            doc! {"v": 1, "t": 3},
            doc! {"v": 3, "t": 1},
            doc! {"t": 4},
            doc! {"v": 2, "t": 5},
        ]
    }

    #[test]
    fn std_dev_pop_and_samp() {
        let d = vec![
            doc! {"v": 2},
            doc! {"v": 4},
            doc! {"v": 4},
            doc! {"v": 4},
            doc! {"v": 5},
            doc! {"v": 5},
            doc! {"v": 7},
            doc! {"v": 9},
        ];
        assert_eq!(acc("$stdDevPop", "$v".into(), &d), Bson::Double(2.0));
        let s = acc("$stdDevSamp", "$v".into(), &d);
        assert!(matches!(s, Bson::Double(x) if (x - 2.138_089_935).abs() < 1e-6));
        assert_eq!(acc("$stdDevSamp", "$v".into(), &d[..1]), Bson::Null);
    }

    #[test]
    fn top_bottom_and_n_variants() {
        let sort = doc! {"t": 1};
        assert_eq!(
            acc(
                "$top",
                doc! {"output": "$v", "sortBy": sort.clone()}.into(),
                &docs()
            ),
            Bson::Int32(3)
        );
        assert_eq!(
            acc(
                "$bottom",
                doc! {"output": "$v", "sortBy": sort.clone()}.into(),
                &docs()
            ),
            Bson::Int32(2)
        );
        assert_eq!(
            acc(
                "$topN",
                doc! {"output": "$v", "sortBy": sort.clone(), "n": 2}.into(),
                &docs()
            ),
            Bson::Array(vec![3.into(), 4.into()])
        );
        assert_eq!(
            acc(
                "$bottomN",
                doc! {"output": "$v", "sortBy": sort, "n": 2}.into(),
                &docs()
            ),
            Bson::Array(vec![Bson::Null, 2.into()])
        );
        assert_eq!(
            acc("$firstN", doc! {"input": "$v", "n": 2}.into(), &docs()),
            Bson::Array(vec![4.into(), 1.into()])
        );
        assert_eq!(
            acc("$lastN", doc! {"input": "$v", "n": 2}.into(), &docs()),
            Bson::Array(vec![Bson::Null, 2.into()])
        );
        assert_eq!(
            acc("$minN", doc! {"input": "$v", "n": 2}.into(), &docs()),
            Bson::Array(vec![1.into(), 2.into()])
        );
        assert_eq!(
            acc("$maxN", doc! {"input": "$v", "n": 2}.into(), &docs()),
            Bson::Array(vec![4.into(), 3.into()])
        );
    }

    #[test]
    fn median_percentile_merge_objects() {
        assert_eq!(
            acc(
                "$median",
                doc! {"input": "$v", "method": "approximate"}.into(),
                &docs()
            ),
            Bson::Double(2.0)
        );
        assert_eq!(
            acc(
                "$percentile",
                doc! {"input": "$v", "p": [0.25, 1.0], "method": "approximate"}.into(),
                &docs()
            ),
            Bson::Array(vec![Bson::Double(1.0), Bson::Double(4.0)])
        );
        assert_eq!(
            acc(
                "$mergeObjects",
                "$o".into(),
                &[doc! {"o": {"a": 1}}, doc! {"o": {"b": 2, "a": 3}}, doc! {}]
            ),
            Bson::Document(doc! {"a": 3, "b": 2})
        );
    }

    #[test]
    fn bad_accumulator_arguments_are_rejected() {
        assert!(AccSpec::parse("$topN", &Bson::Document(doc! {"output": "$v"})).is_err());
        assert!(AccSpec::parse(
            "$percentile",
            &Bson::Document(doc! {"input": "$v", "p": [2], "method": "approximate"})
        )
        .is_err());
        let spec =
            AccSpec::parse("$firstN", &Bson::Document(doc! {"input": "$v", "n": 0})).unwrap();
        let mut a = spec.start();
        assert_eq!(
            spec.add(&mut a, &doc! {}, &doc! {}).unwrap_err().code(),
            5787908
        );
    }
}
