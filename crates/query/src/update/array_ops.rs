//! Array update operators: `$push` (with `$each`, `$position`, `$sort`,
//! `$slice`), `$addToSet` (with `$each`), `$pull`, `$pullAll` and `$pop`.

use bson::{Bson, Document};

use super::{paths, Op};
use crate::compare::{compare_values, type_name, values_equal};
use crate::error::{render, render_id, QueryError};
use crate::filter::{Filter, ValueMatcher};
use crate::num::Num;
use crate::sort::SortSpec;

/// How `$push` sorts the array after inserting.
#[derive(Debug, Clone)]
pub enum PushSort {
    /// Sort whole elements (true = ascending).
    Whole(bool),
    /// Sort document elements by fields.
    Fields(SortSpec),
}

/// A parsed `$push` argument.
#[derive(Debug, Clone)]
pub struct PushSpec {
    each: Vec<Bson>,
    position: Option<i64>,
    slice: Option<i64>,
    sort: Option<PushSort>,
}

impl PushSpec {
    /// Parses the value of one `$push` field: unknown clauses first, then `$each`,
    /// `$slice`, `$sort` and `$position`, as MongoDB checks them.
    pub fn parse(v: &Bson) -> Result<PushSpec, QueryError> {
        let d = match v {
            Bson::Document(d) if d.contains_key("$each") => d,
            other => {
                return Ok(PushSpec {
                    each: vec![other.clone()],
                    position: None,
                    slice: None,
                    sort: None,
                })
            }
        };
        if let Some(k) = d
            .keys()
            .find(|k| !matches!(k.as_str(), "$each" | "$slice" | "$sort" | "$position"))
        {
            return Err(QueryError::bad(format!(
                "Unrecognized clause in $push: {k}"
            )));
        }
        let each = match d.get("$each") {
            Some(Bson::Array(items)) => items.clone(),
            other => {
                return Err(QueryError::bad(format!(
                    "The argument to $each in $push must be an array but it was of type: {}",
                    other.map(type_name).unwrap_or("missing")
                )))
            }
        };
        let slice = d
            .get("$slice")
            .map(|v| {
                int_value(v).ok_or_else(|| {
                    QueryError::bad(format!(
                        "The value for $slice must be an integer value but was given type: {}",
                        type_name(v)
                    ))
                })
            })
            .transpose()?;
        let sort = d.get("$sort").map(parse_push_sort).transpose()?;
        let position = d
            .get("$position")
            .map(|v| {
                int_value(v).ok_or_else(|| {
                    QueryError::bad(format!(
                        "The value for $position must be an integer value, not of type: {}",
                        type_name(v)
                    ))
                })
            })
            .transpose()?;
        Ok(PushSpec {
            each,
            position,
            slice,
            sort,
        })
    }
}

/// An integral number (a whole double included).
fn int_value(v: &Bson) -> Option<i64> {
    Num::from_bson(v).and_then(Num::as_exact_i64)
}

/// Parses a `$pop` argument: true to remove the first element (`-1`), false the last (`1`).
pub fn parse_pop(path: &str, v: &Bson) -> Result<bool, QueryError> {
    let Some(n) = Num::from_bson(v) else {
        return Err(QueryError::FailedToParse(format!(
            "Expected a number in: {path}: {}",
            render(v)
        )));
    };
    let Some(n) = n.as_exact_i64() else {
        return Err(QueryError::FailedToParse(format!(
            "Expected an integer: {path}: {}",
            render(v)
        )));
    };
    match n {
        1 => Ok(false),
        -1 => Ok(true),
        n => Err(QueryError::FailedToParse(format!(
            "$pop expects 1 or -1, found: {n}"
        ))),
    }
}

fn is_unit(v: &Bson) -> bool {
    matches!(Num::from_bson(v).map(|n| n.as_f64()), Some(x) if x == 1.0 || x == -1.0)
}

fn parse_push_sort(v: &Bson) -> Result<PushSort, QueryError> {
    let not_unit = || QueryError::bad("The $sort element value must be either 1 or -1");
    match v {
        Bson::Document(d) => {
            if d.is_empty() {
                return Err(QueryError::bad(
                    "The $sort pattern is empty when it should be a set of fields.",
                ));
            }
            for (field, dir) in d {
                if !is_unit(dir) {
                    return Err(not_unit());
                }
                if field.is_empty() {
                    return Err(QueryError::bad("The $sort field cannot be empty"));
                }
                if field.split('.').any(str::is_empty) {
                    return Err(QueryError::bad(format!(
                        "The $sort field is a dotted field but has an empty part: {field}"
                    )));
                }
            }
            SortSpec::parse(d).map(PushSort::Fields).map_err(|_| not_unit())
        }
        other if Num::from_bson(other).is_some() => {
            match Num::from_bson(other).map(|n| n.as_f64()) {
                Some(1.0) => Ok(PushSort::Whole(true)),
                Some(-1.0) => Ok(PushSort::Whole(false)),
                _ => Err(not_unit()),
            }
        }
        _ => Err(QueryError::bad("The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields")),
    }
}

/// Parses the value of one `$addToSet` field.
pub fn parse_add_to_set(v: &Bson) -> Result<Vec<Bson>, QueryError> {
    match v {
        Bson::Document(d) if d.contains_key("$each") => {
            if d.len() != 1 {
                return Err(QueryError::bad(
                    "Found unexpected fields after $each in $addToSet",
                ));
            }
            match d.get("$each") {
                Some(Bson::Array(items)) => Ok(items.clone()),
                Some(other) => Err(QueryError::TypeMismatch(format!(
                    "The argument to $each in $addToSet must be an array but it was of type {}",
                    type_name(other)
                ))),
                None => Ok(Vec::new()),
            }
        }
        other => Ok(vec![other.clone()]),
    }
}

/// A `$pull` condition.
#[derive(Debug, Clone)]
pub enum PullCond {
    /// Operator/regex/equality condition on each element.
    Value(ValueMatcher),
    /// Filter applied to document elements.
    Doc(Filter),
}

impl PullCond {
    /// Parses a `$pull` field value.
    pub fn parse(v: &Bson) -> Result<PullCond, QueryError> {
        match v {
            Bson::Document(d)
                if !d.keys().next().is_some_and(|k| k.starts_with('$')) || d.is_empty() =>
            {
                Ok(PullCond::Doc(Filter::parse(d)?))
            }
            Bson::Document(d)
                if d.keys()
                    .next()
                    .is_some_and(|k| matches!(k.as_str(), "$and" | "$or" | "$nor")) =>
            {
                Ok(PullCond::Doc(Filter::parse(d)?))
            }
            other => Ok(PullCond::Value(ValueMatcher::parse(other)?)),
        }
    }

    fn matches(&self, v: &Bson) -> bool {
        match self {
            PullCond::Value(m) => m.matches(v),
            PullCond::Doc(f) => match v {
                Bson::Document(d) => f.matches(d),
                _ => false,
            },
        }
    }
}

fn sort_array(items: &mut [Bson], sort: &PushSort) {
    match sort {
        PushSort::Whole(asc) => items.sort_by(|a, b| {
            let o = compare_values(a, b);
            if *asc {
                o
            } else {
                o.reverse()
            }
        }),
        PushSort::Fields(spec) => {
            let empty = Document::new();
            items.sort_by(|a, b| {
                let da = a.as_document().unwrap_or(&empty);
                let db = b.as_document().unwrap_or(&empty);
                spec.compare(da, db)
            })
        }
    }
}

fn push(mut items: Vec<Bson>, spec: &PushSpec) -> Vec<Bson> {
    let len = items.len() as i64;
    let pos = match spec.position {
        None => len,
        Some(p) if p < 0 => (len + p).max(0),
        Some(p) => p.min(len),
    };
    let pos = usize::try_from(pos).unwrap_or(items.len()).min(items.len());
    let tail = items.split_off(pos);
    items.extend(spec.each.iter().cloned());
    items.extend(tail);
    if let Some(sort) = &spec.sort {
        sort_array(&mut items, sort);
    }
    if let Some(n) = spec.slice {
        let keep = usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX);
        if n >= 0 {
            items.truncate(keep);
        } else if items.len() > keep {
            items.drain(..items.len() - keep);
        }
    }
    items
}

/// Applies an array operator at `path`.
pub(super) fn apply(doc: &mut Document, path: &[String], op: &Op) -> Result<(), QueryError> {
    let field = path.join(".");
    let current = paths::get(doc, path).cloned();
    let items = match current {
        Some(Bson::Array(items)) => Some(items),
        None => None,
        Some(other) => {
            let msg = match op {
                Op::Push(_) => format!(
                    "The field '{field}' must be an array but is of type {} in document {}",
                    type_name(&other),
                    render_id(doc)
                ),
                Op::AddToSet(_) => format!(
                    "Cannot apply $addToSet to non-array field. Field named '{}' has non-array type {}",
                    path.last().map(String::as_str).unwrap_or(""),
                    type_name(&other)
                ),
                Op::Pop(_) => {
                    return Err(QueryError::TypeMismatch(format!(
                        "Path '{field}' contains an element of non-array type '{}'",
                        type_name(&other)
                    )))
                }
                _ => "Cannot apply $pull to a non-array value".to_string(),
            };
            return Err(QueryError::bad(msg));
        }
    };
    let new = match (op, items) {
        (Op::Push(spec), items) => push(items.unwrap_or_default(), spec),
        (Op::AddToSet(values), items) => {
            let mut items = items.unwrap_or_default();
            for v in values {
                if !items
                    .iter()
                    .any(|i| values_equal(i, v) && type_rank_same(i, v))
                {
                    items.push(v.clone());
                }
            }
            items
        }
        (_, None) => return Ok(()),
        (Op::Pull(cond), Some(items)) => items.into_iter().filter(|i| !cond.matches(i)).collect(),
        (Op::PullAll(values), Some(items)) => items
            .into_iter()
            .filter(|i| !values.iter().any(|v| values_equal(i, v)))
            .collect(),
        (Op::Pop(first), Some(mut items)) => {
            if items.is_empty() {
                return Ok(());
            }
            if *first {
                items.remove(0);
            } else {
                items.pop();
            }
            items
        }
        (_, Some(_)) => {
            return Err(QueryError::bad(format!(
                "unsupported array operator on {}",
                render(&Bson::String(field))
            )))
        }
    };
    paths::set(doc, path, Bson::Array(new))
}

fn type_rank_same(a: &Bson, b: &Bson) -> bool {
    crate::compare::canonical_type_rank(a) == crate::compare::canonical_type_rank(b)
}
