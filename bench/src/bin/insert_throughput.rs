//! Insert throughput through the official Rust driver: documents/s with 1 and 8
//! concurrent clients, each inserting one document per acknowledged (durable) command.
//!
//! Usage: `cargo run --release -p hourglass-bench --bin insert_throughput [-- SECONDS]`
//! Starts `target/release/hourglass` on a free port with a temporary dbpath.

use bson::doc;
use mongodb::{options::ClientOptions, Client};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port")
}

async fn run(client: &Client, clients: usize, secs: f64, batch: usize) -> f64 {
    let coll = client
        .database("bench")
        .collection::<bson::Document>(&format!("ins{clients}_{batch}"));
    let start = Instant::now();
    let deadline = Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let coll = coll.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while start.elapsed() < deadline {
                let docs: Vec<_> = (0..batch)
                    .map(|i| doc! {"client": c as i32, "seq": (n + i as u64) as i64, "host": "host_1", "usage_user": 12.5, "ts": bson::DateTime::now()})
                    .collect();
                if batch == 1 {
                    coll.insert_one(docs.into_iter().next().expect("one doc")).await.expect("insert");
                } else {
                    coll.insert_many(docs).await.expect("insert_many");
                }
                n += batch as u64;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("task");
    }
    total as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let bin = std::env::var("HOURGLASS_BIN").unwrap_or_else(|_| "target/release/hourglass".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut child = std::process::Command::new(&bin)
        .args([
            "--dbpath",
            &dir.path().display().to_string(),
            "--port",
            &port.to_string(),
            "--quiet",
        ])
        .spawn()
        .expect("start hourglass (build it with cargo build --release)");
    let mut opts =
        ClientOptions::parse(format!("mongodb://127.0.0.1:{port}/?directConnection=true"))
            .await
            .expect("uri");
    opts.max_pool_size = Some(16);
    let client = Client::with_options(opts).expect("client");
    for _ in 0..100 {
        if client
            .database("admin")
            .run_command(doc! {"ping": 1})
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("| clients | docs per insert | documents/s |");
    println!("|---|---|---|");
    for (clients, batch) in [(1, 1), (8, 1), (1, 1000), (8, 1000)] {
        let rate = run(&client, clients, secs, batch).await;
        println!("| {clients} | {batch} | {rate:.0} |");
    }
    let _ = child.kill();
    let _ = child.wait();
}
