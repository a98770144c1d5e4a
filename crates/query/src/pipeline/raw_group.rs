//! `$group` read straight from stored documents' bytes (a regular collection's scan),
//! building no document per row. Each row's key inputs (the field paths the `_id`
//! expression reads) are located in its bytes ([`PathSlots`]) and joined into a raw
//! key; a path read only through a fixed-width UTC `$dateTrunc` keys by its time bin
//! ([`super::time_bins`]). The `_id` expression is evaluated (the document path's, so
//! results are equal) once per new raw key, on a small document of those inputs, and
//! the accumulators (the document path's) take each row's input values directly.
//!
//! A row the bytes cannot answer alone (a path through an array, a filter that reads
//! the whole document, repeated keys) goes the document path's way into the same groups.
//! When the groups outgrow the memory limit the run gives up (`None`) and the caller runs
//! the document path, which spills or refuses as its limits say.

use super::group::{output, Group, Groups};
use super::mem::MemLimits;
use super::time_bins::{bin_start, fixed_date_trunc};
use crate::error::QueryError;
use crate::filter::raw::RawFilter;
use crate::filter::Filter;
use crate::raw_slots::{bytes, to_bson, Found, PathSlots};
use bson::{Bson, DateTime, Document, RawDocument};
use rustc_hash::FxHashMap;

/// An accumulator's input: a path's value, or a constant.
#[derive(Debug, Clone)]
enum Input {
    Slot(usize),
    Const(Option<Bson>),
}

/// A `$group` stage runnable over document bytes.
#[derive(Debug, Clone)]
pub struct RawGroup {
    group: Group,
    /// The `_id`'s input paths (slots `0..keys.len()`), each with its bin width when
    /// it is read only through one fixed-width `$dateTrunc`.
    keys: Vec<(String, Option<i64>)>,
    inputs: Vec<Input>,
    /// The key paths, then the accumulators' other paths.
    paths: Vec<String>,
}

/// Collects the field paths `v` reads, with the bin width of each use through a
/// fixed-width `$dateTrunc`; false when the expression reads variables, the whole
/// document, or is not a function of its inputs.
fn key_inputs(v: &Bson, uses: &mut Vec<(String, Option<i64>)>) -> bool {
    match v {
        Bson::String(s) if s.starts_with("$$") => false,
        Bson::String(s) => {
            if let Some(path) = s.strip_prefix('$') {
                uses.push((path.to_string(), None));
            }
            true
        }
        Bson::Document(d) => {
            if let Some((path, width)) = fixed_date_trunc(d) {
                uses.push((path.to_string(), Some(width)));
                return true;
            }
            if d.len() == 1 && d.contains_key("$literal") {
                return true;
            }
            const WHOLE_OR_RANDOM: [&str; 6] = [
                "$getField",
                "$setField",
                "$unsetField",
                "$rand",
                "$meta",
                "$function",
            ];
            if WHOLE_OR_RANDOM.iter().any(|op| d.contains_key(*op)) {
                return false;
            }
            d.values().all(|x| key_inputs(x, uses))
        }
        Bson::Array(a) => a.iter().all(|x| key_inputs(x, uses)),
        _ => true,
    }
}

/// Sets `path` (dotted) in `d` to `v`, creating documents on the way.
fn set_path(d: &mut Document, path: &str, v: Bson) {
    match path.split_once('.') {
        None => {
            d.insert(path, v);
        }
        Some((head, rest)) => {
            if !matches!(d.get(head), Some(Bson::Document(_))) {
                d.insert(head, Document::new());
            }
            if let Some(Bson::Document(sub)) = d.get_mut(head) {
                set_path(sub, rest, v);
            }
        }
    }
}

/// How rows are filtered before grouping: on the values of the filter's paths, or on the
/// whole document when the filter reads all of it (or a value does not convert).
enum Matcher<'f> {
    All,
    /// The filter's `fields()[i]` is at slot `at[i]`.
    Paths {
        at: Vec<usize>,
        filter: RawFilter,
    },
    Whole(&'f Filter),
}

/// Raw keys remembered beyond this many only while they stay within a few per group (a
/// key whose inputs rarely repeat is evaluated per row, as the document path does).
const RAW_KEYS_KEPT: usize = 65_536;

impl RawGroup {
    /// The byte-level form of the `$group` spec `spec`, or `None` when it needs
    /// whole documents.
    pub fn parse(spec: &Document) -> Option<RawGroup> {
        let group = Group::parse(&Bson::Document(spec.clone())).ok()?;
        let mut uses = Vec::new();
        if !key_inputs(spec.get("_id")?, &mut uses) {
            return None;
        }
        let mut keys: Vec<(String, Option<i64>)> = Vec::new();
        for (path, width) in uses {
            match keys.iter_mut().find(|(p, _)| *p == path) {
                // A path read both binned and not (or with two widths) keys exactly.
                Some((_, w)) if *w != width => *w = None,
                Some(_) => {}
                None => keys.push((path, width)),
            }
        }
        let mut paths: Vec<String> = keys.iter().map(|(p, _)| p.clone()).collect();
        let mut inputs = Vec::new();
        for (name, spec_acc) in group.accumulators() {
            if !spec_acc.takes_values() {
                return None;
            }
            let (op, arg) = spec.get_document(name).ok()?.iter().next()?;
            let input = match arg {
                _ if op == "$count" => Input::Const(Some(Bson::Int32(1))),
                Bson::String(s) if s.starts_with("$$") => return None,
                Bson::String(s) if s.starts_with('$') => Input::Slot(slot_of(&mut paths, &s[1..])),
                Bson::Document(_) | Bson::Array(_) => return None,
                c => Input::Const(Some(c.clone())),
            };
            inputs.push(input);
        }
        Some(RawGroup {
            group,
            keys,
            inputs,
            paths,
        })
    }

    /// The stage as the document path runs it.
    pub fn group(&self) -> &Group {
        &self.group
    }

    /// Groups the documents (BSON bytes) of `docs` that match `filter`; the groups in
    /// first-seen order, or `None` when they outgrow `limits` or a document's bytes do
    /// not decode (the document path then runs and answers).
    pub fn run<B, E>(
        &self,
        docs: impl Iterator<Item = Result<B, E>>,
        filter: &Filter,
        limits: &MemLimits,
    ) -> Result<Option<Vec<Document>>, E>
    where
        B: AsRef<[u8]>,
        E: From<QueryError>,
    {
        let mut paths = self.paths.clone();
        let matcher = match RawFilter::new(filter) {
            _ if filter.is_match_all() => Matcher::All,
            Some(r) => Matcher::Paths {
                at: r.fields().iter().map(|f| slot_of(&mut paths, f)).collect(),
                filter: r,
            },
            None => Matcher::Whole(filter),
        };
        let slots = PathSlots::new(&paths);
        let accs = self.group.accumulators();
        let mut groups = Groups::new(accs);
        let mut by_raw: FxHashMap<Vec<u8>, usize> = FxHashMap::default();
        let mut raw_bytes = 0_u64;
        let (mut found, mut raw, mut values) = (Vec::new(), Vec::with_capacity(64), Vec::new());
        for item in docs {
            crate::interrupt::check()?;
            let item = item?;
            let b = item.as_ref();
            let mut whole = None;
            let mut found_all = false;
            match &matcher {
                Matcher::All => {}
                Matcher::Paths { at, filter: pre } => {
                    found_all = slots.find(b, &mut found) && !found.contains(&Found::ThroughArray);
                    let verdict = match found_all {
                        true => pre.matches_values(b, &found, at, &mut values),
                        false => None,
                    };
                    match verdict {
                        Some(true) => {}
                        Some(false) => continue,
                        None => {
                            found_all = false;
                            let Some(d) = decode(b) else {
                                return Ok(None);
                            };
                            if !filter.matches(&d) {
                                continue;
                            }
                            whole = Some(d);
                        }
                    }
                }
                Matcher::Whole(f) => {
                    let Some(d) = decode(b) else {
                        return Ok(None);
                    };
                    if !f.matches(&d) {
                        continue;
                    }
                    whole = Some(d);
                }
            }
            let fast = whole.is_none()
                && (found_all
                    || (slots.find(b, &mut found) && !found.contains(&Found::ThroughArray)));
            if fast {
                self.raw_key(b, &found, &mut raw);
                let slot = match by_raw.get(raw.as_slice()) {
                    Some(s) => *s,
                    None => {
                        let Some(small) = self.key_document(b, &found) else {
                            return Ok(None);
                        };
                        let key = self.group.id().eval(&small)?;
                        let Some(s) = groups.slot(&key, true) else {
                            continue;
                        };
                        if by_raw.len() < RAW_KEYS_KEPT || by_raw.len() < 4 * groups.len() {
                            raw_bytes += raw.len() as u64 + 64;
                            by_raw.insert(raw.clone(), s);
                        }
                        s
                    }
                };
                for (i, input) in self.inputs.iter().enumerate() {
                    let v = match input {
                        Input::Const(c) => c.clone(),
                        Input::Slot(s) => match found[*s] {
                            Found::Missing => None,
                            f => match to_bson(b, f) {
                                Some(v) => Some(v),
                                None => return Ok(None),
                            },
                        },
                    };
                    groups.add_value(slot, i, v)?;
                }
            } else {
                let Some(d) = whole.or_else(|| decode(b)) else {
                    return Ok(None);
                };
                let key = self.group.id().eval(&d)?;
                if let Some(slot) = groups.slot(&key, true) {
                    groups.add(slot, &d)?;
                }
            }
            if groups.used + raw_bytes > limits.group_bytes {
                return Ok(None);
            }
        }
        Ok(Some(output(accs, groups.finish())))
    }

    /// The raw key of a row: per key path, its time bin, its element or its absence.
    fn raw_key(&self, b: &[u8], found: &[Found], raw: &mut Vec<u8>) {
        raw.clear();
        for ((_, width), f) in self.keys.iter().zip(found) {
            let bin = match (width, f) {
                (Some(w), Found::Value { kind: 0x09, .. }) => bytes(b, *f)
                    .try_into()
                    .ok()
                    .and_then(|ms| bin_start(i64::from_le_bytes(ms), *w)),
                _ => None,
            };
            match (bin, f) {
                (Some(start), _) => {
                    raw.push(b'B');
                    raw.extend_from_slice(&start.to_le_bytes());
                }
                (None, Found::Value { kind, .. }) => {
                    let v = bytes(b, *f);
                    raw.push(*kind);
                    raw.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    raw.extend_from_slice(v);
                }
                (None, _) => raw.push(0),
            }
        }
    }

    /// The `_id` expression's inputs of a row as a document (a binned date as its bin's
    /// start, which truncates as every date of the bin does); `None` when a value does
    /// not convert.
    fn key_document(&self, b: &[u8], found: &[Found]) -> Option<Document> {
        let mut d = Document::new();
        for ((path, width), f) in self.keys.iter().zip(found) {
            if *f == Found::Missing {
                continue;
            }
            let mut v = to_bson(b, *f)?;
            if let (Some(w), Bson::DateTime(t)) = (width, &v) {
                if let Some(start) = bin_start(t.timestamp_millis(), *w) {
                    v = Bson::DateTime(DateTime::from_millis(start));
                }
            }
            set_path(&mut d, path, v);
        }
        Some(d)
    }
}

/// The slot of `path` in `paths`, added when new.
fn slot_of(paths: &mut Vec<String>, path: &str) -> usize {
    match paths.iter().position(|p| p == path) {
        Some(at) => at,
        None => {
            paths.push(path.to_string());
            paths.len() - 1
        }
    }
}

fn decode(b: &[u8]) -> Option<Document> {
    Document::try_from(RawDocument::from_bytes(b).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn docs() -> Vec<Document> {
        let mut out = Vec::new();
        for i in 0..300_i64 {
            let t = DateTime::from_millis(1_451_606_400_000 + i * 754_321);
            let mut d = doc! {"_id": i, "t": t, "v": (i % 7) as f64 * 1.5,
            "tags": {"host": format!("h{}", i % 5), "rack": i % 3}};
            match i % 11 {
                0 => {
                    d.insert("v", i % 4);
                }
                1 => {
                    d.remove("v");
                }
                2 => {
                    d.insert("tags", vec![doc! {"host": "a"}, doc! {"host": "b"}]);
                }
                3 => {
                    d.insert("t", Bson::Null);
                }
                7 => {
                    d.remove("t");
                }
                8 if i > 250 => {
                    d.insert("when", "not a date");
                }
                4 => {
                    d.insert("v", Bson::Null);
                }
                5 => {
                    d.insert("tags", doc! {"host": 1.0, "rack": 1_i64});
                }
                6 => {
                    d.insert("v", format!("s{}", i % 3));
                }
                _ => {}
            }
            out.push(d);
        }
        out
    }

    #[test]
    fn groups_from_bytes_equal_the_document_path() {
        let specs = [
            doc! {"_id": {"h": {"$dateTrunc": {"date": "$t", "unit": "hour"}}, "host": "$tags.host"},
            "avg": {"$avg": "$v"}, "n": {"$count": {}}, "mx": {"$max": "$v"}},
            doc! {"_id": "$tags.host", "s": {"$sum": "$v"}, "f": {"$first": "$t"},
            "l": {"$last": "$v"}, "p": {"$push": "$tags.rack"}, "one": {"$sum": 1}},
            doc! {"_id": null, "mn": {"$min": "$v"}, "set": {"$addToSet": "$tags.host"},
            "sd": {"$stdDevPop": "$v"}},
            doc! {"_id": {"$dateTrunc": {"date": "$t", "unit": "minute", "binSize": 20}},
            "n": {"$sum": 1}},
            doc! {"_id": {"t": "$t", "b": {"$dateTrunc": {"date": "$t", "unit": "day"}}},
            "n": {"$sum": 1}},
            doc! {"_id": {"$concat": ["x", {"$toString": "$tags.rack"}]}, "v": {"$max": "$tags"}},
            // Fails on the first row whose `when` is a string, on both paths alike.
            doc! {"_id": {"$dateTrunc": {"date": "$when", "unit": "hour"}}, "n": {"$sum": 1}},
        ];
        let filters = [
            doc! {},
            doc! {"v": {"$gt": 2}},
            doc! {"tags.host": {"$in": ["h1", "a", 1]}},
            doc! {"$expr": {"$lt": ["$_id", 200]}},
        ];
        let all = docs();
        let bytes: Vec<Vec<u8>> = all
            .iter()
            .map(|d| bson::to_vec(d).expect("encode"))
            .collect();
        for spec in &specs {
            let raw = RawGroup::parse(spec).expect("byte-level form");
            let group = Group::parse(&Bson::Document(spec.clone())).expect("group");
            for f in &filters {
                let filter = Filter::parse(f).expect("filter");
                let want = group.run(all.iter().filter(|d| filter.matches(d)).cloned().collect());
                let got = raw.run(
                    bytes.iter().map(Ok::<_, QueryError>),
                    &filter,
                    &MemLimits::default(),
                );
                match (want, got) {
                    (Ok(w), Ok(Some(g))) => assert_eq!(w, g, "{spec} {f}"),
                    (Err(w), Err(g)) => assert_eq!(w.to_string(), g.to_string(), "{spec} {f}"),
                    (w, g) => panic!("{spec} {f}: {w:?} vs {g:?}"),
                }
            }
        }
    }

    #[test]
    fn groups_reading_variables_or_whole_documents_have_no_byte_form() {
        for spec in [
            doc! {"_id": "$$ROOT.a"},
            doc! {"_id": {"$getField": "a"}},
            doc! {"_id": {"$rand": {}}},
            doc! {"_id": "$a", "x": {"$sum": {"$add": ["$a", 1]}}},
            doc! {"_id": "$a", "x": {"$firstN": {"input": "$a", "n": 2}}},
            doc! {"_id": "$a", "x": {"$top": {"output": "$a", "sortBy": {"b": 1}}}},
        ] {
            assert!(RawGroup::parse(&spec).is_none(), "{spec}");
        }
    }

    #[test]
    fn groups_past_the_memory_limit_give_up() {
        let spec = doc! {"_id": "$_id", "n": {"$sum": 1}};
        let raw = RawGroup::parse(&spec).expect("byte form");
        let bytes: Vec<Vec<u8>> = docs()
            .iter()
            .map(|d| bson::to_vec(d).expect("encode"))
            .collect();
        let limits = MemLimits {
            group_bytes: 2_000,
            ..MemLimits::default()
        };
        let got = raw.run(
            bytes.iter().map(Ok::<_, QueryError>),
            &Filter::match_all(),
            &limits,
        );
        assert!(matches!(got, Ok(None)));
    }
}
