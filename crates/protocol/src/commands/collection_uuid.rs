//! The `collectionUUID` argument (MongoDB 6.0+): the command runs only if the collection
//! it names has that UUID; otherwise 361 `CollectionUUIDMismatch`, with the database, the
//! UUID, the name sent and the name of the collection that has the UUID (null if none
//! in this database). A view or a time-series collection name has no UUID of its own.
//! Checked by `dispatch` before the handler runs; commands that do not take the
//! argument refuse it as an unknown field.

use super::Request;
use crate::error::CommandError;
use bson::{doc, spec::BinarySubtype, Bson};

/// Commands that take `collectionUUID`.
const ACCEPTED_BY: &[&str] = &[
    "aggregate",
    "collMod",
    "count",
    "createIndexes",
    "delete",
    "distinct",
    "drop",
    "dropIndexes",
    "find",
    "findAndModify",
    "insert",
    "update",
];

pub fn check(req: &Request, command: &str) -> Result<(), CommandError> {
    let Some(v) = req.body.get("collectionUUID") else {
        return Ok(());
    };
    if !ACCEPTED_BY.contains(&command) {
        return Err(CommandError::unknown_field(command, "collectionUUID"));
    }
    let uuid = match v {
        Bson::Binary(b) if b.subtype == BinarySubtype::Uuid && b.bytes.len() == 16 => b.clone(),
        other => {
            return Err(req.wrong_type("collectionUUID", other, "uuid"));
        }
    };
    let expected = req.collection()?;
    let owner = req
        .state
        .catalog
        .collections(&req.db)
        .into_iter()
        .find(|c| c.uuid.bytes()[..] == uuid.bytes[..]);
    // A time-series collection's UUID is its buckets collection's, as in MongoDB.
    let owner_name = owner.map(|c| c.namespace().coll);
    if owner_name.as_deref() == Some(expected.as_str()) {
        return Ok(());
    }
    let actual = match owner_name {
        Some(n) => Bson::String(n),
        None => Bson::Null,
    };
    let mut e = CommandError::new(361, "Collection UUID does not match that specified");
    e.extra = Some(Box::new(doc! {
        "db": &req.db,
        "collectionUUID": Bson::Binary(uuid),
        "expectedCollection": expected,
        "actualCollection": actual,
    }));
    Err(e)
}
