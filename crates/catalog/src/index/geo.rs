//! What a 2dsphere or 2d index field contributes to a document's keys: the cells of its
//! geometry (`hourglass_query::geo::cells`), after checking that the value is a geometry
//! the index can hold. A value it cannot hold fails the write with MongoDB's error (16755
//! for 2dsphere; 16804 or 13027 for 2d), so an indexed field never holds bad geometry.
//! The planner bounds a scan of these keys by the cells covering a geo predicate's box
//! (`plan_geo.rs`), and the index decides which field `$near` and `$geoNear` use.

use super::spec::{IndexSpec, KeyKind, KeyPart};
use crate::error::{CatalogError, Result};
use bson::{Bson, Document};
use hourglass_query::error::{render_doc, QueryError};
use hourglass_query::geo::{cells, shape};

fn error(code: i32, msg: String) -> CatalogError {
    CatalogError::Query(QueryError::Coded(code, msg))
}

/// The cells `doc` has under geo field `part`, and whether it holds anything but one point
/// there (the index is then multikey: a geometry with edges has points between its
/// vertices' cells); None when the field is absent (the document is then not in the
/// index).
pub fn cells(
    spec: &IndexSpec,
    part: &KeyPart,
    doc: &Document,
) -> Result<Option<(Vec<Bson>, bool)>> {
    let found = shape::geometries_at(doc, &part.path);
    if found.is_empty() {
        return Ok(None);
    }
    let mut not_a_point = found.len() > 1;
    let mut out = Vec::new();
    for v in found.iter().copied() {
        match part.kind {
            KeyKind::Sphere => {
                if let Some(reason) = shape::index_error(v) {
                    return Err(error(
                        16755,
                        format!("Can't extract geo keys: {}  {reason}", render_doc(doc)),
                    ));
                }
                let Some(geometry) = shape::stored(v) else {
                    continue;
                };
                not_a_point |= geometry.as_point().is_none();
                out.extend(
                    geometry
                        .positions()
                        .into_iter()
                        .map(|p| Bson::Int64(cells::sphere_cell(p))),
                );
            }
            _ => {
                let grid = spec.flat_grid.unwrap_or_default();
                let Some(p) = shape::legacy_point(v) else {
                    return Err(error(
                        13026,
                        format!("geo values must be 'legacy coordinate pairs' for 2d indexes :: caused by :: {}", render_doc(doc)),
                    ));
                };
                let inside = |c: f64| c >= grid.min && c <= grid.max;
                if !inside(p.x) || !inside(p.y) {
                    return Err(error(
                        13027,
                        format!(
                            "point not in interval of [ {}, {} ] :: caused by :: {}",
                            grid.min,
                            grid.max,
                            render_doc(doc)
                        ),
                    ));
                }
                out.push(Bson::Int64(cells::flat_cell(
                    p, grid.min, grid.max, grid.bits,
                )));
            }
        }
    }
    out.sort_by_key(|b| b.as_i64());
    out.dedup();
    Ok(Some((out, not_a_point)))
}
