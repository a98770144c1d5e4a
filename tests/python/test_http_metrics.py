"""GET /metrics: a well-formed Prometheus text exposition (parsed by prometheus_client) with the
server's connection, opcounter, command latency, cursor, bucket catalog, time-series, storage,
journal and TTL metrics, whose counters follow what pymongo does."""

import datetime

import pytest

pytest.importorskip("requests", reason="requests is not installed")
pytest.importorskip("prometheus_client", reason="prometheus-client is not installed")

from http_helpers import (  # noqa: E402
    T0_NS, get_metrics, metric_samples, metric_value, post_lines,
)

OPCOUNTER_TYPES = ["insert", "query", "update", "delete", "getmore", "command"]
PLAIN_METRICS = [
    "hourglass_connections_current",
    "hourglass_cursors_open",
    "hourglass_bucket_catalog_open_buckets",
    "hourglass_storage_bytes",
    "hourglass_journal_syncs_total",
    "hourglass_ttl_passes_total",
    "hourglass_ttl_deleted_documents_total",
]
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture()
def mdb(http_server):
    name = "metrics_db"
    http_server.mongo.drop_database(name)
    yield http_server.mongo[name]
    http_server.mongo.drop_database(name)


def scrape(srv):
    content_type, text = get_metrics(srv)
    return metric_samples(text, content_type)


def test_metrics_is_prometheus_text_format(http_server):
    http_server.mongo.admin.command("ping")  # so the command histogram has a series
    content_type, text = get_metrics(http_server)
    media = content_type.replace(" ", "").lower()
    assert media.startswith("text/plain;version=0.0.4") or media.startswith(
        "application/openmetrics-text"), content_type
    assert text.endswith("\n")
    samples = metric_samples(text, content_type)  # raises on a malformed exposition
    assert samples
    # every family is announced with its TYPE before its samples
    declared = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    assert {"hourglass_connections_current", "hourglass_command_duration_seconds"} <= declared


def test_metrics_lists_the_documented_metrics(http_server, mdb):
    mdb.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    mdb.ts.insert_many([{"t": T0 + datetime.timedelta(seconds=i), "m": i % 2, "v": i}
                        for i in range(10)])
    samples = scrape(http_server)
    names = {n for n, _, _ in samples}
    for name in PLAIN_METRICS:
        assert name in names, f"{name} missing from /metrics"
    for t in OPCOUNTER_TYPES:
        assert metric_value(samples, "hourglass_opcounters_total", type=t) is not None, t
    assert metric_value(samples, "hourglass_connections_current") >= 1
    assert metric_value(samples, "hourglass_timeseries_measurements_committed_total",
                        namespace="metrics_db.ts") == 10
    assert metric_value(samples, "hourglass_timeseries_buckets", namespace="metrics_db.ts") >= 1
    assert metric_value(samples, "hourglass_storage_bytes") > 0


def test_label_values_are_escaped_so_odd_collection_names_do_not_break_the_scrape(http_server,
                                                                                 mdb):
    mdb.create_collection("plain")  # so that the database exists for the HTTP write
    r = post_lines(http_server, f'q"u\\ote v=1 {T0_NS}', db=mdb.name)
    assert r.status_code == 204, r.text
    mdb.create_collection("line\nfeed", timeseries={"timeField": "t"})
    mdb["line\nfeed"].insert_one({"t": T0, "v": 1})
    content_type, text = get_metrics(http_server)
    # backslash, double quote and line feed escaped as the exposition formats require
    assert 'namespace="metrics_db.q\\"u\\\\ote"' in text
    assert 'namespace="metrics_db.line\\nfeed"' in text
    samples = metric_samples(text, content_type)  # raises on a malformed exposition
    assert metric_value(samples, "hourglass_timeseries_measurements_committed_total",
                        namespace='metrics_db.q"u\\ote') == 1
    assert metric_value(samples, "hourglass_timeseries_buckets",
                        namespace="metrics_db.line\nfeed") >= 1


def test_command_duration_is_a_histogram_labelled_by_command(http_server, mdb):
    mdb.command("ping")
    samples = scrape(http_server)
    buckets = [(labels, v) for n, labels, v in samples
               if n == "hourglass_command_duration_seconds_bucket"
               and labels.get("command") == "ping"]
    assert buckets, "no hourglass_command_duration_seconds_bucket{command=\"ping\"}"
    assert any(labels.get("le") == "+Inf" for labels, _ in buckets)
    inf = [v for labels, v in buckets if labels["le"] == "+Inf"][0]
    count = metric_value(samples, "hourglass_command_duration_seconds_count", command="ping")
    assert count == inf and count >= 1
    assert metric_value(samples, "hourglass_command_duration_seconds_sum", command="ping") >= 0
    # cumulative buckets: never decreasing as le grows
    ordered = sorted(buckets, key=lambda b: float(b[0]["le"]))
    assert [v for _, v in ordered] == sorted(v for _, v in ordered)


def test_insert_opcounter_grows_after_inserts(http_server, mdb):
    before = metric_value(scrape(http_server), "hourglass_opcounters_total", type="insert")
    mdb.plain.insert_many([{"i": i} for i in range(5)])
    mdb.plain.insert_one({"i": 5})
    after = metric_value(scrape(http_server), "hourglass_opcounters_total", type="insert")
    # mongod counts one per inserted document; at least one per insert command either way
    assert after >= before + 2


def test_query_and_getmore_opcounters_and_open_cursors(http_server, mdb):
    mdb.c.insert_many([{"i": i} for i in range(50)])
    s0 = scrape(http_server)
    cursor = mdb.c.find({}, batch_size=10)
    next(cursor)
    s1 = scrape(http_server)
    assert metric_value(s1, "hourglass_opcounters_total", type="query") >= \
        metric_value(s0, "hourglass_opcounters_total", type="query") + 1
    assert metric_value(s1, "hourglass_cursors_open") >= 1
    rest = list(cursor)
    assert len(rest) == 49
    s2 = scrape(http_server)
    assert metric_value(s2, "hourglass_opcounters_total", type="getmore") >= \
        metric_value(s1, "hourglass_opcounters_total", type="getmore") + 1
    cursor.close()


def test_update_and_delete_opcounters_grow(http_server, mdb):
    mdb.c.insert_many([{"i": i} for i in range(3)])
    s0 = scrape(http_server)
    mdb.c.update_one({"i": 0}, {"$set": {"x": 1}})
    mdb.c.delete_one({"i": 1})
    s1 = scrape(http_server)
    for t in ("update", "delete"):
        assert metric_value(s1, "hourglass_opcounters_total", type=t) >= \
            metric_value(s0, "hourglass_opcounters_total", type=t) + 1, t


def test_journal_syncs_do_not_decrease_across_writes(http_server, mdb):
    before = metric_value(scrape(http_server), "hourglass_journal_syncs_total")
    mdb.c.insert_one({"x": 1})
    after = metric_value(scrape(http_server), "hourglass_journal_syncs_total")
    assert after >= before
