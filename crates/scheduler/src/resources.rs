//! What a pod asks of a node, as kube-scheduler computes it (`resourcehelper.PodRequests`):
//! the app containers' requests plus running sidecars (restartable init containers), or the
//! largest init container step if that is more, plus the pod overhead; a container's missing
//! request defaults to its limit. Amounts are milli-units of each resource so CPU, memory and
//! extended resources compare alike.
//!
//! Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use tessera_model::Quantity;

use crate::node_info::narrow;

/// Amounts by resource name, in milli-units.
pub type Amounts = BTreeMap<String, i128>;

/// The CPU request assumed for scoring a container that states none (upstream's
/// `DefaultMilliCPURequest`).
pub const DEFAULT_CPU_MILLI: i128 = 100;
/// The memory request assumed for scoring a container that states none (200 MiB).
pub const DEFAULT_MEMORY_MILLI: i128 = 200 * 1024 * 1024 * 1000;

fn milli(quantity: &ApiQuantity) -> Option<i128> {
    quantity.0.parse::<Quantity>().ok().map(|q| q.milli_value())
}

/// Reads a resource list into amounts.
pub fn amounts(list: Option<&BTreeMap<String, ApiQuantity>>) -> Amounts {
    list.into_iter()
        .flatten()
        .filter_map(|(name, q)| Some((name.clone(), milli(q)?)))
        .collect()
}

/// A container's requests, a missing one defaulting to its limit.
pub(crate) fn container_requests(container: &Container) -> Amounts {
    tessera_model::pod_requests::container_requests(container, &amounts)
}

/// What the pod requests of its node.
pub fn pod_requests(pod: &Pod) -> Amounts {
    let Some(spec) = pod.spec.as_ref() else {
        return Amounts::new();
    };
    let mut requests = tessera_model::pod_requests::pod_requests(spec, &amounts);
    requests.retain(|_, amount| *amount != 0);
    requests
}

/// Everything the filters and scores need of one pod, computed once per scheduling attempt
/// so that judging each node reads plain numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Demand {
    /// [`pod_requests`].
    pub requests: Amounts,
    /// Requested CPU (milli-cores, saturated).
    pub cpu: i64,
    /// Requested memory (milli-bytes, saturated).
    pub memory: i64,
    /// Positive requests of every other resource but `pods`, by name.
    pub others: Vec<(String, i128)>,
    /// CPU and memory for scoring ([`nonzero_cpu_memory`], saturated).
    pub nonzero: (i64, i64),
    /// [`nonzero_cpu_memory`] unsaturated: what booking the pod adds to its node's sums.
    pub nonzero_exact: (i128, i128),
    /// Whole `nvidia.com/gpu` units.
    pub gpus: i64,
    /// Host ports the pod asks for.
    pub host_ports: Vec<crate::node_info::HostPort>,
    /// The extended resources a DeviceClass backs (DRAExtendedResource), in name order: on a
    /// node whose allocatable lacks one, DynamicResources allocates it and NodeResourcesFit
    /// leaves it alone. Empty until the scheduler fills it from its classes.
    pub dra_backed: Vec<String>,
    /// The pod names no node and has no nodeSelector or required node affinity: on a
    /// [plain](crate::node_info::Common::plain) node only NodeResourcesFit can reject it.
    pub plain: bool,
}

impl Demand {
    /// The demand of `pod`.
    pub fn of(pod: &Pod) -> Demand {
        let requests = pod_requests(pod);
        let get = |name: &str| requests.get(name).copied().unwrap_or(0);
        let (cpu, memory) = nonzero_cpu_memory(pod);
        Demand {
            cpu: narrow(get("cpu")),
            memory: narrow(get("memory")),
            others: requests
                .iter()
                .filter(|(name, amount)| {
                    **amount > 0 && !matches!(name.as_str(), "cpu" | "memory" | "pods")
                })
                .map(|(name, amount)| (name.clone(), *amount))
                .collect(),
            nonzero: (narrow(cpu), narrow(memory)),
            nonzero_exact: (cpu, memory),
            gpus: i64::try_from(get("nvidia.com/gpu") / 1000).unwrap_or(i64::MAX),
            host_ports: crate::node_info::host_ports(pod),
            dra_backed: Vec::new(),
            plain: pod.spec.as_ref().is_none_or(|spec| {
                spec.node_name.as_deref().is_none_or(str::is_empty)
                    && spec.node_selector.as_ref().is_none_or(|s| s.is_empty())
                    && spec
                        .affinity
                        .as_ref()
                        .and_then(|a| a.node_affinity.as_ref())
                        .and_then(|a| {
                            a.required_during_scheduling_ignored_during_execution
                                .as_ref()
                        })
                        .is_none()
            }),
            requests,
        }
    }
}

/// CPU and memory for scoring, with upstream's defaults for containers that request none.
pub fn nonzero_cpu_memory(pod: &Pod) -> (i128, i128) {
    let Some(spec) = pod.spec.as_ref() else {
        return (0, 0);
    };
    let mut cpu = 0;
    let mut memory = 0;
    for container in &spec.containers {
        let requests = container_requests(container);
        cpu += requests.get("cpu").copied().unwrap_or(DEFAULT_CPU_MILLI);
        memory += requests
            .get("memory")
            .copied()
            .unwrap_or(DEFAULT_MEMORY_MILLI);
    }
    (cpu, memory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("pod")
    }

    fn container(name: &str, cpu: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut c = json!({"name": name, "resources": {"requests": {"cpu": cpu}}});
        if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                c.insert(k.clone(), v.clone());
            }
        }
        c
    }

    #[test]
    fn requests_follow_upstream_arithmetic() {
        let table = [
            // Two app containers add up.
            (
                json!({"containers": [container("a", "1", json!({})), container("b", "500m", json!({}))]}),
                1500,
            ),
            // A large init container dominates.
            (
                json!({"initContainers": [container("i", "4", json!({}))], "containers": [container("a", "1", json!({}))]}),
                4000,
            ),
            // A sidecar runs beside the app and beside later init containers.
            (
                json!({"initContainers": [container("s", "1", json!({"restartPolicy": "Always"})), container("i", "2", json!({}))],
                    "containers": [container("a", "1", json!({}))]}),
                3000,
            ),
            (
                json!({"initContainers": [container("s", "1", json!({"restartPolicy": "Always"}))],
                    "containers": [container("a", "1", json!({}))], "overhead": {"cpu": "250m"}}),
                2250,
            ),
        ];
        for (i, (spec, cpu)) in table.into_iter().enumerate() {
            assert_eq!(
                pod_requests(&pod(spec)).get("cpu").copied(),
                Some(cpu),
                "case {i}"
            );
        }
        let gpu = pod(
            json!({"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}),
        );
        assert_eq!(
            pod_requests(&gpu).get("nvidia.com/gpu").copied(),
            Some(2000),
            "limits stand in for requests"
        );
        assert_eq!(
            nonzero_cpu_memory(&gpu),
            (DEFAULT_CPU_MILLI, DEFAULT_MEMORY_MILLI)
        );
    }
}
