"""Helpers shared by the HTTP-listener tests (InfluxDB line protocol, Prometheus remote write,
/metrics): an HTTP-enabled server, typed reads of what landed in the time-series collections,
a hand-made remote-write encoder and a /metrics reader."""

import contextlib
import dataclasses
import functools
import gzip
import re
import socket
import struct
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import pytest
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.raw_bson import RawBSONDocument
from pymongo import MongoClient

from conftest import _binary, _free_port, running_server

HOST = "127.0.0.1"
# 2026-01-01T00:00:00Z
T0_S = 1767225600
T0_MS = T0_S * 1000
T0_NS = T0_S * 1_000_000_000

# Dates come back as milliseconds since the epoch (no datetime rounding or time zones).
MS_CODEC = CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS)
RAW_CODEC = CodecOptions(document_class=RawBSONDocument)


@functools.lru_cache(maxsize=1)
def http_supported() -> bool:
    out = subprocess.run([str(_binary()), "--help"], capture_output=True, text=True, timeout=30)
    return "--httpPort" in out.stdout + out.stderr


def wait_for_port(port: int, proc, seconds: float = 20):
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            pytest.fail(f"hourglass exited ({proc.returncode}) before its HTTP port answered")
        try:
            with socket.create_connection((HOST, port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"the HTTP port {port} did not accept connections within {seconds} s")
            time.sleep(0.05)


@dataclasses.dataclass
class HttpServer:
    proc: subprocess.Popen
    mongo_port: int
    http_port: int
    log_path: Path
    _client: MongoClient = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.http_port}"

    @property
    def mongo(self) -> MongoClient:
        if self._client is None:
            self._client = MongoClient(HOST, self.mongo_port, directConnection=True,
                                       serverSelectionTimeoutMS=5000)
        return self._client

    def close(self):
        if self._client is not None:
            self._client.close()
            self._client = None


@contextlib.contextmanager
def http_running_server(*extra_args, dbpath=None):
    """running_server with `--httpPort <free port>`; yields an HttpServer once both ports answer."""
    if not http_supported():
        pytest.fail(f"{_binary()} --help does not list --httpPort (the HTTP listener is not built in)")
    http_port = _free_port()
    with running_server("--httpPort", str(http_port), *extra_args, dbpath=dbpath) as (proc, port, log):
        wait_for_port(http_port, proc)
        srv = HttpServer(proc, port, http_port, log)
        try:
            yield srv
        finally:
            srv.close()


# ---- InfluxDB writes ------------------------------------------------------------------------

def post_lines(srv: HttpServer, body, *, db=None, api="v1", precision=None, gzipped=False,
               extra_params=None, headers=None):
    """POSTs line protocol to /write (api="v1", db=...) or /api/v2/write (api="v2", bucket=db);
    returns the requests.Response."""
    import requests

    if isinstance(body, str):
        body = body.encode()
    params = {}
    if api == "v1":
        path = "/write"
        if db is not None:
            params["db"] = db
    else:
        path = "/api/v2/write"
        params["org"] = "o"
        if db is not None:
            params["bucket"] = db
    if precision is not None:
        params["precision"] = precision
    params.update(extra_params or {})
    hdrs = {"Content-Type": "text/plain; charset=utf-8"}
    if api == "v2":
        hdrs["Authorization"] = "Token x"
    if gzipped:
        body = gzip.compress(body)
        hdrs["Content-Encoding"] = "gzip"
    hdrs.update(headers or {})
    return requests.post(srv.url + path, params=params, data=body, headers=hdrs, timeout=30)


def create_database(srv: HttpServer, name: str):
    import requests

    r = requests.post(srv.url + "/query", params={"q": f'CREATE DATABASE "{name}"'}, timeout=30)
    assert r.status_code == 200, (r.status_code, r.text)
    return r


@contextlib.contextmanager
def per_test_database(srv: HttpServer, request, prefix: str, width: int, create: bool):
    """A database named after the test (`prefix` + up to `width` characters of its name),
    dropped before and after; made with CREATE DATABASE when `create`."""
    name = prefix + re.sub(r"[^A-Za-z0-9]", "_", request.node.name)[:width]
    srv.mongo.drop_database(name)
    if create:
        create_database(srv, name)
    try:
        yield name
    finally:
        srv.mongo.drop_database(name)


def fetch(srv: HttpServer, db: str, coll: str, filt=None, sort=("time", 1)):
    """The documents of db.coll, time as DatetimeMS, in time order (ties in insertion order
    are not guaranteed, so callers sort further where needed)."""
    c = srv.mongo[db].get_collection(coll, codec_options=MS_CODEC)
    return list(c.find(filt or {}).sort([sort]))


def typed(doc: dict) -> dict:
    """doc without _id, each value paired with its type, dates as ("date", ms) and Decimal128 as
    (Decimal128, Decimal) so that 9.2E+18 and 9200000000000000000 compare equal. `ns` (the
    sub-millisecond remainder; the spec says "an int field") may be an int32 or an int64."""
    out = {}
    for k, v in doc.items():
        if k == "_id":
            continue
        if k == "ns" and type(v) in (int, Int64):
            out[k] = (int, int(v))
        elif isinstance(v, DatetimeMS):
            out[k] = ("date", int(v))
        elif isinstance(v, Decimal128):
            out[k] = (Decimal128, v.to_decimal())
        else:
            out[k] = (type(v), v)
    return out


def expect(**fields) -> dict:
    """The `typed` form of an expected document; pass time=ms (an int) for the date."""
    out = {}
    for k, v in fields.items():
        if k == "time":
            out[k] = ("date", v)
        elif k == "ns":
            out[k] = (int, int(v))
        elif isinstance(v, Decimal):
            out[k] = (Decimal128, v)
        else:
            out[k] = (type(v), v)
    return out


def collection_options(srv: HttpServer, db: str, coll: str) -> dict:
    infos = {c["name"]: c for c in srv.mongo[db].list_collections()}
    assert coll in infos, f"{db}.{coll} not in {sorted(infos)}"
    return infos[coll]


# ---- raw BSON -------------------------------------------------------------------------------

_FIXED = {0x01: 8, 0x07: 12, 0x08: 1, 0x09: 8, 0x0A: 0, 0x10: 4, 0x11: 8, 0x12: 8, 0x13: 16,
          0x7F: 0, 0xFF: 0}


def raw_element(raw: bytes, name: str):
    """(type byte, value bytes) of the top-level element `name` of a BSON document, untouched
    (for NaN payloads, which must not go through a float conversion)."""
    pos = 4
    end = struct.unpack_from("<i", raw, 0)[0] - 1
    while pos < end:
        etype = raw[pos]
        nul = raw.index(b"\x00", pos + 1)
        key = raw[pos + 1:nul].decode()
        pos = nul + 1
        if etype in _FIXED:
            size = _FIXED[etype]
        elif etype in (0x02, 0x0D, 0x0E):
            size = 4 + struct.unpack_from("<i", raw, pos)[0]
        elif etype in (0x03, 0x04, 0x0F):
            size = struct.unpack_from("<i", raw, pos)[0]
        elif etype == 0x05:
            size = 5 + struct.unpack_from("<i", raw, pos)[0]
        elif etype == 0x0B:
            a = raw.index(b"\x00", pos)
            size = raw.index(b"\x00", a + 1) + 1 - pos
        else:
            raise ValueError(f"BSON type {etype:#x} not handled")
        if key == name:
            return etype, bytes(raw[pos:pos + size])
        pos += size
    raise KeyError(name)


# ---- Prometheus remote write (hand-encoded protobuf, snappy block format) ---------------------

def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    key = _varint(number << 3 | wire_type)
    if wire_type == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def encode_write_request(series) -> bytes:
    """prometheus.WriteRequest{timeseries: [TimeSeries{labels, samples}]} for
    series = [(labels, [(value, timestamp ms), ...]), ...]; a value may be a float or its
    8 little-endian bytes (for NaN payloads). Labels given as a dict are sent sorted by name, as
    Prometheus does; as a list of (name, value) pairs, as given. A series may have a third
    element: bytes appended to its TimeSeries message (exemplars, histograms: see
    `exemplar_field` and `histogram_field`)."""
    out = b""
    for labels, samples, *extra in series:
        pairs = sorted(labels.items()) if isinstance(labels, dict) else labels
        ts = b""
        for name, value in pairs:
            ts += _field(1, 2, _field(1, 2, name.encode()) + _field(2, 2, value.encode()))
        for value, t_ms in samples:
            vbytes = value if isinstance(value, bytes) else struct.pack("<d", value)
            ts += _field(2, 2, _field(1, 1, vbytes) + _field(2, 0, _varint(t_ms)))
        out += _field(1, 2, ts + b"".join(extra))
    return out


def exemplar_field(trace_id: str, value: float, t_ms: int) -> bytes:
    """TimeSeries.exemplars (field 3): Exemplar{labels: [trace_id], value, timestamp}."""
    label = _field(1, 2, b"trace_id") + _field(2, 2, trace_id.encode())
    return _field(3, 2, _field(1, 2, label) + _field(2, 1, struct.pack("<d", value))
                  + _field(3, 0, _varint(t_ms)))


def histogram_field(count: int, t_ms: int) -> bytes:
    """TimeSeries.histograms (field 4): a native Histogram{count_int, timestamp}."""
    return _field(4, 2, _field(1, 0, _varint(count)) + _field(15, 0, _varint(t_ms)))


def snappy_block(data: bytes) -> bytes:
    cramjam = pytest.importorskip("cramjam", reason="cramjam (snappy) is not installed")
    return bytes(cramjam.snappy.compress_raw(data))


def post_remote_write(srv: HttpServer, body: bytes, db=None):
    import requests

    params = {"db": db} if db is not None else {}
    return requests.post(
        srv.url + "/api/v1/write", params=params, data=body, timeout=30,
        headers={"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
                 "X-Prometheus-Remote-Write-Version": "0.1.0"})


# ---- /metrics -------------------------------------------------------------------------------

def get_metrics(srv: HttpServer):
    """(content type, body text) of GET /metrics."""
    import requests

    r = requests.get(srv.url + "/metrics", timeout=30)
    assert r.status_code == 200, (r.status_code, r.text[:500])
    return r.headers.get("Content-Type", ""), r.text


def metric_samples(text: str, content_type: str = "text/plain"):
    """Every sample of an exposition as (name, labels dict, value), parsed by prometheus_client
    (which fails on a malformed exposition): its OpenMetrics parser when the content type says
    so, its text-format parser otherwise."""
    pytest.importorskip("prometheus_client", reason="prometheus-client is not installed")
    if content_type.strip().lower().startswith("application/openmetrics-text"):
        from prometheus_client.openmetrics import parser
    else:
        from prometheus_client import parser
    return [(s.name, dict(s.labels), s.value)
            for family in parser.text_string_to_metric_families(text)
            for s in family.samples]


def metric_value(samples, name, **labels):
    """The value of the one sample `name` whose labels include `labels`; None when absent."""
    found = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items())]
    assert len(found) <= 1, f"{name}{labels} matches {len(found)} samples"
    return found[0] if found else None
