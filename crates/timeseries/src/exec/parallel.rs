//! A large scan split across threads ([`split`]), for a vectorized `$group` here and a
//! columnar projection (`columnar.rs`). For the group: the calling thread
//! reads the scan (storage reads only) and hands its buckets, in chunks, to several
//! workers, each parsing the buckets' envelopes, pruning them by their control min/max
//! ([`Scanned::resolve`]) and feeding its own run of the group (column decoding, the row
//! filter, keys and accumulators, two thirds of such a query's time); the runs are merged
//! at the end. Each bucket carries its position in the scan, so the merged groups come
//! out in the order one run over the whole scan gives (that of their first rows).
//!
//! Only groups whose accumulators combine partial states are split
//! ([`VectorGroup::mergeable`]), and only scans longer than [`SERIAL_BUCKETS`]: a short
//! one finishes before threads would start. A kill or `maxTimeMS` reaches the workers
//! (they run under the operation's interrupt), and the first error of any thread is the
//! query's. A group whose `$sort` and `$limit` keep only its top time bins passes over
//! buckets that cannot reach them ([`Cutoff`]), in every thread.

use super::col::Cols;
use super::columnar::{ColumnarProject, ColumnarRun};
use super::top_groups::{Cutoff, Kept};
use super::vgroup::{GroupRun, VectorGroup};
use crate::store::{BucketScan, BucketView, Scanned, StoreError};
use crate::threads::workers;
use bson::Document;
use hourglass_query::interrupt;
use hourglass_query::pipeline::mem::MemLimits;
use parking_lot::Mutex;
use std::sync::mpsc::{sync_channel, Receiver};

/// Buckets one thread feeds before the scan is split: below this a query takes well
/// under a millisecond, and the tests' small collections keep the one-run path.
pub(super) const SERIAL_BUCKETS: u64 = 64;

/// Buckets handed to a worker at once: one bucket's work (tens of microseconds) is of the
/// order of waking a thread, so buckets travel in chunks.
const CHUNK: usize = 16;

pub(super) type Chunk = Vec<(u64, Scanned)>;

/// The rows of a bucket that pass the query's filter (`None`: all of them).
pub(super) type Mask<'m> = dyn Fn(&Cols<'_>) -> Result<Option<Vec<bool>>, StoreError> + Sync + 'm;

/// What each bucket goes through: the row filter, and the bar of a group whose limit
/// keeps only its top bins.
pub(super) struct Feed<'m> {
    pub mask: &'m Mask<'m>,
    pub cutoff: Option<&'m Cutoff>,
}

/// Buckets waiting for the workers, in chunks, each bucket with its position in the scan.
pub(super) struct Queue(Mutex<Receiver<Chunk>>);

impl Queue {
    /// The next chunk, or `None` once the scan is done.
    pub(super) fn next(&self) -> Option<Chunk> {
        self.0.lock().recv().ok()
    }

    /// [`each_bucket`] of every chunk still to come.
    fn for_each(
        &self,
        mut each: impl FnMut(u64, &BucketView) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        while let Some(chunk) = self.next() {
            each_bucket(chunk, &mut each)?;
        }
        Ok(())
    }
}

/// Runs `each` on every bucket of `chunk` that its control min/max do not rule out, with
/// its position in the scan, under the operation's interrupt.
fn each_bucket(
    chunk: Chunk,
    mut each: impl FnMut(u64, &BucketView) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    for (at, scanned) in chunk {
        interrupt::check()?;
        if let Some(view) = scanned.resolve() {
            each(at, &view?)?;
        }
    }
    Ok(())
}

/// Feeds `scan`'s buckets to `serial` on this thread until [`SERIAL_BUCKETS`] have gone
/// (all of them when `may_split` is false or the machine has one core); if more remain,
/// this thread reads them (stored ones unparsed) and hands them out in chunks to worker
/// threads, each running `work` until the queue is done, and their outputs are returned
/// (none when the scan ended first). Workers run under the operation's interrupt; the
/// first error of any thread is the result.
pub(super) fn split<T: Send>(
    mut scan: BucketScan,
    may_split: bool,
    serial: &mut dyn FnMut(u64, &BucketView) -> Result<(), StoreError>,
    work: &(dyn Fn(&Queue) -> Result<T, StoreError> + Sync),
) -> Result<Vec<T>, StoreError> {
    let split = may_split && workers() >= 2;
    let mut at = 0u64;
    while !split || at < SERIAL_BUCKETS {
        let Some(view) = scan.next() else {
            return Ok(Vec::new());
        };
        interrupt::check()?;
        serial(at, &view?)?;
        at += 1;
    }
    let mut scan = std::iter::from_fn(|| scan.next_scanned())
        .zip(at..)
        .map(|(v, at)| (at, v))
        .peekable();
    if scan.peek().is_none() {
        return Ok(Vec::new());
    }
    let workers = workers();
    let operation = interrupt::current();
    let (to_workers, from_scan) = sync_channel::<Chunk>(workers);
    let queue = Queue(Mutex::new(from_scan));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let operation = operation.clone();
                let queue = &queue;
                s.spawn(move || {
                    let _entered = operation.map(interrupt::enter);
                    work(queue)
                })
            })
            .collect();
        // The scan is read here; a worker that failed drops out, and once none is left
        // the send fails and the reading stops.
        let mut failed = None;
        let mut chunk = Vec::with_capacity(CHUNK);
        for (at, view) in scan {
            match interrupt::check().map_err(StoreError::from).and(view) {
                Ok(view) => chunk.push((at, view)),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
            if chunk.len() == CHUNK {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
                if to_workers.send(full).is_err() {
                    break;
                }
            }
        }
        if failed.is_none() && !chunk.is_empty() {
            // A send fails only once every worker has stopped on an error, joined below.
            let _ = to_workers.send(chunk);
        }
        drop(to_workers);
        let joined = crate::threads::join_all(handles);
        // An error reading the scan is the query's, before any worker's.
        match failed {
            Some(e) => Err(e),
            None => joined,
        }
    })
}

/// What one bucket does to a columnar run (its row filter and gathering).
pub(super) type ColumnarFeed<'f> =
    dyn Fn(&mut ColumnarRun<'_>, &BucketView) -> Result<(), StoreError> + Sync + 'f;

/// Runs the columnar projection `c` over `scan`. A run that may stop early (a limit
/// without a sort) reads on this thread; any other is split, each chunk of buckets
/// gathered apart and the chunks appended in scan order.
pub(super) fn columnar<'c>(
    c: &'c ColumnarProject,
    limits: MemLimits,
    scan: BucketScan,
    feed: &ColumnarFeed<'_>,
) -> Result<ColumnarRun<'c>, StoreError> {
    let mut run = c.start(limits);
    if !c.splittable() {
        for view in scan {
            interrupt::check()?;
            if run.is_done() {
                break;
            }
            feed(&mut run, &view?)?;
        }
        return Ok(run);
    }
    let parts = split(scan, true, &mut |_, view| feed(&mut run, view), &|queue| {
        let mut pieces = Vec::new();
        while let Some(chunk) = queue.next() {
            let first = chunk.first().map_or(0, |(at, _)| *at);
            let mut piece = c.start(limits);
            each_bucket(chunk, |_, view| feed(&mut piece, view))?;
            pieces.push((first, piece));
        }
        Ok(pieces)
    })?;
    let mut pieces: Vec<_> = parts.into_iter().flatten().collect();
    pieces.sort_by_key(|(first, _)| *first);
    for (_, piece) in pieces {
        run.append(piece)?;
    }
    Ok(run)
}

/// Runs `group` over every bucket of `scan`.
pub(super) fn group(
    group: &VectorGroup,
    scan: BucketScan,
    how: &Feed<'_>,
) -> Result<Vec<Document>, StoreError> {
    let mut run = group.start();
    let mut kept = Kept::default();
    let parts = split(
        scan,
        group.mergeable(),
        &mut |at, view| feed(&mut run, &mut kept, at, view, how),
        &|queue| work(group, queue, how),
    )?;
    for part in parts {
        run.merge(part);
    }
    Ok(run.finish())
}

/// One worker: feeds the buckets it receives to its own run until the scan is done.
fn work<'g>(
    group: &'g VectorGroup,
    queue: &Queue,
    how: &Feed<'_>,
) -> Result<GroupRun<'g>, StoreError> {
    let mut run = group.start();
    let mut kept = Kept::default();
    queue.for_each(|at, view| feed(&mut run, &mut kept, at, view, how))?;
    Ok(run)
}

fn feed(
    run: &mut GroupRun<'_>,
    kept: &mut Kept,
    at: u64,
    view: &BucketView,
    how: &Feed<'_>,
) -> Result<(), StoreError> {
    if how.cutoff.is_some_and(|c| c.passes_over(view)) {
        return Ok(());
    }
    let cols = Cols::new(view);
    let mask = (how.mask)(&cols)?;
    let before = run.len();
    run.feed_at(at, &cols, mask.as_deref())?;
    if let Some(c) = how.cutoff {
        c.note(kept, run.keys_from(before));
    }
    Ok(())
}
