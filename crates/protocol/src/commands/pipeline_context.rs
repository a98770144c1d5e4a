//! The catalog behind the cross-collection aggregation stages (`$lookup`,
//! `$unionWith`, `$out`, `$merge`): reads resolve time-series views to their
//! measurements; `$merge` writes to regular collections only. `$out` fills a
//! temporary collection and renames it over the target, so readers see the old
//! or the new contents, never a mix (into a time-series target: `out_timeseries`).

use super::target::Target;
use super::Request;
use crate::error::CommandError;
use bson::{Bson, Document};
use hourglass_catalog::{CatalogError, Collection, Namespace};
use hourglass_query::filter::Filter;
use hourglass_query::pipeline::mem::DEFAULT_LIMIT;
use hourglass_query::pipeline::{MemLimits, PipelineContext, RunOptions};
use hourglass_query::update::Update;
use hourglass_query::QueryError;
use std::sync::Arc;

/// Collection access for one aggregate command.
pub struct CatalogContext<'a> {
    req: &'a Request,
    /// Where blocking stages spill.
    temp_dir: std::path::PathBuf,
}

/// A read command's memory limits, from the server parameters, and whether it may use
/// the disk: its `allowDiskUse`, else the `allowDiskUseByDefault` parameter.
pub fn mem_limits(req: &Request) -> Result<MemLimits, CommandError> {
    let params = &req.state.params;
    let default = DEFAULT_LIMIT as i64;
    let bytes = |name: &str| params.get_i64(name, default).max(0) as u64;
    let by_default = params.get_bool("allowDiskUseByDefault", true);
    Ok(MemLimits {
        group_bytes: bytes("internalDocumentSourceGroupMaxMemoryBytes"),
        sort_bytes: bytes("internalQueryMaxBlockingSortMemoryUsageBytes"),
        allow_disk_use: req.opt_bool("allowDiskUse")?.unwrap_or(by_default),
    })
}

impl<'a> CatalogContext<'a> {
    pub fn new(req: &'a Request) -> Self {
        CatalogContext {
            req,
            temp_dir: req.state.catalog.engine().temp_dir(),
        }
    }

    /// Run options for the aggregate command: this context, the memory limits and the
    /// spill directory ([`mem_limits`]).
    pub fn run_options(&self) -> Result<RunOptions<'_>, CommandError> {
        Ok(RunOptions {
            context: Some(self),
            db: &self.req.db,
            limits: mem_limits(self.req)?,
            spill_dir: Some(&self.temp_dir),
        })
    }

    fn is_time_series(&self, db: &str, coll: &str) -> bool {
        self.req
            .state
            .catalog
            .get(db, &format!("{}{coll}", super::target::BUCKETS_PREFIX))
            .is_some()
    }

    fn writable(&self, db: &str, coll: &str, stage: &str) -> Result<(), QueryError> {
        if db == self.req.db {
            super::views::refuse_on_view(self.req, coll).map_err(from_command)?;
        }
        if self.is_time_series(db, coll) || coll.starts_with(super::target::BUCKETS_PREFIX) {
            return Err(QueryError::InvalidOptions(format!(
                "{stage} into the time-series collection {db}.{coll} is not supported by this server yet"
            )));
        }
        Ok(())
    }

    fn existing(&self, db: &str, coll: &str) -> Option<Arc<Collection>> {
        self.req.state.catalog.get(db, coll)
    }
}

/// The error as the pipeline carries it, with its extra reply fields (a duplicate key's
/// `keyPattern`/`keyValue`).
fn from_command(e: CommandError) -> QueryError {
    match e.extra {
        Some(extra) => QueryError::CodedWithInfo(e.code, e.errmsg, extra),
        None => QueryError::Coded(e.code, e.errmsg),
    }
}

fn from_catalog(e: CatalogError) -> QueryError {
    from_command(e.into())
}

impl PipelineContext for CatalogContext<'_> {
    fn read_collection(&self, db: &str, coll: &str) -> Result<Vec<Document>, QueryError> {
        if db == self.req.db {
            // A view ($lookup, $graphLookup, $unionWith from one): its source through
            // its pipeline.
            if let Some(view) = super::views::resolve(self.req, coll).map_err(from_command)? {
                let docs = self.read_collection(db, &view.source)?;
                let opts = self.run_options().map_err(from_command)?;
                return hourglass_query::pipeline::Pipeline::parse(&view.pipeline)?
                    .run_with(docs, &opts);
            }
            return Target::resolve(self.req, coll)
                .scan(self.req, Filter::match_all(), None)
                .map_err(from_command)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(from_command);
        }
        match self.existing(db, coll) {
            None => Ok(Vec::new()),
            Some(c) => c
                .scan()
                .collect::<Result<Vec<_>, _>>()
                .map_err(from_catalog),
        }
    }

    fn replace_collection(
        &self,
        db: &str,
        coll: &str,
        docs: Vec<Document>,
        timeseries: Option<&Document>,
    ) -> Result<(), QueryError> {
        if timeseries.is_some() || self.is_time_series(db, coll) {
            return super::out_timeseries::replace(self.req, db, coll, docs, timeseries)
                .map_err(from_command);
        }
        self.writable(db, coll, "$out")?;
        let catalog = &self.req.state.catalog;
        let temp = super::out_timeseries::out_temp_name();
        // The target keeps its validator (which the new documents must satisfy).
        let mut options = Document::new();
        if let Some(existing) = catalog.get(db, coll) {
            let current = existing.options();
            for k in super::validation_options::KEYS {
                if let Some(v) = current.get(k) {
                    options.insert(k, v.clone());
                }
            }
        }
        let (tc, _) = catalog.create(db, &temp, options).map_err(from_catalog)?;
        let outcome = tc.insert(docs, true);
        if let Some((_, e)) = outcome.errors.into_iter().next() {
            let _ = catalog.drop_collection(db, &temp);
            return Err(from_catalog(e));
        }
        catalog
            .rename(&Namespace::new(db, &temp), &Namespace::new(db, coll), true)
            .map_err(|e| {
                let _ = catalog.drop_collection(db, &temp);
                from_catalog(e)
            })
    }

    fn find_matching(
        &self,
        db: &str,
        coll: &str,
        key: &Document,
    ) -> Result<Vec<Document>, QueryError> {
        self.writable(db, coll, "$merge")?;
        let Some(c) = self.existing(db, coll) else {
            return Ok(Vec::new());
        };
        if key.len() == 1 {
            if let Some(id) = key.get("_id") {
                return Ok(c.get(id).map_err(from_catalog)?.into_iter().collect());
            }
        }
        let mut spec = Document::new();
        for (k, v) in key {
            spec.insert(k.clone(), bson::doc! {"$eq": v.clone()});
        }
        // The unique index on the `on` fields finds the document.
        let f = Filter::parse(&spec)?;
        let opts = super::planned::ReadOpts::default();
        super::planned::regular_read(&c, f, Some(&spec), &opts)
            .map_err(from_command)?
            .source
            .collect::<Result<Vec<_>, _>>()
            .map_err(from_command)
    }

    fn has_unique_index(
        &self,
        db: &str,
        coll: &str,
        fields: &[String],
    ) -> Result<bool, QueryError> {
        let Some(c) = self.existing(db, coll) else {
            return Ok(false);
        };
        let mut want: Vec<&str> = fields.iter().map(String::as_str).collect();
        want.sort_unstable();
        Ok(c.indexes().iter().any(|i| {
            let mut paths: Vec<&str> = i.spec.parts.iter().map(|p| p.path.as_str()).collect();
            paths.sort_unstable();
            i.spec.unique && i.spec.partial.is_none() && paths == want
        }))
    }

    fn insert_document(&self, db: &str, coll: &str, doc: Document) -> Result<(), QueryError> {
        self.writable(db, coll, "$merge")?;
        let c = self
            .req
            .state
            .catalog
            .get_or_create(db, coll)
            .map_err(from_catalog)?;
        match c.insert(vec![doc], true).errors.into_iter().next() {
            Some((_, e)) => Err(from_catalog(e)),
            None => Ok(()),
        }
    }

    fn replace_document(
        &self,
        db: &str,
        coll: &str,
        id: &Bson,
        doc: Document,
    ) -> Result<(), QueryError> {
        self.writable(db, coll, "$merge")?;
        let Some(c) = self.existing(db, coll) else {
            return self.insert_document(db, coll, doc);
        };
        let filter = Filter::parse(&bson::doc! {"_id": {"$eq": id.clone()}})?;
        c.update(&filter, &Update::Replacement(doc), false, false)
            .map_err(from_catalog)?;
        Ok(())
    }
}
