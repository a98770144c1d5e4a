"""Direct inserts into system.buckets.<coll> (issue #19 gap 2), as mongorestore and a plain
insert_many of dumped bucket documents do, pinned through pymongo: version 1 buckets dumped
with find restore and read back equal; hand-built ones too; invalid ones fail validation
(121) before anything is written; a bucket _id that exists is a duplicate key (11000);
restored buckets survive kill -9. Compressed version 2 buckets: test_bucket_restore_v2.py."""

import datetime as dt
import signal

import pytest
from bson import ObjectId
from pymongo import MongoClient, ReturnDocument
from pymongo.errors import BulkWriteError, OperationFailure

from conftest import running_server

T0 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
TS = {"timeField": "t", "metaField": "m"}


@pytest.fixture()
def db(client):
    client.drop_database("py_restore")
    yield client["py_restore"]
    client.drop_database("py_restore")


def rows(host, n, start_s=0, step_s=10):
    return [{"t": T0 + dt.timedelta(seconds=start_s + i * step_s), "m": {"host": host},
             "v": float(i), "i": i, "s": f"x{i % 7}"} for i in range(n)]


def everything(coll):
    return sorted(coll.find(), key=lambda d: (d["m"]["host"], d["t"], d["_id"]))


def hand_bucket(host, times, values, minute=0):
    """A version 1 bucket as MongoDB writes one: _id time = control.min.t, rounded to the minute."""
    start = T0 + dt.timedelta(minutes=minute)
    return {
        "_id": ObjectId.from_datetime(start),
        "control": {"version": 1, "min": {"t": start, "v": min(values)}, "max": {"t": times[-1], "v": max(values)}},
        "meta": {"host": host},
        "data": {"t": {str(i): t for i, t in enumerate(times)}, "v": {str(i): v for i, v in enumerate(values)}},
    }


def test_buckets_dumped_with_find_restore_into_a_recreated_collection_and_read_back_equal(db):
    db.create_collection("m", timeseries=TS)
    db.m.insert_many(rows("a", 2500) + rows("b", 40) + rows("c", 1, start_s=7200))
    before = everything(db.m)
    dump = list(db["system.buckets.m"].find())
    assert len(dump) >= 5
    db.m.drop()
    db.create_collection("m", timeseries=TS)
    assert db["system.buckets.m"].insert_many(dump).inserted_ids == [b["_id"] for b in dump]
    assert everything(db.m) == before
    assert db.m.count_documents({"m.host": "a", "v": {"$lt": 10}}) == 10
    assert db.m.count_documents({"m.host": "c", "t": {"$gte": T0 + dt.timedelta(seconds=7200)}}) == 1
    # the restored series takes new measurements as usual
    db.m.insert_many(rows("b", 5, start_s=400))
    assert db.m.count_documents({"m.host": "b"}) == 45


def test_hand_built_version_1_buckets_restore_with_sparse_fields(db):
    db.create_collection("m", timeseries=TS)
    times = [T0 + dt.timedelta(seconds=s) for s in (5, 20, 65)]
    b = hand_bucket("h", times, [1.5, -2.0, 4.0])
    b["data"]["only_second"] = {"1": "here"}
    b["control"]["min"]["only_second"] = "here"
    b["control"]["max"]["only_second"] = "here"
    db["system.buckets.m"].insert_one(b)
    got = list(db.m.find({}, {"_id": 0}).sort("t", 1))
    naive = [t.replace(tzinfo=None) for t in times]
    assert got == [
        {"t": naive[0], "m": {"host": "h"}, "v": 1.5},
        {"t": naive[1], "m": {"host": "h"}, "v": -2.0, "only_second": "here"},
        {"t": naive[2], "m": {"host": "h"}, "v": 4.0},
    ]
    assert db.m.count_documents({"v": {"$gt": 0}}) == 2


@pytest.mark.parametrize("spoil,why", [
    (lambda b: b.pop("control"), "no control"),
    (lambda b: b.__setitem__("extra", 1), "unknown field"),
    (lambda b: b["control"]["min"].pop("t"), "no control.min time"),
    (lambda b: b["data"]["v"].__setitem__("x", 1.0), "a data key that is not a row index"),
    (lambda b: b["data"]["v"].__setitem__("9", 1.0), "a row index past the last measurement"),
    (lambda b: b["data"]["t"].__setitem__("1", "not a date"), "a time that is not a date"),
    (lambda b: b["control"].__setitem__("version", 3), "an unknown version"),
    (lambda b: b["control"].__setitem__("count", 7), "a count that disagrees"),
])
def test_an_invalid_bucket_fails_validation_with_121_and_nothing_is_written(db, spoil, why):
    db.create_collection("m", timeseries=TS)
    b = hand_bucket("h", [T0 + dt.timedelta(seconds=1), T0 + dt.timedelta(seconds=2)], [1.0, 2.0])
    spoil(b)
    with pytest.raises(BulkWriteError) as e:
        db["system.buckets.m"].insert_many([b])
    err = e.value.details["writeErrors"][0]
    assert err["code"] == 121, (why, err)
    assert db.m.count_documents({}) == 0


def test_a_bucket_whose_id_time_is_not_its_minimum_time_is_a_bad_value(db):
    db.create_collection("m", timeseries=TS)
    b = hand_bucket("h", [T0 + dt.timedelta(seconds=1)], [1.0])
    b["_id"] = ObjectId.from_datetime(T0 + dt.timedelta(hours=5))
    with pytest.raises(BulkWriteError) as e:
        db["system.buckets.m"].insert_many([b])
    assert e.value.details["writeErrors"][0]["code"] == 2
    # and a measurement outside the bucket's span
    late = hand_bucket("h", [T0 + dt.timedelta(seconds=1), T0 + dt.timedelta(hours=2)], [1.0, 2.0])
    with pytest.raises(BulkWriteError) as e:
        db["system.buckets.m"].insert_many([late])
    assert e.value.details["writeErrors"][0]["code"] == 2
    assert db.m.count_documents({}) == 0


def test_a_bucket_inserted_twice_is_a_duplicate_key_and_an_unordered_insert_goes_on(db):
    db.create_collection("m", timeseries=TS)
    first = hand_bucket("h", [T0 + dt.timedelta(seconds=1)], [1.0])
    db["system.buckets.m"].insert_one(first)
    other = hand_bucket("g", [T0 + dt.timedelta(minutes=3, seconds=1)], [2.0], minute=3)
    with pytest.raises(BulkWriteError) as e:
        db["system.buckets.m"].insert_many([first, other], ordered=False)
    errors = e.value.details["writeErrors"]
    assert [(x["index"], x["code"]) for x in errors] == [(0, 11000)]
    assert e.value.details["nInserted"] == 1
    assert sorted(d["v"] for d in db.m.find()) == [1.0, 2.0]


def test_restored_buckets_survive_kill_9(tmp_path):
    with running_server(dbpath=tmp_path) as (proc, port, _):
        db = MongoClient(port=port, directConnection=True).py_restore
        db.create_collection("m", timeseries=TS)
        db["system.buckets.m"].insert_many(
            [hand_bucket("h", [T0 + dt.timedelta(minutes=k, seconds=s) for s in (1, 2, 3)], [1.0, 2.0, 3.0], minute=k)
             for k in range(4)])
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = MongoClient(port=port, directConnection=True).py_restore
        assert db.m.count_documents({}) == 12
        assert db["system.buckets.m"].count_documents({}) == 4


def test_a_bucket_with_a_measurement_a_2dsphere_index_cannot_hold_is_refused_as_an_insert_is(db):
    db.create_collection("m", timeseries=TS)
    db.m.create_index([("loc", "2dsphere")])
    times = [T0 + dt.timedelta(seconds=1), T0 + dt.timedelta(seconds=2)]
    b = hand_bucket("h", times, [1.0, 2.0])
    b["data"]["loc"] = {"0": {"type": "Point", "coordinates": [1, 1]},
                        "1": {"type": "Point", "coordinates": ["x", 0]}}
    with pytest.raises(BulkWriteError) as e:
        db["system.buckets.m"].insert_many([b])
    assert e.value.details["writeErrors"][0]["code"] == 183934
    assert db.m.count_documents({}) == 0
    b["data"]["loc"]["1"] = {"type": "Point", "coordinates": [2, 2]}
    db["system.buckets.m"].insert_one(b)
    assert db.m.count_documents({"loc": {"$geoWithin": {"$centerSphere": [[2, 2], 0.001]}}}) == 1


def test_deletes_on_the_buckets_collection_remove_whole_buckets_open_or_stored(db):
    # #19 gap 2: a delete on system.buckets.<coll> matches bucket documents as a read of
    # the buckets shows them and removes each whole bucket; the rest reads back unchanged.
    db.create_collection("m", timeseries=TS)
    db.m.insert_many(rows("a", 2500) + rows("b", 40) + rows("c", 3))
    buckets = db["system.buckets.m"]
    dump = list(buckets.find())
    a_buckets = [b["_id"] for b in dump if b["meta"] == {"host": "a"}]
    assert len(a_buckets) >= 2
    assert buckets.delete_one({"_id": a_buckets[0]}).deleted_count == 1
    assert buckets.delete_many({"meta.host": "b"}).deleted_count == 1
    assert buckets.delete_many({"meta.host": "nobody"}).deleted_count == 0
    left = {b["_id"] for b in buckets.find()}
    assert left == {b["_id"] for b in dump} - {a_buckets[0]} - {b["_id"] for b in dump if b["meta"] == {"host": "b"}}
    first = dump[[b["_id"] for b in dump].index(a_buckets[0])]
    assert db.m.count_documents({"m.host": "a"}) == 2500 - len(first["data"]["t"])
    assert db.m.count_documents({"m.host": "b"}) == 0
    assert db.m.count_documents({"m.host": "c"}) == 3
    # The series goes on: new measurements of a deleted bucket's series are stored.
    db.m.insert_many(rows("b", 5, start_s=90_000))
    assert db.m.count_documents({"m.host": "b"}) == 5


def test_bucket_deletes_survive_kill_9(tmp_path):
    with running_server(dbpath=tmp_path) as (proc, port, _):
        db = MongoClient(port=port, directConnection=True).py_restore
        db.create_collection("m", timeseries=TS)
        db.m.insert_many(rows("a", 30) + rows("b", 30))
        assert db["system.buckets.m"].delete_many({"meta.host": "a"}).deleted_count == 1
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = MongoClient(port=port, directConnection=True).py_restore
        assert db.m.count_documents({}) == 30
        assert db.m.distinct("m.host") == ["b"]


def test_updates_on_the_buckets_collection_rewrite_whole_buckets(db):
    # #19 gap 2: an update of a bucket document rewrites the bucket from the updated
    # document, checked as an inserted bucket is; the measurements read back changed.
    db.create_collection("m", timeseries=TS)
    db.m.insert_many(rows("a", 5) + rows("b", 5))
    buckets = db["system.buckets.m"]
    before = everything(db.m)
    r = buckets.update_one({"meta.host": "a"}, {"$set": {"control.closed": True}})
    assert (r.matched_count, r.modified_count) == (1, 1)
    assert everything(db.m) == before
    r = buckets.update_many({}, {"$unset": {"data.s.4": ""}, "$set": {"data.v.0": -1.0}})
    assert (r.matched_count, r.modified_count) == (2, 2)
    after = {(d["m"]["host"], d["i"]): d for d in db.m.find()}
    assert after[("a", 0)]["v"] == -1.0 and after[("b", 0)]["v"] == -1.0
    assert "s" not in after[("a", 4)] and after[("a", 3)]["s"] == "x3"
    # A new meta: the bucket's measurements follow, and later inserts of the old meta
    # go to a bucket of their own.
    buckets.update_one({"meta.host": "b"}, {"$set": {"meta.host": "z"}})
    assert db.m.count_documents({"m.host": "z"}) == 5 and db.m.count_documents({"m.host": "b"}) == 0
    db.m.insert_many(rows("b", 2, start_s=60))
    assert db.m.count_documents({"m.host": "b"}) == 2 and db.m.count_documents({"m.host": "z"}) == 5


@pytest.mark.parametrize("update, code", [
    ({"$set": {"data.t.0": "not a date"}}, 121),
    ({"$set": {"control.version": 9}}, 121),
    ({"$set": {"data.t.0": T0 + dt.timedelta(days=3)}}, 2),
    ({"$set": {"_id": ObjectId.from_datetime(T0)}}, 66),
], ids=["bad-time", "bad-version", "outside-span", "new-id"])
def test_an_update_that_leaves_an_invalid_bucket_fails_and_changes_nothing(db, update, code):
    db.create_collection("m", timeseries=TS)
    db.m.insert_many(rows("a", 5) + rows("b", 5))
    before = everything(db.m)
    with pytest.raises(OperationFailure) as e:
        db["system.buckets.m"].update_many({}, update)
    assert e.value.code == code
    assert everything(db.m) == before


def test_an_upsert_into_the_buckets_collection_is_refused_before_anything_changes(db):
    db.create_collection("m", timeseries=TS)
    with pytest.raises(OperationFailure) as e:
        db["system.buckets.m"].update_one({"_id": ObjectId()}, {"$set": {"x": 1}}, upsert=True)
    assert e.value.code == 72
    assert db["system.buckets.m"].count_documents({}) == 0


def test_bucket_updates_survive_kill_9(tmp_path):
    with running_server(dbpath=tmp_path) as (proc, port, _):
        db = MongoClient(port=port, directConnection=True).py_restore
        db.create_collection("m", timeseries=TS)
        db.m.insert_many(rows("a", 30))
        assert db["system.buckets.m"].update_one({}, {"$set": {"data.v.0": 99.5}}).modified_count == 1
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = MongoClient(port=port, directConnection=True).py_restore
        assert db.m.count_documents({"v": 99.5}) == 1 and db.m.count_documents({}) == 30


def test_find_and_modify_on_the_buckets_collection_returns_and_changes_one_bucket(db):
    db.create_collection("m", timeseries=TS)
    db.m.insert_many(rows("a", 5) + rows("b", 5) + rows("c", 5))
    buckets = db["system.buckets.m"]
    # The sort picks the bucket; the pre-image is returned by default, the post-image
    # with return_document=AFTER.
    old = buckets.find_one_and_update({}, {"$set": {"data.v.1": 7.5}}, sort=[("meta.host", -1)])
    assert old["meta"] == {"host": "c"} and old["data"]["v"]["1"] == 1.0
    new = buckets.find_one_and_update({"meta.host": "a"}, {"$set": {"data.v.2": 8.5}},
                                      return_document=ReturnDocument.AFTER)
    assert new["data"]["v"]["2"] == 8.5
    assert db.m.find_one({"m.host": "c", "i": 1})["v"] == 7.5
    assert db.m.find_one({"m.host": "a", "i": 2})["v"] == 8.5
    gone = buckets.find_one_and_delete({"meta.host": "b"})
    assert gone["meta"] == {"host": "b"} and len(gone["data"]["t"]) == 5
    assert db.m.count_documents({"m.host": "b"}) == 0 and db.m.count_documents({}) == 10
    assert buckets.find_one_and_delete({"meta.host": "nobody"}) is None
    with pytest.raises(OperationFailure) as e:
        buckets.find_one_and_update({"meta.host": "q"}, {"$set": {"x": 1}}, upsert=True)
    assert e.value.code == 72
