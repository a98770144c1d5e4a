//! Direct inserts into `system.buckets.<coll>`: what `mongorestore` and a plain
//! `insert_many` of dumped bucket documents do. A version-1 (uncompressed) bucket
//! `{_id, control: {version: 1, min, max, closed?, count?}, meta?, data: {field: {"0": v,
//! ...}}}` is checked as MongoDB's buckets validator checks it, plus what this store relies
//! on: the `_id`'s time is the bucket's `control.min` time (seconds), every measurement has
//! a date in the time field, no later than that minimum plus `bucketMaxSpanSeconds`, and
//! no earlier. It is then stored closed, as a bucket the catalog closed, after the open
//! bucket of its series is closed (so the series' newest data is not split across an open
//! bucket and a restored one). A measurement the collection's 2dsphere indexes cannot hold
//! is refused as an insert refuses it. Version 2 (compressed, BSONColumn) buckets are
//! refused with 238 NotImplemented before anything is written.

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
    match control.get("version").and_then(number) {
        Some(1.0) => {}
        Some(2.0) => {
            return Err(StoreError::NotImplemented(
                "compressed buckets (control.version 2, BSONColumn) cannot be inserted directly; insert version 1 buckets or the measurements".into(),
            ))
        }
        _ => return Err(invalid("control.version must be 1 or 2")),
    }
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
    let times = data
        .get_document(tf)
        .map_err(|_| invalid(format!("data.{tf} must be an object")))?;
    let count = times.len();
    if count == 0 {
        return Err(invalid(format!("data.{tf} holds no measurement")));
    }
    if let Some(c) = control.get("count") {
        if number(c) != Some(count as f64) {
            return Err(invalid("control.count must be the number of measurements"));
        }
    }
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
