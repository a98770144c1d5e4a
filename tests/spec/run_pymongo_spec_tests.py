#!/usr/bin/env python3
"""The MongoDB drivers' specification tests (unified test format), as pymongo's own runner
runs them, against a fresh Hourglass server.

pymongo's source distribution (the same version as the installed pymongo, from PyPI, cached
under .tools/pymongo-src) carries the JSON suites and its runner. This script starts
target/debug/hourglass (or $HOURGLASS_BIN) with test commands enabled (configureFailPoint)
and runs two passes through pytest with DB_IP/DB_PORT:

- the CRUD, collection and index management, sessions, retryable reads and runCommand suites
  against a standalone server (SUITES);
- the transactions suites against a server started with `--replSet` (a one-member replica
  set: the runner runs replica-set tests only there), minus SKIP_REPLICA_SET.

Each pass fails when fewer than MIN_PASS_RATE of the tests that ran (passed + failed +
errors) passed. Tests the runner skips (topologies, server versions, features) do not
count. Prints one line per failing test, the counts per test file, and a closing
'N passed, N failed' line per pass.
"""

import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = ROOT / ".venv" / "bin" / "python"
CACHE = ROOT / ".tools" / "pymongo-src"
MIN_PASS_RATE = 0.95
SUITES = [
    "test/test_crud_unified.py",           # CRUD
    "test/test_collection_management.py",  # collection management (clustered, time-series)
    "test/test_index_management.py",       # index management (Atlas search indexes: skipped)
    "test/test_unified_format.py",         # the unified format's own valid-pass tests
    "test/test_retryable_reads_unified.py",
    "test/test_sessions_unified.py",
    "test/test_run_command.py",
]
REPLICA_SET_SUITES = [
    "test/test_transactions_unified.py",   # transactions, transactions-convenient-api
    "test/test_transactions.py",
]
# What a one-member replica set legitimately cannot do; each entry says why.
SKIP_REPLICA_SET = [
    # A one-member set has no secondary: the driver's server selection for a secondary read
    # preference times out before the command reaches the server.
    "test/test_transactions_unified.py::TestUnifiedReadPref::test_secondary_readPreference",
    "test/test_transactions_unified.py::TestUnifiedRunCommand::test_run_command_fails_with_explicit_secondary_read_preference",
    "test/test_transactions_unified.py::TestUnifiedRunCommand::test_run_command_fails_with_secondary_read_preference_from_transaction_options",
    # MongoDB 8.x ingress backpressure: the driver retries a transaction's first statement,
    # again with startTransaction, after a fail point failed it; 7.0 (and this server)
    # answer that the transaction has already started.
    "test/test_transactions_unified.py::TestUnifiedBackpressureRetryableWrites::test_retry_succeeds_if_backpressure_labels_are_added_to_the_first_operation_in_a_transaction",
]


def skip(reason):
    print(f"pymongo specification tests skipped: {reason}")
    sys.exit(0)


def source_tree():
    version = subprocess.run([str(PY), "-c", "import pymongo; print(pymongo.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    tree = CACHE / f"pymongo-{version}"
    if (tree / "test" / "crud" / "unified").is_dir():
        return tree
    CACHE.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([str(PY), "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                        "--no-binary", ":all:", "--no-deps", "--dest", str(CACHE), f"pymongo=={version}"],
                       capture_output=True, text=True)
    sdist = CACHE / f"pymongo-{version}.tar.gz"
    if r.returncode != 0 or not sdist.exists():
        skip(f"could not download the pymongo {version} source distribution: {r.stderr.strip()[-300:]}")
    with tarfile.open(sdist) as t:
        t.extractall(CACHE, filter="data")
    return tree


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pass(tree, binary, label, suites, extra_args=(), deselect=()):
    """Runs `suites` against a fresh server; returns (passed, failed, skipped) names/count."""
    port = free_port()
    dbpath = tempfile.mkdtemp(prefix="hourglass-spec-")
    log = open(Path(dbpath) / "server.log", "w")
    server = subprocess.Popen([binary, "--dbpath", str(Path(dbpath) / "db"), "--port", str(port),
                               "--bind_ip", "127.0.0.1", "--quiet", "--setParameter", "enableTestCommands=1",
                               *extra_args],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        junit = Path(dbpath) / "results.xml"
        env = dict(os.environ, DB_IP="127.0.0.1", DB_PORT=str(port))
        args = [a for d in deselect for a in ("--deselect", d)]
        subprocess.run([str(PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                        *args, *suites],
                       cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800)
        passed, failed, skipped = [], [], 0
        per_suite = {}
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            # classname "test.test_crud_unified.TestX": counts per test file.
            parts = case.get("classname", "").split(".")
            suite = per_suite.setdefault(parts[1] if len(parts) > 1 else parts[0], [0, 0, 0])
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(name)
                suite[1] += 1
            elif case.find("skipped") is not None:
                skipped += 1
                suite[2] += 1
            else:
                passed.append(name)
                suite[0] += 1
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
        shutil.rmtree(dbpath, ignore_errors=True)
    for name in failed:
        print(f"FAILED {name}")
    for suite, (p, f, k) in sorted(per_suite.items()):
        print(f"  {suite}: {p} passed, {f} failed, {k} skipped by the runner")
    ran = len(passed) + len(failed)
    rate = len(passed) / ran if ran else 0.0
    print(f"pymongo specification tests ({label}): {rate:.1%} of {ran} run passed "
          f"(need {MIN_PASS_RATE:.0%}); {skipped} skipped by the runner")
    print(f"{len(passed)} passed, {len(failed)} failed, {skipped} skipped")
    return ran > 0 and rate >= MIN_PASS_RATE


def main():
    tree = source_tree()
    if subprocess.run([str(PY), "-c", "import pytest_asyncio"], capture_output=True).returncode != 0:
        r = subprocess.run([str(PY), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            "pytest-asyncio"], capture_output=True, text=True)
        if r.returncode != 0:
            skip(f"pytest-asyncio (pymongo's test configuration needs it) could not be installed: {r.stderr[-300:]}")
    binary = os.environ.get("HOURGLASS_BIN", str(ROOT / "target" / "debug" / "hourglass"))
    standalone = run_pass(tree, binary, "standalone", SUITES)
    replica_set = run_pass(tree, binary, "one-member replica set, transactions", REPLICA_SET_SUITES,
                           extra_args=("--replSet", "rs0"), deselect=SKIP_REPLICA_SET)
    sys.exit(0 if standalone and replica_set else 1)


if __name__ == "__main__":
    main()
