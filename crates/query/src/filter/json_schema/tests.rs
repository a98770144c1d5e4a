//! Unit tests of `$jsonSchema` and of validation error details, named after the
//! behaviour they pin.

use crate::filter::doc_validation::explain_failure;
use crate::filter::Filter;
use bson::{doc, Bson, Document};

fn m(schema: Document, d: Document) -> bool {
    Filter::parse(&doc! {"$jsonSchema": schema})
        .unwrap()
        .matches(&d)
}

fn code(schema: Bson) -> i32 {
    Filter::parse(&doc! {"$jsonSchema": schema})
        .unwrap_err()
        .code()
}

#[test]
fn bson_type_and_json_type_check_the_value_type() {
    let s = doc! {"properties": {"a": {"bsonType": "int"}}};
    assert!(m(s.clone(), doc! {"a": 1}));
    assert!(!m(s.clone(), doc! {"a": 1i64}));
    assert!(m(s, doc! {"b": "x"}));
    let n = doc! {"properties": {"a": {"bsonType": ["number", "string"]}}};
    assert!(m(n.clone(), doc! {"a": 1.5}));
    assert!(m(n.clone(), doc! {"a": "x"}));
    assert!(!m(n, doc! {"a": true}));
    assert!(m(
        doc! {"properties": {"a": {"type": "boolean"}}},
        doc! {"a": false}
    ));
    assert!(!m(
        doc! {"properties": {"a": {"type": "string"}}},
        doc! {"a": ["x"]}
    ));
}

#[test]
fn top_level_type_other_than_object_matches_nothing() {
    assert!(m(doc! {"bsonType": "object"}, doc! {"a": 1}));
    assert!(!m(doc! {"bsonType": "string"}, doc! {"a": 1}));
}

#[test]
fn numeric_keywords_apply_only_to_numbers() {
    let s = doc! {"properties": {"a": {"minimum": 5, "maximum": 10, "exclusiveMaximum": true}}};
    assert!(m(s.clone(), doc! {"a": 5}));
    assert!(!m(s.clone(), doc! {"a": 4.9}));
    assert!(!m(s.clone(), doc! {"a": 10}));
    assert!(m(s, doc! {"a": "string"}));
    let mult = doc! {"properties": {"a": {"multipleOf": 0.1}}};
    assert!(m(mult.clone(), doc! {"a": 0.3}));
    assert!(!m(mult, doc! {"a": 0.35}));
    assert!(!m(
        doc! {"properties": {"a": {"multipleOf": 2}}},
        doc! {"a": 3}
    ));
}

#[test]
fn string_keywords_count_code_points_and_match_patterns() {
    let s = doc! {"properties": {"a": {"minLength": 2, "maxLength": 3, "pattern": "^h"}}};
    assert!(m(s.clone(), doc! {"a": "hé"}));
    assert!(!m(s.clone(), doc! {"a": "h"}));
    assert!(!m(s.clone(), doc! {"a": "hello"}));
    assert!(!m(s.clone(), doc! {"a": "ab"}));
    assert!(m(s, doc! {"a": 12345}));
}

#[test]
fn array_keywords_check_items_length_and_uniqueness() {
    let s = doc! {"properties": {"a": {"minItems": 1, "maxItems": 3, "uniqueItems": true, "items": {"bsonType": "int"}}}};
    assert!(m(s.clone(), doc! {"a": [1, 2]}));
    assert!(!m(s.clone(), doc! {"a": []}));
    assert!(!m(s.clone(), doc! {"a": [1, 1]}));
    assert!(!m(s.clone(), doc! {"a": [1, "x"]}));
    assert!(m(s, doc! {"a": "not an array"}));
    let t = doc! {"properties": {"a": {"items": [{"bsonType": "int"}, {"bsonType": "string"}], "additionalItems": false}}};
    assert!(m(t.clone(), doc! {"a": [1, "x"]}));
    assert!(m(t.clone(), doc! {"a": [1]}));
    assert!(!m(t.clone(), doc! {"a": [1, "x", 3]}));
    assert!(!m(t, doc! {"a": ["x"]}));
}

#[test]
fn object_keywords_check_required_properties_and_counts() {
    let s = doc! {"required": ["a"], "properties": {"a": {"bsonType": "int"}, "b": {"properties": {"c": {"enum": [1, 2]}}}}};
    assert!(m(s.clone(), doc! {"a": 1, "b": {"c": 2}}));
    assert!(!m(s.clone(), doc! {"b": {"c": 2}}));
    assert!(!m(s.clone(), doc! {"a": 1, "b": {"c": 3}}));
    assert!(m(s, doc! {"a": 1, "b": [1]}));
    assert!(!m(doc! {"minProperties": 3}, doc! {"_id": 1, "a": 1}));
    assert!(!m(doc! {"maxProperties": 1}, doc! {"_id": 1, "a": 1}));
}

#[test]
fn additional_and_pattern_properties_govern_unnamed_fields() {
    let s = doc! {"properties": {"_id": {}, "a": {}}, "patternProperties": {"^x": {"bsonType": "int"}}, "additionalProperties": false};
    assert!(m(s.clone(), doc! {"_id": 1, "a": "x", "x1": 2}));
    assert!(!m(s.clone(), doc! {"_id": 1, "x1": "no"}));
    assert!(!m(s, doc! {"_id": 1, "b": 1}));
    let t = doc! {"properties": {"_id": {}}, "additionalProperties": {"bsonType": "string"}};
    assert!(m(t.clone(), doc! {"_id": 1, "a": "x"}));
    assert!(!m(t, doc! {"_id": 1, "a": 1}));
}

#[test]
fn dependencies_apply_when_the_property_is_present() {
    let s = doc! {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}};
    assert!(m(s.clone(), doc! {"x": 1}));
    assert!(m(s.clone(), doc! {"a": 1, "b": 1}));
    assert!(!m(s.clone(), doc! {"a": 1}));
    assert!(!m(s, doc! {"c": 1}));
}

#[test]
fn logical_keywords_combine_subschemas() {
    let a = |s: Document| doc! {"properties": {"a": s}};
    let one = a(doc! {"oneOf": [{"minimum": 1}, {"maximum": 3}]});
    assert!(m(one.clone(), doc! {"a": 5}));
    assert!(!m(one, doc! {"a": 2}));
    assert!(m(
        a(doc! {"anyOf": [{"bsonType": "string"}, {"minimum": 3}]}),
        doc! {"a": "x"}
    ));
    assert!(!m(
        a(doc! {"allOf": [{"bsonType": "int"}, {"minimum": 3}]}),
        doc! {"a": 2}
    ));
    assert!(!m(a(doc! {"not": {"bsonType": "int"}}), doc! {"a": 2}));
    assert!(m(doc! {"enum": [{"_id": 1}]}, doc! {"_id": 1}));
}

#[test]
fn invalid_schemas_are_refused_with_mongodb_codes() {
    assert_eq!(code(Bson::Int32(1)), 14);
    assert_eq!(code(Bson::Document(doc! {"$ref": "#"})), 9);
    assert_eq!(code(Bson::Document(doc! {"format": "date"})), 9);
    assert_eq!(code(Bson::Document(doc! {"unknownKeyword": 1})), 9);
    assert_eq!(code(Bson::Document(doc! {"type": "integer"})), 2);
    assert_eq!(code(Bson::Document(doc! {"bsonType": "bogus"})), 2);
    assert_eq!(
        code(Bson::Document(
            doc! {"type": "object", "bsonType": "object"}
        )),
        9
    );
    assert_eq!(code(Bson::Document(doc! {"required": []})), 2);
    assert_eq!(code(Bson::Document(doc! {"required": "a"})), 14);
    assert_eq!(code(Bson::Document(doc! {"minimum": "1"})), 14);
    assert_eq!(code(Bson::Document(doc! {"exclusiveMinimum": true})), 9);
    assert_eq!(code(Bson::Document(doc! {"minLength": -1})), 9);
    assert_eq!(code(Bson::Document(doc! {"enum": []})), 9);
    assert_eq!(code(Bson::Document(doc! {"properties": {"a": 1}})), 14);
    assert_eq!(code(Bson::Document(doc! {"allOf": []})), 2);
    let e = Filter::parse(&doc! {"$jsonSchema": {"id": "x"}}).unwrap_err();
    assert_eq!(
        e.to_string(),
        "$jsonSchema keyword 'id' is not currently supported"
    );
}

#[test]
fn json_schema_is_refused_inside_elem_match_but_allowed_under_logical_operators() {
    assert!(Filter::parse(&doc! {"a": {"$elemMatch": {"$jsonSchema": {}}}}).is_err());
    let f = Filter::parse(&doc! {"$or": [{"$jsonSchema": {"required": ["a"]}}, {"b": 1}]}).unwrap();
    assert!(f.matches(&doc! {"b": 1}));
    assert!(!f.matches(&doc! {"c": 1}));
}

#[test]
fn explain_reports_required_type_and_minimum_as_mongodb() {
    let v = doc! {"$jsonSchema": {"required": ["name"], "properties": {"age": {"bsonType": "int", "minimum": 18}}}};
    let d = explain_failure(&v, &doc! {"_id": 1, "age": 10});
    assert_eq!(
        d,
        doc! {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
        {"operatorName": "properties", "propertiesNotSatisfied": [
            {"propertyName": "age", "details": [
                {"operatorName": "minimum", "specifiedAs": {"minimum": 18},
                 "reason": "comparison failed", "consideredValue": 10}]}]},
        {"operatorName": "required", "specifiedAs": {"required": ["name"]},
         "missingProperties": ["name"]}]}
    );
    let t = explain_failure(&v, &doc! {"_id": 1, "name": "x", "age": "old"});
    assert_eq!(
        t.get_array("schemaRulesNotSatisfied").unwrap()[0],
        Bson::Document(
            doc! {"operatorName": "properties", "propertiesNotSatisfied": [
            {"propertyName": "age", "details": [
                {"operatorName": "minimum", "specifiedAs": {"minimum": 18},
                 "reason": "type did not match", "consideredType": "string",
                 "expectedTypes": ["decimal", "double", "int", "long"], "consideredValue": "old"},
                {"operatorName": "bsonType", "specifiedAs": {"bsonType": "int"},
                 "reason": "type did not match", "consideredValue": "old", "consideredType": "string"}]}]}
        )
    );
}

#[test]
fn explain_reports_typed_string_keywords_on_other_types() {
    let v = doc! {"$jsonSchema": {"properties": {"a": {"type": "string", "minLength": 4}}}};
    let d = explain_failure(&v, &doc! {"a": 1});
    assert_eq!(
        d,
        doc! {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
        {"operatorName": "properties", "propertiesNotSatisfied": [
            {"propertyName": "a", "details": [
                {"operatorName": "minLength", "specifiedAs": {"minLength": 4},
                 "reason": "type did not match", "consideredType": "int",
                 "expectedType": "string", "consideredValue": 1},
                {"operatorName": "type", "specifiedAs": {"type": "string"},
                 "reason": "type did not match", "consideredValue": 1, "consideredType": "int"}]}]}]}
    );
}

#[test]
fn explain_reports_additional_properties_enum_and_logical_keywords() {
    let v = doc! {"$jsonSchema": {"properties": {"b": {"enum": [1, 2]}}, "additionalProperties": false}};
    let d = explain_failure(&v, &doc! {"_id": 0, "a": 1, "b": 3});
    assert_eq!(
        d,
        doc! {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
        {"operatorName": "properties", "propertiesNotSatisfied": [
            {"propertyName": "b", "details": [
                {"operatorName": "enum", "specifiedAs": {"enum": [1, 2]},
                 "reason": "value was not found in enum", "consideredValue": 3}]}]},
        {"operatorName": "additionalProperties", "specifiedAs": {"additionalProperties": false},
         "additionalProperties": ["_id", "a"]}]}
    );
    let one =
        doc! {"$jsonSchema": {"properties": {"a": {"oneOf": [{"minimum": 1}, {"maximum": 3}]}}}};
    let d = explain_failure(&one, &doc! {"a": 2});
    let detail = &d.get_array("schemaRulesNotSatisfied").unwrap()[0];
    assert_eq!(
        detail
            .as_document()
            .unwrap()
            .get_array("propertiesNotSatisfied")
            .unwrap()[0],
        Bson::Document(doc! {"propertyName": "a", "details": [
        {"operatorName": "oneOf", "reason": "more than one subschema matched",
         "matchingSchemaIndexes": [0, 1]}]})
    );
}

#[test]
fn explain_reports_plain_query_operators_as_mongodb() {
    let v = doc! {"a": 1};
    assert_eq!(
        explain_failure(&v, &doc! {"_id": 1, "a": 2}),
        doc! {"operatorName": "$eq", "specifiedAs": {"a": 1}, "reason": "comparison failed", "consideredValue": 2}
    );
    let v = doc! {"a": {"$gt": 0, "$lt": 10}};
    assert_eq!(
        explain_failure(&v, &doc! {"a": 11}),
        doc! {"operatorName": "$and", "clausesNotSatisfied": [{"index": 1, "details":
        {"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 10}}, "reason": "comparison failed", "consideredValue": 11}}]}
    );
    assert_eq!(
        explain_failure(&doc! {"a": {"$exists": true}}, &doc! {"b": 1}),
        doc! {"operatorName": "$exists", "specifiedAs": {"a": {"$exists": true}}, "reason": "path does not exist"}
    );
    assert_eq!(
        explain_failure(&doc! {"a": {"$type": "int"}}, &doc! {"a": "one"}),
        doc! {"operatorName": "$type", "specifiedAs": {"a": {"$type": "int"}}, "reason": "type did not match",
        "consideredValue": "one", "consideredType": "string"}
    );
    assert_eq!(
        explain_failure(&doc! {"a": {"$eq": 2}}, &doc! {"b": 1}),
        doc! {"operatorName": "$eq", "specifiedAs": {"a": {"$eq": 2}}, "reason": "field was missing"}
    );
    assert_eq!(
        explain_failure(&doc! {"a": 2}, &doc! {"a": [3, 4]}),
        doc! {"operatorName": "$eq", "specifiedAs": {"a": 2}, "reason": "comparison failed", "consideredValues": [3, 4]}
    );
}

#[test]
fn explain_inverts_under_nor_and_not() {
    assert_eq!(
        explain_failure(
            &doc! {"$nor": [{"a": {"$gt": 10}}, {"b": {"$lt": 10}}]},
            &doc! {"a": 9, "b": 9}
        ),
        doc! {"operatorName": "$nor", "clausesSatisfied": [{"index": 1, "details":
        {"operatorName": "$lt", "specifiedAs": {"b": {"$lt": 10}}, "reason": "comparison succeeded", "consideredValue": 9}}]}
    );
    assert_eq!(
        explain_failure(&doc! {"a": {"$not": {"$lt": 10}}}, &doc! {"a": 9}),
        doc! {"operatorName": "$not", "details":
        {"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 10}}, "reason": "comparison succeeded", "consideredValue": 9}}
    );
    assert_eq!(
        explain_failure(
            &doc! {"$expr": {"$eq": ["$a", "$b"]}},
            &doc! {"a": 1, "b": 2}
        ),
        doc! {"operatorName": "$expr", "specifiedAs": {"$expr": {"$eq": ["$a", "$b"]}},
        "reason": "expression did not match", "expressionResult": false}
    );
}
