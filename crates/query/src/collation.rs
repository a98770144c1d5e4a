//! Collation (MongoDB's `collation` document) with ICU4X's collator: `locale` (one of the
//! locales MongoDB supports; `"simple"` is the binary comparison), `strength` 1-5,
//! `caseLevel`, `caseFirst`, `numericOrdering`, `alternate`, `maxVariable`,
//! `normalization` (ICU4X always normalizes, which only ever gives the correct order) and
//! `backwards` (only as the locale sets it: `fr_CA`).
//!
//! A command runs with its collation *active* on its thread ([`scope`]): every string
//! comparison of the BSON comparison order (filters, sorts, `$group` keys, distinct
//! values, expression comparisons) then goes through the collator, and the planner reads
//! no index ([`active`]), since index keys are binary.

use crate::error::QueryError;
use bson::{doc, Bson, Document};
use icu_collator::options::{AlternateHandling, CaseLevel, CollatorOptions, MaxVariable, Strength};
use icu_collator::preferences::{CollationCaseFirst, CollationNumericOrdering, CollationType};
use icu_collator::{CollatorBorrowed, CollatorPreferences};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::sync::Arc;

/// The locales MongoDB 7.0 accepts (its "Collation Locales" list).
const LOCALES: &[&str] = &[
    "af",
    "sq",
    "am",
    "ar",
    "hy",
    "as",
    "az",
    "be",
    "bn",
    "bs",
    "bs_Cyrl",
    "bg",
    "my",
    "ca",
    "chr",
    "zh",
    "zh_Hant",
    "hr",
    "cs",
    "da",
    "nl",
    "dz",
    "en",
    "en_US",
    "en_US_POSIX",
    "eo",
    "et",
    "ee",
    "fo",
    "fil",
    "fi",
    "fi_FI",
    "fr",
    "fr_CA",
    "gl",
    "ka",
    "de",
    "de_AT",
    "el",
    "gu",
    "ha",
    "haw",
    "he",
    "hi",
    "hu",
    "is",
    "ig",
    "smn",
    "id",
    "ga",
    "it",
    "ja",
    "kl",
    "kn",
    "kk",
    "km",
    "kok",
    "ko",
    "ky",
    "lk",
    "lo",
    "lv",
    "li",
    "lt",
    "dsb",
    "lb",
    "mk",
    "ms",
    "ml",
    "mt",
    "mr",
    "mn",
    "ne",
    "se",
    "nb",
    "nn",
    "or",
    "om",
    "ps",
    "fa",
    "fa_AF",
    "pl",
    "pt",
    "pa",
    "ro",
    "ru",
    "sr",
    "sr_Latn",
    "si",
    "sk",
    "sl",
    "es",
    "sw",
    "sv",
    "ta",
    "te",
    "th",
    "bo",
    "to",
    "tr",
    "uk",
    "hsb",
    "ur",
    "ug",
    "vi",
    "wae",
    "cy",
    "yi",
    "yo",
    "zu",
];

/// A non-simple collation: its full specification (as listCollections shows it) and its
/// collator.
pub struct Collation {
    spec: Document,
    collator: CollatorBorrowed<'static>,
}

impl std::fmt::Debug for Collation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Collation({})", self.spec)
    }
}

impl Collation {
    /// The specification with every option filled in, as MongoDB shows a collection's or
    /// an index's collation.
    pub fn spec(&self) -> &Document {
        &self.spec
    }

    pub fn compare(&self, a: &str, b: &str) -> Ordering {
        self.collator.compare(a, b)
    }

    /// The key of `s` in this collation as a string: strings compare by their keys, byte
    /// by byte, as the collation compares them (equal keys: equal strings), so an index can
    /// store keys in its ordinary string order. Each byte `b` of ICU's sort key becomes the
    /// character U+0001 + `b`: UTF-8 keeps code-point order, and no key holds a NUL.
    pub fn key(&self, s: &str) -> String {
        let mut bytes = Vec::new();
        let Ok(()) = self.collator.write_sort_key_to(s, &mut bytes);
        bytes
            .into_iter()
            .filter_map(|b| char::from_u32(u32::from(b) + 1))
            .collect()
    }

    /// `v` with every string in it (in documents and arrays too) replaced by its
    /// [`key`](Self::key): what a collated index stores and bounds its scans by.
    pub fn key_value(&self, v: &Bson) -> Bson {
        match v {
            Bson::String(s) => Bson::String(self.key(s)),
            Bson::Symbol(s) => Bson::Symbol(self.key(s)),
            Bson::Document(d) => Bson::Document(
                d.iter()
                    .map(|(k, v)| (k.clone(), self.key_value(v)))
                    .collect(),
            ),
            Bson::Array(items) => Bson::Array(items.iter().map(|v| self.key_value(v)).collect()),
            other => other.clone(),
        }
    }
}

impl PartialEq for Collation {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

/// Whether `v` is or holds a string (the values collations compare differently).
pub fn has_strings(v: &Bson) -> bool {
    match v {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Document(d) => d.values().any(has_strings),
        Bson::Array(items) => items.iter().any(has_strings),
        _ => false,
    }
}

fn bad(msg: impl Into<String>) -> QueryError {
    QueryError::Coded(2, msg.into())
}

/// Parses a `collation` document; `None` for the simple (binary) collation.
pub fn parse(v: &Bson) -> Result<Option<Arc<Collation>>, QueryError> {
    let d = match v {
        Bson::Document(d) => d,
        _ => {
            return Err(QueryError::Coded(
                14,
                "BSON field 'collation' is the wrong type, expected type 'object'".into(),
            ))
        }
    };
    let locale = match d.get("locale") {
        Some(Bson::String(s)) => s.as_str(),
        Some(_) => {
            return Err(QueryError::Coded(
                14,
                "BSON field 'collation.locale' is the wrong type, expected type 'string'".into(),
            ))
        }
        None => {
            return Err(QueryError::Coded(
                40414,
                "BSON field 'collation.locale' is missing but a required field".into(),
            ))
        }
    };
    let mut strength = 3;
    let mut case_level = false;
    let mut case_first = "off".to_string();
    let mut numeric = false;
    let mut alternate = "non-ignorable".to_string();
    let mut max_variable = "punct".to_string();
    let mut normalization = false;
    let mut backwards = false;
    for (k, v) in d {
        let as_bool = || {
            v.as_bool().ok_or_else(|| {
                QueryError::Coded(
                    14,
                    format!("BSON field 'collation.{k}' is the wrong type, expected type 'bool'"),
                )
            })
        };
        let as_str = || {
            v.as_str().map(str::to_string).ok_or_else(|| {
                QueryError::Coded(
                    14,
                    format!("BSON field 'collation.{k}' is the wrong type, expected type 'string'"),
                )
            })
        };
        match k.as_str() {
            "locale" | "version" => {}
            "strength" => {
                strength = match v {
                    Bson::Int32(i) => i64::from(*i),
                    Bson::Int64(i) => *i,
                    Bson::Double(f) if f.fract() == 0.0 => *f as i64,
                    _ => return Err(QueryError::Coded(
                        14,
                        "BSON field 'collation.strength' is the wrong type, expected type 'int'"
                            .into(),
                    )),
                };
                if !(1..=5).contains(&strength) {
                    return Err(bad(format!(
                        "Field 'strength' must be an integer 1 through 5. Got: {strength}"
                    )));
                }
            }
            "caseLevel" => case_level = as_bool()?,
            "caseFirst" => {
                case_first = as_str()?;
                if !matches!(case_first.as_str(), "upper" | "lower" | "off") {
                    return Err(bad(format!(
                        "Field 'caseFirst' must be 'upper', 'lower', or 'off'. Got: {case_first}"
                    )));
                }
            }
            "numericOrdering" => numeric = as_bool()?,
            "alternate" => {
                alternate = as_str()?;
                if !matches!(alternate.as_str(), "non-ignorable" | "shifted") {
                    return Err(bad(format!(
                        "Field 'alternate' must be 'non-ignorable' or 'shifted'. Got: {alternate}"
                    )));
                }
            }
            "maxVariable" => {
                max_variable = as_str()?;
                if !matches!(max_variable.as_str(), "punct" | "space") {
                    return Err(bad(format!(
                        "Field 'maxVariable' must be 'punct' or 'space'. Got: {max_variable}"
                    )));
                }
            }
            "normalization" => normalization = as_bool()?,
            "backwards" => backwards = as_bool()?,
            other => {
                return Err(QueryError::Coded(
                    40415,
                    format!("BSON field 'collation.{other}' is an unknown field."),
                ))
            }
        }
    }
    if locale == "simple" {
        return Ok(None);
    }
    let (base, keyword) = match locale.split_once('@') {
        Some((b, k)) => (b, Some(k)),
        None => (locale, None),
    };
    if !LOCALES.contains(&base) {
        return Err(bad(format!("Field 'locale' is invalid in: {d}")));
    }
    if backwards && base != "fr_CA" {
        return Err(bad(
            "collation option 'backwards' is supported only as the locale fr_CA sets it",
        ));
    }
    let tag = base.replace('_', "-").replace("-POSIX", "-u-va-posix");
    let parsed: icu_locale_core::Locale = tag
        .parse()
        .map_err(|_| bad(format!("Field 'locale' is invalid in: {d}")))?;
    let mut prefs = CollatorPreferences::from(&parsed);
    if let Some(k) = keyword {
        let Some(kind) = k.strip_prefix("collation=") else {
            return Err(bad(format!("Field 'locale' is invalid in: {d}")));
        };
        let bcp = match kind {
            "phonebook" => "phonebk",
            "traditional" => "trad",
            "dictionary" => "dict",
            other => other,
        };
        let t: icu_locale_core::extensions::unicode::Value = bcp
            .parse()
            .map_err(|_| bad(format!("Field 'locale' is invalid in: {d}")))?;
        prefs.collation_type = Some(
            CollationType::try_from(&t)
                .map_err(|_| bad(format!("Field 'locale' is invalid in: {d}")))?,
        );
    }
    prefs.case_first = Some(match case_first.as_str() {
        "upper" => CollationCaseFirst::Upper,
        "lower" => CollationCaseFirst::Lower,
        _ => CollationCaseFirst::False,
    });
    prefs.numeric_ordering = Some(if numeric {
        CollationNumericOrdering::True
    } else {
        CollationNumericOrdering::False
    });
    let mut options = CollatorOptions::default();
    options.strength = Some(match strength {
        1 => Strength::Primary,
        2 => Strength::Secondary,
        3 => Strength::Tertiary,
        4 => Strength::Quaternary,
        _ => Strength::Identical,
    });
    options.case_level = Some(if case_level {
        CaseLevel::On
    } else {
        CaseLevel::Off
    });
    options.alternate_handling = Some(if alternate == "shifted" {
        AlternateHandling::Shifted
    } else {
        AlternateHandling::NonIgnorable
    });
    options.max_variable = Some(if max_variable == "space" {
        MaxVariable::Space
    } else {
        MaxVariable::Punctuation
    });
    let collator = CollatorBorrowed::try_new(prefs, options)
        .map_err(|e| bad(format!("Field 'locale' is invalid in: {d} ({e})")))?;
    let spec = doc! {
        "locale": locale,
        "caseLevel": case_level,
        "caseFirst": case_first,
        "strength": strength as i32,
        "numericOrdering": numeric,
        "alternate": alternate,
        "maxVariable": max_variable,
        "normalization": normalization,
        "backwards": backwards,
        "version": "57.1",
    };
    Ok(Some(Arc::new(Collation { spec, collator })))
}

thread_local! {
    static ACTIVE: RefCell<Option<Arc<Collation>>> = const { RefCell::new(None) };
}

/// Makes `c` the collation of this thread until the guard drops (then the previous one is
/// back).
pub fn scope(c: Option<Arc<Collation>>) -> Scope {
    Scope(ACTIVE.with(|a| a.replace(c)))
}

pub struct Scope(Option<Arc<Collation>>);

impl Drop for Scope {
    fn drop(&mut self) {
        let previous = self.0.take();
        ACTIVE.with(|a| *a.borrow_mut() = previous);
    }
}

/// Whether a non-simple collation is active on this thread.
pub fn active() -> bool {
    ACTIVE.with(|a| a.borrow().is_some())
}

/// The active collation, if any.
pub fn current() -> Option<Arc<Collation>> {
    ACTIVE.with(|a| a.borrow().clone())
}

/// Two strings in the active collation's order (bytes without one).
pub fn compare_strings(a: &str, b: &str) -> Ordering {
    ACTIVE.with(|c| match c.borrow().as_ref() {
        Some(c) => c.compare(a, b),
        None => a.cmp(b),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coll(d: Document) -> Arc<Collation> {
        match parse(&Bson::Document(d)) {
            Ok(Some(c)) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn strength_two_ignores_case_and_one_ignores_accents_too() {
        let s2 = coll(doc! {"locale": "en", "strength": 2});
        assert_eq!(s2.compare("BERLIN", "berlin"), Ordering::Equal);
        assert_ne!(s2.compare("café", "cafe"), Ordering::Equal);
        let s1 = coll(doc! {"locale": "fr", "strength": 1});
        assert_eq!(s1.compare("Café", "cafe"), Ordering::Equal);
        let s3 = coll(doc! {"locale": "en"});
        assert_ne!(s3.compare("a", "A"), Ordering::Equal);
    }

    #[test]
    fn keys_order_and_equate_strings_as_the_collation_compares_them() {
        let words = [
            "",
            "a",
            "A",
            "á",
            "Á",
            "ab",
            "aB",
            "b",
            "B",
            "cafe",
            "café",
            "Café",
            "CAFE",
            "côte",
            "coté",
            "côté",
            "cote",
            "10",
            "9",
            "2",
            "é",
            "z",
            "Z",
            "ß",
            "ss",
            "日本",
            "-a",
            " a",
            "\u{0}x",
            "\u{10FFFF}",
        ];
        for spec in [
            doc! {"locale": "en"},
            doc! {"locale": "en", "strength": 1},
            doc! {"locale": "en", "strength": 2},
            doc! {"locale": "de", "strength": 4, "caseFirst": "upper"},
            doc! {"locale": "fr_CA", "backwards": true},
            doc! {"locale": "en", "numericOrdering": true, "caseLevel": true},
            doc! {"locale": "en", "alternate": "shifted", "maxVariable": "space"},
            doc! {"locale": "sv", "strength": 5},
        ] {
            let c = coll(spec.clone());
            for a in words {
                for b in words {
                    assert_eq!(
                        c.key(a).cmp(&c.key(b)),
                        c.compare(a, b),
                        "{spec} {a:?} {b:?}"
                    );
                }
            }
        }
        let c = coll(doc! {"locale": "en", "strength": 2});
        assert_eq!(
            c.key_value(&Bson::Document(doc! {"x": ["BERLIN", 1]})),
            c.key_value(&Bson::Document(doc! {"x": ["berlin", 1]}))
        );
    }

    #[test]
    fn numeric_ordering_and_case_first() {
        let n = coll(doc! {"locale": "en", "numericOrdering": true});
        assert_eq!(n.compare("10", "9"), Ordering::Greater);
        let upper = coll(doc! {"locale": "en", "caseFirst": "upper"});
        assert_eq!(upper.compare("A", "a"), Ordering::Less);
    }

    #[test]
    fn simple_is_binary_and_unknown_locales_or_fields_are_refused() {
        assert!(matches!(
            parse(&Bson::Document(doc! {"locale": "simple"})),
            Ok(None)
        ));
        assert!(matches!(
            parse(&Bson::Document(doc! {"locale": "xx"})),
            Err(QueryError::Coded(2, _))
        ));
        assert!(matches!(
            parse(&Bson::Document(doc! {"locale": "en", "foo": 1})),
            Err(QueryError::Coded(40415, _))
        ));
        assert!(matches!(
            parse(&Bson::Document(doc! {"strength": 1})),
            Err(QueryError::Coded(40414, _))
        ));
        assert!(matches!(
            parse(&Bson::Document(doc! {"locale": "en", "strength": 9})),
            Err(QueryError::Coded(2, _))
        ));
    }

    #[test]
    fn the_active_collation_applies_on_this_thread_only_while_in_scope() {
        assert_eq!(compare_strings("a", "A"), Ordering::Greater);
        {
            let _s = scope(Some(coll(doc! {"locale": "en", "strength": 2})));
            assert_eq!(compare_strings("a", "A"), Ordering::Equal);
        }
        assert_eq!(compare_strings("a", "A"), Ordering::Greater);
    }
}
