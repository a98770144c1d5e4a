//! MongoDB's check of an index key pattern (index version 2), which a buckets
//! collection's `createIndexes` applies to the translated spec: the translation passes
//! meta-field values through unchecked, so `{meta.a: "foo"}` or `{meta.a: true}` are
//! refused here, as mongod refuses them, with 67 `CannotCreateIndex`.

use bson::{Bson, Document};
use hourglass_query::compare::type_name;

use super::{doc_to_string, plugin_name, IndexSpecError};

/// `IndexNames::isKnownName` (the b-tree's empty name aside).
const KNOWN_PLUGINS: &[&str] = &[
    "2d",
    "2dsphere",
    "2dsphere_bucket",
    "text",
    "hashed",
    "wildcard",
    "columnstore",
];

fn numeric(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        Bson::Decimal128(d) => Some(d.to_string().parse::<f64>().unwrap_or(f64::NAN)),
        _ => None,
    }
}

/// Checks the `key` of a buckets index spec as mongod does before building it:
/// a known plugin, one plugin per index, and every value a non-zero number or that
/// plugin's name. The message names the whole spec, as `createIndexes` words it.
pub fn validate_bucket_key_pattern(spec: &Document) -> Result<(), IndexSpecError> {
    let Ok(key) = spec.get_document("key") else {
        return Ok(());
    };
    let fail = |reason: String| {
        IndexSpecError::CannotCreateIndex(format!(
            "Error in specification {} :: caused by :: {reason}",
            doc_to_string(spec)
        ))
    };
    let plugin = plugin_name(key);
    if !plugin.is_empty() && !KNOWN_PLUGINS.contains(&plugin) {
        return Err(fail(format!("Unknown index plugin '{plugin}'")));
    }
    for v in key.values() {
        match (v, numeric(v)) {
            (_, Some(n)) if n.is_nan() => {
                return Err(fail(
                    "Values in the index key pattern cannot be NaN.".to_string(),
                ))
            }
            (_, Some(0.0)) => {
                return Err(fail(
                    "Values in the index key pattern cannot be 0.".to_string(),
                ))
            }
            (_, Some(_)) => {}
            (Bson::String(s), None) if s != plugin => {
                return Err(fail(
                    "Can't use more than one index plugin for a single index.".to_string(),
                ))
            }
            (Bson::String(_), None) => {}
            (other, None) => {
                return Err(fail(format!(
                    "Values in v:2 index key pattern cannot be of type {}. Only numbers > 0, \
                     numbers < 0, and strings are allowed.",
                    type_name(other)
                )))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn reason(key: Document) -> String {
        let e = validate_bucket_key_pattern(&doc! {"key": key, "name": "x"}).unwrap_err();
        assert_eq!(e.code(), 67);
        e.message()
            .split(" :: caused by :: ")
            .nth(1)
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn meta_values_mongod_refuses_are_cannot_create_index() {
        assert_eq!(reason(doc! {"meta.a": "foo"}), "Unknown index plugin 'foo'");
        assert_eq!(
            reason(doc! {"meta.a": true}),
            "Values in v:2 index key pattern cannot be of type bool. Only numbers > 0, numbers < 0, and strings are allowed."
        );
        assert_eq!(
            reason(doc! {"meta.a": 0}),
            "Values in the index key pattern cannot be 0."
        );
        assert_eq!(
            reason(doc! {"meta.a": "hashed", "meta.b": "2d"}),
            "Can't use more than one index plugin for a single index."
        );
        let e =
            validate_bucket_key_pattern(&doc! {"key": {"meta.a": "foo"}, "name": "x"}).unwrap_err();
        assert_eq!(
            e.message(),
            "Error in specification { key: { meta.a: \"foo\" }, name: \"x\" } :: caused by :: Unknown index plugin 'foo'"
        );
    }

    #[test]
    fn translated_keys_pass() {
        for key in [
            doc! {"meta": 1, "control.min.t": 1, "control.max.t": 1},
            doc! {"meta.a": "2dsphere"},
            doc! {"data.loc": "2dsphere_bucket"},
            doc! {"meta.$**": 1},
            doc! {"meta.h": "hashed", "control.min.t": -1},
        ] {
            assert!(validate_bucket_key_pattern(&doc! {"key": key}).is_ok());
        }
    }
}
