"""The web console on the HTTP listener (`--httpPort`; crates/http/src/console.rs and
console_api.rs): the page and its vendored uPlot are served from the binary; /console/api runs
only read commands (a write, `$out` or `$merge` is 403), as the HTTP caller (401 without
credentials under --auth, 403 without the privilege); and a real headless Chromium draws a
server-downsampled chart of TSBS-like data whose machine-readable summary (#chart-summary)
matches what pymongo computes with the same $dateTrunc/$group aggregate and what Python
computes from the raw measurements.

Chromium comes from Debian (installed with apt-get when `chromium` is not on PATH; the browser
test skips with the reason when that fails). The screenshot is written to
$HOURGLASS_ARTIFACT_DIR (default tests/python/artifacts/, git-ignored) as console.png and its path printed."""

import datetime
import html.parser
import os
import random
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlencode

import pytest

requests = pytest.importorskip("requests", reason="requests is not installed")

from conftest import _free_port, auth_server, debian_binary  # noqa: E402
from http_helpers import HOST, MS_CODEC, http_running_server, wait_for_port  # noqa: E402
from test_auth import connect  # noqa: E402

VENDOR = Path(__file__).resolve().parents[2] / "crates" / "http" / "console" / "vendor"
DB, COLL = "console_db", "cpu"
FIELDS = ["usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait"]
HOSTS, DURATION_S, STEP_S = 10, 7200, 10
T0 = datetime.datetime(2016, 1, 1, tzinfo=datetime.timezone.utc)  # as TSBS
T0_MS = int(T0.timestamp() * 1000)


def tsbs_documents(seed=17):
    """TSBS cpu-only-like measurements: HOSTS hosts, one every STEP_S s for DURATION_S s, ten
    tags under `tags`, each field a random walk in [0, 100]."""
    rnd = random.Random(seed)
    regions = ["us-east-1", "us-west-2", "eu-west-1", "ap-southeast-1"]
    tags = []
    for i in range(HOSTS):
        region = rnd.choice(regions)
        tags.append({"hostname": f"host_{i}", "region": region,
                     "datacenter": region + rnd.choice("abc"), "rack": str(rnd.randrange(100)),
                     "os": "Ubuntu16.04LTS", "arch": rnd.choice(["x64", "x86"]),
                     "team": rnd.choice(["SF", "NYC", "LON"]), "service": str(rnd.randrange(20)),
                     "service_version": str(rnd.randrange(2)),
                     "service_environment": rnd.choice(["production", "staging"])})
    state = [[rnd.uniform(0, 100) for _ in FIELDS] for _ in range(HOSTS)]
    docs = []
    for step in range(DURATION_S // STEP_S):
        t = T0 + datetime.timedelta(seconds=step * STEP_S)
        for h in range(HOSTS):
            doc = {"time": t, "tags": tags[h]}
            for k, name in enumerate(FIELDS):
                state[h][k] = min(100.0, max(0.0, state[h][k] + rnd.uniform(-1, 1)))
                doc[name] = state[h][k]
            docs.append(doc)
    return docs


def load(client):
    db = client[DB]
    db.drop_collection(COLL)
    db.create_collection(COLL, timeseries={"timeField": "time", "metaField": "tags",
                                           "granularity": "seconds"})
    docs = tsbs_documents()
    db[COLL].insert_many(docs, ordered=False)
    return len(docs)


@pytest.fixture(scope="module")
def srv():
    with http_running_server() as s:
        s.loaded = load(s.mongo)
        yield s


def command(srv_url, body, headers=None, auth=None):
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    return requests.post(srv_url + "/console/api/command", json=body, headers=hdrs, auth=auth,
                         timeout=60)


# ---- the page and its files ---------------------------------------------------------------

def test_console_page_is_served(srv):
    r = requests.get(srv.url + "/console", timeout=30)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["Content-Type"].startswith("text/html")
    assert '<script src="/console/vendor/uPlot.iife.min.js"' in r.text
    assert '<script src="/console/console.js"' in r.text
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    root = requests.get(srv.url + "/", allow_redirects=False, timeout=30)
    assert root.status_code in (301, 302, 303, 307, 308)
    assert root.headers["Location"] == "/console"
    js = requests.get(srv.url + "/console/console.js", timeout=30)
    assert js.status_code == 200 and "javascript" in js.headers["Content-Type"]
    assert "/console/api/command" in js.text


@pytest.mark.parametrize("name,kind", [("uPlot.iife.min.js", "javascript"),
                                       ("uPlot.min.css", "text/css"),
                                       ("uPlot.LICENSE", "text/plain")])
def test_vendored_uplot_is_served(srv, name, kind):
    r = requests.get(f"{srv.url}/console/vendor/{name}", timeout=30)
    assert r.status_code == 200
    assert kind in r.headers["Content-Type"]
    assert r.content == (VENDOR / name).read_bytes()
    if name.endswith(".js"):
        assert b"uPlot" in r.content


# ---- the command API -------------------------------------------------------------------------

def test_api_runs_read_commands(srv):
    r = command(srv.url, {"listCollections": 1, "$db": DB})
    assert r.status_code == 200, r.text
    colls = {c["name"]: c for c in r.json()["cursor"]["firstBatch"]}
    assert colls[COLL]["type"] == "timeseries"
    assert colls[COLL]["options"]["timeseries"]["metaField"] == "tags"

    r = command(srv.url, {"count": COLL, "query": {"tags.hostname": "host_3"}, "$db": DB})
    assert r.json() == {"n": DURATION_S // STEP_S, "ok": 1.0}

    # Extended JSON in (a date) and out (relaxed: {"$date": "..."}); a cursor followed by getMore.
    start = {"$date": "2016-01-01T01:00:00Z"}
    r = command(srv.url, {"find": COLL, "filter": {"tags.hostname": "host_1", "time": {"$gte": start}},
                          "sort": {"time": 1}, "batchSize": 100, "$db": DB})
    assert r.status_code == 200, r.text
    cursor = r.json()["cursor"]
    docs = cursor["firstBatch"]
    assert docs[0]["time"] == {"$date": "2016-01-01T01:00:00Z"}
    while cursor["id"] not in (0, {"$numberLong": "0"}):
        r = command(srv.url, {"getMore": cursor["id"], "collection": COLL, "batchSize": 100, "$db": DB})
        assert r.status_code == 200, r.text
        cursor = r.json()["cursor"]
        docs += cursor["nextBatch"]
    assert len(docs) == (DURATION_S - 3600) // STEP_S

    r = command(srv.url, {"buildInfo": 1, "$db": "admin"})
    assert r.status_code == 200 and "version" in r.json()


@pytest.mark.parametrize("body", [
    {"insert": COLL, "documents": [{"time": {"$date": "2016-01-01T00:00:00Z"}}]},
    {"delete": COLL, "deletes": [{"q": {}, "limit": 0}]},
    {"drop": COLL},
    {"dropDatabase": 1},
    {"aggregate": COLL, "pipeline": [{"$match": {}}, {"$out": "copy"}], "cursor": {}},
    {"aggregate": COLL, "pipeline": [{"$merge": {"into": "copy"}}], "cursor": {}},
    {"aggregate": COLL, "pipeline": [{"$facet": {"a": [{"$out": "copy"}]}}], "cursor": {}},
], ids=["insert", "delete", "drop", "dropDatabase", "$out", "$merge", "$out-in-$facet"])
def test_api_refuses_writes(srv, body):
    r = command(srv.url, dict(body, **{"$db": DB}))
    assert r.status_code == 403, r.text
    reply = r.json()
    assert reply["ok"] == 0 and reply["code"] == 13 and reply["codeName"] == "Unauthorized"
    assert srv.mongo[DB][COLL].count_documents({}) == srv.loaded
    assert "copy" not in srv.mongo[DB].list_collection_names()


def test_api_refuses_other_sites(srv):
    ok = {"buildInfo": 1, "$db": "admin"}
    # Not JSON: a cross-site form or text/plain POST (no CORS preflight) is refused.
    r = requests.post(srv.url + "/console/api/command", data='{"buildInfo": 1, "$db": "admin"}',
                      headers={"Content-Type": "text/plain"}, timeout=30)
    assert r.status_code == 415
    r = command(srv.url, ok, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and r.json()["code"] == 13
    # DNS rebinding: a name other than localhost, without access control.
    r = command(srv.url, ok, headers={"Host": f"evil.example:{srv.http_port}"})
    assert r.status_code == 403
    assert command(srv.url, ok, headers={"Origin": srv.url}).status_code == 200
    r = command(srv.url, ok, headers={"Host": f"localhost:{srv.http_port}"})
    assert r.status_code == 200
    r = command(srv.url, {"find": COLL})
    assert r.status_code == 400 and r.json()["code"] == 40571


def test_summary_reports_bucket_statistics(srv):
    r = requests.get(srv.url + "/console/api/summary", params={"db": DB, "coll": COLL}, timeout=60)
    assert r.status_code == 200, r.text
    s = r.json()
    stats = srv.mongo[DB].command("collStats", COLL)
    assert s["bucketCount"] == stats["timeseries"]["bucketCount"] > 0
    assert s["bucketBytes"] == stats["size"]
    assert s["measurements"] == srv.loaded
    assert s["bytesPerMeasurement"] == pytest.approx(stats["size"] / srv.loaded)
    # 5 doubles, a date and ten string tags are ~400 bytes of BSON; buckets store far less.
    assert s["avgMeasurementBsonSize"] > 300
    assert s["compressionRatio"] > 2
    assert s["collStats"]["timeseries"]["bucketsNs"] == f"{DB}.system.buckets.{COLL}"


# ---- access control -----------------------------------------------------------------------------

def test_console_under_auth_needs_a_login():
    root, root_pwd, reader, pwd = "console_root", "root-secret", "console_reader", "reader-secret"
    http_port = _free_port()
    with auth_server("--httpPort", str(http_port), user=root, pwd=root_pwd) as (proc, port, _):
        wait_for_port(http_port, proc)
        admin = connect(port, root, root_pwd)
        try:
            admin.admin.command("createUser", reader, pwd=pwd, roles=[{"role": "read", "db": DB}])
            admin[DB].plain.insert_one({"x": 1})
            admin["other_db"].plain.insert_one({"x": 1})
        finally:
            admin.close()
        url = f"http://{HOST}:{http_port}"
        r = requests.get(url + "/console", timeout=30)
        assert r.status_code == 401
        assert r.headers["WWW-Authenticate"].startswith("Basic")
        assert command(url, {"buildInfo": 1, "$db": "admin"}).status_code == 401
        assert requests.get(url + "/console/api/summary", params={"db": DB, "coll": "plain"},
                            timeout=30).status_code == 401
        assert requests.get(url + "/console", auth=(reader, "wrong"), timeout=30).status_code == 401

        r = requests.get(url + "/console", auth=(reader, pwd), timeout=30)
        assert r.status_code == 200 and "uPlot" in r.text
        r = command(url, {"find": "plain", "filter": {}, "$db": DB}, auth=(reader, pwd))
        assert r.status_code == 200, r.text
        assert [d["x"] for d in r.json()["cursor"]["firstBatch"]] == [1]
        r = command(url, {"listDatabases": 1, "nameOnly": True, "authorizedDatabases": True,
                          "$db": "admin"}, auth=(reader, pwd))
        assert r.status_code == 200, r.text
        assert [d["name"] for d in r.json()["databases"]] == [DB]
        # The dispatcher's access checks apply: no privilege on other_db.
        r = command(url, {"find": "plain", "$db": "other_db"}, auth=(reader, pwd))
        assert r.status_code == 403 and r.json()["code"] == 13, r.text
        # With access control on, any Host name is fine (the request carries credentials).
        r = command(url, {"buildInfo": 1, "$db": "admin"}, auth=(reader, pwd),
                    headers={"Host": f"db.example:{http_port}"})
        assert r.status_code == 200


# ---- a real browser -----------------------------------------------------------------------------

def chromium_binary():
    """chromium from Debian, installed by apt-get when missing; skips when it can't be."""
    return debian_binary(("chromium", "chromium-browser"), "chromium")


def run_chromium(binary, *args, size="1200,800", timeout=180):
    with tempfile.TemporaryDirectory(prefix="hourglass-chromium-") as profile:
        cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
               f"--window-size={size}", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd} exited {r.returncode}:\n{r.stderr[-2000:]}"
    return r.stdout


class _Elements(html.parser.HTMLParser):
    """The attributes of every element with an id or a data-field attribute."""

    def __init__(self):
        super().__init__()
        self.by_id, self.fields, self.canvases = {}, {}, 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        a["tag"] = tag
        if "id" in a:
            self.by_id[a["id"]] = a
        if "data-field" in a:
            self.fields[a["data-field"]] = a
        if tag == "canvas":
            self.canvases += 1

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)


def bin_ms(unit, size):
    return {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000,
            "day": 86_400_000}[unit] * size


def test_browser_draws_the_downsampled_chart(srv, tmp_path):
    chromium = chromium_binary()
    host, field = "host_3", "usage_user"
    # All of the series but its first minute. An 800 px window leaves the chart ~500 px for
    # 7,140 s: 15 s bins, so each point stands for one or two 10 s measurements.
    start_ms, end_ms = T0_MS + 60_000, T0_MS + (DURATION_S - STEP_S) * 1000

    def iso(ms):
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc) \
            .strftime("%Y-%m-%dT%H:%M:%SZ")

    query = urlencode({"db": DB, "coll": COLL, "by": "tags.hostname", "meta": host,
                       "field": field, "from": iso(start_ms), "to": iso(end_ms)})
    url = f"{srv.url}/console?{query}"
    dom = run_chromium(chromium, "--virtual-time-budget=15000", "--dump-dom", url, size="800,800")
    page = _Elements()
    page.feed(dom)
    error = page.by_id.get("error", {})
    assert "hidden" in error, "the page shows an error: " + dom[dom.find('id="error"'):][:400]
    summary = page.by_id.get("chart-summary")
    assert summary is not None and "data-points" in summary, \
        f"no chart summary in the DOM:\n{dom[:3000]}"
    assert page.canvases >= 1, "uPlot drew no canvas"
    assert "uplot" in dom and "u-wrap" in dom
    assert summary["data-meta"] == host and summary["data-fields"] == field
    assert int(summary["data-from"]) == start_ms and int(summary["data-to"]) == end_ms
    unit, size = summary["data-unit"], int(summary["data-bin-size"])
    points, lo, hi = int(summary["data-points"]), float(summary["data-min"]), float(summary["data-max"])
    width = int(summary["data-width"])
    print(f"chart: {width} px wide, {points} points of {size} {unit}")
    # About as many groups as the chart has pixel columns (bins come in 1-2-5 steps).
    assert width / 4 <= points <= width, (unit, size, points, width)
    assert bin_ms(unit, size) > STEP_S * 1000, "the server did not downsample"

    # The server's answer to the same aggregate, through pymongo.
    coll = srv.mongo[DB].get_collection(COLL, codec_options=MS_CODEC)
    rows = list(coll.aggregate([
        {"$match": {"tags.hostname": host,
                    "time": {"$gte": datetime.datetime.fromtimestamp(start_ms / 1000, datetime.timezone.utc),
                             "$lte": datetime.datetime.fromtimestamp(end_ms / 1000, datetime.timezone.utc)}}},
        {"$group": {"_id": {"$dateTrunc": {"date": "$time", "unit": unit, "binSize": size}},
                    "lo": {"$min": f"${field}"}, "hi": {"$max": f"${field}"}}},
        {"$sort": {"_id": 1}}]))
    assert points == len(rows)
    assert lo == min(r["lo"] for r in rows) and hi == max(r["hi"] for r in rows)

    # And from the raw measurements: bins of `size` units since 2000-01-01 (as $dateTrunc).
    span = bin_ms(unit, size)
    ref = 946_684_800_000
    raw = [(int(d["time"].timestamp() * 1000), d[field]) for d in tsbs_documents()
           if d["tags"]["hostname"] == host]
    raw = [(t, v) for t, v in raw if start_ms <= t <= end_ms]
    bins = {ref + (t - ref) // span * span for t, _ in raw}
    assert points == len(bins)
    assert lo == min(v for _, v in raw) and hi == max(v for _, v in raw)
    assert page.fields[field]["data-min"] == summary["data-min"]

    artifacts = Path(os.environ.get("HOURGLASS_ARTIFACT_DIR") or Path(__file__).parent / "artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "console.png"
    run_chromium(chromium, "--virtual-time-budget=15000", f"--screenshot={shot}", url)
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"console screenshot: {shot}")
