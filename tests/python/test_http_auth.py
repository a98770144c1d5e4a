"""The HTTP API under access control (`--auth`): InfluxDB line-protocol writes, /query and
/metrics need a user's credentials (HTTP Basic, InfluxDB's `Token user:pass`, or the `u`/`p`
query parameters), answer 401 without them or with wrong ones, and run as that user: a write
needs `insert` on db.<measurement> (403 otherwise, nothing written), /metrics needs
`serverStatus` (clusterMonitor), SHOW DATABASES lists only the databases the user has
privileges on. The health checks (/ping, /health, /ready) stay open. Password and role
changes made through MongoDB take effect on the HTTP API at the next request. With --auth the
HTTP listener binds every --bind_ip address; without, loopback only.

One server (`--auth --httpPort N --setParameter httpAutoCreateDatabase=true`) serves the
module; its first user (root on admin) is made through the localhost exception, then a
readWrite user on RW_DB, a read user on RO_DB and a clusterMonitor user. Every test writes its
own measurements (or makes its own users), so the tests do not depend on each other's order."""

import base64
import contextlib
import itertools
import json
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

requests = pytest.importorskip("requests", reason="requests is not installed")
from bson.int64 import Int64  # noqa: E402

from conftest import _binary, _free_port, auth_server, stop_process  # noqa: E402
from http_helpers import (  # noqa: E402
    HOST, T0_MS, T0_S, HttpServer, expect, fetch, typed, wait_for_port,
)
from test_auth import connect  # noqa: E402

ROOT_USER, ROOT_PWD = "hg_root", "root-secret"
RW_USER, RO_USER, MON_USER = "hauth_rw", "hauth_ro", "hauth_mon"
PWD = "user-secret"
RW_DB, RO_DB = "hauth_rw_db", "hauth_ro_db"
NO_CREDENTIALS = "unable to parse authentication credentials"
BAD_CREDENTIALS = "authorization failed"

_names = itertools.count()


def unique(prefix):
    return f"{prefix}_{next(_names)}"


@pytest.fixture(scope="module")
def srv():
    http_port = _free_port()
    with auth_server("--httpPort", str(http_port), "--setParameter",
                     "httpAutoCreateDatabase=true", user=ROOT_USER, pwd=ROOT_PWD) as (proc, port, log):
        wait_for_port(http_port, proc)
        root = connect(port, ROOT_USER, ROOT_PWD)
        root.admin.command("createUser", RW_USER, pwd=PWD,
                           roles=[{"role": "readWrite", "db": RW_DB}])
        root.admin.command("createUser", RO_USER, pwd=PWD, roles=[{"role": "read", "db": RO_DB}])
        root.admin.command("createUser", MON_USER, pwd=PWD,
                           roles=[{"role": "clusterMonitor", "db": "admin"}])
        # both databases exist before any HTTP write
        root[RW_DB].seed.insert_one({"seed": True})
        root[RO_DB].seed.insert_one({"seed": True})
        # HttpServer.mongo (used by http_helpers.fetch) is this root client
        server = HttpServer(proc, port, http_port, log, _client=root)
        try:
            yield server
        finally:
            server.close()


# --------------------------------------------------------------------------- helpers


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def token(user, password):
    return {"Authorization": f"Token {user}:{password}"}


def auth_kwargs(form, user, password):
    """(headers, extra query params) carrying the credentials in `form`."""
    if form == "basic":
        return basic(user, password), {}
    if form == "token":
        return token(user, password), {}
    if form == "query":
        return {}, {"u": user, "p": password}
    assert form == "none"
    return {}, {}


def write(srv, db, body, *, api="v1", form="none", user=None, password=None, params=None):
    """POSTs line protocol (precision s) to /write?db= or /api/v2/write?bucket=, with the
    credentials in `form`; returns the requests.Response."""
    headers, query = auth_kwargs(form, user, password)
    query = dict(query, precision="s", **(params or {}))
    if api == "v1":
        path = "/write"
        query["db"] = db
    else:
        path = "/api/v2/write"
        query.update(bucket=db, org="x")
    headers["Content-Type"] = "text/plain; charset=utf-8"
    return requests.post(srv.url + path, params=query, data=body.encode(), headers=headers,
                         timeout=30)


def get(srv, path, *, form="none", user=None, password=None, params=None):
    headers, query = auth_kwargs(form, user, password)
    query.update(params or {})
    return requests.get(srv.url + path, params=query, headers=headers, timeout=30)


def show_databases(srv, **creds):
    r = get(srv, "/query", params={"q": "SHOW DATABASES"}, **creds)
    assert r.status_code == 200, (r.status_code, r.text)
    series = r.json()["results"][0]["series"][0]
    assert (series["name"], series["columns"]) == ("databases", ["name"])
    return sorted(v[0] for v in series.get("values") or [])


def collections(srv, db):
    return set(srv.mongo[db].list_collection_names())


def assert_status(r, status, error=None):
    assert r.status_code == status, (r.status_code, r.text)
    if error is not None:
        assert r.json()["error"] == error, r.text


# --------------------------------------------------------------------------- open routes


def test_ping_health_and_ready_answer_without_credentials(srv):
    r = requests.get(srv.url + "/ping", timeout=30)
    assert_status(r, 204)
    assert r.headers.get("X-Influxdb-Version")
    r = requests.head(srv.url + "/ping", timeout=30)
    assert_status(r, 204)
    r = requests.get(srv.url + "/health", timeout=30)
    assert_status(r, 200)
    assert r.json()["status"] == "pass"
    r = requests.get(srv.url + "/ready", timeout=30)
    assert_status(r, 200)
    assert r.json()["status"] == "ready"


# --------------------------------------------------------------------------- 401


@pytest.mark.parametrize("api", ["v1", "v2"])
def test_write_without_credentials_is_401_and_writes_nothing(srv, api):
    m = unique("noauth")
    r = write(srv, RW_DB, f"{m},h=a v=1 {T0_S}", api=api)
    assert_status(r, 401, NO_CREDENTIALS)
    assert m not in collections(srv, RW_DB)
    # nor does httpAutoCreateDatabase create a database for an anonymous write
    fresh = unique("hauth_anon_db")
    r = write(srv, fresh, f"{m} v=1 {T0_S}", api=api)
    assert_status(r, 401, NO_CREDENTIALS)
    assert fresh not in srv.mongo.list_database_names()


@pytest.mark.parametrize("form", ["basic", "token", "query"])
def test_wrong_password_is_401_authorization_failed_and_writes_nothing(srv, form):
    m = unique("badpwd")
    r = write(srv, RW_DB, f"{m} v=1 {T0_S}", form=form, user=RW_USER, password="wrong")
    assert_status(r, 401, BAD_CREDENTIALS)
    assert m not in collections(srv, RW_DB)


def test_unknown_user_is_401_authorization_failed(srv):
    m = unique("ghost")
    r = write(srv, RW_DB, f"{m} v=1 {T0_S}", form="basic", user=unique("nobody"), password=PWD)
    assert_status(r, 401, BAD_CREDENTIALS)
    assert m not in collections(srv, RW_DB)


def test_user_is_looked_up_in_admin_unless_auth_source_names_another_db(srv):
    user = unique("dbuser")
    srv.mongo[RW_DB].command("createUser", user, pwd=PWD,
                             roles=[{"role": "readWrite", "db": RW_DB}])
    m = unique("authsrc")
    # the user lives in RW_DB, not in admin
    r = write(srv, RW_DB, f"{m} v=1 {T0_S}", form="basic", user=user, password=PWD)
    assert_status(r, 401, BAD_CREDENTIALS)
    assert m not in collections(srv, RW_DB)
    r = write(srv, RW_DB, f"{m} v=2 {T0_S}", form="basic", user=user, password=PWD,
              params={"authSource": RW_DB})
    assert_status(r, 204)
    assert [typed(d) for d in fetch(srv, RW_DB, m)] == [expect(time=T0_MS, v=2.0)]
    # and an admin user is not found through another authSource
    r = write(srv, RW_DB, f"{m} v=3 {T0_S}", form="basic", user=RW_USER, password=PWD,
              params={"authSource": RW_DB})
    assert_status(r, 401, BAD_CREDENTIALS)
    assert len(fetch(srv, RW_DB, m)) == 1


def test_unsupported_authorization_scheme_is_401(srv):
    m = unique("bearer")
    r = requests.post(srv.url + "/write", params={"db": RW_DB, "precision": "s"},
                      data=f"{m} v=1 {T0_S}".encode(),
                      headers={"Authorization": f"Bearer {RW_USER}:{PWD}"}, timeout=30)
    assert_status(r, 401)
    assert m not in collections(srv, RW_DB)


# --------------------------------------------------------------------------- writes as the user


@pytest.mark.parametrize("api", ["v1", "v2"])
@pytest.mark.parametrize("form", ["basic", "token", "query"])
def test_each_credential_form_writes_as_the_user(srv, form, api):
    m = unique(f"cred_{form}_{api}")
    body = f"{m},host=h1 v=1.5,n=2i {T0_S}\n{m},host=h2 v=2.5,n=3i {T0_S + 1}\n"
    r = write(srv, RW_DB, body, api=api, form=form, user=RW_USER, password=PWD)
    assert_status(r, 204)
    docs = fetch(srv, RW_DB, m)
    assert [typed(d) for d in docs] == [
        expect(time=T0_MS, tags={"host": "h1"}, v=1.5, n=Int64(2)),
        expect(time=T0_MS + 1000, tags={"host": "h2"}, v=2.5, n=Int64(3)),
    ]
    info = {c["name"]: c for c in srv.mongo[RW_DB].list_collections()}[m]
    assert info["type"] == "timeseries"


def test_read_write_user_creates_a_database_on_first_write_only_where_it_may(srv):
    # readWrite on a database that does not exist yet: httpAutoCreateDatabase makes it
    fresh = unique("hauth_fresh_db")
    user = unique("freshwriter")
    srv.mongo.admin.command("createUser", user, pwd=PWD, roles=[{"role": "readWrite", "db": fresh}])
    assert fresh not in srv.mongo.list_database_names()
    m = unique("first")
    try:
        r = write(srv, fresh, f"{m} v=1 {T0_S}", form="basic", user=user, password=PWD)
        assert_status(r, 204)
        assert [typed(d) for d in fetch(srv, fresh, m)] == [expect(time=T0_MS, v=1.0)]
    finally:
        srv.mongo.drop_database(fresh)


@pytest.mark.parametrize("api", ["v1", "v2"])
def test_read_only_user_write_is_403_and_writes_nothing(srv, api):
    m = unique("ro_new")
    r = write(srv, RO_DB, f"{m} v=1 {T0_S}", api=api, form="basic", user=RO_USER, password=PWD)
    assert_status(r, 403)
    if api == "v2":
        assert r.json()["code"] == "forbidden", r.text
    assert m not in collections(srv, RO_DB)
    # nor into a measurement that already exists
    existing = unique("ro_existing")
    assert_status(write(srv, RO_DB, f"{existing} v=1 {T0_S}", form="basic",
                        user=ROOT_USER, password=ROOT_PWD), 204)
    r = write(srv, RO_DB, f"{existing} v=2 {T0_S + 1}", api=api, form="token", user=RO_USER,
              password=PWD)
    assert_status(r, 403)
    assert [typed(d) for d in fetch(srv, RO_DB, existing)] == [expect(time=T0_MS, v=1.0)]


@pytest.mark.parametrize("api", ["v1", "v2"])
def test_read_write_user_cannot_write_to_another_database(srv, api):
    m = unique("other")
    r = write(srv, RO_DB, f"{m} v=1 {T0_S}", api=api, form="basic", user=RW_USER, password=PWD)
    assert_status(r, 403)
    assert m not in collections(srv, RO_DB)
    # nor make a new database through httpAutoCreateDatabase
    fresh = unique("hauth_not_mine")
    r = write(srv, fresh, f"{m} v=1 {T0_S}", api=api, form="basic", user=RW_USER, password=PWD)
    assert_status(r, 403)
    assert fresh not in srv.mongo.list_database_names()


def inserter_of(srv, collection, name):
    """A new user whose only privilege is `insert` on `collection` of RW_DB."""
    role = unique(f"insert_{name}")
    srv.mongo.admin.command("createRole", role, roles=[], privileges=[
        {"resource": {"db": RW_DB, "collection": collection}, "actions": ["insert"]}])
    user = unique(name)
    srv.mongo.admin.command("createUser", user, pwd=PWD, roles=[{"role": role, "db": "admin"}])
    return user


@pytest.mark.parametrize("api", ["v1", "v2"])
def test_a_write_with_one_forbidden_measurement_writes_none(srv, api):
    allowed, denied = unique("some_allowed"), unique("some_denied")
    user = inserter_of(srv, allowed, "some")
    r = write(srv, RW_DB, f"{allowed} v=1 {T0_S}\n{denied} v=2 {T0_S}", api=api, form="basic",
              user=user, password=PWD)
    assert_status(r, 403)
    assert not {allowed, denied} & collections(srv, RW_DB)


def test_insert_on_one_collection_writes_that_measurement_only(srv):
    # MongoDB's `create` accepts `insert` on the namespace in place of `createCollection`
    # (authorization_checks.cpp, checkAuthForCreate), so the first write may create it
    allowed, denied = unique("allowed"), unique("denied")
    user = inserter_of(srv, allowed, "narrow")
    r = write(srv, RW_DB, f"{allowed} v=1 {T0_S}", form="basic", user=user, password=PWD)
    assert_status(r, 204)
    assert [typed(d) for d in fetch(srv, RW_DB, allowed)] == [expect(time=T0_MS, v=1.0)]
    r = write(srv, RW_DB, f"{denied} v=1 {T0_S}", form="basic", user=user, password=PWD)
    assert_status(r, 403)
    assert denied not in collections(srv, RW_DB)


def test_create_collection_without_insert_cannot_write(srv):
    m = unique("noinsert")
    role = unique("create_only")
    srv.mongo.admin.command("createRole", role, roles=[], privileges=[
        {"resource": {"db": RW_DB, "collection": ""}, "actions": ["createCollection", "find"]}])
    user = unique("creator")
    srv.mongo.admin.command("createUser", user, pwd=PWD, roles=[{"role": role, "db": "admin"}])
    r = write(srv, RW_DB, f"{m} v=1 {T0_S}", form="basic", user=user, password=PWD)
    assert_status(r, 403)
    assert m not in collections(srv, RW_DB)


def remote_write(srv, db, series, headers=None):
    from http_helpers import encode_write_request, snappy_block

    body = snappy_block(encode_write_request(series))
    return requests.post(
        srv.url + "/api/v1/write", params={"db": db}, data=body, timeout=30,
        headers={"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
                 "X-Prometheus-Remote-Write-Version": "0.1.0", **(headers or {})})


def test_prometheus_remote_write_runs_as_the_user(srv):
    db = unique("hauth_prom")
    user = unique("promwriter")
    srv.mongo.admin.command("createUser", user, pwd=PWD, roles=[{"role": "readWrite", "db": db}])
    series = [({"__name__": "up", "job": "j"}, [(1.0, T0_MS)])]
    try:
        assert_status(remote_write(srv, db, series), 401, NO_CREDENTIALS)
        assert_status(remote_write(srv, db, series, basic(user, "wrong")), 401, BAD_CREDENTIALS)
        assert_status(remote_write(srv, db, series, basic(RO_USER, PWD)), 403)
        assert db not in srv.mongo.list_database_names()
        # Prometheus' remote_write sends basic_auth
        assert_status(remote_write(srv, db, series, basic(user, PWD)), 204)
        assert [typed(d) for d in fetch(srv, db, "samples")] == [
            expect(time=T0_MS, labels={"__name__": "up", "job": "j"}, value=1.0)]
    finally:
        srv.mongo.drop_database(db)


# --------------------------------------------------------------------------- /metrics


def test_metrics_needs_credentials(srv):
    assert_status(get(srv, "/metrics"), 401, NO_CREDENTIALS)
    assert_status(get(srv, "/metrics", form="basic", user=MON_USER, password="wrong"), 401,
                  BAD_CREDENTIALS)


def test_metrics_is_403_without_server_status(srv):
    r = get(srv, "/metrics", form="basic", user=RW_USER, password=PWD)
    assert_status(r, 403)
    assert r.json()["error"], r.text
    assert "# TYPE" not in r.text


@pytest.mark.parametrize("form", ["basic", "token", "query"])
def test_metrics_answers_200_for_cluster_monitor(srv, form):
    r = get(srv, "/metrics", form=form, user=MON_USER, password=PWD)
    assert_status(r, 200)
    assert r.headers.get("Content-Type", "").startswith(("text/plain", "application/openmetrics"))
    assert "# TYPE" in r.text


# --------------------------------------------------------------------------- /query


def test_show_databases_lists_only_the_users_databases(srv):
    assert show_databases(srv, form="basic", user=RW_USER, password=PWD) == [RW_DB]
    assert show_databases(srv, form="query", user=RO_USER, password=PWD) == [RO_DB]


def test_show_databases_lists_every_database_with_list_databases(srv):
    for user, password in ((ROOT_USER, ROOT_PWD), (MON_USER, PWD)):
        names = show_databases(srv, form="basic", user=user, password=password)
        assert {RW_DB, RO_DB} <= set(names), (user, names)


def test_query_without_credentials_is_401(srv):
    r = get(srv, "/query", params={"q": "SHOW DATABASES"})
    assert_status(r, 401, NO_CREDENTIALS)


def test_create_database_needs_create_collection_on_that_database(srv):
    target = unique("hauth_created")
    r = requests.post(srv.url + "/query", params={"q": f'CREATE DATABASE "{target}"'},
                      headers=basic(RW_USER, PWD), timeout=30)
    # InfluxDB 1.x authorizes the whole query first: 403 "error authorizing query: ..."
    assert_status(r, 403)
    assert r.json()["error"].startswith("error authorizing query: "), r.text
    assert f"CREATE DATABASE {target}" in r.json()["error"], r.text
    assert target not in srv.mongo.list_database_names()
    # a query with one refused statement runs none of them
    other = unique("hauth_created")
    r = requests.post(srv.url + "/query", params={"q": f"CREATE DATABASE {RW_DB}; "
                                                       f"CREATE DATABASE {other}"},
                      headers=basic(RW_USER, PWD), timeout=30)
    assert_status(r, 403)
    assert other not in show_databases(srv, form="basic", user=ROOT_USER, password=ROOT_PWD)
    r = requests.post(srv.url + "/query", params={"q": f"DROP DATABASE {RO_DB}"},
                      headers=basic(RW_USER, PWD), timeout=30)
    assert_status(r, 403)
    assert RO_DB in srv.mongo.list_database_names()
    assert target not in show_databases(srv, form="basic", user=ROOT_USER, password=ROOT_PWD)
    # root may
    r = requests.post(srv.url + "/query", params={"q": f'CREATE DATABASE "{target}"'},
                      headers=basic(ROOT_USER, ROOT_PWD), timeout=30)
    assert_status(r, 200)
    assert "error" not in r.json()["results"][0], r.text
    assert target in show_databases(srv, form="basic", user=ROOT_USER, password=ROOT_PWD)
    srv.mongo.drop_database(target)


# --------------------------------------------------------------------------- real clients


def test_influxdb_1x_client_writes_with_username_and_password(srv):
    influxdb = pytest.importorskip("influxdb", reason="the influxdb (1.x) client is not installed")
    m = unique("v1client")
    c = influxdb.InfluxDBClient(host=HOST, port=srv.http_port, database=RW_DB,
                                username=RW_USER, password=PWD)
    point = {"measurement": m, "tags": {"host": "a"}, "time": T0_S, "fields": {"v": 4.5}}
    assert c.write_points([point], time_precision="s") is True
    assert [typed(d) for d in fetch(srv, RW_DB, m)] == [
        expect(time=T0_MS, tags={"host": "a"}, v=4.5)]
    assert {"name": RW_DB} in c.get_list_database()
    c.close()


def test_influxdb_1x_client_with_a_wrong_password_raises_401(srv):
    influxdb = pytest.importorskip("influxdb", reason="the influxdb (1.x) client is not installed")
    m = unique("v1bad")
    c = influxdb.InfluxDBClient(host=HOST, port=srv.http_port, database=RW_DB,
                                username=RW_USER, password="wrong")
    with pytest.raises(influxdb.exceptions.InfluxDBClientError) as e:
        c.write_points([{"measurement": m, "time": T0_S, "fields": {"v": 1.0}}],
                       time_precision="s")
    assert e.value.code == 401
    assert m not in collections(srv, RW_DB)
    c.close()


def test_influxdb_2x_client_writes_with_a_user_password_token(srv):
    ic = pytest.importorskip("influxdb_client", reason="influxdb-client (2.x) is not installed")
    from influxdb_client.client.write_api import SYNCHRONOUS

    m = unique("v2client")
    wp = ic.WritePrecision.S
    with ic.InfluxDBClient(url=srv.url, token=f"{RW_USER}:{PWD}", org="x") as c:
        c.write_api(write_options=SYNCHRONOUS).write(
            bucket=RW_DB, record=ic.Point(m).tag("host", "b").field("v", 6.5).time(T0_S, wp),
            write_precision=wp)
    assert [typed(d) for d in fetch(srv, RW_DB, m)] == [
        expect(time=T0_MS, tags={"host": "b"}, v=6.5)]


def test_influxdb_2x_client_read_only_token_gets_403(srv):
    ic = pytest.importorskip("influxdb_client", reason="influxdb-client (2.x) is not installed")
    from influxdb_client.client.write_api import SYNCHRONOUS
    from influxdb_client.rest import ApiException

    m = unique("v2ro")
    wp = ic.WritePrecision.S
    with ic.InfluxDBClient(url=srv.url, token=f"{RO_USER}:{PWD}", org="x") as c:
        with pytest.raises(ApiException) as e:
            c.write_api(write_options=SYNCHRONOUS).write(
                bucket=RO_DB, record=ic.Point(m).field("v", 1.0).time(T0_S, wp),
                write_precision=wp)
    assert e.value.status == 403
    assert json.loads(e.value.body)["code"] == "forbidden"
    assert m not in collections(srv, RO_DB)


# --------------------------------------------------------------------------- cache invalidation


def test_password_changed_through_update_user_stops_working_on_the_next_request(srv):
    user = unique("rotating")
    srv.mongo.admin.command("createUser", user, pwd="old-pwd",
                            roles=[{"role": "readWrite", "db": RW_DB}])
    m = unique("rotate")
    # twice, so that the old password is certainly in the verified-password cache
    for i in range(2):
        r = write(srv, RW_DB, f"{m} v={i} {T0_S + i}", form="basic", user=user, password="old-pwd")
        assert_status(r, 204)
    srv.mongo.admin.command("updateUser", user, pwd="new-pwd")
    for form in ("basic", "token", "query"):
        r = write(srv, RW_DB, f"{m} v=9 {T0_S + 9}", form=form, user=user, password="old-pwd")
        assert_status(r, 401, BAD_CREDENTIALS)
    r = write(srv, RW_DB, f"{m} v=2 {T0_S + 2}", form="basic", user=user, password="new-pwd")
    assert_status(r, 204)
    assert [d["v"] for d in fetch(srv, RW_DB, m)] == [0.0, 1.0, 2.0]


def test_dropped_user_is_401_on_the_next_request(srv):
    user = unique("dropped")
    srv.mongo.admin.command("createUser", user, pwd=PWD, roles=[{"role": "readWrite", "db": RW_DB}])
    m = unique("drop")
    assert_status(write(srv, RW_DB, f"{m} v=1 {T0_S}", form="basic", user=user, password=PWD), 204)
    srv.mongo.admin.command("dropUser", user)
    r = write(srv, RW_DB, f"{m} v=2 {T0_S + 1}", form="basic", user=user, password=PWD)
    assert_status(r, 401, BAD_CREDENTIALS)
    assert len(fetch(srv, RW_DB, m)) == 1


def test_revoked_role_is_403_on_the_next_request(srv):
    user = unique("revoked")
    srv.mongo.admin.command("createUser", user, pwd=PWD, roles=[{"role": "readWrite", "db": RW_DB}])
    m = unique("revoke")
    assert_status(write(srv, RW_DB, f"{m} v=1 {T0_S}", form="basic", user=user, password=PWD), 204)
    srv.mongo.admin.command("revokeRolesFromUser", user, roles=[{"role": "readWrite", "db": RW_DB}])
    r = write(srv, RW_DB, f"{m} v=2 {T0_S + 1}", form="basic", user=user, password=PWD)
    assert_status(r, 403)
    assert len(fetch(srv, RW_DB, m)) == 1
    srv.mongo.admin.command("grantRolesToUser", user, roles=[{"role": "readWrite", "db": RW_DB}])
    r = write(srv, RW_DB, f"{m} v=3 {T0_S + 2}", form="basic", user=user, password=PWD)
    assert_status(r, 204)
    assert [d["v"] for d in fetch(srv, RW_DB, m)] == [1.0, 3.0]


# --------------------------------------------------------------------------- listening addresses


def non_loopback_ipv4():
    """An IPv4 address of this host that is not loopback (the one a default route would use),
    or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent for a UDP connect
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


@contextlib.contextmanager
def server_bound_to(bind_ip, *extra_args):
    """hourglass with `--bind_ip bind_ip` (conftest.running_server fixes 127.0.0.1) and
    `--httpPort`; yields (process, mongo port, http port) once the mongo port answers on
    127.0.0.1."""
    tmp = tempfile.TemporaryDirectory(prefix="hourglass-pytest-bind-")
    dbpath = Path(tmp.name) / "db"
    dbpath.mkdir()
    port, http_port = _free_port(), _free_port()
    log = open(Path(tmp.name) / "server.out", "wb")
    proc = subprocess.Popen(
        [str(_binary()), "--dbpath", str(dbpath), "--port", str(port), "--bind_ip", bind_ip,
         "--quiet", "--httpPort", str(http_port), *extra_args],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
        wait_for_port(http_port, proc)
        yield proc, port, http_port
    finally:
        stop_process(proc)
        log.close()
        tmp.cleanup()


def answers(ip, port):
    try:
        with socket.create_connection((ip, port), timeout=2):
            return True
    except OSError:
        return False


def test_with_auth_the_http_listener_binds_every_bind_ip_address():
    ip = non_loopback_ipv4()
    if ip is None:
        pytest.skip("this host has no non-loopback IPv4 address to bind")
    with server_bound_to(f"127.0.0.1,{ip}", "--auth") as (_, _, http_port):
        for host in ("127.0.0.1", ip):
            r = requests.get(f"http://{host}:{http_port}/ping", timeout=30)
            assert_status(r, 204)
            r = requests.post(f"http://{host}:{http_port}/write", params={"db": "x"},
                              data=b"m v=1", timeout=30)
            assert_status(r, 401, NO_CREDENTIALS)


def test_without_auth_the_http_listener_binds_loopback_only():
    ip = non_loopback_ipv4()
    if ip is None:
        pytest.skip("this host has no non-loopback IPv4 address to bind")
    with server_bound_to(f"127.0.0.1,{ip}") as (_, port, http_port):
        assert answers(ip, port), "the MongoDB port listens on every --bind_ip address"
        assert_status(requests.get(f"http://127.0.0.1:{http_port}/ping", timeout=30), 204)
        assert not answers(ip, http_port)
