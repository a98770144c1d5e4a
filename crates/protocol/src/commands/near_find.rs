//! A `find` with `$near`/`$nearSphere` on a regular collection returns documents nearest
//! first. When the field's geo index holds single points (not multikey), it is read ring
//! by ring: each ring is the query with a `$maxDistance` of the ring's radius, which the
//! planner bounds by the index cells of the ring's box (`catalog/src/plan_geo.rs`). A
//! ring's documents come out, nearest first, once nothing outside the ring can be nearer,
//! and the radius grows fourfold. So a `limit(k)` reads about the neighbourhood of the k
//! nearest, not the collection. Otherwise every match is read and sorted by distance.
//! Explain runs the same rings and shows each as MongoDB's GEO_NEAR stage does: one
//! `searchIntervals` entry and one input access path per ring (`explain_rings`).

use super::planned::{plan_stages, regular_read, ReadOpts};
use crate::cursor::DocSource;
use crate::error::CommandError;
use bson::{Bson, Document};
use hourglass_catalog::index::spec::KeyKind;
use hourglass_catalog::{keystring, Collection};
use hourglass_query::filter::Filter;
use hourglass_query::geo::near::{distance_of, order};
use hourglass_query::geo::Near;
use parking_lot::Mutex;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// What one ring read: its distance interval, how many documents it found and returned,
/// and the access path it ran with that path's counters.
pub struct Interval {
    min: f64,
    max: f64,
    last: bool,
    buffered: u64,
    returned: u64,
    keys: u64,
    docs: u64,
    plan: Document,
}

/// The rings a read has run so far, for explain.
pub type IntervalLog = Arc<Mutex<Vec<Interval>>>;

/// Earth's half circumference in meters (MongoDB's radius), and in radians.
const HALF_EARTH_M: f64 = std::f64::consts::PI * 6_378_100.0;

/// The documents of `c` matching `filter` (whose `$near` on `path` is `near`), nearest
/// first.
pub fn nearest_first(
    c: &Arc<Collection>,
    filter: Filter,
    spec: Option<&Document>,
    path: &str,
    near: &Near,
    log: Option<IntervalLog>,
) -> Result<DocSource, CommandError> {
    let Some((first, world)) = rings(c, path, near) else {
        let opts = ReadOpts {
            sort: None,
            hint: None,
            after: &[],
            ..Default::default()
        };
        let all = regular_read(c, filter, spec, &opts)?
            .source
            .collect::<Result<Vec<_>, _>>()?;
        let ordered = order(all, path, near);
        return Ok(Box::new(ordered.into_iter().map(|(d, _, _)| Ok(d))));
    };
    Ok(Box::new(Rings {
        c: c.clone(),
        filter,
        spec: spec.cloned(),
        path: path.to_string(),
        near: near.clone(),
        radius: first,
        last: near.max.map_or(world, |m| m.min(world)),
        done: false,
        seen: HashSet::new(),
        ready: VecDeque::new(),
        log,
    }))
}

/// Whether a `$near` on `path` of `c` reads rings (its geo index holds single points).
pub fn reads_rings(c: &Collection, path: &str, near: &Near) -> bool {
    rings(c, path, near).is_some()
}

/// The first ring's radius and the radius past which nothing is left, in `near`'s units,
/// when the index on `path` holds single points; None otherwise.
fn rings(c: &Collection, path: &str, near: &Near) -> Option<(f64, f64)> {
    let indexes = c.indexes();
    let index = indexes.iter().find(|i| {
        !i.spec.hidden
            && i.spec.partial.is_none()
            && i.spec
                .parts
                .first()
                .is_some_and(|p| p.path == path && p.kind.is_geo())
    })?;
    if index.is_multikey() {
        return None;
    }
    let flat = index.spec.parts[0].kind == KeyKind::Flat;
    Some(match (flat, near.spherical, near.meters) {
        (false, _, true) | (true, true, true) => (100.0, HALF_EARTH_M),
        (_, true, false) => (100.0 / 6_378_100.0, std::f64::consts::PI),
        _ => {
            let g = index.spec.flat_grid.unwrap_or_default();
            let span = g.max - g.min;
            (span / 10_000.0, span * std::f64::consts::SQRT_2)
        }
    })
}

struct Rings {
    c: Arc<Collection>,
    filter: Filter,
    spec: Option<Document>,
    path: String,
    near: Near,
    radius: f64,
    /// The radius of the last ring: the query's `$maxDistance`, or all the space there is.
    last: f64,
    done: bool,
    /// `_id` key strings of the documents returned.
    seen: HashSet<Vec<u8>>,
    /// Documents of the current ring, nearest first, with the ring's number.
    ready: VecDeque<(usize, Document)>,
    log: Option<IntervalLog>,
}

impl Rings {
    /// Reads the next ring into `ready`.
    fn read_ring(&mut self) -> Result<(), CommandError> {
        let last = self.radius >= self.last;
        let filter = if last {
            self.filter.clone()
        } else {
            self.filter.with_near_max(self.radius)
        };
        let opts = ReadOpts {
            sort: None,
            hint: None,
            after: &[],
            ..Default::default()
        };
        let mut read = regular_read(&self.c, filter, self.spec.as_ref(), &opts)?;
        let mut ring = Vec::new();
        let mut matched = 0u64;
        for doc in read.source.by_ref() {
            let doc = doc?;
            matched += 1;
            let id = keystring::encode(doc.get("_id").unwrap_or(&Bson::Null));
            if self.seen.contains(&id) {
                continue;
            }
            if let Some((d, _)) = distance_of(&doc, &self.path, &self.near) {
                if self.near.in_range(d) && (last || d <= self.radius) {
                    ring.push((d, id, doc));
                }
            }
        }
        ring.sort_by(|a, b| a.0.total_cmp(&b.0));
        let number = match &self.log {
            Some(log) => {
                let mut log = log.lock();
                let min = log.last().map_or(0.0, |i| i.max);
                log.push(Interval {
                    min,
                    max: if last { self.last } else { self.radius },
                    last,
                    buffered: ring.len() as u64,
                    returned: 0,
                    keys: read.stats.keys(),
                    docs: read.stats.docs(),
                    plan: plan_stages(&read.plan, self.spec.as_ref(), Some((&read.stats, matched))),
                });
                log.len() - 1
            }
            None => 0,
        };
        for (_, id, doc) in ring {
            self.seen.insert(id);
            self.ready.push_back((number, doc));
        }
        if last {
            self.done = true;
        } else {
            self.radius = (self.radius * 4.0).min(self.last);
        }
        Ok(())
    }
}

impl Iterator for Rings {
    type Item = Result<Document, CommandError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((number, d)) = self.ready.pop_front() {
                if let Some(log) = &self.log {
                    if let Some(i) = log.lock().get_mut(number) {
                        i.returned += 1;
                    }
                }
                return Some(Ok(d));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.read_ring() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}

/// A `$near` find's execution as explain shows it, when it reads rings: the GEO_NEAR
/// stage over the access path of each ring it ran (`stage`, naming the index), with
/// MongoDB's `searchIntervals`, and the keys and documents all rings examined.
pub fn explain_rings(
    log: &IntervalLog,
    mut stage: Document,
    returned: u64,
) -> (Document, u64, u64) {
    let log = log.lock();
    let intervals: Vec<Document> = log
        .iter()
        .map(|i| {
            bson::doc! {
                "minDistance": i.min,
                "maxDistance": i.max,
                "maxInclusive": i.last,
                "nBuffered": i.buffered as i64,
                "nReturned": i.returned as i64,
            }
        })
        .collect();
    stage.insert("nReturned", returned as i64);
    stage.insert("searchIntervals", intervals);
    stage.insert(
        "inputStages",
        log.iter().map(|i| i.plan.clone()).collect::<Vec<_>>(),
    );
    let keys = log.iter().map(|i| i.keys).sum();
    let docs = log.iter().map(|i| i.docs).sum();
    (stage, keys, docs)
}
