//! Why a value fails a schema: the `schemaRulesNotSatisfied` entries of MongoDB 7.0's
//! document validation errors (`operatorName`, `specifiedAs`, `reason`, ...), listed in
//! the order MongoDB lists them (string, number, array, encryption, object, logical
//! keywords, then the type).

use bson::{doc, Bson, Document};

use super::{
    first_duplicate, is_encrypted, multiple_of, within, Additional, Dependency, Family, Items,
    Node, Schema,
};
use crate::compare::type_name;
use crate::num::Num;

const NUMBER_TYPES: [&str; 4] = ["decimal", "double", "int", "long"];

impl Schema {
    /// The `details` of a validation error for a document this schema refuses.
    pub fn explain(&self, doc: &Document) -> Document {
        let v = Bson::Document(doc.clone());
        let mut out = doc! {"operatorName": "$jsonSchema"};
        if self.root.types.as_ref().is_some_and(|t| !t.allows(&v)) {
            out.insert("specifiedAs", doc! {"$jsonSchema": self.spec.clone()});
            out.insert("reason", "expression always evaluates to false");
            return out;
        }
        annotate(&mut out, &self.root);
        out.insert("schemaRulesNotSatisfied", rules(&self.root, &v));
        out
    }
}

/// Adds a schema's `title` and `description`.
fn annotate(out: &mut Document, n: &Node) {
    if let Some(t) = &n.title {
        out.insert("title", t.clone());
    }
    if let Some(d) = &n.description {
        out.insert("description", d.clone());
    }
}

fn rule(name: &str) -> Document {
    doc! {"operatorName": name}
}

fn specified(name: &str, v: &Bson) -> Document {
    doc! {"operatorName": name, "specifiedAs": {name: v.clone()}}
}

/// A keyword restricted to one family, reported against a value outside it when the
/// schema names exactly that type (MongoDB then applies the keyword unconditionally).
fn type_refusal(n: &Node, fam: Family, name: &str, spec: Document, v: &Bson) -> Option<Document> {
    let stated = n.types.as_ref().and_then(|t| t.single())?;
    if stated != Some(fam) || fam.holds(v) {
        return None;
    }
    let mut d = doc! {"operatorName": name, "specifiedAs": spec, "reason": "type did not match", "consideredType": type_name(v)};
    match (fam, name) {
        (Family::String, "pattern") => d.insert("expectedTypes", vec!["regex", "string", "symbol"]),
        (Family::String, _) => d.insert("expectedType", "string"),
        _ => d.insert("expectedTypes", NUMBER_TYPES.to_vec()),
    };
    d.insert("consideredValue", v.clone());
    Some(d)
}

/// The failing keywords of `n` for the value `v`.
pub(crate) fn rules(n: &Node, v: &Bson) -> Vec<Document> {
    let mut out = Vec::new();
    scalar(n, v, &mut out);
    array(n, v, &mut out);
    if n.encrypt && !is_encrypted(v) {
        let mut d = rule("encrypt");
        d.insert("reason", "value was not encrypted");
        out.push(d);
    }
    if let Bson::Document(d) = v {
        object(n, d, &mut out);
    }
    logical(n, v, &mut out);
    if let Some(t) = &n.types {
        if !t.allows(v) {
            let mut d = specified(t.keyword, &t.spec);
            d.insert("reason", "type did not match");
            d.insert("consideredValue", v.clone());
            d.insert("consideredType", type_name(v));
            out.push(d);
        }
    }
    out
}

fn scalar(n: &Node, v: &Bson, out: &mut Vec<Document>) {
    let string_rule = |name: &str, spec: Bson, failed: bool, reason: &str| -> Option<Document> {
        match v {
            Bson::String(_) if failed => {
                let mut d = specified(name, &spec);
                d.insert("reason", reason);
                d.insert("consideredValue", v.clone());
                Some(d)
            }
            Bson::String(_) => None,
            _ => type_refusal(n, Family::String, name, doc! {name: spec}, v),
        }
    };
    let len = match v {
        Bson::String(s) => s.chars().count() as i64,
        _ => 0,
    };
    if let Some((p, re)) = &n.pattern {
        let failed = matches!(v, Bson::String(s) if !re.is_match(s));
        out.extend(string_rule(
            "pattern",
            Bson::String(p.clone()),
            failed,
            "regular expression did not match",
        ));
    }
    const LENGTH: &str = "specified string length was not satisfied";
    if let Some((spec, max)) = &n.max_length {
        out.extend(string_rule("maxLength", spec.clone(), len > *max, LENGTH));
    }
    if let Some((spec, min)) = &n.min_length {
        out.extend(string_rule("minLength", spec.clone(), len < *min, LENGTH));
    }
    let num = Num::from_bson(v);
    if let Some(m) = &n.multiple_of {
        match num {
            Some(_) if !multiple_of(v, m) => {
                let mut d = specified("multipleOf", m);
                d.insert(
                    "reason",
                    "considered value is not a multiple of the specified value",
                );
                d.insert("consideredValue", v.clone());
                out.push(d);
            }
            Some(_) => {}
            None => out.extend(type_refusal(
                n,
                Family::Number,
                "multipleOf",
                doc! {"multipleOf": m.clone()},
                v,
            )),
        }
    }
    for (name, excl, bound, outside) in [
        (
            "maximum",
            "exclusiveMaximum",
            &n.maximum,
            std::cmp::Ordering::Greater,
        ),
        (
            "minimum",
            "exclusiveMinimum",
            &n.minimum,
            std::cmp::Ordering::Less,
        ),
    ] {
        let Some(b) = bound else { continue };
        let mut spec = doc! {name: b.value.clone()};
        if let Some(e) = b.exclusive {
            spec.insert(excl, e);
        }
        match num {
            Some(x) if !within(x, b, outside) => out.push(doc! {
                "operatorName": name, "specifiedAs": spec,
                "reason": "comparison failed", "consideredValue": v.clone(),
            }),
            Some(_) => {}
            None => out.extend(type_refusal(n, Family::Number, name, spec, v)),
        }
    }
}

fn array(n: &Node, v: &Bson, out: &mut Vec<Document>) {
    let Bson::Array(a) = v else {
        return;
    };
    let len = a.len() as i64;
    for (name, bound, failed) in [
        (
            "minItems",
            &n.min_items,
            n.min_items.as_ref().is_some_and(|(_, m)| len < *m),
        ),
        (
            "maxItems",
            &n.max_items,
            n.max_items.as_ref().is_some_and(|(_, m)| len > *m),
        ),
    ] {
        if let (Some((spec, _)), true) = (bound, failed) {
            let mut d = specified(name, spec);
            d.insert("reason", "array did not match specified length");
            d.insert("consideredValue", v.clone());
            d.insert("numberOfItems", len);
            out.push(d);
        }
    }
    if n.unique_items == Some(true) {
        if let Some(dup) = first_duplicate(a) {
            let mut d = specified("uniqueItems", &Bson::Boolean(true));
            d.insert("reason", "found a duplicate item");
            d.insert("consideredValue", v.clone());
            d.insert("duplicatedValue", dup.clone());
            out.push(d);
        }
    }
    match &n.items {
        None => {}
        Some(Items::All(s)) => {
            if let Some((i, e)) = a.iter().enumerate().find(|(_, e)| !s.matches(e)) {
                let mut d = rule("items");
                annotate(&mut d, s);
                d.insert("reason", "At least one item did not match the sub-schema");
                d.insert("itemIndex", i as i32);
                d.insert("details", rules(s, e));
                out.push(d);
            }
        }
        Some(Items::Each(list)) => {
            let failing: Vec<Document> = a
                .iter()
                .zip(list)
                .enumerate()
                .filter(|(_, (e, s))| !s.matches(e))
                .map(|(i, (e, s))| {
                    let mut d = doc! {"itemIndex": i as i32};
                    annotate(&mut d, s);
                    d.insert("details", rules(s, e));
                    d
                })
                .collect();
            if !failing.is_empty() {
                let mut d = rule("items");
                d.insert("details", failing);
                out.push(d);
            }
            let extra = a.iter().enumerate().skip(list.len());
            match &n.additional_items {
                Some(Additional::Allowed(false)) if a.len() > list.len() => {
                    let mut d = specified("additionalItems", &Bson::Boolean(false));
                    d.insert("reason", "found additional items");
                    d.insert("additionalItems", a[list.len()..].to_vec());
                    out.push(d);
                }
                Some(Additional::Schema(s)) => {
                    if let Some((i, e)) = extra.into_iter().find(|(_, e)| !s.matches(e)) {
                        let mut d = rule("additionalItems");
                        annotate(&mut d, s);
                        d.insert(
                            "reason",
                            "At least one additional item did not match the sub-schema",
                        );
                        d.insert("itemIndex", i as i32);
                        d.insert("details", rules(s, e));
                        out.push(d);
                    }
                }
                _ => {}
            }
        }
    }
}

fn object(n: &Node, obj: &Document, out: &mut Vec<Document>) {
    if let Some(props) = &n.properties {
        let failing: Vec<Document> = props
            .iter()
            .filter_map(|(k, s)| {
                let v = obj.get(k)?;
                if s.matches(v) {
                    return None;
                }
                let mut d = doc! {"propertyName": k};
                annotate(&mut d, s);
                d.insert("details", rules(s, v));
                Some(d)
            })
            .collect();
        if !failing.is_empty() {
            let mut d = rule("properties");
            d.insert("propertiesNotSatisfied", failing);
            out.push(d);
        }
    }
    let named = |k: &str| {
        n.properties
            .as_ref()
            .is_some_and(|p| p.iter().any(|(name, _)| name == k))
            || n.pattern_properties
                .iter()
                .flatten()
                .any(|(_, re, _)| re.is_match(k))
    };
    match &n.additional_properties {
        Some(Additional::Allowed(false)) => {
            let extra: Vec<&String> = obj.keys().filter(|k| !named(k)).collect();
            if !extra.is_empty() {
                let mut d = specified("additionalProperties", &Bson::Boolean(false));
                d.insert("additionalProperties", extra);
                out.push(d);
            }
        }
        Some(Additional::Schema(s)) => {
            if let Some((k, v)) = obj.iter().find(|(k, v)| !named(k) && !s.matches(v)) {
                let mut d = rule("additionalProperties");
                annotate(&mut d, s);
                d.insert(
                    "reason",
                    "at least one additional property did not match the subschema",
                );
                d.insert("failingProperty", k.clone());
                d.insert("details", rules(s, v));
                out.push(d);
            }
        }
        _ => {}
    }
    if let Some(patterns) = &n.pattern_properties {
        let mut failing = Vec::new();
        for (k, v) in obj {
            for (p, re, s) in patterns {
                if re.is_match(k) && !s.matches(v) {
                    let mut d = doc! {"propertyName": k};
                    annotate(&mut d, s);
                    d.insert("regexMatched", p.clone());
                    d.insert("details", rules(s, v));
                    failing.push(d);
                }
            }
        }
        if !failing.is_empty() {
            let mut d = rule("patternProperties");
            d.insert("details", failing);
            out.push(d);
        }
    }
    if let Some(req) = &n.required {
        let missing: Vec<&String> = req
            .iter()
            .filter(|k| !obj.contains_key(k.as_str()))
            .collect();
        if !missing.is_empty() {
            let mut d = specified("required", &Bson::from(req.clone()));
            d.insert("missingProperties", missing);
            out.push(d);
        }
    }
    let count = obj.len() as i64;
    for (name, bound, failed) in [
        (
            "minProperties",
            &n.min_properties,
            n.min_properties.as_ref().is_some_and(|(_, m)| count < *m),
        ),
        (
            "maxProperties",
            &n.max_properties,
            n.max_properties.as_ref().is_some_and(|(_, m)| count > *m),
        ),
    ] {
        if let (Some((spec, _)), true) = (bound, failed) {
            let mut d = specified(name, spec);
            d.insert("reason", "specified number of properties was not satisfied");
            d.insert("numberOfProperties", count);
            out.push(d);
        }
    }
    if let Some(deps) = &n.dependencies {
        let whole = Bson::Document(obj.clone());
        let failing: Vec<Document> = deps
            .iter()
            .filter(|(k, _)| obj.contains_key(k.as_str()))
            .filter_map(|(k, dep)| match dep {
                Dependency::Properties(names) => {
                    let missing: Vec<&String> = names
                        .iter()
                        .filter(|m| !obj.contains_key(m.as_str()))
                        .collect();
                    (!missing.is_empty())
                        .then(|| doc! {"conditionalProperty": k, "missingProperties": missing})
                }
                Dependency::Schema(s) => (!s.matches(&whole))
                    .then(|| doc! {"conditionalProperty": k, "details": rules(s, &whole)}),
            })
            .collect();
        if !failing.is_empty() {
            let mut d = rule("dependencies");
            d.insert("failingDependencies", failing);
            out.push(d);
        }
    }
}

/// `schemasNotSatisfied` entries of the listed schemas that refuse `v`.
fn failing_schemas(list: &[Node], v: &Bson) -> Vec<Document> {
    list.iter()
        .enumerate()
        .filter(|(_, s)| !s.matches(v))
        .map(|(i, s)| {
            let mut d = doc! {"index": i as i32};
            annotate(&mut d, s);
            d.insert("details", rules(s, v));
            d
        })
        .collect()
}

fn logical(n: &Node, v: &Bson, out: &mut Vec<Document>) {
    if let Some(list) = &n.all_of {
        if list.iter().any(|s| !s.matches(v)) {
            let mut d = rule("allOf");
            d.insert("schemasNotSatisfied", failing_schemas(list, v));
            out.push(d);
        }
    }
    if let Some(list) = &n.any_of {
        if !list.iter().any(|s| s.matches(v)) {
            let mut d = rule("anyOf");
            d.insert("schemasNotSatisfied", failing_schemas(list, v));
            out.push(d);
        }
    }
    if let Some(list) = &n.one_of {
        let matching: Vec<i32> = list
            .iter()
            .enumerate()
            .filter(|(_, s)| s.matches(v))
            .map(|(i, _)| i as i32)
            .collect();
        match matching.len() {
            1 => {}
            0 => {
                let mut d = rule("oneOf");
                d.insert("schemasNotSatisfied", failing_schemas(list, v));
                out.push(d);
            }
            _ => {
                let mut d = rule("oneOf");
                d.insert("reason", "more than one subschema matched");
                d.insert("matchingSchemaIndexes", matching);
                out.push(d);
            }
        }
    }
    if n.not.as_ref().is_some_and(|s| s.matches(v)) {
        let mut d = rule("not");
        d.insert("reason", "child expression matched");
        out.push(d);
    }
    if let Some(list) = &n.enumeration {
        if !list.iter().any(|e| super::enum_equal(v, e)) {
            let mut d = specified("enum", &Bson::Array(list.clone()));
            d.insert("reason", "value was not found in enum");
            d.insert("consideredValue", v.clone());
            out.push(d);
        }
    }
}
