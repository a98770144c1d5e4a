//! Key encoding of a buckets tree.
//!
//! | key | value |
//! |---|---|
//! | `B` + bucket `_id` (12 bytes) | a closed bucket, compressed (`Bucket::encode_compressed`) |
//! | `L` + seq (u64 big-endian) | an insert-log record: new measurements of open buckets (`insert_log`) |
//! | `P` + bucket `_id` | the stored mark of a bucket: the last insert-log record its stored form includes (u64 BE) |
//! | `D` + bucket `_id` + seq (u32 big-endian) | legacy (before the insert log): a delta of an open bucket; read and closed at start-up |
//! | `M` + len (u32 BE) + meta key + min time (i64, sign-flipped BE) + bucket `_id` | empty: the meta/time index of closed buckets |
//! | `S` + meta key | the series' meta value as `{"": meta}` (absent meta: `{}`): the series directory |
//! | `A` + file path | the manifest entry of an archived Parquet file (`hourglass_archive::FileEntry`) |
//!
//! The bucket `_id` starts with its minimum time in seconds (big-endian), so `B` keys
//! are in time order and a time range is a key range.

use bson::oid::ObjectId;

pub const CLOSED: u8 = b'B';
pub const DELTA: u8 = b'D';
pub const LOG: u8 = b'L';
pub const STORED_MARK: u8 = b'P';
pub const META_INDEX: u8 = b'M';
pub const SERIES: u8 = b'S';
pub const ARCHIVED: u8 = b'A';

pub fn archived_key(path: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + path.len());
    k.push(ARCHIVED);
    k.extend_from_slice(path.as_bytes());
    k
}

pub fn bucket_key(kind: u8, id: &ObjectId) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(kind);
    k.extend_from_slice(&id.bytes());
    k
}

#[cfg(test)]
pub fn delta_key(id: &ObjectId, seq: u32) -> Vec<u8> {
    let mut k = bucket_key(DELTA, id);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

pub fn log_key(seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(LOG);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// The sequence number in an insert-log key.
pub fn log_seq(k: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(k.get(1..9)?.try_into().ok()?))
}

pub fn stored_mark_key(id: &ObjectId) -> Vec<u8> {
    bucket_key(STORED_MARK, id)
}

/// The `_id` stored in a `B`/`D` key.
pub fn object_id_at(k: &[u8]) -> Option<ObjectId> {
    let b: [u8; 12] = k.get(1..13)?.try_into().ok()?;
    Some(ObjectId::from_bytes(b))
}

/// `B` + the first `_id` time prefix of a bucket whose minimum time is `secs`.
pub fn closed_time_key(secs: i64) -> Vec<u8> {
    let secs = secs.clamp(0, i64::from(u32::MAX)) as u32;
    let mut k = vec![CLOSED];
    k.extend_from_slice(&secs.to_be_bytes());
    k
}

fn series_prefix(meta_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + meta_key.len() + 20);
    k.push(META_INDEX);
    k.extend_from_slice(&(meta_key.len() as u32).to_be_bytes());
    k.extend_from_slice(meta_key);
    k
}

fn flip(ms: i64) -> [u8; 8] {
    ((ms as u64) ^ (1u64 << 63)).to_be_bytes()
}

/// The meta-index entry of a closed bucket.
pub fn meta_index_key(meta_key: &[u8], min_time_ms: i64, id: &ObjectId) -> Vec<u8> {
    let mut k = series_prefix(meta_key);
    k.extend_from_slice(&flip(min_time_ms));
    k.extend_from_slice(&id.bytes());
    k
}

/// The key range of one series' meta-index entries with `lo <= min time <= hi`.
pub fn meta_index_range(meta_key: &[u8], lo: i64, hi: i64) -> (Vec<u8>, Vec<u8>) {
    let mut start = series_prefix(meta_key);
    start.extend_from_slice(&flip(lo));
    let mut end = series_prefix(meta_key);
    match hi.checked_add(1) {
        Some(h) => end.extend_from_slice(&flip(h)),
        None => end.extend_from_slice(&[0xff; 9]),
    }
    (start, end)
}

/// The bucket `_id` at the end of a meta-index key.
pub fn meta_index_id(k: &[u8]) -> Option<ObjectId> {
    let b: [u8; 12] = k.get(k.len().checked_sub(12)?..)?.try_into().ok()?;
    Some(ObjectId::from_bytes(b))
}

/// The bucket minimum time in a meta-index key.
pub fn meta_index_min_time(k: &[u8]) -> Option<i64> {
    let end = k.len().checked_sub(12)?;
    let b: [u8; 8] = k.get(end.checked_sub(8)?..end)?.try_into().ok()?;
    Some((u64::from_be_bytes(b) ^ (1u64 << 63)) as i64)
}

pub fn series_key(meta_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + meta_key.len());
    k.push(SERIES);
    k.extend_from_slice(meta_key);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_index_keys_sort_by_series_then_time() {
        let id = ObjectId::new();
        let a = meta_index_key(b"a", -5, &id);
        let b = meta_index_key(b"a", 7, &id);
        let c = meta_index_key(b"ab", -100, &id);
        assert!(a < b && b < c);
        let (s, e) = meta_index_range(b"a", -5, 6);
        assert!(s <= a && a < e && b >= e);
        assert_eq!(meta_index_id(&b), Some(id));
        assert_eq!(meta_index_min_time(&a), Some(-5));
        assert_eq!(meta_index_min_time(&b), Some(7));
    }

    #[test]
    fn closed_keys_follow_bucket_time() {
        let id = ObjectId::parse_str("000000640000000000000000").unwrap();
        let k = bucket_key(CLOSED, &id);
        assert!(closed_time_key(100) <= k && k < closed_time_key(101));
        assert_eq!(closed_time_key(-3), closed_time_key(0));
    }
}
