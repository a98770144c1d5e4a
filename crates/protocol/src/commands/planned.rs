//! Planned reads of regular collections: `hint` parsing, running the catalog's planner and
//! executing its plan (filter applied to every fetched document), and the explain shapes
//! of a plan (`COLLSCAN`, `IDHACK`, `FETCH` over `IXSCAN`).

use crate::cursor::{DocSource, Row, RowSource};
use crate::error::CommandError;
use bson::{doc, Bson, Document};
use hourglass_catalog::plan::{bounds_document, plan, Access, FieldBounds, Hint, Plan, Query};
use hourglass_catalog::plan_min_max::min_max_plan;
use hourglass_catalog::scan::Narrowing;
use hourglass_catalog::scan::ScanStats;
use hourglass_catalog::Collection;
use hourglass_query::filter::raw::RawFilter;
use hourglass_query::filter::Filter;
use hourglass_query::pipeline::deps::pipeline_paths;
use hourglass_query::raw_pick::FieldTree;
use hourglass_query::sort::SortSpec;
use std::sync::Arc;

/// Read options besides the filter.
#[derive(Default, Clone, Copy)]
pub struct ReadOpts<'a> {
    pub sort: Option<&'a SortSpec>,
    pub hint: Option<&'a Hint>,
    /// The stages that process the documents read (e.g. a find's `$sort`/`$project`,
    /// `$count`): a time-series scan decodes only the columns they read.
    pub after: &'a [Document],
    /// A find's `min` and `max`: the hinted index is read between them.
    pub min: Option<&'a Document>,
    pub max: Option<&'a Document>,
}

/// A read in progress: its plan, its counters and its documents.
pub struct PlannedRead {
    pub plan: Plan,
    pub stats: Arc<ScanStats>,
    pub source: DocSource,
}

/// Parses a `hint` argument (a name, a key pattern or `{$natural: 1|-1}`; `{}` = none).
pub fn parse_hint(v: Option<&Bson>) -> Result<Option<Hint>, CommandError> {
    match v {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(s)) => Ok(Some(Hint::Name(s.clone()))),
        Some(Bson::Document(d)) if d.is_empty() => Ok(None),
        Some(Bson::Document(d)) => match d.get("$natural") {
            Some(n) => {
                let dir = super::args::as_i64(n).unwrap_or(1);
                Ok(Some(Hint::Natural(dir >= 0)))
            }
            None => Ok(Some(Hint::KeyPattern(d.clone()))),
        },
        Some(_) => Err(CommandError::failed_to_parse(
            "hint must be either a string or nested object",
        )),
    }
}

/// A find's `sort` and `hint` (of `cmd`, whose types the caller checked) as they are
/// planned: a `sort` of `{$natural: 1 | -1}` is the collection's own order, forward or
/// backward, which MongoDB reads as `hint: {$natural: ...}` (a scan in that direction,
/// unless a hint is given), not as a sort by a field.
pub fn natural_sort_as_hint(cmd: &Document) -> (Option<&Document>, Option<&Bson>) {
    let (sort, hint) = (cmd.get_document("sort").ok(), cmd.get("hint"));
    match sort {
        Some(s) if s.len() == 1 && s.contains_key("$natural") => (None, hint.or(cmd.get("sort"))),
        _ => (sort, hint),
    }
}

/// Plans `filter` on `c`.
pub fn plan_read(
    c: &Collection,
    filter: &Filter,
    spec: Option<&Document>,
    opts: &ReadOpts<'_>,
) -> Result<Plan, CommandError> {
    if opts.min.is_some() || opts.max.is_some() {
        return Ok(min_max_plan(c, opts.hint, opts.min, opts.max)?);
    }
    Ok(plan(c, &query(filter, spec, opts))?)
}

/// Plans `filter` on `c`, with the other index plans considered (explain's
/// `rejectedPlans`).
pub fn plan_with_alternatives(
    c: &Collection,
    filter: &Filter,
    spec: Option<&Document>,
    opts: &ReadOpts<'_>,
) -> Result<(Plan, Vec<Plan>), CommandError> {
    if opts.min.is_some() || opts.max.is_some() {
        return Ok((plan_read(c, filter, spec, opts)?, Vec::new()));
    }
    Ok(hourglass_catalog::plan::plan_with_alternatives(
        c,
        &query(filter, spec, opts),
    )?)
}

fn query<'a>(filter: &'a Filter, spec: Option<&'a Document>, opts: &ReadOpts<'a>) -> Query<'a> {
    Query {
        filter: Some(filter),
        spec,
        sort: opts.sort,
        hint: opts.hint,
    }
}

/// Plans and starts reading the documents of `c` that match `filter`.
pub fn regular_read(
    c: &Arc<Collection>,
    filter: Filter,
    spec: Option<&Document>,
    opts: &ReadOpts<'_>,
) -> Result<PlannedRead, CommandError> {
    let plan = plan_read(c, &filter, spec, opts)?;
    let stats = Arc::new(ScanStats::default());
    let docs = c.execute_filtered(&plan, stats.clone(), narrowing(&filter, opts.after));
    let source: DocSource = Box::new(docs.map(|r| r.map_err(CommandError::from)).filter(
        move |r| match r {
            Ok(d) => filter.matches(d),
            Err(_) => true,
        },
    ));
    Ok(PlannedRead {
        plan,
        stats,
        source,
    })
}

/// Plans and starts reading the documents of `c` that match `filter`, as their stored
/// bytes, for a read that returns them unchanged (no sort, projection or later stage):
/// nothing is decoded but the paths the filter reads (all of a document when it reads
/// the whole document). The plan is returned for the plan summary.
pub fn regular_stored_rows(
    c: &Arc<Collection>,
    filter: Filter,
    spec: Option<&Document>,
    opts: &ReadOpts<'_>,
) -> Result<(Plan, RowSource), CommandError> {
    let plan = plan_read(c, &filter, spec, opts)?;
    let stored = c.execute_stored(&plan, Arc::new(ScanStats::default()));
    let pre = RawFilter::new(&filter);
    let rows = stored.filter_map(move |r| {
        let matched = r.map_err(CommandError::from).and_then(|bytes| {
            crate::operations::check_interrupt()?;
            let raw = bson::RawDocument::from_bytes(&bytes)
                .map_err(|e| CommandError::new(22, format!("stored document: {e}")))?;
            let keep = match &pre {
                _ if filter.is_match_all() => true,
                Some(pre) => pre.matches(raw),
                None => filter.matches(
                    &Document::try_from(raw)
                        .map_err(|e| CommandError::new(22, format!("stored document: {e}")))?,
                ),
            };
            Ok(keep.then(|| Row::Raw(raw.to_raw_document_buf().into())))
        });
        matched.transpose()
    });
    Ok((plan, Box::new(rows)))
}

/// What a scan of a regular collection may leave out: documents the filter rules out
/// from their bytes are never built, and when the stages `after` the scan read only some
/// paths (and the filter its own fields), only those parts are built.
fn narrowing(filter: &Filter, after: &[Document]) -> Narrowing {
    let pre = RawFilter::new(filter);
    let fields = match (&pre, pipeline_paths(after)) {
        (Some(pre), Some(mut read)) => {
            read.extend(pre.fields().iter().cloned());
            Some(Arc::new(FieldTree::from_paths(
                read.iter().map(String::as_str),
            )))
        }
        _ => None,
    };
    Narrowing { pre, fields }
}

/// mongod's one-line plan summary: `COLLSCAN`, `IDHACK` or `IXSCAN { a: 1, b: -1 }`.
pub fn plan_summary(plan: &Plan) -> String {
    match &plan.access {
        Access::CollScan { .. } => "COLLSCAN".to_string(),
        Access::IdPoint(_) => "IDHACK".to_string(),
        Access::IndexScan { index, .. } => format!("IXSCAN {}", pattern_summary(index)),
    }
}

/// An index's key pattern as plan summaries print it: `{ a: 1, b: -1 }`.
pub fn pattern_summary(index: &hourglass_catalog::plan::IndexRef) -> String {
    let fields: Vec<String> = index
        .key_pattern()
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

/// The filter as explain shows it: `{a: {$eq: 1}}`, several fields under `$and`.
pub fn parsed_query(spec: Option<&Document>) -> Document {
    let Some(spec) = spec else {
        return Document::new();
    };
    let mut parts: Vec<Document> = Vec::new();
    for (k, v) in spec {
        let cond = match v {
            Bson::Document(d) if d.keys().next().is_some_and(|f| f.starts_with('$')) => {
                Bson::Document(d.clone())
            }
            other if !k.starts_with('$') => Bson::Document(doc! {"$eq": other.clone()}),
            other => other.clone(),
        };
        parts.push(doc! {k.clone(): cond});
    }
    match parts.len() {
        0 => Document::new(),
        1 => parts.remove(0),
        _ => doc! {"$and": parts},
    }
}

/// An index scan's `multiKeyPaths`: for each field of the key pattern, the prefixes of its
/// path that hold an array in some document. Hourglass records only whether an index is
/// multikey, not where, so the paths are given when that settles them: none for an index
/// that is not multikey, the field itself for a multikey index on one undotted field.
/// Otherwise they are left out, as mongod leaves them out for an index that does not
/// track its multikey paths.
fn multikey_paths(index: &hourglass_catalog::plan::IndexRef) -> Option<Document> {
    let pattern = index.key_pattern();
    if !index.is_multikey() {
        return Some(
            pattern
                .keys()
                .map(|k| (k.clone(), Bson::Array(Vec::new())))
                .collect(),
        );
    }
    match pattern.keys().collect::<Vec<_>>().as_slice() {
        [only] if !only.contains('.') => {
            Some(doc! {(*only).clone(): [Bson::String((*only).clone())]})
        }
        _ => None,
    }
}

/// A value whose index point matches exactly the documents an equality to it matches:
/// not null (which also matches missing fields), an array, a document or a regex, and a
/// string only in an index without a collation.
fn exact_point(v: &Bson, collated: bool) -> bool {
    match v {
        Bson::Double(d) => !d.is_nan(),
        Bson::Int32(_) | Bson::Int64(_) | Bson::Boolean(_) | Bson::DateTime(_) => true,
        Bson::ObjectId(_) => true,
        Bson::String(_) => !collated,
        _ => false,
    }
}

/// Whether `d` is a range: one or two of `$gt`, `$gte`, `$lt`, `$lte`, at most one
/// lower and one upper.
fn is_range(d: &Document) -> bool {
    let lows = d
        .keys()
        .filter(|k| matches!(k.as_str(), "$gt" | "$gte"))
        .count();
    let highs = d
        .keys()
        .filter(|k| matches!(k.as_str(), "$lt" | "$lte"))
        .count();
    lows <= 1 && highs <= 1 && lows + highs == d.len() && !d.is_empty()
}

/// Whether a range's bounds are exactly the index scan's `bounds` on its field: each end
/// of the range is that end of the scan (its value and inclusiveness), an open end is the
/// end of the value's type bracket, and the values are of a type whose bracket the scan
/// keeps exactly (numbers but NaN, dates, object ids, strings without a collation).
fn range_is_exact(d: &Document, bounds: &FieldBounds, collated: bool) -> bool {
    use hourglass_query::compare::compare_values;
    let FieldBounds::Range { low, high, .. } = bounds else {
        return false;
    };
    let end = |ops: [&str; 2]| -> Option<(Bson, bool)> {
        d.iter()
            .find(|(k, _)| ops.contains(&k.as_str()))
            .map(|(k, v)| (v.clone(), k.ends_with('e')))
    };
    let exact_value = |v: &Bson| !matches!(v, Bson::Boolean(_)) && exact_point(v, collated);
    let same = |want: Option<(Bson, bool)>, got: &Option<(Bson, bool)>| match (want, got) {
        (None, None) => true,
        (Some((w, wi)), Some((g, gi))) => {
            exact_value(&w) && wi == *gi && compare_values(&w, g).is_eq()
        }
        _ => false,
    };
    same(end(["$gt", "$gte"]), low) && same(end(["$lt", "$lte"]), high)
}

/// Whether the bounds of an index scan answer the whole filter, so the FETCH above it
/// keeps no filter (as mongod shows it): every field of the filter is an equality or
/// `$in` of exact point values, or a range of exact values, on an ascending or
/// descending field of an index that is not multikey, the scan's bounds on it are exactly
/// those points or that range, and every other field of the index is unbounded. (Hourglass still applies the filter to what it fetches.)
fn exact_bounds(
    index: &hourglass_catalog::plan::IndexRef,
    bounds: &[FieldBounds],
    spec: Option<&Document>,
) -> bool {
    use hourglass_query::compare::compare_values;
    let Some(spec) = spec.filter(|s| !s.is_empty()) else {
        return false;
    };
    let collated = match index {
        hourglass_catalog::plan::IndexRef::Id => false,
        hourglass_catalog::plan::IndexRef::Secondary(i) => i.spec.collation.is_some(),
    };
    let pattern = index.key_pattern();
    if index.is_multikey()
        || bounds.len() != pattern.len()
        || pattern
            .values()
            .any(|v| !matches!(v, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)))
        || spec.keys().any(|k| !pattern.contains_key(k))
    {
        return false;
    }
    for ((field, _), b) in pattern.iter().zip(bounds) {
        let values: Vec<Bson> = match spec.get(field) {
            None => {
                if matches!(b, FieldBounds::All) {
                    continue;
                }
                return false;
            }
            Some(Bson::Document(d)) if is_range(d) => {
                if range_is_exact(d, b, collated) {
                    continue;
                }
                return false;
            }
            Some(Bson::Document(d)) if d.len() == 1 => match d.iter().next() {
                Some((op, v)) if op == "$eq" => vec![v.clone()],
                Some((op, Bson::Array(items))) if op == "$in" && !items.is_empty() => items.clone(),
                _ => return false,
            },
            Some(Bson::Document(_)) => return false,
            Some(v) => vec![v.clone()],
        };
        if values.iter().any(|v| !exact_point(v, collated)) {
            return false;
        }
        let FieldBounds::Points(points) = b else {
            return false;
        };
        let covered = |a: &[Bson], b: &[Bson]| {
            a.iter()
                .all(|x| b.iter().any(|y| compare_values(x, y).is_eq()))
        };
        if !covered(&values, points) || !covered(points, &values) {
            return false;
        }
    }
    true
}

/// The stages of `plan` (with counters when `stats` is given: executionStages).
pub fn plan_stages(
    plan: &Plan,
    spec: Option<&Document>,
    stats: Option<(&ScanStats, u64)>,
) -> Document {
    let filter = parsed_query(spec);
    match &plan.access {
        Access::CollScan { reverse } => {
            let mut d = doc! {"stage": "COLLSCAN"};
            if !filter.is_empty() {
                d.insert("filter", filter);
            }
            d.insert("direction", if *reverse { "backward" } else { "forward" });
            if let Some((s, n)) = stats {
                d.insert("nReturned", n as i64);
                d.insert("docsExamined", s.docs() as i64);
            }
            d
        }
        Access::IdPoint(_) => {
            let mut d = doc! {"stage": "IDHACK"};
            if let Some((s, n)) = stats {
                d.insert("nReturned", n as i64);
                d.insert("keysExamined", s.keys() as i64);
                d.insert("docsExamined", s.docs() as i64);
            }
            d
        }
        Access::IndexScan {
            index,
            bounds,
            reverse,
            ..
        } => {
            let (unique, sparse, partial) = match index {
                hourglass_catalog::plan::IndexRef::Id => (true, false, false),
                hourglass_catalog::plan::IndexRef::Secondary(i) => {
                    (i.spec.unique, i.spec.sparse, i.spec.partial.is_some())
                }
            };
            let mut ix = doc! {
                "stage": "IXSCAN",
                "keyPattern": index.key_pattern(),
                "indexName": index.name(),
                "isMultiKey": index.is_multikey(),
            };
            if let Some(paths) = multikey_paths(index) {
                ix.insert("multiKeyPaths", paths);
            }
            ix.extend(doc! {
                "isUnique": unique,
                "isSparse": sparse,
                "isPartial": partial,
                "indexVersion": 2,
                "direction": if *reverse { "backward" } else { "forward" },
                "indexBounds": bounds_document(index, bounds, *reverse),
            });
            let mut fetch = doc! {"stage": "FETCH"};
            if !filter.is_empty() && !exact_bounds(index, bounds, spec) {
                fetch.insert("filter", filter);
            }
            if let Some((s, n)) = stats {
                ix.insert("nReturned", s.docs() as i64);
                ix.insert("keysExamined", s.keys() as i64);
                fetch.insert("nReturned", n as i64);
                fetch.insert("docsExamined", s.docs() as i64);
            }
            fetch.insert("inputStage", ix);
            fetch
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_query_wraps_values_in_eq_and_several_fields_in_and() {
        assert_eq!(parsed_query(Some(&doc! {"a": 1})), doc! {"a": {"$eq": 1}});
        assert_eq!(
            parsed_query(Some(&doc! {"a": 1, "b": {"$gt": 2}})),
            doc! {"$and": [{"a": {"$eq": 1}}, {"b": {"$gt": 2}}]}
        );
    }

    #[test]
    fn hints_parse_as_names_patterns_or_natural() {
        assert_eq!(
            parse_hint(Some(&Bson::String("a_1".into()))).unwrap(),
            Some(Hint::Name("a_1".into()))
        );
        assert_eq!(
            parse_hint(Some(&Bson::Document(doc! {"$natural": -1}))).unwrap(),
            Some(Hint::Natural(false))
        );
        assert!(parse_hint(Some(&Bson::Int32(1))).is_err());
    }
}
