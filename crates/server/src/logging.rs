//! Logging: `tracing` to stdout or `--logpath`, and a copy of every line into the
//! in-memory ring buffer that `getLog` serves, formatted as MongoDB's JSON log lines.

use hourglass_protocol::RecentLog;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Copies events into [`RecentLog`].
struct RecentLogLayer(Arc<RecentLog>);

#[derive(Default)]
struct Fields {
    msg: String,
    attrs: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.msg = format!("{value:?}");
        } else {
            if !self.attrs.is_empty() {
                self.attrs.push(',');
            }
            let v = format!("{value:?}");
            let _ = write!(
                self.attrs,
                "{}:{}",
                json_str(field.name()),
                json_str(v.trim_matches('"'))
            );
        }
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

impl<S: tracing::Subscriber> Layer<S> for RecentLogLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        let severity = match *event.metadata().level() {
            tracing::Level::ERROR => "E",
            tracing::Level::WARN => "W",
            _ => "I",
        };
        let t = bson::DateTime::now()
            .try_to_rfc3339_string()
            .unwrap_or_default();
        self.0.push(format!(
            "{{\"t\":{{\"$date\":\"{t}\"}},\"s\":\"{severity}\",\"c\":{},\"msg\":{},\"attr\":{{{}}}}}",
            json_str(event.metadata().target()),
            json_str(&f.msg),
            f.attrs
        ));
    }
}

/// Installs the global subscriber: warnings only when `quiet`, debug from `-v`, trace from
/// `-vvv`. An existing `logpath` is renamed aside (`<path>.<UTC time>`, as mongod's default
/// `logRotate: rename`) unless `append`.
pub fn init(
    quiet: bool,
    verbosity: u8,
    logpath: Option<&Path>,
    append: bool,
    recent: Arc<RecentLog>,
) -> anyhow::Result<()> {
    let default = match (quiet, verbosity) {
        (true, _) => "warn",
        (false, 0) => "info",
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
    let filter =
        || EnvFilter::try_from_env("HOURGLASS_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let recent_layer = RecentLogLayer(recent).with_filter(filter());
    let registry = tracing_subscriber::registry().with(recent_layer);
    match logpath {
        Some(p) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| anyhow::anyhow!("cannot open --logpath {}: {e}", p.display()))?;
            registry
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_ansi(false)
                        .with_writer(std::sync::Mutex::new(file))
                        .with_filter(filter()),
                )
                .try_init()?;
        }
        None => {
            registry
                .with(tracing_subscriber::fmt::layer().with_filter(filter()))
                .try_init()?;
        }
    }
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
