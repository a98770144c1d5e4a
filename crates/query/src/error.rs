//! Error type of the query layer. Every variant maps to a MongoDB error code; the code
//! name comes from MongoDB's table (`hourglass_errors`).

use bson::{Bson, Document};

/// An error raised while parsing or evaluating a query construct.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum QueryError {
    /// Code 2.
    #[error("{0}")]
    BadValue(String),
    /// Code 4.
    #[error("{0}")]
    NoSuchKey(String),
    /// Code 9.
    #[error("{0}")]
    FailedToParse(String),
    /// Code 14.
    #[error("{0}")]
    TypeMismatch(String),
    /// Code 15.
    #[error("{0}")]
    Overflow(String),
    /// Code 28.
    #[error("{0}")]
    PathNotViable(String),
    /// Code 40.
    #[error("{0}")]
    ConflictingUpdateOperators(String),
    /// Code 52.
    #[error("{0}")]
    DollarPrefixedFieldName(String),
    /// Code 56.
    #[error("{0}")]
    EmptyFieldName(String),
    /// Code 66.
    #[error("{0}")]
    ImmutableField(String),
    /// Code 72.
    #[error("{0}")]
    InvalidOptions(String),
    /// Code 168.
    #[error("{0}")]
    InvalidPipelineOperator(String),
    /// Code 241.
    #[error("{0}")]
    ConversionFailure(String),
    /// Code 292.
    #[error("{0}")]
    QueryExceededMemoryLimitNoDiskUseAllowed(String),
    /// Code 50.
    #[error("{0}")]
    MaxTimeMSExpired(String),
    /// Code 11601.
    #[error("{0}")]
    Interrupted(String),
    /// Code 10334.
    #[error("{0}")]
    BSONObjectTooLarge(String),
    /// Any other code: an assertion location (named `Location<code>`) or an error from
    /// another layer (e.g. the catalog behind `$merge`), named from MongoDB's table.
    #[error("{1}")]
    Coded(i32, String),
    /// An error from another layer with fields of its own for the reply (a duplicate
    /// key's `keyPattern` and `keyValue` behind `$merge`).
    #[error("{1}")]
    CodedWithInfo(i32, String, Box<Document>),
}

impl QueryError {
    /// MongoDB's numeric error code.
    pub fn code(&self) -> i32 {
        match self {
            QueryError::BadValue(_) => 2,
            QueryError::NoSuchKey(_) => 4,
            QueryError::FailedToParse(_) => 9,
            QueryError::TypeMismatch(_) => 14,
            QueryError::Overflow(_) => 15,
            QueryError::PathNotViable(_) => 28,
            QueryError::ConflictingUpdateOperators(_) => 40,
            QueryError::DollarPrefixedFieldName(_) => 52,
            QueryError::EmptyFieldName(_) => 56,
            QueryError::ImmutableField(_) => 66,
            QueryError::InvalidOptions(_) => 72,
            QueryError::InvalidPipelineOperator(_) => 168,
            QueryError::ConversionFailure(_) => 241,
            QueryError::QueryExceededMemoryLimitNoDiskUseAllowed(_) => 292,
            QueryError::MaxTimeMSExpired(_) => 50,
            QueryError::Interrupted(_) => 11601,
            QueryError::BSONObjectTooLarge(_) => 10334,
            QueryError::Coded(code, _) | QueryError::CodedWithInfo(code, _, _) => *code,
        }
    }

    /// MongoDB's code name, e.g. `"BadValue"` or `"Location40324"`.
    pub fn code_name(&self) -> std::borrow::Cow<'static, str> {
        hourglass_errors::name(self.code())
    }

    /// The human readable message (MongoDB's `errmsg`).
    pub fn message(&self) -> String {
        self.to_string()
    }

    pub(crate) fn bad(msg: impl Into<String>) -> Self {
        QueryError::BadValue(msg.into())
    }

    pub fn loc(code: i32, msg: impl Into<String>) -> Self {
        QueryError::Coded(code, msg.into())
    }
}

/// Renders a value the way MongoDB prints values inside error messages
/// (`{ a: 1, b: "x" }`).
pub fn render(v: &Bson) -> String {
    match v {
        Bson::Document(d) => render_doc(d),
        Bson::Array(a) => {
            let parts: Vec<String> = a.iter().map(render).collect();
            format!("[ {} ]", parts.join(", "))
        }
        Bson::String(s) => format!("\"{s}\""),
        Bson::Double(f) => {
            if f.fract() == 0.0 && f.is_finite() {
                format!("{f:.1}")
            } else {
                format!("{f}")
            }
        }
        Bson::Int64(i) => i.to_string(),
        Bson::Int32(i) => i.to_string(),
        Bson::ObjectId(o) => format!("ObjectId('{o}')"),
        Bson::Boolean(b) => b.to_string(),
        Bson::Null => "null".into(),
        other => other.to_string(),
    }
}

/// Renders a document like [`render`].
pub fn render_doc(d: &Document) -> String {
    if d.is_empty() {
        return "{}".into();
    }
    let parts: Vec<String> = d
        .iter()
        .map(|(k, v)| format!("{k}: {}", render(v)))
        .collect();
    format!("{{ {} }}", parts.join(", "))
}

/// Renders `{ _id: <id> }` for a document, as used by update error messages.
pub fn render_id(d: &Document) -> String {
    match d.get("_id") {
        Some(id) => format!("{{_id: {}}}", render(id)),
        None => "{}".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_match_mongodb() {
        assert_eq!(QueryError::bad("x").code(), 2);
        assert_eq!(QueryError::bad("x").code_name(), "BadValue");
        assert_eq!(QueryError::FailedToParse("x".into()).code(), 9);
        assert_eq!(QueryError::ImmutableField("x".into()).code(), 66);
        assert_eq!(
            QueryError::ConflictingUpdateOperators("x".into()).code(),
            40
        );
        let e = QueryError::loc(40324, "Unrecognized pipeline stage name: '$foo'");
        assert_eq!(e.code(), 40324);
        assert_eq!(&*e.code_name(), "Location40324");
        assert_eq!(e.to_string(), "Unrecognized pipeline stage name: '$foo'");
    }

    #[test]
    fn render_prints_shell_like_documents() {
        let d = bson::doc! {"_id": 1, "a": "x", "b": [1, 2.5]};
        assert_eq!(render_doc(&d), "{ _id: 1, a: \"x\", b: [ 1, 2.5 ] }");
        assert_eq!(render_id(&d), "{_id: 1}");
    }
}
