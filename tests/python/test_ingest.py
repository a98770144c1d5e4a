"""Ingest behaviour pinned through pymongo (issue #14): bucket reopening after a restart and
for out-of-order data, its counters, survival of a reopened bucket and of buckets closed by
one insert across kill -9, deletions that stay deleted although the insert log still holds
the rows, and a clean shutdown that leaves no journal behind."""

import datetime as dt
import signal

from pymongo import MongoClient

from conftest import running_server

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _client(port):
    return MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=5000)


def _rows(host, start, n, step_s=10):
    return [
        {"t": T0 + dt.timedelta(seconds=start + i * step_s), "tags": {"host": host}, "v": float(i)}
        for i in range(n)
    ]


def _buckets(db, coll):
    return db[f"system.buckets.{coll}"].count_documents({})


def _catalog_stats(db, coll):
    return db.command("collStats", coll)["timeseries"]


def test_series_sent_backwards_fills_as_few_buckets_as_sent_forwards():
    with running_server() as (_, port, _):
        db = _client(port).ingest
        for name in ("fwd", "bwd"):
            db.create_collection(name, timeseries={"timeField": "t", "metaField": "tags"})
        rows = _rows("h", 0, 1080)  # 3 hours at 10 s
        db.fwd.insert_many(rows)
        for r in reversed(rows):  # one measurement per insert, newest first
            db.bwd.insert_one(dict(r))
        assert db.bwd.count_documents({}) == db.fwd.count_documents({}) == 1080
        forwards, backwards = _buckets(db, "fwd"), _buckets(db, "bwd")
        assert abs(backwards - forwards) <= 1, (forwards, backwards)


def test_restart_then_more_data_for_the_same_hour_reopens_the_last_bucket(tmp_path):
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = _client(port).ingest
        db.create_collection("m", timeseries={"timeField": "t", "metaField": "tags"})
        db.m.insert_many(_rows("a", 0, 30) + _rows("b", 0, 30))
        before = _buckets(db, "m")
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = _client(port).ingest
        db.m.insert_many(_rows("a", 300, 30))
        stats = _catalog_stats(db, "m")
        assert stats["numBucketsReopened"] == 1
        assert stats["numBucketsQueried"] >= 1
        assert _buckets(db, "m") == before
        assert db.m.count_documents({"tags.host": "a"}) == 60
        # A late measurement whose hour has a stored bucket goes back into it.
        db.m.insert_one({"t": T0 + dt.timedelta(seconds=5), "tags": {"host": "b"}, "v": -1.0})
        assert _catalog_stats(db, "m")["numBucketsReopened"] == 2
        assert _buckets(db, "m") == before


def test_reopened_bucket_keeps_every_measurement_across_kill_9(tmp_path):
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = _client(port).ingest
        db.create_collection("m", timeseries={"timeField": "t", "metaField": "tags"})
        db.m.insert_many(_rows("a", 0, 40))
    with running_server(dbpath=tmp_path) as (proc, port, _):
        db = _client(port).ingest
        db.m.insert_many(_rows("a", 400, 40))  # acknowledged, into the reopened bucket
        assert _catalog_stats(db, "m")["numBucketsReopened"] == 1
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = _client(port).ingest
        assert db.m.count_documents({}) == 80
        assert sorted(d["v"] for d in db.m.find({}, {"v": 1})) == sorted(
            [float(i) for i in range(40)] * 2
        )
        assert _buckets(db, "m") == 1


def test_buckets_filled_and_closed_by_one_insert_survive_kill_9_right_after_it(tmp_path):
    # Each insert opens and fills buckets (1,000 measurements) that close within it: the
    # acknowledgement must not wait for their background compression to be durable.
    for attempt in range(3):
        dbpath = tmp_path / str(attempt)
        dbpath.mkdir()
        with running_server(dbpath=dbpath) as (proc, port, _):
            db = _client(port).ingest
            db.create_collection("m", timeseries={"timeField": "t", "metaField": "tags"})
            db.m.insert_many([r for h in range(8) for r in _rows(f"h{h}", 0, 1200, step_s=1)])
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        with running_server(dbpath=dbpath) as (_, port, _):
            assert _client(port).ingest.m.count_documents({}) == 9600


def test_measurements_deleted_from_a_stored_bucket_stay_deleted_across_kill_9(tmp_path):
    # One insert fills host a's first bucket (closed by count, then stored) and opens
    # buckets for a and b, so the insert's log record outlives the stored bucket. Deleting
    # the stored bucket's measurements and then kill -9 must not bring them back from it.
    with running_server(dbpath=tmp_path) as (proc, port, _):
        db = _client(port).ingest
        db.create_collection("m", timeseries={"timeField": "t", "metaField": "tags"})
        db.m.insert_many(_rows("a", 0, 1001, step_s=1) + _rows("b", 0, 1))
        assert db.m.delete_many({"tags.host": "a", "v": {"$lt": 1000.0}}).deleted_count == 1000
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = _client(port).ingest
        assert sorted((d["tags"]["host"], d["v"]) for d in db.m.find()) == [
            ("a", 1000.0),
            ("b", 0.0),
        ]


def test_clean_shutdown_leaves_an_empty_journal_and_the_data(tmp_path):
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = _client(port).ingest
        db.create_collection("m", timeseries={"timeField": "t", "metaField": "tags"})
        for h in range(20):
            db.m.insert_many(_rows(f"h{h}", 0, 500))
    journals = list(tmp_path.rglob("*.jnl"))
    assert journals, "fjall keeps its journal file"
    allocated = sum(p.stat().st_blocks * 512 for p in journals)
    assert allocated == 0, f"journal still holds {allocated} bytes after a clean shutdown"
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = _client(port).ingest
        assert db.m.count_documents({}) == 10_000
        db.m.insert_one({"t": T0, "tags": {"host": "new"}, "v": 1.0})
        assert db.m.count_documents({}) == 10_001


def test_concurrent_inserts_are_group_committed():
    import threading

    with running_server() as (_, port, _):
        client = _client(port)
        db = client.ingest
        db.create_collection("g", timeseries={"timeField": "t", "metaField": "tags"})

        def writer(w):
            for i in range(150):
                db.g.insert_one(
                    {"t": T0 + dt.timedelta(seconds=i), "tags": {"host": f"w{w}"}, "v": float(i)}
                )

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stats = _catalog_stats(db, "g")
        assert db.g.count_documents({}) == 1200
        assert stats["numCommits"] == 1200
        assert stats["numMeasurementsCommitted"] == 1200
        assert stats["avgNumMeasurementsPerCommit"] == 1
        # Eight writers share journal syncs: some inserts are made durable by another's.
        assert stats["numWaits"] > 0
        assert stats["numMeasurementsGroupCommitted"] == stats["numWaits"]
