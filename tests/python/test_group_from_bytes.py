"""A `$group` right after the `$match` of an aggregate on a regular collection runs on the
stored documents' bytes (`crates/query/src/pipeline/raw_group.rs`): no document is built
per row. These tests pin that its answers, order and errors are those of the document
path (forced here by a `$set` stage in front of the `$group`), with documents the bytes
cannot answer alone (arrays on a key path, missing fields, mixed number types), and that
past the memory limit it still spills or refuses as MongoDB does."""

import datetime

import pytest
from bson import Decimal128, Int64
from pymongo.errors import OperationFailure

T0 = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)


def documents(n=600):
    out = []
    for i in range(n):
        d = {
            "_id": i,
            "t": T0 + datetime.timedelta(seconds=37 * i),
            "tags": {"host": f"h{i % 7}", "rack": i % 3},
            "v": (i * 7919) % 1000 / 10,
        }
        kind = i % 13
        if kind == 0:
            d["v"] = i % 4  # an int: groups by value with the doubles
        elif kind == 1:
            del d["v"]
        elif kind == 2:
            d["tags"] = [{"host": "a"}, {"host": "b"}]  # the key path through an array
        elif kind == 3:
            d["t"] = None
        elif kind == 4:
            del d["t"]
        elif kind == 5:
            d["tags"]["host"] = float(i % 2)  # 0.0 / 1.0 group with ints 0 / 1
        elif kind == 6:
            d["tags"]["host"] = i % 2
        elif kind == 7:
            d["v"] = f"s{i % 3}"
        elif kind == 8:
            d["v"] = Int64(i)
        elif kind == 9:
            d["v"] = Decimal128("1.5")
        elif kind == 10:
            d["tags"] = "flat"  # `tags.host` is missing under a string
        out.append(d)
    return out


@pytest.fixture()
def coll(db):
    c = db["group_bytes"]
    c.insert_many(documents())
    return c


GROUPS = [
    {"_id": {"h": {"$dateTrunc": {"date": "$t", "unit": "hour"}}, "host": "$tags.host"},
     "avg": {"$avg": "$v"}, "n": {"$count": {}}, "mx": {"$max": "$v"}, "mn": {"$min": "$v"}},
    {"_id": "$tags.host", "s": {"$sum": "$v"}, "f": {"$first": "$t"}, "l": {"$last": "$v"},
     "p": {"$push": "$tags.rack"}, "one": {"$sum": 1}, "set": {"$addToSet": "$tags"}},
    {"_id": None, "sd": {"$stdDevSamp": "$v"}, "hosts": {"$addToSet": "$tags.host"}},
    {"_id": {"$dateTrunc": {"date": "$t", "unit": "minute", "binSize": 15}},
     "n": {"$sum": 1}, "last": {"$last": "$_id"}},
    {"_id": {"t": "$t", "d": {"$dateTrunc": {"date": "$t", "unit": "day"}}}, "n": {"$sum": 1}},
    {"_id": {"$cond": [{"$gt": ["$tags.rack", 0]}, "pos", "zero"]}, "m": {"$max": "$tags"}},
]

FILTERS = [
    {},
    {"v": {"$gt": 20}},
    {"tags.host": {"$in": ["h1", "a", 1]}},
    {"$expr": {"$lt": ["$_id", 400]}},
    {"t": {"$gte": T0 + datetime.timedelta(hours=1)}, "tags.rack": {"$ne": 2}},
]


@pytest.mark.parametrize("group", GROUPS, ids=[f"group{i}" for i in range(len(GROUPS))])
def test_groups_read_from_bytes_equal_the_document_path_in_order(coll, group):
    for f in FILTERS:
        fast = list(coll.aggregate([{"$match": f}, {"$group": group}]))
        slow = list(coll.aggregate([{"$match": f}, {"$set": {"zz": 1}}, {"$group": group}]))
        assert fast == slow, (group, f)
        assert fast, (group, f)


def test_a_group_without_a_match_reads_every_document(coll):
    group = {"_id": {"$type": "$tags.rack"}, "n": {"$sum": 1}}
    got = {d["_id"]: d["n"] for d in coll.aggregate([{"$group": group}])}
    # `tags.rack` is a number in plain documents, an empty array through the array of
    # tags, and missing under the string.
    assert got == {"int": 600 - 2 * 46, "array": 46, "missing": 46}


def test_a_key_expression_error_is_the_document_paths(coll):
    coll.insert_one({"_id": "bad", "t": "not a date"})
    pipeline = [{"$group": {"_id": {"$dateTrunc": {"date": "$t", "unit": "hour"}}}}]
    with pytest.raises(OperationFailure) as fast:
        list(coll.aggregate(pipeline))
    with pytest.raises(OperationFailure) as slow:
        list(coll.aggregate([{"$set": {"zz": 1}}] + pipeline))
    assert fast.value.code == slow.value.code
    assert fast.value.details["errmsg"] == slow.value.details["errmsg"]


def test_groups_past_the_memory_limit_spill_or_are_refused(client, coll):
    admin = client.admin
    admin.command("setParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=2000)
    try:
        pipeline = [{"$group": {"_id": "$_id", "n": {"$sum": 1}}}, {"$count": "n"}]
        assert list(coll.aggregate(pipeline)) == [{"n": 600}]
        with pytest.raises(OperationFailure) as e:
            list(coll.aggregate(pipeline, allowDiskUse=False))
        assert e.value.code == 292
    finally:
        admin.command("setParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=104857600)


def test_a_group_in_a_transaction_sees_the_transactions_writes(client, coll):
    # The byte reader must see what the document path sees inside a transaction.
    with client.start_session() as s:
        with s.start_transaction():
            coll.insert_one({"_id": "txn", "tags": {"rack": 99}}, session=s)
            got = list(coll.aggregate(
                [{"$match": {"tags.rack": 99}}, {"$group": {"_id": "$tags.rack", "n": {"$sum": 1}}}],
                session=s))
            assert got == [{"_id": 99, "n": 1}]
            s.abort_transaction()
