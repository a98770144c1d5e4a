//! State shared by all connections: the catalog, cursors, server parameters, counters,
//! the command line, and the recent log lines served by `getLog`.

use crate::cursor::CursorRegistry;
use crate::params::Parameters;
use bson::Document;
use hourglass_catalog::Catalog;
use hourglass_timeseries::{Limits, TimeseriesStore};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// MongoDB's opcounters.
#[derive(Default)]
pub struct OpCounters {
    pub insert: AtomicU64,
    pub query: AtomicU64,
    pub update: AtomicU64,
    pub delete: AtomicU64,
    pub getmore: AtomicU64,
    pub command: AtomicU64,
}

impl OpCounters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Connection counts for `serverStatus`.
#[derive(Default)]
pub struct ConnectionCounters {
    pub current: AtomicI64,
    pub total_created: AtomicU64,
    pub active: AtomicI64,
    /// Connections closed at accept because `--maxConns` were open.
    pub rejected: AtomicU64,
    /// `--maxConns` (`net.maxIncomingConnections`).
    pub max: AtomicI64,
}

/// mongod's default `maxIncomingConnections`.
pub const DEFAULT_MAX_CONNS: i64 = 1_000_000;

/// The last log lines (as MongoDB's structured JSON lines), for `getLog`.
pub struct RecentLog {
    lines: Mutex<VecDeque<String>>,
    total: AtomicU64,
    capacity: usize,
}

impl Default for RecentLog {
    fn default() -> Self {
        RecentLog {
            lines: Mutex::new(VecDeque::new()),
            total: AtomicU64::new(0),
            capacity: 1024,
        }
    }
}

impl RecentLog {
    pub fn push(&self, line: String) {
        let mut l = self.lines.lock();
        if l.len() == self.capacity {
            l.pop_front();
        }
        l.push_back(line);
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().iter().cloned().collect()
    }

    pub fn total_written(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// How the server was started, for `getCmdLineOpts`.
#[derive(Debug, Clone, Default)]
pub struct CmdLine {
    pub argv: Vec<String>,
    pub parsed: Document,
}

/// Seconds each command took, by command name (the table's names only, so the label set
/// stays bounded), for `/metrics`.
pub type CommandLatency = prometheus_client::metrics::family::Family<
    [(&'static str, &'static str); 1],
    prometheus_client::metrics::histogram::Histogram,
    fn() -> prometheus_client::metrics::histogram::Histogram,
>;

fn latency_histogram() -> prometheus_client::metrics::histogram::Histogram {
    // 50 us to ~52 s.
    prometheus_client::metrics::histogram::Histogram::new(
        prometheus_client::metrics::histogram::exponential_buckets(0.00005, 4.0, 11),
    )
}

pub struct ServerState {
    pub catalog: Catalog,
    pub timeseries: TimeseriesStore,
    pub cursors: CursorRegistry,
    pub ops: crate::operations::OpRegistry,
    pub params: Parameters,
    pub opcounters: OpCounters,
    pub connections: ConnectionCounters,
    pub log: Arc<RecentLog>,
    pub cmdline: CmdLine,
    pub started: Instant,
    pub host: String,
    pub ttl: TtlCounters,
    pub in_flight: InFlightBudget,
    pub command_latency: CommandLatency,
    pub access: crate::access::AccessControl,
    /// Closed by `fsync: 1, lock: true`: writes wait.
    pub write_gate: crate::write_gate::WriteGate,
    /// Time per collection and kind of operation, for `top`.
    pub top: crate::top::Top,
    /// Profiling levels and `system.profile`, and the slow-operation log.
    pub profiler: crate::profiler::Profiler,
    /// The logical sessions commands carried (`$listLocalSessions`).
    pub sessions: crate::sessions::LocalSessions,
    /// The sessions' multi-document transactions.
    pub transactions: crate::transactions::Transactions,
    /// Set at startup with `--replSet`: the server is the primary of a one-member replica
    /// set.
    pub repl_set: std::sync::OnceLock<crate::repl_set::ReplSet>,
    /// The `failCommand` fail point (`configureFailPoint`, with `enableTestCommands`).
    pub fail_command: crate::fail_point::FailCommand,
    /// The archive mover's crash fail points and the collections it has cleaned.
    pub archive: ArchiveMoverState,
}

/// The bucket catalog's limits from the server parameters (read at startup and again
/// whenever `setParameter` changes one of them).
pub fn bucket_limits(params: &Parameters) -> Limits {
    let defaults = Limits::default();
    let param = |name: &str, default: usize| params.get_i64(name, default as i64).max(1) as usize;
    Limits {
        max_count: param("timeseriesBucketMaxCount", defaults.max_count),
        max_size: param("timeseriesBucketMaxSize", defaults.max_size),
        idle_memory_threshold: crate::params::idle_bucket_threshold_bytes(
            params.get_i64("timeseriesIdleBucketExpiryMemoryUsageThreshold", 0),
        ),
        ..defaults
    }
}

/// The process-wide budget of memory for requests in flight, in KiB permits.
pub struct InFlightBudget {
    pub semaphore: tokio::sync::Semaphore,
    /// Bytes the budget holds (a single request never asks for more).
    pub capacity: usize,
}

impl InFlightBudget {
    pub fn new(bytes: usize) -> InFlightBudget {
        let bytes = bytes.max(64 << 20);
        InFlightBudget {
            semaphore: tokio::sync::Semaphore::new(bytes / 1024),
            capacity: bytes,
        }
    }
}

impl ServerState {
    pub fn new(
        catalog: Catalog,
        params: Parameters,
        cmdline: CmdLine,
        log: Arc<RecentLog>,
    ) -> ServerState {
        let timeseries = TimeseriesStore::default();
        timeseries.set_limits(bucket_limits(&params));
        let in_flight =
            InFlightBudget::new(params.get_i64("maxInFlightRequestBytes", 1 << 30).max(1) as usize);
        ServerState {
            catalog,
            timeseries,
            cursors: CursorRegistry::default(),
            ops: Default::default(),
            params,
            opcounters: OpCounters::default(),
            connections: ConnectionCounters::default(),
            log,
            cmdline,
            started: Instant::now(),
            host: hostname(),
            ttl: TtlCounters::default(),
            in_flight,
            command_latency: CommandLatency::new_with_constructor(latency_histogram),
            access: Default::default(),
            write_gate: Default::default(),
            top: Default::default(),
            profiler: Default::default(),
            sessions: Default::default(),
            transactions: Default::default(),
            repl_set: Default::default(),
            fail_command: Default::default(),
            archive: Default::default(),
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}

/// `serverStatus.metrics.ttl`.
/// The archive mover's state kept between passes (see the archive mover module).
#[derive(Default)]
pub struct ArchiveMoverState {
    /// (buckets-collection id, archive URI) pairs cleaned of orphan files.
    pub cleaned: parking_lot::Mutex<std::collections::HashSet<(u64, String)>>,
    /// Stages where the process aborts (test fail points, like a `kill -9` there).
    pub crash_at: parking_lot::Mutex<Vec<hourglass_timeseries::MoverStage>>,
}

#[derive(Default)]
pub struct TtlCounters {
    pub deleted_documents: AtomicU64,
    pub passes: AtomicU64,
}
