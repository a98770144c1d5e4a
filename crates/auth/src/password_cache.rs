//! Recently verified clear-text passwords (HTTP Basic and InfluxDB's `u`/`p`), so that a
//! writer sending the same credentials with every batch pays PBKDF2 once, not per request.
//! Entries are keyed by an HMAC of user and password under a random per-process key (the
//! password itself is never kept) and hold the access generation they were verified at:
//! any change to users or roles makes them stale.

use hmac::{KeyInit, Mac};
use rand::RngCore;
use std::collections::HashMap;
use std::sync::Mutex;

/// Most entries kept; the cache starts over when full.
const CAPACITY: usize = 4096;

pub struct PasswordCache {
    key: [u8; 32],
    entries: Mutex<HashMap<[u8; 32], u64>>,
}

impl Default for PasswordCache {
    fn default() -> Self {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        PasswordCache {
            key,
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl PasswordCache {
    fn digest(&self, user: &str, password: &str) -> [u8; 32] {
        let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.key)
            .expect("HMAC accepts any key length");
        m.update(&(user.len() as u64).to_le_bytes());
        m.update(user.as_bytes());
        m.update(password.as_bytes());
        m.finalize().into_bytes().into()
    }

    /// Whether `user` with `password` was verified at `generation`.
    pub fn verified(&self, user: &str, password: &str, generation: u64) -> bool {
        let d = self.digest(user, password);
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(&d) == Some(&generation)
    }

    /// Records a successful verification at `generation`.
    pub fn remember(&self, user: &str, password: &str, generation: u64) {
        let d = self.digest(user, password);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(d, generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_hold_for_their_generation_and_password_only() {
        let c = PasswordCache::default();
        c.remember("admin.u", "pw", 3);
        assert!(c.verified("admin.u", "pw", 3));
        assert!(!c.verified("admin.u", "pw", 4));
        assert!(!c.verified("admin.u", "other", 3));
        assert!(!c.verified("admin.v", "pw", 3));
    }
}
