//! The `queryPlanner` section of an explain: the access path chosen for a filter and sort,
//! shared by `explain` and by `aggregate`'s explain of a regular collection.

use super::planned::{parse_hint, parsed_query, plan_stages, plan_with_alternatives, ReadOpts};
use super::query_shape_hash::{plan_cache_key, query_hash};
use super::target::Target;
use super::Request;
use crate::error::CommandError;
use bson::{doc, Bson, Document};
use hourglass_catalog::plan::Plan;
use hourglass_query::filter::Filter;
use hourglass_query::sort::SortSpec;

/// The `queryPlanner` section for reading `spec` (sorted by `sort`) from `coll`, plus the
/// plan when the collection is a regular one that exists.
pub fn query_planner(
    req: &Request,
    coll: &str,
    spec: Option<&Document>,
    sort: Option<&SortSpec>,
    hint: Option<&Bson>,
    (min, max): (Option<&Document>, Option<&Document>),
) -> Result<(Document, Option<Plan>), CommandError> {
    let filter = match spec {
        Some(f) => Filter::parse(f)?,
        None => Filter::match_all(),
    };
    let hint = parse_hint(hint)?;
    let sort_doc = sort.map(|s| {
        s.keys()
            .iter()
            .map(|(k, asc)| (k.clone(), Bson::Int32(if *asc { 1 } else { -1 })))
            .collect::<Document>()
    });
    let sort_spec = sort_doc.as_ref();
    let opts = ReadOpts {
        sort,
        hint: hint.as_ref(),
        after: &[],
        min,
        max,
    };
    let mut rejected = Vec::new();
    let mut indexes = Vec::new();
    let (winning, plan) = match Target::resolve(req, coll) {
        Target::Regular(Some(c)) => {
            indexes = c.indexes().iter().map(|i| i.spec.key.clone()).collect();
            let (plan, others) = plan_with_alternatives(&c, &filter, spec, &opts)?;
            rejected = others.iter().map(|p| plan_stages(p, spec, None)).collect();
            (plan_stages(&plan, spec, None), Some(plan))
        }
        Target::Regular(None) => (doc! {"stage": "EOF"}, None),
        Target::TimeSeries { .. } | Target::Buckets { .. } => {
            let mut d = doc! {"stage": "COLLSCAN"};
            let parsed = parsed_query(spec);
            if !parsed.is_empty() {
                d.insert("filter", parsed);
            }
            d.insert("direction", "forward");
            (d, None)
        }
    };
    Ok((
        doc! {
            "namespace": format!("{}.{coll}", req.db),
            "indexFilterSet": false,
            "parsedQuery": parsed_query(spec),
            "queryHash": query_hash(spec, sort_spec, None),
            "planCacheKey": plan_cache_key(spec, sort_spec, None, &indexes),
            "maxIndexedOrSolutionsReached": false,
            "maxIndexedAndSolutionsReached": false,
            "maxScansToExplodeReached": false,
            "winningPlan": winning,
            "rejectedPlans": rejected,
        },
        plan,
    ))
}
