//! Kueue's `pkg/dra` tables (`claims_test.go`'s `Test_GetResourceRequests`, the counter
//! charges of `counters_test.go`) on stored objects, the counters Tessera's own DRA driver
//! publishes for dynamic MIG, and the same job admitted alike with GPUs from a device plugin
//! or from a claim.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::counters::{Consumption, counter_value};
use super::*;
use crate::api::objects::Objects;
use crate::api::pass::{Queues, Settings, pass};
use crate::config::CounterSource;
use crate::workload::PodSet;

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn mapping(name: &str, classes: &[&str]) -> DeviceClassMapping {
    DeviceClassMapping {
        name: name.into(),
        device_class_names: classes.iter().map(|c| (*c).to_owned()).collect(),
        counters: Vec::new(),
    }
}

fn counting(name: &str, classes: &[&str], counter: &str) -> DeviceClassMapping {
    DeviceClassMapping {
        counters: vec![CounterSource {
            name: counter.into(),
            driver: "gpu.nvidia.com".into(),
            device_selector: "device.driver == 'gpu.nvidia.com'".into(),
        }],
        ..mapping(name, classes)
    }
}

/// `{"name": …, "exactly": {…}}` with `ExactCount`.
fn exact(class: &str, count: i64) -> Value {
    json!({"name": "req", "exactly": {"deviceClassName": class, "allocationMode": "ExactCount", "count": count}})
}

fn with_cel(mut request: Value, expression: &str) -> Value {
    request["exactly"]["selectors"] = json!([{"cel": {"expression": expression}}]);
    request
}

fn template(name: &str, requests: Vec<Value>) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ns1"},
        "spec": {"spec": {"devices": {"requests": requests}}}})
}

fn class(name: &str, selector: Option<&str>) -> Value {
    let selectors: Vec<Value> = selector
        .map(|e| json!({"cel": {"expression": e}}))
        .into_iter()
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
        "spec": {"selectors": selectors}})
}

fn slice(name: &str, driver: &str, devices: &[&str]) -> Value {
    let devices: Vec<Value> = devices.iter().map(|d| json!({"name": d})).collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": driver, "allNodes": true,
            "pool": {"name": format!("{name}-pool"), "generation": 1, "resourceSliceCount": 1},
            "devices": devices}})
}

/// A pending Workload in `ns1` whose PodSet `main` has these pod-level claims (name →
/// template) and containers.
fn workload(claims: &[(&str, &str)], containers: Value) -> Value {
    let claims: Vec<Value> = claims
        .iter()
        .map(|(name, template)| json!({"name": name, "resourceClaimTemplateName": template}))
        .collect();
    json!({"metadata": {"name": "wl", "namespace": "ns1", "uid": "wl", "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": containers, "resourceClaims": claims}}}]}})
}

fn pause() -> Value {
    json!([{"name": "c", "image": "pause"}])
}

fn containers_claiming(claims: &[&[&str]]) -> Value {
    let containers: Vec<Value> = claims
        .iter()
        .enumerate()
        .map(|(i, names)| {
            let claims: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
            json!({"name": format!("c{i}"), "image": "pause", "resources": {"claims": claims}})
        })
        .collect();
    json!(containers)
}

/// What a case expects: one pod's requests in PodSet `main`, or the message.
enum Want {
    Requests(&'static [(&'static str, i64)]),
    Error(&'static str),
    /// The message starts with this (it ends with the CEL compiler's words).
    ErrorStarting(&'static str),
}

struct Case {
    name: &'static str,
    workload: Value,
    objects: Vec<Value>,
    mappings: Vec<DeviceClassMapping>,
    want: Want,
}

fn dra_objects(objects: Vec<Value>) -> DraObjects {
    let mut sorted = DraObjects::default();
    for object in objects {
        let list = match object["kind"].as_str() {
            Some("ResourceClaimTemplate") => &mut sorted.resource_claim_templates,
            Some("DeviceClass") => &mut sorted.device_classes,
            _ => &mut sorted.resource_slices,
        };
        list.push(object);
    }
    sorted
}

fn check(case: Case) {
    let workloads = [case.workload];
    let objects = dra_objects(case.objects);
    let resolved = DeviceRequests::resolve(&workloads, &objects, &case.mappings);
    let got = resolved.get("ns1/wl");
    let name = case.name;
    match (case.want, got) {
        (Want::Requests(want), Some(Resolution::Requests(per_pod_set))) => {
            let got: Vec<(&str, i64)> = per_pod_set
                .get("main")
                .into_iter()
                .flatten()
                .map(|(r, v)| (r.as_str(), *v))
                .collect();
            assert_eq!(got, want, "{name}");
        }
        (Want::Error(want), Some(Resolution::Inadmissible { message, requeued })) => {
            assert_eq!(message, want, "{name}");
            assert_eq!(requeued, want, "{name}");
        }
        (Want::ErrorStarting(want), Some(Resolution::Inadmissible { message, .. })) => {
            assert!(
                message.starts_with(want),
                "{name}:\n got {message}\nwant {want}…"
            );
        }
        (_, got) => panic!("{name}: unexpected {got:?}"),
    }
}

fn tmpl1() -> Value {
    template("claim-tmpl-1", vec![exact("test-deviceclass-1", 2)])
}

fn res1() -> Vec<DeviceClassMapping> {
    vec![mapping("res-1", &["test-deviceclass-1"])]
}

#[test]
fn claims_count_as_kueues_get_resource_requests_counts_them() {
    let one_device_driver = || slice("slice-1", "test-driver", &["dev-0", "dev-1"]);
    let cases = vec![
        Case {
            name: "Single claim template with single device",
            workload: workload(&[("req-1", "claim-tmpl-1")], pause()),
            objects: vec![tmpl1()],
            mappings: vec![
                mapping("res-1", &["test-deviceclass-1"]),
                mapping("res-2", &["test-deviceclass-2"]),
            ],
            want: Want::Requests(&[("res-1", 2)]),
        },
        Case {
            name: "Unmapped DeviceClass returns error",
            workload: workload(&[("req-1", "claim-tmpl-1")], pause()),
            objects: vec![tmpl1()],
            mappings: Vec::new(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: Not found: \"DeviceClass test-deviceclass-1 is not mapped in DRA configuration for podset main\"",
            ),
        },
        Case {
            name: "Two containers each using different claim templates",
            workload: workload(
                &[("req-a", "claim-tmpl-1"), ("req-b", "claim-tmpl-2")],
                containers_claiming(&[&["req-a"], &["req-b"]]),
            ),
            objects: vec![
                tmpl1(),
                template("claim-tmpl-2", vec![exact("test-deviceclass-2", 1)]),
            ],
            mappings: vec![
                mapping("res-1", &["test-deviceclass-1"]),
                mapping("res-2", &["test-deviceclass-2"]),
            ],
            want: Want::Requests(&[("res-1", 2), ("res-2", 1)]),
        },
        Case {
            name: "Two containers sharing one claim template",
            workload: workload(
                &[("req-a", "claim-tmpl-1")],
                containers_claiming(&[&["req-a"], &["req-a"]]),
            ),
            objects: vec![tmpl1()],
            mappings: res1(),
            want: Want::Requests(&[("res-1", 2)]),
        },
        Case {
            name: "Init and regular container sharing one template",
            workload: {
                let mut w = workload(&[("rc", "claim-tmpl-1")], containers_claiming(&[&["rc"]]));
                w["spec"]["podSets"][0]["template"]["spec"]["initContainers"] = json!([{"name": "init", "image": "pause", "resources": {"claims": [{"name": "rc"}]}}]);
                w
            },
            objects: vec![tmpl1()],
            mappings: res1(),
            want: Want::Requests(&[("res-1", 2)]),
        },
        Case {
            name: "AllocationMode All returns error",
            workload: workload(&[("req-all", "claim-tmpl-all")], pause()),
            objects: vec![template(
                "claim-tmpl-all",
                vec![
                    json!({"name": "req", "exactly": {"deviceClassName": "test-deviceclass-1", "allocationMode": "All"}}),
                ],
            )],
            mappings: res1(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.allocationMode: Invalid value: \"All\": ResourceClaimTemplate claim-tmpl-all: AllocationMode 'All' is not supported",
            ),
        },
        Case {
            name: "CEL selectors with DeviceClassName counts correctly",
            workload: workload(&[("req-cel", "claim-tmpl-cel")], pause()),
            objects: vec![
                template(
                    "claim-tmpl-cel",
                    vec![with_cel(
                        exact("test-deviceclass-1", 1),
                        "device.driver == \"test-driver\"",
                    )],
                ),
                class("test-deviceclass-1", None),
                one_device_driver(),
            ],
            mappings: res1(),
            want: Want::Requests(&[("res-1", 1)]),
        },
        Case {
            name: "CEL selectors pre-filtered by DeviceClass selectors",
            workload: workload(&[("req-filtered", "claim-tmpl-cel-filtered")], pause()),
            objects: vec![
                template(
                    "claim-tmpl-cel-filtered",
                    vec![with_cel(
                        exact("gpu-class", 1),
                        "device.driver == \"gpu-driver\"",
                    )],
                ),
                class("gpu-class", Some("device.driver == \"gpu-driver\"")),
                slice("gpu-slice", "gpu-driver", &["gpu-0"]),
                slice("nic-slice", "nic-driver", &["nic-0", "nic-1", "nic-2"]),
            ],
            mappings: vec![mapping("res-1", &["gpu-class"])],
            want: Want::Requests(&[("res-1", 1)]),
        },
        Case {
            name: "CEL selectors with unsatisfiable expression returns error",
            workload: workload(&[("req-unsat", "claim-tmpl-unsat")], pause()),
            objects: vec![
                template(
                    "claim-tmpl-unsat",
                    vec![with_cel(
                        exact("test-deviceclass-1", 2),
                        "device.driver == \"nonexistent-driver\"",
                    )],
                ),
                class("test-deviceclass-1", None),
                slice("slice-2", "test-driver", &["dev-0"]),
            ],
            mappings: res1(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.selectors: Internal error: ResourceClaimTemplate claim-tmpl-unsat: insufficient matching devices for CEL selector in DeviceClass test-deviceclass-1: 0 device(s) match in the cluster but 2 requested",
            ),
        },
        Case {
            name: "CEL selectors with insufficient matching devices returns error",
            workload: workload(&[("req-insuf", "claim-tmpl-insuf")], pause()),
            objects: vec![
                template(
                    "claim-tmpl-insuf",
                    vec![with_cel(
                        exact("test-deviceclass-1", 3),
                        "device.driver == \"test-driver\"",
                    )],
                ),
                class("test-deviceclass-1", None),
                one_device_driver(),
            ],
            mappings: res1(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.selectors: Internal error: ResourceClaimTemplate claim-tmpl-insuf: insufficient matching devices for CEL selector in DeviceClass test-deviceclass-1: 2 device(s) match in the cluster but 3 requested",
            ),
        },
        Case {
            name: "Multi-request CEL selectors do not double-count devices",
            workload: workload(&[("req-multi", "claim-tmpl-multi")], pause()),
            objects: vec![
                template(
                    "claim-tmpl-multi",
                    vec![
                        with_cel(
                            exact("test-deviceclass-1", 1),
                            "device.driver == \"test-driver\"",
                        ),
                        with_cel(
                            exact("test-deviceclass-1", 1),
                            "device.driver == \"test-driver\"",
                        ),
                    ],
                ),
                class("test-deviceclass-1", None),
                slice("slice-multi", "test-driver", &["dev-0"]),
            ],
            mappings: res1(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[1].exactly.selectors: Internal error: ResourceClaimTemplate claim-tmpl-multi: insufficient matching devices for CEL selector in DeviceClass test-deviceclass-1: 0 device(s) match in the cluster but 1 requested",
            ),
        },
        Case {
            name: "Invalid CEL selector returns error",
            workload: workload(&[("req-badcel", "claim-tmpl-badcel")], pause()),
            objects: vec![
                template(
                    "claim-tmpl-badcel",
                    vec![with_cel(
                        exact("test-deviceclass-1", 1),
                        "this is not valid CEL!!!",
                    )],
                ),
                class("test-deviceclass-1", None),
            ],
            mappings: res1(),
            want: Want::ErrorStarting(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.selectors: Invalid value: \"null\": ResourceClaimTemplate claim-tmpl-badcel: spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"this is not valid CEL!!!\": CEL compilation failed: ",
            ),
        },
        Case {
            name: "Device constraints are pass-through and counted correctly",
            workload: workload(&[("req-constraints", "claim-tmpl-constraints")], pause()),
            objects: vec![{
                let mut t = template(
                    "claim-tmpl-constraints",
                    vec![
                        exact("test-deviceclass-1", 1),
                        exact("test-deviceclass-1", 1),
                    ],
                );
                t["spec"]["spec"]["devices"]["constraints"] =
                    json!([{"requests": ["gpu-1", "gpu-2"], "matchAttribute": "numa-node"}]);
                t
            }],
            mappings: res1(),
            want: Want::Requests(&[("res-1", 2)]),
        },
        Case {
            name: "FirstAvailable returns error",
            workload: workload(&[("req-first", "claim-tmpl-first")], pause()),
            objects: vec![template(
                "claim-tmpl-first",
                vec![
                    json!({"name": "req", "firstAvailable": [{"name": "a", "deviceClassName": "test-deviceclass-1"}]}),
                ],
            )],
            mappings: res1(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Invalid value: \"null\": ResourceClaimTemplate claim-tmpl-first: FirstAvailable device selection is not supported",
            ),
        },
        Case {
            name: "Exactly and FirstAvailable are nil returns error",
            workload: workload(&[("req-empty", "claim-tmpl-empty")], pause()),
            objects: vec![template("claim-tmpl-empty", vec![json!({"name": "req"})])],
            mappings: res1(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Invalid value: \"null\": ResourceClaimTemplate claim-tmpl-empty: Exactly must be set if FirstAvailable is nil",
            ),
        },
        Case {
            name: "AdminAccess request is skipped with zero quota",
            workload: workload(&[("req-admin", "claim-tmpl-admin")], pause()),
            objects: vec![{
                let mut request = exact("test-deviceclass-1", 1);
                request["exactly"]["adminAccess"] = json!(true);
                template("claim-tmpl-admin", vec![request])
            }],
            mappings: res1(),
            want: Want::Requests(&[]),
        },
        Case {
            name: "Mixed AdminAccess and normal requests counts only normal",
            workload: workload(&[("req-mixed", "claim-tmpl-mixed")], pause()),
            objects: vec![{
                let mut admin = exact("test-deviceclass-1", 1);
                admin["exactly"]["adminAccess"] = json!(true);
                template(
                    "claim-tmpl-mixed",
                    vec![exact("test-deviceclass-1", 2), admin],
                )
            }],
            mappings: res1(),
            want: Want::Requests(&[("res-1", 2)]),
        },
        Case {
            name: "CEL selectors with nonexistent DeviceClass returns error",
            workload: workload(&[("req-noclass", "claim-tmpl-noclass")], pause()),
            objects: vec![
                template(
                    "claim-tmpl-noclass",
                    vec![with_cel(
                        exact("nonexistent-class", 1),
                        "device.driver == \"test-driver\"",
                    )],
                ),
                slice("slice-noclass", "test-driver", &["dev-0"]),
            ],
            mappings: vec![mapping("res-1", &["nonexistent-class"])],
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Internal error: ResourceClaimTemplate claim-tmpl-noclass: failed to get DeviceClass nonexistent-class: deviceclasses.resource.k8s.io \"nonexistent-class\" not found",
            ),
        },
        Case {
            name: "CEL selectors with empty DeviceClassName succeeds",
            workload: workload(&[("req-nodc", "claim-tmpl-nodc")], pause()),
            objects: vec![
                template(
                    "claim-tmpl-nodc",
                    vec![with_cel(exact("", 1), "device.driver == \"test-driver\"")],
                ),
                slice("slice-nodc", "test-driver", &["dev-0"]),
            ],
            mappings: res1(),
            want: Want::Requests(&[]),
        },
        // Beyond the upstream table: what handleDRA and getClaimSpec add.
        Case {
            name: "a missing template is an internal error naming it",
            workload: workload(&[("req-1", "claim-tmpl-1")], pause()),
            objects: Vec::new(),
            mappings: res1(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0]: Internal error: failed to get claim spec for ResourceClaimTemplate claim-tmpl-1 in podset main: resourceclaimtemplates.resource.k8s.io \"claim-tmpl-1\" not found",
            ),
        },
        Case {
            name: "a ResourceClaim by name is not supported",
            workload: {
                let mut w = workload(&[("req-1", "claim-tmpl-1")], pause());
                let claims = &mut w["spec"]["podSets"][0]["template"]["spec"]["resourceClaims"];
                if let Some(claims) = claims.as_array_mut() {
                    claims.push(json!({"name": "req-2", "resourceClaimName": "claim-2"}));
                }
                w
            },
            objects: vec![tmpl1()],
            mappings: res1(),
            want: Want::ErrorStarting(
                "KueueDRAIntegration feature does not support use of resource claims",
            ),
        },
        Case {
            name: "an unset allocation mode is ExactCount and an unset count 1",
            workload: workload(&[("req-1", "claim-tmpl-d")], pause()),
            objects: vec![template(
                "claim-tmpl-d",
                vec![json!({"name": "req", "exactly": {"deviceClassName": "test-deviceclass-1"}})],
            )],
            mappings: res1(),
            want: Want::Requests(&[("res-1", 1)]),
        },
    ];
    for case in cases {
        check(case);
    }
}

/// An H100 node of Tessera's lab with dynamic MIG, as its DRA driver publishes it.
fn dynamic_mig_slices() -> Vec<Value> {
    let catalog = tessera_devices::catalog::Catalog::built_in().expect("catalog");
    let gpu = catalog.gpu("H100-SXM5-80GB").expect("H100");
    let server = catalog.server("dgx-h100").expect("server");
    let mode = tessera_node::hardware::MigMode::Dynamic;
    tessera_node::resource_slice::nvidia_slices("h100-1", &server.gpus[..2], gpu, Some(&mode))
}

fn nvidia_classes() -> Vec<Value> {
    tessera_node::resource_slice::nvidia_device_classes()
}

fn mig_request(profile: &str, count: i64) -> Value {
    with_cel(
        exact("mig.nvidia.com", count),
        &format!("device.attributes['gpu.nvidia.com'].profile == '{profile}'"),
    )
}

#[test]
fn partitionable_devices_count_in_the_counter_units_tesseras_driver_publishes() {
    let memory = || {
        vec![counting(
            "nvidia.com/mig-memory",
            &["mig.nvidia.com", "gpu.nvidia.com"],
            "memorySlice",
        )]
    };
    let with_lab = |mut objects: Vec<Value>| {
        objects.extend(nvidia_classes());
        objects.extend(dynamic_mig_slices());
        objects
    };
    let cases = vec![
        Case {
            name: "a 1g.10gb partition covers one memory slice",
            workload: workload(&[("mig", "small")], pause()),
            objects: with_lab(vec![template("small", vec![mig_request("1g.10gb", 1)])]),
            mappings: memory(),
            want: Want::Requests(&[("nvidia.com/mig-memory", 1)]),
        },
        Case {
            name: "two 3g.40gb partitions cover four slices each",
            workload: workload(&[("mig", "medium")], pause()),
            objects: with_lab(vec![template("medium", vec![mig_request("3g.40gb", 2)])]),
            mappings: memory(),
            want: Want::Requests(&[("nvidia.com/mig-memory", 8)]),
        },
        Case {
            name: "a whole GPU consumes every memory slice of the same pool",
            workload: workload(&[("gpu", "whole")], pause()),
            objects: with_lab(vec![template("whole", vec![exact("gpu.nvidia.com", 1)])]),
            mappings: memory(),
            want: Want::Requests(&[("nvidia.com/mig-memory", 8)]),
        },
        Case {
            name: "a selector matching several profiles charges the largest (Kueue: MAX wins)",
            workload: workload(&[("mig", "any")], pause()),
            objects: with_lab(vec![template(
                "any",
                vec![with_cel(
                    exact("mig.nvidia.com", 1),
                    "device.attributes['gpu.nvidia.com'].profile.startsWith('1g.')",
                )],
            )]),
            mappings: memory(),
            want: Want::Requests(&[("nvidia.com/mig-memory", 2)]),
        },
        Case {
            name: "an exactly named counter is Kueue's: compute slices",
            workload: workload(&[("mig", "medium")], pause()),
            objects: with_lab(vec![template("medium", vec![mig_request("3g.40gb", 1)])]),
            mappings: vec![counting(
                "nvidia.com/mig-compute",
                &["mig.nvidia.com"],
                "computeSlices",
            )],
            want: Want::Requests(&[("nvidia.com/mig-compute", 3)]),
        },
        Case {
            name: "a selector no device of the driver matches fails Kueue's CEL check first",
            workload: workload(&[("mig", "small")], pause()),
            objects: {
                let mut objects = vec![template("small", vec![mig_request("1g.10gb", 1)])];
                objects.extend(nvidia_classes());
                objects
            },
            mappings: memory(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.selectors: Internal error: ResourceClaimTemplate small: insufficient matching devices for CEL selector in DeviceClass mig.nvidia.com: 0 device(s) match in the cluster but 1 requested",
            ),
        },
        Case {
            name: "no device of the driver: too few devices",
            workload: workload(&[("gpu", "whole")], pause()),
            objects: {
                let mut objects = vec![template("whole", vec![exact("gpu.nvidia.com", 1)])];
                objects.extend(nvidia_classes());
                objects
            },
            mappings: memory(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Internal error: insufficient matching devices for counter driver: 0 device(s) match but 1 requested",
            ),
        },
        Case {
            name: "devices without the counter",
            workload: workload(&[("mig", "small")], pause()),
            objects: with_lab(vec![template("small", vec![mig_request("1g.10gb", 1)])]),
            mappings: vec![counting("gpu.memory", &["mig.nvidia.com"], "memory")],
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Internal error: matched devices have no consumesCounters entry for counter \"memory\"",
            ),
        },
        Case {
            name: "an incomplete pool is not counted",
            workload: workload(&[("mig", "small")], pause()),
            objects: {
                let mut objects = vec![template("small", vec![mig_request("1g.10gb", 1)])];
                objects.extend(nvidia_classes());
                // One of the node's two slices.
                objects.extend(dynamic_mig_slices().into_iter().take(1));
                objects
            },
            mappings: memory(),
            want: Want::Error(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Internal error: insufficient matching devices for counter driver: 0 device(s) match but 1 requested",
            ),
        },
    ];
    for case in cases {
        check(case);
    }
}

/// Kueue's computeCounterCharges table (`counters_test.go`): the largest value among the
/// matched devices, times the count, saturating; negative values clamped to 0.
#[test]
fn counter_charges_take_the_largest_value_times_the_count() {
    let consumes = |pairs: &[(&str, i64)]| -> Consumption {
        pairs.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect()
    };
    // (name, devices, counter, count, charge)
    type ChargeCase = (
        &'static str,
        Vec<Consumption>,
        &'static str,
        i64,
        Option<i64>,
    );
    let cases: Vec<ChargeCase> = vec![
        (
            "single device, count=1",
            vec![consumes(&[("memory", 10)])],
            "memory",
            1,
            Some(10),
        ),
        (
            "single device, count=3",
            vec![consumes(&[("memory", 10)])],
            "memory",
            3,
            Some(30),
        ),
        (
            "multiple devices different values, MAX wins",
            vec![consumes(&[("memory", 10)]), consumes(&[("memory", 40)])],
            "memory",
            1,
            Some(40),
        ),
        (
            "counter not in config, skipped",
            vec![consumes(&[("multiprocessors", 14)])],
            "memory",
            1,
            None,
        ),
        (
            "count multiplication saturates instead of overflowing int64",
            vec![consumes(&[("memory", i64::MAX / 2)])],
            "memory",
            3,
            Some(i64::MAX),
        ),
        (
            "Tessera: a family sums its members",
            vec![consumes(&[
                ("memorySlice0", 1),
                ("memorySlice1", 1),
                ("computeSlices", 1),
            ])],
            "memorySlice",
            2,
            Some(4),
        ),
        (
            "Tessera: a counter of the exact name wins over a family",
            vec![consumes(&[("memory", 5), ("memory0", 1)])],
            "memory",
            1,
            Some(5),
        ),
    ];
    for (name, devices, counter, count, want) in cases {
        let largest = devices
            .iter()
            .filter_map(|d| counter_value(d, counter))
            .max();
        let got = largest.map(|l| l.saturating_mul(count));
        assert_eq!(got, want, "{name}");
    }
}

/// Device-plugin resources are extended resources: counted from the containers' requests (or
/// limits) as they are, whatever the name.
#[test]
fn device_plugin_resources_count_as_extended_resources() {
    let cases = [
        (
            "a whole GPU",
            json!({"requests": {"nvidia.com/gpu": "2"}}),
            "nvidia.com/gpu",
            2,
        ),
        (
            "a MIG device",
            json!({"requests": {"nvidia.com/mig-1g.10gb": "3"}}),
            "nvidia.com/mig-1g.10gb",
            3,
        ),
        (
            "limits stand for missing requests",
            json!({"limits": {"nvidia.com/mig-3g.40gb": "1"}}),
            "nvidia.com/mig-3g.40gb",
            1,
        ),
        (
            "AMD",
            json!({"requests": {"amd.com/gpu": "8"}}),
            "amd.com/gpu",
            8,
        ),
    ];
    for (name, resources, resource, want) in cases {
        let spec =
            serde_json::from_value(json!({"containers": [{"name": "c", "resources": resources}]}))
                .expect("a pod spec");
        let pod_set = PodSet::from_template("main", 4, None, &spec);
        assert_eq!(pod_set.requests.get(resource), Some(&want), "{name}");
        let info = WorkloadInfo::new(crate::workload::Workload {
            pod_sets: vec![pod_set],
            ..Default::default()
        });
        assert_eq!(
            info.total_requests[0].requests[resource],
            want * 4,
            "{name}"
        );
    }
}

/// The same training job — 2 pods of 4 GPUs — once with `nvidia.com/gpu` from the device
/// plugin and once with a ResourceClaimTemplate of 4 `gpu.nvidia.com` devices mapped to
/// `nvidia.com/gpu`: under a quota of 8 GPUs the first copy is admitted with the same
/// admission, the second waits with the same message.
#[test]
fn a_job_is_admitted_alike_with_gpus_by_device_plugin_or_by_claim() {
    let plugin = |name: &str| {
        let mut w = workload(
            &[],
            json!([{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]),
        );
        w["metadata"]["name"] = json!(name);
        w["metadata"]["uid"] = json!(name);
        w["spec"]["podSets"][0]["count"] = json!(2);
        w
    };
    let claimed = |name: &str| {
        let mut w = workload(&[("gpus", "four-gpus")], containers_claiming(&[&["gpus"]]));
        w["metadata"]["name"] = json!(name);
        w["metadata"]["uid"] = json!(name);
        w["spec"]["podSets"][0]["count"] = json!(2);
        w
    };
    let outcome = |make: &dyn Fn(&str) -> Value| {
        let mut first = make("first");
        first["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        let mut second = make("second");
        second["metadata"]["creationTimestamp"] = json!("2026-01-01T00:01:00Z");
        let workloads = vec![first, second];
        let dra = DraObjects {
            resource_claim_templates: vec![template("four-gpus", vec![exact("gpu.nvidia.com", 4)])],
            ..Default::default()
        };
        let mappings = vec![mapping("nvidia.com/gpu", &["gpu.nvidia.com"])];
        let objects = Objects {
            flavors: vec![json!({"metadata": {"name": "default"}, "spec": {}})],
            cluster_queues: vec![
                json!({"metadata": {"name": "cq", "generation": 1}, "spec": {
                "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "default", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]}}),
            ],
            local_queues: vec![
                json!({"metadata": {"name": "lq", "namespace": "ns1"}, "spec": {"clusterQueue": "cq"}}),
            ],
            namespaces: vec![json!({"metadata": {"name": "ns1"}})],
            devices: DeviceRequests::resolve(&workloads, &dra, &mappings),
            workloads: crate::api::objects::shared(workloads),
            ..Default::default()
        };
        let written = pass(
            &objects,
            &mut Queues::default(),
            &Settings::default(),
            now(),
        );
        let status = |name: &str| {
            written
                .workloads
                .iter()
                .find(|w| w.name == name)
                .map(|w| w.status.clone())
                .unwrap_or_default()
        };
        (status("first")["admission"].clone(), status("second"))
    };
    let (plugin_admission, plugin_waiting) = outcome(&plugin);
    let (claim_admission, claim_waiting) = outcome(&claimed);
    assert_eq!(
        plugin_admission["podSetAssignments"][0]["resourceUsage"],
        json!({"nvidia.com/gpu": "8"})
    );
    assert_eq!(claim_admission, plugin_admission);
    let message = |status: &Value| {
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == QUOTA_RESERVED)
            .map(|c| c["message"].clone())
    };
    let waiting = message(&plugin_waiting).expect("the second waits");
    assert!(
        waiting
            .as_str()
            .is_some_and(|m| m.contains("insufficient unused quota for nvidia.com/gpu")),
        "{waiting}"
    );
    assert_eq!(message(&claim_waiting), Some(waiting));
    assert_eq!(
        claim_waiting["resourceRequests"],
        plugin_waiting["resourceRequests"]
    );
}

fn condition(status: &Value, kind: &str) -> Value {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
        .cloned()
        .unwrap_or_default()
}

/// What the pass reads and what is written: an inadmissible Workload is left out and gets
/// Kueue's three conditions; once its claims resolve the conditions are removed — ahead of
/// the pass's own writes, which start from the Workload without them — and it is admitted.
#[test]
fn an_inadmissible_workload_is_held_out_and_released_once_resolved() {
    let pending = workload(&[("req-1", "claim-tmpl-1")], pause());
    let dra = DraObjects {
        resource_claim_templates: vec![tmpl1()],
        ..Default::default()
    };
    let unmapped = DeviceRequests::prepare(vec![Arc::new(pending.clone())], &dra, &[], now());
    assert!(unmapped.devices.workload_state(&pending).is_none());
    assert_eq!(unmapped.writes.len(), 1);
    let held = &unmapped.workloads[0];
    let status = &held["status"];
    assert_eq!(
        status["conditions"],
        unmapped.writes[0].status["conditions"]
    );
    assert_eq!(status.get("admission"), None);
    let reserved = condition(status, QUOTA_RESERVED);
    assert_eq!(
        (&reserved["status"], &reserved["reason"]),
        (&json!("False"), &json!("Misconfigured"))
    );
    let requeued = condition(status, REQUEUED);
    assert_eq!(
        (&requeued["status"], &requeued["reason"]),
        (&json!("False"), &json!(INADMISSIBLE))
    );
    assert_eq!(requeued["message"], reserved["message"]);
    assert_eq!(
        condition(status, ADMITTED)["reason"],
        json!("NoReservation")
    );
    // Prepared again, nothing more to write.
    let again = DeviceRequests::prepare(vec![held.clone()], &dra, &[], now());
    assert!(again.writes.is_empty());

    // The mapping added (a restart with the new file): released and admitted in one pass.
    let mut objects = Objects {
        flavors: vec![json!({"metadata": {"name": "default"}, "spec": {}})],
        cluster_queues: vec![
            json!({"metadata": {"name": "cq", "generation": 1}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["res-1"],
            "flavors": [{"name": "default", "resources": [{"name": "res-1", "nominalQuota": "2"}]}]}]}}),
        ],
        local_queues: vec![
            json!({"metadata": {"name": "lq", "namespace": "ns1"}, "spec": {"clusterQueue": "cq"}}),
        ],
        namespaces: vec![json!({"metadata": {"name": "ns1"}})],
        ..Default::default()
    };
    let mapped = DeviceRequests::prepare(vec![held.clone()], &dra, &res1(), now());
    let Some(WorkloadState::Pending(queued)) = mapped.devices.workload_state(&mapped.workloads[0])
    else {
        panic!("pending once resolved");
    };
    assert!(!queued.requeue_held);
    assert_eq!(queued.info.total_requests[0].requests["res-1"], 2);
    objects.workloads = mapped.workloads;
    objects.devices = mapped.devices;
    let decided = pass(
        &objects,
        &mut Queues::default(),
        &Settings::default(),
        now(),
    );
    let mut stored = Value::clone(held);
    for write in mapped.writes.iter().chain(&decided.workloads) {
        lay_over(&mut stored, &write.status);
    }
    let status = &stored["status"];
    assert_eq!(condition(status, QUOTA_RESERVED)["status"], json!("True"));
    assert_eq!(condition(status, ADMITTED)["status"], json!("True"));
    assert_eq!(condition(status, REQUEUED), Value::Null);
    assert_eq!(
        status["admission"]["podSetAssignments"][0]["resourceUsage"],
        json!({"res-1": "2"})
    );

    // A Workload without claims, or holding quota, is not resolved at all.
    let plain = workload(&[], pause());
    let mut reserving = pending.clone();
    reserving["status"] = json!({"conditions": [{"type": "QuotaReserved", "status": "True"}]});
    let none = DeviceRequests::resolve(&[plain, reserving], &dra, &[]);
    assert_eq!(none, DeviceRequests::default());
}

/// Remembering which Workloads name claims between passes changes nothing prepared: the
/// same objects, prepared twice with one memory, answer as a fresh preparation does, and a
/// Workload changed under the same name (a new object) is read again.
#[test]
fn remembered_claim_names_prepare_as_fresh_ones() {
    let dra = DraObjects {
        resource_claim_templates: vec![tmpl1()],
        ..Default::default()
    };
    let claiming = Arc::new(workload(&[("req-1", "claim-tmpl-1")], pause()));
    let mut plain = workload(&[], pause());
    plain["metadata"]["name"] = json!("plain");
    let plain = Arc::new(plain);
    let mut memory = ClaimingWorkloads::default();
    for round in 0..2 {
        let workloads = vec![claiming.clone(), plain.clone()];
        let fresh = DeviceRequests::prepare(workloads.clone(), &dra, &res1(), now());
        let remembered =
            DeviceRequests::prepare_remembering(workloads, &mut memory, &dra, &res1(), now());
        assert_eq!(remembered.writes, fresh.writes, "round {round}");
        assert_eq!(remembered.workloads, fresh.workloads, "round {round}");
        assert!(remembered.devices.get("ns1/wl").is_some(), "round {round}");
    }
    // The claiming Workload replaced by one without claims: nothing resolved for it.
    let replaced = vec![Arc::new(workload(&[], pause())), plain];
    let prepared = DeviceRequests::prepare_remembering(replaced, &mut memory, &dra, &res1(), now());
    assert!(prepared.devices.get("ns1/wl").is_none());
}
