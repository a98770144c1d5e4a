//! `$group` over decoded bucket columns. Per row only a cheap raw key is computed: the
//! series (meta is constant per bucket), the time truncated to the `$dateTrunc` bin
//! the key asks for, and the values of other key fields. The `_id` expression itself
//! is evaluated (by the query layer, so results equal the document path exactly) once
//! per distinct raw key, on a small document holding those inputs. A bucket whose rows
//! all share one key goes whole to its group. The accumulators are in `group_state`.

use super::col::{Col, Cols};
use super::group_state::{
    feed_row, feed_rows, finish, initial, merge_state, selected, Acc, ArgValues, State,
};
use crate::options::TimeseriesOptions;
use crate::store::BucketView;
use crate::TsError;
use bson::{Bson, DateTime, Document};
use hourglass_query::expr::Expr;
use hourglass_query::keystring;
use hourglass_query::pipeline::time_bins::{bin_start, fixed_date_trunc};
use hourglass_query::QueryError;
use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

#[derive(Debug, Clone)]
enum Arg {
    Const(Bson),
    /// A top-level measurement field (also the time field).
    Field(String),
    /// An expression over the meta field only: constant per bucket.
    Meta(Expr),
}

/// A `$group` stage the columns can run.
#[derive(Debug, Clone)]
pub struct VectorGroup {
    id: Expr,
    /// Time bin width (ms) when the key reads the time field through one `$dateTrunc`;
    /// `Some(1)` reads the exact time; `None` does not read the time.
    time_bin: Option<i64>,
    key_fields: Vec<String>,
    reads_meta: bool,
    accs: Vec<(String, Acc, Arg)>,
    time_field: String,
    meta_field: Option<String>,
}

fn is_meta_path(path: &str, mf: Option<&str>) -> bool {
    mf.is_some_and(|mf| crate::meta::is_meta_path(path, mf))
}

/// Walks an `_id` expression: field references, and the `$dateTrunc`s over the time
/// field. Returns false when the key can't be computed from raw keys.
fn key_inputs(
    v: &Bson,
    o: &TimeseriesOptions,
    bins: &mut Vec<i64>,
    fields: &mut Vec<String>,
    meta: &mut bool,
) -> bool {
    match v {
        Bson::String(s) if s.starts_with("$$") => false,
        Bson::String(s) if s.starts_with('$') => {
            let path = &s[1..];
            if is_meta_path(path, o.meta_field.as_deref()) {
                *meta = true;
            } else if path == o.time_field {
                bins.push(1);
            } else if path.contains('.') {
                return false;
            } else {
                fields.push(path.to_string());
            }
            true
        }
        Bson::Document(d) => {
            if let Some((path, width)) = fixed_date_trunc(d) {
                if path == o.time_field {
                    bins.push(width);
                    return true;
                }
            }
            if d.contains_key("$literal") {
                return true;
            }
            // These name fields without a `$`: the document path reads them.
            if ["$getField", "$setField", "$unsetField"]
                .iter()
                .any(|op| d.contains_key(*op))
            {
                return false;
            }
            d.values().all(|x| key_inputs(x, o, bins, fields, meta))
        }
        Bson::Array(a) => a.iter().all(|x| key_inputs(x, o, bins, fields, meta)),
        _ => true,
    }
}

impl VectorGroup {
    /// The vectorized form of a `$group` spec, or `None` when it needs the document
    /// path.
    pub fn parse(spec: &Document, o: &TimeseriesOptions) -> Option<VectorGroup> {
        let id_spec = spec.get("_id")?;
        let (mut bins, mut key_fields, mut reads_meta) = (Vec::new(), Vec::new(), false);
        if !key_inputs(id_spec, o, &mut bins, &mut key_fields, &mut reads_meta) {
            return None;
        }
        bins.dedup();
        if bins.len() > 1 {
            return None;
        }
        let id = Expr::parse(id_spec).ok()?;
        let mut accs = Vec::new();
        for (name, a) in spec.iter().filter(|(k, _)| *k != "_id") {
            let d = a.as_document().filter(|d| d.len() == 1)?;
            let (op, arg) = d.iter().next()?;
            let acc = match op.as_str() {
                "$sum" => Acc::Sum,
                "$avg" => Acc::Avg,
                "$min" => Acc::Min,
                "$max" => Acc::Max,
                "$first" => Acc::First,
                "$last" => Acc::Last,
                "$count" if arg.as_document().is_some_and(Document::is_empty) => {
                    accs.push((name.clone(), Acc::Sum, Arg::Const(Bson::Int32(1))));
                    continue;
                }
                _ => return None,
            };
            let arg = match arg {
                Bson::String(s) if s.starts_with("$$") => return None,
                Bson::String(s) if s.starts_with('$') => {
                    let path = &s[1..];
                    if is_meta_path(path, o.meta_field.as_deref()) {
                        Arg::Meta(Expr::parse(arg).ok()?)
                    } else if path.contains('.') {
                        return None;
                    } else {
                        Arg::Field(path.to_string())
                    }
                }
                Bson::Document(_) | Bson::Array(_) => return None,
                c => Arg::Const(c.clone()),
            };
            accs.push((name.clone(), acc, arg));
        }
        Some(VectorGroup {
            id,
            time_bin: bins.first().copied(),
            key_fields,
            reads_meta,
            accs,
            time_field: o.time_field.clone(),
            meta_field: o.meta_field.clone(),
        })
    }

    /// Columns the group reads.
    pub fn fields(&self) -> Vec<String> {
        let mut f = self.key_fields.clone();
        if self.time_bin.is_some() {
            f.push(self.time_field.clone());
        }
        for (_, _, a) in &self.accs {
            if let Arg::Field(x) = a {
                f.push(x.clone());
            }
        }
        f
    }

    /// Whether the key reads the time and nothing else (no meta, no other field).
    pub fn keys_by_time_alone(&self) -> bool {
        self.time_bin.is_some() && self.key_fields.is_empty() && !self.reads_meta
    }

    /// The key of a measurement at `ms` when the key reads the time alone and is a
    /// date ([`VectorGroup::keys_by_time_alone`]).
    pub fn time_key(&self, ms: i64) -> Option<i64> {
        let mut d = Document::new();
        d.insert(self.time_field.clone(), DateTime::from_millis(ms));
        match self.id.eval(&d) {
            Ok(Bson::DateTime(k)) => Some(k.timestamp_millis()),
            _ => None,
        }
    }

    pub fn needs_time(&self) -> bool {
        self.fields().contains(&self.time_field)
    }

    pub fn start(&self) -> GroupRun<'_> {
        GroupRun {
            group: self,
            raw: HashMap::default(),
            simple: HashMap::default(),
            by_key: HashMap::default(),
            groups: Vec::new(),
            meta_ids: HashMap::default(),
            meta_docs: Vec::new(),
            scratch: Document::new(),
            first_seen: Vec::new(),
        }
    }

    /// Whether runs over parts of a scan can be merged into the run over the whole scan:
    /// every accumulator combines partial states (`$first`/`$last` would need the rows'
    /// order across the parts).
    pub fn mergeable(&self) -> bool {
        self.accs
            .iter()
            .all(|(_, a, _)| !matches!(a, Acc::First | Acc::Last))
    }
}

/// A running vectorized group.
pub struct GroupRun<'a> {
    group: &'a VectorGroup,
    raw: HashMap<Vec<u8>, usize>,
    simple: HashMap<(u32, Option<i64>), usize>,
    /// Groups by their key's key string: equal exactly when MongoDB's comparison
    /// says the keys are equal (`1` and `1.0`, `-0.0` and `0.0`).
    by_key: HashMap<Vec<u8>, usize>,
    groups: Vec<(Bson, Vec<State>)>,
    meta_ids: HashMap<Vec<u8>, u32>,
    /// Per series (`meta_ids`' values): the meta document expressions read, also where
    /// the `_id` expression's other inputs are set to evaluate it.
    meta_docs: Vec<Document>,
    /// Where the `_id` expression's inputs are set when it reads no meta.
    scratch: Document,
    /// Per group (as `groups`): the position in the scan of its first row, (bucket, row).
    first_seen: Vec<(u64, usize)>,
}

impl GroupRun<'_> {
    /// Groups so far.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// The keys of the groups created after the first `start`.
    pub fn keys_from(&self, start: usize) -> impl Iterator<Item = &Bson> {
        self.groups.iter().skip(start).map(|(k, _)| k)
    }

    /// Feeds the rows of the bucket at position `at` of the scan (buckets may be fed out
    /// of order, to runs merged later) selected by `mask` (all rows when `None`).
    pub fn feed_at(
        &mut self,
        at: u64,
        cols: &Cols<'_>,
        mask: Option<&[bool]>,
    ) -> Result<(), QueryError> {
        let g = self.group;
        let bucket = cols.view;
        let n = bucket.count();
        let load = |f: &str| cols.get(f).map_err(ts_error);
        let key_cols: Vec<Rc<Col>> = g
            .key_fields
            .iter()
            .map(|f| load(f))
            .collect::<Result<_, _>>()?;
        // The meta document is parsed once per series, not per bucket.
        let needs_meta = g.reads_meta || g.accs.iter().any(|(_, _, a)| matches!(a, Arg::Meta(_)));
        let series = if needs_meta {
            Some(self.series_of(bucket))
        } else {
            None
        };
        let no_meta = Document::new();
        let meta_doc = match series {
            Some(s) => self.meta_docs.get(s as usize).unwrap_or(&no_meta),
            None => &no_meta,
        };
        let meta_id = if g.reads_meta { series.unwrap_or(0) } else { 0 };
        let args: Vec<ArgValues> = g
            .accs
            .iter()
            .map(|(_, _, a)| match a {
                Arg::Const(c) => Ok(ArgValues::Const(Some(c.clone()))),
                Arg::Meta(e) => Ok(ArgValues::Const(e.eval_optional(meta_doc)?)),
                Arg::Field(f) => Ok(ArgValues::Column(load(f)?)),
            })
            .collect::<Result<_, QueryError>>()?;
        if key_cols.is_empty() {
            if let Some(bin_ms) = one_bin(g.time_bin, bucket) {
                let Some(first) = (0..n).find(|&i| selected(mask, i)) else {
                    return Ok(());
                };
                let slot = self.simple_slot(series, meta_id, bin_ms, (at, first))?;
                if let Some((_, states)) = self.groups.get_mut(slot) {
                    for ((_, acc, _), (state, arg)) in
                        g.accs.iter().zip(states.iter_mut().zip(&args))
                    {
                        feed_rows(*acc, state, arg, n, mask);
                    }
                }
                return Ok(());
            }
        }
        let time = match g.time_bin {
            Some(_) => Some(load(&g.time_field)?),
            None => None,
        };
        let mut raw = Vec::with_capacity(32);
        let mut last_raw: Option<(Vec<u8>, usize)> = None;
        let mut last_simple: Option<(Option<i64>, usize)> = None;
        for i in 0..n {
            if !selected(mask, i) {
                continue;
            }
            let bin_ms = match (g.time_bin, &time) {
                (Some(width), Some(t)) => t.date_ms(i).and_then(|ms| bin_start(ms, width)),
                _ => None,
            };
            let slot = if key_cols.is_empty() {
                // Series and time bin only: a small fixed-size key.
                match last_simple {
                    Some((b, s)) if b == bin_ms => s,
                    _ => {
                        let s = self.simple_slot(series, meta_id, bin_ms, (at, i))?;
                        last_simple = Some((bin_ms, s));
                        s
                    }
                }
            } else {
                raw.clear();
                raw.extend_from_slice(&meta_id.to_le_bytes());
                match bin_ms {
                    Some(b) => {
                        raw.push(1);
                        raw.extend_from_slice(&b.to_le_bytes());
                    }
                    None => raw.push(0),
                }
                for c in &key_cols {
                    match c.get(i) {
                        Some(v) => {
                            raw.push(1);
                            raw.extend_from_slice(&keystring::group_key(&v));
                        }
                        None => raw.push(0),
                    }
                }
                match &last_raw {
                    Some((k, s)) if *k == raw => *s,
                    _ => {
                        let s = match self.raw.get(&raw) {
                            Some(s) => *s,
                            None => {
                                let s = self.slot_for(series, bin_ms, &key_cols, (at, i))?;
                                self.raw.insert(raw.clone(), s);
                                s
                            }
                        };
                        last_raw = Some((raw.clone(), s));
                        s
                    }
                }
            };
            let Some((_, states)) = self.groups.get_mut(slot) else {
                continue;
            };
            for ((_, acc, _), (state, arg)) in g.accs.iter().zip(states.iter_mut().zip(&args)) {
                feed_row(*acc, state, arg, i);
            }
        }
        Ok(())
    }

    /// The group of a key of series and time bin only, created on first sight.
    fn simple_slot(
        &mut self,
        series: Option<u32>,
        meta_id: u32,
        bin_ms: Option<i64>,
        position: (u64, usize),
    ) -> Result<usize, QueryError> {
        if let Some(s) = self.simple.get(&(meta_id, bin_ms)) {
            return Ok(*s);
        }
        let s = self.slot_for(series, bin_ms, &[], position)?;
        self.simple.insert((meta_id, bin_ms), s);
        Ok(s)
    }

    /// The series of `bucket`, numbered in first-seen order; its meta document parsed
    /// (under the metaField's name) on first sight.
    fn series_of(&mut self, bucket: &BucketView) -> u32 {
        // Stored buckets are keyed by their meta's bytes without parsing it.
        // Two disjoint key spaces: raw meta bytes (0) and key strings (1).
        let mut k = Vec::with_capacity(64);
        let raw = match bucket {
            BucketView::Stored(b) => b.meta_bytes(),
            BucketView::Open(_) | BucketView::Archived(_) => None,
        };
        match raw {
            Some(bytes) => {
                k.push(0);
                k.extend_from_slice(bytes);
            }
            None => {
                k.push(1);
                k.extend_from_slice(&keystring::group_key(
                    bucket.meta().unwrap_or(&Bson::Undefined),
                ));
            }
        }
        let next = self.meta_ids.len() as u32;
        let id = *self.meta_ids.entry(k).or_insert(next);
        if id == next {
            let mut d = Document::new();
            if let (Some(mf), Some(m)) = (&self.group.meta_field, bucket.meta()) {
                d.insert(mf.clone(), m.clone());
            }
            self.meta_docs.push(d);
        }
        id
    }

    /// Evaluates the `_id` expression for a new raw key, first seen at `position`
    /// (bucket in the scan, row).
    fn slot_for(
        &mut self,
        series: Option<u32>,
        bin_ms: Option<i64>,
        key_cols: &[Rc<Col>],
        position: (u64, usize),
    ) -> Result<usize, QueryError> {
        let row = position.1;
        let g = self.group;
        // The key's inputs go into the series' meta document (or an empty one), each
        // set or removed, so nothing of an earlier key is left.
        let scratch = match series.and_then(|s| self.meta_docs.get_mut(s as usize)) {
            Some(d) => d,
            None => &mut self.scratch,
        };
        match bin_ms {
            Some(b) => scratch.insert(g.time_field.clone(), DateTime::from_millis(b)),
            None => scratch.remove(&g.time_field),
        };
        for (f, c) in g.key_fields.iter().zip(key_cols) {
            match c.get(row) {
                Some(v) => scratch.insert(f.clone(), v),
                None => scratch.remove(f),
            };
        }
        let key = g.id.eval(scratch)?;
        let id = keystring::group_key(&key);
        Ok(match self.by_key.get(&id) {
            Some(s) => *s,
            None => {
                self.groups
                    .push((key, g.accs.iter().map(|(_, a, _)| initial(*a)).collect()));
                self.first_seen.push(position);
                self.by_key.insert(id, self.groups.len() - 1);
                self.groups.len() - 1
            }
        })
    }

    /// Takes in the groups of a run of the same group over other buckets of the scan
    /// ([`VectorGroup::mergeable`] only): equal keys combine their states.
    pub fn merge(&mut self, other: GroupRun<'_>) {
        let accs = &self.group.accs;
        for ((key, states), seen) in other.groups.into_iter().zip(other.first_seen) {
            let id = keystring::group_key(&key);
            match self.by_key.get(&id) {
                Some(&slot) => {
                    if let Some((_, mine)) = self.groups.get_mut(slot) {
                        for (((_, acc, _), a), b) in accs.iter().zip(mine).zip(states) {
                            merge_state(*acc, a, b);
                        }
                    }
                    if let Some(s) = self.first_seen.get_mut(slot) {
                        *s = (*s).min(seen);
                    }
                }
                None => {
                    self.groups.push((key, states));
                    self.first_seen.push(seen);
                    self.by_key.insert(id, self.groups.len() - 1);
                }
            }
        }
    }

    /// The groups, in the order of their first rows in the scan.
    pub fn finish(self) -> Vec<Document> {
        let accs = &self.group.accs;
        let mut groups: Vec<_> = self.first_seen.into_iter().zip(self.groups).collect();
        // Stable, and already in order for a run fed in scan order.
        groups.sort_by_key(|(seen, _)| *seen);
        groups
            .into_iter()
            .map(|(_, g)| g)
            .map(|(key, states)| {
                let mut out = Document::new();
                out.insert("_id", key);
                for ((name, _, _), s) in accs.iter().zip(states) {
                    out.insert(name.clone(), finish(s));
                }
                out
            })
            .collect()
    }
}

/// The one time bin every measurement of `bucket` falls in, for a key of series and time
/// bin only: `Some(None)` when the key reads no time; `None` when the bucket's time range
/// spans several bins. Read from the bucket's control bounds, which hold every
/// measurement's time (the minimum rounded down), so the time column is not decoded.
fn one_bin(width: Option<i64>, bucket: &BucketView) -> Option<Option<i64>> {
    let Some(width) = width else {
        return Some(None);
    };
    let bin = bin_start(bucket.min_time_ms(), width)?;
    (bin_start(bucket.max_time_ms()?, width)? == bin).then_some(Some(bin))
}

fn ts_error(e: TsError) -> QueryError {
    QueryError::InvalidOptions(e.to_string())
}
