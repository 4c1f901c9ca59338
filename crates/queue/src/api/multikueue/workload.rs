//! MultiKueue's Workload reconciler (`wlReconciler.Reconcile`, `reconcileGroup`,
//! `nominateAndSynchronizeWorkers`, `syncAdmittingRemoteState`) for the default
//! all-at-once dispatcher: for a manager's Workload with a MultiKueue check, a copy of the
//! Workload on every reachable worker while quota is reserved; once a worker admits its copy
//! (the earliest `Admitted`), the copies elsewhere withdrawn, the owner (Job or JobSet)
//! created on the winner and its status mirrored back, the check Ready naming the cluster;
//! the worker's `Finished` copied to the manager's Workload; a worker's eviction or the loss
//! of the admitting worker past `workerLostTimeout` turns the check to Retry (the framework
//! then evicts and requeues); everything withdrawn when the Workload finishes, loses its
//! quota or is deleted.
//!
//! Deliberate differences: the Ready state, cluster name and event are written only when they
//! change (Kueue re-patches and re-records on every reconcile); elastic workloads, orchestrated
//! preemption and multi-Workload owners are not handled.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::{conditions, json as json_read, time};

use super::adapter::{self, OwnerKind};
use super::{EVENT_REASON, ORIGIN_LABEL};
use crate::api::admission_checks::{MULTIKUEUE_CONTROLLER, PENDING, READY, REJECTED, RETRY};
use crate::api::status::{ADMITTED, EVICTED, Event, FINISHED, QUOTA_RESERVED};

/// The wait before a deferred Job status sync is tried again (`syncDeferredRequeueAfter`).
pub const SYNC_DEFERRED_REQUEUE: Duration = Duration::from_secs(2);
/// `WorkloadFinishedReasonOutOfSync`.
pub const OUT_OF_SYNC: &str = "OutOfSync";
/// The Workload label Kueue drops from a copy (`JobUIDLabel`).
const JOB_UID_LABEL: &str = "kueue.x-k8s.io/job-uid";

/// A worker cluster of the check's MultiKueueConfig, as last read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Worker<'a> {
    /// Not connected; since when, if it was connected before.
    Unreachable {
        /// When the connection was lost.
        lost_since: Option<SystemTime>,
    },
    /// Connected: the copy of the Workload (same namespace and name) and of its owner.
    Reachable {
        /// The worker's Workload of the manager's Workload's name.
        workload: Option<&'a Value>,
        /// The worker's object of the owner's kind and name.
        owner: Option<&'a Value>,
    },
}

/// What the reconciler reads for one manager's Workload.
#[derive(Debug, Clone, Copy)]
pub struct Group<'a> {
    /// The manager's Workload.
    pub workload: &'a Value,
    /// AdmissionChecks by name (the MultiKueue one is found among the Workload's checks).
    pub admission_checks: &'a BTreeMap<String, Value>,
    /// The manager's owner of the Workload (Job or JobSet), when it exists.
    pub owner: Option<&'a Value>,
    /// The check's worker clusters.
    pub workers: &'a BTreeMap<String, Worker<'a>>,
    /// This manager's origin (`multiKueue.origin`).
    pub origin: &'a str,
    /// `multiKueue.workerLostTimeout`.
    pub worker_lost_timeout: Duration,
}

/// One write. A worker's writes are carried out in the order given; those on the manager
/// (its Workload's and owner's status, events) in order after every worker's have ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Create this object (a Workload or the owner's copy) on the worker.
    CreateRemote {
        /// The worker.
        cluster: String,
        /// The object.
        object: Value,
    },
    /// Delete the group's objects on the worker (`RemoveRemoteObjects`): the owner's copy
    /// when this manager created it, then the Workload (its finalizer removed first).
    RemoveRemote {
        /// The worker.
        cluster: String,
        /// The owner's copy to delete, `(kind, name)`, when there is one of this origin.
        owner: Option<(OwnerKind, String)>,
        /// Whether the worker has the Workload.
        workload: bool,
    },
    /// Set the worker Workload's priority to the manager's (`PriorityChanged`).
    UpdateRemotePriority {
        /// The worker.
        cluster: String,
        /// `spec.priority` and `spec.priorityClassRef` (merge patch of `spec`).
        spec: Value,
    },
    /// Mark the worker's Workload for deactivation (`SetDeactivationTarget`): its
    /// `status.conditions`.
    DeactivateRemote {
        /// The worker.
        cluster: String,
        /// The worker Workload's new conditions.
        conditions: Vec<Value>,
    },
    /// Set the manager owner's `status`.
    OwnerStatus(Value),
    /// Merge this into the manager Workload's `status`.
    WorkloadStatus(Value),
    /// Record an event about the manager's Workload.
    Event(Event),
    /// Reconcile again after this long.
    RequeueAfter(Duration),
}

impl Write {
    /// The worker this write is carried out on; `None` for a write on the manager.
    pub fn worker(&self) -> Option<&str> {
        match self {
            Write::CreateRemote { cluster, .. }
            | Write::RemoveRemote { cluster, .. }
            | Write::UpdateRemotePriority { cluster, .. }
            | Write::DeactivateRemote { cluster, .. } => Some(cluster),
            Write::OwnerStatus(_)
            | Write::WorkloadStatus(_)
            | Write::Event(_)
            | Write::RequeueAfter(_) => None,
        }
    }
}

/// The Workload's MultiKueue check state (`GetMultiKueueAdmissionCheck`).
fn multikueue_state<'w>(
    workload: &'w Value,
    admission_checks: &BTreeMap<String, Value>,
) -> Option<&'w Value> {
    workload
        .pointer("/status/admissionChecks")
        .and_then(Value::as_array)?
        .iter()
        .find(|state| {
            admission_checks
                .get(json_read::text(state, "/name"))
                .is_some_and(|c| {
                    json_read::text(c, "/spec/controllerName") == MULTIKUEUE_CONTROLLER
                })
        })
}

/// The writes of `updateACS`: the check to `state` with Kueue's message (the previous state
/// appended).
fn set_check(
    workload: &Value,
    check: &Value,
    state: &str,
    message: &str,
    now: SystemTime,
) -> Write {
    let previous = json_read::text(check, "/state");
    let mut updated = check.clone();
    updated["state"] = json!(state);
    updated["message"] = json!(truncate(&format!("{message}, Previously: {previous:?}")));
    updated["lastTransitionTime"] = json!(time::timestamp(now));
    Write::WorkloadStatus(json!({"admissionChecks": replace_state(workload, updated)}))
}

/// The Workload's check states with `updated` in place of the state of its name.
fn replace_state(workload: &Value, updated: Value) -> Vec<Value> {
    let name = updated["name"].clone();
    workload
        .pointer("/status/admissionChecks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| {
            if s["name"] == name {
                updated.clone()
            } else {
                s.clone()
            }
        })
        .collect()
}

/// `TruncateConditionMessage`: at most 32 KiB.
fn truncate(message: &str) -> String {
    const LIMIT: usize = 32 * 1024;
    if message.len() <= LIMIT {
        return message.to_owned();
    }
    let mut end = LIMIT;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_owned()
}

/// The reachable worker whose copy has condition `kind` True the longest
/// (`bestMatchByCondition`); ties go to the first by name.
fn best_match<'a>(
    remotes: &BTreeMap<&'a str, Option<&'a Value>>,
    kind: &str,
) -> Option<(&'a str, &'a Value)> {
    let mut best: Option<(&str, &Value, SystemTime)> = None;
    for (cluster, remote) in remotes {
        let Some(condition) = remote.and_then(|w| conditions::find(w, kind)) else {
            continue;
        };
        if condition["status"] != "True" {
            continue;
        }
        let since = time::parse_timestamp(json_read::text(condition, "/lastTransitionTime"))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        if best.is_none_or(|(_, _, best_since)| since < best_since) {
            best = Some((cluster, condition, since));
        }
    }
    best.map(|(cluster, condition, _)| (cluster, condition))
}

/// The reconciler for one manager's Workload: what to write, in order.
pub fn reconcile(group: &Group<'_>, now: SystemTime) -> Vec<Write> {
    let workload = group.workload;
    let Some(check) = multikueue_state(workload, group.admission_checks) else {
        return Vec::new();
    };
    if json_read::text(check, "/state") == REJECTED {
        return Vec::new();
    }
    let reject = |message: &str| vec![set_check(workload, check, REJECTED, message, now)];
    let (kind, owner_name) = match adapter::owner_of(workload) {
        Ok(owner) => owner,
        Err(message) => return reject(&message),
    };
    let deleted = workload.pointer("/metadata/deletionTimestamp").is_some();
    let mut reconciler = Reconciler {
        group,
        check,
        kind,
        owner_name,
        remotes: BTreeMap::new(),
        unavailable: Vec::new(),
        writes: Vec::new(),
        now,
    };
    for (cluster, worker) in group.workers {
        match worker {
            Worker::Reachable { workload, .. } => {
                reconciler.remotes.insert(cluster.as_str(), *workload);
            }
            Worker::Unreachable { .. } => reconciler.unavailable.push(cluster.as_str()),
        }
    }
    if deleted {
        reconciler.remove_all();
        return reconciler.writes;
    }
    match group.owner.map(adapter::unmanaged_reason) {
        // Kueue's reconcile errors out on a missing owner; the next pass retries.
        None => return Vec::new(),
        Some(Some(reason)) => {
            return reject(&format!("The owner is not managed by Kueue: {reason}"));
        }
        Some(None) => {}
    }
    reconciler.reconcile_group();
    reconciler.writes
}

/// The state of one reconcile.
struct Reconciler<'g, 'a> {
    group: &'g Group<'a>,
    check: &'a Value,
    kind: OwnerKind,
    owner_name: String,
    /// Reachable workers and their copies of the Workload (`None` once withdrawn).
    remotes: BTreeMap<&'a str, Option<&'a Value>>,
    unavailable: Vec<&'a str>,
    writes: Vec<Write>,
    now: SystemTime,
}

impl<'a> Reconciler<'_, 'a> {
    fn workload(&self) -> &'a Value {
        self.group.workload
    }

    fn state(&self) -> &str {
        json_read::text(self.check, "/state")
    }

    fn remote_owner(&self, cluster: &str) -> Option<&'a Value> {
        match self.group.workers.get(cluster) {
            Some(Worker::Reachable { owner, .. }) => *owner,
            _ => None,
        }
    }

    /// `RemoveRemoteObjects` for one worker, when it has anything of the group.
    fn remove(&mut self, cluster: &'a str) {
        let owner = self
            .remote_owner(cluster)
            .filter(|o| adapter::owned_by(o, self.group.origin))
            .map(|_| (self.kind, self.owner_name.clone()));
        let workload = self.remotes.get(cluster).copied().flatten().is_some();
        if owner.is_some() || workload {
            self.writes.push(Write::RemoveRemote {
                cluster: cluster.to_owned(),
                owner,
                workload,
            });
        }
        self.remotes.insert(cluster, None);
    }

    fn remove_all(&mut self) {
        let clusters: Vec<&str> = self.remotes.keys().copied().collect();
        for cluster in clusters {
            self.remove(cluster);
        }
    }

    fn event(&mut self, kind: &'static str, message: &str) {
        let event = Event::workload(self.workload(), kind, EVENT_REASON, message);
        self.writes.push(Write::Event(event));
    }

    fn set_check(&mut self, state: &str, message: &str) {
        let write = set_check(self.workload(), self.check, state, message, self.now);
        self.writes.push(write);
    }

    /// `SyncJob` with the winning worker: create the owner's copy there, or copy its status
    /// back; whether the sync is deferred.
    fn sync_owner(&mut self, cluster: &str) -> bool {
        let Some(local) = self.group.owner else {
            return false;
        };
        match self.remote_owner(cluster) {
            Some(remote) => {
                let (status, deferred) = adapter::status_update(self.kind, local, remote, self.now);
                // A Job shown without a status reads as an empty one: an empty status copied
                // onto it would change nothing.
                let unchanged = match local.get("status") {
                    None | Some(Value::Null) => status.as_object().is_some_and(|s| s.is_empty()),
                    Some(shown) => *shown == status,
                };
                if !unchanged {
                    self.writes.push(Write::OwnerStatus(status));
                }
                deferred
            }
            None => {
                let name = json_read::text(self.workload(), "/metadata/name");
                let object = adapter::remote_copy(self.kind, local, name, self.group.origin);
                self.writes.push(Write::CreateRemote {
                    cluster: cluster.to_owned(),
                    object,
                });
                false
            }
        }
    }

    /// Whether the worker's owner copy exists but is not this manager's
    /// (`ValidateRemoteObjectOwnership` failing): nothing is synced then.
    fn foreign_owner(&self, cluster: &str) -> bool {
        self.remote_owner(cluster)
            .is_some_and(|o| !adapter::owned_by(o, self.group.origin))
    }

    fn reconcile_group(&mut self) {
        let workload = self.workload();
        if conditions::is_true(workload, FINISHED) || !conditions::is_true(workload, QUOTA_RESERVED)
        {
            self.remove_all();
            if !self.unavailable.is_empty() {
                self.writes
                    .push(Write::RequeueAfter(self.group.worker_lost_timeout));
            }
            return;
        }
        if let Some((cluster, finished)) = best_match(&self.remotes, FINISHED) {
            self.remote_finished(cluster, finished);
            return;
        }
        if let Some((cluster, _)) = best_match(&self.remotes, EVICTED) {
            if conditions::is_true(workload, EVICTED) {
                if !self.foreign_owner(cluster) && self.sync_owner(cluster) {
                    self.writes.push(Write::RequeueAfter(SYNC_DEFERRED_REQUEUE));
                }
                return;
            }
            if self.state() == READY {
                let admitting = json_read::text(workload, "/status/clusterName");
                let message = format!(
                    "Workload evicted on worker cluster: {admitting:?}, resetting for re-admission. Previously: {:?}",
                    self.state()
                );
                let mut updated = self.check.clone();
                updated["state"] = json!(RETRY);
                updated["message"] = json!(message);
                updated["lastTransitionTime"] = json!(time::timestamp(self.now));
                self.writes.push(Write::WorkloadStatus(
                    json!({"admissionChecks": replace_state(workload, updated)}),
                ));
                self.event("Normal", &message);
                return;
            }
        }
        self.withdraw_out_of_sync();
        match best_match(&self.remotes, ADMITTED) {
            Some((cluster, _)) => self.admitted_on(cluster),
            None if self.state() == READY => self.admitting_worker_gone(),
            None => self.nominate(),
        }
    }

    /// A worker finished the Workload: its status is copied back and the manager's Workload
    /// finishes with its reason (an `OutOfSync` finish is re-dispatched instead).
    fn remote_finished(&mut self, cluster: &str, finished: &Value) {
        let reason = json_read::text(finished, "/reason");
        if reason == OUT_OF_SYNC {
            if self.state() != READY {
                return;
            }
            let message = format!(
                "Remote workload on worker cluster {cluster:?} is out of sync with its user job, resetting for re-dispatch"
            );
            self.set_check(RETRY, &message);
            self.event("Warning", &message);
            return;
        }
        if self.foreign_owner(cluster) {
            return;
        }
        self.sync_owner(cluster);
        let mut list: Vec<Value> = self
            .workload()
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let message = json_read::text(finished, "/message");
        conditions::set(
            &mut list,
            FINISHED,
            "True",
            reason,
            message,
            &time::timestamp(self.now),
        );
        self.writes
            .push(Write::WorkloadStatus(json!({"conditions": list})));
    }

    /// Copies whose spec no longer matches the manager's are withdrawn, or get the new
    /// priority when only that changed.
    fn withdraw_out_of_sync(&mut self) {
        let local_spec = spec_without_gates(self.workload());
        let stale: Vec<(&str, &Value)> = self
            .remotes
            .iter()
            .filter_map(|(c, w)| w.map(|w| (*c, w)))
            .filter(|(_, w)| spec_without_gates(w) != local_spec)
            .collect();
        for (cluster, remote) in stale {
            let priority = |w: &Value| {
                (
                    w.pointer("/spec/priority").cloned(),
                    w.pointer("/spec/priorityClassRef").cloned(),
                )
            };
            if priority(remote) != priority(self.workload())
                && self.workload().pointer("/spec/priorityClassRef").is_some()
            {
                let (value, class) = priority(self.workload());
                self.writes.push(Write::UpdateRemotePriority {
                    cluster: cluster.to_owned(),
                    spec: json!({"priority": value, "priorityClassRef": class}),
                });
                continue;
            }
            self.remove(cluster);
        }
    }

    /// A worker admitted its copy: the others are withdrawn, the owner synced and the check
    /// Ready naming the worker.
    fn admitted_on(&mut self, winner: &'a str) {
        let others: Vec<&str> = self
            .remotes
            .iter()
            .filter(|(c, w)| **c != winner && w.is_some())
            .map(|(c, _)| *c)
            .collect();
        for cluster in others {
            self.remove(cluster);
        }
        let workload = self.workload();
        if let Some(evicted) = conditions::find(workload, EVICTED).filter(|c| c["status"] == "True")
        {
            let remote = self.remotes.get(winner).copied().flatten();
            if let Some(remote) = remote {
                let message = truncate(&format!(
                    "Evicted on manager: {}",
                    json_read::text(evicted, "/message")
                ));
                let mut list: Vec<Value> = remote
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let changed = conditions::set(
                    &mut list,
                    "DeactivationTarget",
                    "True",
                    "EvictedOnManagerCluster",
                    &message,
                    &time::timestamp(self.now),
                );
                if changed {
                    self.writes.push(Write::DeactivateRemote {
                        cluster: winner.to_owned(),
                        conditions: list,
                    });
                }
            }
            return;
        }
        if self.foreign_owner(winner) {
            return;
        }
        let deferred = self.sync_owner(winner);
        let state = self.state();
        if state != RETRY && state != REJECTED {
            let recorded = json_read::text(workload, "/status/clusterName");
            if !recorded.is_empty() && recorded != winner {
                // Kueue refuses to change the immutable cluster name.
                return;
            }
            let message = format!("The workload was admitted on {winner:?}");
            let nominated = workload
                .pointer("/status/nominatedClusterNames")
                .is_some_and(|n| !n.is_null());
            if state != READY
                || json_read::text(self.check, "/message") != message
                || recorded.is_empty()
                || nominated
            {
                let mut updated = self.check.clone();
                updated["state"] = json!(READY);
                updated["message"] = json!(message);
                updated["lastTransitionTime"] = json!(time::timestamp(self.now));
                self.writes.push(Write::WorkloadStatus(json!({
                    "admissionChecks": replace_state(workload, updated),
                    "clusterName": winner,
                    "nominatedClusterNames": null,
                })));
                self.event("Normal", &message);
            }
        }
        let requeue = if deferred {
            SYNC_DEFERRED_REQUEUE
        } else {
            self.group.worker_lost_timeout
        };
        self.writes.push(Write::RequeueAfter(requeue));
    }

    /// The check is Ready but no worker shows the copy admitted: wait for a lost worker up to
    /// `workerLostTimeout`, then Retry.
    fn admitting_worker_gone(&mut self) {
        let admitting = json_read::text(self.workload(), "/status/clusterName");
        if admitting.is_empty() {
            self.set_check(
                RETRY,
                "Admission check is Ready but no admitting cluster is recorded; this is unexpected, please report it",
            );
            return;
        }
        if self.unavailable.contains(&admitting) {
            let lost_since = match self.group.workers.get(admitting) {
                Some(Worker::Unreachable {
                    lost_since: Some(since),
                }) => *since,
                _ => self.now,
            };
            let waited = self.now.duration_since(lost_since).unwrap_or_default();
            if let Some(remaining) = self.group.worker_lost_timeout.checked_sub(waited)
                && !remaining.is_zero()
            {
                self.writes.push(Write::RequeueAfter(remaining));
                return;
            }
            self.set_check(RETRY, "Admitting remote lost");
            return;
        }
        self.set_check(RETRY, "Admitting remote no longer exists");
    }

    /// `nominateAndSynchronizeWorkers` with the all-at-once dispatcher: every reachable worker
    /// nominated and given a copy of the Workload.
    fn nominate(&mut self) {
        let workload = self.workload();
        if self.state() != PENDING
            || workload
                .pointer("/status/clusterName")
                .is_some_and(|c| !c.is_null())
        {
            return;
        }
        let check_name = json_read::text(self.check, "/name");
        let others_ready = workload
            .pointer("/status/admissionChecks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|s| s["name"] != check_name)
            .all(|s| s["state"] == READY);
        if !others_ready {
            return;
        }
        let nominated: Vec<&str> = self.remotes.keys().copied().collect();
        let current: std::collections::BTreeSet<String> =
            json_read::strings_at(workload, "/status/nominatedClusterNames");
        if current != nominated.iter().map(|c| (*c).to_owned()).collect() {
            self.writes.push(Write::WorkloadStatus(
                json!({"nominatedClusterNames": nominated}),
            ));
        }
        for cluster in nominated {
            if self.remotes.get(cluster).copied().flatten().is_none() {
                self.writes.push(Write::CreateRemote {
                    cluster: cluster.to_owned(),
                    object: copy_for_worker(workload, self.group.origin),
                });
            }
        }
    }
}

/// A Workload's spec without its preemption gates (`isRemoteSpecOutOfSync`).
fn spec_without_gates(workload: &Value) -> Value {
    let mut spec = workload.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(spec) = spec.as_object_mut() {
        spec.remove("preemptionGates");
    }
    spec
}

/// The manager's Workload as created on a worker (`cloneForCreate`): metadata for creation
/// without the job-uid label, the origin label, the same spec.
pub fn copy_for_worker(workload: &Value, origin: &str) -> Value {
    let mut meta = adapter::metadata_for_creation(workload);
    if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        labels.remove(JOB_UID_LABEL);
    }
    adapter::add_label(&mut meta, ORIGIN_LABEL, origin);
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": meta,
        "spec": workload.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}
