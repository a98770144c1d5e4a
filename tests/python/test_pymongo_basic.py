"""pymongo against hourglass: the everyday driver API."""

import pymongo
import pytest
from bson import ObjectId
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure


def test_ping_and_hello(client):
    assert client.admin.command("ping")["ok"] == 1.0
    hello = client.admin.command("hello")
    assert hello["isWritablePrimary"] is True
    assert hello["maxWireVersion"] == 21


def test_insert_one_assigns_object_id(db):
    res = db.things.insert_one({"name": "a"})
    assert isinstance(res.inserted_id, ObjectId)
    doc = db.things.find_one({"_id": res.inserted_id})
    assert doc == {"_id": res.inserted_id, "name": "a"}


def test_insert_many_and_find_with_filter_sort_limit(db):
    res = db.nums.insert_many([{"_id": i, "n": i, "odd": i % 2 == 1} for i in range(30)])
    assert res.inserted_ids == list(range(30))
    got = list(db.nums.find({"odd": True, "n": {"$gt": 10}}).sort("n", pymongo.DESCENDING).limit(3))
    assert [d["n"] for d in got] == [29, 27, 25]
    got = list(db.nums.find({}, {"_id": 0, "n": 1}).sort("n", 1).skip(5).limit(2))
    assert got == [{"n": 5}, {"n": 6}]
    assert len(list(db.nums.find({"n": {"$in": [1, 2, 3, 99]}}))) == 3


def test_find_iterates_across_get_more(db):
    db.many.insert_many([{"_id": i} for i in range(250)])
    ids = [d["_id"] for d in db.many.find().sort("_id", 1).batch_size(40)]
    assert ids == list(range(250))


def test_update_one_upsert_and_inc(db):
    res = db.counters.update_one({"name": "hits"}, {"$inc": {"n": 1}}, upsert=True)
    assert res.matched_count == 0
    assert isinstance(res.upserted_id, ObjectId)
    res = db.counters.update_one({"name": "hits"}, {"$inc": {"n": 5}}, upsert=True)
    assert res.matched_count == 1 and res.modified_count == 1 and res.upserted_id is None
    doc = db.counters.find_one({"name": "hits"}, {"_id": 0})
    assert doc == {"name": "hits", "n": 6}


def test_update_many_set(db):
    db.items.insert_many([{"_id": i, "k": i % 3} for i in range(9)])
    res = db.items.update_many({"k": 0}, {"$set": {"zero": True}})
    assert (res.matched_count, res.modified_count) == (3, 3)
    assert sorted(d["_id"] for d in db.items.find({"zero": True})) == [0, 3, 6]


def test_delete_many_and_count_documents(db):
    db.items.insert_many([{"_id": i, "k": i % 3} for i in range(12)])
    assert db.items.count_documents({}) == 12
    assert db.items.count_documents({"k": 1}) == 4
    res = db.items.delete_many({"k": {"$ne": 1}})
    assert res.deleted_count == 8
    assert db.items.count_documents({}) == 4
    assert db.items.estimated_document_count() == 4


def test_distinct(db):
    db.tags.insert_many([
        {"t": ["a", "b"], "g": 1},
        {"t": "c", "g": 1},
        {"t": ["a"], "g": 2},
    ])
    assert sorted(db.tags.distinct("t")) == ["a", "b", "c"]
    assert sorted(db.tags.distinct("t", {"g": 2})) == ["a"]


def test_aggregate_group(db):
    db.sales.insert_many([
        {"item": "x", "qty": 2},
        {"item": "y", "qty": 5},
        {"item": "x", "qty": 3},
    ])
    got = list(db.sales.aggregate([
        {"$group": {"_id": "$item", "total": {"$sum": "$qty"}, "n": {"$sum": 1}}},
        {"$sort": {"_id": 1}},
    ]))
    assert got == [{"_id": "x", "total": 5, "n": 2}, {"_id": "y", "total": 5, "n": 1}]


def test_create_list_drop_collections(db):
    db.create_collection("alpha")
    db.beta.insert_one({"x": 1})
    assert sorted(db.list_collection_names()) == ["alpha", "beta"]
    db.drop_collection("alpha")
    assert db.list_collection_names() == ["beta"]
    db.beta.drop()
    assert db.list_collection_names() == []


def test_duplicate_id_raises_duplicate_key_error(db):
    db.dup.insert_one({"_id": 1})
    with pytest.raises(DuplicateKeyError) as exc:
        db.dup.insert_one({"_id": 1})
    assert exc.value.code == 11000
    with pytest.raises(BulkWriteError) as exc:
        db.dup.insert_many([{"_id": 2}, {"_id": 1}, {"_id": 3}])
    details = exc.value.details
    assert details["nInserted"] == 1
    assert [e["code"] for e in details["writeErrors"]] == [11000]
    assert details["writeErrors"][0]["index"] == 1
    assert sorted(d["_id"] for d in db.dup.find()) == [1, 2]


def test_unknown_command_is_operation_failure_59(client):
    with pytest.raises(OperationFailure) as exc:
        client.admin.command("thisCommandDoesNotExist")
    assert exc.value.code == 59
    assert exc.value.details.get("codeName") == "CommandNotFound"


def test_find_one_and_update_returns_new(db):
    db.fam.insert_one({"_id": 1, "v": 1})
    doc = db.fam.find_one_and_update(
        {"_id": 1}, {"$inc": {"v": 1}}, return_document=pymongo.ReturnDocument.AFTER
    )
    assert doc == {"_id": 1, "v": 2}


def test_list_database_names_includes_written_db(client, db):
    db.c.insert_one({"x": 1})
    assert db.name in client.list_database_names()
