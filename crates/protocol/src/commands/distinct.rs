//! `distinct`: the distinct values of a (dotted) field, arrays unwound one level. Without
//! a query, an index that starts with the field is read by DISTINCT_SCAN
//! ([`super::distinct_scan`]).

use super::distinct_scan::{by_scan, key_of, scanned_values, sorted_distinct, values_of};
use super::planned::{parse_hint, ReadOpts};
use super::target::Target;
use super::Request;
use crate::error::CmdResult;
use crate::state::OpCounters;
use bson::{doc, Bson};
use hourglass_query::filter::Filter;

pub fn distinct(req: &Request) -> CmdResult {
    req.check_fields(&["key", "query", "collation", "hint", "readConcern"])?;
    OpCounters::add(&req.state.opcounters.command, 1);
    let coll = req.collection()?;
    let key = key_of(req, &req.body)?;
    if super::views::is_view(req, &coll)? {
        return super::view_reads::distinct(req, &coll, &key);
    }
    let query = req.opt_document("query")?;
    let hint = parse_hint(req.body.get("hint"))?;
    let target = Target::resolve(req, &coll);
    if let Some((c, index)) = by_scan(&target, &key, query, hint.as_ref()) {
        *req.plan_summary.lock() = Some("DISTINCT_SCAN".into());
        let (values, _) = scanned_values(&c, &index, &key)?;
        return Ok(doc! {"values": values});
    }
    let filter = match query {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    let needs = [doc! {"$group": {"_id": format!("${key}")}}];
    let opts = ReadOpts {
        sort: None,
        hint: hint.as_ref(),
        after: &needs,
        ..Default::default()
    };
    let (docs, _) = target.scan_with(req, filter, query, &opts)?;
    let mut values: Vec<Bson> = Vec::new();
    for doc in docs {
        values.extend(values_of(&doc?, &key));
    }
    Ok(doc! {"values": sorted_distinct(values)})
}
