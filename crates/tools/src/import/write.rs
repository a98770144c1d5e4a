//! One batch of rows written in the import's `--mode`, as one `insert`, `update` or `delete`
//! command: insert adds the documents; upsert replaces the document that matches the row's
//! `--upsertFields` (inserting when none does); merge sets the row's fields on it; delete
//! deletes one. A row with none of the upsert fields is inserted (upsert, merge) or is an
//! error (delete), as mongoimport does. Each write error is mapped back to its row's line.

use super::{Row, RowError};
use crate::cli::{ImportArgs, Mode};
use bson::{doc, oid::ObjectId, Bson, Document, RawDocumentBuf};
use mongodb::error::{ErrorKind, InsertManyError};
use mongodb::Database;

pub struct Writer {
    db: Database,
    coll: String,
    mode: Mode,
    upsert_fields: Vec<String>,
    ordered: bool,
}

/// What a batch did: rows written, rows that failed, and an error that ends the import
/// (the server unreachable, the command refused as a whole).
pub struct Outcome {
    pub ok: u64,
    pub errors: Vec<RowError>,
    pub fatal: Option<anyhow::Error>,
}

impl Writer {
    pub fn new(db: Database, coll: String, a: &ImportArgs) -> Writer {
        let upsert_fields = a
            .upsert_fields
            .as_deref()
            .unwrap_or("_id")
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        Writer {
            db,
            coll,
            mode: a.mode,
            upsert_fields,
            ordered: a.stop_on_error || a.maintain_insertion_order,
        }
    }

    pub async fn write(&self, rows: Vec<Row>) -> Outcome {
        match self.mode {
            Mode::Insert => self.insert(rows).await,
            _ => self.update_or_delete(rows).await,
        }
    }

    /// `insert_many` of the encoded documents (the driver gives those without `_id` one,
    /// as for any insert).
    async fn insert(&self, rows: Vec<Row>) -> Outcome {
        let lines: Vec<usize> = rows.iter().map(|r| r.line).collect();
        let coll = self.db.collection::<RawDocumentBuf>(&self.coll);
        let attempted = rows.len();
        let result = coll
            .insert_many(rows.into_iter().map(|r| r.doc))
            .ordered(self.ordered)
            .await;
        match result {
            Ok(_) => Outcome {
                ok: attempted as u64,
                errors: Vec::new(),
                fatal: None,
            },
            Err(e) => match *e.kind {
                ErrorKind::InsertMany(InsertManyError {
                    write_errors,
                    write_concern_error,
                    ..
                }) => {
                    let errors: Vec<(usize, String)> = write_errors
                        .unwrap_or_default()
                        .into_iter()
                        .map(|w| (w.index, format!("{} (code {})", w.message, w.code)))
                        .collect();
                    let fatal = write_concern_error
                        .map(|w| anyhow::anyhow!("write concern error: {}", w.message));
                    self.outcome(attempted, &lines, errors, Vec::new(), fatal)
                }
                _ => Outcome {
                    ok: 0,
                    errors: Vec::new(),
                    fatal: Some(anyhow::Error::new(e).context("error inserting")),
                },
            },
        }
    }

    /// One `update` (upsert, merge) or `delete` command for the batch.
    async fn update_or_delete(&self, rows: Vec<Row>) -> Outcome {
        let mut skipped = Vec::new();
        let mut lines = Vec::with_capacity(rows.len());
        let mut statements = Vec::with_capacity(rows.len());
        for r in rows {
            let doc = match r.doc.to_document() {
                Ok(d) => d,
                Err(e) => {
                    skipped.push(RowError {
                        line: r.line,
                        reason: e.to_string(),
                    });
                    continue;
                }
            };
            let q = self.selector(&doc);
            let statement = match (self.mode, q) {
                (Mode::Delete, Some(q)) => doc! {"q": q, "limit": 1},
                (Mode::Delete, None) => {
                    skipped.push(RowError {
                        line: r.line,
                        reason: format!(
                            "the document has none of the fields {:?} to find what to delete",
                            self.upsert_fields
                        ),
                    });
                    continue;
                }
                (mode, q) => {
                    // Without the upsert fields the document is inserted, under its own or a new _id.
                    let q = q.unwrap_or_else(|| {
                        doc! {"_id": doc.get("_id").cloned().unwrap_or_else(|| ObjectId::new().into())}
                    });
                    let u = if mode == Mode::Upsert {
                        doc
                    } else {
                        doc! {"$set": doc}
                    };
                    doc! {"q": q, "u": u, "upsert": true, "multi": false}
                }
            };
            lines.push(r.line);
            statements.push(Bson::Document(statement));
        }
        if statements.is_empty() {
            return Outcome {
                ok: 0,
                errors: skipped,
                fatal: None,
            };
        }
        let (name, array) = if self.mode == Mode::Delete {
            ("delete", "deletes")
        } else {
            ("update", "updates")
        };
        let attempted = statements.len();
        let cmd = doc! {name: &self.coll, array: statements, "ordered": self.ordered};
        let reply = match self.db.run_command(cmd).await {
            Ok(r) => r,
            Err(e) => {
                return Outcome {
                    ok: 0,
                    errors: skipped,
                    fatal: Some(anyhow::Error::new(e).context(format!("error running {name}"))),
                }
            }
        };
        let errors = reply
            .get_array("writeErrors")
            .map(|a| {
                a.iter()
                    .filter_map(Bson::as_document)
                    .map(|e| {
                        let index = e.get_i32("index").unwrap_or(0).max(0) as usize;
                        let msg = e.get_str("errmsg").unwrap_or("write error");
                        (
                            index,
                            format!("{msg} (code {})", e.get_i32("code").unwrap_or(0)),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let fatal = reply
            .get_document("writeConcernError")
            .ok()
            .map(|w| anyhow::anyhow!("write concern error: {w}"));
        self.outcome(attempted, &lines, errors, skipped, fatal)
    }

    /// Counts a batch's result: `errors` are (statement index, reason); an ordered batch
    /// stops at its first error, so the statements after it did not run.
    fn outcome(
        &self,
        attempted: usize,
        lines: &[usize],
        errors: Vec<(usize, String)>,
        mut skipped: Vec<RowError>,
        fatal: Option<anyhow::Error>,
    ) -> Outcome {
        let ok = if self.ordered {
            errors.iter().map(|(i, _)| *i).min().unwrap_or(attempted)
        } else {
            attempted - errors.len()
        };
        skipped.extend(errors.into_iter().map(|(i, reason)| RowError {
            line: lines.get(i).copied().unwrap_or(0),
            reason,
        }));
        Outcome {
            ok: ok as u64,
            errors: skipped,
            fatal,
        }
    }

    /// The upsert fields' values in `doc` (missing ones as null), unless it has none.
    fn selector(&self, doc: &Document) -> Option<Document> {
        let mut q = Document::new();
        let mut any = false;
        for f in &self.upsert_fields {
            let v = lookup(doc, f);
            any |= v.is_some();
            q.insert(f.clone(), v.cloned().unwrap_or(Bson::Null));
        }
        any.then_some(q)
    }
}

/// The value at a dotted path.
pub fn lookup<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let mut parts = path.split('.');
    let mut v = doc.get(parts.next()?)?;
    for p in parts {
        v = v.as_document()?.get(p)?;
    }
    Some(v)
}
