"""A projection (with or without `$sort`) over a time-series scan of more than 64 buckets
is split across threads (`crates/timeseries/src/exec/parallel.rs`, `columnar.rs`): each
chunk of buckets is gathered into columns apart, and the chunks are appended in scan
order. These tests pin that the rows, their order and their values are those one run
gives, with columns whose type changes from bucket to bucket, and that `maxTimeMS` still
stops the query while the workers run. A last-point query over more than 64 series reads
the series' stored buckets on several threads (`store/latest.rs`): its answer is pinned
the same way."""

import datetime

import pytest
from pymongo.errors import OperationFailure

from conftest import small_buckets_db

T0 = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture()
def db(client):
    with small_buckets_db(client, "py_ts_parallel_projection") as db:
        yield db


def measurements(n):
    docs = []
    for i in range(n):
        d = {
            "t": T0 + datetime.timedelta(seconds=10 * (i // 5)),
            "m": {"host": f"h{i % 5}"},
            "v": float((i * 7919) % 1000),
        }
        # A bucket holds ten measurements of one host, all with the same i // 50: `x`
        # is an int in some buckets, a string in others, missing in the rest.
        kind = (i // 50) % 3
        if kind == 0:
            d["x"] = i
        elif kind == 1:
            d["x"] = f"x{i}"
        if i % 7:
            d["y"] = i * 0.5
        docs.append(d)
    return docs


def loaded(db, n):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    docs = measurements(n)
    db.ts.insert_many([dict(d) for d in docs])
    db.reg.insert_many([dict(d) for d in docs])
    assert db["system.buckets.ts"].count_documents({}) >= n // 10


def test_a_sorted_projection_split_across_threads_equals_the_regular_collections_rows(db):
    loaded(db, 6000)
    project = {"$project": {"_id": 0, "t": 1, "host": "$m.host", "v": 1, "x": 1, "y": 1}}
    for pipeline in [
        [{"$match": {"v": {"$gt": 300}}}, project, {"$sort": {"t": 1, "host": 1}}],
        [project, {"$sort": {"t": -1, "host": 1}}, {"$skip": 7}],
        [{"$match": {"v": {"$lt": 900}}}, project, {"$sort": {"y": -1, "t": 1, "host": 1}}],
    ]:
        got = list(db.ts.aggregate(pipeline))
        want = list(db.reg.aggregate(pipeline))
        assert len(got) > 1000, pipeline
        assert got == want, pipeline


def test_an_unsorted_projection_split_across_threads_keeps_the_scan_order(db):
    loaded(db, 6000)
    match = {"$match": {"v": {"$gte": 100}}}
    fields = {"_id": 0, "t": 1, "v": 1, "x": 1, "y": 1, "host": "$m.host"}
    got = list(db.ts.aggregate([match, {"$project": fields}]))
    # A computed field that reads a measurement takes the document path, one bucket at a
    # time in scan order.
    slow = {**fields, "w": {"$add": ["$v", 1]}}
    want = [{k: v for k, v in d.items() if k != "w"}
            for d in db.ts.aggregate([match, {"$project": slow}])]
    assert len(got) > 4000
    assert got == want
    assert sorted(map(repr, got)) == sorted(
        map(repr, db.reg.aggregate([match, {"$project": fields}])))


def test_sorted_rows_written_by_several_threads_come_back_in_order(db):
    # Past 32,768 rows a thread, the sorted rows are written in consecutive parts by
    # several threads (`columnar.rs`, `write_rows`); the reply must hold them in order,
    # across getMore batches, as the regular collection's sort gives them.
    loaded(db, 70000)
    pipeline = [{"$project": {"_id": 0, "t": 1, "host": "$m.host", "v": 1}},
                {"$sort": {"v": 1, "t": -1, "host": 1}}]
    got = list(db.ts.aggregate(pipeline))
    assert len(got) == 70000
    assert got == list(db.reg.aggregate(pipeline))


def test_max_time_ms_stops_a_projection_split_across_threads(db):
    loaded(db, 40000)
    pipeline = [{"$project": {"_id": 0, "t": 1, "v": 1, "host": "$m.host"}},
                {"$sort": {"v": 1, "t": 1, "host": 1}}]
    with pytest.raises(OperationFailure) as e:
        list(db.ts.aggregate(pipeline, maxTimeMS=1))
    assert (e.value.code, e.value.details.get("codeName")) == (50, "MaxTimeMSExpired")
    # The workers are gone: the same query without a limit answers in full.
    assert len(list(db.ts.aggregate(pipeline))) == 40000


def test_lastpoint_over_hundreds_of_series_split_across_threads_equals_the_regular_collection(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    # Times go backwards: each series' newest measurements are in closed buckets, read
    # from storage, and its open bucket holds the oldest.
    docs = [{"t": T0 - datetime.timedelta(seconds=i), "m": {"host": f"h{h:03}"}, "v": float(i * h)}
            for i in range(25) for h in range(200)]
    db.ts.insert_many(docs)
    db.reg.insert_many(docs)
    assert db["system.buckets.ts"].count_documents({}) >= 600
    pipeline = [{"$sort": {"m.host": 1, "t": -1}},
                {"$group": {"_id": "$m.host", "last": {"$first": "$$ROOT"}}},
                {"$sort": {"_id": 1}}]
    got = list(db.ts.aggregate(pipeline))
    assert len(got) == 200
    assert got == list(db.reg.aggregate(pipeline))
    assert all(g["last"]["t"] == T0.replace(tzinfo=None) for g in got)
