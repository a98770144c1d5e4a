"""Helpers of the online-archive tests (tests/python/test_archive.py) and benchmark
(bench/archive.py): TSBS-like data in the shape of ../shared/tsbs_gen.py as BSON documents, the seven
TSBS cpu-only queries as pymongo aggregations (the forms of bench/src/bin/tsbs_query.rs),
their answers compared, the archive's files and counters, and installing what the tests
need (PyPI packages into the running interpreter's environment, a Java runtime from Debian).
"""

import datetime as dt
import importlib.util
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

sys.path.insert(0, str(REPO_ROOT / "bench"))
from tsbs_compare import FIELDS, ORDER as TSBS_ORDER, REL_TOL, TAGS  # noqa: E402

T0 = dt.datetime(2016, 1, 1, tzinfo=dt.timezone.utc)  # tsbs_gen.py's first timestamp


# ---- data ----------------------------------------------------------------------------------

class tsbs_gen:  # noqa: N801 (stands for ../shared/tsbs_gen.py, which a clean clone lacks)
    """The TSBS cpu-only shape of ../shared/tsbs_gen.py, generated here so the tests need
    nothing outside the repository: per host 10 tags and 10 fields random-walking in
    [0, 100], one row per host every 10 s from 2016-01-01T00:00Z."""

    REGIONS = ["us-east-1", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1",
               "ap-southeast-1", "ap-southeast-2", "ap-northeast-1", "sa-east-1"]

    @staticmethod
    def rows(hosts, duration_s, seed):
        import random
        rnd = random.Random(seed)
        tags = []
        for i in range(hosts):
            region = rnd.choice(tsbs_gen.REGIONS)
            tags.append([
                ("hostname", f"host_{i}"), ("region", region),
                ("datacenter", f"{region}{rnd.choice('abc')}"), ("rack", str(rnd.randrange(100))),
                ("os", rnd.choice(["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"])),
                ("arch", rnd.choice(["x64", "x86"])), ("team", rnd.choice(["SF", "NYC", "LON", "CHI"])),
                ("service", str(rnd.randrange(20))), ("service_version", str(rnd.randrange(2))),
                ("service_environment", rnd.choice(["production", "staging", "test"])),
            ])
        state = [[rnd.uniform(0, 100) for _ in FIELDS] for _ in range(hosts)]
        for step in range(duration_s // 10):
            t = T0_MS + step * 10_000
            for h in range(hosts):
                vals = state[h]
                for k in range(len(vals)):
                    vals[k] = min(100.0, max(0.0, vals[k] + rnd.uniform(-1, 1)))
                yield t, tags[h], list(vals)

    @staticmethod
    def to_bson(t, tags, vals):
        import bson
        doc = {"time": bson.datetime_ms.DatetimeMS(t), "tags": dict(tags)}
        doc.update(zip(FIELDS, vals))
        return bson.encode(doc)


class TsbsData:
    """`hosts` x `duration_s` of tsbs_gen.py's cpu-only data (one row per host every 10 s
    from 2016-01-01T00:00Z) as raw BSON measurement documents in time order, with the totals
    a reader must find: rows, sum of usage_user, and per host count / sum / max of
    usage_user."""

    def __init__(self, hosts, duration_s, seed=123):
        from bson.raw_bson import RawBSONDocument

        gen = tsbs_gen
        self.hosts, self.duration_s = hosts, duration_s
        self.docs, self.times_ms, self.doc_hosts = [], [], []
        self.per_host = {}
        for t, tags, vals in gen.rows(hosts, duration_s, seed):
            self.docs.append(RawBSONDocument(gen.to_bson(t, tags, vals)))
            self.times_ms.append(t)
            self.doc_hosts.append(tags[0][1])
            h = self.per_host.setdefault(tags[0][1], [0, [], -math.inf])
            h[0] += 1
            h[1].append(vals[0])
            h[2] = max(h[2], vals[0])
        self.count = len(self.docs)
        self.sum_user = math.fsum(v for h in self.per_host.values() for v in h[1])
        self.per_host = {k: {"n": n, "sum": math.fsum(vs), "max": mx} for k, (n, vs, mx) in self.per_host.items()}

    def of_hosts(self, hosts):
        """The documents of the hosts named in `hosts`."""
        hosts = set(hosts)
        return [d for d, h in zip(self.docs, self.doc_hosts) if h in hosts]

    def between(self, start_s, end_s):
        """The documents with start_s <= time - T0 < end_s (seconds)."""
        lo, hi = T0_MS + start_s * 1000, T0_MS + end_s * 1000
        return [d for d, t in zip(self.docs, self.times_ms) if lo <= t < hi]


T0_MS = 1_451_606_400_000


def load(coll, docs, batch=10_000):
    for i in range(0, len(docs), batch):
        coll.insert_many(docs[i:i + batch], ordered=False)


# ---- the seven TSBS queries ----------------------------------------------------------------

def at(hours):
    return T0 + dt.timedelta(hours=hours)


def _trunc(unit):
    return {"$dateTrunc": {"date": "$time", "unit": unit}}


def _max_of(fields):
    return {f"max_{f}": {"$max": f"${f}"} for f in fields}


def tsbs_pipelines():
    """name -> aggregation pipeline: the seven TSBS cpu-only queries (and high-cpu-all
    projected and sorted) as bench/src/bin/tsbs_query.rs runs them (the `$dateTrunc` form)."""
    hosts8 = [f"host_{i}" for i in range(1, 9)]
    return {
        "single-groupby-1-1-1": [
            {"$match": {"tags.hostname": "host_7", "time": {"$gte": at(5), "$lt": at(6)}}},
            {"$group": {"_id": _trunc("minute"), **_max_of(FIELDS[:1])}},
            {"$sort": {"_id": 1}},
        ],
        "single-groupby-5-1-12": [
            {"$match": {"tags.hostname": "host_7", "time": {"$gte": at(6), "$lt": at(18)}}},
            {"$group": {"_id": _trunc("minute"), **_max_of(FIELDS[:5])}},
            {"$sort": {"_id": 1}},
        ],
        "double-groupby-1": [
            {"$match": {"time": {"$gte": at(6), "$lt": at(18)}}},
            {"$group": {"_id": {"h": _trunc("hour"), "host": "$tags.hostname"},
                        "avg_usage_user": {"$avg": "$usage_user"}}},
            {"$sort": {"_id.h": 1, "_id.host": 1}},
        ],
        "cpu-max-all-8": [
            {"$match": {"tags.hostname": {"$in": hosts8}, "time": {"$gte": at(8), "$lt": at(16)}}},
            {"$group": {"_id": _trunc("hour"), **_max_of(FIELDS)}},
            {"$sort": {"_id": 1}},
        ],
        "high-cpu-all": [
            {"$match": {"usage_user": {"$gt": 90.0}, "time": {"$gte": at(6), "$lt": at(18)}}},
        ],
        "high-cpu-all-projected": [
            {"$match": {"usage_user": {"$gt": 90.0}, "time": {"$gte": at(6), "$lt": at(18)}}},
            {"$project": {"_id": 0, "time": 1, "host": "$tags.hostname", "usage_user": 1}},
            {"$sort": {"time": 1, "host": 1}},
        ],
        "lastpoint": [
            {"$sort": {"tags.hostname": 1, "time": -1}},
            {"$group": {"_id": "$tags.hostname", "last": {"$first": "$$ROOT"}}},
        ],
        "groupby-orderby-limit": [
            {"$match": {"time": {"$lt": at(12)}}},
            {"$group": {"_id": _trunc("minute"), **_max_of(FIELDS[:1])}},
            {"$sort": {"_id": -1}},
            {"$limit": 5},
        ],
    }


def run_tsbs(coll):
    """name -> list of answer documents of the queries on `coll`."""
    return {name: list(coll.aggregate(p, allowDiskUse=True)) for name, p in tsbs_pipelines().items()}


def _close(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= REL_TOL * max(abs(a), abs(b)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_close, a, b))
    return a == b


def _canon(doc):
    """A measurement as a hashable, order-free key (for the unordered high-cpu-all)."""
    return repr(sorted((k, _canon(v) if isinstance(v, dict) else v) for k, v in doc.items()))


def answer_diffs(name, got, exp, limit=3):
    """Differences of `got` from `exp` for TSBS query `name`: ordered queries row by row
    (floats to 1e-9 relative), lastpoint per host, high-cpu-all as a set of measurements."""
    diffs = []
    if name == "high-cpu-all":
        g, e = {_canon(d) for d in got}, {_canon(d) for d in exp}
        if len(got) != len(exp):
            diffs.append(f"{len(got)} rows, expected {len(exp)}")
        if g != e:
            diffs.append(f"missing {sorted(e - g)[:2]}, unexpected {sorted(g - e)[:2]}")
        return diffs
    if name == "lastpoint":
        got, exp = sorted(got, key=lambda d: str(d["_id"])), sorted(exp, key=lambda d: str(d["_id"]))
    if len(got) != len(exp):
        diffs.append(f"{len(got)} rows, expected {len(exp)}")
    for i, (g, e) in enumerate(zip(got, exp)):
        if not _close(g, e):
            diffs.append(f"row {i}: got {g!r}, expected {e!r}")
            if len(diffs) >= limit:
                break
    return diffs


def all_answer_diffs(got, exp):
    """{name: diffs} of the queries whose answers differ."""
    return {n: d for n in TSBS_ORDER if (d := answer_diffs(n, got[n], exp[n]))}


# ---- archive state -------------------------------------------------------------------------

def archive_stats(db, coll):
    """collStats' `archive` section ({} when absent)."""
    return db.command("collStats", coll).get("archive") or {}


def parquet_files(root, db=None, coll=None):
    """The .parquet files under a file:// archive root (of one db / collection if given)."""
    base = Path(root)
    if db is not None:
        base = base / f"db={db}"
        if coll is not None:
            base = base / f"coll={coll}"
    return sorted(p for p in base.rglob("*.parquet") if p.is_file()) if base.exists() else []


def wait_for(pred, timeout, what, interval=0.2):
    """Polls `pred()` until it returns a truthy value (returned) or `timeout` seconds pass
    (AssertionError naming `what` and the last value)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = pred()
        except Exception as e:  # a server restarting, a collection not yet there
            last = e
            if time.monotonic() > deadline:
                raise
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def wait_archived(db, coll, measurements, timeout=180, stall=60, no_section=20):
    """Waits until collStats archive.measurements == `measurements`; returns the stats.
    Fails early when collStats has no `archive` section after `no_section` seconds or the
    count has not moved for `stall` seconds."""
    start = time.monotonic()
    deadline = start + timeout
    last, moved = None, start
    while True:
        stats = archive_stats(db, coll)
        now = time.monotonic()
        got = stats.get("measurements")
        if got == measurements:
            return stats
        if got != last:
            last, moved = got, now
        what = f"{db.name}.{coll}: archive.measurements == {measurements}"
        if not stats and now - start > no_section:
            raise AssertionError(f"{what}: collStats has no `archive` section after {no_section} s")
        if now - moved > stall:
            raise AssertionError(f"{what}: stuck at {got} for {stall} s; collStats archive = {stats!r}")
        if now > deadline:
            raise AssertionError(f"{what}: timed out after {timeout} s; collStats archive = {stats!r}")
        time.sleep(0.2)


def find_keys(doc, keys, path=""):
    """[(path, key, value)] of every occurrence of one of `keys` in a nested explain reply."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f"{path}.{k}" if path else k
            if k in keys:
                out.append((p, k, v))
            out += find_keys(v, keys, p)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += find_keys(v, keys, f"{path}[{i}]")
    return out


ARCHIVE_EXPLAIN_KEYS = ("archiveFilesExamined", "archiveFilesPruned", "archiveRowGroupsExamined",
                        "archiveRowGroupsPruned")


def explain_archive_counters(db, coll, pipeline):
    """The sums of the archive counters found anywhere in executionStats explain of
    `aggregate coll pipeline` ({} when none is reported), and the reply."""
    reply = db.command("explain", {"aggregate": coll, "pipeline": pipeline, "cursor": {}},
                       verbosity="executionStats")
    sums = {}
    for _, k, v in find_keys(reply, ARCHIVE_EXPLAIN_KEYS):
        if isinstance(v, (int, float)):
            sums[k] = sums.get(k, 0) + v
    return sums, reply


# ---- installing what a test needs ----------------------------------------------------------

def ensure_py(module, spec=None, timeout=900):
    """Imports `module`, installing PyPI `spec` (default: the module's name) into this
    interpreter's environment (the project's .venv) first when it is missing; returns the
    module, or None with the reason printed when it cannot be installed."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        pass
    spec = spec or module
    try:
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            *spec.split()], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"SKIP reason: pip install {spec} failed: {e}")
        return None
    if r.returncode != 0:
        print(f"SKIP reason: pip install {spec} failed: {r.stderr.strip()[-400:]}")
        return None
    importlib.invalidate_caches()
    try:
        return importlib.import_module(module)
    except ImportError as e:
        print(f"SKIP reason: {spec} installed but `import {module}` fails: {e}")
        return None


SPARK_JAVA_VERSIONS = ("17", "21")  # what pyspark 4 runs on


def _java_major(java):
    try:
        r = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    import re

    m = re.search(r'version "(\d+)', r.stderr + r.stdout)
    return m.group(1) if m else None


def java_home():
    """A JAVA_HOME of a Java 17 or 21 runtime: one already installed (JAVA_HOME, `java` on
    PATH, /usr/lib/jvm/*), else Debian's openjdk-17-jre-headless (or -21-) installed with
    apt-get. Returns (path, None) or (None, reason)."""
    cands = []
    if os.environ.get("JAVA_HOME"):
        cands.append(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
    if shutil.which("java"):
        cands.append(Path(os.path.realpath(shutil.which("java"))))
    cands += sorted(Path("/usr/lib/jvm").glob("*/bin/java")) if Path("/usr/lib/jvm").exists() else []

    def pick():
        for j in cands + sorted(Path("/usr/lib/jvm").glob("*/bin/java")):
            if j.exists() and _java_major(str(j)) in SPARK_JAVA_VERSIONS:
                return j.parent.parent
        return None

    home = pick()
    if home:
        return home, None
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    errors = []
    for pkg in ("openjdk-17-jre-headless", "openjdk-21-jre-headless"):
        for args in (["install", "-y", "--no-install-recommends", pkg], ["update"],
                     ["install", "-y", "--no-install-recommends", pkg]):
            try:
                r = subprocess.run(["apt-get", *args], capture_output=True, text=True, timeout=900, env=env)
            except (OSError, subprocess.TimeoutExpired) as e:
                errors.append(f"apt-get {' '.join(args)}: {e}")
                break
            if args[0] == "install" and r.returncode == 0:
                break
            if args[0] == "install":
                errors.append(f"apt-get install {pkg}: {r.stderr.strip()[-200:]}")
        home = pick()
        if home:
            return home, None
    return None, "; ".join(errors) or "no Java 17/21 runtime found"
