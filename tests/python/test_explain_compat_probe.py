"""Explain of regular collections, checked against MongoDB 7.0's documented output
(explain-results reference, jstests/core/query/explain/*): write stages and their
counters, IXSCAN multiKeyPaths, per-stage execution counters, queryHash/planCacheKey."""

import re


def explain(db, cmd, verbosity="executionStats"):
    return db.command("explain", cmd, verbosity=verbosity)


def stage(node, name):
    """The first stage called `name` in a stage tree."""
    while node is not None:
        if node.get("stage") == name:
            return node
        node = node.get("inputStage")
    return None


def seed(db):
    db.c.insert_many(
        [{"_id": 1, "a": 1, "x": 1}, {"_id": 2, "a": 1}, {"_id": 3, "a": 1}, {"_id": 4, "a": 2}]
    )


def test_explained_multi_update_returns_nothing_and_counts_what_it_would_modify(db):
    seed(db)
    out = explain(
        db,
        {"update": "c", "updates": [{"q": {"a": 1}, "u": {"$set": {"x": 1}}, "multi": True}]},
    )
    st = out["executionStats"]
    root = st["executionStages"]
    assert root["stage"] == "UPDATE"
    assert st["nReturned"] == 0
    assert root["nReturned"] == 0
    assert root["nMatched"] == 3
    # _id 1 already has x: 1, so only two documents would change.
    assert root["nWouldModify"] == 2
    assert root["nWouldUpsert"] == 0
    assert db.c.count_documents({"x": 1}) == 1


def test_explained_single_update_stops_after_its_document(db):
    seed(db)
    out = explain(db, {"update": "c", "updates": [{"q": {"a": 1}, "u": {"$set": {"y": 1}}}]})
    root = out["executionStats"]["executionStages"]
    assert root["nMatched"] == 1
    assert root["nWouldModify"] == 1
    assert root["isEOF"] == 1
    assert "LIMIT" not in str(out["queryPlanner"]["winningPlan"])


def test_explained_upsert_without_match_would_upsert(db):
    seed(db)
    out = explain(
        db,
        {"update": "c", "updates": [{"q": {"a": 9}, "u": {"$set": {"y": 1}}, "upsert": True}]},
    )
    root = out["executionStats"]["executionStages"]
    assert (root["nMatched"], root["nWouldModify"], root["nWouldUpsert"]) == (0, 0, 1)
    assert db.c.count_documents({}) == 4


def test_explained_multi_delete_is_a_batched_delete_counting_would_delete(db):
    seed(db)
    out = explain(db, {"delete": "c", "deletes": [{"q": {"a": 1}, "limit": 0}]})
    st = out["executionStats"]
    assert out["queryPlanner"]["winningPlan"]["stage"] == "BATCHED_DELETE"
    assert st["executionStages"]["stage"] == "BATCHED_DELETE"
    assert st["executionStages"]["nWouldDelete"] == 3
    assert st["executionStages"]["nReturned"] == 0
    assert st["nReturned"] == 0
    assert db.c.count_documents({}) == 4


def test_explained_delete_of_one_is_a_delete_stage(db):
    seed(db)
    out = explain(db, {"delete": "c", "deletes": [{"q": {"a": 1}, "limit": 1}]})
    root = out["executionStats"]["executionStages"]
    assert root["stage"] == "DELETE"
    assert root["nWouldDelete"] == 1


def test_explained_find_and_modify_returns_the_document_it_writes(db):
    seed(db)
    fam = {"findAndModify": "c", "query": {"_id": 2}, "update": {"$inc": {"i": 1}}}
    st = explain(db, fam)["executionStats"]
    assert st["nReturned"] == 1
    assert st["executionStages"]["nWouldModify"] == 1
    miss = explain(db, dict(fam, query={"_id": "none"}))["executionStats"]
    assert miss["nReturned"] == 0
    assert miss["executionStages"]["nWouldModify"] == 0
    upsert_new = dict(fam, query={"_id": "none"}, upsert=True, new=True)
    up = explain(db, upsert_new)["executionStats"]
    assert up["nReturned"] == 1
    assert up["executionStages"]["nWouldUpsert"] == 1
    upsert_old = dict(fam, query={"_id": "none"}, upsert=True)
    assert explain(db, upsert_old)["executionStats"]["nReturned"] == 0
    rm = explain(db, {"findAndModify": "c", "query": {"_id": 2}, "remove": True})
    assert rm["executionStats"]["executionStages"]["stage"] == "DELETE"
    assert rm["executionStats"]["executionStages"]["nWouldDelete"] == 1
    assert rm["executionStats"]["nReturned"] == 1


def test_explained_find_and_modify_with_fields_projects_above_the_write(db):
    seed(db)
    out = explain(
        db,
        {"findAndModify": "c", "query": {"_id": 2}, "update": {"$set": {"i": 1}}, "fields": {"i": 0}},
    )
    root = out["executionStats"]["executionStages"]
    assert root["stage"] == "PROJECTION_DEFAULT"
    assert root["transformBy"] == {"i": 0}
    assert root["inputStage"]["stage"] == "UPDATE"
    assert out["executionStats"]["nReturned"] == 1


def test_ixscan_of_a_plain_index_has_empty_multikey_paths(db):
    db.c.insert_one({"a": 1, "b": {"c": 2}})
    db.c.create_index([("a", 1), ("b.c", 1)])
    plan = explain(db, {"find": "c", "filter": {"a": 1}}, "queryPlanner")
    ix = stage(plan["queryPlanner"]["winningPlan"], "IXSCAN")
    assert ix["isMultiKey"] is False
    assert ix["multiKeyPaths"] == {"a": [], "b.c": []}


def test_ixscan_of_a_multikey_single_field_index_names_the_field(db):
    db.c.insert_one({"b": [1, 2]})
    db.c.create_index("b")
    plan = explain(db, {"find": "c", "filter": {"b": 1}}, "queryPlanner")
    ix = stage(plan["queryPlanner"]["winningPlan"], "IXSCAN")
    assert ix["isMultiKey"] is True
    assert ix["multiKeyPaths"] == {"b": ["b"]}


def test_index_scan_counters_follow_the_work_accounting(db):
    seed(db)
    db.c.create_index("a")
    st = explain(db, {"find": "c", "filter": {"a": 1}})["executionStats"]
    fetch = st["executionStages"]
    ix = stage(fetch, "IXSCAN")
    assert ix["keysExamined"] == 3
    # One work per key examined plus the one that finds the end.
    assert ix["works"] == 4
    assert ix["advanced"] == ix["nReturned"] == 3
    assert ix["needTime"] == 0 and ix["isEOF"] == 1
    assert (ix["seeks"], ix["dupsTested"], ix["dupsDropped"]) == (1, 0, 0)
    assert fetch["works"] == 4 and fetch["advanced"] == 3 and fetch["alreadyHasObj"] == 0
    for node in (fetch, ix):
        for k in ("needYield", "saveState", "restoreState", "executionTimeMillisEstimate"):
            assert k in node


def test_collection_scan_counters_and_early_stop(db):
    seed(db)
    st = explain(db, {"find": "c", "filter": {"a": 2}})["executionStats"]
    scan = st["executionStages"]
    assert scan["stage"] == "COLLSCAN"
    assert scan["docsExamined"] == 4
    assert scan["works"] == 5
    assert scan["needTime"] == 3
    assert scan["isEOF"] == 1
    limited = explain(db, {"find": "c", "filter": {"a": 1}, "limit": 1})["executionStats"]
    scan = stage(limited["executionStages"], "COLLSCAN")
    # Stopped by the limit: no final work, not at its end.
    assert scan["isEOF"] == 0
    assert scan["works"] == scan["docsExamined"] == 1


def test_query_hash_depends_on_the_shape_not_the_values(db):
    seed(db)
    db.c.create_index("a")

    def planner(f, sort=None):
        cmd = {"find": "c", "filter": f}
        if sort:
            cmd["sort"] = sort
        return explain(db, cmd, "queryPlanner")["queryPlanner"]

    one, two = planner({"a": 1}), planner({"a": 2})
    assert re.fullmatch(r"[0-9A-F]{8}", one["queryHash"])
    assert re.fullmatch(r"[0-9A-F]{8}", one["planCacheKey"])
    assert one["queryHash"] == two["queryHash"]
    assert one["planCacheKey"] == two["planCacheKey"]
    assert planner({"a": {"$gt": 1}})["queryHash"] != one["queryHash"]
    assert planner({"a": 1}, {"x": 1})["queryHash"] != one["queryHash"]
    projected = explain(db, {"find": "c", "filter": {"a": 5}, "projection": {"a": 1}}, "queryPlanner")
    assert projected["queryPlanner"]["queryHash"] != one["queryHash"]
    # An index on a path the query does not read leaves the key alone; one that could
    # serve it changes the key, never the hash.
    db.c.create_index("x")
    assert planner({"a": 1})["planCacheKey"] == one["planCacheKey"]
    db.c.create_index([("a", 1), ("z", 1)])
    again = planner({"a": 1})
    assert again["queryHash"] == one["queryHash"]
    assert again["planCacheKey"] != one["planCacheKey"]


def test_fetch_keeps_no_filter_when_exact_index_bounds_answer_it(db):
    seed(db)
    db.c.create_index([("a", 1), ("x", 1)])

    def fetch(f):
        plan = explain(db, {"find": "c", "filter": f, "hint": "a_1_x_1"}, "queryPlanner")
        return stage(plan["queryPlanner"]["winningPlan"], "FETCH")

    assert "filter" not in fetch({"a": 1})
    assert "filter" not in fetch({"a": {"$in": [1, 2]}, "x": 1})
    # Bounds that only narrow the scan leave the filter to the FETCH.
    assert fetch({"a": 1, "y": 2})["filter"] == {"$and": [{"a": {"$eq": 1}}, {"y": {"$eq": 2}}]}
    assert "filter" in fetch({"a": None})
    assert "filter" in fetch({"a": {"$exists": True}})
    # The answer is still filtered: exactly the matching documents come back.
    assert len(list(db.c.find({"a": {"$in": [1, 2]}, "x": 1}).hint("a_1_x_1"))) == 1


def test_sort_skip_limit_and_projection_stages_count_what_each_passes_on(db):
    db.c.insert_many([{"x": i, "s": "v%03d" % i} for i in range(100)])
    out = explain(
        db,
        {
            "find": "c",
            "filter": {"x": {"$gte": 10}},
            "sort": {"s": 1},
            "skip": 2,
            "limit": 5,
            "projection": {"s": 1, "_id": 0},
        },
    )
    root = out["executionStats"]["executionStages"]
    assert root["stage"] == "PROJECTION_SIMPLE"
    assert root["nReturned"] == 5
    limit, skip, sort = stage(root, "LIMIT"), stage(root, "SKIP"), stage(root, "SORT")
    # The sort keeps only what the skip and the limit can reach.
    assert sort["limitAmount"] == 7
    assert sort["memLimit"] == 100 * 1024 * 1024
    assert sort["nReturned"] == 7
    assert skip["nReturned"] == 5
    assert limit["nReturned"] == 5
    scan = stage(root, "COLLSCAN")
    assert scan["nReturned"] == 90
    for s in (root, limit, skip, sort):
        assert s["advanced"] == s["nReturned"]
        assert s["works"] >= scan["works"]
        assert s["isEOF"] == 1
    planned = out["queryPlanner"]["winningPlan"]
    assert list(stage(planned, "SORT"))[:5] == [
        "stage", "sortPattern", "memLimit", "limitAmount", "type"
    ]


def test_a_projection_with_a_computed_field_is_a_default_projection(db):
    db.c.insert_many([{"x": i} for i in range(20)])
    out = explain(db, {"find": "c", "skip": 3, "limit": 5, "projection": {"y": {"$add": ["$x", 1]}}})
    root = out["executionStats"]["executionStages"]
    assert root["stage"] == "PROJECTION_DEFAULT"
    assert root["nReturned"] == 5
    skip = stage(root, "SKIP")
    # Without a sort the scan stops once the limit is reached: 3 skipped, 5 returned.
    assert stage(root, "COLLSCAN")["nReturned"] == 8
    assert skip["nReturned"] == 5
    assert skip["isEOF"] == 0
    dotted = explain(db, {"find": "c", "projection": {"a.b": 1}}, "queryPlanner")
    assert dotted["queryPlanner"]["winningPlan"]["stage"] == "PROJECTION_DEFAULT"


def test_fetch_over_a_range_the_bounds_answer_keeps_no_filter(db):
    db.c.insert_many([{"x": i, "s": "v%03d" % i} for i in range(50)])
    db.c.create_index("x")
    db.c.create_index("s")
    for f in ({"x": {"$gte": 10}}, {"x": {"$gt": 10, "$lte": 20}}, {"s": {"$lt": "v010"}}):
        plan = explain(db, {"find": "c", "filter": f}, "queryPlanner")["queryPlanner"]
        fetch = plan["winningPlan"]
        assert fetch["stage"] == "FETCH" and "filter" not in fetch, (f, fetch)
    # A condition the bounds do not answer stays on the FETCH.
    plan = explain(db, {"find": "c", "filter": {"x": {"$gte": 10, "$ne": 12}}}, "queryPlanner")
    assert "filter" in plan["queryPlanner"]["winningPlan"]


def test_a_string_range_ends_before_the_object_bracket(db):
    db.c.insert_many([{"s": "v%03d" % i} for i in range(10)])
    db.c.create_index("s")
    plan = explain(db, {"find": "c", "filter": {"s": {"$gte": "v005"}}}, "queryPlanner")
    ix = stage(plan["queryPlanner"]["winningPlan"], "IXSCAN")
    assert ix["indexBounds"] == {"s": ['["v005", {})']}


def test_count_stage_skips_and_limits_itself_and_returns_nothing(db):
    db.c.insert_many([{"a": i % 3} for i in range(20)])
    out = explain(db, {"count": "c", "query": {"a": 1}, "skip": 1, "limit": 3})
    assert out["queryPlanner"]["winningPlan"]["inputStage"]["stage"] == "COLLSCAN"
    st = out["executionStats"]
    root = st["executionStages"]
    assert st["nReturned"] == 0
    assert (root["stage"], root["nReturned"], root["nCounted"], root["nSkipped"]) == (
        "COUNT", 0, 3, 1
    )
    assert root["inputStage"]["nReturned"] == 4
    assert db.command("count", "c", query={"a": 1}, skip=1, limit=3)["n"] == 3


def test_explain_on_a_missing_collection_runs_the_plans_stages_over_eof(db):
    out = explain(db, {"update": "none", "updates": [{"q": {"a": 1}, "u": {"$set": {"x": 1}}, "upsert": True}]})
    root = out["executionStats"]["executionStages"]
    assert root["stage"] == "UPDATE"
    assert (root["nMatched"], root["nWouldModify"], root["nWouldUpsert"]) == (0, 0, 1)
    assert root["inputStage"]["stage"] == "EOF"
    assert root["inputStage"]["isEOF"] == 1
    out = explain(db, {"delete": "none", "deletes": [{"q": {"a": 1}, "limit": 0}]})
    root = out["executionStats"]["executionStages"]
    assert root["stage"] == out["queryPlanner"]["winningPlan"]["stage"]
    assert root["nWouldDelete"] == 0
    assert "none" not in db.list_collection_names()
