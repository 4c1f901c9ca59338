//! Table tests of the TAS step on the assigner's `Assignment`.

use std::collections::BTreeMap;

use super::*;
use crate::assigner::{FlavorAssignment, PodSetAssignment, Status};
use crate::tas::request::TopologyRequest;
use crate::tas::tree::TopologyNode;

const RACK: &str = "rack";
const GPU: &str = "nvidia.com/gpu";

/// Two racks of two nodes with two GPUs each; `used` GPUs already placed in each rack.
fn tas(used: i32) -> TasFlavors {
    let nodes: Vec<TopologyNode> = ["r1", "r2"]
        .iter()
        .flat_map(|rack| {
            (0..2).map(move |n| TopologyNode {
                name: format!("{rack}-{n}"),
                labels: BTreeMap::from([
                    (RACK.to_owned(), (*rack).to_owned()),
                    (crate::tas::HOSTNAME_LABEL.to_owned(), format!("{rack}-{n}")),
                ]),
                allocatable: BTreeMap::from([(GPU.to_owned(), 2), ("pods".to_owned(), 10)]),
                taints: Vec::new(),
                schedulable_and_ready: true,
            })
        })
        .collect();
    let levels = vec![RACK.to_owned(), crate::tas::HOSTNAME_LABEL.to_owned()];
    let mut snapshot = TasSnapshot::new("default", &levels, &BTreeMap::new(), &[], &nodes);
    if used > 0 {
        let placed = TopologyAssignment {
            levels: vec![crate::tas::HOSTNAME_LABEL.to_owned()],
            domains: ["r1-0", "r2-0"]
                .iter()
                .map(|host| crate::tas::TopologyDomainAssignment {
                    values: vec![(*host).to_owned()],
                    count: used,
                })
                .collect(),
        };
        snapshot.add_assignment(&placed, &BTreeMap::from([(GPU.to_owned(), 1)]));
    }
    TasFlavors {
        topologies: BTreeMap::from([("tas".to_owned(), "default".to_owned())]),
        snapshots: BTreeMap::from([("tas".to_owned(), snapshot)]),
    }
}

fn pod_set(pods: i32, level: Option<&str>) -> PodSet {
    PodSet {
        name: "main".to_owned(),
        count: pods,
        requests: BTreeMap::from([(GPU.to_owned(), 1)]),
        topology_request: level.map(|level| TopologyRequest {
            required: Some(level.to_owned()),
            ..TopologyRequest::default()
        }),
        ..PodSet::default()
    }
}

fn assignment(pods: i32, quota_mode: FlavorAssignmentMode) -> Assignment {
    let reasons = match quota_mode {
        FlavorAssignmentMode::Fit => Vec::new(),
        _ => vec!["insufficient unused quota".to_owned()],
    };
    Assignment {
        pod_sets: vec![PodSetAssignment {
            name: "main".to_owned(),
            flavors: BTreeMap::from([(
                GPU.to_owned(),
                FlavorAssignment {
                    name: "tas".to_owned(),
                    mode: quota_mode,
                    tried_flavor_idx: -1,
                    borrow: 0,
                },
            )]),
            status: Status { reasons },
            requests: BTreeMap::new(),
            count: pods,
            topology: None,
            topology_failed_in: None,
        }],
        ..Assignment::default()
    }
}

#[test]
fn the_tas_step_sets_placements_modes_and_reasons_as_kueue() {
    use FlavorAssignmentMode::{Fit, NoFit, Preempt};
    // (case, pods, level, GPUs used per rack, quota's mode, tas-only, want mode, want hosts,
    //  want last reason, want the failed flavor)
    type Case = (
        &'static str,
        i32,
        Option<&'static str>,
        i32,
        FlavorAssignmentMode,
        bool,
        FlavorAssignmentMode,
        usize,
        Option<&'static str>,
        bool,
    );
    let cases: Vec<Case> = vec![
        (
            "fits in a free rack",
            4,
            Some(RACK),
            0,
            Fit,
            false,
            Fit,
            2,
            None,
            false,
        ),
        (
            "no request in a mixed ClusterQueue: untouched",
            4,
            None,
            0,
            Fit,
            false,
            Fit,
            0,
            None,
            false,
        ),
        (
            "implied in a TAS-only ClusterQueue",
            3,
            None,
            0,
            Fit,
            true,
            Fit,
            2,
            None,
            false,
        ),
        (
            "fits only with TAS Workloads gone: Preempt with the reason",
            4,
            Some(RACK),
            1,
            Fit,
            false,
            Preempt,
            0,
            Some("topology \"default\" allows to fit only 3 out of 4 pod(s)"),
            false,
        ),
        (
            "never fits: NoFit with the reason",
            5,
            Some(RACK),
            0,
            Fit,
            false,
            NoFit,
            0,
            Some("topology \"default\" allows to fit only 4 out of 5 pod(s)"),
            true,
        ),
        (
            "quota asked for preemption: the mode only",
            5,
            Some(RACK),
            0,
            Preempt,
            false,
            NoFit,
            0,
            Some("insufficient unused quota"),
            true,
        ),
    ];
    for (name, pods, level, used, quota, tas_only, mode, hosts, reason, failed) in cases {
        let mut got = assignment(pods, quota);
        place(&mut got, &[pod_set(pods, level)], tas_only, &tas(used));
        assert_eq!(got.representative_mode(), mode, "{name}");
        let ps = &got.pod_sets[0];
        assert_eq!(
            ps.topology
                .as_ref()
                .map_or(0, |t| t.assignment.domains.len()),
            hosts,
            "{name}: {:?}",
            ps.topology
        );
        assert_eq!(
            ps.status.reasons.last().map(String::as_str),
            reason,
            "{name}"
        );
        assert_eq!(ps.topology_failed_in.is_some(), failed, "{name}");
    }
}
