//! Table tests of the TAS core beyond the ported Kueue table: a Kueue case the port cannot
//! read (nodes built in a loop), the tree, and the Beyond-Kueue options.

use std::collections::BTreeMap;

use crate::tas::beyond::{Occupant, cheapest_domain_to_clear};
use crate::tas::order::FitOrdering;
use crate::tas::request::{
    PodSetTasRequest, SliceConstraint, TopologyAssignment, TopologyDomainAssignment,
    TopologyRequest,
};
use crate::tas::snapshot::{SearchOptions, TasSnapshot};
use crate::tas::tree::{HOSTNAME_LABEL, TopologyNode, TopologyTree, belongs_to};
use crate::workload::Requests;

const GPU: &str = "nvidia.com/gpu";
const RACK: &str = "cloud.com/topology-rack";

fn requests(entries: &[(&str, i64)]) -> Requests {
    entries
        .iter()
        .map(|(resource, value)| ((*resource).to_owned(), *value))
        .collect()
}

fn node(labels: &[(&str, &str)], allocatable: &[(&str, i64)]) -> TopologyNode {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    TopologyNode {
        name: labels.get(HOSTNAME_LABEL).cloned().unwrap_or_default(),
        labels,
        allocatable: requests(allocatable),
        taints: Vec::new(),
        schedulable_and_ready: true,
    }
}

fn levels(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|key| (*key).to_owned()).collect()
}

fn required(level: &str, count: i32, per_pod: &[(&str, i64)]) -> PodSetTasRequest {
    PodSetTasRequest {
        name: "main".to_owned(),
        count,
        single_pod_requests: requests(per_pod),
        topology_request: Some(TopologyRequest {
            required: Some(level.to_owned()),
            ..TopologyRequest::default()
        }),
        ..PodSetTasRequest::default()
    }
}

fn hosts(assignment: &TopologyAssignment) -> Vec<(String, i32)> {
    assignment
        .domains
        .iter()
        .map(|domain| (domain.values.join("/"), domain.count))
        .collect()
}

// Upstream: tas_cache_test.go, "multi-layer topology: mimic a real-world GB200 cluster, with
// NVL36 arch (2GPUs/node); dc required; aizone slices of 48; rack slices of 16" — its nodes
// are built in a Go loop the JSON port cannot read, so the case is written out here.
#[test]
fn kueue_gb200_multi_layer_case() {
    const DC: &str = "cloud.com/datacenter";
    const ZONE: &str = "cloud.com/aizone";
    const BLOCK: &str = "cloud.com/topology-block";
    let racks = [
        ("aizone0", "block0", "r0"),
        ("aizone0", "block0", "r1"),
        ("aizone0", "block1", "r2"),
        ("aizone0", "block1", "r3"),
        ("aizone1", "block2", "r4"),
        ("aizone1", "block2", "r5"),
        ("aizone1", "block3", "r6"),
        ("aizone1", "block3", "r7"),
    ];
    let mut nodes = Vec::new();
    for (zone, block, rack) in racks {
        for index in 0..18 {
            let mut n = node(
                &[(DC, "dc0"), (ZONE, zone), (BLOCK, block), (RACK, rack)],
                &[(GPU, 2), ("pods", 110)],
            );
            n.name = format!("{block}-{rack}-{zone}-n{index}");
            nodes.push(n);
        }
    }
    let levels = levels(&[DC, ZONE, BLOCK, RACK]);
    let snapshot = TasSnapshot::new("default", &levels, &BTreeMap::new(), &[], &nodes);
    let mut request = required(DC, 96, &[(GPU, 2)]);
    if let Some(topology) = request.topology_request.as_mut() {
        topology.slices = vec![
            SliceConstraint {
                topology: ZONE.to_owned(),
                size: 48,
            },
            SliceConstraint {
                topology: RACK.to_owned(),
                size: 16,
            },
        ];
    }
    let results = snapshot.find_topology_assignments(&[request], &SearchOptions::default());
    let want = TopologyAssignment {
        levels,
        domains: [
            ("aizone0", "block0", "r0"),
            ("aizone0", "block0", "r1"),
            ("aizone0", "block1", "r2"),
            ("aizone1", "block2", "r4"),
            ("aizone1", "block2", "r5"),
            ("aizone1", "block3", "r6"),
        ]
        .into_iter()
        .map(|(zone, block, rack)| TopologyDomainAssignment {
            values: vec!["dc0".into(), zone.into(), block.into(), rack.into()],
            count: 16,
        })
        .collect(),
    };
    assert_eq!(results["main"].assignment, Some(want));
}

#[test]
fn tree_domains_and_flavor_nodes() {
    // (case, levels, flavor node labels, nodes as (rack, host, ready, extra label), want leaf
    // ids, want rack ids)
    type Case<'a> = (
        &'a str,
        &'a [&'a str],
        &'a [(&'a str, &'a str)],
        &'a [(&'a str, &'a str, bool, Option<(&'a str, &'a str)>)],
        &'a [&'a str],
        &'a [&'a str],
    );
    let cases: &[Case] = &[
        (
            "hostname leaves are keyed by the hostname alone",
            &[RACK, HOSTNAME_LABEL],
            &[],
            &[
                ("r1", "x1", true, None),
                ("r1", "x2", true, None),
                ("r2", "x3", true, None),
            ],
            &["x1", "x2", "x3"],
            &["r1", "r2"],
        ),
        (
            "without a hostname level leaves join the level values",
            &[RACK],
            &[],
            &[("r1", "x1", true, None), ("r1", "x2", true, None)],
            &["r1"],
            &["r1"],
        ),
        (
            "nodes not ready or outside the flavor's labels are left out",
            &[RACK, HOSTNAME_LABEL],
            &[("pool", "a")],
            &[
                ("r1", "x1", true, Some(("pool", "a"))),
                ("r1", "x2", false, Some(("pool", "a"))),
                ("r2", "x3", true, Some(("pool", "b"))),
            ],
            &["x1"],
            &["r1"],
        ),
    ];
    for (name, keys, flavor, specs, want_leaves, want_racks) in cases {
        let nodes: Vec<TopologyNode> = specs
            .iter()
            .map(|(rack, host, ready, extra)| {
                let mut labels = vec![(RACK, *rack), (HOSTNAME_LABEL, *host)];
                labels.extend(extra.iter().copied());
                let mut n = node(&labels, &[("cpu", 1000)]);
                n.schedulable_and_ready = *ready;
                n
            })
            .collect();
        let flavor: BTreeMap<String, String> = flavor
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        let tree = TopologyTree::new(&levels(keys), &flavor, &nodes);
        let leaves: Vec<&str> = tree.leaf_by_id.keys().map(String::as_str).collect();
        let racks: Vec<&str> = tree.per_level[0].keys().map(String::as_str).collect();
        assert_eq!(
            (leaves.as_slice(), racks.as_slice()),
            (*want_leaves, *want_racks),
            "{name}"
        );
    }
}

#[test]
fn domain_membership() {
    // (id, target, belongs)
    let cases = [
        ("b1,r1", "", true),
        ("b1,r1", "b1", true),
        ("b1,r1", "b1,r1", true),
        ("b10,r1", "b1", false),
        ("b1", "b1,r1", false),
    ];
    for (id, target, want) in cases {
        assert_eq!(belongs_to(id, target), want, "{id} in {target}");
    }
}

/// Two racks of two 8-GPU hosts; `used` GPUs per host are TAS usage.
fn gpu_racks(cpu_per_host: [i64; 4], used: [i64; 4]) -> TasSnapshot {
    let hosts = [("r1", "x1"), ("r1", "x2"), ("r2", "x3"), ("r2", "x4")];
    let nodes: Vec<TopologyNode> = hosts
        .iter()
        .zip(cpu_per_host)
        .map(|((rack, host), cpu)| {
            node(
                &[(RACK, rack), (HOSTNAME_LABEL, host)],
                &[(GPU, 8), ("cpu", cpu), ("pods", 110)],
            )
        })
        .collect();
    let mut snapshot = TasSnapshot::new(
        "default",
        &levels(&[RACK, HOSTNAME_LABEL]),
        &BTreeMap::new(),
        &[],
        &nodes,
    );
    for ((_, host), gpus) in hosts.iter().zip(used) {
        if gpus > 0 {
            snapshot.add_tas_usage(host, &requests(&[(GPU, gpus), ("pods", 1)]));
        }
    }
    snapshot
}

#[test]
fn least_fragmentation_ordering() {
    // (case, cpu per host, GPUs used per host, ordering, want hosts)
    let least = FitOrdering::LeastFragmentation {
        resource: GPU.to_owned(),
    };
    let cases = [
        (
            "Kueue's BestFit takes the rack with the fewest pod slots: whole free GPUs on x1",
            [1000, 0, 4000, 0],
            [0, 8, 6, 8],
            FitOrdering::Kueue,
            vec![("x1".to_owned(), 1)],
        ),
        (
            "least fragmentation fills the rack whose GPUs are already broken up",
            [1000, 0, 4000, 0],
            [0, 8, 6, 8],
            least.clone(),
            vec![("x3".to_owned(), 1)],
        ),
        (
            "equal free GPUs fall back to BestFit",
            [1000, 1000, 4000, 4000],
            [0, 8, 0, 8],
            least,
            vec![("x1".to_owned(), 1)],
        ),
    ];
    for (name, cpu, used, ordering, want) in cases {
        let snapshot = gpu_racks(cpu, used);
        let options = SearchOptions {
            fit_ordering: ordering,
            ..SearchOptions::default()
        };
        let results = snapshot
            .find_topology_assignments(&[required(RACK, 1, &[(GPU, 1), ("cpu", 1000)])], &options);
        let got = results["main"].assignment.as_ref().map(hosts);
        assert_eq!(got, Some(want), "{name}");
    }
}

fn occupant(key: &str, priority: i32, host: &str, gpus: i64, pods: i64) -> Occupant {
    Occupant {
        key: key.to_owned(),
        priority,
        usage: BTreeMap::from([(host.to_owned(), requests(&[(GPU, gpus), ("pods", pods)]))]),
    }
}

#[test]
fn cheapest_domain_to_clear_table() {
    // (case, occupants, preemptor priority, pods of 8 GPUs / pods of 4 GPUs, want (rack,
    // victims, hosts))
    type Want = Option<(&'static str, Vec<&'static str>, Vec<(&'static str, i32)>)>;
    type Case = (&'static str, Vec<Occupant>, i32, (i32, i64), Want);
    let cases: Vec<Case> = vec![
        (
            "the rack with fewer victims is cleared",
            vec![
                occupant("ns/a", 0, "x1", 8, 1),
                occupant("ns/b", 0, "x2", 8, 1),
                occupant("ns/c", 0, "x3", 8, 1),
            ],
            10,
            (2, 8),
            Some(("r2", vec!["ns/c"], vec![("x3", 1), ("x4", 1)])),
        ),
        (
            "an occupant of equal or higher priority protects its rack",
            vec![
                occupant("ns/a", 0, "x1", 8, 1),
                occupant("ns/b", 0, "x2", 8, 1),
                occupant("ns/c", 10, "x3", 8, 1),
            ],
            10,
            (2, 8),
            Some(("r1", vec!["ns/a", "ns/b"], vec![("x1", 1), ("x2", 1)])),
        ),
        (
            "nothing of lower priority to preempt",
            vec![
                occupant("ns/a", 10, "x1", 8, 1),
                occupant("ns/c", 10, "x3", 8, 1),
            ],
            10,
            (2, 8),
            None,
        ),
        (
            "equal victims: the rack where fewer pods are preempted wins",
            vec![
                occupant("ns/many", 0, "x1", 8, 8),
                occupant("ns/high", 20, "x2", 8, 1),
                occupant("ns/one", 0, "x3", 8, 1),
                occupant("ns/high2", 20, "x4", 8, 1),
            ],
            10,
            (1, 8),
            Some(("r2", vec!["ns/one"], vec![("x3", 1)])),
        ),
        (
            "a domain that already fits needs no victims",
            vec![occupant("ns/a", 0, "x1", 8, 1)],
            10,
            (1, 8),
            Some(("r1", vec![], vec![("x2", 1)])),
        ),
        (
            "a victim the fit does not need is given back",
            vec![
                occupant("ns/high", 20, "x1", 6, 1),
                occupant("ns/low", 0, "x1", 1, 1),
                occupant("ns/mid", 1, "x2", 8, 1),
                occupant("ns/other", 20, "x3", 8, 1),
                occupant("ns/other2", 20, "x4", 8, 1),
            ],
            10,
            (1, 4),
            Some(("r1", vec!["ns/mid"], vec![("x2", 1)])),
        ),
        (
            "equal victims and pods: the rack left with less free capacity wins over the id",
            // Clearing r1 leaves 4 GPUs free on x2 (one more pod of 4), clearing r2 none.
            vec![
                occupant("ns/a", 0, "x1", 8, 1),
                occupant("ns/h1", 20, "x2", 4, 1),
                occupant("ns/c", 0, "x3", 8, 1),
                occupant("ns/h2", 20, "x4", 8, 1),
            ],
            10,
            (2, 4),
            Some(("r2", vec!["ns/c"], vec![("x3", 2)])),
        ),
        (
            "the same racks mirrored: the tighter rack is r1",
            vec![
                occupant("ns/a", 0, "x1", 8, 1),
                occupant("ns/h1", 20, "x2", 8, 1),
                occupant("ns/c", 0, "x3", 8, 1),
                occupant("ns/h2", 20, "x4", 4, 1),
            ],
            10,
            (2, 4),
            Some(("r1", vec!["ns/a"], vec![("x1", 2)])),
        ),
        (
            "fewer pods preempted outranks a tighter fit",
            vec![
                occupant("ns/a", 0, "x1", 8, 2),
                occupant("ns/h1", 20, "x2", 8, 1),
                occupant("ns/c", 0, "x3", 8, 1),
                occupant("ns/h2", 20, "x4", 4, 1),
            ],
            10,
            (2, 4),
            Some(("r2", vec!["ns/c"], vec![("x3", 2)])),
        ),
    ];
    for (name, occupants, priority, (count, gpus), want) in cases {
        let mut snapshot = gpu_racks([64_000; 4], [0; 4]);
        for occupant in &occupants {
            for (leaf, usage) in &occupant.usage {
                snapshot.add_tas_usage(leaf, usage);
            }
        }
        let request = required(RACK, count, &[(GPU, gpus)]);
        let plan = cheapest_domain_to_clear(&snapshot, &[request], &occupants, priority);
        let got = plan.map(|plan| {
            let assignment = plan.assignments["main"]
                .assignment
                .clone()
                .unwrap_or_default();
            (plan.domain, plan.victims, hosts(&assignment))
        });
        let want = want.map(|(rack, victims, placed)| {
            (
                rack.to_owned(),
                victims.into_iter().map(str::to_owned).collect::<Vec<_>>(),
                placed
                    .into_iter()
                    .map(|(host, count)| (host.to_owned(), count))
                    .collect::<Vec<_>>(),
            )
        });
        assert_eq!(got, want, "{name}");
    }
}

mod flavor_step {
    use std::collections::{BTreeMap, BTreeSet};

    use super::{GPU, RACK, gpu_racks, hosts, required};
    use crate::assigner::FlavorAssignmentMode;
    use crate::tas::flavor_step::{
        AssignedPodSet, TopologyVerdict, flavor_mismatch, topology_step,
    };
    use crate::tas::request::PodSetTasRequest;

    fn assigned(request: PodSetTasRequest, flavors: &[&str]) -> AssignedPodSet {
        AssignedPodSet {
            request,
            flavors: flavors
                .iter()
                .map(|f| (*f).to_owned())
                .collect::<BTreeSet<_>>(),
        }
    }

    fn untagged(count: i32) -> PodSetTasRequest {
        PodSetTasRequest {
            name: "main".to_owned(),
            count,
            single_pod_requests: BTreeMap::from([(GPU.to_owned(), 8)]),
            ..PodSetTasRequest::default()
        }
    }

    /// What a verdict says, flattened for the table: (kind, PodSet, detail).
    fn summary(verdict: &TopologyVerdict) -> (String, String, String) {
        match verdict {
            TopologyVerdict::Unchanged => ("Unchanged".into(), String::new(), String::new()),
            TopologyVerdict::Fit(assignments) => {
                let (name, assignment) = assignments.iter().next().expect("one PodSet");
                let placed: Vec<String> = hosts(assignment)
                    .into_iter()
                    .map(|(host, count)| format!("{host}:{count}"))
                    .collect();
                ("Fit".into(), name.clone(), placed.join(","))
            }
            TopologyVerdict::Preempt { reason } => {
                let (name, reason) = reason.clone().unwrap_or_default();
                ("Preempt".into(), name, reason)
            }
            TopologyVerdict::NoFit {
                pod_set, reason, ..
            } => ("NoFit".into(), pod_set.clone(), reason.clone()),
            TopologyVerdict::Error { pod_set, message } => {
                ("Error".into(), pod_set.clone(), message.clone())
            }
        }
    }

    #[test]
    fn fit_preempt_no_fit_as_kueues_assigner() {
        let gpu = |count| required(RACK, count, &[(GPU, 8)]);
        // (case, quota mode, PodSet, TAS-only queue, GPUs used per host, want)
        let cases = [
            (
                "fits in one rack now",
                FlavorAssignmentMode::Fit,
                assigned(gpu(2), &["tas"]),
                false,
                [8, 0, 0, 0],
                ("Fit", "main", "x3:1,x4:1"),
            ),
            (
                "fits only once TAS Workloads go: Preempt with Kueue's reason",
                FlavorAssignmentMode::Fit,
                assigned(gpu(2), &["tas"]),
                false,
                [8, 0, 8, 0],
                (
                    "Preempt",
                    "main",
                    "topology \"default\" allows to fit only 1 out of 2 pod(s). Total nodes: 4; excluded: resource \"nvidia.com/gpu\": 2",
                ),
            ),
            (
                "never fits: NoFit keeps the reason",
                FlavorAssignmentMode::Fit,
                assigned(gpu(3), &["tas"]),
                false,
                [0, 0, 0, 0],
                (
                    "NoFit",
                    "main",
                    "topology \"default\" allows to fit only 2 out of 3 pod(s)",
                ),
            ),
            (
                "quota asks for preemption and the topology has room once emptied",
                FlavorAssignmentMode::Preempt,
                assigned(gpu(2), &["tas"]),
                false,
                [8, 8, 8, 8],
                ("Preempt", "", ""),
            ),
            (
                "a TAS PodSet without a TAS flavor",
                FlavorAssignmentMode::Fit,
                assigned(gpu(1), &["plain"]),
                false,
                [0, 0, 0, 0],
                ("Error", "main", "no TAS flavor assigned"),
            ),
            (
                "no annotations outside a TAS-only queue",
                FlavorAssignmentMode::Fit,
                assigned(untagged(1), &["tas"]),
                false,
                [0, 0, 0, 0],
                ("Unchanged", "", ""),
            ),
            (
                "no annotations in a TAS-only queue: implied, on one host (equal hosts by name)",
                FlavorAssignmentMode::Fit,
                assigned(untagged(1), &["tas"]),
                true,
                [8, 0, 0, 0],
                ("Fit", "main", "x2:1"),
            ),
        ];
        for (name, mode, pod_set, tas_only, used, want) in cases {
            let snapshots = BTreeMap::from([("tas".to_owned(), gpu_racks([64_000; 4], used))]);
            let verdict = topology_step(mode, &[pod_set], tas_only, &snapshots);
            let want = (want.0.to_owned(), want.1.to_owned(), want.2.to_owned());
            assert_eq!(summary(&verdict), want, "{name}");
        }
    }

    #[test]
    fn flavor_checks_as_kueue() {
        let snapshot = gpu_racks([1000; 4], [0; 4]);
        let rack = required(RACK, 1, &[(GPU, 1)]);
        let block = required("cloud.com/topology-block", 1, &[(GPU, 1)]);
        // (case, PodSet, TAS-only, topologyName, snapshot, group covers requests, want)
        let cases = [
            (
                "a TAS flavor with the level",
                &rack,
                false,
                Some("default"),
                Some(&snapshot),
                true,
                None,
            ),
            (
                "a TAS flavor without the level",
                &block,
                false,
                Some("default"),
                Some(&snapshot),
                true,
                Some("Flavor \"f\" does not contain the requested level"),
            ),
            (
                "a TAS flavor not in the cache",
                &rack,
                false,
                Some("default"),
                None,
                true,
                Some("Flavor \"f\" information missing in TAS cache"),
            ),
            (
                "a plain flavor covering the PodSet's resources",
                &rack,
                false,
                None,
                None,
                true,
                Some("Flavor \"f\" does not support TopologyAwareScheduling"),
            ),
            (
                "a plain flavor for other resources",
                &rack,
                false,
                None,
                None,
                false,
                None,
            ),
        ];
        for (name, pod_set, tas_only, topology, snapshot, covers, want) in cases {
            let got = flavor_mismatch(pod_set, tas_only, "f", topology, snapshot, covers);
            assert_eq!(got.as_deref(), want, "{name}");
        }
        let plain = PodSetTasRequest::default();
        assert_eq!(
            flavor_mismatch(&plain, false, "f", Some("default"), Some(&snapshot), true).as_deref(),
            Some("Flavor \"f\" supports only TopologyAwareScheduling"),
            "a PodSet without TAS on a TAS flavor"
        );
    }
}

/// Capacities far beyond `i32` pods (counts clamp to `i32::MAX`) sum without overflow, for a
/// leader with its workers as for a plain PodSet.
#[test]
fn huge_capacities_do_not_overflow() {
    let nodes: Vec<TopologyNode> = ["x1", "x2", "x3"]
        .iter()
        .map(|host| {
            node(
                &[(RACK, "r1"), (HOSTNAME_LABEL, host)],
                &[("cpu", i64::MAX), ("pods", i64::MAX)],
            )
        })
        .collect();
    let snapshot = TasSnapshot::new(
        "default",
        &levels(&[RACK, HOSTNAME_LABEL]),
        &BTreeMap::new(),
        &[],
        &nodes,
    );
    let mut workers = required(RACK, 5, &[("cpu", 1)]);
    workers.group = Some("g".to_owned());
    let mut leader = required(RACK, 1, &[("cpu", 1)]);
    leader.name = "leader".to_owned();
    leader.group = Some("g".to_owned());
    let results = snapshot.find_topology_assignments(&[workers, leader], &SearchOptions::default());
    let counts: Vec<i32> = ["leader", "main"]
        .iter()
        .map(|name| {
            results[*name]
                .assignment
                .as_ref()
                .map_or(0, TopologyAssignment::pod_count)
        })
        .collect();
    assert_eq!(counts, [1, 5]);
}

/// Upstream: tas_topology_tree_test.go, `TestNewTopologyTree`: every domain as
/// `(level, id) → (level values, parent, children, leaf node, CPU capacity)`.
#[test]
fn kueue_new_topology_tree() {
    const BLOCK: &str = "cloud.provider.com/topology-block";
    const TREE_RACK: &str = "cloud.provider.com/topology-rack";
    type Dump = BTreeMap<(usize, String), (String, String, Vec<String>, String, i64)>;
    fn dump(tree: &TopologyTree) -> Dump {
        tree.domains
            .iter()
            .map(|domain| {
                let parent = domain
                    .parent
                    .map(|p| tree.domains[p].id.clone())
                    .unwrap_or_default();
                let mut children: Vec<String> = domain
                    .children
                    .iter()
                    .map(|&c| tree.domains[c].id.clone())
                    .collect();
                children.sort();
                let leaf = domain.leaf.map(|l| &tree.leaves[l]);
                let node = leaf
                    .and_then(|l| l.node)
                    .map(|n| tree.nodes[n].name.clone())
                    .unwrap_or_default();
                let cpu = leaf
                    .and_then(|l| l.capacity.get("cpu").copied())
                    .unwrap_or(0);
                (
                    (domain.level(), domain.id.clone()),
                    (domain.level_values.join(","), parent, children, node, cpu),
                )
            })
            .collect()
    }
    fn tree_node(name: &str, block: &str, rack: &str) -> TopologyNode {
        let mut n = node(
            &[(BLOCK, block), (TREE_RACK, rack), (HOSTNAME_LABEL, name)],
            &[("cpu", 4000), ("memory", 16 << 30), ("pods", 110)],
        );
        n.name = name.to_owned();
        n
    }
    let entry = |level: usize,
                 id: &str,
                 values: &str,
                 parent: &str,
                 children: &[&str],
                 node: &str,
                 cpu: i64| {
        (
            (level, id.to_owned()),
            (
                values.to_owned(),
                parent.to_owned(),
                children.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>(),
                node.to_owned(),
                cpu,
            ),
        )
    };
    let three = vec![
        tree_node("n1", "b1", "r1"),
        tree_node("n2", "b1", "r1"),
        tree_node("n3", "b1", "r2"),
    ];
    let cases: Vec<(&str, Vec<String>, Vec<TopologyNode>, Dump)> = vec![
        (
            "lowest level is hostname",
            levels(&[BLOCK, TREE_RACK, HOSTNAME_LABEL]),
            three.clone(),
            Dump::from([
                entry(0, "b1", "b1", "", &["b1,r1", "b1,r2"], "", 0),
                entry(1, "b1,r1", "b1,r1", "b1", &["n1", "n2"], "", 0),
                entry(1, "b1,r2", "b1,r2", "b1", &["n3"], "", 0),
                entry(2, "n1", "b1,r1,n1", "b1,r1", &[], "n1", 4000),
                entry(2, "n2", "b1,r1,n2", "b1,r1", &[], "n2", 4000),
                entry(2, "n3", "b1,r2,n3", "b1,r2", &[], "n3", 4000),
            ]),
        ),
        (
            "lowest level is not hostname",
            levels(&[BLOCK, TREE_RACK]),
            three,
            Dump::from([
                entry(0, "b1", "b1", "", &["b1,r1", "b1,r2"], "", 0),
                entry(1, "b1,r1", "b1,r1", "b1", &[], "", 8000),
                entry(1, "b1,r2", "b1,r2", "b1", &[], "", 4000),
            ]),
        ),
        (
            "leaf and root IDs collide",
            levels(&[BLOCK, HOSTNAME_LABEL]),
            vec![tree_node("b1", "b1", "r1")],
            Dump::from([
                entry(0, "b1", "b1", "", &["b1"], "", 0),
                entry(1, "b1", "b1,b1", "b1", &[], "b1", 4000),
            ]),
        ),
    ];
    for (name, keys, nodes, want) in cases {
        let tree = TopologyTree::new(&keys, &BTreeMap::new(), &nodes);
        assert_eq!(dump(&tree), want, "{name}");
    }
}
