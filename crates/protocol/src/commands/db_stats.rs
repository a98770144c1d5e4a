//! `dbStats`: counts and sizes of one database. A view and a time-series collection count
//! as views, its buckets collection (and `system.views`, once) as collections, and its
//! buckets as objects, as MongoDB reports them; `indexes` and `indexSize` cover every
//! index (`_id` included, as `collStats` sizes them).

use super::target::BUCKETS_PREFIX;
use super::Request;
use crate::error::CmdResult;
use bson::doc;
use hourglass_timeseries::{options_of, TimeseriesStore};

pub fn db_stats(req: &Request) -> CmdResult {
    req.check_fields(&["scale", "freeStorage"])?;
    let scale = match req.body.get("scale") {
        None => 1,
        Some(v) => match super::args::as_i64(v) {
            Some(n) if n >= 1 => n,
            Some(_) => {
                return Err(crate::error::CommandError::bad_value(
                    "Scale factor must be greater than zero",
                ))
            }
            None => return Err(req.wrong_type("scale", v, "long")),
        },
    };
    let (mut collections, mut views, mut objects, mut data, mut storage) =
        (0i64, 0i64, 0i64, 0i64, 0i64);
    let (mut indexes, mut index_size) = (0i64, 0i64);
    for c in req.state.catalog.collections(&req.db) {
        let name = c.namespace().coll;
        collections += 1;
        if name.starts_with(BUCKETS_PREFIX) {
            if let Some(options) = options_of(&c) {
                views += 1;
                let (count, bytes) = TimeseriesStore::bucket_summary(&c)?;
                objects += count as i64;
                data += bytes as i64;
                storage += bytes as i64;
                indexes += i64::from(options.meta_field.is_some());
                continue;
            }
        }
        let (count, sizes) = super::coll_stats::index_sizes(&c)?;
        objects += count as i64;
        let size = c.storage_size() as i64;
        data += size;
        storage += size;
        for (_, bytes) in sizes {
            indexes += 1;
            index_size += bytes as i64;
        }
    }
    views += super::views::definitions(&req.state.catalog, &req.db)?.len() as i64;
    // A time-series collection made before its definition was kept in system.views still
    // counts one there, as MongoDB counts it.
    if views > 0
        && req
            .state
            .catalog
            .get(&req.db, super::views::VIEWS)
            .is_none()
    {
        collections += 1;
    }
    let disk = req.state.catalog.engine().disk_space() as i64;
    let dbpath = req
        .state
        .cmdline
        .parsed
        .get_document("storage")
        .ok()
        .and_then(|s| s.get_str("dbPath").ok())
        .unwrap_or(".")
        .to_string();
    let fs = fs_sizes(&dbpath);
    let mut out = doc! {
        "db": &req.db,
        "collections": collections,
        "views": views,
        "objects": objects,
        "avgObjSize": if objects > 0 { data as f64 / objects as f64 } else { 0.0 },
        "dataSize": (data / scale) as f64,
        "storageSize": (storage / scale) as f64,
        "indexes": indexes,
        "indexSize": (index_size / scale) as f64,
        "totalSize": ((storage + index_size) / scale) as f64,
        "scaleFactor": scale,
    };
    // The storage has no reusable free space inside its tables: nothing to report but 0.
    if req.opt_bool("freeStorage")?.unwrap_or(false) {
        out.insert("freeStorageSize", 0.0);
        out.insert("indexFreeStorageSize", 0.0);
        out.insert("totalFreeStorageSize", 0.0);
    }
    out.insert(
        "fsUsedSize",
        fs.map(|(used, _)| (used as i64 / scale) as f64)
            .unwrap_or(-1.0),
    );
    out.insert(
        "fsTotalSize",
        fs.map(|(_, total)| (total as i64 / scale) as f64)
            .unwrap_or(-1.0),
    );
    out.insert("hourglassDiskBytes", disk);
    Ok(out)
}

/// Used and total bytes of the file system holding `path` (POSIX `df` output).
fn fs_sizes(path: &str) -> Option<(u64, u64)> {
    let out = std::process::Command::new("df")
        .args(["-Pk", path])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().nth(1)?;
    let cols: Vec<&str> = line.split_whitespace().collect();
    let total: u64 = cols.get(1)?.parse().ok()?;
    let used: u64 = cols.get(2)?.parse().ok()?;
    Some((used * 1024, total * 1024))
}
