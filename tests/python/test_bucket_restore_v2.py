"""Direct inserts of compressed (control.version 2, BSONColumn) buckets into
system.buckets.<coll>, as mongorestore of a MongoDB 7.0 dump does, pinned through pymongo.
The buckets are built with tests/python/bsoncolumn_encode.py, an encoder written from
MongoDB's description of the format independently of the server's decoder: every kind of
column it writes (each double scale and raw bits, delta and delta-of-delta types, 128-bit
strings/binary/Decimal128, skips, run-length blocks, type changes, interleaved objects with
missing sub-fields, arrays) reads back exactly through find(); the decoded fields serve
queries; a column whose value count is not control.count, and a truncated or garbage column,
are refused with 121 before anything is written (and the server goes on serving); once
decoded, a version 2 bucket is held to the version 1 rules (a date for every measurement,
the span, the _id's time); restored buckets survive kill -9. The first tests check the
encoder itself against bytes spelled out in MongoDB's tests and against its own decoder."""

import datetime as dt
import math
import random
import signal
import struct

import bson
import pytest
from bson import Binary, Code, Decimal128, Int64, ObjectId, Regex, Timestamp
from pymongo import MongoClient
from pymongo.errors import BulkWriteError

from bsoncolumn_encode import SKIP, column, compressed_bucket, decode, encode, pack_simple8b
from conftest import running_server

T0 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
TS = {"timeField": "t", "metaField": "m"}
UTC = dt.timezone.utc


def at(seconds=0, minute=0, ms=0):
    return T0 + dt.timedelta(minutes=minute, seconds=seconds, milliseconds=ms)


# --- the encoder against MongoDB's own test vectors -----------------------------------

N = None
BIG = 0x70000 << 64  # 0b111 followed by 80 zero bits
# Simple-8b: values (None = skip) -> the blocks MongoDB's simple8b tests expect (hex, little
# endian words in order), keyed by the name of the MongoDB test.
SIMPLE8B_VECTORS = {
    "OnlySkip": ([N], "FEFFFFFFFFFFFFFF"),
    "OneValue": ([1], "1E00000000000000"),
    "MaxValue": ([0xFFFFFFFFFFFFFFE], "EEFFFFFFFFFFFFFF"),
    "MultipleValues": ([1, 2, 3], "1C00000200300000"),
    "MaxValues": ([1] * 60, "5255555555555555" * 2),
    "EncodeWithTrailingDirtyBits": ([1] * 7, "0801010101010101"),
    "BreakPendingIntoMultipleSimple8bBlocks":
        ([1] * 57 + [15], "5255555555555555" "9324499224499224" "078140201008041E"),
    "BreakPendingValuesIntoMultipleSimple8bWords":
        ([0] * 50 + [0xFFFFFFFFFFFF], "0200000000000000" "0300000000000000" "FEFFFFFFFFFF0F00"),
    "SkipAtSecondToLast": ([3, 3, 3, N, 7], "3A00033000FF7F00"),
    "LeadingSkips": ([N, N, 3, 8, 13], "FAFFFF3F0008D000"),
    "WordOfSkips": ([N] * 30 + [(1 << 30) + 1], "F2FFFFFFFFFFFFFF" "1E00000004000000"),
    "LargeSkipsFirst":
        ([N, 64] * 10, "17BFF55BBFF55B3F" "17D66FFDD66FFD16" "FDFFFFFF03010000"),
    "RleZeroThenRleAnotherValue":
        ([0] * 1920 + [1] * 270, "FF00000000000000" "5255555555555555" "1F00000000000000"),
    "Rle": ([1] * 180, "5255555555555555" "0F00000000000000" "5255555555555555"),
    "RleSkip": ([N] * 240, "F1FFFFFFFFFFFFFF" "0F00000000000000" "F1FFFFFFFFFFFFFF"),
    "FlushSkipRLE": ([N] * 121, "F1FFFFFFFFFFFFFF" "F1FFFFFFFFFFFFFF" "FEFFFFFFFFFFFFFF"),
    "RleChangeOfValue": ([1] * 300 + [7], "5255555555555555" "1F00000000000000"
                                          "5255555555555555" "7E00000000000000"),
    "RleFront": ([0] * 240, "1F00000000000000"),
    "Selector7BaseTest": ([57344] * 8, "27FD7EBFDFEFF7FB"),
    "Selector7BaseTestAndSkips": ([57344, N] * 4, "27FD7FFFDFFFF7FF"),
    "Selector7SingleZero": ([30] * 12, "E5BDF7DE7BEFBDF7"),
    "Selector7SkipEncoding": ([229376] * 7, "377F7F7F7F7F7F7F"),
    "Selector7IntegrationWithBaseEncoding": ([11, 11, 12615680, 12615680], "67B0002CF0817D60"),
    "Selector7IntegrationWithBaseEncodingOppositeDirection":
        ([12615680, 12615680, 11, 11], "671FD807060BC002"),
    "Selector7FullSelector1": ([64] * 9, "1796655996655916"),
    "Selector8SmallBaseTest": ([0x500000] * 7, "1855555555555555"),
    "Selector8SmallBaseTestAndSkip": ([7340032, N] * 3 + [7340032], "1875FF75FF75FF75"),
    "Selector8SmallSkipEncoding": ([17293822569102704640, N] * 3, "28FFFEFFFBFFEF3F"),
    "Selector8SmallNibbleShift": ([7864320] * 5, "3884273CE1094F78"),
    "Selector8SmallBitsAndNibble": ([549789368320] * 2, "6826000860028000"),
    "Selector8SmallAddSelector7FirstThen8": ([57344] * 4 + [7340032] * 3, "18E3E3E3E3757575"),
    "Selector8SmallAddBaseSelectorThen7Then8":
        ([6] + [57344] * 4 + [7340032] * 2, "1860E3E3E3E37575"),
    "Selector8SmallStartWith8SelectorAndAddSmallerValues":
        ([7340032] * 3 + [57344] * 3 + [6], "18757575E3E3E360"),
    "RleSevenSelector": ([57344] * 136, "27FD7EBFDFEFF7FB" "0F00000000000000" "27FD7EBFDFEFF7FB"),
    "RleEightSelectorSmall": ([7340032] * 134, "1875757575757575" "0F00000000000000"
                                               "1875757575757575"),
    # 128-bit values
    "EightSelectorLargeBase": ([BIG] * 6, "88F4E8D1A3478F1E"),
    "UInt128Zero": ([BIG, 0, 0, 0, 0], "98F4000000000000"),
    "Selector8LargeBaseTestAndSkip": ([BIG, N] * 3, "88F4FED3FB4FEF3F"),
    "Selector8LargeSkipEncoding": ([0xF << 124] * 5, "98FFF9CF7FFEF31F"),
    "Selector8LargeNibbleShift": ([1 << 127] * 6, "881F3F7EFCF8F123"),
    "Test128WithSmallValue": ([57344] * 8, "27FD7EBFDFEFF7FB"),
    "RleEightSelectorLarge": ([BIG] * 132, "88F4E8D1A3478F1E" "0F00000000000000"
                                          "88F4E8D1A3478F1E"),
}


@pytest.mark.parametrize("name", sorted(SIMPLE8B_VECTORS))
def test_encoder_matches_mongodb_simple8b_test_vectors(name):
    values, expected = SIMPLE8B_VECTORS[name]
    blocks, _ = pack_simple8b(values)
    got = b"".join(struct.pack("<Q", w) for w, _ in blocks)
    assert got.hex().upper() == expected
    assert sum(n for _, n in blocks) == len(values)


def _word(selector, bits, slots):
    """A plain Simple-8b block, assembled by hand."""
    w = selector
    for i, s in enumerate(slots):
        w |= s << (4 + i * bits)
    return struct.pack("<Q", w)


def _doc(**fields):
    return bson.encode(fields)


SKIP10, SKIP12, SKIP20 = 0x3FF, 0xFFF, 0xFFFFF
# Columns of objects as MongoDB's bsoncolumn tests lay them out (7.0's 0xF0 interleaved
# start): (values, the payload spelled out with the blocks the tests ask for).
COLUMN_VECTORS = {
    "Interleaved": (
        [{"x": 1, "y": 2}, {"x": 1, "y": 3}, {"x": 1, "y": 3}, SKIP, {"y": 4}, {"x": 1, "y": 3}],
        b"\xF0" + _doc(x=1, y=2)
        + b"\x80" + _word(9, 10, [0, 0, 0, SKIP10, SKIP10, 0])
        + b"\x80" + _word(9, 10, [0, 2, 0, SKIP10, 2, 1])
        + b"\x00\x00"),
    "InterleavedAfterNonInterleaved": (
        [1, {"x": 1, "y": 2}, {"x": 1, "y": 3}, {"x": 2, "y": 4}],
        b"\x10\x00" + struct.pack("<i", 1)
        + b"\xF0" + _doc(x=1, y=2)
        + b"\x80" + _word(12, 20, [0, 0, 2])
        + b"\x80" + _word(12, 20, [0, 2, 2])
        + b"\x00\x00"),
    "InterleavedLevels": (
        [{"root": {"x": 1}, "y": 2}, {"root": {"x": 2}, "y": 5}, {"root": {"x": 2}, "y": 5}],
        b"\xF0" + _doc(root={"x": 1}, y=2)
        + b"\x80" + _word(12, 20, [0, 2, 0])
        + b"\x80" + _word(12, 20, [0, 6, 0])
        + b"\x00\x00"),
    "InterleavedDoubleDifferentScale": (
        [{"x": 1.0, "y": 2.0}, {"x": 1.1, "y": 3.0}, {"x": 1.2, "y": 2.0}, {"x": 1.0},
         {"x": 1.5, "y": 2.0}],
        b"\xF0" + _doc(x=1.0, y=2.0)
        + b"\xA0" + _word(10, 12, [0, 2, 2, 3, 10])      # x10: 10, 11, 12, 10, 15
        + b"\x90" + _word(10, 12, [0, 2, 1, SKIP12, 0])  # x1: 2, 3, 2, -, 2
        + b"\x00\x00"),
}


@pytest.mark.parametrize("name", sorted(COLUMN_VECTORS))
def test_encoder_matches_mongodb_interleaved_column_layouts(name):
    values, expected = COLUMN_VECTORS[name]
    assert encode(values) == expected
    assert decode(expected) == values


def _random_values(r):
    kind = r.choice("dilbtsonxa")
    out = []
    for _ in range(r.randint(0, 300)):
        if r.random() < 0.1:
            out.append(SKIP)
            continue
        if r.random() < 0.05:
            kind = r.choice("dilbtsonxa")
        if out and out[-1] is not SKIP and r.random() < 0.3:
            out.append(out[-1])
            continue
        out.append({
            "d": lambda: r.choice([r.randint(-999, 999) / r.choice([1, 10, 100, 1e4, 1e8]),
                                   math.nan, -0.0, 0.1 + 0.2, 1e300, math.inf]),
            "i": lambda: r.randint(-2 ** 31, 2 ** 31 - 1) >> r.randint(0, 31),
            "l": lambda: Int64(r.randint(-2 ** 63, 2 ** 63 - 1) >> r.randint(0, 63)),
            "b": lambda: r.random() < 0.5,
            "t": lambda: at(ms=r.randint(0, 10 ** 7)),
            "s": lambda: r.choice(["", "a", "abc", "x" * 16, "y" * 17, "ab\x00", "é" * 3]),
            "o": lambda: ObjectId(bytes(r.randrange(256) for _ in range(4)) + b"\x01" * 5
                                  + bytes(r.randrange(256) for _ in range(3))),
            "n": lambda: None,
            "x": lambda: {k: r.randint(0, 9) for k in "abc" if r.random() < 0.7} or {"z": 1},
            "a": lambda: r.choice([[1, 2], [], ["x", {"k": 1}]]),
        }[kind]())
    return out


def test_encoder_round_trips_through_its_reference_decoder():
    r = random.Random(20260301)
    for _ in range(300):
        values = _random_values(r)
        back = decode(encode(values))
        assert [v if v is SKIP else bson.encode({"v": v}) for v in back] == \
               [v if v is SKIP else bson.encode({"v": v}) for v in values]


# --- restoring version 2 buckets through the server -----------------------------------

def features(*buckets):
    """What the encoder wrote in the buckets' columns (read back by its own decoder)."""
    stats = {}
    for b in buckets:
        for col in b["data"].values():
            decode(col, stats)
    return {
        "scales": {c >> 4 for c in stats.get("controls", [])},
        "selectors": stats.get("selectors", set()),
        "rle": any(s == 15 for s, _ in stats.get("selectors", set())),
        "literal_types": set(stats.get("literals", [])),
        "interleaved": stats.get("interleaved", 0),
    }


def ms(t):
    return int((t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp() * 1000)


def canon(doc):
    """A measurement as the exact BSON of each field (type, bits and sub-field order)."""
    return {k: bson.encode({"v": v}) for k, v in doc.items() if k != "_id"}


def restore(db, *buckets):
    db.create_collection("m", timeseries=TS)
    res = db["system.buckets.m"].insert_many(list(buckets))
    assert res.inserted_ids == [b["_id"] for b in buckets]


def assert_reads_back(coll, *series):
    """find() returns exactly the rows of `series` ((meta, rows) pairs), ignoring _id."""
    key = lambda d: (bson.encode({"m": d.get("m")}), ms(d["t"]))  # noqa: E731
    expected = sorted(({**r, "m": meta} for meta, rows in series for r in rows), key=key)
    got = sorted(coll.find(), key=key)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert canon(g) == canon(e), f"row {i}: got {g!r}, expected {e!r}"


def bucket(host, rows, **kw):
    return compressed_bucket({"host": host}, rows, "t", **kw)


def test_double_columns_at_every_scale_and_as_raw_bits_read_back_bit_exact(db):
    r = random.Random(1)
    v, walk = [], 0
    for divisor in (1, 10, 100, 10000, 100000000):  # a group at each scale
        for _ in range(70):
            walk += r.randint(-500, 500)
            v.append(walk / divisor)
    for divisor in (10, 1, 100, 10, 10000):          # and groups that rescale
        for _ in range(r.randint(5, 20)):
            walk += r.randint(-500, 500)
            v.append(walk / divisor)
    specials = [math.nan, 0.1 + 0.2, -0.0, 1e300, -1e-300, math.inf, -math.inf, 5e-324,
                2.0 ** 53 + 2, 0.0, -(2.0 ** 70), math.nan, 123456.789, 1.0]
    v += specials + [float(i) for i in range(30)]
    rows = [{"t": at(seconds=1 + 3 * i), "v": x} for i, x in enumerate(v)]
    # a second column that keeps switching between raw bits and small scales
    for i, row in enumerate(rows):
        row["w"] = specials[i % len(specials)] if i % 3 else float(i % 7) / 4
    b = bucket("a", rows)
    f = features(b)
    assert {0x8, 0x9, 0xA, 0xB, 0xC, 0xD} <= f["scales"]
    restore(db, b)
    assert_reads_back(db.m, ({"host": "a"}, rows))


def test_int32_int64_bool_and_date_columns_read_back_with_their_types(db):
    r = random.Random(2)
    i32 = [r.choice([r.randint(-5, 5), r.randint(-2 ** 31, 2 ** 31 - 1)]) for _ in range(60)]
    i32 += [-2 ** 31, 2 ** 31 - 1, -2 ** 31, 0, 2 ** 31 - 1]
    i32 += [1000 + 7 * k for k in range(40)]
    n = len(i32)
    i64 = [Int64(2 ** 63 - 1), Int64(-2 ** 63), Int64(0), Int64(-1), Int64(2 ** 40)]
    big = 5 << 50
    while len(i64) < 55:  # positive deltas with many trailing zero bits: selector 8 blocks
        big += r.randint(1, 7) << 24
        i64.append(Int64(big))
    while len(i64) < n:   # fewer trailing zero bits: selector 7 blocks
        big += r.randint(1, 7) << 9
        i64.append(Int64(big))
    flags = [bool(k % 2) for k in range(30)] + [True] * 40 + [False] * (n - 70)
    dates = [dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
             dt.datetime(1900, 1, 1, tzinfo=UTC), dt.datetime(2200, 6, 1, 12, tzinfo=UTC)]
    d = at()
    while len(dates) < n:
        d += dt.timedelta(milliseconds=r.choice([1000, 1000, 1000, 250, r.randint(1, 10 ** 6)]))
        dates.append(d)
    rows = [{"t": at(seconds=1 + 5 * k, ms=k), "i32": i32[k], "i64": i64[k], "flag": flags[k],
             "when": dates[k]} for k in range(n)]
    b = bucket("a", rows)
    f = features(b)
    assert any(s == 7 and e for s, e in f["selectors"]), f["selectors"]
    assert any(s == 8 and e for s, e in f["selectors"]), f["selectors"]
    restore(db, b)
    assert_reads_back(db.m, ({"host": "a"}, rows))
    got = db.m.find_one({"i64": Int64(2 ** 63 - 1)})
    assert type(got["i64"]) is Int64 and type(got["i32"]) is int and type(got["flag"]) is bool


def test_short_strings_as_128_bit_deltas_long_strings_and_binary_read_back(db):
    strings = [f"sensor-{k:04d}" for k in range(40)]               # low-byte deltas
    strings += ["", "a", "ab", "é", "€uro", "x" * 16, "y" * 16, "z" * 16]
    strings += [c + "0123456789abcde" for c in "abcdefgh"]          # 16 bytes, first byte moves
    strings += ["a long string of more than sixteen bytes"] * 5      # literal + repeats
    strings += ["short again", "ab\x00", "a\x00b", "tail"]            # long -> short delta
    strings += ["another long string, over sixteen", "x"]
    binaries = []
    for k in range(len(strings)):
        if k < 30:
            binaries.append(Binary(struct.pack("<I", 1000 + 3 * k), 0))   # 4-byte deltas
        elif k < 45:
            binaries.append(Binary(bytes([k]) * 16, 5))                    # 16 bytes
        elif k % 2:
            binaries.append(Binary(b"twenty bytes of data", 0))            # a literal
        else:
            binaries.append(Binary(b"\x00\x01", 128))                     # another subtype
    rows = [{"t": at(seconds=2 * k), "s": s, "bin": bb} for k, (s, bb) in
            enumerate(zip(strings, binaries))]
    b = bucket("a", rows)
    f = features(b)
    assert any(s == 8 and e >= 8 for s, e in f["selectors"]), f["selectors"]  # 128-bit nibbles
    restore(db, b)
    assert_reads_back(db.m, ({"host": "a"}, rows))
    assert db.m.count_documents({"s": "sensor-0017"}) == 1
    assert db.m.count_documents({"s": "a long string of more than sixteen bytes"}) == 5


def test_object_id_null_decimal128_and_timestamp_columns_read_back(db):
    process = b"\x11\x22\x33\x44\x55"
    oids, seconds, counter = [], 1_770_000_000, 0xFFFFF0
    for k in range(80):
        seconds += k % 3
        counter = (counter + 1 + k % 2) & 0xFFFFFF  # wraps past 2^24
        oids.append(ObjectId(struct.pack(">I", seconds) + process + counter.to_bytes(3, "big")))
    oids[10] = ObjectId(struct.pack(">I", seconds) + b"other" + b"\x00\x00\x01")  # not a delta
    decimals = [Decimal128(x) for x in ("0", "1.5", "-1.5", "1E+6000", "NaN", "-Infinity",
                                        "0.000001", "123456789012345678901234567890123")]
    decimals += [Decimal128(str(k * 10)) for k in range(72)]
    stamps = [Timestamp(1_770_000_000 + k // 4, k % 4 + 1) for k in range(70)]
    stamps += [Timestamp(0, 0), Timestamp(2 ** 32 - 1, 2 ** 32 - 1)]
    stamps += [Timestamp(5, k) for k in range(8)]
    rows = [{"t": at(seconds=3 * k), "oid": oids[k], "nothing": None, "dec": decimals[k],
             "ts": stamps[k]} for k in range(80)]
    b = bucket("a", rows)
    restore(db, b)
    assert_reads_back(db.m, ({"host": "a"}, rows))
    assert db.m.count_documents({"nothing": None}) == 80
    assert db.m.count_documents({"oid": oids[41]}) == 1


def test_sparse_fields_are_skips_and_read_back_missing_where_absent(db):
    n = 400
    rows = []
    for k in range(n):
        row = {"t": at(seconds=k * 5, ms=k)}
        if k < 10:
            row["early"] = k                 # then 390 trailing skips (run-length skips)
        if k >= 250:
            row["late"] = float(k) / 2       # 250 leading skips, before any literal
        if k % 3 == 0:
            row["every_third"] = f"v{k % 9}"
        if k % 50 == 7:
            row["rare"] = {"k": k}
        rows.append(row)
    b = bucket("a", rows)
    assert features(b)["rle"]
    assert b["data"]["late"][0] != 0x01      # the column starts with skips, not a literal
    restore(db, b)
    assert_reads_back(db.m, ({"host": "a"}, rows))
    assert db.m.count_documents({"late": {"$exists": False}}) == 250
    assert db.m.count_documents({"early": {"$exists": True}}) == 10


def test_a_long_run_of_equal_values_is_run_length_encoded_and_reads_back(db):
    n = 900
    rows = [{"t": at(seconds=3 * k), "const": 42, "temp": 21.5, "ramp": Int64(10 * k),
             "label": "steady"} for k in range(n)]
    for k in (300, 301, 600):
        rows[k]["const"] = 43
    b = bucket("a", rows)
    assert features(b)["rle"]
    assert len(b["data"]["const"]) < 200 and len(b["data"]["t"]) < 100
    restore(db, b)
    assert_reads_back(db.m, ({"host": "a"}, rows))
    assert db.m.count_documents({"const": 42}) == n - 3


def test_a_type_change_mid_column_starts_a_new_literal_and_reads_back(db):
    values = [1, 2, 3, "a", "b", 4.5, 5.5, 5.5, None, None, True, False, Int64(7), Int64(8),
              at(seconds=9), [1, 2], [1, 2], {"a": 1}, {"a": 2}, 9, Decimal128("1.1"), 10,
              Regex("^x", "i"), Regex("^x", "i"), Code("f()"), 11.0]
    rows = [{"t": at(seconds=k), "x": v} for k, v in enumerate(values)]
    b = bucket("a", rows)
    assert len(features(b)["literal_types"]) >= 10
    restore(db, b)
    assert_reads_back(db.m, ({"host": "a"}, rows))
    assert db.m.count_documents({"x": {"$type": "string"}}) == 2


def _objects(n):
    r = random.Random(3)
    out = []
    for k in range(n):
        o = {"temp": 20 + k / 10, "loc": {"x": k, "y": -k}, "status": "ok"}
        if k % 5 == 0:
            del o["status"]
        if k % 7 == 0:
            del o["loc"]["y"]
        if k % 11 == 0:
            del o["loc"]                     # a whole sub-object missing
        if k >= 30:
            o["extra"] = r.randint(0, 3)     # a field the reference gains later
        if k % 4 == 0:
            o["tags"] = ["a", "b"] if k % 8 else ["a"]
        if 70 <= k < 75:
            o["loc"] = {"x": "far", "y": -k}  # a type change inside a leaf
        out.append(o)
    special = {
        40: SKIP,                            # the measurement has no such field
        50: {"status": "ok", "temp": 1.0},   # another field order: a new interleaved run
        51: {"status": "ok", "temp": 2.0},
        60: {},                              # empty object: a literal
        61: {"loc": {}},                     # empty sub-object: a literal
    }
    return [special.get(k, o) for k, o in enumerate(out)]


def test_object_valued_fields_interleave_with_missing_sub_fields_and_read_back(db):
    objs = _objects(120)
    rows = [{"t": at(seconds=10 * k)} if o is SKIP else {"t": at(seconds=10 * k), "o": o}
            for k, o in enumerate(objs)]
    b = bucket("a", rows)
    f = features(b)
    assert f["interleaved"] >= 3 and 0x03 in f["literal_types"]
    restore(db, b)
    assert_reads_back(db.m, ({"host": "a"}, rows))
    assert db.m.count_documents({"o.loc.x": "far"}) == 5
    assert db.m.count_documents({"o.status": {"$exists": False}}) == 1 + sum(
        1 for o in objs if o is not SKIP and "status" not in o)


def test_array_valued_fields_are_literals_and_zero_deltas_and_read_back(db):
    arrays = [[1, 2, 3]] * 5 + [[1, 2, 4], [], [], ["x", {"k": 1}], [[1], [2]], SKIP,
                                [1.5, None, "s"]] + [[7]] * 130
    rows = [{"t": at(seconds=k)} if a is SKIP else {"t": at(seconds=k), "arr": a}
            for k, a in enumerate(arrays)]
    b = bucket("a", rows)
    f = features(b)
    assert 0x04 in f["literal_types"] and f["rle"]
    restore(db, b)
    assert_reads_back(db.m, ({"host": "a"}, rows))
    assert db.m.count_documents({"arr": 4}) == 1
    assert db.m.count_documents({"arr": 7}) == 130


def _fleet():
    """Two hosts, three buckets each (minutes 0, 1, 5), with a mix of columns."""
    series, buckets = [], []
    for h, host in enumerate(("alpha", "beta")):
        rows = []
        for minute in (0, 1, 5):
            part = [{"t": at(seconds=s, minute=minute, ms=h), "v": (s + minute) / 4, "n": s % 7,
                     "s": f"st{s % 3}"} for s in range(0, 60, 2)]
            if minute == 1:
                for row in part[::4]:
                    del row["n"]
            buckets.append(bucket(host, part))
            rows += part
        series.append(({"host": host}, rows))
    return series, buckets


def test_queries_on_restored_version_2_buckets_use_the_decoded_fields(db):
    series, buckets = _fleet()
    restore(db, *buckets)
    assert_reads_back(db.m, *series)
    everything = [dict(r, m=meta) for meta, rows in series for r in rows]
    assert db.m.count_documents({"v": {"$gte": 10}}) == sum(r["v"] >= 10 for r in everything)
    assert db.m.count_documents({"m.host": "beta", "n": 3}) == sum(
        r["m"]["host"] == "beta" and r.get("n") == 3 for r in everything)
    got = {d["_id"]: (d["count"], d["total"]) for d in db.m.aggregate(
        [{"$match": {"s": {"$ne": "st2"}}},
         {"$group": {"_id": "$m.host", "count": {"$sum": 1}, "total": {"$sum": "$n"}}}])}
    assert got == {h: (sum(1 for r in everything if r["m"]["host"] == h and r["s"] != "st2"),
                       sum(r.get("n", 0) for r in everything if r["m"]["host"] == h
                           and r["s"] != "st2"))
                   for h in ("alpha", "beta")}
    assert db.m.count_documents({"t": {"$gte": at(minute=5)}}) == 60
    # the restored series take new measurements as usual
    db.m.insert_one({"t": at(minute=6), "m": {"host": "alpha"}, "v": 1.0})
    assert db.m.count_documents({"m.host": "alpha"}) == 91


def _col(field, values):
    def change(b, rows):
        b["data"][field] = column(values(rows))
    return change


def _set_count(delta):
    def change(b, rows):
        b["control"]["count"] = len(rows) + delta
    return change


MISCOUNTS = {
    "a column with a value more": _col("v", lambda rows: [r["v"] for r in rows] + [9.0]),
    "a column with a value fewer": _col("v", lambda rows: [r["v"] for r in rows][:-1]),
    "a column with a trailing skip more": _col("v", lambda rows: [r["v"] for r in rows] + [SKIP]),
    "a time column with a value fewer": _col("t", lambda rows: [r["t"] for r in rows][:-1]),
    "a time column with a value more":
        _col("t", lambda rows: [r["t"] for r in rows] + [rows[-1]["t"]]),
    "control.count one more": _set_count(1),
    "control.count one fewer": _set_count(-1),
}


@pytest.mark.parametrize("why", sorted(MISCOUNTS))
def test_a_bucket_whose_columns_do_not_hold_control_count_values_is_refused_with_121(db, why):
    db.create_collection("m", timeseries=TS)
    rows = [{"t": at(seconds=k), "v": k / 2} for k in range(20)]
    b = bucket("a", rows)
    MISCOUNTS[why](b, rows)
    with pytest.raises(BulkWriteError) as e:
        db["system.buckets.m"].insert_many([b])
    err = e.value.details["writeErrors"][0]
    assert err["code"] == 121, (why, err)
    assert db.m.count_documents({}) == 0
    assert db["system.buckets.m"].count_documents({}) == 0


def _times(b, rows, change):
    times = [r["t"] for r in rows]
    change(times)
    b["data"]["t"] = column(times)


BROKEN_RULES = {
    "a time column with a skip":
        (lambda b, rows: _times(b, rows, lambda t: t.__setitem__(3, SKIP)), 121),
    "a time that is not a date":
        (lambda b, rows: _times(b, rows, lambda t: t.__setitem__(3, "x")), 121),
    "a measurement past the bucket's span":
        (lambda b, rows: _times(b, rows, lambda t: t.__setitem__(-1, at(minute=70))), 2),
    "an _id whose time is not control.min's":
        (lambda b, rows: b.__setitem__("_id", ObjectId.from_datetime(at(minute=300))), 2),
}


@pytest.mark.parametrize("why", sorted(BROKEN_RULES))
def test_a_version_2_bucket_is_held_to_the_version_1_rules_once_decoded(db, why):
    db.create_collection("m", timeseries=TS)
    rows = [{"t": at(seconds=k), "v": k / 2} for k in range(20)]
    b = bucket("a", rows)
    change, code = BROKEN_RULES[why]
    change(b, rows)
    with pytest.raises(BulkWriteError) as e:
        db["system.buckets.m"].insert_many([b])
    err = e.value.details["writeErrors"][0]
    assert err["code"] == code, (why, err)
    assert db.m.count_documents({}) == 0


def _good_payload():
    return encode([k / 2 for k in range(20)])


GARBAGE = {
    "truncated inside a block": lambda: _good_payload()[:-4],
    "no EOO at the end": lambda: _good_payload()[:-1],
    "bytes after the EOO": lambda: _good_payload() + b"\x00",
    "empty": lambda: b"",
    "random bytes": lambda: bytes(random.Random(5).randrange(256) for _ in range(64)),
    "a control byte with an invalid scale": lambda: (
        b"\x01\x00" + struct.pack("<d", 1.0) + b"\x30" + struct.pack("<Q", 0x1E) + b"\x00"),
    "a block count past the end": lambda: b"\x10\x00\x01\x00\x00\x00\x8F" + b"\x00" * 9,
    "a non-zero delta after a null": lambda: (
        b"\x0A\x00" + b"\x80" + struct.pack("<Q", (2 << 4) | 14) + b"\x00"),
    "a truncated literal": lambda: b"\x02\x00\x10\x00\x00\x00abc",
    "an interleaved reference without scalars": lambda: b"\xF0" + bson.encode({}) + b"\x00\x00",
}


@pytest.mark.parametrize("field", ["v", "t"])
@pytest.mark.parametrize("why", sorted(GARBAGE))
def test_a_truncated_or_garbage_column_is_refused_with_121_and_the_server_keeps_serving(
        db, client, why, field):
    db.create_collection("m", timeseries=TS)
    rows = [{"t": at(seconds=k), "v": k / 2} for k in range(20)]
    b = bucket("a", rows)
    b["data"][field] = Binary(GARBAGE[why](), 7)
    with pytest.raises(BulkWriteError) as e:
        db["system.buckets.m"].insert_many([b])
    err = e.value.details["writeErrors"][0]
    assert err["code"] == 121, (why, err)
    assert client.admin.command("ping")["ok"] == 1
    assert db.m.count_documents({}) == 0
    assert db["system.buckets.m"].count_documents({}) == 0
    # the same bucket with good columns goes in
    db["system.buckets.m"].insert_one(bucket("a", rows))
    assert_reads_back(db.m, ({"host": "a"}, rows))


def test_restored_version_2_buckets_survive_kill_9(tmp_path):
    series, buckets = _fleet()
    objs = [o for o in _objects(60) if o is not SKIP]
    extra = [{"t": at(seconds=k, minute=20), "o": o, "x": float(k)} for k, o in enumerate(objs)]
    buckets.append(bucket("gamma", extra))
    series.append(({"host": "gamma"}, extra))
    with running_server(dbpath=tmp_path) as (proc, port, _):
        db = MongoClient(port=port, directConnection=True).py_restore_v2
        db.create_collection("m", timeseries=TS)
        db["system.buckets.m"].insert_many(buckets)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with running_server(dbpath=tmp_path) as (_, port, _):
        db = MongoClient(port=port, directConnection=True).py_restore_v2
        assert db["system.buckets.m"].count_documents({}) == len(buckets)
        assert_reads_back(db.m, *series)
