"""Hostile input: deep nesting, huge keys and frames, slow clients, runaway pipelines.

Runs its OWN server (module scope) with 4 MiB thread stacks (a quarter of the default:
the depth limits must fit it with room to spare, and unbounded recursion crashes it),
--maxConns 40 and a 1 s frame read timeout. After every test the server
must still be running and answer a ping from a brand-new client within 1 s.

Inputs a driver would refuse to send (deep documents, oversized batches and frames) go
over raw sockets as hand-built OP_MSG frames with hand-built BSON.
"""

import datetime
import socket
import struct
import threading
import time

import bson
import pytest
from pymongo import MongoClient
from pymongo.errors import DuplicateKeyError, OperationFailure

from conftest import running_server

OP_MSG = 2013
MAX_CONNS = 40
MB = 1024 * 1024
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


# ---- server ------------------------------------------------------------------------------


class Server:
    def __init__(self, proc, host, port, log_path):
        self.proc = proc
        self.host = host
        self.port = port
        self.log_path = log_path

    def log_tail(self, n=4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS line")

    def new_client(self, **kw) -> MongoClient:
        kw.setdefault("serverSelectionTimeoutMS", 5000)
        return MongoClient(self.host, self.port, directConnection=True, **kw)


@pytest.fixture(scope="module")
def server():
    with running_server("--threadStackKiB", "4096", "--maxConns", str(MAX_CONNS),
                        "--setParameter", "frameReadTimeoutMillis=1000") as (proc, port, log_path):
        yield Server(proc, "127.0.0.1", port, log_path)


@pytest.fixture(scope="module")
def client(server):
    c = server.new_client()
    yield c
    c.close()


def assert_server_alive(server: Server):
    """The process runs and a NEW client answers ping within 1 s."""
    assert server.proc.poll() is None, (
        f"server exited with {server.proc.returncode}; log tail:\n{server.log_tail()}"
    )
    c = MongoClient(server.host, server.port, directConnection=True,
                    serverSelectionTimeoutMS=1000, connectTimeoutMS=1000, socketTimeoutMS=2000)
    try:
        start = time.monotonic()
        reply = c.admin.command("ping")
        elapsed = time.monotonic() - start
    finally:
        c.close()
    assert reply["ok"] == 1.0
    assert elapsed < 1.0, f"ping from a new client took {elapsed:.2f} s"


@pytest.fixture(autouse=True)
def _server_survives(server):
    if server.proc.poll() is not None:
        pytest.fail(f"server died in an earlier test (exit {server.proc.returncode}); "
                    f"log tail:\n{server.log_tail()}")
    yield
    assert_server_alive(server)


@pytest.fixture
def db(client, request):
    name = "hi_" + request.node.name[5:45]
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)


def timed_ping(c: MongoClient) -> float:
    start = time.monotonic()
    assert c.admin.command("ping")["ok"] == 1.0
    return time.monotonic() - start


# ---- raw BSON ----------------------------------------------------------------------------


def bdoc(elements: bytes) -> bytes:
    return struct.pack("<i", len(elements) + 5) + elements + b"\x00"


EMPTY_DOC = bdoc(b"")


def cstr(name: str) -> bytes:
    return name.encode() + b"\x00"


def e_doc(name: str, raw: bytes) -> bytes:
    return b"\x03" + cstr(name) + raw


def e_arr(name: str, raw: bytes) -> bytes:
    return b"\x04" + cstr(name) + raw


def e_str(name: str, s: str) -> bytes:
    b = s.encode()
    return b"\x02" + cstr(name) + struct.pack("<i", len(b) + 1) + b + b"\x00"


def e_int(name: str, i: int) -> bytes:
    return b"\x10" + cstr(name) + struct.pack("<i", i)


def nested_a(levels: int) -> bytes:
    """{a: {a: ... {}}} with `levels` documents in all, built without recursion."""
    raw = EMPTY_DOC
    for _ in range(levels - 1):
        raw = bdoc(e_doc("a", raw))
    return raw


def nested_and(depth: int) -> bytes:
    """{$and: [{$and: [ ... {$and: [{}]} ]}]} with `depth` $and operators."""
    raw = EMPTY_DOC
    for _ in range(depth):
        raw = bdoc(e_arr("$and", bdoc(e_doc("0", raw))))
    return raw


def nested_dict(levels: int) -> dict:
    """{a: {a: ... {v: 1}}} with `levels` dicts in all, built iteratively."""
    d = {"v": 1}
    for _ in range(levels - 1):
        d = {"a": d}
    return d


# ---- raw OP_MSG --------------------------------------------------------------------------

_request_ids = iter(range(1, 1 << 30))


def section0(body: bytes) -> bytes:
    return b"\x00" + body


def section1(name: str, docs: bytes) -> bytes:
    payload = cstr(name) + docs
    return b"\x01" + struct.pack("<i", len(payload) + 4) + payload


def op_msg(*sections: bytes, flags: int = 0) -> bytes:
    body = struct.pack("<I", flags) + b"".join(sections)
    return struct.pack("<iiii", 16 + len(body), next(_request_ids), 0, OP_MSG) + body


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def recv_reply(sock: socket.socket) -> dict:
    length, _req, _to, opcode = struct.unpack("<iiii", recv_exact(sock, 16))
    rest = recv_exact(sock, length - 16)
    assert opcode == OP_MSG, f"reply opcode {opcode}"
    assert rest[4] == 0, "reply's first section is not kind 0"
    return bson.decode(rest[5:])


def raw_connect(server: Server, timeout: float = 60.0) -> socket.socket:
    return socket.create_connection((server.host, server.port), timeout=timeout)


def raw_command(sock: socket.socket, body: bytes, *sequences: bytes) -> dict:
    sock.sendall(op_msg(section0(body), *sequences))
    return recv_reply(sock)


def wait_closed_by_server(sock: socket.socket, deadline: float) -> bool:
    """True when the server closes `sock` (EOF or reset) before `deadline`."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        if not data:
            return True


def assert_code(exc_info, code: int, code_name: str = None):
    e = exc_info.value
    assert e.code == code, f"expected code {code}, got {e.code}: {e.details}"
    if code_name is not None:
        assert e.details.get("codeName") == code_name, e.details


def assert_reply_code(reply: dict, code: int, code_name: str = None):
    assert reply.get("ok") == 0, reply
    assert reply.get("code") == code, reply
    if code_name is not None:
        assert reply.get("codeName") == code_name, reply


class RssSampler:
    """Samples the server's VmRSS in the background; `peak` is the largest seen."""

    def __init__(self, server: Server, every: float = 0.05):
        self.server, self.every = server, every
        self.peak = server.rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.server.rss_bytes())
            except (OSError, AssertionError):
                return
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.server.rss_bytes())


def find_ops(client: MongoClient, coll_name: str) -> list:
    inprog = client.admin.command("currentOp")["inprog"]
    return [op for op in inprog if op.get("command", {}).get("aggregate") == coll_name]


def kill_leftovers(client: MongoClient, coll_name: str):
    for op in find_ops(client, coll_name):
        client.admin.command("killOp", op=op["opid"])


# Runs ~30 s uninterrupted on a debug build (200 rounds of 100,000 documents through
# $unwind into one group: 20 million documents) while holding ~150 MB at most. A single
# $range of 3,000,000 is over $range's 64 MB limit (146), and nesting two $unwinds makes
# the stage-at-a-time engine hold every intermediate document (~1.8 GB for 16 M).
LONG_PIPELINE = [
    {"$project": {"r": {"$range": [0, 100_000]}}},
    {"$unwind": "$r"},
    {"$group": {"_id": None, "c": {"$sum": 1}}},
] * 200

MOD_PIPELINE = [
    {"$project": {"r": {"$range": [0, 400000]}}},
    {"$unwind": "$r"},
    {"$group": {"_id": {"$mod": ["$r", 100000]}, "c": {"$sum": 1}}},
]


# ---- 1. deeply nested frame --------------------------------------------------------------


def test_deeply_nested_frame_gets_overflow_error_and_server_stays_up(server):
    body = bdoc(e_int("ping", 1) + e_str("$db", "admin") + e_doc("x", nested_a(992)))
    assert 7_500 < len(body) < 8_500
    with raw_connect(server) as sock:
        reply = raw_command(sock, body)
        assert_reply_code(reply, 15, "Overflow")
        again = raw_command(sock, bdoc(e_int("ping", 1) + e_str("$db", "admin")))
        assert again.get("ok") == 1.0, again


# ---- 2. deeply nested $and ---------------------------------------------------------------


def test_deeply_nested_and_filter_gets_overflow_error(server, db):
    db.c.insert_one({"_id": 1, "x": 1})
    body = bdoc(e_str("find", "c") + e_doc("filter", nested_and(591)) + e_str("$db", db.name))
    with raw_connect(server) as sock:
        reply = raw_command(sock, body)
    assert_reply_code(reply, 15)

    filt = {"x": 1}
    for _ in range(40):
        filt = {"$and": [filt]}
    assert list(db.c.find(filt)) == [{"_id": 1, "x": 1}]


# ---- 3. long dotted $set path ------------------------------------------------------------


def test_set_on_very_long_dotted_path_gets_overflow_error(db):
    db.c.insert_one({"_id": 1})
    for n in (10_000, 1_000):
        path = ".".join(["a"] * n)
        with pytest.raises(OperationFailure) as e:
            db.c.update_one({"_id": 1}, {"$set": {path: 1}})
        assert_code(e, 15)
    assert db.c.find_one({"_id": 1}) == {"_id": 1}

    path = ".".join(["a"] * 50)
    res = db.c.update_one({"_id": 1}, {"$set": {path: 1}})
    assert res.matched_count == 1 and res.modified_count == 1
    doc = db.c.find_one({"_id": 1})
    assert doc is not None
    node = doc
    for _ in range(50):
        node = node["a"]
    assert node == 1


# ---- 4. deeply nested document insert ----------------------------------------------------


def test_insert_nested_beyond_180_levels_is_overflow_write_error(db):
    deep = nested_dict(190)
    deep["_id"] = "deep"
    with pytest.raises(OperationFailure) as e:
        db.c.insert_one(deep)
    assert_code(e, 15)
    assert "exceeds 180 levels of nesting" in e.value.details.get("errmsg", ""), e.value.details
    assert db.c.find_one({"_id": "deep"}) is None

    ok = nested_dict(170)
    ok["_id"] = "ok"
    db.c.insert_one(ok)
    assert db.c.find_one({"_id": "ok"}) == ok


# ---- 5. time-series with huge meta values ------------------------------------------------


def test_timeseries_with_70kb_meta_keeps_accepting_measurements(db):
    db.create_collection("ts_bigmeta", timeseries={"timeField": "t", "metaField": "m"})
    ts = db.ts_bigmeta
    x = "x" * 70_000
    y = "y" * 70_000
    docs = [{"t": T0 + datetime.timedelta(seconds=i), "m": x, "v": i} for i in range(1001)]
    res = ts.insert_many(docs)
    assert res.acknowledged and len(res.inserted_ids) == 1001
    assert ts.count_documents({}) == 1001
    assert sum(1 for _ in ts.find({"m": x}, {"_id": 1})) == 1001

    more = [{"t": T0 + datetime.timedelta(seconds=1001 + i), "m": x, "v": 1001 + i} for i in range(10)]
    res = ts.insert_many(more)
    assert len(res.inserted_ids) == 10
    assert ts.count_documents({}) == 1011

    others = [{"t": T0 + datetime.timedelta(seconds=i), "m": y, "v": i} for i in range(7)]
    ts.insert_many(others)
    assert ts.count_documents({"m": x}) == 1011
    assert ts.count_documents({"m": y}) == 7
    assert ts.count_documents({}) == 1018
    assert sorted(d["v"] for d in ts.find({"m": y}, {"_id": 0, "v": 1})) == list(range(7))


# ---- 6. huge _id and indexed values ------------------------------------------------------


def test_huge_id_and_huge_indexed_strings_work(db):
    big_id = "k" * 70_000
    db.c.insert_one({"_id": big_id, "v": 1})
    assert db.c.find_one({"_id": big_id}) == {"_id": big_id, "v": 1}
    with pytest.raises(DuplicateKeyError) as e:
        db.c.insert_one({"_id": big_id, "v": 2})
    assert_code(e, 11000)

    db.s.create_index("s")
    s1 = "a" * 1_000_000 + "1"
    s2 = "a" * 1_000_000 + "2"
    db.s.insert_many([{"_id": 1, "s": s1}, {"_id": 2, "s": s2}, {"_id": 3, "s": "b"}])
    assert [d["_id"] for d in db.s.find({"s": s2})] == [2]
    assert sorted(d["_id"] for d in db.s.find({"s": {"$gte": s2}})) == [2, 3]
    assert [d["_id"] for d in db.s.find({"s": {"$lt": s2}})] == [1]
    assert [d["_id"] for d in db.s.find({}, {"_id": 1}).sort("s", 1)] == [1, 2, 3]


# ---- 7. 48 MB document sequence of empty documents ---------------------------------------


def test_48mb_sequence_of_empty_documents_is_invalid_length_without_memory_blowup(server, db):
    body = bdoc(e_str("insert", "c") + e_str("$db", db.name))
    overhead = 16 + 4 + 1 + len(body) + 1 + 4 + len(cstr("documents"))
    n = (48_000_000 - overhead) // 5
    assert n > 9_500_000
    frame = op_msg(section0(body), section1("documents", b"\x05\x00\x00\x00\x00" * n))
    assert len(frame) <= 48_000_000

    result = {}

    def send_big():
        try:
            with raw_connect(server, timeout=120) as sock:
                sock.sendall(frame)
                result["reply"] = recv_reply(sock)
                result["rss_after"] = server.rss_bytes()
        except Exception as exc:  # reported by the main thread
            result["error"] = exc

    other = server.new_client()
    try:
        timed_ping(other)
        latencies = []
        with RssSampler(server) as rss:
            t = threading.Thread(target=send_big, daemon=True)
            t.start()
            while True:
                latencies.append(timed_ping(other))
                if not t.is_alive():
                    break
                time.sleep(0.05)
            t.join(120)
        assert not t.is_alive(), "no reply to the 48 MB frame within 120 s"
    finally:
        other.close()
    assert "error" not in result, result.get("error")
    reply = result["reply"]
    assert_reply_code(reply, 16, "InvalidLength")
    assert "Write batch sizes must be between 1 and 100000" in reply.get("errmsg", ""), reply
    assert result["rss_after"] < 600 * MB, (
        f"VmRSS {result['rss_after'] / MB:.0f} MB after the reply (peak {rss.peak / MB:.0f} MB)"
    )
    assert max(latencies) < 1.0, f"ping latencies while the big frame ran: {latencies}"
    assert db.c.count_documents({}) == 0


# ---- 8. 48 MB body array -----------------------------------------------------------------


def test_48mb_body_array_of_empty_documents_is_invalid_length(server, db):
    head = e_str("insert", "c")
    tail = e_str("$db", db.name)
    # frame = header 16 + flags 4 + kind byte 1 + body; body = 4 + head + array elem + tail + 1
    budget = 48_000_000 - (16 + 4 + 1 + 4 + len(head) + len(tail) + 1) - (1 + len(cstr("documents")) + 5)
    parts = []
    size = 0
    i = 0
    while True:
        el = b"\x03" + str(i).encode() + b"\x00\x05\x00\x00\x00\x00"
        if size + len(el) > budget:
            break
        parts.append(el)
        size += len(el)
        i += 1
    assert i > 3_000_000
    array = bdoc(b"".join(parts))
    del parts
    body = bdoc(head + e_arr("documents", array) + tail)
    del array
    frame = op_msg(section0(body))
    del body
    assert 47_000_000 < len(frame) <= 48_000_000
    with raw_connect(server, timeout=120) as sock:
        sock.sendall(frame)
        reply = recv_reply(sock)
    assert_reply_code(reply, 16, "InvalidLength")
    assert db.c.count_documents({}) == 0


# ---- 9. slowloris ------------------------------------------------------------------------


def test_slowloris_frames_are_closed_after_frame_read_timeout(server, client):
    rss_before = server.rss_bytes()
    socks = []
    try:
        with RssSampler(server) as rss:
            for _ in range(20):
                s = raw_connect(server, timeout=5)
                s.sendall(struct.pack("<iiii", 48_000_000, next(_request_ids), 0, OP_MSG) + b"\x00" * 100)
                socks.append(s)
            sent = time.monotonic()
            stall_ping = timed_ping(client)
            fresh = server.new_client(serverSelectionTimeoutMS=1000)
            try:
                fresh_ping = timed_ping(fresh)
            finally:
                fresh.close()
            deadline = sent + 5.0
            still_open = [i for i, s in enumerate(socks) if not wait_closed_by_server(s, deadline)]
        assert still_open == [], f"sockets not closed by the server within 5 s: {still_open}"
        assert stall_ping < 1.0 and fresh_ping < 1.0, (stall_ping, fresh_ping)
        grew = rss.peak - rss_before
        assert grew < 200 * MB, f"VmRSS grew by {grew / MB:.0f} MB during the stall"
    finally:
        for s in socks:
            s.close()


# ---- 10. $unwind is linear ---------------------------------------------------------------


def test_unwind_of_large_array_is_linear(db):
    db.small.insert_one({"_id": 1, "arr": list(range(10_000))})
    db.big.insert_one({"_id": 1, "arr": list(range(40_000))})
    pipeline = [{"$unwind": "$arr"}, {"$count": "n"}]
    assert list(db.big.aggregate(pipeline)) == [{"n": 40_000}]
    assert list(db.small.aggregate(pipeline)) == [{"n": 10_000}]

    def timed(coll):
        start = time.perf_counter()
        list(coll.aggregate(pipeline))
        return time.perf_counter() - start

    # Linear is a ratio of 4, quadratic 16. Runs alternate and the fastest of each size
    # counts, so that other work on the machine weighs on both sizes and not on the ratio.
    small, big = [], []
    for _ in range(7):
        small.append(timed(db.small))
        big.append(timed(db.big))
    t10, t40 = min(small), min(big)
    assert t40 < 8 * t10, f"40k unwind {t40:.3f} s vs 10k {t10:.3f} s (ratio {t40 / t10:.1f})"


# ---- 11. maxTimeMS -----------------------------------------------------------------------


def test_max_time_ms_interrupts_expensive_pipeline(db):
    db.c.insert_one({"_id": 1})
    for attempt in range(3):
        try:
            list(db.c.aggregate(MOD_PIPELINE, maxTimeMS=1))
        except OperationFailure as e:
            assert e.code == 50, e.details
            assert e.details.get("codeName") == "MaxTimeMSExpired", e.details
            break
    else:
        pytest.fail("aggregate with maxTimeMS=1 finished 3 times without MaxTimeMSExpired")

    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate(MOD_PIPELINE, maxTimeMS=-1))
    assert_code(e, 2)

    groups = list(db.c.aggregate(MOD_PIPELINE))
    assert len(groups) == 100_000
    assert all(g["c"] == 4 for g in groups)


# ---- 12. killOp --------------------------------------------------------------------------


def test_kill_op_interrupts_long_aggregation(server, client, db):
    db.longagg.insert_one({"_id": 1})
    result = {}

    def run():
        try:
            result["docs"] = list(db.longagg.aggregate(LONG_PIPELINE))
        except OperationFailure as e:
            result["error"] = e
        except Exception as e:  # reported below
            result["other"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        killer = server.new_client()
        try:
            deadline = time.monotonic() + 10
            ops = []
            while not ops and time.monotonic() < deadline and t.is_alive():
                ops = find_ops(killer, "longagg")
                if not ops:
                    time.sleep(0.05)
            assert ops, f"aggregate never showed in currentOp (thread result: {result})"
            assert len(ops) == 1
            killer.admin.command("killOp", op=ops[0]["opid"])
        finally:
            killer.close()
        t.join(15)
        assert not t.is_alive(), "killed aggregate still running 15 s after killOp"
    finally:
        if t.is_alive():
            kill_leftovers(client, "longagg")
            t.join(60)
    assert "other" not in result, result["other"]
    assert "error" in result, f"aggregate was not interrupted: {result}"
    assert result["error"].code == 11601, result["error"].details
    assert result["error"].details.get("codeName") == "Interrupted", result["error"].details
    assert find_ops(client, "longagg") == []


# ---- 13. client disconnect ---------------------------------------------------------------


def test_client_disconnect_stops_its_running_aggregation(server, client, db):
    db.discagg.insert_one({"_id": 1})
    body = bson.encode({"aggregate": "discagg", "pipeline": LONG_PIPELINE, "cursor": {}, "$db": db.name})
    sock = raw_connect(server)
    try:
        sock.sendall(op_msg(section0(body)))
        sent = time.monotonic()
        deadline = sent + 10
        ops = []
        while not ops and time.monotonic() < deadline:
            ops = find_ops(client, "discagg")
            if not ops:
                time.sleep(0.05)
        assert ops, "aggregate never showed in currentOp while its socket was open"
        time.sleep(max(0.0, sent + 0.3 - time.monotonic()))
        assert find_ops(client, "discagg"), "aggregate finished before the client left"
        sock.close()
        closed = time.monotonic()
        while find_ops(client, "discagg") and time.monotonic() - closed < 10:
            time.sleep(0.1)
        left = find_ops(client, "discagg")
        assert left == [], f"aggregate still running 10 s after its client disconnected: {left}"
    finally:
        sock.close()
        kill_leftovers(client, "discagg")


# ---- 14. maxConns ------------------------------------------------------------------------


def _connections(client: MongoClient) -> dict:
    return client.admin.command("serverStatus")["connections"]


def test_max_conns_closes_extra_connections(server, client):
    socks = []
    try:
        deadline = time.monotonic() + 10
        while True:
            current = _connections(client)["current"]
            if current >= MAX_CONNS:
                time.sleep(0.3)  # let connections closed by earlier tests drain, then re-check
                if _connections(client)["current"] >= MAX_CONNS:
                    break
                continue
            assert time.monotonic() < deadline, f"could not reach {MAX_CONNS} connections"
            for _ in range(MAX_CONNS - current):
                socks.append(raw_connect(server, timeout=5))
            # wait until the server has accepted them
            until = time.monotonic() + 3
            while _connections(client)["current"] < MAX_CONNS and time.monotonic() < until:
                time.sleep(0.05)
        assert _connections(client)["current"] == MAX_CONNS
        rejected_before = _connections(client)["rejected"]

        extra = socket.create_connection((server.host, server.port), timeout=2)
        try:
            assert wait_closed_by_server(extra, time.monotonic() + 2), (
                "connection beyond --maxConns was not closed within 2 s"
            )
        finally:
            extra.close()
        assert timed_ping(client) < 1.0
        conns = _connections(client)
        assert conns["rejected"] >= 1 and conns["rejected"] > rejected_before, conns
    finally:
        for s in socks:
            s.close()
    until = time.monotonic() + 5
    while _connections(client)["current"] > MAX_CONNS - len(socks) and time.monotonic() < until:
        time.sleep(0.05)


# ---- 15. $lookup fan-out -----------------------------------------------------------------


def test_lookup_3000_by_3000_with_limit_stays_in_memory_bounds(server, db):
    db.a.insert_many([{"_id": i, "k": 1} for i in range(3000)])
    db.b.insert_many([{"_id": i, "k": 1, "v": i} for i in range(3000)])
    pipeline = [
        {"$lookup": {"from": "b", "localField": "k", "foreignField": "k", "as": "j"}},
        {"$limit": 1},
    ]
    with RssSampler(server) as rss:
        out = list(db.a.aggregate(pipeline))
    assert len(out) == 1
    assert len(out[0]["j"]) == 3000
    assert sorted(d["v"] for d in out[0]["j"]) == list(range(3000))
    assert rss.peak < 1536 * MB, f"VmRSS peaked at {rss.peak / MB:.0f} MB"


# ---- 16. $group memory limit -------------------------------------------------------------


def test_group_over_memory_limit_spills_by_default_and_fails_with_292_without_disk(client, db):
    db.c.insert_many([{"k": i} for i in range(20_000)])
    client.admin.command({"setParameter": 1, "internalDocumentSourceGroupMaxMemoryBytes": 1_000_000})
    try:
        with pytest.raises(OperationFailure) as e:
            list(db.c.aggregate([{"$group": {"_id": "$k", "n": {"$sum": 1}}}], allowDiskUse=False))
        assert_code(e, 292)
        # MongoDB 7.0 (allowDiskUseByDefault): the groups it cannot hold go to disk.
        out = list(db.c.aggregate([{"$group": {"_id": "$k", "n": {"$sum": 1}}}]))
        assert sorted(d["_id"] for d in out) == list(range(20_000))
        assert all(d["n"] == 1 for d in out)
    finally:
        client.admin.command({"setParameter": 1, "internalDocumentSourceGroupMaxMemoryBytes": 104_857_600})
    assert len(list(db.c.aggregate([{"$group": {"_id": "$k", "n": {"$sum": 1}}}]))) == 20_000


# ---- 17. pipeline length -----------------------------------------------------------------


def test_pipeline_of_1001_stages_is_rejected(db):
    db.c.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$match": {}}] * 1001))
    assert_code(e, 7749501)
    assert list(db.c.aggregate([{"$match": {}}] * 1000)) == [{"_id": 1}]


# ---- 18. filter path length --------------------------------------------------------------


def test_filter_path_of_181_components_is_rejected(db):
    db.c.insert_one({"_id": 1, "a": 1})
    with pytest.raises(OperationFailure) as e:
        list(db.c.find({".".join(["a"] * 181): 1}))
    assert_code(e, 5729100)
    assert list(db.c.find({".".join(["a"] * 180): 1})) == []


# ---- 19. oversized time-series measurement -----------------------------------------------


def test_timeseries_measurement_over_16mb_is_object_too_large(server, db):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    big = bson.encode({"t": T0, "m": "s", "blob": "z" * (17 * MB)})
    body = bdoc(e_str("insert", "ts") + e_str("$db", db.name))
    with raw_connect(server) as sock:
        reply = raw_command(sock, body, section1("documents", big))
    assert reply.get("ok") == 1.0, reply
    assert reply.get("n") == 0, reply
    errors = reply.get("writeErrors", [])
    assert [(w["index"], w["code"]) for w in errors] == [(0, 10334)], reply

    db.ts.insert_one({"t": T0, "m": "s", "v": 1})
    db.ts.insert_many([{"t": T0 + datetime.timedelta(seconds=i), "m": "s", "v": i} for i in range(1, 5)])
    assert db.ts.count_documents({}) == 5
    assert sorted(d["v"] for d in db.ts.find({"m": "s"})) == [1, 1, 2, 3, 4]


# ---- 20. maxWriteBatchSize ---------------------------------------------------------------


def test_insert_of_more_than_100000_documents_is_invalid_length(server, db):
    docs = b"".join(bson.encode({"_id": i}) for i in range(100_001))
    body = bdoc(e_str("insert", "c") + e_str("$db", db.name))
    with raw_connect(server) as sock:
        reply = raw_command(sock, body, section1("documents", docs))
    assert_reply_code(reply, 16, "InvalidLength")
    assert db.c.count_documents({}) == 0

    res = db.c.insert_many([{"_id": i} for i in range(150_000)])
    assert len(res.inserted_ids) == 150_000
    assert db.c.count_documents({}) == 150_000


# ---- 5. bucket catalog memory ------------------------------------------------------------


def test_bucket_memory_threshold_is_one_for_all_collections_and_applies_at_run_time(client, db):
    admin = client.admin
    was = admin.command("getParameter", 1, timeseriesIdleBucketExpiryMemoryUsageThreshold=1)[
        "timeseriesIdleBucketExpiryMemoryUsageThreshold"]
    # Two collections of 300 series, each series ~3 KB open in memory: far over 400 KB.
    threshold = 400_000
    admin.command("setParameter", 1, timeseriesIdleBucketExpiryMemoryUsageThreshold=threshold)
    try:
        for name in ("ts_a", "ts_b"):
            db.create_collection(name, timeseries={"timeField": "t", "metaField": "m"})
            for rnd in range(3):
                db[name].insert_many([
                    {"t": T0 + datetime.timedelta(seconds=rnd), "m": {"host": f"h{i}", "pad": "p" * 200},
                     "v": float(i), "w": i}
                    for i in range(300)
                ])
        # A last insert touching one series: every other open bucket, in both collections,
        # is idle and must go until all of them together fit the one threshold.
        db.ts_b.insert_one({"t": T0, "m": {"host": "solo"}, "v": 0.0})
        status = admin.command("serverStatus")["bucketCatalog"]
        assert status["memoryUsage"] <= threshold, status
        closed = [db.command("collStats", n)["timeseries"]["numBucketsClosedDueToMemoryThreshold"]
                  for n in ("ts_a", "ts_b")]
        assert all(c > 0 for c in closed), closed
        assert db.ts_a.count_documents({}) == 900 and db.ts_b.count_documents({}) == 901
    finally:
        admin.command("setParameter", 1, timeseriesIdleBucketExpiryMemoryUsageThreshold=was)


# ---- 7. oversized results ----------------------------------------------------------------


def test_update_growing_a_document_past_16mb_is_17419(db):
    db.c.insert_one({"_id": 1, "a": "a" * (9 * MB)})
    with pytest.raises(OperationFailure) as e:
        db.c.update_one({"_id": 1}, {"$set": {"b": "b" * (8 * MB)}})
    assert e.value.code == 17419, e.value.details
    assert db.c.find_one({"_id": 1}, {"b": 1}) == {"_id": 1}


def test_aggregation_output_document_over_16mb_is_object_too_large(db):
    db.c.insert_one({"_id": 1, "s": "s" * (9 * MB)})
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$project": {"t": {"$concat": ["$s", "$s"]}}}]))
    assert e.value.code == 10334, e.value.details
    assert e.value.details.get("codeName") == "BSONObjectTooLarge"


def test_max_time_ms_of_a_find_counts_the_time_of_its_get_mores(db):
    db.c.insert_many([{"_id": i} for i in range(3000)])
    # Every document costs a 100,000-element $range to match: a scan of them all takes
    # seconds, far past the limit, while the first batch of 2 comes at once.
    slow = {"$expr": {"$gt": [{"$size": {"$range": [0, 100_000]}}, 0]}}
    cursor = db.c.find(slow).max_time_ms(1500).batch_size(2)
    assert next(cursor)["_id"] == 0
    with pytest.raises(OperationFailure) as e:
        list(cursor)
    assert e.value.code == 50, e.value.details
