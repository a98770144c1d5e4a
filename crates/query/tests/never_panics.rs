//! Property tests: parsing untrusted specifications never panics, and
//! evaluating whatever parses never panics either.

use bson::{Bson, Document};
use hourglass_query::{
    filter::Filter, pipeline::Pipeline, projection::Projection, sort::SortSpec, update::Update,
};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("a.b".to_string()),
        Just("a.0".to_string()),
        Just("_id".to_string()),
        Just("".to_string()),
        Just("$".to_string()),
        prop::sample::select(vec![
            "$eq",
            "$ne",
            "$gt",
            "$gte",
            "$lt",
            "$lte",
            "$in",
            "$nin",
            "$and",
            "$or",
            "$nor",
            "$not",
            "$exists",
            "$type",
            "$regex",
            "$options",
            "$elemMatch",
            "$size",
            "$all",
            "$mod",
            "$expr",
            "$set",
            "$unset",
            "$inc",
            "$mul",
            "$min",
            "$max",
            "$rename",
            "$push",
            "$addToSet",
            "$pull",
            "$pop",
            "$pullAll",
            "$each",
            "$slice",
            "$sort",
            "$position",
            "$currentDate",
            "$match",
            "$group",
            "$project",
            "$addFields",
            "$limit",
            "$skip",
            "$count",
            "$unwind",
            "$replaceRoot",
            "$sum",
            "$avg",
            "$add",
            "$divide",
            "$cond",
            "$literal",
            "$size",
            "$substr",
            "$toInt",
            "$sortByCount",
            "$map",
            "$filter",
            "$let",
            "$switch",
            "$arrayElemAt",
            "$pow",
            "$round",
        ])
        .prop_map(String::from),
        "[a-z$.]{0,4}",
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    let leaf = prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        any::<f64>().prop_map(Bson::Double),
        any::<bool>().prop_map(Bson::Boolean),
        Just(Bson::Null),
        prop::sample::select(vec![
            "$a", "$a.b", "$$ROOT", "$$x", "x", "", "int", "string", "$", "("
        ])
        .prop_map(|s| Bson::String(s.to_string())),
        Just(Bson::RegularExpression(bson::Regex {
            pattern: "a(".into(),
            options: "q".into()
        })),
        Just(Bson::MinKey),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            prop::collection::vec((key(), inner), 0..4)
                .prop_map(|kv| { Bson::Document(kv.into_iter().collect::<Document>()) }),
        ]
    })
}

fn document() -> impl Strategy<Value = Document> {
    prop::collection::vec((key(), value()), 0..4).prop_map(|kv| kv.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn filter_parse_and_match_never_panic(spec in document(), doc in document()) {
        if let Ok(f) = Filter::parse(&spec) {
            let _ = f.matches(&doc);
            let _ = f.id_equality();
            let _ = f.equality_seed();
        }
    }

    #[test]
    fn update_parse_and_apply_never_panic(spec in document(), doc in document(), insert in any::<bool>()) {
        if let Ok(u) = Update::parse(&spec) {
            let mut d = doc;
            let _ = u.apply(&mut d, insert);
        }
    }

    #[test]
    fn pipeline_parse_and_run_never_panic(stages in prop::collection::vec(document(), 0..3), docs in prop::collection::vec(document(), 0..3)) {
        if let Ok(p) = Pipeline::parse(&stages) {
            let _ = p.run(docs.clone());
        }
        if let Ok(u) = Update::parse_pipeline(&stages) {
            if let Some(mut d) = docs.into_iter().next() {
                let _ = u.apply(&mut d, false);
            }
        }
    }

    #[test]
    fn projection_and_sort_never_panic(spec in document(), a in document(), b in document()) {
        if let Ok(p) = Projection::parse(&spec) {
            let _ = p.apply(&a);
        }
        if let Ok(s) = SortSpec::parse(&spec) {
            let _ = s.compare(&a, &b);
        }
    }
}

/// Names used by the date, window, gap-filling and bucketing operators.
fn key2() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "date",
        "unit",
        "binSize",
        "timezone",
        "startOfWeek",
        "startDate",
        "endDate",
        "amount",
        "format",
        "dateString",
        "onError",
        "onNull",
        "input",
        "n",
        "by",
        "output",
        "window",
        "documents",
        "range",
        "field",
        "step",
        "bounds",
        "partitionByFields",
        "partitionBy",
        "sortBy",
        "groupBy",
        "boundaries",
        "default",
        "buckets",
        "method",
        "p",
        "alpha",
        "N",
        "value",
        "to",
        "t",
        "v",
        "$dateTrunc",
        "$dateAdd",
        "$dateSubtract",
        "$dateDiff",
        "$dateToString",
        "$dateFromString",
        "$dateToParts",
        "$dateFromParts",
        "$hour",
        "$week",
        "$isoWeek",
        "$convert",
        "$trim",
        "$regexMatch",
        "$replaceAll",
        "$slice",
        "$range",
        "$zip",
        "$sortArray",
        "$reduce",
        "$getField",
        "$setField",
        "$indexOfCP",
        "$firstN",
        "$maxN",
        "$topN",
        "$bottom",
        "$median",
        "$percentile",
        "$stdDevPop",
        "$shift",
        "$derivative",
        "$integral",
        "$expMovingAvg",
        "$rank",
        "$locf",
        "$linearFill",
        "$bucket",
        "$bucketAuto",
        "$facet",
        "$sample",
        "$densify",
        "$fill",
        "$setWindowFields",
        "$redact",
        "$documents",
        "$sum",
        "$push",
    ])
    .prop_map(String::from)
}

fn value2() -> impl Strategy<Value = Bson> {
    let leaf = prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        any::<f64>().prop_map(Bson::Double),
        (-1i32..40).prop_map(Bson::Int32),
        any::<i64>().prop_map(|ms| Bson::DateTime(bson::DateTime::from_millis(ms))),
        (0i64..4_000_000_000_000).prop_map(|ms| Bson::DateTime(bson::DateTime::from_millis(ms))),
        Just(Bson::Null),
        prop::sample::select(vec![
            "$t",
            "$v",
            "hour",
            "month",
            "week",
            "day",
            "millisecond",
            "year",
            "full",
            "partition",
            "current",
            "unbounded",
            "UTC",
            "+05:30",
            "-0800",
            "America/New_York",
            "Europe/Paris",
            "%Y-%m-%d %H:%M:%S.%L %z %Z %j %U %V %G",
            "%",
            "2021-03-04",
            "monday",
            "locf",
            "linear",
            "approximate",
            "int",
            "date",
            "$$KEEP",
            "$$DESCEND",
        ])
        .prop_map(|s| Bson::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            prop::collection::vec((key2(), inner), 0..4)
                .prop_map(|kv| Bson::Document(kv.into_iter().collect::<Document>())),
        ]
    })
}

fn input_doc() -> impl Strategy<Value = Document> {
    (any::<i64>(), any::<i32>(), 0i32..3).prop_map(|(t, v, m)| {
        bson::doc! {"t": bson::DateTime::from_millis(t), "v": v, "m": m}
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn time_series_stages_and_operators_never_panic(
        name in key2(),
        arg in value2(),
        docs in prop::collection::vec(input_doc(), 0..4),
    ) {
        let mut stage = Document::new();
        stage.insert(name.clone(), arg.clone());
        if let Ok(p) = Pipeline::parse(&[stage]) {
            let _ = p.run(docs.clone());
        }
        let mut expr = Document::new();
        expr.insert(name, arg);
        let project = bson::doc! {"$project": {"x": Bson::Document(expr.clone())}};
        if let Ok(p) = Pipeline::parse(&[project]) {
            let _ = p.run(docs.clone());
        }
        let group = bson::doc! {"$setWindowFields": {"sortBy": {"t": 1}, "output": {"x": Bson::Document(expr)}}};
        if let Ok(p) = Pipeline::parse(&[group]) {
            let _ = p.run(docs);
        }
    }
}
