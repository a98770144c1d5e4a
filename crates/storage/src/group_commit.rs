//! Group commit: many writers, one `fsync`.
//!
//! A writer first applies its batch to the engine's journal (in memory / OS buffers), takes
//! a ticket, and then waits until a sync that started after its ticket has finished. The
//! first waiter to find no sync in flight performs it for everyone whose batch is already in
//! the journal; the others sleep on a condition variable. Under load one `fsync` therefore
//! covers many acknowledged writes.

use parking_lot::{Condvar, Mutex};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

#[derive(Default)]
struct State {
    /// Tickets handed out: batches applied to the journal so far.
    applied: u64,
    /// All tickets up to this one are durable.
    synced: u64,
    /// A writer is running the sync right now.
    syncing: bool,
}

/// Coordinates durable syncs among concurrent committers.
pub struct GroupCommit {
    state: Mutex<State>,
    done: Condvar,
    syncs: std::sync::atomic::AtomicU64,
    /// Seconds each sync took (its count is the number of syncs).
    latency: Histogram,
}

impl Default for GroupCommit {
    fn default() -> Self {
        GroupCommit {
            state: Mutex::default(),
            done: Condvar::new(),
            syncs: Default::default(),
            // 10 us to ~2.6 s.
            latency: Histogram::new(exponential_buckets(0.00001, 4.0, 10)),
        }
    }
}

impl GroupCommit {
    /// Records that one more batch is in the journal and returns its ticket.
    pub fn ticket(&self) -> u64 {
        let mut st = self.state.lock();
        st.applied += 1;
        st.applied
    }

    /// Blocks until `ticket` is durable, running `sync` if nobody else is. Returns true
    /// when another writer's sync made it durable (the write was group-committed).
    pub fn wait_durable<E>(
        &self,
        ticket: u64,
        sync: impl Fn() -> Result<(), E>,
    ) -> Result<bool, E> {
        let mut st = self.state.lock();
        let mut ran = false;
        loop {
            if st.synced >= ticket {
                return Ok(!ran);
            }
            if st.syncing {
                self.done.wait(&mut st);
                continue;
            }
            st.syncing = true;
            ran = true;
            let target = st.applied;
            drop(st);
            let started = std::time::Instant::now();
            let result = sync();
            self.latency.observe(started.elapsed().as_secs_f64());
            self.syncs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            st = self.state.lock();
            st.syncing = false;
            if result.is_ok() {
                st.synced = st.synced.max(target);
            }
            self.done.notify_all();
            result?;
        }
    }

    /// How long the syncs took.
    pub fn latency(&self) -> &Histogram {
        &self.latency
    }

    /// How many syncs were run so far (for statistics and tests).
    pub fn sync_count(&self) -> u64 {
        self.syncs.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn concurrent_writers_share_syncs() {
        let gc = Arc::new(GroupCommit::default());
        let real_syncs = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let gc = gc.clone();
                let real = real_syncs.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let t = gc.ticket();
                        gc.wait_durable(t, || {
                            real.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(std::time::Duration::from_millis(1));
                            Ok::<(), ()>(())
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let syncs = real_syncs.load(Ordering::Relaxed);
        assert!(syncs < 400, "every commit synced alone: {syncs}");
        assert_eq!(syncs, gc.sync_count());
    }

    #[test]
    fn a_write_covered_by_another_writers_sync_is_group_committed() {
        let gc = GroupCommit::default();
        let first = gc.ticket();
        let second = gc.ticket();
        assert_eq!(
            gc.wait_durable(second, || Ok::<(), ()>(())),
            Ok(false),
            "ran the sync"
        );
        assert_eq!(
            gc.wait_durable(first, || Ok::<(), ()>(())),
            Ok(true),
            "rode on it"
        );
        assert_eq!(gc.sync_count(), 1);
    }

    #[test]
    fn failed_sync_is_reported_and_retried() {
        let gc = GroupCommit::default();
        let t = gc.ticket();
        assert!(gc.wait_durable(t, || Err::<(), _>("disk full")).is_err());
        assert!(gc.wait_durable(t, || Ok::<(), &str>(())).is_ok());
    }
}
