"""Behaviours the drivers' specification tests pin (tests/spec runs the suites themselves):
the failCommand fail point, standalone read concerns, pipeline updates keeping _id, $rand,
$-prefixed _id fields and $merge's duplicate-key details."""

import pytest
from pymongo import MongoClient
from pymongo.errors import AutoReconnect, DuplicateKeyError, OperationFailure, WriteError

from conftest import running_server


@pytest.fixture(scope="module")
def test_server():
    with running_server("--setParameter", "enableTestCommands=1") as (_, port, _):
        yield port


def client(port, **kw):
    return MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=5000, **kw)


def test_configure_fail_point_does_not_exist_without_enable_test_commands(db):
    with pytest.raises(OperationFailure) as e:
        db.client.admin.command("configureFailPoint", "failCommand", mode="alwaysOn",
                                data={"failCommands": ["find"], "errorCode": 2})
    assert e.value.code == 59


def test_fail_command_fails_the_named_command_the_given_number_of_times(test_server):
    c = client(test_server)
    c.fp.c.insert_one({"a": 1})
    c.admin.command("configureFailPoint", "failCommand", mode={"times": 2},
                    data={"failCommands": ["find"], "errorCode": 2, "errorLabels": ["SomeLabel"]})
    for _ in range(2):
        with pytest.raises(OperationFailure) as e:
            c.fp.command("find", "c")
        assert e.value.code == 2 and "SomeLabel" in e.value.details["errorLabels"]
    assert c.fp.c.find_one({}, {"_id": 0}) == {"a": 1}
    assert c.fp.command("count", "c")["n"] == 1
    c.close()


def test_fail_command_close_connection_drops_the_connection_without_a_reply(test_server):
    c = client(test_server, retryReads=False)
    c.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                    data={"failCommands": ["count", "insert"], "closeConnection": True})
    with pytest.raises(AutoReconnect):
        c.fp.command("count", "c")
    assert c.fp.command("count", "c")["ok"] == 1.0
    # The command does not run: a closed insert wrote nothing.
    c.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                    data={"failCommands": ["insert"], "closeConnection": True})
    with pytest.raises(AutoReconnect):
        c.fp.command("insert", "closed", documents=[{"x": 1}])
    assert c.fp.closed.count_documents({}) == 0
    c.close()


def test_fail_command_app_name_limits_it_to_that_client_and_write_concern_error_is_added(test_server):
    other = client(test_server, appName="other")
    mine = client(test_server, appName="mine")
    mine.admin.command("configureFailPoint", "failCommand", mode="alwaysOn",
                       data={"failCommands": ["insert"], "appName": "mine",
                             "writeConcernError": {"code": 91, "errmsg": "Replication is being shut down"}})
    try:
        assert other.fp.command("insert", "w", documents=[{"x": 1}])["n"] == 1
        reply = mine.fp.command("insert", "w", documents=[{"x": 2}])
        assert reply["writeConcernError"]["code"] == 91 and reply["n"] == 1
    finally:
        mine.admin.command("configureFailPoint", "failCommand", mode="off")
    assert "writeConcernError" not in mine.fp.command("insert", "w", documents=[{"x": 3}])
    other.close()
    mine.close()


def test_configure_fail_point_runs_on_admin_only_and_knows_only_fail_command(test_server):
    c = client(test_server)
    with pytest.raises(OperationFailure) as e:
        c.fp.command("configureFailPoint", "failCommand", mode="off")
    assert e.value.code == 13
    with pytest.raises(OperationFailure) as e:
        c.admin.command("configureFailPoint", "hangBeforeInsert", mode="alwaysOn")
    assert e.value.code == 2
    c.close()


@pytest.mark.parametrize("level", ["snapshot", "linearizable"])
def test_snapshot_and_linearizable_read_concerns_need_a_replica_set(db, level):
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", readConcern={"level": level})
    assert e.value.code == 123
    assert db.command("find", "c", readConcern={"level": "majority"})["ok"] == 1.0
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", readConcern={"level": "strong"})
    assert e.value.code == 9


def test_a_read_concern_that_is_not_a_document_or_has_unknown_fields_is_refused(db):
    for rc, code in (("majority", 14), (1, 14), ({"level": 1}, 14), ({"levle": "local"}, 40415)):
        with pytest.raises(OperationFailure) as e:
            db.command("find", "c", readConcern=rc)
        assert e.value.code == code, (rc, e.value.details)
    assert db.command("find", "c", readConcern={})["ok"] == 1.0


def test_a_pipeline_update_whose_result_has_no_id_keeps_the_documents_id(db):
    db.c.insert_one({"_id": 1, "t": {"u": {"v": 1}}})
    db.c.update_one({"_id": 1}, [{"$replaceRoot": {"newRoot": "$t"}}, {"$addFields": {"foo": 1}}])
    assert db.c.find_one() == {"_id": 1, "u": {"v": 1}, "foo": 1}
    with pytest.raises(WriteError) as e:
        db.c.update_one({"_id": 1}, [{"$set": {"_id": 2}}])
    assert e.value.code == 66


def test_rand_gives_a_new_double_in_zero_to_one_per_document(db):
    db.c.insert_many([{"i": i} for i in range(200)])
    values = [d["r"] for d in db.c.aggregate([{"$project": {"r": {"$rand": {}}}}])]
    assert all(isinstance(v, float) and 0 <= v < 1 for v in values)
    assert len(set(values)) > 190
    with pytest.raises(OperationFailure):
        list(db.c.aggregate([{"$project": {"r": {"$rand": {"seed": 1}}}}]))


def test_an_id_with_a_dollar_prefixed_field_is_refused(db):
    with pytest.raises(WriteError) as e:
        db.c.insert_one({"_id": {"$a": 1}})
    assert e.value.code == 52
    with pytest.raises(WriteError):
        db.c.insert_one({"_id": {"a": [{"$b": 1}]}})
    db.c.insert_one({"_id": {"a": 1}})
    assert db.c.count_documents({}) == 1


def test_merge_when_matched_fail_reports_key_pattern_and_key_value(db):
    db.test.insert_one({"_id": 2, "x": 0})
    with pytest.raises(DuplicateKeyError) as e:
        db.aggregate([{"$documents": [{"_id": 2, "x": 1}]}, {"$merge": {"into": "test", "whenMatched": "fail"}}])
    assert e.value.details["keyPattern"] == {"_id": 1}
    assert e.value.details["keyValue"] == {"_id": 2}
