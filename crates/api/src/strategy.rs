//! Per-kind behaviour on create and update, as upstream's registry strategies define it:
//! defaulting, status reset, and the validation rules structural schemas cannot express.
//!
//! Pure functions over JSON values; knows nothing about storage or HTTP.

use serde_json::{Value, json};
use tessera_model::json::Pointer as _;

use tessera_model::Quantity;

use crate::error::Cause;
use crate::resource::Resource;
use crate::validation::pod_spec::{self, PodSpecOptions};

/// Drops the status a client sent with a create, for kinds whose status the server owns.
pub fn reset_status(resource: Resource, object: &mut Value) {
    if resource.has_status()
        && !matches!(resource.kind(), "Node" | "PersistentVolume")
        && let Some(map) = object.as_object_mut()
    {
        map.remove("status");
    }
}

/// The status Go serializes for a kind's zero-valued status struct: `{}` with every required
/// scalar at its zero value (an HPA's `desiredReplicas: 0`, a PDB's `expectedPods: 0`, …).
fn zero_status(resource: Resource) -> Value {
    let status = tessera_model::schema::definition(&resource.info.definition)
        .and_then(|kind| kind.at("/properties/status"))
        .and_then(tessera_model::schema::referenced)
        .and_then(tessera_model::schema::definition);
    let mut zero = serde_json::Map::new();
    if let Some(status) = status {
        for field in status
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let value = match status.at(&format!("/properties/{field}/type")) {
                Some(t) if t == "integer" || t == "number" => json!(0),
                Some(t) if t == "boolean" => json!(false),
                Some(t) if t == "string" => json!(""),
                _ => continue,
            };
            zero.insert(field.to_string(), value);
        }
    }
    Value::Object(zero)
}

/// A Kueue object in the `v1beta2` form Kueue's webhooks check, whichever version it is in
/// (copied only when converted: every Workload status write is checked here).
fn kueue_v1beta2<'o>(kind: &str, object: &'o Value) -> std::borrow::Cow<'o, Value> {
    match object.get("apiVersion").and_then(Value::as_str) {
        Some(version) if version.ends_with("/v1beta1") => std::borrow::Cow::Owned(
            crate::convert::kueue::v1beta1_to_v1beta2(kind, object.clone()),
        ),
        _ => std::borrow::Cow::Borrowed(object),
    }
}

/// The label every Namespace carries with its own name (`kubernetes.io/metadata.name`, set by
/// kube-apiserver's namespace defaulting on create and update since 1.21), which
/// namespaceSelectors match on.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Sets [`NAMESPACE_NAME_LABEL`] to the namespace's name, whatever the client sent.
pub fn label_namespace_name(object: &mut Value) {
    let name = object
        .at("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Some(name) = name {
        let metadata = crate::meta::metadata_mut(object);
        let labels = metadata.entry("labels").or_insert_with(|| json!({}));
        if !labels.is_object() {
            *labels = json!({});
        }
        labels[NAMESPACE_NAME_LABEL] = json!(name);
    }
}

/// Fills defaults and resets what a client may not set when creating an object.
pub fn prepare_for_create(resource: Resource, object: &mut Value) {
    reset_status(resource, object);
    // A built-in kind's status is a struct upstream, serialized even when empty (`{}`, with
    // its required scalars at their zero values); clients' generated models (the Python
    // client's) read fields of it right after a create.
    if resource.has_status()
        && resource.info.custom.is_none()
        && let Some(map) = object.as_object_mut()
    {
        map.entry("status").or_insert_with(|| zero_status(resource));
    }
    match (resource.group(), resource.kind()) {
        ("", "Pod") => {
            if let Some(spec) = object.get_mut("spec") {
                default_pod_spec(spec);
            }
            let qos = qos_class(object.get("spec").unwrap_or(&Value::Null));
            object["status"] = json!({"phase": "Pending", "qosClass": qos});
        }
        ("", "Namespace") => {
            object["spec"] = json!({"finalizers": ["kubernetes"]});
            object["status"] = json!({"phase": "Active"});
            label_namespace_name(object);
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let metadata = crate::meta::metadata_mut(object);
            let mut finalizers = metadata
                .get("finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if !finalizers
                .iter()
                .any(|f| f == crate::crd::CLEANUP_FINALIZER)
            {
                finalizers.push(json!(crate::crd::CLEANUP_FINALIZER));
            }
            metadata.insert("finalizers".into(), json!(finalizers));
        }
        // SetDefaults_PersistentVolumeClaim(Spec) and SetDefaults_PersistentVolume(Spec).
        ("", "PersistentVolumeClaim") => {
            default_str(ensure_object(object, "spec"), "volumeMode", "Filesystem");
            default_str(ensure_object(object, "status"), "phase", "Pending");
        }
        ("", "PersistentVolume") => {
            let spec = ensure_object(object, "spec");
            default_str(spec, "persistentVolumeReclaimPolicy", "Retain");
            default_str(spec, "volumeMode", "Filesystem");
            default_str(ensure_object(object, "status"), "phase", "Pending");
        }
        ("", "Service") => {
            let spec = ensure_object(object, "spec");
            default_str(spec, "type", "ClusterIP");
            default_str(spec, "sessionAffinity", "None");
            default_service(spec);
        }
        ("apps", "Deployment") => {
            let spec = ensure_object(object, "spec");
            default_value(spec, "replicas", json!(1));
            default_value(spec, "revisionHistoryLimit", json!(10));
            default_value(spec, "progressDeadlineSeconds", json!(600));
            default_value(
                spec,
                "strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
            );
            default_template(spec);
        }
        ("apps", "ReplicaSet") => {
            let spec = ensure_object(object, "spec");
            default_value(spec, "replicas", json!(1));
            default_template(spec);
        }
        ("apps", "StatefulSet") => {
            let spec = ensure_object(object, "spec");
            default_value(spec, "replicas", json!(1));
            default_value(spec, "podManagementPolicy", json!("OrderedReady"));
            default_value(spec, "revisionHistoryLimit", json!(10));
            default_value(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            default_value(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            default_template(spec);
        }
        ("apps", "DaemonSet") => {
            let spec = ensure_object(object, "spec");
            default_value(spec, "revisionHistoryLimit", json!(10));
            default_value(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            default_template(spec);
        }
        ("autoscaling", "HorizontalPodAutoscaler") => {
            crate::autoscaling::default(resource.info.version, object);
        }
        ("batch", "Job") => {
            let uid = crate::meta::meta_str(object, "uid")
                .unwrap_or_default()
                .to_string();
            let name = crate::meta::meta_str(object, "name")
                .unwrap_or_default()
                .to_string();
            let spec = ensure_object(object, "spec");
            // Upstream generates the selector from the Job's UID unless told otherwise.
            if spec.get("manualSelector").and_then(Value::as_bool) != Some(true) {
                spec["selector"] =
                    json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
                let template = ensure_object(spec, "template");
                let metadata = ensure_object(template, "metadata");
                let labels = ensure_object(metadata, "labels");
                for (key, value) in [
                    ("batch.kubernetes.io/controller-uid", &uid),
                    ("batch.kubernetes.io/job-name", &name),
                    ("controller-uid", &uid),
                    ("job-name", &name),
                ] {
                    labels[key] = json!(value);
                }
            }
            default_value(spec, "parallelism", json!(1));
            default_value(spec, "backoffLimit", json!(6));
            default_value(spec, "completionMode", json!("NonIndexed"));
            default_value(spec, "suspend", json!(false));
            if spec.get("completions").is_none() && spec.get("parallelism") == Some(&json!(1)) {
                spec["completions"] = json!(1);
            }
            default_template(spec);
        }
        _ => {}
    }
}

fn ensure_object<'a>(object: &'a mut Value, field: &str) -> &'a mut Value {
    if !object.get(field).is_some_and(Value::is_object) {
        object[field] = json!({});
    }
    &mut object[field]
}

fn default_value(object: &mut Value, field: &str, value: Value) {
    if object.get(field).is_none() {
        object[field] = value;
    }
}

fn default_str(object: &mut Value, field: &str, value: &str) {
    default_value(object, field, json!(value));
}

/// upstream's `SetDefaults_Service` beyond the type: port protocols and target ports, the
/// traffic policies, LoadBalancer node ports. (ClusterIPs and IP families are allocated on
/// create: `crate::service_allocation`.)
fn default_service(spec: &mut Value) {
    let service_type = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter(|p| p.is_object()) {
            default_str(port, "protocol", "TCP");
            if port
                .get("targetPort")
                .is_none_or(|t| t.as_i64() == Some(0) || t.as_str() == Some(""))
                && let Some(number) = port.get("port").cloned()
            {
                port["targetPort"] = number;
            }
        }
    }
    if service_type != "ExternalName" {
        default_str(spec, "internalTrafficPolicy", "Cluster");
    }
    if matches!(service_type.as_str(), "NodePort" | "LoadBalancer") {
        default_str(spec, "externalTrafficPolicy", "Cluster");
    }
    if service_type == "LoadBalancer" {
        default_value(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

fn default_template(spec: &mut Value) {
    if let Some(pod_spec) = spec.pointer_mut("/template/spec") {
        default_pod_spec(pod_spec);
    }
}

fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default_str(spec, "restartPolicy", "Always");
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "schedulerName", "default-scheduler");
    default_value(spec, "terminationGracePeriodSeconds", json!(30));
    default_value(spec, "securityContext", json!({}));
    default_value(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = spec.get_mut(list) {
            for container in containers.iter_mut().filter(|c| c.is_object()) {
                let image = container
                    .get("image")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let pull = if image_has_fixed_tag(image) {
                    "IfNotPresent"
                } else {
                    "Always"
                };
                default_str(container, "imagePullPolicy", pull);
                default_str(container, "terminationMessagePath", "/dev/termination-log");
                default_str(container, "terminationMessagePolicy", "File");
                default_value(container, "resources", json!({}));
                default_requests_to_limits(container);
            }
        }
    }
}

/// Requests default to limits, resource by resource, as upstream's pod defaulting does.
pub fn default_requests_to_limits(container: &mut Value) {
    let Some(limits) = container
        .at("/resources/limits")
        .and_then(Value::as_object)
        .cloned()
    else {
        return;
    };
    for (name, value) in limits {
        if container
            .at(&format!("/resources/requests/{name}"))
            .is_none()
        {
            if !container["resources"]["requests"].is_object() {
                container["resources"]["requests"] = json!({});
            }
            container["resources"]["requests"][&name] = value;
        }
    }
}

fn image_has_fixed_tag(image: &str) -> bool {
    if image.contains('@') {
        return true;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) => tag != "latest",
        None => false,
    }
}

/// The pod's QoS class: Guaranteed, Burstable or BestEffort, as upstream computes it.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|list| spec.get(*list).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any_set = false;
    let mut guaranteed = !containers.is_empty();
    for container in &containers {
        let requests = container
            .at("/resources/requests")
            .and_then(Value::as_object);
        let limits = container.at("/resources/limits").and_then(Value::as_object);
        let is_compute = |name: &String| name == "cpu" || name == "memory";
        if requests.is_some_and(|r| r.keys().any(is_compute))
            || limits.is_some_and(|l| l.keys().any(is_compute))
        {
            any_set = true;
        }
        for resource in ["cpu", "memory"] {
            let limit = limits.and_then(|l| l.get(resource));
            let request = requests.and_then(|r| r.get(resource)).or(limit);
            let equal = match (limit, request) {
                (Some(l), Some(r)) => quantity(l) == quantity(r),
                _ => false,
            };
            if !equal {
                guaranteed = false;
            }
        }
    }
    if !any_set {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn quantity(value: &Value) -> Option<Quantity> {
    value.as_str()?.parse().ok()
}

/// Rules of a kind that a structural schema cannot express, checked on create and update.
pub fn validate(resource: Resource, object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    match (resource.group(), resource.kind()) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            causes.extend(crate::crd::validate(object))
        }
        (crate::convert::NATIVE_CONVERSION_GROUP, kind) if resource.is_custom() => causes.extend(
            crate::validation::kueue::validate(kind, &kueue_v1beta2(kind, object)),
        ),
        ("", "Pod") => match object.get("spec") {
            Some(spec) => causes.extend(pod_spec::validate(
                spec,
                "spec",
                &PodSpecOptions {
                    is_pod: true,
                    ..PodSpecOptions::default()
                },
            )),
            None => causes.push(Cause::required("spec.containers")),
        },
        ("", "PodTemplate") => check_template(object, "/template", "template", &[], &mut causes),
        ("", "ReplicationController")
        | ("apps", "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet") => {
            // A StatefulSet's pods also get a claim volume per volumeClaimTemplate.
            let claim_templates: Vec<&str> = object
                .at("/spec/volumeClaimTemplates")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|claim| claim.at("/metadata/name").and_then(Value::as_str))
                .collect();
            check_template(
                object,
                "/spec/template",
                "spec.template",
                &claim_templates,
                &mut causes,
            );
            if let Some(replicas) = object.at("/spec/replicas").and_then(Value::as_i64)
                && replicas < 0
            {
                causes.push(Cause::invalid(
                    "spec.replicas",
                    &json!(replicas),
                    "must be greater than or equal to 0",
                ));
            }
        }
        ("autoscaling", "HorizontalPodAutoscaler") => {
            causes.extend(crate::autoscaling::validate(object));
        }
        ("networking.k8s.io", "NetworkPolicy") => {
            causes.extend(crate::validation::network_policy::validate(object));
        }
        ("batch", "Job") => check_job_template(object, "/spec", "spec", &mut causes),
        ("batch", "CronJob") => check_job_template(
            object,
            "/spec/jobTemplate/spec",
            "spec.jobTemplate.spec",
            &mut causes,
        ),
        ("resource.k8s.io", "DeviceClass") => {
            check_selectors(object.at("/spec/selectors"), "spec.selectors", &mut causes);
            check_extended_resource_name(object, &mut causes);
        }
        ("resource.k8s.io", kind @ ("ResourceClaim" | "ResourceClaimTemplate")) => {
            let (pointer, path) = if kind == "ResourceClaim" {
                ("/spec/devices/requests", "spec.devices.requests")
            } else {
                ("/spec/spec/devices/requests", "spec.spec.devices.requests")
            };
            let requests = object.at(pointer).and_then(Value::as_array);
            for (i, request) in requests.into_iter().flatten().enumerate() {
                check_selectors(
                    request.at("/exactly/selectors"),
                    &format!("{path}[{i}].exactly.selectors"),
                    &mut causes,
                );
                // v1beta1 requests hold their selectors themselves.
                check_selectors(
                    request.get("selectors"),
                    &format!("{path}[{i}].selectors"),
                    &mut causes,
                );
                let subrequests = request.get("firstAvailable").and_then(Value::as_array);
                for (j, sub) in subrequests.into_iter().flatten().enumerate() {
                    check_selectors(
                        sub.get("selectors"),
                        &format!("{path}[{i}].firstAvailable[{j}].selectors"),
                        &mut causes,
                    );
                }
            }
        }
        _ => {}
    }
    causes
}

/// A DeviceClass's `spec.extendedResourceName` must be an extended resource name, as
/// upstream's `validateDeviceClassSpec` requires.
fn check_extended_resource_name(object: &Value, causes: &mut Vec<Cause>) {
    let Some(value) = object.at("/spec/extendedResourceName") else {
        return;
    };
    let valid = value
        .as_str()
        .is_some_and(tessera_model::extended_resources::is_extended_resource_name);
    if !valid && !value.is_null() {
        causes.push(Cause::invalid(
            "spec.extendedResourceName",
            value,
            "must be a valid extended resource name",
        ));
    }
}

/// Device selectors must compile in the DRA CEL environment and stay within its size limit,
/// as upstream checks when a claim or class is written.
fn check_selectors(selectors: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    for (i, selector) in selectors
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(expression) = selector.at("/cel/expression").and_then(Value::as_str) else {
            continue;
        };
        if let Err(error) = tessera_dra::selector::Selector::compile(expression) {
            let detail = match error {
                tessera_dra::selector::SelectorError::Compile { message, .. } => {
                    format!("compilation failed: {message}")
                }
                other => other.to_string(),
            };
            causes.push(Cause::invalid(
                format!("{path}[{i}].cel.expression"),
                &json!(expression),
                detail,
            ));
        }
    }
}

/// The pod template at `pointer` (shown as `path`) of a workload, checked as upstream's
/// `ValidatePodTemplateSpec` checks it; `claim_templates` names the claim volumes the
/// workload's controller adds to each pod.
fn check_template(
    object: &Value,
    pointer: &str,
    path: &str,
    claim_templates: &[&str],
    causes: &mut Vec<Cause>,
) {
    if let Some(spec) = object.at(&format!("{pointer}/spec")) {
        causes.extend(pod_spec::validate(
            spec,
            &format!("{path}.spec"),
            &PodSpecOptions {
                is_pod: false,
                claim_template_volumes: claim_templates,
            },
        ));
    }
}

/// A Job's spec (a Job's own or a CronJob's `jobTemplate.spec`) at `pointer`: its pod
/// template, whose pods may restart only `OnFailure` or `Never`.
fn check_job_template(object: &Value, pointer: &str, path: &str, causes: &mut Vec<Cause>) {
    let template = format!("{pointer}/template");
    check_template(object, &template, &format!("{path}.template"), &[], causes);
    let given = object
        .at(&format!("{template}/spec/restartPolicy"))
        .and_then(Value::as_str)
        .unwrap_or("Always");
    if !matches!(given, "Never" | "OnFailure") {
        causes.push(Cause::not_supported(
            format!("{path}.template.spec.restartPolicy"),
            &json!(given),
            &["OnFailure", "Never"],
        ));
    }
}

/// Rules about what an update may change, beyond those of [`validate`].
/// Whether two pod specs differ only in what a pod update may change: container images,
/// `activeDeadlineSeconds`, `tolerations`, `schedulingGates` and (when unset before)
/// `nodeName`. Compared in place, without copying either spec; as `Value`'s equality, the
/// order of an object's keys does not matter.
fn pod_specs_alike(old: Option<&Value>, new: Option<&Value>, node_name_mutable: bool) -> bool {
    let mutable = |key: &str| {
        matches!(
            key,
            "activeDeadlineSeconds" | "tolerations" | "schedulingGates"
        ) || (node_name_mutable && key == "nodeName")
    };
    let containers_alike = |old: &Value, new: &Value| match (old, new) {
        (Value::Array(old), Value::Array(new)) => {
            old.len() == new.len()
                && old.iter().zip(new).all(|(old, new)| {
                    objects_alike(old, new, &|key| key == "image", &|_, o, n| o == n)
                })
        }
        _ => old == new,
    };
    match (old, new) {
        (Some(old), Some(new)) => objects_alike(old, new, &mutable, &|key, old, new| {
            if matches!(key, "containers" | "initContainers") {
                containers_alike(old, new)
            } else {
                old == new
            }
        }),
        (old, new) => old.unwrap_or(&Value::Null) == new.unwrap_or(&Value::Null),
    }
}

/// Whether two objects hold the same fields, leaving out those `ignored` says, each pair
/// compared by `alike`; values that are not objects are compared as they are.
fn objects_alike(
    old: &Value,
    new: &Value,
    ignored: &dyn Fn(&str) -> bool,
    alike: &dyn Fn(&str, &Value, &Value) -> bool,
) -> bool {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return old == new;
    };
    let kept = |map: &serde_json::Map<String, Value>| map.keys().filter(|k| !ignored(k)).count();
    kept(old) == kept(new)
        && old
            .iter()
            .filter(|(key, _)| !ignored(key))
            .all(|(key, value)| new.get(key).is_some_and(|other| alike(key, value, other)))
}

/// Whether the old pod is scheduling-gated and the new nodeSelector keeps every old entry.
fn gated_selector_grown(old: &Value, new: &Value) -> bool {
    let gated = old
        .at("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|gates| !gates.is_empty());
    let empty = serde_json::Map::new();
    let selector = |pod: &Value| {
        pod.at("/spec/nodeSelector")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_else(|| empty.clone())
    };
    let (before, after) = (selector(old), selector(new));
    gated
        && before
            .iter()
            .all(|(key, value)| after.get(key) == Some(value))
}

pub fn validate_update(resource: Resource, old: &Value, new: &Value) -> Vec<Cause> {
    // Kueue's job webhooks check the topology annotations on updates too.
    let mut causes = crate::validation::kueue_tas::validate(resource.group(), resource.kind(), new);
    if resource.group() == crate::convert::NATIVE_CONVERSION_GROUP && resource.is_custom() {
        let kind = resource.kind();
        causes.extend(crate::validation::kueue::validate_update(
            kind,
            &kueue_v1beta2(kind, old),
            &kueue_v1beta2(kind, new),
        ));
    }
    if (resource.group(), resource.kind()) == ("", "Pod") {
        // spec.nodeName may be set once (binding).
        let node_name_mutable = old.at("/spec/nodeName").is_none();
        // While gated, a pod's nodeSelector may gain entries (upstream's mutable scheduling
        // directives): compared as if the old spec had the new selector.
        let relaxed = gated_selector_grown(old, new).then(|| {
            let mut spec = old.get("spec").cloned().unwrap_or_default();
            spec["nodeSelector"] = new.at("/spec/nodeSelector").cloned().unwrap_or_default();
            spec
        });
        let old_spec = relaxed.as_ref().or(old.get("spec"));
        if !pod_specs_alike(old_spec, new.get("spec"), node_name_mutable) {
            causes.push(Cause::forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            ));
        }
    }
    if let (Some(old_selector), Some(new_selector)) =
        (old.at("/spec/selector"), new.at("/spec/selector"))
        && resource.group() == "apps"
        && old_selector != new_selector
    {
        causes.push(Cause::invalid(
            "spec.selector",
            new_selector,
            "field is immutable",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_and_volumes_are_defaulted_as_upstream() {
        let mut claim =
            json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}});
        prepare_for_create(
            Resource::find("", "v1", "persistentvolumeclaims").unwrap(),
            &mut claim,
        );
        assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
        assert_eq!(claim["status"]["phase"], "Pending");
        let mut volume = json!({"metadata": {"name": "pv"},
            "spec": {"volumeMode": "Block", "capacity": {"storage": "1Gi"}}});
        prepare_for_create(
            Resource::find("", "v1", "persistentvolumes").unwrap(),
            &mut volume,
        );
        assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(volume["spec"]["volumeMode"], "Block", "a set mode stays");
        assert_eq!(volume["status"]["phase"], "Pending");
    }

    #[test]
    fn a_gated_pods_node_selector_may_only_grow() {
        let gate = json!([{"name": "kueue.x-k8s.io/admission"}]);
        // (old gates, old selector, new selector, allowed)
        let table = [
            (
                gate.clone(),
                json!({"a": "1"}),
                json!({"a": "1", "b": "2"}),
                true,
            ),
            (gate.clone(), Value::Null, json!({"b": "2"}), true),
            (gate.clone(), json!({"a": "1"}), json!({"a": "2"}), false),
            (gate.clone(), json!({"a": "1"}), json!({}), false),
            (
                json!([]),
                json!({"a": "1"}),
                json!({"a": "1", "b": "2"}),
                false,
            ),
        ];
        for (gates, before, after, allowed) in table {
            let pod = |selector: &Value, gates: &Value| {
                json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}],
                    "nodeSelector": selector, "schedulingGates": gates}})
            };
            let old = pod(&before, &gates);
            let new = pod(&after, &json!([]));
            let causes = validate_update(pods(), &old, &new);
            assert_eq!(
                causes.is_empty(),
                allowed,
                "{before} -> {after}: {causes:?}"
            );
        }
    }

    fn pods() -> Resource {
        Resource::find("", "v1", "pods").unwrap()
    }

    #[test]
    fn qos_classes() {
        let table = [
            (json!({"containers": [{"name": "c"}]}), "BestEffort"),
            (
                json!({"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}),
                "Guaranteed",
            ),
            (
                json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}),
                "Burstable",
            ),
            (
                json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1000m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}),
                "Guaranteed",
            ),
            (
                json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}),
                "BestEffort",
            ),
        ];
        for (spec, want) in table {
            assert_eq!(qos_class(&spec), want, "{spec}");
        }
    }

    #[test]
    fn built_in_kinds_are_created_with_an_empty_status() {
        for (group, plural) in [
            ("apps", "deployments"),
            ("batch", "jobs"),
            ("apps", "statefulsets"),
        ] {
            let resource = Resource::find(group, "v1", plural).unwrap();
            let mut object =
                json!({"metadata": {"name": "x"}, "spec": {}, "status": {"replicas": 9}});
            prepare_for_create(resource, &mut object);
            assert!(object["status"].is_object(), "{plural}: {object}");
            // The client's status is dropped; required scalars start at zero.
            assert_ne!(
                object["status"].get("replicas"),
                Some(&json!(9)),
                "{plural}: {object}"
            );
        }
        let zero = |group: &str, version: &str, plural: &str| {
            let mut object = json!({"metadata": {"name": "x"}, "spec": {}});
            prepare_for_create(Resource::find(group, version, plural).unwrap(), &mut object);
            object["status"].clone()
        };
        assert_eq!(
            zero("autoscaling", "v2", "horizontalpodautoscalers"),
            json!({"desiredReplicas": 0})
        );
        assert_eq!(
            zero("autoscaling", "v1", "horizontalpodautoscalers"),
            json!({"currentReplicas": 0, "desiredReplicas": 0})
        );
        assert_eq!(
            zero("policy", "v1", "poddisruptionbudgets"),
            json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0})
        );
        let config_map = Resource::find("", "v1", "configmaps").unwrap();
        let mut object = json!({"metadata": {"name": "x"}});
        prepare_for_create(config_map, &mut object);
        assert!(object.get("status").is_none());
    }

    #[test]
    fn pod_defaults_and_status() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                             "status": {"phase": "Running"}});
        prepare_for_create(pods(), &mut pod);
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        let mut pinned = json!({"spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
        prepare_for_create(pods(), &mut pinned);
        assert_eq!(
            pinned["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
    }

    /// DRA selectors are compiled when a class, claim or template is written; one that does
    /// not compile (syntax, an undeclared function or variable) is refused at its field, in
    /// upstream's words; the Kubernetes libraries (strings, lists, semver, ...) compile.
    #[test]
    fn dra_selectors_must_compile() {
        let claims = Resource::find("resource.k8s.io", "v1", "resourceclaims").unwrap();
        let templates = Resource::find("resource.k8s.io", "v1", "resourceclaimtemplates").unwrap();
        let classes = Resource::find("resource.k8s.io", "v1", "deviceclasses").unwrap();
        let selectors = |expression: &str| json!([{"cel": {"expression": expression}}]);
        let claim = |expression: &str| {
            json!({"spec": {"devices": {"requests": [
                {"name": "a", "exactly": {"deviceClassName": "c", "selectors": selectors("true")}},
                {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "c", "selectors": selectors(expression)}]},
                {"name": "gpu", "exactly": {"deviceClassName": "c", "selectors": selectors(expression)}}]}}})
        };
        // (resource, object, expected (field, message) of each cause)
        type Case = (Resource, Value, Vec<(&'static str, &'static str)>);
        let table: [Case; 6] = [
            (
                claims,
                claim(
                    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$') && device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))",
                ),
                vec![],
            ),
            (
                claims,
                claim("device.driver =="),
                vec![
                    (
                        "spec.devices.requests[1].firstAvailable[0].selectors[0].cel.expression",
                        "Invalid value: \"device.driver ==\": compilation failed: ERROR: <input>:1:",
                    ),
                    (
                        "spec.devices.requests[2].exactly.selectors[0].cel.expression",
                        "Invalid value: \"device.driver ==\": compilation failed: ERROR: <input>:1:",
                    ),
                ],
            ),
            (
                claims,
                claim("device.driver.quantityLike()"),
                vec![
                    (
                        "spec.devices.requests[1].firstAvailable[0].selectors[0].cel.expression",
                        "Invalid value: \"device.driver.quantityLike()\": compilation failed: ERROR: <input>:1:27: undeclared reference to 'quantityLike' (in container '')",
                    ),
                    (
                        "spec.devices.requests[2].exactly.selectors[0].cel.expression",
                        "Invalid value: \"device.driver.quantityLike()\": compilation failed: ERROR: <input>:1:27: undeclared reference to 'quantityLike' (in container '')",
                    ),
                ],
            ),
            (
                templates,
                json!({"spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c", "selectors": selectors("dev.driver == 'x'")}}]}}}}),
                vec![(
                    "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression",
                    "Invalid value: \"dev.driver == 'x'\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'dev' (in container '')",
                )],
            ),
            (
                classes,
                json!({"spec": {"selectors": selectors("[1, 2].isSorted() && cidr('10.0.0.0/8').containsIP('10.1.2.3')")}}),
                vec![],
            ),
            (
                classes,
                json!({"spec": {"selectors": selectors("device.attributes['x'].all(k, j)")}}),
                vec![(
                    "spec.selectors[0].cel.expression",
                    "undeclared reference to 'j'",
                )],
            ),
        ];
        for (resource, object, want) in table {
            let causes = validate(resource, &object);
            assert_eq!(causes.len(), want.len(), "{object}: {causes:?}");
            for (cause, (field, message)) in causes.iter().zip(want) {
                assert_eq!(cause.field, field, "{object}");
                assert!(
                    cause.message.contains(message),
                    "{object}: {}",
                    cause.message
                );
            }
        }
    }

    #[test]
    fn device_class_extended_resource_names_must_be_extended_resource_names() {
        let classes = Resource::find("resource.k8s.io", "v1", "deviceclasses").unwrap();
        // (extendedResourceName, expected message), as upstream's validation table.
        let table = [
            (json!("nvidia.com/gpu"), None),
            (json!("example.com/my_resource-1.x"), None),
            (json!(null), None),
            (
                json!("gpu"),
                Some("Invalid value: \"gpu\": must be a valid extended resource name"),
            ),
            (
                json!("kubernetes.io/gpu"),
                Some(
                    "Invalid value: \"kubernetes.io/gpu\": must be a valid extended resource name",
                ),
            ),
            (
                json!("requests.example.com/gpu"),
                Some(
                    "Invalid value: \"requests.example.com/gpu\": must be a valid extended resource name",
                ),
            ),
            (
                json!("deviceclass.resource.kubernetes.io/gpu"),
                Some(
                    "Invalid value: \"deviceclass.resource.kubernetes.io/gpu\": must be a valid extended resource name",
                ),
            ),
            (
                json!("Example.com/gpu"),
                Some("Invalid value: \"Example.com/gpu\": must be a valid extended resource name"),
            ),
        ];
        for (name, want) in table {
            let object = json!({"spec": {"extendedResourceName": name}});
            let causes = validate(classes, &object);
            let got: Vec<(&str, &str)> = causes
                .iter()
                .map(|c| (c.field.as_str(), c.message.as_str()))
                .collect();
            let want: Vec<(&str, &str)> = want
                .map(|m| ("spec.extendedResourceName", m))
                .into_iter()
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn pod_validation_rules() {
        let pod = json!({"spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
            {"name": "c", "image": ""}]}});
        let causes = validate(pods(), &pod);
        let fields: Vec<_> = causes
            .iter()
            .map(|c| (c.reason, c.field.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("FieldValueInvalid", "spec.containers[0].resources.requests"),
                ("FieldValueRequired", "spec.containers[1].image"),
                ("FieldValueDuplicate", "spec.containers[1].name"),
            ]
        );
    }

    #[test]
    fn templates_are_validated_at_their_paths() {
        let bad_mount = json!({"containers": [{"name": "c", "image": "i",
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "restartPolicy": "Never"});
        let template = json!({"metadata": {"labels": {"app": "a"}}, "spec": bad_mount});
        let table = [
            (
                "",
                "v1",
                "PodTemplate",
                json!({"template": template}),
                Some("template.spec"),
            ),
            (
                "",
                "v1",
                "ReplicationController",
                json!({"spec": {"template": template}}),
                Some("spec.template.spec"),
            ),
            (
                "apps",
                "v1",
                "Deployment",
                json!({"spec": {"template": template}}),
                Some("spec.template.spec"),
            ),
            (
                "apps",
                "v1",
                "DaemonSet",
                json!({"spec": {"template": template}}),
                Some("spec.template.spec"),
            ),
            (
                "batch",
                "v1",
                "Job",
                json!({"spec": {"template": template}}),
                Some("spec.template.spec"),
            ),
            (
                "batch",
                "v1",
                "CronJob",
                json!({"spec": {"jobTemplate": {"spec": {"template": template}}}}),
                Some("spec.jobTemplate.spec.template.spec"),
            ),
            (
                "apps",
                "v1",
                "StatefulSet",
                json!({"spec": {"template": template}}),
                Some("spec.template.spec"),
            ),
            (
                "apps",
                "v1",
                "StatefulSet",
                json!({"spec": {"template": template,
                                "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}}),
                None,
            ),
        ];
        for (group, version, kind, object, path) in table {
            let resource = Resource::find_kind(group, version, kind).expect("served kind");
            let fields: Vec<_> = validate(resource, &object)
                .into_iter()
                .map(|c| (c.reason, c.field))
                .collect();
            let expected: Vec<_> = path
                .map(|p| {
                    (
                        "FieldValueNotFound",
                        format!("{p}.containers[0].volumeMounts[0].name"),
                    )
                })
                .into_iter()
                .collect();
            assert_eq!(fields, expected, "{kind}");
        }
    }

    #[test]
    fn pod_spec_is_mostly_immutable() {
        let old = json!({"spec": {"containers": [{"name": "c", "image": "a"}]}});
        let image_change = json!({"spec": {"containers": [{"name": "c", "image": "b"}]}});
        let env_change =
            json!({"spec": {"containers": [{"name": "c", "image": "a", "env": [{"name": "X"}]}]}});
        let binding =
            json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "a"}]}});
        assert!(validate_update(pods(), &old, &image_change).is_empty());
        assert!(validate_update(pods(), &old, &binding).is_empty());
        assert_eq!(
            validate_update(pods(), &old, &env_change)[0].reason,
            "FieldValueForbidden"
        );
    }

    #[test]
    fn pod_specs_are_compared_in_place_as_values_are() {
        let spec = json!({"nodeName": "n1", "restartPolicy": "Always",
            "containers": [{"name": "c", "image": "a", "args": ["x"]}],
            "initContainers": [{"name": "i", "image": "a"}]});
        // (case, new spec, nodeName still settable, alike)
        let table = [
            ("same", spec.clone(), false, true),
            (
                "keys in another order",
                json!({"containers": [{"args": ["x"], "image": "a", "name": "c"}],
                "initContainers": [{"name": "i", "image": "a"}],
                "restartPolicy": "Always", "nodeName": "n1"}),
                false,
                true,
            ),
            (
                "images changed",
                json!({"nodeName": "n1", "restartPolicy": "Always",
                "containers": [{"name": "c", "image": "b", "args": ["x"]}],
                "initContainers": [{"name": "i", "image": "b"}]}),
                false,
                true,
            ),
            (
                "tolerations and deadline added",
                json!({"nodeName": "n1", "restartPolicy": "Always",
                "activeDeadlineSeconds": 5, "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "image": "a", "args": ["x"]}],
                "initContainers": [{"name": "i", "image": "a"}]}),
                false,
                true,
            ),
            (
                "node changed once set",
                json!({"nodeName": "n2", "restartPolicy": "Always",
                "containers": [{"name": "c", "image": "a", "args": ["x"]}],
                "initContainers": [{"name": "i", "image": "a"}]}),
                false,
                false,
            ),
            (
                "node set while unset",
                json!({"nodeName": "n2", "restartPolicy": "Always",
                "containers": [{"name": "c", "image": "a", "args": ["x"]}],
                "initContainers": [{"name": "i", "image": "a"}]}),
                true,
                true,
            ),
            (
                "container args changed",
                json!({"nodeName": "n1", "restartPolicy": "Always",
                "containers": [{"name": "c", "image": "a", "args": ["y"]}],
                "initContainers": [{"name": "i", "image": "a"}]}),
                false,
                false,
            ),
            (
                "a container added",
                json!({"nodeName": "n1", "restartPolicy": "Always",
                "containers": [{"name": "c", "image": "a", "args": ["x"]}, {"name": "d"}],
                "initContainers": [{"name": "i", "image": "a"}]}),
                false,
                false,
            ),
            (
                "a field removed",
                json!({"nodeName": "n1",
                "containers": [{"name": "c", "image": "a", "args": ["x"]}],
                "initContainers": [{"name": "i", "image": "a"}]}),
                false,
                false,
            ),
            ("not an object", json!("spec"), false, false),
        ];
        for (case, new, node_name_mutable, alike) in table {
            assert_eq!(
                pod_specs_alike(Some(&spec), Some(&new), node_name_mutable),
                alike,
                "{case}"
            );
        }
        assert!(pod_specs_alike(None, None, true));
        assert!(!pod_specs_alike(None, Some(&spec), true));
    }
}
