//! The `archive` option of a time-series collection (`create`, `collMod`): checked and
//! stored as `{afterSeconds, uri, partitionBy}` (see `hourglass_archive::ArchiveSpec`);
//! the archive mover (`crate::archive_mover`) acts on it.

use crate::error::CommandError;
use bson::{Bson, Document};
use hourglass_timeseries::TimeseriesOptions;

/// A checked `archive` option (`create`, `collMod`) as it is stored.
pub fn archive_option(v: &Bson, options: &TimeseriesOptions) -> Result<Document, CommandError> {
    let spec = hourglass_archive::ArchiveSpec::parse(v, options.meta_field.as_deref())
        .map_err(|e| CommandError::bad_value(e.to_string()))?;
    Ok(spec.to_document())
}
