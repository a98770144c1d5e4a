//! `$group` by a time bin followed by `$sort: {_id: ±1}` and `$limit k` ("the last five
//! minutes' maxima"): only the k latest (or earliest) groups survive the limit, so once
//! k groups exist a bucket whose rows all fall in earlier (later) bins than the k-th
//! best key so far is passed over without decoding a column. The group itself still
//! runs, and the caller's `$sort` and `$limit` still run on its output: every group
//! that can reach the output has been fed all its rows, so both paths give the same
//! answer; only groups the limit drops may be left short.
//!
//! A bucket's rows' keys are bounded by its times only when the key grows with the
//! time, so the `_id` must be one of three forms: the time itself, one `$dateTrunc` of
//! it in UTC (in a timezone with daylight saving a truncation can step back), or
//! `$subtract` of the time and its `$mod` by a positive constant (the pre-5.0 spelling
//! of the same bin).
//!
//! Keys are kept as "higher is better": the time in ms for `_id: -1`, its negation for
//! `_id: 1`. Each run keeps its own k best keys; the bar (the k-th best) is shared by
//! the threads of a split scan, and any run's bar is a safe one, since the k-th best
//! of the keys one run saw is at most the k-th best of all keys.

use super::count_arg;
use super::vgroup::VectorGroup;
use crate::options::TimeseriesOptions;
use crate::store::{BucketView, ScanOrder};
use bson::{Bson, Document};
use hourglass_query::num::Num;
use hourglass_query::pipeline::time_bins::in_utc;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// Largest limit pruned for: past it the heap costs more than the pruning saves.
const MAX_LIMIT: usize = 10_000;

/// The `$sort` and `$limit` after a time-binned group.
#[derive(Debug, Clone)]
pub struct TopGroups {
    limit: usize,
    /// `_id: -1`: the latest bins are kept.
    descending: bool,
}

impl TopGroups {
    /// `after` are the stages after `$group` (whose spec is `spec`).
    pub fn parse(
        spec: &Document,
        group: &VectorGroup,
        after: &[Document],
        o: &TimeseriesOptions,
    ) -> Option<TopGroups> {
        if !group.keys_by_time_alone() || !grows_with_time(spec.get("_id")?, &o.time_field) {
            return None;
        }
        let sort = after.first()?.get_document("$sort").ok()?;
        if sort.len() != 1 || after.first()?.len() != 1 {
            return None;
        }
        let direction = Num::from_bson(sort.get("_id")?)?.as_f64();
        let descending = if direction == -1.0 {
            true
        } else if direction == 1.0 {
            false
        } else {
            return None;
        };
        let limit = count_arg(after.get(1)?.get("$limit")?)?;
        (1..=MAX_LIMIT)
            .contains(&limit)
            .then_some(TopGroups { limit, descending })
    }

    pub fn explain(&self) -> Document {
        bson::doc! {"limit": self.limit as i64, "sortKey": if self.descending { -1 } else { 1 }}
    }
}

/// Whether `id` is one of the key forms that never decrease as the time grows.
fn grows_with_time(id: &Bson, time_field: &str) -> bool {
    let time = format!("${time_field}");
    let is_time = |v: &Bson| v.as_str() == Some(time.as_str());
    match id {
        Bson::String(_) => is_time(id),
        Bson::Document(d) if d.len() == 1 => {
            if let Ok(t) = d.get_document("$dateTrunc") {
                // In a timezone with daylight saving, local times repeat when clocks go
                // back, and their truncations can step back.
                return t.get("date").is_some_and(is_time) && in_utc(t);
            }
            let Ok(args) = d.get_array("$subtract") else {
                return false;
            };
            let [minuend, Bson::Document(m)] = args.as_slice() else {
                return false;
            };
            let Ok([Bson::Document(long), width]) = m.get_array("$mod").map(Vec::as_slice) else {
                return false;
            };
            let positive_whole = Num::from_bson(width)
                .map(|n| n.as_f64())
                .is_some_and(|w| w >= 1.0 && w.fract() == 0.0);
            m.len() == 1
                && is_time(minuend)
                && long.len() == 1
                && long.get("$toLong").is_some_and(is_time)
                && positive_whole
        }
        _ => false,
    }
}

/// The bar shared by the runs of one execution, and by its scan.
pub(super) struct Cutoff {
    limit: usize,
    descending: bool,
    group: VectorGroup,
    /// The longest time span of a bucket (ms): its minimum time and this bound its rows.
    span_ms: i64,
    /// The best k-th key any run has seen (`i64::MIN`: none has k yet).
    bar: AtomicI64,
    /// Buckets passed over.
    pub(super) passed_over: AtomicU64,
}

/// One run's k best keys (a min-heap: its top is the k-th best).
#[derive(Default)]
pub(super) struct Kept(BinaryHeap<Reverse<i64>>);

impl Cutoff {
    pub(super) fn new(top: &TopGroups, group: &VectorGroup, o: &TimeseriesOptions) -> Arc<Cutoff> {
        Arc::new(Cutoff {
            limit: top.limit,
            descending: top.descending,
            group: group.clone(),
            span_ms: o.max_span_millis(),
            bar: AtomicI64::new(i64::MIN),
            passed_over: AtomicU64::new(0),
        })
    }

    /// The scan order that reaches the kept bins first, and its end: once the bar is
    /// set, a stored bucket whose rows' keys are all below it ends a scan in time
    /// order, since the buckets after it are older (newer) still. The latest bins are
    /// read newest first only when the accumulators do not depend on the order rows
    /// come in (`$first` and `$last` do); otherwise the scan keeps its order and has
    /// no end.
    pub(super) fn scan_order(self: &Arc<Cutoff>) -> ScanOrder {
        if self.descending && !self.group.mergeable() {
            return ScanOrder::default();
        }
        let me = self.clone();
        ScanOrder {
            newest_first: self.descending,
            stop: Some(Arc::new(move |min_ms: i64| {
                // A bucket's rows lie in [min, min + span).
                me.below_bar(if me.descending {
                    min_ms.saturating_add(me.span_ms)
                } else {
                    min_ms
                })
            })),
        }
    }

    /// Whether the key of a row at `ms` ranks below the bar.
    fn below_bar(&self, ms: i64) -> bool {
        let bar = self.bar.load(Ordering::Relaxed);
        bar != i64::MIN
            && self
                .group
                .time_key(ms)
                .is_some_and(|key| self.rank(key) < bar)
    }

    /// A key as "higher is better".
    fn rank(&self, ms: i64) -> i64 {
        if self.descending {
            ms
        } else {
            ms.saturating_neg()
        }
    }

    /// Whether no row of `view` can be in a group the limit keeps: the key of its
    /// latest (earliest) time is below the bar.
    pub(super) fn passes_over(&self, view: &BucketView) -> bool {
        // The earliest time is the bucket's rounded-down minimum, which only widens
        // the bucket's range.
        let edge = if self.descending {
            view.max_time_ms()
        } else {
            Some(view.min_time_ms())
        };
        let below = edge.is_some_and(|ms| self.below_bar(ms));
        if below {
            self.passed_over.fetch_add(1, Ordering::Relaxed);
        }
        below
    }

    /// Takes in the keys of groups a run created and raises the bar once the run has k.
    pub(super) fn note<'k>(&self, kept: &mut Kept, new_keys: impl Iterator<Item = &'k Bson>) {
        let mut changed = false;
        for key in new_keys {
            let Bson::DateTime(d) = key else { continue };
            let rank = self.rank(d.timestamp_millis());
            if kept.0.len() < self.limit {
                kept.0.push(Reverse(rank));
                changed = true;
            } else if kept.0.peek().is_some_and(|Reverse(kth)| rank > *kth) {
                kept.0.pop();
                kept.0.push(Reverse(rank));
                changed = true;
            }
        }
        if changed && kept.0.len() == self.limit {
            if let Some(Reverse(kth)) = kept.0.peek() {
                self.bar.fetch_max(*kth, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{both_paths, cpu, ten_per_bucket, T0};
    use super::super::TsPlan;
    use crate::store::ScanCounters;
    use bson::{doc, Bson, Document};

    fn id_forms() -> Vec<Bson> {
        vec![
            Bson::Document(doc! {"$dateTrunc": {"date": "$time", "unit": "minute"}}),
            Bson::Document(doc! {"$dateTrunc": {"date": "$time", "unit": "second", "binSize": 90}}),
            Bson::Document(doc! {"$subtract": ["$time", {"$mod": [{"$toLong": "$time"}, 60_000]}]}),
            Bson::String("$time".into()),
        ]
    }

    #[test]
    fn the_top_time_bins_equal_the_document_path_for_every_key_form_order_and_accumulator() {
        let (_dir, c, o, store) = ten_per_bucket();
        // Four series over 50 minutes, written in two passes so that the second
        // pass's late rows land in buckets out of time order; some rows lack `v`.
        let mut docs: Vec<Document> = Vec::new();
        for pass in 0..2i64 {
            for i in (pass..3000).step_by(2) {
                let mut d = doc! {
                    "time": bson::DateTime::from_millis(T0 + i * 1_000),
                    "tags": {"hostname": format!("host_{}", i % 4)},
                    "n": (i % 13) as i32,
                };
                if i % 17 != 0 {
                    // Whole numbers: sums are exact whatever the order of addition.
                    d.insert("v", ((i * 7919) % 1000) as f64);
                }
                docs.push(d);
            }
        }
        store.insert_docs(&c, &o, docs, true).unwrap();
        // Buckets held in memory, then stored (the scan's end applies to those).
        for stored in [false, true] {
            if stored {
                store.close_all().unwrap();
            }
            check_top_bins(&store, &c, &o);
        }
    }

    fn check_top_bins(
        store: &crate::store::TimeseriesStore,
        c: &std::sync::Arc<hourglass_catalog::Collection>,
        o: &crate::options::TimeseriesOptions,
    ) {
        for id in id_forms() {
            for (sort, limit) in [(-1, 3i64), (1, 3), (-1, 1), (1, 7), (-1, 5000)] {
                for accs in [
                    doc! {"mx": {"$max": "$v"}, "s": {"$sum": "$n"}, "a": {"$avg": "$v"}, "c": {"$count": {}}},
                    doc! {"f": {"$first": "$v"}, "l": {"$last": "$n"}},
                ] {
                    let mut group = doc! {"_id": id.clone()};
                    group.extend(accs.clone());
                    let stages = [
                        doc! {"$match": {"time": {"$lt": bson::DateTime::from_millis(T0 + 2_400_000)}, "n": {"$ne": 5}}},
                        doc! {"$group": group},
                        doc! {"$sort": {"_id": sort}},
                        doc! {"$limit": limit},
                    ];
                    let (fast, slow, plan) = both_paths(store, c, o, &stages);
                    assert!(
                        plan.explain(None).contains_key("groupTopKeys"),
                        "{stages:?}"
                    );
                    assert_eq!(fast, slow, "{stages:?}");
                    assert_eq!(fast.len() as i64, limit.min(slow.len() as i64));
                }
            }
        }
    }

    #[test]
    fn only_keys_that_never_step_back_as_time_grows_limit_the_scan() {
        let (_dir, _c, o, _store) = cpu();
        let top = |id: Bson| {
            let stages = [
                doc! {"$group": {"_id": id, "mx": {"$max": "$v"}}},
                doc! {"$sort": {"_id": -1}},
                doc! {"$limit": 3},
            ];
            TsPlan::new(&stages, &o)
                .unwrap()
                .explain(None)
                .contains_key("groupTopKeys")
        };
        for id in id_forms() {
            assert!(top(id.clone()), "{id:?}");
        }
        assert!(top(Bson::Document(
            doc! {"$dateTrunc": {"date": "$time", "unit": "hour", "timezone": "UTC"}}
        )));
        // When clocks go back, 01:59 EDT truncates to the minute 01:59 and the next
        // minute, 01:00 EST, to 01:00: the key steps back an hour.
        assert!(!top(Bson::Document(
            doc! {"$dateTrunc": {"date": "$time", "unit": "minute", "timezone": "America/New_York"}}
        )));
        assert!(!top(Bson::Document(
            doc! {"$multiply": [{"$toLong": "$time"}, -1]}
        )));
    }

    #[test]
    fn a_top_bins_query_reads_only_the_buckets_near_them() {
        let (_dir, c, o, store) = ten_per_bucket();
        // Four series over three hours, every 10 s: 432 buckets of 10 rows, while a
        // bucket may span an hour (granularity "seconds").
        let docs: Vec<Document> = (0..4320i64)
            .map(|i| {
                doc! {
                    "time": bson::DateTime::from_millis(T0 + (i / 4) * 10_000),
                    "tags": {"hostname": format!("host_{}", i % 4)},
                    "v": (i % 100) as f64,
                }
            })
            .collect();
        store.insert_docs(&c, &o, docs, true).unwrap();
        // Stored, as after a restart: the scan's end applies to stored buckets.
        store.close_all().unwrap();
        let buckets = store
            .scan(&c, &o, &crate::store::BucketPredicate::all())
            .unwrap()
            .count() as u64;
        for sort in [-1, 1] {
            let stages = [
                doc! {"$group": {"_id": {"$dateTrunc": {"date": "$time", "unit": "minute"}}, "mx": {"$max": "$v"}}},
                doc! {"$sort": {"_id": sort}},
                doc! {"$limit": 2},
            ];
            let plan = TsPlan::new(&stages, &o).unwrap();
            let ex = store.execute(&c, &o, &plan).unwrap();
            assert!(ex.rows.documents().count() >= 2);
            let n = &ex.counters;
            let read = ScanCounters::get(&n.buckets_returned);
            let unpacked = read - ScanCounters::get(&n.buckets_passed_over_by_key);
            // Two minutes of four series are 48 rows: 5 buckets, and a few more where
            // buckets straddle the bins' edges.
            assert!(
                unpacked <= 16,
                "sort {sort}: {unpacked} of {buckets} buckets unpacked"
            );
            // The scan ends one bucket span (an hour) past the kept bins at the latest.
            assert!(
                read * 3 < buckets * 2,
                "sort {sort}: {read} of {buckets} buckets read"
            );
            let (fast, slow, _) = both_paths(&store, &c, &o, &stages);
            assert_eq!(fast, slow);
        }
    }
}
