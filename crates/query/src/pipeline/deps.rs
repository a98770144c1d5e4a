//! Which fields of its input documents a pipeline can observe, so that a bucket scan
//! decodes only those columns (top-level fields) and a collection scan converts only those
//! parts of each stored document (dotted paths). Conservative: anything not understood
//! means "every field".

use crate::projection::Projection;
use bson::{Bson, Document};
use std::collections::BTreeSet;

/// The top-level fields a stage sequence reads, or `None` when it may read any field.
pub fn pipeline_fields(stages: &[Document]) -> Option<BTreeSet<String>> {
    pipeline_paths(stages).map(|paths| paths.iter().map(|p| top(p)).collect())
}

/// The paths (`a`, `a.b`) a stage sequence reads, or `None` when it may read any field: a
/// path reads its whole value, and nothing else of the document above it.
pub fn pipeline_paths(stages: &[Document]) -> Option<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for stage in stages {
        let (name, arg) = stage.iter().next()?;
        match name.as_str() {
            "$match" => filter_paths(arg.as_document()?, &mut out)?,
            "$sort" => out.extend(arg.as_document()?.keys().cloned()),
            "$limit" | "$skip" | "$unset" => {}
            "$addFields" | "$set" | "$unwind" => expr_paths(arg, &mut out)?,
            "$count" => return Some(out),
            "$group" | "$replaceRoot" | "$replaceWith" | "$sortByCount" | "$bucket"
            | "$bucketAuto" => {
                expr_paths(arg, &mut out)?;
                return Some(out);
            }
            "$project" => {
                let spec = arg.as_document()?;
                // The query layer's own parse decides the mode: `{_id: 0}` alone, or any
                // exclusion, passes every other field through.
                let projection = Projection::parse(spec).ok()?;
                if !projection.is_inclusion() {
                    return None;
                }
                if !projection.excludes_id() {
                    out.insert("_id".to_string());
                }
                for (k, v) in spec
                    .iter()
                    .filter(|(k, _)| *k != "_id" || !projection.excludes_id())
                {
                    out.insert(k.clone());
                    expr_paths(v, &mut out)?;
                }
                return Some(out);
            }
            _ => return None,
        }
    }
    None
}

fn top(path: &str) -> String {
    path.split('.').next().unwrap_or(path).to_string()
}

/// Top-level fields an expression references (`"$a.b"` reads `a`); `None` when it reads
/// everything (`$$ROOT`, `$$CURRENT`).
pub fn expr_fields(v: &Bson, out: &mut BTreeSet<String>) -> Option<()> {
    let mut paths = BTreeSet::new();
    expr_paths(v, &mut paths)?;
    out.extend(paths.iter().map(|p| top(p)));
    Some(())
}

/// Paths an expression references (`"$a.b"` reads `a.b`).
fn expr_paths(v: &Bson, out: &mut BTreeSet<String>) -> Option<()> {
    match v {
        Bson::String(s) => {
            if let Some(var) = s.strip_prefix("$$") {
                let name = var.split('.').next().unwrap_or(var);
                if name == "ROOT" || name == "CURRENT" {
                    return None;
                }
            } else if let Some(path) = s.strip_prefix('$') {
                out.insert(path.to_string());
            }
            Some(())
        }
        Bson::Document(d) => {
            if d.contains_key("$literal") {
                return Some(());
            }
            // Field names given as plain strings, read from `$$CURRENT` by default.
            if ["$getField", "$setField", "$unsetField"]
                .iter()
                .any(|op| d.contains_key(*op))
            {
                return None;
            }
            // `$top`/`$bottom`(`N`) order documents by the fields `sortBy` names (in
            // `$sortArray`, fields of the elements: reading them too is harmless).
            if let Ok(sort_by) = d.get_document("sortBy") {
                out.extend(sort_by.keys().cloned());
            }
            d.values().try_for_each(|x| expr_paths(x, out))
        }
        Bson::Array(a) => a.iter().try_for_each(|x| expr_paths(x, out)),
        _ => Some(()),
    }
}

/// Paths a query filter reads.
fn filter_paths(filter: &Document, out: &mut BTreeSet<String>) -> Option<()> {
    for (k, v) in filter {
        match k.as_str() {
            "$and" | "$or" | "$nor" => {
                for item in v.as_array()? {
                    filter_paths(item.as_document()?, out)?;
                }
            }
            "$expr" => expr_paths(v, out)?,
            "$comment" => {}
            k if k.starts_with('$') => return None,
            k => {
                out.insert(k.to_string());
            }
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn fields(stages: Vec<Document>) -> Option<Vec<String>> {
        pipeline_fields(&stages).map(|s| s.into_iter().collect())
    }

    #[test]
    fn stops_at_stages_that_replace_the_document() {
        let f = fields(vec![
            doc! {"$match": {"v": {"$gt": 1}, "$or": [{"m.a": 1}]}},
            doc! {"$group": {"_id": {"$dateTrunc": {"date": "$t", "unit": "hour"}}, "x": {"$max": "$w"}}},
            doc! {"$project": {"everything": "$$ROOT"}},
        ]);
        assert_eq!(f.unwrap(), vec!["m", "t", "v", "w"]);
        assert_eq!(
            fields(vec![doc! {"$count": "n"}]).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            fields(vec![doc! {"$project": {"a": 1, "b": "$c.d"}}]).unwrap(),
            vec!["_id", "a", "b", "c"]
        );
    }

    #[test]
    fn paths_keep_the_subfields_read() {
        let paths = pipeline_paths(&[
            doc! {"$match": {"time": {"$gte": 1}, "tags.region": "x"}},
            doc! {"$group": {"_id": {"h": "$tags.hostname", "t": "$time"}, "a": {"$avg": "$usage"}}},
        ]);
        let want = ["tags.hostname", "tags.region", "time", "usage"];
        assert_eq!(paths.unwrap().into_iter().collect::<Vec<_>>(), want);
    }

    #[test]
    fn top_and_bottom_read_the_fields_they_sort_by() {
        let f = fields(vec![doc! {"$group": {"_id": "$g",
        "t": {"$top": {"sortBy": {"k": -1, "j.x": 1}, "output": "$v"}}}}]);
        assert_eq!(f.unwrap(), vec!["g", "j", "k", "v"]);
    }

    #[test]
    fn anything_unclear_reads_every_field() {
        assert!(
            fields(vec![doc! {"$match": {"a": 1}}]).is_none(),
            "the client sees whole documents"
        );
        assert!(fields(vec![doc! {"$project": {"a": 0}}]).is_none());
        assert!(
            fields(vec![doc! {"$project": {"_id": 0}}]).is_none(),
            "excluding only _id keeps every other field"
        );
        assert!(fields(vec![doc! {"$project": {"a": {"b": 0}}}]).is_none());
        assert_eq!(
            fields(vec![doc! {"$project": {"_id": 0, "a.b": 1}}]).unwrap(),
            vec!["a"]
        );
        assert!(fields(vec![doc! {"$group": {"_id": "$$ROOT"}}]).is_none());
        assert!(
            fields(vec![doc! {"$project": {"x": {"$getField": "b"}}}]).is_none(),
            "$getField names its field without a $"
        );
        assert!(fields(vec![doc! {"$lookup": {}}, doc! {"$count": "n"}]).is_none());
        assert!(fields(vec![doc! {"$match": {"$where": "1"}}, doc! {"$count": "n"}]).is_none());
    }
}
