//! Command errors as MongoDB reports them: `{ok: 0, errmsg, code, codeName}`.

use bson::{doc, Document};
use hourglass_catalog::CatalogError;
use hourglass_query::QueryError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{errmsg} (code {code} {code_name})")]
pub struct CommandError {
    pub code: i32,
    pub code_name: String,
    pub errmsg: String,
    /// Extra reply fields (e.g. `keyPattern`/`keyValue` of a duplicate key).
    pub extra: Option<Box<Document>>,
}

impl CommandError {
    /// An error with `code`, named from MongoDB's table (`hourglass_errors`).
    pub fn new(code: i32, errmsg: impl Into<String>) -> CommandError {
        CommandError {
            code,
            code_name: hourglass_errors::name(code).into_owned(),
            errmsg: errmsg.into(),
            extra: None,
        }
    }

    pub fn bad_value(msg: impl Into<String>) -> CommandError {
        CommandError::new(2, msg)
    }

    pub fn failed_to_parse(msg: impl Into<String>) -> CommandError {
        CommandError::new(9, msg)
    }

    pub fn type_mismatch(msg: impl Into<String>) -> CommandError {
        CommandError::new(14, msg)
    }

    pub fn invalid_options(msg: impl Into<String>) -> CommandError {
        CommandError::new(72, msg)
    }

    /// An IDL-style "unknown field" error (MongoDB's 40415).
    pub fn unknown_field(command: &str, field: &str) -> CommandError {
        CommandError::new(
            40415,
            format!("BSON field '{command}.{field}' is an unknown field."),
        )
    }

    /// An IDL-style "missing required field" error (MongoDB's 40414); `path` is e.g.
    /// `update.updates.q`.
    pub fn missing_field(path: &str) -> CommandError {
        CommandError::new(
            40414,
            format!("BSON field '{path}' is missing but a required field"),
        )
    }

    /// This error as an entry of a write command's `writeErrors`.
    pub fn write_error(&self, index: usize) -> Document {
        let mut d = doc! {"index": index as i32, "code": self.code, "codeName": &self.code_name, "errmsg": &self.errmsg};
        if let Some(extra) = &self.extra {
            d.extend(extra.as_ref().clone());
        }
        d
    }

    /// The reply document for this error.
    pub fn to_reply(&self) -> Document {
        let mut d = doc! { "ok": 0.0, "errmsg": &self.errmsg, "code": self.code, "codeName": &self.code_name };
        if let Some(extra) = &self.extra {
            d.extend(extra.as_ref().clone());
        }
        d
    }
}

impl From<CatalogError> for CommandError {
    fn from(e: CatalogError) -> Self {
        let mut out = CommandError::new(e.code(), e.to_string());
        if let CatalogError::DuplicateKey {
            key_pattern,
            key_value,
            ..
        } = &e
        {
            out.extra = Some(Box::new(
                doc! {"keyPattern": key_pattern.as_ref().clone(), "keyValue": key_value.as_ref().clone()},
            ));
        }
        if let CatalogError::CannotConvertIndexToUnique(groups) = &e {
            let violations: Vec<Document> =
                groups.iter().map(|ids| doc! {"ids": ids.clone()}).collect();
            out.extra = Some(Box::new(doc! {"violations": violations}));
        }
        if let CatalogError::DocumentValidationFailure(info) = &e {
            out.extra = Some(Box::new(doc! {"errInfo": info.as_ref().clone()}));
        }
        out
    }
}

impl From<hourglass_timeseries::StoreError> for CommandError {
    fn from(e: hourglass_timeseries::StoreError) -> Self {
        CommandError::new(e.code(), e.to_string())
    }
}

impl From<hourglass_timeseries::TsError> for CommandError {
    fn from(e: hourglass_timeseries::TsError) -> Self {
        CommandError::new(e.code(), e.to_string())
    }
}

impl From<QueryError> for CommandError {
    fn from(e: QueryError) -> Self {
        let mut out = CommandError::new(e.code(), e.to_string());
        if let QueryError::CodedWithInfo(_, _, extra) = e {
            out.extra = Some(extra);
        }
        out
    }
}

pub type CmdResult = Result<Document, CommandError>;
