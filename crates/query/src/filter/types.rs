//! `$type` selectors and regular-expression predicates used by filters.

use bson::Bson;

use crate::compare::type_name;
use crate::error::QueryError;
use crate::pcre::{Invalid, Pcre};

/// One `$type` selector: a concrete type name or the `"number"` alias.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeSel {
    /// A concrete BSON type, by its MongoDB alias.
    Named(&'static str),
    /// Any numeric type.
    Number,
}

/// MongoDB's BSON type aliases and their numeric codes.
pub const ALIASES: &[(&str, i64)] = &[
    ("double", 1),
    ("string", 2),
    ("object", 3),
    ("array", 4),
    ("binData", 5),
    ("undefined", 6),
    ("objectId", 7),
    ("bool", 8),
    ("date", 9),
    ("null", 10),
    ("regex", 11),
    ("dbPointer", 12),
    ("javascript", 13),
    ("symbol", 14),
    ("javascriptWithScope", 15),
    ("int", 16),
    ("timestamp", 17),
    ("long", 18),
    ("decimal", 19),
    ("minKey", -1),
    ("maxKey", 127),
];

impl TypeSel {
    /// Parses one selector (alias string or numeric type code).
    pub fn parse(v: &Bson) -> Result<TypeSel, QueryError> {
        match v {
            Bson::String(s) => {
                if s == "number" {
                    return Ok(TypeSel::Number);
                }
                ALIASES
                    .iter()
                    .find(|(name, _)| name == s)
                    .map(|(name, _)| TypeSel::Named(name))
                    .ok_or_else(|| QueryError::bad(format!("Unknown type name alias: {s}")))
            }
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                let n = crate::num::Num::from_bson(v).and_then(|n| n.as_exact_i64());
                let found = n.and_then(|n| ALIASES.iter().find(|(_, code)| *code == n));
                match found {
                    Some((name, _)) => Ok(TypeSel::Named(name)),
                    None => Err(QueryError::bad(format!(
                        "Invalid numerical type code: {}",
                        crate::error::render(v)
                    ))),
                }
            }
            _ => Err(QueryError::TypeMismatch(
                "type must be represented as a number or a string".into(),
            )),
        }
    }

    /// Parses the operand of `$type` (a selector or an array of them).
    pub fn parse_list(v: &Bson) -> Result<Vec<TypeSel>, QueryError> {
        match v {
            Bson::Array(items) => items.iter().map(TypeSel::parse).collect(),
            other => Ok(vec![TypeSel::parse(other)?]),
        }
    }

    /// True if `v` has this type.
    pub fn matches(&self, v: &Bson) -> bool {
        match self {
            TypeSel::Number => matches!(
                v,
                Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
            ),
            TypeSel::Named(name) => type_name(v) == *name,
        }
    }
}

/// A compiled regular expression predicate (`$regex` / `/pattern/flags`).
#[derive(Debug, Clone)]
pub struct RegexPred {
    /// Compiled matcher.
    pub re: Pcre,
    /// Source pattern.
    pub pattern: String,
    /// Source options.
    pub options: String,
}

impl RegexPred {
    /// Compiles a pattern with MongoDB's options `imsxu` (see [`crate::pcre`]).
    pub fn new(pattern: &str, options: &str) -> Result<RegexPred, QueryError> {
        let re = Pcre::new(pattern, options).map_err(|e| match e {
            Invalid::Flag(_) => QueryError::loc(51108, e.to_string()),
            Invalid::Pattern(_) => {
                QueryError::loc(51091, format!("Regular expression is invalid: {e}"))
            }
        })?;
        Ok(RegexPred {
            re,
            pattern: pattern.to_string(),
            options: options.to_string(),
        })
    }

    /// True if `v` is a matching string/symbol or an identical regex value.
    pub fn matches(&self, v: &Bson) -> bool {
        match v {
            Bson::String(s) | Bson::Symbol(s) => self.re.is_match(s),
            Bson::RegularExpression(r) => r.pattern == self.pattern && r.options == self.options,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_aliases_and_codes_resolve() {
        assert_eq!(
            TypeSel::parse(&Bson::from("int")).unwrap(),
            TypeSel::Named("int")
        );
        assert_eq!(
            TypeSel::parse(&Bson::Int32(2)).unwrap(),
            TypeSel::Named("string")
        );
        assert_eq!(
            TypeSel::parse(&Bson::Double(-1.0)).unwrap(),
            TypeSel::Named("minKey")
        );
        assert_eq!(TypeSel::parse(&Bson::from("bogus")).unwrap_err().code(), 2);
        assert_eq!(TypeSel::parse(&Bson::Int32(99)).unwrap_err().code(), 2);
    }

    #[test]
    fn number_alias_matches_all_numeric_types() {
        assert!(TypeSel::Number.matches(&Bson::Int64(1)));
        assert!(TypeSel::Number.matches(&Bson::Double(1.0)));
        assert!(!TypeSel::Number.matches(&Bson::from("1")));
    }

    #[test]
    fn regex_options_are_applied_and_invalid_flags_rejected() {
        let r = RegexPred::new("^ab", "i").unwrap();
        assert!(r.matches(&Bson::from("ABc")));
        assert!(!r.matches(&Bson::Int32(1)));
        assert_eq!(RegexPred::new("a", "z").unwrap_err().code(), 51108);
        assert_eq!(RegexPred::new("(", "").unwrap_err().code(), 51091);
    }
}
