"""Options several commands carry are honoured or refused, never accepted and ignored
(MongoDB 7.0 on a standalone server; transactions are in test_transactions.py): an unknown
collation locale is refused, `let` and an update statement's `c`
bind variables that `$expr` and pipelines read, and `sort` in an update statement (an 8.0
field) is unknown."""

import os

import pytest
from bson.binary import Binary, UUID_SUBTYPE
from pymongo.errors import OperationFailure


def code_of(excinfo):
    return excinfo.value.code


def lsid():
    return {"id": Binary(os.urandom(16), UUID_SUBTYPE)}


BAD = {"locale": "xx"}


@pytest.mark.parametrize("run", [
    lambda db: db.c.find_one({"a": "x"}, collation=BAD),
    lambda db: db.c.count_documents({}, collation=BAD),
    lambda db: list(db.c.aggregate([], collation=BAD)),
    lambda db: db.command("update", "c", updates=[
        {"q": {"a": "x"}, "u": {"$set": {"b": 1}}, "collation": BAD}]),
    lambda db: db.command("delete", "c", deletes=[
        {"q": {"a": "x"}, "limit": 0, "collation": BAD}]),
    lambda db: db.create_collection("made", collation=BAD),
    # The driver's own helpers send statements as OP_MSG document sequences.
    lambda db: db.c.update_one({"a": "x"}, {"$set": {"b": 1}}, collation=BAD),
    lambda db: db.c.delete_many({"a": "x"}, collation=BAD),
], ids=["find", "count", "aggregate", "update", "delete", "create", "update_one", "delete_many"])
def test_an_unknown_collation_locale_is_refused_before_anything_runs(db, run):
    db.c.insert_one({"a": "x"})
    with pytest.raises(OperationFailure) as e:
        run(db)
    assert code_of(e) == 2
    assert db.c.find_one({"a": "x"}, {"_id": 0}) == {"a": "x"}
    assert db.c.count_documents({}) == 1
    assert "made" not in db.list_collection_names()


def test_the_simple_collation_is_accepted(db):
    db.c.insert_one({"a": "B"})
    assert db.c.find_one({"a": "B"}, collation={"locale": "simple"})["a"] == "B"
    assert db.c.find_one({"a": "b"}, collation={"locale": "simple"}) is None


def test_let_variables_reach_expr_in_find_and_aggregate(db):
    db.c.insert_many([{"_id": i, "v": i} for i in range(10)])
    found = db.command("find", "c", filter={"$expr": {"$lt": ["$v", "$$lim"]}},
                       let={"lim": 3})["cursor"]["firstBatch"]
    assert [d["_id"] for d in found] == [0, 1, 2]
    out = list(db.c.aggregate([
        {"$match": {"$expr": {"$gte": ["$v", "$$lim"]}}},
        {"$project": {"_id": 0, "scaled": {"$multiply": ["$v", "$$factor"]}}},
    ], let={"lim": 8, "factor": {"$add": [1, 1]}}))
    assert out == [{"scaled": 16}, {"scaled": 18}]


def test_let_in_a_plain_field_predicate_is_a_string_not_a_variable(db):
    db.c.insert_many([{"_id": 1, "s": "$$x"}, {"_id": 2, "s": 5}])
    found = db.command("find", "c", filter={"s": "$$x"}, let={"x": 5})["cursor"]["firstBatch"]
    assert [d["_id"] for d in found] == [1]


def test_let_reaches_statements_sent_as_document_sequences(db):
    db.c.insert_many([{"_id": i, "v": i} for i in range(4)])
    r = db.c.update_many({"$expr": {"$gte": ["$v", "$$from"]}}, [{"$set": {"w": "$$mark"}}],
                         let={"from": 2, "mark": "late"})
    assert r.modified_count == 2
    assert sorted(d["_id"] for d in db.c.find({"w": "late"})) == [2, 3]


def test_let_and_statement_c_reach_update_delete_and_find_and_modify(db):
    db.c.insert_many([{"_id": i, "v": i} for i in range(6)])
    r = db.command("update", "c", updates=[
        {"q": {"$expr": {"$eq": ["$_id", "$$target"]}}, "u": [{"$set": {"w": "$$mark"}}]},
        {"q": {"$expr": {"$eq": ["$_id", "$$own"]}}, "u": [{"$set": {"w": "$$own"}}],
         "c": {"own": 4}},
    ], let={"target": 1, "mark": "hit"})
    assert r["nModified"] == 2
    assert db.c.find_one({"_id": 1})["w"] == "hit"
    assert db.c.find_one({"_id": 4})["w"] == 4
    r = db.command("delete", "c", deletes=[
        {"q": {"$expr": {"$gte": ["$v", "$$from"]}}, "limit": 0}], let={"from": 5})
    assert r["n"] == 1
    r = db.command("findAndModify", "c", query={"$expr": {"$eq": ["$_id", "$$id"]}},
                   update=[{"$set": {"z": "$$val"}}], new=True, let={"id": 2, "val": 9})
    assert r["value"]["z"] == 9


def test_let_variable_names_follow_mongodb_rules(db):
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", filter={}, let={"Upper": 1})
    assert code_of(e) == 16867


def test_sort_in_an_update_statement_is_an_unknown_field_in_7_0(db):
    db.c.insert_many([{"_id": 1}, {"_id": 2}])
    with pytest.raises(OperationFailure) as e:
        db.command("update", "c", updates=[
            {"q": {}, "u": {"$set": {"x": 1}}, "sort": {"_id": -1}}])
    assert code_of(e) == 40415
    assert db.c.count_documents({"x": 1}) == 0


def test_get_parameter_star_reports_enable_test_commands(client):
    params = client.admin.command("getParameter", "*")
    assert params["enableTestCommands"] is False


def test_array_filters_update_the_matching_elements_only(db):
    db.c.insert_one({"_id": 1, "grades": [{"g": 80, "n": 1}, {"g": 95, "n": 2}, {"g": 90, "n": 3}],
                     "m": [[1, 5], [7, 2]]})
    db.c.update_one({"_id": 1}, {"$set": {"grades.$[hi].top": True}},
                    array_filters=[{"hi.g": {"$gte": 90}}])
    db.c.update_one({"_id": 1}, {"$inc": {"grades.$[].n": 10}})
    db.c.update_one({"_id": 1}, {"$mul": {"m.$[].$[big]": 10}}, array_filters=[{"big": {"$gt": 4}}])
    doc = db.c.find_one({"_id": 1})
    assert doc["grades"] == [{"g": 80, "n": 11}, {"g": 95, "n": 12, "top": True},
                             {"g": 90, "n": 13, "top": True}]
    assert doc["m"] == [[1, 50], [70, 2]]
    r = db.command("findAndModify", "c", query={"_id": 1},
                   update={"$set": {"grades.$[low].low": True}},
                   arrayFilters=[{"low.g": {"$lt": 85}}], new=True)
    assert [("low" in g) for g in r["value"]["grades"]] == [True, False, False]


@pytest.mark.parametrize("update, filters, code", [
    ({"$set": {"a.$[x]": 1}}, [], 2),
    ({"$set": {"a.$[x]": 1}}, [{"x": 1}, {"y": 2}], 9),
    ({"$set": {"a.$[x]": 1}}, [{"x": 1}, {"x": 2}], 9),
    ({"$set": {"a.$[X]": 1}}, [{"X": 1}], 2),
    ({"$set": {"nope.$[]": 1}}, [], 2),
], ids=["no-filter-for-identifier", "unused-filter", "duplicate-identifier",
        "uppercase-identifier", "missing-array"])
def test_array_filter_mistakes_get_mongodb_errors_and_change_nothing(db, update, filters, code):
    db.c.insert_one({"_id": 1, "a": [1, 2]})
    with pytest.raises(OperationFailure) as e:
        db.c.update_one({"_id": 1}, update, array_filters=filters or None)
    assert code_of(e) == code
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "a": [1, 2]}


def test_a_document_validator_is_stored_and_enforced(db):
    db.create_collection("v", validator={"a": {"$exists": True}})
    with pytest.raises(OperationFailure) as e:
        db.v.insert_one({"b": 1})
    assert e.value.code == 121
    db.v.insert_one({"b": 1}, bypass_document_validation=True)
    db.create_collection("w", validator={})
    db.w.insert_one({"b": 1})
    assert db.w.count_documents({}) == 1
