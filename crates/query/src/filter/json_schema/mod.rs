//! `$jsonSchema`: MongoDB's subset of JSON Schema draft 4 plus its `bsonType` and
//! `encrypt` extensions, as a top-level query operator (and so in collection validators).
//!
//! A schema is parsed once ([`parse`]) into a [`Schema`] tree; [`Schema::matches_doc`]
//! applies it to a whole document (the top-level value is the document itself).
//! Keywords restrict only values of their own type (`minimum` says nothing about a
//! string, `properties` nothing about an array) and never traverse arrays implicitly.
//! [`explain`] builds the `schemaRulesNotSatisfied` part of a validation error.

pub mod explain;
mod parse;

use bson::spec::BinarySubtype;
use bson::{Bson, Document};

use super::types::TypeSel;
use crate::compare::values_equal;
use crate::error::QueryError;
use crate::num::Num;

/// A parsed `$jsonSchema` operand, with the specification as written.
#[derive(Debug, Clone)]
pub struct Schema {
    pub(crate) root: Node,
    pub(crate) spec: Document,
}

impl Schema {
    /// Parses the operand of `$jsonSchema`.
    pub fn parse(spec: &Bson) -> Result<Schema, QueryError> {
        let Bson::Document(d) = spec else {
            return Err(QueryError::TypeMismatch(
                "$jsonSchema must be an object".into(),
            ));
        };
        Ok(Schema {
            root: parse::node(d)?,
            spec: d.clone(),
        })
    }

    /// Whether a whole document satisfies the schema.
    pub fn matches_doc(&self, doc: &Document) -> bool {
        self.root.matches_object(doc)
    }

    /// The schema as written.
    pub fn spec(&self) -> &Document {
        &self.spec
    }
}

/// The set of types a `type` or `bsonType` keyword allows.
#[derive(Debug, Clone)]
pub(crate) struct Types {
    /// `"type"` or `"bsonType"`.
    pub keyword: &'static str,
    pub spec: Bson,
    pub sels: Vec<TypeSel>,
}

impl Types {
    pub fn allows(&self, v: &Bson) -> bool {
        self.sels.iter().any(|s| s.matches(v))
    }

    /// The family of the one type named, when exactly one is (`"number"` counts as
    /// one): a keyword restricted to that family then applies to every value, and one
    /// restricted to another family never applies.
    pub fn single(&self) -> Option<Option<Family>> {
        match self.sels.as_slice() {
            [TypeSel::Number] => Some(Some(Family::Number)),
            [TypeSel::Named(n)] => Some(Family::of_name(n)),
            _ => None,
        }
    }
}

/// The type a keyword restricts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Number,
    String,
    Object,
    Array,
}

impl Family {
    fn of_name(n: &str) -> Option<Family> {
        match n {
            "double" | "int" | "long" | "decimal" => Some(Family::Number),
            "string" => Some(Family::String),
            "object" => Some(Family::Object),
            "array" => Some(Family::Array),
            _ => None,
        }
    }

    pub fn holds(self, v: &Bson) -> bool {
        match self {
            Family::Number => Num::from_bson(v).is_some(),
            Family::String => matches!(v, Bson::String(_)),
            Family::Object => matches!(v, Bson::Document(_)),
            Family::Array => matches!(v, Bson::Array(_)),
        }
    }
}

/// `items`: one schema for every element, or one per position.
#[derive(Debug, Clone)]
pub(crate) enum Items {
    All(Box<Node>),
    Each(Vec<Node>),
}

/// `additionalItems` / `additionalProperties`.
#[derive(Debug, Clone)]
pub(crate) enum Additional {
    Allowed(bool),
    Schema(Box<Node>),
}

/// One entry of `dependencies`.
#[derive(Debug, Clone)]
pub(crate) enum Dependency {
    Properties(Vec<String>),
    Schema(Box<Node>),
}

/// A keyword restricted to numbers with its operand (kept as written).
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    pub value: Bson,
    pub exclusive: Option<bool>,
}

/// One (sub)schema.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    pub title: Option<String>,
    pub description: Option<String>,
    pub types: Option<Types>,
    pub pattern: Option<(String, crate::pcre::Pcre)>,
    pub max_length: Option<(Bson, i64)>,
    pub min_length: Option<(Bson, i64)>,
    pub multiple_of: Option<Bson>,
    pub maximum: Option<Bound>,
    pub minimum: Option<Bound>,
    pub min_items: Option<(Bson, i64)>,
    pub max_items: Option<(Bson, i64)>,
    pub unique_items: Option<bool>,
    pub items: Option<Items>,
    pub additional_items: Option<Additional>,
    pub encrypt: bool,
    pub properties: Option<Vec<(String, Node)>>,
    pub pattern_properties: Option<Vec<(String, crate::pcre::Pcre, Node)>>,
    pub additional_properties: Option<Additional>,
    pub required: Option<Vec<String>>,
    pub min_properties: Option<(Bson, i64)>,
    pub max_properties: Option<(Bson, i64)>,
    pub dependencies: Option<Vec<(String, Dependency)>>,
    pub all_of: Option<Vec<Node>>,
    pub any_of: Option<Vec<Node>>,
    pub one_of: Option<Vec<Node>>,
    pub not: Option<Box<Node>>,
    pub enumeration: Option<Vec<Bson>>,
}

impl Node {
    /// Whether `v` satisfies this schema.
    pub fn matches(&self, v: &Bson) -> bool {
        self.types.as_ref().is_none_or(|t| t.allows(v))
            && self.scalar_ok(v)
            && self.array_ok(v)
            && (!self.encrypt || is_encrypted(v))
            && match v {
                Bson::Document(d) => self.object_ok(d),
                _ => true,
            }
            && self.logical_ok(v)
    }

    /// [`Node::matches`] for a document, without copying it into a value (string, number
    /// and array keywords never apply to one).
    pub fn matches_object(&self, d: &Document) -> bool {
        let object = || Bson::Document(Document::new());
        self.types.as_ref().is_none_or(|t| t.allows(&object()))
            && !self.encrypt
            && self.object_ok(d)
            && self
                .all_of
                .as_ref()
                .is_none_or(|l| l.iter().all(|s| s.matches_object(d)))
            && self
                .any_of
                .as_ref()
                .is_none_or(|l| l.iter().any(|s| s.matches_object(d)))
            && self
                .one_of
                .as_ref()
                .is_none_or(|l| l.iter().filter(|s| s.matches_object(d)).count() == 1)
            && self.not.as_ref().is_none_or(|s| !s.matches_object(d))
            && self.enumeration.as_ref().is_none_or(|l| {
                let v = Bson::Document(d.clone());
                l.iter().any(|e| enum_equal(&v, e))
            })
    }

    fn scalar_ok(&self, v: &Bson) -> bool {
        if let Bson::String(s) = v {
            let len = s.chars().count() as i64;
            if self.pattern.as_ref().is_some_and(|(_, re)| !re.is_match(s))
                || self.max_length.as_ref().is_some_and(|(_, n)| len > *n)
                || self.min_length.as_ref().is_some_and(|(_, n)| len < *n)
            {
                return false;
            }
        }
        if let Some(n) = Num::from_bson(v) {
            if self
                .multiple_of
                .as_ref()
                .is_some_and(|m| !multiple_of(v, m))
                || self
                    .maximum
                    .as_ref()
                    .is_some_and(|b| !within(n, b, std::cmp::Ordering::Greater))
                || self
                    .minimum
                    .as_ref()
                    .is_some_and(|b| !within(n, b, std::cmp::Ordering::Less))
            {
                return false;
            }
        }
        true
    }

    fn array_ok(&self, v: &Bson) -> bool {
        let Bson::Array(a) = v else {
            return true;
        };
        let len = a.len() as i64;
        if self.min_items.as_ref().is_some_and(|(_, n)| len < *n)
            || self.max_items.as_ref().is_some_and(|(_, n)| len > *n)
            || self.unique_items == Some(true) && first_duplicate(a).is_some()
        {
            return false;
        }
        match &self.items {
            None => true,
            Some(Items::All(s)) => a.iter().all(|e| s.matches(e)),
            Some(Items::Each(list)) => {
                a.iter().zip(list).all(|(e, s)| s.matches(e))
                    && match &self.additional_items {
                        None | Some(Additional::Allowed(true)) => true,
                        Some(Additional::Allowed(false)) => a.len() <= list.len(),
                        Some(Additional::Schema(s)) => {
                            a.iter().skip(list.len()).all(|e| s.matches(e))
                        }
                    }
            }
        }
    }

    fn object_ok(&self, d: &Document) -> bool {
        let count = d.len() as i64;
        if self
            .min_properties
            .as_ref()
            .is_some_and(|(_, n)| count < *n)
            || self
                .max_properties
                .as_ref()
                .is_some_and(|(_, n)| count > *n)
            || self
                .required
                .as_ref()
                .is_some_and(|r| r.iter().any(|k| !d.contains_key(k)))
        {
            return false;
        }
        if let Some(props) = &self.properties {
            if props
                .iter()
                .any(|(k, s)| d.get(k).is_some_and(|v| !s.matches(v)))
            {
                return false;
            }
        }
        if self.pattern_properties.is_some() || self.additional_properties.is_some() {
            for (k, v) in d {
                if !self.allowed_property(k, v) {
                    return false;
                }
            }
        }
        if let Some(deps) = &self.dependencies {
            for (k, dep) in deps {
                if !d.contains_key(k) {
                    continue;
                }
                let ok = match dep {
                    Dependency::Properties(names) => names.iter().all(|n| d.contains_key(n)),
                    Dependency::Schema(s) => s.matches_object(d),
                };
                if !ok {
                    return false;
                }
            }
        }
        true
    }

    /// Whether one field satisfies `patternProperties` and `additionalProperties`.
    pub(crate) fn allowed_property(&self, k: &str, v: &Bson) -> bool {
        let mut named = self
            .properties
            .as_ref()
            .is_some_and(|p| p.iter().any(|(n, _)| n == k));
        for (_, re, s) in self.pattern_properties.iter().flatten() {
            if re.is_match(k) {
                named = true;
                if !s.matches(v) {
                    return false;
                }
            }
        }
        named
            || match &self.additional_properties {
                None | Some(Additional::Allowed(true)) => true,
                Some(Additional::Allowed(false)) => false,
                Some(Additional::Schema(s)) => s.matches(v),
            }
    }

    fn logical_ok(&self, v: &Bson) -> bool {
        self.all_of
            .as_ref()
            .is_none_or(|l| l.iter().all(|s| s.matches(v)))
            && self
                .any_of
                .as_ref()
                .is_none_or(|l| l.iter().any(|s| s.matches(v)))
            && self
                .one_of
                .as_ref()
                .is_none_or(|l| l.iter().filter(|s| s.matches(v)).count() == 1)
            && self.not.as_ref().is_none_or(|s| !s.matches(v))
            && self
                .enumeration
                .as_ref()
                .is_none_or(|l| l.iter().any(|e| enum_equal(v, e)))
    }
}

/// Enum equality: BSON equality, with a document equal only to a document.
pub(crate) fn enum_equal(v: &Bson, e: &Bson) -> bool {
    values_equal(v, e)
}

/// Binary data of the encrypted subtype (6).
pub(crate) fn is_encrypted(v: &Bson) -> bool {
    matches!(v, Bson::Binary(b) if b.subtype == BinarySubtype::Encrypted)
}

/// The first element equal to an earlier one.
pub(crate) fn first_duplicate(a: &[Bson]) -> Option<&Bson> {
    a.iter()
        .enumerate()
        .find(|(i, e)| a[..*i].iter().any(|p| values_equal(p, e)))
        .map(|(_, e)| e)
}

/// `n` is on the allowed side of the bound (`outside` is the side that fails).
pub(crate) fn within(n: Num, b: &Bound, outside: std::cmp::Ordering) -> bool {
    let Some(limit) = Num::from_bson(&b.value) else {
        return true;
    };
    if n.as_f64().is_nan() || limit.as_f64().is_nan() {
        return false;
    }
    let ord = n.compare(&limit);
    ord != outside && !(b.exclusive == Some(true) && ord.is_eq())
}

/// `multipleOf`: the remainder of `v` by `m` is zero, computed in decimal (as MongoDB
/// does with Decimal128, so `0.3` is a multiple of `0.1`).
pub(crate) fn multiple_of(v: &Bson, m: &Bson) -> bool {
    match (decimal_parts(v), decimal_parts(m)) {
        (Some((a, ea)), Some((b, eb))) if b != 0 => {
            let e = ea.min(eb);
            let scale = |x: i128, from: i32| -> Option<i128> {
                let shift = u32::try_from(from - e).ok()?;
                10i128.checked_pow(shift).and_then(|p| x.checked_mul(p))
            };
            match (scale(a, ea), scale(b, eb)) {
                (Some(x), Some(y)) => x % y == 0,
                _ => float_multiple(v, m),
            }
        }
        _ => float_multiple(v, m),
    }
}

fn float_multiple(v: &Bson, m: &Bson) -> bool {
    let (Some(x), Some(y)) = (Num::from_bson(v), Num::from_bson(m)) else {
        return false;
    };
    let (x, y) = (x.as_f64(), y.as_f64());
    x.is_finite() && y != 0.0 && (x % y) == 0.0
}

/// A finite number as `mantissa * 10^exponent` (doubles to 15 significant digits, as
/// Decimal128 converts them).
fn decimal_parts(v: &Bson) -> Option<(i128, i32)> {
    let text = match v {
        Bson::Int32(i) => return Some((i128::from(*i), 0)),
        Bson::Int64(i) => return Some((i128::from(*i), 0)),
        Bson::Double(f) if f.is_finite() => format!("{f:.14e}"),
        Bson::Decimal128(d) => d.to_string(),
        _ => return None,
    };
    parse_decimal(&text)
}

fn parse_decimal(text: &str) -> Option<(i128, i32)> {
    let lower = text.to_ascii_lowercase();
    let (mantissa, exp) = match lower.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().ok()?),
        None => (lower.clone(), 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((&mantissa, ""));
    let digits = format!("{int_part}{frac_part}");
    if digits.trim_start_matches(['-', '+']).len() > 36 {
        return None;
    }
    let n: i128 = digits.parse().ok()?;
    Some((n, exp - frac_part.len() as i32))
}

#[cfg(test)]
mod tests;
