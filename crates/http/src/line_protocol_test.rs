use super::*;
use proptest::prelude::*;

fn one(line: &str) -> Point<'_> {
    let (points, errors) = parse(line.as_bytes());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(points.len(), 1);
    points.into_iter().next().unwrap().1
}

fn error_of(body: &str) -> LineError {
    let (_, errors) = parse(body.as_bytes());
    errors.into_iter().next().expect("an error")
}

#[test]
fn every_field_type_is_read_with_its_type() {
    let p = one("cpu,host=a f=1.5,i=-3i,u=7u,s=\"x\",b=t,B=FALSE,e=1e3,n=2 1600000000000000000");
    assert_eq!(p.measurement, "cpu");
    assert_eq!(p.tags, vec![("host".into(), "a".into())]);
    let v: Vec<FieldValue> = p.fields.into_iter().map(|(_, v)| v).collect();
    assert_eq!(
        v,
        vec![
            FieldValue::Float(1.5),
            FieldValue::Int(-3),
            FieldValue::UInt(7),
            FieldValue::Str("x".into()),
            FieldValue::Bool(true),
            FieldValue::Bool(false),
            FieldValue::Float(1000.0),
            FieldValue::Float(2.0),
        ]
    );
    assert_eq!(p.timestamp, Some(1_600_000_000_000_000_000));
}

#[test]
fn escapes_are_undone_in_each_part() {
    let p = one(r#"my\ meas\,ure,t\ k\=y=v\,a\ l\=ue f\,i\=e\ ld="a \"q\" \\ b\n" -5"#);
    assert_eq!(p.measurement, "my meas,ure");
    assert_eq!(p.tags, vec![("t k=y".into(), "v,a l=ue".into())]);
    assert_eq!(
        p.fields,
        vec![("f,i=e ld".into(), FieldValue::Str(r#"a "q" \ b\n"#.into()))]
    );
    assert_eq!(p.timestamp, Some(-5));
}

#[test]
fn a_backslash_before_an_ordinary_character_stays() {
    let p = one(r"m\x,t=a\b f=1");
    assert_eq!(p.measurement, r"m\x");
    assert_eq!(p.tags[0].1, r"a\b");
}

#[test]
fn a_doubled_backslash_in_a_name_is_kept_as_two_backslashes() {
    let p = one(r"unc\\m,path=\\fileserver\share,k\\x=v f\\k=1 1");
    assert_eq!(p.measurement, r"unc\\m");
    assert_eq!(
        p.tags,
        vec![
            ("path".into(), r"\\fileserver\share".into()),
            (r"k\\x".into(), "v".into())
        ]
    );
    assert_eq!(p.fields[0].0, r"f\\k");
}

#[test]
fn a_backslash_after_a_backslash_still_escapes_a_delimiter() {
    // The second backslash is kept (it follows one) and escapes the comma.
    let p = one(r"m,t=a\\,b f=1");
    assert_eq!(p.tags, vec![("t".into(), r"a\,b".into())]);
}

#[test]
fn quotes_and_equals_signs_are_unescaped_in_measurements_and_field_keys_only() {
    let p = one(r#"m\"e\=a,t\"k=v\"x\=y f\"\=k=1"#);
    assert_eq!(p.measurement, r#"m"e=a"#);
    assert_eq!(p.tags, vec![(r#"t\"k"#.into(), r#"v\"x=y"#.into())]);
    assert_eq!(p.fields[0].0, r#"f"=k"#);
}

#[test]
fn a_repeated_tag_key_is_refused_as_duplicate_tags() {
    assert_eq!(error_of("dup,a=1,a=2 v=1 1").reason, "duplicate tags");
    assert_eq!(error_of("dup,b=1,a=2,b=3 v=1 1").reason, "duplicate tags");
    // An escaped key is compared unescaped.
    assert_eq!(error_of(r"dup,a\ b=1,a\ b=2 v=1").reason, "duplicate tags");
    // Past the pairwise search too.
    let many: Vec<String> = (0..40).map(|i| format!("k{i}=v")).collect();
    one(&format!("m,{} v=1", many.join(",")));
    assert_eq!(
        error_of(&format!("m,{},k7=w v=1", many.join(","))).reason,
        "duplicate tags"
    );
    // A repeated field key is not an error (the caller keeps its last value).
    assert_eq!(one("m f=1,f=2").fields.len(), 2);
}

#[test]
fn comments_blank_lines_and_crlf_are_skipped() {
    let (points, errors) = parse(b"# comment\n\n   \r\ncpu f=1 10\r\n  cpu f=2\n");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(points.len(), 2);
    assert_eq!(points[0].0, 4);
    assert_eq!(points[0].1.timestamp, Some(10));
    assert_eq!(points[1].0, 5);
    assert_eq!(points[1].1.timestamp, None);
}

#[test]
fn a_string_field_may_span_lines_and_line_numbers_follow() {
    let (points, errors) = parse(b"m s=\"a\nb\" 1\nbad\nm f=1 2\n");
    assert_eq!(points.len(), 2);
    assert_eq!(points[0].1.fields[0].1, FieldValue::Str("a\nb".into()));
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].line, 3);
    assert_eq!(points[1].0, 4);
}

#[test]
fn malformed_lines_are_reported_and_the_rest_parsed() {
    let body = "cpu f=1 1\ncpu\ncpu,host= f=1\ncpu f=\ncpu f=1 12x\ncpu f=\"open\ncpu f=2 2\n";
    let (points, errors) = parse(body.as_bytes());
    // A malformed line ends at its newline, even inside an unclosed string.
    let good: Vec<usize> = points.iter().map(|(line, _)| *line).collect();
    assert_eq!(good, vec![1, 7]);
    let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![2, 3, 4, 5, 6]);
    assert_eq!(errors[0].reason, "missing fields");
    assert_eq!(errors[1].reason, "missing tag value");
    assert_eq!(errors[2].reason, "missing field value");
    assert_eq!(errors[3].reason, "bad timestamp");
    assert_eq!(errors[4].reason, "unbalanced quotes");
    assert_eq!(
        errors[0].to_string(),
        "unable to parse 'cpu' (line 2): missing fields"
    );
}

#[test]
fn a_line_that_is_not_utf8_is_malformed_and_its_neighbours_are_written() {
    let mut body = b"cpu f=1 1\ncpu,h=".to_vec();
    body.extend_from_slice(&[0xff, 0xfe]);
    body.extend_from_slice(b" f=2 2\n\ncpu,h=\xc3\xa9 f=3 3\ncpu f=");
    body.push(0xc3);
    let (points, errors) = parse(&body);
    let good: Vec<(usize, &str)> = points
        .iter()
        .map(|(line, p)| (*line, p.tags.first().map_or("", |t| t.1.as_ref())))
        .collect();
    assert_eq!(good, vec![(1, ""), (4, "\u{e9}")]);
    let bad: Vec<(usize, &str)> = errors.iter().map(|e| (e.line, e.reason.as_str())).collect();
    assert_eq!(bad, vec![(2, "invalid UTF-8"), (5, "invalid UTF-8")]);
    assert_eq!(errors[0].text, "cpu,h=\u{fffd}\u{fffd} f=2 2");
}

#[test]
fn numbers_line_protocol_does_not_have_are_refused() {
    for bad in [
        "inf",
        "NaN",
        "-infinity",
        "1x",
        "9223372036854775808i",
        "-1u",
        "0x10",
        "1.2.3",
    ] {
        let e = error_of(&format!("m f={bad}"));
        assert!(!e.reason.is_empty(), "{bad}");
    }
    assert_eq!(
        one("m f=18446744073709551615u").fields[0].1,
        FieldValue::UInt(u64::MAX)
    );
    assert_eq!(
        one("m f=-9223372036854775808i").fields[0].1,
        FieldValue::Int(i64::MIN)
    );
}

/// Writes a point as InfluxDB's client libraries do: each byte its part unescapes gets a
/// backslash, other backslashes are written as they are.
fn serialize(p: &Point) -> String {
    fn esc(s: &str, specials: &[char]) -> String {
        let mut out = String::new();
        for c in s.chars() {
            if specials.contains(&c) {
                out.push('\\');
            }
            out.push(c);
        }
        out
    }
    const MEASUREMENT: &[char] = &[',', ' ', '=', '"'];
    const TAG: &[char] = &[',', '=', ' '];
    const FIELD_KEY: &[char] = &[',', '=', ' ', '"'];
    let mut line = esc(&p.measurement, MEASUREMENT);
    for (k, v) in &p.tags {
        line += &format!(",{}={}", esc(k, TAG), esc(v, TAG));
    }
    line.push(' ');
    let fields: Vec<String> = p
        .fields
        .iter()
        .map(|(k, v)| {
            let v = match v {
                FieldValue::Float(f) => format!("{f:?}"),
                FieldValue::Int(i) => format!("{i}i"),
                FieldValue::UInt(u) => format!("{u}u"),
                FieldValue::Str(s) => format!("\"{}\"", esc(s, &['"', '\\'])),
                FieldValue::Bool(b) => b.to_string(),
            };
            format!("{}={v}", esc(k, FIELD_KEY))
        })
        .collect();
    line += &fields.join(",");
    if let Some(t) = p.timestamp {
        line += &format!(" {t}");
    }
    line
}

fn name() -> impl Strategy<Value = String> {
    // Any printable text without newlines, including every special character; a leading
    // '#' would make the line a comment, leading blanks are skipped, and a trailing
    // backslash would escape the byte after the name (line protocol cannot write one).
    "[^\n\r\t#][^\n\r\t]{0,12}"
        .prop_filter("not blank", |s| !s.starts_with(' ') && !s.ends_with('\\'))
}

fn field_value() -> impl Strategy<Value = FieldValue<'static>> {
    prop_oneof![
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(FieldValue::Float),
        any::<i64>().prop_map(FieldValue::Int),
        any::<u64>().prop_map(FieldValue::UInt),
        "[^\r]{0,20}".prop_map(|s| FieldValue::Str(s.into())),
        any::<bool>().prop_map(FieldValue::Bool),
    ]
}

fn point() -> impl Strategy<Value = Point<'static>> {
    (
        name(),
        // Distinct tag keys: a repeated one is refused.
        proptest::collection::btree_map(name(), name(), 0..4),
        proptest::collection::vec((name(), field_value()), 1..5),
        proptest::option::of(any::<i64>()),
    )
        .prop_map(|(measurement, tags, fields, timestamp)| Point {
            measurement: measurement.into(),
            tags: tags
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            fields: fields.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            timestamp,
        })
}

proptest! {
    #[test]
    fn parser_never_panics_on_any_bytes(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let (points, errors) = parse(&body);
        prop_assert!(points.len() + errors.len() <= body.len());
    }

    #[test]
    fn what_a_serializer_writes_parses_back_to_the_same_points(
        points in proptest::collection::vec(point(), 1..6)
    ) {
        let body: Vec<String> = points.iter().map(serialize).collect();
        let body = body.join("\n");
        let (parsed, errors) = parse(body.as_bytes());
        prop_assert!(errors.is_empty(), "{:?}\n{}", errors, body);
        let parsed: Vec<Point> = parsed.into_iter().map(|(_, p)| p).collect();
        prop_assert_eq!(parsed, points);
    }
}
