//! A vectorized group's accumulator states and how rows of columns feed them, with the
//! query layer's semantics (`$sum $avg $min $max $first $last $count`).

use super::col::Col;
use crate::column::{NumericValues, TypedColumn};
use bson::Bson;
use hourglass_query::compare::compare_values;
use hourglass_query::num::{Mean, Num};
use std::rc::Rc;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Acc {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
}

#[derive(Debug, Clone)]
pub(super) enum State {
    Sum(Num),
    Avg(Mean),
    Best(Option<Bson>),
    First(Option<Bson>),
}

pub(super) fn initial(acc: Acc) -> State {
    match acc {
        Acc::Sum => State::Sum(Num::I32(0)),
        Acc::Avg => State::Avg(Mean::default()),
        Acc::Min | Acc::Max | Acc::Last => State::Best(None),
        Acc::First => State::First(None),
    }
}

pub(super) fn accumulate(acc: Acc, state: &mut State, v: Option<&Bson>) {
    match (acc, state) {
        (Acc::Sum, State::Sum(total)) => {
            if let Some(n) = v.and_then(Num::from_bson) {
                *total = total.plus(n);
            }
        }
        (Acc::Avg, State::Avg(mean)) => {
            if let Some(n) = v.and_then(Num::from_bson) {
                mean.add(n);
            }
        }
        (Acc::Min | Acc::Max, State::Best(best)) => {
            let Some(v) = v.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) else {
                return;
            };
            let replace = match (best.as_ref(), v) {
                (None, _) => true,
                (Some(Bson::Double(b)), Bson::Double(x)) if !b.is_nan() && !x.is_nan() => {
                    if acc == Acc::Min {
                        x < b
                    } else {
                        x > b
                    }
                }
                (Some(b), v) => {
                    let o = compare_values(v, b);
                    if acc == Acc::Min {
                        o.is_lt()
                    } else {
                        o.is_gt()
                    }
                }
            };
            if replace {
                *best = Some(v.clone());
            }
        }
        (Acc::First, State::First(first)) if first.is_none() => {
            *first = Some(v.cloned().unwrap_or(Bson::Null));
        }
        (Acc::Last, State::Best(last)) => *last = Some(v.cloned().unwrap_or(Bson::Null)),
        _ => {}
    }
}

/// [`accumulate`] of a double for the common states; false when the state needs the
/// general path (NaN, a state holding another type, `$sum`, `$first`, `$last`).
pub(super) fn accumulate_double(acc: Acc, state: &mut State, x: f64) -> bool {
    match (acc, state) {
        (Acc::Avg, State::Avg(mean)) => {
            mean.add_double(x);
            true
        }
        (Acc::Min | Acc::Max, State::Best(Some(Bson::Double(b)))) if !b.is_nan() && !x.is_nan() => {
            if (acc == Acc::Min && x < *b) || (acc == Acc::Max && x > *b) {
                *b = x;
            }
            true
        }
        _ => false,
    }
}

/// Combines `b`, the state of a run over other buckets, into `a`.
pub(super) fn merge_state(acc: Acc, a: &mut State, b: State) {
    match (acc, a, b) {
        (Acc::Sum, State::Sum(x), State::Sum(y)) => *x = x.plus(y),
        (Acc::Avg, State::Avg(mean), State::Avg(other)) => mean.merge(other),
        (Acc::Min | Acc::Max, a, State::Best(b)) => accumulate(acc, a, b.as_ref()),
        // `$first`/`$last` runs are not merged (`VectorGroup::mergeable`).
        _ => {}
    }
}

pub(super) fn finish(state: State) -> Bson {
    match state {
        State::Sum(n) => n.to_bson(),
        State::Avg(mean) => mean.finish(),
        State::Best(v) | State::First(v) => v.unwrap_or(Bson::Null),
    }
}

pub(super) enum ArgValues {
    Const(Option<Bson>),
    Column(Rc<Col>),
}

/// Whether row `i` is selected by `mask` (all rows when `None`).
pub(super) fn selected(mask: Option<&[bool]>, i: usize) -> bool {
    mask.is_none_or(|m| m.get(i).copied().unwrap_or(false))
}

/// Accumulates row `i`'s argument into `state`.
pub(super) fn feed_row(acc: Acc, state: &mut State, arg: &ArgValues, i: usize) {
    match arg {
        ArgValues::Const(c) => accumulate(acc, state, c.as_ref()),
        ArgValues::Column(c) => match c.double(i) {
            // A double the state can take without a BSON value.
            Some(x) if accumulate_double(acc, state, x) => {}
            _ => accumulate(acc, state, c.get(i).as_ref()),
        },
    }
}

/// Accumulates the selected rows of a bucket (`n` rows) into one group's `state`, in
/// row order as [`feed_row`] would: an average of a column of doubles is summed in one
/// pass over the column.
pub(super) fn feed_rows(
    acc: Acc,
    state: &mut State,
    arg: &ArgValues,
    n: usize,
    mask: Option<&[bool]>,
) {
    if let (Acc::Avg, State::Avg(mean), ArgValues::Column(c)) = (acc, &mut *state, arg) {
        if let Col::Typed(TypedColumn {
            values: NumericValues::Doubles(d),
            present: None,
        }) = &**c
        {
            for (i, x) in d.iter().enumerate().take(n) {
                if selected(mask, i) {
                    mean.add_double(*x);
                }
            }
            return;
        }
    }
    for i in (0..n).filter(|&i| selected(mask, i)) {
        feed_row(acc, state, arg, i);
    }
}
