"""Scans long enough to read the engine on a second thread (past 4,096 documents,
storage/src/read_ahead.rs) return what one thread returns, in order, and count in
explain exactly the keys and documents the query consumed, not what was read ahead; a
find's `sort: {$natural: -1}` is a backward scan."""

import datetime

import pytest
from pymongo import ASCENDING

N = 12_000


@pytest.fixture
def coll(db):
    db.c.insert_many([{"_id": i, "a": (i * 7919) % N, "b": i % 3} for i in range(N)])
    db.c.create_index([("a", ASCENDING)])
    return db.c


def test_a_long_collection_scan_returns_every_document_in_order(coll):
    assert [d["_id"] for d in coll.find({}, batch_size=1000)] == list(range(N))
    assert [d["_id"] for d in coll.find({}).sort("$natural", -1)] == list(range(N - 1, -1, -1))
    assert coll.count_documents({"b": 1}) == N // 3
    got = list(coll.aggregate([{"$match": {"b": {"$lt": 2}}},
                               {"$group": {"_id": "$b", "n": {"$sum": 1}, "first": {"$first": "$_id"}}},
                               {"$sort": {"_id": 1}}]))
    assert got == [{"_id": 0, "n": N // 3, "first": 0}, {"_id": 1, "n": N // 3, "first": 1}]


def test_a_long_index_scan_returns_documents_in_key_order(coll):
    got = [d["a"] for d in coll.find({"a": {"$gte": 100}}).hint("a_1")]
    assert got == list(range(100, N))


@pytest.mark.parametrize("limit", [4_095, 4_097, 9_000])
def test_a_limited_scan_counts_only_what_it_consumed(coll, limit):
    stats = coll.find({}).limit(limit).explain()["executionStats"]
    assert stats["nReturned"] == limit
    assert stats["totalDocsExamined"] == limit
    stats = coll.find({"a": {"$gte": 0}}).hint("a_1").limit(limit).explain()["executionStats"]
    assert (stats["nReturned"], stats["totalKeysExamined"], stats["totalDocsExamined"]) == \
        (limit, limit, limit)


def test_an_abandoned_long_scan_leaves_the_server_serving(coll):
    # Each cursor's first batch goes past the inline part; closing it must stop its
    # reading thread, so later long scans still run (on a thread or inline).
    for _ in range(20):
        cursor = coll.find({}, batch_size=5_000)
        next(cursor)
        cursor.close()
    assert coll.count_documents({}) == N
    assert len(list(coll.find({"b": 2}))) == N // 3


@pytest.mark.parametrize("kind", ["regular", "timeseries"])
def test_a_natural_sort_reads_the_collection_backwards_as_the_natural_hint_does(db, kind):
    if kind == "timeseries":
        db.create_collection("n", timeseries={"timeField": "t"})
    t0 = datetime.datetime(2024, 1, 1)
    db.n.insert_many([{"t": t0 + datetime.timedelta(seconds=i), "i": i} for i in range(5)])
    hinted = [d["i"] for d in db.n.find({}).hint([("$natural", -1)])]
    assert [d["i"] for d in db.n.find({}).sort("$natural", -1)] == hinted
    assert [d["i"] for d in db.n.find({}).sort("$natural", 1)] == \
        [d["i"] for d in db.n.find({}).hint([("$natural", 1)])]
    if kind == "regular":
        assert hinted == [4, 3, 2, 1, 0]
        plan = db.n.find({}).sort("$natural", -1).explain()["queryPlanner"]["winningPlan"]
        assert plan == {"stage": "COLLSCAN", "direction": "backward"}
