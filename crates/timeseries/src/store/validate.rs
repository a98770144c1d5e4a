//! `validate` of a time-series collection, over one storage snapshot.
//!
//! As MongoDB does, a bucket whose own content disagrees with itself (control `min`/`max`
//! or the `_id` time against the data, a time outside the bucket's span) is a warning
//! and counts as a non-compliant document; a bucket that cannot be decoded, and a
//! meta/time index or series directory that disagrees with the buckets, are errors and
//! make the collection invalid.

use super::keys::*;
use super::{load_directory, open_buckets_in, StoreError, TimeseriesStore};
use crate::bucket::{decode_compressed_owned, DecodedBucket};
use crate::meta::meta_key;
use crate::options::TimeseriesOptions;
use bson::oid::ObjectId;
use bson::Document;
use hourglass_catalog::Collection;
use hourglass_query::compare::values_equal;
use std::collections::{BTreeSet, HashMap};

/// What `validate` found.
#[derive(Debug, Default)]
pub struct Validation {
    /// Buckets, closed and open.
    pub buckets: u64,
    pub measurements: u64,
    /// Buckets with a warning.
    pub non_compliant: u64,
    pub warnings: Vec<String>,
    pub errors: Vec<String>,
    /// Closed buckets that cannot be decoded.
    pub corrupt: Vec<ObjectId>,
}

impl TimeseriesStore {
    /// Checks every bucket of `buckets` and the meta/time index and series directory
    /// against them.
    pub fn validate(
        buckets: &Collection,
        options: &TimeseriesOptions,
    ) -> Result<Validation, StoreError> {
        let snap = buckets.engine().snapshot();
        let tree = buckets.tree();
        let mut v = Validation::default();
        let mut index = BTreeSet::new();
        let mut series = BTreeSet::new();
        // Measurements of each closed bucket, by `_id`.
        let mut closed = HashMap::new();
        for entry in snap.scan_prefix(tree, &[CLOSED]) {
            let (k, bytes) = entry?;
            v.buckets += 1;
            let key_id = object_id_at(&k);
            let b = match decode_compressed_owned(bytes) {
                Ok(b) if Some(b.id) == key_id => b,
                Ok(b) => {
                    v.errors
                        .push(format!("bucket {} is stored under another _id", b.id));
                    continue;
                }
                Err(e) => {
                    let id = key_id.map_or_else(|| "?".to_string(), |id| id.to_hex());
                    v.errors.push(format!("bucket {id} cannot be decoded: {e}"));
                    v.corrupt.extend(key_id);
                    continue;
                }
            };
            v.measurements += b.count as u64;
            closed.insert(b.id, b.count);
            let warnings = bucket_warnings(&b, options);
            if !warnings.is_empty() {
                v.non_compliant += 1;
                v.warnings.extend(warnings);
            }
            let key = meta_key(b.meta());
            index.insert(meta_index_key(&key, b.min_time_ms, &b.id));
            series.insert(key);
        }
        let mut extra = 0u64;
        for entry in snap.scan_prefix(tree, &[META_INDEX]) {
            let (k, _) = entry?;
            if !index.remove(&k) {
                extra += 1;
            }
        }
        if extra > 0 {
            v.errors.push(format!(
                "the meta/time index has {extra} entries that match no bucket"
            ));
        }
        if !index.is_empty() {
            v.errors.push(format!(
                "the meta/time index lacks entries for {} buckets",
                index.len()
            ));
        }
        let directory = load_directory(&snap, buckets)?;
        let unlisted = series
            .iter()
            .filter(|k| !directory.contains_key(*k))
            .count();
        if unlisted > 0 {
            v.errors.push(format!(
                "the series directory lacks {unlisted} series that have buckets"
            ));
        }
        match open_buckets_in(&snap, buckets, options) {
            Ok(open) => {
                for b in open.buckets {
                    // A reopened bucket is its stored form, counted above, and more.
                    let stored = closed.get(&b.id).copied();
                    v.buckets += u64::from(stored.is_none());
                    v.measurements += b.count().saturating_sub(stored.unwrap_or(0)) as u64;
                }
            }
            Err(e) => v
                .errors
                .push(format!("the open buckets cannot be read: {e}")),
        }
        Ok(v)
    }
}

/// Where one stored bucket disagrees with itself.
fn bucket_warnings(b: &DecodedBucket, options: &TimeseriesOptions) -> Vec<String> {
    let mut out = Vec::new();
    let id = b.id.to_hex();
    let id_secs = b.id.timestamp().timestamp_millis() / 1000;
    if (0..=i64::from(u32::MAX)).contains(&b.min_time_ms.div_euclid(1000))
        && id_secs != b.min_time_ms.div_euclid(1000)
    {
        out.push(format!(
            "bucket {id}: the time in its _id is not its control.min time"
        ));
    }
    if let Some(max) = b.max_time_ms {
        if max - b.min_time_ms >= options.bucket_max_span_seconds.saturating_mul(1000) {
            out.push(format!(
                "bucket {id}: its times span more than bucketMaxSpanSeconds"
            ));
        }
    }
    let rebuilt = match b.to_bucket() {
        Ok(r) => r,
        Err(e) => {
            out.push(format!("bucket {id}: its data cannot be read: {e}"));
            return out;
        }
    };
    let times = rebuilt
        .column_values(&options.time_field)
        .unwrap_or_default();
    if times.len() != b.count || times.iter().any(Option::is_none) {
        out.push(format!(
            "bucket {id}: control.count is {} but {} measurements have a time",
            b.count,
            times.iter().flatten().count()
        ));
    }
    let control = b.control_document();
    for (which, computed) in [
        ("min", rebuilt.control_min()),
        ("max", rebuilt.control_max()),
    ] {
        let stored = control.get_document(which).cloned().unwrap_or_default();
        if !same_fields(&stored, &computed) {
            out.push(format!(
                "bucket {id}: control.{which} does not agree with its data"
            ));
        }
    }
    out
}

/// The same fields with equal values, in any order.
fn same_fields(a: &Document, b: &Document) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| values_equal(v, w)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_collection;
    use bson::doc;
    use std::sync::Arc;

    /// Three closed buckets of host "a" (values 0.5 apart from 1.5 up) and one of host
    /// "b", reopened by a later insert.
    fn filled(
        dir: &std::path::Path,
    ) -> (
        hourglass_catalog::Catalog,
        Arc<Collection>,
        TimeseriesOptions,
    ) {
        let (cat, c, opts) = test_collection(dir, "t", "host");
        let store = TimeseriesStore::default();
        let at = |i: i64| bson::DateTime::from_millis(1_700_000_000_000 + i * 1000);
        let docs = (0..2500)
            .map(|i| doc! {"t": at(i), "host": "a", "v": 1.5 + (i % 1000) as f64 / 2.0})
            .chain((0..10).map(|i| doc! {"t": at(i), "host": "b", "v": 7.0}))
            .collect();
        store.insert_docs(&c, &opts, docs, true).unwrap();
        store.close_all().unwrap();
        let later = (0..5)
            .map(|i| doc! {"t": at(3000 + i), "host": "b", "v": 1.0})
            .collect();
        store.insert_docs(&c, &opts, later, true).unwrap();
        (cat, c, opts)
    }

    fn first_closed(c: &Collection) -> (Vec<u8>, Vec<u8>) {
        let snap = c.engine().snapshot();
        let first = snap.scan_prefix(c.tree(), &[CLOSED]).next();
        first.unwrap().unwrap()
    }

    #[test]
    fn a_consistent_collection_has_no_warnings_or_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, opts) = filled(dir.path());
        let v = TimeseriesStore::validate(&c, &opts).unwrap();
        assert_eq!((v.buckets, v.measurements), (4, 2515), "{v:?}");
        assert!(v.warnings.is_empty() && v.errors.is_empty(), "{v:?}");
        assert_eq!(v.non_compliant, 0);
    }

    #[test]
    fn a_control_min_that_disagrees_with_the_data_is_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, opts) = filled(dir.path());
        let (key, mut bytes) = first_closed(&c);
        // The header's control.min.v is the only copy of 1.5; the data is compressed.
        let (from, to) = (1.5f64.to_le_bytes(), 0.5f64.to_le_bytes());
        let at = bytes.windows(8).position(|w| w == from).unwrap();
        bytes[at..at + 8].copy_from_slice(&to);
        let mut batch = c.engine().batch();
        batch.put(c.tree(), &key, &bytes);
        c.engine().commit(batch).unwrap();
        let v = TimeseriesStore::validate(&c, &opts).unwrap();
        assert_eq!(v.non_compliant, 1, "{v:?}");
        assert!(v.warnings[0].contains("control.min"), "{v:?}");
        assert!(v.errors.is_empty(), "{v:?}");
    }

    #[test]
    fn an_undecodable_bucket_and_a_missing_index_entry_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (_cat, c, opts) = filled(dir.path());
        let (key, _) = first_closed(&c);
        let snap = c.engine().snapshot();
        let (index_key, _) = snap
            .scan_prefix(c.tree(), &[META_INDEX])
            .last()
            .unwrap()
            .unwrap();
        let mut batch = c.engine().batch();
        batch.put(c.tree(), &key, b"not a bucket");
        batch.delete(c.tree(), &index_key);
        c.engine().commit(batch).unwrap();
        let v = TimeseriesStore::validate(&c, &opts).unwrap();
        assert_eq!(v.corrupt, vec![object_id_at(&key).unwrap()]);
        assert!(
            v.errors.iter().any(|e| e.contains("cannot be decoded")),
            "{v:?}"
        );
        // The undecodable bucket's entry is now unexplained, another bucket lacks one.
        assert!(
            v.errors.iter().any(|e| e.contains("match no bucket")),
            "{v:?}"
        );
        assert!(
            v.errors.iter().any(|e| e.contains("lacks entries")),
            "{v:?}"
        );
    }
}
