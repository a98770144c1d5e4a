"""Random write sequences on a time-series collection and on a regular collection with the
same documents: after every write both hold the same measurements and the write reports
the same count. Bucket rewrites, reopening, schema changes that close buckets, meta
updates in place and measurement updates that move rows to new buckets all meet here.
A failing sequence is shrunk to a short one and printed."""

import datetime
import random

import pytest

T0 = datetime.datetime(2024, 1, 1)


def contents(c):
    return sorted(tuple(sorted((k, repr(v)) for k, v in d.items() if k != "_id"))
                  for d in c.find())


def apply(coll, name, arg):
    """Runs one write; returns what it reports."""
    if name == "insert":
        return len(coll.insert_many([dict(r) for r in arg]).inserted_ids)
    if name == "update_many":
        return coll.update_many(*arg).modified_count
    if name == "update_one":
        return coll.update_one(*arg).modified_count
    if name == "delete_many":
        return coll.delete_many(arg).deleted_count
    if name == "delete_one":
        return coll.delete_one(arg).deleted_count
    if name == "find_one_and_update":
        found = coll.find_one_and_update(arg[0], arg[1], projection={"_id": 0})
        return sorted(found.items()) if found else None
    if name == "upsert":
        return coll.update_one(arg[0], arg[1], upsert=True).matched_count
    raise ValueError(name)


def first_difference(db, granularity, ops):
    """Index of the first write after which the collections differ, or None."""
    db.drop_collection("ts")
    db.drop_collection("reg")
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m",
                                           "granularity": granularity})
    for i, (name, arg) in enumerate(ops):
        if apply(db.ts, name, arg) != apply(db.reg, name, arg):
            return i
        if contents(db.ts) != contents(db.reg):
            return i
    return None


def sequence(rnd):
    """Writes whose single-document targets are unambiguous (every time is distinct)."""
    minutes = iter(rnd.sample(range(6000), 200))
    metas = ["a", "b", None, {"site": 1}]

    def row():
        return {"t": T0 + datetime.timedelta(minutes=next(minutes)), "m": rnd.choice(metas),
                "v": rnd.randint(0, 9), "w": rnd.choice(["p", "q", 3])}

    rows = [row() for _ in range(rnd.randint(1, 50))]
    ops, k = [], 0
    while k < len(rows):
        n = rnd.randint(1, 12)
        ops.append(("insert", rows[k:k + n]))
        k += n
    for step in range(rnd.randint(1, 8)):
        v = rnd.randint(0, 9)
        flt = rnd.choice([{"v": v}, {"v": {"$gte": v}}, {"m": "a"}, {"w": "p"},
                          {"m": "b", "v": {"$lt": v}}, {}])
        one = {"t": rnd.choice(rows)["t"]}
        ops.append(rnd.choice([
            ("update_many", (flt, {"$set": {"w": f"u{step}"}})),
            ("update_many", ({"m": "a"}, {"$set": {"m": f"z{step}"}})),
            ("update_one", (one, {"$inc": {"v": 100}})),
            ("delete_many", flt),
            ("delete_one", one),
            ("find_one_and_update", (one, {"$set": {"w": "f"}})),
            ("upsert", ({"m": "new", "t": T0, "v": 77}, {"$set": {"w": "up"}})),
            ("insert", [row() for _ in range(rnd.randint(1, 8))]),
        ]))
    return ops


def shrink(db, granularity, ops, budget=60):
    """A shorter sequence that still fails: drops writes and inserted rows while it does
    (at most `budget` tries)."""
    changed = True
    while changed and budget > 0:
        changed = False
        for j in range(len(ops)):
            candidates = [ops[:j] + ops[j + 1:]]
            name, arg = ops[j]
            if name == "insert" and len(arg) > 1:
                candidates += [ops[:j] + [(name, arg[:r] + arg[r + 1:])] + ops[j + 1:]
                               for r in range(len(arg))]
            for c in candidates:
                budget -= 1
                if budget <= 0:
                    return ops
                if first_difference(db, granularity, c) is not None:
                    ops, changed = c, True
                    break
            if changed:
                break
    return ops


@pytest.mark.parametrize("seed", range(60))
def test_random_writes_leave_a_time_series_collection_equal_to_a_regular_one(db, seed):
    rnd = random.Random(seed)
    granularity = rnd.choice(["seconds", "minutes", "hours"])
    ops = sequence(rnd)
    at = first_difference(db, granularity, ops)
    if at is not None:
        short = shrink(db, granularity, ops[:at + 1])
        pytest.fail(f"granularity {granularity}; these writes leave the collections different:\n"
                    + "\n".join(repr(o) for o in short))
