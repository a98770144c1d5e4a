//! A find's `min` (inclusive) and `max` (exclusive): the hinted index read between those
//! two keys, in index order. Each bound names the index's fields, in order, and gives a
//! value for each; the key it stands for is encoded as the index encodes a document's
//! key, so the bounds fall exactly where MongoDB's do (values of every type, in the
//! index's directions). The filter still applies to what the scan fetches.

use crate::collection::Collection;
use crate::error::Result;
use crate::index::keys::append_field;
use crate::plan::{find_hinted, Access, FieldBounds, Hint, Plan};
use bson::Document;
use hourglass_query::error::QueryError;

/// The plan reading `hint`'s index from `min` to `max` (either may be absent).
pub fn min_max_plan(
    coll: &Collection,
    hint: Option<&Hint>,
    min: Option<&Document>,
    max: Option<&Document>,
) -> Result<Plan> {
    let no_hint = || {
        QueryError::loc(
            51173,
            "When using min()/max() a hint of which index to use must be provided",
        )
    };
    let index = match hint {
        Some(h) => find_hinted(coll, h)?.ok_or_else(no_hint)?,
        None => return Err(no_hint().into()),
    };
    let parts = index.parts();
    let key = |bound: &Document| -> Result<Vec<u8>> {
        let fits = bound.len() == parts.len()
            && bound.keys().zip(&parts).all(|(k, p)| *k == p.path)
            && parts.iter().all(|p| !p.kind.is_geo());
        if !fits {
            return Err(
                QueryError::loc(51174, "The index chosen is not compatible with min/max").into(),
            );
        }
        let mut key = Vec::new();
        for (part, value) in parts.iter().zip(bound.values()) {
            append_field(&mut key, part, value);
        }
        Ok(key)
    };
    let start = min.map(key).transpose()?.unwrap_or_default();
    let end = max.map(key).transpose()?;
    let ranges = match &end {
        Some(e) if *e <= start => Vec::new(),
        _ => vec![(start, end)],
    };
    Ok(Plan {
        access: Access::IndexScan {
            bounds: vec![FieldBounds::All; parts.len()],
            index,
            ranges,
            reverse: false,
        },
        provides_sort: false,
    })
}
