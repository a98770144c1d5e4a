//! The `$geoNear` stage: the documents within range of a point, nearest first, with
//! their distance (and location) added. It must come first; the server fills in `key`
//! from the collection's geo index before the pipeline is parsed.

use crate::error::{render, QueryError};
use crate::filter::Filter;
use crate::geo::near::order;
use crate::geo::shape::{self, Pos, Shape};
use crate::geo::Near;
use bson::{Bson, Document};

/// A parsed `$geoNear` stage. The server fills in `key` from the collection's geo index
/// before the pipeline is parsed.
#[derive(Debug, Clone)]
pub struct GeoNear {
    near: Near,
    key: String,
    distance_field: Vec<String>,
    include_locs: Option<Vec<String>>,
    multiplier: f64,
    query: Option<Filter>,
}

fn fail(msg: impl Into<String>) -> QueryError {
    QueryError::bad(msg)
}

fn path_arg(v: &Bson, name: &str) -> Result<Vec<String>, QueryError> {
    match v {
        Bson::String(s) if !s.is_empty() && !s.starts_with('$') => {
            Ok(s.split('.').map(String::from).collect())
        }
        _ => Err(QueryError::TypeMismatch(format!(
            "$geoNear parameter '{name}' must be of type string but found type: {}",
            crate::compare::type_name(v)
        ))),
    }
}

impl GeoNear {
    pub fn parse(v: &Bson) -> Result<GeoNear, QueryError> {
        let Bson::Document(spec) = v else {
            return Err(QueryError::FailedToParse(format!(
                "$geoNear argument must be an object, got {}",
                render(v)
            )));
        };
        let near_arg = spec
            .get("near")
            .ok_or_else(|| fail("$geoNear requires a 'near' option as an Array"))?;
        let spherical = match spec.get("spherical") {
            None => false,
            Some(b) => crate::expr::truthy(b),
        };
        let (point, meters) = match near_arg {
            Bson::Document(d) if d.contains_key("type") => match shape::geojson(d)? {
                Shape::Point(p) => (p, true),
                _ => return Err(fail("$geoNear 'near' must be a GeoJSON Point")),
            },
            other => (
                shape::legacy_point(other)
                    .ok_or_else(|| fail("$geoNear requires a 'near' option as an Array"))?,
                false,
            ),
        };
        let number = |name: &str| -> Result<Option<f64>, QueryError> {
            match spec.get(name) {
                None => Ok(None),
                Some(v) => crate::num::Num::from_bson(v)
                    .map(|n| n.as_f64())
                    .filter(|d| *d >= 0.0)
                    .map(Some)
                    .ok_or_else(|| fail(format!("{name} must be a non-negative number"))),
            }
        };
        let mut out = GeoNear {
            near: Near {
                point: Pos {
                    x: point.x,
                    y: point.y,
                },
                spherical: spherical || meters,
                meters,
                min: number("minDistance")?,
                max: number("maxDistance")?,
            },
            key: String::new(),
            distance_field: Vec::new(),
            include_locs: None,
            multiplier: number("distanceMultiplier")?.unwrap_or(1.0),
            query: None,
        };
        let mut has_distance_field = false;
        for (k, v) in spec {
            match k.as_str() {
                "near" | "spherical" | "minDistance" | "maxDistance" | "distanceMultiplier" => {}
                "distanceField" => {
                    out.distance_field = path_arg(v, k)?;
                    has_distance_field = true;
                }
                "includeLocs" => out.include_locs = Some(path_arg(v, k)?),
                "key" => match v {
                    Bson::String(s) if !s.is_empty() => out.key = s.clone(),
                    _ => return Err(fail("$geoNear parameter 'key' must be a non-empty string")),
                },
                "query" => match v {
                    Bson::Document(q) => out.query = Some(Filter::parse(q)?),
                    _ => return Err(fail("$geoNear 'query' must be an object")),
                },
                other => return Err(fail(format!("unknown argument to $geoNear: {other}"))),
            }
        }
        if !has_distance_field {
            return Err(fail(
                "$geoNear requires a 'distanceField' option as a String",
            ));
        }
        if out.key.is_empty() {
            return Err(fail("$geoNear requires a geo index: no 'key' was resolved"));
        }
        Ok(out)
    }

    /// The documents' filter (`query`), which the scan under the stage may use.
    pub fn query(&self) -> Option<&Filter> {
        self.query.as_ref()
    }

    /// The query point and distance bounds.
    pub fn near(&self) -> &Near {
        &self.near
    }

    /// The path of the locations (filled in from the collection's geo index).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Adds the distance (and location, with `includeLocs`) to an output document.
    pub fn annotate(&self, d: &mut Document, dist: f64, loc: Bson) -> Result<(), QueryError> {
        crate::update::paths::set(
            d,
            &self.distance_field,
            Bson::Double(dist * self.multiplier),
        )?;
        if let Some(path) = &self.include_locs {
            crate::update::paths::set(d, path, loc)?;
        }
        Ok(())
    }

    pub fn run(&self, docs: Vec<Document>) -> Result<Vec<Document>, QueryError> {
        let docs: Vec<Document> = match &self.query {
            Some(q) => docs.into_iter().filter(|d| q.matches(d)).collect(),
            None => docs,
        };
        let mut out = Vec::new();
        for (mut d, dist, loc) in order(docs, &self.key, &self.near) {
            self.annotate(&mut d, dist, loc)?;
            out.push(d);
        }
        Ok(out)
    }
}
