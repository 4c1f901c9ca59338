//! Kueue's webhooks for plain Pods and the workloads whose pods it manages, which Tessera runs
//! because it bundles Kueue (`pkg/controller/jobs/{pod,deployment,statefulset,leaderworkerset}`):
//! a Deployment, StatefulSet or LeaderWorkerSet naming a LocalQueue marks its pod template
//! ([`default_parent`]); a pod naming a LocalQueue, or marked by its parent, is created behind
//! the `kueue.x-k8s.io/admission` scheduling gate with Kueue's managed label, finalizer and
//! role hash ([`default_pod`]); a StatefulSet's or LeaderWorkerSet group's pods are labelled as
//! one pod group at creation (what Kueue's StatefulSet and LeaderWorkerSet pod reconcilers set
//! right after it); and a pod's group metadata is checked ([`validate_pod`]).
//!
//! Knows nothing about Workloads or admission: the queue manager's pod integration
//! (`tessera-queue`) ungates the pods.

use serde_json::{Map, Value, json};
use tessera_model::json::Pointer as _;
use tessera_model::kueue::pod::{
    self, ADMISSION_GATE, FAST_ADMISSION, FINALIZER, GROUP_NAME, GROUP_TOTAL_COUNT, LWS_NAME,
    LWS_WORKER_INDEX, MANAGED_LABEL, MANAGED_VALUE, PREBUILT_WORKLOAD, ROLE_HASH, SERVING,
    SUSPENDED_BY_PARENT,
};
use tessera_model::kueue::topology::TOPOLOGY_SCHEDULING_GATE;
use tessera_model::kueue::{PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, workload_name};

use crate::error::Cause;
use crate::lister::Lister;
use crate::resource::Resource;

/// The LeaderWorkerSet API group.
const LWS_GROUP: &str = "leaderworkerset.x-k8s.io";

/// An object's queue name (`QueueNameForObject`), if not empty.
fn queue_name(object: &Value) -> Option<&str> {
    pod::label(object, QUEUE_NAME_LABEL).filter(|name| !name.is_empty())
}

fn map_at<'a>(object: &'a mut Value, pointer: &str) -> Option<&'a mut Map<String, Value>> {
    let mut at = object;
    for key in pointer.split('/').filter(|k| !k.is_empty()) {
        let map = at.as_object_mut()?;
        at = map.entry(key).or_insert_with(|| json!({}));
        if at.is_null() {
            *at = json!({});
        }
    }
    at.as_object_mut()
}

fn set(object: &mut Value, pointer: &str, key: &str, value: &str) {
    if let Some(map) = map_at(object, pointer) {
        map.insert(key.to_owned(), json!(value));
    }
}

/// The webhooks of Deployments, StatefulSets and LeaderWorkerSets naming a LocalQueue: their
/// pod templates carry `kueue.x-k8s.io/pod-suspending-parent`, and (Deployments and
/// LeaderWorkerSets) the managed and queue-name labels and the WorkloadPriorityClass label.
pub fn default_parent(resource: Resource, object: &mut Value) {
    let templates: &[&str] = match (resource.group(), resource.kind()) {
        ("apps", "Deployment") | ("apps", "StatefulSet") => &["/spec/template"],
        (LWS_GROUP, "LeaderWorkerSet") => &[
            "/spec/leaderWorkerTemplate/leaderTemplate",
            "/spec/leaderWorkerTemplate/workerTemplate",
        ],
        _ => return,
    };
    let Some(queue) = queue_name(object).map(str::to_owned) else {
        return;
    };
    let priority = pod::label(object, PRIORITY_CLASS_LABEL).map(str::to_owned);
    let framework = match resource.kind() {
        "Deployment" => "deployment",
        "StatefulSet" => "statefulset",
        _ => "leaderworkerset",
    };
    for template in templates {
        if object.at(template).is_none_or(Value::is_null) {
            continue;
        }
        let annotations = format!("{template}/metadata/annotations");
        set(object, &annotations, SUSPENDED_BY_PARENT, framework);
        if framework == "statefulset" {
            continue;
        }
        let labels = format!("{template}/metadata/labels");
        if framework == "deployment" {
            set(object, &labels, MANAGED_LABEL, MANAGED_VALUE);
        }
        set(object, &labels, QUEUE_NAME_LABEL, &queue);
        if let Some(priority) = &priority {
            set(object, &labels, PRIORITY_CLASS_LABEL, priority);
        }
    }
}

/// The pod's controller, as (kind, name).
fn controller(pod: &Value) -> Option<(&str, &str)> {
    pod.at("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true)
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default(),
                r["name"].as_str().unwrap_or_default(),
            )
        })
}

/// Kueue's pod webhook `Default`: a pod naming a LocalQueue gets the managed label and the
/// finalizer; it, or one its parent integration suspends, is gated and annotated with its
/// role hash. A Job's pods are the Job integration's. The pods of a StatefulSet or a
/// LeaderWorkerSet group first get their group's labels and annotations.
pub fn default_pod(objects: &dyn Lister, namespace: Option<&str>, object: &mut Value) {
    let parent = pod::annotation(object, SUSPENDED_BY_PARENT).map(str::to_owned);
    match parent.as_deref() {
        Some("statefulset") => label_statefulset_pod(objects, namespace, object),
        Some("leaderworkerset") => label_leaderworkerset_pod(objects, namespace, object),
        Some(_) => {}
        None => {
            if controller(object).is_some_and(|(kind, _)| kind == "Job")
                || queue_name(object).is_none()
            {
                return;
            }
            set(object, "/metadata/labels", MANAGED_LABEL, MANAGED_VALUE);
            add_finalizer(object);
        }
    }
    gate(object);
    if pod::annotation(object, ROLE_HASH).is_none() {
        let hash = pod::role_hash(object.get("spec").unwrap_or(&Value::Null));
        set(object, "/metadata/annotations", ROLE_HASH, &hash);
    }
}

fn add_finalizer(object: &mut Value) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let finalizers = metadata.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(list) = finalizers.as_array_mut()
        && !list.iter().any(|f| f == FINALIZER)
    {
        list.push(json!(FINALIZER));
    }
}

/// The pod webhook's gates: `kueue.x-k8s.io/admission`, and (TopologyAwareScheduling, on by
/// default) `kueue.x-k8s.io/topology`, which the pod integration lifts at admission unless
/// the pod's PodSet was given a topology assignment. Each added once.
fn gate(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let gates = spec.entry("schedulingGates").or_insert_with(|| json!([]));
    if gates.is_null() {
        *gates = json!([]);
    }
    if let Some(list) = gates.as_array_mut() {
        for name in [ADMISSION_GATE, TOPOLOGY_SCHEDULING_GATE] {
            if !list.iter().any(|gate| gate["name"] == name) {
                list.push(json!({ "name": name }));
            }
        }
    }
}

/// The labels and annotations of a pod in a group Kueue forms for a parent.
struct GroupMembership<'a> {
    parent: &'a Value,
    group: String,
    total_count: i64,
    role: &'a str,
}

fn join_group(object: &mut Value, membership: GroupMembership<'_>) {
    let labels = "/metadata/labels";
    let annotations = "/metadata/annotations";
    set(object, labels, MANAGED_LABEL, MANAGED_VALUE);
    if let Some(queue) = queue_name(membership.parent) {
        set(object, labels, QUEUE_NAME_LABEL, queue);
    }
    if let Some(priority) = pod::label(membership.parent, PRIORITY_CLASS_LABEL) {
        set(object, labels, PRIORITY_CLASS_LABEL, priority);
    }
    set(object, labels, PREBUILT_WORKLOAD, &membership.group);
    set(object, labels, GROUP_NAME, &membership.group);
    let count = membership.total_count.to_string();
    set(object, annotations, GROUP_TOTAL_COUNT, &count);
    set(object, annotations, ROLE_HASH, membership.role);
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .at(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Kueue's StatefulSet pod reconciler: one group per StatefulSet, named by its Workload,
/// `replicas` pods, admitted on its first pod (`fast-admission`) and never finished (`serving`).
fn label_statefulset_pod(objects: &dyn Lister, namespace: Option<&str>, object: &mut Value) {
    let Some((_, name)) = controller(object).filter(|(kind, _)| *kind == "StatefulSet") else {
        return;
    };
    let Some(resource) = Resource::find("apps", "v1", "statefulsets") else {
        return;
    };
    let Some(parent) = objects.get(resource, namespace, name) else {
        return;
    };
    let group = workload_name(
        "StatefulSet",
        "apps",
        text(&parent, "/metadata/name"),
        text(&parent, "/metadata/uid"),
    );
    let total_count = parent
        .at("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    join_group(
        object,
        GroupMembership {
            parent: &parent,
            group,
            total_count,
            role: "main",
        },
    );
    set(object, "/metadata/annotations", FAST_ADMISSION, "true");
    set(object, "/metadata/annotations", SERVING, "true");
}

/// Kueue's LeaderWorkerSet reconciler: one group per LeaderWorkerSet group (its index), of
/// `size` pods, roles `leader` and `worker` when it has a leader template, else `main`.
fn label_leaderworkerset_pod(objects: &dyn Lister, namespace: Option<&str>, object: &mut Value) {
    let (Some(name), Some(index)) = (
        pod::label(object, LWS_NAME).map(str::to_owned),
        pod::lws_group_index(object).map(str::to_owned),
    ) else {
        return;
    };
    let Some(resource) = objects
        .resources()
        .into_iter()
        .find(|r| r.group() == LWS_GROUP && r.kind() == "LeaderWorkerSet")
    else {
        return;
    };
    let Some(parent) = objects.get(resource, namespace, &name) else {
        return;
    };
    let group = workload_name(
        "LeaderWorkerSet",
        LWS_GROUP,
        &format!("{name}-{index}"),
        text(&parent, "/metadata/uid"),
    );
    let total_count = parent
        .at("/spec/leaderWorkerTemplate/size")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let has_leader = parent
        .at("/spec/leaderWorkerTemplate/leaderTemplate")
        .is_some_and(|t| !t.is_null());
    let role = match (has_leader, pod::label(object, LWS_WORKER_INDEX)) {
        (false, _) => "main",
        (true, Some("0")) => "leader",
        (true, _) => "worker",
    };
    join_group(
        object,
        GroupMembership {
            parent: &parent,
            group,
            total_count,
            role,
        },
    );
}

/// Kueue's pod webhook validation of group metadata (`validatePodGroupMetadata`): both the
/// group name label and the total-count annotation or neither, a name that is a DNS subdomain,
/// a count that is a positive number.
pub fn validate_pod(object: &Value) -> Vec<Cause> {
    let name_path = format!("metadata.labels[{GROUP_NAME}]");
    let count_path = format!("metadata.annotations[{GROUP_TOTAL_COUNT}]");
    let detail = format!(
        "both the '{GROUP_TOTAL_COUNT}' annotation and the '{GROUP_NAME}' label should be set"
    );
    let count = pod::annotation(object, GROUP_TOTAL_COUNT);
    let mut causes = Vec::new();
    match pod::group_name(object) {
        None => {
            if count.is_some() {
                causes.push(Cause::required_because(name_path, detail));
            }
            return causes;
        }
        Some(group) => {
            let problems = crate::validation::pod_spec::dns_subdomain(group, false);
            if !problems.is_empty() {
                causes.push(Cause::invalid(
                    name_path,
                    &json!(group),
                    problems.join("; "),
                ));
            }
        }
    }
    let Some(count) = count else {
        causes.push(Cause::required_because(count_path, detail));
        return causes;
    };
    if let Err(error) = total_count(count) {
        causes.push(Cause::invalid(count_path, &json!(count), error));
    }
    causes
}

/// `groupTotalCount`'s reading of the annotation, with Go's messages.
pub fn total_count(value: &str) -> Result<i64, String> {
    let count: i64 = value
        .parse()
        .map_err(|_| format!("strconv.Atoi: parsing {value:?}: invalid syntax"))?;
    if count < 1 {
        return Err(format!(
            "incorrect annotation value '{GROUP_TOTAL_COUNT}={value}': group total count should be greater than zero"
        ));
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Parents(Vec<(Resource, Value)>);

    impl Lister for Parents {
        fn list(&self, _: Resource, _: Option<&str>) -> Vec<Value> {
            Vec::new()
        }
        fn get(&self, resource: Resource, _: Option<&str>, name: &str) -> Option<Value> {
            self.0
                .iter()
                .find(|(r, o)| r.kind() == resource.kind() && o["metadata"]["name"] == name)
                .map(|(_, o)| o.clone())
        }
        fn resources(&self) -> Vec<Resource> {
            self.0.iter().map(|(r, _)| *r).collect()
        }
    }

    fn pod(labels: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "labels": labels, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})
    }

    #[test]
    fn pods_naming_a_queue_are_gated_as_kueues_webhook_does() {
        let none = Parents(Vec::new());
        // (labels, annotations, owner kind, gated, managed label, finalizer)
        let cases = [
            (
                json!({QUEUE_NAME_LABEL: "q"}),
                json!({}),
                None,
                true,
                true,
                true,
            ),
            (json!({}), json!({}), None, false, false, false),
            (
                json!({QUEUE_NAME_LABEL: ""}),
                json!({}),
                None,
                false,
                false,
                false,
            ),
            (
                json!({QUEUE_NAME_LABEL: "q"}),
                json!({}),
                Some("Job"),
                false,
                false,
                false,
            ),
            // Suspended by a parent: gated, no finalizer, labels from the template.
            (
                json!({MANAGED_LABEL: "true", QUEUE_NAME_LABEL: "q"}),
                json!({SUSPENDED_BY_PARENT: "deployment"}),
                Some("ReplicaSet"),
                true,
                true,
                false,
            ),
        ];
        for (labels, annotations, owner, gated, managed, finalizer) in cases {
            let mut object = pod(labels.clone(), annotations);
            if let Some(kind) = owner {
                object["metadata"]["ownerReferences"] =
                    json!([{"kind": kind, "name": "o", "uid": "u", "controller": true}]);
            }
            default_pod(&none, Some("ns"), &mut object);
            assert_eq!(pod::gated(&object), gated, "{labels}");
            assert_eq!(
                pod::label(&object, MANAGED_LABEL) == Some("true"),
                managed,
                "{labels}"
            );
            assert_eq!(
                object["metadata"]["finalizers"] == json!([FINALIZER]),
                finalizer,
                "{labels}"
            );
            assert_eq!(
                pod::annotation(&object, ROLE_HASH).is_some(),
                gated,
                "{labels}"
            );
        }
    }

    #[test]
    fn a_statefulsets_pods_form_one_group_of_its_replicas() {
        let statefulsets = Resource::find("apps", "v1", "statefulsets").expect("statefulsets");
        let parent = json!({"metadata": {"name": "web", "uid": "s-1", "labels": {QUEUE_NAME_LABEL: "q"}},
            "spec": {"replicas": 3, "template": {}}});
        let mut template_owner = parent.clone();
        default_parent(statefulsets, &mut template_owner);
        assert_eq!(
            template_owner["spec"]["template"]["metadata"]["annotations"][SUSPENDED_BY_PARENT],
            "statefulset"
        );
        let lister = Parents(vec![(statefulsets, parent)]);
        let mut object = pod(json!({}), json!({SUSPENDED_BY_PARENT: "statefulset"}));
        object["metadata"]["ownerReferences"] =
            json!([{"kind": "StatefulSet", "name": "web", "uid": "s-1", "controller": true}]);
        default_pod(&lister, Some("ns"), &mut object);
        let group = workload_name("StatefulSet", "apps", "web", "s-1");
        assert!(group.starts_with("statefulset-web-"));
        assert_eq!(pod::group_name(&object), Some(group.as_str()));
        assert_eq!(pod::label(&object, QUEUE_NAME_LABEL), Some("q"));
        assert_eq!(pod::annotation(&object, GROUP_TOTAL_COUNT), Some("3"));
        assert_eq!(pod::annotation(&object, ROLE_HASH), Some("main"));
        assert!(pod::gated(&object));
        assert!(object["metadata"].get("finalizers").is_none());
    }

    #[test]
    fn a_deployment_naming_a_queue_marks_its_template() {
        let deployments = Resource::find("apps", "v1", "deployments").expect("deployments");
        let mut object =
            json!({"metadata": {"labels": {QUEUE_NAME_LABEL: "q"}}, "spec": {"template": {}}});
        default_parent(deployments, &mut object);
        let template = &object["spec"]["template"]["metadata"];
        assert_eq!(template["annotations"][SUSPENDED_BY_PARENT], "deployment");
        assert_eq!(template["labels"][MANAGED_LABEL], "true");
        assert_eq!(template["labels"][QUEUE_NAME_LABEL], "q");
        let mut plain = json!({"metadata": {}, "spec": {"template": {}}});
        default_parent(deployments, &mut plain);
        assert_eq!(plain["spec"]["template"], json!({}));
    }

    #[test]
    fn group_metadata_errors_match_kueues_webhook() {
        // Ported from pod_webhook_test.go TestValidateCreate: (labels, annotations, field, type).
        let cases = [
            (
                json!({GROUP_NAME: "test-group"}),
                json!({}),
                Some((
                    "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]",
                    "FieldValueRequired",
                )),
            ),
            (
                json!({}),
                json!({GROUP_TOTAL_COUNT: "3"}),
                Some((
                    "metadata.labels[kueue.x-k8s.io/pod-group-name]",
                    "FieldValueRequired",
                )),
            ),
            (
                json!({GROUP_NAME: "test-group"}),
                json!({GROUP_TOTAL_COUNT: "0"}),
                Some((
                    "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]",
                    "FieldValueInvalid",
                )),
            ),
            (
                json!({GROUP_NAME: "test-group"}),
                json!({GROUP_TOTAL_COUNT: ""}),
                Some((
                    "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]",
                    "FieldValueInvalid",
                )),
            ),
            (
                json!({GROUP_NAME: "notAdns1123Subdomain*"}),
                json!({GROUP_TOTAL_COUNT: "2"}),
                Some((
                    "metadata.labels[kueue.x-k8s.io/pod-group-name]",
                    "FieldValueInvalid",
                )),
            ),
            (
                json!({GROUP_NAME: "test-group"}),
                json!({GROUP_TOTAL_COUNT: "2"}),
                None,
            ),
            (json!({}), json!({}), None),
        ];
        for (labels, annotations, want) in cases {
            let causes = validate_pod(&pod(labels.clone(), annotations.clone()));
            let got: Vec<(String, String)> = causes
                .iter()
                .map(|c| (c.field.clone(), c.reason.to_owned()))
                .collect();
            let want: Vec<(String, String)> = want
                .into_iter()
                .map(|(f, r)| (f.to_owned(), r.to_owned()))
                .collect();
            assert_eq!(got, want, "{labels} {annotations}");
        }
        assert_eq!(
            total_count("0").unwrap_err(),
            "incorrect annotation value 'kueue.x-k8s.io/pod-group-total-count=0': group total count should be greater than zero"
        );
    }
}
