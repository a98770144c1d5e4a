"""A `find` without sort or projection, and an `aggregate` whose pipeline only filters,
return a regular collection's documents as they are stored (`planned.rs`,
`regular_stored_rows`): nothing is decoded but the paths the filter reads. These tests
pin that the bytes a client gets back are the bytes it inserted, for every BSON type and
across batches, and that the filter (on named paths, through arrays, or `$expr`) selects
the same documents as the document path (forced by a `$set` stage)."""

import datetime

import bson
import pytest
from bson import (
    Binary,
    Code,
    DBRef,
    Decimal128,
    Int64,
    MaxKey,
    MinKey,
    ObjectId,
    Regex,
    Timestamp,
)
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

RAW = CodecOptions(document_class=RawBSONDocument)


def documents():
    out = []
    for i in range(250):
        out.append({
            "_id": i,
            "n": i % 7 if i % 5 else float(i % 7),
            "s": f"s{i % 11}",
            "neg_zero": -0.0,
            "when": datetime.datetime(2026, 1, 1) + datetime.timedelta(minutes=i),
            "nested": {"a": {"b": i % 3}, "list": [i, {"k": i % 4}]},
            "arr": [{"x": i % 2}, {"x": 5}] if i % 3 else {"x": i % 2},
            "dec": Decimal128(f"{i}.10"),
            "long": Int64(i * 10**12),
            "bin": Binary(bytes([i % 256, 1]), 0 if i % 2 else 4),
            "code": Code("f(x)", {"x": i}) if i % 4 == 0 else Code("g()"),
            "re": Regex(f"^a{i % 3}", "i"),
            "ts": Timestamp(1000 + i, i),
            "oid": ObjectId(f"{i:024x}"),
            "ref": DBRef("other", i),
            "bounds": [MinKey(), MaxKey(), None, True],
            "utf8": "héllo wörld ✓",
        })
    return out


@pytest.fixture()
def coll(db):
    c = db["stored_docs"]
    c.insert_many([RawBSONDocument(bson.encode(d)) for d in documents()])
    return c.with_options(codec_options=RAW)


def raw_bytes(docs):
    return [d.raw for d in docs]


def test_documents_come_back_byte_for_byte_as_inserted(coll):
    inserted = [bson.encode(d) for d in documents()]
    assert raw_bytes(coll.find({}, batch_size=7)) == inserted
    assert raw_bytes(coll.aggregate([], batchSize=7)) == inserted
    assert raw_bytes(coll.aggregate([{"$match": {}}])) == inserted


FILTERS = [
    {"n": 3},
    {"n": {"$gte": 2, "$lt": 5}, "s": {"$in": ["s1", "s2", "s3"]}},
    {"nested.a.b": 1},
    {"nested.list.k": 2},
    {"arr.x": 1},
    {"arr": {"$elemMatch": {"x": 5}}},
    {"missing": None},
    {"missing.deeper": {"$exists": False}, "s.z": None},
    {"$or": [{"dec": {"$gt": Decimal128("200")}}, {"bin": {"$type": "binData"}, "n": 6}]},
    {"$expr": {"$eq": [{"$mod": ["$_id", 9]}, 4]}},
    {"ts": {"$gt": Timestamp(1200, 0)}},
    {"re": Regex("^a1", "i")},
]


@pytest.mark.parametrize("f", FILTERS, ids=[str(i) for i in range(len(FILTERS))])
def test_the_filter_selects_what_the_document_path_selects(coll, f):
    slow = raw_bytes(coll.aggregate([{"$match": f}, {"$set": {"zz": 1}}, {"$unset": "zz"}]))
    assert slow, f
    assert raw_bytes(coll.find(f)) == slow
    assert raw_bytes(coll.aggregate([{"$match": f}])) == slow
    # Skip and limit apply to the documents as stored.
    assert raw_bytes(coll.find(f, skip=1, limit=2)) == slow[1:3]


def test_a_hint_and_its_errors_are_the_planned_reads(coll):
    coll.create_index("n")
    f = {"n": {"$gte": 5}}
    want = sorted(raw_bytes(coll.find(f, hint=[("$natural", 1)])))
    assert sorted(raw_bytes(coll.find(f, hint="n_1"))) == want
    assert sorted(raw_bytes(coll.aggregate([{"$match": f}], hint="n_1"))) == want
    with pytest.raises(Exception) as e:
        list(coll.find(f, hint="nope_1"))
    assert e.value.code == 2
    with pytest.raises(Exception) as e:
        list(coll.aggregate([{"$match": f}], hint="nope_1"))
    assert e.value.code == 2
