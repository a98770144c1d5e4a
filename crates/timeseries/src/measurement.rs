//! A measurement as an insert receives it: the raw BSON of the request read once, in
//! place, into its time, the bytes of its meta value (the key of the series cache) and
//! its data fields. Nothing is decoded into a document; numbers, dates and ObjectIds
//! become `Bson` values without allocating. The measurement without its meta field, as
//! the insert log keeps it, is two byte ranges of the request.
//!
//! An insert reads all its measurements ([`MeasurementReader::read`]) *before* it takes
//! its collection's series lock: the BSON walk, the time check and the meta
//! normalization (through a cache shared by the collection's inserts) run in parallel
//! across concurrent inserts; only routing to buckets and appending runs under the lock.

use std::ops::Range;
use std::sync::Arc;

use bson::{Bson, RawBsonRef, RawDocument};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use crate::error::TsError;
use crate::meta::{meta_key, normalize_meta};

/// One raw measurement, read.
pub struct Measurement<'a> {
    doc: &'a RawDocument,
    /// The time field's milliseconds (`None`: missing or not a date).
    pub time: Option<i64>,
    /// Byte range of the meta field's element within the document.
    meta_element: Option<std::ops::Range<usize>>,
    /// The meta field's element bytes (type, name, value: the series cache key, the
    /// name being the collection's one meta field name) and its value.
    pub meta: Option<(&'a [u8], RawBsonRef<'a>)>,
    /// Data fields (every field but the meta field), in document order: their range in
    /// the vector [`Measurement::read`] appended them to.
    pub fields: Range<usize>,
}

/// A raw value as an owned `Bson`: numbers, dates, ObjectIds and the like without
/// allocating.
pub fn to_bson(v: RawBsonRef<'_>) -> Result<Bson, TsError> {
    Ok(match v {
        RawBsonRef::Double(x) => Bson::Double(x),
        RawBsonRef::Int32(x) => Bson::Int32(x),
        RawBsonRef::Int64(x) => Bson::Int64(x),
        RawBsonRef::DateTime(d) => Bson::DateTime(d),
        RawBsonRef::ObjectId(o) => Bson::ObjectId(o),
        RawBsonRef::Boolean(b) => Bson::Boolean(b),
        RawBsonRef::Null => Bson::Null,
        other => Bson::try_from(other).map_err(|e| TsError::BadValue(e.to_string()))?,
    })
}

impl<'a> Measurement<'a> {
    /// Reads `doc` (already checked as BSON by the wire layer); its data fields are
    /// appended to `fields` (one vector for a whole batch, so that reading it allocates
    /// once). On an error `fields` is left as it was.
    pub fn read(
        doc: &'a RawDocument,
        time_field: &str,
        meta_field: Option<&str>,
        fields: &mut Vec<(&'a str, Bson)>,
    ) -> Result<Measurement<'a>, TsError> {
        let start = fields.len();
        let read = Self::read_into(doc, time_field, meta_field, fields);
        if read.is_err() {
            fields.truncate(start);
        }
        read
    }

    fn read_into(
        doc: &'a RawDocument,
        time_field: &str,
        meta_field: Option<&str>,
        fields: &mut Vec<(&'a str, Bson)>,
    ) -> Result<Measurement<'a>, TsError> {
        let bytes = doc.as_bytes();
        let first = fields.len();
        let mut m = Measurement {
            doc,
            time: None,
            meta_element: None,
            meta: None,
            fields: first..first,
        };
        let mut at = 4;
        let mut ids = 0;
        for element in doc.iter_elements() {
            let element = element.map_err(|e| TsError::BadValue(e.to_string()))?;
            let key = element.key();
            let start = at;
            let value_at = start + key.len() + 2;
            at = value_at + element.len();
            let value = element
                .value()
                .map_err(|e| TsError::BadValue(e.to_string()))?;
            if Some(key) == meta_field {
                m.meta = Some((bytes.get(start..at).unwrap_or(&[]), value));
                m.meta_element = Some(start..at);
                continue;
            }
            if key == "_id" {
                ids += 1;
                if ids > 1 {
                    return Err(TsError::BadValue(
                        "can't have multiple _id fields in one document".into(),
                    ));
                }
            }
            if key == time_field {
                m.time = match value {
                    RawBsonRef::DateTime(d) => Some(d.timestamp_millis()),
                    _ => None,
                };
            }
            fields.push((key, to_bson(value)?));
        }
        m.fields.end = fields.len();
        Ok(m)
    }

    /// BSON size of the measurement without its meta field (what it adds to a bucket).
    pub fn size_without_meta(&self) -> usize {
        self.doc.as_bytes().len() - self.meta_element.as_ref().map_or(0, |r| r.len())
    }

    /// Appends the measurement without its meta field, as a BSON document.
    pub fn write_without_meta(&self, out: &mut Vec<u8>) {
        let bytes = self.doc.as_bytes();
        let Some(meta) = &self.meta_element else {
            out.extend_from_slice(bytes);
            return;
        };
        let len = self.size_without_meta() as i32;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&bytes[4..meta.start]);
        out.extend_from_slice(&bytes[meta.end..]);
    }
}

/// A series: its normalized meta value and its key.
pub type Series = (Option<Bson>, Vec<u8>);

/// Bytes of raw meta elements and series keys the meta cache holds before it is emptied:
/// a few hundred thousand series of small meta values. At 4,096 series, 100,000 series
/// normalized their meta on every measurement.
const META_CACHE_BYTES: usize = 32 << 20;

/// Recently seen raw meta elements (by their BSON bytes) with their normalized form and
/// series key: a loader sends the same series over and over, and normalizing (clone,
/// sort, encode) each measurement's meta was a tenth of the ingest profile. Looked up by
/// hash: a linear scan comparing whole documents took a third of the line-protocol
/// ingest profile at 100 series.
#[derive(Debug, Default)]
struct MetaCache {
    series: FxHashMap<Vec<u8>, Arc<Series>>,
    bytes: usize,
}

impl MetaCache {
    /// The series of a raw meta element, normalized and cached on first sight.
    fn get_or_normalize(
        &mut self,
        element: &[u8],
        value: RawBsonRef<'_>,
    ) -> Result<Arc<Series>, TsError> {
        if let Some(series) = self.series.get(element) {
            return Ok(series.clone());
        }
        let normalized = Some(normalize_meta(&to_bson(value)?));
        let key = meta_key(normalized.as_ref());
        self.bytes += element.len() + key.len();
        if self.bytes > META_CACHE_BYTES {
            self.series.clear();
            self.bytes = element.len() + key.len();
        }
        let series = Arc::new((normalized, key));
        self.series.insert(element.to_vec(), series.clone());
        Ok(series)
    }
}

/// One measurement read for the catalog: its time and series.
pub struct Read<'a> {
    pub m: Measurement<'a>,
    pub time: i64,
    pub series: Arc<Series>,
}

/// The measurements of one insert, read: each one's outcome, in input order, the data
/// fields of all of them, and how many series they belong to.
pub struct MeasurementBatch<'a> {
    pub reads: Vec<Result<Read<'a>, TsError>>,
    pub fields: Fields<'a>,
    pub series: usize,
}

/// Data fields of a batch of measurements, back to back.
pub type Fields<'a> = Vec<(&'a str, Bson)>;

/// Field vectors kept for the next batches of any collection: a batch of 10,000
/// measurements holds about 12 MB of fields, and a fresh allocation of that size comes
/// from new pages the kernel must zero (a third of the ingest profile when every batch
/// allocated its own). At most [`SPARE_FIELD_VECTORS`] are kept, so the server holds at
/// most that many batches' worth.
static SPARE: Mutex<Vec<Fields<'static>>> = Mutex::new(Vec::new());
const SPARE_FIELD_VECTORS: usize = 4;

/// An empty field vector of any lifetime on `v`'s allocation: std collects a
/// `vec::IntoIter` mapped to a type of the same layout in place (if it ever did not, a
/// new vector would be allocated, which is only slower).
// `filter` would keep the element type, whose lifetime is what changes here.
#[allow(clippy::unnecessary_filter_map)]
fn recycle<'b>(mut v: Fields<'_>) -> Fields<'b> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// Reads a collection's measurements (time and meta field names, and the meta cache its
/// inserts share). Cloned out of the catalog, it reads without the series lock.
#[derive(Debug, Clone)]
pub struct MeasurementReader {
    time_field: String,
    meta_field: Option<String>,
    cache: Arc<Mutex<MetaCache>>,
}

pub(crate) fn time_error(time_field: &str) -> TsError {
    TsError::BadValue(format!(
        "'{time_field}' must be present and contain a valid BSON UTC datetime value"
    ))
}

impl MeasurementReader {
    pub fn new(time_field: &str, meta_field: Option<&str>) -> MeasurementReader {
        MeasurementReader {
            time_field: time_field.to_string(),
            meta_field: meta_field.map(str::to_string),
            cache: Arc::default(),
        }
    }

    /// The same cache under other field names (collMod keeps the names, but the catalog
    /// takes whatever options it is given).
    pub fn renamed(&self, time_field: &str, meta_field: Option<&str>) -> MeasurementReader {
        MeasurementReader {
            cache: self.cache.clone(),
            ..MeasurementReader::new(time_field, meta_field)
        }
    }

    /// Keeps a batch's field vector (emptied) for a later batch.
    pub fn give_back(fields: Fields<'_>) {
        let mut spare = SPARE.lock();
        if spare.len() < SPARE_FIELD_VECTORS {
            spare.push(recycle(fields));
        }
    }

    /// Reads every measurement: at most 16 MB, a date in the time field, the series of
    /// its meta value. A batch's series are looked up in a map of its own first, so the
    /// shared cache is locked about once per series per batch.
    pub fn read<'a>(&self, raws: &[&'a RawDocument]) -> MeasurementBatch<'a> {
        let spare = SPARE.lock().pop();
        let mut fields = spare.map(recycle).unwrap_or_default();
        let mut seen: FxHashMap<&'a [u8], Arc<Series>> = FxHashMap::default();
        let no_meta: Arc<Series> = Arc::new((None, meta_key(None)));
        let reads = raws
            .iter()
            .map(|raw| {
                let (m, time) = self.read_one(raw, &mut fields)?;
                let series = match m.meta {
                    None => no_meta.clone(),
                    Some((element, value)) => match seen.get(element) {
                        Some(s) => s.clone(),
                        None => {
                            let s = self.cache.lock().get_or_normalize(element, value)?;
                            seen.insert(element, s.clone());
                            s
                        }
                    },
                };
                Ok(Read { m, time, series })
            })
            .collect();
        MeasurementBatch {
            reads,
            fields,
            series: seen.len() + usize::from(Arc::strong_count(&no_meta) > 1),
        }
    }

    fn read_one<'a>(
        &self,
        raw: &'a RawDocument,
        fields: &mut Vec<(&'a str, Bson)>,
    ) -> Result<(Measurement<'a>, i64), TsError> {
        let len = raw.as_bytes().len();
        let max = hourglass_query::limits::MAX_BSON_OBJECT_SIZE;
        if len > max {
            return Err(TsError::TooLarge(format!(
                "Measurement of {len} bytes is over the maximum document size of {max} bytes"
            )));
        }
        let time_field = &self.time_field;
        let m = Measurement::read(raw, time_field, self.meta_field.as_deref(), fields)?;
        match m.time {
            Some(t) => Ok((m, t)),
            None => {
                fields.truncate(m.fields.start);
                Err(time_error(time_field))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, DateTime, RawDocumentBuf};

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).unwrap()
    }

    #[test]
    fn a_refused_measurement_leaves_no_fields_behind_for_the_next_one() {
        let t = DateTime::from_millis(1_000);
        let docs = [
            raw(doc! {"t": t, "m": "a", "x": 1.0}),
            raw(doc! {"y": 2.0, "z": 3.0, "t": "not a date", "m": "b"}),
            raw(doc! {"m": "a", "t": t, "w": 4}),
        ];
        let refs: Vec<&RawDocument> = docs.iter().map(|d| &**d).collect();
        let batch = MeasurementReader::new("t", Some("m")).read(&refs);
        assert!(batch.reads[1].is_err());
        let names = |i: usize| -> Vec<&str> {
            let r = batch.reads[i].as_ref().unwrap();
            batch.fields[r.m.fields.clone()]
                .iter()
                .map(|(k, _)| *k)
                .collect()
        };
        assert_eq!(names(0), ["t", "x"]);
        assert_eq!(names(2), ["t", "w"]);
        let (a, c) = (
            batch.reads[0].as_ref().unwrap(),
            batch.reads[2].as_ref().unwrap(),
        );
        assert!(
            Arc::ptr_eq(&a.series, &c.series),
            "one series per meta value within a batch"
        );
        assert_eq!(batch.series, 1);
    }

    #[test]
    fn a_field_vector_given_back_keeps_its_allocation_for_another_lifetime() {
        let t = DateTime::from_millis(1_000);
        let docs: Vec<RawDocumentBuf> = (0..1000).map(|i| raw(doc! {"t": t, "v": i})).collect();
        let refs: Vec<&RawDocument> = docs.iter().map(|d| &**d).collect();
        let first = MeasurementReader::new("t", Some("m")).read(&refs);
        assert_eq!(first.series, 1, "no meta is one series");
        assert_eq!(first.fields.len(), 2000);
        let (capacity, at) = (first.fields.capacity(), first.fields.as_ptr() as usize);
        let again: Fields<'static> = recycle(first.fields);
        assert!(again.is_empty());
        assert_eq!(again.capacity(), capacity);
        assert_eq!(again.as_ptr() as usize, at);
    }

    #[test]
    fn equal_metas_in_another_field_order_are_one_series_across_batches() {
        let t = DateTime::from_millis(1_000);
        let reader = MeasurementReader::new("t", Some("m"));
        let one = raw(doc! {"t": t, "m": {"a": 1, "b": 2}});
        let two = raw(doc! {"t": t, "m": {"b": 2, "a": 1}});
        let first = reader.read(&[&*one]);
        let second = reader.clone().read(&[&*two]);
        let key = |b: &MeasurementBatch<'_>| b.reads[0].as_ref().unwrap().series.1.clone();
        assert_eq!(key(&first), key(&second));
    }
}
