"""Regular expressions run as MongoDB runs them (PCRE2, UTF mode, ASCII classes), through
pymongo: `$regex` in find on a regular and a time-series collection, `$regexFind` and
`$regexFindAll` in aggregations, `$jsonSchema`'s `pattern` in a validator."""

import datetime

import pytest
from bson.regex import Regex
from pymongo.errors import OperationFailure, WriteError

NAMES = ["host_1", "tmp_2", "host_33", "aa-bb", "ab\n", "Élan", "١٢", "x$42"]
T0 = datetime.datetime(2024, 1, 1)


@pytest.fixture(params=["regular", "timeseries"])
def coll(db, request):
    if request.param == "timeseries":
        db.create_collection("c", timeseries={"timeField": "t", "metaField": "m"})
    docs = [{"t": T0 + datetime.timedelta(seconds=i), "m": {"k": i % 2}, "name": n, "i": i}
            for i, n in enumerate(NAMES)]
    db.c.insert_many(docs)
    return db.c


def names(coll, flt):
    return sorted(d["name"] for d in coll.find(flt, {"_id": 0, "name": 1}))


@pytest.mark.parametrize("pattern, options, expected", [
    # lookahead, lookbehind and backreferences, which only a backtracking engine has
    (r"^(?!tmp_)\w+_\d+$", "", ["host_1", "host_33"]),
    (r"(?<=\$)\d+", "", ["x$42"]),
    (r"^(\w)\1-", "", ["aa-bb"]),
    # `$` matches before a final newline; `\d` is ASCII only
    (r"ab$", "", ["ab\n"]),
    (r"^\d+$", "", []),
    # case-insensitive matching folds Unicode
    (r"^é", "i", ["Élan"]),
    (r"^H O S T _ 1 $ # extended", "ix", ["host_1"]),
], ids=["lookahead", "lookbehind", "backreference", "dollar", "ascii_digits", "unicode_case",
        "extended"])
def test_regex_filters_match_as_pcre_does(coll, pattern, options, expected):
    assert names(coll, {"name": {"$regex": pattern, "$options": options}}) == expected
    assert names(coll, {"name": Regex(pattern, options)}) == expected


def test_an_invalid_pattern_is_refused_with_pcres_message(coll):
    with pytest.raises(OperationFailure) as e:
        list(coll.find({"name": {"$regex": "a{2,1}"}}))
    assert e.value.code == 51091
    assert "Regular expression is invalid: numbers out of order in {} quantifier" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        list(coll.find({"name": {"$regex": "a", "$options": "q"}}))
    assert e.value.code == 51108


def test_regex_find_reports_code_point_offsets_and_captures(coll):
    got = list(coll.aggregate([
        {"$match": {"i": {"$in": [5, 7]}}},
        {"$sort": {"i": 1}},
        {"$project": {"_id": 0,
                      "first": {"$regexFind": {"input": "$name", "regex": r"(?<=l)(a)(z)?"}},
                      "all": {"$regexFindAll": {"input": "$name", "regex": r"(\d)"}}}},
    ]))
    assert got == [
        {"first": {"match": "a", "idx": 2, "captures": ["a", None]}, "all": []},
        {"first": None, "all": [{"match": "4", "idx": 2, "captures": ["4"]},
                                {"match": "2", "idx": 3, "captures": ["2"]}]},
    ]
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$project": {"r": {"$regexMatch": {"input": "$name", "regex": "("}}}}]))
    assert e.value.code == 51111


def test_a_json_schema_pattern_with_lookahead_validates_inserts(db):
    db.create_collection("v", validator={"$jsonSchema": {
        "properties": {"code": {"bsonType": "string", "pattern": r"^(?=.*\d)[a-z0-9]{4}$"}}}})
    db.v.insert_one({"code": "ab1c"})
    with pytest.raises(WriteError) as e:
        db.v.insert_one({"code": "abcd"})
    assert e.value.code == 121
    assert [d["code"] for d in db.v.find({}, {"_id": 0})] == ["ab1c"]
