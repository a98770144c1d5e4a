//! The engine adapter: trees, atomic batches, snapshots and durable commits over fjall.
//!
//! Durability assumption: fjall's journal is the write-ahead log; a batch is atomic across
//! trees once committed, and durable once the journal has been synced with
//! `PersistMode::SyncAll`. [`Engine::commit`] does both (the sync shared through group
//! commit), so an acknowledged write survives `kill -9`.

use crate::error::{Result, StorageError};
use crate::group_commit::GroupCommit;
pub mod txn;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable};
use std::path::Path;
use std::sync::Arc;
use txn::{Merge, Overlay, Transaction};

/// One ordered key-value namespace (a fjall keyspace).
#[derive(Clone)]
pub struct Tree {
    name: String,
    pub(crate) ks: Keyspace,
}

impl Tree {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes on disk used by this tree: its tables, plus its active memtable, whose
    /// writes are on disk in the journal until they are flushed into a table.
    pub fn disk_space(&self) -> u64 {
        use fjall::AbstractTree;
        self.ks.disk_space() + self.ks.tree.active_memtable().size()
    }

    /// Approximate number of entries.
    pub fn approximate_len(&self) -> usize {
        self.ks.approximate_len()
    }

    /// Writes the tree's memtable out and compacts its tables fully (overwritten values
    /// and tombstones dropped); returns the bytes on disk this freed.
    pub fn compact(&self) -> Result<u64> {
        let before = self.disk_space();
        self.ks.rotate_memtable_and_wait()?;
        self.ks.major_compact()?;
        Ok(before.saturating_sub(self.disk_space()))
    }
}

/// The storage engine handle; cheap to clone.
#[derive(Clone)]
pub struct Engine {
    pub(crate) db: Database,
    group: Arc<GroupCommit>,
    /// The directory whose file system the space guard watches.
    path: Arc<std::path::PathBuf>,
    /// Keys held by open transactions.
    pub(crate) holds: Arc<txn::Holds>,
}

/// The dbpath's directory for temporary files (MongoDB's name): external sorts' runs.
const TEMP_DIR: &str = "_tmp";

/// Most bytes the engine's journal holds (fjall's minimum; its default is 512 MiB): the
/// journal is disk space the data takes twice until its memtable is flushed.
const MAX_JOURNAL: u64 = 64 << 20;

/// fjall's memtable (and so L0 table) size: a flush writes this much, a compaction of
/// level 0 merges four such tables.
const MEMTABLE: u64 = 64 << 20;

/// Free space that writes adding data leave untouched, so that deletes, drops, the
/// engine's own journal, flushes and compactions and a clean shutdown still find room:
/// 2% of the file system, at least a full journal plus a level-0 compaction (384 MiB,
/// measured on a full tmpfs: a flush and the compaction after it write that much while
/// the tables they replace are still there), at most 1 GiB.
fn full_reserve(total: u64) -> u64 {
    (total / 50).clamp(2 * MAX_JOURNAL + 4 * MEMTABLE, 1 << 30)
}

/// The reserve a database holding `used` bytes (tables and journal) needs: a flush writes
/// at most what the journal holds and a compaction rewrites at most the tables, each while
/// what it replaces is still on disk, so twice the database plus a journal's worth of slack
/// covers both; never more than [`full_reserve`]. A small database on a nearly full disk
/// (a CI machine after a build) keeps working; a large one keeps the full reserve.
fn reserve_for(total: u64, used: u64) -> u64 {
    full_reserve(total).min(used.saturating_mul(2).saturating_add(MAX_JOURNAL))
}

/// Free space a batch that only deletes still needs (its journal record).
const DELETE_FLOOR: u64 = 1 << 20;

/// Longest key the engine takes (fjall: 64 KiB; it panics beyond). Callers bound their
/// keys well below it; a batch holding a longer one is refused whole by [`Engine::apply`].
pub const MAX_KEY_LEN: usize = u16::MAX as usize;

/// Longest value the engine takes (fjall: 2^32 bytes).
pub const MAX_VALUE_LEN: usize = u32::MAX as usize;

/// A set of writes applied atomically by [`Engine::commit`].
pub struct Batch {
    inner: fjall::OwnedWriteBatch,
    /// Bytes of keys and values put (what the batch adds to the disk, before compression).
    put_bytes: u64,
    /// The first key or value the engine cannot take: the batch then applies nothing.
    refused: Option<StorageError>,
    /// Built while the thread worked for a transaction: [`Engine::apply`] puts its writes
    /// (also kept here) into the transaction instead of the engine.
    txn: Option<(Arc<Transaction>, Vec<txn::Op>)>,
    /// Built outside transactions while some were open: the keys it writes (tree name,
    /// key), which [`Engine::apply`] checks against the transactions' holds.
    keys: Option<Vec<(String, Vec<u8>)>>,
}

impl Batch {
    pub fn put(&mut self, tree: &Tree, key: &[u8], value: &[u8]) {
        if self.fits(key) && value.len() > MAX_VALUE_LEN {
            self.refused = Some(StorageError::ValueTooLarge(value.len()));
        }
        if self.refused.is_none() {
            self.put_bytes += (key.len() + value.len()) as u64;
            self.inner.insert(&tree.ks, key, value);
            self.record(tree, key, Some(value));
        }
    }
    pub fn delete(&mut self, tree: &Tree, key: &[u8]) {
        if self.fits(key) {
            self.inner.remove(&tree.ks, key);
            self.record(tree, key, None);
        }
    }
    /// Keeps a write for the transaction the batch is for, or its key for the hold check.
    fn record(&mut self, tree: &Tree, key: &[u8], value: Option<&[u8]>) {
        if let Some((_, ops)) = &mut self.txn {
            ops.push((tree.clone(), key.to_vec(), value.map(<[u8]>::to_vec)));
        }
        if let Some(keys) = &mut self.keys {
            keys.push((tree.name().to_string(), key.to_vec()));
        }
    }
    /// Records a key too long for the engine; false when the batch is refused.
    fn fits(&mut self, key: &[u8]) -> bool {
        if key.len() > MAX_KEY_LEN && self.refused.is_none() {
            self.refused = Some(StorageError::KeyTooLarge(key.len()));
        }
        self.refused.is_none()
    }
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
    pub fn len(&self) -> usize {
        self.inner.len()
    }
}

/// A consistent point-in-time view across all trees (MVCC: never blocks writers); inside
/// a transaction, with the transaction's own writes over it.
#[derive(Clone)]
pub struct Snapshot {
    inner: fjall::Snapshot,
    overlay: Option<Overlay>,
}

/// An owned key/value pair read from the engine.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// A value read without copying it out of the engine's cached block: cheap to clone,
/// derefs to its bytes.
pub type SharedValue = fjall::Slice;

impl Snapshot {
    pub fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.overlay.as_ref().and_then(|o| o.get(tree, key)) {
            return Ok(v);
        }
        Ok(self.inner.get(&tree.ks, key)?.map(|v| v.to_vec()))
    }

    /// [`Snapshot::get`] sharing the value with the engine's block cache instead of
    /// copying it.
    pub fn get_shared(&self, tree: &Tree, key: &[u8]) -> Result<Option<SharedValue>> {
        if let Some(v) = self.overlay.as_ref().and_then(|o| o.get(tree, key)) {
            return Ok(v.map(SharedValue::from));
        }
        Ok(self.inner.get(&tree.ks, key)?)
    }

    /// Iterates the entries of `tree` whose key starts with `prefix`, in key order.
    pub fn scan_prefix(
        &self,
        tree: &Tree,
        prefix: &[u8],
    ) -> impl Iterator<Item = Result<KeyValue>> + Send + 'static {
        let over = match &self.overlay {
            Some(o) => o.prefix(tree, prefix),
            None => Vec::new(),
        };
        let base = self.inner.prefix(&tree.ks, prefix).map(|guard| {
            let (k, v) = guard.into_inner()?;
            Ok((k.to_vec(), v.to_vec()))
        });
        Merge::new(base, over, false)
    }

    /// [`Snapshot::range`] with each value shared with the engine's block cache instead
    /// of copied (a large value read once, as a bucket scan reads them).
    pub fn range_shared(
        &self,
        tree: &Tree,
        start: &[u8],
        end: Option<&[u8]>,
        reverse: bool,
    ) -> Box<dyn Iterator<Item = Result<(Vec<u8>, SharedValue)>> + Send + 'static> {
        if self.overlay.is_some() {
            // Inside a transaction: its writes are merged in as owned values.
            let merged = self.range(tree, start, end, reverse);
            return Box::new(merged.map(|kv| kv.map(|(k, v)| (k, SharedValue::from(v)))));
        }
        self.engine_range(tree, start, end, reverse)
    }

    /// The engine's entries in the range, without a transaction's writes.
    fn engine_range(
        &self,
        tree: &Tree,
        start: &[u8],
        end: Option<&[u8]>,
        reverse: bool,
    ) -> Box<dyn Iterator<Item = Result<(Vec<u8>, SharedValue)>> + Send + 'static> {
        use std::ops::Bound;
        let upper = match end {
            Some(e) => Bound::Excluded(e.to_vec()),
            None => Bound::Unbounded,
        };
        let iter = self
            .inner
            .range::<Vec<u8>, _>(&tree.ks, (Bound::Included(start.to_vec()), upper));
        let map = |guard: fjall::Guard| {
            let (k, v) = guard.into_inner()?;
            Ok((k.to_vec(), v))
        };
        if reverse {
            Box::new(iter.rev().map(map))
        } else {
            Box::new(iter.map(map))
        }
    }

    /// Iterates the entries of `tree` with `start <= key < end` (no upper limit when `end`
    /// is `None`), in key order or, with `reverse`, backwards.
    pub fn range(
        &self,
        tree: &Tree,
        start: &[u8],
        end: Option<&[u8]>,
        reverse: bool,
    ) -> Box<dyn Iterator<Item = Result<KeyValue>> + Send + 'static> {
        let base = self
            .engine_range(tree, start, end, reverse)
            .map(|kv| kv.map(|(k, v)| (k, v.to_vec())));
        let over = match &self.overlay {
            Some(o) => o.range(tree, start, end),
            None => Vec::new(),
        };
        if over.is_empty() {
            Box::new(base)
        } else {
            Box::new(Merge::new(base, over, reverse))
        }
    }
}

fn valid_tree_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// The block cache of [`Engine::open`] (fjall's default): what tests and tools use; the
/// server sizes its own from the machine's memory.
pub const DEFAULT_CACHE_BYTES: u64 = 32 << 20;

impl Engine {
    /// Opens (creating if missing) the database under `path`. Temporary files a crash
    /// left behind (external sorts' runs) are deleted.
    pub fn open(path: &Path) -> Result<Engine> {
        Engine::open_with_cache(path, DEFAULT_CACHE_BYTES)
    }

    /// [`Engine::open`] with a block cache of `cache_bytes`: the decompressed blocks a
    /// read finds there are not read and decompressed again.
    pub fn open_with_cache(path: &Path, cache_bytes: u64) -> Result<Engine> {
        std::fs::create_dir_all(path)?;
        let db = Database::builder(path.join("engine"))
            .manual_journal_persist(true)
            .max_journaling_size(MAX_JOURNAL)
            // The journal stores values as given: the big ones are time-series insert-log
            // records and compressed buckets, where lz4 was 7% of the ingest profile
            // (buckets are pco-compressed already; decision 0009).
            .journal_compression(fjall::CompressionType::None)
            // Each table keeps its own descriptor, closed with the table: with fjall's
            // shared descriptor cache, the files of a dropped collection stayed open (and
            // their space taken) until the cache evicted them.
            .max_cached_files(None)
            .cache_size(cache_bytes)
            .open()
            .map_err(|e| match e {
                fjall::Error::Locked => StorageError::DbPathInUse(path.to_path_buf()),
                e => e.into(),
            })?;
        // Only now, with the dbpath locked: another server's runs are not this one's.
        match std::fs::remove_dir_all(path.join(TEMP_DIR)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        Ok(Engine {
            db,
            group: Arc::new(GroupCommit::default()),
            path: Arc::new(path.to_path_buf()),
            holds: Arc::default(),
        })
    }

    /// Where queries write temporary files (created when first needed, emptied at start).
    pub fn temp_dir(&self) -> std::path::PathBuf {
        self.path.join(TEMP_DIR)
    }

    /// Opens or creates the tree called `name` (ASCII letters, digits, `_-.`).
    pub fn tree(&self, name: &str) -> Result<Tree> {
        if !valid_tree_name(name) {
            return Err(StorageError::InvalidTreeName(name.to_string()));
        }
        let ks = self.db.keyspace(name, KeyspaceCreateOptions::default)?;
        Ok(Tree {
            name: name.to_string(),
            ks,
        })
    }

    /// Names of all trees on disk.
    pub fn tree_names(&self) -> Vec<String> {
        self.db
            .list_keyspace_names()
            .into_iter()
            .map(|n| n.to_string())
            .collect()
    }

    /// Deletes a tree and all its data.
    pub fn drop_tree(&self, tree: Tree) -> Result<()> {
        self.db.delete_keyspace(tree.ks)?;
        Ok(())
    }

    /// An empty batch; built while the thread works for a transaction, it belongs to that
    /// transaction (see [`Engine::apply`]).
    pub fn batch(&self) -> Batch {
        let mut b = self.plain_batch();
        b.txn = Transaction::active().map(|t| (t, Vec::new()));
        b
    }

    /// A [`Engine::batch`] of document writes, which transactions may hold: outside a
    /// transaction, while some are open, it records its keys, and [`Engine::apply`] refuses
    /// it when one of them is held ([`StorageError::HeldByTransaction`]).
    pub fn document_batch(&self) -> Batch {
        let mut b = self.batch();
        if b.txn.is_none() && self.holds.any_open() {
            b.keys = Some(Vec::new());
        }
        b
    }

    /// An empty batch for the engine itself, whatever the thread works for.
    pub(crate) fn plain_batch(&self) -> Batch {
        Batch {
            inner: self.db.batch(),
            put_bytes: 0,
            refused: None,
            txn: None,
            keys: None,
        }
    }

    /// Applies `batch` atomically and returns once it is durable on disk. Concurrent
    /// callers share syncs (group commit).
    /// Always writes to the engine, also on a thread working for a transaction.
    pub fn commit(&self, mut batch: Batch) -> Result<()> {
        batch.txn = None;
        batch.keys = None;
        let ticket = self.apply(batch)?;
        self.wait_durable(ticket)
    }

    /// Applies `batch` atomically (visible to new snapshots, not yet durable) and returns
    /// the ticket to pass to [`Engine::wait_durable`]. Lets a caller release its locks
    /// before waiting for the sync, so that other writers join the same sync.
    ///
    /// A batch built for a transaction goes into the transaction instead (ticket 0: nothing
    /// to wait for), or fails with a write conflict ([`txn`]).
    pub fn apply(&self, batch: Batch) -> Result<u64> {
        if let Some(e) = batch.refused {
            return Err(e);
        }
        if batch.is_empty() {
            return Ok(0);
        }
        if batch.put_bytes > 0 {
            self.check_space(batch.put_bytes)?;
        } else {
            self.check_space_for_deletes()?;
        }
        if let Some((txn, ops)) = batch.txn {
            self.apply_in_transaction(&txn, ops)?;
            return Ok(0);
        }
        if let Some(id) = batch.keys.as_deref().and_then(|k| self.holder(k)) {
            return Err(StorageError::HeldByTransaction(id));
        }
        batch.inner.commit()?;
        Ok(self.group.ticket())
    }

    /// Free and total bytes of the file system holding the data (None when unknown).
    fn space(&self) -> Option<(u64, u64)> {
        let st = rustix::fs::statvfs(self.path.as_path()).ok()?;
        Some((
            st.f_bavail.saturating_mul(st.f_frsize),
            st.f_blocks.saturating_mul(st.f_frsize),
        ))
    }

    /// Fails with [`StorageError::OutOfDiskSpace`] unless writing `bytes` more leaves the
    /// reserve free. Write paths call it before they change anything (the batch apply
    /// calls it again), so a refused write leaves no trace; once space is freed (by a drop,
    /// deletes, TTL or the operator) writes pass again, with no restart.
    pub fn check_space(&self, bytes: u64) -> Result<()> {
        let Some((free, total)) = self.space() else {
            return Ok(());
        };
        let write = bytes.saturating_mul(2);
        if free >= full_reserve(total).saturating_add(write) {
            return Ok(());
        }
        // Short of the full reserve: size it to what this database holds on disk (walks
        // its files, so only here, off the common path).
        let needed = reserve_for(total, self.allocated_bytes()).saturating_add(write);
        if free < needed {
            return Err(StorageError::OutOfDiskSpace { free, needed });
        }
        Ok(())
    }

    /// Bytes the files under the dbpath take on disk (allocated blocks): the journal is
    /// created at its full 64 MiB length but sparse, so its length overstates it by up to
    /// 64 MiB until written (and more so since journal values are not compressed).
    fn allocated_bytes(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        let mut total = 0u64;
        let mut dirs = vec![self.path.as_path().to_path_buf()];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                match entry.metadata() {
                    Ok(m) if m.is_dir() => dirs.push(entry.path()),
                    Ok(m) => total = total.saturating_add(m.blocks().saturating_mul(512)),
                    Err(_) => {}
                }
            }
        }
        total
    }

    fn check_space_for_deletes(&self) -> Result<()> {
        match self.space() {
            Some((free, _)) if free < DELETE_FLOOR => Err(StorageError::OutOfDiskSpace {
                free,
                needed: DELETE_FLOOR,
            }),
            _ => Ok(()),
        }
    }

    /// Blocks until the batch behind `ticket` is durable.
    pub fn wait_durable(&self, ticket: u64) -> Result<()> {
        self.wait_durable_shared(ticket).map(|_| ())
    }

    /// [`Engine::wait_durable`]; true when another writer's sync covered the batch
    /// (group commit).
    pub fn wait_durable_shared(&self, ticket: u64) -> Result<bool> {
        if ticket == 0 {
            return Ok(false);
        }
        Ok(self
            .group
            .wait_durable(ticket, || self.db.persist(PersistMode::SyncAll))?)
    }

    /// Writes every tree's in-memory table out to its table files, compacts each tree
    /// fully (dropping overwritten values and tombstones, e.g. the deltas of buckets that
    /// were closed) and syncs, so that the data no longer lives in the journal and the
    /// files hold only live data (`fsync` command, clean shutdown).
    ///
    /// Everything is durable after the first sync; the table writes and compactions that
    /// follow only move data out of the journal. On a full disk they are skipped (and
    /// logged): the journal keeps the data and the next start replays it.
    pub fn flush(&self) -> Result<()> {
        self.flush_tables().map(|_| ())
    }

    /// [`Engine::flush`]; true when every tree's data was written to its tables.
    fn flush_tables(&self) -> Result<bool> {
        self.db.persist(PersistMode::SyncAll)?;
        let compact = || -> Result<()> {
            for name in self.db.list_keyspace_names() {
                let ks = self.db.keyspace(&name, KeyspaceCreateOptions::default)?;
                ks.rotate_memtable_and_wait()?;
                // Twice: after a busy load (8 writers) one major compaction still left a
                // third of the buckets tree superseded (9.4 bytes per value after a clean
                // shutdown; 6.5 after the second, as after a restart).
                for _ in 0..2 {
                    self.wait_for_compactions();
                    ks.major_compact()?;
                }
            }
            self.db.persist(PersistMode::SyncAll)?;
            Ok(())
        };
        match self.check_space(0).and_then(|()| compact()) {
            Err(e) if e.is_out_of_space() => {
                tracing::warn!(error = %e, "disk full at shutdown: data stays in the journal, replayed at the next start");
                Ok(false)
            }
            Err(e) => Err(e),
            Ok(()) => Ok(true),
        }
    }

    /// Clean shutdown, the last call on the engine before the process exits (nothing may
    /// write after it): [`Engine::flush`], then, when every tree's data is in its tables,
    /// the journal files are truncated to zero bytes. They hold only what the tables
    /// already hold (fjall rotates its journal only every 64 MB, so after a flush the
    /// active journal still takes up to 64 MB of allocated blocks). They are emptied, not
    /// removed: fjall recovers its sequence number from the tables only when it finds a
    /// journal, and without one the next start would see no data. On a full disk the
    /// journal stays and is replayed.
    pub fn shutdown(&self) -> Result<()> {
        if !self.flush_tables()? {
            return Ok(());
        }
        let dir = self.path.join("engine");
        let mut freed = 0u64;
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "jnl") {
                let file = std::fs::OpenOptions::new().write(true).open(&path)?;
                freed += file.metadata().map(|m| m.len()).unwrap_or(0);
                file.set_len(0)?;
                file.sync_all()?;
            }
        }
        tracing::info!(bytes = freed, "journal emptied after the final flush");
        Ok(())
    }

    /// Waits (up to a minute) until no background compaction runs (a major compaction
    /// leaves out the tables a running one holds).
    fn wait_for_compactions(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while self.db.active_compactions() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The engine's current state; for a thread working for a transaction, the
    /// transaction's snapshot with its writes over it.
    pub fn snapshot(&self) -> Snapshot {
        match Transaction::active() {
            Some(t) => {
                let (inner, overlay) = t.view();
                Snapshot {
                    inner,
                    overlay: Some(overlay),
                }
            }
            None => Snapshot {
                inner: self.db.snapshot(),
                overlay: None,
            },
        }
    }

    /// Total bytes on disk.
    pub fn disk_space(&self) -> u64 {
        self.db.disk_space().unwrap_or(0)
    }

    /// Number of journal syncs performed (one per group of commits).
    pub fn sync_count(&self) -> u64 {
        self.group.sync_count()
    }

    /// Seconds each journal sync took.
    pub fn sync_latency(&self) -> &prometheus_client::metrics::histogram::Histogram {
        self.group.latency()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_batch_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let e = Engine::open(dir.path()).unwrap();
            let t = e.tree("t1").unwrap();
            let mut b = e.batch();
            b.put(&t, b"k1", b"v1");
            b.put(&t, b"k2", b"v2");
            e.commit(b).unwrap();
        }
        let e = Engine::open(dir.path()).unwrap();
        let t = e.tree("t1").unwrap();
        let snap = e.snapshot();
        assert_eq!(snap.get(&t, b"k1").unwrap().as_deref(), Some(&b"v1"[..]));
        let all: Vec<_> = snap.scan_prefix(&t, b"k").collect::<Result<_>>().unwrap();
        assert_eq!(all.len(), 2);
    }

    #[test]
    fn shared_reads_equal_copied_reads_in_both_directions_and_inside_a_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(dir.path()).unwrap();
        let t = e.tree("t").unwrap();
        let mut b = e.batch();
        for i in 0..50u8 {
            b.put(&t, &[i], &[i; 300]);
        }
        e.commit(b).unwrap();
        let same = |snap: &Snapshot| {
            for reverse in [false, true] {
                let copied: Vec<KeyValue> = snap
                    .range(&t, &[10], Some(&[40]), reverse)
                    .collect::<Result<_>>()
                    .unwrap();
                let shared: Vec<KeyValue> = snap
                    .range_shared(&t, &[10], Some(&[40]), reverse)
                    .map(|kv| kv.map(|(k, v)| (k, v.to_vec())))
                    .collect::<Result<_>>()
                    .unwrap();
                assert_eq!(copied, shared);
            }
            for k in [5u8, 20, 60] {
                let copied = snap.get(&t, &[k]).unwrap();
                let shared = snap.get_shared(&t, &[k]).unwrap().map(|v| v.to_vec());
                assert_eq!(copied, shared);
            }
            snap.range_shared(&t, &[0], None, false).count()
        };
        assert_eq!(same(&e.snapshot()), 50);
        // Inside a transaction the reads see its own (uncommitted) writes.
        let txn = e.begin_transaction();
        let _in = txn.enter();
        let mut b = e.batch();
        b.put(&t, &[20], b"mine");
        b.put(&t, &[60], b"new");
        b.delete(&t, &[30]);
        e.apply(b).unwrap();
        let snap = e.snapshot();
        assert_eq!(same(&snap), 50);
        assert_eq!(
            snap.get_shared(&t, &[20]).unwrap().as_deref(),
            Some(&b"mine"[..])
        );
    }

    #[test]
    fn clean_shutdown_empties_the_journal_and_keeps_the_data() {
        let dir = tempfile::tempdir().unwrap();
        {
            let e = Engine::open(dir.path()).unwrap();
            let t = e.tree("t").unwrap();
            let mut b = e.batch();
            for i in 0..1000u32 {
                b.put(&t, &i.to_be_bytes(), &[7u8; 100]);
            }
            e.commit(b).unwrap();
            e.shutdown().unwrap();
            let journal_bytes: u64 = std::fs::read_dir(dir.path().join("engine"))
                .unwrap()
                .map(|f| f.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "jnl"))
                .map(|p| std::fs::metadata(p).unwrap().len())
                .sum();
            assert_eq!(journal_bytes, 0);
        }
        let e = Engine::open(dir.path()).unwrap();
        let t = e.tree("t").unwrap();
        let all: Vec<_> = e
            .snapshot()
            .scan_prefix(&t, b"")
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(all.len(), 1000);
        let mut b = e.batch();
        b.put(&t, b"after", b"restart");
        e.commit(b).unwrap();
        drop((t, e));
        let e = Engine::open(dir.path()).unwrap();
        let t = e.tree("t").unwrap();
        assert!(
            e.snapshot().get(&t, b"after").unwrap().is_some(),
            "the new journal works"
        );
    }

    #[test]
    fn snapshot_does_not_see_later_writes() {
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(dir.path()).unwrap();
        let t = e.tree("t").unwrap();
        let snap = e.snapshot();
        let mut b = e.batch();
        b.put(&t, b"a", b"1");
        e.commit(b).unwrap();
        assert!(snap.get(&t, b"a").unwrap().is_none());
        assert!(e.snapshot().get(&t, b"a").unwrap().is_some());
    }

    #[test]
    fn drop_tree_removes_data_and_rejects_bad_names() {
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(dir.path()).unwrap();
        assert!(e.tree("bad name/").is_err());
        let t = e.tree("gone").unwrap();
        e.drop_tree(t).unwrap();
        assert!(!e.tree_names().contains(&"gone".to_string()));
    }
}
