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
    check_system_namespace(db, coll)
}

/// Whether `coll` is a valid name on its own (non-empty, no leading dot, no `$` or NUL).
fn valid_collection_name(coll: &str) -> bool {
    !coll.is_empty() && !coll.starts_with('.') && !coll.contains(['$', '\0'])
}

/// Whether clients may create and write `db.coll` although it is under `system.` (MongoDB's
/// list of legal client system namespaces).
pub fn is_legal_client_system_ns(db: &str, coll: &str) -> bool {
    let per_db: &[&str] = match db {
        "admin" => &[
            "system.roles",
            "system.version",
            "system.keys",
            "system.backup_users",
        ],
        "config" => &["system.sessions", "system.indexBuilds"],
        "local" => &[
            "system.replset",
            "system.healthlog",
            "system.collections_to_restore",
        ],
        _ => &[],
    };
    if per_db.contains(&coll) || ["system.users", "system.js", "system.views"].contains(&coll) {
        return true;
    }
    coll.strip_prefix("system.buckets.")
        .is_some_and(valid_collection_name)
}

/// Refuses a `system.` namespace clients may not create (73, `Invalid system namespace`),
/// and a `.system.` inside a collection name (2), as MongoDB does for user creates and
/// writes. `system.profile` may be created (the profiler's collection).
pub fn check_system_namespace(db: &str, coll: &str) -> Result<()> {
    if coll == "system.profile" {
        return Ok(());
    }
    if coll.starts_with("system.") && !is_legal_client_system_ns(db, coll) {
        return Err(CatalogError::InvalidNamespace(format!(
            "Invalid system namespace: {db}.{coll}"
        )));
    }
    if coll.contains(".system.") {
        return Err(CatalogError::BadValue(format!(
            "Invalid namespace: {db}.{coll}"
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

    #[test]
    fn user_system_namespaces_are_refused_except_the_legal_ones() {
        let err = validate_collection_name("test", "system.foo").unwrap_err();
        assert_eq!(err.code(), 73);
        assert_eq!(err.to_string(), "Invalid system namespace: test.system.foo");
        for (db, coll) in [
            ("test", "system.js"),
            ("test", "system.views"),
            ("test", "system.profile"),
            ("test", "system.users"),
            ("test", "system.buckets.m"),
            ("admin", "system.roles"),
            ("admin", "system.users"),
        ] {
            assert!(validate_collection_name(db, coll).is_ok(), "{db}.{coll}");
        }
        assert!(validate_collection_name("test", "system.roles").is_err());
        assert!(validate_collection_name("test", "system.buckets.").is_err());
        assert_eq!(
            validate_collection_name("test", "a.system.b")
                .unwrap_err()
                .code(),
            2
        );
    }
}
