//! Database and collection name rules (MongoDB's), and the `db.coll` namespace type.

use crate::error::{CatalogError, Result};

/// A fully qualified collection name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace {
    pub db: String,
    pub coll: String,
}

impl Namespace {
    pub fn new(db: &str, coll: &str) -> Namespace {
        Namespace {
            db: db.to_string(),
            coll: coll.to_string(),
        }
    }
}

impl std::fmt::Display for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.db, self.coll)
    }
}

/// Checks a database name as MongoDB does.
pub fn validate_db_name(db: &str) -> Result<()> {
    if db.is_empty() || db.len() >= 64 {
        return Err(CatalogError::InvalidNamespace(format!(
            "Invalid database name: '{db}'"
        )));
    }
    if db.chars().any(|c| {
        matches!(
            c,
            '/' | '\\' | '.' | ' ' | '"' | '$' | '*' | '<' | '>' | ':' | '|' | '?' | '\0'
        )
    }) {
        return Err(CatalogError::InvalidNamespace(format!(
            "Invalid database name: '{db}'"
        )));
    }
    Ok(())
}

/// Checks a collection name as MongoDB does for user writes.
pub fn validate_collection_name(db: &str, coll: &str) -> Result<()> {
    validate_db_name(db)?;
    if coll.is_empty() {
        return Err(CatalogError::InvalidNamespace(format!(
            "Invalid namespace specified '{db}.'"
        )));
    }
    if coll.contains('\0') || coll.contains('$') || coll.starts_with('.') {
        return Err(CatalogError::InvalidNamespace(format!(
            "Invalid collection name: {coll}"
        )));
    }
    if db.len() + 1 + coll.len() > 255 {
        return Err(CatalogError::InvalidNamespace(format!(
            "Fully qualified namespace is too long. Namespace: {db}.{coll} Max: 255"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_database_and_collection_names() {
        assert!(validate_db_name("test").is_ok());
        assert!(validate_db_name("a.b").is_err());
        assert!(validate_db_name("").is_err());
        assert!(validate_collection_name("test", "c").is_ok());
        assert!(validate_collection_name("test", "a$b").is_err());
        assert!(validate_collection_name("test", "").is_err());
        assert_eq!(validate_collection_name("test", "").unwrap_err().code(), 73);
    }
}
