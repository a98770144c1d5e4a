//! `distinct`: the distinct values of a (dotted) field, arrays unwound one level.

use super::planned::{parse_hint, ReadOpts};
use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::state::OpCounters;
use bson::{doc, Bson, Document};
use hourglass_query::compare::{compare_values, values_equal};
use hourglass_query::filter::Filter;

/// Values at dotted `path` in `doc`, descending through arrays of documents.
pub(super) fn values_at(value: &Bson, path: &[&str], out: &mut Vec<Bson>) {
    match (path.split_first(), value) {
        (None, Bson::Array(items)) => out.extend(items.iter().cloned()),
        (None, v) => out.push(v.clone()),
        (Some((head, rest)), Bson::Document(d)) => {
            if let Some(v) = d.get(*head) {
                values_at(v, rest, out);
            }
        }
        (Some((head, rest)), Bson::Array(items)) => {
            if let Ok(i) = head.parse::<usize>() {
                if let Some(v) = items.get(i) {
                    values_at(v, rest, out);
                }
            } else {
                for item in items {
                    if matches!(item, Bson::Document(_)) {
                        values_at(item, path, out);
                    }
                }
            }
        }
        _ => {}
    }
}

pub fn distinct(req: &Request) -> CmdResult {
    req.check_fields(&["key", "query", "collation", "hint", "readConcern"])?;
    OpCounters::add(&req.state.opcounters.command, 1);
    let coll = req.collection()?;
    let key = match req.body.get("key") {
        Some(Bson::String(s)) => s.clone(),
        Some(v) => return Err(req.wrong_type("key", v, "string")),
        None => return Err(CommandError::missing_field("distinct.key")),
    };
    if super::views::is_view(req, &coll)? {
        return super::views::distinct(req, &coll, &key);
    }
    let filter = match req.opt_document("query")? {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    let path: Vec<&str> = key.split('.').collect();
    let mut values: Vec<Bson> = Vec::new();
    let hint = parse_hint(req.body.get("hint"))?;
    let needs = [doc! {"$group": {"_id": format!("${key}")}}];
    let opts = ReadOpts {
        sort: None,
        hint: hint.as_ref(),
        after: &needs,
    };
    let (docs, _) =
        Target::resolve(req, &coll).scan_with(req, filter, req.opt_document("query")?, &opts)?;
    for doc in docs {
        let doc: Document = doc?;
        let mut found = Vec::new();
        values_at(&Bson::Document(doc), &path, &mut found);
        values.extend(found);
    }
    values.sort_by(compare_values);
    values.dedup_by(|a, b| values_equal(a, b));
    Ok(doc! {"values": values})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_at_unwinds_arrays_and_walks_arrays_of_documents() {
        let d = Bson::Document(doc! {"a": [{"b": 1}, {"b": [2, 3]}], "c": [4, 5]});
        let mut out = Vec::new();
        values_at(&d, &["a", "b"], &mut out);
        assert_eq!(out, vec![Bson::Int32(1), Bson::Int32(2), Bson::Int32(3)]);
        out.clear();
        values_at(&d, &["c"], &mut out);
        assert_eq!(out.len(), 2);
    }
}
