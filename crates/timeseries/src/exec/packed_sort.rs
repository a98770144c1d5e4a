//! A sort for the common projected case: every key an integer column without nulls
//! (times, integers, per-bucket ranks) whose value ranges, with the row number after
//! them, fit one `u64`. Each row becomes one number ordered as the keys are, and a
//! plain integer sort replaces Arrow's lexicographic comparator (which dispatches per
//! key per comparison). The row number is the last part, so ties keep scan order.
//! Anything else (nulls, doubles, strings, wide ranges) returns `None` and is left to
//! `lexsort_to_indices`.

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, UInt32Type};
use arrow_array::{Array, ArrayRef};
use arrow_ord::sort::SortColumn;

/// One key's values as `i64`, when the column is an integer kind without nulls.
fn integers(values: &ArrayRef) -> Option<Vec<i64>> {
    if values.null_count() > 0 {
        return None;
    }
    if let Some(a) = values.as_primitive_opt::<Int64Type>() {
        return Some(a.values().to_vec());
    }
    if let Some(a) = values.as_primitive_opt::<Int32Type>() {
        return Some(a.values().iter().map(|&v| i64::from(v)).collect());
    }
    if let Some(a) = values.as_primitive_opt::<UInt32Type>() {
        return Some(a.values().iter().map(|&v| i64::from(v)).collect());
    }
    None
}

/// Bits that hold every value of `0..=width`.
fn bits(width: u64) -> u32 {
    u64::BITS - width.leading_zeros()
}

/// The row numbers of `keys` (each of `rows` values) in sort order, stable; `None` when
/// the keys do not pack into one `u64`.
pub fn packed_order(keys: &[SortColumn], rows: usize) -> Option<Vec<u32>> {
    let row_bits = bits(u64::try_from(rows.checked_sub(1)?).ok()?);
    let mut used = row_bits;
    let mut parts = Vec::with_capacity(keys.len());
    for key in keys {
        let values = integers(&key.values)?;
        if values.len() != rows {
            return None;
        }
        let (lo, hi) = values
            .iter()
            .fold((i64::MAX, i64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let width = hi.abs_diff(lo);
        used = used.checked_add(bits(width))?;
        if used > u64::BITS {
            return None;
        }
        let descending = key.options.is_some_and(|o| o.descending);
        parts.push((values, lo, hi, bits(width), descending));
    }
    let mut packed: Vec<u64> = (0..rows as u64).collect();
    // Keys go in from the last to the first, each above those already in.
    let mut shift = row_bits;
    for (values, lo, hi, width_bits, descending) in parts.iter().rev() {
        for (p, &v) in packed.iter_mut().zip(values) {
            let offset = if *descending {
                hi.abs_diff(v)
            } else {
                v.abs_diff(*lo)
            };
            *p |= offset.checked_shl(shift).unwrap_or(0);
        }
        shift += width_bits;
    }
    packed.sort_unstable();
    let mask = match 1u64.checked_shl(row_bits) {
        Some(m) => m - 1,
        None => u64::MAX,
    };
    Some(packed.into_iter().map(|p| (p & mask) as u32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float64Array, Int32Array, Int64Array, UInt32Array};
    use arrow_ord::sort::lexsort_to_indices;
    use arrow_schema::SortOptions;
    use std::sync::Arc;

    fn column(values: ArrayRef, descending: bool) -> SortColumn {
        SortColumn {
            values,
            options: Some(SortOptions {
                descending,
                nulls_first: !descending,
            }),
        }
    }

    fn lexsorted(keys: &[SortColumn], rows: usize) -> Vec<u32> {
        let mut all = keys.to_vec();
        all.push(SortColumn {
            values: Arc::new(UInt32Array::from_iter_values(0..rows as u32)),
            options: None,
        });
        lexsort_to_indices(&all, None).unwrap().values().to_vec()
    }

    #[test]
    fn packed_keys_order_rows_as_arrows_lexsort_with_ties_in_row_order() {
        let rows = 5000;
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as i64
        };
        let times: Vec<i64> = (0..rows)
            .map(|_| 1_451_606_400_000 + next() % 600 * 10_000)
            .collect();
        let ints: Vec<i32> = (0..rows).map(|_| (next() % 7) as i32 - 3).collect();
        let ranks: Vec<u32> = (0..rows).map(|_| (next() % 100) as u32).collect();
        for descending in [false, true] {
            for keys in [
                vec![
                    column(Arc::new(Int64Array::from(times.clone())), descending),
                    column(Arc::new(UInt32Array::from(ranks.clone())), !descending),
                ],
                vec![
                    column(Arc::new(Int32Array::from(ints.clone())), descending),
                    column(Arc::new(Int64Array::from(times.clone())), false),
                ],
                vec![column(Arc::new(Int32Array::from(ints.clone())), descending)],
            ] {
                let order = packed_order(&keys, rows).expect("these keys pack");
                assert_eq!(order, lexsorted(&keys, rows));
            }
        }
    }

    #[test]
    fn keys_that_do_not_pack_are_left_to_lexsort() {
        let doubles = column(Arc::new(Float64Array::from(vec![1.0, 0.5])), false);
        assert!(packed_order(&[doubles], 2).is_none());
        let with_null = column(Arc::new(Int64Array::from(vec![Some(1), None])), false);
        assert!(packed_order(&[with_null], 2).is_none());
        let wide = column(Arc::new(Int64Array::from(vec![i64::MIN, i64::MAX])), false);
        assert!(packed_order(&[wide], 2).is_none());
        assert!(packed_order(&[], 0).is_none());
    }
}
