//! The values of a few paths of a stored document, found in one walk of its BSON bytes
//! with nothing built: each path's element is located (its type and value bytes), to be
//! keyed on or converted one at a time (as the `$group` of `pipeline/raw_group.rs` does).
//!
//! A path that goes through an array (`a.b` where `a` is an array) has no single element:
//! it is reported as such, and the caller reads that document the general way. So are
//! malformed bytes and a key repeated before every path is found (the walk stops there,
//! so a key repeated after that point is read at its first place).

use crate::raw_check::i32_at;
use crate::raw_pick::{value, value_end};
use bson::Bson;

/// Where a path was found in a document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Found {
    Missing,
    /// The element: type byte, and the offsets of its type byte, value and end.
    Value {
        kind: u8,
        start: usize,
        at: usize,
        end: usize,
    },
    /// The path passes through an array.
    ThroughArray,
}

#[derive(Debug, Clone, Default)]
struct Node {
    children: Vec<(String, Node)>,
    slot: Option<usize>,
}

/// Paths, each with its slot (its position in [`PathSlots::new`]'s list).
#[derive(Debug, Clone)]
pub struct PathSlots {
    root: Node,
    count: usize,
}

impl PathSlots {
    pub fn new(paths: &[String]) -> PathSlots {
        let mut root = Node::default();
        for (slot, path) in paths.iter().enumerate() {
            let mut node = &mut root;
            for part in path.split('.') {
                let at = match node.children.iter().position(|(k, _)| k == part) {
                    Some(at) => at,
                    None => {
                        node.children.push((part.to_string(), Node::default()));
                        node.children.len() - 1
                    }
                };
                node = &mut node.children[at].1;
            }
            node.slot = Some(slot);
        }
        PathSlots {
            root,
            count: paths.len(),
        }
    }

    /// Fills `out` (resized to the paths) with where each path is in the document `b`;
    /// false when `b` is malformed or repeats a key on a path.
    pub fn find(&self, b: &[u8], out: &mut Vec<Found>) -> bool {
        out.clear();
        out.resize(self.count, Found::Missing);
        let whole = i32_at(b, 0, b.len())
            .ok()
            .and_then(|n| usize::try_from(n).ok());
        let mut left = self.count;
        whole == Some(b.len()) && walk(&self.root, b, 0, b.len(), out, &mut left).is_some()
    }
}

/// The value bytes of `f` in `b` (empty when missing).
pub fn bytes(b: &[u8], f: Found) -> &[u8] {
    match f {
        Found::Value { at, end, .. } => b.get(at..end).unwrap_or_default(),
        _ => &[],
    }
}

/// The value of `f` in `b` (`None` when missing or not convertible).
pub fn to_bson(b: &[u8], f: Found) -> Option<Bson> {
    match f {
        Found::Value {
            kind,
            start,
            at,
            end,
        } => value(b, kind, start, at, end),
        _ => None,
    }
}

fn mark_arrays(node: &Node, out: &mut [Found], left: &mut usize) {
    for (_, child) in &node.children {
        if let Some(s) = child.slot {
            out[s] = Found::ThroughArray;
            *left -= 1;
        }
        mark_arrays(child, out, left);
    }
}

/// Finds the slots of `node`'s paths in the document at `b[at..]`; stops once every
/// slot (`left` of them still unset) is found.
fn walk(
    node: &Node,
    b: &[u8],
    at: usize,
    limit: usize,
    out: &mut [Found],
    left: &mut usize,
) -> Option<()> {
    let len = usize::try_from(i32_at(b, at, limit).ok()?).ok()?;
    let last = at.checked_add(len)?.checked_sub(1)?;
    if len < 5 || last >= limit || b[last] != 0 {
        return None;
    }
    let mut i = at + 4;
    while i < last && *left > 0 {
        let kind = b[i];
        let key_end = i + 1 + b[i + 1..last].iter().position(|&c| c == 0)? + 1;
        let end = value_end(b, kind, key_end, last)?;
        let key = &b[i + 1..key_end - 1];
        if let Some((_, child)) = node.children.iter().find(|(k, _)| k.as_bytes() == key) {
            if let Some(s) = child.slot {
                if out[s] != Found::Missing {
                    return None;
                }
                out[s] = Found::Value {
                    kind,
                    start: i,
                    at: key_end,
                    end,
                };
                *left -= 1;
            }
            if !child.children.is_empty() {
                match kind {
                    0x03 => walk(child, b, key_end, end, out, left)?,
                    0x04 => mark_arrays(child, out, left),
                    _ => {}
                }
            }
        }
        i = end;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn found(d: &bson::Document, paths: &[&str]) -> Option<Vec<Option<Bson>>> {
        let b = bson::to_vec(d).expect("encode");
        let slots = PathSlots::new(&paths.iter().map(|p| p.to_string()).collect::<Vec<_>>());
        let mut out = Vec::new();
        if !slots.find(&b, &mut out) {
            return None;
        }
        Some(
            out.iter()
                .map(|f| match f {
                    Found::ThroughArray => Some(Bson::String("<array>".into())),
                    f => to_bson(&b, *f),
                })
                .collect(),
        )
    }

    #[test]
    fn paths_find_their_values_nested_missing_or_through_arrays() {
        let d = doc! {"t": 1.5, "tags": {"host": "h", "n": {"x": 1}}, "arr": [{"b": 1}], "s": 5};
        assert_eq!(
            found(
                &d,
                &["tags.host", "t", "tags.n.x", "arr.b", "s.z", "none", "tags"]
            ),
            Some(vec![
                Some(Bson::String("h".into())),
                Some(Bson::Double(1.5)),
                Some(Bson::Int32(1)),
                Some(Bson::String("<array>".into())),
                None,
                None,
                Some(Bson::Document(doc! {"host": "h", "n": {"x": 1}})),
            ])
        );
    }

    #[test]
    fn repeated_keys_and_damaged_bytes_are_refused() {
        let mut b = bson::to_vec(&doc! {"a": 1, "b": 2}).expect("encode");
        // Rename `b` to `a`: the document now repeats `a`.
        let at = b.iter().position(|&c| c == b'b').expect("key");
        b[at] = b'a';
        // Refused while a path is still sought (`c` is never found)...
        let slots = PathSlots::new(&["a".to_string(), "c".to_string()]);
        let mut out = Vec::new();
        assert!(!slots.find(&b, &mut out));
        // ...and read at its first place once every path is found.
        let first = PathSlots::new(&["a".to_string()]);
        assert!(first.find(&b, &mut out));
        assert_eq!(to_bson(&b, out[0]), Some(Bson::Int32(1)));
        let good = bson::to_vec(&doc! {"a": "xyz"}).expect("encode");
        for cut in 0..good.len() {
            assert!(!slots.find(&good[..cut], &mut out), "cut at {cut}");
        }
        assert!(slots.find(&good, &mut out));
    }
}
