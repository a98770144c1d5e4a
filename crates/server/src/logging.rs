//! Logging as mongod writes it: one structured JSON object per line,
//! `{"t":{"$date":…},"s":"I","c":"NETWORK","id":…,"ctx":…,"msg":…,"attr":{…}}`, to
//! standard output or `--logpath`, and the same lines into the in-memory ring that
//! `getLog` serves. No colour codes, terminal or not.
//!
//! - `s`: `F`/`E`/`W`/`I`, and `D1`/`D2` for debug/trace.
//! - `c`: the component, from the module that logged (`NETWORK`, `COMMAND`, `QUERY`,
//!   `STORAGE`, `INDEX`, `ACCESS`, `CONTROL`, ...).
//! - `id`: a `log_id` field when the event has one (e.g. 51803, "Slow query"), else a
//!   number stable for the logging statement.
//! - `ctx`: the thread's name.
//! - `attr`: the event's fields, numbers and booleans as JSON numbers and booleans; a
//!   field `attr_json` holding a JSON object is the whole `attr`.
//!
//! The storage engine's own messages (fjall, lsm-tree) are logged from warnings up unless
//! `-v` is given.

use hourglass_protocol::RecentLog;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Formats events as mongod's log lines, writes them out and keeps them for `getLog`.
struct MongoLog {
    out: Mutex<Box<dyn std::io::Write + Send>>,
    recent: Arc<RecentLog>,
}

#[derive(Default)]
struct Fields {
    msg: String,
    attrs: String,
    attr_json: Option<String>,
    id: Option<u64>,
}

impl Fields {
    fn key(&mut self, field: &Field) {
        if !self.attrs.is_empty() {
            self.attrs.push(',');
        }
        self.attrs.push_str(&json_str(field.name()));
        self.attrs.push(':');
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.msg = value.to_string(),
            "attr_json" => self.attr_json = Some(value.to_string()),
            _ => {
                self.key(field);
                self.attrs.push_str(&json_str(value));
            }
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        let _ = write!(self.attrs, "{value}");
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "log_id" {
            self.id = Some(value);
            return;
        }
        self.key(field);
        let _ = write!(self.attrs, "{value}");
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        if value.is_finite() {
            let _ = write!(self.attrs, "{value}");
        } else {
            self.attrs.push_str(&json_str(&value.to_string()));
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        let _ = write!(self.attrs, "{value}");
    }
}

/// `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// mongod's component for a module path.
fn component(target: &str) -> &'static str {
    const BY_PREFIX: &[(&str, &str)] = &[
        ("hourglass_protocol::connection", "NETWORK"),
        ("hourglass_protocol::wire", "NETWORK"),
        ("hourglass_protocol::ttl", "INDEX"),
        ("hourglass_protocol::access", "ACCESS"),
        ("hourglass_protocol::commands::sasl", "ACCESS"),
        ("hourglass_protocol", "COMMAND"),
        ("hourglass_auth", "ACCESS"),
        ("hourglass_http", "NETWORK"),
        ("hourglass_query", "QUERY"),
        ("hourglass_catalog::index", "INDEX"),
        ("hourglass_catalog", "STORAGE"),
        ("hourglass_storage", "STORAGE"),
        ("hourglass_timeseries", "STORAGE"),
        ("fjall", "STORAGE"),
        ("lsm_tree", "STORAGE"),
        ("hourglass", "CONTROL"),
    ];
    BY_PREFIX
        .iter()
        .find(|(p, _)| target.starts_with(p))
        .map_or("-", |(_, c)| c)
}

/// A number for a logging statement, stable from run to run of one build.
fn statement_id(meta: &tracing::Metadata<'_>) -> u64 {
    // FNV-1a over the statement's file and line.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let line = meta.line().unwrap_or(0).to_le_bytes();
    for b in meta.file().unwrap_or("").bytes().chain(line) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    10_000_000 + h % 90_000_000
}

/// The time as mongod writes it: `2026-11-25T15:04:05.123+00:00`.
fn timestamp() -> String {
    let t = bson::DateTime::now()
        .try_to_rfc3339_string()
        .unwrap_or_default();
    let base = t.strip_suffix('Z').unwrap_or(&t);
    let (secs, frac) = base.split_once('.').unwrap_or((base, ""));
    format!("{secs}.{:0<3.3}+00:00", frac)
}

impl<S: tracing::Subscriber> Layer<S> for MongoLog {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut f = Fields::default();
        event.record(&mut f);
        let severity = match *meta.level() {
            tracing::Level::ERROR => "E",
            tracing::Level::WARN => "W",
            tracing::Level::INFO => "I",
            tracing::Level::DEBUG => "D1",
            tracing::Level::TRACE => "D2",
        };
        let thread = std::thread::current();
        let attr = f.attr_json.unwrap_or_else(|| format!("{{{}}}", f.attrs));
        let line = format!(
            "{{\"t\":{{\"$date\":\"{}\"}},\"s\":\"{severity}\",\"c\":\"{}\",\"id\":{},\"ctx\":{},\"msg\":{},\"attr\":{attr}}}",
            timestamp(),
            component(meta.target()),
            f.id.unwrap_or_else(|| statement_id(meta)),
            json_str(thread.name().unwrap_or("-")),
            json_str(&f.msg),
        );
        if let Ok(mut out) = self.out.lock() {
            // A log that cannot be written (a full disk) must not stop the server.
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
        self.recent.push(line);
    }
}

/// Installs the global subscriber: warnings and slow operations only when `quiet`, debug
/// from `-v`, trace from `-vvv`. An existing `logpath` is renamed aside (`<path>.<UTC time>`, as mongod's default
/// `logRotate: rename`) unless `append`.
pub fn init(
    quiet: bool,
    verbosity: u8,
    logpath: Option<&Path>,
    append: bool,
    recent: Arc<RecentLog>,
) -> anyhow::Result<()> {
    let default = match (quiet, verbosity) {
        // Slow operations are logged even when quiet, as mongod does.
        (true, _) => "warn,hourglass_protocol::profiler=info",
        (false, 0) => "info,fjall=warn,lsm_tree=warn",
        (false, 1 | 2) => "debug",
        (false, _) => "trace",
    };
    if let Some(p) = logpath.filter(|p| !append && p.exists()) {
        let stamp = chrono_free_stamp();
        let aside = format!("{}.{stamp}", p.display());
        std::fs::rename(p, &aside).map_err(|e| {
            anyhow::anyhow!("cannot rename the old log {} to {aside}: {e}", p.display())
        })?;
    }
    let out: Box<dyn std::io::Write + Send> = match logpath {
        Some(p) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| anyhow::anyhow!("cannot open --logpath {}: {e}", p.display()))?,
        ),
        None => Box::new(std::io::stdout()),
    };
    let filter =
        EnvFilter::try_from_env("HOURGLASS_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let layer = MongoLog {
        out: Mutex::new(out),
        recent,
    };
    tracing_subscriber::registry()
        .with(layer.with_filter(filter))
        .try_init()?;
    Ok(())
}

/// The current UTC time as mongod names rotated logs: `2026-11-25T15-04-05`.
fn chrono_free_stamp() -> String {
    let ms = bson::DateTime::now().timestamp_millis();
    bson::DateTime::from_millis(ms - ms.rem_euclid(1000))
        .try_to_rfc3339_string()
        .unwrap_or_default()
        .trim_end_matches('Z')
        .replace(':', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_map_to_mongods_components() {
        assert_eq!(component("hourglass_protocol::connection"), "NETWORK");
        assert_eq!(component("hourglass_protocol::commands::find"), "COMMAND");
        assert_eq!(component("hourglass_protocol::ttl"), "INDEX");
        assert_eq!(component("fjall::journal"), "STORAGE");
        assert_eq!(component("hourglass"), "CONTROL");
        assert_eq!(component("hyper::proto"), "-");
    }

    #[test]
    fn timestamps_carry_milliseconds_and_a_utc_offset() {
        let t = timestamp();
        assert!(t.ends_with("+00:00") && t.len() == 29, "{t}");
    }
}
