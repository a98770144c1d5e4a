"""Converting an existing index to a unique one with collMod, as MongoDB 6.0+ documents it
(prepareUnique, then unique with dryRun, then unique; forceNonUnique back), through
pymongo; the conversion survives kill -9 once acknowledged."""

import tempfile
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure

from conftest import running_server

APPLES = [
    {"_id": 1, "type": "Delicious", "quantity": 12},
    {"_id": 2, "type": "Macintosh", "quantity": 13},
    {"_id": 3, "type": "Delicious", "quantity": 13},
    {"_id": 4, "type": "Fuji", "quantity": 15},
    {"_id": 5, "type": "Washington", "quantity": 10},
]


def coll_mod(db, **index):
    return db.command("collMod", "apples", index=index)


def type_index(db):
    return next(i for i in db.apples.list_indexes() if i["name"] == "type_1")


@pytest.fixture
def apples(db):
    db.apples.insert_many(APPLES)
    db.apples.create_index("type")
    return db


def test_prepare_unique_refuses_new_duplicates_and_unique_lists_the_old_ones(apples):
    db = apples
    reply = coll_mod(db, keyPattern={"type": 1}, prepareUnique=True)
    assert (reply["prepareUnique_old"], reply["prepareUnique_new"]) == (False, True)
    assert type_index(db).get("prepareUnique") is True
    with pytest.raises(DuplicateKeyError) as e:
        db.apples.insert_one({"type": "Fuji", "quantity": 20})
    assert e.value.details["keyValue"] == {"type": "Fuji"}
    # two new documents with one key in one batch: the second is the duplicate
    with pytest.raises(BulkWriteError):
        db.apples.insert_many([{"_id": 10, "type": "Gala"}, {"_id": 11, "type": "Gala"}])
    assert [d["_id"] for d in db.apples.find({"type": "Gala"})] == [10]
    db.apples.delete_one({"_id": 10})
    # updates that keep a document's key are not new duplicates
    db.apples.update_one({"_id": 1}, {"$inc": {"quantity": 1}})
    with pytest.raises(DuplicateKeyError):
        db.apples.update_one({"_id": 2}, {"$set": {"type": "Fuji"}})

    for dry_run in (True, False):
        with pytest.raises(OperationFailure) as e:
            db.command("collMod", "apples", index={"keyPattern": {"type": 1}, "unique": True},
                       dryRun=dry_run)
        assert e.value.code == 359
        assert e.value.details["codeName"] == "CannotConvertIndexToUnique"
        assert e.value.details["violations"] == [{"ids": [1, 3]}]
    assert "unique" not in type_index(db)

    db.apples.delete_one({"_id": 3})
    assert db.command("collMod", "apples", index={"keyPattern": {"type": 1}, "unique": True},
                      dryRun=True) == {"ok": 1.0}
    assert "unique" not in type_index(db)
    reply = coll_mod(db, name="type_1", unique=True)
    assert reply["unique_new"] is True
    spec = type_index(db)
    assert spec["unique"] is True and "prepareUnique" not in spec
    with pytest.raises(DuplicateKeyError):
        db.apples.insert_one({"type": "Delicious"})
    assert db.apples.count_documents({"type": "Delicious"}) == 1
    assert [d["_id"] for d in db.apples.find({"type": {"$gte": "F"}}).hint("type_1")] == [4, 2, 5]

    reply = coll_mod(db, name="type_1", forceNonUnique=True)
    assert reply["forceNonUnique_new"] is True
    assert "unique" not in type_index(db)
    db.apples.insert_one({"_id": 6, "type": "Delicious"})
    assert sorted(d["_id"] for d in db.apples.find({"type": "Delicious"}).hint("type_1")) == [1, 6]


@pytest.mark.parametrize("index, extra, code, message", [
    ({"name": "type_1", "unique": True}, {}, 72, "Cannot make index unique with 'prepareUnique=false'"),
    ({"name": "type_1", "unique": False}, {}, 2, "Cannot make index non-unique"),
    ({"name": "type_1", "forceNonUnique": False}, {}, 2, "'forceNonUnique: false' is not supported"),
    ({"name": "type_1", "unique": True, "forceNonUnique": True}, {}, 72, "at the same time"),
    ({"name": "type_1", "prepareUnique": True, "hidden": True}, {}, 72,
     "prepareUnique cannot be combined with any other modification"),
    ({"name": "type_1", "hidden": True}, {"dryRun": True}, 72,
     "dry run mode requires an index modification with unique: true"),
    ({"name": "type_1", "prepareUnique": "yes"}, {}, 14, "prepareUnique"),
])
def test_unique_conversion_mistakes_are_refused_before_anything_changes(apples, index, extra, code, message):
    before = type_index(apples)
    with pytest.raises(OperationFailure) as e:
        apples.command("collMod", "apples", index=index, **extra)
    assert e.value.code == code
    assert message in str(e.value)
    assert type_index(apples) == before


def test_an_acknowledged_unique_conversion_survives_kill_9():
    with tempfile.TemporaryDirectory(prefix="hourglass-unique-") as tmp:
        dbpath = Path(tmp) / "db"
        dbpath.mkdir()
        with running_server(dbpath=dbpath, exit_on_failure=False) as (proc, port, _):
            db = MongoClient(port=port, directConnection=True)["t"]
            db.apples.insert_many([d for d in APPLES if d["_id"] != 3])
            db.apples.create_index("type")
            coll_mod(db, name="type_1", prepareUnique=True)
            coll_mod(db, name="type_1", unique=True)
            proc.kill()
            proc.wait()
        with running_server(dbpath=dbpath, exit_on_failure=False) as (_, port, _):
            db = MongoClient(port=port, directConnection=True)["t"]
            assert type_index(db)["unique"] is True
            with pytest.raises(DuplicateKeyError):
                db.apples.insert_one({"type": "Fuji"})
            assert db.command("validate", "apples")["valid"] is True
            assert db.apples.count_documents({"type": "Fuji"}) == 1
