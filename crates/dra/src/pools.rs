//! Resource pools as the structured allocator sees them for one node: the ResourceSlices of
//! each (driver, pool) at its highest generation, complete or not, with the devices that are
//! reachable from the node (node-local slices, `allNodes`, a matching `nodeSelector`, or a
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

fn view(driver: &str, device: &Device) -> DeviceView {
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

/// The pools `slices` offer to `node`.
pub fn gather<'s>(
    slices: impl IntoIterator<Item = &'s ResourceSlice>,
    node: &NodeView,
) -> Vec<Pool> {
    // (driver, pool) → slices at the highest generation.
    let mut newest: BTreeMap<(String, String), (i64, Vec<&ResourceSlice>)> = BTreeMap::new();
    for slice in slices {
        let key = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
        let generation = slice.spec.pool.generation;
        let entry = newest.entry(key).or_insert((generation, Vec::new()));
        if generation > entry.0 {
            *entry = (generation, Vec::new());
        }
        if generation == entry.0 {
            entry.1.push(slice);
        }
    }
    let mut pools = Vec::new();
    for ((driver, name), (_, members)) in newest {
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
        for slice in &members {
            let spec = &slice.spec;
            let per_device = spec.per_device_node_selection == Some(true);
            let slice_reach = if per_device {
                None
            } else {
                reach(
                    spec.node_name.as_deref(),
                    spec.all_nodes,
                    spec.node_selector.as_ref(),
                    node,
                )
            };
            for device in spec.devices.iter().flatten() {
                let reach = if per_device {
                    reach(
                        device.node_name.as_deref(),
                        device.all_nodes,
                        device.node_selector.as_ref(),
                        node,
                    )
                } else {
                    slice_reach
                };
                let Some(node_local) = reach else { continue };
                let id = DeviceId {
                    driver: driver.clone(),
                    pool: name.clone(),
                    device: device.name.clone(),
                };
                if pool.devices.iter().any(|d| d.id == id) {
                    pool.invalid = Some(format!("device {} is listed twice", device.name));
                }
                let mut consumes = Counters::new();
                for consumption in device.consumes_counters.iter().flatten() {
                    if !pool.counters.contains_key(&consumption.counter_set) {
                        pool.invalid = Some(format!(
                            "device {} consumes from unknown counter set {}",
                            device.name, consumption.counter_set
                        ));
                    }
                    consumes.insert(
                        consumption.counter_set.clone(),
                        quantities(&consumption.counters),
                    );
                }
                pool.devices.push(PoolDevice {
                    id,
                    view: view(&driver, device),
                    consumes,
                    taints: device.taints.clone().unwrap_or_default(),
                    node_local,
                    shared: (device.allow_multiple_allocations == Some(true))
                        .then(|| crate::capacity::policies(device)),
                });
            }
        }
        if !pool.devices.is_empty() {
            pools.push(pool);
        }
    }
    pools
}
