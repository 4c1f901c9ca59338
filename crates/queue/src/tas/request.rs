//! What TAS is asked and what it answers: a PodSet's topology request as Kueue reads its
//! annotations into `PodSetTopologyRequest` (required, preferred or unconstrained level,
//! slice layers), the per-PodSet input (`TASPodSetRequests`), and the `TopologyAssignment`
//! (levels plus domains with pod counts) recorded in a Workload's admission.
//!
//! Knows nothing about nodes or the search itself (see `assign`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, Toleration};
use tessera_model::kueue::workload::PodSetTopologyRequest;

use crate::workload::Requests;

/// The `pods` resource: every pod takes one.
pub const PODS: &str = "pods";

/// One layer of slices: `size` pods that must share one domain of level `topology`
/// (`PodsetSliceRequiredTopologyConstraint`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceConstraint {
    /// The level's node label.
    pub topology: String,
    /// Pods per slice (0 when the size annotation is missing).
    pub size: i32,
}

/// `PodSet.topologyRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyRequest {
    /// `required` (annotation `kueue.x-k8s.io/podset-required-topology`).
    pub required: Option<String>,
    /// `preferred` (annotation `kueue.x-k8s.io/podset-preferred-topology`).
    pub preferred: Option<String>,
    /// `unconstrained` (annotation `kueue.x-k8s.io/podset-unconstrained-topology`).
    pub unconstrained: bool,
    /// The slice layers, outermost first: `podSetSliceRequiredTopology` with
    /// `podSetSliceSize`, or `podsetSliceRequiredTopologyConstraints` when given
    /// (`utiltas.PodSetSliceRequiredTopologyConstraints`).
    pub slices: Vec<SliceConstraint>,
}

impl TopologyRequest {
    /// A request with one slice layer, as the two slice annotations give it.
    pub fn with_slice(mut self, topology: &str, size: Option<i32>) -> TopologyRequest {
        self.slices = vec![SliceConstraint {
            topology: topology.to_owned(),
            size: size.unwrap_or(0),
        }];
        self
    }

    /// The request of a Workload's `spec.podSets[].topologyRequest`, `None` when it does not
    /// ask for TAS explicitly (`IsExplicitlyRequestingTAS`: a request holding only the pod
    /// index labels does not); slices from the multi-layer constraints when given, else from
    /// `podSetSliceRequiredTopology` with `podSetSliceSize`.
    pub fn from_api(request: &PodSetTopologyRequest) -> Option<TopologyRequest> {
        let slices = match (
            &request.podset_slice_required_topology_constraints,
            &request.pod_set_slice_required_topology,
        ) {
            (Some(layers), _) if !layers.is_empty() => layers
                .iter()
                .map(|layer| SliceConstraint {
                    topology: layer.topology.clone(),
                    size: layer.size,
                })
                .collect(),
            (_, Some(topology)) => vec![SliceConstraint {
                topology: topology.clone(),
                size: request.pod_set_slice_size.unwrap_or(0),
            }],
            _ => Vec::new(),
        };
        let explicit = request.required.is_some()
            || request.preferred.is_some()
            || request.unconstrained.is_some()
            || !slices.is_empty();
        explicit.then(|| TopologyRequest {
            required: request.required.clone(),
            preferred: request.preferred.clone(),
            unconstrained: request.unconstrained.unwrap_or(false),
            slices,
        })
    }

    /// Only slices are requested: no required or preferred level.
    pub fn is_slice_only(&self) -> bool {
        self.required.is_none() && self.preferred.is_none() && !self.slices.is_empty()
    }
}

/// One PodSet's TAS input in one flavor (`TASPodSetRequests`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSetTasRequest {
    /// The PodSet's name.
    pub name: String,
    /// Pods to place.
    pub count: i32,
    /// One pod's requests in canonical units (without `pods`).
    pub single_pod_requests: Requests,
    /// The topology request; `None` with `implied` for a PodSet TAS places at the lowest
    /// level because its flavor has a topology (Kueue's implied request).
    pub topology_request: Option<TopologyRequest>,
    /// The request is implied (no annotations; the ClusterQueue has only TAS flavors).
    pub implied: bool,
    /// The template's nodeSelector.
    pub node_selector: BTreeMap<String, String>,
    /// The template's required node affinity terms (ORed); empty for none.
    pub required_affinity: Vec<NodeSelectorTerm>,
    /// The template's tolerations.
    pub tolerations: Vec<Toleration>,
    /// `topologyRequest.podSetGroupName`: a leader and its workers placed together.
    pub group: Option<String>,
}

/// One domain of an assignment with its pod count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyDomainAssignment {
    /// The values of the assignment's levels.
    pub values: Vec<String>,
    /// Pods in the domain.
    pub count: i32,
}

/// `TopologyAssignment`: the levels (the hostname only when it is the lowest level) and the
/// domains with their pod counts, in lexicographic order of their level values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyAssignment {
    /// The level keys the domains' values are for.
    pub levels: Vec<String>,
    /// The domains.
    pub domains: Vec<TopologyDomainAssignment>,
}

impl TopologyAssignment {
    /// The pods assigned in all domains.
    pub fn pod_count(&self) -> i32 {
        self.domains
            .iter()
            .map(|domain| domain.count)
            .fold(0, i32::saturating_add)
    }
}

/// The outcome for one PodSet (`tasPodSetAssignmentResult`): an assignment or Kueue's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSetTasResult {
    /// The assignment, when one was found.
    pub assignment: Option<TopologyAssignment>,
    /// Why none was found (empty on success).
    pub failure_reason: String,
}

/// How often `requests` fit in `capacity`, and the resource that limits it
/// (`CountInWithLimitingResource`: zero requests never limit; ties go to the smaller name;
/// negative capacity counts as none).
pub fn count_in<'r>(requests: &'r Requests, capacity: &Requests) -> (i32, Option<&'r str>) {
    let mut best: Option<(i32, &str)> = None;
    for (resource, &value) in requests {
        let count = if value == 0 {
            i32::MAX
        } else {
            let available = capacity.get(resource).copied().unwrap_or(0);
            i32::try_from((available / value).clamp(0, i64::from(i32::MAX))).unwrap_or(i32::MAX)
        };
        let better = match best {
            None => true,
            Some((best_count, best_resource)) => {
                count < best_count || (count == best_count && resource.as_str() < best_resource)
            }
        };
        if better {
            best = Some((count, resource.as_str()));
        }
    }
    best.map_or((0, None), |(count, resource)| (count, Some(resource)))
}

/// `a - b` per resource (missing = zero), saturating.
pub fn subtract(a: &mut Requests, b: &Requests) {
    for (resource, value) in b {
        let entry = a.entry(resource.clone()).or_default();
        *entry = entry.saturating_sub(*value);
    }
}

/// `a + b` per resource (missing = zero), saturating.
pub fn add(a: &mut Requests, b: &Requests) {
    for (resource, value) in b {
        let entry = a.entry(resource.clone()).or_default();
        *entry = entry.saturating_add(*value);
    }
}

/// `requests` with one more pod (`requests + OnePodRequest`).
pub fn with_one_pod(requests: &Requests) -> Requests {
    let mut result = requests.clone();
    add(&mut result, &Requests::from([(PODS.to_owned(), 1)]));
    result
}

/// `requests` times `count`, saturating.
pub fn scaled(requests: &Requests, count: i32) -> Requests {
    requests
        .iter()
        .map(|(resource, value)| (resource.clone(), value.saturating_mul(i64::from(count))))
        .collect()
}
