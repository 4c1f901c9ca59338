//! How the node agent (`tessera agent serve`) is deployed with least privilege: its namespace,
//! ServiceAccount, RBAC, DeviceClasses, the admission policy that keeps each agent to its own
//! node's ResourceSlices, and the DaemonSet — as objects `tessera agent manifests` prints.
//!
//! What the agent uses decides what it gets. As a device plugin it talks only to the kubelet:
//! no API rights, no token mounted, one hostPath (the device-plugin directory). As NVIDIA's DRA
//! driver it writes ResourceSlices and reads ResourceClaims, and mounts only its own kubelet
//! plugin directory, the plugin registry and the CDI spec directory. GPUs reach it through a
//! CDI device request, never `privileged: true`; every capability is dropped, the root
//! filesystem is read-only, seccomp is the runtime's default. It runs as uid 0 because the
//! kubelet's socket directories are root's, which is also why its namespace is the one place
//! Pod Security is relaxed (baseline forbids hostPath), and only there.
//!
//! Pure data: it knows nothing of clusters or files.

use serde_json::{Value, json};

use crate::resource_slice::nvidia_device_classes;

/// The kubelet's device-plugin directory.
pub const DEVICE_PLUGIN_DIR: &str = "/var/lib/kubelet/device-plugins";
/// The kubelet's plugin registry (DRA kubelet plugins register here).
pub const PLUGINS_REGISTRY_DIR: &str = "/var/lib/kubelet/plugins_registry";
/// The kubelet's plugin directory; each DRA driver has its own directory below it.
pub const PLUGINS_DIR: &str = "/var/lib/kubelet/plugins";
/// Where CDI specs of prepared claims go.
pub const CDI_DIR: &str = "/var/run/cdi";
/// The NVIDIA DRA driver's name, and its kubelet plugin directory's.
pub const DRA_DRIVER: &str = "gpu.nvidia.com";

/// How the agent offers GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// The `nvidia.com/gpu` device plugin: kubelet only.
    DevicePlugin,
    /// NVIDIA's DRA driver: ResourceSlices and claims.
    Dra,
}

/// What the manifests are made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDeployment {
    /// The namespace the agent runs in (holds nothing else).
    pub namespace: String,
    /// The agent's image.
    pub image: String,
    /// Device plugin or DRA driver.
    pub offer: Offer,
    /// `key=value` labels the DaemonSet's nodes must carry.
    pub node_selector: Vec<(String, String)>,
    /// Whether to include the ValidatingAdmissionPolicy that keeps each agent to its own
    /// node's ResourceSlices (`admissionregistration.k8s.io/v1`, Kubernetes 1.30+).
    pub node_policy: bool,
}

/// The agent's name: its ServiceAccount, ClusterRole, bindings and DaemonSet.
pub const NAME: &str = "tessera-agent";

fn labels() -> Value {
    json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "node-agent"})
}

/// The namespace: Pod Security enforces `privileged` because the agent's hostPath volumes
/// are what baseline forbids; audit stays at baseline so anything else placed here is recorded.
fn namespace(d: &AgentDeployment) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": d.namespace,
            "labels": {
                "pod-security.kubernetes.io/enforce": "privileged",
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/audit": "baseline",
                "pod-security.kubernetes.io/audit-version": "latest",
            },
        },
    })
}

fn service_account(d: &AgentDeployment) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": NAME, "namespace": d.namespace, "labels": labels()},
        "automountServiceAccountToken": d.offer == Offer::Dra,
    })
}

/// What the DRA driver does through the API: applies its node's ResourceSlices and reads the
/// claims the kubelet asks it to prepare. DeviceClasses are installed with the manifests.
pub fn dra_rules() -> Value {
    json!([
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceslices"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims"],
            "verbs": ["get"],
        },
    ])
}

fn rbac(d: &AgentDeployment) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": labels()},
            "rules": dra_rules(),
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": d.namespace}],
        }),
    ]
}

/// Upstream's pattern (the DRA example driver's `validatingadmissionpolicy.yaml`): a token
/// bound to a pod carries its node's name, and the agent may write only the ResourceSlices
/// of that node.
fn node_policy(d: &AgentDeployment) -> Vec<Value> {
    let policy = format!("{NAME}-resourceslices");
    vec![
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy, "labels": labels()},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["resource.k8s.io"],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE", "DELETE"],
                    "resources": ["resourceslices"],
                }]},
                "matchConditions": [{
                    "name": "isAgent",
                    "expression": format!(
                        "request.userInfo.username == \"system:serviceaccount:{}:{NAME}\"",
                        d.namespace
                    ),
                }],
                "variables": [
                    {"name": "userNodeName", "expression":
                        "request.userInfo.extra[?'authentication.kubernetes.io/node-name'][0].orValue('')"},
                    {"name": "objectNodeName", "expression":
                        "(request.operation == \"DELETE\" ? oldObject : object).spec.?nodeName.orValue(\"\")"},
                ],
                "validations": [
                    {
                        "expression": "variables.userNodeName != \"\"",
                        "message": "no node association found for user, this user must run in a pod on a node and ServiceAccountTokenPodNodeInfo must be enabled",
                    },
                    {
                        "expression": "variables.userNodeName == variables.objectNodeName",
                        "messageExpression": "\"this user running on node '\"+variables.userNodeName+\"' may not modify \" + (variables.objectNodeName == \"\" ? \"cluster resourceslices\" : \"resourceslices on node '\"+variables.objectNodeName+\"'\")",
                    },
                ],
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy, "labels": labels()},
            "spec": {"policyName": policy, "validationActions": ["Deny"]},
        }),
    ]
}

fn host_path(name: &str, path: &str, kind: &str) -> Value {
    json!({"name": name, "hostPath": {"path": path, "type": kind}})
}

fn mount(name: &str, path: &str) -> Value {
    json!({"name": name, "mountPath": path})
}

fn daemon_set(d: &AgentDeployment) -> Value {
    let dra_plugin_dir = format!("{PLUGINS_DIR}/{DRA_DRIVER}");
    let (exposure, volumes, mounts) = match d.offer {
        Offer::DevicePlugin => (
            "device-plugin",
            vec![host_path("device-plugins", DEVICE_PLUGIN_DIR, "Directory")],
            vec![mount("device-plugins", DEVICE_PLUGIN_DIR)],
        ),
        Offer::Dra => (
            "dra",
            vec![
                host_path("plugin", &dra_plugin_dir, "DirectoryOrCreate"),
                host_path("plugins-registry", PLUGINS_REGISTRY_DIR, "Directory"),
                host_path("cdi", CDI_DIR, "DirectoryOrCreate"),
            ],
            vec![
                mount("plugin", &dra_plugin_dir),
                mount("plugins-registry", PLUGINS_REGISTRY_DIR),
                mount("cdi", CDI_DIR),
            ],
        ),
    };
    let node_selector: serde_json::Map<String, Value> = d
        .node_selector
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": d.namespace, "labels": labels()},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {
                    "labels": labels(),
                    // The container runtime injects every GPU's device nodes and driver
                    // libraries from NVIDIA's CDI spec (`nvidia-ctk cdi generate`).
                    "annotations": {"cdi.k8s.io/tessera-agent": "nvidia.com/gpu=all"},
                },
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": d.offer == Offer::Dra,
                    "priorityClassName": "system-node-critical",
                    "nodeSelector": node_selector,
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "agent",
                        "image": d.image,
                        "args": ["agent", "serve", "--exposure", exposure],
                        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                        "securityContext": {
                            "privileged": false,
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "runAsUser": 0,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "resources": {
                            "requests": {"cpu": "10m", "memory": "32Mi"},
                            "limits": {"memory": "128Mi"},
                        },
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// Every object, in the order they can be applied.
pub fn manifests(d: &AgentDeployment) -> Vec<Value> {
    let mut objects = vec![namespace(d), service_account(d)];
    if d.offer == Offer::Dra {
        objects.extend(rbac(d));
        objects.extend(nvidia_device_classes());
        if d.node_policy {
            objects.extend(node_policy(d));
        }
    }
    objects.push(daemon_set(d));
    objects
}

#[cfg(test)]
#[path = "agent_manifests_tests.rs"]
mod tests;
