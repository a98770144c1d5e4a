//! The command lines of `hourglass import` and `hourglass export`: mongoimport's and
//! mongoexport's flags (same names, same defaults), plus the time-series and Parquet options
//! those tools do not have.

use clap::{Args, Parser, ValueEnum};
use std::path::PathBuf;

/// Where the server is and who connects.
#[derive(Args, Debug, Clone)]
pub struct Connection {
    /// MongoDB connection string; wins over --host and --port.
    #[arg(long, help_heading = "Connection options")]
    pub uri: Option<String>,
    /// Server to connect to, as host or host:port.
    #[arg(
        long,
        short = 'h',
        default_value = "127.0.0.1",
        help_heading = "Connection options"
    )]
    pub host: String,
    /// Server port (when --host has none).
    #[arg(long, default_value_t = 27017, help_heading = "Connection options")]
    pub port: u16,
    /// User name to authenticate as.
    #[arg(long, short = 'u', help_heading = "Authentication options")]
    pub username: Option<String>,
    /// Password of --username.
    #[arg(long, short = 'p', help_heading = "Authentication options")]
    pub password: Option<String>,
    /// Database that holds the user's credentials [default: admin].
    #[arg(
        long = "authenticationDatabase",
        help_heading = "Authentication options"
    )]
    pub authentication_database: Option<String>,
    /// Database to use [default: test].
    #[arg(long, short = 'd', help_heading = "Namespace options")]
    pub db: Option<String>,
    /// Collection to use [import default: the input file's name without its extension].
    #[arg(long, short = 'c', help_heading = "Namespace options")]
    pub collection: Option<String>,
    /// Print help (-h is --host, as in mongoimport).
    #[arg(long, action = clap::ArgAction::Help, help_heading = "General options")]
    pub help: Option<bool>,
    /// Print only errors (no progress, no summary).
    #[arg(long, help_heading = "Verbosity options")]
    pub quiet: bool,
    /// As mongoimport/mongoexport take them: a connection string (mongodb://...) and,
    /// for import, the file to read.
    #[arg(value_name = "URI_OR_FILE", num_args = 0..=2)]
    pub positional: Vec<String>,
}

impl Connection {
    /// Moves the positional arguments where they belong: a `mongodb://` or
    /// `mongodb+srv://` string to `--uri`, anything else to the returned file.
    pub fn take_positional(&mut self) -> anyhow::Result<Option<PathBuf>> {
        let mut file = None;
        for p in std::mem::take(&mut self.positional) {
            if p.starts_with("mongodb://") || p.starts_with("mongodb+srv://") {
                if self.uri.is_some() {
                    anyhow::bail!("illegal argument combination: a connection string given twice");
                }
                self.uri = Some(p);
            } else if file.replace(PathBuf::from(&p)).is_some() {
                anyhow::bail!("too many positional arguments: {p}");
            }
        }
        Ok(file)
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputType {
    Json,
    Csv,
    Tsv,
    /// InfluxDB line protocol.
    #[value(alias = "lineprotocol", alias = "lines")]
    Influx,
    Parquet,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Insert,
    Upsert,
    Merge,
    Delete,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "camelCase")]
pub enum ParseGrace {
    AutoCast,
    SkipField,
    SkipRow,
    Stop,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Ns,
    Us,
    Ms,
    S,
}

/// Imports documents from a file or standard input (mongoimport's flags).
#[derive(Parser, Debug)]
#[command(
    name = "hourglass import",
    bin_name = "hourglass import",
    version,
    disable_help_flag = true
)]
pub struct ImportArgs {
    #[command(flatten)]
    pub conn: Connection,
    /// File to import; standard input when not given.
    #[arg(long, help_heading = "Input options")]
    pub file: Option<PathBuf>,
    /// Input format.
    #[arg(
        long = "type",
        value_enum,
        default_value = "json",
        help_heading = "Input options"
    )]
    pub kind: InputType,
    /// The JSON input is one array of documents.
    #[arg(long = "jsonArray", help_heading = "Input options")]
    pub json_array: bool,
    /// The first CSV/TSV line names the fields.
    #[arg(long, help_heading = "Input options")]
    pub headerline: bool,
    /// Comma-separated field names for CSV/TSV (dotted names make nested documents).
    #[arg(long, short = 'f', help_heading = "Input options")]
    pub fields: Option<String>,
    /// File with one CSV/TSV field name per line.
    #[arg(long = "fieldFile", help_heading = "Input options")]
    pub field_file: Option<PathBuf>,
    /// CSV/TSV field names carry a type: `name.int32()`, `when.date_go(2006-01-02)`.
    #[arg(long = "columnsHaveTypes", help_heading = "Input options")]
    pub columns_have_types: bool,
    /// What a value that does not parse as its column's type does.
    #[arg(
        long = "parseGrace",
        value_enum,
        default_value = "stop",
        help_heading = "Input options"
    )]
    pub parse_grace: ParseGrace,
    /// Leave out empty CSV/TSV values instead of importing empty strings.
    #[arg(long = "ignoreBlanks", help_heading = "Ingest options")]
    pub ignore_blanks: bool,
    /// Line protocol timestamps' unit.
    #[arg(long, value_enum, default_value = "ns", help_heading = "Input options")]
    pub precision: Precision,
    /// Drop the collection before importing.
    #[arg(long, help_heading = "Ingest options")]
    pub drop: bool,
    /// insert, upsert (replace the document matching --upsertFields), merge (set the
    /// document's fields on it) or delete (delete it).
    #[arg(
        long,
        value_enum,
        default_value = "insert",
        help_heading = "Ingest options"
    )]
    pub mode: Mode,
    /// Comma-separated fields that find the document for upsert, merge and delete [default: _id].
    #[arg(long = "upsertFields", help_heading = "Ingest options")]
    pub upsert_fields: Option<String>,
    /// Stop at the first document that fails.
    #[arg(long = "stopOnError", help_heading = "Ingest options")]
    pub stop_on_error: bool,
    /// Insert in input order (one worker, ordered batches).
    #[arg(long = "maintainInsertionOrder", help_heading = "Ingest options")]
    pub maintain_insertion_order: bool,
    /// Batches written at once.
    #[arg(
        long = "numInsertionWorkers",
        short = 'j',
        default_value_t = 1,
        help_heading = "Ingest options"
    )]
    pub num_insertion_workers: usize,
    /// Documents per batch.
    #[arg(
        long = "batchSize",
        default_value_t = 1000,
        help_heading = "Ingest options"
    )]
    pub batch_size: usize,
    /// Create the target as a time-series collection with this timeField, and turn that
    /// field's values into dates (see --timeFormat).
    #[arg(long = "timeseries-timeField", help_heading = "Time-series options")]
    pub ts_time_field: Option<String>,
    /// The time-series collection's metaField.
    #[arg(long = "timeseries-metaField", help_heading = "Time-series options")]
    pub ts_meta_field: Option<String>,
    /// The time-series collection's granularity: seconds, minutes or hours.
    #[arg(long = "timeseries-granularity", help_heading = "Time-series options")]
    pub ts_granularity: Option<String>,
    /// The time-series collection's expireAfterSeconds.
    #[arg(
        long = "timeseries-expireAfterSeconds",
        help_heading = "Time-series options"
    )]
    pub ts_expire_after_seconds: Option<i64>,
    /// How the time field is written: auto (RFC 3339 text, or epoch numbers whose unit is
    /// told by their size), rfc3339, epoch_s, epoch_ms, epoch_us, epoch_ns, or a strftime
    /// format such as "%Y-%m-%d %H:%M:%S" (read as UTC unless it has an offset).
    #[arg(
        long = "timeFormat",
        default_value = "auto",
        help_heading = "Time-series options"
    )]
    pub time_format: String,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputType {
    Json,
    Csv,
    Parquet,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonFormat {
    Relaxed,
    Canonical,
}

/// Exports a collection's documents (mongoexport's flags).
#[derive(Parser, Debug)]
#[command(
    name = "hourglass export",
    bin_name = "hourglass export",
    version,
    disable_help_flag = true
)]
pub struct ExportArgs {
    #[command(flatten)]
    pub conn: Connection,
    /// Output file; standard output when not given (required for --type parquet).
    #[arg(long, short = 'o', help_heading = "Output options")]
    pub out: Option<PathBuf>,
    /// Output format.
    #[arg(
        long = "type",
        value_enum,
        default_value = "json",
        help_heading = "Output options"
    )]
    pub kind: OutputType,
    /// Extended JSON flavour.
    #[arg(
        long = "jsonFormat",
        value_enum,
        default_value = "relaxed",
        help_heading = "Output options"
    )]
    pub json_format: JsonFormat,
    /// Write one JSON array instead of one document per line.
    #[arg(long = "jsonArray", help_heading = "Output options")]
    pub json_array: bool,
    /// Indent the JSON output.
    #[arg(long, help_heading = "Output options")]
    pub pretty: bool,
    /// Leave out the CSV header line.
    #[arg(long = "noHeaderLine", help_heading = "Output options")]
    pub no_header_line: bool,
    /// Comma-separated fields to export (required for CSV).
    #[arg(long, short = 'f', help_heading = "Query options")]
    pub fields: Option<String>,
    /// File with one field name per line.
    #[arg(long = "fieldFile", help_heading = "Query options")]
    pub field_file: Option<PathBuf>,
    /// Filter, as Extended JSON.
    #[arg(long, short = 'q', help_heading = "Query options")]
    pub query: Option<String>,
    /// Sort order, as Extended JSON.
    #[arg(long, help_heading = "Query options")]
    pub sort: Option<String>,
    /// Documents to skip.
    #[arg(long, help_heading = "Query options")]
    pub skip: Option<u64>,
    /// Most documents to export.
    #[arg(long, help_heading = "Query options")]
    pub limit: Option<i64>,
}

/// Comma-separated names from `--fields`, else one per line from `--fieldFile`.
pub fn field_list(
    fields: &Option<String>,
    file: &Option<PathBuf>,
) -> anyhow::Result<Option<Vec<String>>> {
    if let Some(f) = fields {
        return Ok(Some(
            f.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        ));
    }
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("error reading field file {}: {e}", path.display()))?;
        return Ok(Some(
            text.lines()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        ));
    }
    Ok(None)
}
