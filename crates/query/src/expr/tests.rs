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

#[test]
fn date_from_string_rejects_a_gmt_offset_together_with_a_timezone() {
    let msg =
        "you cannot pass in a date/time string with GMT offset together with a timezone argument";
    for s in [
        "2024-01-01T10:00:00+02:00",
        "2017-07-12T22:23:55Z",
        "2017-07-12T22:23:55.123-0500",
    ] {
        let err = ev_err(Bson::Document(
            doc! {"$dateFromString": {"dateString": s, "timezone": "Europe/Paris"}},
        ));
        assert_eq!(err.code(), 241, "{s}");
        assert_eq!(err.message(), msg);
    }
    let with_format = ev_err(Bson::Document(doc! {"$dateFromString": {
        "dateString": "4/26/1992:+0445", "format": "%m/%d/%Y:%z", "timezone": "+0500"
    }}));
    assert_eq!(with_format.code(), 241);
    assert_eq!(with_format.message(), msg);
    // onError catches it, like the other conversion failures.
    assert_eq!(
        evj(doc! {"$dateFromString": {
            "dateString": "2024-01-01T10:00:00Z", "timezone": "Asia/Tokyo", "onError": "bad"
        }}),
        Bson::String("bad".into())
    );
    // Without an offset in the string the timezone applies; a null timezone is null.
    assert_eq!(
        evj(
            doc! {"$dateFromString": {"dateString": "2017-07-06T12:35:37", "timezone": "Asia/Tokyo"}}
        ),
        date("2017-07-06T03:35:37Z")
    );
    assert_eq!(
        evj(doc! {"$dateFromString": {"dateString": "2017-07-11T17:05:19Z", "timezone": null}}),
        Bson::Null
    );
    // An offset alone (no timezone argument) is still honoured, with or without a format.
    assert_eq!(
        evj(doc! {"$dateFromString": {"dateString": "2024-01-01T10:00:00+02:00"}}),
        date("2024-01-01T08:00:00Z")
    );
    assert_eq!(
        evj(doc! {"$dateFromString": {"dateString": "4/26/1992:+0445", "format": "%m/%d/%Y:%z"}}),
        date("1992-04-25T19:15:00Z")
    );
}

fn dec(s: &str) -> Bson {
    Bson::Decimal128(s.parse().unwrap())
}

#[test]
fn round_and_trunc_of_decimals_keep_mongodb_exponents_and_round_half_to_even() {
    let r = |op: &str, x: &str, places: Option<Bson>| {
        let arg = match places {
            Some(p) => Bson::Array(vec![dec(x), p]),
            None => dec(x),
        };
        let out = evj(doc! {op: arg});
        match out {
            Bson::Decimal128(d) => d.to_string(),
            other => panic!("{op} {x}: not a decimal: {other:?}"),
        }
    };
    // The Decimal128 cases of jstests/aggregation/expressions/round_trunc.js.
    assert_eq!(r("$trunc", "-1.6", None), "-1");
    assert_eq!(r("$round", "-1.6", None), "-2");
    assert_eq!(r("$trunc", "1.298", Some(0.into())), "1");
    assert_eq!(r("$trunc", "1.298", Some(1.into())), "1.2");
    assert_eq!(r("$trunc", "23.298", Some((-1).into())), "2E+1");
    assert_eq!(
        r(
            "$trunc",
            "1.298912343250054252245154325",
            Some(Bson::Int64(20))
        ),
        "1.29891234325005425224"
    );
    assert_eq!(
        r("$trunc", "1.298", Some(dec("100"))),
        "1.298000000000000000000000000000000"
    );
    assert_eq!(r("$round", "1.298", Some(0.into())), "1");
    assert_eq!(r("$round", "1.298", Some(1.into())), "1.3");
    assert_eq!(r("$round", "23.298", Some((-1).into())), "2E+1");
    assert_eq!(
        r(
            "$round",
            "1.298912343250054252245154325",
            Some(Bson::Int64(20))
        ),
        "1.29891234325005425225"
    );
    assert_eq!(
        r("$round", "1.298", Some(dec("100"))),
        "1.298000000000000000000000000000000"
    );
    for op in ["$round", "$trunc"] {
        for special in ["Infinity", "-Infinity", "NaN"] {
            assert_eq!(r(op, special, Some(0.into())), special);
        }
    }
    // Half to even ("Rounding to Even Values").
    assert_eq!(r("$round", "2.345", Some(2.into())), "2.34");
    assert_eq!(r("$round", "2.355", Some(2.into())), "2.36");
    assert_eq!(r("$round", "-2.5", None), "-2");
    assert_eq!(r("$round", "2.3451", Some(2.into())), "2.35");
    // Integers: half to even, and int overflow promotes to long.
    assert_eq!(evj(doc! {"$round": [25, -1]}), Bson::Int32(20));
    assert_eq!(evj(doc! {"$round": [35, -1]}), Bson::Int32(40));
    assert_eq!(
        evj(doc! {"$round": [2147483647, -1]}),
        Bson::Int64(2147483650)
    );
    assert_eq!(
        ev_err(Bson::Document(
            doc! {"$round": [Bson::Int64(9223372036854775806), -1]}
        ))
        .code(),
        51080
    );
    assert_eq!(evj(doc! {"$trunc": [1.298, 100]}), Bson::Double(1.298));
    assert_eq!(
        ev_err(Bson::Document(doc! {"$round": [1, 101]})).code(),
        51083
    );
    assert_eq!(
        ev_err(Bson::Document(doc! {"$trunc": [1, -21]})).code(),
        51083
    );
}

#[test]
fn median_and_percentile_work_as_expressions() {
    let d = doc! {"x": [0, "non-numeric", 1, 2], "s": 5, "n": "x", "x1": "a"};
    let e = |v: Document| ev(Bson::Document(v), d.clone());
    assert_eq!(
        e(doc! {"$median": {"input": [1, 2, 3, 4], "method": "approximate"}}),
        Bson::Double(2.0)
    );
    assert_eq!(
        e(doc! {"$percentile": {"input": "$x", "p": [0.5, 0.9, 0.1], "method": "approximate"}}),
        Bson::Array(vec![
            Bson::Double(1.0),
            Bson::Double(2.0),
            Bson::Double(0.0)
        ])
    );
    // A single numeric value is every percentile; non-numeric input gives nulls.
    assert_eq!(
        e(doc! {"$percentile": {"input": "$s", "p": [0.5, 0.9], "method": "approximate"}}),
        Bson::Array(vec![Bson::Double(5.0), Bson::Double(5.0)])
    );
    assert_eq!(
        e(
            doc! {"$percentile": {"input": ["$n", "$x1", "$x"], "p": [0.5, 0.9], "method": "approximate"}}
        ),
        Bson::Array(vec![Bson::Null, Bson::Null])
    );
    assert_eq!(
        e(doc! {"$median": {"input": "$missing", "method": "approximate"}}),
        Bson::Null
    );
    // Variables bound around the expression are visible to its input.
    assert_eq!(
        e(
            doc! {"$let": {"vars": {"v": [7, 9, 8]}, "in": {"$median": {"input": "$$v", "method": "approximate"}}}}
        ),
        Bson::Double(8.0)
    );
    assert_eq!(
        ev_err(Bson::Document(doc! {"$percentile": 0.5})).code(),
        7436200
    );
    assert_eq!(
        ev_err(Bson::Document(doc! {"$median": 0.5})).code(),
        7436201
    );
    assert_eq!(
        ev_err(Bson::Document(
            doc! {"$percentile": {"input": "$x", "p": [1.5], "method": "approximate"}}
        ))
        .code(),
        7750301
    );
    assert!(Expr::parse(&Bson::Document(
        doc! {"$median": {"input": "$x", "method": "approximate", "p": [0.5]}}
    ))
    .is_err());
}

#[test]
fn ts_second_and_ts_increment_read_timestamp_parts_as_longs() {
    let d =
        doc! {"ts": Bson::Timestamp(bson::Timestamp { time: 1622731060, increment: 10 }), "n": 5};
    let e = |v: Document| ev(Bson::Document(v), d.clone());
    assert_eq!(e(doc! {"$tsSecond": "$ts"}), Bson::Int64(1622731060));
    assert_eq!(e(doc! {"$tsIncrement": "$ts"}), Bson::Int64(10));
    assert_eq!(e(doc! {"$tsSecond": "$missing"}), Bson::Null);
    assert_eq!(e(doc! {"$tsIncrement": null}), Bson::Null);
    let err = |v: Document| {
        Expr::parse(&Bson::Document(v))
            .unwrap()
            .eval(&d)
            .unwrap_err()
    };
    assert_eq!(err(doc! {"$tsSecond": "$n"}).code(), 5687301);
    assert_eq!(err(doc! {"$tsIncrement": "$n"}).code(), 5687302);
    assert!(err(doc! {"$tsSecond": "$n"})
        .message()
        .contains("must be a timestamp, but is int"));
}

#[test]
fn get_field_requires_a_constant_string_field() {
    let code = |v: Bson| ev_err(Bson::Document(doc! {"$getField": v})).code();
    // Field paths and variables, in full and shorthand form.
    assert_eq!(
        code(Bson::Document(doc! {"field": "$c", "input": "$o"})),
        5654600
    );
    assert_eq!(code("$c".into()), 5654600);
    assert_eq!(code("$$CURRENT.a".into()), 5654600);
    let err = ev_err(Bson::Document(doc! {"$getField": "$a.b"}));
    assert_eq!(
        err.message(),
        "'$CURRENT.a.b' is a field path reference which is not allowed in this context. Did you mean {$literal: '$CURRENT.a.b'}?"
    );
    // Other expressions are not constants.
    assert_eq!(
        code(Bson::Document(
            doc! {"field": {"$concat": ["a", "b"]}, "input": {"a": 1}}
        )),
        5654601
    );
    assert_eq!(code(Bson::Document(doc! {"$add": [2, 3]})), 5654601);
    assert_eq!(
        code(Bson::Document(doc! {"field": {"a": 1}, "input": {"a": 1}})),
        5654601
    );
    // Constants of another type.
    assert_eq!(code(5.into()), 5654602);
    assert_eq!(code(true.into()), 5654602);
    assert_eq!(
        code(Bson::Document(doc! {"field": null, "input": {}})),
        5654602
    );
    assert_eq!(code(Bson::Document(doc! {"$const": {"a": 1}})), 5654602);
    // Argument errors.
    assert_eq!(code(Bson::Document(doc! {"input": {"a": "b"}})), 3041702);
    assert_eq!(code(Bson::Document(doc! {"field": "a"})), 3041703);
    assert_eq!(
        code(Bson::Document(
            doc! {"field": "a", "input": {}, "unknown": true}
        )),
        3041701
    );
    // Constant strings, including $const / $literal ones starting with '$'.
    let d = doc! {"$a": 10, "x": 1, "e": {"$f": 30}};
    let e = |v: Bson| ev(Bson::Document(doc! {"$getField": v}), d.clone());
    assert_eq!(e(Bson::Document(doc! {"$const": "$a"})), Bson::Int32(10));
    assert_eq!(e("x".into()), Bson::Int32(1));
    assert_eq!(
        e(Bson::Document(
            doc! {"field": {"$literal": "$f"}, "input": "$e"}
        )),
        Bson::Int32(30)
    );
}
