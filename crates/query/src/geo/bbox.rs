//! The longitude/latitude box a geo predicate can match inside, for pruning time-series
//! buckets by the extent their control min/max give (`[min lon, min lat]` to
//! `[max lon, max lat]` of their points). Boxes are conservative: great-circle edges are
//! followed to their highest and lowest latitudes, and a region across the antimeridian
//! or around a pole keeps every longitude.

use super::pred::{GeoPred, Region};
use super::shape::{Pos, Shape};
use super::sphere::{self, cross, dot, norm, scale, sub, unit, vector};

/// A latitude interval and, when the region stays on one side of the antimeridian, a
/// longitude interval (degrees, inclusive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoBox {
    pub lat: (f64, f64),
    pub lon: Option<(f64, f64)>,
}

impl GeoBox {
    /// Whether a bucket whose points span `min` to `max` cannot meet the box.
    pub fn excludes(&self, min: Pos, max: Pos) -> bool {
        let apart = |(lo, hi): (f64, f64), a: f64, b: f64| b < lo || a > hi;
        apart(self.lat, min.y, max.y) || self.lon.is_some_and(|l| apart(l, min.x, max.x))
    }
}

/// A little slack (about 1 m) so that rounding never prunes a point on an edge.
const SLACK: f64 = 1e-5;

/// The latitude extremes of the great-circle arc from `a` to `b`.
fn arc_lat_range(a: Pos, b: Pos) -> (f64, f64) {
    let (va, vb) = (vector(a), vector(b));
    let (mut lo, mut hi) = (a.y.min(b.y), a.y.max(b.y));
    let n = unit(cross(va, vb));
    if norm(n) == 0.0 {
        return (lo, hi);
    }
    // The circle's northernmost point: the pole direction with its normal part removed
    // (the southernmost is its opposite).
    let top = unit(sub([0.0, 0.0, 1.0], scale(n, n[2])));
    if norm(top) == 0.0 {
        return (lo, hi);
    }
    for p in [top, scale(top, -1.0)] {
        if dot(cross(va, p), n) >= 0.0 && dot(cross(p, vb), n) >= 0.0 {
            let lat = p[2].clamp(-1.0, 1.0).asin().to_degrees();
            lo = lo.min(lat);
            hi = hi.max(lat);
        }
    }
    (lo, hi)
}

/// The box of a shape's positions and edges, on the sphere.
fn sphere_box(shape: &Shape) -> GeoBox {
    let positions = shape.positions();
    let mut lat = (f64::INFINITY, f64::NEG_INFINITY);
    let mut lon = (f64::INFINITY, f64::NEG_INFINITY);
    let mut wraps = false;
    let mut edges: Vec<(Pos, Pos)> = Vec::new();
    collect_edges(shape, &mut edges);
    for p in &positions {
        lat = (lat.0.min(p.y), lat.1.max(p.y));
        lon = (lon.0.min(p.x), lon.1.max(p.x));
    }
    for (a, b) in &edges {
        let (lo, hi) = arc_lat_range(*a, *b);
        lat = (lat.0.min(lo), lat.1.max(hi));
        wraps |= (a.x - b.x).abs() > 180.0;
    }
    let mut out = GeoBox {
        lat: (lat.0 - SLACK, lat.1 + SLACK),
        lon: (!wraps).then_some((lon.0 - SLACK, lon.1 + SLACK)),
    };
    // A polygon around a pole reaches it and every longitude.
    let polar = |y: f64| {
        let pole = Shape::Point(Pos { x: 0.0, y });
        sphere::intersects(&pole, shape)
    };
    if polar(90.0) {
        out.lat.1 = 90.0;
        out.lon = None;
    }
    if polar(-90.0) {
        out.lat.0 = -90.0;
        out.lon = None;
    }
    out
}

fn collect_edges(shape: &Shape, out: &mut Vec<(Pos, Pos)>) {
    match shape {
        Shape::Point(_) => {}
        Shape::LineString(l) => out.extend(l.windows(2).map(|w| (w[0], w[1]))),
        Shape::Polygon(rings) => {
            for r in rings {
                out.extend(r.windows(2).map(|w| (w[0], w[1])));
            }
        }
        Shape::Collection(items) => items.iter().for_each(|i| collect_edges(i, out)),
    }
}

/// The box of a spherical cap of `radius` radians around `c`.
fn cap_box(c: Pos, radius: f64) -> GeoBox {
    let r = radius.to_degrees();
    let (lo, hi) = (c.y - r, c.y + r);
    if hi >= 90.0 || lo <= -90.0 {
        return GeoBox {
            lat: (lo.max(-90.0), hi.min(90.0)),
            lon: None,
        };
    }
    let dlon = (radius.sin() / c.y.to_radians().cos())
        .clamp(-1.0, 1.0)
        .asin()
        .to_degrees();
    let lon = (c.x - dlon - SLACK, c.x + dlon + SLACK);
    GeoBox {
        lat: (lo - SLACK, hi + SLACK),
        lon: (lon.0 >= -180.0 && lon.1 <= 180.0).then_some(lon),
    }
}

/// The box `pred` can match inside, when it names one.
pub fn of(pred: &GeoPred) -> Option<GeoBox> {
    match pred {
        GeoPred::Within(Region::Sphere(shape, _)) | GeoPred::Intersects(shape) => {
            Some(sphere_box(shape))
        }
        GeoPred::Within(Region::CenterSphere(c, r)) => Some(cap_box(*c, *r)),
        GeoPred::Near(n) if n.meters => n.max.map(|m| cap_box(n.point, m / sphere::EARTH_RADIUS_M)),
        GeoPred::Near(n) if n.spherical => n.max.map(|r| cap_box(n.point, r)),
        // Flat shapes bound the numbers themselves.
        GeoPred::Within(Region::Box(a, b)) => Some(GeoBox {
            lat: (a.y.min(b.y), a.y.max(b.y)),
            lon: Some((a.x.min(b.x), a.x.max(b.x))),
        }),
        GeoPred::Within(Region::Polygon(v)) => {
            let (mut lo, mut hi) = (
                Pos {
                    x: f64::INFINITY,
                    y: f64::INFINITY,
                },
                Pos {
                    x: f64::NEG_INFINITY,
                    y: f64::NEG_INFINITY,
                },
            );
            for p in v {
                lo = Pos {
                    x: lo.x.min(p.x),
                    y: lo.y.min(p.y),
                };
                hi = Pos {
                    x: hi.x.max(p.x),
                    y: hi.y.max(p.y),
                };
            }
            Some(GeoBox {
                lat: (lo.y, hi.y),
                lon: Some((lo.x, hi.x)),
            })
        }
        GeoPred::Within(Region::Center(c, r))
        | GeoPred::Near(super::Near {
            point: c,
            max: Some(r),
            ..
        }) => Some(GeoBox {
            lat: (c.y - r, c.y + r),
            lon: Some((c.x - r, c.x + r)),
        }),
        GeoPred::Near(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(x: f64, y: f64) -> Pos {
        Pos { x, y }
    }

    #[test]
    fn east_west_edges_bulge_toward_the_pole() {
        let (lo, hi) = arc_lat_range(p(0.0, 60.0), p(90.0, 60.0));
        assert!((lo - 60.0).abs() < 1e-9);
        assert!(hi > 67.0 && hi < 68.0, "{hi}");
    }

    #[test]
    fn boxes_exclude_far_buckets_and_keep_near_ones() {
        let square = Shape::Polygon(vec![vec![
            p(2.0, 48.0),
            p(3.0, 48.0),
            p(3.0, 49.0),
            p(2.0, 49.0),
            p(2.0, 48.0),
        ]]);
        let b = of(&GeoPred::Within(Region::sphere(square))).unwrap();
        assert!(b.excludes(p(4.0, 48.0), p(5.0, 49.0)));
        assert!(b.excludes(p(2.0, 50.0), p(3.0, 51.0)));
        assert!(!b.excludes(p(2.5, 48.5), p(4.0, 49.5)));
    }

    #[test]
    fn regions_across_the_antimeridian_or_around_a_pole_keep_every_longitude() {
        let across = Shape::Polygon(vec![vec![
            p(179.0, -1.0),
            p(-179.0, -1.0),
            p(-179.0, 1.0),
            p(179.0, 1.0),
            p(179.0, -1.0),
        ]]);
        assert_eq!(
            of(&GeoPred::Within(Region::sphere(across))).unwrap().lon,
            None
        );
        let cap = Shape::Polygon(vec![vec![
            p(0.0, 85.0),
            p(90.0, 85.0),
            p(180.0, 85.0),
            p(-90.0, 85.0),
            p(0.0, 85.0),
        ]]);
        let b = of(&GeoPred::Within(Region::sphere(cap))).unwrap();
        assert_eq!((b.lat.1, b.lon), (90.0, None));
    }
}
