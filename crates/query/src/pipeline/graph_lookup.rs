//! `$graphLookup`: a breadth-first search over a collection read through
//! [`super::PipelineContext`]. From the values of `startWith`, each round matches the
//! foreign documents whose `connectToField` equals one of the current values (elements of
//! arrays on either side count one by one) and takes their `connectFromField` values as
//! the next round's; a document is taken once (the first round that reaches it),
//! `maxDepth` rounds after the first at most, `depthField` (a long) records the round.
//! `restrictSearchWithMatch` filters the foreign documents first. The results go to
//! `as` in the order found (MongoDB leaves the order unspecified). The results of one
//! input document may hold 100 MB at most (40099), as MongoDB's.

use super::RunOptions;
use crate::compare::OrdBson;
use crate::error::QueryError;
use crate::expr::Expr;
use crate::filter::Filter;
use bson::{Bson, Document};
use std::collections::{BTreeMap, HashSet};

/// MongoDB's `internalDocumentSourceGraphLookupMaxMemoryBytes`.
const MAX_MEMORY: u64 = 100 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct GraphLookup {
    from: String,
    start_with: Expr,
    connect_from: String,
    connect_to: String,
    as_field: String,
    max_depth: Option<u64>,
    depth_field: Option<String>,
    restrict: Option<Filter>,
}

fn type_name(v: &Bson) -> &'static str {
    crate::compare::type_name(v)
}

fn field_name(k: &str, v: &Bson) -> Result<String, QueryError> {
    let Bson::String(s) = v else {
        return Err(QueryError::loc(
            40103,
            format!(
                "expected string as argument for {k}, found: {}",
                type_name(v)
            ),
        ));
    };
    if s.starts_with('$') {
        return Err(QueryError::loc(
            16410,
            "FieldPath field names may not start with '$'.",
        ));
    }
    Ok(s.clone())
}

impl GraphLookup {
    pub fn parse(arg: &Bson) -> Result<GraphLookup, QueryError> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::FailedToParse(
                "the $graphLookup stage specification must be an object".into(),
            ));
        };
        let (mut from, mut start_with, mut connect_from, mut connect_to, mut as_field) =
            (None, None, None, None, None);
        let mut g_max_depth = None;
        let mut depth_field = None;
        let mut restrict = None;
        for (k, v) in d {
            match k.as_str() {
                "from" => match v {
                    Bson::String(s) if s.is_empty() => {
                        return Err(QueryError::Coded(
                            73,
                            "invalid $graphLookup namespace: ''".into(),
                        ))
                    }
                    Bson::String(s) => from = Some(s.clone()),
                    _ => {
                        return Err(QueryError::FailedToParse(
                            "$graphLookup 'from' field must be a string".into(),
                        ))
                    }
                },
                "startWith" => start_with = Some(Expr::parse(v)?),
                "connectFromField" => connect_from = Some(field_name(k, v)?),
                "connectToField" => connect_to = Some(field_name(k, v)?),
                "as" => as_field = Some(field_name(k, v)?),
                "depthField" => depth_field = Some(field_name(k, v)?),
                "maxDepth" => g_max_depth = Some(max_depth(v)?),
                "restrictSearchWithMatch" => {
                    let Bson::Document(m) = v else {
                        return Err(QueryError::loc(
                            40185,
                            format!(
                                "restrictSearchWithMatch must be an object, found {}",
                                type_name(v)
                            ),
                        ));
                    };
                    restrict = Some(Filter::parse(m)?);
                }
                other => {
                    return Err(QueryError::loc(
                        40104,
                        format!("Unknown argument to $graphLookup: {other}"),
                    ))
                }
            }
        }
        let missing = || {
            QueryError::loc(
                40105,
                "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', and 'connectToField' to be specified.",
            )
        };
        Ok(GraphLookup {
            from: from.ok_or_else(missing)?,
            start_with: start_with.ok_or_else(missing)?,
            connect_from: connect_from.ok_or_else(missing)?,
            connect_to: connect_to.ok_or_else(missing)?,
            as_field: as_field.ok_or_else(missing)?,
            max_depth: g_max_depth,
            depth_field,
            restrict,
        })
    }

    pub fn run(
        &self,
        docs: Vec<Document>,
        opts: &RunOptions<'_>,
    ) -> Result<Vec<Document>, QueryError> {
        let mut foreign = opts
            .ctx("$graphLookup")?
            .read_collection(opts.db, &self.from)?;
        if let Some(f) = &self.restrict {
            foreign.retain(|d| f.matches(d));
        }
        let index = values_index(&foreign, &self.connect_to);
        let mut out = Vec::with_capacity(docs.len());
        for mut doc in docs {
            crate::interrupt::check()?;
            let start = self.start_with.eval_optional(&doc)?;
            let found = self.search(&foreign, &index, start)?;
            doc.insert(self.as_field.clone(), found);
            out.push(doc);
        }
        Ok(out)
    }

    /// The documents reachable from `start`, breadth first.
    fn search(
        &self,
        foreign: &[Document],
        index: &BTreeMap<OrdBson, Vec<usize>>,
        start: Option<Bson>,
    ) -> Result<Vec<Bson>, QueryError> {
        let mut frontier: Vec<Bson> = Vec::new();
        push_values(start, &mut frontier);
        let mut seen: HashSet<usize> = HashSet::new();
        let mut found = Vec::new();
        let mut bytes = 0u64;
        let mut depth = 0u64;
        while !frontier.is_empty() && self.max_depth.is_none_or(|m| depth <= m) {
            let mut next = Vec::new();
            for v in frontier.drain(..) {
                let Some(hits) = index.get(&OrdBson(v)) else {
                    continue;
                };
                for &i in hits {
                    if !seen.insert(i) {
                        continue;
                    }
                    crate::interrupt::check()?;
                    let mut d = foreign[i].clone();
                    for v in crate::path::lookup_path(&d, &self.connect_from) {
                        push_values(v.cloned(), &mut next);
                    }
                    if let Some(f) = &self.depth_field {
                        d.insert(f.clone(), Bson::Int64(depth as i64));
                    }
                    bytes += super::mem::doc_size(&d);
                    if bytes > MAX_MEMORY {
                        return Err(QueryError::loc(
                            40099,
                            "$graphLookup reached maximum memory consumption",
                        ));
                    }
                    found.push(Bson::Document(d));
                }
            }
            frontier = next;
            depth += 1;
        }
        Ok(found)
    }
}

/// `maxDepth`: a non-negative whole number.
fn max_depth(v: &Bson) -> Result<u64, QueryError> {
    let n = match v {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        Bson::Decimal128(d) => crate::num::decimal_to_f64(d),
        _ => {
            return Err(QueryError::loc(
                40100,
                format!("maxDepth must be numeric, found type: {}", type_name(v)),
            ))
        }
    };
    if n < 0.0 {
        return Err(QueryError::loc(
            40101,
            format!("maxDepth requires a nonnegative argument, found: {n}"),
        ));
    }
    if n.fract() != 0.0 || !n.is_finite() {
        return Err(QueryError::loc(
            40102,
            format!("maxDepth could not be represented as a long long: {n}"),
        ));
    }
    Ok(n as u64)
}

/// A value to search for, or each element of an array; missing and null search for null.
fn push_values(v: Option<Bson>, out: &mut Vec<Bson>) {
    match v {
        Some(Bson::Array(items)) => out.extend(items),
        Some(Bson::Undefined) | None => out.push(Bson::Null),
        Some(v) => out.push(v),
    }
}

/// The foreign documents by each value of `field` (each element of an array value too);
/// a document without the field is not reachable.
fn values_index(docs: &[Document], field: &str) -> BTreeMap<OrdBson, Vec<usize>> {
    let mut index: BTreeMap<OrdBson, Vec<usize>> = BTreeMap::new();
    for (i, d) in docs.iter().enumerate() {
        for v in crate::path::lookup_path(d, field).into_iter().flatten() {
            let values: Vec<&Bson> = match v {
                Bson::Array(items) => items.iter().collect(),
                other => vec![other],
            };
            for v in values {
                let ids = index.entry(OrdBson(v.clone())).or_default();
                if ids.last() != Some(&i) {
                    ids.push(i);
                }
            }
        }
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn graph_lookup_spec_errors_have_mongodb_codes() {
        let code = |d: Document| GraphLookup::parse(&Bson::Document(d)).unwrap_err().code();
        let base = doc! {"from": "c", "startWith": "$a", "connectFromField": "f", "connectToField": "t", "as": "out"};
        let with = |k: &str, v: Bson| {
            let mut d = base.clone();
            d.insert(k, v);
            d
        };
        assert!(GraphLookup::parse(&Bson::Document(base.clone())).is_ok());
        assert_eq!(code(with("maxDepth", "x".into())), 40100);
        assert_eq!(code(with("maxDepth", Bson::Int32(-1))), 40101);
        assert_eq!(code(with("maxDepth", Bson::Double(1.5))), 40102);
        assert_eq!(code(with("as", Bson::Int32(1))), 40103);
        assert_eq!(code(with("bogus", Bson::Int32(1))), 40104);
        assert_eq!(code(with("as", "$x".into())), 16410);
        assert_eq!(code(with("restrictSearchWithMatch", Bson::Int32(1))), 40185);
        assert_eq!(code(with("from", "".into())), 73);
        let mut d = base.clone();
        d.remove("connectToField");
        assert_eq!(code(d), 40105);
    }
}
