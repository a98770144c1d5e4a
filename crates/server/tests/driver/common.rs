//! Test harness: starts the `hourglass` binary on a free port with a temporary dbpath.

use bson::Document;
use mongodb::error::{Error, ErrorKind, WriteFailure};
use mongodb::{Client, Database};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// How long to wait for the server to accept TCP connections.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `hourglass` process owned by one test.
pub struct TestServer {
    port: u16,
    root: TempDir,
    child: Option<Child>,
    extra_args: Vec<String>,
    starts: u32,
}

/// Picks a port that was free a moment ago (bind to port 0, read it, release it).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local_addr").port()
}

impl TestServer {
    /// Starts a server with a fresh dbpath.
    pub fn start() -> TestServer {
        Self::start_with(&[])
    }

    /// Starts a server with a fresh dbpath and extra command-line arguments.
    pub fn start_with(extra: &[&str]) -> TestServer {
        let root = tempfile::Builder::new()
            .prefix("hourglass-test-")
            .tempdir()
            .expect("create tempdir");
        std::fs::create_dir_all(root.path().join("db")).expect("create dbpath");
        let mut server = TestServer {
            port: free_port(),
            root,
            child: None,
            extra_args: extra.iter().map(|s| s.to_string()).collect(),
            starts: 0,
        };
        // The free port can be taken by another test's server between `free_port` and
        // the bind: then the first start tries another port.
        for _ in 0..5 {
            if server.try_spawn() {
                return server;
            }
            server.port = free_port();
        }
        server.spawn();
        server
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dbpath(&self) -> PathBuf {
        self.root.path().join("db")
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn uri(&self) -> String {
        format!(
            "mongodb://127.0.0.1:{}/?directConnection=true&serverSelectionTimeoutMS=5000&connectTimeoutMS=5000",
            self.port
        )
    }

    fn log_path(&self, n: u32) -> PathBuf {
        self.root.path().join(format!("server-{n}.out"))
    }

    /// The combined stdout/stderr of every start of this server so far.
    pub fn output(&self) -> String {
        let mut all = String::new();
        for n in 0..self.starts {
            if let Ok(s) = std::fs::read_to_string(self.log_path(n)) {
                all.push_str(&s);
            }
        }
        all
    }

    fn spawn(&mut self) {
        if !self.try_spawn() {
            panic!(
                "hourglass could not listen on port {}; output:\n{}",
                self.port,
                self.output()
            );
        }
    }

    /// Starts the server; false when it exited because its port was taken.
    fn try_spawn(&mut self) -> bool {
        assert!(self.child.is_none(), "server already running");
        let log_path = self.log_path(self.starts);
        self.starts += 1;
        let out = std::fs::File::create(&log_path).expect("create output file");
        let err = out.try_clone().expect("clone output file");
        let child = Command::new(env!("CARGO_BIN_EXE_hourglass"))
            .arg("--dbpath")
            .arg(self.dbpath())
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--bind_ip")
            .arg("127.0.0.1")
            .arg("--quiet")
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn hourglass");
        self.child = Some(child);
        self.wait_ready()
    }

    /// Waits until the server accepts connections; false when it exited because its
    /// port was taken.
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().expect("try_wait") {
                self.child = None;
                let log =
                    std::fs::read_to_string(self.log_path(self.starts - 1)).unwrap_or_default();
                if log.contains("Address already in use") {
                    return false;
                }
                panic!(
                    "hourglass exited during startup with {status}; output:\n{}",
                    self.output()
                );
            }
            if TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200)).is_ok() {
                return true;
            }
            if Instant::now() > deadline {
                let _ = self.child.as_mut().unwrap().kill();
                let _ = self.child.as_mut().unwrap().wait();
                self.child = None;
                panic!(
                    "hourglass did not accept connections on port {} within {:?}; output:\n{}",
                    self.port,
                    START_TIMEOUT,
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A driver client connected directly to this server.
    pub async fn client(&self) -> Client {
        Client::with_uri_str(self.uri())
            .await
            .expect("build mongodb client")
    }

    /// Kills the server with SIGKILL and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL hourglass");
            child.wait().expect("wait for hourglass");
        }
    }

    /// Sends SIGTERM and waits (up to 20 s) for a clean exit; panics on a non-zero exit.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("run kill -TERM");
        assert!(status.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                assert!(
                    status.success(),
                    "hourglass exited with {status} after SIGTERM; output:\n{}",
                    self.output()
                );
                return;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("hourglass did not exit within 20 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server again on the same dbpath and port (stopping it first if needed).
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
        self.spawn();
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs a command that must succeed and checks `ok: 1`.
pub async fn run_ok(db: &Database, cmd: Document) -> Document {
    let shown = cmd.clone();
    let reply = db
        .run_command(cmd)
        .await
        .unwrap_or_else(|e| panic!("command {shown} failed: {e}"));
    assert_eq!(ok_value(&reply), Some(1.0), "reply to {shown}: {reply}");
    reply
}

/// The `ok` field as a number.
pub fn ok_value(reply: &Document) -> Option<f64> {
    match reply.get("ok")? {
        bson::Bson::Double(d) => Some(*d),
        bson::Bson::Int32(i) => Some(f64::from(*i)),
        bson::Bson::Int64(i) => Some(*i as f64),
        bson::Bson::Boolean(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

/// Reads a numeric field as i64 whatever its BSON numeric type.
pub fn num(doc: &Document, key: &str) -> i64 {
    match doc.get(key) {
        Some(bson::Bson::Int32(i)) => i64::from(*i),
        Some(bson::Bson::Int64(i)) => *i,
        Some(bson::Bson::Double(d)) => *d as i64,
        other => panic!("field {key} is not a number: {other:?} in {doc}"),
    }
}

/// The server error code carried by a driver error, if any.
pub fn err_code(e: &Error) -> Option<i32> {
    match &*e.kind {
        ErrorKind::Command(c) => Some(c.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        ErrorKind::InsertMany(im) => im
            .write_errors
            .as_ref()
            .and_then(|v| v.first())
            .map(|w| w.code),
        _ => None,
    }
}

/// The codeName carried by a command error, if any.
pub fn err_code_name(e: &Error) -> Option<String> {
    match &*e.kind {
        ErrorKind::Command(c) => Some(c.code_name.clone()),
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code_name.clone(),
        _ => None,
    }
}

/// Asserts that a command fails with the given code (and codeName when given).
pub async fn assert_cmd_error(db: &Database, cmd: Document, code: i32, code_name: Option<&str>) {
    let shown = cmd.clone();
    match db.run_command(cmd).await {
        Ok(reply) => panic!("command {shown} should fail with code {code}, got {reply}"),
        Err(e) => {
            assert_eq!(err_code(&e), Some(code), "command {shown}: {e}");
            if let Some(name) = code_name {
                assert_eq!(
                    err_code_name(&e).as_deref(),
                    Some(name),
                    "command {shown}: {e}"
                );
            }
        }
    }
}

/// 2026-01-01T00:00:00Z, the time origin of the time-series tests.
pub const T0: i64 = 1_767_225_600_000;

/// `T0` plus `secs` seconds.
pub fn at(secs: i64) -> bson::DateTime {
    bson::DateTime::from_millis(T0 + secs * 1000)
}

/// Every document `filter` finds in `coll`.
pub async fn all(
    coll: &mongodb::Collection<bson::Document>,
    filter: bson::Document,
) -> Vec<bson::Document> {
    use futures::TryStreamExt;
    coll.find(filter)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

/// The `listIndexes` documents of `coll`.
pub async fn list_indexes(db: &Database, coll: &str) -> Vec<bson::Document> {
    let reply = run_ok(db, bson::doc! {"listIndexes": coll}).await;
    reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|b| b.as_document().unwrap().clone())
        .collect()
}
