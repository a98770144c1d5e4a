//! `hourglass export`: a collection's documents (filtered, projected, sorted, skipped and
//! limited as mongoexport does) as Extended JSON (one per line or one array), CSV of
//! `--fields`, or Parquet. Parquet flattens nested documents into dotted columns, puts a
//! time-series collection's time field and meta columns first, and types each column from
//! all the values it holds (a first pass over the same query learns them).

use crate::cli::{field_list, ExportArgs, JsonFormat, OutputType};
use crate::connect;
use crate::import::{timeseries_options, write::lookup};
use crate::progress::Progress;
use anyhow::{anyhow, bail, Context};
use bson::{Bson, Document};
use futures::TryStreamExt;
use hourglass_archive::columnar::Columns;
use mongodb::options::FindOptions;
use mongodb::Collection;
use std::io::Write;

pub async fn run(mut a: ExportArgs) -> anyhow::Result<u64> {
    if let Some(extra) = a.conn.take_positional()? {
        bail!(
            "unexpected argument {}: export takes a connection string only",
            extra.display()
        );
    }
    let coll_name = a
        .conn
        .collection
        .clone()
        .ok_or_else(|| anyhow!("must specify a collection (--collection)"))?;
    let fields = field_list(&a.fields, &a.field_file)?;
    if a.kind == OutputType::Csv && fields.is_none() {
        bail!("CSV mode requires a field list (--fields or --fieldFile)");
    }
    if a.kind == OutputType::Parquet && a.out.is_none() {
        bail!("--type parquet writes to a file (--out)");
    }
    if a.json_array && a.kind != OutputType::Json {
        bail!("--jsonArray is for --type json");
    }
    let filter = parse_json_doc(a.query.as_deref(), "--query")?;
    let sort = a
        .sort
        .as_deref()
        .map(|s| parse_json_doc(Some(s), "--sort"))
        .transpose()?;
    let client = connect::client(&a.conn).await?;
    let db = client.database(&connect::database_name(&a.conn));
    let coll: Collection<Document> = db.collection(&coll_name);
    let options = FindOptions::builder()
        .sort(sort)
        .skip(a.skip)
        .limit(a.limit)
        .projection(fields.as_deref().map(projection))
        .build();
    let total = coll.count_documents(filter.clone()).await.ok();
    let progress = Progress::new_rows(total, a.conn.quiet, "exported");

    let written = match a.kind {
        OutputType::Parquet => {
            let ts = timeseries_options(&db, &coll_name).await?;
            let mut columns = match &fields {
                Some(f) => Columns::fixed(f),
                None => Columns::default(),
            };
            let mut cursor = coll
                .find(filter.clone())
                .with_options(options.clone())
                .await?;
            while let Some(d) = cursor.try_next().await? {
                columns.learn(&d);
            }
            if let Some(ts) = &ts {
                let first: Vec<&str> = ["timeField", "metaField"]
                    .iter()
                    .filter_map(|k| ts.get_str(k).ok())
                    .collect();
                columns.put_first(&first);
            }
            let cursor = coll.find(filter).with_options(options).await?;
            write_parquet(cursor, &columns, &a, &progress).await?
        }
        _ => {
            let cursor = coll.find(filter).with_options(options).await?;
            let out: Box<dyn Write + Send> = match &a.out {
                Some(p) => Box::new(
                    std::fs::File::create(p)
                        .with_context(|| format!("error creating {}", p.display()))?,
                ),
                None => Box::new(std::io::stdout()),
            };
            let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
            let n = if a.kind == OutputType::Csv {
                write_csv(
                    cursor,
                    fields.as_deref().unwrap_or(&[]),
                    &a,
                    &mut out,
                    &progress,
                )
                .await?
            } else {
                write_json(cursor, &a, &mut out, &progress).await?
            };
            out.flush()?;
            n
        }
    };
    progress.finish(&format!("exported {written} record(s)"), written, None);
    Ok(written)
}

fn parse_json_doc(text: Option<&str>, flag: &str) -> anyhow::Result<Document> {
    let Some(text) = text else {
        return Ok(Document::new());
    };
    let value: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("error parsing {flag} as JSON"))?;
    match Bson::try_from(value).with_context(|| format!("error parsing {flag} as Extended JSON"))? {
        Bson::Document(d) => Ok(d),
        _ => bail!("{flag} must be a JSON object"),
    }
}

fn projection(fields: &[String]) -> Document {
    let mut p: Document = fields.iter().map(|f| (f.clone(), Bson::Int32(1))).collect();
    if !fields.iter().any(|f| f == "_id") {
        p.insert("_id", 1);
    }
    p
}

fn extjson(d: Document, format: JsonFormat) -> serde_json::Value {
    match format {
        JsonFormat::Relaxed => Bson::Document(d).into_relaxed_extjson(),
        JsonFormat::Canonical => Bson::Document(d).into_canonical_extjson(),
    }
}

async fn write_json(
    mut cursor: mongodb::Cursor<Document>,
    a: &ExportArgs,
    out: &mut impl Write,
    progress: &Progress,
) -> anyhow::Result<u64> {
    let mut n = 0u64;
    if a.json_array {
        out.write_all(b"[")?;
    }
    while let Some(d) = cursor.try_next().await? {
        if a.json_array && n > 0 {
            out.write_all(b",")?;
        }
        let v = extjson(d, a.json_format);
        if a.pretty {
            serde_json::to_writer_pretty(&mut *out, &v)?;
        } else {
            serde_json::to_writer(&mut *out, &v)?;
        }
        if !a.json_array {
            out.write_all(b"\n")?;
        }
        n += 1;
        if n.is_multiple_of(1024) {
            progress.set(n, n);
        }
    }
    if a.json_array {
        out.write_all(b"]\n")?;
    }
    Ok(n)
}

/// A value as mongoexport writes it in CSV: text as is, dates in ISO 8601 with milliseconds, ObjectIds as
/// `ObjectId(hex)`, documents and arrays as Extended JSON, null and missing as empty.
fn csv_cell(v: Option<&Bson>, format: JsonFormat) -> String {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => String::new(),
        Some(Bson::String(s)) => s.clone(),
        Some(Bson::Int32(i)) => i.to_string(),
        Some(Bson::Int64(i)) => i.to_string(),
        Some(Bson::Double(d)) => d.to_string(),
        Some(Bson::Boolean(b)) => b.to_string(),
        // As mongoexport writes dates: always three decimals of seconds.
        Some(Bson::DateTime(t)) => chrono::DateTime::from_timestamp_millis(t.timestamp_millis())
            .map(|d| d.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
            .unwrap_or_else(|| t.timestamp_millis().to_string()),
        Some(Bson::ObjectId(o)) => format!("ObjectId({o})"),
        Some(Bson::Decimal128(d)) => d.to_string(),
        Some(other) => match format {
            JsonFormat::Relaxed => other.clone().into_relaxed_extjson().to_string(),
            JsonFormat::Canonical => other.clone().into_canonical_extjson().to_string(),
        },
    }
}

async fn write_csv(
    mut cursor: mongodb::Cursor<Document>,
    fields: &[String],
    a: &ExportArgs,
    out: &mut impl Write,
    progress: &Progress,
) -> anyhow::Result<u64> {
    let mut w = csv::Writer::from_writer(out);
    if !a.no_header_line {
        w.write_record(fields)?;
    }
    let mut n = 0u64;
    while let Some(d) = cursor.try_next().await? {
        w.write_record(
            fields
                .iter()
                .map(|f| csv_cell(lookup(&d, f), a.json_format)),
        )?;
        n += 1;
        if n.is_multiple_of(1024) {
            progress.set(n, n);
        }
    }
    w.flush()?;
    Ok(n)
}

async fn write_parquet(
    mut cursor: mongodb::Cursor<Document>,
    columns: &Columns,
    a: &ExportArgs,
    progress: &Progress,
) -> anyhow::Result<u64> {
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    const ROWS: usize = 8192;
    let path = a
        .out
        .as_ref()
        .ok_or_else(|| anyhow!("--type parquet writes to a file (--out)"))?;
    let file = std::fs::File::create(path)
        .with_context(|| format!("error creating {}", path.display()))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut writer = ArrowWriter::try_new(file, columns.schema(), Some(props))?;
    let mut docs = Vec::with_capacity(ROWS);
    let mut n = 0u64;
    loop {
        let next = cursor.try_next().await?;
        let end = next.is_none();
        if let Some(d) = next {
            docs.push(d);
        }
        if docs.len() >= ROWS || (end && !docs.is_empty()) {
            writer.write(&columns.batch(&docs)?)?;
            n += docs.len() as u64;
            docs.clear();
            progress.set(n, n);
        }
        if end {
            break;
        }
    }
    writer.close()?;
    Ok(n)
}
