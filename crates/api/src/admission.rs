//! Admission of new objects, as upstream's built-in admission plugins do it:
//! ServiceAccount (default service account), Priority (PriorityClass resolution),
//! LimitRanger (defaults, min/max, limit/request ratio) and ResourceQuota (compute,
//! extended resources, object counts, scopes, PriorityClass scope selectors), with upstream's
//! error messages. The quota arithmetic is in [`usage`], pure over objects.
//!
//! Runs on the create path after validation and defaulting. Reads the objects it consults
//! (namespaces, service accounts, PriorityClasses, LimitRanges, ResourceQuotas, a namespace's
//! content) through a [`Lister`]; knows nothing about the store.

use std::collections::BTreeMap;
use tessera_model::json::Pointer as _;

use serde::Deserialize;
use serde_json::{Value, json};
use tessera_model::Quantity;

use crate::error::{ApiError, ApiResult};
use crate::lister::Lister;
use crate::meta::meta_str;
use crate::resource::Resource;

/// The built-in PriorityClasses every cluster has.
pub const SYSTEM_PRIORITY_CLASSES: &[(&str, i64, &str)] = &[
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

fn forbidden(resource: Resource, object: &Value, detail: &str) -> ApiError {
    ApiError::forbidden(
        resource.group(),
        resource.plural(),
        meta_str(object, "name").unwrap_or_default(),
        detail,
    )
}

fn list_in(objects: &dyn Lister, group: &str, plural: &str, namespace: Option<&str>) -> Vec<Value> {
    let Some(resource) = Resource::find(group, "v1", plural) else {
        return Vec::new();
    };
    objects.list(resource, namespace)
}

/// The settings of Kueue's Configuration its Job webhook reads, handed in by the platform
/// at startup.
#[derive(Debug, Clone, PartialEq)]
pub struct KueueJobDefaulting {
    /// `manageJobsWithoutQueueName`.
    pub manage_jobs_without_queue_name: bool,
    /// `managedJobsNamespaceSelector` (a `metav1.LabelSelector` as JSON).
    pub managed_jobs_namespace_selector: Value,
}

/// Kueue's defaults: only Jobs naming a LocalQueue are managed; every namespace but
/// `kube-system` and `kueue-system` is selected.
impl Default for KueueJobDefaulting {
    fn default() -> KueueJobDefaulting {
        KueueJobDefaulting {
            manage_jobs_without_queue_name: false,
            managed_jobs_namespace_selector: json!({"matchExpressions": [{
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kueue-system"],
            }]}),
        }
    }
}

/// Admits a new object (mutating it) or refuses it. Also Kueue's Job and JobSet defaulting
/// (`default_kueue_job`), its pod webhooks ([`crate::kueue_pods`]) and its job webhooks'
/// topology-annotation checks ([`crate::validation::kueue_tas`]).
pub fn admit_create(
    objects: &dyn Lister,
    kueue: &KueueJobDefaulting,
    resource: Resource,
    namespace: Option<&str>,
    object: &mut Value,
) -> ApiResult<()> {
    if (resource.group(), resource.kind()) == ("", "Pod") {
        default_service_account(objects, resource, namespace, object)?;
        resolve_priority(objects, resource, object)?;
        apply_limit_ranges(objects, resource, namespace, object)?;
        default_toleration_seconds(object);
        admit_runtime_class(objects, resource, object)?;
        crate::kueue_pods::default_pod(objects, namespace, object);
        let causes = crate::kueue_pods::validate_pod(object);
        if !causes.is_empty() {
            let name = meta_str(object, "name").unwrap_or_default();
            return Err(ApiError::invalid("", "Pod", name, causes));
        }
    }
    if resource.group() == "resource.k8s.io"
        && matches!(resource.kind(), "ResourceClaim" | "ResourceClaimTemplate")
    {
        check_admin_access(objects, resource, namespace, object)?;
    }
    if kueue_suspends(resource.group(), resource.kind()) {
        default_kueue_job(objects, kueue, namespace.unwrap_or_default(), object);
    }
    crate::kueue_pods::default_parent(resource, object);
    let causes = crate::validation::kueue_tas::validate(resource.group(), resource.kind(), object);
    if !causes.is_empty() {
        let name = meta_str(object, "name").unwrap_or_default();
        return Err(ApiError::invalid(
            resource.group(),
            resource.kind(),
            name,
            causes,
        ));
    }
    if let Some(namespace) = namespace {
        enforce_quota(objects, resource, namespace, object)?;
    }
    Ok(())
}

/// The kinds whose Kueue webhook creates them suspended: batch/v1 Job and JobSet.
fn kueue_suspends(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("batch", "Job") | ("jobset.x-k8s.io", "JobSet")
    )
}

/// Kueue's Job and JobSet webhook defaulting, which Tessera runs because it bundles Kueue
/// (`ApplyDefaultLocalQueue`, `ApplyDefaultForSuspend`): a Job without a queue name in a
/// namespace `managedJobsNamespaceSelector` selects that has a LocalQueue named `default`
/// gets `kueue.x-k8s.io/queue-name: default` (LocalQueue defaulting, GA); a Job naming a
/// LocalQueue is created suspended, and so is one without a queue name in a selected
/// namespace under `manageJobsWithoutQueueName`. The queue manager starts it once its
/// Workload is admitted. A Job with a controlling owner is left alone (Kueue checks whether
/// the owner is a kind it manages; the parent integrations suspend their own children).
fn default_kueue_job(
    objects: &dyn Lister,
    kueue: &KueueJobDefaulting,
    namespace: &str,
    job: &mut Value,
) {
    const LABEL: &str = tessera_model::kueue::QUEUE_NAME_LABEL;
    let queue_name = |job: &Value| {
        job.at("/metadata/labels")
            .and_then(|labels| labels.get(LABEL))
            .and_then(Value::as_str)
            .is_some_and(|name| !name.is_empty())
    };
    let owned = job
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|owners| owners.iter().any(|o| o["controller"] == json!(true)));
    if !queue_name(job) && !owned {
        let selected = || {
            let labels: BTreeMap<String, String> = Resource::find("", "v1", "namespaces")
                .and_then(|r| objects.get(r, None, namespace))
                .and_then(|ns| ns.at("/metadata/labels").cloned())
                .and_then(|labels| serde_json::from_value(labels).ok())
                .unwrap_or_default();
            tessera_model::selector::matches(Some(&kueue.managed_jobs_namespace_selector), &labels)
        };
        // LocalQueues are served from Kueue's CustomResourceDefinition.
        let default_queue = objects
            .resources()
            .into_iter()
            .find(|r| r.group() == tessera_model::kueue::GROUP && r.plural() == "localqueues")
            .and_then(|r| objects.get(r, Some(namespace), "default"))
            .is_some();
        if default_queue && selected() {
            if !job["metadata"]["labels"].is_object() {
                job["metadata"]["labels"] = json!({});
            }
            job["metadata"]["labels"][LABEL] = json!("default");
        } else if !(kueue.manage_jobs_without_queue_name && selected()) {
            return;
        }
    } else if !queue_name(job) {
        return;
    }
    if let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("suspend".into(), json!(true));
    }
}

/// The label a namespace needs before its claims may ask for admin access to devices.
pub const ADMIN_ACCESS_LABEL: &str = "resource.kubernetes.io/admin-access";

/// DRA admin access (monitoring, diagnostics: devices in use by others) is only for
/// namespaces labelled `resource.kubernetes.io/admin-access: "true"`, as upstream enforces.
fn check_admin_access(
    objects: &dyn Lister,
    resource: Resource,
    namespace: Option<&str>,
    object: &Value,
) -> ApiResult<()> {
    let spec = if resource.kind() == "ResourceClaimTemplate" {
        object.at("/spec/spec")
    } else {
        object.get("spec")
    };
    let prefix = if resource.kind() == "ResourceClaimTemplate" {
        "spec.spec"
    } else {
        "spec"
    };
    let requests = spec
        .and_then(|s| s.at("/devices/requests"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(index) = requests
        .iter()
        .position(|r| r.at("/exactly/adminAccess") == Some(&Value::Bool(true)))
    else {
        return Ok(());
    };
    let labelled = namespace
        .and_then(|ns| {
            let namespaces = Resource::find("", "v1", "namespaces")?;
            objects.get(namespaces, None, ns)
        })
        .and_then(|ns| {
            ns.at(&format!(
                "/metadata/labels/{}",
                ADMIN_ACCESS_LABEL.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .map(|v| v == "true")
        })
        .unwrap_or(false);
    if labelled {
        return Ok(());
    }
    Err(ApiError::invalid(
        resource.group(),
        resource.kind(),
        meta_str(object, "name").unwrap_or_default(),
        vec![crate::error::Cause::forbidden(
            format!("{prefix}.devices.requests[{index}].exactly.adminAccess"),
            format!(
                "admin access to devices requires the `{ADMIN_ACCESS_LABEL}: true` label on the containing namespace"
            ),
        )],
    ))
}

/// The RuntimeClass plugin ([`crate::runtime_class`]), after DefaultTolerationSeconds as in
/// upstream's plugin order: the class looked up among the stored RuntimeClasses.
fn admit_runtime_class(objects: &dyn Lister, resource: Resource, pod: &mut Value) -> ApiResult<()> {
    let classes = Resource::find("node.k8s.io", "v1", "runtimeclasses");
    let lookup = |name: &str| classes.and_then(|classes| objects.get(classes, None, name));
    crate::runtime_class::admit(pod, lookup)
        .map_err(|refusal| forbidden(resource, pod, &refusal.to_string()))
}

/// The DefaultTolerationSeconds plugin: a pod that does not already tolerate the
/// `not-ready` / `unreachable` NoExecute taints gets tolerations for them of 300 s, so its
/// pods leave a failed node five minutes after the taint.
fn default_toleration_seconds(pod: &mut Value) {
    const SECONDS: u64 = 300;
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerations = pod["spec"]["tolerations"].as_array();
        let tolerated = tolerations.into_iter().flatten().any(|t| {
            let t_key = t.get("key").and_then(Value::as_str).unwrap_or_default();
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or_default();
            (t_key == key || t_key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        });
        if tolerated {
            continue;
        }
        let toleration = json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": SECONDS});
        match pod["spec"]["tolerations"].as_array_mut() {
            Some(list) => list.push(toleration),
            None => pod["spec"]["tolerations"] = json!([toleration]),
        }
    }
}

fn default_service_account(
    objects: &dyn Lister,
    resource: Resource,
    namespace: Option<&str>,
    pod: &mut Value,
) -> ApiResult<()> {
    let spec = &mut pod["spec"];
    let name = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .or_else(|| {
            spec.get("serviceAccount")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
        })
        .unwrap_or("default")
        .to_string();
    spec["serviceAccountName"] = json!(name);
    spec["serviceAccount"] = json!(name);
    let Some(accounts) = Resource::find("", "v1", "serviceaccounts") else {
        return Ok(());
    };
    if !objects.exists(accounts, namespace, &name) {
        return Err(forbidden(
            resource,
            pod,
            &format!(
                "error looking up service account {}/{name}: serviceaccount \"{name}\" not found",
                namespace.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// What priority admission reads of a PriorityClass; the rest of the stored object is
/// skipped unparsed (a pod create reads every class).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PriorityClassFields {
    #[serde(default)]
    metadata: NameField,
    #[serde(default)]
    value: i64,
    #[serde(default)]
    global_default: bool,
    preemption_policy: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct NameField {
    #[serde(default)]
    name: String,
}

fn resolve_priority(objects: &dyn Lister, resource: Resource, pod: &mut Value) -> ApiResult<()> {
    let classes: Vec<PriorityClassFields> =
        Resource::find("scheduling.k8s.io", "v1", "priorityclasses")
            .map(|classes| objects.list_stored(classes, None))
            .unwrap_or_default()
            .iter()
            .filter_map(|stored| serde_json::from_slice(stored).ok())
            .collect();
    let requested = pod
        .at("/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let class = match &requested {
        Some(name) => Some(
            classes
                .iter()
                .find(|c| c.metadata.name == *name)
                .ok_or_else(|| {
                    forbidden(
                        resource,
                        pod,
                        &format!("no PriorityClass with name {name} was found"),
                    )
                })?,
        ),
        None => classes.iter().find(|c| c.global_default),
    };
    let (name, value, preemption) = match class {
        Some(class) => (
            Some(class.metadata.name.clone()),
            class.value,
            class
                .preemption_policy
                .clone()
                .unwrap_or_else(|| "PreemptLowerPriority".to_string()),
        ),
        None => (None, 0, "PreemptLowerPriority".to_string()),
    };
    if let Some(given) = pod.at("/spec/priority").and_then(Value::as_i64)
        && given != value
    {
        return Err(forbidden(
            resource,
            pod,
            &format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
            ),
        ));
    }
    let spec = &mut pod["spec"];
    if let Some(name) = name {
        spec["priorityClassName"] = json!(name);
    }
    spec["priority"] = json!(value);
    spec["preemptionPolicy"] = json!(preemption);
    Ok(())
}

fn quantity(value: Option<&Value>) -> Option<Quantity> {
    value?.as_str()?.parse().ok()
}

fn apply_limit_ranges(
    objects: &dyn Lister,
    resource: Resource,
    namespace: Option<&str>,
    pod: &mut Value,
) -> ApiResult<()> {
    let ranges = list_in(objects, "", "limitranges", namespace);
    let mut problems = Vec::new();
    for range in &ranges {
        let limits = range
            .at("/spec/limits")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for item in limits
            .iter()
            .filter(|l| l.get("type").and_then(Value::as_str) == Some("Container"))
        {
            for list in ["containers", "initContainers"] {
                let Some(Value::Array(containers)) = pod.pointer_mut(&format!("/spec/{list}"))
                else {
                    continue;
                };
                for container in containers.iter_mut() {
                    default_container(container, item);
                    check_container(container, item, &mut problems);
                }
            }
        }
        for item in limits
            .iter()
            .filter(|l| l.get("type").and_then(Value::as_str) == Some("Pod"))
        {
            check_pod_totals(pod, item, &mut problems);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(forbidden(
            resource,
            pod,
            &format!("[{}]", problems.join(", ")),
        ))
    }
}

fn default_container(container: &mut Value, item: &Value) {
    for (from, to) in [("default", "limits"), ("defaultRequest", "requests")] {
        let Some(defaults) = item.get(from).and_then(Value::as_object) else {
            continue;
        };
        for (name, value) in defaults {
            let slot = &mut container["resources"][to];
            if !slot.is_object() {
                *slot = json!({});
            }
            if slot.get(name).is_none() {
                slot[name] = value.clone();
            }
        }
    }
    // A limit without a request implies an equal request, as upstream's defaulting does.
    crate::strategy::default_requests_to_limits(container);
}

fn check_container(container: &Value, item: &Value, problems: &mut Vec<String>) {
    let name_of = |resource: &str| resource.to_string();
    for (bound, field, check_limit) in [
        ("min", "requests", false),
        ("min", "limits", true),
        ("max", "limits", true),
    ] {
        let Some(bounds) = item.get(bound).and_then(Value::as_object) else {
            continue;
        };
        for (resource, limit) in bounds {
            let Some(limit) = quantity(Some(limit)) else {
                continue;
            };
            let value = quantity(container.at(&format!("/resources/{field}/{resource}")));
            match (bound, value) {
                ("min", Some(value)) if value < limit => problems.push(format!(
                    "minimum {} usage per Container is {limit}, but {} is {value}",
                    name_of(resource),
                    if check_limit { "limit" } else { "request" }
                )),
                ("max", Some(value)) if value > limit => problems.push(format!(
                    "maximum {} usage per Container is {limit}, but limit is {value}",
                    name_of(resource)
                )),
                ("max", None) => problems.push(format!(
                    "maximum {} usage per Container is {limit}.  No limit is specified",
                    name_of(resource)
                )),
                _ => {}
            }
        }
    }
    if let Some(ratios) = item.get("maxLimitRequestRatio").and_then(Value::as_object) {
        for (resource, ratio) in ratios {
            let (Some(ratio), Some(limit), Some(request)) = (
                quantity(Some(ratio)),
                quantity(container.at(&format!("/resources/limits/{resource}"))),
                quantity(container.at(&format!("/resources/requests/{resource}"))),
            ) else {
                continue;
            };
            if request.is_zero() {
                continue;
            }
            let actual = limit.nanos() as f64 / request.nanos() as f64;
            if actual > ratio.nanos() as f64 / 1e9 {
                problems.push(format!(
                    "{resource} max limit to request ratio per Container is {ratio}, but provided ratio is {actual:.6}"
                ));
            }
        }
    }
}

fn check_pod_totals(pod: &Value, item: &Value, problems: &mut Vec<String>) {
    let totals = usage::pod_resources(pod);
    for (bound, word) in [("min", "minimum"), ("max", "maximum")] {
        let Some(bounds) = item.get(bound).and_then(Value::as_object) else {
            continue;
        };
        for (resource, limit) in bounds {
            let Some(limit) = quantity(Some(limit)) else {
                continue;
            };
            let key = if bound == "min" {
                format!("requests.{resource}")
            } else {
                format!("limits.{resource}")
            };
            let value = totals.get(&key).copied().unwrap_or(Quantity::ZERO);
            let bad = if bound == "min" {
                value < limit
            } else {
                value > limit
            };
            if bad {
                let what = if bound == "min" { "request" } else { "limit" };
                problems.push(format!(
                    "{word} {resource} usage per Pod is {limit}, but {what} is {value}"
                ));
            }
        }
    }
}

fn enforce_quota(
    objects: &dyn Lister,
    resource: Resource,
    namespace: &str,
    object: &Value,
) -> ApiResult<()> {
    let quotas = list_in(objects, "", "resourcequotas", Some(namespace));
    if quotas.is_empty() {
        return Ok(());
    }
    let delta = usage::of_object(resource, object);
    for quota in &quotas {
        if !usage::quota_selects(quota, resource, object) {
            continue;
        }
        let hard: BTreeMap<String, Quantity> = quota
            .at("/spec/hard")
            .and_then(Value::as_object)
            .map(|h| {
                h.iter()
                    .filter_map(|(k, v)| Some((k.clone(), quantity(Some(v))?)))
                    .collect()
            })
            .unwrap_or_default();
        let quota_name = meta_str(quota, "name").unwrap_or_default();
        if resource.kind() == "Pod" {
            let missing = usage::missing_pod_resources(object, &hard);
            if !missing.is_empty() {
                return Err(forbidden(
                    resource,
                    object,
                    &format!(
                        "failed quota: {quota_name}: must specify {}",
                        missing.join(",")
                    ),
                ));
            }
        }
        let used = usage::namespace_usage(objects, namespace, quota);
        let mut requested = Vec::new();
        let mut current = Vec::new();
        let mut limited = Vec::new();
        for (name, limit) in &hard {
            let Some(add) = delta.get(name) else { continue };
            let now = used.get(name).copied().unwrap_or(Quantity::ZERO);
            if now.checked_add(add).is_none_or(|total| total > *limit) {
                requested.push(format!("{name}={add}"));
                current.push(format!("{name}={now}"));
                limited.push(format!("{name}={limit}"));
            }
        }
        if !requested.is_empty() {
            return Err(forbidden(
                resource,
                object,
                &format!(
                    "exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
                    requested.join(","),
                    current.join(","),
                    limited.join(",")
                ),
            ));
        }
    }
    Ok(())
}

/// Quota arithmetic: what an object uses, what a namespace uses, which quotas select what.
pub mod usage {
    use super::*;

    /// Effective resource totals of a pod: `requests.<r>` and `limits.<r>`, each the larger of
    /// the containers' sum and the largest init container, as upstream computes them
    /// (LimitRanger's pod totals; quota adds the overhead, see [`pod_usage`]).
    pub fn pod_resources(pod: &Value) -> BTreeMap<String, Quantity> {
        let mut totals = BTreeMap::new();
        for field in ["requests", "limits"] {
            let mut sum: BTreeMap<String, Quantity> = BTreeMap::new();
            for (name, q) in container_resources(pod, "containers", field) {
                let entry = sum.entry(name.clone()).or_insert(Quantity::ZERO);
                *entry = entry.checked_add(&q).unwrap_or(*entry);
            }
            for (name, q) in container_resources(pod, "initContainers", field) {
                let entry = sum.entry(name.clone()).or_insert(Quantity::ZERO);
                if q > *entry {
                    *entry = q;
                }
            }
            for (name, value) in sum {
                totals.insert(format!("{field}.{name}"), value);
            }
        }
        totals
    }

    /// What a pod uses of quota: [`pod_resources`] plus the pod overhead, added to every
    /// request and to the limits the pod sets, as `resourcehelper.PodRequests`/`PodLimits`
    /// count it.
    pub fn pod_usage(pod: &Value) -> BTreeMap<String, Quantity> {
        let mut totals = pod_resources(pod);
        let overhead = pod
            .at("/spec/overhead")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, q)| Some((name, quantity(Some(q))?)));
        for (name, q) in overhead {
            match totals.get_mut(&format!("requests.{name}")) {
                Some(requests) => *requests = requests.checked_add(&q).unwrap_or(*requests),
                None => {
                    totals.insert(format!("requests.{name}"), q);
                }
            }
            if let Some(limits) = totals.get_mut(&format!("limits.{name}")) {
                *limits = limits.checked_add(&q).unwrap_or(*limits);
            }
        }
        totals
    }

    /// What creating an object adds to quota usage.
    pub fn of_object(resource: Resource, object: &Value) -> BTreeMap<String, Quantity> {
        let one = Quantity::from_units(1, tessera_model::Format::DecimalSi);
        let mut delta = BTreeMap::new();
        let count_name = if resource.group().is_empty() {
            format!("count/{}", resource.plural())
        } else {
            format!("count/{}.{}", resource.plural(), resource.group())
        };
        delta.insert(count_name, one);
        match (resource.group(), resource.kind()) {
            ("", "Pod") => {
                delta.insert("pods".into(), one);
                for (name, value) in pod_usage(object) {
                    if let Some(plain) = name.strip_prefix("requests.")
                        && matches!(plain, "cpu" | "memory" | "ephemeral-storage")
                    {
                        delta.insert(plain.to_string(), value);
                    }
                    delta.insert(name, value);
                }
            }
            (
                "",
                kind @ ("ConfigMap"
                | "Secret"
                | "Service"
                | "PersistentVolumeClaim"
                | "ReplicationController"
                | "ResourceQuota"),
            ) => {
                let legacy = match kind {
                    "ConfigMap" => "configmaps",
                    "Secret" => "secrets",
                    "Service" => "services",
                    "PersistentVolumeClaim" => "persistentvolumeclaims",
                    "ReplicationController" => "replicationcontrollers",
                    _ => "resourcequotas",
                };
                delta.insert(legacy.into(), one);
                if kind == "Service" {
                    match object.at("/spec/type").and_then(Value::as_str) {
                        Some("LoadBalancer") => {
                            delta.insert("services.loadbalancers".into(), one);
                        }
                        Some("NodePort") => {
                            delta.insert("services.nodeports".into(), one);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        delta
    }

    /// Compute resources a quota constrains that a pod's containers leave unspecified.
    pub fn missing_pod_resources(pod: &Value, hard: &BTreeMap<String, Quantity>) -> Vec<String> {
        let mut missing = Vec::new();
        for constrained in hard.keys() {
            let (field, name) = match constrained.as_str() {
                "cpu" | "memory" => ("requests", constrained.as_str()),
                other => match other.split_once('.') {
                    Some((field @ ("requests" | "limits"), name))
                        if matches!(name, "cpu" | "memory") =>
                    {
                        (field, name)
                    }
                    _ => continue,
                },
            };
            let lacking: Vec<String> = pod
                .at("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|c| c.at(&format!("/resources/{field}/{name}")).is_none())
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                .collect();
            if !lacking.is_empty() {
                missing.push(format!("{field}.{name} for: {}", lacking.join(",")));
            }
        }
        missing.sort();
        missing.dedup();
        missing
    }

    fn terminal(pod: &Value) -> bool {
        matches!(
            pod.at("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        )
    }

    /// Whether a quota's scopes and scope selector select an object (only pods have scopes).
    pub fn quota_selects(quota: &Value, resource: Resource, object: &Value) -> bool {
        let scopes: Vec<&str> = quota
            .at("/spec/scopes")
            .and_then(Value::as_array)
            .map(|s| s.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let expressions = quota
            .at("/spec/scopeSelector/matchExpressions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if scopes.is_empty() && expressions.is_empty() {
            return true;
        }
        if (resource.group(), resource.kind()) != ("", "Pod") {
            return false;
        }
        let best_effort =
            crate::strategy::qos_class(object.get("spec").unwrap_or(&Value::Null)) == "BestEffort";
        let terminating = object.at("/spec/activeDeadlineSeconds").is_some();
        let priority_class = object.at("/spec/priorityClassName").and_then(Value::as_str);
        let scope_holds = |scope: &str, operator: &str, values: &[&str]| -> bool {
            let holds = match scope {
                "BestEffort" => best_effort,
                "NotBestEffort" => !best_effort,
                "Terminating" => terminating,
                "NotTerminating" => !terminating,
                "PriorityClass" => match operator {
                    "In" => priority_class.is_some_and(|p| values.contains(&p)),
                    "NotIn" => priority_class.is_none_or(|p| !values.contains(&p)),
                    "Exists" => priority_class.is_some(),
                    "DoesNotExist" => priority_class.is_none(),
                    _ => false,
                },
                _ => false,
            };
            if scope == "PriorityClass" {
                holds
            } else {
                match operator {
                    "DoesNotExist" => !holds,
                    _ => holds,
                }
            }
        };
        scopes.iter().all(|scope| scope_holds(scope, "Exists", &[]))
            && expressions.iter().all(|e| {
                let values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|v| v.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                scope_holds(
                    e.get("scopeName")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                    e.get("operator")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                    &values,
                )
            })
    }

    /// What a namespace uses of the resources a quota constrains.
    pub fn namespace_usage(
        objects: &dyn Lister,
        namespace: &str,
        quota: &Value,
    ) -> BTreeMap<String, Quantity> {
        let hard: Vec<String> = quota
            .at("/spec/hard")
            .and_then(Value::as_object)
            .map(|h| h.keys().cloned().collect())
            .unwrap_or_default();
        let mut used: BTreeMap<String, Quantity> =
            hard.iter().map(|k| (k.clone(), Quantity::ZERO)).collect();
        let resources = objects.resources();
        for resource in resources.iter().filter(|r| r.namespaced()) {
            let count_name = if resource.group().is_empty() {
                format!("count/{}", resource.plural())
            } else {
                format!("count/{}.{}", resource.plural(), resource.group())
            };
            let is_pod = (resource.group(), resource.kind()) == ("", "Pod");
            let relevant = hard.iter().any(|h| {
                *h == count_name
                    || (is_pod && !h.starts_with("count/"))
                    || h == resource.plural()
                    || h.starts_with("services.")
            });
            if !relevant || crate::convert::is_view(*resource) {
                continue;
            }
            for object in objects.list(*resource, Some(namespace)) {
                if is_pod && terminal(&object) {
                    continue;
                }
                if !quota_selects(quota, *resource, &object) {
                    continue;
                }
                for (name, value) in of_object(*resource, &object) {
                    if let Some(total) = used.get_mut(&name) {
                        *total = total.checked_add(&value).unwrap_or(*total);
                    }
                }
            }
        }
        used
    }
}
/// The quantities in `resources.<field>` of each container in `spec.<list>`.
fn container_resources<'a>(
    pod: &'a Value,
    list: &str,
    field: &'a str,
) -> impl Iterator<Item = (&'a String, Quantity)> + 'a {
    pod.at(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(move |container| container.get("resources")?.get(field)?.as_object())
        .flatten()
        .filter_map(|(name, value)| Some((name, quantity(Some(value))?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Namespaces `team` (labelled `managed: "yes"`, with a LocalQueue `default`), `plain`
    /// and `kube-system`.
    struct Cluster;

    impl Lister for Cluster {
        fn list(&self, _: Resource, _: Option<&str>) -> Vec<Value> {
            Vec::new()
        }

        fn get(&self, resource: Resource, namespace: Option<&str>, name: &str) -> Option<Value> {
            match (resource.plural(), namespace, name) {
                ("namespaces", None, "team") => Some(json!({"metadata": {"name": "team",
                    "labels": {"kubernetes.io/metadata.name": "team", "managed": "yes"}}})),
                ("namespaces", None, name) => Some(json!({"metadata": {"name": name,
                    "labels": {"kubernetes.io/metadata.name": name}}})),
                ("localqueues", Some("team"), "default") => Some(json!({})),
                _ => None,
            }
        }

        fn resources(&self) -> Vec<Resource> {
            tessera_model::kueue::crd::definitions()
                .iter()
                .flat_map(crate::crd::kinds_of)
                .filter(|kind| kind.plural == "localqueues")
                .map(|kind| Resource {
                    info: Box::leak(Box::new(kind)),
                })
                .collect()
        }
    }

    #[test]
    fn quota_counts_the_pod_overhead() {
        let container = |resources: Value| json!({"name": "c", "resources": resources});
        // (pod spec, want usage)
        let cases = [
            (
                json!({"containers": [container(json!({"requests": {"cpu": "1"}}))]}),
                vec![("requests.cpu", "1")],
            ),
            (
                json!({"containers": [container(json!({"requests": {"cpu": "1"}}))],
                       "overhead": {"cpu": "250m", "memory": "160Mi"}}),
                vec![("requests.cpu", "1250m"), ("requests.memory", "160Mi")],
            ),
            (
                json!({"containers": [container(json!({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}))],
                       "overhead": {"cpu": "250m", "memory": "160Mi"}}),
                vec![
                    ("limits.cpu", "2250m"),
                    ("requests.cpu", "1250m"),
                    ("requests.memory", "160Mi"),
                ],
            ),
        ];
        for (spec, want) in cases {
            let pod = json!({"spec": spec});
            let got: Vec<(String, String)> = usage::pod_usage(&pod)
                .into_iter()
                .map(|(k, v)| (k, v.to_canonical()))
                .collect();
            let want: Vec<(String, String)> = want
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(got, want, "{pod}");
            // LimitRanger's pod totals leave the overhead out.
            assert!(
                !usage::pod_resources(&pod).contains_key("requests.memory"),
                "{pod}"
            );
        }
    }

    #[test]
    fn kueues_webhooks_default_jobs_and_jobsets() {
        let cases = [
            ("batch", "Job", true),
            ("jobset.x-k8s.io", "JobSet", true),
            ("batch", "CronJob", false),
            ("apps", "Deployment", false),
            ("", "Pod", false),
        ];
        for (group, kind, want) in cases {
            assert_eq!(kueue_suspends(group, kind), want, "{group}/{kind}");
        }
    }

    #[test]
    fn kueue_defaults_jobs_as_its_webhook_does() {
        let label = tessera_model::kueue::QUEUE_NAME_LABEL;
        let managed = KueueJobDefaulting {
            manage_jobs_without_queue_name: true,
            ..KueueJobDefaulting::default()
        };
        let selective = KueueJobDefaulting {
            manage_jobs_without_queue_name: true,
            managed_jobs_namespace_selector: json!({"matchLabels": {"managed": "yes"}}),
        };
        let off = KueueJobDefaulting::default();
        let named = json!({"metadata": {"labels": {label: "q"}}, "spec": {"suspend": false}});
        let empty = json!({"metadata": {"labels": {label: ""}}, "spec": {"suspend": false}});
        let bare = json!({"metadata": {}, "spec": {}});
        let owned = json!({"metadata": {"ownerReferences": [{"controller": true}]}, "spec": {}});
        // (config, namespace, job, want suspend, want queue name)
        let cases = [
            (&off, "plain", &named, Some(true), Some("q")),
            (&off, "plain", &empty, Some(false), Some("")),
            (&off, "plain", &bare, None, None),
            // LocalQueue defaulting: the namespace has a LocalQueue `default`.
            (&off, "team", &bare, Some(true), Some("default")),
            (&off, "team", &owned, None, None),
            // manageJobsWithoutQueueName: suspended in the selected namespaces only.
            (&managed, "plain", &bare, Some(true), None),
            (&managed, "kube-system", &bare, None, None),
            (&selective, "plain", &bare, None, None),
            (&selective, "team", &bare, Some(true), Some("default")),
        ];
        for (config, namespace, job, suspend, queue) in cases {
            let mut job = job.clone();
            default_kueue_job(&Cluster, config, namespace, &mut job);
            assert_eq!(
                job.at("/spec/suspend").and_then(Value::as_bool),
                suspend,
                "{namespace} {config:?} {job}"
            );
            let got = job
                .at("/metadata/labels")
                .and_then(|l| l.get(label))
                .and_then(Value::as_str);
            assert_eq!(got, queue, "{namespace} {job}");
        }
    }
}
