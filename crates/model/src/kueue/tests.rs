//! The bundled definitions against Kueue's published CRDs (`config/components/crd/bases`,
//! kept as test fixtures): same names, scope, versions, printer columns, subresources,
//! fields, defaults and CEL rules.

use std::collections::BTreeSet;

use serde_json::Value;

use super::crd::definitions;

fn published(plural: &str) -> Value {
    let text = match plural {
        "resourceflavors" => {
            include_str!("../../../cli/tests/fixtures/upstream/kueue/crd-resourceflavors.yaml")
        }
        "clusterqueues" => {
            include_str!("../../../cli/tests/fixtures/upstream/kueue/crd-clusterqueues.yaml")
        }
        "localqueues" => {
            include_str!("../../../cli/tests/fixtures/upstream/kueue/crd-localqueues.yaml")
        }
        "cohorts" => include_str!("../../../cli/tests/fixtures/upstream/kueue/crd-cohorts.yaml"),
        "workloads" => {
            include_str!("../../../cli/tests/fixtures/upstream/kueue/crd-workloads.yaml")
        }
        "workloadpriorityclasses" => include_str!(
            "../../../cli/tests/fixtures/upstream/kueue/crd-workloadpriorityclasses.yaml"
        ),
        "admissionchecks" => {
            include_str!("../../../cli/tests/fixtures/upstream/kueue/crd-admissionchecks.yaml")
        }
        "topologies" => {
            include_str!("../../../cli/tests/fixtures/upstream/kueue/crd-topologies.yaml")
        }
        "multikueueconfigs" => {
            include_str!("../../../cli/tests/fixtures/upstream/kueue/crd-multikueueconfigs.yaml")
        }
        "multikueueclusters" => {
            include_str!("../../../cli/tests/fixtures/upstream/kueue/crd-multikueueclusters.yaml")
        }
        other => panic!("no published CRD for {other}"),
    };
    serde_saphyr::from_str(text).expect("a CRD")
}

/// Every field path, default, limit, enum, requirement and rule of a schema, outside pod templates (whose fields are
/// Kubernetes' PodTemplateSpec of whichever release generated them).
fn facts(node: &Value, path: &str, limits: bool, out: &mut BTreeSet<String>) {
    if let Some(rules) = node
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for rule in rules {
            out.insert(format!(
                "{path} rule {} | {}",
                rule["rule"], rule["message"]
            ));
        }
    }
    for key in [
        "default",
        "required",
        "enum",
        "maxItems",
        "minItems",
        "maxLength",
        "minLength",
        "minimum",
        "maxProperties",
        "pattern",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
    ] {
        if let Some(value) = node.get(key).filter(|_| limits || key == "default") {
            out.insert(format!("{path} {key} {value}"));
        }
    }
    if path.ends_with(".template") || path.ends_with(".status.flavors[]") {
        return;
    }
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            let at = format!("{path}.{name}");
            out.insert(at.clone());
            facts(child, &at, limits, out);
        }
    }
    if let Some(items) = node.get("items") {
        facts(items, &format!("{path}[]"), limits, out);
    }
}

fn version<'v>(crd: &'v Value, name: &str) -> &'v Value {
    crd["spec"]["versions"]
        .as_array()
        .and_then(|versions| versions.iter().find(|v| v["name"] == name))
        .unwrap_or_else(|| panic!("version {name}"))
}

#[test]
fn bundled_definitions_match_the_published_ones() {
    let bundled = definitions();
    assert_eq!(bundled.len(), 10);
    let mut differences = Vec::new();
    for ours in &bundled {
        let plural = ours["spec"]["names"]["plural"].as_str().expect("plural");
        let theirs = published(plural);
        assert_eq!(ours["metadata"]["name"], theirs["metadata"]["name"]);
        assert_eq!(ours["spec"]["names"], theirs["spec"]["names"], "{plural}");
        assert_eq!(ours["spec"]["scope"], theirs["spec"]["scope"], "{plural}");
        for name in ["v1beta1", "v1beta2"] {
            let (a, b) = (version(ours, name), version(&theirs, name));
            for key in [
                "served",
                "storage",
                "subresources",
                "additionalPrinterColumns",
                "deprecated",
            ] {
                assert_eq!(a.get(key), b.get(key), "{plural} {name} {key}");
            }
            let (mut ours_facts, mut their_facts) = (BTreeSet::new(), BTreeSet::new());
            // The stored version is held to every limit; v1beta1 to its fields, defaults and
            // rules (its limits are v1beta2's: v1beta1 objects are converted and stored).
            let limits = name == "v1beta2";
            facts(&a["schema"]["openAPIV3Schema"], "", limits, &mut ours_facts);
            facts(
                &b["schema"]["openAPIV3Schema"],
                "",
                limits,
                &mut their_facts,
            );
            let missing: Vec<_> = their_facts.difference(&ours_facts).collect();
            let extra: Vec<_> = ours_facts.difference(&their_facts).collect();
            if !missing.is_empty() || !extra.is_empty() {
                differences.push(format!(
                    "{plural} {name}\nmissing: {missing:#?}\nextra: {extra:#?}"
                ));
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn bundled_schemas_are_structural() {
    fn check(node: &Value, path: &str) {
        let object = node.as_object().expect("schema object");
        assert!(!object.contains_key("$ref"), "{path}: $ref");
        assert!(!object.contains_key("nullable"), "{path}: nullable");
        assert!(
            object.contains_key("type") || object.contains_key("x-kubernetes-int-or-string"),
            "{path}: no type"
        );
        for (name, child) in object
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            check(child, &format!("{path}.{name}"));
        }
        if let Some(items) = object.get("items") {
            check(items, &format!("{path}[]"));
        }
        if let Some(more) = object.get("additionalProperties").filter(|a| a.is_object()) {
            check(more, &format!("{path}{{}}"));
        }
    }
    for crd in definitions() {
        for version in crd["spec"]["versions"].as_array().expect("versions") {
            check(
                &version["schema"]["openAPIV3Schema"],
                &format!("{}", crd["metadata"]["name"]),
            );
        }
    }
}
