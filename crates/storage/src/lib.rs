//! Storage layer: a thin adapter over the fjall embedded LSM engine.
//!
//! Everything above this crate sees named [`Tree`]s (one fjall keyspace each), atomic
//! [`Batch`]es that may span trees, MVCC [`Snapshot`]s for readers, and a
//! [`Engine::commit`] that is durable when it returns: concurrent committers share one
//! `fsync` through [`group_commit`].

pub mod engine;
pub mod error;
pub mod group_commit;
pub mod read_ahead;

pub use engine::txn::{self, Transaction};
pub use engine::{Batch, Engine, SharedValue, Snapshot, Tree};
pub use error::StorageError;
