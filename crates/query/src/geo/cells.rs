//! The cells a geo index stores: a quadtree over longitude and latitude (2dsphere, level
//! 20: about 38 m by 19 m at the equator) or over the `[min, max)` square of a 2d index
//! (`bits` levels), each cell numbered by interleaving its x and y (Z order), so that
//! nearby positions share key prefixes.

use super::shape::Pos;

/// The quadtree level of 2dsphere index cells.
pub const SPHERE_LEVEL: u32 = 20;

fn interleave(x: u64, y: u64, bits: u32) -> i64 {
    let mut out: u64 = 0;
    for i in (0..bits).rev() {
        out = (out << 2) | (((x >> i) & 1) << 1) | ((y >> i) & 1);
    }
    out as i64
}

fn quantize(v: f64, min: f64, max: f64, bits: u32) -> u64 {
    let cells = (1u64 << bits) as f64;
    (((v - min) / (max - min)) * cells).clamp(0.0, cells - 1.0) as u64
}

/// The 2dsphere cell of a (longitude, latitude) position.
pub fn sphere_cell(p: Pos) -> i64 {
    let x = quantize(p.x, -180.0, 180.0, SPHERE_LEVEL);
    let y = quantize(p.y, -90.0, 90.0, SPHERE_LEVEL);
    interleave(x, y, SPHERE_LEVEL)
}

/// The 2d cell of a point inside `[min, max)` on both axes.
pub fn flat_cell(p: Pos, min: f64, max: f64, bits: u32) -> i64 {
    interleave(
        quantize(p.x, min, max, bits),
        quantize(p.y, min, max, bits),
        bits,
    )
}

/// At most this many cells of one level cover a query box (a coarser level is taken
/// when the box needs more).
const MAX_COVER_CELLS: u64 = 64;

/// A box on an index grid: `x` and `y` intervals (inclusive) of a grid spanning `xs` by
/// `ys` at `bits` levels.
pub struct GridBox {
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub xs: (f64, f64),
    pub ys: (f64, f64),
    pub bits: u32,
}

/// Inclusive ranges of finest-level cells that hold every position inside `b`: the cells
/// of the finest level at which at most 64 cells cover the box, each widened to the
/// finest-level cells inside it, adjacent ranges merged. (A cell's number at a coarser
/// level is its finest number shifted right, so a position inside the box is inside one
/// of the ranges.)
pub fn cover(b: &GridBox) -> Vec<(i64, i64)> {
    for level in (0..=b.bits).rev() {
        let qx = |v: f64| quantize(v, b.xs.0, b.xs.1, level);
        let qy = |v: f64| quantize(v, b.ys.0, b.ys.1, level);
        let (x0, x1) = (qx(b.x.0), qx(b.x.1));
        let (y0, y1) = (qy(b.y.0), qy(b.y.1));
        let count = (x1.saturating_sub(x0) + 1).saturating_mul(y1.saturating_sub(y0) + 1);
        if count > MAX_COVER_CELLS && level > 0 {
            continue;
        }
        let shift = 2 * (b.bits - level);
        let mut ranges: Vec<(i64, i64)> = Vec::new();
        for (x, y) in (x0..=x1).flat_map(|x| (y0..=y1).map(move |y| (x, y))) {
            // In u128: at 32 bits a finest cell number takes all 64 bits.
            let z = u128::from(interleave(x, y, level) as u64);
            let lo = (z << shift) as u64;
            let hi = (((z + 1) << shift) - 1) as u64;
            // Cells are stored as the i64 of their u64 number: a range across 2^63 is
            // two ranges of i64.
            if (lo as i64) <= (hi as i64) {
                ranges.push((lo as i64, hi as i64));
            } else {
                ranges.push((lo as i64, i64::MAX));
                ranges.push((i64::MIN, hi as i64));
            }
        }
        ranges.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if last.1.saturating_add(1) >= lo => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        return merged;
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearby_positions_share_cells_and_far_ones_do_not() {
        let a = sphere_cell(Pos { x: 2.35, y: 48.85 });
        assert_eq!(
            a,
            sphere_cell(Pos {
                x: 2.350001,
                y: 48.850001
            })
        );
        assert_ne!(a, sphere_cell(Pos { x: -73.9, y: 40.7 }));
        assert_eq!(
            flat_cell(
                Pos {
                    x: -180.0,
                    y: -180.0
                },
                -180.0,
                180.0,
                26
            ),
            0
        );
    }

    #[test]
    fn a_cover_holds_the_cell_of_every_position_inside_its_box() {
        let b = GridBox {
            x: (2.2, 2.5),
            y: (48.8, 48.9),
            xs: (-180.0, 180.0),
            ys: (-90.0, 90.0),
            bits: SPHERE_LEVEL,
        };
        let ranges = cover(&b);
        assert!(!ranges.is_empty() && ranges.len() <= 64, "{ranges:?}");
        let inside = |c: i64| ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi);
        for i in 0..=30 {
            for j in 0..=10 {
                let p = Pos {
                    x: 2.2 + 0.01 * i as f64,
                    y: 48.8 + 0.01 * j as f64,
                };
                assert!(inside(sphere_cell(p)), "{p:?}");
            }
        }
        assert!(!inside(sphere_cell(Pos { x: -73.9, y: 40.7 })));
        // The whole grid is one range.
        let all = GridBox {
            x: (-180.0, 180.0),
            y: (-90.0, 90.0),
            ..b
        };
        assert_eq!(cover(&all), vec![(0, (1i64 << (2 * SPHERE_LEVEL)) - 1)]);
    }

    #[test]
    fn a_cover_of_a_32_bit_grid_holds_every_cell() {
        let b = GridBox {
            x: (-180.0, 180.0),
            y: (-180.0, 180.0),
            xs: (-180.0, 180.0),
            ys: (-180.0, 180.0),
            bits: 32,
        };
        let ranges = cover(&b);
        for (x, y) in [(-170.0, -80.0), (170.0, 80.0), (179.9, 179.9), (0.0, 0.0)] {
            let c = flat_cell(Pos { x, y }, -180.0, 180.0, 32);
            assert!(
                ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi),
                "{x},{y} -> {c}: {ranges:?}"
            );
        }
    }
}
