"""The online archive pinned through pymongo: closed buckets older than `afterSeconds` move
to Parquet files (a local directory or S3) and stay queryable with the hot data.

- the seven TSBS queries (and high-cpu-all projected and sorted) answer the same on hot, half-archived and fully archived data,
  lastpoint also over series wholly archived beside series wholly hot, and find / count /
  distinct / countDocuments see every measurement once;
- the files: hive layout `db=/coll=/date=`, ZSTD, statistics, one UTC day (and one
  partitionBy value) per file, read back by DuckDB and Spark with the server's aggregates;
- crash safety: kill -9 at random moments while archiving, and aborts at the two fail
  points (file uploaded, manifest not committed; manifest committed) lose and duplicate
  nothing and leave no orphan file;
- S3 through a moto server; explain's archive counters and file pruning; updates and
  deletes of archived measurements refused (code 20); collMod `archive: "off"`; TTL of
  archived files; collStats / $collStats / listCollections / /metrics; bad specs; the
  parameters.

One module server (`archived`) serves most tests: it loads the data, restarts once (a
restart closes the open buckets) and waits until the mover has archived what it should.
"""

import datetime as dt
import random
import re
import signal
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import bson
import pytest
from bson.raw_bson import RawBSONDocument
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from archive_helpers import (FIELDS, T0, TSBS_ORDER, TsbsData, all_answer_diffs, answer_diffs, archive_stats,
                             at, ensure_py, explain_archive_counters, java_home, load, parquet_files, run_tsbs,
                             tsbs_pipelines, wait_archived, wait_for)
from conftest import _free_port, running_server

DB = "archive_test"
TS = {"timeField": "time", "metaField": "tags", "granularity": "seconds"}
MOVER = ("--setParameter", "archiveMoverIntervalSecs=1")
HOUR = 3600
MEASUREMENTS_PER_HOUR = 360  # one per host every 10 s


def _client(port):
    return MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=10_000)


def _spec(root, after=60, **extra):
    return {"afterSeconds": after, "uri": Path(root).as_uri(), **extra}


def _sum_user(coll, match=None):
    r = list(coll.aggregate([{"$match": match or {}},
                             {"$group": {"_id": None, "n": {"$sum": 1}, "s": {"$sum": "$usage_user"}}}]))
    return (r[0]["n"], r[0]["s"]) if r else (0, 0.0)


def _per_host(coll):
    return {d["_id"]: d for d in coll.aggregate([
        {"$group": {"_id": "$tags.hostname", "n": {"$sum": 1}, "sum": {"$sum": "$usage_user"},
                    "avg": {"$avg": "$usage_user"}, "max": {"$max": "$usage_user"},
                    "tmin": {"$min": "$time"}, "tmax": {"$max": "$time"}}},
        {"$sort": {"_id": 1}}])}


def _ms(t):
    """Epoch milliseconds of a (naive UTC or aware) datetime."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return round(t.timestamp() * 1000)


def _approx(a, b, rel=1e-9):
    return a == pytest.approx(b, rel=rel)


def _hot_buckets(db, coll):
    return db[f"system.buckets.{coll}"].count_documents({})


def _log_tail(log_path, n=3000):
    try:
        return Path(log_path).read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


def _minute_docs(hosts, days, start=T0):
    """One measurement per host per minute for `days` days: {time, tags: {hostname}, usage_user}."""
    rnd = random.Random(7)
    return [RawBSONDocument(bson.encode({"time": start + dt.timedelta(minutes=m), "tags": {"hostname": f"h{h}"},
                                         "usage_user": rnd.uniform(0, 100)}))  # raw: no _id added
            for m in range(days * 1440) for h in range(hosts)]


# ---- the module server -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tsbs():
    """10 hosts x 18 hours (64,800 measurements): every TSBS query's window (the last ends
    at 18:00) is covered."""
    return TsbsData(10, 18 * HOUR)


@pytest.fixture(scope="module")
def archived(tmp_path_factory, tsbs):
    """One server (mover every 1 s, TTL monitor every 1 s, HTTP listener on) holding:
    `hot`   the TSBS set, never archived (the reference answers);
    `cold`  the TSBS set, archived whole (partitionBy tags.hostname), own root `roots.cold`;
    `cpu`   the first 12 hours archived, then `archive: "off"` and the last 6 hours loaded hot;
    `days`  3 hosts x 3 days, one measurement a minute, archived whole (partitionBy hostname);
    `mixed` 5 hosts x 3 hours: host_0..2 archived whole, then `archive: "off"` and host_3..4
            loaded hot (series wholly archived beside series wholly hot); `mixed_hot` the same
            data never archived.
    Loaded, restarted once (closing the open buckets), then waited for."""
    base = tmp_path_factory.mktemp("archive")
    dbpath = base / "db"
    dbpath.mkdir()
    roots = SimpleNamespace(**{n: base / f"root-{n}" for n in ("cold", "cpu", "days", "misc")})
    for r in vars(roots).values():
        r.mkdir()
    first_half, second_half = tsbs.between(0, 12 * HOUR), tsbs.between(12 * HOUR, tsbs.duration_s)
    days = _minute_docs(3, 3)
    mixed = TsbsData(5, 3 * HOUR, seed=11)
    mixed_old, mixed_new = mixed.of_hosts(["host_0", "host_1", "host_2"]), mixed.of_hosts(["host_3", "host_4"])
    (roots.misc / "mixed").mkdir()
    with running_server(*MOVER, dbpath=dbpath) as (_, port, _):
        db = _client(port)[DB]
        db.create_collection("hot", timeseries=TS)
        load(db.hot, tsbs.docs)
        db.create_collection("cold", timeseries=TS, archive=_spec(roots.cold, partitionBy=["tags.hostname"]))
        load(db.cold, tsbs.docs)
        db.create_collection("cpu", timeseries=TS, archive=_spec(roots.cpu))
        load(db.cpu, first_half)
        db.create_collection("days", timeseries=TS, archive=_spec(roots.days, partitionBy=["tags.hostname"]))
        load(db.days, days)
        db.create_collection("mixed", timeseries=TS, archive=_spec(roots.misc / "mixed"))
        load(db.mixed, mixed_old)
        db.create_collection("mixed_hot", timeseries=TS)
        load(db.mixed_hot, mixed.docs)
    http_port = _free_port()
    with running_server(*MOVER, "--setParameter", "ttlMonitorSleepSecs=1", "--httpPort", str(http_port),
                        dbpath=dbpath) as (proc, port, log):
        client = _client(port)
        db = client[DB]
        t = time.monotonic()
        wait_archived(db, "cold", tsbs.count)
        wait_archived(db, "cpu", len(first_half))
        wait_archived(db, "days", len(days))
        wait_archived(db, "mixed", len(mixed_old))
        archive_seconds = time.monotonic() - t
        db.command("collMod", "cpu", archive="off")
        load(db.cpu, second_half)
        db.command("collMod", "mixed", archive="off")
        load(db.mixed, mixed_new)
        yield SimpleNamespace(client=client, db=db, port=port, http_port=http_port, proc=proc, log=log,
                              roots=roots, tsbs=tsbs, first_half=len(first_half), days=len(days),
                              mixed_archived=len(mixed_old), mixed_count=mixed.count,
                              archive_seconds=archive_seconds)
        client.close()


# ---- answers -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hot_answers(archived):
    answers = run_tsbs(archived.db.hot)
    empty = [n for n in TSBS_ORDER if not answers[n]]
    assert not empty, f"the reference answers of {empty} are empty: the comparison would prove little"
    return answers


def test_tsbs_answers_on_a_fully_archived_collection_equal_the_hot_ones(archived, hot_answers):
    db = archived.db
    assert _hot_buckets(db, "cold") == 0, "every bucket of `cold` was closed and older than afterSeconds"
    assert archive_stats(db, "cold")["measurements"] == archived.tsbs.count
    assert all_answer_diffs(run_tsbs(db.cold), hot_answers) == {}


def test_tsbs_answers_on_a_half_archived_collection_equal_the_hot_ones(archived, hot_answers):
    db = archived.db
    assert archive_stats(db, "cpu")["measurements"] == archived.first_half
    assert _hot_buckets(db, "cpu") > 0
    assert all_answer_diffs(run_tsbs(db.cpu), hot_answers) == {}


def test_lastpoint_finds_series_wholly_archived_beside_series_wholly_hot(archived):
    db = archived.db
    assert archive_stats(db, "mixed")["measurements"] == archived.mixed_archived
    assert db.mixed.count_documents({}) == archived.mixed_count
    top = [{"$group": {"_id": "$tags.hostname", "last": {"$top": {"sortBy": {"time": -1}, "output": "$$ROOT"}}}}]
    for form, pipeline in (("$sort + $group $first", tsbs_pipelines()["lastpoint"]), ("$top", top)):
        got, exp = list(db.mixed.aggregate(pipeline)), list(db.mixed_hot.aggregate(pipeline))
        assert len(exp) == 5
        assert answer_diffs("lastpoint", got, exp) == [], form


def test_find_count_distinct_see_hot_and_archived_measurements_once(archived, cold_per_host):
    db, data = archived.db, archived.tsbs
    total, half = data.count, archived.first_half
    assert db.cpu.count_documents({}) == total
    assert db.command("count", "cpu", query={"time": {"$lt": at(12)}})["n"] == half
    assert db.cpu.count_documents({"time": {"$gte": at(12)}}) == total - half
    assert sorted(db.cpu.distinct("tags.hostname", {"time": {"$lt": at(1)}})) == sorted(data.per_host)
    # one host across the archived / hot boundary, in time order, each timestamp once
    times = [d["time"] for d in db.cpu.find({"tags.hostname": "host_3", "time": {"$gte": at(11), "$lt": at(13)}},
                                            {"time": 1, "_id": 0}).sort("time", 1)]
    assert times == [at(11).replace(tzinfo=None) + dt.timedelta(seconds=10 * i) for i in range(720)]
    oldest = db.cpu.find({"time": {"$lt": at(1)}}, {"time": 1}).sort("time", 1).limit(1).next()["time"]
    assert oldest == T0.replace(tzinfo=None)
    n, s = _sum_user(db.cpu)
    assert n == total and _approx(s, data.sum_user)
    # the fully archived collection, per host
    assert {h: d[1] for h, d in cold_per_host.items()} == {h: v["n"] for h, v in data.per_host.items()}
    for h, v in data.per_host.items():
        assert _approx(cold_per_host[h][2], v["sum"]) and cold_per_host[h][4] == v["max"], h


def test_collstats_and_coll_stats_stage_report_the_archive(archived):
    db = archived.db
    files = parquet_files(archived.roots.cold, DB, "cold")
    a = archive_stats(db, "cold")
    assert a["files"] == len(files) > 0
    assert a["bytes"] == sum(p.stat().st_size for p in files)
    assert a["measurements"] == archived.tsbs.count
    assert isinstance(a["lastRun"], dt.datetime), a
    stage = list(db.cold.aggregate([{"$collStats": {"storageStats": {}}}]))[0]["storageStats"]["archive"]
    assert {k: stage[k] for k in ("files", "bytes", "measurements")} == {k: a[k] for k in ("files", "bytes", "measurements")}
    assert "archive" not in db.command("collStats", "hot"), "no archive section for a collection never archived"


def test_list_collections_shows_the_archive_options(archived):
    infos = {c["name"]: c for c in archived.db.list_collections()}
    arch = infos["cold"]["options"]["archive"]
    assert arch["afterSeconds"] == 60
    assert arch["uri"] == archived.roots.cold.as_uri()
    assert arch["partitionBy"] == ["tags.hostname"]
    assert infos["cold"]["options"]["timeseries"]["timeField"] == "time"
    assert "archive" not in infos["hot"]["options"]


# ---- the files ---------------------------------------------------------------------------------

def test_archive_files_are_hive_partitioned_zstd_parquet_with_statistics_one_day_and_host_each(archived):
    pq = ensure_py("pyarrow.parquet", "pyarrow")
    if pq is None:
        pytest.skip("pyarrow cannot be installed")
    import pyarrow as pa

    duckdb = ensure_py("duckdb")
    root = archived.roots.cold
    files = parquet_files(root)
    assert files
    rows = 0
    for f in files:
        rel = f.relative_to(root).as_posix()
        m = re.fullmatch(rf"db={DB}/coll=cold/date=(\d{{4}}-\d{{2}}-\d{{2}})/part-[^/]+\.parquet", rel)
        assert m, f"{rel} is not db=<db>/coll=<coll>/date=YYYY-MM-DD/part-<...>.parquet"
        pf = pq.ParquetFile(f)
        schema = pf.schema_arrow
        names = schema.names
        ttype = schema.field("time").type
        assert names[0] == "time" and pa.types.is_timestamp(ttype) and ttype.unit == "ms", schema
        assert ttype.tz in ("UTC", "+00:00", "Etc/UTC"), schema
        tag_cols = [n for n in names if n.startswith("tags.")]
        assert set(tag_cols) == {f"tags.{t}" for t in
                                 ("hostname", "region", "datacenter", "rack", "os", "arch", "team", "service",
                                  "service_version", "service_environment")}, names
        assert names[1:1 + len(tag_cols)] == tag_cols, f"meta columns follow the time: {names}"
        assert names[1 + len(tag_cols):] == FIELDS, names
        md = pf.metadata
        assert md.num_row_groups >= 1
        for rg in range(md.num_row_groups):
            for c in range(md.num_columns):
                col = md.row_group(rg).column(c)
                assert col.compression == "ZSTD", (rel, col.path_in_schema, col.compression)
        if duckdb is not None:  # min / max of every column chunk, as written in the footer
            no_stats = duckdb.sql(f"""SELECT row_group_id, path_in_schema FROM parquet_metadata('{f}')
                                      WHERE coalesce(stats_min_value, stats_min) IS NULL
                                         OR coalesce(stats_max_value, stats_max) IS NULL""").fetchall()
            assert not no_stats, f"{rel}: column chunks without min/max statistics: {no_stats}"
        t = pf.read(columns=["time", "tags.hostname"])
        rows += t.num_rows
        days = {d.date().isoformat() for d in t.column("time").to_pylist()}
        assert days == {m.group(1)}, f"{rel}: rows of {days}"
        assert len(set(t.column("tags.hostname").to_pylist())) == 1, f"{rel}: partitionBy tags.hostname"
    assert rows == archived.tsbs.count


@pytest.fixture(scope="module")
def cold_per_host(archived):
    """hostname -> (hostname, count, sum, avg, max of usage_user, min and max time in ms) of
    the fully archived `cold`, computed once."""
    return {h: (h, d["n"], d["sum"], d["avg"], d["max"], _ms(d["tmin"]), _ms(d["tmax"]))
            for h, d in _per_host(archived.db.cold).items()}


def _assert_same_aggregates(got, exp, who):
    assert [r[0] for r in got] == [r[0] for r in exp], who
    for g, e in zip(got, exp):
        assert g[1] == e[1] and g[4] == e[4] and g[5:] == e[5:], (who, g, e)
        assert _approx(g[2], e[2]) and _approx(g[3], e[3]), (who, g, e)


def test_duckdb_reads_the_archive_directory_with_the_servers_aggregates(archived, cold_per_host):
    duckdb = ensure_py("duckdb")
    if duckdb is None:
        pytest.skip("duckdb cannot be installed")
    root = archived.roots.cold
    con = duckdb.connect()
    src = f"read_parquet('{root}/**/*.parquet', hive_partitioning=true)"
    got = con.execute(f"""SELECT "tags.hostname", count(*), sum(usage_user), avg(usage_user), max(usage_user),
                                 epoch_ms(min("time")), epoch_ms(max("time"))
                          FROM {src} GROUP BY 1 ORDER BY 1""").fetchall()
    _assert_same_aggregates(got, [cold_per_host[h] for h in sorted(cold_per_host)], "duckdb")
    parts = con.execute(f"SELECT DISTINCT db, coll, CAST(date AS VARCHAR) FROM {src}").fetchall()
    assert parts == [(DB, "cold", "2016-01-01")]


def test_spark_reads_the_archive_directory_with_the_servers_aggregates(archived, cold_per_host, tmp_path,
                                                                      monkeypatch):
    home, reason = java_home()
    if home is None:
        print(f"SKIP reason: no Java runtime for Spark: {reason}")
        pytest.skip(f"no Java runtime for Spark: {reason}")
    pyspark = ensure_py("pyspark")
    if pyspark is None:
        pytest.skip("pyspark cannot be installed")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    monkeypatch.setenv("JAVA_HOME", str(home))
    spark = (SparkSession.builder.master("local[2]").appName("hourglass-archive-test")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.local.dir", str(tmp_path)).config("spark.sql.warehouse.dir", str(tmp_path / "wh"))
             .getOrCreate())
    try:
        df = spark.read.parquet(str(archived.roots.cold))
        host = F.col("`tags.hostname`")
        rows = (df.groupBy(host.alias("h"))
                .agg(F.count("*").alias("n"), F.sum("usage_user").alias("s"), F.avg("usage_user").alias("a"),
                     F.max("usage_user").alias("m"), F.expr("unix_millis(min(time))").alias("t0"),
                     F.expr("unix_millis(max(time))").alias("t1"))
                .orderBy("h").collect())
        got = [(r.h, r.n, r.s, r.a, r.m, r.t0, r.t1) for r in rows]
        parts = sorted((r.db, r.coll, str(r.date)) for r in df.select("db", "coll", "date").distinct().collect())
    finally:
        spark.stop()
    _assert_same_aggregates(got, [cold_per_host[h] for h in sorted(cold_per_host)], "spark")
    assert parts == [(DB, "cold", "2016-01-01")]


# ---- explain and pruning ----------------------------------------------------------------------------

def test_explain_reports_archive_counters_and_prunes_files_outside_the_query(archived):
    db = archived.db
    files = parquet_files(archived.roots.days, DB, "days")
    total = archive_stats(db, "days")["files"]
    assert total == len(files) and _hot_buckets(db, "days") == 0
    by_day = {}
    for f in files:
        by_day.setdefault(f.parent.name, []).append(f)
    assert sorted(by_day) == ["date=2016-01-01", "date=2016-01-02", "date=2016-01-03"], sorted(by_day)

    counters, reply = explain_archive_counters(db, "days", [{"$match": {}}])
    assert set(counters) == {"archiveFilesExamined", "archiveFilesPruned", "archiveRowGroupsExamined",
                             "archiveRowGroupsPruned"}, reply
    assert (counters["archiveFilesExamined"], counters["archiveFilesPruned"]) == (total, 0), counters

    day2 = {"time": {"$gte": T0 + dt.timedelta(days=1), "$lt": T0 + dt.timedelta(days=2)}}
    assert db.days.count_documents(day2) == 3 * 1440
    counters, reply = explain_archive_counters(db, "days", [{"$match": day2}])
    assert counters["archiveFilesExamined"] == len(by_day["date=2016-01-02"]), counters
    assert counters["archiveFilesPruned"] == total - len(by_day["date=2016-01-02"]), counters

    assert db.days.count_documents({"tags.hostname": "h1"}) == 3 * 1440
    counters, _ = explain_archive_counters(db, "days", [{"$match": {"tags.hostname": "h1"}}])
    assert counters["archiveFilesPruned"] >= total * 2 // 3, f"partitionBy tags.hostname: {counters} of {total}"

    # one hour: whatever files remain, their row groups are examined or pruned, not both
    hour = {"time": {"$gte": T0 + dt.timedelta(days=1, hours=5), "$lt": T0 + dt.timedelta(days=1, hours=6)},
            "tags.hostname": "h2"}
    assert db.days.count_documents(hour) == 60
    counters, _ = explain_archive_counters(db, "days", [{"$match": hour}])
    assert counters["archiveFilesExamined"] >= 1 and counters["archiveRowGroupsExamined"] >= 1, counters
    assert counters["archiveFilesPruned"] >= total - len(by_day["date=2016-01-02"]), counters


# ---- writes and collMod -----------------------------------------------------------------------------

def _small_archived(archived, name, hosts=3, hours=4, **create):
    """A collection of `hosts` x `hours` TSBS-like data whose closed buckets (all but the last
    hour of each host: the open bucket stays hot) are archived; returns (data, archived count)."""
    db = archived.db
    data = TsbsData(hosts, hours * HOUR, seed=len(name))
    root = archived.roots.misc / name
    root.mkdir()
    db.create_collection(name, timeseries=TS, archive=_spec(root), **create)
    load(db[name], data.docs)
    n_archived = hosts * (hours - 1) * MEASUREMENTS_PER_HOUR
    wait_archived(db, name, n_archived, timeout=120)
    return data, n_archived, root


def test_updates_and_deletes_matching_archived_measurements_fail_with_code_20_and_change_nothing(archived):
    db = archived.db
    data, n_archived, _ = _small_archived(archived, "writes")
    last_hour = {"time": {"$gte": at(3)}}
    for op in (lambda: db.writes.delete_many({"time": {"$lt": at(1)}}),
               lambda: db.writes.delete_many({}),
               lambda: db.writes.delete_one({"tags.hostname": "host_0", "time": at(0)}),
               lambda: db.writes.update_many({"tags.hostname": "host_0"}, {"$set": {"tags.flag": 1}}),
               lambda: db.writes.update_many({"time": {"$lt": at(2)}}, {"$set": {"usage_user": -1.0}})):
        with pytest.raises(OperationFailure) as e:
            op()
        assert e.value.code == 20, e.value.details
    assert db.writes.count_documents({}) == data.count
    assert db.writes.count_documents({"tags.flag": 1}) == 0
    assert db.writes.count_documents({"usage_user": -1.0}) == 0
    assert archive_stats(db, "writes")["measurements"] == n_archived
    # the hot part (the open buckets: the last hour) takes updates and deletes as usual
    r = db.writes.update_many(last_hour, {"$set": {"usage_user": -1.0}})
    assert r.modified_count == 3 * MEASUREMENTS_PER_HOUR
    assert db.writes.count_documents({"usage_user": -1.0}) == 3 * MEASUREMENTS_PER_HOUR
    r = db.writes.delete_many({"tags.hostname": "host_1", **last_hour})
    assert r.deleted_count == MEASUREMENTS_PER_HOUR
    assert db.writes.count_documents({}) == data.count - MEASUREMENTS_PER_HOUR


def test_collmod_archive_off_stops_archiving_and_archived_data_stays_queryable(archived):
    db = archived.db
    # the module's `cpu`: archive off, then 12 hours loaded whose buckets closed as they filled
    time.sleep(3)  # three mover intervals
    assert archive_stats(db, "cpu")["measurements"] == archived.first_half
    assert db.cpu.count_documents({}) == archived.tsbs.count
    # collMod sets an archive on a collection that had none, then turns it off
    data = TsbsData(3, 3 * HOUR, seed=5)
    root = archived.roots.misc / "later"
    root.mkdir()
    db.create_collection("later", timeseries=TS)
    load(db.later, data.docs)
    time.sleep(2)
    assert archive_stats(db, "later").get("measurements", 0) == 0
    db.command("collMod", "later", archive=_spec(root))
    opts = {c["name"]: c["options"] for c in db.list_collections()}["later"]
    assert opts["archive"]["uri"] == root.as_uri(), opts
    # hours 0 and 1 are closed; hour 2 too if collMod closed the open buckets
    closed, with_open = 2 * 3 * MEASUREMENTS_PER_HOUR, data.count
    wait_for(lambda: archive_stats(db, "later").get("measurements") in (closed, with_open), 120,
             f"{closed} or {with_open} measurements archived")
    time.sleep(2)
    n = archive_stats(db, "later")["measurements"]
    files = parquet_files(root)
    db.command("collMod", "later", archive="off")
    more = TsbsData(3, 6 * HOUR, seed=5).between(3 * HOUR, 6 * HOUR)  # closes hours 2..4
    load(db.later, more)
    time.sleep(3)
    assert archive_stats(db, "later")["measurements"] == n
    assert parquet_files(root) == files
    assert db.later.count_documents({}) == data.count + len(more)
    assert db.later.count_documents({"time": {"$lt": at(3)}}) == data.count


def test_ttl_deletes_archived_files_past_expire_after_seconds(archived):
    db = archived.db
    data, n_archived, root = _small_archived(archived, "ttl", hours=3)
    assert parquet_files(root)
    now = dt.datetime.now(dt.timezone.utc)
    recent = [{"time": now - dt.timedelta(minutes=5 - i), "tags": {"hostname": "recent"}, "usage_user": float(i)}
              for i in range(3)]
    db.ttl.insert_many(recent)
    db.command("collMod", "ttl", expireAfterSeconds=86_400)
    wait_for(lambda: not [p for p in parquet_files(root) if "date=2016-" in p.as_posix()], 30,
             "the TTL monitor (every 1 s) to delete the 2016 files")
    wait_for(lambda: db.ttl.count_documents({}) == 3, 30, "only the recent measurements left")
    assert sorted(d["usage_user"] for d in db.ttl.find()) == [0.0, 1.0, 2.0]
    a = archive_stats(db, "ttl")
    assert a.get("measurements", 0) in (0, 3) and a.get("files", 0) == len(parquet_files(root)), a


# ---- specs and parameters ---------------------------------------------------------------------------

@pytest.mark.parametrize("spec, codes", [
    ({"afterSeconds": -1, "uri": "file:///tmp/hg-bad"}, {2}),
    ({"afterSeconds": "60", "uri": "file:///tmp/hg-bad"}, {2, 14}),
    ({"uri": "file:///tmp/hg-bad"}, {2, 40414}),
    ({"afterSeconds": 60}, {2, 40414}),
    ({"afterSeconds": 60, "uri": "ftp://host/dir"}, {2}),
    ({"afterSeconds": 60, "uri": "not a uri"}, {2}),
    ({"afterSeconds": 60, "uri": "file:///tmp/hg-bad", "bogus": 1}, {2, 40415}),
    ({"afterSeconds": 60, "uri": "file:///tmp/hg-bad", "partitionBy": ["usage_user"]}, {2}),
    ({"afterSeconds": 60, "uri": "file:///tmp/hg-bad", "partitionBy": ["time"]}, {2}),
    ({"afterSeconds": 60, "uri": "file:///tmp/hg-bad", "partitionBy": "tags.hostname"}, {2, 14}),
    ("on", {2, 14}),
], ids=["negative-after", "string-after", "no-after", "no-uri", "ftp-scheme", "not-a-uri", "unknown-field",
        "partition-by-a-measurement-field", "partition-by-time", "partition-by-not-an-array", "not-a-document"])
def test_bad_archive_specs_are_rejected(archived, spec, codes):
    db = archived.db
    with pytest.raises(OperationFailure) as e:
        db.create_collection("bad", timeseries=TS, archive=spec)
    assert e.value.code in codes, e.value.details
    assert "bad" not in db.list_collection_names()
    if spec != "on":
        with pytest.raises(OperationFailure) as e:
            db.command("collMod", "hot", archive=spec)
        assert e.value.code in codes, e.value.details


def test_archive_on_a_collection_that_is_not_time_series_is_invalid_options(archived):
    db = archived.db
    with pytest.raises(OperationFailure) as e:
        db.create_collection("plain", archive={"afterSeconds": 60, "uri": "file:///tmp/hg-plain"})
    assert e.value.code == 72, e.value.details
    db.create_collection("plain2")
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "plain2", archive={"afterSeconds": 60, "uri": "file:///tmp/hg-plain"})
    assert e.value.code == 72, e.value.details


def test_archive_mover_parameters_have_their_defaults_and_bounds(client):
    admin = client.admin
    params = admin.command("getParameter", "*")
    assert params["archiveMoverIntervalSecs"] == 60
    assert params["archiveMoverMaxBucketsPerPass"] == 1000
    with pytest.raises(OperationFailure):
        admin.command("setParameter", 1, archiveMoverIntervalSecs=0)
    admin.command("setParameter", 1, archiveMoverIntervalSecs=5)
    try:
        assert admin.command("getParameter", 1, archiveMoverIntervalSecs=1)["archiveMoverIntervalSecs"] == 5
    finally:
        admin.command("setParameter", 1, archiveMoverIntervalSecs=60)


def test_metrics_expose_the_archive_totals(archived):
    with urllib.request.urlopen(f"http://127.0.0.1:{archived.http_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        m = re.match(r"(hourglass_archive_(?:files|bytes|measurements))(\{[^}]*\})?\s+(\S+)", line)
        if m:
            values.setdefault(m.group(1), []).append((m.group(2) or "", float(m.group(3))))
    assert set(values) == {"hourglass_archive_files", "hourglass_archive_bytes", "hourglass_archive_measurements"}, \
        [l for l in text.splitlines() if "archive" in l]
    cold = archive_stats(archived.db, "cold")
    for name, key in (("files", "files"), ("bytes", "bytes"), ("measurements", "measurements")):
        samples = values[f"hourglass_archive_{name}"]
        labelled = [v for labels, v in samples if 'coll="cold"' in labels or f'ns="{DB}.cold"' in labels]
        if labelled:
            assert labelled == [cold[key]], (name, samples)
        else:  # one total over every collection
            assert max(v for _, v in samples) >= cold[key], (name, samples)


# ---- crash safety --------------------------------------------------------------------------------------

def _assert_archived_to_the_end_once(db, data):
    """Every measurement counted once before and after the mover archives the rest."""
    _assert_every_measurement_once(db, "cpu", data)
    wait_archived(db, "cpu", data.count, timeout=120)
    _assert_every_measurement_once(db, "cpu", data)
    assert _hot_buckets(db, "cpu") == 0


def _assert_every_measurement_once(db, coll, data):
    n, s = _sum_user(db[coll])
    assert n == data.count, f"{n} measurements, loaded {data.count}"
    assert _approx(s, data.sum_user), f"sum of usage_user {s}, loaded {data.sum_user}"
    assert db[coll].count_documents({}) == data.count


def test_kill_9_at_random_moments_while_archiving_loses_and_duplicates_nothing(tmp_path):
    data = TsbsData(20, 4 * HOUR, seed=9)  # 28,800 measurements in 80 one-hour buckets
    dbpath, root = tmp_path / "db", tmp_path / "root"
    dbpath.mkdir()
    root.mkdir()
    args = (*MOVER, "--setParameter", "archiveMoverMaxBucketsPerPass=2")
    with running_server(*args, dbpath=dbpath) as (_, port, _):
        db = _client(port)[DB]
        db.create_collection("cpu", timeseries=TS, archive=_spec(root))
        load(db.cpu, data.docs)
    rnd = random.Random(20261127)
    progress = []  # archive.measurements after each restart, and just before each kill
    for attempt in range(8):
        with running_server(*args, dbpath=dbpath, exit_on_failure=False) as (proc, port, log):
            db = _client(port)[DB]
            # every restart, whatever was cut short: each measurement exactly once
            _assert_every_measurement_once(db, "cpu", data)
            at_start = archive_stats(db, "cpu").get("measurements", 0)
            if at_start == data.count:
                progress.append((at_start, None))
                break
            # until the kill, reads racing the mover's passes see every measurement once
            deadline = time.monotonic() + rnd.uniform(0.3, 2.0)
            while time.monotonic() < deadline:
                assert db.cpu.count_documents({}) == data.count, f"restart {attempt}, racing the mover"
            before_kill = archive_stats(db, "cpu").get("measurements", 0)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            progress.append((at_start, before_kill))
    mid = [p for p in progress if p[1] is not None and 0 < p[1] < data.count]
    print(f"archive.measurements (after restart, before kill -9): {progress}")
    with running_server(*args, dbpath=dbpath, exit_on_failure=False) as (_, port, log):
        db = _client(port)[DB]
        _assert_archived_to_the_end_once(db, data)
        # no orphan: once stable, the files on disk are those the manifest counts
        a = wait_for(lambda: (s := archive_stats(db, "cpu"))["files"] == len(parquet_files(root)) and s, 20,
                     "files on disk == collStats archive.files")
        assert a["bytes"] == sum(p.stat().st_size for p in parquet_files(root))
    assert len(mid) >= 2, f"too few kills landed while archiving ({progress}): the test proved little"


def _abort_at_fail_point(dbpath, root, data, fail_point):
    """Loads `data` (no archive yet), restarts (closing every bucket), turns `fail_point` on and
    the archive on: the mover aborts the server. Returns the .parquet files on disk then."""
    with running_server(*MOVER, dbpath=dbpath) as (_, port, _):
        db = _client(port)[DB]
        db.create_collection("cpu", timeseries=TS)
        load(db.cpu, data.docs)
    with running_server(*MOVER, "--setParameter", "enableTestCommands=1", dbpath=dbpath) as (proc, port, log):
        client = _client(port)
        client.admin.command("configureFailPoint", fail_point, mode="alwaysOn")
        client[DB].command("collMod", "cpu", archive=_spec(root))
        try:
            proc.wait(timeout=60)
        except Exception:
            pytest.fail(f"{fail_point}: the server did not abort within 60 s; log:\n{_log_tail(log)}")
        assert proc.returncode != 0, f"{fail_point}: exit status {proc.returncode}"
    return parquet_files(root)


@pytest.mark.parametrize("fail_point", ["archiveMoverCrashBeforeCommit", "archiveMoverCrashAfterCommit"])
def test_abort_at_an_archive_fail_point_loses_and_duplicates_nothing(tmp_path, fail_point):
    data = TsbsData(4, 3 * HOUR, seed=3)  # 4,320 measurements, 12 buckets
    dbpath, root = tmp_path / "db", tmp_path / "root"
    dbpath.mkdir()
    root.mkdir()
    at_abort = _abort_at_fail_point(dbpath, root, data, fail_point)
    assert at_abort, f"{fail_point}: the aborted pass had uploaded no file"
    # restart with the mover idle (its first pass an hour away): what the restart alone
    # makes of the aborted pass; an orphan file must not be read
    idle = ("--setParameter", "archiveMoverIntervalSecs=3600")
    with running_server(*idle, dbpath=dbpath, exit_on_failure=False) as (_, port, log):
        db = _client(port)[DB]
        _assert_every_measurement_once(db, "cpu", data)
        a = archive_stats(db, "cpu")
        if fail_point == "archiveMoverCrashBeforeCommit":
            assert a.get("measurements", 0) == 0 and a.get("files", 0) == 0, a
        else:
            assert a["files"] >= 1 and 0 < a["measurements"] <= data.count, f"the committed pass stays archived: {a}"
            assert a["files"] <= len(parquet_files(root)) and set(parquet_files(root)) <= set(at_abort)
    # the mover resumes (its first pass deletes unrecorded files): everything archived, once
    with running_server(*MOVER, dbpath=dbpath, exit_on_failure=False) as (_, port, log):
        db = _client(port)[DB]
        _assert_archived_to_the_end_once(db, data)
        files = parquet_files(root)
        assert archive_stats(db, "cpu")["files"] == len(files)
        if fail_point == "archiveMoverCrashBeforeCommit":
            assert not set(at_abort) & set(files), "the uncommitted (orphan) files are deleted"


# ---- S3 ------------------------------------------------------------------------------------------------

@pytest.fixture
def moto_s3():
    """A moto S3 server on a free port (ThreadedMotoServer, PyPI moto[server]); yields
    (endpoint, boto3 S3 client)."""
    moto_server = ensure_py("moto.server", "moto[server]")
    boto3 = ensure_py("boto3")
    if moto_server is None or boto3 is None:
        pytest.skip("moto[server] / boto3 cannot be installed")
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                      region_name="us-east-1")
    try:
        yield endpoint, s3
    finally:
        server.stop()


def test_s3_archive_through_moto_keeps_every_measurement_in_the_hive_layout(tmp_path, moto_s3):
    endpoint, s3 = moto_s3
    s3.create_bucket(Bucket="hg-archive")
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    data = TsbsData(4, 4 * HOUR, seed=4)
    dbpath = tmp_path / "db"
    dbpath.mkdir()
    with running_server(*MOVER, dbpath=dbpath, env=env) as (_, port, _):
        db = _client(port)[DB]
        db.create_collection("cpu", timeseries=TS, archive={"afterSeconds": 60, "uri": "s3://hg-archive/tier/cold"})
        load(db.cpu, data.docs)
    with running_server(*MOVER, dbpath=dbpath, env=env, exit_on_failure=False) as (_, port, log):
        db = _client(port)[DB]
        a = wait_archived(db, "cpu", data.count, timeout=120)
        _assert_every_measurement_once(db, "cpu", data)
        assert _hot_buckets(db, "cpu") == 0
        objs = s3.list_objects_v2(Bucket="hg-archive").get("Contents", [])
        keys = [o["Key"] for o in objs]
        bad = [k for k in keys if not re.fullmatch(rf"tier/cold/db={DB}/coll=cpu/date=2016-01-01/part-[^/]+\.parquet", k)]
        assert keys and not bad, keys
        assert a["files"] == len(keys) and a["bytes"] == sum(o["Size"] for o in objs), (a, objs)
        pq = ensure_py("pyarrow.parquet", "pyarrow")
        if pq is not None:
            import io

            rows = sum(pq.ParquetFile(io.BytesIO(s3.get_object(Bucket="hg-archive", Key=k)["Body"].read()))
                       .metadata.num_rows for k in keys)
            assert rows == data.count
        assert all_answer_diffs(run_tsbs(db.cpu), _reference_answers(tmp_path, data)) == {}


def _reference_answers(tmp_path, data):
    """The TSBS answers of `data` loaded hot into a fresh server."""
    with running_server() as (_, port, _):
        db = _client(port)[DB]
        db.create_collection("cpu", timeseries=TS)
        load(db.cpu, data.docs)
        return run_tsbs(db.cpu)
