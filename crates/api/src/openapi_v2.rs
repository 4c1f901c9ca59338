//! `/openapi/v2`: the Swagger 2.0 document of every served kind, as JSON and as the gnostic
//! protobuf (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) that kubectl
//! 1.27–1.29 fetch before `apply` (field-validation support, strategic-merge metadata) and that
//! older `explain` reads.
//!
//! The definitions are the model's OpenAPI v3 schemas rewritten the Swagger 2.0 way (references
//! under `#/definitions/`, no `allOf` wrapper around a lone reference, one type per schema); the
//! paths carry each kind's operations with `x-kubernetes-group-version-kind` and the
//! `fieldValidation` query parameter. Knows nothing about HTTP or caching.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use tessera_model::kinds::KindInfo;
use tessera_model::schema;

use crate::openapi::{close_over_references, collection_path, custom_definition};

/// The Content-Type the protobuf form is answered with. Clients ask for it as
/// `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, but that is no valid media
/// type for Go's `mime` parser (the `@`), and upstream's handler answers through
/// `http.ServeContent`, which labels the bytes as sniffed: `application/octet-stream`.
pub const PROTOBUF_CONTENT_TYPE: &str = "application/octet-stream";

/// Whether an Accept header asks for the protobuf form.
pub fn wants_protobuf(accept: &str) -> bool {
    accept.contains("application/com.github.proto-openapi.spec.v2")
}

const V2_REF_PREFIX: &str = "#/definitions/";

/// The Swagger 2.0 document of the served kinds.
pub fn document(kinds: &[&'static KindInfo]) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    let mut needed = BTreeSet::new();
    for kind in kinds {
        match custom_definition(kind) {
            Some(definition) => {
                definitions.insert(kind.definition.clone(), to_v2(&definition));
                needed.insert("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".to_string());
            }
            None => {
                needed.insert(kind.definition.clone());
            }
        }
        kind_paths(kind, &mut paths);
    }
    close_over_references(needed, &mut definitions, to_v2);
    definitions
        .entry("io.k8s.apimachinery.pkg.apis.meta.v1.Patch")
        .or_insert_with(|| json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}));
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::KUBERNETES_VERSION},
        "paths": paths,
        "definitions": definitions,
    })
}

/// The collection and item paths of one kind, with upstream's operation shapes.
fn kind_paths(kind: &KindInfo, paths: &mut Map<String, Value>) {
    let collection = collection_path(kind);
    let gvk = json!({"group": kind.group, "version": kind.version, "kind": kind.kind});
    let reference = json!({"$ref": format!("{V2_REF_PREFIX}{}", kind.definition)});
    let ok = json!({"200": {"description": "OK", "schema": reference}});
    let field_validation = json!({"uniqueItems": true, "type": "string", "name": "fieldValidation", "in": "query",
        "description": "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn (default) - Strict"});
    let body = json!({"name": "body", "in": "body", "required": true, "schema": reference});
    let patch_body = json!({"name": "body", "in": "body", "required": true,
        "schema": {"$ref": format!("{V2_REF_PREFIX}io.k8s.apimachinery.pkg.apis.meta.v1.Patch")}});
    let operation = |verb: &str, action: &str, parameters: Vec<Value>| {
        json!({
            "operationId": format!("{verb}{}", kind.kind),
            "consumes": ["*/*"],
            "produces": ["application/json", "application/yaml"],
            "schemes": ["https"],
            "parameters": parameters,
            "responses": ok,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
        })
    };
    paths.insert(
        format!("{collection}/{{name}}"),
        json!({
            "get": operation("read", "get", vec![]),
            "put": operation("replace", "put", vec![body.clone(), field_validation.clone()]),
            "patch": operation("patch", "patch", vec![patch_body, field_validation.clone()]),
            "delete": operation("delete", "delete", vec![]),
        }),
    );
    paths.insert(
        collection,
        json!({
            "get": operation("list", "list", vec![]),
            "post": operation("create", "post", vec![body, field_validation]),
        }),
    );
}

/// A v3 schema rewritten for Swagger 2.0.
fn to_v2(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            // `allOf: [{$ref}]` (how v3 attaches a description to a reference) is a plain
            // reference in v2.
            if let Some([only]) = map
                .get("allOf")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                && only.get("$ref").is_some()
            {
                let mut reference = to_v2(only);
                if let (Some(description), Some(target)) =
                    (map.get("description"), reference.as_object_mut())
                {
                    target.insert("description".into(), description.clone());
                }
                return reference;
            }
            let mut out = Map::new();
            for (key, inner) in map {
                match key.as_str() {
                    "$ref" => {
                        let name = inner
                            .as_str()
                            .and_then(|r| r.strip_prefix(schema::REF_PREFIX))
                            .unwrap_or_default();
                        out.insert(key.clone(), json!(format!("{V2_REF_PREFIX}{name}")));
                    }
                    "nullable" | "anyOf" | "oneOf" | "not" => {}
                    "type" => {
                        if let Some(single) = single_type(inner) {
                            out.insert(key.clone(), json!(single));
                        }
                    }
                    "properties" => {
                        let properties = inner
                            .as_object()
                            .map(|p| p.iter().map(|(k, v)| (k.clone(), to_v2(v))).collect())
                            .unwrap_or_default();
                        out.insert(key.clone(), Value::Object(properties));
                    }
                    // Values, not schemas: copied as they are.
                    "default" | "enum" | "example" | "required" => {
                        out.insert(key.clone(), inner.clone());
                    }
                    _ if key.starts_with("x-") => {
                        out.insert(key.clone(), inner.clone());
                    }
                    _ => {
                        out.insert(key.clone(), to_v2(inner));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(to_v2).collect()),
        other => other.clone(),
    }
}

/// One type name: v2 allows no type lists, so `["string", "null"]` is `string`.
fn single_type(value: &Value) -> Option<&str> {
    match value {
        Value::String(text) => Some(text),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null"),
        _ => None,
    }
}

/// The document in gnostic's `openapi.v2.Document` protobuf encoding.
pub fn to_protobuf(document: &Value) -> Vec<u8> {
    let mut message = Writer::default();
    message.string(1, text(document, "swagger"));
    let mut info = Writer::default();
    info.string(1, text(&document["info"], "title"));
    info.string(2, text(&document["info"], "version"));
    message.message(2, info);
    let mut paths = Writer::default();
    for (name, item) in entries(&document["paths"]) {
        paths.message(2, named(name, path_item(item)));
    }
    message.message(8, paths);
    let mut definitions = Writer::default();
    for (name, definition) in entries(&document["definitions"]) {
        definitions.message(1, named(name, encode_schema(definition)));
    }
    message.message(9, definitions);
    message.bytes
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn entries(value: &Value) -> impl Iterator<Item = (&String, &Value)> {
    value.as_object().into_iter().flatten()
}

/// A `Named*` message: `name = 1`, `value = 2`.
fn named(name: &str, value: Writer) -> Writer {
    let mut entry = Writer::default();
    entry.string(1, name);
    entry.message(2, value);
    entry
}

/// gnostic's `Any`: the value as YAML text (JSON is YAML).
fn any(value: &Value) -> Writer {
    let mut message = Writer::default();
    message.string(2, &value.to_string());
    message
}

fn vendor_extensions(writer: &mut Writer, field: u32, object: &Value) {
    for (name, value) in entries(object).filter(|(k, _)| k.starts_with("x-")) {
        writer.message(field, named(name, any(value)));
    }
}

fn path_item(item: &Value) -> Writer {
    let mut message = Writer::default();
    for (field, verb) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (8, "patch"),
    ] {
        if let Some(op) = item.get(verb) {
            message.message(field, operation(op));
        }
    }
    message
}

fn operation(op: &Value) -> Writer {
    let mut message = Writer::default();
    message.string(5, text(op, "operationId"));
    for (field, key) in [(6, "produces"), (7, "consumes")] {
        for value in strings(op, key) {
            message.string(field, value);
        }
    }
    for parameter in op
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        message.message(8, parameters_item(parameter));
    }
    let mut responses = Writer::default();
    for (code, response) in entries(&op["responses"]) {
        let mut body = Writer::default();
        body.string(1, text(response, "description"));
        if let Some(schema) = response.get("schema") {
            let mut item = Writer::default();
            item.message(1, encode_schema(schema));
            body.message(2, item);
        }
        let mut value = Writer::default();
        value.message(1, body);
        responses.message(1, named(code, value));
    }
    message.message(9, responses);
    for value in strings(op, "schemes") {
        message.string(10, value);
    }
    vendor_extensions(&mut message, 13, op);
    message
}

fn strings<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a str> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// `ParametersItem { Parameter { BodyParameter | NonBodyParameter { Query… | Path… } } }`.
fn parameters_item(parameter: &Value) -> Writer {
    let mut inner = Writer::default();
    if text(parameter, "in") == "body" {
        let mut body = Writer::default();
        body.string(1, text(parameter, "description"));
        body.string(2, text(parameter, "name"));
        body.string(3, "body");
        body.bool(4, parameter["required"].as_bool().unwrap_or(false));
        if let Some(schema) = parameter.get("schema") {
            body.message(5, encode_schema(schema));
        }
        inner.message(1, body);
    } else {
        // Query and path sub-schemas share their first fields' numbering.
        let mut sub = Writer::default();
        sub.bool(1, parameter["required"].as_bool().unwrap_or(false));
        sub.string(2, text(parameter, "in"));
        sub.string(3, text(parameter, "description"));
        sub.string(4, text(parameter, "name"));
        let (field, unique_items_field) = if text(parameter, "in") == "path" {
            sub.string(5, text(parameter, "type"));
            (4, 19)
        } else {
            sub.string(6, text(parameter, "type"));
            (3, 20)
        };
        sub.bool(
            unique_items_field,
            parameter["uniqueItems"].as_bool().unwrap_or(false),
        );
        let mut non_body = Writer::default();
        non_body.message(field, sub);
        inner.message(2, non_body);
    }
    let mut item = Writer::default();
    item.message(1, inner);
    item
}

/// gnostic's `Schema`.
fn encode_schema(schema: &Value) -> Writer {
    let mut message = Writer::default();
    message.string(1, text(schema, "$ref"));
    message.string(2, text(schema, "format"));
    message.string(3, text(schema, "title"));
    message.string(4, text(schema, "description"));
    if let Some(default) = schema.get("default") {
        message.message(5, any(default));
    }
    for (field, key) in [(6, "multipleOf"), (7, "maximum"), (9, "minimum")] {
        if let Some(number) = schema.get(key).and_then(Value::as_f64) {
            message.double(field, number);
        }
    }
    for (field, key) in [
        (8, "exclusiveMaximum"),
        (10, "exclusiveMinimum"),
        (16, "uniqueItems"),
        (27, "readOnly"),
    ] {
        message.bool(field, schema[key].as_bool().unwrap_or(false));
    }
    for (field, key) in [
        (11, "maxLength"),
        (12, "minLength"),
        (14, "maxItems"),
        (15, "minItems"),
        (17, "maxProperties"),
        (18, "minProperties"),
    ] {
        if let Some(number) = schema.get(key).and_then(Value::as_i64) {
            message.int64(field, number);
        }
    }
    message.string(13, text(schema, "pattern"));
    for value in strings(schema, "required") {
        message.string(19, value);
    }
    for value in schema
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        message.message(20, any(value));
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(allowed)) => {
            let mut item = Writer::default();
            item.oneof_bool(2, *allowed);
            message.message(21, item);
        }
        Some(additional @ Value::Object(_)) => {
            let mut item = Writer::default();
            item.message(1, encode_schema(additional));
            message.message(21, item);
        }
        _ => {}
    }
    if let Some(kind) = schema.get("type").and_then(Value::as_str) {
        let mut type_item = Writer::default();
        type_item.string(1, kind);
        message.message(22, type_item);
    }
    if let Some(items) = schema.get("items") {
        let mut item = Writer::default();
        match items {
            Value::Array(list) => list
                .iter()
                .for_each(|each| item.message(1, encode_schema(each))),
            single => item.message(1, encode_schema(single)),
        }
        message.message(23, item);
    }
    for part in schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        message.message(24, encode_schema(part));
    }
    if let Some(properties) = schema.get("properties") {
        let mut item = Writer::default();
        for (name, property) in entries(properties) {
            item.message(1, named(name, encode_schema(property)));
        }
        message.message(25, item);
    }
    if let Some(example) = schema.get("example") {
        message.message(30, any(example));
    }
    vendor_extensions(&mut message, 31, schema);
    message
}

/// A protobuf message being written (proto3: default scalars are omitted; sub-messages are
/// always written, so an empty `properties` still says "this is an object with properties").
#[derive(Default)]
struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.bytes.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.bytes.push(value as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire_type));
    }

    fn string(&mut self, field: u32, value: &str) {
        if !value.is_empty() {
            self.key(field, 2);
            self.varint(value.len() as u64);
            self.bytes.extend_from_slice(value.as_bytes());
        }
    }

    fn message(&mut self, field: u32, message: Writer) {
        self.key(field, 2);
        self.varint(message.bytes.len() as u64);
        self.bytes.extend_from_slice(&message.bytes);
    }

    fn bool(&mut self, field: u32, value: bool) {
        if value {
            self.oneof_bool(field, true);
        }
    }

    /// A bool inside a `oneof`, written even when false (its presence is the choice).
    fn oneof_bool(&mut self, field: u32, value: bool) {
        self.key(field, 0);
        self.varint(u64::from(value));
    }

    fn int64(&mut self, field: u32, value: i64) {
        if value != 0 {
            self.key(field, 0);
            self.varint(value as u64);
        }
    }

    fn double(&mut self, field: u32, value: f64) {
        if value != 0.0 {
            self.key(field, 1);
            self.bytes.extend_from_slice(&value.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests;
