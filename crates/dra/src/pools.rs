//! Resource pools as the structured allocator sees them for one node: the ResourceSlices of
//! each (driver, pool) at the highest generation targeting the node, complete or not, with
//! the devices that are reachable from the node (node-local slices, `allNodes`, a matching `nodeSelector`, or a
//! per-device node selection), their counter consumption and taints, and the pool's shared
//! counter sets (read from every slice of the pool, as upstream always includes counter
//! slices).
//!
//! Pure; knows nothing of claims.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Device, DeviceTaint, ResourceSlice};
use tessera_model::node_selector;
use tessera_model::quantity::Quantity;

use crate::selector::{Attribute, DeviceView};

/// A device's identity: driver, pool and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    /// The driver.
    pub driver: String,
    /// The pool.
    pub pool: String,
    /// The device name.
    pub device: String,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// The node allocation is for.
#[derive(Debug, Clone, Default)]
pub struct NodeView {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// Counter values by counter set, then counter name.
pub type Counters = BTreeMap<String, BTreeMap<String, Quantity>>;

/// A device the node can reach.
#[derive(Debug, Clone)]
pub struct PoolDevice {
    /// Its identity.
    pub id: DeviceId,
    /// What selectors see.
    pub view: DeviceView,
    /// What it consumes from the pool's counter sets.
    pub consumes: Counters,
    /// Its taints.
    pub taints: Vec<DeviceTaint>,
    /// Whether it is reachable from this node only (its allocation pins the pod to it).
    pub node_local: bool,
    /// The node selector that reaches it, when it is neither node-local nor on all nodes.
    pub node_selector: Option<k8s_openapi::api::core::v1::NodeSelector>,
    /// For a device that allows multiple allocations: its consumable capacities.
    pub shared: Option<BTreeMap<String, crate::capacity::CapacityPolicy>>,
}

/// One pool.
#[derive(Debug, Clone)]
pub struct Pool {
    /// The driver.
    pub driver: String,
    /// The pool name.
    pub name: String,
    /// Whether every slice of the highest generation is present.
    pub complete: bool,
    /// Why the pool cannot be used (duplicate devices, unknown counter sets).
    pub invalid: Option<String>,
    /// Devices reachable from the node, in slice then device order.
    pub devices: Vec<PoolDevice>,
    /// Devices of the pool the node does not reach, with what they consume of the shared
    /// counters (an allocated one uses up counters the node's devices share).
    pub elsewhere: Vec<(DeviceId, Counters)>,
    /// Shared counter sets.
    pub counters: Counters,
}

fn quantities(
    counters: &BTreeMap<String, k8s_openapi::api::resource::v1::Counter>,
) -> BTreeMap<String, Quantity> {
    counters
        .iter()
        .filter_map(|(name, c)| c.value.0.parse().ok().map(|q| (name.clone(), q)))
        .collect()
}

/// What selectors see of a device `driver` publishes.
pub fn view(driver: &str, device: &Device) -> DeviceView {
    DeviceView {
        driver: driver.to_string(),
        attributes: device
            .attributes
            .iter()
            .flatten()
            .filter_map(|(name, a)| {
                let value = if let Some(i) = a.int {
                    Attribute::Int(i)
                } else if let Some(b) = a.bool {
                    Attribute::Bool(b)
                } else if let Some(s) = &a.string {
                    Attribute::String(s.clone())
                } else {
                    Attribute::Version(semver::Version::parse(a.version.as_deref()?).ok()?)
                };
                Some((name.clone(), value))
            })
            .collect(),
        capacity: device
            .capacity
            .iter()
            .flatten()
            .filter_map(|(name, c)| c.value.0.parse().ok().map(|q| (name.clone(), q)))
            .collect(),
        allow_multiple_allocations: device.allow_multiple_allocations.unwrap_or(false),
    }
}

/// Whether a slice (or, with per-device selection, a device) is reachable from `node`;
/// `Some(true)` when only from it.
fn reach(
    node_name: Option<&str>,
    all_nodes: Option<bool>,
    selector: Option<&k8s_openapi::api::core::v1::NodeSelector>,
    node: &NodeView,
) -> Option<bool> {
    if let Some(name) = node_name {
        return (name == node.name).then_some(true);
    }
    if all_nodes == Some(true) {
        return Some(false);
    }
    let selector = selector?;
    node_selector::matches(selector, &node.name, &node.labels).then_some(false)
}

/// Whether a slice targets `node`: its node selection reaches it, or (per-device selection)
/// one of its devices does.
fn targets(slice: &ResourceSlice, node: &NodeView) -> bool {
    let spec = &slice.spec;
    if spec.per_device_node_selection == Some(true) {
        return spec.devices.iter().flatten().any(|d| {
            reach(
                d.node_name.as_deref(),
                d.all_nodes,
                d.node_selector.as_ref(),
                node,
            )
            .is_some()
        }) || spec.devices.as_ref().is_none_or(Vec::is_empty);
    }
    reach(
        spec.node_name.as_deref(),
        spec.all_nodes,
        spec.node_selector.as_ref(),
        node,
    )
    .is_some()
}

/// The pools `slices` offer to `node`. A pool's generation is the newest among the slices
/// that target the node (upstream ignores newer slices elsewhere, so a pool moving between
/// nodes is seen as it was); every slice of that generation counts towards completeness, is
/// validated, and has what its devices consume of shared counters counted.
pub fn gather<'s>(
    slices: impl IntoIterator<Item = &'s ResourceSlice>,
    node: &NodeView,
) -> Vec<Pool> {
    // (driver, pool) → the newest generation targeting the node, and every slice.
    type Slices<'s> = (Option<i64>, Vec<&'s ResourceSlice>);
    let mut by_pool: BTreeMap<(String, String), Slices<'s>> = BTreeMap::new();
    for slice in slices {
        let key = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
        let entry = by_pool.entry(key).or_default();
        if targets(slice, node) {
            entry.0 = entry.0.max(Some(slice.spec.pool.generation));
        }
        entry.1.push(slice);
    }
    let mut pools = Vec::new();
    for ((driver, name), (generation, all)) in by_pool {
        let Some(generation) = generation else {
            continue;
        };
        let members: Vec<&ResourceSlice> = all
            .into_iter()
            .filter(|s| s.spec.pool.generation == generation)
            .collect();
        let expected = members
            .iter()
            .map(|s| s.spec.pool.resource_slice_count)
            .max()
            .unwrap_or(0);
        let complete = i64::try_from(members.len()).unwrap_or(i64::MAX) >= expected;
        let mut pool = Pool {
            driver: driver.clone(),
            name: name.clone(),
            complete,
            invalid: None,
            devices: Vec::new(),
            elsewhere: Vec::new(),
            counters: Counters::new(),
        };
        for slice in &members {
            for set in slice.spec.shared_counters.iter().flatten() {
                if pool
                    .counters
                    .insert(set.name.clone(), quantities(&set.counters))
                    .is_some()
                {
                    pool.invalid = Some(format!("counter set {} is defined twice", set.name));
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for slice in &members {
            let spec = &slice.spec;
            let per_device = spec.per_device_node_selection == Some(true);
            for device in spec.devices.iter().flatten() {
                let (node_name, all_nodes, selector) = if per_device {
                    (
                        device.node_name.as_deref(),
                        device.all_nodes,
                        device.node_selector.as_ref(),
                    )
                } else {
                    (
                        spec.node_name.as_deref(),
                        spec.all_nodes,
                        spec.node_selector.as_ref(),
                    )
                };
                let id = DeviceId {
                    driver: driver.clone(),
                    pool: name.clone(),
                    device: device.name.clone(),
                };
                if !seen.insert(device.name.clone()) {
                    pool.invalid = Some(format!("device {} is listed twice", device.name));
                }
                let mut consumes = Counters::new();
                for consumption in device.consumes_counters.iter().flatten() {
                    let counters = quantities(&consumption.counters);
                    match pool.counters.get(&consumption.counter_set) {
                        None => {
                            pool.invalid = Some(format!(
                                "device {} consumes from unknown counter set {}",
                                device.name, consumption.counter_set
                            ));
                        }
                        Some(set) => {
                            if let Some(unknown) = counters.keys().find(|c| !set.contains_key(*c)) {
                                pool.invalid = Some(format!(
                                    "device {} consumes unknown counter {unknown} of counter set {}",
                                    device.name, consumption.counter_set
                                ));
                            }
                        }
                    }
                    consumes.insert(consumption.counter_set.clone(), counters);
                }
                let Some(node_local) = reach(node_name, all_nodes, selector, node) else {
                    pool.elsewhere.push((id, consumes));
                    continue;
                };
                // Devices with binding conditions need DRADeviceBindingConditions (alpha, off
                // by default in 1.34): without it they are not allocated.
                if device
                    .binding_conditions
                    .as_ref()
                    .is_some_and(|c| !c.is_empty())
                {
                    continue;
                }
                pool.devices.push(PoolDevice {
                    id,
                    view: view(&driver, device),
                    consumes,
                    taints: device.taints.clone().unwrap_or_default(),
                    node_local,
                    node_selector: if node_local || all_nodes == Some(true) {
                        None
                    } else {
                        selector.cloned()
                    },
                    shared: (device.allow_multiple_allocations == Some(true))
                        .then(|| crate::capacity::policies(device)),
                });
            }
        }
        if !pool.devices.is_empty() || pool.invalid.is_some() {
            pools.push(pool);
        }
    }
    pools
}
