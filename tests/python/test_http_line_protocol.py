"""InfluxDB line protocol over raw HTTP (requests): escaping, value forms, timestamps and
precisions, comments, malformed lines (400 with the line number, valid lines still written),
unknown databases (404 on both APIs), missing db (400), gzip bodies and the body size limit
(413). What lands is read back with pymongo from the time-series collections."""

import gzip
import re
import time
from decimal import Decimal

import pytest

requests = pytest.importorskip("requests", reason="requests is not installed")
from bson.int64 import Int64  # noqa: E402

from http_helpers import (  # noqa: E402
    T0_MS, T0_NS, T0_S, expect, fetch, http_running_server, per_test_database,
    post_lines, typed,
)

I64_MAX = 2**63 - 1


@pytest.fixture()
def dbname(http_server, request):
    with per_test_database(http_server, request, "lp_", 48, create=True) as name:
        yield name


def write_ok(srv, body, db, **kw):
    r = post_lines(srv, body, db=db, **kw)
    assert r.status_code == 204, (r.status_code, r.text)
    assert r.content == b""


def one(srv, db, coll):
    docs = fetch(srv, db, coll)
    assert len(docs) == 1, docs
    return docs[0]


# ---- escaping and value forms -------------------------------------------------------------------

def test_line_protocol_escaped_names_and_tag_values_round_trip(http_server, dbname):
    line = (r'my\ meas\,ure,tag\ key\,x\=y=val\ 1\,2\=3,path=C:\tmp '
            r'field\ k\,e\=y=1.5,n=1i ' + str(T0_NS))
    write_ok(http_server, line, dbname)
    assert typed(one(http_server, dbname, "my meas,ure")) == expect(
        time=T0_MS, tags={"path": "C:\\tmp", "tag key,x=y": "val 1,2=3"},
        **{"field k,e=y": 1.5, "n": Int64(1)})


def test_a_doubled_backslash_in_names_and_tag_values_is_stored_as_two(http_server, dbname):
    # InfluxDB unescapes only the delimiters (and quotes in measurements and field keys): a
    # backslash before anything else, another backslash included, stays
    line = r'unc\\m,path=\\fileserver\share,k\\x=a\\,b f\\k=1 ' + str(T0_NS)
    write_ok(http_server, line, dbname)
    assert typed(one(http_server, dbname, r"unc\\m")) == expect(
        time=T0_MS, tags={"path": r"\\fileserver\share", r"k\\x": r"a\,b"},
        **{r"f\\k": 1.0})


def test_quotes_and_equals_signs_unescape_in_measurements_and_field_keys_only(http_server,
                                                                             dbname):
    write_ok(http_server, r'q\"m\=x,t\"k=v\"x f\"\=k=1 ' + str(T0_NS), dbname)
    assert typed(one(http_server, dbname, 'q"m=x')) == expect(
        time=T0_MS, tags={r't\"k': r'v\"x'}, **{'f"=k': 1.0})


def test_line_protocol_string_fields_unescape_quotes_and_backslashes(http_server, dbname):
    line = (r'str a="say \"hi\" to C:\\dir\\",b="",c="commas, = and spaces",'
            r'd="lone \ backslash and \n",e="ünïcødé ✓" ' + str(T0_NS))
    write_ok(http_server, line, dbname)
    assert typed(one(http_server, dbname, "str")) == expect(
        time=T0_MS, a='say "hi" to C:\\dir\\', b="", c="commas, = and spaces",
        d="lone \\ backslash and \\n", e="ünïcødé ✓")


def test_line_protocol_tag_keys_are_sorted_and_untagged_lines_have_no_tags(http_server, dbname):
    write_ok(http_server, f"srt,zeta=1,alpha=2,mid=3 v=1 {T0_NS}\nsrt v=2 {T0_NS + 1_000_000}",
             dbname)
    docs = fetch(http_server, dbname, "srt")
    assert list(docs[0]["tags"]) == ["alpha", "mid", "zeta"]
    assert [typed(d) for d in docs] == [
        expect(time=T0_MS, tags={"alpha": "2", "mid": "3", "zeta": "1"}, v=1.0),
        expect(time=T0_MS + 1, v=2.0)]


def test_line_protocol_boolean_spellings(http_server, dbname):
    trues, falses = ["t", "T", "true", "True", "TRUE"], ["f", "F", "false", "False", "FALSE"]
    fields = [f"t{i}={s}" for i, s in enumerate(trues)] + [f"f{i}={s}" for i, s in enumerate(falses)]
    write_ok(http_server, f"bools {','.join(fields)} {T0_NS}", dbname)
    want = {f"t{i}": True for i in range(5)} | {f"f{i}": False for i in range(5)}
    assert typed(one(http_server, dbname, "bools")) == expect(time=T0_MS, **want)


def test_line_protocol_number_forms_and_integer_limits(http_server, dbname):
    line = (f"nums a=1.5,b=-2,c=1e3,d=-1.5E-3,e=0,i=-9223372036854775808i,j={I64_MAX}i,"
            f"k=0i,u0=0u,u1={I64_MAX}u {T0_NS}")
    write_ok(http_server, line, dbname)
    assert typed(one(http_server, dbname, "nums")) == expect(
        time=T0_MS, a=1.5, b=-2.0, c=1000.0, d=-0.0015, e=0.0, i=Int64(-2**63), j=Int64(I64_MAX),
        k=Int64(0), u0=Int64(0), u1=Int64(I64_MAX))


def test_unsigned_above_i64_max_is_decimal128(http_server, dbname):
    write_ok(http_server, f"big a={I64_MAX + 1}u,b={2**64 - 1}u,c=12u {T0_NS}", dbname)
    assert typed(one(http_server, dbname, "big")) == expect(
        time=T0_MS, a=Decimal(I64_MAX + 1), b=Decimal(2**64 - 1), c=Int64(12))


def test_comments_and_blank_lines_are_skipped(http_server, dbname):
    body = (f"# a comment\n\nc v=1 {T0_NS}\n\n\n# another, with = \"quotes\" and, commas\n"
            f"c v=2 {T0_NS + 1_000_000}\n")
    write_ok(http_server, body, dbname)
    assert [typed(d) for d in fetch(http_server, dbname, "c")] == [
        expect(time=T0_MS, v=1.0), expect(time=T0_MS + 1, v=2.0)]


# ---- timestamps -----------------------------------------------------------------------------

@pytest.mark.parametrize("precision,ts,ms,ns", [
    (None, T0_NS + 5, T0_MS, 5),
    ("n", T0_NS + 999_999_999, T0_MS + 999, 999_999),
    ("u", T0_NS // 1000 + 1, T0_MS, 1000),
    ("ms", T0_MS + 42, T0_MS + 42, None),
    ("s", T0_S + 42, T0_MS + 42_000, None),
    ("m", T0_S // 60 + 5, T0_MS + 300_000, None),
    ("h", T0_S // 3600 + 2, T0_MS + 7_200_000, None),
], ids=["default", "n", "u", "ms", "s", "m", "h"])
def test_v1_precisions_set_time_and_ns_remainder(http_server, dbname, precision, ts, ms, ns):
    write_ok(http_server, f"prec v=1 {ts}", dbname, precision=precision,
             extra_params={"rp": "autogen"})
    want = dict(time=ms, v=1.0) | ({} if ns is None else {"ns": ns})
    assert typed(one(http_server, dbname, "prec")) == expect(**want)


@pytest.mark.parametrize("precision,ts,ms,ns", [
    (None, T0_NS + 1_500_000, T0_MS + 1, 500_000),
    ("ns", T0_NS + 7, T0_MS, 7),
    ("us", T0_NS // 1000 + 1_001, T0_MS + 1, 1000),
    ("ms", T0_MS + 9, T0_MS + 9, None),
    ("s", T0_S + 9, T0_MS + 9000, None),
], ids=["default", "ns", "us", "ms", "s"])
def test_v2_precisions_set_time_and_ns_remainder(http_server, dbname, precision, ts, ms, ns):
    write_ok(http_server, f"prec v=1 {ts}", dbname, api="v2", precision=precision)
    want = dict(time=ms, v=1.0) | ({} if ns is None else {"ns": ns})
    assert typed(one(http_server, dbname, "prec")) == expect(**want)


def test_timestamps_before_1970_floor_to_the_millisecond(http_server, dbname):
    write_ok(http_server, "neg,k=a v=1 -1\nneg,k=b v=2 -1000001\nneg,k=c v=3 -2000000", dbname)
    docs = sorted(fetch(http_server, dbname, "neg"), key=lambda d: d["tags"]["k"])
    assert [typed(d) for d in docs] == [
        expect(time=-1, ns=999_999, tags={"k": "a"}, v=1.0),
        expect(time=-2, ns=999_999, tags={"k": "b"}, v=2.0),
        expect(time=-2, tags={"k": "c"}, v=3.0)]


@pytest.mark.parametrize("api,precision,step_ms", [
    ("v1", "h", 3_600_000), ("v1", "m", 60_000), ("v1", "s", 1000), ("v2", "s", 1000),
    ("v2", "ms", 1),
])
def test_missing_timestamp_is_arrival_time_truncated_to_the_precision(http_server, dbname, api,
                                                                      precision, step_ms):
    before = time.time_ns() // 1_000_000
    write_ok(http_server, "trunc v=1", dbname, api=api, precision=precision)
    doc = typed(one(http_server, dbname, "trunc"))
    assert set(doc) == {"time", "v"}
    t = doc["time"][1]
    # InfluxDB's SetPrecision: precision=h is the start of the current hour
    assert t % step_ms == 0, t
    assert before - step_ms - 1000 <= t <= time.time_ns() // 1_000_000 + 1000


def test_missing_timestamp_uses_arrival_time_in_ms(http_server, dbname):
    before = time.time_ns() // 1_000_000
    write_ok(http_server, "now v=1", dbname)
    after = time.time_ns() // 1_000_000
    doc = typed(one(http_server, dbname, "now"))
    assert set(doc) == {"time", "v"}  # no ns remainder for an arrival time
    # the server's clock is this machine's clock; a second of slack for its rounding
    assert before - 1000 <= doc["time"][1] <= after + 1000


def test_field_named_ns_is_allowed_when_the_timestamp_has_no_sub_ms_digits(http_server, dbname):
    write_ok(http_server, f"nsf ns=5i,v=1 {T0_MS}", dbname, precision="ms")
    assert typed(one(http_server, dbname, "nsf")) == expect(time=T0_MS, ns=5, v=1.0)


# ---- malformed lines ----------------------------------------------------------------------

GOOD1 = f"mal,k=a v=1 {T0_NS}"
GOOD3 = f"mal,k=b v=3 {T0_NS + 2_000_000}"
BAD_LINES = {
    "empty_field_value": f"mal v= {T0_NS}",
    "no_fields": "mal",
    "bad_timestamp": "mal v=1 12x",
    "bad_bool": f"mal v=tru {T0_NS}",
    "tag_without_value": f"mal,k v=1 {T0_NS}",
    "int_overflow": f"mal v=9223372036854775808i {T0_NS}",
    "uint_overflow": f"mal v=18446744073709551616u {T0_NS}",
    "negative_uint": f"mal v=-1u {T0_NS}",
    "field_named_time": f"mal time=1i {T0_NS}",
    "tag_named_time": f"mal,time=x v=1 {T0_NS}",
    "field_named_tags": f'mal tags="x" {T0_NS}',
    "field_named_ns_with_sub_ms_timestamp": f"mal ns=1i {T0_NS + 1}",
    "nul_in_tag_key": f"mal,k\x00x=y v=1 {T0_NS}",
    "nul_in_field_key": f"mal v\x00w=1 {T0_NS}",
    "duplicate_tag_key": f"mal,k=c,k=d v=1 {T0_NS}",
}


def stored_mal(srv, db):
    return sorted((d["tags"]["k"], d["v"]) for d in fetch(srv, db, "mal"))


@pytest.mark.parametrize("bad", list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_malformed_line_v1_is_400_naming_the_line_and_valid_lines_are_written(http_server, dbname,
                                                                              bad):
    r = post_lines(http_server, "\n".join([GOOD1, bad, GOOD3]), db=dbname)
    assert r.status_code == 400, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"error"}
    assert re.search(r"\bline 2\b", body["error"]), body
    assert "partial write" in body["error"], body
    assert stored_mal(http_server, dbname) == [("a", 1.0), ("b", 3.0)]


@pytest.mark.parametrize("bad", list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_malformed_line_v2_is_400_invalid_naming_the_line_and_nothing_is_written(
        http_server, dbname, bad):
    # InfluxDB 2.x: "All request data was rejected and not written"
    r = post_lines(http_server, "\n".join([GOOD1, bad, GOOD3]), db=dbname, api="v2")
    assert r.status_code == 400, (r.status_code, r.text)
    body = r.json()
    assert body["code"] == "invalid"
    assert re.search(r"\bline 2\b", body["message"]), body
    assert "partial write" not in body["message"], body
    assert "mal" not in http_server.mongo[dbname].list_collection_names()


def test_a_bad_line_in_a_v2_write_of_several_measurements_writes_none(http_server, dbname):
    body = "\n".join([f"first v=1 {T0_NS}", f"second time=1i {T0_NS}", f"third v=3 {T0_NS}"])
    r = post_lines(http_server, body, db=dbname, api="v2")
    assert r.status_code == 400, (r.status_code, r.text)
    assert re.search(r"\bline 2\b", r.json()["message"]), r.text
    assert http_server.mongo[dbname].list_collection_names() == []


def test_duplicate_tag_keys_are_refused_as_influxdb_does(http_server, dbname):
    r = post_lines(http_server, f"dup,a=1,a=2 v=1 {T0_NS}\nok v=1 {T0_NS}", db=dbname)
    assert r.status_code == 400, (r.status_code, r.text)
    assert "duplicate tags" in r.json()["error"], r.text
    assert "partial write" in r.json()["error"], r.text
    names = http_server.mongo[dbname].list_collection_names()
    assert "ok" in names and "dup" not in names, names


def test_empty_v2_write_is_400_writing_requires_points(http_server, dbname):
    for gzipped in (False, True):
        r = post_lines(http_server, b"", db=dbname, api="v2", gzipped=gzipped)
        assert r.status_code == 400, (r.status_code, r.text)
        assert r.json() == {"code": "invalid", "message": "writing requires points"}
    # 1.x writes nothing and answers 204
    assert post_lines(http_server, b"", db=dbname).status_code == 204


def test_a_line_that_is_not_utf8_is_400_and_the_lines_around_it_are_written(http_server, dbname):
    body = b"\n".join([GOOD1.encode(), b"mal,k=\xff\xfe v=2 " + str(T0_NS).encode(),
                        GOOD3.encode()])
    r = post_lines(http_server, body, db=dbname)
    assert r.status_code == 400, (r.status_code, r.text)
    assert re.search(r"\bline 2\b.*invalid UTF-8", r.json()["error"]), r.text
    assert stored_mal(http_server, dbname) == [("a", 1.0), ("b", 3.0)]


def test_a_repeated_field_key_keeps_its_last_value(http_server, dbname):
    write_ok(http_server, f"rep,k=a,j=1 v=1,w=2i,v=3 {T0_NS}", dbname)
    doc = one(http_server, dbname, "rep")
    assert doc["tags"] == {"j": "1", "k": "a"}
    assert (doc["v"], doc["w"]) == (3.0, 2)


def test_first_bad_line_is_named_when_several_are_bad(http_server, dbname):
    body = "\n".join([f"mal v=x {T0_NS}", GOOD1, "mal", GOOD3])
    r = post_lines(http_server, body, db=dbname)
    assert r.status_code == 400
    assert re.search(r"\bline 1\b", r.json()["error"]), r.text
    assert stored_mal(http_server, dbname) == [("a", 1.0), ("b", 3.0)]


def test_invalid_consistency_is_400_and_valid_ones_are_accepted(http_server, dbname):
    r = post_lines(http_server, f"cons v=1 {T0_NS}", db=dbname,
                   extra_params={"consistency": "two"})
    assert r.status_code == 400, (r.status_code, r.text)
    assert r.json() == {"error": "invalid consistency level"}
    for level in ("any", "one", "QUORUM", "all"):
        write_ok(http_server, f"cons,l={level} v=1 {T0_NS}", dbname,
                 extra_params={"consistency": level})
    assert len(fetch(http_server, dbname, "cons")) == 4


def test_body_of_only_bad_lines_is_400_and_writes_nothing(http_server, dbname):
    for api in ("v1", "v2"):
        r = post_lines(http_server, "mal\nmal v=", db=dbname, api=api)
        assert r.status_code == 400, (api, r.status_code, r.text)
        message = r.json()["error" if api == "v1" else "message"]
        assert re.search(r"\bline 1\b", message), r.text
    assert "mal" not in http_server.mongo[dbname].list_collection_names()


# ---- databases --------------------------------------------------------------------------------

def test_unknown_database_is_404_on_both_apis(http_server):
    r = post_lines(http_server, f"m v=1 {T0_NS}", db="lp_nosuchdb")
    assert r.status_code == 404
    assert r.json() == {"error": 'database not found: "lp_nosuchdb"'}
    r = post_lines(http_server, f"m v=1 {T0_NS}", db="lp_nosuchbucket", api="v2")
    assert r.status_code == 404
    assert r.json() == {"code": "not found", "message": 'bucket "lp_nosuchbucket" not found'}
    names = http_server.mongo.list_database_names()
    assert "lp_nosuchdb" not in names and "lp_nosuchbucket" not in names


def test_missing_db_parameter_is_400(http_server):
    assert post_lines(http_server, f"m v=1 {T0_NS}").status_code == 400
    assert post_lines(http_server, f"m v=1 {T0_NS}", api="v2").status_code == 400


# ---- gzip and the body limit -----------------------------------------------------------------------

def test_gzip_bodies_on_both_apis(http_server, dbname):
    lines = "\n".join(f"gz,api=v1 v={i}i {T0_NS + i * 1_000_000}" for i in range(1000))
    write_ok(http_server, lines, dbname, gzipped=True)
    write_ok(http_server, lines.replace("api=v1", "api=v2"), dbname, api="v2", gzipped=True)
    for api in ("v1", "v2"):
        docs = fetch(http_server, dbname, "gz", {"tags.api": api})
        assert [(int(d["time"]), d["v"]) for d in docs] == [(T0_MS + i, i) for i in range(1000)]


def test_multi_member_gzip_body_is_read_whole(http_server, dbname):
    body = b"".join(gzip.compress(f"mm v={i}i {T0_NS + i * 1_000_000}\n".encode())
                    for i in range(3))
    for api in ("v1", "v2"):
        r = requests.post(http_server.url + ("/write" if api == "v1" else "/api/v2/write"),
                          params={"db": dbname, "bucket": dbname, "org": "o"}, data=body,
                          headers={"Content-Encoding": "gzip"}, timeout=30)
        assert r.status_code == 204, (api, r.status_code, r.text)
    docs = fetch(http_server, dbname, "mm")
    assert sorted(d["v"] for d in docs) == [0, 0, 1, 1, 2, 2]


def test_junk_after_gzip_data_is_400_and_writes_nothing(http_server, dbname):
    body = gzip.compress(f"junk v=1 {T0_NS}\n".encode()) + b"trailing junk"
    for path in ("/write", "/api/v2/write"):
        r = requests.post(http_server.url + path,
                          params={"db": dbname, "bucket": dbname, "org": "o"}, data=body,
                          headers={"Content-Encoding": "gzip"}, timeout=30)
        assert r.status_code == 400, (path, r.status_code, r.text)
    assert http_server.mongo[dbname].list_collection_names() == []


def test_invalid_gzip_body_is_rejected_without_writing(http_server, dbname):
    r = requests.post(http_server.url + "/write", params={"db": dbname}, timeout=30,
                      data=b"\x1f\x8b\x08\x00garbage", headers={"Content-Encoding": "gzip"})
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert http_server.mongo[dbname].list_collection_names() == []


@pytest.fixture(scope="module")
def small_limit_server():
    with http_running_server("--setParameter", "httpMaxBodyBytes=4096",
                             "--setParameter", "httpAutoCreateDatabase=true") as srv:
        yield srv


def test_body_over_max_bytes_is_413(small_limit_server):
    srv = small_limit_server
    big = "\n".join(f"lim,n={i:04d} v={i}i {T0_NS + i}" for i in range(200))  # ~7 KB
    assert len(big) > 4096
    for api in ("v1", "v2"):
        assert post_lines(srv, big, db="limits", api=api).status_code == 413
    # small once compressed, over the limit once decompressed
    packed = gzip.compress(big.encode())
    assert len(packed) < 4096
    assert post_lines(srv, big, db="limits", gzipped=True).status_code == 413
    assert "lim" not in srv.mongo.limits.list_collection_names()
    small = "\n".join(f"lim,n={i:04d} v={i}i {T0_NS + i * 1_000_000}" for i in range(20))
    assert post_lines(srv, small, db="limits").status_code == 204
    assert srv.mongo.limits.lim.count_documents({}) == 20
