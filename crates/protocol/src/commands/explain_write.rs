//! The write stage of an explained `update`, `delete` or `findAndModify` on a regular
//! collection, as mongod 7.0 reports it: `UPDATE` (with `nMatched`, `nWouldModify`,
//! `nWouldUpsert`), `DELETE` (one document) or `BATCHED_DELETE` (a multi-delete, which
//! 7.0 runs in batches), with `nWouldDelete`. The documents the write selects are read and
//! the update is applied to copies of them to count what would change; nothing is written.
//!
//! A write stage returns documents only for `findAndModify` (the one it returns), so an
//! `update` or `delete` reports `nReturned: 0`, at the stage and in `executionStats`.

use super::update::parse_update;
use crate::cursor::DocSource;
use crate::error::CommandError;
use bson::{doc, Bson, Document};
use hourglass_query::filter::Filter;
use hourglass_query::update::Update;

/// What an explained write does with the documents it selects.
pub(super) struct WriteShape<'a> {
    /// `UPDATE`, `DELETE` or `BATCHED_DELETE`.
    pub stage: &'static str,
    /// The write touches at most one document (`multi: false`, `limit: 1`,
    /// `findAndModify`).
    pub single: bool,
    /// `findAndModify`: the stage returns the document it writes.
    pub returns: bool,
    /// `findAndModify` with `new: true`: an upsert returns the inserted document.
    pub return_new: bool,
    pub upsert: bool,
    /// The update (`u` or `update`) and its `arrayFilters`; `None` for deletes.
    pub update: Option<(Option<&'a Bson>, Option<&'a Bson>)>,
    /// `findAndModify`'s `fields`: a `PROJECTION_DEFAULT` above the write stage.
    pub fields: Option<&'a Document>,
}

fn flag(d: &Document, k: &str) -> bool {
    match d.get(k) {
        Some(Bson::Boolean(b)) => *b,
        Some(v) => super::args::as_i64(v).is_some_and(|n| n != 0),
        None => false,
    }
}

impl<'a> WriteShape<'a> {
    /// The first statement of an `update` command.
    pub fn update_statement(st: &'a Document) -> Self {
        WriteShape {
            stage: "UPDATE",
            single: !flag(st, "multi"),
            returns: false,
            return_new: false,
            upsert: flag(st, "upsert"),
            update: Some((st.get("u"), st.get("arrayFilters"))),
            fields: None,
        }
    }

    /// The first statement of a `delete` command (`limit: 0` deletes all it matches).
    pub fn delete_statement(st: &'a Document) -> Self {
        let single = st.get("limit").and_then(super::args::as_i64) != Some(0);
        WriteShape {
            stage: if single { "DELETE" } else { "BATCHED_DELETE" },
            single,
            returns: false,
            return_new: false,
            upsert: false,
            update: None,
            fields: None,
        }
    }

    /// A `findAndModify` command.
    pub fn find_and_modify(inner: &'a Document) -> Self {
        let remove = flag(inner, "remove");
        WriteShape {
            stage: if remove { "DELETE" } else { "UPDATE" },
            single: true,
            returns: true,
            return_new: flag(inner, "new"),
            upsert: !remove && flag(inner, "upsert"),
            update: (!remove).then(|| (inner.get("update"), inner.get("arrayFilters"))),
            fields: inner.get_document("fields").ok().filter(|f| !f.is_empty()),
        }
    }
}

/// What running the write would do.
pub(super) struct WriteCounts {
    pub matched: u64,
    pub would_modify: u64,
    pub would_upsert: u64,
    /// The documents the stage returns (`nReturned`).
    pub returned: u64,
    /// Whether the stage read its input to the end (a single write stops at its
    /// document).
    pub input_eof: bool,
}

/// Reads the documents `source` selects as the write would, applying the update to copies.
pub(super) fn run(
    source: DocSource,
    shape: &WriteShape<'_>,
    spec: Option<&Document>,
) -> Result<WriteCounts, CommandError> {
    let update: Option<Update> = match shape.update {
        Some((u, filters)) => Some(parse_update(u, filters, "update.updates.arrayFilters")?),
        None => None,
    };
    let filter = match spec {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    let mut c = WriteCounts {
        matched: 0,
        would_modify: 0,
        would_upsert: 0,
        returned: 0,
        input_eof: true,
    };
    for d in source {
        let old = d?;
        c.matched += 1;
        match &update {
            Some(u) => {
                let mut new = old.clone();
                if u.apply_matched(&mut new, false, Some(&filter))? && new != old {
                    c.would_modify += 1;
                }
            }
            None => c.would_modify += 1,
        }
        if shape.single {
            c.input_eof = false;
            break;
        }
    }
    if c.matched == 0 && shape.upsert {
        c.would_upsert = 1;
    }
    if shape.returns && (c.matched > 0 || (c.would_upsert > 0 && shape.return_new)) {
        c.returned = 1;
    }
    Ok(c)
}

/// The counters of the write stage, in the order mongod prints them after the common ones.
pub(super) fn stage_counters(shape: &WriteShape<'_>, c: &WriteCounts) -> Document {
    if shape.update.is_some() {
        doc! {
            "nMatched": c.matched as i64,
            "nWouldModify": c.would_modify as i64,
            "nWouldUpsert": c.would_upsert as i64,
        }
    } else {
        doc! {"nWouldDelete": c.would_modify as i64}
    }
}
