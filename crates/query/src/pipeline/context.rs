//! What a pipeline needs from outside the query layer: other collections
//! (for `$lookup`, `$unionWith`, `$out`, `$merge`) and run options (memory
//! limits, `allowDiskUse`, the current database).

use bson::{Bson, Document};

use super::mem::MemLimits;
use crate::error::QueryError;

/// Access to collections, implemented by the server over its catalog.
pub trait PipelineContext {
    /// Every document of `db.coll` (empty when it does not exist). Time-series
    /// collections yield their measurements.
    fn read_collection(&self, db: &str, coll: &str) -> Result<Vec<Document>, QueryError>;

    /// Replaces the contents of `db.coll` with `docs` (for `$out`), as
    /// atomically as the implementation allows; with `timeseries` (`$out`'s option),
    /// into a time-series collection with those options.
    fn replace_collection(
        &self,
        db: &str,
        coll: &str,
        docs: Vec<Document>,
        timeseries: Option<&Document>,
    ) -> Result<(), QueryError>;

    /// The documents of `db.coll` whose fields equal those of `key` (for `$merge`).
    fn find_matching(
        &self,
        db: &str,
        coll: &str,
        key: &Document,
    ) -> Result<Vec<Document>, QueryError>;

    /// Whether `db.coll` exists and has a unique index on exactly `fields` (in any order),
    /// without a partial filter: what `$merge` needs to join on fields other than `_id`.
    fn has_unique_index(&self, db: &str, coll: &str, fields: &[String])
        -> Result<bool, QueryError>;

    /// Inserts one document into `db.coll` (creating the collection).
    fn insert_document(&self, db: &str, coll: &str, doc: Document) -> Result<(), QueryError>;

    /// Replaces the document whose `_id` is `id` with `doc`.
    fn replace_document(
        &self,
        db: &str,
        coll: &str,
        id: &Bson,
        doc: Document,
    ) -> Result<(), QueryError>;
}

/// Options of one pipeline run.
#[derive(Clone, Copy)]
pub struct RunOptions<'a> {
    /// Collection access; stages that need it fail without one.
    pub context: Option<&'a dyn PipelineContext>,
    /// The database of the aggregate command (default for `from`/`into`).
    pub db: &'a str,
    /// Memory limits and `allowDiskUse`.
    pub limits: MemLimits,
    /// Where blocking stages spill under `allowDiskUse` (`None`: they hold everything in
    /// memory, up to a ceiling).
    pub spill_dir: Option<&'a std::path::Path>,
}

impl Default for RunOptions<'_> {
    fn default() -> Self {
        RunOptions {
            context: None,
            db: "test",
            limits: MemLimits::default(),
            spill_dir: None,
        }
    }
}

impl<'a> RunOptions<'a> {
    /// The context, or an error naming the stage that needs one.
    pub(crate) fn ctx(&self, stage: &str) -> Result<&'a dyn PipelineContext, QueryError> {
        self.context.ok_or_else(|| {
            QueryError::InvalidOptions(format!(
                "{stage} needs access to other collections, which this pipeline run does not have"
            ))
        })
    }
}
