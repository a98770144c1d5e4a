"""allowDiskUse as MongoDB 7.0 has it: blocking `$sort` and `$group` (aggregate) and a
find's blocking sort spill to temporary files under the dbpath's `_tmp` when they pass
their memory limit, by default (`allowDiskUseByDefault: true`); `allowDiskUse: false`
(or the parameter turned off) fails them with 292 instead. The answers equal the ones
computed in memory, the files are gone once the cursor is, serverStatus counts the
spills, and files a crash left in `_tmp` are removed at startup.
"""

import datetime
import random
from pathlib import Path

import pytest
from pymongo import ASCENDING, DESCENDING, MongoClient
from pymongo.errors import OperationFailure

from conftest import running_server

LIMIT = 20_000
N = 3_000


@pytest.fixture(scope="module")
def srv():
    """A server of its own (its memory limits are lowered) with its dbpath known."""
    with running_server() as (_, port, log_path):
        dbpath = Path(log_path).parent / "db"
        c = MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=5000)
        c.admin.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=LIMIT,
                        internalDocumentSourceGroupMaxMemoryBytes=LIMIT)
        db = c.disk_use
        rng = random.Random(7)
        t0 = datetime.datetime(2024, 1, 1)
        docs = [{"_id": i, "v": rng.randint(0, 400), "k": rng.randint(0, 900),
                 "pad": "x" * rng.randint(0, 40),
                 "t": t0 + datetime.timedelta(seconds=i), "m": {"h": i % 5}} for i in range(N)]
        db.reg.insert_many(docs)
        db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
        db.ts.insert_many(docs)
        yield c, db, dbpath, docs
        c.close()


def spills(c):
    return c.admin.command("serverStatus")["metrics"]["query"]["sort"]["spillToDisk"]


def temp_files(dbpath):
    tmp = dbpath / "_tmp"
    return sorted(p.name for p in tmp.iterdir()) if tmp.exists() else []


def by_v_then_id(docs):
    return [d["_id"] for d in sorted(docs, key=lambda d: (d["v"], d["_id"]))]


@pytest.mark.parametrize("coll", ["reg", "ts"])
def test_a_sort_past_its_memory_limit_spills_by_default_and_answers_in_order(srv, coll):
    c, db, dbpath, docs = srv
    before = spills(c)
    out = [d["_id"] for d in db[coll].aggregate([{"$sort": {"v": 1, "_id": 1}}])]
    assert out == by_v_then_id(docs)
    assert spills(c) > before + 3
    assert temp_files(dbpath) == []


@pytest.mark.parametrize("coll", ["reg", "ts"])
def test_a_spilled_sort_keeps_input_order_among_equal_keys_descending(srv, coll):
    c, db, _, docs = srv
    scan = [d["_id"] for d in db[coll].aggregate([{"$match": {}}])]
    out = [d["_id"] for d in db[coll].aggregate([{"$sort": {"v": -1}}])]
    rank = {i: n for n, i in enumerate(scan)}
    v = {d["_id"]: d["v"] for d in docs}
    assert out == sorted(scan, key=lambda i: (-v[i], rank[i]))


@pytest.mark.parametrize("coll", ["reg", "ts"])
def test_allow_disk_use_false_fails_a_sort_past_its_limit_with_292(srv, coll):
    _, db, _, _ = srv
    with pytest.raises(OperationFailure) as e:
        list(db[coll].aggregate([{"$sort": {"v": 1}}], allowDiskUse=False))
    assert e.value.code == 292
    assert e.value.details["codeName"] == "QueryExceededMemoryLimitNoDiskUseAllowed"


@pytest.mark.parametrize("coll", ["reg", "ts"])
def test_a_group_past_its_memory_limit_spills_and_equals_the_group_in_python(srv, coll):
    c, db, dbpath, docs = srv
    before = spills(c)
    out = list(db[coll].aggregate([
        {"$group": {"_id": "$k", "ids": {"$push": "$_id"}, "first": {"$first": "$_id"},
                    "last": {"$last": "$_id"}, "n": {"$sum": 1}, "top": {"$max": "$v"}}}]))
    # The order a collection gives its documents in is the order the group sees them.
    scan = list(db[coll].aggregate([{"$match": {}}]))
    expected = {}
    for d in scan:
        g = expected.setdefault(d["k"], {"_id": d["k"], "ids": [], "first": d["_id"],
                                         "n": 0, "top": d["v"]})
        g["ids"].append(d["_id"])
        g["last"], g["n"], g["top"] = d["_id"], g["n"] + 1, max(g["top"], d["v"])
    assert sorted(out, key=lambda g: g["_id"]) == [
        {k: g[k] for k in ("_id", "ids", "first", "last", "n", "top")}
        for g in sorted(expected.values(), key=lambda g: g["_id"])]
    assert spills(c) > before
    assert temp_files(dbpath) == []
    with pytest.raises(OperationFailure) as e:
        list(db[coll].aggregate([{"$group": {"_id": "$k", "ids": {"$push": "$_id"}}}],
                                allowDiskUse=False))
    assert e.value.code == 292


def test_allow_disk_use_by_default_false_makes_the_option_needed_again(srv):
    c, db, _, docs = srv
    c.admin.command("setParameter", 1, allowDiskUseByDefault=False)
    try:
        assert c.admin.command("getParameter", 1, allowDiskUseByDefault=1)[
            "allowDiskUseByDefault"] is False
        with pytest.raises(OperationFailure) as e:
            list(db.reg.aggregate([{"$sort": {"v": 1}}]))
        assert e.value.code == 292
        with pytest.raises(OperationFailure) as e:
            list(db.reg.find().sort("v", ASCENDING))
        assert e.value.code == 292
        out = [d["_id"] for d in db.reg.aggregate([{"$sort": {"v": 1, "_id": 1}}],
                                                  allowDiskUse=True)]
        assert out == by_v_then_id(docs)
    finally:
        c.admin.command("setParameter", 1, allowDiskUseByDefault=True)


@pytest.mark.parametrize("coll", ["reg", "ts"])
def test_a_find_sort_past_the_limit_spills_unless_allow_disk_use_is_false(srv, coll):
    c, db, dbpath, docs = srv
    before = spills(c)
    out = [d["_id"] for d in db[coll].find({}, {"v": 1}).sort([("v", ASCENDING), ("_id", ASCENDING)])]
    assert out == by_v_then_id(docs)
    assert spills(c) > before
    assert temp_files(dbpath) == []
    with pytest.raises(OperationFailure) as e:
        list(db[coll].find().sort("v", DESCENDING).allow_disk_use(False))
    assert e.value.code == 292


@pytest.mark.parametrize("how", ["find", "aggregate"])
def test_an_abandoned_spilled_cursor_leaves_no_file_once_killed(srv, how):
    c, db, dbpath, _ = srv
    cur = (db.reg.find().sort("v", ASCENDING).batch_size(2) if how == "find"
           else db.reg.aggregate([{"$match": {}}, {"$sort": {"v": 1}}], batchSize=2))
    next(cur)
    assert temp_files(dbpath) != []  # the runs are read as the cursor goes
    cur.close()
    assert temp_files(dbpath) == []


def test_files_a_crash_left_in_tmp_are_removed_at_startup(tmp_path):
    dbpath = tmp_path / "db"
    (dbpath / "_tmp").mkdir(parents=True)
    (dbpath / "_tmp" / "extsort-left-by-a-crash").write_bytes(b"\0" * 4096)
    with running_server(dbpath=dbpath) as (_, port, _):
        c = MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=5000)
        c.admin.command("ping")
        assert temp_files(dbpath) == []
        c.close()
