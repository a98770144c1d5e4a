//! The columns of an open bucket as measurements arrive: one vector per data field,
//! typed (`f64`, `i64`, ...) while every value of the field has one numeric type, with the
//! field's control min/max and its schema kept beside it. A measurement costs one
//! push per field and no allocation on the common path (numbers, dates, ObjectIds); a
//! closed bucket's column goes to pco straight from the typed vector.
//!
//! A column stores only the values present; `present` marks which rows have one
//! (`None`: every row so far). A value of another type turns the column into `Mixed`
//! (owned `Bson` values), which the general codecs of [`crate::column`] encode.

use std::cmp::Ordering;
use std::collections::HashMap;

use bson::oid::ObjectId;
use bson::{Bson, DateTime};
use hourglass_query::compare::{canonical_type_rank, compare_values};
use hourglass_query::pipeline::mem::approx_size;

use crate::column::{encode_column, encode_typed_column, TypedValues};

/// Shape of one field's values, used to detect schema changes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SchemaNode {
    Scalar(u8),
    Object(HashMap<String, SchemaNode>),
    Array(Vec<SchemaNode>),
}

impl SchemaNode {
    pub(crate) fn of(v: &Bson) -> SchemaNode {
        match v {
            Bson::Document(d) => SchemaNode::Object(
                d.iter()
                    .map(|(k, v)| (k.clone(), SchemaNode::of(v)))
                    .collect(),
            ),
            Bson::Array(a) => SchemaNode::Array(a.iter().map(SchemaNode::of).collect()),
            other => SchemaNode::Scalar(canonical_type_rank(other)),
        }
    }

    /// False when `v` changes the type bracket of a field or turns a scalar into an
    /// object or array (or back): MongoDB's schema-change rule.
    pub(crate) fn compatible(&self, v: &Bson) -> bool {
        match (self, v) {
            (SchemaNode::Object(m), Bson::Document(d)) => d
                .iter()
                .all(|(k, v)| m.get(k).is_none_or(|n| n.compatible(v))),
            (SchemaNode::Array(a), Bson::Array(b)) => {
                a.iter().zip(b.iter()).all(|(n, v)| n.compatible(v))
            }
            (SchemaNode::Scalar(r), v) if !matches!(v, Bson::Document(_) | Bson::Array(_)) => {
                *r == canonical_type_rank(v)
            }
            _ => false,
        }
    }

    fn update(&mut self, v: &Bson) {
        match (self, v) {
            (SchemaNode::Object(m), Bson::Document(d)) => {
                for (k, v) in d {
                    match m.get_mut(k) {
                        Some(n) => n.update(v),
                        None => {
                            m.insert(k.clone(), SchemaNode::of(v));
                        }
                    }
                }
            }
            (SchemaNode::Array(a), Bson::Array(b)) => {
                for (i, v) in b.iter().enumerate() {
                    match a.get_mut(i) {
                        Some(n) => n.update(v),
                        None => a.push(SchemaNode::of(v)),
                    }
                }
            }
            (SchemaNode::Scalar(r), v) if !matches!(v, Bson::Document(_) | Bson::Array(_)) => {
                *r = canonical_type_rank(v)
            }
            (node, v) => *node = SchemaNode::of(v),
        }
    }
}

/// Merges `new` into a control bound (see `bucket`'s "Control min/max").
pub(crate) fn merge_extreme(cur: &mut Bson, new: &Bson, want: Ordering) {
    match (cur, new) {
        (Bson::Document(a), Bson::Document(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(c) => merge_extreme(c, v, want),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Bson::Array(a), Bson::Array(b)) => {
            for (i, v) in b.iter().enumerate() {
                match a.get_mut(i) {
                    Some(c) => merge_extreme(c, v, want),
                    None => a.push(v.clone()),
                }
            }
        }
        (cur, new) => {
            if compare_values(new, cur) == want {
                *cur = new.clone();
            }
        }
    }
}

/// A column's present values.
#[derive(Debug, Clone, PartialEq)]
enum Values {
    Date(Vec<i64>),
    Double(Vec<f64>),
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    ObjectId(Vec<[u8; 12]>),
    Mixed(Vec<Bson>),
}

impl Values {
    fn first(v: &Bson) -> Values {
        match v {
            Bson::DateTime(d) => Values::Date(vec![d.timestamp_millis()]),
            Bson::Double(x) => Values::Double(vec![*x]),
            Bson::Int32(x) => Values::Int32(vec![*x]),
            Bson::Int64(x) => Values::Int64(vec![*x]),
            Bson::ObjectId(o) => Values::ObjectId(vec![o.bytes()]),
            other => Values::Mixed(vec![other.clone()]),
        }
    }

    /// Appends `v` if it has the column's type; false otherwise.
    fn push_typed(&mut self, v: &Bson) -> bool {
        match (self, v) {
            (Values::Date(c), Bson::DateTime(d)) => c.push(d.timestamp_millis()),
            (Values::Double(c), Bson::Double(x)) => c.push(*x),
            (Values::Int32(c), Bson::Int32(x)) => c.push(*x),
            (Values::Int64(c), Bson::Int64(x)) => c.push(*x),
            (Values::ObjectId(c), Bson::ObjectId(o)) => c.push(o.bytes()),
            (Values::Mixed(c), v) => c.push(v.clone()),
            _ => return false,
        }
        true
    }

    fn len(&self) -> usize {
        match self {
            Values::Date(c) | Values::Int64(c) => c.len(),
            Values::Double(c) => c.len(),
            Values::Int32(c) => c.len(),
            Values::ObjectId(c) => c.len(),
            Values::Mixed(c) => c.len(),
        }
    }

    fn get(&self, i: usize) -> Option<Bson> {
        Some(match self {
            Values::Date(c) => Bson::DateTime(DateTime::from_millis(*c.get(i)?)),
            Values::Double(c) => Bson::Double(*c.get(i)?),
            Values::Int32(c) => Bson::Int32(*c.get(i)?),
            Values::Int64(c) => Bson::Int64(*c.get(i)?),
            Values::ObjectId(c) => Bson::ObjectId(ObjectId::from_bytes(*c.get(i)?)),
            Values::Mixed(c) => c.get(i)?.clone(),
        })
    }

    /// Replaces the last value (a field repeated within one measurement: the last wins,
    /// as when the measurement is read into a document).
    fn set_last(&mut self, v: &Bson) {
        let n = self.len();
        let mut all: Vec<Bson> = (0..n.saturating_sub(1))
            .filter_map(|i| self.get(i))
            .collect();
        all.push(v.clone());
        *self = Values::Mixed(all);
    }

    /// Turns the column into owned values (a value of another type arrived).
    fn as_mixed(&mut self) -> &mut Vec<Bson> {
        if !matches!(self, Values::Mixed(_)) {
            let all: Vec<Bson> = (0..self.len()).filter_map(|i| self.get(i)).collect();
            *self = Values::Mixed(all);
        }
        match self {
            Values::Mixed(c) => c,
            _ => unreachable!("converted just above"),
        }
    }
}

/// Bytes one typed value holds in memory.
const TYPED_VALUE_BYTES: usize = 8;

/// One data field of an open bucket.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ColumnBuilder {
    pub(crate) name: String,
    values: Values,
    /// Which rows have a value (`None`: every row).
    present: Option<Vec<bool>>,
    /// Rows covered (with or without a value).
    rows: usize,
    schema: SchemaNode,
    pub(crate) min: Bson,
    pub(crate) max: Bson,
}

impl ColumnBuilder {
    /// A column whose first value `v` arrives at row `row` (earlier rows lack it).
    pub(crate) fn new(name: &str, row: usize, v: &Bson) -> ColumnBuilder {
        let present = (row > 0).then(|| {
            let mut p = vec![false; row];
            p.push(true);
            p
        });
        ColumnBuilder {
            name: name.to_string(),
            values: Values::first(v),
            present,
            rows: row + 1,
            schema: SchemaNode::of(v),
            min: v.clone(),
            max: v.clone(),
        }
    }

    /// Bytes a value adds to the column in memory.
    pub(crate) fn value_bytes(v: &Bson) -> usize {
        match v {
            Bson::DateTime(_) | Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) => {
                TYPED_VALUE_BYTES
            }
            Bson::ObjectId(_) => 12,
            other => approx_size(other) as usize,
        }
    }

    pub(crate) fn accepts(&self, v: &Bson) -> bool {
        self.schema.compatible(v)
    }

    /// Sets the value of row `row` (the current last row, or the next one).
    pub(crate) fn push(&mut self, row: usize, v: &Bson) {
        if row + 1 == self.rows {
            // The field repeats within one measurement.
            if self
                .present
                .as_ref()
                .is_some_and(|p| p.last() == Some(&false))
            {
                if let Some(p) = self.present.as_mut().and_then(|p| p.last_mut()) {
                    *p = true;
                }
                if !self.values.push_typed(v) {
                    self.values.as_mixed().push(v.clone());
                }
            } else {
                self.values.set_last(v);
            }
        } else {
            self.pad_to(row);
            if let Some(p) = &mut self.present {
                p.push(true);
            }
            if !self.values.push_typed(v) {
                self.values.as_mixed().push(v.clone());
            }
            self.rows = row + 1;
        }
        self.schema.update(v);
        self.merge_bounds(v);
    }

    /// Marks rows up to `row` (excluded) that got no value as missing.
    pub(crate) fn pad_to(&mut self, row: usize) {
        if self.rows >= row {
            return;
        }
        let p = self.present.get_or_insert_with(|| vec![true; self.rows]);
        p.resize(row, false);
        self.rows = row;
    }

    fn merge_bounds(&mut self, v: &Bson) {
        match (&mut self.min, &mut self.max, v) {
            (Bson::Double(lo), Bson::Double(hi), Bson::Double(x)) => {
                if double_less(*x, *lo) {
                    *lo = *x;
                }
                if double_less(*hi, *x) {
                    *hi = *x;
                }
            }
            (Bson::DateTime(lo), Bson::DateTime(hi), Bson::DateTime(x)) => {
                *lo = (*lo).min(*x);
                *hi = (*hi).max(*x);
            }
            _ => {
                merge_extreme(&mut self.min, v, Ordering::Less);
                merge_extreme(&mut self.max, v, Ordering::Greater);
            }
        }
    }

    /// Every row's value (`None`: the row lacks the field), for `rows` rows.
    pub(crate) fn to_values(&self, rows: usize) -> Vec<Option<Bson>> {
        let mut next = 0;
        (0..rows)
            .map(|r| {
                let has = match &self.present {
                    None => r < self.rows,
                    Some(p) => p.get(r).copied().unwrap_or(false),
                };
                has.then(|| {
                    next += 1;
                    self.values.get(next - 1)
                })
                .flatten()
            })
            .collect()
    }

    /// The value of row `r`.
    pub(crate) fn get(&self, r: usize) -> Option<Bson> {
        match &self.present {
            None => self.values.get(r),
            Some(p) => {
                if !*p.get(r)? {
                    return None;
                }
                let rank = p[..r].iter().filter(|x| **x).count();
                self.values.get(rank)
            }
        }
    }

    /// The column in the compressed format (see [`crate::column`]), for `rows` rows.
    pub(crate) fn encode(&self, rows: usize) -> Vec<u8> {
        let typed = match &self.values {
            Values::Date(c) => TypedValues::Date(c),
            Values::Double(c) => TypedValues::Double(c),
            Values::Int32(c) => TypedValues::Int32(c),
            Values::Int64(c) => TypedValues::Int64(c),
            Values::ObjectId(c) => TypedValues::ObjectId(c),
            Values::Mixed(_) => return encode_column(&self.to_values(rows)),
        };
        let mut present = self.present.clone();
        if self.rows < rows {
            present
                .get_or_insert_with(|| vec![true; self.rows])
                .resize(rows, false);
        }
        encode_typed_column(typed, present.as_deref())
            .unwrap_or_else(|| encode_column(&self.to_values(rows)))
    }
}

/// MongoDB's order on doubles: NaN below every number.
fn double_less(a: f64, b: f64) -> bool {
    match (a.is_nan(), b.is_nan()) {
        (true, false) => true,
        (_, true) => false,
        _ => a < b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(values: &[Option<Bson>]) -> ColumnBuilder {
        let mut c: Option<ColumnBuilder> = None;
        for (r, v) in values.iter().enumerate() {
            let Some(v) = v else { continue };
            match &mut c {
                None => c = Some(ColumnBuilder::new("f", r, v)),
                Some(c) => c.push(r, v),
            }
        }
        let mut c = c.expect("a value");
        c.pad_to(values.len());
        c
    }

    #[test]
    fn typed_column_keeps_missing_rows_and_encodes_like_the_general_path() {
        let values = vec![
            None,
            Some(Bson::Double(1.5)),
            None,
            Some(Bson::Double(f64::NAN)),
            Some(Bson::Double(-3.0)),
        ];
        let c = col(&values);
        let got = c.to_values(values.len());
        assert_eq!(format!("{got:?}"), format!("{values:?}"));
        assert_eq!(c.encode(values.len()), encode_column(&values));
        assert!(c.min.as_f64().is_some_and(f64::is_nan));
        assert_eq!(c.max, Bson::Double(1.5));
        assert_eq!(c.get(4), Some(Bson::Double(-3.0)));
        assert_eq!(c.get(2), None);
    }

    #[test]
    fn a_value_of_another_type_makes_the_column_mixed() {
        let values = vec![
            Some(Bson::Int32(1)),
            Some(Bson::Double(2.5)),
            Some(Bson::String("x".into())),
        ];
        let c = col(&values);
        assert_eq!(c.to_values(3), values);
        assert_eq!(c.encode(3), encode_column(&values));
        assert_eq!(c.max, Bson::String("x".into()));
    }

    #[test]
    fn a_field_repeated_in_one_row_keeps_the_last_value() {
        let mut c = ColumnBuilder::new("f", 0, &Bson::Int64(1));
        c.push(1, &Bson::Int64(2));
        c.push(1, &Bson::Int64(3));
        assert_eq!(
            c.to_values(2),
            vec![Some(Bson::Int64(1)), Some(Bson::Int64(3))]
        );
    }
}
