use super::*;
use alloc::string::ToString;
use alloc::vec::Vec;
use serde_json::json;

/// (instance path, schema path) of every error of `instance` against `schema`.
fn errors(schema: Value, instance: Value) -> Vec<(String, String)> {
    let schema = Schema::new(&schema).expect("a supported schema");
    let report = schema.validate(&instance).expect("no runaway recursion");
    assert_eq!(report.valid(), report.errors.is_empty());
    // Keywords are evaluated in the schema's member order (sorted by name).
    let mut found: Vec<_> = report
        .errors
        .into_iter()
        .map(|e| (e.instance_path, e.schema_path))
        .collect();
    found.sort();
    found
}

use alloc::string::String;

fn at(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut pairs: Vec<_> = pairs
        .iter()
        .map(|(i, s)| (i.to_string(), s.to_string()))
        .collect();
    pairs.sort();
    pairs
}

#[test]
fn types_including_integer_as_a_number_without_fraction() {
    assert!(errors(json!({"type": "integer"}), json!(1.0)).is_empty());
    assert_eq!(
        errors(json!({"type": "integer"}), json!(1.5)),
        at(&[("", "/type")])
    );
    assert!(errors(json!({"type": "number"}), json!(3)).is_empty());
    assert!(errors(json!({"type": ["null", "string"]}), json!(null)).is_empty());
    assert_eq!(
        errors(json!({"type": ["null", "string"]}), json!(false)),
        at(&[("", "/type")])
    );
    assert!(errors(json!(true), json!({"x": 1})).is_empty());
    assert_eq!(errors(json!(false), json!(1)), at(&[("", "")]));
}

#[test]
fn enum_and_const_compare_numbers_by_value() {
    assert!(errors(json!({"enum": [1, "a", {"b": [2.0]}]}), json!({"b": [2]})).is_empty());
    assert_eq!(
        errors(json!({"enum": [1, "a"]}), json!("b")),
        at(&[("", "/enum")])
    );
    assert!(errors(json!({"const": 1}), json!(1.0)).is_empty());
    assert_eq!(
        errors(json!({"const": [1]}), json!([1, 1])),
        at(&[("", "/const")])
    );
}

#[test]
fn objects_properties_required_additional() {
    let schema = json!({
        "type": "object",
        "properties": {"a/b": {"type": "string"}, "n": {"minimum": 0}, "z": {}},
        "required": ["a/b", "z"],
        "additionalProperties": false
    });
    let found = errors(schema.clone(), json!({"a/b": 1, "n": -1, "extra": true}));
    assert_eq!(
        found,
        at(&[
            ("/a~1b", "/properties/a~1b/type"),
            ("/n", "/properties/n/minimum"),
            ("", "/required"),
            ("/extra", "/additionalProperties"),
        ])
    );
    assert!(errors(schema, json!({"a/b": "x", "z": null})).is_empty());
    let typed = json!({"additionalProperties": {"type": "integer"}});
    assert_eq!(
        errors(typed, json!({"a": 1, "b": "x"})),
        at(&[("/b", "/additionalProperties/type")])
    );
}

#[test]
fn arrays_prefix_items_items_counts_unique() {
    let schema = json!({
        "prefixItems": [{"type": "string"}, {"type": "boolean"}],
        "items": {"type": "integer"},
        "minItems": 2, "maxItems": 4, "uniqueItems": true
    });
    assert!(errors(schema.clone(), json!(["a", true, 1, 2])).is_empty());
    assert_eq!(
        errors(schema.clone(), json!([1, true, 1.5])),
        at(&[("/0", "/prefixItems/0/type"), ("/2", "/items/type")])
    );
    assert_eq!(
        errors(schema.clone(), json!(["a"])),
        at(&[("", "/minItems")])
    );
    assert_eq!(
        errors(schema.clone(), json!(["a", true, 1, 2, 3])),
        at(&[("", "/maxItems")])
    );
    assert_eq!(
        errors(schema, json!(["a", true, 1, 1.0])),
        at(&[("", "/uniqueItems")])
    );
}

#[test]
fn numbers_bounds_and_multiples() {
    let schema = json!({"minimum": 1, "exclusiveMaximum": 10, "multipleOf": 3});
    assert!(errors(schema.clone(), json!(9)).is_empty());
    assert_eq!(
        errors(schema.clone(), json!(-1)),
        at(&[("", "/minimum"), ("", "/multipleOf")])
    );
    assert_eq!(errors(schema.clone(), json!(0)), at(&[("", "/minimum")]));
    assert_eq!(
        errors(schema.clone(), json!(12)),
        at(&[("", "/exclusiveMaximum")])
    );
    assert!(errors(json!({"multipleOf": 0.5}), json!(2.5)).is_empty());
    assert_eq!(
        errors(json!({"multipleOf": 0.5}), json!(2.25)),
        at(&[("", "/multipleOf")])
    );
    assert_eq!(
        errors(json!({"exclusiveMinimum": 1.5}), json!(1.5)),
        at(&[("", "/exclusiveMinimum")])
    );
    assert!(errors(
        json!({"maximum": 18446744073709551615u64}),
        json!(18446744073709551615u64)
    )
    .is_empty());
    assert!(errors(json!({"minimum": -1}), json!("not a number")).is_empty());
}

#[test]
fn string_lengths_count_characters() {
    let schema = json!({"minLength": 2, "maxLength": 3});
    assert!(errors(schema.clone(), json!("été")).is_empty());
    assert_eq!(
        errors(schema.clone(), json!("é")),
        at(&[("", "/minLength")])
    );
    assert_eq!(errors(schema, json!("abcd")), at(&[("", "/maxLength")]));
}

#[test]
fn combinators() {
    let all = json!({"allOf": [{"type": "integer"}, {"minimum": 5}]});
    assert_eq!(
        errors(all, json!(2.5)),
        at(&[("", "/allOf/0/type"), ("", "/allOf/1/minimum")])
    );
    let any = json!({"anyOf": [{"type": "string"}, {"minimum": 5}]});
    assert!(errors(any.clone(), json!(7)).is_empty());
    assert_eq!(errors(any, json!(1)), at(&[("", "/anyOf")]));
    let one = json!({"oneOf": [{"type": "integer"}, {"minimum": 5}]});
    assert!(errors(one.clone(), json!(1)).is_empty());
    assert!(errors(one.clone(), json!(5.5)).is_empty());
    assert_eq!(errors(one.clone(), json!(7)), at(&[("", "/oneOf")]));
    assert_eq!(errors(one, json!(1.5)), at(&[("", "/oneOf")]));
    assert_eq!(
        errors(json!({"not": {"type": "null"}}), json!(null)),
        at(&[("", "/not")])
    );
    assert!(errors(json!({"not": {"type": "null"}}), json!(0)).is_empty());
}

#[test]
fn local_references_recurse_through_the_instance() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"node": {"type": "object", "properties": {
            "value": {"type": "integer"},
            "next": {"$ref": "#/$defs/node"}
        }}},
        "$ref": "#/$defs/node"
    });
    let list = json!({"value": 1, "next": {"value": 2, "next": {"value": "3"}}});
    assert_eq!(
        errors(schema, list),
        at(&[(
            "/next/next/value",
            "/$ref/properties/next/$ref/properties/next/$ref/properties/value/type"
        )])
    );
}

#[test]
fn a_reference_cycle_that_consumes_nothing_is_refused_not_overflowed() {
    let root = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
    let schema = Schema::new(&root).unwrap();
    assert!(matches!(
        schema.validate(&json!(1)),
        Err(SchemaError::TooDeep { .. })
    ));
}

#[test]
fn unsupported_and_malformed_keywords_are_refused() {
    let refused = |schema: Value| Schema::new(&schema).unwrap_err().to_string();
    assert_eq!(
        refused(json!({"properties": {"a": {"pattern": "^x"}}})),
        "unsupported keyword `pattern` at `/properties/a`"
    );
    assert_eq!(
        refused(json!({"allOf": [{"$id": "x"}]})),
        "unsupported keyword `$id` at `/allOf/0`"
    );
    assert!(refused(json!({"$ref": "other.json#/a"})).starts_with("`$ref` `other.json#/a` at ``"));
    assert!(refused(json!({"$ref": "#/$defs/none"})).contains("names nothing"));
    assert!(refused(json!({"items": [{}]})).starts_with("`items` at `` must be one schema"));
    assert!(refused(json!({"minLength": -1})).starts_with("`minLength` at `` must be"));
    assert!(refused(json!({"type": "float"})).starts_with("`type` at `` must be"));
    assert!(refused(json!({"multipleOf": 0})).starts_with("`multipleOf`"));
    assert!(refused(json!({"anyOf": []})).starts_with("`anyOf`"));
    assert!(refused(json!({"not": 3})).contains("`/not` is neither"));
    assert!(refused(json!(1)).contains("`` is neither"));
}

#[test]
fn the_report_is_json() {
    let root = json!({"required": ["a"]});
    let schema = Schema::new(&root).unwrap();
    let report = schema.validate(&json!({})).unwrap();
    assert_eq!(
        report.to_json(),
        json!({"valid": false, "errors": [{"instance_path": "", "schema_path": "/required",
            "message": "required property `a` is missing"}]})
    );
    let ok = schema.validate(&json!({"a": 1})).unwrap();
    assert_eq!(ok.to_json(), json!({"valid": true, "errors": []}));
}
