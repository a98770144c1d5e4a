//! CSV/TSV values: mongoimport's automatic typing (an integer becomes int32 when it fits,
//! else int64; then a double; else the text) and its `--columnsHaveTypes` column types
//! (`auto()`, `binary(base64|base32|hex)`, `boolean()`, `date(layout)`, `date_go(layout)`,
//! `date_ms(layout)`, `date_oracle(layout)`, `decimal()`, `double()`, `int32()`, `int64()`,
//! `string()`).

use bson::{Binary, Bson, DateTime, RawBson, RawBsonRef, RawDocumentBuf};
use chrono::{NaiveDate, NaiveDateTime};

#[derive(Debug, Clone, PartialEq)]
pub enum ColumnType {
    Auto,
    Binary(Encoding),
    Boolean,
    /// A chrono format translated from the layout's notation.
    Date(String),
    Decimal,
    Double,
    Int32,
    Int64,
    String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Encoding {
    Base64,
    Base32,
    Hex,
}

/// Splits `name.type(arg)` into the name and its type.
pub fn parse_typed_field(spec: &str) -> Result<(String, ColumnType), String> {
    let bad =
        || format!("invalid typed field '{spec}': expected name.type() or name.type(argument)");
    let spec = spec.trim();
    if !spec.ends_with(')') {
        return Err(bad());
    }
    let open = spec.rfind('(').ok_or_else(bad)?;
    let dot = spec[..open].rfind('.').ok_or_else(bad)?;
    let name = &spec[..dot];
    let kind = &spec[dot + 1..open];
    let arg = &spec[open + 1..spec.len() - 1];
    if name.is_empty() {
        return Err(bad());
    }
    let no_arg = |t: ColumnType| {
        if arg.is_empty() {
            Ok(t)
        } else {
            Err(format!("type {kind} takes no argument in '{spec}'"))
        }
    };
    let t = match kind {
        "auto" => no_arg(ColumnType::Auto)?,
        "boolean" => no_arg(ColumnType::Boolean)?,
        "decimal" => no_arg(ColumnType::Decimal)?,
        "double" => no_arg(ColumnType::Double)?,
        "int32" => no_arg(ColumnType::Int32)?,
        "int64" => no_arg(ColumnType::Int64)?,
        "string" => no_arg(ColumnType::String)?,
        "binary" => ColumnType::Binary(match arg {
            "base64" => Encoding::Base64,
            "base32" => Encoding::Base32,
            "hex" => Encoding::Hex,
            _ => {
                return Err(format!(
                    "invalid binary encoding '{arg}' in '{spec}': expected base64, base32 or hex"
                ))
            }
        }),
        "date" | "date_go" => ColumnType::Date(go_layout(arg)),
        "date_ms" => ColumnType::Date(ms_layout(arg)),
        "date_oracle" => ColumnType::Date(oracle_layout(arg)),
        _ => return Err(format!("invalid type '{kind}' in '{spec}'")),
    };
    Ok((name.to_string(), t))
}

/// A CSV value on its way into a document: untyped values borrow their text.
pub enum Cell<'a> {
    Int32(i32),
    Int64(i64),
    Double(f64),
    Str(&'a str),
    Value(Bson),
}

impl Cell<'_> {
    pub fn to_bson(&self) -> Bson {
        match self {
            Cell::Int32(i) => Bson::Int32(*i),
            Cell::Int64(i) => Bson::Int64(*i),
            Cell::Double(d) => Bson::Double(*d),
            Cell::Str(s) => Bson::String(s.to_string()),
            Cell::Value(v) => v.clone(),
        }
    }

    /// Appends the value to `out` under `key`.
    pub fn append_to(self, out: &mut RawDocumentBuf, key: &str) -> Result<(), String> {
        match self {
            Cell::Int32(i) => out.append_ref(key, RawBsonRef::Int32(i)),
            Cell::Int64(i) => out.append_ref(key, RawBsonRef::Int64(i)),
            Cell::Double(d) => out.append_ref(key, RawBsonRef::Double(d)),
            Cell::Str(s) => out.append_ref(key, RawBsonRef::String(s)),
            Cell::Value(v) => out.append(key, RawBson::try_from(v).map_err(|e| e.to_string())?),
        }
        Ok(())
    }
}

/// mongoimport's typing of an untyped value: an integer is int32 when it fits, else
/// int64; then a double; else the text.
pub fn auto_cell(s: &str) -> Cell<'_> {
    let b = s.as_bytes();
    let numeric = b.first().is_some_and(|c| {
        c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'i' | b'I' | b'n' | b'N')
    });
    if numeric {
        if let Ok(i) = s.parse::<i64>() {
            return match i32::try_from(i) {
                Ok(small) => Cell::Int32(small),
                Err(_) => Cell::Int64(i),
            };
        }
        if let Ok(f) = s.parse::<f64>() {
            return Cell::Double(f);
        }
    }
    Cell::Str(s)
}

/// [`auto_cell`] as a BSON value.
pub fn auto_parse(s: &str) -> Bson {
    auto_cell(s).to_bson()
}

impl ColumnType {
    pub fn parse(&self, s: &str) -> Result<Bson, String> {
        let fail = |what: &str| format!("cannot read '{s}' as {what}");
        Ok(match self {
            ColumnType::Auto => auto_parse(s),
            ColumnType::String => Bson::String(s.to_string()),
            ColumnType::Int32 => Bson::Int32(s.trim().parse().map_err(|_| fail("int32"))?),
            ColumnType::Int64 => Bson::Int64(s.trim().parse().map_err(|_| fail("int64"))?),
            ColumnType::Double => Bson::Double(s.trim().parse().map_err(|_| fail("double"))?),
            ColumnType::Decimal => Bson::Decimal128(s.trim().parse().map_err(|_| fail("decimal"))?),
            ColumnType::Boolean => Bson::Boolean(match s.trim() {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
                "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
                _ => return Err(fail("boolean")),
            }),
            ColumnType::Binary(enc) => {
                let codec = match enc {
                    Encoding::Base64 => &data_encoding::BASE64,
                    Encoding::Base32 => &data_encoding::BASE32,
                    Encoding::Hex => &data_encoding::HEXLOWER_PERMISSIVE,
                };
                let bytes = codec
                    .decode(s.trim().as_bytes())
                    .map_err(|_| fail("binary"))?;
                Bson::Binary(Binary {
                    subtype: bson::spec::BinarySubtype::Generic,
                    bytes,
                })
            }
            ColumnType::Date(format) => {
                Bson::DateTime(parse_date(s.trim(), format).ok_or_else(|| fail("date"))?)
            }
        })
    }
}

/// A date in `format` (chrono's notation): with an offset when it has one, else UTC.
pub fn parse_date(s: &str, format: &str) -> Option<DateTime> {
    if let Ok(t) = chrono::DateTime::parse_from_str(s, format) {
        return Some(DateTime::from_millis(t.timestamp_millis()));
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(s, format) {
        return Some(DateTime::from_millis(t.and_utc().timestamp_millis()));
    }
    let d = NaiveDate::parse_from_str(s, format).ok()?;
    Some(DateTime::from_millis(
        d.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis(),
    ))
}

/// Rewrites a layout by replacing its tokens (longest first) with chrono's; other text is
/// kept (with `%` escaped).
fn translate(layout: &str, tokens: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let mut rest = layout;
    'outer: while !rest.is_empty() {
        for (from, to) in tokens {
            if let Some(after) = rest.strip_prefix(from) {
                out.push_str(to);
                rest = after;
                continue 'outer;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c == '%' {
            out.push_str("%%");
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Go's reference-time layout (`2006-01-02T15:04:05Z07:00`).
pub fn go_layout(layout: &str) -> String {
    translate(
        layout,
        &[
            ("January", "%B"),
            ("Monday", "%A"),
            ("Z07:00", "%:z"),
            ("-07:00", "%:z"),
            ("-0700", "%z"),
            ("2006", "%Y"),
            (".000000000", "%.9f"),
            (".000000", "%.6f"),
            (".000", "%.3f"),
            (".999999999", "%.f"),
            (".999999", "%.f"),
            (".999", "%.f"),
            ("Jan", "%b"),
            ("Mon", "%a"),
            ("MST", "%Z"),
            ("01", "%m"),
            ("02", "%d"),
            ("_2", "%e"),
            ("03", "%I"),
            ("04", "%M"),
            ("05", "%S"),
            ("06", "%y"),
            ("15", "%H"),
            ("PM", "%p"),
            ("pm", "%P"),
            ("1", "%m"),
            ("2", "%d"),
            ("3", "%I"),
            ("4", "%M"),
            ("5", "%S"),
        ],
    )
}

/// Microsoft's custom date format (`yyyy-MM-dd HH:mm:ss.fff`).
pub fn ms_layout(layout: &str) -> String {
    translate(
        layout,
        &[
            ("yyyy", "%Y"),
            ("MMMM", "%B"),
            ("dddd", "%A"),
            ("fffffff", "%.7f"),
            ("ffffff", "%6f"),
            ("fff", "%3f"),
            ("MMM", "%b"),
            ("ddd", "%a"),
            ("zzz", "%:z"),
            ("yy", "%y"),
            ("MM", "%m"),
            ("dd", "%d"),
            ("HH", "%H"),
            ("hh", "%I"),
            ("mm", "%M"),
            ("ss", "%S"),
            ("tt", "%p"),
            ("M", "%m"),
            ("d", "%d"),
            ("H", "%H"),
            ("h", "%I"),
            ("m", "%M"),
            ("s", "%S"),
        ],
    )
}

/// Oracle's datetime format (`YYYY-MM-DD HH24:MI:SS`).
pub fn oracle_layout(layout: &str) -> String {
    translate(
        &layout.to_ascii_uppercase(),
        &[
            ("YYYY", "%Y"),
            ("MONTH", "%B"),
            ("HH24", "%H"),
            ("HH12", "%I"),
            ("FF3", "%3f"),
            ("FF6", "%6f"),
            ("FF9", "%9f"),
            ("FF", "%6f"),
            ("MON", "%b"),
            ("DAY", "%A"),
            ("DY", "%a"),
            ("YY", "%y"),
            ("MM", "%m"),
            ("DD", "%d"),
            ("HH", "%I"),
            ("MI", "%M"),
            ("SS", "%S"),
            ("AM", "%p"),
            ("PM", "%p"),
            ("TZH:TZM", "%:z"),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| t.timestamp_millis())
            .unwrap_or(i64::MIN)
    }

    #[test]
    fn untyped_values_become_int32_int64_double_or_text() {
        assert_eq!(auto_parse("12"), Bson::Int32(12));
        assert_eq!(auto_parse("-3000000000"), Bson::Int64(-3_000_000_000));
        assert_eq!(auto_parse("1.5"), Bson::Double(1.5));
        assert_eq!(auto_parse("12a"), Bson::String("12a".into()));
        assert_eq!(auto_parse(""), Bson::String(String::new()));
    }

    #[test]
    fn typed_field_specs_split_name_type_and_argument() {
        assert_eq!(
            parse_typed_field("a.b.int32()"),
            Ok(("a.b".into(), ColumnType::Int32))
        );
        assert_eq!(
            parse_typed_field("blob.binary(hex)"),
            Ok(("blob".into(), ColumnType::Binary(Encoding::Hex)))
        );
        assert!(parse_typed_field("a.int33()").is_err());
        assert!(parse_typed_field("plain").is_err());
        assert!(parse_typed_field("a.int32(x)").is_err());
    }

    #[test]
    fn date_layouts_of_go_microsoft_and_oracle_read_the_same_instant() {
        let want = ms("2021-03-04T05:06:07.089Z");
        let (_, go) = parse_typed_field("t.date_go(2006-01-02 15:04:05.000)")
            .unwrap_or(("".into(), ColumnType::Auto));
        assert_eq!(
            go.parse("2021-03-04 05:06:07.089"),
            Ok(Bson::DateTime(DateTime::from_millis(want)))
        );
        let (_, msf) = parse_typed_field("t.date_ms(yyyy-MM-dd HH:mm:ss.fff)")
            .unwrap_or(("".into(), ColumnType::Auto));
        assert_eq!(
            msf.parse("2021-03-04 05:06:07.089"),
            Ok(Bson::DateTime(DateTime::from_millis(want)))
        );
        let (_, ora) = parse_typed_field("t.date_oracle(YYYY-MM-DD HH24:MI:SS.FF3)")
            .unwrap_or(("".into(), ColumnType::Auto));
        assert_eq!(
            ora.parse("2021-03-04 05:06:07.089"),
            Ok(Bson::DateTime(DateTime::from_millis(want)))
        );
        let (_, day) =
            parse_typed_field("d.date(2006-01-02)").unwrap_or(("".into(), ColumnType::Auto));
        assert_eq!(
            day.parse("2021-03-04"),
            Ok(Bson::DateTime(DateTime::from_millis(ms(
                "2021-03-04T00:00:00Z"
            ))))
        );
        let (_, zone) = parse_typed_field("d.date_go(2006-01-02T15:04:05Z07:00)")
            .unwrap_or(("".into(), ColumnType::Auto));
        assert_eq!(
            zone.parse("2021-03-04T07:06:07+02:00"),
            Ok(Bson::DateTime(DateTime::from_millis(ms(
                "2021-03-04T05:06:07Z"
            ))))
        );
    }

    #[test]
    fn typed_values_that_do_not_parse_are_errors() {
        assert!(ColumnType::Int32.parse("x").is_err());
        assert!(ColumnType::Int32.parse("3000000000").is_err());
        assert_eq!(ColumnType::Boolean.parse("T"), Ok(Bson::Boolean(true)));
        assert!(ColumnType::Boolean.parse("yes").is_err());
        assert_eq!(
            ColumnType::String.parse("12"),
            Ok(Bson::String("12".into()))
        );
        assert!(
            matches!(ColumnType::Binary(Encoding::Base64).parse("aGk="), Ok(Bson::Binary(b)) if b.bytes == b"hi")
        );
    }
}
