//! Multi-document transactions: a snapshot taken when the transaction starts, plus an
//! overlay of the transaction's own writes that its reads see on top of it. Nothing is
//! applied to the engine until commit, which checks every written key against the snapshot
//! (a key changed since by anyone else is a write conflict: first committer wins) and applies
//! the overlay as one atomic batch, durable through group commit like any other.
//!
//! The transaction a thread works for is set with [`Transaction::enter`] for the length of
//! one command: [`Engine::snapshot`] then reads through the overlay, and batches built by
//! [`Engine::batch`] and passed to [`Engine::apply`] go into the overlay instead of the
//! engine. [`Engine::commit`] (used by DDL, index builds and the time-series store) always
//! writes to the engine.
//!
//! A key written by an open transaction is held by it until it ends: another transaction
//! writing the same key gets a write conflict at once (first writer wins, as in MongoDB).
//! A write outside transactions to a held key waits for the transaction to end, as in
//! MongoDB: a batch from [`Engine::document_batch`] built while transactions are open
//! records its keys, [`Engine::apply`] refuses it with [`StorageError::HeldByTransaction`], and the
//! caller, having let go of its locks, waits ([`Engine::wait_for_transaction`]) and builds
//! the write again. (A transaction that starts after such a batch was built, and writes
//! one of its keys first, fails at commit instead.)

use super::{Engine, KeyValue, Tree};
use crate::error::{Result, StorageError};
use fjall::Readable;
use parking_lot::{Condvar, Mutex};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// A key's new value in a transaction: `None` deletes it.
type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// One key a transaction wrote, with its new value (`None`: deleted).
pub(crate) type Written = (Vec<u8>, Option<Vec<u8>>);

/// One write staged in a batch built for a transaction.
pub(crate) type Op = (Tree, Vec<u8>, Option<Vec<u8>>);

/// A transaction's writes per tree (copy on write: snapshots taken during the transaction
/// share the maps until the next write).
#[derive(Clone, Default)]
pub(crate) struct Overlay {
    trees: HashMap<String, (Tree, Arc<Writes>)>,
}

impl Overlay {
    /// The transaction's value for `key`: `Some(None)` when it deleted the key, `None` when
    /// it did not write it.
    pub(crate) fn get(&self, tree: &Tree, key: &[u8]) -> Option<Option<Vec<u8>>> {
        self.trees.get(tree.name())?.1.get(key).cloned()
    }

    /// The transaction's writes to `tree` in `[start, end)` (`end` `None`: to the end), in
    /// key order.
    pub(crate) fn range(&self, tree: &Tree, start: &[u8], end: Option<&[u8]>) -> Vec<Written> {
        let Some((_, writes)) = self.trees.get(tree.name()) else {
            return Vec::new();
        };
        let upper = match end {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        writes
            .range::<[u8], _>((Bound::Included(start), upper))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The transaction's writes to `tree` whose key starts with `prefix`.
    pub(crate) fn prefix(&self, tree: &Tree, prefix: &[u8]) -> Vec<Written> {
        let Some((_, writes)) = self.trees.get(tree.name()) else {
            return Vec::new();
        };
        writes
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn write(&mut self, op: Op) {
        let (tree, key, value) = op;
        let entry = self
            .trees
            .entry(tree.name().to_string())
            .or_insert_with(|| (tree, Arc::default()));
        Arc::make_mut(&mut entry.1).insert(key, value);
    }

    fn keys(&self) -> impl Iterator<Item = (&Tree, &Vec<u8>, &Option<Vec<u8>>)> {
        self.trees
            .values()
            .flat_map(|(tree, w)| w.iter().map(move |(k, v)| (tree, k, v)))
    }
}

/// An open multi-document transaction.
pub struct Transaction {
    id: u64,
    base: fjall::Snapshot,
    overlay: Mutex<Overlay>,
    /// Set when a collection it wrote changed shape (its indexes or validator): what it
    /// staged may no longer be what a write would stage, so it can only fail.
    invalid: AtomicBool,
    /// Bytes of keys and values its writes staged (rewrites of a key count again).
    bytes: AtomicU64,
}

/// Most bytes one transaction may stage: its writes live in memory until commit.
pub const MAX_TRANSACTION_BYTES: u64 = 512 << 20;

thread_local! {
    static ACTIVE: RefCell<Option<Arc<Transaction>>> = const { RefCell::new(None) };
}

/// While alive, the thread works for the transaction it was made for (or for none); the one
/// before is restored when it drops.
pub struct Scope {
    prev: Option<Arc<Transaction>>,
}

impl Drop for Scope {
    fn drop(&mut self) {
        let prev = self.prev.take();
        ACTIVE.with(|a| *a.borrow_mut() = prev);
    }
}

fn set_active(txn: Option<Arc<Transaction>>) -> Scope {
    let prev = ACTIVE.with(|a| std::mem::replace(&mut *a.borrow_mut(), txn));
    Scope { prev }
}

impl Transaction {
    /// Makes this the transaction the current thread works for, until the scope drops.
    pub fn enter(self: &Arc<Self>) -> Scope {
        set_active(Some(self.clone()))
    }

    /// Runs the current thread outside any transaction until the scope drops (e.g. to
    /// create a collection a transaction's first insert needs).
    pub fn suspend() -> Scope {
        set_active(None)
    }

    /// A number no other transaction of this engine has.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The transaction the current thread works for.
    pub fn active() -> Option<Arc<Transaction>> {
        ACTIVE.with(|a| a.borrow().clone())
    }

    /// Names of the trees this transaction wrote to.
    pub fn written_trees(&self) -> Vec<String> {
        self.overlay.lock().trees.keys().cloned().collect()
    }

    /// The snapshot and writes its reads see now.
    pub(crate) fn view(&self) -> (fjall::Snapshot, Overlay) {
        (self.base.clone(), self.overlay.lock().clone())
    }
}

/// Keys held by open transactions: (tree, key) -> transaction id; and the open
/// transactions.
#[derive(Default)]
pub(crate) struct Holds {
    map: Mutex<HashMap<(String, Vec<u8>), u64>>,
    open: Mutex<HashMap<u64, Weak<Transaction>>>,
    /// Signalled (with `open` locked) whenever a transaction ends.
    ended: Condvar,
    next_id: AtomicU64,
}

impl Holds {
    /// Whether any transaction is open (a batch built now records its keys).
    pub(crate) fn any_open(&self) -> bool {
        !self.open.lock().is_empty()
    }
}

fn conflict() -> StorageError {
    StorageError::WriteConflict
}

impl Engine {
    /// Starts a transaction on the engine's current state.
    pub fn begin_transaction(&self) -> Arc<Transaction> {
        let txn = Arc::new(Transaction {
            id: self.holds.next_id.fetch_add(1, Ordering::Relaxed) + 1,
            base: self.db.snapshot(),
            overlay: Mutex::new(Overlay::default()),
            invalid: AtomicBool::new(false),
            bytes: AtomicU64::new(0),
        });
        self.holds.open.lock().insert(txn.id, Arc::downgrade(&txn));
        txn
    }

    /// Makes every open transaction that wrote to `tree` (or to a tree named `tree.*`,
    /// e.g. its indexes) fail with a write conflict. Called, under the collection's write
    /// lock, when a collection's indexes or validator change.
    pub fn invalidate_transactions_writing(&self, tree: &str) {
        let dotted = format!("{tree}.");
        self.holds.open.lock().retain(|_, weak| {
            let Some(txn) = weak.upgrade() else {
                return false;
            };
            let wrote = txn
                .overlay
                .lock()
                .trees
                .keys()
                .any(|t| t == tree || t.starts_with(&dotted));
            if wrote {
                txn.invalid.store(true, Ordering::SeqCst);
            }
            true
        });
    }

    /// Whether `key` of `tree` changed since `txn` started.
    fn changed_since(&self, txn: &Transaction, tree: &Tree, key: &[u8]) -> Result<bool> {
        let now = tree.ks.get(key)?;
        let then = txn.base.get(&tree.ks, key)?;
        Ok(now.as_deref() != then.as_deref())
    }

    /// Puts a batch built for `txn` into its overlay, after checking that no key changed
    /// since it started and none is held by another open transaction.
    pub(crate) fn apply_in_transaction(&self, txn: &Transaction, ops: Vec<Op>) -> Result<()> {
        if txn.invalid.load(Ordering::SeqCst) {
            return Err(conflict());
        }
        let adds: u64 = ops
            .iter()
            .map(|(_, k, v)| (k.len() + v.as_ref().map_or(0, Vec::len)) as u64)
            .sum();
        let total = txn.bytes.load(Ordering::SeqCst).saturating_add(adds);
        if total > MAX_TRANSACTION_BYTES {
            return Err(StorageError::TransactionTooLarge {
                limit: MAX_TRANSACTION_BYTES,
            });
        }
        let mut holds = self.holds.map.lock();
        for (tree, key, _) in &ops {
            match holds.get(&(tree.name().to_string(), key.clone())) {
                Some(id) if *id != txn.id => return Err(conflict()),
                _ => {}
            }
            if self.changed_since(txn, tree, key)? {
                return Err(conflict());
            }
        }
        txn.bytes.store(total, Ordering::SeqCst);
        let mut overlay = txn.overlay.lock();
        for op in ops {
            holds.insert((op.0.name().to_string(), op.1.clone()), txn.id);
            overlay.write(op);
        }
        Ok(())
    }

    /// Applies `txn`'s writes as one atomic batch (returns the ticket to wait on for
    /// durability), or fails with a write conflict when a key it wrote changed since it
    /// started. The caller keeps writers of the same collections out meanwhile (their
    /// read-modify-write must not straddle the check). Either way the transaction is over.
    pub fn commit_transaction(&self, txn: &Transaction) -> Result<u64> {
        let overlay = std::mem::take(&mut *txn.overlay.lock());
        let result = (|| {
            if txn.invalid.load(Ordering::SeqCst) {
                return Err(conflict());
            }
            for (tree, key, _) in overlay.keys() {
                if self.changed_since(txn, tree, key)? {
                    return Err(conflict());
                }
            }
            let mut batch = self.plain_batch();
            for (tree, key, value) in overlay.keys() {
                match value {
                    Some(v) => batch.put(tree, key, v),
                    None => batch.delete(tree, key),
                }
            }
            self.apply(batch)
        })();
        self.release(txn, &overlay);
        result
    }

    /// Drops `txn`'s writes and releases its keys.
    pub fn abort_transaction(&self, txn: &Transaction) {
        let overlay = std::mem::take(&mut *txn.overlay.lock());
        self.release(txn, &overlay);
    }

    fn release(&self, txn: &Transaction, overlay: &Overlay) {
        {
            let mut holds = self.holds.map.lock();
            for (tree, key, _) in overlay.keys() {
                let k = (tree.name().to_string(), key.clone());
                if holds.get(&k) == Some(&txn.id) {
                    holds.remove(&k);
                }
            }
        }
        self.holds.open.lock().remove(&txn.id);
        self.holds.ended.notify_all();
    }

    /// The open transaction holding one of `keys` (tree name, key), if any. A hold of a
    /// transaction that no longer exists (dropped without ending) does not count.
    pub(crate) fn holder(&self, keys: &[(String, Vec<u8>)]) -> Option<u64> {
        let holds = self.holds.map.lock();
        let open = self.holds.open.lock();
        keys.iter().find_map(|k| {
            let id = *holds.get(k)?;
            open.get(&id)
                .is_some_and(|w| w.strong_count() > 0)
                .then_some(id)
        })
    }

    /// Waits until transaction `id` has ended, or `timeout` passed; true once it ended.
    pub fn wait_for_transaction(&self, id: u64, timeout: std::time::Duration) -> bool {
        let mut open = self.holds.open.lock();
        let alive = |open: &HashMap<u64, Weak<Transaction>>| {
            open.get(&id).is_some_and(|w| w.strong_count() > 0)
        };
        if alive(&open) {
            self.holds.ended.wait_for(&mut open, timeout);
        }
        !alive(&open)
    }
}

/// Entries of the engine merged with a transaction's writes to the same range (in the same
/// direction): its writes replace the engine's values, its deletions hide them.
pub(crate) struct Merge<I: Iterator<Item = Result<KeyValue>>> {
    base: std::iter::Peekable<I>,
    over: std::iter::Peekable<std::vec::IntoIter<Written>>,
    reverse: bool,
}

impl<I: Iterator<Item = Result<KeyValue>>> Merge<I> {
    /// `over` is in ascending key order; it is reversed here for a backward scan.
    pub(crate) fn new(base: I, mut over: Vec<Written>, reverse: bool) -> Self {
        if reverse {
            over.reverse();
        }
        Merge {
            base: base.peekable(),
            over: over.into_iter().peekable(),
            reverse,
        }
    }
}

enum Next {
    Base,
    Over { shadows: bool },
}

impl<I: Iterator<Item = Result<KeyValue>>> Iterator for Merge<I> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let next = match (self.base.peek(), self.over.peek()) {
                (_, None) | (Some(Err(_)), Some(_)) => Next::Base,
                (None, Some(_)) => Next::Over { shadows: false },
                (Some(Ok((bk, _))), Some((ok, _))) => {
                    let ord = ok.as_slice().cmp(bk.as_slice());
                    let ord = if self.reverse { ord.reverse() } else { ord };
                    match ord {
                        std::cmp::Ordering::Less => Next::Over { shadows: false },
                        std::cmp::Ordering::Equal => Next::Over { shadows: true },
                        std::cmp::Ordering::Greater => Next::Base,
                    }
                }
            };
            match next {
                Next::Base => return self.base.next(),
                Next::Over { shadows } => {
                    if shadows {
                        self.base.next();
                    }
                    let (k, v) = self.over.next()?;
                    if let Some(v) = v {
                        return Some(Ok((k, v)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> (tempfile::TempDir, Engine, Tree) {
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(dir.path()).unwrap();
        let t = e.tree("t").unwrap();
        (dir, e, t)
    }

    fn put(e: &Engine, t: &Tree, k: &str, v: &str) -> Result<u64> {
        let mut b = e.document_batch();
        b.put(t, k.as_bytes(), v.as_bytes());
        e.apply(b)
    }

    fn read(e: &Engine, t: &Tree, k: &str) -> Option<String> {
        let v = e.snapshot().get(t, k.as_bytes()).unwrap()?;
        Some(String::from_utf8(v).unwrap())
    }

    #[test]
    fn writes_inside_stay_in_the_transaction_until_commit_and_reads_inside_see_them() {
        let (_d, e, t) = engine();
        put(&e, &t, "a", "0").unwrap();
        let txn = e.begin_transaction();
        {
            let _in = txn.enter();
            assert_eq!(put(&e, &t, "a", "1").unwrap(), 0);
            assert_eq!(read(&e, &t, "a").as_deref(), Some("1"));
        }
        assert_eq!(read(&e, &t, "a").as_deref(), Some("0"));
        let ticket = e.commit_transaction(&txn).unwrap();
        e.wait_durable(ticket).unwrap();
        assert_eq!(read(&e, &t, "a").as_deref(), Some("1"));
    }

    #[test]
    fn the_second_transaction_to_write_a_key_conflicts_at_once_and_after_the_first_ends_it_may() {
        let (_d, e, t) = engine();
        let (t1, t2) = (e.begin_transaction(), e.begin_transaction());
        {
            let _in = t1.enter();
            put(&e, &t, "k", "1").unwrap();
        }
        {
            let _in = t2.enter();
            assert!(matches!(
                put(&e, &t, "k", "2"),
                Err(StorageError::WriteConflict)
            ));
        }
        e.abort_transaction(&t1);
        let t3 = e.begin_transaction();
        let _in = t3.enter();
        put(&e, &t, "k", "3").unwrap();
    }

    #[test]
    fn a_key_changed_outside_after_the_transaction_started_fails_its_commit() {
        let (_d, e, t) = engine();
        let txn = e.begin_transaction();
        {
            let _in = txn.enter();
            put(&e, &t, "k", "inside").unwrap();
        }
        // `commit` (DDL's way) does not wait for holds.
        let mut b = e.batch();
        b.put(&t, b"k", b"outside");
        e.commit(b).unwrap();
        assert!(matches!(
            e.commit_transaction(&txn),
            Err(StorageError::WriteConflict)
        ));
        assert_eq!(read(&e, &t, "k").as_deref(), Some("outside"));
    }

    #[test]
    fn a_write_outside_to_a_held_key_is_refused_until_the_transaction_ends() {
        let (_d, e, t) = engine();
        let txn = e.begin_transaction();
        {
            let _in = txn.enter();
            put(&e, &t, "k", "inside").unwrap();
        }
        let held = put(&e, &t, "k", "outside");
        assert!(matches!(held, Err(StorageError::HeldByTransaction(id)) if id == txn.id()));
        // Other keys are free; the refused write changed nothing.
        put(&e, &t, "other", "x").unwrap();
        assert_eq!(read(&e, &t, "k"), None);
        assert!(!e.wait_for_transaction(txn.id(), std::time::Duration::from_millis(10)));
        let waiter = {
            let (e, id) = (e.clone(), txn.id());
            std::thread::spawn(move || {
                e.wait_for_transaction(id, std::time::Duration::from_secs(30))
            })
        };
        e.commit_transaction(&txn).unwrap();
        assert!(waiter.join().unwrap());
        put(&e, &t, "k", "outside").unwrap();
        assert_eq!(read(&e, &t, "k").as_deref(), Some("outside"));
    }

    #[test]
    fn a_transaction_staging_more_than_its_limit_is_refused_and_keeps_what_it_had() {
        let (_d, e, t) = engine();
        let txn = e.begin_transaction();
        let _in = txn.enter();
        put(&e, &t, "small", "1").unwrap();
        let big = vec![0u8; (MAX_TRANSACTION_BYTES / 2) as usize + 1];
        let mut b = e.batch();
        b.put(&t, b"a", &big);
        e.apply(b).unwrap();
        let mut b = e.batch();
        b.put(&t, b"b", &big);
        assert!(matches!(
            e.apply(b),
            Err(StorageError::TransactionTooLarge { .. })
        ));
        assert_eq!(read(&e, &t, "small").as_deref(), Some("1"));
        assert_eq!(e.snapshot().get(&t, b"b").unwrap(), None);
    }

    #[test]
    fn engine_commit_writes_to_the_engine_even_inside_a_transaction() {
        let (_d, e, t) = engine();
        let txn = e.begin_transaction();
        let _in = txn.enter();
        let mut b = e.batch();
        b.put(&t, b"ddl", b"1");
        e.commit(b).unwrap();
        drop(_in);
        e.abort_transaction(&txn);
        assert_eq!(read(&e, &t, "ddl").as_deref(), Some("1"));
    }

    fn kv(k: &str, v: &str) -> Result<KeyValue> {
        Ok((k.as_bytes().to_vec(), v.as_bytes().to_vec()))
    }

    fn w(k: &str, v: Option<&str>) -> Written {
        (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()))
    }

    fn keys(m: impl Iterator<Item = Result<KeyValue>>) -> Vec<String> {
        m.map(|r| {
            let (k, v) = r.unwrap();
            format!(
                "{}={}",
                String::from_utf8(k).unwrap(),
                String::from_utf8(v).unwrap()
            )
        })
        .collect()
    }

    #[test]
    fn a_transactions_writes_replace_insert_and_hide_engine_entries_in_both_directions() {
        let base = || vec![kv("a", "1"), kv("c", "3"), kv("e", "5")].into_iter();
        let over = vec![
            w("b", Some("B")),
            w("c", None),
            w("e", Some("E")),
            w("f", Some("F")),
        ];
        assert_eq!(
            keys(Merge::new(base(), over.clone(), false)),
            ["a=1", "b=B", "e=E", "f=F"]
        );
        let rev = || vec![kv("e", "5"), kv("c", "3"), kv("a", "1")].into_iter();
        assert_eq!(
            keys(Merge::new(rev(), over, true)),
            ["f=F", "e=E", "b=B", "a=1"]
        );
        assert_eq!(
            keys(Merge::new(base(), vec![], false)),
            ["a=1", "c=3", "e=5"]
        );
    }
}
