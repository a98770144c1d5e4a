"""Non-materialized views through pymongo, as MongoDB 7.0 has them: definitions in
system.views, reads through the view pipeline (find, aggregate, count, distinct, explain, cursors
across getMore), nested views, listCollections entries, collMod, drop, the error codes of writes
(166), cycles (5 GraphContainsCycle) and depth (165), and definitions that survive kill -9."""

import datetime
import tempfile
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import running_server


@pytest.fixture()
def src(db):
    db.src.insert_many([{"_id": i, "a": i % 3, "b": [i, i + 1], "s": f"x{i}"} for i in range(10)])
    return db


def test_find_through_a_view_applies_its_pipeline_then_filter_sort_skip_limit_projection(src):
    src.create_collection("v", viewOn="src", pipeline=[{"$match": {"a": {"$gte": 1}}}])
    got = list(src.v.find({"a": 2}, {"_id": 1}).sort("_id", -1).skip(1).limit(2))
    assert got == [{"_id": 5}, {"_id": 2}]
    assert [d["_id"] for d in src.v.find()] == [1, 2, 4, 5, 7, 8]


def test_a_view_cursor_belongs_to_the_view_and_continues_with_get_more(src):
    src.create_collection("v", viewOn="src", pipeline=[])
    cursor = src.v.find(batch_size=3)
    assert [d["_id"] for d in cursor] == list(range(10))
    reply = src.command("find", "v", batchSize=2)
    assert reply["cursor"]["ns"] == f"{src.name}.v"
    assert reply["cursor"]["id"] != 0
    more = src.command("getMore", reply["cursor"]["id"], collection="v", batchSize=100)
    assert len(more["cursor"]["nextBatch"]) == 8


def test_find_with_single_batch_or_a_shell_negative_limit_closes_the_cursor(src):
    src.create_collection("v", viewOn="src", pipeline=[])
    reply = src.command("find", "v", batchSize=2, singleBatch=True)
    assert reply["cursor"]["id"] == 0 and len(reply["cursor"]["firstBatch"]) == 2
    # A driver sends a shell's limit(-3) as limit 3 with singleBatch.
    assert len(list(src.v.find(limit=-3))) == 3
    reply = src.command("find", "v", limit=3, singleBatch=True)
    assert reply["cursor"]["id"] == 0 and len(reply["cursor"]["firstBatch"]) == 3


def test_views_on_views_stack_their_pipelines_for_aggregate_count_and_distinct(src):
    src.create_collection("v1", viewOn="src", pipeline=[{"$match": {"a": {"$gte": 1}}}])
    src.create_collection("v2", viewOn="v1", pipeline=[{"$project": {"a": 1, "b": 1}}])
    assert src.v2.count_documents({}) == 6
    assert src.v2.count_documents({"a": 1}) == 3
    assert src.command("count", "v2", query={"a": 2}, skip=1, limit=1)["n"] == 1
    assert src.v2.distinct("b") == list(range(1, 10))
    assert src.v2.distinct("a", {"b": {"$gt": 5}}) == [1, 2]
    grouped = list(src.v2.aggregate([{"$group": {"_id": "$a", "n": {"$sum": 1}}},
                                     {"$sort": {"_id": 1}}]))
    assert grouped == [{"_id": 1, "n": 3}, {"_id": 2, "n": 3}]
    assert list(src.v2.find({}, {"_id": 0}).limit(1)) == [{"a": 1, "b": [1, 2]}]


def test_list_collections_shows_views_and_system_views_holds_their_definitions(src):
    pipeline = [{"$match": {"a": 1}}]
    src.create_collection("v", viewOn="src", pipeline=pipeline)
    entries = {c["name"]: c for c in src.list_collections()}
    assert entries["v"] == {"name": "v", "type": "view",
                            "options": {"viewOn": "src", "pipeline": pipeline},
                            "info": {"readOnly": True}}
    assert entries["system.views"]["type"] == "collection"
    assert [c["name"] for c in src.list_collections(filter={"type": "view"})] == ["v"]
    assert list(src.system.views.find()) == [
        {"_id": f"{src.name}.v", "viewOn": "src", "pipeline": pipeline}]


@pytest.mark.parametrize("write", [
    lambda c: c.insert_one({"x": 1}),
    lambda c: c.update_one({}, {"$set": {"x": 1}}),
    lambda c: c.delete_many({}),
    lambda c: c.find_one_and_delete({}),
    lambda c: c.create_index("a"),
    lambda c: c.drop_index("a_1"),
    lambda c: list(c.list_indexes()),
], ids=["insert", "update", "delete", "findAndModify", "createIndexes", "dropIndexes",
        "listIndexes"])
def test_writes_and_index_commands_on_a_view_fail_with_command_not_supported_on_view(src, write):
    src.create_collection("v", viewOn="src", pipeline=[])
    with pytest.raises(OperationFailure) as e:
        write(src.v)
    assert e.value.code == 166
    assert e.value.details["codeName"] == "CommandNotSupportedOnView"
    assert src.src.count_documents({}) == 10


def test_a_view_that_would_form_a_cycle_is_refused_with_graph_contains_cycle(src):
    with pytest.raises(OperationFailure) as e:
        src.create_collection("self", viewOn="self", pipeline=[])
    assert e.value.code == 5  # GraphContainsCycle
    src.create_collection("a1", viewOn="src", pipeline=[])
    src.create_collection("a2", viewOn="a1", pipeline=[])
    with pytest.raises(OperationFailure) as e:
        src.command("collMod", "a1", viewOn="a2", pipeline=[])
    assert e.value.code == 5  # GraphContainsCycle


def test_views_more_than_twenty_deep_are_refused_with_view_depth_limit_exceeded(src):
    src.create_collection("d1", viewOn="src", pipeline=[])
    for i in range(2, 21):
        src.create_collection(f"d{i}", viewOn=f"d{i - 1}", pipeline=[])
    assert src.d20.count_documents({}) == 10
    with pytest.raises(OperationFailure) as e:
        src.create_collection("d21", viewOn="d20", pipeline=[])
    assert e.value.code == 165


def test_creating_a_view_over_an_existing_name_or_with_out_is_refused(src):
    with pytest.raises(OperationFailure) as e:
        src.command("create", "src", viewOn="other", pipeline=[])
    assert e.value.code == 48
    src.create_collection("v", viewOn="src", pipeline=[])
    with pytest.raises(OperationFailure) as e:
        src.command("create", "v", viewOn="src", pipeline=[])
    assert e.value.code == 48
    with pytest.raises(OperationFailure) as e:
        src.command("create", "v")
    assert e.value.code == 48
    with pytest.raises(OperationFailure) as e:
        src.command("create", "w", viewOn="src", pipeline=[{"$out": "elsewhere"}])
    assert "view definition" in str(e.value)
    with pytest.raises(OperationFailure):
        src.command("create", "w", viewOn="src", pipeline=[{"$nosuchstage": {}}])
    assert "w" not in src.list_collection_names()


def test_coll_mod_replaces_the_definition_and_drop_removes_the_view(src):
    src.create_collection("v", viewOn="src", pipeline=[{"$match": {"a": 0}}])
    assert src.v.count_documents({}) == 4
    src.command("collMod", "v", viewOn="src", pipeline=[{"$match": {"a": 1}}])
    assert src.v.count_documents({}) == 3
    with pytest.raises(OperationFailure):
        src.command("collMod", "v", viewOn="src")
    src.v.drop()
    assert "v" not in src.list_collection_names()
    assert src.v.count_documents({}) == 0
    assert src.src.count_documents({}) == 10


def test_a_view_over_a_time_series_collection_reads_its_measurements(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    t0 = datetime.datetime(2024, 1, 1)
    db.ts.insert_many([{"t": t0 + datetime.timedelta(minutes=i), "m": i % 2, "v": i}
                       for i in range(6)])
    db.create_collection("odd", viewOn="ts", pipeline=[{"$match": {"m": 1}}])
    assert [d["v"] for d in db.odd.find({}, {"_id": 0}).sort("t", 1)] == [1, 3, 5]
    assert db.odd.count_documents({"v": {"$gt": 1}}) == 2


def test_explain_of_a_find_on_a_view_explains_the_resolved_pipeline(src):
    src.create_collection("v", viewOn="src", pipeline=[{"$match": {"a": 1}}])
    plan = src.v.find({"b": 4}).explain()
    cursor = plan["stages"][0]["$cursor"]["queryPlanner"]
    assert cursor["namespace"] == f"{src.name}.src"
    assert cursor["winningPlan"]["stage"] == "COLLSCAN"
    # (With the stage's counts beside it: explain() runs at allPlansExecution.)
    assert plan["stages"][1]["$match"] == {"b": 4}
    assert plan["stages"][1]["nReturned"] == len(list(src.v.find({"b": 4})))
    with pytest.raises(OperationFailure) as e:
        src.command("explain", {"delete": "v", "deletes": [{"q": {}, "limit": 0}]})
    assert e.value.code == 166


def test_view_definitions_survive_kill_9():
    with tempfile.TemporaryDirectory(prefix="hourglass-views-") as tmp:
        dbpath = Path(tmp) / "db"
        dbpath.mkdir()
        with running_server(dbpath=dbpath) as (proc, port, _):
            c = MongoClient(port=port, directConnection=True)
            c.vdb.src.insert_many([{"_id": i} for i in range(5)])
            c.vdb.create_collection("v", viewOn="src", pipeline=[{"$match": {"_id": {"$gt": 2}}}])
            c.close()
            proc.kill()
            proc.wait()
        with running_server(dbpath=dbpath) as (_, port, _):
            c = MongoClient(port=port, directConnection=True)
            assert [d["_id"] for d in c.vdb.v.find()] == [3, 4]
            c.close()


def test_renaming_a_view_is_refused(src, client):
    src.create_collection("v", viewOn="src", pipeline=[])
    with pytest.raises(OperationFailure) as e:
        client.admin.command("renameCollection", f"{src.name}.v", to=f"{src.name}.w")
    assert e.value.code == 166
    assert [c["name"] for c in src.list_collections(filter={"type": "view"})] == ["v"]


def test_a_view_on_a_time_series_bucket_collection_is_refused_with_invalid_namespace(db):
    db.create_collection("ts", timeseries={"timeField": "t"})
    with pytest.raises(OperationFailure) as e:
        db.command("create", "bad", viewOn="system.buckets.ts", pipeline=[])
    assert e.value.code == 73
    assert "bad" not in db.list_collection_names()
    with pytest.raises(OperationFailure) as e:
        db.create_collection("v", viewOn="ts", pipeline=[])
        db.command("collMod", "v", viewOn="system.buckets.ts", pipeline=[])
    assert e.value.code == 73


def test_a_time_series_collection_keeps_its_view_definition_in_system_views(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    entries = {c["name"]: c["type"] for c in db.list_collections()}
    assert entries == {"ts": "timeseries", "system.buckets.ts": "collection", "system.views": "collection"}
    assert list(db.system.views.find()) == [{
        "_id": f"{db.name}.ts", "viewOn": "system.buckets.ts",
        "pipeline": [{"$_internalUnpackBucket": {"timeField": "t", "metaField": "m", "bucketMaxSpanSeconds": 3600}}],
    }]
    db.command("collMod", "ts", timeseries={"granularity": "hours"})
    unpack = db.system.views.find_one({"_id": f"{db.name}.ts"})["pipeline"][0]["$_internalUnpackBucket"]
    assert unpack["bucketMaxSpanSeconds"] == 2592000
    db.ts.insert_one({"t": datetime.datetime(2024, 1, 1), "m": 1})
    assert db.ts.count_documents({}) == 1
    db.ts.drop()
    assert db.system.views.count_documents({}) == 0
    assert "ts" not in db.list_collection_names()
