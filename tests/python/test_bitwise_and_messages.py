"""The bitwise query operators ($bitsAllSet, $bitsAnySet, $bitsAllClear, $bitsAnyClear)
in find, count, aggregate $match, $elemMatch and on time-series collections, with
MongoDB 7.0's argument errors; $merge whenMatched: 'fail' duplicate key messages; the
ImmutableField message of an operator update that changes _id."""

import base64
import datetime

import pytest
from bson import Binary, Decimal128, Int64
from pymongo.errors import DuplicateKeyError, OperationFailure, WriteError


def b64(s, subtype=0):
    return Binary(base64.b64decode(s), subtype)


def ids(coll, flt):
    return sorted(d["_id"] for d in coll.find(flt))


def assert_count(coll, flt, n):
    """The same answer from find, count and aggregate $match."""
    assert len(list(coll.find(flt))) == n, flt
    assert coll.count_documents(flt) == n, flt
    assert len(list(coll.aggregate([{"$match": flt}]))) == n, flt


NUMBER_CASES = [
    ({"$bitsAllSet": 0}, 6),
    ({"$bitsAllSet": 1}, 2),
    ({"$bitsAllSet": 16}, 3),
    ({"$bitsAllSet": 54}, 2),
    ({"$bitsAllSet": 55}, 1),
    ({"$bitsAllSet": 88}, 2),
    ({"$bitsAllSet": 255}, 1),
    ({"$bitsAllClear": 0}, 6),
    ({"$bitsAllClear": 1}, 4),
    ({"$bitsAllClear": 16}, 3),
    ({"$bitsAllClear": 129}, 4),
    ({"$bitsAllClear": 255}, 2),
    ({"$bitsAnySet": 0}, 0),
    ({"$bitsAnySet": 9}, 3),
    ({"$bitsAnySet": 255}, 4),
    ({"$bitsAnyClear": 0}, 0),
    ({"$bitsAnyClear": 18}, 4),
    ({"$bitsAnyClear": 24}, 4),
    ({"$bitsAnyClear": 255}, 5),
    ({"$bitsAllSet": []}, 6),
    ({"$bitsAllSet": [0]}, 2),
    ({"$bitsAllSet": [1, 2, 4, 5]}, 2),
    ({"$bitsAllSet": [0, 1, 2, 3, 4, 5, 6, 7]}, 1),
    ({"$bitsAllClear": [1, 7]}, 4),
    ({"$bitsAllClear": [0, 1, 2, 3, 4, 5, 6, 7]}, 2),
    ({"$bitsAnySet": []}, 0),
    ({"$bitsAnySet": [1, 3]}, 3),
    ({"$bitsAnyClear": []}, 0),
    ({"$bitsAnyClear": [1, 4]}, 4),
    ({"$bitsAllSet": 54, "$bitsAllClear": 201}, 1),
    ({"$bitsAllSet": 16.0}, 3),
    ({"$bitsAllSet": Int64(54)}, 2),
]


@pytest.mark.parametrize("cond,n", NUMBER_CASES, ids=[str(c) for c, _ in NUMBER_CASES])
def test_bit_tests_on_numbers_agree_in_find_count_and_match(db, cond, n):
    db.c.insert_many([{"_id": i, "a": a} for i, a in enumerate([0, 1, 54, 88, 255, 10**18])])
    assert_count(db.c, {"a": cond}, n)


def test_bit_tests_on_negative_numbers_use_twos_complement(db):
    db.c.insert_many([{"_id": i, "a": a} for i, a in enumerate([0, -1, -54, -10**18])])
    every = list(range(64))
    for cond, n in [({"$bitsAllSet": 2}, 2), ({"$bitsAllSet": 127}, 1), ({"$bitsAllSet": 74}, 2),
                    ({"$bitsAllClear": 53}, 3), ({"$bitsAllClear": 127}, 2),
                    ({"$bitsAnySet": 127}, 2), ({"$bitsAnyClear": 53}, 3),
                    ({"$bitsAllSet": every}, 1), ({"$bitsAllSet": [1, 7, 6, 3, 100]}, 2),
                    ({"$bitsAllClear": every}, 1), ({"$bitsAnySet": every}, 3),
                    ({"$bitsAnyClear": [0, 2, 4, 5, 100]}, 3),
                    ({"$bitsAllSet": 74, "$bitsAllClear": 53}, 1)]:
        assert_count(db.c, {"a": cond}, n)


def test_bit_tests_with_large_long_masks(db):
    values = [0, 1, Int64(9223372036854775807), Int64(6917529027641081856),
              Int64(2305843009213693952)]
    db.c.insert_many([{"_id": i, "a": a} for i, a in enumerate(values)])
    for cond, n in [({"$bitsAllSet": Int64(9223372036854775807)}, 1),
                    ({"$bitsAllSet": Int64(6917529027641081856)}, 2),
                    ({"$bitsAllClear": Int64(2305843009213693952)}, 2),
                    ({"$bitsAnySet": Int64(6917529027641081856)}, 3),
                    ({"$bitsAnyClear": Int64(2305843009213693952)}, 2)]:
        assert_count(db.c, {"a": cond}, n)


def test_bit_tests_on_bindata(db):
    for i, s in enumerate(["AAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AANgAAAAAAAAAAAAAAAAAAAAAAAA",
                           "JANgqwetkqwklEWRbWERKKJREtbq", "////////////////////////////"]):
        db.c.insert_one({"_id": i, "a": b64(s)})
    for op, s, n in [("$bitsAllSet", "AAAAAAAAAAAAAAAAAAAAAAAAAAAA", 4),
                     ("$bitsAllSet", "AANgAAAAAAAAAAAAAAAAAAAAAAAA", 3),
                     ("$bitsAllSet", "JANgqwetkqwklEWRbWERKKJREtbq", 2),
                     ("$bitsAllSet", "////////////////////////////", 1),
                     ("$bitsAllClear", "AAyfAAAAAAAAAAAAAAAAAAAAAAAA", 3),
                     ("$bitsAllClear", "JAyfqwetkqwklEWRbWERKKJREtbq", 2),
                     ("$bitsAnySet", "AAyfAAAAAAAAAAAAAAAAAAAAAAAA", 1),
                     ("$bitsAnySet", "////////////////////////////", 3),
                     ("$bitsAnyClear", "AAAAAAAAAAAAAAAAAAAAAAAAAAAA", 0),
                     ("$bitsAnyClear", "JANgqwetkqwklEWRbWERKKJREtbq", 2)]:
        assert_count(db.c, {"a": {op: b64(s)}}, n)
    assert_count(db.c, {"a": {"$bitsAllSet": b64("AANgAAAAAAAAAAAAAAAAAAAAAAAA"),
                              "$bitsAllClear": b64("//yf////////////////////////")}}, 1)


def test_bit_tests_on_variable_length_and_old_binary(db):
    db.c.insert_many([
        {"_id": 0, "a": b64("ZG9n")},
        {"_id": 1, "a": b64("JA4A8gAxqTwciCuF5GGzAA==")},
        {"_id": 2, "a": b64("JA4A8gAxqTwciCuF5GGzAA==", 1)},
        {"_id": 3, "a": b64("VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==")},
        {"_id": 4, "a": b64("BAAAADEyMzQ=", 2)},
    ])
    assert_count(db.c, {"a": {"$bitsAllSet": b64("ZG9n")}}, 1)
    assert_count(db.c, {"a": {"$bitsAllSet": b64("JA4A8gAxqTwciCuF5GGzAA==")}}, 2)
    assert_count(db.c, {"a": {"$bitsAllSet": b64("BAAAADEyMzQ=", 2)}}, 1)
    assert_count(db.c, {"a": {"$bitsAllClear": b64("AAAAAAAAAAAAAAAAAAAAAAAAAAAA")}}, 5)
    assert_count(db.c, {"a": {"$bitsAnySet": b64("JA4A8gAxqTwciCuF5GGzAA==")}}, 5)
    assert_count(db.c, {"a": {"$bitsAnyClear": b64(
        "VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==")}}, 4)


def test_bit_tests_skip_nan_fractional_infinite_and_non_numeric_values(db):
    values = [0, 1, [1.1, 54], 88, 255, float("nan"), 1.1, -1.1, float("-inf"), float("inf"),
              1e19, Decimal128("1.1"), "1", True, None]
    db.c.insert_many([{"_id": i, "a": a} for i, a in enumerate(values)])
    db.c.insert_one({"_id": 99})
    # Decimal128 1.1 reads as 1 (MongoDB 7.0 rounds decimals to the nearest integer).
    for cond, n in [({"$bitsAllSet": 0}, 6), ({"$bitsAllSet": 1}, 3), ({"$bitsAllSet": 16}, 3),
                    ({"$bitsAllClear": 0}, 6), ({"$bitsAllClear": 1}, 3),
                    ({"$bitsAllClear": 16}, 3), ({"$bitsAnySet": 9}, 4),
                    ({"$bitsAnyClear": 255}, 5)]:
        assert_count(db.c, {"a": cond}, n)


def test_bit_tests_inside_elem_match_not_and_logical_operators(db):
    db.c.insert_many([{"_id": 1, "a": [4, 6], "b": [{"x": 1}, {"x": 2}]},
                      {"_id": 2, "a": [3, 6], "b": [{"x": 3}]}])
    assert ids(db.c, {"a": {"$elemMatch": {"$bitsAnySet": 4, "$lt": 5}}}) == [1]
    assert ids(db.c, {"b": {"$elemMatch": {"x": {"$bitsAllClear": [0]}}}}) == [1]
    assert ids(db.c, {"a": {"$not": {"$bitsAnySet": 1}}}) == [1]
    assert ids(db.c, {"$or": [{"a": {"$bitsAllSet": 3}}, {"_id": 1}]}) == [1, 2]
    assert ids(db.c, {"$nor": [{"b.x": {"$bitsAnySet": 1}}]}) == []
    assert db.c.count_documents({"b.x": {"$bitsAllSet": [0, 1]}}) == 1


def test_bit_tests_select_documents_to_update_and_delete(db):
    db.c.insert_many([{"_id": i, "a": i} for i in range(8)])
    assert db.c.update_many({"a": {"$bitsAllSet": 5}}, {"$set": {"hit": True}}).modified_count == 2
    assert ids(db.c, {"hit": True}) == [5, 7]
    assert db.c.delete_many({"a": {"$bitsAnySet": [1]}}).deleted_count == 4
    assert ids(db.c, {}) == [0, 1, 4, 5]


def test_bit_tests_on_a_time_series_collection(db):
    db.create_collection("m", timeseries={"timeField": "ts", "metaField": "meta"})
    t0 = datetime.datetime(2024, 1, 1)
    db.m.insert_many([{"ts": t0 + datetime.timedelta(minutes=i), "meta": {"flags": i % 4},
                       "v": i, "_id": i} for i in range(16)])
    assert sorted(d["v"] for d in db.m.find({"v": {"$bitsAllSet": 6}})) == [6, 7, 14, 15]
    assert db.m.count_documents({"v": {"$bitsAnyClear": [0, 1, 2, 3]}}) == 15
    assert len(list(db.m.aggregate([{"$match": {"meta.flags": {"$bitsAllSet": 3}}}]))) == 4
    assert db.m.count_documents({"meta.flags": {"$bitsAllClear": 3}, "v": {"$gt": 4}}) == 2
    with pytest.raises(OperationFailure) as e:
        list(db.m.find({"v": {"$bitsAllSet": -1}}))
    assert e.value.code == 9


def errmsg(flt, db):
    with pytest.raises(OperationFailure) as e:
        list(db.c.find(flt))
    return e.value.code, e.value.details["errmsg"]


def test_bad_bitmask_arguments_report_mongodb_codes_and_messages(db):
    db.c.insert_one({"a": 1})
    assert errmsg({"a": {"$bitsAllSet": -1}}, db) == (
        9, "Expected a non-negative number in: $bitsAllSet: -1")
    assert errmsg({"a": {"$bitsAllClear": 1.2}}, db) == (
        9, "Expected an integer: $bitsAllClear: 1.2")
    assert errmsg({"a": {"$bitsAnySet": -1.0}}, db) == (
        9, "Expected a non-negative number in: $bitsAnySet: -1.0")
    assert errmsg({"a": {"$bitsAllSet": "123"}}, db) == (
        2, 'a takes an Array, a number, or a BinData but received: $bitsAllSet: "123"')
    assert errmsg({"a": {"$bitsAllSet": [-1]}}, db) == (
        2, "Failed to parse bit position. Expected a non-negative number in: 0: -1")
    assert errmsg({"a": {"$bitsAllSet": [1, "x"]}}, db) == (
        2, 'Failed to parse bit position. Expected a number in: 1: "x"')
    assert errmsg({"a": {"$bitsAllSet": [1.5]}}, db) == (
        2, "Failed to parse bit position. Expected an integer: 0: 1.5")
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$match": {"a": {"$bitsAnyClear": None}}}]))
    assert e.value.code == 2


def merge_error(db, pipeline):
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate(pipeline))
    return e.value


def test_merge_when_matched_fail_on_id_reports_the_id_index(db):
    db.tgt.insert_one({"_id": 1, "x": 0})
    db.src.insert_one({"_id": 1, "x": 1})
    e = merge_error(db, [{"$merge": {"into": "tgt", "whenMatched": "fail",
                                     "whenNotMatched": "insert"}}])
    assert isinstance(e, DuplicateKeyError) and e.code == 11000
    assert e.details["errmsg"] == (
        "$merge with whenMatched: fail found an existing document with the same values for the "
        f"'on' fields :: caused by :: E11000 duplicate key error collection: {db.name}.tgt "
        "index: _id_ dup key: { _id: 1 }")
    assert e.details["keyPattern"] == {"_id": 1} and e.details["keyValue"] == {"_id": 1}


def test_merge_when_matched_fail_names_the_on_fields_or_the_other_duplicate(db):
    db.tgt.create_index([("a", 1), ("b.c", 1)], unique=True)
    db.tgt.insert_one({"_id": 1, "a": 0, "b": {"c": 2}})
    db.src.insert_one({"a": 0, "b": {"c": 2}})
    spec = {"$merge": {"into": "tgt", "whenMatched": "fail", "whenNotMatched": "insert",
                       "on": ["a", "b.c"]}}
    e = merge_error(db, [spec])
    assert e.code == 11000
    assert e.details["errmsg"].startswith(
        "$merge with whenMatched: fail found an existing document with the same values for the "
        "'on' fields :: caused by :: E11000 duplicate key error")
    # Not matched on the 'on' fields, the insert collides on _id.
    db.src.drop()
    db.src.insert_one({"_id": 1, "a": 3, "b": {"c": 4}})
    e = merge_error(db, [spec])
    assert e.code == 11000
    assert e.details["errmsg"].startswith(
        "$merge failed due to a DuplicateKey error :: caused by :: E11000 duplicate key error "
        f"collection: {db.name}.tgt index: _id_")
    assert db.tgt.count_documents({}) == 1


def test_operator_update_changing_id_reports_only_the_path(db):
    db.c.insert_one({"_id": 1, "s": {"a": 1}})
    with pytest.raises(WriteError) as e:
        db.c.update_one({"_id": 1}, {"$set": {"_id": 2}})
    assert e.value.code == 66
    assert e.value.details["errmsg"] == (
        "Performing an update on the path '_id' would modify the immutable field '_id'")
    with pytest.raises(WriteError) as e:
        db.c.replace_one({"_id": 1}, {"_id": 2, "x": 1})
    assert e.value.code == 66
    assert e.value.details["errmsg"] == (
        "After applying the update, the (immutable) field '_id' was found to have been altered "
        "to _id: 2")
    with pytest.raises(WriteError) as e:
        db.c.update_one({"_id": 1}, [{"$set": {"_id": 2}}])
    assert e.value.code == 66
    assert e.value.details["errmsg"] == (
        "After applying the update, the (immutable) field '_id' was found to have been altered "
        "to _id: 2")
    assert list(db.c.find()) == [{"_id": 1, "s": {"a": 1}}]
