//! The scheduling core, table by table: each filter's verdict and reason, upstream's
//! FailedScheduling message, scoring strategies and preferences, booking decisions, and DRA
//! claims (allocated on the chosen node, pinning their node once allocated).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};
use tessera_scheduler::Scheduler;
use tessera_scheduler::filters::{self, Plugin};
use tessera_scheduler::node_info::{self, NodeInfo};
use tessera_scheduler::resources::Demand;
use tessera_scheduler::score::Strategy;

fn node(name: &str, extra: Value) -> Node {
    let mut node = json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": "a"}},
        "spec": {},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    });
    merge(&mut node, extra);
    serde_json::from_value(node).unwrap()
}

fn pod(name: &str, extra: Value) -> Pod {
    let mut pod = json!({
        "metadata": {"namespace": "ml", "name": name, "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    });
    merge(&mut pod, extra);
    serde_json::from_value(pod).unwrap()
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (k, v) in extra {
                merge(base.entry(k).or_insert(Value::Null), v);
            }
        }
        (base, extra) => *base = extra,
    }
}

fn info(node: &Node, pods: &[Pod]) -> NodeInfo {
    node_info::build(std::slice::from_ref(node), pods).remove(0)
}

#[test]
fn each_filter_rejects_with_upstream_reasons() {
    let busy = pod(
        "busy",
        json!({"spec": {"nodeName": "n", "containers": [{"name": "c",
        "ports": [{"containerPort": 80, "hostPort": 8080}],
        "resources": {"requests": {"cpu": "3500m", "memory": "1Gi"}}}]}}),
    );
    type Case<'a> = (&'a str, Node, Pod, Option<(Plugin, &'a str)>);
    let cases: Vec<Case> = vec![
        ("fits", node("n", json!({})), pod("p", json!({})), None),
        (
            "cordoned",
            node("n", json!({"spec": {"unschedulable": true}})),
            pod("p", json!({})),
            Some((Plugin::NodeUnschedulable, "node(s) were unschedulable")),
        ),
        (
            "cordoned but tolerated",
            node("n", json!({"spec": {"unschedulable": true}})),
            pod(
                "p",
                json!({"spec": {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}}),
            ),
            None,
        ),
        (
            "another node's pod",
            node("n", json!({})),
            pod("p", json!({"spec": {"nodeName": "m"}})),
            Some((
                Plugin::NodeName,
                "node(s) didn't match the requested node name",
            )),
        ),
        (
            "tainted",
            node(
                "n",
                json!({"spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}}),
            ),
            pod("p", json!({})),
            Some((Plugin::TaintToleration, "node(s) had untolerated taint(s)")),
        ),
        (
            "taint tolerated",
            node(
                "n",
                json!({"spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}}),
            ),
            pod(
                "p",
                json!({"spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}),
            ),
            None,
        ),
        (
            "PreferNoSchedule does not filter",
            node(
                "n",
                json!({"spec": {"taints": [{"key": "soft", "effect": "PreferNoSchedule"}]}}),
            ),
            pod("p", json!({})),
            None,
        ),
        (
            "nodeSelector",
            node("n", json!({})),
            pod("p", json!({"spec": {"nodeSelector": {"zone": "b"}}})),
            Some((
                Plugin::NodeAffinity,
                "node(s) didn't match Pod's node affinity/selector",
            )),
        ),
        (
            "required affinity",
            node("n", json!({})),
            pod(
                "p",
                json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}}}}),
            ),
            None,
        ),
        (
            "host port",
            node("n", json!({})),
            pod(
                "p",
                json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 1, "hostPort": 8080}]}]}}),
            ),
            Some((
                Plugin::NodePorts,
                "node(s) didn't have free ports for the requested pod ports",
            )),
        ),
        (
            "cpu",
            node("n", json!({})),
            pod("p", json!({})),
            Some((Plugin::NodeResourcesFit, "Insufficient cpu")),
        ),
        (
            "gpus",
            node("n", json!({})),
            pod(
                "p",
                json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}),
            ),
            Some((Plugin::NodeResourcesFit, "Insufficient nvidia.com/gpu")),
        ),
        (
            "pods",
            node("n", json!({"status": {"allocatable": {"pods": "1"}}})),
            pod("p", json!({"spec": {"containers": [{"name": "c"}]}})),
            Some((Plugin::NodeResourcesFit, "Too many pods")),
        ),
    ];
    // The plain-pod shortcut agrees with every filter on every pairing of these nodes (empty
    // and with `busy`) and pods.
    let infos: Vec<NodeInfo> = cases
        .iter()
        .flat_map(|(_, node, _, _)| [info(node, &[]), info(node, std::slice::from_ref(&busy))])
        .collect();
    for (what, _, candidate, _) in &cases {
        let demand = Demand::of(candidate);
        for node in &infos {
            assert_eq!(
                filters::run(candidate, &demand, node),
                filters::run_every(candidate, &demand, node),
                "{what} on {node:?}"
            );
        }
    }
    for (what, node, candidate, want) in cases {
        // "host port", "cpu" and "pods" run against a node that already has `busy`.
        let bound: Vec<Pod> = if matches!(what, "host port" | "cpu" | "pods") {
            vec![busy.clone()]
        } else {
            vec![]
        };
        let got = filters::run(&candidate, &Demand::of(&candidate), &info(&node, &bound));
        match (got, want) {
            (Ok(()), None) => {}
            (Err(rejection), Some((plugin, reason))) => {
                assert_eq!(rejection.plugin, plugin, "{what}");
                assert_eq!(rejection.reasons[0], reason, "{what}");
            }
            (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
        }
    }
}

fn scheduler(nodes: &[Node], pods: &[Pod], strategy: Strategy) -> Scheduler {
    Scheduler::new(node_info::build(nodes, pods), vec![], vec![], [], strategy)
}

#[test]
fn fit_errors_read_like_upstream() {
    let gpu_pod = pod(
        "train",
        json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}),
    );
    let nodes = [
        node("cpu-1", json!({})),
        node("cpu-2", json!({})),
        node(
            "l40s-1",
            json!({"spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"nvidia.com/gpu": "16"}}}),
        ),
        node(
            "h100-1",
            json!({"status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"}}}),
        ),
    ];
    let error = scheduler(&nodes, &[], Strategy::default())
        .schedule(&gpu_pod, &[])
        .expect_err("fits nowhere");
    assert_eq!(
        error.to_string(),
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient nvidia.com/gpu."
    );
    assert_eq!(error.diagnosis["l40s-1"].plugin, Plugin::TaintToleration);
}

#[test]
fn scoring_spreads_packs_and_follows_preferences() {
    let nodes = [node("a", json!({})), node("b", json!({}))];
    let on_a = pod("on-a", json!({"spec": {"nodeName": "a"}}));
    let new = pod("new", json!({}));
    let spread = scheduler(
        &nodes,
        std::slice::from_ref(&on_a),
        Strategy::LeastAllocated,
    );
    assert_eq!(
        spread.schedule(&new, &[]).unwrap().node,
        "b",
        "LeastAllocated spreads"
    );
    let pack = scheduler(&nodes, std::slice::from_ref(&on_a), Strategy::MostAllocated);
    assert_eq!(
        pack.schedule(&new, &[]).unwrap().node,
        "a",
        "MostAllocated packs"
    );
    // Ties go to the first node by name.
    assert_eq!(
        scheduler(&nodes, &[], Strategy::default())
            .schedule(&new, &[])
            .unwrap()
            .node,
        "a"
    );
    // Preferred affinity outweighs a little spreading.
    let prefers_a = pod(
        "p",
        json!({"spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}}]}}}}),
    );
    assert_eq!(spread.schedule(&prefers_a, &[]).unwrap().node, "a");
    // PreferNoSchedule taints repel.
    let soft = [
        node(
            "a",
            json!({"spec": {"taints": [{"key": "x", "effect": "PreferNoSchedule"}]}}),
        ),
        node("b", json!({})),
    ];
    assert_eq!(
        scheduler(&soft, &[], Strategy::MostAllocated)
            .schedule(&new, &[])
            .unwrap()
            .node,
        "b"
    );
}

#[test]
fn assumed_pods_take_their_room() {
    let nodes = [node("a", json!({}))];
    let mut scheduler = scheduler(&nodes, &[], Strategy::default());
    for i in 0..4 {
        let p = pod(&format!("p{i}"), json!({}));
        let decision = scheduler.schedule(&p, &[]).expect("fits");
        scheduler.assume(&p, &decision, &[]);
    }
    let error = scheduler
        .schedule(&pod("p4", json!({})), &[])
        .expect_err("full");
    assert_eq!(
        error.to_string(),
        "0/1 nodes are available: 1 Insufficient cpu."
    );
    // A pod that leaves gives its room back (the simulator's departures).
    scheduler.forget(&pod("p0", json!({})), "a", &[]);
    let p4 = pod("p4", json!({}));
    let decision = scheduler.schedule(&p4, &[]).expect("room again");
    scheduler.assume(&p4, &decision, &[]);
    assert!(scheduler.schedule(&pod("p5", json!({})), &[]).is_err());
}

fn dra() -> (Vec<ResourceSlice>, Vec<DeviceClass>) {
    let slice = |node: &str, gpus: usize| -> ResourceSlice {
        let devices: Vec<Value> = (0..gpus)
            .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"type": {"string": "gpu"}}}))
            .collect();
        serde_json::from_value(
            json!({"metadata": {"name": format!("{node}-gpu")}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}),
        )
        .unwrap()
    };
    let class: DeviceClass = serde_json::from_value(json!({"metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}))
    .unwrap();
    (vec![slice("a", 1), slice("b", 2)], vec![class])
}

fn claim(name: &str, count: i64, allocated_on: Option<&str>) -> ResourceClaim {
    let mut claim = json!({"metadata": {"namespace": "ml", "name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}}});
    if let Some(node) = allocated_on {
        claim["status"] = json!({"allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
    }
    serde_json::from_value(claim).unwrap()
}

#[test]
fn claims_are_allocated_on_the_chosen_node_and_pin_it_once_allocated() {
    let nodes = [node("a", json!({})), node("b", json!({}))];
    let (slices, classes) = dra();
    let p = pod("p", json!({}));
    let mut scheduler = Scheduler::new(
        node_info::build(&nodes, &[]),
        slices,
        classes,
        [],
        Strategy::default(),
    );
    // Two GPUs exist only on b.
    let two = claim("two", 2, None);
    let decision = scheduler
        .schedule(&p, std::slice::from_ref(&two))
        .expect("fits on b");
    assert_eq!(decision.node, "b");
    let results = decision.allocations[0]
        .1
        .devices
        .as_ref()
        .unwrap()
        .results
        .as_ref()
        .unwrap();
    assert_eq!(
        results
            .iter()
            .map(|r| r.device.as_str())
            .collect::<Vec<_>>(),
        ["gpu-0", "gpu-1"]
    );
    scheduler.assume(&p, &decision, std::slice::from_ref(&two));
    // b's GPUs are now held: a one-GPU claim goes to a; a three-GPU claim fits nowhere.
    assert_eq!(
        scheduler
            .schedule(&pod("q", json!({})), &[claim("one", 1, None)])
            .unwrap()
            .node,
        "a"
    );
    let error = scheduler
        .schedule(&pod("r", json!({})), &[claim("three", 3, None)])
        .expect_err("too many");
    assert_eq!(
        error.to_string(),
        "0/2 nodes are available: 2 cannot allocate all claims."
    );
    // Once the pod leaves, its claim's devices are free again: two GPUs fit on b.
    scheduler.forget(&p, "b", &["two".to_string()]);
    assert_eq!(
        scheduler
            .schedule(&pod("t", json!({})), &[claim("two-more", 2, None)])
            .unwrap()
            .node,
        "b"
    );
    // An allocated (shared) claim pins its node.
    let shared = claim("shared", 1, Some("a"));
    let decision = scheduler
        .schedule(&pod("s", json!({})), std::slice::from_ref(&shared))
        .unwrap();
    assert_eq!(
        (decision.node.as_str(), decision.allocations.len()),
        ("a", 0)
    );
}

fn zoned(name: &str, zone: &str) -> Node {
    node(
        name,
        json!({"metadata": {"labels": {"zone": zone}}, "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}}),
    )
}

fn labelled(name: &str, node: Option<&str>, labels: Value, extra: Value) -> Pod {
    let mut spec = json!({"containers": [{"name": "c"}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let mut p = json!({"metadata": {"labels": labels}, "spec": spec});
    merge(&mut p, extra);
    pod(name, p)
}

#[test]
fn topology_spread_and_inter_pod_affinity() {
    let nodes = [
        zoned("a1", "a"),
        zoned("a2", "a"),
        zoned("b1", "b"),
        zoned("c1", "c"),
    ];
    let app = json!({"app": "web"});
    // Two web pods in zone a, one in b: with maxSkew 1 over zones, the next goes to c.
    let placed = [
        labelled("w1", Some("a1"), app.clone(), json!({})),
        labelled("w2", Some("a2"), app.clone(), json!({})),
        labelled("w3", Some("b1"), app.clone(), json!({})),
    ];
    let spread = json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}});
    let s = scheduler(&nodes, &placed, Strategy::default());
    let next = labelled("w4", None, app.clone(), spread.clone());
    assert_eq!(s.schedule(&next, &[]).unwrap().node, "c1");
    // Without zone c, nothing satisfies the skew in a; b is the only place.
    let s = scheduler(&nodes[..3], &placed, Strategy::default());
    assert_eq!(s.schedule(&next, &[]).unwrap().node, "b1");
    // minDomains 3 with two zones: the global minimum counts as 0, so no zone is low enough.
    let strict = labelled(
        "w4",
        None,
        app.clone(),
        json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "minDomains": 3,
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}}),
    );
    let error = scheduler(&nodes[..3], &placed, Strategy::default())
        .schedule(&strict, &[])
        .expect_err("skew");
    assert_eq!(
        error.to_string(),
        "0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints."
    );

    // Required affinity to the cache pods' zone; anti-affinity away from other trainers.
    let cache = labelled("cache", Some("b1"), json!({"app": "cache"}), json!({}));
    let near = labelled(
        "near",
        None,
        json!({}),
        json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}]}}}}),
    );
    let s = scheduler(&nodes, std::slice::from_ref(&cache), Strategy::default());
    assert_eq!(s.schedule(&near, &[]).unwrap().node, "b1");
    let alone = |name: &str| {
        labelled(
            name,
            None,
            json!({"app": "trainer"}),
            json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "trainer"}}, "topologyKey": "kubernetes.io/hostname"}]}}}}),
        )
    };
    let mut s = scheduler(&nodes, &[], Strategy::default());
    let mut used = std::collections::BTreeSet::new();
    for i in 0..4 {
        let p = alone(&format!("t{i}"));
        let decision = s.schedule(&p, &[]).expect("a free node");
        assert!(used.insert(decision.node.clone()), "one trainer per node");
        s.assume(&p, &decision, &[]);
    }
    // Upstream checks the placed pods' anti-affinity first.
    let error = s.schedule(&alone("t4"), &[]).expect_err("all nodes taken");
    assert_eq!(
        error.to_string(),
        "0/4 nodes are available: 4 node(s) didn't satisfy existing pods anti-affinity rules."
    );
    // A plain pod selected by the trainers' anti-affinity is kept off their nodes too.
    let plain = labelled("plain", None, json!({"app": "trainer"}), json!({}));
    let error = s.schedule(&plain, &[]).expect_err("symmetric");
    assert_eq!(
        error.to_string(),
        "0/4 nodes are available: 4 node(s) didn't satisfy existing pods anti-affinity rules."
    );
    // Anti-affinity of the incoming pod alone.
    let avoid = labelled(
        "avoid",
        None,
        json!({}),
        json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}]}}}}),
    );
    let error = scheduler(
        &nodes[2..3],
        std::slice::from_ref(&cache),
        Strategy::default(),
    )
    .schedule(&avoid, &[])
    .expect_err("the cache's zone");
    assert_eq!(
        error.to_string(),
        "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
    );
    // The first pod of a self-affine group may go anywhere.
    let group = labelled(
        "g0",
        None,
        json!({"group": "x"}),
        json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"group": "x"}}, "topologyKey": "zone"}]}}}}),
    );
    assert!(
        scheduler(&nodes, &[], Strategy::default())
            .schedule(&group, &[])
            .is_ok()
    );
    // Preferred affinity pulls towards the cache.
    let prefers = labelled(
        "pref",
        None,
        json!({}),
        json!({"spec": {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}}]}}}}),
    );
    assert_eq!(
        scheduler(&nodes, std::slice::from_ref(&cache), Strategy::default())
            .schedule(&prefers, &[])
            .unwrap()
            .node,
        "b1"
    );
}

fn prioritized(name: &str, node: Option<&str>, priority: i32, cpu: &str, extra: Value) -> Pod {
    let mut spec = json!({"priority": priority, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let mut p = json!({"spec": spec});
    merge(&mut p, extra);
    pod(name, p)
}

fn preempting(
    nodes: &[Node],
    pods: &[Pod],
    budgets: Vec<tessera_scheduler::preemption::Budget>,
) -> Scheduler {
    Scheduler::new(
        node_info::build(nodes, pods),
        vec![],
        vec![],
        [],
        Strategy::default(),
    )
    .with_pods(pods)
    .with_budgets(budgets)
}

#[test]
fn preemption_picks_victims_and_nodes_in_upstream_order() {
    use tessera_scheduler::preemption::{Budget, NoPreemption};
    let nodes = [node("a", json!({}))];
    let low = [
        prioritized(
            "low-1",
            Some("a"),
            0,
            "2",
            json!({"status": {"startTime": "2026-01-01T00:00:00Z"}}),
        ),
        prioritized(
            "low-2",
            Some("a"),
            0,
            "2",
            json!({"status": {"startTime": "2026-01-02T00:00:00Z"}}),
        ),
    ];
    let high = prioritized("high", None, 100, "2", json!({}));
    let s = preempting(&nodes, &low, vec![]);
    let fit = s.schedule(&high, &[]).expect_err("full");
    let nomination = s.preempt(&high, &[], &fit).expect("preempts");
    assert_eq!(nomination.node, "a");
    assert_eq!(
        nomination.victims,
        [("ml".to_string(), "low-2".to_string())],
        "the later-started pod goes"
    );

    let never = prioritized(
        "never",
        None,
        100,
        "2",
        json!({"spec": {"preemptionPolicy": "Never"}}),
    );
    assert_eq!(s.preempt(&never, &[], &fit), Err(NoPreemption::NotEligible));
    assert_eq!(
        NoPreemption::NotEligible.message(),
        "not eligible due to preemptionPolicy=Never."
    );
    let peer = prioritized("peer", None, 0, "2", json!({}));
    let error = s
        .preempt(&peer, &[], &s.schedule(&peer, &[]).expect_err("full"))
        .expect_err("no victims");
    assert_eq!(
        error.message(),
        "0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    let tainted = [node(
        "t",
        json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}),
    )];
    let s2 = preempting(&tainted, &[], vec![]);
    let error = s2
        .preempt(&high, &[], &s2.schedule(&high, &[]).expect_err("taint"))
        .expect_err("helpless");
    assert_eq!(
        error.message(),
        "0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );

    // Budgets steer the choice of node: x's pod may not be disrupted, y's may.
    let two = [node("x", json!({})), node("y", json!({}))];
    let guarded = [
        prioritized(
            "guarded",
            Some("x"),
            0,
            "3",
            json!({"metadata": {"labels": {"app": "db"}}}),
        ),
        prioritized("free", Some("y"), 0, "3", json!({})),
    ];
    let budget = Budget {
        namespace: "ml".into(),
        selector: serde_json::from_value(json!({"matchLabels": {"app": "db"}})).unwrap(),
        allowed: 0,
    };
    let s = preempting(&two, &guarded, vec![budget]);
    let fit = s.schedule(&high, &[]).expect_err("full");
    assert_eq!(s.preempt(&high, &[], &fit).unwrap().node, "y");

    // A victim's gang goes with it, wherever its members run.
    let gang = |name: &str, node: &str| {
        prioritized(
            name,
            Some(node),
            0,
            "3",
            json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "g"}}}),
        )
    };
    let ganged = [gang("g-0", "x"), gang("g-1", "y")];
    let s = preempting(&two, &ganged, vec![]);
    let fit = s.schedule(&high, &[]).expect_err("full");
    let nomination = s.preempt(&high, &[], &fit).unwrap();
    assert_eq!(nomination.victims.len(), 2, "{nomination:?}");
}

#[test]
fn preemption_counts_devices_freed_from_victims_claims() {
    let nodes = [node("b", json!({}))];
    let (slices, classes) = dra();
    let holder = prioritized("holder", Some("b"), 0, "100m", json!({}));
    let mut held = claim("held", 2, None);
    held.status = Some(
        serde_json::from_value(json!({
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "b", "device": "gpu-0"},
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "b", "device": "gpu-1"}]}},
        "reservedFor": [{"resource": "pods", "name": "holder", "uid": "uid-holder"}]}))
        .unwrap(),
    );
    let s = Scheduler::new(
        node_info::build(&nodes, std::slice::from_ref(&holder)),
        slices,
        classes,
        [std::sync::Arc::new(held.clone())],
        Strategy::default(),
    )
    .with_pods(std::slice::from_ref(&holder));
    let high = prioritized("high", None, 10, "100m", json!({}));
    let wants = claim("wants", 1, None);
    let fit = s
        .schedule(&high, std::slice::from_ref(&wants))
        .expect_err("GPUs taken");
    assert_eq!(
        fit.to_string(),
        "0/1 nodes are available: 1 cannot allocate all claims."
    );
    let nomination = s
        .preempt(&high, std::slice::from_ref(&wants), &fit)
        .expect("the holder's GPUs free up");
    assert_eq!(
        nomination.victims,
        [("ml".to_string(), "holder".to_string())]
    );
}

#[test]
fn explanations_give_every_verdict_and_the_smallest_changes() {
    let nodes = [
        node("cpu-1", json!({})),
        node(
            "l40s-1",
            json!({"spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "4"}}}),
        ),
        node(
            "h100-1",
            json!({"status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "8"}}}),
        ),
    ];
    let holder = pod(
        "holder",
        json!({"spec": {"nodeName": "h100-1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "6"}}}]}}),
    );
    let want = pod(
        "train",
        json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}),
    );
    let s = scheduler(&nodes, std::slice::from_ref(&holder), Strategy::default());
    let explanation = s.explain(&want, &[], std::slice::from_ref(&holder));
    assert!(explanation.nodes.iter().all(|n| !n.fits()));
    let text = explanation.render("ml/train");
    assert!(text.starts_with("Pod ml/train: 0/3 nodes fit\n"), "{text}");
    assert!(
        text.contains("  TaintToleration: untolerated taint nvidia.com/gpu=present:NoSchedule\n"),
        "{text}"
    );
    assert!(
        text.contains("  NodeResourcesFit: Insufficient nvidia.com/gpu: wants 4, 2 free of 8\n"),
        "{text}"
    );
    assert_eq!(
        explanation.suggestions,
        [
            "ask for at most 2 nvidia.com/gpu to fit on h100-1 now",
            "tolerate nvidia.com/gpu=present:NoSchedule to run on l40s-1",
            "wait for ml/holder on h100-1 to finish (they hold nvidia.com/gpu)",
        ]
    );
}

#[test]
fn gangs_are_placed_whole_or_not_at_all() {
    let gpu_node = |name: &str, rack: &str| {
        node(
            name,
            json!({"metadata": {"labels": {"rack": rack}},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}}}),
        )
    };
    let nodes = [gpu_node("g1", "r1"), gpu_node("g2", "r2")];
    let member = |i: usize| {
        pod(
            &format!("w{i}"),
            json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}),
        )
    };
    let members: Vec<Pod> = (0..17).map(member).collect();
    let s = scheduler(&nodes, &[], Strategy::default());
    let group = |n: usize| -> Vec<(&Pod, Vec<ResourceClaim>)> {
        members[..n].iter().map(|p| (p, vec![])).collect()
    };

    // Sixteen one-GPU members across two eight-GPU nodes.
    let (decisions, booked) = s.schedule_group(&group(16), 16, None).expect("fits");
    let per_node = |name: &str| decisions.iter().filter(|d| d.node == name).count();
    assert_eq!((per_node("g1"), per_node("g2")), (8, 8));
    assert!(
        booked.schedule(&member(99), &[]).is_err(),
        "the booked snapshot is full"
    );
    // Seventeen do not fit: nothing is placed.
    let error = s
        .schedule_group(&group(17), 17, None)
        .expect_err("one too many");
    assert_eq!(error.placed, 16);
    assert!(error.to_string().starts_with("only 16 of 17 required members fit; w16: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu."), "{error}");
    assert!(
        s.schedule(&member(99), &[]).is_ok(),
        "the real snapshot is untouched"
    );
    // Within one rack: eight fit in r1; twelve fit in no single rack.
    let (decisions, _) = s
        .schedule_group(&group(8), 8, Some("rack"))
        .expect("one rack");
    assert!(decisions.iter().all(|d| d.node == "g1"));
    let error = s
        .schedule_group(&group(12), 12, Some("rack"))
        .expect_err("no rack holds twelve");
    assert_eq!(error.placed, 8);
}

#[test]
fn gpus_are_numa_aligned_as_the_kubelet_policy_demands() {
    let dgx = |name: &str, policy: &str, free: &str| {
        node(
            name,
            json!({"metadata": {"annotations": {
            "tessera.dev/topology-manager-policy": policy,
            "tessera.dev/gpus-per-numa": "0:4,1:4",
            "tessera.dev/gpus-free-per-numa": free}},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}}}),
        )
    };
    let gpus = |n: u32| {
        pod(
            &format!("g{n}"),
            json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": n.to_string()}}}]}}),
        )
    };
    let cases = [
        ("single-numa-node", "0:2,1:3", 3, true),
        ("single-numa-node", "0:2,1:3", 4, false),
        ("restricted", "0:2,1:3", 4, false),
        ("restricted", "0:2,1:3", 5, true),
        ("best-effort", "0:2,1:3", 4, true),
        ("none", "0:1,1:1", 2, true),
    ];
    for (policy, free, wanted, fits) in cases {
        let s = scheduler(&[dgx("n", policy, free)], &[], Strategy::default());
        let result = s.schedule(&gpus(wanted), &[]);
        assert_eq!(
            result.is_ok(),
            fits,
            "{policy} {free} wants {wanted}: {result:?}"
        );
        if let Err(error) = result {
            assert_eq!(
                error.to_string(),
                "0/1 nodes are available: 1 node(s) could not align the pod's GPUs to the Topology Manager policy."
            );
        }
    }
    // Booking keeps the layout current within a pass: two 4-GPU pods fill both NUMA nodes.
    let mut s = scheduler(
        &[dgx("n", "single-numa-node", "0:4,1:4")],
        &[],
        Strategy::default(),
    );
    for i in 0..2 {
        let p = gpus(4);
        let decision = s
            .schedule(&p, &[])
            .unwrap_or_else(|e| panic!("pod {i}: {e}"));
        s.assume(&p, &decision, &[]);
    }
    assert!(s.schedule(&gpus(1), &[]).is_err());
    // A pod that leaves gives its NUMA node's GPUs back.
    s.forget(&gpus(4), "n", &[]);
    assert!(s.schedule(&gpus(4), &[]).is_ok());
    assert!(
        s.schedule(&gpus(5), &[]).is_err(),
        "one NUMA node is still full"
    );
    // Where both fit, the node that can keep the GPUs on one NUMA node is preferred.
    let s = scheduler(
        &[
            dgx("a", "best-effort", "0:2,1:2"),
            dgx("b", "best-effort", "0:1,1:3"),
        ],
        &[],
        Strategy::default(),
    );
    assert_eq!(s.schedule(&gpus(3), &[]).unwrap().node, "b");
}

#[test]
fn profiles_change_how_nodes_score() {
    use tessera_scheduler::profile::{Profile, parse};
    let gpu = |name: &str| {
        node(
            name,
            json!({"status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}}}),
        )
    };
    let nodes = [gpu("a"), gpu("b")];
    let busy = pod(
        "busy",
        json!({"spec": {"nodeName": "a", "containers": [{"name": "c", "resources": {"requests": {"cpu": "32"}, "limits": {"nvidia.com/gpu": "4"}}}]}}),
    );
    let want = pod(
        "want",
        json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}),
    );
    // The default spreads over CPU and memory: b is emptier.
    let spread = scheduler(&nodes, std::slice::from_ref(&busy), Strategy::default());
    assert_eq!(spread.schedule(&want, &[]).unwrap().node, "b");
    // A GPU bin-packing profile (RequestedToCapacityRatio on nvidia.com/gpu) fills a first.
    let text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: packer\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: RequestedToCapacityRatio\n        resources: [{name: nvidia.com/gpu, weight: 1}]\n        requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}\n";
    let profile: Profile = parse(text).unwrap().remove(0);
    let pack =
        scheduler(&nodes, std::slice::from_ref(&busy), Strategy::default()).with_profile(profile);
    assert_eq!(pack.schedule(&want, &[]).unwrap().node, "a");
}

#[test]
fn remembered_resource_scores_decide_as_fresh_ones() {
    // One scheduler booking pod after pod (its resource scores remembered across pods) and a
    // fresh scheduler per pod over the same placements must choose the same nodes.
    let nodes: Vec<Node> = (0..6)
        .map(|i| {
            node(
                &format!("n{i}"),
                json!({"status": {"allocatable": {
                    "cpu": format!("{}", 4 + i * 3),
                    "memory": format!("{}Gi", 8 + (5 - i) * 6),
                    "pods": "110"}}}),
            )
        })
        .collect();
    let pods: Vec<Pod> = (0..40)
        .map(|i| {
            pod(
                &format!("p{i}"),
                json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {
                    "cpu": format!("{}m", 100 + (i * 137) % 900),
                    "memory": format!("{}Mi", 256 + (i * 331) % 2048)}}}]}}),
            )
        })
        .collect();
    for strategy in [Strategy::LeastAllocated, Strategy::MostAllocated] {
        let mut warm = scheduler(&nodes, &[], strategy.clone());
        let mut placed: Vec<Pod> = Vec::new();
        for p in &pods {
            let fresh = scheduler(&nodes, &placed, strategy.clone());
            let (a, b) = (warm.schedule(p, &[]), fresh.schedule(p, &[]));
            assert_eq!(
                a.as_ref().map(|d| d.node.clone()).ok(),
                b.as_ref().map(|d| d.node.clone()).ok(),
                "{:?}",
                p.metadata.name
            );
            let Ok(decision) = a else { continue };
            warm.assume(p, &decision, &[]);
            let mut bound = p.clone();
            bound.spec.as_mut().unwrap().node_name = Some(decision.node.clone());
            placed.push(bound);
        }
        assert!(placed.len() > 20, "most pods fit");
    }
}

/// Slices for the remembered-verdict test: node `n{i}` has `i + 1` GPUs of its own, and every
/// node reaches one shared pool of three fabric links.
fn dra_with_shared_pool(nodes: usize) -> (Vec<ResourceSlice>, Vec<DeviceClass>) {
    let slice = |name: String, driver: &str, node: Option<String>, devices: usize| {
        let devices: Vec<Value> = (0..devices)
            .map(|i| json!({"name": format!("dev-{i}")}))
            .collect();
        let mut spec = json!({"driver": driver, "devices": devices,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}});
        match node {
            Some(node) => spec["nodeName"] = json!(node),
            None => spec["allNodes"] = json!(true),
        }
        serde_json::from_value::<ResourceSlice>(json!({"metadata": {"name": name}, "spec": spec}))
            .unwrap()
    };
    let mut slices: Vec<ResourceSlice> = (0..nodes)
        .map(|i| {
            slice(
                format!("n{i}"),
                "gpu.nvidia.com",
                Some(format!("n{i}")),
                i + 1,
            )
        })
        .collect();
    slices.push(slice("fabric".into(), "fabric.example.com", None, 3));
    let class = |name: &str| -> DeviceClass {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"selectors": [
            {"cel": {"expression": format!("device.driver == '{name}'")}}]}}))
        .unwrap()
    };
    (
        slices,
        vec![class("gpu.nvidia.com"), class("fabric.example.com")],
    )
}

fn class_claim(name: &str, class: &str, count: i64) -> ResourceClaim {
    serde_json::from_value(json!({"metadata": {"namespace": "ml", "name": name},
        "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": class, "count": count}}]}}}))
    .unwrap()
}

#[test]
fn remembered_claim_verdicts_decide_as_fresh_ones() {
    // One scheduler booking and releasing pod after pod (DynamicResources verdicts remembered
    // for claims alike) and a fresh scheduler per pod over the same placements and
    // allocations must decide the same: node and devices. Pods leave now and then, and one
    // pool is shared by every node, so remembered verdicts must follow both.
    let nodes: Vec<Node> = (0..5).map(|i| node(&format!("n{i}"), json!({}))).collect();
    let (slices, classes) = dra_with_shared_pool(nodes.len());
    let shapes = |i: usize| -> Vec<ResourceClaim> {
        let name = |kind: &str| format!("{kind}-{i}");
        // Runs of pods alike, as a Job's are.
        match (i / 4) % 5 {
            0 | 1 => vec![class_claim(&name("gpu"), "gpu.nvidia.com", 1)],
            2 => vec![class_claim(&name("gpus"), "gpu.nvidia.com", 2)],
            3 => vec![class_claim(&name("link"), "fabric.example.com", 1)],
            _ => vec![
                class_claim(&name("gpu"), "gpu.nvidia.com", 1),
                class_claim(&name("link"), "fabric.example.com", 1),
            ],
        }
    };
    let no_requests = json!({"spec": {"containers": [{"name": "c"}]}});
    let mut warm = Scheduler::new(
        node_info::build(&nodes, &[]),
        slices.clone(),
        classes.clone(),
        [],
        Strategy::default(),
    );
    // Placed pods with their node and their claims as allocated.
    let mut placed: Vec<(Pod, String, Vec<ResourceClaim>)> = Vec::new();
    let (mut fits, mut misfits) = (0, 0);
    for i in 0..60 {
        if i % 7 == 6 && !placed.is_empty() {
            let (gone, node, claims) = placed.remove(i % placed.len());
            let names: Vec<String> = claims
                .iter()
                .map(|c| c.metadata.name.clone().unwrap())
                .collect();
            warm.forget(&gone, &node, &names);
        }
        let p = pod(&format!("p{i}"), no_requests.clone());
        let claims = shapes(i);
        let allocated: Vec<ResourceClaim> = placed.iter().flat_map(|(_, _, c)| c.clone()).collect();
        let bound: Vec<Pod> = placed.iter().map(|(p, _, _)| p.clone()).collect();
        let fresh = Scheduler::new(
            node_info::build(&nodes, &bound),
            slices.clone(),
            classes.clone(),
            allocated.iter().cloned().map(std::sync::Arc::new),
            Strategy::default(),
        );
        let (a, b) = (warm.schedule(&p, &claims), fresh.schedule(&p, &claims));
        assert_eq!(a, b, "pod p{i}");
        let Ok(decision) = a else {
            misfits += 1;
            continue;
        };
        fits += 1;
        warm.assume(&p, &decision, &claims);
        let mut bound = p.clone();
        bound.spec.as_mut().unwrap().node_name = Some(decision.node.clone());
        let claims = claims
            .into_iter()
            .map(|mut claim| {
                let name = claim.metadata.name.clone().unwrap();
                let (_, allocation) = decision
                    .allocations
                    .iter()
                    .find(|(n, _)| *n == name)
                    .unwrap();
                claim.status = Some(serde_json::from_value(json!({})).unwrap());
                claim.status.as_mut().unwrap().allocation = Some(allocation.clone());
                claim
            })
            .collect();
        placed.push((bound, decision.node.clone(), claims));
    }
    assert!(fits > 15 && misfits > 5, "{fits} placed, {misfits} not");
}

/// One GPU slice per node (`(node, GPUs)`), and the `gpu.nvidia.com` class, mapped to
/// `nvidia.com/gpu` when `mapped`.
fn dra_nodes(gpus: &[(&str, usize)], mapped: bool) -> (Vec<ResourceSlice>, Vec<DeviceClass>) {
    let (mut slices, mut classes) = dra();
    slices.clear();
    for (node, count) in gpus {
        let devices: Vec<Value> = (0..*count)
            .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"type": {"string": "gpu"}}}))
            .collect();
        slices.push(
            serde_json::from_value(json!({"metadata": {"name": format!("{node}-gpu")}, "spec": {
                "driver": "gpu.nvidia.com", "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}))
            .unwrap(),
        );
    }
    if mapped {
        classes[0].spec.extended_resource_name = Some("nvidia.com/gpu".into());
    }
    (slices, classes)
}

fn gpu_pod(name: &str, resource: &str, count: usize) -> Pod {
    pod(
        name,
        json!({"spec": {"containers": [{"name": "cuda", "resources": {"limits": {resource: count.to_string()}}}]}}),
    )
}

fn device_plugin_node(name: &str, gpus: usize) -> Node {
    node(
        name,
        json!({"status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()}}}),
    )
}

#[test]
fn extended_resources_are_satisfied_by_dra_where_nodes_do_not_offer_them() {
    // (case, device-plugin nodes, DRA nodes, class mapped, resource, count,
    //  expected node and devices of the special claim, or the FailedScheduling message)
    type Case = (
        &'static str,
        Vec<(&'static str, usize)>,
        Vec<(&'static str, usize)>,
        bool,
        &'static str,
        usize,
        Result<(&'static str, usize), &'static str>,
    );
    let gpu = "nvidia.com/gpu";
    let table: Vec<Case> = vec![
        (
            "device plugin node",
            vec![("dp", 4)],
            vec![],
            true,
            gpu,
            2,
            Ok(("dp", 0)),
        ),
        (
            "dra node",
            vec![],
            vec![("a", 1), ("b", 2)],
            true,
            gpu,
            2,
            Ok(("b", 2)),
        ),
        (
            "implied name",
            vec![],
            vec![("b", 2)],
            false,
            "deviceclass.resource.kubernetes.io/gpu.nvidia.com",
            1,
            Ok(("b", 1)),
        ),
        (
            "too few devices",
            vec![],
            vec![("a", 1), ("b", 2)],
            true,
            gpu,
            3,
            Err("0/2 nodes are available: 2 cannot allocate all claims."),
        ),
        (
            "mixed, both short",
            vec![("dp", 1)],
            vec![("a", 1)],
            true,
            gpu,
            2,
            Err(
                "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 cannot allocate all claims.",
            ),
        ),
        (
            "mixed, dra fits",
            vec![("dp", 1)],
            vec![("b", 2)],
            true,
            gpu,
            2,
            Ok(("b", 2)),
        ),
        (
            "no class mapping",
            vec![],
            vec![("a", 1), ("b", 2)],
            false,
            gpu,
            1,
            Err("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
        ),
    ];
    for (case, plugin_nodes, dra_gpus, mapped, resource, count, want) in table {
        let mut nodes: Vec<Node> = plugin_nodes
            .iter()
            .map(|(name, gpus)| device_plugin_node(name, *gpus))
            .collect();
        nodes.extend(dra_gpus.iter().map(|(name, _)| node(name, json!({}))));
        let (slices, classes) = dra_nodes(&dra_gpus, mapped);
        let scheduler = Scheduler::new(
            node_info::build(&nodes, &[]),
            slices,
            classes,
            [],
            Strategy::default(),
        );
        let got = scheduler.schedule(&gpu_pod("p", resource, count), &[]);
        match (got, want) {
            (Ok(decision), Ok((node, devices))) => {
                assert_eq!(decision.node, node, "{case}");
                assert!(decision.allocations.is_empty(), "{case}");
                let allocated = decision.extended.as_ref().map_or(0, |e| {
                    e.allocation
                        .devices
                        .as_ref()
                        .and_then(|d| d.results.as_ref())
                        .map_or(0, Vec::len)
                });
                assert_eq!(allocated, devices, "{case}");
            }
            (Err(error), Err(message)) => assert_eq!(error.to_string(), message, "{case}"),
            (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn a_booked_special_claim_holds_its_devices_and_maps_the_container() {
    let nodes = [node("a", json!({})), node("b", json!({}))];
    let (slices, classes) = dra_nodes(&[("a", 1), ("b", 2)], true);
    let mut scheduler = Scheduler::new(
        node_info::build(&nodes, &[]),
        slices,
        classes,
        [],
        Strategy::default(),
    );
    let first = gpu_pod("first", "nvidia.com/gpu", 2);
    let decision = scheduler.schedule(&first, &[]).expect("fits on b");
    let extended = decision.extended.clone().expect("special claim");
    assert_eq!(
        extended.claim.metadata.generate_name.as_deref(),
        Some("first-extended-resources-")
    );
    let mapping = &extended.mappings[0];
    assert_eq!(
        (
            mapping.container_name.as_str(),
            mapping.resource_name.as_str(),
            mapping.request_name.as_str()
        ),
        ("cuda", "nvidia.com/gpu", "container-0-request-0")
    );
    scheduler.assume(&first, &decision, &[]);
    // b's GPUs are held now: one more GPU goes to a, then none is left.
    let second = gpu_pod("second", "nvidia.com/gpu", 1);
    let decision = scheduler.schedule(&second, &[]).expect("fits on a");
    assert_eq!(decision.node, "a");
    scheduler.assume(&second, &decision, &[]);
    let error = scheduler
        .schedule(&gpu_pod("third", "nvidia.com/gpu", 1), &[])
        .expect_err("no GPU left");
    assert_eq!(
        error.to_string(),
        "0/2 nodes are available: 2 cannot allocate all claims."
    );
    // The first pod leaves: its special claim's GPUs are free again.
    scheduler.forget(&first, "b", &[]);
    let decision = scheduler
        .schedule(&gpu_pod("fifth", "nvidia.com/gpu", 2), &[])
        .expect("b is free again");
    assert_eq!(decision.node, "b");
    // The explanation does not call the DRA nodes impossible for their resources, and
    // says how much of them a node has.
    let explanation = scheduler.explain(&gpu_pod("fourth", "nvidia.com/gpu", 3), &[], &[]);
    assert_eq!(
        explanation.suggestions,
        [
            "ask for at most 2 device(s) of class gpu.nvidia.com as extended resources to fit on b",
            "wait for the 1 device(s) of class gpu.nvidia.com in use on a to be released"
        ]
    );
    for report in &explanation.nodes {
        let fit = report
            .verdicts
            .iter()
            .find(|(plugin, _)| *plugin == Plugin::NodeResourcesFit);
        assert_eq!(fit.map(|(_, v)| v.clone()), Some(None), "{}", report.node);
    }
}

/// Pod overhead (set by RuntimeClass admission) counts as kube-scheduler counts it: in a
/// bound pod's share of its node, and in what a new pod needs to fit.
#[test]
fn pod_overhead_counts_in_node_resources_fit() {
    let overhead = json!({"spec": {"overhead": {"cpu": "250m", "memory": "160Mi"}}});
    let sized = |name: &str, cpu: &str, extra: Value| {
        let mut spec = json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}});
        merge(&mut spec, extra);
        pod(name, spec)
    };
    let mut bound = sized("bound", "3", overhead.clone());
    bound.spec.as_mut().unwrap().node_name = Some("n".into());
    let node = node("n", json!({}));
    let held = info(&node, std::slice::from_ref(&bound));
    // 3 CPUs and 1Gi asked, plus 250m and 160Mi of overhead.
    assert_eq!(held.requested["cpu"], 3_250);
    assert_eq!(held.requested["memory"], (1024 + 160) * 1024 * 1024 * 1000);
    // 750m are left: a pod asking 750m fits, the same pod with overhead does not.
    // (name, pod, fits)
    let cases = [
        ("without overhead", sized("p", "750m", json!({})), true),
        ("with overhead", sized("p", "750m", overhead.clone()), false),
        ("smaller, with overhead", sized("p", "500m", overhead), true),
    ];
    for (what, candidate, fits) in cases {
        let got = filters::run(&candidate, &Demand::of(&candidate), &held);
        match got {
            Ok(()) => assert!(fits, "{what} fits"),
            Err(rejection) => {
                assert!(!fits, "{what}: {rejection:?}");
                assert_eq!(rejection.plugin, Plugin::NodeResourcesFit, "{what}");
                assert_eq!(rejection.reasons[0], "Insufficient cpu", "{what}");
            }
        }
    }
}

#[test]
fn cached_builds_match_fresh_ones_as_nodes_and_pods_change() {
    // One cache carried through a series of snapshots, as the scheduler shell carries it from
    // pass to pass; each step's view must equal a fresh build of the same snapshot.
    let versioned = |mut value: Value, version: u32| {
        value["metadata"]["resourceVersion"] = json!(version.to_string());
        value
    };
    let node_at = |name: &str, cpu: &str, version: u32| -> Node {
        let mut value = serde_json::to_value(node(name, json!({}))).unwrap();
        value["status"]["allocatable"]["cpu"] = json!(cpu);
        serde_json::from_value(versioned(value, version)).unwrap()
    };
    let pod_at = |name: &str, node: Option<&str>, cpu: &str, extra: Value, version: u32| -> Pod {
        let mut value = serde_json::to_value(pod(name, extra)).unwrap();
        value["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!(cpu);
        if let Some(node) = node {
            value["spec"]["nodeName"] = json!(node);
        }
        serde_json::from_value(versioned(value, version)).unwrap()
    };
    let port = json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}});
    let steps: Vec<(&str, Vec<Node>, Vec<Pod>)> = vec![
        (
            "first snapshot",
            vec![node_at("n1", "4", 1), node_at("n2", "8", 1)],
            vec![
                pod_at("a", Some("n1"), "1", json!({}), 1),
                pod_at("b", None, "1", json!({}), 1),
            ],
        ),
        (
            "a pod bound (new version)",
            vec![node_at("n1", "4", 1), node_at("n2", "8", 1)],
            vec![
                pod_at("a", Some("n1"), "1", json!({}), 1),
                pod_at("b", Some("n2"), "1", json!({}), 2),
            ],
        ),
        (
            "nothing changed",
            vec![node_at("n1", "4", 1), node_at("n2", "8", 1)],
            vec![
                pod_at("a", Some("n1"), "1", json!({}), 1),
                pod_at("b", Some("n2"), "1", json!({}), 2),
            ],
        ),
        (
            "the same pods listed in another order, one more on n1",
            vec![node_at("n2", "8", 1), node_at("n1", "4", 1)],
            vec![
                pod_at("e", Some("n1"), "2", json!({}), 1),
                pod_at("b", Some("n2"), "1", json!({}), 2),
                pod_at("a", Some("n1"), "1", json!({}), 1),
            ],
        ),
        (
            "a pod moved to the other node",
            vec![node_at("n1", "4", 1), node_at("n2", "8", 1)],
            vec![
                pod_at("a", Some("n1"), "1", json!({}), 1),
                pod_at("b", Some("n2"), "1", json!({}), 2),
                pod_at("e", Some("n2"), "2", json!({}), 2),
            ],
        ),
        (
            "a pod resized and one with a host port",
            vec![node_at("n1", "4", 1), node_at("n2", "8", 1)],
            vec![
                pod_at("a", Some("n1"), "3", json!({}), 3),
                pod_at("b", Some("n2"), "1", json!({}), 2),
                pod_at("c", Some("n2"), "500m", port.clone(), 1),
            ],
        ),
        (
            "a node's allocatable changed",
            vec![node_at("n1", "16", 2), node_at("n2", "8", 1)],
            vec![
                pod_at("a", Some("n1"), "3", json!({}), 3),
                pod_at("b", Some("n2"), "1", json!({}), 2),
                pod_at("c", Some("n2"), "500m", port.clone(), 1),
            ],
        ),
        (
            "a node gone, a pod finished, a pod without a version",
            vec![node_at("n2", "8", 1)],
            vec![
                pod_at(
                    "b",
                    Some("n2"),
                    "1",
                    json!({"status": {"phase": "Succeeded"}}),
                    4,
                ),
                pod_at("c", Some("n2"), "500m", port, 1),
                serde_json::from_value(json!({
                    "metadata": {"namespace": "ml", "name": "d"},
                    "spec": {"nodeName": "n2", "containers": [{"name": "c",
                        "resources": {"requests": {"cpu": "2"}}}]},
                }))
                .unwrap(),
            ],
        ),
    ];
    let mut cache = node_info::BuildCache::default();
    let mut last: Vec<std::sync::Arc<NodeInfo>> = Vec::new();
    for (step, nodes, pods) in &steps {
        let cached = node_info::build_cached(&mut cache, nodes, pods);
        let fresh = node_info::build(nodes, pods);
        assert_eq!(format!("{cached:#?}"), format!("{fresh:#?}"), "{step}");
        // A node whose object and pods are as the last build saw them is that build's,
        // shared; one whose pods changed is built anew.
        let shared: Vec<&str> = cached
            .iter()
            .filter(|n| last.iter().any(|l| std::sync::Arc::ptr_eq(l, n)))
            .map(|n| n.name.as_str())
            .collect();
        let expected: &[&str] = match *step {
            "nothing changed" => &["n1", "n2"],
            "the same pods listed in another order, one more on n1" => &["n2"],
            "a pod moved to the other node" => &[],
            "a node's allocatable changed" => &["n2"],
            _ => &shared,
        };
        assert_eq!(shared, expected, "{step}");
        last = cached;
    }
}
