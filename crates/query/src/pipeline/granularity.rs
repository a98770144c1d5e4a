//! `$bucketAuto` granularities: rounding bucket boundaries to preferred
//! number series (Renard R5..R80, E6..E192, 1-2-5) or powers of two. Rounding
//! up gives the smallest series value strictly above the number, rounding down
//! the largest strictly below it.

use bson::Bson;

use crate::error::QueryError;
use crate::num::Num;

const R5: &[f64] = &[10.0, 16.0, 25.0, 40.0, 63.0];
const R10: &[f64] = &[
    100.0, 125.0, 160.0, 200.0, 250.0, 315.0, 400.0, 500.0, 630.0, 800.0,
];
const R20: &[f64] = &[
    100.0, 112.0, 125.0, 140.0, 160.0, 180.0, 200.0, 224.0, 250.0, 280.0, 315.0, 355.0, 400.0,
    450.0, 500.0, 560.0, 630.0, 710.0, 800.0, 900.0,
];
const R40: &[f64] = &[
    100.0, 106.0, 112.0, 118.0, 125.0, 132.0, 140.0, 150.0, 160.0, 170.0, 180.0, 190.0, 200.0,
    212.0, 224.0, 236.0, 250.0, 265.0, 280.0, 300.0, 315.0, 355.0, 375.0, 400.0, 425.0, 450.0,
    475.0, 500.0, 530.0, 560.0, 600.0, 630.0, 670.0, 710.0, 750.0, 800.0, 850.0, 900.0, 950.0,
];
const R80: &[f64] = &[
    103.0, 109.0, 115.0, 122.0, 128.0, 136.0, 145.0, 155.0, 165.0, 175.0, 185.0, 195.0, 206.0,
    218.0, 230.0, 243.0, 258.0, 272.0, 290.0, 307.0, 325.0, 345.0, 365.0, 387.0, 412.0, 437.0,
    462.0, 487.0, 515.0, 545.0, 575.0, 615.0, 650.0, 690.0, 730.0, 775.0, 825.0, 875.0, 925.0,
    975.0,
];
const S125: &[f64] = &[10.0, 20.0, 50.0];
const E6: &[f64] = &[10.0, 15.0, 22.0, 33.0, 47.0, 68.0];
const E12: &[f64] = &[
    10.0, 12.0, 15.0, 18.0, 22.0, 27.0, 33.0, 39.0, 47.0, 56.0, 68.0, 82.0,
];
const E24: &[f64] = &[
    10.0, 11.0, 12.0, 13.0, 15.0, 16.0, 18.0, 20.0, 22.0, 24.0, 27.0, 30.0, 33.0, 36.0, 39.0, 43.0,
    47.0, 51.0, 56.0, 62.0, 68.0, 75.0, 82.0, 91.0,
];
const E48: &[f64] = &[
    100.0, 105.0, 110.0, 115.0, 121.0, 127.0, 133.0, 140.0, 147.0, 154.0, 162.0, 169.0, 178.0,
    187.0, 196.0, 205.0, 215.0, 226.0, 237.0, 249.0, 261.0, 274.0, 287.0, 301.0, 316.0, 332.0,
    348.0, 365.0, 383.0, 402.0, 422.0, 442.0, 464.0, 487.0, 511.0, 536.0, 562.0, 590.0, 619.0,
    649.0, 681.0, 715.0, 750.0, 787.0, 825.0, 866.0, 909.0, 953.0,
];
const E96: &[f64] = &[
    100.0, 102.0, 105.0, 107.0, 110.0, 113.0, 115.0, 118.0, 121.0, 124.0, 127.0, 130.0, 133.0,
    137.0, 140.0, 143.0, 147.0, 150.0, 154.0, 158.0, 162.0, 165.0, 169.0, 174.0, 178.0, 182.0,
    187.0, 191.0, 196.0, 200.0, 205.0, 210.0, 215.0, 221.0, 226.0, 232.0, 237.0, 243.0, 249.0,
    255.0, 261.0, 267.0, 274.0, 280.0, 287.0, 294.0, 301.0, 309.0, 316.0, 324.0, 332.0, 340.0,
    348.0, 357.0, 365.0, 374.0, 383.0, 392.0, 402.0, 412.0, 422.0, 432.0, 442.0, 453.0, 464.0,
    475.0, 487.0, 499.0, 511.0, 523.0, 536.0, 549.0, 562.0, 576.0, 590.0, 604.0, 619.0, 634.0,
    649.0, 665.0, 681.0, 698.0, 715.0, 732.0, 750.0, 768.0, 787.0, 806.0, 825.0, 845.0, 866.0,
    887.0, 909.0, 931.0, 953.0, 976.0,
];
const E192: &[f64] = &[
    100.0, 101.0, 102.0, 104.0, 105.0, 106.0, 107.0, 109.0, 110.0, 111.0, 113.0, 114.0, 115.0,
    117.0, 118.0, 120.0, 121.0, 123.0, 124.0, 126.0, 127.0, 129.0, 130.0, 132.0, 133.0, 135.0,
    137.0, 138.0, 140.0, 142.0, 143.0, 145.0, 147.0, 149.0, 150.0, 152.0, 154.0, 156.0, 158.0,
    160.0, 162.0, 164.0, 165.0, 167.0, 169.0, 172.0, 174.0, 176.0, 178.0, 180.0, 182.0, 184.0,
    187.0, 189.0, 191.0, 193.0, 196.0, 198.0, 200.0, 203.0, 205.0, 208.0, 210.0, 213.0, 215.0,
    218.0, 221.0, 223.0, 226.0, 229.0, 232.0, 234.0, 237.0, 240.0, 243.0, 246.0, 249.0, 252.0,
    255.0, 258.0, 261.0, 264.0, 267.0, 271.0, 274.0, 277.0, 280.0, 284.0, 287.0, 291.0, 294.0,
    298.0, 301.0, 305.0, 309.0, 312.0, 316.0, 320.0, 324.0, 328.0, 332.0, 336.0, 340.0, 344.0,
    348.0, 352.0, 357.0, 361.0, 365.0, 370.0, 374.0, 379.0, 383.0, 388.0, 392.0, 397.0, 402.0,
    407.0, 412.0, 417.0, 422.0, 427.0, 432.0, 437.0, 442.0, 448.0, 453.0, 459.0, 464.0, 470.0,
    475.0, 481.0, 487.0, 493.0, 499.0, 505.0, 511.0, 517.0, 523.0, 530.0, 536.0, 542.0, 549.0,
    556.0, 562.0, 569.0, 576.0, 583.0, 590.0, 597.0, 604.0, 612.0, 619.0, 626.0, 634.0, 642.0,
    649.0, 657.0, 665.0, 673.0, 681.0, 690.0, 698.0, 706.0, 715.0, 723.0, 732.0, 741.0, 750.0,
    759.0, 768.0, 777.0, 787.0, 796.0, 806.0, 816.0, 825.0, 835.0, 845.0, 856.0, 866.0, 876.0,
    887.0, 898.0, 909.0, 920.0, 931.0, 942.0, 953.0, 965.0, 976.0, 988.0,
];

/// A granularity: a preferred number series or powers of two.
#[derive(Debug, Clone, Copy)]
pub enum Granularity {
    /// A preferred number series (one decade, scaled by powers of ten).
    Series(&'static [f64]),
    /// `POWERSOF2`.
    PowersOf2,
}

impl Granularity {
    /// Looks a granularity up by name.
    pub fn parse(name: &str) -> Result<Granularity, QueryError> {
        let series = match name {
            "R5" => R5,
            "R10" => R10,
            "R20" => R20,
            "R40" => R40,
            "R80" => R80,
            "1-2-5" => S125,
            "E6" => E6,
            "E12" => E12,
            "E24" => E24,
            "E48" => E48,
            "E96" => E96,
            "E192" => E192,
            "POWERSOF2" => return Ok(Granularity::PowersOf2),
            other => {
                return Err(QueryError::loc(
                    40257,
                    format!("Unknown rounding granularity '{other}'"),
                ))
            }
        };
        Ok(Granularity::Series(series))
    }

    fn number(v: &Bson) -> Result<(Num, f64), QueryError> {
        let n = Num::from_bson(v).ok_or_else(|| {
            QueryError::loc(
                40262,
                format!(
                    "A granularity rounder can only round numeric values, but found type: {}",
                    crate::compare::type_name(v)
                ),
            )
        })?;
        let f = n.as_f64();
        if f.is_nan() {
            return Err(QueryError::loc(
                40263,
                "A granularity rounder cannot round NaN",
            ));
        }
        if f < 0.0 {
            return Err(QueryError::loc(
                40268,
                "A granularity rounder can only round non-negative numbers",
            ));
        }
        Ok((n, f))
    }

    /// The smallest granularity value strictly greater than `v` (zero stays zero).
    pub fn round_up(&self, v: &Bson) -> Result<Bson, QueryError> {
        let (n, x) = Self::number(v)?;
        if x == 0.0 || x.is_infinite() {
            return Ok(v.clone());
        }
        Ok(match self {
            Granularity::Series(s) => Bson::Double(series_up(x, s)),
            Granularity::PowersOf2 => {
                let exp = match n {
                    Num::I32(_) | Num::I64(_) => {
                        let i = n.as_exact_i64().unwrap_or(0).unsigned_abs();
                        (64 - i.leading_zeros()) as i32
                    }
                    _ => x.log2().floor() as i32 + 1,
                };
                pow2(exp)
            }
        })
    }

    /// The largest granularity value strictly less than `v` (zero stays zero).
    pub fn round_down(&self, v: &Bson) -> Result<Bson, QueryError> {
        let (n, x) = Self::number(v)?;
        if x == 0.0 || x.is_infinite() {
            return Ok(v.clone());
        }
        Ok(match self {
            Granularity::Series(s) => Bson::Double(series_down(x, s)),
            Granularity::PowersOf2 => {
                let exp = match n {
                    Num::I32(_) | Num::I64(_) => {
                        let i = n.as_exact_i64().unwrap_or(0).unsigned_abs();
                        let bits = (64 - i.leading_zeros()) as i32;
                        if i.is_power_of_two() {
                            bits - 2
                        } else {
                            bits - 1
                        }
                    }
                    _ => x.log2().ceil() as i32 - 1,
                };
                pow2(exp)
            }
        })
    }
}

fn pow2(exp: i32) -> Bson {
    if (0..31).contains(&exp) {
        Bson::Int32(1 << exp)
    } else if (31..63).contains(&exp) {
        Bson::Int64(1i64 << exp)
    } else {
        Bson::Double(2f64.powi(exp))
    }
}

fn series_up(x: f64, s: &[f64]) -> f64 {
    let (first, last) = (s[0], s[s.len() - 1]);
    let mut m = 1.0;
    while x >= last * m {
        m *= 10.0;
    }
    while x < first * m {
        let previous_min = first * m;
        m /= 10.0;
        if x >= last * m {
            return previous_min;
        }
    }
    s.iter().map(|v| v * m).find(|v| x < *v).unwrap_or(last * m)
}

fn series_down(x: f64, s: &[f64]) -> f64 {
    let (first, last) = (s[0], s[s.len() - 1]);
    let mut m = 1.0;
    while x <= first * m {
        m /= 10.0;
    }
    while x > last * m {
        let previous_max = last * m;
        m *= 10.0;
        if x <= first * m {
            return previous_max;
        }
    }
    s.iter()
        .rev()
        .map(|v| v * m)
        .find(|v| *v < x)
        .unwrap_or(first * m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_round_strictly_up_and_down_across_decades() {
        let e6 = Granularity::parse("E6").unwrap();
        assert_eq!(e6.round_up(&Bson::Int32(15)).unwrap(), Bson::Double(22.0));
        assert_eq!(e6.round_up(&Bson::Double(0.8)).unwrap(), Bson::Double(1.0));
        let down = e6.round_down(&Bson::Double(0.8)).unwrap();
        assert!(matches!(down, Bson::Double(d) if (d - 0.68).abs() < 1e-12));
        // 68 * 0.1 in doubles, as MongoDB computes it.
        assert_eq!(
            e6.round_down(&Bson::Int32(10)).unwrap(),
            Bson::Double(68.0 * 0.1)
        );
        assert_eq!(e6.round_up(&Bson::Int32(0)).unwrap(), Bson::Int32(0));
        let p2 = Granularity::parse("POWERSOF2").unwrap();
        assert_eq!(p2.round_up(&Bson::Int32(4)).unwrap(), Bson::Int32(8));
        assert_eq!(p2.round_up(&Bson::Int32(5)).unwrap(), Bson::Int32(8));
        assert_eq!(p2.round_down(&Bson::Int32(4)).unwrap(), Bson::Int32(2));
        assert_eq!(p2.round_down(&Bson::Int32(5)).unwrap(), Bson::Int32(4));
        assert_eq!(p2.round_up(&Bson::Double(0.3)).unwrap(), Bson::Double(0.5));
        assert_eq!(Granularity::parse("X1").unwrap_err().code(), 40257);
        assert_eq!(e6.round_up(&Bson::Int32(-1)).unwrap_err().code(), 40268);
    }
}
