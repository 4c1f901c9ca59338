//! The structured allocator's rules, table by table: what fits, what does not, and what is an
//! error, over ResourceSlices shaped as NVIDIA's DRA driver publishes them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};
use tessera_dra::{AllocationError, Allocator, NodeView};

#[path = "allocator/gpu_nic.rs"]
mod gpu_nic;
#[path = "allocator/gpu_test6.rs"]
mod gpu_test6;
#[path = "allocator/upstream.rs"]
mod upstream;

fn node(name: &str) -> NodeView {
    NodeView {
        name: name.into(),
        labels: [("rack".to_string(), "r1".to_string())].into(),
    }
}

/// A GPU device with a PCIe root and optional extra attributes.
fn gpu(name: &str, root: &str, extra: Value) -> Value {
    let mut attributes = json!({
        "type": {"string": "gpu"},
        "uuid": {"string": format!("GPU-{name}")},
        "resource.kubernetes.io/pcieRoot": {"string": root},
    });
    if let (Some(a), Some(e)) = (attributes.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            a.insert(k.clone(), v.clone());
        }
    }
    json!({"name": name, "attributes": attributes, "capacity": {"memory": {"value": "80Gi"}}})
}

fn slice(node: &str, generation: i64, count: i64, devices: Vec<Value>) -> ResourceSlice {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{node}-gpu.nvidia.com-{generation}")},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
            "devices": devices,
        }
    }))
    .unwrap()
}

fn classes() -> Vec<DeviceClass> {
    [
        json!({"metadata": {"name": "gpu.nvidia.com"}, "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
            "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"}}}]}}),
        json!({"metadata": {"name": "mig.nvidia.com"}, "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}}]}}),
        json!({"metadata": {"name": "broken"}, "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]}}),
    ]
    .into_iter()
    .map(|c| serde_json::from_value(c).unwrap())
    .collect()
}

fn claim(name: &str, devices: Value) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ml", "name": name},
        "spec": {"devices": devices},
    }))
    .unwrap()
}

fn one(name: &str, request: Value) -> ResourceClaim {
    claim(name, json!({"requests": [request]}))
}

fn gpus(count: i64) -> Value {
    json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}})
}

/// The allocated claim (for `allocated` lists) with its result.
fn allocated(mut claim: ResourceClaim, allocator: &Allocator) -> ResourceClaim {
    let result = allocator
        .allocate(&[&claim])
        .unwrap()
        .expect("fits")
        .remove(0);
    claim.status = Some(k8s_openapi::api::resource::v1::ResourceClaimStatus {
        allocation: Some(result),
        ..Default::default()
    });
    claim
}

/// Each claim's devices as `request=device`, no fit, or the error.
type Outcome = Result<Option<Vec<Vec<String>>>, String>;

/// The devices of each claim's result, as `request=device`.
fn devices(
    result: &Result<Option<Vec<k8s_openapi::api::resource::v1::AllocationResult>>, AllocationError>,
) -> Outcome {
    match result {
        Err(e) => Err(e.to_string()),
        Ok(None) => Ok(None),
        Ok(Some(results)) => Ok(Some(
            results
                .iter()
                .map(|r| {
                    r.devices
                        .as_ref()
                        .and_then(|d| d.results.as_ref())
                        .into_iter()
                        .flatten()
                        .map(|d| format!("{}={}", d.request, d.device))
                        .collect()
                })
                .collect(),
        )),
    }
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn whole_gpus_counts_constraints_and_selectors() {
    let slices = vec![
        slice(
            "n1",
            1,
            1,
            vec![
                gpu("gpu-0", "pci-a", json!({})),
                gpu("gpu-1", "pci-b", json!({})),
                gpu(
                    "gpu-2",
                    "pci-a",
                    json!({"productName": {"string": "NVIDIA H100 80GB HBM3"}}),
                ),
            ],
        ),
        slice("n2", 1, 1, vec![gpu("gpu-0", "pci-z", json!({}))]),
    ];
    let allocator = Allocator::new(node("n1"), &slices, &classes(), &[]);
    let cases: Vec<(&str, ResourceClaim, Outcome)> = vec![
        (
            "one GPU",
            one("a", gpus(1)),
            Ok(Some(vec![strings(&["gpu=gpu-0"])])),
        ),
        (
            "all three",
            one("b", gpus(3)),
            Ok(Some(vec![strings(&[
                "gpu=gpu-0",
                "gpu=gpu-1",
                "gpu=gpu-2",
            ])])),
        ),
        ("more than the node has", one("c", gpus(4)), Ok(None)),
        (
            "two on one PCIe root",
            claim(
                "d",
                json!({"requests": [gpus(2)], "constraints": [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]}),
            ),
            Ok(Some(vec![strings(&["gpu=gpu-0", "gpu=gpu-2"])])),
        ),
        (
            "two on distinct roots",
            claim(
                "e",
                json!({"requests": [gpus(2)], "constraints": [{"distinctAttribute": "resource.kubernetes.io/pcieRoot"}]}),
            ),
            Ok(Some(vec![strings(&["gpu=gpu-0", "gpu=gpu-1"])])),
        ),
        (
            "a request selector; membership of an unknown domain is false",
            one(
                "f",
                json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [
                {"cel": {"expression": "'productName' in device.attributes['gpu.nvidia.com'] && !('model' in device.attributes['gpu.example.com'])"}}]}}),
            ),
            Ok(Some(vec![strings(&["gpu=gpu-2"])])),
        ),
        (
            "capacity compared as a quantity",
            one(
                "g",
                json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [
                {"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0"}}]}}),
            ),
            Ok(None),
        ),
        (
            "a missing attribute is an error, not a mismatch",
            one(
                "h",
                json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [
                {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == 'x'"}}]}}),
            ),
            Err("claim ml/h: CEL runtime error on device gpu.nvidia.com/n1/gpu-0".into()),
        ),
        (
            "an unknown class",
            one(
                "i",
                json!({"name": "gpu", "exactly": {"deviceClassName": "tpu"}}),
            ),
            Err("claim ml/i: request gpu: device class tpu does not exist".into()),
        ),
        (
            "a class with bad CEL",
            one(
                "j",
                json!({"name": "gpu", "exactly": {"deviceClassName": "broken"}}),
            ),
            Err("claim ml/j: invalid CEL expression".into()),
        ),
        (
            "neither exactly nor firstAvailable",
            one("k", json!({"name": "gpu"})),
            Err(
                "claim ml/k: request gpu: exactly one of exactly or firstAvailable must be set"
                    .into(),
            ),
        ),
        (
            "firstAvailable falls back in order",
            one(
                "l",
                json!({"name": "gpu", "firstAvailable": [
                {"name": "four", "deviceClassName": "gpu.nvidia.com", "count": 4},
                {"name": "two", "deviceClassName": "gpu.nvidia.com", "count": 2}]}),
            ),
            // Two on one PCIe root beat the first two found.
            Ok(Some(vec![strings(&["gpu/two=gpu-0", "gpu/two=gpu-2"])])),
        ),
        (
            "allocationMode All",
            one(
                "m",
                json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}),
            ),
            Ok(Some(vec![strings(&[
                "gpu=gpu-0",
                "gpu=gpu-1",
                "gpu=gpu-2",
            ])])),
        ),
    ];
    for (what, claim, want) in cases {
        let got = devices(&allocator.allocate(&[&claim]));
        match (&got, &want) {
            (Err(got), Err(want)) => assert!(got.starts_with(want.as_str()), "{what}: {got}"),
            _ => assert_eq!(got, want, "{what}"),
        }
    }
}

/// `first` allocated on an empty n1.
fn allocator_first(slices: &[ResourceSlice]) -> ResourceClaim {
    let empty = Allocator::new(node("n1"), slices, &classes(), &[]);
    allocated(one("first", gpus(1)), &empty)
}

#[test]
fn allocated_devices_admin_access_and_several_claims() {
    let slices = vec![slice(
        "n1",
        1,
        1,
        vec![gpu("gpu-0", "a", json!({})), gpu("gpu-1", "a", json!({}))],
    )];
    let empty = Allocator::new(node("n1"), &slices, &classes(), &[]);
    let first = allocated(one("first", gpus(1)), &empty);
    let allocator = Allocator::new(node("n1"), &slices, &classes(), &[first]);
    // The allocated GPU is skipped; a pod's two claims share nothing.
    assert_eq!(
        devices(&allocator.allocate(&[&one("x", gpus(1))])),
        Ok(Some(vec![strings(&["gpu=gpu-1"])]))
    );
    assert_eq!(
        devices(&allocator.allocate(&[&one("x", gpus(1)), &one("y", gpus(1))])),
        Ok(None)
    );
    assert_eq!(
        devices(&allocator.allocate(&[&one("all", json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}))])),
        Ok(None),
        "All fails when a matching device is in use"
    );
    // Admin access ignores other claims' allocations.
    let admin = one(
        "admin",
        json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "adminAccess": true, "allocationMode": "All"}}),
    );
    let result = allocator.allocate(&[&admin]).unwrap().expect("fits");
    assert_eq!(
        devices(&Ok(Some(result.clone()))),
        Ok(Some(vec![strings(&["gpu=gpu-0", "gpu=gpu-1"])]))
    );
    let devices_result = result[0].devices.as_ref().unwrap();
    assert!(
        devices_result
            .results
            .as_ref()
            .unwrap()
            .iter()
            .all(|r| r.admin_access == Some(true))
    );
    // Class configuration comes first, once, then the node selector pins the node.
    let config = devices_result.config.as_ref().unwrap();
    assert_eq!((config[0].source.as_str(), config.len()), ("FromClass", 1));
    // The free-device bound a scheduler uses to skip the search agrees with the allocator.
    let gathered = tessera_dra::pools::gather(&slices, &node("n1"));
    let held =
        tessera_dra::allocator::devices_in_use(std::slice::from_ref(&allocator_first(&slices)));
    assert_eq!(
        tessera_dra::allocator::free_local_devices(&gathered, &held),
        Some(1)
    );
    let needed = |claims: &[&ResourceClaim]| tessera_dra::allocator::devices_needed(claims);
    assert_eq!(
        needed(&[&one("x", gpus(1)), &one("y", gpus(1))]),
        2,
        "more than the 1 free: the allocator says no too"
    );
    assert_eq!(needed(&[&one("x", gpus(3))]), 3);
    assert_eq!(needed(&[&admin]), 0, "admin access takes nothing whole");
    assert_eq!(
        needed(&[&one(
            "f",
            json!({"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 4},
            {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 2}]})
        )]),
        2,
        "the cheapest alternative"
    );
    let selector = result[0].node_selector.as_ref().unwrap();
    assert_eq!(
        selector.node_selector_terms[0]
            .match_fields
            .as_ref()
            .unwrap()[0]
            .values,
        Some(strings(&["n1"]))
    );
}

#[test]
fn pools_generations_taints_and_reach() {
    let tainted = json!({"name": "gpu-1", "attributes": {"type": {"string": "gpu"}},
        "taints": [{"key": "nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]});
    let informational = json!({"name": "gpu-2", "attributes": {"type": {"string": "gpu"}},
        "taints": [{"key": "nvidia.com/note", "effect": "None"}]});
    // A second pool on n1 still being published: 1 of 2 slices.
    let mut incomplete = slice("n1-extra", 1, 2, vec![gpu("gpu-9", "a", json!({}))]);
    incomplete.spec.node_name = Some("n1".into());
    let slices = vec![
        slice("n1", 1, 1, vec![gpu("old-0", "a", json!({}))]),
        slice("n1", 2, 1, vec![tainted, informational]),
        incomplete,
    ];
    let allocator = Allocator::new(node("n1"), &slices, &classes(), &[]);
    assert_eq!(
        devices(&allocator.allocate(&[&one("a", gpus(1))])),
        Ok(Some(vec![strings(&["gpu=gpu-2"])])),
        "the old generation is ignored, the NoSchedule-tainted GPU skipped, effect None is not blocking"
    );
    assert_eq!(
        devices(&allocator.allocate(&[&one("b", gpus(2))])),
        Ok(None)
    );
    let tolerating = one(
        "c",
        json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2,
        "tolerations": [{"key": "nvidia.com/xid", "operator": "Exists", "effect": "NoSchedule"}]}}),
    );
    assert_eq!(
        devices(&allocator.allocate(&[&tolerating])),
        Ok(Some(vec![strings(&["gpu=gpu-1", "gpu=gpu-2"])]))
    );
    let all = one(
        "d",
        json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}),
    );
    assert_eq!(
        devices(&allocator.allocate(&[&all])),
        Err("claim ml/d: request gpu asks for all devices, but resource pool gpu.nvidia.com/n1-extra is currently being updated".into())
    );
    // Another node reaches none of n1's devices.
    let elsewhere = Allocator::new(node("n3"), &slices, &classes(), &[]);
    assert!(elsewhere.pools().is_empty());
    assert_eq!(
        devices(&elsewhere.allocate(&[&one("e", gpus(1))])),
        Ok(None)
    );
}

/// Dynamic MIG as NVIDIA publishes it: one counter set per GPU with eight memory slices; the
/// full GPU consumes all of them, a 3g.40gb placement four, a 1g.10gb placement one.
fn partitionable() -> Vec<ResourceSlice> {
    let consumes = |slices: std::ops::Range<u32>| {
        let counters: serde_json::Map<String, Value> = slices
            .map(|i| (format!("memorySlice{i}"), json!({"value": "1"})))
            .collect();
        json!([{"counterSet": "gpu-0-counter-set", "counters": counters}])
    };
    let mig = |name: &str, profile: &str, slices: std::ops::Range<u32>| {
        json!({"name": name, "attributes": {"type": {"string": "mig"}, "profile": {"string": profile},
            "parentUUID": {"string": "GPU-0"}}, "consumesCounters": consumes(slices)})
    };
    let counters: serde_json::Map<String, Value> = (0..8)
        .map(|i| (format!("memorySlice{i}"), json!({"value": "1"})))
        .collect();
    vec![serde_json::from_value(json!({
        "metadata": {"name": "n1-gpu-0"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "sharedCounters": [{"name": "gpu-0-counter-set", "counters": counters}],
            "devices": [
                {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}, "consumesCounters": consumes(0..8)},
                mig("gpu-0-mig-3g40gb-0", "3g.40gb", 0..4),
                mig("gpu-0-mig-3g40gb-4", "3g.40gb", 4..8),
                mig("gpu-0-mig-1g10gb-6", "1g.10gb", 6..7),
            ]}
    }))
    .unwrap()]
}

#[test]
fn partitionable_devices_share_counters() {
    let slices = partitionable();
    let profile = |name: &str, profile: &str| {
        json!({"name": name, "exactly": {"deviceClassName": "mig.nvidia.com", "selectors": [
            {"cel": {"expression": format!("device.attributes['gpu.nvidia.com'].profile == '{profile}'")}}]}})
    };
    let empty = Allocator::new(node("n1"), &slices, &classes(), &[]);
    // Two 3g halves fit together with a matchAttribute on the parent; a 1g does not fit beside them.
    let halves = claim(
        "halves",
        json!({"requests": [profile("a", "3g.40gb"), profile("b", "3g.40gb")],
        "constraints": [{"requests": [], "matchAttribute": "gpu.nvidia.com/parentUUID"}]}),
    );
    assert_eq!(
        devices(&empty.allocate(&[&halves])),
        Ok(Some(vec![strings(&[
            "a=gpu-0-mig-3g40gb-0",
            "b=gpu-0-mig-3g40gb-4"
        ])]))
    );
    let three = claim(
        "three",
        json!({"requests": [profile("a", "3g.40gb"), profile("b", "3g.40gb"), profile("c", "1g.10gb")]}),
    );
    assert_eq!(devices(&empty.allocate(&[&three])), Ok(None));
    // With the first half allocated, the whole GPU no longer fits, the 1g still does.
    let first = allocated(
        claim("first", json!({"requests": [profile("a", "3g.40gb")]})),
        &empty,
    );
    let allocator = Allocator::new(node("n1"), &slices, &classes(), &[first]);
    assert_eq!(
        devices(&allocator.allocate(&[&one("whole", gpus(1))])),
        Ok(None)
    );
    assert_eq!(
        devices(&allocator.allocate(&[&claim(
            "small",
            json!({"requests": [profile("c", "1g.10gb")]})
        )])),
        Ok(Some(vec![strings(&["c=gpu-0-mig-1g10gb-6"])]))
    );
}

#[test]
fn partitions_pack_onto_gpus_already_in_use() {
    // Two partitionable GPUs, each with two 1g placements; one placement of gpu-1 is taken.
    let counters = |gpu: usize| -> Value {
        let c: serde_json::Map<String, Value> = (0..2)
            .map(|i| (format!("memorySlice{i}"), json!({"value": "1"})))
            .collect();
        json!({"name": format!("gpu-{gpu}-counter-set"), "counters": c})
    };
    let device = |gpu: usize, slot: usize| {
        json!({"name": format!("gpu-{gpu}-mig-1g-{slot}"), "attributes": {"type": {"string": "mig"}},
            "consumesCounters": [{"counterSet": format!("gpu-{gpu}-counter-set"), "counters": {format!("memorySlice{slot}"): {"value": "1"}}}]})
    };
    let slice: ResourceSlice = serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "sharedCounters": [counters(0), counters(1)],
        "devices": [device(0, 0), device(0, 1), device(1, 0), device(1, 1)]}}))
    .unwrap();
    let slices = vec![slice];
    let mig = || {
        one(
            "m",
            json!({"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com"}}),
        )
    };
    let mut taken = one(
        "taken",
        json!({"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com"}}),
    );
    taken.status = Some(serde_json::from_value(json!({"allocation": {"devices": {"results": [
        {"request": "mig", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1-mig-1g-0"}]}}})).unwrap());
    let empty = Allocator::new(node("n1"), &slices, &classes(), &[]);
    assert_eq!(
        devices(&empty.allocate(&[&mig()])),
        Ok(Some(vec![strings(&["mig=gpu-0-mig-1g-0"])]))
    );
    let busy = Allocator::new(node("n1"), &slices, &classes(), &[taken]);
    assert_eq!(
        devices(&busy.allocate(&[&mig()])),
        Ok(Some(vec![strings(&["mig=gpu-1-mig-1g-1"])])),
        "the partly used GPU takes the partition; gpu-0 stays whole"
    );
}

#[test]
fn devices_allowing_multiple_allocations_share_their_capacity() {
    let shared: ResourceSlice = serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "allowMultipleAllocations": true,
            "attributes": {"type": {"string": "gpu"}},
            "capacity": {"memory": {"value": "80Gi", "requestPolicy": {"default": "10Gi",
                "validRange": {"min": "10Gi", "max": "80Gi", "step": "10Gi"}}}}}]}}))
    .unwrap();
    let slices = vec![shared];
    let asking = |name: &str, memory: Option<&str>| {
        let mut request = json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}});
        if let Some(memory) = memory {
            request["exactly"]["capacity"] = json!({"requests": {"memory": memory}});
        }
        one(name, request)
    };
    let allocate = |held: &[ResourceClaim], claim: &ResourceClaim| {
        Allocator::new(node("n1"), &slices, &classes(), held)
            .allocate(&[claim])
            .unwrap()
    };
    // 35Gi rounds up to 40Gi: two of them share the GPU, a third does not fit.
    let first = allocate(&[], &asking("a", Some("35Gi")))
        .expect("fits")
        .remove(0);
    let result = &first.devices.as_ref().unwrap().results.as_ref().unwrap()[0];
    assert_eq!(result.device, "gpu-0");
    assert!(result.share_id.is_some());
    assert_eq!(
        result.consumed_capacity.as_ref().unwrap()["memory"].0,
        "40Gi"
    );
    let mut a = asking("a", Some("35Gi"));
    a.status = Some(k8s_openapi::api::resource::v1::ResourceClaimStatus {
        allocation: Some(first),
        ..Default::default()
    });
    let second = allocate(std::slice::from_ref(&a), &asking("b", Some("40Gi")))
        .expect("room for another 40Gi");
    let mut b = asking("b", Some("40Gi"));
    b.status = Some(k8s_openapi::api::resource::v1::ResourceClaimStatus {
        allocation: Some(second.into_iter().next().unwrap()),
        ..Default::default()
    });
    let held = [a, b];
    assert!(
        allocate(&held, &asking("c", Some("1Gi"))).is_none(),
        "80Gi taken"
    );
    // Without a request the policy's default is consumed; beyond the range nothing fits.
    let c = allocate(&held[..1], &asking("c", None))
        .expect("the default 10Gi")
        .remove(0);
    assert_eq!(
        c.devices.unwrap().results.unwrap()[0]
            .consumed_capacity
            .as_ref()
            .unwrap()["memory"]
            .0,
        "10Gi"
    );
    assert!(allocate(&[], &asking("d", Some("90Gi"))).is_none());
}

#[test]
fn shares_go_to_the_fullest_shared_device_that_fits() {
    let device = |name: &str| {
        json!({"name": name, "allowMultipleAllocations": true,
            "attributes": {"type": {"string": "gpu"}},
            "capacity": {"memory": {"value": "80Gi"}}})
    };
    let shared: ResourceSlice = serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "devices": [device("gpu-0"), device("gpu-1")]}}))
    .unwrap();
    let slices = vec![shared];
    let asking = |name: &str, memory: &str| {
        one(
            name,
            json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                "capacity": {"requests": {"memory": memory}}}}),
        )
    };
    let holding = |name: &str, memory: &str, device: &str| {
        let mut claim = asking(name, memory);
        claim.status = Some(
            serde_json::from_value(json!({"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": device,
             "shareID": format!("{name}-share"), "consumedCapacity": {"memory": memory}}]}}}))
            .unwrap(),
        );
        claim
    };
    let device_for = |held: &[ResourceClaim], memory: &str| {
        let allocation = Allocator::new(node("n1"), &slices, &classes(), held)
            .allocate(&[&asking("new", memory)])
            .unwrap()
            .expect("fits")
            .remove(0);
        allocation.devices.unwrap().results.unwrap()[0]
            .device
            .clone()
    };
    // Empty: the first device.
    assert_eq!(device_for(&[], "30Gi"), "gpu-0");
    // gpu-1 holds 40Gi: the 30Gi share goes beside it (best fit), gpu-0 stays whole.
    let forty = [holding("a", "40Gi", "gpu-1")];
    assert_eq!(device_for(&forty, "30Gi"), "gpu-1");
    // gpu-1 holds 60Gi: 30Gi no longer fits there.
    let sixty = [holding("a", "60Gi", "gpu-1")];
    assert_eq!(device_for(&sixty, "30Gi"), "gpu-0");
    // Both partly used: the fuller one that fits.
    let both = [holding("a", "20Gi", "gpu-0"), holding("b", "40Gi", "gpu-1")];
    assert_eq!(device_for(&both, "30Gi"), "gpu-1");
}

#[test]
fn deallocated_claims_give_their_devices_back() {
    use tessera_dra::DeviceId;
    use tessera_dra::allocator::{DevicesInUse, add_in_use, remove_in_use};
    let allocation: k8s_openapi::api::resource::v1::AllocationResult =
        serde_json::from_value(json!({"devices": {"results": [
            {"request": "a", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"},
            {"request": "b", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1",
             "shareID": "s1", "consumedCapacity": {"memory": "40Gi"}}]}}))
        .unwrap();
    let id = |device: &str| DeviceId {
        driver: "gpu.nvidia.com".into(),
        pool: "n1".into(),
        device: device.into(),
    };
    let mut in_use = DevicesInUse::default();
    add_in_use(&mut in_use, Some(&allocation));
    add_in_use(&mut in_use, Some(&allocation));
    assert!(in_use.contains(&id("gpu-0")));
    assert_eq!(in_use.shared[&id("gpu-1")]["memory"].to_canonical(), "80Gi");
    remove_in_use(&mut in_use, Some(&allocation));
    assert!(!in_use.contains(&id("gpu-0")));
    assert_eq!(in_use.shared[&id("gpu-1")]["memory"].to_canonical(), "40Gi");
    remove_in_use(&mut in_use, Some(&allocation));
    assert!(
        in_use.shared.is_empty(),
        "a share no claim holds is forgotten"
    );
}

/// Verdicts shared across allocations are keyed by a selector's identity: a class compiled
/// after the compile cache started over (its predecessor's program freed, its memory free to
/// be reused) must be judged afresh, never by the verdicts of the expression it replaced.
#[test]
fn shared_verdicts_never_outlive_their_selector() {
    use tessera_dra::allocator::{DeviceClasses, SelectorVerdicts, devices_in_use};
    use tessera_dra::selector::{COMPILE_CACHE_LIMIT, Selector};
    let slices = vec![slice(
        "n1",
        1,
        1,
        vec![
            gpu("gpu-0", "pci-a", json!({"index": {"int": 0}})),
            gpu("gpu-1", "pci-b", json!({"index": {"int": 1}})),
        ],
    )];
    let pools = tessera_dra::pools::gather(&slices, &node("n1"));
    let verdicts = SelectorVerdicts::default();
    let in_use = devices_in_use(&[]);
    let class = |index: i64| -> DeviceClass {
        serde_json::from_value(json!({"metadata": {"name": "gpu.nvidia.com"}, "spec": {
            "selectors": [{"cel": {"expression": format!("device.attributes['gpu.nvidia.com'].index == {index}")}}]}}))
        .unwrap()
    };
    let claim = one("a", gpus(1));
    for (round, index) in [0, 1, 0, 1].into_iter().enumerate() {
        let classes = DeviceClasses::new(&[class(index)]);
        let allocator = Allocator::over_pools(node("n1"), &pools, &classes, &in_use, &verdicts);
        assert_eq!(
            devices(&allocator.allocate(&[&claim])),
            Ok(Some(vec![vec![format!("gpu=gpu-{index}")]])),
            "round {round}"
        );
        drop(allocator);
        drop(classes);
        // Start the compile cache over, so the class's program is freed.
        for filler in 0..=COMPILE_CACHE_LIMIT {
            Selector::compile(&format!("device.driver == 'filler-{round}-{filler}'")).unwrap();
        }
    }
}
