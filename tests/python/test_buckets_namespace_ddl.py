"""DDL on `system.buckets.<coll>` names (#19 gap 15), as MongoDB 7.0 behaves, through pymongo:
creating a time-series collection by its buckets name, the create matrix of regular, time-series
and buckets names (jstests timeseries_user_system_buckets.js), renames, and the `_id` index spec
on the clustered buckets collection (jstests timeseries_id_index.js)."""

import datetime as dt

import pytest
from pymongo.errors import OperationFailure

TS = {"timeField": "timestamp", "metaField": "metadata"}
TS2 = {"timeField": "timestamp", "metaField": "metadata2"}
COLL, BUCKETS = "coll", "system.buckets.coll"


def create(db, name, ts):
    return db.command("create", name, **({"timeseries": ts} if ts else {}))


def listed(db):
    return sorted((c["name"], c["type"]) for c in db.list_collections() if c["name"] != "system.views")


TIME_SERIES = [("coll", "timeseries"), ("system.buckets.coll", "collection")]


@pytest.mark.parametrize(
    "first, second, fails_with, then",
    [
        ((COLL, None), (COLL, TS), 48, [("coll", "collection")]),
        ((COLL, None), (BUCKETS, TS), 48, [("coll", "collection")]),
        ((COLL, TS), (COLL, None), 48, TIME_SERIES),
        ((COLL, TS), (COLL, TS), None, TIME_SERIES),
        ((COLL, TS), (COLL, TS2), 48, TIME_SERIES),
        ((COLL, TS), (BUCKETS, TS), None, TIME_SERIES),
        ((COLL, TS), (BUCKETS, TS2), 48, TIME_SERIES),
        ((BUCKETS, TS), (COLL, None), 48, TIME_SERIES),
        ((BUCKETS, TS), (COLL, TS), None, TIME_SERIES),
        ((BUCKETS, TS), (COLL, TS2), 48, TIME_SERIES),
        ((BUCKETS, TS), (BUCKETS, TS), None, TIME_SERIES),
        ((BUCKETS, TS), (BUCKETS, TS2), 48, TIME_SERIES),
    ],
)
def test_creating_by_the_collection_or_the_buckets_name_is_one_time_series_collection(
    db, first, second, fails_with, then
):
    create(db, *first)
    if fails_with is None:
        create(db, *second)
    else:
        with pytest.raises(OperationFailure) as e:
            create(db, *second)
        assert e.value.code == fails_with
    assert listed(db) == then


def test_a_time_series_collection_created_by_its_buckets_name_takes_measurements(db):
    create(db, BUCKETS, TS)
    t = dt.datetime(2026, 1, 1)
    db.coll.insert_many([{"timestamp": t, "metadata": "a", "v": i} for i in range(3)])
    assert db.coll.count_documents({"metadata": "a"}) == 3
    opts = next(c for c in db.list_collections() if c["name"] == COLL)["options"]["timeseries"]
    assert (opts["timeField"], opts["metaField"]) == ("timestamp", "metadata")


def test_a_buckets_name_without_time_series_options_is_a_plain_collection_as_in_mongodb_7(db):
    create(db, BUCKETS, None)
    assert listed(db) == [("system.buckets.coll", "collection")]
    with pytest.raises(OperationFailure) as e:
        create(db, BUCKETS, TS)
    assert e.value.code == 48


def test_a_view_with_the_collection_name_blocks_creating_the_time_series_by_its_buckets_name(db):
    db.other.insert_one({})
    db.command("create", COLL, viewOn="other", pipeline=[])
    with pytest.raises(OperationFailure) as e:
        create(db, BUCKETS, TS)
    assert e.value.code == 48


def test_renaming_a_time_series_collection_or_its_buckets_is_an_illegal_operation(db, client):
    create(db, COLL, TS)
    for source, target in ((COLL, "newColl"), (BUCKETS, "newColl"), (COLL, "system.buckets.newColl")):
        with pytest.raises(OperationFailure) as e:
            client.admin.command("renameCollection", f"{db.name}.{source}", to=f"{db.name}.{target}")
        assert e.value.code == 20, (source, target)
    assert listed(db) == TIME_SERIES


def test_a_view_on_a_buckets_collection_is_an_invalid_namespace(db):
    create(db, COLL, TS)
    with pytest.raises(OperationFailure) as e:
        db.command("create", "badView", viewOn=BUCKETS, pipeline=[])
    assert e.value.code == 73


def test_the_id_index_of_the_buckets_is_their_cluster_key_and_creating_it_is_a_no_op(db):
    create(db, COLL, TS)
    buckets = db[BUCKETS]
    before = [i["name"] for i in buckets.list_indexes()]
    for options in ({}, {"name": "anything"}, {"clustered": True, "unique": True}):
        reply = db.command("createIndexes", BUCKETS,
                           indexes=[{"key": {"_id": 1}, "name": options.pop("name", "_id_"), **options}])
        assert reply["numIndexesBefore"] == reply["numIndexesAfter"]
    assert [i["name"] for i in buckets.list_indexes()] == before


@pytest.mark.parametrize(
    "where, key, unique, code",
    [
        ("buckets", {"_id": 1}, False, 67),  # clustered without unique: CannotCreateIndex
        ("buckets", {"a": 1}, True, 6243700),  # not the cluster key
        ("regular", {"_id": 1}, True, 6243700),  # not a clustered collection
        ("missing", {"_id": 1}, True, 6100900),  # would create the collection implicitly
    ],
)
def test_the_clustered_index_option_is_refused_off_the_cluster_key(db, where, key, unique, code):
    create(db, COLL, TS)
    db.create_collection("regular")
    name = {"buckets": BUCKETS, "regular": "regular", "missing": "missing"}[where]
    spec = {"key": key, "name": "k", "clustered": True, **({"unique": True} if unique else {})}
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", name, indexes=[spec])
    assert e.value.code == code
    assert "missing" not in db.list_collection_names()


def test_a_clustered_regular_collection_takes_its_cluster_key_spec_as_a_no_op(db):
    db.create_collection("cl", clusteredIndex={"key": {"_id": 1}, "unique": True})
    reply = db.command("createIndexes", "cl",
                       indexes=[{"key": {"_id": 1}, "name": "x", "clustered": True, "unique": True}])
    assert reply["numIndexesBefore"] == reply["numIndexesAfter"]
    assert len(list(db.cl.list_indexes())) == 1
