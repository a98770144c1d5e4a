"""Collections and indexes created inside a multi-document transaction, as mongod 7.0 allows
them: `create`, implicit creation by a write, and `createIndexes` on a collection the
transaction created (or on a missing one) belong to the transaction. No one else sees
them before the commit, an abort or a kill -9 before the commit leaves nothing, and what
mongod refuses (a new index on an existing or non-empty collection: 263; a read concern
other than `local`: 72; an existing name: 48; views and time-series collections: 263) is
refused and aborts the transaction."""

import signal

import pytest
from pymongo import MongoClient
from pymongo.errors import DuplicateKeyError, OperationFailure
from pymongo.read_concern import ReadConcern

from conftest import run_node, running_server


def assert_aborted(s):
    """The session's transaction was aborted by the server: committing it gives 251."""
    with pytest.raises(OperationFailure) as e:
        s.commit_transaction()
    assert e.value.code == 251, e.value.details


def refused(run, code):
    with pytest.raises(OperationFailure) as e:
        run()
    assert e.value.code == code, e.value.details
    return e.value


@pytest.mark.parametrize("how", ["create", "insert", "upsert"])
def test_a_collection_created_in_a_transaction_is_unseen_outside_until_the_commit(client, db, how):
    with client.start_session() as s:
        s.start_transaction()
        if how == "create":
            db.create_collection("made", session=s)
            db.made.insert_one({"_id": 1}, session=s)
        elif how == "insert":
            db.made.insert_one({"_id": 1}, session=s)
        else:
            db.made.update_one({"_id": 1}, {"$set": {"x": 1}}, upsert=True, session=s)
        db.second.insert_one({"_id": 2}, session=s)
        assert db.made.count_documents({}, session=s) == 1
        assert "made" not in db.list_collection_names()
        assert db.made.count_documents({}) == 0
        s.commit_transaction()
    assert {"made", "second"} <= set(db.list_collection_names())
    assert db.made.count_documents({}) == 1 and db.second.count_documents({}) == 1


def test_collections_an_aborted_transaction_created_are_gone(client, db):
    with client.start_session() as s:
        s.start_transaction()
        db.create_collection("made", session=s)
        db.made.create_index("k", session=s)
        db.made.insert_one({"_id": 1}, session=s)
        db.implicit.insert_one({"_id": 1}, session=s)
        s.abort_transaction()
    assert db.list_collection_names() == []
    # The names are free again, outside and in a later transaction.
    db.create_collection("made")
    with client.start_session() as s:
        with s.start_transaction():
            db.implicit.insert_one({"_id": 2}, session=s)
    assert list(db.implicit.find()) == [{"_id": 2}]


def test_create_of_an_existing_collection_in_a_transaction_fails_with_48_and_aborts_it(client, db):
    db.create_collection("there")
    with client.start_session() as s:
        s.start_transaction()
        db.other.insert_one({"_id": 1}, session=s)
        refused(lambda: db.command("create", "there", session=s), 48)
        assert_aborted(s)
        # Created earlier in the same transaction: also 48.
        s.start_transaction()
        db.command("create", "fresh", session=s)
        refused(lambda: db.command("create", "fresh", session=s), 48)
        assert_aborted(s)
    assert db.list_collection_names() == ["there"]


def test_indexes_created_in_a_transaction_on_its_new_collection_commit_with_it(client, db):
    with client.start_session() as s:
        s.start_transaction()
        reply = db.command("createIndexes", "made",
                           indexes=[{"key": {"k": 1}, "name": "k_1", "unique": True}], session=s)
        assert reply["createdCollectionAutomatically"] is True
        assert (reply["numIndexesBefore"], reply["numIndexesAfter"]) == (1, 2)
        db.made.insert_one({"_id": 1, "k": "a"}, session=s)
        # The index works inside: it is unique.
        with pytest.raises(DuplicateKeyError):
            db.made.insert_one({"_id": 2, "k": "a"}, session=s)
        assert_aborted(s)
    assert db.list_collection_names() == []
    # The same statements without the duplicate commit.
    with client.start_session() as s:
        with s.start_transaction():
            db.command("create", "made", session=s)
            db.made.create_index([("k", 1)], unique=True, session=s)
            db.made.insert_many([{"_id": 1, "k": "a"}, {"_id": 2, "k": "b"}], session=s)
            assert [d["_id"] for d in db.made.find({"k": "b"}, session=s).hint("k_1")] == [2]
    assert sorted(i["name"] for i in db.made.list_indexes()) == ["_id_", "k_1"]
    assert [d["_id"] for d in db.made.find({"k": "a"}).hint("k_1")] == [1]
    with pytest.raises(DuplicateKeyError):
        db.made.insert_one({"_id": 3, "k": "a"})


def test_new_indexes_on_an_existing_or_non_empty_collection_in_a_transaction_are_refused_with_263(client, db):
    db.there.create_index("a", name="a_1")
    with client.start_session() as s:
        # An index that already exists: a no-op, allowed.
        s.start_transaction()
        reply = db.command("createIndexes", "there", indexes=[{"key": {"a": 1}, "name": "a_1"}],
                           session=s)
        assert reply["numIndexesBefore"] == reply["numIndexesAfter"] == 2
        assert reply["note"] == "all indexes already exist"
        s.commit_transaction()
        # A conflicting spec: 86, as outside.
        s.start_transaction()
        refused(lambda: db.command("createIndexes", "there",
                                   indexes=[{"key": {"a": -1}, "name": "a_1"}], session=s), 86)
        assert_aborted(s)
        # A new index on an existing collection.
        s.start_transaction()
        e = refused(lambda: db.command("createIndexes", "there",
                                       indexes=[{"key": {"b": 1}, "name": "b_1"}], session=s), 263)
        assert "existing collection" in str(e)
        assert_aborted(s)
        # A new index on a collection the transaction created and wrote to.
        s.start_transaction()
        db.command("create", "fresh", session=s)
        db.fresh.insert_one({"a": 1}, session=s)
        e = refused(lambda: db.fresh.create_index("a", session=s), 263)
        assert "non-empty collection" in str(e)
        assert_aborted(s)
    assert sorted(i["name"] for i in db.there.list_indexes()) == ["_id_", "a_1"]
    assert db.list_collection_names() == ["there"]


@pytest.mark.parametrize("level", ["snapshot", "majority"])
def test_create_and_create_indexes_in_a_transaction_need_read_concern_local(client, db, level):
    db.other.insert_one({"a": 1})
    with client.start_session() as s:
        for run in (lambda: db.create_collection("made", session=s),
                    lambda: db.command("createIndexes", "made",
                                       indexes=[{"key": {"k": 1}, "name": "k_1"}], session=s)):
            s.start_transaction(read_concern=ReadConcern(level))
            assert db.other.count_documents({}, session=s) == 1
            refused(run, 72)
            assert_aborted(s)
        with s.start_transaction(read_concern=ReadConcern("local")):
            db.create_collection("made", session=s)
    assert "made" in db.list_collection_names()


def test_views_and_time_series_collections_cannot_be_created_in_a_transaction(client, db):
    db.create_collection("ts", timeseries={"timeField": "t"})
    with client.start_session() as s:
        for cmd in ({"create": "v", "viewOn": "x", "pipeline": []},
                    {"create": "ts2", "timeseries": {"timeField": "t"}},
                    {"createIndexes": "ts", "indexes": [{"key": {"t": 1}, "name": "t_1"}]}):
            s.start_transaction()
            refused(lambda: db.command(cmd, session=s), 263)
            assert_aborted(s)
    assert sorted(db.list_collection_names()) == ["system.buckets.ts", "system.views", "ts"]


def test_two_transactions_creating_one_collection_conflict_and_the_second_is_transient(client, db):
    with client.start_session() as s1, client.start_session() as s2:
        s1.start_transaction()
        db.create_collection("both", session=s1)
        s2.start_transaction()
        e = refused(lambda: db.create_collection("both", session=s2), 112)
        assert "TransientTransactionError" in e.details.get("errorLabels", [])
        s1.commit_transaction()
    assert db.list_collection_names() == ["both"]
    # A collection created outside meanwhile makes the transaction's commit conflict.
    with client.start_session() as s:
        s.start_transaction()
        db.late.insert_one({"_id": "txn"}, session=s)
        db.create_collection("late")
        e = refused(s.commit_transaction, 112)
    assert db.late.count_documents({}) == 0


def open_creating_transaction(port):
    c = MongoClient(port=port, directConnection=True)
    db = c.py_txn_ddl_crash
    s = c.start_session()
    s.start_transaction()
    db.command("create", "made", session=s)
    db.made.create_index("k", unique=True, session=s)
    db.made.insert_many([{"_id": i, "k": i} for i in range(100)], session=s)
    return c, db, s


def test_a_created_collection_survives_kill_9_only_once_its_commit_is_acknowledged(tmp_path):
    for committed in (False, True):
        dbpath = tmp_path / f"db{int(committed)}"
        dbpath.mkdir()
        with running_server(dbpath=dbpath) as (proc, port, _):
            c, _, s = open_creating_transaction(port)
            if committed:
                s.commit_transaction()
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            c.close()
        with running_server(dbpath=dbpath, exit_on_failure=False) as (_, port, _):
            with MongoClient(port=port, directConnection=True) as c:
                db = c.py_txn_ddl_crash
                if committed:
                    assert db.made.count_documents({}) == 100
                    assert sorted(i["name"] for i in db.made.list_indexes()) == ["_id_", "k_1"]
                    with pytest.raises(DuplicateKeyError):
                        db.made.insert_one({"k": 5})
                else:
                    assert db.list_collection_names() == []
                    # The name is free: creating it again starts empty, without the index.
                    db.create_collection("made")
                    assert db.made.count_documents({}) == 0
                    assert [i["name"] for i in db.made.list_indexes()] == ["_id_"]


NODE_SCRIPT = """
const { MongoClient } = require(process.env.DRIVER);
(async () => {
  const client = new MongoClient(process.env.URI);
  await client.connect();
  const db = client.db(process.env.DB);
  const out = {};
  const s = client.startSession();
  await s.withTransaction(async () => {
    await db.createCollection('made', { session: s });
    await db.collection('made').createIndex({ k: 1 }, { session: s });
    await db.collection('made').insertOne({ _id: 1, k: 'x' }, { session: s });
    out.seenOutside = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
  });
  await s.endSession();
  out.after = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
  out.indexes = (await db.collection('made').indexes()).map((i) => i.name).sort();
  out.docs = await db.collection('made').find({ k: 'x' }).toArray();
  console.log(JSON.stringify(out));
  await client.close();
})().catch((e) => { console.log(JSON.stringify({ error: e.message, code: e.code })); process.exit(0); });
"""


def test_node_driver_creates_a_collection_and_index_inside_with_transaction(server, db):
    host, port = server
    outcome = run_node(NODE_SCRIPT, f"mongodb://{host}:{port}/?directConnection=true", DB=db.name)
    assert outcome == {"seenOutside": [], "after": ["made"], "indexes": ["_id_", "k_1"],
                       "docs": [{"_id": 1, "k": "x"}]}, outcome
