"""Corner cases of queries and updates where MongoDB 7.0's documented answer is easy to get
wrong: value `$elemMatch` on nested arrays, the positional `$` without a matched element,
and a find's `min`/`max` index bounds."""

import pytest
from pymongo.errors import OperationFailure


def test_value_elem_match_does_not_look_inside_nested_arrays(db):
    db.c.insert_many([{"_id": 1, "a": [5]}, {"_id": 2, "a": [[5]]}, {"_id": 3, "a": [[3, 7]]}])
    assert [d["_id"] for d in db.c.find({"a": {"$elemMatch": {"$lt": 6, "$gt": 4}}})] == [1]
    assert [d["_id"] for d in db.c.find({"a": {"$elemMatch": {"$type": "number"}}})] == [1]
    assert [d["_id"] for d in db.c.find({"a": {"$elemMatch": {"$size": 2}}})] == [3]


def test_positional_update_without_a_matched_element_fails_and_changes_nothing(db):
    db.c.insert_one({"_id": 1, "a": [1, 2]})
    with pytest.raises(OperationFailure) as e:
        db.c.update_one({"_id": 1}, {"$set": {"a.$": 9}})
    assert e.value.code == 2
    assert "positional operator did not find the match" in str(e.value)
    assert db.c.find_one()["a"] == [1, 2]
    db.c.update_one({"_id": 1, "a": 2}, {"$set": {"a.$": 9}})
    assert db.c.find_one()["a"] == [1, 9]


@pytest.fixture
def ab(db):
    db.c.insert_many([{"_id": i, "a": a, "b": b} for i, (a, b) in enumerate([(1, 1), (1, 2), (2, 1), (2, 2)])])
    db.c.create_index([("a", 1), ("b", 1)], name="ab")
    return db.c


def test_find_min_and_max_read_the_hinted_index_between_the_two_keys(ab):
    def ids(cur):
        return [d["_id"] for d in cur]
    assert ids(ab.find().min([("a", 1), ("b", 2)]).max([("a", 2), ("b", 1)]).hint("ab")) == [1]
    assert ids(ab.find().min([("a", 1), ("b", 2)]).max([("a", 2), ("b", 1.5)]).hint("ab")) == [1, 2]
    assert ids(ab.find().min([("a", 1), ("b", 2)]).hint("ab")) == [1, 2, 3]
    assert ids(ab.find().max([("a", 2), ("b", 1.5)]).hint("ab")) == [0, 1, 2]
    # The filter still applies.
    assert ids(ab.find({"b": 1}).min([("a", 1), ("b", 1)]).hint("ab")) == [0, 2]
    explain = ab.find().min([("a", 1), ("b", 2)]).hint("ab").explain()
    assert explain["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] == "ab"


def test_find_min_or_max_without_a_hint_or_with_other_fields_is_refused(ab):
    # pymongo itself refuses this one; the command, as other drivers send it, is refused too.
    with pytest.raises(OperationFailure) as e:
        ab.database.command("find", "c", min={"a": 1, "b": 2})
    assert e.value.code == 51173
    with pytest.raises(OperationFailure) as e:
        list(ab.find().min([("b", 1), ("a", 2)]).hint("ab"))
    assert e.value.code == 51174
    with pytest.raises(OperationFailure) as e:
        list(ab.find().max([("a", 2)]).hint("ab"))
    assert e.value.code == 51174


def test_find_options_this_server_cannot_honour_are_refused(ab):
    for option in ["returnKey", "showRecordId"]:
        with pytest.raises(OperationFailure) as e:
            ab.database.command("find", "c", **{option: True})
        assert e.value.code == 2


@pytest.mark.parametrize("field", ["limit", "skip", "batchSize"])
def test_find_refuses_negative_limit_skip_and_batch_size(db, field):
    db.c.insert_many([{"_id": i} for i in range(5)])
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", **{field: -2})
    assert e.value.code == 51024
    assert e.value.details["errmsg"] == f"BSON field '{field}' value must be >= 0, actual value '-2'"
    assert e.value.details["codeName"] == "Location51024"
    # A driver's negative limit is a positive one in a single batch.
    assert len(list(db.c.find(limit=-2))) == 2


def test_find_refuses_the_legacy_ntoreturn(db):
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", ntoreturn=1)
    assert e.value.code == 5746101
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", ntoreturn=1, limit=1)
    assert e.value.code == 2


def test_a_delete_limit_other_than_0_or_1_fails_the_command_before_any_delete(db):
    db.c.insert_many([{"_id": i, "x": 3} for i in range(3)])
    with pytest.raises(OperationFailure) as e:
        db.command("delete", "c", deletes=[{"q": {"x": 3}, "limit": 1}, {"q": {}, "limit": 2}])
    assert e.value.code == 9
    assert db.c.count_documents({}) == 3


def test_merge_on_fields_without_a_unique_index_is_refused_before_writing(db):
    db.src.insert_many([{"_id": i, "v": i % 2} for i in range(4)])
    db.tgt.insert_one({"_id": 100, "v": 0})
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$merge": {"into": "tgt", "on": "v"}}]))
    assert e.value.code == 51183
    assert db.tgt.count_documents({}) == 1
    # With the unique index the join works, and finds the target document through it.
    db.tgt.create_index("v", unique=True)
    list(db.src.aggregate([{"$match": {"_id": {"$lt": 2}}}, {"$project": {"_id": 0, "v": 1, "w": "x"}},
                           {"$merge": {"into": "tgt", "on": "v"}}]))
    assert sorted((d["v"], d.get("w")) for d in db.tgt.find()) == [(0, "x"), (1, "x")]
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$project": {"v": 0}}, {"$merge": {"into": "tgt", "on": "v"}}]))
    assert e.value.code == 51132


@pytest.fixture
def schools(db):
    db.schools.insert_many([
        {"_id": 1, "zipcode": "63109", "students": [
            {"name": "john", "school": 102, "age": 10}, {"name": "jess", "school": 102, "age": 11},
            {"name": "jeff", "school": 108, "age": 15}]},
        {"_id": 2, "zipcode": "63110", "students": [{"name": "ajax", "school": 100, "age": 7}]},
        {"_id": 3, "zipcode": "63109", "students": [{"name": "ajax", "school": 100, "age": 7},
                                                     {"name": "achilles", "school": 100, "age": 8}]},
        {"_id": 4, "zipcode": "63109", "students": [{"name": "barney", "school": 102, "age": 7},
                                                     {"name": "ruth", "school": 102, "age": 16}]},
    ])
    return db.schools


def test_elem_match_projection_keeps_the_first_matching_element_after_the_other_fields(schools):
    got = list(schools.find({"zipcode": "63109"}, {"students": {"$elemMatch": {"school": 102}}}))
    assert got == [
        {"_id": 1, "students": [{"name": "john", "school": 102, "age": 10}]},
        {"_id": 3},
        {"_id": 4, "students": [{"name": "barney", "school": 102, "age": 7}]},
    ]
    got = schools.find_one({"_id": 4}, {"students": {"$elemMatch": {"school": 102, "age": {"$gt": 10}}}, "zipcode": 1})
    assert list(got) == ["_id", "zipcode", "students"]
    assert got["students"] == [{"name": "ruth", "school": 102, "age": 16}]
    # With exclusions, every other field stays.
    got = schools.find_one({"_id": 1}, {"zipcode": 0, "students": {"$elemMatch": {"age": {"$gte": 11}}}})
    assert got == {"_id": 1, "students": [{"name": "jess", "school": 102, "age": 11}]}


def test_positional_projection_keeps_the_element_the_query_matched(schools, db):
    got = schools.find_one({"_id": 1, "students.age": {"$gt": 10}}, {"students.$": 1})
    assert got == {"_id": 1, "students": [{"name": "jess", "school": 102, "age": 11}]}
    db.grades.insert_one({"_id": 7, "semester": 1, "grades": [70, 87, 90]})
    assert db.grades.find_one({"grades": {"$gte": 85}}, {"grades.$": 1}) == {"_id": 7, "grades": [87]}
    # A query that matched no element of the array.
    with pytest.raises(OperationFailure) as e:
        db.grades.find_one({"_id": 7}, {"grades.$": 1})
    assert e.value.code == 51246
    # findAndModify's fields take it too.
    got = db.grades.find_one_and_update({"grades": 90}, {"$set": {"seen": True}}, projection={"grades.$": 1})
    assert got == {"_id": 7, "grades": [90]}


@pytest.mark.parametrize("kind", ["regular", "timeseries"])
def test_top_and_bottom_order_by_their_sort_fields_even_when_nothing_else_reads_them(db, kind):
    import datetime
    if kind == "timeseries":
        db.create_collection("r", timeseries={"timeField": "t", "metaField": "g"})
    t0 = datetime.datetime(2024, 1, 1)
    db.r.insert_many([{"t": t0 + datetime.timedelta(seconds=i), "g": i % 2, "k": i % 3, "v": i}
                      for i in range(8)])
    top = list(db.r.aggregate([{"$group": {"_id": None, "r": {"$top": {"sortBy": {"k": -1, "v": 1}, "output": "$v"}}}}]))
    assert top[0]["r"] == 2
    bottom = list(db.r.aggregate([{"$group": {"_id": None, "r": {"$bottomN": {"n": 2, "sortBy": {"k": -1, "v": 1}, "output": "$v"}}}}]))
    assert bottom[0]["r"] == [3, 6]


def test_inserted_documents_are_stored_with_id_first_and_empty_timestamps_filled(db):
    from bson import Timestamp
    from bson.son import SON
    db.command("insert", "o", documents=[SON([("x", 1), ("_id", 5), ("ts", Timestamp(0, 0))])])
    got = db.o.find_one()
    assert list(got) == ["_id", "x", "ts"]
    assert got["ts"].time > 1_600_000_000
    db.o.update_one({"_id": 9}, {"$set": {"y": 1}}, upsert=True)
    assert list(db.o.find_one({"_id": 9}))[0] == "_id"
