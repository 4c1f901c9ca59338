//! The Gateway API CustomResourceDefinitions `tessera up` bundles (standard channel):
//! GatewayClass, Gateway and HTTPRoute (`v1`, also served as `v1beta1`), GRPCRoute (`v1`) and
//! ReferenceGrant (`v1beta1`), with upstream's names, short names, scopes, printer columns
//! and the status subresource. Their schemas are structural: the fields the controller reads
//! are typed (and required where upstream requires them); the nested parts keep unknown
//! fields, so upstream's examples apply unchanged. Each carries Tessera's bundle hash so a
//! newer Tessera upgrades what an older one installed.
//!
//! Produces JSON only; installing it is the bootstrap's business.

use serde_json::{Value, json};
use tessera_model::kueue::crd::bundled_definition;

use crate::GROUP;

/// The gateway-api release whose standard channel these follow.
pub const BUNDLE_VERSION: &str = "v1.3.0";

fn free() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn free_list() -> Value {
    json!({"type": "array", "items": free()})
}

fn object_schema(description: &str, spec: Value, spec_required: bool) -> Value {
    let mut schema = json!({
        "description": description,
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": free(),
        },
    });
    if spec_required {
        schema["required"] = json!(["spec"]);
    }
    schema
}

fn route_spec() -> Value {
    json!({
        "type": "object",
        "properties": {
            "parentRefs": {"type": "array", "maxItems": 32, "items": {
                "type": "object", "required": ["name"],
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {
                    "group": {"type": "string"}, "kind": {"type": "string"},
                    "namespace": {"type": "string"}, "name": {"type": "string"},
                    "sectionName": {"type": "string"},
                    "port": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535}
                }}},
            "hostnames": {"type": "array", "maxItems": 16, "items": {"type": "string",
                "maxLength": 253, "minLength": 1,
                "pattern": "^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"}},
            "rules": free_list(),
        },
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

struct Kind {
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short: &'static [&'static str],
    namespaced: bool,
    versions: &'static [&'static str],
    storage: &'static str,
    description: &'static str,
    spec: fn() -> Value,
    columns: fn() -> Value,
}

fn class_spec() -> Value {
    json!({
        "type": "object",
        "required": ["controllerName"],
        "properties": {
            "controllerName": {"type": "string", "minLength": 1, "maxLength": 253,
                "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\\/[A-Za-z0-9\\/\\-._~%!$&'()*+,;=:]+$",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}]},
            "parametersRef": free(),
            "description": {"type": "string", "maxLength": 64},
        },
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

fn gateway_spec() -> Value {
    json!({
        "type": "object",
        "required": ["gatewayClassName", "listeners"],
        "properties": {
            "gatewayClassName": {"type": "string", "minLength": 1, "maxLength": 253},
            "listeners": {
                "type": "array", "minItems": 1, "maxItems": 64,
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["name", "port", "protocol"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": 253,
                            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"},
                        "hostname": {"type": "string", "minLength": 1, "maxLength": 253,
                            "pattern": "^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"},
                        "port": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535},
                        "protocol": {"type": "string", "minLength": 1, "maxLength": 255},
                        "tls": free(),
                        "allowedRoutes": free(),
                    },
                    "x-kubernetes-preserve-unknown-fields": true,
                }
            },
            "addresses": free_list(),
            "infrastructure": free(),
        },
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

fn grant_spec() -> Value {
    json!({
        "type": "object",
        "required": ["from", "to"],
        "properties": {
            "from": {"type": "array", "minItems": 1, "maxItems": 16, "items": {
                "type": "object", "required": ["group", "kind", "namespace"],
                "properties": {"group": {"type": "string"}, "kind": {"type": "string"},
                               "namespace": {"type": "string"}}}},
            "to": {"type": "array", "minItems": 1, "maxItems": 16, "items": {
                "type": "object", "required": ["group", "kind"],
                "properties": {"group": {"type": "string"}, "kind": {"type": "string"},
                               "name": {"type": "string"}}}},
        },
    })
}

fn age() -> Value {
    json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
}

fn class_columns() -> Value {
    json!([
        {"name": "Controller", "type": "string", "jsonPath": ".spec.controllerName"},
        {"name": "Accepted", "type": "string",
         "jsonPath": ".status.conditions[?(@.type==\"Accepted\")].status"},
        age(),
        {"name": "Description", "type": "string", "jsonPath": ".spec.description", "priority": 1},
    ])
}

fn gateway_columns() -> Value {
    json!([
        {"name": "Class", "type": "string", "jsonPath": ".spec.gatewayClassName"},
        {"name": "Address", "type": "string", "jsonPath": ".status.addresses[*].value"},
        {"name": "Programmed", "type": "string",
         "jsonPath": ".status.conditions[?(@.type==\"Programmed\")].status"},
        age(),
    ])
}

fn route_columns() -> Value {
    json!([{"name": "Hostnames", "type": "string", "jsonPath": ".spec.hostnames"}, age()])
}

fn grant_columns() -> Value {
    json!([age()])
}

const KINDS: &[Kind] = &[
    Kind {
        kind: "GatewayClass",
        plural: "gatewayclasses",
        singular: "gatewayclass",
        short: &["gc"],
        namespaced: false,
        versions: &["v1", "v1beta1"],
        storage: "v1",
        description: "GatewayClass describes a class of Gateways available to the user for creating Gateway resources.",
        spec: class_spec,
        columns: class_columns,
    },
    Kind {
        kind: "Gateway",
        plural: "gateways",
        singular: "gateway",
        short: &["gtw"],
        namespaced: true,
        versions: &["v1", "v1beta1"],
        storage: "v1",
        description: "Gateway represents an instance of a service-traffic handling infrastructure by binding Listeners to a set of IP addresses.",
        spec: gateway_spec,
        columns: gateway_columns,
    },
    Kind {
        kind: "HTTPRoute",
        plural: "httproutes",
        singular: "httproute",
        short: &[],
        namespaced: true,
        versions: &["v1", "v1beta1"],
        storage: "v1",
        description: "HTTPRoute provides a way to route HTTP requests.",
        spec: route_spec,
        columns: route_columns,
    },
    Kind {
        kind: "GRPCRoute",
        plural: "grpcroutes",
        singular: "grpcroute",
        short: &[],
        namespaced: true,
        versions: &["v1"],
        storage: "v1",
        description: "GRPCRoute provides a way to route gRPC requests.",
        spec: route_spec,
        columns: route_columns,
    },
    Kind {
        kind: "ReferenceGrant",
        plural: "referencegrants",
        singular: "referencegrant",
        short: &["refgrant"],
        namespaced: true,
        // Served as `v1` too: upstream's newest examples use it.
        versions: &["v1", "v1beta1"],
        storage: "v1beta1",
        description: "ReferenceGrant identifies kinds of resources in other namespaces that are trusted to reference the specified kinds of resources in the same namespace as the policy.",
        spec: grant_spec,
        columns: grant_columns,
    },
];

/// The bundled definitions, each with the bundle hash of its spec
/// ([`tessera_model::kueue::crd::BUNDLE_HASH_ANNOTATION`]).
pub fn definitions() -> Vec<Value> {
    KINDS
        .iter()
        .map(|k| {
            let versions: Vec<Value> = k
                .versions
                .iter()
                .map(|v| {
                    let mut version = json!({
                        "name": v,
                        "served": true,
                        "storage": *v == k.storage,
                        "schema": {"openAPIV3Schema": object_schema(
                            k.description,
                            (k.spec)(),
                            k.kind != "ReferenceGrant",
                        )},
                        "additionalPrinterColumns": (k.columns)(),
                    });
                    if k.kind != "ReferenceGrant" {
                        version["subresources"] = json!({"status": {}});
                    }
                    version
                })
                .collect();
            let mut names = json!({"kind": k.kind, "listKind": format!("{}List", k.kind),
                "plural": k.plural, "singular": k.singular, "categories": ["gateway-api"]});
            if !k.short.is_empty() {
                names["shortNames"] = json!(k.short);
            }
            let spec = json!({
                "group": GROUP,
                "names": names,
                "scope": if k.namespaced { "Namespaced" } else { "Cluster" },
                "versions": versions,
            });
            bundled_definition(
                &format!("{}.{GROUP}", k.plural),
                spec,
                &[
                    ("gateway.networking.k8s.io/bundle-version", BUNDLE_VERSION),
                    ("gateway.networking.k8s.io/channel", "standard"),
                ],
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_name_every_kind_with_one_storage_version() {
        let defs = definitions();
        let names: Vec<&str> = defs
            .iter()
            .filter_map(|d| d.pointer("/metadata/name").and_then(Value::as_str))
            .collect();
        assert_eq!(
            names,
            [
                "gatewayclasses.gateway.networking.k8s.io",
                "gateways.gateway.networking.k8s.io",
                "httproutes.gateway.networking.k8s.io",
                "grpcroutes.gateway.networking.k8s.io",
                "referencegrants.gateway.networking.k8s.io",
            ]
        );
        for def in &defs {
            let versions = def["spec"]["versions"].as_array().expect("versions");
            let stored = versions.iter().filter(|v| v["storage"] == true).count();
            assert_eq!(stored, 1, "{}", def["metadata"]["name"]);
        }
        assert_eq!(defs[0]["spec"]["scope"], "Cluster");
        assert_eq!(defs[1]["spec"]["names"]["shortNames"], json!(["gtw"]));
        assert_eq!(
            defs[1]["spec"]["versions"][0]["subresources"],
            json!({"status": {}})
        );
    }
}
