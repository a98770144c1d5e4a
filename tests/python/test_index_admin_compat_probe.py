"""Index DDL on regular collections as a MongoDB 7.0 standalone answers it: the checks of a
`createIndexes` entry (name required, `hidden` a bool, the `_id` key's own rules), the reply
when every index already exists, `dropIndexes` by an ambiguous key pattern, and `collMod`
of an index's `hidden` / `expireAfterSeconds`."""

import pytest
from pymongo.errors import OperationFailure


def _create(db, coll, *specs):
    return db.command("createIndexes", coll, indexes=list(specs))


def _refused(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value


def _index(db, coll, name):
    return next(i for i in db[coll].list_indexes() if i["name"] == name)


def test_create_indexes_requires_key_and_name_in_each_spec(db):
    e = _refused(lambda: _create(db, "c", {"key": {"a": 1}}))
    assert (e.code, e.details["codeName"]) == (9, "FailedToParse")
    assert e.details["errmsg"].endswith(
        ":: caused by :: The 'name' field is a required property of an index specification")
    e = _refused(lambda: _create(db, "c", {"name": "a_1"}))
    assert e.code == 9 and "The 'key' field is a required property" in e.details["errmsg"]
    # Nothing was built, and no collection made.
    assert "c" not in db.list_collection_names()


def test_create_indexes_when_all_exist_answers_a_note_without_created_collection(db):
    first = _create(db, "c", {"key": {"a": 1}, "name": "a_1"})
    assert first["createdCollectionAutomatically"] is True
    again = _create(db, "c", {"key": {"a": 1}, "name": "a_1"})
    assert dict(again) == {"numIndexesBefore": 2, "numIndexesAfter": 2,
                           "note": "all indexes already exist", "ok": 1.0}
    more = _create(db, "c", {"key": {"a": 1}, "name": "a_1"}, {"key": {"b": 1}, "name": "b_1"})
    assert (more["numIndexesBefore"], more["numIndexesAfter"]) == (2, 3)
    assert more["createdCollectionAutomatically"] is False and "note" not in more


def test_create_index_hidden_must_be_a_bool_and_flags_convertible_to_bool(db):
    e = _refused(lambda: _create(db, "c", {"key": {"a": 1}, "name": "a_1", "hidden": 1}))
    assert (e.code, e.details["codeName"]) == (14, "TypeMismatch")
    assert "must be a bool, but got int" in e.details["errmsg"]
    for flag in ("unique", "sparse", "background"):
        e = _refused(lambda: _create(db, "c", {"key": {"a": 1}, "name": "a_1", flag: "yes"}))
        assert e.code == 14, flag
        assert "which is not convertible to bool" in e.details["errmsg"]
    # Numbers are booleans there: unique: 1 is a unique index.
    _create(db, "c", {"key": {"u": 1}, "name": "u_1", "unique": 1})
    assert _index(db, "c", "u_1")["unique"] is True


def test_create_id_index_with_options_is_invalid_index_specification_option(db):
    db.c.insert_one({"_id": 1})
    for option, value in (("unique", True), ("sparse", True), ("hidden", True),
                          ("expireAfterSeconds", 10)):
        spec = {"key": {"_id": 1}, "name": "_id_", option: value}
        e = _refused(lambda: _create(db, "c", spec))
        assert (e.code, e.details["codeName"]) == (197, "InvalidIndexSpecificationOption")
        assert e.details["errmsg"].startswith(
            f"The field '{option}' is not valid for an _id index specification. Specification: ")
    # Only key, name, v and collation: the plain spec is the existing _id index.
    reply = _create(db, "c", {"key": {"_id": 1}, "name": "_id_", "v": 2})
    assert reply["note"] == "all indexes already exist"


def test_create_descending_id_index_or_id_name_on_another_key_is_bad_value(db):
    e = _refused(lambda: _create(db, "c", {"key": {"_id": -1}, "name": "_id_-1"}))
    assert (e.code, e.details["codeName"]) == (2, "BadValue")
    assert e.details["errmsg"] == (
        "The field 'key' for an _id index must be {_id: 1}, but got { \"_id\": -1 }")
    e = _refused(lambda: _create(db, "c", {"key": {"a": 1}, "name": "_id_"}))
    assert (e.code, e.details["codeName"]) == (2, "BadValue")
    assert e.details["errmsg"].startswith(
        "The index name '_id_' is reserved for the _id index, which must have key pattern")


def test_drop_indexes_by_an_ambiguous_key_pattern_is_ambiguous_index_key_pattern(db):
    _create(db, "c", {"key": {"a": 1}, "name": "plain"},
            {"key": {"a": 1}, "name": "fr", "collation": {"locale": "fr"}})
    e = _refused(lambda: db.command("dropIndexes", "c", index={"a": 1}))
    assert (e.code, e.details["codeName"]) == (181, "AmbiguousIndexKeyPattern")
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_", "plain", "fr"]
    assert db.command("dropIndexes", "c", index="fr")["nIndexesWas"] == 3


def test_coll_mod_hiding_an_already_hidden_index_reports_no_change(db):
    _create(db, "c", {"key": {"a": 1}, "name": "a_1"})
    hide = db.command("collMod", "c", index={"name": "a_1", "hidden": True})
    assert (hide["hidden_old"], hide["hidden_new"]) == (False, True)
    again = db.command("collMod", "c", index={"name": "a_1", "hidden": True})
    assert dict(again) == {"ok": 1.0}
    assert _index(db, "c", "a_1")["hidden"] is True
    show = db.command("collMod", "c", index={"keyPattern": {"a": 1}, "hidden": False})
    assert (show["hidden_old"], show["hidden_new"]) == (True, False)
    assert "hidden" not in _index(db, "c", "a_1")


def test_coll_mod_expire_after_seconds_makes_a_single_field_index_ttl(db):
    _create(db, "c", {"key": {"t": 1}, "name": "t_1"},
            {"key": {"a": 1, "b": 1}, "name": "a_1_b_1"})
    db.command("collMod", "c", index={"name": "t_1", "expireAfterSeconds": 50})
    assert _index(db, "c", "t_1")["expireAfterSeconds"] == 50
    changed = db.command("collMod", "c", index={"name": "t_1", "expireAfterSeconds": 60})
    assert (changed["expireAfterSeconds_old"], changed["expireAfterSeconds_new"]) == (50, 60)
    # A compound index cannot become a TTL index.
    e = _refused(lambda: db.command("collMod", "c",
                                    index={"name": "a_1_b_1", "expireAfterSeconds": 5}))
    assert (e.code, e.details["codeName"]) == (72, "InvalidOptions")
    assert "expireAfterSeconds" not in _index(db, "c", "a_1_b_1")


def test_create_index_field_types_are_type_mismatch_in_specification_context(db):
    for spec, field in (({"key": 5, "name": "k"}, "key"),
                        ({"key": {"a": 1}, "name": 5}, "name"),
                        ({"key": {"a": 1}, "name": "a_1", "partialFilterExpression": 5},
                         "partialFilterExpression"),
                        ({"key": {"a": 1}, "name": "a_1", "collation": "fr"}, "collation")):
        e = _refused(lambda: _create(db, "c", spec))
        assert (e.code, e.details["codeName"]) == (14, "TypeMismatch"), spec
        assert e.details["errmsg"].startswith("Error in specification ")
        assert f":: caused by :: The field '{field}' must be a" in e.details["errmsg"]


def test_create_index_collation_must_be_non_empty_and_needs_a_v2_index(db):
    e = _refused(lambda: _create(db, "c", {"key": {"a": 1}, "name": "a_1", "collation": {}}))
    assert (e.code, e.details["codeName"]) == (2, "BadValue")
    assert "The field 'collation' cannot be an empty object." in e.details["errmsg"]
    e = _refused(lambda: _create(db, "c", {"key": {"a": 1}, "name": "a_1", "v": 1,
                                           "collation": {"locale": "fr"}}))
    assert (e.code, e.details["codeName"]) == (67, "CannotCreateIndex")
    assert "cannot create an index with the 'collation' option and v=1" in e.details["errmsg"]
    # A v: 1 index on a collection with a default collation takes the simple one.
    db.create_collection("fr", collation={"locale": "fr"})
    _create(db, "fr", {"key": {"a": 1}, "name": "a_1", "v": 1})
    assert "collation" not in _index(db, "fr", "a_1")
    assert _index(db, "fr", "a_1")["v"] == 1


def test_partial_filter_refuses_special_query_features(db):
    for op, arg in (("$expr", {"$eq": ["$a", 1]}), ("$where", "true"),
                    ("$jsonSchema", {"required": ["a"]})):
        spec = {"key": {"a": 1}, "name": "a_1", "partialFilterExpression": {op: arg}}
        e = _refused(lambda: _create(db, "c", spec))
        assert (e.code, e.details["codeName"]) == (224, "QueryFeatureNotAllowed"), op
        assert e.details["errmsg"].endswith(f":: caused by :: {op} is not allowed in this context")


def test_explain_ends_with_the_command_and_its_db_server_info_and_server_parameters(db):
    db.c.insert_many([{"_id": i, "a": i} for i in range(5)])
    _create(db, "c", {"key": {"a": 1}, "name": "a_1"})
    for cmd in ({"find": "c", "filter": {"a": 3}},
                {"update": "c", "updates": [{"q": {"a": 3}, "u": {"$set": {"z": 1}}}]},
                {"delete": "c", "deletes": [{"q": {"a": 3}, "limit": 1}]},
                {"aggregate": "c", "pipeline": [{"$match": {"a": 3}}], "cursor": {}}):
        reply = db.command("explain", cmd, verbosity="queryPlanner")
        assert list(reply)[-4:] == ["command", "serverInfo", "serverParameters", "ok"], cmd
        assert reply["command"] == {**cmd, "$db": db.name}
        params = reply["serverParameters"]
        assert list(params) == [
            "internalQueryFacetBufferSizeBytes", "internalQueryFacetMaxOutputDocSizeBytes",
            "internalLookupStageIntermediateDocumentMaxSizeBytes",
            "internalDocumentSourceGroupMaxMemoryBytes",
            "internalQueryMaxBlockingSortMemoryUsageBytes",
            "internalQueryProhibitBlockingMergeOnMongoS", "internalQueryMaxAddToSetBytes",
            "internalDocumentSourceSetWindowFieldsMaxMemoryBytes",
            "internalQueryFrameworkControl"]
        assert params["internalQueryMaxBlockingSortMemoryUsageBytes"] == 104857600
        assert params["internalQueryFrameworkControl"] == "trySbeRestricted"
    # The explained write changed nothing.
    assert db.c.count_documents({"a": 3, "z": {"$exists": False}}) == 1
