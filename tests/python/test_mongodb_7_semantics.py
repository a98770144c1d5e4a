"""Smaller MongoDB 7.0 behaviours through pymongo: compact and reIndex, showRecordId on a
time-series collection, $dateFromParts with missing parts, the duplicate-key details of
$merge, $listLocalSessions, clustered collections and the mixed-schema flag."""

import datetime
import time

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import running_server


def test_compact_frees_the_space_of_deleted_documents_and_keeps_the_rest(db):
    db.c.insert_many([{"_id": i, "pad": "x" * 2000} for i in range(2000)])
    db.c.delete_many({"_id": {"$lt": 1900}})
    reply = db.command("compact", "c")
    assert reply["ok"] == 1.0
    assert isinstance(reply["bytesFreed"], int) and reply["bytesFreed"] >= 0
    assert db.c.count_documents({}) == 100
    assert db.command("validate", "c")["valid"] is True


def test_compact_of_a_time_series_collection_compacts_its_buckets(db):
    db.create_collection("ts", timeseries={"timeField": "t"})
    db.ts.insert_many([{"t": datetime.datetime(2024, 1, 1, 0, i)} for i in range(10)])
    assert db.command("compact", "ts")["ok"] == 1.0
    assert db.ts.count_documents({}) == 10


def test_compact_and_reindex_of_a_missing_collection_or_a_view_fail_as_mongodb(db):
    for cmd in ("compact", "reIndex"):
        with pytest.raises(OperationFailure) as e:
            db.command(cmd, "nope")
        assert e.value.code == 26
    db.c.insert_one({})
    db.create_collection("v", viewOn="c", pipeline=[])
    for cmd, msg in (("compact", "can't compact a view"), ("reIndex", "can't re-index a view")):
        with pytest.raises(OperationFailure) as e:
            db.command(cmd, "v")
        assert e.value.code == 166 and msg in str(e.value)


def test_reindex_rebuilds_every_index_and_reports_them(db):
    db.c.insert_many([{"_id": i, "a": i % 7, "b": str(i)} for i in range(200)])
    db.c.create_index("a")
    db.c.create_index([("b", 1)], unique=True, name="b_unique")
    reply = db.command("reIndex", "c")
    assert reply["nIndexesWas"] == 3 and reply["nIndexes"] == 3
    assert [i["name"] for i in reply["indexes"]] == ["_id_", "a_1", "b_unique"]
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_", "a_1", "b_unique"]
    assert db.c.find({"a": 3}).hint("a_1").explain()["queryPlanner"]["winningPlan"]
    assert len(list(db.c.find({"a": 3}).hint("a_1"))) == len([i for i in range(200) if i % 7 == 3])
    with pytest.raises(OperationFailure) as e:
        db.c.insert_one({"_id": 1000, "b": "5"})
    assert e.value.code == 11000


def test_show_record_id_on_a_time_series_collection_is_an_invalid_pipeline_operator(db):
    db.create_collection("ts", timeseries={"timeField": "t"})
    db.ts.insert_one({"t": datetime.datetime(2024, 1, 1)})
    with pytest.raises(OperationFailure) as e:
        list(db.ts.find(show_record_id=True))
    assert e.value.code == 168
    assert "showRecordId" in str(e.value)


def test_date_from_parts_with_a_missing_or_null_part_is_null(db):
    db.c.insert_one({"_id": 1, "y": 2024, "n": None})
    out = db.c.aggregate([{"$project": {
        "missing_year": {"$dateFromParts": {"year": "$nope", "month": 2}},
        "null_hour": {"$dateFromParts": {"year": "$y", "hour": "$n"}},
        "carried": {"$dateFromParts": {"year": "$y", "month": 13, "second": 90}},
    }}]).next()
    assert out["missing_year"] is None
    assert out["null_hour"] is None
    assert out["carried"] == datetime.datetime(2025, 1, 1, 0, 1, 30)


def collection_uuid(db, name):
    return next(c for c in db.list_collections(filter={"name": name}))["info"]["uuid"]


def test_commands_with_the_right_collection_uuid_run(db):
    db.c.insert_one({"_id": 1})
    uuid = collection_uuid(db, "c")
    assert db.command("find", "c", collectionUUID=uuid)["cursor"]["firstBatch"] == [{"_id": 1}]
    db.command("insert", "c", documents=[{"_id": 2}], collectionUUID=uuid)
    assert db.command("count", "c", collectionUUID=uuid)["n"] == 2
    db.command("aggregate", "c", pipeline=[], cursor={}, collectionUUID=uuid)


def test_a_wrong_collection_uuid_fails_with_collection_uuid_mismatch_before_anything_runs(db):
    db.a.insert_one({"_id": 1})
    db.b.insert_one({"_id": 1})
    uuid_a = collection_uuid(db, "a")
    for cmd, extra in (("find", {}), ("insert", {"documents": [{"_id": 2}]}),
                       ("delete", {"deletes": [{"q": {}, "limit": 0}]}), ("drop", {})):
        with pytest.raises(OperationFailure) as e:
            db.command(cmd, "b", collectionUUID=uuid_a, **extra)
        assert e.value.code == 361, cmd
        details = e.value.details
        assert details["codeName"] == "CollectionUUIDMismatch"
        assert (details["db"], details["expectedCollection"], details["actualCollection"]) == (
            db.name, "b", "a")
        assert details["collectionUUID"] == uuid_a
    assert db.b.count_documents({}) == 1
    with pytest.raises(OperationFailure) as e:
        db.command("find", "missing", collectionUUID=uuid_a)
    assert e.value.code == 361 and e.value.details["actualCollection"] == "a"


def test_collection_uuid_is_refused_by_commands_that_do_not_take_it(db):
    db.c.insert_one({})
    with pytest.raises(OperationFailure) as e:
        db.command("create", "d", collectionUUID=collection_uuid(db, "c"))
    assert e.value.code == 40415


EMPLOYEES = [
    {"_id": 1, "name": "Dev"},
    {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
    {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
    {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
    {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
    {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
]


def chain(db, **extra):
    spec = {"from": "employees", "startWith": "$reportsTo", "connectFromField": "reportsTo",
            "connectToField": "name", "as": "hierarchy", **extra}
    out = db.employees.aggregate([{"$match": {"name": "Dan"}}, {"$graphLookup": spec}]).next()
    return out["hierarchy"]


def test_graph_lookup_follows_the_chain_breadth_first_with_depth_and_max_depth(db):
    db.employees.insert_many(EMPLOYEES)
    hierarchy = chain(db, depthField="depth")
    assert [(d["name"], d["depth"]) for d in hierarchy] == [("Andrew", 0), ("Eliot", 1), ("Dev", 2)]
    assert all(isinstance(d["depth"], int) for d in hierarchy)
    assert [d["name"] for d in chain(db, maxDepth=0)] == ["Andrew"]
    assert [d["name"] for d in chain(db, maxDepth=1)] == ["Andrew", "Eliot"]
    assert [d["name"] for d in chain(db, restrictSearchWithMatch={"name": {"$ne": "Eliot"}})] == [
        "Andrew"]


def test_graph_lookup_follows_arrays_and_takes_each_document_once(db):
    db.airports.insert_many([
        {"_id": 0, "airport": "JFK", "connects": ["BOS", "ORD"]},
        {"_id": 1, "airport": "BOS", "connects": ["JFK", "PWM"]},
        {"_id": 2, "airport": "ORD", "connects": ["JFK"]},
        {"_id": 3, "airport": "PWM", "connects": ["BOS", "LHR"]},
        {"_id": 4, "airport": "LHR", "connects": ["PWM"]},
    ])
    db.travellers.insert_one({"_id": 1, "nearest": "JFK"})
    out = db.travellers.aggregate([{"$graphLookup": {
        "from": "airports", "startWith": "$nearest", "connectFromField": "connects",
        "connectToField": "airport", "maxDepth": 2, "depthField": "hops", "as": "dest"}}]).next()
    hops = {d["airport"]: d["hops"] for d in out["dest"]}
    assert hops == {"JFK": 0, "BOS": 1, "ORD": 1, "PWM": 2}


def test_graph_lookup_and_lookup_read_from_a_view(db):
    db.employees.insert_many(EMPLOYEES)
    db.create_collection("staff", viewOn="employees", pipeline=[{"$match": {"_id": {"$gt": 1}}}])
    hierarchy = db.employees.aggregate([{"$match": {"_id": 6}}, {"$graphLookup": {
        "from": "staff", "startWith": "$reportsTo", "connectFromField": "reportsTo",
        "connectToField": "name", "as": "h"}}]).next()["h"]
    assert [d["name"] for d in hierarchy] == ["Andrew", "Eliot"]
    joined = db.employees.aggregate([{"$match": {"_id": 2}}, {"$lookup": {
        "from": "staff", "localField": "name", "foreignField": "reportsTo", "as": "reports"}}]).next()
    assert sorted(d["name"] for d in joined["reports"]) == ["Andrew", "Ron"]
    with pytest.raises(OperationFailure) as e:
        list(db.employees.aggregate([{"$out": "staff"}]))
    assert e.value.code == 166


def test_graph_lookup_spec_errors(db):
    db.c.insert_one({})
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$graphLookup": {"from": "c", "startWith": 1, "as": "x"}}]))
    assert e.value.code == 40105
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$graphLookup": {
            "from": "c", "startWith": 1, "connectFromField": "a", "connectToField": "b",
            "as": "x", "maxDepth": -1}}]))
    assert e.value.code == 40101


@pytest.mark.parametrize("when_matched", ["replace", "merge", [{"$set": {"_id": "$$new._id"}}]],
                         ids=["replace", "merge", "pipeline"])
def test_merge_that_would_change_the_matched_documents_id_fails_with_immutable_field(
        db, when_matched):
    db.target.create_index("k", unique=True)
    db.target.insert_one({"_id": 1, "k": "a", "v": 0})
    db.src.insert_one({"_id": 2, "k": "a", "v": 1})
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$merge": {"into": "target", "on": "k",
                                           "whenMatched": when_matched}}]))
    assert e.value.code == 66
    assert "did you attempt to modify the _id" in str(e.value)
    assert list(db.target.find()) == [{"_id": 1, "k": "a", "v": 0}]
    # Without the source's _id the same merge goes through.
    list(db.src.aggregate([{"$unset": "_id"}, {"$merge": {"into": "target", "on": "k",
                                                          "whenMatched": "replace"}}]))
    assert list(db.target.find()) == [{"_id": 1, "k": "a", "v": 1}]


def test_list_indexes_and_list_collections_honour_cursor_batch_size(db):
    for name in ("a", "b", "c"):
        db[name].create_index("x")
    reply = db.command("listIndexes", "a", cursor={"batchSize": 1})
    assert len(reply["cursor"]["firstBatch"]) == 1 and reply["cursor"]["id"] != 0
    more = db.command("getMore", reply["cursor"]["id"], collection="a")
    assert [i["name"] for i in more["cursor"]["nextBatch"]] == ["x_1"]
    reply = db.command("listCollections", cursor={"batchSize": 0})
    assert reply["cursor"]["firstBatch"] == [] and reply["cursor"]["id"] != 0
    assert sorted(c["name"] for c in db.list_collections()) == ["a", "b", "c"]


def test_list_catalog_lists_collections_views_and_time_series_entries(db, client):
    db.c.create_index("x")
    db.create_collection("v", viewOn="c", pipeline=[{"$match": {"x": 1}}])
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    mine = [e for e in client.admin.aggregate([{"$listCatalog": {}}]) if e["db"] == db.name]
    by_name = {e["name"]: e for e in mine}
    c = by_name["c"]
    assert (c["type"], c["ns"]) == ("collection", f"{db.name}.c")
    assert [i["spec"]["name"] for i in c["md"]["indexes"]] == ["_id_", "x_1"]
    assert "uuid" in c["md"]["options"]
    v = by_name["v"]
    assert (v["type"], v["viewOn"], v["pipeline"]) == ("view", "c", [{"$match": {"x": 1}}])
    ts = by_name["ts"]
    assert (ts["type"], ts["viewOn"]) == ("timeseries", "system.buckets.ts")
    assert "$_internalUnpackBucket" in ts["pipeline"][0]
    assert by_name["system.buckets.ts"]["md"]["options"]["timeseries"]["timeField"] == "t"
    assert [e["name"] for e in db.c.aggregate([{"$listCatalog": {}}])] == ["c"]
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", 1, pipeline=[{"$listCatalog": {}}], cursor={})
    assert e.value.code == 73
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$listCatalog": {"x": 1}}]))
    assert e.value.code == 6200600


def test_hints_on_a_time_series_collection_must_name_a_visible_index(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    db.ts.insert_many([{"t": datetime.datetime(2024, 1, 1, 0, i), "m": i % 2} for i in range(4)])
    db.ts.create_index([("m", 1), ("t", -1)], name="m_t")
    assert len(list(db.ts.find().hint("m_t"))) == 4
    assert len(list(db.ts.find().hint([("m", 1), ("t", -1)]))) == 4
    assert len(list(db.ts.find().hint("m_1_t_1"))) == 4
    assert len(list(db.ts.find().hint([("$natural", 1)]))) == 4
    for bad in ("nope", {"t": -1, "m": 1}):
        with pytest.raises(OperationFailure) as e:
            list(db.ts.find().hint(bad))
        assert e.value.code == 2
        with pytest.raises(OperationFailure) as e:
            list(db.ts.aggregate([], hint=bad))
        assert e.value.code == 2
    db.command("collMod", "ts", index={"name": "m_t", "hidden": True})
    with pytest.raises(OperationFailure) as e:
        list(db.ts.find().hint("m_t"))
    assert e.value.code == 2


def test_index_stats_on_a_buckets_collection_lists_its_indexes(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    db.ts.insert_one({"t": datetime.datetime(2024, 1, 1), "m": 1})
    on_view = [s["name"] for s in db.ts.aggregate([{"$indexStats": {}}])]
    on_buckets = list(db["system.buckets.ts"].aggregate([{"$indexStats": {}}]))
    assert on_view == ["m_1_t_1"]
    assert [s["name"] for s in on_buckets] == ["m_1_t_1"]
    assert on_buckets[0]["key"] == {"meta": 1, "control.min.t": 1, "control.max.t": 1}


def test_coll_mod_refuses_a_ttl_on_a_time_series_index(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "ts", index={"name": "m_1_t_1", "expireAfterSeconds": 10})
    assert e.value.code == 72
    assert "expireAfterSeconds" not in next(db.ts.list_indexes())


def test_positional_update_of_an_array_valued_meta_field_on_a_time_series_collection(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    docs = [{"t": datetime.datetime(2024, 1, 1, 0, i), "m": {"tags": ["a", "b"] if i % 2 else ["c"]},
             "v": i} for i in range(4)]
    db.ts.insert_many([dict(d) for d in docs])
    db.r.insert_many([dict(d) for d in docs])
    for coll in (db.ts, db.r):
        result = coll.update_many({"m.tags": "b"}, {"$set": {"m.tags.$": "B"}})
        assert result.modified_count == 2, coll.name
    def metas(c):
        return sorted(str(d["m"]) for d in c.find())
    assert metas(db.ts) == metas(db.r) == ["{'tags': ['a', 'B']}"] * 2 + ["{'tags': ['c']}"] * 2


def test_out_and_merge_with_batch_size_zero_close_their_cursor(db):
    db.src.insert_many([{"_id": i} for i in range(3)])
    for stage in ({"$out": "o"}, {"$merge": {"into": "m"}}):
        reply = db.command("aggregate", "src", pipeline=[stage], cursor={"batchSize": 0})
        assert reply["cursor"]["id"] == 0 and reply["cursor"]["firstBatch"] == []
    assert db.o.count_documents({}) == 3 and db.m.count_documents({}) == 3


def test_merge_that_hits_a_unique_index_reports_the_duplicate_key(db):
    db.src.insert_many([{"_id": 1, "k": "a"}, {"_id": 2, "k": "a"}])
    db.dst.create_index("k", unique=True)
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$merge": {"into": "dst"}}]))
    d = e.value.details
    assert (d["code"], d["codeName"]) == (11000, "DuplicateKey")
    assert (d["keyPattern"], d["keyValue"]) == ({"k": 1}, {"k": "a"})


def test_list_local_sessions_shows_the_sessions_commands_carried_until_they_end(client, db):
    with client.start_session() as s:
        db.c.insert_one({"a": 1}, session=s)
        sid = s.session_id["id"]

        def listed(spec=None):
            out = client.admin.aggregate([{"$listLocalSessions": spec or {}}])
            return [d for d in out if d["_id"]["id"] == sid]

        (entry,) = listed()
        assert len(entry["_id"]["uid"]) == 32 and "lastUse" in entry
        assert [d["_id"] for d in listed({"allUsers": True})] == [entry["_id"]]
        client.admin.command("endSessions", [s.session_id])
        assert listed() == []
    with pytest.raises(OperationFailure) as e:
        client.admin.command("aggregate", 1, pipeline=[{"$listLocalSessions": {"nosuch": 1}}],
                             cursor={})
    assert e.value.code == 40415
    with pytest.raises(OperationFailure):
        db.command("aggregate", "c", pipeline=[{"$listLocalSessions": {}}], cursor={})


def test_clustered_collection_shows_its_clustered_index_and_refuses_other_keys(db):
    db.create_collection("cl", clusteredIndex={"key": {"_id": 1}, "unique": True})
    spec = {"v": 2, "key": {"_id": 1}, "name": "_id_", "unique": True}
    info = next(db.list_collections(filter={"name": "cl"}))
    assert info["options"]["clusteredIndex"] == spec
    assert next(db.cl.list_indexes()) == {**spec, "clustered": True}
    db.cl.insert_one({"_id": 42.0})
    with pytest.raises(Exception) as e:
        db.cl.insert_one({"_id": 42})
    assert getattr(e.value, "code", None) == 11000
    for bad in ({"key": {"a": 1}, "unique": True}, {"key": {"_id": 1}, "unique": False}):
        with pytest.raises(OperationFailure) as e:
            db.create_collection("bad", clusteredIndex=bad)
        assert e.value.code == 72, bad
    with pytest.raises(OperationFailure) as e:
        db.create_collection("bad", expireAfterSeconds=5)
    assert e.value.code == 72


def test_clustered_collection_with_expire_after_seconds_deletes_by_id_date():
    with running_server("--setParameter", "ttlMonitorSleepSecs=1") as (_, port, _):
        db = MongoClient(port=port, directConnection=True).cl_ttl
        db.create_collection("events", clusteredIndex={"key": {"_id": 1}, "unique": True},
                             expireAfterSeconds=60)
        now = datetime.datetime.now(datetime.timezone.utc)
        db.events.insert_many([{"_id": now - datetime.timedelta(hours=1), "v": "old"},
                               {"_id": now + datetime.timedelta(hours=1), "v": "new"},
                               {"_id": "not a date", "v": "kept"}])
        deadline = time.monotonic() + 30
        while db.events.count_documents({}) != 2:
            assert time.monotonic() < deadline, list(db.events.find())
            time.sleep(0.2)
        assert sorted(d["v"] for d in db.events.find()) == ["kept", "new"]
        assert next(db.list_collections())["options"]["expireAfterSeconds"] == 60


def test_buckets_may_have_mixed_schema_data_is_set_by_create_and_coll_mod(db):
    flag = "timeseriesBucketsMayHaveMixedSchemaData"
    db.command("create", "mixed", timeseries={"timeField": "t"}, **{flag: True})
    assert next(db.list_collections(filter={"name": "mixed"}))["options"][flag] is True
    db.command("collMod", "mixed", **{flag: False})
    assert next(db.list_collections(filter={"name": "mixed"}))["options"][flag] is False
    db.mixed.insert_many([{"t": datetime.datetime(2026, 1, 1), "v": v} for v in (1, "a", 2.5)])
    assert db.mixed.count_documents({"v": {"$gte": 1}}) == 2
    db.create_collection("plain")
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "plain", **{flag: True})
    assert e.value.code == 72
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "mixed", **{flag: "yes"})
    assert e.value.code == 14


def test_list_indexes_of_a_time_series_collection_orders_fields_as_mongod(db):
    db.create_collection("ix", timeseries={"timeField": "t", "metaField": "k"})
    db.ix.create_index([("k.a", 1), ("v", 1)])
    for coll in (db.ix, db["system.buckets.ix"]):
        specs = list(coll.list_indexes())
        assert len(specs) == 2
        assert all(list(s)[:3] == ["v", "key", "name"] for s in specs), specs
    assert all("originalSpec" not in s for s in db.ix.list_indexes())


@pytest.mark.parametrize("how", ["update_many", "update_one", "find_one_and_update", "replace_one"])
def test_updating_measurements_of_closed_buckets_leaves_no_copy_of_their_old_values(db, how):
    # One bucket per hour and city, the earlier ones closed by the later ones: the updated
    # measurements go to new buckets, and the old buckets are rewritten without them (a
    # reopening must not bring back the old contents from before the rewrite).
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m", "granularity": "seconds"})
    t0 = datetime.datetime(2024, 1, 1)
    rows = [{"t": t0 + datetime.timedelta(hours=2 * h, minutes=i), "m": m, "w": w, "v": 10 * h + i}
            for h in range(3) for m in ("a", "b") for i, w in enumerate(("x", "y"))]
    db.ts.insert_many(rows)
    target = {"w": "x", "m": "a", "v": {"$lt": 20}}
    if how == "update_many":
        assert db.ts.update_many(target, {"$set": {"w": "X"}}).modified_count == 2
    elif how == "update_one":
        db.ts.update_one(target, {"$set": {"w": "X"}})
    elif how == "find_one_and_update":
        db.ts.find_one_and_update(target, {"$set": {"w": "X"}})
    else:
        old = db.ts.find_one(target, {"_id": 0})
        db.ts.replace_one(target, dict(old, w="X"))
    changed = 2 if how == "update_many" else 1
    assert db.ts.count_documents({}) == len(rows)
    assert db.ts.count_documents({"w": "X"}) == changed
    assert db.ts.count_documents({"w": "x"}) == 6 - changed


def reopened_bucket(db):
    """A time-series collection whose series "a" has an open bucket that was reopened: a
    change of a field's type closes the first bucket, and an earlier measurement reopens
    it (it is then stored closed too, with what it held)."""
    D = datetime.datetime
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m", "granularity": "hours"})
    db.ts.insert_many([{"t": D(2024, 1, 1, 14), "m": "a", "v": 7, "w": "q"},
                       {"t": D(2024, 1, 5, 2), "m": "a", "v": 0, "w": 3}])
    db.ts.insert_many([{"t": D(2024, 1, 1, 4), "m": "a", "v": 5, "w": "q"}])
    return db.ts


def test_a_meta_update_of_a_reopened_bucket_leaves_later_inserts_their_own_meta(db):
    ts = reopened_bucket(db)
    assert ts.update_many({"m": "a"}, {"$set": {"m": "z"}}).modified_count == 3
    ts.insert_one({"t": datetime.datetime(2024, 1, 1, 20), "m": "a", "v": 2})
    assert sorted((d["m"], d["v"]) for d in ts.find()) == [("a", 2), ("z", 0), ("z", 5), ("z", 7)]


def test_deleting_every_measurement_of_a_reopened_bucket_leaves_none_behind(db):
    ts = reopened_bucket(db)
    assert ts.delete_many({"w": "q"}).deleted_count == 2
    assert [d["v"] for d in ts.find()] == [0]
    ts.insert_one({"t": datetime.datetime(2024, 1, 1, 20), "m": "a", "v": 2, "w": "q"})
    assert sorted(d["v"] for d in ts.find()) == [0, 2]


def test_top_n_bottom_n_and_add_fields_through_arrays_agree_on_both_kinds(db):
    # #19 gap 14: the same documents in a regular and a time-series collection give the
    # same $topN/$bottomN groups and the same $addFields through arrays of documents.
    t0 = datetime.datetime(2026, 1, 1)
    docs = [{"t": t0 + datetime.timedelta(seconds=i), "m": {"h": f"h{i % 3}"}, "v": (i * 7) % 11,
             "arr": [{"x": i}, {"x": i + 1}, 5], "n": {"a": [1, {"b": i}]}} for i in range(30)]
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    db.ts.insert_many([dict(d) for d in docs])
    db.reg.insert_many([dict(d) for d in docs])
    pipelines = [
        [{"$group": {"_id": "$m.h",
                     "top": {"$topN": {"n": 3, "sortBy": {"v": -1, "t": 1}, "output": ["$v", "$t"]}},
                     "bottom": {"$bottomN": {"n": 2, "sortBy": {"v": -1, "t": 1}, "output": "$t"}},
                     "first": {"$top": {"sortBy": {"t": 1}, "output": "$arr"}}}},
         {"$sort": {"_id": 1}}],
        [{"$addFields": {"arr.y": "$v", "n.a.c": 1}}, {"$project": {"_id": 0}}, {"$sort": {"t": 1}}],
    ]
    for p in pipelines:
        assert list(db.ts.aggregate(p)) == list(db.reg.aggregate(p)), p
