//! The geo query operators: `$geoWithin` (`$geometry`, `$box`, `$polygon`, `$center`,
//! `$centerSphere`; `$within` is its old name), `$geoIntersects`, `$near` and
//! `$nearSphere` (with `$minDistance`/`$maxDistance`). `$geometry` regions are spherical;
//! `$box`, `$polygon` and `$center` are flat, on the coordinates as numbers.

use super::shape::{self, number, Pos, Shape};
use super::sphere::{self, EARTH_RADIUS_M};
use crate::error::{render, QueryError};
use bson::{Bson, Document};

/// A `$geoWithin` region.
#[derive(Debug, Clone, PartialEq)]
pub enum Region {
    /// A GeoJSON Polygon or MultiPolygon, and its polygons prepared for tests.
    Sphere(Shape, Prepared),
    /// `$centerSphere`: center and radius in radians.
    CenterSphere(Pos, f64),
    /// `$box`: two opposite corners.
    Box(Pos, Pos),
    /// `$polygon`: three or more vertices.
    Polygon(Vec<Pos>),
    /// `$center`: center and flat radius.
    Center(Pos, f64),
}

/// `$near`/`$nearSphere`.
#[derive(Debug, Clone, PartialEq)]
pub struct Near {
    pub point: Pos,
    /// Distances on the sphere (else flat).
    pub spherical: bool,
    /// In meters (a GeoJSON point); else radians (spherical) or coordinate units (flat).
    pub meters: bool,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// A spherical region's polygons, prepared when the query is parsed (it is derived from
/// the shape beside it, so it takes no part in comparisons).
#[derive(Clone)]
pub struct Prepared(std::sync::Arc<sphere::WithinRegion>);

impl PartialEq for Prepared {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prepared")
    }
}

impl Region {
    /// The region of a GeoJSON Polygon or MultiPolygon.
    pub fn sphere(shape: Shape) -> Region {
        let prepared = Prepared(std::sync::Arc::new(sphere::WithinRegion::new(&shape)));
        Region::Sphere(shape, prepared)
    }
}

/// A parsed geo predicate.
#[derive(Debug, Clone, PartialEq)]
pub enum GeoPred {
    Within(Region),
    Intersects(Shape),
    Near(Near),
}

fn bad(msg: impl Into<String>) -> QueryError {
    QueryError::bad(msg)
}

fn point_arg(v: &Bson, what: &str) -> Result<Pos, QueryError> {
    shape::legacy_point(v).ok_or_else(|| {
        bad(format!(
            "{what}: point must be an array or object with two numbers, got {}",
            render(v)
        ))
    })
}

/// `[center, radius]` of `$center`/`$centerSphere`.
fn circle(v: &Bson, what: &str) -> Result<(Pos, f64), QueryError> {
    let Bson::Array(a) = v else {
        return Err(bad(format!("{what} must be an array, got {}", render(v))));
    };
    if a.len() != 2 {
        return Err(bad(format!(
            "{what} must have 2 elements: [center, radius]"
        )));
    }
    let r = number(&a[1]).filter(|r| r.is_finite() && *r >= 0.0);
    let r = r.ok_or_else(|| bad(format!("{what}: radius must be a non-negative number")))?;
    Ok((point_arg(&a[0], what)?, r))
}

fn geometry(v: &Bson) -> Result<Shape, QueryError> {
    match v {
        Bson::Document(d) => shape::geojson(d),
        other => Err(bad(format!(
            "$geometry must be a GeoJSON object, got {}",
            render(other)
        ))),
    }
}

fn within(v: &Bson) -> Result<Region, QueryError> {
    let Bson::Document(d) = v else {
        return Err(bad(format!(
            "$geoWithin takes an object, got {}",
            render(v)
        )));
    };
    let Some((kind, arg)) = d.iter().next().filter(|_| d.len() == 1) else {
        return Err(bad(format!(
            "$geoWithin needs exactly one shape: {}",
            render(v)
        )));
    };
    Ok(match kind.as_str() {
        "$geometry" => {
            let g = geometry(arg)?;
            let polygons_only = match &g {
                Shape::Polygon(_) => true,
                Shape::Collection(items) => items.iter().all(|i| matches!(i, Shape::Polygon(_))),
                _ => false,
            };
            if !polygons_only {
                return Err(bad(format!(
                    "$geoWithin not supported with provided geometry: {}",
                    render(v)
                )));
            }
            Region::sphere(g)
        }
        "$centerSphere" => {
            let (c, r) = circle(arg, "$centerSphere")?;
            Region::CenterSphere(c, r)
        }
        "$center" => {
            let (c, r) = circle(arg, "$center")?;
            Region::Center(c, r)
        }
        "$box" => match arg {
            Bson::Array(a) if a.len() == 2 => {
                Region::Box(point_arg(&a[0], "$box")?, point_arg(&a[1], "$box")?)
            }
            _ => return Err(bad("$box must be an array of two points")),
        },
        "$polygon" => match arg {
            Bson::Array(a) if a.len() >= 3 => Region::Polygon(
                a.iter()
                    .map(|p| point_arg(p, "$polygon"))
                    .collect::<Result<_, _>>()?,
            ),
            _ => return Err(bad("Polygon must have at least 3 points")),
        },
        other => return Err(bad(format!("unknown geo specifier: {other}"))),
    })
}

fn distance_arg(v: Option<&Bson>, name: &str) -> Result<Option<f64>, QueryError> {
    match v {
        None => Ok(None),
        Some(v) => match number(v) {
            Some(d) if d >= 0.0 => Ok(Some(d)),
            Some(_) => Err(bad(format!("{name} must be non-negative"))),
            None => Err(bad(format!("{name} must be a number"))),
        },
    }
}

fn near(op: &str, v: &Bson, siblings: &Document) -> Result<Near, QueryError> {
    let sphere = op == "$nearSphere";
    let (point, meters, inner) = match v {
        Bson::Document(d) if d.contains_key("$geometry") => {
            let Shape::Point(p) = geometry(d.get("$geometry").unwrap_or(&Bson::Null))? else {
                return Err(bad(format!("{op} must be a point: {}", render(v))));
            };
            (p, true, Some(d))
        }
        other => (point_arg(other, op)?, false, None),
    };
    let field = |name: &str| {
        inner
            .and_then(|d| d.get(name))
            .or_else(|| siblings.get(name))
    };
    Ok(Near {
        point,
        spherical: sphere || meters,
        meters,
        min: distance_arg(field("$minDistance"), "$minDistance")?,
        max: distance_arg(field("$maxDistance"), "$maxDistance")?,
    })
}

impl GeoPred {
    /// Parses operator `op` with its argument; `siblings` is the operator document (where
    /// a legacy `$near` keeps `$maxDistance`).
    pub fn parse(op: &str, v: &Bson, siblings: &Document) -> Result<GeoPred, QueryError> {
        Ok(match op {
            "$geoWithin" | "$within" => GeoPred::Within(within(v)?),
            "$geoIntersects" => match v {
                Bson::Document(d) if d.len() == 1 && d.contains_key("$geometry") => {
                    GeoPred::Intersects(geometry(d.get("$geometry").unwrap_or(&Bson::Null))?)
                }
                _ => {
                    return Err(bad(format!(
                        "$geoIntersects needs a $geometry: {}",
                        render(v)
                    )))
                }
            },
            _ => GeoPred::Near(near(op, v, siblings)?),
        })
    }

    /// Whether one stored value matches.
    pub fn matches(&self, v: &Bson) -> bool {
        shape::stored(v).is_some_and(|s| self.matches_shape(&s))
    }

    /// Whether a stored geometry matches.
    pub fn matches_shape(&self, stored: &Shape) -> bool {
        match self {
            GeoPred::Within(region) => within_region(stored, region),
            GeoPred::Intersects(g) => sphere::intersects(stored, g),
            GeoPred::Near(n) => n.distance(stored).is_some_and(|d| n.in_range(d)),
        }
    }
}

fn within_region(stored: &Shape, region: &Region) -> bool {
    let flat_point = || stored.as_point();
    match region {
        Region::Sphere(_, prepared) => prepared.0.contains(stored),
        Region::CenterSphere(c, r) => stored
            .positions()
            .iter()
            .all(|p| sphere::angle(*c, *p) <= *r),
        Region::Box(a, b) => flat_point().is_some_and(|p| {
            p.x >= a.x.min(b.x) && p.x <= a.x.max(b.x) && p.y >= a.y.min(b.y) && p.y <= a.y.max(b.y)
        }),
        Region::Center(c, r) => flat_point().is_some_and(|p| flat_distance(*c, p) <= *r),
        Region::Polygon(vertices) => {
            flat_point().is_some_and(|p| flat_polygon_contains(vertices, p))
        }
    }
}

fn flat_distance(a: Pos, b: Pos) -> f64 {
    (a.x - b.x).hypot(a.y - b.y)
}

/// Planar point in polygon (ray casting; a point on an edge is inside).
fn flat_polygon_contains(vertices: &[Pos], p: Pos) -> bool {
    let n = vertices.len();
    let mut inside = false;
    for i in 0..n {
        let (a, b) = (vertices[i], vertices[(i + 1) % n]);
        let cross = (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x);
        let within_x = p.x >= a.x.min(b.x) && p.x <= a.x.max(b.x);
        let within_y = p.y >= a.y.min(b.y) && p.y <= a.y.max(b.y);
        if cross.abs() < 1e-12 && within_x && within_y {
            return true;
        }
        if (a.y > p.y) != (b.y > p.y) && p.x < (b.x - a.x) * (p.y - a.y) / (b.y - a.y) + a.x {
            inside = !inside;
        }
    }
    inside
}

impl Near {
    /// The distance from the query point to a stored geometry, in this query's units; None
    /// when a flat query meets a geometry other than a point.
    pub fn distance(&self, stored: &Shape) -> Option<f64> {
        if !self.spherical {
            return stored.as_point().map(|p| flat_distance(self.point, p));
        }
        let angle = sphere::angle_to(self.point, stored);
        Some(if self.meters {
            angle * EARTH_RADIUS_M
        } else {
            angle
        })
    }

    pub fn in_range(&self, d: f64) -> bool {
        self.min.is_none_or(|m| d >= m) && self.max.is_none_or(|m| d <= m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn flat_shapes_match_points_by_their_numbers() {
        let b = GeoPred::parse(
            "$geoWithin",
            &Bson::Document(doc! {"$box": [[0, 0], [10, 10]]}),
            &doc! {},
        )
        .unwrap();
        assert!(b.matches(&Bson::Array(vec![5.into(), 5.into()])));
        assert!(!b.matches(&Bson::Array(vec![11.into(), 5.into()])));
        let tri = GeoPred::parse(
            "$geoWithin",
            &Bson::Document(doc! {"$polygon": [[0, 0], [10, 0], [0, 10]]}),
            &doc! {},
        )
        .unwrap();
        assert!(tri.matches(&Bson::Array(vec![2.into(), 2.into()])));
        assert!(!tri.matches(&Bson::Array(vec![8.into(), 8.into()])));
        let c = GeoPred::parse(
            "$geoWithin",
            &Bson::Document(doc! {"$center": [[0, 0], 5]}),
            &doc! {},
        )
        .unwrap();
        assert!(c.matches(&Bson::Document(
            doc! {"type": "Point", "coordinates": [3, 4]}
        )));
        assert!(!c.matches(&Bson::Array(vec![4.into(), 4.into()])));
    }

    #[test]
    fn near_takes_a_geojson_point_in_meters_or_a_legacy_pair() {
        let n = GeoPred::parse(
            "$near",
            &Bson::Document(doc! {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 200_000}),
            &doc! {},
        )
        .unwrap();
        assert!(n.matches(&Bson::Document(
            doc! {"type": "Point", "coordinates": [1, 0]}
        )));
        assert!(!n.matches(&Bson::Document(
            doc! {"type": "Point", "coordinates": [2, 0]}
        )));
        let legacy = GeoPred::parse(
            "$near",
            &Bson::Array(vec![0.into(), 0.into()]),
            &doc! {"$maxDistance": 2},
        )
        .unwrap();
        assert!(legacy.matches(&Bson::Array(vec![1.into(), 1.into()])));
        assert!(!legacy.matches(&Bson::Array(vec![2.into(), 2.into()])));
    }

    #[test]
    fn within_geometry_needs_a_polygon() {
        let e = GeoPred::parse(
            "$geoWithin",
            &Bson::Document(doc! {"$geometry": {"type": "Point", "coordinates": [0, 0]}}),
            &doc! {},
        );
        assert_eq!(e.unwrap_err().code(), 2);
    }
}
