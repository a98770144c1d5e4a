//! Access control without I/O: the SCRAM server conversation and stored credentials,
//! MongoDB's privilege model (resource patterns and actions) and its built-in roles. The
//! protocol crate stores users and roles and checks each command against these.

pub mod builtin_roles;
pub mod password_cache;
pub mod privilege;
pub mod scram;

pub use privilege::{Privilege, Resource, Target};
pub use scram::{ClientFirst, Credential, Mechanism, ScramError, ServerConversation};
