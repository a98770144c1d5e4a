//! Replica-set commands on a standalone server: Hourglass runs standalone, so each
//! answers as a standalone mongod does, 76 `NoReplicationEnabled`.

use super::Request;
use crate::error::{CmdResult, CommandError};

pub fn not_replica_set(_req: &Request) -> CmdResult {
    Err(CommandError::new(76, "not running with --replSet"))
}
