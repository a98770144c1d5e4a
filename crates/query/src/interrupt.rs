//! Interruption of a running operation: `killOp`, `maxTimeMS` and a client that went away.
//!
//! The protocol layer installs an [`Interrupt`] for the operation running on a thread;
//! every loop over documents (scans, bucket scans, pipeline stages) calls [`check`], which
//! fails with 11601 `Interrupted` once the operation is killed and with 50
//! `MaxTimeMSExpired` once its deadline has passed. Expression evaluation does not check:
//! a filter's `$expr` turns an error into "no match", so an interruption there would drop
//! documents silently instead of failing the operation; the check after each document
//! stops it instead (array expressions are bounded by their memory limits).

use crate::QueryError;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// What may stop one operation.
#[derive(Debug, Default)]
pub struct Interrupt {
    killed: AtomicBool,
    deadline: OnceLock<Instant>,
}

impl Interrupt {
    pub fn new(deadline: Option<Instant>) -> Interrupt {
        let i = Interrupt::default();
        if let Some(d) = deadline {
            i.set_deadline(d);
        }
        i
    }

    /// Sets the time limit (once; later calls keep the first).
    pub fn set_deadline(&self, at: Instant) {
        let _ = self.deadline.set(at);
    }

    /// Time left before the deadline (zero once past it); None without a deadline.
    pub fn remaining(&self) -> Option<std::time::Duration> {
        self.deadline
            .get()
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// Fails when killed or past the deadline.
    pub fn check(&self) -> Result<(), QueryError> {
        if self.is_killed() {
            return Err(QueryError::Interrupted("operation was interrupted".into()));
        }
        if self.deadline.get().is_some_and(|d| Instant::now() >= *d) {
            return Err(QueryError::MaxTimeMSExpired(
                "operation exceeded time limit".into(),
            ));
        }
        Ok(())
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Interrupt>>> = const { RefCell::new(None) };
    static CALLS: Cell<u32> = const { Cell::new(0) };
}

/// Makes `interrupt` the current thread's operation until the guard is dropped (the
/// previous one is restored then).
pub fn enter(interrupt: Arc<Interrupt>) -> Entered {
    let previous = CURRENT.with(|c| c.borrow_mut().replace(interrupt));
    Entered { previous }
}

/// Restores the previous operation of this thread when dropped.
pub struct Entered {
    previous: Option<Arc<Interrupt>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// The current thread's operation, to carry into work done on other threads.
pub fn current() -> Option<Arc<Interrupt>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Fails when the current thread's operation was killed or ran past its time limit. Cheap
/// enough for per-document loops: the kill flag is read each call, the clock every 64th.
pub fn check() -> Result<(), QueryError> {
    CURRENT.with(|c| {
        let c = c.borrow();
        let Some(i) = c.as_ref() else {
            return Ok(());
        };
        if i.is_killed() {
            return i.check();
        }
        let n = CALLS.with(|k| {
            let n = k.get().wrapping_add(1);
            k.set(n);
            n
        });
        if n.is_multiple_of(64) {
            i.check()
        } else {
            Ok(())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_killed_operation_fails_with_interrupted() {
        let i = Arc::new(Interrupt::new(None));
        let _g = enter(i.clone());
        assert!(check().is_ok());
        i.kill();
        assert!(matches!(check(), Err(QueryError::Interrupted(_))));
    }

    #[test]
    fn a_past_deadline_fails_with_max_time_expired_within_64_checks() {
        let i = Arc::new(Interrupt::new(Some(
            Instant::now() - Duration::from_millis(1),
        )));
        let _g = enter(i);
        let failed = (0..64).any(|_| check().is_err());
        assert!(failed);
        assert!(matches!(
            current().unwrap().check(),
            Err(QueryError::MaxTimeMSExpired(_))
        ));
    }

    #[test]
    fn no_operation_never_fails() {
        assert!((0..200).all(|_| check().is_ok()));
    }
}
