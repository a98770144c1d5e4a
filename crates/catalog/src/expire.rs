//! TTL deletion for regular collections: removes, in one bounded batch, documents whose
//! TTL-indexed field holds a date older than a cutoff (found by a range scan of the TTL
//! index; arrays expire by their earliest date; non-date values never expire).

use crate::collection::{decode, Collection};
use crate::error::Result;
use crate::index::spec::{KeyKind, KeyPart};
use crate::index::staging::Staging;
use crate::plan::{byte_ranges, FieldBounds};
use bson::{Bson, DateTime};
use hourglass_query::compare::canonical_type_rank;
use hourglass_query::path::lookup_path;
use std::collections::HashSet;

/// Whether any date at `path` in `doc` (array elements included) is before `cutoff`.
fn has_expired_date(doc: &bson::Document, path: &str, cutoff: DateTime) -> bool {
    lookup_path(doc, path)
        .into_iter()
        .flatten()
        .any(|v| match v {
            Bson::DateTime(d) => *d < cutoff,
            Bson::Array(items) => items
                .iter()
                .any(|i| matches!(i, Bson::DateTime(d) if *d < cutoff)),
            _ => false,
        })
}

/// What a TTL pass reads to find expired documents.
#[derive(Debug, Clone, Copy)]
pub enum ExpireBy {
    /// A TTL index, by its ident.
    Index(u64),
    /// The `_id` itself: a clustered collection with `expireAfterSeconds`.
    Id,
}

impl Collection {
    /// Deletes up to `limit` documents that `by` shows as expired at `cutoff`, as one
    /// atomic, durable batch. Returns how many were deleted (fewer than `limit` when no
    /// more are expired). An index that no longer exists deletes nothing.
    pub fn delete_expired(&self, by: ExpireBy, cutoff: DateTime, limit: usize) -> Result<usize> {
        let guard = self.lock_writes();
        let (part, tree) = match by {
            ExpireBy::Index(ident) => {
                let Some(index) = self.indexes().iter().find(|i| i.ident == ident).cloned() else {
                    return Ok(0);
                };
                let Some(part) = index.spec.parts.first().cloned() else {
                    return Ok(0);
                };
                (part, Some(index.tree().clone()))
            }
            ExpireBy::Id => (
                KeyPart {
                    path: "_id".into(),
                    kind: KeyKind::Asc,
                },
                None,
            ),
        };
        let bounds = vec![FieldBounds::Range {
            low: None,
            high: Some((Bson::DateTime(cutoff), false)),
            rank: canonical_type_rank(&Bson::DateTime(cutoff)),
        }];
        let ranges = byte_ranges(std::slice::from_ref(&part), &bounds);
        let mut st = Staging::new(self);
        let mut ids: HashSet<Vec<u8>> = HashSet::new();
        let mut deleted = 0;
        'scan: for (start, end) in ranges {
            // An index maps keys to `_id` keys; the collection's own tree is keyed by `_id`.
            let scanned = tree.as_ref().unwrap_or(self.tree());
            for entry in st.snap.range(scanned, &start, end.as_deref(), false) {
                let (key, value) = entry?;
                let id_key = if tree.is_some() { value } else { key };
                if !ids.insert(id_key.clone()) {
                    continue;
                }
                let Some(bytes) = st.snap.get(self.tree(), &id_key)? else {
                    continue;
                };
                let doc = decode(&bytes)?;
                if has_expired_date(&doc, &part.path, cutoff) {
                    st.remove(&doc)?;
                    deleted += 1;
                    if deleted >= limit {
                        break 'scan;
                    }
                }
            }
        }
        let ticket = self.engine().apply(st.finish()?)?;
        drop(guard);
        self.engine().wait_durable(ticket)?;
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::ExpireBy;
    use crate::index::IndexSpec;
    use crate::Catalog;
    use bson::{doc, DateTime};
    use hourglass_storage::Engine;

    #[test]
    fn deletes_only_documents_with_an_old_date_in_bounded_batches() {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
        let c = cat.get_or_create("db", "c").unwrap();
        let now = DateTime::now().timestamp_millis();
        let old = DateTime::from_millis(now - 100_000);
        let fresh = DateTime::from_millis(now + 100_000);
        c.insert(
            vec![
                doc! {"_id": 1, "t": old},
                doc! {"_id": 2, "t": fresh},
                doc! {"_id": 3, "t": "not a date"},
                doc! {"_id": 4, "t": [fresh, old]},
                doc! {"_id": 5, "t": old},
            ],
            true,
        );
        let spec = IndexSpec::parse(&doc! {"key": {"t": 1}, "expireAfterSeconds": 0}).unwrap();
        cat.create_indexes("db", "c", vec![spec]).unwrap();
        let ident = c.indexes()[0].ident;
        assert_eq!(
            c.delete_expired(ExpireBy::Index(ident), DateTime::now(), 2)
                .unwrap(),
            2
        );
        assert_eq!(
            c.delete_expired(ExpireBy::Index(ident), DateTime::now(), 2)
                .unwrap(),
            1
        );
        assert_eq!(
            c.delete_expired(ExpireBy::Index(ident), DateTime::now(), 2)
                .unwrap(),
            0
        );
        let left: Vec<_> = c
            .scan()
            .map(|d| d.unwrap().get_i32("_id").unwrap())
            .collect();
        assert_eq!(left, vec![2, 3]);
        let report = crate::index::build::validate(&c).unwrap();
        assert!(report.errors.is_empty());
    }
}
