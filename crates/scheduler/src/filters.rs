//! kube-scheduler's Filter plugins, in its order, with its reasons: NodeUnschedulable,
//! NodeName, TaintToleration, NodeAffinity (nodeSelector and required node affinity),
//! NodePorts, NodeResourcesFit (every requested resource against allocatable, `Too many pods`).
//! DynamicResources needs the claims and lives in [`crate::schedule`].
//!
//! Pure: a pod and a node in, a verdict out.

use k8s_openapi::api::core::v1::{Pod, Toleration};
use tessera_model::node_selector;
use tessera_model::taints::tolerated;

use crate::node_info::NodeInfo;
use crate::resources::{Amounts, Demand};

/// A plugin that rejected a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Plugin {
    /// `spec.unschedulable`.
    NodeUnschedulable,
    /// `spec.nodeName` names another node.
    NodeName,
    /// An untolerated NoSchedule/NoExecute taint.
    TaintToleration,
    /// nodeSelector or required node affinity.
    NodeAffinity,
    /// Host ports in use.
    NodePorts,
    /// Not enough allocatable.
    NodeResourcesFit,
    /// GPUs cannot be NUMA-aligned as the node's Topology Manager policy demands.
    NodeResourceTopologyMatch,
    /// A DoNotSchedule topology spread constraint.
    PodTopologySpread,
    /// Required inter-pod (anti-)affinity.
    InterPodAffinity,
    /// Claims cannot be allocated or are bound elsewhere.
    DynamicResources,
    /// PersistentVolumeClaims cannot be bound or provisioned on the node.
    VolumeBinding,
}

/// Why a node was rejected: the plugin and upstream's reason strings (one node may give
/// several, as NodeResourcesFit does per resource).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Who rejected.
    pub plugin: Plugin,
    /// The reasons, as the FailedScheduling message counts them.
    pub reasons: Vec<String>,
}

impl Rejection {
    /// A rejection with one reason.
    pub fn one(plugin: Plugin, reason: &str) -> Rejection {
        Rejection {
            plugin,
            reasons: vec![reason.to_string()],
        }
    }
}

/// The reason strings.
pub mod reasons {
    /// NodeUnschedulable.
    pub const UNSCHEDULABLE: &str = "node(s) were unschedulable";
    /// NodeName.
    pub const NODE_NAME: &str = "node(s) didn't match the requested node name";
    /// TaintToleration.
    pub const TAINTS: &str = "node(s) had untolerated taint(s)";
    /// NodeAffinity.
    pub const AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
    /// NodePorts.
    pub const PORTS: &str = "node(s) didn't have free ports for the requested pod ports";
    /// NodeResourcesFit, pod count.
    pub const TOO_MANY_PODS: &str = "Too many pods";
    /// DynamicResources.
    pub const CLAIMS: &str = "cannot allocate all claims";
    /// NodeResourceTopologyMatch.
    pub const NUMA: &str = "node(s) could not align the pod's GPUs to the Topology Manager policy";
    /// PodTopologySpread.
    pub const SPREAD: &str = "node(s) didn't match pod topology spread constraints";
    /// PodTopologySpread: the node lacks the topology key.
    pub const SPREAD_LABEL: &str =
        "node(s) didn't match pod topology spread constraints (missing required label)";
    /// InterPodAffinity: required affinity.
    pub const AFFINITY_RULES: &str = "node(s) didn't match pod affinity rules";
    /// InterPodAffinity: required anti-affinity.
    pub const ANTI_AFFINITY_RULES: &str = "node(s) didn't match pod anti-affinity rules";
    /// InterPodAffinity: an existing pod's anti-affinity.
    pub const EXISTING_ANTI_AFFINITY: &str =
        "node(s) didn't satisfy existing pods anti-affinity rules";
    /// DynamicResources: a claim allocated for other nodes.
    pub const CLAIM_ELSEWHERE: &str = "resourceclaim not available on the node";
}

/// The pod's tolerations.
pub fn tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

/// Runs the filters in upstream's order; the first rejection stops.
pub fn run(pod: &Pod, demand: &Demand, node: &NodeInfo) -> Result<(), Rejection> {
    if demand.plain && node.common.plain {
        // Every other filter would pass (see `Demand::plain`).
        return node_resources_fit(demand, node);
    }
    run_every(pod, demand, node)
}

/// Every filter, without the plain-pod shortcut.
pub fn run_every(pod: &Pod, demand: &Demand, node: &NodeInfo) -> Result<(), Rejection> {
    node_unschedulable(pod, node)?;
    node_name(pod, node)?;
    taint_toleration(pod, node)?;
    node_affinity(pod, node)?;
    node_ports(demand, node)?;
    node_resources_fit(demand, node)?;
    node_resource_topology(demand, node)
}

/// The whole GPUs a pod asks for, in units.
pub fn gpus_wanted(requests: &Amounts) -> i64 {
    i64::try_from(requests.get("nvidia.com/gpu").copied().unwrap_or(0) / 1000).unwrap_or(i64::MAX)
}

/// NodeResourceTopologyMatch (as scheduler-plugins does with NodeResourceTopology): a node
/// whose kubelet runs `single-numa-node` takes the pod only if one NUMA node has its GPUs
/// free; `restricted` only if its GPUs fit in as few NUMA nodes as they could at best. A
/// placement its kubelet would reject with TopologyAffinityError is never chosen.
pub fn node_resource_topology(demand: &Demand, node: &NodeInfo) -> Result<(), Rejection> {
    let wanted = demand.gpus;
    let Some(numa) = node.gpu_numa.as_ref().filter(|_| wanted > 0) else {
        return Ok(());
    };
    let aligned = match numa.policy.as_str() {
        "single-numa-node" => numa.free.values().any(|free| *free >= wanted),
        "restricted" => {
            let best = crate::node_info::GpuNuma::narrowest(&numa.total, wanted);
            best.is_some() && crate::node_info::GpuNuma::narrowest(&numa.free, wanted) == best
        }
        _ => true,
    };
    if aligned {
        Ok(())
    } else {
        Err(Rejection::one(
            Plugin::NodeResourceTopologyMatch,
            reasons::NUMA,
        ))
    }
}

/// NodeUnschedulable: a cordoned node takes only pods tolerating its taint.
pub fn node_unschedulable(pod: &Pod, node: &NodeInfo) -> Result<(), Rejection> {
    if !node.unschedulable {
        return Ok(());
    }
    let taint = k8s_openapi::api::core::v1::Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    if tolerated(tolerations(pod), &taint) {
        Ok(())
    } else {
        Err(Rejection::one(
            Plugin::NodeUnschedulable,
            reasons::UNSCHEDULABLE,
        ))
    }
}

/// NodeName.
pub fn node_name(pod: &Pod, node: &NodeInfo) -> Result<(), Rejection> {
    match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        Some(name) if !name.is_empty() && name != node.name => {
            Err(Rejection::one(Plugin::NodeName, reasons::NODE_NAME))
        }
        _ => Ok(()),
    }
}

/// TaintToleration: every NoSchedule and NoExecute taint tolerated.
pub fn taint_toleration(pod: &Pod, node: &NodeInfo) -> Result<(), Rejection> {
    let tolerations = tolerations(pod);
    let blocked = node.taints.iter().any(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerated(tolerations, taint)
    });
    if blocked {
        Err(Rejection::one(Plugin::TaintToleration, reasons::TAINTS))
    } else {
        Ok(())
    }
}

/// NodeAffinity: `nodeSelector` and the required node affinity terms.
pub fn node_affinity(pod: &Pod, node: &NodeInfo) -> Result<(), Rejection> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| node.labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let affinity_ok = required.is_none_or(|r| node_selector::matches(r, &node.name, &node.labels));
    if selector_ok && affinity_ok {
        Ok(())
    } else {
        Err(Rejection::one(Plugin::NodeAffinity, reasons::AFFINITY))
    }
}

/// NodePorts: a wanted host port clashes when protocol and port match and either host IP is
/// the wildcard or they are equal.
pub fn node_ports(demand: &Demand, node: &NodeInfo) -> Result<(), Rejection> {
    if node.ports.is_empty() || demand.host_ports.is_empty() {
        return Ok(());
    }
    let wildcard = |ip: &str| ip == "0.0.0.0" || ip == "::" || ip.is_empty();
    let clash = demand.host_ports.iter().any(|(protocol, ip, port)| {
        node.ports
            .iter()
            .any(|(p, i, n)| p == protocol && n == port && (wildcard(ip) || wildcard(i) || i == ip))
    });
    if clash {
        Err(Rejection::one(Plugin::NodePorts, reasons::PORTS))
    } else {
        Ok(())
    }
}

/// NodeResourcesFit: one pod more, and every requested resource within allocatable; an
/// extended resource the node does not offer but a DeviceClass backs is left to
/// DynamicResources (upstream's `shouldDelegateResourceToDRA`).
pub fn node_resources_fit(demand: &Demand, node: &NodeInfo) -> Result<(), Rejection> {
    let common = &node.common;
    let pods_full = common.pods_requested.saturating_add(1000) > common.pods;
    let cpu_short = demand.cpu > 0 && common.cpu_requested.saturating_add(demand.cpu) > common.cpu;
    let memory_short =
        demand.memory > 0 && common.memory_requested.saturating_add(demand.memory) > common.memory;
    let other_short = |name: &str, amount: i128| -> bool {
        let allocatable = node.allocatable.get(name).copied().unwrap_or(0);
        let delegated = allocatable <= 0 && demand.dra_backed.iter().any(|n| n == name);
        !delegated && node.requested.get(name).copied().unwrap_or(0) + amount > allocatable
    };
    let fits = !pods_full
        && !cpu_short
        && !memory_short
        && demand
            .others
            .iter()
            .all(|(name, amount)| !other_short(name, *amount));
    if fits {
        return Ok(());
    }
    let mut reasons = Vec::new();
    if pods_full {
        reasons.push(reasons::TOO_MANY_PODS.to_string());
    }
    // Upstream lists the short resources in name order.
    for (name, amount) in &demand.requests {
        let short = match name.as_str() {
            "cpu" => cpu_short,
            "memory" => memory_short,
            "pods" => false,
            other => *amount > 0 && other_short(other, *amount),
        };
        if short {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    Err(Rejection {
        plugin: Plugin::NodeResourcesFit,
        reasons,
    })
}
