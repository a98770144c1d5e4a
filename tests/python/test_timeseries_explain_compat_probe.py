"""Explain of reads of time-series collections, and of aggregates on regular ones, in the
shape MongoDB 7.0 gives them (pymongo). Facts followed:

- A read of a time-series collection (aggregate, and find/count/distinct, which run as
  aggregations over the view) is explained as a pipeline over `<db>.system.buckets.<coll>`:
  a `$cursor` stage (COLLSCAN, or FETCH over IXSCAN, with the bucket-level filter) and
  then `$_internalUnpackBucket`.
- `$_internalUnpackBucket` serializes `include` or `exclude` first, then `timeField`,
  `metaField`, `bucketMaxSpanSeconds`, `assumeNoMixedSchemaData` (collections created by
  7.0 hold no mixed-schema buckets), then `wholeBucketFilter` and `eventFilter` when there
  are any (document_source_internal_unpack_bucket.cpp). Predicates on the meta field are
  rewritten onto the buckets' `meta` and leave the event filter; a comparison on the time
  field also gives a `wholeBucketFilter` on `control.min`/`control.max`
  (jstests/core/timeseries/timeseries_match_pushdown.js).
- At executionStats every stage document of `stages` carries `nReturned` and
  `executionTimeMillisEstimate` (64-bit) next to its stage name (pipeline.cpp
  appendCommonExecStats; DOCS-13259); the `$cursor` stage's `executionStats` is the
  read's, with the per-stage counters of the access path (works, advanced, ...).
"""
import datetime

import pytest
from bson.int64 import Int64

BASE = datetime.datetime(2024, 1, 1)


@pytest.fixture
def ts(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    db.ts.insert_many([{"t": BASE + datetime.timedelta(minutes=i), "m": i % 2, "v": i}
                       for i in range(10)])
    return db.ts


def explain(db, cmd, verbosity="executionStats"):
    return db.command("explain", cmd, verbosity=verbosity)


def unpack_of(plan):
    [stage] = [s for s in plan["stages"] if "$_internalUnpackBucket" in s]
    return stage


def test_a_timeseries_aggregate_is_explained_as_a_cursor_over_the_buckets_then_the_unpacking(ts):
    db = ts.database
    plan = explain(db, {"aggregate": "ts", "pipeline": [{"$match": {"v": {"$gt": 3}}}], "cursor": {}})
    assert list(plan["stages"][0])[0] == "$cursor"
    assert list(plan["stages"][1])[0] == "$_internalUnpackBucket"
    planner = plan["stages"][0]["$cursor"]["queryPlanner"]
    assert planner["namespace"] == f"{db.name}.system.buckets.ts"
    assert planner["winningPlan"]["stage"] in ("COLLSCAN", "FETCH")


def test_the_unpack_stage_lists_what_it_unpacks_first_then_the_time_meta_and_span(ts):
    plan = explain(ts.database, {"find": "ts", "filter": {}})
    spec = unpack_of(plan)["$_internalUnpackBucket"]
    assert list(spec)[:5] == ["exclude", "timeField", "metaField", "bucketMaxSpanSeconds",
                              "assumeNoMixedSchemaData"]
    assert spec["exclude"] == []
    assert (spec["timeField"], spec["metaField"]) == ("t", "m")
    assert spec["bucketMaxSpanSeconds"] == 3600 and not isinstance(spec["bucketMaxSpanSeconds"], Int64)
    assert spec["assumeNoMixedSchemaData"] is True


def test_a_pipeline_reading_some_fields_unpacks_only_those_as_include(ts):
    plan = explain(ts.database, {"aggregate": "ts", "pipeline": [{"$group": {"_id": "$m", "s": {"$sum": "$v"}}}],
                                 "cursor": {}})
    spec = unpack_of(plan)["$_internalUnpackBucket"]
    assert list(spec)[0] == "include"
    assert set(spec["include"]) == {"m", "v"}


def test_the_event_filter_keeps_measurement_predicates_and_meta_ones_go_to_the_buckets(ts):
    plan = explain(ts.database, {"aggregate": "ts", "pipeline": [{"$match": {"v": {"$gt": 3}, "m": 1}}],
                                 "cursor": {}})
    spec = unpack_of(plan)["$_internalUnpackBucket"]
    assert spec["eventFilter"] == {"v": {"$gt": 3}}
    assert "wholeBucketFilter" not in spec
    planner = plan["stages"][0]["$cursor"]["queryPlanner"]
    parsed = planner["parsedQuery"]
    assert {"meta": {"$eq": 1}} in parsed["$and"]
    assert {"control.max.v": {"$_internalExprGt": 3}} in parsed["$and"]
    # The default {m: 1, t: 1} index reads the buckets of meta 1; the FETCH filters the rest.
    winning = planner["winningPlan"]
    assert (winning["stage"], winning["inputStage"]["stage"]) == ("FETCH", "IXSCAN")
    assert winning["inputStage"]["indexBounds"]["meta"] == ["[1, 1]"]
    assert winning["filter"] == {"control.max.v": {"$_internalExprGt": 3}}


def test_without_a_measurement_predicate_there_is_no_event_filter(ts):
    for flt in ({}, {"m": 1}):
        plan = explain(ts.database, {"find": "ts", "filter": flt}, "queryPlanner")
        spec = unpack_of(plan)["$_internalUnpackBucket"]
        assert "eventFilter" not in spec and "wholeBucketFilter" not in spec, flt
    plan = explain(ts.database, {"find": "ts", "filter": {}}, "queryPlanner")
    winning = plan["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]
    assert winning == {"stage": "COLLSCAN", "direction": "forward"}


def test_a_time_bound_gives_a_whole_bucket_filter_on_the_control_min(ts):
    plan = explain(ts.database, {"find": "ts", "filter": {"t": {"$gte": BASE}}})
    spec = unpack_of(plan)["$_internalUnpackBucket"]
    assert spec["eventFilter"] == {"t": {"$gte": BASE}}
    assert spec["wholeBucketFilter"] == {"control.min.t": {"$gte": BASE}}
    parsed = plan["stages"][0]["$cursor"]["queryPlanner"]["parsedQuery"]
    assert {"control.max.t": {"$_internalExprGte": BASE}} in parsed["$and"]
    plan = explain(ts.database, {"find": "ts", "filter": {"t": {"$lt": BASE}}})
    assert unpack_of(plan)["$_internalUnpackBucket"]["wholeBucketFilter"] == {"control.max.t": {"$lt": BASE}}


def test_every_timeseries_stage_carries_nreturned_and_its_time_at_execution_stats(ts):
    pipeline = [{"$match": {"v": {"$gte": 5}}}, {"$group": {"_id": "$m", "n": {"$sum": 1}}},
                {"$sort": {"_id": 1}}]
    plan = explain(ts.database, {"aggregate": "ts", "pipeline": pipeline, "cursor": {}})
    stages = plan["stages"]
    assert [list(s)[0] for s in stages] == ["$cursor", "$_internalUnpackBucket", "$group", "$sort"]
    for s in stages:
        assert isinstance(s["nReturned"], Int64), s
        assert isinstance(s["executionTimeMillisEstimate"], Int64), s
    unpack = stages[1]
    assert unpack["nReturned"] == 5
    assert "nReturned" not in unpack["$_internalUnpackBucket"]
    assert stages[2]["nReturned"] == 2 and stages[3]["nReturned"] == 2
    cursor = stages[0]
    assert cursor["nReturned"] == cursor["$cursor"]["executionStats"]["nReturned"] >= 1


def test_stage_counts_are_left_out_at_query_planner_verbosity(ts):
    pipeline = [{"$match": {"v": {"$gte": 5}}}, {"$group": {"_id": "$m"}}]
    plan = explain(ts.database, {"aggregate": "ts", "pipeline": pipeline, "cursor": {}}, "queryPlanner")
    for s in plan["stages"]:
        assert "nReturned" not in s and "executionTimeMillisEstimate" not in s, s
    assert "executionStats" not in plan["stages"][0]["$cursor"]
    assert [list(s)[0] for s in plan["stages"]] == ["$cursor", "$_internalUnpackBucket", "$group"]


def test_the_bucket_scan_reports_the_access_path_counters(ts):
    plan = explain(ts.database, {"find": "ts", "filter": {"v": {"$gte": 0}}})
    stats = plan["stages"][0]["$cursor"]["executionStats"]
    scan = stats["executionStages"]
    assert scan["stage"] == "COLLSCAN"
    for k in ("works", "advanced", "needTime", "needYield", "saveState", "restoreState", "isEOF",
              "executionTimeMillisEstimate", "docsExamined"):
        assert k in scan, k
    assert scan["nReturned"] == scan["advanced"] == stats["nReturned"]
    assert scan["docsExamined"] == stats["totalDocsExamined"] >= scan["nReturned"]
    assert scan["works"] == scan["docsExamined"] + 1 and scan["isEOF"] == 1
    assert unpack_of(plan)["nReturned"] == 10


@pytest.mark.parametrize("cmd,last", [
    ({"find": "ts", "filter": {"v": {"$lt": 4}}}, None),
    ({"count": "ts", "query": {"v": {"$lt": 4}}}, "$count"),
    ({"distinct": "ts", "key": "m", "query": {"v": {"$lt": 4}}}, "$group"),
])
def test_find_count_and_distinct_explain_as_aggregations_over_the_buckets(ts, cmd, last):
    plan = explain(ts.database, cmd)
    assert plan["stages"][0]["$cursor"]["queryPlanner"]["namespace"] == f"{ts.database.name}.system.buckets.ts"
    unpack = unpack_of(plan)
    assert unpack["$_internalUnpackBucket"]["eventFilter"] == {"v": {"$lt": 4}}
    assert unpack["nReturned"] == 4
    if last:
        assert list(plan["stages"][-1])[0] == last
        assert plan["stages"][-1]["nReturned"] == 1


@pytest.fixture
def reg(db):
    db.r.insert_many([{"_id": i, "a": i % 3, "b": i} for i in range(10)])
    db.r.create_index("a")
    return db.r


def test_a_regular_aggregate_cursor_carries_the_find_access_counters(reg):
    pipeline = [{"$match": {"a": 1}}, {"$group": {"_id": "$a", "n": {"$sum": 1}}}]
    plan = explain(reg.database, {"aggregate": "r", "pipeline": pipeline, "cursor": {}})
    cursor = plan["stages"][0]
    stats = cursor["$cursor"]["executionStats"]
    fetch = stats["executionStages"]
    assert fetch["stage"] == "FETCH" and fetch["inputStage"]["stage"] == "IXSCAN"
    for k in ("works", "advanced", "needTime", "needYield", "saveState", "restoreState", "isEOF",
              "executionTimeMillisEstimate", "alreadyHasObj"):
        assert k in fetch, k
    ixscan = fetch["inputStage"]
    for k in ("works", "advanced", "seeks", "dupsTested", "dupsDropped", "keysExamined"):
        assert k in ixscan, k
    assert ixscan["works"] == ixscan["keysExamined"] + 1 == 4
    # The $cursor returns the documents the read found; the $group what it grouped.
    assert stats["nReturned"] == cursor["nReturned"] == 3
    assert plan["stages"][1]["nReturned"] == 1
    for s in plan["stages"]:
        assert isinstance(s["executionTimeMillisEstimate"], Int64), s


def test_a_regular_aggregate_counts_each_later_stage(reg):
    pipeline = [{"$match": {"b": {"$gte": 2}}}, {"$project": {"a": 1}}, {"$limit": 5},
                {"$group": {"_id": "$a"}}]
    plan = explain(reg.database, {"aggregate": "r", "pipeline": pipeline, "cursor": {}})
    for s in plan["stages"]:
        assert isinstance(s["nReturned"], Int64) and isinstance(s["executionTimeMillisEstimate"], Int64), s
    assert list(plan["stages"][-1])[0] == "$group" and plan["stages"][-1]["nReturned"] == 3
    assert plan["stages"][0]["nReturned"] >= 5
    planned = explain(reg.database, {"aggregate": "r", "pipeline": pipeline, "cursor": {}}, "queryPlanner")
    for s in planned["stages"]:
        assert "nReturned" not in s and "executionTimeMillisEstimate" not in s, s


def test_a_sort_and_group_read_by_distinct_scan_counts_each_stage(reg):
    pipeline = [{"$sort": {"a": 1}}, {"$group": {"_id": "$a", "first": {"$first": "$b"}}}]
    plan = explain(reg.database, {"aggregate": "r", "pipeline": pipeline, "cursor": {}})
    cursor = plan["stages"][0]
    winning = cursor["$cursor"]["queryPlanner"]["winningPlan"]
    assert "DISTINCT_SCAN" in str(winning)
    assert cursor["nReturned"] == cursor["$cursor"]["executionStats"]["nReturned"] >= 3
    assert list(plan["stages"][-1])[0] == "$group" and plan["stages"][-1]["nReturned"] == 3
    for s in plan["stages"]:
        assert isinstance(s["executionTimeMillisEstimate"], Int64), s


@pytest.mark.parametrize("coll", ["ts", "r"])
def test_an_aggregate_with_explain_true_ends_with_the_server_sections(ts, reg, coll):
    db = ts.database
    reply = db.command("aggregate", coll, pipeline=[{"$match": {"m": 1}}, {"$group": {"_id": "$m"}}],
                       explain=True)
    assert reply["command"]["aggregate"] == coll
    assert {"host", "port", "version"} <= set(reply["serverInfo"])
    assert "internalQueryFrameworkControl" in reply["serverParameters"]
    for s in reply["stages"]:
        assert "nReturned" not in s


@pytest.mark.parametrize("coll", ["ts", "r"])
def test_at_all_plans_execution_the_cursor_stats_list_the_plans_run(ts, reg, coll):
    pipeline = [{"$match": {"m": 1}}, {"$group": {"_id": "$m"}}]
    plan = explain(ts.database, {"aggregate": coll, "pipeline": pipeline, "cursor": {}}, "allPlansExecution")
    assert plan["stages"][0]["$cursor"]["executionStats"]["allPlansExecution"] == []
    plan = explain(ts.database, {"aggregate": coll, "pipeline": pipeline, "cursor": {}})
    assert "allPlansExecution" not in plan["stages"][0]["$cursor"]["executionStats"]
