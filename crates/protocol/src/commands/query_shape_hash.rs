//! `queryHash` and `planCacheKey` of an explain's `queryPlanner`: eight uppercase hex
//! digits, as mongod 7.0 prints them. `queryHash` hashes the query's shape — the filter with
//! its values left out (field paths and operators kept), the sort and the projection — so
//! queries that differ only in their values share it. `planCacheKey` also hashes the
//! indexes the planner could choose from (mongod adds what makes each index usable), so it
//! changes with them. The hash is FNV-1a (32 bits) of a canonical encoding: stable across
//! runs and servers, though not mongod's own numbers.

use bson::{Bson, Document};

fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= *b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The shape of a filter value: operators and field names kept, values replaced by `?`
/// (an array of conditions under `$and`/`$or`/`$nor` kept element by element).
fn encode_value(v: &Bson, out: &mut String) {
    match v {
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
            encode_filter(d, out)
        }
        _ => out.push('?'),
    }
}

fn encode_filter(d: &Document, out: &mut String) {
    out.push('{');
    for (k, v) in d {
        out.push_str(k);
        out.push(':');
        match (k.as_str(), v) {
            ("$and" | "$or" | "$nor", Bson::Array(items)) => {
                out.push('[');
                for item in items {
                    match item {
                        Bson::Document(c) => encode_filter(c, out),
                        _ => out.push('?'),
                    }
                    out.push(',');
                }
                out.push(']');
            }
            ("$elemMatch" | "$not", Bson::Document(c)) => encode_filter(c, out),
            _ => encode_value(v, out),
        }
        out.push(',');
    }
    out.push('}');
}

fn shape(filter: Option<&Document>, sort: Option<&Document>, proj: Option<&Document>) -> String {
    let mut s = String::from("q");
    encode_filter(filter.unwrap_or(&Document::new()), &mut s);
    s.push_str("|s");
    // A sort and a projection are part of the shape with their values.
    s.push_str(&format!("{:?}", sort.cloned().unwrap_or_default()));
    s.push_str("|p");
    s.push_str(&format!("{:?}", proj.cloned().unwrap_or_default()));
    s
}

/// `queryHash` of a filter, sort and projection.
pub fn query_hash(
    filter: Option<&Document>,
    sort: Option<&Document>,
    proj: Option<&Document>,
) -> String {
    format!("{:08X}", fnv1a(shape(filter, sort, proj).as_bytes()))
}

/// A `queryHash` or `planCacheKey` computed without a projection, extended by `proj`
/// (the shape of a find that projects).
pub fn with_projection(hash: &str, proj: &Document) -> String {
    format!("{:08X}", fnv1a(format!("{hash}|p{proj:?}").as_bytes()))
}

/// The field paths a filter reads (through `$and`/`$or`/`$nor`).
fn filter_paths(d: &Document, out: &mut Vec<String>) {
    for (k, v) in d {
        match (k.as_str(), v) {
            ("$and" | "$or" | "$nor", Bson::Array(items)) => {
                for item in items {
                    if let Bson::Document(c) = item {
                        filter_paths(c, out);
                    }
                }
            }
            (k, _) if !k.starts_with('$') => out.push(k.to_string()),
            _ => {}
        }
    }
}

/// `planCacheKey`: the shape plus the key patterns of the indexes on a path the filter or
/// sort reads (the indexes that could serve it; mongod likewise keys its plan cache by
/// what makes the indexes relevant to the query usable).
pub fn plan_cache_key(
    filter: Option<&Document>,
    sort: Option<&Document>,
    proj: Option<&Document>,
    indexes: &[Document],
) -> String {
    let mut paths = Vec::new();
    filter_paths(filter.unwrap_or(&Document::new()), &mut paths);
    paths.extend(sort.into_iter().flat_map(|s| s.keys().cloned()));
    let mut s = shape(filter, sort, proj);
    s.push_str("|i");
    for i in indexes
        .iter()
        .filter(|i| i.keys().any(|k| paths.contains(k)))
    {
        s.push_str(&format!("{i:?};"));
    }
    format!("{:08X}", fnv1a(s.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn equal_shapes_share_a_hash_and_different_shapes_differ() {
        let a = query_hash(Some(&doc! {"a": 1, "b": {"$gt": 5}}), None, None);
        let b = query_hash(Some(&doc! {"a": 7, "b": {"$gt": 9}}), None, None);
        let c = query_hash(Some(&doc! {"a": 1, "b": {"$lt": 5}}), None, None);
        let d = query_hash(Some(&doc! {"a": 1}), Some(&doc! {"a": 1}), None);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(query_hash(Some(&doc! {"a": 1}), None, None), d);
        assert_eq!(a.len(), 8);
        assert!(a
            .chars()
            .all(|ch| ch.is_ascii_hexdigit() && !ch.is_ascii_lowercase()));
    }
}
