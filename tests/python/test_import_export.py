"""`hourglass import` and `hourglass export`: mongoimport's and mongoexport's flags and
behaviour, run as the real binary against a running server and checked through pymongo."""

import datetime
import json
import os
import pty
import select
import subprocess

import pytest
from bson import Decimal128, Int64, ObjectId
from bson.codec_options import CodecOptions

from conftest import _binary, auth_server

UTC = datetime.timezone.utc
T0 = datetime.datetime(2016, 1, 1, tzinfo=UTC)
T0_MS = 1451606400000
AWARE = CodecOptions(tz_aware=True)


@pytest.fixture
def tool(server, db):
    """Runs `hourglass <import|export> ...` against the test's database."""
    host, port = server

    def run(kind, *args, input=None, check=True):
        cmd = [str(_binary()), kind, "--host", f"{host}:{port}", "--db", db.name, *map(str, args)]
        r = subprocess.run(cmd, input=input, capture_output=True, timeout=300,
                           text=isinstance(input, str) or input is None)
        if check and r.returncode != 0:
            raise AssertionError(f"{cmd} exited {r.returncode}: {r.stderr}")
        return r

    return run


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def docs(coll, **kw):
    return list(coll.with_options(codec_options=AWARE).find({}, {"_id": 0}, **kw))


# ---- formats into regular collections --------------------------------------------------------

def test_csv_with_header_line_types_values_like_mongoimport_and_nests_dotted_names(tool, db, tmp_path):
    f = write(tmp_path, "people.csv", 'name,age,score,big,tags.team,note\nann,31,1.5,3000000000,SF,"a, b"\nbob,,2,1,NYC,\n')
    r = tool("import", "--type", "csv", "--headerline", "--file", f)
    assert "2 document(s) imported successfully. 0 document(s) failed to import." in r.stderr
    got = docs(db.people, sort=[("name", 1)])
    assert got == [
        {"name": "ann", "age": 31, "score": 1.5, "big": 3000000000, "tags": {"team": "SF"}, "note": "a, b"},
        {"name": "bob", "age": "", "score": 2, "big": 1, "tags": {"team": "NYC"}, "note": ""},
    ]
    assert db.people.count_documents({"big": {"$type": "long"}, "age": {"$type": "int"}}) == 1
    assert isinstance(db.people.find_one({"name": "ann"})["_id"], ObjectId)


def test_ignore_blanks_leaves_empty_csv_values_out(tool, db, tmp_path):
    f = write(tmp_path, "x.csv", "a,b\n1,\n")
    tool("import", "--type", "csv", "--headerline", "--ignoreBlanks", "--file", f, "-c", "blanks")
    assert docs(db.blanks) == [{"a": 1}]


def test_tsv_with_fields_flag_and_extra_columns_named_by_position(tool, db, tmp_path):
    f = write(tmp_path, "t.tsv", "x\t1\textra\ny\t2\n")
    tool("import", "--type", "tsv", "--fields", "s,n", "--file", f)
    assert docs(db.t, sort=[("s", 1)]) == [{"s": "x", "n": 1, "field2": "extra"}, {"s": "y", "n": 2}]


def test_columns_have_types_reads_each_column_as_its_type(tool, db, tmp_path):
    f = write(tmp_path, "typed.csv",
              "id.int64(),price.decimal(),ok.boolean(),day.date_go(2006-01-02),code.string(),raw.binary(hex)\n"
              "7,1.10,true,2021-03-04,007,cafe\n")
    tool("import", "--type", "csv", "--headerline", "--columnsHaveTypes", "--file", f)
    d = db.typed.with_options(codec_options=AWARE).find_one({}, {"_id": 0})
    assert d == {"id": 7, "price": Decimal128("1.10"), "ok": True,
                 "day": datetime.datetime(2021, 3, 4, tzinfo=UTC), "code": "007", "raw": b"\xca\xfe"}
    assert db.typed.find_one({"id": {"$type": "long"}}) is not None


def test_parse_grace_skip_row_drops_rows_whose_values_do_not_parse(tool, db, tmp_path):
    f = write(tmp_path, "g.csv", "n.int32(),s.string()\nx,a\n2,b\n")
    tool("import", "--type", "csv", "--headerline", "--columnsHaveTypes", "--parseGrace", "skipRow", "--file", f)
    assert docs(db.g) == [{"n": 2, "s": "b"}]


def test_ndjson_and_concatenated_documents_import_with_extended_json_types(tool, db, tmp_path):
    f = write(tmp_path, "n.json",
              '{"a": 1, "when": {"$date": "2020-01-02T03:04:05.006Z"}, "l": {"$numberLong": "5"}}\n'
              '{"a": 2, "o": {"$oid": "5f0000000000000000000001"}} {"a": 3}\n')
    tool("import", "--file", f)
    got = docs(db.n, sort=[("a", 1)])
    assert got[0] == {"a": 1, "when": datetime.datetime(2020, 1, 2, 3, 4, 5, 6000, tzinfo=UTC), "l": 5}
    assert got[1] == {"a": 2, "o": ObjectId("5f0000000000000000000001")}
    assert got[2] == {"a": 3}
    assert db.n.find_one({"l": {"$type": "long"}}) is not None


def test_canonical_extended_json_keeps_every_numeric_type(tool, db, tmp_path):
    f = write(tmp_path, "canon.json",
              '{"i": {"$numberInt": "1"}, "l": {"$numberLong": "2"}, "d": {"$numberDouble": "3.0"},'
              ' "m": {"$numberDecimal": "4.5"}, "t": {"$date": {"$numberLong": "1451606400000"}}}\n')
    tool("import", "--file", f)
    assert db.canon.count_documents({"i": {"$type": "int"}, "l": {"$type": "long"},
                                     "d": {"$type": "double"}, "m": {"$type": "decimal"},
                                     "t": {"$type": "date"}}) == 1


def test_json_array_imports_every_element(tool, db, tmp_path):
    f = write(tmp_path, "arr.json", '[\n {"a": 1},\n {"a": 2}\n]\n')
    tool("import", "--jsonArray", "--file", f)
    assert sorted(d["a"] for d in docs(db.arr)) == [1, 2]


def test_standard_input_is_read_when_no_file_is_given(tool, db):
    tool("import", "-c", "stdin", input='{"a": 1}\n{"a": 2}\n')
    assert db.stdin.count_documents({}) == 2


# ---- time-series targets ---------------------------------------------------------------------

def test_csv_into_a_new_time_series_collection_parses_epoch_millisecond_times(tool, db, tmp_path):
    rows = "".join(f"{T0_MS + i * 10_000},host_{i % 2},{i}.5\n" for i in range(6))
    f = write(tmp_path, "cpu.csv", "time,tags.hostname,usage\n" + rows)
    tool("import", "--type", "csv", "--headerline", "--file", f, "--timeseries-timeField", "time",
         "--timeseries-metaField", "tags", "--timeseries-granularity", "seconds", "--timeFormat", "epoch_ms")
    info = db.command("listCollections", filter={"name": "cpu"})["cursor"]["firstBatch"][0]
    assert info["type"] == "timeseries"
    assert info["options"]["timeseries"]["timeField"] == "time"
    assert info["options"]["timeseries"]["metaField"] == "tags"
    got = docs(db.cpu, sort=[("time", 1)])
    assert len(got) == 6
    assert got[0] == {"time": T0, "tags": {"hostname": "host_0"}, "usage": 0.5}
    assert got[5]["time"] == T0 + datetime.timedelta(seconds=50)


def test_tsv_into_a_time_series_collection_with_rfc3339_times(tool, db, tmp_path):
    f = write(tmp_path, "m.tsv", "t\tm.id\tv\n2016-01-01T00:00:00Z\ts1\t1.5\n2016-01-01T00:00:10Z\ts1\t2\n")
    tool("import", "--type", "tsv", "--headerline", "--file", f, "--timeseries-timeField", "t",
         "--timeseries-metaField", "m")
    assert db.command("listCollections", filter={"name": "m"})["cursor"]["firstBatch"][0]["type"] == "timeseries"
    assert docs(db.m, sort=[("t", 1)]) == [{"t": T0, "m": {"id": "s1"}, "v": 1.5},
                                           {"t": T0 + datetime.timedelta(seconds=10), "m": {"id": "s1"}, "v": 2}]


@pytest.mark.parametrize("fmt,value", [
    ("auto", '"2016-01-01T00:00:00Z"'),
    ("rfc3339", '"2016-01-01T01:00:00+01:00"'),
    ("epoch_s", "1451606400"),
    ("epoch_us", "1451606400000000"),
    ("epoch_ns", "1451606400000000000"),
    ("auto", "1451606400000"),
    ("%d/%m/%Y %H:%M", '"01/01/2016 00:00"'),
])
def test_ndjson_time_field_in_any_supported_format_becomes_a_date(tool, db, tmp_path, fmt, value):
    f = write(tmp_path, "m.json", '{"t": %s, "meta": "a", "v": 1}\n' % value)
    tool("import", "--file", f, "--timeseries-timeField", "t", "--timeseries-metaField", "meta",
         "--timeFormat", fmt)
    assert docs(db.m) == [{"t": T0, "meta": "a", "v": 1}]


def test_a_time_value_that_does_not_parse_is_a_bad_row_with_its_line(tool, db, tmp_path):
    f = write(tmp_path, "bad_t.json", '{"t": "2016-01-01T00:00:00Z"}\n{"t": "soon"}\n')
    r = tool("import", "--file", f, "--timeseries-timeField", "t")
    assert f"{f}:2: " in r.stderr and "soon" in r.stderr
    assert "1 document(s) imported successfully. 1 document(s) failed to import." in r.stderr


def test_line_protocol_imports_as_the_http_write_path_stores_points(tool, db, tmp_path):
    f = write(tmp_path, "cpu.lp",
              f"cpu,host=a,region=eu usage=1.5,count=3i,up=true,msg=\"hi\" {T0_MS * 1_000_000}\n"
              f"cpu,host=b usage=2 {T0_MS * 1_000_000 + 1_000_000_000}\n"
              "this is not line protocol\n")
    r = tool("import", "--type", "influx", "--file", f)
    assert f"{f}:3: " in r.stderr
    info = db.command("listCollections", filter={"name": "cpu"})["cursor"]["firstBatch"][0]
    assert info["options"]["timeseries"]["timeField"] == "time"
    assert info["options"]["timeseries"]["metaField"] == "tags"
    got = docs(db.cpu, sort=[("time", 1)])
    assert got == [
        {"time": T0, "tags": {"host": "a", "region": "eu"}, "usage": 1.5, "count": 3, "up": True, "msg": "hi"},
        {"time": T0 + datetime.timedelta(seconds=1), "tags": {"host": "b"}, "usage": 2.0},
    ]
    assert db.cpu.count_documents({"count": {"$type": "long"}}) == 1


def test_line_protocol_precision_seconds(tool, db, tmp_path):
    f = write(tmp_path, "p.lp", f"p v=1 {T0_MS // 1000}\n")
    tool("import", "--type", "influx", "--precision", "s", "--file", f)
    assert docs(db.p)[0]["time"] == T0


def test_importing_into_an_existing_collection_that_is_not_time_series_is_refused(tool, db, tmp_path):
    db.create_collection("plain")
    f = write(tmp_path, "plain.json", '{"t": 1451606400000}\n')
    r = tool("import", "--file", f, "--timeseries-timeField", "t", check=False)
    assert r.returncode != 0 and "not a time-series collection" in r.stderr
    r = tool("import", "--file", f, "--timeseries-timeField", "t", "--drop")
    assert db.command("listCollections", filter={"name": "plain"})["cursor"]["firstBatch"][0]["type"] == "timeseries"


# ---- modes -----------------------------------------------------------------------------------

def test_upsert_mode_replaces_documents_matched_by_id_and_inserts_the_rest(tool, db, tmp_path):
    db.u.insert_many([{"_id": 1, "a": 1, "b": 1}, {"_id": 2, "a": 2, "b": 2}])
    f = write(tmp_path, "u.json", '{"_id": 1, "a": 10}\n{"_id": 3, "a": 30}\n')
    tool("import", "--mode", "upsert", "--file", f)
    assert list(db.u.find({}, sort=[("_id", 1)])) == [
        {"_id": 1, "a": 10}, {"_id": 2, "a": 2, "b": 2}, {"_id": 3, "a": 30}]


def test_upsert_fields_choose_the_match_and_merge_keeps_other_fields(tool, db, tmp_path):
    db.m.insert_many([{"name": "ann", "age": 1, "city": "x"}, {"name": "bob", "age": 2, "city": "y"}])
    f = write(tmp_path, "m.json", '{"name": "ann", "age": 31}\n{"name": "cy", "age": 5}\n')
    tool("import", "--mode", "merge", "--upsertFields", "name", "--file", f)
    assert docs(db.m, sort=[("name", 1)]) == [
        {"name": "ann", "age": 31, "city": "x"}, {"name": "bob", "age": 2, "city": "y"}, {"name": "cy", "age": 5}]
    tool("import", "--mode", "upsert", "--upsertFields", "name", "--file", f)
    assert docs(db.m, sort=[("name", 1)])[0] == {"name": "ann", "age": 31}


def test_csv_rows_merge_into_documents_matched_by_upsert_fields(tool, db, tmp_path):
    db.cm.insert_one({"name": "ann", "age": 1, "city": "x"})
    f = write(tmp_path, "cm.csv", "name,age\nann,31\nbob,5\n")
    tool("import", "--type", "csv", "--headerline", "--mode", "merge", "--upsertFields", "name", "--file", f)
    assert docs(db.cm, sort=[("name", 1)]) == [{"name": "ann", "age": 31, "city": "x"}, {"name": "bob", "age": 5}]


def test_delete_mode_deletes_one_matching_document_per_row(tool, db, tmp_path):
    db.d.insert_many([{"k": 1}, {"k": 1}, {"k": 2}, {"k": 3}])
    f = write(tmp_path, "d.json", '{"k": 1}\n{"k": 3}\n')
    r = tool("import", "--mode", "delete", "--upsertFields", "k", "--file", f)
    assert "2 document(s) imported successfully" in r.stderr
    assert sorted(d["k"] for d in db.d.find()) == [1, 2]


def test_duplicate_keys_are_reported_by_line_and_the_rest_imports(tool, db, tmp_path):
    db.dup.insert_one({"_id": 2})
    f = write(tmp_path, "dup.json", '{"_id": 1}\n{"_id": 2}\n{"_id": 3}\n')
    r = tool("import", "--file", f)
    assert r.returncode == 0
    assert f"{f}:2: " in r.stderr and "E11000" in r.stderr
    assert "2 document(s) imported successfully. 1 document(s) failed to import." in r.stderr
    assert db.dup.count_documents({}) == 3


def test_stop_on_error_stops_at_the_first_bad_document(tool, db, tmp_path):
    db.stop.insert_one({"_id": 2})
    f = write(tmp_path, "stop.json", '{"_id": 1}\n{"_id": 2}\n{"_id": 3}\n')
    r = tool("import", "--stopOnError", "--file", f, check=False)
    assert r.returncode != 0
    assert f"{f}:2: " in r.stderr
    assert db.stop.find_one({"_id": 3}) is None


def test_a_malformed_json_line_is_reported_and_with_stop_on_error_ends_the_import(tool, db, tmp_path):
    f = write(tmp_path, "mal.json", '{"a": 1}\n{"a": \n{"a": 3}\n')
    r = tool("import", "--file", f)
    assert f"{f}:2: invalid JSON" in r.stderr
    assert db.mal.count_documents({}) >= 1
    db.mal.drop()
    r = tool("import", "--file", f, "--stopOnError", "--batchSize", "1", "--maintainInsertionOrder", check=False)
    assert r.returncode != 0
    assert db.mal.count_documents({"a": 3}) == 0


def test_connection_string_and_file_may_be_positional_as_in_mongoimport(server, db, tmp_path):
    host, port = server
    f = write(tmp_path, "pos.json", '{"a": 1}\n')
    uri = f"mongodb://{host}:{port}/{db.name}"
    r = subprocess.run([str(_binary()), "import", uri, str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert docs(db.pos) == [{"a": 1}]
    r = subprocess.run([str(_binary()), "export", uri, "-c", "pos"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout)["a"] == 1, r.stderr


def test_drop_replaces_the_collection(tool, db, tmp_path):
    db.dropme.insert_one({"old": True})
    f = write(tmp_path, "dropme.json", '{"new": true}\n')
    tool("import", "--drop", "--file", f)
    assert docs(db.dropme) == [{"new": True}]


def test_csv_without_field_names_is_refused_before_connecting(tool, tmp_path):
    f = write(tmp_path, "nf.csv", "1,2\n")
    r = tool("import", "--type", "csv", "--file", f, check=False)
    assert r.returncode != 0 and "--headerline" in r.stderr


def test_many_workers_and_small_batches_import_every_row(tool, db, tmp_path):
    f = write(tmp_path, "w.json", "".join('{"i": %d}\n' % i for i in range(5000)))
    tool("import", "--numInsertionWorkers", "4", "--batchSize", "64", "--file", f)
    assert db.w.count_documents({}) == 5000
    assert sorted(d["i"] for d in db.w.find()) == list(range(5000))


# ---- export and round trips ------------------------------------------------------------------

def sample_docs():
    return [{"_id": ObjectId(), "i": i, "l": Int64(i * 10), "d": i + 0.25, "s": f"s{i}",
             "t": T0 + datetime.timedelta(seconds=i), "nested": {"x": i, "arr": [1, "two"]},
             "dec": Decimal128("1.5")} for i in range(50)]


def test_canonical_json_export_then_import_gives_identical_documents(tool, db, tmp_path):
    db.src.insert_many(sample_docs())
    out = tmp_path / "src.json"
    r = tool("export", "-c", "src", "--jsonFormat", "canonical", "--out", out)
    assert "exported 50 record(s)" in r.stderr
    tool("import", "-c", "copy", "--file", out)
    assert list(db.copy.find(sort=[("i", 1)])) == list(db.src.find(sort=[("i", 1)]))


def test_json_array_export_then_import_of_a_time_series_collection(tool, db, tmp_path):
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    db.ts.insert_many([{"t": T0 + datetime.timedelta(seconds=i), "m": {"h": i % 3}, "v": float(i)} for i in range(30)])
    out = tmp_path / "ts.json"
    tool("export", "-c", "ts", "--jsonArray", "--jsonFormat", "canonical", "--out", out)
    assert json.loads(out.read_text())[0]["t"] == {"$date": {"$numberLong": str(T0_MS)}}
    tool("import", "-c", "ts2", "--jsonArray", "--file", out, "--timeseries-timeField", "t",
         "--timeseries-metaField", "m")
    key = [("t", 1), ("m.h", 1)]
    assert list(db.ts2.find(sort=key)) == list(db.ts.find(sort=key))


def test_export_query_sort_skip_limit_and_fields(tool, db):
    db.q.insert_many([{"i": i, "even": i % 2 == 0, "x": "y"} for i in range(20)])
    r = tool("export", "-c", "q", "--query", '{"even": true}', "--sort", '{"i": -1}', "--skip", "1",
             "--limit", "3", "--fields", "i")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [d["i"] for d in lines] == [16, 14, 12]
    assert all(set(d) == {"_id", "i"} for d in lines)


def test_csv_export_writes_fields_as_mongoexport_does(tool, db):
    oid = ObjectId()
    db.c.insert_one({"_id": oid, "a": {"b": 1}, "s": "x,y", "t": T0, "arr": [1, 2]})
    r = tool("export", "-c", "c", "--type", "csv", "--fields", "_id,a.b,s,t,arr,missing")
    assert r.stdout.splitlines() == [
        "_id,a.b,s,t,arr,missing",
        f'ObjectId({oid}),1,"x,y",2016-01-01T00:00:00.000Z,"[1,2]",',
    ]
    r = tool("export", "-c", "c", "--type", "csv", check=False)
    assert r.returncode != 0 and "field list" in r.stderr


def test_csv_export_then_import_with_header_line(tool, db, tmp_path):
    db.rt.insert_many([{"n": i, "name": f"n{i}", "g": {"h": i * 2}} for i in range(10)])
    out = tmp_path / "rt.csv"
    tool("export", "-c", "rt", "--type", "csv", "--fields", "n,name,g.h", "--out", out)
    tool("import", "-c", "rt2", "--type", "csv", "--headerline", "--file", out)
    assert docs(db.rt2, sort=[("n", 1)]) == docs(db.rt, sort=[("n", 1)])


def test_parquet_export_of_a_time_series_collection_is_read_by_duckdb_with_equal_aggregates(tool, db, tmp_path):
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (scripts/test.sh installs it from PyPI)")
    db.create_collection("cpu", timeseries={"timeField": "time", "metaField": "tags"})
    db.cpu.insert_many([{"time": T0 + datetime.timedelta(seconds=10 * i),
                         "tags": {"hostname": f"host_{i % 4}", "region": "eu"},
                         "usage": (i * 7) % 100 + 0.5, "n": i} for i in range(2000)])
    out = tmp_path / "cpu.parquet"
    r = tool("export", "-c", "cpu", "--type", "parquet", "--out", out)
    assert "exported 2000 record(s)" in r.stderr
    con = duckdb.connect()
    cols = [c[0] for c in con.execute(f"DESCRIBE SELECT * FROM '{out}'").fetchall()]
    assert cols[:3] == ["time", "tags.hostname", "tags.region"]
    got = con.execute(f'SELECT "tags.hostname", avg(usage), max(n), count(*), min(time) FROM \'{out}\' '
                      'GROUP BY 1 ORDER BY 1').fetchall()
    want = list(db.cpu.aggregate([
        {"$group": {"_id": "$tags.hostname", "avg": {"$avg": "$usage"}, "max": {"$max": "$n"},
                    "count": {"$sum": 1}, "first": {"$min": "$time"}}},
        {"$sort": {"_id": 1}}]))
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        assert g[0] == w["_id"] and g[1] == pytest.approx(w["avg"]) and g[2] == w["max"] and g[3] == w["count"]
        assert g[4].replace(tzinfo=UTC) == w["first"].replace(tzinfo=UTC)
    # ...and imports back into a time-series collection with the same measurements.
    tool("import", "-c", "cpu2", "--type", "parquet", "--file", out, "--timeseries-timeField", "time",
         "--timeseries-metaField", "tags")
    key = [("time", 1), ("tags.hostname", 1)]
    assert docs(db.cpu2, sort=key) == docs(db.cpu, sort=key)


def test_parquet_written_by_duckdb_imports_with_its_types(tool, db, tmp_path):
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (scripts/test.sh installs it from PyPI)")
    f = tmp_path / "d.parquet"
    duckdb.connect().execute(
        "COPY (SELECT i::INTEGER AS i, i * 1.5::DOUBLE AS x, (i * 1.5)::DECIMAL(9,2) AS dec, 'h' || i AS \"m.h\", "
        "TIMESTAMP '2016-01-01 00:00:00' + to_seconds(i) AS t, NULL::VARCHAR AS gone "
        f"FROM range(5) r(i)) TO '{f}' (FORMAT parquet)").fetchall()
    tool("import", "--type", "parquet", "--file", f, "-c", "fromduck")
    got = docs(db.fromduck, sort=[("i", 1)])
    assert got[1] == {"i": 1, "x": 1.5, "dec": Decimal128("1.50"), "m": {"h": "h1"},
                      "t": T0 + datetime.timedelta(seconds=1)}


# ---- access control ---------------------------------------------------------------------------

def test_import_and_export_authenticate_with_username_password_or_uri(tmp_path):
    f = write(tmp_path, "secure.json", '{"a": 1}\n')
    with auth_server(user="root", pwd="pw") as (_, port, _):
        base = [str(_binary())]
        ok = subprocess.run(base + ["import", "--port", str(port), "-u", "root", "-p", "pw",
                                    "--authenticationDatabase", "admin", "--db", "s", "--file", str(f)],
                            capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0, ok.stderr
        out = subprocess.run(base + ["export", "--uri", f"mongodb://root:pw@127.0.0.1:{port}/s?authSource=admin",
                                     "-c", "secure"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["a"] == 1
        bad = subprocess.run(base + ["import", "--port", str(port), "-u", "root", "-p", "wrong",
                                     "--db", "s", "--file", str(f)], capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0 and "Failed:" in bad.stderr
        anonymous = subprocess.run(base + ["import", "--port", str(port), "--db", "s", "--file", str(f)],
                                   capture_output=True, text=True, timeout=60)
        assert anonymous.returncode != 0


# ---- progress --------------------------------------------------------------------------------

def run_on_a_terminal(cmd, timeout=600):
    """Runs `cmd` with its standard error on a pseudo-terminal; returns (exit code, output)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            p.kill()
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(), out.decode(errors="replace")


def test_a_million_row_import_shows_progress_on_a_terminal_and_finishes(server, db, tmp_path):
    host, port = server
    f = tmp_path / "million.csv"
    with open(f, "w") as out:
        out.write("time,h,v\n")
        for i in range(1_000_000):
            out.write(f"{T0_MS + i * 1000},h{i % 10},{i % 97}\n")
    code, output = run_on_a_terminal([
        str(_binary()), "import", "--host", f"{host}:{port}", "--db", db.name, "--type", "csv",
        "--headerline", "--file", str(f), "--timeseries-timeField", "time", "--timeseries-metaField", "h",
        "--timeFormat", "epoch_ms", "--numInsertionWorkers", "2"])
    assert code == 0, output
    assert "rows/s" in output and "ETA" in output and "MiB" in output
    assert "1000000 document(s) imported successfully. 0 document(s) failed to import." in output
    assert db.million.count_documents({}) == 1_000_000
