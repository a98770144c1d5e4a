"""Time-series DDL, metadata and writes as MongoDB 7.0 answers them: `create`'s option
checks in mongod's order, `collMod` of the bucketing parameters, `collStats`' shape."""

import datetime

import pytest
from pymongo.errors import OperationFailure

T0 = datetime.datetime(2026, 1, 1)
TS = {"timeField": "t", "metaField": "m"}


def fails(fn, code, msg=None):
    with pytest.raises(OperationFailure) as e:
        fn()
    assert e.value.code == code, e.value.details
    if msg is not None:
        assert e.value.details["errmsg"] == msg
    return e.value


def options_of(db, name):
    (info,) = db.command("listCollections", filter={"name": name})["cursor"]["firstBatch"]
    return info["options"]


# --- collMod of bucketMaxSpanSeconds / bucketRoundingSeconds ---------------------------


def test_coll_mod_bucket_seconds_of_the_wrong_type_is_type_mismatch_and_keeps_the_collection(db):
    db.create_collection("c", timeseries=TS)
    fails(
        lambda: db.command(
            "collMod", "c", timeseries={"bucketMaxSpanSeconds": "x", "bucketRoundingSeconds": "x"}
        ),
        14,
        "BSON field 'collMod.timeseries.bucketMaxSpanSeconds' is the wrong type 'string', "
        "expected types '[long, int, decimal, double]'",
    )
    assert options_of(db, "c")["timeseries"] == {
        "timeField": "t",
        "metaField": "m",
        "granularity": "seconds",
        "bucketMaxSpanSeconds": 3600,
    }
    db.c.insert_one({"t": T0, "m": 1})
    assert db.c.count_documents({"m": 1}) == 1


@pytest.mark.parametrize(
    "value, msg",
    [
        (-1, "BSON field 'bucketMaxSpanSeconds' value must be >= 1, actual value '-1'"),
        (
            40_000_000,
            "BSON field 'bucketMaxSpanSeconds' value must be <= 31536000, actual value '40000000'",
        ),
    ],
)
def test_coll_mod_bucket_seconds_out_of_range_is_bad_value_and_changes_nothing(db, value, msg):
    db.create_collection("c", timeseries=TS)
    fails(
        lambda: db.command(
            "collMod", "c", timeseries={"bucketMaxSpanSeconds": value, "bucketRoundingSeconds": value}
        ),
        2,
        msg,
    )
    assert options_of(db, "c")["timeseries"]["bucketMaxSpanSeconds"] == 3600
    assert [c["type"] for c in db.command("listCollections", filter={"name": "c"})["cursor"]["firstBatch"]] == [
        "timeseries"
    ]


def test_coll_mod_larger_fixed_bucketing_is_taken(db):
    db.create_collection("c", timeseries=TS)
    db.command("collMod", "c", timeseries={"bucketMaxSpanSeconds": 7200, "bucketRoundingSeconds": 7200})
    assert options_of(db, "c")["timeseries"] == {
        "timeField": "t",
        "metaField": "m",
        "bucketRoundingSeconds": 7200,
        "bucketMaxSpanSeconds": 7200,
    }


@pytest.mark.parametrize("option, value", [("validator", {}), ("validationLevel", "off"), ("validationAction", "warn")])
def test_coll_mod_validation_options_of_a_time_series_collection_are_not_supported(db, option, value):
    db.create_collection("c", timeseries=TS)
    fails(
        lambda: db.command("collMod", "c", **{option: value}),
        72,
        f"option not supported on a time-series collection: {option}",
    )


def test_coll_mod_timeseries_of_a_regular_collection_is_only_supported_on_time_series(db):
    db.create_collection("plain")
    fails(
        lambda: db.command("collMod", "plain", timeseries={"granularity": "hours"}),
        72,
        "option only supported on a time-series collection: timeseries",
    )


# --- collStats --------------------------------------------------------------------------


def test_coll_stats_of_a_time_series_collection_counts_buckets_only_in_its_timeseries_section(db):
    db.create_collection("c", timeseries=TS)
    db.c.insert_many([{"t": T0 + datetime.timedelta(seconds=i), "m": i % 2} for i in range(10)])
    for name in ("c", "system.buckets.c"):
        stats = db.command("collStats", name)
        assert "count" not in stats and "avgObjSize" not in stats, stats
        assert stats["timeseries"]["bucketCount"] == 2
        assert stats["timeseries"]["bucketsNs"] == f"{db.name}.system.buckets.c"
        assert stats["timeseries"]["numMeasurementsCommitted"] == 10
    # A regular collection keeps its count.
    db.plain.insert_one({})
    assert db.command("collStats", "plain")["count"] == 1


# --- create: the options beside `timeseries` --------------------------------------------


def test_create_time_series_with_an_unknown_option_is_an_unknown_field(db):
    fails(
        lambda: db.command("create", "c", timeseries={"timeField": "t"}, foo=1),
        40415,
        "BSON field 'create.foo' is an unknown field.",
    )
    assert "c" not in db.list_collection_names()


@pytest.mark.parametrize(
    "extra, msg",
    [
        ({"capped": True}, "the 'size' field is required when 'capped' is true"),
        ({"size": 1000}, "the 'capped' field needs to be true when either the 'size' or 'max' fields are present"),
        ({"max": 10}, "the 'capped' field needs to be true when either the 'size' or 'max' fields are present"),
        ({"temp": True}, "the 'temp' field is an invalid option"),
        ({"pipeline": []}, "'pipeline' requires 'viewOn' to also be specified"),
        ({"capped": True, "size": 1000}, "{ns}: 'timeseries' is not allowed with 'capped'"),
        ({"viewOn": "x"}, "{ns}: 'timeseries' is not allowed with 'viewOn'"),
        ({"validator": {}}, "{ns}: 'timeseries' is not allowed with 'validator'"),
        ({"clusteredIndex": False}, "{ns}: 'timeseries' is not allowed with 'clusteredIndex'"),
        ({"idIndex": {"key": {"_id": 1}, "name": "_id_"}}, "{ns}: 'timeseries' is not allowed with 'idIndex'"),
    ],
)
def test_create_time_series_checks_the_other_options_in_mongods_order(db, extra, msg):
    fails(
        lambda: db.command("create", "c", timeseries={"timeField": "t"}, **extra),
        72,
        msg.format(ns=f"{db.name}.c"),
    )
    assert db.list_collection_names() == []


def test_create_time_series_with_encrypted_fields_is_refused_with_6346401(db):
    e = fails(
        lambda: db.command("create", "c", timeseries={"timeField": "t"}, encryptedFields={"fields": []}),
        6346401,
        "Encrypted fields cannot be used with views or timeseries collections",
    )
    assert e.details["codeName"] == "Location6346401"


def test_create_time_series_capped_false_and_generic_fields_are_accepted(db):
    db.command("create", "c", timeseries={"timeField": "t"}, capped=False, comment="x")
    assert options_of(db, "c") == {
        "timeseries": {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}
    }


def test_create_time_series_empty_storage_engine_options_are_no_options(db):
    db.create_collection("c", timeseries={"timeField": "t"})
    # Empty storageEngine / indexOptionDefaults match the existing collection ...
    db.command("create", "c", timeseries={"timeField": "t"}, storageEngine={})
    db.command("create", "c", timeseries={"timeField": "t"}, indexOptionDefaults={})
    # ... and are not shown; a different expireAfterSeconds still conflicts.
    db.command("create", "d", timeseries={"timeField": "t"}, storageEngine={}, indexOptionDefaults={})
    assert "storageEngine" not in options_of(db, "d")
    assert "indexOptionDefaults" not in options_of(db, "d")
    fails(lambda: db.command("create", "c", timeseries={"timeField": "t"}, expireAfterSeconds=10), 48)


def test_coll_mod_of_the_buckets_collection_changes_the_time_series_options(db):
    db.create_collection("c", timeseries={"timeField": "t"}, expireAfterSeconds=5)
    buckets = "system.buckets.c"
    e = fails(lambda: db.command("collMod", buckets, expireAfterSeconds={}), 14)
    assert e.details["errmsg"].startswith(
        "BSON field 'collMod.expireAfterSeconds' is the wrong type 'object'"
    )
    fails(lambda: db.command("collMod", buckets, expireAfterSeconds=-10), 72)
    fails(lambda: db.command("collMod", buckets, expireAfterSeconds="10"), 72)
    for value in (10, 0, "off", 100):
        db.command("collMod", buckets, expireAfterSeconds=value)
        expected = None if value == "off" else value
        assert options_of(db, "c").get("expireAfterSeconds") == expected
        assert options_of(db, buckets).get("expireAfterSeconds") == expected
    db.command("collMod", buckets, timeseries={"granularity": "minutes"})
    assert options_of(db, "c")["timeseries"]["granularity"] == "minutes"
    db.c.insert_one({"t": datetime.datetime.now(datetime.timezone.utc)})
    assert db.c.count_documents({}) == 1


def test_drop_of_a_time_series_collection_counts_the_buckets_indexes_and_names_the_view(db):
    db.create_collection("c", timeseries=TS)
    db.c.create_index([("m.a", 1)])
    assert db.command("drop", "c") == {"nIndexesWas": 2, "ns": f"{db.name}.c", "ok": 1.0}
    db.create_collection("d", timeseries={"timeField": "t"})
    # Dropping the buckets drops the time-series collection, named by its view.
    assert db.command("drop", "system.buckets.d") == {"nIndexesWas": 0, "ns": f"{db.name}.d", "ok": 1.0}
    assert not {"c", "d", "system.buckets.c", "system.buckets.d"} & set(db.list_collection_names())


# --- createIndexes: the buckets' key pattern is checked as mongod checks any ------------


@pytest.mark.parametrize(
    "value, reason",
    [
        ("foo", "Unknown index plugin 'foo'"),
        (True, "Values in v:2 index key pattern cannot be of type bool. "
               "Only numbers > 0, numbers < 0, and strings are allowed."),
        (None, "Values in v:2 index key pattern cannot be of type null. "
               "Only numbers > 0, numbers < 0, and strings are allowed."),
        (0, "Values in the index key pattern cannot be 0."),
    ],
)
def test_create_index_on_a_meta_subfield_with_a_bad_key_value_is_cannot_create_index(db, value, reason):
    db.create_collection("c", timeseries=TS)
    e = fails(lambda: db.command("createIndexes", "c", indexes=[{"key": {"m.a": value}, "name": "x"}]), 67)
    assert e.details["errmsg"].startswith("Error in specification ")
    assert e.details["errmsg"].endswith(" :: caused by :: " + reason)
    assert [i["name"] for i in db.c.list_indexes()] == ["m_1_t_1"]


def test_create_index_with_two_plugins_on_the_meta_field_is_refused(db):
    db.create_collection("c", timeseries=TS)
    e = fails(
        lambda: db.command("createIndexes", "c", indexes=[{"key": {"m.a": "hashed", "m.b": "2d"}, "name": "x"}]),
        67,
    )
    assert e.details["errmsg"].endswith("Can't use more than one index plugin for a single index.")
    db.command("createIndexes", "c", indexes=[{"key": {"m.a": "2dsphere"}, "name": "geo"}])
    db.command("createIndexes", "c", indexes=[{"key": {"m.h": "hashed", "t": 1}, "name": "h"}])
    assert [i["name"] for i in db.c.list_indexes()] == ["m_1_t_1", "geo", "h"]
