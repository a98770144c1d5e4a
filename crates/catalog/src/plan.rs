//! Query planning for regular collections: picks an `_id` point lookup, an index scan
//! (equality predicates on a prefix of the key pattern, then at most one range; or an index
//! that yields the requested sort order; a geo index bounded by the cells of a
//! `$geoWithin` region) or a collection scan, and turns predicates into byte ranges of the
//! index tree. Bounds may be looser than the filter: the caller always
//! applies the full filter to the fetched documents.

use crate::collection::Collection;
use crate::error::{CatalogError, Result};
use crate::index::keys::{append_field, hashed_value, prefix_end};
use crate::index::spec::FlatGrid;
use crate::index::{Index, KeyKind, KeyPart, ID_INDEX_NAME};
use crate::keystring;
use crate::plan_geo::cell_bounds;
use bson::{doc, Bson, Document};
use hourglass_query::collation::{has_strings, Collation};
use hourglass_query::compare::{canonical_type_rank, compare_values};
use hourglass_query::filter::{CmpOp, Filter, Node, Pred};
use hourglass_query::sort::SortSpec;
use std::cmp::Ordering;
use std::sync::Arc;

/// Most byte ranges one scan is split into (`$in` lists, multiplied over fields).
const MAX_RANGES: usize = 4096;

/// A `hint`.
#[derive(Debug, Clone, PartialEq)]
pub enum Hint {
    Name(String),
    KeyPattern(Document),
    /// `{$natural: 1 | -1}`: a collection scan.
    Natural(bool),
}

/// What a read asks for.
#[derive(Default, Clone, Copy)]
pub struct Query<'a> {
    pub filter: Option<&'a Filter>,
    /// The filter as the client wrote it (to match partial indexes).
    pub spec: Option<&'a Document>,
    pub sort: Option<&'a SortSpec>,
    pub hint: Option<&'a Hint>,
}

/// The index a scan reads.
#[derive(Clone)]
pub enum IndexRef {
    /// The `_id` index: the collection tree itself.
    Id,
    Secondary(Arc<Index>),
}

impl IndexRef {
    pub fn name(&self) -> &str {
        match self {
            IndexRef::Id => ID_INDEX_NAME,
            IndexRef::Secondary(i) => &i.spec.name,
        }
    }

    pub fn key_pattern(&self) -> Document {
        match self {
            IndexRef::Id => doc! {"_id": 1},
            IndexRef::Secondary(i) => i.spec.key.clone(),
        }
    }

    pub(crate) fn parts(&self) -> Vec<KeyPart> {
        match self {
            IndexRef::Id => vec![KeyPart {
                path: "_id".into(),
                kind: KeyKind::Asc,
            }],
            IndexRef::Secondary(i) => i.spec.parts.clone(),
        }
    }

    pub fn is_multikey(&self) -> bool {
        match self {
            IndexRef::Id => false,
            IndexRef::Secondary(i) => i.is_multikey(),
        }
    }
}

/// Bounds on one field of a key pattern, in value terms. (Few exist per query, so the
/// size of the `Range` variant does not matter.)
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum FieldBounds {
    /// Exactly these values (ascending, distinct).
    Points(Vec<Bson>),
    /// Values of one type bracket between optional bounds (value, inclusive).
    Range {
        low: Option<(Bson, bool)>,
        high: Option<(Bson, bool)>,
        rank: u8,
    },
    /// Geo cells (`plan_geo`): inclusive ranges of Int64 cell numbers, ascending.
    Cells(Vec<(i64, i64)>),
    /// Any value.
    All,
}

/// How the documents are read.
#[derive(Clone)]
pub enum Access {
    CollScan {
        reverse: bool,
    },
    /// `_id` equality (MongoDB's IDHACK).
    IdPoint(Bson),
    IndexScan {
        index: IndexRef,
        bounds: Vec<FieldBounds>,
        /// Byte ranges `[start, end)` of the index tree, in scan order.
        ranges: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        reverse: bool,
    },
}

/// The chosen plan.
#[derive(Clone)]
pub struct Plan {
    pub access: Access,
    /// Whether documents come out already in the requested sort order.
    pub provides_sort: bool,
}

/// Predicates per top-level (ANDed) field path.
fn conjuncts<'a>(node: &'a Node, out: &mut Vec<(&'a str, &'a Pred)>) {
    match node {
        Node::And(children) => children.iter().for_each(|c| conjuncts(c, out)),
        Node::Field { path, preds } => out.extend(preds.iter().map(|p| (path.as_str(), p))),
        _ => {}
    }
}

/// A value usable as an exact index point.
fn point_value(v: &Bson) -> bool {
    !matches!(
        v,
        Bson::Array(_)
            | Bson::RegularExpression(_)
            | Bson::MinKey
            | Bson::MaxKey
            | Bson::Undefined
            | Bson::JavaScriptCodeWithScope(_)
    )
}

fn points_of(p: &Pred) -> Option<Vec<Bson>> {
    match p {
        Pred::Eq(v) if point_value(v) => Some(vec![v.clone()]),
        Pred::In(items) if !items.is_empty() => items
            .iter()
            .map(|i| match i {
                Pred::Eq(v) if point_value(v) => Some(v.clone()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// The bounds `preds` give `part`; in an index with `collation`, in its keys (strings
/// replaced by their collation keys, as the index stores them).
fn bounds_for(
    part: &KeyPart,
    grid: Option<FlatGrid>,
    preds: &[&Pred],
    multikey: bool,
    collation: Option<&Collation>,
) -> FieldBounds {
    if part.kind.is_geo() {
        return cell_bounds(part, grid, preds, multikey)
            .map_or(FieldBounds::All, FieldBounds::Cells);
    }
    let keyed = |v: Bson| match collation {
        Some(c) => c.key_value(&v),
        None => v,
    };
    if let Some(mut points) = preds.iter().find_map(|p| points_of(p)) {
        points = points.into_iter().map(keyed).collect();
        if part.kind == KeyKind::Hashed {
            points = points.iter().map(hashed_value).collect();
        }
        points.sort_by(compare_values);
        points.dedup_by(|a, b| keystring::encode(a) == keystring::encode(b));
        return FieldBounds::Points(points);
    }
    if part.kind == KeyKind::Hashed {
        return FieldBounds::All;
    }
    let mut low: Option<(Bson, bool)> = None;
    let mut high: Option<(Bson, bool)> = None;
    let mut rank: Option<u8> = None;
    for p in preds {
        let Pred::Cmp(op, v) = p else { continue };
        if !point_value(v) || matches!(v, Bson::Null) {
            continue;
        }
        if let Bson::Double(d) = v {
            if d.is_nan() {
                continue;
            }
        }
        let r = canonical_type_rank(v);
        if rank.is_some_and(|x| x != r) {
            continue;
        }
        // On a multikey field, two predicates may be met by different elements: only
        // one of them can bound the scan.
        if multikey && rank.is_some() {
            break;
        }
        rank = Some(r);
        match op {
            CmpOp::Gt | CmpOp::Gte => {
                let incl = *op == CmpOp::Gte;
                let tighter = match &low {
                    None => true,
                    Some((cur, cur_incl)) => match compare_values(v, cur) {
                        Ordering::Greater => true,
                        Ordering::Equal => *cur_incl && !incl,
                        Ordering::Less => false,
                    },
                };
                if tighter {
                    low = Some((v.clone(), incl));
                }
            }
            CmpOp::Lt | CmpOp::Lte => {
                let incl = *op == CmpOp::Lte;
                let tighter = match &high {
                    None => true,
                    Some((cur, cur_incl)) => match compare_values(v, cur) {
                        Ordering::Less => true,
                        Ordering::Equal => *cur_incl && !incl,
                        Ordering::Greater => false,
                    },
                };
                if tighter {
                    high = Some((v.clone(), incl));
                }
            }
        }
    }
    match rank {
        Some(rank) => FieldBounds::Range {
            low: low.map(|(v, incl)| (keyed(v), incl)),
            high: high.map(|(v, incl)| (keyed(v), incl)),
            rank,
        },
        None => FieldBounds::All,
    }
}

fn encoded(part: &KeyPart, v: &Bson) -> Vec<u8> {
    let mut k = Vec::new();
    match part.kind {
        // Hashed points are already hashed.
        KeyKind::Hashed => k.extend_from_slice(&keystring::encode(v)),
        _ => append_field(&mut k, part, v),
    }
    k
}

fn join(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut v = a.to_vec();
    v.extend_from_slice(b);
    v
}

/// Byte ranges of the index tree for `bounds`.
pub fn byte_ranges(parts: &[KeyPart], bounds: &[FieldBounds]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
    for (part, b) in parts.iter().zip(bounds) {
        match b {
            FieldBounds::Points(points) if prefixes.len() * points.len() <= MAX_RANGES => {
                prefixes = prefixes
                    .iter()
                    .flat_map(|p| points.iter().map(move |v| join(p, &encoded(part, v))))
                    .collect();
            }
            FieldBounds::Range { low, high, rank } => {
                let desc = part.kind == KeyKind::Desc;
                let mut out: Vec<_> = prefixes
                    .iter()
                    .map(|p| range_for(p, part, low, high, *rank, desc))
                    .collect();
                out.sort();
                return out;
            }
            FieldBounds::Cells(cells) => {
                let mut out: Vec<_> = prefixes
                    .iter()
                    .flat_map(|p| {
                        cells.iter().map(move |(lo, hi)| {
                            let start = join(p, &encoded(part, &Bson::Int64(*lo)));
                            let last = join(p, &encoded(part, &Bson::Int64(*hi)));
                            let end = prefix_end(&last);
                            (start, end)
                        })
                    })
                    .collect();
                out.sort();
                return out;
            }
            _ => break,
        }
    }
    let mut out: Vec<_> = prefixes
        .into_iter()
        .map(|p| {
            let end = prefix_end(&p);
            (p, end)
        })
        .collect();
    out.sort();
    out
}

fn range_for(
    p: &[u8],
    part: &KeyPart,
    low: &Option<(Bson, bool)>,
    high: &Option<(Bson, bool)>,
    rank: u8,
    desc: bool,
) -> (Vec<u8>, Option<Vec<u8>>) {
    // A value whose key part was shortened (keystring::bounded) widens to every key with
    // its prefix: keys sharing the prefix order by digest, and the caller re-checks values.
    let start_at = |v: &Bson, incl: bool| {
        let enc = encoded(part, v);
        match keystring::truncated(&enc) {
            Some(prefix) => join(p, prefix),
            None if incl => join(p, &enc),
            None => prefix_end(&join(p, &enc)).unwrap_or_else(|| join(p, &enc)),
        }
    };
    let end_at = |v: &Bson, incl: bool| {
        let enc = encoded(part, v);
        match keystring::truncated(&enc) {
            Some(prefix) => prefix_end(&join(p, prefix)),
            None if incl => prefix_end(&join(p, &enc)),
            None => Some(join(p, &enc)),
        }
    };
    // Descending parts store inverted bytes: the high bound comes first.
    let (first, last, first_rank, last_rank) = if desc {
        (high, low, !rank, (!rank).saturating_add(1))
    } else {
        (low, high, rank, rank + 1)
    };
    let start = match first {
        None => join(p, &[first_rank]),
        Some((v, incl)) => start_at(v, *incl),
    };
    let end = match last {
        None => Some(join(p, &[last_rank])),
        Some((v, incl)) => end_at(v, *incl),
    };
    (start, end)
}

/// Whether `query`'s filter implies the partial filter `partial` (simple cases: each
/// top-level condition of the partial filter appears as is in the query, or the query's
/// equality on that field satisfies it).
fn implies_partial(query: &Query<'_>, partial: &Document) -> bool {
    let Some(spec) = query.spec else {
        return false;
    };
    let seed = query.filter.map(|f| f.equality_seed()).unwrap_or_default();
    partial.iter().all(|(k, v)| {
        if spec.get(k) == Some(v) {
            return true;
        }
        let Ok(f) = Filter::parse(&doc! {k.clone(): v.clone()}) else {
            return false;
        };
        hourglass_query::path::get_path(&seed, k).is_some() && f.matches(&seed)
    })
}

/// A candidate index with its bounds and what they give.
struct Candidate {
    index: IndexRef,
    bounds: Vec<FieldBounds>,
    bounded: usize,
    sort: Option<bool>,
}

/// Whether a predicate compares a string (its bounds depend on the collation).
fn compares_strings(p: &Pred) -> bool {
    match p {
        Pred::Eq(v) | Pred::Cmp(_, v) => has_strings(v),
        Pred::In(items) => items.iter().any(compares_strings),
        _ => false,
    }
}

fn analyze(index: IndexRef, preds: &[(&str, &Pred)], sort: Option<&SortSpec>) -> Candidate {
    let parts = index.parts();
    let (grid, collation) = match &index {
        IndexRef::Secondary(i) => (i.spec.flat_grid, i.spec.collation.clone()),
        IndexRef::Id => (None, None),
    };
    // An index in another collation than the query's orders and equates strings
    // differently: their predicates cannot bound it, nor can it give a sort.
    let same_collation = collation.as_deref() == hourglass_query::collation::current().as_deref();
    let multikey = index.is_multikey();
    let mut bounds = Vec::with_capacity(parts.len());
    let mut bounded = 0;
    let mut open = true;
    for part in &parts {
        let b = if open {
            let mine: Vec<&Pred> = preds
                .iter()
                .filter(|(p, pred)| *p == part.path && (same_collation || !compares_strings(pred)))
                .map(|(_, p)| *p)
                .collect();
            bounds_for(part, grid, &mine, multikey, collation.as_deref())
        } else {
            FieldBounds::All
        };
        match &b {
            FieldBounds::Points(_) => bounded += 1,
            FieldBounds::Range { .. } | FieldBounds::Cells(_) => {
                bounded += 1;
                open = false;
            }
            FieldBounds::All => open = false,
        }
        bounds.push(b);
    }
    let sort_dir = sort
        .filter(|_| same_collation)
        .and_then(|s| sort_direction(&parts, &bounds, s, multikey));
    Candidate {
        index,
        bounds,
        bounded,
        sort: sort_dir,
    }
}

/// `Some(reverse)` when scanning the index yields `sort` order.
fn sort_direction(
    parts: &[KeyPart],
    bounds: &[FieldBounds],
    sort: &SortSpec,
    multikey: bool,
) -> Option<bool> {
    if sort.is_empty()
        || multikey
        || parts
            .iter()
            .any(|p| p.kind == KeyKind::Hashed || p.kind.is_geo())
    {
        return None;
    }
    let single_points = bounds
        .iter()
        .take_while(|b| matches!(b, FieldBounds::Points(p) if p.len() == 1))
        .count();
    for start in [0, single_points] {
        let keys = sort.keys();
        if start + keys.len() > parts.len() {
            continue;
        }
        let mut dir: Option<bool> = None;
        let mut ok = true;
        for ((path, asc), part) in keys.iter().zip(&parts[start..]) {
            let forward = (*asc) == (part.kind == KeyKind::Asc);
            if *path != part.path || dir.is_some_and(|d| d == forward) {
                ok = false;
                break;
            }
            dir = Some(!forward);
        }
        if ok {
            return dir;
        }
    }
    None
}

/// Whether every geo part of an index is bounded by cells: a document without the geo
/// field is not in the index, so only a geo predicate on it lets the index answer.
fn geo_parts_bounded(parts: &[KeyPart], bounds: &[FieldBounds]) -> bool {
    parts
        .iter()
        .zip(bounds)
        .all(|(p, b)| !p.kind.is_geo() || matches!(b, FieldBounds::Cells(_)))
}

fn eligible(index: &Index, query: &Query<'_>, c: &Candidate) -> bool {
    if index.spec.hidden || !geo_parts_bounded(&index.spec.parts, &c.bounds) {
        return false;
    }
    if let Some(p) = &index.spec.partial {
        if !implies_partial(query, p) {
            return false;
        }
    }
    if index.spec.sparse {
        // Only when some bounded field excludes missing values.
        let excludes_missing = c.bounds.iter().any(|b| match b {
            FieldBounds::Points(ps) => !ps.iter().any(|v| matches!(v, Bson::Null)),
            FieldBounds::Range { .. } | FieldBounds::Cells(_) => true,
            FieldBounds::All => false,
        });
        if !excludes_missing {
            return false;
        }
    }
    true
}

pub(crate) fn find_hinted(coll: &Collection, hint: &Hint) -> Result<Option<IndexRef>> {
    let bad =
        || CatalogError::BadValue("hint provided does not correspond to an existing index".into());
    let indexes = coll.indexes();
    let found = match hint {
        Hint::Natural(_) => return Ok(None),
        Hint::Name(n) if n == ID_INDEX_NAME => Some(IndexRef::Id),
        Hint::Name(n) => indexes
            .iter()
            .find(|i| &i.spec.name == n)
            .cloned()
            .map(IndexRef::Secondary),
        Hint::KeyPattern(k) => {
            let parts = crate::index::spec::parse_key_pattern(k).map_err(|_| bad())?;
            if parts.len() == 1 && parts[0].path == "_id" && parts[0].kind == KeyKind::Asc {
                Some(IndexRef::Id)
            } else {
                indexes
                    .iter()
                    .find(|i| i.spec.parts == parts)
                    .cloned()
                    .map(IndexRef::Secondary)
            }
        }
    };
    match found {
        Some(IndexRef::Secondary(i)) if i.spec.hidden => Err(bad()),
        Some(i) => Ok(Some(i)),
        None => Err(bad()),
    }
}

fn finish(c: Candidate) -> Plan {
    let reverse = c.sort.unwrap_or(false);
    let mut ranges = byte_ranges(&c.index.parts(), &c.bounds);
    if reverse {
        ranges.reverse();
    }
    Plan {
        provides_sort: c.sort.is_some(),
        access: Access::IndexScan {
            index: c.index,
            bounds: c.bounds,
            ranges,
            reverse,
        },
    }
}

/// Chooses how to read `query` from `coll`.
pub fn plan(coll: &Collection, query: &Query<'_>) -> Result<Plan> {
    Ok(plan_with_alternatives(coll, query)?.0)
}

/// The plan [`plan`] chooses, and the other index plans it considered, in the order it
/// considered them (explain's `rejectedPlans`). A hint or an `_id` equality leaves no
/// alternatives.
pub fn plan_with_alternatives(coll: &Collection, query: &Query<'_>) -> Result<(Plan, Vec<Plan>)> {
    let mut preds = Vec::new();
    if let Some(f) = query.filter {
        conjuncts(f.root(), &mut preds);
    }
    let sort = query.sort.filter(|s| !s.is_empty());
    if let Some(hint) = query.hint {
        let chosen = match find_hinted(coll, hint)? {
            None => Plan {
                access: Access::CollScan {
                    reverse: matches!(hint, Hint::Natural(false)),
                },
                provides_sort: false,
            },
            // A hinted geo index without a `$geoWithin` scans all its keys; documents
            // without the geo field are not in it (as with MongoDB's sparse indexes).
            Some(index) => finish(analyze(index, &preds, sort)),
        };
        return Ok((chosen, Vec::new()));
    }
    // The `_id` index is binary: under a collation it is an exact point only for an `_id`
    // without strings.
    let exact_id = query.filter.and_then(Filter::id_equality).filter(|id| {
        !hourglass_query::collation::active() || !hourglass_query::collation::has_strings(id)
    });
    if let Some(id) = exact_id {
        let chosen = Plan {
            access: Access::IdPoint(id),
            provides_sort: true,
        };
        return Ok((chosen, Vec::new()));
    }
    // Index plans that bound a field or give the sort; the best bounds the most fields,
    // then gives the sort; the first of equals wins.
    let mut considered: Vec<Candidate> = Vec::new();
    let useful = |c: &Candidate| c.bounded > 0 || c.sort.is_some();
    let id = analyze(IndexRef::Id, &preds, sort);
    if useful(&id) {
        considered.push(id);
    }
    for index in coll.indexes().iter() {
        let c = analyze(IndexRef::Secondary(index.clone()), &preds, sort);
        if eligible(index, query, &c) && useful(&c) {
            considered.push(c);
        }
    }
    let score = |c: &Candidate| (c.bounded, c.sort.is_some());
    let mut best: Option<usize> = None;
    for (i, c) in considered.iter().enumerate() {
        if best.is_none_or(|b| score(c) > score(&considered[b])) {
            best = Some(i);
        }
    }
    Ok(match best {
        Some(i) => {
            let chosen = finish(considered.remove(i));
            (chosen, considered.into_iter().map(finish).collect())
        }
        None => (
            Plan {
                access: Access::CollScan { reverse: false },
                provides_sort: false,
            },
            Vec::new(),
        ),
    })
}

/// MongoDB's rendering of index bounds: `{a: ["[1, 1]"], b: ["[MinKey, MaxKey]"]}`.
pub fn bounds_document(index: &IndexRef, bounds: &[FieldBounds], reverse: bool) -> Document {
    let show = |v: &Bson| match v {
        Bson::String(s) => format!("\"{s}\""),
        Bson::Double(d) if d.is_infinite() => {
            if *d > 0.0 {
                "inf.0".into()
            } else {
                "-inf.0".into()
            }
        }
        Bson::DateTime(d) => format!("new Date({})", d.timestamp_millis()),
        other => other.to_string(),
    };
    let mut out = Document::new();
    for (part, b) in index.parts().iter().zip(bounds) {
        let desc = (part.kind == KeyKind::Desc) != reverse;
        let mut intervals: Vec<String> = match b {
            FieldBounds::Points(ps) => ps
                .iter()
                .map(|v| format!("[{}, {}]", show(v), show(v)))
                .collect(),
            FieldBounds::Range { low, high, rank } => {
                let (lo_default, hi_default) = bracket_ends(*rank);
                let (lo, lo_incl) = low
                    .as_ref()
                    .map(|(v, i)| (show(v), *i))
                    .unwrap_or((lo_default, true));
                // A bracket that ends where the next type's begins (strings at `{}`,
                // objects at `[]`, arrays at binary data) excludes that end.
                let open_end = !matches!(rank, 15 | 20 | 25);
                let (hi, hi_incl) = high
                    .as_ref()
                    .map(|(v, i)| (show(v), *i))
                    .unwrap_or((hi_default, open_end));
                if desc {
                    vec![format!(
                        "{}{hi}, {lo}{}",
                        if hi_incl { "[" } else { "(" },
                        if lo_incl { "]" } else { ")" }
                    )]
                } else {
                    vec![format!(
                        "{}{lo}, {hi}{}",
                        if lo_incl { "[" } else { "(" },
                        if hi_incl { "]" } else { ")" }
                    )]
                }
            }
            FieldBounds::Cells(cells) => cells
                .iter()
                .map(|(lo, hi)| format!("[{lo}, {hi}]"))
                .collect(),
            FieldBounds::All => vec![if desc {
                "[MaxKey, MinKey]".into()
            } else {
                "[MinKey, MaxKey]".into()
            }],
        };
        if desc && matches!(b, FieldBounds::Points(_)) {
            intervals.reverse();
        }
        out.insert(part.path.clone(), intervals);
    }
    out
}

fn bracket_ends(rank: u8) -> (String, String) {
    match rank {
        10 => ("-inf.0".into(), "inf.0".into()),
        15 => ("\"\"".into(), "{}".into()),
        20 => ("{}".into(), "[]".into()),
        25 => ("[]".into(), "BinData(0, )".into()),
        45 => (
            "new Date(-9223372036854775808)".into(),
            "new Date(9223372036854775807)".into(),
        ),
        _ => ("MinKey".into(), "MaxKey".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asc(path: &str) -> KeyPart {
        KeyPart {
            path: path.into(),
            kind: KeyKind::Asc,
        }
    }

    fn within(ranges: &[(Vec<u8>, Option<Vec<u8>>)], key: &[u8]) -> bool {
        ranges.iter().any(|(s, e)| {
            key >= s.as_slice()
                && match e {
                    Some(e) => key < e.as_slice(),
                    None => true,
                }
        })
    }

    fn key(parts: &[KeyPart], values: &[Bson]) -> Vec<u8> {
        let mut k = Vec::new();
        for (p, v) in parts.iter().zip(values) {
            append_field(&mut k, p, v);
        }
        k
    }

    #[test]
    fn ranges_follow_predicates_in_both_directions() {
        for kind in [KeyKind::Asc, KeyKind::Desc] {
            let parts = vec![
                asc("a"),
                KeyPart {
                    path: "b".into(),
                    kind,
                },
            ];
            let bounds = vec![
                FieldBounds::Points(vec![Bson::Int32(1)]),
                FieldBounds::Range {
                    low: Some((Bson::Int32(5), false)),
                    high: Some((Bson::Int32(9), true)),
                    rank: 10,
                },
            ];
            let r = byte_ranges(&parts, &bounds);
            for (b, inside) in [(4, false), (5, false), (6, true), (9, true), (10, false)] {
                let k = key(&parts, &[Bson::Int32(1), Bson::Int32(b)]);
                assert_eq!(within(&r, &k), inside, "{kind:?} b={b}");
            }
            assert!(!within(
                &r,
                &key(&parts, &[Bson::Int32(1), Bson::String("7".into())])
            ));
            assert!(!within(&r, &key(&parts, &[Bson::Int32(2), Bson::Int32(7)])));
        }
    }

    #[test]
    fn open_ranges_stay_in_the_type_bracket() {
        for kind in [KeyKind::Asc, KeyKind::Desc] {
            let parts = vec![KeyPart {
                path: "a".into(),
                kind,
            }];
            let bounds = vec![FieldBounds::Range {
                low: None,
                high: Some((Bson::Int32(3), false)),
                rank: 10,
            }];
            let r = byte_ranges(&parts, &bounds);
            assert!(within(&r, &key(&parts, &[Bson::Double(-1e300)])));
            assert!(!within(&r, &key(&parts, &[Bson::Int32(3)])));
            assert!(!within(&r, &key(&parts, &[Bson::Null])));
            assert!(!within(&r, &key(&parts, &[Bson::String("a".into())])));
        }
    }
}
