"""A BSONColumn encoder (BinData subtype 7, the `data` fields of MongoDB's compressed,
`control.version: 2`, time-series buckets), written for the tests from MongoDB's published
description of the format, plus a small decoder that follows the same description (used to
check the encoder, never by the server under test).

What the encoder relies on (in our words):

Binary layout. A column is a sequence of "control" items ended by one 0x00 byte:
  * Literal: a whole BSON element whose field name is empty (type byte, 0x00, value). Any
    type byte has its top three bits clear, which is how a literal is told apart from the
    other control bytes. A literal is one value and resets the decoding state.
  * Simple-8b group: one control byte then 1..16 little-endian 64-bit Simple-8b blocks.
    The low nibble is the block count minus one. The high nibble says how a double is
    scaled: 0x8 = the IEEE bits taken as an int64, 0x9 = x1, 0xA = x10, 0xB = x100,
    0xC = x10000, 0xD = x100000000 (other nibbles are invalid). Non-double types are
    written with 0x8 (the nibble is ignored for them). Each slot is one value: a zigzag
    encoded delta (or delta of delta) from the previous value, or a skip (the value is
    missing from that measurement). Before the first literal only skips can appear.
  * Interleaved start 0xF0 (what MongoDB 7.0 writes; later versions add 0xF1 and 0xF2,
    which also recurse into arrays): followed by a "reference object"
    (a plain BSON document, not itself a value) holding every scalar path of a run of
    objects in order. Each scalar leaf (sub-documents are recursed into; arrays are leaves
    in this mode) is a separate stream that starts from the leaf's reference value as if
    it had been a literal. The streams' control items (Simple-8b groups or literals) are
    written in the order the decoder needs them: it rebuilds object k by visiting the
    leaves in order, and a leaf whose current group is used up reads the next control
    item from the shared buffer. A 0x00 read by the first leaf when its group is used up
    ends the run and the column returns to regular mode (a run at the end of the column
    therefore ends with 0x00 0x00). A skip in a leaf omits that field; a sub-document with
    no field left is omitted; an object with nothing left is a missing value.

Simple-8b blocks. The low 4 bits are the selector; slots fill the word from the low end.
  * Selectors 1..14 hold 60,30,20,15,12,10,8,7,6,5,4,3,2,1 values of 1,2,3,4,5,6,7,8,10,
    12,15,20,30,60 bits, starting at bit 4, except selectors 7 and 8 whose slots start at
    bit 8 (bits 4..7 hold an "extension" nibble, 0 for these plain forms).
  * Selector 7 with extension e = 1..9: 9,8,7,6,5,4,3,2,1 slots of 2,3,4,5,7,10,14,24,52
    value bits each followed (below them) by a 4-bit count of trailing zero bits removed.
  * Selector 8 with extension e = 1..7: 7..1 slots of 4,5,7,10,14,24,52 value bits plus a
    4-bit count of removed zero *nibbles*; e = 8..13: 6..1 slots of 4,6,9,13,23,51 value
    bits plus a 5-bit nibble count (meant for 128-bit values).
  * Selector 15 is run-length: (bits 4..7 + 1) * 120 repeats of the previous slot value
    (the last slot decoded by this stream's decoder, across control bytes; 0 right after
    a literal). A slot whose bits are all ones (value and zero count) is a skip.
  * Selector 0 is never written. Blocks are always full: a selector holding exactly as
    many values as are left is chosen.

Values. Deltas are wrapping subtractions turned unsigned by zigzag ((d << 1) ^ (d >> 63),
128-bit alike). Types:
  * int32, int64, bool: delta of the value. Date (ms), Timestamp (as uint64) and ObjectId
    use delta of delta (after a literal the previous delta is 0; a 0 slot means "same
    delta", not "same value"). An ObjectId is packed into an integer whose bytes, from the
    least significant, are counter[2] time[3] counter[1] time[2] counter[0] time[1]
    time[0] (time[0..3] and counter[0..2] being its bytes 0..3 and 9..11 as stored; so
    112233445566778899AABBCC packs to 0x1122AA33BB44CC, the order every released
    MongoDB uses; an early development version interleaved them the other way); its
    5 process bytes (4..8) are copied from the previous ObjectId, so only ObjectIds
    sharing them can be deltas.
  * double: the value is scaled by the group's multiplier and rounded half away from zero;
    the scale must give back exactly the same bits (and |scaled| <= 2^53), else the raw
    bits (0x8) are used. At the start of each group the decoder re-encodes its last value
    with the group's scale, so that value must also be exact at that scale.
  * 128-bit: strings and code of up to 16 bytes not starting with NUL (the bytes reversed,
    zero padded to 16, as a little-endian integer -- i.e. the string read big-endian), and
    binary data of up to 16 bytes (zero padded, little-endian; deltas only between values
    of the same length and subtype, the decoder copies those from the previous value),
    Decimal128 (its 16 bytes as a little-endian integer). A longer string/binary counts
    as 0 for the next delta.
  * A 0 delta of a non delta-of-delta type repeats the previous value whatever its type,
    so null, arrays, long strings, regexes... are a literal followed by 0 deltas. A value
    of another type, or a delta that cannot be stored, is a new literal.

What `encode` emits: literals; Simple-8b groups with every plain and extended selector
(at each point the densest block that the next values fill exactly), run-length blocks for
>= 120 repeats of the previous slot value (runs of skips too; also as the first block
after a literal, and as the first block of a later control byte of the same run -- but as
the first block after a change of double scale only when the carried value is 0, as
MongoDB's builder starts that value afresh there while its decoder carries it); skips,
also before the first literal; doubles at the smallest exact scale (a
group keeps its scale while values are exact at it; a value needing a larger one rescales a
group of fewer than 60 values, else starts a new group; after 60 values a value a smaller
scale holds starts a new group there), raw bits when no scale is exact (NaN, -0.0,
infinities, 0.1 + 0.2, huge or tiny values), a literal when even the raw delta does not fit;
128-bit deltas for short strings, binary of equal length and subtype, and Decimal128, and a
delta from 0 after a long string; 0xF0 interleaved runs for non-empty objects (reference =
the run's fields merged in order, each leaf holding the first value seen; a new run when
the field order or an object/scalar kind conflicts), with skips for missing sub-fields or
objects and literals inside a stream on a type change; arrays (top level, or as leaves
inside objects) and empty objects as literals plus 0 deltas for repeats.
It does not emit the 0xF1/0xF2 interleaved forms of later versions (arrays interleaved),
selector 0, or scale nibbles other than 0x8 on non-double types, and it refuses
MinKey/MaxKey (7.0 cannot store them).
"""

import datetime as _dt
import hashlib
import math
import struct

import bson
from bson import ObjectId

__all__ = ["SKIP", "encode", "column", "decode", "compressed_bucket", "pack_simple8b"]


class _Skip:
    _it = None

    def __new__(cls):
        if cls._it is None:
            cls._it = super().__new__(cls)
        return cls._it

    def __repr__(self):
        return "SKIP"


SKIP = _Skip()

M64 = (1 << 64) - 1
M128 = (1 << 128) - 1

# --- BSON element helpers -------------------------------------------------------------

T_DOUBLE, T_STRING, T_OBJECT, T_ARRAY, T_BINARY, T_UNDEFINED, T_OID, T_BOOL, T_DATE = (
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09)
T_NULL, T_REGEX, T_DBPOINTER, T_CODE, T_SYMBOL, T_CODEWSCOPE = 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F
T_INT32, T_TIMESTAMP, T_INT64, T_DECIMAL = 0x10, 0x11, 0x12, 0x13
T_MINKEY, T_MAXKEY = 0xFF, 0x7F

DOD_TYPES = {T_OID, T_DATE, T_TIMESTAMP}
WIDE_TYPES = {T_STRING, T_CODE, T_BINARY, T_DECIMAL}


def _value_size(t, buf, at):
    """Size of the value of type `t` starting at buf[at]."""
    i32 = lambda p: struct.unpack_from("<i", buf, p)[0]  # noqa: E731
    if t in (T_DOUBLE, T_DATE, T_TIMESTAMP, T_INT64):
        return 8
    if t in (T_STRING, T_CODE, T_SYMBOL):
        return 4 + i32(at)
    if t in (T_OBJECT, T_ARRAY, T_CODEWSCOPE):
        return i32(at)
    if t == T_BINARY:
        return 5 + i32(at)
    if t in (T_UNDEFINED, T_NULL, T_MINKEY, T_MAXKEY):
        return 0
    if t == T_OID:
        return 12
    if t == T_BOOL:
        return 1
    if t == T_REGEX:
        e = buf.index(b"\x00", at)
        return buf.index(b"\x00", e + 1) + 1 - at
    if t == T_DBPOINTER:
        return 4 + i32(at) + 12
    if t == T_INT32:
        return 4
    if t == T_DECIMAL:
        return 16
    raise ValueError(f"unknown BSON type 0x{t:02x}")


def _elements(doc):
    """(name, type, value bytes) of each element of a BSON document."""
    out, at, end = [], 4, struct.unpack_from("<i", doc, 0)[0] - 1
    while at < end:
        t = doc[at]
        z = doc.index(b"\x00", at + 1)
        name = doc[at + 1:z].decode()
        n = _value_size(t, doc, z + 1)
        out.append((name, t, bytes(doc[z + 1:z + 1 + n])))
        at = z + 1 + n
    return out


def _element(value):
    """(type, value bytes) of a Python/bson value, as pymongo encodes it."""
    raw = bson.encode({"": value})
    return raw[4], raw[6:-1]


def _literal(t, val):
    return bytes([t, 0]) + val


def _document(items):
    """A BSON document from (name, type, value bytes)."""
    body = b"".join(bytes([t]) + n.encode() + b"\x00" + v for n, t, v in items)
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def _to_python(t, val):
    return bson.decode(_document([("v", t, val)]))["v"]


# --- numbers --------------------------------------------------------------------------

def _s64(x):
    x &= M64
    return x - (1 << 64) if x >> 63 else x


def _s128(x):
    x &= M128
    return x - (1 << 128) if x >> 127 else x


def zigzag(d, width=64):
    return ((d << 1) ^ (d >> (width - 1))) & ((1 << width) - 1)


def unzigzag(z):
    return (z >> 1) ^ -(z & 1)


SCALES = (1.0, 10.0, 100.0, 10000.0, 100000000.0)
RAW = 5
NIBBLE_FOR_SCALE = (0x9, 0xA, 0xB, 0xC, 0xD, 0x8)
SCALE_FOR_NIBBLE = {n: s for s, n in enumerate(NIBBLE_FOR_SCALE)}


def _bits(x):
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _from_bits(b):
    return struct.unpack("<d", struct.pack("<q", _s64(b)))[0]


def _round_half_away(y):
    f = math.floor(y)
    d = y - f
    if d > 0.5 or (d == 0.5 and y > 0):
        f += 1
    return int(f)


def double_at_scale(x, scale):
    """The integer a double is stored as at `scale`, or None when that is not exact."""
    if scale == RAW:
        return _bits(x)
    m = SCALES[scale]
    y = x * m
    if not (-(2.0 ** 53) <= y <= 2.0 ** 53):  # also false for NaN
        return None
    r = _round_half_away(y)
    return r if _bits(r / m) == _bits(x) else None


def _exact_scales(x):
    return [s for s in range(6) if double_at_scale(x, s) is not None]


def _double_step(a, b, scale):
    """Whether b can follow a in a group at `scale`: both exact there, delta storable."""
    ea, eb = double_at_scale(a, scale), double_at_scale(b, scale)
    return ea is not None and eb is not None and storable(zigzag(_s64(eb - ea)))


def _best_scale(a, b):
    return next((s for s in range(RAW + 1) if _double_step(a, b, s)), None)


def _double_slots(start, values, scale):
    out, prev = [], double_at_scale(start, scale)
    for v in values:
        if v is None:
            out.append(None)
        else:
            cur = double_at_scale(v, scale)
            out.append(zigzag(_s64(cur - prev)))
            prev = cur
    return out


def _oid_int(b):
    return int.from_bytes(bytes([b[11], b[3], b[10], b[2], b[9], b[1], b[0], 0]), "little")


def _oid_bytes(v, process):
    e = (v & M64).to_bytes(8, "little")
    return bytes([e[6], e[5], e[3], e[1]]) + process + bytes([e[4], e[2], e[0]])


def _small_string(s):
    """The 128-bit integer of a string/code of <= 16 bytes, or None."""
    if len(s) > 16 or (s and s[0] == 0):
        return None
    return int.from_bytes(s, "big")


def _string_bytes(val):  # value bytes of a string element -> raw string bytes
    return val[4:-1]


def _wide_value(t, val):
    """The 128-bit integer a literal of a 128-bit type starts a delta run from (None = not
    encodable, which the decoder treats as 0)."""
    if t in (T_STRING, T_CODE):
        return _small_string(_string_bytes(val))
    if t == T_BINARY:
        data = val[5:]
        return int.from_bytes(data.ljust(16, b"\x00"), "little") if len(data) <= 16 else None
    if t == T_DECIMAL:
        return int.from_bytes(val, "little")
    raise AssertionError(t)


def _narrow_value(t, val):
    """The int64 a literal of a 64-bit type starts a delta run from."""
    if t == T_OID:
        return _oid_int(val)
    if t in (T_DATE, T_INT64, T_TIMESTAMP):
        return struct.unpack("<q", val)[0]
    if t == T_INT32:
        return struct.unpack("<i", val)[0]
    if t == T_BOOL:
        return val[0]
    return 0


# --- Simple-8b ------------------------------------------------------------------------

# (kind, selector nibble, extension nibble, slots, value bits, zero-count bits, zero unit,
# first slot shift). kind: 0 plain, 1 selector 7 extended, 2 selector 8 (4-bit nibble
# count), 3 selector 8 (5-bit nibble count).
_PLAIN = [(60, 1), (30, 2), (20, 3), (15, 4), (12, 5), (10, 6), (8, 7), (7, 8), (6, 10),
          (5, 12), (4, 15), (3, 20), (2, 30), (1, 60)]
SELECTORS = (
    [(0, s, 0, n, b, 0, 0, 8 if s in (7, 8) else 4) for s, (n, b) in enumerate(_PLAIN, 1)]
    + [(1, 7, e, n, b, 4, 1, 8) for e, (n, b) in
       enumerate(zip(range(9, 0, -1), (2, 3, 4, 5, 7, 10, 14, 24, 52)), 1)]
    + [(2, 8, e, n, b, 4, 4, 8) for e, (n, b) in
       enumerate(zip(range(7, 0, -1), (4, 5, 7, 10, 14, 24, 52)), 1)]
    + [(3, 8, e, n, b, 5, 4, 8) for e, (n, b) in
       enumerate(zip(range(6, 0, -1), (4, 6, 9, 13, 23, 51)), 8)]
)
# densest first; at equal density plain, then 7, then 8 (as MongoDB prefers them)
_BY_DENSITY = sorted(SELECTORS, key=lambda s: (-s[3], s[0]))
_ZERO_LIMIT = {1: 15, 2: 60, 3: 124}  # most trailing zeros a zero count can say


def _needs(v):
    """Per selector kind: (value bits needed, zero count stored), counted so that no slot
    holding a value can be all ones (that is a skip)."""
    tz = 0 if v == 0 else (v & -v).bit_length() - 1
    blen = (v + 1).bit_length()
    out = [(blen, 0)]
    for kind in (1, 2, 3):
        lim = _ZERO_LIMIT[kind]
        unit = 1 if kind == 1 else 4
        k = min(tz, lim) // unit
        bits = ((v >> tz) + 1).bit_length() if tz == lim else blen - k * unit
        out.append((bits, k))
    return out


def _fits(need, sel):
    return need is None or need[sel[0]][0] <= sel[4]


def _slot(v, need, sel):
    kind, _, _, _, bits, zbits, unit, _ = sel
    if v is None:
        return (1 << (bits + zbits)) - 1
    if kind == 0:
        return v
    k = need[kind][1]
    return ((v >> (k * unit)) << zbits) | k


def _word(sel, values, needs):
    kind, selector, ext, n, bits, zbits, _, shift = sel
    w = selector | (ext << 4 if kind else 0)
    for i, (v, need) in enumerate(zip(values, needs)):
        w |= _slot(v, need, sel) << (shift + i * (bits + zbits))
    return w


def storable(v, width=64):
    """Whether one Simple-8b slot can hold the unsigned value `v`."""
    if v >> width:
        return False
    need = _needs(v)
    return any(_fits(need, s) for s in SELECTORS if s[3] == 1)


def pack_simple8b(values, prev=0, rle_first=True):
    """Simple-8b blocks for `values` (unsigned ints or None for a skip): a run-length block
    when at least 120 values repeat `prev` (the previous slot value), else the densest
    selector that holds exactly that many of the next values (`rle_first` False: the first
    block is not run-length). Returns ([(word, count)], last slot value)."""
    needs = [None if v is None else _needs(v) for v in values]
    out, i, n = [], 0, len(values)
    while i < n:
        run = 0
        while i + run < n and values[i + run] == prev and run < 16 * 120:
            run += 1
        if run >= 120 and (i or rle_first):
            k = run // 120
            out.append((15 | ((k - 1) << 4), 120 * k))
            i += 120 * k
            continue
        for sel in _BY_DENSITY:
            c = sel[3]
            if i + c <= n and all(_fits(needs[j], sel) for j in range(i, i + c)):
                out.append((_word(sel, values[i:i + c], needs[i:i + c]), c))
                prev = values[i + c - 1]
                i += c
                break
        else:
            raise ValueError(f"no Simple-8b selector holds {values[i]}")
    return out, prev


def unpack_simple8b(word, prev):
    """Slot values of one block (None = skip) given the previous slot value."""
    sel = word & 15
    if sel == 15:
        return [prev] * ((((word >> 4) & 15) + 1) * 120)
    if sel == 0:
        raise ValueError("Simple-8b selector 0")
    ext = (word >> 4) & 15
    if sel in (7, 8) and ext:
        kind = 1 if sel == 7 else (2 if ext <= 7 else 3)
        spec = next((s for s in SELECTORS if s[0] == kind and s[2] == ext), None)
        if spec is None:
            raise ValueError(f"invalid extension {ext} of selector {sel}")
    else:
        spec = next(s for s in SELECTORS if s[0] == 0 and s[1] == sel)
    _, _, _, n, bits, zbits, unit, shift = spec
    size = bits + zbits
    mask = (1 << size) - 1
    out = []
    for i in range(n):
        slot = (word >> (shift + i * size)) & mask
        if slot == mask:
            out.append(None)
        else:
            out.append((slot >> zbits) << ((slot & ((1 << zbits) - 1)) * unit))
    return out


# --- one stream (a regular column, or one leaf of an interleaved run) -----------------

class _Stream:
    """Encodes the values of one decoding state into control items: a list of
    (bytes, number of values) -- a literal, or one control byte and its blocks."""

    def __init__(self, initial=None):
        self.items = []
        self.last = None       # last value decoded (type, value bytes); None = EOO
        self.s8b_prev = 0      # last Simple-8b slot value, carried across control bytes
        self.pending = []      # the open run: slots, or for doubles the values (None: skip)
        self.scale = None      # scale index of the open run (None: only skips so far)
        self.run_start = None  # doubles: the last value before the open run
        if initial is not None:
            self._load(*initial)

    def _load(self, t, val):
        self.last = (t, val)
        self.s8b_prev = 0
        self.run_start = None
        if t in WIDE_TYPES:
            self.wide = _wide_value(t, val)
        else:
            self.narrow = _narrow_value(t, val)
            self.prev_delta = 0

    def _last_double(self):
        return struct.unpack("<d", self.last[1])[0]

    # a run shares one scale; flushing writes it as groups of <= 16 blocks
    def _flush(self):
        if not self.pending:
            return
        scale, slots = self.scale, self.pending
        if self.run_start is not None:  # a run of doubles
            if scale is None:
                scale = _exact_scales(self.run_start)[0]
            slots = _double_slots(self.run_start, self.pending, scale)
        elif scale is None:
            scale = RAW
        # after a scale change the decoder carries the previous slot value into the new
        # group, while MongoDB's builder starts afresh: only a 0 means the same to both
        blocks, self.s8b_prev = pack_simple8b(slots, self.s8b_prev, self.s8b_prev == 0)
        for at in range(0, len(blocks), 16):
            chunk = blocks[at:at + 16]
            control = (NIBBLE_FOR_SCALE[scale] << 4) | (len(chunk) - 1)
            body = b"".join(struct.pack("<Q", w) for w, _ in chunk)
            self.items.append((bytes([control]) + body, sum(c for _, c in chunk)))
        self.pending, self.scale, self.run_start = [], None, None

    def _slot(self, slot):
        self.scale = RAW
        self.pending.append(slot)

    def literal(self, t, val):
        if t in (T_MINKEY, T_MAXKEY):
            raise ValueError("MinKey/MaxKey cannot be stored in a BSONColumn")
        self._flush()
        self.items.append((_literal(t, val), 1))
        self._load(t, val)

    def skip(self):
        if not self.pending and self.last is not None and self.last[0] == T_DOUBLE:
            self.run_start = self._last_double()
        self.pending.append(None)

    def add(self, t, val):
        last = self.last
        if last is None or last[0] != t:
            return self.literal(t, val)
        if t == T_DOUBLE:
            return self._add_double(val)
        if t in WIDE_TYPES:
            return self._add_wide(t, val)
        if t in DOD_TYPES:
            if t == T_OID and val[4:9] != last[1][4:9]:
                return self.literal(t, val)
            cur = _narrow_value(t, val)
            delta = _s64(cur - self.narrow)
            z = zigzag(_s64(delta - self.prev_delta))
            if not storable(z):
                return self.literal(t, val)
            self._slot(z)
            self.narrow, self.prev_delta, self.last = cur, delta, (t, val)
            return
        if t in (T_INT32, T_INT64, T_BOOL):
            cur = _narrow_value(t, val)
            z = zigzag(_s64(cur - self.narrow))
            if not storable(z):
                return self.literal(t, val)
            self._slot(z)
            self.narrow, self.last = cur, (t, val)
            return
        if val == last[1]:  # any other type: only a repeat is a delta (0)
            return self._slot(0)
        return self.literal(t, val)

    def _add_double(self, val):
        """A run keeps its scale while values are exact at it. A value that needs a larger
        scale rescales the run when it holds fewer than 60 values, else starts a new run;
        after 60 values, a value that a smaller scale holds starts a new run at it."""
        x, prev = struct.unpack("<d", val)[0], self._last_double()
        best = _best_scale(prev, x)
        if best is None:
            return self.literal(T_DOUBLE, val)
        if not self.pending:
            self.run_start = prev
        s = self.scale
        if s is not None:
            if best < s and len(self.pending) >= 60:
                self._flush()
                self.run_start = prev
            elif _double_step(prev, x, s):
                self.pending.append(x)
                self.last = (T_DOUBLE, val)
                return
            elif len(self.pending) >= 60:
                self._flush()
                self.run_start = prev
            else:
                chain = [self.run_start] + [v for v in self.pending if v is not None] + [x]
                up = next((u for u in range(s + 1, RAW + 1)
                           if all(_double_step(a, b, u) for a, b in zip(chain, chain[1:]))), None)
                if up is None:
                    self._flush()
                    self.run_start = prev
                else:
                    best = up
        self.scale = best
        self.pending.append(x)
        self.last = (T_DOUBLE, val)

    def _add_wide(self, t, val):
        last_t, last_val = self.last
        if val == last_val:
            return self._slot(0)
        if t == T_BINARY and (val[:5] != last_val[:5] or len(val) > 21):
            return self.literal(t, val)
        cur = _wide_value(t, val)
        # after a value that is not encodable the decoder counts from 0, and a 0 delta
        # would mean "repeat", so an encodable 0 cannot follow one
        if cur is None or (self.wide is None and cur == 0):
            return self.literal(t, val)
        z = zigzag(_s128(cur - (self.wide or 0)), 128)
        if not storable(z, 128):
            return self.literal(t, val)
        self._slot(z)
        self.wide, self.last = cur, (t, val)

    def finish(self):
        self._flush()
        return self.items


# --- interleaved runs of objects ------------------------------------------------------

class _Node:
    __slots__ = ("name", "elem", "children")

    def __init__(self, name, elem=None, children=None):
        self.name, self.elem, self.children = name, elem, children


def _interleavable(doc):
    """Non-empty, no empty sub-document anywhere, no repeated name in one document."""
    items = _elements(doc)
    if not items or len({n for n, _, _ in items}) != len(items):
        return False
    for _, t, v in items:
        if t in (T_MINKEY, T_MAXKEY):
            raise ValueError("MinKey/MaxKey cannot be stored in a BSONColumn")
        if t == T_OBJECT and not _interleavable(v):
            return False
    return True


def _fresh(items):
    return [_Node(n, children=_fresh(_elements(v))) if t == T_OBJECT else _Node(n, elem=(t, v))
            for n, t, v in items]


def _merge(ref, items):
    """`ref` grown to also hold the fields of `items` in their order, or None when the
    orders (or object/scalar kinds) conflict."""
    out, seen, i, j = [], set(), 0, 0
    ref_names = [r.name for r in ref]
    names = [n for n, _, _ in items]
    while i < len(ref) or j < len(items):
        if i < len(ref) and j < len(items) and ref[i].name == names[j]:
            r, (n, t, v) = ref[i], items[j]
            if (r.children is not None) != (t == T_OBJECT):
                return None
            if r.children is not None:
                sub = _merge(r.children, _elements(v))
                if sub is None:
                    return None
                node = _Node(n, children=sub)
            else:
                node = r
            i, j = i + 1, j + 1
        elif i < len(ref) and ref[i].name not in names[j:]:
            node, i = ref[i], i + 1
        elif j < len(items) and names[j] not in ref_names[i:]:
            node, j = _fresh([items[j]])[0], j + 1
        else:
            return None
        if node.name in seen:
            return None
        seen.add(node.name)
        out.append(node)
    return out


def _leaves(ref, out):
    for r in ref:
        if r.children is None:
            out.append(r)
        else:
            _leaves(r.children, out)
    return out


def _spread(ref, items, out):
    """Appends this object's value (or SKIP) for every leaf of `ref`, in order."""
    j = 0
    for r in ref:
        here = items is not None and j < len(items) and items[j][0] == r.name
        if r.children is None:
            out.append((items[j][1], items[j][2]) if here else SKIP)
        else:
            _spread(r.children, _elements(items[j][2]) if here else None, out)
        j += here
    assert items is None or j == len(items), "object does not fit its reference"


def _ref_document(ref):
    return _document([(r.name, T_OBJECT, _ref_document(r.children)) if r.children is not None
                      else (r.name, *r.elem) for r in ref])


def _interleaved(ref, objects):
    """0xF0, the reference object, the leaves' control items in decoding order, 0x00."""
    leaves = _leaves(ref, [])
    per_leaf = [[] for _ in leaves]
    for items in objects:
        row = []
        _spread(ref, items, row)
        for k, v in enumerate(row):
            per_leaf[k].append(v)
    queues = []
    for leaf, values in zip(leaves, per_leaf):
        s = _Stream(leaf.elem)
        for v in values:
            s.skip() if v is SKIP else s.add(*v)
        queues.append(list(s.finish()))
    out = bytearray(b"\xF0" + _ref_document(ref))
    left = [0] * len(leaves)
    for _ in objects:
        for k, q in enumerate(queues):
            if left[k] == 0:
                data, count = q.pop(0)
                out += data
                left[k] = count
            left[k] -= 1
    assert not any(queues) and not any(left)
    out += b"\x00"
    return bytes(out)


# --- columns ----------------------------------------------------------------------------

def encode(values):
    """The BSONColumn payload of `values` (Python/bson values, SKIP for a missing one)."""
    out = bytearray()
    stream, run = _Stream(), None  # run: [reference, [items or None per value]]

    def close_run():
        nonlocal run, stream
        out.extend(_interleaved(*run))
        run, stream = None, _Stream()

    for value in values:
        if value is SKIP:
            (run[1].append(None) if run else stream.skip())
            continue
        t, val = _element(value)
        if t == T_OBJECT and _interleavable(val):
            items = _elements(val)
            if run is not None:
                merged = _merge(run[0], items)
                if merged is not None:
                    run[0] = merged
                    run[1].append(items)
                    continue
                close_run()
            for data, _ in stream.finish():
                out.extend(data)
            stream, run = None, [_fresh(items), [items]]
            continue
        if run is not None:
            close_run()
        stream.add(t, val)
    if run is not None:
        close_run()
    for data, _ in stream.finish():
        out.extend(data)
    out.append(0)
    return bytes(out)


def column(values):
    """`encode(values)` as BinData subtype 7."""
    return bson.Binary(encode(values), 7)


# --- a decoder following the same description (to check the encoder) -----------------

class _DState:
    def __init__(self, stats):
        self.last = None  # (type, value bytes) or None (EOO)
        self.prev = 0     # previous Simple-8b slot value
        self.stats = stats

    def load(self, t, val):
        self.last, self.prev = (t, val), 0
        if t in WIDE_TYPES:
            self.wide = _wide_value(t, val) or 0
        else:
            self.narrow, self.delta = _narrow_value(t, val), 0

    def group(self, buf, at):
        """Loads the control item at buf[at]; returns (values, next position)."""
        c = buf[at]
        if c & 0xE0 == 0:
            t = c
            z = buf.index(b"\x00", at + 1)
            if z != at + 1:
                raise ValueError("literal with a field name")
            n = _value_size(t, buf, at + 2)
            val = bytes(buf[at + 2:at + 2 + n])
            if len(val) != n:
                raise ValueError("truncated literal")
            self.load(t, val)
            self.stats.setdefault("literals", []).append(t)
            return [(t, val)], at + 2 + n
        scale = SCALE_FOR_NIBBLE.get(c >> 4)
        if scale is None:
            raise ValueError(f"invalid control byte 0x{c:02x}")
        nblocks = (c & 15) + 1
        if at + 1 + 8 * nblocks > len(buf):
            raise ValueError("truncated Simple-8b blocks")
        self.stats.setdefault("controls", []).append(c)
        t = self.last[0] if self.last else None
        wide = t in WIDE_TYPES
        if t == T_DOUBLE:
            self.narrow = double_at_scale(struct.unpack("<d", self.last[1])[0], scale)
            if self.narrow is None:
                raise ValueError("last double not exact at the group's scale")
        out = []
        for b in range(nblocks):
            word = struct.unpack_from("<Q", buf, at + 1 + 8 * b)[0]
            sel = word & 15
            self.stats.setdefault("selectors", set()).add(
                (sel, (word >> 4) & 15 if sel in (7, 8, 15) else 0))
            for slot in unpack_simple8b(word, self.prev):
                self.prev = slot
                out.append(self._value(slot, scale, wide))
        return out, at + 1 + 8 * nblocks

    def _value(self, slot, scale, wide):
        if slot is None:
            return SKIP
        if self.last is None:
            if slot == 0:
                return SKIP
            raise ValueError("delta before any value")
        t, val = self.last
        dod = t in DOD_TYPES
        if not dod and slot == 0:
            return self.last
        if wide:
            self.wide = _s128(self.wide + unzigzag(slot))
            u = self.wide & M128
            if t in (T_STRING, T_CODE):
                s = u.to_bytes(16, "big").lstrip(b"\x00")
                new = struct.pack("<i", len(s) + 1) + s + b"\x00"
            elif t == T_BINARY:
                size = struct.unpack_from("<i", val, 0)[0]
                new = val[:5] + u.to_bytes(16, "little")[:size]
            else:
                new = u.to_bytes(16, "little")
        else:
            if t not in (T_DOUBLE, T_OID, T_DATE, T_INT64, T_BOOL, T_INT32, T_TIMESTAMP):
                raise ValueError(f"non-zero delta for type 0x{t:02x}")
            if dod:
                self.delta = _s64(self.delta + unzigzag(slot))
                self.narrow = _s64(self.narrow + self.delta)
            else:
                self.narrow = _s64(self.narrow + unzigzag(slot))
            v = self.narrow
            if t == T_DOUBLE:
                new = struct.pack("<d", _from_bits(v) if scale == RAW else v / SCALES[scale])
            elif t == T_OID:
                new = _oid_bytes(v, val[4:9])
            elif t in (T_DATE, T_INT64, T_TIMESTAMP):
                new = struct.pack("<q", v)
            elif t == T_BOOL:
                new = bytes([v & 0xFF])
            else:
                new = struct.pack("<i", ((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000)
        self.last = (t, new)
        return self.last


def _rebuild(ref_items, values):
    """The document of one interleaved object (None when nothing is present)."""
    out = []
    for n, t, v in ref_items:
        if t == T_OBJECT:
            sub = _rebuild(_elements(v), values)
            if sub is not None:
                out.append((n, T_OBJECT, sub))
        else:
            got = values.pop(0)
            if got is not SKIP:
                out.append((n, got[0], got[1]))
    return _document(out) if out else None


def decode_elements(payload, stats=None):
    """The (type, value bytes) of every value of a column, SKIP for a missing one."""
    stats = {} if stats is None else stats
    buf, at, out = bytes(payload), 0, []
    state = _DState(stats)
    while True:
        if at >= len(buf):
            raise ValueError("no EOO at the end of the column")
        c = buf[at]
        if c == 0:
            if at + 1 != len(buf):
                raise ValueError("bytes after the EOO")
            return out
        if c in (0xF1, 0xF2):
            raise ValueError("interleaved arrays are not decoded here")
        if c == 0xF0:
            stats["interleaved"] = stats.get("interleaved", 0) + 1
            size = struct.unpack_from("<i", buf, at + 1)[0]
            ref = buf[at + 1:at + 1 + size]
            at += 1 + size
            ref_items = _elements(ref)
            leaves = []

            def walk(items):
                for _, t, v in items:
                    if t == T_OBJECT:
                        walk(_elements(v))
                    else:
                        s = _DState(stats)
                        s.load(t, v)
                        leaves.append([s, []])
            walk(ref_items)
            if not leaves:
                raise ValueError("reference object without scalars")
            while True:
                row, ended = [], False
                for k, leaf in enumerate(leaves):
                    if not leaf[1]:
                        if buf[at] == 0:
                            if k:
                                raise ValueError("interleaved run ended mid-object")
                            at += 1
                            ended = True
                            break
                        leaf[1], at = leaf[0].group(buf, at)
                    row.append(leaf[1].pop(0))
                if ended:
                    break
                doc = _rebuild(ref_items, row)
                out.append(SKIP if doc is None else (T_OBJECT, doc))
            state = _DState(stats)
            continue
        values, at = state.group(buf, at)
        out.extend(values)


def decode(payload, stats=None):
    """The values of a column as Python/bson values, SKIP for a missing one."""
    return [SKIP if e is SKIP else _to_python(*e) for e in decode_elements(payload, stats)]


# --- buckets ---------------------------------------------------------------------------

_ROUNDING = {"seconds": 60, "minutes": 3600, "hours": 86400}

_TYPE_RANK = {T_MINKEY: -1, T_UNDEFINED: 0, T_NULL: 5, T_DOUBLE: 10, T_INT32: 10, T_INT64: 10,
              T_DECIMAL: 10, T_SYMBOL: 15, T_STRING: 15, T_OBJECT: 20, T_ARRAY: 25,
              T_BINARY: 30, T_OID: 35, T_BOOL: 40, T_DATE: 45, T_TIMESTAMP: 47, T_REGEX: 50,
              T_DBPOINTER: 55, T_CODE: 60, T_CODEWSCOPE: 65, T_MAXKEY: 100}


def _order_key(value):
    """An approximation of MongoDB's BSON order (numbers numerically, NaN first)."""
    t, val = _element(value)
    rank = _TYPE_RANK[t]
    if rank == 10:
        x = float(str(value.to_decimal())) if t == T_DECIMAL else float(value)
        return (rank, 0 if math.isnan(x) else 1, 0.0 if math.isnan(x) else x, b"")
    if t in (T_DATE, T_TIMESTAMP):
        return (rank, 1, float(struct.unpack("<q", val)[0]), b"")
    return (rank, 1, 0.0, val)


def _min_max(values):
    """control.min/max of one field: per sub-field for objects, else by BSON order."""
    if all(isinstance(v, dict) and v for v in values):
        names = []
        for v in values:
            names += [k for k in v if k not in names]
        mins, maxs = {}, {}
        for k in names:
            lo, hi = _min_max([v[k] for v in values if k in v])
            mins[k], maxs[k] = lo, hi
        return mins, maxs
    ordered = sorted(values, key=_order_key)
    return ordered[0], ordered[-1]


def compressed_bucket(meta, rows, time_field="t", granularity="seconds", oid_tail=None):
    """A version 2 bucket as MongoDB 7.0 writes one: the rows (measurement documents
    without the meta field; a row may lack any field but the time) sorted by time; `_id`
    an ObjectId whose time is the earliest time rounded down to the granularity's bucket
    rounding (60 s for seconds); control {version: 2, min (time rounded the same way),
    max, count}; meta (left out when None); data {field: BinData 7} with a value or a
    skip for every row, the time column first, then fields in first-seen order."""
    rows = sorted(rows, key=lambda r: r[time_field])
    times = [r[time_field] for r in rows]
    first = times[0]
    if first.tzinfo is None:
        first = first.replace(tzinfo=_dt.timezone.utc)
    step = _ROUNDING[granularity]
    epoch = int(first.timestamp()) // step * step
    start = _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc)
    fields = [time_field]
    for r in rows:
        fields += [k for k in r if k not in fields]
    mins, maxs = {time_field: start}, {time_field: times[-1]}
    data = {}
    for f in fields:
        values = [r.get(f, SKIP) for r in rows]
        data[f] = column(values)
        if f != time_field:
            mins[f], maxs[f] = _min_max([v for v in values if v is not SKIP])
    if oid_tail is None:
        seed = bson.encode({"m": meta, "t": times[0], "n": len(rows)})
        oid_tail = hashlib.sha1(seed).digest()[:8]
    bucket = {
        "_id": ObjectId(struct.pack(">I", epoch) + bytes(oid_tail)),
        "control": {"version": 2, "min": mins, "max": maxs, "count": len(rows)},
    }
    if meta is not None:
        bucket["meta"] = meta
    bucket["data"] = data
    return bucket
