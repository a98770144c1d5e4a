//! Protocol layer: the MongoDB wire codec, connection handling, command dispatch, cursors
//! and server parameters. The server binary only binds sockets and hands each accepted
//! connection to [`connection::serve`].

pub mod access;
pub mod archive_mover;
pub mod client;
pub mod commands;
pub mod connection;
pub mod cursor;
pub mod error;
pub mod fail_point;
pub mod fuzzing;
pub mod operations;
pub mod params;
pub mod profiler;
pub mod repl_set;
pub mod sessions;
pub mod state;
pub mod top;
pub mod transactions;
pub mod ttl;
pub mod wire;
pub mod write_gate;

pub use client::ConnInfo;
pub use error::CommandError;
pub use state::{CmdLine, RecentLog, ServerState};
