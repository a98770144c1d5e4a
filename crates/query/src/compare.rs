//! MongoDB's total order over BSON values.
//!
//! Values of different types are ordered by their canonical type rank
//! (MinKey < Null < Numbers < Strings < Objects < Arrays < BinData < ObjectId <
//! Boolean < Date < Timestamp < Regex < DBPointer < JavaScript < MaxKey).
//! Numbers of all numeric types compare by value; NaN sorts below all numbers.

use std::cmp::Ordering;

use bson::{Bson, Document};

use crate::num::Num;

/// Canonical type rank used to order values of different BSON types.
pub fn canonical_type_rank(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 1,
        Bson::Null | Bson::Undefined => 5,
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_) => 10,
        Bson::String(_) | Bson::Symbol(_) => 15,
        Bson::Document(_) => 20,
        Bson::Array(_) => 25,
        Bson::Binary(_) => 30,
        Bson::ObjectId(_) => 35,
        Bson::Boolean(_) => 40,
        Bson::DateTime(_) => 45,
        Bson::Timestamp(_) => 47,
        Bson::RegularExpression(_) => 50,
        Bson::DbPointer(_) => 55,
        Bson::JavaScriptCode(_) => 60,
        Bson::JavaScriptCodeWithScope(_) => 65,
        Bson::MaxKey => 127,
    }
}

/// MongoDB's `$type` name for a value (e.g. `"double"`, `"objectId"`).
pub fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}

/// Total order over BSON values following MongoDB's comparison rules.
pub fn compare_values(a: &Bson, b: &Bson) -> Ordering {
    let (ra, rb) = (canonical_type_rank(a), canonical_type_rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (Bson::String(x) | Bson::Symbol(x), Bson::String(y) | Bson::Symbol(y)) => {
            crate::collation::compare_strings(x, y)
        }
        (Bson::Document(x), Bson::Document(y)) => compare_documents(x, y),
        (Bson::Array(x), Bson::Array(y)) => compare_arrays(x, y),
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => x
            .pattern
            .cmp(&y.pattern)
            .then_with(|| x.options.cmp(&y.options)),
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.cmp(y),
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => x
            .code
            .cmp(&y.code)
            .then_with(|| compare_documents(&x.scope, &y.scope)),
        (Bson::DbPointer(x), Bson::DbPointer(y)) => format!("{x:?}").cmp(&format!("{y:?}")),
        _ => match (Num::from_bson(a), Num::from_bson(b)) {
            (Some(x), Some(y)) => x.compare(&y),
            _ => Ordering::Equal,
        },
    }
}

/// Compares two documents field by field: type rank, then name, then value.
pub fn compare_documents(a: &Document, b: &Document) -> Ordering {
    let mut ia = a.iter();
    let mut ib = b.iter();
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let ord = canonical_type_rank(va)
                    .cmp(&canonical_type_rank(vb))
                    .then_with(|| ka.cmp(kb))
                    .then_with(|| compare_values(va, vb));
                if ord != Ordering::Equal {
                    return ord;
                }
            }
        }
    }
}

fn compare_arrays(a: &[Bson], b: &[Bson]) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let ord = compare_values(x, y);
        if ord != Ordering::Equal {
            return ord;
        }
    }
    a.len().cmp(&b.len())
}

/// Equality under MongoDB's comparison rules (`1 == 1.0 == 1i64`).
pub fn values_equal(a: &Bson, b: &Bson) -> bool {
    compare_values(a, b) == Ordering::Equal
}

/// True if `a` and `b` belong to the same comparison bracket, i.e. a query
/// operator like `$gt` may compare them.
pub fn same_bracket(a: &Bson, b: &Bson) -> bool {
    canonical_type_rank(a) == canonical_type_rank(b)
}

/// An owned value ordered by [`compare_values`]; handy as a map key.
#[derive(Debug, Clone)]
pub struct OrdBson(pub Bson);

impl PartialEq for OrdBson {
    fn eq(&self, other: &Self) -> bool {
        values_equal(&self.0, &other.0)
    }
}
impl Eq for OrdBson {}
impl PartialOrd for OrdBson {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdBson {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(&self.0, &other.0)
    }
}

/// Compares two possibly-missing values (missing sorts before null).
pub fn compare_optional(a: &Option<Bson>, b: &Option<Bson>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => compare_values(x, y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, Binary, DateTime, Regex, Timestamp};

    #[test]
    fn cross_type_order_follows_mongodb() {
        let ordered = vec![
            Bson::MinKey,
            Bson::Null,
            Bson::Int32(1),
            Bson::String("a".into()),
            Bson::Document(doc! {}),
            Bson::Array(vec![]),
            Bson::Binary(Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: vec![],
            }),
            Bson::ObjectId(ObjectId::new()),
            Bson::Boolean(false),
            Bson::DateTime(DateTime::from_millis(0)),
            Bson::Timestamp(Timestamp {
                time: 0,
                increment: 0,
            }),
            Bson::RegularExpression(Regex {
                pattern: "a".into(),
                options: String::new(),
            }),
            Bson::MaxKey,
        ];
        for w in ordered.windows(2) {
            assert_eq!(compare_values(&w[0], &w[1]), Ordering::Less, "{w:?}");
            assert_eq!(compare_values(&w[1], &w[0]), Ordering::Greater);
        }
    }

    #[test]
    fn numbers_compare_by_value_across_types() {
        assert!(values_equal(&Bson::Int32(1), &Bson::Double(1.0)));
        assert!(values_equal(&Bson::Int64(1), &Bson::Int32(1)));
        assert_eq!(
            compare_values(&Bson::Int64(2), &Bson::Double(1.5)),
            Ordering::Greater
        );
        assert_eq!(
            compare_values(&Bson::Double(f64::NAN), &Bson::Int64(i64::MIN)),
            Ordering::Less
        );
        assert!(values_equal(
            &Bson::Double(f64::NAN),
            &Bson::Double(f64::NAN)
        ));
        assert_eq!(
            compare_values(&Bson::Int64(i64::MAX), &Bson::Double(9.3e18)),
            Ordering::Less
        );
        let dec: bson::Decimal128 = "2.5".parse().unwrap();
        assert_eq!(
            compare_values(&Bson::Decimal128(dec), &Bson::Int32(2)),
            Ordering::Greater
        );
    }

    #[test]
    fn null_and_undefined_are_equal_and_below_numbers() {
        assert!(values_equal(&Bson::Null, &Bson::Undefined));
        assert_eq!(
            compare_values(&Bson::Null, &Bson::Double(f64::NAN)),
            Ordering::Less
        );
    }

    #[test]
    fn documents_compare_field_by_field() {
        let a = Bson::Document(doc! {"a": 1});
        let b = Bson::Document(doc! {"a": 2});
        let c = Bson::Document(doc! {"b": 0});
        let d = Bson::Document(doc! {"a": 1, "b": 1});
        assert_eq!(compare_values(&a, &b), Ordering::Less);
        assert_eq!(compare_values(&b, &c), Ordering::Less);
        assert_eq!(compare_values(&a, &d), Ordering::Less);
        assert!(values_equal(&a, &Bson::Document(doc! {"a": 1.0})));
    }

    #[test]
    fn arrays_compare_element_wise_then_by_length() {
        let a = Bson::Array(vec![1.into(), 2.into()]);
        let b = Bson::Array(vec![1.into(), 3.into()]);
        let c = Bson::Array(vec![1.into()]);
        assert_eq!(compare_values(&a, &b), Ordering::Less);
        assert_eq!(compare_values(&c, &a), Ordering::Less);
    }

    #[test]
    fn strings_compare_binary_and_symbols_like_strings() {
        assert_eq!(compare_values(&"B".into(), &"a".into()), Ordering::Less);
        assert!(values_equal(
            &Bson::Symbol("x".into()),
            &Bson::String("x".into())
        ));
    }
}
