//! The `hourglass` binary: parses the command line, sets up logging, opens storage, serves
//! MongoDB clients over TCP, and shuts down cleanly on SIGINT/SIGTERM.

mod config;
mod daemon;
mod logging;
mod tls;

/// mimalloc instead of glibc malloc: parsing and bucketing allocate many small objects,
/// and with glibc a quarter of the ingest profile was malloc/free and heap consolidation.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Context;
use bson::{doc, Bson, Document};
use clap::Parser;
use hourglass_catalog::Catalog;
use hourglass_protocol::params::Parameters;
use hourglass_protocol::{connection, CmdLine, ConnInfo, RecentLog, ServerState};
use hourglass_storage::Engine;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Hourglass: a time-series database that speaks the MongoDB wire protocol.
#[derive(Parser, Debug)]
#[command(
    name = "hourglass",
    version,
    about = "Hourglass: a time-series database that speaks the MongoDB wire protocol."
)]
struct Cli {
    /// mongod's YAML configuration file; command-line options win over it.
    #[arg(long, short = 'f', help_heading = "General options")]
    config: Option<PathBuf>,
    /// Directory for the data files (created if missing) [default: ./data].
    #[arg(long, help_heading = "Storage options")]
    dbpath: Option<PathBuf>,
    /// Size of the cache of decompressed storage blocks, in GB (0.25 to 10000)
    /// [default: 50% of (RAM - 1 GB), at least 0.25].
    #[arg(
        long = "wiredTigerCacheSizeGB",
        value_name = "GB",
        help_heading = "Storage options"
    )]
    cache_size_gb: Option<f64>,
    /// TCP port to listen on [default: 27017].
    #[arg(long, help_heading = "Net options")]
    port: Option<u16>,
    /// Comma-separated addresses to listen on [default: 127.0.0.1].
    #[arg(long = "bind_ip", help_heading = "Net options")]
    bind_ip: Option<String>,
    /// Listen on all IPv4 addresses (0.0.0.0).
    #[arg(
        long = "bind_ip_all",
        conflicts_with = "bind_ip",
        help_heading = "Net options"
    )]
    bind_ip_all: bool,
    /// Port of the HTTP listener (InfluxDB line protocol, Prometheus remote write,
    /// /metrics); off when not given. Until the server has authentication it listens
    /// only on the loopback addresses of --bind_ip (127.0.0.1 when there are none).
    #[arg(long = "httpPort", help_heading = "Net options")]
    http_port: Option<u16>,
    /// Server parameter as name=value (repeatable).
    #[arg(
        long = "setParameter",
        value_name = "NAME=VALUE",
        help_heading = "General options"
    )]
    set_parameter: Vec<String>,
    /// Log only warnings and errors.
    #[arg(long, help_heading = "General options")]
    quiet: bool,
    /// More log detail: -v for debug, -vvv and more for trace.
    #[arg(short = 'v', action = clap::ArgAction::Count, help_heading = "General options")]
    verbose: u8,
    /// Write the log to this file instead of standard output.
    #[arg(long, help_heading = "General options")]
    logpath: Option<PathBuf>,
    /// Append to an existing --logpath file instead of renaming it aside first.
    #[arg(long, help_heading = "General options")]
    logappend: bool,
    /// Run in the background: start, wait until the server listens, print its pid and
    /// exit (needs --logpath).
    #[arg(long, help_heading = "General options")]
    fork: bool,
    /// Write the server's process id to this file at start.
    #[arg(long = "pidfilepath", help_heading = "General options")]
    pidfilepath: Option<PathBuf>,
    /// Most client connections open at once; more are closed as they arrive
    /// [default: 1000000].
    #[arg(long = "maxConns", value_parser = clap::value_parser!(i64).range(1..), help_heading = "Net options")]
    max_conns: Option<i64>,
    /// Run as the primary of a one-member replica set with this name: clients configured
    /// for a replica set (`?replicaSet=NAME`) connect, and retryable writes are accepted.
    #[arg(
        long = "replSet",
        value_name = "NAME",
        help_heading = "Replica set options"
    )]
    repl_set: Option<String>,
    /// Turn on access control: clients authenticate (SCRAM-SHA-256, SCRAM-SHA-1 or
    /// MONGODB-X509) and commands need the privileges of the user's roles.
    #[arg(long, help_heading = "Security options")]
    auth: bool,
    /// disabled, allowTLS, preferTLS or requireTLS [default: disabled].
    #[arg(long = "tlsMode", help_heading = "TLS options")]
    tls_mode: Option<String>,
    /// PEM file with the server's certificate chain and private key.
    #[arg(long = "tlsCertificateKeyFile", help_heading = "TLS options")]
    tls_certificate_key_file: Option<PathBuf>,
    /// PEM file of the CA certificates that client certificates must chain to; clients
    /// must present one unless --tlsAllowConnectionsWithoutCertificates.
    #[arg(long = "tlsCAFile", help_heading = "TLS options")]
    tls_ca_file: Option<PathBuf>,
    /// With --tlsCAFile: accept clients without a certificate (those that present one are
    /// still verified).
    #[arg(
        long = "tlsAllowConnectionsWithoutCertificates",
        help_heading = "TLS options"
    )]
    tls_allow_connections_without_certificates: bool,
    /// Comma-separated protocols to refuse: TLS1_0, TLS1_1 (never offered), TLS1_2, TLS1_3.
    #[arg(long = "tlsDisabledProtocols", help_heading = "TLS options")]
    tls_disabled_protocols: Option<String>,
    /// Stack size of the server's threads in KiB. Recursion is bounded by the BSON depth
    /// limit (200 levels); a debug build needs about 11 KiB per level (2 MiB overflowed at
    /// ~180 levels, 4 MiB holds 199), so the default leaves a 4x margin. The hostile-input
    /// tests run with 4 MiB, where any unbounded recursion fails.
    #[arg(long = "threadStackKiB", hide = true, default_value_t = 16 * 1024)]
    thread_stack_kib: usize,
}

/// The settings in force: the command line over the config file over the defaults.
#[derive(Debug)]
struct Args {
    dbpath: PathBuf,
    /// Given with --wiredTigerCacheSizeGB or the config file (`None`: sized from memory).
    cache_size_gb: Option<f64>,
    port: u16,
    bind_ip: String,
    http_port: Option<u16>,
    set_parameter: Vec<String>,
    quiet: bool,
    verbosity: u8,
    logpath: Option<PathBuf>,
    logappend: bool,
    fork: bool,
    pidfilepath: Option<PathBuf>,
    max_conns: i64,
    repl_set: Option<String>,
    auth: bool,
    tls: tls::Settings,
    thread_stack_kib: usize,
}

impl Args {
    fn resolve(cli: Cli) -> anyhow::Result<Args> {
        let file = match &cli.config {
            Some(p) => config::load(p)?,
            None => config::FileSettings::default(),
        };
        let bind_all = cli.bind_ip_all || (cli.bind_ip.is_none() && file.bind_ip_all);
        let bind_ip = match (bind_all, cli.bind_ip.or(file.bind_ip)) {
            // mongod without --ipv6 binds the IPv4 wildcard only.
            (true, _) => "0.0.0.0".to_string(),
            (false, Some(ip)) => ip,
            (false, None) => "127.0.0.1".to_string(),
        };
        let mut set_parameter = file.set_parameter;
        set_parameter.extend(cli.set_parameter);
        Ok(Args {
            dbpath: cli
                .dbpath
                .or(file.db_path)
                .unwrap_or_else(|| PathBuf::from("./data")),
            cache_size_gb: match cli.cache_size_gb.or(file.cache_size_gb) {
                Some(gb) => Some(config::cache_size_gb(gb)?),
                None => None,
            },
            port: cli.port.or(file.port).unwrap_or(27017),
            bind_ip,
            http_port: cli.http_port.or(file.http_port),
            set_parameter,
            quiet: cli.quiet || file.quiet,
            verbosity: cli.verbose.max(file.verbosity),
            logpath: cli.logpath.or(file.log_path),
            logappend: cli.logappend || file.log_append,
            fork: cli.fork || file.fork,
            pidfilepath: cli.pidfilepath.or(file.pid_file_path),
            max_conns: cli
                .max_conns
                .or(file.max_conns)
                .unwrap_or(hourglass_protocol::state::DEFAULT_MAX_CONNS),
            repl_set: cli.repl_set.or(file.repl_set_name),
            auth: cli.auth || file.auth,
            tls: tls::Settings {
                mode: match cli.tls_mode.or(file.tls_mode) {
                    Some(m) => tls::Mode::parse(&m)?,
                    None => tls::Mode::Disabled,
                },
                certificate_key_file: cli
                    .tls_certificate_key_file
                    .or(file.tls_certificate_key_file),
                ca_file: cli.tls_ca_file.or(file.tls_ca_file),
                allow_without_certificates: cli.tls_allow_connections_without_certificates
                    || file.tls_allow_connections_without_certificates,
                disabled_protocols: cli
                    .tls_disabled_protocols
                    .or(file.tls_disabled_protocols)
                    .map(|s| s.split(',').map(|p| p.trim().to_string()).collect())
                    .unwrap_or_default(),
            },
            thread_stack_kib: cli.thread_stack_kib,
        })
    }
}

/// One GB as mongod counts it for the cache (GiB).
const GB: f64 = (1u64 << 30) as f64;

impl Args {
    /// The block cache's size: as given, else WiredTiger's default of half of the memory
    /// beyond the first GB, at least 256 MB.
    fn cache_bytes(&self) -> u64 {
        let gb = self.cache_size_gb.unwrap_or_else(|| {
            let memory = hourglass_protocol::params::system_memory_bytes() as f64 / GB;
            ((memory - 1.0) * 0.5).max(config::MIN_CACHE_GB)
        });
        (gb * GB) as u64
    }

    fn parsed(&self, params: &Document) -> Document {
        let mut system_log = doc! {"quiet": self.quiet};
        if let Some(p) = &self.logpath {
            system_log.insert("destination", "file");
            system_log.insert("path", p.display().to_string());
        }
        let mut net = doc! {"bindIp": &self.bind_ip, "port": i32::from(self.port), "maxIncomingConnections": self.max_conns};
        if let Some(p) = self.http_port {
            net.insert("http", doc! {"port": i32::from(p)});
        }
        if self.tls.mode != tls::Mode::Disabled {
            let mut t = doc! {"mode": self.tls.mode.name()};
            if let Some(f) = &self.tls.certificate_key_file {
                t.insert("certificateKeyFile", f.display().to_string());
            }
            if let Some(f) = &self.tls.ca_file {
                t.insert("CAFile", f.display().to_string());
            }
            if self.tls.allow_without_certificates {
                t.insert("allowConnectionsWithoutCertificates", true);
            }
            net.insert("tls", t);
        }
        let authorization = if self.auth { "enabled" } else { "disabled" };
        let mut process = Document::new();
        if self.fork {
            process.insert("fork", true);
        }
        if let Some(p) = &self.pidfilepath {
            process.insert("pidFilePath", p.display().to_string());
        }
        let mut storage = doc! {"dbPath": self.dbpath.display().to_string()};
        if let Some(gb) = self.cache_size_gb {
            storage.insert("wiredTiger", doc! {"engineConfig": {"cacheSizeGB": gb}});
        }
        let mut parsed = doc! {
            "net": net,
            "security": {"authorization": authorization},
            "storage": storage,
            "setParameter": params.clone(),
            "systemLog": system_log,
        };
        if !process.is_empty() {
            parsed.insert("processManagement", process);
        }
        if let Some(name) = &self.repl_set {
            parsed.insert("replication", doc! {"replSet": name});
        }
        parsed
    }
}

fn apply_parameters(args: &Args, params: &Parameters) -> anyhow::Result<Document> {
    let mut given = Document::new();
    for p in &args.set_parameter {
        let (name, value) = p
            .split_once('=')
            .with_context(|| format!("--setParameter expects name=value, got '{p}'"))?;
        params
            .set(name, &Bson::String(value.to_string()), true)
            .map_err(|e| anyhow::anyhow!("Bad --setParameter '{p}': {e}"))?;
        given.insert(name, value);
    }
    Ok(given)
}

/// A listening address that could not be bound: mongod exits with 48 (`EXIT_NET_ERROR`).
#[derive(Debug)]
struct ListenError(String);

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ListenError {}

/// mongod's exit code for a listening failure.
const EXIT_NET_ERROR: u8 = 48;

/// mongod's exit code for an error it does not handle, which is how it stops on a data
/// directory another server has locked (DBPathInUse).
const EXIT_UNCAUGHT: u8 = 100;

fn main() -> std::process::ExitCode {
    // `hourglass import ...` and `hourglass export ...` are client tools with their own flags.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if hourglass_tools::subcommand(&argv).is_some() {
        return hourglass_tools::run(argv);
    }
    let args = match Args::resolve(Cli::parse()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("hourglass: {e:#}");
            return std::process::ExitCode::from(2);
        }
    };
    if args.fork && !daemon::is_forked_child() {
        if args.logpath.is_none() {
            eprintln!("hourglass: BadValue: --fork has to be used with --logpath");
            return std::process::ExitCode::from(2);
        }
        return daemon::fork();
    }
    let log_to_file = args.logpath.is_some();
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // Once on the terminal, and once in the log file when there is one (before
            // logging starts the log line goes nowhere).
            if log_to_file || !tracing::dispatcher::has_been_set() {
                eprintln!("hourglass: {e:#}");
            }
            tracing::error!("fatal: {e:#}");
            let locked = e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<hourglass_storage::StorageError>(),
                    Some(hourglass_storage::StorageError::DbPathInUse(_))
                )
            });
            match e.downcast_ref::<ListenError>() {
                Some(_) => std::process::ExitCode::from(EXIT_NET_ERROR),
                None if locked => std::process::ExitCode::from(EXIT_UNCAUGHT),
                None => std::process::ExitCode::FAILURE,
            }
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.dbpath)
        .with_context(|| format!("cannot create --dbpath {}", args.dbpath.display()))?;
    let recent = Arc::new(RecentLog::default());
    logging::init(
        args.quiet,
        args.verbosity,
        args.logpath.as_deref(),
        args.logappend,
        recent.clone(),
    )?;
    if let Some(path) = &args.pidfilepath {
        daemon::write_pid_file(path)?;
    }
    let params = Parameters::default();
    let given = apply_parameters(&args, &params)?;
    let engine = Engine::open_with_cache(&args.dbpath, args.cache_bytes())
        .with_context(|| format!("cannot open storage in {}", args.dbpath.display()))?;
    let catalog = Catalog::open(engine).context("cannot load the catalog")?;
    let cmdline = CmdLine {
        argv: std::env::args().collect(),
        parsed: args.parsed(&given),
    };
    let tls = tls::Tls::new(&args.tls)?;
    let state = Arc::new(ServerState::new(catalog, params, cmdline, recent));
    if let Some(name) = &args.repl_set {
        let _ = state
            .repl_set
            .set(hourglass_protocol::repl_set::ReplSet::new(name.clone()));
        tracing::info!(set = %name, "primary of the one-member replica set");
    }
    if args.auth {
        state.access.enable();
        tracing::info!("access control is on (--auth)");
    }
    state
        .connections
        .max
        .store(args.max_conns, Ordering::Relaxed);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(args.thread_stack_kib.max(64) * 1024)
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args, state.clone(), tls.map(Arc::new)))?;
    // Nothing writes after the final flush: the TTL monitor and any writing command still
    // running wait at the write gate.
    state.write_gate.lock();
    match state.timeseries.close_all() {
        // Open buckets are durable in the insert log; the next start closes them.
        Err(e) if e.is_out_of_space() => {
            tracing::warn!(error = %e, "disk full: open time-series buckets stay in the insert log until the next start")
        }
        other => other.context("closing open time-series buckets failed")?,
    }
    state.catalog.shutdown().context("final flush failed")?;
    tracing::info!("shutdown complete");
    Ok(())
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("received SIGINT"),
        _ = term => tracing::info!("received SIGTERM"),
    }
}

async fn serve(
    args: Args,
    state: Arc<ServerState>,
    tls: Option<Arc<tls::Tls>>,
) -> anyhow::Result<()> {
    let mut listeners = Vec::new();
    for ip in args
        .bind_ip
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let addr = match ip.contains(':') {
            true => format!("[{ip}]:{}", args.port),
            false => format!("{ip}:{}", args.port),
        };
        let l = TcpListener::bind(&addr)
            .await
            .map_err(|e| ListenError(format!("cannot listen on {addr}: {e}")))?;
        tracing::info!(address = %addr, "Waiting for connections");
        listeners.push(l);
    }
    let http = match args.http_port {
        Some(port) => Some(bind_http(&args.bind_ip, port, args.auth).await?),
        None => None,
    };
    daemon::report_ready();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut http_tasks = JoinSet::new();
    for l in http.into_iter().flatten() {
        let (state, stop) = (state.clone(), stop_rx.clone());
        http_tasks.spawn(async move {
            if let Err(e) = hourglass_http::serve(l, state, stop).await {
                tracing::error!(error = %e, "HTTP listener failed");
            }
        });
    }
    let reaper = tokio::spawn(reap_cursors(state.clone(), stop_rx.clone()));
    let ttl = tokio::spawn(ttl_monitor(state.clone(), stop_rx.clone()));
    let mover = tokio::spawn(archive_mover(state.clone(), stop_rx.clone()));
    let mut conns = JoinSet::new();
    let mut accepts = JoinSet::new();
    for l in listeners {
        let state = state.clone();
        let stop = stop_rx.clone();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        accepts.spawn(accept_loop(l, state, stop, tx, tls.clone()));
        conns.spawn(track_connections(rx));
    }
    shutdown_signal().await;
    tracing::info!("shutting down: no new connections, finishing requests in flight");
    let _ = stop_tx.send(true);
    accepts.shutdown().await;
    let drain = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(15), drain)
        .await
        .is_err()
    {
        tracing::warn!("some requests did not finish within 15 s");
    }
    let http_drain = async { while http_tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(15), http_drain)
        .await
        .is_err()
    {
        tracing::warn!("some HTTP requests did not finish within 15 s");
    }
    reaper.abort();
    ttl.abort();
    mover.abort();
    Ok(())
}

/// The HTTP listeners. With `--auth` (every request authenticated) on the addresses of
/// `bind_ip`; without, on its loopback addresses only (127.0.0.1 when it names none), since
/// anyone reaching the port could then write.
async fn bind_http(bind_ip: &str, port: u16, auth: bool) -> anyhow::Result<Vec<TcpListener>> {
    let mut ips: Vec<std::net::IpAddr> = Vec::new();
    for ip in bind_ip.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match ip.parse::<std::net::IpAddr>() {
            Ok(a) if auth => ips.push(a),
            Ok(a) if a.is_loopback() => ips.push(a),
            Ok(a) if a.is_unspecified() => ips.push(std::net::Ipv4Addr::LOCALHOST.into()),
            _ => {
                tracing::warn!(address = %ip, "without --auth the HTTP listener serves loopback only: not listening on {ip}")
            }
        }
    }
    if ips.is_empty() {
        ips.push(std::net::Ipv4Addr::LOCALHOST.into());
    }
    ips.dedup();
    let mut out = Vec::new();
    for ip in ips {
        let addr = std::net::SocketAddr::new(ip, port);
        let l = TcpListener::bind(addr)
            .await
            .map_err(|e| ListenError(format!("cannot listen for HTTP on {addr}: {e}")))?;
        tracing::info!(address = %addr, "Waiting for HTTP requests");
        out.push(l);
    }
    Ok(out)
}

/// Owns the per-connection tasks so shutdown can wait for them.
async fn track_connections(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<tokio::task::JoinHandle<()>>,
) {
    while let Some(h) = rx.recv().await {
        let _ = h.await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<ServerState>,
    stop: watch::Receiver<bool>,
    tx: tokio::sync::mpsc::UnboundedSender<tokio::task::JoinHandle<()>>,
    tls: Option<Arc<tls::Tls>>,
) {
    let mut next_id: i64 = 0;
    let mut errors = RateLimited::new("accept failed");
    let mut refusals = RateLimited::new("connection refused: maxConns reached");
    let mut backoff = Duration::from_millis(5);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => {
                backoff = Duration::from_millis(5);
                x
            }
            Err(e) => {
                // Out of file descriptors and the like: back off (up to 1 s) instead of
                // spinning, and log once a second with the count of repeats.
                errors.warn(&e.to_string());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let max = state.connections.max.load(Ordering::Relaxed);
        if state.connections.current.load(Ordering::Relaxed) >= max {
            state.connections.rejected.fetch_add(1, Ordering::Relaxed);
            refusals.warn(&format!("{peer}: {max} connections open"));
            drop(stream);
            continue;
        }
        next_id += 1;
        let mut conn = ConnInfo::new(next_id, peer.to_string());
        conn.local = stream
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        tracing::info!(conn = next_id, peer = %peer, "connection accepted");
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let stop = stop.clone();
        let tls = tls.clone();
        // Counted before the task starts so that the limit holds for a burst of accepts.
        state.connections.current.fetch_add(1, Ordering::Relaxed);
        let handle = tokio::spawn(async move {
            state
                .connections
                .total_created
                .fetch_add(1, Ordering::Relaxed);
            match tls::accept(tls.as_deref(), stream).await {
                Ok(tls::Accepted::Plain(s)) => {
                    connection::serve(state.clone(), s, conn, stop).await
                }
                Ok(tls::Accepted::Tls(s, subject)) => {
                    conn.certificate_subject = subject;
                    connection::serve(state.clone(), s, conn, stop).await
                }
                Err(e) => {
                    tracing::info!(conn = conn.id, peer = %conn.peer, error = %e, "TLS handshake failed")
                }
            }
            state.connections.current.fetch_sub(1, Ordering::Relaxed);
        });
        if tx.send(handle).is_err() {
            return;
        }
    }
}

/// A warning logged at most once a second, with the number of repeats in between.
struct RateLimited {
    what: &'static str,
    last: Option<std::time::Instant>,
    suppressed: u64,
}

impl RateLimited {
    fn new(what: &'static str) -> RateLimited {
        RateLimited {
            what,
            last: None,
            suppressed: 0,
        }
    }

    fn warn(&mut self, detail: &str) {
        let now = std::time::Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            self.suppressed += 1;
            return;
        }
        tracing::warn!(error = %detail, repeated = self.suppressed, "{}", self.what);
        self.last = Some(now);
        self.suppressed = 0;
    }
}

/// Closes cursors idle for longer than `cursorTimeoutMillis`.
async fn reap_cursors(state: Arc<ServerState>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
        let timeout = state.params.get_i64("cursorTimeoutMillis", 600_000).max(0) as u64;
        let n = state.cursors.reap(Duration::from_millis(timeout));
        if n > 0 {
            tracing::info!(count = n, "closed idle cursors");
        }
        let limit = hourglass_protocol::transactions::lifetime_limit(&state.params);
        let n = state.transactions.expire(&state.catalog, limit);
        if n > 0 {
            tracing::info!(
                count = n,
                "aborted transactions past transactionLifetimeLimitSeconds"
            );
        }
    }
}

/// The archive mover: one pass every `archiveMoverIntervalSecs` seconds (re-read each
/// time), or at once while a pass leaves work behind; on a blocking thread.
async fn archive_mover(state: Arc<ServerState>, mut stop: watch::Receiver<bool>) {
    let mut more = false;
    loop {
        let secs = state.params.get_i64("archiveMoverIntervalSecs", 60).max(1) as u64;
        let wait = if more {
            Duration::from_millis(10)
        } else {
            Duration::from_secs(secs)
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        let s = state.clone();
        more = match tokio::task::spawn_blocking(move || {
            hourglass_protocol::archive_mover::run_pass(&s)
        })
        .await
        {
            Ok(more) => more,
            Err(e) => {
                tracing::warn!(error = %e, "archive pass failed");
                false
            }
        };
    }
}

/// The TTL monitor: one pass every `ttlMonitorSleepSecs` seconds (re-read each time), run
/// on a blocking thread since it reads and writes storage.
async fn ttl_monitor(state: Arc<ServerState>, mut stop: watch::Receiver<bool>) {
    loop {
        let secs = state.params.get_i64("ttlMonitorSleepSecs", 60).max(1) as u64;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(secs)) => {}
            _ = stop.changed() => return,
        }
        let s = state.clone();
        match tokio::task::spawn_blocking(move || hourglass_protocol::ttl::run_pass(&s)).await {
            Ok(n) if n > 0 => tracing::info!(deleted = n, "TTL pass deleted expired documents"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "TTL pass failed"),
        }
    }
}
