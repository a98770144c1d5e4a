//! Geometries as MongoDB stores and queries them: GeoJSON objects (Point, LineString,
//! Polygon with holes, MultiPoint, MultiLineString, MultiPolygon, GeometryCollection) and
//! legacy coordinate pairs (`[x, y]` or a document of two numbers), parsed and validated
//! with MongoDB's rules and messages.

use crate::error::QueryError;
use bson::{Bson, Document};

/// A position: longitude (x) and latitude (y) in degrees, or plain x/y for legacy pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pos {
    pub x: f64,
    pub y: f64,
}

/// A parsed geometry. Polygons list their outer ring first, then the holes; each ring is
/// closed (its last position repeats its first).
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Point(Pos),
    LineString(Vec<Pos>),
    Polygon(Vec<Vec<Pos>>),
    /// MultiPoint, MultiLineString, MultiPolygon and GeometryCollection alike.
    Collection(Vec<Shape>),
}

impl Shape {
    /// Every position of the geometry.
    pub fn positions(&self) -> Vec<Pos> {
        match self {
            Shape::Point(p) => vec![*p],
            Shape::LineString(l) => l.clone(),
            Shape::Polygon(rings) => rings.iter().flatten().copied().collect(),
            Shape::Collection(items) => items.iter().flat_map(Shape::positions).collect(),
        }
    }

    /// The point, when the geometry is one.
    pub fn as_point(&self) -> Option<Pos> {
        match self {
            Shape::Point(p) => Some(*p),
            _ => None,
        }
    }
}

fn bad(msg: impl Into<String>) -> QueryError {
    QueryError::bad(msg)
}

/// A coordinate: any BSON number, as a double.
pub fn number(v: &Bson) -> Option<f64> {
    crate::num::Num::from_bson(v).map(|n| n.as_f64())
}

/// A legacy coordinate pair: an array or a document whose first two values are numbers.
pub fn legacy_point(v: &Bson) -> Option<Pos> {
    let (x, y) = match v {
        Bson::Array(a) if a.len() >= 2 => (number(&a[0])?, number(&a[1])?),
        Bson::Document(d) if d.len() >= 2 && !d.contains_key("type") => {
            let mut it = d.values();
            (number(it.next()?)?, number(it.next()?)?)
        }
        _ => return None,
    };
    (x.is_finite() && y.is_finite()).then_some(Pos { x, y })
}

fn position(v: &Bson) -> Result<Pos, QueryError> {
    let Bson::Array(a) = v else {
        return Err(bad(format!(
            "Point must be an array or object, instead got type {}",
            crate::compare::type_name(v)
        )));
    };
    if a.len() < 2 {
        return Err(bad("Point must only contain numeric elements"));
    }
    let (Some(x), Some(y)) = (number(&a[0]), number(&a[1])) else {
        return Err(bad("Point must only contain numeric elements"));
    };
    if a.len() > 3 {
        return Err(bad(format!(
            "Point can only have 2 or 3 dimensions, found {}",
            a.len()
        )));
    }
    if !(-180.0..=180.0).contains(&x) || !(-90.0..=90.0).contains(&y) {
        return Err(bad(format!(
            "longitude/latitude is out of bounds, lng: {x} lat: {y}"
        )));
    }
    Ok(Pos { x, y })
}

fn positions(v: &Bson, what: &str) -> Result<Vec<Pos>, QueryError> {
    let Bson::Array(a) = v else {
        return Err(bad(format!("{what} coordinates must be an array")));
    };
    a.iter().map(position).collect()
}

fn line(v: &Bson) -> Result<Vec<Pos>, QueryError> {
    let pts = positions(v, "LineString")?;
    if pts.len() < 2 {
        return Err(bad(format!(
            "GeoJSON LineString must have at least 2 vertices: {}",
            crate::error::render(v)
        )));
    }
    Ok(pts)
}

fn ring(v: &Bson) -> Result<Vec<Pos>, QueryError> {
    let pts = positions(v, "Polygon")?;
    if pts.len() < 4 {
        return Err(bad(format!(
            "Loop must have at least 3 different vertices: {}",
            crate::error::render(v)
        )));
    }
    if pts.first() != pts.last() {
        return Err(bad(format!(
            "Loop is not closed, first vertex does not equal last vertex: {}",
            crate::error::render(v)
        )));
    }
    let mut distinct = pts.clone();
    distinct.dedup();
    if distinct.len() < 4 {
        return Err(bad(format!(
            "Loop must have at least 3 different vertices: {}",
            crate::error::render(v)
        )));
    }
    Ok(pts)
}

fn polygon(v: &Bson) -> Result<Vec<Vec<Pos>>, QueryError> {
    let Bson::Array(rings) = v else {
        return Err(bad("Polygon coordinates must be an array"));
    };
    if rings.is_empty() {
        return Err(bad("Polygon has no loops."));
    }
    rings.iter().map(ring).collect()
}

fn array<'a>(v: &'a Bson, what: &str) -> Result<&'a Vec<Bson>, QueryError> {
    match v {
        Bson::Array(a) => Ok(a),
        _ => Err(bad(format!("{what} coordinates must be an array"))),
    }
}

/// Parses a GeoJSON object (`{type, coordinates}` or `{type: "GeometryCollection",
/// geometries}`).
pub fn geojson(d: &Document) -> Result<Shape, QueryError> {
    let Some(Bson::String(kind)) = d.get("type") else {
        return Err(bad(format!(
            "unknown GeoJSON type: {}",
            crate::error::render_doc(d)
        )));
    };
    if let Some(crs) = d.get("crs") {
        let name = crs
            .as_document()
            .and_then(|c| c.get_document("properties").ok())
            .and_then(|p| p.get_str("name").ok())
            .unwrap_or("");
        if !matches!(name, "EPSG:4326" | "urn:ogc:def:crs:OGC:1.3:CRS84") {
            return Err(bad(format!(
                "unknown CRS name or the strict-winding big polygon CRS, which this server does not support: {}",
                crate::error::render(crs)
            )));
        }
    }
    if kind == "GeometryCollection" {
        let Some(Bson::Array(items)) = d.get("geometries") else {
            return Err(bad("GeometryCollection geometries must be an array"));
        };
        let shapes = items
            .iter()
            .map(|g| match g {
                Bson::Document(g) => geojson(g),
                _ => Err(bad("Element of geometries is not an object")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Shape::Collection(shapes));
    }
    let coords = d.get("coordinates").ok_or_else(|| {
        bad(format!(
            "coordinates not found in {}",
            crate::error::render_doc(d)
        ))
    })?;
    Ok(match kind.as_str() {
        "Point" => Shape::Point(position(coords)?),
        "LineString" => Shape::LineString(line(coords)?),
        "Polygon" => Shape::Polygon(polygon(coords)?),
        "MultiPoint" => {
            let pts = positions(coords, "MultiPoint")?;
            if pts.is_empty() {
                return Err(bad("MultiPoint coordinates must have at least 1 element"));
            }
            Shape::Collection(pts.into_iter().map(Shape::Point).collect())
        }
        "MultiLineString" => Shape::Collection(
            array(coords, "MultiLineString")?
                .iter()
                .map(|l| line(l).map(Shape::LineString))
                .collect::<Result<_, _>>()?,
        ),
        "MultiPolygon" => Shape::Collection(
            array(coords, "MultiPolygon")?
                .iter()
                .map(|p| polygon(p).map(Shape::Polygon))
                .collect::<Result<_, _>>()?,
        ),
        other => return Err(bad(format!("unknown GeoJSON type: {other}"))),
    })
}

/// The values at `path` that stand for geometries: each value, or each element of an
/// array that is not itself a coordinate pair (several locations in one document);
/// nulls are skipped.
pub fn geometries_at<'a>(doc: &'a Document, path: &str) -> Vec<&'a Bson> {
    crate::path::lookup_path(doc, path)
        .into_iter()
        .flatten()
        .flat_map(geometries_of)
        .collect()
}

/// The geometries one value at a path holds: itself, or the elements of an array that
/// is not a legacy pair; none for null.
pub fn geometries_of(v: &Bson) -> Vec<&Bson> {
    match v {
        Bson::Null => Vec::new(),
        Bson::Array(items) if legacy_point(v).is_none() => {
            items.iter().filter(|i| !matches!(i, Bson::Null)).collect()
        }
        other => vec![other],
    }
}

/// A stored GeoJSON point in its common form, the BSON document `{type: "Point",
/// coordinates: [x, y]}` with two doubles in bounds, read from its bytes (`doc`, a whole
/// BSON document): what [`stored`] makes of it. None for any other value (parse it with
/// [`stored`]).
pub fn raw_point(doc: &[u8]) -> Option<Pos> {
    // The layout, byte for byte, up to the two doubles.
    const HEAD: &[u8] = b"\x3d\0\0\0\x02type\0\x06\0\0\0Point\0\x04coordinates\0\x1b\0\0\0\x010\0";
    let rest = doc.strip_prefix(HEAD)?;
    let (x, rest) = rest.split_first_chunk::<8>()?;
    let rest = rest.strip_prefix(b"\x011\0")?;
    let (y, rest) = rest.split_first_chunk::<8>()?;
    if rest != b"\0\0" {
        return None;
    }
    let (x, y) = (f64::from_le_bytes(*x), f64::from_le_bytes(*y));
    ((-180.0..=180.0).contains(&x) && (-90.0..=90.0).contains(&y)).then_some(Pos { x, y })
}

/// A stored value as a geometry: GeoJSON, or a legacy pair. None when it is neither.
pub fn stored(v: &Bson) -> Option<Shape> {
    match v {
        Bson::Document(d) if d.contains_key("type") => geojson(d).ok(),
        other => legacy_point(other).map(Shape::Point),
    }
}

/// Why a stored value cannot be indexed by a 2dsphere index, if it cannot.
pub fn index_error(v: &Bson) -> Option<String> {
    match v {
        Bson::Document(d) if d.contains_key("type") => geojson(d).err().map(|e| e.to_string()),
        other => match legacy_point(other) {
            Some(p) if (-180.0..=180.0).contains(&p.x) && (-90.0..=90.0).contains(&p.y) => None,
            Some(p) => Some(format!(
                "longitude/latitude is out of bounds, lng: {} lat: {}",
                p.x, p.y
            )),
            None => Some(format!("unknown GeoJSON type: {}", crate::error::render(v))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn geojson_kinds_parse_and_bad_ones_are_refused() {
        let p = geojson(&doc! {"type": "Point", "coordinates": [1.5, 2]}).unwrap();
        assert_eq!(p, Shape::Point(Pos { x: 1.5, y: 2.0 }));
        let poly = doc! {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]};
        assert!(matches!(geojson(&poly).unwrap(), Shape::Polygon(r) if r.len() == 1));
        for bad in [
            doc! {"type": "Point", "coordinates": [200, 0]},
            doc! {"type": "Point", "coordinates": ["a", 0]},
            doc! {"type": "LineString", "coordinates": [[0, 0]]},
            doc! {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]},
            doc! {"type": "Triangle", "coordinates": []},
        ] {
            assert!(geojson(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn legacy_pairs_are_arrays_or_documents_of_two_numbers() {
        assert_eq!(
            legacy_point(&Bson::Array(vec![1.into(), 2.into()])),
            Some(Pos { x: 1.0, y: 2.0 })
        );
        assert_eq!(
            legacy_point(&Bson::Document(doc! {"lng": 3, "lat": 4})),
            Some(Pos { x: 3.0, y: 4.0 })
        );
        assert_eq!(legacy_point(&Bson::String("x".into())), None);
        assert!(index_error(&Bson::Document(
            doc! {"type": "Point", "coordinates": [0, 95]}
        ))
        .is_some());
        assert!(index_error(&Bson::Array(vec![10.into(), 20.into()])).is_none());
    }

    #[test]
    fn raw_point_reads_the_common_point_layout_as_stored_does_and_nothing_else() {
        use bson::doc;
        let cases = [
            doc! {"type": "Point", "coordinates": [2.35, 48.86]},
            doc! {"type": "Point", "coordinates": [-180.0, 90.0]},
            doc! {"type": "Point", "coordinates": [180.5, 0.0]},
            doc! {"type": "Point", "coordinates": [1, 2]},
            doc! {"coordinates": [1.0, 2.0], "type": "Point"},
            doc! {"type": "Point", "coordinates": [1.0, 2.0, 3.0]},
            doc! {"type": "Point", "coordinates": [1.0, 2.0], "crs": "x"},
            doc! {"type": "Pointy", "coordinates": [1.0, 2.0]},
            doc! {"type": "LineString", "coordinates": [[1.0, 2.0], [3.0, 4.0]]},
        ];
        let mut fast = 0;
        for d in cases {
            let bytes = bson::to_vec(&d).unwrap();
            if let Some(p) = raw_point(&bytes) {
                fast += 1;
                let Some(Shape::Point(q)) = stored(&Bson::Document(d.clone())) else {
                    panic!("{d} read as a point but stored() disagrees");
                };
                assert_eq!((p.x, p.y), (q.x, q.y), "{d}");
            }
        }
        assert_eq!(fast, 2);
    }
}
