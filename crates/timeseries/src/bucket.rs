//! One bucket: the measurements of one series (meta value) within one time
//! window, its control min/max summary, MongoDB's v1 bucket document and this
//! crate's compressed physical format.
//!
//! # Bucket format
//!
//! A closed bucket is stored as one value with this layout (all integers
//! little-endian):
//!
//! ```text
//! offset  size  field
//! 0       1     format version, currently 1
//! 1       4     u32 measurement count N (at most 1,048,576 when decoding)
//! 5       H     header: one BSON document (its first 4 bytes are its own
//!               length H) {_id: ObjectId,
//!                          control: {version: 1, min: {...}, max: {...}},
//!                          meta: <normalized meta>   (absent = no meta),
//!                          timeField: string, metaField: string (if any)}
//! 5+H     4     u32 column count C
//! ...           C directory entries, in the bucket's data-field order:
//!                 u16 name length L, L bytes UTF-8 field name,
//!                 u32 offset of the column (from the start of the column area),
//!                 u32 length of the column in bytes
//! ...           column area: the columns back to back, each encoded by
//!               `column::encode_column` over N slots (tag byte, flags
//!               byte, optional presence bitmap, codec payload)
//! ```
//!
//! Columns cover every data field, including `_id` and the time field, but
//! not the meta field (its value is the header's `meta`). Any one column can
//! be decoded without touching the others. Measurements keep insertion order.
//!
//! # Control min/max
//!
//! `control.min`/`control.max` hold, per top-level data field, the smallest and
//! largest value under MongoDB's comparison order (`hourglass_query::compare`).
//! Approximation of MongoDB's field-wise rule: when both the summary and the
//! new value are objects the summary is merged field by field (recursively),
//! when both are arrays element by element (index i with index i, extra
//! elements appended); otherwise the whole values are compared.
//! `control.min.<timeField>` is the bucket's rounded minimum time;
//! `control.max.<timeField>` the actual largest time.
//!
//! # Size
//!
//! `size_bytes` = BSON size of the meta value (as `{"": meta}`) plus the BSON
//! size of every measurement without its meta field.

use hourglass_query::bson_size::{bson_size, element_size};
use hourglass_query::pipeline::mem::approx_size;

/// Memory of an empty open bucket besides its meta value: the bucket and catalog entry
/// structs, their map slots and the key of the series (measured order of magnitude).
const BUCKET_OVERHEAD: usize = 1024;
use std::collections::HashMap;
use std::ops::Range;

use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document, RawDocumentBuf};

use crate::column::decode_column;
use crate::column_builder::ColumnBuilder;
use crate::error::TsError;
use crate::meta::normalize_meta;
use crate::options::TimeseriesOptions;

/// Version byte of the physical format.
pub const FORMAT_VERSION: u8 = 1;
/// Largest measurement count `decode_compressed` accepts.
pub const MAX_DECODE_COUNT: usize = 1 << 20;

/// Process-unique 8 trailing ObjectId bytes; the first 4 carry `seconds`
/// (clamped to the u32 range, so times before 1970 get 0).
fn bucket_object_id(min_time_ms: i64) -> ObjectId {
    let secs = min_time_ms.div_euclid(1000).clamp(0, i64::from(u32::MAX)) as u32;
    let mut b = ObjectId::new().bytes();
    b[..4].copy_from_slice(&secs.to_be_bytes());
    ObjectId::from_bytes(b)
}

/// An open (in-memory) bucket: its measurements as columns (see [`crate::column_builder`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    pub id: ObjectId,
    /// The rounded minimum time (milliseconds since the epoch).
    pub min_time_ms: i64,
    /// The largest measurement time seen.
    pub max_time_ms: i64,
    /// The normalized meta value; `None` = measurements had no meta field.
    pub meta: Option<Bson>,
    /// Number of measurements.
    count: usize,
    /// Data fields in first-seen order (the bucket's `data` order), each with its values
    /// without the meta field, its control min/max and its schema.
    columns: Vec<ColumnBuilder>,
    column_of: HashMap<String, usize>,
    pub size_bytes: usize,
    /// Memory the open bucket holds, as allocated (column values, the control min/max
    /// and schema, the meta value in the catalog's maps): what the bucket catalog's
    /// memory threshold counts.
    pub heap_bytes: usize,
    pub time_field: String,
    pub meta_field: Option<String>,
}

/// A measurement's data fields (its meta field left out), as an insert reads them.
pub type Fields<'a> = [(&'a str, Bson)];

impl Bucket {
    /// Opens a bucket whose minimum time is `first_time_ms` rounded down.
    pub fn new(options: &TimeseriesOptions, meta: Option<Bson>, first_time_ms: i64) -> Bucket {
        let min_time_ms = options.round_down_time(first_time_ms);
        Bucket::with_id(options, bucket_object_id(min_time_ms), meta, min_time_ms)
    }

    /// Rebuilds an empty bucket with a known id and (already rounded) minimum
    /// time, e.g. when replaying the insert log after a restart.
    pub fn with_id(
        options: &TimeseriesOptions,
        id: ObjectId,
        meta: Option<Bson>,
        min_time_ms: i64,
    ) -> Bucket {
        let meta = meta.as_ref().map(normalize_meta);
        let size_bytes = meta
            .as_ref()
            .map(|m| {
                let mut d = Document::new();
                d.insert("", m.clone());
                bson_size(&d)
            })
            .unwrap_or(0);
        let heap_bytes = BUCKET_OVERHEAD + meta.as_ref().map_or(0, |m| 3 * approx_size(m) as usize);
        Bucket {
            id,
            min_time_ms,
            max_time_ms: min_time_ms,
            meta,
            count: 0,
            columns: Vec::new(),
            column_of: HashMap::new(),
            size_bytes,
            heap_bytes,
            time_field: options.time_field.clone(),
            meta_field: options.meta_field.clone(),
        }
    }

    /// Number of measurements.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Data field names in the bucket's `data` order.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|c| c.name.as_str())
    }

    /// The column of `name`, looked up first at position `hint` (measurements mostly
    /// repeat the bucket's field order).
    fn column_index(&self, hint: usize, name: &str) -> Option<usize> {
        match self.columns.get(hint) {
            Some(c) if c.name == name => Some(hint),
            _ => self.column_of.get(name).copied(),
        }
    }

    /// A measurement document's data fields (without its meta field).
    fn fields_of<'a>(&self, m: &'a Document) -> Vec<(&'a str, Bson)> {
        m.iter()
            .filter(|(k, _)| Some(k.as_str()) != self.meta_field.as_deref())
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect()
    }

    /// Size the measurement adds to the bucket (see the module docs).
    pub fn measurement_size(&self, m: &Document) -> usize {
        let whole = bson_size(m);
        match self
            .meta_field
            .as_ref()
            .and_then(|mf| Some((mf, m.get(mf)?)))
        {
            Some((mf, meta)) => whole - element_size(mf.len(), meta),
            None => whole,
        }
    }

    /// False when adding `m` would change a field's type bracket or turn a
    /// scalar into an object/array (or back): MongoDB's schema-change rule.
    pub fn is_schema_compatible(&self, m: &Document) -> bool {
        self.accepts(&self.fields_of(m))
    }

    /// [`Bucket::is_schema_compatible`] of a measurement's data fields.
    pub fn accepts(&self, fields: &Fields<'_>) -> bool {
        fields.iter().enumerate().all(|(j, (k, v))| {
            self.column_index(j, k)
                .is_none_or(|i| self.columns[i].accepts(v))
        })
    }

    /// Appends a measurement (its meta field, if any, is dropped) and updates
    /// control min/max, the schema and the size.
    pub fn add(&mut self, m: Document) {
        let size = self.measurement_size(&m);
        let fields = self.fields_of(&m);
        self.add_fields(&fields, size);
    }

    /// Appends a measurement given as its data fields and its size without the meta
    /// field.
    pub fn add_fields(&mut self, fields: &Fields<'_>, size: usize) {
        let row = self.count;
        self.size_bytes += size;
        // The first measurement also shapes min, max and the schema (about its size each).
        let copies = if row == 0 { 4 } else { 1 };
        for (j, (k, v)) in fields.iter().enumerate() {
            self.heap_bytes += copies * ColumnBuilder::value_bytes(v) + 1;
            match self.column_index(j, k) {
                Some(i) => self.columns[i].push(row, v),
                None => {
                    self.heap_bytes += 64 + k.len();
                    self.column_of.insert(k.to_string(), self.columns.len());
                    self.columns.push(ColumnBuilder::new(k, row, v));
                }
            }
            if *k == self.time_field {
                if let Bson::DateTime(t) = v {
                    self.max_time_ms = self.max_time_ms.max(t.timestamp_millis());
                }
            }
        }
        self.count += 1;
    }

    /// One data field's values, a slot per measurement (`None`: the bucket has no such
    /// field).
    pub fn column_values(&self, field: &str) -> Option<Vec<Option<Bson>>> {
        let i = *self.column_of.get(field)?;
        Some(self.columns[i].to_values(self.count))
    }

    /// Measurement `i` without its meta field, fields in `data` order.
    pub fn row(&self, i: usize) -> Option<Document> {
        (i < self.count).then(|| {
            self.columns
                .iter()
                .filter_map(|c| Some((c.name.clone(), c.get(i)?)))
                .collect()
        })
    }

    /// A column's control min: the time field's is the bucket's rounded minimum time.
    fn min_of(&self, c: &ColumnBuilder) -> Bson {
        if c.name == self.time_field {
            Bson::DateTime(DateTime::from_millis(self.min_time_ms))
        } else {
            c.min.clone()
        }
    }

    /// `control.min`: per data field the smallest value; the time field's is the
    /// bucket's rounded minimum time.
    pub fn control_min(&self) -> Document {
        self.columns
            .iter()
            .map(|c| (c.name.clone(), self.min_of(c)))
            .collect()
    }

    /// `control.max`: per data field the largest value.
    pub fn control_max(&self) -> Document {
        self.columns
            .iter()
            .map(|c| (c.name.clone(), c.max.clone()))
            .collect()
    }

    /// A field's control `min` and `max`.
    pub fn control_bounds(&self, field: &str) -> Option<(Bson, Bson)> {
        let c = &self.columns[*self.column_of.get(field)?];
        Some((self.min_of(c), c.max.clone()))
    }

    fn control(&self, closed: Option<bool>) -> Document {
        let mut c = doc! {"version": 1, "min": self.control_min(), "max": self.control_max()};
        if let Some(closed) = closed {
            c.insert("closed", closed);
        }
        c
    }

    /// MongoDB's v1 bucket document: `{_id, control: {version: 1, min, max,
    /// closed?}, meta?, data: {field: {"0": v, ...}}}`; `closed: true` is
    /// included only when `closed` is true.
    pub fn to_document(&self, closed: bool) -> Document {
        let mut d = doc! {"_id": self.id, "control": self.control(closed.then_some(true))};
        if let Some(m) = &self.meta {
            d.insert("meta", m.clone());
        }
        let mut data = Document::new();
        for c in &self.columns {
            let mut col = Document::new();
            for (i, v) in c.to_values(self.count).into_iter().enumerate() {
                if let Some(v) = v {
                    col.insert(i.to_string(), v);
                }
            }
            data.insert(c.name.clone(), col);
        }
        d.insert("data", data);
        d
    }

    /// The compressed physical form (see "Bucket format" above).
    pub fn encode_compressed(&self) -> Vec<u8> {
        let mut header = doc! {"_id": self.id, "control": self.control(None)};
        if let Some(m) = &self.meta {
            header.insert("meta", m.clone());
        }
        header.insert("timeField", self.time_field.clone());
        if let Some(mf) = &self.meta_field {
            header.insert("metaField", mf.clone());
        }
        let mut out = vec![FORMAT_VERSION];
        out.extend_from_slice(&(self.count as u32).to_le_bytes());
        if header.to_writer(&mut out).is_err() {
            // Only keys with NUL bytes fail, which MongoDB's BSON cannot hold.
            let _ = doc! {"_id": self.id}.to_writer(&mut out);
        }
        let columns: Vec<(&String, Vec<u8>)> = self
            .columns
            .iter()
            .map(|c| (&c.name, c.encode(self.count)))
            .collect();
        out.extend_from_slice(&(columns.len() as u32).to_le_bytes());
        let mut offset = 0u32;
        for (name, col) in &columns {
            let name = name.as_bytes();
            let name = &name[..name.len().min(usize::from(u16::MAX))];
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(&offset.to_le_bytes());
            out.extend_from_slice(&(col.len() as u32).to_le_bytes());
            offset = offset.wrapping_add(col.len() as u32);
        }
        for (_, col) in columns {
            out.extend_from_slice(&col);
        }
        out
    }
}

/// A stored bucket whose header and directory are parsed; columns are
/// decoded on demand.
#[derive(Debug, Clone)]
pub struct DecodedBucket {
    pub id: ObjectId,
    pub count: usize,
    pub min_time_ms: i64,
    /// The largest measurement time (control.max of the time field).
    pub max_time_ms: Option<i64>,
    pub time_field: String,
    pub meta_field: Option<String>,
    /// Where the header BSON lies in `buf`; `control` and `meta` are parsed from it on
    /// first use (scans that prune by time never build them).
    header: Range<usize>,
    control: std::sync::OnceLock<Document>,
    meta: std::sync::OnceLock<Option<Bson>>,
    directory: Vec<(String, Range<usize>)>,
    /// The stored bytes (shared with the engine's block cache when read by a scan);
    /// the column area starts at `area_start`.
    buf: hourglass_storage::SharedValue,
    area_start: usize,
}

struct Cursor<'a> {
    src: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TsError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or_else(|| TsError::corrupt("length overflow"))?;
        let s = self
            .src
            .get(self.pos..end)
            .ok_or_else(|| TsError::corrupt("truncated bucket"))?;
        self.pos = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, TsError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, TsError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Parses a compressed bucket written by [`Bucket::encode_compressed`].
pub fn decode_compressed(bytes: &[u8]) -> Result<DecodedBucket, TsError> {
    decode_compressed_owned(bytes.to_vec())
}

/// [`decode_compressed`] keeping `bytes` as the bucket's storage (no copy).
pub fn decode_compressed_owned(
    bytes: impl Into<hourglass_storage::SharedValue>,
) -> Result<DecodedBucket, TsError> {
    let bytes = bytes.into();
    let mut b = parse_compressed(&bytes)?;
    b.buf = bytes;
    Ok(b)
}

fn parse_compressed(bytes: &[u8]) -> Result<DecodedBucket, TsError> {
    let mut c = Cursor { src: bytes, pos: 0 };
    let version = c.take(1)?[0];
    if version != FORMAT_VERSION {
        return Err(TsError::corrupt(format!(
            "unknown bucket format version {version}"
        )));
    }
    let count = c.u32()? as usize;
    if count > MAX_DECODE_COUNT {
        return Err(TsError::corrupt("measurement count too large"));
    }
    let header_len = {
        let save = c.pos;
        let b = c.take(4)?;
        c.pos = save;
        i32::from_le_bytes([b[0], b[1], b[2], b[3]])
    };
    let header_len =
        usize::try_from(header_len).map_err(|_| TsError::corrupt("negative header length"))?;
    let header_start = c.pos;
    let raw = bson::RawDocument::from_bytes(c.take(header_len)?)
        .map_err(|e| TsError::corrupt(format!("header: {e}")))?;
    let bad = |what: &str| TsError::corrupt(what.to_string());
    // One pass over the header (and one over control.min/max) rather than a lookup per
    // field: each lookup of a raw document walks it from the start. The first of equal
    // keys counts, as with a lookup.
    let (mut id, mut time_field, mut meta_field, mut control) = (None, None, None, None);
    for element in raw.iter_elements() {
        let element = element.map_err(|e| TsError::corrupt(format!("header: {e}")))?;
        let value = || element.value().ok();
        match element.key() {
            "_id" if id.is_none() => id = Some(value()),
            "timeField" if time_field.is_none() => time_field = Some(value()),
            "metaField" if meta_field.is_none() => meta_field = Some(value()),
            "control" if control.is_none() => control = Some(value()),
            _ => {}
        }
    }
    let id = match id.flatten() {
        Some(bson::RawBsonRef::ObjectId(id)) => id,
        _ => return Err(bad("header without ObjectId _id")),
    };
    let time_field = match time_field.flatten() {
        Some(bson::RawBsonRef::String(s)) => s.to_string(),
        _ => return Err(bad("header without timeField")),
    };
    let meta_field = match meta_field {
        None => None,
        Some(Some(bson::RawBsonRef::String(s))) => Some(s.to_string()),
        Some(_) => return Err(bad("bad metaField")),
    };
    let control = match control.flatten() {
        Some(bson::RawBsonRef::Document(d)) => d,
        _ => return Err(bad("header without control")),
    };
    let min = control
        .get_document("min")
        .map_err(|_| bad("control without min"))?;
    let max = control
        .get_document("max")
        .map_err(|_| bad("control without max"))?;
    let min_time_ms = match min.get(&time_field) {
        Ok(Some(bson::RawBsonRef::DateTime(t))) => t.timestamp_millis(),
        Ok(None) if count == 0 => 0,
        _ => return Err(bad("control.min without a time")),
    };
    let max_time_ms = match max.get(&time_field) {
        Ok(Some(bson::RawBsonRef::DateTime(t))) => Some(t.timestamp_millis()),
        _ => None,
    };
    let ncols = c.u32()? as usize;
    let mut directory: Vec<(String, Range<usize>)> = Vec::with_capacity(ncols.min(1024));
    for _ in 0..ncols {
        let name_len = usize::from(c.u16()?);
        let name = std::str::from_utf8(c.take(name_len)?)
            .map_err(|_| TsError::corrupt("column name not UTF-8"))?
            .to_string();
        let off = c.u32()? as usize;
        let len = c.u32()? as usize;
        if directory.iter().any(|(n, _)| *n == name) {
            return Err(TsError::corrupt("duplicate column"));
        }
        directory.push((name, off..off + len));
    }
    let area_start = c.pos.min(bytes.len());
    let area_len = bytes.len() - area_start;
    if directory.iter().any(|(_, r)| r.end > area_len) {
        return Err(TsError::corrupt("column outside the bucket"));
    }
    Ok(DecodedBucket {
        id,
        count,
        min_time_ms,
        max_time_ms,
        time_field,
        meta_field,
        header: header_start..header_start + header_len,
        control: std::sync::OnceLock::new(),
        meta: std::sync::OnceLock::new(),
        directory,
        buf: hourglass_storage::SharedValue::from(&[][..]),
        area_start,
    })
}

/// The columns of a bucket as an unpack reads them, and which of its rows.
struct Unpack<'a> {
    count: usize,
    time_field: &'a str,
    meta_field: Option<&'a str>,
    meta: Option<&'a Bson>,
    columns: &'a [(&'a str, Vec<Option<Bson>>)],
    wanted: Option<&'a [&'a str]>,
    rows: Option<&'a [bool]>,
}

/// One field of an unpacked row.
enum Part<'a> {
    /// The bucket's meta value, under the metaField's name.
    Meta,
    /// A value of `columns[i]`.
    Column(usize, &'a Bson),
}

impl Unpack<'_> {
    /// Calls `emit` with the fields of each selected row, in MongoDB's unpack order:
    /// time field, meta field (named as the user's metaField, when the bucket has a
    /// meta), then the other fields in `data` order. `wanted` limits the fields.
    fn for_each_row(&self, mut emit: impl FnMut(&[Part<'_>])) {
        let meta = matches!((self.meta_field, self.meta), (Some(mf), Some(_)) if is_wanted(self.wanted, mf));
        let time = self.columns.iter().position(|(n, _)| *n == self.time_field);
        let mut parts: Vec<Part<'_>> = Vec::with_capacity(self.columns.len() + 1);
        for i in 0..self.count {
            if self
                .rows
                .is_some_and(|r| !r.get(i).copied().unwrap_or(false))
            {
                continue;
            }
            parts.clear();
            if let Some(t) = time {
                if let Some(Some(v)) = self.columns[t].1.get(i) {
                    parts.push(Part::Column(t, v));
                }
            }
            if meta {
                parts.push(Part::Meta);
            }
            for (c, (_, col)) in self.columns.iter().enumerate() {
                if Some(c) != time {
                    if let Some(Some(v)) = col.get(i) {
                        parts.push(Part::Column(c, v));
                    }
                }
            }
            emit(&parts);
        }
    }

    fn documents(&self) -> Vec<Document> {
        let mut out = Vec::with_capacity(self.count);
        let (mf, meta) = (self.meta_field.unwrap_or_default(), self.meta);
        self.for_each_row(|parts| {
            let mut d = Document::new();
            for p in parts {
                match p {
                    Part::Meta => {
                        d.insert(mf, meta.cloned().unwrap_or(Bson::Null));
                    }
                    Part::Column(c, v) => {
                        d.insert(self.columns[*c].0, (*v).clone());
                    }
                }
            }
            out.push(d);
        });
        out
    }

    /// The rows as BSON bytes, written straight from the columns (no document is
    /// built: this is how a read that returns measurements as they are sends them). The
    /// meta element and the fields' names are encoded once per bucket.
    fn raw_documents(&self) -> Result<Vec<RawDocumentBuf>, TsError> {
        use hourglass_query::bson_write::{
            write_cstring, write_element, write_len_prefixed, write_value,
        };
        let bad = |e: String| TsError::CorruptBucket(e);
        let mut meta = Vec::new();
        if let (Some(mf), Some(m)) = (self.meta_field, self.meta) {
            write_element(mf, m, &mut meta).map_err(bad)?;
        }
        let mut names = Vec::with_capacity(self.columns.len());
        for (name, _) in self.columns {
            let mut n = Vec::with_capacity(name.len() + 1);
            write_cstring(name, &mut n).map_err(bad)?;
            names.push(n);
        }
        let mut out = Vec::with_capacity(self.count);
        let mut failed = None;
        let mut size_hint = 64;
        self.for_each_row(|parts| {
            let mut buf = Vec::with_capacity(size_hint);
            let written = write_len_prefixed(&mut buf, |buf| {
                for p in parts {
                    match p {
                        Part::Meta => buf.extend_from_slice(&meta),
                        Part::Column(c, v) => {
                            buf.push(v.element_type() as u8);
                            buf.extend_from_slice(&names[*c]);
                            write_value(v, buf)?;
                        }
                    }
                }
                Ok(())
            });
            size_hint = buf.len();
            match written.and_then(|()| RawDocumentBuf::from_bytes(buf).map_err(|e| e.to_string()))
            {
                Ok(d) => out.push(d),
                Err(e) => failed = Some(e),
            }
        });
        match failed {
            Some(e) => Err(bad(e)),
            None => Ok(out),
        }
    }
}

fn is_wanted(wanted: Option<&[&str]>, f: &str) -> bool {
    match wanted {
        None => true,
        Some(list) => list.contains(&f),
    }
}

impl DecodedBucket {
    fn area(&self) -> &[u8] {
        self.buf.get(self.area_start..).unwrap_or_default()
    }

    /// One element of the header, parsed alone.
    fn header_field(&self, name: &str) -> Option<Bson> {
        let header = bson::RawDocument::from_bytes(self.buf.get(self.header.clone())?).ok()?;
        match header.get(name).ok()?? {
            bson::RawBsonRef::Document(d) => {
                Document::from_reader(d.as_bytes()).ok().map(Bson::Document)
            }
            other => Bson::try_from(other.to_raw_bson()).ok(),
        }
    }

    /// The stored bytes of the meta value (a normalized value: equal bytes, equal
    /// meta), without parsing it; `None` without meta.
    pub fn meta_bytes(&self) -> Option<&[u8]> {
        let header = bson::RawDocument::from_bytes(self.buf.get(self.header.clone())?).ok()?;
        match header.get("meta").ok()?? {
            bson::RawBsonRef::Document(d) => Some(d.as_bytes()),
            bson::RawBsonRef::Array(a) => Some(a.as_bytes()),
            bson::RawBsonRef::String(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// The bucket's meta value (parsed on first use).
    pub fn meta(&self) -> Option<&Bson> {
        self.meta.get_or_init(|| self.header_field("meta")).as_ref()
    }

    /// The encoded bytes of one column; `Ok(None)` when the bucket has no such field.
    fn column_bytes(&self, field: &str) -> Result<Option<&[u8]>, TsError> {
        match self.directory.iter().find(|(n, _)| n == field) {
            None => Ok(None),
            Some((_, r)) => self
                .area()
                .get(r.clone())
                .map(Some)
                .ok_or_else(|| TsError::corrupt("column outside the bucket")),
        }
    }

    /// Decodes one column; `Ok(None)` when the bucket has no such field.
    /// [`DecodedBucket::column`] with values only at the rows `rows` selects (all when
    /// `None`): a numeric column is decoded without BSON values and only the selected
    /// rows become values.
    fn column_at(
        &self,
        field: &str,
        rows: Option<&[bool]>,
    ) -> Result<Option<Vec<Option<Bson>>>, TsError> {
        let Some(rows) = rows else {
            return self.column(field);
        };
        match self.typed_column(field)? {
            Some(t) => Ok(Some(
                (0..self.count)
                    .map(|i| match rows.get(i) {
                        Some(true) => t.get(i),
                        _ => None,
                    })
                    .collect(),
            )),
            None => self.column(field),
        }
    }

    pub fn column(&self, field: &str) -> Result<Option<Vec<Option<Bson>>>, TsError> {
        match self.column_bytes(field)? {
            None => Ok(None),
            Some(bytes) => decode_column(bytes, self.count).map(Some),
        }
    }

    /// One general-codec column as BSON bytes (`Ok(None)`: no such field, or another
    /// codec).
    pub fn raw_general_column(
        &self,
        field: &str,
    ) -> Result<Option<crate::column::RawValues>, TsError> {
        match self.column_bytes(field)? {
            None => Ok(None),
            Some(bytes) => crate::column::decode_raw_general(bytes, self.count),
        }
    }

    /// One numeric column without building BSON values; `Ok(None)` when the bucket
    /// lacks the field or stores it with a non-numeric codec.
    pub fn typed_column(&self, field: &str) -> Result<Option<crate::column::TypedColumn>, TsError> {
        match self.column_bytes(field)? {
            None => Ok(None),
            Some(bytes) => crate::column::decode_typed_column(bytes, self.count),
        }
    }

    /// Data field names in `data` order.
    pub fn field_names(&self) -> impl Iterator<Item = &str> {
        self.directory.iter().map(|(n, _)| n.as_str())
    }

    /// Rebuilds measurements; `fields` limits which fields are decoded and
    /// returned (the meta field is included when its name is listed).
    pub fn unpack(&self, fields: Option<&[&str]>) -> Result<Vec<Document>, TsError> {
        self.unpack_rows(fields, None)
    }

    /// [`DecodedBucket::unpack`] of only the rows set in `rows`.
    pub fn unpack_rows(
        &self,
        fields: Option<&[&str]>,
        rows: Option<&[bool]>,
    ) -> Result<Vec<Document>, TsError> {
        self.unpack_with(fields, rows, |u| Ok(u.documents()))
    }

    /// [`DecodedBucket::unpack_rows`] as BSON bytes.
    pub fn unpack_rows_raw(
        &self,
        fields: Option<&[&str]>,
        rows: Option<&[bool]>,
    ) -> Result<Vec<RawDocumentBuf>, TsError> {
        self.unpack_with(fields, rows, |u| u.raw_documents())
    }

    fn unpack_with<T>(
        &self,
        fields: Option<&[&str]>,
        rows: Option<&[bool]>,
        out: impl FnOnce(&Unpack<'_>) -> Result<T, TsError>,
    ) -> Result<T, TsError> {
        let mut cols = Vec::new();
        for (name, _) in &self.directory {
            if is_wanted(fields, name) {
                if let Some(c) = self.column_at(name, rows)? {
                    cols.push((name.as_str(), c));
                }
            }
        }
        out(&Unpack {
            count: self.count,
            time_field: &self.time_field,
            meta_field: self.meta_field.as_deref(),
            meta: self.meta(),
            columns: &cols,
            wanted: fields,
            rows,
        })
    }

    /// Rebuilds an open [`Bucket`] (same id, meta and minimum time) from
    /// this stored bucket, e.g. to rewrite it after deleting measurements.
    pub fn to_bucket(&self) -> Result<Bucket, TsError> {
        let mut opts = TimeseriesOptions::new(&self.time_field, self.meta_field.as_deref());
        opts.meta_field = self.meta_field.clone();
        let mut b = Bucket::with_id(&opts, self.id, self.meta().cloned(), self.min_time_ms);
        let mut cols = Vec::new();
        for (name, _) in &self.directory {
            if let Some(c) = self.column(name)? {
                cols.push((name.as_str(), c));
            }
        }
        for i in 0..self.count {
            let mut m = Document::new();
            for (name, col) in &cols {
                if let Some(Some(v)) = col.get(i) {
                    m.insert(*name, v.clone());
                }
            }
            b.add(m);
        }
        Ok(b)
    }

    /// `{version: 1, min, max}`.
    /// A field's control `min` and `max`, read from the raw header without decoding the
    /// rest of it.
    pub fn control_bounds(&self, field: &str) -> Option<(Bson, Bson)> {
        let header = bson::RawDocument::from_bytes(self.buf.get(self.header.clone())?).ok()?;
        let control = header.get_document("control").ok()?;
        let bound = |which: &str| -> Option<Bson> {
            let raw = control.get_document(which).ok()?.get(field).ok()??;
            Bson::try_from(raw.to_raw_bson()).ok()
        };
        Some((bound("min")?, bound("max")?))
    }

    pub fn control_document(&self) -> &Document {
        self.control
            .get_or_init(|| match self.header_field("control") {
                Some(Bson::Document(d)) => d,
                _ => Document::new(),
            })
    }

    /// MongoDB's v1 bucket document for this bucket.
    pub fn to_document(&self) -> Result<Document, TsError> {
        let mut d = doc! {"_id": self.id, "control": self.control_document().clone()};
        if let Some(m) = self.meta() {
            d.insert("meta", m.clone());
        }
        let mut data = Document::new();
        for (name, _) in &self.directory {
            let mut col = Document::new();
            if let Some(vals) = self.column(name)? {
                for (i, v) in vals.into_iter().enumerate() {
                    if let Some(v) = v {
                        col.insert(i.to_string(), v);
                    }
                }
            }
            data.insert(name.clone(), col);
        }
        d.insert("data", data);
        Ok(d)
    }
}

/// Measurements of an open bucket in MongoDB's unpack order (time field,
/// meta field, then the other fields in `data` order).
pub fn unpack_measurements(bucket: &Bucket, options: &TimeseriesOptions) -> Vec<Document> {
    unpack_measurement_rows(bucket, options, None, None)
}

/// The measurements of an open bucket, built by `out` from its [`Unpack`].
fn unpack_open<T>(
    bucket: &Bucket,
    options: &TimeseriesOptions,
    wanted: Option<&[&str]>,
    rows: Option<&[bool]>,
    out: impl FnOnce(&Unpack<'_>) -> Result<T, TsError>,
) -> Result<T, TsError> {
    let cols: Vec<(&str, Vec<Option<Bson>>)> = bucket
        .columns
        .iter()
        .filter(|c| is_wanted(wanted, &c.name))
        .map(|c| (c.name.as_str(), c.to_values(bucket.count)))
        .collect();
    out(&Unpack {
        count: bucket.count(),
        time_field: &options.time_field,
        meta_field: options.meta_field.as_deref(),
        meta: bucket.meta.as_ref(),
        columns: &cols,
        wanted,
        rows,
    })
}

/// The measurements of an open bucket (only `rows`, when given) as documents.
pub fn unpack_measurement_rows(
    bucket: &Bucket,
    options: &TimeseriesOptions,
    wanted: Option<&[&str]>,
    rows: Option<&[bool]>,
) -> Vec<Document> {
    unpack_open(bucket, options, wanted, rows, |u| Ok(u.documents())).unwrap_or_default()
}

/// [`unpack_measurement_rows`] as BSON bytes.
pub fn unpack_measurement_rows_raw(
    bucket: &Bucket,
    options: &TimeseriesOptions,
    wanted: Option<&[&str]>,
    rows: Option<&[bool]>,
) -> Result<Vec<RawDocumentBuf>, TsError> {
    unpack_open(bucket, options, wanted, rows, |u| u.raw_documents())
}

#[cfg(test)]
mod size_tests {
    use super::*;

    #[test]
    fn computed_bson_size_matches_encoding_for_every_type() {
        let d = doc! {
            "d": 1.5, "s": "abc", "o": {"x": [1, "y", {"z": null}]}, "b": true,
            "t": DateTime::from_millis(1), "i": 1, "l": 2_i64, "n": null,
            "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2] },
            "old": bson::Binary { subtype: bson::spec::BinarySubtype::BinaryOld, bytes: vec![1] },
            "re": bson::Regex { pattern: "a".into(), options: "i".into() },
            "ts": bson::Timestamp { time: 1, increment: 2 },
            "js": Bson::JavaScriptCode("x".into()),
            "jsw": Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope { code: "x".into(), scope: doc! {"a": 1} }),
            "dec": bson::Decimal128::from_bytes([0; 16]), "min": Bson::MinKey, "max": Bson::MaxKey,
            "arr": (0..12).map(Bson::Int32).collect::<Vec<_>>(),
        };
        let mut buf = Vec::new();
        d.to_writer(&mut buf).unwrap();
        assert_eq!(bson_size(&d), buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;

    fn opts() -> TimeseriesOptions {
        TimeseriesOptions::new("t", Some("m"))
    }

    fn date(ms: i64) -> Bson {
        Bson::DateTime(DateTime::from_millis(ms))
    }

    #[test]
    fn min_time_is_rounded_and_in_the_object_id() {
        let b = Bucket::new(&opts(), None, 1_700_000_123_456);
        assert_eq!(b.min_time_ms, 1_700_000_100_000);
        assert_eq!(b.id.timestamp().timestamp_millis(), 1_700_000_100_000);
        let old = Bucket::new(&opts(), None, -5_000);
        assert_eq!(old.min_time_ms, -60_000);
        assert_eq!(old.id.timestamp().timestamp_millis(), 0);
        assert_ne!(
            Bucket::new(&opts(), None, 0).id,
            Bucket::new(&opts(), None, 0).id
        );
    }

    #[test]
    fn control_min_max_cover_every_field_but_meta() {
        let mut b = Bucket::new(&opts(), Some(Bson::String("s".into())), 1000);
        b.add(doc! {"t": date(1000), "m": "s", "_id": 1, "v": 5.0, "o": {"a": 1, "b": 9}});
        b.add(doc! {"t": date(2000), "m": "s", "_id": 2, "v": 3, "o": {"a": 4, "b": 2}});
        assert_eq!(
            b.control_min(),
            doc! {"t": date(0), "_id": 1, "v": 3, "o": {"a": 1, "b": 2}}
        );
        assert_eq!(
            b.control_max(),
            doc! {"t": date(2000), "_id": 2, "v": 5.0, "o": {"a": 4, "b": 9}}
        );
        let d = b.to_document(false);
        assert_eq!(
            d,
            doc! {
                "_id": b.id,
                "control": {"version": 1, "min": b.control_min(), "max": b.control_max()},
                "meta": "s",
                "data": {
                    "t": {"0": date(1000), "1": date(2000)},
                    "_id": {"0": 1, "1": 2},
                    "v": {"0": 5.0, "1": 3},
                    "o": {"0": {"a": 1, "b": 9}, "1": {"a": 4, "b": 2}},
                }
            }
        );
        assert_eq!(
            b.to_document(true)
                .get_document("control")
                .unwrap()
                .get_bool("closed"),
            Ok(true)
        );
    }

    #[test]
    fn schema_change_is_detected() {
        let mut b = Bucket::new(&opts(), None, 0);
        b.add(doc! {"t": date(0), "x": 1, "o": {"a": 1}});
        assert!(b.is_schema_compatible(&doc! {"t": date(1), "x": 2.5, "new": "s"}));
        assert!(!b.is_schema_compatible(&doc! {"t": date(1), "x": "str"}));
        assert!(!b.is_schema_compatible(&doc! {"t": date(1), "x": {"a": 1}}));
        assert!(!b.is_schema_compatible(&doc! {"t": date(1), "o": 5}));
        assert!(!b.is_schema_compatible(&doc! {"t": date(1), "o": {"a": "s"}}));
        assert!(
            b.is_schema_compatible(&doc! {"t": date(1), "o": {"b": "s"}, "m": "meta is ignored"})
        );
    }

    #[test]
    fn unpack_puts_time_then_meta_then_data_order() {
        let mut b = Bucket::new(&opts(), Some(Bson::Document(doc! {"b": 1, "a": 2})), 0);
        b.add(doc! {"_id": 1, "v": 1, "t": date(5), "m": {"b": 1, "a": 2}});
        b.add(doc! {"_id": 2, "t": date(6), "w": true});
        let docs = unpack_measurements(&b, &opts());
        assert_eq!(
            docs[0],
            doc! {"t": date(5), "m": {"a": 2, "b": 1}, "_id": 1, "v": 1}
        );
        assert_eq!(
            docs[1],
            doc! {"t": date(6), "m": {"a": 2, "b": 1}, "_id": 2, "w": true}
        );
        let keys: Vec<&String> = docs[0].keys().collect();
        assert_eq!(keys, ["t", "m", "_id", "v"]);
        let dec = decode_compressed(&b.encode_compressed()).unwrap();
        assert_eq!(dec.unpack(None).unwrap(), docs);
        assert_eq!(dec.to_document().unwrap(), b.to_document(false));
        assert_eq!(dec.to_bucket().unwrap(), b);
    }

    #[test]
    fn decoded_bucket_unpacks_only_requested_columns() {
        let mut b = Bucket::new(&opts(), None, 0);
        for i in 0..50 {
            b.add(doc! {"t": date(i * 1000), "_id": ObjectId::new(), "v": i as f64 / 4.0, "s": format!("x{}", i % 3)});
        }
        let dec = decode_compressed(&b.encode_compressed()).unwrap();
        assert_eq!(dec.count, 50);
        assert_eq!(dec.meta(), None);
        assert_eq!(
            dec.field_names().collect::<Vec<_>>(),
            ["t", "_id", "v", "s"]
        );
        let only = dec.unpack(Some(&["v"])).unwrap();
        assert_eq!(only[3], doc! {"v": 0.75});
        assert_eq!(dec.column("nope").unwrap(), None);
        assert_eq!(
            dec.column("s").unwrap().unwrap()[4],
            Some(Bson::String("x1".into()))
        );
        assert_eq!(
            dec.control_document(),
            &doc! {"version": 1, "min": b.control_min(), "max": b.control_max()}
        );
    }

    #[test]
    fn full_bucket_compresses_well() {
        let mut b = Bucket::new(&opts(), Some(Bson::String("sensor-1".into())), 0);
        let walk = crate::column::tests::random_walk(1000);
        for (i, x) in walk.iter().enumerate() {
            b.add(doc! {"t": date(1_700_000_000_000 + i as i64 * 1000), "m": "sensor-1", "_id": ObjectId::new(), "temp": *x});
        }
        let raw = bson::to_vec(&b.to_document(false)).unwrap().len();
        let packed = b.encode_compressed().len();
        println!("1000 measurements {{t, _id, temp}}: v1 bucket document {raw} bytes, compressed {packed} bytes");
        assert!(packed * 20 < raw, "{packed} vs {raw}");
    }

    #[test]
    fn null_meta_differs_from_missing_meta_after_decoding() {
        let mut b = Bucket::new(&opts(), Some(Bson::Null), 0);
        b.add(doc! {"t": date(0), "m": null});
        let dec = decode_compressed(&b.encode_compressed()).unwrap();
        assert_eq!(dec.meta(), Some(&Bson::Null));
        assert_eq!(dec.unpack(None).unwrap()[0], doc! {"t": date(0), "m": null});
    }

    #[test]
    fn decode_rejects_corruption() {
        let mut b = Bucket::new(&opts(), None, 0);
        b.add(doc! {"t": date(0), "v": 1.5});
        let enc = b.encode_compressed();
        assert!(decode_compressed(&[]).is_err());
        assert!(decode_compressed(&[2, 0, 0, 0, 0]).is_err());
        for cut in 1..enc.len() {
            if let Ok(d) = decode_compressed(&enc[..cut]) {
                assert!(d.unpack(None).is_err());
            }
        }
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use bson::oid::ObjectId;
    use bson::spec::BinarySubtype;
    use bson::{Binary, Decimal128, Regex, Timestamp};
    use proptest::prelude::*;

    fn leaf() -> impl Strategy<Value = Bson> {
        prop_oneof![
            any::<f64>().prop_map(Bson::Double),
            any::<i32>().prop_map(Bson::Int32),
            any::<i64>().prop_map(Bson::Int64),
            ".{0,8}".prop_map(Bson::String),
            any::<bool>().prop_map(Bson::Boolean),
            Just(Bson::Null),
            Just(Bson::Undefined),
            Just(Bson::MinKey),
            Just(Bson::MaxKey),
            any::<i64>().prop_map(|t| Bson::DateTime(DateTime::from_millis(t))),
            any::<[u8; 12]>().prop_map(|b| Bson::ObjectId(ObjectId::from_bytes(b))),
            any::<[u8; 16]>().prop_map(|b| Bson::Decimal128(Decimal128::from_bytes(b))),
            proptest::collection::vec(any::<u8>(), 0..6).prop_map(|bytes| Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes
            })),
            (any::<u32>(), any::<u32>())
                .prop_map(|(time, increment)| Bson::Timestamp(Timestamp { time, increment })),
            ("[a-z]{0,4}", prop_oneof![Just(""), Just("i"), Just("im")]).prop_map(|(p, o)| {
                Bson::RegularExpression(Regex {
                    pattern: p,
                    options: o.to_string(),
                })
            }),
            "[a-z]{0,4}".prop_map(Bson::JavaScriptCode),
            "[a-z]{0,4}".prop_map(Bson::Symbol),
        ]
    }

    fn value() -> impl Strategy<Value = Bson> {
        leaf().prop_recursive(2, 12, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Bson::Array),
                proptest::collection::vec(("[a-c]", inner), 0..3)
                    .prop_map(|kv| Bson::Document(kv.into_iter().collect())),
            ]
        })
    }

    /// Fields drawn from a small set so columns mix types and have gaps.
    fn measurement() -> impl Strategy<Value = Document> {
        (
            any::<i64>(),
            proptest::collection::vec(
                (
                    prop_oneof![Just("_id"), Just("a"), Just("b"), Just("c")],
                    value(),
                ),
                0..4,
            ),
        )
            .prop_map(|(t, fields)| {
                let mut d = Document::new();
                d.insert("t", DateTime::from_millis(t));
                for (k, v) in fields {
                    d.insert(k, v);
                }
                d
            })
    }

    fn bytes_of(d: &Document) -> Vec<u8> {
        bson::to_vec(d).unwrap_or_default()
    }

    proptest! {
        #[test]
        fn compressed_buckets_round_trip(
            ms in proptest::collection::vec(measurement(), 1..30),
            meta in proptest::option::of(value()),
        ) {
            let opts = TimeseriesOptions::new("t", Some("m"));
            let mut b = Bucket::new(&opts, meta, 0);
            for m in ms {
                b.add(m);
            }
            let dec = decode_compressed(&b.encode_compressed()).unwrap();
            prop_assert_eq!(dec.count, b.count());
            prop_assert_eq!(dec.id, b.id);
            let want: Vec<Vec<u8>> = unpack_measurements(&b, &opts).iter().map(bytes_of).collect();
            let got: Vec<Vec<u8>> = dec.unpack(None).unwrap().iter().map(bytes_of).collect();
            prop_assert_eq!(got, want);
            prop_assert_eq!(bytes_of(&dec.to_document().unwrap()), bytes_of(&b.to_document(false)));
        }

        #[test]
        fn decode_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(d) = decode_compressed(&bytes) {
                let _ = d.unpack(None);
                let _ = d.to_document();
            }
        }

        #[test]
        fn decode_never_panics_on_mutated_buckets(
            ms in proptest::collection::vec(measurement(), 1..10),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        ) {
            let opts = TimeseriesOptions::new("t", None);
            let mut b = Bucket::new(&opts, None, 0);
            for m in ms {
                b.add(m);
            }
            let mut enc = b.encode_compressed();
            for (i, x) in flips {
                let n = enc.len();
                enc[i % n] ^= x;
            }
            if let Ok(d) = decode_compressed(&enc) {
                let _ = d.unpack(None);
            }
        }

        #[test]
        fn column_decode_never_panics(tag in 0u8..8, flags in 0u8..2, body in proptest::collection::vec(any::<u8>(), 0..200), count in 0usize..50) {
            let mut bytes = vec![tag, flags];
            bytes.extend(body);
            let _ = crate::column::decode_column(&bytes, count);
        }
    }
}
