//! Operations in progress, for `currentOp` and `killOp`: every command is registered
//! for as long as it runs; a kill sets a flag that long-running loops check (scans
//! check it as they stream documents) and the operation then fails with MongoDB's
//! Interrupted (11601).

use crate::error::CommandError;
use bson::{doc, Document};
use hourglass_query::interrupt::{self, Interrupt};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One running operation.
#[derive(Debug)]
pub struct Op {
    pub opid: u64,
    pub conn_id: i64,
    pub client: String,
    pub ns: String,
    pub kind: &'static str,
    pub command: Document,
    pub started: Instant,
    /// Set by killOp (or a client disconnecting); carries the maxTimeMS deadline.
    pub interrupt: Arc<Interrupt>,
}

impl Op {
    /// The `inprog` entry of `currentOp`.
    pub fn to_document(&self, host: &str) -> Document {
        let micros = self.started.elapsed().as_micros() as i64;
        doc! {
            "type": "op",
            "host": host,
            "desc": format!("conn{}", self.conn_id),
            "connectionId": self.conn_id,
            "client": &self.client,
            "active": true,
            "currentOpTime": bson::DateTime::now().try_to_rfc3339_string().unwrap_or_default(),
            "opid": self.opid as i64,
            "secs_running": micros / 1_000_000,
            "microsecs_running": micros,
            "op": self.kind,
            "ns": &self.ns,
            "command": self.command.clone(),
            "numYields": 0,
            "waitingForLock": false,
            "killPending": self.interrupt.is_killed(),
        }
    }
}

/// Every running operation, by opid.
#[derive(Default)]
pub struct OpRegistry {
    next: AtomicU64,
    ops: Mutex<BTreeMap<u64, Arc<Op>>>,
}

/// Keeps an operation registered (and its interrupt current on this thread) while alive.
pub struct OpGuard<'a> {
    registry: &'a OpRegistry,
    opid: u64,
    _entered: interrupt::Entered,
}

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        self.registry.ops.lock().remove(&self.opid);
    }
}

impl OpRegistry {
    pub fn begin(
        &self,
        conn_id: i64,
        client: &str,
        ns: String,
        kind: &'static str,
        command: &Document,
        interrupt: Arc<Interrupt>,
    ) -> OpGuard<'_> {
        let opid = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        // Large payloads (insert documents) are not kept.
        let mut command = command.clone();
        for big in ["documents", "updates", "deletes"] {
            if command.contains_key(big) {
                command.insert(big, "<omitted>");
            }
        }
        let op = Arc::new(Op {
            opid,
            conn_id,
            client: client.to_string(),
            ns,
            kind,
            command,
            started: Instant::now(),
            interrupt: interrupt.clone(),
        });
        self.ops.lock().insert(opid, op);
        OpGuard {
            registry: self,
            opid,
            _entered: interrupt::enter(interrupt),
        }
    }

    pub fn all(&self) -> Vec<Arc<Op>> {
        self.ops.lock().values().cloned().collect()
    }

    /// Marks an operation killed; false when there is no such operation.
    pub fn kill(&self, opid: u64) -> bool {
        match self.ops.lock().get(&opid) {
            Some(op) => {
                op.interrupt.kill();
                true
            }
            None => false,
        }
    }
}

/// Fails with Interrupted when the operation running on this thread was killed (or its
/// client left), and with MaxTimeMSExpired once its maxTimeMS has passed.
pub fn check_interrupt() -> Result<(), CommandError> {
    interrupt::check().map_err(CommandError::from)
}
