//! The manifest entry of one archived file, as the time-series store records it (in the
//! same atomic batch that deletes the file's buckets):
//!
//! | field | meaning |
//! |---|---|
//! | `path` | the object's path below the archive root (`db=../coll=../date=../part-...parquet`) |
//! | `uri` | the archive root it was written to (a later `collMod` may change the rule's URI) |
//! | `minTime`, `maxTime` | the smallest and largest time of its rows (dates) |
//! | `rows`, `bytes` | measurements and file size |
//! | `partition` | the `partitionBy` values of its rows, by path |
//! | `metas` | the distinct meta values of its rows, when at most [`MAX_METAS`]; else absent |
//! | `columns` | the file's column names, in order |
//! | `created` | when the mover wrote it |

use crate::ArchiveError;
use bson::{Bson, DateTime, Document};

/// Distinct meta values a manifest entry lists (more: reads cannot prune the file by
/// meta from the manifest, only by row group).
pub const MAX_METAS: usize = 256;

#[derive(Debug, Clone, PartialEq)]
pub struct FileEntry {
    pub path: String,
    pub uri: String,
    pub min_time_ms: i64,
    pub max_time_ms: i64,
    pub rows: u64,
    pub bytes: u64,
    pub partition: Document,
    pub metas: Option<Vec<Bson>>,
    pub columns: Vec<String>,
    pub created: DateTime,
}

impl FileEntry {
    pub fn to_document(&self) -> Document {
        let mut d = Document::new();
        d.insert("path", self.path.clone());
        d.insert("uri", self.uri.clone());
        d.insert("minTime", DateTime::from_millis(self.min_time_ms));
        d.insert("maxTime", DateTime::from_millis(self.max_time_ms));
        d.insert("rows", self.rows as i64);
        d.insert("bytes", self.bytes as i64);
        d.insert("partition", self.partition.clone());
        if let Some(m) = &self.metas {
            d.insert("metas", m.clone());
        }
        d.insert(
            "columns",
            self.columns
                .iter()
                .cloned()
                .map(Bson::String)
                .collect::<Vec<_>>(),
        );
        d.insert("created", self.created);
        d
    }

    pub fn from_document(d: &Document) -> Result<FileEntry, ArchiveError> {
        let bad = |f: &str| ArchiveError::Manifest(format!("missing or mistyped '{f}'"));
        let text = |f: &str| d.get_str(f).map(str::to_string).map_err(|_| bad(f));
        let date = |f: &str| {
            d.get_datetime(f)
                .map(|t| t.timestamp_millis())
                .map_err(|_| bad(f))
        };
        let count = |f: &str| d.get_i64(f).map(|n| n.max(0) as u64).map_err(|_| bad(f));
        Ok(FileEntry {
            path: text("path")?,
            uri: text("uri")?,
            min_time_ms: date("minTime")?,
            max_time_ms: date("maxTime")?,
            rows: count("rows")?,
            bytes: count("bytes")?,
            partition: d.get_document("partition").cloned().unwrap_or_default(),
            metas: d.get_array("metas").ok().cloned(),
            columns: d
                .get_array("columns")
                .map_err(|_| bad("columns"))?
                .iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect(),
            created: *d.get_datetime("created").map_err(|_| bad("created"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn a_manifest_entry_survives_its_document_form() {
        let e = FileEntry {
            path: "db=a/coll=b/date=2016-01-01/part-1.parquet".into(),
            uri: "file:///tmp/x".into(),
            min_time_ms: 1,
            max_time_ms: 2,
            rows: 3,
            bytes: 4,
            partition: doc! {"tags.h": "x"},
            metas: Some(vec![Bson::Document(doc! {"h": "x"})]),
            columns: vec!["time".into()],
            created: DateTime::from_millis(5),
        };
        assert_eq!(FileEntry::from_document(&e.to_document()).ok(), Some(e));
    }
}
