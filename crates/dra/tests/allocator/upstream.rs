//! Upstream's structured allocator test table
//! (`k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go`),
//! case by case under upstream's names and in upstream's order, comparing every field of each
//! allocation result (devices with request, driver, pool, device, admin access, tolerations,
//! share and consumed capacity; the node selector; the configuration) as JSON. Upstream
//! matches the results of one allocation in any order (`ConsistOf`), and so does this table.
//! A case whose error upstream words differently is marked `adapted`; a case that needs a
//! feature gate in a state Tessera does not run (or an API newer than resource.k8s.io/v1 of
//! Kubernetes 1.34) carries its reason and is skipped.

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};
use tessera_dra::{Allocator, NodeView};

const NODE1: &str = "node-1";
const NODE2: &str = "node-2";
const REGION1: &str = "region-1";
const REGION2: &str = "region-2";
const CLASS_A: &str = "class-a";
const CLASS_B: &str = "class-b";
const DRIVER_A: &str = "driver-a";
const DRIVER_B: &str = "driver-b";
const POOL1: &str = "pool-1";
const POOL2: &str = "pool-2";
const POOL3: &str = "pool-3";
const POOL4: &str = "pool-4";
const REQ0: &str = "req-0";
const REQ1: &str = "req-1";
const REQ2: &str = "req-2";
const REQ3: &str = "req-3";
const SUB0: &str = "subReq-0";
const SUB1: &str = "subReq-1";
const CLAIM0: &str = "claim-0";
const CLAIM1: &str = "claim-1";
const SLICE1: &str = "slice-1";
const SLICE2: &str = "slice-2";
const SLICE3: &str = "slice-3";
const SLICE4: &str = "slice-4";
const DEVICE0: &str = "device-0";
const DEVICE1: &str = "device-1";
const DEVICE2: &str = "device-2";
const DEVICE3: &str = "device-3";
const DEVICE4: &str = "device-4";
const COUNTER_SET1: &str = "counter-set-1";
const COUNTER_SET2: &str = "counter-set-2";
const CAPACITY0: &str = "capacity-0";
const CAPACITY1: &str = "capacity-1";
/// Upstream's `resourceapi.AllocationResultsMaxSize`.
const MAX: i64 = 32;
/// What every share ID is replaced by before comparing (upstream's `fixedShareID`).
const FIXED_SHARE_ID: &str = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";

/// Why a case upstream runs only with a feature gate off is not run: Tessera has no gates and
/// runs these features on.
const ALWAYS_ON: &str = "needs the gate off; Tessera's allocator has no feature gates";
/// Why the list-typed attribute cases are not run.
const LIST_ATTRIBUTES: &str = "DRAListTypeAttributes (alpha in 1.36): list-typed device attributes are not in resource.k8s.io/v1 of 1.34";
/// Why the binding-condition cases are not run.
const BINDING_CONDITIONS: &str = "DRADeviceBindingConditions (alpha, off by default in 1.34): Tessera's scheduler does not wait for binding conditions, so the allocator runs with the gate off (devices with binding conditions are not allocated)";

fn node(name: &str, region: &str) -> NodeView {
    NodeView {
        name: name.into(),
        labels: [
            ("region".to_string(), region.to_string()),
            ("planet".to_string(), "earth".to_string()),
        ]
        .into(),
    }
}

fn class_with(name: &str, expression: String, config: Option<Value>) -> DeviceClass {
    let mut class = json!({"metadata": {"name": name}, "spec": {"selectors": [
        {"cel": {"expression": expression}}]}});
    if let Some(config) = config {
        class["spec"]["config"] = json!([config]);
    }
    serde_json::from_value(class).expect("class")
}

fn class(name: &str, driver: &str) -> DeviceClass {
    class_with(name, format!("device.driver == \"{driver}\""), None)
}

fn class_with_config(name: &str, driver: &str, attribute: &str) -> DeviceClass {
    class_with(
        name,
        format!("device.driver == \"{driver}\""),
        Some(device_configuration(driver, attribute)),
    )
}

fn class_with_multiple_allocations(name: &str, driver: &str, allowed: bool) -> DeviceClass {
    class_with(
        name,
        format!("device.driver == \"{driver}\" && device.allowMultipleAllocations == {allowed}"),
        None,
    )
}

/// Upstream's `deviceConfiguration`: opaque parameters `{attribute: attributeValue}`.
fn device_configuration(driver: &str, attribute: &str) -> Value {
    json!({"opaque": {"driver": driver, "parameters": {attribute: format!("{attribute}Value")}}})
}

fn cel(expression: &str) -> Value {
    json!({"cel": {"expression": expression}})
}

fn exact(name: &str, class: &str, count: i64, selectors: &[&str]) -> Value {
    let selectors: Vec<Value> = selectors.iter().map(|e| cel(e)).collect();
    let mut exactly =
        json!({"allocationMode": "ExactCount", "count": count, "deviceClassName": class});
    if !selectors.is_empty() {
        exactly["selectors"] = json!(selectors);
    }
    json!({"name": name, "exactly": exactly})
}

fn all(name: &str, class: &str) -> Value {
    json!({"name": name, "exactly": {"allocationMode": "All", "deviceClassName": class}})
}

/// The request (or subrequest) body: `exactly` of a request, the subrequest itself.
fn body(request: &mut Value) -> &mut Value {
    if request.get("exactly").is_some() {
        &mut request["exactly"]
    } else {
        request
    }
}

fn admin(mut request: Value) -> Value {
    body(&mut request)["adminAccess"] = json!(true);
    request
}

fn mode_all(mut request: Value) -> Value {
    let body = body(&mut request);
    body["allocationMode"] = json!("All");
    if let Some(body) = body.as_object_mut() {
        body.remove("count");
    }
    request
}

fn tolerating(mut request: Value, tolerations: &[&Value]) -> Value {
    body(&mut request)["tolerations"] = json!(tolerations);
    request
}

/// Asks `quantity` of `capacity-0` (upstream's `withCapacityRequest`).
fn capacity_request(mut request: Value, quantity: &str) -> Value {
    body(&mut request)["capacity"] = json!({"requests": {CAPACITY0: quantity}});
    request
}

fn sub(name: &str, class: &str, count: i64, selectors: &[&str]) -> Value {
    let mut sub = json!({"name": name, "deviceClassName": class, "allocationMode": "ExactCount", "count": count});
    if !selectors.is_empty() {
        sub["selectors"] = json!(selectors.iter().map(|e| cel(e)).collect::<Vec<_>>());
    }
    sub
}

fn first(name: &str, subrequests: Vec<Value>) -> Value {
    json!({"name": name, "firstAvailable": subrequests})
}

fn claim_json(name: &str, devices: Value) -> ResourceClaim {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"devices": devices}}))
        .expect("claim")
}

fn claim_with_requests(name: &str, requests: Vec<Value>) -> ResourceClaim {
    claim_json(name, json!({"requests": requests}))
}

fn claim_with_constraints(name: &str, constraints: Value, requests: Vec<Value>) -> ResourceClaim {
    claim_json(
        name,
        json!({"requests": requests, "constraints": constraints}),
    )
}

fn claim_with_request(name: &str, request: &str, class: &str) -> ResourceClaim {
    claim_with_requests(name, vec![exact(request, class, 1, &[])])
}

fn device(name: &str, memory: Option<&str>) -> Value {
    let mut device = json!({"name": name});
    if let Some(memory) = memory {
        device["capacity"] = json!({"memory": {"value": memory}});
    }
    device
}

/// A device with more fields (`attributes`, `capacity`, `taints`, …).
fn dev(name: &str, fields: Value) -> Value {
    let mut device = json!({"name": name});
    if let (Some(device), Some(fields)) = (device.as_object_mut(), fields.as_object()) {
        device.extend(fields.clone());
    }
    device
}

fn quantities(pairs: &[(&str, &str)]) -> Value {
    pairs
        .iter()
        .map(|(name, value)| (name.to_string(), json!({"value": value})))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// What a device consumes of one counter set.
fn consumes(set: &str, counters: &[(&str, &str)]) -> Value {
    json!({"counterSet": set, "counters": quantities(counters)})
}

/// A device consuming counters; `from_counters`: its capacity is what it consumes.
fn partition(name: &str, consumption: Vec<Value>, from_counters: bool) -> Value {
    let mut device = json!({"name": name, "consumesCounters": consumption});
    if from_counters {
        let mut capacity = serde_json::Map::new();
        for set in &consumption {
            if let Some(counters) = set["counters"].as_object() {
                capacity.extend(counters.clone());
            }
        }
        device["capacity"] = capacity.into();
    }
    device
}

fn counter_set(name: &str, counters: &[(&str, &str)]) -> Value {
    json!({"name": name, "counters": quantities(counters)})
}

/// Upstream's `withCapacityRequestPolicyRange`: default 2, range 2..4 in steps of 2.
fn policy_range(mut device: Value, value: &str) -> Value {
    device["capacity"][CAPACITY0] = json!({"value": value, "requestPolicy": {"default": "2",
        "validRange": {"min": "2", "step": "2", "max": "4"}}});
    device
}

/// Upstream's `withCapacityRequestPolicyValidValues`: the default first, then `more`.
fn policy_values(mut device: Value, default: &str, value: &str, more: &[&str]) -> Value {
    let mut values = vec![default];
    values.extend_from_slice(more);
    device["capacity"][CAPACITY0] =
        json!({"value": value, "requestPolicy": {"default": default, "validValues": values}});
    device
}

fn multi(mut device: Value) -> Value {
    device["allowMultipleAllocations"] = json!(true);
    device
}

fn slice_json(
    name: &str,
    at: Value,
    pool: (&str, i64, i64),
    driver: &str,
    content: Value,
) -> ResourceSlice {
    let mut spec = json!({"driver": driver,
        "pool": {"name": pool.0, "generation": pool.1, "resourceSliceCount": pool.2}});
    for fields in [at, content] {
        if let (Some(spec), Some(fields)) = (spec.as_object_mut(), fields.as_object()) {
            spec.extend(fields.clone());
        }
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("slice")
}

/// A slice of devices reaching the nodes `at` says (see [`on`], [`all_nodes`], [`selected`],
/// [`per_device`]).
fn slice_at(
    name: &str,
    at: Value,
    pool: (&str, i64, i64),
    driver: &str,
    devices: Vec<Value>,
) -> ResourceSlice {
    slice_json(name, at, pool, driver, json!({"devices": devices}))
}

/// A slice on `node` of pool (`name`, generation, slice count).
fn slice(
    name: &str,
    node: &str,
    pool: (&str, i64, i64),
    driver: &str,
    devices: Vec<Value>,
) -> ResourceSlice {
    slice_at(name, on(node), pool, driver, devices)
}

fn counter_slice(
    name: &str,
    at: Value,
    pool: (&str, i64, i64),
    driver: &str,
    sets: Vec<Value>,
) -> ResourceSlice {
    slice_json(name, at, pool, driver, json!({"sharedCounters": sets}))
}

fn on(node: &str) -> Value {
    json!({"nodeName": node})
}

fn all_nodes() -> Value {
    json!({"allNodes": true})
}

fn selected(selector: Value) -> Value {
    json!({"nodeSelector": selector})
}

fn per_device() -> Value {
    json!({"perDeviceNodeSelection": true})
}

fn slice_with_one_device(name: &str, node: &str, pool: &str, driver: &str) -> ResourceSlice {
    slice(
        name,
        node,
        (pool, 1, 1),
        driver,
        vec![device(DEVICE1, None)],
    )
}

/// Devices `device-0` … `device-<count-1>`.
fn numbered_devices(count: i64) -> Vec<Value> {
    (0..count)
        .map(|i| device(&format!("device-{i}"), None))
        .collect()
}

fn label_selector(key: &str, value: &str) -> Value {
    json!({"nodeSelectorTerms": [{"matchExpressions": [
        {"key": key, "operator": "In", "values": [value]}]}]})
}

fn local_node_selector(node: &str) -> Value {
    json!({"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]})
}

/// A claim already allocated, holding `devices` (driver, pool, device) whole.
fn allocated(devices: &[(&str, &str, &str)]) -> ResourceClaim {
    let results: Vec<Value> = devices
        .iter()
        .map(|(driver, pool, device)| result("held", driver, pool, device, false))
        .collect();
    allocated_with(results)
}

/// A claim already allocated, holding a share of `device` of driver-a/pool-1.
fn allocated_share(device: &str, consumed: &[(&str, &str)]) -> ResourceClaim {
    allocated_with(vec![share(
        result("held", DRIVER_A, POOL1, device, false),
        consumed,
    )])
}

fn allocated_with(results: Vec<Value>) -> ResourceClaim {
    serde_json::from_value(json!({"metadata": {"namespace": "other", "name": "holder"},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": results}}}}))
    .expect("allocated claim")
}

fn result(request: &str, driver: &str, pool: &str, device: &str, admin: bool) -> Value {
    let mut result = json!({"request": request, "driver": driver, "pool": pool, "device": device});
    if admin {
        result["adminAccess"] = json!(true);
    }
    result
}

fn with_tolerations(mut result: Value, tolerations: &[&Value]) -> Value {
    result["tolerations"] = json!(tolerations);
    result
}

/// A share of a device allowing multiple allocations, consuming `consumed`.
fn share(mut result: Value, consumed: &[(&str, &str)]) -> Value {
    result["shareID"] = json!(FIXED_SHARE_ID);
    if !consumed.is_empty() {
        result["consumedCapacity"] = consumed
            .iter()
            .map(|(name, q)| (name.to_string(), json!(q)))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    result
}

fn allocation(node_selector: Value, results: Vec<Value>) -> Value {
    let mut allocation = json!({"devices": {"results": results}});
    if !node_selector.is_null() {
        allocation["nodeSelector"] = node_selector;
    }
    allocation
}

fn allocation_with_config(node_selector: Value, results: Vec<Value>, config: Value) -> Value {
    let mut allocation = allocation(node_selector, results);
    allocation["devices"]["config"] = config;
    allocation
}

/// One allocation on node-1 of `devices` (request, driver, pool, device).
fn on_node1(devices: &[(&str, &str, &str, &str)]) -> Value {
    allocation(
        local_node_selector(NODE1),
        devices
            .iter()
            .map(|(r, d, p, dev)| result(r, d, p, dev, false))
            .collect(),
    )
}

/// What a case expects.
enum Want {
    /// One allocation result per claim, in claim order.
    Results(Vec<Value>),
    /// The claims do not fit (upstream: no results, no error).
    NoFit,
    /// An error containing this text (upstream's words).
    Error(&'static str),
    /// An error containing this text, where upstream words it differently.
    Adapted {
        #[allow(dead_code)]
        upstream: &'static str,
        ours: &'static str,
    },
    /// Not ported: needs a feature gate in another state, or a newer API.
    Skip(&'static str),
}

struct Case {
    name: &'static str,
    claims: Vec<ResourceClaim>,
    /// Claims allocated before (upstream's `allocatedDevices` and `allocatedCapacityDevices`).
    allocated: Vec<ResourceClaim>,
    classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
    node: NodeView,
    want: Want,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            claims: Vec::new(),
            allocated: Vec::new(),
            classes: Vec::new(),
            slices: Vec::new(),
            node: node(NODE1, REGION1),
            want: Want::Results(Vec::new()),
        }
    }
}

/// What upstream's comparison ignores or fixes: result order within an allocation, share IDs
/// (random upstream), and empty `config` and `consumedCapacity` (nil upstream).
fn normalized(mut value: Value) -> Value {
    if let Some(devices) = value["devices"].as_object_mut() {
        if devices.get("config").is_some_and(|c| c == &json!([])) {
            devices.remove("config");
        }
        if let Some(results) = devices.get_mut("results").and_then(Value::as_array_mut) {
            for result in results.iter_mut() {
                if let Some(result) = result.as_object_mut() {
                    if result.contains_key("shareID") {
                        result.insert("shareID".into(), json!(FIXED_SHARE_ID));
                    }
                    if result
                        .get("consumedCapacity")
                        .is_some_and(|c| c == &json!({}))
                    {
                        result.remove("consumedCapacity");
                    }
                }
            }
            results
                .sort_by_key(|r| ["request", "driver", "pool", "device"].map(|k| r[k].to_string()));
        }
    }
    value
}

fn memory_at_least(quantity: &str) -> String {
    format!("device.capacity[\"{DRIVER_A}\"].memory.compareTo(quantity(\"{quantity}\")) >= 0")
}

fn cases() -> Vec<Case> {
    [
        first_block(),
        admin_access_and_nodes(),
        constraints_config_and_errors(),
        prioritized_lists(),
        partitionable_devices(),
        taints(),
        prioritized_all_and_limits(),
        binding_conditions(),
        consumable_capacity(),
        distinct_and_list_attributes(),
        multi_host_and_invalid_pools(),
        combinations(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn first_block() -> Vec<Case> {
    let small_large = || {
        slice(
            SLICE1,
            NODE1,
            (POOL1, 1, 1),
            DRIVER_A,
            vec![device(DEVICE1, Some("1Gi")), device(DEVICE2, Some("2Gi"))],
        )
    };
    let large_small = || {
        slice(
            SLICE1,
            NODE1,
            (POOL1, 1, 1),
            DRIVER_A,
            vec![device(DEVICE2, Some("2Gi")), device(DEVICE1, Some("1Gi"))],
        )
    };
    let (gib1, gib2) = (memory_at_least("1Gi"), memory_at_least("2Gi"));
    let small_and_large_requests = || {
        claim_with_requests(
            CLAIM0,
            vec![
                exact(REQ0, CLASS_A, 1, &[&gib1]),
                exact(REQ1, CLASS_A, 1, &[&gib2]),
            ],
        )
    };
    let both_of = |devices: &[(&str, &str, &str, &str)]| {
        allocation(
            local_node_selector(NODE1),
            devices
                .iter()
                .map(|(r, d, p, dev)| result(r, d, p, dev, false))
                .collect(),
        )
    };
    vec![
        Case {
            name: "empty",
            ..Case::default()
        },
        Case {
            name: "simple",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::Results(vec![both_of(&[(REQ0, DRIVER_A, POOL1, DEVICE1)])]),
            ..Case::default()
        },
        Case {
            name: "other-node",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
                slice_with_one_device(SLICE2, NODE2, POOL2, DRIVER_A),
            ],
            node: node(NODE2, REGION2),
            want: Want::Results(vec![allocation(
                local_node_selector(NODE2),
                vec![result(REQ0, DRIVER_A, POOL2, DEVICE1, false)],
            )]),
            ..Case::default()
        },
        Case {
            name: "small-and-large",
            claims: vec![small_and_large_requests()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![small_large()],
            want: Want::Results(vec![both_of(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                (REQ1, DRIVER_A, POOL1, DEVICE2),
            ])]),
            ..Case::default()
        },
        Case {
            name: "small-and-large-backtrack-requests",
            claims: vec![small_and_large_requests()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![large_small()],
            want: Want::Results(vec![both_of(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                (REQ1, DRIVER_A, POOL1, DEVICE2),
            ])]),
            ..Case::default()
        },
        Case {
            name: "small-and-large-backtrack-claims",
            claims: vec![
                claim_with_requests(CLAIM0, vec![exact(REQ0, CLASS_A, 1, &[&gib1])]),
                claim_with_requests(CLAIM1, vec![exact(REQ1, CLASS_A, 1, &[&gib2])]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![large_small()],
            want: Want::Results(vec![
                both_of(&[(REQ0, DRIVER_A, POOL1, DEVICE1)]),
                both_of(&[(REQ1, DRIVER_A, POOL1, DEVICE2)]),
            ]),
            ..Case::default()
        },
        Case {
            name: "devices-split-across-different-slices",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ0, CLASS_A, 2, &[])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_with_one_device(SLICE2, NODE1, POOL2, DRIVER_A),
            ],
            want: Want::Results(vec![both_of(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                (REQ0, DRIVER_A, POOL2, DEVICE1),
            ])]),
            ..Case::default()
        },
        Case {
            name: "obsolete-slice",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            // The newer generation is incomplete (one of two slices): nothing to allocate.
            slices: vec![
                slice(
                    "slice-1-obsolete",
                    NODE1,
                    (POOL1, 1, 2),
                    DRIVER_A,
                    vec![device(DEVICE1, None)],
                ),
                slice(
                    "slice-1-obsolete",
                    NODE1,
                    (POOL1, 2, 2),
                    DRIVER_A,
                    vec![device(DEVICE2, None)],
                ),
            ],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "duplicate-slice",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 2),
                    DRIVER_A,
                    vec![device(DEVICE1, None)],
                ),
                slice(
                    "slice-1-2",
                    NODE1,
                    (POOL1, 1, 2),
                    DRIVER_A,
                    vec![device(DEVICE1, None)],
                ),
            ],
            want: Want::Error("invalid resource pools were encountered"),
            ..Case::default()
        },
        Case {
            name: "no-slices",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "not-enough-suitable-devices",
            claims: vec![
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                claim_with_request(CLAIM0, REQ1, CLASS_A),
            ],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "no-classes",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::Adapted {
                upstream: "could not retrieve device class class-a",
                ours: "device class class-a does not exist",
            },
            ..Case::default()
        },
        Case {
            name: "unknown-class",
            claims: vec![claim_with_request(CLAIM0, REQ0, "unknown-class")],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::Adapted {
                upstream: "could not retrieve device class unknown-class",
                ours: "device class unknown-class does not exist",
            },
            ..Case::default()
        },
        Case {
            name: "empty-class",
            claims: vec![claim_with_request(CLAIM0, REQ0, "")],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::Error(
                "request req-0: missing device class name (unsupported request type?)",
            ),
            ..Case::default()
        },
        Case {
            name: "no-claims-to-allocate",
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            ..Case::default()
        },
        Case {
            name: "all-devices-single",
            claims: vec![claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::Results(vec![both_of(&[(REQ0, DRIVER_A, POOL1, DEVICE1)])]),
            ..Case::default()
        },
        Case {
            name: "all-devices-many",
            claims: vec![claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_with_one_device(SLICE1, NODE1, POOL2, DRIVER_A),
            ],
            want: Want::Results(vec![both_of(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                (REQ0, DRIVER_A, POOL2, DEVICE1),
            ])]),
            ..Case::default()
        },
        Case {
            name: "all-devices-of-the-incomplete-pool",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    json!({"name": REQ0, "exactly": {"allocationMode": "All", "count": 1, "deviceClassName": CLASS_A}}),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice(
                SLICE1,
                NODE1,
                (POOL1, 1, 2),
                DRIVER_A,
                vec![device(DEVICE1, None)],
            )],
            want: Want::Error(
                "request req-0 asks for all devices, but resource pool driver-a/pool-1 is currently being updated",
            ),
            ..Case::default()
        },
        Case {
            name: "all-devices-plus-another",
            claims: vec![
                claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)]),
                claim_with_requests(CLAIM1, vec![exact(REQ0, CLASS_B, 1, &[])]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
            ],
            want: Want::Results(vec![
                both_of(&[(REQ0, DRIVER_A, POOL1, DEVICE1)]),
                both_of(&[(REQ0, DRIVER_B, POOL1, DEVICE1)]),
            ]),
            ..Case::default()
        },
        Case {
            name: "all-devices-plus-another-reversed",
            claims: vec![
                claim_with_requests(CLAIM1, vec![exact(REQ0, CLASS_B, 1, &[])]),
                claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
            ],
            want: Want::Results(vec![
                both_of(&[(REQ0, DRIVER_B, POOL1, DEVICE1)]),
                both_of(&[(REQ0, DRIVER_A, POOL1, DEVICE1)]),
            ]),
            ..Case::default()
        },
        Case {
            name: "all-devices-many-plus-another",
            claims: vec![
                claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)]),
                claim_with_requests(CLAIM1, vec![exact(REQ0, CLASS_B, 1, &[])]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 1),
                    DRIVER_A,
                    vec![device(DEVICE1, None), device(DEVICE2, None)],
                ),
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
            ],
            want: Want::Results(vec![
                both_of(&[
                    (REQ0, DRIVER_A, POOL1, DEVICE1),
                    (REQ0, DRIVER_A, POOL1, DEVICE2),
                ]),
                both_of(&[(REQ0, DRIVER_B, POOL1, DEVICE1)]),
            ]),
            ..Case::default()
        },
    ]
}

fn two_devices() -> ResourceSlice {
    slice(
        SLICE1,
        NODE1,
        (POOL1, 1, 1),
        DRIVER_A,
        vec![device(DEVICE1, None), device(DEVICE2, None)],
    )
}

fn admin_access_and_nodes() -> Vec<Case> {
    let prioritized_all = || {
        claim_with_requests(
            CLAIM0,
            vec![first(
                REQ0,
                vec![
                    mode_all(sub(SUB0, CLASS_A, 1, &[])),
                    sub(SUB1, CLASS_B, 1, &[]),
                ],
            )],
        )
    };
    let held_device1 = || vec![allocated(&[(DRIVER_A, POOL1, DEVICE1)])];
    vec![
        Case {
            name: "all-devices-many-plus-another-reversed",
            claims: vec![
                claim_with_requests(CLAIM1, vec![exact(REQ0, CLASS_B, 1, &[])]),
                claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                two_devices(),
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
            ],
            want: Want::Results(vec![
                on_node1(&[(REQ0, DRIVER_B, POOL1, DEVICE1)]),
                on_node1(&[
                    (REQ0, DRIVER_A, POOL1, DEVICE1),
                    (REQ0, DRIVER_A, POOL1, DEVICE2),
                ]),
            ]),
            ..Case::default()
        },
        Case {
            name: "all-devices-no-solution",
            claims: vec![
                claim_with_requests(CLAIM1, vec![exact(REQ0, CLASS_A, 1, &[])]),
                claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "all-devices-no-solution-reversed",
            claims: vec![
                claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)]),
                claim_with_requests(CLAIM1, vec![exact(REQ0, CLASS_A, 1, &[])]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "all-devices-slice-without-devices",
            claims: vec![claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice(SLICE1, NODE1, (POOL1, 1, 1), DRIVER_A, vec![])],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "all-devices-no-slices",
            claims: vec![claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "all-devices-some-allocated",
            claims: vec![claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)])],
            allocated: held_device1(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![two_devices()],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "all-devices-some-allocated-admin-access",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![admin(mode_all(exact(REQ0, CLASS_A, 1, &[])))],
            )],
            allocated: held_device1(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![two_devices()],
            want: Want::Results(vec![allocation(
                local_node_selector(NODE1),
                vec![
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, true),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2, true),
                ],
            )]),
            ..Case::default()
        },
        Case {
            name: "all-devices-some-allocating-admin-access",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    admin(exact(REQ0, CLASS_A, 1, &[])),
                    admin(mode_all(exact(REQ1, CLASS_A, 1, &[]))),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![two_devices()],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "count-devices-some-allocated-admin-access",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![admin(exact(REQ0, CLASS_A, 2, &[]))],
            )],
            allocated: held_device1(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![two_devices()],
            want: Want::Results(vec![allocation(
                local_node_selector(NODE1),
                vec![
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, true),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2, true),
                ],
            )]),
            ..Case::default()
        },
        Case {
            name: "separate-claims-share-device-admin-access",
            claims: vec![
                claim_with_requests(CLAIM0, vec![admin(exact(REQ0, CLASS_A, 1, &[]))]),
                claim_with_requests(CLAIM1, vec![admin(exact(REQ0, CLASS_A, 1, &[]))]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![two_devices()],
            want: Want::Results(vec![
                allocation(
                    local_node_selector(NODE1),
                    vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
                ),
                allocation(
                    local_node_selector(NODE1),
                    vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
                ),
            ]),
            ..Case::default()
        },
        Case {
            name: "admin-access-claims-device-allocating-for-non-admin-access",
            claims: vec![
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                claim_with_requests(CLAIM1, vec![admin(exact(REQ0, CLASS_A, 1, &[]))]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![two_devices()],
            want: Want::Results(vec![
                on_node1(&[(REQ0, DRIVER_A, POOL1, DEVICE1)]),
                allocation(
                    local_node_selector(NODE1),
                    vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
                ),
            ]),
            ..Case::default()
        },
        Case {
            name: "all-devices-slice-without-devices-prioritized-list",
            claims: vec![prioritized_all()],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice(SLICE1, NODE1, (POOL1, 1, 1), DRIVER_A, vec![]),
                slice_with_one_device(SLICE2, NODE1, POOL2, DRIVER_B),
            ],
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_B,
                POOL2,
                DEVICE1,
            )])]),
            ..Case::default()
        },
        Case {
            name: "all-devices-no-slices-prioritized-list",
            claims: vec![prioritized_all()],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![slice_with_one_device(SLICE2, NODE1, POOL2, DRIVER_B)],
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_B,
                POOL2,
                DEVICE1,
            )])]),
            ..Case::default()
        },
        Case {
            name: "all-devices-some-allocated-prioritized-list",
            claims: vec![prioritized_all()],
            allocated: held_device1(),
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                two_devices(),
                slice_with_one_device(SLICE2, NODE1, POOL2, DRIVER_B),
            ],
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_B,
                POOL2,
                DEVICE1,
            )])]),
            ..Case::default()
        },
        Case {
            name: "network-attached-device",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_at(
                SLICE1,
                selected(label_selector("region", REGION1)),
                (POOL1, 1, 1),
                DRIVER_A,
                vec![device(DEVICE1, None)],
            )],
            want: Want::Results(vec![allocation(
                label_selector("region", REGION1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            )]),
            ..Case::default()
        },
        Case {
            name: "unsuccessful-allocation-network-attached-device",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_at(
                SLICE1,
                selected(label_selector("region", REGION1)),
                (POOL1, 1, 1),
                DRIVER_A,
                vec![device(DEVICE1, None)],
            )],
            node: node(NODE2, REGION2),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "many-network-attached-devices",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ0, CLASS_A, 4, &[])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_at(
                    SLICE1,
                    selected(label_selector("region", REGION1)),
                    (POOL1, 1, 1),
                    DRIVER_A,
                    vec![device(DEVICE1, None)],
                ),
                slice_at(
                    SLICE1,
                    all_nodes(),
                    (POOL2, 1, 1),
                    DRIVER_A,
                    vec![device(DEVICE1, None)],
                ),
                slice_at(
                    SLICE1,
                    selected(label_selector("planet", "earth")),
                    (POOL3, 1, 1),
                    DRIVER_A,
                    vec![device(DEVICE1, None)],
                ),
                slice_at(
                    SLICE1,
                    selected(local_node_selector(NODE1)),
                    (POOL4, 1, 1),
                    DRIVER_A,
                    vec![device(DEVICE1, None)],
                ),
            ],
            // The intersection of the individual selectors, as one term.
            want: Want::Results(vec![allocation(
                json!({"nodeSelectorTerms": [{
                    "matchExpressions": [
                        {"key": "region", "operator": "In", "values": [REGION1]},
                        {"key": "planet", "operator": "In", "values": ["earth"]}],
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [NODE1]}]}]}),
                [POOL1, POOL2, POOL3, POOL4]
                    .iter()
                    .map(|pool| result(REQ0, DRIVER_A, pool, DEVICE1, false))
                    .collect(),
            )]),
            ..Case::default()
        },
        Case {
            name: "local-and-network-attached-devices",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ0, CLASS_A, 2, &[])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_at(
                    SLICE1,
                    selected(label_selector("region", REGION1)),
                    (POOL1, 1, 1),
                    DRIVER_A,
                    vec![device(DEVICE1, None)],
                ),
                slice_with_one_device(SLICE1, NODE1, POOL2, DRIVER_A),
            ],
            // Once there is any node-local device, the selector is for that node.
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                (REQ0, DRIVER_A, POOL2, DEVICE1),
            ])]),
            ..Case::default()
        },
        Case {
            name: "several-different-drivers",
            claims: vec![
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                claim_with_request(CLAIM0, REQ0, CLASS_B),
            ],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                two_devices(),
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
            ],
            want: Want::Results(vec![
                on_node1(&[(REQ0, DRIVER_A, POOL1, DEVICE1)]),
                on_node1(&[(REQ0, DRIVER_B, POOL1, DEVICE1)]),
            ]),
            ..Case::default()
        },
        Case {
            name: "already-allocated-devices",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            allocated: vec![allocated(&[
                (DRIVER_A, POOL1, DEVICE1),
                (DRIVER_A, POOL1, DEVICE2),
            ])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "admin-access-disabled",
            want: Want::Skip(
                "DRAAdminAccess is beta, on by default in 1.34; the case needs it off",
            ),
            ..Case::default()
        },
        Case {
            name: "admin-access-enabled",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![admin(exact(REQ0, CLASS_A, 1, &[]))],
            )],
            allocated: vec![allocated(&[
                (DRIVER_A, POOL1, DEVICE1),
                (DRIVER_A, POOL1, DEVICE2),
            ])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::Results(vec![allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
            )]),
            ..Case::default()
        },
    ]
}

const INT_ATTRIBUTE: &str = "driver-a/numa";
const VERSION_ATTRIBUTE: &str = "driver-a/driverVersion";
const STRING_ATTRIBUTE: &str = "driver-a/stringAttribute";
const BOOL_ATTRIBUTE: &str = "driver-a/boolAttribute";

fn with_attributes(name: &str, attributes: Value) -> Value {
    dev(name, json!({"attributes": attributes}))
}

/// One slice on node-1 in pool-1 of driver-a.
fn pool1_of(devices: Vec<Value>) -> Vec<ResourceSlice> {
    vec![slice(SLICE1, NODE1, (POOL1, 1, 1), DRIVER_A, devices)]
}

/// `count` devices of one request, all devices matching on `attribute` but for its two values.
fn not_matching(name: &'static str, attribute: &str, key: &str, values: [Value; 2]) -> Case {
    let [one, two] = values;
    Case {
        name,
        claims: vec![claim_with_constraints(
            CLAIM0,
            json!([{"matchAttribute": attribute}]),
            vec![exact(REQ0, CLASS_A, 2, &[])],
        )],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: pool1_of(vec![
            with_attributes(DEVICE1, json!({key: one})),
            with_attributes(DEVICE2, json!({key: two})),
        ]),
        want: Want::NoFit,
        ..Case::default()
    }
}

fn with_invalid_selector(mut claim: ResourceClaim, selector: Value) -> ResourceClaim {
    if let Some(request) = claim
        .spec
        .devices
        .as_mut()
        .and_then(|d| d.requests.as_mut())
        .and_then(|r| r.first_mut())
        .and_then(|r| r.exactly.as_mut())
    {
        request.selectors = Some(vec![serde_json::from_value(selector).expect("selector")]);
    }
    claim
}

fn constraints_config_and_errors() -> Vec<Case> {
    let all_four = || {
        json!({"driverVersion": {"version": "1.0.0"}, "numa": {"int": 1},
            "stringAttribute": {"string": "stringAttributeValue"}, "boolAttribute": {"bool": true}})
    };
    let versions = || {
        pool1_of(vec![
            with_attributes(DEVICE1, json!({"driverVersion": {"version": "1.0.0"}})),
            with_attributes(DEVICE2, json!({"driverVersion": {"version": "2.0.0"}})),
        ])
    };
    let simple = || {
        (
            vec![class(CLASS_A, DRIVER_A)],
            vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        )
    };
    vec![
        Case {
            name: "with-constraint",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([{"matchAttribute": INT_ATTRIBUTE}, {"matchAttribute": VERSION_ATTRIBUTE},
                    {"matchAttribute": STRING_ATTRIBUTE}, {"matchAttribute": BOOL_ATTRIBUTE}]),
                vec![exact(REQ0, CLASS_A, 1, &[]), exact(REQ1, CLASS_A, 1, &[])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![
                with_attributes(DEVICE1, all_four()),
                with_attributes(DEVICE2, all_four()),
            ]),
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                (REQ1, DRIVER_A, POOL1, DEVICE2),
            ])]),
            ..Case::default()
        },
        Case {
            name: "with-constraint-non-existent-attribute",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([{"matchAttribute": "driver-a/NonExistentAttribute"}]),
                vec![exact(REQ0, CLASS_A, 1, &[])],
            )],
            classes: simple().0,
            slices: simple().1,
            want: Want::NoFit,
            ..Case::default()
        },
        not_matching(
            "with-constraint-not-matching-int-attribute",
            INT_ATTRIBUTE,
            "numa",
            [json!({"int": 1}), json!({"int": 2})],
        ),
        Case {
            name: "with-constraint-not-matching-int-attribute-all-devices",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([{"matchAttribute": INT_ATTRIBUTE}]),
                vec![all(REQ0, CLASS_A)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: pool1_of(vec![
                with_attributes(DEVICE1, json!({"numa": {"int": 1}})),
                with_attributes(DEVICE2, json!({"numa": {"int": 2}})),
            ]),
            want: Want::Error(
                "request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied",
            ),
            ..Case::default()
        },
        not_matching(
            "with-constraint-not-matching-string-attribute",
            STRING_ATTRIBUTE,
            "stringAttribute",
            [
                json!({"string": "stringAttributeValue"}),
                json!({"string": "stringAttributeValue2"}),
            ],
        ),
        not_matching(
            "with-constraint-not-matching-bool-attribute",
            BOOL_ATTRIBUTE,
            "boolAttribute",
            [json!({"bool": true}), json!({"bool": false})],
        ),
        not_matching(
            "with-constraint-not-matching-version-attribute",
            VERSION_ATTRIBUTE,
            "driverVersion",
            [json!({"version": "1.0.0"}), json!({"version": "2.0.0"})],
        ),
        Case {
            name: "with-constraint-for-request",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([{"requests": [REQ0], "matchAttribute": VERSION_ATTRIBUTE}]),
                vec![exact(REQ0, CLASS_A, 1, &[]), exact(REQ1, CLASS_A, 1, &[])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: versions(),
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                (REQ1, DRIVER_A, POOL1, DEVICE2),
            ])]),
            ..Case::default()
        },
        Case {
            name: "with-constraint-for-request-retry",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([{"requests": [REQ0], "matchAttribute": VERSION_ATTRIBUTE},
                    {"matchAttribute": STRING_ATTRIBUTE}]),
                vec![exact(REQ0, CLASS_A, 1, &[]), exact(REQ1, CLASS_A, 1, &[])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            // device-1 does not satisfy the second constraint: the allocator must backtrack.
            slices: pool1_of(vec![
                with_attributes(
                    DEVICE1,
                    json!({"driverVersion": {"version": "1.0.0"}, "stringAttribute": {"string": "a"}}),
                ),
                with_attributes(
                    DEVICE2,
                    json!({"driverVersion": {"version": "2.0.0"}, "stringAttribute": {"string": "b"}}),
                ),
                with_attributes(
                    DEVICE3,
                    json!({"driverVersion": {"version": "3.0.0"}, "stringAttribute": {"string": "b"}}),
                ),
            ]),
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE2),
                (REQ1, DRIVER_A, POOL1, DEVICE3),
            ])]),
            ..Case::default()
        },
        Case {
            name: "with-class-device-config",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class_with_config(CLASS_A, DRIVER_A, "classAttribute")],
            slices: simple().1,
            want: Want::Results(vec![allocation_with_config(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
                json!([{"source": "FromClass", "requests": [REQ0],
                    "opaque": device_configuration(DRIVER_A, "classAttribute")["opaque"]}]),
            )]),
            ..Case::default()
        },
        Case {
            name: "with-class-device-config-with-multiple-request-and-configs",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([]),
                vec![
                    exact(REQ0, CLASS_A, 1, &[]),
                    exact(REQ1, CLASS_A, 1, &[]),
                    exact(REQ2, CLASS_B, 1, &[]),
                ],
            )],
            classes: vec![
                class_with_config(CLASS_A, DRIVER_A, "classAttribute-A"),
                class_with_config(CLASS_B, DRIVER_B, "classAttribute-B"),
            ],
            slices: vec![
                slice(SLICE1, NODE1, (POOL1, 1, 1), DRIVER_A, numbered_devices(2)),
                slice_with_one_device(SLICE2, NODE1, POOL1, DRIVER_B),
            ],
            want: Want::Results(vec![allocation_with_config(
                local_node_selector(NODE1),
                vec![
                    result(REQ0, DRIVER_A, POOL1, DEVICE0, false),
                    result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
                    result(REQ2, DRIVER_B, POOL1, DEVICE1, false),
                ],
                json!([
                    {"source": "FromClass", "requests": [REQ0, REQ1],
                        "opaque": device_configuration(DRIVER_A, "classAttribute-A")["opaque"]},
                    {"source": "FromClass", "requests": [REQ2],
                        "opaque": device_configuration(DRIVER_B, "classAttribute-B")["opaque"]},
                ]),
            )]),
            ..Case::default()
        },
        Case {
            name: "claim-with-device-config",
            claims: vec![claim_json(
                CLAIM0,
                json!({"requests": [exact(REQ0, CLASS_A, 1, &[])],
                    "config": [device_configuration(DRIVER_A, "deviceAttribute")]}),
            )],
            classes: simple().0,
            slices: simple().1,
            want: Want::Results(vec![allocation_with_config(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
                json!([{"source": "FromClaim",
                    "opaque": device_configuration(DRIVER_A, "deviceAttribute")["opaque"]}]),
            )]),
            ..Case::default()
        },
        Case {
            name: "unknown-selector",
            claims: vec![with_invalid_selector(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                json!({}),
            )],
            classes: simple().0,
            slices: simple().1,
            want: Want::Error("CEL expression empty (unsupported selector type?)"),
            ..Case::default()
        },
        Case {
            name: "unknown-allocation-mode",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    json!({"name": REQ0, "exactly": {"allocationMode": "future-mode",
                    "count": 1, "deviceClassName": CLASS_A}}),
                ],
            )],
            classes: simple().0,
            slices: simple().1,
            want: Want::Error("unsupported count mode future-mode"),
            ..Case::default()
        },
        Case {
            name: "unknown-constraint",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([{}]),
                vec![exact(REQ0, CLASS_A, 1, &[])],
            )],
            classes: simple().0,
            slices: simple().1,
            want: Want::Error("empty constraint (unsupported constraint type?)"),
            ..Case::default()
        },
        Case {
            name: "invalid-CEL-one-device",
            claims: vec![with_invalid_selector(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                cel("noSuchVar"),
            )],
            classes: simple().0,
            slices: simple().1,
            want: Want::Error("undeclared reference"),
            ..Case::default()
        },
        Case {
            name: "invalid-CEL-one-device-class",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class_with(CLASS_A, "noSuchVar".into(), None)],
            slices: simple().1,
            want: Want::Error("undeclared reference"),
            ..Case::default()
        },
        Case {
            name: "invalid-CEL-all-devices",
            claims: vec![with_invalid_selector(
                claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)]),
                cel("noSuchVar"),
            )],
            classes: simple().0,
            slices: simple().1,
            want: Want::Error("undeclared reference"),
            ..Case::default()
        },
        Case {
            name: "too-many-devices-single-request",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ0, CLASS_A, 500, &[])],
            )],
            classes: simple().0,
            want: Want::Error("exceeds the claim limit"),
            ..Case::default()
        },
        Case {
            name: "many-devices-okay",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ0, CLASS_A, MAX, &[])],
            )],
            classes: simple().0,
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "too-many-devices-total",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ0, CLASS_A, MAX, &[]), exact(REQ1, CLASS_A, 1, &[])],
            )],
            classes: simple().0,
            slices: vec![slice(
                SLICE1,
                NODE1,
                (POOL1, 1, 1),
                DRIVER_A,
                numbered_devices(MAX + 1),
            )],
            want: Want::Error("exceeds the claim limit"),
            ..Case::default()
        },
        Case {
            name: "all-devices-invalid-CEL",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ0, CLASS_A, 500, &[])],
            )],
            classes: simple().0,
            want: Want::Error("exceeds the claim limit"),
            ..Case::default()
        },
    ]
}

fn memory_devices(devices: &[(&str, &str, &str)]) -> Vec<Value> {
    devices
        .iter()
        .map(|(name, memory, version)| {
            let mut device = device(name, Some(memory));
            if !version.is_empty() {
                device["attributes"] = json!({"driverVersion": {"version": version}});
            }
            device
        })
        .collect()
}

fn prioritized_lists() -> Vec<Case> {
    let (gib1, gib2, gib4, gib8) = (
        memory_at_least("1Gi"),
        memory_at_least("2Gi"),
        memory_at_least("4Gi"),
        memory_at_least("8Gi"),
    );
    let both_classes = || vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)];
    let eight_and_four = || {
        vec![
            slice(
                SLICE1,
                NODE1,
                (POOL1, 1, 1),
                DRIVER_A,
                memory_devices(&[(DEVICE1, "8Gi", "")]),
            ),
            slice(
                SLICE2,
                NODE1,
                (POOL2, 1, 1),
                DRIVER_A,
                memory_devices(&[(DEVICE2, "4Gi", "")]),
            ),
        ]
    };
    let constrained = |constrained: &str| {
        claim_with_constraints(
            CLAIM0,
            json!([{"requests": [REQ0, constrained], "matchAttribute": VERSION_ATTRIBUTE}]),
            vec![
                exact(REQ0, CLASS_A, 1, &[&gib8]),
                first(
                    REQ1,
                    vec![
                        sub(SUB0, CLASS_A, 1, &[&gib2]),
                        sub(SUB1, CLASS_A, 1, &[&gib1]),
                    ],
                ),
            ],
        )
    };
    vec![
        Case {
            name: "prioritized-list-first-unavailable",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(
                    REQ0,
                    vec![sub(SUB0, CLASS_B, 1, &[]), sub(SUB1, CLASS_A, 1, &[])],
                )],
            )],
            classes: both_classes(),
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_A,
                POOL1,
                DEVICE1,
            )])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-non-available",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(
                    REQ0,
                    vec![sub(SUB0, CLASS_B, 2, &[]), sub(SUB1, CLASS_A, 2, &[])],
                )],
            )],
            classes: both_classes(),
            slices: vec![
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_with_one_device(SLICE2, NODE1, POOL2, DRIVER_B),
            ],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "prioritized-list-device-config",
            claims: vec![claim_json(
                CLAIM0,
                json!({"requests": [first(REQ0, vec![sub(SUB0, CLASS_A, 1, &[]), sub(SUB1, CLASS_B, 2, &[])])],
                    "config": [
                        {"requests": ["req-0/subReq-0"], "opaque": device_configuration(DRIVER_A, "foo")["opaque"]},
                        {"requests": ["req-0/subReq-1"], "opaque": device_configuration(DRIVER_B, "bar")["opaque"]}]}),
            )],
            classes: both_classes(),
            slices: vec![slice(
                SLICE1,
                NODE1,
                (POOL1, 1, 1),
                DRIVER_B,
                vec![
                    dev(DEVICE1, json!({"attributes": {}})),
                    dev(DEVICE2, json!({"attributes": {}})),
                ],
            )],
            want: Want::Results(vec![allocation_with_config(
                local_node_selector(NODE1),
                vec![
                    result("req-0/subReq-1", DRIVER_B, POOL1, DEVICE1, false),
                    result("req-0/subReq-1", DRIVER_B, POOL1, DEVICE2, false),
                ],
                json!([{"source": "FromClaim", "requests": ["req-0/subReq-1"],
                    "opaque": device_configuration(DRIVER_B, "bar")["opaque"]}]),
            )]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-class-config",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(
                    REQ0,
                    vec![sub(SUB0, CLASS_A, 2, &[]), sub(SUB1, CLASS_B, 2, &[])],
                )],
            )],
            classes: vec![
                class_with_config(CLASS_A, DRIVER_A, "foo"),
                class_with_config(CLASS_B, DRIVER_B, "bar"),
            ],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 1),
                    DRIVER_B,
                    vec![device(DEVICE1, None), device(DEVICE2, None)],
                ),
                slice(
                    SLICE2,
                    NODE1,
                    (POOL2, 1, 1),
                    DRIVER_A,
                    vec![device(DEVICE3, None)],
                ),
            ],
            want: Want::Results(vec![allocation_with_config(
                local_node_selector(NODE1),
                vec![
                    result("req-0/subReq-1", DRIVER_B, POOL1, DEVICE1, false),
                    result("req-0/subReq-1", DRIVER_B, POOL1, DEVICE2, false),
                ],
                json!([{"source": "FromClass", "requests": ["req-0/subReq-1"],
                    "opaque": device_configuration(DRIVER_B, "bar")["opaque"]}]),
            )]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-subrequests-with-expressions",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    exact(REQ0, CLASS_A, 1, &[&gib1]),
                    first(
                        REQ1,
                        vec![
                            sub(SUB0, CLASS_A, 1, &[&gib4]),
                            sub(SUB1, CLASS_A, 2, &[&gib2]),
                        ],
                    ),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(memory_devices(&[
                (DEVICE1, "2Gi", ""),
                (DEVICE2, "2Gi", ""),
                (DEVICE3, "1Gi", ""),
            ])),
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE3),
                ("req-1/subReq-1", DRIVER_A, POOL1, DEVICE1),
                ("req-1/subReq-1", DRIVER_A, POOL1, DEVICE2),
            ])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-subrequests-with-constraints-ref-parent-request",
            claims: vec![constrained(REQ1)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 1),
                    DRIVER_A,
                    memory_devices(&[(DEVICE1, "8Gi", "1.0.0")]),
                ),
                slice(
                    SLICE2,
                    NODE1,
                    (POOL2, 1, 1),
                    DRIVER_A,
                    memory_devices(&[(DEVICE2, "2Gi", "2.0.0"), (DEVICE3, "1Gi", "1.0.0")]),
                ),
            ],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                ("req-1/subReq-1", DRIVER_A, POOL2, DEVICE3),
            ])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-subrequests-with-constraints-ref-sub-request",
            claims: vec![constrained("req-1/subReq-0")],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 1),
                    DRIVER_A,
                    memory_devices(&[(DEVICE1, "8Gi", "1.0.0")]),
                ),
                slice(
                    SLICE2,
                    NODE1,
                    (POOL2, 1, 1),
                    DRIVER_A,
                    memory_devices(&[(DEVICE2, "2Gi", "2.0.0")]),
                ),
            ],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                ("req-1/subReq-1", DRIVER_A, POOL2, DEVICE2),
            ])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-subrequests-with-allocation-mode-all",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(
                    REQ0,
                    vec![
                        mode_all(sub(SUB0, CLASS_A, 1, &[])),
                        sub(SUB1, CLASS_A, 1, &[]),
                    ],
                )],
            )],
            allocated: vec![allocated(&[(DRIVER_A, POOL1, DEVICE1)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![two_devices()],
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_A,
                POOL1,
                DEVICE2,
            )])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-allocation-mode-all-multiple-requests",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    exact(REQ0, CLASS_A, 1, &[]),
                    first(
                        REQ1,
                        vec![
                            mode_all(sub(SUB0, CLASS_A, 0, &[])),
                            sub(SUB1, CLASS_A, 1, &[]),
                        ],
                    ),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![two_devices()],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                ("req-1/subReq-1", DRIVER_A, POOL1, DEVICE2),
            ])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-disabled",
            want: Want::Skip(
                "DRAPrioritizedList is beta, on by default in 1.34; the case needs it off",
            ),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-multi-request",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    exact(REQ1, CLASS_A, 1, &[&gib8]),
                    first(
                        REQ0,
                        vec![
                            sub(SUB0, CLASS_A, 1, &[&gib8]),
                            sub(SUB1, CLASS_A, 1, &[&gib4]),
                        ],
                    ),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: eight_and_four(),
            want: Want::Results(vec![on_node1(&[
                (REQ1, DRIVER_A, POOL1, DEVICE1),
                ("req-0/subReq-1", DRIVER_A, POOL2, DEVICE2),
            ])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-with-backtracking",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    first(
                        REQ0,
                        vec![
                            sub(SUB0, CLASS_A, 1, &[&gib8]),
                            sub(SUB1, CLASS_A, 1, &[&gib4]),
                        ],
                    ),
                    exact(REQ1, CLASS_A, 1, &[&gib8]),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: eight_and_four(),
            want: Want::Results(vec![on_node1(&[
                ("req-0/subReq-1", DRIVER_A, POOL2, DEVICE2),
                (REQ1, DRIVER_A, POOL1, DEVICE1),
            ])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-too-many-in-first-subrequest",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(
                    REQ0,
                    vec![sub(SUB0, CLASS_B, 500, &[]), sub(SUB1, CLASS_A, 1, &[])],
                )],
            )],
            classes: both_classes(),
            slices: vec![slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_A,
                POOL1,
                DEVICE1,
            )])]),
            ..Case::default()
        },
    ]
}

/// A partition consuming `memory` of counter-set-1, capacity from its counters.
fn memory_partition(name: &str, memory: &str) -> Value {
    partition(
        name,
        vec![consumes(COUNTER_SET1, &[("memory", memory)])],
        true,
    )
}

/// The counter slice of pool (name, 1, 2) on node-1 with counter-set-1 of `memory`.
fn memory_counters(name: &str, pool: (&str, i64, i64), memory: &str) -> ResourceSlice {
    counter_slice(
        name,
        on(NODE1),
        pool,
        DRIVER_A,
        vec![counter_set(COUNTER_SET1, &[("memory", memory)])],
    )
}

fn partitionable_devices() -> Vec<Case> {
    let (gib4, gib6) = (memory_at_least("4Gi"), memory_at_least("6Gi"));
    let two_of_pool1 = (POOL1, 1, 2);
    let three_partitions = || {
        slice(
            SLICE1,
            NODE1,
            two_of_pool1,
            DRIVER_A,
            vec![
                memory_partition(DEVICE1, "4Gi"),
                memory_partition(DEVICE2, "6Gi"),
                memory_partition(DEVICE3, "4Gi"),
            ],
        )
    };
    let req0_and_first_of_6_or_4 = || {
        claim_with_requests(
            CLAIM0,
            vec![
                exact(REQ0, CLASS_A, 1, &[]),
                first(
                    REQ1,
                    vec![
                        sub(SUB0, CLASS_A, 1, &[&gib6]),
                        sub(SUB1, CLASS_A, 1, &[&gib4]),
                    ],
                ),
            ],
        )
    };
    let two_requests = || {
        claim_with_requests(
            CLAIM0,
            vec![exact(REQ0, CLASS_A, 1, &[]), exact(REQ1, CLASS_A, 1, &[])],
        )
    };
    let cpus_and_memory = |name: &str, cpus: &str, memory: &str| {
        partition(
            name,
            vec![consumes(
                COUNTER_SET1,
                &[("cpus", cpus), ("memory", memory)],
            )],
            true,
        )
    };
    vec![
        Case {
            name: "partitionable-devices-single-device",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    two_of_pool1,
                    DRIVER_A,
                    vec![partition(
                        DEVICE1,
                        vec![consumes(COUNTER_SET1, &[("memory", "4Gi")])],
                        false,
                    )],
                ),
                memory_counters(SLICE2, two_of_pool1, "8Gi"),
            ],
            want: Want::Results(vec![on_node1(&[(REQ0, DRIVER_A, POOL1, DEVICE1)])]),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-prioritized-list",
            claims: vec![req0_and_first_of_6_or_4()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                three_partitions(),
                memory_counters(SLICE2, two_of_pool1, "8Gi"),
            ],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                ("req-1/subReq-1", DRIVER_A, POOL1, DEVICE3),
            ])]),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-multiple-devices",
            claims: vec![two_requests()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                three_partitions(),
                memory_counters(SLICE2, two_of_pool1, "8Gi"),
            ],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                (REQ1, DRIVER_A, POOL1, DEVICE3),
            ])]),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-multiple-capacity-pools",
            claims: vec![req0_and_first_of_6_or_4()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    two_of_pool1,
                    DRIVER_A,
                    [
                        (DEVICE1, "4Gi", "4"),
                        (DEVICE2, "6Gi", "6"),
                        (DEVICE3, "4Gi", "4"),
                    ]
                    .iter()
                    .map(|(name, memory, cpus)| {
                        partition(
                            name,
                            vec![
                                consumes(COUNTER_SET1, &[("memory", memory)]),
                                consumes(COUNTER_SET2, &[("cpus", cpus)]),
                            ],
                            true,
                        )
                    })
                    .collect(),
                ),
                counter_slice(
                    SLICE2,
                    on(NODE1),
                    two_of_pool1,
                    DRIVER_A,
                    vec![
                        counter_set(COUNTER_SET1, &[("memory", "18Gi")]),
                        counter_set(COUNTER_SET2, &[("cpus", "8")]),
                    ],
                ),
            ],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                ("req-1/subReq-1", DRIVER_A, POOL1, DEVICE3),
            ])]),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-multiple-counters",
            claims: vec![two_requests()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    two_of_pool1,
                    DRIVER_A,
                    [
                        (DEVICE1, ("4Gi", "6"), ("4", "2Gi")),
                        (DEVICE2, ("6Gi", "4"), ("6", "6Gi")),
                        (DEVICE3, ("4Gi", "4"), ("4", "4Gi")),
                    ]
                    .iter()
                    .map(|(name, (memory1, cpus1), (cpus2, memory2))| {
                        partition(
                            name,
                            vec![
                                consumes(COUNTER_SET1, &[("memory", memory1), ("cpus", cpus1)]),
                                consumes(COUNTER_SET2, &[("cpus", cpus2), ("memory", memory2)]),
                            ],
                            true,
                        )
                    })
                    .collect(),
                ),
                counter_slice(
                    SLICE2,
                    on(NODE1),
                    two_of_pool1,
                    DRIVER_A,
                    vec![
                        counter_set(COUNTER_SET1, &[("cpus", "8"), ("memory", "18Gi")]),
                        counter_set(COUNTER_SET2, &[("cpus", "12"), ("memory", "18Gi")]),
                    ],
                ),
            ],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE2),
                (REQ1, DRIVER_A, POOL1, DEVICE3),
            ])]),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-multiple-pools",
            claims: vec![two_requests()],
            allocated: vec![allocated(&[
                (DRIVER_A, POOL1, DEVICE2),
                (DRIVER_A, POOL1, DEVICE3),
                (DRIVER_A, POOL2, DEVICE1),
            ])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    two_of_pool1,
                    DRIVER_A,
                    vec![
                        cpus_and_memory(DEVICE1, "6", "4Gi"),
                        cpus_and_memory(DEVICE2, "4", "6Gi"),
                        cpus_and_memory(DEVICE3, "4", "4Gi"),
                    ],
                ),
                counter_slice(
                    SLICE2,
                    on(NODE1),
                    two_of_pool1,
                    DRIVER_A,
                    vec![counter_set(
                        COUNTER_SET1,
                        &[("cpus", "8"), ("memory", "18Gi")],
                    )],
                ),
                slice(
                    SLICE3,
                    NODE1,
                    (POOL2, 1, 2),
                    DRIVER_A,
                    vec![
                        cpus_and_memory(DEVICE1, "6", "4Gi"),
                        cpus_and_memory(DEVICE2, "1", "7Gi"),
                        cpus_and_memory(DEVICE3, "1", "7Gi"),
                    ],
                ),
                counter_slice(
                    SLICE4,
                    on(NODE1),
                    (POOL2, 1, 2),
                    DRIVER_A,
                    vec![counter_set(
                        COUNTER_SET1,
                        &[("cpus", "8"), ("memory", "18Gi")],
                    )],
                ),
            ],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL2, DEVICE2),
                (REQ1, DRIVER_A, POOL2, DEVICE3),
            ])]),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-unused-counters-in-counter-set",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ0, CLASS_A, 2, &[])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    two_of_pool1,
                    DRIVER_A,
                    [(DEVICE1, "5Gi"), (DEVICE2, "4Gi"), (DEVICE3, "4Gi")]
                        .iter()
                        .map(|(name, memory)| {
                            partition(
                                name,
                                vec![consumes(COUNTER_SET1, &[("memory", memory)])],
                                false,
                            )
                        })
                        .collect(),
                ),
                counter_slice(
                    SLICE2,
                    on(NODE1),
                    two_of_pool1,
                    DRIVER_A,
                    vec![counter_set(
                        COUNTER_SET1,
                        &[("memory", "8Gi"), ("unused", "1Gi")],
                    )],
                ),
            ],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE2),
                (REQ0, DRIVER_A, POOL1, DEVICE3),
            ])]),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-no-capacity-available",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            allocated: vec![allocated(&[(DRIVER_A, POOL1, DEVICE2)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 1),
                    DRIVER_A,
                    vec![
                        memory_partition(DEVICE1, "4Gi"),
                        memory_partition(DEVICE2, "16Gi"),
                    ],
                ),
                memory_counters(SLICE2, (POOL1, 1, 1), "18Gi"),
            ],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-overallocated-capacity-pool",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            allocated: vec![allocated(&[(DRIVER_A, POOL1, DEVICE2)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 1),
                    DRIVER_A,
                    vec![
                        memory_partition(DEVICE1, "4Gi"),
                        memory_partition(DEVICE2, "20Gi"),
                    ],
                ),
                memory_counters(SLICE2, (POOL1, 1, 1), "18Gi"),
            ],
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-disabled-device-consumes-counters",
            want: Want::Skip(ALWAYS_ON),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-disabled-other-device-do-not-consume-counters",
            want: Want::Skip(ALWAYS_ON),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-disabled-per-device-node-selection",
            want: Want::Skip(ALWAYS_ON),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-per-device-node-selection-nodename",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(
                    REQ0,
                    vec![
                        sub(SUB0, CLASS_A, 1, &[&gib6]),
                        sub(SUB1, CLASS_A, 1, &[&gib4]),
                    ],
                )],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_at(
                    SLICE1,
                    per_device(),
                    two_of_pool1,
                    DRIVER_A,
                    vec![
                        dev(
                            DEVICE1,
                            json!({"nodeName": NODE1, "consumesCounters": [consumes(COUNTER_SET1, &[("memory", "4Gi")])],
                        "capacity": quantities(&[("memory", "4Gi")])}),
                        ),
                        dev(
                            DEVICE2,
                            json!({"nodeName": NODE2, "consumesCounters": [consumes(COUNTER_SET1, &[("memory", "6Gi")])],
                        "capacity": quantities(&[("memory", "6Gi")])}),
                        ),
                    ],
                ),
                counter_slice(
                    SLICE2,
                    per_device(),
                    two_of_pool1,
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, &[("memory", "18Gi")])],
                ),
            ],
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_A,
                POOL1,
                DEVICE1,
            )])]),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-per-device-node-selection-node-selector",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_at(
                    SLICE1,
                    per_device(),
                    two_of_pool1,
                    DRIVER_A,
                    vec![dev(
                        DEVICE1,
                        json!({"nodeSelector": label_selector("region", REGION1),
                        "consumesCounters": [consumes(COUNTER_SET1, &[("memory", "4Gi")])],
                        "capacity": quantities(&[("memory", "4Gi")])}),
                    )],
                ),
                counter_slice(
                    SLICE2,
                    per_device(),
                    two_of_pool1,
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, &[("memory", "18Gi")])],
                ),
            ],
            want: Want::Results(vec![allocation(
                label_selector("region", REGION1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            )]),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-per-device-node-selection-node-selector-multiple-devices",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ0, CLASS_A, 3, &[]), exact(REQ1, CLASS_B, 3, &[])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice_at(
                    SLICE1,
                    per_device(),
                    two_of_pool1,
                    DRIVER_A,
                    [
                        (
                            DEVICE1,
                            json!({"nodeSelector": label_selector("region", REGION1)}),
                        ),
                        (DEVICE2, json!({"nodeName": NODE1})),
                        (DEVICE3, json!({"allNodes": true})),
                    ]
                    .into_iter()
                    .map(|(name, at)| {
                        let mut device = memory_partition(name, "4Gi");
                        if let (Some(device), Some(at)) = (device.as_object_mut(), at.as_object()) {
                            device.extend(at.clone());
                        }
                        device
                    })
                    .collect(),
                ),
                counter_slice(
                    SLICE2,
                    per_device(),
                    two_of_pool1,
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, &[("memory", "18Gi")])],
                ),
                slice(
                    SLICE3,
                    NODE1,
                    (POOL2, 1, 2),
                    DRIVER_B,
                    [DEVICE1, DEVICE2, DEVICE3]
                        .iter()
                        .map(|name| {
                            partition(
                                name,
                                vec![consumes(COUNTER_SET2, &[("memory", "4Gi")])],
                                true,
                            )
                        })
                        .collect(),
                ),
                slice_json(
                    SLICE4,
                    on(NODE1),
                    (POOL2, 1, 2),
                    DRIVER_B,
                    json!({"sharedCounters": [counter_set(COUNTER_SET2, &[("memory", "12Gi")])]}),
                ),
            ],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE1),
                (REQ0, DRIVER_A, POOL1, DEVICE2),
                (REQ0, DRIVER_A, POOL1, DEVICE3),
                (REQ1, DRIVER_B, POOL2, DEVICE1),
                (REQ1, DRIVER_B, POOL2, DEVICE2),
                (REQ1, DRIVER_B, POOL2, DEVICE3),
            ])]),
            ..Case::default()
        },
    ]
}

fn taint_no_schedule() -> Value {
    json!({"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"})
}

fn taint_no_execute() -> Value {
    json!({"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"})
}

fn toleration_no_schedule() -> Value {
    json!({"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"})
}

fn toleration_no_execute() -> Value {
    json!({"operator": "Equal", "key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"})
}

fn tainted(name: &str, taints: &[Value]) -> Value {
    dev(name, json!({"taints": taints}))
}

fn taints() -> Vec<Case> {
    let two_tainted = || {
        pool1_of(vec![
            tainted(DEVICE1, &[taint_no_schedule()]),
            tainted(DEVICE2, &[taint_no_execute()]),
        ])
    };
    let one_two_taints = || {
        pool1_of(vec![tainted(
            DEVICE1,
            &[taint_no_schedule(), taint_no_execute()],
        )])
    };
    let (no_schedule, no_execute) = (toleration_no_schedule(), toleration_no_execute());
    vec![
        Case {
            name: "tainted-two-devices",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: two_tainted(),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "tainted-one-device-two-taints",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: one_two_taints(),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "tainted-two-devices-tolerated",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![tolerating(exact(REQ0, CLASS_A, 1, &[]), &[&no_execute])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: two_tainted(),
            // Only the second device's taints are tolerated.
            want: Want::Results(vec![allocation(
                local_node_selector(NODE1),
                vec![with_tolerations(
                    result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                    &[&no_execute],
                )],
            )]),
            ..Case::default()
        },
        Case {
            name: "tainted-two-devices-prioritized-list-tolerated",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(
                    REQ0,
                    vec![
                        sub(SUB0, CLASS_A, 1, &[]),
                        tolerating(sub(SUB1, CLASS_A, 1, &[]), &[&no_execute]),
                    ],
                )],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: two_tainted(),
            want: Want::Results(vec![allocation(
                local_node_selector(NODE1),
                vec![with_tolerations(
                    result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE2, false),
                    &[&no_execute],
                )],
            )]),
            ..Case::default()
        },
        Case {
            name: "tainted-no-effect",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![tainted(
                DEVICE1,
                &[json!({"key": "taint-key", "value": "taint-value", "effect": "None"})],
            )]),
            want: Want::Results(vec![on_node1(&[(REQ0, DRIVER_A, POOL1, DEVICE1)])]),
            ..Case::default()
        },
        Case {
            name: "tainted-one-device-two-taints-both-tolerated",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![tolerating(
                    exact(REQ0, CLASS_A, 1, &[]),
                    &[&no_schedule, &no_execute],
                )],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: one_two_taints(),
            want: Want::Results(vec![allocation(
                local_node_selector(NODE1),
                vec![with_tolerations(
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                    &[&no_schedule, &no_execute],
                )],
            )]),
            ..Case::default()
        },
        Case {
            name: "tainted-disabled",
            want: Want::Skip(ALWAYS_ON),
            ..Case::default()
        },
        Case {
            name: "tainted-prioritized-list",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(
                    REQ0,
                    vec![sub(SUB0, CLASS_B, 1, &[]), sub(SUB1, CLASS_A, 1, &[])],
                )],
            )],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: pool1_of(vec![tainted(DEVICE1, &[taint_no_schedule()])]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "tainted-prioritized-list-disabled",
            want: Want::Skip(ALWAYS_ON),
            ..Case::default()
        },
        Case {
            name: "tainted-admin-access",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![admin(exact(REQ0, CLASS_A, 1, &[]))],
            )],
            allocated: vec![allocated(&[
                (DRIVER_A, POOL1, DEVICE1),
                (DRIVER_A, POOL1, DEVICE2),
            ])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![tainted(DEVICE1, &[taint_no_schedule()])]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "tainted-admin-access-disabled",
            want: Want::Skip(ALWAYS_ON),
            ..Case::default()
        },
        Case {
            name: "tainted-all-devices-single",
            claims: vec![claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![tainted(DEVICE1, &[taint_no_schedule()])]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "tainted-all-devices-single-disabled",
            want: Want::Skip(ALWAYS_ON),
            ..Case::default()
        },
    ]
}

fn generation(name: &str, generation: &str, selected: Option<bool>) -> Value {
    let mut attributes = json!({"generation": {"string": generation}});
    if let Some(selected) = selected {
        attributes["selected"] = json!({"bool": selected});
    }
    with_attributes(name, attributes)
}

/// `count` results of `request` for devices `device-<start>` on.
fn numbered_results(request: &str, driver: &str, pool: &str, count: i64, start: i64) -> Vec<Value> {
    (start..start + count)
        .map(|i| result(request, driver, pool, &format!("device-{i}"), false))
        .collect()
}

fn prioritized_all_and_limits() -> Vec<Case> {
    let v6 = format!("device.attributes[\"{DRIVER_A}\"].generation == \"v6\"");
    let v5 = format!("device.attributes[\"{DRIVER_A}\"].generation == \"v5\"");
    let v6_or_v5 = || {
        claim_with_requests(
            CLAIM0,
            vec![first(
                REQ0,
                vec![
                    mode_all(sub(SUB0, CLASS_A, 0, &[&v6])),
                    mode_all(sub(SUB1, CLASS_A, 0, &[&v5])),
                ],
            )],
        )
    };
    vec![
        Case {
            name: "prioritized-list-allocation-mode-all",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(
                    REQ0,
                    vec![
                        mode_all(sub(SUB0, CLASS_A, 0, &[])),
                        sub(SUB1, CLASS_A, 1, &[]),
                    ],
                )],
            )],
            allocated: vec![allocated(&[(DRIVER_A, POOL1, DEVICE2)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![two_devices()],
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_A,
                POOL1,
                DEVICE1,
            )])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-allocation-mode-all-with-selectors",
            claims: vec![v6_or_v5()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![generation(DEVICE1, "v5", None)]),
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_A,
                POOL1,
                DEVICE1,
            )])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-allocation-mode-all-with-selectors-multiple-pools",
            claims: vec![v6_or_v5()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 1),
                    DRIVER_A,
                    vec![generation(DEVICE1, "v5", None)],
                ),
                slice(
                    SLICE2,
                    NODE1,
                    (POOL2, 1, 1),
                    DRIVER_A,
                    vec![generation(DEVICE1, "v5", None)],
                ),
            ],
            want: Want::Results(vec![on_node1(&[
                ("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1),
                ("req-0/subReq-1", DRIVER_A, POOL2, DEVICE1),
            ])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",
            claims: vec![v6_or_v5()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 1),
                    DRIVER_A,
                    vec![generation(DEVICE1, "v5", None)],
                ),
                slice(
                    SLICE2,
                    NODE2,
                    (POOL2, 1, 1),
                    DRIVER_A,
                    vec![
                        generation(DEVICE1, "v5", None),
                        generation(DEVICE2, "v6", None),
                    ],
                ),
            ],
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_A,
                POOL1,
                DEVICE1,
            )])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",
            claims: vec![v6_or_v5()],
            classes: vec![class_with(
                CLASS_A,
                format!(
                    "device.driver == \"{DRIVER_A}\" && device.attributes[\"{DRIVER_A}\"].selected"
                ),
                None,
            )],
            slices: pool1_of(vec![
                generation(DEVICE1, "v6", Some(false)),
                generation(DEVICE2, "v5", Some(false)),
                generation(DEVICE3, "v5", Some(true)),
            ]),
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_A,
                POOL1,
                DEVICE3,
            )])]),
            ..Case::default()
        },
        Case {
            name: "max-number-devices",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ0, CLASS_A, MAX, &[])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(numbered_devices(MAX)),
            want: Want::Results(vec![allocation(
                local_node_selector(NODE1),
                numbered_results(REQ0, DRIVER_A, POOL1, MAX, 0),
            )]),
            ..Case::default()
        },
        Case {
            name: "partitionable-devices-with-attribute-selector",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    exact(REQ0, CLASS_A, 2, &[]),
                    exact(
                        REQ1,
                        CLASS_A,
                        1,
                        &[&format!("device.attributes[\"{DRIVER_A}\"].special")],
                    ),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 2),
                    DRIVER_A,
                    [
                        (DEVICE1, true, "cpu1"),
                        (DEVICE2, false, "cpu2"),
                        (DEVICE3, false, "cpu3"),
                    ]
                    .iter()
                    .map(|(name, special, cpu)| {
                        let mut device = partition(
                            name,
                            vec![
                                consumes(COUNTER_SET1, &[(cpu, "1")]),
                                consumes(COUNTER_SET2, &[("mem", "10Gi")]),
                            ],
                            false,
                        );
                        device["attributes"] = json!({"special": {"bool": special}});
                        device
                    })
                    .collect(),
                ),
                counter_slice(
                    SLICE2,
                    on(NODE1),
                    (POOL1, 1, 2),
                    DRIVER_A,
                    vec![
                        counter_set(COUNTER_SET1, &[("cpu1", "1"), ("cpu2", "1"), ("cpu3", "1")]),
                        counter_set(COUNTER_SET2, &[("mem", "30Gi")]),
                    ],
                ),
            ],
            want: Want::Results(vec![on_node1(&[
                (REQ0, DRIVER_A, POOL1, DEVICE2),
                (REQ0, DRIVER_A, POOL1, DEVICE3),
                (REQ1, DRIVER_A, POOL1, DEVICE1),
            ])]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-max-allocation-limit-request",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    first(
                        REQ0,
                        vec![
                            sub(SUB0, CLASS_A, MAX, &[]),
                            sub(SUB1, CLASS_A, MAX / 2, &[]),
                        ],
                    ),
                    first(
                        REQ1,
                        vec![
                            sub(SUB0, CLASS_A, MAX, &[]),
                            sub(SUB1, CLASS_A, MAX / 2, &[]),
                        ],
                    ),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(numbered_devices(MAX * 2)),
            want: Want::Results(vec![allocation(
                local_node_selector(NODE1),
                [
                    numbered_results("req-0/subReq-1", DRIVER_A, POOL1, MAX / 2, 0),
                    numbered_results("req-1/subReq-1", DRIVER_A, POOL1, MAX / 2, MAX / 2),
                ]
                .concat(),
            )]),
            ..Case::default()
        },
        Case {
            name: "prioritized-list-max-allocation-allocation-mode-all",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    first(
                        REQ0,
                        vec![
                            mode_all(sub(SUB0, CLASS_A, 0, &[])),
                            sub(SUB1, CLASS_A, 2, &[]),
                        ],
                    ),
                    exact(REQ1, CLASS_B, 2, &[]),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 1),
                    DRIVER_A,
                    numbered_devices(MAX - 1),
                ),
                slice(SLICE2, NODE1, (POOL2, 1, 1), DRIVER_B, numbered_devices(2)),
            ],
            want: Want::Results(vec![on_node1(&[
                ("req-0/subReq-1", DRIVER_A, POOL1, DEVICE0),
                ("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1),
                (REQ1, DRIVER_B, POOL2, DEVICE0),
                (REQ1, DRIVER_B, POOL2, DEVICE1),
            ])]),
            ..Case::default()
        },
    ]
}

fn binding_conditions() -> Vec<Case> {
    let skipped = |name| Case {
        name,
        want: Want::Skip(BINDING_CONDITIONS),
        ..Case::default()
    };
    vec![
        skipped("device-binding-conditions"),
        skipped("binding-conditions-multiple-devices"),
        skipped("binding-conditions-with-and-without"),
        Case {
            name: "binding-conditions-without-feature-gate",
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![dev(
                DEVICE1,
                json!({"bindingConditions": ["IsPrepare"], "bindingFailureConditions": ["BindingFailed"]}),
            )]),
            want: Want::NoFit,
            ..Case::default()
        },
        skipped("node-restriction"),
        skipped("partitionable-devices-with-binding-conditions"),
        skipped("partitionable-devices-with-binding-conditions-multiple"),
        skipped("partitionable-devices-with-binding-conditions-some-devices-no-conditions"),
        skipped("partitionable-devices-with-binding-conditions-multi-slices"),
        skipped("partitionable-devices-with-binding-conditions-and-taints"),
        skipped("partitionable-devices-with-binding-conditions-and-taints-tolerated"),
        Case {
            name: "consumable-capacity-disabled-feature",
            want: Want::Skip(ALWAYS_ON),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-disabled-feature-with-prioritized-list",
            want: Want::Skip(ALWAYS_ON),
            ..Case::default()
        },
    ]
}

fn capacity0(value: &str) -> Value {
    json!({"capacity": {CAPACITY0: {"value": value}}})
}

/// Two claims each asking one device of class-a (with `quantity` of capacity-0, if any).
fn two_claims(quantities: [Option<&str>; 2]) -> Vec<ResourceClaim> {
    [CLAIM0, CLAIM1]
        .iter()
        .zip(quantities)
        .map(|(name, quantity)| {
            let request = exact(REQ0, CLASS_A, 1, &[]);
            claim_with_requests(
                name,
                vec![match quantity {
                    Some(q) => capacity_request(request, q),
                    None => request,
                }],
            )
        })
        .collect()
}

fn one_claim(quantity: &str) -> Vec<ResourceClaim> {
    vec![claim_with_requests(
        CLAIM0,
        vec![capacity_request(exact(REQ0, CLASS_A, 1, &[]), quantity)],
    )]
}

/// A share: request, device of driver-a/pool-1, and what it consumes (name, quantity).
type Share<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

/// One allocation on node-1 of shares.
fn shares_on_node1(shares: &[Share]) -> Value {
    allocation(
        local_node_selector(NODE1),
        shares
            .iter()
            .map(|(request, device, consumed)| {
                share(result(request, DRIVER_A, POOL1, device, false), consumed)
            })
            .collect(),
    )
}

fn consumable_capacity() -> Vec<Case> {
    let multi_class = || vec![class_with_multiple_allocations(CLASS_A, DRIVER_A, true)];
    let one = &[(CAPACITY0, "1")][..];
    let two = &[(CAPACITY0, "2")][..];
    let three = &[(CAPACITY0, "3")][..];
    let four = &[(CAPACITY0, "4")][..];
    let zero = &[(CAPACITY0, "0")][..];
    let ranged = |name: &str, value: &str| policy_range(multi(dev(name, json!({}))), value);
    let all_two_and_one = || {
        pool1_of(vec![
            multi(dev(DEVICE1, capacity0("2"))),
            multi(dev(DEVICE2, capacity0("1"))),
        ])
    };
    let one_then_all = || {
        vec![claim_with_requests(
            CLAIM0,
            vec![
                capacity_request(exact(REQ0, CLASS_A, 1, &[]), "1"),
                capacity_request(all(REQ1, CLASS_A), "1"),
            ],
        )]
    };
    let all_of = || {
        vec![claim_with_requests(
            CLAIM0,
            vec![capacity_request(all(REQ0, CLASS_A), "1")],
        )]
    };
    vec![
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
            claims: one_claim("1"),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![multi(dev(DEVICE1, json!({"capacity": {CAPACITY1: {"value": "1"}}})))]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
            claims: all_of(),
            classes: multi_class(),
            slices: pool1_of(vec![multi(dev(DEVICE1, json!({"capacity": {CAPACITY1: {"value": "1"}}})))]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",
            claims: two_claims([None, None]),
            classes: multi_class(),
            slices: pool1_of(vec![multi(dev(DEVICE1, json!({})))]),
            // Both share the device; no capacity is consumed since none is defined.
            want: Want::Results(vec![
                shares_on_node1(&[(REQ0, DEVICE1, &[])]),
                shares_on_node1(&[(REQ0, DEVICE1, &[])]),
            ]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
            claims: two_claims([None, None]),
            classes: multi_class(),
            slices: pool1_of(vec![
                multi(dev(DEVICE1, capacity0("1"))),
                multi(dev(DEVICE2, capacity0("1"))),
            ]),
            // Both take the full capacity, of different devices.
            want: Want::Results(vec![
                shares_on_node1(&[(REQ0, DEVICE1, one)]),
                shares_on_node1(&[(REQ0, DEVICE2, one)]),
            ]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block",
            claims: two_claims([None, None]),
            classes: multi_class(),
            slices: pool1_of(vec![multi(dev(DEVICE1, capacity0("2")))]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
            claims: two_claims([Some("1"), Some("1")]),
            classes: multi_class(),
            slices: pool1_of(vec![multi(dev(DEVICE1, capacity0("2")))]),
            want: Want::Results(vec![
                shares_on_node1(&[(REQ0, DEVICE1, one)]),
                shares_on_node1(&[(REQ0, DEVICE1, one)]),
            ]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
            claims: two_claims([None, None]),
            classes: multi_class(),
            slices: pool1_of(vec![ranged(DEVICE1, "4")]),
            // Both take the default (2).
            want: Want::Results(vec![
                shares_on_node1(&[(REQ0, DEVICE1, two)]),
                shares_on_node1(&[(REQ0, DEVICE1, two)]),
            ]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-zero-request-policy",
            claims: two_claims([None, None]),
            classes: multi_class(),
            slices: pool1_of(vec![policy_values(multi(dev(DEVICE1, json!({}))), "0", "1", &[])]),
            want: Want::Results(vec![
                shares_on_node1(&[(REQ0, DEVICE1, zero)]),
                shares_on_node1(&[(REQ0, DEVICE1, zero)]),
            ]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
            claims: one_claim("1"),
            classes: multi_class(),
            slices: pool1_of(vec![policy_values(multi(dev(DEVICE1, json!({}))), "0", "1", &[])]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
            claims: two_claims([Some("1"), Some("1")]),
            classes: multi_class(),
            slices: pool1_of(vec![ranged(DEVICE1, "4")]),
            // Rounded up to the minimum (2).
            want: Want::Results(vec![
                shares_on_node1(&[(REQ0, DEVICE1, two)]),
                shares_on_node1(&[(REQ0, DEVICE1, two)]),
            ]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-range-policy-step",
            claims: one_claim("3"),
            classes: multi_class(),
            slices: pool1_of(vec![ranged(DEVICE1, "4")]),
            // Rounded up by the step: 3 to 2+2.
            want: Want::Results(vec![shares_on_node1(&[(REQ0, DEVICE1, four)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-valid-values-policy",
            claims: one_claim("2"),
            classes: multi_class(),
            slices: pool1_of(vec![policy_values(multi(dev(DEVICE1, json!({}))), "1", "4", &["2"])]),
            want: Want::Results(vec![shares_on_node1(&[(REQ0, DEVICE1, two)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
            claims: one_claim("2"),
            classes: multi_class(),
            slices: pool1_of(vec![policy_values(multi(dev(DEVICE1, json!({}))), "1", "3", &["3"])]),
            want: Want::Results(vec![shares_on_node1(&[(REQ0, DEVICE1, three)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",
            claims: two_claims([Some("1"), Some("2")]),
            classes: multi_class(),
            slices: pool1_of(vec![ranged(DEVICE1, "2")]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
            claims: one_claim("6"),
            classes: multi_class(),
            // The policy's maximum is 4: 6 does not fit although the device has 10.
            slices: pool1_of(vec![ranged(DEVICE1, "10")]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
            claims: one_claim("2"),
            allocated: vec![allocated_share(DEVICE1, two)],
            classes: multi_class(),
            slices: pool1_of(vec![ranged(DEVICE1, "4")]),
            want: Want::Results(vec![shares_on_node1(&[(REQ0, DEVICE1, two)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
            claims: one_claim("2"),
            allocated: vec![allocated_share(DEVICE1, two)],
            classes: multi_class(),
            slices: pool1_of(vec![ranged(DEVICE1, "2"), ranged(DEVICE2, "2")]),
            want: Want::Results(vec![shares_on_node1(&[(REQ0, DEVICE2, two)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-with-multi-allocatable-device-backtrack",
            claims: vec![
                claim_with_constraints(
                    CLAIM0,
                    json!([{"matchAttribute": STRING_ATTRIBUTE}]),
                    vec![
                        capacity_request(exact(REQ0, CLASS_A, 1, &[]), "2"),
                        capacity_request(exact(REQ1, CLASS_A, 1, &[]), "2"),
                    ],
                ),
                claim_with_requests(CLAIM1, vec![capacity_request(exact(REQ0, CLASS_A, 1, &[]), "2")]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![
                policy_range(multi(with_attributes(DEVICE2, json!({"stringAttribute": {"string": "stringAttributeValue1"}}))), "2"),
                policy_range(multi(with_attributes(DEVICE1, json!({"stringAttribute": {"string": "stringAttributeValue2"}}))), "4"),
            ]),
            want: Want::Results(vec![
                shares_on_node1(&[(REQ0, DEVICE1, two), (REQ1, DEVICE1, two)]),
                shares_on_node1(&[(REQ0, DEVICE2, two)]),
            ]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-subrequest",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(REQ0, vec![
                    capacity_request(sub(SUB0, CLASS_A, 1, &[]), "4"),
                    capacity_request(sub(SUB1, CLASS_A, 1, &[]), "2"),
                    sub(SUB1, CLASS_A, 1, &[]),
                ])],
            )],
            classes: multi_class(),
            slices: pool1_of(vec![ranged(DEVICE1, "2")]),
            want: Want::Results(vec![shares_on_node1(&[("req-0/subReq-1", DEVICE1, two)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
            claims: one_claim("2"),
            allocated: vec![allocated_share(DEVICE1, two)],
            classes: multi_class(),
            slices: pool1_of(vec![ranged(DEVICE1, "2")]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",
            claims: vec![claim_with_requests(CLAIM0, vec![capacity_request(all(REQ0, CLASS_A), "2")])],
            classes: multi_class(),
            slices: pool1_of(vec![multi(dev(DEVICE1, capacity0("2"))), multi(dev(DEVICE2, json!({})))]),
            // Only the matching device is allocated.
            want: Want::Results(vec![shares_on_node1(&[(REQ0, DEVICE1, two)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
            claims: vec![claim_with_requests(CLAIM0, vec![capacity_request(all(REQ0, CLASS_A), "2")])],
            classes: multi_class(),
            slices: all_two_and_one(),
            want: Want::Results(vec![shares_on_node1(&[(REQ0, DEVICE1, two)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",
            claims: one_then_all(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: all_two_and_one(),
            want: Want::Results(vec![shares_on_node1(&[
                (REQ0, DEVICE1, one),
                (REQ1, DEVICE1, one),
                (REQ1, DEVICE2, one),
            ])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
            claims: all_of(),
            allocated: vec![allocated_share(DEVICE1, one)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: all_two_and_one(),
            want: Want::Results(vec![shares_on_node1(&[(REQ0, DEVICE1, one), (REQ0, DEVICE2, one)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
            claims: one_then_all(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![multi(dev(DEVICE1, capacity0("1"))), multi(dev(DEVICE2, capacity0("1")))]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
            claims: all_of(),
            allocated: vec![allocated_share(DEVICE1, one)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![multi(dev(DEVICE1, capacity0("1"))), multi(dev(DEVICE2, capacity0("1")))]),
            want: Want::Results(vec![shares_on_node1(&[(REQ0, DEVICE2, one)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-dedicated-device-with-consumable-capacity-request",
            claims: one_claim("1"),
            classes: vec![class_with_multiple_allocations(CLASS_A, DRIVER_A, false)],
            slices: pool1_of(vec![dev(DEVICE1, capacity0("1"))]),
            want: Want::Results(vec![on_node1(&[(REQ0, DRIVER_A, POOL1, DEVICE1)])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request",
            claims: two_claims([Some("1"), Some("1")]),
            classes: vec![class_with_multiple_allocations(CLASS_A, DRIVER_A, false)],
            slices: pool1_of(vec![policy_range(dev(DEVICE1, json!({})), "2")]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",
            claims: one_claim("1"),
            classes: vec![class_with_multiple_allocations(CLASS_A, DRIVER_A, false)],
            slices: pool1_of(vec![multi(dev(DEVICE1, capacity0("1")))]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
            claims: one_claim("1"),
            allocated: vec![allocated(&[(DRIVER_A, POOL1, DEVICE1)])],
            classes: multi_class(),
            slices: pool1_of(vec![ranged(DEVICE1, "2")]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
            claims: one_claim("1"),
            allocated: vec![allocated_share(DEVICE1, one)],
            classes: multi_class(),
            slices: pool1_of(vec![policy_range(dev(DEVICE1, json!({})), "2")]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "allow-multiple-allocations-with-partitionable-device",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    exact(REQ0, CLASS_A, 1, &[]),
                    first(REQ1, vec![
                        sub(SUB0, CLASS_A, 1, &[&memory_at_least("6Gi")]),
                        sub(SUB1, CLASS_A, 1, &[&memory_at_least("4Gi")]),
                    ]),
                ],
            )],
            classes: multi_class(),
            slices: vec![
                slice(SLICE1, NODE1, (POOL1, 1, 2), DRIVER_A, vec![
                    multi(memory_partition(DEVICE1, "4Gi")),
                    multi(memory_partition(DEVICE2, "6Gi")),
                    multi(memory_partition(DEVICE3, "4Gi")),
                ]),
                memory_counters(SLICE2, (POOL1, 1, 2), "8Gi"),
            ],
            want: Want::Results(vec![shares_on_node1(&[
                (REQ0, DEVICE1, &[("memory", "4Gi")]),
                ("req-1/subReq-1", DEVICE3, &[("memory", "4Gi")]),
            ])]),
            ..Case::default()
        },
        Case {
            name: "consumable-capacity-with-partitionable-device-multiple-capacity-pools",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    capacity_request(exact(REQ0, CLASS_A, 1, &[]), "1"),
                    capacity_request(exact(REQ2, CLASS_A, 1, &[]), "2"),
                    first(REQ1, vec![
                        capacity_request(sub(SUB0, CLASS_A, 1, &[&format!("device.capacity[\"{DRIVER_A}\"][\"{CAPACITY0}\"].compareTo(quantity(\"4\")) >= 0")]), "1"),
                        capacity_request(sub(SUB1, CLASS_A, 1, &[&format!("device.capacity[\"{DRIVER_A}\"][\"{CAPACITY0}\"].compareTo(quantity(\"2\")) >= 0")]), "1"),
                    ]),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            // Counter set 1 (capacity-0: 4) and 2 (capacity-1: 8); devices 1, 2, 3 consume
            // (2, 4), (4, 4), (2, 4): either devices 1 and 3, or device 2.
            slices: vec![
                slice(SLICE1, NODE1, (POOL1, 1, 2), DRIVER_A, [(DEVICE1, "2"), (DEVICE2, "4"), (DEVICE3, "2")]
                    .iter()
                    .map(|(name, c0)| {
                        let mut device = multi(partition(name, vec![
                            consumes(COUNTER_SET1, &[(CAPACITY0, c0)]),
                            consumes(COUNTER_SET2, &[(CAPACITY1, "4")]),
                        ], true));
                        device["capacity"][CAPACITY1] = json!({"value": "4", "requestPolicy": {"default": "2",
                            "validRange": {"min": "2", "step": "2", "max": "4"}}});
                        device
                    })
                    .collect()),
                counter_slice(SLICE2, on(NODE1), (POOL1, 1, 2), DRIVER_A, vec![
                    counter_set(COUNTER_SET1, &[(CAPACITY0, "4")]),
                    counter_set(COUNTER_SET2, &[(CAPACITY1, "8")]),
                ]),
            ],
            want: Want::Results(vec![shares_on_node1(&[
                (REQ0, DEVICE1, &[(CAPACITY0, "1"), (CAPACITY1, "2")]),
                (REQ2, DEVICE3, &[(CAPACITY0, "2"), (CAPACITY1, "2")]),
                ("req-1/subReq-1", DEVICE1, &[(CAPACITY0, "1"), (CAPACITY1, "2")]),
            ])]),
            ..Case::default()
        },
    ]
}

fn distinct_and_list_attributes() -> Vec<Case> {
    let bool_attribute = format!("device.attributes[\"{DRIVER_A}\"].boolAttribute");
    let mut cases = vec![
        Case {
            name: "with-distinct-constraints",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([
                    {"distinctAttribute": BOOL_ATTRIBUTE, "requests": [REQ0, REQ1]},
                    {"distinctAttribute": VERSION_ATTRIBUTE, "requests": [REQ0, REQ1, REQ2]},
                    {"distinctAttribute": INT_ATTRIBUTE, "requests": [REQ0, REQ1, REQ2, REQ3]}]),
                [REQ0, REQ1, REQ2, REQ3].iter().map(|r| exact(r, CLASS_A, 1, &[])).collect(),
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(
                [(DEVICE1, "1.0.0", 0, true), (DEVICE2, "1.0.1", 1, false), (DEVICE3, "1.0.2", 2, true), (DEVICE4, "1.0.0", 3, true)]
                    .iter()
                    .map(|(name, version, numa, flag)| multi(with_attributes(name, json!({
                        "driverVersion": {"version": version}, "numa": {"int": numa}, "boolAttribute": {"bool": flag}}))))
                    .collect(),
            ),
            want: Want::Results(vec![shares_on_node1(&[
                (REQ0, DEVICE1, &[]),
                (REQ1, DEVICE2, &[]),
                (REQ2, DEVICE3, &[]),
                (REQ3, DEVICE4, &[]),
            ])]),
            ..Case::default()
        },
        Case {
            name: "with-distinct-constraints-attribute-not-set",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([{"distinctAttribute": BOOL_ATTRIBUTE, "requests": [REQ0]}]),
                vec![exact(REQ0, CLASS_A, 1, &[])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![multi(dev(DEVICE1, json!({})))]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "with-distinct-constraints-unknown-type-attribute",
            want: Want::Skip(
                "not yet supported: upstream fails with \"unsupported attribute value\" when a constrained attribute has no value of a known type; Tessera treats it as absent (no fit)",
            ),
            ..Case::default()
        },
        Case {
            name: "with-distinct-constraints-with-subrequests",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([{"distinctAttribute": BOOL_ATTRIBUTE, "requests": [REQ0, REQ1]}]),
                [REQ0, REQ1, REQ2]
                    .iter()
                    .map(|r| first(r, vec![sub(SUB0, CLASS_A, 1, &[&bool_attribute]), sub(SUB1, CLASS_A, 1, &[])]))
                    .collect(),
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![
                multi(with_attributes(DEVICE1, json!({"boolAttribute": {"bool": true}}))),
                multi(with_attributes(DEVICE2, json!({"boolAttribute": {"bool": false}}))),
            ]),
            // The constraint covers req-0 and req-1 only: req-1 falls back to its second
            // subrequest, req-2 takes the first.
            want: Want::Results(vec![shares_on_node1(&[
                ("req-0/subReq-0", DEVICE1, &[]),
                ("req-1/subReq-1", DEVICE2, &[]),
                ("req-2/subReq-0", DEVICE1, &[]),
            ])]),
            ..Case::default()
        },
        Case {
            name: "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([{"distinctAttribute": STRING_ATTRIBUTE}]),
                vec![
                    capacity_request(exact(REQ0, CLASS_A, 1, &[]), "1"),
                    capacity_request(exact(REQ1, CLASS_A, 1, &[]), "1"),
                ],
            )],
            classes: vec![class_with_multiple_allocations(CLASS_A, DRIVER_A, true)],
            slices: pool1_of(vec![policy_range(
                multi(with_attributes(DEVICE1, json!({"stringAttribute": {"string": "stringAttributeValue"}}))),
                "2",
            )]),
            want: Want::NoFit,
            ..Case::default()
        },
        Case {
            name: "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",
            claims: vec![claim_with_constraints(
                CLAIM0,
                json!([{"distinctAttribute": STRING_ATTRIBUTE}]),
                vec![
                    capacity_request(exact(REQ0, CLASS_A, 1, &[]), "2"),
                    capacity_request(exact(REQ1, CLASS_A, 1, &[]), "2"),
                ],
            )],
            classes: vec![class_with_multiple_allocations(CLASS_A, DRIVER_A, true)],
            slices: [(DEVICE1, "stringAttributeValue1"), (DEVICE2, "stringAttributeValue2")]
                .iter()
                .map(|(name, value)| {
                    slice(SLICE1, NODE1, (POOL1, 1, 2), DRIVER_A, vec![policy_range(
                        multi(with_attributes(name, json!({"stringAttribute": {"string": value}}))),
                        "4",
                    )])
                })
                .collect(),
            want: Want::Results(vec![shares_on_node1(&[(REQ0, DEVICE1, &[(CAPACITY0, "2")]), (REQ1, DEVICE2, &[(CAPACITY0, "2")])])]),
            ..Case::default()
        },
    ];
    cases.extend(
        [
            "list-attributes-match-constaint-scalar-string-values",
            "list-attributes-match-constaint-list-of-string-values-with-common-elements",
            "list-attributes-match-constaint-list-of-string-values-with-partially-common-elements",
            "list-attributes-match-constaint-list-of-string-values-without-common-elements",
            "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-common-elements",
            "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-partially-common-elements",
            "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-without-common-elements",
            "list-attributes-match-constaint-list-of-int-values-with-common-elements",
            "list-attributes-match-constaint-list-of-bool-values-with-common-elements",
            "list-attributes-match-constaint-list-of-version-values-with-common-elements",
            "list-attributes-match-constaint-with-empty-or-unknown-type",
            "list-attributes-disabled-match-constraint-with-lists",
            "list-attributes-distinct-constraint-scalar-string-values-all-distinct",
            "list-attributes-distinct-constraint-scalar-string-values-not-distinct",
            "list-attributes-distinct-constraint-list-of-string-values-all-distinct",
            "list-attributes-distinct-constraint-list-of-string-values-with-common-elements",
            "list-attributes-distinct-constraint-mixed-scalar-and-list-all-distinct",
            "list-attributes-distinct-constraint-mixed-scalar-and-list-with-common-elements",
            "list-attributes-distinct-constraint-list-of-int-values-all-distinct",
            "list-attributes-distinct-constraint-list-of-bool-values-all-distinct",
            "list-attributes-distinct-constraint-list-of-version-values-all-distinct",
            "list-attributes-distinct-constaint-with-empty-or-unknown-type",
            "list-attributes-disabled-distinct-constraint-with-lists",
        ]
        .into_iter()
        .map(|name| Case {
            name,
            want: Want::Skip(LIST_ATTRIBUTES),
            ..Case::default()
        }),
    );
    cases
}

/// A slice of pool-1 (generation, 2 slices) of driver-a on `node` with `device`.
fn pool1_generation(name: &str, node: &str, generation: i64, device: &str) -> ResourceSlice {
    slice(
        name,
        node,
        (POOL1, generation, 2),
        DRIVER_A,
        vec![dev(device, json!({}))],
    )
}

fn invalid_pool(name: &'static str, slices: Vec<ResourceSlice>) -> Case {
    Case {
        name,
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices,
        want: Want::Error("invalid resource pools were encountered"),
        ..Case::default()
    }
}

fn multi_host_and_invalid_pools() -> Vec<Case> {
    let device1_from_node1 = || Want::Results(vec![on_node1(&[(REQ0, DRIVER_A, POOL1, DEVICE1)])]);
    let one_request = || vec![claim_with_request(CLAIM0, REQ0, CLASS_A)];
    let duplicate_device1 = || {
        vec![
            slice(
                SLICE1,
                NODE1,
                (POOL1, 1, 2),
                DRIVER_A,
                vec![dev(DEVICE1, json!({}))],
            ),
            slice(
                SLICE2,
                NODE1,
                (POOL1, 1, 2),
                DRIVER_A,
                vec![dev(DEVICE1, json!({}))],
            ),
            slice(
                SLICE3,
                NODE1,
                (POOL2, 1, 1),
                DRIVER_A,
                vec![dev(DEVICE2, json!({}))],
            ),
        ]
    };
    let gib8 = &[("memory", "8Gi")][..];
    let consuming = |name: &str, set: &str| partition(name, vec![consumes(set, gib8)], false);
    vec![
        Case {
            name: "allocation-mode-all-with-multi-host-resource-pool",
            claims: vec![claim_with_requests(CLAIM0, vec![all(REQ0, CLASS_A)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                pool1_generation(SLICE1, NODE1, 1, DEVICE1),
                pool1_generation(SLICE2, NODE2, 1, DEVICE2),
            ],
            want: device1_from_node1(),
            ..Case::default()
        },
        Case {
            name: "multi-host-resource-pool-with-stale-slice-for-current-node",
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                pool1_generation(SLICE1, NODE1, 1, DEVICE1),
                pool1_generation(SLICE2, NODE2, 2, DEVICE2),
            ],
            want: Want::NoFit,
            ..Case::default()
        },
        // Moving a pool between nodes is dangerous; upstream notes that it allocates from the
        // old generation because it ignores the other node's slices.
        Case {
            name: "multi-host-resource-pool-complete-update-from-node-1-to-node-2",
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                pool1_generation(SLICE1, NODE1, 1, DEVICE1),
                pool1_generation(SLICE1, NODE1, 1, DEVICE2),
                pool1_generation(SLICE2, NODE2, 2, DEVICE1),
                pool1_generation(SLICE2, NODE2, 2, DEVICE2),
            ],
            want: device1_from_node1(),
            ..Case::default()
        },
        Case {
            name: "multi-host-resource-pool-complete-update-from-node-2-to-node-1",
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                pool1_generation(SLICE1, NODE2, 1, DEVICE1),
                pool1_generation(SLICE1, NODE2, 1, DEVICE2),
                pool1_generation(SLICE2, NODE1, 2, DEVICE1),
                pool1_generation(SLICE2, NODE1, 2, DEVICE2),
            ],
            want: device1_from_node1(),
            ..Case::default()
        },
        Case {
            name: "multi-host-resource-pool-incomplete-update-from-node-1-to-node-2",
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                pool1_generation(SLICE1, NODE1, 1, DEVICE1),
                pool1_generation(SLICE1, NODE1, 1, DEVICE2),
                pool1_generation(SLICE2, NODE2, 2, DEVICE1),
            ],
            want: device1_from_node1(),
            ..Case::default()
        },
        Case {
            name: "multi-host-resource-pool-incomplete-update-from-node-2-to-node-1",
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                pool1_generation(SLICE1, NODE2, 1, DEVICE1),
                pool1_generation(SLICE1, NODE2, 1, DEVICE2),
                pool1_generation(SLICE2, NODE1, 2, DEVICE1),
            ],
            // Not allocated: the newest generation is incomplete.
            want: Want::NoFit,
            ..Case::default()
        },
        invalid_pool(
            "partitionable-devices-same-counter-set-name-in-different-resource-slices",
            vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 4),
                    DRIVER_A,
                    vec![dev(DEVICE1, json!({}))],
                ),
                counter_slice(
                    SLICE2,
                    on(NODE1),
                    (POOL1, 1, 4),
                    DRIVER_A,
                    vec![json!({"name": COUNTER_SET1, "counters": {}})],
                ),
                slice(
                    SLICE3,
                    NODE1,
                    (POOL1, 1, 4),
                    DRIVER_A,
                    vec![dev(DEVICE2, json!({}))],
                ),
                counter_slice(
                    SLICE4,
                    on(NODE1),
                    (POOL1, 1, 4),
                    DRIVER_A,
                    vec![json!({"name": COUNTER_SET1, "counters": {}})],
                ),
            ],
        ),
        invalid_pool(
            "partitionable-devices-device-counter-consumption-references-unknown-counter-set",
            vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 2),
                    DRIVER_A,
                    vec![partition(
                        DEVICE1,
                        vec![json!({"counterSet": COUNTER_SET2, "counters": {}})],
                        false,
                    )],
                ),
                counter_slice(
                    SLICE2,
                    on(NODE1),
                    (POOL1, 1, 2),
                    DRIVER_A,
                    vec![json!({"name": COUNTER_SET1, "counters": {}})],
                ),
            ],
        ),
        invalid_pool(
            "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
            vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 2),
                    DRIVER_A,
                    vec![consuming(DEVICE1, COUNTER_SET1)],
                ),
                counter_slice(
                    SLICE2,
                    on(NODE1),
                    (POOL1, 1, 2),
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, &[("other-memory", "8Gi")])],
                ),
            ],
        ),
        invalid_pool(
            "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",
            vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 1),
                    DRIVER_A,
                    vec![consuming(DEVICE1, COUNTER_SET1)],
                ),
                counter_slice(
                    SLICE2,
                    on(NODE1),
                    (POOL2, 1, 1),
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, gib8)],
                ),
            ],
        ),
        Case {
            name: "partitionable-devices-devices-on-different-nodes-consume-same-counter-set",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![first(
                    REQ0,
                    vec![
                        sub(SUB0, CLASS_A, 1, &[&memory_at_least("6Gi")]),
                        sub(SUB1, CLASS_A, 1, &[&memory_at_least("2Gi")]),
                    ],
                )],
            )],
            allocated: vec![allocated(&[(DRIVER_A, POOL1, DEVICE3)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                counter_slice(
                    SLICE1,
                    on(NODE1),
                    (POOL1, 1, 3),
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, gib8)],
                ),
                slice(
                    SLICE2,
                    NODE1,
                    (POOL1, 1, 3),
                    DRIVER_A,
                    vec![
                        memory_partition(DEVICE1, "6Gi"),
                        memory_partition(DEVICE2, "2Gi"),
                    ],
                ),
                slice(
                    SLICE3,
                    NODE2,
                    (POOL1, 1, 3),
                    DRIVER_A,
                    vec![partition(
                        DEVICE3,
                        vec![consumes(COUNTER_SET1, &[("memory", "6Gi")])],
                        false,
                    )],
                ),
            ],
            want: Want::Results(vec![on_node1(&[(
                "req-0/subReq-1",
                DRIVER_A,
                POOL1,
                DEVICE2,
            )])]),
            ..Case::default()
        },
        invalid_pool(
            "partitionable-devices-validation-error-on-non-targeting-slice",
            vec![
                counter_slice(
                    SLICE1,
                    on(NODE1),
                    (POOL1, 1, 3),
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, gib8)],
                ),
                slice(
                    SLICE2,
                    NODE1,
                    (POOL1, 1, 3),
                    DRIVER_A,
                    vec![memory_partition(DEVICE1, "6Gi")],
                ),
                slice(
                    SLICE3,
                    NODE2,
                    (POOL1, 1, 3),
                    DRIVER_A,
                    vec![partition(
                        DEVICE3,
                        vec![consumes(COUNTER_SET2, &[("memory", "6Gi")])],
                        false,
                    )],
                ),
            ],
        ),
        Case {
            name: "different-resourceslices-in-pool-can-target-different-nodes",
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                pool1_generation(SLICE1, NODE2, 1, DEVICE1),
                pool1_generation(SLICE2, NODE1, 1, DEVICE2),
            ],
            want: Want::Results(vec![on_node1(&[(REQ0, DRIVER_A, POOL1, DEVICE2)])]),
            ..Case::default()
        },
        Case {
            name: "invalid-pool-is-ok-if-devices-can-be-allocated-from-other",
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: duplicate_device1(),
            want: Want::Results(vec![on_node1(&[(REQ0, DRIVER_A, POOL2, DEVICE2)])]),
            ..Case::default()
        },
        Case {
            allocated: vec![allocated(&[(DRIVER_A, POOL2, DEVICE2)])],
            ..invalid_pool(
                "invalid-pool-is-error-if-no-other-device-can-be-allocated",
                duplicate_device1(),
            )
        },
        Case {
            name: "no-allocation-from-incomplete-pools",
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![pool1_generation(SLICE1, NODE1, 1, DEVICE1)],
            want: Want::NoFit,
            ..Case::default()
        },
    ]
}

fn typed(name: &str, kind: &str) -> Value {
    with_attributes(name, json!({"type": {"string": kind}}))
}

fn combinations() -> Vec<Case> {
    let five_of_four = |name, slices| Case {
        name,
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![exact(REQ0, CLASS_A, 5, &[])],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices,
        want: Want::NoFit,
        ..Case::default()
    };
    let plain = |names: &[&str]| names.iter().map(|n| dev(n, json!({}))).collect::<Vec<_>>();
    let x = format!("device.attributes[\"{DRIVER_A}\"].type == \"X\"");
    let y = format!("device.attributes[\"{DRIVER_A}\"].type == \"Y\"");
    vec![
        five_of_four(
            "check-combinations-within-single-request-single-pool-single-slice",
            pool1_of(plain(&[DEVICE1, DEVICE2, DEVICE3, DEVICE4])),
        ),
        five_of_four(
            "check-combinations-within-single-request-single-pool-multiple-slices",
            vec![
                slice(
                    SLICE1,
                    NODE1,
                    (POOL1, 1, 2),
                    DRIVER_A,
                    plain(&[DEVICE1, DEVICE2]),
                ),
                slice(
                    SLICE2,
                    NODE1,
                    (POOL1, 1, 2),
                    DRIVER_A,
                    plain(&[DEVICE3, DEVICE4]),
                ),
            ],
        ),
        five_of_four(
            "check-combinations-within-single-request-multiple-pools-multiple-slices",
            vec![
                slice(SLICE1, NODE1, (POOL1, 1, 2), DRIVER_A, plain(&[DEVICE1])),
                slice(SLICE2, NODE1, (POOL1, 1, 2), DRIVER_A, plain(&[DEVICE2])),
                slice(
                    SLICE3,
                    NODE1,
                    (POOL2, 1, 1),
                    DRIVER_A,
                    plain(&[DEVICE3, DEVICE4]),
                ),
            ],
        ),
        five_of_four(
            "check-combinations-within-single-request-many-pools",
            [
                (SLICE1, POOL1, DEVICE1),
                (SLICE2, POOL2, DEVICE2),
                (SLICE3, POOL3, DEVICE3),
                (SLICE4, POOL4, DEVICE4),
            ]
            .iter()
            .map(|(s, p, d)| slice(s, NODE1, (p, 1, 1), DRIVER_A, plain(&[d])))
            .collect(),
        ),
        Case {
            name: "check-combinations-with-backtracking",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![exact(REQ1, CLASS_A, 2, &[]), exact(REQ2, CLASS_A, 1, &[&x])],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![
                typed(DEVICE1, "X"),
                typed(DEVICE2, "Y"),
                typed(DEVICE3, "Y"),
            ]),
            want: Want::Results(vec![on_node1(&[
                (REQ1, DRIVER_A, POOL1, DEVICE2),
                (REQ1, DRIVER_A, POOL1, DEVICE3),
                (REQ2, DRIVER_A, POOL1, DEVICE1),
            ])]),
            ..Case::default()
        },
        Case {
            name: "check-combinations-with-backtracking-across-slices-and-pools",
            want: Want::Skip(BINDING_CONDITIONS),
            ..Case::default()
        },
        Case {
            name: "check-combinations-with-prioritized-list",
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    first(
                        REQ1,
                        vec![sub(SUB0, CLASS_A, 3, &[&y]), sub(SUB1, CLASS_A, 2, &[])],
                    ),
                    first(
                        REQ2,
                        vec![sub(SUB0, CLASS_A, 2, &[]), sub(SUB1, CLASS_A, 1, &[&x])],
                    ),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool1_of(vec![
                typed(DEVICE1, "X"),
                typed(DEVICE2, "Y"),
                typed(DEVICE3, "Y"),
            ]),
            want: Want::Results(vec![on_node1(&[
                ("req-1/subReq-1", DRIVER_A, POOL1, DEVICE2),
                ("req-1/subReq-1", DRIVER_A, POOL1, DEVICE3),
                ("req-2/subReq-1", DRIVER_A, POOL1, DEVICE1),
            ])]),
            ..Case::default()
        },
    ]
}

#[test]
fn upstream_allocator_cases() {
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    let cases = cases();
    let total = cases.len();
    for case in cases {
        assert!(names.insert(case.name), "case {} twice", case.name);
        if let Want::Skip(reason) = case.want {
            skipped.push(format!("{}: {reason}", case.name));
            continue;
        }
        let allocator = Allocator::new(
            case.node.clone(),
            &case.slices,
            &case.classes,
            &case.allocated,
        );
        let claims: Vec<&ResourceClaim> = case.claims.iter().collect();
        let got = allocator.allocate(&claims);
        let verdict = match (&got, &case.want) {
            (Ok(Some(results)), Want::Results(want)) => {
                let got: Vec<Value> = results
                    .iter()
                    .map(|r| normalized(serde_json::to_value(r).expect("json")))
                    .collect();
                let want: Vec<Value> = want.iter().cloned().map(normalized).collect();
                (got == want).then_some(()).ok_or(format!(
                    "got {got:#}\nwant {want:#}",
                    got = json!(got),
                    want = json!(want)
                ))
            }
            (Ok(None), Want::NoFit) => Ok(()),
            (Err(error), Want::Error(part) | Want::Adapted { ours: part, .. }) => {
                let text = error.to_string();
                text.contains(part)
                    .then_some(())
                    .ok_or(format!("error {text:?}, want {part:?}"))
            }
            (got, _) => Err(format!("got {got:?}")),
        };
        if let Err(message) = verdict {
            failures.push(format!("{}: {message}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {total} cases fail:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // Every case of upstream's table is here, run or skipped.
    assert_eq!(total, 213, "upstream's table has 213 cases");
    // Skipped cases are counted so that a newly skipped one is a visible change.
    assert_eq!(skipped.len(), 46, "{skipped:#?}");
}
