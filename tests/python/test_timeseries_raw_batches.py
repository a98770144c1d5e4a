"""A time-series read that returns measurements as they are (a find without sort or
projection, an aggregate whose stages all run in the bucket scan) sends BSON written
straight from the bucket columns, never building a document per measurement. These tests
pin that the bytes are the documents the document path gives, field order included,
across getMore batches, the 16 MiB batch cap, skip/limit, views and the profiler."""

import datetime

import pytest
from bson import SON
from bson.codec_options import CodecOptions

T0 = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)
ORDERED = CodecOptions(document_class=SON, tz_aware=True)


@pytest.fixture()
def db(client):
    name = "py_ts_raw_batches"
    client.drop_database(name)
    yield client.get_database(name, codec_options=ORDERED)
    client.drop_database(name)


def measurement(i):
    d = {"t": T0 + datetime.timedelta(seconds=10 * i), "m": {"host": f"h{i % 4}", "rack": i % 3}}
    # Fields in varying order, missing ones, arrays, documents, strings, mixed numbers.
    if i % 2:
        d["v"] = float(i)
        d["s"] = f"s{i}"
    else:
        d["s"] = i
        d["v"] = [i % 5, {"x": None}]
    if i % 7 == 0:
        d["doc"] = {"a": i, "b": [1, "two"]}
    d["_id"] = i
    return d


@pytest.fixture()
def ts(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    # 5.5 hours of measurements: each series' hourly buckets are closed and stored
    # (compressed), its last one still open; both kinds are read.
    db.ts.insert_many([measurement(i) for i in range(2000)])
    return db.ts


def as_lists(docs):
    return [list(d.items()) for d in docs]


# A stage the bucket scan does not run keeps the document path: the reference.
DOCUMENT_PATH = [{"$set": {"zz": 1}}, {"$unset": "zz"}]
FILTERS = [{}, {"v": {"$gt": 600.0}}, {"s": {"$gte": 100}}, {"m.rack": 1}, {"v": {"$gte": 3}}]


@pytest.mark.parametrize("flt", FILTERS, ids=str)
def test_measurements_sent_as_bytes_equal_the_document_path_field_for_field(ts, flt):
    reference = as_lists(ts.aggregate([{"$match": flt}] + DOCUMENT_PATH))
    assert reference
    key = lambda fields: fields[0][1]  # noqa: E731 (the time, first in unpack order)
    found = as_lists(ts.find(flt, batch_size=7))
    aggregated = as_lists(ts.aggregate([{"$match": flt}], batchSize=13))
    for got in (found, aggregated):
        assert sorted(got, key=repr) == sorted(reference, key=repr)
    # Unpack order: time, then meta, then the data fields.
    assert all(f[0][0] == "t" and f[1][0] == "m" for f in found)
    assert sorted(found, key=key)


def test_skip_limit_and_single_batch_apply_to_measurements_sent_as_bytes(ts):
    flt = {"v": {"$gt": 100.0}}
    every = as_lists(ts.find(flt))
    assert as_lists(ts.find(flt).skip(5).limit(10)) == every[5:15]
    cursor = ts.find(flt, limit=-3)
    assert as_lists(cursor) == every[:3]
    assert cursor.cursor_id in (None, 0)


def test_a_view_over_a_time_series_collection_reads_the_same_measurements(db, ts):
    db.create_collection("v", viewOn="ts", pipeline=[{"$match": {"m.rack": 2}}])
    expected = as_lists(ts.aggregate([{"$match": {"m.rack": 2}}] + DOCUMENT_PATH))
    assert sorted(as_lists(db.v.find()), key=repr) == sorted(expected, key=repr)
    assert db.v.count_documents({}) == len(expected)


def test_batches_of_large_measurements_stay_under_16_mib(db):
    db.create_collection("big", timeseries={"timeField": "t"})
    blob = "x" * (1 << 20)
    db.big.insert_many(
        [{"t": T0 + datetime.timedelta(seconds=i), "i": i, "blob": blob} for i in range(40)]
    )
    reply = db.command("find", "big", batchSize=1000)
    first = reply["cursor"]["firstBatch"]
    assert 0 < len(first) < 40
    assert reply["cursor"]["id"] != 0
    assert sorted(d["i"] for d in db.big.find({}, batch_size=1000)) == list(range(40))


def test_the_profiler_counts_measurements_sent_as_bytes(db, ts):
    db.command("profile", 2)
    try:
        got = list(ts.find({"v": {"$gt": 1000.0}}, batch_size=1000))
    finally:
        db.command("profile", 0)
    entries = list(db.system.profile.find({"op": "query", "ns": f"{db.name}.ts"}))
    assert entries, "the find was profiled"
    assert entries[-1]["nreturned"] == len(got) > 0
    assert entries[-1]["responseLength"] > 100 * len(got) // 10
