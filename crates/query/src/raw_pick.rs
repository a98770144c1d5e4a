//! Building only the parts of a stored document a read needs, straight from its bytes:
//! [`FieldTree`] names the paths; [`picked_document`] walks the BSON once, steps over
//! the elements it does not name by their lengths (bounds-checked, nothing else
//! decoded), and converts only the named ones (decision 0016).
//!
//! Stored documents were checked whole when written; this walk checks what it reads
//! (lengths against their document, and every converted value), so damaged bytes give
//! `None` or a document without the damaged part, never a panic.

use crate::raw_check::{cstring, fixed, i32_at};
use bson::{Bson, Document, RawDocument};
use std::collections::BTreeMap;

/// The parts of documents a read needs: paths (`a`, `a.b`) as a tree, where a path read
/// whole ends a branch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldTree {
    children: BTreeMap<String, FieldTree>,
    whole: bool,
}

impl FieldTree {
    /// The tree of `paths`.
    pub fn from_paths<'a>(paths: impl IntoIterator<Item = &'a str>) -> FieldTree {
        let mut root = FieldTree::default();
        for path in paths {
            let mut node = &mut root;
            for part in path.split('.') {
                if node.whole {
                    break;
                }
                node = node.children.entry(part.to_string()).or_default();
            }
            node.whole = true;
            node.children.clear();
        }
        root
    }

    /// The subtree named by the key bytes `key` (a name here is UTF-8, so a key equal to
    /// one is too; other keys are never decoded).
    fn child(&self, key: &[u8]) -> Option<(&String, &FieldTree)> {
        self.children.iter().find(|(k, _)| k.as_bytes() == key)
    }

    /// The document at `b[at..]`, lying within `limit`, reduced to this tree's parts: a
    /// field read whole, or any value that is not a document (an array included), is
    /// converted as it is; a document keeps only the subfields the tree names.
    fn pick(&self, b: &[u8], at: usize, limit: usize) -> Option<Document> {
        let len = usize::try_from(i32_at(b, at, limit).ok()?).ok()?;
        let last = at.checked_add(len)?.checked_sub(1)?;
        if len < 5 || last >= limit || b[last] != 0 {
            return None;
        }
        let mut out = Document::new();
        let mut i = at + 4;
        while i < last {
            let kind = b[i];
            let key_end = i + 1 + b[i + 1..last].iter().position(|&c| c == 0)? + 1;
            let value_end = value_end(b, kind, key_end, last)?;
            if let Some((name, node)) = self.child(&b[i + 1..key_end - 1]) {
                let value = match kind {
                    0x03 if !node.whole => Bson::Document(node.pick(b, key_end, value_end)?),
                    _ => value(b, kind, i, key_end, value_end)?,
                };
                out.insert(name.clone(), value);
            }
            i = value_end;
        }
        Some(out)
    }
}

/// The offset after the value of type `kind` at `at`, from its length alone; `None`
/// when it would pass `end` or the type is unknown.
pub(crate) fn value_end(b: &[u8], kind: u8, at: usize, end: usize) -> Option<usize> {
    let sized = |extra: usize, min: usize| {
        let n = usize::try_from(i32_at(b, at, end).ok()?).ok()?;
        (n >= min).then_some(())?;
        fixed(at, n.checked_add(extra)?, end).ok()
    };
    match kind {
        0x01 | 0x09 | 0x11 | 0x12 => fixed(at, 8, end).ok(),
        0x10 => fixed(at, 4, end).ok(),
        0x07 => fixed(at, 12, end).ok(),
        0x13 => fixed(at, 16, end).ok(),
        0x08 => fixed(at, 1, end).ok(),
        0x06 | 0x0A | 0x7F | 0xFF => Some(at),
        0x02 | 0x0D | 0x0E => sized(4, 1),
        0x03 | 0x04 | 0x0F => sized(0, 5),
        0x05 => sized(5, 0),
        0x0B => cstring(b, cstring(b, at, end).ok()?, end).ok(),
        0x0C => fixed(sized(4, 1)?, 12, end).ok(),
        _ => None,
    }
}

/// The value of the element at `b[start..end]` (type `kind`, value from `at`), checked
/// as decoding checks it.
pub(crate) fn value(b: &[u8], kind: u8, start: usize, at: usize, end: usize) -> Option<Bson> {
    let v = &b[at..end];
    let eight = || <[u8; 8]>::try_from(v).ok();
    Some(match kind {
        0x01 => Bson::Double(f64::from_le_bytes(eight()?)),
        0x09 => Bson::DateTime(bson::DateTime::from_millis(i64::from_le_bytes(eight()?))),
        0x12 => Bson::Int64(i64::from_le_bytes(eight()?)),
        0x10 => Bson::Int32(i32::from_le_bytes(<[u8; 4]>::try_from(v).ok()?)),
        0x0A => Bson::Null,
        0x08 => match v {
            [0] => Bson::Boolean(false),
            [1] => Bson::Boolean(true),
            _ => return None,
        },
        0x02 => match v.split_last() {
            Some((0, text)) => Bson::String(std::str::from_utf8(text.get(4..)?).ok()?.to_string()),
            _ => return None,
        },
        0x07 => Bson::ObjectId(bson::oid::ObjectId::from_bytes(v.try_into().ok()?)),
        0x03 => Bson::Document(Document::try_from(RawDocument::from_bytes(v).ok()?).ok()?),
        0x04 => Bson::Array(
            RawDocument::from_bytes(v)
                .ok()?
                .iter()
                .map(|e| Bson::try_from(e.ok()?.1).ok())
                .collect::<Option<Vec<_>>>()?,
        ),
        // The rarer types: the element alone, as a document the raw reader decodes.
        _ => {
            let len = i32::try_from(end - start + 5).ok()?;
            let mut one = Vec::with_capacity(end - start + 5);
            one.extend_from_slice(&len.to_le_bytes());
            one.extend_from_slice(&b[start..end]);
            one.push(0);
            let raw = RawDocument::from_bytes(&one).ok()?;
            let (_, value) = raw.iter().next()?.ok()?;
            Bson::try_from(value).ok()?
        }
    })
}

/// The parts of the BSON document `b` that `tree` names, as a document in `b`'s order
/// (a repeated key keeps its first place and last value, as decoding does). `None`
/// when `b`, or an element read on the way, is malformed.
pub fn picked_document(b: &[u8], tree: &FieldTree) -> Option<Document> {
    if tree.children.is_empty() {
        return RawDocument::from_bytes(b).ok().map(|_| Document::new());
    }
    let out = tree.pick(b, 0, b.len())?;
    // The document is all of `b`.
    (usize::try_from(i32_at(b, 0, b.len()).ok()?).ok()? == b.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn picked_paths_keep_only_the_named_subfields_of_documents() {
        let d = doc! {"t": 1, "tags": {"host": "h", "region": "r", "n": {"x": 1, "y": 2}},
        "arr": [{"b": 1, "c": 2}], "s": "x"};
        let bytes = bson::to_vec(&d).expect("encode");
        let tree = FieldTree::from_paths(["tags.host", "tags.n.y", "arr.b", "s.z", "t"]);
        assert_eq!(
            picked_document(&bytes, &tree),
            Some(
                doc! {"t": 1, "tags": {"host": "h", "n": {"y": 2}}, "arr": [{"b": 1, "c": 2}], "s": "x"}
            )
        );
        // A path read whole wins over its subpaths, in any order.
        let tree = FieldTree::from_paths(["tags.host", "tags"]);
        assert_eq!(
            picked_document(&bytes, &tree),
            Some(doc! {"tags": d.get_document("tags").unwrap().clone()})
        );
        let tree = FieldTree::from_paths(["tags", "tags.host"]);
        assert_eq!(
            picked_document(&bytes, &tree),
            Some(doc! {"tags": d.get_document("tags").unwrap().clone()})
        );
        assert_eq!(
            picked_document(&bytes, &FieldTree::default()),
            Some(Document::new())
        );
    }

    #[test]
    fn picked_fields_of_every_type_equal_the_decoded_document_narrowed_to_them() {
        let d = doc! {
            "_id": 1, "d": 1.5, "s": "héllo", "o": {"a": 1, "b": [1, "x"]}, "a": [true, {"z": 1}],
            "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2] },
            "code": Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
                code: "f()".into(), scope: doc! {"x": 1} }),
            "js": Bson::JavaScriptCode("g()".into()),
            "re": bson::Regex { pattern: "a.b".into(), options: "i".into() },
            "n": null, "t": bson::DateTime::from_millis(5), "i64": 7i64, "f": false,
            "ts": bson::Timestamp { time: 3, increment: 4 }, "oid": bson::oid::ObjectId::new(),
            "dec": "1.25".parse::<bson::Decimal128>().unwrap(), "min": Bson::MinKey,
            "max": Bson::MaxKey, "u": Bson::Undefined, "sym": Bson::Symbol("q".into()),
        };
        let bytes = bson::to_vec(&d).expect("encode");
        let keys: Vec<String> = d.keys().cloned().collect();
        for (i, k) in keys.iter().enumerate() {
            for other in [None, Some(&keys[(i + 7) % keys.len()])] {
                let wanted: Vec<&str> = std::iter::once(k.as_str())
                    .chain(other.map(String::as_str))
                    .collect();
                let tree = FieldTree::from_paths(wanted.iter().copied());
                let expected: Document = d
                    .iter()
                    .filter(|(k, _)| wanted.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(picked_document(&bytes, &tree), Some(expected), "{wanted:?}");
            }
        }
        let all = FieldTree::from_paths(keys.iter().map(String::as_str));
        assert_eq!(picked_document(&bytes, &all), Some(d));
    }

    #[test]
    fn picking_from_damaged_bytes_never_panics() {
        let bytes = bson::to_vec(&doc! {"a": 1, "b": {"c": "x"}, "s": "long string", "r": [1.5]})
            .expect("encode");
        let tree = FieldTree::from_paths(["b.c", "s", "r"]);
        for i in 0..bytes.len() {
            for v in [0u8, 1, 0x7F, 0x80, 0xFF] {
                let mut b = bytes.clone();
                b[i] = v;
                let _ = picked_document(&b, &tree);
            }
            assert_eq!(picked_document(&bytes[..i], &tree), None);
        }
    }
}
