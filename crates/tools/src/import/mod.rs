//! `hourglass import`: reads documents from a file or standard input in one thread, sends
//! them in batches to `--numInsertionWorkers` writers over the wire protocol, and reports
//! each bad row by file and line while the rest goes on (unless `--stopOnError`).
//!
//! Readers by format: [`json`] (Extended JSON documents, one after another or in one
//! array), [`csv`] (CSV and TSV, typed columns in [`typed`]), [`lines`] (InfluxDB line
//! protocol) and [`parquet`]. [`time`] turns the time field into dates, [`write`] runs the
//! batches in each `--mode`.

mod csv;
mod json;
mod json_raw;
mod lines;
mod parquet;
pub(crate) mod time;
mod typed;
pub(crate) mod write;

use crate::cli::{ImportArgs, InputType, Mode};
use crate::connect;
use crate::progress::{Counting, Progress};
use anyhow::{anyhow, bail, Context};
use bson::{doc, Bson, Document, RawDocumentBuf};
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// One document read, with the line (row, for Parquet) it started on.
pub struct Row {
    pub line: usize,
    pub doc: RawDocumentBuf,
}

/// The item of a document read as a `Document`: its time field made a date, then encoded.
pub fn row_from_document(line: usize, mut doc: Document, time: Option<&time::TimeField>) -> Item {
    if let Some(t) = time {
        if let Err(reason) = t.convert(&mut doc) {
            return Item::Bad(RowError { line, reason });
        }
    }
    match RawDocumentBuf::from_document(&doc) {
        Ok(doc) => Item::Row(Row { line, doc }),
        Err(e) => Item::Bad(RowError {
            line,
            reason: e.to_string(),
        }),
    }
}

/// A row that could not be imported, and why.
#[derive(Debug)]
pub struct RowError {
    pub line: usize,
    pub reason: String,
}

/// What a reader yields: a document, a bad row (the rest goes on), or an error that ends the
/// input (unreadable file, a JSON array that is not well formed).
pub enum Item {
    Row(Row),
    Bad(RowError),
    Fatal(anyhow::Error),
}

/// A reader of one input format.
pub type Source = Box<dyn Iterator<Item = Item> + Send>;

/// Counts shared by the reader, the writers and the progress display.
#[derive(Default)]
pub struct Counters {
    pub imported: AtomicU64,
    pub failed: AtomicU64,
    pub bytes: Arc<AtomicU64>,
    pub stop: AtomicBool,
}

/// The outcome of an import, for the summary line and the exit status.
pub struct Summary {
    pub imported: u64,
    pub failed: u64,
    pub aborted: bool,
}

pub async fn run(mut args: ImportArgs) -> anyhow::Result<Summary> {
    if let Some(file) = args.conn.take_positional()? {
        if args.file.replace(file).is_some() {
            bail!("illegal argument combination: a positional file and --file");
        }
    }
    check_args(&args)?;
    let coll = collection_name(&args)?;
    let client = connect::client(&args.conn).await?;
    let db = client.database(&connect::database_name(&args.conn));
    if args.drop {
        db.run_command(doc! {"drop": &coll})
            .await
            .or_else(|e| if is_code(&e, 26) { Ok(doc! {}) } else { Err(e) })
            .with_context(|| format!("error dropping {coll}"))?;
    }
    let time = match &args.ts_time_field {
        Some(field) => {
            create_timeseries(&db, &coll, &args).await?;
            Some(Arc::new(time::TimeField::new(field, &args.time_format)?))
        }
        None if args.kind == InputType::Influx => {
            ensure_line_protocol_collection(&db, &coll).await?;
            None
        }
        None => None,
    };

    let counters = Arc::new(Counters::default());
    let (input, total_bytes, file_label) = open_input(&args, counters.bytes.clone())?;
    let source = open_source(&args, input, time)?;
    let progress = Progress::new(total_bytes, args.conn.quiet, "imported");
    let writer = Arc::new(write::Writer::new(db, coll, &args));
    let workers = if args.maintain_insertion_order {
        1
    } else {
        args.num_insertion_workers.max(1)
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<Row>>(workers * 2);
    let rx = Arc::new(tokio::sync::Mutex::new(rx));

    let report = {
        let progress = progress.clone();
        let label = file_label.clone();
        move |e: &RowError| progress.println(&format!("{label}:{}: {}", e.line, e.reason))
    };
    let reader = {
        let counters = counters.clone();
        let report = report.clone();
        let batch_size = args.batch_size.max(1);
        let stop_on_error = args.stop_on_error;
        std::thread::spawn(move || {
            read_batches(source, batch_size, stop_on_error, &counters, &report, &tx)
        })
    };
    let mut handles = Vec::new();
    for _ in 0..workers {
        let rx = rx.clone();
        let writer = writer.clone();
        let counters = counters.clone();
        let report = report.clone();
        let stop_on_error = args.stop_on_error;
        handles.push(tokio::spawn(async move {
            loop {
                let batch = { rx.lock().await.recv().await };
                let Some(batch) = batch else { return Ok(()) };
                if counters.stop.load(Ordering::Relaxed) {
                    continue;
                }
                let outcome = writer.write(batch).await;
                counters.imported.fetch_add(outcome.ok, Ordering::Relaxed);
                counters
                    .failed
                    .fetch_add(outcome.errors.len() as u64, Ordering::Relaxed);
                for e in &outcome.errors {
                    report(e);
                }
                if let Some(e) = outcome.fatal {
                    counters.stop.store(true, Ordering::Relaxed);
                    return Err(e);
                }
                if stop_on_error && !outcome.errors.is_empty() {
                    counters.stop.store(true, Ordering::Relaxed);
                }
            }
        }));
    }
    let ticker = {
        let c = counters.clone();
        progress.tick_from(move || {
            let rows = c.imported.load(Ordering::Relaxed) + c.failed.load(Ordering::Relaxed);
            (rows, c.bytes.load(Ordering::Relaxed))
        })
    };
    let mut fatal: Option<anyhow::Error> = None;
    for h in handles {
        if let Err(e) = h
            .await
            .map_err(|e| anyhow!("writer failed: {e}"))
            .and_then(|r| r)
        {
            fatal.get_or_insert(e);
        }
    }
    let read_result = reader
        .join()
        .map_err(|_| anyhow!("the reader thread panicked"))?;
    ticker.abort();
    if let Err(e) = read_result {
        fatal.get_or_insert(e);
    }
    let summary = Summary {
        imported: counters.imported.load(Ordering::Relaxed),
        failed: counters.failed.load(Ordering::Relaxed),
        aborted: counters.stop.load(Ordering::Relaxed),
    };
    progress.finish(
        &format!(
            "{} document(s) imported successfully. {} document(s) failed to import.",
            summary.imported, summary.failed
        ),
        summary.imported + summary.failed,
        Some(counters.bytes.load(Ordering::Relaxed)),
    );
    match fatal {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// Reads rows into batches until the input ends or a writer asks to stop.
fn read_batches(
    source: Source,
    batch_size: usize,
    stop_on_error: bool,
    counters: &Counters,
    report: &(impl Fn(&RowError) + Sync),
    tx: &tokio::sync::mpsc::Sender<Vec<Row>>,
) -> anyhow::Result<()> {
    // Batches also stop short of the 16 MB command limit.
    const BATCH_BYTES: usize = 8 << 20;
    let mut batch = Vec::with_capacity(batch_size);
    let mut bytes = 0usize;
    let bad = |e: RowError| {
        report(&e);
        counters.failed.fetch_add(1, Ordering::Relaxed);
        if stop_on_error {
            counters.stop.store(true, Ordering::Relaxed);
        }
    };
    for item in source {
        if counters.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let row = match item {
            Item::Row(r) => r,
            Item::Bad(e) => {
                bad(e);
                continue;
            }
            Item::Fatal(e) => return Err(e),
        };
        bytes += row.doc.as_bytes().len();
        batch.push(row);
        if batch.len() >= batch_size || bytes >= BATCH_BYTES {
            bytes = 0;
            let full = std::mem::replace(&mut batch, Vec::with_capacity(batch_size));
            if tx.blocking_send(full).is_err() {
                return Ok(());
            }
        }
    }
    if !batch.is_empty() && !counters.stop.load(Ordering::Relaxed) {
        let _ = tx.blocking_send(batch);
    }
    Ok(())
}

fn check_args(a: &ImportArgs) -> anyhow::Result<()> {
    let tabular = matches!(a.kind, InputType::Csv | InputType::Tsv);
    if a.json_array && a.kind != InputType::Json {
        bail!("cannot use --jsonArray except with --type json");
    }
    if !tabular && (a.headerline || a.fields.is_some() || a.field_file.is_some()) {
        bail!("--headerline, --fields and --fieldFile are for --type csv or tsv");
    }
    if tabular && !a.headerline && a.fields.is_none() && a.field_file.is_none() {
        bail!("must specify --fields, --fieldFile or --headerline to import this file type");
    }
    if a.headerline && (a.fields.is_some() || a.field_file.is_some()) {
        bail!("incompatible options: --fields or --fieldFile with --headerline");
    }
    if a.upsert_fields.is_some() && a.mode == Mode::Insert {
        bail!("--upsertFields needs --mode upsert, merge or delete");
    }
    if a.kind == InputType::Parquet && a.file.is_none() {
        bail!("--type parquet reads a --file");
    }
    if (a.ts_meta_field.is_some()
        || a.ts_granularity.is_some()
        || a.ts_expire_after_seconds.is_some())
        && a.ts_time_field.is_none()
    {
        bail!("the --timeseries- options need --timeseries-timeField");
    }
    Ok(())
}

/// `--collection`, else the input file's name without its extension.
fn collection_name(a: &ImportArgs) -> anyhow::Result<String> {
    if let Some(c) = &a.conn.collection {
        return Ok(c.clone());
    }
    a.file
        .as_ref()
        .and_then(|f| f.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            anyhow!("no collection specified (--collection, or a --file to name it after)")
        })
}

type Input = Box<dyn Read + Send>;

fn open_input(
    a: &ImportArgs,
    bytes: Arc<AtomicU64>,
) -> anyhow::Result<(Input, Option<u64>, String)> {
    match &a.file {
        Some(path) => {
            let f = std::fs::File::open(path)
                .with_context(|| format!("error opening file {}", path.display()))?;
            let len = f.metadata().ok().map(|m| m.len());
            Ok((
                Box::new(Counting::new(f, bytes)),
                len,
                path.display().to_string(),
            ))
        }
        None => Ok((
            Box::new(Counting::new(std::io::stdin(), bytes)),
            None,
            "(stdin)".to_string(),
        )),
    }
}

fn open_source(
    a: &ImportArgs,
    input: Input,
    time: Option<Arc<time::TimeField>>,
) -> anyhow::Result<Source> {
    Ok(match a.kind {
        InputType::Json => Box::new(json::JsonReader::new(
            input,
            a.json_array,
            time,
            a.mode == Mode::Insert,
        )),
        InputType::Csv | InputType::Tsv => Box::new(csv::CsvReader::new(input, a, time)?),
        InputType::Influx => Box::new(lines::LineReader::new(input, a)),
        InputType::Parquet => parquet::rows(a, time)?,
    })
}

/// Creates the time-series target; an existing collection must already be one with the
/// same timeField.
async fn create_timeseries(
    db: &mongodb::Database,
    coll: &str,
    a: &ImportArgs,
) -> anyhow::Result<()> {
    let Some(time_field) = &a.ts_time_field else {
        return Ok(());
    };
    let mut ts = doc! {"timeField": time_field};
    if let Some(m) = &a.ts_meta_field {
        ts.insert("metaField", m);
    }
    if let Some(g) = &a.ts_granularity {
        ts.insert("granularity", g);
    }
    let mut cmd = doc! {"create": coll, "timeseries": ts};
    if let Some(s) = a.ts_expire_after_seconds {
        cmd.insert("expireAfterSeconds", s);
    }
    match db.run_command(cmd).await {
        Ok(_) => Ok(()),
        Err(e) if is_code(&e, 48) => {
            let existing = timeseries_options(db, coll).await?;
            match existing.and_then(|o| o.get_str("timeField").ok().map(str::to_string)) {
                Some(t) if &t == time_field => Ok(()),
                Some(t) => bail!(
                    "{coll} is a time-series collection with timeField '{t}', not '{time_field}'"
                ),
                None => bail!(
                    "{coll} exists and is not a time-series collection (use --drop to replace it)"
                ),
            }
        }
        Err(e) => Err(e).with_context(|| format!("error creating time-series collection {coll}")),
    }
}

/// Line protocol goes into a time-series collection as the HTTP write path makes them
/// (timeField `time`, metaField `tags`) unless the collection exists.
async fn ensure_line_protocol_collection(db: &mongodb::Database, coll: &str) -> anyhow::Result<()> {
    let cmd = doc! {"create": coll, "timeseries": {"timeField": "time", "metaField": "tags"}};
    match db.run_command(cmd).await {
        Ok(_) => Ok(()),
        Err(e) if is_code(&e, 48) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("error creating time-series collection {coll}")),
    }
}

/// The `timeseries` options of `coll`, if it is a time-series collection.
pub async fn timeseries_options(
    db: &mongodb::Database,
    coll: &str,
) -> anyhow::Result<Option<Document>> {
    let reply = db
        .run_command(doc! {"listCollections": 1, "filter": {"name": coll}})
        .await?;
    let first = reply
        .get_document("cursor")
        .ok()
        .and_then(|c| c.get_array("firstBatch").ok())
        .and_then(|b| b.first())
        .and_then(Bson::as_document);
    Ok(first
        .and_then(|d| d.get_document("options").ok())
        .and_then(|o| o.get_document("timeseries").ok())
        .cloned())
}

pub fn is_code(e: &mongodb::error::Error, code: i32) -> bool {
    matches!(&*e.kind, mongodb::error::ErrorKind::Command(c) if c.code == code)
}
