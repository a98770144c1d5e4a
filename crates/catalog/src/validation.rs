//! Collection validators: `validator` (any query filter, `$jsonSchema` included),
//! `validationLevel` and `validationAction`, kept in the collection's options (so in its
//! catalog entry, durable like the other options) and compiled once per options change.
//!
//! Every document write of a regular collection (insert, update, upsert, findAndModify,
//! and `$out`/`$merge` through those) checks the new document under the collection's
//! write lock. A failure is 121 `DocumentValidationFailure` with MongoDB's `errInfo`
//! (`failingDocumentId` and `details`); with `validationAction: "warn"` the write goes on
//! and the failure is logged. A command with `bypassDocumentValidation: true` runs inside
//! [`bypass`], which skips the checks of its thread.

use std::cell::Cell;

use bson::{doc, Bson, Document};
use hourglass_query::filter::doc_validation::explain_failure;
use hourglass_query::filter::Filter;
use hourglass_query::QueryError;

use crate::error::{CatalogError, Result};

/// `validationLevel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Off,
    Strict,
    Moderate,
}

/// `validationAction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Error,
    Warn,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "off" => Some(Level::Off),
            "strict" => Some(Level::Strict),
            "moderate" => Some(Level::Moderate),
            _ => None,
        }
    }
}

impl Action {
    /// `errorAndLog` is MongoDB 8.0's; 7.0 knows only these two.
    pub fn parse(s: &str) -> Option<Action> {
        match s {
            "error" => Some(Action::Error),
            "warn" => Some(Action::Warn),
            _ => None,
        }
    }
}

/// A collection's compiled validator.
#[derive(Debug)]
pub struct Validator {
    spec: Document,
    filter: Filter,
    level: Level,
    action: Action,
}

thread_local! {
    static BYPASS: Cell<bool> = const { Cell::new(false) };
}

/// While alive, writes on this thread skip document validation
/// (`bypassDocumentValidation: true`).
pub struct Bypass {
    previous: bool,
}

/// Skips validation on this thread until the guard drops (when `on`).
pub fn bypass(on: bool) -> Bypass {
    let previous = BYPASS.with(|b| b.replace(on || b.get()));
    Bypass { previous }
}

impl Drop for Bypass {
    fn drop(&mut self) {
        BYPASS.with(|b| b.set(self.previous));
    }
}

fn bypassed() -> bool {
    BYPASS.with(Cell::get)
}

/// Checks a validator as `create`/`collMod` take it: a document that parses as a filter,
/// without the operators MongoDB refuses in validators.
pub fn parse_validator(spec: &Document) -> std::result::Result<Filter, QueryError> {
    let filter = Filter::parse(spec)?;
    if filter.has_near() {
        return Err(QueryError::BadValue(
            "$geoNear, $near, and $nearSphere are not allowed in this context".into(),
        ));
    }
    Ok(filter)
}

impl Validator {
    /// The validator the options describe; none without a `validator` or with an empty
    /// one.
    pub fn from_options(options: &Document) -> std::result::Result<Option<Validator>, QueryError> {
        let Some(Bson::Document(spec)) = options.get("validator") else {
            return Ok(None);
        };
        if spec.is_empty() {
            return Ok(None);
        }
        let level = options
            .get_str("validationLevel")
            .ok()
            .and_then(Level::parse)
            .unwrap_or(Level::Strict);
        let action = options
            .get_str("validationAction")
            .ok()
            .and_then(Action::parse)
            .unwrap_or(Action::Error);
        Ok(Some(Validator {
            filter: parse_validator(spec)?,
            spec: spec.clone(),
            level,
            action,
        }))
    }

    /// Checks a document about to be inserted (or upserted).
    pub fn check_insert(&self, ns: &str, doc: &Document) -> Result<()> {
        if self.level == Level::Off || bypassed() {
            return Ok(());
        }
        self.check(ns, doc)
    }

    /// Checks the new version of an updated document; with `moderate`, an update of a
    /// document that already failed validation is not checked.
    pub fn check_update(&self, ns: &str, old: &Document, new: &Document) -> Result<()> {
        if self.level == Level::Off || bypassed() {
            return Ok(());
        }
        if self.level == Level::Moderate && !self.filter.matches(old) {
            return Ok(());
        }
        self.check(ns, new)
    }

    fn check(&self, ns: &str, doc: &Document) -> Result<()> {
        if self.filter.matches(doc) {
            return Ok(());
        }
        let info = doc! {
            "failingDocumentId": doc.get("_id").cloned().unwrap_or(Bson::Null),
            "details": explain_failure(&self.spec, doc),
        };
        match self.action {
            Action::Error => Err(CatalogError::DocumentValidationFailure(Box::new(info))),
            Action::Warn => {
                tracing::warn!(
                    id = 20294,
                    namespace = ns,
                    err_info = %info,
                    "Document would fail validation"
                );
                Ok(())
            }
        }
    }
}
