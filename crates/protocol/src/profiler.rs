//! The database profiler and the slow-operation log, as mongod has them.
//!
//! - `slowms` (default 100) and `sampleRate` (default 1.0) are server-wide; the level
//!   (0 off, 1 slow operations, 2 all) and an optional `filter` are per database, set
//!   with the `profile` command.
//! - An operation slower than `slowms` (and sampled) is logged as "Slow query" (log id
//!   51803) with its plan summary; with a filter set, the filter decides instead, for the
//!   log and the profiler alike.
//! - A profiled operation is written to `<db>.system.profile` with mongod's fields (`op`,
//!   `ns`, `command`, `nreturned`/`ninserted`/..., `responseLength`, `millis`,
//!   `planSummary`, `ts`, `client`, `user`). That collection is created capped at 1 MiB and
//!   kept under that size: the oldest entries go first.

use bson::{doc, Bson, Document};
use hourglass_catalog::Catalog;
use hourglass_query::filter::Filter;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

/// Bytes a `system.profile` collection holds at most (mongod's default size).
pub const PROFILE_BYTES: u64 = 1 << 20;

/// mongod's log id of "Slow query".
const SLOW_QUERY_LOG_ID: u64 = 51803;

/// A database's profiling settings.
#[derive(Clone, Debug, Default)]
pub struct DbSettings {
    pub level: i32,
    /// The filter as given, and parsed.
    pub filter: Option<(Document, std::sync::Arc<Filter>)>,
}

/// One finished command, as the profiler and the slow log see it.
pub struct Finished<'a> {
    pub db: &'a str,
    pub ns: &'a str,
    /// `query`, `insert`, `update`, `remove`, `getmore` or `command`.
    pub op: &'a str,
    pub command: &'a Document,
    pub reply: &'a Document,
    /// The rows and bytes of a batch sent as bytes beside `reply` (its batch array is
    /// then empty).
    pub raw_batch: Option<(usize, usize)>,
    pub elapsed: Duration,
    pub plan_summary: Option<String>,
    pub client: &'a str,
    pub user: Option<String>,
}

/// Profiling settings and the bounded `system.profile` writers.
pub struct Profiler {
    slowms: AtomicI64,
    sample_rate: Mutex<f64>,
    dbs: Mutex<HashMap<String, DbSettings>>,
    /// Whether any database has a level or a filter (else only `slowms` is checked).
    active: AtomicBool,
    /// Per database: the entries of its `system.profile`, oldest first, with their sizes.
    written: Mutex<HashMap<String, VecDeque<(Bson, u64)>>>,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler {
            slowms: AtomicI64::new(100),
            sample_rate: Mutex::new(1.0),
            dbs: Mutex::default(),
            active: AtomicBool::new(false),
            written: Mutex::default(),
        }
    }
}

impl Profiler {
    pub fn slowms(&self) -> i64 {
        self.slowms.load(Ordering::Relaxed)
    }

    pub fn sample_rate(&self) -> f64 {
        *self.sample_rate.lock()
    }

    pub fn settings(&self, db: &str) -> DbSettings {
        self.dbs.lock().get(db).cloned().unwrap_or_default()
    }

    /// Sets what was given; `filter: Some(None)` removes the database's filter.
    pub fn set(
        &self,
        db: &str,
        level: Option<i32>,
        slowms: Option<i64>,
        sample_rate: Option<f64>,
        filter: Option<Option<(Document, Filter)>>,
    ) {
        if let Some(ms) = slowms {
            self.slowms.store(ms, Ordering::Relaxed);
        }
        if let Some(r) = sample_rate {
            *self.sample_rate.lock() = r;
        }
        let mut dbs = self.dbs.lock();
        let s = dbs.entry(db.to_string()).or_default();
        if let Some(l) = level {
            s.level = l;
        }
        if let Some(f) = filter {
            s.filter = f.map(|(d, f)| (d, std::sync::Arc::new(f)));
        }
        let active = dbs.values().any(|s| s.level > 0 || s.filter.is_some());
        self.active.store(active, Ordering::Relaxed);
    }

    /// Whether an operation that took `elapsed` may be logged or profiled (a check of
    /// two atomics when no database profiles).
    pub fn may_record(&self, elapsed: Duration) -> bool {
        self.active.load(Ordering::Relaxed) || millis(elapsed) > self.slowms()
    }

    /// Logs `op` if it is slow and profiles it if its database's level asks for it.
    pub fn finished(&self, catalog: &Catalog, op: &Finished<'_>) {
        let millis = millis(op.elapsed);
        let settings = self.settings(op.db);
        let entry = profile_entry(op, millis);
        let selected = match &settings.filter {
            Some((_, f)) => f.matches(&entry),
            None => millis > self.slowms() && sampled(self.sample_rate()),
        };
        if selected {
            log_slow(&entry);
        }
        if settings.level == 2 || (settings.level == 1 && selected) {
            if let Err(e) = self.write(catalog, op.db, entry) {
                tracing::warn!(db = op.db, error = %e, "writing to system.profile failed");
            }
        }
    }

    /// Appends `entry` to `db.system.profile` and drops the oldest entries past
    /// [`PROFILE_BYTES`].
    fn write(&self, catalog: &Catalog, db: &str, entry: Document) -> Result<(), String> {
        let c = match catalog.get(db, "system.profile") {
            Some(c) => c,
            None => {
                let options = doc! {"capped": true, "size": PROFILE_BYTES as i64};
                let (c, _) = catalog
                    .create(db, "system.profile", options)
                    .map_err(|e| e.to_string())?;
                c
            }
        };
        let mut written = self.written.lock();
        let log = match written.get_mut(db) {
            Some(l) => l,
            None => {
                let mut existing = VecDeque::new();
                for d in c.scan() {
                    let d = d.map_err(|e| e.to_string())?;
                    let size = bson_size(&d);
                    existing.push_back((d.get("_id").cloned().unwrap_or(Bson::Null), size));
                }
                written.entry(db.to_string()).or_insert(existing)
            }
        };
        let id = bson::oid::ObjectId::new();
        let mut doc = doc! {"_id": id};
        doc.extend(entry);
        let size = bson_size(&doc);
        let out = c.insert(vec![doc], true);
        if let Some((_, e)) = out.errors.into_iter().next() {
            return Err(e.to_string());
        }
        log.push_back((Bson::ObjectId(id), size));
        let mut total: u64 = log.iter().map(|(_, s)| s).sum();
        let mut last_dropped = None;
        while total > PROFILE_BYTES && log.len() > 1 {
            if let Some((id, s)) = log.pop_front() {
                total -= s;
                last_dropped = Some(id);
            }
        }
        if let Some(id) = last_dropped {
            let f = Filter::parse(&doc! {"_id": {"$lte": id}}).map_err(|e| e.to_string())?;
            c.delete(&f, false).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Forgets what was written to `db.system.profile` (the database or the collection
    /// was dropped).
    pub fn forget(&self, db: &str) {
        self.written.lock().remove(db);
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn bson_size(d: &Document) -> u64 {
    hourglass_query::bson_size::bson_size(d) as u64
}

/// Whether this operation is in the sample (`sampleRate` of all).
fn sampled(rate: f64) -> bool {
    rate >= 1.0 || (rate > 0.0 && rand_unit() < rate)
}

/// A number in [0, 1) from the clock's nanoseconds (sampling needs no better).
fn rand_unit() -> f64 {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(n % 1_000_000) / 1_000_000.0
}

/// The `system.profile` document of an operation (also what a filter is matched on).
fn profile_entry(op: &Finished<'_>, millis: i64) -> Document {
    let mut d = doc! {"op": op.op, "ns": op.ns, "command": shortened(op.command)};
    let cursor = op.reply.get_document("cursor").ok();
    if let Some(batch) = cursor.and_then(|c| {
        c.get_array("firstBatch")
            .or_else(|_| c.get_array("nextBatch"))
            .ok()
    }) {
        let raw = op.raw_batch.map_or(0, |(n, _)| n);
        d.insert("nreturned", (batch.len() + raw) as i32);
        if let Ok(id) = cursor.map_or(Ok(0), |c| c.get_i64("id")) {
            if id != 0 {
                d.insert("cursorid", id);
            }
        }
    }
    let n = op.reply.get_i32("n").ok();
    match (op.op, n) {
        ("insert", Some(n)) => {
            d.insert("ninserted", n);
        }
        ("remove", Some(n)) => {
            d.insert("ndeleted", n);
        }
        ("update", Some(n)) => {
            d.insert("nMatched", n);
            d.insert("nModified", op.reply.get_i32("nModified").unwrap_or(0));
        }
        _ => {}
    }
    let raw_bytes = op.raw_batch.map_or(0, |(_, b)| b as u64);
    d.insert("responseLength", (bson_size(op.reply) + raw_bytes) as i64);
    d.insert("protocol", "op_msg");
    d.insert("millis", millis);
    if let Some(p) = &op.plan_summary {
        d.insert("planSummary", p.as_str());
    }
    d.insert("ts", bson::DateTime::now());
    d.insert("client", op.client);
    let (users, user) = match &op.user {
        Some(u) => (vec![Bson::String(u.clone())], u.clone()),
        None => (Vec::new(), String::new()),
    };
    d.insert("allUsers", users);
    d.insert("user", user);
    d
}

/// The command as profiled: large payloads (insert documents, update and delete
/// statements) replaced by their count, as the operations list shows them.
fn shortened(command: &Document) -> Document {
    command
        .iter()
        .map(|(k, v)| match (k.as_str(), v) {
            ("documents" | "updates" | "deletes", Bson::Array(a)) => {
                (k.clone(), Bson::String(format!("<{} entries>", a.len())))
            }
            _ => (k.clone(), v.clone()),
        })
        .collect()
}

/// mongod's "Slow query" line: the profile entry's fields as `attr`.
fn log_slow(entry: &Document) {
    let mut attr = doc! {"type": entry.get_str("op").unwrap_or("command")};
    for (k, v) in entry {
        match k.as_str() {
            "op" | "ts" | "protocol" | "allUsers" | "user" => {}
            "millis" => {
                attr.insert("durationMillis", v.clone());
            }
            "responseLength" => {
                attr.insert("reslen", v.clone());
            }
            _ => {
                attr.insert(k.clone(), v.clone());
            }
        }
    }
    let json = Bson::Document(attr).into_relaxed_extjson().to_string();
    tracing::info!(log_id = SLOW_QUERY_LOG_ID, attr_json = %json, "Slow query");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished<'a>(command: &'a Document, reply: &'a Document, ms: u64) -> Finished<'a> {
        Finished {
            db: "d",
            ns: "d.c",
            op: "query",
            command,
            reply,
            raw_batch: None,
            elapsed: Duration::from_millis(ms),
            plan_summary: Some("COLLSCAN".into()),
            client: "127.0.0.1:5000",
            user: None,
        }
    }

    #[test]
    fn a_find_entry_has_mongods_fields() {
        let cmd = doc! {"find": "c", "filter": {"a": 1}};
        let reply = doc! {"cursor": {"id": 0i64, "ns": "d.c", "firstBatch": [{"a": 1}, {"a": 1}]}, "ok": 1.0};
        let e = profile_entry(&finished(&cmd, &reply, 7), 7);
        let keys: Vec<&str> = e.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "op",
                "ns",
                "command",
                "nreturned",
                "responseLength",
                "protocol",
                "millis",
                "planSummary",
                "ts",
                "client",
                "allUsers",
                "user"
            ]
        );
        assert_eq!(e.get_i32("nreturned"), Ok(2));
        assert_eq!(e.get_i64("millis"), Ok(7));
    }

    #[test]
    fn write_entries_count_what_the_reply_says_and_leave_out_the_payload() {
        let cmd = doc! {"insert": "c", "documents": [{"a": 1}, {"a": 2}]};
        let reply = doc! {"n": 2, "ok": 1.0};
        let mut op = finished(&cmd, &reply, 1);
        op.op = "insert";
        let e = profile_entry(&op, 1);
        assert_eq!(e.get_i32("ninserted"), Ok(2));
        assert_eq!(
            e.get_document("command").unwrap().get_str("documents"),
            Ok("<2 entries>")
        );
    }

    #[test]
    fn settings_are_per_database_and_slowms_is_server_wide() {
        let p = Profiler::default();
        p.set("a", Some(2), Some(5), None, None);
        assert_eq!(p.settings("a").level, 2);
        assert_eq!(p.settings("b").level, 0);
        assert_eq!(p.slowms(), 5);
        assert!(p.active.load(Ordering::Relaxed));
        p.set("a", Some(0), None, None, None);
        assert!(!p.active.load(Ordering::Relaxed));
    }
}
