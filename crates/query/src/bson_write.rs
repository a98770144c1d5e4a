//! Writes a `bson::Document` as BSON bytes directly into a buffer reserved to its
//! exact size (`hourglass_query::bson_size`). Replies can hold many megabytes of
//! documents; the bson crate's serde serializer grows its buffer step by step and is
//! several times slower. Property-tested against `bson::to_vec`.

use bson::spec::{BinarySubtype, ElementType};
use bson::{Bson, Document};

/// The BSON bytes of `doc` appended to `out`.
pub fn write_document(doc: &Document, out: &mut Vec<u8>) -> Result<(), String> {
    write_len_prefixed(out, |out| {
        for (k, v) in doc {
            write_element(k, v, out)?;
        }
        Ok(())
    })
}

/// A document or array body: its length, the elements `elements` writes, the final NUL.
pub fn write_len_prefixed(
    out: &mut Vec<u8>,
    elements: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
) -> Result<(), String> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    elements(out)?;
    out.push(0);
    patch_len(out, start)
}

fn patch_len(out: &mut [u8], start: usize) -> Result<(), String> {
    let len = i32::try_from(out.len() - start).map_err(|_| "document too large".to_string())?;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    Ok(())
}

/// A key or regex string: its bytes and a NUL (a NUL inside it is refused).
pub fn write_cstring(s: &str, out: &mut Vec<u8>) -> Result<(), String> {
    if s.as_bytes().contains(&0) {
        return Err(format!("key contains an interior null byte: {s:?}"));
    }
    out.extend_from_slice(s.as_bytes());
    out.push(0);
    Ok(())
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&((s.len() + 1) as i32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

pub fn write_element(key: &str, v: &Bson, out: &mut Vec<u8>) -> Result<(), String> {
    write_header(v.element_type(), key, out)?;
    write_value(v, out)
}

/// An element's type byte and name; its value follows.
pub fn write_header(t: ElementType, key: &str, out: &mut Vec<u8>) -> Result<(), String> {
    out.push(t as u8);
    write_cstring(key, out)
}

/// The bytes of a value after its element's type byte and name.
pub fn write_value(v: &Bson, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Bson::Double(d) => out.extend_from_slice(&d.to_le_bytes()),
        Bson::String(s) | Bson::JavaScriptCode(s) | Bson::Symbol(s) => write_string(s, out),
        Bson::Document(d) => write_document(d, out)?,
        Bson::Array(a) => write_len_prefixed(out, |out| {
            let mut key = itoa_buf();
            for (i, x) in a.iter().enumerate() {
                write_element(index_key(i, &mut key), x, out)?;
            }
            Ok(())
        })?,
        Bson::Binary(b) => {
            let old = b.subtype == BinarySubtype::BinaryOld;
            let len = if old {
                b.bytes.len() + 4
            } else {
                b.bytes.len()
            };
            out.extend_from_slice(&(len as i32).to_le_bytes());
            out.push(u8::from(b.subtype));
            if old {
                out.extend_from_slice(&(b.bytes.len() as i32).to_le_bytes());
            }
            out.extend_from_slice(&b.bytes);
        }
        Bson::Undefined | Bson::Null | Bson::MinKey | Bson::MaxKey => {}
        Bson::ObjectId(o) => out.extend_from_slice(&o.bytes()),
        Bson::Boolean(b) => out.push(u8::from(*b)),
        Bson::DateTime(d) => out.extend_from_slice(&d.timestamp_millis().to_le_bytes()),
        Bson::RegularExpression(r) => {
            write_cstring(&r.pattern, out)?;
            // MongoDB requires regex options in alphabetical order.
            let mut opts: Vec<char> = r.options.chars().collect();
            opts.sort_unstable();
            write_cstring(&opts.into_iter().collect::<String>(), out)?;
        }
        Bson::JavaScriptCodeWithScope(c) => {
            let start = out.len();
            out.extend_from_slice(&[0; 4]);
            write_string(&c.code, out);
            write_document(&c.scope, out)?;
            patch_len(out, start)?;
        }
        Bson::Int32(i) => out.extend_from_slice(&i.to_le_bytes()),
        Bson::Timestamp(t) => {
            out.extend_from_slice(&t.increment.to_le_bytes());
            out.extend_from_slice(&t.time.to_le_bytes());
        }
        Bson::Int64(i) => out.extend_from_slice(&i.to_le_bytes()),
        Bson::Decimal128(d) => out.extend_from_slice(&d.bytes()),
        Bson::DbPointer(_) => {
            // Fields are private to the bson crate: let it encode this rare value.
            let mut d = Document::new();
            d.insert("", v.clone());
            let bytes = bson::to_vec(&d).map_err(|e| e.to_string())?;
            // {"": v}: 4-byte length, type byte, "" NUL, value, final NUL.
            out.extend_from_slice(&bytes[6..bytes.len() - 1]);
        }
    }
    Ok(())
}

fn itoa_buf() -> String {
    String::with_capacity(8)
}

/// Array index `i` as an element name, written into `buf`.
pub fn index_key(i: usize, buf: &mut String) -> &str {
    use std::fmt::Write;
    buf.clear();
    let _ = write!(buf, "{i}");
    buf.as_str()
}

/// The BSON bytes of `doc` in a buffer of exactly the right size.
pub fn to_vec(doc: &Document) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(crate::bson_size::bson_size(doc));
    write_document(doc, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, Binary, DateTime, Decimal128, Regex, Timestamp};
    use proptest::prelude::*;

    #[test]
    fn every_type_encodes_like_the_bson_crate() {
        let d = doc! {
            "d": 1.5, "s": "x", "doc": {"a": [1, "b", {"c": null}]}, "arr": [],
            "bin": Binary {subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3]},
            "old": Binary {subtype: BinarySubtype::BinaryOld, bytes: vec![9]},
            "u": Bson::Undefined, "oid": ObjectId::new(), "t": true, "date": DateTime::from_millis(-5),
            "n": null, "re": Regex {pattern: "a.*".into(), options: "xi".into()},
            "js": Bson::JavaScriptCode("f()".into()),
            "jss": Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {code: "g".into(), scope: doc! {"x": 1}}),
            "i": 7, "ts": Timestamp {time: 3, increment: 4}, "l": 8i64,
            "dec": Decimal128::from_bytes([7; 16]), "sym": Bson::Symbol("s".into()),
            "min": Bson::MinKey, "max": Bson::MaxKey,
        };
        assert_eq!(to_vec(&d).unwrap(), bson::to_vec(&d).unwrap());
        assert!(to_vec(&doc! {"a\u{0}b": 1}).is_err());
    }

    fn leaf() -> impl Strategy<Value = Bson> {
        prop_oneof![
            any::<f64>().prop_map(Bson::Double),
            any::<i32>().prop_map(Bson::Int32),
            any::<i64>().prop_map(Bson::Int64),
            "[a-z\u{e9}]{0,6}".prop_map(Bson::String),
            any::<bool>().prop_map(Bson::Boolean),
            any::<i64>().prop_map(|m| Bson::DateTime(DateTime::from_millis(m))),
            Just(Bson::Null),
        ]
    }

    fn value() -> impl Strategy<Value = Bson> {
        leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
                prop::collection::vec(("[a-z]{1,3}", inner), 0..4)
                    .prop_map(|kv| Bson::Document(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn matches_the_bson_crate(kv in prop::collection::vec(("[a-z]{1,4}", value()), 0..6)) {
            let d: Document = kv.into_iter().collect();
            prop_assert_eq!(to_vec(&d).unwrap(), bson::to_vec(&d).unwrap());
            prop_assert_eq!(to_vec(&d).unwrap().len(), crate::bson_size::bson_size(&d));
        }
    }
}
