//! Closed buckets compressed and stored off the insert path. An insert that closes
//! buckets acknowledges once its log record is durable and hands the closed buckets to a
//! background worker, which compresses each and applies its close (compressed bucket and
//! stored mark in) as one atomic batch, then releases the bucket's log records; until then
//! reads find the bucket in its series' `closing` map, and the log keeps it durable. When more than [`QUEUE_LIMIT`] bytes of
//! buckets wait, inserts store buckets themselves (backpressure). A clean shutdown drains
//! the queue before closing the open buckets.

use super::{stage_close, Closing, Series};
use crate::bucket::Bucket;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// Bytes of closed buckets (as held in memory) that may wait for the worker.
const QUEUE_LIMIT: usize = 256 << 20;

/// How long the worker waits for work before it ends (a new one starts on demand).
const IDLE: Duration = Duration::from_secs(2);

struct Job {
    series: Arc<Mutex<Series>>,
    bucket: Arc<Bucket>,
    /// The log records holding the bucket's entries.
    seqs: Vec<u64>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    bytes: usize,
    worker: bool,
    /// Jobs taken off the queue and not stored yet.
    in_flight: usize,
}

/// The queue of closed buckets and its worker.
#[derive(Default)]
pub(super) struct Compressor {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Signalled when a job is stored.
    stored: Condvar,
}

impl Compressor {
    /// Hands closed buckets to the worker; stores buckets in the caller's thread while the
    /// queue is over its limit.
    pub(super) fn submit(self: &Arc<Self>, series: &Arc<Mutex<Series>>, closing: Closing) {
        if closing.is_empty() {
            return;
        }
        let mut q = self.queue.lock();
        for (bucket, seqs) in closing {
            q.bytes += bucket.heap_bytes;
            q.jobs.push_back(Job {
                series: series.clone(),
                bucket,
                seqs,
            });
        }
        if !q.worker {
            q.worker = true;
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("bucket-compressor".into())
                .spawn(move || me.work());
            if spawned.is_err() {
                q.worker = false;
            }
        }
        self.ready.notify_one();
        while q.bytes > QUEUE_LIMIT || !q.worker {
            let Some(job) = Self::pop(&mut q) else { break };
            drop(q);
            self.store(job);
            q = self.queue.lock();
        }
    }

    fn pop(q: &mut Queue) -> Option<Job> {
        let job = q.jobs.pop_front()?;
        q.bytes = q.bytes.saturating_sub(job.bucket.heap_bytes);
        q.in_flight += 1;
        Some(job)
    }

    fn store(&self, job: Job) {
        store(job);
        let mut q = self.queue.lock();
        q.in_flight -= 1;
        self.stored.notify_all();
    }

    fn work(&self) {
        loop {
            let mut q = self.queue.lock();
            if q.jobs.is_empty()
                && self.ready.wait_for(&mut q, IDLE).timed_out()
                && q.jobs.is_empty()
            {
                q.worker = false;
                return;
            }
            let Some(job) = Self::pop(&mut q) else {
                continue;
            };
            drop(q);
            self.store(job);
        }
    }

    /// Stores every waiting bucket in the caller's thread and waits for the one the
    /// worker may be storing (clean shutdown: nothing may write after the final flush).
    pub(super) fn drain(&self) {
        let mut q = self.queue.lock();
        loop {
            if let Some(job) = Self::pop(&mut q) {
                drop(q);
                self.store(job);
                q = self.queue.lock();
            } else if q.in_flight > 0 {
                self.stored.wait(&mut q);
            } else {
                return;
            }
        }
    }
}

/// Compresses and stores one closed bucket; the bucket leaves `closing` and releases its
/// log records once its close is applied. A close that fails keeps the bucket readable
/// from `closing` (its log records stay; the next start closes it).
fn store(job: Job) {
    let buckets = {
        let s = job.series.lock();
        if s.dropped {
            return;
        }
        s.buckets.clone()
    };
    let engine = buckets.engine();
    let mut batch = engine.batch();
    stage_close(&mut batch, &buckets, &job.bucket, &job.seqs);
    match engine.apply(batch) {
        Ok(_) => {
            let mut s = job.series.lock();
            s.closing.remove(&job.bucket.id);
            s.log.release((job.bucket.id, job.seqs));
        }
        Err(e) => {
            tracing::warn!(ns = %buckets.namespace(), error = %e, "storing a closed bucket failed; it stays in the insert log until the next start");
        }
    }
}
