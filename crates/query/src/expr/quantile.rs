//! `$median` and `$percentile`: their arguments and the discrete percentiles, shared by
//! the accumulators (`$group`, `$setWindowFields`) and the expressions.

use crate::error::QueryError;
use crate::num::Num;
use bson::{Bson, Document};

/// The required argument `k` of `name`'s specification `d`.
pub(crate) fn required<'a>(name: &str, d: &'a Document, k: &str) -> Result<&'a Bson, QueryError> {
    d.get(k)
        .ok_or_else(|| QueryError::loc(5787907, format!("{name} requires a '{k}' field")))
}

/// Checks the fields of `name`'s specification `d` (`input`, `method`, `p` for
/// `$percentile`) and returns the percentiles it asks for (`[0.5]` for `$median`).
pub(crate) fn parse_spec(name: &str, d: &Document) -> Result<Vec<f64>, QueryError> {
    let median = name == "$median";
    let allowed: &[&str] = if median {
        &["input", "method"]
    } else {
        &["input", "method", "p"]
    };
    if let Some(k) = d.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(QueryError::loc(
            5787901,
            format!("Unknown argument for {name}: {k}"),
        ));
    }
    required(name, d, "input")?;
    match required(name, d, "method")? {
        Bson::String(m) if m == "approximate" || m == "discrete" || m == "continuous" => {}
        other => {
            return Err(QueryError::BadValue(format!(
                "Currently only 'approximate' can be used as percentile 'method', found {}",
                crate::error::render(other)
            )))
        }
    }
    if median {
        return Ok(vec![0.5]);
    }
    let ps = match required(name, d, "p")? {
        Bson::Array(items) if !items.is_empty() => items
            .iter()
            .map(|v| {
                Num::from_bson(v)
                    .map(Num::as_f64)
                    .filter(|f| (0.0..=1.0).contains(f))
            })
            .collect::<Option<Vec<f64>>>(),
        _ => None,
    };
    ps.ok_or_else(|| {
        QueryError::loc(
            7750301,
            "The $percentile 'p' field must be an array of numbers from [0.0, 1.0]",
        )
    })
}

/// The discrete percentiles `ps` of `xs` (the smallest value with at least a fraction
/// `p` of the values at or below it); null for each when `xs` is empty.
pub(crate) fn percentiles(mut xs: Vec<f64>, ps: &[f64]) -> Vec<Bson> {
    xs.sort_by(|a, b| a.total_cmp(b));
    ps.iter()
        .map(|p| {
            let rank = (p * xs.len() as f64).ceil() as usize;
            let idx = rank.saturating_sub(1).min(xs.len().saturating_sub(1));
            xs.get(idx).map(|x| Bson::Double(*x)).unwrap_or(Bson::Null)
        })
        .collect()
}
