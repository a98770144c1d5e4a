//! `$expMovingAvg` in `$setWindowFields`: its argument checks and its running
//! average, which skips non-numeric inputs (a document with one keeps the average
//! so far, null before the first number) and is a decimal once a decimal was seen.

use bson::{Bson, Document};

use crate::compare::type_name;
use crate::error::QueryError;
use crate::expr::Expr;
use crate::num::Num;

fn fail(msg: impl Into<String>) -> QueryError {
    QueryError::FailedToParse(msg.into())
}

const TWO_FIELDS: &str = "$expMovingAvg sub object must have exactly two fields: An 'input' field, and either an 'N' field or an 'alpha' field";

/// Parses `{$expMovingAvg: {input, N | alpha}}` (the whole output spec `spec`):
/// the input expression and the smoothing factor.
pub(super) fn parse(spec: &Document, arg: &Bson) -> Result<(Expr, f64), QueryError> {
    let sub = match arg {
        Bson::Document(o) if spec.len() == 1 => o,
        _ => {
            return Err(fail(
                "$expMovingAvg must have exactly one argument that is an object",
            ))
        }
    };
    let Some(input) = sub.get("input").filter(|_| sub.len() == 2) else {
        return Err(fail(TWO_FIELDS));
    };
    let input = Expr::parse(input)?;
    let alpha = if let Some(nv) = sub.get("N") {
        let Some(n) = Num::from_bson(nv) else {
            return Err(fail(format!(
                "'N' field must be an integer, but found type {}",
                type_name(nv)
            )));
        };
        let f = n.as_f64();
        if f != f.floor() {
            return Err(fail(format!(
                "'N' field must be an integer, but found  N: {}. To use a non-integer, use the 'alpha' argument instead",
                crate::error::render(nv)
            )));
        }
        if f < 1.0 {
            return Err(fail(format!("'N' must be greater than zero. Got {f}")));
        }
        2.0 / (f + 1.0)
    } else if let Some(av) = sub.get("alpha") {
        let Some(a) = Num::from_bson(av).map(Num::as_f64) else {
            return Err(fail("'alpha' must be a number"));
        };
        if !(a > 0.0 && a < 1.0) {
            return Err(fail(format!(
                "'alpha' must be between 0 and 1 (exclusive), found alpha: {}",
                crate::error::render(av)
            )));
        }
        a
    } else {
        return Err(fail(format!(
            "Got unrecognized field in $expMovingAvg{TWO_FIELDS}"
        )));
    };
    Ok((input, alpha))
}

/// The running average over a partition's documents, in order.
pub(super) fn run(
    input: &Expr,
    alpha: f64,
    docs: &[Document],
    out: &mut Vec<Option<Bson>>,
) -> Result<(), QueryError> {
    let mut avg: Option<f64> = None;
    let mut decimal = false;
    for d in docs {
        if let Some(x) = Num::from_bson(&input.eval(d)?) {
            decimal |= matches!(x, Num::Dec(_));
            let x = x.as_f64();
            avg = Some(match avg {
                None => x,
                Some(p) => alpha * x + (1.0 - alpha) * p,
            });
        }
        out.push(Some(match avg {
            None => Bson::Null,
            Some(a) if decimal => Num::Dec(crate::decimal::from_f64_result(a)).to_bson(),
            Some(a) => Bson::Double(a),
        }));
    }
    Ok(())
}
