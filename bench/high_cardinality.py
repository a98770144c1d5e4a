"""High-cardinality ingest (issue #14, not a test): SERIES series x PER measurements each,
inserted in time order across series (every series gets its measurement for t before any
gets t+1), against the same number of measurements over 100 series, in one run.

Prints rows/s of both, their ratio, the server's peak RSS and serverStatus
bucketCatalog.memoryUsage at the end of each load, beside the bucket catalog's memory
threshold. Loads with target/release/ingest (2 clients, raw batches of 10,000).

Usage: python3 bench/high_cardinality.py [--series 100000] [--per 100] [--clients 2]
"""

import argparse
import datetime as dt
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bson
from pymongo import MongoClient

ROOT = Path(__file__).resolve().parents[1]
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def write_stream(path, series, per):
    """Measurements {time, tags: {hostname}, v} (the shape `ingest` loads and partitions
    by), time-major: all series at t, then t + 10 s."""
    with open(path, "wb") as f:
        for i in range(per):
            t = T0 + dt.timedelta(seconds=10 * i)
            for s in range(series):
                f.write(bson.encode({"time": t, "tags": {"hostname": f"s{s}"}, "v": float(i % 97)}))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def threshold_mib(value):
    """The bucket catalog's memory threshold by MongoDB's rule for
    timeseriesIdleBucketExpiryMemoryUsageThreshold: 0 or less is 5% of the machine's
    memory, 1 to 100 that percentage, more a number of bytes."""
    kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal:"))
    memory = max(kib * 1024, 1 << 30)
    value = int(value or 0)
    if value <= 0:
        return memory / 20 / 2**20
    if value <= 100:
        return memory / 100 * value / 2**20
    return value / 2**20


def load(stream, clients, label):
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="hourglass-hc-") as tmp:
        server = subprocess.Popen(
            [str(ROOT / "target/release/hourglass"), "--dbpath", tmp, "--port", str(port),
             "--bind_ip", "127.0.0.1", "--quiet"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        sys.exit("server did not start")
                    time.sleep(0.05)
            client = MongoClient(port=port, directConnection=True)
            out = subprocess.run(
                [str(ROOT / "target/release/ingest"), str(stream), "--clients", str(clients),
                 "--uri", f"mongodb://127.0.0.1:{port}"],
                check=True, capture_output=True, text=True,
            ).stdout
            rps = int(re.search(r"rows_per_s=(\d+)", out).group(1))
            status = client.admin.command("serverStatus")
            catalog = status.get("bucketCatalog", {})
            threshold = client.admin.command(
                "getParameter", 1, timeseriesIdleBucketExpiryMemoryUsageThreshold=1
            ).get("timeseriesIdleBucketExpiryMemoryUsageThreshold")
            rss = peak_rss_mib(server.pid)
            print(f"{label}: {rps} rows/s, peak RSS {rss:.0f} MiB, "
                  f"bucketCatalog.memoryUsage {catalog.get('memoryUsage', 0) / 2**20:.1f} MiB, "
                  f"open buckets {catalog.get('numOpenBuckets')}, "
                  f"threshold {threshold_mib(threshold):.0f} MiB (parameter {threshold})",
                  flush=True)
            return rps
        finally:
            server.terminate()
            server.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=100_000)
    ap.add_argument("--per", type=int, default=100)
    ap.add_argument("--clients", type=int, default=2)
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-p", "hourglass-server", "-p", "hourglass-bench"],
                   cwd=ROOT, check=True)
    total = a.series * a.per
    with tempfile.TemporaryDirectory(prefix="hourglass-hc-data-") as tmp:
        many, few = Path(tmp) / "many.bson", Path(tmp) / "few.bson"
        write_stream(many, a.series, a.per)
        write_stream(few, 100, total // 100)
        base = load(few, a.clients, f"100 series x {total // 100}")
        high = load(many, a.clients, f"{a.series} series x {a.per}")
    print(f"| series | rows/s |\n|---|---|\n| 100 | {base} |\n| {a.series} | {high} |")
    print(f"ratio (100 series / {a.series} series): {base / high:.2f}x (target: at most 2x)")


if __name__ == "__main__":
    main()
