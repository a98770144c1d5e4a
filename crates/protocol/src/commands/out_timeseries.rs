//! `$out` into a time-series collection (MongoDB 7.0.3+): with the `timeseries` option
//! it creates one, or replaces an existing one whose options are the same; without it,
//! an existing time-series target is replaced and stays time-series. Either way the
//! documents go into a temporary buckets collection (the target's options and index
//! specs copied) that is renamed over the target, so readers see the old or the new
//! measurements, never a mix.

use super::target::BUCKETS_PREFIX;
use super::Request;
use crate::error::CommandError;
use bson::{doc, Document};
use hourglass_catalog::Namespace;
use hourglass_timeseries::store::raw_measurements;
use hourglass_timeseries::{options_of, TimeseriesOptions, TimeseriesStore};
use std::sync::atomic::{AtomicU64, Ordering};

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// A fresh name for the collection any `$out` (into a regular or a time-series
/// collection) fills before it is renamed over the target.
pub(super) fn out_temp_name() -> String {
    let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
    format!("tmp.agg_out.{}.{seq}", std::process::id())
}

/// Replaces the measurements of the time-series collection `db.coll` with `docs`.
pub fn replace(
    req: &Request,
    db: &str,
    coll: &str,
    docs: Vec<Document>,
    spec: Option<&Document>,
) -> Result<(), CommandError> {
    let ns = format!("{db}.{coll}");
    let state = &req.state;
    let catalog = &state.catalog;
    if spec.is_some() && super::views::is_view_in(catalog, db, coll)? {
        return Err(CommandError::new(
            7268703,
            format!("Cannot create a time-series collection over the view {ns}"),
        ));
    }
    if spec.is_some() && catalog.get(db, coll).is_some() {
        return Err(CommandError::new(7268700, format!("Cannot create a time-series collection from the existing non time-series collection {ns}"),
        ));
    }
    let given = spec
        .map(|s| TimeseriesOptions::parse_for_namespace(Some(&ns), s))
        .transpose()?;
    let buckets_name = format!("{BUCKETS_PREFIX}{coll}");
    let existing = catalog
        .get(db, &buckets_name)
        .and_then(|b| Some((options_of(&b)?, b)));
    let (stored, options, indexes) = match (&existing, given) {
        (Some((current, b)), given) => {
            if given.is_some_and(|g| !same_layout(&g, current)) {
                return Err(CommandError::new(7406103, format!("Time-series options given to $out do not match those of the existing collection {ns}"),
                ));
            }
            let specs = TimeseriesStore::index_specs(b, current)?;
            (b.options().clone(), current.clone(), Some(specs))
        }
        (None, Some(g)) => (doc! {"timeseries": g.to_document()}, g, None),
        (None, None) => {
            return Err(CommandError::new(
                26,
                format!("{ns} is not a time-series collection"),
            ))
        }
    };
    let temp = format!("{BUCKETS_PREFIX}{}", out_temp_name());
    let (tc, _) = catalog.create(db, &temp, stored)?;
    let filled = (|| -> Result<(), CommandError> {
        if let Some(specs) = &indexes {
            TimeseriesStore::set_index_specs(&tc, specs)?;
        }
        let raw = raw_measurements(&docs)?;
        state.write_gate.wait_open(None);
        let out =
            state
                .timeseries
                .insert(&tc, &options, raw.iter().map(|r| &**r).collect(), true)?;
        match out.errors.into_iter().next() {
            Some((_, e)) => Err(e.into()),
            None => Ok(()),
        }
    })();
    let renamed = filled.and_then(|()| {
        catalog
            .rename(
                &Namespace::new(db, &temp),
                &Namespace::new(db, &buckets_name),
                true,
            )
            .map_err(CommandError::from)
    });
    if let Err(e) = renamed {
        state.timeseries.forget(&tc);
        let _ = catalog.drop_collection(db, &temp);
        return Err(e);
    }
    if let Some((_, old)) = existing {
        state.timeseries.forget(&old);
    }
    Ok(())
}

/// Whether two option sets lay buckets out the same way.
fn same_layout(a: &TimeseriesOptions, b: &TimeseriesOptions) -> bool {
    a.time_field == b.time_field
        && a.meta_field == b.meta_field
        && a.granularity == b.granularity
        && a.bucket_max_span_seconds == b.bucket_max_span_seconds
        && a.bucket_rounding_seconds == b.bucket_rounding_seconds
}
