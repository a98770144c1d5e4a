//! Aggregation expressions: parsing (`Expr::parse`) and evaluation against a
//! document (`Expr::eval`). Field paths, system variables (`$$ROOT`,
//! `$$CURRENT`, `$$REMOVE`, `$$NOW`), literals, expression objects/arrays and
//! operator calls. Operator implementations live in the sub-modules; adding an
//! operator means adding its name to [`ops::arity`] and a match arm in
//! [`ops::eval_op`].

mod accum_ops;
pub(crate) use accum_ops::validate_n;
mod arrays;
mod convert;
mod date;
mod lists;
mod named;
mod ops;
pub(crate) mod quantile;

pub(crate) use date::{add_units, parse_zone, Unit, Zone};

use bson::{Bson, Document};

use crate::compare::type_name;
use crate::error::QueryError;
use crate::num::Num;

/// A parsed aggregation expression.
#[derive(Debug, Clone)]
pub struct Expr {
    node: E,
}

#[derive(Debug, Clone)]
enum E {
    Lit(Bson),
    Field(Vec<String>),
    Var(String, Vec<String>),
    Doc(Vec<(String, E)>),
    Arr(Vec<E>),
    Op(&'static str, Vec<E>),
    And(Vec<E>),
    Or(Vec<E>),
    Cond(Box<E>, Box<E>, Box<E>),
    IfNull(Vec<E>),
    Switch(Vec<(E, E)>, Option<Box<E>>),
    Let(Vec<(String, E)>, Box<E>),
    Map(Box<E>, String, Box<E>),
    /// `$filter`: input, variable, condition and optional limit.
    Filter(Box<E>, String, Box<E>, Option<Box<E>>),
    Named(&'static str, Vec<(String, E)>),
    Reduce(Box<E>, Box<E>, Box<E>),
    /// `$rand`: a new random double in [0, 1) at each evaluation.
    Rand,
    /// `$median` (one value) or `$percentile` (an array) of an input.
    Quantile {
        input: Box<E>,
        ps: Vec<f64>,
        median: bool,
    },
}

/// Evaluated arguments of an object-form operator (`{date: ..., unit: ...}`).
pub(super) struct Named {
    vals: Vec<(String, Option<Bson>)>,
}

impl Named {
    /// The evaluated value of `k`; `None` when not given or missing.
    pub(super) fn get(&self, k: &str) -> Option<Bson> {
        self.vals
            .iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.clone())
    }

    /// True if the argument was given.
    pub(super) fn has(&self, k: &str) -> bool {
        self.vals.iter().any(|(n, _)| n == k)
    }

    /// The value of a given argument (missing evaluates to null); `None` if not given.
    pub(super) fn get_present(&self, k: &str) -> Option<Bson> {
        self.vals
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone().unwrap_or(Bson::Null))
    }
}

/// Evaluation context: the root document and bound variables.
struct Ctx<'a> {
    root: &'a Document,
    vars: Vec<(String, Bson)>,
}

/// MongoDB truthiness: false, null, undefined, missing and numeric zero are false.
pub fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            crate::num::Num::from_bson(v).is_some_and(|n| !n.is_zero())
        }
        _ => true,
    }
}

fn opt_truthy(v: &Option<Bson>) -> bool {
    v.as_ref().is_some_and(truthy)
}

impl Expr {
    /// Parses an expression.
    pub fn parse(v: &Bson) -> Result<Expr, QueryError> {
        Ok(Expr { node: parse(v)? })
    }

    /// A constant expression.
    pub fn literal(v: Bson) -> Expr {
        Expr { node: E::Lit(v) }
    }

    /// A field-path expression for a dotted path (without the leading `$`).
    pub fn field(path: &str) -> Expr {
        Expr {
            node: E::Field(path.split('.').map(String::from).collect()),
        }
    }

    /// Evaluates against `doc`; a missing result is returned as `Null`.
    pub fn eval(&self, doc: &Document) -> Result<Bson, QueryError> {
        Ok(self.eval_optional(doc)?.unwrap_or(Bson::Null))
    }

    /// Evaluates against `doc`; `None` means the result is missing.
    pub fn eval_optional(&self, doc: &Document) -> Result<Option<Bson>, QueryError> {
        let mut ctx = Ctx {
            root: doc,
            vars: Vec::new(),
        };
        eval(&self.node, &mut ctx)
    }

    /// True if this is a plain field path expression like `"$a.b"`.
    pub fn as_field_path(&self) -> Option<String> {
        match &self.node {
            E::Field(parts) => Some(parts.join(".")),
            _ => None,
        }
    }
}

/// Array expressions build their result in memory: like MongoDB's `$push`/`$addToSet`,
/// they fail with 146 ExceededMemoryLimit past 100 MB instead of exhausting the server.
fn check_array_memory(op: &str, bytes: u64) -> Result<(), QueryError> {
    let limit = crate::pipeline::mem::DEFAULT_LIMIT;
    if bytes > limit {
        return Err(QueryError::Coded(
            146,
            format!(
                "{op} used too much memory and cannot spill to disk. Memory limit: {limit} bytes"
            ),
        ));
    }
    Ok(())
}

fn parse_field_path(s: &str) -> Result<Vec<String>, QueryError> {
    if s.is_empty() {
        return Err(QueryError::loc(
            16872,
            "'$' by itself is not a valid FieldPath",
        ));
    }
    let parts: Vec<String> = s.split('.').map(String::from).collect();
    if parts.len() > crate::limits::MAX_BSON_DEPTH {
        return Err(QueryError::Overflow("FieldPath is too long".into()));
    }
    if parts.iter().any(String::is_empty) {
        return Err(QueryError::loc(
            15998,
            "FieldPath field names may not be empty strings.",
        ));
    }
    if parts.iter().skip(1).any(|p| p.starts_with('$')) {
        return Err(QueryError::loc(
            16410,
            "FieldPath field names may not start with '$'.",
        ));
    }
    Ok(parts)
}

fn parse(v: &Bson) -> Result<E, QueryError> {
    match v {
        Bson::String(s) => {
            if let Some(var) = s.strip_prefix("$$") {
                let mut parts = parse_field_path(var)?;
                let name = parts.remove(0);
                Ok(E::Var(name, parts))
            } else if let Some(path) = s.strip_prefix('$') {
                Ok(E::Field(parse_field_path(path)?))
            } else {
                Ok(E::Lit(v.clone()))
            }
        }
        Bson::Array(items) => Ok(E::Arr(items.iter().map(parse).collect::<Result<_, _>>()?)),
        Bson::Document(d) => parse_doc(d),
        other => Ok(E::Lit(other.clone())),
    }
}

fn parse_doc(d: &Document) -> Result<E, QueryError> {
    let Some(first) = d.keys().next() else {
        return Ok(E::Doc(Vec::new()));
    };
    if !first.starts_with('$') {
        let mut fields = Vec::new();
        for (k, v) in d {
            if k.starts_with('$') {
                return Err(QueryError::loc(
                    16404,
                    format!("FieldPath field names may not start with '$'. Consider using $getField or $setField. Field: {k}"),
                ));
            }
            if k.contains('.') {
                return Err(QueryError::loc(
                    16412,
                    format!("FieldPath field names may not contain '.'. Field: {k}"),
                ));
            }
            fields.push((k.clone(), parse(v)?));
        }
        return Ok(E::Doc(fields));
    }
    if d.len() != 1 {
        return Err(QueryError::loc(
            15983,
            format!(
                "an expression specification must contain exactly one field, the name of the expression. Found {} fields in {}",
                d.len(),
                crate::error::render_doc(d)
            ),
        ));
    }
    let arg = d.get(first).unwrap_or(&Bson::Null);
    parse_op(first, arg)
}

fn args_of(arg: &Bson) -> Result<Vec<E>, QueryError> {
    match arg {
        Bson::Array(items) => items.iter().map(parse).collect(),
        other => Ok(vec![parse(other)?]),
    }
}

fn parse_op(name: &str, arg: &Bson) -> Result<E, QueryError> {
    match name {
        "$literal" | "$const" => return Ok(E::Lit(arg.clone())),
        "$and" => return Ok(E::And(args_of(arg)?)),
        "$or" => return Ok(E::Or(args_of(arg)?)),
        "$ifNull" => {
            let args = args_of(arg)?;
            if args.len() < 2 {
                return Err(QueryError::loc(
                    1257300,
                    "$ifNull needs at least two arguments",
                ));
            }
            return Ok(E::IfNull(args));
        }
        "$cond" => return parse_cond(arg),
        "$reduce" => {
            let Bson::Document(d) = arg else {
                return Err(QueryError::loc(
                    40075,
                    format!(
                        "$reduce requires an object as an argument, found: {}",
                        crate::compare::type_name(arg)
                    ),
                ));
            };
            for k in d.keys() {
                if !matches!(k.as_str(), "input" | "initialValue" | "in") {
                    return Err(QueryError::loc(
                        40076,
                        format!("$reduce found an unknown argument: {k}"),
                    ));
                }
            }
            let get = |k: &str| {
                d.get(k)
                    .ok_or_else(|| {
                        QueryError::loc(40079, format!("$reduce requires '{k}' to be specified"))
                    })
                    .and_then(parse)
            };
            return Ok(E::Reduce(
                Box::new(get("input")?),
                Box::new(get("initialValue")?),
                Box::new(get("in")?),
            ));
        }
        "$switch" => return parse_switch(arg),
        "$median" | "$percentile" => return parse_quantile(name, arg),
        "$rand" => {
            return match arg {
                Bson::Document(d) if d.is_empty() => Ok(E::Rand),
                Bson::Array(a) if a.is_empty() => Ok(E::Rand),
                _ => Err(QueryError::loc(
                    3040501,
                    "$rand does not currently accept arguments",
                )),
            }
        }
        "$let" => return lists::parse_let(arg),
        "$map" | "$filter" => return lists::parse_map_filter(name, arg),
        _ => {}
    }
    if let Some(n) = parse_named(name, arg)? {
        return Ok(n);
    }
    let Some((static_name, min, max)) = ops::arity(name) else {
        return Err(QueryError::InvalidPipelineOperator(format!(
            "Unrecognized expression '{name}'"
        )));
    };
    let args = args_of(arg)?;
    if args.len() < min || args.len() > max {
        let msg = if min == max {
            format!(
                "Expression {name} takes exactly {min} arguments. {} were passed in.",
                args.len()
            )
        } else {
            format!("Expression {name} takes at least {min} arguments, and at most {max}. {} were passed in.", args.len())
        };
        return Err(QueryError::loc(16020, msg));
    }
    Ok(E::Op(static_name, args))
}

/// Codes for object-form operators: (not an object, unknown argument, missing argument).
fn named_codes(name: &str) -> (i32, i32, i32) {
    match name {
        "$dateToString" => (18629, 18534, 18628),
        "$dateFromString" => (40540, 40541, 40542),
        "$dateFromParts" => (40519, 40518, 40516),
        "$dateToParts" => (40524, 40520, 40522),
        "$dateAdd" | "$dateSubtract" => (5166400, 5166401, 5166402),
        _ if date::PART_OPS.contains(&name) => (40536, 40535, 40539),
        _ => (9, 9, 9),
    }
}

/// The "found an unknown argument" error of the operators that word it so.
fn unknown_argument(name: &str, k: &str) -> Option<QueryError> {
    let code = match name {
        "$convert" => 9,
        "$regexMatch" | "$regexFind" | "$regexFindAll" => 31024,
        "$trim" | "$ltrim" | "$rtrim" => 50694,
        "$replaceOne" | "$replaceAll" => 51750,
        "$zip" => 34464,
        "$sortArray" => 2942501,
        "$firstN" | "$lastN" | "$minN" | "$maxN" => {
            return Some(QueryError::loc(
                5787901,
                format!("Unknown argument for 'n' operator: {k}"),
            ))
        }
        _ => return None,
    };
    Some(named_error(
        code,
        format!("{name} found an unknown argument: {k}"),
    ))
}

fn named_error(code: i32, msg: String) -> QueryError {
    if code == 9 {
        QueryError::FailedToParse(msg)
    } else {
        QueryError::loc(code, msg)
    }
}

/// Parses object-form operators; `Ok(None)` if `name` is not one.
fn parse_named(name: &str, arg: &Bson) -> Result<Option<E>, QueryError> {
    let part = date::PART_OPS.iter().find(|n| **n == name);
    let spec: Option<(&'static str, &[&str], &[&str])> = if let Some(p) = part {
        match arg {
            Bson::Document(d) if d.keys().next().is_some_and(|k| !k.starts_with('$')) => {
                Some((p, &["date", "timezone"], &["date"]))
            }
            _ => None,
        }
    } else {
        date::NAMED
            .iter()
            .chain(named::NAMED.iter())
            .find(|(n, _, _)| *n == name)
            .copied()
    };
    let Some((static_name, allowed, required)) = spec else {
        return Ok(None);
    };
    if name == "$getField" {
        return parse_get_field(arg).map(Some);
    }
    let (c_obj, c_unknown, c_missing) = named_codes(name);
    let Bson::Document(d) = arg else {
        return Err(named_error(
            c_obj,
            format!("{name} only supports an object as its argument"),
        ));
    };
    let mut args = Vec::new();
    for (k, v) in d {
        if !allowed.contains(&k.as_str()) {
            return Err(unknown_argument(name, k).unwrap_or_else(|| {
                named_error(c_unknown, format!("Unrecognized argument to {name}: {k}"))
            }));
        }
        args.push((k.clone(), parse(v)?));
    }
    for r in required {
        if !d.contains_key(r) {
            if matches!(name, "$firstN" | "$lastN" | "$minN" | "$maxN") {
                let (k, code) = if d.contains_key("n") {
                    ("input", 5787907)
                } else {
                    ("n", 5787906)
                };
                return Err(QueryError::loc(code, format!("Missing value for '{k}'")));
            }
            return Err(named_error(
                c_missing,
                format!("Missing '{r}' parameter to {name}"),
            ));
        }
    }
    if matches!(name, "$setField" | "$unsetField") && !d.contains_key("input") {
        args.push(("input".into(), E::Var("CURRENT".into(), Vec::new())));
    }
    Ok(Some(E::Named(static_name, args)))
}

/// `$median` / `$percentile` as expressions: the same arguments as the
/// accumulators; `input` evaluates to an array (its numbers are used) or a value.
fn parse_quantile(name: &str, arg: &Bson) -> Result<E, QueryError> {
    let median = name == "$median";
    let Bson::Document(d) = arg else {
        return Err(QueryError::loc(
            if median { 7436201 } else { 7436200 },
            format!(
                "specification must be an object; found {name}: {}",
                crate::error::render(arg)
            ),
        ));
    };
    let ps = quantile::parse_spec(name, d)?;
    let input = d.get("input").map(parse).transpose()?;
    Ok(E::Quantile {
        input: Box::new(input.unwrap_or(E::Lit(Bson::Null))),
        ps,
        median,
    })
}

/// Evaluates `$median` / `$percentile` on an input value.
fn quantile_of(v: Option<Bson>, ps: &[f64], median: bool) -> Bson {
    let xs: Vec<f64> = match v {
        Some(Bson::Array(items)) => items
            .iter()
            .filter_map(Num::from_bson)
            .map(Num::as_f64)
            .collect(),
        Some(other) => Num::from_bson(&other)
            .map(Num::as_f64)
            .into_iter()
            .collect(),
        None => Vec::new(),
    };
    let mut out = quantile::percentiles(xs, ps);
    if median {
        out.pop().unwrap_or(Bson::Null)
    } else {
        Bson::Array(out)
    }
}

/// `$getField`: `{field, input}`, or the shorthand `{$getField: <field>}` on
/// `$$CURRENT`. Before 7.2, `field` must be a constant string: a field path is
/// 5654600, another expression 5654601 and a constant of another type 5654602.
fn parse_get_field(arg: &Bson) -> Result<E, QueryError> {
    let full = match arg {
        Bson::Document(d) if d.keys().next().is_none_or(|k| !k.starts_with('$')) => Some(d),
        _ => None,
    };
    let (field, input) = match full {
        None => (arg, E::Var("CURRENT".into(), Vec::new())),
        Some(d) => {
            if let Some(k) = d.keys().find(|k| !matches!(k.as_str(), "field" | "input")) {
                return Err(QueryError::loc(
                    3041701,
                    format!("$getField found an unknown argument: {k}"),
                ));
            }
            let field = d.get("field").ok_or_else(|| {
                QueryError::loc(3041702, "$getField requires 'field' to be specified")
            })?;
            let input = d.get("input").ok_or_else(|| {
                QueryError::loc(3041703, "$getField requires 'input' to be specified")
            })?;
            (field, parse(input)?)
        }
    };
    let constant = match field {
        Bson::String(s) if s.starts_with('$') => {
            let path = match s.strip_prefix("$$") {
                Some(var) => format!("${var}"),
                None => format!("$CURRENT.{}", &s[1..]),
            };
            return Err(QueryError::loc(
                5654600,
                format!("'{path}' is a field path reference which is not allowed in this context. Did you mean {{$literal: '{path}'}}?"),
            ));
        }
        Bson::Document(d) => match (d.len(), d.iter().next()) {
            (1, Some((k, v))) if k == "$const" || k == "$literal" => v,
            _ => {
                return Err(QueryError::loc(
                    5654601,
                    "$getField requires 'field' to evaluate to a constant, but got a non-constant argument",
                ))
            }
        },
        Bson::Array(_) => {
            return Err(QueryError::loc(
                5654601,
                "$getField requires 'field' to evaluate to a constant, but got a non-constant argument",
            ))
        }
        other => other,
    };
    if !matches!(constant, Bson::String(_)) {
        return Err(QueryError::loc(
            5654602,
            format!(
                "$getField requires 'field' to evaluate to type String, but got {}",
                type_name(constant)
            ),
        ));
    }
    Ok(E::Named(
        "$getField",
        vec![
            ("field".into(), E::Lit(constant.clone())),
            ("input".into(), input),
        ],
    ))
}

fn parse_cond(arg: &Bson) -> Result<E, QueryError> {
    match arg {
        Bson::Document(d) => {
            for k in d.keys() {
                if !matches!(k.as_str(), "if" | "then" | "else") {
                    return Err(QueryError::loc(
                        17083,
                        format!("Unrecognized parameter to $cond: {k}"),
                    ));
                }
            }
            let get = |k: &str, code: i32| {
                d.get(k)
                    .ok_or_else(|| {
                        QueryError::loc(code, format!("Missing '{k}' parameter to $cond"))
                    })
                    .and_then(parse)
            };
            Ok(E::Cond(
                Box::new(get("if", 17080)?),
                Box::new(get("then", 17081)?),
                Box::new(get("else", 17082)?),
            ))
        }
        _ => {
            let mut args = args_of(arg)?;
            if args.len() != 3 {
                return Err(QueryError::loc(
                    16020,
                    format!(
                        "Expression $cond takes exactly 3 arguments. {} were passed in.",
                        args.len()
                    ),
                ));
            }
            let e = args.pop().unwrap_or(E::Lit(Bson::Null));
            let t = args.pop().unwrap_or(E::Lit(Bson::Null));
            let i = args.pop().unwrap_or(E::Lit(Bson::Null));
            Ok(E::Cond(Box::new(i), Box::new(t), Box::new(e)))
        }
    }
}

fn parse_switch(arg: &Bson) -> Result<E, QueryError> {
    let d = match arg {
        Bson::Document(d) => d,
        _ => {
            return Err(QueryError::loc(
                40060,
                "$switch requires an object as an argument",
            ))
        }
    };
    let mut branches = Vec::new();
    let mut default = None;
    for (k, v) in d {
        match k.as_str() {
            "branches" => {
                let Bson::Array(items) = v else {
                    return Err(QueryError::loc(
                        40061,
                        "$switch expected an array for 'branches'",
                    ));
                };
                for item in items {
                    let Bson::Document(b) = item else {
                        return Err(QueryError::loc(
                            40062,
                            "$switch expected each branch to be an object",
                        ));
                    };
                    if let Some(k) = b.keys().find(|k| !matches!(k.as_str(), "case" | "then")) {
                        return Err(QueryError::loc(
                            40063,
                            format!("$switch found an unknown argument to a branch: {k}"),
                        ));
                    }
                    let case = b.get("case").ok_or_else(|| {
                        QueryError::loc(
                            40064,
                            "$switch requires each branch have a 'case' expression",
                        )
                    })?;
                    let then = b.get("then").ok_or_else(|| {
                        QueryError::loc(
                            40065,
                            "$switch requires each branch have a 'then' expression.",
                        )
                    })?;
                    branches.push((parse(case)?, parse(then)?));
                }
            }
            "default" => default = Some(Box::new(parse(v)?)),
            other => {
                return Err(QueryError::loc(
                    40067,
                    format!("$switch found an unknown argument: {other}"),
                ))
            }
        }
    }
    if branches.is_empty() {
        return Err(QueryError::loc(
            40068,
            "$switch requires at least one branch.",
        ));
    }
    Ok(E::Switch(branches, default))
}

fn eval(e: &E, ctx: &mut Ctx<'_>) -> Result<Option<Bson>, QueryError> {
    match e {
        E::Lit(v) => Ok(Some(v.clone())),
        E::Rand => Ok(Some(Bson::Double(fastrand::f64()))),
        E::Quantile { input, ps, median } => Ok(Some(quantile_of(eval(input, ctx)?, ps, *median))),
        E::Field(parts) => match ctx.vars.iter().rev().find(|(k, _)| k == "CURRENT") {
            // `$let` rebound `$$CURRENT`: field paths read from it.
            Some((_, current)) => Ok(var_path(current.clone(), parts)),
            None => Ok(crate::path::get_agg_path(ctx.root, parts)),
        },
        E::Var(name, parts) => eval_var(name, parts, ctx),
        E::Doc(fields) => {
            let mut out = Document::new();
            for (k, fe) in fields {
                if let Some(v) = eval(fe, ctx)? {
                    out.insert(k.clone(), v);
                }
            }
            Ok(Some(Bson::Document(out)))
        }
        E::Arr(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(eval(item, ctx)?.unwrap_or(Bson::Null));
            }
            Ok(Some(Bson::Array(out)))
        }
        E::And(items) => {
            for item in items {
                if !opt_truthy(&eval(item, ctx)?) {
                    return Ok(Some(Bson::Boolean(false)));
                }
            }
            Ok(Some(Bson::Boolean(true)))
        }
        E::Or(items) => {
            for item in items {
                if opt_truthy(&eval(item, ctx)?) {
                    return Ok(Some(Bson::Boolean(true)));
                }
            }
            Ok(Some(Bson::Boolean(false)))
        }
        E::Cond(i, t, f) => {
            if opt_truthy(&eval(i, ctx)?) {
                eval(t, ctx)
            } else {
                eval(f, ctx)
            }
        }
        E::IfNull(items) => {
            let (last, init) = items
                .split_last()
                .ok_or_else(|| QueryError::bad("$ifNull"))?;
            for item in init {
                match eval(item, ctx)? {
                    None | Some(Bson::Null) | Some(Bson::Undefined) => {}
                    Some(v) => return Ok(Some(v)),
                }
            }
            eval(last, ctx)
        }
        E::Switch(branches, default) => {
            for (case, then) in branches {
                if opt_truthy(&eval(case, ctx)?) {
                    return eval(then, ctx);
                }
            }
            match default {
                Some(d) => eval(d, ctx),
                None => Err(QueryError::loc(
                    40066,
                    "$switch could not find a matching branch for an input, and no default was specified.",
                )),
            }
        }
        E::Let(vars, body) => {
            let mut bound = Vec::new();
            for (k, ve) in vars {
                bound.push((k.clone(), eval(ve, ctx)?.unwrap_or(Bson::Null)));
            }
            let depth = ctx.vars.len();
            ctx.vars.extend(bound);
            let r = eval(body, ctx);
            ctx.vars.truncate(depth);
            r
        }
        E::Map(input, var, body) => lists::eval_map(input, var, body, ctx),
        E::Filter(input, var, cond, limit) => {
            lists::eval_filter(input, var, cond, limit.as_deref(), ctx)
        }
        E::Named(name, args) => {
            let mut vals = Vec::with_capacity(args.len());
            for (k, a) in args {
                vals.push((k.clone(), eval(a, ctx)?));
            }
            let named = Named { vals };
            if date::NAMED.iter().any(|(n, _, _)| n == name) || date::PART_OPS.contains(name) {
                date::eval_named(name, &named)
            } else {
                named::eval_named(name, &named)
            }
        }
        E::Reduce(input, init, body) => {
            let items = match eval(input, ctx)? {
                None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
                Some(Bson::Array(items)) => items,
                Some(other) => {
                    return Err(QueryError::loc(
                        40080,
                        format!(
                            "$reduce requires that 'input' be an array, found: {}",
                            crate::error::render(&other)
                        ),
                    ))
                }
            };
            let mut acc = eval(init, ctx)?.unwrap_or(Bson::Null);
            for (i, item) in items.into_iter().enumerate() {
                if i % 256 == 255 {
                    check_array_memory("$reduce", crate::pipeline::mem::approx_size(&acc))?;
                }
                let depth = ctx.vars.len();
                ctx.vars.push(("value".into(), acc));
                ctx.vars.push(("this".into(), item));
                let r = eval(body, ctx);
                ctx.vars.truncate(depth);
                acc = r?.unwrap_or(Bson::Null);
            }
            Ok(Some(acc))
        }
        E::Op(name, args) => {
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(eval(a, ctx)?);
            }
            ops::eval_op(name, vals)
        }
    }
}

fn eval_var(name: &str, parts: &[String], ctx: &Ctx<'_>) -> Result<Option<Bson>, QueryError> {
    let rebound = || ctx.vars.iter().rev().find(|(k, _)| k == "CURRENT");
    let base = match name {
        "CURRENT" if rebound().is_some() => rebound().map(|(_, v)| v.clone()).unwrap_or(Bson::Null),
        "ROOT" | "CURRENT" => {
            if parts.is_empty() {
                return Ok(Some(Bson::Document(ctx.root.clone())));
            }
            return Ok(crate::path::get_agg_path(ctx.root, parts));
        }
        "REMOVE" => return Ok(None),
        "DESCEND" => Bson::String("descend".into()),
        "PRUNE" => Bson::String("prune".into()),
        "KEEP" => Bson::String("keep".into()),
        "NOW" => Bson::DateTime(bson::DateTime::now()),
        _ => match ctx.vars.iter().rev().find(|(k, _)| k == name) {
            Some((_, v)) => v.clone(),
            None => {
                return Err(QueryError::loc(
                    17276,
                    format!("Use of undefined variable: {name}"),
                ))
            }
        },
    };
    Ok(var_path(base, parts))
}

/// The value at `parts` inside a variable's value (the value itself if no parts).
fn var_path(base: Bson, parts: &[String]) -> Option<Bson> {
    if parts.is_empty() {
        return Some(base);
    }
    let mut wrapper = Document::new();
    wrapper.insert("v", base);
    let mut full = vec!["v".to_string()];
    full.extend(parts.iter().cloned());
    crate::path::get_agg_path(&wrapper, &full)
}

/// An operator's result: a value, missing (`None`), or an error.
type R = Result<Option<Bson>, QueryError>;

/// The type name MongoDB prints for an operand (`missing` when absent).
fn tname(v: &Option<Bson>) -> &'static str {
    v.as_ref().map(type_name).unwrap_or("missing")
}

/// Null, undefined or missing: what most operators answer with null.
fn is_nullish(v: &Option<Bson>) -> bool {
    matches!(v, None | Some(Bson::Null) | Some(Bson::Undefined))
}

/// An operand that is a number exactly equal to an integer.
fn int_of(v: &Option<Bson>) -> Option<i64> {
    v.as_ref()
        .and_then(Num::from_bson)
        .and_then(Num::as_exact_i64)
}

#[cfg(test)]
mod tests;
