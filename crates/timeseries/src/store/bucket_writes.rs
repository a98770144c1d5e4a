//! Deletes, updates and findAndModify of `system.buckets.<coll>` documents, as MongoDB
//! allows them on the buckets collection. Each bucket is matched as the document a read
//! of the buckets shows (`to_document`); a delete removes it whole, an update rewrites it
//! whole from the updated document, checked as an inserted bucket is
//! (`restore::parse_bucket`: 121 or 2) with the same `_id` (66). The series lock is held
//! throughout, nothing is written when one document fails, and every change of one
//! command is one durable batch. Archived rows are not buckets any more (reads do not
//! show them) and are left alone. There is no upsert: callers refuse it.

use super::modify::{commit_rewrites, lock_settled, Rewrite};
use super::scan::scan_locked;
use super::{BucketPredicate, BucketView, DeleteOutcome, StoreError, TimeseriesStore};
use crate::options::TimeseriesOptions;
use bson::Document;
use hourglass_catalog::writes::{FindAndModify, FindAndModifyOutcome, UpdateOutcome};
use hourglass_catalog::Collection;
use hourglass_query::filter::Filter;
use hourglass_query::sort::SortSpec;
use hourglass_query::update::Update;
use hourglass_query::QueryError;
use std::sync::Arc;

/// Which bucket documents a command changes, and how.
struct Change<'a> {
    filter: &'a Filter,
    /// `None`: delete.
    update: Option<&'a Update>,
    /// Every match, or only the first (in `sort` order when given, else scan order).
    multi: bool,
    sort: Option<&'a SortSpec>,
}

/// What a change did: the documents it matched, before and after (none after a delete).
struct Changed {
    matched: u64,
    modified: u64,
    first: Option<(Document, Option<Document>)>,
}

/// The bucket document of a view, or None for archived rows.
fn document_of(view: &BucketView) -> Result<Option<Document>, StoreError> {
    Ok(match view {
        BucketView::Stored(b) => Some(b.to_document()?),
        BucketView::Open(b) => Some(b.to_document(false)),
        BucketView::Archived(_) => None,
    })
}

impl TimeseriesStore {
    fn change_buckets(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        change: Change<'_>,
    ) -> Result<Changed, StoreError> {
        let series = self.series(buckets, options)?;
        let geo_fields = Self::geo_fields(buckets, options)?;
        let mut s = lock_settled(&series);
        let mut hits: Vec<(BucketView, Document)> = Vec::new();
        for view in scan_locked(&mut s, buckets, options, &BucketPredicate::all(), None)? {
            hourglass_query::interrupt::check()?;
            let view = view?;
            if let Some(doc) = document_of(&view)?.filter(|d| change.filter.matches(d)) {
                hits.push((view, doc));
                if !change.multi && change.sort.is_none() {
                    break;
                }
            }
        }
        if let Some(sort) = change.sort {
            hits.sort_by(|a, b| sort.compare(&a.1, &b.1));
        }
        if !change.multi {
            hits.truncate(1);
        }
        let mut out = Changed {
            matched: hits.len() as u64,
            modified: 0,
            first: None,
        };
        let mut rewrites = Vec::new();
        for (view, old) in hits {
            let new = match change.update {
                None => None,
                Some(update) => {
                    let mut new = old.clone();
                    if !update.apply_matched(&mut new, false, Some(change.filter))? {
                        out.first.get_or_insert((old, Some(new)));
                        continue;
                    }
                    if new.get("_id") != old.get("_id") {
                        return Err(QueryError::Coded(
                            66,
                            "Performing an update on the path '_id' would modify the immutable field '_id'".into(),
                        )
                        .into());
                    }
                    Some(new)
                }
            };
            let (remaining, meta) = match &new {
                None => (Vec::new(), view.meta().cloned()),
                Some(new) => {
                    let bucket = super::restore::parse_bucket(new, options, &geo_fields)?;
                    let rows = BucketView::Open(Arc::new(bucket.clone())).unpack(options, None)?;
                    (rows, bucket.meta)
                }
            };
            out.modified += 1;
            out.first.get_or_insert((old, new));
            rewrites.push(Rewrite {
                view,
                remaining,
                meta,
            });
        }
        commit_rewrites(&mut s, buckets, options, rewrites)?;
        Ok(out)
    }

    /// Deletes the bucket documents matching `filter` (the first one when `limit_one`).
    pub fn delete_buckets(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        filter: &Filter,
        limit_one: bool,
    ) -> Result<DeleteOutcome, StoreError> {
        let change = Change {
            filter,
            update: None,
            multi: !limit_one,
            sort: None,
        };
        let out = self.change_buckets(buckets, options, change)?;
        Ok(DeleteOutcome {
            deleted: out.modified,
        })
    }

    /// Updates the bucket documents matching `filter` (every one when `multi`).
    pub fn update_buckets(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        filter: &Filter,
        update: &Update,
        multi: bool,
    ) -> Result<UpdateOutcome, StoreError> {
        let change = Change {
            filter,
            update: Some(update),
            multi,
            sort: None,
        };
        let out = self.change_buckets(buckets, options, change)?;
        Ok(UpdateOutcome {
            matched: out.matched,
            modified: out.modified,
            upserted: None,
        })
    }

    /// findAndModify of one bucket document (`fam.upsert` is refused by the caller).
    pub fn find_and_modify_buckets(
        &self,
        buckets: &Arc<Collection>,
        options: &TimeseriesOptions,
        fam: &FindAndModify<'_>,
    ) -> Result<FindAndModifyOutcome, StoreError> {
        let change = Change {
            filter: fam.filter,
            update: fam.update,
            multi: false,
            sort: fam.sort,
        };
        let out = self.change_buckets(buckets, options, change)?;
        let value = out.first.map(|(old, new)| match new {
            Some(new) if fam.return_new => new,
            _ => old,
        });
        Ok(FindAndModifyOutcome {
            value,
            n: out.matched,
            updated_existing: fam.update.is_some() && out.matched > 0,
            upserted: None,
        })
    }
}
