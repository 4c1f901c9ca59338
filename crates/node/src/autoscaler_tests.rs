use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;
use crate::topology::Topology;

const TOPOLOGY: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- name: cpu
  count: 1
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
- name: burst
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels: {tessera.dev/pool: burst}
  autoscaling: {min: 1, max: 3, provisioningDelay: 10s}
"#;

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + seconds)
}

fn autoscaler() -> Autoscaler {
    let topology = Topology::parse(TOPOLOGY).expect("topology");
    Autoscaler::new(topology.autoscaled_pools())
}

fn template(name: &str, cpu: &str, selector: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns"}, "template": {"spec": {
        "nodeSelector": selector,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}})
}

fn request(class: &str, count: i64) -> Value {
    json!({"metadata": {"name": "wl-prov-1", "namespace": "ns"},
        "spec": {"provisioningClassName": class,
            "podSets": [{"podTemplateRef": {"name": "ppt"}, "count": count}]}})
}

fn with_conditions(mut request: Value, actions: &[Action]) -> Value {
    for action in actions {
        if let Action::RequestConditions(_, _, list) = action {
            request["status"]["conditions"] = json!(list);
        }
    }
    request
}

/// A step summed up: `register <node>`, `remove <node>`, `<condition>=<status>/<reason>`.
fn summary(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .flat_map(|action| match action {
            Action::Register(spec) => vec![format!("register {}", spec.name)],
            Action::Remove(name) => vec![format!("remove {name}")],
            Action::RequestConditions(_, _, list) => list
                .iter()
                .map(|c| {
                    format!(
                        "{}={}/{}",
                        c["type"].as_str().unwrap_or_default(),
                        c["status"].as_str().unwrap_or_default(),
                        c["reason"].as_str().unwrap_or_default()
                    )
                })
                .collect(),
        })
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn autoscaled_pools_stand_by_beyond_their_count() {
    let topology = Topology::parse(TOPOLOGY).expect("topology");
    let registered: Vec<String> = topology.nodes().into_iter().map(|n| n.name).collect();
    assert_eq!(registered, ["cpu-1", "burst-1"]);
    let pools = topology.autoscaled_pools();
    let nodes: Vec<(String, u32)> = pools[0]
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.index))
        .collect();
    // Standby nodes take the addresses after every registered node's.
    assert_eq!(
        nodes,
        [
            ("burst-1".to_owned(), 1),
            ("burst-2".to_owned(), 2),
            ("burst-3".to_owned(), 3)
        ]
    );
    assert_eq!(pools[0].nodes[2].labels["tessera.dev/pool"], "burst");
    let standby: Vec<String> = autoscaler().standby().into_iter().map(|n| n.name).collect();
    assert_eq!(standby, ["burst-2", "burst-3"]);
    for (bad, field) in [
        ("autoscaling: {min: 2, max: 3}", "autoscaling"),
        (
            "autoscaling: {min: 0, max: 3, provisioningDelay: soon}",
            "provisioningDelay",
        ),
    ] {
        let text = TOPOLOGY.replace("autoscaling: {min: 1, max: 3, provisioningDelay: 10s}", bad);
        let error = Topology::parse(&text).expect_err(bad).to_string();
        assert!(error.contains(field), "{bad}: {error}");
    }
}

#[test]
fn requests_get_nodes_after_the_delay_and_idle_nodes_go_again() {
    let mut scaler = autoscaler();
    // Three pods of 6 CPUs: one per node; burst-1 is idle, two more are added.
    let templates = [template("ppt", "6", json!({"tessera.dev/pool": "burst"}))];
    let request = request("best-effort-atomic-scale-up.autoscaling.x-k8s.io", 3);
    let registered = names(&["cpu-1", "burst-1"]);
    let none = BTreeSet::new();
    let observe =
        |requests: &'_ [Value], nodes: &'_ BTreeSet<String>, busy: &'_ BTreeSet<String>| {
            let requests: &[Value] = requests;
            (requests.to_vec(), nodes.clone(), busy.clone())
        };
    let (requests, nodes, busy) = observe(std::slice::from_ref(&request), &registered, &none);
    let step = |scaler: &mut Autoscaler,
                requests: &[Value],
                nodes: &BTreeSet<String>,
                busy: &BTreeSet<String>,
                now| {
        let observed = Observed {
            requests,
            pod_templates: &templates,
            nodes,
            busy,
        };
        scaler.step(&observed, now)
    };
    let first = step(&mut scaler, &requests, &nodes, &busy, at(0));
    assert_eq!(
        summary(&first),
        ["Accepted=True/Accepted", "Provisioned=False/Provisioning"]
    );
    let accepted = with_conditions(request.clone(), &first);
    // Nothing new before the delay.
    assert!(
        step(
            &mut scaler,
            std::slice::from_ref(&accepted),
            &nodes,
            &busy,
            at(9)
        )
        .is_empty()
    );
    let ready = step(
        &mut scaler,
        std::slice::from_ref(&accepted),
        &nodes,
        &busy,
        at(10),
    );
    assert_eq!(
        summary(&ready),
        [
            "register burst-2",
            "register burst-3",
            "Accepted=True/Accepted",
            "Provisioned=True/CapacityIsProvisioned"
        ]
    );
    let provisioned = with_conditions(accepted, &ready);
    let all = names(&["cpu-1", "burst-1", "burst-2", "burst-3"]);
    // Booked nodes stay while the request exists, however long.
    assert!(
        step(
            &mut scaler,
            std::slice::from_ref(&provisioned),
            &all,
            &none,
            at(500)
        )
        .is_empty()
    );
    // The request is gone (the Workload finished); burst-3 still runs a pod.
    let busy = names(&["burst-3"]);
    assert!(step(&mut scaler, &[], &all, &busy, at(600)).is_empty());
    let removed = step(&mut scaler, &[], &all, &busy, at(660));
    assert_eq!(summary(&removed), ["remove burst-2"]);
    // burst-1 is the pool's min; burst-3 goes a minute after its pod finished.
    let left = names(&["cpu-1", "burst-1", "burst-3"]);
    assert!(step(&mut scaler, &[], &left, &none, at(700)).is_empty());
    assert_eq!(
        summary(&step(&mut scaler, &[], &left, &none, at(760))),
        ["remove burst-3"]
    );
}

#[test]
fn requests_that_fit_no_pool_wait_and_others_are_left_alone() {
    let cases: Vec<(&str, Value, Value, Vec<&str>)> = vec![
        (
            "more nodes than the pool has left",
            request("check-capacity.autoscaling.x-k8s.io", 4),
            template("ppt", "6", json!({})),
            vec![
                "Accepted=True/Accepted",
                "Provisioned=False/CapacityIsNotFound",
            ],
        ),
        (
            "a pod larger than a node",
            request("check-capacity.autoscaling.x-k8s.io", 1),
            template("ppt", "9", json!({})),
            vec![
                "Accepted=True/Accepted",
                "Provisioned=False/CapacityIsNotFound",
            ],
        ),
        (
            "a selector no autoscaled pool matches",
            request("check-capacity.autoscaling.x-k8s.io", 1),
            template("ppt", "1", json!({"tessera.dev/pool": "cpu"})),
            vec![
                "Accepted=True/Accepted",
                "Provisioned=False/CapacityIsNotFound",
            ],
        ),
        (
            "idle capacity is booked at once",
            request("check-capacity.autoscaling.x-k8s.io", 1),
            template("ppt", "1", json!({})),
            vec![
                "Accepted=True/Accepted",
                "Provisioned=True/CapacityIsProvisioned",
            ],
        ),
        (
            "another class",
            request("queued-provisioning.gke.io", 1),
            template("ppt", "1", json!({})),
            vec![],
        ),
        (
            "a missing PodTemplate",
            request("check-capacity.autoscaling.x-k8s.io", 1),
            template("other", "1", json!({})),
            vec![],
        ),
    ];
    for (name, request, template, want) in cases {
        let mut scaler = autoscaler();
        let nodes = names(&["cpu-1", "burst-1"]);
        let busy = BTreeSet::new();
        let observed = Observed {
            requests: std::slice::from_ref(&request),
            pod_templates: std::slice::from_ref(&template),
            nodes: &nodes,
            busy: &busy,
        };
        assert_eq!(summary(&scaler.step(&observed, at(0))), want, "{name}");
    }
}
