#!/usr/bin/env python3
"""Resource figures of hostile requests, for one or more server binaries side by side.

    bench/hostile_input.py target/release/hourglass [OTHER_BINARY ...]

For each binary, on a fresh dbpath:
  - a 48 MB OP_MSG insert of ~9.6 M empty documents (raw socket): the reply's code, the
    server's peak resident memory (VmHWM) and the worst `ping` latency of a second client
    while the frame is processed;
  - `$group` by a distinct key over 1,000,000 documents: the reply's code and the peak
    resident memory;
  - `$unwind` of one 40,000-element array: median time of 3 runs.
Prints a markdown table, one column per binary. Not a test: figures only.
"""

import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import bson
from pymongo import MongoClient
from pymongo.errors import OperationFailure


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def op_msg_with_sequence(body, name, payload, count_bytes):
    seq = name.encode() + b"\x00" + payload
    sections = b"\x00" + bson.encode(body) + b"\x01" + struct.pack("<i", len(seq) + 4) + seq
    msg = struct.pack("<I", 0) + sections
    return struct.pack("<iiii", 16 + len(msg), 7, 0, 2013) + msg


def read_reply(sock):
    head = b""
    while len(head) < 16:
        chunk = sock.recv(16 - len(head))
        if not chunk:
            return None
        head += chunk
    length = struct.unpack("<i", head[:4])[0]
    rest = b""
    while len(rest) < length - 16:
        chunk = sock.recv(length - 16 - len(rest))
        if not chunk:
            return None
        rest += chunk
    return bson.decode(rest[5:])


def big_frame(port, pid):
    n = (48_000_000 - 200) // 5
    frame = op_msg_with_sequence({"insert": "c", "$db": "hostile"}, "documents", b"\x05\x00\x00\x00\x00" * n, n)
    worst = [0.0]
    done = threading.Event()

    def pinger():
        c = MongoClient(port=port, serverSelectionTimeoutMS=30000)
        c.admin.command("ping")
        while not done.is_set():
            t = time.perf_counter()
            c.admin.command("ping")
            worst[0] = max(worst[0], time.perf_counter() - t)
            time.sleep(0.02)

    th = threading.Thread(target=pinger)
    th.start()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(frame)
        reply = read_reply(s)
    done.set()
    th.join()
    code = reply.get("code", "ok") if reply else "closed"
    return code, vm(pid, "VmHWM"), worst[0]


def group_1m(client, pid):
    coll = client.hostile.g
    batch = [{"k": i} for i in range(10_000)]
    for b in range(100):
        coll.insert_many([{"k": b * 10_000 + d["k"]} for d in batch], ordered=False)
    # Peak memory of the aggregation alone: reset the peak (VmHWM) to the current RSS.
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = vm(pid, "VmRSS")
    try:
        list(coll.aggregate([{"$group": {"_id": "$k", "n": {"$sum": 1}}}, {"$count": "groups"}]))
        code = "ok"
    except OperationFailure as e:
        code = e.code
    return code, before, vm(pid, "VmHWM")


def unwind_40k(client):
    coll = client.hostile.u
    coll.insert_one({"_id": 1, "a": list(range(40_000))})
    times = []
    for _ in range(3):
        t = time.perf_counter()
        list(coll.aggregate([{"$unwind": "$a"}, {"$count": "n"}]))
        times.append(time.perf_counter() - t)
    return sorted(times)[1]


class Server:
    """One server process on a fresh dbpath."""

    def __init__(self, binary):
        self.tmp = tempfile.TemporaryDirectory(prefix="hourglass-hostile-")
        self.port = free_port()
        self.proc = subprocess.Popen([binary, "--dbpath", self.tmp.name, "--port", str(self.port), "--quiet"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = MongoClient(port=self.port, serverSelectionTimeoutMS=30000)
        self.client.admin.command("ping")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
        self.tmp.cleanup()


def measure(binary):
    out = {}
    with Server(binary) as s:
        code, rss, ping = big_frame(s.port, s.proc.pid)
        out["48 MB frame of empty documents: reply code"] = code if s.proc.poll() is None else "server died"
        out["48 MB frame: peak RSS (MiB)"] = f"{rss / 2**20:.0f}"
        out["48 MB frame: worst ping of another client (ms)"] = f"{ping * 1000:.0f}"
    with Server(binary) as s:
        out["$unwind of 40,000 elements: median (ms)"] = f"{unwind_40k(s.client) * 1000:.0f}"
    with Server(binary) as s:
        code, before, peak = group_1m(s.client, s.proc.pid)
        out["$group of 1,000,000 keys: reply code"] = code
        out["$group of 1,000,000 keys: RSS before, peak during (MiB)"] = f"{before / 2**20:.0f}, {peak / 2**20:.0f}"
    return out


def main():
    binaries = sys.argv[1:] or ["target/release/hourglass"]
    results = [measure(b) for b in binaries]
    print("| figure | " + " | ".join(binaries) + " |")
    print("|---|" + "---|" * len(binaries))
    for key in results[0]:
        print(f"| {key} | " + " | ".join(str(r[key]) for r in results) + " |")


if __name__ == "__main__":
    main()
