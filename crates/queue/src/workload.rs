//! A Workload as the flavor assigner sees it (`pkg/workload/workload.go`: `Info`,
//! `PodSetResources`, `totalRequestsFromPodSets`): its PodSets with their scheduling
//! constraints, and each PodSet's total requests: the pod template's requests as Kueue reads
//! them (`resourcehelpers.PodRequests`: the app containers and running sidecars, or the largest
//! init step if more, plus the overhead; a missing request defaults to its limit, as Kueue's
//! limits-as-requests defaulting leaves it), in canonical units (`resource_value`), floored at
//! zero, times the count left after reclaimable pods, saturating. Also the per-PodSet flavor
//! index to resume from (`AssignmentClusterQueueState`).
//!
//! Knows nothing about quotas, flavors or ClusterQueues; requests of an admitted Workload
//! (read back from its admission), excluded resource prefixes and resource transformations are
//! not modelled yet; DRA devices are added to a PodSet's requests by `api::dra`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, PodSpec, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use tessera_model::quantity::Quantity;

use crate::amount::resource_value;

/// Requests per resource name in canonical units (milli-CPU, bytes, devices, pods).
pub type Requests = BTreeMap<String, i64>;

/// The PodSet name Kueue defaults to (`kueue.DefaultPodSetName`).
pub const DEFAULT_POD_SET_NAME: &str = "main";

/// The `pods` resource, counted when a ResourceGroup covers it.
pub const PODS: &str = "pods";

/// One PodSet of a Workload: what one pod asks for and where it may run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSet {
    /// `name`.
    pub name: String,
    /// `count`.
    pub count: i32,
    /// `minCount` (partial admission), if any.
    pub min_count: Option<i32>,
    /// One pod's requests (see [`pod_requests`]).
    pub requests: Requests,
    /// The template's `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// The template's required node affinity terms (ORed); empty for none.
    pub required_affinity: Vec<NodeSelectorTerm>,
    /// The template's tolerations.
    pub tolerations: Vec<Toleration>,
    /// `topologyRequest.podSetGroupName`: PodSets of one group get the same flavors.
    pub group: Option<String>,
    /// The explicit topology request (`None`: TAS only when the ClusterQueue is TAS-only).
    pub topology_request: Option<crate::tas::TopologyRequest>,
}

impl PodSet {
    /// A PodSet from a pod template spec.
    pub fn from_template(name: &str, count: i32, min_count: Option<i32>, spec: &PodSpec) -> PodSet {
        let required_affinity = spec
            .affinity
            .as_ref()
            .and_then(|affinity| affinity.node_affinity.as_ref())
            .and_then(|node| {
                node.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|selector| selector.node_selector_terms.clone())
            .unwrap_or_default();
        PodSet {
            name: name.to_owned(),
            count,
            min_count,
            requests: pod_requests(spec),
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            required_affinity,
            tolerations: spec.tolerations.clone().unwrap_or_default(),
            group: None,
            topology_request: None,
        }
    }
}

/// Pods of a PodSet that finished and no longer need quota (`status.reclaimablePods`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReclaimablePod {
    /// The PodSet's name.
    pub name: String,
    /// How many of its pods.
    pub count: i32,
}

/// What the flavor assigner needs of a Workload object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Workload {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The effective priority.
    pub priority: i32,
    /// `spec.podSets`.
    pub pod_sets: Vec<PodSet>,
    /// `status.reclaimablePods`.
    pub reclaimable_pods: Vec<ReclaimablePod>,
}

impl Workload {
    /// Whether some PodSet may run with fewer pods (`CanBePartiallyAdmitted`).
    pub fn can_be_partially_admitted(&self) -> bool {
        self.pod_sets
            .iter()
            .any(|ps| ps.count > ps.min_count.unwrap_or(ps.count))
    }
}

/// A PodSet's total requests (`PodSetResources`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSetResources {
    /// The PodSet's name.
    pub name: String,
    /// The requests of all its pods.
    pub requests: Requests,
    /// How many pods.
    pub count: i32,
}

impl PodSetResources {
    /// The requests for `count` pods instead (`ScaledTo`): per-pod requests times the new
    /// count, unchanged when the count is zero or the same.
    pub fn scaled_to(&self, count: i32) -> PodSetResources {
        let mut scaled = self.clone();
        if self.count != 0 && self.count != count {
            for value in scaled.requests.values_mut() {
                *value = (*value / i64::from(self.count)).saturating_mul(i64::from(count));
            }
            scaled.count = count;
        }
        scaled
    }
}

/// Where the last assignment stopped in each (PodSet, resource)'s flavor list
/// (`AssignmentClusterQueueState.LastTriedFlavorIdx`): the index of the flavor taken, or -1
/// when the whole list was tried. The caller drops it when the ClusterQueue changes
/// (Kueue compares the ClusterQueue's generation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssignmentState {
    /// Per PodSet, per resource, the last tried flavor index.
    pub last_tried_flavor_idx: Vec<BTreeMap<String, i32>>,
}

impl AssignmentState {
    /// The flavor index to start from for a PodSet's resource
    /// (`NextFlavorToTryForPodSetResource`): one past the last tried, 0 when unknown.
    pub fn next_flavor_to_try(
        state: Option<&AssignmentState>,
        pod_set: usize,
        resource: &str,
    ) -> usize {
        state
            .and_then(|state| state.last_tried_flavor_idx.get(pod_set))
            .and_then(|per_resource| per_resource.get(resource))
            .map_or(0, |idx| usize::try_from(idx.saturating_add(1)).unwrap_or(0))
    }
}

/// A Workload with its total requests (`workload.Info`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadInfo {
    /// The Workload.
    pub workload: Workload,
    /// Per PodSet, in order.
    pub total_requests: Vec<PodSetResources>,
    /// Where the previous assignment attempt stopped, if it still applies.
    pub last_assignment: Option<AssignmentState>,
}

impl WorkloadInfo {
    /// The Workload's info for a pending Workload (`NewInfo`), with reclaimable pods taken off
    /// the counts.
    pub fn new(workload: Workload) -> WorkloadInfo {
        let total_requests = workload
            .pod_sets
            .iter()
            .map(|ps| {
                let reclaimable = workload
                    .reclaimable_pods
                    .iter()
                    .find(|r| r.name == ps.name)
                    .map_or(0, |r| r.count.clamp(0, ps.count.max(0)));
                let count = ps.count - reclaimable;
                let requests = ps
                    .requests
                    .iter()
                    .map(|(name, value)| {
                        let total = (*value).max(0).saturating_mul(i64::from(count));
                        (name.clone(), total)
                    })
                    .collect();
                PodSetResources {
                    name: ps.name.clone(),
                    requests,
                    count,
                }
            })
            .collect();
        WorkloadInfo {
            workload,
            total_requests,
            last_assignment: None,
        }
    }
}

/// One pod's requests from its spec, in canonical units (`resourcehelpers.PodRequests` with a
/// missing request defaulting to the limit). Quantities that do not parse are skipped.
pub fn pod_requests(spec: &PodSpec) -> Requests {
    tessera_model::pod_requests::pod_requests(spec, &exact)
        .iter()
        .map(|(name, quantity)| (name.clone(), resource_value(name, quantity)))
        .collect()
}

fn exact(list: Option<&BTreeMap<String, ApiQuantity>>) -> BTreeMap<String, Quantity> {
    list.into_iter()
        .flatten()
        .filter_map(|(name, quantity)| Some((name.clone(), Quantity::try_from(quantity).ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(value: serde_json::Value) -> PodSpec {
        serde_json::from_value(value).expect("pod spec")
    }

    fn requests(entries: &[(&str, i64)]) -> Requests {
        entries
            .iter()
            .map(|(name, value)| ((*name).to_owned(), *value))
            .collect()
    }

    type Values = &'static [(&'static str, i64)];
    type PodSets = &'static [(&'static str, i32, &'static [(&'static str, &'static str)])];
    type NewInfoCase = (
        &'static str,
        PodSets,
        &'static [(&'static str, i32)],
        &'static [(&'static str, i32, Values)],
    );

    fn container(requests: serde_json::Value) -> serde_json::Value {
        json!({"name": "c", "resources": {"requests": requests}})
    }

    // Upstream: pkg/workload/workload_test.go, TestNewInfo, the cases about requests of
    // pending Workloads (admitted Workloads, TAS, DRA and transformations are not modelled).
    // (name, podsets (name, count, per-pod requests), reclaimable (name, count), want totals)
    #[test]
    fn new_info_total_requests() {
        let cases: &[NewInfoCase] = &[
            (
                "pending",
                &[("main", 1, &[("cpu", "10m"), ("memory", "512Ki")])],
                &[],
                &[("main", 1, &[("cpu", 10), ("memory", 512 * 1024)])],
            ),
            (
                "negative request floored to zero in total requests",
                &[("main", 2, &[("cpu", "-10m"), ("memory", "512Ki")])],
                &[],
                &[("main", 2, &[("cpu", 0), ("memory", 2 * 512 * 1024)])],
            ),
            (
                "pending with reclaim; reclaimablePods on",
                &[("main", 5, &[("cpu", "10m"), ("memory", "512Ki")])],
                &[("main", 2)],
                &[("main", 3, &[("cpu", 30), ("memory", 3 * 512 * 1024)])],
            ),
            (
                "prevent int overflow in total requests",
                &[("main", 2_147_483_647, &[("cpu", "4300000")])],
                &[],
                &[("main", 2_147_483_647, &[("cpu", i64::MAX)])],
            ),
            (
                "reclaimable count above the podset count never goes negative",
                &[("main", 2, &[("cpu", "1")])],
                &[("main", 5)],
                &[("main", 0, &[("cpu", 0)])],
            ),
        ];
        for (name, pod_sets, reclaimable, want) in cases {
            let workload = Workload {
                pod_sets: pod_sets
                    .iter()
                    .map(|(ps, count, reqs)| {
                        let reqs: serde_json::Map<_, _> = reqs
                            .iter()
                            .map(|(r, q)| ((*r).to_owned(), json!(q)))
                            .collect();
                        let template = spec(json!({"containers": [container(reqs.into())]}));
                        PodSet::from_template(ps, *count, None, &template)
                    })
                    .collect(),
                reclaimable_pods: reclaimable
                    .iter()
                    .map(|(ps, count)| ReclaimablePod {
                        name: (*ps).to_owned(),
                        count: *count,
                    })
                    .collect(),
                ..Workload::default()
            };
            let info = WorkloadInfo::new(workload);
            let got: Vec<(&str, i32, Requests)> = info
                .total_requests
                .iter()
                .map(|ps| (ps.name.as_str(), ps.count, ps.requests.clone()))
                .collect();
            let want: Vec<(&str, i32, Requests)> = want
                .iter()
                .map(|(ps, count, reqs)| (*ps, *count, requests(reqs)))
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }

    // Upstream: k8s.io/component-helpers/resource, TestPodRequests (the cases Kueue relies on):
    // containers add up, init containers take the peak, sidecars run alongside, overhead adds,
    // a missing request defaults to the limit.
    #[test]
    fn pod_requests_follow_pod_requests() {
        let cases: &[(&str, serde_json::Value, Values)] = &[
            (
                "containers add up",
                json!({"containers": [
                    container(json!({"cpu": "1", "memory": "1Mi"})),
                    container(json!({"cpu": "500m"}))]}),
                &[("cpu", 1500), ("memory", 1 << 20)],
            ),
            (
                "init container peak wins when larger",
                json!({"containers": [container(json!({"cpu": "1"}))],
                       "initContainers": [container(json!({"cpu": "3"})), container(json!({"cpu": "2"}))]}),
                &[("cpu", 3000)],
            ),
            (
                "sidecar counts beside the app containers and later init steps",
                json!({"containers": [container(json!({"cpu": "1"}))],
                       "initContainers": [
                           {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                           container(json!({"cpu": "3"}))]}),
                &[("cpu", 4000)],
            ),
            (
                "overhead is added",
                json!({"containers": [container(json!({"cpu": "1"}))], "overhead": {"cpu": "250m"}}),
                &[("cpu", 1250)],
            ),
            (
                "limits stand in for missing requests",
                json!({"containers": [{"name": "c", "resources": {
                    "requests": {"cpu": "1"}, "limits": {"cpu": "2", "nvidia.com/gpu": "4"}}}]}),
                &[("cpu", 1000), ("nvidia.com/gpu", 4)],
            ),
            (
                "sub-unit memory rounds up",
                json!({"containers": [container(json!({"memory": "1500m"}))]}),
                &[("memory", 2)],
            ),
        ];
        for (name, value, want) in cases {
            assert_eq!(pod_requests(&spec(value.clone())), requests(want), "{name}");
        }
    }

    #[test]
    fn scaled_to_divides_then_multiplies() {
        let ps = PodSetResources {
            name: "main".into(),
            requests: requests(&[("cpu", 3000), ("pods", 3)]),
            count: 3,
        };
        let scaled = ps.scaled_to(1);
        assert_eq!(scaled.requests, requests(&[("cpu", 1000), ("pods", 1)]));
        assert_eq!(scaled.count, 1);
        let zero = PodSetResources { count: 0, ..ps };
        assert_eq!(zero.scaled_to(4).count, 0, "a zero count is kept");
    }

    // Upstream: pkg/workload/workload_test.go, TestAssignmentClusterQueueState (the
    // NextFlavorToTryForPodSetResource part).
    #[test]
    fn next_flavor_to_try() {
        let state = AssignmentState {
            last_tried_flavor_idx: vec![
                BTreeMap::from([("cpu".to_owned(), 0), ("memory".to_owned(), -1)]),
                BTreeMap::from([("cpu".to_owned(), 2)]),
            ],
        };
        let cases: &[(usize, &str, usize)] = &[
            (0, "cpu", 1),
            (0, "memory", 0),
            (0, "gpu", 0),
            (1, "cpu", 3),
            (2, "cpu", 0),
        ];
        for (ps, resource, want) in cases {
            assert_eq!(
                AssignmentState::next_flavor_to_try(Some(&state), *ps, resource),
                *want,
                "{ps}/{resource}"
            );
        }
        assert_eq!(AssignmentState::next_flavor_to_try(None, 0, "cpu"), 0);
    }
}
