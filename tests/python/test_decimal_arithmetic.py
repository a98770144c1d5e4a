"""Decimal128 is computed in decimal, as MongoDB computes it (IEEE 754-2008 decimal128,
34 digits, half-even): sums of tenths are exact, a decimal mean is a decimal, and a
double meets a decimal at MongoDB's precision (15 digits in arithmetic)."""

import datetime

from bson.decimal128 import Decimal128

D = Decimal128


def test_a_hundred_decimal_tenths_sum_to_exactly_ten(db):
    db.c.insert_many([{"g": 1, "x": D("0.1")} for _ in range(100)])
    out = list(db.c.aggregate([{"$group": {"_id": "$g", "s": {"$sum": "$x"}, "a": {"$avg": "$x"}}}]))
    assert out == [{"_id": 1, "s": D("10.0"), "a": D("0.1")}]
    doc = db.c.aggregate([{"$limit": 1}, {"$project": {"_id": 0, "s": {"$sum": [D("0.1"), D("0.2")]}}}])
    assert list(doc) == [{"s": D("0.3")}]


def test_decimal_operators_keep_every_digit(db):
    db.c.insert_one({"a": D("1.10"), "b": D("-2.5"), "one": D("1")})
    out = db.c.find_one({}, {
        "_id": 0,
        "mul": {"$multiply": ["$a", 3]},
        "add": {"$add": ["$a", 2]},
        "sub": {"$subtract": ["$a", D("0.01")]},
        "div": {"$divide": ["$one", 3]},
        "mod": {"$mod": [D("7.5"), 2]},
        "floor": {"$floor": "$b"},
        "ceil": {"$ceil": "$b"},
        "abs": {"$abs": "$b"},
        "mixed": {"$add": ["$one", 0.2]},
        "avg": {"$avg": [D("1.1"), D("2.2")]},
    })
    assert out == {
        "mul": D("3.30"),
        "add": D("3.10"),
        "sub": D("1.09"),
        "div": D("0.3333333333333333333333333333333333"),
        "mod": D("1.5"),
        "floor": D("-3"),
        "ceil": D("-2"),
        "abs": D("2.5"),
        # The double 0.2 taken to 15 significant digits.
        "mixed": D("1.200000000000000"),
        "avg": D("1.65"),
    }


def test_inc_by_a_decimal_accumulates_exactly(db):
    db.c.insert_one({"_id": 1, "x": D("0")})
    for _ in range(10):
        db.c.update_one({"_id": 1}, {"$inc": {"x": D("0.1")}})
    assert db.c.find_one({"_id": 1})["x"] == D("1.0")
    db.c.update_one({"_id": 1}, {"$mul": {"x": D("0.5")}})
    assert db.c.find_one({"_id": 1})["x"] == D("0.50")


def test_a_double_compares_with_a_decimal_by_its_exact_value(db):
    # The double 0.1 is 0.1000000000000000055511151231257827...: above the decimal 0.1.
    db.c.insert_many([{"_id": 1, "x": 0.1}, {"_id": 2, "x": D("0.1")}, {"_id": 3, "x": 1}])
    assert [d["_id"] for d in db.c.find({"x": {"$gt": D("0.1")}}).sort("_id", 1)] == [1, 3]
    assert [d["_id"] for d in db.c.find({"x": D("1.000")})] == [3]
    assert [d["_id"] for d in db.c.find({}).sort([("x", 1), ("_id", 1)])] == [2, 1, 3]


def test_time_series_decimal_mean_equals_the_regular_collections(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    t0 = datetime.datetime(2024, 1, 1)
    docs = [
        {"t": t0 + datetime.timedelta(seconds=i), "m": i % 2, "x": D("0.1") if i % 3 else 1.5}
        for i in range(30)
    ]
    db.ts.insert_many([dict(d) for d in docs])
    db.reg.insert_many([dict(d) for d in docs])
    pipeline = [
        {"$group": {"_id": "$m", "a": {"$avg": "$x"}, "s": {"$sum": "$x"}}},
        {"$sort": {"_id": 1}},
    ]
    ts = list(db.ts.aggregate(pipeline))
    assert ts == list(db.reg.aggregate(pipeline))
    assert all(isinstance(g["a"], Decimal128) and isinstance(g["s"], Decimal128) for g in ts)


def test_group_tells_a_decimal_from_the_double_nearest_it_on_both_kinds(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    t0 = datetime.datetime(2024, 1, 1)
    keys = [0.1, D("0.1"), D("0.10"), 1, D("1.0"), 0.1]
    docs = [{"t": t0 + datetime.timedelta(seconds=i), "m": 1, "k": k} for i, k in enumerate(keys)]
    db.ts.insert_many([dict(d) for d in docs])
    db.reg.insert_many([dict(d) for d in docs])
    pipeline = [{"$group": {"_id": "$k", "n": {"$count": {}}}}]
    for coll in (db.reg, db.ts):
        counts = sorted(g["n"] for g in coll.aggregate(pipeline))
        # {0.1 x2}, {Decimal 0.1 x2}, {1 and Decimal 1.0}
        assert counts == [2, 2, 2], coll.name
