//! Server-side cursors: results not yet sent, fetched by `getMore`, closed by
//! `killCursors`, by exhaustion, or after `cursorTimeoutMillis` (10 minutes) idle.

use crate::error::CommandError;
use bson::Document;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Documents still to return.
pub type DocSource = Box<dyn Iterator<Item = Result<Document, CommandError>> + Send>;

/// Largest reply batch in bytes (MongoDB caps batches at 16 MiB).
const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024 - 16 * 1024;

pub struct Cursor {
    pub ns: String,
    source: DocSource,
    last_used: Instant,
}

/// One `getMore` answer: the cursor's namespace, its documents, and whether it stays open.
pub type Batch = (String, Vec<Document>, bool);

#[derive(Default)]
pub struct CursorRegistry {
    cursors: Mutex<HashMap<i64, Arc<Mutex<Cursor>>>>,
    next_id: AtomicI64,
}

/// Takes up to `batch_size` documents (0 = no count limit) and at most ~16 MiB from
/// `source`. Returns the batch and whether the source may have more.
pub fn take_batch(
    source: &mut DocSource,
    batch_size: Option<usize>,
) -> Result<(Vec<Document>, bool), CommandError> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    let limit = batch_size.filter(|&n| n > 0).unwrap_or(usize::MAX);
    while out.len() < limit {
        match source.next() {
            None => return Ok((out, false)),
            Some(doc) => {
                let doc = doc?;
                bytes += hourglass_query::bson_size::bson_size(&doc);
                out.push(doc);
                if bytes > MAX_BATCH_BYTES {
                    break;
                }
            }
        }
    }
    Ok((out, true))
}

impl CursorRegistry {
    /// Registers `source` and returns its new id (never 0).
    pub fn open(&self, ns: String, source: DocSource) -> i64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed)
            + 1
            + (std::process::id() as i64) * (1 << 32);
        let cursor = Cursor {
            ns,
            source,
            last_used: Instant::now(),
        };
        self.cursors.lock().insert(id, Arc::new(Mutex::new(cursor)));
        id
    }

    /// Fetches the next batch of cursor `id`; returns (namespace, docs, cursor still open).
    pub fn get_more(
        &self,
        id: i64,
        batch_size: Option<usize>,
    ) -> Option<Result<Batch, CommandError>> {
        let cursor = self.cursors.lock().get(&id).cloned()?;
        let mut c = cursor.lock();
        c.last_used = Instant::now();
        let ns = c.ns.clone();
        let result = take_batch(&mut c.source, batch_size);
        let open = matches!(result, Ok((_, true)));
        if !open {
            self.cursors.lock().remove(&id);
        }
        Some(result.map(|(docs, _)| (ns, docs, open)))
    }

    pub fn namespace(&self, id: i64) -> Option<String> {
        let c = self.cursors.lock().get(&id).cloned()?;
        let ns = c.lock().ns.clone();
        Some(ns)
    }

    /// Closes cursor `id`; returns whether it existed.
    pub fn kill(&self, id: i64) -> bool {
        self.cursors.lock().remove(&id).is_some()
    }

    pub fn len(&self) -> usize {
        self.cursors.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes cursors idle for longer than `timeout`; returns how many.
    pub fn reap(&self, timeout: Duration) -> usize {
        let now = Instant::now();
        let mut map = self.cursors.lock();
        let before = map.len();
        map.retain(|_, c| match c.try_lock() {
            Some(c) => now.duration_since(c.last_used) < timeout,
            None => true, // in use right now
        });
        before - map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn source(n: i32) -> DocSource {
        Box::new((0..n).map(|i| Ok(doc! {"i": i})))
    }

    #[test]
    fn get_more_drains_and_closes() {
        let reg = CursorRegistry::default();
        let id = reg.open("db.c".into(), source(5));
        let (_, b1, open) = reg.get_more(id, Some(3)).unwrap().unwrap();
        assert_eq!((b1.len(), open), (3, true));
        let (_, b2, open) = reg.get_more(id, Some(3)).unwrap().unwrap();
        assert_eq!((b2.len(), open), (2, false));
        assert!(reg.get_more(id, None).is_none());
    }

    #[test]
    fn idle_cursors_are_reaped() {
        let reg = CursorRegistry::default();
        reg.open("db.c".into(), source(5));
        assert_eq!(reg.reap(Duration::from_secs(600)), 0);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(reg.reap(Duration::from_millis(1)), 1);
        assert!(reg.is_empty());
    }
}
