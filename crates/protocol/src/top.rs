//! Time spent per collection, by kind of operation, for the `top` command (MongoDB's
//! usage statistics: microseconds and counts since the server started).

use bson::{doc, Document};
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// What `top` counts an operation as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Query,
    GetMore,
    Insert,
    Update,
    Remove,
    Command,
}

impl Kind {
    /// The kind of command `name`.
    pub fn of(name: &str) -> Kind {
        match name {
            "find" => Kind::Query,
            "getMore" => Kind::GetMore,
            "insert" => Kind::Insert,
            "update" | "findAndModify" | "findandmodify" => Kind::Update,
            "delete" => Kind::Remove,
            _ => Kind::Command,
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Usage {
    time: u64,
    count: u64,
}

impl Usage {
    fn add(&mut self, micros: u64) {
        self.time += micros;
        self.count += 1;
    }

    fn doc(self) -> Document {
        doc! {"time": self.time as i64, "count": self.count as i64}
    }
}

#[derive(Default, Clone)]
struct Entry {
    total: Usage,
    read_lock: Usage,
    write_lock: Usage,
    kinds: [Usage; 6],
}

/// Usage by namespace.
#[derive(Default)]
pub struct Top {
    by_ns: Mutex<BTreeMap<String, Entry>>,
}

impl Top {
    /// Records one operation of command `name` on `ns` (`db.coll`; `db.$cmd` is skipped);
    /// `writes` when the command writes (its time counts as write-lock time).
    pub fn record(&self, ns: &str, name: &str, writes: bool, micros: u64) {
        if ns.ends_with(".$cmd") {
            return;
        }
        let kind = Kind::of(name);
        let mut map = self.by_ns.lock();
        let e = map.entry(ns.to_string()).or_default();
        e.total.add(micros);
        if writes {
            e.write_lock.add(micros);
        } else {
            e.read_lock.add(micros);
        }
        e.kinds[kind as usize].add(micros);
    }

    /// `$collStats`' `latencyStats` of `ns`: total microseconds and operations of its
    /// reads (queries and getMores), writes (inserts, updates, deletes) and other commands
    /// since the server started (no transaction is counted apart).
    pub fn latency_stats(&self, ns: &str) -> Document {
        let map = self.by_ns.lock();
        let e = map.get(ns).cloned().unwrap_or_default();
        let sum = |kinds: &[Kind]| {
            let (mut latency, mut ops) = (0u64, 0u64);
            for k in kinds {
                latency += e.kinds[*k as usize].time;
                ops += e.kinds[*k as usize].count;
            }
            doc! {"latency": latency as i64, "ops": ops as i64}
        };
        doc! {
            "reads": sum(&[Kind::Query, Kind::GetMore]),
            "writes": sum(&[Kind::Insert, Kind::Update, Kind::Remove]),
            "commands": sum(&[Kind::Command]),
            "transactions": {"latency": 0_i64, "ops": 0_i64},
        }
    }

    /// The `totals` document of `top`.
    pub fn totals(&self) -> Document {
        let mut out = doc! {"note": "all times in microseconds"};
        for (ns, e) in self.by_ns.lock().iter() {
            let k = |kind: Kind| e.kinds[kind as usize].doc();
            out.insert(
                ns.clone(),
                doc! {
                    "total": e.total.doc(),
                    "readLock": e.read_lock.doc(),
                    "writeLock": e.write_lock.doc(),
                    "queries": k(Kind::Query),
                    "getmore": k(Kind::GetMore),
                    "insert": k(Kind::Insert),
                    "update": k(Kind::Update),
                    "remove": k(Kind::Remove),
                    "commands": k(Kind::Command),
                },
            );
        }
        out
    }
}
