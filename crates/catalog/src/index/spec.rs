//! Index specifications: parsing and validating a `createIndexes` entry, the default
//! name, and the `listIndexes` document (`{v: 2, key, name, ...options}`).

use crate::error::{CatalogError, Result};
use bson::{doc, Bson, Document};
use hourglass_query::filter::Filter;

/// Name of the implicit index on `_id`.
pub const ID_INDEX_NAME: &str = "_id_";

/// Largest `expireAfterSeconds` MongoDB accepts (the int32 maximum).
pub const MAX_EXPIRE_AFTER_SECONDS: i64 = i32::MAX as i64;

/// How one field of a key pattern is indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Asc,
    Desc,
    Hashed,
}

/// One field of a key pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPart {
    pub path: String,
    pub kind: KeyKind,
}

/// A secondary index definition.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    pub name: String,
    /// The key pattern as the client gave it.
    pub key: Document,
    pub parts: Vec<KeyPart>,
    pub unique: bool,
    pub sparse: bool,
    pub partial: Option<Document>,
    pub expire_after_seconds: Option<i64>,
    pub hidden: bool,
}

/// Options accepted (and ignored) besides the ones [`IndexSpec`] models.
const IGNORED_OPTIONS: &[&str] = &["v", "background", "ns", "storageEngine", "dropDups"];

fn cannot_create(msg: impl Into<String>) -> CatalogError {
    CatalogError::CannotCreateIndex(msg.into())
}

/// Parses a key pattern into its parts (67 CannotCreateIndex for bad or unsupported ones).
pub fn parse_key_pattern(key: &Document) -> Result<Vec<KeyPart>> {
    if key.is_empty() {
        return Err(cannot_create("Index keys cannot be empty."));
    }
    let mut parts = Vec::new();
    for (path, v) in key {
        if path.is_empty() || path.split('.').any(str::is_empty) {
            return Err(cannot_create(format!(
                "Index key contains an illegal field name: '{path}'"
            )));
        }
        if path.contains("$**") {
            return Err(cannot_create(
                "wildcard indexes are not supported by this server",
            ));
        }
        if path.starts_with('$') {
            return Err(cannot_create(format!(
                "Index key contains an illegal field name: field name starts with '$'. ({path})"
            )));
        }
        let kind = match v {
            Bson::String(s) if s == "hashed" => KeyKind::Hashed,
            Bson::String(s) => {
                return Err(cannot_create(format!(
                    "index type '{s}' is not supported by this server (only ascending, descending and hashed indexes are)"
                )))
            }
            other => match hourglass_query::num::Num::from_bson(other).map(|n| n.as_f64()) {
                Some(f) if f > 0.0 => KeyKind::Asc,
                Some(f) if f < 0.0 => KeyKind::Desc,
                _ => {
                    return Err(cannot_create(format!(
                        "Values in v:2 index key pattern cannot be of type {} or zero. Only numbers > 0, numbers < 0, and strings are allowed.",
                        hourglass_query::compare::type_name(other)
                    )))
                }
            },
        };
        parts.push(KeyPart {
            path: path.clone(),
            kind,
        });
    }
    let hashed = parts.iter().filter(|p| p.kind == KeyKind::Hashed).count();
    if hashed > 0 && parts.len() > 1 {
        return Err(cannot_create(
            "compound hashed indexes are not supported by this server; a hashed index has one field",
        ));
    }
    Ok(parts)
}

/// MongoDB's generated index name: `a_1_b_-1`, `h_hashed`.
pub fn default_name(key: &Document) -> String {
    key.iter()
        .map(|(k, v)| {
            let v = match v {
                Bson::String(s) => s.clone(),
                Bson::Int32(i) => i.to_string(),
                Bson::Int64(i) => i.to_string(),
                Bson::Double(d) if d.fract() == 0.0 => format!("{}", *d as i64),
                other => other.to_string(),
            };
            format!("{k}_{v}")
        })
        .collect::<Vec<_>>()
        .join("_")
}

/// Checks an `expireAfterSeconds` value.
pub fn parse_expire_after_seconds(v: &Bson) -> Result<i64> {
    let n = match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.is_finite() => Some(d.trunc() as i64),
        _ => None,
    };
    match n {
        Some(n) if (0..=MAX_EXPIRE_AFTER_SECONDS).contains(&n) => Ok(n),
        Some(n) => Err(CatalogError::InvalidOptions(format!(
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number. expireAfterSeconds: {n}"
        ))),
        None => Err(CatalogError::InvalidOptions(format!(
            "TTL index 'expireAfterSeconds' option must be numeric, but received a type of '{}'.",
            hourglass_query::compare::type_name(v)
        ))),
    }
}

fn flag(name: &str, v: &Bson) -> Result<bool> {
    match v {
        Bson::Boolean(b) => Ok(*b),
        Bson::Int32(i) => Ok(*i != 0),
        Bson::Int64(i) => Ok(*i != 0),
        Bson::Double(d) => Ok(*d != 0.0),
        _ => Err(CatalogError::TypeMismatch(format!(
            "The field '{name}' must be a boolean, but got {}",
            hourglass_query::compare::type_name(v)
        ))),
    }
}

impl IndexSpec {
    /// Parses one entry of `createIndexes.indexes`.
    pub fn parse(d: &Document) -> Result<IndexSpec> {
        let key = match d.get("key") {
            Some(Bson::Document(k)) => k.clone(),
            Some(_) => return Err(cannot_create("The 'key' field must be an object")),
            None => {
                return Err(CatalogError::FailedToParse(
                    "The 'key' field is a required property of an index specification".into(),
                ))
            }
        };
        let parts = parse_key_pattern(&key)?;
        let name = match d.get("name") {
            Some(Bson::String(s)) if !s.is_empty() => s.clone(),
            Some(Bson::String(_)) => return Err(cannot_create("index name cannot be empty")),
            Some(v) => {
                return Err(CatalogError::TypeMismatch(format!(
                    "The field 'name' must be a string, but got {}",
                    hourglass_query::compare::type_name(v)
                )))
            }
            None => default_name(&key),
        };
        let mut spec = IndexSpec {
            name,
            key,
            parts,
            unique: false,
            sparse: false,
            partial: None,
            expire_after_seconds: None,
            hidden: false,
        };
        for (k, v) in d {
            match k.as_str() {
                "key" | "name" => {}
                "unique" => spec.unique = flag(k, v)?,
                "sparse" => spec.sparse = flag(k, v)?,
                "hidden" => spec.hidden = flag(k, v)?,
                "partialFilterExpression" => match v {
                    Bson::Document(p) => {
                        Filter::parse(p)?;
                        spec.partial = Some(p.clone());
                    }
                    _ => {
                        return Err(CatalogError::TypeMismatch(
                            "The field 'partialFilterExpression' must be an object".into(),
                        ))
                    }
                },
                "expireAfterSeconds" => {
                    spec.expire_after_seconds = Some(
                        parse_expire_after_seconds(v)
                            .map_err(|e| cannot_create(e.to_string()))?,
                    )
                }
                "collation" => {
                    return Err(cannot_create(
                        "index collations are not supported by this server (only the simple binary comparison)",
                    ))
                }
                "weights" | "default_language" | "language_override" | "textIndexVersion"
                | "2dsphereIndexVersion" | "bits" | "min" | "max" | "bucketSize"
                | "wildcardProjection" | "coarsestIndexedLevel" | "finestIndexedLevel" => {
                    return Err(cannot_create(format!(
                        "the index option '{k}' belongs to an index type this server does not support"
                    )))
                }
                other if IGNORED_OPTIONS.contains(&other) => {}
                other => {
                    return Err(CatalogError::InvalidIndexSpecificationOption(format!(
                        "The field '{other}' is not valid for an index specification. Specification: {d}"
                    )))
                }
            }
        }
        spec.validate()?;
        Ok(spec)
    }

    fn validate(&self) -> Result<()> {
        if self.name == ID_INDEX_NAME || self.is_id_pattern() {
            if self.unique || self.sparse || self.partial.is_some() || self.hidden {
                return Err(cannot_create(
                    "The _id index cannot be hidden, sparse, partial or carry other options",
                ));
            }
            if !self.is_id_pattern() || self.name != ID_INDEX_NAME {
                return Err(cannot_create(
                    "The index name '_id_' is reserved for the _id index, whose key is {_id: 1}",
                ));
            }
        }
        if self.sparse && self.partial.is_some() {
            return Err(cannot_create(
                "cannot mix \"partialFilterExpression\" and \"sparse\" options",
            ));
        }
        let hashed = self.parts.iter().any(|p| p.kind == KeyKind::Hashed);
        if hashed && self.unique {
            return Err(cannot_create(
                "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
            ));
        }
        if self.expire_after_seconds.is_some() && self.parts.len() > 1 {
            return Err(cannot_create(
                "TTL indexes are single-field indexes, compound indexes do not support TTL.",
            ));
        }
        if self.expire_after_seconds.is_some() && hashed {
            return Err(cannot_create("TTL indexes cannot be hashed indexes"));
        }
        Ok(())
    }

    /// Whether the key pattern is `{_id: 1}`.
    pub fn is_id_pattern(&self) -> bool {
        self.parts.len() == 1 && self.parts[0].path == "_id" && self.parts[0].kind == KeyKind::Asc
    }

    /// The `listIndexes` document.
    pub fn to_document(&self) -> Document {
        let mut d = doc! {"v": 2, "key": self.key.clone(), "name": &self.name};
        if self.unique {
            d.insert("unique", true);
        }
        if self.sparse {
            d.insert("sparse", true);
        }
        if let Some(p) = &self.partial {
            d.insert("partialFilterExpression", p.clone());
        }
        if let Some(s) = self.expire_after_seconds {
            d.insert("expireAfterSeconds", s);
        }
        if self.hidden {
            d.insert("hidden", true);
        }
        d
    }

    /// Same key pattern (field order, paths and kinds; `1` equals `1.0`).
    pub fn same_key(&self, other: &IndexSpec) -> bool {
        self.parts == other.parts
    }

    /// Same options that make two indexes on one key pattern different.
    pub fn same_options(&self, other: &IndexSpec) -> bool {
        self.unique == other.unique
            && self.sparse == other.sparse
            && self.partial == other.partial
            && self.expire_after_seconds == other.expire_after_seconds
            && self.hidden == other.hidden
    }
}

/// The `_id` index description.
pub fn id_index_document() -> Document {
    doc! {"v": 2, "key": {"_id": 1}, "name": ID_INDEX_NAME}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_options_and_rejects_unsupported_kinds() {
        let s = IndexSpec::parse(&doc! {"key": {"a": 1, "b": -1}, "unique": true}).unwrap();
        assert_eq!(s.name, "a_1_b_-1");
        assert_eq!(s.parts[1].kind, KeyKind::Desc);
        assert_eq!(
            s.to_document(),
            doc! {"v": 2, "key": {"a": 1, "b": -1}, "name": "a_1_b_-1", "unique": true}
        );
        for bad in [
            doc! {"key": {"t": "text"}},
            doc! {"key": {"$**": 1}},
            doc! {"key": {"a": 0}},
            doc! {"key": {}},
            doc! {"key": {"a": 1, "b": 1}, "expireAfterSeconds": 5},
            doc! {"key": {"a": "hashed"}, "unique": true},
            doc! {"key": {"a": 1}, "sparse": true, "partialFilterExpression": {"a": 1}},
            doc! {"key": {"a": 1}, "collation": {"locale": "fr"}},
        ] {
            assert_eq!(IndexSpec::parse(&bad).unwrap_err().code(), 67, "{bad}");
        }
        assert_eq!(
            IndexSpec::parse(&doc! {"key": {"a": 1}, "foo": 1})
                .unwrap_err()
                .code(),
            197
        );
    }
}
