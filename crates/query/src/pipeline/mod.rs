//! Aggregation pipelines: stage parsing with MongoDB's error codes and
//! in-memory execution over a vector of documents. Stages: `$match`,
//! `$project`, `$addFields`/`$set`, `$unset`, `$sort`, `$limit`, `$skip`,
//! `$count`, `$group`, `$unwind`, `$replaceRoot`/`$replaceWith`,
//! `$sortByCount`, `$bucket`, `$bucketAuto`, `$facet`, `$sample`, `$densify`,
//! `$fill`, `$setWindowFields`, `$redact`, `$documents`, and through a
//! [`PipelineContext`] `$lookup`, `$unionWith`, `$out` and `$merge`.

mod accum;
mod bucket;
mod context;
mod densify;
pub mod deps;
mod geo_near;
pub use geo_near::GeoNear;
mod granularity;
mod graph_lookup;
mod group;
mod lookup;
mod lookup_spec;
pub mod mem;
pub mod raw_group;
pub mod spill;
pub mod time_bins;

/// Documents a pipeline gives as they are read.
pub type DocStream = Box<dyn Iterator<Item = Result<Document, QueryError>> + Send>;
mod unwind;
mod window;
mod window_calc;
mod window_ema;
mod window_shift;

use bson::{Bson, Document};

use crate::error::QueryError;
use crate::expr::Expr;
use crate::filter::Filter;
use crate::projection::Projection;
use crate::sort::SortSpec;
pub use accum::{AccKind, AccSpec};
pub use bucket::{Bucket, BucketAuto};
pub use context::{PipelineContext, RunOptions};
pub use densify::{Densify, Fill};
pub use group::Group;
pub use lookup::{Lookup, Merge, Out, UnionWith};
pub use mem::MemLimits;
pub use unwind::Unwind;
pub use window::SetWindowFields;

/// A parsed pipeline.
#[derive(Debug, Clone)]
pub struct Pipeline {
    stages: Vec<Stage>,
}

/// One pipeline stage.
#[derive(Debug, Clone)]
pub enum Stage {
    /// `$match`
    Match(Filter),
    /// `$project` / `$unset`
    Project(Projection),
    /// `$addFields` / `$set`
    AddFields(Vec<(Vec<String>, Expr)>),
    /// `$sort`
    Sort(SortSpec),
    /// `$limit`
    Limit(u64),
    /// `$skip`
    Skip(u64),
    /// `$count`
    Count(String),
    /// `$group`
    Group(Group),
    /// `$unwind`
    Unwind(Unwind),
    /// `$replaceRoot` / `$replaceWith`
    ReplaceRoot(Expr),
    /// `$sortByCount`
    SortByCount(Group),
    /// `$bucket`
    Bucket(Bucket),
    /// `$bucketAuto`
    BucketAuto(BucketAuto),
    /// `$facet`
    Facet(Vec<(String, Pipeline)>),
    /// `$sample`
    Sample(u64),
    /// `$densify`
    Densify(Densify),
    /// `$fill`
    Fill(Fill),
    /// `$setWindowFields`
    SetWindowFields(SetWindowFields),
    /// `$redact`
    Redact(Expr),
    /// `$documents`
    Documents(Expr),
    /// `$geoNear`
    GeoNear(Box<geo_near::GeoNear>),
    /// `$lookup`
    Lookup(Box<Lookup>),
    /// `$graphLookup`
    GraphLookup(Box<graph_lookup::GraphLookup>),
    /// `$unionWith`
    UnionWith(UnionWith),
    /// `$out`
    Out(Out),
    /// `$merge`
    Merge(Box<Merge>),
}

const UPDATE_STAGES: &[&str] = &[
    "$addFields",
    "$set",
    "$project",
    "$unset",
    "$replaceRoot",
    "$replaceWith",
];

/// MongoDB's `internalPipelineLengthLimit` check, made before any stage is parsed.
fn check_length(n: usize) -> Result<(), QueryError> {
    let max = crate::limits::MAX_PIPELINE_LENGTH;
    if n > max {
        return Err(QueryError::loc(
            7749501,
            format!("Pipeline length must be no longer than {max} stages."),
        ));
    }
    Ok(())
}

impl Pipeline {
    /// Parses a list of stage documents.
    pub fn parse(stages: &[Document]) -> Result<Pipeline, QueryError> {
        check_length(stages.len())?;
        // MongoDB checks $geoNear's place (after optimizing the pipeline) before anything
        // else of it.
        if stages.iter().skip(1).any(|s| s.contains_key("$geoNear")) {
            return Err(QueryError::loc(
                40603,
                "$geoNear was not the first stage in the pipeline after optimization",
            ));
        }
        let parsed: Vec<Stage> = stages.iter().map(parse_stage).collect::<Result<_, _>>()?;
        for (i, st) in parsed.iter().enumerate() {
            let name = match st {
                Stage::Out(_) => "$out",
                Stage::Merge(_) => "$merge",
                Stage::Documents(_) if i != 0 => {
                    return Err(QueryError::loc(
                        40602,
                        "$documents is only valid as the first stage in a pipeline",
                    ))
                }
                _ => continue,
            };
            if i + 1 != parsed.len() {
                return Err(QueryError::loc(
                    40601,
                    format!("{name} can only be the final stage in the pipeline"),
                ));
            }
        }
        Ok(Pipeline { stages: parsed })
    }

    /// True if the pipeline writes to a collection (`$out` / `$merge`).
    pub fn writes(&self) -> bool {
        matches!(self.stages.last(), Some(Stage::Out(_) | Stage::Merge(_)))
    }

    /// True if the pipeline starts with `$documents` (it needs no input collection).
    pub fn starts_with_documents(&self) -> bool {
        matches!(self.stages.first(), Some(Stage::Documents(_)))
    }

    /// Parses a pipeline used as an update (only document-shaping stages).
    pub fn parse_for_update(stages: &[Document]) -> Result<Pipeline, QueryError> {
        check_length(stages.len())?;
        for s in stages {
            if let Some(name) = s.keys().next() {
                if s.len() == 1 && !UPDATE_STAGES.contains(&name.as_str()) {
                    return Err(QueryError::InvalidOptions(format!(
                        "{name} is not allowed to be used within an update"
                    )));
                }
            }
        }
        Pipeline::parse(stages)
    }

    /// The parsed stages.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The leading `$match` filter, if the pipeline starts with one. `run`
    /// still applies it, so pushing it down is purely an optimisation.
    pub fn leading_match(&self) -> Option<&Filter> {
        match self.stages.first() {
            Some(Stage::Match(f)) => Some(f),
            Some(Stage::GeoNear(g)) => g.query(),
            _ => None,
        }
    }

    /// Runs the pipeline over `input` with default options (no collection
    /// access, 100 MB per-stage memory limit).
    pub fn run(&self, input: Vec<Document>) -> Result<Vec<Document>, QueryError> {
        self.run_with(input, &RunOptions::default())
    }

    /// Runs the pipeline over documents as a scan yields them: the leading per-document
    /// stages (`$match`, `$project`, `$addFields`/`$set`, `$skip`, `$limit`) and a `$group`
    /// or `$sort` right after them consume the stream, so the input is never held whole
    /// (MongoDB's streaming stages); the stages after that run as [`Pipeline::run_with`]
    /// does. A `$sort` that ends the pipeline gives its output as it is read (from its
    /// spilled runs, when it spilled).
    pub fn run_stream<E: From<QueryError>>(
        &self,
        input: impl Iterator<Item = Result<Document, E>>,
        opts: &RunOptions<'_>,
    ) -> Result<DocStream, E> {
        let streaming = self
            .stages
            .iter()
            .take_while(|s| {
                matches!(
                    s,
                    Stage::Match(_)
                        | Stage::Project(_)
                        | Stage::AddFields(_)
                        | Stage::Skip(_)
                        | Stage::Limit(_)
                )
            })
            .count();
        let mut it: Box<dyn Iterator<Item = Result<Document, E>> + '_> = Box::new(input);
        for stage in &self.stages[..streaming] {
            it = match stage {
                Stage::Skip(n) => {
                    let mut left = *n;
                    Box::new(it.filter(move |r| match r {
                        Ok(_) if left > 0 => {
                            left -= 1;
                            false
                        }
                        _ => true,
                    }))
                }
                Stage::Limit(k) => Box::new(it.take(usize::try_from(*k).unwrap_or(usize::MAX))),
                _ => Box::new(it.filter_map(move |r| match r {
                    Ok(d) => stream_one(stage, d).map_err(E::from).transpose(),
                    Err(e) => Some(Err(e)),
                })),
            };
        }
        let last = streaming + 1 == self.stages.len();
        let (docs, next) = match (self.stages.get(streaming), self.stages.get(streaming + 1)) {
            (Some(Stage::Group(g)), _) => (
                g.run_stream(it, &opts.limits, opts.spill_dir)?,
                streaming + 1,
            ),
            // ($sort + $limit is a top-k, kept by `run_from`.)
            (Some(Stage::Sort(spec)), next) if !matches!(next, Some(Stage::Limit(_))) => {
                let sorted = spill::sort_documents(spec, it, &opts.limits, opts.spill_dir)?;
                if last {
                    return Ok(Box::new(sorted));
                }
                (sorted.collect::<Result<_, QueryError>>()?, streaming + 1)
            }
            _ => (it.collect::<Result<Vec<_>, E>>()?, streaming),
        };
        Ok(Box::new(
            self.run_from(next, docs, opts)?.into_iter().map(Ok),
        ))
    }

    /// Runs the pipeline over `input` with `opts`.
    pub fn run_with(
        &self,
        input: Vec<Document>,
        opts: &RunOptions<'_>,
    ) -> Result<Vec<Document>, QueryError> {
        self.run_from(0, input, opts)
    }

    /// Runs the stages from `first` on over `input`.
    fn run_from(
        &self,
        first: usize,
        input: Vec<Document>,
        opts: &RunOptions<'_>,
    ) -> Result<Vec<Document>, QueryError> {
        let mut docs = input;
        for (i, stage) in self.stages.iter().enumerate().skip(first) {
            // A $sort followed by a $limit only keeps the top documents (MongoDB's
            // top-k sort), so only those count against the sort memory limit.
            if let (Stage::Sort(spec), Some(Stage::Limit(k))) = (stage, self.stages.get(i + 1)) {
                let k = usize::try_from(*k).unwrap_or(usize::MAX);
                docs = spill::top_k_documents(spec, docs, k, &opts.limits)?;
                continue;
            }
            // $lookup gives one output per input: a $limit after it limits its input, so
            // the join runs only for the documents that are returned.
            if let (Stage::Lookup(_), Some(Stage::Limit(k))) = (stage, self.stages.get(i + 1)) {
                docs.truncate(usize::try_from(*k).unwrap_or(usize::MAX));
            }
            crate::interrupt::check()?;
            docs = run_stage(stage, docs, opts)?;
        }
        Ok(docs)
    }
}

fn number(v: &Bson) -> Option<crate::num::Num> {
    crate::num::Num::from_bson(v)
}

fn parse_stage(stage: &Document) -> Result<Stage, QueryError> {
    if stage.len() != 1 {
        return Err(QueryError::loc(
            40323,
            "A pipeline stage specification object must contain exactly one field.",
        ));
    }
    let Some((name, arg)) = stage.iter().next() else {
        return Err(QueryError::loc(
            40323,
            "A pipeline stage specification object must contain exactly one field.",
        ));
    };
    Ok(match name.as_str() {
        "$match" => match arg {
            Bson::Document(d) => {
                let f = Filter::parse(d)?;
                f.refuse_near()?;
                Stage::Match(f)
            }
            _ => return Err(QueryError::loc(15959, "the match filter must be an expression in an object")),
        },
        "$project" => match arg {
            Bson::Document(d) if d.is_empty() => {
                return Err(QueryError::loc(51272, "Invalid $project :: caused by :: projection specification must have at least one field"))
            }
            Bson::Document(d) => Stage::Project(Projection::parse(d)?),
            _ => return Err(QueryError::loc(15969, "$project specification must be an object")),
        },
        "$addFields" | "$set" => match arg {
            Bson::Document(d) => {
                if d.is_empty() {
                    return Err(QueryError::loc(40177, format!("Invalid {name} :: caused by :: specification must have at least one field")));
                }
                let mut fields = Vec::new();
                flatten_add_fields(d, &[], &mut fields)?;
                Stage::AddFields(fields)
            }
            other => {
                return Err(QueryError::loc(40272, format!("{name} specification stage must be an object, got {}", crate::compare::type_name(other))))
            }
        },
        "$unset" => {
            let names: Vec<&Bson> = match arg {
                Bson::String(_) => vec![arg],
                Bson::Array(items) if !items.is_empty() => items.iter().collect(),
                _ => return Err(QueryError::loc(31002, "$unset specification must be a string or an array with at least one field")),
            };
            let mut spec = Document::new();
            for n in names {
                let Bson::String(s) = n else {
                    return Err(QueryError::loc(31120, "$unset specification must be a string or an array containing only string values"));
                };
                spec.insert(s.clone(), 0);
            }
            Stage::Project(Projection::parse(&spec)?)
        }
        "$sort" => match arg {
            Bson::Document(d) if d.is_empty() => return Err(QueryError::loc(15976, "$sort stage must have at least one sort key")),
            Bson::Document(d) => Stage::Sort(SortSpec::parse(d)?),
            _ => return Err(QueryError::loc(15973, "the $sort key specification must be an object")),
        },
        "$limit" => {
            let n = number(arg)
                .ok_or_else(|| QueryError::loc(15957, "the limit must be specified as a number"))?;
            match n.as_exact_i64() {
                Some(i) if i > 0 => Stage::Limit(i as u64),
                Some(_) => return Err(QueryError::loc(15958, "the limit must be positive")),
                None => return Err(QueryError::loc(15957, "the limit must be specified as a number")),
            }
        }
        "$skip" => {
            let n = number(arg)
                .ok_or_else(|| QueryError::loc(15972, "Argument to $skip must be a number"))?;
            match n.as_exact_i64() {
                Some(i) if i >= 0 => Stage::Skip(i as u64),
                Some(_) => return Err(QueryError::loc(15956, "Argument to $skip cannot be negative")),
                None => return Err(QueryError::loc(15972, "Argument to $skip must be a number")),
            }
        }
        "$count" => {
            let Bson::String(s) = arg else {
                return Err(QueryError::loc(40156, "the count field must be a non-empty string"));
            };
            if s.is_empty() {
                return Err(QueryError::loc(40157, "the count field must be a non-empty string"));
            }
            if s.starts_with('$') {
                return Err(QueryError::loc(40158, "the count field cannot be a $-prefixed path"));
            }
            if s.contains('.') {
                return Err(QueryError::loc(40160, "the count field cannot contain '.'"));
            }
            Stage::Count(s.clone())
        }
        "$group" => Stage::Group(Group::parse(arg)?),
        "$unwind" => Stage::Unwind(Unwind::parse(arg)?),
        "$replaceRoot" => {
            let Bson::Document(d) = arg else {
                return Err(QueryError::loc(
                    40229,
                    format!(
                        "expected an object as specification for $replaceRoot stage, got {}",
                        crate::compare::type_name(arg)
                    ),
                ));
            };
            // As MongoDB's IDL parser: unknown fields first, then the required one.
            if let Some(k) = d.keys().find(|k| *k != "newRoot") {
                return Err(QueryError::loc(40415, format!("BSON field '$replaceRoot.{k}' is an unknown field.")));
            }
            let root = d.get("newRoot").ok_or_else(|| {
                QueryError::loc(
                    40414,
                    "BSON field '$replaceRoot.newRoot' is missing but a required field",
                )
            })?;
            Stage::ReplaceRoot(Expr::parse(root)?)
        }
        "$replaceWith" => Stage::ReplaceRoot(Expr::parse(arg)?),
        "$sortByCount" => {
            let ok = match arg {
                Bson::String(s) => s.starts_with('$'),
                Bson::Document(d) => d.len() == 1 && d.keys().all(|k| k.starts_with('$')),
                _ => false,
            };
            if !ok {
                return Err(QueryError::loc(40149, "the sortByCount field must be specified as a string prefixed with '$' or an expression object"));
            }
            let mut spec = Document::new();
            spec.insert("_id", arg.clone());
            spec.insert("count", bson::doc! {"$sum": 1});
            Stage::SortByCount(Group::parse(&Bson::Document(spec))?)
        }
        "$bucket" => Stage::Bucket(Bucket::parse(arg)?),
        "$bucketAuto" => Stage::BucketAuto(BucketAuto::parse(arg)?),
        "$facet" => {
            let Bson::Document(d) = arg else {
                return Err(QueryError::loc(15947, "the $facet specification must be a non-empty object"));
            };
            if d.is_empty() {
                return Err(QueryError::loc(40169, "the $facet specification must be a non-empty object"));
            }
            let mut facets = Vec::new();
            for (k, v) in d {
                let Bson::Array(items) = v else {
                    return Err(QueryError::loc(40170, format!("arguments to $facet must be arrays, {k} is type {}", crate::compare::type_name(v))));
                };
                let mut stages = Vec::new();
                for i in items {
                    let Bson::Document(s) = i else {
                        return Err(QueryError::loc(40171, format!("subpipeline of $facet must be an array of objects, but {k} contains a non-object")));
                    };
                    if let Some(n) = s.keys().next() {
                        if matches!(n.as_str(), "$facet" | "$out" | "$merge" | "$collStats" | "$indexStats" | "$documents") {
                            return Err(QueryError::loc(40600, format!("{n} is not allowed to be used within a $facet stage")));
                        }
                    }
                    stages.push(s.clone());
                }
                facets.push((k.clone(), Pipeline::parse(&stages)?));
            }
            Stage::Facet(facets)
        }
        "$sample" => {
            let Bson::Document(d) = arg else {
                return Err(QueryError::loc(28745, "the $sample stage specification must be an object"));
            };
            let size = d.get("size").ok_or_else(|| QueryError::loc(28749, "$sample stage must specify a size"))?;
            if let Some(k) = d.keys().find(|k| *k != "size") {
                return Err(QueryError::loc(28748, format!("unrecognized option to $sample: {k}")));
            }
            match number(size).and_then(|n| n.as_exact_i64()) {
                Some(n) if n >= 0 => Stage::Sample(n as u64),
                Some(_) => return Err(QueryError::loc(28747, "size argument to $sample must not be negative")),
                None => return Err(QueryError::loc(28746, "size argument to $sample must be a number")),
            }
        }
        "$densify" => Stage::Densify(Densify::parse(arg)?),
        "$fill" => Stage::Fill(Fill::parse(arg)?),
        "$setWindowFields" => Stage::SetWindowFields(SetWindowFields::parse(arg)?),
        "$redact" => Stage::Redact(Expr::parse(arg)?),
        "$documents" => Stage::Documents(Expr::parse(arg)?),
        "$geoNear" => Stage::GeoNear(Box::new(geo_near::GeoNear::parse(arg)?)),
        "$lookup" => Stage::Lookup(Box::new(Lookup::parse(arg)?)),
        // Change streams need a replica set's oplog; a standalone refuses them so.
        "$changeStream" => {
            return Err(QueryError::loc(
                40573,
                "The $changeStream stage is only supported on replica sets",
            ))
        }
        "$graphLookup" => Stage::GraphLookup(Box::new(graph_lookup::GraphLookup::parse(arg)?)),
        "$unionWith" => Stage::UnionWith(UnionWith::parse(arg)?),
        "$out" => Stage::Out(Out::parse(arg)?),
        "$merge" => Stage::Merge(Box::new(Merge::parse(arg)?)),
        other => {
            return Err(QueryError::loc(40324, format!("Unrecognized pipeline stage name: '{other}'")))
        }
    })
}

fn flatten_add_fields(
    d: &Document,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Expr)>,
) -> Result<(), QueryError> {
    for (k, v) in d {
        if k.starts_with('$') {
            return Err(QueryError::loc(
                16410,
                format!("FieldPath field names may not start with '$'. Field: {k}"),
            ));
        }
        let parts: Vec<String> = k.split('.').map(String::from).collect();
        if parts.iter().any(String::is_empty) {
            return Err(QueryError::loc(
                15998,
                "FieldPath field names may not be empty strings.",
            ));
        }
        let mut path = prefix.to_vec();
        path.extend(parts);
        match v {
            Bson::Document(sub)
                if !sub.is_empty() && !sub.keys().next().is_some_and(|k| k.starts_with('$')) =>
            {
                flatten_add_fields(sub, &path, out)?;
            }
            other => out.push((path, Expr::parse(other)?)),
        }
    }
    Ok(())
}

/// One document through a per-document stage (`$match`, `$project`, `$addFields`): the
/// document it passes on, if any.
fn stream_one(stage: &Stage, doc: Document) -> Result<Option<Document>, QueryError> {
    Ok(match stage {
        Stage::Match(f) => f.matches(&doc).then_some(doc),
        Stage::Project(p) => Some(p.try_apply_owned(doc)?),
        Stage::AddFields(fields) => {
            let mut values = Vec::with_capacity(fields.len());
            for (_, e) in fields {
                values.push(e.eval_optional(&doc)?);
            }
            let mut new = doc;
            for ((path, _), v) in fields.iter().zip(values) {
                let parts: Vec<&str> = path.iter().map(String::as_str).collect();
                match v {
                    Some(v) => crate::path::set_field_path(&mut new, &parts, v),
                    None => remove_doc_path(&mut new, &parts),
                }
            }
            Some(new)
        }
        _ => Some(doc),
    })
}

fn run_stage(
    stage: &Stage,
    docs: Vec<Document>,
    opts: &RunOptions<'_>,
) -> Result<Vec<Document>, QueryError> {
    let limits = &opts.limits;
    Ok(match stage {
        Stage::Match(_) | Stage::Project(_) | Stage::AddFields(_) => {
            let mut out = Vec::with_capacity(docs.len());
            for doc in docs {
                crate::interrupt::check()?;
                out.extend(stream_one(stage, doc)?);
            }
            out
        }
        Stage::Sort(spec) => {
            spill::sort_documents(spec, docs.into_iter().map(Ok), limits, opts.spill_dir)?
                .collect::<Result<_, QueryError>>()?
        }
        Stage::Limit(n) => docs
            .into_iter()
            .take(usize::try_from(*n).unwrap_or(usize::MAX))
            .collect(),
        Stage::Skip(n) => docs
            .into_iter()
            .skip(usize::try_from(*n).unwrap_or(usize::MAX))
            .collect(),
        Stage::Count(name) => {
            if docs.is_empty() {
                Vec::new()
            } else {
                let n = i32::try_from(docs.len())
                    .map(Bson::Int32)
                    .unwrap_or(Bson::Int64(docs.len() as i64));
                let mut d = Document::new();
                d.insert(name.clone(), n);
                vec![d]
            }
        }
        Stage::Group(g) => g.run_stream(docs.into_iter().map(Ok), limits, opts.spill_dir)?,
        Stage::SortByCount(g) => {
            let mut out = g.run_stream(docs.into_iter().map(Ok), limits, opts.spill_dir)?;
            let spec = SortSpec::parse(&bson::doc! {"count": -1})?;
            spec.sort(&mut out);
            out
        }
        Stage::Unwind(u) => u.run(docs)?,
        Stage::Bucket(b) => b.run(docs, limits)?,
        Stage::BucketAuto(b) => b.run(docs, limits)?,
        Stage::Facet(facets) => {
            let mut used = 0u64;
            for d in &docs {
                used += mem::doc_size(d);
            }
            limits.check_group("$facet", used)?;
            let mut out = Document::new();
            for (name, p) in facets {
                let res = p.run_with(docs.clone(), opts)?;
                out.insert(
                    name.clone(),
                    res.into_iter().map(Bson::Document).collect::<Vec<_>>(),
                );
            }
            vec![out]
        }
        Stage::Sample(n) => sample(docs, *n),
        Stage::GeoNear(g) => g.run(docs)?,
        Stage::Densify(d) => d.run(docs)?,
        Stage::Fill(f) => f.run(docs)?,
        Stage::SetWindowFields(w) => w.run(docs, limits)?,
        Stage::Redact(e) => {
            let mut out = Vec::new();
            for d in docs {
                if let Some(r) = redact(e, d)? {
                    out.push(r);
                }
            }
            out
        }
        Stage::Documents(e) => match e.eval(&Document::new())? {
            Bson::Array(items) => items
                .into_iter()
                .map(|i| match i {
                    Bson::Document(d) => Ok(d),
                    _ => Err(QueryError::TypeMismatch(
                        "$documents expects an array of objects".into(),
                    )),
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(QueryError::loc(
                    5858203,
                    "error during evaluation of $documents: expected an array",
                ))
            }
        },
        Stage::Lookup(l) => l.run(docs, opts)?,
        Stage::GraphLookup(g) => g.run(docs, opts)?,
        Stage::UnionWith(u) => u.run(docs, opts)?,
        Stage::Out(o) => o.run(docs, opts)?,
        Stage::Merge(m) => m.run(docs, opts)?,
        Stage::ReplaceRoot(e) => {
            let mut out = Vec::with_capacity(docs.len());
            for d in &docs {
                match e.eval_optional(d)? {
                    Some(Bson::Document(nd)) => out.push(nd),
                    other => {
                        let (shown, ty) = match &other {
                            Some(v) => (crate::error::render(v), crate::compare::type_name(v)),
                            None => ("MISSING".to_string(), "missing"),
                        };
                        return Err(QueryError::loc(
                            40228,
                            format!("'newRoot' expression must evaluate to an object, but resulting value was: {shown}. Type of resulting value: '{ty}'. Input document: {}", crate::error::render_doc(d)),
                        ));
                    }
                }
            }
            out
        }
    })
}

/// Picks `n` documents at random (all of them, shuffled, when fewer).
fn sample(mut docs: Vec<Document>, n: u64) -> Vec<Document> {
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x9E37_79B9_7F4A_7C15)
        | 1;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let take = usize::try_from(n).unwrap_or(usize::MAX).min(docs.len());
    for i in 0..take {
        let j = i + (next() % (docs.len() - i) as u64) as usize;
        docs.swap(i, j);
    }
    docs.truncate(take);
    docs
}

/// Applies `$redact` to one document: `$$KEEP`, `$$PRUNE` or `$$DESCEND`.
fn redact(e: &Expr, doc: Document) -> Result<Option<Document>, QueryError> {
    match e.eval(&doc)? {
        Bson::String(s) if s == "keep" => Ok(Some(doc)),
        Bson::String(s) if s == "prune" => Ok(None),
        Bson::String(s) if s == "descend" => {
            let mut out = Document::new();
            for (k, v) in doc {
                match v {
                    Bson::Document(sub) => {
                        if let Some(r) = redact(e, sub)? {
                            out.insert(k, r);
                        }
                    }
                    Bson::Array(items) => {
                        let mut kept = Vec::new();
                        for i in items {
                            match i {
                                Bson::Document(sub) => {
                                    if let Some(r) = redact(e, sub)? {
                                        kept.push(Bson::Document(r));
                                    }
                                }
                                other => kept.push(other),
                            }
                        }
                        out.insert(k, kept);
                    }
                    other => {
                        out.insert(k, other);
                    }
                }
            }
            Ok(Some(out))
        }
        other => Err(QueryError::loc(
            17053,
            format!(
                "$redact's expression should not return anything aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned {}",
                crate::error::render(&other)
            ),
        )),
    }
}

fn remove_doc_path(doc: &mut Document, parts: &[&str]) {
    match parts.split_first() {
        Some((first, [])) => {
            doc.remove(*first);
        }
        Some((first, rest)) => match doc.get_mut(*first) {
            Some(Bson::Document(sub)) => remove_doc_path(sub, rest),
            Some(Bson::Array(items)) => remove_in_elements(items, rest),
            _ => {}
        },
        None => {}
    }
}

/// [`remove_doc_path`] in each document of an array (and of arrays in it).
fn remove_in_elements(items: &mut [Bson], parts: &[&str]) {
    for item in items {
        match item {
            Bson::Document(d) => remove_doc_path(d, parts),
            Bson::Array(inner) => remove_in_elements(inner, parts),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
