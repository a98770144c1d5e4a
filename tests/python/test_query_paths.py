"""Reads of a time-series collection answer as reads of a regular collection holding the same
documents: projections, counts, explain and cursor batches, through pymongo."""

import datetime

import pytest

T0 = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture()
def db(client):
    name = "py_query_paths"
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)


def measurements(n=60):
    docs = []
    for i in range(n):
        d = {
            "_id": i,
            "t": T0 + datetime.timedelta(seconds=10 * i),
            "m": {"host": f"h{i % 3}", "c": i % 4},
            "usage": float(i % 17),
            "nested": {"a": i, "b": {"c": i % 5}},
        }
        if i % 5 == 0:
            d["arr"] = [i % 3 - 1, 5]
        elif i % 5 == 1:
            d["arr"] = 1
        docs.append(d)
    return docs


@pytest.fixture()
def both(db):
    """A regular and a time-series collection with the same documents."""
    docs = measurements()
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    db.ts.insert_many(docs)
    db.reg.insert_many(docs)
    return db.reg, db.ts


def by_id(docs):
    return sorted(docs, key=lambda d: d.get("_id", d.get("t")))


PROJECTIONS = [
    {"_id": 0},
    {"_id": 0, "usage": 1},
    {"usage": 1},
    {"usage": 0},
    {"nested.b.c": 1, "_id": 0},
    {"nested.b": 0},
    {"m.host": 1},
    {"x": {"$add": ["$usage", 1]}, "t": 1},
    {"_id": 0, "host": "$m.host", "usage": 1},
]


@pytest.mark.parametrize("projection", PROJECTIONS, ids=str)
def test_find_projection_gives_the_same_documents_on_both_kinds(both, projection):
    reg, ts = both
    for flt in ({}, {"m.host": "h1"}, {"usage": {"$gte": 3}}):
        expected = list(reg.find(flt, projection).sort("t", 1))
        got = list(ts.find(flt, projection).sort("t", 1))
        # (As dicts: a measurement's fields come back in the bucket's column order.)
        assert got == expected, (flt, projection)


def test_excluding_only_id_keeps_every_measurement_field(both):
    _, ts = both
    doc = ts.find_one({"_id": 7}, {"_id": 0})
    assert doc == {"t": (T0 + datetime.timedelta(seconds=70)).replace(tzinfo=None), "m": {"host": "h1", "c": 3},
                   "usage": 7.0, "nested": {"a": 7, "b": {"c": 2}}}
    with_meta_filter = ts.find_one({"m.host": "h1"}, {"_id": 0})
    assert {"t", "m", "usage", "nested"} <= set(with_meta_filter)
    agg = list(ts.aggregate([{"$match": {"m.host": "h2"}}, {"$project": {"_id": 0}}, {"$limit": 1}]))
    assert {"t", "m", "usage", "nested"} <= set(agg[0])


def test_count_with_meta_and_array_measurement_filter_agrees_with_regular(both):
    reg, ts = both
    flt = {"m.c": {"$gte": 2}, "arr": {"$gte": -1, "$lt": 2}}
    expected = reg.count_documents(flt)
    assert expected > 0
    assert ts.count_documents(flt) == expected
    assert len(list(ts.find(flt))) == expected
    assert ts.database.command("count", "ts", query=flt)["n"] == expected


def test_explain_of_find_on_timeseries_shows_the_bucket_unpack_and_real_counts(both):
    _, ts = both
    flt = {"m.host": "h1"}
    n = len(list(ts.find(flt)))
    plan = ts.find(flt).explain()
    unpack = [s for s in plan["stages"] if "$_internalUnpackBucket" in s]
    assert len(unpack) == 1
    # mongod prints a stage's counts next to its name, not in its spec.
    assert unpack[0]["nReturned"] == n
    assert unpack[0]["$_internalUnpackBucket"]["bucketFilter"]["meta"] == {"$and": [{"m.host": "h1"}]}
    assert plan["executionStats"]["nReturned"] == n
    assert plan["queryPlanner"]["namespace"] == "py_query_paths.system.buckets.ts"
    assert plan["command"]["find"] == "ts"


def test_explain_of_count_and_distinct_on_timeseries_read_the_buckets(both):
    _, ts = both
    db = ts.database
    flt = {"usage": {"$gte": 10}}
    n = ts.count_documents(flt)
    plan = db.command("explain", {"count": "ts", "query": flt}, verbosity="executionStats")
    unpack = next(s for s in plan["stages"] if "$_internalUnpackBucket" in s)
    assert unpack["nReturned"] == n
    assert any("$count" in s for s in plan["stages"])
    plan = db.command("explain", {"distinct": "ts", "key": "m.host", "query": {}})
    assert any("$_internalUnpackBucket" in s for s in plan["stages"])
    assert plan["executionStats"]["nReturned"] == 1


def test_explain_at_query_planner_verbosity_plans_the_timeseries_read_without_running_it(both):
    _, ts = both
    db = ts.database
    # The projection fails on any document, so only a run can fail.
    pipeline = [{"$match": {"m.host": "h1"}}, {"$project": {"x": {"$divide": [1, 0]}}}]
    with pytest.raises(Exception):
        list(ts.aggregate(pipeline))
    for plan in (db.command("explain", {"aggregate": "ts", "pipeline": pipeline, "cursor": {}},
                            verbosity="queryPlanner"),
                 db.command("aggregate", "ts", pipeline=pipeline, explain=True)):
        assert "executionStats" not in plan
        cursor = plan["stages"][0]["$cursor"]
        assert "executionStats" not in cursor and "queryPlanner" in cursor
        unpack = plan["stages"][1]["$_internalUnpackBucket"]
        assert "nReturned" not in unpack
        assert unpack["bucketFilter"]["meta"] == {"$and": [{"m.host": "h1"}]}
    with pytest.raises(Exception):
        db.command("explain", {"aggregate": "ts", "pipeline": pipeline, "cursor": {}},
                   verbosity="executionStats")


def test_explain_of_an_aggregate_on_a_regular_collection_counts_at_execution_stats(both):
    reg, _ = both
    db = reg.database
    reg.create_index("usage")
    pipeline = [{"$match": {"usage": {"$gte": 10}}}, {"$group": {"_id": "$m.host", "n": {"$sum": 1}}}]
    matched = reg.count_documents({"usage": {"$gte": 10}})
    groups = len(list(reg.aggregate(pipeline)))
    plan = db.command("explain", {"aggregate": "reg", "pipeline": pipeline, "cursor": {}},
                      verbosity="executionStats")
    cursor = plan["stages"][0]["$cursor"]
    stats = cursor["executionStats"]
    # The $cursor's executionStats are the read's (what it handed the $group), as mongod's.
    assert stats["nReturned"] == matched and plan["executionStats"]["nReturned"] == groups
    assert plan["stages"][1]["nReturned"] == groups
    assert stats["totalKeysExamined"] == matched and stats["totalDocsExamined"] == matched
    assert stats["executionStages"]["stage"] == "FETCH"
    assert stats["executionStages"]["inputStage"]["stage"] == "IXSCAN"
    assert cursor["queryPlanner"]["winningPlan"]["inputStage"]["stage"] == "IXSCAN"
    planned = db.command("explain", {"aggregate": "reg", "pipeline": pipeline, "cursor": {}},
                         verbosity="queryPlanner")
    assert "executionStats" not in planned
    assert "executionStats" not in planned["stages"][0]["$cursor"]
    simple = db.command("explain", {"aggregate": "reg", "pipeline": pipeline[:1], "cursor": {}},
                        verbosity="executionStats")
    assert simple["executionStats"]["nReturned"] == matched


def test_explain_lists_the_index_plans_it_rejected(db):
    c = db.plans
    c.insert_many([{"a": i % 10, "b": i % 7} for i in range(200)])
    for key in (["a"], ["b"], ["a", "b"]):
        c.create_index([(k, 1) for k in key])
    plan = c.find({"a": 5, "b": 3}).explain()["queryPlanner"]
    assert plan["winningPlan"]["inputStage"]["indexName"] == "a_1_b_1"
    rejected = sorted(p["inputStage"]["indexName"] for p in plan["rejectedPlans"])
    assert rejected == ["a_1", "b_1"]
    # A hint or an _id equality considers nothing else; no index, no alternatives.
    assert c.find({"a": 5, "b": 3}).hint("a_1").explain()["queryPlanner"]["rejectedPlans"] == []
    assert c.find({"_id": 1, "a": 5}).explain()["queryPlanner"]["rejectedPlans"] == []
    assert c.find({"z": 1}).explain()["queryPlanner"]["rejectedPlans"] == []


def test_explain_of_a_view_over_a_time_series_collection_names_the_buckets_it_reads(both):
    _, ts = both
    db = ts.database
    db.command("create", "hosts1", viewOn="ts", pipeline=[{"$match": {"m.host": "h1"}}])
    plan = db.command("explain", {"aggregate": "hosts1", "pipeline": [], "cursor": {}},
                      verbosity="queryPlanner")
    assert plan["queryPlanner"]["namespace"] == f"{db.name}.system.buckets.ts"


@pytest.mark.parametrize("kind", ["reg", "ts"])
def test_batch_size_zero_opens_a_cursor_with_an_empty_first_batch(both, kind):
    db = both[0].database
    for cmd in ({"find": kind, "batchSize": 0}, {"aggregate": kind, "pipeline": [], "cursor": {"batchSize": 0}}):
        reply = db.command(cmd)
        assert reply["cursor"]["firstBatch"] == []
        assert reply["cursor"]["id"] != 0
        more = db.command("getMore", reply["cursor"]["id"], collection=kind)
        assert len(more["cursor"]["nextBatch"]) == 60
        assert more["cursor"]["id"] == 0


def test_aggregate_raw_batches_read_a_timeseries_collection(both):
    _, ts = both
    from bson import decode_all

    docs = []
    for batch in ts.aggregate_raw_batches([{"$match": {"m.host": "h0"}}, {"$project": {"_id": 1}}]):
        docs.extend(decode_all(batch))
    assert sorted(d["_id"] for d in docs) == list(range(0, 60, 3))


def test_pymongoarrow_reads_a_timeseries_collection_into_a_table(both):
    try:
        from pymongoarrow.api import aggregate_arrow_all
    except ImportError as e:
        pytest.skip(f"pymongoarrow is not installed: {e}")
    _, ts = both
    table = aggregate_arrow_all(ts, [{"$match": {"m.host": "h2"}}, {"$project": {"_id": 1, "usage": 1}}])
    assert table.num_rows == 20
    assert sorted(table.column("_id").to_pylist()) == list(range(2, 60, 3))
    assert sum(table.column("usage").to_pylist()) == sum(float(i % 17) for i in range(2, 60, 3))


def test_measurements_before_1970_in_stored_buckets_are_found_by_time(db):
    db.create_collection("old", timeseries={"timeField": "t", "metaField": "m"})
    early = datetime.datetime(1969, 12, 31, 22, 50, 7, tzinfo=datetime.timezone.utc)
    late = datetime.datetime(2020, 12, 31, tzinfo=datetime.timezone.utc)
    # The later measurement closes the 1969 bucket, which is then stored.
    db.old.insert_many([{"_id": 1, "t": early, "m": 1, "v": 1}, {"_id": 2, "t": late, "m": 1, "v": 2}])
    for flt in ({"t": early}, {"t": {"$lte": early}}, {"t": {"$lt": datetime.datetime(1970, 1, 1)}}):
        assert [d["_id"] for d in db.old.find(flt)] == [1], flt
        assert db.old.count_documents(flt) == 1, flt


def test_max_time_ms_stops_multi_updates_and_deletes_before_anything_changes(db):
    db.reg.insert_many([{"_id": i, "a": i, "s": "x" * 50} for i in range(30000)])
    db.create_collection("tsw", timeseries={"timeField": "t", "metaField": "m"})
    db.tsw.insert_many([{"t": T0 + datetime.timedelta(seconds=i), "m": i % 20, "a": i} for i in range(30000)])
    slow = {"$expr": {"$gt": [{"$strLenCP": {"$concat": ["$s", "$s", "$s"]}}, 1]}}
    replies = [
        db.command("update", "reg", updates=[{"q": slow, "u": {"$inc": {"a": 1}}, "multi": True}], maxTimeMS=1),
        db.command("delete", "reg", deletes=[{"q": slow, "limit": 0}], maxTimeMS=1),
        db.command("update", "tsw", updates=[{"q": {"a": {"$gte": 0}}, "u": {"$inc": {"a": 1}}, "multi": True}],
                   maxTimeMS=1),
        db.command("delete", "tsw", deletes=[{"q": {"a": {"$gte": 0}}, "limit": 0}], maxTimeMS=1),
    ]
    for reply in replies:
        assert reply["n"] == 0, reply
        assert [(e["index"], e["code"], e["codeName"]) for e in reply["writeErrors"]] == [(0, 50, "MaxTimeMSExpired")]
    assert db.reg.count_documents({}) == 30000
    assert db.reg.find_one({"_id": 7})["a"] == 7
    assert db.tsw.count_documents({}) == 30000
    assert db.tsw.count_documents({"a": 30000}) == 0
