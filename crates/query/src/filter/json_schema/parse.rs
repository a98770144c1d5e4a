//! Parsing of a `$jsonSchema` document into a [`Node`] tree, with MongoDB's error codes
//! and messages for invalid schemas.

use bson::{Bson, Document};

use super::{Additional, Bound, Dependency, Items, Node, Types};
use crate::compare::{type_name, values_equal};
use crate::error::{render, QueryError};
use crate::filter::types::TypeSel;
use crate::num::Num;

/// Draft-4 keywords MongoDB does not implement.
const UNSUPPORTED: &[&str] = &["$ref", "$schema", "default", "definitions", "format", "id"];

fn failed(msg: impl Into<String>) -> QueryError {
    QueryError::FailedToParse(msg.into())
}

fn mismatch(msg: impl Into<String>) -> QueryError {
    QueryError::TypeMismatch(msg.into())
}

/// Parses one (sub)schema.
pub(super) fn node(spec: &Document) -> Result<Node, QueryError> {
    let mut n = Node::default();
    for (k, v) in spec {
        match k.as_str() {
            "title" | "description" => {
                let Bson::String(s) = v else {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword '{k}' must be of type string"
                    )));
                };
                if k == "title" {
                    n.title = Some(s.clone());
                } else {
                    n.description = Some(s.clone());
                }
            }
            "type" | "bsonType" => {
                if n.types.is_some() {
                    return Err(failed(
                        "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'",
                    ));
                }
                n.types = Some(types(k, v)?);
            }
            "pattern" => {
                let Bson::String(p) = v else {
                    return Err(mismatch("$jsonSchema keyword 'pattern' must be a string"));
                };
                n.pattern = Some((p.clone(), regex(p)?));
            }
            "maxLength" => n.max_length = Some((v.clone(), non_negative(k, v)?)),
            "minLength" => n.min_length = Some((v.clone(), non_negative(k, v)?)),
            "minItems" => n.min_items = Some((v.clone(), non_negative(k, v)?)),
            "maxItems" => n.max_items = Some((v.clone(), non_negative(k, v)?)),
            "minProperties" => n.min_properties = Some((v.clone(), non_negative(k, v)?)),
            "maxProperties" => n.max_properties = Some((v.clone(), non_negative(k, v)?)),
            "multipleOf" => {
                let Some(m) = Num::from_bson(v) else {
                    return Err(mismatch(
                        "$jsonSchema keyword 'multipleOf' must be a number",
                    ));
                };
                if m.as_f64().is_nan() || m.as_f64() <= 0.0 {
                    return Err(failed(
                        "$jsonSchema keyword 'multipleOf' must have a positive value",
                    ));
                }
                n.multiple_of = Some(v.clone());
            }
            "maximum" | "minimum" => {
                if Num::from_bson(v).is_none() {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword '{k}' must be a number"
                    )));
                }
                let excl_key = if k == "maximum" {
                    "exclusiveMaximum"
                } else {
                    "exclusiveMinimum"
                };
                let exclusive = match spec.get(excl_key) {
                    None => None,
                    Some(Bson::Boolean(b)) => Some(*b),
                    Some(_) => {
                        return Err(mismatch(format!(
                            "$jsonSchema keyword '{excl_key}' must be a boolean"
                        )))
                    }
                };
                let bound = Bound {
                    value: v.clone(),
                    exclusive,
                };
                if k == "maximum" {
                    n.maximum = Some(bound);
                } else {
                    n.minimum = Some(bound);
                }
            }
            "exclusiveMaximum" | "exclusiveMinimum" => {
                if !matches!(v, Bson::Boolean(_)) {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword '{k}' must be a boolean"
                    )));
                }
                let base = if k == "exclusiveMaximum" {
                    "maximum"
                } else {
                    "minimum"
                };
                if !spec.contains_key(base) {
                    return Err(failed(format!(
                        "$jsonSchema keyword '{base}' must be a present if {k} is present"
                    )));
                }
            }
            "uniqueItems" => {
                let Bson::Boolean(b) = v else {
                    return Err(mismatch(
                        "$jsonSchema keyword 'uniqueItems' must be a boolean",
                    ));
                };
                n.unique_items = Some(*b);
            }
            "items" => n.items = Some(items(v)?),
            "additionalItems" => n.additional_items = Some(additional(k, v)?),
            "additionalProperties" => n.additional_properties = Some(additional(k, v)?),
            "properties" => {
                let Bson::Document(props) = v else {
                    return Err(mismatch(
                        "$jsonSchema keyword 'properties' must be an object",
                    ));
                };
                let mut out = Vec::with_capacity(props.len());
                for (name, sub) in props {
                    let Bson::Document(sub) = sub else {
                        return Err(mismatch(format!(
                            "Nested schema for $jsonSchema property '{name}' must be an object"
                        )));
                    };
                    out.push((name.clone(), node(sub)?));
                }
                n.properties = Some(out);
            }
            "patternProperties" => {
                let Bson::Document(props) = v else {
                    return Err(mismatch(
                        "$jsonSchema keyword 'patternProperties' must be an object",
                    ));
                };
                let mut out = Vec::with_capacity(props.len());
                for (pattern, sub) in props {
                    let Bson::Document(sub) = sub else {
                        return Err(mismatch(format!(
                            "$jsonSchema keyword 'patternProperties' has property '{pattern}' which is not an object"
                        )));
                    };
                    out.push((pattern.clone(), regex(pattern)?, node(sub)?));
                }
                n.pattern_properties = Some(out);
            }
            "required" => n.required = Some(required(v)?),
            "dependencies" => n.dependencies = Some(dependencies(v)?),
            "allOf" | "anyOf" | "oneOf" => {
                let list = schema_list(k, v)?;
                match k.as_str() {
                    "allOf" => n.all_of = Some(list),
                    "anyOf" => n.any_of = Some(list),
                    _ => n.one_of = Some(list),
                }
            }
            "not" => {
                let Bson::Document(sub) = v else {
                    return Err(mismatch("$jsonSchema keyword 'not' must be an object"));
                };
                n.not = Some(Box::new(node(sub)?));
            }
            "enum" => n.enumeration = Some(enumeration(v)?),
            "encrypt" => {
                if !matches!(v, Bson::Document(_)) {
                    return Err(mismatch("$jsonSchema keyword 'encrypt' must be an object"));
                }
                n.encrypt = true;
            }
            "encryptMetadata" => {
                if !matches!(v, Bson::Document(_)) {
                    return Err(mismatch(
                        "$jsonSchema keyword 'encryptMetadata' must be an object",
                    ));
                }
            }
            other if UNSUPPORTED.contains(&other) => {
                return Err(failed(format!(
                    "$jsonSchema keyword '{other}' is not currently supported"
                )))
            }
            other => return Err(failed(format!("Unknown $jsonSchema keyword: {other}"))),
        }
    }
    if n.encrypt && n.types.is_some() {
        let kw = n.types.as_ref().map_or("bsonType", |t| t.keyword);
        return Err(failed(format!(
            "Cannot specify both $jsonSchema keywords 'encrypt' and '{kw}'"
        )));
    }
    Ok(n)
}

fn regex(p: &str) -> Result<crate::pcre::Pcre, QueryError> {
    crate::pcre::Pcre::new(p, "")
        .map_err(|e| QueryError::loc(51091, format!("Regular expression is invalid: {e}")))
}

/// A `type` (JSON type names; `integer` is refused) or `bsonType` (BSON aliases and
/// `number`) operand: one name or a non-empty array of distinct names.
fn types(keyword: &str, v: &Bson) -> Result<Types, QueryError> {
    let names: Vec<&Bson> = match v {
        Bson::String(_) => vec![v],
        Bson::Array(a) => a.iter().collect(),
        _ => {
            return Err(mismatch(format!(
                "$jsonSchema keyword '{keyword}' must be either a string or an array of strings"
            )))
        }
    };
    if names.is_empty() {
        return Err(failed(format!(
            "$jsonSchema keyword '{keyword}' must name at least one type"
        )));
    }
    let mut sels: Vec<TypeSel> = Vec::with_capacity(names.len());
    for name in names {
        let Bson::String(s) = name else {
            return Err(mismatch(format!(
                "$jsonSchema keyword '{keyword}' array elements must be strings"
            )));
        };
        let sel = if keyword == "type" {
            json_type(s)?
        } else {
            TypeSel::parse(name)?
        };
        if sels.contains(&sel) {
            return Err(failed(format!(
                "$jsonSchema keyword '{keyword}' has duplicate value: {s}"
            )));
        }
        sels.push(sel);
    }
    let keyword = if keyword == "type" {
        "type"
    } else {
        "bsonType"
    };
    Ok(Types {
        keyword,
        spec: v.clone(),
        sels,
    })
}

fn json_type(s: &str) -> Result<TypeSel, QueryError> {
    Ok(match s {
        "number" => TypeSel::Number,
        "object" => TypeSel::Named("object"),
        "array" => TypeSel::Named("array"),
        "string" => TypeSel::Named("string"),
        "boolean" => TypeSel::Named("bool"),
        "null" => TypeSel::Named("null"),
        "integer" => {
            return Err(QueryError::bad(
                "$jsonSchema type 'integer' is not currently supported.",
            ))
        }
        other => {
            return Err(QueryError::bad(format!(
                "Unknown $jsonSchema type: {other}"
            )))
        }
    })
}

/// A count keyword (`minLength`, `maxItems`, ...): a non-negative integral number.
fn non_negative(k: &str, v: &Bson) -> Result<i64, QueryError> {
    let shown = format!("{k}: {}", render(v));
    let Some(n) = Num::from_bson(v) else {
        return Err(failed(format!("Expected a number in: {shown}")));
    };
    let Some(i) = n.as_exact_i64() else {
        return Err(failed(format!("Expected an integer: {shown}")));
    };
    if i < 0 {
        return Err(failed(format!("Expected a positive number in: {shown}")));
    }
    Ok(i)
}

fn items(v: &Bson) -> Result<Items, QueryError> {
    match v {
        Bson::Document(d) => Ok(Items::All(Box::new(node(d)?))),
        Bson::Array(a) => a
            .iter()
            .map(|e| match e {
                Bson::Document(d) => node(d),
                other => Err(mismatch(format!(
                    "$jsonSchema keyword 'items' requires that each element of the array is an object, but found a {}",
                    type_name(other)
                ))),
            })
            .collect::<Result<_, _>>()
            .map(Items::Each),
        other => Err(mismatch(format!(
            "$jsonSchema keyword 'items' must be an array or an object, not {}",
            type_name(other)
        ))),
    }
}

fn additional(k: &str, v: &Bson) -> Result<Additional, QueryError> {
    match v {
        Bson::Boolean(b) => Ok(Additional::Allowed(*b)),
        Bson::Document(d) => Ok(Additional::Schema(Box::new(node(d)?))),
        other => Err(mismatch(format!(
            "$jsonSchema keyword '{k}' must be either an object or a boolean, but got a {}",
            type_name(other)
        ))),
    }
}

fn required(v: &Bson) -> Result<Vec<String>, QueryError> {
    let Bson::Array(a) = v else {
        return Err(mismatch("$jsonSchema keyword 'required' must be an array"));
    };
    if a.is_empty() {
        return Err(QueryError::bad(
            "$jsonSchema keyword 'required' cannot be an empty array",
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(a.len());
    for e in a {
        let Bson::String(s) = e else {
            return Err(mismatch(
                "$jsonSchema keyword 'required' must contain only strings",
            ));
        };
        if out.contains(s) {
            return Err(failed(
                "$jsonSchema keyword 'required' array cannot contain duplicate values",
            ));
        }
        out.push(s.clone());
    }
    Ok(out)
}

fn dependencies(v: &Bson) -> Result<Vec<(String, Dependency)>, QueryError> {
    let Bson::Document(d) = v else {
        return Err(mismatch(
            "$jsonSchema keyword 'dependencies' must be an object",
        ));
    };
    let mut out = Vec::with_capacity(d.len());
    for (k, dep) in d {
        let dep = match dep {
            Bson::Document(sub) => Dependency::Schema(Box::new(node(sub)?)),
            Bson::Array(a) => {
                if a.is_empty() {
                    return Err(failed(format!(
                        "property '{k}' in $jsonSchema keyword 'dependencies' cannot be an empty array"
                    )));
                }
                let mut names: Vec<String> = Vec::with_capacity(a.len());
                for e in a {
                    let Bson::String(s) = e else {
                        return Err(mismatch(format!(
                            "array for property '{k}' in $jsonSchema keyword 'dependencies' can only contain strings"
                        )));
                    };
                    if names.contains(s) {
                        return Err(failed(format!(
                            "array for property '{k}' in $jsonSchema keyword 'dependencies' contains duplicate values"
                        )));
                    }
                    names.push(s.clone());
                }
                Dependency::Properties(names)
            }
            other => {
                return Err(mismatch(format!(
                    "Expected the value of a $jsonSchema dependency to be either an object or an array, but got a {}",
                    type_name(other)
                )))
            }
        };
        out.push((k.clone(), dep));
    }
    Ok(out)
}

fn schema_list(k: &str, v: &Bson) -> Result<Vec<Node>, QueryError> {
    let Bson::Array(a) = v else {
        return Err(mismatch(format!(
            "$jsonSchema keyword '{k}' must be an array"
        )));
    };
    if a.is_empty() {
        return Err(QueryError::bad(format!(
            "$jsonSchema keyword '{k}' must be a nonempty array"
        )));
    }
    a.iter()
        .map(|e| match e {
            Bson::Document(d) => node(d),
            other => Err(mismatch(format!(
                "$jsonSchema keyword '{k}' must be an array of objects, but found an element of type {}",
                type_name(other)
            ))),
        })
        .collect()
}

fn enumeration(v: &Bson) -> Result<Vec<Bson>, QueryError> {
    let Bson::Array(a) = v else {
        return Err(mismatch("$jsonSchema keyword 'enum' must be an array"));
    };
    if a.is_empty() {
        return Err(failed(
            "$jsonSchema keyword 'enum' cannot be an empty array",
        ));
    }
    for (i, e) in a.iter().enumerate() {
        if a[..i]
            .iter()
            .any(|p| values_equal(p, e) && type_name(p) == type_name(e))
        {
            return Err(failed(
                "$jsonSchema keyword 'enum' array cannot contain duplicate values",
            ));
        }
    }
    Ok(a.clone())
}
