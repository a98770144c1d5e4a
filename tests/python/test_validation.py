"""`$jsonSchema` as a query operator and collection validators (`validator`,
`validationLevel`, `validationAction`), through pymongo, with MongoDB 7.0's codes and
`errInfo` shapes."""

import time
from pathlib import Path

import pytest
from bson import Int64
from pymongo import MongoClient
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

from conftest import auth_server, running_server


def failure(exc):
    """(code, errInfo) of a write error or a command error."""
    if isinstance(exc, BulkWriteError):
        err = exc.details["writeErrors"][0]
        return err["code"], err.get("errInfo")
    return exc.code, (exc.details or {}).get("errInfo")


SCHEMA = {
    "bsonType": "object",
    "required": ["name", "year"],
    "properties": {
        "name": {"bsonType": "string", "description": "must be a string"},
        "year": {"bsonType": "int", "minimum": 2017, "maximum": 3017},
        "major": {"enum": ["Math", "English"]},
    },
}


# --- $jsonSchema in queries -------------------------------------------------------------

def test_json_schema_filters_find_count_and_aggregate(db):
    db.s.insert_many([
        {"_id": 1, "name": "a", "year": 2020},
        {"_id": 2, "name": "b", "year": 2000},
        {"_id": 3, "name": 3, "year": 2020},
        {"_id": 4, "year": 2020},
    ])
    q = {"$jsonSchema": SCHEMA}
    assert [d["_id"] for d in db.s.find(q)] == [1]
    assert db.s.count_documents(q) == 1
    assert [d["_id"] for d in db.s.aggregate([{"$match": q}])] == [1]
    assert db.s.count_documents({"$nor": [q]}) == 3
    assert db.s.delete_many({"$jsonSchema": {"required": ["name"], "properties": {"name": {"type": "number"}}}}).deleted_count == 1


def test_json_schema_keywords_apply_only_to_their_types(db):
    db.k.insert_many([
        {"_id": 1, "v": 5}, {"_id": 2, "v": "five"}, {"_id": 3, "v": [1, 2]},
        {"_id": 4, "v": {"x": 1}}, {"_id": 5},
    ])
    ids = lambda s: sorted(d["_id"] for d in db.k.find({"$jsonSchema": {"properties": {"v": s}}}))
    assert ids({"minimum": 6}) == [2, 3, 4, 5]
    assert ids({"minLength": 5}) == [1, 3, 4, 5]
    assert ids({"maxItems": 1}) == [1, 2, 4, 5]
    assert ids({"required": ["y"]}) == [1, 2, 3, 5]
    assert ids({"type": "array"}) == [3, 5]
    assert ids({"bsonType": ["int", "string"]}) == [1, 2, 5]
    assert ids({"type": "number", "multipleOf": 5}) == [1, 5]


def test_json_schema_string_array_object_and_logical_keywords(db):
    db.w.insert_many([
        {"_id": 1, "s": "héllo", "a": [1, 2, 3], "o": {"x": 1, "y": "z"}},
        {"_id": 2, "s": "hi", "a": [1, 1], "o": {"x": "1"}},
    ])
    def ids(schema):
        return sorted(d["_id"] for d in db.w.find({"$jsonSchema": schema}))
    assert ids({"properties": {"s": {"minLength": 5, "maxLength": 5}}}) == [1]
    assert ids({"properties": {"s": {"pattern": "^h.l"}}}) == [1]
    assert ids({"properties": {"a": {"uniqueItems": True, "items": {"bsonType": "int"}}}}) == [1]
    assert ids({"properties": {"a": {"items": [{"enum": [1]}], "additionalItems": False}}}) == []
    assert ids({"properties": {"a": {"minItems": 3}}}) == [1]
    assert ids({"properties": {"o": {"properties": {"x": {"bsonType": "int"}}, "additionalProperties": {"bsonType": "string"}}}}) == [1]
    assert ids({"properties": {"o": {"patternProperties": {"^x$": {"bsonType": "string"}}}}}) == [2]
    assert ids({"properties": {"o": {"minProperties": 2}}}) == [1]
    assert ids({"dependencies": {"o": ["a", "s"]}}) == [1, 2]
    assert ids({"properties": {"o": {"dependencies": {"y": ["z"]}}}}) == [2]
    assert ids({"anyOf": [{"properties": {"s": {"maxLength": 2}}}, {"required": ["nope"]}]}) == [2]
    assert ids({"oneOf": [{"required": ["s"]}, {"required": ["a"]}]}) == []
    assert ids({"not": {"properties": {"s": {"enum": ["hi"]}}}}) == [1]
    assert ids({"allOf": [{"required": ["s"]}, {"properties": {"s": {"minLength": 3}}}], "title": "t", "description": "d"}) == [1]


@pytest.mark.parametrize("schema,code", [
    ({"$ref": "#/definitions/x"}, 9),
    ({"$schema": "http://json-schema.org/draft-04/schema#"}, 9),
    ({"default": 1}, 9),
    ({"definitions": {}}, 9),
    ({"format": "date"}, 9),
    ({"id": "x"}, 9),
    ({"bogus": 1}, 9),
    ({"type": "integer"}, 2),
    ({"bsonType": "bogus"}, 2),
    ({"type": "object", "bsonType": "object"}, 9),
    ({"required": []}, 2),
    ({"required": "a"}, 14),
    ({"minimum": "1"}, 14),
    ({"properties": {"a": 1}}, 14),
    ({"enum": []}, 9),
    ({"minLength": -1}, 9),
    ({"allOf": "x"}, 14),
])
def test_invalid_json_schema_is_refused_with_mongodb_code(db, schema, code):
    with pytest.raises(OperationFailure) as e:
        list(db.c.find({"$jsonSchema": schema}))
    assert e.value.code == code


def test_unsupported_keyword_message_names_the_keyword(db):
    with pytest.raises(OperationFailure) as e:
        list(db.c.find({"$jsonSchema": {"$ref": "#"}}))
    assert e.value.code == 9
    assert "$jsonSchema keyword '$ref' is not currently supported" in str(e.value)


def test_json_schema_operand_must_be_an_object(db):
    with pytest.raises(OperationFailure) as e:
        list(db.c.find({"$jsonSchema": 1}))
    assert e.value.code == 14


# --- validators on create ---------------------------------------------------------------

def test_schema_validator_refuses_insert_with_121_and_err_info(db):
    db.create_collection("v", validator={"$jsonSchema": SCHEMA})
    db.v.insert_one({"_id": 1, "name": "ok", "year": 2020})
    with pytest.raises(WriteError) as e:
        db.v.insert_one({"_id": 2, "name": "x"})
    code, info = failure(e.value)
    assert code == 121
    assert e.value.details["errmsg"] == "Document failed validation"
    assert info == {
        "failingDocumentId": 2,
        "details": {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
            {"operatorName": "required", "specifiedAs": {"required": ["name", "year"]},
             "missingProperties": ["year"]}]},
    }
    assert db.v.count_documents({}) == 1


def test_err_info_for_type_minimum_enum_and_additional_properties(db):
    schema = dict(SCHEMA, additionalProperties=False,
                  properties=dict(SCHEMA["properties"], _id={}))
    db.create_collection("v", validator={"$jsonSchema": schema})
    with pytest.raises(WriteError) as e:
        db.v.insert_one({"_id": 1, "name": 5, "year": 2000, "major": "Art", "extra": 1})
    _, info = failure(e.value)
    assert info["details"]["schemaRulesNotSatisfied"] == [
        {"operatorName": "properties", "propertiesNotSatisfied": [
            {"propertyName": "name", "description": "must be a string", "details": [
                {"operatorName": "bsonType", "specifiedAs": {"bsonType": "string"},
                 "reason": "type did not match", "consideredValue": 5, "consideredType": "int"}]},
            {"propertyName": "year", "details": [
                {"operatorName": "minimum", "specifiedAs": {"minimum": 2017},
                 "reason": "comparison failed", "consideredValue": 2000}]},
            {"propertyName": "major", "details": [
                {"operatorName": "enum", "specifiedAs": {"enum": ["Math", "English"]},
                 "reason": "value was not found in enum", "consideredValue": "Art"}]}]},
        {"operatorName": "additionalProperties", "specifiedAs": {"additionalProperties": False},
         "additionalProperties": ["extra"]},
    ]


def test_query_operator_validator_err_info(db):
    db.create_collection("q", validator={"a": {"$gt": 5}, "b": {"$exists": True}, "c": {"$type": "string"}})
    with pytest.raises(WriteError) as e:
        db.q.insert_one({"_id": 7, "a": 1, "c": 3})
    code, info = failure(e.value)
    assert code == 121
    assert info == {"failingDocumentId": 7, "details": {"operatorName": "$and", "clausesNotSatisfied": [
        {"index": 0, "details": {"operatorName": "$gt", "specifiedAs": {"a": {"$gt": 5}},
                                 "reason": "comparison failed", "consideredValue": 1}},
        {"index": 1, "details": {"operatorName": "$exists", "specifiedAs": {"b": {"$exists": True}},
                                 "reason": "path does not exist"}},
        {"index": 2, "details": {"operatorName": "$type", "specifiedAs": {"c": {"$type": "string"}},
                                 "reason": "type did not match", "consideredValue": 3, "consideredType": "int"}},
    ]}}
    db.create_collection("eq", validator={"a": 1})
    with pytest.raises(WriteError) as e:
        db.eq.insert_one({"_id": 1, "a": 2})
    assert failure(e.value)[1]["details"] == {
        "operatorName": "$eq", "specifiedAs": {"a": 1}, "reason": "comparison failed", "consideredValue": 2}


def test_expr_validator_is_enforced(db):
    db.create_collection("e", validator={"$expr": {"$lt": ["$lo", "$hi"]}})
    db.e.insert_one({"lo": 1, "hi": 2})
    with pytest.raises(WriteError) as e:
        db.e.insert_one({"_id": 1, "lo": 3, "hi": 2})
    assert failure(e.value)[1]["details"] == {
        "operatorName": "$expr", "specifiedAs": {"$expr": {"$lt": ["$lo", "$hi"]}},
        "reason": "expression did not match", "expressionResult": False}


def test_unordered_insert_reports_each_invalid_document(db):
    db.create_collection("u", validator={"a": {"$type": "int"}})
    with pytest.raises(BulkWriteError) as e:
        db.u.insert_many([{"a": 1}, {"a": "x"}, {"a": 2}, {"a": None}], ordered=False)
    errs = e.value.details["writeErrors"]
    assert [(w["index"], w["code"]) for w in errs] == [(1, 121), (3, 121)]
    assert e.value.details["nInserted"] == 2


@pytest.mark.parametrize("options,code", [
    ({"validator": 7}, 14),
    ({"validator": {"$jsonSchema": {"invalid": 1}}}, 9),
    ({"validator": {"$where": "this.a == this.b"}}, 2),
    ({"validator": {"$text": {"$search": "x"}}}, 2),
    ({"validator": {"a": {"$near": [0, 0]}}}, 2),
    ({"validator": {"a": 1}, "validationLevel": "bogus"}, 2),
    ({"validator": {"a": 1}, "validationAction": "errorAndLog"}, 2),
    ({"validationLevel": 1}, 14),
])
def test_invalid_validation_options_are_refused_on_create(db, options, code):
    with pytest.raises(OperationFailure) as e:
        db.command("create", "bad", **options)
    assert e.value.code == code
    assert "bad" not in db.list_collection_names()


def test_validators_are_refused_in_internal_databases(client):
    with pytest.raises(OperationFailure) as e:
        client.admin.command("create", "py_validated", validator={"a": {"$exists": True}})
    assert e.value.code == 72


def test_time_series_create_refuses_validator(db):
    with pytest.raises(OperationFailure) as e:
        db.create_collection("ts", timeseries={"timeField": "t"}, validator={"a": 1})
    assert e.value.code == 72
    db.create_collection("ts2", timeseries={"timeField": "t"})
    db.ts2.insert_one({"t": __import__("datetime").datetime(2024, 1, 1), "v": 1})
    assert db.ts2.count_documents({}) == 1


def test_list_collections_shows_validation_options_as_given(db):
    db.create_collection("l1", validator={"$jsonSchema": SCHEMA})
    db.create_collection("l2", validator={"a": 1}, validationLevel="moderate", validationAction="warn")
    infos = {c["name"]: c["options"] for c in db.list_collections()}
    assert infos["l1"] == {"validator": {"$jsonSchema": SCHEMA}}
    assert infos["l2"] == {"validator": {"a": 1}, "validationLevel": "moderate", "validationAction": "warn"}


# --- enforcement on every write path -----------------------------------------------------

@pytest.fixture
def validated(db):
    db.create_collection("p", validator={"$jsonSchema": {"required": ["n"], "properties": {"n": {"bsonType": "int", "minimum": 0}}}})
    db.p.insert_one({"_id": 1, "n": 1})
    return db.p


def test_updates_with_operators_and_replacements_are_validated(validated):
    with pytest.raises(WriteError) as e:
        validated.update_one({"_id": 1}, {"$set": {"n": -1}})
    code, info = failure(e.value)
    assert code == 121 and info["failingDocumentId"] == 1
    with pytest.raises(WriteError) as e:
        validated.replace_one({"_id": 1}, {"m": 1})
    assert failure(e.value)[0] == 121
    with pytest.raises(WriteError):
        validated.update_many({}, {"$unset": {"n": ""}})
    validated.update_one({"_id": 1}, {"$inc": {"n": 1}})
    assert validated.find_one({"_id": 1})["n"] == 2


def test_upserts_are_validated(validated):
    with pytest.raises(WriteError) as e:
        validated.update_one({"_id": 5}, {"$set": {"x": 1}}, upsert=True)
    code, info = failure(e.value)
    assert code == 121 and info["failingDocumentId"] == 5
    validated.update_one({"_id": 6}, {"$set": {"n": 3}}, upsert=True)
    assert validated.count_documents({}) == 2


def test_find_and_modify_is_validated(validated):
    with pytest.raises(OperationFailure) as e:
        validated.find_one_and_update({"_id": 1}, {"$set": {"n": "x"}})
    assert e.value.code == 121
    assert e.value.details["errInfo"]["failingDocumentId"] == 1
    with pytest.raises(OperationFailure) as e:
        validated.find_one_and_replace({"_id": 9}, {"z": 1}, upsert=True)
    assert e.value.code == 121
    assert validated.find_one_and_update({"_id": 1}, {"$set": {"n": 4}}, return_document=True)["n"] == 4


def test_out_and_merge_into_a_validated_collection_are_validated(db, validated):
    db.src.insert_many([{"_id": 10, "n": 5}, {"_id": 11, "n": -5}])
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$out": "p"}]))
    assert e.value.code == 121
    assert e.value.details["errInfo"]["failingDocumentId"] == 11
    assert [d["_id"] for d in validated.find()] == [1]
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$merge": {"into": "p"}}]))
    assert e.value.code == 121
    list(db.src.aggregate([{"$match": {"n": {"$gte": 0}}}, {"$out": "p"}]))
    assert [d["_id"] for d in validated.find()] == [10]
    # The validator survives $out.
    options = next(db.list_collections(filter={"name": "p"}))["options"]
    assert "validator" in options
    with pytest.raises(WriteError):
        validated.insert_one({"n": -1})


def test_bypass_document_validation_skips_the_validator(db, validated):
    validated.insert_one({"_id": 2, "n": -1}, bypass_document_validation=True)
    validated.update_one({"_id": 1}, {"$set": {"n": "x"}}, bypass_document_validation=True)
    validated.find_one_and_update({"_id": 1}, {"$set": {"n": "y"}}, bypassDocumentValidation=True)
    db.command("insert", "p", documents=[{"_id": 3}], bypassDocumentValidation=True)
    db.src.insert_one({"_id": 20, "bad": True})
    list(db.src.aggregate([{"$merge": {"into": "p"}}], bypassDocumentValidation=True))
    assert validated.count_documents({}) == 4
    with pytest.raises(WriteError):
        validated.insert_one({"_id": 4})


# --- levels, actions, collMod ------------------------------------------------------------

def test_validation_level_off_strict_and_moderate(db):
    db.create_collection("lv", validator={"a": {"$type": "int"}}, validationLevel="off")
    db.lv.insert_many([{"_id": 1, "a": "bad"}, {"_id": 2, "a": 1}])
    db.command("collMod", "lv", validationLevel="moderate")
    # An update of a document that already fails is allowed; of a valid one, checked.
    db.lv.update_one({"_id": 1}, {"$set": {"b": 1}})
    with pytest.raises(WriteError):
        db.lv.update_one({"_id": 2}, {"$set": {"a": "x"}})
    with pytest.raises(WriteError):
        db.lv.insert_one({"_id": 3, "a": "x"})
    db.command("collMod", "lv", validationLevel="strict")
    with pytest.raises(WriteError):
        db.lv.update_one({"_id": 1}, {"$set": {"b": 2}})


def test_validation_action_warn_lets_the_write_through(db):
    db.create_collection("wa", validator={"a": 1}, validationAction="warn")
    db.wa.insert_one({"a": 2})
    db.wa.update_one({}, {"$set": {"a": 3}})
    assert db.wa.count_documents({"a": 3}) == 1
    db.command("collMod", "wa", validationAction="error")
    with pytest.raises(WriteError):
        db.wa.insert_one({"a": 2})


def test_warn_action_logs_the_failure():
    with running_server() as (_, port, log_path):
        c = MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=5000)
        db = c.py_warn
        db.create_collection("w", validator={"a": 1}, validationAction="warn")
        db.w.insert_one({"_id": 1, "a": 2})
        c.close()
        deadline = time.monotonic() + 5
        while "Document would fail validation" not in Path(log_path).read_text(errors="replace"):
            assert time.monotonic() < deadline, "no warning logged"
            time.sleep(0.05)


def test_coll_mod_adds_changes_and_removes_the_validator(db):
    db.create_collection("cm")
    db.cm.insert_one({"a": "x"})
    db.command("collMod", "cm", validator={"a": {"$type": "string"}})
    with pytest.raises(WriteError):
        db.cm.insert_one({"a": 1})
    db.command("collMod", "cm", validator={"$jsonSchema": {"required": ["b"]}})
    db.cm.insert_one({"b": 1})
    with pytest.raises(WriteError):
        db.cm.insert_one({"a": "x"})
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "cm", validator={"$jsonSchema": {"invalid": 7}})
    assert e.value.code == 9
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "cm", validationAction="errorAndLog")
    assert e.value.code == 2
    db.command("collMod", "cm", validator={})
    db.cm.insert_one({"z": 1})
    assert next(db.list_collections(filter={"name": "cm"}))["options"] == {"validator": {}}


def test_validator_survives_a_restart(tmp_path):
    dbpath = tmp_path / "db"
    dbpath.mkdir()
    for attempt in range(2):
        with running_server(dbpath=dbpath) as (_, port, _):
            c = MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=5000)
            db = c.py_restart
            if attempt == 0:
                db.create_collection("r", validator={"$jsonSchema": {"required": ["a"]}}, validationLevel="moderate")
                db.command("collMod", "r", validationAction="error")
            options = next(db.list_collections(filter={"name": "r"}))["options"]
            assert options == {"validator": {"$jsonSchema": {"required": ["a"]}},
                               "validationLevel": "moderate", "validationAction": "error"}
            with pytest.raises(WriteError) as e:
                db.r.insert_one({"b": 1})
            assert failure(e.value)[0] == 121
            c.close()


def test_bypassing_validation_needs_the_bypass_document_validation_action():
    with auth_server(user="root", pwd="pw") as (_, port, _):
        admin = MongoClient(port=port, directConnection=True, username="root", password="pw")
        admin.v.create_collection("c", validator={"a": {"$exists": True}})
        admin.v.command("createUser", "writer", pwd="pw", roles=["readWrite"])
        admin.v.command("createUser", "restorer", pwd="pw", roles=["readWrite", "dbAdmin"])
        writer = MongoClient(port=port, directConnection=True, username="writer", password="pw", authSource="v")
        with pytest.raises(OperationFailure) as e:
            writer.v.command("insert", "c", documents=[{"b": 1}], bypassDocumentValidation=True)
        assert e.value.code == 13
        assert admin.v.c.count_documents({}) == 0
        restorer = MongoClient(port=port, directConnection=True, username="restorer", password="pw",
                               authSource="v")
        restorer.v.command("insert", "c", documents=[{"b": 1}], bypassDocumentValidation=True)
        assert admin.v.c.count_documents({"b": 1}) == 1
        for c in (admin, writer, restorer):
            c.close()
