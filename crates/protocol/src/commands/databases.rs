//! `listDatabases` and `dropDatabase`.

use super::Request;
use crate::access::check::{self, Tgt};
use crate::error::CmdResult;
use crate::error::CommandError;
use bson::{doc, Bson};
use hourglass_auth::privilege;
use hourglass_query::filter::Filter;

pub fn list_databases(req: &Request) -> CmdResult {
    req.check_fields(&["filter", "nameOnly", "authorizedDatabases"])?;
    let filter = match req.opt_document("filter")? {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    let name_only = req.opt_bool("nameOnly")?.unwrap_or(false);
    let visible = visible_databases(req)?;
    let mut total: i64 = 0;
    let mut out = Vec::new();
    for (name, size) in req.state.catalog.databases() {
        if !visible(&name) {
            continue;
        }
        let entry = doc! {"name": &name, "sizeOnDisk": size as i64, "empty": false};
        if !filter.matches(&entry) {
            continue;
        }
        total += size as i64;
        out.push(Bson::Document(if name_only {
            doc! {"name": name}
        } else {
            entry
        }));
    }
    if name_only {
        return Ok(doc! {"databases": out});
    }
    Ok(doc! {"databases": out, "totalSize": total, "totalSizeMb": total / (1024 * 1024)})
}

/// Which databases the connection may list: all of them with the `listDatabases` action
/// (or with access control off); otherwise, unless `authorizedDatabases: false` asks for all
/// (then refused), those it holds any privilege on.
fn visible_databases(req: &Request) -> Result<check::Visible, CommandError> {
    let all_asked = req.opt_bool("authorizedDatabases")? == Some(false);
    if all_asked && !req.allowed("listDatabases", Tgt::Cluster)? {
        return Err(CommandError::new(
            13,
            "Insufficient permissions to list all databases",
        ));
    }
    req.listing_filter("listDatabases", Tgt::Cluster, privilege::any_on_database)
}

pub fn drop_database(req: &Request) -> CmdResult {
    let mut archived = Vec::new();
    for c in req.state.catalog.collections(&req.db) {
        if hourglass_timeseries::options_of(&c).is_some() {
            req.state.timeseries.forget(&c);
            archived.extend(hourglass_timeseries::TimeseriesStore::archived_files(&c)?);
        }
    }
    req.state.catalog.drop_database(&req.db)?;
    // The archived files go with their collections (after the drop is durable).
    hourglass_timeseries::delete_recorded(&archived);
    req.state.profiler.forget(&req.db);
    Ok(doc! {"dropped": &req.db})
}
