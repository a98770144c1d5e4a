//! Unit tests of the index spec translation (cases from MongoDB's
//! time-series index jstests).

use super::*;
use crate::options::Granularity;

fn opts() -> TimeseriesOptions {
    TimeseriesOptions::new("tm", Some("mm"))
}

fn key(k: Document) -> Document {
    bucket_key_pattern(&opts(), &k).unwrap()
}

#[test]
fn meta_keys_map_to_meta_with_the_same_value() {
    assert_same!(key(doc! {"mm": 1}), doc! {"meta": 1});
    assert_same!(key(doc! {"mm": -1}), doc! {"meta": -1});
    assert_same!(key(doc! {"mm.tag1": 1}), doc! {"meta.tag1": 1});
    assert_same!(
        key(doc! {"mm.tag1": 1, "mm.tag2": -1}),
        doc! {"meta.tag1": 1, "meta.tag2": -1}
    );
    assert_same!(key(doc! {"mm": "hashed"}), doc! {"meta": "hashed"});
    assert_same!(
        key(doc! {"mm.location": "2dsphere", "mm.tag1": -1}),
        doc! {"meta.location": "2dsphere", "meta.tag1": -1}
    );
    assert_same!(
        key(doc! {"mm.location": "2d"}),
        doc! {"meta.location": "2d"}
    );
    assert_same!(key(doc! {"mm.$**": 1}), doc! {"meta.$**": 1});
}

#[test]
fn time_keys_map_to_control_bounds() {
    assert_same!(
        key(doc! {"tm": 1}),
        doc! {"control.min.tm": 1, "control.max.tm": 1}
    );
    assert_same!(
        key(doc! {"tm": -1}),
        doc! {"control.max.tm": -1, "control.min.tm": -1}
    );
    assert_same!(
        key(doc! {"mm.tag1": 1, "tm": -1}),
        doc! {"meta.tag1": 1, "control.max.tm": -1, "control.min.tm": -1}
    );
    assert_same!(
        key(doc! {"mm.tag1": -1, "mm.tag2": 1, "tm": 1}),
        doc! {"meta.tag1": -1, "meta.tag2": 1, "control.min.tm": 1, "control.max.tm": 1}
    );
    // The user's value (type included) is kept.
    assert_same!(
        key(doc! {"tm": 2.5}),
        doc! {"control.min.tm": 2.5, "control.max.tm": 2.5}
    );
}

#[test]
fn measurement_keys_put_min_first_when_ascending() {
    assert_same!(
        key(doc! {"x": 1}),
        doc! {"control.min.x": 1, "control.max.x": 1}
    );
    assert_same!(
        key(doc! {"x": -1}),
        doc! {"control.max.x": -1, "control.min.x": -1}
    );
    assert_same!(
        key(doc! {"x": 1, "mm.tag": -1, "y": -1, "tm": 1}),
        doc! {
            "control.min.x": 1, "control.max.x": 1, "meta.tag": -1,
            "control.max.y": -1, "control.min.y": -1,
            "control.min.tm": 1, "control.max.tm": 1,
        }
    );
    assert_same!(
        key(doc! {"loc": "2dsphere"}),
        doc! {"data.loc": "2dsphere_bucket"}
    );
}

#[test]
fn without_meta_field_the_meta_name_is_a_measurement() {
    let o = TimeseriesOptions::new("tm", None);
    assert_same!(
        bucket_key_pattern(&o, &doc! {"mm": 1}).unwrap(),
        doc! {"control.min.mm": 1, "control.max.mm": 1}
    );
    // A field sharing only a prefix with the metaField is a measurement.
    assert_same!(
        key(doc! {"mmx": 1}),
        doc! {"control.min.mmx": 1, "control.max.mmx": 1}
    );
}

#[test]
fn bad_keys_are_bad_value_with_mongodb_text() {
    let e = bucket_key_pattern(&opts(), &doc! {}).unwrap_err();
    assert_same!(
        (e.code(), e.message()),
        (2, "Empty object is not a valid index spec")
    );
    let e = bucket_key_pattern(&opts(), &doc! {"$natural": 1}).unwrap_err();
    assert_same!(
        e.message(),
        "Invalid index spec (perhaps it's a valid hint, that was incorrectly passed to \
         createBucketsSpecFromTimeseriesSpec): { $natural: 1 }"
    );
    assert_same!(
        bucket_key_pattern(&opts(), &doc! {"$hint": "x"})
            .unwrap_err()
            .code(),
        2
    );
    let e = bucket_key_pattern(&opts(), &doc! {"tm": "hashed"}).unwrap_err();
    assert_same!(
        e.message(),
        "Invalid index spec for time-series collection: { tm: \"hashed\" }. Indexes on the time \
         field must be ascending or descending (numbers only): tm: \"hashed\""
    );
    let e = bucket_key_pattern(&opts(), &doc! {"x": 1, "y": "hashed"}).unwrap_err();
    assert_same!(
        e.message(),
        "Invalid index spec for time-series collection: { x: 1, y: \"hashed\" }. Indexes on \
         measurement fields must be ascending or descending (numbers only), or '2dsphere': y: \
         \"hashed\""
    );
}

#[test]
fn create_indexes_rewraps_failures() {
    for k in [
        doc! {"_id": "hashed"},
        doc! {"x": "hashed"},
        doc! {"x": 1, "y": "hashed"},
        doc! {"mm.tag": 1, "x": "hashed"},
        doc! {"x": 1, "mm.tag": -1, "y": "hashed"},
        doc! {"loc": "2dsphere_bucket"},
        doc! {"x": "2d"},
        doc! {},
        doc! {"$natural": -1},
    ] {
        let e = to_bucket_index(&opts(), &k).unwrap_err();
        assert_same!(e.code(), 67, "{k:?}");
        assert!(e.message().starts_with("BadValue: "), "{e:?}");
    }
    let e = to_bucket_index(&opts(), &doc! {"mm": "text"}).unwrap_err();
    assert_same!(
        (e.code(), &*e.code_name(), e.message()),
        (
            72,
            "InvalidOptions",
            "Text indexes are not supported on time-series collections"
        )
    );
    assert_same!(
        to_bucket_index(&opts(), &doc! {"a": 1, "b": "text"})
            .unwrap_err()
            .code(),
        72
    );
    // The first plugin decides: 2dsphere first, then text is a measurement error.
    assert_same!(
        to_bucket_index(&opts(), &doc! {"l": "2dsphere", "b": "text"})
            .unwrap_err()
            .code(),
        67
    );
}

#[test]
fn wildcards_on_measurements_fail_but_not_on_meta() {
    for k in [
        doc! {"_id.$**": 1},
        doc! {"$**": 1},
        doc! {"x": 1, "y.$**": 1},
        doc! {"$**": -1, "x": 1},
        doc! {"mm.tag": 1, "x.$**": 1},
        doc! {"$**": 1, "mm.tag": -1},
    ] {
        let e = to_bucket_index(&opts(), &k).unwrap_err();
        assert_same!(e.code(), 7_246_201, "{k:?}");
    }
    assert_same!(
        to_bucket_index(&opts(), &doc! {"mm.$**": 1}).unwrap(),
        doc! {"meta.$**": 1}
    );
}

#[test]
fn drop_and_coll_mod_failures_are_index_not_found() {
    let e = to_bucket_key_for(&opts(), &doc! {"x": "hashed"}, KeyUse::DropIndexes).unwrap_err();
    assert_same!((e.code(), &*e.code_name()), (27, "IndexNotFound"));
    let e = to_bucket_key_for(&opts(), &doc! {"tm": "x"}, KeyUse::CollMod)
        .unwrap_err()
        .with_command_request(&doc! {"collMod": "c"});
    assert_same!(e.code(), 27);
    assert!(e
        .message()
        .ends_with(" Command request: { collMod: \"c\" }"));
    assert_same!(
        to_bucket_key_for(&opts(), &doc! {"tm": -1}, KeyUse::DropIndexes).unwrap(),
        doc! {"control.max.tm": -1, "control.min.tm": -1}
    );
}

#[test]
fn plugin_name_is_the_first_string_or_wildcard() {
    assert_same!(plugin_name(&doc! {"a": 1}), "");
    assert_same!(plugin_name(&doc! {"a": 1, "b": "text", "c": "2d"}), "text");
    assert_same!(plugin_name(&doc! {"a.$**": 1, "b": "text"}), "wildcard");
}

#[test]
fn reverse_mapping_round_trips() {
    for k in [
        doc! {"mm": 1},
        doc! {"mm": -1},
        doc! {"mm.tag1": 1, "mm.tag2": -1},
        doc! {"tm": 1},
        doc! {"tm": -1},
        doc! {"mm.tag1": 1, "tm": -1},
        doc! {"mm": "hashed"},
        doc! {"mm.location": "2dsphere", "mm.tag1": -1},
        doc! {"x": 1},
        doc! {"x": -1, "mm.a": 1, "y": 1},
        doc! {"loc": "2dsphere", "tm": 1},
    ] {
        let bucket = bucket_key_pattern(&opts(), &k).unwrap();
        assert_same!(
            from_bucket_index(&opts(), &bucket),
            Some(k.clone()),
            "{k:?}"
        );
    }
}

#[test]
fn reverse_mapping_rejects_foreign_keys() {
    for b in [
        doc! {"not_metadata": 1},
        doc! {"control.min.x": 1},
        doc! {"control.min.x": 1, "control.max.y": 1},
        doc! {"control.min.x": 1, "control.max.x": -1},
        doc! {"control.max.x": 1, "control.min.x": 1},
        doc! {"control.min.x": -1, "control.max.x": -1},
        doc! {"control.min.x": 1, "meta": 1},
        doc! {"control.min.tm": "hashed"},
        doc! {"data.loc": "2dsphere"},
        doc! {"_id": 1},
    ] {
        assert_same!(from_bucket_index(&opts(), &b), None::<Document>, "{b:?}");
    }
    // No metaField: `meta` is not translatable.
    let o = TimeseriesOptions::new("tm", None);
    assert_same!(from_bucket_index(&o, &doc! {"meta": 1}), None::<Document>);
    // control.max.<time> alone is skipped; control.min.<time> gives the direction.
    assert_same!(
        from_bucket_index(&opts(), &doc! {"control.min.tm": 1}),
        Some(doc! {"tm": 1})
    );
    assert_same!(
        from_bucket_index(&opts(), &doc! {"control.max.tm": -1}),
        Some(doc! {})
    );
}

#[test]
fn default_index_only_with_meta_field() {
    let d = default_index(&opts()).unwrap();
    assert_same!(
        d,
        doc! {"v": 2, "name": "mm_1_tm_1", "key": {"meta": 1, "control.min.tm": 1, "control.max.tm": 1}}
    );
    assert_same!(
        view_index_spec(&opts(), &d),
        Some(doc! {"v": 2, "name": "mm_1_tm_1", "key": {"mm": 1, "tm": 1}})
    );
    assert_same!(
        default_index(&TimeseriesOptions::new("tm", None)),
        None::<Document>
    );
    let other = default_index(&TimeseriesOptions::new("time", Some("m"))).unwrap();
    assert_same!(other.get_str("name").unwrap(), "m_1_time_1");
}

#[test]
fn view_spec_prefers_original_spec() {
    let bucket = doc! {
        "v": 2,
        "key": {"control.min.a": 1, "control.max.a": 1},
        "name": "a_1",
        "originalSpec": {"key": {"a": 1}, "name": "a_1", "v": 2},
    };
    assert_same!(
        view_index_spec(&opts(), &bucket),
        Some(doc! {"key": {"a": 1}, "name": "a_1", "v": 2})
    );
    let geo = doc! {
        "v": 2,
        "key": {"data.loc": "2dsphere_bucket"},
        "name": "loc_2dsphere",
        "2dsphereIndexVersion": 3,
        "originalSpec": {"key": {"loc": "2dsphere"}, "name": "loc_2dsphere"},
    };
    assert_same!(
        view_index_spec(&opts(), &geo),
        Some(doc! {"key": {"loc": "2dsphere"}, "name": "loc_2dsphere", "2dsphereIndexVersion": 3})
    );
    // Untranslatable buckets index without originalSpec: hidden from the view.
    assert_same!(
        view_index_spec(
            &opts(),
            &doc! {"v": 2, "key": {"not_metadata": 1}, "name": "n"}
        ),
        None::<Document>
    );
    let listed = view_index_specs(
        &opts(),
        &[
            default_index(&opts()).unwrap(),
            doc! {"v": 2, "key": {"not_metadata": 1}, "name": "n"},
            bucket.clone(),
        ],
    );
    assert_same!(
        listed,
        vec![
            doc! {"v": 2, "name": "mm_1_tm_1", "key": {"mm": 1, "tm": 1}},
            doc! {"key": {"a": 1}, "name": "a_1", "v": 2},
        ]
    );
    // Other options are kept in place.
    assert_same!(
        view_index_spec(
            &opts(),
            &doc! {"v": 2, "key": {"meta.a": 1}, "name": "x", "hidden": true, "sparse": true}
        ),
        Some(doc! {"v": 2, "key": {"mm.a": 1}, "name": "x", "hidden": true, "sparse": true})
    );
}

#[test]
fn translate_spec_meta_only_has_no_original_spec() {
    let out = translate_index_spec(
        &opts(),
        &doc! {"key": {"mm.tag": 1, "tm": -1}, "name": "i", "hidden": true},
    )
    .unwrap();
    assert_same!(
        out,
        doc! {
            "name": "i",
            "hidden": true,
            "key": {"meta.tag": 1, "control.max.tm": -1, "control.min.tm": -1},
        }
    );
}

#[test]
fn translate_spec_measurement_keeps_original_spec() {
    let spec = doc! {"key": {"a": 1}, "name": "a_1"};
    let out = translate_index_spec(&opts(), &spec).unwrap();
    assert_same!(
        out,
        doc! {"name": "a_1", "key": {"control.min.a": 1, "control.max.a": 1}, "originalSpec": spec.clone()}
    );
    assert_same!(view_index_spec(&opts(), &out), Some(spec));
}

#[test]
fn translate_spec_partial_filter() {
    let spec = doc! {"key": {"a": 1}, "name": "a_1", "partialFilterExpression": {"mm.bucket": {"$gte": "B"}, "b": {"$gte": 0}}};
    let out = translate_index_spec(&opts(), &spec).unwrap();
    assert_same!(
        out.get_document("partialFilterExpression").unwrap(),
        &doc! {"meta.bucket": {"$gte": "B"}, "control.max.b": {"$_internalExprGte": 0}}
    );
    assert_same!(out.get_document("originalSpec").unwrap(), &spec);
    // Meta-only key with a partial filter also keeps the original spec.
    let spec = doc! {"key": {"mm": 1}, "name": "m", "partialFilterExpression": {"mm": {"$gt": 5}}};
    let out = translate_index_spec(&opts(), &spec).unwrap();
    assert!(out.contains_key("originalSpec"));

    let e = translate_index_spec(
        &opts(),
        &doc! {"key": {"a": 1}, "partialFilterExpression": 123},
    )
    .unwrap_err();
    assert_same!(
        (e.code(), e.message()),
        (
            10065,
            "invalid parameter: expected an object (partialFilterExpression)"
        )
    );
    let e = translate_index_spec(
        &opts(),
        &doc! {"key": {"a": 1}, "collation": {"locale": "simple"}, "partialFilterExpression": {"a": {"$lt": "25"}}},
    )
    .unwrap_err();
    assert_same!(
        (e.code(), e.message()),
        (
            85,
            "On a time-series collection, partialFilterExpression and collation arguments are \
             incompatible"
        )
    );
    let e = translate_index_spec(
        &opts(),
        &doc! {"key": {"a": 1}, "partialFilterExpression": {"a": {}}},
    )
    .unwrap_err();
    assert_same!(e.code(), 5_916_301);
}

#[test]
fn translate_spec_rejections() {
    let o = opts();
    let code = |spec: Document| translate_index_spec(&o, &spec).unwrap_err().code();
    // Unique: 72 (unique: false passes through).
    assert_same!(code(doc! {"key": {"mm": 1}, "unique": true}), 72);
    assert_same!(
        translate_index_spec(&o, &doc! {"key": {"mm": 1}, "unique": false}).unwrap(),
        doc! {"unique": false, "key": {"meta": 1}}
    );
    // Text: 72; untranslatable: 67.
    assert_same!(code(doc! {"key": {"mm": "text"}}), 72);
    assert_same!(code(doc! {"key": {"x": "hashed"}}), 67);
    assert_same!(code(doc! {"key": 1}), 10065);
    // Sparse only on time / meta (checked whatever its value).
    for k in [
        doc! {"x": 1},
        doc! {"y": -1},
        doc! {"x": 1, "y": 1},
        doc! {"x": 1, "mm.loc": "2dsphere"},
        doc! {"tm": 1, "x": 1},
    ] {
        let e = translate_index_spec(&o, &doc! {"key": k, "sparse": true}).unwrap_err();
        assert_same!(
            (e.code(), e.message()),
            (
                72,
                "Sparse indexes are not supported on time-series measurements"
            )
        );
    }
    assert_same!(code(doc! {"key": {"x": 1}, "sparse": false}), 72);
    assert_same!(
        translate_index_spec(&o, &doc! {"key": {"tm": 1, "mm.tag": 1}, "sparse": true}).unwrap(),
        doc! {"sparse": true, "key": {"control.min.tm": 1, "control.max.tm": 1, "meta.tag": 1}}
    );
    // Errors come in the spec's field order.
    assert_same!(code(doc! {"unique": true, "key": {"x": "hashed"}}), 72);
    assert_same!(code(doc! {"key": {"x": "hashed"}, "unique": true}), 67);
    // Wildcard on a measurement: 7246201.
    assert_same!(code(doc! {"key": {"$**": 1}}), 7_246_201);
}

#[test]
fn ttl_indexes_need_a_meta_only_partial_filter_on_time() {
    let o = opts();
    let err = |spec: Document| translate_index_spec(&o, &spec).unwrap_err();
    let e = err(doc! {"key": {"tm": 1}, "expireAfterSeconds": 3600});
    assert_same!(
        (e.code(), e.message()),
        (
            72,
            "TTL indexes on time-series collections require a partialFilterExpression on the \
             metaField"
        )
    );
    assert_same!(
        err(doc! {"key": {"mm": 1}, "expireAfterSeconds": 3600}).code(),
        72
    );
    let on_meta = doc! {"mm": {"$gt": 5}};
    for filter in [
        doc! {"data": {"$gt": 5}},
        doc! {"mm": {"$gt": 5}, "data": {"$gt": 5}},
        doc! {"tm": {"$gt": bson::DateTime::from_millis(1_000_000)}},
    ] {
        let e = err(
            doc! {"key": {"tm": 1}, "partialFilterExpression": filter, "expireAfterSeconds": 400i64},
        );
        assert_same!(e.code(), 72);
    }
    let e = err(
        doc! {"key": {"mm": 1}, "partialFilterExpression": on_meta.clone(), "expireAfterSeconds": 400},
    );
    assert_same!(
        e.message(),
        "TTL indexes on non-time fields are not supported on time-series collections"
    );
    assert_same!(
        err(doc! {"key": {"data": 1}, "partialFilterExpression": on_meta.clone(), "expireAfterSeconds": 400})
            .code(),
        72
    );
    let e = err(
        doc! {"key": {"tm": 1, "mm": 1}, "partialFilterExpression": on_meta.clone(), "expireAfterSeconds": 400},
    );
    assert_same!(
        (e.code(), e.message()),
        (
            67,
            "TTL indexes are single-field indexes, compound indexes do not support TTL. Index \
             spec: { tm: 1, mm: 1 }"
        )
    );
    assert_same!(
        err(doc! {"key": {"tm": 1, "data": 1}, "partialFilterExpression": on_meta.clone(), "expireAfterSeconds": 400})
            .code(),
        67
    );
    let spec = doc! {
        "key": {"tm": 1},
        "name": "partialTTLIndex",
        "partialFilterExpression": on_meta,
        "expireAfterSeconds": 400i64,
    };
    let out = translate_index_spec(&o, &spec).unwrap();
    assert_same!(
        out.get_document("key").unwrap(),
        &doc! {"control.min.tm": 1}
    );
    assert_same!(out.get_i64("expireAfterSeconds").unwrap(), 400);
    assert_same!(
        out.get_document("partialFilterExpression").unwrap(),
        &doc! {"meta": {"$gt": 5}}
    );
    // The view shows the user's spec.
    assert_same!(view_index_spec(&o, &out), Some(spec));
    assert!(check_index_options(
        &o,
        &doc! {"key": {"tm": -1}, "partialFilterExpression": {}, "expireAfterSeconds": 1}
    )
    .is_ok());
}

#[test]
fn index_names_follow_the_driver_convention() {
    assert_same!(index_name(&doc! {"a": 1}), "a_1");
    assert_same!(index_name(&doc! {"mm": 1, "tm": -1}), "mm_1_tm_-1");
    assert_same!(index_name(&doc! {"loc": "2dsphere"}), "loc_2dsphere");
    assert_same!(index_name(&doc! {"a": 1.0, "b": 1.5}), "a_1_b_1.5");
    assert_same!(index_name(&doc! {"x": 1i64}), "x_1");
}

#[test]
fn ttl_cutoff_subtracts_expiry_and_bucket_span() {
    let o = opts();
    assert_same!(
        ttl_cutoff_millis(&o, 10_000_000, 100),
        10_000_000 - 100_000 - 3_600_000
    );
    let h = TimeseriesOptions::with_granularity("tm", None, Granularity::Hours);
    assert_same!(ttl_cutoff_millis(&h, 0, 0), -2_592_000_000i64);
    assert_same!(ttl_cutoff_millis(&o, i64::MIN, i64::MAX), i64::MIN);
}

#[test]
fn error_helpers() {
    let e = IndexSpecError::BadValue("x".into());
    assert_same!(e.status_string(), "BadValue: x");
    assert_same!(
        IndexSpecError::IndexOptionsConflict(String::new()).code_name(),
        "IndexOptionsConflict"
    );
    assert_same!(
        IndexSpecError::PartialFilter(String::new()).code_name(),
        "Location5916301"
    );
}

#[test]
fn hints_are_translated_when_they_are_keys() {
    let o = opts();
    assert_same!(
        hint_for_buckets(&o, &doc! {"tm": -1}),
        doc! {"control.max.tm": -1, "control.min.tm": -1}
    );
    assert_same!(
        hint_for_buckets(&o, &doc! {"$natural": 1}),
        doc! {"$natural": 1}
    );
    assert_same!(
        hint_for_buckets(&o, &doc! {"x": "hashed"}),
        doc! {"x": "hashed"}
    );
    assert!(!is_hint_index_key(&doc! {}));
    assert!(!is_hint_index_key(&doc! {"$hint": "name"}));
    assert!(is_hint_index_key(&doc! {"mm": 1}));
    let e = to_bucket_key_for(&o, &doc! {"x": "hashed"}, KeyUse::WriteHint).unwrap_err();
    assert_same!((e.code(), &*e.code_name()), (2, "BadValue"));
}
