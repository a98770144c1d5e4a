"""Administrative commands as MongoDB 7.0 answers them: admin-only commands, user writes to
system namespaces, rename onto an existing target, dbStats / collStats sizes, serverStatus
sections, $collStats' position, listCollections of a clustered collection, and the session,
size, lock, read/write concern, features and hash commands."""

import hashlib

import bson
import pytest
from bson.codec_options import CodecOptions
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import running_server


def _fails(database, command, code, codeName=None, **kwargs):
    with pytest.raises(OperationFailure) as e:
        database.command(command, **kwargs)
    assert e.value.code == code, e.value.details
    if codeName is not None:
        assert e.value.details["codeName"] == codeName, e.value.details
    return e.value.details["errmsg"]


# --- 1. admin-only commands -------------------------------------------------------------

ADMIN_ONLY = [
    SON([("renameCollection", "x.a"), ("to", "x.b")]),
    {"listDatabases": 1},
    {"getCmdLineOpts": 1},
    {"getLog": "global"},
    SON([("getParameter", 1), ("logLevel", 1)]),
    SON([("setParameter", 1), ("logLevel", 0)]),
    {"getDefaultRWConcern": 1},
    {"lockInfo": 1},
]


@pytest.mark.parametrize("command", ADMIN_ONLY, ids=lambda c: next(iter(c)))
def test_admin_only_command_outside_admin_is_unauthorized(db, command):
    name = next(iter(command))
    msg = _fails(db, command, 13, "Unauthorized")
    assert msg == f"{name} may only be run against the admin database."


def test_admin_only_commands_still_run_on_admin(client):
    admin = client.admin
    assert admin.command("listDatabases")["ok"] == 1
    assert admin.command("getCmdLineOpts")["ok"] == 1
    assert admin.command("getLog", "global")["ok"] == 1
    assert "logLevel" in admin.command(SON([("getParameter", 1), ("logLevel", 1)]))
    assert admin.command("listCommands")["commands"]["listDatabases"]["adminOnly"] is True
    assert admin.command("listCommands")["commands"]["find"]["adminOnly"] is False


# --- 2. system namespaces ---------------------------------------------------------------

def test_create_of_user_system_collection_is_invalid_namespace(db):
    msg = _fails(db, "create", 73, "InvalidNamespace", value="system.foo")
    assert msg == f"Invalid system namespace: {db.name}.system.foo"
    assert "system.foo" not in db.list_collection_names()


def test_insert_into_user_system_collection_is_invalid_namespace(db):
    with pytest.raises(OperationFailure) as e:
        db["system.bar"].insert_one({"x": 1})
    assert e.value.code == 73
    assert e.value.details["errmsg"] == f"Invalid system namespace: {db.name}.system.bar"
    assert "system.bar" not in db.list_collection_names()


def test_rename_to_user_system_collection_is_illegal_operation(client, db):
    db.a.insert_one({"x": 1})
    msg = _fails(client.admin, SON([("renameCollection", f"{db.name}.a"),
                                    ("to", f"{db.name}.system.x")]), 20, "IllegalOperation")
    assert msg == f"error with target namespace: Invalid system namespace: {db.name}.system.x"
    msg = _fails(client.admin, SON([("renameCollection", f"{db.name}.a"),
                                    ("to", f"{db.name}.system.profile")]), 20)
    assert msg == f"error with target namespace: cannot write to {db.name}.system.profile"
    msg = _fails(client.admin, SON([("renameCollection", f"{db.name}.a"),
                                    ("to", f"{db.name}.system.js")]), 20)
    assert msg == "renaming system.js collection or renaming to system.js is not allowed"
    assert db.list_collection_names() == ["a"]


def test_legal_system_collections_stay_writable(db):
    db.create_collection("system.js")
    db["system.js"].insert_one({"_id": "f", "value": "function() {}"})
    assert db["system.js"].count_documents({}) == 1
    # The profiler's collection may be created (to size it), and views still go to
    # system.views; time-series buckets are covered by the bucket tests.
    db.create_collection("system.profile")
    db.create_collection("v", viewOn="system.js", pipeline=[])
    assert {"system.js", "system.profile", "system.views", "v"} <= set(db.list_collection_names())


def test_collection_name_containing_dot_system_dot_is_bad_value(db):
    _fails(db, "create", 2, "BadValue", value="a.system.b")


# --- 3. rename onto an existing collection ----------------------------------------------

def test_rename_onto_existing_collection_says_target_namespace_exists(client, db):
    db.a.insert_one({"_id": 1})
    db.b.insert_one({"_id": 2})
    msg = _fails(client.admin, SON([("renameCollection", f"{db.name}.a"),
                                    ("to", f"{db.name}.b")]), 48, "NamespaceExists")
    assert msg == "target namespace exists"


def test_rename_onto_a_view_or_time_series_collection_is_namespace_exists_and_keeps_it(client, db):
    db.a.insert_one({"_id": 1})
    db.create_collection("v", viewOn="a", pipeline=[])
    db.create_collection("ts", timeseries={"timeField": "t"})
    for target, drop in (("v", False), ("v", True), ("ts", True)):
        cmd = SON([("renameCollection", f"{db.name}.a"), ("to", f"{db.name}.{target}"),
                   ("dropTarget", drop)])
        msg = _fails(client.admin, cmd, 48, "NamespaceExists")
        assert msg == f"a view already exists with that name: {db.name}.{target}"
    kinds = {c["name"]: c["type"] for c in db.list_collections()}
    assert (kinds["v"], kinds["ts"], kinds["a"]) == ("view", "timeseries", "collection")


# --- 4. dbStats ---------------------------------------------------------------------------

def test_db_stats_counts_views_and_every_index_with_their_size(db):
    db.a.insert_many([{"_id": i, "k": i} for i in range(50)])
    db.a.create_index("k")
    db.b.insert_one({"_id": 1})
    db.create_collection("v1", viewOn="a", pipeline=[])
    db.create_collection("v2", viewOn="b", pipeline=[])
    stats = db.command("dbStats")
    assert stats["views"] == 2
    # a: _id_ and k_1; b: _id_; system.views (a collection holding the views): _id_.
    assert stats["indexes"] == 4
    colls = ("a", "b", "system.views")
    index_total = sum(db.command("collStats", c)["totalIndexSize"] for c in colls)
    assert stats["indexSize"] == index_total > 0
    assert stats["totalSize"] == stats["storageSize"] + stats["indexSize"]
    assert list(stats)[:13] == ["db", "collections", "views", "objects", "avgObjSize",
                                "dataSize", "storageSize", "indexes", "indexSize",
                                "totalSize", "scaleFactor", "fsUsedSize", "fsTotalSize"]


def test_db_stats_scales_sizes(db):
    db.a.insert_many([{"_id": i, "pad": "x" * 500} for i in range(100)])
    whole = db.command("dbStats")
    kib = db.command("dbStats", scale=1024)
    assert kib["scaleFactor"] == 1024
    assert kib["indexSize"] == whole["indexSize"] // 1024
    assert kib["fsTotalSize"] == whole["fsTotalSize"] // 1024


def test_db_stats_free_storage_reports_free_sizes(db):
    db.a.insert_one({})
    stats = db.command("dbStats", freeStorage=1)
    assert stats["freeStorageSize"] == 0 and stats["totalFreeStorageSize"] == 0


# --- 5. collStats -------------------------------------------------------------------------

def test_coll_stats_reports_capped_total_size_and_a_real_id_index_size(db):
    db.a.insert_many([{"_id": i} for i in range(100)])
    db.a.create_index("x")
    stats = db.command("collStats", "a")
    assert stats["capped"] is False
    assert stats["numOrphanDocs"] == 0
    assert stats["freeStorageSize"] == 0
    assert stats["indexBuilds"] == []
    assert stats["indexSizes"]["_id_"] > 0
    assert stats["totalIndexSize"] == sum(stats["indexSizes"].values())
    assert stats["totalSize"] == stats["storageSize"] + stats["totalIndexSize"]
    assert stats["nindexes"] == 2


# --- 6. serverStatus ----------------------------------------------------------------------

def test_server_status_leaves_out_the_sections_set_to_zero(client):
    full = client.admin.command("serverStatus")
    assert "metrics" in full and "opcounters" in full
    lean = client.admin.command(SON([("serverStatus", 1), ("metrics", 0), ("opcounters", 0)]))
    assert "metrics" not in lean and "opcounters" not in lean
    assert "connections" in lean and "host" in lean and "uptime" in lean
    also = client.admin.command(SON([("serverStatus", 1), ("mem", False), ("host", 0)]))
    assert "mem" not in also and "host" in also


# --- 7. $collStats position ---------------------------------------------------------------

def test_coll_stats_stage_after_the_first_is_40602(db):
    db.a.insert_one({})
    msg = _fails(db, SON([("aggregate", "a"),
                          ("pipeline", [{"$match": {}}, {"$collStats": {"count": {}}}]),
                          ("cursor", {})]), 40602)
    assert msg == "$collStats is only valid as the first stage in a pipeline"


# --- 8. listCollections of a clustered collection -----------------------------------------

def test_list_collections_omits_id_index_of_clustered_collection(db):
    db.create_collection("clustered", clusteredIndex={"key": {"_id": 1}, "unique": True})
    db.create_collection("plain")
    entries = {c["name"]: c for c in db.list_collections()}
    assert "idIndex" not in entries["clustered"]
    assert entries["clustered"]["options"]["clusteredIndex"]["key"] == {"_id": 1}
    assert entries["plain"]["idIndex"]["name"] == "_id_"


# --- 9. commands that were missing --------------------------------------------------------

def _local_session_ids(client):
    listed = client.admin.aggregate([{"$listLocalSessions": {"allUsers": True}}])
    return {s["_id"]["id"] for s in listed}


def test_start_session_returns_a_registered_session_id(client):
    reply = client.admin.command("startSession")
    assert reply["timeoutMinutes"] == 30
    session_id = reply["id"]["id"]
    assert isinstance(session_id, bson.Binary) and session_id.subtype == 4
    assert session_id in _local_session_ids(client)
    client.admin.command("endSessions", [reply["id"]])
    assert session_id not in _local_session_ids(client)


def test_kill_sessions_ends_the_session_and_aborts_its_transaction(client, db):
    db.create_collection("t")
    with client.start_session() as s:
        s.start_transaction()
        db.t.insert_one({"_id": 1}, session=s)
        lsid = s.session_id
        assert client.admin.command("killSessions", [lsid])["ok"] == 1
        assert lsid["id"] not in _local_session_ids(client)
        with pytest.raises(OperationFailure):
            s.commit_transaction()
    assert db.t.count_documents({}) == 0


def test_kill_all_sessions_ends_every_session(client):
    ids = [client.admin.command("startSession")["id"]["id"] for _ in range(2)]
    assert client.admin.command("killAllSessions", [])["ok"] == 1
    assert not set(ids) & _local_session_ids(client)


def test_kill_sessions_refuses_a_non_document_session(client):
    _fails(client.admin, "killSessions", 14, "TypeMismatch", value=[1])


def test_data_size_counts_the_documents_bytes(db):
    docs = [{"_id": i, "s": "x" * i} for i in range(10)]
    db.a.insert_many(docs)
    reply = db.command("dataSize", f"{db.name}.a")
    assert reply["numObjects"] == 10
    assert reply["size"] == sum(len(bson.encode(d)) for d in docs)
    assert "millis" in reply
    missing = db.command("dataSize", f"{db.name}.nothing")
    assert missing["size"] == 0 and missing["numObjects"] == 0


def test_data_size_refuses_key_ranges(db):
    db.a.insert_one({"_id": 1})
    _fails(db, SON([("dataSize", f"{db.name}.a"), ("keyPattern", {"_id": 1}),
                    ("min", {"_id": 0}), ("max", {"_id": 5})]), 2, "BadValue")


def test_lock_info_lists_no_locks(client):
    assert client.admin.command("lockInfo")["lockInfo"] == []


def test_get_default_rw_concern_is_refused_on_a_standalone(client):
    msg = _fails(client.admin, "getDefaultRWConcern", 51300)
    assert msg == "'getDefaultRWConcern' is not supported on standalone nodes."


def test_get_default_rw_concern_of_a_replica_set_member_is_implicit():
    with running_server("--replSet", "rs0") as (_, port, _):
        c = MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=5000)
        try:
            reply = c.admin.command("getDefaultRWConcern")
            assert reply["defaultReadConcern"] == {"level": "local"}
            assert reply["defaultWriteConcern"] == {"w": "majority", "wtimeout": 0}
            assert reply["defaultReadConcernSource"] == "implicit"
            assert reply["defaultWriteConcernSource"] == "implicit"
            assert "localUpdateWallClockTime" in reply
            assert c.admin.command("getDefaultRWConcern", inMemory=True)["inMemory"] is True
        finally:
            c.close()


def test_features_reports_the_object_id_machine_part(client, db):
    reply = client.admin.command("features")
    assert isinstance(reply["oidMachine"], int)
    _fails(client.admin, "features", 2, oidReset=True)


def test_db_hash_is_an_md5_of_each_collection_and_of_those_hashes(db):
    docs = [SON([("_id", i), ("v", "x" * i)]) for i in range(5)]
    db.b.insert_many(list(reversed(docs)))
    db.create_collection("a")
    reply = db.command("dbHash")
    expect_b = hashlib.md5(b"".join(bson.encode(d) for d in docs)).hexdigest()
    expect_a = hashlib.md5(b"").hexdigest()
    assert reply["collections"] == {"a": expect_a, "b": expect_b}
    assert reply["md5"] == hashlib.md5((expect_a + expect_b).encode()).hexdigest()
    assert reply["capped"] == []
    assert set(reply["uuids"]) == {"a", "b"}
    assert "host" in reply and "timeMillis" in reply
    only_b = db.command("dbHash", collections=["b"])
    assert list(only_b["collections"]) == ["b"]
    opts = CodecOptions(uuid_representation=4)
    assert db.with_options(codec_options=opts).command("dbHash")["collections"] == reply["collections"]


def test_data_size_of_a_view_or_time_series_collection_is_refused(db):
    db.create_collection("m", timeseries={"timeField": "t"})
    db.create_collection("v", viewOn="m", pipeline=[])
    for name in ("m", "v"):
        msg = _fails(db, "dataSize", 166, "CommandNotSupportedOnView", value=f"{db.name}.{name}")
        assert msg == f"Namespace {db.name}.{name} is a view, not a collection"


def test_db_hash_covers_time_series_buckets_and_stats_count_the_time_series_as_a_view(db):
    import datetime
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "k"})
    db.m.insert_many([{"t": datetime.datetime(2024, 1, 1, 0, i), "k": i % 2} for i in range(6)])
    reply = db.command("dbHash")
    assert "system.buckets.m" in reply["collections"]
    assert reply["collections"] == db.command("dbHash")["collections"]
    assert db.command("dbStats")["views"] == 1
