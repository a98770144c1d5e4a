//! End-to-end tests: the real `hourglass` binary driven by the official MongoDB Rust driver
//! and by hand-built wire-protocol frames. Each test starts its own server on a free port
//! with a temporary dbpath.

mod common;

mod auth;
mod collections;
mod crud;
mod durability;
mod handshake;
mod indexes;
mod pipeline_golden;
mod timeseries;
mod timeseries_indexes;
mod timeseries_writes;
mod ttl;
mod wire;
