#!/usr/bin/env python3
"""Online archive benchmark, one run (see bench/README.md; bench/archive.sh builds and calls it).

  archive.py --bson cpu.bson --work DIR [--bin target/release/hourglass]
             [--ingest target/release/ingest] [--runs 5] [--partition-by tags.hostname] [--out FILE]

1. Starts Hourglass on DIR/db (mover every 1 s), loads the BSON stream with
   `target/release/ingest` into bench.cpu, stops it (SIGTERM: a clean shutdown closes the
   open buckets, so every bucket is archivable) and measures the dbpath (allocated blocks).
2. Restarts it, times the seven TSBS queries on the hot data (warm-up + RUNS runs, median),
   then `collMod cpu archive: {afterSeconds: 60, uri: file://DIR/archive}` and waits until
   collStats archive.measurements equals the rows (the mover's throughput), times the
   queries again on the archived data and checks their answers equal the hot ones; explain's
   archive counters of each query are printed.
3. DuckDB (PyPI) over the same Parquet files (`read_parquet('DIR/archive/**/*.parquet')`),
   the SQL of ../shared/duckdb_baseline.py on a view naming the columns as its table does,
   in two forms: time cast to a naive TIMESTAMP holding UTC (duckdb_baseline.py's fastest
   type) and time left a TIMESTAMPTZ (filters then reach the Parquet statistics); each
   query's faster form is the DuckDB figure. Its answers are checked against Hourglass's
   with bench/tsbs_compare.py's checks.
4. Prints markdown tables: storage (bytes per value hot / archived), the mover, the queries.

Exit status 1 if an answer differs (after the tables). Timings are only printed.
"""
import argparse, atexit, datetime, json, signal, socket, statistics, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(HERE))
from archive_helpers import (TSBS_ORDER, answer_diffs, archive_stats, explain_archive_counters,  # noqa: E402
                             parquet_files, tsbs_pipelines)
import tsbs_compare  # noqa: E402
from tsbs_peers import duckdb_queries, jsonable  # noqa: E402

FIELDS_PER_ROW = 10


def log(*a):
    print("==", *a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def allocated(path):
    """Allocated bytes (du) of the files under `path`."""
    return sum(p.stat().st_blocks * 512 for p in Path(path).rglob("*") if p.is_file())


LIVE = []  # servers started here, stopped at exit whatever happens


@atexit.register
def _stop_live():
    for p in LIVE:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


class Server:
    def __init__(self, binary, dbpath, *args):
        self.port = free_port()
        self.logf = open(f"{dbpath}.log", "ab")
        self.proc = subprocess.Popen([binary, "--dbpath", str(dbpath), "--port", str(self.port), "--bind_ip",
                                      "127.0.0.1", "--quiet", *args],
                                     stdout=self.logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        LIVE.append(self.proc)
        self.uri = f"mongodb://127.0.0.1:{self.port}/?directConnection=true"
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"hourglass exited ({self.proc.returncode}); see {dbpath}.log")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("hourglass did not listen within 60 s")
                time.sleep(0.1)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()
        self.logf.close()


def timed(fn, runs):
    fn()  # warm-up
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1000)
    return statistics.median(ts)


def time_queries(db, runs):
    """name -> {ms, answers} on bench.cpu (answers decoded from the warm-up run; the timed
    runs read raw BSON, as tsbs_query does)."""
    from bson.codec_options import CodecOptions
    from bson.raw_bson import RawBSONDocument

    raw = db.cpu.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    out = {}
    for name, p in tsbs_pipelines().items():
        answers = list(db.cpu.aggregate(p, allowDiskUse=True))
        ms = timed(lambda: list(raw.aggregate(p, allowDiskUse=True)), runs)
        out[name] = {"ms": ms, "answers": answers}
        log(f"{name}: {ms:.1f} ms, {len(answers)} rows")
    return out


def to_json(v):
    """pymongo values as tsbs_compare.py expects them: dates as {"$date": ms}."""
    if isinstance(v, datetime.datetime):
        return jsonable(v)
    if isinstance(v, dict):
        return {k: to_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [to_json(x) for x in v]
    return v


def duckdb_side(files_glob, runs):
    """name -> {ms, form, columns, answers}: duckdb_baseline.py's SQL over the Parquet files."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    src = f"read_parquet('{files_glob}', hive_partitioning = false)"
    cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]

    def view(time_expr):
        sel = []
        for c in cols:
            if c == "time":
                sel.append(f"{time_expr} AS time")
            elif c.startswith("tags."):
                sel.append(f'"{c}" AS "{c[5:]}"')
            else:
                sel.append(f'"{c}"')
        return f"SELECT {', '.join(sel)} FROM {src}"

    forms = {"naive": view('"time"::TIMESTAMP'), "tz": view('"time"')}
    out = {}
    for name, q in duckdb_queries().items():
        best = None
        for form, body in forms.items():
            con.execute(f"CREATE OR REPLACE VIEW cpu AS {body}")
            try:
                ms = timed(lambda: con.execute(q).fetchall(), runs)
            except Exception as e:  # report, go on
                log(f"duckdb {name} ({form}): {e}")
                continue
            if best is None or ms < best["ms"]:
                cur = con.execute(q)
                best = {"ms": ms, "form": form, "columns": [d[0] for d in cur.description],
                        "answers": [[jsonable(v) for v in row] for row in cur.fetchall()]}
        out[name] = best or {"error": "both forms failed"}
        log(f"duckdb {name}: {out[name].get('ms')} ms ({out[name].get('form')})")
    return out


def fmt_ms(v):
    return f"{v:.1f}" if isinstance(v, (int, float)) else "n/a"


def ratio(a, b):
    return f"{a / b:.2f}x" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else "n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bson", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--bin", default=str(ROOT / "target/release/hourglass"))
    ap.add_argument("--ingest", default=str(ROOT / "target/release/ingest"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--partition-by", default="", help="comma-separated meta paths (archive partitionBy)")
    ap.add_argument("--archive-timeout", type=float, default=3600)
    ap.add_argument("--title", default="")
    ap.add_argument("--out")
    a = ap.parse_args()
    from pymongo import MongoClient

    work = Path(a.work)
    dbpath, root = work / "db", work / "archive"
    dbpath.mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    mover = ("--setParameter", "archiveMoverIntervalSecs=1")
    status = 0
    lines = []

    # ---- load, clean restart (closes the open buckets), hot figures ----
    srv = Server(a.bin, dbpath, *mover)
    log(f"load {a.bson} ({a.clients} clients)")
    r = subprocess.run([a.ingest, a.bson, "--uri", srv.uri, "--clients", str(a.clients), "--coll", "cpu"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"ingest failed: {r.stderr[-2000:]}")
    load_line = next((l for l in r.stdout.splitlines() if l.startswith("rows/s:")), "rows/s: n/a")
    srv.stop()
    hot_du = allocated(dbpath)
    srv = Server(a.bin, dbpath, *mover)
    client = MongoClient(srv.uri)
    db = client.bench
    stats = db.command("collStats", "cpu")
    rows = db.cpu.count_documents({})
    values = rows * FIELDS_PER_ROW
    log(f"{rows} rows; hot queries (warm-up + {a.runs} runs)")
    hot = time_queries(db, a.runs)

    # ---- archive everything ----
    spec = {"afterSeconds": 60, "uri": root.as_uri()}
    if a.partition_by:
        spec["partitionBy"] = a.partition_by.split(",")
    log(f"collMod archive {spec}")
    t0 = time.monotonic()
    db.command("collMod", "cpu", archive=spec)
    deadline = t0 + a.archive_timeout
    last = {}
    while True:
        last = archive_stats(db, "cpu")
        if last.get("measurements") == rows:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"not archived within {a.archive_timeout} s: {last}")
        time.sleep(0.2)
    archive_s = time.monotonic() - t0
    hot_buckets_left = db["system.buckets.cpu"].count_documents({})
    files = parquet_files(root)
    parquet_bytes = sum(p.stat().st_size for p in files)
    log(f"archived in {archive_s:.1f} s: {len(files)} files, {parquet_bytes} bytes; archived queries")
    cold = time_queries(db, a.runs)
    explains = {}
    for name, p in tsbs_pipelines().items():
        try:
            explains[name] = explain_archive_counters(db, "cpu", p)[0]
        except Exception as e:
            explains[name] = {"error": str(e)}
    client.close()
    srv.stop()
    after_du = allocated(dbpath)

    # ---- DuckDB over the same files ----
    log("duckdb over the Parquet files")
    dk = duckdb_side(f"{root}/**/*.parquet", a.runs)

    # ---- tables ----
    lines.append(f"\n### Online archive: storage{a.title}\n")
    lines.append("| tier | bytes | bytes/value | files |")
    lines.append("|---|---|---|---|")
    lines.append(f"| hot: dbpath after a clean shutdown (du) | {hot_du:,} | {hot_du / values:.2f} | |")
    lines.append(f"| hot: collStats storageSize | {stats.get('storageSize', 0):,} | "
                 f"{stats.get('storageSize', 0) / values:.2f} | |")
    lines.append(f"| archived: Parquet files | {parquet_bytes:,} | {parquet_bytes / values:.2f} | {len(files)} |")
    lines.append(f"| dbpath after archiving (du, clean shutdown) | {after_du:,} | {after_du / values:.2f} | |")
    lines.append(f"\nLoad: {rows:,} rows ({values:,} values), {load_line}. Mover: {archive_s:.1f} s for "
                 f"{rows:,} rows = {rows / archive_s:,.0f} rows/s (archiveMoverIntervalSecs=1, "
                 f"partitionBy {spec.get('partitionBy', 'none')}); collStats archive {last}; "
                 f"hot buckets left {hot_buckets_left}.")
    lines.append(f"\n### Online archive: TSBS queries, hot vs archived vs DuckDB on the same Parquet "
                 f"(median of {a.runs} runs after a warm-up){a.title}\n")
    lines.append("| query | hot ms | archived ms | duckdb parquet ms (form) | archived/hot | archived/duckdb "
                 "| archived = hot | duckdb = archived | archive files examined/pruned, row groups examined/pruned |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    notes = []
    for name in TSBS_ORDER:
        h, c, d = hot[name], cold[name], dk.get(name) or {}
        diffs = answer_diffs(name, c["answers"], h["answers"])
        same_hot = "yes" if not diffs else "**NO**"
        notes += [f"- {name}: archived vs hot: {x}" for x in diffs]
        if "error" in d:
            same_dk = "n/a"
            notes.append(f"- {name}: duckdb: {d['error']}")
        else:
            verdict, errs = tsbs_compare.check(name, {"answers": to_json(c["answers"])}, d)
            same_dk = verdict
            notes += [f"- {name}: archived vs duckdb: {x}" for x in errs]
            if not verdict.startswith("yes"):
                status = 1
        if diffs:
            status = 1
        e = explains[name]
        ex = e.get("error") or "/".join(str(e.get(k, "-")) for k in (
            "archiveFilesExamined", "archiveFilesPruned", "archiveRowGroupsExamined", "archiveRowGroupsPruned"))
        lines.append(f"| {name} | {fmt_ms(h['ms'])} | {fmt_ms(c['ms'])} | {fmt_ms(d.get('ms'))} ({d.get('form', '-')}) "
                     f"| {ratio(c['ms'], h['ms'])} | {ratio(c['ms'], d.get('ms'))} | {same_hot} | {same_dk} | {ex} |")
    if notes:
        lines.append("\nNotes:\n")
        lines += notes
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    json.dump({"hot": {k: v["ms"] for k, v in hot.items()}, "archived": {k: v["ms"] for k, v in cold.items()},
               "duckdb": {k: v.get("ms") for k, v in dk.items()}, "hot_du": hot_du, "parquet_bytes": parquet_bytes,
               "files": len(files), "rows": rows, "archive_seconds": archive_s},
              open(work / "archive-bench.json", "w"))
    sys.exit(status)


if __name__ == "__main__":
    main()
