//! The insert log of one time-series collection: every insert writes *one* record (`L` +
//! sequence number) holding the new measurements of every open bucket it touched, instead
//! of one delta record per bucket. At 100,000 series an insert of 10,000 measurements
//! touches 10,000 buckets; one key-value pair per bucket made the storage engine's
//! memtable, flushes and compactions most of the ingest cost (`docs/decisions/0013`).
//!
//! A record stays until every bucket with an entry in it is stored closed (or removed).
//! Storing bucket X also writes a *stored mark* (`P` + X's `_id` -> the highest record
//! sequence with an entry of X): a restart skips the entries of X in records up to the
//! mark, which are in X's stored form already. A mark is deleted once every record up to
//! it is gone. Records and marks are deleted lazily, with the collection's next batch.
//!
//! Record format, entries back to back, one per bucket:
//!
//! | bytes | field |
//! |---|---|
//! | 12 | bucket `_id` |
//! | 1 | flags: 1 = first entry of the bucket (a header follows), 2 = the bucket was reopened (it is also stored closed, with the measurements it had) |
//! | 8 + BSON | header, first entries only: min time (i64 LE), then `{"": meta}` (`{}` without meta) |
//! | 4 | length of the rows (u32 LE) |
//! | n | the rows: the new measurements without their meta field, BSON documents back to back |

use super::keys::{log_key, object_id_at, stored_mark_key, STORED_MARK};
use super::{corrupt, StoreError};
use crate::bucket::Bucket;
use bson::oid::ObjectId;
use hourglass_storage::{Batch, Snapshot, Tree};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, HashMap, HashSet};

const FIRST: u8 = 1;
/// The largest record buffer a collection keeps for its next record (an idle collection
/// holds it).
const MAX_SPARE_RECORD: usize = 8 << 20;
const REOPENED: u8 = 2;

/// A bucket leaving the log's care (stored or removed), with the records holding its
/// entries.
pub(super) type Retired = (ObjectId, Vec<u64>);

/// One bucket's entry in a record.
pub(super) struct Entry<'a> {
    pub id: ObjectId,
    /// `(min time, meta)` of a first entry.
    pub header: Option<(i64, Option<bson::Bson>)>,
    pub reopened: bool,
    pub rows: &'a [u8],
}

/// In-memory bookkeeping of the log (under the series lock).
#[derive(Default)]
pub(super) struct InsertLog {
    next: u64,
    /// Live records: how many of the buckets with an entry in each are not stored yet.
    live: BTreeMap<u64, u32>,
    /// The records holding entries of each bucket not yet retired, in order (bucket ids
    /// are made by the server, so a fast hash is safe).
    of_bucket: FxHashMap<ObjectId, Vec<u64>>,
    /// Stored marks to delete once every record up to their sequence is gone.
    marks: BTreeMap<u64, Vec<ObjectId>>,
    /// The sequence of each bucket's mark in `marks` (a bucket reopened and stored again
    /// has one mark, the later one).
    mark_of: HashMap<ObjectId, u64>,
    /// Records and marks no longer needed, deleted with the collection's next batch
    /// staged under its series lock.
    garbage_records: Vec<u64>,
    garbage_marks: HashSet<ObjectId>,
    /// The last record's buffer, for the next one: a record of 10,000 measurements is
    /// megabytes, and a fresh buffer of that size is new pages the kernel must zero.
    spare: Vec<u8>,
}

/// Builds one record.
pub(super) struct RecordWriter {
    bytes: Vec<u8>,
    entries: u32,
}

impl RecordWriter {
    /// Appends `bucket`'s entry: `first` adds its header.
    pub fn entry(&mut self, bucket: &Bucket, first: bool, reopened: bool, rows: &[u8]) {
        let out = &mut self.bytes;
        out.extend_from_slice(&bucket.id.bytes());
        let flags = if first { FIRST } else { 0 } | if reopened { REOPENED } else { 0 };
        out.push(flags);
        if first {
            out.extend_from_slice(&bucket.min_time_ms.to_le_bytes());
            out.extend_from_slice(&super::series_value(bucket.meta.as_ref()));
        }
        // A bucket's rows of one insert are far below 4 GiB (16 MB per measurement, 48 MB
        // per message).
        out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
        out.extend_from_slice(rows);
        self.entries += 1;
    }
}

impl InsertLog {
    /// A writer for the next record, on the last record's buffer.
    pub fn writer(&mut self, rows: usize, buckets: usize) -> RecordWriter {
        let mut bytes = std::mem::take(&mut self.spare);
        bytes.clear();
        bytes.reserve(rows + buckets * 24);
        RecordWriter { bytes, entries: 0 }
    }

    /// Notes that the record being written (the next one) holds an entry of `id`;
    /// returns whether it is the bucket's first entry.
    pub fn note(&mut self, id: ObjectId) -> bool {
        let seqs = self.of_bucket.entry(id).or_default();
        seqs.push(self.next);
        seqs.len() == 1
    }

    /// Stages `record` as the next record (its buckets noted with [`InsertLog::note`]),
    /// with the garbage collected so far.
    pub fn append(&mut self, batch: &mut Batch, tree: &Tree, record: RecordWriter) {
        self.stage_garbage(batch, tree);
        if record.entries == 0 {
            return;
        }
        batch.put(tree, &log_key(self.next), &record.bytes);
        self.live.insert(self.next, record.entries);
        self.next += 1;
        if record.bytes.capacity() <= MAX_SPARE_RECORD {
            self.spare = record.bytes;
        }
    }

    /// Takes `id` out of the log's care (it is being stored or removed): the records
    /// holding its entries, to pass to [`stage_retire`] and then [`InsertLog::release`].
    pub fn retire(&mut self, id: &ObjectId) -> Vec<u64> {
        self.of_bucket.remove(id).unwrap_or_default()
    }

    /// After the batch storing or removing `id` committed: its records no longer wait for
    /// it; records nothing waits for, and marks no record needs, become garbage.
    pub fn release(&mut self, (id, seqs): Retired) {
        let Some(&last) = seqs.last() else {
            return;
        };
        for seq in &seqs {
            if let Some(n) = self.live.get_mut(seq) {
                *n -= 1;
                if *n == 0 {
                    self.live.remove(seq);
                    self.garbage_records.push(*seq);
                }
            }
        }
        if let Some(older) = self.mark_of.insert(id, last) {
            if let Some(ids) = self.marks.get_mut(&older) {
                ids.retain(|i| *i != id);
            }
        }
        self.marks.entry(last).or_default().push(id);
        let oldest_live = self.live.keys().next().copied().unwrap_or(self.next);
        while let Some(entry) = self.marks.first_entry() {
            if *entry.key() >= oldest_live {
                break;
            }
            for id in entry.remove() {
                self.mark_of.remove(&id);
                self.garbage_marks.insert(id);
            }
        }
    }

    /// `id` was reopened: a new mark will replace its old one, which must not be deleted
    /// after that.
    pub fn reopened(&mut self, id: &ObjectId) {
        self.garbage_marks.remove(id);
    }

    /// Stages the deletion of the records and marks no longer needed; only batches
    /// applied under the series lock take them, so they apply in order with reopenings.
    /// They stay listed until [`InsertLog::garbage_applied`]: a batch that fails leaves
    /// them for the next one, so a mark is never deleted while a record it covers stays.
    /// (A deletion lost in a crash leaves entries the marks skip; the next start deletes
    /// every record and mark.)
    pub fn stage_garbage(&self, batch: &mut Batch, tree: &Tree) {
        for seq in &self.garbage_records {
            batch.delete(tree, &log_key(*seq));
        }
        for id in &self.garbage_marks {
            batch.delete(tree, &stored_mark_key(id));
        }
    }

    /// The batch holding the staged deletions was applied.
    pub fn garbage_applied(&mut self) {
        self.garbage_records.clear();
        self.garbage_marks.clear();
    }

    /// Whether records or marks wait to be deleted.
    pub fn has_garbage(&self) -> bool {
        !self.garbage_records.is_empty() || !self.garbage_marks.is_empty()
    }
}

/// Stages the stored mark of a bucket leaving the log (with the batch that stores or
/// removes it).
pub(super) fn stage_retire(batch: &mut Batch, tree: &Tree, id: &ObjectId, seqs: &[u64]) {
    if let Some(last) = seqs.last() {
        batch.put(tree, &stored_mark_key(id), &last.to_be_bytes());
    }
}

/// The stored marks of a snapshot: the last record sequence each bucket's stored form
/// covers.
pub(super) struct StoredMarks(HashMap<ObjectId, u64>);

impl StoredMarks {
    pub fn read(snap: &Snapshot, tree: &Tree) -> Result<StoredMarks, StoreError> {
        let mut marks = HashMap::new();
        for entry in snap.scan_prefix(tree, &[STORED_MARK]) {
            let (k, v) = entry?;
            let id = object_id_at(&k).ok_or_else(|| corrupt("short stored-mark key"))?;
            let seq: [u8; 8] = v
                .as_slice()
                .try_into()
                .map_err(|_| corrupt("a stored mark is not 8 bytes"))?;
            marks.insert(id, u64::from_be_bytes(seq));
        }
        Ok(StoredMarks(marks))
    }

    /// Whether `id`'s entry in record `seq` is already in its stored form (or the bucket
    /// was removed since).
    pub fn covers(&self, id: &ObjectId, seq: u64) -> bool {
        self.0.get(id).is_some_and(|m| *m >= seq)
    }

    /// The marks' keys.
    pub fn keys(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.0.keys().map(stored_mark_key)
    }
}

/// The entries of a record.
pub(super) fn entries(bytes: &[u8]) -> impl Iterator<Item = Result<Entry<'_>, StoreError>> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let read = read_entry(rest);
        match read {
            Ok((e, tail)) => {
                rest = tail;
                Some(Ok(e))
            }
            Err(e) => {
                rest = &[];
                Some(Err(e))
            }
        }
    })
}

fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], StoreError> {
    if rest.len() < n {
        return Err(corrupt("a truncated insert-log entry"));
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

fn read_entry(mut rest: &[u8]) -> Result<(Entry<'_>, &[u8]), StoreError> {
    let id: [u8; 12] = take(&mut rest, 12)?
        .try_into()
        .map_err(|_| corrupt("a short bucket id in the insert log"))?;
    let flags = take(&mut rest, 1)?[0];
    let header = if flags & FIRST != 0 {
        let min: [u8; 8] = take(&mut rest, 8)?
            .try_into()
            .map_err(|_| corrupt("a short min time in the insert log"))?;
        let len = rest
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_le_bytes)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| corrupt("a bad meta in the insert log"))?;
        let doc: bson::Document =
            bson::from_slice(take(&mut rest, len)?).map_err(|e| corrupt(e.to_string()))?;
        Some((i64::from_le_bytes(min), doc.get("").cloned()))
    } else {
        None
    };
    let len: [u8; 4] = take(&mut rest, 4)?
        .try_into()
        .map_err(|_| corrupt("a short row length in the insert log"))?;
    let rows = take(&mut rest, u32::from_le_bytes(len) as usize)?;
    Ok((
        Entry {
            id: ObjectId::from_bytes(id),
            header,
            reopened: flags & REOPENED != 0,
            rows,
        },
        rest,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::TimeseriesOptions;
    use bson::{doc, Bson};

    #[test]
    fn records_round_trip_and_reject_truncation() {
        let opts = TimeseriesOptions::parse(&doc! {"timeField": "t", "metaField": "m"}).unwrap();
        let a = Bucket::new(&opts, Some(Bson::Int32(1)), 5);
        let b = Bucket::new(&opts, None, 7);
        let row = bson::to_vec(&doc! {"t": bson::DateTime::from_millis(5)}).unwrap();
        let mut w = InsertLog::default().writer(64, 2);
        w.entry(&a, true, true, &row);
        w.entry(&b, false, false, &row);
        let got: Vec<Entry> = entries(&w.bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].id, a.id);
        assert_eq!(got[0].header, Some((a.min_time_ms, Some(Bson::Int32(1)))));
        assert!(got[0].reopened && !got[1].reopened);
        assert_eq!((got[1].id, got[1].header.is_none()), (b.id, true));
        assert_eq!(got[1].rows, &row[..]);
        // A record cut anywhere but between entries is noticed (storage writes a record
        // whole; this guards against a wrong length).
        let boundary = w.bytes.len() - (12 + 1 + 4 + row.len());
        for cut in (1..w.bytes.len()).filter(|c| *c != boundary) {
            assert!(
                entries(&w.bytes[..cut]).any(|e| e.is_err()),
                "cut at {cut} is noticed"
            );
        }
    }

    #[test]
    fn a_record_is_garbage_once_every_bucket_in_it_is_released_and_marks_follow() {
        let mut log = InsertLog::default();
        let (x, y) = (ObjectId::new(), ObjectId::new());
        // Record 0 holds x and y, record 1 holds y.
        log.live.insert(0, 2);
        log.of_bucket.insert(x, vec![0]);
        log.of_bucket.insert(y, vec![0, 1]);
        log.live.insert(1, 1);
        log.next = 2;
        let rx = log.retire(&x);
        log.release((x, rx));
        assert!(!log.has_garbage(), "record 0 still holds y");
        let ry = log.retire(&y);
        log.release((y, ry));
        assert_eq!(log.garbage_records, vec![0, 1]);
        assert_eq!(log.garbage_marks, HashSet::from([x, y]));
        assert!(log.live.is_empty() && log.marks.is_empty());
    }

    #[test]
    fn a_bucket_stored_twice_keeps_its_later_mark_while_a_record_needs_it() {
        let mut log = InsertLog::default();
        let (x, y) = (ObjectId::new(), ObjectId::new());
        // x is stored from record 0, reopened (its old mark's deletion is called off) into
        // record 1 (shared with y), and stored again.
        log.live.insert(0, 1);
        log.of_bucket.insert(x, vec![0]);
        log.next = 1;
        let r = log.retire(&x);
        log.release((x, r));
        assert!(log.garbage_marks.contains(&x));
        log.reopened(&x);
        log.live.insert(1, 2);
        log.of_bucket.insert(x, vec![1]);
        log.of_bucket.insert(y, vec![1]);
        log.next = 2;
        let r = log.retire(&x);
        log.release((x, r));
        assert!(
            !log.garbage_marks.contains(&x),
            "record 1 still holds x's entry: its mark must stay"
        );
        let r = log.retire(&y);
        log.release((y, r));
        assert!(log.garbage_marks.contains(&x));
    }
}
