"""A geo condition on a time-series collection prunes the buckets whose points (their
control min/max coordinates) lie outside the region's longitude/latitude box, and composes
with the time and meta pushdown; the answers stay exactly those of an unpruned read."""

import datetime

import pytest

T0 = datetime.datetime(2026, 1, 1)


def square(x0, y0, x1, y1):
    return {"type": "Polygon", "coordinates": [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]]}


@pytest.fixture
def fleet(db):
    """Ten vehicles, each in its own area (lon 10*v, lat 10), 20 positions a minute apart."""
    db.create_collection("fleet", timeseries={"timeField": "t", "metaField": "v"})
    db.fleet.insert_many([
        {"t": T0 + datetime.timedelta(minutes=i), "v": f"v{v}",
         "loc": {"type": "Point", "coordinates": [v * 10 + i * 0.01, 10 + i * 0.01]}}
        for v in range(10) for i in range(20)])
    return db


def unpack_stats(db, flt):
    plan = db.command("explain", {"find": "fleet", "filter": flt}, verbosity="executionStats")
    stage = next(s["$_internalUnpackBucket"] for s in plan["stages"] if "$_internalUnpackBucket" in s)
    return stage, stage["executionStats"]


def test_geo_within_reads_only_the_buckets_whose_extent_meets_the_polygon(fleet):
    flt = {"loc": {"$geoWithin": {"$geometry": square(19, 9, 21, 11)}}}
    stage, stats = unpack_stats(fleet, flt)
    assert stats["bucketsUnpacked"] == 1 and stats["bucketsPruned"] == 9
    assert "loc" in stage["bucketFilter"]["extent"]
    got = sorted(d["loc"]["coordinates"][0] for d in fleet.fleet.find(flt))
    assert got == [pytest.approx(20 + i * 0.01) for i in range(20)]


def test_geo_pruning_composes_with_time_and_meta_and_keeps_the_exact_answer(fleet):
    flt = {"v": "v2", "t": {"$gte": T0 + datetime.timedelta(minutes=5), "$lt": T0 + datetime.timedelta(minutes=8)},
           "loc": {"$geoWithin": {"$centerSphere": [[20.05, 10.05], 0.01]}}}
    _, stats = unpack_stats(fleet, flt)
    assert stats["bucketsUnpacked"] <= 1
    expected = [d for d in fleet.fleet.find({"v": "v2"}) if 5 <= (d["t"] - T0).seconds // 60 < 8]
    got = list(fleet.fleet.find(flt))
    assert sorted(d["t"] for d in got) == sorted(d["t"] for d in expected)


def test_a_region_across_the_antimeridian_does_not_prune_by_longitude(db):
    db.create_collection("ships", timeseries={"timeField": "t", "metaField": "s"})
    db.ships.insert_many([
        {"t": T0, "s": "east", "loc": {"type": "Point", "coordinates": [179.5, 0]}},
        {"t": T0, "s": "west", "loc": {"type": "Point", "coordinates": [-179.5, 0]}},
        {"t": T0, "s": "far", "loc": {"type": "Point", "coordinates": [0, 0]}},
    ])
    region = {"type": "Polygon", "coordinates": [[[179, -1], [-179, -1], [-179, 1], [179, 1], [179, -1]]]}
    got = sorted(d["s"] for d in db.ships.find({"loc": {"$geoWithin": {"$geometry": region}}}))
    assert got == ["east", "west"]


def test_a_match_after_geo_near_prunes_buckets_and_keeps_the_distance_order(fleet):
    window = {"$gte": T0 + datetime.timedelta(minutes=3), "$lt": T0 + datetime.timedelta(minutes=6)}
    pipeline = [
        {"$geoNear": {"near": {"type": "Point", "coordinates": [20, 10]}, "key": "loc",
                      "distanceField": "d", "spherical": True}},
        {"$match": {"t": window, "v": {"$in": ["v1", "v2", "v3"]}}},
        {"$limit": 5},
    ]
    got = list(fleet.fleet.aggregate(pipeline))
    # By hand: every measurement of the window and vehicles, ordered by distance.
    everything = list(fleet.fleet.aggregate(pipeline[:1]))
    expected = [d for d in everything
                if window["$gte"] <= d["t"] < window["$lt"] and d["v"] in ("v1", "v2", "v3")][:5]
    assert [(d["v"], d["t"]) for d in got] == [(d["v"], d["t"]) for d in expected]
    assert [d["d"] for d in got] == sorted(d["d"] for d in got)
    plan = fleet.command("explain", {"aggregate": "fleet", "pipeline": pipeline, "cursor": {}},
                         verbosity="executionStats")
    stage = next(s["$_internalUnpackBucket"] for s in plan["stages"] if "$_internalUnpackBucket" in s)
    assert stage["bucketFilter"]["meta"] is not None
    assert stage["executionStats"]["bucketsUnpacked"] == 3


def test_near_on_a_time_series_collection_is_refused_even_without_a_geo_index(fleet):
    from pymongo.errors import OperationFailure
    with pytest.raises(OperationFailure) as e:
        list(fleet.fleet.find({"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [20, 10]}}}}))
    assert e.value.code == 5626500
