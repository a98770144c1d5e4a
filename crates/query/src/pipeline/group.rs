//! The `$group` stage: group key expressions and accumulators
//! (`$sum $avg $min $max $first $last $push $addToSet $count`).

use std::collections::BTreeMap;

use bson::{Bson, Document};

use crate::compare::{compare_values, values_equal, OrdBson};
use crate::error::QueryError;
use crate::expr::Expr;
use crate::num::Num;

/// A parsed `$group` stage.
#[derive(Debug, Clone)]
pub struct Group {
    id: Expr,
    accs: Vec<(String, AccKind, Expr)>,
}

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
}

#[derive(Debug, Clone)]
enum State {
    Sum(Num),
    Avg(f64, u64, bool),
    Best(Option<Bson>),
    First(Option<Bson>),
    List(Vec<Bson>),
}

impl Group {
    /// Parses the `$group` specification.
    pub fn parse(spec: &Bson) -> Result<Group, QueryError> {
        let Bson::Document(d) = spec else {
            return Err(QueryError::loc(
                15947,
                "a group's fields must be specified in an object",
            ));
        };
        let mut id = None;
        let mut accs = Vec::new();
        for (k, v) in d {
            if k == "_id" {
                id = Some(Expr::parse(v)?);
                continue;
            }
            if k.contains('.') {
                return Err(QueryError::loc(
                    40235,
                    format!("The field name '{k}' cannot contain '.'"),
                ));
            }
            if k.starts_with('$') {
                return Err(QueryError::loc(
                    40236,
                    format!("The field name '{k}' cannot be an operator name"),
                ));
            }
            let Bson::Document(acc) = v else {
                return Err(QueryError::loc(
                    40234,
                    format!("The field '{k}' must be an accumulator object"),
                ));
            };
            if acc.len() != 1 {
                return Err(QueryError::loc(
                    40238,
                    format!("The field '{k}' must specify one accumulator"),
                ));
            }
            let (name, arg) = acc
                .iter()
                .next()
                .ok_or_else(|| QueryError::loc(40238, "empty accumulator"))?;
            let kind = match name.as_str() {
                "$sum" => AccKind::Sum,
                "$avg" => AccKind::Avg,
                "$min" => AccKind::Min,
                "$max" => AccKind::Max,
                "$first" => AccKind::First,
                "$last" => AccKind::Last,
                "$push" => AccKind::Push,
                "$addToSet" => AccKind::AddToSet,
                "$count" => {
                    if !matches!(arg, Bson::Document(a) if a.is_empty()) {
                        return Err(QueryError::loc(
                            40237,
                            "$count takes no arguments, i.e. $count:{}",
                        ));
                    }
                    AccKind::Count
                }
                other => {
                    return Err(QueryError::loc(
                        15952,
                        format!("unknown group operator '{other}'"),
                    ))
                }
            };
            let expr = if kind == AccKind::Count {
                Expr::literal(Bson::Int32(1))
            } else {
                Expr::parse(arg)?
            };
            accs.push((k.clone(), kind, expr));
        }
        let id =
            id.ok_or_else(|| QueryError::loc(15955, "a group specification must include an _id"))?;
        Ok(Group { id, accs })
    }

    fn initial(&self) -> Vec<State> {
        self.accs
            .iter()
            .map(|(_, kind, _)| match kind {
                AccKind::Sum | AccKind::Count => State::Sum(Num::I32(0)),
                AccKind::Avg => State::Avg(0.0, 0, false),
                AccKind::Min | AccKind::Max => State::Best(None),
                AccKind::First => State::First(None),
                AccKind::Last => State::Best(None),
                AccKind::Push | AccKind::AddToSet => State::List(Vec::new()),
            })
            .collect()
    }

    /// Runs the grouping over `input`; groups come out in first-seen order.
    pub fn run(&self, input: Vec<Document>) -> Result<Vec<Document>, QueryError> {
        let mut index: BTreeMap<OrdBson, usize> = BTreeMap::new();
        let mut groups: Vec<(Bson, Vec<State>)> = Vec::new();
        for doc in &input {
            let key = self.id.eval(doc)?;
            let slot = match index.get(&OrdBson(key.clone())) {
                Some(i) => *i,
                None => {
                    groups.push((key.clone(), self.initial()));
                    index.insert(OrdBson(key), groups.len() - 1);
                    groups.len() - 1
                }
            };
            let Some((_, states)) = groups.get_mut(slot) else {
                continue;
            };
            for ((_, kind, expr), state) in self.accs.iter().zip(states.iter_mut()) {
                let v = expr.eval_optional(doc)?;
                accumulate(*kind, state, v);
            }
        }
        Ok(groups
            .into_iter()
            .map(|(key, states)| {
                let mut out = Document::new();
                out.insert("_id", key);
                for ((name, kind, _), state) in self.accs.iter().zip(states) {
                    out.insert(name.clone(), finish(*kind, state));
                }
                out
            })
            .collect())
    }
}

fn accumulate(kind: AccKind, state: &mut State, v: Option<Bson>) {
    match (kind, state) {
        (AccKind::Sum | AccKind::Count, State::Sum(total)) => {
            if let Some(n) = v.as_ref().and_then(Num::from_bson) {
                *total = total.plus(n);
            }
        }
        (AccKind::Avg, State::Avg(sum, count, dec)) => {
            if let Some(n) = v.as_ref().and_then(Num::from_bson) {
                *sum += n.as_f64();
                *count += 1;
                *dec |= matches!(n, Num::Dec(_));
            }
        }
        (AccKind::Min | AccKind::Max, State::Best(best)) => {
            let Some(v) = v.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) else {
                return;
            };
            let replace = match best {
                None => true,
                Some(b) => {
                    let o = compare_values(&v, b);
                    if kind == AccKind::Min {
                        o.is_lt()
                    } else {
                        o.is_gt()
                    }
                }
            };
            if replace {
                *best = Some(v);
            }
        }
        (AccKind::First, State::First(first)) if first.is_none() => {
            *first = Some(v.unwrap_or(Bson::Null));
        }
        (AccKind::Last, State::Best(last)) => *last = Some(v.unwrap_or(Bson::Null)),
        (AccKind::Push, State::List(items)) => {
            if let Some(v) = v {
                items.push(v);
            }
        }
        (AccKind::AddToSet, State::List(items)) => {
            if let Some(v) = v {
                if !items.iter().any(|i| values_equal(i, &v)) {
                    items.push(v);
                }
            }
        }
        _ => {}
    }
}

fn finish(kind: AccKind, state: State) -> Bson {
    match state {
        State::Sum(n) => n.to_bson(),
        State::Avg(sum, count, dec) => {
            if count == 0 {
                Bson::Null
            } else if dec {
                Num::Dec(sum / count as f64).to_bson()
            } else {
                Bson::Double(sum / count as f64)
            }
        }
        State::Best(v) | State::First(v) => v.unwrap_or(Bson::Null),
        State::List(items) => {
            let _ = kind;
            Bson::Array(items)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn run(spec: Document, input: Vec<Document>) -> Vec<Document> {
        Group::parse(&Bson::Document(spec))
            .unwrap()
            .run(input)
            .unwrap()
    }

    fn sample() -> Vec<Document> {
        vec![
            doc! {"k": "a", "v": 1},
            doc! {"k": "b", "v": 2.5},
            doc! {"k": "a", "v": 3},
            doc! {"k": "a", "v": "x"},
            doc! {"k": "b"},
        ]
    }

    #[test]
    fn sum_avg_min_max_count_per_group_in_first_seen_order() {
        let out = run(
            doc! {"_id": "$k", "s": {"$sum": "$v"}, "a": {"$avg": "$v"}, "mn": {"$min": "$v"}, "mx": {"$max": "$v"}, "c": {"$count": {}}, "n": {"$sum": 1}},
            sample(),
        );
        assert_eq!(
            out[0],
            doc! {"_id": "a", "s": 4, "a": 2.0, "mn": 1, "mx": "x", "c": 3, "n": 3}
        );
        assert_eq!(
            out[1],
            doc! {"_id": "b", "s": 2.5, "a": 2.5, "mn": 2.5, "mx": 2.5, "c": 2, "n": 2}
        );
    }

    #[test]
    fn first_last_push_add_to_set() {
        let out = run(
            doc! {"_id": "$k", "f": {"$first": "$v"}, "l": {"$last": "$v"}, "p": {"$push": "$v"}, "s": {"$addToSet": "$k"}},
            sample(),
        );
        assert_eq!(
            out[1],
            doc! {"_id": "b", "f": 2.5, "l": null, "p": [2.5], "s": ["b"]}
        );
        assert_eq!(out[0].get_array("p").unwrap().len(), 3);
    }

    #[test]
    fn null_id_groups_everything_and_numeric_keys_unify() {
        let out = run(doc! {"_id": null, "n": {"$sum": 1}}, sample());
        assert_eq!(out, vec![doc! {"_id": null, "n": 5}]);
        let out = run(
            doc! {"_id": "$x", "n": {"$sum": 1}},
            vec![doc! {"x": 1}, doc! {"x": 1.0}],
        );
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn document_ids_group_by_computed_keys() {
        let out = run(doc! {"_id": {"k": "$k"}, "n": {"$sum": 1}}, sample());
        assert_eq!(out[0], doc! {"_id": {"k": "a"}, "n": 3});
    }

    #[test]
    fn invalid_group_specs_are_rejected() {
        let err = |s: Document| Group::parse(&Bson::Document(s)).unwrap_err().code();
        assert_eq!(err(doc! {"n": {"$sum": 1}}), 15955);
        assert_eq!(err(doc! {"_id": null, "n": {"$bogus": 1}}), 15952);
        assert_eq!(err(doc! {"_id": null, "n": 1}), 40234);
        assert_eq!(err(doc! {"_id": null, "a.b": {"$sum": 1}}), 40235);
    }
}
