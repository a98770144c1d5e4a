"""The profiler (`profile` levels 0/1/2, `slowms`, `sampleRate`, `filter`, a bounded
`system.profile`), the "Slow query" log line, and mongod's JSON log format, through
pymongo on servers of their own (the settings are server-wide)."""

import json
import subprocess

import bson
import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import _binary, _free_port, running_server, stop_process


@pytest.fixture()
def srv(tmp_path):
    logpath = tmp_path / "hg.log"
    with running_server("--logpath", str(logpath)) as (proc, port, _):
        client = MongoClient(port=port, directConnection=True)
        yield client, logpath
        client.close()


def test_profile_level_2_records_every_operation_with_mongods_fields(srv):
    client, _ = srv
    db = client.prof
    db.c.insert_many([{"a": i} for i in range(5)])
    db.c.create_index("a")
    was = db.command("profile", 2)
    assert (was["was"], was["slowms"], was["sampleRate"]) == (0, 100, 1.0)
    assert len(list(db.c.find({"a": {"$gte": 3}}))) == 2
    db.c.insert_one({"a": 9})
    entries = list(db.system.profile.find())
    find = next(e for e in entries if e["op"] == "query")
    assert find["ns"] == "prof.c"
    assert find["command"]["filter"] == {"a": {"$gte": 3}}
    assert find["nreturned"] == 2
    assert find["planSummary"] == "IXSCAN { a: 1 }"
    assert isinstance(find["millis"], int) and find["responseLength"] > 0
    assert find["client"].startswith("127.0.0.1:")
    insert = next(e for e in entries if e["op"] == "insert")
    assert insert["ninserted"] == 1
    assert db.command("profile", -1)["was"] == 2
    db.command("profile", 0)
    n = db.system.profile.count_documents({})
    db.c.find_one()
    assert db.system.profile.count_documents({}) == n, "level 0 records nothing"


def test_a_filter_decides_what_is_profiled_and_logged(srv):
    client, logpath = srv
    db = client.proff
    db.c.insert_many([{"a": i, "marker": i == 1} for i in range(3)])
    reply = db.command("profile", 1, filter={"command.filter.marker": True})
    assert reply["was"] == 0
    db.c.find_one({"marker": True})
    db.c.find_one({"marker": False})
    entries = list(db.system.profile.find())
    assert [e["command"]["filter"] for e in entries] == [{"marker": True}], entries
    assert "note" in db.command("profile", -1)
    slow = [json.loads(line) for line in client.admin.command("getLog", "global")["log"]
            if '"Slow query"' in line]
    assert len(slow) == 1, slow
    line = slow[0]
    assert (line["c"], line["id"], line["s"]) == ("COMMAND", 51803, "I")
    assert line["attr"]["ns"] == "proff.c" and line["attr"]["planSummary"] == "COLLSCAN"
    assert line["attr"]["command"]["filter"] == {"marker": True}
    assert isinstance(line["attr"]["durationMillis"], int)
    # The same line is in the log file.
    assert any('"Slow query"' in l for l in logpath.read_text().splitlines())
    db.command("profile", 0, filter="unset")
    assert "filter" not in db.command("profile", -1)


def test_a_read_through_a_view_is_profiled_with_the_plan_of_its_source(srv):
    client, _ = srv
    db = client.profview
    db.c.insert_many([{"a": i} for i in range(10)])
    db.c.create_index("a")
    db.command("create", "v", viewOn="c", pipeline=[{"$match": {"a": {"$gte": 5}}}])
    db.command("profile", 2)
    assert len(list(db.v.find())) == 5
    db.command("profile", 0)
    (entry,) = list(db.system.profile.find({"ns": "profview.v"}))
    assert entry["planSummary"] == "IXSCAN { a: 1 }" and entry["nreturned"] == 5


def test_profile_settings_are_checked(srv):
    client, _ = srv
    for bad in ({"profile": 3}, {"profile": 1, "sampleRate": 2.0},
                {"profile": 1, "filter": 5}, {"profile": 1, "nosuch": 1}):
        with pytest.raises(OperationFailure):
            client.p.command(bad)
    assert client.p.command("profile", -1)["was"] == 0


def test_system_profile_stays_within_one_mebibyte(srv):
    client, _ = srv
    db = client.profbig
    db.c.insert_one({"a": 1})
    db.command("profile", 2)
    big = "x" * 2000
    for i in range(800):
        db.c.find_one({"a": i, "pad": big})
    db.command("profile", 0)
    entries = list(db.system.profile.find())
    total = sum(len(bson.encode(e)) for e in entries)
    assert total <= 1 << 20, total
    assert len(entries) > 100
    # The newest entries are kept.
    assert any(e["command"].get("filter", {}).get("a") == 799 for e in entries)
    info = next(db.list_collections(filter={"name": "system.profile"}))
    assert info["options"] == {"capped": True, "size": 1 << 20}


def test_log_lines_are_mongods_json_without_colour(tmp_path):
    logpath = tmp_path / "hg.log"
    port = _free_port()
    proc = subprocess.Popen(
        [str(_binary()), "--dbpath", str(tmp_path / "db"), "--port", str(port),
         "--logpath", str(logpath)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        client = MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=20000)
        client.admin.command("ping")
        served = client.admin.command("getLog", "global")["log"]
        client.close()
    finally:
        stop_process(proc)
    lines = logpath.read_text().splitlines()
    assert lines
    for line in lines:
        assert "\x1b[" not in line
        entry = json.loads(line)
        assert list(entry)[:7] == ["t", "s", "c", "id", "ctx", "msg", "attr"], entry
        assert entry["t"]["$date"].endswith("+00:00")
        assert entry["s"] in ("F", "E", "W", "I", "D1", "D2")
        assert isinstance(entry["id"], int)
    listening = [json.loads(l) for l in lines if "Waiting for connections" in l]
    assert listening and listening[0]["c"] == "CONTROL"
    assert listening[0]["attr"]["address"] == f"127.0.0.1:{port}"
    # getLog serves the same lines; the storage engine's chatter stays out at this level.
    assert any("Waiting for connections" in l for l in served)
    assert not [l for l in lines if json.loads(l)["c"] == "STORAGE" and json.loads(l)["s"] == "I"
                and "fjall" in l.lower()]
