//! JSON straight to BSON: `serde_json` drives a visitor that appends each value to a
//! `RawDocumentBuf`, with no `serde_json::Value` tree in between. An object whose first key
//! starts with `$` (Extended JSON: `$date`, `$numberLong`, `$oid`, ...) is collected as a
//! `Value` and read by `bson`'s Extended JSON conversion, so that conversion stays the
//! reference for what every Extended JSON form means; plain numbers follow it too (an
//! integer is int32 when it fits, else int64; past int64, or with a fraction, a double).

use bson::oid::ObjectId;
use bson::{Bson, RawArrayBuf, RawBson, RawDocumentBuf};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// A top-level JSON value read as a document (`ADD_ID`: given a new ObjectId `_id` first
/// when it has none), or why it is not one (a value that is not
/// an object, or Extended JSON that does not convert): such a value is still consumed
/// whole, so the next one reads from where it ends.
pub struct RawRow<const ADD_ID: bool>(pub Result<RawDocumentBuf, String>);

impl<'de, const ADD_ID: bool> de::Deserialize<'de> for RawRow<ADD_ID> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawRow<ADD_ID>, D::Error> {
        Ok(RawRow(
            match d.deserialize_any(ValueVisitor { top: ADD_ID })? {
                Ok(RawBson::Document(doc)) => Ok(doc),
                Ok(other) => Err(format!(
                    "expected a document, found {:?}",
                    other.element_type()
                )),
                Err(e) => Err(e),
            },
        ))
    }
}

/// A value, or the first conversion error inside it.
type Converted = Result<RawBson, String>;

struct RawValue(Converted);

impl<'de> de::Deserialize<'de> for RawValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawValue, D::Error> {
        d.deserialize_any(ValueVisitor { top: false }).map(RawValue)
    }
}

/// `top`: the value is a row to insert, which gets a new ObjectId `_id` first when it has
/// none (as a driver gives one, but without the driver copying the document to prepend it).
struct ValueVisitor {
    top: bool,
}

fn int(i: i64) -> RawBson {
    match i32::try_from(i) {
        Ok(small) => RawBson::Int32(small),
        Err(_) => RawBson::Int64(i),
    }
}

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Converted;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Converted, E> {
        Ok(Ok(RawBson::Boolean(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Converted, E> {
        Ok(Ok(int(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Converted, E> {
        Ok(Ok(i64::try_from(v).map_or(RawBson::Double(v as f64), int)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Converted, E> {
        Ok(Ok(RawBson::Double(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Converted, E> {
        Ok(Ok(RawBson::String(v.to_string())))
    }

    fn visit_string<E>(self, v: String) -> Result<Converted, E> {
        Ok(Ok(RawBson::String(v)))
    }

    fn visit_unit<E>(self) -> Result<Converted, E> {
        Ok(Ok(RawBson::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Converted, A::Error> {
        let (mut out, mut failed) = (RawArrayBuf::new(), None);
        while let Some(RawValue(v)) = seq.next_element()? {
            match v {
                Ok(v) if failed.is_none() => out.push(v),
                Err(e) if failed.is_none() => failed = Some(e),
                _ => {}
            }
        }
        Ok(failed.map_or(Ok(RawBson::Array(out)), Err))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Converted, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Ok(Ok(RawBson::Document(RawDocumentBuf::new())));
        };
        if first.starts_with('$') {
            let mut m = serde_json::Map::new();
            m.insert(first, map.next_value::<Value>()?);
            while let Some((k, v)) = map.next_entry::<String, Value>()? {
                m.insert(k, v);
            }
            return Ok(Bson::try_from(Value::Object(m))
                .map_err(|e| format!("invalid Extended JSON: {e}"))
                .and_then(|b| RawBson::try_from(b).map_err(|e| e.to_string())));
        }
        let (mut doc, mut failed) = (RawDocumentBuf::new(), None);
        let generated_id = self.top && first != "_id";
        if generated_id {
            doc.append("_id", ObjectId::new());
        }
        let mut late_id = false;
        let mut key = Some(first);
        while let Some(k) = key
            .take()
            .map(Ok)
            .or_else(|| map.next_key::<String>().transpose())
        {
            let k = k?;
            late_id |= generated_id && k == "_id";
            let RawValue(v) = map.next_value()?;
            match v {
                Ok(v) if failed.is_none() => doc.append(k, v),
                Err(e) if failed.is_none() => failed = Some(e),
                _ => {}
            }
        }
        if late_id {
            // The row had its own _id after other fields: drop the generated one.
            let mut own = RawDocumentBuf::new();
            for element in doc.iter().skip(1) {
                match element {
                    Ok((k, v)) => own.append_ref(k, v),
                    Err(e) => return Ok(Err(e.to_string())),
                }
            }
            doc = own;
        }
        Ok(failed.map_or(Ok(RawBson::Document(doc)), Err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn parse(text: &str) -> Result<bson::Document, String> {
        let RawRow::<true>(raw) = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut d = raw?.to_document().map_err(|e| e.to_string())?;
        // A generated _id comes first; checked apart.
        if d.get_object_id("_id").is_ok() && !text.contains("\"_id\"") {
            d.remove("_id");
        }
        Ok(d)
    }

    #[test]
    fn plain_json_and_extended_json_give_what_bson_conversion_gives() {
        let text = r#"{"i": 1, "l": 3000000000, "big": 18446744073709551615, "d": 1.5, "s": "x", "n": null,
            "b": true, "a": [1, {"$numberLong": "2"}, {"k": "v"}], "t": {"$date": "2020-01-02T00:00:00Z"},
            "m": {"o": {"$oid": "5f0000000000000000000001"}, "z": {}}}"#;
        let via_bson = match Bson::try_from(serde_json::from_str::<Value>(text).unwrap_or_default())
        {
            Ok(Bson::Document(d)) => d,
            other => panic!("{other:?}"),
        };
        assert_eq!(parse(text), Ok(via_bson));
    }

    #[test]
    fn a_row_without_id_gets_one_first_and_a_row_with_one_keeps_it() {
        let RawRow::<true>(raw) =
            serde_json::from_str(r#"{"a": 1}"#).unwrap_or(RawRow(Err(String::new())));
        let d = raw
            .and_then(|r| r.to_document().map_err(|e| e.to_string()))
            .unwrap_or_default();
        assert_eq!(d.keys().collect::<Vec<_>>(), ["_id", "a"]);
        assert!(d.get_object_id("_id").is_ok());
        for text in [r#"{"_id": 7, "a": 1}"#, r#"{"a": 1, "_id": 7}"#] {
            let RawRow::<true>(raw) =
                serde_json::from_str(text).unwrap_or(RawRow(Err(String::new())));
            let d = raw
                .and_then(|r| r.to_document().map_err(|e| e.to_string()))
                .unwrap_or_default();
            assert_eq!(d.get_i32("_id"), Ok(7), "{text}");
            assert_eq!(d.len(), 2, "{text}");
        }
    }

    #[test]
    fn field_order_is_kept_and_a_non_object_is_refused() {
        let got = parse(r#"{"z": 1, "a": 2, "m": 3}"#).unwrap_or_default();
        assert_eq!(got, doc! {"z": 1, "a": 2, "m": 3});
        assert_eq!(got.keys().collect::<Vec<_>>(), ["z", "a", "m"]);
        assert!(parse("[1, 2]").is_err_and(|e| e.contains("expected a document")));
    }
}
