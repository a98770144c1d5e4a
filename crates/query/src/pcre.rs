//! Regular expressions as MongoDB runs them: PCRE2 (MongoDB 6.1+), in UTF mode without
//! Unicode properties, so `\d`, `\w` and `\b` are ASCII while case-insensitive matching
//! folds all of Unicode. Lookaround, backreferences, atomic groups and possessive
//! quantifiers work; `$` also matches before a final newline. Used by `$regex`,
//! `$regexMatch`/`$regexFind`/`$regexFindAll` and `$jsonSchema`'s `pattern`.

use pcre2::bytes::{Regex, RegexBuilder};
use std::cell::RefCell;
use std::sync::Arc;

/// Patterns a thread compiled last (expressions evaluate theirs once per document).
const CACHED: usize = 8;

thread_local! {
    static RECENT: RefCell<Vec<(String, String, Arc<Pcre>)>> = const { RefCell::new(Vec::new()) };
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Pcre(Regex);

/// One match: the whole match and each group (None when a group took no part).
pub struct Found<'t> {
    /// Byte offset of the match in the subject.
    pub start: usize,
    pub text: &'t str,
    pub groups: Vec<Option<&'t str>>,
}

impl Pcre {
    /// Compiles `pattern` with MongoDB's options, each one of `imsx` (`u` is accepted
    /// and changes nothing: UTF mode is always on). Returns the option it does not know,
    /// or PCRE2's message, as `Err`.
    pub fn new(pattern: &str, options: &str) -> Result<Pcre, Invalid> {
        let mut b = RegexBuilder::new();
        b.utf(true).jit_if_available(true);
        for c in options.chars() {
            match c {
                'i' => b.caseless(true),
                'm' => b.multi_line(true),
                's' => b.dotall(true),
                'x' => b.extended(true),
                'u' => &mut b,
                other => return Err(Invalid::Flag(other)),
            };
        }
        b.build(pattern).map(Pcre).map_err(|e| {
            // "PCRE2: error compiling pattern at offset N: <message>": MongoDB shows the
            // message.
            let s = e.to_string();
            Invalid::Pattern(s.splitn(3, ": ").nth(2).unwrap_or(&s).to_string())
        })
    }

    /// [`Pcre::new`], reusing this thread's compilation of the same pattern and options
    /// among the last few.
    pub fn cached(pattern: &str, options: &str) -> Result<Arc<Pcre>, Invalid> {
        let hit = RECENT.with(|r| {
            r.borrow()
                .iter()
                .find(|(p, o, _)| p == pattern && o == options)
                .map(|(_, _, re)| re.clone())
        });
        if let Some(re) = hit {
            return Ok(re);
        }
        let re = Arc::new(Pcre::new(pattern, options)?);
        RECENT.with(|r| {
            let mut r = r.borrow_mut();
            if r.len() == CACHED {
                r.remove(0);
            }
            r.push((pattern.to_string(), options.to_string(), re.clone()));
        });
        Ok(re)
    }

    /// Whether `text` matches. A match that PCRE2 gives up on (its backtracking limit,
    /// reached by a catastrophic pattern) counts as no match.
    pub fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text.as_bytes()).unwrap_or(false)
    }

    /// The first match in `text`.
    pub fn find<'t>(&self, text: &'t str) -> Option<Found<'t>> {
        let caps = self.0.captures(text.as_bytes()).ok()??;
        Some(found(&caps, text))
    }

    /// Every match in `text`, left to right (an empty match advances by one character).
    pub fn find_all<'t>(&self, text: &'t str) -> Vec<Found<'t>> {
        self.0
            .captures_iter(text.as_bytes())
            .map_while(Result::ok)
            .map(|caps| found(&caps, text))
            .collect()
    }
}

fn found<'t>(caps: &pcre2::bytes::Captures<'_>, text: &'t str) -> Found<'t> {
    // In UTF mode a match starts and ends on character boundaries of valid UTF-8.
    let part = |m: pcre2::bytes::Match<'_>| text.get(m.start()..m.end());
    let whole = caps.get(0);
    Found {
        start: whole.map_or(0, |m| m.start()),
        text: whole.and_then(part).unwrap_or(""),
        groups: (1..caps.len())
            .map(|i| caps.get(i).and_then(part))
            .collect(),
    }
}

/// Why a pattern does not compile.
#[derive(Debug, Clone, PartialEq)]
pub enum Invalid {
    /// An option that is not one of `imsxu`.
    Flag(char),
    /// PCRE2's compile error.
    Pattern(String),
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::Flag(c) => write!(f, "invalid flag in regex options: {c}"),
            Invalid::Pattern(m) => f.write_str(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookaround_and_backreferences_match_as_in_pcre() {
        let re = Pcre::new(r"^(?!tmp_)\w+$", "").unwrap();
        assert!(re.is_match("host_1"));
        assert!(!re.is_match("tmp_1"));
        assert!(Pcre::new(r"(\w)\1", "").unwrap().is_match("aabb"));
        assert!(Pcre::new(r"(?<=\$)\d+", "").unwrap().is_match("$42"));
    }

    #[test]
    fn dollar_matches_before_a_final_newline_and_classes_are_ascii() {
        assert!(Pcre::new("S$", "").unwrap().is_match("abS\n"));
        assert!(!Pcre::new(r"^\d+$", "").unwrap().is_match("١٢"));
        assert!(Pcre::new("^é", "i").unwrap().is_match("Éa"));
    }

    #[test]
    fn options_apply_and_unknown_ones_are_refused() {
        assert!(Pcre::new("^b", "m").unwrap().is_match("a\nb"));
        assert!(Pcre::new("a.b", "s").unwrap().is_match("a\nb"));
        assert!(Pcre::new("a b # comment", "x").unwrap().is_match("ab"));
        assert!(Pcre::new("a", "u").is_ok());
        assert_eq!(Pcre::new("a", "z").unwrap_err(), Invalid::Flag('z'));
        assert_eq!(
            Pcre::new("(", "").unwrap_err(),
            Invalid::Pattern("missing closing parenthesis".into())
        );
    }

    #[test]
    fn a_cached_pattern_is_compiled_once_per_thread_and_keyed_by_its_options() {
        let a = Pcre::cached("^a", "").unwrap();
        assert!(Arc::ptr_eq(&a, &Pcre::cached("^a", "").unwrap()));
        let i = Pcre::cached("^a", "i").unwrap();
        assert!(!Arc::ptr_eq(&a, &i) && i.is_match("A") && !a.is_match("A"));
        assert_eq!(Pcre::cached("a", "q").unwrap_err(), Invalid::Flag('q'));
    }

    #[test]
    fn find_all_gives_offsets_and_groups_of_each_match() {
        let re = Pcre::new(r"(\d)(x)?", "").unwrap();
        let all = re.find_all("a1b2x");
        let got: Vec<_> = all
            .iter()
            .map(|f| (f.start, f.text, f.groups.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, "1", vec![Some("1"), None]),
                (3, "2x", vec![Some("2"), Some("x")])
            ]
        );
        assert_eq!(Pcre::new("", "").unwrap().find_all("ab").len(), 3);
    }
}
