//! Geometry on the sphere, as MongoDB's 2dsphere queries see it: positions are unit
//! vectors, edges are great-circle arcs (the shortest way between two vertices), and a
//! polygon is the smaller of the two regions its outer ring bounds (less than a
//! hemisphere), minus its holes. Distances are angles times MongoDB's earth radius.

use super::shape::{Pos, Shape};

/// MongoDB's earth radius for spherical distances, in meters.
pub const EARTH_RADIUS_M: f64 = 6_378_100.0;

/// Angles below this (about 6 mm on the earth) count as zero: a point on an edge or at a
/// vertex touches it.
const EPS: f64 = 1e-9;

type V = [f64; 3];

pub(super) fn dot(a: V, b: V) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

pub(super) fn cross(a: V, b: V) -> V {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

pub(super) fn norm(a: V) -> f64 {
    dot(a, a).sqrt()
}

pub(super) fn scale(a: V, k: f64) -> V {
    [a[0] * k, a[1] * k, a[2] * k]
}

pub(super) fn sub(a: V, b: V) -> V {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

pub(super) fn unit(a: V) -> V {
    let n = norm(a);
    if n == 0.0 {
        a
    } else {
        scale(a, 1.0 / n)
    }
}

/// The unit vector of a (longitude, latitude) position in degrees.
pub fn vector(p: Pos) -> V {
    let (lon, lat) = (p.x.to_radians(), p.y.to_radians());
    [lat.cos() * lon.cos(), lat.cos() * lon.sin(), lat.sin()]
}

/// The angle between two positions, in radians.
pub fn angle(a: Pos, b: Pos) -> f64 {
    let (a, b) = (vector(a), vector(b));
    norm(cross(a, b)).atan2(dot(a, b))
}

/// The direction at `p`, along the sphere, towards `q`.
fn tangent(p: V, q: V) -> V {
    unit(sub(q, scale(p, dot(q, p))))
}

/// The signed angle at `p` from direction `a` to direction `b` (counterclockwise seen
/// from outside the sphere is positive).
fn signed_angle(p: V, a: V, b: V) -> f64 {
    dot(p, cross(a, b)).atan2(dot(a, b))
}

/// Whether arcs `ab` and `cd` cross at a point interior to both.
fn arcs_cross(a: V, b: V, c: V, d: V) -> bool {
    let ab = cross(a, b);
    let acb = -dot(ab, c);
    let bda = dot(ab, d);
    if acb * bda <= 0.0 {
        return false;
    }
    let cd = cross(c, d);
    let cbd = -dot(cd, b);
    let dac = dot(cd, a);
    acb * cbd > 0.0 && acb * dac > 0.0
}

/// The angle from `p` to the arc `ab`.
fn angle_to_arc(p: V, a: V, b: V) -> f64 {
    let ang = |x: V, y: V| norm(cross(x, y)).atan2(dot(x, y));
    let n = unit(cross(a, b));
    if norm(n) > 0.0 {
        // The closest point of the great circle, if it lies between a and b.
        let foot = unit(sub(p, scale(n, dot(p, n))));
        let inside = dot(cross(a, foot), n) >= 0.0 && dot(cross(foot, b), n) >= 0.0;
        if inside && norm(foot) > 0.0 {
            return ang(p, foot);
        }
    }
    ang(p, a).min(ang(p, b))
}

/// A polygon ring prepared for tests: its vertices as vectors, and which side of its
/// traversal the smaller region lies on.
struct Ring {
    v: Vec<V>,
    small_on_left: bool,
}

impl Ring {
    fn new(ring: &[Pos]) -> Ring {
        let mut v: Vec<V> = ring.iter().map(|p| vector(*p)).collect();
        v.dedup();
        if v.len() > 1 && v.first() == v.last() {
            v.pop();
        }
        // The turning angles along a ring add up to 2π minus the area on their left, so a
        // positive sum means the smaller region is on the left.
        let n = v.len();
        let mut turning = 0.0;
        for i in 0..n {
            let (a, b, c) = (v[(i + n - 1) % n], v[i], v[(i + 1) % n]);
            let incoming = scale(tangent(b, a), -1.0);
            turning += signed_angle(b, incoming, tangent(b, c));
        }
        Ring {
            v,
            small_on_left: turning > 0.0,
        }
    }

    fn edges(&self) -> impl Iterator<Item = (V, V)> + '_ {
        let n = self.v.len();
        (0..n).map(move |i| (self.v[i], self.v[(i + 1) % n]))
    }

    fn on_boundary(&self, p: V) -> bool {
        self.edges().any(|(a, b)| angle_to_arc(p, a, b) < EPS)
    }

    /// Whether `p` is in the smaller region (its boundary included).
    fn contains(&self, p: V) -> bool {
        if self.on_boundary(p) {
            return true;
        }
        let winding: f64 = self
            .edges()
            .map(|(a, b)| signed_angle(p, tangent(p, a), tangent(p, b)))
            .sum();
        if self.small_on_left {
            winding > std::f64::consts::PI
        } else {
            winding < -std::f64::consts::PI
        }
    }
}

/// A polygon prepared for tests.
pub struct Polygon {
    outer: Ring,
    holes: Vec<Ring>,
}

impl Polygon {
    pub fn new(rings: &[Vec<Pos>]) -> Polygon {
        Polygon {
            outer: Ring::new(&rings[0]),
            holes: rings[1..].iter().map(|r| Ring::new(r)).collect(),
        }
    }

    fn contains_v(&self, p: V) -> bool {
        self.outer.contains(p)
            && !self
                .holes
                .iter()
                .any(|h| h.contains(p) && !h.on_boundary(p))
    }

    pub fn contains(&self, p: Pos) -> bool {
        self.contains_v(vector(p))
    }

    fn rings(&self) -> impl Iterator<Item = &Ring> {
        std::iter::once(&self.outer).chain(&self.holes)
    }

    /// Whether arc `ab` crosses the polygon's boundary.
    fn crossed_by(&self, a: V, b: V) -> bool {
        self.rings()
            .any(|r| r.edges().any(|(c, d)| arcs_cross(a, b, c, d)))
    }
}

/// The arcs and polygons of a shape, as vectors.
fn arcs(shape: &Shape) -> Vec<(V, V)> {
    let of_line =
        |l: &[Pos]| -> Vec<(V, V)> { l.windows(2).map(|w| (vector(w[0]), vector(w[1]))).collect() };
    match shape {
        Shape::Point(_) => Vec::new(),
        Shape::LineString(l) => of_line(l),
        Shape::Polygon(rings) => rings.iter().flat_map(|r| of_line(r)).collect(),
        Shape::Collection(items) => items.iter().flat_map(arcs).collect(),
    }
}

fn polygons(shape: &Shape) -> Vec<Polygon> {
    match shape {
        Shape::Polygon(rings) => vec![Polygon::new(rings)],
        Shape::Collection(items) => items.iter().flat_map(polygons).collect(),
        _ => Vec::new(),
    }
}

/// Whether `shape` lies wholly inside the region of `region`'s polygons (`$geoWithin` with
/// a Polygon or MultiPolygon): each member inside one polygon, its vertices inside and
/// none of its edges crossing that polygon's boundary.
pub fn within(shape: &Shape, region: &Shape) -> bool {
    WithinRegion::new(region).contains(shape)
}

/// A `$geoWithin` region's polygons, prepared once for the many values a query tests.
pub struct WithinRegion {
    polygons: Vec<Polygon>,
}

impl WithinRegion {
    pub fn new(region: &Shape) -> WithinRegion {
        WithinRegion {
            polygons: polygons(region),
        }
    }

    /// [`within`] the region.
    pub fn contains(&self, shape: &Shape) -> bool {
        let members: Vec<&Shape> = match shape {
            Shape::Collection(items) => items.iter().collect(),
            other => vec![other],
        };
        members.iter().all(|m| {
            self.polygons.iter().any(|poly| {
                m.positions().iter().all(|p| poly.contains(*p))
                    && arcs(m).iter().all(|(a, b)| !poly.crossed_by(*a, *b))
            })
        })
    }
}

/// Whether two shapes share a point (`$geoIntersects`).
pub fn intersects(a: &Shape, b: &Shape) -> bool {
    let (pa, pb) = (polygons(a), polygons(b));
    let (aa, ab) = (arcs(a), arcs(b));
    let points_of = |s: &Shape| -> Vec<V> { s.positions().iter().map(|p| vector(*p)).collect() };
    let (va, vb) = (points_of(a), points_of(b));
    // A vertex of one inside a polygon of the other, or on one of its lines.
    let touches = |pts: &[V], polys: &[Polygon], lines: &[(V, V)], other: &[V]| {
        pts.iter().any(|p| {
            polys.iter().any(|poly| poly.contains_v(*p))
                || lines.iter().any(|(x, y)| angle_to_arc(*p, *x, *y) < EPS)
                || other
                    .iter()
                    .any(|q| norm(cross(*p, *q)) < EPS && dot(*p, *q) > 0.0)
        })
    };
    touches(&va, &pb, &ab, &vb)
        || touches(&vb, &pa, &aa, &va)
        || aa
            .iter()
            .any(|(p, q)| ab.iter().any(|(r, s)| arcs_cross(*p, *q, *r, *s)))
}

/// The smallest angle from point `p` to `shape` (0 when it is inside a polygon).
pub fn angle_to(p: Pos, shape: &Shape) -> f64 {
    let v = vector(p);
    if polygons(shape).iter().any(|poly| poly.contains_v(v)) {
        return 0.0;
    }
    let to_points = shape
        .positions()
        .iter()
        .map(|q| angle(p, *q))
        .fold(f64::INFINITY, f64::min);
    arcs(shape)
        .iter()
        .map(|(a, b)| angle_to_arc(v, *a, *b))
        .fold(to_points, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(x: f64, y: f64) -> Pos {
        Pos { x, y }
    }

    fn square(x0: f64, y0: f64, x1: f64, y1: f64) -> Vec<Pos> {
        vec![
            pos(x0, y0),
            pos(x1, y0),
            pos(x1, y1),
            pos(x0, y1),
            pos(x0, y0),
        ]
    }

    #[test]
    fn polygons_hold_their_inside_whatever_the_winding() {
        for ring in [square(0.0, 0.0, 10.0, 10.0), {
            let mut r = square(0.0, 0.0, 10.0, 10.0);
            r.reverse();
            r
        }] {
            let p = Polygon::new(&[ring]);
            assert!(p.contains(pos(5.0, 5.0)));
            assert!(!p.contains(pos(15.0, 5.0)));
            assert!(!p.contains(pos(-175.0, -5.0)));
            assert!(p.contains(pos(0.0, 5.0)), "the boundary counts");
        }
    }

    #[test]
    fn holes_are_outside() {
        let p = Polygon::new(&[square(0.0, 0.0, 10.0, 10.0), square(4.0, 4.0, 6.0, 6.0)]);
        assert!(!p.contains(pos(5.0, 5.0)));
        assert!(p.contains(pos(2.0, 2.0)));
    }

    #[test]
    fn polygons_across_the_antimeridian_and_around_a_pole() {
        let p = Polygon::new(&[vec![
            pos(179.0, -1.0),
            pos(-179.0, -1.0),
            pos(-179.0, 1.0),
            pos(179.0, 1.0),
            pos(179.0, -1.0),
        ]]);
        assert!(p.contains(pos(179.9, 0.0)));
        assert!(p.contains(pos(-179.9, 0.0)));
        assert!(!p.contains(pos(0.0, 0.0)));
        let cap = Polygon::new(&[vec![
            pos(0.0, 85.0),
            pos(90.0, 85.0),
            pos(180.0, 85.0),
            pos(-90.0, 85.0),
            pos(0.0, 85.0),
        ]]);
        assert!(cap.contains(pos(45.0, 89.0)));
        assert!(!cap.contains(pos(45.0, 80.0)));
    }

    #[test]
    fn distances_are_great_circle_angles() {
        // A degree of longitude on the equator.
        let d = angle(pos(0.0, 0.0), pos(1.0, 0.0)) * EARTH_RADIUS_M;
        assert!((d - 111_318.8).abs() < 1.0, "{d}");
        assert!(angle(pos(179.5, 0.0), pos(-179.5, 0.0)) < 1.01f64.to_radians());
    }

    #[test]
    fn lines_crossing_polygons_and_points_on_lines_intersect() {
        let poly = Shape::Polygon(vec![square(0.0, 0.0, 10.0, 10.0)]);
        let line = Shape::LineString(vec![pos(-5.0, 5.0), pos(15.0, 5.0)]);
        assert!(intersects(&line, &poly));
        let away = Shape::LineString(vec![pos(20.0, 0.0), pos(30.0, 0.0)]);
        assert!(!intersects(&away, &poly));
        let on = Shape::Point(pos(25.0, 0.0));
        assert!(intersects(&on, &away));
        assert!(!within(&line, &poly));
        assert!(within(
            &Shape::LineString(vec![pos(1.0, 1.0), pos(9.0, 9.0)]),
            &poly
        ));
    }
}
