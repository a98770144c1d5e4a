//! Index bounds of a geo key part. A 2dsphere or 2d index stores the cell of each vertex
//! of a document's geometry (`index/geo.rs`). A `$geoWithin` region lies inside a
//! longitude/latitude box (`hourglass_query::geo::bbox`), so every vertex of a geometry
//! within it lies in the cells covering that box: those cells bound the scan, and the
//! filter, applied to each fetched document, decides. `$geoIntersects` and `$near` with a
//! `$maxDistance` are bounded the same way only while the index holds points alone (one
//! cell per document: not multikey): a line or polygon can meet a region, or pass near a
//! point, with no vertex inside its box.

use crate::index::spec::FlatGrid;
use crate::index::{KeyKind, KeyPart};
use hourglass_query::filter::Pred;
use hourglass_query::geo::cells::{cover, GridBox, SPHERE_LEVEL};
use hourglass_query::geo::{bbox, GeoPred};

/// The cell ranges (inclusive, ascending) a geo part is bounded by: those covering the box
/// of a geo predicate on its field that can bound it; None without one.
pub(crate) fn cell_bounds(
    part: &KeyPart,
    grid: Option<FlatGrid>,
    preds: &[&Pred],
    multikey: bool,
) -> Option<Vec<(i64, i64)>> {
    let bounding = preds.iter().find_map(|p| match p {
        Pred::Geo(g) if matches!(g.as_ref(), GeoPred::Within(_)) || !multikey => bbox::of(g),
        _ => None,
    });
    let b = bounding?;
    let grid_box = match part.kind {
        KeyKind::Sphere => GridBox {
            x: b.lon.unwrap_or((-180.0, 180.0)),
            y: b.lat,
            xs: (-180.0, 180.0),
            ys: (-90.0, 90.0),
            bits: SPHERE_LEVEL,
        },
        _ => {
            let g = grid.unwrap_or_default();
            GridBox {
                x: b.lon.unwrap_or((g.min, g.max)),
                y: b.lat,
                xs: (g.min, g.max),
                ys: (g.min, g.max),
                bits: g.bits,
            }
        }
    };
    if [grid_box.x.0, grid_box.x.1, grid_box.y.0, grid_box.y.1]
        .iter()
        .any(|v| v.is_nan())
    {
        return None;
    }
    Some(cover(&grid_box))
}
