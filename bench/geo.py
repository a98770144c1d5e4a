#!/usr/bin/env python3
"""Fleet positions (VEHICLES random walks around Paris, one GeoJSON point every 30 s) in a
Hourglass time-series collection and in DuckDB (naive UTC timestamps, lon/lat columns), and
two questions answered by both in one run, printed side by side as a ratio:

- polygon-and-time: the positions inside a quadrilateral during one hour;
- near-and-time: the 10 positions nearest a point during one hour, with their distance.

polygon-and-time is also asked of a regular collection holding the same documents with a
2dsphere index on loc, once as the planner chooses (the index, bounded by the cells of the
polygon) and once scanning (`hint: {$natural: 1}`); `--no-regular` leaves it out (the
full-size set, 10,000 vehicles x 24 h = 28.8 M positions, would need several GB more).
For both time-series questions the buckets examined, pruned, unpacked (and, for the
nearest, passed over by distance) are printed beside the positions returned.

DuckDB's answers are plain SQL: a convex point-in-polygon test (cross products) and the
haversine distance on MongoDB's earth radius. Hourglass's edges are great-circle arcs and
DuckDB's are straight in longitude/latitude, so a position within centimetres of an edge
may be counted by one and not the other: both counts are printed."""
import argparse, csv, datetime, math, os, queue, random, statistics, threading, time

import duckdb
from pymongo import MongoClient

R = 6378100.0
T0 = datetime.datetime(2026, 1, 1)
QUAD = [(2.30, 48.84), (2.38, 48.83), (2.40, 48.88), (2.31, 48.89)]  # counterclockwise
CENTER = (2.35, 48.86)


def fleet(vehicles, hours):
    rnd = random.Random(7)
    steps = hours * 120
    for v in range(vehicles):
        x, y = 2.2 + rnd.random() * 0.3, 48.78 + rnd.random() * 0.16
        for s in range(steps):
            x = min(2.6, max(2.1, x + rnd.gauss(0, 0.0015)))
            y = min(49.0, max(48.7, y + rnd.gauss(0, 0.001)))
            yield T0 + datetime.timedelta(seconds=30 * s), f"v{v}", x, y


def timed(fn, runs):
    fn()
    times = []
    out = None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--vehicles", type=int, default=1000)
    ap.add_argument("--hours", type=int, default=6)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-regular", dest="regular", action="store_false")
    a = ap.parse_args()

    db = MongoClient(a.uri).geobench
    db.drop_collection("fleet")
    db.create_collection("fleet", timeseries={"timeField": "t", "metaField": "v"})
    db.drop_collection("fleet_r")
    db.fleet_r.create_index([("loc", "2dsphere")])
    path = os.path.join(a.work, "fleet.csv")
    n = 0
    t = time.perf_counter()
    # Batches are sent by a second thread while the next one is generated.
    pending = queue.Queue(maxsize=2)

    failed = []

    def send():
        while (batch := pending.get()) is not None:
            if failed:
                continue  # keep draining so the generator never blocks
            try:
                db.fleet.insert_many(batch, ordered=False)
                if a.regular:
                    db.fleet_r.insert_many(batch, ordered=False)
            except Exception as e:  # reported after the join
                failed.append(e)

    sender = threading.Thread(target=send)
    sender.start()
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t", "v", "lon", "lat"])
        batch = []
        for ts, v, x, y in fleet(a.vehicles, a.hours):
            batch.append({"t": ts, "v": v, "loc": {"type": "Point", "coordinates": [x, y]}})
            w.writerow([ts.isoformat(), v, x, y])
            if len(batch) == 10000:
                pending.put(batch)
                n += len(batch)
                batch = []
        if batch:
            pending.put(batch)
            n += len(batch)
    pending.put(None)
    sender.join()
    if failed:
        raise failed[0]
    print(f"loaded {n} positions ({a.vehicles} vehicles x {a.hours} h every 30 s) in {time.perf_counter() - t:.1f} s")

    con = duckdb.connect()
    con.execute(f"CREATE TABLE fleet AS SELECT CAST(t AS TIMESTAMP) AS t, v, lon, lat FROM read_csv_auto('{path}')")

    t1, t2 = T0 + datetime.timedelta(hours=2), T0 + datetime.timedelta(hours=3)
    ring = QUAD + [QUAD[0]]
    polygon = {"type": "Polygon", "coordinates": [[list(p) for p in ring]]}
    window = {"$gte": t1, "$lt": t2}
    in_poly = {"loc": {"$geoWithin": {"$geometry": polygon}}, "t": window}
    hg_poly = lambda: db.fleet.count_documents(in_poly)
    reg_index = lambda: db.fleet_r.count_documents(in_poly)
    reg_scan = lambda: db.fleet_r.count_documents(in_poly, hint=[("$natural", 1)])
    edges = " AND ".join(
        f"(({bx} - {ax}) * (lat - {ay}) - ({by} - {ay}) * (lon - {ax})) >= 0"
        for (ax, ay), (bx, by) in zip(ring, ring[1:])
    )
    dk_window = f"t >= TIMESTAMP '{t1.isoformat(sep=' ')}' AND t < TIMESTAMP '{t2.isoformat(sep=' ')}'"
    dk_poly = lambda: con.execute(f"SELECT count(*) FROM fleet WHERE {dk_window} AND {edges}").fetchone()[0]

    cx, cy = CENTER
    hg_near_pipeline = [
        {"$geoNear": {"near": {"type": "Point", "coordinates": [cx, cy]}, "key": "loc", "distanceField": "d", "spherical": True}},
        {"$match": {"t": window}},
        {"$limit": 10},
    ]
    hg_near = lambda: [d["d"] for d in db.fleet.aggregate(hg_near_pipeline)]
    haversine = (
        f"2 * {R} * asin(sqrt(pow(sin(radians(lat - {cy}) / 2), 2) + "
        f"cos(radians({cy})) * cos(radians(lat)) * pow(sin(radians(lon - {cx}) / 2), 2)))"
    )
    dk_near = lambda: [r[0] for r in con.execute(
        f"SELECT {haversine} AS d FROM fleet WHERE {dk_window} ORDER BY d LIMIT 10").fetchall()]

    print(f"{'query':<26} {'hourglass_ms':>13} {'duckdb_ms':>10} {'ratio':>7}  answers")
    questions = (
        ("polygon-and-time", hg_poly, dk_poly),
        ("polygon, regular+2dsphere", reg_index, dk_poly),
        ("polygon, regular scan", reg_scan, dk_poly),
        ("near-and-time", hg_near, dk_near),
    )
    if not a.regular:
        questions = (questions[0], questions[3])
    for name, hg, dk in questions:
        hg_ms, hg_out = timed(hg, a.runs)
        dk_ms, dk_out = timed(dk, a.runs)
        if isinstance(hg_out, list):
            same = all(abs(x - y) <= 1e-6 * max(1.0, y) for x, y in zip(hg_out, dk_out))
            answer = f"nearest {hg_out[0]:.1f} m vs {dk_out[0]:.1f} m, same 10 distances: {same}"
        else:
            answer = f"{hg_out} vs {dk_out} positions"
        print(f"{name:<26} {hg_ms:>13.1f} {dk_ms:>10.1f} {hg_ms / dk_ms:>6.1f}x  {answer}")
    for name, pipeline in (
        ("polygon-and-time", [{"$match": in_poly}]),
        ("near-and-time", hg_near_pipeline),
    ):
        plan = db.command("explain", {"aggregate": "fleet", "pipeline": pipeline, "cursor": {}},
                          verbosity="executionStats")
        stage = next(s for s in plan["stages"] if "$_internalUnpackBucket" in s)
        unpack = stage["$_internalUnpackBucket"]
        st = unpack["executionStats"]
        print(f"{name} buckets: examined {st['bucketsExamined']}, pruned {st['bucketsPruned']}, "
              f"unpacked {st['bucketsUnpacked']}, passed over by distance "
              f"{st['bucketsPassedOverByDistance']}; positions returned {stage.get('nReturned', '-')}")
    if not a.regular:
        return
    reg_plan = db.fleet_r.find(in_poly).explain()["executionStats"]
    stage = reg_plan["executionStages"]
    while stage.get("inputStage"):
        stage = stage["inputStage"]
    print(f"polygon, regular+2dsphere explain: {stage['stage']} keysExamined={stage.get('keysExamined')} "
          f"docsExamined={reg_plan['totalDocsExamined']} nReturned={reg_plan['nReturned']} of {n} documents")


if __name__ == "__main__":
    main()
