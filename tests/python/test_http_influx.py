"""InfluxDB writes over the HTTP listener through the real clients: `influxdb` (1.x API, /write,
/query) and `influxdb-client` (2.x API, /api/v2/write, /api/v2/buckets, /ping, /health), then
pymongo reads the time-series collections back and checks values, BSON types, times (with the
`ns` remainder), tags, and that an acknowledged write survives kill -9.

The raw line-protocol rules (escaping, malformed lines, limits, unknown databases) are in
test_http_line_protocol.py."""

import datetime
import tempfile
import warnings
from decimal import Decimal
from pathlib import Path

import pytest

requests = pytest.importorskip("requests", reason="requests is not installed")
from bson.int64 import Int64  # noqa: E402

from http_helpers import (  # noqa: E402
    HOST, T0_MS, T0_NS, T0_S, create_database, expect, fetch, http_running_server, per_test_database,
    post_lines,
    typed,
)

UTC = datetime.timezone.utc


@pytest.fixture()
def dbname(http_server, request):
    """A database per test (the test creates it through a client), dropped at the end."""
    with per_test_database(http_server, request, "ifx_", 48, create=False) as name:
        yield name


def v1_client(srv, db=None, **kw):
    influxdb = pytest.importorskip("influxdb", reason="the influxdb (1.x) client is not installed")
    return influxdb.InfluxDBClient(host=HOST, port=srv.http_port, database=db, **kw)


def v2_modules():
    ic = pytest.importorskip("influxdb_client", reason="influxdb-client (2.x) is not installed")
    from influxdb_client.client.write_api import SYNCHRONOUS

    return ic, SYNCHRONOUS


def v2_write(srv, bucket, record, precision, **client_kw):
    ic, SYNCHRONOUS = v2_modules()
    with ic.InfluxDBClient(url=srv.url, token="x", org="o", **client_kw) as c:
        c.write_api(write_options=SYNCHRONOUS).write(bucket=bucket, record=record,
                                                     write_precision=precision)


# ---- 1.x client -------------------------------------------------------------------------------

def test_v1_client_create_database_is_listed_by_show_databases(http_server, dbname):
    c = v1_client(http_server)
    c.create_database(dbname)
    assert {"name": dbname} in c.get_list_database()
    r = requests.get(http_server.url + "/query", params={"q": "SHOW DATABASES"}, timeout=30)
    assert r.status_code == 200
    series = r.json()["results"][0]["series"][0]
    assert series["name"] == "databases"
    assert series["columns"] == ["name"]
    assert [dbname] in series["values"]


def query(srv, q, method="POST"):
    r = requests.request(method, srv.url + "/query", params={"q": q}, timeout=30)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()["results"]


def test_query_get_runs_create_and_drop_with_influxdb_deprecation_warning(http_server, dbname):
    # InfluxDB 1.x runs a write statement sent with GET and warns in the result's messages
    results = query(http_server, f"CREATE DATABASE {dbname}", method="GET")
    assert results == [{"statement_id": 0, "messages": [{
        "level": "warning",
        "text": f"deprecated use of 'CREATE DATABASE {dbname}' in a read only context, "
                "please use a POST request instead"}]}]
    assert {"name": dbname} in v1_client(http_server).get_list_database()
    results = query(http_server, f'DROP DATABASE "{dbname}"', method="GET")
    assert results[0]["messages"][0]["text"].startswith(f"deprecated use of 'DROP DATABASE {dbname}'")
    assert {"name": dbname} not in v1_client(http_server).get_list_database()
    # POST has no warning, and SHOW DATABASES over GET none either
    assert query(http_server, f"CREATE DATABASE {dbname}") == [{"statement_id": 0}]
    assert "messages" not in query(http_server, "SHOW DATABASES", method="GET")[0]


def test_query_statements_split_on_semicolons_outside_quotes(http_server, dbname):
    odd = dbname[:40] + ";x"
    try:
        results = query(http_server, f'CREATE DATABASE "{odd}"; SHOW DATABASES')
        assert [r["statement_id"] for r in results] == [0, 1]
        assert "error" not in results[0], results
        assert [odd] in results[1]["series"][0]["values"]
    finally:
        query(http_server, f'DROP DATABASE "{odd}"')
    assert {"name": odd} not in v1_client(http_server).get_list_database()


def test_query_statements_after_a_failed_one_are_not_executed(http_server, dbname):
    results = query(http_server, f'CREATE DATABASE "bad/name"; CREATE DATABASE {dbname}')
    assert results[0]["error"], results
    assert results[1] == {"statement_id": 1, "error": "not executed"}
    assert {"name": dbname} not in v1_client(http_server).get_list_database()


# (time precision, timestamp sent, expected time in ms, expected ns remainder or None)
V1_PRECISIONS = [
    ("n", T0_NS + 123_456_789, T0_MS + 123, 456_789),
    ("u", T0_NS // 1000 + 123_456, T0_MS + 123, 456_000),
    ("ms", T0_MS + 123, T0_MS + 123, None),
    ("s", T0_S + 7, T0_MS + 7000, None),
]


@pytest.mark.parametrize("precision,ts,ms,ns", V1_PRECISIONS, ids=[p[0] for p in V1_PRECISIONS])
def test_v1_client_write_points_each_precision_stores_typed_fields(http_server, dbname,
                                                                   precision, ts, ms, ns):
    c = v1_client(http_server, dbname)
    c.create_database(dbname)
    point = {"measurement": "cpu", "tags": {"host": "h1", "dc": "eu"}, "time": ts,
             "fields": {"usage": 0.5, "count": 3, "state": "ok", "up": True, "down": False}}
    assert c.write_points([point], time_precision=precision) is True
    docs = fetch(http_server, dbname, "cpu")
    want = dict(time=ms, tags={"dc": "eu", "host": "h1"}, usage=0.5, count=Int64(3), state="ok",
                up=True, down=False)
    if ns is not None:
        want["ns"] = ns
    assert [typed(d) for d in docs] == [expect(**want)]
    assert list(docs[0]["tags"]) == ["dc", "host"]


def test_v1_client_raw_line_protocol_lines(http_server, dbname):
    c = v1_client(http_server, dbname)
    c.create_database(dbname)
    lines = [
        f"weather,city=Oslo temp=-3.5,humidity=81i,note=\"cold\" {T0_S}",
        f"weather,city=Rome temp=12,humidity=60i,sunny=t {T0_S + 60}",
        f"wind speed=7.25 {T0_S + 120}",
    ]
    assert c.write_points(lines, protocol="line", time_precision="s") is True
    weather = fetch(http_server, dbname, "weather")
    assert [typed(d) for d in weather] == [
        expect(time=T0_MS, tags={"city": "Oslo"}, temp=-3.5, humidity=Int64(81), note="cold"),
        expect(time=T0_MS + 60_000, tags={"city": "Rome"}, temp=12.0, humidity=Int64(60),
               sunny=True),
    ]
    # a line without tags has no tags field
    assert [typed(d) for d in fetch(http_server, dbname, "wind")] == [
        expect(time=T0_MS + 120_000, speed=7.25)]


def test_v1_client_gzip_write(http_server, dbname):
    c = v1_client(http_server, dbname, gzip=True)
    c.create_database(dbname)
    points = [{"measurement": "gz", "tags": {"k": str(i % 3)}, "time": T0_MS + i,
               "fields": {"v": float(i), "pad": "x" * 50}} for i in range(500)]
    assert c.write_points(points, time_precision="ms") is True
    docs = fetch(http_server, dbname, "gz")
    assert len(docs) == 500
    assert [(int(d["time"]), d["v"], d["tags"]["k"]) for d in docs] == [
        (T0_MS + i, float(i), str(i % 3)) for i in range(500)]


def test_v1_client_write_to_unknown_database_raises_404(http_server):
    influxdb = pytest.importorskip("influxdb")
    c = v1_client(http_server, "ifx_never_created")
    with pytest.raises(influxdb.exceptions.InfluxDBClientError) as e:
        c.write_points([{"measurement": "m", "fields": {"v": 1.0}}])
    assert e.value.code == 404
    assert "ifx_never_created" not in http_server.mongo.list_database_names()


def test_v1_client_ping_returns_version_header(http_server):
    version = v1_client(http_server).ping()
    assert isinstance(version, str) and version


# ---- 2.x client -------------------------------------------------------------------------------

def test_v2_client_point_every_field_type_is_stored_with_its_bson_type(http_server, dbname):
    ic, _ = v2_modules()
    create_database(http_server, dbname)
    point = ic.Point.from_dict(
        {"measurement": "sensor", "tags": {"room": "kitchen", "floor": "1"},
         "fields": {"temp": 21.5, "whole": 3.0, "count": -7, "small": 5, "big": 2**63,
                    "biggest": 2**64 - 1, "name": 'probe "A" \\ 1', "on": True, "off": False},
         "time": T0_NS + 987_654_321},
        write_precision=ic.WritePrecision.NS,
        field_types={"small": "uint", "big": "uint", "biggest": "uint"})
    v2_write(http_server, dbname, point, ic.WritePrecision.NS)
    docs = fetch(http_server, dbname, "sensor")
    assert [typed(d) for d in docs] == [expect(
        time=T0_MS + 987, ns=654_321, tags={"floor": "1", "room": "kitchen"},
        temp=21.5, whole=3.0, count=Int64(-7), small=Int64(5), big=Decimal(2**63),
        biggest=Decimal(2**64 - 1), name='probe "A" \\ 1', on=True, off=False)]


V2_PRECISIONS = [
    ("NS", T0_NS + 1_000_001, T0_MS + 1, 1),
    ("US", T0_NS // 1000 + 2_999, T0_MS + 2, 999_000),
    ("MS", T0_MS + 3, T0_MS + 3, None),
    ("S", T0_S + 4, T0_MS + 4000, None),
]


@pytest.mark.parametrize("precision,ts,ms,ns", V2_PRECISIONS, ids=[p[0] for p in V2_PRECISIONS])
def test_v2_client_each_write_precision(http_server, dbname, precision, ts, ms, ns):
    ic, _ = v2_modules()
    create_database(http_server, dbname)
    wp = getattr(ic.WritePrecision, precision)
    v2_write(http_server, dbname, ic.Point("p").tag("t", "x").field("v", 1.0).time(ts, wp), wp)
    want = dict(time=ms, tags={"t": "x"}, v=1.0)
    if ns is not None:
        want["ns"] = ns
    assert [typed(d) for d in fetch(http_server, dbname, "p")] == [expect(**want)]


def test_v2_client_datetime_with_microseconds_keeps_the_sub_ms_remainder(http_server, dbname):
    ic, _ = v2_modules()
    create_database(http_server, dbname)
    when = datetime.datetime(2026, 1, 1, 0, 0, 0, 123_456, tzinfo=UTC)
    wp = ic.WritePrecision.US
    v2_write(http_server, dbname, ic.Point("dt").field("v", 2.0).time(when, wp), wp)
    assert [typed(d) for d in fetch(http_server, dbname, "dt")] == [
        expect(time=T0_MS + 123, ns=456_000, v=2.0)]


def test_v2_client_gzip_write(http_server, dbname):
    ic, _ = v2_modules()
    create_database(http_server, dbname)
    wp = ic.WritePrecision.S
    points = [ic.Point("gz2").tag("host", f"h{i % 4}").field("n", i).time(T0_S + i, wp)
              for i in range(400)]
    v2_write(http_server, dbname, points, wp, enable_gzip=True)
    docs = fetch(http_server, dbname, "gz2")
    assert [(int(d["time"]), d["n"], type(d["n"]), d["tags"]) for d in docs] == [
        (T0_MS + 1000 * i, i, Int64, {"host": f"h{i % 4}"}) for i in range(400)]


def test_v2_client_write_to_unknown_bucket_raises_404(http_server):
    ic, _ = v2_modules()
    from influxdb_client.rest import ApiException

    with pytest.raises(ApiException) as e:
        v2_write(http_server, "ifx_no_bucket", ic.Point("m").field("v", 1.0), ic.WritePrecision.NS)
    assert e.value.status == 404
    assert "ifx_no_bucket" not in http_server.mongo.list_database_names()


def test_v2_bucket_created_through_the_buckets_api_accepts_writes(http_server, dbname):
    ic, _ = v2_modules()
    r = requests.post(http_server.url + "/api/v2/buckets", timeout=30,
                      headers={"Authorization": "Token x"},
                      json={"name": dbname, "orgID": "0123456789abcdef"})
    assert r.status_code in (200, 201), (r.status_code, r.text)
    wp = ic.WritePrecision.MS
    v2_write(http_server, dbname, ic.Point("b").field("v", 9.5).time(T0_MS, wp), wp)
    assert [typed(d) for d in fetch(http_server, dbname, "b")] == [expect(time=T0_MS, v=9.5)]
    assert {"name": dbname} in v1_client(http_server).get_list_database()
    # the same through the client's buckets API
    other = dbname[:40] + "_api"
    http_server.mongo.drop_database(other)
    try:
        with ic.InfluxDBClient(url=http_server.url, token="x", org="o") as c:
            bucket = c.buckets_api().create_bucket(bucket_name=other, org="0123456789abcdef")
            assert bucket.name == other
        v2_write(http_server, other, ic.Point("b").field("v", 1.25).time(T0_MS, wp), wp)
        assert [typed(d) for d in fetch(http_server, other, "b")] == [expect(time=T0_MS, v=1.25)]
    finally:
        http_server.mongo.drop_database(other)


def test_v2_creating_a_bucket_that_exists_is_422_conflict(http_server, dbname):
    ic, _ = v2_modules()
    from influxdb_client.rest import ApiException

    create_database(http_server, dbname)
    r = requests.post(http_server.url + "/api/v2/buckets", timeout=30,
                      headers={"Authorization": "Token x"},
                      json={"name": dbname, "orgID": "0123456789abcdef"})
    assert r.status_code == 422, (r.status_code, r.text)
    assert r.json() == {"code": "conflict",
                        "message": f"bucket with name {dbname} already exists"}
    with ic.InfluxDBClient(url=http_server.url, token="x", org="o") as c:
        with pytest.raises(ApiException) as e:
            c.buckets_api().create_bucket(bucket_name=dbname, org="0123456789abcdef")
    assert e.value.status == 422


def test_v2_client_write_with_a_bad_line_raises_400_and_writes_nothing(http_server, dbname):
    ic, _ = v2_modules()
    from influxdb_client.rest import ApiException

    create_database(http_server, dbname)
    lines = [f"good v=1 {T0_S}", f"good,a=1,a=2 v=2 {T0_S}", f"other v=3 {T0_S}"]
    with pytest.raises(ApiException) as e:
        v2_write(http_server, dbname, lines, ic.WritePrecision.S)
    assert e.value.status == 400
    assert "duplicate tags" in e.value.body
    assert http_server.mongo[dbname].list_collection_names() == []


def test_v2_bucket_db_slash_rp_writes_to_the_db(http_server, dbname):
    ic, _ = v2_modules()
    create_database(http_server, dbname)
    wp = ic.WritePrecision.S
    v2_write(http_server, f"{dbname}/autogen", ic.Point("rp").field("v", 1.5).time(T0_S, wp), wp)
    assert [typed(d) for d in fetch(http_server, dbname, "rp")] == [expect(time=T0_MS, v=1.5)]


def test_v2_client_ping_and_health(http_server):
    ic, _ = v2_modules()
    with ic.InfluxDBClient(url=http_server.url, token="x", org="o") as c:
        assert c.ping() is True
        assert c.version() != "unknown"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            health = c.health()
        assert health.status == "pass", health.message


def test_ping_health_and_ready_endpoints(http_server):
    for method in (requests.get, requests.head):
        r = method(http_server.url + "/ping", timeout=30)
        assert r.status_code == 204
        assert r.headers.get("X-Influxdb-Version")
        assert r.content == b""
    # 1.x: verbose set to anything but empty, 0 or false answers 200 with the version
    for verbose in ("true", "1", "yes"):
        r = requests.get(http_server.url + "/ping", params={"verbose": verbose}, timeout=30)
        assert r.status_code == 200, verbose
        assert r.json() == {"version": r.headers["X-Influxdb-Version"]}
    for verbose in ("", "0", "false"):
        r = requests.get(http_server.url + "/ping", params={"verbose": verbose}, timeout=30)
        assert r.status_code == 204, verbose
    r = requests.get(http_server.url + "/health", timeout=30)
    assert r.status_code == 200
    assert r.json()["status"] == "pass"
    r = requests.get(http_server.url + "/ready", timeout=30)
    assert r.status_code == 200
    assert r.json()["status"] == "ready"


# ---- collections and parameters ----------------------------------------------------------------

def test_measurement_collections_are_time_series_with_default_options(http_server, dbname):
    create_database(http_server, dbname)
    body = f"cpu,host=a v=1 {T0_NS}\nmem,host=a free=2i {T0_NS}\ncpu,host=b v=3 {T0_NS}\n"
    assert post_lines(http_server, body, db=dbname).status_code == 204
    infos = {c["name"]: c for c in http_server.mongo[dbname].list_collections()}
    for coll in ("cpu", "mem"):
        assert infos[coll]["type"] == "timeseries"
        ts = infos[coll]["options"]["timeseries"]
        assert (ts["timeField"], ts["metaField"], ts["granularity"]) == ("time", "tags", "seconds")
    assert http_server.mongo[dbname].cpu.count_documents({}) == 2
    assert http_server.mongo[dbname].mem.count_documents({}) == 1


def test_http_server_parameters_have_documented_defaults(http_server):
    got = http_server.mongo.admin.command("getParameter", 1, httpAutoCreateDatabase=1,
                                          httpIngestGranularity=1, httpMaxBodyBytes=1)
    assert got["httpAutoCreateDatabase"] is False
    assert got["httpIngestGranularity"] == "seconds"
    assert got["httpMaxBodyBytes"] == 25_000_000


def test_auto_create_database_via_set_parameter_command(http_server):
    admin = http_server.mongo.admin
    name = "ifx_autocreate_cmd"
    http_server.mongo.drop_database(name)
    assert post_lines(http_server, f"m v=1 {T0_NS}", db=name).status_code == 404
    admin.command("setParameter", 1, httpAutoCreateDatabase=True)
    try:
        assert post_lines(http_server, f"m v=1 {T0_NS}", db=name).status_code == 204
        assert post_lines(http_server, f"m2 v=2 {T0_NS}", db=name + "_v2",
                          api="v2").status_code == 204
    finally:
        admin.command("setParameter", 1, httpAutoCreateDatabase=False)
    try:
        assert [typed(d) for d in fetch(http_server, name, "m")] == [expect(time=T0_MS, v=1.0)]
        assert [typed(d) for d in fetch(http_server, name + "_v2", "m2")] == [
            expect(time=T0_MS, v=2.0)]
        assert post_lines(http_server, f"m v=1 {T0_NS}", db="ifx_autocreate_off").status_code == 404
    finally:
        http_server.mongo.drop_database(name)
        http_server.mongo.drop_database(name + "_v2")


def test_server_started_with_auto_create_and_ingest_granularity():
    with http_running_server("--setParameter", "httpAutoCreateDatabase=true",
                             "--setParameter", "httpIngestGranularity=minutes") as srv:
        assert post_lines(srv, f"m,s=1 v=1 {T0_NS}", db="fresh").status_code == 204
        info = {c["name"]: c for c in srv.mongo.fresh.list_collections()}["m"]
        ts = info["options"]["timeseries"]
        assert (ts["timeField"], ts["metaField"], ts["granularity"]) == ("time", "tags", "minutes")
        assert [typed(d) for d in fetch(srv, "fresh", "m")] == [
            expect(time=T0_MS, tags={"s": "1"}, v=1.0)]


def test_database_with_a_collection_exists_without_create_database(http_server):
    name = "ifx_mongo_made"
    http_server.mongo.drop_database(name)
    http_server.mongo[name].plain.insert_one({"x": 1})
    try:
        assert post_lines(http_server, f"m v=4 {T0_NS}", db=name).status_code == 204
        assert [typed(d) for d in fetch(http_server, name, "m")] == [expect(time=T0_MS, v=4.0)]
    finally:
        http_server.mongo.drop_database(name)


# ---- durability -------------------------------------------------------------------------------

def test_acknowledged_http_writes_survive_kill_9():
    with tempfile.TemporaryDirectory(prefix="hourglass-http-durable-") as tmp:
        dbpath = Path(tmp) / "db"
        dbpath.mkdir()
        with http_running_server(dbpath=dbpath) as srv:
            create_database(srv, "durable")
            for i in range(20):
                r = post_lines(srv, f"d,k=v{i % 2} v={i}i {T0_NS + i * 1_000_000 + 7}",
                               db="durable", api="v1" if i % 2 else "v2")
                assert r.status_code == 204, r.text
            srv.proc.kill()
            srv.proc.wait()
        with http_running_server(dbpath=dbpath) as srv:
            docs = fetch(srv, "durable", "d")
            assert [typed(d) for d in docs] == [
                expect(time=T0_MS + i, ns=7, tags={"k": f"v{i % 2}"}, v=Int64(i)) for i in range(20)]
