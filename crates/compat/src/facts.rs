//! What a shell gathers about a cluster for the compatibility check, and the planned change to
//! check: plain data, plus a reader that builds [`ClusterFacts`] from Node objects (their labels as
//! GPU feature discovery writes them and `status.nodeInfo.kubeletVersion`).
//!
//! Owns the facts' shape and the Node-label reading. It does not list objects, talk to an API
//! server or know any compatibility rule.

use serde_json::Value;

use crate::version::Version;

/// One node's versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    pub name: String,
    /// `status.nodeInfo.kubeletVersion`.
    pub kubelet: Version,
    /// NVIDIA driver (`nvidia.com/cuda.driver-version.*`, or the deprecated `cuda.driver.*`).
    pub driver: Option<Version>,
    /// Highest CUDA the driver supports (`nvidia.com/cuda.runtime-version.*`).
    pub cuda_driver: Option<Version>,
    /// `nvidia.com/gpu.product`, e.g. `NVIDIA-H100-80GB-HBM3`.
    pub gpu_product: Option<String>,
    /// `nvidia.com/gpu.family`, e.g. `hopper`.
    pub gpu_family: Option<String>,
}

/// A workload's container built against a CUDA version, optionally pinned to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCuda {
    /// How the conflict names it, e.g. `team-a/train`.
    pub name: String,
    /// The node it runs on; `None` checks it against every GPU node.
    pub node: Option<String>,
    pub cuda: Version,
}

/// A DRA API version something in the cluster uses (a DRA driver, stored objects, manifests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraUse {
    /// Who uses it, e.g. `dra-driver gpu.nvidia.com`.
    pub user: String,
    /// `resource.k8s.io/v1`, `resource.k8s.io/v1beta1`, …
    pub api_version: String,
}

/// Everything the checker looks at. Components not found are `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterFacts {
    /// `/version` `gitVersion`.
    pub api_server: Version,
    pub kubectl: Option<Version>,
    pub nodes: Vec<NodeFacts>,
    pub gpu_operator: Option<Version>,
    pub device_plugin: Option<Version>,
    pub dra_driver: Option<Version>,
    pub kueue: Option<Version>,
    pub dra_apis: Vec<DraUse>,
    pub containers: Vec<ContainerCuda>,
}

/// A planned upgrade (or downgrade) to check before it is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new driver on every GPU node.
    Driver(Version),
    /// A new API server version; kubelets keep theirs (the control plane goes first).
    Kubernetes(Version),
    GpuOperator(Version),
    Kueue(Version),
}

impl Change {
    /// The facts as they would be once the change is made.
    pub fn apply(&self, facts: &ClusterFacts) -> ClusterFacts {
        let mut next = facts.clone();
        match self {
            Change::Driver(v) => {
                for node in next.nodes.iter_mut().filter(|n| n.is_gpu()) {
                    node.driver = Some(v.clone());
                    // The new driver's CUDA ceiling comes from the matrix, not the old label.
                    node.cuda_driver = None;
                }
            }
            Change::Kubernetes(v) => next.api_server = v.clone(),
            Change::GpuOperator(v) => next.gpu_operator = Some(v.clone()),
            Change::Kueue(v) => next.kueue = Some(v.clone()),
        }
        next
    }
}

impl NodeFacts {
    /// Whether GPU feature discovery labelled this node.
    pub fn is_gpu(&self) -> bool {
        self.driver.is_some() || self.gpu_product.is_some() || self.gpu_family.is_some()
    }
}

/// A Node object the reader could not use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node {node}: {field}: {message}")]
pub struct FactsError {
    /// The node's name, or `items[i]` when it has none.
    pub node: String,
    /// The field or label, e.g. `metadata.labels["nvidia.com/cuda.driver.major"]`.
    pub field: String,
    pub message: String,
}

const DRIVER_FULL: &str = "nvidia.com/cuda.driver-version.full";
const DRIVER_PARTS: [&str; 3] = [
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver-version.minor",
    "nvidia.com/cuda.driver-version.revision",
];
const DRIVER_PARTS_OLD: [&str; 3] = [
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
];
const CUDA_FULL: &str = "nvidia.com/cuda.runtime-version.full";
const CUDA_PARTS: [&str; 2] = [
    "nvidia.com/cuda.runtime-version.major",
    "nvidia.com/cuda.runtime-version.minor",
];
const CUDA_PARTS_OLD: [&str; 2] = [
    "nvidia.com/cuda.runtime.major",
    "nvidia.com/cuda.runtime.minor",
];
const PRODUCT: &str = "nvidia.com/gpu.product";
const FAMILY: &str = "nvidia.com/gpu.family";

impl ClusterFacts {
    /// Facts with only the API server and nodes known; the shell fills in components it finds.
    pub fn from_nodes(api_server: &str, nodes: &[Value]) -> Result<ClusterFacts, FactsError> {
        let api_server = Version::parse(api_server).map_err(|e| FactsError {
            node: "-".into(),
            field: "apiserver gitVersion".into(),
            message: e.to_string(),
        })?;
        let nodes = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| node_facts(i, n))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ClusterFacts {
            api_server,
            kubectl: None,
            nodes,
            gpu_operator: None,
            device_plugin: None,
            dra_driver: None,
            kueue: None,
            dra_apis: Vec::new(),
            containers: Vec::new(),
        })
    }
}

/// Reads one Node object (`items[index]` of a NodeList).
pub fn node_facts(index: usize, node: &Value) -> Result<NodeFacts, FactsError> {
    let name = node
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map_or_else(|| format!("items[{index}]"), str::to_owned);
    let err = |field: String, message: String| FactsError {
        node: name.clone(),
        field,
        message,
    };
    let kubelet_text = node
        .pointer("/status/nodeInfo/kubeletVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| err("status.nodeInfo.kubeletVersion".into(), "missing".into()))?;
    let kubelet = Version::parse(kubelet_text)
        .map_err(|e| err("status.nodeInfo.kubeletVersion".into(), e.to_string()))?;

    let labels = node.pointer("/metadata/labels").and_then(Value::as_object);
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let label_field = |key: &str| format!("metadata.labels[{key:?}]");
    let parse = |key: &str, text: &str, major_ok: bool| {
        let parsed = if major_ok {
            Version::parse_major_ok(text)
        } else {
            Version::parse(text)
        };
        parsed.map_err(|e| err(label_field(key), e.to_string()))
    };
    // A version from a `.full` label, else from its dotted parts (new names, then deprecated).
    let version = |full: &str, sets: [&[&str]; 2]| -> Result<Option<Version>, FactsError> {
        if let Some(text) = label(full) {
            return parse(full, text, false).map(Some);
        }
        for keys in sets {
            let Some(major) = label(keys[0]) else {
                continue;
            };
            let mut text = major.to_owned();
            for key in &keys[1..] {
                match label(key) {
                    Some(part) => {
                        text.push('.');
                        text.push_str(part);
                    }
                    None => break,
                }
            }
            return parse(keys[0], &text, true).map(Some);
        }
        Ok(None)
    };
    let driver = version(DRIVER_FULL, [&DRIVER_PARTS, &DRIVER_PARTS_OLD])?;
    let cuda_driver = version(CUDA_FULL, [&CUDA_PARTS, &CUDA_PARTS_OLD])?;
    Ok(NodeFacts {
        kubelet,
        driver,
        cuda_driver,
        gpu_product: label(PRODUCT).map(str::to_owned),
        gpu_family: label(FAMILY).map(str::to_owned),
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: Value, kubelet: Value) -> Value {
        json!({"metadata": {"name": "gpu-1", "labels": labels}, "status": {"nodeInfo": {"kubeletVersion": kubelet}}})
    }

    #[test]
    fn reads_gfd_labels() {
        let v = |s| Version::parse(s).expect("test version");
        // (labels, driver, cuda)
        let cases = [
            (
                json!({"nvidia.com/cuda.driver-version.full": "550.144.03", "nvidia.com/cuda.runtime-version.full": "12.4"}),
                Some(v("550.144.03")),
                Some(v("12.4")),
            ),
            (
                json!({"nvidia.com/cuda.driver-version.major": "570", "nvidia.com/cuda.driver-version.minor": "172",
                       "nvidia.com/cuda.driver-version.revision": "08",
                       "nvidia.com/cuda.runtime-version.major": "12", "nvidia.com/cuda.runtime-version.minor": "8"}),
                Some(v("570.172.08")),
                Some(v("12.8")),
            ),
            (
                json!({"nvidia.com/cuda.driver.major": "535", "nvidia.com/cuda.driver.minor": "129",
                       "nvidia.com/cuda.driver.rev": "03", "nvidia.com/cuda.runtime.major": "12",
                       "nvidia.com/cuda.runtime.minor": "2"}),
                Some(v("535.129.03")),
                Some(v("12.2")),
            ),
            (
                json!({"nvidia.com/cuda.driver.major": "580"}),
                Some(v("580.0")),
                None,
            ),
            (json!({}), None, None),
        ];
        for (labels, driver, cuda) in cases {
            let facts = node_facts(0, &node(labels.clone(), json!("v1.34.1"))).expect("node");
            assert_eq!(
                (facts.driver, facts.cuda_driver),
                (driver, cuda),
                "{labels}"
            );
            assert_eq!(facts.kubelet, v("1.34.1"));
        }
        let facts = node_facts(
            0,
            &node(json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.family": "hopper"}), json!("v1.34.1")),
        )
        .expect("node");
        assert_eq!(facts.gpu_product.as_deref(), Some("NVIDIA-H100-80GB-HBM3"));
        assert_eq!(facts.gpu_family.as_deref(), Some("hopper"));
        assert!(facts.is_gpu());
    }

    #[test]
    fn bad_nodes_name_the_node_and_field() {
        let cases = [
            (
                node(json!({}), Value::Null),
                "node gpu-1: status.nodeInfo.kubeletVersion: missing",
            ),
            (
                node(json!({}), json!("latest")),
                "node gpu-1: status.nodeInfo.kubeletVersion: invalid version \"latest\"",
            ),
            (
                node(
                    json!({"nvidia.com/cuda.driver.major": "r580"}),
                    json!("v1.34.0"),
                ),
                "node gpu-1: metadata.labels[\"nvidia.com/cuda.driver.major\"]: invalid version \"r580\"",
            ),
            (
                json!({"status": {}}),
                "node items[3]: status.nodeInfo.kubeletVersion: missing",
            ),
        ];
        for (n, want) in cases {
            let err = node_facts(3, &n).expect_err("bad node").to_string();
            assert!(err.starts_with(want), "{err}");
        }
        let err = ClusterFacts::from_nodes("v1", &[]).expect_err("bad apiserver");
        assert_eq!(err.field, "apiserver gitVersion");
    }
}
