//! CustomResourceDefinitions: validating a CRD and turning its versions into served kinds.
//! The status the server keeps on a CRD is in `crd_status`.
//!
//! Pure functions over JSON; the registry and the store are elsewhere.

use serde_json::{Value, json};
use tessera_model::json::Pointer as _;

use tessera_model::kinds::{CustomKind, KindInfo, PrinterColumn, ScalePaths, Subresource};

use crate::error::Cause;
use crate::resource::{NameRule, check_name};
use tessera_model::json::text;

/// Store prefix of CustomResourceDefinitions.
pub const CRD_PREFIX: &str = "/apiextensions.k8s.io/customresourcedefinitions/";

/// Finalizer that holds a deleted CRD until its objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Checks a CRD's spec; returns every problem with its field path.
pub fn validate(crd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let group = text(crd, "/spec/group");
    let plural = text(crd, "/spec/names/plural");
    let kind = text(crd, "/spec/names/kind");
    let name = text(crd, "/metadata/name");
    if group.is_empty() {
        causes.push(Cause::required("spec.group"));
    } else if check_name(group, NameRule::Subdomain).is_some() || !group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            &json!(group),
            "should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::required("spec.names.plural"));
    } else if check_name(plural, NameRule::Label).is_some() {
        causes.push(Cause::invalid(
            "spec.names.plural",
            &json!(plural),
            "a lowercase RFC 1123 label is required",
        ));
    }
    let singular = text(crd, "/spec/names/singular");
    if !singular.is_empty() && check_name(singular, NameRule::Label).is_some() {
        causes.push(Cause::invalid(
            "spec.names.singular",
            &json!(singular),
            "a lowercase RFC 1123 label is required",
        ));
    }
    if kind.is_empty() {
        causes.push(Cause::required("spec.names.kind"));
    } else if !kind.starts_with(|c: char| c.is_ascii_uppercase())
        || !kind.chars().all(|c| c.is_ascii_alphanumeric())
    {
        causes.push(Cause::invalid(
            "spec.names.kind",
            &json!(kind),
            "must be a CamelCase identifier",
        ));
    }
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            &json!(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    match text(crd, "/spec/scope") {
        "Namespaced" | "Cluster" => {}
        "" => causes.push(Cause::required("spec.scope")),
        other => causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: "spec.scope".into(),
            message: format!(
                "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
            ),
        }),
    }
    match text(crd, "/spec/conversion/strategy") {
        "" | "None" => {}
        // Kueue's released CRDs name its conversion webhook; Tessera converts them natively.
        "Webhook" if group == crate::convert::NATIVE_CONVERSION_GROUP => {}
        other => causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: "spec.conversion.strategy".into(),
            message: format!("Unsupported value: {other:?}: supported values: \"None\" (conversion webhooks are not supported by Tessera, except for {} kinds, which it converts itself)", crate::convert::NATIVE_CONVERSION_GROUP),
        }),
    }
    let versions = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::required("spec.versions"));
    }
    let mut names = Vec::new();
    let mut storage = 0;
    for (index, version) in versions.iter().enumerate() {
        let at = format!("spec.versions[{index}]");
        let name = text(version, "/name");
        if name.is_empty() || check_name(name, NameRule::Label).is_some() {
            causes.push(Cause::invalid(
                format!("{at}.name"),
                &json!(name),
                "must be a DNS label",
            ));
        }
        if names.contains(&name) {
            causes.push(Cause::duplicate(format!("{at}.name"), &json!(name)));
        }
        names.push(name);
        if version.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        match version.at("/schema/openAPIV3Schema") {
            None => causes.push(Cause {
                reason: "FieldValueRequired",
                field: format!("{at}.schema.openAPIV3Schema"),
                message: "Required value: schemas are required".into(),
            }),
            Some(schema) => {
                if schema.get("type").and_then(Value::as_str) != Some("object") {
                    causes.push(Cause {
                        reason: "FieldValueInvalid",
                        field: format!("{at}.schema.openAPIV3Schema.type"),
                        message: "Unsupported value: must be object at the root".into(),
                    });
                }
                check_structural(schema, &format!("{at}.schema.openAPIV3Schema"), &mut causes);
            }
        }
        if let Some(scale) = version.at("/subresources/scale") {
            for path in ["specReplicasPath", "statusReplicasPath"] {
                let value = text(scale, &format!("/{path}"));
                if !value.starts_with('.') {
                    causes.push(Cause::invalid(
                        format!("{at}.subresources.scale.{path}"),
                        &json!(value),
                        "should be a JSON path starting with .spec or .status",
                    ));
                }
            }
        }
    }
    if !versions.is_empty() && storage != 1 {
        causes.push(Cause::invalid(
            "spec.versions",
            &json!(names),
            "must have exactly one version marked as storage version",
        ));
    }
    causes
}

/// The structural-schema rules a CRD schema must follow (a subset of upstream's), and that
/// its CEL validation rules compile.
fn check_structural(schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(object) = schema.as_object() else {
        causes.push(Cause::invalid(path, schema, "must be a schema object"));
        return;
    };
    if let Some(Value::Array(rules)) = object.get("x-kubernetes-validations") {
        for (index, rule) in rules.iter().enumerate() {
            let text = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
            if let Err(error) = crate::rules::compiles(text) {
                causes.push(Cause::invalid(
                    format!("{path}.x-kubernetes-validations[{index}].rule"),
                    &json!(text),
                    format!("compilation failed: {error}"),
                ));
            }
        }
    }
    let typed = object.contains_key("type")
        || object.get("x-kubernetes-int-or-string") == Some(&json!(true))
        || object.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true))
        || object.contains_key("anyOf")
        || object.contains_key("allOf")
        || object.contains_key("oneOf");
    if !typed {
        causes.push(Cause::required(format!("{path}.type")));
    }
    if object.contains_key("$ref") {
        causes.push(Cause::forbidden(
            format!("{path}.$ref"),
            "$ref is not allowed in CRD schemas",
        ));
    }
    if let Some(Value::Object(properties)) = object.get("properties") {
        for (name, child) in properties {
            check_structural(child, &format!("{path}.properties[{name}]"), causes);
        }
    }
    if let Some(items) = object.get("items") {
        check_structural(items, &format!("{path}.items"), causes);
    }
    if let Some(additional) = object.get("additionalProperties").filter(|a| a.is_object()) {
        check_structural(additional, &format!("{path}.additionalProperties"), causes);
    }
}

/// Kubernetes version priority: GA before beta before alpha, higher numbers first, and
/// non-Kubernetes-like names last in alphabetical order.
pub fn version_priority(a: &str, b: &str) -> std::cmp::Ordering {
    fn parse(version: &str) -> Option<(u32, u8, u32)> {
        let rest = version.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: u32 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((major, 2, 0));
        }
        let (stage, number) = if let Some(n) = tail.strip_prefix("beta") {
            (1, n)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (0, n)
        } else {
            return None;
        };
        Some((major, stage, number.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

fn leak(text: &str) -> &'static str {
    Box::leak(text.to_string().into_boxed_str())
}

fn leak_list(items: Vec<String>) -> &'static [&'static str] {
    Box::leak(
        items
            .iter()
            .map(|s| leak(s))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
}

/// The served kinds of a (valid) CRD, one per served version, in version-priority order.
pub fn kinds_of(crd: &Value) -> Vec<KindInfo> {
    let group = text(crd, "/spec/group");
    let names = crd.at("/spec/names").cloned().unwrap_or(json!({}));
    let kind = text(&names, "/kind");
    let plural = text(&names, "/plural");
    let singular = match text(&names, "/singular") {
        "" => kind.to_ascii_lowercase(),
        singular => singular.to_string(),
    };
    let strings = |field: &str| -> Vec<String> {
        names
            .get(field)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let namespaced = text(crd, "/spec/scope") == "Namespaced";
    let mut versions = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    versions.sort_by(|a, b| version_priority(text(a, "/name"), text(b, "/name")));
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .map(|v| text(v, "/name").to_string())
        .unwrap_or_default();
    let terminating = crd.at("/metadata/deletionTimestamp").is_some();
    let (group, kind, plural) = (leak(group), leak(kind), leak(plural));
    let short_names = leak_list(strings("shortNames"));
    let categories = leak_list(strings("categories"));
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .map(|version| {
            let name = text(version, "/name");
            let status = version.at("/subresources/status").is_some();
            let scale = version.at("/subresources/scale").map(|scale| ScalePaths {
                spec_replicas: text(scale, "/specReplicasPath").to_string(),
                status_replicas: text(scale, "/statusReplicasPath").to_string(),
                label_selector: scale
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            });
            let subresources: &'static [Subresource] = match (status, scale.is_some()) {
                (true, true) => &[Subresource::Status, Subresource::Scale],
                (true, false) => &[Subresource::Status],
                (false, true) => &[Subresource::Scale],
                (false, false) => &[],
            };
            let printer_columns = version
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .map(|columns| {
                    columns
                        .iter()
                        .map(|c| PrinterColumn {
                            name: text(c, "/name").to_string(),
                            kind: text(c, "/type").to_string(),
                            format: text(c, "/format").to_string(),
                            description: text(c, "/description").to_string(),
                            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                            json_path: text(c, "/jsonPath").to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            KindInfo {
                group,
                version: leak(name),
                kind,
                plural,
                singular: singular.clone(),
                namespaced,
                short_names,
                categories,
                subresources,
                definition: format!("{}.{name}.{kind}", reversed_domain(group)),
                schema: None,
                create_only: false,
                custom: Some(CustomKind {
                    crd: text(crd, "/metadata/name").to_string(),
                    storage_version: storage_version.clone(),
                    schema: version
                        .at("/schema/openAPIV3Schema")
                        .cloned()
                        .unwrap_or(json!({"type": "object"})),
                    printer_columns,
                    scale,
                    terminating,
                }),
            }
        })
        .collect()
}

/// `kueue.x-k8s.io` → `io.x-k8s.kueue`, as upstream names CRD schemas in OpenAPI.
pub fn reversed_domain(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget_crd() -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1alpha1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}},
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                     "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}]}
                ]
            }
        })
    }

    #[test]
    fn a_valid_crd_serves_each_version() {
        assert!(
            validate(&widget_crd()).is_empty(),
            "{:?}",
            validate(&widget_crd())
        );
        let kinds = kinds_of(&widget_crd());
        let versions: Vec<_> = kinds.iter().map(|k| k.version).collect();
        assert_eq!(versions, ["v1", "v1alpha1"], "version priority order");
        let v1 = &kinds[0];
        assert_eq!(
            (v1.group, v1.kind, v1.plural, v1.singular.as_str()),
            ("example.com", "Widget", "widgets", "widget")
        );
        assert!(v1.namespaced && v1.has(Subresource::Status) && v1.has(Subresource::Scale));
        let custom = v1.custom.as_ref().unwrap();
        assert_eq!(custom.storage_version, "v1");
        assert_eq!(custom.printer_columns[0].json_path, ".spec.replicas");
        assert_eq!(v1.definition, "com.example.v1.Widget");
    }

    #[test]
    fn invalid_crds_name_their_fields() {
        let table: Vec<(&str, Value, &str)> = vec![
            (
                "wrong name",
                json!({"metadata": {"name": "widgets"}}),
                "metadata.name",
            ),
            (
                "no dot group",
                json!({"spec": {"group": "example"}}),
                "spec.group",
            ),
            (
                "bad scope",
                json!({"spec": {"scope": "Global"}}),
                "spec.scope",
            ),
            (
                "two storage versions",
                json!({"spec": {"versions": [
                {"name": "v1", "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v2", "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
                "spec.versions",
            ),
            (
                "no schema",
                json!({"spec": {"versions": [{"name": "v1", "storage": true}]}}),
                "spec.versions[0].schema.openAPIV3Schema",
            ),
            (
                "untyped property",
                json!({"spec": {"versions": [{"name": "v1", "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"x": {"description": "no type"}}}}}]}}),
                "spec.versions[0].schema.openAPIV3Schema.properties[x].type",
            ),
            (
                "a rule calling an undeclared function",
                json!({"spec": {"versions": [{"name": "v1", "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                "x-kubernetes-validations": [{"rule": "self.lowerAscii() == 'a'"}, {"rule": "self.name.quantityLike()"}]}}}}}]}}),
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule",
            ),
            (
                "webhook conversion",
                json!({"spec": {"conversion": {"strategy": "Webhook"}}}),
                "spec.conversion.strategy",
            ),
        ];
        for (case, patch, field) in table {
            let mut crd = widget_crd();
            json_patch::merge(&mut crd, &patch);
            let causes = validate(&crd);
            assert!(
                causes.iter().any(|c| c.field == field),
                "{case}: {causes:?}"
            );
        }
        let mut crd = widget_crd();
        json_patch::merge(
            &mut crd,
            &json!({"spec": {"versions": [{"name": "v1", "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-validations": [{"rule": "self.quantityLike()"}]}}}]}}),
        );
        let messages: Vec<String> = validate(&crd)
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            messages,
            [
                "spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value: \"self.quantityLike()\": compilation failed: ERROR: <input>:1:18: undeclared reference to 'quantityLike' (in container '')\n | self.quantityLike()\n | .................^"
            ]
        );
    }

    #[test]
    fn kueue_crds_may_name_a_conversion_webhook() {
        let mut crd = widget_crd();
        json_patch::merge(
            &mut crd,
            &json!({"metadata": {"name": "widgets.kueue.x-k8s.io"},
                    "spec": {"group": "kueue.x-k8s.io", "conversion": {"strategy": "Webhook",
                    "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"service":
                    {"name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/convert"}}}}}}),
        );
        assert_eq!(validate(&crd), vec![]);
    }

    #[test]
    fn bundled_provisioning_crds_are_valid_and_serve_their_versions() {
        let served: Vec<Vec<&str>> = tessera_model::provisioning::definitions()
            .iter()
            .map(|crd| {
                assert_eq!(validate(crd), vec![], "{}", crd["metadata"]["name"]);
                kinds_of(crd).iter().map(|k| k.version).collect()
            })
            .collect();
        assert_eq!(
            served,
            vec![vec!["v1beta2", "v1beta1"], vec!["v1", "v1beta1"]]
        );
    }

    #[test]
    fn bundled_multus_and_network_policy_api_crds_are_valid_and_serve_their_versions() {
        let bundles = [
            (
                "multus",
                tessera_model::multus::definitions(),
                vec![vec!["v1"], vec!["v1beta1"]],
            ),
            (
                "network-policy-api",
                tessera_model::network_policy_api::definitions(),
                vec![vec!["v1alpha1"], vec!["v1alpha1"], vec!["v1alpha2"]],
            ),
        ];
        for (bundle, definitions, want) in bundles {
            let served: Vec<Vec<&str>> = definitions
                .iter()
                .map(|crd| {
                    assert_eq!(validate(crd), vec![], "{}", crd["metadata"]["name"]);
                    kinds_of(crd).iter().map(|k| k.version).collect()
                })
                .collect();
            assert_eq!(served, want, "{bundle}");
        }
    }

    #[test]
    fn bundled_kueue_crds_are_valid_and_serve_both_versions() {
        for crd in tessera_model::kueue::crd::definitions() {
            assert_eq!(validate(&crd), vec![], "{}", crd["metadata"]["name"]);
            let versions: Vec<_> = kinds_of(&crd).iter().map(|k| k.version).collect();
            assert_eq!(
                versions,
                ["v1beta2", "v1beta1"],
                "{}",
                crd["metadata"]["name"]
            );
        }
    }

    #[test]
    fn versions_sort_like_kubernetes() {
        let mut versions = vec![
            "v1beta1", "v1", "v2alpha1", "foo", "v1alpha1", "v2", "v10beta3",
        ];
        versions.sort_by(|a, b| version_priority(a, b));
        assert_eq!(
            versions,
            [
                "v2", "v1", "v10beta3", "v1beta1", "v2alpha1", "v1alpha1", "foo"
            ]
        );
    }
}
