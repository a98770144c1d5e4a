//! Checks of a `$lookup` specification that MongoDB 7.0 applies at parse time.

use crate::error::QueryError;

/// `as` is a field path: not empty, no empty or `$`-prefixed component.
pub(super) fn check_as_path(path: &str) -> Result<(), QueryError> {
    if path.is_empty() {
        return Err(QueryError::loc(
            40352,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    if path.split('.').any(str::is_empty) {
        return Err(QueryError::loc(
            15998,
            "FieldPath field names may not be empty strings.",
        ));
    }
    if path.split('.').any(|p| p.starts_with('$')) {
        return Err(QueryError::loc(
            16410,
            "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
        ));
    }
    Ok(())
}

/// `from: {db, coll}`: MongoDB 7.0 reads another database only for its internal
/// `config.cache.chunks.*` and `local.oplog.rs` collections.
pub(super) fn check_foreign_db(db: &str, coll: &str) -> Result<(), QueryError> {
    if (db == "config" && coll.starts_with("cache.chunks."))
        || (db == "local" && coll == "oplog.rs")
    {
        return Ok(());
    }
    Err(QueryError::FailedToParse(format!(
        "$lookup with syntax {{from: {{db:<>, coll:<>}},..}} is not supported for db: {db} and coll: {coll}"
    )))
}
