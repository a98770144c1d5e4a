//! Server-side cursors: results not yet sent, fetched by `getMore`, closed by
//! `killCursors`, by exhaustion, or after `cursorTimeoutMillis` (10 minutes) idle.

use crate::error::CommandError;
use bson::spec::ElementType;
use bson::Document;
use hourglass_query::interrupt::Interrupt;
use hourglass_timeseries::exec::RawRow;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Documents still to return.
pub type DocSource = Box<dyn Iterator<Item = Result<Document, CommandError>> + Send>;

/// A result row: a document, or BSON bytes a read wrote straight from stored columns
/// (sent as they are: no document is built for them).
#[derive(Debug, Clone)]
pub enum Row {
    /// Boxed, so that a row is 32 bytes: batches move hundreds of thousands of rows.
    Doc(Box<Document>),
    Raw(RawRow),
}

impl Row {
    pub fn doc(d: Document) -> Row {
        Row::Doc(Box::new(d))
    }

    /// The encoded size.
    fn size(&self) -> usize {
        match self {
            Row::Doc(d) => hourglass_query::bson_size::bson_size(d),
            Row::Raw(r) => r.as_bytes().len(),
        }
    }

    pub fn into_document(self) -> Result<Document, CommandError> {
        match self {
            Row::Doc(d) => Ok(*d),
            Row::Raw(r) => r
                .to_document()
                .map_err(|e| CommandError::new(22, e.to_string())),
        }
    }
}

/// A batch of rows written into the reply, as the elements of a BSON array (`"0"`, `"1"`,
/// ...), in place of its empty `firstBatch`/`nextBatch` array.
#[derive(Debug, Default)]
pub struct RawBatch {
    rows: Vec<Row>,
}

impl RawBatch {
    pub fn new(rows: Vec<Row>) -> RawBatch {
        RawBatch { rows }
    }

    pub fn count(&self) -> usize {
        self.rows.len()
    }

    /// The encoded size of the array's elements.
    pub fn elements_len(&self) -> usize {
        let rows = self.rows.iter().enumerate();
        rows.map(|(i, r)| 2 + hourglass_query::bson_size::index_key_len(i) + r.size())
            .sum()
    }

    /// Appends the array's elements to `out`.
    pub fn write_elements(&self, out: &mut Vec<u8>) -> Result<(), String> {
        use hourglass_query::bson_write::write_document;
        // The element names "0", "1", ... counted in decimal digits, not formatted.
        let mut key = vec![b'0'];
        for row in &self.rows {
            out.push(ElementType::EmbeddedDocument as u8);
            out.extend_from_slice(&key);
            out.push(0);
            match row {
                Row::Doc(d) => write_document(d, out)?,
                Row::Raw(r) => out.extend_from_slice(r.as_bytes()),
            }
            increment_decimal(&mut key);
        }
        Ok(())
    }
}

/// Adds one to the decimal number written in ASCII digits in `digits`.
fn increment_decimal(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, b'1');
}

/// Rows still to return.
pub type RowSource = Box<dyn Iterator<Item = Result<Row, CommandError>> + Send>;

/// The rows of a document source.
pub fn rows(docs: DocSource) -> RowSource {
    Box::new(docs.map(|d| d.map(Row::doc)))
}

/// Largest reply batch in bytes (MongoDB caps batches at 16 MiB).
const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024 - 16 * 1024;

pub struct Cursor {
    pub ns: String,
    /// The user (`name@db`) whose command opened it, with access control on: only that
    /// user may fetch from it.
    owner: Option<String>,
    source: RowSource,
    /// A row that did not fit in the previous batch.
    pending: Option<Row>,
    /// What is left of the creating command's `maxTimeMS`: MongoDB counts the time spent
    /// producing every batch against it.
    time_left: Option<Duration>,
    last_used: Instant,
    /// The collation of the command that opened it, active while it produces batches.
    collation: Option<Arc<hourglass_query::collation::Collation>>,
}

/// One `getMore` answer: the cursor's namespace, its rows, and whether it stays open.
pub type Batch = (String, Vec<Row>, bool);

#[derive(Default)]
pub struct CursorRegistry {
    cursors: Mutex<HashMap<i64, Arc<Mutex<Cursor>>>>,
    next_id: AtomicI64,
}

/// Takes up to `batch_size` documents (0 = no count limit) and at most ~16 MiB from
/// `pending` then `source` (a document that would pass the size is left in `pending`, so
/// a reply never exceeds it). Returns the batch and whether the source may have more. A
/// single document over MongoDB's object size (an aggregation can build one) fails with
/// 10334 BSONObjectTooLarge, as MongoDB fails.
pub fn take_batch(
    source: &mut RowSource,
    pending: &mut Option<Row>,
    batch_size: Option<usize>,
) -> Result<(Vec<Row>, bool), CommandError> {
    let mut bytes = 0usize;
    let limit = batch_size.filter(|&n| n > 0).unwrap_or(usize::MAX);
    // Room for the rows the source says it has (a batch of rows written from columns
    // holds hundreds of thousands), at most what one 16 MiB batch can hold.
    let expected = source.size_hint().0.saturating_add(1);
    let mut out = Vec::with_capacity(expected.min(limit).min(MAX_BATCH_BYTES / 16));
    while out.len() < limit {
        let Some(doc) = pending.take().map(Ok).or_else(|| source.next()) else {
            return Ok((out, false));
        };
        let doc = doc?;
        let size = doc.size();
        let max = hourglass_query::limits::MAX_INTERNAL_OBJECT_SIZE;
        if size > max {
            let first = match &doc {
                Row::Doc(d) => d.keys().next().cloned().unwrap_or_default(),
                Row::Raw(r) => r
                    .as_raw()
                    .ok()
                    .and_then(|r| r.iter().next())
                    .and_then(|e| e.ok())
                    .map(|(k, _)| k.to_string())
                    .unwrap_or_default(),
            };
            return Err(CommandError::new(10334, format!("BSONObj size: {size} ({size:#X}) is invalid. Size must be between 0 and {max}(16MB) First element: {first}"),
            ));
        }
        if !out.is_empty() && bytes + size > MAX_BATCH_BYTES {
            *pending = Some(doc);
            return Ok((out, true));
        }
        bytes += size;
        out.push(doc);
    }
    Ok((out, true))
}

impl CursorRegistry {
    /// Registers `source` and returns its new id (never 0).
    pub fn open(
        &self,
        ns: String,
        owner: Option<String>,
        source: RowSource,
        pending: Option<Row>,
        time_left: Option<Duration>,
    ) -> i64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed)
            + 1
            + (std::process::id() as i64) * (1 << 32);
        let cursor = Cursor {
            ns,
            owner,
            source,
            pending,
            time_left,
            last_used: Instant::now(),
            collation: hourglass_query::collation::current(),
        };
        self.cursors.lock().insert(id, Arc::new(Mutex::new(cursor)));
        id
    }

    /// Fetches the next batch of cursor `id` under `interrupt` (the getMore's operation,
    /// which gets the time the cursor has left); returns (namespace, docs, cursor still
    /// open).
    pub fn get_more(
        &self,
        id: i64,
        batch_size: Option<usize>,
        interrupt: &Interrupt,
    ) -> Option<Result<Batch, CommandError>> {
        let cursor = self.cursors.lock().get(&id).cloned()?;
        let mut c = cursor.lock();
        c.last_used = Instant::now();
        let ns = c.ns.clone();
        let c = &mut *c;
        if let Some(left) = c.time_left {
            interrupt.set_deadline(Instant::now() + left);
        }
        let _collation = hourglass_query::collation::scope(c.collation.clone());
        let result = take_batch(&mut c.source, &mut c.pending, batch_size);
        c.time_left = c.time_left.and(interrupt.remaining());
        let open = matches!(result, Ok((_, true)));
        if !open {
            self.cursors.lock().remove(&id);
        }
        Some(result.map(|(docs, _)| (ns, docs, open)))
    }

    /// The namespace and owner of cursor `id`.
    pub fn describe(&self, id: i64) -> Option<(String, Option<String>)> {
        let c = self.cursors.lock().get(&id).cloned()?;
        let c = c.lock();
        Some((c.ns.clone(), c.owner.clone()))
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

    fn source(n: i32) -> RowSource {
        rows(Box::new((0..n).map(|i| Ok(doc! {"i": i}))))
    }

    #[test]
    fn a_raw_batch_is_the_bson_array_of_its_rows() {
        let docs: Vec<Document> = (0..1234).map(|i| doc! {"i": i}).collect();
        let rows = docs
            .iter()
            .enumerate()
            .map(|(i, d)| match i % 2 {
                0 => Row::doc(d.clone()),
                _ => Row::Raw(bson::RawDocumentBuf::from_document(d).unwrap().into()),
            })
            .collect();
        let batch = RawBatch::new(rows);
        let mut out = Vec::new();
        hourglass_query::bson_write::write_len_prefixed(&mut out, |o| batch.write_elements(o))
            .unwrap();
        assert_eq!(out.len(), batch.elements_len() + 5);
        let array: Document = bson::from_slice(&out).unwrap();
        let expected: Document = docs
            .into_iter()
            .enumerate()
            .map(|(i, d)| (i.to_string(), bson::Bson::Document(d)))
            .collect();
        assert_eq!(array, expected);
    }

    #[test]
    fn get_more_drains_and_closes() {
        let reg = CursorRegistry::default();
        let id = reg.open("db.c".into(), None, source(5), None, None);
        let (_, b1, open) = reg
            .get_more(id, Some(3), &Interrupt::default())
            .unwrap()
            .unwrap();
        assert_eq!((b1.len(), open), (3, true));
        let (_, b2, open) = reg
            .get_more(id, Some(3), &Interrupt::default())
            .unwrap()
            .unwrap();
        assert_eq!((b2.len(), open), (2, false));
        assert!(reg.get_more(id, None, &Interrupt::default()).is_none());
    }

    #[test]
    fn idle_cursors_are_reaped() {
        let reg = CursorRegistry::default();
        reg.open("db.c".into(), None, source(5), None, None);
        assert_eq!(reg.reap(Duration::from_secs(600)), 0);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(reg.reap(Duration::from_millis(1)), 1);
        assert!(reg.is_empty());
    }

    fn big(n: usize, mib: usize) -> RowSource {
        rows(Box::new((0..n).map(move |i| {
            Ok(doc! {"i": i as i32, "s": "x".repeat(mib << 20)})
        })))
    }

    #[test]
    fn a_batch_never_passes_16_mib_and_keeps_the_overflowing_document_for_the_next() {
        let mut src = big(5, 5);
        let mut pending = None;
        let (b1, more) = take_batch(&mut src, &mut pending, None).unwrap();
        assert_eq!((b1.len(), more), (3, true));
        assert!(matches!(&pending, Some(Row::Doc(d)) if d.get_i32("i") == Ok(3)));
        let (b2, more) = take_batch(&mut src, &mut pending, None).unwrap();
        assert_eq!((b2.len(), more), (2, false));
        assert!(matches!(&b2[0], Row::Doc(d) if d.get_i32("i") == Ok(3)));
    }

    #[test]
    fn a_document_over_the_object_size_is_bson_object_too_large() {
        let mut src = big(1, 17);
        let e = take_batch(&mut src, &mut None, None).unwrap_err();
        assert_eq!(e.code, 10334);
    }
}
