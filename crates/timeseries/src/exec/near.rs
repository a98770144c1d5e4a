//! `$geoNear` followed by `$limit k` over buckets: the k measurements nearest the query
//! point, found from the location column alone. Each bucket's passing rows get their
//! distance from the column's values; only rows nearer than the k-th best so far are
//! unpacked into documents, and a bounded heap keeps the k nearest. Ties keep scan
//! order, as the document path's stable sort does, so both give the same answer.

use super::col::{Cols, GeoCol, GeoValue};
use crate::options::TimeseriesOptions;
use crate::store::StoreError;
use bson::{Bson, Document};
use hourglass_query::geo::near::distance_of_value;
use hourglass_query::geo::shape::Shape;
use hourglass_query::pipeline::GeoNear;
use hourglass_query::QueryError;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A leading `$geoNear` (its `query` already moved into the `$match` before it) and the
/// `$limit` after it.
#[derive(Debug, Clone)]
pub struct NearestK {
    stage: GeoNear,
    limit: usize,
}

impl NearestK {
    /// `[$geoNear, $limit k, ...]` with a top-level key and no `query` of its own.
    pub fn parse(stages: &[Document]) -> Option<NearestK> {
        let spec = stages.first()?.get("$geoNear")?;
        let limit = stages.get(1)?.get("$limit")?;
        let limit = hourglass_query::num::Num::from_bson(limit)?.as_f64();
        if !(1.0..=1e9).contains(&limit) || limit.fract() != 0.0 {
            return None;
        }
        let stage = GeoNear::parse(spec).ok()?;
        if stage.query().is_some() || stage.key().contains('.') {
            return None;
        }
        Some(NearestK {
            stage,
            limit: limit as usize,
        })
    }

    /// The pipeline stages it runs.
    pub const STAGES: usize = 2;

    pub fn start(&self) -> NearestRun<'_> {
        NearestRun {
            plan: self,
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

/// A measurement among the nearest so far; the heap's top is the farthest (the latest
/// in scan order among equals).
struct Found {
    dist: f64,
    seq: u64,
    loc: Bson,
    doc: Document,
}

impl PartialEq for Found {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}
impl Eq for Found {}
impl PartialOrd for Found {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Found {
    fn cmp(&self, o: &Self) -> Ordering {
        self.dist.total_cmp(&o.dist).then(self.seq.cmp(&o.seq))
    }
}

pub struct NearestRun<'a> {
    plan: &'a NearestK,
    heap: BinaryHeap<Found>,
    /// Rows seen so far, in scan order.
    seq: u64,
}

impl NearestRun<'_> {
    /// Takes one bucket's rows that pass `mask`.
    pub fn feed(
        &mut self,
        cols: &Cols<'_>,
        options: &TimeseriesOptions,
        mask: Option<&[bool]>,
    ) -> Result<(), StoreError> {
        let n = cols.view.count();
        let first = self.seq;
        self.seq += n as u64;
        let col = GeoCol::load(cols, self.plan.stage.key())?;
        let near = self.plan.stage.near();
        // Rows come later in scan order than any kept, so they must be strictly nearer
        // than the farthest kept once k are.
        let farthest = match self.heap.peek() {
            Some(top) if self.heap.len() >= self.plan.limit => Some(top.dist),
            _ => None,
        };
        let mut wanted = vec![false; n];
        let mut found = Vec::new();
        for (i, want) in wanted.iter_mut().enumerate() {
            if !mask.is_none_or(|m| m.get(i).copied().unwrap_or(false)) {
                continue;
            }
            // The location is the value itself, unless it is an array of geometries.
            let (dist, loc) = match col.get(i) {
                GeoValue::Point(p) => match near.distance(&Shape::Point(p)) {
                    Some(d) => (d, None),
                    None => continue,
                },
                GeoValue::Value(v) => match distance_of_value(&v, near) {
                    Some((d, loc)) => (d, Some(loc)),
                    None => continue,
                },
                GeoValue::Missing => continue,
            };
            if !near.in_range(dist) || farthest.is_some_and(|f| dist.total_cmp(&f).is_ge()) {
                continue;
            }
            *want = true;
            found.push((i, dist, loc));
        }
        if found.is_empty() {
            return Ok(());
        }
        let docs = cols.view.unpack_rows(options, None, Some(&wanted))?;
        let key = self.plan.stage.key();
        for ((i, dist, loc), doc) in found.into_iter().zip(docs) {
            let loc = loc.unwrap_or_else(|| doc.get(key).cloned().unwrap_or(Bson::Null));
            self.heap.push(Found {
                dist,
                seq: first + i as u64,
                loc,
                doc,
            });
            if self.heap.len() > self.plan.limit {
                self.heap.pop();
            }
        }
        Ok(())
    }

    /// The nearest measurements, nearest first, with their distance (and location).
    pub fn finish(self) -> Result<Vec<Document>, QueryError> {
        let stage = &self.plan.stage;
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|f| {
                let mut doc = f.doc;
                stage.annotate(&mut doc, f.dist, f.loc)?;
                Ok(doc)
            })
            .collect()
    }
}
