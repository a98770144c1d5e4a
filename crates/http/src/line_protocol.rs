//! InfluxDB line protocol: `measurement[,tag=value...] field=value[,field=value...] [time]`.
//!
//! Escaping follows InfluxDB (`models/points.go`): a backslash before a byte makes that
//! byte part of the name instead of ending it, and the backslash is dropped only before
//! the bytes its part unescapes (measurement and field keys: comma, space, equals sign,
//! double quote; tag keys and values: comma, space, equals sign). Before anything else,
//! another backslash included, the backslash is kept: `\\server\share` is that path.
//! String field values have their own escapes (`\"` and `\\`). Lines that start with `#`
//! are comments; blank lines are skipped; a string field value may span lines. A line
//! that repeats a tag key is malformed ("duplicate tags"). A malformed line is reported
//! with its number (1-based) and the lines around it are still parsed, so the caller can
//! write the good ones as InfluxDB 1.x does.

use std::borrow::Cow;

/// One field value, typed as line protocol writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue<'a> {
    Float(f64),
    /// `12i`
    Int(i64),
    /// `12u`
    UInt(u64),
    Str(Cow<'a, str>),
    Bool(bool),
}

/// One parsed line; names and strings borrow from the body unless they had escapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Point<'a> {
    pub measurement: Cow<'a, str>,
    /// In the order written (the caller sorts them).
    pub tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// In the order written; a repeated key appears twice (the caller keeps the last).
    pub fields: Vec<(Cow<'a, str>, FieldValue<'a>)>,
    /// As written, in the request's precision.
    pub timestamp: Option<i64>,
}

/// A malformed line: its number, its text (cut to 200 bytes) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct LineError {
    pub line: usize,
    pub text: String,
    pub reason: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unable to parse '{}' (line {}): {}",
            self.text, self.line, self.reason
        )
    }
}

/// Every point of `body` with its line number, and every malformed line.
pub fn parse(body: &[u8]) -> (Vec<(usize, Point<'_>)>, Vec<LineError>) {
    let mut points = Vec::new();
    let mut errors = Vec::new();
    // UTF-8 is checked once for the whole body; a line that is not UTF-8 is malformed
    // and the text around it is parsed as usual.
    let (mut rest, mut line) = (body, 1);
    loop {
        let bad = match std::str::from_utf8(rest) {
            Ok(text) => {
                parse_text(text, line, &mut points, &mut errors);
                break;
            }
            Err(e) => e.valid_up_to(),
        };
        let line_start = rest[..bad]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |i| i + 1);
        let line_end = rest[bad..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(rest.len(), |i| bad + i + 1);
        if let Ok(text) = std::str::from_utf8(&rest[..line_start]) {
            parse_text(text, line, &mut points, &mut errors);
            line += text.bytes().filter(|&c| c == b'\n').count();
        }
        errors.push(LineError {
            line,
            text: error_text(&rest[line_start..line_end]),
            reason: "invalid UTF-8".to_string(),
        });
        line += 1;
        rest = &rest[line_end..];
    }
    (points, errors)
}

/// A malformed line as an error quotes it: its first 200 bytes.
fn error_text(line: &[u8]) -> String {
    String::from_utf8_lossy(&line[..line.len().min(200)])
        .trim_end()
        .to_string()
}

/// The points and malformed lines of `text`, whose first line is number `line`.
fn parse_text<'a>(
    text: &'a str,
    line: usize,
    points: &mut Vec<(usize, Point<'a>)>,
    errors: &mut Vec<LineError>,
) {
    let mut p = Parser {
        s: text,
        b: text.as_bytes(),
        pos: 0,
        line,
    };
    while p.pos < p.b.len() {
        p.skip_blanks();
        let (start, line) = (p.pos, p.line);
        match p.peek() {
            None => break,
            Some(b'\n') => {
                p.newline();
                continue;
            }
            Some(b'#') => {
                p.skip_line();
                continue;
            }
            _ => {}
        }
        match p.point() {
            Ok(point) => points.push((line, point)),
            Err(reason) => {
                p.pos = start;
                p.line = line;
                p.skip_line();
                errors.push(LineError {
                    line,
                    text: error_text(&p.b[start..p.pos]),
                    reason: reason.to_string(),
                });
            }
        }
    }
}

type Reason = &'static str;

/// Token boundaries are ASCII bytes, so every token is a slice of `s` on character
/// boundaries.
struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
    line: usize,
}

/// Where an unescaped token ends.
#[derive(Clone, Copy)]
enum Part {
    Measurement,
    TagKey,
    TagValue,
    FieldKey,
}

/// Bytes that end a token or start an escape, by part.
const MEASUREMENT_STOPS: [bool; 256] = stop_table(b", \n\\");
const NAME_STOPS: [bool; 256] = stop_table(b"=, \n\\");

const fn stop_table(stops: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut i = 0;
    while i < stops.len() {
        table[stops[i] as usize] = true;
        i += 1;
    }
    table
}

impl Part {
    fn stops(self) -> &'static [bool; 256] {
        match self {
            Part::Measurement => &MEASUREMENT_STOPS,
            _ => &NAME_STOPS,
        }
    }

    fn ends_at(self, c: u8) -> bool {
        match self {
            Part::Measurement => c == b',' || c == b' ' || c == b'\n',
            Part::TagKey | Part::FieldKey => c == b'=' || c == b',' || c == b' ' || c == b'\n',
            Part::TagValue => c == b',' || c == b' ' || c == b'\n' || c == b'=',
        }
    }

    /// The bytes a backslash escapes in this part (it stays before any other).
    fn escapable(self, c: u8) -> bool {
        match self {
            Part::Measurement | Part::FieldKey => matches!(c, b',' | b' ' | b'=' | b'"'),
            Part::TagKey | Part::TagValue => matches!(c, b',' | b' ' | b'='),
        }
    }
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn newline(&mut self) {
        self.pos += 1;
        self.line += 1;
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r')) {
            self.pos += 1;
        }
    }

    /// Skips to the start of the next line.
    fn skip_line(&mut self) {
        while let Some(c) = self.peek() {
            if c == b'\n' {
                self.newline();
                return;
            }
            self.pos += 1;
        }
    }

    fn point(&mut self) -> Result<Point<'a>, Reason> {
        let measurement = self.token(Part::Measurement)?;
        if measurement.is_empty() {
            return Err("missing measurement");
        }
        let mut tags = Vec::new();
        while self.peek() == Some(b',') {
            self.pos += 1;
            let key = self.token(Part::TagKey)?;
            if key.is_empty() {
                return Err("missing tag key");
            }
            if self.peek() != Some(b'=') {
                return Err("missing tag value");
            }
            self.pos += 1;
            let value = self.token(Part::TagValue)?;
            if value.is_empty() {
                return Err("missing tag value");
            }
            if self.peek() == Some(b'=') {
                return Err("invalid tag format");
            }
            tags.push((key, value));
        }
        if repeats_a_key(&tags) {
            return Err("duplicate tags");
        }
        if self.peek() != Some(b' ') {
            return Err("missing fields");
        }
        self.skip_spaces();
        let mut fields = Vec::new();
        loop {
            let key = self.token(Part::FieldKey)?;
            if key.is_empty() {
                return Err("missing field key");
            }
            if self.peek() != Some(b'=') {
                return Err(if fields.is_empty() {
                    "missing fields"
                } else {
                    "missing field value"
                });
            }
            self.pos += 1;
            fields.push((key, self.field_value()?));
            if self.peek() == Some(b',') {
                self.pos += 1;
                continue;
            }
            break;
        }
        self.skip_spaces();
        let timestamp = match self.peek() {
            None | Some(b'\n') => None,
            _ => Some(self.timestamp()?),
        };
        self.skip_spaces();
        match self.peek() {
            None => {}
            Some(b'\n') => self.newline(),
            Some(_) => return Err("invalid timestamp"),
        }
        Ok(Point {
            measurement,
            tags,
            fields,
            timestamp,
        })
    }

    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r')) {
            self.pos += 1;
        }
    }

    /// An unescaped name or tag value (borrowed when it had no escapes).
    fn token(&mut self, part: Part) -> Result<Cow<'a, str>, Reason> {
        let b: &'a [u8] = self.b;
        let start = self.pos;
        // Most tokens have no escape: find their end with one table lookup a byte.
        let stops = part.stops();
        while let Some(&c) = b.get(self.pos) {
            if stops[usize::from(c)] {
                break;
            }
            self.pos += 1;
        }
        if b.get(self.pos) != Some(&b'\\') {
            return self
                .s
                .get(start..self.pos)
                .map(Cow::Borrowed)
                .ok_or("invalid UTF-8");
        }
        self.pos = start;
        let mut owned: Option<Vec<u8>> = None;
        while let Some(c) = self.peek() {
            if part.ends_at(c) {
                break;
            }
            if c == b'\\' {
                if let Some(n) = b.get(self.pos + 1).copied() {
                    if part.escapable(n) {
                        owned
                            .get_or_insert_with(|| b[start..self.pos].to_vec())
                            .push(n);
                        self.pos += 2;
                        continue;
                    }
                }
            }
            if let Some(o) = owned.as_mut() {
                o.push(c);
            }
            self.pos += 1;
        }
        match owned {
            None => self
                .s
                .get(start..self.pos)
                .map(Cow::Borrowed)
                .ok_or("invalid UTF-8"),
            Some(o) => String::from_utf8(o)
                .map(Cow::Owned)
                .map_err(|_| "invalid UTF-8"),
        }
    }

    fn field_value(&mut self) -> Result<FieldValue<'a>, Reason> {
        if self.peek() == Some(b'"') {
            return self.string_value();
        }
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c == b',' || c == b' ' || c == b'\n' {
                break;
            }
            self.pos += 1;
        }
        scalar(self.s.get(start..self.pos).ok_or("invalid UTF-8")?)
    }

    /// A double-quoted string; `\"` and `\\` are escapes, other backslashes are literal.
    fn string_value(&mut self) -> Result<FieldValue<'a>, Reason> {
        let b: &'a [u8] = self.b;
        self.pos += 1;
        let start = self.pos;
        let mut owned: Option<Vec<u8>> = None;
        let end = loop {
            match self.peek() {
                None => return Err("unbalanced quotes"),
                Some(b'"') => {
                    self.pos += 1;
                    break self.pos - 1;
                }
                Some(b'\\') if matches!(b.get(self.pos + 1), Some(b'"' | b'\\')) => {
                    owned
                        .get_or_insert_with(|| b[start..self.pos].to_vec())
                        .push(b[self.pos + 1]);
                    self.pos += 2;
                }
                Some(c) => {
                    if c == b'\n' {
                        self.line += 1;
                    }
                    if let Some(o) = owned.as_mut() {
                        o.push(c);
                    }
                    self.pos += 1;
                }
            }
        };
        match self.peek() {
            None | Some(b',' | b' ' | b'\n' | b'\r') => {}
            Some(_) => return Err("invalid field format"),
        }
        let s = match owned {
            None => Cow::Borrowed(self.s.get(start..end).ok_or("invalid UTF-8")?),
            Some(o) => Cow::Owned(String::from_utf8(o).map_err(|_| "invalid UTF-8")?),
        };
        Ok(FieldValue::Str(s))
    }

    fn timestamp(&mut self) -> Result<i64, Reason> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c == b' ' || c == b'\n' || c == b'\r' || c == b'\t' {
                break;
            }
            self.pos += 1;
        }
        let raw = self.s.get(start..self.pos).ok_or("bad timestamp")?;
        if raw.is_empty()
            || !raw
                .trim_start_matches('-')
                .bytes()
                .all(|c| c.is_ascii_digit())
        {
            return Err("bad timestamp");
        }
        raw.parse::<i64>().map_err(|_| "bad timestamp")
    }
}

/// Whether two tags have the same key: pairwise for the few tags of a usual line, by
/// sorting for many (a hostile line of 100,000 tags stays n log n).
fn repeats_a_key(tags: &[(Cow<'_, str>, Cow<'_, str>)]) -> bool {
    if tags.len() <= 16 {
        return (1..tags.len()).any(|i| tags[..i].iter().any(|(k, _)| k == &tags[i].0));
    }
    let mut keys: Vec<&str> = tags.iter().map(|(k, _)| k.as_ref()).collect();
    keys.sort_unstable();
    keys.windows(2).any(|w| w[0] == w[1])
}

/// A numeric or boolean field value.
fn scalar(raw: &str) -> Result<FieldValue<'static>, Reason> {
    match raw {
        "" => return Err("missing field value"),
        "t" | "T" | "true" | "True" | "TRUE" => return Ok(FieldValue::Bool(true)),
        "f" | "F" | "false" | "False" | "FALSE" => return Ok(FieldValue::Bool(false)),
        _ => {}
    }
    if let Some(digits) = raw.strip_suffix('i') {
        if !is_integer(digits, true) {
            return Err("invalid integer");
        }
        return digits
            .parse::<i64>()
            .map(FieldValue::Int)
            .map_err(|_| "integer out of range");
    }
    if let Some(digits) = raw.strip_suffix('u') {
        if !is_integer(digits, false) {
            return Err("invalid unsigned integer");
        }
        return digits
            .parse::<u64>()
            .map(FieldValue::UInt)
            .map_err(|_| "unsigned integer out of range");
    }
    // Rust also reads "inf", "NaN" and "infinity"; line protocol has no such floats.
    let body = raw.strip_prefix(['-', '+']).unwrap_or(raw);
    if !body.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        || !body
            .bytes()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'-' | b'+'))
    {
        return Err("invalid number");
    }
    match raw.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(FieldValue::Float(v)),
        Ok(_) => Err("number out of range"),
        Err(_) => Err("invalid number"),
    }
}

fn is_integer(s: &str, signed: bool) -> bool {
    let digits = if signed {
        s.strip_prefix('-').unwrap_or(s)
    } else {
        s
    };
    !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
#[path = "line_protocol_test.rs"]
mod tests;
