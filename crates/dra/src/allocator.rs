//! The structured allocator: given the pools a node reaches, the DeviceClasses and what is
//! already allocated, it finds devices for every request of a pod's claims or says there are
//! none — upstream's semantics (`exactly` with `ExactCount`/`All`, `firstAvailable` tried in
//! order, class and request CEL selectors, `adminAccess`, `matchAttribute` and
//! `distinctAttribute` constraints, shared counters of partitionable devices, consumable
//! capacity of devices allowing multiple allocations, device taints and tolerations,
//! incomplete and invalid pools) by a depth-first search with backtracking
//! over combinations. `Ok(None)` is "does not fit on this node"; an error is input no node
//! could satisfy (unknown class, bad or empty selectors and constraints, a request with
//! neither or both of `exactly` and `firstAvailable`, more than a result holds, a constraint
//! that keeps a device out of `All`), upstream's "invalid resource pools" when nothing fits
//! and a reachable pool could not be used, or a search past its step budget. Node selectors
//! of results are upstream's: the node when a device is node-local, else the requirements of
//! the devices' node selectors joined into one term, else none. Devices with binding
//! conditions are not allocated (DRADeviceBindingConditions off, as in 1.34).
//!
//! Unlike upstream's first fit, up to [`SOLUTIONS_COMPARED`] complete solutions are compared
//! (devices of one request on one PCIe root, partitions packed onto GPUs already in use,
//! shares of shared devices packed best-fit, earlier `firstAvailable` choices first). Pure and deterministic: ties go to the solution
//! found first in pool, slice and device order.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceClass,
    DeviceRequestAllocationResult, DeviceTaint, DeviceToleration, ResourceClaim, ResourceSlice,
};

use crate::capacity::{self, Consumed};
use crate::pools::{self, Counters, DeviceId, NodeView, Pool, PoolDevice};
use crate::selector::{Attribute, Selector, SelectorError, qualify};

/// Upstream's limit on devices in one allocation result.
pub const MAX_RESULTS: usize = 32;
/// Search steps one allocation may take before it gives up.
pub const STEP_BUDGET: u64 = 200_000;

/// Why allocation could not even be attempted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocationError {
    /// A request names a class that does not exist.
    #[error("claim {claim}: request {request}: device class {class} does not exist")]
    UnknownClass {
        /// `namespace/name`.
        claim: String,
        /// The request.
        request: String,
        /// The class.
        class: String,
    },
    /// A selector does not compile or fails at run time.
    #[error("claim {claim}: {source}")]
    Selector {
        /// `namespace/name`.
        claim: String,
        /// The selector error.
        source: SelectorError,
    },
    /// A request is malformed.
    #[error("claim {claim}: request {request}: {message}")]
    Request {
        /// `namespace/name`.
        claim: String,
        /// The request.
        request: String,
        /// What is wrong.
        message: String,
    },
    /// `allocationMode: All` met a pool that is being updated.
    #[error(
        "claim {claim}: request {request} asks for all devices, but resource pool {pool} is currently being updated"
    )]
    IncompletePool {
        /// `namespace/name`.
        claim: String,
        /// The request.
        request: String,
        /// `driver/pool`.
        pool: String,
    },
    /// A claim is malformed as a whole.
    #[error("claim {claim}: {message}")]
    Claim {
        /// `namespace/name`.
        claim: String,
        /// What is wrong.
        message: String,
    },
    /// Nothing fits, and some pool the node reaches could not be used (duplicate devices,
    /// counter sets defined twice or unknown): upstream's error, since the pool might have
    /// had the devices.
    #[error("invalid resource pools were encountered: {pools}")]
    InvalidPools {
        /// `driver/pool: why`, comma-separated.
        pools: String,
    },
    /// The search took too many steps.
    #[error("allocation search gave up after {STEP_BUDGET} steps")]
    SearchLimit,
}

/// What one request finds on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// The request (`gpu`, or `gpu/small`).
    pub request: String,
    /// Its device class.
    pub class: String,
    /// How many it wants (`None`: all).
    pub wants: Option<usize>,
    /// Devices matching the class and selectors.
    pub matching: usize,
    /// Of those, free and not tainted against it.
    pub free: usize,
}

impl std::fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let wants = self.wants.map_or("all".into(), |n| n.to_string());
        write!(
            f,
            "claim {} request {}: wants {wants} of class {}; ",
            self.claim, self.request, self.class
        )?;
        if self.matching == 0 {
            // Nothing to count: say so rather than "0 match, 0 free", which reads like a
            // miscount on a node whose other devices are free.
            write!(
                f,
                "no device on the node is of that class and matches its selectors"
            )
        } else {
            write!(
                f,
                "{} device(s) match its selectors, {} free",
                self.matching, self.free
            )
        }
    }
}

/// A class: its selectors and configuration.
#[derive(Clone)]
struct Class {
    selectors: Vec<Selector>,
    config: Vec<k8s_openapi::api::resource::v1::DeviceClassConfiguration>,
}

/// The allocator for one node.
pub struct Allocator<'a> {
    node: NodeView,
    pools: Cow<'a, [Pool]>,
    classes: Cow<'a, DeviceClasses>,
    in_use: Cow<'a, DevicesInUse>,
    consumed: BTreeMap<(String, String), Counters>,
    /// Per pool and device: held whole by an allocated claim (looked up once).
    busy: Vec<Vec<bool>>,
    /// Selector verdicts shared across allocations over the same pools.
    verdicts: Option<&'a SelectorVerdicts>,
}

/// Selector verdicts remembered across allocations over the same (borrowed) pools: keyed by
/// the compiled selector and the device's place, valid while those pools live.
#[derive(Debug, Default)]
pub struct SelectorVerdicts {
    known: std::sync::Mutex<foldhash::HashMap<(u64, usize, usize), bool>>,
}

/// DeviceClasses with their selectors compiled, built once and shared by every allocation.
#[derive(Clone, Default)]
pub struct DeviceClasses {
    classes: HashMap<String, Result<Class, SelectorError>>,
}

impl DeviceClasses {
    /// Compiles `classes`.
    pub fn new<'c>(classes: impl IntoIterator<Item = &'c DeviceClass>) -> DeviceClasses {
        DeviceClasses {
            classes: classes
                .into_iter()
                .map(|class| {
                    let compiled = class
                        .spec
                        .selectors
                        .iter()
                        .flatten()
                        .map(|s| match &s.cel {
                            Some(cel) => Selector::compile(&cel.expression),
                            None => Err(SelectorError::Unsupported),
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map(|selectors| Class {
                            selectors,
                            config: class.spec.config.clone().unwrap_or_default(),
                        });
                    (class.metadata.name.clone().unwrap_or_default(), compiled)
                })
                .collect(),
        }
    }

    fn get(&self, name: &str) -> Option<&Result<Class, SelectorError>> {
        self.classes.get(name)
    }

    /// Resolves a pod's claims against the classes once (selectors compiled, modes, counts
    /// and capacities checked), for allocation on many nodes.
    pub fn plan<'c>(
        &self,
        claims: &[&'c ResourceClaim],
    ) -> Result<ClaimPlans<'c>, AllocationError> {
        Ok(ClaimPlans(
            claims
                .iter()
                .map(|c| self.plan_claim(c))
                .collect::<Result<_, _>>()?,
        ))
    }

    fn plan_claim<'c>(&self, claim: &'c ResourceClaim) -> Result<ClaimPlan<'c>, AllocationError> {
        let key = claim_key(claim);
        let mut requests = Vec::new();
        for request in claim
            .spec
            .devices
            .as_ref()
            .and_then(|d| d.requests.as_ref())
            .into_iter()
            .flatten()
        {
            let fail = |message: &str| AllocationError::Request {
                claim: key.clone(),
                request: request.name.clone(),
                message: message.to_string(),
            };
            let mut alternatives = Vec::new();
            match (&request.exactly, &request.first_available) {
                (Some(exact), None) => alternatives.push(self.alternative(
                    &key,
                    &request.name,
                    None,
                    exact.capacity.as_ref(),
                    &exact.device_class_name,
                    exact.selectors.as_deref().unwrap_or_default(),
                    exact.allocation_mode.as_deref(),
                    exact.count,
                    exact.admin_access == Some(true),
                    exact.tolerations.clone().unwrap_or_default(),
                )?),
                (None, Some(subrequests)) if !subrequests.is_empty() => {
                    for sub in subrequests {
                        alternatives.push(self.alternative(
                            &key,
                            &request.name,
                            Some(&sub.name),
                            sub.capacity.as_ref(),
                            &sub.device_class_name,
                            sub.selectors.as_deref().unwrap_or_default(),
                            sub.allocation_mode.as_deref(),
                            sub.count,
                            false,
                            sub.tolerations.clone().unwrap_or_default(),
                        )?);
                    }
                }
                _ => return Err(fail("exactly one of exactly or firstAvailable must be set")),
            }
            requests.push(alternatives);
        }
        let least: usize = requests
            .iter()
            .map(|alternatives| least_devices(alternatives))
            .sum();
        if least > MAX_RESULTS {
            return Err(AllocationError::Claim {
                claim: key,
                message: format!(
                    "number of requested devices {least} exceeds the claim limit of {MAX_RESULTS}"
                ),
            });
        }
        let constraints = claim
            .spec
            .devices
            .as_ref()
            .and_then(|d| d.constraints.as_ref())
            .into_iter()
            .flatten()
            .map(|c| {
                let kind = match (&c.match_attribute, &c.distinct_attribute) {
                    (Some(attr), _) => ConstraintKind::Match(attr.clone()),
                    (None, Some(attr)) => ConstraintKind::Distinct(attr.clone()),
                    (None, None) => {
                        return Err(AllocationError::Claim {
                            claim: key.clone(),
                            message: "empty constraint (unsupported constraint type?)".into(),
                        });
                    }
                };
                Ok(Constraint {
                    requests: c.requests.clone().unwrap_or_default(),
                    kind,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(ClaimPlan {
            claim,
            requests,
            constraints,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn alternative(
        &self,
        claim: &str,
        parent: &str,
        sub: Option<&str>,
        capacity: Option<&k8s_openapi::api::resource::v1::CapacityRequirements>,
        class: &str,
        selectors: &[k8s_openapi::api::resource::v1::DeviceSelector],
        mode: Option<&str>,
        count: Option<i64>,
        admin: bool,
        tolerations: Vec<DeviceToleration>,
    ) -> Result<Alternative, AllocationError> {
        let result_name = sub.map_or_else(|| parent.to_string(), |s| format!("{parent}/{s}"));
        let fail = |message: String| AllocationError::Request {
            claim: claim.to_string(),
            request: result_name.clone(),
            message,
        };
        if class.is_empty() {
            return Err(fail(
                "missing device class name (unsupported request type?)".into(),
            ));
        }
        let class_selectors = match self.get(class) {
            None => {
                return Err(AllocationError::UnknownClass {
                    claim: claim.to_string(),
                    request: result_name.clone(),
                    class: class.to_string(),
                });
            }
            Some(Err(source)) => {
                return Err(AllocationError::Selector {
                    claim: claim.to_string(),
                    source: source.clone(),
                });
            }
            Some(Ok(class)) => class.selectors.clone(),
        };
        let mut all = class_selectors;
        for selector in selectors {
            let compiled = match &selector.cel {
                Some(cel) => Selector::compile(&cel.expression),
                None => Err(SelectorError::Unsupported),
            };
            all.push(compiled.map_err(|source| AllocationError::Selector {
                claim: claim.to_string(),
                source,
            })?);
        }
        let mode = match mode.unwrap_or("ExactCount") {
            "ExactCount" => {
                let count = count.unwrap_or(1);
                if count < 1 {
                    return Err(fail(format!("count must be at least 1, is {count}")));
                }
                // More than one result may hold is an error of a request, and only makes a
                // subrequest of `firstAvailable` impossible (upstream tries the next).
                if count > MAX_RESULTS as i64 && sub.is_none() {
                    return Err(fail(format!(
                        "number of requested devices {count} exceeds the claim limit of {MAX_RESULTS}"
                    )));
                }
                Mode::Count(usize::try_from(count).unwrap_or(usize::MAX))
            }
            "All" => Mode::All,
            other => return Err(fail(format!("unsupported count mode {other}"))),
        };
        let mut requested = BTreeMap::new();
        for (name, quantity) in capacity
            .and_then(|c| c.requests.as_ref())
            .into_iter()
            .flatten()
        {
            let parsed =
                quantity
                    .0
                    .parse()
                    .map_err(|e: tessera_model::quantity::QuantityError| {
                        fail(format!("capacity.requests[{name}]: {e}"))
                    })?;
            requested.insert(name.clone(), parsed);
        }
        Ok(Alternative {
            capacity: requested,
            parent: parent.to_string(),
            result_name,
            class: class.to_string(),
            selectors: all,
            mode,
            admin,
            tolerations,
        })
    }
}

/// What allocated claims hold: devices held whole, and the capacity consumed of devices that
/// allow multiple allocations.
#[derive(Debug, Clone, Default)]
pub struct DevicesInUse {
    /// Devices held by one claim: driver → pool → device names (looked up by pool once).
    exclusive: foldhash::HashMap<String, foldhash::HashMap<String, foldhash::HashSet<String>>>,
    /// Capacity consumed of shared devices.
    pub shared: BTreeMap<DeviceId, Consumed>,
}

impl DevicesInUse {
    /// Whether a device is held whole.
    pub fn contains(&self, id: &DeviceId) -> bool {
        self.pool(&id.driver, &id.pool)
            .is_some_and(|held| held.contains(&id.device))
    }

    /// The devices held whole in one pool.
    fn pool(&self, driver: &str, pool: &str) -> Option<&foldhash::HashSet<String>> {
        self.exclusive.get(driver)?.get(pool)
    }

    fn remove(&mut self, id: &DeviceId) {
        if let Some(held) = self
            .exclusive
            .get_mut(&id.driver)
            .and_then(|pools| pools.get_mut(&id.pool))
        {
            held.remove(&id.device);
        }
    }

    fn insert(&mut self, id: DeviceId) {
        self.exclusive
            .entry(id.driver)
            .or_default()
            .entry(id.pool)
            .or_default()
            .insert(id.device);
    }
}

/// The fewest devices held whole that `claims` take together, wherever they are allocated:
/// each ExactCount request its count (a `firstAvailable` request its cheapest alternative);
/// `All` and admin-access requests count none. A node with fewer free devices cannot take
/// them, which a scheduler may tell without running the allocator.
pub fn devices_needed(claims: &[&ResourceClaim]) -> usize {
    let count = |mode: Option<&str>, count: Option<i64>| -> usize {
        match mode.unwrap_or("ExactCount") {
            "ExactCount" => usize::try_from(count.unwrap_or(1)).unwrap_or(0),
            _ => 0,
        }
    };
    claims
        .iter()
        .flat_map(|c| c.spec.devices.as_ref().and_then(|d| d.requests.as_ref()))
        .flatten()
        .map(
            |request| match (&request.exactly, &request.first_available) {
                (Some(exact), _) if exact.admin_access == Some(true) => 0,
                (Some(exact), _) => count(exact.allocation_mode.as_deref(), exact.count),
                (None, Some(subs)) => subs
                    .iter()
                    .map(|s| count(s.allocation_mode.as_deref(), s.count))
                    .min()
                    .unwrap_or(0),
                (None, None) => 0,
            },
        )
        .sum()
}

/// Devices of `pools` a claim could still take whole, when every device there is this
/// node's own and held whole when allocated (`None` otherwise: devices shared between nodes
/// or allocated many times bound nothing). Incomplete or invalid pools offer none.
pub fn free_local_devices(pools: &[Pool], in_use: &DevicesInUse) -> Option<usize> {
    let mut free = 0;
    for pool in pools {
        if pool
            .devices
            .iter()
            .any(|d| !d.node_local || d.shared.is_some())
        {
            return None;
        }
        if !pool.complete || pool.invalid.is_some() {
            continue;
        }
        let held = in_use.pool(&pool.driver, &pool.name);
        free += pool
            .devices
            .iter()
            .filter(|d| held.is_none_or(|h| !h.contains(&d.id.device)))
            .count();
    }
    Some(free)
}

/// The devices allocated claims hold (admin-access results hold none).
pub fn devices_in_use<'a>(allocated: impl IntoIterator<Item = &'a ResourceClaim>) -> DevicesInUse {
    let mut in_use = DevicesInUse::default();
    for claim in allocated {
        add_in_use(
            &mut in_use,
            claim.status.as_ref().and_then(|s| s.allocation.as_ref()),
        );
    }
    in_use
}

/// The devices one allocation holds, as `in_use` counts them: each device with the capacity
/// it consumes when it is a share of a device allowing multiple allocations (`None`: held
/// whole). Admin access holds nothing.
fn held_devices(
    allocation: Option<&AllocationResult>,
) -> impl Iterator<Item = (DeviceId, Option<Consumed>)> + '_ {
    allocation
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .filter(|result| result.admin_access != Some(true))
        .map(|result| {
            let id = DeviceId {
                driver: result.driver.clone(),
                pool: result.pool.clone(),
                device: result.device.clone(),
            };
            let consumed = result.share_id.is_some().then(|| {
                result
                    .consumed_capacity
                    .iter()
                    .flatten()
                    .filter_map(|(name, q)| Some((name.clone(), q.0.parse().ok()?)))
                    .collect::<Consumed>()
            });
            (id, consumed)
        })
}

/// Adds the devices of one allocation to `in_use`.
pub fn add_in_use(in_use: &mut DevicesInUse, allocation: Option<&AllocationResult>) {
    for (id, consumed) in held_devices(allocation) {
        match consumed {
            Some(consumed) => capacity::add(in_use.shared.entry(id).or_default(), &consumed),
            None => in_use.insert(id),
        }
    }
}

/// Takes the devices of one allocation off `in_use` (the claim was deallocated).
pub fn remove_in_use(in_use: &mut DevicesInUse, allocation: Option<&AllocationResult>) {
    for (id, consumed) in held_devices(allocation) {
        match consumed {
            Some(consumed) => {
                if let Some(used) = in_use.shared.get_mut(&id) {
                    capacity::subtract(used, &consumed);
                    if used
                        .values()
                        .all(tessera_model::quantity::Quantity::is_zero)
                    {
                        in_use.shared.remove(&id);
                    }
                }
            }
            None => in_use.remove(&id),
        }
    }
}

/// A request alternative: a plain request or one subrequest of `firstAvailable`.
#[derive(Clone)]
struct Alternative {
    /// Capacity it asks of a shared device.
    capacity: BTreeMap<String, tessera_model::quantity::Quantity>,
    /// The request name (constraints refer to it).
    parent: String,
    /// The name results carry (`parent` or `parent/sub`).
    result_name: String,
    class: String,
    selectors: Vec<Selector>,
    mode: Mode,
    admin: bool,
    tolerations: Vec<DeviceToleration>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Count(usize),
    All,
}

enum ConstraintKind {
    Match(String),
    Distinct(String),
}

struct Constraint {
    requests: Vec<String>,
    kind: ConstraintKind,
}

/// Claims resolved against the classes ([`DeviceClasses::plan`]).
pub struct ClaimPlans<'c>(Vec<ClaimPlan<'c>>);

struct ClaimPlan<'c> {
    claim: &'c ResourceClaim,
    requests: Vec<Vec<Alternative>>,
    constraints: Vec<Constraint>,
}

#[derive(Clone)]
struct Pick<'p> {
    claim: usize,
    alternative: &'p Alternative,
    pool: usize,
    device: usize,
    /// What it consumes of a shared device.
    consumed: Option<Consumed>,
}

#[derive(Default)]
struct State<'p> {
    picks: Vec<Pick<'p>>,
    steps: u64,
    selectable: foldhash::HashMap<(usize, usize, usize, usize), bool>,
    /// Complete solutions found so far, with their scores.
    solutions: Vec<(i64, Vec<Pick<'p>>)>,
    /// How many to compare.
    limit: usize,
}

/// The fewest devices one request takes: its cheapest alternative (`All` takes at least one).
fn least_devices(alternatives: &[Alternative]) -> usize {
    alternatives
        .iter()
        .map(|a| match a.mode {
            Mode::Count(n) => n,
            Mode::All => 1,
        })
        .min()
        .unwrap_or(0)
}

/// How many complete solutions the search compares before it settles.
pub const SOLUTIONS_COMPARED: usize = 16;

fn claim_key(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether `toleration` tolerates `taint` (upstream's `ToleratesTaint`).
pub fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    let key_ok = match toleration.key.as_deref() {
        None | Some("") => toleration.operator.as_deref() == Some("Exists"),
        Some(key) => key == taint.key,
    };
    let effect_ok = toleration
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let value_ok = match toleration.operator.as_deref() {
        Some("Exists") => true,
        _ => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
    };
    key_ok && effect_ok && value_ok
}

/// Whether `device` passes every selector of `alternative` (class and request); a selector
/// that fails at run time is an error of the claim.
fn selected(
    claim: &ResourceClaim,
    alternative: &Alternative,
    device: &PoolDevice,
) -> Result<bool, AllocationError> {
    for selector in &alternative.selectors {
        if !evaluate(claim, selector, device)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One selector on one device; a run-time failure is an error of the claim.
fn evaluate(
    claim: &ResourceClaim,
    selector: &Selector,
    device: &PoolDevice,
) -> Result<bool, AllocationError> {
    selector
        .matches(&device.id.to_string(), &device.view)
        .map_err(|source| AllocationError::Selector {
            claim: claim_key(claim),
            source,
        })
}

fn blocked(device: &PoolDevice, tolerations: &[DeviceToleration]) -> bool {
    device.taints.iter().any(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

fn attribute<'d>(device: &'d PoolDevice, name: &str) -> Option<&'d Attribute> {
    let driver = device.id.driver.as_str();
    let wanted = qualify(name, driver);
    device
        .view
        .attributes
        .iter()
        .find(|(n, _)| qualify(n, driver) == wanted)
        .map(|(_, v)| v)
}

impl<'a> Allocator<'a> {
    /// An allocator for `node` over `slices` and `classes`; `allocated` are the claims whose
    /// allocations hold devices now. Compiles the classes each time: for many allocations,
    /// build [`DeviceClasses`] and [`devices_in_use`] once and use [`Allocator::prepared`].
    pub fn new<'s>(
        node: NodeView,
        slices: impl IntoIterator<Item = &'s ResourceSlice>,
        classes: &[DeviceClass],
        allocated: &[ResourceClaim],
    ) -> Allocator<'static> {
        Allocator::build(
            node,
            slices,
            Cow::Owned(DeviceClasses::new(classes)),
            Cow::Owned(devices_in_use(allocated)),
        )
    }

    /// An allocator over precompiled classes and a precomputed set of devices in use.
    pub fn prepared<'s>(
        node: NodeView,
        slices: impl IntoIterator<Item = &'s ResourceSlice>,
        classes: &'a DeviceClasses,
        in_use: &'a DevicesInUse,
    ) -> Allocator<'a> {
        Allocator::build(node, slices, Cow::Borrowed(classes), Cow::Borrowed(in_use))
    }

    /// An allocator over pools gathered once for the node (see [`pools::gather`]), sharing
    /// selector verdicts with every other allocation over the same pools.
    pub fn over_pools(
        node: NodeView,
        pools: &'a [Pool],
        classes: &'a DeviceClasses,
        in_use: &'a DevicesInUse,
        verdicts: &'a SelectorVerdicts,
    ) -> Allocator<'a> {
        let mut allocator = Allocator::from_parts(
            node,
            Cow::Borrowed(pools),
            Cow::Borrowed(classes),
            Cow::Borrowed(in_use),
        );
        allocator.verdicts = Some(verdicts);
        allocator
    }

    fn build<'s>(
        node: NodeView,
        slices: impl IntoIterator<Item = &'s ResourceSlice>,
        classes: Cow<'a, DeviceClasses>,
        in_use: Cow<'a, DevicesInUse>,
    ) -> Allocator<'a> {
        let pools = pools::gather(slices, &node);
        Allocator::from_parts(node, Cow::Owned(pools), classes, in_use)
    }

    fn from_parts(
        node: NodeView,
        pools: Cow<'a, [Pool]>,
        classes: Cow<'a, DeviceClasses>,
        in_use: Cow<'a, DevicesInUse>,
    ) -> Allocator<'a> {
        // Counters already consumed by allocated devices (all pools, all slices).
        let mut consumed: BTreeMap<(String, String), Counters> = BTreeMap::new();
        let mut busy = Vec::with_capacity(pools.len());
        for pool in pools.iter() {
            let mut held = Vec::with_capacity(pool.devices.len());
            let pool_held = in_use.pool(&pool.driver, &pool.name);
            for device in &pool.devices {
                let taken = pool_held.is_some_and(|h| h.contains(&device.id.device));
                if taken || (device.shared.is_some() && in_use.shared.contains_key(&device.id)) {
                    let used = consumed
                        .entry((pool.driver.clone(), pool.name.clone()))
                        .or_default();
                    add_counters(used, &device.consumes);
                }
                held.push(taken);
            }
            busy.push(held);
            // Devices elsewhere that are allocated use up counters shared with this node's.
            for (id, consumes) in &pool.elsewhere {
                if pool_held.is_some_and(|h| h.contains(&id.device)) {
                    let used = consumed
                        .entry((pool.driver.clone(), pool.name.clone()))
                        .or_default();
                    add_counters(used, consumes);
                }
            }
        }
        Allocator {
            node,
            pools,
            classes,
            in_use,
            consumed,
            busy,
            verdicts: None,
        }
    }

    /// The pools this node reaches.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// What each request of `claim` finds on this node, for people: how many devices match
    /// its class and selectors, how many of those are free and untainted, against what it
    /// wants.
    pub fn diagnose(&self, claim: &ResourceClaim) -> Result<Vec<Diagnosis>, AllocationError> {
        let key = claim_key(claim);
        let plan = self.classes.plan_claim(claim)?;
        let mut out = Vec::new();
        for alternatives in &plan.requests {
            for alternative in alternatives {
                let mut matching = 0;
                let mut free = 0;
                for pool in self
                    .pools
                    .iter()
                    .filter(|p| p.complete && p.invalid.is_none())
                {
                    for device in &pool.devices {
                        if selected(claim, alternative, device)? {
                            matching += 1;
                            let usable = (alternative.admin || !self.in_use.contains(&device.id))
                                && !blocked(device, &alternative.tolerations);
                            free += usize::from(usable);
                        }
                    }
                }
                out.push(Diagnosis {
                    claim: key.clone(),
                    request: alternative.result_name.clone(),
                    class: alternative.class.clone(),
                    wants: match alternative.mode {
                        Mode::Count(n) => Some(n),
                        Mode::All => None,
                    },
                    matching,
                    free,
                });
            }
        }
        Ok(out)
    }

    /// Allocates every claim of `claims` (a pod's unallocated claims) on this node together.
    pub fn allocate(
        &self,
        claims: &[&ResourceClaim],
    ) -> Result<Option<Vec<AllocationResult>>, AllocationError> {
        self.allocate_comparing(claims, SOLUTIONS_COMPARED)
    }

    /// Whether the claims fit on this node at all: the first solution found ends the search
    /// and no result is built (what a Filter needs).
    pub fn feasible(&self, claims: &[&ResourceClaim]) -> Result<bool, AllocationError> {
        self.feasible_planned(&self.classes.plan(claims)?)
    }

    /// [`Allocator::feasible`] for claims planned once.
    pub fn feasible_planned(&self, plans: &ClaimPlans<'_>) -> Result<bool, AllocationError> {
        let plans = &plans.0;
        let mut state = State {
            limit: 1,
            ..State::default()
        };
        self.solve(plans, &mut state, 0, 0)?;
        if state.solutions.is_empty() {
            self.no_invalid_pools()?;
        }
        Ok(!state.solutions.is_empty())
    }

    /// Upstream's error when nothing fits and a pool the node reaches could not be used.
    fn no_invalid_pools(&self) -> Result<(), AllocationError> {
        let invalid: Vec<String> = self
            .pools
            .iter()
            .filter_map(|p| {
                let why = p.invalid.as_ref()?;
                Some(format!("{}/{}: {why}", p.driver, p.name))
            })
            .collect();
        if invalid.is_empty() {
            Ok(())
        } else {
            Err(AllocationError::InvalidPools {
                pools: invalid.join(", "),
            })
        }
    }

    /// As [`Allocator::allocate`], comparing at most `solutions` complete solutions (1: the
    /// first found, enough to know that the claims fit).
    pub fn allocate_comparing(
        &self,
        claims: &[&ResourceClaim],
        solutions: usize,
    ) -> Result<Option<Vec<AllocationResult>>, AllocationError> {
        self.allocate_planned(&self.classes.plan(claims)?, solutions)
    }

    /// [`Allocator::allocate_comparing`] for claims planned once.
    pub fn allocate_planned(
        &self,
        plans: &ClaimPlans<'_>,
        solutions: usize,
    ) -> Result<Option<Vec<AllocationResult>>, AllocationError> {
        let plans = &plans.0;
        let mut state = State {
            limit: solutions.max(1),
            ..State::default()
        };
        self.solve(plans, &mut state, 0, 0)?;
        // The best solution; the first found wins ties (upstream's first fit among equals).
        let Some(best) = state
            .solutions
            .iter()
            .enumerate()
            .max_by(|(i, (a, _)), (j, (b, _))| a.cmp(b).then(j.cmp(i)))
            .map(|(_, (_, picks))| picks.clone())
        else {
            self.no_invalid_pools()?;
            return Ok(None);
        };
        Ok(Some(
            plans
                .iter()
                .enumerate()
                .map(|(i, plan)| self.result(plan, best.iter().filter(|p| p.claim == i)))
                .collect(),
        ))
    }

    fn device(&self, pool: usize, device: usize) -> &PoolDevice {
        &self.pools[pool].devices[device]
    }

    fn solve<'p>(
        &self,
        plans: &'p [ClaimPlan<'_>],
        state: &mut State<'p>,
        claim: usize,
        request: usize,
    ) -> Result<bool, AllocationError> {
        let Some(plan) = plans.get(claim) else {
            // A complete solution: keep it, and look for better ones until enough are seen.
            let score = self.solution_score(plans, &state.picks);
            state.solutions.push((score, state.picks.clone()));
            return Ok(state.solutions.len() >= state.limit);
        };
        let Some(alternatives) = plan.requests.get(request) else {
            return self.solve(plans, state, claim + 1, 0);
        };
        // Devices the claim holds so far, and the fewest its later requests take.
        let held = state.picks.iter().filter(|p| p.claim == claim).count();
        let later: usize = plan.requests[request + 1..]
            .iter()
            .map(|alternatives| least_devices(alternatives))
            .sum();
        for alternative in alternatives {
            let least = match alternative.mode {
                Mode::Count(n) => n,
                Mode::All => 1,
            };
            if held.saturating_add(least).saturating_add(later) > MAX_RESULTS {
                continue;
            }
            let found = match alternative.mode {
                Mode::Count(n) => {
                    self.pick(plans, state, claim, request, alternative, n, (0, 0))?
                }
                Mode::All => self.pick_all(plans, state, claim, request, alternative)?,
            };
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// [`selected`], remembering verdicts in the shared cache when there is one.
    fn selected_shared(
        &self,
        claim: &ResourceClaim,
        alternative: &Alternative,
        (pool, index): (usize, usize),
    ) -> Result<bool, AllocationError> {
        let device = self.device(pool, index);
        let Some(verdicts) = self.verdicts else {
            return selected(claim, alternative, device);
        };
        for selector in &alternative.selectors {
            let key = (
                selector.identity(),
                std::ptr::from_ref(&self.pools[pool]) as usize,
                index,
            );
            let known = verdicts
                .known
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .copied();
            let matches = match known {
                Some(known) => known,
                None => {
                    let matches = evaluate(claim, selector, device)?;
                    verdicts
                        .known
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key, matches);
                    matches
                }
            };
            if !matches {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// What `alternative` consumes of a shared device (`None` for exclusive devices).
    fn consumption(
        &self,
        alternative: &Alternative,
        (pool, index): (usize, usize),
    ) -> Option<Consumed> {
        let policies = self.device(pool, index).shared.as_ref()?;
        capacity::consumption(policies, &alternative.capacity)
    }

    /// How good a complete solution is (higher is better): devices of one request on one
    /// PCIe root, partitions packed onto GPUs already partly used (whole GPUs stay free),
    /// shares of devices allowing multiple allocations packed best-fit (the device left
    /// fullest, as the FGD artifact places a GPU share on the GPU with the least room that
    /// fits), and earlier `firstAvailable` alternatives before later ones.
    fn solution_score(&self, plans: &[ClaimPlan<'_>], picks: &[Pick]) -> i64 {
        let mut score = 0i64;
        for (i, a) in picks.iter().enumerate() {
            let device = self.device(a.pool, a.device);
            if let (Some(policies), Some(consumed)) = (&device.shared, &a.consumed) {
                let mut used = self.shared_use((a.pool, a.device), &picks[..i]);
                capacity::add(&mut used, consumed);
                score += capacity::fullness(policies, &used) / 50;
            }
            let rank = plans[a.claim].requests.iter().find_map(|alternatives| {
                alternatives
                    .iter()
                    .position(|alt| alt.result_name == a.alternative.result_name)
            });
            score -= 1000 * i64::try_from(rank.unwrap_or(0)).unwrap_or(0);
            let pool = &self.pools[a.pool];
            let used = self.consumed.get(&(pool.driver.clone(), pool.name.clone()));
            if device
                .consumes
                .keys()
                .any(|set| used.is_some_and(|u| u.contains_key(set)))
            {
                score += 20;
            }
            for b in &picks[i + 1..] {
                if a.claim != b.claim || a.alternative.parent != b.alternative.parent {
                    continue;
                }
                let other = self.device(b.pool, b.device);
                let root = "resource.kubernetes.io/pcieRoot";
                if attribute(device, root).is_some()
                    && attribute(device, root) == attribute(other, root)
                {
                    score += 30;
                }
            }
        }
        score
    }

    /// What a shared device has given: to claims already allocated and to `picks`.
    fn shared_use(&self, (pool, index): (usize, usize), picks: &[Pick]) -> Consumed {
        let device = self.device(pool, index);
        let mut used = self
            .in_use
            .shared
            .get(&device.id)
            .cloned()
            .unwrap_or_default();
        for pick in picks.iter().filter(|p| p.pool == pool && p.device == index) {
            if let Some(consumed) = &pick.consumed {
                capacity::add(&mut used, consumed);
            }
        }
        used
    }

    /// Whether `candidate` may be added for `alternative` of `claim` now.
    fn fits<'p>(
        &self,
        plans: &'p [ClaimPlan<'_>],
        state: &mut State<'p>,
        claim: usize,
        alternative: &'p Alternative,
        (pool, index): (usize, usize),
    ) -> Result<bool, AllocationError> {
        Ok(
            self.fits_unconstrained(plans, state, claim, alternative, (pool, index))?
                && self.constraints_hold(
                    plans,
                    state,
                    claim,
                    alternative,
                    self.device(pool, index),
                ),
        )
    }

    /// [`Allocator::fits`] but for the claim's constraints.
    fn fits_unconstrained<'p>(
        &self,
        plans: &'p [ClaimPlan<'_>],
        state: &mut State<'p>,
        claim: usize,
        alternative: &'p Alternative,
        (pool, index): (usize, usize),
    ) -> Result<bool, AllocationError> {
        let device = self.device(pool, index);
        if let Some(policies) = &device.shared {
            // A shared device: room left in its capacities decides, not exclusivity (unless
            // an allocated claim holds it whole).
            if self.busy[pool][index] {
                return Ok(false);
            }
            let Some(needed) = capacity::consumption(policies, &alternative.capacity) else {
                return Ok(false);
            };
            let used = self.shared_use((pool, index), &state.picks);
            if !capacity::fits(policies, &used, &needed) {
                return Ok(false);
            }
        } else {
            // In use: by other claims (unless admin access), or already picked in this attempt
            // (admin access only blocks picking the same device twice in one claim).
            if !alternative.admin && self.busy[pool][index] {
                return Ok(false);
            }
            let taken = state.picks.iter().any(|p| {
                p.pool == pool
                    && p.device == index
                    && (p.claim == claim || (!alternative.admin && !p.alternative.admin))
            });
            if taken {
                return Ok(false);
            }
            // Capacity asked of an exclusive device is a requirement on what it has.
            let enough = alternative.capacity.iter().all(|(name, wanted)| {
                let (domain, id) = qualify(name, &device.id.driver);
                device.view.capacity.iter().any(|(have, value)| {
                    qualify(have, &device.id.driver) == (domain, id) && value >= wanted
                })
            });
            if !enough {
                return Ok(false);
            }
        }
        // Alternatives live in the plans for the whole search: their address names them.
        let key = (std::ptr::from_ref(alternative) as usize, claim, pool, index);
        let selectable = match state.selectable.get(&key) {
            Some(&known) => known,
            None => {
                let ok = self.selected_shared(plans[claim].claim, alternative, (pool, index))?;
                state.selectable.insert(key, ok);
                ok
            }
        };
        if !selectable || blocked(device, &alternative.tolerations) {
            return Ok(false);
        }
        if !device.consumes.is_empty() && !self.counters_left(state, (pool, index)) {
            return Ok(false);
        }
        Ok(true)
    }

    /// Whether allocated claims hold shares of a device (its counters are counted already).
    fn shares_held(&self, pool: usize, index: usize) -> bool {
        let device = self.device(pool, index);
        device.shared.is_some() && self.in_use.shared.contains_key(&device.id)
    }

    /// Whether the pool's shared counters can take device `index` beside what is allocated
    /// and picked.
    fn counters_left(&self, state: &State<'_>, (pool, index): (usize, usize)) -> bool {
        let pool_info = &self.pools[pool];
        let mut used = self
            .consumed
            .get(&(pool_info.driver.clone(), pool_info.name.clone()))
            .cloned()
            .unwrap_or_default();
        // A device shared by several picks consumes its counters once, as does one already
        // holding shares of allocated claims.
        let mut counted: BTreeSet<usize> = state
            .picks
            .iter()
            .filter(|p| p.pool == pool)
            .map(|p| p.device)
            .collect();
        counted.insert(index);
        for &device in &counted {
            if !self.shares_held(pool, device) {
                add_counters(&mut used, &self.device(pool, device).consumes);
            }
        }
        used.iter().all(|(set, counters)| {
            counters.iter().all(|(name, amount)| {
                pool_info
                    .counters
                    .get(set)
                    .and_then(|c| c.get(name))
                    .is_some_and(|have| amount <= have)
            })
        })
    }

    fn constraints_hold<'p>(
        &self,
        plans: &'p [ClaimPlan<'_>],
        state: &State<'p>,
        claim: usize,
        alternative: &'p Alternative,
        device: &PoolDevice,
    ) -> bool {
        let covers = |c: &Constraint, a: &Alternative| {
            c.requests.is_empty()
                || c.requests
                    .iter()
                    .any(|r| *r == a.parent || *r == a.result_name)
        };
        plans[claim].constraints.iter().all(|constraint| {
            if !covers(constraint, alternative) {
                return true;
            }
            let others = state
                .picks
                .iter()
                .filter(|p| p.claim == claim && covers(constraint, p.alternative))
                .map(|p| self.device(p.pool, p.device));
            match &constraint.kind {
                ConstraintKind::Match(name) => {
                    let Some(value) = attribute(device, name) else {
                        return false;
                    };
                    others.map(|o| attribute(o, name)).all(|v| v == Some(value))
                }
                ConstraintKind::Distinct(name) => {
                    let Some(value) = attribute(device, name) else {
                        return false;
                    };
                    others.map(|o| attribute(o, name)).all(|v| v != Some(value))
                }
            }
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn pick<'p>(
        &self,
        plans: &'p [ClaimPlan<'_>],
        state: &mut State<'p>,
        claim: usize,
        request: usize,
        alternative: &'p Alternative,
        remaining: usize,
        start: (usize, usize),
    ) -> Result<bool, AllocationError> {
        if remaining == 0 {
            return self.solve(plans, state, claim, request + 1);
        }
        if state.picks.iter().filter(|p| p.claim == claim).count() >= MAX_RESULTS {
            return Ok(false);
        }
        for pool in start.0..self.pools.len() {
            let info = &self.pools[pool];
            if !info.complete || info.invalid.is_some() {
                continue;
            }
            let first = if pool == start.0 { start.1 } else { 0 };
            for index in first..info.devices.len() {
                state.steps += 1;
                if state.steps > STEP_BUDGET {
                    // Settle for the best found so far, if any.
                    if state.solutions.is_empty() {
                        return Err(AllocationError::SearchLimit);
                    }
                    return Ok(true);
                }
                if !self.fits(plans, state, claim, alternative, (pool, index))? {
                    continue;
                }
                state.picks.push(Pick {
                    claim,
                    alternative,
                    pool,
                    device: index,
                    consumed: self.consumption(alternative, (pool, index)),
                });
                // Devices within one request are interchangeable: combinations, not
                // permutations, so the next pick starts after this one.
                if self.pick(
                    plans,
                    state,
                    claim,
                    request,
                    alternative,
                    remaining - 1,
                    (pool, index + 1),
                )? {
                    return Ok(true);
                }
                state.picks.pop();
            }
        }
        Ok(false)
    }

    fn pick_all<'p>(
        &self,
        plans: &'p [ClaimPlan<'_>],
        state: &mut State<'p>,
        claim: usize,
        request: usize,
        alternative: &'p Alternative,
    ) -> Result<bool, AllocationError> {
        let before = state.picks.len();
        // Upstream enumerates every device up front and cannot with a pool in flux.
        for (pool, info) in self.pools.iter().enumerate() {
            if info.complete && info.invalid.is_none() {
                continue;
            }
            let any_selectable = (0..info.devices.len()).any(|index| {
                selected(plans[claim].claim, alternative, self.device(pool, index)).unwrap_or(false)
            });
            if any_selectable {
                return Err(AllocationError::IncompletePool {
                    claim: claim_key(plans[claim].claim),
                    request: alternative.result_name.clone(),
                    pool: format!("{}/{}", info.driver, info.name),
                });
            }
        }
        for (pool, info) in self.pools.iter().enumerate() {
            if !info.complete || info.invalid.is_some() {
                continue;
            }
            for index in 0..info.devices.len() {
                if !self.selected_shared(plans[claim].claim, alternative, (pool, index))? {
                    continue;
                }
                // A shared device whose capacity cannot serve the request, given what
                // allocated claims consume, is not among "all" (upstream filters it out).
                if let Some(policies) = &self.device(pool, index).shared {
                    let servable = capacity::consumption(policies, &alternative.capacity)
                        .is_some_and(|needed| {
                            let used = self
                                .in_use
                                .shared
                                .get(&self.device(pool, index).id)
                                .cloned()
                                .unwrap_or_default();
                            capacity::fits(policies, &used, &needed)
                        });
                    if !servable {
                        continue;
                    }
                }
                // Every matching device must be allocatable: one that is not fails the request.
                if !self.fits_unconstrained(plans, state, claim, alternative, (pool, index))? {
                    state.picks.truncate(before);
                    return Ok(false);
                }
                // A constraint that keeps a device out makes the request unsatisfiable
                // anywhere: upstream calls that an error of the claim.
                let device = self.device(pool, index);
                if !self.constraints_hold(plans, state, claim, alternative, device) {
                    return Err(AllocationError::Request {
                        claim: claim_key(plans[claim].claim),
                        request: alternative.result_name.clone(),
                        message: format!(
                            "cannot add device {} because a claim constraint would not be satisfied",
                            device.id
                        ),
                    });
                }
                state.picks.push(Pick {
                    claim,
                    alternative,
                    pool,
                    device: index,
                    consumed: self.consumption(alternative, (pool, index)),
                });
            }
        }
        let added = state.picks.len() - before;
        if added == 0 || state.picks.iter().filter(|p| p.claim == claim).count() > MAX_RESULTS {
            state.picks.truncate(before);
            return Ok(false);
        }
        if self.solve(plans, state, claim, request + 1)? {
            return Ok(true);
        }
        state.picks.truncate(before);
        Ok(false)
    }

    fn result<'p>(
        &self,
        plan: &ClaimPlan<'_>,
        picks: impl Iterator<Item = &'p Pick<'p>>,
    ) -> AllocationResult {
        let picks: Vec<&Pick> = picks.collect();
        let results: Vec<DeviceRequestAllocationResult> = picks
            .iter()
            .map(|p| {
                let device = self.device(p.pool, p.device);
                DeviceRequestAllocationResult {
                    request: p.alternative.result_name.clone(),
                    driver: device.id.driver.clone(),
                    pool: device.id.pool.clone(),
                    device: device.id.device.clone(),
                    admin_access: p.alternative.admin.then_some(true),
                    tolerations: (!p.alternative.tolerations.is_empty())
                        .then(|| p.alternative.tolerations.clone()),
                    // A share of a device allowing multiple allocations: an ID for the share
                    // (stable for the claim, request and device) and what it consumes.
                    share_id: p.consumed.as_ref().map(|_| {
                        uuid::Uuid::new_v5(
                            &uuid::Uuid::NAMESPACE_OID,
                            format!(
                                "{}/{}/{}",
                                claim_key(plan.claim),
                                p.alternative.result_name,
                                device.id
                            )
                            .as_bytes(),
                        )
                        .to_string()
                    }),
                    consumed_capacity: p.consumed.as_ref().map(|consumed| {
                        consumed
                            .iter()
                            .map(|(name, q)| {
                                (
                                    name.clone(),
                                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                                        q.to_canonical(),
                                    ),
                                )
                            })
                            .collect()
                    }),
                    ..Default::default()
                }
            })
            .collect();
        // Class configuration first (once per class), then the claim's own.
        let mut config = Vec::new();
        let mut classes_seen = BTreeSet::new();
        for pick in &picks {
            if !classes_seen.insert(pick.alternative.class.clone()) {
                continue;
            }
            if let Some(Ok(class)) = self.classes.get(&pick.alternative.class) {
                let requests: Vec<String> = picks
                    .iter()
                    .filter(|p| p.alternative.class == pick.alternative.class)
                    .map(|p| p.alternative.result_name.clone())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                for c in &class.config {
                    config.push(DeviceAllocationConfiguration {
                        source: "FromClass".into(),
                        requests: Some(requests.clone()),
                        opaque: c.opaque.clone(),
                    });
                }
            }
        }
        let allocated: BTreeSet<&str> = picks
            .iter()
            .flat_map(|p| {
                [
                    p.alternative.parent.as_str(),
                    p.alternative.result_name.as_str(),
                ]
            })
            .collect();
        for c in plan
            .claim
            .spec
            .devices
            .as_ref()
            .and_then(|d| d.config.as_ref())
            .into_iter()
            .flatten()
        {
            let requests = c.requests.as_deref().unwrap_or_default();
            if requests.is_empty() || requests.iter().any(|r| allocated.contains(r.as_str())) {
                config.push(DeviceAllocationConfiguration {
                    source: "FromClaim".into(),
                    requests: c.requests.clone(),
                    opaque: c.opaque.clone(),
                });
            }
        }
        let devices: Vec<&PoolDevice> = picks
            .iter()
            .map(|p| self.device(p.pool, p.device))
            .collect();
        AllocationResult {
            allocation_timestamp: None,
            devices: Some(DeviceAllocationResult {
                results: Some(results),
                config: (!config.is_empty()).then_some(config),
            }),
            node_selector: node_selector(&self.node.name, &devices),
        }
    }
}

/// Where an allocation of `devices` may run (upstream's `createNodeSelector`): on this node
/// when one of them is node-local; else where all their node selectors hold (their single
/// terms joined into one); anywhere (`None`) when all are on all nodes. A selector of several
/// terms (refused by validation) pins the allocation to this node.
fn node_selector(node: &str, devices: &[&PoolDevice]) -> Option<NodeSelector> {
    let this_node = || NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.to_string()]),
            }]),
            match_expressions: None,
        }],
    };
    if devices.iter().any(|d| d.node_local) {
        return Some(this_node());
    }
    let mut fields: Vec<NodeSelectorRequirement> = Vec::new();
    let mut expressions: Vec<NodeSelectorRequirement> = Vec::new();
    for selector in devices.iter().filter_map(|d| d.node_selector.as_ref()) {
        let [term] = selector.node_selector_terms.as_slice() else {
            return Some(this_node());
        };
        for (from, into) in [
            (&term.match_fields, &mut fields),
            (&term.match_expressions, &mut expressions),
        ] {
            for requirement in from.iter().flatten() {
                if !into.contains(requirement) {
                    into.push(requirement.clone());
                }
            }
        }
    }
    if fields.is_empty() && expressions.is_empty() {
        return None;
    }
    Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: (!fields.is_empty()).then_some(fields),
            match_expressions: (!expressions.is_empty()).then_some(expressions),
        }],
    })
}

fn add_counters(total: &mut Counters, more: &Counters) {
    for (set, counters) in more {
        let entry = total.entry(set.clone()).or_default();
        for (name, amount) in counters {
            let sum = entry
                .get(name)
                .and_then(|have| have.checked_add(amount))
                .unwrap_or(*amount);
            entry.insert(name.clone(), sum);
        }
    }
}

#[cfg(test)]
mod diagnosis_tests {
    use super::Diagnosis;

    #[test]
    fn a_diagnosis_counts_devices_or_says_there_are_none() {
        let diagnosis = |matching, free| Diagnosis {
            claim: "default/b".into(),
            request: "gpus".into(),
            class: "gpu.nvidia.com".into(),
            wants: Some(7),
            matching,
            free,
        };
        let table = [
            (
                diagnosis(8, 6),
                "claim default/b request gpus: wants 7 of class gpu.nvidia.com; 8 device(s) match its selectors, 6 free",
            ),
            (
                diagnosis(0, 0),
                "claim default/b request gpus: wants 7 of class gpu.nvidia.com; no device on the node is of that class and matches its selectors",
            ),
        ];
        for (diagnosis, want) in table {
            assert_eq!(diagnosis.to_string(), want);
        }
    }
}
