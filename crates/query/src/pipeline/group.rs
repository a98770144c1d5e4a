//! The `$group` stage: group key expression and accumulators (see
//! [`super::accum`]), with memory accounting.

use std::collections::BTreeMap;

use bson::{Bson, Document};

use super::accum::{Acc, AccSpec};
use super::mem::{approx_size, MemLimits};
use crate::compare::OrdBson;
use crate::error::QueryError;
use crate::expr::Expr;

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
    group_stream(input.iter().map(Ok), key, accs, limits, stage)
}

/// [`group_by`] over documents as they come (a scan, earlier streaming stages): only the
/// groups are held, never the input.
pub(crate) fn group_stream<D, E>(
    input: impl Iterator<Item = Result<D, E>>,
    key: impl Fn(&Document) -> Result<Bson, QueryError>,
    accs: &[(String, AccSpec)],
    limits: &MemLimits,
    stage: &str,
) -> Result<Vec<(Bson, Vec<Bson>)>, E>
where
    D: std::borrow::Borrow<Document>,
    E: From<QueryError>,
{
    let mut index: BTreeMap<OrdBson, usize> = BTreeMap::new();
    let mut groups: Vec<(Bson, Document, Vec<Acc>)> = Vec::new();
    let mut used: u64 = 0;
    for doc in input {
        crate::interrupt::check()?;
        let doc = doc?;
        let doc = doc.borrow();
        let k = key(doc)?;
        let slot = match index.get(&OrdBson(k.clone())) {
            Some(i) => *i,
            None => {
                let mut n_doc = Document::new();
                n_doc.insert("_id", k.clone());
                // The key twice (the group and the index), the `_id` document, the
                // accumulator states and the index's tree slot, as allocated.
                used += 2 * approx_size(&k)
                    + super::mem::doc_size(&n_doc)
                    + (std::mem::size_of::<(Bson, Document, Vec<Acc>)>()
                        + accs.len() * std::mem::size_of::<Acc>()
                        + 64) as u64;
                groups.push((
                    k.clone(),
                    n_doc,
                    accs.iter().map(|(_, a)| a.start()).collect(),
                ));
                index.insert(OrdBson(k), groups.len() - 1);
                groups.len() - 1
            }
        };
        let Some((_, n_doc, states)) = groups.get_mut(slot) else {
            continue;
        };
        for ((_, spec), state) in accs.iter().zip(states.iter_mut()) {
            let before = state.bytes;
            spec.add(state, doc, n_doc)?;
            used = (used + state.bytes).saturating_sub(before);
        }
        limits.check_group(stage, used)?;
    }
    Ok(groups
        .into_iter()
        .map(|(key, _, states)| {
            let vals = accs
                .iter()
                .zip(&states)
                .map(|((_, spec), st)| spec.finish(st))
                .collect();
            (key, vals)
        })
        .collect())
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
        self.run_limited(input, &MemLimits::default())
    }

    /// Runs the grouping; groups come out in first-seen order.
    pub fn run_limited(
        &self,
        input: Vec<Document>,
        limits: &MemLimits,
    ) -> Result<Vec<Document>, QueryError> {
        self.run_stream(input.into_iter().map(Ok), limits)
    }

    /// Groups documents as they come, holding only the groups.
    pub fn run_stream<E: From<QueryError>>(
        &self,
        input: impl Iterator<Item = Result<Document, E>>,
        limits: &MemLimits,
    ) -> Result<Vec<Document>, E> {
        let groups = group_stream(input, |d| self.id.eval(d), &self.accs, limits, "$group")?;
        Ok(groups
            .into_iter()
            .map(|(key, vals)| {
                let mut out = Document::new();
                out.insert("_id", key);
                for ((name, _), v) in self.accs.iter().zip(vals) {
                    out.insert(name.clone(), v);
                }
                out
            })
            .collect())
    }
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
}
