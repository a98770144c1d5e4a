//! A column as vectorized operators read it: plain numbers when the stored codec allows
//! (no BSON value per measurement), else BSON values.

use crate::column::{NumericValues, TypedColumn};
use crate::store::BucketView;
use crate::TsError;
use bson::Bson;

pub enum Col {
    Typed(TypedColumn),
    Values(Vec<Option<Bson>>),
}

impl Col {
    /// The column `field` of `view` (all missing when the bucket lacks it). A column of
    /// one numeric type is typed whether stored or in memory (an open bucket's values
    /// are converted once, not read as BSON row by row).
    pub fn load(view: &BucketView, field: &str) -> Result<Col, TsError> {
        if let BucketView::Stored(b) = view {
            if let Some(t) = b.typed_column(field)? {
                return Ok(Col::Typed(t));
            }
        }
        let values = view
            .column(field)?
            .unwrap_or_else(|| vec![None; view.count()]);
        if !matches!(view, BucketView::Stored(_)) {
            if let Some(t) = TypedColumn::from_values(&values) {
                return Ok(Col::Typed(t));
            }
        }
        Ok(Col::Values(values))
    }

    /// The value of measurement `i`.
    pub fn get(&self, i: usize) -> Option<Bson> {
        match self {
            Col::Typed(t) => t.get(i),
            Col::Values(v) => v.get(i).cloned().flatten(),
        }
    }

    /// The value of measurement `i` when it is a double of a typed column.
    pub fn double(&self, i: usize) -> Option<f64> {
        match self {
            Col::Typed(
                t @ TypedColumn {
                    values: NumericValues::Doubles(d),
                    ..
                },
            ) if t.has(i) => d.get(i).copied(),
            _ => None,
        }
    }

    /// The date of measurement `i` in milliseconds, if it is a date.
    pub fn date_ms(&self, i: usize) -> Option<i64> {
        match self {
            Col::Typed(
                t @ TypedColumn {
                    values: NumericValues::Dates(d),
                    ..
                },
            ) if t.has(i) => d.get(i).copied(),
            Col::Typed(_) => None,
            Col::Values(v) => match v.get(i) {
                Some(Some(Bson::DateTime(d))) => Some(d.timestamp_millis()),
                _ => None,
            },
        }
    }

    /// True when a value of measurement `i` may be an array (only BSON columns).
    pub fn may_hold_arrays(&self) -> bool {
        match self {
            Col::Typed(_) => false,
            Col::Values(v) => v.iter().any(|x| matches!(x, Some(Bson::Array(_)))),
        }
    }
}

/// The columns of one bucket, each decoded at most once (the row filter and the group
/// both read the time column).
pub struct Cols<'a> {
    pub view: &'a BucketView,
    cache: std::cell::RefCell<Vec<(String, std::rc::Rc<Col>)>>,
}

impl<'a> Cols<'a> {
    pub fn new(view: &'a BucketView) -> Cols<'a> {
        Cols {
            view,
            cache: Default::default(),
        }
    }

    pub fn get(&self, field: &str) -> Result<std::rc::Rc<Col>, TsError> {
        if let Some((_, c)) = self.cache.borrow().iter().find(|(f, _)| f == field) {
            return Ok(c.clone());
        }
        let c = std::rc::Rc::new(Col::load(self.view, field)?);
        self.cache.borrow_mut().push((field.to_string(), c.clone()));
        Ok(c)
    }
}

/// One measurement's value of a location field, as geo operators read it.
pub enum GeoValue<'a> {
    /// A GeoJSON point in its common form, read from the BSON bytes.
    Point(hourglass_query::geo::shape::Pos),
    Value(std::borrow::Cow<'a, Bson>),
    Missing,
}

/// A location column: read from the BSON bytes when the bucket stores it with the
/// general codec (a GeoJSON point then costs no value built), else decoded values.
pub enum GeoCol {
    Raw(crate::column::RawValues),
    Decoded(std::rc::Rc<Col>),
}

impl GeoCol {
    pub fn load(cols: &Cols<'_>, field: &str) -> Result<GeoCol, TsError> {
        if let BucketView::Stored(b) = cols.view {
            if let Some(raw) = b.raw_general_column(field)? {
                return Ok(GeoCol::Raw(raw));
            }
        }
        Ok(GeoCol::Decoded(cols.get(field)?))
    }

    /// Measurement `i`'s value; an error when stored bytes do not parse.
    pub fn get(&self, i: usize) -> Result<GeoValue<'_>, TsError> {
        use std::borrow::Cow;
        Ok(match self {
            GeoCol::Raw(raw) => {
                let point = raw
                    .get_bytes(i)
                    .filter(|(kind, _)| *kind == 0x03)
                    .and_then(|(_, doc)| hourglass_query::geo::shape::raw_point(doc));
                match point {
                    Some(p) => GeoValue::Point(p),
                    None => match raw.get(i)? {
                        Some(v) => GeoValue::Value(Cow::Owned(
                            Bson::try_from(v)
                                .map_err(|e| TsError::corrupt(format!("value: {e}")))?,
                        )),
                        None => GeoValue::Missing,
                    },
                }
            }
            GeoCol::Decoded(col) => match &**col {
                Col::Values(v) => match v.get(i) {
                    Some(Some(v)) => GeoValue::Value(Cow::Borrowed(v)),
                    _ => GeoValue::Missing,
                },
                // Numbers are no geometries.
                Col::Typed(_) => GeoValue::Missing,
            },
        })
    }
}
