//! Extended JSON input (v2, canonical or relaxed, as `bson` reads it): documents one after
//! another (NDJSON or any white space between them), or one array of them with
//! `--jsonArray`. The input is read in chunks, so a file of any size streams; each document
//! is reported by the line it starts on.

use super::json_raw::RawRow;
use super::time::TimeField;
use super::{Item, Row, RowError};
use anyhow::anyhow;
use bson::{Bson, RawBson, RawBsonRef, RawDocumentBuf};
use std::io::Read;
use std::sync::Arc;

const CHUNK: usize = 1 << 20;

pub struct JsonReader<R> {
    input: R,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// The line `pos` is on (1-based).
    line: usize,
    array: bool,
    /// `--jsonArray`: the opening `[` was read / the closing `]` was.
    opened: bool,
    closed: bool,
    failed: bool,
    time: Option<Arc<TimeField>>,
    add_ids: bool,
}

impl<R: Read> JsonReader<R> {
    /// `add_ids`: give a row without `_id` a new ObjectId (inserts; other modes match
    /// documents by their fields and must not carry a made-up `_id`).
    pub fn new(
        input: R,
        array: bool,
        time: Option<Arc<TimeField>>,
        add_ids: bool,
    ) -> JsonReader<R> {
        JsonReader {
            input,
            buf: Vec::with_capacity(CHUNK),
            pos: 0,
            eof: false,
            line: 1,
            array,
            opened: false,
            closed: false,
            failed: false,
            time,
            add_ids,
        }
    }

    /// Reads more input after what is left; false at the end.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        self.buf.drain(..self.pos);
        self.pos = 0;
        let start = self.buf.len();
        self.buf.resize(start + CHUNK, 0);
        let n = loop {
            match self.input.read(&mut self.buf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(start);
                    return Err(e);
                }
            }
        };
        self.buf.truncate(start + n);
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// Moves past `n` bytes, counting their lines.
    fn advance(&mut self, n: usize) {
        let end = (self.pos + n).min(self.buf.len());
        self.line += self.buf[self.pos..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.pos = end;
    }

    /// Skips white space (and, in an array, one separator); the next byte, if any.
    fn skip_space(&mut self) -> std::io::Result<Option<u8>> {
        loop {
            while self.pos < self.buf.len() {
                let b = self.buf[self.pos];
                if b.is_ascii_whitespace() {
                    self.advance(1);
                } else {
                    return Ok(Some(b));
                }
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    fn next_item(&mut self) -> Option<Item> {
        if self.failed || self.closed {
            return None;
        }
        let fatal = |e: std::io::Error| Some(Item::Fatal(anyhow!("error reading input: {e}")));
        let first = match self.skip_space() {
            Ok(b) => b,
            Err(e) => return fatal(e),
        };
        if self.array {
            match (first, self.opened) {
                (Some(b'['), false) => {
                    self.opened = true;
                    self.advance(1);
                    return self.next_item();
                }
                (_, false) => return self.array_error("expected '[' to start the JSON array"),
                (Some(b']'), true) => {
                    self.closed = true;
                    return None;
                }
                (Some(b','), true) => {
                    self.advance(1);
                    if let Err(e) = self.skip_space() {
                        return fatal(e);
                    }
                }
                (None, true) => return self.array_error("the JSON array is not closed with ']'"),
                _ => {}
            }
        } else if first.is_none() {
            return None;
        }
        loop {
            let line = self.line;
            let slice = &self.buf[self.pos..];
            let next = if self.add_ids {
                next_raw::<true>(slice)
            } else {
                next_raw::<false>(slice)
            };
            match next {
                Some((Ok(doc), used)) => {
                    self.advance(used);
                    return Some(to_row(line, doc, self.time.as_deref()));
                }
                Some((Err(e), _)) if e.is_eof() && !self.eof => match self.fill() {
                    Ok(_) => continue,
                    Err(e) => return fatal(e),
                },
                Some((Err(e), _)) => {
                    let reason = format!("invalid JSON: {e}");
                    if self.array {
                        return self.array_error(&reason);
                    }
                    // Resynchronise at the next line: the usual input has one document per line.
                    self.skip_line();
                    return Some(Item::Bad(RowError { line, reason }));
                }
                None => return None,
            }
        }
    }

    fn skip_line(&mut self) {
        loop {
            if let Some(i) = self.buf[self.pos..].iter().position(|&b| b == b'\n') {
                self.advance(i + 1);
                return;
            }
            self.pos = self.buf.len();
            if !matches!(self.fill(), Ok(true)) {
                return;
            }
        }
    }

    fn array_error(&mut self, reason: &str) -> Option<Item> {
        self.failed = true;
        Some(Item::Fatal(anyhow!("line {}: {reason}", self.line)))
    }
}

impl<R: Read> Iterator for JsonReader<R> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        self.next_item()
    }
}

/// The next value of `slice` and the bytes it took.
type Next = (
    Result<Result<RawDocumentBuf, String>, serde_json::Error>,
    usize,
);

fn next_raw<const ADD_ID: bool>(slice: &[u8]) -> Option<Next> {
    let mut stream = serde_json::Deserializer::from_slice(slice).into_iter::<RawRow<ADD_ID>>();
    let item = stream.next()?;
    Some((item.map(|RawRow(doc)| doc), stream.byte_offset()))
}

/// A document read (or why the value was not one) as a row, its time field made a date.
fn to_row(line: usize, doc: Result<RawDocumentBuf, String>, time: Option<&TimeField>) -> Item {
    let converted = doc.and_then(|doc| match time {
        Some(t) => with_time(doc, t),
        None => Ok(doc),
    });
    match converted {
        Ok(doc) => Item::Row(Row { line, doc }),
        Err(reason) => Item::Bad(RowError { line, reason }),
    }
}

/// `doc` with its time field as a date (rewritten only when it is not one already).
fn with_time(doc: RawDocumentBuf, t: &TimeField) -> Result<RawDocumentBuf, String> {
    match doc.get(t.name()).map_err(|e| e.to_string())? {
        None => return Err(t.missing()),
        Some(RawBsonRef::DateTime(_)) => return Ok(doc),
        Some(_) => {}
    }
    let mut out = RawDocumentBuf::new();
    for element in doc.iter() {
        let (k, v) = element.map_err(|e| e.to_string())?;
        if k == t.name() {
            let value = Bson::try_from(v.to_raw_bson()).map_err(|e| e.to_string())?;
            let date = RawBson::try_from(t.date(&value)?).map_err(|e| e.to_string())?;
            out.append(k, date);
        } else {
            out.append_ref(k, v);
        }
    }
    Ok(out)
}

/// Documents of `text` (for tests).
#[cfg(test)]
fn read_all(text: &str, array: bool) -> Vec<Result<(usize, bson::Document), String>> {
    JsonReader::new(text.as_bytes(), array, None, true)
        .map(|i| match i {
            Item::Row(r) => {
                // The _id a row without one gets comes first; checked in json_raw.
                let mut d = r.doc.to_document().unwrap_or_default();
                if d.keys().next().is_some_and(|k| k == "_id") && d.get_object_id("_id").is_ok() {
                    d.remove("_id");
                }
                Ok((r.line, d))
            }
            Item::Bad(e) => Err(format!("{}: {}", e.line, e.reason)),
            Item::Fatal(e) => Err(e.to_string()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn ndjson_documents_carry_the_line_they_start_on() {
        let got = read_all(
            "{\"a\":1}\n\n{\"a\":\n2}\n{\"b\": {\"$numberLong\": \"7\"}}\n",
            false,
        );
        assert_eq!(
            got,
            vec![
                Ok((1, doc! {"a": 1})),
                Ok((3, doc! {"a": 2})),
                Ok((5, doc! {"b": 7i64})),
            ]
        );
    }

    #[test]
    fn fields_keep_their_order_and_extended_json_nests_anywhere() {
        let got = read_all(
            r#"{"z": 1, "a": [1, {"$numberLong": "2"}], "m": {"b": {"$oid": "5f0000000000000000000001"}, "a": null}}"#,
            false,
        );
        let want = doc! {"z": 1, "a": [1, 2i64], "m": {"b": bson::oid::ObjectId::parse_str("5f0000000000000000000001").unwrap_or_default(), "a": null}};
        assert_eq!(got, vec![Ok((1, want))]);
        let keys: Vec<String> = got[0]
            .as_ref()
            .map(|(_, d)| d.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["z", "a", "m"]);
    }

    #[test]
    fn a_malformed_line_is_reported_and_the_next_lines_still_import() {
        let got = read_all("{\"a\":1}\n{\"a\": oops}\n{\"a\":3}\n", false);
        assert_eq!(got.len(), 3);
        assert!(
            got[1]
                .as_ref()
                .is_err_and(|e| e.starts_with("2: invalid JSON")),
            "{got:?}"
        );
        assert_eq!(got[2], Ok((3, doc! {"a": 3})));
    }

    #[test]
    fn a_json_array_yields_its_documents() {
        let got = read_all(
            " [ {\"a\":1},\n {\"a\":{\"$date\":\"2020-01-01T00:00:00Z\"}} ]",
            true,
        );
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], Ok((1, doc! {"a": 1})));
        assert!(matches!(&got[1], Ok((2, d)) if d.get_datetime("a").is_ok()));
    }

    #[test]
    fn invalid_extended_json_is_a_bad_row_and_the_array_goes_on() {
        let got = read_all(r#"[{"a": {"$numberLong": "x"}}, {"a": 2}, 3]"#, true);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(
            got[0].as_ref().is_err_and(|e| e.contains("Extended JSON")),
            "{got:?}"
        );
        assert_eq!(got[1], Ok((1, doc! {"a": 2})));
        assert!(
            got[2]
                .as_ref()
                .is_err_and(|e| e.contains("expected a document")),
            "{got:?}"
        );
    }

    #[test]
    fn an_unclosed_json_array_is_an_error() {
        let got = read_all("[{\"a\":1}", true);
        assert!(got.last().is_some_and(|r| r.is_err()), "{got:?}");
    }

    #[test]
    fn documents_larger_than_a_chunk_are_read_whole() {
        let big = "x".repeat(3 * CHUNK);
        let text = format!("{{\"s\":\"{big}\"}}\n{{\"a\":1}}");
        let got = read_all(&text, false);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], Ok((2, doc! {"a": 1})));
    }
}
