//! A find's documents shaped as the command asks: sorted, skipped, limited and projected.

use super::Request;
use crate::cursor::DocSource;
use crate::error::CommandError;
use hourglass_query::pipeline::mem::MemLimits;
use hourglass_query::pipeline::spill::{sort_documents, top_k_documents};
use hourglass_query::projection::Projection;
use hourglass_query::sort::SortSpec;

/// Applies sort, skip, limit and projection to a stream of documents. A sort without a
/// limit holds the documents up to the sort memory limit and spills past it (when the
/// command may use the disk); with a limit only the first skip + limit are kept.
pub fn shape(
    req: &Request,
    limits: &MemLimits,
    source: DocSource,
    sort: Option<SortSpec>,
    skip: usize,
    limit: Option<usize>,
    projection: Option<Projection>,
) -> Result<DocSource, CommandError> {
    let mut source = source;
    if let Some(sort) = sort.filter(|s| !s.is_empty()) {
        source = match limit {
            Some(l) => {
                let docs = source.collect::<Result<Vec<_>, _>>()?;
                let docs = top_k_documents(&sort, docs, l.saturating_add(skip), limits)?;
                Box::new(docs.into_iter().map(Ok))
            }
            None => {
                let dir = req.state.catalog.engine().temp_dir();
                let sorted = sort_documents(&sort, source, limits, Some(&dir))?;
                Box::new(sorted.map(|e| e.map_err(CommandError::from)))
            }
        };
    }
    let source: DocSource = Box::new(source.skip(skip));
    let source: DocSource = match limit {
        Some(l) => Box::new(source.take(l)),
        None => source,
    };
    Ok(match projection {
        // An expression that fails fails the query, as in MongoDB (no field is left out).
        Some(p) => Box::new(source.map(move |r| r.and_then(|d| Ok(p.try_apply_owned(d)?)))),
        None => source,
    })
}
