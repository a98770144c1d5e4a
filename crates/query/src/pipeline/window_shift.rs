//! `$shift` in `$setWindowFields`: `{output, by, default}` with MongoDB's checks
//! (`by` an integer, `default` a constant, no `window`, no other argument).

use bson::{Bson, Document};

use crate::error::QueryError;
use crate::expr::Expr;
use crate::num::Num;

fn fail(msg: impl Into<String>) -> QueryError {
    QueryError::FailedToParse(msg.into())
}

/// True if `v`, as an expression, reads a field, a variable or `$rand`.
fn reads_input(v: &Bson) -> bool {
    match v {
        Bson::String(s) => s.starts_with('$'),
        Bson::Array(items) => items.iter().any(reads_input),
        Bson::Document(d) => d.iter().any(|(k, v)| match k.as_str() {
            "$literal" | "$const" => false,
            "$rand" => true,
            _ => reads_input(v),
        }),
        _ => false,
    }
}

/// Parses `{$shift: {...}}` (the whole output spec `spec`): the output
/// expression, the offset and the default value.
pub(super) fn parse(spec: &Document, arg: &Bson) -> Result<(Expr, i64, Bson), QueryError> {
    if spec.contains_key("window") {
        return Err(fail("$shift does not accept a 'window' field"));
    }
    let Bson::Document(o) = arg else {
        return Err(fail("Argument to $shift must be an object"));
    };
    let (mut output, mut by, mut default) = (None, None, Bson::Null);
    for (k, v) in o {
        match k.as_str() {
            "output" => output = Some(Expr::parse(v)?),
            "default" => {
                let e = Expr::parse(v)?;
                if reads_input(v) {
                    return Err(fail(
                        "'$shift:default' expression must yield a constant value.",
                    ));
                }
                default = e.eval(&Document::new())?;
            }
            "by" => {
                let n = Num::from_bson(v)
                    .and_then(Num::as_exact_i64)
                    .filter(|n| i32::try_from(*n).is_ok())
                    .ok_or_else(|| {
                        fail(format!(
                            "'$shift:by' field must be an integer, but found  by: {}",
                            crate::error::render(v)
                        ))
                    })?;
                by = Some(n);
            }
            _ => return Err(fail("Unknown argument in $shift")),
        }
    }
    let output = output.ok_or_else(|| fail("$shift requires an 'output' expression."))?;
    let by = by.ok_or_else(|| fail("$shift requires 'by' as an integer value."))?;
    Ok((output, by, default))
}
