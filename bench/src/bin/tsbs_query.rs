//! TSBS cpu-only query benchmark, Hourglass side: runs the seven TSBS queries (or the
//! high-cardinality index query) as MongoDB aggregations on the time-series collection
//! that `ingest` loaded, through the Rust driver; times a warm-up plus N runs of each and
//! writes the median latencies and the answers as JSON for `bench/tsbs_compare.py`.
//!
//! Usage:
//!   tsbs_query --uri URI --out FILE [--db bench] [--coll cpu] [--runs 5] [--budget 60]
//!              [--date-trunc auto|strict|arith] [--only NAME,NAME]
//!   tsbs_query --uri URI --out FILE --index --coll cpu10k --host host_4242
//!              --from MS --to MS [--runs 5]
//!
//! Timing: after the warm-up, `--runs` timed runs, but no new run once the timed runs
//! have taken `--budget` seconds (60; 0 = none), so a slow query gets fewer runs (at
//! least one; the JSON says how many). Each run is one `aggregate` plus the iteration of its cursor (getMores
//! included). Results are read as raw documents (`Cursor::advance` / `current`), so the
//! client decodes nothing, as InfluxDB's timing reads its JSON body unparsed. The answers
//! written to the JSON file are those of the warm-up run.
//!
//! `--date-trunc auto` (default) writes the minute/hour buckets with `$dateTrunc`, as a
//! MongoDB user would; if the server rejects that form, the query is run again with the
//! same bucketing written arithmetically (`time - time % unit`) and the JSON records both
//! the error and `"form": "arith"`. `strict` never falls back; `arith` always uses it.

use bson::{doc, Bson, DateTime, Document, RawBsonRef, RawDocument};
use mongodb::{options::ClientOptions, Client, Collection};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// mimalloc, as the server uses: with glibc malloc a third of this client's time went to
/// allocating and freeing the driver's per-document buffers (`malloc_consolidate`,
/// `unlink_chunk`), which measured the allocator rather than the server.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// 2016-01-01T00:00:00Z, the first timestamp of `tsbs_gen.py`.
const T0_MS: i64 = 1_451_606_400_000;
const HOUR_MS: i64 = 3_600_000;
const FIELDS: [&str; 10] = [
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "usage_irq",
    "usage_softirq",
    "usage_steal",
    "usage_guest",
    "usage_guest_nice",
];

#[derive(Clone, Copy, PartialEq)]
enum TruncMode {
    Auto,
    Strict,
    Arith,
}

struct Args {
    uri: String,
    out: String,
    db: String,
    coll: String,
    runs: usize,
    budget: f64,
    trunc: TruncMode,
    only: Option<Vec<String>>,
    index: bool,
    host: String,
    from: i64,
    to: i64,
}

fn usage() -> ! {
    eprintln!(
        "usage: tsbs_query --uri URI --out FILE [--db NAME] [--coll NAME] [--runs N] [--budget SECS] \
         [--date-trunc auto|strict|arith] [--only NAME,..] \
         [--index --host HOST --from MS --to MS]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        uri: String::new(),
        out: String::new(),
        db: "bench".into(),
        coll: "cpu".into(),
        runs: 5,
        budget: 60.0,
        trunc: TruncMode::Auto,
        only: None,
        index: false,
        host: "host_7".into(),
        from: T0_MS,
        to: T0_MS + HOUR_MS,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--uri" => a.uri = val(),
            "--out" => a.out = val(),
            "--db" => a.db = val(),
            "--coll" => a.coll = val(),
            "--runs" => a.runs = val().parse().unwrap_or_else(|_| usage()),
            "--budget" => a.budget = val().parse().unwrap_or_else(|_| usage()),
            "--date-trunc" => {
                a.trunc = match val().as_str() {
                    "auto" => TruncMode::Auto,
                    "strict" => TruncMode::Strict,
                    "arith" => TruncMode::Arith,
                    _ => usage(),
                }
            }
            "--only" => a.only = Some(val().split(',').map(str::to_owned).collect()),
            "--index" => a.index = true,
            "--host" => a.host = val(),
            "--from" => a.from = val().parse().unwrap_or_else(|_| usage()),
            "--to" => a.to = val().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    if a.uri.is_empty() || a.out.is_empty() || a.runs == 0 {
        usage()
    }
    a
}

fn at(hours: i64) -> DateTime {
    DateTime::from_millis(T0_MS + hours * HOUR_MS)
}

/// The bucket start of `$time` for `unit` ("minute" / "hour").
fn trunc(unit: &str, arith: bool) -> Bson {
    if arith {
        let ms = if unit == "hour" { HOUR_MS } else { 60_000 };
        Bson::Document(doc! {"$subtract": ["$time", {"$mod": [{"$toLong": "$time"}, ms]}]})
    } else {
        Bson::Document(doc! {"$dateTrunc": {"date": "$time", "unit": unit}})
    }
}

fn max_of(fields: &[&str]) -> Document {
    let mut d = Document::new();
    for f in fields {
        d.insert(format!("max_{f}"), doc! {"$max": format!("${f}")});
    }
    d
}

fn group(id: Bson, accs: Document) -> Document {
    let mut g = doc! {"_id": id};
    g.extend(accs);
    doc! {"$group": g}
}

/// The seven TSBS cpu-only queries, with the meanings of `shared/influx_queries.py` and
/// `shared/duckdb_baseline.py`.
fn tsbs_queries(arith: bool) -> Vec<(&'static str, Vec<Document>)> {
    let hosts8: Vec<String> = (1..=8).map(|i| format!("host_{i}")).collect();
    vec![
        (
            "single-groupby-1-1-1",
            vec![
                doc! {"$match": {"tags.hostname": "host_7", "time": {"$gte": at(5), "$lt": at(6)}}},
                group(trunc("minute", arith), max_of(&FIELDS[..1])),
                doc! {"$sort": {"_id": 1}},
            ],
        ),
        (
            "single-groupby-5-1-12",
            vec![
                doc! {"$match": {"tags.hostname": "host_7", "time": {"$gte": at(6), "$lt": at(18)}}},
                group(trunc("minute", arith), max_of(&FIELDS[..5])),
                doc! {"$sort": {"_id": 1}},
            ],
        ),
        (
            "double-groupby-1",
            vec![
                doc! {"$match": {"time": {"$gte": at(6), "$lt": at(18)}}},
                group(
                    Bson::Document(doc! {"h": trunc("hour", arith), "host": "$tags.hostname"}),
                    doc! {"avg_usage_user": {"$avg": "$usage_user"}},
                ),
                doc! {"$sort": {"_id.h": 1, "_id.host": 1}},
            ],
        ),
        (
            "cpu-max-all-8",
            vec![
                doc! {"$match": {"tags.hostname": {"$in": hosts8}, "time": {"$gte": at(8), "$lt": at(16)}}},
                group(trunc("hour", arith), max_of(&FIELDS)),
                doc! {"$sort": {"_id": 1}},
            ],
        ),
        (
            "high-cpu-all",
            vec![
                doc! {"$match": {"usage_user": {"$gt": 90.0}, "time": {"$gte": at(6), "$lt": at(18)}}},
            ],
        ),
        (
            // high-cpu-all as a client asks for a table: ClickHouse's form in
            // ../shared/chdb_baseline.py (SELECT time, hostname, usage_user ... ORDER BY).
            "high-cpu-all-projected",
            vec![
                doc! {"$match": {"usage_user": {"$gt": 90.0}, "time": {"$gte": at(6), "$lt": at(18)}}},
                doc! {"$project": {"_id": 0, "time": 1, "host": "$tags.hostname", "usage_user": 1}},
                doc! {"$sort": {"time": 1, "host": 1}},
            ],
        ),
        (
            // The classic form; MongoDB 5.2+ also offers {$top: {sortBy, output}}.
            "lastpoint",
            vec![
                doc! {"$sort": {"tags.hostname": 1, "time": -1}},
                doc! {"$group": {"_id": "$tags.hostname", "last": {"$first": "$$ROOT"}}},
            ],
        ),
        (
            "groupby-orderby-limit",
            vec![
                doc! {"$match": {"time": {"$lt": at(12)}}},
                group(trunc("minute", arith), max_of(&FIELDS[..1])),
                doc! {"$sort": {"_id": -1}},
                doc! {"$limit": 5},
            ],
        ),
    ]
}

/// Whether any stage uses `$dateTrunc` (i.e. an arithmetic fallback exists).
fn uses_date_trunc(p: &[Document]) -> bool {
    format!("{p:?}").contains("$dateTrunc")
}

/// JSON for a BSON value: doubles as numbers (non-finite as strings), dates as
/// `{"$date": ms}`, ObjectIds as `{"$oid": hex}`, documents keep their field order.
fn json_of(v: RawBsonRef<'_>) -> Value {
    match v {
        RawBsonRef::Double(f) if f.is_finite() => json!(f),
        RawBsonRef::Double(f) => json!(f.to_string()),
        RawBsonRef::String(s) => json!(s),
        RawBsonRef::Int32(i) => json!(i),
        RawBsonRef::Int64(i) => json!(i),
        RawBsonRef::Boolean(b) => json!(b),
        RawBsonRef::Null => Value::Null,
        RawBsonRef::DateTime(d) => json!({"$date": d.timestamp_millis()}),
        RawBsonRef::ObjectId(o) => json!({"$oid": o.to_hex()}),
        RawBsonRef::Document(d) => json_of_doc(d),
        RawBsonRef::Array(a) => Value::Array(
            a.into_iter()
                .map(|e| {
                    e.map(json_of)
                        .unwrap_or_else(|e| json!({"$error": e.to_string()}))
                })
                .collect(),
        ),
        other => match Bson::try_from(other) {
            Ok(b) => b.into_relaxed_extjson(),
            Err(e) => json!({"$error": e.to_string()}),
        },
    }
}

fn json_of_doc(d: &RawDocument) -> Value {
    let mut m = Map::new();
    for e in d {
        match e {
            Ok((k, v)) => {
                m.insert(k.to_owned(), json_of(v));
            }
            Err(e) => {
                m.insert("$error".into(), json!(e.to_string()));
            }
        }
    }
    Value::Object(m)
}

/// `Error code N (Name): message` for server errors, the driver's text otherwise.
fn short(e: &mongodb::error::Error) -> String {
    match e.kind.as_ref() {
        mongodb::error::ErrorKind::Command(c) => {
            format!("Error code {} ({}): {}", c.code, c.code_name, c.message)
        }
        _ => e.to_string(),
    }
}

/// One `aggregate` with its cursor drained; returns (ms, rows, bytes, answers if kept).
async fn run_once(
    coll: &Collection<Document>,
    pipeline: &[Document],
    keep: bool,
) -> mongodb::error::Result<(f64, usize, usize, Vec<Value>)> {
    let t = Instant::now();
    let mut cursor = coll.aggregate(pipeline.to_vec()).await?;
    let (mut rows, mut bytes, mut kept) = (0usize, 0usize, Vec::new());
    while cursor.advance().await? {
        let cur = cursor.current();
        rows += 1;
        bytes += cur.as_bytes().len();
        if keep {
            kept.push(json_of_doc(cur));
        }
    }
    let ms = t.elapsed().as_secs_f64() * 1e3;
    Ok((ms, rows, bytes, kept))
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Warm-up (answers kept) + `runs` timed runs, fewer if the timed runs have used up
/// `budget` seconds (at least one; 0 = no budget). Errors are returned as text.
async fn measure(
    coll: &Collection<Document>,
    pipeline: &[Document],
    runs: usize,
    budget: f64,
) -> Result<Value, String> {
    let (_, rows, bytes, answers) = run_once(coll, pipeline, true)
        .await
        .map_err(|e| short(&e))?;
    let mut ts: Vec<f64> = Vec::with_capacity(runs);
    for _ in 0..runs {
        if budget > 0.0 && !ts.is_empty() && ts.iter().sum::<f64>() >= budget * 1e3 {
            break;
        }
        let (ms, n, _, _) = run_once(coll, pipeline, false)
            .await
            .map_err(|e| short(&e))?;
        if n != rows {
            return Err(format!("row count changed between runs: {rows} then {n}"));
        }
        ts.push(ms);
    }
    Ok(json!({
        "median_ms": median(&ts),
        "runs": ts.len(),
        "runs_ms": ts,
        "rows": rows,
        "bytes": bytes,
        "pipeline": Bson::Array(pipeline.iter().cloned().map(Bson::Document).collect()).into_relaxed_extjson(),
        "answers": answers,
    }))
}

/// Every value under a key named in `keys`, anywhere in `v`, with its path.
fn find_keys(v: &Value, path: &str, keys: &[&str], out: &mut Vec<Value>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if keys.contains(&k.as_str()) {
                    out.push(json!({"key": k, "path": p, "value": x}));
                }
                find_keys(x, &p, keys, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                find_keys(x, &format!("{path}.{i}"), keys, out);
            }
        }
        _ => {}
    }
}

/// Explain of `pipeline` in the two shapes MongoDB accepts; the keys of interest found in
/// each reply (or the error it gave).
async fn explain(db: &mongodb::Database, coll: &str, pipeline: &[Document]) -> Value {
    const KEYS: [&str; 5] = [
        "bucketsExamined",
        "bucketsPruned",
        "bucketsReturned",
        "totalDocsExamined",
        "nReturned",
    ];
    let forms = [
        (
            "aggregate+explain:true",
            doc! {"aggregate": coll, "pipeline": pipeline.to_vec(), "explain": true},
        ),
        (
            "explain{aggregate},executionStats",
            doc! {"explain": {"aggregate": coll, "pipeline": pipeline.to_vec(), "cursor": {}},
            "verbosity": "executionStats"},
        ),
    ];
    let mut out = Map::new();
    for (name, cmd) in forms {
        let v = match db.run_command(cmd).await {
            Ok(reply) => {
                let raw = match bson::RawDocumentBuf::from_document(&reply) {
                    Ok(r) => json_of_doc(&r),
                    Err(e) => json!({"$error": e.to_string()}),
                };
                let mut found = Vec::new();
                find_keys(&raw, "", &KEYS, &mut found);
                json!({"found": found})
            }
            Err(e) => json!({"error": short(&e)}),
        };
        out.insert(name.into(), v);
    }
    Value::Object(out)
}

#[tokio::main]
async fn main() {
    let a = parse_args();
    let mut opts = ClientOptions::parse(&a.uri).await.unwrap_or_else(|e| {
        eprintln!("bad --uri {}: {e}", a.uri);
        std::process::exit(2)
    });
    opts.app_name = Some("tsbs_query".into());
    let client = Client::with_options(opts).unwrap_or_else(|e| {
        eprintln!("client: {e}");
        std::process::exit(2)
    });
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
    if !up {
        eprintln!("server at {} did not answer ping", a.uri);
        std::process::exit(1)
    }
    let db = client.database(&a.db);
    let coll = db.collection::<Document>(&a.coll);
    match coll.estimated_document_count().await {
        Ok(0) => eprintln!("warning: {}.{} is empty", a.db, a.coll),
        Ok(n) => eprintln!("{}.{}: {n} documents", a.db, a.coll),
        Err(e) => eprintln!("{}.{}: count failed: {e}", a.db, a.coll),
    }
    let mut results = Map::new();
    if a.index {
        let pipeline = vec![doc! {"$match": {
            "tags.hostname": &a.host,
            "time": {"$gte": DateTime::from_millis(a.from), "$lt": DateTime::from_millis(a.to)},
        }}];
        let mut r = match measure(&coll, &pipeline, a.runs, a.budget).await {
            Ok(v) => v,
            Err(e) => json!({"error": e}),
        };
        eprintln!("index-eq: median_ms={} rows={}", r["median_ms"], r["rows"]);
        r["explain"] = explain(&db, &a.coll, &pipeline).await;
        results.insert("index-eq".into(), r);
    } else {
        let primary = tsbs_queries(a.trunc == TruncMode::Arith);
        let fallback = tsbs_queries(true);
        for ((name, pipeline), (_, arith)) in primary.into_iter().zip(fallback) {
            if a.only
                .as_ref()
                .is_some_and(|o| !o.iter().any(|x| x == name))
            {
                continue;
            }
            let form = if a.trunc == TruncMode::Arith && uses_date_trunc(&arith) {
                "arith"
            } else if uses_date_trunc(&pipeline) {
                "dateTrunc"
            } else {
                "plain"
            };
            let mut r = match measure(&coll, &pipeline, a.runs, a.budget).await {
                Ok(mut v) => {
                    v["form"] = json!(form);
                    v
                }
                Err(e) => {
                    eprintln!("{name}: error: {e}");
                    if a.trunc == TruncMode::Auto && uses_date_trunc(&pipeline) {
                        match measure(&coll, &arith, a.runs, a.budget).await {
                            Ok(mut v) => {
                                v["form"] = json!("arith");
                                v["dateTrunc_error"] = json!(e);
                                v
                            }
                            Err(e2) => json!({"error": e, "arith_error": e2, "form": form}),
                        }
                    } else {
                        json!({"error": e, "form": form})
                    }
                }
            };
            r["name"] = json!(name);
            eprintln!(
                "{name}: median_ms={} rows={} form={}",
                r["median_ms"], r["rows"], r["form"]
            );
            results.insert(name.into(), r);
        }
    }
    let out =
        json!({"collection": format!("{}.{}", a.db, a.coll), "runs": a.runs, "queries": results});
    if let Err(e) = std::fs::write(&a.out, out.to_string()) {
        eprintln!("write {}: {e}", a.out);
        std::process::exit(1)
    }
    client.shutdown().await;
}
