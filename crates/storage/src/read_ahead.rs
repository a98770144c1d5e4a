//! Reading a long range on a thread of its own: walking the engine's tables (merging
//! runs, decoding block entries) is half of a regular collection scan's time, and the
//! other half (filtering, grouping, building replies) can run beside it.
//!
//! [`ReadAhead`] reads its first items inline, so short scans start no thread; past
//! them it hands the rest of the iterator to a thread that sends chunks through a
//! bounded channel, in order. Dropping the reader stops that thread at its next chunk.
//! At most as many reading threads run at once as the machine has cores; beyond that a
//! scan stays inline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};

/// Items read inline before reading goes to its own thread.
pub const INLINE_ITEMS: usize = 4096;
/// Items a chunk carries.
const CHUNK: usize = 512;
/// Chunks read ahead of the consumer.
const CHUNKS_AHEAD: usize = 4;

static READING: AtomicUsize = AtomicUsize::new(0);

/// An iterator whose items are read on another thread once `INLINE_ITEMS` have been read.
pub struct ReadAhead<I: Iterator> {
    state: State<I>,
}

enum State<I: Iterator> {
    Inline {
        iter: I,
        left: usize,
    },
    Ahead {
        chunks: Receiver<Vec<I::Item>>,
        chunk: std::vec::IntoIter<I::Item>,
        /// Joined when the channel closes: a reading thread that panicked must not look
        /// like the end of the range (its panic goes on in the caller, as it would have
        /// inline).
        reader: Option<std::thread::JoinHandle<()>>,
    },
    Done,
}

impl<I> ReadAhead<I>
where
    I: Iterator + Send + 'static,
    I::Item: Send + 'static,
{
    pub fn new(iter: I) -> ReadAhead<I> {
        ReadAhead::after(iter, INLINE_ITEMS)
    }

    /// Reads `inline` items here before handing the rest to a thread.
    pub fn after(iter: I, inline: usize) -> ReadAhead<I> {
        ReadAhead {
            state: State::Inline { iter, left: inline },
        }
    }

    /// Starts the reading thread when a slot is free; else reading stays inline.
    fn hand_off(&mut self) {
        let State::Inline { iter, .. } = std::mem::replace(&mut self.state, State::Done) else {
            return;
        };
        let Some(slot) = Slot::take() else {
            self.state = State::Inline {
                iter,
                left: usize::MAX,
            };
            return;
        };
        // Held here too, so that the iterator comes back if the thread cannot start.
        let shared = Arc::new(Mutex::new(Some(iter)));
        let theirs = shared.clone();
        let (tx, rx) = sync_channel(CHUNKS_AHEAD);
        let spawned = std::thread::Builder::new()
            .name("read-ahead".into())
            .spawn(move || {
                let _slot = slot;
                let taken = theirs.lock().ok().and_then(|mut i| i.take());
                let Some(mut iter) = taken else { return };
                loop {
                    let chunk: Vec<I::Item> = iter.by_ref().take(CHUNK).collect();
                    if chunk.is_empty() || tx.send(chunk).is_err() {
                        return;
                    }
                }
            });
        self.state = match spawned {
            Ok(handle) => State::Ahead {
                chunks: rx,
                chunk: Vec::new().into_iter(),
                reader: Some(handle),
            },
            Err(e) => {
                tracing::warn!(error = %e, "could not start a read-ahead thread; reading inline");
                match shared.lock().ok().and_then(|mut i| i.take()) {
                    Some(iter) => State::Inline {
                        iter,
                        left: usize::MAX,
                    },
                    None => State::Done,
                }
            }
        };
    }
}

impl<I> Iterator for ReadAhead<I>
where
    I: Iterator + Send + 'static,
    I::Item: Send + 'static,
{
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        loop {
            match &mut self.state {
                State::Inline { left: 0, .. } => self.hand_off(),
                State::Inline { iter, left } => {
                    *left -= 1;
                    return iter.next();
                }
                State::Ahead {
                    chunks,
                    chunk,
                    reader,
                } => {
                    if let Some(item) = chunk.next() {
                        return Some(item);
                    }
                    match chunks.recv() {
                        Ok(next) => *chunk = next.into_iter(),
                        Err(_) => {
                            if let Some(Err(panic)) = reader.take().map(|h| h.join()) {
                                std::panic::resume_unwind(panic);
                            }
                            self.state = State::Done;
                        }
                    }
                }
                State::Done => return None,
            }
        }
    }
}

/// One of the reading threads allowed at once; freed when dropped.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        READING
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cores).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        READING.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_in_order_across_the_hand_off_and_chunks() {
        let n = INLINE_ITEMS + 3 * CHUNK + 7;
        let got: Vec<usize> = ReadAhead::new(0..n).collect();
        assert_eq!(got, (0..n).collect::<Vec<_>>());
        let short: Vec<usize> = ReadAhead::after(0..3, 0).collect();
        assert_eq!(short, vec![0, 1, 2]);
    }

    #[test]
    fn a_reading_thread_that_panics_panics_the_reader_instead_of_ending_the_range() {
        let failing = (0..10_000).inspect(|i| assert!(*i != 5_000, "storage failed"));
        let mut r = ReadAhead::after(failing, 10);
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.by_ref().count()));
        assert!(read.is_err(), "the range ended quietly at the panic");
    }

    /// Counts up forever; says when it is dropped.
    struct Endless(usize, Arc<std::sync::atomic::AtomicBool>);

    impl Iterator for Endless {
        type Item = usize;
        fn next(&mut self) -> Option<usize> {
            self.0 += 1;
            Some(self.0)
        }
    }

    impl Drop for Endless {
        fn drop(&mut self) {
            self.1.store(true, Ordering::Release);
        }
    }

    #[test]
    fn dropping_the_reader_stops_its_thread() {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut r = ReadAhead::after(Endless(0, dropped.clone()), 1);
        assert_eq!(r.next(), Some(1));
        assert_eq!(r.next(), Some(2));
        drop(r);
        // The thread sees the closed channel at its next send and drops the iterator.
        for _ in 0..500 {
            if dropped.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the read-ahead thread did not stop");
    }
}
