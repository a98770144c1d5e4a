//! The gate `fsync: 1, lock: true` closes: while it is locked, every command that writes
//! (and the HTTP writes and the TTL monitor) waits before it starts, and reads go on.
//! `fsyncUnlock` opens it once per lock taken, as MongoDB counts them.

use hourglass_query::interrupt::Interrupt;
use parking_lot::{Condvar, Mutex};
use std::time::Duration;

#[derive(Default)]
pub struct WriteGate {
    locks: Mutex<u32>,
    opened: Condvar,
}

impl WriteGate {
    /// Takes one more lock; returns the lock count.
    pub fn lock(&self) -> u32 {
        let mut n = self.locks.lock();
        *n += 1;
        *n
    }

    /// Releases one lock; returns the count left, or None when it was not locked.
    pub fn unlock(&self) -> Option<u32> {
        let mut n = self.locks.lock();
        if *n == 0 {
            return None;
        }
        *n -= 1;
        if *n == 0 {
            self.opened.notify_all();
        }
        Some(*n)
    }

    pub fn is_locked(&self) -> bool {
        *self.locks.lock() > 0
    }

    /// Waits until the gate is open, or until `interrupt` fires (killOp, maxTimeMS, the
    /// client leaving): then false.
    pub fn wait_open(&self, interrupt: Option<&Interrupt>) -> bool {
        let mut n = self.locks.lock();
        while *n > 0 {
            if interrupt.is_some_and(|i| i.check().is_err()) {
                return false;
            }
            self.opened.wait_for(&mut n, Duration::from_millis(50));
        }
        true
    }
}
