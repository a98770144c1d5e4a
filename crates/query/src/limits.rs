//! MongoDB's size and depth limits, in one place, and an iterative check of raw BSON
//! against them.
//!
//! Every recursive algorithm in the server (BSON decoding, filter and expression parsing
//! and evaluation, comparison, projection, update paths) walks a structure whose depth is
//! bounded by one of these limits, checked before the recursion starts by code that does
//! not recurse itself. That is what keeps a hostile request from overflowing a stack.

use bson::raw::RawDocument;

/// Nesting depth a BSON object may have on the wire: MongoDB's
/// `BSONDepth::kDefaultMaxAllowableDepth` (`src/mongo/bson/bson_depth.h`). The top-level
/// document is depth 1... strictly, a document nested `n` levels below the top is at depth
/// `n`, and `n` may not reach this value.
pub const MAX_BSON_DEPTH: usize = 200;

/// Extra depth the server reserves for its own wrapping of user documents
/// (`BSONDepth::kExtraSystemDepthAllowance`).
pub const EXTRA_SYSTEM_DEPTH: usize = 20;

/// Nesting depth of a stored user document (`BSONDepth::getMaxDepthForUserStorage()` =
/// 200 - 20). Inserts and updates producing deeper documents fail with 15 Overflow.
pub const MAX_USER_STORAGE_DEPTH: usize = MAX_BSON_DEPTH - EXTRA_SYSTEM_DEPTH;

/// Depth of a match expression tree (`MatchExpressionParser`'s `kMaximumTreeDepth`,
/// `src/mongo/db/matcher/expression_parser.cpp`).
pub const MAX_MATCH_DEPTH: usize = 100;

/// Stages in one pipeline (`internalPipelineLengthLimit`, default 1000 in optimized builds;
/// `src/mongo/db/query/query_knobs.idl`).
pub const MAX_PIPELINE_LENGTH: usize = 1000;

/// Largest user document: `BSONObjMaxUserSize` (`src/mongo/bson/util/builder.h`).
pub const MAX_BSON_OBJECT_SIZE: usize = 16 * 1024 * 1024;

/// Largest object the server builds for itself (`BSONObjMaxInternalSize`): user size plus
/// 16 KiB of headroom, used for command replies.
pub const MAX_INTERNAL_OBJECT_SIZE: usize = MAX_BSON_OBJECT_SIZE + 16 * 1024;

/// Components of a dotted field path (`FieldRef::kMaxParts`? MongoDB bounds paths by the
/// BSON depth a result may reach; a path deeper than the storage depth can never name a
/// stored field, so it is refused up front).
pub const MAX_FIELD_PATH_PARTS: usize = MAX_USER_STORAGE_DEPTH;

pub use crate::raw_check::{RawCheckError, RawStats};

/// Validates every element of `bytes` as BSON, without recursion, and checks that no
/// document or array is nested `max_depth` or more levels deep (the top level is 1).
pub fn check_raw(bytes: &[u8], max_depth: usize) -> Result<RawStats, RawCheckError> {
    let doc = RawDocument::from_bytes(bytes).map_err(|e| RawCheckError::Invalid(e.to_string()))?;
    check_raw_document(doc, max_depth)
}

/// [`check_raw`] for a document already framed as a `RawDocument`.
pub fn check_raw_document(doc: &RawDocument, max_depth: usize) -> Result<RawStats, RawCheckError> {
    crate::raw_check::check(doc.as_bytes(), max_depth)
}

/// Nesting depth of a decoded document (1 for a flat one), computed without recursion.
pub fn depth_of(doc: &bson::Document) -> usize {
    use bson::Bson;
    let mut max = 1;
    let mut stack: Vec<(&Bson, usize)> = doc.values().map(|v| (v, 1)).collect();
    while let Some((v, d)) = stack.pop() {
        match v {
            Bson::Document(inner) => {
                max = max.max(d + 1);
                stack.extend(inner.values().map(|v| (v, d + 1)));
            }
            Bson::Array(items) => {
                max = max.max(d + 1);
                stack.extend(items.iter().map(|v| (v, d + 1)));
            }
            Bson::JavaScriptCodeWithScope(c) => {
                max = max.max(d + 1);
                stack.extend(c.scope.values().map(|v| (v, d + 1)));
            }
            _ => {}
        }
    }
    max
}

/// Nested documents `depth` levels deep as raw BSON: `{a: {a: ... {}}}`. Built iteratively;
/// for tests of the limits.
pub fn nested_bytes(depth: usize) -> Vec<u8> {
    // Innermost document first, then wrap: each level adds type byte, "a\0" and the
    // 4-byte length plus trailing 0 of the wrapper.
    let mut inner = vec![5u8, 0, 0, 0, 0];
    for _ in 1..depth {
        let len = 4 + 1 + 2 + inner.len() + 1;
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&(len as i32).to_le_bytes());
        out.push(0x03);
        out.extend_from_slice(b"a\0");
        out.extend_from_slice(&inner);
        out.push(0);
        inner = out;
    }
    inner
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_at_the_limit_passes_and_one_more_fails() {
        let ok = nested_bytes(MAX_BSON_DEPTH - 1);
        let s = check_raw(&ok, MAX_BSON_DEPTH).expect("depth 199 passes");
        assert_eq!(s.depth, MAX_BSON_DEPTH - 1);
        let deep = nested_bytes(MAX_BSON_DEPTH);
        assert_eq!(
            check_raw(&deep, MAX_BSON_DEPTH),
            Err(RawCheckError::TooDeep {
                limit: MAX_BSON_DEPTH
            })
        );
    }

    #[test]
    fn a_hundred_thousand_levels_are_refused_without_recursion() {
        let deep = nested_bytes(100_000);
        assert!(matches!(
            check_raw(&deep, MAX_BSON_DEPTH),
            Err(RawCheckError::TooDeep { .. })
        ));
    }

    #[test]
    fn decoded_depth_matches_raw_depth() {
        let bytes = nested_bytes(50);
        let doc: bson::Document = bson::from_slice(&bytes).unwrap();
        assert_eq!(depth_of(&doc), 50);
        assert_eq!(check_raw(&bytes, MAX_BSON_DEPTH).unwrap().depth, 50);
    }

    #[test]
    fn malformed_bytes_are_invalid_not_a_panic() {
        let mut b = nested_bytes(3);
        let n = b.len();
        b[n - 2] = 0x7f;
        assert!(matches!(
            check_raw(&b, MAX_BSON_DEPTH),
            Err(RawCheckError::Invalid(_))
        ));
    }
}
