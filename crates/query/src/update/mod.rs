//! Update specifications: replacement documents, operator updates (`$set`,
//! `$inc`, `$push`, ...) and pipeline-style updates. Operator updates are
//! validated at parse time (unknown modifiers, conflicting paths) and applied
//! in path order, as MongoDB does, to a copy of the document; `_id` is
//! immutable.

mod array_filters;
mod array_ops;
mod bit;
pub mod paths;
mod rename;
pub mod upsert;

use bson::{Bson, Document};

use crate::compare::{compare_values, type_name, values_equal};
use crate::error::{render, render_id, QueryError};
use crate::filter::Filter;
use crate::num::Num;
use crate::pipeline::Pipeline;
pub use array_filters::ArrayFilters;
pub use array_ops::{PullCond, PushSpec};
pub use bit::BitSpec;

/// A parsed update.
#[derive(Debug, Clone)]
pub enum Update {
    /// Replace the whole document (keeping `_id`).
    Replacement(Document),
    /// Field update operators, sorted by path, and the `arrayFilters` their `$[<id>]`
    /// path components name.
    Operators(Vec<FieldOp>, ArrayFilters),
    /// An aggregation-pipeline update.
    Pipeline(Pipeline),
}

/// An operator resolved against a document: with `$` replaced, and the concrete paths its
/// array-update components (`$[]`, `$[<id>]`) stand for.
type Planned<'a> = (std::borrow::Cow<'a, FieldOp>, Option<Vec<Vec<String>>>);

/// One operator applied to one path.
#[derive(Debug, Clone)]
pub struct FieldOp {
    /// Path components.
    pub path: Vec<String>,
    /// The operation.
    pub op: Op,
}

/// An update operation.
#[derive(Debug, Clone)]
pub enum Op {
    /// `$set`
    Set(Bson),
    /// `$setOnInsert`
    SetOnInsert(Bson),
    /// `$unset`
    Unset,
    /// `$inc`
    Inc(Num),
    /// `$mul`
    Mul(Num),
    /// `$min`
    Min(Bson),
    /// `$max`
    Max(Bson),
    /// `$rename` to the given path.
    Rename(Vec<String>),
    /// `$currentDate` (true = timestamp).
    CurrentDate(bool),
    /// `$push`
    Push(PushSpec),
    /// `$addToSet`
    AddToSet(Vec<Bson>),
    /// `$pull`
    Pull(PullCond),
    /// `$pullAll`
    PullAll(Vec<Bson>),
    /// `$pop` (true = remove first).
    Pop(bool),
    /// `$bit`
    Bit(BitSpec),
}

const MODIFIERS: &[&str] = &[
    "$set",
    "$setOnInsert",
    "$unset",
    "$inc",
    "$mul",
    "$min",
    "$max",
    "$rename",
    "$currentDate",
    "$push",
    "$addToSet",
    "$pull",
    "$pullAll",
    "$pop",
    "$bit",
];

impl Update {
    /// Parses an update document (operator update or replacement).
    pub fn parse(spec: &Document) -> Result<Update, QueryError> {
        Update::parse_with_array_filters(spec, &[])
    }

    /// Parses an update document with its `arrayFilters` (only an operator update may
    /// have them, and each must be used by a `$[<id>]` path component).
    pub fn parse_with_array_filters(
        spec: &Document,
        filters: &[Document],
    ) -> Result<Update, QueryError> {
        let is_ops = spec.keys().next().is_some_and(|k| k.starts_with('$'));
        if !is_ops && !filters.is_empty() {
            return Err(QueryError::FailedToParse(
                "Cannot use array filters with a replacement-style update".into(),
            ));
        }
        if !is_ops {
            if let Some(k) = spec.keys().find(|k| k.starts_with('$')) {
                return Err(QueryError::DollarPrefixedFieldName(format!(
                    "The dollar ($) prefixed field '{k}' in '{k}' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."
                )));
            }
            return Ok(Update::Replacement(spec.clone()));
        }
        // MongoDB parses the array filters before the update.
        let filters = array_filters::parse(filters)?;
        let mut ops = Vec::new();
        for (name, arg) in spec {
            if !MODIFIERS.contains(&name.as_str()) {
                return Err(QueryError::FailedToParse(format!(
                    "Unknown modifier: {name}. Expected a valid update modifier or pipeline-style update specified as an array"
                )));
            }
            let Bson::Document(fields) = arg else {
                return Err(QueryError::FailedToParse(format!(
                    "Modifiers operate on fields but we found type {} instead. For example: {{$mod: {{<field>: ...}}}} not {{{name}: {}}}",
                    type_name(arg),
                    render(arg)
                )));
            };
            for (path, value) in fields {
                let path_parts = paths::parse_update_path(path)?;
                array_filters::check_path(&path_parts, &filters)?;
                let op = parse_op(name, &path_parts, value)?;
                ops.push(FieldOp {
                    path: path_parts,
                    op,
                });
            }
        }
        check_conflicts(&ops)?;
        array_filters::check(&ops, &filters, spec)?;
        ops.sort_by(|a, b| cmp_paths(&a.path, &b.path));
        Ok(Update::Operators(ops, filters))
    }

    /// Parses a pipeline-style update (`[{$set: ...}, {$unset: ...}]`).
    pub fn parse_pipeline(stages: &[Document]) -> Result<Update, QueryError> {
        Ok(Update::Pipeline(Pipeline::parse_for_update(stages)?))
    }

    /// Applies the update to `doc`. Returns whether the document changed.
    pub fn apply(&self, doc: &mut Document, is_upsert_insert: bool) -> Result<bool, QueryError> {
        self.apply_matched(doc, is_upsert_insert, None)
    }

    /// Like [`Update::apply`], resolving the positional `$` path component against
    /// `query`: it stands for the first element of that array for which the query matches.
    pub fn apply_matched(
        &self,
        doc: &mut Document,
        is_upsert_insert: bool,
        query: Option<&Filter>,
    ) -> Result<bool, QueryError> {
        let mut new = match self {
            Update::Replacement(r) => replacement(doc, r)?,
            Update::Operators(ops, filters) => {
                // Every path is resolved against the document as it was.
                let mut planned: Vec<Planned<'_>> = Vec::with_capacity(ops.len());
                for op in ops {
                    let op = if op.path.iter().any(|p| p == "$") {
                        std::borrow::Cow::Owned(resolve_positional(doc, op, query)?)
                    } else {
                        std::borrow::Cow::Borrowed(op)
                    };
                    let concrete = array_filters::is_array_update(&op.path)
                        .then(|| array_filters::expand(doc, &op.path, filters))
                        .transpose()?;
                    planned.push((op, concrete));
                }
                let expanded: Vec<(&[String], &[Vec<String>])> = planned
                    .iter()
                    .filter_map(|(op, c)| c.as_deref().map(|c| (op.path.as_slice(), c)))
                    .collect();
                array_filters::check_expanded(&expanded)?;
                let mut new = doc.clone();
                let top_level: Vec<Vec<String>> = planned
                    .iter()
                    .filter_map(|(op, _)| match &op.op {
                        Op::Unset => None,
                        Op::Rename(to) => Some(to.clone()),
                        _ => Some(op.path.clone()),
                    })
                    .collect();
                for (op, concrete) in planned {
                    let Some(paths) = concrete else {
                        apply_op(&mut new, &op, is_upsert_insert)?;
                        continue;
                    };
                    for path in paths {
                        let concrete = FieldOp {
                            path,
                            op: op.op.clone(),
                        };
                        apply_op(&mut new, &concrete, is_upsert_insert)?;
                    }
                }
                if !is_upsert_insert {
                    check_dollar_fields(doc, &new, &top_level)?;
                }
                new
            }
            Update::Pipeline(p) => {
                let mut out = p.run(vec![doc.clone()])?;
                if out.len() != 1 {
                    return Err(QueryError::bad(
                        "pipeline update must produce exactly one document",
                    ));
                }
                let mut new = out.remove(0);
                // A pipeline whose result has no _id ($replaceRoot, $unset) keeps the
                // document's _id, first, as MongoDB does.
                if let (Some(id), false) = (doc.get("_id"), new.contains_key("_id")) {
                    let mut with_id = Document::new();
                    with_id.insert("_id", id.clone());
                    with_id.extend(new);
                    new = with_id;
                }
                new
            }
        };
        check_id(doc, &mut new, self)?;
        let changed = !doc.iter().eq(new.iter());
        *doc = new;
        Ok(changed)
    }
}

/// Refuses an update (not an upsert's insert) that writes a top-level field whose name
/// starts with `$`, as MongoDB's storage validation does; below the top level such names
/// are allowed, and so is changing inside an existing top-level one.
fn check_dollar_fields(
    old: &Document,
    new: &Document,
    written: &[Vec<String>],
) -> Result<(), QueryError> {
    for path in written {
        let Some(first) = path.first().filter(|f| f.starts_with('$')) else {
            continue;
        };
        let changed = old.get(first.as_str()) != new.get(first.as_str());
        if changed && (path.len() == 1 || !old.contains_key(first.as_str())) {
            return Err(QueryError::DollarPrefixedFieldName(format!(
                "The dollar ($) prefixed field '{first}' in '{first}' is not valid for storage."
            )));
        }
    }
    Ok(())
}

/// Replaces the `$` component of `op`'s path by the index of the first element of that
/// array for which `query` matches (the query is tried with the array narrowed to that
/// one element). A query that matches without any element (one that does not read the
/// array) fails, as MongoDB's.
fn resolve_positional(
    doc: &Document,
    op: &FieldOp,
    query: Option<&Filter>,
) -> Result<FieldOp, QueryError> {
    let not_found =
        || QueryError::bad("The positional operator did not find the match needed from the query.");
    let pos = op
        .path
        .iter()
        .position(|p| p == "$")
        .ok_or_else(not_found)?;
    let query = query.ok_or_else(not_found)?;
    let prefix = &op.path[..pos];
    let Some(Bson::Array(items)) = paths::get(doc, prefix) else {
        return Err(not_found());
    };
    // A query that matches whatever the array holds matched no element of it.
    let mut emptied = doc.clone();
    paths::set(&mut emptied, prefix, Bson::Array(Vec::new()))?;
    if query.matches(&emptied) {
        return Err(not_found());
    }
    for (i, item) in items.iter().enumerate() {
        let mut narrowed = doc.clone();
        paths::set(&mut narrowed, prefix, Bson::Array(vec![item.clone()]))?;
        if query.matches(&narrowed) {
            let mut resolved = op.clone();
            resolved.path[pos] = i.to_string();
            return Ok(resolved);
        }
    }
    Err(not_found())
}

/// Refuses an update that changed `_id`, with MongoDB's message for the kind of update:
/// an operator update names the path it updated; a pipeline's result is checked as a
/// replacement document is. An `_id` equal under comparison (`1` and `1.0`) keeps its
/// stored value.
fn check_id(old: &Document, new: &mut Document, update: &Update) -> Result<(), QueryError> {
    let Some(old_id) = old.get("_id") else {
        return Ok(());
    };
    match new.get("_id") {
        Some(id) if id == old_id => Ok(()),
        Some(id)
            if values_equal(id, old_id) && !matches!(id, Bson::Document(_) | Bson::Array(_)) =>
        {
            new.insert("_id", old_id.clone());
            Ok(())
        }
        Some(id) if matches!(update, Update::Pipeline(_)) => Err(id_altered(id)),
        _ => {
            let path = match update {
                Update::Operators(ops, _) => ops.iter().find_map(id_path),
                _ => None,
            };
            Err(QueryError::ImmutableField(format!(
                "Performing an update on the path '{}' would modify the immutable field '_id'",
                path.as_deref().unwrap_or("_id")
            )))
        }
    }
}

/// The dotted path an operator writes under `_id`, if it writes there.
fn id_path(op: &FieldOp) -> Option<String> {
    let target = match &op.op {
        Op::Rename(to) => to,
        _ => &op.path,
    };
    (target.first().map(String::as_str) == Some("_id")).then(|| target.join("."))
}

/// A replacement (or pipeline result) whose `_id` differs from the stored one.
fn id_altered(id: &Bson) -> QueryError {
    QueryError::ImmutableField(format!(
        "After applying the update, the (immutable) field '_id' was found to have been altered to _id: {}",
        render(id)
    ))
}

fn replacement(old: &Document, repl: &Document) -> Result<Document, QueryError> {
    let mut new = Document::new();
    match (old.get("_id"), repl.get("_id")) {
        (Some(id), Some(rid)) if !values_equal(id, rid) => return Err(id_altered(rid)),
        (Some(id), _) => {
            new.insert("_id", id.clone());
        }
        (None, Some(rid)) => {
            new.insert("_id", rid.clone());
        }
        (None, None) => {}
    }
    for (k, v) in repl {
        if k != "_id" {
            new.insert(k.clone(), v.clone());
        }
    }
    Ok(new)
}

/// MongoDB's order of update paths (which is the order new fields are created in):
/// component by component, numbers (without leading zeros) by value, else as strings.
fn cmp_paths(a: &[String], b: &[String]) -> std::cmp::Ordering {
    fn numeric(s: &str) -> bool {
        s.as_bytes().first().is_some_and(u8::is_ascii_digit) && !(s.starts_with('0') && s.len() > 1)
    }
    for (x, y) in a.iter().zip(b) {
        let o = if numeric(x) && numeric(y) {
            x.len().cmp(&y.len()).then_with(|| x.cmp(y))
        } else {
            x.cmp(y)
        };
        if o.is_ne() {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

fn check_conflicts(ops: &[FieldOp]) -> Result<(), QueryError> {
    let mut all: Vec<&[String]> = Vec::new();
    for op in ops {
        all.push(&op.path);
        if let Op::Rename(to) = &op.op {
            all.push(to);
        }
    }
    for (i, a) in all.iter().enumerate() {
        for b in &all[..i] {
            let n = a.len().min(b.len());
            // Under one field, array updates (`$[]`, `$[<id>]`) and other components
            // (field names, indexes, `$`) cannot be mixed.
            let d = (0..n).find(|&d| a[d] != b[d]).unwrap_or(n);
            let is_id = |c: &str| paths::array_update_identifier(c).is_some();
            if d < n && is_id(&a[d]) != is_id(&b[d]) {
                return Err(QueryError::ConflictingUpdateOperators(format!(
                    "Updating the path '{}' would create a conflict at '{}'",
                    a.join("."),
                    a[..d].join(".")
                )));
            }
            if a[..n] == b[..n] {
                return Err(QueryError::ConflictingUpdateOperators(format!(
                    "Updating the path '{}' would create a conflict at '{}'",
                    a.join("."),
                    a[..n].join(".")
                )));
            }
        }
    }
    Ok(())
}

fn number_arg(op: &str, path: &str, v: &Bson) -> Result<Num, QueryError> {
    Num::from_bson(v).ok_or_else(|| {
        let verb = if op == "$inc" {
            "increment"
        } else {
            "multiply"
        };
        QueryError::TypeMismatch(format!(
            "Cannot {verb} with non-numeric argument: {{{path}: {}}}",
            render(v)
        ))
    })
}

fn parse_op(name: &str, parts: &[String], v: &Bson) -> Result<Op, QueryError> {
    let joined = parts.join(".");
    let path = joined.as_str();
    Ok(match name {
        "$set" => Op::Set(v.clone()),
        "$setOnInsert" => Op::SetOnInsert(v.clone()),
        "$unset" => Op::Unset,
        "$inc" => Op::Inc(number_arg(name, path, v)?),
        "$mul" => Op::Mul(number_arg(name, path, v)?),
        "$min" => Op::Min(v.clone()),
        "$max" => Op::Max(v.clone()),
        "$rename" => {
            let Bson::String(to) = v else {
                return Err(QueryError::bad(format!(
                    "The 'to' field for $rename must be a string: {path}: {}",
                    render(v)
                )));
            };
            let to_parts = paths::parse_update_path(to)?;
            rename::check(parts, &to_parts, to)?;
            Op::Rename(to_parts)
        }
        "$currentDate" => match v {
            Bson::Boolean(_) => Op::CurrentDate(false),
            Bson::Document(d) => match d.get("$type") {
                Some(Bson::String(t)) if t == "date" && d.len() == 1 => Op::CurrentDate(false),
                Some(Bson::String(t)) if t == "timestamp" && d.len() == 1 => Op::CurrentDate(true),
                _ => {
                    return Err(QueryError::bad(
                        "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}",
                    ))
                }
            },
            other => {
                return Err(QueryError::bad(format!(
                    "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({{$type: 'timestamp/date'}}).",
                    type_name(other)
                )))
            }
        },
        "$push" => Op::Push(PushSpec::parse(v)?),
        "$addToSet" => Op::AddToSet(array_ops::parse_add_to_set(v)?),
        "$pull" => Op::Pull(PullCond::parse(v)?),
        "$pullAll" => match v {
            Bson::Array(items) => Op::PullAll(items.clone()),
            other => {
                return Err(QueryError::bad(format!(
                    "$pullAll requires an array argument but was given a {}",
                    type_name(other)
                )))
            }
        },
        "$bit" => Op::Bit(BitSpec::parse(v)?),
        _ => Op::Pop(array_ops::parse_pop(path, v)?),
    })
}

fn apply_op(doc: &mut Document, fop: &FieldOp, is_insert: bool) -> Result<(), QueryError> {
    let path = &fop.path;
    let field = path.last().map(String::as_str).unwrap_or("");
    match &fop.op {
        Op::Set(v) => paths::set(doc, path, v.clone()),
        Op::SetOnInsert(v) => {
            if is_insert {
                paths::set(doc, path, v.clone())?;
            }
            Ok(())
        }
        Op::Unset => {
            paths::unset(doc, path);
            Ok(())
        }
        Op::Inc(n) | Op::Mul(n) => {
            let is_inc = matches!(fop.op, Op::Inc(_));
            let name = if is_inc { "$inc" } else { "$mul" };
            let new = match paths::get(doc, path) {
                None => {
                    if is_inc {
                        *n
                    } else {
                        n.times(Num::I32(0))
                    }
                }
                Some(cur) => {
                    let Some(c) = Num::from_bson(cur) else {
                        return Err(QueryError::TypeMismatch(format!(
                            "Cannot apply {name} to a value of non-numeric type. {} has the field '{field}' of non-numeric type {}",
                            render_id(doc),
                            type_name(cur)
                        )));
                    };
                    let r = if is_inc {
                        c.checked_arith(*n, crate::num::Arith::Add)
                    } else {
                        c.checked_arith(*n, crate::num::Arith::Mul)
                    };
                    r.ok_or_else(|| {
                        QueryError::bad(format!(
                            "Failed to apply {name} operations to current value ({}) for document {}",
                            render(cur),
                            render_id(doc)
                        ))
                    })?
                }
            };
            paths::set(doc, path, new.to_bson())
        }
        Op::Min(v) | Op::Max(v) => {
            let want = if matches!(fop.op, Op::Min(_)) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            };
            match paths::get(doc, path) {
                Some(cur) if compare_values(v, cur) != want => Ok(()),
                _ => paths::set(doc, path, v.clone()),
            }
        }
        Op::Rename(to) => rename::apply(doc, path, to),
        Op::Bit(spec) => spec.apply(doc, path),
        Op::CurrentDate(ts) => {
            let now = bson::DateTime::now();
            let v = if *ts {
                let ms = now.timestamp_millis();
                Bson::Timestamp(bson::Timestamp {
                    time: u32::try_from(ms / 1000).unwrap_or(0),
                    increment: 1,
                })
            } else {
                Bson::DateTime(now)
            };
            paths::set(doc, path, v)
        }
        Op::Push(_) | Op::AddToSet(_) | Op::Pull(_) | Op::PullAll(_) | Op::Pop(_) => {
            array_ops::apply(doc, path, &fop.op)
        }
    }
}

#[cfg(test)]
mod tests;
