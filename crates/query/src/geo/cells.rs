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
}
