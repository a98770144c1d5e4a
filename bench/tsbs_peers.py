#!/usr/bin/env python3
"""TSBS cpu-only query benchmark, peers' side (see bench/README.md).

  tsbs_peers.py influx --port P [--db bench] [--runs 5] --out influx.json
      times the queries of ../shared/influx_queries.py over HTTP, as that script does
      (a new connection per query, the JSON body read but not parsed).
  tsbs_peers.py duckdb CSV --file-db PATH [--runs 5] --out duckdb.json
      loads the CSV into a DuckDB file db and an in-memory db (the load of
      ../shared/duckdb_baseline.py), times its queries on both and exports the
      in-memory answers (the file db's are checked equal to them).
  tsbs_peers.py duckdb CSV --file-db PATH --index --host H --from MS --to MS ...
      the same for one query: all rows of host H with from <= time < to.
  tsbs_peers.py chdb CSV [--runs 5] --out chdb.json
      ClickHouse in-process (PyPI chdb): the table and queries of ../shared/chdb_baseline.py,
      results fetched as Arrow, as that script times them (its high-cpu-all is the projected
      and sorted form, reported as high-cpu-all-projected).

DuckDB also runs high-cpu-all-projected, the projected and sorted form in DuckDB's SQL
(`SELECT time, hostname, usage_user ... ORDER BY time, hostname`), which
duckdb_baseline.py does not have.

The SQL and InfluxQL are read from the files in ../shared (so they stay the single
source): QUERIES of influx_queries.py (a literal) and M / Q of duckdb_baseline.py (the
two assignments are executed alone). JSON values: timestamps as {"$date": epoch ms}.
"""
import argparse, ast, datetime, http.client, json, os, statistics, sys, time, urllib.parse

SHARED = os.environ.get("SHARED") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")


def _module(name):
    with open(os.path.join(SHARED, name)) as f:
        return ast.parse(f.read(), name)


def influx_queries():
    for node in _module("influx_queries.py").body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "QUERIES" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("QUERIES not found in influx_queries.py")


def duckdb_queries():
    mod = _module("duckdb_baseline.py")
    keep = [n for n in mod.body if isinstance(n, ast.Assign)
            and any(getattr(t, "id", None) in ("M", "Q") for t in n.targets)]
    ns = {}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "duckdb_baseline.py", "exec"), ns)
    if "Q" not in ns:
        raise SystemExit("Q not found in duckdb_baseline.py")
    return ns["Q"]


def chdb_script():
    """chdb_baseline.py's assignments (F, M, W, Q) and its CREATE TABLE statement (a
    function of `csv`), executed alone."""
    mod = _module("chdb_baseline.py")
    keep = [n for n in mod.body if isinstance(n, ast.Assign)
            and any(getattr(t, "id", None) in ("F", "M", "W", "Q") for t in n.targets)]
    create = None
    for n in ast.walk(mod):
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.JoinedStr) \
                and "CREATE TABLE" in ast.unparse(n.args[0]):
            create = n.args[0]
    if create is None:
        raise SystemExit("CREATE TABLE not found in chdb_baseline.py")
    keep.append(ast.Assign(targets=[ast.Name("CREATE", ast.Store())],
                           value=ast.Lambda(ast.arguments([], [ast.arg("csv")], None, [], [], None, []), create)))
    ns = {}
    exec(compile(ast.fix_missing_locations(ast.Module(body=keep, type_ignores=[])), "chdb_baseline.py", "exec"), ns)
    return ns["CREATE"], ns["Q"]


def median_ms(fn, runs):
    ts = []
    out = None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        ts.append((time.perf_counter() - t) * 1000)
    return statistics.median(ts), ts, out


# ---- InfluxDB -------------------------------------------------------------------------

def cmd_influx(a):
    res = {}
    for name, q in influx_queries().items():
        def run():
            c = http.client.HTTPConnection(a.host, a.port)
            c.request("GET", f"/query?db={a.db}&q=" + urllib.parse.quote(q))
            r = c.getresponse(); body = r.read()
            if r.status != 200 or b'"error"' in body:
                raise RuntimeError(f"status {r.status}: {body[:300]!r}")
            return body
        try:
            run()  # warm-up
            med, ts, body = median_ms(run, a.runs)
            res[name] = {"median_ms": med, "runs_ms": ts, "bytes": len(body), "query": q}
        except Exception as e:  # report, go on with the next query
            res[name] = {"error": str(e), "query": q}
        print(f"influx {name}: {res[name].get('median_ms', res[name].get('error'))}", file=sys.stderr)
    json.dump({"queries": res}, open(a.out, "w"))


# ---- DuckDB ---------------------------------------------------------------------------

def jsonable(v):
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        return {"$date": round(v.timestamp() * 1000)}
    if isinstance(v, float) and v != v:
        return "nan"
    if hasattr(v, "is_finite"):  # Decimal
        return float(v)
    return v


def rows_close(a, b, rel=1e-9):
    """Two result rows equal, floats to `rel` relative tolerance."""
    return len(a) == len(b) and all(
        x == y or (isinstance(x, float) and isinstance(y, float) and abs(x - y) <= rel * max(abs(x), abs(y)))
        for x, y in zip(a, b))


def load(con, csv):
    try:
        con.execute("SET TimeZone = 'UTC'")  # date_trunc on TIMESTAMPTZ uses the session zone
    except Exception as e:
        print(f"duckdb: SET TimeZone failed ({e}); relying on the process zone", file=sys.stderr)
    t = time.perf_counter()
    # the load of duckdb_baseline.py
    con.execute(f"CREATE TABLE cpu AS SELECT to_timestamp(time/1000) AS time, * EXCLUDE (time) FROM read_csv_auto('{csv}')")
    con.execute("CHECKPOINT")
    dt = time.perf_counter() - t
    n = con.execute("SELECT count(*) FROM cpu").fetchone()[0]
    return {"rows": n, "seconds": dt, "rows_per_s": n / dt}


def ts_literal(ms):
    d = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return d.strftime("%Y-%m-%d %H:%M:%S.%f") + "+00"


def cmd_duckdb(a):
    import duckdb
    if a.index:
        queries = {"index-eq": f"SELECT * FROM cpu WHERE hostname='{a.host}' AND time >= '{ts_literal(a.frm)}' AND time < '{ts_literal(a.to)}'"}
    else:
        queries = dict(duckdb_queries())
        where = queries["high-cpu-all"].split(" WHERE ", 1)[1]
        queries["high-cpu-all-projected"] = f"SELECT time, hostname, usage_user FROM cpu WHERE {where} ORDER BY time, hostname"
    if os.path.exists(a.file_db):
        os.remove(a.file_db)
    dbs = {"file": duckdb.connect(a.file_db), "mem": duckdb.connect(":memory:")}
    loads = {k: load(con, a.csv) for k, con in dbs.items()}
    loads["file"]["file_bytes"] = os.path.getsize(a.file_db)
    print(f"duckdb load: {loads}", file=sys.stderr)
    res = {}
    for name, q in queries.items():
        r = {"query": q}
        try:
            for k, con in dbs.items():
                con.execute(q).fetchall()  # warm-up
                med, ts, rows = median_ms(lambda: con.execute(q).fetchall(), a.runs)
                r[f"{k}_ms"], r[f"{k}_runs_ms"] = med, ts
                r[f"{k}_rows"] = len(rows)
            # answers: the in-memory db's (with column names); the file db must agree
            cur = dbs["mem"].execute(q)
            cols = [d[0] for d in cur.description]
            mem = cur.fetchall()
            fil = dbs["file"].execute(q).fetchall()
            if name not in ("high-cpu-all", "high-cpu-all-projected", "lastpoint", "index-eq"):
                # ordered results with aggregates: DuckDB's parallel sums differ in the last bits
                r["file_equals_mem"] = len(mem) == len(fil) and all(map(rows_close, mem, fil))
            else:  # stored values only, in no particular order
                r["file_equals_mem"] = sorted(map(repr, mem)) == sorted(map(repr, fil))
            r["columns"] = cols
            r["answers"] = [[jsonable(v) for v in row] for row in mem]
        except Exception as e:
            r["error"] = str(e).splitlines()[0]
        res[name] = r
        print(f"duckdb {name}: file {r.get('file_ms')} mem {r.get('mem_ms')} {r.get('error', '')}", file=sys.stderr)
    json.dump({"load": loads, "version": duckdb.__version__, "queries": res}, open(a.out, "w"))


def cmd_chdb(a):
    from chdb import session
    create, queries = chdb_script()
    s = session.Session()
    s.query("CREATE DATABASE IF NOT EXISTS b")
    s.query("DROP TABLE IF EXISTS b.cpu")
    t = time.perf_counter()
    s.query(create(a.csv))
    load = {"seconds": time.perf_counter() - t}
    res = {}
    for name, q in queries.items():
        name = "high-cpu-all-projected" if name == "high-cpu-all" else name
        try:
            s.query(q, "Arrow")  # warm-up
            med, ts, _ = median_ms(lambda: s.query(q, "Arrow"), a.runs)
            res[name] = {"query": q, "median_ms": med, "runs_ms": ts}
        except Exception as e:
            res[name] = {"query": q, "error": str(e).splitlines()[0]}
        print(f"chdb {name}: {res[name].get('median_ms')} {res[name].get('error', '')}", file=sys.stderr)
    import chdb
    json.dump({"load": load, "version": chdb.__version__, "queries": res}, open(a.out, "w"))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("influx")
    i.add_argument("--host", default="127.0.0.1")
    i.add_argument("--port", type=int, required=True)
    i.add_argument("--db", default="bench")
    i.add_argument("--runs", type=int, default=5)
    i.add_argument("--out", required=True)
    d = sub.add_parser("duckdb")
    d.add_argument("csv")
    d.add_argument("--file-db", required=True)
    d.add_argument("--runs", type=int, default=5)
    d.add_argument("--out", required=True)
    d.add_argument("--index", action="store_true")
    d.add_argument("--host", default="host_7")
    d.add_argument("--from", dest="frm", type=int, default=0)
    d.add_argument("--to", type=int, default=0)
    c = sub.add_parser("chdb")
    c.add_argument("csv")
    c.add_argument("--runs", type=int, default=5)
    c.add_argument("--out", required=True)
    a = ap.parse_args()
    {"influx": cmd_influx, "duckdb": cmd_duckdb, "chdb": cmd_chdb}[a.cmd](a)


if __name__ == "__main__":
    main()
