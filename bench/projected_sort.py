#!/usr/bin/env python3
"""high-cpu-all in its projected and sorted form, one run, Hourglass beside DuckDB and
ClickHouse at their best, with the stages added one at a time on Hourglass:

    bench/projected_sort.py --uri URI --csv cpu.csv [--coll cpu] [--runs 5]

Hourglass (loaded beforehand with the same rows, e.g. by bench/projected_sort.sh):
  $match {usage_user > 90, 06:00 <= time < 18:00}
  + $project {_id: 0, time: 1, host: "$tags.hostname", usage_user: 1}
  + $sort {time: 1, host: 1}
read as raw BSON batches (no client-side decoding), median of RUNS after a warm-up.
DuckDB in-memory with naive UTC timestamps (../shared/duckdb_baseline.py's table) and
ClickHouse (chDB, MergeTree ordered by hostname, time, as ../shared/chdb_baseline.py) run
`SELECT time, hostname, usage_user ... ORDER BY time, hostname`, fetched as Arrow (their
fastest form). Row counts must agree. Prints a markdown table with ratios to the faster peer.
"""
import argparse
import datetime
import statistics
import time

from pymongo import MongoClient

SQL_WHERE = "usage_user > 90.0 AND time >= '2016-01-01 06:00:00' AND time < '2016-01-01 18:00:00'"


def timed(fn, runs):
    fn()
    times, rows = [], None
    for _ in range(runs):
        t = time.perf_counter()
        rows = fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), rows


def count_documents(batch):
    """Documents in a raw BSON batch (each starts with its int32 length)."""
    n, at = 0, 0
    while at < len(batch):
        at += int.from_bytes(batch[at:at + 4], "little")
        n += 1
    return n


def hourglass(uri, coll, runs):
    c = MongoClient(uri)["bench"][coll]
    t0 = datetime.datetime(2016, 1, 1)
    m = {"$match": {"usage_user": {"$gt": 90.0},
                    "time": {"$gte": t0 + datetime.timedelta(hours=6), "$lt": t0 + datetime.timedelta(hours=18)}}}
    p = {"$project": {"_id": 0, "time": 1, "host": "$tags.hostname", "usage_user": 1}}
    s = {"$sort": {"time": 1, "host": 1}}

    def run(pipeline):
        def go():
            batches = list(c.aggregate_raw_batches(pipeline, batchSize=1_000_000))
            return sum(count_documents(b) for b in batches)
        return go

    return {
        "hourglass $match": timed(run([m]), runs),
        "hourglass $match+$project": timed(run([m, p]), runs),
        "hourglass $match+$project+$sort": timed(run([m, p, s]), runs),
    }


def duckdb_mem(csv, runs):
    import duckdb
    con = duckdb.connect()
    con.execute(f"CREATE TABLE cpu AS SELECT make_timestamp(time * 1000) AS time, * EXCLUDE (time) FROM read_csv_auto('{csv}')")
    q = f"SELECT time, hostname, usage_user FROM cpu WHERE {SQL_WHERE} ORDER BY time, hostname"
    return timed(lambda: con.sql(q).to_arrow_table().num_rows, runs)


def clickhouse(csv, runs):
    from chdb import session
    s = session.Session()
    s.query("CREATE DATABASE IF NOT EXISTS b")
    s.query("DROP TABLE IF EXISTS b.cpu")
    s.query(f"""CREATE TABLE b.cpu ENGINE = MergeTree ORDER BY (hostname, time) AS
     SELECT toDateTime64(time / 1000, 3, 'UTC') AS time, * EXCEPT (time)
     FROM file('{csv}', CSVWithNames) SETTINGS schema_inference_make_columns_nullable = 0""")
    q = f"SELECT time, hostname, usage_user FROM b.cpu WHERE {SQL_WHERE} ORDER BY time, hostname"
    import pyarrow as pa

    def go():
        with pa.ipc.open_file(pa.BufferReader(s.query(q, "Arrow").bytes())) as f:
            return f.read_all().num_rows
    return timed(go, runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--coll", default="cpu")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    results = hourglass(a.uri, a.coll, a.runs)
    peers = {}
    for name, fn in (("duckdb (in-memory)", duckdb_mem), ("clickhouse (chdb)", clickhouse)):
        try:
            peers[name] = fn(a.csv, a.runs)
        except ImportError as e:
            print(f"{name} skipped: {e}")
    best = min((ms for ms, _ in peers.values()), default=None)
    print("| system / form | median ms | rows | ratio to the faster peer |")
    print("|---|---|---|---|")
    for name, (ms, rows) in {**results, **peers}.items():
        ratio = f"{ms / best:.2f}x" if best else "-"
        print(f"| {name} | {ms:.1f} | {rows} | {ratio} |")


if __name__ == "__main__":
    main()
