"""Every error is named as MongoDB names its code: each (code, codeName) the server returns
for a broad set of failing commands is checked against the list taken from MongoDB's
`src/mongo/base/error_codes.yml` (`data/mongodb_error_codes.json`); a code not in that list
is an assertion location, named `Location<code>`."""

import datetime as dt
import json
from pathlib import Path

import bson
import pytest
from pymongo.errors import BulkWriteError, OperationFailure

MONGODB_CODES = {int(k): v["name"] for k, v in json.loads(
    (Path(__file__).parent / "data" / "mongodb_error_codes.json").read_text()).items()}


def mongodb_name(code):
    return MONGODB_CODES.get(code, f"Location{code}")


def failing_commands(db):
    """(description, command, expected code) for errors the server returns."""
    return [
        ("unknown command", {"noSuchCommand": 1}, 59),
        ("unknown field", {"find": "c", "nosuch": 1}, 40415),
        ("missing required field", {"update": "c", "updates": [{"u": {"$set": {"a": 1}}}]}, 40414),
        ("bad filter operator", {"find": "c", "filter": {"a": {"$foo": 1}}}, 2),
        ("filter of the wrong type", {"find": "c", "filter": 5}, 14),
        ("unknown expression", {"aggregate": "c", "pipeline": [{"$project": {"x": {"$foo": 1}}}],
                                "cursor": {}}, 168),
        ("unknown stage", {"aggregate": "c", "pipeline": [{"$foo": {}}], "cursor": {}}, 40324),
        ("$add of a string", {"aggregate": "c", "pipeline": [{"$project": {"x": {"$add": ["a", 1]}}}],
                              "cursor": {}}, 16554),
        ("drop a missing index", {"dropIndexes": "c", "index": "nope_1"}, 27),
        ("a view named like an existing collection",
         {"create": "c", "viewOn": "x", "pipeline": []}, 48),
        ("collMod of a missing collection", {"collMod": "missing", "validator": {}}, 26),
        ("invalid collection name", {"create": "a$b"}, 73),
        ("getMore of an unknown cursor", {"getMore": bson.Int64(12345), "collection": "c"}, 43),
        ("replica-set command on a standalone", {"replSetGetStatus": 1}, 76),
        ("change stream on a standalone",
         {"aggregate": "c", "pipeline": [{"$changeStream": {}}], "cursor": {}}, 40573),
        ("write to a view", {"insert": "v", "documents": [{"a": 1}]}, 166),
        ("view cycle", {"collMod": "v", "viewOn": "v", "pipeline": []}, 5),
        ("time-series options of the wrong type", {"create": "ts2", "timeseries": 5}, 14),
        ("$group over the memory limit without allowDiskUse",
         {"aggregate": "c", "pipeline": [{"$group": {"_id": "$_id", "p": {"$push": "$pad"}}}],
          "cursor": {}, "allowDiskUse": False}, 292),
        ("maxTimeMS out of range", {"find": "c", "maxTimeMS": -1}, 2),
        ("sort of the wrong type", {"find": "c", "sort": "x"}, 14),
        ("profile level out of range", {"profile": 7}, 2),
        ("$out with an unknown option", {"aggregate": "c", "pipeline": [
            {"$out": {"db": db.name, "coll": "o", "timeseries": {"timeField": "t", "x": 1}}}],
            "cursor": {}}, 40415),
    ]


@pytest.fixture()
def prepared(db, client):
    db.c.insert_many([{"_id": i, "a": i, "pad": "x" * 1000} for i in range(200)])
    db.create_collection("ts", timeseries={"timeField": "t"})
    db.command("create", "v", viewOn="c", pipeline=[])
    client.admin.command("setParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=50_000)
    yield db
    client.admin.command("setParameter", 1,
                         internalDocumentSourceGroupMaxMemoryBytes=100 * 1024 * 1024)


def test_command_errors_carry_mongodbs_code_names(prepared):
    db = prepared
    seen = []
    for what, command, code in failing_commands(db):
        with pytest.raises(OperationFailure) as e:
            db.command(command)
        details = e.value.details
        assert details["code"] == code, (what, details)
        assert details["codeName"] == mongodb_name(code), (what, details)
        seen.append(code)
    # Named codes and assertion locations are both covered.
    assert any(c in MONGODB_CODES for c in seen) and any(c not in MONGODB_CODES for c in seen)


def test_write_errors_carry_mongodbs_code_names(prepared):
    db = prepared
    with pytest.raises(BulkWriteError) as e:
        db.c.insert_many([{"_id": 1}, {"_id": 500}], ordered=False)
    errors = e.value.details["writeErrors"]
    assert [(w["code"], w["codeName"]) for w in errors] == [(11000, "DuplicateKey")]
    # A measurement without its time field.
    with pytest.raises(BulkWriteError) as e:
        db.ts.insert_many([{"v": 1}, {"t": dt.datetime(2026, 1, 1), "v": 2}], ordered=False)
    (w,) = e.value.details["writeErrors"]
    assert (w["code"], w["codeName"]) == (2, mongodb_name(2))


def test_the_list_from_mongodb_agrees_with_names_mongodb_drivers_know():
    # A few the drivers' own tables hard-code (pymongo's helpers, the retryable-writes spec).
    assert [MONGODB_CODES[c] for c in (11600, 11602, 10107, 13435, 13436, 189, 91, 262)] == [
        "InterruptedAtShutdown", "InterruptedDueToReplStateChange", "NotWritablePrimary",
        "NotPrimaryNoSecondaryOk", "NotPrimaryOrSecondary", "PrimarySteppedDown",
        "ShutdownInProgress", "ExceededTimeLimit"]
