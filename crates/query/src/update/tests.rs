//! Unit tests of the `update` module, named after the behaviour they pin.

use super::*;
use bson::doc;

fn upd(spec: Document, mut d: Document) -> Document {
    Update::parse(&spec).unwrap().apply(&mut d, false).unwrap();
    d
}

fn apply_err(spec: Document, mut d: Document) -> QueryError {
    Update::parse(&spec)
        .unwrap()
        .apply(&mut d, false)
        .unwrap_err()
}

#[test]
fn set_and_unset_with_dotted_paths() {
    let d = doc! {"_id": 1, "a": {"b": 1}};
    assert_eq!(
        upd(doc! {"$set": {"a.c": 2, "x.y": 3}}, d.clone()),
        doc! {"_id": 1, "a": {"b": 1, "c": 2}, "x": {"y": 3}}
    );
    assert_eq!(
        upd(doc! {"$unset": {"a.b": ""}}, d),
        doc! {"_id": 1, "a": {}}
    );
}

#[test]
fn new_fields_are_created_in_path_order() {
    let d = upd(doc! {"$set": {"b": 1, "a": 1}}, doc! {"_id": 1});
    assert_eq!(d.keys().collect::<Vec<_>>(), vec!["_id", "a", "b"]);
}

#[test]
fn apply_reports_whether_document_changed() {
    let u = Update::parse(&doc! {"$set": {"a": 1}}).unwrap();
    let mut d = doc! {"_id": 1, "a": 1};
    assert!(!u.apply(&mut d, false).unwrap());
    let mut d = doc! {"_id": 1, "a": 2};
    assert!(u.apply(&mut d, false).unwrap());
}

#[test]
fn inc_and_mul_follow_type_promotion() {
    let d = doc! {"_id": 1, "i": 2147483647, "l": 5i64, "f": 1.5};
    assert_eq!(
        upd(doc! {"$inc": {"i": 1, "l": 1, "f": 1, "n": 2}}, d.clone()),
        doc! {"_id": 1, "i": 2147483648i64, "l": 6i64, "f": 2.5, "n": 2}
    );
    assert_eq!(
        upd(doc! {"$mul": {"l": 2, "f": 2, "n": 3i64}}, d),
        doc! {"_id": 1, "i": 2147483647, "l": 10i64, "f": 3.0, "n": 0i64}
    );
}

#[test]
fn inc_on_non_number_is_type_mismatch() {
    let e = apply_err(doc! {"$inc": {"a": 1}}, doc! {"_id": 1, "a": "x"});
    assert_eq!(e.code(), 14);
    assert_eq!(
        e.to_string(),
        "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of non-numeric type string"
    );
    assert_eq!(
        Update::parse(&doc! {"$inc": {"a": "x"}})
            .unwrap_err()
            .code(),
        14
    );
}

#[test]
fn min_max_only_replace_when_better() {
    let d = doc! {"_id": 1, "a": 5, "b": 5};
    assert_eq!(
        upd(doc! {"$min": {"a": 3, "b": 7}, "$max": {"c": 1}}, d.clone()),
        doc! {"_id": 1, "a": 3, "b": 5, "c": 1}
    );
    assert_eq!(
        upd(doc! {"$max": {"a": 3, "b": 7}}, d),
        doc! {"_id": 1, "a": 5, "b": 7}
    );
}

#[test]
fn rename_moves_values_and_ignores_missing() {
    let d = doc! {"_id": 1, "a": 1, "b": {"c": 2}};
    assert_eq!(
        upd(doc! {"$rename": {"a": "z", "b.c": "b.d", "nope": "q"}}, d),
        doc! {"_id": 1, "b": {"d": 2}, "z": 1}
    );
    assert_eq!(
        Update::parse(&doc! {"$rename": {"a": 1}})
            .unwrap_err()
            .code(),
        2
    );
}

#[test]
fn set_on_insert_applies_only_for_upsert_inserts() {
    let u = Update::parse(&doc! {"$setOnInsert": {"a": 1}, "$set": {"b": 2}}).unwrap();
    let mut d = doc! {"_id": 1};
    u.apply(&mut d, false).unwrap();
    assert_eq!(d, doc! {"_id": 1, "b": 2});
    let mut d = doc! {"_id": 1};
    u.apply(&mut d, true).unwrap();
    assert_eq!(d, doc! {"_id": 1, "a": 1, "b": 2});
}

#[test]
fn current_date_sets_date_or_timestamp() {
    let d = upd(
        doc! {"$currentDate": {"a": true, "b": {"$type": "timestamp"}}},
        doc! {"_id": 1},
    );
    assert!(matches!(d.get("a"), Some(Bson::DateTime(_))));
    assert!(matches!(d.get("b"), Some(Bson::Timestamp(_))));
}

#[test]
fn push_plain_and_with_modifiers() {
    let d = doc! {"_id": 1, "a": [3, 1]};
    assert_eq!(
        upd(doc! {"$push": {"a": 2}}, d.clone()),
        doc! {"_id": 1, "a": [3, 1, 2]}
    );
    assert_eq!(
        upd(doc! {"$push": {"n": [1]}}, d.clone()),
        doc! {"_id": 1, "a": [3, 1], "n": [[1]]}
    );
    assert_eq!(
        upd(
            doc! {"$push": {"a": {"$each": [5, 4], "$sort": 1, "$slice": 3}}},
            d.clone()
        ),
        doc! {"_id": 1, "a": [1, 3, 4]}
    );
    assert_eq!(
        upd(
            doc! {"$push": {"a": {"$each": [9], "$position": 0}}},
            d.clone()
        ),
        doc! {"_id": 1, "a": [9, 3, 1]}
    );
    assert_eq!(
        upd(
            doc! {"$push": {"a": {"$each": [9], "$slice": -2}}},
            d.clone()
        ),
        doc! {"_id": 1, "a": [1, 9]}
    );
    let docs = doc! {"_id": 1, "a": [{"s": 2}, {"s": 1}]};
    assert_eq!(
        upd(
            doc! {"$push": {"a": {"$each": [{"s": 3}], "$sort": {"s": -1}}}},
            docs
        ),
        doc! {"_id": 1, "a": [{"s": 3}, {"s": 2}, {"s": 1}]}
    );
}

#[test]
fn push_onto_non_array_is_bad_value() {
    let e = apply_err(doc! {"$push": {"a": 1}}, doc! {"_id": 1, "a": "x"});
    assert_eq!(e.code(), 2);
    assert_eq!(
        e.to_string(),
        "The field 'a' must be an array but is of type string in document {_id: 1}"
    );
    assert_eq!(
        Update::parse(&doc! {"$push": {"a": {"$each": 1}}})
            .unwrap_err()
            .code(),
        2
    );
}

#[test]
fn add_to_set_skips_existing_values() {
    let d = doc! {"_id": 1, "a": [1, 2]};
    assert_eq!(
        upd(doc! {"$addToSet": {"a": 2}}, d.clone()),
        doc! {"_id": 1, "a": [1, 2]}
    );
    assert_eq!(
        upd(doc! {"$addToSet": {"a": {"$each": [2, 3, 3]}}}, d),
        doc! {"_id": 1, "a": [1, 2, 3]}
    );
}

#[test]
fn pull_by_value_condition_and_document_filter() {
    let d = doc! {"_id": 1, "a": [1, 5, 6, 1], "b": [{"x": 1, "y": 1}, {"x": 2}]};
    assert_eq!(
        upd(doc! {"$pull": {"a": 1}}, d.clone())
            .get_array("a")
            .unwrap(),
        &vec![Bson::Int32(5), Bson::Int32(6)]
    );
    assert_eq!(
        upd(doc! {"$pull": {"a": {"$gte": 5}}}, d.clone())
            .get_array("a")
            .unwrap(),
        &vec![Bson::Int32(1), Bson::Int32(1)]
    );
    assert_eq!(
        upd(doc! {"$pull": {"b": {"x": 1}}}, d.clone())
            .get_array("b")
            .unwrap(),
        &vec![Bson::Document(doc! {"x": 2})]
    );
    assert_eq!(
        upd(doc! {"$pullAll": {"a": [1, 6]}}, d)
            .get_array("a")
            .unwrap(),
        &vec![Bson::Int32(5)]
    );
}

#[test]
fn pop_removes_first_or_last() {
    let d = doc! {"_id": 1, "a": [1, 2, 3]};
    assert_eq!(
        upd(doc! {"$pop": {"a": 1}}, d.clone()),
        doc! {"_id": 1, "a": [1, 2]}
    );
    assert_eq!(
        upd(doc! {"$pop": {"a": -1}}, d),
        doc! {"_id": 1, "a": [2, 3]}
    );
    // MongoDB refuses any other argument as it parses the update (FailedToParse).
    assert_eq!(
        Update::parse(&doc! {"$pop": {"a": 2}}).unwrap_err().code(),
        9
    );
}

#[test]
fn unknown_modifier_is_failed_to_parse() {
    let e = Update::parse(&doc! {"$foo": {"a": 1}}).unwrap_err();
    assert_eq!(e.code(), 9);
    assert_eq!(e.to_string(), "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update specified as an array");
    assert_eq!(Update::parse(&doc! {"$set": 1}).unwrap_err().code(), 9);
}

#[test]
fn conflicting_paths_are_rejected() {
    let e = Update::parse(&doc! {"$set": {"a": 1}, "$inc": {"a": 1}}).unwrap_err();
    assert_eq!(e.code(), 40);
    assert_eq!(
        e.to_string(),
        "Updating the path 'a' would create a conflict at 'a'"
    );
    assert_eq!(
        Update::parse(&doc! {"$set": {"a.b": 1, "a": 1}})
            .unwrap_err()
            .code(),
        40
    );
    assert!(Update::parse(&doc! {"$set": {"a.b": 1, "a.c": 1}}).is_ok());
}

#[test]
fn id_is_immutable() {
    assert_eq!(
        apply_err(doc! {"$set": {"_id": 2}}, doc! {"_id": 1}).code(),
        66
    );
    assert_eq!(
        upd(doc! {"$set": {"_id": 1}}, doc! {"_id": 1}),
        doc! {"_id": 1}
    );
    assert_eq!(
        apply_err(doc! {"x": 1, "_id": 2}, doc! {"_id": 1}).code(),
        66
    );
}

fn immutable(e: QueryError) -> (i32, String) {
    (e.code(), e.to_string())
}

#[test]
fn operator_updates_changing_id_name_the_updated_path_only() {
    assert_eq!(
        immutable(apply_err(doc! {"$set": {"_id": 2}}, doc! {"_id": 1})),
        (
            66,
            "Performing an update on the path '_id' would modify the immutable field '_id'".into()
        )
    );
    assert_eq!(
        immutable(apply_err(
            doc! {"$set": {"_id.a": 2}},
            doc! {"_id": {"a": 1}}
        )),
        (
            66,
            "Performing an update on the path '_id.a' would modify the immutable field '_id'"
                .into()
        )
    );
    assert_eq!(
        immutable(apply_err(doc! {"$unset": {"_id": 1}}, doc! {"_id": 1})),
        (
            66,
            "Performing an update on the path '_id' would modify the immutable field '_id'".into()
        )
    );
    assert_eq!(
        immutable(apply_err(
            doc! {"$rename": {"b": "_id"}, "$set": {"a": 1}},
            doc! {"_id": 1, "b": 2}
        )),
        (
            66,
            "Performing an update on the path '_id' would modify the immutable field '_id'".into()
        )
    );
    // An equal value of another numeric type is no change: the stored _id stays.
    assert_eq!(
        upd(doc! {"$set": {"_id": 1.0}}, doc! {"_id": 1}),
        doc! {"_id": 1}
    );
}

#[test]
fn replacement_and_pipeline_updates_changing_id_report_the_altered_value() {
    let altered = (
        66,
        "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2"
            .to_string(),
    );
    assert_eq!(
        immutable(apply_err(doc! {"_id": 2, "x": 1}, doc! {"_id": 1})),
        altered
    );
    let mut d = doc! {"_id": 1};
    let e = Update::parse_pipeline(&[doc! {"$set": {"_id": 2}}])
        .unwrap()
        .apply(&mut d, false)
        .unwrap_err();
    assert_eq!(immutable(e), altered);
}

#[test]
fn replacement_keeps_id_first_and_rejects_dollar_fields() {
    assert_eq!(
        upd(doc! {"b": 1}, doc! {"_id": 1, "a": 1}),
        doc! {"_id": 1, "b": 1}
    );
    assert_eq!(
        Update::parse(&doc! {"a": 1, "$set": {"b": 1}})
            .unwrap_err()
            .code(),
        52
    );
}

#[test]
fn array_index_paths_and_padding() {
    assert_eq!(
        upd(doc! {"$set": {"a.2": 1}}, doc! {"_id": 1, "a": [0]}),
        doc! {"_id": 1, "a": [0, null, 1]}
    );
    assert_eq!(
        apply_err(doc! {"$set": {"a.b": 1}}, doc! {"_id": 1, "a": 1}).code(),
        28
    );
}

#[test]
fn pipeline_updates_reshape_documents() {
    let u = Update::parse_pipeline(&[
        doc! {"$set": {"c": {"$add": ["$a", 1]}}},
        doc! {"$unset": "a"},
    ])
    .unwrap();
    let mut d = doc! {"_id": 1, "a": 1};
    assert!(u.apply(&mut d, false).unwrap());
    assert_eq!(d, doc! {"_id": 1, "c": 2});
    assert_eq!(
        Update::parse_pipeline(&[doc! {"$group": {"_id": null}}])
            .unwrap_err()
            .code(),
        72
    );
}

#[test]
fn positional_operator_targets_first_element_the_query_matched() {
    let q = crate::filter::Filter::parse(&doc! {"o.k": "y"}).unwrap();
    let u = Update::parse(&doc! {"$inc": {"o.$.v": 10}}).unwrap();
    let mut d = doc! {"_id": 1, "o": [{"k": "x", "v": 1}, {"k": "y", "v": 2}]};
    assert!(u.apply_matched(&mut d, false, Some(&q)).unwrap());
    assert_eq!(
        d,
        doc! {"_id": 1, "o": [{"k": "x", "v": 1}, {"k": "y", "v": 12}]}
    );
    let err = u.apply(&mut d, false).unwrap_err();
    assert_eq!(err.code(), 2);
}

#[test]
fn positional_operator_fails_when_the_query_matched_no_element() {
    let u = Update::parse(&doc! {"$set": {"a.$": 9}}).unwrap();
    for q in [doc! {"_id": 1}, doc! {"_id": 1, "a": {"$exists": true}}] {
        let q = crate::filter::Filter::parse(&q).unwrap();
        let mut d = doc! {"_id": 1, "a": [1, 2]};
        let err = u.apply_matched(&mut d, false, Some(&q)).unwrap_err();
        assert_eq!(err.code(), 2);
        assert_eq!(d, doc! {"_id": 1, "a": [1, 2]});
    }
    let q = crate::filter::Filter::parse(&doc! {"_id": 1, "a": 2}).unwrap();
    let mut d = doc! {"_id": 1, "a": [1, 2]};
    assert!(u.apply_matched(&mut d, false, Some(&q)).unwrap());
    assert_eq!(d, doc! {"_id": 1, "a": [1, 9]});
}
