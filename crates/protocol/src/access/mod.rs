//! Access control at the protocol edge: whether it is on (`--auth`), who each connection
//! has authenticated as ([`session`]), where users and roles are stored ([`store`]), what
//! roles add up to ([`roles`]) and what each command needs ([`check`]).

pub mod check;
pub mod roles;
pub mod session;
pub mod store;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Server-wide access-control state.
#[derive(Default)]
pub struct AccessControl {
    enabled: AtomicBool,
    /// Bumped by every change to users or roles; sessions re-resolve their privileges
    /// when it moves.
    generation: AtomicU64,
    /// Clear-text passwords recently verified (the HTTP API).
    pub passwords: hourglass_auth::password_cache::PasswordCache,
}

impl AccessControl {
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}
