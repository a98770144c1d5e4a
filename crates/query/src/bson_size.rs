//! Encoded BSON sizes computed without encoding (batch limits, bucket sizes).

use bson::{Bson, Document};

/// Encoded BSON size of a document, computed without encoding it.
pub fn bson_size(d: &Document) -> usize {
    5 + d
        .iter()
        .map(|(k, v)| element_size(k.len(), v))
        .sum::<usize>()
}

/// Encoded size of one element: type byte, name and its NUL, value.
pub fn element_size(name_len: usize, v: &Bson) -> usize {
    2 + name_len + value_size(v)
}

/// Length of array index `i` as an element name (`"0"`, `"1"`, ...).
pub fn index_key_len(mut i: usize) -> usize {
    let mut n = 1;
    while i >= 10 {
        i /= 10;
        n += 1;
    }
    n
}

/// Encoded size of a BSON value (without type byte and name).
pub fn value_size(v: &Bson) -> usize {
    match v {
        Bson::Double(_) | Bson::DateTime(_) | Bson::Timestamp(_) | Bson::Int64(_) => 8,
        Bson::Int32(_) => 4,
        Bson::Boolean(_) => 1,
        Bson::Decimal128(_) => 16,
        Bson::ObjectId(_) => 12,
        Bson::Null | Bson::Undefined | Bson::MinKey | Bson::MaxKey => 0,
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => 5 + s.len(),
        Bson::Document(d) => bson_size(d),
        Bson::Array(a) => {
            5 + a
                .iter()
                .enumerate()
                .map(|(i, x)| element_size(index_key_len(i), x))
                .sum::<usize>()
        }
        Bson::Binary(b) => {
            let old = b.subtype == bson::spec::BinarySubtype::BinaryOld;
            5 + b.bytes.len() + if old { 4 } else { 0 }
        }
        Bson::RegularExpression(r) => r.pattern.len() + r.options.len() + 2,
        Bson::JavaScriptCodeWithScope(c) => 4 + 5 + c.code.len() + bson_size(&c.scope),
        Bson::DbPointer(_) => {
            let mut d = Document::new();
            d.insert("", v.clone());
            let mut buf = Vec::new();
            d.to_writer(&mut buf).map(|_| buf.len() - 7).unwrap_or(0)
        }
    }
}
