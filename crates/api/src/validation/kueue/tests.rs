//! Kueue's webhook cases (`pkg/webhooks/*_webhook_test.go`), ported as data: each names the
//! fields upstream's errors name.

use serde_json::{Value, json};

use super::{validate, validate_update};

fn queue(spec: Value) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
           "metadata": {"name": "cq"}, "spec": spec})
}

fn group(covered: &[&str], flavors: Value) -> Value {
    json!({"coveredResources": covered, "flavors": flavors})
}

fn flavor(name: &str, resources: Value) -> Value {
    json!({"name": name, "resources": resources})
}

/// `(case, kind, object, the fields of the causes in order)`.
type Case = (&'static str, &'static str, Value, Vec<&'static str>);

#[test]
fn webhook_checks_name_fields() {
    let mut table: Vec<Case> = vec![
        (
            "built-in resources with qualified names",
            "ClusterQueue",
            queue(
                json!({"resourceGroups": [group(&["cpu"], json!([flavor("default", json!([{"name": "cpu", "nominalQuota": 1}]))]))]}),
            ),
            vec![],
        ),
        (
            "invalid resource name",
            "ClusterQueue",
            queue(
                json!({"resourceGroups": [group(&["@cpu"], json!([flavor("default", json!([{"name": "@cpu", "nominalQuota": 1}]))]))]}),
            ),
            vec!["spec.resourceGroups[0].coveredResources[0]"],
        ),
        (
            "admissionCheckStrategy refers to a flavor that is not in quota",
            "ClusterQueue",
            queue(
                json!({"admissionChecksStrategy": {"admissionChecks": [{"name": "ac1", "onFlavors": ["flavor1"]}]}}),
            ),
            vec!["spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]"],
        ),
        (
            "flavor quota with negative value",
            "ClusterQueue",
            queue(
                json!({"resourceGroups": [group(&["cpu"], json!([flavor("x86", json!([{"name": "cpu", "nominalQuota": "-1"}]))]))]}),
            ),
            vec!["spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"],
        ),
        (
            "flavor quota with zero value and borrowingLimit 0 in a cohort",
            "ClusterQueue",
            queue(
                json!({"cohortName": "c", "resourceGroups": [group(&["cpu"], json!([flavor("x86", json!([{"name": "cpu", "nominalQuota": 0, "borrowingLimit": 0}]))]))]}),
            ),
            vec![],
        ),
        (
            "flavor quota with negative borrowingLimit",
            "ClusterQueue",
            queue(
                json!({"cohortName": "c", "resourceGroups": [group(&["cpu"], json!([flavor("x86", json!([{"name": "cpu", "nominalQuota": 1, "borrowingLimit": "-1"}]))]))]}),
            ),
            vec!["spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit"],
        ),
        (
            "flavor quota with borrowingLimit and empty cohort",
            "ClusterQueue",
            queue(
                json!({"resourceGroups": [group(&["cpu"], json!([flavor("x86", json!([{"name": "cpu", "nominalQuota": 1, "borrowingLimit": 1}]))]))]}),
            ),
            vec!["spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit"],
        ),
        (
            "flavor quota with lendingLimit and empty cohort",
            "ClusterQueue",
            queue(
                json!({"resourceGroups": [group(&["cpu"], json!([flavor("x86", json!([{"name": "cpu", "nominalQuota": 1, "lendingLimit": 1}]))]))]}),
            ),
            vec!["spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"],
        ),
        (
            "flavor quota with lendingLimit greater than nominalQuota",
            "ClusterQueue",
            queue(
                json!({"cohortName": "c", "resourceGroups": [group(&["cpu"], json!([flavor("x86", json!([{"name": "cpu", "nominalQuota": 1, "lendingLimit": 2}]))]))]}),
            ),
            vec!["spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"],
        ),
        (
            "namespaceSelector with invalid labels",
            "ClusterQueue",
            queue(json!({"namespaceSelector": {"matchLabels": {"nospecialchars^=@": "bar"}}})),
            vec!["spec.namespaceSelector.matchLabels"],
        ),
        (
            "namespaceSelector with invalid expressions",
            "ClusterQueue",
            queue(
                json!({"namespaceSelector": {"matchExpressions": [{"key": "key", "operator": "In"}]}}),
            ),
            vec!["spec.namespaceSelector.matchExpressions[0].values"],
        ),
        (
            "resources in a flavor in different order",
            "ClusterQueue",
            queue(json!({"resourceGroups": [group(&["cpu", "memory"], json!([
                flavor("alpha", json!([{"name": "cpu", "nominalQuota": 1}, {"name": "memory", "nominalQuota": 1}])),
                flavor("beta", json!([{"name": "memory", "nominalQuota": 1}, {"name": "cpu", "nominalQuota": 1}]))]))]})),
            vec![
                "spec.resourceGroups[0].flavors[1].resources[0].name",
                "spec.resourceGroups[0].flavors[1].resources[1].name",
            ],
        ),
        (
            "resource in more than one resource group",
            "ClusterQueue",
            queue(json!({"resourceGroups": [
                group(&["cpu", "memory"], json!([flavor("alpha", json!([{"name": "cpu", "nominalQuota": 1}, {"name": "memory", "nominalQuota": 1}]))])),
                group(&["memory"], json!([flavor("beta", json!([{"name": "memory", "nominalQuota": 1}]))]))]})),
            vec!["spec.resourceGroups[1].coveredResources[0]"],
        ),
        (
            "flavor in more than one resource group",
            "ClusterQueue",
            queue(json!({"resourceGroups": [
                group(&["cpu"], json!([flavor("alpha", json!([{"name": "cpu", "nominalQuota": 1}])), flavor("beta", json!([{"name": "cpu", "nominalQuota": 1}]))])),
                group(&["memory"], json!([flavor("beta", json!([{"name": "memory", "nominalQuota": 1}]))]))]})),
            vec!["spec.resourceGroups[1].flavors[0].name"],
        ),
        (
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
            "ClusterQueue",
            queue(
                json!({"preemption": {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}}),
            ),
            vec!["spec.preemption"],
        ),
        (
            "flavorFungibility preference set but whenCanPreempt != TryNextFlavor",
            "ClusterQueue",
            queue(
                json!({"flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch", "preference": "BorrowingOverPreemption"}}),
            ),
            vec!["spec.flavorFungibility.preference"],
        ),
        (
            "flavorFungibility preference with both TryNextFlavor is valid",
            "ClusterQueue",
            queue(
                json!({"flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "PreemptionOverBorrowing"}}),
            ),
            vec![],
        ),
        (
            "fair sharing weight that collapses",
            "ClusterQueue",
            queue(json!({"fairSharing": {"weight": "1n"}})),
            vec!["spec.fairSharing"],
        ),
        (
            "negative fair sharing weight",
            "Cohort",
            json!({"spec": {"fairSharing": {"weight": "-1"}}}),
            vec!["spec.fairSharing"],
        ),
        (
            "cohort lending limit without parent",
            "Cohort",
            json!({"spec": {"resourceGroups": [group(&["cpu"], json!([flavor("x86", json!([{"name": "cpu", "nominalQuota": 1, "lendingLimit": 5}]))]))]}}),
            vec!["spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"],
        ),
        (
            "cohort with a parent may lend more than its nominal quota",
            "Cohort",
            json!({"spec": {"parentName": "root", "resourceGroups": [group(&["cpu"], json!([flavor("x86", json!([{"name": "cpu", "nominalQuota": 1, "lendingLimit": 5}]))]))]}}),
            vec![],
        ),
        (
            "flavor with invalid node labels and duplicate taints",
            "ResourceFlavor",
            json!({"spec": {"nodeLabels": {"foo": "@bar"}, "nodeTaints": [
                {"key": "spot", "value": "true", "effect": "NoSchedule"},
                {"key": "spot", "value": "false", "effect": "NoSchedule"},
                {"key": "@x", "effect": "NoExecute"}]}}),
            vec![
                "spec.nodeLabels",
                "spec.nodeTaints[1]",
                "spec.nodeTaints[2].key",
            ],
        ),
        (
            "flavor with taints and tolerations of the published example",
            "ResourceFlavor",
            json!({"spec": {"nodeLabels": {"instance-type": "spot"},
                "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}],
                "tolerations": [{"key": "spot-taint", "operator": "Exists", "effect": "NoSchedule"}]}}),
            vec![],
        ),
        (
            "workload requesting pods and two podSets with minCount",
            "Workload",
            json!({"spec": {"podSets": [
                {"name": "a", "count": 2, "minCount": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"pods": 1}}}]}}},
                {"name": "b", "count": 2, "minCount": 1, "template": {"spec": {"containers": []}}}]}}),
            vec![
                "spec.podSets[0].template.spec.containers[0].resources.requests[pods]",
                "spec.podSets",
            ],
        ),
        (
            "admission check updates an unknown podSet",
            "Workload",
            json!({"spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
                   "status": {"admissionChecks": [{"name": "ac", "state": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
                              "podSetUpdates": [{"name": "other", "nodeSelector": {"a": "b"}}]}]}}),
            vec!["status.admissionChecks[0].podSetUpdates[0].name"],
        ),
    ];
    let reserved = json!([{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                          "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
    let pod_sets = json!([{"name": "main", "count": 2, "template": {"spec": {"containers": []}}}]);
    table.extend([
        (
            "quota reserved without an admission",
            "Workload",
            json!({"spec": {"podSets": pod_sets}, "status": {"conditions": reserved}}),
            vec!["status.admission"],
        ),
        (
            "admission of an unknown podSet",
            "Workload",
            json!({"spec": {"podSets": pod_sets}, "status": {"conditions": reserved,
                "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "other", "count": 2}]}}}),
            vec!["status.admission.podSetAssignments[0].name"],
        ),
        (
            "reclaimable pods of an unknown podSet and more than its count",
            "Workload",
            json!({"spec": {"podSets": pod_sets}, "status": {"reclaimablePods": [
                {"name": "other", "count": 1}, {"name": "main", "count": 3}]}}),
            vec!["status.reclaimablePods[other].name", "status.reclaimablePods[main].count"],
        ),
    ]);
    for (case, kind, object, fields) in table {
        let causes = validate(kind, &object);
        let got: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(got, fields, "{case}: {causes:?}");
    }
}

#[test]
fn messages_follow_kueue() {
    let causes = validate(
        "ClusterQueue",
        &queue(
            json!({"resourceGroups": [group(&["cpu"], json!([flavor("x86", json!([{"name": "cpu", "nominalQuota": 9, "borrowingLimit": "1"}]))]))]}),
        ),
    );
    let messages: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    assert_eq!(
        messages,
        [
            "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Invalid value: \"1\": must be nil when cohort is empty"
        ]
    );
}

#[test]
fn unchanged_legacy_on_flavors_survive_updates() {
    let old = queue(
        json!({"admissionChecksStrategy": {"admissionChecks": [{"name": "ac1", "onFlavors": ["gone"]}]}}),
    );
    let mut new = old.clone();
    new["spec"]["queueingStrategy"] = json!("StrictFIFO");
    assert_eq!(validate_update("ClusterQueue", &old, &new), vec![]);
    new["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"] = json!(["other"]);
    let fields: Vec<String> = validate_update("ClusterQueue", &old, &new)
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(
        fields,
        ["spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]"]
    );
    let mut changed = old.clone();
    changed["spec"]["concurrentAdmissionPolicy"] =
        json!({"migration": {"mode": "TryPreferredFlavors"}});
    let fields: Vec<String> = validate_update("ClusterQueue", &old, &changed)
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert!(
        fields.contains(&"spec.concurrentAdmissionPolicy".to_string()),
        "{fields:?}"
    );
}

#[test]
fn pod_sets_are_immutable_while_quota_is_reserved() {
    let old = json!({"spec": {"podSets": [{"name": "main", "count": 4, "template": {"spec": {"containers": []}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}],
                   "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 4}]}}});
    let fields = |new: &Value| -> Vec<String> {
        validate_update("Workload", &old, new)
            .into_iter()
            .map(|c| c.field)
            .collect()
    };
    let mut shrunk = old.clone();
    shrunk["spec"]["podSets"][0]["count"] = json!(2);
    assert_eq!(fields(&shrunk), Vec::<String>::new(), "elastic scale-down");
    let mut grown = old.clone();
    grown["spec"]["podSets"][0]["count"] = json!(5);
    assert_eq!(fields(&grown), ["spec.podSets.0"]);
    let mut more = old.clone();
    more["spec"]["podSets"]
        .as_array_mut()
        .expect("pod sets")
        .push(json!({"name": "b", "count": 1, "template": {}}));
    assert_eq!(fields(&more), ["spec.podSets"]);
    let mut released = grown.clone();
    let mut old_released = old.clone();
    old_released["status"] = json!({});
    released["status"] = json!({});
    assert_eq!(
        validate_update("Workload", &old_released, &released),
        vec![],
        "free to change without a reservation"
    );
}

/// The bundled Topology CRD's schema of `version`.
fn topology_schema(version: &str) -> Value {
    tessera_model::kueue::crd::definitions()
        .into_iter()
        .find(|crd| crd["spec"]["names"]["kind"] == "Topology")
        .and_then(|crd| {
            crd["spec"]["versions"]
                .as_array()?
                .iter()
                .find(|v| v["name"] == version)
                .map(|v| v["schema"]["openAPIV3Schema"].clone())
        })
        .expect("a bundled Topology CRD")
}

fn topology(levels: &[&str]) -> Value {
    let levels: Vec<Value> = levels.iter().map(|l| json!({"nodeLabel": l})).collect();
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
           "metadata": {"name": "default"}, "spec": {"levels": levels}})
}

/// Topology has no webhook: Kueue validates it by the CRD's schema and CEL rules
/// (`apis/kueue/v1beta2/topology_types.go`). `(case, version, old levels, new levels,
/// "field: message" of each cause)`.
#[test]
fn topology_is_validated_by_its_crd_as_kueue_declares() {
    const BLOCK: &str = "cloud.com/topology-block";
    const RACK: &str = "cloud.com/topology-rack";
    const HOST: &str = "kubernetes.io/hostname";
    type TopologyCase = (
        &'static str,
        &'static str,
        Option<&'static [&'static str]>,
        &'static [&'static str],
        Vec<&'static str>,
    );
    let seventeen: &'static [&'static str] = &[
        "l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9", "l10", "l11", "l12", "l13",
        "l14", "l15", "l16",
    ];
    let cases: Vec<TopologyCase> = vec![
        (
            "block, rack and hostname",
            "v1beta2",
            None,
            &[BLOCK, RACK, HOST],
            vec![],
        ),
        (
            "no levels",
            "v1beta2",
            None,
            &[],
            vec!["spec.levels: Invalid value: 0: spec.levels in body should have at least 1 items"],
        ),
        (
            "more than 16 levels",
            "v1beta2",
            None,
            seventeen,
            vec!["spec.levels: Too many: 17: must have at most 16 items"],
        ),
        (
            "a level that is not a label name",
            "v1beta2",
            None,
            &["cloud.com/rack!"],
            vec![
                "spec.levels[0].nodeLabel: Invalid value: \"cloud.com/rack!\": spec.levels[0].nodeLabel in body should match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$'",
            ],
        ),
        (
            "duplicate levels",
            "v1beta2",
            None,
            &[BLOCK, BLOCK],
            vec!["spec.levels: Invalid value: \"array\": must be unique"],
        ),
        (
            "hostname above the lowest level",
            "v1beta2",
            None,
            &[HOST, RACK],
            vec![
                "spec.levels: Invalid value: \"array\": the kubernetes.io/hostname label can only be used at the lowest level of topology",
            ],
        ),
        (
            "levels change without a hostname level",
            "v1beta2",
            Some(&[BLOCK, RACK]),
            &[BLOCK],
            vec![
                "spec.levels: Invalid value: \"array\": levels are mutable only when kubernetes.io/hostname is the lowest level both before and after the change",
            ],
        ),
        (
            "levels change above a hostname lowest level before and after",
            "v1beta2",
            Some(&[BLOCK, RACK, HOST]),
            &[RACK, HOST],
            vec![],
        ),
        (
            "v1beta1 levels never change",
            "v1beta1",
            Some(&[BLOCK, RACK, HOST]),
            &[RACK, HOST],
            vec!["spec.levels: Invalid value: \"array\": field is immutable"],
        ),
        (
            "unchanged levels",
            "v1beta1",
            Some(&[BLOCK, RACK]),
            &[BLOCK, RACK],
            vec![],
        ),
    ];
    for (case, version, old, new, want) in cases {
        let schema_value = topology_schema(version);
        let schema = crate::patch::Schema::of(&schema_value);
        let mut object = topology(new);
        let mut causes = crate::validation::validate(&mut object, schema).causes;
        if causes.is_empty() {
            let old = old.map(topology);
            causes.extend(crate::rules::check(schema, &object, old.as_ref()));
        }
        let got: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(got, want, "{case}");
    }
}
