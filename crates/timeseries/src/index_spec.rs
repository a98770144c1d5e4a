//! Secondary indexes on time-series collections: translation between the
//! key patterns / index specs a user writes against the time-series view
//! and the ones stored on its `system.buckets` collection, as MongoDB 7.0 /
//! 8.0 do it (`timeseries_index_schema_conversion_functions.cpp`,
//! `timeseries_commands_conversion_helper.cpp`).
//!
//! Key mapping, field by field in the user's order:
//! * timeField `t`: ascending (any number `>= 0`) -> `control.min.t`,
//!   `control.max.t`; descending -> `control.max.t`, `control.min.t`
//!   (both with the user's value). Non-numbers fail.
//! * metaField `m` and `m.a.b` -> `meta` / `meta.a.b` with the value as given
//!   (so `hashed`, `2d`, `2dsphere`, wildcard `m.$**` work on the meta).
//! * a measurement `f` with `"2dsphere"` -> `data.f: "2dsphere_bucket"`.
//! * a measurement `f`, ascending -> `control.min.f`, `control.max.f`;
//!   descending -> `control.max.f`, `control.min.f`. This is the current
//!   MongoDB order (min first for ascending), verified in the current source;
//!   other values (hashed, text, 2d, ...) fail.
//!
//! The reverse mapping (for `listIndexes` / `$indexStats` on the view) is
//! [`from_bucket_index`]; specs that carry `originalSpec` (measurement or
//! partial indexes) are shown as that original spec, see [`view_index_spec`].
//! Partial filters are translated by [`translate_partial_filter`].

/// Order- and type-sensitive equality for tests (`bson::Document`'s
/// `PartialEq` ignores field order): compares the `{:#?}` renderings.
#[cfg(test)]
macro_rules! assert_same {
    ($a:expr, $b:expr $(, $($msg:tt)+)?) => {
        assert_eq!(format!("{:#?}", $a), format!("{:#?}", $b) $(, $($msg)+)?)
    };
}

mod display;
mod key_pattern;
mod partial;

use bson::{doc, Bson, Document};

pub use display::{doc_to_string, element_to_string, value_to_string};
pub use key_pattern::validate_bucket_key_pattern;
pub use partial::{translate_partial_filter, PartialFilter};

use crate::options::TimeseriesOptions;

/// Prefix of the per-bucket minimum of a field.
pub const CONTROL_MIN_PREFIX: &str = "control.min.";
/// Prefix of the per-bucket maximum of a field.
pub const CONTROL_MAX_PREFIX: &str = "control.max.";
/// The bucket field holding the metaField value.
pub const BUCKET_META_FIELD: &str = "meta";
/// The index type used on `data.<f>` for a 2dsphere index on a measurement.
pub const GEO_2DSPHERE_BUCKET: &str = "2dsphere_bucket";
/// Field of a buckets index spec holding the user's spec.
pub const ORIGINAL_SPEC_FIELD: &str = "originalSpec";

/// An error from translating an index spec, with MongoDB's code.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IndexSpecError {
    /// Code 2 `BadValue`: the raw conversion failure (wrapped by the
    /// command-specific helpers) and malformed filters.
    #[error("{0}")]
    BadValue(String),
    /// Code 27 `IndexNotFound`: a key pattern that cannot name a time-series
    /// index (`dropIndexes`, `collMod`).
    #[error("{0}")]
    IndexNotFound(String),
    /// Code 67 `CannotCreateIndex`.
    #[error("{0}")]
    CannotCreateIndex(String),
    /// Code 72 `InvalidOptions`.
    #[error("{0}")]
    InvalidOptions(String),
    /// Code 85 `IndexOptionsConflict`.
    #[error("{0}")]
    IndexOptionsConflict(String),
    /// Code 10065 `Location10065`: an option that must be an object is not.
    #[error("{0}")]
    NotAnObject(String),
    /// Code 5916301 `Location5916301`: a partial filter predicate that cannot
    /// be translated to the buckets.
    #[error("{0}")]
    PartialFilter(String),
    /// Code 7246201 `Location7246201`: a wildcard on a measurement expands to
    /// two wildcard components on the buckets.
    #[error("{0}")]
    WildcardMeasurement(String),
}

impl IndexSpecError {
    /// MongoDB's numeric error code.
    pub fn code(&self) -> i32 {
        match self {
            IndexSpecError::BadValue(_) => 2,
            IndexSpecError::IndexNotFound(_) => 27,
            IndexSpecError::CannotCreateIndex(_) => 67,
            IndexSpecError::InvalidOptions(_) => 72,
            IndexSpecError::IndexOptionsConflict(_) => 85,
            IndexSpecError::NotAnObject(_) => 10065,
            IndexSpecError::PartialFilter(_) => 5_916_301,
            IndexSpecError::WildcardMeasurement(_) => 7_246_201,
        }
    }

    /// MongoDB's code name.
    pub fn code_name(&self) -> std::borrow::Cow<'static, str> {
        hourglass_errors::name(self.code())
    }

    /// The error message (`errmsg`).
    pub fn message(&self) -> &str {
        match self {
            IndexSpecError::BadValue(m)
            | IndexSpecError::IndexNotFound(m)
            | IndexSpecError::CannotCreateIndex(m)
            | IndexSpecError::InvalidOptions(m)
            | IndexSpecError::IndexOptionsConflict(m)
            | IndexSpecError::NotAnObject(m)
            | IndexSpecError::PartialFilter(m)
            | IndexSpecError::WildcardMeasurement(m) => m,
        }
    }

    /// `Status::toString()`: `"<CodeName>: <message>"`, the text MongoDB
    /// embeds when it rewraps a conversion failure.
    pub fn status_string(&self) -> String {
        format!("{}: {}", self.code_name(), self.message())
    }

    /// Appends MongoDB's `" Command request: <cmd>"` suffix (used by
    /// `collMod` and, before 8.0, by `createIndexes` / `dropIndexes`).
    pub fn with_command_request(self, cmd: &Document) -> IndexSpecError {
        let suffix = format!(" Command request: {}", doc_to_string(cmd));
        match self {
            IndexSpecError::BadValue(m) => IndexSpecError::BadValue(m + &suffix),
            IndexSpecError::IndexNotFound(m) => IndexSpecError::IndexNotFound(m + &suffix),
            IndexSpecError::CannotCreateIndex(m) => IndexSpecError::CannotCreateIndex(m + &suffix),
            other => other,
        }
    }
}

/// What a translated key pattern is for; decides the error code of a key
/// that cannot be translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// `createIndexes`: text -> 72, other failures -> 67 `CannotCreateIndex`.
    CreateIndexes,
    /// `dropIndexes` by key pattern: failures -> 27 `IndexNotFound`.
    DropIndexes,
    /// `collMod` `index.keyPattern` (hidden / unique / expireAfterSeconds):
    /// failures -> 27 `IndexNotFound`.
    CollMod,
    /// A key-pattern `hint` of an update / delete on the view: failures are
    /// the raw 2 `BadValue`.
    WriteHint,
}

/// The numeric value of a key element as MongoDB's `BSONElement::number()`
/// sees it: 0 for non-numbers.
fn number(v: &Bson) -> f64 {
    match v {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        Bson::Decimal128(d) => d.to_string().parse::<f64>().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

fn is_meta_path(options: &TimeseriesOptions, field: &str) -> Option<String> {
    let meta = options.meta_field.as_deref()?;
    if field == meta {
        return Some(BUCKET_META_FIELD.to_string());
    }
    field
        .strip_prefix(meta)
        .and_then(|rest| rest.strip_prefix('.'))
        .map(|sub| format!("{BUCKET_META_FIELD}.{sub}"))
}

fn is_wildcard_field(field: &str) -> bool {
    field == "$**" || field.ends_with(".$**")
}

/// MongoDB's `IndexNames::findPluginName`: the first string value, or
/// `"wildcard"` if a `$**` field comes first; `""` (btree) otherwise.
pub fn plugin_name(key: &Document) -> &str {
    for (field, v) in key {
        if let Bson::String(s) = v {
            return s;
        }
        if is_wildcard_field(field) {
            return "wildcard";
        }
    }
    ""
}

/// Translates a view key pattern to the buckets key pattern
/// (`createBucketsIndexSpecFromTimeseriesIndexSpec`). Failures are
/// `BadValue` with MongoDB's text; [`to_bucket_index`] and
/// [`to_bucket_key_for`] rewrap them per command.
pub fn bucket_key_pattern(
    options: &TimeseriesOptions,
    key: &Document,
) -> Result<Document, IndexSpecError> {
    let Some(first) = key.keys().next() else {
        return Err(IndexSpecError::BadValue(
            "Empty object is not a valid index spec".to_string(),
        ));
    };
    if first == "$hint" || first == "$natural" {
        return Err(IndexSpecError::BadValue(format!(
            "Invalid index spec (perhaps it's a valid hint, that was incorrectly passed to \
             createBucketsSpecFromTimeseriesSpec): {}",
            doc_to_string(key)
        )));
    }
    let time = options.time_field.as_str();
    let mut out = Document::new();
    for (field, v) in key {
        if field == time {
            if !is_number(v) {
                return Err(IndexSpecError::BadValue(format!(
                    "Invalid index spec for time-series collection: {}. Indexes on the time \
                     field must be ascending or descending (numbers only): {}",
                    doc_to_string(key),
                    element_to_string(field, v)
                )));
            }
            push_min_max(&mut out, field, v, number(v) >= 0.0);
            continue;
        }
        if let Some(bucket_field) = is_meta_path(options, field) {
            out.insert(bucket_field, v.clone());
            continue;
        }
        if matches!(v, Bson::String(s) if s == "2dsphere") {
            out.insert(format!("data.{field}"), GEO_2DSPHERE_BUCKET);
            continue;
        }
        if !is_number(v) {
            return Err(IndexSpecError::BadValue(format!(
                "Invalid index spec for time-series collection: {}. Indexes on measurement \
                 fields must be ascending or descending (numbers only), or '2dsphere': {}",
                doc_to_string(key),
                element_to_string(field, v)
            )));
        }
        let n = number(v);
        // MongoDB tests `>= 0` then `< 0`: a NaN direction adds nothing.
        if n >= 0.0 {
            push_min_max(&mut out, field, v, true);
        } else if n < 0.0 {
            push_min_max(&mut out, field, v, false);
        }
    }
    Ok(out)
}

fn push_min_max(out: &mut Document, field: &str, v: &Bson, ascending: bool) {
    let min = format!("{CONTROL_MIN_PREFIX}{field}");
    let max = format!("{CONTROL_MAX_PREFIX}{field}");
    if ascending {
        out.insert(min, v.clone());
        out.insert(max, v.clone());
    } else {
        out.insert(max, v.clone());
        out.insert(min, v.clone());
    }
}

/// True when a buckets key pattern has a field other than the time bounds
/// and the meta: MongoDB then stores the user's spec as `originalSpec`
/// (`shouldIncludeOriginalSpec`).
pub fn includes_measurement(options: &TimeseriesOptions, bucket_key: &Document) -> bool {
    let min_t = format!("{CONTROL_MIN_PREFIX}{}", options.time_field);
    let max_t = format!("{CONTROL_MAX_PREFIX}{}", options.time_field);
    bucket_key.keys().any(|f| {
        if *f == min_t || *f == max_t {
            return false;
        }
        let on_meta =
            options.meta_field.is_some() && (f == BUCKET_META_FIELD || f.starts_with("meta."));
        !on_meta
    })
}

fn wildcard_check(bucket_key: &Document) -> Result<(), IndexSpecError> {
    let measured = bucket_key.keys().any(|f| {
        (f.starts_with(CONTROL_MIN_PREFIX) || f.starts_with(CONTROL_MAX_PREFIX))
            && is_wildcard_field(f)
    });
    if measured {
        return Err(IndexSpecError::WildcardMeasurement(format!(
            "Wildcard indexes are not supported on time-series measurements: the buckets key \
             pattern {} has more than one wildcard component",
            doc_to_string(bucket_key)
        )));
    }
    Ok(())
}

/// Translates a key pattern for `createIndexes` on the view: a text index
/// fails with 72, an untranslatable key with 67 (`"BadValue: <reason>"`, the
/// 8.0 text; 7.0 appends `" Command request: ..."`, see
/// [`IndexSpecError::with_command_request`]), a wildcard on a measurement
/// with 7246201.
pub fn to_bucket_index(
    options: &TimeseriesOptions,
    key: &Document,
) -> Result<Document, IndexSpecError> {
    to_bucket_key_for(options, key, KeyUse::CreateIndexes)
}

/// Translates a key pattern for the given command (see [`KeyUse`]).
pub fn to_bucket_key_for(
    options: &TimeseriesOptions,
    key: &Document,
    usage: KeyUse,
) -> Result<Document, IndexSpecError> {
    if usage == KeyUse::CreateIndexes {
        let bucket = create_key(options, key)?;
        wildcard_check(&bucket)?;
        return Ok(bucket);
    }
    let bucket = bucket_key_pattern(options, key);
    match usage {
        KeyUse::WriteHint => bucket,
        _ => bucket.map_err(|e| IndexSpecError::IndexNotFound(e.status_string())),
    }
}

/// MongoDB's `isHintIndexKey`: a non-empty hint whose first field is not
/// `$hint` / `$natural` names an index by key pattern.
pub fn is_hint_index_key(hint: &Document) -> bool {
    match hint.keys().next() {
        None => false,
        Some(first) => first != "$hint" && first != "$natural",
    }
}

/// The hint a `find` / `aggregate` on the view passes to the buckets: a
/// key-pattern hint is translated when it can be, anything else (names,
/// `$natural`, untranslatable keys) is passed on unchanged.
pub fn hint_for_buckets(options: &TimeseriesOptions, hint: &Document) -> Document {
    if !is_hint_index_key(hint) {
        return hint.clone();
    }
    bucket_key_pattern(options, hint).unwrap_or_else(|_| hint.clone())
}

/// `createIndexes`' key handling before the buckets-side validation: text
/// -> 72, untranslatable -> 67.
fn create_key(options: &TimeseriesOptions, key: &Document) -> Result<Document, IndexSpecError> {
    if plugin_name(key) == "text" {
        return Err(IndexSpecError::InvalidOptions(
            "Text indexes are not supported on time-series collections".to_string(),
        ));
    }
    bucket_key_pattern(options, key)
        .map_err(|e| IndexSpecError::CannotCreateIndex(e.status_string()))
}

/// Maps a buckets key pattern back to the view's key pattern
/// (`createTimeseriesIndexSpecFromBucketsIndexSpec`); `None` when it is not
/// the image of a time-series key, in which case `listIndexes` and
/// `$indexStats` on the view omit the index.
pub fn from_bucket_index(options: &TimeseriesOptions, bucket_key: &Document) -> Option<Document> {
    let time = options.time_field.as_str();
    let min_t = format!("{CONTROL_MIN_PREFIX}{time}");
    let max_t = format!("{CONTROL_MAX_PREFIX}{time}");
    let meta = options.meta_field.as_deref();
    let mut out = Document::new();
    let mut it = bucket_key.iter();
    while let Some((field, v)) = it.next() {
        if *field == min_t {
            if !is_number(v) {
                return None;
            }
            out.insert(time, v.clone());
            continue;
        }
        if *field == max_t {
            // control.min.<time> alone decides the direction.
            continue;
        }
        if let Some(m) = meta {
            if field == BUCKET_META_FIELD {
                out.insert(m, v.clone());
                continue;
            }
            if let Some(sub) = field.strip_prefix("meta.") {
                out.insert(format!("{m}.{sub}"), v.clone());
                continue;
            }
        }
        if let Some(f) = field.strip_prefix("data.") {
            if matches!(v, Bson::String(s) if s == GEO_2DSPHERE_BUCKET) {
                out.insert(f, "2dsphere");
                continue;
            }
        }
        let (first_prefix, first_key) = split_control(field)?;
        let (next_field, next_v) = it.next()?;
        let (second_prefix, second_key) = split_control(next_field)?;
        let (first_dir, second_dir) = (number(v), number(next_v));
        if first_dir != second_dir || first_key != second_key {
            return None;
        }
        let ascending = first_prefix == CONTROL_MIN_PREFIX
            && second_prefix == CONTROL_MAX_PREFIX
            && first_dir >= 0.0;
        let descending = first_prefix == CONTROL_MAX_PREFIX
            && second_prefix == CONTROL_MIN_PREFIX
            && first_dir < 0.0;
        if !(ascending || descending) {
            return None;
        }
        out.insert(first_key, next_v.clone());
    }
    Some(out)
}

fn split_control(field: &str) -> Option<(&'static str, &str)> {
    if let Some(k) = field.strip_prefix(CONTROL_MIN_PREFIX) {
        return Some((CONTROL_MIN_PREFIX, k));
    }
    field
        .strip_prefix(CONTROL_MAX_PREFIX)
        .map(|k| (CONTROL_MAX_PREFIX, k))
}

/// The view's form of one buckets index spec, as `listIndexes` and
/// `$indexStats` show it: the stored `originalSpec` when there is one (plus
/// the buckets spec's `2dsphereIndexVersion`, if any), otherwise the buckets
/// spec with its `key` translated back in place. `None` hides the index.
pub fn view_index_spec(options: &TimeseriesOptions, bucket_spec: &Document) -> Option<Document> {
    if let Ok(original) = bucket_spec.get_document(ORIGINAL_SPEC_FIELD) {
        let mut out = original.clone();
        if let Some(v) = bucket_spec.get("2dsphereIndexVersion") {
            out.insert("2dsphereIndexVersion", v.clone());
        }
        return Some(out);
    }
    let key = bucket_spec.get_document("key").ok()?;
    let view_key = from_bucket_index(options, key)?;
    let mut out = Document::new();
    for (k, v) in bucket_spec {
        if k == "key" {
            out.insert("key", view_key.clone());
        } else {
            out.insert(k, v.clone());
        }
    }
    Some(out)
}

/// The view's `listIndexes` / `$indexStats` entries for the buckets index
/// specs, in order, leaving out the untranslatable ones.
pub fn view_index_specs<'a>(
    options: &TimeseriesOptions,
    bucket_specs: impl IntoIterator<Item = &'a Document>,
) -> Vec<Document> {
    bucket_specs
        .into_iter()
        .filter_map(|s| view_index_spec(options, s))
        .collect()
}

/// The buckets index spec `createIndexes` on the view creates for one user
/// spec (`translateIndexSpecFromLogicalToBuckets`), checking the options
/// MongoDB rejects on time-series collections, in the user's field order:
///
/// * `partialFilterExpression`: must be an object (10065); with `collation`
///   in the same spec -> 85; translated by [`translate_partial_filter`]
///   (untranslatable -> 5916301); forces `originalSpec`.
/// * `sparse` (any value): only on time / meta fields, else 72.
/// * `unique` truthy -> 72; `unique: false` is kept.
/// * `key`: text -> 72; untranslatable -> 67; measurement keys force
///   `originalSpec`.
/// * `expireAfterSeconds`: needs a partial filter on the metaField only
///   (72), a single-field key (67) on the timeField (72); the buckets key is
///   then `{control.min.<time>: <dir>}`.
/// * everything else (`name`, `hidden`, `collation`, `v`, `2dsphereIndexVersion`,
///   `storageEngine`, ...) passes through unchanged.
///
/// Pass the spec as the server normalizes it (MongoDB appends `v: 2` when
/// absent, so `originalSpec` ends with `v`). The output has `key` after the
/// passed-through options and `originalSpec` (the given spec, verbatim)
/// last; the catalog may reorder fields. Generic
/// key-pattern validation (zero / NaN / unknown plugin ...) is left to the
/// buckets collection's regular index validation, as in MongoDB.
pub fn translate_index_spec(
    options: &TimeseriesOptions,
    spec: &Document,
) -> Result<Document, IndexSpecError> {
    let mut out = Document::new();
    let mut bucket_key: Option<Document> = None;
    let mut user_key = Document::new();
    let mut is_ttl = false;
    let mut partial_on_meta_only = false;
    let mut include_original = false;
    for (field, v) in spec {
        match field.as_str() {
            "partialFilterExpression" => {
                include_original = true;
                let Bson::Document(filter) = v else {
                    return Err(not_an_object(field));
                };
                if spec.contains_key("collation") {
                    return Err(IndexSpecError::IndexOptionsConflict(
                        "On a time-series collection, partialFilterExpression and collation \
                         arguments are incompatible"
                            .to_string(),
                    ));
                }
                let translated = translate_partial_filter(options, filter)?;
                partial_on_meta_only = !translated.has_measurement_predicate;
                out.insert(field, translated.bucket_filter);
                continue;
            }
            "sparse" => check_sparse(options, spec)?,
            "expireAfterSeconds" => {
                is_ttl = true;
                out.insert(field, v.clone());
                continue;
            }
            "unique" if truthy(v) => {
                return Err(IndexSpecError::InvalidOptions(
                    "Unique indexes are not supported on time-series collections".to_string(),
                ));
            }
            "key" => {
                let Bson::Document(key) = v else {
                    return Err(not_an_object(field));
                };
                let translated = create_key(options, key)?;
                if includes_measurement(options, &translated) {
                    include_original = true;
                }
                user_key = key.clone();
                bucket_key = Some(translated);
                continue;
            }
            _ => {}
        }
        out.insert(field, v.clone());
    }
    let mut bucket_key = bucket_key.unwrap_or_default();
    if is_ttl {
        if !partial_on_meta_only {
            return Err(IndexSpecError::InvalidOptions(
                "TTL indexes on time-series collections require a partialFilterExpression on \
                 the metaField"
                    .to_string(),
            ));
        }
        bucket_key = ttl_bucket_key(options, &user_key)?;
    } else {
        wildcard_check(&bucket_key)?;
    }
    out.insert("key", bucket_key);
    if include_original {
        out.insert(ORIGINAL_SPEC_FIELD, spec.clone());
    }
    Ok(out)
}

/// Runs the checks of [`translate_index_spec`] without keeping the result.
pub fn check_index_options(
    options: &TimeseriesOptions,
    spec: &Document,
) -> Result<(), IndexSpecError> {
    translate_index_spec(options, spec).map(|_| ())
}

fn not_an_object(field: &str) -> IndexSpecError {
    IndexSpecError::NotAnObject(format!("invalid parameter: expected an object ({field})"))
}

fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(d) => *d != 0.0,
        Bson::Null | Bson::Undefined => false,
        _ => true,
    }
}

fn check_sparse(options: &TimeseriesOptions, spec: &Document) -> Result<(), IndexSpecError> {
    let Ok(key) = spec.get_document("key") else {
        return Ok(());
    };
    for field in key.keys() {
        if *field == options.time_field || is_meta_path(options, field).is_some() {
            continue;
        }
        return Err(IndexSpecError::InvalidOptions(
            "Sparse indexes are not supported on time-series measurements".to_string(),
        ));
    }
    Ok(())
}

fn ttl_bucket_key(
    options: &TimeseriesOptions,
    user_key: &Document,
) -> Result<Document, IndexSpecError> {
    let compound = || {
        IndexSpecError::CannotCreateIndex(format!(
            "TTL indexes are single-field indexes, compound indexes do not support TTL. Index \
             spec: {}",
            doc_to_string(user_key)
        ))
    };
    if user_key.len() != 1 {
        return Err(compound());
    }
    let (field, v) = user_key.iter().next().ok_or_else(compound)?;
    if *field != options.time_field {
        return Err(IndexSpecError::InvalidOptions(
            "TTL indexes on non-time fields are not supported on time-series collections"
                .to_string(),
        ));
    }
    Ok(doc! { format!("{CONTROL_MIN_PREFIX}{field}"): v.clone() })
}

/// The index MongoDB (6.3+) builds on `system.buckets` when a time-series
/// collection with a metaField is created: `{v: 2, name: "<meta>_1_<time>_1",
/// key: {meta: 1, control.min.<time>: 1, control.max.<time>: 1}}` (MongoDB
/// adds the collection's `collation` when it has a non-simple one). The view
/// shows it as `{v: 2, key: {<meta>: 1, <time>: 1}, name: ...}`. Collections
/// without a metaField get no index (only the clustered `_id`, which
/// `listIndexes` does not show for buckets collections).
pub fn default_index(options: &TimeseriesOptions) -> Option<Document> {
    let meta = options.meta_field.as_deref()?;
    let time = options.time_field.as_str();
    Some(doc! {
        "v": 2,
        "name": format!("{meta}_1_{time}_1"),
        "key": {
            BUCKET_META_FIELD: 1,
            format!("{CONTROL_MIN_PREFIX}{time}"): 1,
            format!("{CONTROL_MAX_PREFIX}{time}"): 1,
        },
    })
}

/// The default index name drivers and the shell give a key pattern:
/// `<field>_<value>` joined by `_` (`{a: 1, b: -1}` -> `a_1_b_-1`,
/// `{loc: "2dsphere"}` -> `loc_2dsphere`). Integral doubles print without a
/// fraction, as JavaScript does.
pub fn index_name(key: &Document) -> String {
    key.iter()
        .map(|(k, v)| {
            let value = match v {
                Bson::String(s) => s.clone(),
                Bson::Int32(i) => i.to_string(),
                Bson::Int64(i) => i.to_string(),
                Bson::Double(d) => d.to_string(),
                Bson::Decimal128(d) => d.to_string(),
                other => other.to_string(),
            };
            format!("{k}_{value}")
        })
        .collect::<Vec<_>>()
        .join("_")
}

/// The expiry cutoff of a TTL on a time-series collection (collection-level
/// `expireAfterSeconds` or a partial TTL index): MongoDB deletes a bucket
/// when its bucket time (`_id` / `control.min.<time>`) is `<=` this value,
/// i.e. `now - expireAfterSeconds - bucketMaxSpanSeconds`, so a bucket goes
/// only once every measurement it can hold has expired.
pub fn ttl_cutoff_millis(
    options: &TimeseriesOptions,
    now_millis: i64,
    expire_after_seconds: i64,
) -> i64 {
    now_millis
        .saturating_sub(expire_after_seconds.saturating_mul(1000))
        .saturating_sub(options.max_span_millis())
}

#[cfg(test)]
mod tests;
