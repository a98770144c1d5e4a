//! What a collection name in a command refers to: a regular collection, a time-series
//! collection (the view over `system.buckets.<coll>`), or a buckets collection itself.

use super::planned::{regular_read, ReadOpts};
use super::Request;
use crate::cursor::{DocSource, Row, RowSource};
use crate::error::CommandError;
use bson::Document;
use hourglass_catalog::Collection;
use hourglass_query::filter::Filter;
use hourglass_timeseries::{options_of, TimeseriesOptions, TsPlan, TsRows};
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

/// Whether `coll` names a collection of any kind (regular, time-series, buckets).
pub fn namespace_exists(req: &Request, coll: &str) -> bool {
    !matches!(Target::resolve(req, coll), Target::Regular(None))
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
            Target::Buckets { .. } => Err(CommandError::invalid_options(format!(
                "{op} of bucket documents is not supported by this server yet; delete and insert whole buckets instead"
            ))),
            Target::TimeSeries { .. } => Err(CommandError::invalid_options(format!(
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
        Ok(self.scan_with(req, filter, spec, &ReadOpts::default())?.0)
    }

    /// As [`Target::scan`], with a sort and a hint for the planner of regular
    /// collections and the later stages for time-series column selection. Also returns
    /// whether the documents already come in the requested sort order.
    pub fn scan_with(
        self,
        req: &Request,
        filter: Filter,
        spec: Option<&Document>,
        opts: &ReadOpts<'_>,
    ) -> Result<(DocSource, bool), CommandError> {
        let store = &req.state.timeseries;
        if let (Some(hint), Target::TimeSeries { buckets, options }) = (opts.hint, &self) {
            super::indexes_ts::check_hint(buckets, options, true, hint)?;
        }
        if let (Some(hint), Target::Buckets { buckets, options }) = (opts.hint, &self) {
            super::indexes_ts::check_hint(buckets, options, false, hint)?;
        }
        let docs: DocSource = match self {
            Target::Regular(None) => return Ok((Box::new(std::iter::empty()), false)),
            Target::Regular(Some(c)) => {
                let read = regular_read(&c, filter, spec, opts)?;
                *req.plan_summary.lock() = Some(super::planned::plan_summary(&read.plan));
                let source: DocSource = Box::new(read.source.map(interruptible));
                return Ok((source, read.plan.provides_sort));
            }
            Target::TimeSeries { buckets, options } => {
                let rows = measurements(req, &buckets, &options, spec, opts, false)?;
                let docs = rows
                    .documents()
                    .map(|r| r.map_err(CommandError::from))
                    .map(interruptible);
                return Ok((Box::new(docs), false));
            }
            Target::Buckets { buckets, options } => Box::new(
                store
                    .bucket_documents(&buckets, &options)?
                    .into_iter()
                    .map(Ok),
            ),
        };
        Ok((
            Box::new(
                docs.filter(move |r| match r {
                    Ok(d) => filter.matches(d),
                    Err(_) => true,
                })
                .map(interruptible),
            ),
            false,
        ))
    }

    /// The documents matching `spec` as BSON to send as they are, for a read without sort,
    /// projection or later stage: a regular collection's stored documents, or a
    /// time-series collection's measurements written from the columns; `None` for
    /// other targets.
    pub fn raw_rows(
        &self,
        req: &Request,
        spec: Option<&Document>,
        opts: &ReadOpts<'_>,
    ) -> Result<Option<RowSource>, CommandError> {
        match self {
            Target::Regular(None) => Ok(Some(Box::new(std::iter::empty()))),
            Target::Regular(Some(c)) => {
                let filter = match spec {
                    Some(f) => Filter::parse(f)?,
                    None => Filter::match_all(),
                };
                let (plan, rows) = super::planned::regular_stored_rows(c, filter, spec, opts)?;
                *req.plan_summary.lock() = Some(super::planned::plan_summary(&plan));
                Ok(Some(rows))
            }
            Target::TimeSeries { buckets, options } => {
                if let Some(hint) = opts.hint {
                    super::indexes_ts::check_hint(buckets, options, true, hint)?;
                }
                let rows = measurements(req, buckets, options, spec, opts, true)?;
                Ok(Some(Box::new(ts_rows(rows).map(|r| {
                    crate::operations::check_interrupt()?;
                    r
                }))))
            }
            Target::Buckets { .. } => Ok(None),
        }
    }
}

/// The measurements of a time-series collection matching `spec` (`raw`: as BSON written
/// from the columns).
fn measurements(
    req: &Request,
    buckets: &Arc<Collection>,
    options: &TimeseriesOptions,
    spec: Option<&Document>,
    opts: &ReadOpts<'_>,
    raw: bool,
) -> Result<TsRows, CommandError> {
    *req.plan_summary.lock() = Some("COLLSCAN".to_string());
    let spec = spec.cloned().unwrap_or_default();
    let mut plan = TsPlan::filtered_read(&spec, opts.after, options)?;
    plan.raw_output = raw;
    Ok(req.state.timeseries.execute(buckets, options, &plan)?.rows)
}

/// The rows of a time-series read for a cursor.
pub fn ts_rows(rows: TsRows) -> RowSource {
    match rows {
        TsRows::Docs(d) => Box::new(d.map(|r| r.map(Row::doc).map_err(CommandError::from))),
        TsRows::Raw(r) => Box::new(r.map(|r| r.map(Row::Raw).map_err(CommandError::from))),
    }
}

/// Turns a document into Interrupted once the running operation is killed.
pub fn interruptible(r: Result<Document, CommandError>) -> Result<Document, CommandError> {
    crate::operations::check_interrupt()?;
    r
}
