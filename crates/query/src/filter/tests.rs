//! Unit tests of the `filter` module, named after the behaviour they pin.

use super::*;
use bson::{doc, Regex};

fn m(filter: Document, d: Document) -> bool {
    Filter::parse(&filter).unwrap().matches(&d)
}

fn err(filter: Document) -> QueryError {
    Filter::parse(&filter).unwrap_err()
}

#[test]
fn equality_matches_scalars_and_array_elements_and_whole_arrays() {
    assert!(m(doc! {"a": 1}, doc! {"a": 1.0}));
    assert!(m(doc! {"a": 1}, doc! {"a": [3, 1]}));
    assert!(m(doc! {"a": [3, 1]}, doc! {"a": [3, 1]}));
    assert!(m(doc! {"a": [3, 1]}, doc! {"a": [[3, 1], 2]}));
    assert!(!m(doc! {"a": [1, 3]}, doc! {"a": [3, 1]}));
    assert!(!m(doc! {"a": 1}, doc! {"a": "1"}));
}

#[test]
fn null_matches_missing_and_null_but_not_other_values() {
    assert!(m(doc! {"a": null}, doc! {"b": 1}));
    assert!(m(doc! {"a": null}, doc! {"a": null}));
    assert!(m(doc! {"a": null}, doc! {"a": [1, null]}));
    assert!(!m(doc! {"a": null}, doc! {"a": 0}));
    assert!(!m(doc! {"a": {"$ne": null}}, doc! {"b": 1}));
    assert!(m(doc! {"a.b": null}, doc! {"a": [{"b": 1}, {"c": 1}]}));
}

#[test]
fn comparisons_stay_within_type_bracket() {
    assert!(m(doc! {"a": {"$gt": 5}}, doc! {"a": 6i64}));
    assert!(!m(doc! {"a": {"$gt": 5}}, doc! {"a": "z"}));
    assert!(m(doc! {"a": {"$lt": "b"}}, doc! {"a": "a"}));
    assert!(!m(doc! {"a": {"$lt": "b"}}, doc! {"a": 1}));
    assert!(m(
        doc! {"a": {"$gte": 2, "$lte": 3}},
        doc! {"a": [1, 5, 2.5]}
    ));
    assert!(m(doc! {"a": {"$gt": 2, "$lt": 3}}, doc! {"a": [1, 5]}));
    assert!(m(doc! {"a": {"$gt": Bson::MinKey}}, doc! {"a": "x"}));
    assert!(!m(doc! {"a": {"$gt": 1}}, doc! {"b": 2}));
}

#[test]
fn in_and_nin_follow_equality_semantics() {
    assert!(m(doc! {"a": {"$in": [1, 2]}}, doc! {"a": [5, 2]}));
    assert!(m(doc! {"a": {"$in": [null]}}, doc! {}));
    assert!(m(
        doc! {"a": {"$in": [Regex { pattern: "^x".into(), options: String::new() }]}},
        doc! {"a": "xy"}
    ));
    assert!(m(doc! {"a": {"$nin": [1, 2]}}, doc! {"a": 3}));
    assert!(m(doc! {"a": {"$nin": [1, 2]}}, doc! {}));
    assert!(!m(doc! {"a": {"$nin": [1, 2]}}, doc! {"a": [3, 1]}));
    assert_eq!(err(doc! {"a": {"$in": 1}}).code(), 2);
}

#[test]
fn ne_is_negation_of_eq_over_arrays() {
    assert!(!m(doc! {"a": {"$ne": 1}}, doc! {"a": [1, 2]}));
    assert!(m(doc! {"a": {"$ne": 1}}, doc! {"a": [3, 2]}));
    assert!(m(doc! {"a": {"$ne": 1}}, doc! {}));
}

#[test]
fn logical_operators_combine_clauses() {
    let d = doc! {"a": 1, "b": 2};
    assert!(m(doc! {"$or": [{"a": 2}, {"b": 2}]}, d.clone()));
    assert!(!m(doc! {"$and": [{"a": 1}, {"b": 3}]}, d.clone()));
    assert!(m(doc! {"$nor": [{"a": 2}, {"b": 3}]}, d.clone()));
    assert!(m(doc! {"a": {"$not": {"$gt": 5}}}, d.clone()));
    assert!(m(doc! {"c": {"$not": {"$gt": 5}}}, d));
    assert_eq!(err(doc! {"$or": []}).code(), 2);
    assert_eq!(err(doc! {"$and": [1]}).code(), 2);
    assert_eq!(err(doc! {"a": {"$not": 1}}).code(), 2);
}

#[test]
fn unknown_operators_report_mongodb_messages() {
    let e = err(doc! {"$foo": 1});
    assert_eq!(
        (e.code(), e.to_string()),
        (2, "unknown top level operator: $foo".to_string())
    );
    let e = err(doc! {"a": {"$foo": 1}});
    assert_eq!(
        (e.code(), e.to_string()),
        (2, "unknown operator: $foo".to_string())
    );
    assert_eq!(err(doc! {"$where": "1"}).code(), 2);
    assert!(m(doc! {"$comment": "hi", "a": 1}, doc! {"a": 1}));
}

#[test]
fn exists_checks_presence_including_null() {
    assert!(m(doc! {"a": {"$exists": true}}, doc! {"a": null}));
    assert!(!m(doc! {"a": {"$exists": true}}, doc! {}));
    assert!(m(doc! {"a": {"$exists": 0}}, doc! {}));
    assert!(m(
        doc! {"a.b": {"$exists": true}},
        doc! {"a": [{"c": 1}, {"b": 2}]}
    ));
}

#[test]
fn type_matches_names_codes_number_alias_and_arrays() {
    assert!(m(doc! {"a": {"$type": "string"}}, doc! {"a": "x"}));
    assert!(m(doc! {"a": {"$type": 16}}, doc! {"a": 1}));
    assert!(!m(doc! {"a": {"$type": "long"}}, doc! {"a": 1}));
    assert!(m(doc! {"a": {"$type": "number"}}, doc! {"a": 1.5}));
    assert!(m(
        doc! {"a": {"$type": ["string", "bool"]}},
        doc! {"a": true}
    ));
    assert!(m(doc! {"a": {"$type": "array"}}, doc! {"a": []}));
    assert!(m(doc! {"a": {"$type": "int"}}, doc! {"a": ["x", 1]}));
    assert!(m(doc! {"a": {"$type": "null"}}, doc! {"a": null}));
    assert!(!m(doc! {"a": {"$type": "null"}}, doc! {}));
    assert_eq!(err(doc! {"a": {"$type": "nope"}}).code(), 2);
}

#[test]
fn regex_matches_strings_with_options() {
    assert!(m(
        doc! {"a": {"$regex": "^ab", "$options": "i"}},
        doc! {"a": "ABC"}
    ));
    assert!(m(
        doc! {"a": Regex { pattern: "b$".into(), options: String::new() }},
        doc! {"a": ["x", "ab"]}
    ));
    assert!(!m(doc! {"a": {"$regex": "^ab"}}, doc! {"a": 1}));
    assert!(m(
        doc! {"a": {"$not": Regex { pattern: "^a".into(), options: String::new() }}},
        doc! {"a": "b"}
    ));
    assert_eq!(err(doc! {"a": {"$options": "i"}}).code(), 2);
}

#[test]
fn elem_match_object_and_value_forms() {
    let d = doc! {"a": [{"b": 1, "c": 2}, {"b": 2, "c": 1}]};
    assert!(m(doc! {"a": {"$elemMatch": {"b": 1, "c": 2}}}, d.clone()));
    assert!(!m(doc! {"a": {"$elemMatch": {"b": 1, "c": 1}}}, d.clone()));
    assert!(m(doc! {"a.b": 1, "a.c": 1}, d));
    assert!(m(
        doc! {"a": {"$elemMatch": {"$gt": 2, "$lt": 4}}},
        doc! {"a": [1, 3]}
    ));
    assert!(!m(
        doc! {"a": {"$elemMatch": {"$gt": 2, "$lt": 3}}},
        doc! {"a": [1, 5]}
    ));
    assert!(!m(doc! {"a": {"$elemMatch": {"$gt": 0}}}, doc! {"a": 5}));
}

#[test]
fn value_elem_match_does_not_search_nested_arrays() {
    let q = doc! {"a": {"$elemMatch": {"$lt": 6, "$gt": 4}}};
    assert!(m(q.clone(), doc! {"a": [5]}));
    assert!(!m(q.clone(), doc! {"a": [[5]]}));
    assert!(!m(q, doc! {"a": [[3, 7]]}));
    assert!(!m(
        doc! {"a": {"$elemMatch": {"$type": "number"}}},
        doc! {"a": [[1, 2]]}
    ));
    assert!(!m(
        doc! {"a": {"$elemMatch": {"$eq": 1}}},
        doc! {"a": [[1, 2]]}
    ));
    // Predicates about arrays still look at an element that is one.
    assert!(m(
        doc! {"a": {"$elemMatch": {"$size": 2}}},
        doc! {"a": [[1, 2]]}
    ));
    assert!(m(
        doc! {"a": {"$elemMatch": {"$elemMatch": {"$eq": 2}}}},
        doc! {"a": [[1, 2]]}
    ));
    assert!(m(
        doc! {"a": {"$elemMatch": {"$not": {"$eq": 1}}}},
        doc! {"a": [[1, 2]]}
    ));
}

#[test]
fn size_all_and_mod() {
    assert!(m(doc! {"a": {"$size": 2}}, doc! {"a": [1, [2, 3]]}));
    assert!(!m(doc! {"a": {"$size": 1}}, doc! {"a": 1}));
    assert!(m(doc! {"a": {"$all": [1, 3]}}, doc! {"a": [3, 2, 1]}));
    assert!(!m(doc! {"a": {"$all": [1, 4]}}, doc! {"a": [3, 2, 1]}));
    assert!(!m(doc! {"a": {"$all": []}}, doc! {"a": [1]}));
    assert!(m(
        doc! {"a": {"$all": [{"$elemMatch": {"b": 1}}]}},
        doc! {"a": [{"b": 1}]}
    ));
    assert!(m(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 9}));
    assert!(m(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 9.7}));
    assert!(!m(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 8}));
    assert_eq!(err(doc! {"a": {"$mod": [0, 1]}}).code(), 2);
    assert_eq!(err(doc! {"a": {"$mod": [1]}}).code(), 2);
    assert_eq!(err(doc! {"a": {"$size": -1}}).code(), 2);
}

#[test]
fn dotted_paths_traverse_documents_arrays_and_indexes() {
    assert!(m(doc! {"a.b": 2}, doc! {"a": [{"b": 1}, {"b": 2}]}));
    assert!(m(doc! {"a.b.c": 1}, doc! {"a": {"b": {"c": 1}}}));
    assert!(m(doc! {"a.1": 5}, doc! {"a": [4, 5]}));
    assert!(m(doc! {"a.0.b": 1}, doc! {"a": [{"b": 1}]}));
    assert!(!m(doc! {"a.b": 1}, doc! {"a": [[{"b": 1}]]}));
}

#[test]
fn embedded_document_equality_is_exact_and_ordered() {
    assert!(m(
        doc! {"a": {"x": 1, "y": 2}},
        doc! {"a": {"x": 1, "y": 2}}
    ));
    assert!(!m(
        doc! {"a": {"x": 1, "y": 2}},
        doc! {"a": {"y": 2, "x": 1}}
    ));
    assert!(!m(doc! {"a": {"x": 1}}, doc! {"a": {"x": 1, "y": 2}}));
}

#[test]
fn expr_compares_fields_of_the_same_document() {
    assert!(m(
        doc! {"$expr": {"$gt": ["$a", "$b"]}},
        doc! {"a": 3, "b": 2}
    ));
    assert!(!m(
        doc! {"$expr": {"$gt": ["$a", "$b"]}},
        doc! {"a": 1, "b": 2}
    ));
}

#[test]
fn id_equality_finds_pinned_ids() {
    let f = |d: Document| Filter::parse(&d).unwrap().id_equality();
    assert_eq!(f(doc! {"_id": 5}), Some(Bson::Int32(5)));
    assert_eq!(f(doc! {"_id": {"$eq": "x"}, "a": 1}), Some(Bson::from("x")));
    assert_eq!(
        f(doc! {"$and": [{"a": 1}, {"_id": 7}]}),
        Some(Bson::Int32(7))
    );
    assert_eq!(f(doc! {"_id": {"$gt": 5}}), None);
    assert_eq!(f(doc! {"$or": [{"_id": 1}]}), None);
    assert_eq!(Filter::match_all().id_equality(), None);
}

#[test]
fn equality_seed_collects_equalities_into_nested_documents() {
    let f = Filter::parse(&doc! {"_id": 1, "a.b": 2, "c": {"$eq": 3}, "d": {"$gt": 1}, "$and": [{"e": 4}], "f": {"$in": [5]}}).unwrap();
    assert_eq!(
        f.equality_seed(),
        doc! {"_id": 1, "a": {"b": 2}, "c": 3, "e": 4, "f": 5}
    );
}

#[test]
fn match_all_matches_everything() {
    assert!(Filter::match_all().matches(&doc! {"x": 1}));
    assert!(Filter::parse(&doc! {}).unwrap().matches(&doc! {}));
}

fn count(filter: Document, docs: &[Document]) -> usize {
    let f = Filter::parse(&filter).unwrap();
    docs.iter().filter(|d| f.matches(d)).count()
}

fn bin(bytes: &[u8]) -> Bson {
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: bytes.to_vec(),
    })
}

#[test]
fn bit_tests_on_numbers_take_a_bitmask_or_bit_positions() {
    let docs: Vec<Document> = [0i64, 1, 54, 88, 255, 1_000_000_000_000_000_000]
        .iter()
        .map(|&a| doc! {"a": a})
        .collect();
    let cases = [
        (doc! {"a": {"$bitsAllSet": 0}}, 6),
        (doc! {"a": {"$bitsAllSet": 54}}, 2),
        (doc! {"a": {"$bitsAllSet": 55}}, 1),
        (doc! {"a": {"$bitsAllSet": 255}}, 1),
        (doc! {"a": {"$bitsAllClear": 129}}, 4),
        (doc! {"a": {"$bitsAllClear": 255}}, 2),
        (doc! {"a": {"$bitsAnySet": 0}}, 0),
        (doc! {"a": {"$bitsAnySet": 9}}, 3),
        (doc! {"a": {"$bitsAnyClear": 0}}, 0),
        (doc! {"a": {"$bitsAnyClear": 18}}, 4),
        (doc! {"a": {"$bitsAnyClear": 255}}, 5),
        (doc! {"a": {"$bitsAllSet": []}}, 6),
        (doc! {"a": {"$bitsAllSet": [1, 2, 4, 5]}}, 2),
        (doc! {"a": {"$bitsAllClear": [1, 7]}}, 4),
        (doc! {"a": {"$bitsAnySet": []}}, 0),
        (doc! {"a": {"$bitsAnySet": [1, 3]}}, 3),
        (doc! {"a": {"$bitsAnyClear": [3, 4]}}, 4),
        (doc! {"a": {"$bitsAllSet": 54, "$bitsAllClear": 201}}, 1),
        (doc! {"a": {"$bitsAllSet": 16.0}}, 3),
    ];
    for (f, n) in cases {
        assert_eq!(count(f.clone(), &docs), n, "{f}");
    }
}

#[test]
fn bit_tests_read_negative_numbers_as_sign_extended_twos_complement() {
    let docs: Vec<Document> = [0i64, -1, -54, -1_000_000_000_000_000_000]
        .iter()
        .map(|&a| doc! {"a": a})
        .collect();
    let all: Vec<i32> = (0..64).collect();
    let cases = [
        (doc! {"a": {"$bitsAllSet": 2}}, 2),
        (doc! {"a": {"$bitsAllSet": 127}}, 1),
        (doc! {"a": {"$bitsAllSet": 74}}, 2),
        (doc! {"a": {"$bitsAllClear": 53}}, 3),
        (doc! {"a": {"$bitsAnyClear": 127}}, 3),
        (doc! {"a": {"$bitsAllSet": all.clone()}}, 1),
        (doc! {"a": {"$bitsAllSet": [1, 7, 6, 3, 100]}}, 2),
        (doc! {"a": {"$bitsAnyClear": [0, 2, 4, 5, 100]}}, 3),
        (doc! {"a": {"$bitsAnySet": all}}, 3),
        (doc! {"a": {"$bitsAllSet": 74, "$bitsAllClear": 53}}, 1),
    ];
    for (f, n) in cases {
        assert_eq!(count(f.clone(), &docs), n, "{f}");
    }
    assert!(m(
        doc! {"a": {"$bitsAllSet": i64::MAX}},
        doc! {"a": i64::MAX}
    ));
}

#[test]
fn bit_tests_skip_nan_fractional_and_out_of_range_doubles_and_other_types() {
    let docs = vec![
        doc! {"a": 0},
        doc! {"a": 1},
        doc! {"a": [1.1, 54]},
        doc! {"a": 88},
        doc! {"a": 255},
        doc! {"a": f64::NAN},
        doc! {"a": 1.1},
        doc! {"a": -1.1},
        doc! {"a": f64::INFINITY},
        doc! {"a": f64::NEG_INFINITY},
        doc! {"a": 1e19},
        doc! {"a": "1"},
        doc! {"a": true},
        doc! {"a": null},
        doc! {"b": 1},
    ];
    let cases = [
        (doc! {"a": {"$bitsAllSet": 0}}, 5),
        (doc! {"a": {"$bitsAllSet": 16}}, 3),
        (doc! {"a": {"$bitsAllClear": 0}}, 5),
        (doc! {"a": {"$bitsAllClear": 16}}, 2),
        (doc! {"a": {"$bitsAnySet": 255}}, 4),
        (doc! {"a": {"$bitsAnyClear": 255}}, 4),
    ];
    for (f, n) in cases {
        assert_eq!(count(f.clone(), &docs), n, "{f}");
    }
}

#[test]
fn bit_tests_on_bindata_test_bytes_least_significant_bit_first() {
    let docs = vec![
        doc! {"a": bin(&[0; 21])},
        doc! {"a": bin(&[0, 0x03, 0x60])},
        doc! {"a": bin(&[0xff; 21])},
    ];
    assert_eq!(
        count(doc! {"a": {"$bitsAllSet": bin(&[0, 0x03])}}, &docs),
        2
    );
    assert_eq!(count(doc! {"a": {"$bitsAllSet": [8, 9, 21, 22]}}, &docs), 2);
    assert_eq!(count(doc! {"a": {"$bitsAnySet": [0]}}, &docs), 1);
    assert_eq!(count(doc! {"a": {"$bitsAllClear": bin(&[0xff])}}, &docs), 2);
    assert_eq!(count(doc! {"a": {"$bitsAnyClear": bin(&[])}}, &docs), 0);
    // Positions past the end of the data read as clear.
    assert!(m(
        doc! {"a": {"$bitsAllClear": [1000]}},
        doc! {"a": bin(&[0xff])}
    ));
    assert!(!m(
        doc! {"a": {"$bitsAnySet": [1000]}},
        doc! {"a": bin(&[0xff])}
    ));
    // A numeric mask tests BinData values by its bit positions.
    assert!(m(
        doc! {"a": {"$bitsAllSet": 0x300}},
        doc! {"a": bin(&[0, 0x03])}
    ));
}

#[test]
fn bit_tests_match_any_array_element_and_work_in_elem_match_and_not() {
    assert!(m(doc! {"a": {"$bitsAllSet": 6}}, doc! {"a": [1, 7]}));
    assert!(!m(doc! {"a": {"$bitsAllSet": 6}}, doc! {"a": [1, 2]}));
    assert!(m(
        doc! {"a": {"$elemMatch": {"$bitsAnySet": 4, "$gt": 5}}},
        doc! {"a": [4, 6]}
    ));
    assert!(!m(
        doc! {"a": {"$elemMatch": {"$bitsAnySet": 1, "$gt": 5}}},
        doc! {"a": [3, 6]}
    ));
    assert!(m(
        doc! {"a": {"$elemMatch": {"b": {"$bitsAllClear": [0]}}}},
        doc! {"a": [{"b": 1}, {"b": 2}]}
    ));
    assert!(m(doc! {"a": {"$not": {"$bitsAnySet": 1}}}, doc! {"a": 2}));
    assert!(m(doc! {"a": {"$not": {"$bitsAnySet": 1}}}, doc! {}));
    assert!(!m(doc! {"a": {"$bitsAllClear": 1}}, doc! {}));
}

#[test]
fn decimal_values_are_rounded_to_the_nearest_integer_for_bit_tests() {
    let d = |s: &str| Bson::Decimal128(s.parse().unwrap());
    assert!(m(doc! {"a": {"$bitsAllSet": 2}}, doc! {"a": d("1.5")}));
    assert!(m(doc! {"a": {"$bitsAllSet": 2}}, doc! {"a": d("2.5")}));
    assert!(m(doc! {"a": {"$bitsAllSet": 3}}, doc! {"a": d("3")}));
    // NaN and out-of-range decimals read as the 64-bit minimum (only the sign bit set).
    assert!(m(doc! {"a": {"$bitsAllSet": [63]}}, doc! {"a": d("NaN")}));
    assert!(m(doc! {"a": {"$bitsAllClear": 1}}, doc! {"a": d("1E+40")}));
}

fn err_of(filter: Document) -> (i32, String) {
    let e = err(filter);
    (e.code(), e.to_string())
}

#[test]
fn bad_bitmasks_fail_to_parse_with_mongodb_messages() {
    assert_eq!(
        err_of(doc! {"a": {"$bitsAllSet": -1}}),
        (
            9,
            "Expected a non-negative number in: $bitsAllSet: -1".into()
        )
    );
    assert_eq!(
        err_of(doc! {"a": {"$bitsAnyClear": -1.0}}),
        (
            9,
            "Expected a non-negative number in: $bitsAnyClear: -1.0".into()
        )
    );
    assert_eq!(
        err_of(doc! {"a": {"$bitsAllClear": 1.2}}),
        (9, "Expected an integer: $bitsAllClear: 1.2".into())
    );
    assert_eq!(
        err_of(doc! {"a": {"$bitsAllClear": 1e19}}).0,
        9,
        "a double past 2^63"
    );
    assert_eq!(
        err_of(doc! {"a": {"$bitsAnySet": f64::NAN}}).0,
        9,
        "a NaN bitmask"
    );
    assert_eq!(
        err_of(doc! {"a": {"$bitsAllSet": "123"}}),
        (
            2,
            "a takes an Array, a number, or a BinData but received: $bitsAllSet: \"123\"".into()
        )
    );
    assert_eq!(
        err_of(doc! {"a.b": {"$bitsAnySet": null}}),
        (
            2,
            "a.b takes an Array, a number, or a BinData but received: $bitsAnySet: null".into()
        )
    );
    assert_eq!(
        err_of(doc! {"a": {"$not": {"$bitsAnySet": true}}}),
        (
            2,
            "a takes an Array, a number, or a BinData but received: $bitsAnySet: true".into()
        )
    );
}

#[test]
fn bad_bit_positions_are_bad_values_naming_the_array_index() {
    assert_eq!(
        err_of(doc! {"a": {"$bitsAllSet": [1, -1]}}),
        (
            2,
            "Failed to parse bit position. Expected a non-negative number in: 1: -1".into()
        )
    );
    assert_eq!(
        err_of(doc! {"a": {"$bitsAllSet": ["123"]}}),
        (
            2,
            "Failed to parse bit position. Expected a number in: 0: \"123\"".into()
        )
    );
    assert_eq!(
        err_of(doc! {"a": {"$bitsAllSet": [1.5]}}),
        (
            2,
            "Failed to parse bit position. Expected an integer: 0: 1.5".into()
        )
    );
    assert_eq!(
        err_of(doc! {"a": {"$bitsAllSet": [4_294_967_296i64]}}),
        (
            2,
            "Failed to parse bit position. Cannot represent 0: 4294967296 in an int".into()
        )
    );
    assert!(m(doc! {"a": {"$bitsAllSet": [2.0]}}, doc! {"a": 4}));
}
