//! Accumulators used as expressions (`$sum`, `$avg`, `$min`, `$max`,
//! `$stdDevPop`, `$stdDevSamp`) and the size operators `$binarySize` and
//! `$bsonSize`.
//!
//! With one operand that evaluates to an array, an accumulator expression works
//! on the array's elements; otherwise it works on its operands' values. Like the
//! `$group` accumulators, `$sum`/`$avg`/`$stdDev*` skip non-numeric values and
//! `$min`/`$max` skip null and missing values.

use bson::Bson;

use super::{is_nullish, tname, R};
use crate::compare::compare_values;
use crate::error::QueryError;
use crate::num::Num;

/// The accumulator operators usable as expressions.
pub(super) const ACCUMULATOR_OPS: &[&str] =
    &["$sum", "$avg", "$min", "$max", "$stdDevPop", "$stdDevSamp"];

/// The values an accumulator expression accumulates over.
fn operand_values(args: Vec<Option<Bson>>) -> Vec<Bson> {
    if args.len() == 1 {
        if let Some(Some(Bson::Array(items))) = args.first() {
            return items.clone();
        }
    }
    args.into_iter().flatten().collect()
}

/// Evaluates an accumulator expression on its evaluated operands.
pub(super) fn eval_accumulator(name: &str, args: Vec<Option<Bson>>) -> R {
    let values = operand_values(args);
    let nums = || values.iter().filter_map(Num::from_bson);
    match name {
        "$sum" => Ok(Some(nums().fold(Num::I32(0), Num::plus).to_bson())),
        "$avg" => {
            let mut count = 0u32;
            let mut total = Num::I32(0);
            for n in nums() {
                count += 1;
                total = total.plus(n);
            }
            if count == 0 {
                return Ok(Some(Bson::Null));
            }
            Ok(Some(match total {
                Num::Dec(d) => Num::Dec(d / crate::decimal::Dec::from(count)).to_bson(),
                _ => Bson::Double(total.as_f64() / f64::from(count)),
            }))
        }
        "$min" | "$max" => {
            let mut best: Option<Bson> = None;
            for v in values.iter().filter(|v| !is_nullish(&Some((*v).clone()))) {
                let better = match &best {
                    None => true,
                    Some(b) => {
                        let o = compare_values(v, b);
                        if name == "$min" {
                            o.is_lt()
                        } else {
                            o.is_gt()
                        }
                    }
                };
                if better {
                    best = Some(v.clone());
                }
            }
            Ok(Some(best.unwrap_or(Bson::Null)))
        }
        _ => {
            // Welford's online algorithm, as the `$group` accumulators.
            let (mut n, mut mean, mut m2) = (0f64, 0f64, 0f64);
            for x in nums().map(Num::as_f64) {
                n += 1.0;
                let delta = x - mean;
                mean += delta / n;
                m2 += delta * (x - mean);
            }
            let samp = name == "$stdDevSamp";
            if n == 0.0 || (samp && n < 2.0) {
                return Ok(Some(Bson::Null));
            }
            let var = if samp { m2 / (n - 1.0) } else { m2 / n };
            Ok(Some(Bson::Double(var.max(0.0).sqrt())))
        }
    }
}

/// `$binarySize`: the byte size of a string or binary value; null for null/missing.
pub(super) fn binary_size(a: &Option<Bson>) -> R {
    let n = match a {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::String(s)) => s.len(),
        Some(Bson::Binary(b)) => b.bytes.len(),
        other => {
            return Err(QueryError::loc(
                51276,
                format!(
                    "$binarySize requires a string or BinData argument, found: {}",
                    tname(other)
                ),
            ))
        }
    };
    Ok(Some(Bson::Int32(i32::try_from(n).unwrap_or(i32::MAX))))
}

/// `$bsonSize`: the encoded size of a document; null for null/missing.
pub(super) fn bson_size(a: &Option<Bson>) -> R {
    match a {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Document(d)) => Ok(Some(Bson::Int32(
            i32::try_from(crate::bson_size::bson_size(d)).unwrap_or(i32::MAX),
        ))),
        other => Err(QueryError::loc(
            31393,
            format!(
                "$bsonSize requires a document input, found: {}",
                tname(other)
            ),
        )),
    }
}

/// Checks the `n` of `$firstN`/`$lastN`/`$minN`/`$maxN`/`$topN`/`$bottomN`
/// (accumulator, window function or expression): a number (5787902) with an
/// integral value (5787903) above zero (5787908).
pub(crate) fn validate_n(v: &Option<Bson>) -> Result<usize, QueryError> {
    let shown = || match v {
        None => "missing".to_string(),
        Some(Bson::Double(f)) => crate::num::format_g(*f),
        Some(other) => crate::error::render(other),
    };
    let Some(n) = v.as_ref().and_then(Num::from_bson) else {
        return Err(QueryError::loc(
            5787902,
            format!(
                "Value for 'n' must be of integral type, but found {}",
                shown()
            ),
        ));
    };
    let Some(n) = n.as_exact_i64() else {
        return Err(QueryError::loc(
            5787903,
            format!(
                "Value for 'n' must be of integral type, but found {}",
                shown()
            ),
        ));
    };
    if n <= 0 {
        return Err(QueryError::loc(
            5787908,
            format!("'n' must be greater than 0, found {n}"),
        ));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}
