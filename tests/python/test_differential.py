"""Differential test: a time-series collection answers every read exactly as a regular
collection holding the same documents.

Random measurements (mixed types per field, missing fields, arrays, nested documents,
nested or scalar or missing meta) go into a regular collection `reg` and a time-series
collection `ts` ({timeField: "t", metaField: "m"}), loaded once per module. A seeded
generator then produces finds (filters, projections, sorts, skip/limit), pipelines,
counts and distincts; each runs on both collections and the answers must be equal:
the same documents (as dicts, so the field order of an unpacked measurement does not
matter), the same value types, floats equal up to a relative 1e-9 (sums and averages
may add in a different order), in order when the query sorts totally and as multisets
otherwise; an error on the regular collection must be the same error (code) on the
time-series collection.

The generator avoids what MongoDB leaves undefined, so that a disagreement is a bug:
a number of one type never equals a number of another type in the data (int32 values
are small integers, doubles always have a fraction, int64 values are above 2^32), so a
group key or a distinct value or a $min/$max never depends on which of two equal values
came first; times are unique, and every sort ends on a unique key; $limit, $skip,
$first, $last and $push only follow a total sort (or a group key unique per document).

    HOURGLASS_DIFF_SEED   seed of the documents and the queries (default below)
    HOURGLASS_DIFF_CASES  cases per test function (default 450; raise it for more)
    HOURGLASS_DIFF_DOCS   number of documents (default 160)
    HOURGLASS_DIFF_CASE   run only that case, e.g. "pipeline:17" (as a failure names it)
"""

import datetime
import math
import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from bson.int64 import Int64
from pymongo.errors import OperationFailure

SEED = int(os.environ.get("HOURGLASS_DIFF_SEED", "20260301"))
# Against a debug build a case costs some 30 ms (two full scans of 160 documents are
# most of it): the defaults keep the file around a minute.
CASES = int(os.environ.get("HOURGLASS_DIFF_CASES", "450"))
N_DOCS = int(os.environ.get("HOURGLASS_DIFF_DOCS", "160"))
ONLY = os.environ.get("HOURGLASS_DIFF_CASE")
MAX_REPORTED = 8

UTC = datetime.timezone.utc
T0 = datetime.datetime(2026, 3, 1, tzinfo=UTC)
MISSING = object()

# Meta values. A time-series collection stores the meta value normalized (object fields
# sorted by name, recursively), as MongoDB does, so a meta written in another field order
# reads back differently from a regular collection: these are written normalized.
METAS = [
    {"c": 2, "host": "h1", "tags": ["a", "b"]},
    {"c": 1, "host": "h2", "tags": ["b"]},
    {"c": 1, "host": "h1"},
    {"c": 2.5, "host": "h3", "tags": []},
    {"c": 3, "host": ["h1", "h2"]},
    {"host": "h4", "sub": {"j": "x", "k": 1}},
    "plain",
    7,
    None,
    MISSING,
]


# ---------------------------------------------------------------------------------------
# Documents


def _fraction(rng, lo=-20.0, hi=20.0):
    """A double that is never integral (so it never equals an int of the data)."""
    x = round(rng.uniform(lo, hi), 3)
    return x + 0.5 if x == int(x) else x


def _special(rng):
    """NaN (less than every number, equal only to itself in a query) or an infinity."""
    return rng.choice([math.nan, math.nan, math.inf, -math.inf])


def _small_int(rng):
    return rng.randint(-3, 12)


def _int64(rng):
    return Int64(2**33 + rng.randint(0, 5))


# Each field's values come in kinds. A kind stays the same for a while within a series and
# sometimes changes: a change of type bracket closes the series' open bucket (a schema
# change), so buckets hold runs of measurements with missing fields and mixed numbers,
# and differently shaped values land in buckets of their own.
KINDS = {
    "a": {"number": 4, "int": 2, "double": 2, "string": 2, "bool": 1, "null": 1, "date": 1,
          "array": 1, "object": 1},
    "b": {"double": 3, "number": 2, "int": 1},
    "c": {"int-or-long": 1},
    "arr": {"numbers": 5, "int": 2, "docs": 1, "nested": 1},
    "n": {"doc": 5, "doc-str": 1, "xdocs": 1, "int": 1},
    "s": {"string": 6, "null": 1},
}
SERIES_WEIGHTS = [5, 4, 3, 2, 2, 2, 2, 1, 1, 2]
FAR_ERAS = [datetime.datetime(1969, 12, 31, 22, tzinfo=UTC),
            datetime.datetime(1950, 6, 1, tzinfo=UTC),
            datetime.datetime(2110, 1, 1, tzinfo=UTC)]


def _value(rng, kind):
    if kind == "int":
        return _small_int(rng)
    if kind == "double":
        return _special(rng) if rng.random() < 0.03 else _fraction(rng, -50, 50)
    if kind == "number":
        if rng.random() < 0.03:
            return _special(rng)
        return rng.choice([_small_int(rng), _fraction(rng), _fraction(rng), _int64(rng)])
    if kind == "int-or-long":
        return _int64(rng) if rng.random() < 0.1 else _small_int(rng)
    if kind == "string":
        return rng.choice(["x", "y", "z", "ab", "", "x", "y"])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "null":
        return None
    if kind == "date":
        return T0 + datetime.timedelta(hours=rng.randint(-3, 6))
    if kind == "array":
        return [_small_int(rng) for _ in range(rng.randint(0, 3))]
    if kind == "object":
        return {"x": _small_int(rng)}
    if kind == "numbers":
        return [rng.choice([_small_int(rng), _fraction(rng, -5, 5)])
                for _ in range(rng.randint(0, 3))]
    if kind == "docs":
        return [{"k": _small_int(rng)}, _small_int(rng)]
    if kind == "nested":
        return [[_small_int(rng)], "s"]
    if kind == "doc":
        d = {}
        if rng.random() < 0.8:
            d["x"] = rng.choice([_small_int(rng), _fraction(rng)])
        if rng.random() < 0.6:
            d["y"] = rng.choice(["p", "q"])
        if rng.random() < 0.5:
            d["z"] = {"w": _small_int(rng)}
        return d
    if kind == "doc-str":
        return {"x": rng.choice(["x", "xx"]), "y": "p"}
    if kind == "xdocs":
        return [{"x": _small_int(rng)}, {"x": _fraction(rng), "y": "p"}]
    raise AssertionError(kind)


def _kind(rng, field):
    kinds = KINDS[field]
    return rng.choices(list(kinds), weights=list(kinds.values()))[0]


def make_documents(rng, n):
    """`n` measurements in insertion order (mostly by time, some out of order), and
    the sizes of the insert batches."""
    ids = rng.sample(range(n), n)
    kinds = [{f: _kind(rng, f) for f in KINDS} for _ in METAS]
    for series in (0, 1):
        # Always a double: typed double columns without a presence bitmap.
        kinds[series]["b"] = "double"
    docs = []
    now = T0
    for k in range(n):
        series = rng.choices(range(len(METAS)), weights=SERIES_WEIGHTS)[0]
        if rng.random() < 0.08:
            field = rng.choice([f for f in KINDS if series > 1 or f != "b"])
            kinds[series][field] = _kind(rng, field)
        # Unique times, whole seconds: a sort on t is total, and so is a group keyed by t
        # truncated to the second. Mostly 30 s apart, sometimes hours; a few far away
        # (before 1970, after 2106: outside a bucket _id's 32-bit seconds).
        now += datetime.timedelta(seconds=30)
        if rng.random() < 0.02:
            now += datetime.timedelta(hours=rng.choice([2, 5, 26]))
        t = now + datetime.timedelta(seconds=rng.randint(0, 29))
        if rng.random() < 0.03:
            era = rng.choice(FAR_ERAS)
            t = era + datetime.timedelta(seconds=31 * k)
        doc = {"_id": ids[k], "t": t}
        if METAS[series] is not MISSING:
            doc["m"] = METAS[series]
        for field, kind in kinds[series].items():
            if (series > 1 or field != "b") and rng.random() < 0.12:
                continue
            doc[field] = _value(rng, kind)
        docs.append(doc)
    for i in range(len(docs)):
        if rng.random() < 0.08:
            j = min(len(docs) - 1, i + rng.randint(1, 6))
            docs[i], docs[j] = docs[j], docs[i]
    batches = []
    left = n
    while left:
        size = min(left, rng.choice([1, 2, 5, 17, 40, 60]))
        batches.append(size)
        left -= size
    return docs, batches


def values_at(value, parts):
    """Values a dotted path reaches, through arrays, as a query compares them."""
    if not parts:
        yield value
        if isinstance(value, list):
            yield from value
        return
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        if head in value:
            yield from values_at(value[head], rest)
    elif isinstance(value, list):
        if head.isdigit() and int(head) < len(value):
            yield from values_at(value[int(head)], rest)
        for e in value:
            if isinstance(e, dict):
                yield from values_at(e, parts)


# ---------------------------------------------------------------------------------------
# Comparison


def same(a, b):
    """Exact equality of decoded BSON values, types included, except that doubles are
    equal up to a relative (or, near zero, absolute) 1e-9."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def same_multiset(expected, got):
    """Whether each result has its own equal counterpart (when sorting could not pair
    them: results that differ only in the last bits of a double)."""
    left = list(got)
    for x in expected:
        i = next((i for i, y in enumerate(left) if same(x, y)), None)
        if i is None:
            return False
        left.pop(i)
    return True


def canon(v):
    """A sort key for any decoded value: puts results in a comparable order."""
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{canon(v[k])}" for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(canon(x) for x in v) + "]"
    if isinstance(v, float):
        return f"float:{v:.6g}"
    if isinstance(v, datetime.datetime):
        return f"date:{v.isoformat()}"
    return f"{type(v).__name__}:{v!r}"


def short(v, limit=400):
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."


def outcome(run):
    """("ok", result) or ("error", code)."""
    try:
        return ("ok", run())
    except OperationFailure as e:
        return ("error", e.code)


def difference(reg, ts, ordered):
    """None when the outcomes agree, else a short description of how they differ."""
    if reg[0] == "error" or ts[0] == "error":
        if reg == ts:
            return None
        def side(o):
            return f"error {o[1]}" if o[0] == "error" else f"{short(o[1], 300)}"
        return f"regular: {side(reg)}\n  timeseries: {side(ts)}"
    expected, got = reg[1], ts[1]
    if not isinstance(expected, list):
        if same(expected, got):
            return None
        return f"regular: {short(expected)}\n  timeseries: {short(got)}"
    if not ordered:
        expected = sorted(expected, key=canon)
        got = sorted(got, key=canon)
    if len(expected) == len(got) and all(same(x, y) for x, y in zip(expected, got)):
        return None
    if not ordered and len(expected) == len(got) and same_multiset(expected, got):
        return None
    lines = [f"regular: {len(expected)} results, timeseries: {len(got)} results"]
    keys_reg = {canon(x) for x in expected}
    keys_ts = {canon(x) for x in got}
    only_reg = [x for x in expected if canon(x) not in keys_ts]
    only_ts = [x for x in got if canon(x) not in keys_reg]
    if only_reg or only_ts:
        for label, items in (("only in regular", only_reg), ("only in timeseries", only_ts)):
            if items:
                shown = "; ".join(short(x, 300) for x in items[:3])
                lines.append(f"{label} ({len(items)}): {shown}")
    else:
        i = next((i for i, (x, y) in enumerate(zip(expected, got)) if not same(x, y)),
                 min(len(expected), len(got)))
        lines.append(f"first difference at #{i}{' (in order)' if ordered else ''}:")
        lines.append(f"    regular:    {short(expected[i] if i < len(expected) else None)}")
        lines.append(f"    timeseries: {short(got[i] if i < len(got) else None)}")
    return "\n  ".join(lines)


class Differential:
    """Runs cases on both collections and collects the disagreements."""

    def __init__(self, kind):
        self.kind = kind
        self.failures = []
        self.ran = 0
        # The regular side runs on this thread while the time-series side runs on the
        # test's: the server answers both at once.
        self.pool = ThreadPoolExecutor(max_workers=1)

    def cases(self):
        """(case name, rng) for each case of this kind (one named case with
        HOURGLASS_DIFF_CASE)."""
        if ONLY:
            kind, _, number = ONLY.partition(":")
            numbers = [int(number)] if kind == self.kind else []
        else:
            numbers = range(CASES)
        for i in numbers:
            yield f"{self.kind}:{i}", random.Random(f"{SEED}/{self.kind}/{i}")

    def check(self, case, query, run, ordered=False):
        """`run(collection)` on both collections must give equal outcomes."""
        self.ran += 1
        reg = self.pool.submit(outcome, lambda: run(self.reg))
        ts = outcome(lambda: run(self.ts))
        diff = difference(reg.result(), ts, ordered)
        if diff is not None:
            self.failures.append(f"[{case}] {query}\n  {diff}")

    def assert_agree(self):
        self.pool.shutdown()
        if not self.failures:
            return
        shown = "\n\n".join(self.failures[:MAX_REPORTED])
        more = len(self.failures) - MAX_REPORTED
        pytest.fail(
            f"{len(self.failures)} of {self.ran} {self.kind} queries disagree between the "
            f"regular and the time-series collection (seed {SEED}; rerun one case with "
            f"HOURGLASS_DIFF_SEED={SEED} HOURGLASS_DIFF_CASE=<case>):\n\n{shown}"
            + (f"\n\n... and {more} more" if more > 0 else ""),
            pytrace=False,
        )


# ---------------------------------------------------------------------------------------
# Query generator

FILTER_PATHS = ["a", "a", "b", "b", "c", "arr", "arr.0", "n", "n.x", "n.z.w", "s", "m",
                "m.host", "m.host", "m.c", "m.tags", "m.sub.k", "t", "_id", "nope"]
SORT_PATHS = ["a", "b", "c", "s", "arr", "n", "n.x", "m", "m.host", "m.c", "t"]
FIELDS = ["a", "b", "c", "arr", "n", "s", "t", "m", "nope"]
PROJECTABLE = ["a", "b", "c", "arr", "n", "n.x", "n.z.w", "s", "t", "m", "m.host", "m.tags",
               "m.sub", "nope"]
TYPES = ["double", "string", "object", "array", "bool", "null", "int", "long", "date",
         "number", 1, 2, 16, 18]
EXTRA_VALUES = [None, 0, 1, 5, -1.5, 2.25, "x", "h1", "", True, False, [], [1, 2], {"x": 1},
                Int64(2**33 + 1), T0, {"c": 1, "host": "h1"}, math.nan, math.inf]

# Expressions that do not fail on any document of the data.
SAFE_EXPRS = [
    "$m.host", "$n.x", "$a", "$t", "$m", "$arr",
    {"$ifNull": ["$a", "none"]},
    {"$type": "$a"},
    {"$type": "$m"},
    {"$isNumber": "$b"},
    {"$cond": [{"$isNumber": "$b"}, {"$multiply": ["$b", 2]}, None]},
    {"$multiply": ["$b", "$c"]},
    {"$dateTrunc": {"date": "$t", "unit": "hour"}},
    {"$hour": "$t"},
    {"$add": ["$t", 60000]},
    {"$dateToString": {"format": "%H:%M:%S", "date": "$t"}},
    {"$gt": ["$b", "$c"]},
    {"$eq": ["$m.c", 2]},
    {"$size": {"$ifNull": ["$m.tags", []]}},
    {"$toString": "$c"},
    {"$literal": "$a"},
    {"$concat": ["$s", "-"]},
    {"$getField": "b"},
    {"$getField": {"field": "s"}},
]
# Expressions that fail on some documents: both collections must fail the same way. At
# most one per query: which of two errors comes first depends on the document order.
RISKY_EXPRS = [
    {"$add": ["$a", 1]},
    {"$concat": ["$m.host", "!"]},
    {"$toUpper": "$m.host"},
    {"$getField": {"field": "x", "input": "$n"}},
]

# Invalid query parts: both collections must refuse them with the same code.
INVALID_CONDITIONS = [{"$type": "foo"}, {"$in": 5}, {"$size": -1}, {"$regex": "("}, {"$foo": 1},
                      {"$elemMatch": 3}, {"$exists": True, "$bar": 1}, {"$nin": {"a": 1}}]
INVALID_STAGES = [{"$limit": 0}, {"$limit": -1}, {"$skip": -1}, {"$sort": {}}, {"$unwind": "arr"},
                  {"$project": {}}, {"$group": {"x": {"$sum": 1}}},
                  {"$group": {"_id": None, "x": {"$bogus": 1}}},
                  {"$group": {"_id": {"$dateTrunc": {"date": "$t", "unit": "fortnight"}}}},
                  {"$group": {"_id": {"$dateTrunc": {"date": "$t", "unit": "hour", "binSize": 0}}}},
                  {"$count": ""}, {"$addFields": {"$x": 1}}, {"$bogusStage": {}},
                  {"$match": {"$and": []}}]

SELF = "<self>"


def bind(value, name):
    """`value` with SELF replaced by a collection name."""
    if value == SELF:
        return name
    if isinstance(value, dict):
        return {k: bind(v, name) for k, v in value.items()}
    if isinstance(value, list):
        return [bind(v, name) for v in value]
    return value


UNIQUE_GROUP_KEYS = ["$t", "$_id", {"$dateTrunc": {"date": "$t", "unit": "second"}}]
# Group keys that may be arrays. A $sort on such a key is not total: an array sorts by
# its least (or greatest) element, so [3, 5.5] ties with 3.
ARRAY_KEYS = ["$arr", "$m.host", "$m.tags", "$a", "$n.x", "$n"]


def date_trunc(rng):
    unit, size = rng.choice([("minute", 1), ("minute", 5), ("minute", 7), ("minute", 15),
                             ("hour", 1), ("hour", 2), ("day", 1), ("second", 90)])
    spec = {"date": "$t", "unit": unit}
    if size != 1 or rng.random() < 0.3:
        spec["binSize"] = size
    return {"$dateTrunc": spec}


class Generator:
    def __init__(self, docs):
        self.pools = {}
        for path in set(FILTER_PATHS) | set(PROJECTABLE):
            pool = {}
            for d in docs:
                for v in values_at(d, path.split(".")):
                    pool.setdefault(canon(v), v)
            self.pools[path] = list(pool.values())
        self.times = sorted(d["t"] for d in docs)
        self.far_times = [t for t in self.times if t.year != T0.year]
        self.ids = sorted(d["_id"] for d in docs)
        self.risky_left = 1

    # -- filters --

    def value(self, rng, path):
        pool = self.pools.get(path) or []
        if pool and rng.random() < 0.8:
            return rng.choice(pool)
        return rng.choice(EXTRA_VALUES)

    def time(self, rng):
        far = self.far_times and rng.random() < 0.1
        t = rng.choice(self.far_times if far else self.times)
        return t + datetime.timedelta(seconds=rng.choice([0, 0, -1, 1, -3600, 600]))

    def time_range(self, rng):
        lo, hi = sorted([self.time(rng), self.time(rng)])
        r = rng.random()
        if r < 0.4:
            return {"$gte": lo, "$lt": hi}
        if r < 0.55:
            return {"$gt": lo, "$lte": hi}
        if r < 0.7:
            return {rng.choice(["$gt", "$gte"]): lo}
        if r < 0.85:
            return {rng.choice(["$lt", "$lte"]): hi}
        if r < 0.93:
            return lo
        return {"$in": [lo, hi, rng.choice(self.times)]}

    def condition(self, rng, path):
        if path == "t" and rng.random() < 0.7:
            return self.time_range(rng)
        if rng.random() < 0.02:
            return rng.choice(INVALID_CONDITIONS)
        r = rng.random()
        if r < 0.22:
            return self.value(rng, path)
        if r < 0.50:
            ops = rng.sample(["$gt", "$gte", "$lt", "$lte", "$eq"], rng.choice([1, 1, 2]))
            return {op: self.value(rng, path) for op in ops}
        if r < 0.57:
            return {"$ne": self.value(rng, path)}
        if r < 0.66:
            return {"$in": [self.value(rng, path) for _ in range(rng.randint(1, 4))]}
        if r < 0.71:
            return {"$nin": [self.value(rng, path) for _ in range(rng.randint(1, 3))]}
        if r < 0.79:
            return {"$exists": rng.random() < 0.5}
        if r < 0.86:
            return {"$type": rng.choice(TYPES)}
        if r < 0.89:
            return {"$not": {rng.choice(["$gt", "$lte", "$eq"]): self.value(rng, path)}}
        if r < 0.93:
            lo, hi = sorted([_small_int(rng), _small_int(rng)])
            return {"$elemMatch": {"$gte": lo, "$lt": hi}}
        if r < 0.95:
            return {"$size": rng.randint(0, 3)}
        if r < 0.97:
            return {"$all": [self.value(rng, path) for _ in range(rng.randint(1, 2))]}
        return {"$regex": rng.choice(["^h[12]", "y", "^$", "A"]),
                **({"$options": "i"} if rng.random() < 0.3 else {})}

    def filter(self, rng, depth=0):
        f = {}
        for _ in range(rng.choice([0, 1, 1, 1, 2, 2, 3])):
            r = rng.random()
            if depth < 2 and r < 0.15:
                op = rng.choice(["$and", "$or", "$nor"])
                f[op] = [self.filter(rng, depth + 1) or {"s": "x"}
                         for _ in range(rng.randint(1, 3))]
            elif r < 0.27:
                f["t"] = self.time_range(rng)
            elif r < 0.30:
                f["$expr"] = rng.choice([
                    {"$gt": ["$b", "$c"]},
                    {"$eq": ["$m.host", "h1"]},
                    {"$lt": [{"$hour": "$t"}, 1]},
                    {"$eq": [{"$type": "$a"}, "string"]},
                    {"$gt": [{"$getField": "b"}, 0]},
                ])
            else:
                path = rng.choice(FILTER_PATHS)
                f[path] = self.condition(rng, path)
        return f

    def any_filter(self, rng):
        return self.vectorizable_filter(rng) if rng.random() < 0.25 else self.filter(rng)

    def vectorizable_filter(self, rng):
        """A conjunction the bucket scan can split: time, meta and numeric conditions."""
        f = {}
        for _ in range(rng.randint(0, 3)):
            r = rng.random()
            if r < 0.3:
                f["t"] = self.time_range(rng)
            elif r < 0.55:
                path = rng.choice(["m.host", "m.c", "m", "m.tags"])
                f[path] = rng.choice([self.value(rng, path), {"$in": [self.value(rng, path),
                                                                       self.value(rng, path)]}])
            else:
                path = rng.choice(["a", "b", "b", "c"])
                v = rng.choice([_small_int(rng), _fraction(rng), _int64(rng)])
                ops = rng.sample(["$gt", "$gte", "$lt", "$lte", "$eq"], rng.choice([1, 2]))
                f[path] = v if rng.random() < 0.15 else {op: v for op in ops}
        if rng.random() < 0.2:
            f["$and"] = [{"b": {"$gt": _fraction(rng)}}, {"m.host": "h1"}]
        return f

    # -- projections and expressions --

    def expr(self, rng, risk=0.04):
        if self.risky_left and rng.random() < risk:
            self.risky_left -= 1
            return rng.choice(RISKY_EXPRS)
        return rng.choice(SAFE_EXPRS)

    def paths_without_collisions(self, rng, k):
        chosen = []
        for p in rng.sample(PROJECTABLE, k):
            if any(p == c or p.startswith(c + ".") or c.startswith(p + ".") for c in chosen):
                continue
            chosen.append(p)
        return chosen

    def projection(self, rng):
        r = rng.random()
        if r < 0.12:
            return {"_id": 0}
        fields = self.paths_without_collisions(rng, rng.randint(1, 4))
        if r < 0.45:
            spec = {p: 1 for p in fields}
        elif r < 0.75:
            spec = {p: 0 for p in fields}
        else:
            spec = {p: 1 for p in fields[:-1]}
            name = rng.choice(["x", "y", "o.p"])
            spec[name] = self.expr(rng)
            if rng.random() < 0.2:
                spec["k"] = {"$literal": 5}
            if rng.random() < 0.15:
                spec["n"] = {"x": 1, "z": 1}
                spec = {p: v for p, v in spec.items() if not p.startswith("n.")}
        if rng.random() < 0.3:
            spec["_id"] = 0
        if rng.random() < 0.01:
            spec = {"b": 1, "s": 0}  # mixes inclusion and exclusion: an error on both
        return spec

    def sort(self, rng, paths, unique):
        keys = {}
        for p in rng.sample(paths, min(len(paths), rng.choice([0, 1, 1, 2]))):
            keys[p] = rng.choice([1, -1])
        for u in unique:
            keys.setdefault(u, rng.choice([1, -1]))
        return keys

    # -- finds --

    def find_projection(self, rng):
        """A projection, sometimes with the operators only find has."""
        spec = self.projection(rng)
        r = rng.random()
        if r < 0.06:
            spec = {"arr": {"$slice": rng.choice([1, -1, [1, 1], [-2, 5]])},
                    **{k: v for k, v in spec.items() if v == 0 and k != "arr"}}
        elif r < 0.1:
            spec = {"n": {"$elemMatch": {"x": {"$gt": _small_int(rng)}}}, "s": 1}
        elif r < 0.12:
            spec = {"arr.$": 1}  # valid only when the filter matches arr: else an error
        return spec

    def find(self, rng):
        self.risky_left = 1
        args = {"filter": self.any_filter(rng)}
        if rng.random() < 0.6:
            args["projection"] = self.find_projection(rng)
        if rng.random() < 0.6:
            args["sort"] = list(self.sort(rng, SORT_PATHS, ["_id"]).items())
            if rng.random() < 0.3:
                args["skip"] = rng.randint(0, 20)
            if rng.random() < 0.4:
                args["limit"] = rng.randint(1, 30)
        if rng.random() < 0.15:
            args["batch_size"] = rng.choice([1, 7, 50])
        return args

    # -- pipelines --

    def group(self, rng, ordered, previous_group=None):
        """A $group stage, its output field names, and whether a $sort on _id orders its
        output totally."""
        if previous_group is not None:
            names, sortable = previous_group
            key = rng.choice([None, "$_id", *("$" + f for f in names)])
            unique_key = key == "$_id"
            fields = list(names) + ["_id"]
            sortable = key is None or (key == "$_id" and sortable)
        else:
            r = rng.random()
            unique_key = False
            if r < 0.12:
                key, unique_key = rng.choice(UNIQUE_GROUP_KEYS), True
            elif r < 0.45:
                key = rng.choice([None, "$m.host", "$m", "$m.c", "$m.tags", "$m.sub.k", "$s",
                                  "$c", "$a", "$arr", "$n.x", {"$year": "$t"}, {"$hour": "$t"},
                                  {"c": "$m.c", "s": "$s"}, {"h": "$m.host", "x": "$c"}])
            elif r < 0.8:
                key = date_trunc(rng)
            elif r < 0.88:
                key = {"h": "$m.host", "d": date_trunc(rng)}
            else:
                key = rng.choice([
                    {"$getField": "s"},
                    {"$dateTrunc": {"date": "$t", "unit": "hour", "timezone": "+01:30"}},
                    {"$dateTrunc": {"date": "$t", "unit": "week"}},
                    {"$dateTrunc": {"date": "$t", "unit": "minute", "binSize": 10,
                                    "timezone": "UTC"}},
                    {"$toString": "$m.c"},
                    {"$dateTrunc": {"date": "$t", "unit": "hour", "timezone": "Europe/Paris"}},
                    {"$dateTrunc": {"date": "$t", "unit": "day", "binSize": 2.0}},
                ])
            fields = FIELDS + ["n.x", "m.c", "m.host"]
            sortable = key not in ARRAY_KEYS
        spec = {"_id": key}
        order_free = ordered or unique_key
        names = []
        for i in range(rng.randint(1, 4)):
            field = "$" + rng.choice(fields)
            if rng.random() < 0.05:
                field = {"$getField": rng.choice(["b", "c"])}
            accs = [{"$sum": 1}, {"$count": {}}, {"$sum": field}, {"$avg": field},
                    {"$min": field}, {"$max": field}, {"$sum": 2.5},
                    {"$avg": {"$multiply": ["$b", 2]}}]
            if order_free:
                accs += [{"$first": field}, {"$last": field}, {"$first": field}, {"$last": field}]
            if ordered:
                accs += [{"$push": field}]
            name = f"v{i}"
            spec[name] = rng.choice(accs)
            names.append(name)
        return {"$group": spec}, names, sortable

    def pipeline_stages(self, rng, stages, ordered, unique, sort_paths):
        """Appends random stages; returns whether the output order is defined."""
        group_fields = None
        for _ in range(rng.randint(1, 4)):
            options = ["$match", "$project", "$addFields", "$group", "$unwind", "$count",
                       "$unset"]
            if unique:
                options += ["$sort", "$sort"]
            if ordered:
                options += ["$limit", "$skip"]
            op = rng.choice(options)
            if rng.random() < 0.02:
                stages.append(rng.choice(INVALID_STAGES))
            elif op == "$match":
                stages.append({"$match": self.filter(rng)})
            elif op == "$project":
                spec = self.projection(rng)
                stages.append({"$project": spec})
                if spec.get("_id") == 0 or "i" in unique:
                    unique = []
            elif op == "$addFields":
                stages.append({"$addFields": {rng.choice(["x", "y", "a", "n.q"]): self.expr(rng)}})
            elif op == "$unset":
                stages.append({"$unset": rng.sample(["a", "n.x", "m.host", "s"], 2)})
            elif op == "$sort":
                stages.append({"$sort": self.sort(rng, sort_paths, unique)})
                ordered = True
            elif op in ("$limit", "$skip"):
                stages.append({op: rng.randint(0 if op == "$skip" else 1, 40)})
            elif op == "$group":
                stage, names, sortable = self.group(rng, ordered, group_fields)
                group_fields = (names, sortable)
                stages.append(stage)
                ordered, unique = False, ["_id"] if sortable else []
                sort_paths = names
            elif op == "$unwind":
                path = rng.choice(["$arr", "$m.tags", "$n", "$arr"])
                if rng.random() < 0.5:
                    spec = {"path": path, "preserveNullAndEmptyArrays": rng.random() < 0.5}
                    if rng.random() < 0.6:
                        spec["includeArrayIndex"] = "i"
                    stages.append({"$unwind": spec})
                    indexed = unique == ["_id"] and "includeArrayIndex" in spec
                    unique = ["_id", "i"] if indexed else []
                else:
                    stages.append({"$unwind": path})
                    unique = []
            elif op == "$count":
                stages.append({"$count": "n"})
                return True
        return ordered

    def pipeline(self, rng):
        """A pipeline and whether its output order is defined."""
        self.risky_left = 1
        r = rng.random()
        if r < 0.3:
            return self.vectorized_group_pipeline(rng)
        if r < 0.42:
            return self.last_point_pipeline(rng)
        if r < 0.47:
            return self.self_join_pipeline(rng)
        if r < 0.62:
            return self.projected_sort_pipeline(rng)
        stages = [{"$match": self.filter(rng)} for _ in range(rng.choice([0, 1, 1, 2]))]
        ordered = self.pipeline_stages(rng, stages, False, ["_id"], SORT_PATHS)
        return stages, ordered

    def projected_sort_pipeline(self, rng):
        """[$match] $project [$sort] [$skip] [$limit]: the shape a time-series scan
        answers over columns, building documents last."""
        stages = [{"$match": self.any_filter(rng)} for _ in range(rng.choice([0, 1, 1]))]
        spec = {f: rng.choice([1, True]) for f in rng.sample(
            ["a", "b", "c", "s", "t", "m", "arr", "n", "nope"], rng.randint(1, 4))}
        for name in rng.sample(["x", "y", "z"], rng.choice([0, 0, 1, 2])):
            spec[name] = rng.choice(["$b", "$t", "$s", "$m.host", "$m", {"$literal": 7}, "text",
                                     {"$ifNull": ["$m.c", -1]}, {"x": 1}, {"x": 1, "z": 1},
                                     {"w": "$m.c"}, "$n.x", {"$toString": "$m.c"}])
        if rng.random() < 0.25:
            # An expression of the meta alone (computed once per bucket over columns) that
            # fails on some series: only when a document of that series is returned.
            spec["u"] = self.expr(rng, risk=1)
        # {"n": {"x": 1}} is a nested inclusion, not an expression.
        if rng.random() < 0.15:
            spec["n"] = rng.choice([{"x": 1}, {"x": 1, "z": True}, {"z": {"w": 1}}])
        total = rng.random() < 0.8
        if not total:
            spec["_id"] = 0
        stages.append({"$project": spec})
        ordered = False
        if rng.random() < 0.8:
            keys = [k for k in spec if k != "_id"]
            picked = rng.sample(keys, min(len(keys), rng.randint(1, 2)))
            sort = {k: rng.choice([1, -1]) for k in picked}
            if total:
                sort["_id"] = rng.choice([1, -1])
            stages.append({"$sort": sort})
            ordered = total
            if total and rng.random() < 0.3:
                stages.append({"$skip": rng.randint(0, 30)})
            if total and rng.random() < 0.6:
                stages.append({"$limit": rng.randint(1, 40)})
        return stages, ordered

    def self_join_pipeline(self, rng):
        """A few documents joined with the collection itself (each kind with itself:
        SELF stands for the collection's name), so the time-series collection is also
        read as the inner side of $lookup and $unionWith."""
        stages = [{"$match": {"_id": {"$in": rng.sample(self.ids, 3)}}}]
        r = rng.random()
        if r < 0.35:
            field = rng.choice(["s", "c", "m.host", "arr", "n.x"])
            stages += [{"$lookup": {"from": SELF, "localField": field, "foreignField": field,
                                    "as": "j"}},
                       {"$addFields": {"j": "$j._id"}}]
        elif r < 0.7:
            inner = []
            if rng.random() < 0.6:
                inner.append({"$match": {"$expr": {rng.choice(["$lt", "$eq"]): [
                    rng.choice(["$b", "$m.host"]), rng.choice(["$$x", "$$h"])]}}})
            inner.append(self.group(rng, False)[0])
            stages.append({"$lookup": {"from": SELF, "let": {"x": "$b", "h": "$m.host"},
                                       "pipeline": inner, "as": "j"}})
        else:
            inner = [{"$match": self.vectorizable_filter(rng)}]
            if rng.random() < 0.5:
                inner.append(self.group(rng, False)[0])
            stages.append({"$unionWith": {"coll": SELF, "pipeline": inner}})
            return stages, False
        # The joined documents come in an undefined order: compare them sorted, or count.
        if rng.random() < 0.5:
            stages.append({"$addFields": {"j": {"$size": "$j"}}})
        else:
            stages.append({"$project": {"j": {"$sortArray": {"input": "$j", "sortBy": 1}}}})
        return stages, False

    def vectorized_group_pipeline(self, rng):
        """[$match...] $group right after: the shape the bucket scan groups over columns."""
        stages = []
        for _ in range(rng.choice([0, 1, 1, 2])):
            stages.append({"$match": self.vectorizable_filter(rng) if rng.random() < 0.7
                           else self.filter(rng)})
        stage, _, sortable = self.group(rng, False)
        stages.append(stage)
        ordered = False
        if sortable and rng.random() < 0.3:
            stages.append({"$sort": {"_id": 1}})
            ordered = True
            if rng.random() < 0.5:
                stages.append({"$limit": rng.randint(1, 10)})
        elif rng.random() < 0.2:
            stages.append({"$count": "n"})
        return stages, ordered

    def last_point_pipeline(self, rng):
        """$sort by meta paths and time descending, then $group taking $first: the shape
        answered from each series' newest buckets. Sometimes a variation of it."""
        paths = rng.choice([["m.host"], ["m"], ["m.c"], ["m.host", "m.c"], []])
        sort = {p: rng.choice([1, -1]) for p in paths}
        sort["t"] = -1
        if not paths:
            key = rng.choice(["$m.host", {"h": "$m.host"}, "$m", "$m.sub"])
        elif len(paths) == 1:
            key = rng.choice(["$" + paths[0], {"k": "$" + paths[0]}])
        else:
            key = {f"k{i}": "$" + p for i, p in enumerate(paths)}
        group = {"_id": key}
        firsts = ["$b", "$$ROOT", "$t", "$a", "$_id", {"$ifNull": ["$s", "none"]}, "$m"]
        for i in range(rng.randint(1, 3)):
            group[f"v{i}"] = {"$first": rng.choice(firsts)}
        r = rng.random()
        if r < 0.1:
            group["l"] = {"$last": "$t"}
        elif r < 0.2:
            sort["t"] = 1
        elif r < 0.3:
            sort = {"t": -1, **{p: 1 for p in paths}}
        stages = [{"$sort": sort}, {"$group": group}]
        if rng.random() < 0.2:
            stages.insert(0, {"$match": self.vectorizable_filter(rng)})
        ordered = False
        if key not in ARRAY_KEYS and rng.random() < 0.4:
            stages.append({"$sort": {"_id": 1}})
            ordered = True
        return stages, ordered


# ---------------------------------------------------------------------------------------
# Fixtures and tests


@pytest.fixture(scope="module")
def loaded(client):
    """The regular and the time-series collection with the same documents, and a
    generator that knows their values."""
    name = "py_differential"
    client.drop_database(name)
    db = client[name]
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    docs, batches = make_documents(random.Random(SEED), N_DOCS)
    start = 0
    for size in batches:
        db.reg.insert_many(docs[start:start + size])
        db.ts.insert_many(docs[start:start + size])
        start += size
    assert db.reg.count_documents({}) == db.ts.count_documents({}) == N_DOCS
    # The same view over each kind (#19): a stage that adds a field and one that drops
    # some documents, so reads through it run the view's pipeline first.
    view = [{"$addFields": {"vw": {"$ifNull": ["$b", "none"]}}},
            {"$match": {"t": {"$gte": T0 + datetime.timedelta(seconds=30)}}}]
    db.create_collection("reg_view", viewOn="reg", pipeline=view)
    db.create_collection("ts_view", viewOn="ts", pipeline=view)
    yield db.reg, db.ts, Generator(docs)
    client.drop_database(name)


@pytest.fixture(scope="module")
def views(loaded):
    """The two views, in place of the collections."""
    reg, ts, gen = loaded
    return reg.database.reg_view, ts.database.ts_view, gen


def differential(kind, loaded):
    d = Differential(kind)
    d.reg, d.ts, gen = loaded
    return d, gen


def test_find_on_timeseries_equals_find_on_regular_collection(loaded):
    d, gen = differential("find", loaded)
    for case, rng in d.cases():
        args = gen.find(rng)

        def run(coll, args=args):
            return list(coll.find(**args))

        d.check(case, f"find({args})", run, ordered="sort" in args)
    d.assert_agree()


def test_pipelines_on_timeseries_equal_regular(loaded):
    d, gen = differential("pipeline", loaded)
    for case, rng in d.cases():
        stages, ordered = gen.pipeline(rng)

        def run(coll, stages=stages):
            return list(coll.aggregate(bind(stages, coll.name)))

        d.check(case, f"aggregate({stages})", run, ordered=ordered)
    d.assert_agree()


def test_count_and_distinct_agree(loaded):
    d, gen = differential("count", loaded)
    for case, rng in d.cases():
        flt = gen.any_filter(rng)
        r = rng.random()
        if r < 0.3:
            opts = {}
            if rng.random() < 0.3:
                opts["skip"] = rng.randint(0, 50)
            if rng.random() < 0.3:
                opts["limit"] = rng.randint(1, 50)
            d.check(case, f"count_documents({flt}, **{opts})",
                    lambda c, flt=flt, opts=opts: c.count_documents(flt, **opts))
        elif r < 0.45:
            # A time-series count runs over bucket columns; skip and limit apply after.
            opts = {k: rng.randint(0, 40) for k in ("skip", "limit") if rng.random() < 0.3}
            d.check(case, f"count command, query={flt}, {opts}",
                    lambda c, flt=flt, opts=opts:
                    c.database.command("count", c.name, query=flt, **opts)["n"])
        elif r < 0.55:
            d.check(case, f"aggregate([{{'$match': {flt}}}, {{'$count': 'n'}}])",
                    lambda c, flt=flt: list(c.aggregate([{"$match": flt}, {"$count": "n"}])))
        else:
            key = rng.choice(["a", "b", "c", "s", "arr", "arr.0", "n", "n.x", "n.z.w", "m",
                              "m.host", "m.c", "m.tags", "m.sub", "t", "_id", "nope"])
            d.check(case, f"distinct({key!r}, {flt})",
                    lambda c, key=key, flt=flt: c.distinct(key, flt))
    d.assert_agree()


def test_reads_through_a_view_agree_over_both_kinds_of_collection(views):
    # Finds, pipelines and counts through the same view over the regular and over the
    # time-series collection (a third of the cases of each kind).
    d, gen = differential("view", views)
    for case, rng in d.cases():
        r = rng.random()
        if r < 0.4:
            args = gen.find(rng)
            d.check(case, f"view find({args})", lambda c, args=args: list(c.find(**args)),
                    ordered="sort" in args)
        elif r < 0.8:
            stages, ordered = gen.pipeline(rng)
            d.check(case, f"view aggregate({stages})",
                    lambda c, stages=stages: list(c.aggregate(bind(stages, c.name))),
                    ordered=ordered)
        else:
            flt = gen.any_filter(rng)
            d.check(case, f"view count_documents({flt})",
                    lambda c, flt=flt: c.count_documents(flt))
    d.assert_agree()
