"""Expression and window-function behaviours of MongoDB 7.0 through pymongo:
$dateFromString with an offset and a timezone, $round/$trunc of decimals, $median and
$percentile as expressions, $tsSecond/$tsIncrement, $getField's constant field, the
rank window functions' arguments and $covariancePop/$covarianceSamp."""

import pytest
from bson import Decimal128, Int64, Timestamp
from pymongo.errors import OperationFailure


def project(db, expr, doc=None):
    """Evaluates one expression on one document."""
    db.c.drop()
    db.c.insert_one(doc or {"_id": 1})
    return list(db.c.aggregate([{"$project": {"_id": 0, "r": expr}}]))[0].get("r", "missing")


def error(db, pipeline):
    db.c.drop()
    db.c.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate(pipeline))
    return e.value


def test_date_from_string_rejects_an_offset_in_the_string_together_with_a_timezone(db):
    for s in ("2024-01-01T10:00:00+02:00", "2017-07-12T22:23:55Z"):
        e = error(
            db,
            [{"$project": {"d": {"$dateFromString": {"dateString": s, "timezone": "Europe/Paris"}}}}],
        )
        assert e.code == 241
        assert e.details["codeName"] == "ConversionFailure"
        assert "you cannot pass in a date/time string with GMT offset together with a timezone argument" in str(e)
    # onError catches it.
    r = project(
        db,
        {"$dateFromString": {"dateString": "2024-01-01T10:00:00Z", "timezone": "Asia/Tokyo", "onError": "bad"}},
    )
    assert r == "bad"


def test_round_and_trunc_of_decimals_round_half_to_even_with_mongodb_exponents(db):
    cases = [
        ({"$round": [Decimal128("2.345"), 2]}, "2.34"),
        ({"$round": Decimal128("-1.6")}, "-2"),
        ({"$trunc": Decimal128("-1.6")}, "-1"),
        ({"$trunc": [Decimal128("23.298"), -1]}, "2E+1"),
        ({"$round": [Decimal128("23.298"), -1]}, "2E+1"),
        ({"$round": [Decimal128("1.298"), 1]}, "1.3"),
        ({"$trunc": [Decimal128("1.298"), Decimal128("100")]}, "1.298000000000000000000000000000000"),
        ({"$round": [Decimal128("1.298912343250054252245154325"), Int64(20)]}, "1.29891234325005425225"),
    ]
    for expr, want in cases:
        got = project(db, expr)
        assert isinstance(got, Decimal128), expr
        assert str(got) == want, expr
    assert project(db, {"$round": [2147483647, -1]}) == Int64(2147483650)


def test_median_and_percentile_work_as_expressions(db):
    assert project(db, {"$median": {"input": [1, 2, 3, 4], "method": "approximate"}}) == 2.0
    doc = {"_id": 1, "arr": [0, "x", 1, 2], "s": 5}
    assert project(db, {"$percentile": {"input": "$arr", "p": [0.5, 0.9], "method": "approximate"}}, doc) == [
        1.0,
        2.0,
    ]
    assert project(db, {"$percentile": {"input": "$s", "p": [0.1, 0.9], "method": "approximate"}}, doc) == [
        5.0,
        5.0,
    ]
    assert project(db, {"$median": {"input": "$nope", "method": "approximate"}}, doc) is None
    assert project(db, {"$percentile": {"input": ["x"], "p": [0.5], "method": "approximate"}}, doc) == [None]


def test_ts_second_and_ts_increment_return_longs(db):
    doc = {"_id": 1, "ts": Timestamp(1622731060, 10), "n": 5}
    assert project(db, {"$tsSecond": "$ts"}, doc) == Int64(1622731060)
    assert project(db, {"$tsIncrement": "$ts"}, doc) == Int64(10)
    assert project(db, {"$tsSecond": "$missing"}, doc) is None
    for op, code in (("$tsSecond", 5687301), ("$tsIncrement", 5687302)):
        db.c.drop()
        db.c.insert_one(doc)
        with pytest.raises(OperationFailure) as e:
            list(db.c.aggregate([{"$project": {"r": {op: "$n"}}}]))
        assert e.value.code == code


def test_get_field_needs_a_constant_string_field(db):
    for arg, code in (
        ({"field": "$c", "input": "$o"}, 5654600),
        ("$c", 5654600),
        ({"field": {"$concat": ["a", "$c"]}, "input": "$o"}, 5654601),
        ({"$add": [2, 3]}, 5654601),
        ({"field": 5, "input": "$o"}, 5654602),
        ({"field": "a"}, 3041703),
    ):
        e = error(db, [{"$project": {"r": {"$getField": arg}}}])
        assert e.code == code, arg
    e = error(db, [{"$project": {"r": {"$getField": "$c"}}}])
    assert "'$CURRENT.c' is a field path reference which is not allowed in this context" in str(e)
    assert project(db, {"$getField": {"field": {"$literal": "$a"}, "input": "$o"}}, {"_id": 1, "o": {"$a": 7}}) == 7


def test_rank_window_functions_need_one_sort_key_and_no_window(db):
    db.c.insert_many([{"_id": i, "a": i, "b": -i} for i in range(3)])
    for f in ("$rank", "$denseRank", "$documentNumber"):
        for sort in (None, {"a": 1, "b": 1}):
            spec = {"output": {"r": {f: {}}}}
            if sort:
                spec["sortBy"] = sort
            with pytest.raises(OperationFailure) as e:
                list(db.c.aggregate([{"$setWindowFields": spec}]))
            assert e.value.code == 5371602
            assert f"{f} must be specified with a top level sortBy expression with exactly one element" in str(e.value)
        with pytest.raises(OperationFailure) as e:
            list(
                db.c.aggregate(
                    [
                        {
                            "$setWindowFields": {
                                "sortBy": {"a": 1},
                                "output": {"r": {f: {}, "window": {"documents": ["unbounded", "current"]}}},
                            }
                        }
                    ]
                )
            )
        assert e.value.code == 5371601
    got = list(
        db.c.aggregate([{"$setWindowFields": {"sortBy": {"a": 1}, "output": {"r": {"$rank": {}}}}}, {"$sort": {"a": 1}}])
    )
    assert [d["r"] for d in got] == [1, 2, 3]


def test_covariance_window_functions(db):
    db.c.insert_many(
        [
            {"_id": 1, "x": 1, "y": 2},
            {"_id": 2, "x": 2, "y": 4},
            {"_id": 3, "x": "skip", "y": 100},
            {"_id": 4, "x": 3, "y": 9},
        ]
    )
    got = list(
        db.c.aggregate(
            [
                {
                    "$setWindowFields": {
                        "sortBy": {"_id": 1},
                        "output": {
                            "pop": {"$covariancePop": ["$x", "$y"]},
                            "samp": {"$covarianceSamp": ["$x", "$y"]},
                            "run": {
                                "$covarianceSamp": ["$x", "$y"],
                                "window": {"documents": ["unbounded", "current"]},
                            },
                        },
                    }
                },
                {"$sort": {"_id": 1}},
            ]
        )
    )
    assert got[0]["pop"] == pytest.approx(7 / 3)
    assert got[0]["samp"] == pytest.approx(3.5)
    assert [d["run"] for d in got] == [None, 1.0, 1.0, 3.5]
