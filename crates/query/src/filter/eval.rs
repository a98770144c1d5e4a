//! Evaluation of parsed filters against documents, following MongoDB's
//! array semantics (a predicate on an array field matches if the array as a
//! whole or any element matches) and null/missing equivalence.

use bson::{Bson, Document};

use super::{CmpOp, Node, Pred};
use crate::compare::{canonical_type_rank, compare_values, values_equal};
use crate::path::lookup_path;

pub(crate) fn node_matches(node: &Node, doc: &Document) -> bool {
    match node {
        Node::And(children) => children.iter().all(|c| node_matches(c, doc)),
        Node::Or(children) => children.iter().any(|c| node_matches(c, doc)),
        Node::Nor(children) => !children.iter().any(|c| node_matches(c, doc)),
        Node::Field { path, preds } => {
            let values = lookup_path(doc, path);
            preds.iter().all(|p| pred_matches(p, &values))
        }
        Node::Expr(e) => e
            .eval(doc)
            .map(|v| crate::expr::truthy(&v))
            .unwrap_or(false),
        Node::Schema(s) => s.matches_doc(doc),
    }
}

/// [`node_matches`] for a document known by the values its paths reach: `value(path)` is
/// the one value (or none) `path` reaches, no array being on the way. The node reads
/// named paths only (no `$expr`, `$jsonSchema`: those answer false).
pub(crate) fn node_matches_values<'v>(
    node: &Node,
    value: &dyn Fn(&str) -> Option<&'v Bson>,
) -> bool {
    match node {
        Node::And(children) => children.iter().all(|c| node_matches_values(c, value)),
        Node::Or(children) => children.iter().any(|c| node_matches_values(c, value)),
        Node::Nor(children) => !children.iter().any(|c| node_matches_values(c, value)),
        Node::Field { path, preds } => {
            let values = [value(path)];
            preds.iter().all(|p| pred_matches(p, &values))
        }
        Node::Expr(_) | Node::Schema(_) => false,
    }
}

/// Evaluates one predicate against the values reached by a path.
pub(crate) fn pred_matches(pred: &Pred, values: &[Option<&Bson>]) -> bool {
    match pred {
        Pred::Exists(want) => values.iter().any(Option::is_some) == *want,
        Pred::Not(preds) => !preds.iter().all(|p| pred_matches(p, values)),
        Pred::All(preds) => !preds.is_empty() && preds.iter().all(|p| pred_matches(p, values)),
        Pred::Never => false,
        Pred::Size(n) => values
            .iter()
            .any(|v| matches!(v, Some(Bson::Array(a)) if a.len() == *n)),
        Pred::ElemMatchDoc(node) => values.iter().flatten().any(|v| match v {
            Bson::Array(items) => items.iter().any(|item| match item {
                Bson::Document(d) => node_matches(node, d),
                _ => false,
            }),
            _ => false,
        }),
        Pred::ElemMatchVal(preds) => values.iter().flatten().any(|v| match v {
            Bson::Array(items) => items
                .iter()
                .any(|item| preds.iter().all(|p| element_matches(p, item))),
            _ => false,
        }),
        _ => values.iter().any(|v| match v {
            None => matches_missing(pred),
            Some(v) => {
                leaf_matches(pred, v)
                    || matches!(v, Bson::Array(items) if items.iter().any(|i| leaf_matches(pred, i)))
            }
        }),
    }
}

/// Matches a predicate of a value `$elemMatch` against one array element as it is: an
/// element that is itself an array is not searched (`{$elemMatch: {$gt: 4, $lt: 6}}`
/// does not match `[[5]]`), unless the predicate is about arrays (`$size`,
/// `$elemMatch`).
fn element_matches(pred: &Pred, item: &Bson) -> bool {
    match pred {
        Pred::Not(preds) => !preds.iter().all(|p| element_matches(p, item)),
        Pred::Exists(want) => *want,
        Pred::All(preds) => !preds.is_empty() && preds.iter().all(|p| element_matches(p, item)),
        _ => leaf_matches(pred, item),
    }
}

/// True if a missing field satisfies the predicate (null equality semantics).
fn matches_missing(pred: &Pred) -> bool {
    match pred {
        Pred::Eq(v) => is_nullish(v),
        Pred::Cmp(CmpOp::Gte | CmpOp::Lte, v) => is_nullish(v),
        Pred::In(items) => items.iter().any(matches_missing),
        _ => false,
    }
}

fn is_nullish(v: &Bson) -> bool {
    matches!(v, Bson::Null)
}

/// Matches a predicate against one concrete value (no array expansion).
pub(crate) fn leaf_matches(pred: &Pred, v: &Bson) -> bool {
    match pred {
        Pred::Eq(x) => {
            values_equal(v, x) && !(matches!(x, Bson::Null) && matches!(v, Bson::Undefined))
        }
        Pred::Cmp(op, x) => cmp_matches(*op, v, x),
        Pred::In(items) => items.iter().any(|i| leaf_matches(i, v)),
        Pred::Regex(r) => r.matches(v),
        Pred::Type(sels) => sels.iter().any(|s| s.matches(v)),
        Pred::Mod(d, r) => mod_matches(v, *d, *r),
        Pred::Geo(g) => g.matches(v),
        Pred::Bits(t) => t.matches(v),
        Pred::Exists(_)
        | Pred::Not(_)
        | Pred::All(_)
        | Pred::Size(_)
        | Pred::ElemMatchDoc(_)
        | Pred::ElemMatchVal(_)
        | Pred::Never => pred_matches(pred, &[Some(v)]),
    }
}

fn cmp_matches(op: CmpOp, v: &Bson, x: &Bson) -> bool {
    let cross = matches!(x, Bson::MinKey | Bson::MaxKey);
    if !cross && canonical_type_rank(v) != canonical_type_rank(x) {
        return false;
    }
    if is_nan(v) || is_nan(x) {
        // NaN only equals NaN; it is neither greater nor less than numbers.
        return matches!(op, CmpOp::Gte | CmpOp::Lte) && is_nan(v) && is_nan(x);
    }
    let ord = compare_values(v, x);
    match op {
        CmpOp::Gt => ord.is_gt(),
        CmpOp::Gte => ord.is_ge(),
        CmpOp::Lt => ord.is_lt(),
        CmpOp::Lte => ord.is_le(),
    }
}

fn is_nan(v: &Bson) -> bool {
    crate::num::Num::from_bson(v).is_some_and(|n| n.as_f64().is_nan())
}

fn mod_matches(v: &Bson, d: i64, r: i64) -> bool {
    let Some(n) = crate::num::Num::from_bson(v) else {
        return false;
    };
    let value = match n {
        crate::num::Num::I32(i) => i64::from(i),
        crate::num::Num::I64(i) => i,
        other => {
            let f = other.as_f64();
            if !f.is_finite() {
                return false;
            }
            f.trunc() as i64
        }
    };
    value.checked_rem(d).unwrap_or(0) == r
}
