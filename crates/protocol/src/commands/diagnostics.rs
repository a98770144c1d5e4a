//! Server information and statistics: `buildInfo`, `hostInfo`, `getLog`, `serverStatus`,
//! `listCommands`.

use super::handshake::MAX_BSON_OBJECT_SIZE;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{doc, Bson, Document};
use hourglass_query::pipeline::spill::SORT_METRICS;
use std::sync::atomic::Ordering;

/// The MongoDB version whose behaviour (and wire version) Hourglass follows.
pub const COMPAT_VERSION: &str = "7.0.0";

pub fn build_info(_req: &Request) -> CmdResult {
    Ok(doc! {
        "version": COMPAT_VERSION,
        "gitVersion": "hourglass",
        "hourglassVersion": env!("CARGO_PKG_VERSION"),
        "versionArray": [7, 0, 0, 0],
        "bits": 64,
        "debug": cfg!(debug_assertions),
        "maxBsonObjectSize": MAX_BSON_OBJECT_SIZE,
        "storageEngines": ["hourglass"],
        "javascriptEngine": "none",
        "modules": [],
        "allocator": "system",
        "openssl": {"running": "disabled"},
        "buildEnvironment": {"target_arch": std::env::consts::ARCH, "target_os": std::env::consts::OS},
    })
}

fn meminfo_mb() -> i64 {
    (crate::params::system_memory_bytes() / (1024 * 1024)) as i64
}

pub fn host_info(req: &Request) -> CmdResult {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as i32)
        .unwrap_or(1);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    Ok(doc! {
        "system": {
            "currentTime": bson::DateTime::now(),
            "hostname": &req.state.host,
            "cpuAddrSize": 64,
            "memSizeMB": meminfo_mb(),
            "memLimitMB": meminfo_mb(),
            "numCores": cores,
            "cpuArch": std::env::consts::ARCH,
            "numaEnabled": false,
        },
        "os": {"type": "Linux", "name": "Linux", "version": kernel.trim()},
        "extra": {"pageSize": 4096_i64},
    })
}

pub fn get_log(req: &Request) -> CmdResult {
    match req.body.get("getLog") {
        Some(Bson::String(s)) if s == "*" => Ok(doc! {"names": ["global", "startupWarnings"]}),
        Some(Bson::String(s)) if s == "global" => Ok(doc! {
            "totalLinesWritten": req.state.log.total_written() as i64,
            "log": req.state.log.lines(),
        }),
        Some(Bson::String(s)) if s == "startupWarnings" => {
            Ok(doc! {"totalLinesWritten": 0, "log": []})
        }
        Some(Bson::String(s)) => Err(CommandError::invalid_options(format!("No log named '{s}'"))),
        Some(v) => Err(req.wrong_type("getLog", v, "string")),
        None => Err(CommandError::failed_to_parse("getLog requires a log name")),
    }
}

/// Resident and virtual memory in MiB, from /proc.
fn memory_mb() -> (i64, i64) {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut it = statm
        .split_whitespace()
        .map(|x| x.parse::<i64>().unwrap_or(0));
    let virt = it.next().unwrap_or(0);
    let res = it.next().unwrap_or(0);
    (res * 4096 / (1024 * 1024), virt * 4096 / (1024 * 1024))
}

pub fn server_status(req: &Request) -> CmdResult {
    let s = &req.state;
    let up = s.started.elapsed();
    let (resident, virt) = memory_mb();
    let c = &s.connections;
    let o = &s.opcounters;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as i64;
    let mut reply = doc! {
        "host": &s.host,
        "version": COMPAT_VERSION,
        "process": "hourglass",
        "pid": i64::from(std::process::id()),
        "uptime": up.as_secs_f64().floor(),
        "uptimeMillis": up.as_millis() as i64,
        "uptimeEstimate": up.as_secs() as i64,
        "localTime": bson::DateTime::now(),
        "connections": {
            "current": c.current.load(Ordering::Relaxed) as i32,
            "available": (c.max.load(Ordering::Relaxed) - c.current.load(Ordering::Relaxed)).max(0) as i32,
            "totalCreated": c.total_created.load(Ordering::Relaxed) as i64,
            "rejected": c.rejected.load(Ordering::Relaxed) as i64,
            "active": c.active.load(Ordering::Relaxed) as i32,
        },
        "opcounters": {
            "insert": load(&o.insert),
            "query": load(&o.query),
            "update": load(&o.update),
            "delete": load(&o.delete),
            "getmore": load(&o.getmore),
            "command": load(&o.command),
        },
        "mem": {"bits": 64, "resident": resident as i32, "virtual": virt as i32, "supported": true},
        "metrics": {
            "cursor": {"open": {"total": s.cursors.len() as i64}},
            "query": {"sort": {
                "spillToDisk": load(&SORT_METRICS.spill_to_disk),
                "spillToDiskBytes": load(&SORT_METRICS.spill_to_disk_bytes),
                "totalBytesSorted": load(&SORT_METRICS.total_bytes_sorted),
                "totalKeysSorted": load(&SORT_METRICS.total_keys_sorted),
            }},
            "ttl": {
                "deletedDocuments": load(&s.ttl.deleted_documents),
                "passes": load(&s.ttl.passes),
            },
        },
        "storageEngine": {"name": "hourglass", "persistent": true, "supportsCommittedReads": true},
        "hourglass": {
            "diskBytes": s.catalog.engine().disk_space() as i64,
            "journalSyncs": s.catalog.engine().sync_count() as i64,
        },
    };
    if let Some(section) = bucket_catalog_section(&s.timeseries) {
        reply.insert("bucketCatalog", section);
    }
    // `{section: 0}` leaves a section out (the identifying fields always stay); every
    // section is on by default.
    for (k, v) in req.body.iter().skip(1) {
        if !ALWAYS_REPORTED.contains(&k.as_str()) && !hourglass_query::expr::truthy(v) {
            reply.remove(k);
        }
    }
    Ok(reply)
}

/// serverStatus fields that are not sections: no argument leaves them out.
const ALWAYS_REPORTED: &[&str] = &[
    "host",
    "version",
    "process",
    "pid",
    "uptime",
    "uptimeMillis",
    "uptimeEstimate",
    "localTime",
];

/// serverStatus `bucketCatalog`: absent until a time-series collection was written;
/// then bucket counts, memory and the execution counters summed over collections.
fn bucket_catalog_section(store: &hourglass_timeseries::TimeseriesStore) -> Option<Document> {
    let summary = store.catalog_summary();
    if summary.collections == 0 {
        return None;
    }
    let open = summary.open_buckets as i64;
    let mut out = doc! {
        "numBuckets": open,
        "numOpenBuckets": open,
        "numIdleBuckets": open,
        "numArchivedBuckets": 0i64,
        "memoryUsage": summary.memory_usage as i64,
    };
    let totals = hourglass_timeseries::BucketStats::sum(summary.stats.iter().map(|(_, s)| s));
    out.extend(totals);
    Some(out)
}

/// `top` (admin only): time and counts per collection and kind of operation.
pub fn top(req: &Request) -> CmdResult {
    req.admin_only()?;
    Ok(doc! {"totals": req.state.top.totals()})
}

pub fn list_commands(_req: &Request) -> CmdResult {
    Ok(doc! {"commands": super::list_commands_doc()})
}

/// `lockInfo` (admin only): the locks held or awaited by operations. Hourglass operations
/// take no lock manager's locks, so there are none to show.
pub fn lock_info(req: &Request) -> CmdResult {
    req.check_fields(&["includeStorageEngineDump"])?;
    if req.opt_bool("includeStorageEngineDump")?.unwrap_or(false) {
        return Err(CommandError::bad_value(
            "lockInfo: includeStorageEngineDump is not supported by this server",
        ));
    }
    Ok(doc! {"lockInfo": []})
}

/// `features`: `oidMachine`, the process-unique part of the ObjectIds this server
/// generates. There is no JavaScript engine (no `js` field), and `oidReset` cannot
/// regenerate that part, so it is refused.
pub fn features(req: &Request) -> CmdResult {
    req.check_fields(&["oidReset"])?;
    if req.opt_bool("oidReset")?.unwrap_or(false) {
        return Err(CommandError::bad_value(
            "features: oidReset is not supported by this server",
        ));
    }
    let oid = bson::oid::ObjectId::new().bytes();
    let machine = i32::from_be_bytes([0, oid[4], oid[5], oid[6]]);
    Ok(doc! {"oidMachine": machine})
}
