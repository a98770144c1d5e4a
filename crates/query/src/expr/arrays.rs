//! Positional array and set operators: `$slice`, `$range`, `$indexOfArray`,
//! `$indexOfCP`/`$indexOfBytes`, `$objectToArray`, `$arrayToObject`,
//! `$allElementsTrue`/`$anyElementTrue` and the `$set*` operators.

use bson::{Bson, Document};

use super::{int_of, is_nullish, tname, R};
use crate::compare::{type_name, values_equal};
use crate::error::QueryError;

/// Positional array and set operators.
pub(in crate::expr) fn eval_positional(name: &str, args: &[Option<Bson>]) -> R {
    let a0 = args.first().unwrap_or(&None);
    let a1 = args.get(1).unwrap_or(&None);
    let a2 = args.get(2).unwrap_or(&None);
    match name {
        "$slice" => slice(args),
        "$range" => range(a0, a1, a2, args.len()),
        "$indexOfArray" => {
            if is_nullish(a0) {
                return Ok(Some(Bson::Null));
            }
            let Some(Bson::Array(items)) = a0 else {
                return Err(QueryError::loc(
                    40090,
                    format!(
                        "$indexOfArray requires an array as a first argument, found: {}",
                        tname(a0)
                    ),
                ));
            };
            let (start, end) = bounds(name, args, items.len())?;
            let needle = a1.clone().unwrap_or(Bson::Null);
            let pos =
                (start..end).find(|i| items.get(*i).is_some_and(|x| values_equal(x, &needle)));
            Ok(Some(Bson::Int32(pos.map(|p| p as i32).unwrap_or(-1))))
        }
        "$indexOfCP" | "$indexOfBytes" => {
            if is_nullish(a0) {
                return Ok(Some(Bson::Null));
            }
            let Some(Bson::String(s)) = a0 else {
                return Err(QueryError::loc(
                    if name == "$indexOfCP" { 40093 } else { 40091 },
                    format!(
                        "{name} requires a string as the first argument, found: {}",
                        tname(a0)
                    ),
                ));
            };
            let Some(Bson::String(sub)) = a1 else {
                return Err(QueryError::loc(
                    if name == "$indexOfCP" { 40094 } else { 40092 },
                    format!(
                        "{name} requires a string as the second argument, found: {}",
                        tname(a1)
                    ),
                ));
            };
            let units: Vec<String> = if name == "$indexOfCP" {
                s.chars().map(String::from).collect()
            } else {
                s.bytes().map(|b| (b as char).to_string()).collect()
            };
            let needle: Vec<String> = if name == "$indexOfCP" {
                sub.chars().map(String::from).collect()
            } else {
                sub.bytes().map(|b| (b as char).to_string()).collect()
            };
            let (start, end) = bounds(name, args, units.len())?;
            let pos = (start..=end).find(|i| {
                i + needle.len() <= end && units.get(*i..i + needle.len()) == Some(&needle[..])
            });
            Ok(Some(Bson::Int32(pos.map(|p| p as i32).unwrap_or(-1))))
        }
        "$objectToArray" => match a0 {
            None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
            Some(Bson::Document(d)) => Ok(Some(Bson::Array(
                d.iter()
                    .map(|(k, v)| Bson::Document(bson::doc! {"k": k, "v": v.clone()}))
                    .collect(),
            ))),
            other => Err(QueryError::loc(
                40390,
                format!(
                    "$objectToArray requires a document input, found: {}",
                    tname(other)
                ),
            )),
        },
        "$arrayToObject" => array_to_object(a0),
        "$allElementsTrue" | "$anyElementTrue" => {
            let Some(Bson::Array(items)) = a0 else {
                return Err(QueryError::loc(
                    if name == "$allElementsTrue" {
                        17040
                    } else {
                        17041
                    },
                    format!("{name}'s argument must be an array, but is {}", tname(a0)),
                ));
            };
            let r = if name == "$allElementsTrue" {
                items.iter().all(crate::expr::truthy)
            } else {
                items.iter().any(crate::expr::truthy)
            };
            Ok(Some(Bson::Boolean(r)))
        }
        _ => set_op(name, args),
    }
}

fn bounds(name: &str, args: &[Option<Bson>], len: usize) -> Result<(usize, usize), QueryError> {
    let get = |i: usize, default: usize| -> Result<usize, QueryError> {
        match args.get(i) {
            None => Ok(default),
            Some(v) => match int_of(v) {
                Some(n) if n >= 0 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
                Some(_) => Err(QueryError::loc(
                    40097,
                    format!("{name} requires a nonnegative start index"),
                )),
                None => Err(QueryError::loc(
                    40096,
                    format!(
                        "{name} requires an integral starting index, found a value of type: {}",
                        tname(v)
                    ),
                )),
            },
        }
    };
    let start = get(2, 0)?;
    let end = get(3, len)?.min(len);
    Ok((start.min(end.max(start)), end))
}

fn slice(args: &[Option<Bson>]) -> R {
    let a0 = args.first().unwrap_or(&None);
    if args.iter().any(is_nullish) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::Array(items)) = a0 else {
        return Err(QueryError::loc(
            28724,
            format!(
                "First argument to $slice must be an array, but is of type: {}",
                tname(a0)
            ),
        ));
    };
    let len = items.len() as i64;
    let a1 = args.get(1).unwrap_or(&None);
    let Some(first) = int_of(a1) else {
        return Err(QueryError::loc(
            28725,
            format!(
                "Second argument to $slice must be a numeric value, but is of type: {}",
                tname(a1)
            ),
        ));
    };
    let (start, count) = match args.get(2) {
        None => {
            if first >= 0 {
                (0, first)
            } else {
                ((len + first).max(0), len)
            }
        }
        Some(v) => {
            let Some(n) = int_of(v) else {
                return Err(QueryError::loc(
                    28727,
                    format!(
                        "Third argument to $slice must be numeric, but is of type: {}",
                        tname(v)
                    ),
                ));
            };
            if n <= 0 {
                return Err(QueryError::loc(
                    28729,
                    format!("Third argument to $slice must be positive: {n}"),
                ));
            }
            let start = if first < 0 {
                (len + first).max(0)
            } else {
                first.min(len)
            };
            (start, n)
        }
    };
    Ok(Some(Bson::Array(
        items
            .iter()
            .skip(usize::try_from(start).unwrap_or(0))
            .take(usize::try_from(count).unwrap_or(0))
            .cloned()
            .collect(),
    )))
}

fn range(a0: &Option<Bson>, a1: &Option<Bson>, a2: &Option<Bson>, n: usize) -> R {
    // Not a number: `code`; a number that is not a 32-bit integer: `code + 1`.
    let get = |v: &Option<Bson>, what: &str, article: &str, code: i32| {
        if v.as_ref().and_then(crate::num::Num::from_bson).is_none() {
            return Err(QueryError::loc(
                code,
                format!(
                    "$range requires a numeric {what}, found value of type: {}",
                    super::tname(v)
                ),
            ));
        }
        int_of(v)
            .filter(|i| i32::try_from(*i).is_ok())
            .ok_or_else(|| {
                let shown = match v {
                    Some(Bson::Double(f)) => crate::num::format_g(*f),
                    other => other.as_ref().map(crate::error::render).unwrap_or_default(),
                };
                QueryError::loc(
                    code + 1,
                    format!("$range requires {article} {what} that can be represented as a 32-bit integer, found value: {shown}"),
                )
            })
    };
    let start = get(a0, "starting value", "a", 34443)?;
    let end = get(a1, "ending value", "an", 34445)?;
    let step = if n > 2 {
        get(a2, "step value", "a", 34447)?
    } else {
        1
    };
    if step == 0 {
        return Err(QueryError::loc(
            34449,
            "$range requires a non-zero step value",
        ));
    }
    let count = if step > 0 {
        (end - start).max(0) / step
    } else {
        (start - end).max(0) / -step
    };
    // MongoDB caps $range at 64 MB of values; counted here as the values really take.
    const LIMIT: i64 = 64 * 1024 * 1024;
    const ITEM: i64 = std::mem::size_of::<Bson>() as i64;
    if count.saturating_mul(ITEM) > LIMIT {
        return Err(QueryError::Coded(146, format!("$range would use too much memory ({} bytes) and cannot spill to disk. Memory limit: {LIMIT} bytes", count.saturating_mul(ITEM)),
        ));
    }
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < end) || (step < 0 && i > end) {
        out.push(Bson::Int32(i as i32));
        i += step;
    }
    Ok(Some(Bson::Array(out)))
}

fn array_to_object(v: &Option<Bson>) -> R {
    let items = match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::Array(i)) => i,
        other => {
            return Err(QueryError::loc(
                40386,
                format!(
                    "$arrayToObject requires an array input, found: {}",
                    tname(other)
                ),
            ))
        }
    };
    let mut out = Document::new();
    for item in items {
        match item {
            Bson::Array(pair) if pair.len() == 2 => match pair.first() {
                Some(Bson::String(k)) => {
                    out.insert(k.clone(), pair.get(1).cloned().unwrap_or(Bson::Null));
                }
                _ => {
                    return Err(QueryError::loc(
                        40395,
                        "$arrayToObject requires an array of key-value pairs, where the key must be of type string",
                    ))
                }
            },
            Bson::Document(d) if d.len() == 2 => match (d.get("k"), d.get("v")) {
                (Some(Bson::String(k)), Some(v)) => {
                    out.insert(k.clone(), v.clone());
                }
                _ => {
                    return Err(QueryError::loc(
                        40393,
                        "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' must be of type string",
                    ))
                }
            },
            _ => {
                return Err(QueryError::loc(
                    40398,
                    format!("Unrecognised input type format for $arrayToObject: {}", type_name(item)),
                ))
            }
        }
    }
    Ok(Some(Bson::Document(out)))
}

fn dedup(items: &[Bson]) -> Vec<Bson> {
    let mut out: Vec<Bson> = Vec::new();
    for i in items {
        if !out.iter().any(|o| values_equal(o, i)) {
            out.push(i.clone());
        }
    }
    out
}

fn set_op(name: &str, args: &[Option<Bson>]) -> R {
    let mut sets = Vec::new();
    for a in args {
        match a {
            None | Some(Bson::Null) | Some(Bson::Undefined)
                if name != "$setEquals" && name != "$setIsSubset" =>
            {
                return Ok(Some(Bson::Null))
            }
            Some(Bson::Array(items)) => sets.push(dedup(items)),
            other => {
                return Err(QueryError::loc(
                    17044,
                    format!(
                        "All operands of {name} must be arrays. One argument is of type: {}",
                        tname(other)
                    ),
                ))
            }
        }
    }
    let contains = |s: &[Bson], v: &Bson| s.iter().any(|x| values_equal(x, v));
    Ok(Some(match name {
        "$setUnion" => Bson::Array(dedup(&sets.concat())),
        "$setIntersection" => {
            let mut it = sets.into_iter();
            let first = it.next().unwrap_or_default();
            let rest: Vec<Vec<Bson>> = it.collect();
            Bson::Array(
                first
                    .into_iter()
                    .filter(|v| rest.iter().all(|s| contains(s, v)))
                    .collect(),
            )
        }
        "$setDifference" => {
            let (a, b) = (
                sets.first().cloned().unwrap_or_default(),
                sets.get(1).cloned().unwrap_or_default(),
            );
            Bson::Array(a.into_iter().filter(|v| !contains(&b, v)).collect())
        }
        "$setIsSubset" => {
            let (a, b) = (
                sets.first().cloned().unwrap_or_default(),
                sets.get(1).cloned().unwrap_or_default(),
            );
            Bson::Boolean(a.iter().all(|v| contains(&b, v)))
        }
        "$setEquals" => {
            let first = sets.first().cloned().unwrap_or_default();
            Bson::Boolean(
                sets.iter()
                    .all(|s| s.len() == first.len() && s.iter().all(|v| contains(&first, v))),
            )
        }
        _ => {
            return Err(QueryError::InvalidPipelineOperator(format!(
                "Unrecognized expression '{name}'"
            )))
        }
    }))
}
