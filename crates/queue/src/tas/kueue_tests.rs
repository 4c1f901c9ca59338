//! Kueue's `TestFindTopologyAssignments` table (pkg/cache/scheduler/tas_cache_test.go at
//! kueue ff69552), ported to JSON by `tools/port-kueue-tas-cases.py`: the same nodes, pods,
//! levels and PodSets must give the same assignments and reasons. Cases the port marks with
//! `skip` use what the core does not port (see `tas`'s module doc); their count is pinned so
//! a regenerated table cannot silently drop cases.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use serde_json::Value;
use tessera_model::quantity::Quantity;

use crate::amount::resource_value;
use crate::tas::request::{
    PodSetTasRequest, PodSetTasResult, SliceConstraint, TopologyAssignment,
    TopologyDomainAssignment, TopologyRequest,
};
use crate::tas::snapshot::{SearchOptions, TasSnapshot};
use crate::tas::tree::TopologyNode;
use crate::workload::Requests;

const TABLE: &str = include_str!("testdata/kueue_find_topology_assignments.json");

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item.as_str().map(str::to_owned))
        .collect()
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// Quantities as strings ("1Gi", "600m") or canonical integers (Kueue's int64 requests).
fn requests(value: &Value) -> Requests {
    value
        .as_object()
        .into_iter()
        .flatten()
        .map(|(resource, amount)| {
            let canonical = match amount {
                Value::String(text) => {
                    let quantity: Quantity = text.parse().expect("quantity in the table");
                    resource_value(resource, &quantity)
                }
                other => other.as_i64().expect("integer request"),
            };
            (resource.clone(), canonical)
        })
        .collect()
}

fn node(value: &Value) -> TopologyNode {
    TopologyNode {
        name: value["name"].as_str().unwrap_or_default().to_owned(),
        labels: string_map(&value["labels"]),
        allocatable: requests(&value["allocatable"]),
        taints: value["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|taint| Taint {
                key: taint["key"].as_str().unwrap_or_default().to_owned(),
                value: taint["value"].as_str().map(str::to_owned),
                effect: taint["effect"].as_str().unwrap_or_default().to_owned(),
                time_added: None,
            })
            .collect(),
        schedulable_and_ready: value["schedulableAndReady"].as_bool().unwrap_or(false),
    }
}

fn toleration(value: &Value) -> Toleration {
    let text = |key: &str| value[key].as_str().map(str::to_owned);
    Toleration {
        key: text("Key"),
        operator: text("Operator"),
        value: text("Value"),
        effect: text("Effect"),
        toleration_seconds: None,
    }
}

fn topology_request(value: &Value) -> Option<TopologyRequest> {
    if value.is_null() {
        return None;
    }
    Some(TopologyRequest {
        required: value["required"].as_str().map(str::to_owned),
        preferred: value["preferred"].as_str().map(str::to_owned),
        unconstrained: value["unconstrained"].as_bool().unwrap_or(false),
        slices: value["slices"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|layer| SliceConstraint {
                topology: layer["topology"].as_str().unwrap_or_default().to_owned(),
                size: i32::try_from(layer["size"].as_i64().unwrap_or(0)).unwrap_or(0),
            })
            .collect(),
    })
}

fn assignment(value: &Value) -> Option<TopologyAssignment> {
    if value.is_null() {
        return None;
    }
    Some(TopologyAssignment {
        levels: strings(&value["levels"]),
        domains: value["domains"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|domain| TopologyDomainAssignment {
                values: strings(&domain["values"]),
                count: i32::try_from(domain["count"].as_i64().unwrap_or(0)).unwrap_or(0),
            })
            .collect(),
    })
}

/// Runs one case; `Err` describes the mismatch.
fn run(case: &Value) -> Result<(), String> {
    let levels = strings(&case["levels"]);
    let nodes: Vec<TopologyNode> = case["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(node)
        .collect();
    let mut snapshot = TasSnapshot::new(
        "default",
        &levels,
        &string_map(&case["nodeLabels"]),
        &[],
        &nodes,
    );
    for pod in case["pods"].as_array().into_iter().flatten() {
        let node = pod["node"].as_str().unwrap_or_default();
        let terminated = matches!(pod["phase"].as_str(), Some("Succeeded" | "Failed"));
        if !node.is_empty() && !terminated {
            snapshot.add_non_tas_pod(node, &requests(&pod["requests"]));
        }
    }
    for usage in case["priorOwnUsage"].as_array().into_iter().flatten() {
        let domain = TopologyAssignment {
            levels: levels.clone(),
            domains: vec![TopologyDomainAssignment {
                values: strings(&usage["values"]),
                count: i32::try_from(usage["count"].as_i64().unwrap_or(0)).unwrap_or(0),
            }],
        };
        snapshot.add_assignment(&domain, &requests(&usage["requests"]));
    }
    let mut inputs = Vec::new();
    let mut want = BTreeMap::new();
    for pod_set in case["podSets"].as_array().into_iter().flatten() {
        let name = pod_set["name"].as_str().unwrap_or_default().to_owned();
        let topology_request = topology_request(&pod_set["topologyRequest"]);
        inputs.push(PodSetTasRequest {
            name: name.clone(),
            count: i32::try_from(pod_set["count"].as_i64().unwrap_or(0)).unwrap_or(0),
            single_pod_requests: requests(&pod_set["requests"]),
            implied: topology_request.is_none(),
            topology_request,
            node_selector: string_map(&pod_set["nodeSelector"]),
            required_affinity: Vec::new(),
            tolerations: pod_set["tolerations"]
                .as_array()
                .into_iter()
                .flatten()
                .map(toleration)
                .collect(),
            group: pod_set["group"].as_str().map(str::to_owned),
        });
        want.insert(
            name,
            PodSetTasResult {
                assignment: assignment(&pod_set["wantAssignment"]),
                failure_reason: pod_set["wantReason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            },
        );
    }
    let got = snapshot.find_topology_assignments(&inputs, &SearchOptions::default());
    if got == want {
        Ok(())
    } else {
        Err(format!("want {want:#?}\n got {got:#?}"))
    }
}

#[test]
fn kueue_find_topology_assignments_table() {
    let table: Vec<Value> = serde_json::from_str(TABLE).expect("table parses");
    let mut failures = Vec::new();
    let mut ported = 0;
    for case in &table {
        if case.get("skip").is_some() {
            continue;
        }
        ported += 1;
        if let Err(diff) = run(case) {
            failures.push(format!("{}: {diff}", case["name"]));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ported} cases differ:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert_eq!(
        (table.len(), ported),
        (140, 94),
        "cases in the table, cases ported"
    );
}
