//! External merge sort for the blocking stages that may use the disk (`allowDiskUse`,
//! which MongoDB 7.0 grants by default through `allowDiskUseByDefault`): `$sort`, and
//! `$group` for the groups it cannot hold.
//!
//! Entries (sort keys and a document) are buffered up to the stage's memory limit; past
//! it the buffer is sorted and written as one run to a temporary file under the dbpath's
//! `_tmp` directory (the file is deleted when the sort ends, however it ends; the
//! directory is emptied at startup after a crash). The output merges the runs and the last
//! buffer. Equal keys come out in input order: runs hold consecutive parts of the input,
//! each sorted stably, and the merge prefers the earlier run. At most [`MAX_RUNS`] files are
//! open at once: past that the runs are merged into one.

use super::mem::MemLimits;
use crate::error::QueryError;
use crate::sort::SortSpec;
use bson::{doc, Bson, Document};
use std::cmp::Ordering;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

/// The values an entry sorts by, one per key.
pub type Keys = Vec<Option<Bson>>;

/// How entries compare.
pub type KeyOrder = dyn Fn(&Keys, &Keys) -> Ordering + Send + Sync;

/// Run files merged at once; more are first merged into one.
const MAX_RUNS: usize = 64;

/// Process-wide sort counters, for serverStatus `metrics.query.sort`.
#[derive(Default)]
pub struct SortMetrics {
    /// Runs written to disk.
    pub spill_to_disk: AtomicU64,
    /// Bytes of those runs.
    pub spill_to_disk_bytes: AtomicU64,
    /// Entries sorted by blocking sorts.
    pub total_keys_sorted: AtomicU64,
    /// Their approximate bytes.
    pub total_bytes_sorted: AtomicU64,
}

pub static SORT_METRICS: SortMetrics = SortMetrics {
    spill_to_disk: AtomicU64::new(0),
    spill_to_disk_bytes: AtomicU64::new(0),
    total_keys_sorted: AtomicU64::new(0),
    total_bytes_sorted: AtomicU64::new(0),
};

/// Spills to disk of the sorts (and spilling groups) of one thread.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Spills {
    /// Runs written.
    pub runs: u64,
    /// Their bytes on disk.
    pub bytes: u64,
    /// Entries written in them.
    pub records: u64,
}

impl Spills {
    /// What was spilled since `before`.
    pub fn since(self, before: Spills) -> Spills {
        Spills {
            runs: self.runs.saturating_sub(before.runs),
            bytes: self.bytes.saturating_sub(before.bytes),
            records: self.records.saturating_sub(before.records),
        }
    }
}

thread_local! {
    /// This thread's spills so far, for explain's per-stage `spills`.
    static THREAD_SPILLS: std::cell::Cell<Spills> = const {
        std::cell::Cell::new(Spills { runs: 0, bytes: 0, records: 0 })
    };
}

/// Spills to disk on this thread so far: a stage run between two readings spilled the
/// difference ([`Spills::since`]).
pub fn thread_spills() -> Spills {
    THREAD_SPILLS.with(|c| c.get())
}

fn add_to(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, AtomicOrdering::Relaxed);
}

fn io_error(what: &str, e: impl std::fmt::Display) -> QueryError {
    QueryError::Coded(
        16819,
        format!("error {what} the external sort's temporary file: {e}"),
    )
}

/// A sort that spills to files past a memory limit.
pub struct Sorter {
    order: Arc<KeyOrder>,
    /// Where runs go and the bytes held before one is written; `None`: everything stays in
    /// memory (the caller checks [`Sorter::bytes`] against its limit).
    spill: Option<(PathBuf, u64)>,
    buffer: Vec<(Keys, Document)>,
    bytes: u64,
    runs: Vec<RunFile>,
    /// Runs written so far.
    pub spills: u64,
}

struct RunFile {
    file: tempfile::NamedTempFile,
    entries: u64,
}

impl Sorter {
    pub fn new(order: Arc<KeyOrder>, spill: Option<(PathBuf, u64)>) -> Sorter {
        Sorter {
            order,
            spill,
            buffer: Vec::new(),
            bytes: 0,
            runs: Vec::new(),
            spills: 0,
        }
    }

    /// Bytes held in memory.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Adds an entry; writes a run when the buffer passes the limit.
    pub fn push(&mut self, keys: Keys, doc: Document) -> Result<(), QueryError> {
        let size = super::mem::doc_size(&doc)
            + keys
                .iter()
                .map(|k| k.as_ref().map_or(8, super::mem::approx_size))
                .sum::<u64>();
        self.bytes += size;
        add_to(&SORT_METRICS.total_keys_sorted, 1);
        add_to(&SORT_METRICS.total_bytes_sorted, size);
        self.buffer.push((keys, doc));
        if let Some((dir, limit)) = &self.spill {
            if self.bytes > *limit {
                let dir = dir.clone();
                self.write_run(&dir)?;
            }
        }
        Ok(())
    }

    fn sort_buffer(&mut self) {
        let order = &self.order;
        self.buffer.sort_by(|a, b| order(&a.0, &b.0));
    }

    /// Sorts the buffer and writes it as a run.
    fn write_run(&mut self, dir: &Path) -> Result<(), QueryError> {
        self.sort_buffer();
        let entries = std::mem::take(&mut self.buffer).into_iter().map(Ok);
        let run = write_run(dir, entries)?;
        self.bytes = 0;
        self.spills += 1;
        self.runs.push(run);
        if self.runs.len() >= MAX_RUNS {
            let runs = std::mem::take(&mut self.runs);
            let merged = Merge::new(self.order.clone(), runs, Vec::new())?;
            self.runs.push(write_run(dir, merged)?);
        }
        Ok(())
    }

    /// The entries in order.
    pub fn finish(mut self) -> Result<Merge, QueryError> {
        self.sort_buffer();
        Merge::new(self.order, self.runs, self.buffer)
    }
}

fn write_run(
    dir: &Path,
    entries: impl Iterator<Item = Result<(Keys, Document), QueryError>>,
) -> Result<RunFile, QueryError> {
    std::fs::create_dir_all(dir).map_err(|e| io_error("creating", e))?;
    let file = tempfile::Builder::new()
        .prefix("extsort-")
        .tempfile_in(dir)
        .map_err(|e| io_error("creating", e))?;
    let mut out = BufWriter::new(file.as_file());
    let mut count = 0u64;
    for entry in entries {
        crate::interrupt::check()?;
        let (keys, d) = entry?;
        let keys: Vec<Bson> = keys
            .into_iter()
            .map(|k| Bson::Document(k.map_or_else(Document::new, |v| doc! {"v": v})))
            .collect();
        doc! {"k": keys, "d": d}
            .to_writer(&mut out)
            .map_err(|e| io_error("writing", e))?;
        count += 1;
    }
    out.flush().map_err(|e| io_error("writing", e))?;
    drop(out);
    let bytes = file.as_file().metadata().map_or(0, |m| m.len());
    add_to(&SORT_METRICS.spill_to_disk, 1);
    add_to(&SORT_METRICS.spill_to_disk_bytes, bytes);
    THREAD_SPILLS.with(|c| {
        let s = c.get();
        c.set(Spills {
            runs: s.runs + 1,
            bytes: s.bytes + bytes,
            records: s.records + count,
        });
    });
    Ok(RunFile {
        file,
        entries: count,
    })
}

/// Reads one run back, entry by entry.
struct RunReader {
    // Kept so the file is deleted only when the reading ends.
    _file: tempfile::NamedTempFile,
    reader: BufReader<std::fs::File>,
    left: u64,
}

impl RunReader {
    fn open(run: RunFile) -> Result<RunReader, QueryError> {
        let reader = BufReader::new(run.file.reopen().map_err(|e| io_error("reading", e))?);
        Ok(RunReader {
            _file: run.file,
            reader,
            left: run.entries,
        })
    }

    fn next_entry(&mut self) -> Result<Option<(Keys, Document)>, QueryError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let mut entry =
            Document::from_reader(&mut self.reader).map_err(|e| io_error("reading", e))?;
        let keys = match entry.remove("k") {
            Some(Bson::Array(keys)) => keys
                .into_iter()
                .map(|k| match k {
                    Bson::Document(mut d) => d.remove("v"),
                    _ => None,
                })
                .collect(),
            _ => return Err(io_error("reading", "an entry without keys")),
        };
        match entry.remove("d") {
            Some(Bson::Document(d)) => Ok(Some((keys, d))),
            _ => Err(io_error("reading", "an entry without a document")),
        }
    }
}

/// The sorted entries: runs from disk merged with the last buffer.
pub struct Merge {
    order: Arc<KeyOrder>,
    readers: Vec<RunReader>,
    memory: std::vec::IntoIter<(Keys, Document)>,
    /// The next entry of each source (the readers, then the buffer), `None` once drained.
    heads: Vec<Option<(Keys, Document)>>,
}

impl Merge {
    fn new(
        order: Arc<KeyOrder>,
        runs: Vec<RunFile>,
        memory: Vec<(Keys, Document)>,
    ) -> Result<Merge, QueryError> {
        let mut readers = runs
            .into_iter()
            .map(RunReader::open)
            .collect::<Result<Vec<_>, _>>()?;
        let mut memory = memory.into_iter();
        let mut heads = Vec::with_capacity(readers.len() + 1);
        for r in &mut readers {
            heads.push(r.next_entry()?);
        }
        heads.push(memory.next());
        Ok(Merge {
            order,
            readers,
            memory,
            heads,
        })
    }

    /// Whether every entry stayed in memory.
    pub fn in_memory(&self) -> bool {
        self.readers.is_empty()
    }
}

impl Iterator for Merge {
    type Item = Result<(Keys, Document), QueryError>;

    fn next(&mut self) -> Option<Self::Item> {
        // The smallest head; on equal keys the earlier source (earlier input) wins.
        let mut best: Option<usize> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some((keys, _)) = head else { continue };
            let better = match best.and_then(|b| self.heads.get(b)?.as_ref()) {
                None => true,
                Some((best_keys, _)) => (self.order)(keys, best_keys) == Ordering::Less,
            };
            if better {
                best = Some(i);
            }
        }
        let i = best?;
        let refill = match self.readers.get_mut(i) {
            Some(r) => r.next_entry(),
            None => Ok(self.memory.next()),
        };
        let slot = self.heads.get_mut(i)?;
        match refill {
            Ok(next) => slot.take().map(|e| {
                *slot = next;
                Ok(e)
            }),
            Err(e) => {
                // Stop after the error.
                self.heads.iter_mut().for_each(|h| *h = None);
                Some(Err(e))
            }
        }
    }
}

/// Sorts documents as a blocking `$sort` does: held in memory up to `limits`' sort limit;
/// past it written to runs under `dir` when the command allows the disk (error 292
/// otherwise, or 146 past the in-memory ceiling when there is no `dir`). The documents
/// come out in order as they are read back.
pub fn sort_documents<E: From<QueryError>>(
    spec: &SortSpec,
    input: impl Iterator<Item = Result<Document, E>>,
    limits: &MemLimits,
    dir: Option<&Path>,
) -> Result<impl Iterator<Item = Result<Document, QueryError>> + Send + 'static, E> {
    let spill = match (limits.allow_disk_use, dir) {
        (true, Some(dir)) => Some((dir.to_path_buf(), limits.sort_bytes)),
        _ => None,
    };
    let order = spec.clone();
    let mut sorter = Sorter::new(
        Arc::new(move |a: &Keys, b: &Keys| order.compare_keys(a, b)),
        spill,
    );
    let spilling = sorter.spill.is_some();
    for doc in input {
        crate::interrupt::check()?;
        let doc = doc?;
        sorter.push(spec.key_of(&doc), doc)?;
        if !spilling {
            limits.check_sort(sorter.bytes())?;
        }
    }
    Ok(sorter.finish()?.map(|e| e.map(|(_, d)| d)))
}

/// The first `k` of `docs` in `spec`'s order (a sort followed by a limit, MongoDB's
/// top-k sort): only they are kept, in memory, and they count against the sort limit.
pub fn top_k_documents(
    spec: &SortSpec,
    docs: Vec<Document>,
    k: usize,
    limits: &MemLimits,
) -> Result<Vec<Document>, QueryError> {
    let docs = spec.top_k(docs, k);
    limits.check_sort(docs.iter().map(super::mem::doc_size).sum())?;
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(n: i32, limit: u64, dir: &Path) -> (Vec<(i32, i32)>, u64, bool) {
        let order = |a: &Keys, b: &Keys| crate::compare::compare_optional(&a[0], &b[0]);
        let mut s = Sorter::new(Arc::new(order), Some((dir.to_path_buf(), limit)));
        for i in 0..n {
            // Keys repeat, so the order among equal keys (input order) shows.
            s.push(vec![Some(Bson::Int32((i * 7919) % 50))], doc! {"i": i})
                .expect("push");
        }
        let spills = s.spills;
        let merge = s.finish().expect("finish");
        let on_disk = !merge.in_memory();
        let out = merge
            .map(|e| {
                let (k, d) = e.expect("entry");
                let Some(Some(Bson::Int32(k))) = k.first().cloned() else {
                    panic!("key")
                };
                (k, d.get_i32("i").expect("i"))
            })
            .collect();
        (out, spills, on_disk)
    }

    #[test]
    fn a_sort_past_its_limit_spills_runs_and_merges_them_stably() {
        let dir = tempfile::tempdir().expect("dir");
        let (spilled, spills, on_disk) = sorted(2_000, 2_000, dir.path());
        assert!(spills > MAX_RUNS as u64, "{spills} runs");
        assert!(on_disk);
        let (memory, none, in_memory) = sorted(2_000, u64::MAX, dir.path());
        assert_eq!((none, in_memory), (0, false));
        let mut expected = memory.clone();
        expected.sort_by_key(|&(k, i)| (k, i));
        assert_eq!(memory, expected);
        assert_eq!(spilled, expected);
    }

    #[test]
    fn run_files_are_deleted_when_the_sort_ends() {
        let dir = tempfile::tempdir().expect("dir");
        let files = || std::fs::read_dir(dir.path()).map_or(0, |d| d.count());
        let order = |a: &Keys, b: &Keys| crate::compare::compare_optional(&b[0], &a[0]);
        let mut s = Sorter::new(Arc::new(order), Some((dir.path().to_path_buf(), 100)));
        for i in 0..50 {
            s.push(vec![Some(Bson::Int32(i))], doc! {"i": i})
                .expect("push");
        }
        assert!(files() > 0);
        let mut merge = s.finish().expect("finish");
        let first = merge.next().and_then(Result::ok).map(|(_, d)| d);
        assert_eq!(first, Some(doc! {"i": 49}));
        drop(merge);
        assert_eq!(files(), 0);
    }
}
