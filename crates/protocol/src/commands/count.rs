//! `count`: documents matching a query, after skip and limit.

use super::planned::{parse_hint, ReadOpts};
use super::target::Target;
use super::Request;
use crate::error::CmdResult;
use crate::state::OpCounters;
use bson::doc;
use hourglass_query::filter::Filter;

pub fn count(req: &Request) -> CmdResult {
    req.check_fields(&[
        "query",
        "limit",
        "skip",
        "hint",
        "collation",
        "fields",
        "readConcern",
    ])?;
    OpCounters::add(&req.state.opcounters.command, 1);
    let coll = req.collection()?;
    if super::views::is_view(req, &coll)? {
        return super::view_reads::count(req, &coll);
    }
    let filter = match req.opt_document("query")? {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    let skip = req.opt_i64("skip")?.unwrap_or(0).max(0) as usize;
    let limit = req
        .opt_i64("limit")?
        .map(|l| l.unsigned_abs() as usize)
        .filter(|&l| l > 0);
    let mut n = 0usize;
    let hint = parse_hint(req.body.get("hint"))?;
    let after = [doc! {"$count": "n"}];
    let opts = ReadOpts {
        sort: None,
        hint: hint.as_ref(),
        after: &after,
        ..Default::default()
    };
    for doc in Target::resolve(req, &coll)
        .scan_with(req, filter, req.opt_document("query")?, &opts)?
        .0
        .skip(skip)
    {
        doc?;
        n += 1;
        if limit.is_some_and(|l| n >= l) {
            break;
        }
    }
    Ok(doc! {"n": n as i32})
}
