"""Multi-document transactions through pymongo and the Node driver, with MongoDB's session
protocol: commit and abort, reads of the transaction's own writes, isolation from readers
outside it, write conflicts labelled TransientTransactionError (so `with_transaction`
retries), the errors of the protocol (225, 251, 256, 263, 72), the lifetime limit, and a
commit that is all or nothing across `kill -9`."""

import signal
import threading
import time

import pytest
from bson import Int64, Timestamp
from pymongo import MongoClient
from pymongo.errors import DuplicateKeyError, OperationFailure

from conftest import run_node, running_server


def test_a_committed_transaction_applies_every_write_across_collections_and_databases(client, db):
    other = client[db.name + "_other"]
    db.a.insert_one({"_id": 0, "n": 0})
    with client.start_session() as s:
        with s.start_transaction():
            db.a.insert_one({"_id": 1}, session=s)
            db.a.update_one({"_id": 0}, {"$inc": {"n": 1}}, session=s)
            db.b.insert_many([{"_id": i} for i in range(3)], session=s)
            other.c.insert_one({"_id": "x"}, session=s)
            db.a.delete_one({"_id": 1}, session=s)
    assert list(db.a.find()) == [{"_id": 0, "n": 1}]
    assert db.b.count_documents({}) == 3
    assert other.c.find_one() == {"_id": "x"}
    client.drop_database(other.name)


def test_an_aborted_transaction_leaves_nothing_behind(client, db):
    db.a.insert_one({"_id": 0, "n": 0})
    with client.start_session() as s:
        s.start_transaction()
        db.a.insert_one({"_id": 1}, session=s)
        db.a.update_one({"_id": 0}, {"$set": {"n": 9}}, session=s)
        db.a.delete_one({"_id": 0}, session=s)
        s.abort_transaction()
    assert list(db.a.find()) == [{"_id": 0, "n": 0}]


def test_a_collection_an_aborted_transaction_created_is_gone_and_a_committed_one_stays(client, db):
    with client.start_session() as s:
        s.start_transaction()
        db.made_then_aborted.insert_one({"_id": 1}, session=s)
        db.upserted_then_aborted.update_one({"_id": 1}, {"$set": {"x": 1}}, upsert=True, session=s)
        s.abort_transaction()
        with s.start_transaction():
            db.made_then_committed.insert_one({"_id": 1}, session=s)
    names = db.list_collection_names()
    assert "made_then_aborted" not in names and "upserted_then_aborted" not in names
    assert db.made_then_committed.count_documents({}) == 1
    # A collection others wrote to meanwhile is kept.
    with client.start_session() as s:
        s.start_transaction()
        db.shared.insert_one({"_id": "txn"}, session=s)
        db.shared.insert_one({"_id": "outside"})
        s.abort_transaction()
    assert [d["_id"] for d in db.shared.find()] == ["outside"]


def test_reads_inside_see_the_transactions_own_writes_and_readers_outside_do_not(client, db):
    db.a.create_index("k")
    db.a.insert_one({"_id": 0, "k": 1})
    with client.start_session() as s:
        s.start_transaction()
        db.a.insert_one({"_id": 1, "k": 2}, session=s)
        db.a.update_one({"_id": 0}, {"$set": {"k": 5}}, session=s)
        # Collection scan, index scan, aggregate, distinct and a cursor across getMore.
        assert [d["_id"] for d in db.a.find({}, session=s).sort("_id", 1)] == [0, 1]
        assert [d["_id"] for d in db.a.find({"k": 5}, session=s).hint([("k", 1)])] == [0]
        assert db.a.find_one({"k": 1}, session=s) is None
        assert list(db.a.aggregate([{"$group": {"_id": None, "s": {"$sum": "$k"}}}], session=s)) == [
            {"_id": None, "s": 7}]
        assert sorted(db.a.distinct("k", session=s)) == [2, 5]
        db.a.insert_many([{"_id": 10 + i} for i in range(250)], session=s)
        assert len(list(db.a.find({}, batch_size=7, session=s))) == 252
        # Outside: the state before the transaction.
        assert list(db.a.find()) == [{"_id": 0, "k": 1}]
        assert db.a.find_one({"k": 5}) is None
        s.commit_transaction()
    assert db.a.count_documents({}) == 252
    assert db.a.find_one({"k": 5})["_id"] == 0


def test_a_transaction_reads_its_snapshot_not_writes_committed_after_it_started(client, db):
    db.a.insert_one({"_id": 0, "v": "old"})
    with client.start_session() as s:
        s.start_transaction()
        assert db.a.find_one({"_id": 0}, session=s)["v"] == "old"
        db.a.update_one({"_id": 0}, {"$set": {"v": "new"}})
        db.a.insert_one({"_id": 1})
        assert db.a.find_one({"_id": 0}, session=s)["v"] == "old"
        assert db.a.count_documents({}, session=s) == 1
        s.commit_transaction()


def test_two_transactions_writing_one_document_conflict_and_the_second_gets_a_transient_error(client, db):
    db.a.insert_one({"_id": 0, "n": 0})
    s1, s2 = client.start_session(), client.start_session()
    s1.start_transaction()
    s2.start_transaction()
    db.a.update_one({"_id": 0}, {"$inc": {"n": 1}}, session=s1)
    with pytest.raises(OperationFailure) as e:
        db.a.update_one({"_id": 0}, {"$inc": {"n": 10}}, session=s2)
    assert e.value.code == 112
    assert e.value.details["codeName"] == "WriteConflict"
    assert e.value.has_error_label("TransientTransactionError")
    s1.commit_transaction()
    # The failed statement aborted the second transaction.
    with pytest.raises(OperationFailure) as e:
        s2.commit_transaction()
    assert e.value.code == 251
    assert e.value.has_error_label("TransientTransactionError")
    assert db.a.find_one()["n"] == 1
    s1.end_session()
    s2.end_session()


def in_thread(fn):
    """Runs `fn` in a thread; returns the thread and a list that gets its result or error."""
    out = []

    def run():
        try:
            out.append(fn())
        except Exception as e:  # noqa: BLE001 - the test inspects it
            out.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, out


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_a_write_outside_to_a_document_a_transaction_wrote_waits_for_the_transaction_to_end(client, db, end):
    db.a.insert_one({"_id": 0, "n": 0})
    with client.start_session() as s:
        s.start_transaction()
        db.a.update_one({"_id": 0}, {"$inc": {"n": 1}}, session=s)
        db.a.insert_one({"_id": 1}, session=s)
        waiting = [in_thread(lambda: db.a.update_one({"_id": 0}, {"$inc": {"n": 100}}).modified_count),
                   in_thread(lambda: db.a.insert_one({"_id": 1, "outside": True}).inserted_id)]
        time.sleep(0.5)
        assert all(t.is_alive() for t, _ in waiting), "the writes outside did not wait"
        assert db.a.find_one({"_id": 0}) == {"_id": 0, "n": 0}
        # Writes to other documents go on meanwhile.
        db.a.insert_one({"_id": 2})
        s.commit_transaction() if end == "commit" else s.abort_transaction()
        for t, _ in waiting:
            t.join(10)
    (_, updated), (_, inserted) = waiting
    assert updated == [1]
    if end == "commit":
        assert db.a.find_one({"_id": 0})["n"] == 101
        # The transaction inserted `_id: 1` first: the insert outside then finds it.
        assert isinstance(inserted[0], DuplicateKeyError), inserted
        assert db.a.find_one({"_id": 1}) == {"_id": 1}
    else:
        assert db.a.find_one({"_id": 0})["n"] == 100
        assert inserted == [1]
        assert db.a.find_one({"_id": 1}) == {"_id": 1, "outside": True}


def test_a_write_outside_waiting_for_a_transaction_stops_at_its_max_time_ms(client, db):
    db.a.insert_one({"_id": 0, "n": 0})
    with client.start_session() as s:
        s.start_transaction()
        db.a.update_one({"_id": 0}, {"$inc": {"n": 1}}, session=s)
        reply = db.command("update", "a", updates=[{"q": {"_id": 0}, "u": {"$inc": {"n": 100}}}],
                           maxTimeMS=300)
        # As mongod reports a write stopped by maxTimeMS: a write error.
        assert [e["code"] for e in reply.get("writeErrors", [])] == [50], reply
        s.commit_transaction()
    assert db.a.find_one()["n"] == 1


def test_with_transaction_retries_a_conflicting_transaction_until_it_commits(client, db):
    db.a.insert_one({"_id": 0, "n": 0})
    workers, per_worker = 4, 10

    def work():
        c = MongoClient(client.address[0], client.address[1], directConnection=True)
        coll = c[db.name].a
        for _ in range(per_worker):
            with c.start_session() as s:
                def cb(s):
                    doc = coll.find_one({"_id": 0}, session=s)
                    coll.update_one({"_id": 0}, {"$set": {"n": doc["n"] + 1}}, session=s)
                    coll.insert_one({"by": threading.get_ident()}, session=s)
                s.with_transaction(cb)
        c.close()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # No lost update: every increment read the value the one before wrote.
    assert db.a.find_one({"_id": 0})["n"] == workers * per_worker
    assert db.a.count_documents({"by": {"$exists": True}}) == workers * per_worker


def test_a_duplicate_key_inside_a_transaction_aborts_it(client, db):
    db.a.insert_one({"_id": 0})
    with client.start_session() as s:
        s.start_transaction()
        db.a.insert_one({"_id": 1}, session=s)
        with pytest.raises(DuplicateKeyError):
            db.a.insert_one({"_id": 0}, session=s)
        with pytest.raises(OperationFailure) as e:
            s.commit_transaction()
        assert e.value.code == 251
    assert db.a.count_documents({}) == 1


def test_two_transactions_inserting_one_unique_value_do_not_both_commit(client, db):
    db.a.create_index("u", unique=True)
    s1, s2 = client.start_session(), client.start_session()
    s1.start_transaction()
    s2.start_transaction()
    db.a.insert_one({"u": 1, "by": 1}, session=s1)
    with pytest.raises(OperationFailure) as e:
        db.a.insert_one({"u": 1, "by": 2}, session=s2)
        s2.commit_transaction()
    assert e.value.code in (112, 251)
    s1.commit_transaction()
    assert [d["by"] for d in db.a.find()] == [1]
    s1.end_session()
    s2.end_session()


def test_commands_a_transaction_cannot_run_are_refused_with_263_and_leave_it_open(client, db):
    db.a.insert_one({"_id": 0})
    with client.start_session() as s:
        s.start_transaction()
        db.a.insert_one({"_id": 1}, session=s)
        for run in (lambda: db.command("count", "a", session=s),
                    lambda: db.command("drop", "a", session=s),
                    lambda: db.command("listCollections", session=s)):
            with pytest.raises(OperationFailure) as e:
                run()
            assert e.value.code == 263, e.value.details
            assert "in a multi-document transaction" in str(e.value)
        s.commit_transaction()
    assert db.a.count_documents({}) == 2


@pytest.mark.parametrize("first", [True, False], ids=["first-statement", "later-statement"])
@pytest.mark.parametrize("write", ["time-series insert", "$out"])
def test_a_time_series_write_or_out_in_a_transaction_is_refused_with_263_and_aborts_it(client, db, first, write):
    db.create_collection("ts", timeseries={"timeField": "t"})
    db.a.insert_one({"_id": 0})
    run = {"time-series insert": lambda s: db.ts.insert_one({"t": time_now()}, session=s),
           "$out": lambda s: list(db.a.aggregate([{"$out": "copy"}], session=s))}[write]
    with client.start_session() as s:
        s.start_transaction()
        if not first:
            db.a.insert_one({"_id": 1}, session=s)
        with pytest.raises(OperationFailure) as e:
            run(s)
        assert e.value.code == 263, e.value.details
        with pytest.raises(OperationFailure) as e:
            s.commit_transaction()
        assert e.value.code == 251
    assert db.a.count_documents({}) == 1
    assert db.ts.count_documents({}) == 0
    assert "copy" not in db.list_collection_names()


def test_a_transaction_that_wrote_to_a_collection_whose_indexes_changed_fails_to_commit(client, db):
    db.a.insert_one({"_id": 0})
    with client.start_session() as s:
        s.start_transaction()
        db.a.insert_one({"_id": 1, "k": "staged before the index existed"}, session=s)
        db.a.create_index("k")
        with pytest.raises(OperationFailure) as e:
            s.commit_transaction()
        assert e.value.code == 112 and e.value.has_error_label("TransientTransactionError")
    # Retried after the index exists, the document is found through it.
    with client.start_session() as s:
        with s.start_transaction():
            db.a.insert_one({"_id": 1, "k": "x"}, session=s)
    assert [d["_id"] for d in db.a.find({"k": "x"}).hint([("k", 1)])] == [1]


def time_now():
    import datetime
    return datetime.datetime.now(datetime.timezone.utc)


def test_the_session_protocol_errors_are_mongods(client, db):
    db.a.insert_one({"_id": 0})
    # A session never used before (pymongo sends its own lsid; a fresh client's first
    # session has no transaction history).
    c = MongoClient(*client.address, directConnection=True)
    db = c[db.name]
    adm = c.admin
    s = c.start_session()

    def run(command, number, **fields):
        target = adm if command in ("commitTransaction", "abortTransaction") else db
        arg = "a" if target is db else 1
        return target.command(command, arg, session=s, txnNumber=Int64(number), **fields)

    def code(command, number, **fields):
        with pytest.raises(OperationFailure) as e:
            run(command, number, **fields)
        return e.value

    # Only autocommit false, and startTransaction needs autocommit.
    assert code("find", 1, autocommit=True, startTransaction=True).code == 72
    assert code("find", 1, startTransaction=True).code == 72
    assert code("find", 1, autocommit=False, startTransaction=False).code == 72
    # A continuing statement of a transaction that never started: 251, transient.
    e = code("find", 3, autocommit=False)
    assert e.code == 251 and e.has_error_label("TransientTransactionError")
    # Start 5; starting it again is 117; an older number is 225.
    run("insert", 5, documents=[{"_id": 5}], startTransaction=True, autocommit=False)
    assert code("find", 5, startTransaction=True, autocommit=False).code == 117
    assert code("find", 4, autocommit=False).code == 225
    # writeConcern on a statement, readConcern after the first: 72, and the transaction
    # stays open.
    e = code("insert", 5, documents=[{"_id": 6}], autocommit=False, writeConcern={"w": 1})
    assert e.code == 72
    assert code("find", 5, autocommit=False, readConcern={"level": "snapshot"}).code == 72
    # Commit twice (drivers retry commits), then abort is 256; the insert is there.
    run("commitTransaction", 5, autocommit=False)
    run("commitTransaction", 5, autocommit=False)
    assert code("abortTransaction", 5, autocommit=False).code == 256
    assert db.a.count_documents({}) == 2
    # A new number aborts the session's open transaction.
    run("insert", 6, documents=[{"_id": 7}], startTransaction=True, autocommit=False)
    run("find", 7, startTransaction=True, autocommit=False, readConcern={"level": "snapshot"})
    assert code("commitTransaction", 6, autocommit=False).code == 225
    run("abortTransaction", 7, autocommit=False)
    assert code("abortTransaction", 7, autocommit=False).code == 251
    assert db.a.count_documents({"_id": 7}) == 0
    # A retryable write's txnNumber (no autocommit) is refused as a standalone refuses it.
    assert code("insert", 9, documents=[{"_id": 8}]).code == 20
    assert db.a.count_documents({"_id": 8}) == 0
    # A snapshot in the past cannot be read: refused before the transaction starts.
    e = code("find", 11, startTransaction=True, autocommit=False,
             readConcern={"level": "snapshot", "atClusterTime": Timestamp(1, 1)})
    assert e.code == 72 and "atClusterTime" in str(e)
    assert code("find", 11, autocommit=False).code == 251
    s.end_session()
    c.close()


def test_ending_a_session_aborts_its_open_transaction_and_releases_its_documents(client, db):
    db.a.insert_one({"_id": 0, "by": None})
    c = MongoClient(*client.address, directConnection=True)
    s = c.start_session()
    s.start_transaction()
    c[db.name].a.update_one({"_id": 0}, {"$set": {"by": "ended"}}, session=s)
    client.admin.command("endSessions", [s.session_id])
    # Another transaction may now write the document it held.
    with client.start_session() as other:
        with other.start_transaction():
            db.a.update_one({"_id": 0}, {"$set": {"by": "other"}}, session=other)
    with pytest.raises(OperationFailure) as e:
        s.commit_transaction()
    assert e.value.code == 251
    assert db.a.find_one()["by"] == "other"
    c.close()


def test_a_transaction_older_than_the_lifetime_limit_is_aborted():
    with running_server("--setParameter", "transactionLifetimeLimitSeconds=1") as (_, port, _):
        c = MongoClient(port=port, directConnection=True)
        db = c.py_txn_limit
        db.a.insert_one({"_id": 0})
        s = c.start_session()
        s.start_transaction()
        db.a.update_one({"_id": 0}, {"$set": {"x": 1}}, session=s)
        time.sleep(3)
        # The sweep released the document: a write outside does not conflict.
        db.a.update_one({"_id": 0}, {"$set": {"y": 1}})
        with pytest.raises(OperationFailure) as e:
            s.commit_transaction()
        assert e.value.code == 251
        assert "transactionLifetimeLimitSeconds" in str(e.value)
        assert db.a.find_one() == {"_id": 0, "y": 1}
        c.close()


def open_big_transaction(port, n):
    """A client and session with an open transaction of `n` inserts, a marker in a second
    collection and the delete of a seed document."""
    c = MongoClient(port=port, directConnection=True)
    db = c.py_txn_crash
    db.a.insert_one({"_id": "seed"})
    s = c.start_session()
    s.start_transaction()
    db.a.insert_many([{"_id": i, "pad": "x" * 50} for i in range(n)], session=s)
    db.b.insert_one({"_id": "marker"}, session=s)
    db.a.delete_one({"_id": "seed"}, session=s)
    return c, s


def test_a_commit_interrupted_by_kill_9_is_all_or_nothing_after_restart(tmp_path):
    n = 20_000
    # How long a commit takes here, to kill the server before, during and after one.
    with running_server() as (_, port, _):
        c, s = open_big_transaction(port, n)
        started = time.monotonic()
        s.commit_transaction()
        took = time.monotonic() - started
        c.close()
    outcomes = []
    for attempt, fraction in enumerate((0.0, 0.25, 0.5, 0.75, 1.0, 3.0)):
        dbpath = tmp_path / f"db{attempt}"
        dbpath.mkdir()
        acknowledged = []
        with running_server(dbpath=dbpath) as (proc, port, _):
            c, s = open_big_transaction(port, n)

            def commit():
                try:
                    s.commit_transaction()
                    acknowledged.append(True)
                except Exception:
                    pass

            t = threading.Thread(target=commit)
            t.start()
            time.sleep(took * fraction)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            t.join()
            c.close()
        with running_server(dbpath=dbpath, exit_on_failure=False) as (_, port, _):
            db = MongoClient(port=port, directConnection=True).py_txn_crash
            a, b, seed = (db.a.count_documents({}), db.b.count_documents({}),
                          db.a.count_documents({"_id": "seed"}))
            committed = (a, b, seed) == (n, 1, 0)
            assert committed or (a, b, seed) == (1, 0, 1), (fraction, a, b, seed)
            if acknowledged:
                assert committed, "an acknowledged commit was lost"
            outcomes.append(committed)
    print(f"commit took {took:.3f} s; committed after kill -9 at 0, 1/4, 1/2, 3/4, 1, 3 of it:",
          outcomes)
    assert outcomes[-1], "a commit given three times its duration did not survive"


NODE_SCRIPT = """
const { MongoClient } = require(process.env.DRIVER);
(async () => {
  const client = new MongoClient(process.env.URI);
  await client.connect();
  const coll = client.db(process.env.DB).collection('c');
  const out = {};
  const s1 = client.startSession();
  s1.startTransaction();
  await coll.insertOne({ _id: 'aborted' }, { session: s1 });
  out.seenInside = await coll.countDocuments({}, { session: s1 });
  out.seenOutside = await coll.countDocuments({});
  await s1.abortTransaction();
  await s1.endSession();
  const s2 = client.startSession();
  await s2.withTransaction(async () => {
    await coll.insertOne({ _id: 'committed' }, { session: s2 });
    await coll.updateOne({ _id: 'committed' }, { $set: { v: 1 } }, { session: s2 });
  });
  await s2.endSession();
  out.after = await coll.find({}).toArray();
  console.log(JSON.stringify(out));
  await client.close();
})().catch((e) => { console.log(JSON.stringify({ error: e.message, code: e.code })); process.exit(0); });
"""


def test_node_driver_transactions_commit_and_abort(server, db):
    host, port = server
    db.create_collection("c")
    outcome = run_node(NODE_SCRIPT, f"mongodb://{host}:{port}/?directConnection=true", DB=db.name)
    assert outcome == {"seenInside": 1, "seenOutside": 0,
                       "after": [{"_id": "committed", "v": 1}]}, outcome
