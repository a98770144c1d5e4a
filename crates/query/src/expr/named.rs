//! More expression operators: object-form string operators (`$trim`,
//! `$regexMatch`, `$replaceAll`, ...), `$convert`, field access
//! (`$getField`, `$setField`), array operators (`$slice`, `$range`, `$zip`,
//! `$sortArray`, `$firstN`, ...). Positional array and set operators are in
//! `arrays.rs`.

use bson::{Bson, Document};

use super::{is_nullish, tname, Named, R};
use crate::compare::{compare_values, type_name};
use crate::error::QueryError;
use crate::filter::types::ALIASES;
use crate::num::Num;
use crate::pcre::{Found, Invalid, Pcre};

/// Object-form operators: allowed and required argument names.
pub(super) const NAMED: &[(&str, &[&str], &[&str])] = &[
    (
        "$convert",
        &["input", "to", "onError", "onNull"],
        &["input", "to"],
    ),
    (
        "$regexMatch",
        &["input", "regex", "options"],
        &["input", "regex"],
    ),
    (
        "$regexFind",
        &["input", "regex", "options"],
        &["input", "regex"],
    ),
    (
        "$regexFindAll",
        &["input", "regex", "options"],
        &["input", "regex"],
    ),
    (
        "$replaceOne",
        &["input", "find", "replacement"],
        &["input", "find", "replacement"],
    ),
    (
        "$replaceAll",
        &["input", "find", "replacement"],
        &["input", "find", "replacement"],
    ),
    ("$trim", &["input", "chars"], &["input"]),
    ("$ltrim", &["input", "chars"], &["input"]),
    ("$rtrim", &["input", "chars"], &["input"]),
    ("$getField", &["field", "input"], &["field"]),
    (
        "$setField",
        &["field", "input", "value"],
        &["field", "value"],
    ),
    ("$unsetField", &["field", "input"], &["field"]),
    (
        "$zip",
        &["inputs", "useLongestLength", "defaults"],
        &["inputs"],
    ),
    ("$sortArray", &["input", "sortBy"], &["input", "sortBy"]),
    ("$firstN", &["input", "n"], &["input", "n"]),
    ("$lastN", &["input", "n"], &["input", "n"]),
    ("$minN", &["input", "n"], &["input", "n"]),
    ("$maxN", &["input", "n"], &["input", "n"]),
];

/// Evaluates an object-form operator.
pub(super) fn eval_named(name: &str, a: &Named) -> R {
    match name {
        "$convert" => convert(a),
        "$regexMatch" | "$regexFind" | "$regexFindAll" => regex_op(name, a),
        "$replaceOne" | "$replaceAll" => replace(name, a),
        "$trim" | "$ltrim" | "$rtrim" => trim(name, a),
        "$getField" | "$setField" | "$unsetField" => field_op(name, a),
        "$zip" => zip(a),
        "$sortArray" => sort_array(a),
        "$firstN" | "$lastN" | "$minN" | "$maxN" => n_op(name, a),
        _ => Err(QueryError::InvalidPipelineOperator(format!(
            "Unrecognized expression '{name}'"
        ))),
    }
}

/// The conversion operator for `$convert`'s `to`; `None` when `to` is nullish.
fn convert_target(to: Option<Bson>) -> Result<Option<&'static str>, QueryError> {
    const CONVERTIBLE: &[(&str, i64, &str)] = &[
        ("double", 1, "$toDouble"),
        ("string", 2, "$toString"),
        ("objectId", 7, "$toObjectId"),
        ("bool", 8, "$toBool"),
        ("date", 9, "$toDate"),
        ("int", 16, "$toInt"),
        ("long", 18, "$toLong"),
        ("decimal", 19, "$toDecimal"),
    ];
    let unsupported = |name: &str| {
        QueryError::FailedToParse(format!("$convert with unsupported 'to' type: {name}"))
    };
    match to {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::String(s)) => {
            if let Some((_, _, op)) = CONVERTIBLE.iter().find(|(n, _, _)| *n == s) {
                return Ok(Some(op));
            }
            // Another BSON type: known, but not one $convert converts to.
            if ALIASES.iter().any(|(n, _)| *n == s) {
                return Err(unsupported(&s));
            }
            Err(QueryError::BadValue(format!("Unknown type name: {s}")))
        }
        Some(v) => {
            let Some(n) = Num::from_bson(&v) else {
                return Err(QueryError::FailedToParse(format!(
                    "$convert's 'to' argument must be a string or number, but is {}",
                    type_name(&v)
                )));
            };
            let Some(code) = n.as_exact_i64() else {
                return Err(QueryError::FailedToParse(
                    "In $convert, numeric 'to' argument is not an integer".into(),
                ));
            };
            if let Some((_, _, op)) = CONVERTIBLE.iter().find(|(_, c, _)| *c == code) {
                return Ok(Some(op));
            }
            if let Some((name, _)) = ALIASES.iter().find(|(_, c)| *c == code) {
                return Err(unsupported(name));
            }
            Err(QueryError::FailedToParse(format!(
                "In $convert, numeric value for 'to' does not correspond to a BSON type: {code}"
            )))
        }
    }
}

fn convert(a: &Named) -> R {
    // The target type is checked first: an invalid `to` fails even on a null input.
    let op = convert_target(a.get("to"))?;
    let input = a.get("input");
    if is_nullish(&input) {
        return Ok(a.get_present("onNull").or(Some(Bson::Null)));
    }
    let Some(op) = op else {
        return Ok(Some(Bson::Null));
    };
    match super::convert::convert(op, &input) {
        Err(QueryError::ConversionFailure(m)) => match a.get_present("onError") {
            Some(v) => Ok(Some(v)),
            None => Err(QueryError::ConversionFailure(m)),
        },
        other => other,
    }
}

fn regex_op(name: &str, a: &Named) -> R {
    let input = a.get("input");
    let (pattern, mut flags) = match a.get("regex") {
        Some(Bson::String(s)) => (s, String::new()),
        Some(Bson::RegularExpression(r)) => (r.pattern, r.options),
        None | Some(Bson::Null) => return Ok(Some(null_regex(name))),
        Some(other) => {
            return Err(QueryError::loc(
                51105,
                format!(
                    "{name} needs 'regex' to be of type string or regex, found {}",
                    type_name(&other)
                ),
            ))
        }
    };
    match a.get("options") {
        None | Some(Bson::Null) => {}
        Some(Bson::String(o)) => {
            if !flags.is_empty() && !o.is_empty() {
                return Err(QueryError::loc(
                    51107,
                    format!("{name} found regex option(s) specified in both 'regex' and 'option' fields"),
                ));
            }
            flags.push_str(&o);
        }
        Some(other) => {
            return Err(QueryError::loc(
                51106,
                format!(
                    "{name} needs 'options' to be of type string, found {}",
                    type_name(&other)
                ),
            ))
        }
    }
    let text = match &input {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(null_regex(name))),
        Some(Bson::String(s)) => s.clone(),
        other => {
            return Err(QueryError::loc(
                51104,
                format!(
                    "{name} needs 'input' to be of type string, found {}",
                    tname(other)
                ),
            ))
        }
    };
    // Expressions take `imsx` (not `u`, which `$regex` accepts).
    let re = match flags.chars().find(|f| !"imsx".contains(*f)) {
        Some(other) => Err(Invalid::Flag(other)),
        None => Pcre::cached(&pattern, &flags),
    }
    .map_err(|e| match e {
        Invalid::Flag(_) => QueryError::loc(51108, format!("{name} {e}")),
        Invalid::Pattern(_) => QueryError::loc(51111, format!("Invalid Regex in {name}: {e}")),
    })?;
    // MongoDB's `idx` counts code points.
    let found = |m: Found<'_>| -> Bson {
        let idx = text.get(..m.start).map_or(0, |p| p.chars().count());
        let captures: Vec<Bson> = m
            .groups
            .iter()
            .map(|c| c.map_or(Bson::Null, |c| Bson::String(c.into())))
            .collect();
        Bson::Document(bson::doc! {
            "match": m.text,
            "idx": i32::try_from(idx).unwrap_or(i32::MAX),
            "captures": captures,
        })
    };
    Ok(Some(match name {
        "$regexMatch" => Bson::Boolean(re.is_match(&text)),
        "$regexFind" => re.find(&text).map(found).unwrap_or(Bson::Null),
        _ => Bson::Array(re.find_all(&text).into_iter().map(found).collect()),
    }))
}

fn null_regex(name: &str) -> Bson {
    match name {
        "$regexMatch" => Bson::Boolean(false),
        "$regexFind" => Bson::Null,
        _ => Bson::Array(Vec::new()),
    }
}

fn replace(name: &str, a: &Named) -> R {
    let mut strs = Vec::new();
    for k in ["input", "find", "replacement"] {
        match a.get(k) {
            None | Some(Bson::Null) | Some(Bson::Undefined) => strs.push(None),
            Some(Bson::String(s)) => strs.push(Some(s)),
            Some(other) => {
                return Err(QueryError::loc(
                    51746,
                    format!(
                        "{name} requires that '{k}' be a string, found: {}",
                        crate::error::render(&other)
                    ),
                ))
            }
        }
    }
    let (Some(Some(input)), Some(Some(find)), Some(Some(repl))) =
        (strs.first(), strs.get(1), strs.get(2))
    else {
        return Ok(Some(Bson::Null));
    };
    Ok(Some(Bson::String(if name == "$replaceOne" {
        input.replacen(find.as_str(), repl, 1)
    } else {
        input.replace(find.as_str(), repl)
    })))
}

fn trim(name: &str, a: &Named) -> R {
    let input = match a.get("input") {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::String(s)) => s,
        Some(other) => {
            return Err(QueryError::loc(
                50699,
                format!(
                    "{name} requires its input to be a string, got {} (of type {}) instead.",
                    crate::error::render(&other),
                    type_name(&other)
                ),
            ))
        }
    };
    let chars: Option<Vec<char>> = match a.get("chars") {
        None => None,
        Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::String(c)) => Some(c.chars().collect()),
        Some(other) => {
            return Err(QueryError::loc(
                50700,
                format!(
                    "{name} requires 'chars' to be a string, got {} (of type {}) instead.",
                    crate::error::render(&other),
                    type_name(&other)
                ),
            ))
        }
    };
    let pred = |c: char| match &chars {
        Some(cs) => cs.contains(&c),
        None => c.is_whitespace() || c == '\0',
    };
    Ok(Some(Bson::String(
        match name {
            "$trim" => input.trim_matches(pred),
            "$ltrim" => input.trim_start_matches(pred),
            _ => input.trim_end_matches(pred),
        }
        .to_string(),
    )))
}

fn field_op(name: &str, a: &Named) -> R {
    let field = match a.get("field") {
        Some(Bson::String(s)) => s,
        other => {
            return Err(QueryError::loc(
                if name == "$getField" {
                    3041704
                } else {
                    4161106
                },
                format!(
                    "{name} requires 'field' to evaluate to type String, but got {}",
                    tname(&other)
                ),
            ))
        }
    };
    let input = a.get("input");
    if name == "$getField" {
        return match input {
            None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
            Some(Bson::Document(d)) => Ok(d.get(&field).cloned()),
            Some(other) => Err(QueryError::loc(
                3041705,
                format!(
                    "$getField requires 'input' to evaluate to type Object, but got {}",
                    type_name(&other)
                ),
            )),
        };
    }
    let mut d = match input {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::Document(d)) => d,
        Some(other) => {
            return Err(QueryError::loc(
                4161105,
                format!(
                    "{name} requires 'input' to evaluate to type Object, but got {}",
                    type_name(&other)
                ),
            ))
        }
    };
    match (name, a.get("value")) {
        ("$setField", Some(v)) => {
            d.insert(field, v);
        }
        _ => {
            d.remove(&field);
        }
    }
    Ok(Some(Bson::Document(d)))
}

fn zip(a: &Named) -> R {
    let inputs = match a.get("inputs") {
        Some(Bson::Array(i)) => i,
        other => {
            return Err(QueryError::loc(
                34460,
                format!(
                    "inputs must be an array of expressions, found {}",
                    tname(&other)
                ),
            ))
        }
    };
    let longest = match a.get("useLongestLength") {
        None => false,
        Some(Bson::Boolean(b)) => b,
        Some(other) => {
            return Err(QueryError::loc(
                34463,
                format!(
                    "useLongestLength must be a bool, found {}",
                    type_name(&other)
                ),
            ))
        }
    };
    let mut arrays = Vec::new();
    for i in inputs {
        match i {
            Bson::Null | Bson::Undefined => return Ok(Some(Bson::Null)),
            Bson::Array(x) => arrays.push(x),
            other => {
                return Err(QueryError::loc(
                    34468,
                    format!(
                        "$zip found a non-array expression in input: {}",
                        crate::error::render(&other)
                    ),
                ))
            }
        }
    }
    let defaults = match a.get("defaults") {
        None => vec![Bson::Null; arrays.len()],
        Some(Bson::Array(d)) if longest && d.len() == arrays.len() => d,
        Some(_) if !longest => {
            return Err(QueryError::loc(
                34466,
                "cannot specify defaults unless useLongestLength is true",
            ))
        }
        Some(_) => {
            return Err(QueryError::loc(
                34467,
                "defaults and inputs must have the same length",
            ))
        }
    };
    let len = if longest {
        arrays.iter().map(Vec::len).max().unwrap_or(0)
    } else {
        arrays.iter().map(Vec::len).min().unwrap_or(0)
    };
    let out = (0..len)
        .map(|i| {
            Bson::Array(
                arrays
                    .iter()
                    .zip(&defaults)
                    .map(|(arr, def)| arr.get(i).cloned().unwrap_or_else(|| def.clone()))
                    .collect(),
            )
        })
        .collect();
    Ok(Some(Bson::Array(out)))
}

fn sort_array(a: &Named) -> R {
    let mut items = match a.get("input") {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::Array(i)) => i,
        Some(other) => {
            return Err(QueryError::loc(
                2942504,
                format!(
                    "The input argument to $sortArray must be an array, but was of type: {}",
                    type_name(&other)
                ),
            ))
        }
    };
    match a.get("sortBy") {
        Some(Bson::Document(spec)) => {
            let spec = crate::sort::SortSpec::parse(&spec)?;
            items.sort_by(|x, y| {
                let wrap = |v: &Bson| match v {
                    Bson::Document(d) => d.clone(),
                    _ => Document::new(),
                };
                spec.compare(&wrap(x), &wrap(y))
            });
        }
        Some(v) => {
            let dir = Num::from_bson(&v).map(Num::as_f64);
            match dir {
                Some(d) if d == 1.0 || d == -1.0 => {
                    items.sort_by(|x, y| {
                        let o = compare_values(x, y);
                        if d < 0.0 {
                            o.reverse()
                        } else {
                            o
                        }
                    });
                }
                _ => {
                    return Err(QueryError::loc(
                        2942505,
                        "$sortArray sortBy must be 1, -1 or a sort specification object",
                    ))
                }
            }
        }
        None => {}
    }
    Ok(Some(Bson::Array(items)))
}

fn n_op(name: &str, a: &Named) -> R {
    let n = super::accum_ops::validate_n(&a.get("n"))?;
    let items = match a.get("input") {
        Some(Bson::Array(i)) => i,
        other => {
            return Err(QueryError::loc(
                5788200,
                format!("Input to {name} must be an array but is {}", tname(&other)),
            ))
        }
    };
    let out: Vec<Bson> = match name {
        "$firstN" => items.into_iter().take(n).collect(),
        "$lastN" => {
            let skip = items.len().saturating_sub(n);
            items.into_iter().skip(skip).collect()
        }
        _ => {
            let mut v: Vec<Bson> = items
                .into_iter()
                .filter(|x| !matches!(x, Bson::Null | Bson::Undefined))
                .collect();
            v.sort_by(|x, y| {
                let o = compare_values(x, y);
                if name == "$maxN" {
                    o.reverse()
                } else {
                    o
                }
            });
            v.truncate(n);
            v
        }
    };
    Ok(Some(Bson::Array(out)))
}
