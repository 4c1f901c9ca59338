//! Beyond Kueue's TAS (issue 17, item 2): when no domain of a required level has room, find
//! the domain whose clearing preempts the least. Kueue's flavor assigner promises such a fit
//! but its preemption phase cannot deliver one; here every occupant of the domain counts
//! (all of its pods there, admitted through TAS or not), only occupants of lower priority
//! than the preemptor may go, and the PodSets must then fit inside that one domain.
//!
//! Off unless called: the cycle calls it through `tas::clearing` only with
//! `PreemptionConfig::topology_aware`. Knows nothing about quota, policies or how the victims
//! are evicted; the caller chooses the occupants and issues those preemptions.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use crate::tas::request::{PODS, PodSetTasRequest, PodSetTasResult, with_one_pod};
use crate::tas::snapshot::{SearchOptions, TasSnapshot};
use crate::workload::Requests;

/// Something holding capacity in the topology: a Workload (or a lone pod) with its priority
/// and its usage per leaf domain id (requests including `pods`), already in the snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Occupant {
    /// `namespace/name` of the Workload (or pod).
    pub key: String,
    /// Its priority.
    pub priority: i32,
    /// Usage per leaf domain id.
    pub usage: BTreeMap<String, Requests>,
}

impl Occupant {
    fn pods_in(&self, snapshot: &TasSnapshot, domain: &str) -> i64 {
        self.usage
            .iter()
            .filter(|(leaf, _)| snapshot.leaf_in_domain(leaf, domain))
            .map(|(_, usage)| usage.get(PODS).copied().unwrap_or(0))
            .fold(0, i64::saturating_add)
    }
}

/// The domain to clear and what clearing it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClearingPlan {
    /// The domain's id at the required level.
    pub domain: String,
    /// The occupants to preempt, in the order they were chosen.
    pub victims: Vec<String>,
    /// The assignments once they are gone.
    pub assignments: BTreeMap<String, PodSetTasResult>,
}

/// The domain of `requests`' required level whose clearing costs least, with the victims and
/// the assignments that then fit. The order: the fewest occupants preempted, then the fewest
/// of their pods in the domain, then the least fragmentation — the smallest free capacity
/// the domain keeps once cleared and placed (BestFit on what remains, counted as Kueue counts
/// a domain's capacity: how many more pods of the first required PodSet's shape would still
/// fit there), so that whole free domains stay whole — then the smallest id. Occupants of
/// `preemptor_priority` or above are never chosen. `None` when the PodSets have no required
/// level or no domain can be cleared enough.
pub fn cheapest_domain_to_clear(
    snapshot: &TasSnapshot,
    requests: &[PodSetTasRequest],
    occupants: &[Occupant],
    preemptor_priority: i32,
) -> Option<ClearingPlan> {
    let (shape, level_key) = requests.iter().find_map(|request| {
        let required = request.topology_request.as_ref()?.required.clone()?;
        Some((with_one_pod(&request.single_pod_requests), required))
    })?;
    let level = snapshot.tree.level_index(&level_key)?;
    let mut best: Option<((usize, i64, i64, String), ClearingPlan)> = None;
    for (domain, &index) in &snapshot.tree.per_level[level] {
        let Some((plan, cleared)) =
            clear_domain(snapshot, requests, occupants, preemptor_priority, domain)
        else {
            continue;
        };
        let pods: i64 = plan
            .victims
            .iter()
            .filter_map(|key| occupants.iter().find(|occupant| &occupant.key == key))
            .map(|occupant| occupant.pods_in(snapshot, domain))
            .fold(0, i64::saturating_add);
        let left = placed(cleared, requests, &plan).pods_fitting_in_domain(index, &shape);
        let cost = (plan.victims.len(), pods, left, domain.clone());
        if best.as_ref().is_none_or(|(best_cost, _)| cost < *best_cost) {
            best = Some((cost, plan));
        }
    }
    best.map(|(_, plan)| plan)
}

/// `cleared` with the plan's assignments added as usage.
fn placed(
    mut cleared: TasSnapshot,
    requests: &[PodSetTasRequest],
    plan: &ClearingPlan,
) -> TasSnapshot {
    for request in requests {
        let assignment = plan
            .assignments
            .get(&request.name)
            .and_then(|result| result.assignment.as_ref());
        if let Some(assignment) = assignment {
            cleared.add_assignment(assignment, &request.single_pod_requests);
        }
    }
    cleared
}

/// The victims that make `requests` fit inside `domain`: lower-priority occupants, lowest
/// priority (then most pods in the domain, then key) first, then each one given back again
/// when the fit survives without preempting it; with the snapshot once they are gone.
fn clear_domain(
    snapshot: &TasSnapshot,
    requests: &[PodSetTasRequest],
    occupants: &[Occupant],
    preemptor_priority: i32,
    domain: &str,
) -> Option<(ClearingPlan, TasSnapshot)> {
    let options = SearchOptions {
        within_domain: domain.to_owned(),
        ..SearchOptions::default()
    };
    let fits = |snapshot: &TasSnapshot| {
        let results = snapshot.find_topology_assignments(requests, &options);
        let all_fit = requests.iter().all(|request| {
            results
                .get(&request.name)
                .is_some_and(|result| result.failure_reason.is_empty())
        });
        all_fit.then_some(results)
    };
    let mut candidates: Vec<&Occupant> = occupants
        .iter()
        .filter(|occupant| {
            occupant.priority < preemptor_priority && occupant.pods_in(snapshot, domain) > 0
        })
        .collect();
    candidates.sort_by_key(|occupant| {
        (
            occupant.priority,
            Reverse(occupant.pods_in(snapshot, domain)),
            occupant.key.clone(),
        )
    });
    let mut cleared = snapshot.clone();
    let mut victims: Vec<&Occupant> = Vec::new();
    let mut fit = fits(&cleared);
    for candidate in candidates {
        if fit.is_some() {
            break;
        }
        remove(&mut cleared, candidate);
        victims.push(candidate);
        fit = fits(&cleared);
    }
    fit.as_ref()?;
    // Give back every victim the fit does not need, newest choice first.
    let mut index = victims.len();
    while index > 0 {
        index -= 1;
        let mut trial = cleared.clone();
        add(&mut trial, victims[index]);
        if let Some(results) = fits(&trial) {
            cleared = trial;
            fit = Some(results);
            victims.remove(index);
        }
    }
    let plan = ClearingPlan {
        domain: domain.to_owned(),
        victims: victims.iter().map(|victim| victim.key.clone()).collect(),
        assignments: fit.unwrap_or_default(),
    };
    Some((plan, cleared))
}

fn remove(snapshot: &mut TasSnapshot, occupant: &Occupant) {
    for (leaf, usage) in &occupant.usage {
        snapshot.remove_tas_usage(leaf, usage);
    }
}

fn add(snapshot: &mut TasSnapshot, occupant: &Occupant) {
    for (leaf, usage) in &occupant.usage {
        snapshot.add_tas_usage(leaf, usage);
    }
}
