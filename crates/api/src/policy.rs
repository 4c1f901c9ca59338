//! The bootstrap RBAC policy: upstream's user-facing roles (`cluster-admin`, and `admin`,
//! `edit`, `view` aggregated by label), the roles every authenticated user holds
//! (`system:basic-user`, `system:discovery`, `system:public-info-viewer`), and one
//! least-privilege role and identity per Tessera controller.
//!
//! Data only; `tessera up` creates whatever is missing.

use serde_json::{Value, json};

use crate::authn::UserInfo;

/// An in-process component's identity and the rules its role grants.
pub struct Component {
    /// The ServiceAccount-style name in `kube-system`.
    pub name: &'static str,
    /// Rules as (apiGroups, resources, verbs).
    pub rules: &'static [(
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    )],
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];
const STATUS: &[&str] = &["get", "update", "patch"];

/// Tessera's own controllers and node twins.
pub const COMPONENTS: &[Component] = &[
    Component {
        name: "node-twins",
        rules: &[
            (&[""], &["nodes"], WRITE),
            (&[""], &["nodes/status", "pods/status"], STATUS),
            (&[""], &["pods"], &["get", "list", "watch", "delete"]),
            // What simulated containers see: Service links, cluster DNS, the network path.
            (&[""], &["services"], &["get", "list", "watch"]),
            (
                &["discovery.k8s.io"],
                &["endpointslices"],
                &["get", "list", "watch"],
            ),
            // What the simulated dataplane enforces: network policies of every tier, over
            // the namespaces' labels.
            (&[""], &["namespaces"], READ),
            (&["networking.k8s.io"], &["networkpolicies"], READ),
            (
                &["policy.networking.k8s.io"],
                &[
                    "adminnetworkpolicies",
                    "baselineadminnetworkpolicies",
                    "clusternetworkpolicies",
                ],
                READ,
            ),
            // The simulated CSI drivers: external-provisioner (volumes for claims, capacity),
            // the node plugins' CSINodes, external-resizer, the kubelet's volume checks.
            (&[""], &["persistentvolumes"], WRITE),
            (
                &[""],
                &["persistentvolumeclaims"],
                &["get", "list", "watch", "update", "patch"],
            ),
            (&[""], &["persistentvolumeclaims/status"], STATUS),
            (&[""], &["persistentvolumes/status"], STATUS),
            (&["storage.k8s.io"], &["storageclasses", "csidrivers"], READ),
            (
                &["storage.k8s.io"],
                &["csinodes", "csistoragecapacities"],
                WRITE,
            ),
            // As the kubelet: the secrets and config maps its pods' volumes read, and the
            // RuntimeClasses its pods' sandboxes run with.
            (&[""], &["secrets", "configmaps"], READ),
            (&["node.k8s.io"], &["runtimeclasses"], READ),
            // The simulated drivers' csi-snapshotter sidecar, and external-provisioner's
            // restores from snapshots.
            (
                &["snapshot.storage.k8s.io"],
                &["volumesnapshotclasses", "volumesnapshots"],
                READ,
            ),
            (
                &["snapshot.storage.k8s.io"],
                &["volumesnapshotcontents"],
                &["get", "list", "watch", "update", "patch"],
            ),
            (
                &["snapshot.storage.k8s.io"],
                &["volumesnapshotcontents/status"],
                &["update", "patch"],
            ),
            (&["coordination.k8s.io"], &["leases"], WRITE),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
            // As the DRA driver of DRA pools: its DeviceClasses and the nodes' slices.
            (&["resource.k8s.io"], &["resourceslices"], WRITE),
            (
                &["resource.k8s.io"],
                &["deviceclasses"],
                &["get", "list", "watch", "create"],
            ),
            // As the kubelet: the claims of the pods it prepares.
            (&["resource.k8s.io"], &["resourceclaims"], READ),
            // As the simulated cluster autoscaler: the requests it provisions and their pods.
            (&["autoscaling.x-k8s.io"], &["provisioningrequests"], READ),
            (
                &["autoscaling.x-k8s.io"],
                &["provisioningrequests/status"],
                STATUS,
            ),
            (&[""], &["podtemplates"], READ),
            // As Multus (its ClusterRole updates pods): the definitions of the networks pods
            // select, and the pods' network-status annotation; as multi-networkpolicy's
            // dataplane, the secondary networks' policies.
            (
                &["k8s.cni.cncf.io"],
                &["network-attachment-definitions", "multi-networkpolicies"],
                READ,
            ),
            (&[""], &["pods"], &["patch"]),
            // As the Gateways' simulated proxies: the Gateway API objects requests are routed
            // by.
            (&["gateway.networking.k8s.io"], GATEWAY_API_KINDS, READ),
            // The InferencePools their routes send to, whose pods the endpoint picker chooses.
            (&["inference.networking.k8s.io"], &["inferencepools"], READ),
        ],
    },
    Component {
        name: "scheduler",
        rules: &[
            (&[""], &["pods", "nodes", "namespaces"], READ),
            (&[""], &["pods"], &["delete"]),
            (&["policy"], &["poddisruptionbudgets"], READ),
            (&["scheduling.x-k8s.io"], &["podgroups"], READ),
            (&[""], &["pods/binding"], &["create"]),
            (&[""], &["pods/status"], STATUS),
            // Create and delete: the claims of pods' extended resources backed by DRA, as
            // upstream's system:kube-scheduler role grants with DRAExtendedResource.
            (
                &["resource.k8s.io"],
                &["resourceclaims"],
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
            ),
            (&["resource.k8s.io"], &["resourceclaims/status"], STATUS),
            (
                &["resource.k8s.io"],
                &["resourceslices", "deviceclasses"],
                READ,
            ),
            // VolumeBinding: claims annotated with the selected node, volumes pre-bound.
            (
                &[""],
                &["persistentvolumeclaims", "persistentvolumes"],
                &["get", "list", "watch", "update", "patch"],
            ),
            (
                &["storage.k8s.io"],
                &[
                    "storageclasses",
                    "csidrivers",
                    "csinodes",
                    "csistoragecapacities",
                ],
                READ,
            ),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
        ],
    },
    Component {
        name: "node-controller",
        rules: &[
            (
                &[""],
                &["nodes"],
                &["get", "list", "watch", "update", "patch"],
            ),
            (&[""], &["nodes/status"], STATUS),
            (&[""], &["pods"], &["get", "list", "watch", "delete"]),
            (&["coordination.k8s.io"], &["leases"], READ),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
        ],
    },
    Component {
        name: "resourceclaim-controller",
        rules: &[
            (&["resource.k8s.io"], &["resourceclaims"], WRITE),
            (&["resource.k8s.io"], &["resourceclaims/status"], STATUS),
            (
                &["resource.k8s.io"],
                &["resourceclaimtemplates", "resourceslices", "deviceclasses"],
                READ,
            ),
            (&[""], &["pods", "nodes"], READ),
            (&[""], &["pods/status"], STATUS),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
        ],
    },
    Component {
        name: "job-controller",
        rules: &[
            (&["batch"], &["jobs"], WRITE),
            (&["batch"], &["jobs/status", "jobs/finalizers"], STATUS),
            (&[""], &["pods"], WRITE),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
        ],
    },
    Component {
        name: "apps-controller",
        rules: &[
            (
                &["apps"],
                &["replicasets", "deployments", "daemonsets", "statefulsets"],
                WRITE,
            ),
            (
                &["apps"],
                &[
                    "replicasets/status",
                    "deployments/status",
                    "daemonsets/status",
                    "statefulsets/status",
                ],
                STATUS,
            ),
            (&[""], &["pods"], WRITE),
            // A StatefulSet's claims from its volumeClaimTemplates.
            (&[""], &["persistentvolumeclaims"], WRITE),
            (&[""], &["nodes"], READ),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
        ],
    },
    Component {
        name: "endpoint-controller",
        rules: &[
            (&[""], &["services", "pods", "nodes"], READ),
            (&[""], &["endpoints"], WRITE),
            (&["discovery.k8s.io"], &["endpointslices"], WRITE),
        ],
    },
    Component {
        name: "disruption-controller",
        rules: &[
            (&["policy"], &["poddisruptionbudgets"], READ),
            (&["policy"], &["poddisruptionbudgets/status"], STATUS),
            (&[""], &["pods"], READ),
            (
                &["apps"],
                &["replicasets", "deployments", "statefulsets"],
                READ,
            ),
        ],
    },
    // Upstream's `system:controller:persistent-volume-binder`.
    Component {
        name: "persistent-volume-binder",
        rules: &[
            (
                &[""],
                &["persistentvolumes"],
                &["get", "list", "watch", "create", "update", "delete"],
            ),
            (&[""], &["persistentvolumes/status"], &["update", "patch"]),
            (
                &[""],
                &["persistentvolumeclaims"],
                &["get", "list", "watch", "update"],
            ),
            (
                &[""],
                &["persistentvolumeclaims/status"],
                &["update", "patch"],
            ),
            (&[""], &["pods", "nodes"], READ),
            (&["storage.k8s.io"], &["storageclasses"], READ),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
        ],
    },
    // kubernetes-csi/external-snapshotter's `snapshot-controller-runner` role.
    Component {
        name: "snapshot-controller",
        rules: &[
            (&[""], &["persistentvolumes"], READ),
            (
                &[""],
                &["persistentvolumeclaims"],
                &["get", "list", "watch", "update"],
            ),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["list", "watch", "create", "update", "patch"],
            ),
            (
                &["snapshot.storage.k8s.io"],
                &["volumesnapshotclasses"],
                READ,
            ),
            (
                &["snapshot.storage.k8s.io"],
                &["volumesnapshotcontents"],
                &[
                    "create", "get", "list", "watch", "update", "delete", "patch",
                ],
            ),
            (
                &["snapshot.storage.k8s.io"],
                &["volumesnapshotcontents/status"],
                &["patch"],
            ),
            (
                &["snapshot.storage.k8s.io"],
                &["volumesnapshots"],
                &["get", "list", "watch", "update", "patch", "delete"],
            ),
            (
                &["snapshot.storage.k8s.io"],
                &["volumesnapshots/status"],
                &["update", "patch"],
            ),
        ],
    },
    // Upstream's `system:controller:ephemeral-volume-controller`.
    Component {
        name: "ephemeral-volume-controller",
        rules: &[
            (&[""], &["pods"], READ),
            (&[""], &["pods/finalizers"], &["update"]),
            (
                &[""],
                &["persistentvolumeclaims"],
                &["get", "list", "watch", "create"],
            ),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
        ],
    },
    // Upstream's `system:controller:pod-garbage-collector`.
    Component {
        name: "pod-garbage-collector",
        rules: &[
            (&[""], &["pods"], &["list", "watch", "delete"]),
            (&[""], &["pods/status"], &["patch"]),
            (&[""], &["nodes"], &["get", "list", "watch"]),
        ],
    },
    // Upstream's `system:controller:horizontal-pod-autoscaler`.
    Component {
        name: "horizontal-pod-autoscaler",
        rules: &[
            (&["autoscaling"], &["horizontalpodautoscalers"], READ),
            (
                &["autoscaling"],
                &["horizontalpodautoscalers/status"],
                STATUS,
            ),
            (&["*"], &["*/scale"], &["get", "update", "patch"]),
            (&[""], &["pods"], &["list"]),
            (&["metrics.k8s.io"], &["pods"], &["list"]),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
        ],
    },
    Component {
        // The maintenance controller (as the GPU operator's upgrade controller): runs
        // MaintenancePlans over nodes, evicting through the eviction subresource, and Kueue's
        // Workloads holding quota through their status (`Evicted`).
        name: "maintenance-controller",
        rules: &[
            (&["tessera.dev"], &["maintenanceplans"], READ),
            (&["tessera.dev"], &["maintenanceplans/status"], STATUS),
            // Delete: a rotation removes the node it replaced.
            (
                &[""],
                &["nodes"],
                &["get", "list", "watch", "patch", "update", "delete"],
            ),
            (&[""], &["nodes/status"], STATUS),
            (
                &[""],
                &["pods"],
                &["get", "list", "watch", "create", "delete"],
            ),
            (&[""], &["pods/eviction"], &["create"]),
            (&["policy"], &["poddisruptionbudgets"], READ),
            (&["kueue.x-k8s.io"], &["workloads"], READ),
            (&["kueue.x-k8s.io"], &["workloads/status"], STATUS),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
        ],
    },
    Component {
        // The built-in Gateway API controller: the statuses of GatewayClasses naming
        // `tessera.dev/gateway-controller`, their Gateways and the routes attached to them.
        name: "gateway-controller",
        rules: &[
            (&["gateway.networking.k8s.io"], GATEWAY_API_KINDS, READ),
            (
                &["gateway.networking.k8s.io"],
                &[
                    "gatewayclasses/status",
                    "gateways/status",
                    "httproutes/status",
                    "grpcroutes/status",
                ],
                STATUS,
            ),
            (&[""], &["services", "namespaces"], READ),
            // InferencePools, a backend kind of routes, and their status.
            (&["inference.networking.k8s.io"], &["inferencepools"], READ),
            (
                &["inference.networking.k8s.io"],
                &["inferencepools/status"],
                &["get", "update", "patch"],
            ),
        ],
    },
    Component {
        name: "workload-controller",
        rules: &[
            (&["jobset.x-k8s.io"], &["jobsets"], WRITE),
            (&["jobset.x-k8s.io"], &["jobsets/status"], STATUS),
            (&["leaderworkerset.x-k8s.io"], &["leaderworkersets"], WRITE),
            (
                &["leaderworkerset.x-k8s.io"],
                &["leaderworkersets/status"],
                STATUS,
            ),
            (&["batch"], &["jobs"], WRITE),
            (&["apps"], &["statefulsets"], WRITE),
            (&[""], &["services"], WRITE),
            (&[""], &["pods"], &["get", "list", "watch", "delete"]),
            (
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                READ,
            ),
        ],
    },
    Component {
        // Kueue's quota manager and its batch/v1 Job, JobSet and Pod integrations.
        name: "queue-manager",
        rules: &[
            (
                &["kueue.x-k8s.io"],
                &[
                    "resourceflavors",
                    "clusterqueues",
                    "cohorts",
                    "localqueues",
                    "workloadpriorityclasses",
                    "topologies",
                    "admissionchecks",
                ],
                READ,
            ),
            (&["kueue.x-k8s.io"], &["workloads"], WRITE),
            // Topology-Aware Scheduling reads the nodes a TAS flavor selects.
            (&[""], &["nodes"], READ),
            // The ProvisioningRequest admission check: its configs, the requests and their
            // PodTemplates.
            (&["kueue.x-k8s.io"], &["provisioningrequestconfigs"], READ),
            (&["autoscaling.x-k8s.io"], &["provisioningrequests"], WRITE),
            (&[""], &["podtemplates"], WRITE),
            // MultiKueue: its configs and clusters, the workers' kubeconfig Secrets, and the
            // workers' status mirrored onto the manager's Jobs and JobSets.
            (
                &["kueue.x-k8s.io"],
                &["multikueueconfigs", "multikueueclusters"],
                READ,
            ),
            (&[""], &["secrets"], &["get"]),
            (&["kueue.x-k8s.io"], &["multikueueclusters/status"], STATUS),
            (&["batch"], &["jobs/status"], STATUS),
            (&["jobset.x-k8s.io"], &["jobsets/status"], STATUS),
            // Pending Workloads' DRA claims are counted against quota.
            (
                &["resource.k8s.io"],
                &["resourceclaimtemplates", "deviceclasses", "resourceslices"],
                READ,
            ),
            (
                &["kueue.x-k8s.io"],
                &[
                    "workloads/status",
                    "clusterqueues/status",
                    "localqueues/status",
                    "admissionchecks/status",
                ],
                STATUS,
            ),
            (
                &["batch"],
                &["jobs"],
                &["get", "list", "watch", "update", "patch"],
            ),
            (
                &["jobset.x-k8s.io"],
                &["jobsets"],
                &["get", "list", "watch", "update", "patch"],
            ),
            // JobSets are watched once their CRD is installed.
            (
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                READ,
            ),
            // Its Pod integration: ungates, stops and releases the pods it manages.
            (
                &[""],
                &["pods"],
                &["get", "list", "watch", "update", "patch", "delete"],
            ),
            (&[""], &["pods/status"], STATUS),
            // Its StatefulSet and LeaderWorkerSet integrations read the parent whose
            // Workload a group of pods waits for.
            (&["apps"], &["statefulsets"], READ),
            (&["leaderworkerset.x-k8s.io"], &["leaderworkersets"], READ),
            (&[""], &["namespaces"], READ),
            (&["scheduling.k8s.io"], &["priorityclasses"], READ),
            // Pod overhead: a PodSet naming a RuntimeClass counts its overhead.
            (&["node.k8s.io"], &["runtimeclasses"], READ),
            (
                &["", "events.k8s.io"],
                &["events"],
                &["create", "update", "patch"],
            ),
        ],
    },
];

/// The Gateway API's resources, read by the Gateway controller and by the twins' simulated
/// proxies.
const GATEWAY_API_KINDS: &[&str] = &[
    "gatewayclasses",
    "gateways",
    "httproutes",
    "grpcroutes",
    "referencegrants",
];

/// The identity a component acts as.
pub fn identity(component: &str) -> UserInfo {
    UserInfo::service_account("kube-system", component, &format!("tessera-{component}"))
}

/// The program an in-process component stands in for, which upstream's clients name in their
/// User-Agent and so in the field manager of their writes: the built-in controllers are
/// `kube-controller-manager`, the scheduler `kube-scheduler`, the node twins `kubelet`, and the
/// JobSet/LeaderWorkerSet controllers, Kueue's queue manager and the maintenance controller (as the
/// GPU operator's) controller-runtime's `manager`.
pub fn program(component: &str) -> &'static str {
    use tessera_model::managers;
    match component {
        "scheduler" => managers::KUBE_SCHEDULER,
        "node-twins" => managers::KUBELET,
        "workload-controller"
        | "queue-manager"
        | "maintenance-controller"
        | "gateway-controller" => managers::CONTROLLER_RUNTIME,
        _ => managers::KUBE_CONTROLLER_MANAGER,
    }
}

/// The User-Agent of a component's requests, in client-go's form
/// (`<program>/<version> (<os>/<arch>) kubernetes/<commit>`).
pub fn user_agent(component: &str) -> String {
    format!(
        "{}/{} (linux/amd64) kubernetes/tessera",
        program(component),
        crate::discovery::KUBERNETES_VERSION
    )
}

fn rules(list: &[(&[&str], &[&str], &[&str])]) -> Value {
    json!(list
        .iter()
        .map(|(groups, resources, verbs)| json!({"apiGroups": groups, "resources": resources, "verbs": verbs}))
        .collect::<Vec<_>>())
}

fn bootstrap_labels() -> Value {
    json!({"kubernetes.io/bootstrapping": "rbac-defaults"})
}

fn cluster_role(name: &str, rules: Value, extra_labels: Value) -> Value {
    let mut labels = bootstrap_labels();
    if let Some(extra) = extra_labels.as_object() {
        for (k, v) in extra {
            labels[k] = v.clone();
        }
    }
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name, "labels": labels}, "rules": rules})
}

fn aggregated(name: &str, selector_label: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name, "labels": bootstrap_labels()},
           "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {selector_label: "true"}}]}, "rules": []})
}

fn binding(name: &str, role: &str, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": name, "labels": bootstrap_labels()},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
           "subjects": subjects})
}

const VIEW_RESOURCES: &[&str] = &[
    "pods",
    "pods/log",
    "pods/status",
    "services",
    "endpoints",
    "configmaps",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "events",
    "limitranges",
    "resourcequotas",
    "serviceaccounts",
    "namespaces",
];

/// Every bootstrap ClusterRole and ClusterRoleBinding.
pub fn bootstrap() -> Vec<Value> {
    let mut objects = vec![
        cluster_role(
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                                             {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
            json!({}),
        ),
        aggregated("admin", "rbac.authorization.k8s.io/aggregate-to-admin"),
        aggregated("edit", "rbac.authorization.k8s.io/aggregate-to-edit"),
        aggregated("view", "rbac.authorization.k8s.io/aggregate-to-view"),
        cluster_role(
            "system:aggregate-to-view",
            json!([
                {"apiGroups": [""], "resources": VIEW_RESOURCES, "verbs": READ},
                {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets", "daemonsets", "deployments/scale", "replicasets/scale", "statefulsets/scale"], "verbs": READ},
                {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": READ},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": READ},
                {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies", "ingresses"], "verbs": READ},
                {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceclaimtemplates"], "verbs": READ},
            ]),
            json!({"rbac.authorization.k8s.io/aggregate-to-view": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true", "rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
        ),
        cluster_role(
            "system:aggregate-to-edit",
            json!([
                {"apiGroups": [""], "resources": ["pods", "services", "configmaps", "secrets", "persistentvolumeclaims", "serviceaccounts", "replicationcontrollers", "pods/eviction"], "verbs": ["create", "delete", "deletecollection", "patch", "update"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": READ},
                {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets", "daemonsets", "deployments/scale", "replicasets/scale", "statefulsets/scale"], "verbs": ["create", "delete", "deletecollection", "patch", "update"]},
                {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["create", "delete", "deletecollection", "patch", "update"]},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["create", "delete", "deletecollection", "patch", "update"]},
                {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceclaimtemplates"], "verbs": ["create", "delete", "deletecollection", "patch", "update"]},
                {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
            ]),
            json!({"rbac.authorization.k8s.io/aggregate-to-edit": "true", "rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
        ),
        cluster_role(
            "system:aggregate-to-admin",
            json!([
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": WRITE},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
            ]),
            json!({"rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
        ),
        cluster_role(
            "system:basic-user",
            json!([{"apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
            json!({}),
        ),
        cluster_role(
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/", "/healthz", "/livez", "/readyz"], "verbs": ["get"]}]),
            json!({}),
        ),
        cluster_role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            json!({}),
        ),
        // Upstream's monitoring role, and Tessera's for the in-process components' metrics
        // (`/components/<name>/metrics` on the API listener), both bound to the group
        // `system:monitoring`.
        cluster_role(
            "system:monitoring",
            json!([{"nonResourceURLs": ["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"], "verbs": ["get"]}]),
            json!({}),
        ),
        cluster_role(
            "tessera:monitoring",
            json!([{"nonResourceURLs": ["/components/*"], "verbs": ["get"]}]),
            json!({}),
        ),
        binding(
            "system:monitoring",
            "system:monitoring",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:monitoring"}]),
        ),
        binding(
            "tessera:monitoring",
            "tessera:monitoring",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:monitoring"}]),
        ),
        binding(
            "cluster-admin",
            "cluster-admin",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}]),
        ),
        binding(
            "system:basic-user",
            "system:basic-user",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]),
        ),
        binding(
            "system:discovery",
            "system:discovery",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]),
        ),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]),
        ),
    ];
    for component in COMPONENTS {
        let role = format!("system:controller:{}", component.name);
        objects.push(cluster_role(&role, rules(component.rules), json!({})));
        objects.push(binding(
            &role,
            &role,
            json!([{"kind": "ServiceAccount", "name": component.name, "namespace": "kube-system"}]),
        ));
    }
    objects
}
