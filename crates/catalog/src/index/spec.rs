//! Index specifications: parsing and validating a `createIndexes` entry, the default
//! name, and the `listIndexes` document (`{v: 2, key, name, ...options}`).

use crate::error::{CatalogError, Result};
use bson::{doc, Bson, Document};
use hourglass_query::collation::Collation;
use hourglass_query::filter::Filter;
use std::sync::Arc;

pub use super::spec_checks::check_id_index_spec;
use super::spec_checks::{check_partial, check_special_features};

/// Name of the implicit index on `_id`.
pub use super::spec_checks::ID_INDEX_NAME;

/// Largest `expireAfterSeconds` MongoDB accepts (the int32 maximum).
pub const MAX_EXPIRE_AFTER_SECONDS: i64 = i32::MAX as i64;

/// How one field of a key pattern is indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Asc,
    Desc,
    Hashed,
    /// `"2dsphere"`: GeoJSON or legacy pairs on the sphere.
    Sphere,
    /// `"2d"`: legacy pairs on a flat square.
    Flat,
}

impl KeyKind {
    pub fn is_geo(self) -> bool {
        matches!(self, KeyKind::Sphere | KeyKind::Flat)
    }
}

/// The bounds and precision of a 2d index (`min`, `max`, `bits`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlatGrid {
    pub min: f64,
    pub max: f64,
    pub bits: u32,
}

impl Default for FlatGrid {
    fn default() -> Self {
        FlatGrid {
            min: -180.0,
            max: 180.0,
            bits: 26,
        }
    }
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
    /// Rejects new duplicate keys while the index keeps its non-unique layout: the first
    /// step of converting it to unique (`collMod`, MongoDB 6.0+).
    pub prepare_unique: bool,
    pub sparse: bool,
    pub partial: Option<Document>,
    pub expire_after_seconds: Option<i64>,
    /// `2dsphereIndexVersion` of a 2dsphere index (3 unless given).
    pub sphere_version: Option<i32>,
    /// The grid of a 2d index.
    pub flat_grid: Option<FlatGrid>,
    pub hidden: bool,
    /// The collation its string keys are in (`None`: binary); see `keys.rs`.
    pub collation: Option<Arc<Collation>>,
    /// The index version `v` (1 or 2; 2 unless given).
    pub version: i32,
}

/// Options accepted (and ignored) besides the ones [`IndexSpec`] models.
const IGNORED_OPTIONS: &[&str] = &["ns", "storageEngine"];

pub(super) fn cannot_create(msg: impl Into<String>) -> CatalogError {
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
            Bson::String(s) if s == "2dsphere" => KeyKind::Sphere,
            Bson::String(s) if s == "2d" => KeyKind::Flat,
            Bson::String(s) => {
                return Err(cannot_create(format!(
                    "index type '{s}' is not supported by this server (only ascending, descending, hashed, 2dsphere and 2d indexes are)"
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
        Bson::Decimal128(_) => Ok(hourglass_query::expr::truthy(v)),
        _ => Err(CatalogError::TypeMismatch(format!(
            "The field '{name} has value {name}: {v}, which is not convertible to bool"
        ))),
    }
}

impl IndexSpec {
    /// Parses one entry of `createIndexes.indexes`.
    pub fn parse(d: &Document) -> Result<IndexSpec> {
        let key = match d.get("key") {
            Some(Bson::Document(k)) => k.clone(),
            Some(v) => {
                return Err(CatalogError::TypeMismatch(format!(
                    "The field 'key' must be an object, but got {}",
                    hourglass_query::compare::type_name(v)
                )))
            }
            None => {
                return Err(CatalogError::FailedToParse(
                    "The 'key' field is a required property of an index specification".into(),
                ))
            }
        };
        let parts = parse_key_pattern(&key)?;
        let name = match d.get("name") {
            // `dropIndexes: "*"` means every index.
            Some(Bson::String(s)) if s == "*" => {
                return Err(CatalogError::BadValue(
                    "The index name '*' is not valid.".into(),
                ))
            }
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
            prepare_unique: false,
            sparse: false,
            partial: None,
            expire_after_seconds: None,
            sphere_version: None,
            flat_grid: None,
            hidden: false,
            collation: None,
            version: 2,
        };
        if spec.parts.iter().any(|p| p.kind == KeyKind::Sphere) {
            spec.sphere_version = Some(3);
        }
        if spec.parts.iter().any(|p| p.kind == KeyKind::Flat) {
            spec.flat_grid = Some(FlatGrid::default());
        }
        for (k, v) in d {
            match k.as_str() {
                "key" | "name" => {}
                "unique" => spec.unique = flag(k, v)?,
                "prepareUnique" => spec.prepare_unique = flag(k, v)?,
                "sparse" => spec.sparse = flag(k, v)?,
                "hidden" => {
                    // MongoDB's message names the wrong field ('name'); kept as it is.
                    let Bson::Boolean(b) = v else {
                        return Err(CatalogError::TypeMismatch(format!(
                            "The field 'name' must be a bool, but got {}",
                            hourglass_query::compare::type_name(v)
                        )));
                    };
                    spec.hidden = *b;
                }
                "background" | "dropDups" => {
                    flag(k, v)?;
                }
                "v" => {
                    spec.version = match hourglass_query::num::Num::from_bson(v).map(|n| n.as_f64()) {
                        Some(n) if n == 1.0 || n == 2.0 => n as i32,
                        Some(n) => {
                            return Err(cannot_create(format!(
                                "Invalid index specification {d}; cannot create an index with v={n}"
                            )))
                        }
                        None => {
                            return Err(CatalogError::TypeMismatch(format!(
                                "The field 'v' must be a number, but got {}",
                                hourglass_query::compare::type_name(v)
                            )))
                        }
                    }
                }
                "partialFilterExpression" => match v {
                    Bson::Document(p) => {
                        check_special_features(p)?;
                        Filter::parse(p)?;
                        check_partial(p)?;
                        spec.partial = Some(p.clone());
                    }
                    _ => {
                        return Err(CatalogError::TypeMismatch(format!(
                            "The field 'partialFilterExpression' must be an object, but got {}",
                            hourglass_query::compare::type_name(v)
                        )))
                    }
                },
                "expireAfterSeconds" => {
                    spec.expire_after_seconds = Some(
                        parse_expire_after_seconds(v)
                            .map_err(|e| cannot_create(e.to_string()))?,
                    )
                }
                "collation" => {
                    match v {
                        Bson::Document(c) if c.is_empty() => {
                            return Err(CatalogError::BadValue(
                                "The field 'collation' cannot be an empty object.".into(),
                            ))
                        }
                        Bson::Document(_) => {}
                        _ => {
                            return Err(CatalogError::TypeMismatch(format!(
                                "The field 'collation' must be an object, but got {}",
                                hourglass_query::compare::type_name(v)
                            )))
                        }
                    }
                    spec.collation = hourglass_query::collation::parse(v)?;
                }
                "2dsphereIndexVersion" if spec.sphere_version.is_some() => {
                    spec.sphere_version = Some(match v.as_i32().or_else(|| v.as_f64().map(|f| f as i32)) {
                        Some(n @ 2..=3) => n,
                        _ => {
                            return Err(cannot_create(format!(
                                "unsupported geo index version {{ 2dsphereIndexVersion : {v} }}, only support versions: [2,3]"
                            )))
                        }
                    })
                }
                "bits" | "min" | "max" if spec.flat_grid.is_some() => {
                    let n = hourglass_query::num::Num::from_bson(v).map(|n| n.as_f64());
                    let Some(n) = n.filter(|n| n.is_finite()) else {
                        return Err(cannot_create(format!("{k} must be a number")));
                    };
                    let grid = spec.flat_grid.get_or_insert_with(FlatGrid::default);
                    match k.as_str() {
                        "bits" if (1.0..=32.0).contains(&n) && n.fract() == 0.0 => grid.bits = n as u32,
                        "bits" => return Err(cannot_create("bits in geo index must be between 1 and 32")),
                        "min" => grid.min = n,
                        _ => grid.max = n,
                    }
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
        if spec.version < 2 && d.contains_key("collation") {
            return Err(cannot_create(format!(
                "Invalid index specification {d}; cannot create an index with the 'collation' option and v={}",
                spec.version
            )));
        }
        spec.validate()?;
        Ok(spec)
    }

    fn validate(&self) -> Result<()> {
        if self.name == ID_INDEX_NAME || self.is_id_pattern() {
            if self.unique
                || self.sparse
                || self.partial.is_some()
                || self.hidden
                || self.expire_after_seconds.is_some()
            {
                return Err(cannot_create(
                    "The _id index cannot be hidden, sparse, partial or carry other options",
                ));
            }
            if !self.is_id_pattern() {
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
        let flat: Vec<usize> = (0..self.parts.len())
            .filter(|i| self.parts[*i].kind == KeyKind::Flat)
            .collect();
        if flat.len() > 1 {
            return Err(cannot_create("Only one 2d field is allowed in an index"));
        }
        if flat.first().is_some_and(|i| *i != 0) {
            return Err(cannot_create("2d has to be first in index"));
        }
        if let Some(g) = self.flat_grid {
            if g.min >= g.max {
                return Err(cannot_create(
                    "region for hash must be valid and have positive area",
                ));
            }
        }
        let geo = self.parts.iter().any(|p| p.kind.is_geo());
        if geo && (self.unique || self.expire_after_seconds.is_some()) {
            return Err(cannot_create(
                "2dsphere and 2d indexes cannot be unique or TTL indexes on this server",
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
        let mut d = doc! {"v": self.version, "key": self.key.clone(), "name": &self.name};
        if self.unique {
            d.insert("unique", true);
        }
        if self.prepare_unique {
            d.insert("prepareUnique", true);
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
        if let Some(c) = &self.collation {
            d.insert("collation", c.spec().clone());
        }
        if let Some(v) = self.sphere_version {
            d.insert("2dsphereIndexVersion", v);
        }
        if let Some(g) = self.flat_grid {
            if g != FlatGrid::default() {
                d.insert("bits", g.bits as i32);
                d.insert("min", g.min);
                d.insert("max", g.max);
            }
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
            && self.sphere_version == other.sphere_version
            && self.flat_grid == other.flat_grid
            && self.collation == other.collation
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
        ] {
            assert_eq!(IndexSpec::parse(&bad).unwrap_err().code(), 67, "{bad}");
        }
        let bad_locale = doc! {"key": {"a": 1}, "collation": {"locale": "xx"}};
        assert_eq!(IndexSpec::parse(&bad_locale).unwrap_err().code(), 2);
        assert_eq!(
            IndexSpec::parse(&doc! {"key": {"a": 1}, "foo": 1})
                .unwrap_err()
                .code(),
            197
        );
    }
}
