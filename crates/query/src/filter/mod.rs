//! Query filters (`find`, `$match`, update/delete selectors): parsing of the
//! filter language into a [`Filter`] tree, plus helpers for point lookups
//! (`_id` equality) and upsert seeding. Matching lives in [`eval`].

pub mod bits;
pub mod doc_validation;
mod eval;
pub mod json_schema;
pub mod raw;
pub mod types;

use bson::{Bson, Document};

use crate::error::QueryError;
use crate::expr::Expr;
pub use types::{RegexPred, TypeSel};

/// A parsed filter; cheap to evaluate many times.
#[derive(Debug, Clone)]
pub struct Filter {
    root: Node,
}

/// A node of the filter tree.
#[derive(Debug, Clone)]
pub enum Node {
    /// All children match.
    And(Vec<Node>),
    /// Any child matches.
    Or(Vec<Node>),
    /// No child matches.
    Nor(Vec<Node>),
    /// Predicates (ANDed) on the values reached by a dotted path.
    Field {
        /// Dotted path.
        path: String,
        /// Predicates, all of which must hold.
        preds: Vec<Pred>,
    },
    /// `$expr`.
    Expr(Box<Expr>),
    /// `$jsonSchema`.
    Schema(Box<json_schema::Schema>),
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `$gt`
    Gt,
    /// `$gte`
    Gte,
    /// `$lt`
    Lt,
    /// `$lte`
    Lte,
}

/// A predicate on the value(s) of a field.
#[derive(Debug, Clone)]
pub enum Pred {
    /// Equality (null also matches missing).
    Eq(Bson),
    /// Ordering comparison within the operand's type bracket.
    Cmp(CmpOp, Bson),
    /// `$in`.
    In(Vec<Pred>),
    /// `$exists`.
    Exists(bool),
    /// `$type`.
    Type(Vec<TypeSel>),
    /// `$regex` or a regex literal.
    Regex(Box<RegexPred>),
    /// `$size`.
    Size(usize),
    /// `$all`: every predicate holds.
    All(Vec<Pred>),
    /// `$mod: [divisor, remainder]`.
    Mod(i64, i64),
    /// `$elemMatch` with a document filter applied to array elements.
    ElemMatchDoc(Box<Node>),
    /// `$elemMatch` with operators applied to each array element.
    ElemMatchVal(Vec<Pred>),
    /// Negation of the conjunction (`$not`, `$ne`, `$nin`).
    Not(Vec<Pred>),
    /// Never matches (e.g. `$size` with a non-integral number).
    Never,
    /// `$geoWithin`, `$geoIntersects`, `$near`, `$nearSphere`.
    Geo(Box<crate::geo::GeoPred>),
    /// `$bitsAllSet`, `$bitsAnySet`, `$bitsAllClear`, `$bitsAnyClear`.
    Bits(Box<bits::BitTest>),
}

impl Filter {
    /// Parses a filter document.
    pub fn parse(spec: &Document) -> Result<Filter, QueryError> {
        Ok(Filter {
            root: parse_doc(spec)?,
        })
    }

    /// The empty filter, matching every document.
    pub fn match_all() -> Filter {
        Filter {
            root: Node::And(Vec::new()),
        }
    }

    /// True if the filter is the empty filter.
    pub fn is_match_all(&self) -> bool {
        matches!(&self.root, Node::And(v) if v.is_empty())
    }

    /// Evaluates the filter against a document.
    pub fn matches(&self, doc: &Document) -> bool {
        eval::node_matches(&self.root, doc)
    }

    /// The root node of the parsed tree.
    pub fn root(&self) -> &Node {
        &self.root
    }

    /// Refuses `$near`/`$nearSphere` where only a `find` (or `count`) may have them:
    /// aggregation `$match` and time-series collections, as MongoDB does (its message,
    /// typo included).
    pub fn refuse_near(&self) -> Result<(), QueryError> {
        match self.has_near() {
            true => Err(QueryError::loc(
                5626500,
                "$geoNear, $near, and $nearSphere are not allowed in this context, as these operators require sorting geospatial data. If you do not need sort, consider using $geoWithin instead. Check out https://dochub.mongodb.org/core/near-sort-operation and https://dochub.mongodb.org/core/nearSphere-sort-operationfor more details.",
            )),
            false => Ok(()),
        }
    }

    /// Whether `$near`/`$nearSphere` appears anywhere in the filter.
    pub fn has_near(&self) -> bool {
        fn node(n: &Node) -> bool {
            match n {
                Node::And(c) | Node::Or(c) | Node::Nor(c) => c.iter().any(node),
                Node::Field { preds, .. } => preds.iter().any(pred),
                Node::Expr(_) | Node::Schema(_) => false,
            }
        }
        fn pred(p: &Pred) -> bool {
            match p {
                Pred::Geo(g) => matches!(g.as_ref(), crate::geo::GeoPred::Near(_)),
                Pred::Not(ps) | Pred::All(ps) | Pred::ElemMatchVal(ps) | Pred::In(ps) => {
                    ps.iter().any(pred)
                }
                Pred::ElemMatchDoc(n) => node(n),
                _ => false,
            }
        }
        node(&self.root)
    }

    /// The `$near`/`$nearSphere` at the filter's top level, with its path.
    pub fn near(&self) -> Option<(&str, &crate::geo::Near)> {
        let fields: Vec<&Node> = match &self.root {
            Node::And(children) => children.iter().collect(),
            other => vec![other],
        };
        fields.into_iter().find_map(|n| match n {
            Node::Field { path, preds } => preds.iter().find_map(|p| match p {
                Pred::Geo(g) => match g.as_ref() {
                    crate::geo::GeoPred::Near(near) => Some((path.as_str(), near)),
                    _ => None,
                },
                _ => None,
            }),
            _ => None,
        })
    }

    /// This filter with its top-level `$near`/`$nearSphere` limited to `max` (its own
    /// `$maxDistance` when smaller): one ring of an expanding nearest-first search.
    pub fn with_near_max(&self, max: f64) -> Filter {
        let mut out = self.clone();
        let fields: Vec<&mut Node> = match &mut out.root {
            Node::And(children) => children.iter_mut().collect(),
            other => vec![other],
        };
        for n in fields {
            if let Node::Field { preds, .. } = n {
                for p in preds.iter_mut() {
                    if let Pred::Geo(g) = p {
                        if let crate::geo::GeoPred::Near(near) = g.as_mut() {
                            near.max = Some(near.max.map_or(max, |m| m.min(max)));
                            return out;
                        }
                    }
                }
            }
        }
        out
    }

    /// If the filter pins `_id` to one exact value, return it.
    pub fn id_equality(&self) -> Option<Bson> {
        find_id(&self.root)
    }

    /// Equality fields usable to seed an upsert document.
    pub fn equality_seed(&self) -> Document {
        let mut out = Document::new();
        seed(&self.root, &mut out);
        out
    }
}

fn find_id(node: &Node) -> Option<Bson> {
    match node {
        Node::And(children) => children.iter().find_map(find_id),
        Node::Field { path, preds } if path == "_id" => preds.iter().find_map(|p| match p {
            Pred::Eq(v) if !matches!(v, Bson::Array(_) | Bson::Null | Bson::Undefined) => {
                Some(v.clone())
            }
            Pred::In(items) if items.len() == 1 => match &items[0] {
                Pred::Eq(v) if !matches!(v, Bson::Array(_) | Bson::Null | Bson::Undefined) => {
                    Some(v.clone())
                }
                _ => None,
            },
            _ => None,
        }),
        _ => None,
    }
}

fn seed(node: &Node, out: &mut Document) {
    match node {
        Node::And(children) => children.iter().for_each(|c| seed(c, out)),
        Node::Field { path, preds } => {
            for p in preds {
                let value = match p {
                    Pred::Eq(v) => Some(v),
                    Pred::In(items) if items.len() == 1 => match &items[0] {
                        Pred::Eq(v) => Some(v),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(v) = value {
                    let parts: Vec<&str> = path.split('.').collect();
                    if parts.iter().any(|p| p.is_empty() || p.starts_with('$')) {
                        continue;
                    }
                    if seed_conflicts(out, &parts) {
                        continue;
                    }
                    crate::path::set_doc_path(out, &parts, v.clone());
                }
            }
        }
        _ => {}
    }
}

/// True if setting `parts` in `doc` would overwrite or traverse a non-document.
fn seed_conflicts(doc: &Document, parts: &[&str]) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return true;
    };
    match doc.get(*first) {
        None => false,
        Some(Bson::Document(d)) if !rest.is_empty() => seed_conflicts(d, rest),
        Some(_) => true,
    }
}

/// A filter path may have at most as many components as a stored document has levels
/// (MongoDB: 5729100 "FieldPath is too long").
fn check_path_length(path: &str) -> Result<(), QueryError> {
    let parts = path.bytes().filter(|&b| b == b'.').count() + 1;
    if parts > crate::limits::MAX_USER_STORAGE_DEPTH {
        return Err(QueryError::loc(5729100, "FieldPath is too long"));
    }
    Ok(())
}

pub(crate) fn parse_doc(spec: &Document) -> Result<Node, QueryError> {
    parse_doc_at(spec, false)
}

/// Parses a filter document; `sub` for the document of an `$elemMatch`, where
/// `$jsonSchema` may not appear (it applies to whole documents only).
fn parse_doc_at(spec: &Document, sub: bool) -> Result<Node, QueryError> {
    let mut nodes = Vec::new();
    for (key, value) in spec {
        if let Some(op) = key.strip_prefix('$') {
            match op {
                "and" | "or" | "nor" => {
                    let children = parse_logical_list(value, sub)?;
                    nodes.push(match op {
                        "and" => Node::And(children),
                        "or" => Node::Or(children),
                        _ => Node::Nor(children),
                    });
                }
                "comment" => {}
                "expr" => nodes.push(Node::Expr(Box::new(Expr::parse(value)?))),
                "jsonSchema" if sub => {
                    return Err(QueryError::FailedToParse(
                        "$jsonSchema can only appear at the top level of a query object".into(),
                    ))
                }
                "jsonSchema" => {
                    nodes.push(Node::Schema(Box::new(json_schema::Schema::parse(value)?)))
                }
                "where" | "text" | "sampleRate" => {
                    return Err(QueryError::bad(format!("{key} is not supported")))
                }
                _ => {
                    return Err(QueryError::bad(format!(
                        "unknown top level operator: {key}"
                    )))
                }
            }
        } else {
            check_path_length(key)?;
            nodes.push(Node::Field {
                path: key.clone(),
                preds: parse_field_value_at(value, key)?,
            });
        }
    }
    Ok(if nodes.len() == 1 {
        nodes.remove(0)
    } else {
        Node::And(nodes)
    })
}

fn parse_logical_list(value: &Bson, sub: bool) -> Result<Vec<Node>, QueryError> {
    let Bson::Array(items) = value else {
        return Err(QueryError::bad("$and/$or/$nor must be a nonempty array"));
    };
    if items.is_empty() {
        return Err(QueryError::bad("$and/$or/$nor must be a nonempty array"));
    }
    items
        .iter()
        .map(|item| match item {
            Bson::Document(d) => parse_doc_at(d, sub),
            _ => Err(QueryError::bad(
                "$or/$and/$nor entries need to be full objects",
            )),
        })
        .collect()
}

fn is_operator_doc(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

/// Parses the value side of `field: value` into predicates.
pub fn parse_field_value(value: &Bson) -> Result<Vec<Pred>, QueryError> {
    parse_field_value_at(value, "")
}

/// [`parse_field_value`] for the field `path` (named by some error messages).
fn parse_field_value_at(value: &Bson, path: &str) -> Result<Vec<Pred>, QueryError> {
    match value {
        Bson::Document(d) if is_operator_doc(d) => parse_operators_at(d, path),
        Bson::RegularExpression(r) => Ok(vec![Pred::Regex(Box::new(RegexPred::new(
            &r.pattern, &r.options,
        )?))]),
        other => Ok(vec![Pred::Eq(other.clone())]),
    }
}

fn regex_or_eq(v: &Bson, ctx: &str) -> Result<Pred, QueryError> {
    match v {
        Bson::RegularExpression(r) => Ok(Pred::Regex(Box::new(RegexPred::new(
            &r.pattern, &r.options,
        )?))),
        Bson::Document(d) if is_operator_doc(d) && ctx == "$in" => {
            Err(QueryError::bad("cannot nest $ under $in"))
        }
        other => Ok(Pred::Eq(other.clone())),
    }
}

fn parse_in(v: &Bson, op: &str) -> Result<Pred, QueryError> {
    let Bson::Array(items) = v else {
        return Err(QueryError::bad(format!("{op} needs an array")));
    };
    Ok(Pred::In(
        items
            .iter()
            .map(|i| regex_or_eq(i, "$in"))
            .collect::<Result<_, _>>()?,
    ))
}

fn number_arg(v: &Bson) -> Option<crate::num::Num> {
    crate::num::Num::from_bson(v)
}

/// Parses an operator document such as `{$gt: 1, $lt: 5}`.
pub fn parse_operators(d: &Document) -> Result<Vec<Pred>, QueryError> {
    parse_operators_at(d, "")
}

/// [`parse_operators`] on the field `path` (`""` inside a value `$elemMatch`).
fn parse_operators_at(d: &Document, path: &str) -> Result<Vec<Pred>, QueryError> {
    let mut preds = Vec::new();
    let regex_value = d.get("$regex");
    let options = d.get("$options");
    if options.is_some() && regex_value.is_none() {
        return Err(QueryError::bad("$options needs a $regex"));
    }
    for (key, v) in d {
        let pred = match key.as_str() {
            "$eq" => Pred::Eq(v.clone()),
            "$ne" => {
                if matches!(v, Bson::RegularExpression(_)) {
                    return Err(QueryError::bad("Can't have regex as arg to $ne."));
                }
                Pred::Not(vec![Pred::Eq(v.clone())])
            }
            "$gt" => Pred::Cmp(CmpOp::Gt, v.clone()),
            "$gte" => Pred::Cmp(CmpOp::Gte, v.clone()),
            "$lt" => Pred::Cmp(CmpOp::Lt, v.clone()),
            "$lte" => Pred::Cmp(CmpOp::Lte, v.clone()),
            "$in" => parse_in(v, "$in")?,
            "$nin" => Pred::Not(vec![parse_in(v, "$nin")?]),
            "$exists" => Pred::Exists(crate::expr::truthy(v)),
            "$type" => Pred::Type(TypeSel::parse_list(v)?),
            "$size" => parse_size(v)?,
            "$mod" => parse_mod(v)?,
            "$all" => parse_all(v)?,
            "$elemMatch" => parse_elem_match(v)?,
            "$not" => parse_not(v, path)?,
            "$regex" => parse_regex(v, options)?,
            "$options" => continue,
            "$comment" => continue,
            "$geoWithin" | "$within" | "$geoIntersects" | "$near" | "$nearSphere" => {
                Pred::Geo(Box::new(crate::geo::GeoPred::parse(key, v, d)?))
            }
            // Read by `$near`/`$nearSphere` with a legacy point.
            "$maxDistance" | "$minDistance"
                if d.contains_key("$near") || d.contains_key("$nearSphere") =>
            {
                continue
            }
            "$bitsAllSet" | "$bitsAnySet" | "$bitsAllClear" | "$bitsAnyClear" => {
                match bits::BitsOp::from_name(key) {
                    Some(op) => Pred::Bits(Box::new(bits::BitTest::parse(op, path, v)?)),
                    None => return Err(QueryError::bad(format!("unknown operator: {key}"))),
                }
            }
            "$where" | "$text" | "$jsonSchema" | "$expr" => {
                return Err(QueryError::bad(format!("{key} is not supported")))
            }
            _ => return Err(QueryError::bad(format!("unknown operator: {key}"))),
        };
        preds.push(pred);
    }
    Ok(preds)
}

fn parse_regex(v: &Bson, options: Option<&Bson>) -> Result<Pred, QueryError> {
    let opts = match options {
        None => None,
        Some(Bson::String(s)) => Some(s.as_str()),
        Some(_) => return Err(QueryError::bad("$options has to be a string")),
    };
    let re = match v {
        Bson::String(p) => RegexPred::new(p, opts.unwrap_or(""))?,
        Bson::RegularExpression(r) => {
            if opts.is_some_and(|o| !o.is_empty()) && !r.options.is_empty() {
                return Err(QueryError::bad("options set in both $regex and $options"));
            }
            RegexPred::new(&r.pattern, opts.unwrap_or(&r.options))?
        }
        _ => return Err(QueryError::bad("$regex has to be a string")),
    };
    Ok(Pred::Regex(Box::new(re)))
}

fn parse_size(v: &Bson) -> Result<Pred, QueryError> {
    let n = number_arg(v).ok_or_else(|| QueryError::bad("$size needs a number"))?;
    match n.as_exact_i64() {
        Some(i) if i < 0 => Err(QueryError::bad("$size may not be negative")),
        Some(i) => Ok(Pred::Size(usize::try_from(i).unwrap_or(usize::MAX))),
        None if n.as_f64().is_nan() || n.as_f64().is_infinite() => Ok(Pred::Never),
        None => Err(QueryError::bad("$size must be a whole number")),
    }
}

fn parse_mod(v: &Bson) -> Result<Pred, QueryError> {
    let Bson::Array(items) = v else {
        return Err(QueryError::bad("malformed mod, needs to be an array"));
    };
    if items.len() < 2 {
        return Err(QueryError::bad("malformed mod, not enough elements"));
    }
    if items.len() > 2 {
        return Err(QueryError::bad("malformed mod, too many elements"));
    }
    let to_i = |b: &Bson, what: &str| -> Result<i64, QueryError> {
        let n = number_arg(b)
            .ok_or_else(|| QueryError::bad(format!("malformed mod, {what} not a number")))?;
        let f = n.as_f64();
        if !f.is_finite() {
            return Err(QueryError::bad(format!(
                "malformed mod, {what} value is invalid"
            )));
        }
        Ok(match n {
            crate::num::Num::I32(i) => i64::from(i),
            crate::num::Num::I64(i) => i,
            _ => f.trunc() as i64,
        })
    };
    let divisor = to_i(&items[0], "divisor")?;
    let remainder = to_i(&items[1], "remainder")?;
    if divisor == 0 {
        return Err(QueryError::bad("divisor cannot be 0"));
    }
    Ok(Pred::Mod(divisor, remainder))
}

fn parse_all(v: &Bson) -> Result<Pred, QueryError> {
    let Bson::Array(items) = v else {
        return Err(QueryError::bad("$all needs an array"));
    };
    let mut preds = Vec::new();
    for item in items {
        match item {
            Bson::Document(d) if d.keys().next().is_some_and(|k| k == "$elemMatch") => {
                if d.len() != 1 {
                    return Err(QueryError::bad("$all/$elemMatch has to be consistent"));
                }
                preds.push(parse_elem_match(
                    d.get("$elemMatch").unwrap_or(&Bson::Null),
                )?);
            }
            Bson::Document(d) if is_operator_doc(d) => {
                return Err(QueryError::bad("no $ expressions in $all"))
            }
            other => preds.push(regex_or_eq(other, "$all")?),
        }
    }
    Ok(Pred::All(preds))
}

fn parse_elem_match(v: &Bson) -> Result<Pred, QueryError> {
    let Bson::Document(d) = v else {
        return Err(QueryError::bad("$elemMatch needs an Object"));
    };
    let first = d.keys().next();
    let value_form = first.is_some_and(|k| {
        k.starts_with('$') && !matches!(k.as_str(), "$and" | "$or" | "$nor" | "$expr" | "$where")
    });
    if value_form {
        Ok(Pred::ElemMatchVal(parse_operators(d)?))
    } else {
        Ok(Pred::ElemMatchDoc(Box::new(parse_doc_at(d, true)?)))
    }
}

fn parse_not(v: &Bson, path: &str) -> Result<Pred, QueryError> {
    match v {
        Bson::RegularExpression(r) => Ok(Pred::Not(vec![Pred::Regex(Box::new(RegexPred::new(
            &r.pattern, &r.options,
        )?))])),
        Bson::Document(d) => {
            if d.is_empty() {
                return Err(QueryError::bad("$not cannot be empty"));
            }
            if !is_operator_doc(d) {
                return Err(QueryError::bad(format!(
                    "unknown operator: {}",
                    d.keys().next().map(String::as_str).unwrap_or("")
                )));
            }
            Ok(Pred::Not(parse_operators_at(d, path)?))
        }
        _ => Err(QueryError::bad("$not needs a regex or a document")),
    }
}

#[cfg(test)]
mod tests;

/// A predicate on a single value (as used by `$pull` conditions and value
/// form `$elemMatch`): operator documents, regexes or plain equality.
#[derive(Debug, Clone)]
pub struct ValueMatcher {
    preds: Vec<Pred>,
}

impl ValueMatcher {
    /// Parses a value condition such as `{$gte: 5}`, `/ab/` or `3`.
    pub fn parse(v: &Bson) -> Result<ValueMatcher, QueryError> {
        Ok(ValueMatcher {
            preds: parse_field_value(v)?,
        })
    }

    /// True if `v` satisfies every predicate.
    pub fn matches(&self, v: &Bson) -> bool {
        self.preds.iter().all(|p| eval::pred_matches(p, &[Some(v)]))
    }
}
