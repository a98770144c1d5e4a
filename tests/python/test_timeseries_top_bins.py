"""`$group` by a time bin, `$sort` on `_id` and `$limit k` on a time-series collection
(`crates/timeseries/src/exec/top_groups.rs`): the scan reads the newest (or oldest) buckets
first and stops once k bins are known, passing over buckets whose rows fall in bins the
limit drops. These tests pin that the answer is the one a regular collection with the same
documents gives (for `$first`/`$last`, the document path's), for every key form, with
buckets in memory and after a restart (stored), and that explain shows the buckets left
unread."""

import datetime
import tempfile
from pathlib import Path

import pymongo
import pytest

from conftest import running_server

T0 = datetime.datetime(2026, 3, 1)


def measurements():
    # Five hosts over 2.5 hours every 10 s; a second pass writes rows of earlier times,
    # so buckets overlap and are out of time order; some rows lack `v`.
    out = []
    for pass_ in (0, 1):
        for i in range(pass_, 4500, 2):
            d = {"t": T0 + datetime.timedelta(seconds=10 * (i // 5)), "m": {"host": f"h{i % 5}"}, "n": i % 13}
            if i % 17:
                # Whole numbers: sums are exact whatever the order rows are added in.
                d["v"] = float((i * 7919) % 1000)
            out.append(d)
    return out


ID_FORMS = [
    {"$dateTrunc": {"date": "$t", "unit": "minute"}},
    {"$dateTrunc": {"date": "$t", "unit": "minute", "binSize": 15}},
    {"$subtract": ["$t", {"$mod": [{"$toLong": "$t"}, 60000]}]},
    "$t",
]

# Accumulators whose result does not depend on the order rows come in.
ORDER_FREE = {"mx": {"$max": "$v"}, "mn": {"$min": "$n"}, "s": {"$sum": "$n"}, "a": {"$avg": "$v"},
              "c": {"$count": {}}}
# $first/$last take the collection's own order (of buckets, for a time-series collection).
ORDERED = {"f": {"$first": "$v"}, "l": {"$last": "$n"}}


def pipelines(accs, before_group=()):
    for id_ in ID_FORMS:
        for sort, limit in ((-1, 5), (1, 5), (-1, 1), (1, 40), (-1, 100000)):
            yield [
                {"$match": {"t": {"$lt": T0 + datetime.timedelta(hours=2)}, "n": {"$ne": 4}}},
                *before_group,
                {"$group": {"_id": id_, **accs}},
                {"$sort": {"_id": sort}},
                {"$limit": limit},
            ]


def assert_same_answers(db):
    for pipeline in pipelines(ORDER_FREE):
        got = list(db.ts.aggregate(pipeline))
        want = list(db.reg.aggregate(pipeline))
        assert got == want, pipeline
        assert got, pipeline
    # A stage before $group keeps the pipeline on the document path, which unpacks the
    # buckets in the scan's usual order.
    plain = pipelines(ORDERED, before_group=[{"$set": {"unused": 1}}])
    for pipeline, document_path in zip(pipelines(ORDERED), plain):
        got = list(db.ts.aggregate(pipeline))
        want = list(db.ts.aggregate(document_path))
        assert got == want, pipeline
        assert got, pipeline


@pytest.fixture()
def small_buckets(client):
    admin = client.admin
    was = admin.command("getParameter", 1, timeseriesBucketMaxCount=1)["timeseriesBucketMaxCount"]
    admin.command("setParameter", 1, timeseriesBucketMaxCount=10)
    try:
        yield
    finally:
        admin.command("setParameter", 1, timeseriesBucketMaxCount=was)


def test_the_top_time_bins_equal_the_answer_of_the_document_path(client, small_buckets):
    db = client.py_ts_top_bins
    client.drop_database(db.name)
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    docs = measurements()
    db.ts.insert_many([dict(d) for d in docs])
    db.reg.insert_many([dict(d) for d in docs])
    assert db["system.buckets.ts"].count_documents({}) >= 400
    assert_same_answers(db)
    client.drop_database(db.name)


def explain_stats(db, pipeline):
    e = db.command("explain", {"aggregate": "ts", "pipeline": pipeline, "cursor": {}},
                   verbosity="executionStats")
    found = []

    def walk(x):
        if isinstance(x, dict):
            if "bucketsPassedOverByGroupKey" in x:
                found.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(e)
    assert found, e
    return found[0]


def test_after_a_restart_the_top_bins_read_only_the_buckets_near_them():
    with tempfile.TemporaryDirectory(prefix="hourglass-top-bins-") as tmp:
        dbpath = Path(tmp) / "db"
        dbpath.mkdir()
        docs = measurements()
        with running_server(dbpath=dbpath) as (_, port, _):
            client = pymongo.MongoClient(port=port, directConnection=True)
            client.admin.command("setParameter", 1, timeseriesBucketMaxCount=10)
            db = client.top
            db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
            db.ts.insert_many([dict(d) for d in docs])
            db.reg.insert_many([dict(d) for d in docs])
            client.close()
        # A clean restart writes every open bucket out: all are now stored.
        with running_server(dbpath=dbpath) as (_, port, _):
            client = pymongo.MongoClient(port=port, directConnection=True)
            db = client.top
            assert_same_answers(db)
            buckets = db["system.buckets.ts"].count_documents({})
            for sort in (-1, 1):
                pipeline = [
                    {"$group": {"_id": {"$dateTrunc": {"date": "$t", "unit": "minute"}}, "mx": {"$max": "$v"}}},
                    {"$sort": {"_id": sort}},
                    {"$limit": 3},
                ]
                stats = explain_stats(db, pipeline)
                unpacked = stats["bucketsUnpacked"] - stats["bucketsPassedOverByGroupKey"]
                # Three minutes of five hosts are 90 rows: 9 full buckets, a few more
                # where the second pass's buckets overlap them.
                assert unpacked <= 40, (sort, stats, buckets)
                # The scan ends at most a bucket span (an hour) past the kept bins.
                assert stats["bucketsExamined"] * 4 < buckets * 3, (sort, stats, buckets)
            client.close()
