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
    #[error("E11000 duplicate key error collection: {ns} index: _id_ dup key: {{ _id: {} }}", format_key(.key))]
    DuplicateKey { ns: String, key: Box<bson::Bson> },
    #[error("{0}")]
    BadValue(String),
    #[error("{0}")]
    InvalidOptions(String),
    #[error("{0}")]
    IllegalOperation(String),
    #[error("{0}")]
    InvalidIdField(String),
    #[error("{0}")]
    BsonObjectTooLarge(String),
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
            CatalogError::BadValue(_) => 2,
            CatalogError::InvalidOptions(_) => 72,
            CatalogError::IllegalOperation(_) => 20,
            CatalogError::InvalidIdField(_) => 53,
            CatalogError::BsonObjectTooLarge(_) => 10334,
            CatalogError::Query(q) => q.code(),
            CatalogError::Storage(_) | CatalogError::Corrupt(_) => 1,
        }
    }

    /// MongoDB's codeName.
    pub fn code_name(&self) -> &'static str {
        match self {
            CatalogError::NamespaceExists(_) => "NamespaceExists",
            CatalogError::NamespaceNotFound(_) => "NamespaceNotFound",
            CatalogError::InvalidNamespace(_) => "InvalidNamespace",
            CatalogError::DuplicateKey { .. } => "DuplicateKey",
            CatalogError::BadValue(_) => "BadValue",
            CatalogError::InvalidOptions(_) => "InvalidOptions",
            CatalogError::IllegalOperation(_) => "IllegalOperation",
            CatalogError::InvalidIdField(_) => "InvalidIdField",
            CatalogError::BsonObjectTooLarge(_) => "BSONObjectTooLarge",
            CatalogError::Query(q) => q.code_name(),
            CatalogError::Storage(_) | CatalogError::Corrupt(_) => "InternalError",
        }
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
