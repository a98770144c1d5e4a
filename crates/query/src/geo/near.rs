//! Ordering by distance, for the `$geoNear` stage and the order `$near`/`$nearSphere` give
//! a `find`. Each document's distance is the smallest from the query point to a geometry
//! at the key path (an array of points counts its nearest); documents without one, or
//! outside `minDistance`/`maxDistance`, are left out; the rest come nearest first.

use super::pred::Near;
use super::shape::{self, Shape};
use bson::{Bson, Document};

/// The distance of `doc` at `path`, and the location it was measured to.
pub fn distance_of(doc: &Document, path: &str, near: &Near) -> Option<(f64, Bson)> {
    nearest(shape::geometries_at(doc, path), near)
}

/// [`distance_of`] a document whose value at a top-level key is `v`.
pub fn distance_of_value(v: &Bson, near: &Near) -> Option<(f64, Bson)> {
    nearest(shape::geometries_of(v), near)
}

fn nearest<'a>(values: impl IntoIterator<Item = &'a Bson>, near: &Near) -> Option<(f64, Bson)> {
    let mut best: Option<(f64, &Bson)> = None;
    for v in values {
        if let Some(d) = shape::stored(v).and_then(|s: Shape| near.distance(&s)) {
            if best.is_none_or(|(b, _)| d < b) {
                best = Some((d, v));
            }
        }
    }
    best.map(|(d, v)| (d, v.clone()))
}

/// Keeps the documents within range of `near` at `path`, nearest first (ties keep their
/// input order), each with its distance and location.
pub fn order(docs: Vec<Document>, path: &str, near: &Near) -> Vec<(Document, f64, Bson)> {
    let mut out: Vec<(Document, f64, Bson)> = docs
        .into_iter()
        .filter_map(|d| {
            let (dist, loc) = distance_of(&d, path, near)?;
            near.in_range(dist).then_some((d, dist, loc))
        })
        .collect();
    out.sort_by(|a, b| a.1.total_cmp(&b.1));
    out
}
