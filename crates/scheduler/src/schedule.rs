//! One scheduling decision: every node through the filters (and, for a pod with
//! ResourceClaims, DRA: allocated claims pin their nodes, unallocated ones must be allocatable
//! together on the node), the feasible ones scored, the best taken (ties by node name). A pod
//! that fits nowhere gets upstream's explanation: `0/N nodes are available: <count> <reason>,
//! ….` with the reasons sorted. `assume` books a decision into the snapshot so the next pod
//! sees it.
//!
//! Pure and deterministic.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use tessera_dra::allocator::{
    ClaimPlans, DeviceClasses, DevicesInUse, SOLUTIONS_COMPARED, SelectorVerdicts, add_in_use,
    devices_in_use, devices_needed, free_local_devices, remove_in_use,
};
use tessera_dra::pools::Pool;
use tessera_dra::{AllocationError, Allocator, Diagnosis, NodeView};
use tessera_model::node_selector;

use crate::claim_memo::{ClaimMemo, next_generation};
use crate::extended::{self, ExtendedClaim, ExtendedResourceClasses};
use crate::filters::{self, Plugin, Rejection, reasons};
use crate::node_info::{FixedHashMap, NodeInfo, PodUsage};
use crate::placed::PlacedPods;
use crate::pod_topology::{Context, NamespaceLabels};
use crate::preemption::{
    Budget, NoPreemption, Nomination, candidate_rank, freed_claims, gang_of, more_important,
    priority, resolvable, violations,
};
use crate::profile::Profile;
use crate::resources::Demand;
use crate::score::{self, Strategy};
use crate::volumes::{self, PodVolumes, Volumes};
use tessera_storage::volume_binding::Reservation;

/// Where a pod goes, and the allocations its claims get there.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The node.
    pub node: String,
    /// Allocations for the pod's unallocated claims, by claim name.
    pub allocations: Vec<(String, AllocationResult)>,
    /// The special claim for extended resources DRA provides on the node, to create in
    /// PreBind (see [`crate::extended`]).
    pub extended: Option<ExtendedClaim>,
    /// VolumeBinding's PreBind writes: volumes pre-bound to the pod's claims, claims
    /// annotated with the node (see [`crate::volumes`]).
    pub volumes: Reservation,
    /// What the pod takes of the node, read while it was judged: [`Scheduler::assume`]
    /// books it without reading the pod's spec again.
    pub(crate) usage: Arc<PodUsage>,
}

/// Why a pod fits nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitError {
    /// Nodes considered.
    pub nodes: usize,
    /// Each node's rejection.
    pub diagnosis: BTreeMap<String, Rejection>,
    /// A PreFilter's message, when one rejected the pod before any node was looked at
    /// (every node then carries it, and the message gives it once).
    pub pre_filter: Option<String>,
}

impl FitError {
    /// How many nodes gave each reason.
    pub fn histogram(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for rejection in self.diagnosis.values() {
            for reason in &rejection.reasons {
                *counts.entry(reason.clone()).or_insert(0) += 1;
            }
        }
        counts
    }
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(message) = &self.pre_filter {
            return write!(f, "0/{} nodes are available: {message}.", self.nodes);
        }
        // Upstream sorts the "<count> <reason>" strings themselves.
        let mut entries: Vec<String> = self
            .histogram()
            .into_iter()
            .map(|(reason, count)| format!("{count} {reason}"))
            .collect();
        entries.sort();
        write!(
            f,
            "0/{} nodes are available: {}.",
            self.nodes,
            entries.join(", ")
        )
    }
}

/// What the scheduler tracks of a node's DRA devices while it books claims.
#[derive(Debug, Clone, Copy, Default)]
struct NodeDevices {
    /// Devices it could still give whole, when that bounds what it can take (see
    /// `tessera_dra::allocator::free_local_devices`); `None`: unknown or unbounded.
    free: Option<usize>,
    /// Which state of the devices it reaches it is in: changes whenever an allocation on
    /// one of its pools is booked or released, never reused.
    generation: u64,
}

/// The scheduler over one snapshot.
#[derive(Clone)]
pub struct Scheduler {
    /// The nodes by name, shared with the view they were built for (and with clones of this
    /// scheduler) until a pod is booked on one.
    nodes: Vec<Arc<NodeInfo>>,
    /// What each node's DRA devices are now, by position.
    devices: Vec<NodeDevices>,
    /// Node positions by name.
    node_index: FixedHashMap<String, usize>,
    /// Positions of the nodes holding pods with required anti-affinity (which every
    /// incoming pod must respect).
    anti_affinity_holders: BTreeSet<usize>,
    slices: Vec<ResourceSlice>,
    /// Slices by node name; slices for many nodes under "".
    slices_by_node: BTreeMap<String, Vec<usize>>,
    classes: DeviceClasses,
    /// Which class backs each extended resource name.
    extended: Arc<ExtendedResourceClasses>,
    /// Claims holding devices (allocated), including those assumed here.
    allocated: Vec<Arc<ResourceClaim>>,
    /// The devices they hold.
    in_use: DevicesInUse,
    /// The pools each node reaches, gathered once (shared by clones, so addresses are stable
    /// for the selector verdict cache).
    pools: Arc<HashMap<String, Vec<Pool>>>,
    verdicts: Arc<SelectorVerdicts>,
    /// Pools more than one node reaches (booking on them changes every node's generation).
    shared_pools: Arc<HashSet<(String, String)>>,
    /// DynamicResources verdicts remembered per node for pods with claims alike.
    claim_memo: Arc<std::sync::Mutex<ClaimMemo>>,
    /// Where the next search for feasible nodes starts (upstream rotates it).
    next_start: Arc<std::sync::atomic::AtomicUsize>,
    profile: Profile,
    /// Which profile scores were remembered under (unique across schedulers and changes).
    profile_epoch: u64,
    /// Resource scores remembered per node position: (profile epoch, what was read, score).
    resource_memo: Arc<std::sync::Mutex<Vec<Option<ResourceMemo>>>>,
    namespaces: NamespaceLabels,
    /// Pods holding resources on each node (for preemption).
    bound: PlacedPods,
    budgets: Vec<Budget>,
    /// GPUs assumed pods took of their node's NUMA layout, by (namespace, name).
    gpus_taken: HashMap<(String, String), Vec<(u32, i64)>>,
    /// The storage objects VolumeBinding reads (shared by clones until one books); without
    /// them (a caller that hands in none) VolumeBinding is not run.
    volumes: Option<Arc<Volumes>>,
}

/// A remembered resource score: the profile epoch, what the score read, the score.
type ResourceMemo = (u64, score::ResourceKey, i64);

/// Hands out profile epochs.
static PROFILE_EPOCHS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn next_profile_epoch() -> u64 {
    PROFILE_EPOCHS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn pod_key(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// How many feasible nodes a search looks for before it scores (upstream's adaptive
/// `percentageOfNodesToScore`): all below 100 nodes, else `max(5, 50 − n/125)` percent of
/// them but at least 100.
pub fn feasible_nodes_to_find(nodes: usize, configured: Option<u32>) -> usize {
    if nodes < 100 || configured == Some(100) {
        return nodes;
    }
    let percent = match configured.filter(|p| *p > 0) {
        Some(p) => p as usize,
        None => 50usize.saturating_sub(nodes / 125).max(5),
    };
    (nodes * percent / 100).max(100)
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("nodes", &self.nodes.len())
            .field("slices", &self.slices.len())
            .field("allocated", &self.allocated.len())
            .finish()
    }
}

/// A pod's claims as DynamicResources judges them, resolved once per scheduling attempt.
struct PodClaims<'c> {
    /// Allocations of the claims already allocated (they must be usable on the node).
    allocated: Vec<&'c AllocationResult>,
    /// The claims still to allocate.
    pending: Vec<&'c ResourceClaim>,
    /// `pending` resolved against the classes.
    plans: Result<ClaimPlans<'c>, AllocationError>,
    /// The fewest devices `pending` takes whole.
    needed: usize,
    /// The shape of `pending` when verdicts on it may be remembered (see [`ClaimMemo`]).
    shape: Option<u64>,
}

impl<'c> PodClaims<'c> {
    fn new(claims: &'c [ResourceClaim], classes: &DeviceClasses) -> PodClaims<'c> {
        let mut allocated = Vec::new();
        let mut pending = Vec::new();
        for claim in claims {
            match claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
                Some(allocation) => allocated.push(allocation),
                None => pending.push(claim),
            }
        }
        PodClaims {
            plans: classes.plan(&pending),
            needed: devices_needed(&pending),
            allocated,
            pending,
            shape: None,
        }
    }

    /// Gives the claims their shape in `memo`, when verdicts on them may be remembered: all
    /// are unallocated (the allocated ones' node selectors are no part of a shape) and
    /// resolve against the classes.
    fn with_shape(mut self, memo: &mut ClaimMemo) -> PodClaims<'c> {
        if self.allocated.is_empty() && !self.pending.is_empty() && self.plans.is_ok() {
            self.shape = memo.shape(&self.pending);
        }
        self
    }
}

/// A pod's claims on the nodes where DRA provides the same extended resources: its own
/// claims with the special claim for those resources last (as upstream hands it to the
/// allocator).
struct ExtendedVariant {
    /// The extended resources DRA provides.
    delegated: Vec<String>,
    /// The pod's claims and the special claim.
    claims: Vec<ResourceClaim>,
    /// The special claim's request mappings.
    mappings: Vec<k8s_openapi::api::core::v1::ContainerExtendedResourceRequest>,
}

impl ExtendedVariant {
    /// The variants `nodes` need for `pod` (none when no class backs what it asks).
    fn all(
        pod: &Pod,
        demand: &Demand,
        nodes: &[Arc<NodeInfo>],
        classes: &ExtendedResourceClasses,
        claims: &[ResourceClaim],
    ) -> Vec<ExtendedVariant> {
        if demand.dra_backed.is_empty() {
            return Vec::new();
        }
        let sets: BTreeSet<Vec<&str>> = nodes
            .iter()
            .map(|node| extended::delegated(demand, node))
            .filter(|set| !set.is_empty())
            .collect();
        sets.into_iter()
            .map(|set| ExtendedVariant::new(pod, &set, classes, claims))
            .collect()
    }

    fn new(
        pod: &Pod,
        delegated: &[&str],
        classes: &ExtendedResourceClasses,
        claims: &[ResourceClaim],
    ) -> ExtendedVariant {
        let (special, mappings) = extended::special_claim(pod, delegated, classes);
        let mut all = claims.to_vec();
        all.push(special);
        ExtendedVariant {
            delegated: delegated.iter().map(|s| s.to_string()).collect(),
            claims: all,
            mappings,
        }
    }

    /// The variant for `node`, if DRA provides extended resources there.
    fn of(variants: &[ExtendedVariant], demand: &Demand, node: &NodeInfo) -> Option<usize> {
        if variants.is_empty() {
            return None;
        }
        let set = extended::delegated(demand, node);
        variants.iter().position(|v| {
            v.delegated
                .iter()
                .map(String::as_str)
                .eq(set.iter().copied())
        })
    }
}

/// Takes the special claim's allocation out of `allocations`, as the claim to create.
fn split_extended(
    allocations: &mut Vec<(String, AllocationResult)>,
    variant: Option<&ExtendedVariant>,
) -> Option<ExtendedClaim> {
    let variant = variant?;
    let at = allocations
        .iter()
        .position(|(name, _)| name == extended::IN_MEMORY_NAME)?;
    let (_, allocation) = allocations.remove(at);
    Some(ExtendedClaim {
        claim: variant.claims.last()?.clone(),
        allocation,
        mappings: variant.mappings.clone(),
    })
}

/// The devices a node could still give whole, from the pools it reaches.
fn free_devices(
    pools: &HashMap<String, Vec<Pool>>,
    node: &str,
    in_use: &DevicesInUse,
) -> Option<usize> {
    pools
        .get(node)
        .map_or(Some(0), |pools| free_local_devices(pools, in_use))
}

fn index_of(nodes: &[Arc<NodeInfo>]) -> FixedHashMap<String, usize> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect()
}

fn holders_of(nodes: &[Arc<NodeInfo>]) -> BTreeSet<usize> {
    (0..nodes.len())
        .filter(|&i| nodes[i].anti_affinity_pods > 0)
        .collect()
}

impl Scheduler {
    /// A scheduler over `nodes` (with their pods booked), the DRA objects, and every claim.
    pub fn new(
        nodes: impl IntoIterator<Item = impl Into<Arc<NodeInfo>>>,
        slices: Vec<ResourceSlice>,
        classes: Vec<DeviceClass>,
        claims: impl IntoIterator<Item = Arc<ResourceClaim>>,
        strategy: Strategy,
    ) -> Scheduler {
        // Only claims holding devices matter here; shared, not copied.
        let allocated: Vec<Arc<ResourceClaim>> = claims
            .into_iter()
            .filter(|c| c.status.as_ref().is_some_and(|s| s.allocation.is_some()))
            .collect();
        let mut nodes: Vec<Arc<NodeInfo>> = nodes.into_iter().map(Into::into).collect();
        if !nodes.is_sorted_by(|a, b| a.name <= b.name) {
            nodes.sort_by(|a, b| a.name.cmp(&b.name));
        }
        let mut slices_by_node: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, slice) in slices.iter().enumerate() {
            let key = slice.spec.node_name.clone().unwrap_or_default();
            slices_by_node.entry(key).or_default().push(i);
        }
        let mut pools = HashMap::new();
        if !slices.is_empty() {
            for node in &nodes {
                let own = slices_by_node.get(&node.name).into_iter().flatten();
                let shared = slices_by_node.get("").into_iter().flatten();
                let view = NodeView {
                    name: node.name.clone(),
                    labels: (*node.labels).clone(),
                };
                let reached =
                    tessera_dra::pools::gather(own.chain(shared).map(|&i| &slices[i]), &view);
                if !reached.is_empty() {
                    pools.insert(node.name.clone(), reached);
                }
            }
        }
        let in_use = devices_in_use(allocated.iter().map(AsRef::as_ref));
        let mut reached: HashMap<(&str, &str), usize> = HashMap::new();
        for pool in pools.values().flatten() {
            *reached.entry((&pool.driver, &pool.name)).or_default() += 1;
        }
        let shared_pools = reached
            .into_iter()
            .filter(|&(_, nodes)| nodes > 1)
            .map(|((driver, pool), _)| (driver.to_string(), pool.to_string()))
            .collect();
        let devices = nodes
            .iter()
            .map(|node| NodeDevices {
                free: free_devices(&pools, &node.name, &in_use),
                generation: next_generation(),
            })
            .collect();
        Scheduler {
            devices,
            node_index: index_of(&nodes),
            anti_affinity_holders: holders_of(&nodes),
            nodes,
            slices,
            slices_by_node,
            pools: Arc::new(pools),
            verdicts: Arc::new(SelectorVerdicts::default()),
            shared_pools: Arc::new(shared_pools),
            claim_memo: Arc::default(),
            next_start: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            profile_epoch: next_profile_epoch(),
            resource_memo: Arc::default(),
            extended: Arc::new(ExtendedResourceClasses::new(&classes)),
            classes: DeviceClasses::new(&classes),
            in_use,
            allocated,
            profile: Profile {
                strategy,
                ..Profile::default()
            },
            namespaces: NamespaceLabels::new(),
            bound: PlacedPods::default(),
            budgets: Vec::new(),
            gpus_taken: HashMap::new(),
            volumes: None,
        }
    }

    /// The pods placed on the nodes (what preemption may evict); shared pods (`Arc<Pod>`, a
    /// watch cache's) are kept without copying.
    pub fn with_pods<P: Borrow<Pod> + Clone + Into<Arc<Pod>>>(mut self, pods: &[P]) -> Scheduler {
        for pod in pods
            .iter()
            .filter(|p| crate::node_info::holds_resources((*p).borrow()))
        {
            self.bound.add(pod.clone().into());
        }
        self
    }

    /// Disruption budgets preemption tries not to violate.
    pub fn with_budgets(mut self, budgets: Vec<Budget>) -> Scheduler {
        self.budgets = budgets;
        self
    }

    /// Scores and searches as `profile` says (a KubeSchedulerConfiguration profile).
    pub fn with_profile(mut self, profile: Profile) -> Scheduler {
        self.profile = profile;
        self.profile_epoch = next_profile_epoch();
        self
    }

    /// Switches profile (pods of another `schedulerName`), keeping what is booked.
    pub fn set_profile(&mut self, profile: &Profile) {
        if self.profile != *profile {
            self.profile = profile.clone();
            self.profile_epoch = next_profile_epoch();
        }
    }

    /// The claims, volumes, classes, CSI drivers and capacities VolumeBinding reads.
    pub fn with_volumes(mut self, volumes: Volumes) -> Scheduler {
        self.volumes = Some(Arc::new(volumes));
        self
    }

    /// VolumeBinding's PreFilter for `pod` (nothing to judge without storage objects).
    pub(crate) fn pod_volumes(&self, pod: &Pod) -> PodVolumes<'_> {
        match &self.volumes {
            Some(volumes) => volumes::pre_filter(pod, volumes),
            None => PodVolumes::Skip,
        }
    }

    /// The storage objects VolumeBinding reads, when given.
    pub(crate) fn volume_snapshot(&self) -> Option<&Volumes> {
        self.volumes.as_deref()
    }

    /// Namespace labels, for affinity terms with a `namespaceSelector`.
    pub fn with_namespaces(mut self, namespaces: NamespaceLabels) -> Scheduler {
        self.namespaces = namespaces;
        self
    }

    /// What `pod` asks of a node, with the extended resources a DeviceClass backs marked.
    pub fn demand(&self, pod: &Pod) -> Demand {
        let mut demand = Demand::of(pod);
        demand.dra_backed = self.extended.backed(&demand.requests);
        demand
    }

    /// The claims DynamicResources judges for `pod` on `node`: its own `claims`, and the
    /// special claim when DRA provides extended resources there.
    pub(crate) fn claims_on<'c>(
        &self,
        pod: &Pod,
        demand: &Demand,
        node: &NodeInfo,
        claims: &'c [ResourceClaim],
    ) -> std::borrow::Cow<'c, [ResourceClaim]> {
        let delegated = extended::delegated(demand, node);
        if delegated.is_empty() {
            return std::borrow::Cow::Borrowed(claims);
        }
        std::borrow::Cow::Owned(
            ExtendedVariant::new(pod, &delegated, &self.extended, claims).claims,
        )
    }

    /// The nodes as booked now.
    pub fn nodes(&self) -> &[Arc<NodeInfo>] {
        &self.nodes
    }

    /// Keeps only the nodes `keep` accepts (a gang's topology domain).
    pub fn retain_nodes(&mut self, keep: impl Fn(&NodeInfo) -> bool) {
        // Each node's device state goes with it.
        (self.nodes, self.devices) = std::mem::take(&mut self.nodes)
            .into_iter()
            .zip(std::mem::take(&mut self.devices))
            .filter(|(node, _)| keep(node))
            .unzip();
        self.node_index = index_of(&self.nodes);
        self.anti_affinity_holders = holders_of(&self.nodes);
    }

    /// The pod's cross-node context over this snapshot.
    fn context(&self, pod: &Pod) -> Context {
        let holders = self.anti_affinity_holders.iter().map(|&i| &*self.nodes[i]);
        Context::build(pod, &self.nodes, holders, &self.namespaces)
    }

    /// The slices a node can reach: its own and those not bound to one node.
    fn node_slices<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a ResourceSlice> + 'a {
        let own = self.slices_by_node.get(node).into_iter().flatten();
        let shared = self.slices_by_node.get("").into_iter().flatten();
        own.chain(shared).map(|&i| &self.slices[i])
    }

    /// DynamicResources for one node: allocated claims must be usable there, unallocated
    /// ones allocatable together.
    fn dynamic_resources(
        &self,
        node: &NodeInfo,
        claims: &[ResourceClaim],
        freed: &BTreeSet<(String, String)>,
        solutions: usize,
    ) -> Result<Vec<(String, AllocationResult)>, Rejection> {
        self.dynamic_resources_planned(
            node,
            &PodClaims::new(claims, &self.classes),
            freed,
            solutions,
        )
    }

    /// [`Scheduler::dynamic_resources`] with the pod's claims planned once.
    fn dynamic_resources_planned(
        &self,
        node: &NodeInfo,
        claims: &PodClaims<'_>,
        freed: &BTreeSet<(String, String)>,
        solutions: usize,
    ) -> Result<Vec<(String, AllocationResult)>, Rejection> {
        let reject = |reason: String| Rejection {
            plugin: Plugin::DynamicResources,
            reasons: vec![reason],
        };
        for allocation in &claims.allocated {
            let here = allocation
                .node_selector
                .as_ref()
                .is_none_or(|s| node_selector::matches(s, &node.name, &node.labels));
            if !here {
                return Err(reject(reasons::CLAIM_ELSEWHERE.into()));
            }
        }
        if claims.pending.is_empty() {
            return Ok(Vec::new());
        }
        let plans = match &claims.plans {
            Ok(plans) => plans,
            Err(error) => return Err(reject(error.to_string())),
        };
        // Too few free devices: no need to search (the count is stale once claims are freed).
        // (A trial copy of a node in preemption goes by its name, as the node itself.)
        let free = self
            .node_index
            .get(&node.name)
            .and_then(|&i| self.devices[i].free);
        if freed.is_empty() && free.is_some_and(|free| free < claims.needed) {
            return Err(reject(reasons::CLAIMS.into()));
        }
        // The pools were gathered with the node's labels already.
        let view = NodeView {
            name: node.name.clone(),
            labels: BTreeMap::new(),
        };
        let still_held: DevicesInUse;
        let held = if freed.is_empty() {
            &self.in_use
        } else {
            let kept: Vec<Arc<ResourceClaim>> = self
                .allocated
                .iter()
                .filter(|c| {
                    !freed.contains(&(
                        c.metadata.namespace.clone().unwrap_or_default(),
                        c.metadata.name.clone().unwrap_or_default(),
                    ))
                })
                .cloned()
                .collect();
            still_held = devices_in_use(kept.iter().map(AsRef::as_ref));
            &still_held
        };
        let pools = self.pools.get(&node.name).map_or(&[][..], Vec::as_slice);
        let allocator = Allocator::over_pools(view, pools, &self.classes, held, &self.verdicts);
        if solutions <= 1 {
            // Feasibility only: the chosen node gets its allocation afterwards.
            return match allocator.feasible_planned(plans) {
                Ok(true) => Ok(Vec::new()),
                Ok(false) => Err(reject(reasons::CLAIMS.into())),
                Err(error) => Err(reject(error.to_string())),
            };
        }
        match allocator.allocate_planned(plans, solutions) {
            Ok(Some(results)) => Ok(claims
                .pending
                .iter()
                .zip(results)
                .map(|(claim, result)| (claim.metadata.name.clone().unwrap_or_default(), result))
                .collect()),
            Ok(None) => Err(reject(reasons::CLAIMS.into())),
            Err(error) => Err(reject(error.to_string())),
        }
    }

    /// Places `pod`, whose claims (resolved, in its order) are `claims`.
    pub fn schedule(&self, pod: &Pod, claims: &[ResourceClaim]) -> Result<Decision, FitError> {
        let demand = self.demand(pod);
        let context = self.context(pod);
        let mut diagnosis = BTreeMap::new();
        // Upstream's percentageOfNodesToScore: stop once enough feasible nodes are found,
        // starting where the previous search stopped.
        let total = self.nodes.len();
        let pod_volumes = self.pod_volumes(pod);
        if let PodVolumes::Unschedulable(message) = &pod_volumes {
            let rejection = Rejection {
                plugin: Plugin::VolumeBinding,
                reasons: vec![message.clone()],
            };
            return Err(FitError {
                nodes: total,
                diagnosis: self
                    .nodes
                    .iter()
                    .map(|n| (n.name.clone(), rejection.clone()))
                    .collect(),
                pre_filter: Some(message.clone()),
            });
        }
        let wanted = feasible_nodes_to_find(total, self.profile.percentage_of_nodes_to_score);
        // Positions of feasible nodes; the nodes are sorted by name, so a position also
        // breaks ties by name.
        let mut feasible: Vec<usize> = Vec::with_capacity(wanted.min(total));
        let cross_node = !context.is_empty();
        let no_claims = BTreeSet::new();
        let mut memo = self
            .claim_memo
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let pod_claims = PodClaims::new(claims, &self.classes).with_shape(&mut memo);
        let variants = ExtendedVariant::all(pod, &demand, &self.nodes, &self.extended, claims);
        let variant_claims: Vec<PodClaims<'_>> = variants
            .iter()
            .map(|v| PodClaims::new(&v.claims, &self.classes).with_shape(&mut memo))
            .collect();
        let planned_for = |node: &NodeInfo| match ExtendedVariant::of(&variants, &demand, node) {
            Some(k) => Some((&variant_claims[k], Some(&variants[k]))),
            None => (!claims.is_empty()).then_some((&pod_claims, None)),
        };
        let start = self.next_start.load(std::sync::atomic::Ordering::Relaxed) % total.max(1);
        let mut visited = 0;
        for offset in 0..total {
            if feasible.len() >= wanted {
                break;
            }
            visited += 1;
            // `(start + offset) % total` without a division per node.
            let position = if start + offset >= total {
                start + offset - total
            } else {
                start + offset
            };
            let node = &self.nodes[position];
            let mut verdict = filters::run(pod, &demand, node);
            if let (PodVolumes::Claims(pod_volumes), Some(snapshot)) = (&pod_volumes, &self.volumes)
            {
                verdict = verdict.and_then(|()| volumes::filter(pod_volumes, node, snapshot));
            }
            if cross_node {
                verdict = verdict
                    .and_then(|()| context.spread_filter(node))
                    .and_then(|()| context.affinity_filter(node));
            }
            if let Some((planned, _)) = planned_for(node) {
                verdict = verdict.and_then(|()| self.claims_fit(position, planned, &mut memo));
            }
            match verdict {
                Ok(()) => feasible.push(position),
                Err(rejection) => {
                    diagnosis.insert(node.name.clone(), rejection);
                }
            }
        }
        drop(memo);
        self.next_start.store(
            (start + visited) % total.max(1),
            std::sync::atomic::Ordering::Relaxed,
        );
        if feasible.is_empty() {
            return Err(FitError {
                nodes: self.nodes.len(),
                diagnosis,
                pre_filter: None,
            });
        }
        let candidates: Vec<&NodeInfo> = feasible.iter().map(|&i| &*self.nodes[i]).collect();
        let resource = self.resource_scores(&demand, &feasible);
        let mut scores = score::score(pod, &candidates, &self.profile, &resource);
        if cross_node {
            let affinity: Vec<i64> = candidates
                .iter()
                .map(|n| context.affinity_score(n))
                .collect();
            let spread: Vec<i64> = candidates.iter().map(|n| context.spread_count(n)).collect();
            let affinity = score::normalize_range(&affinity, false);
            let spread = score::normalize_range(&spread, true);
            let (w_affinity, w_spread) = (
                self.profile.weight("InterPodAffinity"),
                self.profile.weight("PodTopologySpread"),
            );
            for (i, total) in scores.iter_mut().enumerate() {
                *total += w_affinity * affinity[i] + w_spread * spread[i];
            }
        }
        // The highest score; ties go to the node first by name (the lowest position).
        let best = scores
            .iter()
            .zip(&feasible)
            .enumerate()
            .max_by(|(_, (a, i)), (_, (b, j))| a.cmp(b).then(j.cmp(i)))
            .map_or(0, |(k, _)| k);
        let node = candidates[best];
        let mut allocations = Vec::new();
        let planned = planned_for(node);
        if let Some((planned, _)) = planned.filter(|(p, _)| !p.pending.is_empty()) {
            // Feasibility only checked that the claims fit; the chosen node gets the best
            // allocation.
            match self.dynamic_resources_planned(node, planned, &no_claims, SOLUTIONS_COMPARED) {
                Ok(best) => allocations = best,
                Err(rejection) => {
                    return Err(FitError {
                        nodes: total,
                        diagnosis: BTreeMap::from([(node.name.clone(), rejection)]),
                        pre_filter: None,
                    });
                }
            }
        }
        let extended = split_extended(&mut allocations, planned.and_then(|(_, v)| v));
        let volumes = match (&pod_volumes, &self.volumes) {
            (PodVolumes::Claims(pod_volumes), Some(snapshot)) => {
                volumes::reserve(pod_volumes, node, snapshot)
            }
            _ => Reservation::default(),
        };
        Ok(Decision {
            node: node.name.clone(),
            allocations,
            extended,
            volumes,
            usage: Arc::new(PodUsage::of_demand(pod, &demand)),
        })
    }

    /// DynamicResources' Filter on the node at `position`, its verdict remembered for pods
    /// whose claims have the same shape while the node's devices stay as they are.
    fn claims_fit(
        &self,
        position: usize,
        claims: &PodClaims<'_>,
        memo: &mut ClaimMemo,
    ) -> Result<(), Rejection> {
        let node = &self.nodes[position];
        let generation = self.devices[position].generation;
        let unfit = || Rejection {
            plugin: Plugin::DynamicResources,
            reasons: vec![reasons::CLAIMS.into()],
        };
        if let Some(shape) = claims.shape
            && let Some(fits) = memo.verdict(position, shape, generation)
        {
            return if fits { Ok(()) } else { Err(unfit()) };
        }
        let verdict = self
            .dynamic_resources_planned(node, claims, &BTreeSet::new(), 1)
            .map(drop);
        if let Some(shape) = claims.shape {
            // An error names the claim; only a plain fit or misfit holds for every pod alike.
            match &verdict {
                Ok(()) => memo.remember(position, shape, generation, true),
                Err(rejection) if *rejection == unfit() => {
                    memo.remember(position, shape, generation, false);
                }
                Err(_) => {}
            }
        }
        verdict
    }

    /// Gives every node whose devices `allocations` touch a new device generation: the
    /// node the pod is on, and every node when a pool it reaches is shared.
    fn devices_changed<'a>(
        &mut self,
        node: &str,
        mut allocations: impl Iterator<Item = &'a AllocationResult>,
    ) {
        let shared = allocations.any(|allocation| {
            allocation
                .devices
                .as_ref()
                .and_then(|d| d.results.as_ref())
                .into_iter()
                .flatten()
                .any(|r| {
                    self.shared_pools
                        .contains(&(r.driver.clone(), r.pool.clone()))
                })
        });
        if shared {
            for devices in &mut self.devices {
                devices.generation = next_generation();
            }
        } else if let Some(&i) = self.node_index.get(node) {
            self.devices[i].generation = next_generation();
        }
    }

    /// The resource part of each feasible node's score, remembered per node position by
    /// everything it reads (most pods of a pass are alike and most nodes have not changed
    /// since the last pod, so most are looked up, not computed).
    fn resource_scores(&self, demand: &Demand, feasible: &[usize]) -> Vec<i64> {
        let scorer = score::ResourceScorer::new(&self.profile, demand);
        let mut memo = self
            .resource_memo
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if memo.len() < self.nodes.len() {
            memo.resize(self.nodes.len(), None);
        }
        feasible
            .iter()
            .map(|&position| {
                let node = &self.nodes[position];
                let Some(key) = scorer.key(demand, node) else {
                    return scorer.score(demand, node);
                };
                match memo[position] {
                    Some((epoch, seen, score)) if epoch == self.profile_epoch && seen == key => {
                        score
                    }
                    _ => {
                        let score = scorer.score(demand, node);
                        memo[position] = Some((self.profile_epoch, key, score));
                        score
                    }
                }
            })
            .collect()
    }

    /// DynamicResources' verdict for `explain`: `None` when the claims fit, else why, with
    /// what each unallocated request finds on the node.
    pub(crate) fn claims_verdict(
        &self,
        node: &NodeInfo,
        claims: &[ResourceClaim],
    ) -> Option<(Vec<String>, Vec<Diagnosis>)> {
        let rejection = self
            .dynamic_resources(node, claims, &BTreeSet::new(), 1)
            .err()?;
        let mut reasons = rejection.reasons;
        let view = NodeView {
            name: node.name.clone(),
            labels: (*node.labels).clone(),
        };
        let allocator = Allocator::prepared(
            view,
            self.node_slices(&node.name),
            &self.classes,
            &self.in_use,
        );
        let mut found = Vec::new();
        for claim in claims.iter().filter(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.allocation.as_ref())
                .is_none()
        }) {
            match allocator.diagnose(claim) {
                Ok(diagnoses) => {
                    reasons.extend(diagnoses.iter().map(ToString::to_string));
                    found.extend(diagnoses);
                }
                Err(error) => reasons.push(error.to_string()),
            }
        }
        Some((reasons, found))
    }

    /// Whether `pod` fits on the trial `node` (pods removed), with `freed` claims released.
    fn fits_on(
        &self,
        pod: &Pod,
        demand: &Demand,
        context: &Context,
        node: &NodeInfo,
        claims: &[ResourceClaim],
        freed: &BTreeSet<(String, String)>,
    ) -> bool {
        let claims = self.claims_on(pod, demand, node, claims);
        filters::run(pod, demand, node)
            .and_then(|()| context.spread_filter(node))
            .and_then(|()| context.affinity_filter(node))
            .and_then(|()| self.dynamic_resources(node, &claims, freed, 1))
            .is_ok()
    }

    /// DefaultPreemption for a pod `fit` says fits nowhere (see [`crate::preemption`]).
    pub fn preempt(
        &self,
        pod: &Pod,
        claims: &[ResourceClaim],
        fit: &FitError,
    ) -> Result<Nomination, NoPreemption> {
        let spec = pod.spec.as_ref();
        if spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
            return Err(NoPreemption::NotEligible);
        }
        let own = priority(pod);
        let demand = self.demand(pod);
        let context = self.context(pod);
        let bound = self.bound.by_node();
        let all_bound: Vec<&Pod> = bound.values().flatten().map(AsRef::as_ref).collect();
        let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
        let mut outcome = BTreeMap::new();
        let mut best: Option<(_, Nomination)> = None;
        for node in &self.nodes {
            let Some(rejection) = fit.diagnosis.get(&node.name) else {
                continue;
            };
            if !resolvable(rejection.plugin) {
                outcome.insert(node.name.clone(), true);
                continue;
            }
            // Lower-priority pods whose whole gang is lower priority too.
            let lower: Vec<&Pod> = bound
                .get(&node.name)
                .into_iter()
                .flatten()
                .map(AsRef::as_ref)
                .filter(|p| priority(p) < own)
                .filter(|p| gang_of(p, &all_bound).iter().all(|g| priority(g) < own))
                .collect();
            let mut trial = (**node).clone();
            for p in &lower {
                trial.remove_pod(p);
            }
            let all_uids: BTreeSet<String> = lower.iter().map(|p| uid(p)).collect();
            let freed = freed_claims(self.allocated.iter().map(AsRef::as_ref), &all_uids);
            if lower.is_empty() || !self.fits_on(pod, &demand, &context, &trial, claims, &freed) {
                outcome.insert(node.name.clone(), false);
                continue;
            }
            // Reprieve: budget-violating pods first, most important first.
            let mut order = lower.clone();
            order.sort_by(|a, b| more_important(a, b));
            let (violating, rest): (Vec<&Pod>, Vec<&Pod>) = order
                .into_iter()
                .partition(|p| violations(&[p], &self.budgets) > 0);
            let mut victims: Vec<&Pod> = Vec::new();
            let mut evicted: BTreeSet<String> = all_uids.clone();
            for candidate in violating.into_iter().chain(rest) {
                trial.add_pod(candidate);
                evicted.remove(&uid(candidate));
                let freed = freed_claims(self.allocated.iter().map(AsRef::as_ref), &evicted);
                if !self.fits_on(pod, &demand, &context, &trial, claims, &freed) {
                    trial.remove_pod(candidate);
                    evicted.insert(uid(candidate));
                    victims.push(candidate);
                }
            }
            // A victim's gang goes with it.
            let mut with_gangs: Vec<&Pod> = Vec::new();
            for victim in &victims {
                for member in gang_of(victim, &all_bound) {
                    if !with_gangs.iter().any(|p| uid(p) == uid(member)) {
                        with_gangs.push(member);
                    }
                }
            }
            let rank = candidate_rank(&node.name, &with_gangs, &self.budgets);
            let nomination = Nomination {
                node: node.name.clone(),
                victims: with_gangs
                    .iter()
                    .map(|p| {
                        (
                            p.metadata.namespace.clone().unwrap_or_default(),
                            p.metadata.name.clone().unwrap_or_default(),
                        )
                    })
                    .collect(),
            };
            if best.as_ref().is_none_or(|(r, _)| rank < *r) {
                best = Some((rank, nomination));
            }
        }
        best.map(|(_, n)| n).ok_or(NoPreemption::Nodes(outcome))
    }

    /// Books a decision: the pod's usage onto its node, its new allocations as held.
    pub fn assume(&mut self, pod: &Pod, decision: &Decision, claims: &[ResourceClaim]) {
        if !decision.volumes.is_empty()
            && let Some(volumes) = &mut self.volumes
        {
            Arc::make_mut(volumes).book(&decision.volumes);
        }
        if let Some(&i) = self.node_index.get(&decision.node) {
            let node = Arc::make_mut(&mut self.nodes[i]);
            node.add_usage(&decision.usage);
            let taken = node.take_gpus(pod);
            if !taken.is_empty() {
                self.gpus_taken.insert(pod_key(pod), taken);
            }
            if node.anti_affinity_pods > 0 {
                self.anti_affinity_holders.insert(i);
            }
        }
        let extended = decision
            .extended
            .as_ref()
            .map(|e| (&e.claim, &e.allocation));
        let named = decision
            .allocations
            .iter()
            .filter_map(|(name, allocation)| {
                let claim = claims
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(name))?;
                Some((claim, allocation))
            });
        for (claim, allocation) in named.chain(extended) {
            let mut claim = claim.clone();
            claim.status.get_or_insert_with(Default::default).allocation = Some(allocation.clone());
            add_in_use(&mut self.in_use, Some(allocation));
            self.allocated.push(Arc::new(claim));
        }
        if !decision.allocations.is_empty() || decision.extended.is_some() {
            if let Some(&i) = self.node_index.get(&decision.node) {
                self.devices[i].free = free_devices(&self.pools, &decision.node, &self.in_use);
            }
            let booked = decision.allocations.iter().map(|(_, a)| a);
            let special = decision.extended.iter().map(|e| &e.allocation);
            self.devices_changed(&decision.node, booked.chain(special));
        }
    }

    /// Counts a placed pod (its `spec.nodeName` set) among those preemption may evict; the
    /// simulator's placements, which no later snapshot brings in.
    pub fn add_bound(&mut self, pod: &Pod) {
        self.bound.add(Arc::new(pod.clone()));
    }

    /// Stops counting a pod added by [`Scheduler::add_bound`].
    pub fn remove_bound(&mut self, namespace: &str, name: &str, node: &str) {
        self.bound.remove(namespace, name, node);
    }

    /// Undoes [`Scheduler::assume`] for a pod that left `node`: its usage, the GPUs it took
    /// of the NUMA layout, the allocations of its claims named `claims` (deallocated, as
    /// the claim controller does once no pod reserves them) and of its special claim for
    /// extended resources (which goes with the pod).
    pub fn forget(&mut self, pod: &Pod, node: &str, claims: &[String]) {
        let taken = self.gpus_taken.remove(&pod_key(pod));
        if let Some(&i) = self.node_index.get(node) {
            let info = Arc::make_mut(&mut self.nodes[i]);
            info.remove_pod(pod);
            if let (Some(numa), Some(taken)) = (info.gpu_numa.as_mut(), taken) {
                numa.give(&taken);
            }
            if info.anti_affinity_pods == 0 {
                self.anti_affinity_holders.remove(&i);
            }
        }
        let special = !self.extended.is_empty()
            && self.allocated.iter().any(|c| extended::booked_for(c, pod));
        if claims.is_empty() && !special {
            return;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let in_use = &mut self.in_use;
        let mut released = Vec::new();
        self.allocated.retain(|claim| {
            let named = claim.metadata.namespace.as_deref().unwrap_or_default() == namespace
                && claim
                    .metadata
                    .name
                    .as_ref()
                    .is_some_and(|name| claims.contains(name));
            let gone = named || (special && extended::booked_for(claim, pod));
            if gone {
                let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
                remove_in_use(in_use, allocation);
                released.extend(allocation.cloned());
            }
            !gone
        });
        if let Some(&i) = self.node_index.get(node) {
            self.devices[i].free = free_devices(&self.pools, node, &self.in_use);
        }
        self.devices_changed(node, released.iter());
    }
}
