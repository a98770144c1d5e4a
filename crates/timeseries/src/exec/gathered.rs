//! One output column of a columnar projection as its rows are gathered: Arrow arrays
//! for numbers and dates read from typed bucket columns (no BSON value per row), one
//! value per bucket for the meta field and meta-only expressions, BSON values otherwise.
//! The same arrays give the sort its keys and the reply its values.

use super::col::Col;
use crate::column::{NumericValues, TypedColumn};
use arrow_array::builder::{ArrayBuilder, Float64Builder, Int32Builder, Int64Builder};
use arrow_array::{
    Array, ArrayRef, Float64Array, Int32Array, Int64Array, StringArray, UInt32Array,
};
use bson::spec::ElementType;
use bson::{Bson, DateTime};
use hourglass_query::bson_write;
use hourglass_query::compare::compare_values;
use hourglass_query::pipeline::mem::approx_size;
use std::borrow::Cow;
use std::sync::Arc;

/// Rows of typed buckets, in Arrow builders.
pub enum Builder {
    Dates(Int64Builder),
    Doubles(Float64Builder),
    Int32s(Int32Builder),
    Int64s(Int64Builder),
}

/// A column while rows are gathered.
pub enum Gathering {
    /// Only missing values so far (how many).
    Missing(usize),
    /// The first typed bucket decides the kind; a bucket of another kind turns the
    /// column into `Values`.
    Typed(Builder),
    /// One value per bucket, fed by [`Gathering::append_bucket`]; rows read it through
    /// their bucket.
    PerBucket(Vec<Option<Bson>>),
    /// One BSON value per row.
    Values(Vec<Option<Bson>>),
}

/// A gathered column, read by the sort and the reply.
pub enum Gathered {
    Dates(Int64Array),
    Doubles(Float64Array),
    Int32s(Int32Array),
    Int64s(Int64Array),
    PerBucket(Vec<Option<Bson>>),
    Values(Vec<Option<Bson>>),
}

/// What one typed value costs in the sort's memory count (as a BSON value would).
fn typed_size() -> u64 {
    approx_size(&Bson::Double(0.0))
}

impl Builder {
    fn for_kind(values: &NumericValues) -> Builder {
        match values {
            NumericValues::Dates(_) => Builder::Dates(Int64Builder::new()),
            NumericValues::Doubles(_) => Builder::Doubles(Float64Builder::new()),
            NumericValues::Int32s(_) => Builder::Int32s(Int32Builder::new()),
            NumericValues::Int64s(_) => Builder::Int64s(Int64Builder::new()),
        }
    }

    /// Whether `t` is of this builder's kind.
    fn accepts(&self, t: &TypedColumn) -> bool {
        matches!(
            (self, &t.values),
            (Builder::Dates(_), NumericValues::Dates(_))
                | (Builder::Doubles(_), NumericValues::Doubles(_))
                | (Builder::Int32s(_), NumericValues::Int32s(_))
                | (Builder::Int64s(_), NumericValues::Int64s(_))
        )
    }

    /// Appends rows `rows` of `t` (nothing when `t` is of another kind).
    fn append(&mut self, t: &TypedColumn, rows: &[usize]) {
        fn put<T: Copy>(
            b: &mut arrow_array::builder::PrimitiveBuilder<
                impl arrow_array::ArrowPrimitiveType<Native = T>,
            >,
            t: &TypedColumn,
            values: &[T],
            rows: &[usize],
        ) {
            for &i in rows {
                match values.get(i) {
                    Some(v) if t.has(i) => b.append_value(*v),
                    _ => b.append_null(),
                }
            }
        }
        match (self, &t.values) {
            (Builder::Dates(b), NumericValues::Dates(v)) => put(b, t, v, rows),
            (Builder::Doubles(b), NumericValues::Doubles(v)) => put(b, t, v, rows),
            (Builder::Int32s(b), NumericValues::Int32s(v)) => put(b, t, v, rows),
            (Builder::Int64s(b), NumericValues::Int64s(v)) => put(b, t, v, rows),
            _ => {}
        }
    }

    fn append_nulls(&mut self, n: usize) {
        match self {
            Builder::Dates(b) | Builder::Int64s(b) => b.append_nulls(n),
            Builder::Doubles(b) => b.append_nulls(n),
            Builder::Int32s(b) => b.append_nulls(n),
        }
    }

    /// An empty builder of this one's kind.
    fn empty_like(&self) -> Builder {
        match self {
            Builder::Dates(_) => Builder::Dates(Int64Builder::new()),
            Builder::Doubles(_) => Builder::Doubles(Float64Builder::new()),
            Builder::Int32s(_) => Builder::Int32s(Int32Builder::new()),
            Builder::Int64s(_) => Builder::Int64s(Int64Builder::new()),
        }
    }

    /// Appends what `later` holds, when it is of this builder's kind; else gives it back.
    fn append_builder(&mut self, later: Builder) -> Result<(), Builder> {
        match (self, later) {
            (Builder::Dates(a), Builder::Dates(mut b))
            | (Builder::Int64s(a), Builder::Int64s(mut b)) => a.extend(b.finish().iter()),
            (Builder::Doubles(a), Builder::Doubles(mut b)) => a.extend(b.finish().iter()),
            (Builder::Int32s(a), Builder::Int32s(mut b)) => a.extend(b.finish().iter()),
            (_, later) => return Err(later),
        }
        Ok(())
    }

    fn len(&self) -> usize {
        match self {
            Builder::Dates(b) | Builder::Int64s(b) => b.len(),
            Builder::Doubles(b) => b.len(),
            Builder::Int32s(b) => b.len(),
        }
    }

    fn finish(self) -> Gathered {
        match self {
            Builder::Dates(mut b) => Gathered::Dates(b.finish()),
            Builder::Doubles(mut b) => Gathered::Doubles(b.finish()),
            Builder::Int32s(mut b) => Gathered::Int32s(b.finish()),
            Builder::Int64s(mut b) => Gathered::Int64s(b.finish()),
        }
    }
}

impl Gathering {
    /// A column of one value per bucket.
    pub fn per_bucket() -> Gathering {
        Gathering::PerBucket(Vec::new())
    }

    /// A column of the rows' own values.
    pub fn per_row() -> Gathering {
        Gathering::Missing(0)
    }

    /// Appends the values of `col` at `rows`; returns what they cost in the sort's count.
    pub fn append_rows(&mut self, col: &Col, rows: &[usize]) -> u64 {
        let typed_cost = typed_size() * rows.len() as u64;
        match (&mut *self, col) {
            (Gathering::Missing(n), Col::Typed(t)) => {
                let mut b = Builder::for_kind(&t.values);
                b.append_nulls(*n);
                b.append(t, rows);
                *self = Gathering::Typed(b);
                return typed_cost;
            }
            (Gathering::Typed(b), Col::Typed(t)) if b.accepts(t) => {
                b.append(t, rows);
                return typed_cost;
            }
            (Gathering::Missing(n), Col::Values(v))
                if rows.iter().all(|&i| v.get(i).is_none_or(Option::is_none)) =>
            {
                *n += rows.len();
                return 8 * rows.len() as u64;
            }
            (Gathering::Typed(b), Col::Values(v))
                if rows.iter().all(|&i| v.get(i).is_none_or(Option::is_none)) =>
            {
                b.append_nulls(rows.len());
                return typed_cost;
            }
            _ => {}
        }
        let Some(values) = self.as_values() else {
            return 0;
        };
        let before = values.len();
        values.extend(rows.iter().map(|&i| col.get(i)));
        values[before..]
            .iter()
            .map(|v| v.as_ref().map_or(8, approx_size))
            .sum()
    }

    /// Appends one bucket's value; returns what its `rows` rows cost in the sort's count.
    pub fn append_bucket(&mut self, value: Option<Bson>, rows: usize) -> u64 {
        let size = value.as_ref().map_or(8, approx_size) * rows as u64;
        if let Gathering::PerBucket(v) = self {
            v.push(value);
        }
        size
    }

    /// The rows' values as BSON, converting what was gathered so far; `None` for a
    /// column of one value per bucket.
    fn as_values(&mut self) -> Option<&mut Vec<Option<Bson>>> {
        match self {
            Gathering::Missing(n) => *self = Gathering::Values(vec![None; *n]),
            Gathering::Typed(b) => {
                let n = b.len();
                let typed = std::mem::replace(b, Builder::Int32s(Int32Builder::new())).finish();
                let values = (0..n).map(|r| typed.cell(r, 0).map(Cow::into_owned));
                *self = Gathering::Values(values.collect());
            }
            Gathering::PerBucket(_) | Gathering::Values(_) => {}
        }
        match self {
            Gathering::Values(v) => Some(v),
            _ => None,
        }
    }

    /// Appends `later`, the same column gathered over the buckets that follow this one's
    /// (a run split across threads): the result is what one run over both gives.
    pub fn append(&mut self, later: Gathering) {
        let later = match (&mut *self, later) {
            (Gathering::PerBucket(a), Gathering::PerBucket(b)) => return a.extend(b),
            (Gathering::Missing(a), Gathering::Missing(b)) => return *a += b,
            (Gathering::Typed(a), Gathering::Missing(n)) => return a.append_nulls(n),
            (Gathering::Missing(n), Gathering::Typed(b)) => {
                let mut first = b.empty_like();
                first.append_nulls(*n);
                match first.append_builder(b) {
                    Ok(()) => return *self = Gathering::Typed(first),
                    Err(b) => Gathering::Typed(b),
                }
            }
            (Gathering::Typed(a), Gathering::Typed(b)) => match a.append_builder(b) {
                Ok(()) => return,
                Err(b) => Gathering::Typed(b),
            },
            (_, later) => later,
        };
        let values = later.into_values();
        if let Some(v) = self.as_values() {
            v.extend(values);
        }
    }

    /// The rows' values as BSON (nothing for a column of one value per bucket, which only
    /// ever meets another such column).
    fn into_values(mut self) -> Vec<Option<Bson>> {
        self.as_values().map(std::mem::take).unwrap_or_default()
    }

    pub fn finish(self) -> Gathered {
        match self {
            Gathering::Missing(n) => Gathered::Values(vec![None; n]),
            Gathering::Typed(b) => b.finish(),
            Gathering::PerBucket(v) => Gathered::PerBucket(v),
            Gathering::Values(v) => Gathered::Values(v),
        }
    }
}

impl Gathered {
    /// Writes row `r`'s value (its bucket is `bucket`) as a BSON element named by
    /// `name` (the key's bytes and its NUL); nothing when the row has no value.
    pub fn write_cell(
        &self,
        r: usize,
        bucket: usize,
        name: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        // Writes `a`'s value at `r`, when it has one.
        fn put<T: arrow_array::ArrowPrimitiveType, const N: usize>(
            a: &arrow_array::PrimitiveArray<T>,
            r: usize,
            kind: ElementType,
            (name, out): (&[u8], &mut Vec<u8>),
            bytes: impl Fn(T::Native) -> [u8; N],
        ) -> Result<(), String> {
            if r < a.len() && a.is_valid(r) {
                out.push(kind as u8);
                out.extend_from_slice(name);
                out.extend_from_slice(&bytes(a.value(r)));
            }
            Ok(())
        }
        let to = (name, &mut *out);
        let value = match self {
            Gathered::Dates(a) => return put(a, r, ElementType::DateTime, to, i64::to_le_bytes),
            Gathered::Doubles(a) => return put(a, r, ElementType::Double, to, f64::to_le_bytes),
            Gathered::Int32s(a) => return put(a, r, ElementType::Int32, to, i32::to_le_bytes),
            Gathered::Int64s(a) => return put(a, r, ElementType::Int64, to, i64::to_le_bytes),
            Gathered::PerBucket(v) => v.get(bucket),
            Gathered::Values(v) => v.get(r),
        };
        let Some(Some(v)) = value else {
            return Ok(());
        };
        out.push(v.element_type() as u8);
        out.extend_from_slice(name);
        bson_write::write_value(v, out)
    }

    /// The value of row `r`, whose bucket is `bucket`.
    pub fn cell(&self, r: usize, bucket: usize) -> Option<Cow<'_, Bson>> {
        fn at<T: arrow_array::ArrowPrimitiveType>(
            a: &arrow_array::PrimitiveArray<T>,
            r: usize,
        ) -> Option<T::Native> {
            (r < a.len() && a.is_valid(r)).then(|| a.value(r))
        }
        let owned = |v: Bson| Some(Cow::Owned(v));
        match self {
            Gathered::Dates(a) => owned(Bson::DateTime(DateTime::from_millis(at(a, r)?))),
            Gathered::Doubles(a) => owned(Bson::Double(at(a, r)?)),
            Gathered::Int32s(a) => owned(Bson::Int32(at(a, r)?)),
            Gathered::Int64s(a) => owned(Bson::Int64(at(a, r)?)),
            Gathered::PerBucket(v) => v.get(bucket)?.as_ref().map(Cow::Borrowed),
            Gathered::Values(v) => v.get(r)?.as_ref().map(Cow::Borrowed),
        }
    }

    /// An Arrow array that orders the rows as MongoDB's sort does (missing and null as
    /// nulls), or `None` when the values need MongoDB's comparison on documents.
    pub fn sort_key(&self, bucket_of_row: &[u32]) -> Option<ArrayRef> {
        Some(match self {
            Gathered::Dates(a) | Gathered::Int64s(a) => Arc::new(a.clone()),
            Gathered::Int32s(a) => Arc::new(a.clone()),
            // MongoDB orders NaN before every number, Arrow after.
            Gathered::Doubles(a) if a.iter().flatten().any(f64::is_nan) => return None,
            Gathered::Doubles(a) => Arc::new(a.clone()),
            Gathered::PerBucket(v) => Arc::new(bucket_ranks(v, bucket_of_row)?),
            Gathered::Values(v) => typed_array(v)?,
        })
    }
}

/// Each row's bucket value replaced by its rank among the buckets' values in MongoDB's
/// order (missing as null; equal values share a rank). `None` when a value is an array,
/// whose sort key depends on the direction.
fn bucket_ranks(values: &[Option<Bson>], bucket_of_row: &[u32]) -> Option<UInt32Array> {
    let null = Bson::Null;
    let key = |b: usize| values.get(b).and_then(Option::as_ref).unwrap_or(&null);
    if values.iter().flatten().any(|v| matches!(v, Bson::Array(_))) {
        return None;
    }
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| compare_values(key(a), key(b)));
    let mut rank = vec![0u32; values.len()];
    let mut next = 0u32;
    for (i, &b) in order.iter().enumerate() {
        if i > 0 && compare_values(key(order[i - 1]), key(b)).is_ne() {
            next += 1;
        }
        rank[b] = next;
    }
    Some(UInt32Array::from_iter_values(
        bucket_of_row
            .iter()
            .map(|&b| rank.get(b as usize).copied().unwrap_or(0)),
    ))
}

/// One Arrow array for a column of BSON values of one kind (numbers, strings or dates,
/// with nulls for missing and null); `None` for anything else.
fn typed_array(values: &[Option<Bson>]) -> Option<ArrayRef> {
    fn value(v: &Option<Bson>) -> Option<&Bson> {
        v.as_ref().filter(|v| !matches!(v, Bson::Null))
    }
    let present = || values.iter().filter_map(value);
    if present().all(|v| matches!(v, Bson::DateTime(_))) {
        return Some(Arc::new(Int64Array::from_iter(values.iter().map(
            |v| match value(v) {
                Some(Bson::DateTime(d)) => Some(d.timestamp_millis()),
                _ => None,
            },
        ))));
    }
    if present().all(|v| matches!(v, Bson::String(_))) {
        return Some(Arc::new(StringArray::from_iter(values.iter().map(
            |v| match value(v) {
                Some(Bson::String(s)) => Some(s.as_str()),
                _ => None,
            },
        ))));
    }
    // Numbers compare by value across types; doubles hold every value exactly only up to
    // 2^53, and MongoDB orders NaN before every number (Arrow after).
    const EXACT: i64 = 1 << 53;
    let exact_double = |v: &Bson| match v {
        Bson::Double(d) => !d.is_nan(),
        Bson::Int32(_) => true,
        Bson::Int64(i) => (-EXACT..=EXACT).contains(i),
        _ => false,
    };
    if present().all(exact_double) {
        return Some(Arc::new(Float64Array::from_iter(values.iter().map(
            |v| match value(v) {
                Some(Bson::Double(d)) => Some(*d),
                Some(Bson::Int32(i)) => Some(f64::from(*i)),
                Some(Bson::Int64(i)) => Some(*i as f64),
                _ => None,
            },
        ))));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(values: NumericValues, present: Option<Vec<bool>>) -> Col {
        Col::Typed(TypedColumn { values, present })
    }

    fn cells(g: &Gathered, n: usize) -> Vec<Option<Bson>> {
        (0..n).map(|r| g.cell(r, 0).map(Cow::into_owned)).collect()
    }

    #[test]
    fn rows_of_buckets_of_one_kind_stay_in_an_arrow_array_with_nulls_for_missing() {
        let mut g = Gathering::per_row();
        g.append_rows(&Col::Values(vec![None, None]), &[1]);
        let doubles = typed(
            NumericValues::Doubles(vec![1.5, 2.5, 3.5]),
            Some(vec![true, false, true]),
        );
        g.append_rows(&doubles, &[0, 1, 2]);
        g.append_rows(&Col::Values(vec![None; 3]), &[0, 2]);
        let g = g.finish();
        assert!(matches!(g, Gathered::Doubles(_)));
        assert_eq!(
            cells(&g, 6),
            vec![
                None,
                Some(Bson::Double(1.5)),
                None,
                Some(Bson::Double(3.5)),
                None,
                None
            ]
        );
    }

    #[test]
    fn a_bucket_of_another_kind_turns_the_column_into_bson_values_in_row_order() {
        let mut g = Gathering::per_row();
        g.append_rows(&typed(NumericValues::Int32s(vec![7, 8]), None), &[1, 0]);
        g.append_rows(&typed(NumericValues::Doubles(vec![0.5]), None), &[0]);
        g.append_rows(&Col::Values(vec![Some(Bson::String("x".into()))]), &[0]);
        g.append_rows(&typed(NumericValues::Int32s(vec![9]), None), &[0]);
        let g = g.finish();
        assert!(matches!(g, Gathered::Values(_)));
        assert_eq!(
            cells(&g, 5),
            vec![
                Some(Bson::Int32(8)),
                Some(Bson::Int32(7)),
                Some(Bson::Double(0.5)),
                Some(Bson::String("x".into())),
                Some(Bson::Int32(9)),
            ]
        );
    }

    #[test]
    fn per_bucket_values_sort_by_rank_in_mongodb_order_with_equal_values_tied() {
        let mut g = Gathering::per_bucket();
        for v in [
            Some(Bson::String("b".into())),
            None,
            Some(Bson::Int32(3)),
            Some(Bson::String("b".into())),
            Some(Bson::Null),
        ] {
            g.append_bucket(v, 1);
        }
        let key = g.finish().sort_key(&[0, 1, 2, 3, 4, 0]).expect("ranks");
        let ranks = key
            .as_any()
            .downcast_ref::<UInt32Array>()
            .expect("u32")
            .values()
            .to_vec();
        // null and missing first, then numbers, then strings (MongoDB's type order).
        assert_eq!(ranks, vec![2, 0, 1, 2, 0, 2]);
    }

    #[test]
    fn arrays_and_nan_leave_the_order_to_mongodb_comparison() {
        let mut g = Gathering::per_bucket();
        g.append_bucket(Some(Bson::Array(vec![Bson::Int32(1)])), 1);
        assert!(g.finish().sort_key(&[0]).is_none());
        let mut g = Gathering::per_row();
        g.append_rows(&typed(NumericValues::Doubles(vec![f64::NAN]), None), &[0]);
        assert!(g.finish().sort_key(&[0]).is_none());
    }
}
