//! The `$group` stage: group key expression and accumulators (see
//! [`super::accum`]), with memory accounting.

use std::collections::{BTreeMap, HashMap};

use bson::{Bson, Document};

use super::accum::{Acc, AccSpec};
use super::mem::{approx_size, MemLimits};
use super::spill::{KeyOrder, Keys, Sorter};
use crate::compare::{compare_optional, OrdBson};
use crate::error::QueryError;
use crate::expr::Expr;
use std::sync::Arc;

/// A parsed `$group` stage.
#[derive(Debug, Clone)]
pub struct Group {
    id: Expr,
    accs: Vec<(String, AccSpec)>,
}

/// Parses `{name: {<acc>: <arg>}, ...}` accumulator fields (the `_id` key is skipped).
pub(crate) fn parse_accumulators(d: &Document) -> Result<Vec<(String, AccSpec)>, QueryError> {
    let mut accs = Vec::new();
    for (k, v) in d {
        if k == "_id" {
            continue;
        }
        if k.contains('.') {
            return Err(QueryError::loc(
                40235,
                format!("The field name '{k}' cannot contain '.'"),
            ));
        }
        if k.starts_with('$') {
            return Err(QueryError::loc(
                40236,
                format!("The field name '{k}' cannot be an operator name"),
            ));
        }
        let Bson::Document(acc) = v else {
            return Err(QueryError::loc(
                40234,
                format!("The field '{k}' must be an accumulator object"),
            ));
        };
        if acc.len() != 1 {
            return Err(QueryError::loc(
                40238,
                format!("The field '{k}' must specify one accumulator"),
            ));
        }
        let (name, arg) = acc
            .iter()
            .next()
            .ok_or_else(|| QueryError::loc(40238, "empty accumulator"))?;
        accs.push((k.clone(), AccSpec::parse(name, arg)?));
    }
    Ok(accs)
}

/// Groups `input` by `key`; groups come out in first-seen order as
/// `(key, finished accumulator values)`.
pub(crate) fn group_by(
    input: &[Document],
    key: impl Fn(&Document) -> Result<Bson, QueryError>,
    accs: &[(String, AccSpec)],
    limits: &MemLimits,
    stage: &str,
) -> Result<Vec<(Bson, Vec<Bson>)>, QueryError> {
    group_stream(input.iter().map(Ok), key, accs, limits, None, stage)
}

/// The groups being built, in first-seen order.
/// Where each group's key is: by key string (equal exactly when MongoDB's comparison
/// says so), or by comparison under a collation, which equates strings its own way.
enum KeyIndex {
    Hashed(HashMap<Vec<u8>, usize>),
    Compared(BTreeMap<OrdBson, usize>),
}

impl KeyIndex {
    fn new() -> KeyIndex {
        match crate::collation::active() {
            true => KeyIndex::Compared(BTreeMap::new()),
            false => KeyIndex::Hashed(HashMap::new()),
        }
    }

    fn get(&self, k: &Bson) -> Option<usize> {
        match self {
            KeyIndex::Hashed(m) => m.get(&crate::keystring::group_key(k)).copied(),
            KeyIndex::Compared(m) => m.get(&OrdBson(k.clone())).copied(),
        }
    }

    fn insert(&mut self, k: &Bson, slot: usize) {
        match self {
            KeyIndex::Hashed(m) => {
                m.insert(crate::keystring::group_key(k), slot);
            }
            KeyIndex::Compared(m) => {
                m.insert(OrdBson(k.clone()), slot);
            }
        }
    }
}

pub(super) struct Groups<'s> {
    accs: &'s [(String, AccSpec)],
    index: KeyIndex,
    groups: Vec<(Bson, Document, Vec<Acc>)>,
    /// Approximate bytes held.
    pub(super) used: u64,
}

impl<'s> Groups<'s> {
    pub(super) fn new(accs: &'s [(String, AccSpec)]) -> Groups<'s> {
        Groups {
            accs,
            index: KeyIndex::new(),
            groups: Vec::new(),
            used: 0,
        }
    }

    /// The slot of the group of `k`, created when `create`.
    pub(super) fn slot(&mut self, k: &Bson, create: bool) -> Option<usize> {
        if let Some(i) = self.index.get(k) {
            return Some(i);
        }
        if !create {
            return None;
        }
        let mut n_doc = Document::new();
        n_doc.insert("_id", k.clone());
        // The key twice (the group and the index), the `_id` document, the accumulator
        // states and the index's tree slot, as allocated.
        self.used += 2 * approx_size(k)
            + super::mem::doc_size(&n_doc)
            + (std::mem::size_of::<(Bson, Document, Vec<Acc>)>()
                + self.accs.len() * std::mem::size_of::<Acc>()
                + 64) as u64;
        let states = self.accs.iter().map(|(_, a)| a.start()).collect();
        self.groups.push((k.clone(), n_doc, states));
        self.index.insert(k, self.groups.len() - 1);
        Some(self.groups.len() - 1)
    }

    /// Adds `doc` to the group in `slot`.
    pub(super) fn add(&mut self, slot: usize, doc: &Document) -> Result<(), QueryError> {
        let Some((_, n_doc, states)) = self.groups.get_mut(slot) else {
            return Ok(());
        };
        for ((_, spec), state) in self.accs.iter().zip(states.iter_mut()) {
            let before = state.bytes;
            spec.add(state, doc, n_doc)?;
            self.used = (self.used + state.bytes).saturating_sub(before);
        }
        Ok(())
    }

    pub(super) fn len(&self) -> usize {
        self.groups.len()
    }

    /// Adds `v`, the input of accumulator `acc` for one document, to the group in
    /// `slot` (accumulators that read their input alone: [`AccSpec::takes_values`]).
    pub(super) fn add_value(
        &mut self,
        slot: usize,
        acc: usize,
        v: Option<Bson>,
    ) -> Result<(), QueryError> {
        let (Some((_, _, states)), Some((_, spec))) =
            (self.groups.get_mut(slot), self.accs.get(acc))
        else {
            return Ok(());
        };
        let Some(state) = states.get_mut(acc) else {
            return Ok(());
        };
        let before = state.bytes;
        spec.add_value(state, v)?;
        self.used = (self.used + state.bytes).saturating_sub(before);
        Ok(())
    }

    pub(super) fn finish(self) -> Vec<(Bson, Vec<Bson>)> {
        let accs = self.accs;
        self.groups
            .into_iter()
            .map(|(key, _, states)| {
                let vals = accs
                    .iter()
                    .zip(&states)
                    .map(|((_, spec), st)| spec.finish(st))
                    .collect();
                (key, vals)
            })
            .collect()
    }
}

/// [`group_by`] over documents as they come (a scan, earlier streaming stages): only the
/// groups are held, never the input.
///
/// When the groups pass the memory limit and the command may use the disk (`spill_dir`),
/// the groups held so far take no new key: every later document goes, with its key, to an
/// external sort ([`super::spill`]). At the end the sorted documents are read back in key
/// order (equal keys in input order): those of a held group are added to it, after the
/// documents it already took, and the others form their groups one key at a time. Held
/// groups come out first, in first-seen order, then the others in key order.
pub(crate) fn group_stream<D, E>(
    input: impl Iterator<Item = Result<D, E>>,
    key: impl Fn(&Document) -> Result<Bson, QueryError>,
    accs: &[(String, AccSpec)],
    limits: &MemLimits,
    spill_dir: Option<&std::path::Path>,
    stage: &str,
) -> Result<Vec<(Bson, Vec<Bson>)>, E>
where
    D: std::borrow::Borrow<Document>,
    E: From<QueryError>,
{
    let mut groups = Groups::new(accs);
    let mut spilled: Option<Sorter> = None;
    for doc in input {
        crate::interrupt::check()?;
        let doc = doc?;
        let doc = doc.borrow();
        let k = key(doc)?;
        if let Some(sorter) = &mut spilled {
            sorter.push(vec![Some(k)], doc.clone())?;
            continue;
        }
        if let Some(slot) = groups.slot(&k, true) {
            groups.add(slot, doc)?;
        }
        if groups.used <= limits.group_bytes {
            continue;
        }
        match spill_dir.filter(|_| limits.allow_disk_use) {
            Some(dir) => {
                let by_key: Arc<KeyOrder> =
                    Arc::new(|a: &Keys, b: &Keys| compare_optional(&a[0], &b[0]));
                spilled = Some(Sorter::new(
                    by_key,
                    Some((dir.to_path_buf(), limits.group_bytes)),
                ));
            }
            None => limits.check_group(stage, groups.used)?,
        }
    }
    let Some(sorter) = spilled else {
        return Ok(groups.finish());
    };
    // Documents of keys no held group has, one key at a time.
    let mut more = Vec::new();
    let mut current: Option<Groups> = None;
    for entry in sorter.finish()? {
        crate::interrupt::check()?;
        let (keys, doc) = entry?;
        let k = keys.into_iter().next().flatten().unwrap_or(Bson::Null);
        if let Some(slot) = groups.slot(&k, false) {
            groups.add(slot, &doc)?;
            limits.check_group(stage, groups.used)?;
            continue;
        }
        let same = current.as_ref().is_some_and(|g| g.index.get(&k).is_some());
        if !same {
            more.extend(current.take().map(Groups::finish).into_iter().flatten());
        }
        let g = current.get_or_insert_with(|| Groups::new(accs));
        if let Some(slot) = g.slot(&k, true) {
            g.add(slot, &doc)?;
        }
        limits.check_group(stage, groups.used + g.used)?;
    }
    more.extend(current.map(Groups::finish).into_iter().flatten());
    let mut out = groups.finish();
    out.extend(more);
    Ok(out)
}

impl Group {
    /// Parses the `$group` specification.
    pub fn parse(spec: &Bson) -> Result<Group, QueryError> {
        let Bson::Document(d) = spec else {
            return Err(QueryError::loc(
                15947,
                "a group's fields must be specified in an object",
            ));
        };
        let id = d
            .get("_id")
            .ok_or_else(|| QueryError::loc(15955, "a group specification must include an _id"))?;
        Ok(Group {
            id: Expr::parse(id)?,
            accs: parse_accumulators(d)?,
        })
    }

    /// Runs the grouping over `input` with the default memory limit.
    pub fn run(&self, input: Vec<Document>) -> Result<Vec<Document>, QueryError> {
        self.run_stream(input.into_iter().map(Ok), &MemLimits::default(), None)
    }

    /// Groups documents as they come, holding only the groups (and spilling past the
    /// limit to `spill_dir`, see [`group_stream`]); groups come out in first-seen order.
    pub fn run_stream<E: From<QueryError>>(
        &self,
        input: impl Iterator<Item = Result<Document, E>>,
        limits: &MemLimits,
        spill_dir: Option<&std::path::Path>,
    ) -> Result<Vec<Document>, E> {
        let key = |d: &Document| self.id.eval(d);
        let groups = group_stream(input, key, &self.accs, limits, spill_dir, "$group")?;
        Ok(output(&self.accs, groups))
    }

    pub(super) fn id(&self) -> &Expr {
        &self.id
    }

    pub(super) fn accumulators(&self) -> &[(String, AccSpec)] {
        &self.accs
    }
}

/// The output documents of groups: `_id`, then each accumulator's value.
pub(super) fn output(accs: &[(String, AccSpec)], groups: Vec<(Bson, Vec<Bson>)>) -> Vec<Document> {
    groups
        .into_iter()
        .map(|(key, vals)| {
            let mut out = Document::new();
            out.insert("_id", key);
            for ((name, _), v) in accs.iter().zip(vals) {
                out.insert(name.clone(), v);
            }
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn run(spec: Document, input: Vec<Document>) -> Vec<Document> {
        Group::parse(&Bson::Document(spec))
            .unwrap()
            .run(input)
            .unwrap()
    }

    #[test]
    fn groups_past_the_limit_spill_and_equal_the_groups_held_in_memory() {
        let spec = Group::parse(&Bson::Document(doc! {"_id": "$k",
        "all": {"$push": "$i"}, "f": {"$first": "$i"}, "l": {"$last": "$i"},
        "s": {"$sum": "$i"}, "n": {"$count": {}}}))
        .unwrap();
        // Keys 1 and 1.0 are one group; some keys appear only after the spill begins.
        let input: Vec<Document> = (0..3_000)
            .map(|i| match i % 7 {
                0 => doc! {"k": 1.0, "i": i},
                _ => doc! {"k": (i * 31) % (50 + i / 100), "i": i},
            })
            .collect();
        let by_id = |mut v: Vec<Document>| {
            v.sort_by(|a, b| {
                crate::compare::compare_values(a.get("_id").unwrap(), b.get("_id").unwrap())
            });
            v
        };
        let whole = spec.run(input.clone()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let tight = MemLimits {
            group_bytes: 20_000,
            sort_bytes: 20_000,
            allow_disk_use: true,
        };
        let spills_before = super::super::spill::SORT_METRICS
            .spill_to_disk
            .load(std::sync::atomic::Ordering::Relaxed);
        let spilled = spec
            .run_stream(
                input.clone().into_iter().map(Ok::<_, QueryError>),
                &tight,
                Some(dir.path()),
            )
            .unwrap();
        let spills_after = super::super::spill::SORT_METRICS
            .spill_to_disk
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            spills_after > spills_before + 3,
            "{spills_before} -> {spills_after}"
        );
        assert_eq!(by_id(spilled), by_id(whole));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Without the disk the same limit fails the stage.
        let no_disk = MemLimits {
            allow_disk_use: false,
            ..tight
        };
        let e = spec
            .run_stream(
                input.into_iter().map(Ok::<_, QueryError>),
                &no_disk,
                Some(dir.path()),
            )
            .unwrap_err();
        assert_eq!(e.code(), 292);
    }

    fn sample() -> Vec<Document> {
        vec![
            doc! {"k": "a", "v": 1},
            doc! {"k": "b", "v": 2.5},
            doc! {"k": "a", "v": 3},
            doc! {"k": "a", "v": "x"},
            doc! {"k": "b"},
        ]
    }

    #[test]
    fn sum_avg_min_max_count_per_group_in_first_seen_order() {
        let out = run(
            doc! {"_id": "$k", "s": {"$sum": "$v"}, "a": {"$avg": "$v"}, "mn": {"$min": "$v"}, "mx": {"$max": "$v"}, "c": {"$count": {}}, "n": {"$sum": 1}},
            sample(),
        );
        assert_eq!(
            out[0],
            doc! {"_id": "a", "s": 4, "a": 2.0, "mn": 1, "mx": "x", "c": 3, "n": 3}
        );
        assert_eq!(
            out[1],
            doc! {"_id": "b", "s": 2.5, "a": 2.5, "mn": 2.5, "mx": 2.5, "c": 2, "n": 2}
        );
    }

    #[test]
    fn first_last_push_add_to_set() {
        let out = run(
            doc! {"_id": "$k", "f": {"$first": "$v"}, "l": {"$last": "$v"}, "p": {"$push": "$v"}, "s": {"$addToSet": "$k"}},
            sample(),
        );
        assert_eq!(
            out[1],
            doc! {"_id": "b", "f": 2.5, "l": null, "p": [2.5], "s": ["b"]}
        );
        assert_eq!(out[0].get_array("p").unwrap().len(), 3);
    }

    #[test]
    fn null_id_groups_everything_and_numeric_keys_unify() {
        let out = run(doc! {"_id": null, "n": {"$sum": 1}}, sample());
        assert_eq!(out, vec![doc! {"_id": null, "n": 5}]);
        let out = run(
            doc! {"_id": "$x", "n": {"$sum": 1}},
            vec![doc! {"x": 1}, doc! {"x": 1.0}],
        );
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn document_ids_group_by_computed_keys() {
        let out = run(doc! {"_id": {"k": "$k"}, "n": {"$sum": 1}}, sample());
        assert_eq!(out[0], doc! {"_id": {"k": "a"}, "n": 3});
    }

    #[test]
    fn invalid_group_specs_are_rejected() {
        let err = |s: Document| Group::parse(&Bson::Document(s)).unwrap_err().code();
        assert_eq!(err(doc! {"n": {"$sum": 1}}), 15955);
        assert_eq!(err(doc! {"_id": null, "n": {"$bogus": 1}}), 15952);
        assert_eq!(err(doc! {"_id": null, "n": 1}), 40234);
        assert_eq!(err(doc! {"_id": null, "a.b": {"$sum": 1}}), 40235);
    }

    #[test]
    fn keys_equal_under_mongodb_comparison_form_one_group() {
        let keys = vec![
            Bson::Int32(1),
            Bson::Double(1.0),
            Bson::Int64(1),
            Bson::Document(doc! {"a": 1}),
            Bson::Document(doc! {"a": 1.0}),
            Bson::Double(-0.0),
            Bson::Int32(0),
            Bson::String("x".into()),
            Bson::Double(1.0),
        ];
        let input: Vec<Document> = keys.into_iter().map(|k| doc! {"k": k}).collect();
        let out = run(doc! {"_id": "$k", "n": {"$sum": 1}}, input);
        let counts: Vec<(Bson, i32)> = out
            .into_iter()
            .map(|g| (g.get("_id").cloned().unwrap(), g.get_i32("n").unwrap()))
            .collect();
        assert_eq!(
            counts,
            vec![
                (Bson::Int32(1), 4),
                (Bson::Document(doc! {"a": 1}), 2),
                (Bson::Double(-0.0), 2),
                (Bson::String("x".into()), 1),
            ]
        );
    }
}
