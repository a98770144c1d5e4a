"""Write commands and update semantics as MongoDB 7.0 has them: $bit, $push modifiers'
errors, $pop's, $rename's checks, positional paths, the fields an upsert takes from its
query (and the conflicts it refuses) and the types of update statements' fields."""

import bson
import pytest
from pymongo.errors import OperationFailure


def update_error(db, doc, u, q=None, **kw):
    """Runs one update statement against a collection holding only `doc`; returns the
    write error (code, errmsg) and the document afterwards."""
    db.c.delete_many({})
    db.c.insert_one(doc)
    reply = db.command("update", "c", updates=[dict(q=q or {"_id": doc["_id"]}, u=u, **kw)])
    errors = reply.get("writeErrors", [])
    err = (errors[0]["code"], errors[0]["errmsg"]) if errors else None
    return err, db.c.find_one({"_id": doc["_id"]})


def upsert(db, q, u):
    """Upserts into an empty collection; returns the inserted document or the write error."""
    db.c.drop()
    reply = db.command("update", "c", updates=[{"q": q, "u": u, "upsert": True}])
    if "writeErrors" in reply:
        e = reply["writeErrors"][0]
        return e["code"], e["codeName"], e["errmsg"]
    doc = db.c.find_one()
    doc.pop("_id") if isinstance(doc["_id"], bson.ObjectId) else None
    return doc


def test_bit_and_or_xor_apply_in_order_and_widen_to_long(db):
    err, doc = update_error(db, {"_id": 1, "n": 13}, {"$bit": {"n": {"and": 10, "or": 5, "xor": 1}}})
    assert err is None and doc["n"] == 12 and isinstance(doc["n"], int)
    err, doc = update_error(db, {"_id": 1, "a": [0]},
                            {"$bit": {"a.3": {"or": 3}, "m": {"xor": bson.Int64(6)}}})
    assert err is None
    assert doc["a"] == [0, None, None, 3]
    assert doc["m"] == 6 and isinstance(doc["m"], bson.Int64)


@pytest.mark.parametrize("u,msg", [
    ({"n": 5}, "The $bit modifier is not compatible with a int. You must pass in an embedded "
               "document: {$bit: {field: {and/or/xor: #}}"),
    ({"n": {}}, "You must pass in at least one bitwise operation. The format is: "
                "{$bit: {field: {and/or/xor: #}}"),
    ({"n": {"nand": 1}}, "The $bit modifier only supports 'and', 'or', and 'xor', not 'nand' "
                         "which is an unknown operator: {nand: 1}"),
    ({"n": {"or": 1.0}}, "The $bit modifier field must be an Integer(32/64 bit); a 'double' is "
                         "not supported here: {or: 1.0}"),
    ({"f": {"and": 1}}, "Cannot apply $bit to a value of non-integral type._id: 1 has the "
                        "field f of non-integer type double"),
], ids=['scalar', 'empty', 'unknown_op', 'double_operand', 'double_field'])
def test_bit_errors_are_bad_value_with_mongodb_messages(db, u, msg):
    err, doc = update_error(db, {"_id": 1, "n": 1, "f": 1.5}, {"$bit": u})
    assert err == (2, msg)
    assert doc == {"_id": 1, "n": 1, "f": 1.5}


@pytest.mark.parametrize("push,msg", [
    ({"$each": [4], "$position": 1.5},
     "The value for $position must be an integer value, not of type: double"),
    ({"$each": [4], "$slice": "x"},
     "The value for $slice must be an integer value but was given type: string"),
    ({"$each": [4], "$sort": 2}, "The $sort element value must be either 1 or -1"),
    ({"$each": [4], "$sort": {"x": "a"}}, "The $sort element value must be either 1 or -1"),
    ({"$each": [4], "$sort": {"x.": 1}},
     "The $sort field is a dotted field but has an empty part: x."),
    ({"$each": [4], "$sort": "up"},
     "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort "
     "embedded fields"),
    ({"$position": 1.5, "$foo": 1, "$each": [4]}, "Unrecognized clause in $push: $foo"),
], ids=['position_double', 'slice_string', 'sort_two', 'sort_field_string', 'sort_empty_part', 'sort_string', 'unknown_clause'])
def test_push_modifier_errors_match_mongodb(db, push, msg):
    err, doc = update_error(db, {"_id": 1, "a": [1, 2]}, {"$push": {"a": push}})
    assert err == (2, msg)
    assert doc["a"] == [1, 2]


def test_push_position_slice_and_sort_combine(db):
    err, doc = update_error(db, {"_id": 1, "a": [1, 2, 3]},
                            {"$push": {"a": {"$each": [4, 5], "$position": 1, "$slice": -3}}})
    assert err is None and doc["a"] == [5, 2, 3]
    err, doc = update_error(db, {"_id": 1, "a": [{"x": 2}, {"x": 1}]},
                            {"$push": {"a": {"$each": [{"x": 3}], "$sort": {"x": -1}}}})
    assert err is None and doc["a"] == [{"x": 3}, {"x": 2}, {"x": 1}]


@pytest.mark.parametrize("arg,msg", [
    (2, "$pop expects 1 or -1, found: 2"),
    ("1", 'Expected a number in: a: "1"'),
    (1.5, "Expected an integer: a: 1.5"),
], ids=['two', 'string', 'fraction'])
def test_pop_argument_errors_are_failed_to_parse(db, arg, msg):
    err, doc = update_error(db, {"_id": 1, "a": [1, 2, 3]}, {"$pop": {"a": arg}})
    assert err == (9, msg)
    err, doc = update_error(db, {"_id": 1, "a": [1, 2, 3]}, {"$pop": {"a": -1.0}})
    assert err is None and doc["a"] == [2, 3]


@pytest.mark.parametrize("rename,code,msg", [
    ({"a.b": "a"}, 2,
     'The source and target field for $rename must not be on the same path: a.b: "a"'),
    ({"c": "c.d"}, 2,
     'The source and target field for $rename must not be on the same path: c: "c.d"'),
    ({"arr.$[]": "b"}, 2, "The source field for $rename may not be dynamic: arr.$[]"),
    ({"c": "arr.$"}, 2, "The destination field for $rename may not be dynamic: arr.$"),
    ({"c": "arr.0.y"}, 2, "The destination field cannot be an array element, 'arr.0.y' in "
                          "doc with _id: 1 has an array field called 'arr'"),
    ({"arr.0.x": "z"}, 2, "The source field cannot be an array element, 'arr.0.x' in doc "
                          "with _id: 1 has an array field called 'arr'"),
    ({"c.x": "z"}, 28, "Cannot use the part (x) of (c.x) to traverse the element ({c: 3})"),
], ids=['to_prefix', 'to_inside', 'dynamic_source', 'dynamic_dest', 'dest_in_array', 'source_in_array', 'through_scalar'])
def test_rename_refusals_match_mongodb(db, rename, code, msg):
    start = {"_id": 1, "a": {"b": 1}, "arr": [{"x": 1}], "c": 3}
    err, doc = update_error(db, start, {"$rename": rename})
    assert err == (code, msg)
    assert doc == start


def test_rename_of_a_missing_source_is_a_no_op_even_into_an_array(db):
    start = {"_id": 1, "arr": [{"x": 1}]}
    err, doc = update_error(db, start, {"$rename": {"nope": "arr.0.y"}})
    assert err is None and doc == start
    err, doc = update_error(db, {"_id": 1, "a": {"b": 1}}, {"$rename": {"a.b": "c.d"}})
    assert err is None and doc == {"_id": 1, "a": {}, "c": {"d": 1}}


def test_positional_path_errors_are_bad_value(db):
    err, _ = update_error(db, {"_id": 1, "a": [{"b": [1]}]}, {"$set": {"a.$.b.$": 1}},
                          q={"a.b": 1})
    assert err == (2, "Too many positional (i.e. '$') elements found in path 'a.$.b.$'")
    err, _ = update_error(db, {"_id": 1}, {"$set": {"$": 1}})
    assert err == (2, "Cannot have positional (i.e. '$') element in the first position in path '$'")


def test_missing_array_filter_is_reported_before_the_operator_argument(db):
    err, _ = update_error(db, {"_id": 1, "a": [1]}, {"$rename": {"a.$[i]": "b"}})
    assert err == (2, "No array filter found for identifier 'i' in path 'a.$[i]'")
    err, _ = update_error(db, {"_id": 1, "a": [1]}, {"$rename": {"a.$[i]": "b"}},
                          arrayFilters=[{"i": 0}])
    assert err == (2, "The source field for $rename may not be dynamic: a.$[i]")


@pytest.mark.parametrize("q,expected", [
    ({"$or": [{"x": 1}]}, {"x": 1, "a": 1}),
    ({"x": {"$all": [1]}}, {"x": 1, "a": 1}),
    ({"x": {"$in": [1]}, "y.z": {"$eq": 2}}, {"x": 1, "y": {"z": 2}, "a": 1}),
    ({"$and": [{"x": 1}, {"w": {"$gt": 1}}]}, {"x": 1, "a": 1}),
    ({"$or": [{"x": 1}, {"x": 2}]}, {"a": 1}),
    ({"x": {"$elemMatch": {"$eq": 1}}, "r": bson.Regex("a")}, {"a": 1}),
    ({"x": {"$eq": bson.Regex("abc")}}, {"x": bson.Regex("abc"), "a": 1}),
], ids=['one_clause_or', 'one_value_all', 'in_and_eq', 'and', 'two_clause_or', 'elem_match_regex', 'eq_regex'])
def test_upsert_takes_the_equalities_mongodb_extracts(db, q, expected):
    assert upsert(db, q, {"$set": {"a": 1}}) == expected


@pytest.mark.parametrize("q,msg", [
    ({"$and": [{"x": 1}, {"x": 2}]}, "cannot infer query fields to set, path 'x' is matched twice"),
    ({"x": {"$all": [1, 2]}}, "cannot infer query fields to set, path 'x' is matched twice"),
    ({"x": 1, "x.y": 1}, "cannot infer query fields to set, both paths 'x.y' and 'x' are matched"),
    ({"x.y": 1, "x": {"y": 1}},
     "cannot infer query fields to set, both paths 'x.y' and 'x' are matched"),
    ({"_id": 1, "_id.x": 1},
     "cannot infer query fields to set, both paths '_id.x' and '_id' are matched"),
], ids=['and_twice', 'all_two', 'path_and_sub', 'sub_and_doc', 'id_and_sub'])
def test_upsert_with_conflicting_equalities_is_not_single_value_field(db, q, msg):
    assert upsert(db, q, {"$set": {"a": 1}}) == (54, "NotSingleValueField", msg)
    assert db.c.count_documents({}) == 0


def test_replacement_upsert_takes_only_a_whole_id_from_the_query(db):
    assert upsert(db, {"_id": 5, "x": 1, "x.x": 1}, {"r": 1}) == {"_id": 5, "r": 1}
    assert upsert(db, {"_id.x": 1, "_id.y": 2}, {"r": 1}) == (
        111, "NotExactValueField",
        "field at '_id' must be exactly specified, field at sub-path '_id.x'found")
    assert upsert(db, {"_id.x": 1, "_id.y": 2}, {"$set": {"r": 1}}) == {
        "_id": {"x": 1, "y": 2}, "r": 1}


def test_find_and_modify_upsert_refuses_conflicting_equalities(db):
    with pytest.raises(OperationFailure) as e:
        db.command("findAndModify", "c", query={"$and": [{"k": 1}, {"k": 2}]},
                   update={"$set": {"a": 1}}, upsert=True)
    assert e.value.code == 54
    reply = db.command("findAndModify", "c", query={"$or": [{"k": 5}]},
                       update={"$set": {"a": 1}}, upsert=True, new=True)
    assert reply["lastErrorObject"]["updatedExisting"] is False
    assert reply["value"]["k"] == 5 and reply["value"]["a"] == 1


@pytest.mark.parametrize("stmt,code,msg", [
    ({"q": 1, "u": {"$set": {"a": 1}}}, 14,
     "BSON field 'update.updates.q' is the wrong type 'int', expected type 'object'"),
    ({"q": {}, "u": 1}, 9, "Update argument must be either an object or an array"),
    ({"q": {}, "u": {"$set": {"a": 1}}, "multi": "yes"}, 14,
     "BSON field 'update.updates.multi' is the wrong type 'string', expected type 'bool'"),
    ({"q": {}, "u": {"$set": {"a": 1}}, "arrayFilters": {}}, 14,
     "BSON field 'update.updates.arrayFilters' is the wrong type 'object', expected type 'array'"),
], ids=['q_int', 'u_int', 'multi_string', 'array_filters_doc'])
def test_update_statement_field_types_fail_the_whole_command(db, stmt, code, msg):
    db.c.insert_one({"_id": 1})
    good = {"q": {"_id": 1}, "u": {"$set": {"b": 1}}}
    with pytest.raises(OperationFailure) as e:
        db.command("update", "c", updates=[good, stmt], ordered=False)
    assert (e.value.code, e.value.details["errmsg"]) == (code, msg)
    assert db.c.find_one() == {"_id": 1}


def test_find_and_modify_with_a_non_document_update_is_failed_to_parse(db):
    with pytest.raises(OperationFailure) as e:
        db.command("findAndModify", "c", query={}, update=1)
    assert e.value.code == 9
    assert e.value.details["errmsg"] == "Update argument must be either an object or an array"


@pytest.mark.parametrize("u,msg", [
    ({"a.$[i]": 0, "a.$": 0}, "Updating the path 'a.$' would create a conflict at 'a'"),
    ({"a.$[i]": 0, "a.0": 0}, "Updating the path 'a.0' would create a conflict at 'a'"),
    ({"a.$[i]": 0, "a.b": 0}, "Updating the path 'a.b' would create a conflict at 'a'"),
], ids=["positional", "index", "field"])
def test_array_update_mixed_with_other_components_under_one_field_conflicts(db, u, msg):
    err, doc = update_error(db, {"_id": 0, "a": [1]}, {"$set": u}, arrayFilters=[{"i": 0}])
    assert err == (40, msg)
    assert doc == {"_id": 0, "a": [1]}


def test_array_updates_reaching_one_element_conflict_as_they_merge(db):
    start = {"_id": 0, "a": [{"x": 0, "b": [{"y": 0, "c": 0}]}, {"x": 1, "b": [{"y": 0, "c": 0}]}]}
    u = {"$set": {"a.$[i].b.$[k].c": 1, "a.$[j].b.$[k].c": 2}}
    err, doc = update_error(db, start, u, arrayFilters=[{"i.x": 0}, {"j.x": 0}, {"k.y": 0}])
    assert err == (40, "Update created a conflict at 'a.0.b.$[k].c'")
    assert doc == start
    err, doc = update_error(db, start, u, arrayFilters=[{"i.x": 0}, {"j.x": 1}, {"k.y": 0}])
    assert err is None
    assert [e["b"][0]["c"] for e in doc["a"]] == [1, 2]
    start = {"_id": 0, "a": [{"x": 0, "b": [{"y": 0, "c": 0}]}]}
    err, _ = update_error(db, start, {"$set": {"a.$[i].b.$[k].c": 1, "a.$[j].b.$[m].c": 2}},
                          arrayFilters=[{"i.x": 0}, {"j.x": 0}, {"k.y": 0}, {"m.y": 0}])
    assert err == (40, "Update created a conflict at 'a.0.b.0.c'")
    err, doc = update_error(db, {"_id": 0, "a": [0, 1]}, {"$set": {"a.$[]": 2, "a.$[i]": 3}},
                            arrayFilters=[{"i": 0}])
    assert err == (40, "Update created a conflict at 'a.0'")
    err, doc = update_error(db, {"_id": 0, "a": [0, 1]}, {"$set": {"a.$[]": 2, "a.$[i]": 3}},
                            arrayFilters=[{"i": 5}])
    assert err is None and doc["a"] == [2, 2]


@pytest.mark.parametrize("f,code,msg", [
    ({"$i": 0}, 2, "Error parsing array filter :: caused by :: unknown top level operator: $i"),
    ({"I": 0}, 2, "Error parsing array filter :: caused by :: The top-level field name must be "
                  "an alphanumeric string beginning with a lowercase letter, found 'I'"),
    ({"i": 0, "j": 0}, 9, "Error parsing array filter :: caused by :: Expected a single "
                          "top-level field name, found 'i' and 'j'"),
    ({}, 9, "Cannot use an expression without a top-level field name in arrayFilters"),
    ({"$expr": {"$eq": ["$a", 1]}}, 224,
     "Error parsing array filter :: caused by :: $expr is not allowed in this context"),
    ({"$where": "1"}, 2,
     "Error parsing array filter :: caused by :: $where is not allowed in this context"),
], ids=["operator", "upper_case", "two_names", "empty", "expr", "where"])
def test_array_filter_parse_errors_match_mongodb(db, f, code, msg):
    err, _ = update_error(db, {"_id": 0, "a": [0]}, {"$set": {"a.$[i]": 1}}, arrayFilters=[f])
    assert err == (code, msg)


def test_array_filter_named_through_or_clauses(db):
    err, doc = update_error(db, {"_id": 0, "a": [0, 1, 3]}, {"$set": {"a.$[i]": 2}},
                            arrayFilters=[{"$or": [{"i": 0}, {"i": 3}]}])
    assert err is None and doc["a"] == [2, 1, 2]


def test_new_fields_are_created_in_path_order_with_numbers_by_value(db):
    err, doc = update_error(db, {"_id": 1},
                            {"$set": {"10": 1, "9": 1, "a10": 1, "a9": 1, "b": {}, "05": 1}})
    assert err is None
    assert list(doc) == ["_id", "05", "9", "10", "a10", "a9", "b"]


def test_find_and_modify_execution_errors_carry_the_plan_executor_context(db):
    db.c.insert_many([{"_id": 1, "u": 1}, {"_id": 2, "u": 2}])
    db.c.create_index("u", unique=True)
    with pytest.raises(OperationFailure) as e:
        db.command("findAndModify", "c", query={"_id": 2}, update={"$set": {"u": 1}})
    assert e.value.code == 11000
    assert e.value.details["errmsg"] == (
        "Plan executor error during findAndModify :: caused by :: E11000 duplicate key error "
        "collection: %s.c index: u_1 dup key: { u: 1 }" % db.name)
    assert e.value.details["keyValue"] == {"u": 1}
    with pytest.raises(OperationFailure) as e:
        db.command("findAndModify", "c", query={"_id": 2}, update={"$set": {"_id": 3}})
    assert (e.value.code, e.value.details["errmsg"]) == (
        66, "Plan executor error during findAndModify :: caused by :: Performing an update on "
            "the path '_id' would modify the immutable field '_id'")
    # A malformed update is refused as the command is parsed, without that context.
    with pytest.raises(OperationFailure) as e:
        db.command("findAndModify", "c", query={"_id": 2}, update={"$foo": {"u": 1}})
    assert e.value.details["errmsg"].startswith("Unknown modifier: $foo.")


@pytest.mark.parametrize("cmd,msg", [
    ({"remove": True, "arrayFilters": [{"i": 0}]}, "Cannot specify arrayFilters and remove=true"),
    ({"update": [{"$set": {"x": 1}}], "arrayFilters": [{"i": 0}]},
     "Cannot specify arrayFilters and a pipeline update"),
], ids=["remove", "pipeline"])
def test_find_and_modify_refuses_array_filters_without_an_operator_update(db, cmd, msg):
    db.c.insert_one({"_id": 1, "a": [1]})
    with pytest.raises(OperationFailure) as e:
        db.command("findAndModify", "c", query={}, **cmd)
    assert (e.value.code, e.value.details["errmsg"]) == (9, msg)
    assert db.c.find_one() == {"_id": 1, "a": [1]}


def test_non_document_array_filter_is_type_mismatch_naming_its_index(db):
    db.c.insert_one({"_id": 1, "a": [1]})
    with pytest.raises(OperationFailure) as e:
        db.command("update", "c", updates=[{"q": {}, "u": {"$set": {"a.$[i]": 2}},
                                             "arrayFilters": [{"i": 1}, "bad"]}])
    assert (e.value.code, e.value.details["errmsg"]) == (
        14, "BSON field 'update.updates.arrayFilters.1' is the wrong type 'string', "
            "expected type 'object'")
    with pytest.raises(OperationFailure) as e:
        db.command("findAndModify", "c", query={}, update={"$set": {"a.$[i]": 2}},
                   arrayFilters=["bad"])
    assert (e.value.code, e.value.details["errmsg"]) == (
        14, "BSON field 'findAndModify.arrayFilters.0' is the wrong type 'string', "
            "expected type 'object'")


def test_dollar_prefixed_field_is_allowed_by_an_upsert_insert_and_nested_but_not_top_level(db):
    # The MongoDB manual's example: an upsert that inserts is validated as an insert.
    db.c.update_one({"date": "2021-07-07"}, {"$set": {"phone": 25.17, "$hotel": 320.10}},
                    upsert=True)
    assert db.c.find_one({}, {"_id": 0}) == {"date": "2021-07-07", "$hotel": 320.10,
                                             "phone": 25.17}
    reply = db.command("update", "c", updates=[{
        "q": {"date": "2021-07-07"}, "u": {"$set": {"$hotel": 330.0}}, "upsert": True}])
    assert reply["writeErrors"][0]["code"] == 52
    assert reply["writeErrors"][0]["errmsg"] == (
        "The dollar ($) prefixed field '$hotel' in '$hotel' is not valid for storage.")
    db.c.update_one({"date": "2021-07-07"}, {"$set": {"address.$street": "Elm Road"}})
    assert db.c.find_one()["address"] == {"$street": "Elm Road"}
    assert db.c.find_one()["$hotel"] == 320.10
