//! Hourglass query layer: BSON comparison order, filter matching, projection,
//! sorting, update operators, aggregation expressions and pipelines.
//!
//! Everything works one document at a time on `bson::Document` values. User
//! supplied specifications (filters, updates, pipelines) are parsed once into
//! validated structures; parse errors are returned as [`QueryError`] values that
//! carry MongoDB's numeric error codes and code names.

#![forbid(unsafe_code)]

pub mod bson_size;
pub mod bson_write;
pub mod collation;
pub mod compare;
pub mod decimal;
pub mod error;
pub mod expr;
pub mod filter;
pub mod geo;
pub mod interrupt;
pub mod keystring;
pub mod let_vars;
pub mod limits;
pub mod num;
pub mod path;
pub mod pcre;
pub mod pipeline;
pub mod projection;
pub mod raw_check;
pub mod raw_pick;
pub mod raw_slots;
pub mod sort;
pub mod update;

pub use error::QueryError;
