//! `$geoNear` followed by `$limit k` over buckets: the k measurements nearest the query
//! point, found from the location column alone. Each bucket's passing rows get their
//! distance from the column's values; only rows nearer than the k-th best so far are
//! unpacked into documents, and a bounded heap keeps the k nearest. Ties keep scan
//! order, as the document path's stable sort does, so both give the same answer.
//! Once k are kept, a bucket whose points all lie in a box (its control min/max) no
//! nearer than the farthest kept is passed over without decoding its column.

use super::col::{Cols, GeoCol, GeoValue};
use crate::options::TimeseriesOptions;
use crate::store::{bucket_point_box, StoreError};
use bson::{Bson, Document};
use hourglass_query::geo::near::distance_of_value;
use hourglass_query::geo::shape::{Pos, Shape};
use hourglass_query::geo::Near;
use hourglass_query::pipeline::GeoNear;
use hourglass_query::QueryError;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A leading `$geoNear` (its `query` already moved into the `$match` before it) and the
/// `$limit` after it.
#[derive(Debug, Clone)]
pub struct NearestK {
    stage: GeoNear,
    limit: usize,
}

impl NearestK {
    /// `[$geoNear, $limit k, ...]` with a top-level key and no `query` of its own.
    pub fn parse(stages: &[Document]) -> Option<NearestK> {
        let spec = stages.first()?.get("$geoNear")?;
        let limit = super::count_arg(stages.get(1)?.get("$limit")?)?;
        if !(1..=1_000_000_000).contains(&limit) {
            return None;
        }
        let stage = GeoNear::parse(spec).ok()?;
        if stage.query().is_some() || stage.key().contains('.') {
            return None;
        }
        Some(NearestK { stage, limit })
    }

    /// The pipeline stages it runs.
    pub const STAGES: usize = 2;

    pub fn start(&self) -> NearestRun<'_> {
        NearestRun {
            plan: self,
            heap: BinaryHeap::new(),
            seq: 0,
            passed_over: 0,
        }
    }
}

/// A measurement among the nearest so far; the heap's top is the farthest (the latest
/// in scan order among equals).
struct Found {
    dist: f64,
    seq: u64,
    loc: Bson,
    doc: Document,
}

impl PartialEq for Found {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}
impl Eq for Found {}
impl PartialOrd for Found {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Found {
    fn cmp(&self, o: &Self) -> Ordering {
        self.dist.total_cmp(&o.dist).then(self.seq.cmp(&o.seq))
    }
}

pub struct NearestRun<'a> {
    plan: &'a NearestK,
    heap: BinaryHeap<Found>,
    /// Rows seen so far, in scan order.
    seq: u64,
    /// Buckets passed over by their box.
    pub passed_over: u64,
}

impl NearestRun<'_> {
    /// Takes one bucket's rows that pass `mask`.
    pub fn feed(
        &mut self,
        cols: &Cols<'_>,
        options: &TimeseriesOptions,
        mask: Option<&[bool]>,
    ) -> Result<(), StoreError> {
        let n = cols.view.count();
        let first = self.seq;
        self.seq += n as u64;
        let near = self.plan.stage.near();
        // Rows come later in scan order than any kept, so they must be strictly nearer
        // than the farthest kept once k are.
        let farthest = match self.heap.peek() {
            Some(top) if self.heap.len() >= self.plan.limit => Some(top.dist),
            _ => None,
        };
        if let (Some(f), Some(b)) = (farthest, bucket_point_box(cols.view, self.plan.stage.key())) {
            if lower_bound(near, b) >= f {
                self.passed_over += 1;
                return Ok(());
            }
        }
        let col = GeoCol::load(cols, self.plan.stage.key())?;
        let mut wanted = vec![false; n];
        let mut found = Vec::new();
        for (i, want) in wanted.iter_mut().enumerate() {
            if !mask.is_none_or(|m| m.get(i).copied().unwrap_or(false)) {
                continue;
            }
            // The location is the value itself, unless it is an array of geometries.
            let (dist, loc) = match col.get(i)? {
                GeoValue::Point(p) => match near.distance(&Shape::Point(p)) {
                    Some(d) => (d, None),
                    None => continue,
                },
                GeoValue::Value(v) => match distance_of_value(&v, near) {
                    Some((d, loc)) => (d, Some(loc)),
                    None => continue,
                },
                GeoValue::Missing => continue,
            };
            if !near.in_range(dist) || farthest.is_some_and(|f| dist.total_cmp(&f).is_ge()) {
                continue;
            }
            *want = true;
            found.push((i, dist, loc));
        }
        if found.is_empty() {
            return Ok(());
        }
        let docs = cols.view.unpack_rows(options, None, Some(&wanted))?;
        let key = self.plan.stage.key();
        for ((i, dist, loc), doc) in found.into_iter().zip(docs) {
            let loc = loc.unwrap_or_else(|| doc.get(key).cloned().unwrap_or(Bson::Null));
            self.heap.push(Found {
                dist,
                seq: first + i as u64,
                loc,
                doc,
            });
            if self.heap.len() > self.plan.limit {
                self.heap.pop();
            }
        }
        Ok(())
    }

    /// The nearest measurements, nearest first, with their distance (and location).
    pub fn finish(self) -> Result<Vec<Document>, QueryError> {
        let stage = &self.plan.stage;
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|f| {
                let mut doc = f.doc;
                stage.annotate(&mut doc, f.dist, f.loc)?;
                Ok(doc)
            })
            .collect()
    }
}

/// A distance no point in the box `lo`..`hi` (degrees) can be nearer than, in `near`'s
/// units; 0 when none is known (flat distances). The haversine of the distance to a
/// point of the box is `hav(dlat) + cos(lat0) cos(lat) hav(dlon)`: each term is at least
/// its smallest value over the box, so their sum bounds it from below.
fn lower_bound(near: &Near, (lo, hi): (Pos, Pos)) -> f64 {
    if !near.spherical || lo.x > hi.x || lo.y > hi.y {
        return 0.0;
    }
    let p = near.point;
    let dlat = (lo.y - p.y).max(p.y - hi.y).max(0.0).to_radians();
    let dlon = if (lo.x..=hi.x).contains(&p.x) {
        0.0
    } else {
        // The shorter way round to the nearer edge.
        let gap = |a: f64, b: f64| {
            let d = (a - b).rem_euclid(360.0);
            d.min(360.0 - d)
        };
        gap(p.x, lo.x).min(gap(p.x, hi.x)).to_radians()
    };
    let cos_lat =
        lo.y.to_radians()
            .cos()
            .min(hi.y.to_radians().cos())
            .max(0.0);
    let hav = |a: f64| (a / 2.0).sin().powi(2);
    let h = hav(dlat) + p.y.to_radians().cos() * cos_lat * hav(dlon);
    let angle = 2.0 * h.clamp(0.0, 1.0).sqrt().asin();
    // Below any rounding of the exact distance computed for a point.
    let bound = angle * (1.0 - 1e-9) - 1e-12;
    let bound = if near.meters {
        bound * hourglass_query::geo::sphere::EARTH_RADIUS_M
    } else {
        bound
    };
    bound.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_bound_of_a_box_is_never_above_the_distance_of_a_point_in_it() {
        let mut seed = 7u64;
        let mut unit = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..20_000 {
            let point = Pos {
                x: unit() * 360.0 - 180.0,
                y: unit() * 180.0 - 90.0,
            };
            let near = Near {
                point,
                spherical: true,
                meters: unit() < 0.5,
                min: None,
                max: None,
            };
            let (x0, y0) = (unit() * 360.0 - 180.0, unit() * 180.0 - 90.0);
            let (x1, y1) = (
                (x0 + unit() * 20.0).min(180.0),
                (y0 + unit() * 10.0).min(90.0),
            );
            let bound = lower_bound(&near, (Pos { x: x0, y: y0 }, Pos { x: x1, y: y1 }));
            for _ in 0..5 {
                let p = Pos {
                    x: x0 + unit() * (x1 - x0),
                    y: y0 + unit() * (y1 - y0),
                };
                let d = near.distance(&Shape::Point(p)).unwrap();
                assert!(bound <= d, "{bound} > {d} for {p:?} from {point:?}");
            }
        }
    }
}
