"""Indexes with a collation, as MongoDB defines them: their string keys are the collation's
keys (ICU4X sort keys), so the index is in the locale's order and a unique index equates
what the collation equates. The planner uses an index for string predicates and sorts only
under the query's own collation (an index in another collation still serves predicates on
numbers and other non-strings); an index without a collation of its own takes the
collection's default; the collation is listed, and kept across a restart."""

import pytest
from pymongo import MongoClient
from pymongo.errors import DuplicateKeyError, OperationFailure

from conftest import running_server

CI = {"locale": "en", "strength": 2}  # case-insensitive
NUM = {"locale": "en", "numericOrdering": True}


def stages(plan):
    """Every stage of an explain plan, depth first."""
    yield plan
    for key in ("inputStage",):
        if key in plan:
            yield from stages(plan[key])
    for child in plan.get("inputStages", []):
        yield from stages(child)


def index_used(cursor):
    """The index the winning plan scans (None for a collection scan), and whether it sorts."""
    plan = cursor.explain()["queryPlanner"]["winningPlan"]
    names = [s.get("indexName") for s in stages(plan) if s["stage"] == "IXSCAN"]
    sorts = any(s["stage"] == "SORT" for s in stages(plan))
    return (names[0] if names else None), sorts


@pytest.fixture()
def cities(db):
    db.c.insert_many([{"_id": i, "name": n} for i, n in enumerate(
        ["Berlin", "berlin", "BERLIN", "Bonn", "bonn", "Zürich", "zurich", "Ålesund"])])
    db.c.create_index("name", name="name_ci", collation=CI)
    return db.c


def test_an_index_with_a_collation_serves_queries_in_that_collation_only(cities):
    found = cities.find({"name": "berLIN"}).collation(CI)
    assert sorted(d["_id"] for d in found) == [0, 1, 2]
    assert index_used(cities.find({"name": "berLIN"}).collation(CI))[0] == "name_ci"
    assert cities.count_documents({"name": {"$in": ["BONN", "zurich"]}}, collation=CI) == 3
    # Without the collation: binary comparisons, which this index cannot bound.
    assert [d["_id"] for d in cities.find({"name": "Berlin"})] == [0]
    assert index_used(cities.find({"name": "Berlin"}))[0] is None
    # Another collation: neither.
    other = {"locale": "en", "strength": 1}
    assert cities.count_documents({"name": "zurich"}, collation=other) == 2
    assert index_used(cities.find({"name": "zurich"}).collation(other))[0] is None


def test_ranges_and_sorts_through_a_collated_index_follow_the_locale_order(db):
    db.v.insert_many([{"v": s} for s in ["100", "9", "10", "2", "b", "a10", "a9"]])
    db.v.create_index("v", collation=NUM)
    cursor = db.v.find({"v": {"$gt": "9", "$lte": "a9"}}).collation(NUM).sort("v", 1)
    assert [d["v"] for d in cursor] == ["10", "100", "a9"]
    name, sorts = index_used(db.v.find({"v": {"$gt": "9"}}).collation(NUM).sort("v", 1))
    assert name == "v_1" and not sorts
    backwards = db.v.find({}, {"_id": 0}).collation(NUM).sort("v", -1).hint("v_1")
    assert [d["v"] for d in backwards] == ["b", "a10", "a9", "100", "10", "9", "2"]


def test_a_unique_index_in_a_case_insensitive_collation_refuses_names_equal_under_it(db):
    db.u.create_index("email", unique=True, collation=CI)
    db.u.insert_one({"email": "Ann@Example.com"})
    with pytest.raises(DuplicateKeyError) as e:
        db.u.insert_one({"email": "ann@example.COM"})
    db.u.insert_one({"email": "bob@example.com"})
    with pytest.raises(DuplicateKeyError):
        db.u.update_one({"email": "bob@example.com"}, {"$set": {"email": "ANN@example.com"}})
    assert db.u.count_documents({}) == 2
    # Building the index over documents already equal under it fails the same way.
    db.w.insert_many([{"k": "X"}, {"k": "x"}])
    with pytest.raises(OperationFailure) as e:
        db.w.create_index("k", unique=True, collation=CI)
    assert e.value.code == 11000


def test_an_index_takes_the_collections_default_collation_unless_it_names_one(db):
    db.create_collection("fr", collation={"locale": "fr", "strength": 1})
    db.fr.insert_many([{"n": "Côte"}, {"n": "cote"}, {"n": "coté"}, {"n": "Cotes"}])
    db.fr.create_index("n")
    db.fr.create_index("n", name="n_binary", collation={"locale": "simple"})
    listed = {i["name"]: i.get("collation") for i in db.fr.list_indexes()}
    assert listed["n_1"]["locale"] == "fr" and listed["n_1"]["strength"] == 1
    assert listed["n_1"]["version"] == "57.1"
    assert listed["n_binary"] is None
    # A query without a collation runs in the default one, through the index in it.
    assert db.fr.count_documents({"n": "COTE"}) == 3
    assert index_used(db.fr.find({"n": "COTE"}))[0] == "n_1"
    # An explicit simple collation uses the binary index.
    simple = {"locale": "simple"}
    assert index_used(db.fr.find({"n": "cote"}).collation(simple))[0] == "n_binary"
    assert db.fr.count_documents({"n": "cote"}, collation=simple) == 1


def test_one_key_pattern_may_be_indexed_in_two_collations(db):
    db.c.create_index("k", name="k_ci", collation=CI)
    db.c.create_index("k", name="k_bin")
    assert sorted(i["name"] for i in db.c.list_indexes()) == ["_id_", "k_bin", "k_ci"]
    # The same collation under another name is the same index: 85, as in MongoDB.
    with pytest.raises(OperationFailure) as e:
        db.c.create_index("k", name="k_ci_again", collation=CI)
    assert e.value.code == 85
    # The same name with another collation: 85 too (same key, other options).
    with pytest.raises(OperationFailure) as e:
        db.c.create_index("k", name="k_ci", collation={"locale": "de"})
    assert e.value.code == 85


def test_non_string_predicates_use_an_index_in_another_collation(db):
    db.n.insert_many([{"n": i} for i in range(20)] + [{"n": "5"}])
    db.n.create_index("n")
    assert index_used(db.n.find({"n": {"$gte": 15}}).collation(CI))[0] == "n_1"
    assert db.n.count_documents({"n": {"$gte": 15}}, collation=CI) == 5
    # A hinted index in another collation is scanned whole for a string predicate.
    assert [d["n"] for d in db.n.find({"n": "5"}).collation(CI).hint("n_1")] == ["5"]


def test_a_collated_index_is_kept_with_its_collation_across_a_restart(tmp_path):
    for restart in range(2):
        with running_server(dbpath=tmp_path) as (_, port, _):
            with MongoClient(port=port, directConnection=True) as c:
                coll = c.py_collated_restart.c
                if restart == 0:
                    coll.insert_many([{"k": "Ab"}, {"k": "aB"}, {"k": "b"}])
                    coll.create_index("k", collation=CI)
                listed = [i for i in coll.list_indexes() if i["name"] == "k_1"][0]
                assert listed["collation"]["strength"] == 2
                assert coll.count_documents({"k": "AB"}, collation=CI) == 2 + restart
                assert index_used(coll.find({"k": "AB"}).collation(CI))[0] == "k_1"
                coll.insert_one({"k": "AB"})
                assert coll.count_documents({"k": "ab"}, collation=CI) == 3 + restart
