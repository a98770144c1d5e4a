//! `listDatabases` and `dropDatabase`.

use super::Request;
use crate::error::CmdResult;
use bson::{doc, Bson};
use hourglass_query::filter::Filter;

pub fn list_databases(req: &Request) -> CmdResult {
    req.check_fields(&["filter", "nameOnly", "authorizedDatabases"])?;
    let filter = match req.opt_document("filter")? {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    let name_only = req.opt_bool("nameOnly")?.unwrap_or(false);
    let mut total: i64 = 0;
    let mut out = Vec::new();
    for (name, size) in req.state.catalog.databases() {
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

pub fn drop_database(req: &Request) -> CmdResult {
    req.state.catalog.drop_database(&req.db)?;
    Ok(doc! {"dropped": &req.db})
}
