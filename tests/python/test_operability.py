"""mongod's command line and config file, and the answers a standalone gives to replica-set
requests, through pymongo: `--config` YAML (net, storage, systemLog, setParameter), options
given on the command line winning over the file, unknown options refused by name, `-v`,
`--bind_ip_all`; `replSetGetStatus` 76, change streams 40573, the lowercase `dbstats` /
`collstats`, IDL error names, `validate` of a time-series collection, partial TTL indexes on
one, `--fork` and `--pidfilepath`."""

import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import _binary, _free_port, running_server, stop_process


def start(args, cwd):
    proc = subprocess.Popen([str(_binary()), *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return proc


def wait_port(proc, port, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stdout.read().decode(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("server did not listen")


def test_config_file_sets_port_dbpath_parameters_and_http_port():
    with tempfile.TemporaryDirectory(prefix="hourglass-config-") as tmp:
        port, http = _free_port(), _free_port()
        cfg = Path(tmp) / "mongod.conf"
        cfg.write_text(
            f"net:\n  port: {port}\n  bindIp: 127.0.0.1\n  http:\n    port: {http}\n"
            f"storage:\n  dbPath: {tmp}/db\n"
            f"systemLog:\n  destination: file\n  path: {tmp}/server.log\n  verbosity: 1\n"
            "setParameter:\n  ttlMonitorSleepSecs: 7\n")
        proc = start(["--config", str(cfg)], tmp)
        try:
            wait_port(proc, port)
            c = MongoClient(port=port, directConnection=True)
            assert c.admin.command("getParameter", 1, ttlMonitorSleepSecs=1)["ttlMonitorSleepSecs"] == 7
            parsed = c.admin.command("getCmdLineOpts")["parsed"]
            assert parsed["net"]["port"] == port
            assert parsed["net"]["http"]["port"] == http
            assert parsed["storage"]["dbPath"] == f"{tmp}/db"
            c.t.c.insert_one({"x": 1})
            c.close()
            with socket.create_connection(("127.0.0.1", http), timeout=5) as s:
                s.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
                assert s.recv(100).startswith(b"HTTP/1.1 204")
            assert (Path(tmp) / "db").is_dir()
            assert (Path(tmp) / "server.log").stat().st_size > 0
        finally:
            stop_process(proc)


def test_command_line_options_win_over_the_config_file():
    with tempfile.TemporaryDirectory(prefix="hourglass-config-") as tmp:
        file_port, cli_port = _free_port(), _free_port()
        cfg = Path(tmp) / "mongod.conf"
        cfg.write_text(f"net:\n  port: {file_port}\nstorage:\n  dbPath: {tmp}/db\n")
        proc = start(["-f", str(cfg), "--port", str(cli_port), "--quiet"], tmp)
        try:
            wait_port(proc, cli_port)
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", file_port), timeout=0.5)
        finally:
            stop_process(proc)


def test_the_block_cache_size_is_set_in_gb_by_file_or_command_line_and_range_checked():
    with tempfile.TemporaryDirectory(prefix="hourglass-cache-") as tmp:
        port = _free_port()
        cfg = Path(tmp) / "mongod.conf"
        cfg.write_text(f"storage:\n  dbPath: {tmp}/db\n  wiredTiger:\n    engineConfig:\n"
                       "      cacheSizeGB: 0.5\n")
        proc = start(["--config", str(cfg), "--port", str(port), "--quiet"], tmp)
        try:
            wait_port(proc, port)
            c = MongoClient(port=port, directConnection=True)
            parsed = c.admin.command("getCmdLineOpts")["parsed"]
            assert parsed["storage"]["wiredTiger"]["engineConfig"]["cacheSizeGB"] == 0.5
            c.t.c.insert_many([{"i": i} for i in range(100)])
            assert c.t.c.count_documents({}) == 100
            c.close()
        finally:
            stop_process(proc)
        for gb in ["0.1", "20000"]:
            proc = start(["--dbpath", f"{tmp}/db2", "--port", str(_free_port()),
                          "--wiredTigerCacheSizeGB", gb], tmp)
            out, _ = proc.communicate(timeout=20)
            assert proc.returncode != 0
            assert "cacheSizeGB must be between 0.25 and 10000" in out.decode(errors="replace")


@pytest.mark.parametrize("text, named", [
    ("net:\n  prot: 1\n", "net.prot"),
    ("security:\n  authorization: maybe\n", "security.authorization"),
    ("net:\n  tls:\n    mode: requireTLS\n", "net.tls.mode"),
    ("processManagement:\n  fork: maybe\n", "processManagement.fork"),
])
def test_unknown_or_unsupported_config_options_stop_the_start_naming_them(text, named):
    with tempfile.TemporaryDirectory(prefix="hourglass-config-") as tmp:
        cfg = Path(tmp) / "mongod.conf"
        cfg.write_text(f"storage:\n  dbPath: {tmp}/db\n" + text)
        proc = start(["--config", str(cfg)], tmp)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode != 0
        assert named in out.decode(errors="replace")


def test_verbosity_and_bind_ip_all_are_accepted():
    with tempfile.TemporaryDirectory(prefix="hourglass-flags-") as tmp:
        port = _free_port()
        proc = start(["--dbpath", f"{tmp}/db", "--port", str(port), "--bind_ip_all", "-vv"], tmp)
        try:
            wait_port(proc, port)
            c = MongoClient(port=port, directConnection=True)
            assert c.admin.command("getCmdLineOpts")["parsed"]["net"]["bindIp"] == "0.0.0.0"
            c.close()
        finally:
            stop_process(proc)


def test_replica_set_commands_answer_no_replication_enabled(client):
    for cmd in ("replSetGetStatus", "replSetGetConfig", "replSetStepDown"):
        with pytest.raises(OperationFailure) as e:
            client.admin.command(cmd)
        assert e.value.code == 76, cmd
        assert e.value.details["codeName"] == "NoReplicationEnabled"


def test_change_streams_are_refused_as_on_a_standalone(db):
    db.c.insert_one({})
    with pytest.raises(OperationFailure) as e:
        with db.c.watch():
            pass
    assert e.value.code == 40573


def test_change_streams_on_the_replica_set_are_refused_as_unsupported_not_as_on_a_standalone():
    from conftest import running_server
    from pymongo import MongoClient
    with running_server("--replSet", "rs0") as (_, port, _):
        c = MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true")
        with pytest.raises(OperationFailure) as e:
            with c.cs.c.watch():
                pass
        assert e.value.code == 115
        assert "keeps no oplog" in e.value.details["errmsg"]
        c.close()


def test_lowercase_dbstats_and_collstats_are_the_same_commands(db):
    db.c.insert_many([{"x": i} for i in range(3)])
    assert db.command("dbstats")["collections"] == db.command("dbStats")["collections"]
    assert db.command("collstats", "c")["count"] == 3


def test_idl_errors_carry_mongodb_code_names(db):
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", nosuchoption=1)
    assert (e.value.code, e.value.details["codeName"]) == (40415, "IDLUnknownField")
    # A statement missing a required field fails the whole command, as MongoDB's parser
    # fails it, not as a write error.
    with pytest.raises(OperationFailure) as e:
        db.command("update", "c", updates=[{"u": {"$set": {"a": 1}}}])
    assert (e.value.code, e.value.details["codeName"]) == (40414, "IDLFailedToParse")


def test_an_address_in_use_stops_the_start_with_mongods_exit_code_48():
    with tempfile.TemporaryDirectory(prefix="hourglass-busy-") as tmp:
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        try:
            proc = start(["--dbpath", f"{tmp}/db", "--port", str(port), "--bind_ip", "127.0.0.1"], tmp)
            out, _ = proc.communicate(timeout=20)
            assert proc.returncode == 48, out
            assert f"127.0.0.1:{port}" in out.decode(errors="replace")
        finally:
            taken.close()


def test_validate_of_a_time_series_collection_checks_open_and_closed_buckets(db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    t0 = 1_700_000_000_000
    docs = [{"t": datetime.fromtimestamp((t0 + i * 1000) / 1000, timezone.utc), "m": i % 3,
             "v": float(i)} for i in range(3500)]
    db.ts.insert_many(docs)
    for name in ("ts", "system.buckets.ts"):
        for full in (False, True):
            r = db.command("validate", name, full=full)
            assert r["valid"] is True and r["errors"] == [] and r["warnings"] == [], r
            assert r["nNonCompliantDocuments"] == 0
            # 3,500 measurements over 3 series: a full bucket (1,000) and an open one each.
            assert r["nrecords"] == db["system.buckets.ts"].count_documents({}) == 6, r
            assert r["ns"] == f"{db.name}.system.buckets.ts"


def test_validate_of_a_missing_collection_or_a_view_is_refused_with_mongodbs_codes(db):
    with pytest.raises(OperationFailure) as e:
        db.command("validate", "nothing")
    assert e.value.code == 26
    db.create_collection("src")
    db.command("create", "v", viewOn="src", pipeline=[])
    with pytest.raises(OperationFailure) as e:
        db.command("validate", "v")
    assert (e.value.code, e.value.details["codeName"]) == (166, "CommandNotSupportedOnView")


def test_partial_ttl_index_on_a_time_series_collection_expires_only_matching_series():
    with running_server("--setParameter", "ttlMonitorSleepSecs=1") as (_, port, _):
        db = MongoClient(port=port, directConnection=True).ttl_partial
        db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m",
                                               "granularity": "seconds"})
        old = datetime.now(timezone.utc) - timedelta(days=3)
        now = datetime.now(timezone.utc)
        db.ts.insert_many([{"t": old, "m": {"kind": k}, "v": 1} for k in ("tmp", "keep")] +
                          [{"t": now, "m": {"kind": "tmp"}, "v": 2}])
        db.ts.create_index("t", expireAfterSeconds=3600,
                           partialFilterExpression={"m.kind": "tmp"})
        deadline = time.monotonic() + 30
        while db.ts.count_documents({}) != 2:
            assert time.monotonic() < deadline, list(db.ts.find({}, {"_id": 0}))
            time.sleep(0.2)
        left = sorted((d["m"]["kind"], d["v"]) for d in db.ts.find())
        # The old "keep" measurement stays: the index's filter does not select its series;
        # the recent "tmp" one is not expired yet.
        assert left == [("keep", 1), ("tmp", 2)]


def _gone(pid, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_fork_returns_once_the_server_listens_and_pidfilepath_names_it():
    with tempfile.TemporaryDirectory(prefix="hourglass-fork-") as tmp:
        port = _free_port()
        pidfile = Path(tmp) / "hg.pid"
        out = subprocess.run(
            [str(_binary()), "--fork", "--dbpath", f"{tmp}/db", "--port", str(port),
             "--logpath", f"{tmp}/hg.log", "--pidfilepath", str(pidfile)],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out
        forked = re.search(r"forked process: (\d+)", out.stdout)
        assert forked and "child process started successfully" in out.stdout, out.stdout
        pid = int(forked.group(1))
        try:
            assert int(pidfile.read_text().strip()) == pid
            # Listening already when the parent returned: no retry loop needed.
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                pass
            c = MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=2000)
            c.f.c.insert_one({"x": 1})
            opts = c.admin.command("getCmdLineOpts")["parsed"]["processManagement"]
            assert opts == {"fork": True, "pidFilePath": str(pidfile)}
            c.close()
        finally:
            os.kill(pid, signal.SIGTERM)
            assert _gone(pid), "the forked server did not stop on SIGTERM"


def test_fork_without_logpath_or_onto_a_busy_port_fails_with_mongods_exit_codes():
    with tempfile.TemporaryDirectory(prefix="hourglass-fork-") as tmp:
        out = subprocess.run([str(_binary()), "--fork", "--dbpath", f"{tmp}/db"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 2 and "--logpath" in out.stderr, out
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        try:
            out = subprocess.run(
                [str(_binary()), "--fork", "--dbpath", f"{tmp}/db", "--logpath", f"{tmp}/l",
                 "--port", str(taken.getsockname()[1])],
                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        finally:
            taken.close()
        assert out.returncode == 48, out
        assert "child process failed, exited with 48" in out.stderr, out


def test_a_dbpath_in_use_stops_the_start_with_one_line_and_mongods_exit_code_100():
    with tempfile.TemporaryDirectory(prefix="hourglass-locked-") as tmp:
        port = _free_port()
        first = start(["--dbpath", f"{tmp}/db", "--port", str(port)], tmp)
        try:
            wait_port(first, port)
            second = subprocess.run(
                [str(_binary()), "--dbpath", f"{tmp}/db", "--port", str(_free_port())],
                capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        finally:
            stop_process(first)
        assert second.returncode == 100, second
        fatal = [l for l in (second.stdout + second.stderr).splitlines() if "DBPathInUse" in l]
        assert len(fatal) == 1 and f"{tmp}/db" in fatal[0], second
