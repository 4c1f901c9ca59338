//! kube-state-metrics as a pure function of stored objects: Nodes, Pods, Namespaces,
//! Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, PodDisruptionBudgets and
//! ResourceQuotas become the families KSM (`internal/store/*.go`) exposes, with its names,
//! labels, values and resource-name sanitising (`nvidia.com/gpu` → `nvidia_com_gpu`).
//!
//! Knows objects as JSON values only; does not know where they come from (the API server's
//! store, at scrape time) or KSM's opt-in families (`*_labels`, `*_annotations`), which it
//! leaves out.

use serde_json::Value;
use tessera_model::json::{int, text};

use crate::{Error, Families, Family, family, quantity, quantity_value};

/// The objects kube-state-metrics reads, as stored.
#[derive(Debug, Default, Clone)]
pub struct Objects {
    /// Nodes.
    pub nodes: Vec<Value>,
    /// Pods.
    pub pods: Vec<Value>,
    /// Namespaces.
    pub namespaces: Vec<Value>,
    /// Deployments.
    pub deployments: Vec<Value>,
    /// ReplicaSets.
    pub replicasets: Vec<Value>,
    /// StatefulSets.
    pub statefulsets: Vec<Value>,
    /// DaemonSets.
    pub daemonsets: Vec<Value>,
    /// Jobs.
    pub jobs: Vec<Value>,
    /// PodDisruptionBudgets.
    pub poddisruptionbudgets: Vec<Value>,
    /// ResourceQuotas.
    pub resourcequotas: Vec<Value>,
}

/// The resources (plural, group) kube-state-metrics reads, in [`Objects`]' field order.
pub const RESOURCES: [(&str, &str); 10] = [
    ("nodes", ""),
    ("pods", ""),
    ("namespaces", ""),
    ("deployments", "apps"),
    ("replicasets", "apps"),
    ("statefulsets", "apps"),
    ("daemonsets", "apps"),
    ("jobs", "batch"),
    ("poddisruptionbudgets", "policy"),
    ("resourcequotas", ""),
];

impl Objects {
    /// The list of objects of one of [`RESOURCES`]' plurals.
    pub fn of_mut(&mut self, plural: &str) -> Option<&mut Vec<Value>> {
        Some(match plural {
            "nodes" => &mut self.nodes,
            "pods" => &mut self.pods,
            "namespaces" => &mut self.namespaces,
            "deployments" => &mut self.deployments,
            "replicasets" => &mut self.replicasets,
            "statefulsets" => &mut self.statefulsets,
            "daemonsets" => &mut self.daemonsets,
            "jobs" => &mut self.jobs,
            "poddisruptionbudgets" => &mut self.poddisruptionbudgets,
            "resourcequotas" => &mut self.resourcequotas,
            _ => return None,
        })
    }
}

const CONDITION_STATUSES: [&str; 3] = ["true", "false", "unknown"];

/// KSM's `SanitizeLabelName`: every character outside `[a-zA-Z0-9_]` becomes `_`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// KSM's `isExtendedResourceName`: a qualified name outside `kubernetes.io/`, not a quota
/// `requests.` name.
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// The (sanitised resource, unit, value) KSM reports a resource quantity as, or `None`
/// for a resource it does not report.
pub fn resource_sample(resource: &str, value: &Value) -> Option<(String, &'static str, f64)> {
    let amount = quantity_value(value)?;
    let unit = match resource {
        "cpu" => "core",
        "memory" | "storage" | "ephemeral-storage" => "byte",
        "pods" => "integer",
        r if r.starts_with("hugepages-") || r.starts_with("attachable-volumes-") => "byte",
        r if is_extended(r) => "integer",
        _ => return None,
    };
    // KSM takes CPU as MilliValue/1000 and the rest as Value (rounded up to a whole unit).
    let amount = if unit == "core" {
        (amount * 1000.0).ceil() / 1000.0
    } else {
        amount.ceil()
    };
    Some((sanitize(resource), unit, amount))
}

fn name(object: &Value) -> &str {
    text(object, "/metadata/name")
}

fn namespace(object: &Value) -> &str {
    text(object, "/metadata/namespace")
}

fn uid(object: &Value) -> &str {
    text(object, "/metadata/uid")
}

/// A condition's status as KSM labels it.
fn condition_status(condition: &Value) -> String {
    text(condition, "/status").to_ascii_lowercase()
}

fn conditions(object: &Value) -> &[Value] {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn find_condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    conditions(object).iter().find(|c| text(c, "/type") == kind)
}

#[allow(clippy::cast_precision_loss)]
fn number(object: &Value, pointer: &str) -> f64 {
    int(object, pointer).unwrap_or(0) as f64
}

#[allow(clippy::cast_precision_loss)]
fn unix_seconds(timestamp: &str) -> Option<f64> {
    let time = tessera_model::time::parse_timestamp(timestamp)?;
    let seconds = time.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    Some(seconds as f64)
}

/// Every family kube-state-metrics exposes for `objects`.
pub fn families(objects: &Objects) -> Result<prometheus::Registry, Error> {
    let mut out = Families::new();
    nodes(&mut out, &objects.nodes);
    pods(&mut out, &objects.pods);
    namespaces(&mut out, &objects.namespaces);
    deployments(&mut out, &objects.deployments);
    replicasets(&mut out, &objects.replicasets);
    statefulsets(&mut out, &objects.statefulsets);
    daemonsets(&mut out, &objects.daemonsets);
    jobs(&mut out, &objects.jobs);
    pdbs(&mut out, &objects.poddisruptionbudgets);
    resourcequotas(&mut out, &objects.resourcequotas);
    out.finish()
}

/// The exposition text of [`families`].
pub fn render(objects: &Objects) -> Result<String, Error> {
    crate::render(&[&families(objects)?])
}

const NODE_INFO: Family = family(
    "kube_node_info",
    "Information about a cluster node.",
    &[
        "node",
        "kernel_version",
        "os_image",
        "container_runtime_version",
        "kubelet_version",
        "kubeproxy_version",
        "provider_id",
        "pod_cidr",
        "system_uuid",
        "internal_ip",
    ],
);
const NODE_CREATED: Family = family("kube_node_created", "Unix creation timestamp", &["node"]);
const NODE_UNSCHEDULABLE: Family = family(
    "kube_node_spec_unschedulable",
    "Whether a node can schedule new pods.",
    &["node"],
);
const NODE_TAINT: Family = family(
    "kube_node_spec_taint",
    "The taint of a cluster node.",
    &["node", "key", "value", "effect"],
);
const NODE_CONDITION: Family = family(
    "kube_node_status_condition",
    "The condition of a cluster node.",
    &["node", "condition", "status"],
);
const NODE_CAPACITY: Family = family(
    "kube_node_status_capacity",
    "The capacity for different resources of a node.",
    &["node", "resource", "unit"],
);
const NODE_ALLOCATABLE: Family = family(
    "kube_node_status_allocatable",
    "The allocatable for different resources of a node that are available for scheduling.",
    &["node", "resource", "unit"],
);

fn resources(out: &mut Families, family: &Family, prefix: &[&str], resources: Option<&Value>) {
    let Some(resources) = resources.and_then(Value::as_object) else {
        return;
    };
    for (resource, value) in resources {
        if let Some((resource, unit, amount)) = resource_sample(resource, value) {
            let mut labels = prefix.to_vec();
            labels.push(&resource);
            labels.push(unit);
            out.gauge(family, &labels, amount);
        }
    }
}

fn nodes(out: &mut Families, nodes: &[Value]) {
    for node in nodes {
        let n = name(node);
        let internal_ip = node
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|a| text(a, "/type") == "InternalIP"))
            .map_or("", |a| text(a, "/address"));
        let info = |field: &str| text(node, &format!("/status/nodeInfo/{field}"));
        out.gauge(
            &NODE_INFO,
            &[
                n,
                info("kernelVersion"),
                info("osImage"),
                info("containerRuntimeVersion"),
                info("kubeletVersion"),
                // KSM reports the field as deprecated since Kubernetes 1.31 stopped filling it.
                "deprecated",
                text(node, "/spec/providerID"),
                text(node, "/spec/podCIDR"),
                info("systemUUID"),
                internal_ip,
            ],
            1.0,
        );
        if let Some(created) = unix_seconds(text(node, "/metadata/creationTimestamp")) {
            out.gauge(&NODE_CREATED, &[n], created);
        }
        let unschedulable = node
            .pointer("/spec/unschedulable")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        out.gauge(
            &NODE_UNSCHEDULABLE,
            &[n],
            f64::from(u8::from(unschedulable)),
        );
        for taint in node
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.gauge(
                &NODE_TAINT,
                &[
                    n,
                    text(taint, "/key"),
                    text(taint, "/value"),
                    text(taint, "/effect"),
                ],
                1.0,
            );
        }
        for condition in conditions(node) {
            out.one_hot(
                &NODE_CONDITION,
                &[n, text(condition, "/type")],
                &CONDITION_STATUSES,
                &condition_status(condition),
            );
        }
        resources(out, &NODE_CAPACITY, &[n], node.pointer("/status/capacity"));
        resources(
            out,
            &NODE_ALLOCATABLE,
            &[n],
            node.pointer("/status/allocatable"),
        );
    }
}

const POD: &[&str] = &["namespace", "pod", "uid"];
const POD_INFO: Family = family(
    "kube_pod_info",
    "Information about pod.",
    &[
        "namespace",
        "pod",
        "uid",
        "host_ip",
        "pod_ip",
        "node",
        "created_by_kind",
        "created_by_name",
        "priority_class",
        "host_network",
    ],
);
const POD_CREATED: Family = family("kube_pod_created", "Unix creation timestamp", POD);
const POD_PHASE: Family = family(
    "kube_pod_status_phase",
    "The pods current phase.",
    &["namespace", "pod", "uid", "phase"],
);
const POD_READY: Family = family(
    "kube_pod_status_ready",
    "Describes whether the pod is ready to serve requests.",
    &["namespace", "pod", "uid", "condition"],
);
const POD_SCHEDULED: Family = family(
    "kube_pod_status_scheduled",
    "Describes the status of the scheduling process for the pod.",
    &["namespace", "pod", "uid", "condition"],
);
/// The labels of a container's resource families.
const CONTAINER_RESOURCE: &[&str] = &[
    "namespace",
    "pod",
    "uid",
    "container",
    "node",
    "resource",
    "unit",
];
const POD_REQUESTS: Family = family(
    "kube_pod_container_resource_requests",
    "The number of requested request resource by a container. It is recommended to use the kube_pod_resource_requests metric exposed by kube-scheduler instead, as it is more precise.",
    CONTAINER_RESOURCE,
);
const POD_LIMITS: Family = family(
    "kube_pod_container_resource_limits",
    "The number of requested limit resource by a container. It is recommended to use the kube_pod_resource_limits metric exposed by kube-scheduler instead, as it is more precise.",
    CONTAINER_RESOURCE,
);
const POD_RESTARTS: Family = family(
    "kube_pod_container_status_restarts_total",
    "The number of container restarts per container.",
    &["namespace", "pod", "uid", "container"],
);
const POD_WAITING: Family = family(
    "kube_pod_container_status_waiting",
    "Describes whether the container is currently in waiting state.",
    &["namespace", "pod", "uid", "container"],
);
const POD_WAITING_REASON: Family = family(
    "kube_pod_container_status_waiting_reason",
    "Describes the reason the container is currently in waiting state.",
    &["namespace", "pod", "uid", "container", "reason"],
);
const POD_RUNNING: Family = family(
    "kube_pod_container_status_running",
    "Describes whether the container is currently in running state.",
    &["namespace", "pod", "uid", "container"],
);
const POD_CONTAINER_READY: Family = family(
    "kube_pod_container_status_ready",
    "Describes whether the containers readiness check succeeded.",
    &["namespace", "pod", "uid", "container"],
);

const PHASES: [&str; 5] = ["Pending", "Succeeded", "Failed", "Unknown", "Running"];

fn pods(out: &mut Families, pods: &[Value]) {
    for pod in pods {
        let (ns, p, u) = (namespace(pod), name(pod), uid(pod));
        let node = text(pod, "/spec/nodeName");
        let owner = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|o| {
                o.iter()
                    .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            });
        let (kind, owner_name) = owner.map_or(("<none>", "<none>"), |o| {
            (text(o, "/kind"), text(o, "/name"))
        });
        let host_network = pod
            .pointer("/spec/hostNetwork")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        out.gauge(
            &POD_INFO,
            &[
                ns,
                p,
                u,
                text(pod, "/status/hostIP"),
                text(pod, "/status/podIP"),
                node,
                kind,
                owner_name,
                text(pod, "/spec/priorityClassName"),
                if host_network { "true" } else { "false" },
            ],
            1.0,
        );
        if let Some(created) = unix_seconds(text(pod, "/metadata/creationTimestamp")) {
            out.gauge(&POD_CREATED, &[ns, p, u], created);
        }
        let phase = text(pod, "/status/phase");
        if !phase.is_empty() {
            out.one_hot(&POD_PHASE, &[ns, p, u], &PHASES, phase);
        }
        for (kind, family) in [("Ready", &POD_READY), ("PodScheduled", &POD_SCHEDULED)] {
            if let Some(condition) = find_condition(pod, kind) {
                out.one_hot(
                    family,
                    &[ns, p, u],
                    &CONDITION_STATUSES,
                    &condition_status(condition),
                );
            }
        }
        for container in pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let c = text(container, "/name");
            resources(
                out,
                &POD_REQUESTS,
                &[ns, p, u, c, node],
                container.pointer("/resources/requests"),
            );
            resources(
                out,
                &POD_LIMITS,
                &[ns, p, u, c, node],
                container.pointer("/resources/limits"),
            );
        }
        for status in pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let c = text(status, "/name");
            let labels = [ns, p, u, c];
            out.counter(&POD_RESTARTS, &labels, number(status, "/restartCount"));
            let waiting = status.pointer("/state/waiting");
            out.gauge(
                &POD_WAITING,
                &labels,
                f64::from(u8::from(waiting.is_some())),
            );
            if let Some(waiting) = waiting {
                let reason = text(waiting, "/reason");
                if !reason.is_empty() {
                    out.gauge(&POD_WAITING_REASON, &[ns, p, u, c, reason], 1.0);
                }
            }
            let running = status.pointer("/state/running").is_some();
            out.gauge(&POD_RUNNING, &labels, f64::from(u8::from(running)));
            let ready = status.get("ready").and_then(Value::as_bool) == Some(true);
            out.gauge(&POD_CONTAINER_READY, &labels, f64::from(u8::from(ready)));
        }
    }
}

const NAMESPACE_PHASE: Family = family(
    "kube_namespace_status_phase",
    "kubernetes namespace status phase.",
    &["namespace", "phase"],
);
const NAMESPACE_CREATED: Family = family(
    "kube_namespace_created",
    "Unix creation timestamp",
    &["namespace"],
);

fn namespaces(out: &mut Families, namespaces: &[Value]) {
    for namespace in namespaces {
        let n = name(namespace);
        if let Some(created) = unix_seconds(text(namespace, "/metadata/creationTimestamp")) {
            out.gauge(&NAMESPACE_CREATED, &[n], created);
        }
        let phase = match text(namespace, "/status/phase") {
            "" => "Active",
            other => other,
        };
        out.one_hot(&NAMESPACE_PHASE, &[n], &["Active", "Terminating"], phase);
    }
}

/// A family per (name, help, pointer to the number it reports) of a namespaced workload.
type Numbers = [(&'static str, &'static str, &'static str)];

fn numbers(
    out: &mut Families,
    objects: &[Value],
    labels: &'static [&'static str],
    table: &Numbers,
) {
    for object in objects {
        let values = [namespace(object), name(object)];
        for (metric, help, pointer) in table {
            out.gauge(
                &family(metric, help, labels),
                &values,
                number(object, pointer),
            );
        }
    }
}

fn condition_families(out: &mut Families, objects: &[Value], family: &Family) {
    for object in objects {
        for condition in conditions(object) {
            out.one_hot(
                family,
                &[namespace(object), name(object), text(condition, "/type")],
                &CONDITION_STATUSES,
                &condition_status(condition),
            );
        }
    }
}

fn deployments(out: &mut Families, deployments: &[Value]) {
    numbers(
        out,
        deployments,
        &["namespace", "deployment"],
        &[
            (
                "kube_deployment_status_replicas",
                "The number of replicas per deployment.",
                "/status/replicas",
            ),
            (
                "kube_deployment_status_replicas_ready",
                "The number of ready replicas per deployment.",
                "/status/readyReplicas",
            ),
            (
                "kube_deployment_status_replicas_available",
                "The number of available replicas per deployment.",
                "/status/availableReplicas",
            ),
            (
                "kube_deployment_status_replicas_unavailable",
                "The number of unavailable replicas per deployment.",
                "/status/unavailableReplicas",
            ),
            (
                "kube_deployment_status_replicas_updated",
                "The number of updated replicas per deployment.",
                "/status/updatedReplicas",
            ),
            (
                "kube_deployment_status_observed_generation",
                "The generation observed by the deployment controller.",
                "/status/observedGeneration",
            ),
            (
                "kube_deployment_spec_replicas",
                "Number of desired pods for a deployment.",
                "/spec/replicas",
            ),
            (
                "kube_deployment_metadata_generation",
                "Sequence number representing a specific generation of the desired state.",
                "/metadata/generation",
            ),
        ],
    );
    condition_families(
        out,
        deployments,
        &family(
            "kube_deployment_status_condition",
            "The current status conditions of a deployment.",
            &["namespace", "deployment", "condition", "status"],
        ),
    );
}

fn replicasets(out: &mut Families, replicasets: &[Value]) {
    numbers(
        out,
        replicasets,
        &["namespace", "replicaset"],
        &[
            (
                "kube_replicaset_status_replicas",
                "The number of replicas per ReplicaSet.",
                "/status/replicas",
            ),
            (
                "kube_replicaset_status_fully_labeled_replicas",
                "The number of fully labeled replicas per ReplicaSet.",
                "/status/fullyLabeledReplicas",
            ),
            (
                "kube_replicaset_status_ready_replicas",
                "The number of ready replicas per ReplicaSet.",
                "/status/readyReplicas",
            ),
            (
                "kube_replicaset_status_observed_generation",
                "The generation observed by the ReplicaSet controller.",
                "/status/observedGeneration",
            ),
            (
                "kube_replicaset_spec_replicas",
                "Number of desired pods for a ReplicaSet.",
                "/spec/replicas",
            ),
            (
                "kube_replicaset_metadata_generation",
                "Sequence number representing a specific generation of the desired state.",
                "/metadata/generation",
            ),
        ],
    );
}

fn statefulsets(out: &mut Families, statefulsets: &[Value]) {
    numbers(
        out,
        statefulsets,
        &["namespace", "statefulset"],
        &[
            (
                "kube_statefulset_status_replicas",
                "The number of replicas per StatefulSet.",
                "/status/replicas",
            ),
            (
                "kube_statefulset_status_replicas_available",
                "The number of available replicas per StatefulSet.",
                "/status/availableReplicas",
            ),
            (
                "kube_statefulset_status_replicas_current",
                "The number of current replicas per StatefulSet.",
                "/status/currentReplicas",
            ),
            (
                "kube_statefulset_status_replicas_ready",
                "The number of ready replicas per StatefulSet.",
                "/status/readyReplicas",
            ),
            (
                "kube_statefulset_status_replicas_updated",
                "The number of updated replicas per StatefulSet.",
                "/status/updatedReplicas",
            ),
            (
                "kube_statefulset_status_observed_generation",
                "The generation observed by the StatefulSet controller.",
                "/status/observedGeneration",
            ),
            (
                "kube_statefulset_replicas",
                "Number of desired pods for a StatefulSet.",
                "/spec/replicas",
            ),
            (
                "kube_statefulset_metadata_generation",
                "Sequence number representing a specific generation of the desired state for the StatefulSet.",
                "/metadata/generation",
            ),
        ],
    );
}

fn daemonsets(out: &mut Families, daemonsets: &[Value]) {
    numbers(
        out,
        daemonsets,
        &["namespace", "daemonset"],
        &[
            (
                "kube_daemonset_status_current_number_scheduled",
                "The number of nodes running at least one daemon pod and are supposed to.",
                "/status/currentNumberScheduled",
            ),
            (
                "kube_daemonset_status_desired_number_scheduled",
                "The number of nodes that should be running the daemon pod.",
                "/status/desiredNumberScheduled",
            ),
            (
                "kube_daemonset_status_number_available",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available",
                "/status/numberAvailable",
            ),
            (
                "kube_daemonset_status_number_misscheduled",
                "The number of nodes running a daemon pod but are not supposed to.",
                "/status/numberMisscheduled",
            ),
            (
                "kube_daemonset_status_number_ready",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
                "/status/numberReady",
            ),
            (
                "kube_daemonset_status_number_unavailable",
                "The number of nodes that should be running the daemon pod and have none of the daemon pod running and available",
                "/status/numberUnavailable",
            ),
            (
                "kube_daemonset_status_observed_generation",
                "The most recent generation observed by the daemon set controller.",
                "/status/observedGeneration",
            ),
            (
                "kube_daemonset_status_updated_number_scheduled",
                "The total number of nodes that are running updated daemon pod",
                "/status/updatedNumberScheduled",
            ),
            (
                "kube_daemonset_metadata_generation",
                "Sequence number representing a specific generation of the desired state.",
                "/metadata/generation",
            ),
        ],
    );
}

const JOB: &[&str] = &["namespace", "job_name"];

fn jobs(out: &mut Families, jobs: &[Value]) {
    numbers(
        out,
        jobs,
        JOB,
        &[
            (
                "kube_job_status_active",
                "The number of actively running pods.",
                "/status/active",
            ),
            (
                "kube_job_status_succeeded",
                "The number of pods which reached Phase Succeeded.",
                "/status/succeeded",
            ),
            (
                "kube_job_status_failed",
                "The number of pods which reached Phase Failed and the reason for failure.",
                "/status/failed",
            ),
        ],
    );
    let complete = family(
        "kube_job_complete",
        "The job has completed its execution.",
        &["namespace", "job_name", "condition"],
    );
    let failed = family(
        "kube_job_failed",
        "The job has failed its execution.",
        &["namespace", "job_name", "condition"],
    );
    for job in jobs {
        let values = [namespace(job), name(job)];
        for (metric, help, pointer) in [
            (
                "kube_job_spec_parallelism",
                "The maximum desired number of pods the job should run at any given time.",
                "/spec/parallelism",
            ),
            (
                "kube_job_spec_completions",
                "The desired number of successfully finished pods the job should be run with.",
                "/spec/completions",
            ),
        ] {
            if int(job, pointer).is_some() {
                out.gauge(&family(metric, help, JOB), &values, number(job, pointer));
            }
        }
        for (metric, help, pointer) in [
            (
                "kube_job_status_start_time",
                "StartTime represents time when the job was acknowledged by the Job Manager.",
                "/status/startTime",
            ),
            (
                "kube_job_status_completion_time",
                "CompletionTime represents time when the job was completed.",
                "/status/completionTime",
            ),
        ] {
            if let Some(seconds) = unix_seconds(text(job, pointer)) {
                out.gauge(&family(metric, help, JOB), &values, seconds);
            }
        }
        for (kind, family) in [("Complete", &complete), ("Failed", &failed)] {
            for condition in conditions(job).iter().filter(|c| text(c, "/type") == kind) {
                out.one_hot(
                    family,
                    &values,
                    &CONDITION_STATUSES,
                    &condition_status(condition),
                );
            }
        }
    }
}

fn pdbs(out: &mut Families, pdbs: &[Value]) {
    numbers(
        out,
        pdbs,
        &["namespace", "poddisruptionbudget"],
        &[
            (
                "kube_poddisruptionbudget_status_current_healthy",
                "Current number of healthy pods",
                "/status/currentHealthy",
            ),
            (
                "kube_poddisruptionbudget_status_desired_healthy",
                "Minimum desired number of healthy pods",
                "/status/desiredHealthy",
            ),
            (
                "kube_poddisruptionbudget_status_pod_disruptions_allowed",
                "Number of pod disruptions that are currently allowed",
                "/status/disruptionsAllowed",
            ),
            (
                "kube_poddisruptionbudget_status_expected_pods",
                "Total number of pods counted by this disruption budget",
                "/status/expectedPods",
            ),
            (
                "kube_poddisruptionbudget_status_observed_generation",
                "Most recent generation observed when updating this PDB status",
                "/status/observedGeneration",
            ),
        ],
    );
}

const RESOURCEQUOTA: Family = family(
    "kube_resourcequota",
    "Information about resource quota.",
    &["namespace", "resourcequota", "resource", "type"],
);

fn resourcequotas(out: &mut Families, quotas: &[Value]) {
    for quota_object in quotas {
        let (ns, n) = (namespace(quota_object), name(quota_object));
        for kind in ["hard", "used"] {
            let Some(values) = quota_object
                .pointer(&format!("/status/{kind}"))
                .and_then(Value::as_object)
            else {
                continue;
            };
            for (resource, value) in values {
                let Some(amount) = value.as_str().and_then(quantity) else {
                    continue;
                };
                // KSM: MilliValue / 1000.
                let amount = (amount * 1000.0).ceil() / 1000.0;
                out.gauge(&RESOURCEQUOTA, &[ns, n, resource, kind], amount);
            }
        }
    }
}

#[cfg(test)]
mod tests;
