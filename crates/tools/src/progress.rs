//! Progress of an import or export: on a terminal an `indicatif` bar with rows, rows/s,
//! bytes and the time left; otherwise nothing until one summary line at the end.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A reader that counts the bytes read through it.
pub struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R> Counting<R> {
    pub fn new(inner: R, count: Arc<AtomicU64>) -> Counting<R> {
        Counting { inner, count }
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

#[derive(Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    quiet: bool,
    verb: &'static str,
}

impl Progress {
    /// A bar when standard error is a terminal (and not `--quiet`); `total_bytes` gives
    /// it a length and an ETA. `verb` names what happens to rows ("imported").
    pub fn new(total_bytes: Option<u64>, quiet: bool, verb: &'static str) -> Progress {
        let template = if total_bytes.is_some() {
            "[{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg} ETA {eta}"
        } else {
            "[{elapsed_precise}] {spinner} {bytes} {msg}"
        };
        Progress::with_template(total_bytes, quiet, verb, template)
    }

    /// A bar that counts rows (of `total_rows` when known) instead of bytes.
    pub fn new_rows(total_rows: Option<u64>, quiet: bool, verb: &'static str) -> Progress {
        let template = if total_rows.is_some() {
            "[{elapsed_precise}] {wide_bar} {pos}/{len} {msg} ETA {eta}"
        } else {
            "[{elapsed_precise}] {spinner} {msg}"
        };
        Progress::with_template(total_rows, quiet, verb, template)
    }

    fn with_template(
        total: Option<u64>,
        quiet: bool,
        verb: &'static str,
        template: &str,
    ) -> Progress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = match total {
                Some(n) => ProgressBar::new(n),
                None => ProgressBar::no_length(),
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
            bar
        });
        Progress {
            bar,
            started: Instant::now(),
            quiet,
            verb,
        }
    }

    /// Prints a line (a bad row's report) above the bar.
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Sets the rows and bytes done so far.
    pub fn set(&self, rows: u64, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(bytes);
            let secs = self.started.elapsed().as_secs_f64().max(1e-3);
            bar.set_message(format!(
                "{rows} rows {}, {:.0} rows/s",
                self.verb,
                rows as f64 / secs
            ));
        }
    }

    /// Refreshes the bar every 250 ms from `done` (rows, bytes) until aborted.
    pub fn tick_from(
        &self,
        done: impl Fn() -> (u64, u64) + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let (rows, bytes) = done();
                me.set(rows, bytes);
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    }

    /// Ends the bar and prints `summary` with the bytes, time and rate, as one line.
    pub fn finish(&self, summary: &str, rows: u64, bytes: Option<u64>) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.quiet {
            return;
        }
        let secs = self.started.elapsed().as_secs_f64();
        let bytes = bytes.map(|b| format!(", {b} bytes")).unwrap_or_default();
        eprintln!(
            "{summary} ({rows} rows{bytes} in {secs:.2} s, {:.0} rows/s)",
            rows as f64 / secs.max(1e-3)
        );
    }
}
