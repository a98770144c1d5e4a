//! Catalog layer: databases, collections and the documents in them.
//!
//! Collections are persisted in the storage layer: one metadata tree (`catalog`) holds a
//! BSON description of every collection, and each collection's documents live in their own
//! tree keyed by the key-string of `_id`. Document-level writes (insert, update, delete,
//! findAndModify) run here so that every write is one atomic, durable storage batch.

pub mod catalog;
pub mod collection;
pub mod distinct_scan;
pub mod error;
mod expire;
pub use expire::ExpireBy;
pub mod index;
mod index_ddl;
mod index_unique;
pub mod keystring;
pub mod namespace;
pub mod plan;
mod plan_geo;
pub mod plan_min_max;
pub mod scan;
mod transaction;
pub mod validation;
pub mod writes;

pub use catalog::Catalog;
pub use collection::Collection;
pub use error::CatalogError;
pub use index_ddl::{
    CreateIndexesOutcome, DropIndexes, IndexChanges, IndexModification, IndexSelector,
};
pub use namespace::Namespace;
