//! Where a collection's archive lives: the `archive` option of `create`/`collMod`
//! ([`ArchiveSpec`]) and its URI opened as an object store ([`Location`]).
//!
//! * `file:///abs/dir`: a local directory (created if missing). Every put is written to a
//!   temporary file, synced, renamed into place and its directory synced (the object
//!   store's `fsync` mode), so a file the manifest records survives a power cut.
//! * `s3://bucket/prefix`: S3 or an S3-compatible server. Endpoint, region and
//!   credentials come from the server's environment (`AWS_ENDPOINT_URL`, `AWS_REGION`,
//!   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`, ...). A put returns once
//!   S3 has confirmed the whole object.
//!
//! Paths below the root are `/`-separated parts that [`hive_part`] keeps to a safe
//! character set, so the same relative path names the same object everywhere.

use crate::io::block_on;
use crate::ArchiveError;
use bson::{Bson, Document};
use futures::TryStreamExt;
use object_store::path::{Path, PathPart};
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// A collection's archive rule: `{afterSeconds, uri, partitionBy}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveSpec {
    pub after_seconds: i64,
    pub uri: String,
    /// Meta paths (`tags.hostname`) whose values split files.
    pub partition_by: Vec<String>,
}

impl ArchiveSpec {
    /// Reads and checks an `archive` option of a collection whose meta field is
    /// `meta_field`.
    pub fn parse(v: &Bson, meta_field: Option<&str>) -> Result<ArchiveSpec, ArchiveError> {
        let bad = |m: String| ArchiveError::BadSpec(m);
        let Bson::Document(d) = v else {
            return Err(bad(format!(
                "'archive' must be a document or \"off\", not {v}"
            )));
        };
        let mut after = None;
        let mut uri = None;
        let mut partition_by = Vec::new();
        for (k, v) in d {
            match k.as_str() {
                "afterSeconds" => {
                    let n = match v {
                        Bson::Int32(n) => i64::from(*n),
                        Bson::Int64(n) => *n,
                        Bson::Double(f) if f.fract() == 0.0 && f.abs() < 9e15 => *f as i64,
                        _ => {
                            return Err(bad(format!(
                                "archive.afterSeconds must be a whole number of seconds, not {v}"
                            )))
                        }
                    };
                    if n < 0 {
                        return Err(bad("archive.afterSeconds must not be negative".into()));
                    }
                    after = Some(n);
                }
                "uri" => match v {
                    Bson::String(s) => uri = Some(s.clone()),
                    _ => return Err(bad(format!("archive.uri must be a string, not {v}"))),
                },
                "partitionBy" => {
                    let Bson::Array(a) = v else {
                        return Err(bad(
                            "archive.partitionBy must be an array of meta field paths".into(),
                        ));
                    };
                    for p in a {
                        let Bson::String(p) = p else {
                            return Err(bad(
                                "archive.partitionBy must be an array of meta field paths".into(),
                            ));
                        };
                        let is_meta = meta_field.is_some_and(|mf| {
                            p == mf
                                || p.strip_prefix(mf)
                                    .is_some_and(|r| r.starts_with('.') && r.len() > 1)
                        });
                        if !is_meta {
                            return Err(bad(format!(
                                "archive.partitionBy: '{p}' is not the metaField or a path inside it"
                            )));
                        }
                        partition_by.push(p.clone());
                    }
                }
                other => {
                    return Err(bad(format!(
                        "unknown field '{other}' in the archive option"
                    )))
                }
            }
        }
        let spec = ArchiveSpec {
            after_seconds: after.ok_or_else(|| bad("archive.afterSeconds is required".into()))?,
            uri: uri.ok_or_else(|| bad("archive.uri is required".into()))?,
            partition_by,
        };
        Target::parse(&spec.uri)?;
        Ok(spec)
    }

    /// The option as `listCollections` shows it.
    pub fn to_document(&self) -> Document {
        let mut d = Document::new();
        d.insert("afterSeconds", self.after_seconds);
        d.insert("uri", self.uri.clone());
        if !self.partition_by.is_empty() {
            d.insert(
                "partitionBy",
                self.partition_by
                    .iter()
                    .cloned()
                    .map(Bson::String)
                    .collect::<Vec<_>>(),
            );
        }
        d
    }
}

/// A parsed archive URI.
enum Target {
    Local(std::path::PathBuf),
    S3 { bucket: String, prefix: String },
}

impl Target {
    fn parse(uri: &str) -> Result<Target, ArchiveError> {
        let bad = |m: &str| ArchiveError::BadSpec(format!("archive.uri '{uri}': {m}"));
        let url = url::Url::parse(uri).map_err(|e| bad(&e.to_string()))?;
        match url.scheme() {
            "file" => {
                let path = url
                    .to_file_path()
                    .map_err(|_| bad("not an absolute local path"))?;
                Ok(Target::Local(path))
            }
            "s3" => {
                let bucket = url
                    .host_str()
                    .filter(|h| !h.is_empty())
                    .ok_or_else(|| bad("no bucket"))?;
                Ok(Target::S3 {
                    bucket: bucket.to_string(),
                    prefix: url.path().trim_matches('/').to_string(),
                })
            }
            other => Err(bad(&format!(
                "unsupported scheme '{other}' (use file:///path or s3://bucket/prefix)"
            ))),
        }
    }
}

/// An opened archive: an object store and the root path inside it.
pub struct Location {
    store: Arc<dyn ObjectStore>,
    root: Path,
}

impl Location {
    /// The archive at `uri`, opened once per process and shared.
    pub fn open(uri: &str) -> Result<Arc<Location>, ArchiveError> {
        static OPEN: OnceLock<Mutex<HashMap<String, Arc<Location>>>> = OnceLock::new();
        let open = OPEN.get_or_init(Default::default);
        if let Some(l) = open.lock().get(uri) {
            return Ok(l.clone());
        }
        let location = Arc::new(match Target::parse(uri)? {
            Target::Local(dir) => {
                std::fs::create_dir_all(&dir).map_err(|e| {
                    ArchiveError::BadSpec(format!(
                        "archive.uri '{uri}': cannot create {}: {e}",
                        dir.display()
                    ))
                })?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(&dir)?
                    .with_fsync(true)
                    .with_automatic_cleanup(true);
                Location {
                    store: Arc::new(fs),
                    root: Path::default(),
                }
            }
            Target::S3 { bucket, prefix } => {
                let s3 = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .build()?;
                Location {
                    store: Arc::new(s3),
                    root: Path::from(prefix),
                }
            }
        });
        open.lock().insert(uri.to_string(), location.clone());
        Ok(location)
    }

    pub fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// The object path of `rel` (parts made by [`hive_part`]).
    pub fn path(&self, rel: &str) -> Result<Path, ArchiveError> {
        let mut parts: Vec<PathPart<'_>> = self.root.parts().collect();
        for p in rel.split('/').filter(|p| !p.is_empty()) {
            let part = PathPart::parse(p)
                .map_err(|e| ArchiveError::Manifest(format!("bad archive path '{rel}': {e}")))?;
            parts.push(part);
        }
        Ok(Path::from_iter(parts))
    }

    /// Writes `bytes` at `rel`, durably (see the module docs).
    pub fn put(&self, rel: &str, bytes: Vec<u8>) -> Result<(), ArchiveError> {
        let (store, path) = (self.store.clone(), self.path(rel)?);
        block_on(async move { store.put(&path, PutPayload::from(bytes)).await })??;
        Ok(())
    }

    /// Deletes the object at `rel`; one already gone is not an error.
    pub fn delete(&self, rel: &str) -> Result<(), ArchiveError> {
        let (store, path) = (self.store.clone(), self.path(rel)?);
        match block_on(async move { store.delete(&path).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The objects under `rel_prefix`, as (path relative to the root, size).
    pub fn list(&self, rel_prefix: &str) -> Result<Vec<(String, u64)>, ArchiveError> {
        let (store, prefix) = (self.store.clone(), self.path(rel_prefix)?);
        let root_parts = self.root.parts().count();
        let metas =
            block_on(async move { store.list(Some(&prefix)).try_collect::<Vec<_>>().await })?;
        let metas = match metas {
            Ok(m) => m,
            Err(object_store::Error::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        Ok(metas
            .into_iter()
            .map(|m| {
                let rel: Vec<String> = m
                    .location
                    .parts()
                    .skip(root_parts)
                    .map(|p| p.as_ref().to_string())
                    .collect();
                (rel.join("/"), m.size)
            })
            .collect())
    }
}

/// `name=value` with the value escaped as Hive escapes partition values (`%XX` for
/// anything but letters, digits, `-`, `_` and `.`), so Spark and DuckDB read the value
/// back from the directory name.
pub fn hive_part(name: &str, value: &str) -> String {
    format!("{}={}", escape(name), escape(value))
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out == "." || out == ".." {
        out = out.replace('.', "%2E");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn archive_spec_takes_meta_paths_and_known_schemes_only() {
        let ok = ArchiveSpec::parse(
            &Bson::Document(
                doc! {"afterSeconds": 60, "uri": "file:///tmp/a", "partitionBy": ["tags.host"]},
            ),
            Some("tags"),
        );
        assert_eq!(
            ok.map(|s| s.partition_by).ok(),
            Some(vec!["tags.host".to_string()])
        );
        for bad in [
            doc! {"afterSeconds": 60, "uri": "ftp://x/y"},
            doc! {"afterSeconds": 60, "uri": "relative/path"},
            doc! {"afterSeconds": -1, "uri": "file:///tmp/a"},
            doc! {"uri": "file:///tmp/a"},
            doc! {"afterSeconds": 1, "uri": "file:///tmp/a", "partitionBy": ["usage"]},
            doc! {"afterSeconds": 1, "uri": "file:///tmp/a", "extra": 1},
        ] {
            assert!(
                ArchiveSpec::parse(&Bson::Document(bad.clone()), Some("tags")).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn hive_parts_escape_everything_but_safe_characters() {
        assert_eq!(hive_part("date", "2016-01-01"), "date=2016-01-01");
        assert_eq!(hive_part("coll", "a/b c"), "coll=a%2Fb%20c");
    }

    #[test]
    fn a_local_archive_puts_lists_and_deletes_objects() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let uri = format!("file://{}", dir.path().display());
        let loc = Location::open(&uri).unwrap_or_else(|e| panic!("{e}"));
        loc.put("db=a/coll=b/x.parquet", vec![1, 2, 3])
            .unwrap_or_else(|e| panic!("{e}"));
        let listed = loc.list("db=a").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(listed, vec![("db=a/coll=b/x.parquet".to_string(), 3)]);
        loc.delete("db=a/coll=b/x.parquet")
            .unwrap_or_else(|e| panic!("{e}"));
        loc.delete("db=a/coll=b/x.parquet")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(loc.list("db=a").unwrap_or_default().is_empty());
    }
}
