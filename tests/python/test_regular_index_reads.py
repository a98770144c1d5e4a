"""Index reads of regular collections that replace work of the pipeline: DISTINCT_SCAN for
`$sort` + `$group` keeping `$first`/`$last` and for `distinct`, and an aggregate's leading
`$sort` given by an index (with the aggregate's `hint`). Each answer is checked against the
same read without the index, and each plan through explain."""

import datetime
import random

import pytest
from bson import Int64
from pymongo.errors import OperationFailure


def _stage_names(plan):
    """Every `stage` in an explain plan tree."""
    out = []
    while isinstance(plan, dict):
        out.append(plan.get("stage"))
        plan = plan.get("inputStage")
    return out


def _cursor(explain):
    return explain["stages"][0]["$cursor"]


@pytest.fixture
def hosts(db):
    """Readings of 12 hosts, each at its own time: host values of several types (1 and 1.0
    are one group), one host null and one missing."""
    rng = random.Random(7)
    t0 = datetime.datetime(2024, 1, 1)
    names = ["a", "b", "c", 1, 1.0, Int64(2), 2.5, None, "MISSING", {"x": 1}, True, "z"]
    minutes = list(range(600))
    rng.shuffle(minutes)
    docs = []
    for i in range(600):
        h = names[i % len(names)]
        d = {"_id": i, "t": t0 + datetime.timedelta(minutes=minutes[i]), "v": rng.random()}
        if h != "MISSING":
            d["host"] = h
        docs.append(d)
    db.plain.insert_many(docs)
    db.indexed.insert_many(docs)
    return db


@pytest.mark.parametrize("index,sort,acc", [
    ([("host", 1), ("t", 1)], {"host": 1, "t": -1}, "$first"),
    ([("host", 1), ("t", 1)], {"host": 1, "t": 1}, "$first"),
    ([("host", 1), ("t", 1)], {"host": -1, "t": -1}, "$last"),
    ([("host", -1), ("t", -1), ("v", 1)], {"host": 1, "t": 1, "v": -1}, "$last"),
    ([("host", 1)], {"host": 1}, "$first"),
])
def test_sort_then_group_keeping_first_reads_one_document_per_group(hosts, index, sort, acc):
    db = hosts
    db.indexed.create_index(index)
    pipeline = [
        {"$sort": sort},
        {"$group": {"_id": "$host", "doc": {acc: "$$ROOT"}, "t": {acc: "$t"}}},
        {"$sort": {"doc._id": 1}},
    ]
    want = list(db.plain.aggregate(pipeline))
    got = list(db.indexed.aggregate(pipeline))
    # Groups whose ties are not broken by the sort may keep any of the tied documents.
    if len(sort) > 1:
        assert got == want
    else:
        assert [g["_id"] for g in got] and len(got) == len(want)
    explain = db.command("explain", {"aggregate": "indexed", "pipeline": pipeline, "cursor": {}},
                         verbosity="executionStats")
    plan = _cursor(explain)["queryPlanner"]["winningPlan"]
    assert _stage_names(plan) == ["FETCH", "DISTINCT_SCAN"]
    # One document per group (10: 1, 1.0 and Int64(1) are one, null and missing another),
    # two when the group's document is its last entry (the first tells where it starts).
    stats = explain["executionStats"]
    assert len(want) == 10
    assert stats["totalDocsExamined"] == (20 if stats["executionStages"]["inputStage"]["direction"] == "backward" else 10)
    assert [list(s)[0] for s in explain["stages"][1:]] == ["$group", "$sort"]


def test_sort_and_group_that_distinct_scan_cannot_answer_read_every_document(hosts):
    db = hosts
    db.indexed.create_index([("host", 1), ("t", 1)])
    cases = [
        # Mixed $first and $last.
        [{"$sort": {"host": 1, "t": 1}}, {"$group": {"_id": "$host", "a": {"$first": "$v"}, "b": {"$last": "$v"}}}],
        # Later sort keys neither all along the index nor all against it.
        [{"$sort": {"host": 1, "t": 1, "v": -1}}, {"$group": {"_id": "$host", "a": {"$first": "$v"}}}],
        # Grouped by another field than the sort's first.
        [{"$sort": {"host": 1, "t": 1}}, {"$group": {"_id": "$t", "a": {"$first": "$v"}}}],
        # Another accumulator.
        [{"$sort": {"host": 1, "t": 1}}, {"$group": {"_id": "$host", "a": {"$max": "$v"}}}],
    ]
    for pipeline in cases:
        pipeline = pipeline + [{"$sort": {"_id": 1}}]
        assert list(db.indexed.aggregate(pipeline)) == list(db.plain.aggregate(pipeline))
        explain = db.command("explain", {"aggregate": "indexed", "pipeline": pipeline, "cursor": {}})
        assert "DISTINCT_SCAN" not in _stage_names(_cursor(explain)["queryPlanner"]["winningPlan"])


def test_a_multikey_index_is_not_read_by_distinct_scan(hosts):
    db = hosts
    db.indexed.create_index([("host", 1), ("t", 1)])
    db.indexed.insert_one({"_id": "arr", "host": ["a", "q"], "t": datetime.datetime(2030, 1, 1)})
    db.plain.insert_one({"_id": "arr", "host": ["a", "q"], "t": datetime.datetime(2030, 1, 1)})
    pipeline = [{"$sort": {"host": 1, "t": -1}}, {"$group": {"_id": "$host", "last": {"$first": "$_id"}}},
                {"$sort": {"last": 1}}]
    assert list(db.indexed.aggregate(pipeline)) == list(db.plain.aggregate(pipeline))
    explain = db.command("explain", {"aggregate": "indexed", "pipeline": pipeline, "cursor": {}})
    assert "DISTINCT_SCAN" not in str(explain)
    assert sorted(map(str, db.indexed.distinct("host"))) == sorted(map(str, db.plain.distinct("host")))


def test_distinct_reads_one_document_per_value_and_keeps_explicit_null(hosts):
    db = hosts
    db.indexed.create_index([("host", 1), ("t", 1)])
    assert db.indexed.distinct("host") == db.plain.distinct("host")
    assert None in db.indexed.distinct("host")
    explain = db.command("explain", {"distinct": "indexed", "key": "host"}, verbosity="executionStats")
    assert _stage_names(explain["queryPlanner"]["winningPlan"]) == ["FETCH", "DISTINCT_SCAN"]
    assert explain["executionStats"]["totalDocsExamined"] < 30
    # Without an explicit null, documents lacking the field add no value.
    db.indexed.delete_many({"host": {"$type": "null"}})
    db.plain.delete_many({"host": {"$type": "null"}})
    assert db.indexed.distinct("host") == db.plain.distinct("host")
    assert None not in db.indexed.distinct("host")
    # A query reads as before.
    assert db.indexed.distinct("host", {"v": {"$gt": 0.5}}) == db.plain.distinct("host", {"v": {"$gt": 0.5}})


def test_an_index_that_gives_the_sort_replaces_the_aggregate_sort(db):
    db.c.insert_many([{"_id": i, "a": i % 7, "b": i} for i in range(500)])
    db.c.create_index([("a", 1), ("b", -1)])
    pipeline = [{"$match": {"a": 3}}, {"$sort": {"b": -1}}, {"$limit": 4}]
    assert [d["b"] for d in db.c.aggregate(pipeline)] == [493, 486, 479, 472]
    explain = db.command("explain", {"aggregate": "c", "pipeline": pipeline, "cursor": {}},
                         verbosity="executionStats")
    assert "SORT" not in _stage_names(explain["queryPlanner"]["winningPlan"])
    # A sort no index gives is a SORT stage of the plan.
    unsorted = [{"$match": {"a": 3}}, {"$sort": {"_id": 1}}, {"$limit": 4}]
    assert [d["_id"] for d in db.c.aggregate(unsorted)] == [3, 10, 17, 24]
    explain = db.command("explain", {"aggregate": "c", "pipeline": unsorted, "cursor": {}})
    assert _stage_names(explain["queryPlanner"]["winningPlan"])[0] == "SORT"


def test_aggregate_follows_its_hint_and_refuses_an_unknown_one(db):
    db.c.insert_many([{"_id": i, "a": i % 7, "b": i} for i in range(100)])
    db.c.create_index("a")
    db.c.create_index("b")
    pipeline = [{"$match": {"a": 3, "b": {"$gte": 0}}}, {"$group": {"_id": None, "n": {"$sum": 1}}}]
    for hint, name in [("a_1", "a_1"), ("b_1", "b_1")]:
        assert list(db.c.aggregate(pipeline, hint=hint))[0]["n"] == 14
        explain = db.command("explain", {"aggregate": "c", "pipeline": pipeline, "cursor": {}, "hint": hint})
        assert _cursor(explain)["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] == name
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate(pipeline, hint="nope_1"))
    assert e.value.code == 2


def test_an_index_in_the_collections_collation_is_read_by_distinct_scan(db):
    db.create_collection("ci", collation={"locale": "en", "strength": 2})
    db.ci.insert_many([{"_id": i, "k": k, "t": i} for i, k in enumerate(["a", "A", "b", "B", "c"])])
    db.ci.create_index([("k", 1), ("t", 1)])
    pipeline = [{"$sort": {"k": 1, "t": -1}}, {"$group": {"_id": "$k", "last": {"$first": "$t"}}},
                {"$sort": {"last": 1}}]
    got = list(db.ci.aggregate(pipeline))
    assert [g["last"] for g in got] == [1, 3, 4]
    explain = db.command("explain", {"aggregate": "ci", "pipeline": pipeline, "cursor": {}})
    assert "DISTINCT_SCAN" in str(explain)
    assert sorted(v.lower() for v in db.ci.distinct("k")) == ["a", "b", "c"]
