//! The NVIDIA GPU operator's components as the node twins run them (opt-in, `tessera up
//! --gpu-operator`): the `gpu-operator` namespace (Pod Security `privileged`, as the
//! operator requires), a ServiceAccount and a DaemonSet per component, named, labelled
//! (`app: <name>`), imaged and tolerating `nvidia.com/gpu` as the operator's manifests do —
//! `nvidia-driver-daemonset`, `nvidia-device-plugin-daemonset` (or the DRA driver's
//! `nvidia-dra-driver-gpu-kubelet-plugin` on nodes that offer DRA), `nvidia-dcgm-exporter`
//! (port 9400 `metrics`, with its Service, port `gpu-metrics`) and
//! `nvidia-operator-validator` — each selecting the nodes the operator's labeller marks
//! with `nvidia.com/gpu.deploy.<component>: "true"` ([`deploy_labels`]).
//!
//! Breaking a component (`tessera fault operator`) is a node fault: `tessera_node::faults`
//! reads it and the node twin gives the component's pod a crash-looping status.
//!
//! Pure data: it knows nothing of how the objects are written or pods simulated.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tessera_node::accelerators::DRIVER_VERSION;

/// The operator's namespace.
pub const NAMESPACE: &str = "gpu-operator";

/// One component of the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Component {
    /// The containerised driver.
    Driver,
    /// NVIDIA's device plugin (device-plugin nodes).
    DevicePlugin,
    /// The NVIDIA DRA driver's kubelet plugin (DRA nodes).
    DraKubeletPlugin,
    /// dcgm-exporter.
    DcgmExporter,
    /// The operator's validator.
    Validator,
}

/// Every component.
pub const COMPONENTS: [Component; 5] = [
    Component::Driver,
    Component::DevicePlugin,
    Component::DraKubeletPlugin,
    Component::DcgmExporter,
    Component::Validator,
];

impl Component {
    /// The DaemonSet's name, also its `app` label.
    pub fn name(self) -> &'static str {
        match self {
            Component::Driver => "nvidia-driver-daemonset",
            Component::DevicePlugin => "nvidia-device-plugin-daemonset",
            Component::DraKubeletPlugin => "nvidia-dra-driver-gpu-kubelet-plugin",
            Component::DcgmExporter => "nvidia-dcgm-exporter",
            Component::Validator => "nvidia-operator-validator",
        }
    }

    /// Its main container's name, as the operator's manifests name it.
    pub fn container(self) -> &'static str {
        match self {
            Component::Driver => "nvidia-driver-ctr",
            Component::DevicePlugin => "nvidia-device-plugin",
            Component::DraKubeletPlugin => "gpus",
            Component::DcgmExporter => "nvidia-dcgm-exporter",
            Component::Validator => "nvidia-operator-validator",
        }
    }

    /// The ServiceAccount its pods run as.
    pub fn service_account(self) -> &'static str {
        match self {
            Component::Driver => "nvidia-driver",
            Component::DevicePlugin => "nvidia-device-plugin",
            Component::DraKubeletPlugin => "nvidia-dra-driver-gpu-service-account-kubeletplugin",
            Component::DcgmExporter => "nvidia-dcgm-exporter",
            Component::Validator => "nvidia-operator-validator",
        }
    }

    /// The node label (`nvidia.com/gpu.deploy.<component>`) that selects its nodes.
    pub fn deploy_label(self) -> &'static str {
        match self {
            Component::Driver => "nvidia.com/gpu.deploy.driver",
            Component::DevicePlugin => "nvidia.com/gpu.deploy.device-plugin",
            Component::DraKubeletPlugin => "nvidia.com/gpu.deploy.dra-driver",
            Component::DcgmExporter => "nvidia.com/gpu.deploy.dcgm-exporter",
            Component::Validator => "nvidia.com/gpu.deploy.operator-validator",
        }
    }

    /// Its image.
    pub fn image(self) -> String {
        let (major, minor, revision) = DRIVER_VERSION;
        match self {
            Component::Driver => {
                format!("nvcr.io/nvidia/driver:{major}.{minor}.{revision}-ubuntu22.04")
            }
            Component::DevicePlugin => "nvcr.io/nvidia/k8s-device-plugin:v0.17.2".into(),
            Component::DraKubeletPlugin => "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0".into(),
            Component::DcgmExporter => {
                "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04".into()
            }
            Component::Validator => {
                "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.2".into()
            }
        }
    }
}

/// The labels the operator's labeller puts on an NVIDIA GPU node: every component's
/// deploy label, the device plugin's or the DRA driver's as the node exposes its GPUs.
pub fn deploy_labels(dra: bool) -> BTreeMap<String, String> {
    COMPONENTS
        .iter()
        .filter(|c| match c {
            Component::DevicePlugin => !dra,
            Component::DraKubeletPlugin => dra,
            _ => true,
        })
        .map(|c| (c.deploy_label().to_string(), "true".to_string()))
        .collect()
}

fn daemon_set(component: Component) -> Value {
    let name = component.name();
    let mut container = json!({"name": component.container(), "image": component.image()});
    if component == Component::DcgmExporter {
        container["ports"] = json!([{"name": "metrics", "containerPort": crate::dcgm::PORT}]);
        container["env"] = json!([{"name": "DCGM_EXPORTER_LISTEN", "value": ":9400"},
                                  {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"}]);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {component.deploy_label(): "true"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "priorityClassName": "system-node-critical",
                    "serviceAccountName": component.service_account(),
                    "containers": [container],
                },
            },
        },
    })
}

/// The operator's objects, in the order to create them.
pub fn objects() -> Vec<Value> {
    let mut objects = vec![json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {
            "kubernetes.io/metadata.name": NAMESPACE,
            "pod-security.kubernetes.io/enforce": "privileged",
        }},
    })];
    for component in COMPONENTS {
        objects.push(json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": component.service_account(), "namespace": NAMESPACE},
        }));
    }
    objects.extend(COMPONENTS.map(daemon_set));
    objects.push(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "nvidia-dcgm-exporter", "namespace": NAMESPACE,
                     "labels": {"app": "nvidia-dcgm-exporter"}},
        "spec": {
            "selector": {"app": "nvidia-dcgm-exporter"},
            "ports": [{"name": "gpu-metrics", "port": crate::dcgm::PORT, "targetPort": crate::dcgm::PORT, "protocol": "TCP"}],
        },
    }));
    objects
}

/// Adds [`deploy_labels`] to every pool of NVIDIA GPU nodes of `topology`, as the
/// operator's labeller marks those nodes.
pub fn label_pools(topology: &mut tessera_node::Topology) {
    use tessera_devices::catalog::Vendor;
    use tessera_node::hardware::Exposure;
    let nodes = topology.nodes();
    for pool in &mut topology.pools {
        let Some(node) = nodes.iter().find(|n| n.pool == pool.name) else {
            continue;
        };
        let nvidia = node
            .hardware
            .as_ref()
            .and_then(|h| h.gpu.as_ref())
            .is_some_and(|gpu| gpu.vendor == Vendor::Nvidia);
        // VM hosts get the sandbox operands instead (tessera_node::worker_model).
        if nvidia && !node.machine.is_vm() {
            let dra = node
                .devices
                .as_ref()
                .is_some_and(|d| d.exposure == Exposure::Dra);
            pool.labels.extend(deploy_labels(dra));
        }
    }
}
