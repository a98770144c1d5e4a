//! InfluxDB line protocol input, parsed by the same parser as the HTTP `/write` endpoint and
//! shaped as it shapes points: `{time: date, tags: {sorted tags}, field: value...}` (the
//! meta field is `--timeseries-metaField` when given), with a timestamp in `--precision`
//! and the time of import for a line without one. The input is read in chunks cut at line
//! ends.

use super::{row_from_document, Item, RowError};
use crate::cli::{ImportArgs, Precision};
use anyhow::anyhow;
use bson::{Bson, DateTime, Document};
use hourglass_http::line_protocol::{self, FieldValue};
use std::collections::VecDeque;
use std::io::Read;

const CHUNK: usize = 4 << 20;

pub struct LineReader<R> {
    input: R,
    /// Bytes read but not parsed yet (a line cut by the chunk's end).
    rest: Vec<u8>,
    /// Lines before `rest`.
    line_base: usize,
    ready: VecDeque<Item>,
    unit_ns: i64,
    time: String,
    meta: String,
    eof: bool,
}

impl<R: Read> LineReader<R> {
    pub fn new(input: R, a: &ImportArgs) -> LineReader<R> {
        LineReader {
            input,
            rest: Vec::new(),
            line_base: 0,
            ready: VecDeque::new(),
            unit_ns: match a.precision {
                Precision::Ns => 1,
                Precision::Us => 1_000,
                Precision::Ms => 1_000_000,
                Precision::S => 1_000_000_000,
            },
            time: a.ts_time_field.clone().unwrap_or_else(|| "time".into()),
            meta: a.ts_meta_field.clone().unwrap_or_else(|| "tags".into()),
            eof: false,
        }
    }

    /// Reads and parses the next chunk of whole lines into `ready`.
    fn refill(&mut self) -> Result<(), std::io::Error> {
        let start = self.rest.len();
        self.rest.resize(start + CHUNK, 0);
        let n = loop {
            match self.input.read(&mut self.rest[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        self.rest.truncate(start + n);
        if n == 0 {
            self.eof = true;
        }
        let cut = if self.eof {
            self.rest.len()
        } else {
            match self.rest.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => return Ok(()),
            }
        };
        let chunk: Vec<u8> = self.rest.drain(..cut).collect();
        let (points, errors) = line_protocol::parse(&chunk);
        let now = DateTime::now().timestamp_millis();
        let mut items: Vec<(usize, Item)> = Vec::with_capacity(points.len() + errors.len());
        for (line, p) in points {
            let line = self.line_base + line;
            items.push((line, self.to_item(line, p, now)));
        }
        for e in errors {
            let line = self.line_base + e.line;
            items.push((
                line,
                Item::Bad(RowError {
                    line,
                    reason: e.to_string(),
                }),
            ));
        }
        items.sort_by_key(|(l, _)| *l);
        self.ready.extend(items.into_iter().map(|(_, i)| i));
        self.line_base += chunk.iter().filter(|&&b| b == b'\n').count();
        Ok(())
    }

    fn to_item(&self, line: usize, p: line_protocol::Point, now_ms: i64) -> Item {
        let bad = |reason: String| Item::Bad(RowError { line, reason });
        // Below a millisecond the time goes to an `ns` field, as the HTTP write path keeps it.
        let (ms, sub_ms_ns) = match p.timestamp {
            None => (now_ms, 0),
            Some(t) => match t.checked_mul(self.unit_ns) {
                Some(ns) => (ns.div_euclid(1_000_000), ns.rem_euclid(1_000_000)),
                None => return bad("time outside range".into()),
            },
        };
        let mut doc = Document::new();
        doc.insert(self.time.clone(), DateTime::from_millis(ms));
        let mut tags = p.tags;
        if !tags.is_empty() {
            tags.sort_by(|a, b| a.0.cmp(&b.0));
            let mut meta = Document::new();
            for (k, v) in tags {
                meta.insert(k.into_owned(), v.into_owned());
            }
            doc.insert(self.meta.clone(), meta);
        }
        for (k, v) in p.fields {
            if k == self.time || k == self.meta || (k == "ns" && sub_ms_ns != 0) {
                return bad(format!(
                    "invalid field name \"{k}\": it holds the point's time or tags"
                ));
            }
            let v = match v {
                FieldValue::Float(f) => Bson::Double(f),
                FieldValue::Int(i) => Bson::Int64(i),
                FieldValue::UInt(u) => match i64::try_from(u) {
                    Ok(i) => Bson::Int64(i),
                    Err(_) => u
                        .to_string()
                        .parse()
                        .map_or(Bson::Double(u as f64), Bson::Decimal128),
                },
                FieldValue::Str(s) => Bson::String(s.into_owned()),
                FieldValue::Bool(b) => Bson::Boolean(b),
            };
            doc.insert(k.into_owned(), v);
        }
        if sub_ms_ns != 0 {
            doc.insert("ns", sub_ms_ns as i32);
        }
        row_from_document(line, doc, None)
    }
}

impl<R: Read> Iterator for LineReader<R> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(item);
            }
            if self.eof {
                return None;
            }
            if let Err(e) = self.refill() {
                self.eof = true;
                return Some(Item::Fatal(anyhow!("error reading input: {e}")));
            }
        }
    }
}
