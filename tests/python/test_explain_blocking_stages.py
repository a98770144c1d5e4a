"""How explain shows sorts and groups, as MongoDB 7.0 prints them (the aggregation pipeline
optimization page: $sort + $limit coalescence, $skip + $limit sequence, $limit + $limit and
$skip + $skip coalescence; jstests explain_sort_stage_exec_stats.js): a `$sort` stage shows
its `sortKey` and the limit it took in, and at executionStats every blocking sort reports
the bytes it sorted and whether it spilled to disk; a `$group` its accumulators' memory,
the bytes it output and its spills."""

import datetime

import bson
import pytest
from bson.int64 import Int64
from pymongo.errors import OperationFailure

SMALL_SORT_MEMORY = 5000


def explain(db, cmd, verbosity="executionStats"):
    return db.command("explain", cmd, verbosity=verbosity)


def later_stages(out):
    """The stages after the read ($cursor, and a time-series collection's unpacking)."""
    return [s for s in out["stages"] if not ({"$cursor", "$_internalUnpackBucket"} & s.keys())]


def seed(db, timeseries):
    if timeseries:
        db.create_collection("c", timeseries={"timeField": "t", "metaField": "m"})
    t0 = datetime.datetime(2024, 1, 1)
    db.c.insert_many(
        [{"t": t0 + datetime.timedelta(minutes=i), "m": i % 3, "a": i % 7, "big": "," * 1024}
         for i in range(60)]
    )


@pytest.fixture
def low_sort_memory(client):
    was = client.admin.command(
        {"setParameter": 1, "internalQueryMaxBlockingSortMemoryUsageBytes": SMALL_SORT_MEMORY}
    )["was"]
    yield
    client.admin.command({"setParameter": 1, "internalQueryMaxBlockingSortMemoryUsageBytes": was})


@pytest.mark.parametrize("timeseries", [False, True])
@pytest.mark.parametrize("verbosity", ["queryPlanner", "executionStats"])
def test_a_sort_shows_its_sort_key_and_takes_in_the_limit_after_a_skip(db, timeseries, verbosity):
    seed(db, timeseries)
    pipeline = [
        {"$group": {"_id": "$a", "n": {"$sum": 1}}},
        {"$sort": {"_id": -1}},
        {"$skip": 2},
        {"$limit": 3},
        {"$skip": 1},
    ]
    out = explain(db, {"aggregate": "c", "pipeline": pipeline, "cursor": {}}, verbosity)
    stages = later_stages(out)
    assert [next(iter(s)) for s in stages] == ["$group", "$sort", "$skip"]
    # $skip 2, $limit 3 is $limit 5, $skip 2; the two skips add up; the sort takes the limit.
    assert stages[1]["$sort"] == {"sortKey": {"_id": -1}, "limit": 5}
    assert isinstance(stages[1]["$sort"]["limit"], Int64)
    assert stages[2]["$skip"] == 3 and isinstance(stages[2]["$skip"], Int64)
    if verbosity == "executionStats":
        # Seven groups, the five first sorted, three of them skipped.
        assert [s["nReturned"] for s in stages] == [7, 5, 2]
    # The explained pipeline still answers as written.
    got = [d["_id"] for d in db.c.aggregate(pipeline)]
    assert got == [3, 2]


def test_consecutive_limits_keep_the_smallest_and_a_lone_limit_is_64_bit(db):
    seed(db, False)
    pipeline = [{"$group": {"_id": "$a"}}, {"$limit": 4}, {"$limit": 2}]
    stages = later_stages(explain(db, {"aggregate": "c", "pipeline": pipeline, "cursor": {}}))
    assert stages[1] == {"$limit": 2, "nReturned": 2, "executionTimeMillisEstimate": stages[1]["executionTimeMillisEstimate"]}
    assert isinstance(stages[1]["$limit"], Int64)


@pytest.mark.parametrize("timeseries", [False, True])
def test_a_pipeline_sort_reports_bytes_sorted_and_no_spill_within_its_memory(db, timeseries):
    seed(db, timeseries)
    pipeline = [{"$addFields": {"k": {"$multiply": ["$a", -1]}}}, {"$sort": {"k": 1}}]
    stages = later_stages(explain(db, {"aggregate": "c", "pipeline": pipeline, "cursor": {}}))
    sort = stages[-1]
    assert list(sort)[:5] == [
        "$sort", "totalDataSizeSortedBytesEstimate", "usedDisk", "spills", "spilledDataStorageSize"
    ]
    assert sort["totalDataSizeSortedBytesEstimate"] > 60 * 1024
    assert (sort["usedDisk"], sort["spills"], sort["spilledDataStorageSize"]) == (False, 0, 0)
    assert sort["nReturned"] == 60


def test_a_pipeline_sort_past_its_memory_limit_reports_its_spills(db, low_sort_memory):
    seed(db, False)
    pipeline = [{"$group": {"_id": "$t", "big": {"$first": "$big"}}}, {"$sort": {"_id": -1}}]
    cmd = {"aggregate": "c", "pipeline": pipeline, "cursor": {}, "allowDiskUse": True}
    sort = later_stages(explain(db, cmd))[-1]
    assert sort["usedDisk"] is True
    assert sort["spills"] > 0 and sort["spilledDataStorageSize"] > 0
    cmd["allowDiskUse"] = False
    with pytest.raises(OperationFailure) as e:
        explain(db, cmd)
    assert e.value.code == 292


@pytest.mark.parametrize("command", ["find", "aggregate"])
def test_a_blocking_sort_stage_of_a_read_reports_its_spills(db, low_sort_memory, command):
    seed(db, False)
    if command == "find":
        cmd = {"find": "c", "sort": {"a": -1}, "allowDiskUse": True}
    else:
        cmd = {"aggregate": "c", "pipeline": [{"$sort": {"a": -1}}], "cursor": {},
               "allowDiskUse": True}
    out = explain(db, cmd)
    sort = out["executionStats"]["executionStages"]
    assert sort["stage"] == "SORT"
    assert sort["memLimit"] == SMALL_SORT_MEMORY
    assert sort["nReturned"] == 60
    assert sort["totalDataSizeSorted"] > 60 * 1024
    assert sort["usedDisk"] is True and sort["spills"] > 0
    assert sort["spilledDataStorageSize"] > 0
    assert sort["inputStage"]["stage"] == "COLLSCAN"
    # The find's own allowDiskUse: false makes the explained sort fail as the find would.
    cmd["allowDiskUse"] = False
    with pytest.raises(OperationFailure) as e:
        explain(db, cmd)
    assert e.value.code == 292


def test_a_sort_within_memory_reports_no_spill(db):
    seed(db, False)
    out = explain(db, {"find": "c", "filter": {"a": {"$gt": 3}}, "sort": {"a": 1}})
    sort = out["executionStats"]["executionStages"]
    assert sort["stage"] == "SORT"
    keys = list(sort)
    at = keys.index("type")
    assert keys[at + 1:at + 6] == [
        "totalDataSizeSorted", "usedDisk", "spills", "spilledDataStorageSize", "inputStage"
    ]
    assert (sort["usedDisk"], sort["spills"]) == (False, 0)
    assert sort["nReturned"] == sort["inputStage"]["nReturned"] == 24


@pytest.fixture
def low_group_memory(client):
    name = "internalDocumentSourceGroupMaxMemoryBytes"
    was = client.admin.command({"setParameter": 1, name: 4096})["was"]
    yield
    client.admin.command({"setParameter": 1, name: was})


@pytest.mark.parametrize("timeseries", [False, True])
def test_a_group_reports_its_accumulators_memory_and_output_bytes(db, timeseries):
    seed(db, timeseries)
    pipeline = [{"$addFields": {"k": "$a"}},
                {"$group": {"_id": "$k", "n": {"$sum": 1}, "all": {"$push": "$a"}}}]
    group = later_stages(explain(db, {"aggregate": "c", "pipeline": pipeline, "cursor": {}}))[-1]
    assert list(group)[:8] == [
        "$group", "maxAccumulatorMemoryUsageBytes", "totalOutputDataSizeBytes", "usedDisk",
        "spills", "spilledDataStorageSize", "numBytesSpilledEstimate", "spilledRecords",
    ]
    memory = group["maxAccumulatorMemoryUsageBytes"]
    assert list(memory) == ["n", "all"]
    # Sixty pushed values hold more than seven counts.
    assert memory["all"] > memory["n"] > 0
    out = list(db.c.aggregate(pipeline))
    assert group["totalOutputDataSizeBytes"] == sum(len(bson.encode(d)) for d in out)
    assert (group["usedDisk"], group["spills"], group["spilledRecords"]) == (False, 0, 0)
    assert group["nReturned"] == 7


def test_a_group_past_its_memory_limit_reports_its_spills(db, low_group_memory):
    seed(db, False)
    pipeline = [{"$group": {"_id": "$t", "big": {"$first": "$big"}}}]
    cmd = {"aggregate": "c", "pipeline": pipeline, "cursor": {}, "allowDiskUse": True}
    group = later_stages(explain(db, cmd))[-1]
    assert group["usedDisk"] is True
    assert group["spills"] > 0 and group["spilledRecords"] > 0
    assert group["spilledDataStorageSize"] > 0
    assert group["nReturned"] == 60


def test_stages_a_time_series_scan_absorbs_report_what_they_hold(db):
    """A vectorized $group and a columnar $sort run inside the bucket scan; explain still
    reports them as mongod reports its $group and $sort."""
    seed(db, True)
    group = [{"$group": {"_id": "$m", "n": {"$sum": 1}, "top": {"$max": "$a"}}}]
    stage = later_stages(explain(db, {"aggregate": "c", "pipeline": group, "cursor": {}}))[-1]
    assert "$group" in stage
    assert list(stage["maxAccumulatorMemoryUsageBytes"]) == ["n", "top"]
    out = list(db.c.aggregate(group))
    assert stage["totalOutputDataSizeBytes"] == sum(len(bson.encode(d)) for d in out)
    assert (stage["usedDisk"], stage["spills"], stage["nReturned"]) == (False, 0, 3)

    sort = [{"$project": {"_id": 0, "a": 1, "m": 1}}, {"$sort": {"a": -1, "m": 1}}]
    stages = later_stages(explain(db, {"aggregate": "c", "pipeline": sort, "cursor": {}}))
    assert stages[-1]["$sort"] == {"sortKey": {"a": -1, "m": 1}}
    out = list(db.c.aggregate(sort))
    assert stages[-1]["totalDataSizeSortedBytesEstimate"] == sum(len(bson.encode(d)) for d in out)
    assert (stages[-1]["usedDisk"], stages[-1]["nReturned"]) == (False, 60)


def test_an_explained_find_reads_its_allow_disk_use_as_the_find_does(db, low_sort_memory):
    seed(db, False)
    cmd = {"find": "c", "sort": {"a": -1}, "allowDiskUse": 0}
    with pytest.raises(OperationFailure) as e:
        db.command(cmd)
    assert e.value.code == 292
    with pytest.raises(OperationFailure) as e:
        explain(db, cmd)
    assert e.value.code == 292
    cmd["allowDiskUse"] = "yes"
    with pytest.raises(OperationFailure) as e:
        explain(db, cmd)
    assert (e.value.code, e.value.details["codeName"]) == (14, "TypeMismatch")
