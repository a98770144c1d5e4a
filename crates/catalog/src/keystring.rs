//! Key strings as the storage keys them: the order-preserving encoding of
//! [`hourglass_query::keystring`], bounded in length for the storage engine.

use bson::Bson;
pub use hourglass_query::keystring::encode;

/// Longest key part stored as is; a longer one keeps its first `INLINE_MAX` bytes and a
/// SHA-256 of the whole (see [`bounded`]).
pub const INLINE_MAX: usize = 1024;

/// Length of a bounded key part: the prefix and the digest.
pub const BOUNDED_LEN: usize = INLINE_MAX + 32;

/// Bounds a key part to [`BOUNDED_LEN`] bytes so that values of any size can be keys of the
/// storage engine (whose keys are limited to 64 KiB): up to [`INLINE_MAX`] bytes it is
/// returned unchanged; a longer one becomes its first `INLINE_MAX` bytes followed by the
/// SHA-256 of all of it.
///
/// Properties the callers rely on:
/// - equal inputs give equal outputs, and different inputs different outputs (short ones
///   trivially, long ones unless SHA-256 collides);
/// - a set of prefix-free key strings stays prefix-free (a short key cannot be a prefix of
///   a long one's prefix, and all long keys have the same length);
/// - order is kept except between two long keys sharing their first `INLINE_MAX` bytes,
///   which order by digest: range scans over a bounded key therefore widen to its prefix
///   (see [`truncated`]) and re-check values, as every index scan does.
pub fn bounded(key: Vec<u8>) -> Vec<u8> {
    if key.len() <= INLINE_MAX {
        return key;
    }
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(&key);
    let mut out = key;
    out.truncate(INLINE_MAX);
    out.extend_from_slice(digest.as_slice());
    out
}

/// The stored prefix of a key part that [`bounded`] shortened (None for one kept whole).
pub fn truncated(part: &[u8]) -> Option<&[u8]> {
    (part.len() > INLINE_MAX).then(|| &part[..INLINE_MAX])
}

/// The key of a document's `_id` in its collection tree (and at the end of non-unique
/// index entries): the bounded key string.
pub fn id_key(id: &Bson) -> Vec<u8> {
    bounded(encode(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_keys_are_bounded_and_stay_distinct_and_prefix_free() {
        let a = id_key(&Bson::String("x".repeat(70_000)));
        let mut other = "x".repeat(69_999);
        other.push('y');
        let b = id_key(&Bson::String(other));
        assert_eq!(a.len(), BOUNDED_LEN);
        assert_eq!(b.len(), BOUNDED_LEN);
        assert_ne!(a, b);
        assert_eq!(a, id_key(&Bson::String("x".repeat(70_000))));
        let short = id_key(&Bson::String("x".repeat(100)));
        assert!(!a.starts_with(&short) && !short.starts_with(&a));
        assert_eq!(truncated(&a), Some(&a[..INLINE_MAX]));
        assert_eq!(truncated(&short), None);
    }
}
