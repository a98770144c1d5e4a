"""Geo queries on a time-series collection decided from the location column (#20/#21):
`$geoNear` followed by `$limit` keeps the k nearest without building a document per
measurement, and `$geoWithin`/`$geoIntersects` filter rows on the column (a GeoJSON point
read from its bytes). The answers must be those of a regular collection holding the same
documents, for every kind of stored value: common points, integer coordinates, legacy
pairs, arrays of points, other geometries, missing and invalid locations; in stored and
open buckets."""

import datetime
import random

import pytest

T0 = datetime.datetime(2026, 1, 1)
CENTER = [2.35, 48.86]


def locations(rnd):
    """A mix of every kind of value a location field may hold."""
    x, y = CENTER[0] + rnd.uniform(-0.2, 0.2), CENTER[1] + rnd.uniform(-0.2, 0.2)
    kind = rnd.randrange(10)
    if kind < 5:
        return {"type": "Point", "coordinates": [x, y]}
    if kind == 5:
        return {"type": "Point", "coordinates": [int(x * 10) / 10 if rnd.random() < 0.5 else int(x), int(y)]}
    if kind == 6:
        return [x, y]  # legacy pair
    if kind == 7:
        return {"coordinates": [x, y], "type": "Point"}  # fields the other way round
    if kind == 8:
        return {"type": "LineString", "coordinates": [[x, y], [x + 0.01, y + 0.01]]}
    return None  # no location


@pytest.fixture
def both(db):
    rnd = random.Random(11)
    docs = []
    for i in range(3000):
        d = {"_id": i, "t": T0 + datetime.timedelta(seconds=7 * i), "v": f"v{i % 13}", "n": i}
        loc = locations(rnd)
        if loc is not None:
            d["loc"] = loc
        docs.append(d)
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "v"})
    # (No 2dsphere index on the time-series side: there it holds points only.)
    db.reg.create_index([("loc", "2dsphere")])
    # 3000 measurements 7 s apart over 13 series: most in stored buckets, the newest
    # hour of each series in open ones.
    db.ts.insert_many(docs)
    db.reg.insert_many(docs)
    return db


def near_pipeline(limit, match=None, **extra):
    spec = {"near": {"type": "Point", "coordinates": CENTER}, "key": "loc", "distanceField": "d",
            "spherical": True, **extra}
    # A $match right after $geoNear is its query (MongoDB takes no `query` on time series).
    return [{"$geoNear": spec}] + ([{"$match": match}] if match else []) + [{"$limit": limit}]


def by_distance(docs):
    return [(round(d["d"], 6), d["n"]) for d in docs]


@pytest.mark.parametrize("limit", [1, 10, 250])
@pytest.mark.parametrize("extra", [
    {},
    {"minDistance": 2000, "maxDistance": 9000},
    {"match": {"n": {"$gte": 1000}, "t": {"$lt": T0 + datetime.timedelta(hours=5)}}},
    {"distanceMultiplier": 0.001},
], ids=["plain", "min-max", "match", "multiplier"])
def test_geo_near_with_a_limit_on_a_time_series_collection_equals_a_regular_collection(both, limit, extra):
    pipeline = near_pipeline(limit, **extra)
    got = list(both.ts.aggregate(pipeline))
    want = list(both.reg.aggregate(pipeline))
    # No two locations near the centre are equally far, so the order is fixed.
    assert by_distance(got) == by_distance(want) and len(got) > 0
    assert got == want
    plan = both.command("explain", {"aggregate": "ts", "pipeline": pipeline, "cursor": {}},
                        verbosity="executionStats")
    unpack = next(s["$_internalUnpackBucket"] for s in plan["stages"] if "$_internalUnpackBucket" in s)
    assert unpack["nearestFromColumns"] is True


@pytest.mark.parametrize("flt", [
    {"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [
        [[2.2, 48.8], [2.5, 48.8], [2.5, 48.95], [2.2, 48.95], [2.2, 48.8]]]}}}},
    {"loc": {"$geoWithin": {"$centerSphere": [CENTER, 5 / 6378.1]}}},
    {"loc": {"$geoIntersects": {"$geometry": {"type": "Polygon", "coordinates": [
        [[2.3, 48.8], [2.4, 48.8], [2.4, 48.9], [2.3, 48.9], [2.3, 48.8]]]}}},
     "t": {"$gte": T0 + datetime.timedelta(hours=1)}},
    {"loc": {"$geoWithin": {"$box": [[2.3, 48.8], [2.4, 48.9]]}}, "n": {"$lt": 2500}},
], ids=["polygon", "centerSphere", "intersects-and-time", "box-and-number"])
def test_geo_filters_on_a_time_series_collection_equal_a_regular_collection(both, flt):
    got = sorted(d["n"] for d in both.ts.find(flt))
    want = sorted(d["n"] for d in both.reg.find(flt))
    assert got == want and len(want) > 20
    assert both.ts.count_documents(flt) == len(want)


def test_an_array_of_locations_falls_back_to_the_document_filter_and_still_matches(db):
    db.create_collection("ts", timeseries={"timeField": "t"})
    docs = [{"t": T0, "n": 1, "loc": [{"type": "Point", "coordinates": [1.0, 1.0]},
                                      {"type": "Point", "coordinates": [50.0, 50.0]}]},
            {"t": T0, "n": 2, "loc": {"type": "Point", "coordinates": [50.0, 50.0]}}]
    db.ts.insert_many(docs)
    box = {"loc": {"$geoWithin": {"$box": [[0, 0], [2, 2]]}}}
    assert [d["n"] for d in db.ts.find(box)] == [1]


def test_geo_near_passes_over_buckets_whose_point_box_is_farther_than_the_k_nearest(db):
    # 40 vehicles, each moving in its own small area; a bucket whose points all lie in a
    # box farther than the k nearest found so far is not decoded. Buckets holding a
    # legacy pair or a {lng, lat} point among GeoJSON points have no such box and are
    # always read, so the nearest of all (those two) are still found.
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "v"})
    docs = []
    for v in range(40):
        cx, cy = CENTER[0] + (v % 8 - 3.5) * 0.05, CENTER[1] + (v // 8 - 2.5) * 0.05
        for i in range(50):
            docs.append({"t": T0 + datetime.timedelta(seconds=30 * i), "v": v, "n": v * 100 + i,
                         "loc": {"type": "Point", "coordinates": [cx + i * 1e-4, cy + i * 1e-4]}})
    docs[120]["loc"] = [CENTER[0] + 1e-6, CENTER[1]]  # a legacy pair, vehicle 2
    docs[1530]["loc"] = {"lng": CENTER[0], "lat": CENTER[1] + 2e-6}  # vehicle 30
    db.ts.insert_many(docs)
    db.reg.create_index([("loc", "2dsphere")])
    db.reg.insert_many(docs)
    pipeline = near_pipeline(5)
    got = list(db.ts.aggregate(pipeline))
    assert got == list(db.reg.aggregate(pipeline))
    assert [d["n"] for d in got[:2]] == [220, 3030]
    plan = db.command("explain", {"aggregate": "ts", "pipeline": pipeline, "cursor": {}},
                      verbosity="executionStats")
    unpack = next(s["$_internalUnpackBucket"] for s in plan["stages"] if "$_internalUnpackBucket" in s)
    assert unpack["executionStats"]["bucketsPassedOverByDistance"] >= 20
