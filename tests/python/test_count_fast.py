"""`count` without a query on a regular collection is mongod's record-store count: explain
shows one RECORD_STORE_FAST_COUNT stage (no key, no document examined) with what it
counted and skipped; a query or a hint keeps the COUNT plan. Through pymongo."""

import pytest


@pytest.fixture
def coll(db):
    db.c.insert_many([{"_id": i, "a": i % 4} for i in range(30)])
    db.c.create_index("a")
    return db.c


def explain_count(db, **count):
    return db.command({"explain": {"count": "c", **count}, "verbosity": "executionStats"})


def test_a_count_without_a_query_explains_as_the_record_store_count(db, coll):
    e = explain_count(db)
    assert e["queryPlanner"]["winningPlan"] == {"stage": "RECORD_STORE_FAST_COUNT"}
    stats = e["executionStats"]
    assert (stats["nReturned"], stats["totalKeysExamined"], stats["totalDocsExamined"]) == (0, 0, 0)
    stage = stats["executionStages"]
    assert stage["stage"] == "RECORD_STORE_FAST_COUNT"
    assert (stage["nCounted"], stage["nSkipped"], stage["works"], stage["isEOF"]) == (30, 0, 1, 1)
    stage = explain_count(db, query={}, skip=25, limit=10)["executionStats"]["executionStages"]
    assert (stage["nCounted"], stage["nSkipped"]) == (5, 25)
    assert db.command("count", "c", skip=25, limit=10)["n"] == 5
    assert db.command("count", "c")["n"] == coll.estimated_document_count() == 30


def test_a_count_with_a_query_or_a_hint_keeps_its_plan(db, coll):
    plan = explain_count(db, query={"a": 1})["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "COUNT"
    stats = explain_count(db, hint="a_1")["executionStats"]
    assert stats["executionStages"]["stage"] == "COUNT"
    assert stats["executionStages"]["nCounted"] == 30

