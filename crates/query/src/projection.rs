//! Find/`$project` projections: inclusion, exclusion, nested and dotted
//! paths, `$slice`, and computed fields (aggregation expressions, MongoDB 4.4+).
//! Output field order follows the source document; computed fields that are
//! new are appended in specification order. A find's projection may also use
//! `$elemMatch` (the first matching element of an array field, appended after the
//! other fields) and the positional `<array>.$` (the first element the query matched).

use bson::{Bson, Document};

use crate::error::QueryError;
use crate::expr::Expr;
use crate::filter::Filter;

/// A parsed projection.
#[derive(Debug, Clone)]
pub struct Projection {
    root: Node,
    inclusion: bool,
    exclude_id: bool,
    empty: bool,
    /// A find's `$elemMatch` fields (top-level): each keeps the first element of its
    /// array that the filter (on the field, as `{f: {$elemMatch: ...}}`) matches.
    elem_match: Vec<(String, Filter)>,
    /// A find's positional `<path>.$` and the find's query.
    positional: Option<(Vec<String>, Filter)>,
}

#[derive(Debug, Clone, Default)]
struct Node {
    fields: Vec<(String, Item)>,
}

#[derive(Debug, Clone)]
enum Item {
    Include,
    Exclude,
    Computed(Expr),
    Nested(Node),
    Slice(i64, Option<i64>),
}

#[derive(Default)]
struct Mode {
    inclusion: Option<bool>,
    /// Whether `$elemMatch` and positional projections are allowed (a find's).
    find: bool,
    elem_match: Vec<(String, Filter)>,
    positional: Option<Vec<String>>,
}

impl Node {
    fn get(&self, k: &str) -> Option<&Item> {
        self.fields.iter().find(|(n, _)| n == k).map(|(_, i)| i)
    }

    fn insert(&mut self, parts: &[&str], item: Item, full: &str) -> Result<(), QueryError> {
        let collision = || QueryError::loc(31250, format!("Path collision at {full}"));
        let Some((first, rest)) = parts.split_first() else {
            return Err(collision());
        };
        let pos = self.fields.iter().position(|(n, _)| n == first);
        if rest.is_empty() {
            if pos.is_some() {
                return Err(collision());
            }
            self.fields.push(((*first).to_string(), item));
            return Ok(());
        }
        let idx = match pos {
            Some(i) => i,
            None => {
                self.fields
                    .push(((*first).to_string(), Item::Nested(Node::default())));
                self.fields.len() - 1
            }
        };
        match self.fields.get_mut(idx) {
            Some((_, Item::Nested(sub))) => sub.insert(rest, item, full),
            _ => Err(collision()),
        }
    }

    fn has_computed(&self) -> bool {
        self.fields.iter().any(|(_, i)| match i {
            Item::Computed(_) => true,
            Item::Nested(n) => n.has_computed(),
            _ => false,
        })
    }
}

impl Projection {
    /// Parses a projection document.
    pub fn parse(spec: &Document) -> Result<Projection, QueryError> {
        Projection::parse_with(spec, Mode::default(), None)
    }

    /// Parses a find's projection, which may also use `$elemMatch` and the positional
    /// `.$` (the first element of the array that `query` matched).
    pub fn parse_find(spec: &Document, query: &Filter) -> Result<Projection, QueryError> {
        let mode = Mode {
            find: true,
            ..Mode::default()
        };
        Projection::parse_with(spec, mode, Some(query))
    }

    fn parse_with(
        spec: &Document,
        mut mode: Mode,
        query: Option<&Filter>,
    ) -> Result<Projection, QueryError> {
        let mut root = Node::default();
        let mut exclude_id = false;
        parse_into(&mut root, spec, "", &mut mode, &mut exclude_id)?;
        let only_elem_match = !mode.elem_match.is_empty() && mode.inclusion.is_none();
        Ok(Projection {
            root,
            // `{_id: 1}` alone is an inclusion projection, as is `$elemMatch` alone.
            inclusion: mode.inclusion.unwrap_or_else(|| {
                only_elem_match
                    || spec.len() == 1 && spec.get("_id").is_some_and(crate::expr::truthy)
            }),
            exclude_id,
            empty: spec.is_empty(),
            elem_match: mode.elem_match,
            positional: mode.positional.zip(query.cloned()),
        })
    }

    /// True for an inclusion projection (only listed fields are returned).
    pub fn is_inclusion(&self) -> bool {
        self.inclusion
    }

    /// True when `_id` is left out of the result.
    pub fn excludes_id(&self) -> bool {
        self.exclude_id
    }

    /// Applies the projection; expressions that fail leave their field out.
    pub fn apply(&self, doc: &Document) -> Document {
        self.try_apply(doc).unwrap_or_else(|_| doc.clone())
    }

    /// Applies the projection to a document it may consume: values move to the result
    /// instead of being copied when every listed path is a top-level field. Same result as
    /// [`Projection::try_apply`].
    pub fn try_apply_owned(&self, doc: Document) -> Result<Document, QueryError> {
        let flat = self
            .root
            .fields
            .iter()
            .all(|(_, item)| matches!(item, Item::Include | Item::Exclude | Item::Computed(_)));
        if self.empty || !flat || !self.elem_match.is_empty() || self.positional.is_some() {
            return self.try_apply(&doc);
        }
        let computed = self
            .root
            .fields
            .iter()
            .filter_map(|(k, item)| match item {
                Item::Computed(e) => Some(e.eval_optional(&doc).map(|v| (k, v))),
                _ => None,
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = Document::new();
        for (k, v) in doc {
            let keep = if k == "_id" {
                !self.exclude_id && !matches!(self.root.get(&k), Some(Item::Computed(_)))
            } else {
                match self.root.get(&k) {
                    Some(Item::Include) => self.inclusion,
                    None => !self.inclusion,
                    _ => false,
                }
            };
            if keep {
                out.insert(k, v);
            }
        }
        for (k, v) in computed {
            if let Some(v) = v {
                out.insert(k.clone(), v);
            }
        }
        Ok(out)
    }

    /// Applies the projection, reporting expression evaluation errors.
    pub fn try_apply(&self, doc: &Document) -> Result<Document, QueryError> {
        if self.empty {
            return Ok(doc.clone());
        }
        let mut out = if self.inclusion {
            apply_incl(&self.root, doc, doc, !self.exclude_id)?
        } else {
            apply_excl(&self.root, doc)
        };
        if self.exclude_id {
            out.remove("_id");
        }
        if let Some((path, query)) = &self.positional {
            positional(&mut out, doc, path, query)?;
        }
        for (field, filter) in &self.elem_match {
            out.remove(field);
            let Some(Bson::Array(items)) = doc.get(field) else {
                continue;
            };
            let first = items.iter().find(|item| {
                let mut one = Document::new();
                one.insert(field.clone(), Bson::Array(vec![(*item).clone()]));
                filter.matches(&one)
            });
            if let Some(item) = first {
                out.insert(field.clone(), Bson::Array(vec![item.clone()]));
            }
        }
        Ok(out)
    }
}

/// The array at `path` of `doc`, walking documents only.
fn array_at<'a>(doc: &'a Document, path: &[String]) -> Option<&'a Vec<Bson>> {
    let (last, parents) = path.split_last()?;
    let mut cur = doc;
    for p in parents {
        cur = cur.get_document(p).ok()?;
    }
    cur.get_array(last).ok()
}

/// `doc` with the array at `path` replaced by `items`.
fn with_array(doc: &Document, path: &[String], items: Vec<Bson>) -> Document {
    let mut out = doc.clone();
    let mut cur = &mut out;
    let Some((last, parents)) = path.split_last() else {
        return out;
    };
    for p in parents {
        match cur.get_mut(p) {
            Some(Bson::Document(d)) => cur = d,
            _ => return doc.clone(),
        }
    }
    cur.insert(last.clone(), Bson::Array(items));
    out
}

/// Narrows the array at `path` in the projected `out` to the first element of `doc`'s
/// array that `query` matched: the query holds with the array narrowed to that element
/// and fails with it empty (a query that holds regardless matched no element).
fn positional(
    out: &mut Document,
    doc: &Document,
    path: &[String],
    query: &Filter,
) -> Result<(), QueryError> {
    let not_found = || {
        QueryError::loc(
            51246,
            "positional operator '.$' couldn't find a matching element in the array",
        )
    };
    let items = array_at(doc, path).ok_or_else(not_found)?;
    if query.matches(&with_array(doc, path, Vec::new())) {
        return Err(not_found());
    }
    let matched = items
        .iter()
        .find(|item| query.matches(&with_array(doc, path, vec![(*item).clone()])))
        .ok_or_else(not_found)?;
    *out = with_array(out, path, vec![matched.clone()]);
    Ok(())
}

fn parse_into(
    node: &mut Node,
    spec: &Document,
    prefix: &str,
    mode: &mut Mode,
    exclude_id: &mut bool,
) -> Result<(), QueryError> {
    for (key, value) in spec {
        let full = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        if let Some(array) = full.strip_suffix(".$").filter(|_| mode.find) {
            if mode.positional.is_some() || key.matches(".$").count() > 1 {
                return Err(QueryError::loc(
                    31276,
                    "Cannot specify more than one positional projection per query.",
                ));
            }
            if !crate::expr::truthy(value) || matches!(value, Bson::Document(_)) {
                return Err(QueryError::loc(
                    31395,
                    format!("positional projection cannot be used with exclusion or an expression: {full}"),
                ));
            }
            if mode.inclusion == Some(false) {
                return Err(QueryError::loc(
                    31253,
                    format!("Cannot do inclusion on field {full} in exclusion projection"),
                ));
            }
            mode.inclusion = Some(true);
            let path: Vec<String> = array.split('.').map(str::to_string).collect();
            let parts: Vec<&str> = array.split('.').collect();
            node.insert(&parts, Item::Include, array)?;
            mode.positional = Some(path);
            continue;
        }
        if key.ends_with(".$") || key == "$" {
            return Err(QueryError::loc(
                31324,
                "Cannot use positional projection in aggregation projection",
            ));
        }
        let parts: Vec<&str> = key.split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(QueryError::loc(
                15998,
                "FieldPath field names may not be empty strings.",
            ));
        }
        if parts.iter().any(|p| p.starts_with('$')) {
            return Err(QueryError::loc(
                16410,
                format!("FieldPath field names may not start with '$'. Field: {full}"),
            ));
        }
        let is_id = full == "_id";
        let item = match value {
            Bson::Boolean(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                if crate::expr::truthy(value) {
                    Item::Include
                } else {
                    Item::Exclude
                }
            }
            Bson::Document(d) => match d.keys().next() {
                None => {
                    return Err(QueryError::loc(51270, format!("An empty sub-projection is not a valid value. Found empty object at path {full}")))
                }
                // `$slice` with numbers is the find-style projection; with
                // expressions (e.g. `["$arr", 2]`) it is the aggregation operator.
                Some(op)
                    if op == "$slice"
                        && match d.get("$slice") {
                            Some(Bson::Array(items)) => items.iter().all(|i| crate::num::Num::from_bson(i).is_some()),
                            _ => true,
                        } =>
                {
                    parse_slice(d.get("$slice").unwrap_or(&Bson::Null))?
                }
                Some(op) if op == "$elemMatch" && mode.find => {
                    if parts.len() > 1 || !prefix.is_empty() {
                        return Err(QueryError::bad("Cannot use $elemMatch projection on a nested field."));
                    }
                    let filter = Filter::parse(&bson::doc! {key.clone(): {"$elemMatch": d.get("$elemMatch").cloned().unwrap_or(Bson::Null)}})?;
                    mode.elem_match.push((key.clone(), filter));
                    continue;
                }
                Some(op) if op == "$elemMatch" || op == "$meta" => {
                    return Err(QueryError::bad(format!("{op} projection is not supported yet")))
                }
                Some(op) if op.starts_with('$') => Item::Computed(Expr::parse(value)?),
                Some(_) => {
                    let mut sub = Node::default();
                    parse_into(&mut sub, d, &full, mode, exclude_id)?;
                    node.insert(&parts, Item::Nested(sub), &full)?;
                    continue;
                }
            },
            other => Item::Computed(Expr::parse(other)?),
        };
        match item {
            Item::Exclude if is_id => *exclude_id = true,
            Item::Include if is_id => {}
            Item::Include | Item::Computed(_) => {
                if mode.inclusion == Some(false) {
                    return Err(QueryError::loc(
                        31253,
                        format!("Cannot do inclusion on field {full} in exclusion projection"),
                    ));
                }
                mode.inclusion = Some(true);
            }
            Item::Exclude => {
                if mode.inclusion == Some(true) {
                    return Err(QueryError::loc(
                        31254,
                        format!("Cannot do exclusion on field {full} in inclusion projection"),
                    ));
                }
                mode.inclusion = Some(false);
            }
            _ => {}
        }
        if is_id && matches!(item, Item::Exclude) {
            continue;
        }
        node.insert(&parts, item, &full)?;
    }
    Ok(())
}

fn parse_slice(v: &Bson) -> Result<Item, QueryError> {
    let int = |b: &Bson| crate::num::Num::from_bson(b).map(|n| n.as_f64() as i64);
    match v {
        Bson::Array(items) if items.len() == 2 => {
            let (Some(skip), Some(limit)) = (int(&items[0]), int(&items[1])) else {
                return Err(QueryError::bad("$slice arguments must be numeric"));
            };
            if limit <= 0 {
                return Err(QueryError::bad("$slice limit must be positive"));
            }
            Ok(Item::Slice(skip, Some(limit)))
        }
        other => match int(other) {
            Some(n) => Ok(Item::Slice(n, None)),
            None => Err(QueryError::bad(
                "$slice only supports numbers and [skip, limit] arrays",
            )),
        },
    }
}

/// Applies `$slice` semantics to an array value; other values pass through.
pub fn slice_value(v: &Bson, a: i64, b: Option<i64>) -> Bson {
    let Bson::Array(items) = v else {
        return v.clone();
    };
    let len = items.len() as i64;
    let (start, count) = match b {
        None if a >= 0 => (0, a),
        None => ((len + a).max(0), len),
        Some(limit) => {
            let start = if a >= 0 { a.min(len) } else { (len + a).max(0) };
            (start, limit)
        }
    };
    Bson::Array(
        items
            .iter()
            .skip(usize::try_from(start).unwrap_or(0))
            .take(usize::try_from(count).unwrap_or(0))
            .cloned()
            .collect(),
    )
}

fn apply_incl(
    node: &Node,
    doc: &Document,
    root: &Document,
    keep_id: bool,
) -> Result<Document, QueryError> {
    let mut out = Document::new();
    for (k, v) in doc {
        match node.get(k) {
            Some(Item::Include) => {
                out.insert(k.clone(), v.clone());
            }
            Some(Item::Slice(a, b)) => {
                out.insert(k.clone(), slice_value(v, *a, *b));
            }
            Some(Item::Nested(sub)) => match v {
                Bson::Document(d) => {
                    out.insert(k.clone(), apply_incl(sub, d, root, false)?);
                }
                Bson::Array(items) => {
                    out.insert(k.clone(), incl_array(sub, items, root)?);
                }
                _ if sub.has_computed() => {
                    out.insert(k.clone(), apply_incl(sub, &Document::new(), root, false)?);
                }
                _ => {}
            },
            None if keep_id && k == "_id" => {
                out.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
    for (k, item) in &node.fields {
        match item {
            Item::Computed(e) => {
                if let Some(v) = e.eval_optional(root)? {
                    out.insert(k.clone(), v);
                }
            }
            Item::Nested(sub) if !doc.contains_key(k) && sub.has_computed() => {
                out.insert(k.clone(), apply_incl(sub, &Document::new(), root, false)?);
            }
            _ => {}
        }
    }
    Ok(out)
}

fn incl_array(node: &Node, items: &[Bson], root: &Document) -> Result<Bson, QueryError> {
    let mut out = Vec::new();
    for item in items {
        match item {
            Bson::Document(d) => out.push(Bson::Document(apply_incl(node, d, root, false)?)),
            Bson::Array(inner) => out.push(incl_array(node, inner, root)?),
            // A value computed below the array replaces each element that is no document.
            _ if node.has_computed() => out.push(Bson::Document(apply_incl(
                node,
                &Document::new(),
                root,
                false,
            )?)),
            _ => {}
        }
    }
    Ok(Bson::Array(out))
}

fn apply_excl(node: &Node, doc: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in doc {
        match node.get(k) {
            Some(Item::Exclude) => {}
            Some(Item::Slice(a, b)) => {
                out.insert(k.clone(), slice_value(v, *a, *b));
            }
            Some(Item::Nested(sub)) => {
                out.insert(k.clone(), excl_value(sub, v));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

fn excl_value(node: &Node, v: &Bson) -> Bson {
    match v {
        Bson::Document(d) => Bson::Document(apply_excl(node, d)),
        Bson::Array(items) => Bson::Array(items.iter().map(|i| excl_value(node, i)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn proj(spec: Document, d: Document) -> Document {
        Projection::parse(&spec).unwrap().apply(&d)
    }

    #[test]
    fn owned_application_equals_borrowed_application() {
        let docs = [
            doc! {"_id": 1, "b": 2, "a": {"x": 1}, "c": [1, 2, 3]},
            doc! {"a": 5, "_id": {"k": 1}},
            doc! {"c": "s"},
        ];
        let specs = [
            doc! {"a": 1},
            doc! {"a": 1, "_id": 0},
            doc! {"_id": 0},
            doc! {"_id": 1},
            doc! {"a": 0, "c": 0},
            doc! {"x": "$a", "b": 1},
            doc! {"_id": "$b", "a": 1},
            doc! {"_id": 0, "y": {"$add": ["$b", 1]}},
            doc! {"a.x": 1},
            doc! {"c": {"$slice": 2}},
        ];
        for spec in &specs {
            let p = Projection::parse(spec).unwrap();
            for d in &docs {
                let borrowed = p.try_apply(d).unwrap();
                let owned = p.try_apply_owned(d.clone()).unwrap();
                assert_eq!(
                    owned.iter().collect::<Vec<_>>(),
                    borrowed.iter().collect::<Vec<_>>(),
                    "{spec} on {d}"
                );
            }
        }
    }

    #[test]
    fn inclusion_keeps_id_and_source_order() {
        let d = doc! {"_id": 1, "b": 2, "a": 1, "c": 3};
        assert_eq!(
            proj(doc! {"a": 1, "b": true}, d.clone()),
            doc! {"_id": 1, "b": 2, "a": 1}
        );
        assert_eq!(proj(doc! {"a": 1, "_id": 0}, d), doc! {"a": 1});
    }

    #[test]
    fn exclusion_removes_listed_fields() {
        let d = doc! {"_id": 1, "a": 1, "b": {"c": 1, "d": 2}};
        assert_eq!(
            proj(doc! {"a": 0, "b.c": 0}, d.clone()),
            doc! {"_id": 1, "b": {"d": 2}}
        );
        assert_eq!(
            proj(doc! {"_id": 0}, d),
            doc! {"a": 1, "b": {"c": 1, "d": 2}}
        );
    }

    #[test]
    fn dotted_inclusion_through_arrays_of_documents() {
        let d = doc! {"_id": 1, "a": [{"b": 1, "c": 2}, 5, {"c": 3}]};
        assert_eq!(
            proj(doc! {"a.b": 1}, d),
            doc! {"_id": 1, "a": [{"b": 1}, {}]}
        );
        let d = doc! {"_id": 1, "a": {"b": 1, "c": 2}};
        assert_eq!(
            proj(doc! {"a": {"c": 1}}, d),
            doc! {"_id": 1, "a": {"c": 2}}
        );
    }

    #[test]
    fn computed_dotted_fields_reach_every_element_of_an_array() {
        let d = doc! {"_id": 1, "a": [{"x": 1}, {"x": 2}, 3, [{"x": 4}]]};
        assert_eq!(
            proj(doc! {"a.y": {"$literal": 5}}, d),
            doc! {"_id": 1, "a": [{"y": 5}, {"y": 5}, {"y": 5}, [{"y": 5}]]}
        );
    }

    #[test]
    fn find_elem_match_and_positional_projections_narrow_arrays() {
        let d = doc! {"_id": 1, "z": 5, "a": [{"b": 1}, {"b": 2}, {"b": 2, "c": 1}]};
        let q = Filter::parse(&doc! {"a.b": 2}).unwrap();
        let p = Projection::parse_find(&doc! {"a": {"$elemMatch": {"b": 2}}}, &q).unwrap();
        assert_eq!(p.apply(&d), doc! {"_id": 1, "a": [{"b": 2}]});
        let p = Projection::parse_find(&doc! {"a.$": 1, "z": 1}, &q).unwrap();
        assert_eq!(p.apply(&d), doc! {"_id": 1, "z": 5, "a": [{"b": 2}]});
        // Aggregation projections refuse both.
        assert!(Projection::parse(&doc! {"a.$": 1}).is_err());
        assert!(Projection::parse(&doc! {"a": {"$elemMatch": {"b": 2}}}).is_err());
        let nested = Projection::parse_find(&doc! {"x.a": {"$elemMatch": {"b": 2}}}, &q);
        assert!(nested.is_err());
    }

    #[test]
    fn mixing_inclusion_and_exclusion_is_rejected() {
        assert_eq!(
            Projection::parse(&doc! {"a": 1, "b": 0})
                .unwrap_err()
                .code(),
            31254
        );
        assert_eq!(
            Projection::parse(&doc! {"a": 0, "b": 1})
                .unwrap_err()
                .code(),
            31253
        );
        assert!(Projection::parse(&doc! {"a": 1, "_id": 0}).is_ok());
        assert_eq!(
            Projection::parse(&doc! {"a": 1, "a.b": 1})
                .unwrap_err()
                .code(),
            31250
        );
    }

    #[test]
    fn slice_projection_limits_arrays() {
        let d = doc! {"_id": 1, "a": [1, 2, 3, 4], "b": 1};
        assert_eq!(
            proj(doc! {"a": {"$slice": 2}}, d.clone()),
            doc! {"_id": 1, "a": [1, 2], "b": 1}
        );
        assert_eq!(
            proj(doc! {"a": {"$slice": -1}}, d.clone()),
            doc! {"_id": 1, "a": [4], "b": 1}
        );
        assert_eq!(
            proj(doc! {"a": {"$slice": [1, 2]}, "b": 1}, d),
            doc! {"_id": 1, "a": [2, 3], "b": 1}
        );
    }

    #[test]
    fn computed_fields_use_expressions() {
        let d = doc! {"_id": 1, "a": 2, "b": 3};
        assert_eq!(
            proj(
                doc! {"x": "$a", "y": {"$literal": 1}, "z": {"$add": ["$a", "$b"]}},
                d
            ),
            doc! {"_id": 1, "x": 2, "y": 1, "z": 5}
        );
    }

    #[test]
    fn find_only_projection_operators_error_in_aggregation() {
        assert_eq!(
            Projection::parse(&doc! {"a.$": 1}).unwrap_err().code(),
            31324
        );
        assert_eq!(
            Projection::parse(&doc! {"a": {"$elemMatch": {"b": 1}}})
                .unwrap_err()
                .code(),
            2
        );
    }

    #[test]
    fn empty_projection_returns_document_unchanged() {
        let d = doc! {"_id": 1, "a": 1};
        assert_eq!(proj(doc! {}, d.clone()), d);
    }
}
