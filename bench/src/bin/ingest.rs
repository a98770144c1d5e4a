//! Ingest benchmark: load a TSBS-like cpu-only data set (a concatenated stream of BSON
//! documents, as `tsbs_gen.py --format bson` writes) into a time-series collection with
//! `insert_many` batches from N concurrent clients; print rows/s, metrics/s, and bytes on
//! disk per float value after a clean shutdown.
//!
//! Usage:
//!   ingest FILE [--clients N] [--batch N] [--uri URI] [--bin PATH] [--dbpath DIR]
//!               [--coll NAME] [--db NAME]
//!
//! Without `--uri` it starts `target/release/hourglass` (or `--bin`, or `$HOURGLASS_BIN`) on
//! a free port with a temporary dbpath (or `--dbpath`), stops it with SIGTERM after the load
//! and measures the dbpath. With `--uri` the on-disk size is only reported if `--dbpath`
//! names the server's directory (measured while the server runs, i.e. before its flush).
//!
//! Documents are decoded, partitioned and batched in memory before the timer starts, and
//! are sent pre-encoded (`Collection<RawDocumentBuf>`). Rows are partitioned by a hash of
//! `tags.hostname` into N groups, so each host's rows reach the server in time order from
//! one client; the groups keep the file's order. Output ends with one machine-readable line:
//! `RESULT rows=.. clients=.. seconds=.. rows_per_s=.. metrics_per_s=.. bytes=.. bytes_per_value=..
//! alloc_bytes=.. alloc_bytes_per_value=..` (bytes = sum of file sizes, alloc = allocated blocks).

use bson::{doc, RawDocumentBuf};
use mongodb::{options::ClientOptions, Client};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const FIELDS_PER_ROW: u64 = 10;

struct Args {
    file: PathBuf,
    clients: usize,
    batch: usize,
    uri: Option<String>,
    bin: String,
    dbpath: Option<PathBuf>,
    db: String,
    coll: String,
    /// A regular collection with a `{tags.hostname: 1, time: 1}` index (built after the
    /// load) instead of a time-series collection.
    regular: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: ingest FILE [--clients N] [--batch N] [--uri URI] [--bin PATH] [--dbpath DIR] [--db NAME] [--coll NAME] [--regular]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        file: PathBuf::new(),
        clients: 1,
        batch: 10_000,
        uri: None,
        bin: std::env::var("HOURGLASS_BIN").unwrap_or_else(|_| "target/release/hourglass".into()),
        dbpath: None,
        db: "bench".into(),
        coll: "cpu".into(),
        regular: false,
    };
    let mut file = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--clients" => a.clients = val().parse().unwrap_or_else(|_| usage()),
            "--batch" => a.batch = val().parse().unwrap_or_else(|_| usage()),
            "--uri" => a.uri = Some(val()),
            "--bin" => a.bin = val(),
            "--dbpath" => a.dbpath = Some(val().into()),
            "--db" => a.db = val(),
            "--coll" => a.coll = val(),
            "--regular" => a.regular = true,
            "-h" | "--help" => usage(),
            s if s.starts_with("--") => usage(),
            s => file = Some(PathBuf::from(s)),
        }
    }
    a.file = file.unwrap_or_else(|| usage());
    if a.clients == 0 || a.batch == 0 {
        usage()
    }
    a
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port")
}

/// (sum of file sizes, sum of allocated bytes, sum of file sizes without the write-ahead
/// journal `*.jnl`) under `p`. The first two differ for sparse or preallocated files (the
/// storage engine's journal is preallocated); the third is the data proper, comparable
/// to InfluxDB's TSM files without its WAL.
fn dir_size(p: &Path) -> (u64, u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut len, mut alloc, mut tables) = (0, 0, 0);
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => {
                    let (l, a, t) = dir_size(&e.path());
                    len += l;
                    alloc += a;
                    tables += t;
                }
                Ok(m) => {
                    len += m.len();
                    alloc += m.blocks() * 512;
                    if e.path().extension().is_none_or(|x| x != "jnl") {
                        tables += m.len();
                    }
                }
                Err(_) => {}
            }
        }
    }
    (len, alloc, tables)
}

/// Split a concatenated BSON stream into documents, partitioned by hostname hash into
/// `groups` groups (order kept within a group).
fn load_partitioned(path: &Path, groups: usize) -> (Vec<Vec<RawDocumentBuf>>, u64) {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut out: Vec<Vec<RawDocumentBuf>> = (0..groups).map(|_| Vec::new()).collect();
    let mut off = 0usize;
    let mut n = 0u64;
    while off < data.len() {
        assert!(off + 4 <= data.len(), "truncated BSON stream at byte {off}");
        let len = i32::from_le_bytes(data[off..off + 4].try_into().unwrap()) as usize;
        assert!(
            len >= 5 && off + len <= data.len(),
            "bad BSON length {len} at byte {off}"
        );
        let doc = RawDocumentBuf::from_bytes(data[off..off + len].to_vec())
            .unwrap_or_else(|e| panic!("bad BSON document at byte {off}: {e}"));
        let host = doc
            .get_document("tags")
            .ok()
            .and_then(|t| t.get_str("hostname").ok())
            .unwrap_or("");
        let mut h = std::collections::hash_map::DefaultHasher::new();
        host.hash(&mut h);
        let g = (h.finish() % groups as u64) as usize;
        out[g].push(doc);
        off += len;
        n += 1;
    }
    (out, n)
}

#[tokio::main]
async fn main() {
    let a = parse_args();

    // Decode and batch everything before the timer starts.
    let t_prep = Instant::now();
    let (groups, rows) = load_partitioned(&a.file, a.clients);
    let batches: Vec<Vec<Vec<RawDocumentBuf>>> = groups
        .into_iter()
        .map(|g| {
            let mut v = Vec::new();
            let mut it = g.into_iter().peekable();
            while it.peek().is_some() {
                v.push(it.by_ref().take(a.batch).collect::<Vec<_>>());
            }
            v
        })
        .collect();
    eprintln!(
        "prepared {rows} rows in {} groups ({} batches) in {:.1}s",
        a.clients,
        batches.iter().map(Vec::len).sum::<usize>(),
        t_prep.elapsed().as_secs_f64()
    );

    // Server: given by --uri, or started here.
    let mut tmp = None;
    let mut child = None;
    let uri = match &a.uri {
        Some(u) => u.clone(),
        None => {
            let dbpath = match &a.dbpath {
                Some(p) => {
                    std::fs::create_dir_all(p).expect("create dbpath");
                    p.clone()
                }
                None => {
                    let t = tempfile::tempdir().expect("tempdir");
                    let p = t.path().to_path_buf();
                    tmp = Some(t);
                    p
                }
            };
            let port = free_port();
            child = Some(
                std::process::Command::new(&a.bin)
                    .args([
                        "--dbpath",
                        &dbpath.display().to_string(),
                        "--port",
                        &port.to_string(),
                        "--bind_ip",
                        "127.0.0.1",
                        "--quiet",
                    ])
                    .spawn()
                    .unwrap_or_else(|e| {
                        panic!("start {} (cargo build --release first): {e}", a.bin)
                    }),
            );
            format!("mongodb://127.0.0.1:{port}/?directConnection=true")
        }
    };
    let dbpath: Option<PathBuf> = a
        .dbpath
        .clone()
        .or_else(|| tmp.as_ref().map(|t| t.path().to_path_buf()));

    let mut opts = ClientOptions::parse(&uri).await.expect("uri");
    opts.max_pool_size = Some((a.clients as u32).max(1) + 2);
    let client = Client::with_options(opts).expect("client");
    let mut up = false;
    for _ in 0..200 {
        if client
            .database("admin")
            .run_command(doc! {"ping": 1})
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "server at {uri} did not answer ping");

    let db = client.database(&a.db);
    let _ = db.collection::<bson::Document>(&a.coll).drop().await;
    let create = match a.regular {
        true => doc! {"create": &a.coll},
        false => doc! {
            "create": &a.coll,
            "timeseries": {"timeField": "time", "metaField": "tags", "granularity": "seconds"},
        },
    };
    db.run_command(create).await.expect("create the collection");
    let coll = db.collection::<RawDocumentBuf>(&a.coll);

    // Timed load.
    let start = Instant::now();
    let mut tasks = Vec::new();
    for group in batches {
        let coll = coll.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            for b in group {
                let len = b.len() as u64;
                let r = coll.insert_many(b).await;
                match r {
                    Ok(res) => {
                        if res.inserted_ids.len() as u64 != len {
                            eprintln!(
                                "warning: insert_many acknowledged {} of {len}",
                                res.inserted_ids.len()
                            );
                        }
                    }
                    Err(e) => panic!("insert_many failed after {n} rows: {e}"),
                }
                n += len;
            }
            n
        }));
    }
    let mut sent = 0u64;
    for t in tasks {
        sent += t.await.expect("loader task");
    }
    let secs = start.elapsed().as_secs_f64();
    let rows_per_s = sent as f64 / secs;
    if a.regular {
        let t = Instant::now();
        db.run_command(doc! {
            "createIndexes": &a.coll,
            "indexes": [{"key": {"tags.hostname": 1, "time": 1}, "name": "host_time"}],
        })
        .await
        .expect("createIndexes");
        println!("index build seconds: {:.3}", t.elapsed().as_secs_f64());
    }

    let t_count = Instant::now();
    let counted = coll
        .count_documents(doc! {})
        .await
        .expect("count_documents");
    let count_secs = t_count.elapsed().as_secs_f64();
    if counted != rows {
        eprintln!("ERROR: count_documents = {counted}, expected {rows}");
    }

    // Stop the server (clean shutdown flushes) and measure the dbpath.
    drop(coll);
    drop(db);
    client.shutdown().await;
    let mut stop_secs = 0.0;
    if let Some(mut ch) = child.take() {
        let t_stop = Instant::now();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &ch.id().to_string()])
            .status();
        let mut exited = false;
        for _ in 0..1200 {
            if let Ok(Some(st)) = ch.try_wait() {
                if !st.success() {
                    eprintln!("warning: hourglass exited with {st}");
                }
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !exited {
            eprintln!("ERROR: hourglass did not exit within 120 s of SIGTERM; killing it");
            let _ = ch.kill();
            let _ = ch.wait();
        }
        stop_secs = t_stop.elapsed().as_secs_f64();
    }
    let (bytes, alloc, tables) = dbpath.as_deref().map(dir_size).unwrap_or((0, 0, 0));
    let tbpv = tables as f64 / (rows * FIELDS_PER_ROW) as f64;
    let values = rows * FIELDS_PER_ROW;
    let (bpv, abpv) = if bytes > 0 {
        (bytes as f64 / values as f64, alloc as f64 / values as f64)
    } else {
        (f64::NAN, f64::NAN)
    };

    println!("file:           {}", a.file.display());
    println!("rows:           {rows} (count_documents: {counted}, {count_secs:.2}s)");
    println!("clients:        {} (batch {})", a.clients, a.batch);
    println!("load seconds:   {secs:.2}");
    println!("rows/s:         {rows_per_s:.0}");
    println!("metrics/s:      {:.0}", rows_per_s * FIELDS_PER_ROW as f64);
    println!("shutdown secs:  {stop_secs:.2}");
    println!("bytes on disk:  {bytes}");
    println!("bytes allocated:{alloc}");
    println!("bytes/value:    {bpv:.2} (allocated: {abpv:.2}; without journal: {tbpv:.2})");
    println!(
        "RESULT rows={rows} counted={counted} clients={} seconds={secs:.3} rows_per_s={rows_per_s:.0} metrics_per_s={:.0} bytes={bytes} bytes_per_value={bpv:.3} alloc_bytes={alloc} alloc_bytes_per_value={abpv:.3} table_bytes_per_value={tbpv:.3}",
        a.clients,
        rows_per_s * FIELDS_PER_ROW as f64
    );
    drop(tmp);
    if counted != rows {
        std::process::exit(1);
    }
}
