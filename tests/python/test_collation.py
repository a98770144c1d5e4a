"""Collation as MongoDB defines it (ICU4X's collator): per operation on find, count,
distinct, aggregate, update, delete and findAndModify; the collection default from
`create`; cursors that continue with getMore; strength, case, numeric ordering; the planner
reads an index only in its own collation (`test_collation_indexes.py`); time-series
collections read with one as regular collections do (their column paths step aside), and
refuse it on writes."""

import pytest
from pymongo import ReturnDocument
from pymongo.errors import OperationFailure

CI = {"locale": "en", "strength": 2}  # case-insensitive


@pytest.fixture()
def cities(db):
    db.c.insert_many([{"name": n} for n in ["Berlin", "berlin", "BERLIN", "Bonn", "bonn", "Zürich", "zurich"]])
    db.c.create_index("name")
    return db.c


def names(docs):
    return sorted(d["name"] for d in docs)


def test_strength_two_finds_every_case_and_counts_them(cities):
    assert names(cities.find({"name": "BERLIN"}, collation=CI)) == ["BERLIN", "Berlin", "berlin"]
    assert names(cities.find({"name": "BERLIN"})) == ["BERLIN"]
    assert cities.count_documents({"name": "bonn"}, collation=CI) == 2
    assert cities.count_documents({"name": {"$in": ["BONN", "ZURICH"]}}, collation=CI) == 3


def test_strength_one_also_ignores_accents(cities):
    assert names(cities.find({"name": "zurich"}, collation={"locale": "de", "strength": 1})) == ["Zürich", "zurich"]
    assert names(cities.find({"name": "zurich"}, collation=CI)) == ["zurich"]


def test_range_queries_and_sort_follow_the_locale_order(cities):
    got = [d["name"] for d in cities.find({"name": {"$gte": "b", "$lt": "c"}}, sort=[("name", 1), ("_id", 1)],
                                          collation={"locale": "en"})]
    assert got == ["berlin", "Berlin", "BERLIN", "bonn", "Bonn"]
    upper = [d["name"] for d in cities.find({"name": {"$regex": "^[bB]on"}}, sort=[("name", 1)],
                                            collation={"locale": "en", "caseFirst": "upper"})]
    assert upper == ["Bonn", "bonn"]


def test_numeric_ordering_sorts_digits_by_value(db):
    db.v.insert_many([{"s": s} for s in ["a10", "a9", "a100", "a1"]])
    got = [d["s"] for d in db.v.find({}, sort=[("s", 1)], collation={"locale": "en", "numericOrdering": True})]
    assert got == ["a1", "a9", "a10", "a100"]
    assert [d["s"] for d in db.v.find({}, sort=[("s", 1)])] == ["a1", "a10", "a100", "a9"]


def test_distinct_and_group_merge_values_equal_under_the_collation(cities):
    assert len(cities.distinct("name", collation=CI)) == 4
    groups = list(cities.aggregate([{"$group": {"_id": "$name", "n": {"$sum": 1}}}, {"$sort": {"n": -1}}],
                                   collation=CI))
    assert [g["n"] for g in groups] == [3, 2, 1, 1]
    matched = list(cities.aggregate([{"$match": {"name": "BONN"}}, {"$count": "n"}], collation=CI))
    assert matched == [{"n": 2}]


def test_updates_deletes_and_find_and_modify_match_with_the_collation(cities):
    assert cities.update_many({"name": "berlin"}, {"$set": {"x": 1}}, collation=CI).modified_count == 3
    before = cities.find_one_and_update({"name": "ZURICH"}, {"$set": {"y": 1}}, collation=CI,
                                        return_document=ReturnDocument.AFTER)
    assert before["name"] == "zurich" and before["y"] == 1
    assert cities.delete_many({"name": "BONN"}, collation=CI).deleted_count == 2
    assert cities.count_documents({}) == 5


def test_a_cursor_keeps_its_collation_across_get_more(db):
    db.m.insert_many([{"s": "X" if i % 2 else "x", "i": i} for i in range(50)])
    cursor = db.m.find({"s": "x"}, batch_size=5, collation=CI)
    assert len(list(cursor)) == 50


def test_the_collection_default_collation_applies_and_is_listed(db):
    db.create_collection("fr", collation={"locale": "fr", "strength": 1})
    info = db.command("listCollections", filter={"name": "fr"})["cursor"]["firstBatch"][0]
    assert info["options"]["collation"]["locale"] == "fr"
    assert info["options"]["collation"]["strength"] == 1
    db.fr.insert_many([{"n": "Côte"}, {"n": "cote"}, {"n": "coté"}])
    assert db.fr.count_documents({"n": "COTE"}) == 3
    # An explicit simple collation overrides the default.
    assert db.fr.count_documents({"n": "COTE"}, collation={"locale": "simple"}) == 0


def test_explain_shows_a_collection_scan_under_a_collation(cities):
    plan = cities.find({"name": "BERLIN"}).collation(CI).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "COLLSCAN"
    assert cities.find({"name": "BERLIN"}).explain()["queryPlanner"]["winningPlan"]["stage"] != "COLLSCAN"


@pytest.mark.parametrize("bad,code", [
    ({"locale": "en", "strength": 7}, 2),
    ({"locale": "en", "caseFirst": "sideways"}, 2),
    ({"locale": "en", "bogus": True}, 40415),
    ({"strength": 2}, 40414),
])
def test_invalid_collations_are_refused_with_mongodb_codes(cities, bad, code):
    with pytest.raises(OperationFailure) as e:
        cities.find_one({}, collation=bad)
    assert e.value.code == code


@pytest.fixture()
def ts_and_regular(db):
    """The same measurements in a time-series collection and a regular one. Each bucket
    holds two words whose byte order differs from their English order ("Banana" < "apple"
    by bytes), so binary control min/max would refute buckets a collation matches."""
    import datetime
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "city", "granularity": "seconds"})
    t0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    rows = []
    for i, (city, words) in enumerate([("Berlin", ("Banana", "apple")), ("berlin", ("apple", "Cherry")),
                                       ("BERLIN", ("cherry", "Banana")), ("Bonn", ("banana", "Date")),
                                       ("bonn", ("Apple", "date")), ("Zürich", ("date", "Cherry")),
                                       ("zurich", ("Date", "banana"))]):
        for h in range(3):  # hours apart: one bucket each, closed by the next
            for m, word in enumerate(words):
                rows.append({"t": t0 + datetime.timedelta(hours=2 * h, minutes=m), "city": city,
                             "w": word, "v": 10 * i + m})
    db.ts.insert_many([dict(r) for r in rows])
    db.reg.insert_many([dict(r) for r in rows])
    return db.ts, db.reg


@pytest.mark.parametrize("read", [
    lambda c: sorted(d["v"] for d in c.find({"city": "berlin"}, collation=CI)),
    lambda c: sorted(d["v"] for d in c.find({"w": {"$gte": "b", "$lt": "c"}}, collation=CI)),
    lambda c: sorted(d["v"] for d in c.find({"w": "APPLE"}, {"_id": 0}, collation=CI)),
    lambda c: [(d["w"].lower(), d["v"]) for d in c.find({}, {"_id": 0}, sort=[("w", 1), ("v", 1)],
                                                        collation=CI)],
    lambda c: sorted((d["_id"].lower(), d["n"]) for d in c.aggregate(
        [{"$group": {"_id": "$city", "n": {"$sum": 1}}}], collation=CI)),
    lambda c: sorted((d["_id"].lower(), d["n"]) for d in c.aggregate(
        [{"$match": {"w": {"$in": ["BANANA", "date"]}}}, {"$group": {"_id": "$w", "n": {"$sum": "$v"}}}],
        collation=CI)),
    lambda c: c.count_documents({"city": {"$in": ["BONN", "ZURICH"]}}, collation=CI),
    lambda c: c.count_documents({"city": "zurich"}, collation={"locale": "de", "strength": 1}),
    lambda c: sorted(x.lower() for x in c.distinct("city", collation=CI)),
    lambda c: [d["v"] for d in c.find({}, sort=[("city", -1), ("v", 1)], limit=4,
                                      collation={"locale": "en", "caseFirst": "upper"})],
], ids=["meta-eq", "measurement-range", "measurement-eq", "sort", "group-meta", "match-group",
        "count-in", "count-strength-1", "distinct", "sort-case-first"])
def test_a_time_series_collection_reads_with_a_collation_as_a_regular_one_does(ts_and_regular, read):
    ts, reg = ts_and_regular
    assert read(ts) == read(reg)


def test_a_collation_on_a_time_series_collection_finds_what_binary_bounds_would_prune(ts_and_regular):
    ts, _ = ts_and_regular
    # "Banana" sorts before "b" by bytes ("B" < "b") but not in English.
    assert sorted(d["w"] for d in ts.find({"w": {"$gte": "b", "$lt": "c"}, "city": "Berlin"},
                                          collation={"locale": "en"})) == ["Banana"] * 3


def contents(c):
    return sorted((d["city"], d["w"], d["v"], d.get("x", 0), d.get("y", 0)) for d in c.find({}, {"_id": 0}))


@pytest.mark.parametrize("write", [
    lambda c: c.delete_many({"city": "berlin"}, collation=CI).deleted_count,
    lambda c: c.delete_many({"w": "APPLE", "city": {"$in": ["BONN", "berlin"]}}, collation=CI).deleted_count,
    lambda c: c.delete_one({"city": "ZURICH", "w": "date"}, collation=CI).deleted_count,
    lambda c: c.update_many({"city": "bonn"}, {"$set": {"city": "Bonn-Mitte"}}, collation=CI).modified_count,
    lambda c: c.update_many({"w": {"$gte": "b", "$lt": "c"}}, {"$set": {"x": 1}}, collation=CI).modified_count,
    lambda c: c.find_one_and_update({"w": "CHERRY", "city": "BERLIN"}, {"$set": {"y": 2}},
                                    collation=CI, projection={"_id": 0, "v": 1}, sort=[("v", 1)]),
    lambda c: c.delete_many({"city": "zurich"}, collation={"locale": "de", "strength": 1}).deleted_count,
], ids=["delete-meta", "delete-mixed", "delete-one", "update-meta", "update-range", "find-and-modify",
        "delete-strength-1"])
def test_a_time_series_collection_writes_with_a_collation_as_a_regular_one_does(ts_and_regular, write):
    ts, reg = ts_and_regular
    assert write(ts) == write(reg)
    assert contents(ts) == contents(reg)


def test_a_time_series_default_collation_applies_to_reads_writes_and_its_default_index(db):
    import datetime
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"}, collation=CI)
    listed = db.command("listCollections", filter={"name": "ts"})["cursor"]["firstBatch"][0]
    assert listed["options"]["collation"]["locale"] == "en"
    assert listed["options"]["collation"]["strength"] == 2
    t = datetime.datetime(2024, 1, 1)
    db.ts.insert_many([{"t": t, "m": m, "v": i} for i, m in enumerate(["Oslo", "OSLO", "oslo", "Rome"])])
    assert db.ts.count_documents({"m": "oslo"}) == 3
    assert db.ts.count_documents({"m": "oslo"}, collation={"locale": "simple"}) == 1
    assert db.ts.delete_many({"m": "OSLO"}).deleted_count == 3
    assert [d["m"] for d in db.ts.find()] == ["Rome"]
    default = [i for i in db.ts.list_indexes() if i["key"] == {"m": 1, "t": 1}]
    assert default and default[0]["collation"]["strength"] == 2, list(db.ts.list_indexes())


def test_each_statement_of_a_bulk_write_runs_with_its_own_collation(cities):
    from pymongo import DeleteOne, UpdateMany
    result = cities.bulk_write([
        UpdateMany({"name": "berlin"}, {"$set": {"ci": True}}, collation=CI),
        UpdateMany({"name": "bonn"}, {"$set": {"binary": True}}),
        DeleteOne({"name": "ZÜRICH"}, collation=CI),
    ])
    assert result.modified_count == 3 + 1
    assert result.deleted_count == 1
    assert cities.count_documents({"ci": True}) == 3 and cities.count_documents({"binary": True}) == 1


def words_in(db, kind, words):
    """A collection of `kind` ("regular" or "timeseries") holding one document per word."""
    import datetime
    name = f"w_{kind}"
    if kind == "timeseries":
        db.create_collection(name, timeseries={"timeField": "t", "metaField": "m"})
    t0 = datetime.datetime(2024, 1, 1)
    db[name].insert_many([{"t": t0 + datetime.timedelta(seconds=i), "m": i % 2, "w": w}
                          for i, w in enumerate(words)])
    return db[name]


# Each option, golden answers (ICU's, which MongoDB uses): words that equal "a"/"ab"/"é",
# or the sorted order.
GOLDEN = [
    ("strength-1", {"locale": "en", "strength": 1}, ["a", "A", "á", "b"], "a", 3),
    ("strength-2", {"locale": "en", "strength": 2}, ["a", "A", "á", "b"], "a", 2),
    ("strength-3", {"locale": "en", "strength": 3}, ["a", "A", "á", "b"], "a", 1),
    ("caseLevel", {"locale": "en", "strength": 1, "caseLevel": True}, ["a", "A", "á", "Á"], "a", 2),
    ("alternate-shifted", {"locale": "en", "alternate": "shifted"}, ["ab", "a-b", "a b", "a_b", "abc"], "ab", 4),
    ("maxVariable-space", {"locale": "en", "alternate": "shifted", "maxVariable": "space"},
     ["ab", "a-b", "a b", "abc"], "ab", 2),
    ("non-ignorable", {"locale": "en", "alternate": "non-ignorable"}, ["ab", "a-b", "a b"], "ab", 1),
    ("normalization", {"locale": "en", "normalization": True}, ["\u00e9", "e\u0301", "e"], "\u00e9", 2),
]
ORDERS = [
    ("caseFirst-upper", {"locale": "en", "caseFirst": "upper"}, ["b", "a", "B", "A"], ["A", "a", "B", "b"]),
    ("caseFirst-lower", {"locale": "en", "caseFirst": "lower"}, ["b", "A", "B", "a"], ["a", "A", "b", "B"]),
    ("numericOrdering", {"locale": "en", "numericOrdering": True}, ["10", "9", "2", "100"], ["2", "9", "10", "100"]),
    ("locale-sv", {"locale": "sv"}, ["z", "\u00e4", "a"], ["a", "z", "\u00e4"]),
    ("locale-en", {"locale": "en"}, ["z", "\u00e4", "a"], ["a", "\u00e4", "z"]),
    # Accents compared from the end of the word (fr_CA), or from its start (fr).
    ("backwards-fr_CA", {"locale": "fr_CA", "backwards": True}, ["c\u00f4t\u00e9", "c\u00f4te", "cot\u00e9", "cote"],
     ["cote", "c\u00f4te", "cot\u00e9", "c\u00f4t\u00e9"]),
    ("forwards-fr", {"locale": "fr"}, ["c\u00f4t\u00e9", "c\u00f4te", "cot\u00e9", "cote"],
     ["cote", "cot\u00e9", "c\u00f4te", "c\u00f4t\u00e9"]),
]


@pytest.mark.parametrize("kind", ["regular", "timeseries"])
@pytest.mark.parametrize("name,collation,words,probe,equal", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_each_collation_option_equates_what_icu_equates(db, kind, name, collation, words, probe, equal):
    c = words_in(db, kind, words)
    assert c.count_documents({"w": probe}, collation=collation) == equal
    assert len(list(c.find({"w": probe}, collation=collation))) == equal


@pytest.mark.parametrize("kind", ["regular", "timeseries"])
@pytest.mark.parametrize("name,collation,words,order", ORDERS, ids=[o[0] for o in ORDERS])
def test_each_collation_option_sorts_as_icu_sorts(db, kind, name, collation, words, order):
    c = words_in(db, kind, words)
    assert [d["w"] for d in c.find({}, sort=[("w", 1)], collation=collation)] == order
    assert [d["_id"] for d in c.aggregate([{"$sort": {"w": 1}}, {"$project": {"_id": "$w"}}],
                                          collation=collation)] == order
