"""Time-series collections through pymongo: create, insert, bucketing, reads, errors."""

import datetime

import pytest
from pymongo.errors import BulkWriteError, OperationFailure

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture()
def db(client):
    name = "py_ts"
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)


def test_create_and_list_collections(db):
    db.create_collection("weather", timeseries={"timeField": "ts", "metaField": "sensor", "granularity": "hours"})
    infos = {c["name"]: c for c in db.list_collections()}
    assert infos["weather"]["type"] == "timeseries"
    assert infos["weather"]["options"]["timeseries"] == {
        "timeField": "ts",
        "metaField": "sensor",
        "granularity": "hours",
        "bucketMaxSpanSeconds": 2592000,
    }
    assert "system.buckets.weather" in infos


def test_insert_and_query_measurements(db):
    db.create_collection("m", timeseries={"timeField": "ts", "metaField": "sensor"})
    docs = [
        {"ts": T0 + datetime.timedelta(minutes=i), "sensor": {"id": i % 3, "site": "x"}, "temp": 20.0 + i}
        for i in range(300)
    ]
    db.m.insert_many(docs)
    assert db.m.count_documents({}) == 300
    assert db.m.count_documents({"sensor.id": 1}) == 100
    hot = list(db.m.find({"temp": {"$gte": 310}}, {"_id": 0, "temp": 1}).sort("temp", 1))
    assert [d["temp"] for d in hot] == [310.0 + i for i in range(10)]
    per_sensor = {
        d["_id"]: d["n"] for d in db.m.aggregate([{"$group": {"_id": "$sensor.id", "n": {"$sum": 1}}}])
    }
    assert per_sensor == {0: 100, 1: 100, 2: 100}
    # 3 series over 300 minutes; a bucket spans at most 1 h: 5 buckets per series
    assert db["system.buckets.m"].count_documents({}) == 15


def test_missing_time_field_is_a_write_error(db):
    db.create_collection("m", timeseries={"timeField": "ts"})
    with pytest.raises(BulkWriteError) as e:
        db.m.insert_many([{"ts": T0, "v": 1}, {"v": 2}, {"ts": T0, "v": 3}], ordered=False)
    details = e.value.details
    assert details["nInserted"] == 2
    assert [(w["index"], w["code"]) for w in details["writeErrors"]] == [(1, 2)]


def test_invalid_options_are_rejected(db):
    with pytest.raises(OperationFailure) as e:
        db.command("create", "bad", timeseries={"timeField": "ts", "metaField": "ts"})
    assert e.value.code == 72
    with pytest.raises(OperationFailure) as e:
        db.command("create", "bad", timeseries={"timeField": "ts", "granularity": "weeks"})
    assert e.value.code == 2
