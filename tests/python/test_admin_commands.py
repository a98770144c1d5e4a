"""Admin commands an operator reaches for: the `$currentOp` stage behind mongosh's
`db.currentOp()`, `fsync` with `lock` and `fsyncUnlock` (writes wait, reads go on, then the
writes proceed), as a MongoDB 7.0 standalone answers them."""

import threading
import time

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure


def test_current_op_stage_lists_operations_in_progress(client):
    ops = list(client.admin.aggregate([{"$currentOp": {"allUsers": True}}]))
    # The aggregate itself is in progress while it lists.
    assert any(o["command"].get("aggregate") == 1 for o in ops), ops
    assert all({"opid", "op", "ns", "active", "connectionId"} <= set(o) for o in ops)


def test_current_op_stage_without_all_users_lists_the_connections_own(client, server):
    host, port = server
    other = MongoClient(host, port, directConnection=True)
    mine = list(other.admin.aggregate([{"$currentOp": {}}]))
    assert mine and len({o["connectionId"] for o in mine}) == 1
    other.close()


def test_current_op_stage_outside_admin_or_on_a_collection_is_invalid_namespace(db):
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$currentOp": {}}]))
    assert e.value.code == 73


def test_current_op_stage_refuses_idle_connections_it_cannot_list(client):
    with pytest.raises(OperationFailure) as e:
        list(client.admin.aggregate([{"$currentOp": {"idleConnections": True}}]))
    assert e.value.code == 72


def test_fsync_lock_holds_writes_until_unlock_while_reads_go_on(client, server):
    host, port = server
    db = client.py_fsync
    db.c.insert_one({"_id": 0})
    reply = client.admin.command("fsync", lock=True)
    assert reply["lockCount"] == 1
    done = threading.Event()
    writer = MongoClient(host, port, directConnection=True)

    def write():
        writer.py_fsync.c.insert_one({"_id": 1})
        done.set()

    t = threading.Thread(target=write)
    t.start()
    try:
        time.sleep(0.5)
        assert not done.is_set(), "a write went through an fsync lock"
        assert db.c.count_documents({}) == 1, "reads go on while locked"
        assert client.admin.command("currentOp").get("fsyncLock") is True
    finally:
        assert client.admin.command("fsyncUnlock")["lockCount"] == 0
    t.join(10)
    assert done.is_set()
    assert db.c.count_documents({}) == 2
    writer.close()
    client.drop_database("py_fsync")


def test_fsync_unlock_when_not_locked_fails(client):
    with pytest.raises(OperationFailure) as e:
        client.admin.command("fsyncUnlock")
    assert e.value.code == 125


def test_fsync_flushes_and_is_admin_only(client, db):
    assert client.admin.command("fsync")["ok"] == 1.0
    with pytest.raises(OperationFailure) as e:
        db.command("fsync")
    assert e.value.code == 13


def test_top_counts_time_per_collection_and_kind_of_operation(client, db):
    db.c.insert_many([{"i": i} for i in range(3)])
    list(db.c.find({"i": 1}))
    db.c.update_one({"i": 1}, {"$set": {"j": 1}})
    totals = client.admin.command("top")["totals"]
    entry = totals[f"{db.name}.c"]
    assert entry["insert"]["count"] >= 1 and entry["queries"]["count"] >= 1
    assert entry["update"]["count"] >= 1
    assert entry["total"]["count"] == entry["readLock"]["count"] + entry["writeLock"]["count"]
    assert entry["total"]["time"] >= entry["insert"]["time"]
    with pytest.raises(OperationFailure) as e:
        db.command("top")
    assert e.value.code == 13
