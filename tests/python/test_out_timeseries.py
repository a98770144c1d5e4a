"""`$out` into a time-series collection (MongoDB 7.0.3+), through pymongo: the `timeseries`
option creates one, an existing one is replaced and keeps its options and indexes, options
that differ from the existing collection's are refused, and a failed `$out` leaves the
target as it was; an acknowledged `$out` survives kill -9."""

import datetime as dt
import random
import signal

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import running_server

T0 = dt.datetime(2016, 1, 1)


def tsbs_rows(hosts=10, per_host=120, seed=7):
    """TSBS cpu-like rows: a time every 10 s, the host's tags, ten usage doubles."""
    rng = random.Random(seed)
    fields = ["usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
              "usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"]
    rows = []
    for i in range(per_host):
        for h in range(hosts):
            row = {"time": T0 + dt.timedelta(seconds=10 * i),
                   "tags": {"hostname": f"host_{h}", "region": f"r{h % 3}"}}
            row.update({f: rng.uniform(0, 100) for f in fields})
            rows.append(row)
    return rows


def contents(coll):
    return sorted(coll.find({}, {"_id": 0}), key=lambda d: (d["time"], d["tags"]["hostname"]))


def ts_options(db, name):
    info = next(db.list_collections(filter={"name": name}))
    assert info["type"] == "timeseries", info
    return info["options"]


def test_out_with_timeseries_creates_a_time_series_collection_with_the_same_data(db):
    rows = tsbs_rows()
    db.src.insert_many([dict(r) for r in rows])
    db.src.aggregate([{"$out": {"db": db.name, "coll": "cpu", "timeseries": {
        "timeField": "time", "metaField": "tags", "granularity": "seconds"}}}])
    opts = ts_options(db, "cpu")["timeseries"]
    assert (opts["timeField"], opts["metaField"], opts["granularity"]) == ("time", "tags", "seconds")
    assert contents(db.cpu) == contents(db.src)
    # Round trip: from the time-series collection back out into a regular one.
    db.cpu.aggregate([{"$out": "back"}])
    assert next(db.list_collections(filter={"name": "back"}))["type"] == "collection"
    assert contents(db.back) == contents(db.src)
    assert not [n for n in db.list_collection_names() if "tmp.agg_out" in n]


def test_out_into_another_database_that_does_not_exist_yet(client, db):
    other = client[db.name + "_o"]
    client.drop_database(other.name)
    db.src.insert_many(tsbs_rows(hosts=2, per_host=5))
    db.src.aggregate([{"$out": {"db": other.name, "coll": "m", "timeseries": {"timeField": "time"}}}])
    assert other.m.count_documents({}) == 10
    assert ts_options(other, "m")["timeseries"]["timeField"] == "time"
    client.drop_database(other.name)


def test_out_replaces_an_existing_time_series_collection_keeping_options_and_indexes(db):
    db.create_collection("cpu", timeseries={"timeField": "time", "metaField": "tags"},
                         expireAfterSeconds=10 ** 9)
    db.cpu.create_index([("tags.hostname", 1), ("time", -1)], name="host_time")
    db.cpu.insert_many(tsbs_rows(hosts=3, per_host=4, seed=1))
    new = tsbs_rows(hosts=2, per_host=6, seed=2)
    db.src.insert_many([dict(r) for r in new])
    for out in ({"$out": "cpu"},
                {"$out": {"db": db.name, "coll": "cpu",
                          "timeseries": {"timeField": "time", "metaField": "tags"}}}):
        db.src.aggregate([out])
        assert contents(db.cpu) == contents(db.src)
        options = ts_options(db, "cpu")
        assert options["expireAfterSeconds"] == 10 ** 9
        assert "host_time" in [i["name"] for i in db.cpu.list_indexes()]


@pytest.mark.parametrize("timeseries", [
    {"timeField": "usage_user"},
    {"timeField": "time", "metaField": "region"},
    {"timeField": "time", "metaField": "tags", "granularity": "hours"},
    {"timeField": "time", "metaField": "tags", "bucketMaxSpanSeconds": 330,
     "bucketRoundingSeconds": 330},
], ids=["timeField", "metaField", "granularity", "bucketMaxSpanSeconds"])
def test_out_with_options_other_than_the_existing_collections_is_refused(db, timeseries):
    db.create_collection("cpu", timeseries={"timeField": "time", "metaField": "tags"})
    db.cpu.insert_many(tsbs_rows(hosts=1, per_host=3))
    db.src.insert_many(tsbs_rows(hosts=2, per_host=2))
    with pytest.raises(OperationFailure) as e:
        db.src.aggregate([{"$out": {"db": db.name, "coll": "cpu", "timeseries": timeseries}}])
    assert e.value.code == 7406103, e.value.details
    assert db.cpu.count_documents({}) == 3


def test_out_with_timeseries_refuses_a_regular_collection_a_view_and_unknown_options(db):
    db.src.insert_many(tsbs_rows(hosts=1, per_host=2))
    db.create_collection("plain")
    db.command("create", "v", viewOn="src", pipeline=[])
    cases = [("plain", {"timeField": "time"}, 7268700),
             ("v", {"timeField": "time"}, 7268703),
             ("new", {"timeField": "time", "invalidField": 1}, 40415)]
    for coll, ts, code in cases:
        with pytest.raises(OperationFailure) as e:
            db.src.aggregate([{"$out": {"db": db.name, "coll": coll, "timeseries": ts}}])
        assert e.value.code == code, (coll, e.value.details)
    assert "new" not in db.list_collection_names()


def test_a_failed_out_leaves_the_time_series_target_as_it_was(db):
    db.create_collection("cpu", timeseries={"timeField": "time", "metaField": "tags"})
    db.cpu.insert_many(tsbs_rows(hosts=2, per_host=3))
    before = contents(db.cpu)
    db.src.insert_many([{"time": T0, "tags": {"hostname": "a"}, "v": 1}, {"tags": {}, "v": 2}])
    with pytest.raises(OperationFailure) as e:
        db.src.aggregate([{"$out": "cpu"}])
    assert e.value.code == 2, e.value.details  # a measurement without its time: BadValue
    assert contents(db.cpu) == before
    assert not [n for n in db.list_collection_names() if "tmp.agg_out" in n]


def test_an_acknowledged_out_into_a_time_series_collection_survives_kill_9(tmp_path):
    rows = tsbs_rows(hosts=10, per_host=150)
    with running_server(dbpath=tmp_path) as (proc, port, _):
        db = MongoClient(port=port, directConnection=True).outk
        db.create_collection("cpu", timeseries={"timeField": "time", "metaField": "tags"})
        db.cpu.insert_many(tsbs_rows(hosts=1, per_host=5))
        db.src.insert_many([dict(r) for r in rows])
        db.src.aggregate([{"$out": "cpu"}])
        expected = contents(db.src)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = MongoClient(port=port, directConnection=True).outk
        assert contents(db.cpu) == expected
        assert db.command("validate", "cpu")["valid"] is True
        assert not [n for n in db.list_collection_names() if "tmp.agg_out" in n]
