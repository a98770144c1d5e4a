"""Geospatial queries through pymongo, pinned to MongoDB 7.0's documented behaviour: $geoWithin,
$geoIntersects, $near/$nearSphere, the $geoNear stage, 2dsphere and 2d indexes, on regular and
time-series collections. Expected answers are written by hand and also recomputed here
independently (haversine on MongoDB's earth radius, planar distance for legacy shapes)."""

import datetime
import math

import pytest
from pymongo.errors import OperationFailure, WriteError

R = 6378100.0  # MongoDB's earth radius in meters (kRadiusOfEarthInMeters)
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
MIN = datetime.timedelta(minutes=1)
KINDS = ["regular", "timeseries"]


@pytest.fixture()
def db(client):
    name = "py_geo"
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)


def haversine(a, b):
    """Great-circle distance in meters between two [lon, lat] pairs."""
    lon1, lat1, lon2, lat2 = map(math.radians, (*a, *b))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * R * math.asin(math.sqrt(h))


def point(lon, lat):
    return {"type": "Point", "coordinates": [lon, lat]}


def polygon(*rings):
    return {"type": "Polygon", "coordinates": [list(r) for r in rings]}


def line(*coords):
    return {"type": "LineString", "coordinates": list(coords)}


def make(db, kind, docs, index=False, name="c"):
    """Creates `name` as a regular or a time-series collection (timeField t, metaField m), with a
    2dsphere index on loc if asked (before the inserts), and inserts `docs`; t and m default to
    T0 + i minutes and "v"."""
    if kind == "timeseries":
        db.create_collection(name, timeseries={"timeField": "t", "metaField": "m"})
    else:
        db.create_collection(name)
    coll = db[name]
    if index:
        coll.create_index([("loc", "2dsphere")])
    coll.insert_many([{"t": T0 + i * MIN, "m": "v", **d} for i, d in enumerate(docs)])
    return coll


def ids(coll, flt):
    return sorted(d["_id"] for d in coll.find(flt))


def within(coll, shape):
    return ids(coll, {"loc": {"$geoWithin": shape}})


def raises_code(fn, *codes):
    with pytest.raises(OperationFailure) as e:
        fn()
    assert e.value.code in codes, e.value.details
    return e.value


INDEXED = [("regular", False), ("regular", True), ("timeseries", False), ("timeseries", True)]
INDEX_IDS = ["regular", "regular-2dsphere", "timeseries", "timeseries-2dsphere"]

# A 10° x 10° square at the equator with a 2° x 2° hole in its middle, and points around it.
PLANE = {"a": [2, 2], "b": [8, 8], "hole": [5, 5], "out": [12, 5], "far": [-20, -20]}
SQUARE = [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]]
HOLE = [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]]


@pytest.mark.parametrize("kind,indexed", INDEXED, ids=INDEX_IDS)
def test_geo_within_every_shape_selects_the_same_points_with_or_without_a_2dsphere_index(db, kind, indexed):
    c = make(db, kind, [{"_id": k, "loc": point(*v)} for k, v in PLANE.items()], index=indexed)
    assert within(c, {"$geometry": polygon(SQUARE)}) == ["a", "b", "hole"]
    # a point inside the hole is outside the polygon
    assert within(c, {"$geometry": polygon(SQUARE, HOLE)}) == ["a", "b"]
    multi = {"type": "MultiPolygon", "coordinates": [[[[0, 0], [3, 0], [3, 3], [0, 3], [0, 0]]],
                                                     [[[11, 4], [13, 4], [13, 6], [11, 6], [11, 4]]]]}
    assert within(c, {"$geometry": multi}) == ["a", "out"]
    # legacy shapes are flat: planar geometry on [x, y] = [lon, lat]
    assert within(c, {"$box": [[1, 1], [9, 9]]}) == ["a", "b", "hole"]
    assert within(c, {"$polygon": [[0, 0], [12, 0], [0, 12]]}) == ["a", "hole"]
    assert within(c, {"$center": [[5, 5], 4.5]}) == ["a", "b", "hole"]  # a and b are sqrt(18) = 4.24 away
    assert within(c, {"$center": [[5, 5], 4]}) == ["hole"]
    assert sorted(k for k, v in PLANE.items() if math.dist([5, 5], v) <= 4.5) == ["a", "b", "hole"]
    # $centerSphere's radius is in radians: 600 km holds a and b (~471 km) but not out (~776 km)
    assert within(c, {"$centerSphere": [[5, 5], 600e3 / R]}) == ["a", "b", "hole"]
    assert sorted(k for k, v in PLANE.items() if haversine([5, 5], v) <= 600e3) == ["a", "b", "hole"]


EDGES = {
    "east": [179.9, 0], "west": [-179.9, 0.2], "out_w": [178.5, 0], "out_e": [-178.5, 0], "zero": [0, 0],
    "pole": [0, 90], "p88": [123, 88], "p855": [0, 85.5], "bulge": [45, 86], "p84": [45, 84],
}


def geodesic_mid_lat(lat, lon1, lon2):
    """Latitude of the midpoint of the great-circle arc between (lon1, lat) and (lon2, lat)."""
    v = [sum(math.cos(math.radians(lat)) * f(math.radians(lon)) for lon in (lon1, lon2)) for f in (math.cos, math.sin)]
    z = 2 * math.sin(math.radians(lat))
    return math.degrees(math.atan2(z, math.hypot(*v)))


@pytest.mark.parametrize("kind,indexed", INDEXED, ids=INDEX_IDS)
def test_geo_within_uses_geodesic_edges_across_the_antimeridian_and_around_the_pole(db, kind, indexed):
    c = make(db, kind, [{"_id": k, "loc": point(*v)} for k, v in EDGES.items()], index=indexed)
    # a 2° x 2° square centred on (180, 0): its southern edge goes east from 179 to -179
    across = polygon([[179, -1], [-179, -1], [-179, 1], [179, 1], [179, -1]])
    assert within(c, {"$geometry": across}) == ["east", "west"]
    assert within(c, {"$centerSphere": [[180, 0], 50e3 / R]}) == ["east", "west"]
    assert haversine([180, 0], EDGES["west"]) < 30e3 and haversine([180, 0], EDGES["out_w"]) > 150e3
    # around the north pole through four vertices at lat 85; the edges are great circles, so between
    # the vertices they bulge poleward (to lat 86.46 at lon 45) and leave (45, 86) outside
    cap = polygon([[0, 85], [90, 85], [180, 85], [-90, 85], [0, 85]])
    assert 86.4 < geodesic_mid_lat(85, 0, 90) < 86.5
    assert within(c, {"$geometry": cap}) == ["p855", "p88", "pole"]
    assert within(c, {"$centerSphere": [[0, 90], math.radians(3)]}) == ["p88", "pole"]


@pytest.mark.parametrize("kind,indexed", [("regular", False), ("regular", True), ("timeseries", False)],
                         ids=["regular", "regular-2dsphere", "timeseries"])
def test_geo_intersects_finds_polygons_a_line_crosses_and_lines_a_point_lies_on(db, kind, indexed):
    docs = [
        {"_id": "sq1", "loc": polygon([[0, 0], [2, 0], [2, 2], [0, 2], [0, 0]])},
        {"_id": "sq2", "loc": polygon([[5, 5], [7, 5], [7, 7], [5, 7], [5, 5]])},
        {"_id": "sq3", "loc": polygon([[10, -1], [12, -1], [12, 1], [10, 1], [10, -1]])},
        {"_id": "equator", "loc": line([20, 0], [24, 0])},
        {"_id": "meridian", "loc": line([30, -2], [30, 2])},
        {"_id": "on", "loc": point(22, 0)},
        {"_id": "off", "loc": point(22, 0.5)},
    ]
    c = make(db, kind, docs, index=indexed)

    def hits(geometry):
        return ids(c, {"loc": {"$geoIntersects": {"$geometry": geometry}}})

    assert hits(line([-1, 1], [11, 0])) == ["sq1", "sq3"]
    assert hits(point(22, 0)) == ["equator", "on"]
    assert hits(point(30, 1)) == ["meridian"]
    assert hits(point(22, 0.01)) == []
    assert hits(line([21, -1], [21.5, 1])) == ["equator"]
    assert hits(polygon([[21, -1], [23, -1], [23, 1], [21, 1], [21, -1]])) == ["equator", "off", "on"]


PARIS = [2.3522, 48.8566]
CITIES = {  # inserted in this order, at T0 + 0..5 minutes
    "London": ([-0.1276, 51.5072], "GB"), "Brussels": ([4.3517, 50.8503], "BE"),
    "Amsterdam": ([4.9041, 52.3676], "NL"), "Lyon": ([4.8357, 45.764], "FR"),
    "Berlin": ([13.405, 52.52], "DE"), "Madrid": ([-3.7038, 40.4168], "ES"),
}
# from Paris: Brussels 264 km, London 344, Lyon 392, Amsterdam 430, Berlin 878, Madrid 1054
BY_DISTANCE = ["Brussels", "London", "Lyon", "Amsterdam", "Berlin", "Madrid"]


def cities(lo=0.0, hi=math.inf, names=CITIES):
    """City names with lo <= distance from Paris <= hi, nearest first."""
    near = [n for n in names if lo <= haversine(PARIS, CITIES[n][0]) <= hi]
    return sorted(near, key=lambda n: haversine(PARIS, CITIES[n][0]))


def city_docs():
    return [{"_id": n, "loc": point(*xy), "cc": cc} for n, (xy, cc) in CITIES.items()]


def test_the_city_fixture_is_ordered_as_written_by_hand():
    assert cities() == BY_DISTANCE
    assert cities(hi=500e3) == BY_DISTANCE[:4]
    assert cities(lo=300e3, hi=900e3) == BY_DISTANCE[1:5]


@pytest.mark.parametrize("op", ["$near", "$nearSphere"])
def test_near_returns_points_nearest_first_within_min_and_max_meters(db, op):
    c = make(db, "regular", city_docs(), index=True)

    def near(**limits):
        return [d["_id"] for d in c.find({"loc": {op: {"$geometry": point(*PARIS), **limits}}})]

    assert near() == BY_DISTANCE
    assert near(**{"$maxDistance": 500e3}) == ["Brussels", "London", "Lyon", "Amsterdam"]
    assert near(**{"$minDistance": 300e3, "$maxDistance": 900e3}) == ["London", "Lyon", "Amsterdam", "Berlin"]
    assert [d["_id"] for d in c.find({"loc": {op: {"$geometry": point(*PARIS)}}, "cc": {"$ne": "GB"}}).limit(2)] == [
        "Brussels", "Lyon"]


@pytest.mark.parametrize("op", ["$near", "$nearSphere"])
def test_near_without_a_geo_index_fails_with_no_query_execution_plans(db, op):
    c = make(db, "regular", city_docs())
    e = raises_code(lambda: list(c.find({"loc": {op: {"$geometry": point(*PARIS)}}})), 291)
    assert "unable to find index for $geoNear query" in str(e)


def test_near_in_count_documents_is_not_allowed_in_that_context(db):
    c = make(db, "regular", city_docs(), index=True)
    # count_documents runs [$match, $group], and $match cannot sort by distance
    e = raises_code(lambda: c.count_documents({"loc": {"$near": {"$geometry": point(*PARIS)}}}), 5626500)
    assert "$geoNear, $near, and $nearSphere are not allowed in this context" in str(e)


@pytest.mark.parametrize("op", ["$near", "$nearSphere"])
def test_near_on_a_time_series_collection_is_not_allowed(db, op):
    c = make(db, "timeseries", city_docs(), index=True)
    raises_code(lambda: list(c.find({"loc": {op: {"$geometry": point(*PARIS)}}})), 5626500)


def geo_near(coll, stages=(), **spec):
    stage = {"near": point(*PARIS), "distanceField": "dist", "spherical": True, **spec}
    return list(coll.aggregate([{"$geoNear": stage}, *stages]))


@pytest.mark.parametrize("kind", KINDS)
def test_geo_near_gives_distances_in_meters_nearest_first_within_min_and_max(db, kind):
    c = make(db, kind, city_docs(), index=True)
    res = geo_near(c, key="loc")
    assert [d["_id"] for d in res] == BY_DISTANCE
    for d in res:
        assert d["dist"] == pytest.approx(haversine(PARIS, CITIES[d["_id"]][0]), rel=5e-3)
    assert [d["_id"] for d in geo_near(c, key="loc", maxDistance=500e3)] == BY_DISTANCE[:4]
    res = geo_near(c, key="loc", minDistance=300e3, maxDistance=900e3)
    assert [d["_id"] for d in res] == ["London", "Lyon", "Amsterdam", "Berlin"]
    # distanceMultiplier scales the output distance: meters to kilometers
    res = geo_near(c, key="loc", distanceMultiplier=0.001)
    assert [d["_id"] for d in res] == BY_DISTANCE
    assert res[0]["dist"] == pytest.approx(264.27, rel=5e-3)
    for d in res:
        assert d["dist"] == pytest.approx(haversine(PARIS, CITIES[d["_id"]][0]) / 1000, rel=5e-3)


def test_geo_near_query_filters_and_include_locs_copies_the_matched_location(db):
    c = make(db, "regular", city_docs(), index=True)
    res = geo_near(c, query={"cc": {"$in": ["DE", "ES", "GB"]}}, includeLocs="where")
    assert [d["_id"] for d in res] == ["London", "Berlin", "Madrid"]
    assert cities(names=["London", "Berlin", "Madrid"]) == ["London", "Berlin", "Madrid"]
    for d in res:
        assert d["where"] == point(*CITIES[d["_id"]][0])
    assert [d["_id"] for d in geo_near(c, query={"cc": "FR"}, maxDistance=300e3)] == []


def test_geo_near_needs_key_when_two_2dsphere_indexes_exist(db):
    docs = city_docs()
    docs[0]["loc2"] = point(*PARIS)  # London's second location is Paris itself
    docs[4]["loc2"] = point(*CITIES["Berlin"][0])
    c = make(db, "regular", docs, index=True)
    c.create_index([("loc2", "2dsphere")])
    e = raises_code(lambda: geo_near(c), 27)
    assert "more than one 2dsphere index" in str(e)
    res = geo_near(c, key="loc2")
    assert [d["_id"] for d in res] == ["London", "Berlin"]  # 2dsphere indexes are sparse
    assert res[0]["dist"] == pytest.approx(0, abs=1)
    assert res[1]["dist"] == pytest.approx(878.44e3, rel=5e-3)
    assert [d["_id"] for d in geo_near(c, key="loc")] == BY_DISTANCE


def test_geo_near_must_be_the_first_stage(db):
    # 7.0 checks $geoNear's position after optimization (kCustom position, code 40603); 40602 is
    # the parse-time check of first-only stages such as $collStats, which $geoNear no longer uses
    c = make(db, "regular", city_docs(), index=True)
    stage = {"$geoNear": {"near": point(*PARIS), "distanceField": "dist", "spherical": True}}
    e = raises_code(lambda: list(c.aggregate([{"$match": {"cc": {"$ne": "GB"}}}, stage])), 40603)
    assert "$geoNear was not the first stage in the pipeline after optimization" in str(e)


def test_geo_near_without_any_geo_index_fails_with_index_not_found(db):
    c = make(db, "regular", city_docs())
    e = raises_code(lambda: geo_near(c), 27)
    assert "$geoNear requires a 2d or 2dsphere index" in str(e)


def test_geo_near_on_time_series_measurements_filters_time_in_a_following_match(db):
    c = make(db, "timeseries", city_docs(), index=True)
    # time-series $geoNear refuses `query`; MongoDB says to filter with $match instead
    res = geo_near(c, [{"$match": {"t": {"$gte": T0 + 2 * MIN}}}], key="loc", maxDistance=900e3)
    assert [d["_id"] for d in res] == ["Lyon", "Amsterdam", "Berlin"]
    assert cities(hi=900e3, names=list(CITIES)[2:]) == ["Lyon", "Amsterdam", "Berlin"]
    assert [d["m"] for d in res] == ["v"] * 3


@pytest.mark.parametrize("spec,codes", [
    ({}, (5892921,)),  # "Must specify 'key' option for $geoNear on a time-series collection"
    ({"key": "loc", "query": {"t": {"$gte": T0}}}, (1938439, 5860207)),  # "use $match instead"
    ({"key": "loc", "includeLocs": "where"}, (5860208,)),  # not supported on measurements
], ids=["no_key", "query", "includeLocs"])
def test_geo_near_on_a_time_series_collection_refuses_what_mongodb_refuses(db, spec, codes):
    c = make(db, "timeseries", city_docs(), index=True)
    raises_code(lambda: geo_near(c, **spec), *codes)


BAD_GEOJSON = [
    point("x", 0),
    point(0, 200),
    {"type": "Polygon", "coordinates": [[0, 0], [1, 0], [1, 1], [0, 0]]},  # one nesting level short
    polygon([[0, 0], [1, 0], [1, 1], [0, 1]]),  # ring not closed
]
BAD_IDS = ["non_numeric", "lat_out_of_bounds", "polygon_not_nested", "ring_not_closed"]


@pytest.mark.parametrize("bad", BAD_GEOJSON, ids=BAD_IDS)
def test_invalid_geojson_into_a_2dsphere_indexed_field_fails_with_16755_and_inserts_nothing(db, bad):
    db.c.create_index([("loc", "2dsphere")])
    with pytest.raises(WriteError) as e:
        db.c.insert_one({"_id": 1, "loc": bad})
    assert e.value.code == 16755 and "Can't extract geo keys" in str(e.value)
    assert db.c.count_documents({}) == 0


@pytest.mark.parametrize("bad", BAD_GEOJSON, ids=BAD_IDS)
def test_invalid_geojson_without_a_geo_index_is_stored_as_is(db, bad):
    db.c.insert_one({"_id": 1, "loc": bad})
    assert db.c.find_one({"_id": 1})["loc"] == bad


@pytest.mark.parametrize("bad", BAD_GEOJSON, ids=BAD_IDS)
def test_2dsphere_index_build_over_an_invalid_document_fails_with_16755_and_leaves_no_index(db, bad):
    db.c.insert_many([{"_id": 0, "loc": point(1, 1)}, {"_id": 1, "loc": bad}])
    raises_code(lambda: db.c.create_index([("loc", "2dsphere")]), 16755)
    assert list(db.c.index_information()) == ["_id_"]
    assert db.c.count_documents({}) == 2


def test_time_series_2dsphere_index_rejects_bad_points_and_non_points(db):
    c = make(db, "timeseries", [{"_id": "ok", "loc": point(1, 1)}], index=True)
    for loc, code in ((point("x", 0), 183934), (line([0, 0], [1, 1]), 183493)):
        with pytest.raises(WriteError) as e:
            c.insert_one({"t": T0, "m": "v", "loc": loc})
        assert e.value.code == code, e.value.details
    assert ids(c, {}) == ["ok"]


# Legacy pairs where flat and spherical distance order differ: from [0, 60], B is nearer than A on
# the plane (7 vs 10) but farther on the sphere (779 km vs 556 km, longitude shrinks with cos(60°)).
FLAT = {"A": [10, 60], "B": [0, 67], "C": [1, 61]}
NEAR = [0, 60]


def test_2d_index_near_orders_legacy_pairs_by_flat_distance_unlike_2dsphere(db):
    assert sorted(FLAT, key=lambda k: math.dist(NEAR, FLAT[k])) == ["C", "B", "A"]
    assert sorted(FLAT, key=lambda k: haversine(NEAR, FLAT[k])) == ["C", "A", "B"]
    db.flat.insert_many([{"_id": k, "loc": v} for k, v in FLAT.items()])
    db.flat.create_index([("loc", "2d")])
    assert [d["_id"] for d in db.flat.find({"loc": {"$near": NEAR}})] == ["C", "B", "A"]
    assert [d["_id"] for d in db.flat.find({"loc": {"$near": NEAR, "$maxDistance": 8}})] == ["C", "B"]
    db.sph.insert_many([{"_id": k, "loc": point(*v)} for k, v in FLAT.items()])
    db.sph.create_index([("loc", "2dsphere")])
    assert [d["_id"] for d in db.sph.find({"loc": {"$near": {"$geometry": point(*NEAR)}}})] == ["C", "A", "B"]


def test_geo_near_with_a_2d_index_and_a_legacy_point_gives_flat_distances(db):
    db.flat.insert_many([{"_id": k, "loc": v} for k, v in FLAT.items()])
    db.flat.create_index([("loc", "2d")])
    res = list(db.flat.aggregate([{"$geoNear": {"near": NEAR, "distanceField": "d"}}]))
    assert [d["_id"] for d in res] == ["C", "B", "A"]
    assert [d["d"] for d in res] == pytest.approx([math.sqrt(2), 7, 10], abs=1e-9)
    # spherical: true on a legacy point gives radians; distanceMultiplier 6378.1 turns them into km
    res = list(db.flat.aggregate([{"$geoNear": {"near": NEAR, "distanceField": "d", "spherical": True,
                                                "distanceMultiplier": R / 1000}}]))
    assert [d["_id"] for d in res] == ["C", "A", "B"]
    for d in res:
        assert d["d"] == pytest.approx(haversine(NEAR, FLAT[d["_id"]]) / 1000, rel=5e-3)


# Vehicle X enters a 1° x 1° zone at minute 1, leaves at 5, is back at 6 and 7, gone from 8;
# vehicle Y stays inside all along.
ZONE = polygon([[10, 10], [11, 10], [11, 11], [10, 11], [10, 10]])
X_INSIDE = [False, True, True, True, True, False, True, True, False, False]


@pytest.mark.parametrize("kind", KINDS)
def test_vehicle_inside_polygon_between_two_times_returns_exactly_those_measurements(db, kind):
    docs = []
    for i, inside in enumerate(X_INSIDE):
        docs.append({"_id": f"x{i}", "t": T0 + i * MIN, "m": "X", "loc": point(10.5 if inside else 12, 10.5)})
        docs.append({"_id": f"y{i}", "t": T0 + i * MIN, "m": "Y", "loc": point(10.4, 10.6)})
    c = make(db, kind, docs, index=True)
    flt = {"m": "X", "t": {"$gte": T0 + 2 * MIN, "$lt": T0 + 7 * MIN},
           "loc": {"$geoWithin": {"$geometry": ZONE}}}
    assert ids(c, flt) == ["x2", "x3", "x4", "x6"]
    assert [f"x{i}" for i in range(2, 7) if X_INSIDE[i]] == ["x2", "x3", "x4", "x6"]
    assert c.count_documents(flt) == 4
    assert [d["_id"] for d in c.aggregate([{"$match": flt}, {"$sort": {"t": -1}}])] == ["x6", "x4", "x3", "x2"]


def _winning_stages(explain):
    """The stage names of the winning plan, outermost first."""
    out, stage = [], explain["queryPlanner"]["winningPlan"]
    while stage:
        out.append(stage["stage"])
        stage = stage.get("inputStage")
    return out


def _ixscan(explain):
    stage = explain["executionStats"]["executionStages"]
    while stage["stage"] != "IXSCAN":
        stage = stage["inputStage"]
    return stage


# 400 points on a 20 x 20 grid, one degree apart, from (0, 0) to (19, 19).
GRID = [{"_id": f"{x}:{y}", "loc": point(x, y)} for x in range(20) for y in range(20)]


def test_geo_within_reads_a_2dsphere_index_bounded_by_the_cells_of_the_region(db):
    db.g.insert_many(GRID)
    db.g.create_index([("loc", "2dsphere")])
    region = {"loc": {"$geoWithin": {"$geometry": polygon([[2.5, 2.5], [5.5, 2.5], [5.5, 5.5], [2.5, 5.5], [2.5, 2.5]])}}}
    found = ids(db.g, region)
    assert found == sorted(f"{x}:{y}" for x in (3, 4, 5) for y in (3, 4, 5))
    plan = db.g.find(region).explain()
    assert _winning_stages(plan) == ["FETCH", "IXSCAN"]
    ix = _ixscan(plan)
    assert ix["indexName"] == "loc_2dsphere"
    assert ix["indexBounds"]["loc"], "the cells covering the region"
    assert plan["executionStats"]["nReturned"] == 9
    # the cells bound the scan: far fewer keys than the 400 points
    assert 9 <= ix["keysExamined"] < 100, ix["keysExamined"]
    db.g.drop_indexes()
    assert ids(db.g, region) == found
    assert _winning_stages(db.g.find(region).explain()) == ["COLLSCAN"]


def test_geo_within_finds_polygons_and_lines_whose_every_vertex_is_inside_through_the_index(db):
    db.s.insert_many([
        {"_id": "inside", "loc": polygon([[3, 3], [4, 3], [4, 4], [3, 3]])},
        {"_id": "line_in", "loc": line([3.2, 3.2], [4.8, 4.1])},
        {"_id": "crossing", "loc": line([1, 4], [7, 4])},
        {"_id": "far", "loc": point(40, 40)},
    ])
    region = {"loc": {"$geoWithin": {"$geometry": polygon([[2, 2], [6, 2], [6, 6], [2, 6], [2, 2]])}}}
    unindexed = ids(db.s, region)
    db.s.create_index([("loc", "2dsphere")])
    assert ids(db.s, region) == unindexed == ["inside", "line_in"]
    assert _winning_stages(db.s.find(region).explain()) == ["FETCH", "IXSCAN"]
    # a line crossing the region with no vertex in it still intersects it: $geoIntersects scans
    crosses = {"loc": {"$geoIntersects": {"$geometry": polygon([[2, 2], [6, 2], [6, 6], [2, 6], [2, 2]])}}}
    assert ids(db.s, crosses) == ["crossing", "inside", "line_in"]
    assert _winning_stages(db.s.find(crosses).explain()) == ["COLLSCAN"]


def test_geo_within_across_the_antimeridian_reads_the_index_and_misses_nothing(db):
    db.e.insert_many([{"_id": k, "loc": point(*v)} for k, v in EDGES.items()])
    db.e.create_index([("loc", "2dsphere")])
    across = {"loc": {"$geoWithin": {"$geometry": polygon([[179, -1], [-179, -1], [-179, 1], [179, 1], [179, -1]])}}}
    assert ids(db.e, across) == ["east", "west"]
    cap = {"loc": {"$geoWithin": {"$centerSphere": [[0, 90], math.radians(3)]}}}
    assert ids(db.e, cap) == ["p88", "pole"]
    for q in (across, cap):
        assert _winning_stages(db.e.find(q).explain()) == ["FETCH", "IXSCAN"]


def test_geo_within_a_box_reads_a_2d_index(db):
    db.flat.insert_many([{"_id": f"{x}:{y}", "loc": [x, y]} for x in range(20) for y in range(20)])
    db.flat.create_index([("loc", "2d")])
    q = {"loc": {"$geoWithin": {"$box": [[2.5, 2.5], [4.5, 4.5]]}}}
    assert ids(db.flat, q) == ["3:3", "3:4", "4:3", "4:4"]
    plan = db.flat.find(q).explain()
    assert _winning_stages(plan) == ["FETCH", "IXSCAN"]
    assert _ixscan(plan)["keysExamined"] < 100


def test_a_compound_2dsphere_index_bounds_its_prefix_and_the_cells(db):
    db.g.insert_many([{**d, "kind": "a" if i % 2 else "b"} for i, d in enumerate(GRID)])
    db.g.create_index([("kind", 1), ("loc", "2dsphere")])
    region = {"$geoWithin": {"$centerSphere": [[10, 10], math.radians(1.5)]}}
    q = {"kind": "a", "loc": region}
    expected = sorted(d["_id"] for i, d in enumerate(GRID)
                      if i % 2 and haversine([10, 10], d["loc"]["coordinates"]) <= math.radians(1.5) * R)
    assert ids(db.g, q) == expected and expected
    assert _winning_stages(db.g.find(q).explain()) == ["FETCH", "IXSCAN"]
    # without the prefix the index cannot bound the geo field
    assert _winning_stages(db.g.find({"loc": region}).explain()) == ["COLLSCAN"]


def test_a_hinted_2dsphere_index_without_a_geo_predicate_returns_only_documents_it_holds(db):
    db.h.insert_many([{"_id": 1, "loc": point(1, 1)}, {"_id": 2, "loc": point(2, 2)}, {"_id": 3}])
    db.h.create_index([("loc", "2dsphere")])
    assert sorted(d["_id"] for d in db.h.find({}).hint("loc_2dsphere")) == [1, 2]
    assert sorted(d["_id"] for d in db.h.find({})) == [1, 2, 3]


def test_geo_within_on_a_2d_index_of_32_bits_finds_every_point_inside(db):
    # At 32 bits a cell number takes all 64 bits: the scan must still hold every point,
    # up to the grid's top right corner.
    grid = [f"{x}:{y}" for x in (-170, -1, 1, 170) for y in (-170, -1, 1, 170)]
    db.fine.insert_many([{"_id": k, "loc": [int(v) for v in k.split(":")]} for k in grid])
    db.fine.create_index([("loc", "2d")], bits=32)
    q = {"loc": {"$geoWithin": {"$box": [[0, 0], [180, 180]]}}}
    assert ids(db.fine, q) == sorted(["1:1", "1:170", "170:1", "170:170"])
    assert ids(db.fine, {"loc": {"$geoWithin": {"$box": [[-180, -180], [180, 180]]}}}) == sorted(grid)
    assert _winning_stages(db.fine.find(q).explain()) == ["FETCH", "IXSCAN"]


def _near_stage(explain, section):
    """The GEO_NEAR stage of a find's explain (queryPlanner or executionStats), outermost
    stages skipped, and the stage names under it."""
    stage = (explain["queryPlanner"]["winningPlan"] if section == "queryPlanner"
             else explain["executionStats"]["executionStages"])
    while not stage["stage"].startswith("GEO_NEAR"):
        stage = stage["inputStage"]
    below, inner = [], stage["inputStages"][0]
    while inner:
        below.append(inner)
        inner = inner.get("inputStage")
    return stage, below


@pytest.mark.parametrize("op", ["$near", "$nearSphere"])
def test_near_with_a_max_distance_reads_a_2dsphere_index_of_points_bounded_by_the_circle(db, op):
    db.g.insert_many(GRID)
    db.g.create_index([("loc", "2dsphere")])
    flt = {"loc": {op: {"$geometry": point(5, 5), "$maxDistance": 160e3}}}
    got = [d["_id"] for d in db.g.find(flt)]
    want = sorted((d for d in GRID if haversine([5, 5], d["loc"]["coordinates"]) <= 160e3),
                  key=lambda d: haversine([5, 5], d["loc"]["coordinates"]))
    assert got == [d["_id"] for d in want] and len(got) == 9
    explain = db.g.find(flt).explain()
    near, below = _near_stage(explain, "queryPlanner")
    assert (near["stage"], near["indexName"], near["keyPattern"]) == (
        "GEO_NEAR_2DSPHERE", "loc_2dsphere", {"loc": "2dsphere"})
    assert [s["stage"] for s in below] == ["FETCH", "IXSCAN"]
    keys = explain["executionStats"]["totalKeysExamined"]
    assert 9 <= keys < 100, keys
    # Without a maximum the whole index is read, still through the GEO_NEAR stage.
    explain = db.g.find({"loc": {op: {"$geometry": point(5, 5)}}}).limit(3).explain()
    assert _near_stage(explain, "queryPlanner")[0]["stage"] == "GEO_NEAR_2DSPHERE"


def test_near_finds_a_line_passing_close_by_whose_vertices_are_far(db):
    # A line's vertices are its only keys: once the index holds one, a bounded scan could
    # miss it, so $near and $geoIntersects read the index whole.
    db.g.insert_many(GRID[:10])
    db.g.insert_one({"_id": "road", "loc": line([-30, 0.5], [30, 0.5])})
    db.g.create_index([("loc", "2dsphere")])
    flt = {"loc": {"$near": {"$geometry": point(0.5, 0.5), "$maxDistance": 10e3}}}
    assert [d["_id"] for d in db.g.find(flt)] == ["road"]
    crossing = {"loc": {"$geoIntersects": {"$geometry": line([0.5, 0], [0.5, 1])}}}
    assert [d["_id"] for d in db.g.find(crossing)] == ["road"]


def test_near_on_a_2d_index_is_explained_as_geo_near_2d(db):
    db.f.insert_many([{"_id": i, "loc": [i, i]} for i in range(50)])
    db.f.create_index([("loc", "2d")])
    flt = {"loc": {"$near": [10, 10], "$maxDistance": 3}}
    assert [d["_id"] for d in db.f.find(flt)] == [10, 9, 11, 8, 12]
    near, below = _near_stage(db.f.find(flt).explain(), "queryPlanner")
    assert (near["stage"], near["indexName"]) == ("GEO_NEAR_2D", "loc_2d")
    assert [s["stage"] for s in below] == ["FETCH", "IXSCAN"]


def test_explain_of_a_near_find_shows_each_ring_it_read_as_a_search_interval(db):
    # Explain runs the rings the find runs: one searchIntervals entry and one input
    # access path per ring, contiguous and growing, whose counters add up to the totals.
    db.p.insert_many([{"_id": i * 100 + j, "loc": point(i * 0.05, j * 0.05)}
                      for i in range(40) for j in range(40)])
    db.p.create_index([("loc", "2dsphere")])
    flt = {"loc": {"$near": {"$geometry": point(1.0, 1.0)}}}
    stats = db.p.find(flt).limit(5).explain()["executionStats"]
    near, _ = _near_stage({"executionStats": stats}, "executionStats")
    rings = near["searchIntervals"]
    assert len(rings) >= 2 and len(near["inputStages"]) == len(rings)
    assert rings[0]["minDistance"] == 0
    assert all(a["maxDistance"] == b["minDistance"] for a, b in zip(rings, rings[1:]))
    assert all(r["minDistance"] < r["maxDistance"] for r in rings)
    assert sum(r["nReturned"] for r in rings) == near["nReturned"] == stats["nReturned"] == 5
    keys = 0
    for stage in near["inputStages"]:
        while "inputStage" in stage:
            stage = stage["inputStage"]
        assert stage["stage"] == "IXSCAN"
        keys += stage["keysExamined"]
    assert keys == stats["totalKeysExamined"] < 1600 // 10


@pytest.mark.parametrize("center", [(2.35, 48.86), (179.9, -16.5), (0.0, 89.5)],
                         ids=["paris", "antimeridian", "pole"])
def test_near_with_a_limit_returns_the_nearest_points_as_a_full_sort_would(db, center):
    # With an index of points, $near reads rings of growing radius; the answer must be
    # that of sorting every point by its distance, including across the antimeridian and
    # near a pole, with and without $minDistance.
    import random
    rnd = random.Random(7)
    pts = [[rnd.uniform(-180, 180), rnd.uniform(-90, 90)] for _ in range(1500)]
    pts += [[center[0] + rnd.uniform(-3, 3), max(-90, min(90, center[1] + rnd.uniform(-3, 3)))]
            for _ in range(500)]
    pts = [[(x + 180) % 360 - 180, y] for x, y in pts]
    db.p.insert_many([{"_id": i, "loc": point(*xy)} for i, xy in enumerate(pts)])
    db.p.create_index([("loc", "2dsphere")])
    by_distance = sorted(range(len(pts)), key=lambda i: (haversine(list(center), pts[i]), i))
    def nearest_first(ids):
        d = [haversine(list(center), pts[i]) for i in ids]
        return all(a <= b * (1 + 1e-9) for a, b in zip(d, d[1:]))

    for limit in (1, 7, 60):
        got = [d["_id"] for d in db.p.find({"loc": {"$near": {"$geometry": point(*center)}}}).limit(limit)]
        assert sorted(got) == sorted(by_distance[:limit]) and nearest_first(got), limit
    lo = 200e3
    far = [i for i in by_distance if haversine(list(center), pts[i]) >= lo][:20]
    got = [d["_id"] for d in db.p.find({"loc": {"$nearSphere": {"$geometry": point(*center),
                                                                 "$minDistance": lo}}}).limit(20)]
    assert sorted(got) == sorted(far) and len(got) == 20 and nearest_first(got)
