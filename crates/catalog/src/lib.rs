//! Catalog layer: databases, collections and the documents in them.
//!
//! Collections are persisted in the storage layer: one metadata tree (`catalog`) holds a
//! BSON description of every collection, and each collection's documents live in their own
//! tree keyed by the key-string of `_id`. Document-level writes (insert, update, delete,
//! findAndModify) run here so that every write is one atomic, durable storage batch.

pub mod catalog;
pub mod collection;
pub mod error;
pub mod keystring;
pub mod namespace;
pub mod writes;

pub use catalog::Catalog;
pub use collection::Collection;
pub use error::CatalogError;
pub use namespace::Namespace;
