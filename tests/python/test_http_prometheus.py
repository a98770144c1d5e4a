"""Prometheus remote write 1.0 into Hourglass: (a) hand-encoded WriteRequests (protobuf by hand,
snappy by cramjam) posted to /api/v1/write, read back from <db>.samples with pymongo, NaN and
stale markers bit-exact; (b) the real Prometheus from Debian scraping Hourglass' /metrics and
remote-writing the samples back into Hourglass."""

import json
import math
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

requests = pytest.importorskip("requests", reason="requests is not installed")

from conftest import _free_port, debian_binary, stop_process  # noqa: E402
from http_helpers import (  # noqa: E402
    _field, _varint, RAW_CODEC, T0_MS, encode_write_request, exemplar_field, expect, fetch,
    histogram_field, http_running_server, per_test_database, post_remote_write, raw_element,
    snappy_block, typed,
)

CANONICAL_NAN = struct.pack("<Q", 0x7FF8000000000000)
STALE_MARKER = struct.pack("<Q", 0x7FF0000000000002)
PAYLOAD_NAN = struct.pack("<Q", 0xFFF0000000000BAD)


@pytest.fixture()
def promdb(http_server, request):
    with per_test_database(http_server, request, "prom_", 40, create=True) as name:
        yield name


def samples_by_time(srv, db, filt=None):
    return fetch(srv, db, "samples", filt)


def test_remote_write_default_database_is_prometheus(http_server):
    http_server.mongo.drop_database("prometheus")
    try:
        body = encode_write_request([({"__name__": "up", "job": "j", "instance": "i:1"},
                                      [(1.0, T0_MS)])])
        r = post_remote_write(http_server, snappy_block(body))
        assert r.status_code == 204, (r.status_code, r.text)
        info = {c["name"]: c for c in http_server.mongo.prometheus.list_collections()}["samples"]
        assert info["type"] == "timeseries"
        ts = info["options"]["timeseries"]
        assert (ts["timeField"], ts["metaField"]) == ("time", "labels")
        assert [typed(d) for d in samples_by_time(http_server, "prometheus")] == [
            expect(time=T0_MS, labels={"__name__": "up", "instance": "i:1", "job": "j"}, value=1.0)]
    finally:
        http_server.mongo.drop_database("prometheus")


def test_remote_write_series_land_with_labels_values_and_times(http_server, promdb):
    series = [
        ({"__name__": "http_requests_total", "job": "api", "instance": "h:1", "code": "200"},
         [(1.0, T0_MS), (2.5, T0_MS + 15_000), (-0.125, T0_MS + 30_000)]),
        ({"__name__": "temperature_celsius", "room": "a b, c=d \"q\""},
         [(21.75, T0_MS + 1), (1e300, T0_MS + 2), (-math.inf, T0_MS + 3), (math.inf, T0_MS + 4)]),
        ({"__name__": "old"}, [(5.0, -1500)]),
    ]
    r = post_remote_write(http_server, snappy_block(encode_write_request(series)), db=promdb)
    assert r.status_code == 204, (r.status_code, r.text)
    assert r.content == b""
    got = sorted((typed(d) for d in samples_by_time(http_server, promdb)),
                 key=lambda d: (d["labels"][1]["__name__"], d["time"][1]))
    want = []
    for labels, samples in series:
        for value, t in samples:
            want.append(expect(time=t, labels=labels, value=value))
    want.sort(key=lambda d: (d["labels"][1]["__name__"], d["time"][1]))
    assert got == want


def test_remote_write_keeps_nan_and_stale_marker_bits(http_server, promdb):
    series = [({"__name__": "gauge_with_gaps", "instance": "x"},
               [(CANONICAL_NAN, T0_MS), (STALE_MARKER, T0_MS + 1), (PAYLOAD_NAN, T0_MS + 2),
                (3.0, T0_MS + 3)])]
    r = post_remote_write(http_server, snappy_block(encode_write_request(series)), db=promdb)
    assert r.status_code == 204, (r.status_code, r.text)
    coll = http_server.mongo[promdb].get_collection("samples", codec_options=RAW_CODEC)
    raws = [d.raw for d in coll.find({}).sort([("time", 1)])]
    assert [raw_element(raw, "value") for raw in raws] == [
        (0x01, CANONICAL_NAN), (0x01, STALE_MARKER), (0x01, PAYLOAD_NAN),
        (0x01, struct.pack("<d", 3.0))]


def encode_metadata(entries) -> bytes:
    """WriteRequest.metadata (field 3): MetricMetadata{type, metric_family_name, help, unit}."""
    out = b""
    for kind, name, help_text, unit in entries:
        m = (_field(1, 0, _varint(kind)) + _field(2, 2, name.encode())
             + _field(4, 2, help_text.encode()) + _field(5, 2, unit.encode()))
        out += _field(3, 2, m)
    return out


def test_remote_write_metadata_is_upserted_by_family_name(http_server, promdb):
    for help_text in ("first help", "second help"):
        body = encode_metadata([(1, "http_requests_total", help_text, ""),
                                (2, "temperature", "degrees", "celsius")])
        r = post_remote_write(http_server, snappy_block(body), db=promdb)
        assert r.status_code == 204, r.text
    docs = list(http_server.mongo[promdb].metadata.find().sort("_id", 1))
    assert docs == [
        {"_id": "http_requests_total", "type": "counter", "help": "second help", "unit": ""},
        {"_id": "temperature", "type": "gauge", "help": "degrees", "unit": "celsius"},
    ]


def test_remote_write_2_0_is_refused_with_415(http_server, promdb):
    body = snappy_block(encode_write_request([({"__name__": "x"}, [(1.0, T0_MS)])]))
    r = requests.post(http_server.url + "/api/v1/write", params={"db": promdb}, data=body,
                      headers={"Content-Encoding": "snappy", "Content-Type":
                               "application/x-protobuf;proto=io.prometheus.write.v2.Request"},
                      timeout=30)
    assert r.status_code == 415, r.text
    assert "samples" not in http_server.mongo[promdb].list_collection_names()


def test_remote_write_exemplars_and_native_histograms_do_not_fail_the_batch(http_server,
                                                                            promdb):
    # Prometheus' receiver logs exemplars it cannot store and keeps the samples; Hourglass
    # stores neither exemplars nor native histograms, and writes everything else
    series = [
        ({"__name__": "with_exemplar", "job": "j"}, [(1.0, T0_MS)],
         exemplar_field("abc123", 0.5, T0_MS)),
        ({"__name__": "native_hist", "job": "j"}, [], histogram_field(3, T0_MS)),
        ({"__name__": "plain", "job": "j"}, [(2.0, T0_MS)]),
    ]
    r = post_remote_write(http_server, snappy_block(encode_write_request(series)), db=promdb)
    assert r.status_code == 204, r.text
    assert sorted((d["labels"]["__name__"], d["value"])
                  for d in samples_by_time(http_server, promdb)) == [
        ("plain", 2.0), ("with_exemplar", 1.0)]


def test_remote_write_series_prometheus_refuses_are_dropped_and_the_rest_written(http_server,
                                                                                promdb):
    series = [
        ({"job": "no_name"}, [(1.0, T0_MS)]),
        ({"__name__": "", "job": "empty_name"}, [(2.0, T0_MS)]),
        ([("__name__", "dup"), ("job", "a"), ("job", "b")], [(3.0, T0_MS)]),
        ({"__name__": "good", "job": "j"}, [(4.0, T0_MS)]),
    ]
    r = post_remote_write(http_server, snappy_block(encode_write_request(series)), db=promdb)
    assert r.status_code == 400, r.text
    assert "3 series with invalid labels" in r.text, r.text
    assert [typed(d) for d in samples_by_time(http_server, promdb)] == [
        expect(time=T0_MS, labels={"__name__": "good", "job": "j"}, value=4.0)]


def test_remote_write_labels_with_an_empty_value_are_absent(http_server, promdb):
    series = [({"__name__": "up", "job": "j", "instance": ""}, [(1.0, T0_MS)])]
    r = post_remote_write(http_server, snappy_block(encode_write_request(series)), db=promdb)
    assert r.status_code == 204, r.text
    assert [typed(d) for d in samples_by_time(http_server, promdb)] == [
        expect(time=T0_MS, labels={"__name__": "up", "job": "j"}, value=1.0)]


def test_acknowledged_remote_writes_survive_kill_9():
    with tempfile.TemporaryDirectory(prefix="hourglass-prom-durable-") as tmp:
        dbpath = Path(tmp) / "db"
        dbpath.mkdir()
        with http_running_server(dbpath=dbpath) as srv:
            for i in range(20):
                body = encode_write_request([({"__name__": "m", "i": str(i % 3)},
                                              [(float(i), T0_MS + i)])])
                r = post_remote_write(srv, snappy_block(body))
                assert r.status_code == 204, r.text
            srv.proc.kill()
            srv.proc.wait()
        with http_running_server(dbpath=dbpath) as srv:
            docs = samples_by_time(srv, "prometheus")
            assert sorted(d["value"] for d in docs) == [float(i) for i in range(20)]


def test_remote_write_undecodable_bodies_are_400(http_server, promdb):
    cases = {
        # announces 16 bytes, then a copy from before the start of the output
        "not snappy": b"\x10\xff\xfe\xfd garbage, not snappy",
        # field 1 (timeseries) claims 4 GiB and has one byte
        "snappy of a broken protobuf": snappy_block(b"\x0a\xff\xff\xff\xff\x0f\x01"),
        # a sample whose double value has 3 of its 8 bytes
        "snappy of a truncated sample": snappy_block(b"\x0a\x06\x12\x04\x09\x00\x00\x00"),
    }
    for what, body in cases.items():
        r = post_remote_write(http_server, body, db=promdb)
        assert r.status_code == 400, (what, r.status_code, r.text)
    assert http_server.mongo[promdb].samples.count_documents({}) == 0


# ---- the real Prometheus ----------------------------------------------------------------------

JOB = "hourglass_itest"


def prometheus_binary():
    """/usr/bin/prometheus, installed from Debian by apt-get when missing; skips when it can't be."""
    return debian_binary(("prometheus", "/usr/bin/prometheus"), "prometheus", timeout=300)


@pytest.fixture()
def hourglass_for_prometheus():
    # A server of its own: Prometheus writes into the default `prometheus` database.
    with http_running_server() as srv:
        yield srv


def test_real_prometheus_scrapes_metrics_and_remote_writes_samples(hourglass_for_prometheus):
    srv = hourglass_for_prometheus
    binary = prometheus_binary()
    with tempfile.TemporaryDirectory(prefix="hourglass-prometheus-") as tmp:
        tmp = Path(tmp)
        config = tmp / "prometheus.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": JOB, "metrics_path": "/metrics",
                                "static_configs": [{"targets": [f"127.0.0.1:{srv.http_port}"]}]}],
            "remote_write": [{"url": f"http://127.0.0.1:{srv.http_port}/api/v1/write",
                              "queue_config": {"batch_send_deadline": "1s"}}],
        }, indent=2))
        web_port = _free_port()
        log_path = tmp / "prometheus.log"
        with open(log_path, "wb") as log:
            prom = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
                 f"--web.listen-address=127.0.0.1:{web_port}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                check_prometheus_round_trip(srv, prom, web_port, log_path)
            finally:
                stop_process(prom)


def check_prometheus_round_trip(srv, prom, web_port, log_path):
    samples = srv.mongo.prometheus.get_collection("samples")
    up = op = target = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if prom.poll() is not None:
            pytest.fail(f"prometheus exited ({prom.returncode}):\n{log_path.read_text()[-3000:]}")
        if up is None:
            up = samples.find_one({"labels.__name__": "up", "labels.job": JOB, "value": 1.0})
        if op is None:
            op = samples.find_one({"labels.__name__": "hourglass_opcounters_total",
                                   "labels.job": JOB})
        if target is None:
            target = healthy_target(web_port)
        if up and op and target:
            break
        time.sleep(1)
    log = log_path.read_text(errors="replace")[-3000:]
    assert target, f"Prometheus never showed the {JOB} target up; its log:\n{log}"
    assert up, f"no up{{job={JOB!r}}} == 1 sample reached prometheus.samples; log:\n{log}"
    assert op, f"no hourglass_opcounters_total sample reached prometheus.samples; log:\n{log}"
    assert up["labels"]["instance"] == f"127.0.0.1:{srv.http_port}"
    assert op["labels"].get("type") in {"insert", "query", "update", "delete", "getmore", "command"}
    assert isinstance(op["value"], float)


def healthy_target(web_port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/api/v1/targets", timeout=5) as r:
            data = json.load(r)
    except OSError:
        return None
    for t in data.get("data", {}).get("activeTargets", []):
        if t.get("labels", {}).get("job") == JOB and t.get("health") == "up":
            return t
    return None
