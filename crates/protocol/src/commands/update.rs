//! `update`: a list of update statements (`q`, `u`, `multi`, `upsert`), ordered or not.

use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use crate::state::OpCounters;
use bson::{doc, Bson, Document};
use hourglass_query::filter::Filter;
use hourglass_query::update::Update;
use hourglass_timeseries::TsUpdate;

const STATEMENT_FIELDS: &[&str] = &[
    "q",
    "u",
    "multi",
    "upsert",
    "arrayFilters",
    "hint",
    "collation",
    "c",
];

/// Parses the `u` of an update statement (operators, replacement, or pipeline) with its
/// `arrayFilters`, if any (`field` names them in errors, e.g. `findAndModify.arrayFilters`).
pub fn parse_update(
    u: Option<&Bson>,
    array_filters: Option<&Bson>,
    field: &str,
) -> Result<Update, CommandError> {
    let filters = match array_filters {
        None | Some(Bson::Null) => Vec::new(),
        Some(Bson::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, f)| match f {
                Bson::Document(d) => Ok(d.clone()),
                other => Err(CommandError::type_mismatch(format!(
                    "BSON field '{field}.{i}' is the wrong type '{}', expected type 'object'",
                    super::args::type_name(other)
                ))),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(CommandError::type_mismatch(format!(
                "BSON field '{field}' is the wrong type '{}', expected type 'array'",
                super::args::type_name(other)
            )))
        }
    };
    match u {
        Some(Bson::Document(d)) => Ok(Update::parse_with_array_filters(d, &filters)?),
        Some(Bson::Array(_)) if !filters.is_empty() => Err(CommandError::failed_to_parse(
            "arrayFilters may not be specified for pipeline-style updates",
        )),
        Some(Bson::Array(stages)) => {
            let stages = stages
                .iter()
                .map(|s| match s {
                    Bson::Document(d) => Ok(d.clone()),
                    _ => Err(CommandError::failed_to_parse(
                        "each pipeline stage must be an object",
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Update::parse_pipeline(&stages)?)
        }
        Some(_) => Err(CommandError::failed_to_parse(
            "Update argument must be either an object or an array",
        )),
        None => Err(CommandError::missing_field("update.updates.u")),
    }
}

/// Checks the types of a statement's fields as MongoDB parses the command, before any
/// statement runs: a wrong type fails the whole command.
fn check_statement_types(stmt: &Document) -> Result<(), CommandError> {
    let wrong = |field: &str, v: &Bson, expected: &str| {
        CommandError::type_mismatch(format!(
            "BSON field 'update.updates.{field}' is the wrong type '{}', expected type '{expected}'",
            super::args::type_name(v)
        ))
    };
    match stmt.get("q") {
        Some(Bson::Document(_)) | None => {}
        Some(v) => return Err(wrong("q", v, "object")),
    }
    match stmt.get("u") {
        Some(Bson::Document(_) | Bson::Array(_)) | None => {}
        Some(_) => {
            return Err(CommandError::failed_to_parse(
                "Update argument must be either an object or an array",
            ))
        }
    }
    for name in ["multi", "upsert"] {
        match stmt.get(name) {
            None
            | Some(
                Bson::Boolean(_) | Bson::Null | Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_),
            ) => {}
            Some(v) => return Err(wrong(name, v, "bool")),
        }
    }
    match stmt.get("arrayFilters") {
        None | Some(Bson::Null) => Ok(()),
        Some(Bson::Array(items)) => match items
            .iter()
            .enumerate()
            .find(|(_, f)| !matches!(f, Bson::Document(_)))
        {
            Some((i, f)) => Err(wrong(&format!("arrayFilters.{i}"), f, "object")),
            None => Ok(()),
        },
        Some(v) => Err(wrong("arrayFilters", v, "array")),
    }
}

fn flag(stmt: &Document, name: &str) -> bool {
    match stmt.get(name) {
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(i)) => *i != 0,
        Some(Bson::Int64(i)) => *i != 0,
        Some(Bson::Double(d)) => *d != 0.0,
        _ => false,
    }
}

struct StatementResult {
    matched: u64,
    modified: u64,
    upserted: Option<Bson>,
}

fn run_statement(
    req: &Request,
    coll: &str,
    stmt: &Document,
) -> Result<StatementResult, CommandError> {
    let q = match stmt.get("q") {
        Some(Bson::Document(d)) => d,
        _ => return Err(CommandError::missing_field("update.updates.q")),
    };
    let filter = Filter::parse(q)?;
    let update = parse_update(
        stmt.get("u"),
        stmt.get("arrayFilters"),
        "update.updates.arrayFilters",
    )?;
    let multi = flag(stmt, "multi");
    let upsert = flag(stmt, "upsert");
    if multi && matches!(update, Update::Replacement(_)) {
        return Err(CommandError::failed_to_parse(
            "multi update is not supported for replacement-style update",
        ));
    }
    let target = Target::resolve(req, coll);
    if let Target::TimeSeries { buckets, options } = &target {
        if matches!(&update, Update::Operators(_, filters) if !filters.is_empty()) {
            return Err(CommandError::invalid_options(
                "arrayFilters are not supported on time-series collections by this server",
            ));
        }
        let operators = stmt
            .get_document("u")
            .ok()
            .filter(|_| matches!(update, Update::Operators(..)));
        let out = req.state.timeseries.update(
            buckets,
            options,
            q,
            TsUpdate {
                update: &update,
                operators,
            },
            multi,
            upsert,
        )?;
        return Ok(StatementResult {
            matched: out.matched,
            modified: out.modified,
            upserted: out.upserted,
        });
    }
    if let Target::Buckets { buckets, options } = &target {
        if upsert {
            return Err(CommandError::invalid_options(
                "upsert of bucket documents is not supported by this server; insert the bucket instead",
            ));
        }
        let out = req
            .state
            .timeseries
            .update_buckets(buckets, options, &filter, &update, multi)?;
        return Ok(StatementResult {
            matched: out.matched,
            modified: out.modified,
            upserted: None,
        });
    }
    let collection = match target.require_regular("update")? {
        Some(c) => c,
        None if upsert => req.state.catalog.get_or_create(&req.db, coll)?,
        None => {
            return Ok(StatementResult {
                matched: 0,
                modified: 0,
                upserted: None,
            })
        }
    };
    let hint = super::planned::parse_hint(stmt.get("hint"))?;
    let out = collection.update_hinted(&filter, &update, multi, upsert, hint.as_ref(), Some(q))?;
    Ok(StatementResult {
        matched: out.matched,
        modified: out.modified,
        upserted: out.upserted,
    })
}

pub fn update(req: &Request) -> CmdResult {
    req.check_fields(&["updates", "ordered", "let"])?;
    let coll = req.collection()?;
    super::views::refuse_on_view(req, &coll)?;
    let stmts = req.write_statements("updates")?;
    super::args::check_statements(&stmts, "update.updates", STATEMENT_FIELDS, &["q", "u"])?;
    for stmt in &stmts {
        check_statement_types(stmt)?;
    }
    let ordered = req.opt_bool("ordered")?.unwrap_or(true);
    let (mut n, mut modified) = (0u64, 0u64);
    let mut upserted = Vec::new();
    let mut errors = Vec::new();
    for (i, stmt) in stmts.iter().enumerate() {
        OpCounters::add(&req.state.opcounters.update, 1);
        let collation = super::request_options::statement_collation(stmt);
        let result = collation.and_then(|_scope| run_statement(req, &coll, stmt));
        match result {
            Ok(r) => {
                n += r.matched;
                modified += r.modified;
                if let Some(id) = r.upserted {
                    n += 1;
                    upserted.push(doc! {"index": i as i32, "_id": id});
                }
            }
            Err(e) => {
                errors.push(e.write_error(i));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut reply = doc! {"n": n as i32, "nModified": modified as i32};
    if !upserted.is_empty() {
        reply.insert("upserted", upserted);
    }
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(reply)
}
