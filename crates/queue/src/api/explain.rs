//! Why a Workload waits, in plain sentences (`tessera explain workload`): its LocalQueue,
//! ClusterQueue and position in both (the visibility order), what keeps it out of its queue
//! if anything does, the `QuotaReserved` condition Kueue wrote, and, for each PodSet and
//! each resource it requests, every flavor of the ClusterQueue's resource group: nominal
//! quota, usage, what can still be taken (borrowing included), how much is short, and which
//! ClusterQueues of the cohort borrow it; then what preemption could free under the
//! ClusterQueue's policies (`withinClusterQueue`, `reclaimWithinCohort`).
//!
//! Reads the stored objects only, through the same readers, tree and queues a pass uses.
//! The preemption candidates are listed by policy and priority, not by running the
//! preemption oracle: they say what the policy allows, not which ones a cycle would pick.

use std::time::SystemTime;

use serde_json::Value;
use tessera_model::conditions;

use crate::amount::Amount;
use crate::api::objects::{self, ClusterQueue, Objects, WorkloadState};
use crate::api::{pass, visibility};
use crate::assigner::format_amount;
use crate::cluster_queue::PreemptionPolicy;
use crate::preemption::AdmittedWorkload;
use crate::queue::QueuedWorkload;
use crate::resources::FlavorResource;
use crate::tree::{NodeId, Tree};

/// Explains the Workload `namespace/name`: one sentence per line; `None` when there is no
/// such Workload.
pub fn workload(
    objects: &Objects,
    namespace: &str,
    name: &str,
    now: SystemTime,
) -> Option<Vec<String>> {
    let object = objects
        .workloads
        .iter()
        .find(|o| objects::namespace(o) == namespace && objects::name(o) == name)?;
    let key = format!("{namespace}/{name}");
    let mut lines = Vec::new();
    match objects::workload_state(object) {
        None => lines.push(format!("Workload {key} cannot be read as a Kueue Workload.")),
        Some(WorkloadState::Finished) => lines.push(format!("Workload {key} has finished.")),
        Some(WorkloadState::Inactive) => lines.push(format!(
            "Workload {key} is deactivated (spec.active is false): it is not queued until it is activated again."
        )),
        Some(WorkloadState::Reserving {
            workload, admitted, ..
        }) => {
            let state = if admitted {
                "is admitted"
            } else {
                "has quota reserved and waits for its admission checks"
            };
            lines.push(format!(
                "Workload {key} {state} in ClusterQueue {}.",
                workload.cluster_queue
            ));
        }
        Some(WorkloadState::Pending(queued)) => pending(objects, object, &queued, now, &mut lines),
    }
    Some(lines)
}

fn pending(
    objects: &Objects,
    object: &Value,
    queued: &QueuedWorkload,
    now: SystemTime,
    lines: &mut Vec<String>,
) {
    let key = queued.key();
    lines.push(format!(
        "Workload {key} is pending in LocalQueue {} (priority {}).",
        queued.local_queue, queued.info.workload.priority
    ));
    // Ordered as without a Configuration: the API server does not read the queue manager's.
    let queues = pass::queues_of(objects, &pass::Settings::default(), now);
    let cluster_queue = match queues.cluster_queue_for(queued) {
        Ok(name) => Some(name.to_owned()),
        Err(blocker) => {
            lines.push(format!(
                "It is not queued: {} ({}).",
                blocker.message, blocker.reason
            ));
            None
        }
    };
    if let Some(blocker) = cluster_queue.as_ref().and(queues.blocker(queued)) {
        lines.push(format!(
            "It is not tried: {} ({}).",
            blocker.message, blocker.reason
        ));
    }
    if let Some(name) = &cluster_queue {
        position(objects, queued, name, now, lines);
    }
    if let Some(condition) =
        conditions::find(object, "QuotaReserved").filter(|c| c["status"] == "False")
    {
        lines.push(format!(
            "Kueue's QuotaReserved condition: {}: {}",
            condition["reason"].as_str().unwrap_or_default(),
            condition["message"].as_str().unwrap_or_default()
        ));
    }
    let Some(name) = cluster_queue else { return };
    let Some(cq) = objects
        .cluster_queues
        .iter()
        .find(|o| objects::name(o) == name)
        .and_then(objects::cluster_queue)
    else {
        return;
    };
    let Some(tree) = pass::quota_tree(objects) else {
        lines.push("Its ClusterQueues and Cohorts do not form a tree (a cycle?).".to_owned());
        return;
    };
    let Some(id) = tree.cluster_queue(&name) else {
        return;
    };
    let short = quota(&tree, id, &cq, queued, lines);
    preemption(objects, &tree, id, &cq, queued, &short, lines);
}

/// Its positions, from the visibility order.
fn position(
    objects: &Objects,
    queued: &QueuedWorkload,
    cluster_queue: &str,
    now: SystemTime,
    lines: &mut Vec<String>,
) {
    let Some(order) = visibility::cluster_queue_order(objects, cluster_queue, now) else {
        return;
    };
    let key = queued.key();
    let Some(me) = order
        .iter()
        .find(|w| format!("{}/{}", w.namespace, w.name) == key)
    else {
        return;
    };
    let in_local_queue = order
        .iter()
        .filter(|w| w.namespace == me.namespace && w.local_queue == me.local_queue)
        .count();
    lines.push(format!(
        "It is number {} of {} pending in ClusterQueue {cluster_queue} and number {} of {in_local_queue} in LocalQueue {}.",
        me.position_in_cluster_queue + 1,
        order.len(),
        me.position_in_local_queue + 1,
        me.local_queue
    ));
}

/// One sentence per (PodSet, resource, flavor); returns the (flavor, resource) pairs that
/// are short.
fn quota(
    tree: &Tree,
    id: NodeId,
    cq: &ClusterQueue,
    queued: &QueuedWorkload,
    lines: &mut Vec<String>,
) -> Vec<FlavorResource> {
    let cluster_queue = tree.name(id).to_owned();
    let mut short = Vec::new();
    for pod_set in &queued.info.total_requests {
        for (resource, requested) in &pod_set.requests {
            let request = Amount::new(*requested);
            let Some(group) = cq.snapshot.policy.group_for(resource) else {
                lines.push(format!(
                    "PodSet {} requests {} {resource}, which ClusterQueue {cluster_queue} has no quota for.",
                    pod_set.name,
                    format_amount(resource, request)
                ));
                continue;
            };
            for flavor in &group.flavors {
                let key = FlavorResource::new(flavor.clone(), resource.clone());
                let nominal = tree.quota(id, &key).nominal;
                let used = tree.usage(id).get(&key);
                let available = tree.available(id, &key);
                let amount = |a: Amount| format_amount(resource, a);
                let mut sentence = format!(
                    "PodSet {} needs {} {resource} in flavor {flavor}: ClusterQueue {cluster_queue} has nominal {}, uses {}, can take {} more (borrowing included)",
                    pod_set.name,
                    amount(request),
                    amount(nominal),
                    amount(used),
                    amount(available.max(Amount::ZERO))
                );
                if request > available {
                    sentence.push_str(&format!(
                        ": short by {}.",
                        amount(request - available.max(Amount::ZERO))
                    ));
                    short.push(key.clone());
                } else {
                    sentence.push_str(": enough.");
                }
                lines.push(sentence);
                for (borrower, borrowed) in borrowers(tree, id, &key) {
                    lines.push(format!(
                        "  ClusterQueue {borrower} of its cohort borrows {} {resource} of flavor {flavor} beyond its nominal quota.",
                        amount(borrowed)
                    ));
                }
            }
        }
    }
    short
}

/// The other ClusterQueues of `id`'s cohort tree using more of `key` than their nominal
/// quota, with how much more.
fn borrowers(tree: &Tree, id: NodeId, key: &FlavorResource) -> Vec<(String, Amount)> {
    if tree.parent(id).is_none() {
        return Vec::new();
    }
    tree.subtree_cluster_queues(tree.root(id))
        .into_iter()
        .filter(|other| *other != id)
        .filter_map(|other| {
            let over = tree.usage(other).get(key) - tree.quota(other, key).nominal;
            (over > Amount::ZERO).then(|| (tree.name(other).to_owned(), over))
        })
        .collect()
}

/// What preemption could free for the short (flavor, resource) pairs, by policy.
fn preemption(
    objects: &Objects,
    tree: &Tree,
    id: NodeId,
    cq: &ClusterQueue,
    queued: &QueuedWorkload,
    short: &[FlavorResource],
    lines: &mut Vec<String>,
) {
    if short.is_empty() {
        return;
    }
    let policy = cq.snapshot.policy.preemption;
    let name = tree.name(id);
    let priority = i64::from(queued.info.workload.priority);
    let holders: Vec<AdmittedWorkload> = objects
        .workloads
        .iter()
        .filter_map(|o| match objects::workload_state(o)? {
            WorkloadState::Reserving { workload, .. } => Some(*workload),
            _ => None,
        })
        .filter(|w| !w.evicted && short.iter().any(|key| w.usage.get(key) > Amount::ZERO))
        .collect();
    let within: Vec<&AdmittedWorkload> = holders
        .iter()
        .filter(|w| w.cluster_queue == name)
        .filter(|w| allows(policy.within_cluster_queue, priority, queued.creation, w))
        .collect();
    let borrowing: Vec<String> = borrowers_of(tree, id, short);
    let reclaim: Vec<&AdmittedWorkload> = holders
        .iter()
        .filter(|w| borrowing.contains(&w.cluster_queue))
        .filter(|w| allows(policy.reclaim_within_cohort, priority, queued.creation, w))
        .collect();
    lines.push(format!(
        "Preemption (withinClusterQueue: {}, reclaimWithinCohort: {}):",
        policy_name(policy.within_cluster_queue),
        policy_name(policy.reclaim_within_cohort)
    ));
    if within.is_empty() && reclaim.is_empty() {
        lines.push("  nothing it may preempt holds the quota it is short of.".to_owned());
    }
    for workload in within.iter().chain(&reclaim) {
        lines.push(format!(
            "  could preempt {}/{} (priority {}) in ClusterQueue {}.",
            workload.namespace, workload.name, workload.priority, workload.cluster_queue
        ));
    }
}

/// The ClusterQueues of the cohort borrowing any of `short`.
fn borrowers_of(tree: &Tree, id: NodeId, short: &[FlavorResource]) -> Vec<String> {
    let mut names: Vec<String> = short
        .iter()
        .flat_map(|key| borrowers(tree, id, key))
        .map(|(name, _)| name)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Whether `policy` lets a Workload of `priority` created at `creation` preempt `target`.
fn allows(
    policy: PreemptionPolicy,
    priority: i64,
    creation: SystemTime,
    target: &AdmittedWorkload,
) -> bool {
    match policy {
        PreemptionPolicy::Never => false,
        PreemptionPolicy::LowerPriority => target.priority < priority,
        PreemptionPolicy::LowerOrNewerEqualPriority => {
            target.priority < priority
                || (target.priority == priority && target.queue_timestamp > creation)
        }
        PreemptionPolicy::Any => true,
    }
}

fn policy_name(policy: PreemptionPolicy) -> &'static str {
    match policy {
        PreemptionPolicy::Never => "Never",
        PreemptionPolicy::LowerPriority => "LowerPriority",
        PreemptionPolicy::LowerOrNewerEqualPriority => "LowerOrNewerEqualPriority",
        PreemptionPolicy::Any => "Any",
    }
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
