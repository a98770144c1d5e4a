//! The tail of every explain reply, as mongod 7.0 ends it (shared by the `explain`
//! command and `aggregate` with `explain: true`, so neither depends on the other).

use super::Request;
use bson::{doc, Bson, Document};

/// The tail of the reply of an `aggregate` with `explain: true` (the explain command
/// replaces its `command` with the command it explains).
pub fn finish_aggregate(req: &Request, reply: &mut Document) {
    finish(req, reply, req.body.clone(), &req.db);
}

/// The tail of every explain reply, as mongod 7.0 ends it: the command explained (with
/// its `$db`), `serverInfo` and `serverParameters`.
pub fn finish(req: &Request, reply: &mut Document, mut inner: Document, db: &str) {
    if !inner.contains_key("$db") {
        inner.insert("$db", db);
    }
    reply.insert("command", inner);
    reply.insert("serverInfo", server_info(req));
    reply.insert("serverParameters", server_parameters(req));
}

/// The query memory limits mongod 7.0 reports in every explain (the two Hourglass
/// applies from its parameters, MongoDB's defaults for the others).
fn server_parameters(req: &Request) -> Document {
    const DEFAULT: i64 = 100 * 1024 * 1024;
    let number = |n: i64| match i32::try_from(n) {
        Ok(i) => Bson::Int32(i),
        Err(_) => Bson::Int64(n),
    };
    let param = |name: &str| number(req.state.params.get_i64(name, DEFAULT));
    doc! {
        "internalQueryFacetBufferSizeBytes": number(DEFAULT),
        "internalQueryFacetMaxOutputDocSizeBytes": number(DEFAULT),
        "internalLookupStageIntermediateDocumentMaxSizeBytes": number(DEFAULT),
        "internalDocumentSourceGroupMaxMemoryBytes": param("internalDocumentSourceGroupMaxMemoryBytes"),
        "internalQueryMaxBlockingSortMemoryUsageBytes": param("internalQueryMaxBlockingSortMemoryUsageBytes"),
        "internalQueryProhibitBlockingMergeOnMongoS": 0,
        "internalQueryMaxAddToSetBytes": number(DEFAULT),
        "internalDocumentSourceSetWindowFieldsMaxMemoryBytes": number(DEFAULT),
        "internalQueryFrameworkControl": "trySbeRestricted",
    }
}

fn server_info(req: &Request) -> Document {
    doc! {
        "host": &req.state.host,
        "port": req.state.cmdline.parsed.get_document("net").ok().and_then(|n| n.get("port").cloned()).unwrap_or(Bson::Int32(27017)),
        "version": super::diagnostics::COMPAT_VERSION,
        "gitVersion": "hourglass",
    }
}
