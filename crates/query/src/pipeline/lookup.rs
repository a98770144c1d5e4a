//! Cross-collection stages: `$lookup` (equality, pipeline and combined
//! forms), `$unionWith`, `$out` and `$merge`. They read and write other
//! collections through [`super::PipelineContext`]. `let` variables of a
//! sub-pipeline are bound by substituting `$$name` with literal values before
//! the sub-pipeline is parsed for each input document.

use bson::{doc, Bson, Document};

use super::{Pipeline, RunOptions};
use std::collections::BTreeMap;

use crate::compare::OrdBson;
use crate::error::QueryError;
use crate::expr::Expr;
use crate::filter::Filter;

fn fail(msg: impl Into<String>) -> QueryError {
    QueryError::FailedToParse(msg.into())
}

fn stage_docs(stage: &str, v: &Bson) -> Result<Vec<Document>, QueryError> {
    let docs = stage_docs_unchecked(stage, v)?;
    if stage != "$merge" {
        if let Some(name) = docs
            .iter()
            .filter_map(|d| d.keys().next())
            .find(|n| *n == "$out" || *n == "$merge")
        {
            return Err(if stage == "$lookup" {
                QueryError::loc(
                    51047,
                    format!("{name} is not allowed to be used within a $lookup stage"),
                )
            } else {
                QueryError::loc(
                    31441,
                    format!("{name} is not allowed within a $unionWith's sub-pipeline"),
                )
            });
        }
    }
    Ok(docs)
}

fn stage_docs_unchecked(stage: &str, v: &Bson) -> Result<Vec<Document>, QueryError> {
    match v {
        Bson::Array(items) => items
            .iter()
            .map(|i| match i {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(fail(format!(
                    "{stage}: each element of 'pipeline' must be an object"
                ))),
            })
            .collect(),
        _ => Err(fail(format!("{stage}: 'pipeline' must be an array"))),
    }
}

/// `$merge` changing the `_id` of the document it matched: 66, as MongoDB words it.
fn id_changed(inner: &str) -> QueryError {
    QueryError::ImmutableField(format!(
        "$merge failed to update the matching document, did you attempt to modify the _id or the shard key? :: caused by :: {inner}"
    ))
}

/// A parsed `$lookup`.
#[derive(Debug, Clone)]
pub struct Lookup {
    from: Option<(Option<String>, String)>,
    local: Option<String>,
    foreign: Option<String>,
    lets: Vec<(String, Expr)>,
    pipeline: Option<Vec<Document>>,
    as_field: String,
}

fn namespace(stage: &str, v: &Bson) -> Result<(Option<String>, String), QueryError> {
    match v {
        Bson::String(s) => Ok((None, s.clone())),
        Bson::Document(d) => match (d.get("db"), d.get("coll")) {
            (Some(Bson::String(db)), Some(Bson::String(c))) => Ok((Some(db.clone()), c.clone())),
            _ => Err(fail(format!(
                "{stage} 'from' must have a string 'db' and 'coll'"
            ))),
        },
        _ => Err(fail(format!("{stage} 'from' field must be a string"))),
    }
}

impl Lookup {
    /// Parses the `$lookup` specification.
    pub fn parse(arg: &Bson) -> Result<Lookup, QueryError> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::loc(
                40319,
                "the $lookup specification must be an Object",
            ));
        };
        let mut l = Lookup {
            from: None,
            local: None,
            foreign: None,
            lets: Vec::new(),
            pipeline: None,
            as_field: String::new(),
        };
        let mut as_field = None;
        for (k, v) in d {
            let string = || match v {
                Bson::String(s) => Ok(s.clone()),
                _ => Err(fail(format!(
                    "$lookup argument '{k}: {}' must be a string, is type {}",
                    crate::error::render(v),
                    crate::compare::type_name(v)
                ))),
            };
            match k.as_str() {
                "from" => l.from = Some(namespace("$lookup", v)?),
                "localField" => l.local = Some(string()?),
                "foreignField" => l.foreign = Some(string()?),
                "as" => as_field = Some(string()?),
                "let" => {
                    let Bson::Document(vars) = v else {
                        return Err(fail("$lookup argument 'let' must be an object"));
                    };
                    for (name, e) in vars {
                        crate::let_vars::check_name(name)?;
                        l.lets.push((name.clone(), Expr::parse(e)?));
                    }
                }
                "pipeline" => {
                    let stages = stage_docs("$lookup", v)?;
                    // Validate once (with variables unbound the parse still succeeds).
                    Pipeline::parse(&stages)?;
                    l.pipeline = Some(stages);
                }
                other => {
                    return Err(fail(format!("unknown argument to $lookup: {other}")));
                }
            }
        }
        l.as_field = as_field.ok_or_else(|| fail("must specify 'as' field for a $lookup"))?;
        super::lookup_spec::check_as_path(&l.as_field)?;
        if let Some((Some(db), coll)) = &l.from {
            super::lookup_spec::check_foreign_db(db, coll)?;
        }
        if l.pipeline.is_some() {
            if l.local.is_some() != l.foreign.is_some() {
                return Err(fail(
                    "$lookup requires both or neither of 'localField' and 'foreignField' to be specified",
                ));
            }
        } else {
            if l.local.is_none() || l.foreign.is_none() {
                return Err(fail("$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified"));
            }
            if !l.lets.is_empty() || d.contains_key("let") {
                return Err(fail(
                    "$lookup with a 'let' argument must also specify 'pipeline'",
                ));
            }
        }
        if l.from.is_none()
            && !l
                .pipeline
                .as_ref()
                .and_then(|p| p.first())
                .is_some_and(|s| s.contains_key("$documents"))
        {
            return Err(fail("missing 'from' option to $lookup stage specification"));
        }
        Ok(l)
    }

    /// Joins each input document with the matching foreign documents.
    pub fn run(
        &self,
        docs: Vec<Document>,
        opts: &RunOptions<'_>,
    ) -> Result<Vec<Document>, QueryError> {
        let foreign = match &self.from {
            Some((db, coll)) => opts
                .ctx("$lookup")?
                .read_collection(db.as_deref().unwrap_or(opts.db), coll)?,
            None => Vec::new(),
        };
        // Equality joins use an index of the foreign field's values (elements of
        // arrays included; a missing field is indexed as null).
        let index = self.foreign.as_ref().map(|ff| foreign_index(&foreign, ff));
        let mut out = Vec::with_capacity(docs.len());
        for doc in docs {
            crate::interrupt::check()?;
            let mut matched: Vec<Document> = match (&self.local, &self.foreign, &index) {
                (Some(local), Some(ff), Some(index)) => {
                    let values = match crate::expr::Expr::field(local).eval_optional(&doc)? {
                        Some(Bson::Array(items)) if !items.is_empty() => items,
                        Some(v) => vec![v],
                        None => vec![Bson::Null],
                    };
                    if values
                        .iter()
                        .any(|v| matches!(v, Bson::RegularExpression(_)))
                    {
                        let mut spec = Document::new();
                        spec.insert(ff.clone(), bson::doc! {"$in": values});
                        let f = Filter::parse(&spec)?;
                        foreign.iter().filter(|d| f.matches(d)).cloned().collect()
                    } else {
                        let mut hits = std::collections::BTreeSet::new();
                        for v in values {
                            let v = if matches!(v, Bson::Undefined) {
                                Bson::Null
                            } else {
                                v
                            };
                            if let Some(ids) = index.get(&OrdBson(v)) {
                                hits.extend(ids.iter().copied());
                            }
                        }
                        hits.into_iter()
                            .filter_map(|i| foreign.get(i).cloned())
                            .collect()
                    }
                }
                _ => foreign.clone(),
            };
            if let Some(stages) = &self.pipeline {
                let mut vars = Vec::new();
                for (name, e) in &self.lets {
                    vars.push((name.clone(), e.eval(&doc)?));
                }
                let bound = crate::let_vars::in_pipeline(stages, &vars);
                matched = Pipeline::parse(&bound)?.run_with(matched, opts)?;
            }
            // The joined array lives in one document: MongoDB's 16 MB document bound.
            let size: u64 = matched
                .iter()
                .map(|d| crate::bson_size::bson_size(d) as u64)
                .sum();
            let max = crate::limits::MAX_INTERNAL_OBJECT_SIZE as u64;
            if size > max {
                return Err(QueryError::loc(
                    4568,
                    format!("Total size of documents in {} matching pipeline's $lookup stage exceeds {max} bytes", self.from.as_ref().map(|(_, c)| c.as_str()).unwrap_or("")),
                ));
            }
            let mut new = doc;
            let parts: Vec<&str> = self.as_field.split('.').collect();
            crate::path::set_doc_path(
                &mut new,
                &parts,
                Bson::Array(matched.into_iter().map(Bson::Document).collect()),
            );
            out.push(new);
        }
        Ok(out)
    }
}

/// Maps each value of `field` in `docs` (array elements too; missing as null)
/// to the positions of the documents holding it.
fn foreign_index(docs: &[Document], field: &str) -> BTreeMap<OrdBson, Vec<usize>> {
    let mut index: BTreeMap<OrdBson, Vec<usize>> = BTreeMap::new();
    for (i, d) in docs.iter().enumerate() {
        let mut add = |v: &Bson| {
            let ids = index.entry(OrdBson(v.clone())).or_default();
            if ids.last() != Some(&i) {
                ids.push(i);
            }
        };
        for v in crate::path::lookup_path(d, field) {
            match v {
                None | Some(Bson::Undefined) => add(&Bson::Null),
                Some(Bson::Array(items)) => {
                    add(&Bson::Array(items.clone()));
                    for item in items {
                        add(item);
                    }
                }
                Some(other) => add(other),
            }
        }
    }
    index
}

/// A parsed `$unionWith`.
#[derive(Debug, Clone)]
pub struct UnionWith {
    coll: Option<String>,
    pipeline: Option<Pipeline>,
}

impl UnionWith {
    /// Parses `"coll"` or `{coll, pipeline}`.
    pub fn parse(arg: &Bson) -> Result<UnionWith, QueryError> {
        match arg {
            Bson::String(s) => Ok(UnionWith {
                coll: Some(s.clone()),
                pipeline: None,
            }),
            Bson::Document(d) => {
                let mut u = UnionWith {
                    coll: None,
                    pipeline: None,
                };
                for (k, v) in d {
                    match (k.as_str(), v) {
                        ("coll", Bson::String(s)) => u.coll = Some(s.clone()),
                        ("pipeline", _) => {
                            u.pipeline = Some(Pipeline::parse(&stage_docs("$unionWith", v)?)?)
                        }
                        _ => {
                            return Err(QueryError::loc(
                                40415,
                                format!("BSON field '$unionWith.{k}' is an unknown field."),
                            ))
                        }
                    }
                }
                if u.coll.is_none() && u.pipeline.is_none() {
                    return Err(QueryError::loc(
                        40414,
                        "BSON field '$unionWith.coll' is missing but a required field",
                    ));
                }
                Ok(u)
            }
            other => Err(QueryError::loc(
                40414,
                format!(
                    "the $unionWith stage specification must be an object or string, but found {}",
                    crate::compare::type_name(other)
                ),
            )),
        }
    }

    /// Appends the other collection's (processed) documents.
    pub fn run(
        &self,
        mut docs: Vec<Document>,
        opts: &RunOptions<'_>,
    ) -> Result<Vec<Document>, QueryError> {
        let other = match &self.coll {
            Some(c) => opts.ctx("$unionWith")?.read_collection(opts.db, c)?,
            None => Vec::new(),
        };
        let other = match &self.pipeline {
            Some(p) => p.run_with(other, opts)?,
            None => other,
        };
        docs.extend(other);
        Ok(docs)
    }
}

/// A parsed `$out`.
#[derive(Debug, Clone)]
pub struct Out {
    db: Option<String>,
    coll: String,
    /// The `timeseries` option (MongoDB 7.0.3+), checked by the context.
    timeseries: Option<Document>,
}

impl Out {
    /// Parses `"coll"` or `{db, coll, timeseries?}`.
    pub fn parse(arg: &Bson) -> Result<Out, QueryError> {
        match arg {
            Bson::String(s) if !s.is_empty() => Ok(Out {
                db: None,
                coll: s.clone(),
                timeseries: None,
            }),
            Bson::Document(d) => {
                let timeseries = match d.get("timeseries") {
                    None => None,
                    Some(Bson::Document(t)) => Some(t.clone()),
                    Some(other) => {
                        return Err(QueryError::TypeMismatch(format!(
                            "BSON field '$out.timeseries' is the wrong type '{}', expected type 'object'",
                            crate::compare::type_name(other)
                        )))
                    }
                };
                if let Some(k) = d
                    .keys()
                    .find(|k| !matches!(k.as_str(), "db" | "coll" | "timeseries"))
                {
                    return Err(QueryError::loc(
                        40415,
                        format!("BSON field '$out.{k}' is an unknown field."),
                    ));
                }
                match (d.get("db"), d.get("coll")) {
                    (Some(Bson::String(db)), Some(Bson::String(c))) => Ok(Out {
                        db: Some(db.clone()),
                        coll: c.clone(),
                        timeseries,
                    }),
                    _ => Err(QueryError::loc(16994, "If an object is passed to $out it must have exactly 2 fields: 'db' and 'coll'")),
                }
            }
            other => Err(QueryError::loc(
                16990,
                format!(
                    "$out only supports a string or object argument, but found {}",
                    crate::compare::type_name(other)
                ),
            )),
        }
    }

    /// Replaces the target collection's contents; outputs nothing.
    pub fn run(
        &self,
        docs: Vec<Document>,
        opts: &RunOptions<'_>,
    ) -> Result<Vec<Document>, QueryError> {
        let docs = docs
            .into_iter()
            .map(|d| {
                if d.contains_key("_id") {
                    d
                } else {
                    let mut n = Document::new();
                    n.insert("_id", bson::oid::ObjectId::new());
                    n.extend(d);
                    n
                }
            })
            .collect();
        opts.ctx("$out")?.replace_collection(
            self.db.as_deref().unwrap_or(opts.db),
            &self.coll,
            docs,
            self.timeseries.as_ref(),
        )?;
        Ok(Vec::new())
    }
}

#[derive(Debug, Clone)]
enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    Pipeline(Vec<Document>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum WhenNotMatched {
    Insert,
    Discard,
    Fail,
}

/// A parsed `$merge`.
#[derive(Debug, Clone)]
pub struct Merge {
    db: Option<String>,
    coll: String,
    on: Vec<String>,
    lets: Vec<(String, Expr)>,
    matched: WhenMatched,
    not_matched: WhenNotMatched,
}

impl Merge {
    /// Parses `"coll"` or `{into, on, let, whenMatched, whenNotMatched}`.
    pub fn parse(arg: &Bson) -> Result<Merge, QueryError> {
        let mut m = Merge {
            db: None,
            coll: String::new(),
            on: vec!["_id".into()],
            lets: Vec::new(),
            matched: WhenMatched::Merge,
            not_matched: WhenNotMatched::Insert,
        };
        let d = match arg {
            Bson::String(s) => {
                m.coll = s.clone();
                return Ok(m);
            }
            Bson::Document(d) => d,
            other => {
                return Err(QueryError::loc(
                    51182,
                    format!(
                        "$merge only supports a string or object argument, not {}",
                        crate::compare::type_name(other)
                    ),
                ))
            }
        };
        let mut into = false;
        for (k, v) in d {
            match k.as_str() {
                "into" => {
                    let (db, c) = namespace("$merge", v)?;
                    m.db = db;
                    m.coll = c;
                    into = true;
                }
                "on" => {
                    m.on = match v {
                        Bson::String(s) => vec![s.clone()],
                        Bson::Array(items) if !items.is_empty() => items
                            .iter()
                            .map(|i| match i {
                                Bson::String(s) => Ok(s.clone()),
                                _ => Err(QueryError::loc(51134, "$merge 'on' array elements must be strings")),
                            })
                            .collect::<Result<_, _>>()?,
                        _ => return Err(QueryError::loc(51186, "$merge 'on' field must be either a string or an array of strings")),
                    }
                }
                "let" => {
                    let Bson::Document(vars) = v else {
                        return Err(fail("$merge 'let' must be an object"));
                    };
                    for (name, e) in vars {
                        m.lets.push((name.clone(), Expr::parse(e)?));
                    }
                }
                "whenMatched" => {
                    m.matched = match v {
                        Bson::String(s) => match s.as_str() {
                            "replace" => WhenMatched::Replace,
                            "keepExisting" => WhenMatched::KeepExisting,
                            "merge" => WhenMatched::Merge,
                            "fail" => WhenMatched::Fail,
                            other => return Err(QueryError::BadValue(format!("Enumeration value '{other}' for field 'whenMatched' is not a valid value."))),
                        },
                        Bson::Array(_) => {
                            let stages = stage_docs("$merge", v)?;
                            Pipeline::parse_for_update(&stages)?;
                            WhenMatched::Pipeline(stages)
                        }
                        _ => return Err(QueryError::TypeMismatch("BSON field '$merge.whenMatched' is the wrong type".into())),
                    }
                }
                "whenNotMatched" => {
                    m.not_matched = match v {
                        Bson::String(s) if s == "insert" => WhenNotMatched::Insert,
                        Bson::String(s) if s == "discard" => WhenNotMatched::Discard,
                        Bson::String(s) if s == "fail" => WhenNotMatched::Fail,
                        other => return Err(QueryError::BadValue(format!("Enumeration value '{}' for field 'whenNotMatched' is not a valid value.", crate::error::render(other)))),
                    }
                }
                other => {
                    return Err(QueryError::loc(40415, format!("BSON field '$merge.{other}' is an unknown field.")))
                }
            }
        }
        if !into {
            return Err(QueryError::loc(
                40414,
                "BSON field '$merge.into' is missing but a required field",
            ));
        }
        Ok(m)
    }

    /// A duplicate key error of one of the stage's writes, in MongoDB's context: with
    /// `whenMatched: 'fail'`, a duplicate on exactly the `on` fields means an existing
    /// document matched; any other duplicate (another unique index) is a plain
    /// `DuplicateKey` failure. Other errors pass through.
    fn dup_key_context(&self, e: QueryError) -> QueryError {
        if e.code() != 11000 {
            return e;
        }
        let (msg, info) = match e {
            QueryError::CodedWithInfo(_, msg, info) => (msg, Some(info)),
            other => (other.message(), None),
        };
        let pattern = info
            .as_ref()
            .and_then(|i| i.get_document("keyPattern").ok());
        let on_fields = pattern
            .is_some_and(|p| p.len() == self.on.len() && self.on.iter().all(|f| p.contains_key(f)));
        let context = match (&self.matched, on_fields) {
            (WhenMatched::Fail, true) => {
                "$merge with whenMatched: fail found an existing document with the same values for the 'on' fields"
            }
            _ => "$merge failed due to a DuplicateKey error",
        };
        let msg = format!("{context} :: caused by :: {msg}");
        match info {
            Some(info) => QueryError::CodedWithInfo(11000, msg, info),
            None => QueryError::Coded(11000, msg),
        }
    }

    /// Writes each document into the target; outputs nothing.
    pub fn run(
        &self,
        docs: Vec<Document>,
        opts: &RunOptions<'_>,
    ) -> Result<Vec<Document>, QueryError> {
        let ctx = opts.ctx("$merge")?;
        let db = self.db.as_deref().unwrap_or(opts.db);
        if self.on != ["_id"] && !ctx.has_unique_index(db, &self.coll, &self.on)? {
            return Err(QueryError::loc(
                51183,
                "Cannot find index to verify that join fields will be unique",
            ));
        }
        for doc in docs {
            let mut doc = doc;
            if !doc.contains_key("_id") && self.on.iter().any(|o| o == "_id") {
                let mut n = Document::new();
                n.insert("_id", bson::oid::ObjectId::new());
                n.extend(doc);
                doc = n;
            }
            let mut key = Document::new();
            for f in &self.on {
                match crate::path::get_path(&doc, f) {
                    Some(v) if !matches!(v, Bson::Null | Bson::Undefined | Bson::Array(_)) => {
                        key.insert(f.clone(), v.clone());
                    }
                    _ => {
                        return Err(QueryError::loc(
                            51132,
                            format!("$merge write error: 'on' field '{f}' cannot be missing, null, undefined or an array"),
                        ))
                    }
                }
            }
            let existing = ctx.find_matching(db, &self.coll, &key)?;
            if existing.len() > 1 {
                return Err(QueryError::loc(
                    51183,
                    "$merge: the 'on' fields must identify at most one document in the target collection",
                ));
            }
            match existing.into_iter().next() {
                Some(old) => {
                    let id = old.get("_id").cloned().unwrap_or(Bson::Null);
                    let new = match &self.matched {
                        WhenMatched::KeepExisting => continue,
                        WhenMatched::Fail => {
                            // MongoDB inserts, and the unique index on the `on` fields refuses
                            // the document: its duplicate key error, in the `on` fields' context.
                            // Only the `_id` index's name is known here.
                            let pattern: Document = key.keys().map(|k| (k.clone(), Bson::Int32(1))).collect();
                            let index = match self.on.as_slice() {
                                [only] if only == "_id" => " index: _id_",
                                _ => "",
                            };
                            let msg = format!(
                                "E11000 duplicate key error collection: {db}.{}{index} dup key: {}",
                                self.coll,
                                crate::error::render_doc(&key)
                            );
                            let e = QueryError::CodedWithInfo(11000, msg, Box::new(doc! {"keyPattern": pattern, "keyValue": key}));
                            return Err(self.dup_key_context(e));
                        }
                        WhenMatched::Replace => {
                            let mut n = Document::new();
                            n.insert("_id", id.clone());
                            for (k, v) in doc {
                                if k == "_id" {
                                    if !crate::compare::values_equal(&v, &id) {
                                        return Err(id_changed(&format!("After applying the update, the (immutable) field '_id' was found to have been altered to _id: {}", crate::error::render(&v))));
                                    }
                                    continue;
                                }
                                n.insert(k, v);
                            }
                            n
                        }
                        WhenMatched::Merge => {
                            let mut n = old.clone();
                            for (k, v) in doc {
                                if k == "_id" && !crate::compare::values_equal(&v, &id) {
                                    return Err(id_changed("Performing an update on the path '_id' would modify the immutable field '_id'"));
                                }
                                n.insert(k, v);
                            }
                            n
                        }
                        WhenMatched::Pipeline(stages) => {
                            let mut vars = vec![("new".to_string(), Bson::Document(doc.clone()))];
                            for (name, e) in &self.lets {
                                vars.push((name.clone(), e.eval(&doc)?));
                            }
                            let bound = crate::let_vars::in_pipeline(stages, &vars);
                            let out = Pipeline::parse_for_update(&bound)?.run_with(vec![old.clone()], opts)?;
                            let mut n = out.into_iter().next().unwrap_or_default();
                            match n.get("_id") {
                                None => {
                                    n.insert("_id", id.clone());
                                }
                                Some(v) if !crate::compare::values_equal(v, &id) => {
                                    return Err(id_changed(&format!("After applying the update, the (immutable) field '_id' was found to have been altered to _id: {}", crate::error::render(v))));
                                }
                                Some(_) => {}
                            }
                            n
                        }
                    };
                    ctx.replace_document(db, &self.coll, &id, new)
                        .map_err(|e| self.dup_key_context(e))?;
                }
                None => match self.not_matched {
                    WhenNotMatched::Insert => ctx
                        .insert_document(db, &self.coll, doc)
                        .map_err(|e| self.dup_key_context(e))?,
                    WhenNotMatched::Discard => {}
                    WhenNotMatched::Fail => {
                        return Err(QueryError::loc(
                            13113,
                            "$merge could not find a matching document in the target collection for at least one document in the source collection",
                        ))
                    }
                },
            }
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn writing_stages_are_refused_inside_sub_pipelines() {
        let e = Lookup::parse(&Bson::Document(
            doc! {"from": "x", "pipeline": [{"$out": "y"}], "as": "j"},
        ))
        .unwrap_err();
        assert_eq!(e.code(), 51047);
        let e = UnionWith::parse(&Bson::Document(
            doc! {"coll": "x", "pipeline": [{"$merge": "y"}]},
        ))
        .unwrap_err();
        assert_eq!(e.code(), 31441);
    }

    /// A target collection `tgt` whose inserts are refused on a duplicate `_id`, with a
    /// unique index on `a`.
    struct Target(std::sync::Mutex<Vec<Document>>);

    impl crate::pipeline::PipelineContext for Target {
        fn read_collection(&self, _: &str, _: &str) -> Result<Vec<Document>, QueryError> {
            Ok(self.0.lock().map(|d| d.clone()).unwrap_or_default())
        }
        fn replace_collection(
            &self,
            _: &str,
            _: &str,
            _: Vec<Document>,
            _: Option<&Document>,
        ) -> Result<(), QueryError> {
            Ok(())
        }
        fn find_matching(
            &self,
            _: &str,
            _: &str,
            key: &Document,
        ) -> Result<Vec<Document>, QueryError> {
            let f = Filter::parse(key)?;
            Ok(self
                .read_collection("", "")?
                .into_iter()
                .filter(|d| f.matches(d))
                .collect())
        }
        fn has_unique_index(
            &self,
            _: &str,
            _: &str,
            fields: &[String],
        ) -> Result<bool, QueryError> {
            Ok(fields == ["a"])
        }
        fn insert_document(&self, db: &str, coll: &str, doc: Document) -> Result<(), QueryError> {
            let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
            let mut docs = self.0.lock().expect("lock");
            if docs.iter().any(|d| d.get("_id") == Some(&id)) {
                let key = doc! {"_id": id};
                return Err(QueryError::CodedWithInfo(
                    11000,
                    format!(
                        "E11000 duplicate key error collection: {db}.{coll} index: _id_ dup key: {}",
                        crate::error::render_doc(&key)
                    ),
                    Box::new(doc! {"keyPattern": {"_id": 1}, "keyValue": key}),
                ));
            }
            docs.push(doc);
            Ok(())
        }
        fn replace_document(
            &self,
            _: &str,
            _: &str,
            _: &Bson,
            _: Document,
        ) -> Result<(), QueryError> {
            Ok(())
        }
    }

    fn merge_into_target(spec: Document, input: Vec<Document>) -> QueryError {
        let ctx = Target(std::sync::Mutex::new(vec![doc! {"_id": 1, "a": 5}]));
        let opts = RunOptions {
            context: Some(&ctx),
            ..RunOptions::default()
        };
        Merge::parse(&Bson::Document(spec))
            .and_then(|m| m.run(input, &opts))
            .expect_err("the merge fails")
    }

    #[test]
    fn merge_when_matched_fail_on_id_reports_the_id_index_duplicate_key() {
        let e = merge_into_target(
            doc! {"into": "tgt", "whenMatched": "fail", "whenNotMatched": "insert"},
            vec![doc! {"_id": 1, "a": 6}],
        );
        assert_eq!(e.code(), 11000);
        assert_eq!(
            e.message(),
            "$merge with whenMatched: fail found an existing document with the same values for the 'on' fields :: caused by :: E11000 duplicate key error collection: test.tgt index: _id_ dup key: { _id: 1 }"
        );
        let QueryError::CodedWithInfo(_, _, info) = e else {
            panic!("no keyPattern/keyValue");
        };
        assert_eq!(
            *info,
            doc! {"keyPattern": {"_id": 1}, "keyValue": {"_id": 1}}
        );
    }

    #[test]
    fn merge_duplicate_keys_off_the_on_fields_are_plain_duplicate_key_failures() {
        // Joined on `a` (no match), the insert collides on `_id`.
        let e = merge_into_target(
            doc! {"into": "tgt", "on": "a", "whenMatched": "fail", "whenNotMatched": "insert"},
            vec![doc! {"_id": 1, "a": 6}],
        );
        assert_eq!(
            (e.code(), e.message()),
            (11000, "$merge failed due to a DuplicateKey error :: caused by :: E11000 duplicate key error collection: test.tgt index: _id_ dup key: { _id: 1 }".to_string())
        );
        let e = merge_into_target(
            doc! {"into": "tgt", "on": "a", "whenMatched": "fail", "whenNotMatched": "insert"},
            vec![doc! {"_id": 2, "a": 5}],
        );
        assert!(
            e.message().starts_with("$merge with whenMatched: fail found an existing document with the same values for the 'on' fields :: caused by :: E11000 duplicate key error collection: test.tgt"),
            "{e}"
        );
    }

    #[test]
    fn substitution_binds_let_variables() {
        let vars = vec![("x".to_string(), Bson::Document(doc! {"a": 5}))];
        let out =
            crate::let_vars::substitute(&Bson::Document(doc! {"$eq": ["$v", "$$x.a"]}), &vars);
        assert_eq!(out, Bson::Document(doc! {"$eq": ["$v", {"$literal": 5}]}));
        let out = crate::let_vars::substitute(&Bson::String("$$ROOT".into()), &vars);
        assert_eq!(out, Bson::String("$$ROOT".into()));
    }
}
