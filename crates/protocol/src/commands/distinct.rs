//! `distinct`: the distinct values of a (dotted) field, arrays unwound one level.

use super::planned::{parse_hint, ReadOpts};
use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::state::OpCounters;
use bson::{doc, Bson, Document};
use hourglass_query::compare::{compare_values, values_equal};
use hourglass_query::filter::Filter;
use hourglass_query::path::distinct_values;

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
        return super::view_reads::distinct(req, &coll, &key);
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
        distinct_values(&Bson::Document(doc), &path, &mut found);
        values.extend(found);
    }
    values.sort_by(compare_values);
    values.dedup_by(|a, b| values_equal(a, b));
    Ok(doc! {"values": values})
}
