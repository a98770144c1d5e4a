//! Documents to and from Arrow record batches: Parquet import and export
//! (`hourglass import`/`export`) and the archive's files.
//!
//! Nested documents are flattened into dotted column names (`tags.hostname`) and each
//! column is typed from every value it will hold. Two typings:
//!
//! * [`Typing::Export`], friendly to other tools: int32, int64 (ints that do not all fit
//!   int32), double (any double among numbers), boolean, UTC millisecond timestamp
//!   (dates), text (strings; ObjectIds as hex, Decimal128 as text), and relaxed Extended
//!   JSON text for anything else or a column whose values have several kinds.
//! * [`Typing::Exact`], for the archive, which must read back exactly what it wrote: a
//!   column keeps one native type only when every value has it; anything else (mixed
//!   kinds, null, Decimal128, arrays, empty documents) is canonical Extended JSON text
//!   in a column whose field metadata says so ([`EXTJSON_KEY`]), parsed back on read;
//!   ObjectIds are 12-byte binary ([`OBJECT_ID_KEY`]).
//!
//! Reading reverses it: dotted names nest again, timestamps and dates become BSON dates.

use arrow_array::builder::{
    BooleanBuilder, FixedSizeBinaryBuilder, Float64Builder, Int32Builder, Int64Builder,
    StringBuilder, TimestampMillisecondBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use bson::{Binary, Bson, DateTime, Document};
use std::collections::HashMap;
use std::sync::Arc;

/// Field metadata key marking a text column of canonical Extended JSON values.
pub const EXTJSON_KEY: &str = "hourglass.extjson";
/// Field metadata key marking a 12-byte binary column of ObjectIds.
pub const OBJECT_ID_KEY: &str = "hourglass.objectid";

/// Errors converting between documents and record batches.
#[derive(Debug, thiserror::Error)]
pub enum ColumnarError {
    #[error("column '{0}' is both a value and a document")]
    PathConflict(String),
    #[error("invalid decimal {0}")]
    Decimal(String),
    #[error("cannot read a Parquet column of type {0}")]
    Unsupported(DataType),
    #[error("invalid Extended JSON in column '{column}': {reason}")]
    ExtJson { column: String, reason: String },
    #[error(transparent)]
    Arrow(#[from] arrow_schema::ArrowError),
}

/// How columns are typed (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Typing {
    #[default]
    Export,
    Exact,
}

/// The column kinds of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int32,
    Int64,
    Double,
    Bool,
    Time,
    Text,
    /// Extended JSON text.
    Json,
    /// 12 bytes ([`Typing::Exact`] only; [`OBJECT_ID_KEY`] marks the field).
    ObjectId,
}

impl Kind {
    fn of(v: &Bson, typing: Typing) -> Option<Kind> {
        if typing == Typing::Exact {
            return Some(match v {
                Bson::Int32(_) => Kind::Int32,
                Bson::Int64(_) => Kind::Int64,
                Bson::Double(_) => Kind::Double,
                Bson::Boolean(_) => Kind::Bool,
                Bson::DateTime(_) => Kind::Time,
                Bson::String(_) => Kind::Text,
                Bson::ObjectId(_) => Kind::ObjectId,
                _ => Kind::Json,
            });
        }
        Some(match v {
            Bson::Null | Bson::Undefined => return None,
            Bson::Int32(_) => Kind::Int32,
            Bson::Int64(_) => Kind::Int64,
            Bson::Double(_) => Kind::Double,
            Bson::Boolean(_) => Kind::Bool,
            Bson::DateTime(_) => Kind::Time,
            Bson::String(_) | Bson::ObjectId(_) | Bson::Decimal128(_) => Kind::Text,
            _ => Kind::Json,
        })
    }

    /// The kind a column needs for values of both kinds.
    fn join(self, other: Kind, typing: Typing) -> Kind {
        use Kind::*;
        match (self, other) {
            (a, b) if a == b => a,
            _ if typing == Typing::Exact => Json,
            (Int32, Int64) | (Int64, Int32) => Int64,
            (Int32 | Int64 | Double, Int32 | Int64 | Double) => Double,
            _ => Json,
        }
    }

    fn data_type(self) -> DataType {
        match self {
            Kind::Int32 => DataType::Int32,
            Kind::Int64 => DataType::Int64,
            Kind::Double => DataType::Float64,
            Kind::Bool => DataType::Boolean,
            Kind::Time => DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            Kind::Text | Kind::Json => DataType::Utf8,
            Kind::ObjectId => DataType::FixedSizeBinary(12),
        }
    }
}

/// Calls `f` with each leaf of `doc`, named by its dotted path.
pub fn flatten<'a>(doc: &'a Document, prefix: &str, f: &mut impl FnMut(String, &'a Bson)) {
    for (k, v) in doc {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Bson::Document(inner) if !inner.is_empty() => flatten(inner, &name, f),
            _ => f(name, v),
        }
    }
}

/// The columns of an export, learned from its documents.
#[derive(Default)]
pub struct Columns {
    names: Vec<String>,
    kinds: HashMap<String, Option<Kind>>,
    /// With `--fields`: only these, in this order.
    fixed: bool,
    typing: Typing,
}

impl Columns {
    pub fn fixed(names: &[String]) -> Columns {
        Columns {
            names: names.to_vec(),
            kinds: names.iter().map(|n| (n.clone(), None)).collect(),
            fixed: true,
            typing: Typing::Export,
        }
    }

    /// Columns typed with `typing`, learned from the documents given to `learn`.
    pub fn new(typing: Typing) -> Columns {
        Columns {
            typing,
            ..Columns::default()
        }
    }

    pub fn learn(&mut self, doc: &Document) {
        let typing = self.typing;
        flatten(doc, "", &mut |name, v| {
            let kind = Kind::of(v, typing);
            match self.kinds.get_mut(&name) {
                Some(k) => {
                    *k = match (*k, kind) {
                        (Some(a), Some(b)) => Some(a.join(b, typing)),
                        (a, b) => a.or(b),
                    }
                }
                None if !self.fixed => {
                    self.names.push(name.clone());
                    self.kinds.insert(name, kind);
                }
                None => {}
            }
        });
    }

    /// Moves `first` (the time field, then the meta field's columns) to the front.
    pub fn put_first(&mut self, first: &[&str]) {
        let rank = |n: &String| {
            first
                .iter()
                .position(|f| n == f || n.strip_prefix(f).is_some_and(|r| r.starts_with('.')))
                .unwrap_or(first.len())
        };
        self.names.sort_by_key(rank);
    }

    /// Column names, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn schema(&self) -> Arc<Schema> {
        Arc::new(Schema::new(
            self.names
                .iter()
                .map(|n| {
                    let kind = self.kind(n);
                    let field = Field::new(n, kind.data_type(), true);
                    let marker = match kind {
                        Kind::Json if self.typing == Typing::Exact => EXTJSON_KEY,
                        Kind::ObjectId => OBJECT_ID_KEY,
                        _ => return field,
                    };
                    field.with_metadata(HashMap::from([(marker.to_string(), "1".to_string())]))
                })
                .collect::<Vec<_>>(),
        ))
    }

    fn kind(&self, name: &str) -> Kind {
        self.kinds
            .get(name)
            .copied()
            .flatten()
            .unwrap_or(Kind::Text)
    }

    /// The documents as one batch of these columns.
    pub fn batch(&self, docs: &[Document]) -> Result<RecordBatch, ColumnarError> {
        let index: HashMap<&str, usize> = self
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let mut cells: Vec<Vec<Option<&Bson>>> = vec![vec![None; docs.len()]; self.names.len()];
        for (row, doc) in docs.iter().enumerate() {
            flatten(doc, "", &mut |name, v| {
                if let Some(&c) = index.get(name.as_str()) {
                    cells[c][row] = Some(v);
                }
            });
        }
        let arrays: Vec<ArrayRef> = self
            .names
            .iter()
            .zip(&cells)
            .map(|(name, values)| column(self.kind(name), self.typing, values))
            .collect();
        Ok(RecordBatch::try_new(self.schema(), arrays)?)
    }
}

fn column(kind: Kind, typing: Typing, values: &[Option<&Bson>]) -> ArrayRef {
    let values = values
        .iter()
        .map(|v| v.filter(|v| Kind::of(v, typing).is_some()));
    match kind {
        Kind::Int32 => {
            let mut b = Int32Builder::new();
            values.for_each(|v| b.append_option(v.and_then(|v| v.as_i32())));
            Arc::new(b.finish())
        }
        Kind::Int64 => {
            let mut b = Int64Builder::new();
            values.for_each(|v| b.append_option(v.and_then(as_i64)));
            Arc::new(b.finish())
        }
        Kind::Double => {
            let mut b = Float64Builder::new();
            values.for_each(|v| b.append_option(v.and_then(as_f64)));
            Arc::new(b.finish())
        }
        Kind::Bool => {
            let mut b = BooleanBuilder::new();
            values.for_each(|v| b.append_option(v.and_then(Bson::as_bool)));
            Arc::new(b.finish())
        }
        Kind::Time => {
            let mut b = TimestampMillisecondBuilder::new().with_timezone("UTC");
            values.for_each(|v| {
                b.append_option(v.and_then(Bson::as_datetime).map(|d| d.timestamp_millis()))
            });
            Arc::new(b.finish())
        }
        Kind::ObjectId => {
            let mut b = FixedSizeBinaryBuilder::with_capacity(values.len(), 12);
            for v in values {
                match v {
                    Some(Bson::ObjectId(o)) => {
                        // Always 12 bytes, the builder's width.
                        let _ = b.append_value(o.bytes());
                    }
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        Kind::Text | Kind::Json => {
            let mut b = StringBuilder::new();
            values.for_each(|v| b.append_option(v.map(|v| text(v, kind, typing))));
            Arc::new(b.finish())
        }
    }
}

fn as_i64(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(*i as i64),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

fn as_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Double(d) => Some(*d),
        other => as_i64(other).map(|i| i as f64),
    }
}

fn text(v: &Bson, kind: Kind, typing: Typing) -> String {
    match (v, kind) {
        (Bson::String(s), Kind::Text) => s.clone(),
        (_, Kind::Json) if typing == Typing::Exact => {
            v.clone().into_canonical_extjson().to_string()
        }
        (Bson::ObjectId(o), Kind::Text) => o.to_hex(),
        (Bson::Decimal128(d), Kind::Text) => d.to_string(),
        _ => v.clone().into_relaxed_extjson().to_string(),
    }
}

/// The rows of a batch as documents; null cells are left out, dotted names nest.
pub fn documents(batch: &RecordBatch) -> Result<Vec<Document>, ColumnarError> {
    let mut docs = vec![Document::new(); batch.num_rows()];
    let schema = batch.schema();
    for (c, field) in schema.fields().iter().enumerate() {
        let path: Vec<String> = field.name().split('.').map(str::to_string).collect();
        let cells = Cells::new(field, batch.column(c).as_ref());
        for (row, doc) in docs.iter_mut().enumerate() {
            if let Some(v) = cells.get(row)? {
                set_path(doc, &path, v).map_err(ColumnarError::PathConflict)?;
            }
        }
    }
    Ok(docs)
}

/// One column's cells as BSON, Extended JSON text parsed back where the field says so.
pub struct Cells<'a> {
    array: &'a dyn Array,
    name: &'a str,
    extjson: bool,
    object_id: bool,
}

impl<'a> Cells<'a> {
    pub fn new(field: &'a Field, array: &'a dyn Array) -> Cells<'a> {
        Cells {
            array,
            name: field.name(),
            extjson: field.metadata().contains_key(EXTJSON_KEY),
            object_id: field.metadata().contains_key(OBJECT_ID_KEY),
        }
    }

    /// The cell of `row` (None for null).
    pub fn get(&self, row: usize) -> Result<Option<Bson>, ColumnarError> {
        match value_at(self.array, row)? {
            Some(Bson::String(text)) if self.extjson => {
                let bad = |reason: String| ColumnarError::ExtJson {
                    column: self.name.to_string(),
                    reason,
                };
                let json: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
                Bson::try_from(json)
                    .map(Some)
                    .map_err(|e| bad(e.to_string()))
            }
            Some(Bson::Binary(b)) if self.object_id => {
                let bytes: [u8; 12] =
                    b.bytes
                        .as_slice()
                        .try_into()
                        .map_err(|_| ColumnarError::ExtJson {
                            column: self.name.to_string(),
                            reason: "an ObjectId column holds a value that is not 12 bytes".into(),
                        })?;
                Ok(Some(Bson::ObjectId(bson::oid::ObjectId::from_bytes(bytes))))
            }
            other => Ok(other),
        }
    }
}

/// Sets `value` at the dotted `path`, making the documents on the way.
fn set_path(doc: &mut Document, path: &[String], value: Bson) -> Result<(), String> {
    match path {
        [] => Ok(()),
        [last] => {
            doc.insert(last.clone(), value);
            Ok(())
        }
        [first, rest @ ..] => {
            if !doc.contains_key(first) {
                doc.insert(first.clone(), Document::new());
            }
            match doc.get_mut(first) {
                Some(Bson::Document(inner)) => set_path(inner, rest, value),
                _ => Err(first.clone()),
            }
        }
    }
}

/// One cell as BSON (None for null).
fn value_at(a: &dyn Array, i: usize) -> Result<Option<Bson>, ColumnarError> {
    if a.is_null(i) {
        return Ok(None);
    }
    Ok(Some(match a.data_type() {
        DataType::Boolean => Bson::Boolean(a.as_boolean().value(i)),
        DataType::Int8 => Bson::Int32(a.as_primitive::<Int8Type>().value(i).into()),
        DataType::Int16 => Bson::Int32(a.as_primitive::<Int16Type>().value(i).into()),
        DataType::Int32 => Bson::Int32(a.as_primitive::<Int32Type>().value(i)),
        DataType::Int64 => Bson::Int64(a.as_primitive::<Int64Type>().value(i)),
        DataType::UInt8 => Bson::Int32(a.as_primitive::<UInt8Type>().value(i).into()),
        DataType::UInt16 => Bson::Int32(a.as_primitive::<UInt16Type>().value(i).into()),
        DataType::UInt32 => Bson::Int64(a.as_primitive::<UInt32Type>().value(i).into()),
        DataType::UInt64 => {
            let u = a.as_primitive::<UInt64Type>().value(i);
            i64::try_from(u).map_or(Bson::Double(u as f64), Bson::Int64)
        }
        DataType::Float16 => Bson::Double(a.as_primitive::<Float16Type>().value(i).to_f64()),
        DataType::Float32 => Bson::Double(a.as_primitive::<Float32Type>().value(i).into()),
        DataType::Float64 => Bson::Double(a.as_primitive::<Float64Type>().value(i)),
        DataType::Utf8 => Bson::String(a.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Bson::String(a.as_string::<i64>().value(i).to_string()),
        DataType::Utf8View => Bson::String(a.as_string_view().value(i).to_string()),
        DataType::Binary => binary(a.as_binary::<i32>().value(i)),
        DataType::LargeBinary => binary(a.as_binary::<i64>().value(i)),
        DataType::BinaryView => binary(a.as_binary_view().value(i)),
        DataType::FixedSizeBinary(_) => binary(a.as_fixed_size_binary().value(i)),
        DataType::Date32 => Bson::DateTime(DateTime::from_millis(
            a.as_primitive::<Date32Type>().value(i) as i64 * 86_400_000,
        )),
        DataType::Date64 => Bson::DateTime(DateTime::from_millis(
            a.as_primitive::<Date64Type>().value(i),
        )),
        DataType::Timestamp(unit, _) => {
            let ms = match unit {
                TimeUnit::Second => a
                    .as_primitive::<TimestampSecondType>()
                    .value(i)
                    .saturating_mul(1000),
                TimeUnit::Millisecond => a.as_primitive::<TimestampMillisecondType>().value(i),
                TimeUnit::Microsecond => a
                    .as_primitive::<TimestampMicrosecondType>()
                    .value(i)
                    .div_euclid(1000),
                TimeUnit::Nanosecond => a
                    .as_primitive::<TimestampNanosecondType>()
                    .value(i)
                    .div_euclid(1_000_000),
            };
            Bson::DateTime(DateTime::from_millis(ms))
        }
        DataType::Decimal128(_, scale) => {
            let raw = a.as_primitive::<Decimal128Type>().value(i);
            let text = decimal_text(raw, *scale);
            Bson::Decimal128(text.parse().map_err(|_| ColumnarError::Decimal(text))?)
        }
        DataType::Struct(_) => {
            let s = a.as_struct();
            let mut d = Document::new();
            for (f, col) in s.fields().iter().zip(s.columns()) {
                if let Some(v) = value_at(col.as_ref(), i)? {
                    d.insert(f.name().clone(), v);
                }
            }
            Bson::Document(d)
        }
        DataType::List(_) => list(a.as_list::<i32>().value(i).as_ref())?,
        DataType::LargeList(_) => list(a.as_list::<i64>().value(i).as_ref())?,
        other => return Err(ColumnarError::Unsupported(other.clone())),
    }))
}

fn list(values: &dyn Array) -> Result<Bson, ColumnarError> {
    (0..values.len())
        .map(|j| value_at(values, j).map(|v| v.unwrap_or(Bson::Null)))
        .collect::<Result<Vec<_>, _>>()
        .map(Bson::Array)
}

fn binary(bytes: &[u8]) -> Bson {
    Bson::Binary(Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: bytes.to_vec(),
    })
}

fn decimal_text(raw: i128, scale: i8) -> String {
    if scale <= 0 {
        return format!("{raw}E{}", -(scale as i32));
    }
    let neg = raw < 0;
    let digits = raw.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{}{int}.{frac}", if neg { "-" } else { "" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn documents_survive_a_batch_and_back_with_their_types() {
        let docs = vec![
            doc! {"t": DateTime::from_millis(5), "m": {"host": "a"}, "i": 1, "l": 3_000_000_000i64, "x": 1.5, "b": true},
            doc! {"t": DateTime::from_millis(6), "m": {"host": "b"}, "i": 2, "l": 4i64, "x": 2.5, "b": false},
        ];
        let mut cols = Columns::default();
        docs.iter().for_each(|d| cols.learn(d));
        let batch = cols.batch(&docs).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(batch.schema().field(1).name(), "m.host");
        assert_eq!(documents(&batch).unwrap_or_default(), docs);
    }

    #[test]
    fn a_column_of_ints_and_doubles_is_double_and_of_mixed_kinds_is_extended_json() {
        let docs = vec![doc! {"n": 1, "v": "a"}, doc! {"n": 2.5, "v": 3}, doc! {}];
        let mut cols = Columns::default();
        docs.iter().for_each(|d| cols.learn(d));
        let back =
            documents(&cols.batch(&docs).unwrap_or_else(|e| panic!("{e}"))).unwrap_or_default();
        assert_eq!(
            back,
            vec![
                doc! {"n": 1.0, "v": "\"a\""},
                doc! {"n": 2.5, "v": "3"},
                doc! {}
            ]
        );
    }

    #[test]
    fn exact_typing_reads_back_every_value_with_its_type() {
        let oid = bson::oid::ObjectId::new();
        let docs = vec![
            doc! {"t": DateTime::from_millis(5), "m": {"host": "a", "e": {}}, "n": 1, "v": "x", "o": oid, "z": Bson::Null},
            doc! {"t": DateTime::from_millis(6), "m": {"host": "b", "e": {}}, "n": 2.5, "v": [1, "y"], "o": oid},
            doc! {"t": DateTime::from_millis(7), "m": {"host": "c", "e": {}}, "n": 3i64},
        ];
        let mut cols = Columns::new(Typing::Exact);
        docs.iter().for_each(|d| cols.learn(d));
        let batch = cols.batch(&docs).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            batch.schema().field(0).data_type(),
            &DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
        );
        assert_eq!(documents(&batch).unwrap_or_else(|e| panic!("{e}")), docs);
    }

    #[test]
    fn decimals_keep_their_scale() {
        assert_eq!(decimal_text(12345, 2), "123.45");
        assert_eq!(decimal_text(-5, 3), "-0.005");
        assert_eq!(decimal_text(7, 0), "7E0");
    }
}
