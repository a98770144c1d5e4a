//! The sessions' multi-document transactions: for each logical session (by its `lsid`
//! UUID), its latest transaction number and whether that transaction is open, committed or
//! aborted. The session protocol around it (which fields a command carries, which commands
//! a transaction may run) is `commands::transaction`'s; the transaction's reads and writes
//! are `hourglass_storage`'s (`engine::txn`); its commit and abort are the catalog's.
//!
//! Error labels (`TransientTransactionError` on write conflicts and transactions that no
//! longer exist, so drivers' `withTransaction` retries) are added to replies in one place,
//! `commands::transaction::label_errors`.

use crate::error::CommandError;
use bson::{Bson, Document};
use hourglass_catalog::Catalog;
use hourglass_storage::Transaction;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

enum State {
    Open {
        txn: Arc<Transaction>,
        started: Instant,
        /// Read concern `local` (or none): the only level at which a transaction may
        /// create collections and indexes.
        local_reads: bool,
    },
    Committed,
    Aborted {
        why: &'static str,
    },
}

/// An open transaction, as a statement finds it.
pub struct Open {
    pub txn: Arc<Transaction>,
    pub local_reads: bool,
}

struct Session {
    number: i64,
    state: State,
    /// Last command of the session's transactions.
    used: Instant,
}

/// How long a session whose transaction has ended is remembered unused (mongod's
/// `localLogicalSessionTimeoutMinutes`, 30): its outcome answers retried commits until then.
const IDLE: Duration = Duration::from_secs(30 * 60);

/// Sessions with a transaction held at most (mongod's `maxSessions`): more get 261.
const MAX_SESSIONS: usize = 1_000_000;

const EXPIRED: &str = "it exceeded transactionLifetimeLimitSeconds";

/// How long a transaction may stay open (`transactionLifetimeLimitSeconds`, at least 1 s).
pub fn lifetime_limit(params: &crate::params::Parameters) -> Duration {
    let secs = params.get_i64("transactionLifetimeLimitSeconds", 60).max(1);
    Duration::from_secs(secs as u64)
}

impl Session {
    /// Aborts the session's transaction if it is open, recording why; true if it was.
    fn abort(&mut self, catalog: &Catalog, why: &'static str) -> bool {
        let State::Open { txn, .. } = &self.state else {
            return false;
        };
        catalog.abort_transaction(txn);
        self.state = State::Aborted { why };
        true
    }

    /// Aborts the session's transaction if it has been open longer than `limit`.
    fn expire(&mut self, catalog: &Catalog, limit: Duration) -> bool {
        let old = matches!(&self.state, State::Open { started, .. } if started.elapsed() > limit);
        old && self.abort(catalog, EXPIRED)
    }
}

/// The transactions of every session, by the session's UUID; and, with `--replSet`, each
/// session's latest retryable write and its reply (a retry of it gets the reply again
/// instead of running twice).
#[derive(Default)]
pub struct Transactions {
    sessions: Mutex<HashMap<Vec<u8>, Session>>,
    retryable: Mutex<HashMap<Vec<u8>, (i64, Document, Instant)>>,
}

/// Sessions whose latest retryable write is remembered at most (later ones run without
/// that protection, as a write without `txnNumber` does).
const MAX_RETRYABLE_SESSIONS: usize = 100_000;

/// What to do with a retryable write (`txnNumber` without `autocommit`).
pub enum Retry {
    /// Run it, then [`Transactions::record_retryable`] its reply.
    Run,
    /// It already ran: this is its reply.
    Replay(Document),
}

fn no_such_transaction(msg: String) -> CommandError {
    CommandError::new(251, msg)
}

fn committed(number: i64) -> CommandError {
    CommandError::new(256, format!("Transaction {number} has been committed."))
}

fn aborted(number: i64, why: &str) -> CommandError {
    no_such_transaction(format!(
        "Transaction with {{ txnNumber: {number} }} has been aborted ({why})."
    ))
}

/// The UUID bytes of a command's `lsid`, the key of its session.
pub fn session_key(lsid: Option<&Bson>) -> Option<Vec<u8>> {
    crate::sessions::session_id(lsid?)
}

impl Transactions {
    /// Starts the session's transaction `number` (`startTransaction: true`), aborting the
    /// session's open one: 225 for an older number, 117 for the current one.
    pub fn start(
        &self,
        catalog: &Catalog,
        key: &[u8],
        number: i64,
        local_reads: bool,
    ) -> Result<Open, CommandError> {
        let mut sessions = self.sessions.lock();
        if let Some(s) = sessions.get_mut(key) {
            if s.number > number {
                return Err(CommandError::new(
                    225,
                    format!("Cannot start transaction {number} on session because a newer transaction {} has already started.", s.number),
                ));
            }
            if s.number == number {
                return Err(CommandError::new(
                    117,
                    format!("Transaction with {{ txnNumber: {number} }} has already been started."),
                ));
            }
            s.abort(catalog, "a newer transaction started");
        }
        if sessions.len() >= MAX_SESSIONS && !sessions.contains_key(key) {
            return Err(CommandError::new(
                261,
                format!("Unable to add a transaction's session: {MAX_SESSIONS} sessions hold transactions"),
            ));
        }
        let txn = catalog.engine().begin_transaction();
        sessions.insert(
            key.to_vec(),
            Session {
                number,
                state: State::Open {
                    txn: txn.clone(),
                    started: Instant::now(),
                    local_reads,
                },
                used: Instant::now(),
            },
        );
        Ok(Open { txn, local_reads })
    }

    /// The session's open transaction `number`, for a statement after the first.
    pub fn resume(
        &self,
        catalog: &Catalog,
        key: &[u8],
        number: i64,
        limit: Duration,
    ) -> Result<Open, CommandError> {
        let mut sessions = self.sessions.lock();
        let s = session(&mut sessions, catalog, key, number, limit)?;
        match &s.state {
            State::Open {
                txn, local_reads, ..
            } => Ok(Open {
                txn: txn.clone(),
                local_reads: *local_reads,
            }),
            State::Committed => Err(committed(number)),
            State::Aborted { why } => Err(aborted(number, why)),
        }
    }

    /// A statement of the session's transaction `number` failed: the transaction is
    /// aborted, as in mongod.
    pub fn statement_failed(&self, catalog: &Catalog, key: &[u8], number: i64) {
        let mut sessions = self.sessions.lock();
        if let Some(s) = sessions.get_mut(key).filter(|s| s.number == number) {
            s.abort(catalog, "a statement failed");
        }
    }

    /// `commitTransaction`: applies the transaction's writes atomically and durably. A
    /// commit of a committed transaction succeeds again (drivers retry commits).
    pub fn commit(
        &self,
        catalog: &Catalog,
        key: &[u8],
        number: i64,
        limit: Duration,
    ) -> Result<(), CommandError> {
        let txn = {
            let mut sessions = self.sessions.lock();
            let s = session(&mut sessions, catalog, key, number, limit)?;
            match &s.state {
                State::Committed => return Ok(()),
                State::Aborted { why } => return Err(aborted(number, why)),
                State::Open { txn, .. } => {
                    let txn = txn.clone();
                    // Ended now: a statement arriving meanwhile finds no open transaction.
                    s.state = State::Aborted {
                        why: "its commit failed",
                    };
                    txn
                }
            }
        };
        let result = catalog.commit_transaction(&txn);
        if result.is_ok() {
            let mut sessions = self.sessions.lock();
            if let Some(s) = sessions.get_mut(key).filter(|s| s.number == number) {
                s.state = State::Committed;
            }
        }
        result.map_err(CommandError::from)
    }

    /// `abortTransaction`.
    pub fn abort(
        &self,
        catalog: &Catalog,
        key: &[u8],
        number: i64,
        limit: Duration,
    ) -> Result<(), CommandError> {
        let mut sessions = self.sessions.lock();
        let s = session(&mut sessions, catalog, key, number, limit)?;
        match &s.state {
            State::Committed => Err(committed(number)),
            State::Aborted { why } => Err(aborted(number, why)),
            State::Open { .. } => {
                s.abort(catalog, "aborted");
                Ok(())
            }
        }
    }

    /// A retryable write `number` of the session: run it, or replay the reply of the one
    /// that already ran; 225 for a number older than the session's latest.
    pub fn retryable(&self, key: &[u8], number: i64) -> Result<Retry, CommandError> {
        match self.retryable.lock().get(key) {
            Some((n, ..)) if *n > number => Err(CommandError::new(
                225,
                format!("Retryable write with txnNumber {number} is prohibited on session because a newer retryable write with txnNumber {n} has already started on this session."),
            )),
            Some((n, reply, _)) if *n == number => Ok(Retry::Replay(reply.clone())),
            _ => Ok(Retry::Run),
        }
    }

    /// Remembers the reply of the session's retryable write `number`.
    pub fn record_retryable(&self, key: Vec<u8>, number: i64, reply: &Document) {
        let mut retryable = self.retryable.lock();
        if retryable.len() < MAX_RETRYABLE_SESSIONS || retryable.contains_key(&key) {
            retryable.insert(key, (number, reply.clone(), Instant::now()));
        }
    }

    /// Aborts the transactions of `lsids` and forgets the sessions (`endSessions`).
    pub fn end_sessions(&self, catalog: &Catalog, lsids: &[Bson]) {
        let mut retryable = self.retryable.lock();
        let mut sessions = self.sessions.lock();
        for key in lsids.iter().filter_map(|l| session_key(Some(l))) {
            retryable.remove(&key);
            if let Some(Session {
                state: State::Open { txn, .. },
                ..
            }) = sessions.remove(&key)
            {
                catalog.abort_transaction(&txn);
            }
        }
    }

    /// Aborts open transactions older than `limit` (the periodic sweep; a statement of
    /// such a transaction also aborts it) and forgets sessions unused for [`IDLE`] whose
    /// transaction has ended. Returns how many transactions it aborted.
    pub fn expire(&self, catalog: &Catalog, limit: Duration) -> usize {
        self.retryable
            .lock()
            .retain(|_, (_, _, used)| used.elapsed() < IDLE);
        let mut sessions = self.sessions.lock();
        sessions.retain(|_, s| matches!(s.state, State::Open { .. }) || s.used.elapsed() < IDLE);
        let mut n = 0;
        for s in sessions.values_mut() {
            n += usize::from(s.expire(catalog, limit));
        }
        n
    }
}

/// The session's entry for transaction `number`, with an expired open transaction aborted;
/// 225 for an older number, 251 when the session has no such transaction.
fn session<'a>(
    sessions: &'a mut HashMap<Vec<u8>, Session>,
    catalog: &Catalog,
    key: &[u8],
    number: i64,
    limit: Duration,
) -> Result<&'a mut Session, CommandError> {
    let Some(s) = sessions.get_mut(key) else {
        return Err(no_such_transaction(format!(
            "Given transaction number {number} does not match any in-progress transactions."
        )));
    };
    if s.number > number {
        return Err(CommandError::new(
            225,
            format!("Cannot continue transaction {number} on session because a newer transaction {} has started.", s.number),
        ));
    }
    if s.number < number {
        return Err(no_such_transaction(format!(
            "Given transaction number {number} does not match any in-progress transactions. The active transaction number is {}",
            s.number
        )));
    }
    s.expire(catalog, limit);
    s.used = Instant::now();
    Ok(s)
}
