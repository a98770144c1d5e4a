//! Unit tests of the `expr` module, named after the behaviour they pin.

use super::*;
use bson::doc;

fn ev(e: Bson, d: Document) -> Bson {
    Expr::parse(&e).unwrap().eval(&d).unwrap()
}

fn ev_err(e: Bson) -> QueryError {
    match Expr::parse(&e) {
        Err(err) => err,
        Ok(x) => x.eval(&doc! {"s": "x", "a": [1]}).unwrap_err(),
    }
}

#[test]
fn field_paths_variables_and_literals() {
    let d = doc! {"a": {"b": 2}, "c": [{"x": 1}, {"x": 2}]};
    assert_eq!(ev("$a.b".into(), d.clone()), Bson::Int32(2));
    assert_eq!(
        ev("$c.x".into(), d.clone()),
        Bson::Array(vec![1.into(), 2.into()])
    );
    assert_eq!(
        ev("$$ROOT.a".into(), d.clone()),
        Bson::Document(doc! {"b": 2})
    );
    assert_eq!(ev("$missing".into(), d.clone()), Bson::Null);
    assert_eq!(
        ev(Bson::Document(doc! {"$literal": "$a"}), d.clone()),
        Bson::from("$a")
    );
    assert_eq!(
        ev(Bson::Document(doc! {"x": "$a.b", "y": [1, "$a.b"]}), d),
        Bson::Document(doc! {"x": 2, "y": [1, 2]})
    );
}

#[test]
fn arithmetic_operators() {
    let d = doc! {"a": 6, "b": 4, "f": 2.5};
    let e = |v: Document| ev(Bson::Document(v), d.clone());
    assert_eq!(e(doc! {"$add": ["$a", "$b", 1]}), Bson::Int32(11));
    assert_eq!(e(doc! {"$add": ["$a", "$f"]}), Bson::Double(8.5));
    assert_eq!(e(doc! {"$subtract": ["$a", "$b"]}), Bson::Int32(2));
    assert_eq!(e(doc! {"$multiply": ["$a", "$b"]}), Bson::Int32(24));
    assert_eq!(e(doc! {"$divide": ["$a", "$b"]}), Bson::Double(1.5));
    assert_eq!(e(doc! {"$mod": ["$a", "$b"]}), Bson::Int32(2));
    assert_eq!(e(doc! {"$abs": -3}), Bson::Int32(3));
    assert_eq!(e(doc! {"$ceil": "$f"}), Bson::Double(3.0));
    assert_eq!(e(doc! {"$floor": "$f"}), Bson::Double(2.0));
    assert_eq!(e(doc! {"$round": ["$f", 0]}), Bson::Double(2.0));
    assert_eq!(e(doc! {"$round": [3.5]}), Bson::Double(4.0));
    assert_eq!(e(doc! {"$trunc": [2.77, 1]}), Bson::Double(2.7));
    assert_eq!(e(doc! {"$sqrt": 16}), Bson::Double(4.0));
    assert_eq!(e(doc! {"$pow": [2, 10]}), Bson::Int32(1024));
    assert_eq!(e(doc! {"$add": ["$missing", 1]}), Bson::Null);
    assert_eq!(ev_err(Bson::Document(doc! {"$divide": [1, 0]})).code(), 2);
    assert_eq!(
        ev_err(Bson::Document(doc! {"$add": [1, "$s"]})).code(),
        16554
    );
}

#[test]
fn comparison_and_logic() {
    let d = doc! {"a": 1};
    let e = |v: Document| ev(Bson::Document(v), d.clone());
    assert_eq!(e(doc! {"$eq": ["$a", 1.0]}), Bson::Boolean(true));
    assert_eq!(e(doc! {"$gt": ["$a", null]}), Bson::Boolean(true));
    assert_eq!(e(doc! {"$cmp": ["$a", 2]}), Bson::Int32(-1));
    assert_eq!(e(doc! {"$and": [1, "$a", true]}), Bson::Boolean(true));
    assert_eq!(e(doc! {"$or": [0, null]}), Bson::Boolean(false));
    assert_eq!(e(doc! {"$not": [0]}), Bson::Boolean(true));
    assert_eq!(e(doc! {"$eq": ["$missing", null]}), Bson::Boolean(false));
}

#[test]
fn conditionals() {
    let d = doc! {"a": 5};
    let e = |v: Document| ev(Bson::Document(v), d.clone());
    assert_eq!(
        e(doc! {"$cond": [{"$gt": ["$a", 3]}, "big", "small"]}),
        Bson::from("big")
    );
    assert_eq!(
        e(doc! {"$cond": {"if": false, "then": 1, "else": 2}}),
        Bson::Int32(2)
    );
    assert_eq!(e(doc! {"$ifNull": ["$x", "$y", "d"]}), Bson::from("d"));
    assert_eq!(
        e(
            doc! {"$switch": {"branches": [{"case": {"$lt": ["$a", 1]}, "then": "neg"}], "default": "pos"}}
        ),
        Bson::from("pos")
    );
    assert_eq!(
        ev_err(Bson::Document(doc! {"$cond": {"then": 1, "else": 2}})).code(),
        17080
    );
}

#[test]
fn string_operators() {
    let d = doc! {"s": "Hello"};
    let e = |v: Document| ev(Bson::Document(v), d.clone());
    assert_eq!(
        e(doc! {"$concat": ["$s", " ", "World"]}),
        Bson::from("Hello World")
    );
    assert_eq!(e(doc! {"$concat": ["$s", "$nope"]}), Bson::Null);
    assert_eq!(e(doc! {"$toUpper": "$s"}), Bson::from("HELLO"));
    assert_eq!(e(doc! {"$toLower": "$s"}), Bson::from("hello"));
    assert_eq!(e(doc! {"$substr": ["$s", 1, 3]}), Bson::from("ell"));
    assert_eq!(e(doc! {"$strLenBytes": "$s"}), Bson::Int32(5));
    assert_eq!(
        ev_err(Bson::Document(doc! {"$concat": ["a", 1]})).code(),
        16702
    );
}

#[test]
fn array_operators() {
    let d = doc! {"a": [1, 2, 3]};
    let e = |v: Document| ev(Bson::Document(v), d.clone());
    assert_eq!(e(doc! {"$size": "$a"}), Bson::Int32(3));
    assert_eq!(e(doc! {"$arrayElemAt": ["$a", -1]}), Bson::Int32(3));
    assert_eq!(e(doc! {"$in": [2, "$a"]}), Bson::Boolean(true));
    assert_eq!(e(doc! {"$isArray": ["$a"]}), Bson::Boolean(true));
    assert_eq!(
        e(doc! {"$map": {"input": "$a", "as": "x", "in": {"$multiply": ["$$x", 2]}}}),
        Bson::Array(vec![2.into(), 4.into(), 6.into()])
    );
    assert_eq!(
        e(doc! {"$filter": {"input": "$a", "cond": {"$gt": ["$$this", 1]}}}),
        Bson::Array(vec![2.into(), 3.into()])
    );
    assert_eq!(ev_err(Bson::Document(doc! {"$size": "$s"})).code(), 17124);
}

#[test]
fn conversions_and_type() {
    let e = |v: Document| ev(Bson::Document(v), doc! {});
    assert_eq!(e(doc! {"$toString": 5}), Bson::from("5"));
    assert_eq!(e(doc! {"$toString": 1.5}), Bson::from("1.5"));
    assert_eq!(e(doc! {"$toInt": "42"}), Bson::Int32(42));
    assert_eq!(e(doc! {"$toInt": 4.9}), Bson::Int32(4));
    assert_eq!(e(doc! {"$toLong": 3}), Bson::Int64(3));
    assert_eq!(e(doc! {"$toDouble": "2.5"}), Bson::Double(2.5));
    assert_eq!(e(doc! {"$toBool": 0}), Bson::Boolean(false));
    assert_eq!(e(doc! {"$type": "$nope"}), Bson::from("missing"));
    assert_eq!(e(doc! {"$type": 1i64}), Bson::from("long"));
    assert_eq!(
        e(doc! {"$toDate": 0i64}),
        Bson::DateTime(bson::DateTime::from_millis(0))
    );
    assert_eq!(ev_err(Bson::Document(doc! {"$toInt": "abc"})).code(), 241);
}

#[test]
fn date_parts_in_utc() {
    let d = doc! {"d": bson::DateTime::from_millis(1_577_934_245_678)};
    let e = |op: &str| ev(Bson::Document(doc! {op: "$d"}), d.clone());
    assert_eq!(e("$year"), Bson::Int32(2020));
    assert_eq!(e("$month"), Bson::Int32(1));
    assert_eq!(e("$dayOfMonth"), Bson::Int32(2));
    assert_eq!(e("$hour"), Bson::Int32(3));
    assert_eq!(e("$minute"), Bson::Int32(4));
    assert_eq!(e("$second"), Bson::Int32(5));
    assert_eq!(e("$millisecond"), Bson::Int32(678));
    assert_eq!(e("$dayOfWeek"), Bson::Int32(5));
    assert_eq!(e("$dayOfYear"), Bson::Int32(2));
}

#[test]
fn unknown_operator_and_bad_shapes_error() {
    let e = ev_err(Bson::Document(doc! {"$foo": 1}));
    assert_eq!(
        (e.code(), e.code_name(), e.to_string()),
        (
            168,
            "InvalidPipelineOperator",
            "Unrecognized expression '$foo'".to_string()
        )
    );
    assert_eq!(
        ev_err(Bson::Document(doc! {"$add": 1, "$sub": 2})).code(),
        15983
    );
    assert_eq!(ev_err(Bson::Document(doc! {"$size": [1, 2]})).code(), 16020);
    assert_eq!(ev_err("$$nope".into()).code(), 17276);
}
