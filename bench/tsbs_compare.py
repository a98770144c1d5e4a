#!/usr/bin/env python3
"""TSBS cpu-only query benchmark: check Hourglass's answers against DuckDB's and print the
markdown tables (see bench/README.md).

  tsbs_compare.py --hg hg.json --duckdb duckdb.json --influx influx.json [--chdb chdb.json]
                  [--hg-index hg-index.json --duckdb-index duckdb-index.json]

Inputs are written by target/release/tsbs_query (Hourglass) and bench/tsbs_peers.py
(InfluxDB, DuckDB, ClickHouse). The last ratio is to the faster of DuckDB in-memory and
ClickHouse, the target of issue #21 (at most 1.0). Answers are compared in full: floats to 1e-9 relative tolerance,
everything else exactly (tags as strings, since DuckDB's CSV reader types numeric tags as
integers); ordered queries row by row, lastpoint per host, high-cpu-all as the row count
plus the set of (time, hostname, usage_user) (its projected form also row by row in
order), the index query per timestamp.
Exit status 1 if any answer differs or is missing, 0 otherwise. Timings are only printed.
"""
import argparse, json, math, re, sys

REL_TOL = 1e-9
FIELDS = ["usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
          "usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"]
TAGS = ["hostname", "region", "datacenter", "rack", "os", "arch", "team", "service",
        "service_version", "service_environment"]
ORDER = ["single-groupby-1-1-1", "single-groupby-5-1-12", "double-groupby-1", "cpu-max-all-8",
         "high-cpu-all", "high-cpu-all-projected", "lastpoint", "groupby-orderby-limit"]
MAX_DIFFS = 3


class Diff(Exception):
    pass


def same(a, b, what):
    """Raise Diff unless a equals b (floats to REL_TOL, dates exactly)."""
    if isinstance(a, bool) or isinstance(b, bool):
        ok = a == b
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        ok = a == b or (math.isfinite(a) and math.isfinite(b)
                        and abs(a - b) <= REL_TOL * max(abs(a), abs(b)))
    else:
        ok = a == b
    if not ok:
        raise Diff(f"{what}: expected {b!r}, got {a!r}")


def date_ms(v, what):
    if isinstance(v, dict) and "$date" in v:
        return v["$date"]
    raise Diff(f"{what}: expected a date, got {v!r}")


def acc_name(col):
    """DuckDB's column 'max(usage_user)' is Hourglass's field 'max_usage_user'."""
    m = re.fullmatch(r"(\w+)\((\w+)\)", col)
    return f"{m.group(1)}_{m.group(2)}" if m else col


def check_ordered(name, hg, dk):
    """Grouped queries: rows in order; key columns from _id, accumulators by name."""
    cols = dk["columns"]
    exp, got = dk["answers"], hg["answers"]
    errs = []
    if len(got) != len(exp):
        errs.append(f"{len(got)} rows, expected {len(exp)}")
    for i, (g, e) in enumerate(zip(got, exp)):
        try:
            row = dict(zip(cols, e))
            gid = g.get("_id")
            if "hostname" in row:  # double-groupby-1: _id {h, host}
                if not isinstance(gid, dict):
                    raise Diff(f"_id: expected {{h, host}}, got {gid!r}")
                same(date_ms(gid.get("h"), "_id.h"), date_ms(row[cols[0]], cols[0]), "_id.h")
                same(gid.get("host"), row["hostname"], "_id.host")
            else:
                same(date_ms(gid, "_id"), date_ms(row[cols[0]], cols[0]), "_id")
            accs = [c for c in cols[1:] if c != "hostname"]
            extra = set(g) - {"_id"} - {acc_name(c) for c in accs}
            if extra:
                raise Diff(f"unexpected fields {sorted(extra)}")
            for c in accs:
                f = acc_name(c)
                if f not in g:
                    raise Diff(f"missing field {f}")
                same(g[f], row[c], f)
        except Diff as d:
            errs.append(f"row {i}: {d}")
        if len(errs) >= MAX_DIFFS:
            break
    return errs


def check_measurement(doc, row, what):
    """A full measurement document against a DuckDB row (dict): time, 10 fields, 10 tags."""
    same(date_ms(doc.get("time"), f"{what} time"), date_ms(row["time"], "time"), f"{what} time")
    for f in FIELDS:
        if f not in doc:
            raise Diff(f"{what}: missing {f}")
        same(doc[f], row[f], f"{what} {f}")
    tags = doc.get("tags") or {}
    for t in TAGS:
        same(tags.get(t), str(row[t]), f"{what} tags.{t}")


def check_lastpoint(hg, dk):
    cols = dk["columns"]
    exp = {r["hostname"]: r for r in (dict(zip(cols, e)) for e in dk["answers"])}
    got = {}
    errs = []
    for g in hg["answers"]:
        if g.get("_id") in got:
            errs.append(f"host {g.get('_id')!r} twice")
        got[g.get("_id")] = g
    if set(got) != set(exp):
        errs.append(f"hosts differ: missing {sorted(set(exp) - set(got))[:5]}, "
                    f"unexpected {sorted(set(got) - set(exp), key=str)[:5]}")
    for h in sorted(set(got) & set(exp)):
        try:
            check_measurement(got[h].get("last") or {}, exp[h], f"host {h}:")
        except Diff as d:
            errs.append(str(d))
        if len(errs) >= MAX_DIFFS:
            break
    return errs


def check_high_cpu(hg, dk):
    cols = dk["columns"]
    errs = []
    if len(hg["answers"]) != len(dk["answers"]):
        errs.append(f"{len(hg['answers'])} rows, expected {len(dk['answers'])}")
    exp = {}
    for e in dk["answers"]:
        r = dict(zip(cols, e))
        exp[(date_ms(r["time"], "time"), r["hostname"])] = r["usage_user"]
    got = {}
    for g in hg["answers"]:
        try:
            k = (date_ms(g.get("time"), "time"), (g.get("tags") or {}).get("hostname"))
        except Diff as d:
            errs.append(str(d))
            break
        got[k] = g.get("usage_user")
    if set(got) != set(exp):
        errs.append(f"(time, hostname) sets differ: missing {sorted(set(exp) - set(got))[:3]}, "
                    f"unexpected {sorted(set(got) - set(exp), key=str)[:3]}")
    for k in sorted(set(got) & set(exp)):
        try:
            same(got[k], exp[k], f"usage_user at {k}")
        except Diff as d:
            errs.append(str(d))
        if len(errs) >= MAX_DIFFS:
            break
    return errs


def check_high_cpu_projected(hg, dk):
    """{time, host, usage_user} rows in (time, host) order, as DuckDB's ORDER BY gives."""
    cols = dk["columns"]
    errs = []
    exp = [dict(zip(cols, e)) for e in dk["answers"]]
    if len(hg["answers"]) != len(exp):
        errs.append(f"{len(hg['answers'])} rows, expected {len(exp)}")
    for i, (g, e) in enumerate(zip(hg["answers"], exp)):
        try:
            if set(g) != {"time", "usage_user", "host"}:
                raise Diff(f"fields {list(g)}, expected time, usage_user, host")
            same(date_ms(g["time"], "time"), date_ms(e["time"], "time"), "time")
            same(g["host"], e["hostname"], "host")
            same(g["usage_user"], e["usage_user"], "usage_user")
        except Diff as d:
            errs.append(f"row {i}: {d}")
        if len(errs) >= MAX_DIFFS:
            break
    return errs


def check_index(hg, dk):
    cols = dk["columns"]
    exp = {}
    for e in dk["answers"]:
        r = dict(zip(cols, e))
        exp[date_ms(r["time"], "time")] = r
    errs = []
    if len(hg["answers"]) != len(exp):
        errs.append(f"{len(hg['answers'])} rows, expected {len(exp)}")
    for g in hg["answers"]:
        try:
            t = date_ms(g.get("time"), "time")
            if t not in exp:
                raise Diff(f"unexpected measurement at {t}")
            check_measurement(g, exp[t], f"time {t}:")
        except Diff as d:
            errs.append(str(d))
        if len(errs) >= MAX_DIFFS:
            break
    return errs


def check(name, hg, dk):
    """(verdict, details) for one query."""
    if hg is None or "error" in hg:
        return "no (hourglass error)", [str((hg or {}).get("error", "missing"))]
    if dk is None or "error" in dk:
        return "no (duckdb error)", [str((dk or {}).get("error", "missing"))]
    if name == "lastpoint":
        errs = check_lastpoint(hg, dk)
    elif name == "high-cpu-all":
        errs = check_high_cpu(hg, dk)
    elif name == "high-cpu-all-projected":
        errs = check_high_cpu_projected(hg, dk)
    elif name == "index-eq":
        errs = check_index(hg, dk)
    else:
        errs = check_ordered(name, hg, dk)
    if not errs and not dk.get("answers"):
        errs.append("empty answer on both sides: the check proves little")
        return "yes (empty)", errs
    if not dk.get("file_equals_mem", True):
        errs.append("DuckDB file db and in-memory db answered differently")
    return ("yes" if not errs else "**NO**"), errs


def ms(v):
    return f"{v:.1f}" if isinstance(v, (int, float)) else "n/a"


def ratio(a, b):
    return f"{a / b:.1f}x" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else "n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hg", required=True)
    ap.add_argument("--duckdb", required=True)
    ap.add_argument("--influx")
    ap.add_argument("--chdb")
    ap.add_argument("--hg-index")
    ap.add_argument("--duckdb-index")
    ap.add_argument("--title", default="")
    ap.add_argument("--index-title", default="")
    ap.add_argument("--hg-memory", default="", help="the server's VmHWM/VmRSS after the queries")
    ap.add_argument("--hg-regular", help="tsbs_query's output on a regular collection")
    a = ap.parse_args()
    hgall = json.load(open(a.hg))
    hgq = hgall["queries"]
    dkq = json.load(open(a.duckdb))["queries"]
    inq = json.load(open(a.influx))["queries"] if a.influx else {}
    chq = json.load(open(a.chdb))["queries"] if a.chdb else {}
    ok = True
    notes = []
    print(f"\n### TSBS cpu-only queries{a.title}\n")
    print("| query | hourglass ms | influxdb ms | duckdb (file) ms | duckdb (in-memory) ms "
          "| clickhouse (chDB) ms | hourglass/influx | hourglass/duckdb-mem "
          "| hourglass/faster peer | answers match |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in ORDER:
        h, d, i, c = hgq.get(name), dkq.get(name), inq.get(name) or {}, chq.get(name) or {}
        if "error" in c:
            notes.append(f"- {name}: ClickHouse error: {c['error']}")
        peers = [v for v in ((d or {}).get("mem_ms"), c.get("median_ms")) if isinstance(v, (int, float))]
        verdict, errs = check(name, h, d)
        ok &= verdict.startswith("yes")
        hm = (h or {}).get("median_ms")
        label = name
        if (h or {}).get("form") == "arith":
            label += " (a)"
            if h.get("dateTrunc_error"):
                notes.append(f"- {name}: `$dateTrunc` rejected ({h['dateTrunc_error']}); "
                             "timed and checked with `$subtract: [\"$time\", {$mod: [{$toLong: \"$time\"}, unit]}]`")
        if isinstance((h or {}).get("runs"), int) and h["runs"] < hgall.get("runs", 0):
            notes.append(f"- {name}: Hourglass median of {h['runs']} runs, not {hgall['runs']}: "
                         "its timed runs used up the time budget (`tsbs_query --budget`)")
        if "error" in i:
            notes.append(f"- {name}: InfluxDB error: {i['error']}")
        for e in errs:
            notes.append(f"- {name}: {e}")
        print(f"| {label} | {ms(hm)} | {ms(i.get('median_ms'))} | {ms((d or {}).get('file_ms'))} "
              f"| {ms((d or {}).get('mem_ms'))} | {ms(c.get('median_ms'))} | {ratio(hm, i.get('median_ms'))} "
              f"| {ratio(hm, (d or {}).get('mem_ms'))} | {ratio(hm, min(peers) if peers else None)} | {verdict} |")
    if a.hg_memory:
        print(f"\nHourglass server memory after the loads and these queries: {a.hg_memory.strip()}")
    if a.hg_regular:
        rq = json.load(open(a.hg_regular))["queries"]
        print("\n### The same queries on a regular collection with a `{tags.hostname: 1, time: 1}` index\n")
        print("| query | hourglass regular ms | hourglass time-series ms | faster peer ms "
              "| regular/faster peer | answers match |")
        print("|---|---|---|---|---|---|")
        for name in ORDER:
            r, h, d, c = rq.get(name), hgq.get(name), dkq.get(name), chq.get(name) or {}
            peers = [v for v in ((d or {}).get("mem_ms"), c.get("median_ms")) if isinstance(v, (int, float))]
            verdict, errs = check(name, r, d)
            ok &= verdict.startswith("yes")
            for e in errs:
                notes.append(f"- {name} (regular collection): {e}")
            rm = (r or {}).get("median_ms")
            fastest = min(peers) if peers else None
            print(f"| {name} | {ms(rm)} | {ms((h or {}).get('median_ms'))} | {ms(fastest)} "
                  f"| {ratio(rm, fastest)} | {verdict} |")
    if a.hg_index and a.duckdb_index:
        hi = json.load(open(a.hg_index))
        di = json.load(open(a.duckdb_index))
        h, d = hi["queries"].get("index-eq"), di["queries"].get("index-eq")
        verdict, errs = check("index-eq", h, d)
        ok &= verdict.startswith("yes")
        hm = (h or {}).get("median_ms")
        print(f"\n### Index-served query: one host of a high-cardinality set{a.index_title}\n")
        print(f"`{(d or {}).get('query', '')}`\n")
        print("| query | rows | hourglass ms | duckdb (file) ms | duckdb (in-memory) ms "
              "| hourglass/duckdb-mem | answers match |")
        print("|---|---|---|---|---|---|---|")
        print(f"| index-eq | {(h or {}).get('rows', 'n/a')} | {ms(hm)} | {ms((d or {}).get('file_ms'))} "
              f"| {ms((d or {}).get('mem_ms'))} | {ratio(hm, (d or {}).get('mem_ms'))} | {verdict} |")
        for e in errs:
            notes.append(f"- index-eq: {e}")
        print("\nHourglass explain (keys bucketsExamined / bucketsPruned / bucketsReturned / "
              "totalDocsExamined / nReturned, searched recursively):\n")
        for form, r in ((h or {}).get("explain") or {}).items():
            if "error" in r:
                print(f"- `{form}`: error: {r['error']}")
            elif not r.get("found"):
                print(f"- `{form}`: not reported")
            else:
                print(f"- `{form}`: " + ", ".join(f"{f['path']} = {json.dumps(f['value'])}" for f in r["found"]))
    if notes:
        print("\nNotes" + (": (a) = the `$dateTrunc` bucketing written arithmetically, see below."
                             if any("(a)" in n or "$dateTrunc" in n for n in notes) else ":") + "\n")
        print("\n".join(notes))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
