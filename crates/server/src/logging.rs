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

/// Installs the global subscriber.
pub fn init(quiet: bool, logpath: Option<&Path>, recent: Arc<RecentLog>) -> anyhow::Result<()> {
    let default = if quiet { "warn" } else { "info" };
    let filter =
        || EnvFilter::try_from_env("HOURGLASS_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let recent_layer = RecentLogLayer(recent).with_filter(filter());
    let registry = tracing_subscriber::registry().with(recent_layer);
    match logpath {
        Some(p) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?;
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
