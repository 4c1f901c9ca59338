use super::*;

fn builtin() -> Vec<&'static KindInfo> {
    tessera_model::kinds::builtin().iter().collect()
}

/// Every `$ref` string in a value.
fn references(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                out.push(reference.to_string());
            }
            map.values().for_each(|v| references(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, out)),
        _ => {}
    }
}

#[test]
fn the_document_declares_field_validation_on_each_kinds_patch() {
    let doc = document(&builtin());
    assert_eq!(doc["swagger"], "2.0");
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    let names: Vec<&str> = patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["in"] == "query")
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["fieldValidation"]);
    assert!(doc["paths"]["/api/v1/nodes/{name}"]["get"].is_object());
}

#[test]
fn every_reference_resolves_and_schemas_are_swagger_2() {
    let doc = document(&builtin());
    let definitions = doc["definitions"].as_object().unwrap();
    assert!(definitions.contains_key("io.k8s.api.apps.v1.Deployment"));
    assert!(definitions.contains_key("io.k8s.api.core.v1.PodSpec"));
    let mut refs = Vec::new();
    references(&doc, &mut refs);
    assert!(refs.len() > 100);
    for reference in refs {
        let name = reference
            .strip_prefix("#/definitions/")
            .unwrap_or_else(|| panic!("{reference} is not a v2 reference"));
        assert!(definitions.contains_key(name), "{name} is not defined");
    }
    let text = doc.to_string();
    assert!(!text.contains("#/components/schemas/"));
    // A reference with a description is a plain `$ref` (v2 has no `allOf` wrapper for it).
    let template = &definitions["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["template"];
    assert_eq!(
        template["$ref"],
        "#/definitions/io.k8s.api.core.v1.PodTemplateSpec"
    );
    assert!(template.get("allOf").is_none());
    // The strategic-merge metadata kubectl's client-side apply reads survives.
    let containers = &definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
}

/// A decoded protobuf field's value: a varint, a fixed64 (values unread) or bytes.
#[derive(Debug)]
enum Wire<'a> {
    Varint,
    Fixed,
    Bytes(&'a [u8]),
}

fn varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = bytes[*at];
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return value;
        }
        shift += 7;
    }
}

/// Decodes one message's fields, panicking on malformed wire data.
fn fields(bytes: &[u8]) -> Vec<(u64, Wire<'_>)> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at);
        let value = match key & 7 {
            0 => {
                varint(bytes, &mut at);
                Wire::Varint
            }
            1 => {
                assert!(at + 8 <= bytes.len());
                at += 8;
                Wire::Fixed
            }
            2 => {
                let len = varint(bytes, &mut at) as usize;
                let slice = &bytes[at..at + len];
                at += len;
                Wire::Bytes(slice)
            }
            other => panic!("wire type {other}"),
        };
        out.push((key >> 3, value));
    }
    out
}

fn bytes_of<'a>(message: &[(u64, Wire<'a>)], field: u64) -> Vec<&'a [u8]> {
    message
        .iter()
        .filter(|(f, _)| *f == field)
        .filter_map(|(_, w)| match w {
            Wire::Bytes(b) => Some(*b),
            _ => None,
        })
        .collect()
}

fn string_of(message: &[(u64, Wire<'_>)], field: u64) -> String {
    bytes_of(message, field)
        .first()
        .map(|b| String::from_utf8(b.to_vec()).unwrap())
        .unwrap_or_default()
}

#[test]
fn the_protobuf_form_is_gnostics_document() {
    let doc = document(&builtin());
    let bytes = to_protobuf(&doc);
    let top = fields(&bytes);
    assert_eq!(string_of(&top, 1), "2.0");
    let info = fields(bytes_of(&top, 2)[0]);
    assert_eq!(string_of(&info, 1), "Kubernetes");
    // Paths { repeated NamedPathItem path = 2 }: find the Deployment item's PATCH operation.
    let paths = fields(bytes_of(&top, 8)[0]);
    let item = bytes_of(&paths, 2)
        .into_iter()
        .map(fields)
        .find(|named| {
            string_of(named, 1) == "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
        })
        .expect("deployment path");
    let path_item = fields(bytes_of(&item, 2)[0]);
    let patch = fields(bytes_of(&path_item, 8)[0]);
    assert_eq!(string_of(&patch, 5), "patchDeployment");
    // Its fieldValidation query parameter: ParametersItem.parameter.non_body_parameter
    // .query_parameter_sub_schema.name.
    let query_names: Vec<String> = bytes_of(&patch, 8)
        .into_iter()
        .filter_map(|item| {
            let parameter = fields(bytes_of(&fields(item), 1)[0]);
            let non_body = bytes_of(&parameter, 2);
            let query = bytes_of(&fields(non_body.first()?), 3);
            Some(string_of(&fields(query.first()?), 4))
        })
        .collect();
    assert_eq!(query_names, ["fieldValidation"]);
    // Its GVK vendor extension: NamedAny { name, Any { yaml = 2 } }.
    let extensions: Vec<(String, String)> = bytes_of(&patch, 13)
        .into_iter()
        .map(|named| {
            let named = fields(named);
            let any = fields(bytes_of(&named, 2)[0]);
            (string_of(&named, 1), string_of(&any, 2))
        })
        .collect();
    let gvk = extensions
        .iter()
        .find(|(name, _)| name == "x-kubernetes-group-version-kind")
        .expect("gvk extension");
    assert_eq!(
        serde_json::from_str::<Value>(&gvk.1).unwrap(),
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    // Definitions { repeated NamedSchema additional_properties = 1 }: an empty-properties
    // object still carries its Properties message; types are one TypeItem value.
    let definitions = fields(bytes_of(&top, 9)[0]);
    let names: Vec<String> = bytes_of(&definitions, 1)
        .into_iter()
        .map(|named| string_of(&fields(named), 1))
        .collect();
    assert_eq!(names.len(), doc["definitions"].as_object().unwrap().len());
    let pod_spec = bytes_of(&definitions, 1)
        .into_iter()
        .map(fields)
        .find(|named| string_of(named, 1) == "io.k8s.api.core.v1.PodSpec")
        .expect("PodSpec");
    let schema = fields(bytes_of(&pod_spec, 2)[0]);
    let type_item = fields(bytes_of(&schema, 22)[0]);
    assert_eq!(string_of(&type_item, 1), "object");
    assert!(!bytes_of(&schema, 25).is_empty(), "properties");
    assert!(
        schema
            .iter()
            .all(|(field, wire)| !matches!(wire, Wire::Fixed) || *field == 7 || *field == 9),
    );
}
