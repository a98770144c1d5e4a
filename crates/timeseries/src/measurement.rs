//! A measurement as an insert receives it: the raw BSON of the request read once, in
//! place, into its time, the bytes of its meta value (the key of the series cache) and
//! its data fields. Nothing is decoded into a document; numbers, dates and ObjectIds
//! become `Bson` values without allocating. The measurement without its meta field, as
//! the insert log keeps it, is two byte ranges of the request.

use bson::{Bson, RawBsonRef, RawDocument};

use crate::error::TsError;

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
    /// Data fields (every field but the meta field), in document order.
    pub fields: Vec<(&'a str, Bson)>,
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
    /// Reads `doc` (already checked as BSON by the wire layer); its fields go into
    /// `fields` (emptied first: the caller passes the previous measurement's back, so that
    /// reading a batch allocates once).
    pub fn read(
        doc: &'a RawDocument,
        time_field: &str,
        meta_field: Option<&str>,
        mut fields: Vec<(&'a str, Bson)>,
    ) -> Result<Measurement<'a>, TsError> {
        let bytes = doc.as_bytes();
        fields.clear();
        let mut m = Measurement {
            doc,
            time: None,
            meta_element: None,
            meta: None,
            fields,
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
            m.fields.push((key, to_bson(value)?));
        }
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
