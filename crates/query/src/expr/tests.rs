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
        (e.code(), &*e.code_name(), e.to_string()),
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

fn evj(e: Document) -> Bson {
    Expr::parse(&Bson::Document(e))
        .unwrap()
        .eval(&doc! {"t": bson::DateTime::from_millis(1_615_988_832_345), "s": "  Hello World  ", "a": [3, 1, 2], "o": {"x": 1}})
        .unwrap()
}

fn date(s: &str) -> Bson {
    Bson::DateTime(bson::DateTime::parse_rfc3339_str(s).unwrap())
}

#[test]
fn date_parts_accept_timezones_and_object_form() {
    // t = 2021-03-17T13:47:12.345Z
    assert_eq!(evj(doc! {"$hour": "$t"}), Bson::Int32(13));
    assert_eq!(
        evj(doc! {"$hour": {"date": "$t", "timezone": "America/New_York"}}),
        Bson::Int32(9)
    );
    assert_eq!(
        evj(doc! {"$minute": {"date": "$t", "timezone": "+05:30"}}),
        Bson::Int32(17)
    );
    assert_eq!(evj(doc! {"$isoWeek": "$t"}), Bson::Int32(11));
    assert_eq!(evj(doc! {"$week": "$t"}), Bson::Int32(11));
    assert_eq!(evj(doc! {"$isoDayOfWeek": "$t"}), Bson::Int32(3));
    assert_eq!(evj(doc! {"$isoWeekYear": "$t"}), Bson::Int32(2021));
    assert_eq!(evj(doc! {"$dayOfYear": "$t"}), Bson::Int32(76));
    assert_eq!(ev_err(Bson::Document(doc! {"$year": "$s"})).code(), 16006);
    assert_eq!(
        ev_err(Bson::Document(
            doc! {"$year": {"date": date("2021-01-01T00:00:00Z"), "timezone": "Mars/Base"}}
        ))
        .code(),
        40485
    );
}

#[test]
fn date_trunc_add_diff_and_strings() {
    assert_eq!(
        evj(doc! {"$dateTrunc": {"date": "$t", "unit": "minute", "binSize": 15}}),
        date("2021-03-17T13:45:00Z")
    );
    assert_eq!(
        evj(doc! {"$dateTrunc": {"date": "$t", "unit": "week", "startOfWeek": "monday"}}),
        date("2021-03-15T00:00:00Z")
    );
    assert_eq!(
        evj(doc! {"$dateAdd": {"startDate": "$t", "unit": "day", "amount": 2}}),
        date("2021-03-19T13:47:12.345Z")
    );
    assert_eq!(
        evj(doc! {"$dateSubtract": {"startDate": "$t", "unit": "month", "amount": 1}}),
        date("2021-02-17T13:47:12.345Z")
    );
    assert_eq!(
        evj(
            doc! {"$dateDiff": {"startDate": date("2021-01-01T00:00:00Z"), "endDate": "$t", "unit": "month"}}
        ),
        Bson::Int64(2)
    );
    assert_eq!(
        evj(doc! {"$dateToString": {"date": "$t"}}),
        Bson::String("2021-03-17T13:47:12.345Z".into())
    );
    assert_eq!(
        evj(
            doc! {"$dateToString": {"date": "$t", "format": "%d/%m/%Y %H:%M %z", "timezone": "Europe/Paris"}}
        ),
        Bson::String("17/03/2021 14:47 +0100".into())
    );
    assert_eq!(
        evj(doc! {"$dateFromString": {"dateString": "2021-03-17T13:47:12.345Z"}}),
        date("2021-03-17T13:47:12.345Z")
    );
    assert_eq!(
        evj(doc! {"$dateFromString": {"dateString": "2021-03-17 10:00", "timezone": "+02:00"}}),
        date("2021-03-17T08:00:00Z")
    );
    assert_eq!(
        evj(doc! {"$dateFromString": {"dateString": "nope", "onError": "bad"}}),
        Bson::String("bad".into())
    );
    assert_eq!(
        evj(doc! {"$dateToParts": {"date": "$t"}}),
        Bson::Document(
            doc! {"year": 2021, "month": 3, "day": 17, "hour": 13, "minute": 47, "second": 12, "millisecond": 345}
        )
    );
    assert_eq!(
        evj(doc! {"$dateFromParts": {"year": 2021, "month": 14, "day": 1, "timezone": "UTC"}}),
        date("2022-02-01T00:00:00Z")
    );
    assert_eq!(
        evj(doc! {"$dateFromParts": {"isoWeekYear": 2021, "isoWeek": 11, "isoDayOfWeek": 3}}),
        date("2021-03-17T00:00:00Z")
    );
    // A part that evaluates to missing or null makes the result null.
    assert_eq!(
        evj(doc! {"$dateFromParts": {"year": "$nope", "month": 2}}),
        Bson::Null
    );
    assert_eq!(
        evj(doc! {"$dateFromParts": {"year": 2021, "hour": null}}),
        Bson::Null
    );
    // Seconds and milliseconds carry over without a range; years stay within 1..=9999.
    assert_eq!(
        evj(doc! {"$dateFromParts": {"year": 2021, "second": 86_400 * 40, "millisecond": 1500}}),
        date("2021-02-10T00:00:01.500Z")
    );
    assert_eq!(
        ev_err(Bson::Document(doc! {"$dateFromParts": {"year": 10000}})).code(),
        40523
    );
    assert!(ev_err(Bson::Document(
        doc! {"$dateFromParts": {"year": 2021, "second": i64::MAX}}
    ))
    .to_string()
    .contains("Overflow"));
    assert_eq!(
        ev_err(Bson::Document(doc! {"$dateTrunc": {"date": "$t"}})).code(),
        9
    );
    assert_eq!(
        ev_err(Bson::Document(
            doc! {"$dateToString": {"date": "$t", "bogus": 1}}
        ))
        .code(),
        18534
    );
}

#[test]
fn trim_regex_replace_and_index_of() {
    assert_eq!(
        evj(doc! {"$trim": {"input": "$s"}}),
        Bson::String("Hello World".into())
    );
    assert_eq!(
        evj(doc! {"$ltrim": {"input": "xxaxx", "chars": "x"}}),
        Bson::String("axx".into())
    );
    assert_eq!(
        evj(doc! {"$rtrim": {"input": "xxaxx", "chars": "x"}}),
        Bson::String("xxa".into())
    );
    assert_eq!(evj(doc! {"$indexOfCP": ["héllo", "l"]}), Bson::Int32(2));
    assert_eq!(
        evj(doc! {"$regexMatch": {"input": "$s", "regex": "hello", "options": "i"}}),
        Bson::Boolean(true)
    );
    assert_eq!(
        evj(doc! {"$replaceAll": {"input": "a-b-c", "find": "-", "replacement": "+"}}),
        Bson::String("a+b+c".into())
    );
    assert_eq!(
        evj(doc! {"$replaceOne": {"input": "a-b-c", "find": "-", "replacement": "+"}}),
        Bson::String("a+b-c".into())
    );
    assert_eq!(
        ev_err(Bson::Document(doc! {"$trim": {"input": 1}})).code(),
        50699
    );
}

#[test]
fn slice_range_zip_reduce_and_fields() {
    assert_eq!(
        evj(doc! {"$slice": ["$a", -2]}),
        Bson::Array(vec![1.into(), 2.into()])
    );
    assert_eq!(
        evj(doc! {"$slice": ["$a", 1, 1]}),
        Bson::Array(vec![1.into()])
    );
    assert_eq!(
        evj(doc! {"$range": [0, 6, 2]}),
        Bson::Array(vec![0.into(), 2.into(), 4.into()])
    );
    assert_eq!(evj(doc! {"$indexOfArray": ["$a", 2]}), Bson::Int32(2));
    assert_eq!(
        evj(doc! {"$sortArray": {"input": "$a", "sortBy": -1}}),
        Bson::Array(vec![3.into(), 2.into(), 1.into()])
    );
    assert_eq!(
        evj(doc! {"$zip": {"inputs": [[1, 2], ["a"]], "useLongestLength": true}}),
        Bson::Array(vec![
            Bson::Array(vec![1.into(), "a".into()]),
            Bson::Array(vec![2.into(), Bson::Null])
        ])
    );
    assert_eq!(
        evj(doc! {"$objectToArray": "$o"}),
        Bson::Array(vec![Bson::Document(doc! {"k": "x", "v": 1})])
    );
    assert_eq!(
        evj(doc! {"$arrayToObject": [[["k", 1]]]}),
        Bson::Document(doc! {"k": 1})
    );
    assert_eq!(
        evj(
            doc! {"$reduce": {"input": "$a", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}
        ),
        Bson::Int32(6)
    );
    assert_eq!(
        evj(doc! {"$getField": "s"}),
        Bson::String("  Hello World  ".into())
    );
    assert_eq!(
        evj(doc! {"$setField": {"field": "y", "input": "$o", "value": 2}}),
        Bson::Document(doc! {"x": 1, "y": 2})
    );
    assert_eq!(
        evj(doc! {"$maxN": {"input": "$a", "n": 2}}),
        Bson::Array(vec![3.into(), 2.into()])
    );
    assert_eq!(
        evj(doc! {"$setUnion": [[1, 2], [2, 3]]}),
        Bson::Array(vec![1.into(), 2.into(), 3.into()])
    );
    assert_eq!(
        ev_err(Bson::Document(doc! {"$slice": ["$s", 1]})).code(),
        28724
    );
    assert_eq!(ev_err(Bson::Document(doc! {"$size": "$s"})).code(), 17124);
}

#[test]
fn convert_with_on_error_and_on_null() {
    assert_eq!(
        evj(doc! {"$convert": {"input": "12", "to": "int"}}),
        Bson::Int32(12)
    );
    assert_eq!(
        evj(doc! {"$convert": {"input": "x", "to": "int", "onError": -1}}),
        Bson::Int32(-1)
    );
    assert_eq!(
        evj(doc! {"$convert": {"input": "$nope", "to": "int", "onNull": 0}}),
        Bson::Int32(0)
    );
    assert_eq!(
        evj(doc! {"$convert": {"input": 1.5, "to": 2}}),
        Bson::String("1.5".into())
    );
    assert_eq!(
        ev_err(Bson::Document(
            doc! {"$convert": {"input": "x", "to": "int"}}
        ))
        .code(),
        241
    );
}

#[test]
fn date_argument_errors_use_mongodb_codes() {
    let code = |d: Document| ev_err(Bson::Document(d)).code();
    let t = date("2021-01-01T00:00:00Z");
    assert_eq!(
        code(doc! {"$dateTrunc": {"date": t.clone(), "unit": "fortnight"}}),
        5439014
    );
    assert_eq!(
        code(doc! {"$dateTrunc": {"date": t.clone(), "unit": 5}}),
        5439013
    );
    assert_eq!(
        code(doc! {"$dateTrunc": {"date": t.clone(), "unit": "hour", "binSize": 0}}),
        5439018
    );
    assert_eq!(
        code(doc! {"$dateTrunc": {"date": t.clone(), "unit": "hour", "binSize": 1.5}}),
        5439017
    );
    assert_eq!(
        code(doc! {"$dateTrunc": {"date": "x", "unit": "hour"}}),
        5166307
    );
    assert_eq!(
        code(doc! {"$dateTrunc": {"date": t.clone(), "unit": "week", "startOfWeek": "someday"}}),
        5439016
    );
    assert_eq!(
        code(doc! {"$dateAdd": {"startDate": t.clone(), "unit": "day", "amount": 1.5}}),
        5166405
    );
    assert_eq!(
        code(doc! {"$dateAdd": {"startDate": "x", "unit": "day", "amount": 1}}),
        5166403
    );
    assert_eq!(
        code(doc! {"$dateAdd": {"startDate": t.clone(), "unit": "day"}}),
        5166402
    );
    assert_eq!(
        code(doc! {"$dateDiff": {"startDate": 1, "endDate": t, "unit": "day"}}),
        5166307
    );
    assert_eq!(
        code(doc! {"$hour": {"date": date("2021-01-01T00:00:00Z"), "timezone": 5}}),
        40517
    );
}

#[test]
fn to_date_parses_iso_forms() {
    assert_eq!(
        evj(doc! {"$toDate": "2021-03-17"}),
        date("2021-03-17T00:00:00Z")
    );
    assert_eq!(
        evj(doc! {"$toDate": "2021-03-17T10:00:00+02:00"}),
        date("2021-03-17T08:00:00Z")
    );
    assert_eq!(
        evj(doc! {"$toDate": "2021-03-17 10:00:00.5"}),
        date("2021-03-17T10:00:00.500Z")
    );
    assert_eq!(ev_err(Bson::Document(doc! {"$toDate": "soon"})).code(), 241);
}
