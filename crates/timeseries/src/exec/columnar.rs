//! Late materialization of a projection over bucket columns: a `$project` that includes
//! top-level fields and computes fields that are field references or read only the meta
//! field, then an optional `$sort` on the projected fields and `$skip`/`$limit`. Rows are
//! gathered as column values (a meta-only expression is evaluated once per bucket),
//! ordered by Arrow's lexicographic sort kernel when every sort key holds one type, and a
//! document is built only for each row returned. Output equals the document path's:
//! included fields in the measurement's unpack order, computed fields after them in the
//! specification's order, ties of the sort in scan order.

use super::col::Cols;
use super::count_arg;
use super::gathered::{Gathered, Gathering};
use super::packed::PackedRows;
use super::packed_sort::packed_order;
use crate::options::TimeseriesOptions;
use crate::store::{BucketView, StoreError};
use arrow_array::UInt32Array;
use arrow_ord::sort::{lexsort_to_indices, SortColumn};
use arrow_schema::SortOptions;
use bson::{Bson, Document};
use hourglass_query::bson_write;
use hourglass_query::expr::Expr;
use hourglass_query::pipeline::mem::MemLimits;
use hourglass_query::projection::Projection;
use hourglass_query::sort::SortSpec;
use hourglass_query::QueryError;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Rows a writing thread takes at least (see [`Output::write_rows`]): fewer take well
/// under a millisecond on one thread. The unit tests' small outputs are split too.
const ROWS_PER_WRITER: usize = if cfg!(test) { 64 } else { 8 * 1024 };

/// Where an output field's value comes from.
#[derive(Debug, Clone)]
enum Source {
    /// A top-level field of the measurement (the time field, the meta field or a
    /// measurement column), taken as it is.
    Field(String),
    /// The meta field, included: one value per bucket.
    Meta,
    /// An expression reading only the meta field (or nothing): one value per bucket.
    PerBucket(Expr),
}

/// The pushed-down `$project` [+ `$sort`] [+ `$skip`] [+ `$limit`].
#[derive(Debug, Clone)]
pub struct ColumnarProject {
    /// Output fields: (name, source, computed). Included fields come first.
    outputs: Vec<(String, Source, bool)>,
    sort: Option<(SortSpec, Vec<(usize, bool)>)>,
    skip: usize,
    limit: Option<usize>,
    /// How many stages this runs.
    pub stages: usize,
}

impl ColumnarProject {
    /// The pushed-down form of the leading stages of `rest`, or `None` when they do not
    /// start with a projection of the supported shape.
    pub fn parse(rest: &[Document], options: &TimeseriesOptions) -> Option<ColumnarProject> {
        let spec = rest.first()?.get_document("$project").ok()?;
        let projection = Projection::parse(spec).ok()?;
        if !projection.is_inclusion() {
            return None;
        }
        let meta = options.meta_field.as_deref();
        let mut outputs = Vec::new();
        let mut computed = Vec::new();
        for (k, v) in spec {
            if k.contains('.') {
                return None;
            }
            let is_flag = matches!(
                v,
                Bson::Boolean(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)
            );
            if k == "_id" {
                if is_flag {
                    continue;
                }
                return None;
            }
            if is_flag {
                let source = match Some(k.as_str()) == meta {
                    true => Source::Meta,
                    false => Source::Field(k.clone()),
                };
                outputs.push((k.clone(), source, false));
                continue;
            }
            // A sub-projection (`{a: {b: 1}}`), not an expression.
            if let Bson::Document(d) = v {
                if !d.keys().next().is_some_and(|op| op.starts_with('$')) {
                    return None;
                }
            }
            let source = match v {
                Bson::String(s) if s.starts_with('$') && !s.starts_with("$$") => {
                    let path = &s[1..];
                    match path.split_once('.') {
                        None if Some(path) != meta => Source::Field(path.to_string()),
                        _ if path.split('.').next() == meta => {
                            Source::PerBucket(Expr::parse(v).ok()?)
                        }
                        _ => return None,
                    }
                }
                _ => {
                    let mut read = BTreeSet::new();
                    hourglass_query::pipeline::deps::expr_fields(v, &mut read)?;
                    if read.iter().any(|f| Some(f.as_str()) != meta) {
                        return None;
                    }
                    Source::PerBucket(Expr::parse(v).ok()?)
                }
            };
            computed.push((k.clone(), source, true));
        }
        if !projection.excludes_id() {
            outputs.push(("_id".to_string(), Source::Field("_id".to_string()), false));
        }
        outputs.extend(computed);
        let mut plan = ColumnarProject {
            outputs,
            sort: None,
            skip: 0,
            limit: None,
            stages: 1,
        };
        let mut next = rest.get(1);
        if let Some(spec) = next.and_then(|s| s.get_document("$sort").ok()) {
            let parsed = SortSpec::parse(spec).ok()?;
            let mut keys = Vec::new();
            for (path, asc) in parsed.keys() {
                let slot = plan.outputs.iter().position(|(n, ..)| n == path)?;
                keys.push((slot, *asc));
            }
            plan.sort = Some((parsed, keys));
            plan.stages += 1;
            next = rest.get(plan.stages);
        }
        if let Some(n) = next.and_then(|s| s.get("$skip")).and_then(count_arg) {
            plan.skip = n;
            plan.stages += 1;
            next = rest.get(plan.stages);
        }
        if let Some(n) = next.and_then(|s| s.get("$limit")).and_then(count_arg) {
            if n > 0 {
                plan.limit = Some(n);
                plan.stages += 1;
            }
        }
        Some(plan)
    }

    /// Starts a run.
    pub fn start(&self, limits: MemLimits) -> ColumnarRun<'_> {
        ColumnarRun {
            plan: self,
            limits,
            columns: self
                .outputs
                .iter()
                .map(|(_, source, _)| match source {
                    Source::Field(_) => Gathering::per_row(),
                    Source::Meta | Source::PerBucket(_) => Gathering::per_bucket(),
                })
                .collect(),
            bucket_of_row: Vec::new(),
            orders: Vec::new(),
            bytes: 0,
        }
    }

    /// Whether runs over parts of the scan may be appended into one: only when the scan
    /// never stops early.
    pub fn splittable(&self) -> bool {
        self.enough().is_none()
    }

    /// Rows gathered before the scan may stop (no sort: `skip + limit`).
    fn enough(&self) -> Option<usize> {
        match (&self.sort, self.limit) {
            (None, Some(l)) => Some(self.skip.saturating_add(l)),
            _ => None,
        }
    }
}

/// The values gathered so far, column by column.
pub struct ColumnarRun<'a> {
    plan: &'a ColumnarProject,
    limits: MemLimits,
    columns: Vec<Gathering>,
    bucket_of_row: Vec<u32>,
    /// Per bucket: the output slots in the order a document of that bucket lists them.
    orders: Vec<Arc<Vec<usize>>>,
    bytes: u64,
}

impl<'a> ColumnarRun<'a> {
    /// True when no more rows are needed.
    pub fn is_done(&self) -> bool {
        self.plan
            .enough()
            .is_some_and(|n| self.bucket_of_row.len() >= n)
    }

    /// Gathers the rows of one bucket selected by `mask` (every row when `None`).
    pub fn feed(
        &mut self,
        cols: &Cols<'_>,
        options: &TimeseriesOptions,
        mask: Option<&[bool]>,
    ) -> Result<(), StoreError> {
        let view: &BucketView = cols.view;
        let rows: Vec<usize> = (0..view.count())
            .filter(|i| mask.is_none_or(|m| m.get(*i).copied().unwrap_or(false)))
            .collect();
        let rows = match self.plan.enough() {
            Some(n) => &rows[..rows.len().min(n.saturating_sub(self.bucket_of_row.len()))],
            None => &rows[..],
        };
        // Expressions run only for measurements that reach the projection (an error on a
        // bucket none of whose rows pass must not fail the query).
        if rows.is_empty() {
            return Ok(());
        }
        let meta_field = options.meta_field.as_deref();
        let meta_doc = match (meta_field, view.meta()) {
            (Some(mf), Some(m)) => bson::doc! {mf: m.clone()},
            _ => Document::new(),
        };
        let order = self.bucket_order(view, options);
        self.orders.push(Arc::new(order));
        let bucket = u32::try_from(self.orders.len() - 1).unwrap_or(u32::MAX);
        for ((_, source, _), column) in self.plan.outputs.iter().zip(&mut self.columns) {
            self.bytes += match source {
                Source::Meta => column.append_bucket(view.meta().cloned(), rows.len()),
                Source::Field(f) => column.append_rows(&*cols.get(f)?, rows),
                Source::PerBucket(e) => {
                    column.append_bucket(e.eval_optional(&meta_doc)?, rows.len())
                }
            };
        }
        self.bucket_of_row
            .extend(std::iter::repeat_n(bucket, rows.len()));
        if self.plan.sort.is_some() {
            self.limits.check_sort(self.bytes)?;
        }
        Ok(())
    }

    /// Appends `later`, a run over buckets that follow this run's in the scan.
    pub fn append(&mut self, later: ColumnarRun<'a>) -> Result<(), StoreError> {
        let offset = u32::try_from(self.orders.len()).unwrap_or(u32::MAX);
        self.bucket_of_row
            .extend(later.bucket_of_row.iter().map(|b| b.saturating_add(offset)));
        self.orders.extend(later.orders);
        for (column, more) in self.columns.iter_mut().zip(later.columns) {
            column.append(more);
        }
        self.bytes += later.bytes;
        if self.plan.sort.is_some() {
            self.limits.check_sort(self.bytes)?;
        }
        Ok(())
    }

    /// The output slots in the order the document path lists them for a measurement of
    /// `view`: included fields in unpack order (time, meta, then the bucket's columns),
    /// then computed fields.
    fn bucket_order(&self, view: &BucketView, options: &TimeseriesOptions) -> Vec<usize> {
        let mut unpack: Vec<&str> = vec![options.time_field.as_str()];
        unpack.extend(options.meta_field.as_deref());
        unpack.extend(
            view.field_names()
                .into_iter()
                .filter(|f| *f != options.time_field),
        );
        let included = |name: &str| {
            self.plan
                .outputs
                .iter()
                .position(|(n, _, computed)| !computed && n == name)
        };
        let mut order: Vec<usize> = unpack.into_iter().filter_map(included).collect();
        order.extend(
            self.plan
                .outputs
                .iter()
                .enumerate()
                .filter(|(_, (.., computed))| *computed)
                .map(|(i, _)| i),
        );
        order
    }

    /// The documents, ordered, skipped and limited.
    pub fn finish(self) -> Result<Vec<Document>, QueryError> {
        let out = self.gathered();
        Ok(match out.order()? {
            Ordered::Rows(rows) => rows.into_iter().map(|r| out.build(r)).collect(),
            Ordered::Docs(docs) => docs,
        })
    }

    /// [`ColumnarRun::finish`] as BSON bytes, written from the gathered values into
    /// buffers of consecutive rows (one per writing thread; see [`Output::write_rows`]).
    pub fn finish_raw(self) -> Result<Vec<PackedRows>, QueryError> {
        let bad = |e: String| QueryError::Coded(1, e);
        let out = self.gathered();
        // Each output name as a BSON key (its bytes and a NUL), checked once.
        let names: Vec<Vec<u8>> = out
            .plan
            .outputs
            .iter()
            .map(|(name, ..)| {
                let mut key = Vec::with_capacity(name.len() + 1);
                bson_write::write_cstring(name, &mut key).map(|()| key)
            })
            .collect::<Result<_, _>>()
            .map_err(bad)?;
        match out.order()? {
            Ordered::Rows(rows) => out.write_rows(&rows, &names).map_err(bad),
            Ordered::Docs(docs) => {
                let mut packed = PackedRows::default();
                for d in &docs {
                    packed.push_document(d).map_err(bad)?;
                }
                Ok(vec![packed])
            }
        }
    }

    fn gathered(self) -> Output<'a> {
        Output {
            plan: self.plan,
            columns: self.columns.into_iter().map(Gathering::finish).collect(),
            bucket_of_row: self.bucket_of_row,
            orders: self.orders,
        }
    }
}

/// The gathered columns, read in the output's order.
struct Output<'a> {
    plan: &'a ColumnarProject,
    columns: Vec<Gathered>,
    bucket_of_row: Vec<u32>,
    orders: Vec<Arc<Vec<usize>>>,
}

impl Output<'_> {
    /// The output's row numbers in order, skipped and limited; or, when a sort key needs
    /// MongoDB's comparison on documents (mixed types, arrays, NaN), the documents
    /// themselves sorted that way.
    fn order(&self) -> Result<Ordered, QueryError> {
        let n = self.bucket_of_row.len();
        let plan = self.plan;
        let fetch = plan.limit.map(|l| l.saturating_add(plan.skip).min(n));
        let rows: Vec<usize> = match &plan.sort {
            None => (0..n).collect(),
            Some((spec, keys)) => match self.sort_columns(keys) {
                Some(columns) => match packed_order(&columns[..keys.len()], n) {
                    Some(order) => order.into_iter().map(|i| i as usize).collect(),
                    None => lexsort_to_indices(&columns, fetch)
                        .map_err(|e| QueryError::Coded(1, e.to_string()))?
                        .values()
                        .iter()
                        .map(|&i| i as usize)
                        .collect(),
                },
                None => {
                    let docs = (0..n).map(|r| self.build(r)).collect();
                    let k = plan
                        .limit
                        .map_or(usize::MAX, |l| l.saturating_add(plan.skip));
                    let docs = spec.top_k(docs, k);
                    return Ok(Ordered::Docs(self.window(docs)));
                }
            },
        };
        Ok(Ordered::Rows(self.window(rows)))
    }

    fn window<T>(&self, items: Vec<T>) -> Vec<T> {
        let items = items.into_iter().skip(self.plan.skip);
        match self.plan.limit {
            Some(l) => items.take(l).collect(),
            None => items.collect(),
        }
    }

    /// Row `r`'s bucket and the output slots in the order its document lists them.
    fn slots_of(&self, r: usize) -> (usize, &[usize]) {
        let bucket = self.bucket_of_row.get(r).copied().unwrap_or(0) as usize;
        let order = self.orders.get(bucket).map_or(&[][..], |o| o.as_slice());
        (bucket, order)
    }

    /// Row `r` as a document.
    fn build(&self, r: usize) -> Document {
        let (bucket, order) = self.slots_of(r);
        let mut d = Document::new();
        for &slot in order {
            let value = self.columns.get(slot).and_then(|c| c.cell(r, bucket));
            if let (Some(v), Some((name, ..))) = (value, self.plan.outputs.get(slot)) {
                d.insert(name.clone(), v.into_owned());
            }
        }
        d
    }

    /// Writes the output fields of row `r` in order as BSON elements (`names`: each
    /// output's key bytes).
    fn write_row(&self, r: usize, names: &[Vec<u8>], out: &mut Vec<u8>) -> Result<(), String> {
        let (bucket, order) = self.slots_of(r);
        for &slot in order {
            if let (Some(column), Some(name)) = (self.columns.get(slot), names.get(slot)) {
                column.write_cell(r, bucket, name, out)?;
            }
        }
        Ok(())
    }

    /// Writes `rows` in order as BSON documents. Past [`ROWS_PER_WRITER`] rows a thread,
    /// the rows are cut into consecutive parts written at once by several threads (the
    /// client waits for the first batch meanwhile, and writing is a fifth of a large
    /// projected sort's time); the parts, in order, hold the rows in order.
    fn write_rows(&self, rows: &[usize], names: &[Vec<u8>]) -> Result<Vec<PackedRows>, String> {
        // A row is about its names and 16 bytes a value.
        let per_row = 5 + names.iter().map(|n| n.len() + 17).sum::<usize>();
        let write = |part: &[usize]| -> Result<PackedRows, String> {
            let mut packed = PackedRows::with_capacity(part.len(), part.len() * per_row);
            for &r in part {
                packed.push(|buf| self.write_row(r, names, buf))?;
            }
            Ok(packed)
        };
        let writers = crate::threads::workers().min(rows.len() / ROWS_PER_WRITER);
        if writers < 2 {
            return Ok(vec![write(rows)?]);
        }
        let mut parts = rows.chunks(rows.len().div_ceil(writers));
        let first = parts.next().unwrap_or_default();
        std::thread::scope(|s| {
            let others: Vec<_> = parts.map(|p| s.spawn(move || write(p))).collect();
            let mut written = vec![write(first)];
            for h in others {
                written.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            }
            written.into_iter().collect()
        })
    }

    /// Arrow sort columns for the keys, when each key's values are of one type that
    /// Arrow orders as MongoDB does; the row number last, so ties keep scan order.
    fn sort_columns(&self, keys: &[(usize, bool)]) -> Option<Vec<SortColumn>> {
        let mut columns = Vec::with_capacity(keys.len() + 1);
        for &(slot, asc) in keys {
            columns.push(SortColumn {
                values: self.columns.get(slot)?.sort_key(&self.bucket_of_row)?,
                // Missing and null sort before every value ascending, after it descending.
                options: Some(SortOptions {
                    descending: !asc,
                    nulls_first: asc,
                }),
            });
        }
        let n = u32::try_from(self.bucket_of_row.len()).ok()?;
        columns.push(SortColumn {
            values: Arc::new(UInt32Array::from_iter_values(0..n)),
            options: None,
        });
        Some(columns)
    }
}

/// What [`Output::order`] gives.
enum Ordered {
    Rows(Vec<usize>),
    Docs(Vec<Document>),
}
