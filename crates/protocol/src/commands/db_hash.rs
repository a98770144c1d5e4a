//! `dbHash`: an MD5 of each collection's documents (their BSON, in `_id` order; a
//! time-series buckets collection's bucket documents) and one of those hashes together, to
//! compare the data of two servers.

use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use md5::{Digest, Md5};

pub fn db_hash(req: &Request) -> CmdResult {
    req.check_fields(&["collections", "skipTempCollections"])?;
    let started = std::time::Instant::now();
    let wanted: Option<Vec<String>> = match req.body.get("collections") {
        None | Some(Bson::Null) => None,
        Some(Bson::Array(a)) => Some(
            a.iter()
                .map(|v| match v {
                    Bson::String(s) => Ok(s.clone()),
                    other => Err(req.wrong_type("collections", other, "string")),
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(v) => return Err(req.wrong_type("collections", v, "array")),
    };
    let skip_temp = req.opt_bool("skipTempCollections")?.unwrap_or(false);
    let mut colls = req.state.catalog.collections(&req.db);
    colls.sort_by_key(|c| c.namespace().coll);
    let mut hashes = Document::new();
    let mut uuids = Document::new();
    let mut all = Md5::new();
    for c in colls {
        let name = c.namespace().coll;
        if !hashed(&name) || wanted.as_ref().is_some_and(|w| !w.contains(&name)) {
            continue;
        }
        if skip_temp && c.options().get_bool("temp") == Ok(true) {
            continue;
        }
        let mut h = Md5::new();
        let mut add = |d: &Document| -> Result<(), CommandError> {
            let bytes = bson::to_vec(d).map_err(|e| CommandError::new(1, e.to_string()))?;
            h.update(&bytes);
            Ok(())
        };
        match hourglass_timeseries::options_of(&c) {
            // A time-series buckets collection: its buckets as MongoDB's bucket documents.
            Some(options) => {
                let mut docs = req.state.timeseries.bucket_documents(&c, &options)?;
                docs.sort_by_key(|d| d.get_object_id("_id").map(|o| o.bytes()).ok());
                for d in &docs {
                    add(d)?;
                }
            }
            None => {
                for d in c.scan() {
                    add(&d?)?;
                }
            }
        }
        let hex = hex(&h.finalize());
        all.update(hex.as_bytes());
        hashes.insert(name.clone(), hex);
        uuids.insert(name, c.uuid);
    }
    Ok(doc! {
        "host": &req.state.host,
        "collections": hashes,
        "capped": [],
        "uuids": uuids,
        "md5": hex(&all.finalize()),
        "timeMillis": started.elapsed().as_millis() as i64,
    })
}

/// System collections a replica set copies (so their hashes compare across members).
const REPLICATED_SYSTEM: &[&str] = &[
    "system.backup_users",
    "system.js",
    "system.new_users",
    "system.roles",
    "system.users",
    "system.version",
    "system.views",
];

/// Whether `dbHash` covers the collection: user collections, time-series buckets and the
/// replicated system collections; not the profiler's, nor a mapReduce or `$out` temporary.
fn hashed(name: &str) -> bool {
    if name.starts_with("system.") {
        return name.starts_with("system.buckets.") || REPLICATED_SYSTEM.contains(&name);
    }
    !name.starts_with("tmp.mr.") && !name.starts_with("tmp.agg_out.")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
