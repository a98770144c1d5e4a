//! "Last point" queries: `$sort` by (meta paths, then time descending) followed by a
//! `$group` on those meta paths taking `$first` values. The answer is each group's
//! newest measurement, so only the newest buckets of each series are read
//! (`TimeseriesStore::latest_per_series`) instead of sorting every measurement.

use crate::meta::is_meta_path;
use crate::options::TimeseriesOptions;
use bson::{Bson, Document};
use hourglass_query::compare::OrdBson;
use hourglass_query::expr::Expr;
use hourglass_query::QueryError;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
pub struct LastPoint {
    id: Expr,
    accs: Vec<(String, Expr)>,
    time_field: String,
}

/// The meta paths an `_id` spec groups by (`"$p"` or `{k: "$p", ...}`).
fn id_paths(id: &Bson, mf: &str) -> Option<BTreeSet<String>> {
    let path = |v: &Bson| match v {
        Bson::String(s) => s
            .strip_prefix('$')
            .filter(|p| !p.starts_with('$') && is_meta_path(p, mf))
            .map(str::to_string),
        _ => None,
    };
    match id {
        Bson::Document(d) if !d.is_empty() && d.keys().all(|k| !k.starts_with('$')) => {
            d.values().map(path).collect()
        }
        v => path(v).map(|p| BTreeSet::from([p])),
    }
}

impl LastPoint {
    /// Recognizes `[{$sort}, {$group}]` at the start of `stages`.
    pub fn parse(stages: &[Document], o: &TimeseriesOptions) -> Option<LastPoint> {
        let mf = o.meta_field.as_deref()?;
        let sort = stages.first()?.get_document("$sort").ok()?;
        let group = stages.get(1)?.get_document("$group").ok()?;
        if stages[0].len() != 1 || stages[1].len() != 1 {
            return None;
        }
        let (last, last_dir) = sort.iter().last()?;
        if last != &o.time_field || !matches!(last_dir, Bson::Int32(-1) | Bson::Int64(-1)) {
            return None;
        }
        let mut sort_paths = BTreeSet::new();
        for (k, dir) in sort.iter().take(sort.len() - 1) {
            if !is_meta_path(k, mf) || !matches!(dir, Bson::Int32(1 | -1) | Bson::Int64(1 | -1)) {
                return None;
            }
            sort_paths.insert(k.clone());
        }
        let id_spec = group.get("_id")?;
        let paths = id_paths(id_spec, mf)?;
        if !sort_paths.is_empty() && paths != sort_paths {
            return None;
        }
        let mut accs = Vec::new();
        for (name, a) in group.iter().filter(|(k, _)| *k != "_id") {
            let d = a.as_document().filter(|d| d.len() == 1)?;
            let arg = d.get("$first")?;
            accs.push((name.clone(), Expr::parse(arg).ok()?));
        }
        Some(LastPoint {
            id: Expr::parse(id_spec).ok()?,
            accs,
            time_field: o.time_field.clone(),
        })
    }

    /// Groups the newest measurement of each series.
    pub fn run(&self, latest: Vec<Document>) -> Result<Vec<Document>, QueryError> {
        let time = |d: &Document| {
            d.get_datetime(&self.time_field)
                .map(|t| t.timestamp_millis())
                .ok()
        };
        let mut groups: BTreeMap<OrdBson, Document> = BTreeMap::new();
        for doc in latest {
            let key = OrdBson(self.id.eval(&doc)?);
            match groups.get(&key) {
                Some(cur) if time(cur) >= time(&doc) => {}
                _ => {
                    groups.insert(key, doc);
                }
            }
        }
        groups
            .into_iter()
            .map(|(key, doc)| {
                let mut out = Document::new();
                out.insert("_id", key.0);
                for (name, e) in &self.accs {
                    out.insert(name.clone(), e.eval_optional(&doc)?.unwrap_or(Bson::Null));
                }
                Ok(out)
            })
            .collect()
    }
}
