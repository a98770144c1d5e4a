"""Options MongoDB 7.0 refuses are refused here too, with its codes, instead of being taken
and ignored: partial-index operators, index versions and names, tailable cursors on
collections that are not capped, and write concerns a standalone server cannot meet."""

import pytest
from pymongo.errors import OperationFailure


@pytest.mark.parametrize("partial", [
    {"p": {"$ne": 1}}, {"p": {"$exists": False}}, {"p": {"$regex": "a"}}, {"p": {"$nin": [1]}},
    {"$nor": [{"p": 1}]}, {"p": {"$elemMatch": {"$gt": 1}}},
])
def test_partial_filters_with_operators_mongodb_refuses_are_refused(db, partial):
    with pytest.raises(OperationFailure) as e:
        db.c.create_index("x", partialFilterExpression=partial)
    assert e.value.code == 67
    assert "Expression not supported in partial index" in e.value.details["errmsg"]


def test_partial_filters_with_the_allowed_operators_are_taken(db):
    allowed = {"$and": [{"a": 1}, {"b": {"$exists": True}}, {"c": {"$gt": 1, "$lte": 5}},
                        {"d": {"$type": "string"}}, {"e": {"$in": [1, 2]}},
                        {"$or": [{"f": {"$eq": 1}}, {"g": {"$lt": 0}}]}]}
    db.c.create_index("x", partialFilterExpression=allowed)
    assert db.c.index_information()["x_1"]["partialFilterExpression"] == allowed


def test_index_versions_other_than_1_and_2_and_the_name_star_are_refused(db):
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a", "v": 3}])
    assert e.value.code == 67
    db.command("createIndexes", "c", indexes=[{"key": {"b": 1}, "name": "b", "v": 1}])
    assert db.c.index_information()["b"]["v"] == 1
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "c", indexes=[{"key": {"s": 1}, "name": "*"}])
    assert e.value.code == 2


def test_tailable_cursors_need_a_capped_collection_and_await_data_needs_tailable(db):
    db.c.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", tailable=True)
    assert e.value.code == 2
    assert "tailable cursor requested on non capped collection" in e.value.details["errmsg"]
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", awaitData=True)
    assert e.value.code == 9


def test_a_standalone_refuses_write_concerns_it_cannot_meet_before_writing(db):
    for wc, message in [({"w": 2}, "cannot use 'w' > 1 when a host is not replicated"),
                        ({"w": "tagged"}, "cannot use non-majority 'w' mode tagged when a host is not a member of a replica set")]:
        with pytest.raises(OperationFailure) as e:
            db.command("insert", "c", documents=[{"x": 1}], writeConcern=wc)
        assert e.value.code == 2
        assert e.value.details["errmsg"] == message
    assert db.c.count_documents({}) == 0
    for wc in [{"w": 1}, {"w": "majority"}, {"w": 0}, {"j": True}]:
        db.command("insert", "c", documents=[{"x": 1}], writeConcern=wc)
    with pytest.raises(OperationFailure) as e:
        db.command("insert", "c", documents=[{"x": 1}], writeConcern={"w": -1})
    assert e.value.code == 9


def test_the_replica_set_writes_and_reports_a_write_concern_it_cannot_meet():
    from conftest import running_server
    from pymongo import MongoClient
    with running_server("--replSet", "rs0") as (_, port, _):
        c = MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true")
        db = c.wc_test
        reply = db.command("insert", "c", documents=[{"x": 1}], writeConcern={"w": 2})
        assert reply["n"] == 1
        assert reply["writeConcernError"]["code"] == 100
        reply = db.command("insert", "c", documents=[{"x": 2}], writeConcern={"w": "nosuchtag"})
        assert reply["writeConcernError"]["code"] == 79
        assert db.c.count_documents({}) == 2
        assert "writeConcernError" not in db.command("insert", "c", documents=[{"x": 3}],
                                                      writeConcern={"w": "majority"})
        c.close()


def test_coll_mod_expire_after_seconds_takes_off_as_its_only_string(db):
    import datetime
    db.create_collection("ts", timeseries={"timeField": "t"}, expireAfterSeconds=60)
    db.ts.insert_one({"t": datetime.datetime(2024, 1, 1)})
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "ts", expireAfterSeconds="on")
    assert e.value.code == 72
    assert "Accepted value is 'off'" in e.value.details["errmsg"]
    db.command("collMod", "ts", expireAfterSeconds="off")
    assert "expireAfterSeconds" not in db.command("listCollections", filter={"name": "ts"})["cursor"]["firstBatch"][0]["options"]


def test_coll_stats_latency_stats_count_the_collections_operations(db):
    db.c.insert_one({"a": 1})
    list(db.c.find())
    db.c.update_one({}, {"$set": {"a": 2}})
    stats = list(db.c.aggregate([{"$collStats": {"latencyStats": {}}}]))[0]["latencyStats"]
    assert stats["reads"]["ops"] >= 1 and stats["writes"]["ops"] >= 2
    assert set(stats) == {"reads", "writes", "commands", "transactions"}
    # What is not kept is refused rather than left out.
    for spec in [{"latencyStats": {"histograms": True}}, {"queryExecStats": {}}]:
        with pytest.raises(OperationFailure) as e:
            list(db.c.aggregate([{"$collStats": spec}]))
        assert e.value.code == 2
