"""`--replSet NAME`: the server is the primary of a one-member replica set, so clients
configured for a replica set (`?replicaSet=NAME`) connect and work: retryable writes run
once per session and txnNumber, transactions commit, `rs.status()`/`rs.conf()` describe the
set, snapshot and linearizable reads are accepted, and the commands that would change the
set are refused."""

import signal

import pytest
from bson import Int64
from pymongo import MongoClient, monitoring
from pymongo.errors import OperationFailure
from pymongo.read_concern import ReadConcern

from conftest import run_node, running_server


class Writes(monitoring.CommandListener):
    def __init__(self):
        self.txn_numbers = []

    def started(self, event):
        if event.command_name in ("insert", "update", "delete", "findAndModify"):
            self.txn_numbers.append(event.command.get("txnNumber"))

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


@pytest.fixture(scope="module")
def rs_server():
    with running_server("--replSet", "rs0") as (proc, port, _):
        yield proc, port


def rs_client(port, **kw):
    return MongoClient(f"mongodb://localhost:{port}/?replicaSet=rs0", serverSelectionTimeoutMS=5000, **kw)


def test_a_client_configured_for_the_replica_set_finds_its_primary_and_retries_writes_once(rs_server):
    _, port = rs_server
    writes = Writes()
    c = rs_client(port, event_listeners=[writes])
    db = c.py_rs_basic
    db.drop_collection("a")
    db.a.insert_one({"_id": 1, "n": 0})
    db.a.update_one({"_id": 1}, {"$inc": {"n": 1}})
    db.a.find_one_and_update({"_id": 1}, {"$inc": {"n": 1}})
    db.a.delete_one({"_id": 99})
    assert c.topology_description.topology_type_name == "ReplicaSetWithPrimary"
    assert c.primary == ("127.0.0.1", port)
    # The driver sent each single-document write as a retryable write.
    assert all(isinstance(n, Int64) for n in writes.txn_numbers), writes.txn_numbers
    assert db.a.find_one() == {"_id": 1, "n": 2}
    hello = c.admin.command("hello")
    assert hello["setName"] == "rs0" and hello["isWritablePrimary"] is True
    assert hello["hosts"] == [f"127.0.0.1:{port}"] and hello["primary"] == f"127.0.0.1:{port}"
    c.close()


def test_a_retried_write_returns_the_first_reply_instead_of_running_again(rs_server):
    _, port = rs_server
    c = rs_client(port)
    db = c.py_rs_retry
    db.drop_collection("a")
    with c.start_session() as s:
        first = db.command("insert", "a", documents=[{"_id": 1}], session=s, txnNumber=Int64(7))
        again = db.command("insert", "a", documents=[{"_id": 1}], session=s, txnNumber=Int64(7))
        assert first["n"] == again["n"] == 1 and "writeErrors" not in again
        db.command("update", "a", updates=[{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}],
                   session=s, txnNumber=Int64(8))
        db.command("update", "a", updates=[{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}],
                   session=s, txnNumber=Int64(8))
        with pytest.raises(OperationFailure) as e:
            db.command("insert", "a", documents=[{"_id": 2}], session=s, txnNumber=Int64(3))
        assert e.value.code == 225
        with pytest.raises(OperationFailure) as e:
            db.command("update", "a", updates=[{"q": {}, "u": {"$set": {"m": 1}}, "multi": True}],
                       session=s, txnNumber=Int64(9))
        assert e.value.code == 72
        with pytest.raises(OperationFailure) as e:
            db.command("find", "a", session=s, txnNumber=Int64(10))
        assert e.value.code == 50768
    assert db.a.find_one() == {"_id": 1, "n": 1}
    assert db.a.count_documents({"m": 1}) == 0
    c.close()


def test_transactions_through_the_replica_set_connection_string(rs_server):
    _, port = rs_server
    c = rs_client(port)
    db = c.py_rs_txn
    db.drop_collection("a")
    db.a.insert_one({"_id": 0, "balance": 10})
    with c.start_session() as s:
        def move(s):
            db.a.update_one({"_id": 0}, {"$inc": {"balance": -4}}, session=s)
            db.a.insert_one({"_id": 1, "balance": 4}, session=s)
        s.with_transaction(move, read_concern=ReadConcern("snapshot"))
    assert sorted(d["balance"] for d in db.a.find()) == [4, 6]
    c.close()


def test_status_and_config_describe_the_one_member_set_and_changes_are_refused(rs_server):
    _, port = rs_server
    c = rs_client(port)
    status = c.admin.command("replSetGetStatus")
    assert status["set"] == "rs0" and status["myState"] == 1
    [member] = status["members"]
    assert member["stateStr"] == "PRIMARY" and member["self"] is True
    assert member["name"] == f"127.0.0.1:{port}"
    config = c.admin.command("replSetGetConfig")["config"]
    assert config["_id"] == "rs0" and [m["host"] for m in config["members"]] == [f"127.0.0.1:{port}"]
    with pytest.raises(OperationFailure) as e:
        c.admin.command("replSetInitiate")
    assert e.value.code == 23
    for command in ("replSetStepDown", "replSetReconfig", "replSetFreeze"):
        with pytest.raises(OperationFailure) as e:
            c.admin.command(command)
        assert e.value.code == 20, command
    assert c.admin.command("getCmdLineOpts")["parsed"]["replication"] == {"replSet": "rs0"}
    c.close()


def test_snapshot_and_linearizable_reads_are_accepted_and_at_cluster_time_is_refused(rs_server):
    _, port = rs_server
    c = rs_client(port)
    db = c.py_rs_reads
    db.drop_collection("a")
    db.a.insert_one({"_id": 1})
    for level in ("snapshot", "linearizable", "majority"):
        assert db.command("find", "a", readConcern={"level": level})["cursor"]["firstBatch"] == [{"_id": 1}]
    with pytest.raises(OperationFailure) as e:
        db.command("find", "a", readConcern={"level": "snapshot", "atClusterTime": {"$timestamp": {"t": 1, "i": 1}}})
    assert e.value.code == 72
    c.close()


def test_after_cluster_time_beyond_the_current_cluster_time_is_refused(rs_server):
    from bson import Timestamp
    _, port = rs_server
    c = rs_client(port)
    db = c.py_rs_after
    reply = db.command("insert", "a", documents=[{"_id": 1}])
    seen = reply["operationTime"]
    assert db.command("find", "a", readConcern={"afterClusterTime": seen})["cursor"]["firstBatch"] == [{"_id": 1}]
    with pytest.raises(OperationFailure) as e:
        db.command("find", "a", readConcern={"level": "local", "afterClusterTime": Timestamp(2**31 - 1, 1)})
    assert e.value.code == 72
    assert "must not be greater than the current clusterTime" in e.value.details["errmsg"]
    c.close()


def test_a_standalone_server_still_refuses_replica_set_commands_and_retryable_writes(client, db):
    with pytest.raises(OperationFailure) as e:
        client.admin.command("replSetGetStatus")
    assert e.value.code == 76
    with client.start_session() as s:
        with pytest.raises(OperationFailure) as e:
            db.command("insert", "a", documents=[{"_id": 1}], session=s, txnNumber=Int64(1))
        assert e.value.code == 20
    assert "setName" not in client.admin.command("hello")


def test_the_config_file_names_the_set_and_an_acknowledged_retryable_write_survives_kill_9(tmp_path):
    conf = tmp_path / "mongod.conf"
    conf.write_text("replication:\n  replSetName: fromfile\n")
    dbpath = tmp_path / "db"
    dbpath.mkdir()
    with running_server("--config", str(conf), dbpath=dbpath) as (proc, port, _):
        c = MongoClient(f"mongodb://localhost:{port}/?replicaSet=fromfile", serverSelectionTimeoutMS=5000)
        c.py_rs_kill.a.insert_many([{"_id": i} for i in range(100)])
        c.py_rs_kill.a.insert_one({"_id": "last"})
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with running_server("--replSet", "fromfile", dbpath=dbpath, exit_on_failure=False) as (_, port, _):
        c = MongoClient(f"mongodb://localhost:{port}/?replicaSet=fromfile", serverSelectionTimeoutMS=5000)
        assert c.py_rs_kill.a.count_documents({}) == 101


NODE_SCRIPT = """
const { MongoClient } = require(process.env.DRIVER);
(async () => {
  const client = new MongoClient(process.env.URI, { serverSelectionTimeoutMS: 5000 });
  await client.connect();
  const coll = client.db('py_rs_node').collection('c');
  await coll.deleteMany({});
  await coll.insertOne({ _id: 'a', n: 1 });
  const session = client.startSession();
  await session.withTransaction(async () => {
    await coll.updateOne({ _id: 'a' }, { $inc: { n: 1 } }, { session });
    await coll.insertOne({ _id: 'b' }, { session });
  });
  await session.endSession();
  const hello = await client.db('admin').command({ hello: 1 });
  console.log(JSON.stringify({ docs: await coll.find({}).sort({ _id: 1 }).toArray(), setName: hello.setName }));
  await client.close();
})().catch((e) => { console.log(JSON.stringify({ error: e.message })); process.exit(0); });
"""


def test_the_node_driver_connects_to_the_set_by_name_and_commits_a_transaction(rs_server):
    _, port = rs_server
    outcome = run_node(NODE_SCRIPT, f"mongodb://localhost:{port}/?replicaSet=rs0")
    assert outcome == {"docs": [{"_id": "a", "n": 2}, {"_id": "b"}], "setName": "rs0"}, outcome
