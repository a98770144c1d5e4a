//! 2dsphere indexes on measurement fields (`data.<f>: "2dsphere_bucket"` in the buckets'
//! index specs): a measurement whose field is not valid GeoJSON (183934) or not a point
//! (183493) is refused, as MongoDB 7.0 refuses it, on insert and when the index is
//! created over existing measurements. Bucket reads do not use the index (they filter
//! after unpacking).

use super::{StoreError, TimeseriesStore};
use crate::index_spec::GEO_2DSPHERE_BUCKET;
use crate::options::TimeseriesOptions;
use bson::{Bson, Document};
use hourglass_catalog::Collection;
use hourglass_query::error::{render_doc, QueryError};
use hourglass_query::geo::shape;

/// The measurement fields a bucket index spec indexes with 2dsphere.
pub fn fields_of_spec(spec: &Document) -> Vec<String> {
    let Ok(key) = spec.get_document("key") else {
        return Vec::new();
    };
    key.iter()
        .filter(|(_, v)| matches!(v, Bson::String(s) if s == GEO_2DSPHERE_BUCKET))
        .filter_map(|(k, _)| k.strip_prefix("data.").map(String::from))
        .collect()
}

/// Why measurement `m` cannot go into the 2dsphere indexes on `fields`, if it cannot.
pub fn check(m: &Document, fields: &[String]) -> Result<(), StoreError> {
    for f in fields {
        for v in hourglass_query::path::lookup_path(m, f)
            .into_iter()
            .flatten()
        {
            if matches!(v, Bson::Null) {
                continue;
            }
            if let Some(reason) = shape::index_error(v) {
                return Err(StoreError::Query(QueryError::Coded(
                    183934,
                    format!(
                        "Can't extract geo keys from the measurement {}: {reason}",
                        render_doc(m)
                    ),
                )));
            }
            if !matches!(shape::stored(v), Some(shape::Shape::Point(_))) {
                return Err(StoreError::Query(QueryError::Coded(
                    183493,
                    format!(
                        "Time-series 2dsphere indexes hold points only; the measurement {} has another geometry at '{f}'",
                        render_doc(m)
                    ),
                )));
            }
        }
    }
    Ok(())
}

impl TimeseriesStore {
    /// The measurement fields under 2dsphere indexes of the collection.
    pub fn geo_fields(
        buckets: &Collection,
        options: &TimeseriesOptions,
    ) -> Result<Vec<String>, StoreError> {
        Ok(Self::index_specs(buckets, options)?
            .iter()
            .flat_map(fields_of_spec)
            .collect())
    }
}

impl TimeseriesStore {
    /// Checks the stored measurements before 2dsphere indexes on `fields` are added: the
    /// first one the index could not hold fails the index build.
    pub fn check_geo(
        &self,
        buckets: &std::sync::Arc<Collection>,
        options: &TimeseriesOptions,
        fields: &[String],
    ) -> Result<(), StoreError> {
        if fields.is_empty() {
            return Ok(());
        }
        let mut names: Vec<&str> = fields.iter().map(String::as_str).collect();
        names.push(&options.time_field);
        for view in self.scan(buckets, options, &super::BucketPredicate::all())? {
            for m in view?.unpack(options, Some(&names))? {
                check(&m, fields)?;
            }
        }
        Ok(())
    }
}
