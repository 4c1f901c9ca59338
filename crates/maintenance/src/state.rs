//! `ClusterUpgradeState` built from plain per-node facts (what upstream's `BuildState` reads
//! from the API: the node's labels, spec.unschedulable, Ready condition and annotations; its
//! driver pod against the DaemonSet's newest ControllerRevision; the workload, GPU and
//! validator pods on it), plus upstream's counting helpers and the `GetUpgradesAvailable` slot
//! arithmetic. Knows no API client: a shell gathers the facts and evaluates label selectors.

use std::collections::{BTreeMap, BTreeSet};

use crate::keys::{Keys, TRUE, UpgradeState};

/// A pod by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

/// The node's driver pod, as upstream's `podInSyncWithDS`, `isDriverPodInSync` and
/// `isDriverPodFailing` see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverPod {
    pub pod: PodRef,
    /// No owner reference (no DaemonSet): upstream never treats it as in sync.
    pub orphaned: bool,
    /// Its `controller-revision-hash` label equals the DaemonSet's newest ControllerRevision hash.
    pub revision_in_sync: bool,
    /// Phase Running, at least one container status, every container Ready.
    pub running_and_ready: bool,
    /// Some (init) container not Ready with more than 10 restarts.
    pub failing: bool,
    /// deletionTimestamp set.
    pub terminating: bool,
}

impl DriverPod {
    /// A driver pod owned by its DaemonSet, at the newest revision, Running and Ready.
    pub fn in_sync_and_ready(pod: PodRef) -> DriverPod {
        DriverPod {
            pod,
            orphaned: false,
            revision_in_sync: true,
            running_and_ready: true,
            failing: false,
            terminating: false,
        }
    }
}

/// Phase of a workload pod matched by `waitForCompletion.podSelector`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

/// Who controls a pod, as kubectl's drain filters see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodOwner {
    /// No controller owner reference: deletable only with `force`.
    None,
    /// A DaemonSet: drain ignores it (so it can never be deleted by pod deletion).
    DaemonSet,
    /// Any other controller (ReplicaSet, Job, StatefulSet, …).
    Other,
}

/// A pod on the node that the operator's GPU-pod deletion filter selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPod {
    pub pod: PodRef,
    pub owner: PodOwner,
    /// Static (mirror) pod: drain skips it.
    pub mirror: bool,
    /// Uses an emptyDir volume: deletable only with `deleteEmptyDir`.
    pub empty_dir: bool,
    /// Phase Succeeded or Failed: drain deletes it whatever its owner.
    pub finished: bool,
}

/// Everything upstream's state machine reads about one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInput {
    pub name: String,
    /// The value of the state label (`None` when the label is absent).
    pub state_label: Option<String>,
    pub unschedulable: bool,
    /// Ready condition True (or absent, as upstream's `isNodeConditionReady`).
    pub ready: bool,
    /// The skip label is `"true"`.
    pub skip: bool,
    pub annotations: BTreeMap<String, String>,
    pub driver: DriverPod,
    /// Pods on the node matched by `waitForCompletion.podSelector` (empty when no selector).
    pub workload_pods: Vec<PodPhase>,
    /// Pods on the node matched by the pod-deletion filter.
    pub gpu_pods: Vec<GpuPod>,
    /// Readiness (Running with all containers Ready) of each validator pod on the node.
    pub validator_pods: Vec<bool>,
}

/// A node's place in the cluster state: its input and its parsed state label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeUpgradeState {
    pub input: NodeInput,
    /// `None` when the label holds a value upstream does not know.
    pub state: Option<UpgradeState>,
}

/// One driver DaemonSet's scheduling counts, checked by [`ClusterUpgradeState::build`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonSetCounts {
    pub name: String,
    pub desired_number_scheduled: i64,
    pub owned_pods: i64,
}

/// Why a cluster state cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error(
        "driver DaemonSet should not have Unscheduled pods: {name} desires {desired}, has {owned}"
    )]
    UnscheduledPods {
        name: String,
        desired: i64,
        owned: i64,
    },
    #[error("node {0} appears twice")]
    DuplicateNode(String),
}

/// Nodes bucketed by state, in input order within each bucket (upstream's `NodeStates`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterUpgradeState {
    pub nodes: Vec<NodeUpgradeState>,
}

impl ClusterUpgradeState {
    /// As upstream's `BuildState`: fails while a driver DaemonSet has unscheduled pods.
    pub fn build(
        daemonsets: &[DaemonSetCounts],
        nodes: Vec<NodeInput>,
    ) -> Result<ClusterUpgradeState, BuildError> {
        if let Some(ds) = daemonsets
            .iter()
            .find(|ds| ds.desired_number_scheduled != ds.owned_pods)
        {
            return Err(BuildError::UnscheduledPods {
                name: ds.name.clone(),
                desired: ds.desired_number_scheduled,
                owned: ds.owned_pods,
            });
        }
        let mut seen = BTreeSet::new();
        for n in &nodes {
            if !seen.insert(n.name.as_str()) {
                return Err(BuildError::DuplicateNode(n.name.clone()));
            }
        }
        Ok(ClusterUpgradeState::from_nodes(nodes))
    }

    /// Buckets nodes without the DaemonSet check (for callers that checked already, and tests).
    pub fn from_nodes(nodes: Vec<NodeInput>) -> ClusterUpgradeState {
        let nodes = nodes
            .into_iter()
            .map(|input| {
                let state = UpgradeState::from_label(input.state_label.as_deref().unwrap_or(""));
                NodeUpgradeState { input, state }
            })
            .collect();
        ClusterUpgradeState { nodes }
    }

    /// The nodes in `state`'s bucket.
    pub fn in_state(&self, state: UpgradeState) -> impl Iterator<Item = &NodeUpgradeState> {
        self.nodes.iter().filter(move |n| n.state == Some(state))
    }

    fn count(&self, state: UpgradeState) -> i64 {
        self.in_state(state).count() as i64
    }

    /// `GetTotalManagedNodes`: every bucket except the requestor-mode ones and unknown labels.
    pub fn total_managed_nodes(&self) -> i64 {
        use UpgradeState::*;
        [
            Unknown,
            Done,
            UpgradeRequired,
            CordonRequired,
            WaitForJobsRequired,
            PodDeletionRequired,
            Failed,
            DrainRequired,
            PodRestartRequired,
            UncordonRequired,
            ValidationRequired,
        ]
        .into_iter()
        .map(|s| self.count(s))
        .sum()
    }

    /// `GetUpgradesInProgress`.
    pub fn upgrades_in_progress(&self) -> i64 {
        self.total_managed_nodes()
            - (self.count(UpgradeState::Unknown)
                + self.count(UpgradeState::Done)
                + self.count(UpgradeState::UpgradeRequired))
    }

    /// `GetUpgradesDone`.
    pub fn upgrades_done(&self) -> i64 {
        self.count(UpgradeState::Done)
    }

    /// `GetUpgradesFailed`.
    pub fn upgrades_failed(&self) -> i64 {
        self.count(UpgradeState::Failed)
    }

    /// `GetUpgradesPending`.
    pub fn upgrades_pending(&self) -> i64 {
        self.count(UpgradeState::UpgradeRequired)
    }

    /// `GetCurrentUnavailableNodes`: cordoned or NotReady nodes in any bucket.
    pub fn current_unavailable_nodes(&self) -> i64 {
        self.nodes
            .iter()
            .filter(|n| n.input.unschedulable || !n.input.ready)
            .count() as i64
    }

    /// `GetUpgradesAvailable`, exactly as upstream computes it.
    pub fn upgrades_available(&self, max_parallel_upgrades: i64, max_unavailable: i64) -> i64 {
        let in_progress = self.upgrades_in_progress();
        let total = self.total_managed_nodes();
        let mut available = if max_parallel_upgrades == 0 {
            self.count(UpgradeState::UpgradeRequired)
        } else {
            max_parallel_upgrades - in_progress
        };
        let unavailable =
            self.current_unavailable_nodes() + self.count(UpgradeState::CordonRequired);
        if available > max_unavailable {
            available = max_unavailable;
        }
        if unavailable >= max_unavailable {
            available = 0;
        } else if max_unavailable < total && unavailable + available > max_unavailable {
            available = max_unavailable - unavailable;
        }
        available
    }
}

impl NodeInput {
    pub(crate) fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }

    /// `IsUpgradeRequested`: the requested annotation is `"true"`.
    pub(crate) fn upgrade_requested(&self, keys: &Keys) -> bool {
        self.annotation(&keys.upgrade_requested_annotation) == Some(TRUE)
    }

    /// `IsWaitingForSafeDriverLoad`: the safe-load annotation is non-empty.
    pub(crate) fn waiting_for_safe_load(&self, keys: &Keys) -> bool {
        self.annotation(&keys.wait_for_safe_load_annotation)
            .is_some_and(|v| !v.is_empty())
    }

    /// `IsNodeInRequestorMode`: the requestor-mode annotation is present.
    pub(crate) fn in_requestor_mode(&self, keys: &Keys) -> bool {
        self.annotations
            .contains_key(&keys.requestor_mode_annotation)
    }

    /// `isDriverPodInSync`: not orphaned, revision in sync, Running and Ready.
    pub(crate) fn driver_in_sync_and_ready(&self) -> bool {
        !self.driver.orphaned && self.driver.revision_in_sync && self.driver.running_and_ready
    }
}
