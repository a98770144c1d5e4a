#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/{wire,query}/).

Run with any Python that has pymongo's `bson` (e.g. the tests' .venv):
    .venv/bin/python fuzz/make_corpus.py
The files are committed; this script documents where they came from.
"""
import datetime
import struct
from pathlib import Path

import bson

HERE = Path(__file__).resolve().parent


def op_msg(body, sequences=(), flags=0, request_id=1):
    sections = b"\x00" + bson.encode(body)
    for name, docs in sequences:
        payload = name.encode() + b"\x00" + b"".join(bson.encode(d) for d in docs)
        sections += b"\x01" + struct.pack("<i", len(payload) + 4) + payload
    msg = struct.pack("<I", flags) + sections
    return struct.pack("<iiii", 16 + len(msg), request_id, 0, 2013) + msg


def op_query(cmd):
    body = struct.pack("<i", 0) + b"admin.$cmd\x00" + struct.pack("<ii", 0, -1) + bson.encode(cmd)
    return struct.pack("<iiii", 16 + len(body), 1, 0, 2004) + body


T = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
WIRE = {
    "hello": op_msg({"hello": 1, "$db": "admin"}),
    "ping_checksum_flag": op_msg({"ping": 1, "$db": "admin"}, flags=0),
    "op_query_ismaster": op_query({"isMaster": 1}),
    "find_filter": op_msg({"find": "c", "filter": {"a": {"$gt": 1}, "$or": [{"b": 1}, {"c": {"$in": [1, 2]}}]}, "$db": "test"}),
    "insert_sequence": op_msg({"insert": "c", "$db": "test"}, [("documents", [{"_id": i, "v": i * 1.5, "t": T} for i in range(3)])]),
    "insert_body_array": op_msg({"insert": "c", "documents": [{"a": 1}, {"a": [1, 2]}], "$db": "test"}),
    "update_sequence": op_msg({"update": "c", "$db": "test"}, [("updates", [{"q": {"a": 1}, "u": {"$set": {"b.c": 2}}, "multi": True}])]),
    "delete_sequence": op_msg({"delete": "c", "$db": "test"}, [("deletes", [{"q": {}, "limit": 0}])]),
    "aggregate": op_msg({"aggregate": "c", "pipeline": [{"$match": {"a": 1}}, {"$group": {"_id": "$b", "n": {"$sum": 1}}}, {"$sort": {"n": -1}}], "cursor": {}, "$db": "test"}),
    "nested": op_msg({"ping": 1, "$db": "admin", "x": {"a": {"a": {"a": {"a": [1, {"b": [2]}]}}}}}),
    "more_to_come": op_msg({"insert": "c", "documents": [{}], "$db": "test"}, flags=2),
}

QUERY = {
    "filter_ops": {"f": {"a": {"$gte": 1, "$lt": 10}, "b": {"$regex": "^x", "$options": "i"}, "c": {"$elemMatch": {"d": {"$exists": True}}}, "$and": [{"e.f.g": None}, {"$nor": [{"x": {"$type": "double"}}]}]}},
    "filter_expr": {"f": {"$expr": {"$gt": [{"$size": {"$ifNull": ["$c", []]}}, 1]}}},
    "projection": {"p": {"a": 1, "c.d": 1, "_id": 0}},
    "projection_slice": {"p": {"c": {"$slice": [1, 2]}, "e": {"$elemMatch": {"f": 1}}}},
    "sort": {"s": {"a": 1, "b": -1}},
    "update_ops": {"u": {"$set": {"e.f.g": 1}, "$inc": {"a": 2}, "$push": {"c": {"$each": [4, 5], "$slice": -3}}, "$unset": {"b": ""}}},
    "update_rename": {"u": {"$rename": {"a": "z"}, "$min": {"x": 0}, "$addToSet": {"c": 9}}},
    "pipeline": {"p": [{"$match": {"a": 1}}, {"$project": {"y": {"$add": ["$a", 1]}}}, {"$unwind": "$c"}, {"$group": {"_id": None, "s": {"$sum": "$y"}}}]},
    "pipeline_window": {"p": [{"$setWindowFields": {"sortBy": {"t": 1}, "output": {"m": {"$avg": "$x", "window": {"documents": [-1, 0]}}}}}]},
    "update_pipeline": {"p": [{"$set": {"n": {"$concat": ["$b", "!"]}}}, {"$unset": "a"}]},
    "expr_arith": {"e": {"$cond": [{"$gt": ["$a", 0]}, {"$multiply": ["$a", 2]}, {"$divide": [1, "$x"]}]}},
    "expr_arrays": {"e": {"$reduce": {"input": {"$range": [0, 10]}, "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}},
    "expr_map": {"e": {"$map": {"input": "$c", "as": "i", "in": {"$type": "$$i"}}}},
    "expr_dates": {"e": {"$dateTrunc": {"date": "$t", "unit": "hour", "binSize": 2}}},
    "expr_strings": {"e": {"$split": [{"$toUpper": "$b"}, "X"]}},
    "nested_and": {"f": {"$and": [{"$and": [{"$and": [{"a": 1}]}]}]}},
}


def main():
    for name, data in WIRE.items():
        (HERE / "corpus" / "wire" / name).write_bytes(data)
    for name, doc in QUERY.items():
        (HERE / "corpus" / "query" / name).write_bytes(bson.encode(doc))
    print(f"wrote {len(WIRE)} wire and {len(QUERY)} query seeds")


if __name__ == "__main__":
    main()
