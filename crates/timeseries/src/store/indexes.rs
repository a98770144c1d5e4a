//! The index specs of a time-series collection, in bucket shape (as `listIndexes` on
//! `system.buckets.<coll>` shows them, with `originalSpec` where MongoDB keeps it),
//! stored under key `I` of the buckets tree. A collection that never changed its
//! indexes has MongoDB's default `{meta: 1, control.min.<t>: 1, control.max.<t>: 1}`
//! index when it has a metaField. Bucket selection does not need these specs: the
//! meta/time index (`M` keys) is always maintained.

use super::{corrupt, StoreError, TimeseriesStore};
use crate::index_spec::default_index;
use crate::options::TimeseriesOptions;
use bson::{doc, Bson, Document};
use hourglass_catalog::Collection;

const INDEXES: &[u8] = b"I";

impl TimeseriesStore {
    /// The bucket-shaped index specs.
    pub fn index_specs(
        buckets: &Collection,
        options: &TimeseriesOptions,
    ) -> Result<Vec<Document>, StoreError> {
        let snap = buckets.engine().snapshot();
        match snap.get(buckets.tree(), INDEXES)? {
            None => Ok(default_index(options)
                .map(|mut d| {
                    // MongoDB gives it the collection's default collation.
                    if let Ok(c) = buckets.options().get_document("collation") {
                        d.insert("collation", c.clone());
                    }
                    d
                })
                .into_iter()
                .collect()),
            Some(bytes) => {
                let d =
                    Document::from_reader(bytes.as_slice()).map_err(|e| corrupt(e.to_string()))?;
                Ok(d.get_array("indexes")
                    .map(|a| a.iter().filter_map(Bson::as_document).cloned().collect())
                    .unwrap_or_default())
            }
        }
    }

    /// Replaces the index specs (durably).
    pub fn set_index_specs(buckets: &Collection, specs: &[Document]) -> Result<(), StoreError> {
        let d = doc! {"indexes": specs.iter().cloned().map(Bson::Document).collect::<Vec<_>>()};
        let mut bytes = Vec::new();
        d.to_writer(&mut bytes)
            .map_err(|e| corrupt(e.to_string()))?;
        let engine = buckets.engine();
        let mut batch = engine.batch();
        batch.put(buckets.tree(), INDEXES, &bytes);
        engine.commit(batch)?;
        Ok(())
    }
}
