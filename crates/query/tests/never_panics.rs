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
