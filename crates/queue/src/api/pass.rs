//! One pass of the queue manager over Kueue's stored objects: the quota tree with the usage
//! of every Workload holding quota, the queues of the pending ones (the workload
//! controller's blockers — missing or stopped LocalQueue, missing or inactive ClusterQueue —
//! answered at once), scheduling cycles run until they decide nothing new (Kueue runs them
//! back to back while its queues have heads), and what to write: each Workload's status
//! (admission, QuotaReserved=False with the cycle's reason and message, eviction of
//! victims), and every ClusterQueue's and LocalQueue's status.
//!
//! Every pass starts from the stored objects, so a restart rebuilds the same queues and a
//! Workload holding quota is never admitted twice. Knows nothing about how objects are
//! watched or written; time is an argument.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde_json::Value;

use crate::amount::Amount;
use crate::api::evictions;
use crate::api::objects::{self, ClusterQueue, Objects, WorkloadState};
use crate::api::status::{self, Counts, Event, Usage};
use crate::cycle::{self, Admission, ClusterQueueSnapshot, Decision, KueuePreemption, Snapshot};
use crate::flavor::ResourceFlavorSpec;
use crate::preemption::{AdmittedWorkload, PreemptionConfig};
use crate::queue::{ClusterQueueQueue, LocalQueue, QueueManager, QueuedWorkload, StopPolicy};
use crate::resources::{FlavorResource, FlavorResourceQuantities};
use crate::tree::{Tree, TreeSpec};

/// A status to write to one object.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusWrite {
    /// Its namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The new `status` (a merge patch of it).
    pub status: Value,
}

/// What one pass decided to write.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pass {
    /// Workload statuses: admissions, pending conditions, evictions.
    pub workloads: Vec<StatusWrite>,
    /// ClusterQueue statuses that changed.
    pub cluster_queues: Vec<StatusWrite>,
    /// LocalQueue statuses that changed.
    pub local_queues: Vec<StatusWrite>,
    /// Events about the Workloads written.
    pub events: Vec<Event>,
}

/// What finally became of a Workload in the pass.
enum Outcome {
    Admitted(Admission),
    Pending { reason: String, message: String },
}

/// The Workload statuses a pass changes: several changes to one Workload (a pending
/// condition and a restart, say) merge into one write, each computed from the status the
/// earlier ones left.
#[derive(Default)]
struct Changed {
    /// The object as changed so far, and the status fields written.
    objects: BTreeMap<String, (Value, BTreeSet<String>)>,
}

impl Changed {
    /// The object as changed so far.
    fn current(&self, key: &str, stored: &Value) -> Value {
        self.objects
            .get(key)
            .map_or_else(|| stored.clone(), |(object, _)| object.clone())
    }

    /// Records a status change (a merge patch of the status) of `object`, as it is now.
    fn record(&mut self, key: &str, object: &Value, status: Option<Value>) {
        let Some(Value::Object(status)) = status else {
            return;
        };
        let (current, fields) = self
            .objects
            .entry(key.to_owned())
            .or_insert_with(|| (object.clone(), BTreeSet::new()));
        if !current["status"].is_object() {
            current["status"] = Value::Object(serde_json::Map::new());
        }
        for (field, value) in status {
            current["status"][&field] = value;
            fields.insert(field);
        }
    }

    /// One write per changed Workload: the fields written, as they ended.
    fn writes(self) -> Vec<StatusWrite> {
        self.objects
            .into_values()
            .map(|(object, fields)| {
                let status: serde_json::Map<String, Value> = fields
                    .into_iter()
                    .map(|field| {
                        let value = object["status"][&field].clone();
                        (field, value)
                    })
                    .collect();
                write_for(&object, Value::Object(status))
            })
            .collect()
    }
}

/// A Workload to evict, and why.
struct Victim {
    reason: String,
    message: String,
    preemptor_priority: i64,
}

/// A Workload holding quota, as queue statuses count it.
struct Holder {
    cluster_queue: String,
    local_queue: String,
    usage: FlavorResourceQuantities,
    admitted: bool,
}

/// What a pass keeps for the next, as Kueue's queue manager keeps it between cycles: the
/// queues (inadmissible sets, the sticky preemptor of each ClusterQueue) and what the
/// inadmissible Workloads last waited on.
#[derive(Debug, Clone, Default)]
pub struct Queues {
    manager: QueueManager,
    waited_on: Option<WaitedOn>,
}

/// What can make an inadmissible Workload admissible.
#[derive(Debug, Clone, PartialEq)]
struct WaitedOn {
    usage: BTreeMap<String, FlavorResourceQuantities>,
    tree: TreeSpec,
    cluster_queues: BTreeMap<String, ClusterQueueSnapshot>,
    flavors: BTreeMap<String, ResourceFlavorSpec>,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

/// Runs a pass over `objects` at `now` with the given preemption configuration, with the
/// queues of the passes before (`Queues::default()` after a start).
pub fn pass(
    objects: &Objects,
    state: &mut Queues,
    preemption: PreemptionConfig,
    now: SystemTime,
) -> Pass {
    let flavors: BTreeMap<String, ResourceFlavorSpec> = objects
        .flavors
        .iter()
        .filter_map(objects::flavor)
        .map(|f| (f.name.clone(), f))
        .collect();
    let cluster_queues: BTreeMap<String, (ClusterQueue, &Value)> = objects
        .cluster_queues
        .iter()
        .filter_map(|o| Some((objects::name(o).to_owned(), (objects::cluster_queue(o)?, o))))
        .collect();
    let workloads: BTreeMap<String, (&Value, WorkloadState)> = objects
        .workloads
        .iter()
        .filter_map(|o| Some((objects::key(o), (o, objects::workload_state(o)?))))
        .collect();

    let mut holders: BTreeMap<String, Holder> = BTreeMap::new();
    let mut admitted = Vec::new();
    let mut pending: Vec<&QueuedWorkload> = Vec::new();
    for (key, (_, state)) in &workloads {
        match state {
            WorkloadState::Reserving {
                workload,
                admitted: is_admitted,
                local_queue,
                ..
            } => {
                holders.insert(
                    key.clone(),
                    Holder {
                        cluster_queue: workload.cluster_queue.clone(),
                        local_queue: format!("{}/{local_queue}", workload.namespace),
                        usage: workload.usage.clone(),
                        admitted: *is_admitted,
                    },
                );
                admitted.push(workload.clone());
            }
            WorkloadState::Pending(queued) => pending.push(queued),
            WorkloadState::Finished | WorkloadState::Inactive => {}
        }
    }

    let mut usage: BTreeMap<String, FlavorResourceQuantities> = BTreeMap::new();
    for holder in holders.values() {
        let total = usage.entry(holder.cluster_queue.clone()).or_default();
        for (key, amount) in holder.usage.iter() {
            total.add(key, amount);
        }
    }
    let spec = TreeSpec {
        cohorts: objects.cohorts.iter().filter_map(objects::cohort).collect(),
        cluster_queues: cluster_queues
            .values()
            .map(|(cq, _)| cq.tree.clone())
            .collect(),
    };
    let Ok(tree) = Tree::build_with_usage(&spec, &usage) else {
        return Pass::default();
    };

    let missing_flavors = |cq: &ClusterQueue| -> Vec<String> {
        cq.flavor_resources
            .iter()
            .map(|(flavor, _)| flavor.clone())
            .filter(|flavor| !flavors.contains_key(flavor))
            .collect()
    };
    let activity: BTreeMap<&str, status::Active> = cluster_queues
        .iter()
        .map(|(name, (cq, _))| {
            let active = status::cluster_queue_active(
                cq.terminating,
                cq.stop_policy != StopPolicy::None,
                &missing_flavors(cq),
            );
            (name.as_str(), active)
        })
        .collect();
    let is_active = |name: &str| activity.get(name).is_some_and(|a| a.0 == "True");

    let namespaces = objects::namespace_labels(&objects.namespaces);
    let snapshots: BTreeMap<String, ClusterQueueSnapshot> = cluster_queues
        .iter()
        .map(|(name, (cq, _))| (name.clone(), cq.snapshot.clone()))
        .collect();
    let queues = &mut state.manager;
    queues.local_queues = objects
        .local_queues
        .iter()
        .filter_map(|lq| {
            let (cluster_queue, stop_policy) = objects::local_queue(lq)?;
            let local_queue = LocalQueue {
                cluster_queue,
                stop_policy,
                user_limits: Default::default(),
            };
            Some((objects::key(lq), local_queue))
        })
        .collect();
    queues
        .cluster_queues
        .retain(|name, _| cluster_queues.contains_key(name));
    for (name, (cq, _)) in &cluster_queues {
        let queue = queues
            .cluster_queues
            .entry(name.clone())
            .or_insert_with(|| ClusterQueueQueue::new(cq.strategy));
        queue.strategy = cq.strategy;
        queue.active = is_active(name);
    }

    let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut victims: BTreeMap<String, Victim> = BTreeMap::new();
    let mut queued_in: BTreeMap<String, String> = BTreeMap::new();
    for queued in &pending {
        if let Some(blocker) = queues.blocker(queued) {
            let outcome = Outcome::Pending {
                reason: blocker.reason.to_owned(),
                message: blocker.message,
            };
            outcomes.insert(queued.key(), outcome);
            continue;
        }
        if let Ok(name) = queues.cluster_queue_for(queued) {
            queued_in.insert(queued.key(), name.to_owned());
        }
        let _ = queues.add_or_update((*queued).clone(), now);
    }
    // Workloads no longer pending (or moved to another ClusterQueue) leave their queue.
    let ordering = queues.ordering.clone();
    for (name, queue) in &mut queues.cluster_queues {
        let held = queue
            .dump(&ordering)
            .into_iter()
            .chain(queue.dump_inadmissible());
        let gone: Vec<String> = held
            .filter(|key| queued_in.get(key) != Some(name))
            .collect();
        for key in gone {
            queue.delete(&key);
        }
    }
    // Inadmissible Workloads try again when what they waited on changed: quota freed or
    // taken, queues, cohorts, flavors or namespaces changed (Kueue's
    // `QueueInadmissibleWorkloads` on those events).
    let waited_on = WaitedOn {
        usage: usage.clone(),
        tree: spec.clone(),
        cluster_queues: snapshots.clone(),
        flavors: flavors.clone(),
        namespaces: namespaces.clone(),
    };
    if state.waited_on.as_ref() != Some(&waited_on) {
        for queue in queues.cluster_queues.values_mut() {
            queue.queue_inadmissible(now, &|_| true);
        }
        state.waited_on = Some(waited_on);
    }

    let mut base = Snapshot {
        tree,
        cluster_queues: snapshots,
        flavors,
        namespaces,
        admitted,
        preemption,
        recompute_on_overlap: true,
        timestamp: Default::default(),
    };
    let mut newly_admitted: BTreeMap<String, (String, FlavorResourceQuantities)> = BTreeMap::new();
    // Each cycle pops at most one head per ClusterQueue and decides on a fresh copy of the
    // snapshot, as Kueue's cycles each take one from its cache: only admissions (and the
    // evictions issued) carry over to the next. A cycle that decides nothing new ends the
    // pass; the rest waits for a change or the next pass.
    let mut decided: BTreeSet<(String, u8)> = BTreeSet::new();
    for _ in 0..=pending.len() {
        let mut snapshot = base.clone();
        let decisions = cycle::schedule(&mut snapshot, queues, &KueuePreemption, now);
        let mut news = false;
        for decision in decisions {
            match decision {
                Decision::Admit {
                    workload,
                    admission,
                } => {
                    news |= decided.insert((workload.clone(), 0));
                    if let Some(WorkloadState::Pending(queued)) =
                        workloads.get(&workload).map(|w| &w.1)
                    {
                        let usage = admission_usage(&admission);
                        if let Some(id) = base.tree.cluster_queue(&admission.cluster_queue) {
                            base.tree.add_usages(id, &usage);
                        }
                        base.admitted
                            .push(admitted_workload(queued, &admission, &usage, now));
                        newly_admitted
                            .insert(workload.clone(), (admission.cluster_queue.clone(), usage));
                    }
                    outcomes.insert(workload, Outcome::Admitted(admission));
                }
                Decision::Preempt {
                    workload,
                    victims: targets,
                    pending,
                } => {
                    news |= decided.insert((workload.clone(), 1));
                    for target in targets {
                        if let Some(candidate) = base
                            .admitted
                            .iter_mut()
                            .find(|a| a.key() == target.workload)
                        {
                            candidate.evicted = true;
                        }
                        let preemptor_priority = workloads
                            .get(&workload)
                            .and_then(|(object, _)| objects::workload(object))
                            .map_or(0, |w| i64::from(w.priority));
                        victims.insert(
                            target.workload,
                            Victim {
                                reason: target.reason.as_str().to_owned(),
                                message: target.message,
                                preemptor_priority,
                            },
                        );
                    }
                    outcomes.insert(
                        workload,
                        Outcome::Pending {
                            reason: pending.reason,
                            message: pending.message,
                        },
                    );
                }
                Decision::Requeue {
                    workload, pending, ..
                } => {
                    news |= decided.insert((workload.clone(), 2));
                    outcomes.insert(
                        workload,
                        Outcome::Pending {
                            reason: pending.reason,
                            message: pending.message,
                        },
                    );
                }
            }
        }
        if !news {
            break;
        }
    }

    let mut pass = Pass::default();
    let mut changed = Changed::default();
    for (key, outcome) in &outcomes {
        let Some((object, _)) = workloads.get(key) else {
            continue;
        };
        match outcome {
            Outcome::Admitted(admission) => {
                pass.events
                    .extend(status::admission_events(object, admission, now));
                changed.record(key, object, Some(status::admitted(object, admission, now)));
            }
            Outcome::Pending { reason, message } => {
                let written = status::pending(object, reason, message, now);
                if written.is_some() {
                    pass.events
                        .push(Event::workload(object, "Warning", reason, message));
                }
                changed.record(key, object, written);
            }
        }
    }
    for (key, victim) in &victims {
        let Some((object, state)) = workloads.get(key) else {
            continue;
        };
        if let Some(status) = status::preempted(object, &victim.reason, &victim.message, now) {
            let priority = match state {
                WorkloadState::Reserving { workload, .. } => workload.priority,
                _ => 0,
            };
            // The boosts of PriorityBoost (alpha, off) are always 0.
            let message = format!(
                "{}; preemptor effective priority: {} (base: {}, boost: 0); preemptee effective priority: {priority} (base: {priority}, boost: 0)",
                victim.message, victim.preemptor_priority, victim.preemptor_priority
            );
            pass.events
                .push(Event::workload(object, "Normal", "Preempted", &message));
            changed.record(key, object, Some(status));
        }
    }
    // The workload controller's evictions (deactivated, drained queues) and restarts.
    let stop_policies = |local_queue: &str, cluster_queue: Option<&str>| evictions::Queues {
        local_queue: queues
            .local_queues
            .get(local_queue)
            .map(|lq| lq.stop_policy),
        cluster_queue: cluster_queue
            .and_then(|name| cluster_queues.get(name))
            .map(|(cq, _)| cq.stop_policy),
    };
    for (key, (object, state)) in &workloads {
        let object = changed.current(key, object);
        let written = match state {
            WorkloadState::Reserving {
                workload,
                local_queue,
                active,
                ..
            } => {
                let local_queue = format!("{}/{local_queue}", workload.namespace);
                let stop = stop_policies(&local_queue, Some(&workload.cluster_queue));
                evictions::eviction(&object, *active, stop)
                    .and_then(|(reason, message)| status::evicted(&object, reason, message, now))
            }
            WorkloadState::Pending(queued) => {
                let local_queue = queued.local_queue_key();
                let cluster_queue = queues
                    .local_queues
                    .get(&local_queue)
                    .map(|lq| lq.cluster_queue.as_str());
                let stop = stop_policies(&local_queue, cluster_queue);
                evictions::restart(&object, stop)
                    .and_then(|(reason, message)| status::requeued(&object, reason, message, now))
            }
            WorkloadState::Finished | WorkloadState::Inactive => None,
        };
        changed.record(key, &object, written);
    }
    pass.workloads = changed.writes();

    // Queue statuses, after this pass's admissions.
    for (key, (cluster_queue, usage)) in newly_admitted {
        if let Some(WorkloadState::Pending(queued)) = workloads.get(&key).map(|w| &w.1) {
            holders.insert(
                key,
                Holder {
                    cluster_queue,
                    local_queue: queued.local_queue_key(),
                    usage,
                    admitted: true,
                },
            );
        }
    }
    let mut cq_counts: BTreeMap<String, (Counts, Usage)> = BTreeMap::new();
    let mut lq_counts: BTreeMap<String, (Counts, Usage)> = BTreeMap::new();
    for holder in holders.values() {
        for (entry_key, map) in [
            (&holder.cluster_queue, &mut cq_counts),
            (&holder.local_queue, &mut lq_counts),
        ] {
            let (counts, usage) = map.entry(entry_key.clone()).or_default();
            counts.reserving += 1;
            for (key, amount) in holder.usage.iter() {
                usage.reserved.add(key, amount);
                if holder.admitted {
                    usage.admitted.add(key, amount);
                }
            }
            if holder.admitted {
                counts.admitted += 1;
            }
        }
    }
    for queued in &pending {
        if holders.contains_key(&queued.key()) {
            continue;
        }
        if let Some(local_queue) = queues.local_queues.get(&queued.local_queue_key()) {
            cq_counts
                .entry(local_queue.cluster_queue.clone())
                .or_default()
                .0
                .pending += 1;
            lq_counts
                .entry(queued.local_queue_key())
                .or_default()
                .0
                .pending += 1;
        }
    }
    for (name, (cq, object)) in &cluster_queues {
        let (counts, usage) = cq_counts.remove(name).unwrap_or_default();
        let nominal: BTreeMap<FlavorResource, Amount> = cq
            .tree
            .quotas
            .iter()
            .map(|(key, quota)| (key.clone(), quota.nominal))
            .collect();
        let active = &activity[name.as_str()];
        if let Some(status) = status::cluster_queue_status(
            object,
            &cq.flavor_resources,
            cq.tree.cohort.as_ref().map(|_| &nominal),
            counts,
            &usage,
            active,
            now,
        ) {
            pass.cluster_queues.push(write_for(object, status));
        }
    }
    for object in &objects.local_queues {
        let Some((cluster_queue, stop_policy)) = objects::local_queue(object) else {
            continue;
        };
        let cq = cluster_queues.get(&cluster_queue);
        let active = status::local_queue_active(
            stop_policy != StopPolicy::None,
            cq.map(|_| is_active(&cluster_queue)),
        );
        let flavors = cq
            .map(|(cq, _)| cq.flavor_resources.clone())
            .unwrap_or_default();
        let (counts, usage) = lq_counts.remove(&objects::key(object)).unwrap_or_default();
        if let Some(status) =
            status::local_queue_status(object, &flavors, counts, &usage, &active, now)
        {
            pass.local_queues.push(write_for(object, status));
        }
    }
    pass
}

fn write_for(object: &Value, status: Value) -> StatusWrite {
    StatusWrite {
        namespace: objects::namespace(object).to_owned(),
        name: objects::name(object).to_owned(),
        status,
    }
}

/// The quota an Admission holds.
fn admission_usage(admission: &Admission) -> FlavorResourceQuantities {
    objects::usage_of(admission.pod_set_assignments.iter().flat_map(|ps| {
        ps.resource_usage.iter().filter_map(|(resource, value)| {
            let flavor = ps.flavors.get(resource)?;
            Some((flavor.as_str(), resource.as_str(), *value))
        })
    }))
}

fn admitted_workload(
    queued: &QueuedWorkload,
    admission: &Admission,
    usage: &FlavorResourceQuantities,
    now: SystemTime,
) -> AdmittedWorkload {
    AdmittedWorkload {
        namespace: queued.info.workload.namespace.clone(),
        name: queued.info.workload.name.clone(),
        uid: queued.uid.clone(),
        cluster_queue: admission.cluster_queue.clone(),
        priority: i64::from(queued.info.workload.priority),
        queue_timestamp: queued.creation,
        quota_reserved_at: Some(now),
        usage: usage.clone(),
        evicted: false,
        local_queue: queued.local_queue.clone(),
        user: queued.user.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn flavor(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {}})
    }

    fn cluster_queue(name: &str, cohort: Option<&str>, cpu: &str) -> Value {
        let mut spec = json!({"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": "default-flavor", "resources": [
                {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "36Gi"}]}]}]});
        if let Some(cohort) = cohort {
            spec["cohortName"] = json!(cohort);
        }
        json!({"metadata": {"name": name, "generation": 1}, "spec": spec})
    }

    fn local_queue(name: &str, cluster_queue: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"clusterQueue": cluster_queue}})
    }

    fn workload(name: &str, queue: &str, pods: i32, seconds: u64) -> Value {
        let created = tessera_model::time::timestamp(now() - Duration::from_secs(1000 - seconds));
        json!({"metadata": {"name": name, "namespace": "default", "uid": name, "generation": 1,
                "creationTimestamp": created},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": pods, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]}}}]}})
    }

    fn objects(
        cluster_queues: Vec<Value>,
        local_queues: Vec<Value>,
        workloads: Vec<Value>,
    ) -> Objects {
        Objects {
            flavors: vec![flavor("default-flavor")],
            cluster_queues,
            cohorts: Vec::new(),
            local_queues,
            workloads,
            namespaces: vec![json!({"metadata": {"name": "default"}})],
        }
    }

    fn written<'a>(writes: &'a [StatusWrite], name: &str) -> Option<&'a Value> {
        writes.iter().find(|w| w.name == name).map(|w| &w.status)
    }

    fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == kind))
            .unwrap_or(&Value::Null)
    }

    #[test]
    fn the_quick_start_admits_what_fits_and_explains_what_does_not() {
        let input = objects(
            vec![cluster_queue("cluster-queue", None, "9")],
            vec![local_queue("user-queue", "cluster-queue")],
            vec![
                workload("sample-job", "user-queue", 3, 1),
                workload("too-big", "user-queue", 10, 2),
                workload("lost", "no-such-queue", 1, 3),
            ],
        );
        let pass = pass(
            &input,
            &mut Queues::default(),
            PreemptionConfig::default(),
            now(),
        );
        let admitted = written(&pass.workloads, "sample-job").expect("admitted");
        assert_eq!(admitted["admission"]["clusterQueue"], "cluster-queue");
        let assignment = &admitted["admission"]["podSetAssignments"][0];
        assert_eq!(
            assignment["flavors"],
            json!({"cpu": "default-flavor", "memory": "default-flavor"})
        );
        assert_eq!(
            assignment["resourceUsage"],
            json!({"cpu": "3", "memory": "600Mi"})
        );
        assert_eq!(condition(admitted, "Admitted")["status"], "True");

        let too_big = written(&pass.workloads, "too-big").expect("pending");
        let reserved = condition(too_big, "QuotaReserved");
        assert_eq!(reserved["status"], "False");
        let message = reserved["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("insufficient quota for cpu in flavor default-flavor"),
            "{message}"
        );

        // Events: the admission's two, a warning per newly pending Workload.
        let events: Vec<(&str, &str, &str)> = pass
            .events
            .iter()
            .map(|e| {
                (
                    e.involved["name"].as_str().unwrap_or(""),
                    e.kind,
                    e.reason.as_str(),
                )
            })
            .collect();
        assert!(
            events.contains(&("sample-job", "Normal", "QuotaReserved")),
            "{events:?}"
        );
        assert!(
            events.contains(&("sample-job", "Normal", "Admitted")),
            "{events:?}"
        );
        assert!(
            events.contains(&("lost", "Warning", "Misconfigured")),
            "{events:?}"
        );
        let reserved = pass
            .events
            .iter()
            .find(|e| e.reason == "QuotaReserved")
            .expect("event");
        assert_eq!(
            reserved.message,
            "Quota reserved in ClusterQueue cluster-queue, wait time since queued was 999s"
        );
        assert_eq!(reserved.involved["kind"], "Workload");

        let lost = written(&pass.workloads, "lost").expect("pending");
        assert_eq!(condition(lost, "QuotaReserved")["reason"], "Misconfigured");
        assert_eq!(
            condition(lost, "QuotaReserved")["message"],
            "LocalQueue no-such-queue doesn't exist"
        );

        let cq = written(&pass.cluster_queues, "cluster-queue").expect("status");
        assert_eq!(
            (
                &cq["pendingWorkloads"],
                &cq["reservingWorkloads"],
                &cq["admittedWorkloads"]
            ),
            (&json!(1), &json!(1), &json!(1))
        );
        assert_eq!(
            cq["flavorsReservation"][0]["resources"][0],
            json!({"name": "cpu", "total": "3", "borrowed": "0"})
        );
        assert_eq!(condition(cq, "Active")["reason"], "Ready");
        let lq = written(&pass.local_queues, "user-queue").expect("status");
        assert_eq!(
            lq["flavorsUsage"][0]["resources"][1],
            json!({"name": "memory", "total": "600Mi"})
        );
    }

    #[test]
    fn a_stored_reservation_is_kept_and_counted_not_admitted_again() {
        let first = objects(
            vec![cluster_queue("cluster-queue", None, "9")],
            vec![local_queue("user-queue", "cluster-queue")],
            vec![
                workload("a", "user-queue", 6, 1),
                workload("b", "user-queue", 6, 2),
            ],
        );
        let mut queues = Queues::default();
        let pass1 = pass(&first, &mut queues, PreemptionConfig::default(), now());
        let mut a = first.workloads[0].clone();
        a["status"] = written(&pass1.workloads, "a").expect("a admitted").clone();
        let mut b = first.workloads[1].clone();
        b["status"] = written(&pass1.workloads, "b").expect("b pending").clone();
        assert_eq!(condition(&b["status"], "QuotaReserved")["status"], "False");
        // The stored objects after the writes: nothing new to write for either Workload.
        let second = objects(
            first.cluster_queues.clone(),
            first.local_queues.clone(),
            vec![a, b],
        );
        let pass2 = pass(
            &second,
            &mut queues,
            PreemptionConfig::default(),
            now() + Duration::from_secs(5),
        );
        assert!(pass2.workloads.is_empty(), "{:?}", pass2.workloads);
    }

    #[test]
    fn a_cluster_queue_borrows_its_cohorts_idle_quota() {
        let input = objects(
            vec![
                cluster_queue("team-a", Some("org"), "9"),
                cluster_queue("team-b", Some("org"), "9"),
            ],
            vec![local_queue("a", "team-a"), local_queue("b", "team-b")],
            vec![workload("big", "b", 12, 1)],
        );
        let pass = pass(
            &input,
            &mut Queues::default(),
            PreemptionConfig::default(),
            now(),
        );
        let admitted = written(&pass.workloads, "big").expect("admitted");
        assert_eq!(admitted["admission"]["clusterQueue"], "team-b");
        let cq = written(&pass.cluster_queues, "team-b").expect("status");
        assert_eq!(
            cq["flavorsReservation"][0]["resources"][0],
            json!({"name": "cpu", "total": "12", "borrowed": "3"})
        );
    }

    #[test]
    fn a_missing_flavor_makes_the_queues_inactive() {
        let mut input = objects(
            vec![cluster_queue("cluster-queue", None, "9")],
            vec![local_queue("user-queue", "cluster-queue")],
            vec![workload("w", "user-queue", 1, 1)],
        );
        input.flavors.clear();
        let pass = pass(
            &input,
            &mut Queues::default(),
            PreemptionConfig::default(),
            now(),
        );
        let cq = written(&pass.cluster_queues, "cluster-queue").expect("status");
        assert_eq!(condition(cq, "Active")["reason"], "FlavorNotFound");
        let lq = written(&pass.local_queues, "user-queue").expect("status");
        assert_eq!(condition(lq, "Active")["reason"], "ClusterQueueIsInactive");
        let w = written(&pass.workloads, "w").expect("pending");
        assert_eq!(
            condition(w, "QuotaReserved")["message"],
            "ClusterQueue cluster-queue is inactive"
        );
    }
}

#[cfg(test)]
mod preemption_tests {
    //! A lender reclaiming its quota from a borrower, pass after pass as the shell runs them:
    //! the victim evicted with Kueue's conditions, the preemptor waiting for it, then admitted
    //! once the victim's job has stopped and its quota is released.

    use super::*;
    use crate::api::status;
    use serde_json::json;
    use std::time::Duration;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn cluster_queue(name: &str, cpu: &str) -> Value {
        json!({"metadata": {"name": name, "generation": 1}, "spec": {"cohortName": "team",
            "namespaceSelector": {}, "preemption": {"reclaimWithinCohort": "Any"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default-flavor",
                "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}})
    }

    fn workload(name: &str, queue: &str, pods: i32) -> Value {
        json!({"metadata": {"name": name, "namespace": "default", "uid": name, "generation": 1,
                "creationTimestamp": tessera_model::time::timestamp(now())},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": pods, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
    }

    /// The objects after a pass's writes (merge patches of their statuses).
    fn apply(objects: &mut Objects, pass: &Pass) {
        for write in &pass.workloads {
            if let Some(object) = objects
                .workloads
                .iter_mut()
                .find(|w| objects::name(w) == write.name)
            {
                merge_status(object, &write.status);
            }
        }
    }

    fn merge_status(object: &mut Value, status: &Value) {
        if !object["status"].is_object() {
            object["status"] = json!({});
        }
        for (field, value) in status.as_object().into_iter().flatten() {
            match (value.is_null(), object["status"].as_object_mut()) {
                (true, Some(current)) => {
                    current.remove(field);
                }
                (false, Some(current)) => {
                    current.insert(field.clone(), value.clone());
                }
                _ => {}
            }
        }
    }

    fn status_of<'a>(objects: &'a Objects, name: &str, kind: &str) -> (&'a str, &'a str) {
        let object = objects
            .workloads
            .iter()
            .find(|w| objects::name(w) == name)
            .unwrap_or(&Value::Null);
        let found = tessera_model::conditions::find(object, kind).unwrap_or(&Value::Null);
        (
            found["status"].as_str().unwrap_or(""),
            found["reason"].as_str().unwrap_or(""),
        )
    }

    #[test]
    fn a_lender_reclaims_its_quota_by_preemption() {
        let mut objects = Objects {
            flavors: vec![json!({"metadata": {"name": "default-flavor"}})],
            cluster_queues: vec![cluster_queue("lender", "6"), cluster_queue("borrower", "2")],
            local_queues: vec![
                json!({"metadata": {"name": "lq-lender", "namespace": "default"}, "spec": {"clusterQueue": "lender"}}),
                json!({"metadata": {"name": "lq-borrower", "namespace": "default"}, "spec": {"clusterQueue": "borrower"}}),
            ],
            workloads: vec![workload("borrowing", "lq-borrower", 6)],
            namespaces: vec![json!({"metadata": {"name": "default"}})],
            ..Objects::default()
        };
        let mut queues = Queues::default();
        let first = pass(&objects, &mut queues, PreemptionConfig::default(), now());
        apply(&mut objects, &first);
        assert_eq!(
            status_of(&objects, "borrowing", "Admitted"),
            ("True", "Admitted")
        );

        // An older Workload of the lender's queue that can never fit waits inadmissible; the
        // preemptor stays its ClusterQueue's head (Kueue's sticky preemptor) until admitted.
        let mut too_big = workload("too-big", "lq-lender", 20);
        too_big["metadata"]["creationTimestamp"] = json!(tessera_model::time::timestamp(
            now() - Duration::from_secs(60)
        ));
        objects.workloads.push(too_big);
        let waiting = pass(&objects, &mut queues, PreemptionConfig::default(), now());
        apply(&mut objects, &waiting);
        assert_eq!(
            status_of(&objects, "too-big", "QuotaReserved"),
            ("False", "ExceedsMaxQuota")
        );
        objects.workloads.push(workload("owner", "lq-lender", 6));
        let second = pass(&objects, &mut queues, PreemptionConfig::default(), now());
        apply(&mut objects, &second);
        assert_eq!(
            status_of(&objects, "borrowing", "Evicted"),
            ("True", "Preempted")
        );
        let preempted = second
            .events
            .iter()
            .find(|e| e.reason == "Preempted")
            .expect("event");
        assert_eq!(preempted.involved["name"], "borrowing");
        assert!(
            preempted.message.ends_with("; preemptor effective priority: 0 (base: 0, boost: 0); preemptee effective priority: 0 (base: 0, boost: 0)"),
            "{}",
            preempted.message
        );
        assert_eq!(
            status_of(&objects, "borrowing", "Preempted"),
            ("True", "InCohortReclamation")
        );
        assert_eq!(
            status_of(&objects, "owner", "QuotaReserved"),
            ("False", "WaitingForPreemptedWorkloads")
        );
        // Still holding quota until its job stops: nothing new in the next pass.
        let third = pass(&objects, &mut queues, PreemptionConfig::default(), now());
        assert!(third.workloads.is_empty(), "{:?}", third.workloads);

        // Its job stopped: the quota is released, and the lender's Workload is admitted.
        let index = objects
            .workloads
            .iter()
            .position(|w| objects::name(w) == "borrowing")
            .unwrap_or(0);
        let released = status::released(&objects.workloads[index], now()).expect("released");
        merge_status(&mut objects.workloads[index], &released);
        let fourth = pass(&objects, &mut queues, PreemptionConfig::default(), now());
        apply(&mut objects, &fourth);
        assert_eq!(
            status_of(&objects, "owner", "Admitted"),
            ("True", "Admitted")
        );
        assert_eq!(status_of(&objects, "borrowing", "QuotaReserved").0, "False");
        assert_eq!(
            status_of(&objects, "borrowing", "Requeued"),
            ("True", "Preempted")
        );
    }

    #[test]
    fn a_drained_cluster_queue_evicts_and_its_restart_requeues() {
        let mut objects = Objects {
            flavors: vec![json!({"metadata": {"name": "default-flavor"}})],
            cluster_queues: vec![cluster_queue("lender", "6")],
            local_queues: vec![json!({"metadata": {"name": "lq", "namespace": "default"},
                "spec": {"clusterQueue": "lender"}})],
            workloads: vec![workload("w", "lq", 2)],
            namespaces: vec![json!({"metadata": {"name": "default"}})],
            ..Objects::default()
        };
        let mut queues = Queues::default();
        let run = |objects: &mut Objects, queues: &mut Queues| {
            let done = pass(objects, queues, PreemptionConfig::default(), now());
            apply(objects, &done);
            done
        };
        run(&mut objects, &mut queues);
        assert_eq!(status_of(&objects, "w", "Admitted"), ("True", "Admitted"));

        objects.cluster_queues[0]["spec"]["stopPolicy"] = json!("HoldAndDrain");
        let drained = run(&mut objects, &mut queues);
        assert_eq!(
            status_of(&objects, "w", "Evicted"),
            ("True", "ClusterQueueStopped")
        );
        let cq = &drained.cluster_queues[0].status;
        assert_eq!(cq["conditions"][0]["reason"], "Stopped");

        // Its job stopped: the quota is released, and it is not requeued while stopped.
        let released = status::released(&objects.workloads[0], now()).expect("released");
        merge_status(&mut objects.workloads[0], &released);
        assert_eq!(
            status_of(&objects, "w", "Requeued"),
            ("False", "ClusterQueueStopped")
        );
        run(&mut objects, &mut queues);
        assert_eq!(
            status_of(&objects, "w", "QuotaReserved"),
            ("False", "Suspended")
        );

        // Running again: requeued, then admitted.
        objects.cluster_queues[0]["spec"]["stopPolicy"] = json!("None");
        run(&mut objects, &mut queues);
        assert_eq!(
            status_of(&objects, "w", "Requeued"),
            ("True", "ClusterQueueRestarted")
        );
        run(&mut objects, &mut queues);
        assert_eq!(status_of(&objects, "w", "Admitted"), ("True", "Admitted"));
    }

    #[test]
    fn a_deactivated_workload_is_evicted_and_not_queued_again() {
        let mut objects = Objects {
            flavors: vec![json!({"metadata": {"name": "default-flavor"}})],
            cluster_queues: vec![cluster_queue("lender", "6")],
            local_queues: vec![json!({"metadata": {"name": "lq", "namespace": "default"},
                "spec": {"clusterQueue": "lender"}})],
            workloads: vec![workload("w", "lq", 2)],
            namespaces: vec![json!({"metadata": {"name": "default"}})],
            ..Objects::default()
        };
        let mut queues = Queues::default();
        let first = pass(&objects, &mut queues, PreemptionConfig::default(), now());
        apply(&mut objects, &first);
        objects.workloads[0]["spec"]["active"] = json!(false);
        let second = pass(&objects, &mut queues, PreemptionConfig::default(), now());
        apply(&mut objects, &second);
        assert_eq!(status_of(&objects, "w", "Evicted"), ("True", "Deactivated"));
        let released = status::released(&objects.workloads[0], now()).expect("released");
        merge_status(&mut objects.workloads[0], &released);
        let third = pass(&objects, &mut queues, PreemptionConfig::default(), now());
        assert!(third.workloads.is_empty(), "{:?}", third.workloads);
        assert_eq!(
            status_of(&objects, "w", "Requeued"),
            ("False", "Deactivated")
        );
    }
}
