//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded into
//! the JSON objects the rest of the server handles.
//!
//! kubectl 1.32+ sends protobuf for `create namespace|configmap|secret|deployment|…`. The body
//! is the `k8s\0` magic followed by a `runtime.Unknown` envelope whose `raw` field holds the
//! object's message. Decoding is generic: `data/protobuf-fields.json` (generated from the
//! k8s-pb crate by `tools/gen-protobuf-fields.py`) gives each message's fields by tag, and JSON
//! names come from the OpenAPI schema of the same definition. The well-known wrapper messages
//! (Time, MicroTime, Quantity, IntOrString, Duration, RawExtension, FieldsV1) map to their JSON
//! forms. Responses stay JSON. Malformed input is an error, never a panic.

use std::collections::HashMap;
use std::sync::LazyLock;
use tessera_model::json::Pointer as _;

use base64::Engine;
use serde_json::{Map, Value, json};

use tessera_model::schema;

use crate::error::ApiError;

/// The magic prefix of Kubernetes protobuf bodies.
pub const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Bool,
    Int32,
    Int64,
    Double,
    Bytes,
    Message,
    Map,
}

#[derive(Debug)]
struct Field {
    name: String,
    kind: Kind,
    repeated: bool,
    /// Message type (for messages and message-valued maps) or map value kind.
    target: Option<String>,
}

type Messages = HashMap<String, HashMap<u64, Field>>;

static MESSAGES: LazyLock<Messages> = LazyLock::new(|| {
    static TABLE: &str = include_str!("../data/protobuf-fields.json");
    let mut messages = Messages::new();
    let Ok(Value::Object(mut root)) = serde_json::from_str::<Value>(TABLE) else {
        return messages;
    };
    let Some(Value::Object(table)) = root.remove("messages") else {
        return messages;
    };
    for (message, fields) in table {
        let Value::Object(fields) = fields else {
            continue;
        };
        let mut by_tag = HashMap::new();
        for (tag, spec) in fields {
            let (Ok(tag), Some(spec)) = (tag.parse::<u64>(), spec.as_array()) else {
                continue;
            };
            let kind = match spec.get(1).and_then(Value::as_str) {
                Some("string") => Kind::String,
                Some("bool") => Kind::Bool,
                Some("int32") => Kind::Int32,
                Some("int64") => Kind::Int64,
                Some("double") => Kind::Double,
                Some("bytes") => Kind::Bytes,
                Some("message") => Kind::Message,
                Some("map") => Kind::Map,
                _ => continue,
            };
            by_tag.insert(
                tag,
                Field {
                    name: spec
                        .first()
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    kind,
                    repeated: spec.get(2).and_then(Value::as_bool).unwrap_or(false),
                    target: spec.get(3).and_then(Value::as_str).map(str::to_string),
                },
            );
        }
        messages.insert(message, by_tag);
    }
    messages
});

fn error(detail: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "the body of the request could not be decoded as protobuf: {detail}"
    ))
}

/// A cursor over protobuf wire data.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, position: 0 }
    }

    fn done(&self) -> bool {
        self.position >= self.bytes.len()
    }

    fn varint(&mut self) -> Result<u64, ApiError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .bytes
                .get(self.position)
                .ok_or_else(|| error("truncated varint"))?;
            self.position += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(error("varint longer than 10 bytes"))
    }

    fn take(&mut self, length: usize) -> Result<&'a [u8], ApiError> {
        let end = self
            .position
            .checked_add(length)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| error("truncated field"))?;
        let slice = &self.bytes[self.position..end];
        self.position = end;
        Ok(slice)
    }

    fn length_delimited(&mut self) -> Result<&'a [u8], ApiError> {
        let length = usize::try_from(self.varint()?).map_err(|_| error("field too long"))?;
        self.take(length)
    }

    /// The next (tag, wire type) key.
    fn key(&mut self) -> Result<(u64, u8), ApiError> {
        let key = self.varint()?;
        Ok((key >> 3, (key & 7) as u8))
    }

    fn skip(&mut self, wire_type: u8) -> Result<(), ApiError> {
        match wire_type {
            0 => self.varint().map(drop),
            1 => self.take(8).map(drop),
            2 => self.length_delimited().map(drop),
            5 => self.take(4).map(drop),
            other => Err(error(format!("unsupported wire type {other}"))),
        }
    }
}

/// A decoded field value before it is placed in its object.
fn scalar(kind: Kind, wire_type: u8, reader: &mut Reader<'_>) -> Result<Value, ApiError> {
    Ok(match (kind, wire_type) {
        (Kind::String, 2) => {
            let bytes = reader.length_delimited()?;
            json!(std::str::from_utf8(bytes).map_err(|_| error("a string field is not UTF-8"))?)
        }
        (Kind::Bytes, 2) => {
            json!(base64::engine::general_purpose::STANDARD.encode(reader.length_delimited()?))
        }
        (Kind::Bool, 0) => json!(reader.varint()? != 0),
        (Kind::Int32, 0) => json!(reader.varint()? as i32),
        (Kind::Int64, 0) => json!(reader.varint()? as i64),
        (Kind::Double, 1) => {
            let bytes = reader.take(8)?;
            let mut array = [0u8; 8];
            array.copy_from_slice(bytes);
            json!(f64::from_le_bytes(array))
        }
        (kind, wire_type) => {
            return Err(error(format!(
                "wire type {wire_type} does not fit a {kind:?} field"
            )));
        }
    })
}

fn normalized(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn lower_camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The JSON name of a field: the schema property whose name matches the protobuf field.
fn json_name(message: &str, field: &str) -> String {
    let wanted = normalized(field);
    schema::definition(message)
        .and_then(|d| d.get("properties"))
        .and_then(Value::as_object)
        .and_then(|properties| properties.keys().find(|p| normalized(p) == wanted).cloned())
        .unwrap_or_else(|| lower_camel(field))
}

const MAX_DEPTH: usize = 64;

/// Decodes one message of a definition into its JSON form.
fn message(definition: &str, bytes: &[u8], depth: usize) -> Result<Value, ApiError> {
    if depth > MAX_DEPTH {
        return Err(error("messages nested too deeply"));
    }
    let fields = MESSAGES
        .get(definition)
        .ok_or_else(|| error(format!("unknown message {definition}")))?;
    let mut object = Map::new();
    let mut reader = Reader::new(bytes);
    while !reader.done() {
        let (tag, wire_type) = reader.key()?;
        let Some(field) = fields.get(&tag) else {
            reader.skip(wire_type)?;
            continue;
        };
        let name = json_name(definition, &field.name);
        match field.kind {
            Kind::Message => {
                if wire_type != 2 {
                    return Err(error(format!("field {name} must be length-delimited")));
                }
                let target = field.target.as_deref().unwrap_or_default();
                let value = message(target, reader.length_delimited()?, depth + 1)?;
                if value.is_null() {
                    continue;
                }
                place(&mut object, name, value, field.repeated);
            }
            Kind::Map => {
                if wire_type != 2 {
                    return Err(error(format!("map field {name} must be length-delimited")));
                }
                let entry = reader.length_delimited()?;
                let (key, value) =
                    map_entry(entry, field.target.as_deref().unwrap_or("string"), depth)?;
                let map = object.entry(name).or_insert_with(|| json!({}));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
            kind if field.repeated
                && wire_type == 2
                && kind != Kind::String
                && kind != Kind::Bytes =>
            {
                // A packed repeated scalar.
                let mut packed = Reader::new(reader.length_delimited()?);
                let wire = if kind == Kind::Double { 1 } else { 0 };
                while !packed.done() {
                    let value = scalar(kind, wire, &mut packed)?;
                    place(&mut object, name.clone(), value, true);
                }
            }
            kind => {
                let value = scalar(kind, wire_type, &mut reader)?;
                if !field.repeated && is_go_zero(&value) && !keeps_zero(definition, &name) {
                    // Go marshals non-pointer fields even when zero; zero means unset.
                    continue;
                }
                place(&mut object, name, value, field.repeated);
            }
        }
    }
    Ok(well_known(definition, Value::Object(object)))
}

fn is_go_zero(value: &Value) -> bool {
    match value {
        Value::String(text) => text.is_empty(),
        Value::Bool(flag) => !flag,
        Value::Number(number) => number.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Pointer fields (or required ones) where an explicit zero differs from unset.
fn keeps_zero(definition: &str, field: &str) -> bool {
    matches!(
        (definition.rsplit('.').next().unwrap_or_default(), field),
        (
            "DeploymentSpec" | "ReplicaSetSpec" | "StatefulSetSpec" | "ReplicationControllerSpec",
            "replicas"
        ) | ("PriorityClass", "value")
            | (
                "JobSpec",
                "parallelism"
                    | "completions"
                    | "backoffLimit"
                    | "suspend"
                    | "activeDeadlineSeconds"
            )
            | ("CronJobSpec", "suspend")
            | (
                "PodSpec",
                "terminationGracePeriodSeconds"
                    | "enableServiceLinks"
                    | "automountServiceAccountToken"
            )
            | ("ServiceAccount", "automountServiceAccountToken")
            | ("IntOrString", _)
            | ("ConfigMap" | "Secret", "immutable")
            | ("Scale" | "ScaleSpec", "replicas")
    )
}

fn place(object: &mut Map<String, Value>, name: String, value: Value, repeated: bool) {
    if repeated {
        match object.entry(name).or_insert_with(|| json!([])) {
            Value::Array(items) => items.push(value),
            other => *other = json!([value]),
        }
    } else {
        object.insert(name, value);
    }
}

fn map_entry(bytes: &[u8], value_kind: &str, depth: usize) -> Result<(String, Value), ApiError> {
    let mut reader = Reader::new(bytes);
    let mut key = String::new();
    let mut value = match value_kind {
        "string" | "bytes" => json!(""),
        _ => json!({}),
    };
    while !reader.done() {
        let (tag, wire_type) = reader.key()?;
        match (tag, wire_type) {
            (1, 2) => {
                key = std::str::from_utf8(reader.length_delimited()?)
                    .map_err(|_| error("a map key is not UTF-8"))?
                    .to_string();
            }
            (2, 2) => {
                value = match value_kind {
                    "string" => scalar(Kind::String, 2, &mut reader)?,
                    "bytes" => scalar(Kind::Bytes, 2, &mut reader)?,
                    definition => message(definition, reader.length_delimited()?, depth + 1)?,
                };
            }
            (_, wire_type) => reader.skip(wire_type)?,
        }
    }
    Ok((key, value))
}

/// The JSON form of the wrapper messages that are not plain objects in JSON.
fn well_known(definition: &str, value: Value) -> Value {
    let int = |field: &str| value.get(field).and_then(Value::as_i64).unwrap_or(0);
    match definition {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
        | "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime" => {
            let seconds = int("seconds");
            let nanos = int("nanos");
            let time = std::time::SystemTime::UNIX_EPOCH
                + std::time::Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
                + std::time::Duration::from_nanos(u64::try_from(nanos).unwrap_or(0));
            if seconds == 0 && nanos == 0 {
                // Go's zero Time marshals as null.
                return Value::Null;
            }
            if definition.ends_with("MicroTime") {
                json!(tessera_model::time::micro_timestamp(time))
            } else {
                json!(tessera_model::time::timestamp(time))
            }
        }
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => {
            value.get("string").cloned().unwrap_or(json!("0"))
        }
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => {
            if int("type") == 1 {
                value.get("strVal").cloned().unwrap_or(json!(""))
            } else {
                json!(int("intVal"))
            }
        }
        "io.k8s.apimachinery.pkg.apis.meta.v1.Duration" => {
            json!(format!("{}s", int("duration") as f64 / 1e9))
        }
        "io.k8s.apimachinery.pkg.runtime.RawExtension"
        | "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1" => {
            let raw = value
                .get("raw")
                .or_else(|| value.get("Raw"))
                .and_then(Value::as_str)
                .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
                .and_then(|bytes| serde_json::from_slice(&bytes).ok());
            raw.unwrap_or(json!({}))
        }
        _ => value,
    }
}

/// The OpenAPI definition of a group/version/kind's message.
fn definition_of(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let package = match group {
        "" => "api.core".to_string(),
        "apiextensions.k8s.io" => "apiextensions-apiserver.pkg.apis.apiextensions".to_string(),
        group => format!("api.{}", group.split('.').next().unwrap_or(group)),
    };
    format!("io.k8s.{package}.{version}.{kind}")
}

/// Decodes a protobuf request body into a JSON object with `apiVersion` and `kind`.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| error("missing the k8s\\0 prefix"))?;
    let unknown = message("io.k8s.apimachinery.pkg.runtime.Unknown", envelope, 0)?;
    let api_version = unknown
        .at("/typeMeta/apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let kind = unknown
        .at("/typeMeta/kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let raw = unknown
        .get("raw")
        .and_then(Value::as_str)
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .unwrap_or_default();
    let definition = definition_of(&api_version, &kind);
    if !MESSAGES.contains_key(&definition) {
        return Err(ApiError::unsupported_media_type(&format!(
            "application/vnd.kubernetes.protobuf for {api_version}, Kind={kind}"
        )));
    }
    let mut object = message(&definition, &raw, 0)?;
    if let Value::Object(map) = &mut object {
        map.insert("apiVersion".into(), json!(api_version));
        map.insert("kind".into(), json!(kind));
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn varint(mut value: u64, out: &mut Vec<u8>) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    fn field(tag: u64, payload: &[u8], out: &mut Vec<u8>) {
        varint(tag << 3 | 2, out);
        varint(payload.len() as u64, out);
        out.extend_from_slice(payload);
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut type_meta = Vec::new();
        field(1, api_version.as_bytes(), &mut type_meta);
        field(2, kind.as_bytes(), &mut type_meta);
        let mut unknown = Vec::new();
        field(1, &type_meta, &mut unknown);
        field(2, raw, &mut unknown);
        let mut body = MAGIC.to_vec();
        body.extend(unknown);
        body
    }

    #[test]
    fn decodes_a_config_map_like_kubectl_sends_it() {
        // ConfigMap{metadata{name: "demo", labels{app: web}}, data{mode: fast}}
        let mut label = Vec::new();
        field(1, b"app", &mut label);
        field(2, b"web", &mut label);
        let mut meta = Vec::new();
        field(1, b"demo", &mut meta);
        field(11, &label, &mut meta);
        let mut entry = Vec::new();
        field(1, b"mode", &mut entry);
        field(2, b"fast", &mut entry);
        let mut config_map = Vec::new();
        field(1, &meta, &mut config_map);
        field(2, &entry, &mut config_map);
        let object = decode(&envelope("v1", "ConfigMap", &config_map)).unwrap();
        assert_eq!(
            object,
            json!({"metadata": {"name": "demo", "labels": {"app": "web"}}, "data": {"mode": "fast"},
                   "apiVersion": "v1", "kind": "ConfigMap"})
        );
    }

    #[test]
    fn decodes_scalars_lists_and_wrappers_with_schema_names() {
        // Deployment{spec{replicas: 3, template{spec{containers[{name: c, image: i, ports[{containerPort: 80}]}],
        // hostIPC: true}}, strategy{rollingUpdate{maxSurge(IntOrString str "25%")}}}}
        let mut port = Vec::new();
        varint(3 << 3, &mut port);
        varint(80, &mut port);
        let mut container = Vec::new();
        field(1, b"c", &mut container);
        field(2, b"i", &mut container);
        field(6, &port, &mut container);
        let mut pod_spec = Vec::new();
        field(2, &container, &mut pod_spec);
        varint(13 << 3, &mut pod_spec);
        varint(1, &mut pod_spec);
        let mut template = Vec::new();
        field(2, &pod_spec, &mut template);
        let mut surge = Vec::new();
        varint(1 << 3, &mut surge);
        varint(1, &mut surge);
        field(3, b"25%", &mut surge);
        let mut rolling = Vec::new();
        field(2, &surge, &mut rolling);
        let mut strategy = Vec::new();
        field(2, &rolling, &mut strategy);
        let mut spec = Vec::new();
        varint(1 << 3, &mut spec);
        varint(3, &mut spec);
        field(3, &template, &mut spec);
        field(4, &strategy, &mut spec);
        let mut deployment = Vec::new();
        field(2, &spec, &mut deployment);
        let object = decode(&envelope("apps/v1", "Deployment", &deployment)).unwrap();
        assert_eq!(object["spec"]["replicas"], 3);
        assert_eq!(object["spec"]["template"]["spec"]["hostIPC"], true);
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
            80
        );
        assert_eq!(
            object["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
            "25%"
        );
    }

    #[test]
    fn rejects_bodies_that_are_not_kubernetes_protobuf() {
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
        assert_eq!(decode(b"k8s\0\x0a\xff").unwrap_err().code, 400);
        let unknown_kind = envelope("example.com/v1", "Widget", b"");
        assert_eq!(decode(&unknown_kind).unwrap_err().code, 415);
    }

    proptest! {
        /// No byte string makes the decoder panic.
        #[test]
        fn decoding_never_panics(body in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut prefixed = MAGIC.to_vec();
            prefixed.extend(&body);
            let _ = decode(&prefixed);
            let _ = message("io.k8s.api.core.v1.Pod", &body, 0);
        }
    }
}
