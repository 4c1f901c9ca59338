//! What Kueue's validating webhooks (`pkg/webhooks/{clusterqueue,cohort,resourceflavor,
//! workload}_webhook.go`, `common.go`) refuse beyond the CRD schema and its CEL rules, with
//! upstream's field paths and messages: quota resource names and their order, duplicate
//! resources and flavors, negative quotas, limits without a cohort (or parent), lending limits
//! above the nominal quota, fair-sharing weights, preemption and fungibility combinations,
//! admission checks on flavors the queue does not have, flavor labels and taints, and a
//! workload's pod sets (immutable while it reserves quota, but for elastic scale-down), its
//! admission, reclaimable pods and admission-check updates.
//!
//! Topology has no webhook upstream: its CRD's schema and CEL rules are all Kueue checks
//! (`tessera_model::kueue::topology`; the table test here runs them).
//!
//! Checks `v1beta2` objects (the webhooks' version; v1beta1 objects are converted first).
//! Feature-gated checks follow Kueue's default gates (alpha ones off). Knows nothing about
//! other stored objects: whether a referenced flavor or cohort exists is the controller's
//! concern, as upstream.

use std::collections::BTreeSet;
use tessera_model::json::Pointer as _;

use serde_json::{Value, json};
use tessera_model::Quantity;

use crate::error::Cause;
use crate::meta::{check_label_value, check_qualified_name};

const NEGATIVE: &str = "must be greater than or equal to 0";
const LENDING_ABOVE_NOMINAL: &str = "must be less than or equal to the nominalQuota";

/// Problems with a new Kueue object of `kind` (in its `v1beta2` form).
pub fn validate(kind: &str, object: &Value) -> Vec<Cause> {
    match kind {
        "ClusterQueue" => cluster_queue(object, None),
        "Cohort" => cohort(object),
        "ResourceFlavor" => resource_flavor(object),
        "Workload" => workload(object),
        _ => Vec::new(),
    }
}

/// Problems with an update of a Kueue object of `kind` (both in their `v1beta2` form).
pub fn validate_update(kind: &str, old: &Value, new: &Value) -> Vec<Cause> {
    match kind {
        "ClusterQueue" => {
            let mut causes = cluster_queue(new, Some(old));
            let policy = |o: &Value| o.at("/spec/concurrentAdmissionPolicy").cloned();
            if policy(old) != policy(new) {
                causes.push(Cause::invalid(
                    "spec.concurrentAdmissionPolicy",
                    &policy(new).unwrap_or(Value::Null),
                    "field is immutable",
                ));
            }
            causes
        }
        "Workload" => {
            let mut causes = workload(new);
            if quota_reserved(old) {
                causes.extend(immutable_pod_sets(old, new));
            }
            causes
        }
        _ => validate(kind, new),
    }
}

/// Whether the workload's `QuotaReserved` condition is true.
fn quota_reserved(workload: &Value) -> bool {
    list(workload, "/status/conditions")
        .iter()
        .any(|c| text(c, "/type") == "QuotaReserved" && text(c, "/status") == "True")
}

/// A workload's pod sets may not change while it reserves quota, except that a pod set may
/// shrink (elastic jobs, on by default).
fn immutable_pod_sets(old: &Value, new: &Value) -> Vec<Cause> {
    let (old_sets, new_sets) = (list(old, "/spec/podSets"), list(new, "/spec/podSets"));
    if old_sets.len() != new_sets.len() {
        return vec![Cause::invalid(
            "spec.podSets",
            new.at("/spec/podSets").unwrap_or(&Value::Null),
            "field is immutable",
        )];
    }
    let count = |pod_set: &Value| pod_set.get("count").and_then(Value::as_i64).unwrap_or(1);
    old_sets
        .iter()
        .zip(new_sets)
        .enumerate()
        .filter_map(|(index, (old_set, new_set))| {
            let mut compared = new_set.clone();
            if count(new_set) < count(old_set) {
                compared["count"] = json!(count(old_set));
            }
            (&compared != old_set).then(|| {
                Cause::invalid(
                    format!("spec.podSets.{index}"),
                    new_set,
                    "field is immutable",
                )
            })
        })
        .collect()
}

fn text<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value
        .at(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn list<'v>(value: &'v Value, pointer: &str) -> &'v [Value] {
    value
        .at(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A quantity as the schema admits it: a string or a number.
fn quantity(value: &Value) -> Option<Quantity> {
    match value {
        Value::String(text) => text.parse().ok(),
        Value::Number(number) => number.to_string().parse().ok(),
        _ => None,
    }
}

fn shown(quantity: &Quantity) -> Value {
    json!(quantity.to_canonical())
}

/// How the quota rules differ between ClusterQueues and Cohorts.
struct QuotaRules {
    /// A cohort (for a ClusterQueue) or parent (for a Cohort) is set.
    has_parent: bool,
    /// "cohort" or "parent", in the limit-without-parent message.
    parent: &'static str,
    /// ClusterQueues' lending limits may not exceed their nominal quota.
    lending_at_most_nominal: bool,
}

fn cluster_queue(object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let rules = QuotaRules {
        has_parent: !text(object, "/spec/cohortName").is_empty(),
        parent: "cohort",
        lending_at_most_nominal: true,
    };
    let groups = list(object, "/spec/resourceGroups");
    let mut causes = resource_groups(groups, &rules);
    causes.extend(namespace_selector(object));
    if let Some(preemption) = object.at("/spec/preemption")
        && text(preemption, "/reclaimWithinCohort") == "Never"
        && preemption.get("borrowWithinCohort").is_some()
        && text(preemption, "/borrowWithinCohort/policy") != "Never"
    {
        causes.push(Cause::invalid(
            "spec.preemption",
            preemption,
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        ));
    }
    if let Some(fungibility) = object.at("/spec/flavorFungibility")
        && let Some(preference) = fungibility.get("preference").and_then(Value::as_str)
        && (text(fungibility, "/whenCanBorrow") != "TryNextFlavor"
            || text(fungibility, "/whenCanPreempt") != "TryNextFlavor")
    {
        causes.push(Cause::invalid(
            "spec.flavorFungibility.preference",
            &json!(preference),
            format!(
                "preference {preference:?} requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor"
            ),
        ));
    }
    causes.extend(fair_sharing(object, "spec.fairSharing"));
    let flavors: usize = groups.iter().map(|g| list(g, "/flavors").len()).sum();
    if flavors > 256 {
        causes.push(Cause::invalid(
            "spec.resourceGroups",
            &json!(flavors),
            format!(
                "total number of flavors across all resourceGroups must be ≤ 256, got {flavors}"
            ),
        ));
    }
    let covered: usize = groups
        .iter()
        .map(|g| list(g, "/coveredResources").len())
        .sum();
    if covered > 256 {
        causes.push(Cause::invalid(
            "spec.resourceGroups",
            &json!(covered),
            format!("total number of covered resources across all resourceGroups must be ≤ 256, got {covered}"),
        ));
    }
    for (index, group) in groups.iter().enumerate() {
        let combinations: usize = list(group, "/flavors")
            .iter()
            .map(|f| list(f, "/resources").len())
            .sum();
        if combinations > 512 {
            causes.push(Cause::invalid(
                format!("spec.resourceGroups[{index}]"),
                &json!(combinations),
                format!("number of flavor-resource combinations in a resourceGroup must be ≤ 512, got {combinations}"),
            ));
        }
    }
    causes.extend(admission_check_flavors(object, old));
    causes
}

/// `onFlavors` may name only the queue's flavors; on update, a check whose flavors and
/// `onFlavors` did not change is left alone (objects stored before the rule existed).
fn admission_check_flavors(object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let flavors_of = |o: &Value| -> BTreeSet<String> {
        list(o, "/spec/resourceGroups")
            .iter()
            .flat_map(|g| list(g, "/flavors"))
            .map(|f| text(f, "/name").to_string())
            .collect()
    };
    let valid = flavors_of(object);
    let unchanged_flavors = old.is_some_and(|old| flavors_of(old) == valid);
    let old_checks = old.map_or(&[][..], |old| {
        list(old, "/spec/admissionChecksStrategy/admissionChecks")
    });
    let mut causes = Vec::new();
    let allowed: Vec<&str> = valid.iter().map(String::as_str).collect();
    for (index, check) in list(object, "/spec/admissionChecksStrategy/admissionChecks")
        .iter()
        .enumerate()
    {
        let on_flavors = list(check, "/onFlavors");
        let kept = unchanged_flavors
            && old_checks.iter().any(|o| {
                o.get("name") == check.get("name")
                    && names(list(o, "/onFlavors")) == names(on_flavors)
            });
        if kept {
            continue;
        }
        for (at, flavor) in on_flavors.iter().enumerate() {
            if !flavor.as_str().is_some_and(|f| valid.contains(f)) {
                causes.push(Cause::not_supported(
                    format!(
                        "spec.admissionChecksStrategy.admissionChecks[{index}].onFlavors[{at}]"
                    ),
                    flavor,
                    &allowed,
                ));
            }
        }
    }
    causes
}

/// `ValidateLabelSelector` of `spec.namespaceSelector`: label keys and values, operators and
/// whether they take values.
fn namespace_selector(object: &Value) -> Vec<Cause> {
    let at = "spec.namespaceSelector";
    let mut causes = Vec::new();
    if let Some(labels) = object
        .at("/spec/namespaceSelector/matchLabels")
        .and_then(Value::as_object)
    {
        causes.extend(labels_valid(labels, &format!("{at}.matchLabels")));
    }
    for (index, expression) in list(object, "/spec/namespaceSelector/matchExpressions")
        .iter()
        .enumerate()
    {
        let path = format!("{at}.matchExpressions[{index}]");
        let values = list(expression, "/values");
        match text(expression, "/operator") {
            "In" | "NotIn" if values.is_empty() => causes.push(Cause::required_because(
                format!("{path}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => causes.push(Cause::forbidden(
                format!("{path}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => causes.push(Cause::invalid(
                format!("{path}.operator"),
                &json!(other),
                "not a valid selector operator",
            )),
        }
        let key = text(expression, "/key");
        if let Some(message) = check_qualified_name(key) {
            causes.push(Cause::invalid(format!("{path}.key"), &json!(key), message));
        }
    }
    causes
}

/// The strings of a list, as a set.
fn names(items: &[Value]) -> BTreeSet<&str> {
    items.iter().filter_map(Value::as_str).collect()
}

fn cohort(object: &Value) -> Vec<Cause> {
    let rules = QuotaRules {
        has_parent: !text(object, "/spec/parentName").is_empty(),
        parent: "parent",
        lending_at_most_nominal: false,
    };
    let mut causes = fair_sharing(object, "spec.fairSharing");
    causes.extend(resource_groups(
        list(object, "/spec/resourceGroups"),
        &rules,
    ));
    causes
}

fn fair_sharing(object: &Value, path: &str) -> Vec<Cause> {
    let Some(weight) = object.at("/spec/fairSharing/weight").and_then(quantity) else {
        return Vec::new();
    };
    if weight.nanos() < 0 {
        vec![Cause::invalid(path, &shown(&weight), NEGATIVE)]
    } else if weight.nanos() > 0 && weight.nanos() <= 1 {
        vec![Cause::invalid(
            path,
            &shown(&weight),
            "When not 0, weight must be > 10e-9",
        )]
    } else {
        Vec::new()
    }
}

fn resource_groups(groups: &[Value], rules: &QuotaRules) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut resources = BTreeSet::new();
    let mut flavors = BTreeSet::new();
    for (index, group) in groups.iter().enumerate() {
        let at = format!("spec.resourceGroups[{index}]");
        let covered = list(group, "/coveredResources");
        for (position, name) in covered.iter().enumerate() {
            let path = format!("{at}.coveredResources[{position}]");
            let text = name.as_str().unwrap_or_default();
            if let Some(message) = check_qualified_name(text) {
                causes.push(Cause::invalid(&path, name, message));
            }
            if !resources.insert(text.to_string()) {
                causes.push(Cause::duplicate(path, name));
            }
        }
        for (position, flavor) in list(group, "/flavors").iter().enumerate() {
            let path = format!("{at}.flavors[{position}]");
            causes.extend(flavor_quotas(flavor, covered, rules, &path));
            let name = text(flavor, "/name");
            if !flavors.insert(name.to_string()) {
                causes.push(Cause::duplicate(format!("{path}.name"), &json!(name)));
            }
        }
    }
    causes
}

fn flavor_quotas(flavor: &Value, covered: &[Value], rules: &QuotaRules, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (index, (quota, resource)) in list(flavor, "/resources").iter().zip(covered).enumerate() {
        let path = format!("{at}.resources[{index}]");
        if quota.get("name") != Some(resource) {
            causes.push(Cause::invalid(
                format!("{path}.name"),
                quota.get("name").unwrap_or(&Value::Null),
                "must match the name in coveredResources",
            ));
        }
        let nominal = quota.get("nominalQuota").and_then(quantity);
        if let Some(nominal) = &nominal
            && nominal.nanos() < 0
        {
            causes.push(Cause::invalid(
                format!("{path}.nominalQuota"),
                &shown(nominal),
                NEGATIVE,
            ));
        }
        for limit in ["borrowingLimit", "lendingLimit"] {
            let Some(value) = quota.get(limit).and_then(quantity) else {
                continue;
            };
            let field = format!("{path}.{limit}");
            if !rules.has_parent {
                causes.push(Cause::invalid(
                    &field,
                    &shown(&value),
                    format!("must be nil when {} is empty", rules.parent),
                ));
            }
            if value.nanos() < 0 {
                causes.push(Cause::invalid(&field, &shown(&value), NEGATIVE));
            }
            if limit == "lendingLimit"
                && rules.lending_at_most_nominal
                && nominal
                    .as_ref()
                    .is_some_and(|nominal| value.nanos() > nominal.nanos())
            {
                causes.push(Cause::invalid(
                    &field,
                    &shown(&value),
                    LENDING_ABOVE_NOMINAL,
                ));
            }
        }
    }
    causes
}

fn resource_flavor(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(labels) = object.at("/spec/nodeLabels").and_then(Value::as_object) {
        causes.extend(labels_valid(labels, "spec.nodeLabels"));
    }
    let mut seen = BTreeSet::new();
    for (index, taint) in list(object, "/spec/nodeTaints").iter().enumerate() {
        let at = format!("spec.nodeTaints[{index}]");
        let key = text(taint, "/key");
        if let Some(message) = check_qualified_name(key) {
            causes.push(Cause::invalid(format!("{at}.key"), &json!(key), message));
        }
        let value = text(taint, "/value");
        if let Some(message) = check_label_value(value) {
            causes.push(Cause::invalid(
                format!("{at}.value"),
                &json!(value),
                message,
            ));
        }
        if !seen.insert((text(taint, "/effect").to_string(), key.to_string())) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                field: at,
                message: format!(
                    "Duplicate value: {}: taints must be unique by key and effect pair",
                    crate::error::shown(taint)
                ),
            });
        }
    }
    causes.extend(tolerations(
        list(object, "/spec/tolerations"),
        "spec.tolerations",
    ));
    causes
}

/// The key of each toleration is a qualified name when set (`ValidateTolerations`; the CEL
/// rules check operators, effects and values).
fn tolerations(tolerations: &[Value], at: &str) -> Vec<Cause> {
    tolerations
        .iter()
        .enumerate()
        .filter_map(|(index, toleration)| {
            let key = text(toleration, "/key");
            let message = (!key.is_empty())
                .then(|| check_qualified_name(key))
                .flatten()?;
            Some(Cause::invalid(
                format!("{at}[{index}].key"),
                &json!(key),
                message,
            ))
        })
        .collect()
}

fn labels_valid(labels: &serde_json::Map<String, Value>, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (key, value) in labels {
        if let Some(message) = check_qualified_name(key) {
            causes.push(Cause::invalid(at, &json!(key), message));
        }
        let value = value.as_str().unwrap_or_default();
        if let Some(message) = check_label_value(value) {
            causes.push(Cause::invalid(at, &json!(value), message));
        }
    }
    causes
}

fn workload(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let pod_sets = list(object, "/spec/podSets");
    for (index, pod_set) in pod_sets.iter().enumerate() {
        let at = format!("spec.podSets[{index}].template.spec");
        for containers in ["initContainers", "containers"] {
            for (position, container) in list(pod_set, &format!("/template/spec/{containers}"))
                .iter()
                .enumerate()
            {
                for kind in ["requests", "limits"] {
                    causes.extend(reserved_pods(
                        container.at(&format!("/resources/{kind}")),
                        &format!("{at}.{containers}[{position}].resources.{kind}"),
                    ));
                }
            }
        }
        for kind in ["requests", "limits"] {
            causes.extend(reserved_pods(
                pod_set.at(&format!("/template/spec/resources/{kind}")),
                &format!("{at}.resources.{kind}"),
            ));
        }
    }
    let variable = pod_sets
        .iter()
        .filter(|p| p.get("minCount").is_some())
        .count();
    if variable > 1 {
        causes.push(Cause::invalid(
            "spec.podSets",
            &json!(variable),
            "at most one podSet can use minCount",
        ));
    }
    let known: Vec<&str> = pod_sets
        .iter()
        .map(|p| p.get("name").and_then(Value::as_str).unwrap_or("main"))
        .collect();
    if quota_reserved(object) {
        match object.at("/status/admission") {
            None => causes.push(Cause::required_because(
                "status.admission",
                "must be set while the QuotaReserved condition is true",
            )),
            Some(admission) => {
                for (index, assignment) in list(admission, "/podSetAssignments").iter().enumerate()
                {
                    let name = assignment.get("name").unwrap_or(&Value::Null);
                    if !name.as_str().is_some_and(|n| known.contains(&n)) {
                        causes.push(Cause::not_found(
                            format!("status.admission.podSetAssignments[{index}].name"),
                            name,
                            None,
                        ));
                    }
                }
            }
        }
    }
    for reclaimable in list(object, "/status/reclaimablePods") {
        let name = text(reclaimable, "/name");
        let at = format!("status.reclaimablePods[{name}]");
        let pod_set = pod_sets
            .iter()
            .zip(&known)
            .find(|(_, known)| **known == name);
        match pod_set {
            None => causes.push(Cause::not_supported(
                format!("{at}.name"),
                &json!(name),
                &known,
            )),
            Some((pod_set, _)) => {
                let size = pod_set.get("count").and_then(Value::as_i64).unwrap_or(1);
                let count = reclaimable
                    .get("count")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                if count > size {
                    causes.push(Cause::invalid(
                        format!("{at}.count"),
                        &json!(count),
                        format!("should be less or equal to {size}"),
                    ));
                }
            }
        }
    }
    for (index, check) in list(object, "/status/admissionChecks").iter().enumerate() {
        for (position, update) in list(check, "/podSetUpdates").iter().enumerate() {
            let at = format!("status.admissionChecks[{index}].podSetUpdates[{position}]");
            let name = update.get("name").unwrap_or(&Value::Null);
            if !name.as_str().is_some_and(|n| known.contains(&n)) {
                let mut sorted = known.clone();
                sorted.sort_unstable();
                causes.push(Cause::not_supported(format!("{at}.name"), name, &sorted));
            }
            causes.extend(tolerations(
                list(update, "/tolerations"),
                &format!("{at}.tolerations"),
            ));
            for field in ["nodeSelector", "labels"] {
                if let Some(labels) = update.get(field).and_then(Value::as_object) {
                    causes.extend(labels_valid(labels, &format!("{at}.{field}")));
                }
            }
        }
    }
    causes
}

/// `pods` is Kueue's own resource: workloads may not request it.
fn reserved_pods(resources: Option<&Value>, at: &str) -> Option<Cause> {
    resources?.get("pods")?;
    Some(Cause::invalid(
        format!("{at}[pods]"),
        &json!("pods"),
        "the key is reserved for internal kueue use",
    ))
}

#[cfg(test)]
mod tests;
