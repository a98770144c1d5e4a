//! Direct inserts into `system.buckets.<coll>`: what `mongorestore` and a plain
//! `insert_many` of dumped bucket documents do. A bucket `{_id, control: {version, min,
//! max, closed?, count?}, meta?, data}` is one of:
//! - version 1 (uncompressed): `data: {field: {"0": v, ...}}`;
//! - version 2 (compressed, measurements sorted by time) or 3 (compressed, unsorted, as
//!   MongoDB 8.0 writes): `data: {field: BinData(7)}`, each field a BSONColumn
//!   (`crate::bsoncolumn`, described in `docs/formats/bsoncolumn.md`) of exactly
//!   `control.count` entries, a skip where a measurement lacks the field; `control.count`
//!   is required.
//!
//! It is checked as MongoDB's buckets validator checks it, plus what this store relies
//! on: the `_id`'s time is the bucket's `control.min` time (seconds), every measurement has
//! a date in the time field, no later than that minimum plus `bucketMaxSpanSeconds`, and
//! no earlier. It is then stored closed, as a bucket the catalog closed, after the open
//! bucket of its series is closed (so the series' newest data is not split across an open
//! bucket and a restored one). A measurement the collection's 2dsphere indexes cannot hold
//! is refused as an insert refuses it. Nothing is written for a refused bucket.

use super::insert_log::Retired;
use super::keys::{bucket_key, CLOSED};
use super::{stage_close, stage_store, StoreError, TimeseriesStore, TsInsertOutcome};
use crate::bucket::Bucket;
use crate::options::TimeseriesOptions;
use bson::{Bson, Document};
use hourglass_catalog::Collection;
use std::sync::Arc;

fn invalid(msg: impl Into<String>) -> StoreError {
    StoreError::InvalidBucket(format!("Document failed validation: {}", msg.into()))
}

/// A bucket document as a bucket, or why it cannot be one (`geo_fields`: the fields the
/// collection's 2dsphere indexes hold, checked in every measurement as inserts check them).
pub(super) fn parse_bucket(
    doc: &Document,
    options: &TimeseriesOptions,
    geo_fields: &[String],
) -> Result<Bucket, StoreError> {
    for k in doc.keys() {
        if !matches!(k.as_str(), "_id" | "control" | "meta" | "data") {
            return Err(invalid(format!("unknown bucket field '{k}'")));
        }
    }
    let Some(Bson::ObjectId(id)) = doc.get("_id") else {
        return Err(invalid("_id must be an ObjectId"));
    };
    let control = doc
        .get_document("control")
        .map_err(|_| invalid("control must be an object"))?;
    let number = |v: &Bson| hourglass_query::num::Num::from_bson(v).map(|n| n.as_f64());
    let compressed = match control.get("version").and_then(number) {
        Some(1.0) => false,
        Some(2.0 | 3.0) => true,
        _ => return Err(invalid("control.version must be 1, 2 or 3")),
    };
    for k in control.keys() {
        if !matches!(k.as_str(), "version" | "min" | "max" | "closed" | "count") {
            return Err(invalid(format!("unknown control field '{k}'")));
        }
    }
    let tf = &options.time_field;
    let min = control
        .get_document("min")
        .map_err(|_| invalid("control.min must be an object"))?;
    control
        .get_document("max")
        .map_err(|_| invalid("control.max must be an object"))?;
    let Some(Bson::DateTime(min_time)) = min.get(tf) else {
        return Err(invalid(format!("control.min.{tf} must be a date")));
    };
    let min_ms = min_time.timestamp_millis();
    if id.timestamp().timestamp_millis() / 1000 != min_ms.div_euclid(1000) {
        return Err(StoreError::Ts(crate::error::TsError::BadValue(format!(
            "the bucket _id's time ({}) must be its control.min.{tf} time in seconds",
            id.timestamp()
        ))));
    }
    let data = doc
        .get_document("data")
        .map_err(|_| invalid("data must be an object"))?;
    let declared = match control.get("count") {
        Some(c) => Some(
            number(c)
                .filter(|n| n.fract() == 0.0 && *n >= 0.0 && *n <= u32::MAX as f64)
                .ok_or_else(|| invalid("control.count must be a non-negative integer"))?
                as usize,
        ),
        None => None,
    };
    let rows = if compressed {
        let count =
            declared.ok_or_else(|| invalid("a compressed bucket must have control.count"))?;
        compressed_rows(data, count)?
    } else {
        uncompressed_rows(data, tf)?
    };
    let count = rows.len();
    if count == 0 {
        return Err(invalid(format!("data.{tf} holds no measurement")));
    }
    if declared.is_some_and(|c| c != count) {
        return Err(invalid("control.count must be the number of measurements"));
    }
    let span = options.max_span_millis();
    let meta = doc.get("meta").cloned();
    if meta.is_some() && options.meta_field.is_none() {
        return Err(invalid("meta without a metaField"));
    }
    let mut bucket = Bucket::with_id(options, *id, meta, min_ms);
    for (i, row) in rows.into_iter().enumerate() {
        let Some(Bson::DateTime(t)) = row.get(tf) else {
            return Err(invalid(format!("measurement {i} has no date in data.{tf}")));
        };
        let t = t.timestamp_millis();
        if t < min_ms || t.saturating_sub(min_ms) >= span {
            return Err(StoreError::Ts(crate::error::TsError::BadValue(format!(
                "measurement {i}'s time is outside the bucket's span (control.min.{tf} plus bucketMaxSpanSeconds)"
            ))));
        }
        super::geo::check(&row, geo_fields)?;
        bucket.add(row);
    }
    Ok(bucket)
}

/// The measurements of a version 1 bucket: `data.<field>` maps row indexes ("0", "1",
/// ...) to values; the time field's column holds one per measurement.
fn uncompressed_rows(data: &Document, tf: &str) -> Result<Vec<Document>, StoreError> {
    let count = data
        .get_document(tf)
        .map_err(|_| invalid(format!("data.{tf} must be an object")))?
        .len();
    let mut rows = vec![Document::new(); count];
    for (field, column) in data {
        let Bson::Document(column) = column else {
            return Err(invalid(format!("data.{field} must be an object")));
        };
        for (i, v) in column {
            let row = i
                .parse::<usize>()
                .ok()
                .filter(|r| *r < count && r.to_string() == *i)
                .ok_or_else(|| {
                    invalid(format!(
                        "data.{field} has key '{i}', not a row index below {count}"
                    ))
                })?;
            rows[row].insert(field.clone(), v.clone());
        }
    }
    Ok(rows)
}

/// The `count` measurements of a compressed bucket: each `data.<field>` is a BSONColumn
/// of exactly `count` entries.
fn compressed_rows(data: &Document, count: usize) -> Result<Vec<Document>, StoreError> {
    let mut rows = vec![Document::new(); count];
    for (field, column) in data {
        let bytes = match column {
            Bson::Binary(b) if b.subtype == bson::spec::BinarySubtype::Column => &b.bytes,
            _ => {
                return Err(invalid(format!(
                    "data.{field} of a compressed bucket must be BinData of subtype 7 (column)"
                )))
            }
        };
        let values = crate::bsoncolumn::decode(bytes, count)
            .map_err(|e| invalid(format!("data.{field} is not a valid BSONColumn: {e}")))?;
        if values.len() != count {
            return Err(invalid(format!(
                "data.{field} holds {} entries where control.count is {count}",
                values.len()
            )));
        }
        for (row, v) in rows.iter_mut().zip(values) {
            if let Some(v) = v {
                row.insert(field.clone(), v);
            }
        }
    }
    Ok(rows)
}

impl TimeseriesStore {
    /// Inserts bucket documents into a buckets collection (see the module comment); each
    /// is stored durably, one atomic batch per bucket, and an ordered insert stops at the
    /// first refusal.
    pub fn insert_buckets(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        docs: &[Document],
        ordered: bool,
    ) -> Result<TsInsertOutcome, StoreError> {
        let series = self.series(buckets, options)?;
        let geo_fields = Self::geo_fields(buckets, options)?;
        let mut out = TsInsertOutcome::default();
        for (i, doc) in docs.iter().enumerate() {
            let stored = parse_bucket(doc, options, &geo_fields)
                .and_then(|b| self.store_restored(&series, buckets, b));
            match stored {
                Ok(()) => out.inserted += 1,
                Err(e) if e.is_out_of_space() => return Err(e),
                Err(e) => {
                    out.errors.push((i, e));
                    if ordered {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }

    fn store_restored(
        &self,
        series: &parking_lot::Mutex<super::Series>,
        buckets: &Arc<Collection>,
        bucket: Bucket,
    ) -> Result<(), StoreError> {
        let mut s = super::modify::lock_settled(series);
        let engine = buckets.engine().clone();
        let taken = s.catalog.open_bucket(bucket.id).is_some()
            || s.closing.contains_key(&bucket.id)
            || engine
                .snapshot()
                .get(buckets.tree(), &bucket_key(CLOSED, &bucket.id))?
                .is_some();
        if taken {
            return Err(buckets.duplicate(&Bson::ObjectId(bucket.id)).into());
        }
        engine.check_space(bucket.size_bytes as u64)?;
        let mut batch = engine.batch();
        let mut retired: Vec<Retired> = Vec::new();
        let open = s
            .catalog
            .open_bucket_for_meta(bucket.meta.as_ref())
            .map(|b| b.id);
        if let Some(open) = open {
            let closed = s.take_open(&[open]);
            for (b, seqs) in closed {
                stage_close(&mut batch, buckets, &b, &seqs);
                s.note_closed(&b);
                retired.push((b.id, seqs));
            }
        }
        stage_store(&mut batch, buckets, &bucket);
        s.note_closed(&bucket);
        s.commit_retiring(batch, retired)
    }
}
