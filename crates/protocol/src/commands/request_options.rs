//! What `dispatch` does, before any handler runs, with options several commands carry, so
//! that none is accepted and then ignored:
//! - transaction fields (`txnNumber`, `startTransaction`, `autocommit`) are the
//!   transactions module's (`crate::transactions`), which checks them after access control;
//! - `collation` (the command's, its statements', or the collection's default) is parsed
//!   and made active for the command's thread (`collation_of`; `hourglass_query::collation`);
//! - `readConcern` levels `snapshot` and `linearizable` are refused as a standalone refuses
//!   them (123);
//! - `let` (and an update statement's `c`) is bound once and substituted into the filters,
//!   pipelines and pipeline updates that read its variables (`hourglass_query::let_vars`).

use super::target::BUCKETS_PREFIX;
use super::Request;
use crate::error::CommandError;
use bson::{Bson, Document};
use hourglass_query::collation::{self, Collation};
use hourglass_query::let_vars::{self, Vars};
use std::sync::Arc;

/// Commands that take `let`.
const LET_COMMANDS: &[&str] = &[
    "aggregate",
    "delete",
    "find",
    "findAndModify",
    "findandmodify",
    "update",
];

/// Statement arrays of the write commands, by command.
fn statements_field(command: &str) -> Option<&'static str> {
    match command {
        "update" => Some("updates"),
        "delete" => Some("deletes"),
        _ => None,
    }
}

fn parse_collation(v: &Bson) -> Result<Option<Arc<Collation>>, CommandError> {
    Ok(collation::parse(v)?)
}

/// The collation command `name` runs with: its `collation`, else the target collection's
/// default; `None` for the simple one. Statements' collations are checked here too.
/// `create` and `createIndexes` carry collations to store, not to run with.
pub fn collation_of(req: &Request, name: &str) -> Result<Option<Arc<Collation>>, CommandError> {
    if matches!(name, "create" | "createIndexes" | "collMod") {
        if let Some(v) = req.body.get("collation") {
            parse_collation(v)?;
        }
        return Ok(None);
    }
    let (body, inner) = match (name, req.body.get_document("explain")) {
        ("explain", Ok(inner)) => (inner, inner.keys().next().cloned().unwrap_or_default()),
        _ => (&req.body, name.to_string()),
    };
    let explicit = match body.get("collation") {
        Some(v) => Some(parse_collation(v)?),
        None => None,
    };
    // Update and delete statements carry their own (checked here, made active by the
    // handler for each statement: `statement_collation`).
    if let Some(f) = statements_field(&inner) {
        for v in statement_values(req, f, "collation") {
            parse_collation(&v)?;
        }
    }
    let coll = body.get_str(&inner).ok();
    let resolved = match explicit {
        Some(c) => c,
        // A time-series collection's default is its buckets collection's.
        None => match coll.and_then(|c| {
            let catalog = &req.state.catalog;
            catalog
                .get(&req.db, c)
                .or_else(|| catalog.get(&req.db, &format!("{BUCKETS_PREFIX}{c}")))
        }) {
            Some(c) => match c.options().get("collation") {
                Some(v) => parse_collation(v)?,
                None => None,
            },
            None => None,
        },
    };
    Ok(resolved)
}

/// The collation of one update or delete statement, active while it runs (its `collation`
/// wins over the collection's default; without one the command's stays).
pub fn statement_collation(stmt: &Document) -> Result<Option<collation::Scope>, CommandError> {
    match stmt.get("collation") {
        Some(v) => Ok(Some(collation::scope(parse_collation(v)?))),
        None => Ok(None),
    }
}

/// The statements of an update or delete, from the body or its document sequence.
pub(super) fn statements(req: &Request, field: &str) -> Result<Vec<Document>, CommandError> {
    if let Ok(items) = req.body.get_array(field) {
        return Ok(items
            .iter()
            .filter_map(|s| s.as_document().cloned())
            .collect());
    }
    let sequences = req.sequences.lock();
    let mut out = Vec::new();
    for (_, seq) in sequences.iter().filter(|(n, _)| n == field) {
        out.extend(
            seq.decode()
                .map_err(|e| CommandError::failed_to_parse(e.to_string()))?,
        );
    }
    Ok(out)
}

/// The values `key` takes in the statements of an update or delete, read without
/// decoding the statements of a document sequence.
fn statement_values(req: &Request, field: &str, key: &str) -> Vec<Bson> {
    if let Ok(items) = req.body.get_array(field) {
        return items
            .iter()
            .filter_map(|s| s.as_document()?.get(key).cloned())
            .collect();
    }
    let sequences = req.sequences.lock();
    sequences
        .iter()
        .filter(|(n, _)| n == field)
        .flat_map(|(_, seq)| {
            seq.raw_documents()
                .filter_map(|r| Bson::try_from(r.get(key).ok()??.to_raw_bson()).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `readConcern.level`: `snapshot` and `linearizable` need a replica set, as on a
/// standalone mongod (123 NotAReplicaSet); an unknown level is 9. As the one member of a
/// replica set (`--replSet`) every read is of one snapshot of the latest acknowledged
/// writes, so both levels hold; `atClusterTime` (a snapshot in the past) is refused.
fn check_read_concern(
    v: Option<&Bson>,
    replica_set: Option<&crate::repl_set::ReplSet>,
) -> Result<(), CommandError> {
    let rc = match v {
        None | Some(Bson::Null) => return Ok(()),
        Some(Bson::Document(rc)) => rc,
        Some(other) => {
            return Err(CommandError::type_mismatch(format!(
                "BSON field 'readConcern' is the wrong type '{}', expected type 'object'",
                super::args::type_name(other)
            )))
        }
    };
    // A cluster time no reply has carried yet cannot have been seen by the client.
    if let (Some(rs), Some(Bson::Timestamp(t))) = (replica_set, rc.get("afterClusterTime")) {
        let current = rs.current_time();
        if (t.time, t.increment) > (current.time, current.increment) {
            return Err(CommandError::invalid_options(format!(
                "readConcern afterClusterTime value must not be greater than the current clusterTime. Requested clusterTime: {{ ts: Timestamp({}, {}) }}; current clusterTime: {{ ts: Timestamp({}, {}) }}",
                t.time, t.increment, current.time, current.increment
            )));
        }
    }
    match read_concern_level(rc)? {
        None | Some("local" | "available" | "majority") => Ok(()),
        Some("snapshot" | "linearizable") if replica_set.is_some() => Ok(()),
        Some(l @ ("snapshot" | "linearizable")) => Err(CommandError::new(
            123,
            format!("node needs to be a replica set member to use readConcern: {l}"),
        )),
        Some(other) => Err(CommandError::new(
            9,
            format!("readConcern.level must be either 'local', 'majority', 'linearizable', 'available', or 'snapshot', not '{other}'"),
        )),
    }
}

/// The level a `readConcern` document names (`None`: none), after the checks every read
/// concern gets, in or out of a transaction: `atClusterTime` (a snapshot in the past) is
/// refused, since no history is kept, and `level` must be a string (14).
pub(super) fn read_concern_level(rc: &Document) -> Result<Option<&str>, CommandError> {
    const FIELDS: &[&str] = &[
        "level",
        "afterClusterTime",
        "afterOpTime",
        "atClusterTime",
        "provenance",
    ];
    if let Some(k) = rc.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(CommandError::new(
            40415,
            format!("BSON field 'readConcern.{k}' is an unknown field."),
        ));
    }
    if rc.contains_key("atClusterTime") {
        return Err(CommandError::invalid_options(
            "readConcern.atClusterTime is not supported by this server: it keeps no history",
        ));
    }
    match rc.get("level") {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(l)) => Ok(Some(l)),
        Some(_) => Err(CommandError::new(
            14,
            "BSON field 'readConcern.level' is the wrong type, expected type 'string'",
        )),
    }
}

/// Checks the options of `req` (command `name`); returns the request to run instead when
/// `let` variables were substituted.
pub fn prepare(req: &Request, name: &str) -> Result<Option<Request>, CommandError> {
    // A transaction's statements: their read concern is checked with the transaction.
    if !req.body.contains_key("autocommit") {
        check_read_concern(req.body.get("readConcern"), req.state.repl_set.get())?;
    }
    let field = statements_field(name);
    let has_c = name == "update" && !statement_values(req, "updates", "c").is_empty();
    let lets = req.body.get("let").filter(|_| LET_COMMANDS.contains(&name));
    if lets.is_none() && !has_c {
        return Ok(None);
    }
    let stmts = match field {
        Some(f) => statements(req, f)?,
        None => Vec::new(),
    };
    let Some(lets) = lets else {
        return rewrite(req, field, stmts, &Vars::new()).map(Some);
    };
    let Bson::Document(lets) = lets else {
        return Err(CommandError::type_mismatch(format!(
            "BSON field '{name}.let' is the wrong type '{}', expected type 'object'",
            super::args::type_name(lets)
        )));
    };
    let vars = let_vars::bind(lets, &Vars::new())?;
    rewrite(req, field, stmts, &vars).map(Some)
}

/// The request with `vars` substituted (statements moved into the body).
fn rewrite(
    req: &Request,
    field: Option<&str>,
    stmts: Vec<Document>,
    vars: &Vars,
) -> Result<Request, CommandError> {
    let mut body = req.body.clone();
    body.remove("let");
    for key in ["filter", "query"] {
        if let Ok(f) = body.get_document(key) {
            let f = let_vars::in_filter(f, vars);
            body.insert(key, f);
        }
    }
    for key in ["projection", "fields"] {
        if let Some(p) = body.get(key) {
            let p = let_vars::substitute(p, vars);
            body.insert(key, p);
        }
    }
    for key in ["pipeline", "update"] {
        if let Ok(p) = body.get_array(key) {
            let stages: Vec<Document> = p.iter().filter_map(|s| s.as_document().cloned()).collect();
            let p: Vec<Bson> = let_vars::in_pipeline(&stages, vars)
                .into_iter()
                .map(Bson::Document)
                .collect();
            body.insert(key, p);
        }
    }
    if let Some(field) = field {
        let mut out = Vec::with_capacity(stmts.len());
        for mut s in stmts {
            let vars = match s.remove("c") {
                Some(Bson::Document(c)) => let_vars::bind(&c, vars)?,
                Some(other) => {
                    return Err(CommandError::type_mismatch(format!(
                    "BSON field 'update.updates.c' is the wrong type '{}', expected type 'object'",
                    super::args::type_name(&other)
                )))
                }
                None => vars.clone(),
            };
            if let Ok(q) = s.get_document("q") {
                let q = let_vars::in_filter(q, &vars);
                s.insert("q", q);
            }
            if let Ok(u) = s.get_array("u") {
                let stages: Vec<Document> =
                    u.iter().filter_map(|x| x.as_document().cloned()).collect();
                let u: Vec<Bson> = let_vars::in_pipeline(&stages, &vars)
                    .into_iter()
                    .map(Bson::Document)
                    .collect();
                s.insert("u", u);
            }
            out.push(Bson::Document(s));
        }
        body.insert(field, out);
    }
    Ok(req.sub_request(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn the_simple_collation_is_none_and_others_parse_or_are_refused() {
        assert!(matches!(
            parse_collation(&Bson::Document(doc! {"locale": "simple"})),
            Ok(None)
        ));
        let c = parse_collation(&Bson::Document(doc! {"locale": "fr", "strength": 2}));
        assert!(matches!(c, Ok(Some(_))));
        let e = parse_collation(&Bson::Document(doc! {"locale": "zz"}));
        assert_eq!(e.err().map(|e| e.code), Some(2));
    }

    #[test]
    fn read_concerns_a_standalone_refuses_and_a_replica_set_member_takes() {
        let level = |l: &str| {
            check_read_concern(Some(&Bson::Document(doc! {"level": l})), None)
                .err()
                .map(|e| e.code)
        };
        let rs = crate::repl_set::ReplSet::new("rs0".into());
        for l in ["snapshot", "linearizable", "majority"] {
            assert!(
                check_read_concern(Some(&Bson::Document(doc! {"level": l})), Some(&rs)).is_ok()
            );
        }
        assert_eq!(level("snapshot"), Some(123));
        assert_eq!(level("linearizable"), Some(123));
        assert_eq!(level("majority"), None);
        assert_eq!(level("bogus"), Some(9));
    }
}
