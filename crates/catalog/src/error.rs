//! Typed errors of the catalog layer, each knowing its MongoDB code and codeName.

use hourglass_query::QueryError;
use hourglass_storage::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("Collection {0} already exists.")]
    NamespaceExists(String),
    #[error("{0}")]
    NamespaceNotFound(String),
    #[error("{0}")]
    InvalidNamespace(String),
    #[error("E11000 duplicate key error collection: {ns} index: {index} dup key: {}", format_key_value(.key_value))]
    DuplicateKey {
        ns: String,
        index: String,
        key_pattern: Box<bson::Document>,
        key_value: Box<bson::Document>,
    },
    #[error("{0}")]
    CannotCreateIndex(String),
    /// The `_id`s of each group of documents sharing a key.
    #[error("Cannot convert the index to unique. Please resolve conflicting documents before running collMod again.")]
    CannotConvertIndexToUnique(Vec<Vec<bson::Bson>>),
    #[error("{0}")]
    AmbiguousIndexKeyPattern(String),
    #[error("{0}")]
    InvalidIndexSpecificationOption(String),
    #[error("{0}")]
    IndexNotFound(String),
    #[error("{0}")]
    IndexKeySpecsConflict(String),
    #[error("{0}")]
    IndexOptionsConflict(String),
    #[error("{0}")]
    CannotIndexParallelArrays(String),
    #[error("{0}")]
    HashedArray(String),
    #[error("{0}")]
    TypeMismatch(String),
    #[error("{0}")]
    FailedToParse(String),
    #[error("{0}")]
    BadValue(String),
    #[error("{0}")]
    InvalidOptions(String),
    #[error("{0}")]
    IllegalOperation(String),
    #[error("{0}")]
    OperationNotSupportedInTransaction(String),
    #[error("{0}")]
    InvalidIdField(String),
    #[error("{0}")]
    BsonObjectTooLarge(String),
    /// A write refused by the collection's validator; holds MongoDB's `errInfo`.
    #[error("Document failed validation")]
    DocumentValidationFailure(Box<bson::Document>),
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("corrupt stored document: {0}")]
    Corrupt(String),
}

impl CatalogError {
    /// MongoDB's numeric error code.
    pub fn code(&self) -> i32 {
        match self {
            CatalogError::NamespaceExists(_) => 48,
            CatalogError::NamespaceNotFound(_) => 26,
            CatalogError::InvalidNamespace(_) => 73,
            CatalogError::DuplicateKey { .. } => 11000,
            CatalogError::CannotCreateIndex(_) => 67,
            CatalogError::CannotConvertIndexToUnique(_) => 359,
            CatalogError::AmbiguousIndexKeyPattern(_) => 275,
            CatalogError::InvalidIndexSpecificationOption(_) => 197,
            CatalogError::IndexNotFound(_) => 27,
            CatalogError::IndexKeySpecsConflict(_) => 86,
            CatalogError::IndexOptionsConflict(_) => 85,
            CatalogError::CannotIndexParallelArrays(_) => 171,
            CatalogError::HashedArray(_) => 16766,
            CatalogError::TypeMismatch(_) => 14,
            CatalogError::FailedToParse(_) => 9,
            CatalogError::BadValue(_) => 2,
            CatalogError::InvalidOptions(_) => 72,
            CatalogError::IllegalOperation(_) => 20,
            CatalogError::OperationNotSupportedInTransaction(_) => 263,
            CatalogError::InvalidIdField(_) => 53,
            CatalogError::BsonObjectTooLarge(_) => 10334,
            CatalogError::DocumentValidationFailure(_) => 121,
            CatalogError::Query(q) => q.code(),
            CatalogError::Storage(e) => e.code(),
            CatalogError::Corrupt(_) => 1,
        }
    }

    /// MongoDB's codeName.
    pub fn code_name(&self) -> std::borrow::Cow<'static, str> {
        hourglass_errors::name(self.code())
    }
}

pub type Result<T> = std::result::Result<T, CatalogError>;

/// A key value as MongoDB prints it in duplicate-key messages.
fn format_key(id: &bson::Bson) -> String {
    match id {
        bson::Bson::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    }
}

/// `{ a: 1, b: "x" }`, as in MongoDB's duplicate-key messages.
fn format_key_value(d: &bson::Document) -> String {
    let fields: Vec<String> = d
        .iter()
        .map(|(k, v)| format!("{k}: {}", format_key(v)))
        .collect();
    format!("{{ {} }}", fields.join(", "))
}
