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
