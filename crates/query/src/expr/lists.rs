//! Variable-binding operators: `$let`, `$map` and `$filter` (with `limit`),
//! parsed with MongoDB's argument checks and error codes.

use bson::{Bson, Document};

use super::{check_array_memory, eval, opt_truthy, parse, Ctx, E};
use crate::compare::type_name;
use crate::error::QueryError;
use crate::let_vars::check_name;

/// The variable a `$map`/`$filter` binds: `as`, or `this` by default.
fn bound_name(d: &Document) -> Result<String, QueryError> {
    match d.get("as") {
        None => Ok("this".into()),
        Some(Bson::String(s)) => {
            if s != "CURRENT" {
                check_name(s)?;
            }
            Ok(s.clone())
        }
        Some(_) => Err(QueryError::loc(
            16866,
            "empty variable names are not allowed",
        )),
    }
}

/// `$let`: `{vars: {...}, in: <expression>}`.
pub(super) fn parse_let(arg: &Bson) -> Result<E, QueryError> {
    let Bson::Document(d) = arg else {
        return Err(QueryError::loc(
            16874,
            "$let only supports an object as its argument",
        ));
    };
    if let Some(k) = d.keys().find(|k| !matches!(k.as_str(), "vars" | "in")) {
        return Err(QueryError::loc(
            16875,
            format!("Unrecognized parameter to $let: {k}"),
        ));
    }
    let vars = d
        .get("vars")
        .ok_or_else(|| QueryError::loc(16876, "Missing 'vars' parameter to $let"))?;
    let body = d
        .get("in")
        .ok_or_else(|| QueryError::loc(16877, "Missing 'in' parameter to $let"))?;
    let Bson::Document(vars) = vars else {
        return Err(QueryError::loc(
            10065,
            "invalid parameter: expected an object (vars)",
        ));
    };
    let mut bound = Vec::with_capacity(vars.len());
    for (k, v) in vars {
        // `CURRENT` is the one system variable a user may rebind.
        if k != "CURRENT" {
            check_name(k)?;
        }
        bound.push((k.clone(), parse(v)?));
    }
    Ok(E::Let(bound, Box::new(parse(body)?)))
}

/// `$map` (`input`, `as`, `in`) and `$filter` (`input`, `as`, `cond`, `limit`).
pub(super) fn parse_map_filter(name: &str, arg: &Bson) -> Result<E, QueryError> {
    let map = name == "$map";
    let (c_obj, c_unknown, c_input, c_body) = if map {
        (16878, 16879, 16880, 16882)
    } else {
        (28646, 28647, 28648, 28650)
    };
    let Bson::Document(d) = arg else {
        return Err(QueryError::loc(
            c_obj,
            format!("{name} only supports an object as its argument"),
        ));
    };
    let body_key = if map { "in" } else { "cond" };
    for k in d.keys() {
        let known = matches!(k.as_str(), "input" | "as") || k == body_key || (!map && k == "limit");
        if !known {
            return Err(QueryError::loc(
                c_unknown,
                format!("Unrecognized parameter to {name}: {k}"),
            ));
        }
    }
    let input = d
        .get("input")
        .ok_or_else(|| QueryError::loc(c_input, format!("Missing 'input' parameter to {name}")))?;
    let body = d.get(body_key).ok_or_else(|| {
        QueryError::loc(c_body, format!("Missing '{body_key}' parameter to {name}"))
    })?;
    let var = bound_name(d)?;
    let input = Box::new(parse(input)?);
    let body = Box::new(parse(body)?);
    Ok(if map {
        E::Map(input, var, body)
    } else {
        let limit = d.get("limit").map(parse).transpose()?.map(Box::new);
        E::Filter(input, var, body, limit)
    })
}

/// The array a `$map`/`$filter` iterates; `None` when the input is nullish.
fn input_items(
    name: &str,
    code: i32,
    input: &E,
    ctx: &mut Ctx<'_>,
) -> Result<Option<Vec<Bson>>, QueryError> {
    match eval(input, ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::Array(items)) => Ok(Some(items)),
        Some(other) => Err(QueryError::loc(
            code,
            format!("input to {name} must be an array not {}", type_name(&other)),
        )),
    }
}

/// Evaluates `$map`.
pub(super) fn eval_map(
    input: &E,
    var: &str,
    body: &E,
    ctx: &mut Ctx<'_>,
) -> Result<Option<Bson>, QueryError> {
    let Some(items) = input_items("$map", 16883, input, ctx)? else {
        return Ok(Some(Bson::Null));
    };
    let mut out = Vec::with_capacity(items.len());
    let mut bytes = 0;
    for item in items {
        bytes += crate::pipeline::mem::approx_size(&item);
        check_array_memory("$map", bytes)?;
        ctx.vars.push((var.to_string(), item));
        let r = eval(body, ctx);
        ctx.vars.pop();
        out.push(r?.unwrap_or(Bson::Null));
    }
    Ok(Some(Bson::Array(out)))
}

/// The `limit` of a `$filter`: `None` for no limit (absent or nullish).
fn filter_limit(limit: Option<&E>, ctx: &mut Ctx<'_>) -> Result<Option<usize>, QueryError> {
    let Some(limit) = limit else {
        return Ok(None);
    };
    let v = match eval(limit, ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(None),
        Some(v) => v,
    };
    let n = crate::num::Num::from_bson(&v)
        .and_then(crate::num::Num::as_exact_i64)
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| {
            QueryError::loc(
                327391,
                format!(
                    "$filter: limit must be represented as a 32-bit integral value: {}",
                    crate::error::render(&v)
                ),
            )
        })?;
    if n < 1 {
        return Err(QueryError::loc(
            327392,
            format!("$filter: limit must be greater than 0: {n}"),
        ));
    }
    Ok(usize::try_from(n).ok())
}

/// Evaluates `$filter`, stopping once `limit` elements matched.
pub(super) fn eval_filter(
    input: &E,
    var: &str,
    cond: &E,
    limit: Option<&E>,
    ctx: &mut Ctx<'_>,
) -> Result<Option<Bson>, QueryError> {
    let Some(items) = input_items("$filter", 28651, input, ctx)? else {
        return Ok(Some(Bson::Null));
    };
    let limit = filter_limit(limit, ctx)?;
    let mut out = Vec::new();
    for item in items {
        if limit.is_some_and(|n| out.len() >= n) {
            break;
        }
        ctx.vars.push((var.to_string(), item.clone()));
        let r = eval(cond, ctx);
        ctx.vars.pop();
        if opt_truthy(&r?) {
            out.push(item);
        }
    }
    Ok(Some(Bson::Array(out)))
}
