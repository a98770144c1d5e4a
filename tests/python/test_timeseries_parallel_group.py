"""A `$group` over a time-series scan of more than 64 buckets is split across threads
(`crates/timeseries/src/exec/parallel.rs`): the calling thread reads the buckets, workers
decode and group them, and the partial groups are merged. These tests pin that the merged
answer is the one a regular collection with the same documents gives, and that
`maxTimeMS` still stops the query while the workers run."""

import datetime

import pytest
from pymongo.errors import OperationFailure

from conftest import small_buckets_db

T0 = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture()
def db(client):
    with small_buckets_db(client, "py_ts_parallel_group") as db:
        yield db


def measurements(n):
    return [
        {
            "t": T0 + datetime.timedelta(seconds=10 * (i // 5)),
            "m": {"host": f"h{i % 5}", "rack": i % 2},
            # Whole numbers: sums are exact whatever the order partial sums are added in.
            "v": float((i * 7919) % 1000),
            "n": i % 11,
            **({"s": f"s{i % 13}"} if i % 3 else {}),
        }
        for i in range(n)
    ]


def key(doc):
    return repr(sorted(doc.items(), key=lambda kv: kv[0]))


def test_a_group_over_hundreds_of_buckets_equals_the_same_group_on_a_regular_collection(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    docs = measurements(6000)
    db.ts.insert_many([dict(d) for d in docs])
    db.reg.insert_many([dict(d) for d in docs])
    assert db["system.buckets.ts"].count_documents({}) >= 600
    t = lambda minutes: T0 + datetime.timedelta(minutes=minutes)  # noqa: E731
    pipelines = [
        [
            {"$match": {"t": {"$gte": t(5), "$lt": t(95)}}},
            {"$group": {
                "_id": {"h": "$m.host", "b": {"$dateTrunc": {"date": "$t", "unit": "minute", "binSize": 10}}},
                "mx": {"$max": "$v"}, "mn": {"$min": "$n"}, "a": {"$avg": "$v"},
                "s": {"$sum": "$n"}, "c": {"$count": {}}, "ms": {"$max": "$s"},
            }},
        ],
        [{"$group": {"_id": "$n", "s": {"$sum": "$v"}, "r": {"$min": "$m.rack"}, "a": {"$avg": "$n"}}}],
        [
            {"$match": {"v": {"$gt": 500}, "m.rack": 1}},
            {"$group": {"_id": {"$dateTrunc": {"date": "$t", "unit": "hour"}}, "c": {"$sum": 1}}},
        ],
        # $first/$last are not split; they keep the one-run path and its answer.
        [{"$sort": {"t": 1}}, {"$group": {"_id": "$m.host", "f": {"$first": "$v"}, "l": {"$last": "$n"}}}],
    ]
    for pipeline in pipelines:
        got = sorted(db.ts.aggregate(pipeline), key=key)
        want = sorted(db.reg.aggregate(pipeline), key=key)
        assert got == want, pipeline
        assert got, pipeline


def test_max_time_ms_stops_a_group_split_across_threads(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    db.ts.insert_many(measurements(40000))
    assert db["system.buckets.ts"].count_documents({}) >= 4000
    pipeline = [{"$group": {"_id": {"h": "$m.host", "n": "$n"}, "a": {"$avg": "$v"}}}]
    with pytest.raises(OperationFailure) as e:
        list(db.ts.aggregate(pipeline, maxTimeMS=1))
    assert (e.value.code, e.value.details.get("codeName")) == (50, "MaxTimeMSExpired")
    # The workers are gone: the same query without a limit answers in full.
    assert len(list(db.ts.aggregate(pipeline))) == 55
