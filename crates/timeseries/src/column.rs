//! Column codecs: one field's values across a bucket's measurements, encoded
//! so that each column decodes on its own.
//!
//! # Column layout
//!
//! ```text
//! byte 0     codec tag (see below)
//! byte 1     flags: bit 0 set = a presence bitmap follows
//! bitmap     ceil(count / 8) bytes when flagged; bit i (byte i / 8, bit
//!            i % 8, least significant first) set = measurement i has the field
//! payload    the present values only, codec-specific, up to the end
//! ```
//!
//! | tag | codec | payload |
//! |---|---|---|
//! | 0 | no value present | empty |
//! | 1 | all dates | pco (standalone) of the i64 milliseconds; pco picks delta order automatically, regular intervals become delta-of-delta |
//! | 2 | all doubles | pco of the f64 values (lossless, bit exact) |
//! | 3 | all int32 | pco of the i32 values |
//! | 4 | all int64 | pco of the i64 values |
//! | 5 | anything else / mixed | u32 LE uncompressed length, then an lz4 block of the values' `{"": v}` BSON documents concatenated |
//! | 6 | all ObjectIds | three length-prefixed (u32 LE) pco blocks: 4-byte timestamps (u32), 5-byte process parts (u64), 3-byte counters (u32) |
//! | 7 | int32 and doubles mixed | type bitmap over the present values (ceil(p / 8) bytes, bit set = int32), then pco of the values as f64 |
//! | 8 | int32 and int64 mixed | type bitmap as for 7, then pco of the values as i64 |
//!
//! Measured on 1000 values (test `reports_bytes_per_value`, run with
//! `--nocapture` to print): a random walk of doubles rounded to 2 decimals
//! costs 0.99 bytes/value with pco and 6.7 bytes/value with Gorilla XOR
//! ([`crate::gorilla`]), so doubles use pco; dates at a regular 10 s interval
//! cost 0.055 bytes/value; ObjectIds from one client 0.09 bytes/value; the
//! same walk rounded to 1 decimal with whole numbers as int32 (as JavaScript
//! drivers send them, codec 7) 0.76 bytes/value.

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document};

use crate::error::TsError;

const TAG_EMPTY: u8 = 0;
const TAG_DATE: u8 = 1;
const TAG_DOUBLE: u8 = 2;
const TAG_INT32: u8 = 3;
const TAG_INT64: u8 = 4;
const TAG_GENERAL: u8 = 5;
const TAG_OBJECT_ID: u8 = 6;
const TAG_INT32_DOUBLE: u8 = 7;
const TAG_INT32_INT64: u8 = 8;

const FLAG_BITMAP: u8 = 1;

/// Upper bound on a general column's uncompressed size (guards allocations
/// driven by corrupt input).
const MAX_GENERAL_BYTES: usize = 64 * 1024 * 1024;

/// The codec of an encoded column, read from its tag byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnCodec {
    /// No measurement has the field.
    Empty,
    /// All dates: i64 milliseconds with pco.
    Date,
    /// All doubles: f64 with pco.
    Double,
    /// All int32: pco.
    Int32,
    /// All int64: pco.
    Int64,
    /// Anything else or mixed types: BSON values with lz4.
    General,
    /// All ObjectIds: three pco streams.
    ObjectId,
    /// Int32 and double values mixed: f64 with pco plus a type bitmap.
    Int32AndDouble,
    /// Int32 and int64 values mixed: i64 with pco plus a type bitmap.
    Int32AndInt64,
}

/// The codec of an encoded column; `None` for an unknown tag or no bytes.
pub fn column_codec(bytes: &[u8]) -> Option<ColumnCodec> {
    Some(match *bytes.first()? {
        TAG_EMPTY => ColumnCodec::Empty,
        TAG_DATE => ColumnCodec::Date,
        TAG_DOUBLE => ColumnCodec::Double,
        TAG_INT32 => ColumnCodec::Int32,
        TAG_INT64 => ColumnCodec::Int64,
        TAG_GENERAL => ColumnCodec::General,
        TAG_OBJECT_ID => ColumnCodec::ObjectId,
        TAG_INT32_DOUBLE => ColumnCodec::Int32AndDouble,
        TAG_INT32_INT64 => ColumnCodec::Int32AndInt64,
        _ => return None,
    })
}

/// Encodes one column. `None` = the measurement lacks the field.
pub fn encode_column(values: &[Option<Bson>]) -> Vec<u8> {
    let present: Vec<&Bson> = values.iter().flatten().collect();
    if present.is_empty() {
        return vec![TAG_EMPTY, 0];
    }
    let (tag, payload) = encode_payload(&present);
    let rows: Option<Vec<bool>> =
        (present.len() < values.len()).then(|| values.iter().map(Option::is_some).collect());
    frame(tag, rows.as_deref(), &payload)
}

/// The present values of a column of one type, as an open bucket builds them.
pub enum TypedValues<'a> {
    Date(&'a [i64]),
    Double(&'a [f64]),
    Int32(&'a [i32]),
    Int64(&'a [i64]),
    ObjectId(&'a [[u8; 12]]),
}

/// Encodes a column whose present values all have one type, straight from the typed
/// vector; `rows` marks the rows that have a value (`None`: every row). The bytes are
/// those [`encode_column`] writes for the same values; `None` when pco refuses the values
/// (the caller then encodes them as [`encode_column`] does).
pub fn encode_typed_column(values: TypedValues<'_>, rows: Option<&[bool]>) -> Option<Vec<u8>> {
    let (tag, payload) = match values {
        TypedValues::Date(v) if !v.is_empty() => (TAG_DATE, pco_compress(v)?),
        TypedValues::Double(v) if !v.is_empty() => (TAG_DOUBLE, pco_compress(v)?),
        TypedValues::Int32(v) if !v.is_empty() => (TAG_INT32, pco_compress(v)?),
        TypedValues::Int64(v) if !v.is_empty() => (TAG_INT64, pco_compress(v)?),
        TypedValues::ObjectId(v) if !v.is_empty() => (TAG_OBJECT_ID, encode_object_ids(v)?),
        _ => return Some(vec![TAG_EMPTY, 0]),
    };
    Some(frame(tag, rows.filter(|r| r.contains(&false)), &payload))
}

/// Tag, flags, the presence bitmap when some row lacks a value, then the payload.
fn frame(tag: u8, rows: Option<&[bool]>, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + rows.map_or(0, |r| r.len() / 8 + 1) + payload.len());
    out.push(tag);
    match rows {
        None => out.push(0),
        Some(rows) => {
            out.push(FLAG_BITMAP);
            let mut bitmap = vec![0u8; rows.len().div_ceil(8)];
            for (i, has) in rows.iter().enumerate() {
                if *has {
                    bitmap[i / 8] |= 1 << (i % 8);
                }
            }
            out.extend_from_slice(&bitmap);
        }
    }
    out.extend_from_slice(payload);
    out
}

fn encode_payload(present: &[&Bson]) -> (u8, Vec<u8>) {
    macro_rules! collect_all {
        ($variant:path, $map:expr) => {{
            let mut nums = Vec::with_capacity(present.len());
            let mut ok = true;
            for v in present {
                match v {
                    $variant(x) => nums.push($map(x)),
                    _ => {
                        ok = false;
                        break;
                    }
                }
            }
            ok.then_some(nums)
        }};
    }
    let attempt = match present[0] {
        Bson::DateTime(_) => collect_all!(Bson::DateTime, |d: &DateTime| d.timestamp_millis())
            .and_then(|n| pco_compress(&n).map(|p| (TAG_DATE, p))),
        Bson::Double(_) => collect_all!(Bson::Double, |d: &f64| *d)
            .and_then(|n| pco_compress(&n).map(|p| (TAG_DOUBLE, p))),
        Bson::Int32(_) => collect_all!(Bson::Int32, |d: &i32| *d)
            .and_then(|n| pco_compress(&n).map(|p| (TAG_INT32, p))),
        Bson::Int64(_) => collect_all!(Bson::Int64, |d: &i64| *d)
            .and_then(|n| pco_compress(&n).map(|p| (TAG_INT64, p))),
        Bson::ObjectId(_) => collect_all!(Bson::ObjectId, |o: &ObjectId| o.bytes())
            .and_then(|ids| encode_object_ids(&ids).map(|p| (TAG_OBJECT_ID, p))),
        _ => None,
    };
    attempt
        .or_else(|| encode_mixed_numbers(present))
        .unwrap_or_else(|| (TAG_GENERAL, encode_general(present)))
}

/// pco's compression level: 4 rather than its default 8. On 1,000-value columns (one
/// bucket) level 4 compressed 2.4x faster (125 vs 305 ns per value, full-precision random
/// walk) for 0.9% more bytes, and the same bytes at 2 decimals (decision 0009).
const PCO_LEVEL: usize = 4;

/// A number pco compresses, with an approximate `f64` for choosing the delta encoding.
trait Compressible: pco::data_types::Number + Copy {
    fn approx(self) -> f64;
}

macro_rules! compressible {
    ($($t:ty),*) => {$(
        impl Compressible for $t {
            fn approx(self) -> f64 {
                self as f64
            }
        }
    )*};
}
compressible!(f64, i64, i32, u32, u64);

/// The delta encoding for a column: first-order deltas when consecutive values are
/// closer to each other than to their mean (a random walk, regular times), none
/// otherwise. pco's automatic choice picked the same encodings on bucket-sized columns but
/// took 60% of the compression time (170 vs 69 ns per value; decision 0009).
fn delta_spec<T: Compressible>(nums: &[T]) -> pco::DeltaSpec {
    if nums.len() < 3 {
        return pco::DeltaSpec::None;
    }
    let mean = nums.iter().map(|x| x.approx()).sum::<f64>() / nums.len() as f64;
    let spread: f64 = nums.iter().map(|x| (x.approx() - mean).powi(2)).sum();
    let steps: f64 = nums
        .windows(2)
        .map(|w| (w[1].approx() - w[0].approx()).powi(2))
        .sum();
    // Differences of independent values have twice their variance: deltas pay off only
    // below that.
    if steps < spread {
        pco::DeltaSpec::TryConsecutive(1)
    } else {
        pco::DeltaSpec::None
    }
}

fn pco_compress<T: Compressible>(nums: &[T]) -> Option<Vec<u8>> {
    let config = pco::ChunkConfig::default()
        .with_compression_level(PCO_LEVEL)
        .with_delta_spec(delta_spec(nums));
    pco::standalone::simple_compress(nums, &config).ok()
}

fn encode_object_ids(ids: &[[u8; 12]]) -> Option<Vec<u8>> {
    let ts: Vec<u32> = ids
        .iter()
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let mid: Vec<u64> = ids
        .iter()
        .map(|b| u64::from_be_bytes([0, 0, 0, b[4], b[5], b[6], b[7], b[8]]))
        .collect();
    let ctr: Vec<u32> = ids
        .iter()
        .map(|b| u32::from_be_bytes([0, b[9], b[10], b[11]]))
        .collect();
    let mut out = Vec::new();
    for block in [pco_compress(&ts)?, pco_compress(&mid)?, pco_compress(&ctr)?] {
        out.extend_from_slice(&u32::try_from(block.len()).ok()?.to_le_bytes());
        out.extend_from_slice(&block);
    }
    Some(out)
}

/// Int32 mixed with doubles (as JavaScript drivers send whole numbers) or
/// with int64: a bitmap over the present values (bit set = int32), then pco
/// of the values widened to f64 / i64 (both widenings are exact).
fn encode_mixed_numbers(present: &[&Bson]) -> Option<(u8, Vec<u8>)> {
    let mut kinds = vec![0u8; present.len().div_ceil(8)];
    let (mut has_double, mut has_long) = (false, false);
    for (i, v) in present.iter().enumerate() {
        match v {
            Bson::Int32(_) => kinds[i / 8] |= 1 << (i % 8),
            Bson::Double(_) => has_double = true,
            Bson::Int64(_) => has_long = true,
            _ => return None,
        }
    }
    let (tag, body) = match (has_double, has_long) {
        (true, false) => {
            let nums: Vec<f64> = present
                .iter()
                .map(|v| match v {
                    Bson::Int32(i) => f64::from(*i),
                    Bson::Double(d) => *d,
                    _ => 0.0,
                })
                .collect();
            (TAG_INT32_DOUBLE, pco_compress(&nums)?)
        }
        (false, true) => {
            let nums: Vec<i64> = present
                .iter()
                .map(|v| match v {
                    Bson::Int32(i) => i64::from(*i),
                    Bson::Int64(l) => *l,
                    _ => 0,
                })
                .collect();
            (TAG_INT32_INT64, pco_compress(&nums)?)
        }
        _ => return None,
    };
    kinds.extend_from_slice(&body);
    Some((tag, kinds))
}

fn split_kinds(src: &[u8], n: usize) -> Result<(&[u8], &[u8]), TsError> {
    let len = n.div_ceil(8);
    if src.len() < len {
        return Err(TsError::corrupt("truncated type bitmap"));
    }
    Ok(src.split_at(len))
}

fn decode_int32_double(src: &[u8], n: usize) -> Result<Vec<Bson>, TsError> {
    let (kinds, body) = split_kinds(src, n)?;
    let nums = pco_decompress::<f64>(body, n)?;
    let mut out = Vec::with_capacity(n);
    for (i, x) in nums.into_iter().enumerate() {
        if kinds[i / 8] & (1 << (i % 8)) != 0 {
            if x.fract() != 0.0 || !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&x) {
                return Err(TsError::corrupt("int32 value out of range"));
            }
            out.push(Bson::Int32(x as i32));
        } else {
            out.push(Bson::Double(x));
        }
    }
    Ok(out)
}

fn decode_int32_int64(src: &[u8], n: usize) -> Result<Vec<Bson>, TsError> {
    let (kinds, body) = split_kinds(src, n)?;
    let nums = pco_decompress::<i64>(body, n)?;
    let mut out = Vec::with_capacity(n);
    for (i, x) in nums.into_iter().enumerate() {
        if kinds[i / 8] & (1 << (i % 8)) != 0 {
            let v = i32::try_from(x).map_err(|_| TsError::corrupt("int32 value out of range"))?;
            out.push(Bson::Int32(v));
        } else {
            out.push(Bson::Int64(x));
        }
    }
    Ok(out)
}

fn encode_general(present: &[&Bson]) -> Vec<u8> {
    let mut raw = Vec::new();
    for v in present {
        let mut d = Document::new();
        d.insert("", (*v).clone());
        if d.to_writer(&mut raw).is_err() {
            // Only values holding keys with NUL bytes fail; store null.
            let mut n = Document::new();
            n.insert("", Bson::Null);
            let _ = n.to_writer(&mut raw);
        }
    }
    let mut out = Vec::with_capacity(raw.len() / 2 + 8);
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    out.extend_from_slice(&lz4_flex::block::compress(&raw));
    out
}

/// A column split into its codec tag, its presence bitmap (when the flags say it has
/// one) and the encoded values that follow. An empty column (tag 0) has neither.
type ColumnParts<'a> = (u8, Option<&'a [u8]>, &'a [u8]);

fn split_column(bytes: &[u8], count: usize) -> Result<ColumnParts<'_>, TsError> {
    let (&tag, rest) = bytes
        .split_first()
        .ok_or_else(|| TsError::corrupt("empty column"))?;
    let (&flags, rest) = rest
        .split_first()
        .ok_or_else(|| TsError::corrupt("truncated column header"))?;
    if tag == TAG_EMPTY {
        return Ok((tag, None, rest));
    }
    if flags & !FLAG_BITMAP != 0 {
        return Err(TsError::corrupt("unknown column flags"));
    }
    if flags & FLAG_BITMAP == 0 {
        return Ok((tag, None, rest));
    }
    let len = count.div_ceil(8);
    if rest.len() < len {
        return Err(TsError::corrupt("truncated presence bitmap"));
    }
    let (b, r) = rest.split_at(len);
    Ok((tag, Some(b), r))
}

/// Decodes a column of `count` measurements.
pub fn decode_column(bytes: &[u8], count: usize) -> Result<Vec<Option<Bson>>, TsError> {
    let (tag, bitmap, rest) = split_column(bytes, count)?;
    if tag == TAG_EMPTY {
        return Ok(vec![None; count]);
    }
    let present = match bitmap {
        Some(b) => (0..count)
            .filter(|i| b[i / 8] & (1 << (i % 8)) != 0)
            .count(),
        None => count,
    };
    let values: Vec<Bson> = match tag {
        TAG_DATE => pco_decompress::<i64>(rest, present)?
            .into_iter()
            .map(|m| Bson::DateTime(DateTime::from_millis(m)))
            .collect(),
        TAG_DOUBLE => pco_decompress::<f64>(rest, present)?
            .into_iter()
            .map(Bson::Double)
            .collect(),
        TAG_INT32 => pco_decompress::<i32>(rest, present)?
            .into_iter()
            .map(Bson::Int32)
            .collect(),
        TAG_INT64 => pco_decompress::<i64>(rest, present)?
            .into_iter()
            .map(Bson::Int64)
            .collect(),
        TAG_OBJECT_ID => decode_object_ids(rest, present)?,
        TAG_GENERAL => decode_general(rest, present)?,
        TAG_INT32_DOUBLE => decode_int32_double(rest, present)?,
        TAG_INT32_INT64 => decode_int32_int64(rest, present)?,
        other => return Err(TsError::corrupt(format!("unknown column codec {other}"))),
    };
    if values.len() != present {
        return Err(TsError::corrupt("column value count mismatch"));
    }
    let mut values = values.into_iter();
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let has = match bitmap {
            Some(b) => b[i / 8] & (1 << (i % 8)) != 0,
            None => true,
        };
        out.push(if has { values.next() } else { None });
    }
    Ok(out)
}

/// The values of a column of one numeric BSON type, one per measurement (0 where the
/// measurement lacks the field).
#[derive(Debug, Clone, PartialEq)]
pub enum NumericValues {
    Dates(Vec<i64>),
    Doubles(Vec<f64>),
    Int32s(Vec<i32>),
    Int64s(Vec<i64>),
}

/// A numeric column decoded without building BSON values (vectorized execution).
#[derive(Debug, Clone, PartialEq)]
pub struct TypedColumn {
    pub values: NumericValues,
    /// Which measurements have the field (`None`: all of them).
    pub present: Option<Vec<bool>>,
}

impl TypedColumn {
    pub fn has(&self, i: usize) -> bool {
        self.present
            .as_ref()
            .is_none_or(|p| p.get(i).copied().unwrap_or(false))
    }

    /// The typed form of BSON values (an open bucket's column): `Some` when every value
    /// present is of one of the numeric kinds a stored column keeps typed, and at least
    /// one is present; `None` otherwise, as a stored column of mixed types has no typed
    /// form.
    pub fn from_values(values: &[Option<Bson>]) -> Option<TypedColumn> {
        fn gather<T: Copy + Default>(
            values: &[Option<Bson>],
            get: impl Fn(&Bson) -> Option<T>,
        ) -> Option<Vec<T>> {
            values
                .iter()
                .map(|v| v.as_ref().map_or(Some(T::default()), &get))
                .collect()
        }
        let typed = match values.iter().flatten().next()? {
            Bson::DateTime(_) => NumericValues::Dates(gather(values, |v| match v {
                Bson::DateTime(d) => Some(d.timestamp_millis()),
                _ => None,
            })?),
            Bson::Double(_) => NumericValues::Doubles(gather(values, |v| match v {
                Bson::Double(d) => Some(*d),
                _ => None,
            })?),
            Bson::Int32(_) => NumericValues::Int32s(gather(values, |v| match v {
                Bson::Int32(n) => Some(*n),
                _ => None,
            })?),
            Bson::Int64(_) => NumericValues::Int64s(gather(values, |v| match v {
                Bson::Int64(n) => Some(*n),
                _ => None,
            })?),
            _ => return None,
        };
        let present = values
            .iter()
            .any(Option::is_none)
            .then(|| values.iter().map(Option::is_some).collect());
        Some(TypedColumn {
            values: typed,
            present,
        })
    }

    /// The value of measurement `i` as BSON (no heap allocation for numbers).
    pub fn get(&self, i: usize) -> Option<Bson> {
        if !self.has(i) {
            return None;
        }
        match &self.values {
            NumericValues::Dates(v) => v.get(i).map(|m| Bson::DateTime(DateTime::from_millis(*m))),
            NumericValues::Doubles(v) => v.get(i).map(|d| Bson::Double(*d)),
            NumericValues::Int32s(v) => v.get(i).map(|n| Bson::Int32(*n)),
            NumericValues::Int64s(v) => v.get(i).map(|n| Bson::Int64(*n)),
        }
    }
}

/// Decodes a date, double, int32 or int64 column into plain values; `Ok(None)` for
/// other codecs (the caller decodes BSON values instead).
pub fn decode_typed_column(bytes: &[u8], count: usize) -> Result<Option<TypedColumn>, TsError> {
    let (tag, bitmap, rest) = split_column(bytes, count)?;
    if !matches!(tag, TAG_DATE | TAG_DOUBLE | TAG_INT32 | TAG_INT64) {
        return Ok(None);
    }
    let present: Option<Vec<bool>> =
        bitmap.map(|b| (0..count).map(|i| b[i / 8] & (1 << (i % 8)) != 0).collect());
    let n = present
        .as_ref()
        .map_or(count, |p| p.iter().filter(|x| **x).count());
    fn spread<T: Copy + Default>(
        vals: Vec<T>,
        present: &Option<Vec<bool>>,
        count: usize,
    ) -> Result<Vec<T>, TsError> {
        let Some(p) = present else {
            if vals.len() != count {
                return Err(TsError::corrupt("column value count mismatch"));
            }
            return Ok(vals);
        };
        let mut it = vals.into_iter();
        let out: Vec<T> = p
            .iter()
            .map(|has| {
                if *has {
                    it.next().unwrap_or_default()
                } else {
                    T::default()
                }
            })
            .collect();
        Ok(out)
    }
    let values = match tag {
        TAG_DATE => NumericValues::Dates(spread(pco_decompress::<i64>(rest, n)?, &present, count)?),
        TAG_DOUBLE => {
            NumericValues::Doubles(spread(pco_decompress::<f64>(rest, n)?, &present, count)?)
        }
        TAG_INT32 => {
            NumericValues::Int32s(spread(pco_decompress::<i32>(rest, n)?, &present, count)?)
        }
        _ => NumericValues::Int64s(spread(pco_decompress::<i64>(rest, n)?, &present, count)?),
    };
    Ok(Some(TypedColumn { values, present }))
}

fn pco_decompress<T: pco::data_types::Number>(src: &[u8], n: usize) -> Result<Vec<T>, TsError> {
    // pco reports corruption as errors, but in builds with overflow checks
    // its arithmetic can panic on corrupt input (found by the fuzz test
    // `decode_never_panics_on_mutated_numeric_columns`); contain that here.
    let result = std::panic::catch_unwind(|| {
        let mut dst = vec![T::default(); n];
        pco::standalone::simple_decompress_into(src, &mut dst).map(|p| (p, dst))
    });
    let (progress, dst) = match result {
        Ok(r) => r.map_err(|e| TsError::corrupt(format!("numeric column: {e}")))?,
        Err(_) => return Err(TsError::corrupt("numeric column: decoder failure")),
    };
    if progress.n_processed != n || !progress.finished {
        return Err(TsError::corrupt("numeric column length mismatch"));
    }
    Ok(dst)
}

fn take_block<'a>(src: &mut &'a [u8]) -> Result<&'a [u8], TsError> {
    if src.len() < 4 {
        return Err(TsError::corrupt("truncated block length"));
    }
    let len = u32::from_le_bytes([src[0], src[1], src[2], src[3]]) as usize;
    let body = src
        .get(4..4 + len)
        .ok_or_else(|| TsError::corrupt("truncated block"))?;
    *src = &src[4 + len..];
    Ok(body)
}

fn decode_object_ids(mut src: &[u8], n: usize) -> Result<Vec<Bson>, TsError> {
    let ts = pco_decompress::<u32>(take_block(&mut src)?, n)?;
    let mid = pco_decompress::<u64>(take_block(&mut src)?, n)?;
    let ctr = pco_decompress::<u32>(take_block(&mut src)?, n)?;
    if !src.is_empty() {
        return Err(TsError::corrupt("trailing bytes in ObjectId column"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (t, m, c) = (
            ts[i].to_be_bytes(),
            mid[i].to_be_bytes(),
            ctr[i].to_be_bytes(),
        );
        if m[..3] != [0, 0, 0] || c[0] != 0 {
            return Err(TsError::corrupt("ObjectId part out of range"));
        }
        let b = [
            t[0], t[1], t[2], t[3], m[3], m[4], m[5], m[6], m[7], c[1], c[2], c[3],
        ];
        out.push(Bson::ObjectId(ObjectId::from_bytes(b)));
    }
    Ok(out)
}

/// The general codec's payload: `u32` length, then the lz4 block of the values, each a
/// one-element document `{"": v}`.
fn general_bytes(src: &[u8]) -> Result<Vec<u8>, TsError> {
    if src.len() < 4 {
        return Err(TsError::corrupt("truncated general column"));
    }
    let raw_len = u32::from_le_bytes([src[0], src[1], src[2], src[3]]) as usize;
    // lz4 expands at most ~255x; anything claiming more is corrupt.
    if raw_len > MAX_GENERAL_BYTES || raw_len > (src.len() - 4).saturating_mul(255) + 16 {
        return Err(TsError::corrupt("general column too large"));
    }
    let mut raw = vec![0u8; raw_len];
    let got = lz4_flex::block::decompress_into(&src[4..], &mut raw)
        .map_err(|e| TsError::corrupt(format!("general column: {e}")))?;
    if got != raw_len {
        return Err(TsError::corrupt("general column length mismatch"));
    }
    Ok(raw)
}

/// The next value document of a general payload at `pos`.
fn general_value(raw: &[u8], pos: usize) -> Result<&[u8], TsError> {
    let len_bytes = raw
        .get(pos..pos.saturating_add(4))
        .ok_or_else(|| TsError::corrupt("truncated value"))?;
    let len = i32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
    let len = usize::try_from(len)
        .ok()
        .filter(|l| *l >= 5)
        .ok_or_else(|| TsError::corrupt("bad value length"))?;
    raw.get(pos..pos.saturating_add(len))
        .ok_or_else(|| TsError::corrupt("truncated value"))
}

/// The values of a general-codec column as BSON bytes, read without building values.
pub struct RawValues {
    raw: Vec<u8>,
    /// Where each measurement's `{"": v}` document starts (None: the field is missing).
    starts: Vec<Option<usize>>,
}

impl RawValues {
    /// Measurement `i`'s value (`Ok(None)`: the measurement lacks the field).
    pub fn get(&self, i: usize) -> Result<Option<bson::RawBsonRef<'_>>, TsError> {
        let Some(element) = self.element(i) else {
            return Ok(None);
        };
        let bad = |e: bson::raw::Error| TsError::corrupt(format!("value: {e}"));
        let doc = bson::RawDocument::from_bytes(element).map_err(bad)?;
        match doc.into_iter().next() {
            Some(Ok((_, v))) => Ok(Some(v)),
            Some(Err(e)) => Err(bad(e)),
            None => Err(TsError::corrupt("value without key")),
        }
    }

    /// Measurement `i`'s value as its element type and the value's bytes (those after
    /// the element's empty name).
    pub fn get_bytes(&self, i: usize) -> Option<(u8, &[u8])> {
        let doc = self.element(i)?;
        // `len, type, "", value, 0`
        let (&kind, rest) = doc.get(4..)?.split_first()?;
        let value = rest.strip_prefix(&[0])?;
        Some((kind, value.get(..value.len().checked_sub(1)?)?))
    }

    fn element(&self, i: usize) -> Option<&[u8]> {
        general_value(&self.raw, (*self.starts.get(i)?)?).ok()
    }
}

/// A column's values as BSON bytes when it uses the general codec (objects, strings,
/// mixed types); `Ok(None)` for the other codecs.
pub fn decode_raw_general(bytes: &[u8], count: usize) -> Result<Option<RawValues>, TsError> {
    let (tag, bitmap, rest) = split_column(bytes, count)?;
    if tag != TAG_GENERAL {
        return Ok(None);
    }
    let raw = general_bytes(rest)?;
    let mut starts = Vec::with_capacity(count);
    let mut pos = 0;
    for i in 0..count {
        let has = bitmap.is_none_or(|b| b.get(i / 8).is_some_and(|x| x & (1 << (i % 8)) != 0));
        if !has {
            starts.push(None);
            continue;
        }
        let value = general_value(&raw, pos)?;
        starts.push(Some(pos));
        pos += value.len();
    }
    if pos != raw.len() {
        return Err(TsError::corrupt("column value count mismatch"));
    }
    Ok(Some(RawValues { raw, starts }))
}

fn decode_general(src: &[u8], n: usize) -> Result<Vec<Bson>, TsError> {
    let raw = general_bytes(src)?;
    let raw_len = raw.len();
    let mut out = Vec::with_capacity(n.min(raw_len / 5 + 1));
    let mut pos = 0;
    while pos < raw.len() {
        let slice = general_value(&raw, pos)?;
        let len = slice.len();
        let mut d =
            Document::from_reader(slice).map_err(|e| TsError::corrupt(format!("value: {e}")))?;
        if d.len() != 1 {
            return Err(TsError::corrupt("value document with extra keys"));
        }
        let v = d
            .remove("")
            .ok_or_else(|| TsError::corrupt("value without key"))?;
        out.push(v);
        pos += len.max(1);
        if out.len() > n {
            return Err(TsError::corrupt("too many values"));
        }
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bson::{doc, Binary, Timestamp};

    #[test]
    fn values_of_one_numeric_type_have_the_typed_form_a_stored_column_decodes_to() {
        let cases = [
            vec![Some(Bson::Double(1.5)), None, Some(Bson::Double(-2.0))],
            vec![Some(Bson::Int32(3)), Some(Bson::Int32(4))],
            vec![None, Some(Bson::Int64(1 << 40))],
            vec![Some(Bson::DateTime(DateTime::from_millis(5))), None],
        ];
        for values in cases {
            let typed = TypedColumn::from_values(&values).expect("typed");
            let read: Vec<Option<Bson>> = (0..values.len()).map(|i| typed.get(i)).collect();
            assert_eq!(read, values);
            let stored = decode_typed_column(&encode_column(&values), values.len()).unwrap();
            assert_eq!(stored.as_ref().map(|t| &t.values), Some(&typed.values));
        }
        for untyped in [
            vec![Some(Bson::Int32(1)), Some(Bson::Double(2.0))],
            vec![Some(Bson::String("a".into()))],
            vec![None, None],
        ] {
            assert_eq!(TypedColumn::from_values(&untyped), None, "{untyped:?}");
        }
    }

    fn roundtrip(values: Vec<Option<Bson>>) {
        let enc = encode_column(&values);
        let dec = decode_column(&enc, values.len()).unwrap();
        let a: Vec<Option<Vec<u8>>> = values.iter().map(|v| v.as_ref().map(bytes_of)).collect();
        let b: Vec<Option<Vec<u8>>> = dec.iter().map(|v| v.as_ref().map(bytes_of)).collect();
        assert_eq!(a, b);
    }

    fn bytes_of(v: &Bson) -> Vec<u8> {
        let mut d = Document::new();
        d.insert("", v.clone());
        bson::to_vec(&d).unwrap()
    }

    /// Deterministic xorshift generator for test data.
    pub(crate) struct Rng(pub u64);
    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        pub fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    pub(crate) fn random_walk(n: usize) -> Vec<f64> {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut x = 20.0f64;
        (0..n)
            .map(|_| {
                x += rng.unit() - 0.5;
                (x * 100.0).round() / 100.0
            })
            .collect()
    }

    #[test]
    fn picks_codec_by_column_type() {
        assert_eq!(
            column_codec(&encode_column(&[Some(Bson::Double(1.0))])),
            Some(ColumnCodec::Double)
        );
        assert_eq!(column_codec(&[42]), None);
        let tag = |v: Vec<Option<Bson>>| encode_column(&v)[0];
        assert_eq!(
            tag(vec![Some(Bson::DateTime(DateTime::from_millis(1)))]),
            TAG_DATE
        );
        assert_eq!(tag(vec![Some(Bson::Double(1.5))]), TAG_DOUBLE);
        assert_eq!(tag(vec![Some(Bson::Int32(1)), None]), TAG_INT32);
        assert_eq!(tag(vec![Some(Bson::Int64(1))]), TAG_INT64);
        assert_eq!(
            tag(vec![Some(Bson::ObjectId(ObjectId::new()))]),
            TAG_OBJECT_ID
        );
        assert_eq!(
            tag(vec![Some(Bson::Int32(1)), Some(Bson::Int64(1))]),
            TAG_INT32_INT64
        );
        assert_eq!(
            tag(vec![Some(Bson::Int32(1)), Some(Bson::Double(1.5))]),
            TAG_INT32_DOUBLE
        );
        assert_eq!(
            tag(vec![
                Some(Bson::Int32(1)),
                Some(Bson::Double(1.5)),
                Some(Bson::Int64(2))
            ]),
            TAG_GENERAL
        );
        assert_eq!(tag(vec![None, None]), TAG_EMPTY);
    }

    #[test]
    fn roundtrips_every_codec_with_gaps() {
        roundtrip(vec![
            Some(Bson::Int32(i32::MIN)),
            None,
            Some(Bson::Double(-0.0)),
            Some(Bson::Double(f64::NAN)),
            Some(Bson::Int32(7)),
        ]);
        roundtrip(vec![
            Some(Bson::Int32(i32::MAX)),
            Some(Bson::Int64(i64::MIN)),
            None,
            Some(Bson::Int32(-1)),
        ]);
        roundtrip(vec![None, None, None]);
        roundtrip(vec![
            Some(Bson::DateTime(DateTime::from_millis(-5))),
            None,
            Some(Bson::DateTime(DateTime::from_millis(i64::MAX))),
        ]);
        roundtrip(vec![
            Some(Bson::Double(f64::NAN)),
            Some(Bson::Double(-0.0)),
            Some(Bson::Double(f64::INFINITY)),
            None,
        ]);
        roundtrip(vec![
            Some(Bson::Int32(i32::MIN)),
            Some(Bson::Int32(i32::MAX)),
        ]);
        roundtrip(vec![
            Some(Bson::Int64(i64::MIN)),
            None,
            Some(Bson::Int64(7)),
        ]);
        roundtrip(
            (0..20)
                .map(|_| Some(Bson::ObjectId(ObjectId::new())))
                .collect(),
        );
        roundtrip(vec![
            Some(Bson::String("a".into())),
            Some(Bson::Null),
            None,
            Some(Bson::Document(doc! {"x": [1, "y"]})),
            Some(Bson::Binary(Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: vec![1, 2],
            })),
            Some(Bson::Timestamp(Timestamp {
                time: 1,
                increment: 2,
            })),
            Some(Bson::MinKey),
            Some(Bson::Int32(3)),
        ]);
    }

    #[test]
    fn rejects_truncated_and_unknown_columns() {
        let enc = encode_column(&[Some(Bson::Double(1.0)), Some(Bson::Double(2.0))]);
        for cut in 0..enc.len() {
            assert!(decode_column(&enc[..cut], 2).is_err(), "cut {cut}");
        }
        assert!(decode_column(&[99, 0], 1).is_err());
        assert!(decode_column(&enc, 3).is_err());
    }

    #[test]
    fn reports_bytes_per_value() {
        let n = 1000;
        let walk: Vec<Option<Bson>> = random_walk(n)
            .into_iter()
            .map(|x| Some(Bson::Double(x)))
            .collect();
        let pco_bpv = encode_column(&walk).len() as f64 / n as f64;
        let raw: Vec<f64> = random_walk(n);
        let gorilla_bpv = crate::gorilla::encode(&raw).len() as f64 / n as f64;
        let times: Vec<Option<Bson>> = (0..n as i64)
            .map(|i| {
                Some(Bson::DateTime(DateTime::from_millis(
                    1_700_000_000_000 + i * 10_000,
                )))
            })
            .collect();
        let time_bpv = encode_column(&times).len() as f64 / n as f64;
        // JavaScript drivers send whole numbers as int32.
        let js: Vec<Option<Bson>> = random_walk(n)
            .into_iter()
            .map(|x| {
                let x = (x * 10.0).round() / 10.0;
                Some(if x.fract() == 0.0 {
                    Bson::Int32(x as i32)
                } else {
                    Bson::Double(x)
                })
            })
            .collect();
        let js_bpv = encode_column(&js).len() as f64 / n as f64;
        let ids: Vec<Option<Bson>> = (0..n)
            .map(|_| Some(Bson::ObjectId(ObjectId::new())))
            .collect();
        let oid_bpv = encode_column(&ids).len() as f64 / n as f64;
        println!(
            "bytes/value: doubles pco {pco_bpv:.3}, doubles gorilla {gorilla_bpv:.3}, 10s timestamps {time_bpv:.3}, ObjectIds {oid_bpv:.3}, int32/double mix {js_bpv:.3}"
        );
        assert!(pco_bpv < 3.0, "{pco_bpv}");
        assert!(time_bpv < 0.5, "{time_bpv}");
        assert!(oid_bpv < 4.0, "{oid_bpv}");
        assert!(js_bpv < 2.0, "{js_bpv}");
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics_on_mutated_numeric_columns(
            kind in 0u8..6,
            flips in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 1..4),
            n in 1usize..300,
        ) {
            let values: Vec<Option<Bson>> = (0..n)
                .map(|i| match kind {
                    0 => Some(Bson::Double(random_walk(n)[i])),
                    1 => Some(Bson::DateTime(DateTime::from_millis(i as i64 * 10_000))),
                    2 => Some(Bson::Int32(i as i32 * 3)),
                    3 => Some(Bson::ObjectId(ObjectId::new())),
                    4 if i % 2 == 0 => Some(Bson::Int32(i as i32)),
                    4 => Some(Bson::Double(i as f64 / 4.0)),
                    _ => (i % 3 != 0).then(|| Bson::String(format!("s{}", i % 7))),
                })
                .collect();
            let mut enc = encode_column(&values);
            for (i, x) in flips {
                let len = enc.len();
                enc[i % len] ^= x;
            }
            let _ = decode_column(&enc, n);
        }
    }
}
