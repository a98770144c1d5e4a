//! Time-series collection options (`create`'s `timeseries` document):
//! validation with MongoDB's error codes and messages, defaults, the
//! `listCollections` form, `expireAfterSeconds` validation, time rounding and
//! the `collMod` granularity transitions.

use bson::{doc, Bson, Document};
use hourglass_query::compare::type_name;

use crate::error::TsError;

/// Largest accepted `bucketMaxSpanSeconds` / `bucketRoundingSeconds` (one year).
pub const MAX_BUCKET_SECONDS: i64 = 31_536_000;

/// Bucketing granularity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Granularity {
    Seconds,
    Minutes,
    Hours,
}

impl Granularity {
    /// The option value as MongoDB spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Seconds => "seconds",
            Granularity::Minutes => "minutes",
            Granularity::Hours => "hours",
        }
    }

    /// Parses `"seconds"`, `"minutes"` or `"hours"`.
    pub fn parse(s: &str) -> Option<Granularity> {
        match s {
            "seconds" => Some(Granularity::Seconds),
            "minutes" => Some(Granularity::Minutes),
            "hours" => Some(Granularity::Hours),
            _ => None,
        }
    }

    /// Default `bucketMaxSpanSeconds` for this granularity.
    pub fn max_span_seconds(self) -> i64 {
        match self {
            Granularity::Seconds => 3600,
            Granularity::Minutes => 86_400,
            Granularity::Hours => 2_592_000,
        }
    }

    /// Rounding of a bucket's minimum time for this granularity.
    pub fn rounding_seconds(self) -> i64 {
        match self {
            Granularity::Seconds => 60,
            Granularity::Minutes => 3600,
            Granularity::Hours => 86_400,
        }
    }
}

/// Validated options of one time-series collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeseriesOptions {
    pub time_field: String,
    pub meta_field: Option<String>,
    /// `None` only for fixed bucketing (explicit equal span/rounding seconds).
    pub granularity: Option<Granularity>,
    pub bucket_max_span_seconds: i64,
    /// Always set: from the granularity, or the fixed value.
    pub bucket_rounding_seconds: i64,
    /// True for fixed bucketing (`bucketRoundingSeconds` is stored and shown).
    pub rounding_is_explicit: bool,
}

const SAFE_INT_TYPES: &str = "[long, int, decimal, double]";

fn wrong_type(path: &str, v: &Bson, expected: &str) -> TsError {
    TsError::TypeMismatch(format!(
        "BSON field '{path}' is the wrong type '{}', expected type '{expected}'",
        type_name(v)
    ))
}

fn wrong_type_multi(path: &str, v: &Bson, expected: &str) -> TsError {
    TsError::TypeMismatch(format!(
        "BSON field '{path}' is the wrong type '{}', expected types '{expected}'",
        type_name(v)
    ))
}

/// Converts a number to an integer the way IDL's `safeInt`/`safeInt64` does:
/// integers as is, doubles truncated toward zero. Returns `None` for other
/// types; `Some(None)` for numbers that do not fit (NaN, out of range).
fn safe_integer(v: &Bson) -> Option<Option<i64>> {
    match v {
        Bson::Int32(i) => Some(Some(i64::from(*i))),
        Bson::Int64(i) => Some(Some(*i)),
        Bson::Double(d) => {
            if d.is_finite() && *d >= i64::MIN as f64 && *d < i64::MAX as f64 {
                Some(Some(d.trunc() as i64))
            } else {
                Some(None)
            }
        }
        Bson::Decimal128(d) => Some(d.to_string().parse::<f64>().ok().and_then(|f| {
            (f.is_finite() && f >= i64::MIN as f64 && f < i64::MAX as f64).then(|| f.trunc() as i64)
        })),
        _ => None,
    }
}

fn parse_bucket_seconds(name: &str, v: &Bson) -> Result<i64, TsError> {
    parse_bucket_seconds_in("create", name, v)
}

/// Parses `<command>.timeseries.bucketMaxSpanSeconds` / `bucketRoundingSeconds` as
/// MongoDB's IDL does (`safeInt`, 1 to one year): wrong type 14, out of range 2.
pub fn parse_bucket_seconds_in(command: &str, name: &str, v: &Bson) -> Result<i64, TsError> {
    let path = format!("{command}.timeseries.{name}");
    let n = match safe_integer(v) {
        None => return Err(wrong_type_multi(&path, v, SAFE_INT_TYPES)),
        Some(n) => n,
    };
    let shown = match v {
        Bson::Double(d) => d.to_string(),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Decimal128(d) => d.to_string(),
        _ => String::new(),
    };
    match n {
        Some(n) if n < 1 => Err(TsError::BadValue(format!(
            "BSON field '{name}' value must be >= 1, actual value '{shown}'"
        ))),
        Some(n) if n > MAX_BUCKET_SECONDS => Err(TsError::BadValue(format!(
            "BSON field '{name}' value must be <= {MAX_BUCKET_SECONDS}, actual value '{shown}'"
        ))),
        Some(n) => Ok(n),
        None => Err(TsError::BadValue(format!(
            "BSON field '{name}' value must be <= {MAX_BUCKET_SECONDS}, actual value '{shown}'"
        ))),
    }
}

fn ns_prefix(ns: Option<&str>) -> String {
    ns.map(|n| format!("{n}: ")).unwrap_or_default()
}

impl TimeseriesOptions {
    /// Options with the given fields and the default bucketing (`seconds`).
    pub fn new(time_field: &str, meta_field: Option<&str>) -> TimeseriesOptions {
        TimeseriesOptions::with_granularity(time_field, meta_field, Granularity::Seconds)
    }

    /// Options with the given fields and granularity.
    pub fn with_granularity(
        time_field: &str,
        meta_field: Option<&str>,
        g: Granularity,
    ) -> TimeseriesOptions {
        TimeseriesOptions {
            time_field: time_field.to_string(),
            meta_field: meta_field.map(str::to_string),
            granularity: Some(g),
            bucket_max_span_seconds: g.max_span_seconds(),
            bucket_rounding_seconds: g.rounding_seconds(),
            rounding_is_explicit: false,
        }
    }

    /// Validates `create`'s `timeseries` value (any BSON type; non-documents
    /// fail with 14). See [`TimeseriesOptions::parse_for_namespace`].
    pub fn parse_value(ns: Option<&str>, v: &Bson) -> Result<TimeseriesOptions, TsError> {
        match v {
            Bson::Document(d) => TimeseriesOptions::parse_for_namespace(ns, d),
            other => Err(wrong_type("create.timeseries", other, "object")),
        }
    }

    /// Validates `create`'s `timeseries` document and fills in defaults.
    /// Messages that MongoDB prefixes with the namespace get no prefix here;
    /// use [`TimeseriesOptions::parse_for_namespace`] to get one.
    pub fn parse(spec: &Document) -> Result<TimeseriesOptions, TsError> {
        TimeseriesOptions::parse_for_namespace(None, spec)
    }

    /// Like [`TimeseriesOptions::parse`]; `ns` (`"db.coll"`) prefixes the
    /// messages MongoDB prefixes.
    pub fn parse_for_namespace(
        ns: Option<&str>,
        spec: &Document,
    ) -> Result<TimeseriesOptions, TsError> {
        let mut time_field = None;
        let mut meta_field = None;
        let mut granularity = None;
        let mut max_span = None;
        let mut rounding = None;
        // IDL pass: field by field, in document order.
        for (k, v) in spec {
            match k.as_str() {
                "timeField" => match v {
                    Bson::String(s) => time_field = Some(s.clone()),
                    _ => return Err(wrong_type("create.timeseries.timeField", v, "string")),
                },
                "metaField" => match v {
                    Bson::String(s) => meta_field = Some(s.clone()),
                    _ => return Err(wrong_type("create.timeseries.metaField", v, "string")),
                },
                "granularity" => match v {
                    Bson::String(s) => match Granularity::parse(s) {
                        Some(g) => granularity = Some(g),
                        None => {
                            return Err(TsError::BadValue(format!(
                                "Enumeration value '{s}' for field 'create.timeseries.granularity' is not a valid value."
                            )))
                        }
                    },
                    _ => return Err(wrong_type("create.timeseries.granularity", v, "string")),
                },
                "bucketMaxSpanSeconds" => {
                    max_span = Some(parse_bucket_seconds("bucketMaxSpanSeconds", v)?)
                }
                "bucketRoundingSeconds" => {
                    rounding = Some(parse_bucket_seconds("bucketRoundingSeconds", v)?)
                }
                other => {
                    return Err(TsError::UnknownField(format!(
                        "BSON field 'create.timeseries.{other}' is an unknown field."
                    )))
                }
            }
        }
        let time_field = time_field.ok_or_else(|| {
            TsError::MissingField(
                "BSON field 'create.timeseries.timeField' is missing but a required field"
                    .to_string(),
            )
        })?;
        // Field-name rules (create command).
        if time_field.contains('\0') {
            return Err(TsError::BadValue(
                "'timeField' cannot contain null bytes".to_string(),
            ));
        }
        if time_field.contains('.') {
            return Err(TsError::InvalidOptions(format!(
                "{}'timeField' must be a top-level field and not contain a '.'",
                ns_prefix(ns)
            )));
        }
        if let Some(m) = &meta_field {
            if m.contains('\0') {
                return Err(TsError::BadValue(
                    "'metaField' cannot contain null bytes".to_string(),
                ));
            }
            if m == "_id" {
                return Err(TsError::InvalidOptions(
                    "'metaField' cannot be \"_id\"".to_string(),
                ));
            }
            if *m == time_field {
                return Err(TsError::InvalidOptions(
                    "'metaField' cannot be the same as 'timeField'".to_string(),
                ));
            }
            if m.contains('.') {
                return Err(TsError::InvalidOptions(format!(
                    "{}'metaField' must be a top-level field and not contain a '.'",
                    ns_prefix(ns)
                )));
            }
        }
        // Bucketing parameters.
        let mut opts = TimeseriesOptions::new(&time_field, meta_field.as_deref());
        if let Some(g) = granularity {
            if let Some(span) = max_span {
                if span != g.max_span_seconds() {
                    return Err(TsError::InvalidOptions(format!(
                        "Time-series 'bucketMaxSpanSeconds' cannot be set to a value other than the default of {} for the provided granularity",
                        g.max_span_seconds()
                    )));
                }
            }
            if rounding.is_some() {
                return Err(TsError::InvalidOptions(
                    "Time-series 'bucketRoundingSeconds' cannot be set alongside the granularity parameter"
                        .to_string(),
                ));
            }
            opts = TimeseriesOptions::with_granularity(&time_field, meta_field.as_deref(), g);
        } else if max_span.is_some() || rounding.is_some() {
            match (max_span, rounding) {
                (Some(s), Some(r)) if s == r => {
                    opts.granularity = None;
                    opts.bucket_max_span_seconds = s;
                    opts.bucket_rounding_seconds = r;
                    opts.rounding_is_explicit = true;
                }
                _ => return Err(TsError::InvalidOptions(
                    "Time-series 'bucketRoundingSeconds' must be equal to 'bucketMaxSpanSeconds'"
                        .to_string(),
                )),
            }
        }
        Ok(opts)
    }

    /// The stored / `listCollections` form, in IDL order: timeField,
    /// metaField, granularity, bucketRoundingSeconds (fixed bucketing only),
    /// bucketMaxSpanSeconds.
    pub fn to_document(&self) -> Document {
        let mut d = doc! { "timeField": self.time_field.clone() };
        if let Some(m) = &self.meta_field {
            d.insert("metaField", m.clone());
        }
        if let Some(g) = self.granularity {
            d.insert("granularity", g.as_str());
        }
        if self.rounding_is_explicit {
            d.insert(
                "bucketRoundingSeconds",
                seconds_bson(self.bucket_rounding_seconds),
            );
        }
        d.insert(
            "bucketMaxSpanSeconds",
            seconds_bson(self.bucket_max_span_seconds),
        );
        d
    }

    /// Rounds a time (milliseconds since the epoch) down to a multiple of the
    /// rounding seconds; floors for times before 1970.
    pub fn round_down_time(&self, millis: i64) -> i64 {
        let r = self.bucket_rounding_seconds.max(1).saturating_mul(1000);
        millis.div_euclid(r).saturating_mul(r)
    }

    /// The bucket span in milliseconds.
    pub fn max_span_millis(&self) -> i64 {
        self.bucket_max_span_seconds.saturating_mul(1000)
    }

    /// `collMod` with only a granularity: seconds -> minutes -> hours (and
    /// seconds -> hours) are allowed, the same value is a no-op, anything
    /// else fails with 72. From fixed bucketing the move is allowed when
    /// neither the span nor the rounding decreases.
    pub fn coarsen(&self, new_granularity: Granularity) -> Result<TimeseriesOptions, TsError> {
        self.apply_coll_mod(Some(new_granularity), None, None)
    }

    /// `collMod`'s `timeseries: {granularity?, bucketMaxSpanSeconds?,
    /// bucketRoundingSeconds?}` with MongoDB's checks (all failures 72).
    pub fn apply_coll_mod(
        &self,
        granularity: Option<Granularity>,
        max_span: Option<i64>,
        rounding: Option<i64>,
    ) -> Result<TimeseriesOptions, TsError> {
        let invalid = |m: &str| Err(TsError::InvalidOptions(m.to_string()));
        if let Some(g) = granularity {
            if let Some(s) = max_span {
                if s != g.max_span_seconds() {
                    return invalid("Timeseries 'bucketMaxSpanSeconds' is not configurable to a value other than the default for the provided granularity");
                }
            }
            if rounding.is_some() {
                return invalid("Timeseries 'bucketRoundingSeconds' is not configurable alongside the granularity parameter");
            }
            let mut next = self.clone();
            match self.granularity {
                Some(cur) if cur == g => return Ok(next),
                Some(cur) if cur > g => {
                    return invalid("Invalid transition for timeseries.granularity. Can only transition from 'seconds' to 'minutes' or 'minutes' to 'hours'.")
                }
                Some(_) => {}
                None => {
                    if g.max_span_seconds() < self.bucket_max_span_seconds {
                        return invalid("Timeseries 'bucketMaxSpanSeconds' needs to be equal or greater to transition");
                    }
                    if g.rounding_seconds() < self.bucket_rounding_seconds {
                        return invalid("Timeseries 'bucketRoundingSeconds' needs to be equal or greater to transition");
                    }
                }
            }
            next.granularity = Some(g);
            next.bucket_max_span_seconds = g.max_span_seconds();
            next.bucket_rounding_seconds = g.rounding_seconds();
            next.rounding_is_explicit = false;
            return Ok(next);
        }
        match (max_span, rounding) {
            (None, None) => Ok(self.clone()),
            (Some(s), Some(r)) => {
                if s != r {
                    return invalid(
                        "Timeseries 'bucketRoundingSeconds' needs to be equal to 'bucketMaxSpanSeconds'",
                    );
                }
                if s < self.bucket_max_span_seconds {
                    return invalid("Timeseries 'bucketMaxSpanSeconds' needs to be equal or greater to transition");
                }
                if r < self.bucket_rounding_seconds {
                    return invalid("Timeseries 'bucketRoundingSeconds' needs to be equal or greater to transition");
                }
                let mut next = self.clone();
                next.granularity = None;
                next.bucket_max_span_seconds = s;
                next.bucket_rounding_seconds = r;
                next.rounding_is_explicit = true;
                Ok(next)
            }
            _ => invalid("Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be set alongside each other"),
        }
    }
}

fn seconds_bson(v: i64) -> Bson {
    i32::try_from(v).map(Bson::Int32).unwrap_or(Bson::Int64(v))
}

/// Validates `expireAfterSeconds` (create / collMod on a time-series
/// collection): wrong type -> 14, negative or too large -> 72.
pub fn validate_expire_after_seconds(v: &Bson) -> Result<i64, TsError> {
    let range_err = || {
        TsError::InvalidOptions(
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number"
                .to_string(),
        )
    };
    let n = match safe_integer(v) {
        None => {
            return Err(wrong_type_multi(
                "create.expireAfterSeconds",
                v,
                SAFE_INT_TYPES,
            ))
        }
        Some(None) => {
            if matches!(v, Bson::Double(d) if *d < 0.0) {
                return Err(negative_ttl());
            }
            return Err(range_err());
        }
        Some(Some(n)) => n,
    };
    if n < 0 {
        return Err(negative_ttl());
    }
    let now_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(i64::MAX / 1000);
    if n > i64::MAX / 1000 || n > now_secs {
        return Err(range_err());
    }
    Ok(n)
}

fn negative_ttl() -> TsError {
    TsError::InvalidOptions(
        "TTL index 'expireAfterSeconds' option cannot be less than 0".to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: Document) -> TsError {
        TimeseriesOptions::parse_for_namespace(Some("db.c"), &spec).unwrap_err()
    }

    #[test]
    fn defaults_to_seconds_granularity() {
        let o = TimeseriesOptions::parse(&doc! {"timeField": "t", "metaField": "m"}).unwrap();
        assert_eq!(o.granularity, Some(Granularity::Seconds));
        assert_eq!(
            (o.bucket_max_span_seconds, o.bucket_rounding_seconds),
            (3600, 60)
        );
        assert_eq!(
            o.to_document(),
            doc! {"timeField": "t", "metaField": "m", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}
        );
    }

    #[test]
    fn granularity_sets_span_and_rounding() {
        let m =
            TimeseriesOptions::parse(&doc! {"timeField": "t", "granularity": "minutes"}).unwrap();
        assert_eq!(
            (m.bucket_max_span_seconds, m.bucket_rounding_seconds),
            (86_400, 3600)
        );
        let h = TimeseriesOptions::parse(
            &doc! {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 2_592_000},
        )
        .unwrap();
        assert_eq!(
            (h.bucket_max_span_seconds, h.bucket_rounding_seconds),
            (2_592_000, 86_400)
        );
        assert_eq!(
            h.to_document(),
            doc! {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 2_592_000}
        );
    }

    #[test]
    fn fixed_bucketing_shows_rounding_and_no_granularity() {
        let o = TimeseriesOptions::parse(
            &doc! {"timeField": "t", "bucketMaxSpanSeconds": 100, "bucketRoundingSeconds": 100i64},
        )
        .unwrap();
        assert_eq!(o.granularity, None);
        assert!(o.rounding_is_explicit);
        assert_eq!(
            o.to_document(),
            doc! {"timeField": "t", "bucketRoundingSeconds": 100, "bucketMaxSpanSeconds": 100}
        );
    }

    #[test]
    fn missing_time_field_is_40414() {
        let e = err(doc! {"metaField": "m"});
        assert_eq!(e.code(), 40414);
        assert_eq!(
            e.message(),
            "BSON field 'create.timeseries.timeField' is missing but a required field"
        );
    }

    #[test]
    fn wrong_types_are_14() {
        let e = err(doc! {"timeField": 1});
        assert_eq!(e.code(), 14);
        assert_eq!(e.message(), "BSON field 'create.timeseries.timeField' is the wrong type 'int', expected type 'string'");
        assert_eq!(err(doc! {"timeField": "t", "metaField": true}).code(), 14);
        assert_eq!(
            err(doc! {"timeField": "t", "bucketMaxSpanSeconds": "x"}).code(),
            14
        );
        let e = TimeseriesOptions::parse_value(None, &Bson::String(String::new())).unwrap_err();
        assert_eq!(
            e.message(),
            "BSON field 'create.timeseries' is the wrong type 'string', expected type 'object'"
        );
    }

    #[test]
    fn unknown_field_is_40415() {
        let e = err(doc! {"timeField": "t", "invalidOption": 1});
        assert_eq!(
            (e.code(), e.message()),
            (
                40415,
                "BSON field 'create.timeseries.invalidOption' is an unknown field."
            )
        );
    }

    #[test]
    fn bad_granularity_is_bad_value() {
        let e = err(doc! {"timeField": "t", "granularity": "foo"});
        assert_eq!(e.code(), 2);
        assert_eq!(e.message(), "Enumeration value 'foo' for field 'create.timeseries.granularity' is not a valid value.");
    }

    #[test]
    fn field_name_rules_are_72() {
        let e = err(doc! {"timeField": "a.b"});
        assert_eq!(
            (e.code(), e.message()),
            (
                72,
                "db.c: 'timeField' must be a top-level field and not contain a '.'"
            )
        );
        assert_eq!(
            err(doc! {"timeField": "t", "metaField": "_id"}).message(),
            "'metaField' cannot be \"_id\""
        );
        assert_eq!(
            err(doc! {"timeField": "t", "metaField": "t"}).message(),
            "'metaField' cannot be the same as 'timeField'"
        );
        assert_eq!(
            err(doc! {"timeField": "t", "metaField": "m.x"}).message(),
            "db.c: 'metaField' must be a top-level field and not contain a '.'"
        );
        assert_eq!(err(doc! {"timeField": "t\0"}).code(), 2);
        assert!(TimeseriesOptions::parse(&doc! {"timeField": "$t"}).is_ok());
    }

    #[test]
    fn bucketing_parameter_rules_are_72() {
        let e = err(doc! {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 100});
        assert_eq!(e.message(), "Time-series 'bucketMaxSpanSeconds' cannot be set to a value other than the default of 3600 for the provided granularity");
        let e = err(doc! {"timeField": "t", "granularity": "seconds", "bucketRoundingSeconds": 60});
        assert_eq!(
            e.message(),
            "Time-series 'bucketRoundingSeconds' cannot be set alongside the granularity parameter"
        );
        for spec in [
            doc! {"timeField": "t", "bucketMaxSpanSeconds": 100},
            doc! {"timeField": "t", "bucketRoundingSeconds": 100},
            doc! {"timeField": "t", "bucketMaxSpanSeconds": 100, "bucketRoundingSeconds": 50},
        ] {
            let e = err(spec);
            assert_eq!(
                (e.code(), e.message()),
                (
                    72,
                    "Time-series 'bucketRoundingSeconds' must be equal to 'bucketMaxSpanSeconds'"
                )
            );
        }
    }

    #[test]
    fn bucket_seconds_out_of_range_is_bad_value() {
        let e = err(doc! {"timeField": "t", "bucketMaxSpanSeconds": -1});
        assert_eq!(
            (e.code(), e.message()),
            (
                2,
                "BSON field 'bucketMaxSpanSeconds' value must be >= 1, actual value '-1'"
            )
        );
        let e = err(doc! {"timeField": "t", "bucketRoundingSeconds": 31_536_001});
        assert_eq!(e.code(), 2);
        assert!(e.message().contains("must be <= 31536000"));
    }

    #[test]
    fn expire_after_seconds_validation() {
        assert_eq!(validate_expire_after_seconds(&Bson::Int64(100)), Ok(100));
        let e = validate_expire_after_seconds(&Bson::Int32(-1)).unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (
                72,
                "TTL index 'expireAfterSeconds' option cannot be less than 0"
            )
        );
        let e = validate_expire_after_seconds(&Bson::Int64(4_611_686_018_427_387_904)).unwrap_err();
        assert_eq!(e.code(), 72);
        assert!(e
            .message()
            .starts_with("TTL index 'expireAfterSeconds' option must be within"));
        assert_eq!(
            validate_expire_after_seconds(&Bson::String(String::new()))
                .unwrap_err()
                .code(),
            14
        );
    }

    #[test]
    fn round_down_floors_including_before_1970() {
        let o = TimeseriesOptions::new("t", None);
        assert_eq!(o.round_down_time(125_000), 120_000);
        assert_eq!(o.round_down_time(120_000), 120_000);
        assert_eq!(o.round_down_time(-1), -60_000);
        assert_eq!(o.round_down_time(-60_000), -60_000);
    }

    #[test]
    fn coarsen_allows_only_coarser_granularity() {
        let s = TimeseriesOptions::new("t", None);
        let m = s.coarsen(Granularity::Minutes).unwrap();
        assert_eq!(
            (m.bucket_max_span_seconds, m.bucket_rounding_seconds),
            (86_400, 3600)
        );
        assert_eq!(
            s.coarsen(Granularity::Hours).unwrap().granularity,
            Some(Granularity::Hours)
        );
        assert_eq!(m.coarsen(Granularity::Minutes).unwrap(), m);
        let e = m.coarsen(Granularity::Seconds).unwrap_err();
        assert_eq!((e.code(), e.message()), (72, "Invalid transition for timeseries.granularity. Can only transition from 'seconds' to 'minutes' or 'minutes' to 'hours'."));
    }

    #[test]
    fn coll_mod_fixed_bucketing_rules() {
        let s = TimeseriesOptions::new("t", None);
        assert_eq!(s.apply_coll_mod(None, Some(10), None).unwrap_err().message(), "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be set alongside each other");
        assert_eq!(
            s.apply_coll_mod(None, Some(7200), Some(3600))
                .unwrap_err()
                .message(),
            "Timeseries 'bucketRoundingSeconds' needs to be equal to 'bucketMaxSpanSeconds'"
        );
        assert_eq!(
            s.apply_coll_mod(None, Some(100), Some(100))
                .unwrap_err()
                .message(),
            "Timeseries 'bucketMaxSpanSeconds' needs to be equal or greater to transition"
        );
        let f = s.apply_coll_mod(None, Some(7200), Some(7200)).unwrap();
        assert_eq!(f.granularity, None);
        assert_eq!(
            f.coarsen(Granularity::Minutes).unwrap_err().message(),
            "Timeseries 'bucketRoundingSeconds' needs to be equal or greater to transition"
        );
        assert_eq!(
            f.coarsen(Granularity::Hours).unwrap().granularity,
            Some(Granularity::Hours)
        );
    }
}
