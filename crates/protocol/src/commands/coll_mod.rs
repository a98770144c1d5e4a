//! `collMod`: for time-series collections, `timeseries.granularity` (only coarser),
//! `timeseries.bucketMaxSpanSeconds`/`bucketRoundingSeconds` (only larger, together) and
//! `expireAfterSeconds` (a number, or "off"). Index options come with secondary indexes.

use super::target::Target;
use super::Request;
use crate::error::{CmdResult, CommandError};
use bson::{Bson, Document};
use hourglass_timeseries::{validate_expire_after_seconds, Granularity};

pub fn coll_mod(req: &Request) -> CmdResult {
    req.check_fields(&[
        "timeseries",
        "expireAfterSeconds",
        "index",
        "validator",
        "validationLevel",
        "validationAction",
    ])?;
    let coll = req.collection()?;
    let (buckets, mut options) = match Target::resolve(req, &coll) {
        Target::TimeSeries { buckets, options } => (buckets, options),
        Target::Regular(None) => {
            return Err(CommandError::new(
                26,
                "NamespaceNotFound",
                format!("ns does not exist: {}.{coll}", req.db),
            ))
        }
        _ => {
            return Err(CommandError::invalid_options(
                "collMod of regular collections is not supported by this server yet",
            ))
        }
    };
    for k in ["index", "validator", "validationLevel", "validationAction"] {
        if req.body.contains_key(k) {
            return Err(CommandError::invalid_options(format!(
                "collMod option '{k}' is not supported on time-series collections by this server yet"
            )));
        }
    }
    let mut stored = buckets.options();
    if let Some(ts) = req.opt_document("timeseries")? {
        let mut granularity = None;
        let (mut span, mut rounding) = (None, None);
        for (k, v) in ts {
            match (k.as_str(), v) {
                ("granularity", Bson::String(g)) => {
                    granularity = Some(Granularity::parse(g).ok_or_else(|| {
                        CommandError::bad_value(format!(
                            "Enumeration value '{g}' for field 'collMod.timeseries.granularity' is not a valid value."
                        ))
                    })?)
                }
                ("bucketMaxSpanSeconds", v) => span = super::args::as_i64(v),
                ("bucketRoundingSeconds", v) => rounding = super::args::as_i64(v),
                ("granularity", v) => return Err(req.wrong_type("timeseries.granularity", v, "string")),
                (other, _) => return Err(CommandError::unknown_field("collMod.timeseries", other)),
            }
        }
        options = options.apply_coll_mod(granularity, span, rounding)?;
        stored.insert("timeseries", options.to_document());
    }
    match req.body.get("expireAfterSeconds") {
        None => {}
        Some(Bson::String(s)) if s == "off" => {
            stored.remove("expireAfterSeconds");
        }
        Some(v) => {
            stored.insert("expireAfterSeconds", validate_expire_after_seconds(v)?);
        }
    }
    let name = buckets.namespace().coll;
    req.state.catalog.set_options(&req.db, &name, stored)?;
    req.state.timeseries.set_options(&buckets, &options)?;
    Ok(Document::new())
}
