//! A `find` with `$near`/`$nearSphere` on a regular collection returns documents nearest
//! first. When the field's geo index holds single points (not multikey), it is read ring
//! by ring: each ring is the query with a `$maxDistance` of the ring's radius, which the
//! planner bounds by the index cells of the ring's box (`catalog/src/plan_geo.rs`). A
//! ring's documents come out, nearest first, once nothing outside the ring can be nearer,
//! and the radius grows fourfold. So a `limit(k)` reads about the neighbourhood of the k
//! nearest, not the collection. Otherwise every match is read and sorted by distance.

use super::planned::{regular_read, ReadOpts};
use crate::cursor::DocSource;
use crate::error::CommandError;
use bson::{Bson, Document};
use hourglass_catalog::index::spec::KeyKind;
use hourglass_catalog::{keystring, Collection};
use hourglass_query::filter::Filter;
use hourglass_query::geo::near::{distance_of, order};
use hourglass_query::geo::Near;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

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
) -> Result<DocSource, CommandError> {
    let Some((first, world)) = rings(c, path, near) else {
        let opts = ReadOpts {
            sort: None,
            hint: None,
            after: &[],
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
    }))
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
    ready: VecDeque<Document>,
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
        };
        let read = regular_read(&self.c, filter, self.spec.as_ref(), &opts)?;
        let mut ring = Vec::new();
        for doc in read.source {
            let doc = doc?;
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
        for (_, id, doc) in ring {
            self.seen.insert(id);
            self.ready.push_back(doc);
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
            if let Some(d) = self.ready.pop_front() {
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
