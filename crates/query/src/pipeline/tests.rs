//! Unit tests of the `pipeline` module, named after the behaviour they pin.

use super::*;
use bson::doc;

fn run(stages: Vec<Document>, input: Vec<Document>) -> Vec<Document> {
    Pipeline::parse(&stages).unwrap().run(input).unwrap()
}

fn perr(stages: Vec<Document>) -> QueryError {
    Pipeline::parse(&stages).unwrap_err()
}

fn input() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "k": "a", "v": 3},
        doc! {"_id": 2, "k": "b", "v": 1},
        doc! {"_id": 3, "k": "a", "v": 2},
    ]
}

#[test]
fn match_sort_skip_limit() {
    let out = run(
        vec![
            doc! {"$match": {"k": "a"}},
            doc! {"$sort": {"v": 1}},
            doc! {"$skip": 0},
            doc! {"$limit": 1},
        ],
        input(),
    );
    assert_eq!(out, vec![doc! {"_id": 3, "k": "a", "v": 2}]);
}

#[test]
fn leading_match_is_exposed_for_pushdown() {
    let p = Pipeline::parse(&[doc! {"$match": {"k": "a"}}, doc! {"$limit": 1}]).unwrap();
    assert!(p
        .leading_match()
        .is_some_and(|f| f.matches(&doc! {"k": "a"})));
    let p = Pipeline::parse(&[doc! {"$limit": 1}]).unwrap();
    assert!(p.leading_match().is_none());
}

#[test]
fn project_add_fields_unset_and_replace_root() {
    let out = run(
        vec![doc! {"$project": {"v": 1, "double": {"$multiply": ["$v", 2]}}}],
        input(),
    );
    assert_eq!(out[0], doc! {"_id": 1, "v": 3, "double": 6});
    let out = run(
        vec![
            doc! {"$addFields": {"w": "$v", "n.x": 1}},
            doc! {"$unset": ["k", "_id"]},
        ],
        input(),
    );
    assert_eq!(out[0], doc! {"v": 3, "w": 3, "n": {"x": 1}});
    let out = run(
        vec![doc! {"$replaceRoot": {"newRoot": {"key": "$k"}}}],
        input(),
    );
    assert_eq!(out[0], doc! {"key": "a"});
    let out = run(vec![doc! {"$replaceWith": "$$ROOT"}], input());
    assert_eq!(out, input());
}

#[test]
fn group_count_and_sort_by_count() {
    let out = run(
        vec![
            doc! {"$group": {"_id": "$k", "t": {"$sum": "$v"}}},
            doc! {"$sort": {"_id": 1}},
        ],
        input(),
    );
    assert_eq!(
        out,
        vec![doc! {"_id": "a", "t": 5}, doc! {"_id": "b", "t": 1}]
    );
    assert_eq!(
        run(vec![doc! {"$count": "n"}], input()),
        vec![doc! {"n": 3}]
    );
    assert!(run(vec![doc! {"$count": "n"}], vec![]).is_empty());
    let out = run(vec![doc! {"$sortByCount": "$k"}], input());
    assert_eq!(
        out,
        vec![doc! {"_id": "a", "count": 2}, doc! {"_id": "b", "count": 1}]
    );
}

#[test]
fn unwind_then_group() {
    let out = run(
        vec![
            doc! {"$unwind": "$t"},
            doc! {"$group": {"_id": "$t", "n": {"$sum": 1}}},
            doc! {"$sort": {"n": -1, "_id": 1}},
        ],
        vec![doc! {"t": ["x", "y"]}, doc! {"t": ["x"]}],
    );
    assert_eq!(
        out,
        vec![doc! {"_id": "x", "n": 2}, doc! {"_id": "y", "n": 1}]
    );
}

#[test]
fn stage_errors_use_mongodb_codes() {
    assert_eq!(perr(vec![doc! {"$foo": 1}]).code(), 40324);
    assert_eq!(
        perr(vec![doc! {"$foo": 1}]).to_string(),
        "Unrecognized pipeline stage name: '$foo'"
    );
    assert_eq!(perr(vec![doc! {"$match": {}, "$limit": 1}]).code(), 40323);
    assert_eq!(perr(vec![doc! {}]).code(), 40323);
    assert_eq!(
        perr(vec![doc! {"$group": {"n": {"$sum": 1}}}]).code(),
        15955
    );
    assert_eq!(perr(vec![doc! {"$limit": 0}]).code(), 15958);
    assert_eq!(perr(vec![doc! {"$limit": "x"}]).code(), 15957);
    assert_eq!(perr(vec![doc! {"$skip": -1}]).code(), 15956);
    assert_eq!(perr(vec![doc! {"$count": ""}]).code(), 40157);
    assert_eq!(perr(vec![doc! {"$count": "$x"}]).code(), 40158);
    assert_eq!(perr(vec![doc! {"$count": "a.b"}]).code(), 40160);
    assert_eq!(perr(vec![doc! {"$sort": {"a": 0}}]).code(), 15975);
    assert_eq!(perr(vec![doc! {"$match": 1}]).code(), 15959);
    assert_eq!(perr(vec![doc! {"$project": {}}]).code(), 51272);
    assert_eq!(perr(vec![doc! {"$unwind": "a"}]).code(), 28818);
}

#[test]
fn replace_root_with_non_document_errors() {
    let p = Pipeline::parse(&[doc! {"$replaceRoot": {"newRoot": "$v"}}]).unwrap();
    assert_eq!(p.run(input()).unwrap_err().code(), 40228);
}

/// An in-memory collection store for the cross-collection stages.
#[derive(Default)]
struct MemCtx {
    colls: std::sync::Mutex<std::collections::BTreeMap<String, Vec<Document>>>,
}

impl MemCtx {
    fn with(coll: &str, docs: Vec<Document>) -> MemCtx {
        let c = MemCtx::default();
        c.colls.lock().unwrap().insert(coll.into(), docs);
        c
    }
    fn get(&self, coll: &str) -> Vec<Document> {
        self.colls
            .lock()
            .unwrap()
            .get(coll)
            .cloned()
            .unwrap_or_default()
    }
}

impl PipelineContext for MemCtx {
    fn read_collection(&self, _db: &str, coll: &str) -> Result<Vec<Document>, QueryError> {
        Ok(self.get(coll))
    }
    fn replace_collection(
        &self,
        _db: &str,
        coll: &str,
        docs: Vec<Document>,
        _timeseries: Option<&Document>,
    ) -> Result<(), QueryError> {
        self.colls.lock().unwrap().insert(coll.into(), docs);
        Ok(())
    }
    fn find_matching(
        &self,
        _db: &str,
        coll: &str,
        key: &Document,
    ) -> Result<Vec<Document>, QueryError> {
        let f = Filter::parse(key)?;
        Ok(self
            .get(coll)
            .into_iter()
            .filter(|d| f.matches(d))
            .collect())
    }
    fn has_unique_index(
        &self,
        _db: &str,
        _coll: &str,
        _fields: &[String],
    ) -> Result<bool, QueryError> {
        Ok(false)
    }
    fn insert_document(&self, _db: &str, coll: &str, doc: Document) -> Result<(), QueryError> {
        self.colls
            .lock()
            .unwrap()
            .entry(coll.into())
            .or_default()
            .push(doc);
        Ok(())
    }
    fn replace_document(
        &self,
        _db: &str,
        coll: &str,
        id: &Bson,
        doc: Document,
    ) -> Result<(), QueryError> {
        let mut colls = self.colls.lock().unwrap();
        let docs = colls.entry(coll.into()).or_default();
        for d in docs.iter_mut() {
            if d.get("_id") == Some(id) {
                *d = doc.clone();
            }
        }
        Ok(())
    }
}

fn run_ctx(
    ctx: &MemCtx,
    stages: Vec<Document>,
    input: Vec<Document>,
) -> Result<Vec<Document>, QueryError> {
    let opts = RunOptions {
        context: Some(ctx),
        ..RunOptions::default()
    };
    Pipeline::parse(&stages)?.run_with(input, &opts)
}

#[test]
fn lookup_equality_pipeline_and_combined_forms() {
    let ctx = MemCtx::with(
        "f",
        vec![
            doc! {"_id": 10, "k": "a", "w": 1},
            doc! {"_id": 11, "k": "a", "w": 5},
            doc! {"_id": 12, "k": "b", "w": 2},
        ],
    );
    let out = run_ctx(
        &ctx,
        vec![doc! {"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "j"}}],
        input(),
    )
    .unwrap();
    assert_eq!(out[0].get_array("j").unwrap().len(), 2);
    assert_eq!(out[1].get_array("j").unwrap().len(), 1);
    let out = run_ctx(
        &ctx,
        vec![doc! {"$lookup": {"from": "f", "let": {"lim": "$v"}, "pipeline": [{"$match": {"$expr": {"$lt": ["$w", "$$lim"]}}}, {"$project": {"_id": 1}}], "as": "j"}}],
        input(),
    )
    .unwrap();
    assert_eq!(
        out[0].get_array("j").unwrap(),
        &vec![
            Bson::Document(doc! {"_id": 10}),
            Bson::Document(doc! {"_id": 12})
        ]
    );
    let out = run_ctx(
        &ctx,
        vec![doc! {"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "let": {"lim": "$v"}, "pipeline": [{"$match": {"$expr": {"$lt": ["$w", "$$lim"]}}}], "as": "j"}}],
        input(),
    )
    .unwrap();
    assert_eq!(out[0].get_array("j").unwrap().len(), 1);
    assert!(
        Pipeline::parse(&[doc! {"$lookup": {"from": "f", "localField": "k", "as": "j"}}]).is_err()
    );
    assert_eq!(
        Pipeline::parse(&[])
            .unwrap()
            .run_with(vec![], &RunOptions::default())
            .unwrap()
            .len(),
        0
    );
    assert!(Pipeline::parse(&[
        doc! {"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "j"}}
    ])
    .unwrap()
    .run(input())
    .is_err());
}

#[test]
fn union_with_out_and_merge() {
    let ctx = MemCtx::with("other", vec![doc! {"_id": 9, "k": "z"}]);
    let out = run_ctx(
        &ctx,
        vec![doc! {"$unionWith": {"coll": "other", "pipeline": [{"$project": {"k": 1}}]}}],
        input(),
    )
    .unwrap();
    assert_eq!(out.len(), 4);
    assert_eq!(out[3], doc! {"_id": 9, "k": "z"});
    let out = run_ctx(
        &ctx,
        vec![doc! {"$match": {"k": "a"}}, doc! {"$out": "dest"}],
        input(),
    )
    .unwrap();
    assert!(out.is_empty());
    assert_eq!(ctx.get("dest").len(), 2);
    run_ctx(
        &ctx,
        vec![doc! {"$merge": {"into": "dest", "whenMatched": "merge", "whenNotMatched": "insert"}}],
        vec![doc! {"_id": 1, "extra": true}, doc! {"_id": 5}],
    )
    .unwrap();
    let dest = ctx.get("dest");
    assert_eq!(dest.len(), 3);
    assert_eq!(dest[0], doc! {"_id": 1, "k": "a", "v": 3, "extra": true});
    run_ctx(&ctx, vec![doc! {"$merge": {"into": "dest", "on": "_id", "whenMatched": [{"$set": {"n": "$$new.n"}}], "whenNotMatched": "discard"}}], vec![doc! {"_id": 1, "n": 7}, doc! {"_id": 99}]).unwrap();
    assert_eq!(ctx.get("dest")[0].get_i32("n").unwrap(), 7);
    assert_eq!(ctx.get("dest").len(), 3);
    let e = run_ctx(
        &ctx,
        vec![doc! {"$merge": {"into": "dest", "whenMatched": "fail"}}],
        vec![doc! {"_id": 1}],
    )
    .unwrap_err();
    assert_eq!(e.code(), 11000);
    let e = run_ctx(
        &ctx,
        vec![doc! {"$merge": {"into": "dest", "whenNotMatched": "fail"}}],
        vec![doc! {"_id": 1000}],
    )
    .unwrap_err();
    assert_eq!(e.code(), 13113);
    assert_eq!(
        perr(vec![doc! {"$out": "x"}, doc! {"$limit": 1}]).code(),
        40601
    );
}

#[test]
fn bucket_bucket_auto_facet_sample_redact() {
    let docs: Vec<Document> = (1..=10).map(|i| doc! {"_id": i, "v": i}).collect();
    let out = run(
        vec![
            doc! {"$bucket": {"groupBy": "$v", "boundaries": [0, 5, 10], "default": "big", "output": {"n": {"$sum": 1}, "s": {"$sum": "$v"}}}},
        ],
        docs.clone(),
    );
    assert_eq!(
        out,
        vec![
            doc! {"_id": 0, "n": 4, "s": 10},
            doc! {"_id": 5, "n": 5, "s": 35},
            doc! {"_id": "big", "n": 1, "s": 10}
        ]
    );
    assert_eq!(
        Pipeline::parse(&[doc! {"$bucket": {"groupBy": "$v", "boundaries": [0, 5]}}])
            .unwrap()
            .run(docs.clone())
            .unwrap_err()
            .code(),
        40066
    );
    let out = run(
        vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 3}}],
        docs.clone(),
    );
    assert_eq!(out.len(), 3);
    assert_eq!(out[0], doc! {"_id": {"min": 1, "max": 4}, "count": 3});
    assert_eq!(out[2], doc! {"_id": {"min": 7, "max": 10}, "count": 4});
    let out = run(
        vec![
            doc! {"$facet": {"n": [{"$count": "c"}], "top": [{"$sort": {"v": -1}}, {"$limit": 1}, {"$project": {"_id": 1}}]}},
        ],
        docs.clone(),
    );
    assert_eq!(out, vec![doc! {"n": [{"c": 10}], "top": [{"_id": 10}]}]);
    assert_eq!(
        run(vec![doc! {"$sample": {"size": 3}}], docs.clone()).len(),
        3
    );
    assert_eq!(run(vec![doc! {"$sample": {"size": 30}}], docs).len(), 10);
    let out = run(
        vec![doc! {"$redact": {"$cond": [{"$eq": ["$secret", true]}, "$$PRUNE", "$$DESCEND"]}}],
        vec![doc! {"a": 1, "sub": {"secret": true}, "list": [{"secret": true}, {"x": 1}]}],
    );
    assert_eq!(out, vec![doc! {"a": 1, "list": [{"x": 1}]}]);
    let out = run(vec![doc! {"$documents": [{"x": 1}, {"x": 2}]}], vec![]);
    assert_eq!(out.len(), 2);
}

#[test]
fn memory_limits_fail_with_292_unless_disk_use_is_allowed() {
    let docs: Vec<Document> = (0..100)
        .map(|i| doc! {"_id": i, "pad": "x".repeat(100)})
        .collect();
    let p = Pipeline::parse(&[doc! {"$group": {"_id": "$_id", "all": {"$push": "$pad"}}}]).unwrap();
    let tight = MemLimits {
        group_bytes: 1000,
        sort_bytes: 1000,
        allow_disk_use: false,
    };
    let opts = RunOptions {
        limits: tight,
        ..RunOptions::default()
    };
    let e = p.run_with(docs.clone(), &opts).unwrap_err();
    assert_eq!(
        (e.code(), &*e.code_name()),
        (292, "QueryExceededMemoryLimitNoDiskUseAllowed")
    );
    let p2 = Pipeline::parse(&[doc! {"$sort": {"pad": 1}}]).unwrap();
    assert_eq!(p2.run_with(docs.clone(), &opts).unwrap_err().code(), 292);
    let opts = RunOptions {
        limits: MemLimits {
            allow_disk_use: true,
            ..tight
        },
        ..RunOptions::default()
    };
    assert_eq!(p.run_with(docs.clone(), &opts).unwrap().len(), 100);
    assert_eq!(p2.run_with(docs, &opts).unwrap().len(), 100);
}

#[test]
fn lookup_equality_matches_array_elements_numbers_and_missing_as_null() {
    let ctx = MemCtx::with(
        "f",
        vec![
            doc! {"_id": 1, "k": ["a", "c"]},
            doc! {"_id": 2, "k": 2.0},
            doc! {"_id": 3},
            doc! {"_id": 4, "k": null},
        ],
    );
    let ids = |d: &Document| -> Vec<i32> {
        d.get_array("j")
            .unwrap()
            .iter()
            .map(|x| x.as_document().unwrap().get_i32("_id").unwrap())
            .collect()
    };
    let out = run_ctx(
        &ctx,
        vec![doc! {"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "j"}}],
        vec![
            doc! {"k": "c"},
            doc! {"k": 2},
            doc! {},
            doc! {"k": ["a", 2]},
        ],
    )
    .unwrap();
    assert_eq!(ids(&out[0]), vec![1]);
    assert_eq!(ids(&out[1]), vec![2]);
    assert_eq!(ids(&out[2]), vec![3, 4]);
    assert_eq!(ids(&out[3]), vec![1, 2]);
}

#[test]
fn top_k_sorts_and_running_windows_only_count_what_they_hold() {
    let docs: Vec<Document> = (0..100)
        .map(|i| doc! {"_id": i, "pad": "x".repeat(100)})
        .collect();
    let tight = MemLimits {
        group_bytes: 1000,
        sort_bytes: 1000,
        allow_disk_use: false,
    };
    let opts = RunOptions {
        limits: tight,
        ..RunOptions::default()
    };
    let top = Pipeline::parse(&[doc! {"$sort": {"_id": -1}}, doc! {"$limit": 2}]).unwrap();
    let out = top.run_with(docs.clone(), &opts).unwrap();
    assert_eq!(
        out.iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect::<Vec<_>>(),
        vec![99, 98]
    );
    let running = Pipeline::parse(&[doc! {"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"n": {"$count": {}, "window": {"documents": ["unbounded", "current"]}}}}}]).unwrap();
    assert_eq!(running.run_with(docs.clone(), &opts).unwrap().len(), 100);
    let whole =
        Pipeline::parse(&[doc! {"$setWindowFields": {"output": {"n": {"$count": {}}}}}]).unwrap();
    assert_eq!(whole.run_with(docs, &opts).unwrap_err().code(), 292);
}

#[test]
fn bucket_auto_with_granularity_rounds_boundaries() {
    let docs: Vec<Document> = (1..=10).map(|i| doc! {"_id": i, "v": i}).collect();
    let out = run(
        vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 3, "granularity": "E6"}}],
        docs.clone(),
    );
    let m = 1.0 / 10.0 / 10.0;
    assert_eq!(
        out,
        vec![
            doc! {"_id": {"min": 68.0 * m, "max": 33.0 * 0.1}, "count": 3},
            doc! {"_id": {"min": 33.0 * 0.1, "max": 68.0 * 0.1}, "count": 3},
            doc! {"_id": {"min": 68.0 * 0.1, "max": 15.0}, "count": 4},
        ]
    );
    let out = run(
        vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "POWERSOF2"}}],
        docs.clone(),
    );
    assert_eq!(
        out,
        vec![
            doc! {"_id": {"min": 0.5, "max": 8}, "count": 7},
            doc! {"_id": {"min": 8, "max": 16}, "count": 3}
        ]
    );
    let err = |spec: Document| {
        Pipeline::parse(&[doc! {"$bucketAuto": spec}])
            .unwrap_err()
            .code()
    };
    assert_eq!(
        err(doc! {"groupBy": "$v", "buckets": 2, "granularity": "E7"}),
        40257
    );
    assert_eq!(
        err(doc! {"groupBy": "$v", "buckets": 2, "granularity": 1}),
        40261
    );
    assert_eq!(err(doc! {"groupBy": "$v", "buckets": "2"}), 40241);
    assert_eq!(err(doc! {"groupBy": "$v", "buckets": 2.5}), 40242);
    assert_eq!(err(doc! {"groupBy": "$v", "buckets": 0}), 40243);
}

#[test]
fn streamed_input_gives_the_same_results_as_materialized_input() {
    let docs: Vec<Document> = (0..50)
        .map(|i| doc! {"_id": i, "k": i % 7, "v": i * 2, "s": format!("x{i}")})
        .collect();
    let pipelines = [
        vec![
            doc! {"$match": {"k": {"$gte": 2}}},
            doc! {"$group": {"_id": "$k", "n": {"$sum": 1}, "m": {"$max": "$v"}}},
            doc! {"$sort": {"_id": 1}},
        ],
        vec![
            doc! {"$addFields": {"w": {"$add": ["$v", 1]}}},
            doc! {"$project": {"w": 1, "_id": 0}},
            doc! {"$skip": 5},
            doc! {"$limit": 7},
        ],
        vec![
            doc! {"$skip": 3},
            doc! {"$match": {"v": {"$lt": 40}}},
            doc! {"$limit": 4},
            doc! {"$group": {"_id": null, "s": {"$sum": "$v"}}},
        ],
        vec![doc! {"$sort": {"v": -1}}, doc! {"$limit": 3}],
        vec![doc! {"$unwind": "$s"}, doc! {"$count": "n"}],
    ];
    for stages in pipelines {
        let p = Pipeline::parse(&stages).unwrap();
        let streamed = p
            .run_stream(
                docs.clone().into_iter().map(Ok::<_, QueryError>),
                &RunOptions::default(),
            )
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        assert_eq!(streamed, p.run(docs.clone()).unwrap(), "{stages:?}");
    }
}

#[test]
fn a_streamed_limit_stops_reading_its_input() {
    let p = Pipeline::parse(&[doc! {"$match": {"ok": true}}, doc! {"$limit": 2}]).unwrap();
    // The third document is an error: reading it would fail the pipeline.
    let input = vec![
        Ok(doc! {"ok": true}),
        Ok(doc! {"ok": true}),
        Err(QueryError::BadValue("read past the limit".into())),
    ];
    let out = p
        .run_stream(input.into_iter(), &RunOptions::default())
        .unwrap()
        .count();
    assert_eq!(out, 2);
}

#[test]
fn add_fields_sets_a_dotted_path_in_every_element_of_an_array() {
    let d = doc! {"_id": 1, "a": [{"x": 1}, {"x": 2}, 3, [{"x": 4}]], "b": 7};
    let out = run(vec![doc! {"$addFields": {"a.y": 5}}], vec![d.clone()]);
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "a": [{"x": 1, "y": 5}, {"x": 2, "y": 5}, {"y": 5}, [{"x": 4, "y": 5}]], "b": 7}
        ]
    );
    // A scalar on the way becomes a document; $$REMOVE removes from each element.
    let out = run(
        vec![
            doc! {"$set": {"b.c": 1}},
            doc! {"$set": {"a.x": "$$REMOVE"}},
        ],
        vec![d],
    );
    assert_eq!(
        out,
        vec![doc! {"_id": 1, "a": [{}, {}, 3, [{}]], "b": {"c": 1}}]
    );
}
