//! CSV and TSV input as mongoimport reads it: field names from `--headerline`, `--fields`
//! or `--fieldFile` (dotted names make nested documents; columns past the names are
//! `fieldN`), values typed automatically or by `--columnsHaveTypes`, empty values kept as
//! empty strings unless `--ignoreBlanks`, and a value that does not parse as its type
//! handled by `--parseGrace`. TSV has no quoting: a field is what lies between tabs.

use super::time::TimeField;
use super::typed::{auto_cell, parse_typed_field, Cell, ColumnType};
use super::{Item, Row, RowError};
use crate::cli::{field_list, ImportArgs, InputType, ParseGrace};
use anyhow::anyhow;
use bson::oid::ObjectId;
use bson::RawDocumentBuf;
use std::io::Read;
use std::sync::Arc;

/// Where a row's values go: the field tree of the column names, built once, so that each
/// row is written straight as BSON.
enum Node {
    /// The value of column `col`.
    Leaf(usize),
    /// A sub-document of these fields, in the order their columns first appear.
    Doc(Vec<(String, Node)>),
}

struct Layout {
    root: Vec<(String, Node)>,
    names: Vec<String>,
    kinds: Vec<Option<ColumnType>>,
    /// The column of the time field, when the import converts one.
    time_col: Option<usize>,
}

impl Layout {
    fn new(names: &[String], typed: bool, time: Option<&TimeField>) -> Result<Layout, String> {
        let mut root = Vec::new();
        let mut plain = Vec::with_capacity(names.len());
        let mut kinds = Vec::with_capacity(names.len());
        for (col, n) in names.iter().enumerate() {
            let (name, kind) = if typed {
                let (name, t) = parse_typed_field(n)?;
                (name, Some(t))
            } else {
                (n.clone(), None)
            };
            if name.split('.').any(str::is_empty) {
                return Err(format!("invalid field name '{name}'"));
            }
            insert(&mut root, &name, col)?;
            plain.push(name);
            kinds.push(kind);
        }
        let time_col = time.and_then(|t| plain.iter().position(|n| n == t.name()));
        Ok(Layout {
            root,
            names: plain,
            kinds,
            time_col,
        })
    }
}

fn insert(fields: &mut Vec<(String, Node)>, path: &str, col: usize) -> Result<(), String> {
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let clash = || format!("field '{head}' is both a value and a document");
    match (fields.iter_mut().find(|(k, _)| k == head), rest) {
        (None, None) => fields.push((head.to_string(), Node::Leaf(col))),
        (None, Some(r)) => {
            let mut inner = Vec::new();
            insert(&mut inner, r, col)?;
            fields.push((head.to_string(), Node::Doc(inner)));
        }
        (Some((_, Node::Doc(inner))), Some(r)) => insert(inner, r, col)?,
        (Some((_, Node::Leaf(_))), _) => {
            return Err(format!("field '{path}' appears twice or {}", clash()))
        }
        (Some((_, Node::Doc(_))), None) => return Err(clash()),
    }
    Ok(())
}

/// Writes `fields` with the row's values; false when none of them had a value.
fn write(
    out: &mut RawDocumentBuf,
    fields: &[(String, Node)],
    values: &mut [Option<Cell>],
) -> Result<bool, String> {
    let mut any = false;
    for (name, node) in fields {
        match node {
            Node::Leaf(col) => {
                if let Some(v) = values.get_mut(*col).and_then(Option::take) {
                    v.append_to(out, name)?;
                    any = true;
                }
            }
            Node::Doc(inner) => {
                let mut sub = RawDocumentBuf::new();
                if write(&mut sub, inner, values)? {
                    out.append(name, sub);
                    any = true;
                }
            }
        }
    }
    Ok(any)
}

pub struct CsvReader<R: Read> {
    records: csv::Reader<R>,
    layout: Option<Layout>,
    typed: bool,
    ignore_blanks: bool,
    grace: ParseGrace,
    time: Option<Arc<TimeField>>,
    add_ids: bool,
    record: csv::ByteRecord,
    done: bool,
}

impl<R: Read> CsvReader<R> {
    pub fn new(
        input: R,
        a: &ImportArgs,
        time: Option<Arc<TimeField>>,
    ) -> anyhow::Result<CsvReader<R>> {
        let mut b = csv::ReaderBuilder::new();
        b.has_headers(false).flexible(true);
        if a.kind == InputType::Tsv {
            b.delimiter(b'\t').quoting(false);
        }
        let typed = a.columns_have_types;
        let layout = match field_list(&a.fields, &a.field_file)? {
            Some(names) => {
                Some(Layout::new(&names, typed, time.as_deref()).map_err(|e| anyhow!(e))?)
            }
            None => None,
        };
        Ok(CsvReader {
            records: b.from_reader(input),
            layout,
            typed,
            ignore_blanks: a.ignore_blanks,
            grace: a.parse_grace,
            time,
            add_ids: a.mode == crate::cli::Mode::Insert,
            record: csv::ByteRecord::new(),
            done: false,
        })
    }

    /// The current record as a document; None for a row `--parseGrace skipRow` drops.
    fn row(&mut self) -> Result<Option<RawDocumentBuf>, String> {
        let Some(layout) = &self.layout else {
            return Ok(None);
        };
        // One UTF-8 check per record: fields split at ASCII bytes stay valid.
        if let Err(e) = std::str::from_utf8(self.record.as_slice()) {
            return Err(format!(
                "the line is not UTF-8 (at byte {})",
                e.valid_up_to()
            ));
        }
        let mut values: Vec<Option<Cell>> = Vec::with_capacity(self.record.len());
        for (i, raw) in self.record.iter().enumerate() {
            let text = std::str::from_utf8(raw).unwrap_or_default();
            let text = text.strip_suffix('\r').unwrap_or(text);
            if text.is_empty() && self.ignore_blanks {
                values.push(None);
                continue;
            }
            let value = match layout.kinds.get(i).and_then(Option::as_ref) {
                None => Some(auto_cell(text)),
                Some(t) => match t.parse(text) {
                    Ok(v) => Some(Cell::Value(v)),
                    Err(reason) => match self.grace {
                        ParseGrace::AutoCast => Some(auto_cell(text)),
                        ParseGrace::SkipField => None,
                        ParseGrace::SkipRow => return Ok(None),
                        ParseGrace::Stop => {
                            return Err(format!("field '{}': {reason}", layout.names[i]))
                        }
                    },
                },
            };
            values.push(value);
        }
        if let Some(t) = &self.time {
            match layout
                .time_col
                .and_then(|c| values.get_mut(c))
                .and_then(Option::as_mut)
            {
                Some(v) => *v = Cell::Value(t.date(&v.to_bson())?),
                None => return Err(t.missing()),
            }
        }
        // Rows to insert get their _id first, as a driver would prepend it (so the driver
        // finds it at once); other modes match by the row's own fields.
        let mut doc = RawDocumentBuf::new();
        if self.add_ids && !layout.root.iter().any(|(k, _)| k == "_id") {
            doc.append("_id", ObjectId::new());
        }
        write(&mut doc, &layout.root, &mut values)?;
        // Columns past the names are named by position, as mongoimport names them.
        for (i, v) in values.iter_mut().enumerate().skip(layout.names.len()) {
            if let Some(v) = v.take() {
                v.append_to(&mut doc, &format!("field{i}"))?;
            }
        }
        Ok(Some(doc))
    }
}

impl<R: Read> Iterator for CsvReader<R> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            if self.done {
                return None;
            }
            let line = self.records.position().line() as usize;
            match self.records.read_byte_record(&mut self.record) {
                Ok(false) => {
                    self.done = true;
                    return None;
                }
                Ok(true) => {}
                Err(e) => {
                    if e.is_io_error() {
                        self.done = true;
                        return Some(Item::Fatal(anyhow!("error reading input: {e}")));
                    }
                    return Some(Item::Bad(RowError {
                        line,
                        reason: e.to_string(),
                    }));
                }
            }
            let line = self.record.position().map_or(line, |p| p.line() as usize);
            if self.layout.is_none() {
                // --headerline: this record names the columns.
                let names: Result<Vec<String>, _> = self
                    .record
                    .iter()
                    .map(|f| std::str::from_utf8(f).map(|s| s.trim_end_matches('\r').to_string()))
                    .collect();
                let made = names
                    .map_err(|_| "the header line is not UTF-8".to_string())
                    .and_then(|n| Layout::new(&n, self.typed, self.time.as_deref()));
                match made {
                    Ok(l) => self.layout = Some(l),
                    Err(e) => {
                        self.done = true;
                        return Some(Item::Fatal(anyhow!("line {line}: {e}")));
                    }
                }
                continue;
            }
            if self.record.len() == 1
                && self
                    .record
                    .get(0)
                    .is_some_and(|f| f.is_empty() || f == b"\r")
            {
                continue; // a blank line
            }
            return Some(match self.row() {
                Ok(Some(doc)) => Item::Row(Row { line, doc }),
                Ok(None) => continue,
                Err(reason) => Item::Bad(RowError { line, reason }),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document};
    use clap::Parser;

    fn read(text: &str, flags: &[&str]) -> Vec<Result<(usize, Document), String>> {
        let mut argv = vec!["import"];
        argv.extend_from_slice(flags);
        let a = ImportArgs::parse_from(argv);
        match CsvReader::new(text.as_bytes(), &a, None) {
            Ok(r) => r
                .map(|i| match i {
                    Item::Row(r) => {
                        // The generated _id is checked apart.
                        let mut d = r.doc.to_document().unwrap_or_default();
                        assert!(d
                            .remove("_id")
                            .is_some_and(|id| id.as_object_id().is_some()));
                        Ok((r.line, d))
                    }
                    Item::Bad(e) => Err(format!("{}: {}", e.line, e.reason)),
                    Item::Fatal(e) => Err(e.to_string()),
                })
                .collect(),
            Err(e) => vec![Err(e.to_string())],
        }
    }

    #[test]
    fn a_header_line_names_fields_and_dotted_names_nest() {
        let got = read("a,m.x,m.y\n1,2.5,hi\n", &["--type", "csv", "--headerline"]);
        assert_eq!(
            got,
            vec![Ok((2, doc! {"a": 1, "m": {"x": 2.5, "y": "hi"}}))]
        );
    }

    #[test]
    fn blanks_are_empty_strings_unless_ignored_and_extra_columns_are_named_by_position() {
        let got = read("1,,3\n", &["--type", "csv", "--fields", "a,b"]);
        assert_eq!(got, vec![Ok((1, doc! {"a": 1, "b": "", "field2": 3}))]);
        let got = read(
            "1,,3\n",
            &["--type", "csv", "--fields", "a,b", "--ignoreBlanks"],
        );
        assert_eq!(got, vec![Ok((1, doc! {"a": 1, "field2": 3}))]);
    }

    #[test]
    fn tsv_fields_are_split_at_tabs_without_quoting() {
        let got = read("a\tb\n\"x\t2\r\n", &["--type", "tsv", "--headerline"]);
        assert_eq!(got, vec![Ok((2, doc! {"a": "\"x", "b": 2}))]);
    }

    #[test]
    fn parse_grace_decides_what_a_bad_typed_value_does() {
        let flags = |g: &'static str| {
            vec![
                "--type",
                "csv",
                "--headerline",
                "--columnsHaveTypes",
                "--parseGrace",
                g,
            ]
        };
        let text = "n.int32(),s.string()\nx,a\n2,b\n";
        let stop = read(text, &flags("stop"));
        assert!(
            stop[0]
                .as_ref()
                .is_err_and(|e| e.starts_with("2: field 'n'")),
            "{stop:?}"
        );
        assert_eq!(stop[1], Ok((3, doc! {"n": 2, "s": "b"})));
        assert_eq!(
            read(text, &flags("autoCast"))[0],
            Ok((2, doc! {"n": "x", "s": "a"}))
        );
        assert_eq!(read(text, &flags("skipField"))[0], Ok((2, doc! {"s": "a"})));
        assert_eq!(
            read(text, &flags("skipRow")),
            vec![Ok((3, doc! {"n": 2, "s": "b"}))]
        );
    }
}
