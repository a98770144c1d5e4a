//! Why a document fails a collection validator: the `details` of MongoDB 7.0's
//! `DocumentValidationFailure` (121) `errInfo`, built by walking the validator as written
//! (so every `specifiedAs` is the clause the user wrote) and evaluating each clause.
//!
//! Several clauses (top-level fields, or operators of one field) are an implicit `$and`
//! reported with `clausesNotSatisfied`; one clause is reported alone. Under `$nor` and
//! `$not` the explanation is inverted: why the clause matched.

use bson::{doc, Bson, Document};

use super::json_schema::Schema;
use super::Filter;
use crate::compare::type_name;
use crate::expr::Expr;
use crate::path::lookup_path;

/// One clause of a filter document, with the filter it stands for.
enum Clause {
    Logical(&'static str, Vec<Document>),
    Expr(Bson),
    Schema(Bson),
    /// `path: {$not: {...}}`.
    Not(String, Document),
    /// One operator on a path (`op` is `$eq` for a plain value), as written.
    Op {
        path: String,
        op: String,
        spec: Document,
    },
    /// Anything else, reported by its filter alone.
    Other(String, Document),
}

impl Clause {
    fn spec(&self) -> Document {
        match self {
            Clause::Logical(op, list) => doc! {*op: list.clone()},
            Clause::Expr(e) => doc! {"$expr": e.clone()},
            Clause::Schema(s) => doc! {"$jsonSchema": s.clone()},
            Clause::Not(path, inner) => doc! {path: {"$not": inner.clone()}},
            Clause::Op { spec, .. } | Clause::Other(_, spec) => spec.clone(),
        }
    }

    fn matches(&self, doc: &Document) -> bool {
        Filter::parse(&self.spec()).is_ok_and(|f| f.matches(doc))
    }
}

/// The `details` of the validation error of `doc` against the validator `spec`.
pub fn explain_failure(spec: &Document, doc: &Document) -> Document {
    explain_doc(spec, doc, false)
}

fn clauses(spec: &Document) -> Vec<Clause> {
    let mut out = Vec::new();
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("$comment", _) => {}
            ("$and" | "$or" | "$nor", Bson::Array(items)) => {
                let op = match k.as_str() {
                    "$and" => "$and",
                    "$or" => "$or",
                    _ => "$nor",
                };
                let docs = items
                    .iter()
                    .filter_map(|i| i.as_document().cloned())
                    .collect();
                out.push(Clause::Logical(op, docs));
            }
            ("$expr", e) => out.push(Clause::Expr(e.clone())),
            ("$jsonSchema", s) => out.push(Clause::Schema(s.clone())),
            (op, _) if op.starts_with('$') => {
                out.push(Clause::Other(k.clone(), doc! {k: v.clone()}))
            }
            (path, Bson::Document(ops))
                if ops.keys().next().is_some_and(|o| o.starts_with('$')) =>
            {
                field_clauses(path, ops, &mut out)
            }
            (path, value) => out.push(Clause::Op {
                path: path.to_string(),
                op: "$eq".into(),
                spec: doc! {path: value.clone()},
            }),
        }
    }
    out
}

/// The clauses of `path: {<op>: ..., ...}`: one per operator (`$regex` with its
/// `$options`).
fn field_clauses(path: &str, ops: &Document, out: &mut Vec<Clause>) {
    for (op, v) in ops {
        match op.as_str() {
            "$options" | "$comment" | "$maxDistance" | "$minDistance" => {}
            "$not" => match v {
                Bson::Document(inner) => out.push(Clause::Not(path.into(), inner.clone())),
                other => out.push(Clause::Other(
                    "$not".into(),
                    doc! {path: {"$not": other.clone()}},
                )),
            },
            "$regex" => {
                let mut spec = doc! {"$regex": v.clone()};
                if let Some(o) = ops.get("$options") {
                    spec.insert("$options", o.clone());
                }
                out.push(Clause::Op {
                    path: path.into(),
                    op: op.clone(),
                    spec: doc! {path: spec},
                });
            }
            _ => out.push(Clause::Op {
                path: path.into(),
                op: op.clone(),
                spec: doc! {path: {op: v.clone()}},
            }),
        }
    }
}

fn explain_doc(spec: &Document, doc: &Document, inverted: bool) -> Document {
    explain_and(clauses(spec), doc, inverted)
}

/// An implicit `$and` of `list` (or its only clause).
fn explain_and(mut list: Vec<Clause>, doc: &Document, inverted: bool) -> Document {
    if list.len() == 1 {
        let only = list.remove(0);
        return explain_clause(&only, doc, inverted);
    }
    let key = if inverted {
        "clausesSatisfied"
    } else {
        "clausesNotSatisfied"
    };
    let entries: Vec<Document> = list
        .iter()
        .enumerate()
        .filter(|(_, c)| c.matches(doc) == inverted)
        .map(|(i, c)| doc! {"index": i as i32, "details": explain_clause(c, doc, inverted)})
        .collect();
    doc! {"operatorName": "$and", key: entries}
}

fn explain_clause(c: &Clause, doc: &Document, inverted: bool) -> Document {
    match c {
        Clause::Logical(op, children) => explain_logical(op, children, doc, inverted),
        Clause::Expr(e) => explain_expr(e, doc, inverted),
        Clause::Schema(s) => match (inverted, Schema::parse(s)) {
            (false, Ok(schema)) => schema.explain(doc),
            _ => doc! {"operatorName": "$jsonSchema", "reason": "schema matched"},
        },
        Clause::Not(path, inner) => {
            let mut list = Vec::new();
            field_clauses(path, inner, &mut list);
            doc! {"operatorName": "$not", "details": explain_and(list, doc, !inverted)}
        }
        Clause::Op { path, op, spec } => explain_op(path, op, spec, doc, inverted),
        Clause::Other(op, spec) => doc! {
            "operatorName": op.clone(), "specifiedAs": spec.clone(),
            "reason": if inverted { "expression did match" } else { "expression did not match" },
        },
    }
}

fn explain_logical(op: &str, children: &[Document], doc: &Document, inverted: bool) -> Document {
    // The children to report and how: `$and`/`$or` report failures (`$and` the failing
    // ones, `$or` all of them); `$nor` the children that matched. Inverted, the reverse.
    let nor = op == "$nor";
    let want_matching = nor != inverted;
    let child_inverted = want_matching;
    let key = if want_matching {
        "clausesSatisfied"
    } else {
        "clausesNotSatisfied"
    };
    let entries: Vec<Document> = children
        .iter()
        .enumerate()
        .filter(|(_, c)| Filter::parse(c).is_ok_and(|f| f.matches(doc)) == want_matching)
        .map(|(i, c)| doc! {"index": i as i32, "details": explain_doc(c, doc, child_inverted)})
        .collect();
    doc! {"operatorName": op, key: entries}
}

fn explain_expr(e: &Bson, doc: &Document, inverted: bool) -> Document {
    let mut out = doc! {"operatorName": "$expr", "specifiedAs": {"$expr": e.clone()}};
    match Expr::parse(e).and_then(|x| x.eval(doc)) {
        Ok(v) => {
            out.insert(
                "reason",
                if inverted {
                    "expression did match"
                } else {
                    "expression did not match"
                },
            );
            out.insert("expressionResult", v);
        }
        Err(err) => {
            out.insert("reason", "failed to evaluate aggregation expression");
            out.insert(
                "details",
                doc! {"code": err.code(), "codeName": err.code_name().as_ref(), "errmsg": err.message()},
            );
        }
    }
    out
}

/// The reason an operator failed (or, inverted, matched).
fn reason(op: &str, operand: Option<&Bson>, inverted: bool) -> &'static str {
    let pick =
        |failed: &'static str, matched: &'static str| if inverted { matched } else { failed };
    match op {
        "$eq" | "$gt" | "$gte" | "$lt" | "$lte" => {
            pick("comparison failed", "comparison succeeded")
        }
        "$ne" => pick("comparison succeeded", "comparison failed"),
        "$in" => pick(
            "no matching value found in array",
            "matching value found in array",
        ),
        "$nin" => pick(
            "matching value found in array",
            "no matching value found in array",
        ),
        "$exists" => {
            let want = operand.is_some_and(crate::expr::truthy);
            if want != inverted {
                "path does not exist"
            } else {
                "path does exist"
            }
        }
        "$type" => pick("type did not match", "type did match"),
        "$regex" => pick(
            "regular expression did not match",
            "regular expression did match",
        ),
        "$mod" => pick(
            "$mod did not evaluate to expected remainder",
            "$mod did evaluate to expected remainder",
        ),
        "$size" => pick(
            "array length was not equal to given size",
            "array length was equal to given size",
        ),
        "$all" => pick(
            "array did not contain all specified values",
            "array did contain all specified values",
        ),
        "$elemMatch" => pick(
            "array did not satisfy the child predicate",
            "array did satisfy the child predicate",
        ),
        _ => pick("expression did not match", "expression did match"),
    }
}

fn explain_op(path: &str, op: &str, spec: &Document, doc: &Document, inverted: bool) -> Document {
    let operand = spec
        .get(path)
        .and_then(|v| v.as_document())
        .and_then(|d| d.get(op));
    let mut out = doc! {"operatorName": op, "specifiedAs": spec.clone()};
    let found = lookup_path(doc, path);
    let present: Vec<&Bson> = found.iter().flatten().copied().collect();
    if op == "$exists" {
        out.insert("reason", reason(op, operand, inverted));
        return out;
    }
    if present.is_empty() && !inverted {
        out.insert("reason", "field was missing");
        return out;
    }
    let numeric = |v: &Bson| crate::num::Num::from_bson(v).is_some();
    if op == "$mod"
        && !inverted
        && !present
            .iter()
            .any(|v| numeric(v) || matches!(v, Bson::Array(_)))
    {
        out.insert("reason", "type did not match");
        if let [one] = present.as_slice() {
            out.insert("consideredType", type_name(one));
        }
        out.insert("expectedTypes", vec!["decimal", "double", "int", "long"]);
        considered(&present, &mut out);
        return out;
    }
    out.insert("reason", reason(op, operand, inverted));
    let values = considered(&present, &mut out);
    if op == "$type" {
        let mut types: Vec<&str> = values.iter().map(type_name).collect();
        types.sort_unstable();
        types.dedup();
        match types.as_slice() {
            [] => {}
            [one] => {
                out.insert("consideredType", *one);
            }
            many => {
                out.insert("consideredTypes", many.to_vec());
            }
        }
    }
    out
}

/// Adds `consideredValue` (one value, reached without arrays) or `consideredValues`
/// (arrays' elements flattened one level) and returns them.
fn considered(present: &[&Bson], out: &mut Document) -> Vec<Bson> {
    let any_array = present.iter().any(|v| matches!(v, Bson::Array(_)));
    let mut values = Vec::new();
    for v in present {
        match v {
            Bson::Array(items) => values.extend(items.iter().cloned()),
            other => values.push((*other).clone()),
        }
    }
    match (any_array, values.as_slice()) {
        (false, [one]) => {
            out.insert("consideredValue", one.clone());
        }
        _ => {
            out.insert("consideredValues", values.clone());
        }
    }
    values
}
