"""Disk full: a server whose dbpath is on a small tmpfs answers 14031 OutOfDiskSpace, keeps
serving reads, accepts a drop on the full disk, resumes writing once space is freed (no
restart), shows nothing of a refused write, and exits 0 on SIGTERM while the disk is
full, with every acknowledged write there after the restart.

Needs root to mount a tmpfs; skipped with the reason printed otherwise.
"""

import datetime
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

from conftest import _binary, _free_port

SIZE_MB = 1024
FREE_MB = 520
CHUNK = "x" * (2 * 1024 * 1024)


@pytest.fixture()
def tmpfs():
    mountpoint = Path(tempfile.mkdtemp(prefix="hourglass-tmpfs-"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(mountpoint)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"SKIP disk-full test: cannot mount a tmpfs ({r.stderr.strip() or r.returncode})")
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        # Most of the file system is taken by a plain file (the operator's, removed later
        # to free space): the server fills the rest, a little more than its 384 MiB
        # reserve, quickly.
        take_all_but(mountpoint, "filler", FREE_MB)
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)
        os.rmdir(mountpoint)


def take_all_but(mountpoint: Path, name: str, free_mb: int):
    """Allocates a plain file so that about `free_mb` MiB stay free."""
    st = os.statvfs(mountpoint)
    free = st.f_bavail * st.f_frsize
    with open(mountpoint / name, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, max(free - free_mb * 1024 * 1024, 4096))


class Server:
    def __init__(self, dbpath: Path):
        self.dbpath = dbpath
        self.port = _free_port()
        self.proc = None

    def start(self):
        self.log = open(self.dbpath.parent / "server.out", "ab")
        self.proc = subprocess.Popen(
            [str(_binary()), "--dbpath", str(self.dbpath), "--port", str(self.port),
             "--bind_ip", "127.0.0.1", "--quiet"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, self.output()
            try:
                MongoClient(port=self.port, serverSelectionTimeoutMS=500).admin.command("ping")
                return
            except Exception:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)

    def output(self):
        return (self.dbpath.parent / "server.out").read_text(errors="replace")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self.log.close()
        return code

    def client(self):
        return MongoClient(port=self.port, serverSelectionTimeoutMS=5000)


def fill_until_full(coll, start):
    """Inserts 2 MiB documents until the server refuses one; returns the ids acknowledged
    and the error."""
    acked = []
    for i in range(start, start + SIZE_MB):
        try:
            coll.insert_one({"_id": i, "pad": CHUNK})
            acked.append(i)
        except (WriteError, OperationFailure) as e:
            return acked, e
    pytest.fail(f"{SIZE_MB} MiB tmpfs never filled up")


def test_full_disk_answers_out_of_disk_space_and_recovers_when_space_is_freed(tmpfs):
    dbpath = tmpfs / "db"
    dbpath.mkdir()
    server = Server(dbpath)
    server.start()
    c = server.client()
    db = c.get_database("full")
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    t0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    db.ts.insert_many([{"t": t0 + datetime.timedelta(seconds=i), "m": "a", "v": i} for i in range(100)])

    acked, err = fill_until_full(db.fill, 0)
    assert err.code == 14031, err.details
    assert err.details.get("codeName") == "OutOfDiskSpace", err.details
    assert len(acked) > 10

    # Nothing of a refused time-series insert is visible; reads keep working.
    with pytest.raises((BulkWriteError, OperationFailure)) as e:
        db.ts.insert_many([{"t": t0 + datetime.timedelta(hours=1, seconds=i), "m": "b", "pad": CHUNK}
                           for i in range(8)])
    codes = {w["code"] for w in e.value.details.get("writeErrors", [])} or {e.value.code}
    assert codes == {14031}, e.value.details
    assert db.ts.count_documents({}) == 100
    assert db.ts.count_documents({"m": "b"}) == 0
    assert db.fill.count_documents({}) == len(acked)
    assert c.admin.command("ping")["ok"] == 1

    # A drop is accepted on the full disk (the engine reclaims the files once its journal
    # no longer refers to them); the operator frees space: writes go on, no restart.
    db.fill.drop()
    assert db.fill.count_documents({}) == 0
    (tmpfs / "filler").unlink()
    db.ts.insert_one({"t": t0 + datetime.timedelta(hours=2), "m": "c", "v": 1})
    db.again.insert_one({"_id": 1})
    assert db.ts.count_documents({}) == 101

    # Full again, then a clean shutdown: exit 0, and everything acknowledged survives.
    take_all_but(tmpfs, "filler2", FREE_MB)
    acked2, err2 = fill_until_full(db.fill2, 0)
    assert err2.code == 14031
    assert server.stop() == 0, server.output()
    server.start()
    c = server.client()
    db = c.get_database("full")
    assert db.ts.count_documents({}) == 101
    assert db.fill2.count_documents({}) == len(acked2)
    assert db.again.count_documents({}) == 1
    db.fill2.drop()
    db.after.insert_one({"ok": True})
    assert server.stop() == 0, server.output()


def test_a_small_database_on_a_disk_with_less_free_than_the_full_reserve_accepts_writes(tmpfs):
    # 1 GiB file system: the full reserve is 384 MiB. With 200 MiB free (a CI machine after
    # a build), a database of a few documents needs far less room for its flushes and
    # compactions and is not refused.
    (tmpfs / "filler").unlink()
    take_all_but(tmpfs, "filler", 200)
    dbpath = tmpfs / "db"
    dbpath.mkdir()
    server = Server(dbpath)
    server.start()
    db = server.client().get_database("small")
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    t0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    db.ts.insert_many([{"t": t0 + datetime.timedelta(seconds=i), "m": i % 3, "v": i} for i in range(1000)])
    db.docs.insert_many([{"_id": i, "s": "x" * 100} for i in range(1000)])
    db.docs.create_index("s")
    db.docs.update_many({}, {"$set": {"y": 1}})
    assert db.ts.count_documents({}) == 1000
    assert db.docs.count_documents({"y": 1}) == 1000

    # It is still refused before it would eat the room its own maintenance needs.
    acked, err = fill_until_full(db.fill, 0)
    assert err.code == 14031, err.details
    assert len(acked) > 10
    st = os.statvfs(tmpfs)
    assert st.f_bavail * st.f_frsize > 64 * 1024 * 1024, (st.f_bavail * st.f_frsize, len(acked))
    assert server.stop() == 0, server.output()
