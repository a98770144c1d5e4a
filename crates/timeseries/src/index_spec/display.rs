//! MongoDB's `BSONObj::toString()` rendering of documents and elements, used
//! inside error messages (`{ a: 1, b: "x" }`, `a: "hashed"`).

use bson::{Bson, Document};

/// Renders a document the way MongoDB's `BSONObj::toString()` does:
/// `{}` when empty, otherwise `{ k: v, k2: v2 }`.
pub fn doc_to_string(d: &Document) -> String {
    if d.is_empty() {
        return "{}".to_string();
    }
    let fields: Vec<String> = d.iter().map(|(k, v)| element_to_string(k, v)).collect();
    format!("{{ {} }}", fields.join(", "))
}

/// Renders one element (`name: value`) like `BSONElement::toString()`.
pub fn element_to_string(name: &str, v: &Bson) -> String {
    format!("{name}: {}", value_to_string(v))
}

/// Renders a value like MongoDB's `BSONElement::toString(false)`.
pub fn value_to_string(v: &Bson) -> String {
    match v {
        Bson::Document(d) => doc_to_string(d),
        Bson::Array(a) => {
            if a.is_empty() {
                "[]".to_string()
            } else {
                let items: Vec<String> = a.iter().map(value_to_string).collect();
                format!("[ {} ]", items.join(", "))
            }
        }
        Bson::String(s) => format!("\"{s}\""),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Double(d) => double_to_string(*d),
        Bson::Decimal128(d) => format!("NumberDecimal(\"{d}\")"),
        Bson::Boolean(b) => b.to_string(),
        Bson::Null => "null".to_string(),
        Bson::Undefined => "undefined".to_string(),
        Bson::DateTime(dt) => format!("new Date({})", dt.timestamp_millis()),
        Bson::ObjectId(oid) => format!("ObjectId('{}')", oid.to_hex()),
        Bson::RegularExpression(r) => format!("/{}/{}", r.pattern, r.options),
        Bson::Timestamp(ts) => format!("Timestamp({}, {})", ts.time, ts.increment),
        Bson::MinKey => "MinKey".to_string(),
        Bson::MaxKey => "MaxKey".to_string(),
        Bson::Binary(b) => {
            let hex: String = b.bytes.iter().map(|x| format!("{x:02X}")).collect();
            format!("BinData({}, {hex})", u8::from(b.subtype))
        }
        Bson::JavaScriptCode(c) => c.clone(),
        Bson::JavaScriptCodeWithScope(c) => c.code.clone(),
        Bson::Symbol(s) => format!("\"{s}\""),
        Bson::DbPointer(_) => "DBRef(...)".to_string(),
    }
}

/// Doubles print with a trailing `.0` when integral (`1.0`), like the
/// server's number formatting; NaN and infinities print as `nan` / `inf`.
fn double_to_string(d: f64) -> String {
    if d.is_nan() {
        "nan".to_string()
    } else if d.is_infinite() {
        if d > 0.0 { "inf" } else { "-inf" }.to_string()
    } else if d.fract() == 0.0 && d.abs() < 1e16 {
        format!("{d:.1}")
    } else {
        format!("{d}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn renders_like_bson_obj_to_string() {
        assert_eq!(doc_to_string(&doc! {}), "{}");
        assert_eq!(
            doc_to_string(&doc! {"x": "hashed", "y": 1, "z": -1.0, "w": 1.5}),
            "{ x: \"hashed\", y: 1, z: -1.0, w: 1.5 }"
        );
        assert_eq!(
            doc_to_string(&doc! {"a": {"b": [1, 2]}, "e": [], "n": null}),
            "{ a: { b: [ 1, 2 ] }, e: [], n: null }"
        );
        assert_eq!(element_to_string("tm", &Bson::Boolean(true)), "tm: true");
        assert_eq!(
            value_to_string(&Bson::DateTime(bson::DateTime::from_millis(5))),
            "new Date(5)"
        );
    }
}
