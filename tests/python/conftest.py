"""Starts one hourglass server for the whole pytest session."""

import contextlib
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from pymongo import MongoClient

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_node(script, uri, **env):
    """Runs a Node.js driver script (the driver from .tools/node_modules, which
    scripts/test.sh installs) with DRIVER, URI and `env` in its environment; returns the
    JSON its last line prints. Skips, saying why, without node or the driver."""
    import json
    import shutil
    driver = REPO_ROOT / ".tools" / "node_modules" / "mongodb"
    if not driver.exists() or shutil.which("node") is None:
        pytest.skip(f"the Node driver is not installed at {driver} (scripts/test.sh installs it)")
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, DRIVER=str(driver), URI=uri, **env))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


_HANDED_OUT: set = set()


def _free_port() -> int:
    """A port free now that this process has not handed out before: two calls in a row
    (a server's MongoDB and HTTP ports) may otherwise get the same one from the kernel."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def _binary() -> Path:
    path = Path(os.environ.get("HOURGLASS_BIN", "target/debug/hourglass"))
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not path.exists():
        pytest.exit(f"hourglass binary not found at {path} (build it or set HOURGLASS_BIN)", 2)
    return path


def stop_process(proc):
    """SIGTERM, then SIGKILL if the process has not exited within 20 s."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def running_server(*extra_args, dbpath=None, env=None, exit_on_failure=True):
    """Runs one hourglass server on a temporary dbpath (or on `dbpath`, which is kept) and a
    free port; yields (process, port, log path) and stops it (SIGTERM, then SIGKILL after
    20 s) at the end. `env`: variables added to the server's environment. A server that
    does not start ends the pytest session, or only fails the test with
    `exit_on_failure=False` (for tests that restart a server after a crash)."""
    fail = (lambda msg: pytest.exit(msg, 2)) if exit_on_failure else pytest.fail
    tmp = tempfile.TemporaryDirectory(prefix="hourglass-pytest-")
    if dbpath is None:
        dbpath = Path(tmp.name) / "db"
        dbpath.mkdir()
    log_path = Path(tmp.name) / "server.out"
    log = open(log_path, "wb")
    port = _free_port()
    proc = subprocess.Popen(
        [str(_binary()), "--dbpath", str(dbpath), "--port", str(port),
         "--bind_ip", "127.0.0.1", "--quiet", *extra_args],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env=None if env is None else {**os.environ, **env},
    )
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            log.close()
            out = log_path.read_text(errors="replace")
            tmp.cleanup()
            fail(f"hourglass exited during startup ({proc.returncode}):\n{out}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                tmp.cleanup()
                fail("hourglass did not accept connections within 20 s")
            time.sleep(0.05)
    try:
        yield proc, port, log_path
    finally:
        stop_process(proc)
        log.close()
        tmp.cleanup()


@contextlib.contextmanager
def auth_server(*extra_args, user, pwd):
    """`running_server` with `--auth`, whose first user (`user`, root on admin) is created
    through the localhost exception; yields what `running_server` yields."""
    with running_server("--auth", *extra_args) as started:
        port = started[1]
        bootstrap = MongoClient(port=port, directConnection=True, serverSelectionTimeoutMS=5000)
        bootstrap.admin.command("createUser", user, pwd=pwd, roles=[{"role": "root", "db": "admin"}])
        bootstrap.close()
        yield started


@pytest.fixture(scope="session")
def server():
    """Yields (host, port) of a running server with a temporary dbpath."""
    with running_server() as (_, port, _):
        yield ("127.0.0.1", port)


@pytest.fixture(scope="session")
def client(server):
    host, port = server
    c = MongoClient(host, port, directConnection=True, serverSelectionTimeoutMS=5000)
    yield c
    c.close()


@contextlib.contextmanager
def small_buckets_db(client, name, per_bucket=10):
    """A fresh database `name` while time-series buckets close after `per_bucket`
    measurements (a few thousand measurements are then hundreds of buckets)."""
    client.drop_database(name)
    admin = client.admin
    was = admin.command("getParameter", 1, timeseriesBucketMaxCount=1)["timeseriesBucketMaxCount"]
    admin.command("setParameter", 1, timeseriesBucketMaxCount=per_bucket)
    try:
        yield client[name]
    finally:
        admin.command("setParameter", 1, timeseriesBucketMaxCount=was)
        client.drop_database(name)


@pytest.fixture
def db(client, request):
    """A fresh database per test, named after the test."""
    name = "py_" + request.node.name[:50]
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)


@pytest.fixture(scope="session")
def http_server():
    """A server with the HTTP listener on (InfluxDB writes, Prometheus remote write,
    /metrics), shared by the HTTP test files; yields an http_helpers.HttpServer."""
    from http_helpers import http_running_server

    with http_running_server() as srv:
        yield srv


def debian_binary(commands, package, timeout=600):
    """The first of `commands` on PATH, else installed from Debian's `package` with apt-get
    (after an `apt-get update` when the first try fails); skips the test with the reason
    when it cannot be installed."""
    import shutil

    def found():
        return next((shutil.which(c) for c in commands if shutil.which(c)), None)

    if found():
        return found()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")

    def apt(*args):
        try:
            return subprocess.run(["apt-get", *args], capture_output=True, text=True, timeout=timeout, env=env)
        except (OSError, subprocess.TimeoutExpired) as e:
            return subprocess.CompletedProcess(args, 1, "", str(e))

    r = apt("install", "-y", "--no-install-recommends", package)
    if r.returncode != 0:
        apt("update")
        r = apt("install", "-y", "--no-install-recommends", package)
    if r.returncode != 0 or not found():
        reason = f"{package} is not installed and apt-get install failed: {r.stderr.strip()[-400:]}"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    return found()

