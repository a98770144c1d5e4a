//! What a collection name in a command refers to: a regular collection, a time-series
//! collection (the view over `system.buckets.<coll>`), or a buckets collection itself.

use super::Request;
use crate::cursor::DocSource;
use crate::error::CommandError;
use bson::Document;
use hourglass_catalog::Collection;
use hourglass_query::filter::Filter;
use hourglass_timeseries::{options_of, TimeseriesOptions, TsPlan};
use std::sync::Arc;

pub const BUCKETS_PREFIX: &str = "system.buckets.";

pub enum Target {
    /// A regular collection (`None` when it does not exist).
    Regular(Option<Arc<Collection>>),
    /// A time-series collection, through the view over its buckets.
    TimeSeries {
        buckets: Arc<Collection>,
        options: TimeseriesOptions,
    },
    /// `system.buckets.<coll>` read directly.
    Buckets {
        buckets: Arc<Collection>,
        options: TimeseriesOptions,
    },
}

impl Target {
    pub fn resolve(req: &Request, coll: &str) -> Target {
        let catalog = &req.state.catalog;
        if coll.starts_with(BUCKETS_PREFIX) {
            if let Some(b) = catalog.get(&req.db, coll) {
                if let Some(options) = options_of(&b) {
                    return Target::Buckets {
                        buckets: b,
                        options,
                    };
                }
                return Target::Regular(Some(b));
            }
        }
        if let Some(b) = catalog.get(&req.db, &format!("{BUCKETS_PREFIX}{coll}")) {
            if let Some(options) = options_of(&b) {
                return Target::TimeSeries {
                    buckets: b,
                    options,
                };
            }
        }
        Target::Regular(catalog.get(&req.db, coll))
    }

    /// Refuses writes other than inserts on time-series data (a later issue adds them).
    pub fn require_regular(self, op: &str) -> Result<Option<Arc<Collection>>, CommandError> {
        match self {
            Target::Regular(c) => Ok(c),
            _ => Err(CommandError::invalid_options(format!(
                "{op} on time-series collections is not supported by this server yet"
            ))),
        }
    }

    /// The documents matching `filter` (point lookup when a regular collection's `_id` is
    /// pinned; measurements for a time-series collection; bucket documents for buckets).
    /// `spec` is the filter as the client sent it; time-series reads derive from it the
    /// time bounds that prune buckets.
    pub fn scan(
        self,
        req: &Request,
        filter: Filter,
        spec: Option<&Document>,
    ) -> Result<DocSource, CommandError> {
        self.scan_for(req, filter, spec, &[])
    }

    /// [`Target::scan`] for a read whose later processing is described by `after`
    /// (pipeline stages, e.g. the `$sort`/`$project` of a `find`, or `$count`): a
    /// time-series scan then decodes only the columns those stages read.
    pub fn scan_for(
        self,
        req: &Request,
        filter: Filter,
        spec: Option<&Document>,
        after: &[Document],
    ) -> Result<DocSource, CommandError> {
        let store = &req.state.timeseries;
        let docs: DocSource = match self {
            Target::Regular(None) => return Ok(Box::new(std::iter::empty())),
            Target::Regular(Some(c)) => return Ok(regular_scan(c, filter)),
            Target::TimeSeries { buckets, options } => {
                let spec = spec.cloned().unwrap_or_default();
                let plan = TsPlan::filtered_read(&spec, after, &options)?;
                let ex = store.execute(&buckets, &options, &plan)?;
                return Ok(Box::new(
                    ex.docs
                        .map(|r| r.map_err(CommandError::from))
                        .map(interruptible),
                ));
            }
            Target::Buckets { buckets, options } => Box::new(
                store
                    .bucket_documents(&buckets, &options)?
                    .into_iter()
                    .map(Ok),
            ),
        };
        Ok(Box::new(
            docs.filter(move |r| match r {
                Ok(d) => filter.matches(d),
                Err(_) => true,
            })
            .map(interruptible),
        ))
    }
}

/// Turns a document into Interrupted once the running operation is killed.
fn interruptible(r: Result<Document, CommandError>) -> Result<Document, CommandError> {
    crate::ops::check_interrupt()?;
    r
}

fn regular_scan(c: Arc<Collection>, filter: Filter) -> DocSource {
    let docs: Box<dyn Iterator<Item = _> + Send> = match filter.id_equality() {
        Some(id) => Box::new(c.get(&id).transpose().into_iter()),
        None => c.scan(),
    };
    Box::new(
        docs.map(|r| r.map_err(CommandError::from))
            .filter(move |r| match r {
                Ok(d) => filter.matches(d),
                Err(_) => true,
            })
            .map(interruptible),
    )
}
