//! Execution of `find`/`aggregate` reads on a time-series collection over its buckets:
//! the leading `$match` is split into a bucket predicate (time bounds, meta predicate,
//! control min/max ranges) and a per-measurement filter; only the columns later stages
//! read are decoded; a `$group` right after the match runs over decoded columns
//! ([`vgroup`]) without building a document per measurement.

mod col;
mod columnar;
mod gathered;
mod group_state;
mod lastpoint;
mod near;
mod packed;
mod packed_sort;
mod parallel;
mod rows;
mod top_groups;
mod vgroup;

pub use columnar::ColumnarProject;
use columnar::ColumnarRun;
use hourglass_query::pipeline::deps::pipeline_fields;
pub use lastpoint::LastPoint;
pub use near::NearestK;
pub use packed::RawRow;
pub use rows::RowFilter;
pub use vgroup::VectorGroup;

use crate::options::TimeseriesOptions;
use crate::store::{BucketPredicate, BucketView, ScanCounters, StoreError, TimeseriesStore};
use crate::TsError;
use bson::{doc, Bson, Document, RawDocumentBuf};
use col::Cols;
use hourglass_catalog::Collection;
use hourglass_query::filter::Filter;
use hourglass_query::pipeline::mem::MemLimits;
use hourglass_query::QueryError;
use std::sync::Arc;
use top_groups::{Cutoff, TopGroups};

/// The count a `$limit` or `$skip` stage gives (a whole number, not negative).
fn count_arg(v: &Bson) -> Option<usize> {
    let n = hourglass_query::num::Num::from_bson(v)?.as_exact_i64()?;
    usize::try_from(n).ok()
}

/// How a read of a time-series view is run.
#[derive(Debug, Clone)]
pub struct TsPlan {
    pub predicate: BucketPredicate,
    /// The leading `$match` stages, merged (`{}` when none).
    pub filter_spec: Document,
    filter: Filter,
    /// Top-level fields to decode (`None` = every field).
    pub fields: Option<Vec<String>>,
    /// The vectorized group, its row filter, and the limit on its top time bins.
    group: Option<(VectorGroup, Option<RowFilter>, Option<TopGroups>)>,
    lastpoint: Option<LastPoint>,
    /// The filter's vectorizable form, used to unpack only matching rows.
    rows: Option<RowFilter>,
    /// A projection (and sort, skip, limit) run over columns, building documents last.
    columnar: Option<ColumnarProject>,
    /// `$geoNear` and `$limit`: the nearest measurements found from the location column.
    nearest: Option<NearestK>,
    /// Memory limits of the stages run here (the pipeline's).
    pub limits: MemLimits,
    /// How many leading stages the plan runs; the caller runs the rest.
    pub consumed: usize,
    /// Measurements returned as they are unpacked come out as BSON bytes written from
    /// the columns ([`TsRows::Raw`]); set by a caller that sends them on unchanged.
    pub raw_output: bool,
}

impl TsPlan {
    /// Plans `stages` (an aggregation pipeline; a `find` is `[{$match: filter}]`
    /// followed by what the projection needs).
    pub fn new(stages: &[Document], options: &TimeseriesOptions) -> Result<TsPlan, QueryError> {
        // The column paths (lastpoint, vectorized group, row filter, columnar projection)
        // compare strings by bytes: under a collation every measurement is unpacked and
        // the query crate's filter, sort and group run with the collation.
        let collated = hourglass_query::collation::active();
        if let Some(lp) = LastPoint::parse(stages, options).filter(|_| !collated) {
            return Ok(TsPlan {
                predicate: BucketPredicate::all(),
                filter_spec: Document::new(),
                filter: Filter::match_all(),
                fields: None,
                group: None,
                lastpoint: Some(lp),
                rows: None,
                columnar: None,
                nearest: None,
                limits: MemLimits::default(),
                consumed: 2,
                raw_output: false,
            });
        }
        let mut matches = Vec::new();
        for s in stages {
            match s.get("$match") {
                Some(Bson::Document(m)) if s.len() == 1 => matches.push(m.clone()),
                _ => break,
            }
        }
        let consumed = matches.len();
        let filter_spec = match matches.len() {
            0 => Document::new(),
            1 => matches.remove(0),
            _ => doc! {"$and": matches},
        };
        let predicate = BucketPredicate::from_filter(&filter_spec, options)?;
        let filter = Filter::parse(&filter_spec)?;
        let rest = &stages[consumed..];
        let group = rest
            .first()
            .and_then(|s| s.get_document("$group").ok())
            .and_then(|spec| Some((spec, VectorGroup::parse(spec, options)?)))
            .filter(|_| !collated);
        if let Some((spec, g)) = group {
            let top = TopGroups::parse(spec, &g, &rest[1..], options);
            let rows = RowFilter::from_filter(&filter_spec, options);
            // Everything the filter reads, meta included: a bucket whose columns the row
            // filter cannot decide (arrays) is matched as unpacked documents.
            let fields =
                pipeline_fields(&[doc! {"$match": filter_spec.clone()}, doc! {"$count": "n"}]).map(
                    |read| {
                        let mut fields = g.fields();
                        fields.extend(read);
                        fields.sort();
                        fields.dedup();
                        fields
                    },
                );
            return Ok(TsPlan {
                predicate,
                filter_spec,
                filter,
                fields,
                group: Some((g, rows, top)),
                lastpoint: None,
                rows: None,
                columnar: None,
                nearest: None,
                limits: MemLimits::default(),
                consumed: consumed + 1,
                raw_output: false,
            });
        }
        let rows = RowFilter::from_filter(&filter_spec, options).filter(|_| !collated);
        if let Some(nearest) = NearestK::parse(rest).filter(|_| !collated) {
            return Ok(TsPlan {
                predicate,
                filter_spec,
                filter,
                fields: None,
                group: None,
                lastpoint: None,
                rows,
                columnar: None,
                nearest: Some(nearest),
                limits: MemLimits::default(),
                consumed: consumed + NearestK::STAGES,
                raw_output: false,
            });
        }
        let mut all = vec![doc! {"$match": filter_spec.clone()}];
        all.extend(rest.iter().cloned());
        let fields = pipeline_fields(&all).map(|f| f.into_iter().collect());
        let columnar = ColumnarProject::parse(rest, options).filter(|_| !collated);
        Ok(TsPlan {
            predicate,
            filter_spec,
            filter,
            fields,
            group: None,
            lastpoint: None,
            rows,
            consumed: consumed + columnar.as_ref().map_or(0, |c| c.stages),
            columnar,
            nearest: None,
            limits: MemLimits::default(),
            raw_output: false,
        })
    }

    /// A filtered read (find, count, distinct) followed by `after` (stages whose
    /// field needs limit the decoded columns); nothing else is pushed down.
    pub fn filtered_read(
        filter_spec: &Document,
        after: &[Document],
        options: &TimeseriesOptions,
    ) -> Result<TsPlan, QueryError> {
        let mut all = vec![doc! {"$match": filter_spec.clone()}];
        all.extend(after.iter().cloned());
        Ok(TsPlan {
            predicate: BucketPredicate::from_filter(filter_spec, options)?,
            filter_spec: filter_spec.clone(),
            filter: Filter::parse(filter_spec)?,
            fields: pipeline_fields(&all).map(|f| f.into_iter().collect()),
            group: None,
            lastpoint: None,
            rows: RowFilter::from_filter(filter_spec, options)
                .filter(|_| !hourglass_query::collation::active()),
            columnar: None,
            nearest: None,
            limits: MemLimits::default(),
            consumed: 1,
            raw_output: false,
        })
    }

    /// Hourglass's details of the plan for explain: what runs at bucket level, what was
    /// pushed into the scan and, with `counters`, what the scan did.
    pub fn explain(&self, counters: Option<&ScanCounters>) -> Document {
        let mut bucket_filter = doc! {
            "time": {
                "min": self.predicate.bounds.min.map(bson::DateTime::from_millis),
                "max": self.predicate.bounds.max.map(bson::DateTime::from_millis),
            },
            "meta": self.predicate.meta_spec.clone(),
        };
        let extent = self.predicate.geo_explain();
        if !extent.is_empty() {
            bucket_filter.insert("extent", extent);
        }
        // (The filter on measurements and the fields unpacked are the caller's to show,
        // as mongod's `eventFilter` and `include`/`exclude`.)
        let mut d = doc! {
            "bucketFilter": bucket_filter,
            "vectorizedGroup": self.group.is_some(),
            "lastPoint": self.lastpoint.is_some(),
            "vectorizedFilter": self.group.as_ref().is_some_and(|(_, r, _)| r.is_some()),
            "lateMaterialization": self.columnar.is_some() || self.nearest.is_some(),
            "nearestFromColumns": self.nearest.is_some(),
            "stagesPushedDown": self.consumed as i64,
        };
        if let Some((_, _, Some(top))) = &self.group {
            d.insert("groupTopKeys", top.explain());
        }
        if let Some(c) = counters {
            d.insert(
                "executionStats",
                doc! {
                    "bucketsExamined": ScanCounters::get(&c.buckets_examined) as i64,
                    "bucketsPruned": ScanCounters::get(&c.buckets_pruned) as i64,
                    "bucketsUnpacked": ScanCounters::get(&c.buckets_returned) as i64,
                    "usedMetaIndex": ScanCounters::get(&c.used_meta_index) > 0,
                    "seriesTotal": ScanCounters::get(&c.series_total) as i64,
                    "seriesMatched": ScanCounters::get(&c.series_matched) as i64,
                    "archiveFilesExamined": ScanCounters::get(&c.archive_files_examined) as i64,
                    "archiveFilesPruned": ScanCounters::get(&c.archive_files_pruned) as i64,
                    "archiveRowGroupsExamined": ScanCounters::get(&c.archive_row_groups_examined) as i64,
                    "archiveRowGroupsPruned": ScanCounters::get(&c.archive_row_groups_pruned) as i64,
                    "bucketsPassedOverByDistance": ScanCounters::get(&c.buckets_passed_over) as i64,
                    "bucketsPassedOverByGroupKey": ScanCounters::get(&c.buckets_passed_over_by_key) as i64,
                },
            );
        }
        d
    }
}

type Rows<T> = Box<dyn Iterator<Item = Result<T, StoreError>> + Send>;

/// What a planned read produces: documents, or BSON bytes when the plan asked for raw
/// output and the rows are measurements as stored.
pub enum TsRows {
    Docs(Rows<Document>),
    Raw(Rows<RawRow>),
}

impl TsRows {
    /// The rows as documents (raw rows parsed).
    pub fn documents(self) -> Rows<Document> {
        match self {
            TsRows::Docs(d) => d,
            TsRows::Raw(r) => Box::new(r.map(|r| r.and_then(|d| row_document(&d)))),
        }
    }
}

/// The output of a planned read and the scan's counters.
pub struct TsExecution {
    pub rows: TsRows,
    pub counters: Arc<ScanCounters>,
}

impl TimeseriesStore {
    /// Runs the part of `plan` that reads buckets.
    pub fn execute(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        plan: &TsPlan,
    ) -> Result<TsExecution, StoreError> {
        if let Some(lp) = &plan.lastpoint {
            let latest = self.latest_per_series(buckets, options)?;
            let out = lp.run(latest.into_iter().map(|(_, d)| d).collect())?;
            return Ok(TsExecution {
                rows: TsRows::Docs(Box::new(out.into_iter().map(Ok))),
                counters: Arc::new(ScanCounters::default()),
            });
        }
        let cutoff = match &plan.group {
            Some((group, _, Some(top))) => Some(Cutoff::new(top, group, options)),
            _ => None,
        };
        let order = cutoff.as_ref().map(Cutoff::scan_order).unwrap_or_default();
        let scan = self.scan_fields(
            buckets,
            options,
            &plan.predicate,
            plan.fields.as_deref(),
            order,
        )?;
        let counters = scan.counters.clone();
        let options = options.clone();
        // The fields a bucket is unpacked with when its rows must be matched as documents.
        let wanted: Option<Vec<&str>> = plan
            .fields
            .as_ref()
            .map(|f| f.iter().map(String::as_str).collect());
        if let Some((group, rows, _)) = &plan.group {
            let mask =
                |cols: &Cols<'_>| row_mask(plan, rows.as_ref(), cols, &options, wanted.as_deref());
            let how = parallel::Feed {
                mask: &mask,
                cutoff: cutoff.as_deref(),
            };
            let out = parallel::group(group, scan, &how)?;
            if let Some(c) = &cutoff {
                counters.buckets_passed_over_by_key.fetch_add(
                    c.passed_over.load(std::sync::atomic::Ordering::Relaxed),
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
            return Ok(TsExecution {
                rows: TsRows::Docs(Box::new(out.into_iter().map(Ok))),
                counters,
            });
        }
        if let Some(k) = &plan.nearest {
            let mut run = k.start();
            for view in scan {
                hourglass_query::interrupt::check()?;
                let view = view?;
                let cols = Cols::new(&view);
                let mask = row_mask(plan, plan.rows.as_ref(), &cols, &options, None)?;
                run.feed(&cols, &options, mask.as_deref())?;
            }
            counters
                .buckets_passed_over
                .fetch_add(run.passed_over, std::sync::atomic::Ordering::Relaxed);
            let out = run.finish()?;
            return Ok(TsExecution {
                rows: TsRows::Docs(Box::new(out.into_iter().map(Ok))),
                counters,
            });
        }
        if let Some(c) = &plan.columnar {
            let feed = |run: &mut ColumnarRun<'_>, view: &BucketView| {
                let cols = Cols::new(view);
                let mask = row_mask(plan, plan.rows.as_ref(), &cols, &options, wanted.as_deref())?;
                run.feed(&cols, &options, mask.as_deref())
            };
            let run = parallel::columnar(c, plan.limits, scan, &feed)?;
            let rows = if plan.raw_output {
                TsRows::Raw(Box::new(packed::rows_of(run.finish_raw()?).map(Ok)))
            } else {
                TsRows::Docs(Box::new(run.finish()?.into_iter().map(Ok)))
            };
            return Ok(TsExecution { rows, counters });
        }
        let fields = plan.fields.clone();
        let plan_filter = plan.filter.clone();
        let match_all = plan_filter.is_match_all();
        let rows = plan.rows.clone();
        let time_field = options.time_field.clone();
        // The rows of a bucket that pass, and whether the row filter already decided them
        // (else the filter matches the unpacked documents).
        let mask_of = move |v: &BucketView| -> Result<(Option<Vec<bool>>, bool), StoreError> {
            Ok(match &rows {
                // Only meta conditions: the scan passed the whole bucket.
                Some(r) if r.is_empty() => (None, true),
                Some(r) => {
                    let mask = r.mask(&Cols::new(v), &time_field)?;
                    let decided = mask.is_some();
                    (mask, decided)
                }
                None => (None, match_all),
            })
        };
        let unpack = move |v: &BucketView, raw: bool| -> Result<Unpacked, StoreError> {
            let wanted: Option<Vec<&str>> = fields
                .as_ref()
                .map(|f| f.iter().map(String::as_str).collect());
            let (mask, decided) = mask_of(v)?;
            let (opts, wanted, mask) = (&options, wanted.as_deref(), mask.as_deref());
            Ok(match (raw && decided, decided) {
                (true, _) => Unpacked::Raw(v.unpack_rows_raw(opts, wanted, mask)?),
                (false, true) => Unpacked::Docs(v.unpack_rows(opts, wanted, mask)?),
                (false, false) => {
                    let mut docs = v.unpack_rows(opts, wanted, mask)?;
                    docs.retain(|d| plan_filter.matches(d));
                    Unpacked::Docs(docs)
                }
            })
        };
        let raw = plan.raw_output;
        let rows = scan.map(move |view| view.and_then(|v| unpack(&v, raw)));
        let rows = if raw {
            TsRows::Raw(Box::new(rows.flat_map(|u| match u {
                Ok(u) => u.raw(),
                Err(e) => vec![Err(e)],
            })))
        } else {
            TsRows::Docs(Box::new(rows.flat_map(|u| match u {
                Ok(u) => u.documents(),
                Err(e) => vec![Err(e)],
            })))
        };
        Ok(TsExecution { rows, counters })
    }
}

/// One bucket's rows.
enum Unpacked {
    Docs(Vec<Document>),
    Raw(Vec<RawDocumentBuf>),
}

impl Unpacked {
    fn documents(self) -> Vec<Result<Document, StoreError>> {
        match self {
            Unpacked::Docs(d) => d.into_iter().map(Ok).collect(),
            Unpacked::Raw(r) => r.iter().map(document_of).collect(),
        }
    }

    fn raw(self) -> Vec<Result<RawRow, StoreError>> {
        match self {
            Unpacked::Raw(r) => r.into_iter().map(|r| Ok(r.into())).collect(),
            Unpacked::Docs(d) => d.iter().map(|d| raw_of(d).map(RawRow::from)).collect(),
        }
    }
}

/// A document's BSON bytes.
fn raw_document(d: &Document) -> Result<RawDocumentBuf, String> {
    let bytes = hourglass_query::bson_write::to_vec(d)?;
    RawDocumentBuf::from_bytes(bytes).map_err(|e| e.to_string())
}

fn document_of(d: &RawDocumentBuf) -> Result<Document, StoreError> {
    d.to_document()
        .map_err(|e| StoreError::Ts(TsError::CorruptBucket(e.to_string())))
}

fn row_document(d: &RawRow) -> Result<Document, StoreError> {
    d.to_document()
        .map_err(|e| StoreError::Ts(TsError::CorruptBucket(e.to_string())))
}

fn raw_of(d: &Document) -> Result<RawDocumentBuf, StoreError> {
    raw_document(d).map_err(|e| StoreError::Ts(TsError::CorruptBucket(e)))
}

/// The rows of a bucket that pass the plan's filter (`None`: all of them): decided on the
/// columns when the row filter can, else by matching unpacked documents.
fn row_mask(
    plan: &TsPlan,
    rows: Option<&RowFilter>,
    cols: &Cols<'_>,
    options: &TimeseriesOptions,
    wanted: Option<&[&str]>,
) -> Result<Option<Vec<bool>>, StoreError> {
    if let Some(r) = rows {
        if let Some(mask) = r.mask(cols, &options.time_field)? {
            return Ok(Some(mask));
        }
    }
    if plan.filter.is_match_all() {
        return Ok(None);
    }
    Ok(Some(
        cols.view
            .unpack(options, wanted)?
            .iter()
            .map(|d| plan.filter.matches(d))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_catalog::Catalog;
    use hourglass_query::compare::compare_documents;
    use hourglass_query::pipeline::Pipeline;
    use hourglass_storage::Engine;

    pub(super) const T0: i64 = 1_451_606_400_000;

    /// A time-series collection `cpu` (timeField `time`, metaField `tags`) and its store.
    pub(super) fn cpu() -> (
        tempfile::TempDir,
        Arc<Collection>,
        TimeseriesOptions,
        TimeseriesStore,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        let o = TimeseriesOptions::parse(&doc! {"timeField": "time", "metaField": "tags"}).unwrap();
        let (c, _) = cat
            .create(
                "db",
                "system.buckets.cpu",
                doc! {"timeseries": o.to_document()},
            )
            .unwrap();
        (dir, c, o, TimeseriesStore::default())
    }

    /// [`cpu`] whose buckets close at ten measurements: a few thousand make hundreds of
    /// buckets, past a split scan's serial prefix.
    pub(super) fn ten_per_bucket() -> (
        tempfile::TempDir,
        Arc<Collection>,
        TimeseriesOptions,
        TimeseriesStore,
    ) {
        let (dir, c, o, store) = cpu();
        store.set_limits(crate::bucket_catalog::Limits {
            max_count: 10,
            ..Default::default()
        });
        (dir, c, o, store)
    }

    /// `stages` through the plan, and through the plain document path.
    pub(super) fn both_paths(
        store: &TimeseriesStore,
        c: &Arc<Collection>,
        o: &TimeseriesOptions,
        stages: &[Document],
    ) -> (Vec<Document>, Vec<Document>, TsPlan) {
        let plan = TsPlan::new(stages, o).unwrap();
        let ex = store.execute(c, o, &plan).unwrap();
        let input: Vec<Document> = ex.rows.documents().collect::<Result<_, _>>().unwrap();
        let fast = Pipeline::parse(&stages[plan.consumed..])
            .unwrap()
            .run(input)
            .unwrap();
        let all: Vec<Document> = store
            .measurements(c, o, &BucketPredicate::all(), None)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let slow = Pipeline::parse(stages).unwrap().run(all).unwrap();
        (fast, slow, plan)
    }

    /// Runs `stages` through the plan and through the plain document path; both must
    /// give the same documents (in any order).
    fn check_same(
        store: &TimeseriesStore,
        c: &Arc<Collection>,
        o: &TimeseriesOptions,
        stages: Vec<Document>,
    ) -> (Vec<Document>, TsPlan) {
        let (mut fast, mut slow, plan) = both_paths(store, c, o, &stages);
        fast.sort_by(compare_documents);
        slow.sort_by(compare_documents);
        assert_eq!(fast, slow, "pipeline {stages:?}");
        (fast, plan)
    }

    #[test]
    fn group_keys_equal_under_mongodb_comparison_form_one_group() {
        let (_dir, c, o, store) = cpu();
        // 1, 1.0 and NumberLong(1) are one key; so are -0.0 and 0; so are {a: 1} and
        // {a: 1.0}; "1" is another.
        let keys = [
            Bson::Int32(1),
            Bson::Double(1.0),
            Bson::Int64(1),
            Bson::Double(-0.0),
            Bson::Int32(0),
            Bson::String("1".into()),
            Bson::Document(doc! {"a": 1}),
            Bson::Document(doc! {"a": 1.0}),
        ];
        let docs: Vec<Document> = (0..400i64)
            .map(|i| {
                doc! {
                    "time": bson::DateTime::from_millis(T0 + i * 1_000),
                    // One series: rows reach both paths in the same order, so both keep
                    // the same first-seen value of a key.
                    "tags": {"hostname": "host_0"},
                    "k": keys[(i % 8) as usize].clone(),
                    "v": (i % 10) as f64,
                }
            })
            .collect();
        store.insert_docs(&c, &o, docs, true).unwrap();
        let stages = [doc! {"$group": {"_id": "$k", "s": {"$sum": "$v"}, "c": {"$count": {}}}}];
        let (fast, plan) = check_same(&store, &c, &o, stages.to_vec());
        assert!(plan.group.is_some());
        assert_eq!(fast.len(), 4, "{fast:?}");
    }

    #[test]
    fn vectorized_group_and_pruned_scan_equal_the_document_path() {
        let (_dir, c, o, store) = cpu();
        let mut docs = Vec::new();
        for i in 0..6000i64 {
            let host = i % 5;
            let mut d = doc! {
                "time": bson::DateTime::from_millis(T0 + (i / 5) * 10_000),
                "tags": {"hostname": format!("host_{host}"), "rack": host % 2},
                "usage_user": ((i * 7919) % 1000) as f64 / 10.0,
            };
            match i % 7 {
                0 => {}
                1 => {
                    d.insert("n", i);
                }
                _ => {
                    d.insert("n", (i % 13) as i32);
                }
            }
            docs.push(d);
        }
        store.insert_docs(&c, &o, docs, true).unwrap();
        let t = |m: i64| bson::DateTime::from_millis(T0 + m * 60_000);
        let (out, plan) = check_same(
            &store,
            &c,
            &o,
            vec![
                doc! {"$match": {"tags.hostname": "host_3", "time": {"$gte": t(60), "$lt": t(120)}}},
                doc! {"$group": {"_id": {"$dateTrunc": {"date": "$time", "unit": "minute"}}, "m": {"$max": "$usage_user"}, "c": {"$count": {}}}},
                doc! {"$sort": {"_id": 1}},
            ],
        );
        assert_eq!(out.len(), 60);
        assert_eq!(plan.consumed, 2);
        assert_eq!(
            plan.fields.as_deref().unwrap(),
            ["tags", "time", "usage_user"]
        );
        check_same(
            &store,
            &c,
            &o,
            vec![
                doc! {"$match": {"time": {"$gte": t(10), "$lt": t(100)}}},
                doc! {"$group": {"_id": {"h": {"$dateTrunc": {"date": "$time", "unit": "minute", "binSize": 7}}, "host": "$tags.hostname"}, "a": {"$avg": "$usage_user"}, "s": {"$sum": "$n"}, "f": {"$first": "$n"}, "l": {"$last": "$usage_user"}, "mn": {"$min": "$n"}}},
            ],
        );
        // Buckets whose time range lies in one bin are fed whole to one group, also when
        // the time filter selects part of a bucket.
        for unit in ["hour", "day"] {
            check_same(
                &store,
                &c,
                &o,
                vec![
                    doc! {"$match": {"time": {"$gte": t(10), "$lt": t(250)}}},
                    doc! {"$group": {"_id": {"h": "$tags.hostname", "t": {"$dateTrunc": {"date": "$time", "unit": unit}}}, "a": {"$avg": "$usage_user"}, "mx": {"$max": "$usage_user"}, "s": {"$sum": "$n"}, "c": {"$count": {}}, "f": {"$first": "$n"}, "l": {"$last": "$time"}}},
                ],
            );
        }
        check_same(
            &store,
            &c,
            &o,
            vec![
                doc! {"$match": {"usage_user": {"$gt": 90}, "tags.rack": 1}},
                doc! {"$group": {"_id": "$n", "k": {"$sum": 1}, "r": {"$max": "$tags.rack"}}},
            ],
        );
        check_same(
            &store,
            &c,
            &o,
            vec![
                doc! {"$match": {"$or": [{"n": 3}, {"usage_user": {"$lt": 1}}]}},
                doc! {"$group": {"_id": null, "k": {"$sum": "$usage_user"}}},
            ],
        );
        let (_, plan) = check_same(
            &store,
            &c,
            &o,
            vec![
                doc! {"$match": {"usage_user": {"$gt": 99}}},
                doc! {"$project": {"usage_user": 1, "_id": 0}},
            ],
        );
        assert!(plan.group.is_none());
        check_same(&store, &c, &o, vec![doc! {"$count": "n"}]);
        let (out, plan) = check_same(
            &store,
            &c,
            &o,
            vec![
                doc! {"$sort": {"tags.hostname": 1, "time": -1}},
                doc! {"$group": {"_id": "$tags.hostname", "last": {"$first": "$$ROOT"}, "u": {"$first": "$usage_user"}}},
            ],
        );
        assert!(plan.lastpoint.is_some());
        assert_eq!(out.len(), 5);
        let (_, plan) = check_same(
            &store,
            &c,
            &o,
            vec![
                doc! {"$sort": {"time": -1}},
                doc! {"$group": {"_id": {"r": "$tags.rack"}, "t": {"$first": "$time"}}},
            ],
        );
        assert!(plan.lastpoint.is_some());
        let (_, plan) = check_same(
            &store,
            &c,
            &o,
            vec![
                doc! {"$sort": {"tags.rack": 1, "time": -1}},
                doc! {"$group": {"_id": "$tags.hostname", "t": {"$first": "$time"}}},
            ],
        );
        assert!(
            plan.lastpoint.is_none(),
            "grouping by other paths than the sort is not a last point"
        );
        let (_, plan) = check_same(
            &store,
            &c,
            &o,
            vec![
                doc! {"$match": {"tags.hostname": {"$in": ["host_1", "host_4"]}}},
                doc! {"$count": "n"},
            ],
        );
        assert_eq!(plan.fields.as_deref().unwrap(), ["tags"]);
    }

    #[test]
    fn a_group_split_across_threads_equals_one_run_in_values_and_order() {
        // Ten measurements per bucket: 3,000 measurements are 300 buckets, past the
        // serial prefix, so the scan is split whenever the machine has two cores.
        let (_dir, c, o, store) = ten_per_bucket();
        let docs: Vec<Document> = (0..3000i64)
            .map(|i| {
                doc! {
                    "time": bson::DateTime::from_millis(T0 + (i / 3) * 10_000),
                    "tags": {"hostname": format!("host_{}", i % 3)},
                    // Whole numbers: sums are exact whatever the order of addition.
                    "v": ((i * 7919) % 1000) as f64,
                    "n": (i % 11) as i32,
                }
            })
            .collect();
        store.insert_docs(&c, &o, docs, true).unwrap();
        assert!(
            store.scan(&c, &o, &BucketPredicate::all()).unwrap().count() as u64
                > 2 * parallel::SERIAL_BUCKETS
        );
        for group in [
            doc! {"$group": {"_id": {"h": "$tags.hostname", "t": {"$dateTrunc": {"date": "$time", "unit": "minute", "binSize": 5}}}, "mx": {"$max": "$v"}, "mn": {"$min": "$n"}, "a": {"$avg": "$v"}, "s": {"$sum": "$n"}, "c": {"$count": {}}}},
            doc! {"$group": {"_id": "$n", "s": {"$sum": "$v"}, "mx": {"$max": "$tags.hostname"}}},
            doc! {"$group": {"_id": "$tags.hostname", "f": {"$first": "$v"}, "l": {"$last": "$n"}}},
        ] {
            let (fast, slow, plan) = both_paths(&store, &c, &o, std::slice::from_ref(&group));
            assert!(plan.group.is_some());
            assert_eq!(fast, slow, "values and order of {group:?}");
        }
    }

    #[test]
    fn a_split_scan_prunes_and_counts_buckets_as_one_thread_reading_it_does() {
        // 300 buckets of ten measurements whose `v` grows with time: `v > 2000` rules out
        // the first two thirds of the buckets by their control max. Past the serial
        // prefix the workers parse and prune them (split when the machine has two cores).
        let (_dir, c, o, store) = ten_per_bucket();
        let docs: Vec<Document> = (0..3000i64)
            .map(|i| {
                doc! {
                    "time": bson::DateTime::from_millis(T0 + i * 10_000),
                    "tags": {"hostname": "h"},
                    "v": i as f64,
                }
            })
            .collect();
        store.insert_docs(&c, &o, docs, true).unwrap();
        store.close_all().unwrap();
        let stages = [
            doc! {"$match": {"v": {"$gt": 2000.0}}},
            doc! {"$project": {"_id": 0, "time": 1, "v": 1}},
            doc! {"$sort": {"v": -1}},
        ];
        let plan = TsPlan::new(&stages, &o).unwrap();
        assert!(plan.columnar.is_some());
        let ex = store.execute(&c, &o, &plan).unwrap();
        let rows: Vec<Document> = ex.rows.documents().collect::<Result<_, _>>().unwrap();
        assert_eq!(rows.len(), 999);
        assert_eq!(
            rows[0],
            doc! {"time": bson::DateTime::from_millis(T0 + 2999 * 10_000), "v": 2999.0}
        );
        let mut serial = store.scan(&c, &o, &plan.predicate).unwrap();
        let returned = serial.by_ref().count() as u64;
        let (split, one) = (&ex.counters, &serial.counters);
        for (name, a, b) in [
            ("examined", &split.buckets_examined, &one.buckets_examined),
            ("pruned", &split.buckets_pruned, &one.buckets_pruned),
            ("returned", &split.buckets_returned, &one.buckets_returned),
        ] {
            assert_eq!(ScanCounters::get(a), ScanCounters::get(b), "buckets {name}");
        }
        assert_eq!(ScanCounters::get(&split.buckets_returned), returned);
        assert!(ScanCounters::get(&split.buckets_pruned) > 2 * parallel::SERIAL_BUCKETS);
    }

    #[test]
    fn late_materialized_projection_equals_the_document_path_in_order() {
        let (_dir, c, o, store) = cpu();
        let mut docs = Vec::new();
        for i in 0..3000i64 {
            let host = i % 7;
            let mut d = doc! {
                "_id": i,
                "time": bson::DateTime::from_millis(T0 + (i / 7) * 10_000),
                "tags": {"hostname": format!("host_{host}"), "rack": host % 3},
                "u": ((i * 7919) % 1000) as f64 / 10.0,
            };
            match i % 11 {
                0 => {}
                1 => {
                    d.insert("v", vec![Bson::Int64(i % 4), Bson::Int64(3)]);
                }
                2 => {
                    d.insert("v", "text");
                }
                _ => {
                    d.insert("v", i % 5);
                }
            }
            docs.push(d);
        }
        // Half the measurements in stored (compressed) buckets, half in open ones.
        let open = docs.split_off(1500);
        store.insert_docs(&c, &o, docs, true).unwrap();
        store.close_all().unwrap();
        store.insert_docs(&c, &o, open, true).unwrap();
        let m = doc! {"$match": {"u": {"$gt": 50.0}}};
        let mut raw_checked = 0;
        let cases: Vec<Vec<Document>> = vec![
            vec![
                doc! {"$project": {"_id": 0, "time": 1, "host": "$tags.hostname", "u": 1}},
                doc! {"$sort": {"time": 1, "host": 1}},
            ],
            vec![
                doc! {"$project": {"u": 1, "v": 1}},
                doc! {"$sort": {"u": -1}},
                doc! {"$skip": 3},
                doc! {"$limit": 40},
            ],
            // v mixes numbers, strings, arrays and missing: MongoDB's comparison decides.
            vec![
                doc! {"$project": {"v": 1, "time": 1}},
                doc! {"$sort": {"v": 1, "time": -1}},
                doc! {"$limit": 25},
            ],
            vec![
                doc! {"$project": {"tags": 1, "r": {"$multiply": ["$tags.rack", 10]}}},
                doc! {"$limit": 10},
            ],
            vec![
                doc! {"$project": {"x": "$v", "t": "$time"}},
                doc! {"$sort": {"x": -1, "t": 1}},
            ],
            vec![
                doc! {"$project": {"_id": 1, "u": 1}},
                doc! {"$sort": {"u": 1}},
                doc! {"$limit": 5},
                doc! {"$count": "n"},
            ],
        ];
        for rest in cases {
            let mut stages = vec![m.clone()];
            stages.extend(rest);
            let (fast, slow, plan) = both_paths(&store, &c, &o, &stages);
            assert!(plan.columnar.is_some(), "{stages:?}");
            let fields = |v: &[Document]| {
                v.iter()
                    .map(|d| {
                        d.iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect::<Vec<_>>()
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(fields(&fast), fields(&slow), "{stages:?}");
            assert!(!fast.is_empty());
            if plan.consumed == stages.len() {
                let mut plan = plan;
                plan.raw_output = true;
                let TsRows::Raw(raw) = store.execute(&c, &o, &plan).unwrap().rows else {
                    panic!("raw output was asked for");
                };
                let raw: Vec<Document> = raw.map(|r| r.unwrap().to_document().unwrap()).collect();
                assert_eq!(fields(&raw), fields(&fast), "raw {stages:?}");
                raw_checked += 1;
            }
        }
        assert_eq!(raw_checked, 5);
    }

    #[test]
    fn raw_output_holds_the_same_documents_as_the_document_path_field_for_field() {
        let (_dir, c, o, store) = cpu();
        let mut docs = Vec::new();
        for i in 0..2000i64 {
            let mut d = doc! {
                "time": bson::DateTime::from_millis(T0 + (i / 4) * 10_000),
                "tags": {"hostname": format!("host_{}", i % 4), "rack": i % 3},
                "u": ((i * 7919) % 1000) as f64 / 10.0,
            };
            match i % 5 {
                0 => {}
                1 => {
                    d.insert("v", vec![Bson::Int64(i % 4), Bson::String("s".into())]);
                }
                2 => {
                    d.insert("v", doc! {"x": i, "y": null});
                }
                _ => {
                    d.insert("v", i as i32);
                }
            }
            docs.push(d);
        }
        let open = docs.split_off(1000);
        store.insert_docs(&c, &o, docs, true).unwrap();
        store.close_all().unwrap();
        store.insert_docs(&c, &o, open, true).unwrap();
        // Filters the row filter decides, one it cannot (an array field), meta only, none.
        for filter in [
            doc! {"u": {"$gt": 50.0}},
            doc! {"v": {"$gte": 2}},
            doc! {"tags.rack": 1},
            doc! {},
        ] {
            for after in [vec![], vec![doc! {"$project": {"u": 1, "_id": 0}}]] {
                let mut plan = TsPlan::filtered_read(&filter, &after, &o).unwrap();
                let docs: Vec<Document> = store
                    .execute(&c, &o, &plan)
                    .unwrap()
                    .rows
                    .documents()
                    .collect::<Result<_, _>>()
                    .unwrap();
                plan.raw_output = true;
                let raw = match store.execute(&c, &o, &plan).unwrap().rows {
                    TsRows::Raw(r) => r.collect::<Result<Vec<_>, _>>().unwrap(),
                    TsRows::Docs(_) => panic!("raw output was asked for"),
                };
                // Field order counts; open buckets may come in another order per scan.
                let fields_of = |d: Document| format!("{:?}", d.into_iter().collect::<Vec<_>>());
                let mut parsed: Vec<String> = raw
                    .iter()
                    .map(|r| fields_of(r.to_document().unwrap()))
                    .collect();
                let mut expected: Vec<String> = docs.into_iter().map(fields_of).collect();
                parsed.sort();
                expected.sort();
                assert!(!expected.is_empty(), "{filter:?}");
                assert_eq!(parsed.len(), expected.len(), "{filter:?} {after:?}");
                if let Some(i) = (0..parsed.len()).find(|&i| parsed[i] != expected[i]) {
                    panic!(
                        "{filter:?} {after:?} row {i}: {:?} != {:?}",
                        parsed[i], expected[i]
                    );
                }
            }
        }
    }
}
