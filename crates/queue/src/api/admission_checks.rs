//! Kueue's admission-check framework (`pkg/workload/admissionchecks.go`,
//! `pkg/util/admissioncheck`, the admission-check parts of `pkg/cache/scheduler/clusterqueue.go`
//! and of the workload controller): which AdmissionChecks a ClusterQueue requires and on which
//! flavors (`admissionChecksStrategy`), why they leave it inactive (missing, inactive, misused
//! MultiKueue checks), the check states a Workload carries (`status.admissionChecks`, added
//! Pending and dropped as the ClusterQueue's list changes), `Admitted` once quota is reserved
//! and every check is Ready, the requeue time a Retry check asks for, and the check-based
//! eviction: Retry evicts (the checks reset to Pending), Rejected marks the Workload for
//! deactivation.
//!
//! Knows nothing about any one check's controller (the ProvisioningRequest check is
//! [`crate::api::provisioning`]) nor about how statuses are written; time is an argument.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::{conditions, json as json_read, time};

use crate::api::pods_ready::DEACTIVATION_TARGET;
use crate::api::status::{self, ADMITTED, EVICTED, Event, QUOTA_RESERVED};

/// A check state: waiting for its controller.
pub const PENDING: &str = "Pending";
/// A check state: passed.
pub const READY: &str = "Ready";
/// A check state: the Workload is evicted and retried later.
pub const RETRY: &str = "Retry";
/// A check state: the Workload is deactivated.
pub const REJECTED: &str = "Rejected";
/// The AdmissionCheck condition its controller sets.
pub const ACTIVE: &str = "Active";
/// The controller of the ProvisioningRequest check.
pub const PROVISIONING_REQUEST_CONTROLLER: &str = "kueue.x-k8s.io/provisioning-request";
/// The controller of MultiKueue's check.
pub const MULTIKUEUE_CONTROLLER: &str = "kueue.x-k8s.io/multikueue";
/// The `Evicted` (and `DeactivationTarget`) reason of a check-based eviction
/// (`WorkloadEvictedByAdmissionCheck`).
pub const EVICTED_BY_ADMISSION_CHECK: &str = "AdmissionCheck";
/// The `Admitted` False reason while quota is reserved and a check is not Ready.
pub const UNSATISFIED_ADMISSION_CHECKS: &str = "UnsatisfiedAdmissionChecks";

/// The name of the config an AdmissionCheck's `spec.parameters` names when it is a reference
/// to a `kueue.x-k8s.io` object of `kind` (`isValidConfigReference`); Kueue's error text when
/// it is not.
pub fn parameters_name<'c>(check: &'c Value, kind: &str) -> Result<&'c str, String> {
    let Some(reference) = check.pointer("/spec/parameters").filter(|p| p.is_object()) else {
        return Err("missing parameters reference".into());
    };
    let field = |name: &str| json_read::text(reference, &format!("/{name}"));
    let (group, found_kind, name) = (field("apiGroup"), field("kind"), field("name"));
    if name.is_empty() {
        return Err("empty name: bad parameters reference".into());
    }
    if group != KUEUE_GROUP {
        return Err(format!(
            "wrong group {group:?}, expecting {KUEUE_GROUP:?}: bad parameters reference"
        ));
    }
    if found_kind != kind {
        return Err(format!(
            "wrong kind {found_kind:?}, expecting {kind:?}: bad parameters reference"
        ));
    }
    Ok(name)
}

/// The API group of Kueue's objects.
pub const KUEUE_GROUP: &str = "kueue.x-k8s.io";

/// An AdmissionCheck as Kueue's cache holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionCheck {
    /// `spec.controllerName`.
    pub controller: String,
    /// Its `Active` condition is True.
    pub active: bool,
}

/// The AdmissionChecks by name.
pub fn admission_checks(objects: &[Value]) -> BTreeMap<String, AdmissionCheck> {
    objects
        .iter()
        .map(|object| {
            let check = AdmissionCheck {
                controller: json_read::text(object, "/spec/controllerName").to_owned(),
                active: conditions::is_true(object, ACTIVE),
            };
            (json_read::text(object, "/metadata/name").to_owned(), check)
        })
        .collect()
}

/// A ClusterQueue's checks, each with the flavors it applies to (`NewAdmissionChecks`: a
/// check without `onFlavors` applies to every flavor of the ClusterQueue).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterQueueChecks {
    /// Every flavor of the ClusterQueue's resource groups.
    pub all_flavors: BTreeSet<String>,
    /// Each check and its flavors.
    pub checks: BTreeMap<String, BTreeSet<String>>,
}

fn names(list: Option<&Value>, pointer: &str) -> Vec<String> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item.pointer(pointer).and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

impl ClusterQueueChecks {
    /// A ClusterQueue's checks from its (`v1beta2`) object.
    pub fn of(object: &Value) -> ClusterQueueChecks {
        let all_flavors: BTreeSet<String> = object
            .pointer("/spec/resourceGroups")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|group| names(group.get("flavors"), "/name"))
            .collect();
        let checks = object
            .pointer("/spec/admissionChecksStrategy/admissionChecks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|rule| {
                let name = rule.get("name")?.as_str()?.to_owned();
                let on: BTreeSet<String> = names(rule.get("onFlavors"), "").into_iter().collect();
                let on = if on.is_empty() {
                    all_flavors.clone()
                } else {
                    on
                };
                Some((name, on))
            })
            .collect();
        ClusterQueueChecks {
            all_flavors,
            checks,
        }
    }

    /// The checks a Workload must pass (`AdmissionChecksForWorkload`): with an admission,
    /// those on any flavor it was assigned; without, those on every flavor of the queue.
    pub fn for_workload(&self, admission: Option<&Value>) -> BTreeSet<String> {
        let chosen = |on: &BTreeSet<String>| match admission {
            Some(admission) => assigned_flavors(admission).iter().any(|f| on.contains(f)),
            None => on.is_superset(&self.all_flavors),
        };
        self.checks
            .iter()
            .filter(|(_, on)| chosen(on))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Why the checks leave the ClusterQueue inactive, as `(reason, message part)` in Kueue's
    /// order (`updateWithAdmissionChecks`, `inactiveReason`): missing and inactive checks, more
    /// than one MultiKueue check, a MultiKueue check on some flavors only, MultiKueue with
    /// ProvisioningRequest checks.
    pub fn inactive_reasons(
        &self,
        known: &BTreeMap<String, AdmissionCheck>,
    ) -> Vec<(&'static str, String)> {
        let mut missing = Vec::new();
        let mut inactive = Vec::new();
        let mut multikueue = Vec::new();
        let mut per_flavor = Vec::new();
        let mut provisioning = Vec::new();
        for (name, on) in &self.checks {
            let Some(check) = known.get(name) else {
                missing.push(name.clone());
                continue;
            };
            if !check.active {
                inactive.push(name.clone());
            }
            if check.controller == PROVISIONING_REQUEST_CONTROLLER {
                provisioning.push(name.clone());
            }
            if check.controller == MULTIKUEUE_CONTROLLER {
                multikueue.push(name.clone());
                if *on != self.all_flavors {
                    per_flavor.push(name.clone());
                }
            }
        }
        let mut reasons = Vec::new();
        if !missing.is_empty() {
            reasons.push((
                "AdmissionCheckNotFound",
                format!(
                    "references missing AdmissionCheck(s): {}",
                    missing.join(",")
                ),
            ));
        }
        if !inactive.is_empty() {
            reasons.push((
                "AdmissionCheckInactive",
                format!(
                    "references inactive AdmissionCheck(s): {}",
                    inactive.join(",")
                ),
            ));
        }
        if multikueue.len() > 1 {
            reasons.push((
                "MultipleMultiKueueAdmissionChecks",
                format!(
                    "Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: {}",
                    multikueue.join(",")
                ),
            ));
        }
        if !per_flavor.is_empty() {
            reasons.push((
                "MultiKueueAdmissionCheckAppliedPerFlavor",
                format!(
                    "Cannot specify MultiKueue AdmissionCheck per flavor, found: {}",
                    per_flavor.join(",")
                ),
            ));
        }
        if !multikueue.is_empty() && !provisioning.is_empty() {
            reasons.push((
                "MultiKueueWithProvisioningRequest",
                format!(
                    "Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: {}, {}",
                    multikueue.join(","),
                    provisioning.join(",")
                ),
            ));
        }
        reasons
    }
}

/// The flavors of an admission's PodSet assignments.
fn assigned_flavors(admission: &Value) -> BTreeSet<String> {
    admission
        .get("podSetAssignments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|ps| ps.get("flavors").and_then(Value::as_object))
        .flat_map(|flavors| flavors.values().filter_map(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// A Workload's check states (`status.admissionChecks`).
pub fn states(object: &Value) -> Vec<Value> {
    object
        .pointer("/status/admissionChecks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn state(check: &Value) -> &str {
    check
        .get("state")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether every check is Ready (`HasAllChecksReady`; true without checks).
pub fn all_ready(states: &[Value]) -> bool {
    states.iter().all(|c| state(c) == READY)
}

/// The check states kept in step with the checks `required` (`syncAdmissionCheckConditions`):
/// missing ones added Pending, others dropped, existing ones kept, sorted by name; and whether
/// anything changed.
pub fn sync_states(
    current: &[Value],
    required: &BTreeSet<String>,
    now: SystemTime,
) -> (Vec<Value>, bool) {
    if required.is_empty() {
        return (Vec::new(), !current.is_empty());
    }
    let mut changed = false;
    let mut states: Vec<Value> = current
        .iter()
        .filter(|c| {
            let kept = c
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| required.contains(n));
            changed |= !kept;
            kept
        })
        .cloned()
        .collect();
    for name in required {
        if !states.iter().any(|c| c["name"] == name.as_str()) {
            states.push(json!({"name": name, "state": PENDING, "message": "",
                "lastTransitionTime": time::timestamp(now)}));
            changed = true;
        }
    }
    states.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    (states, changed)
}

/// The latest time a Retry check asks the Workload to wait until (`GetMaxRetryTime`): its
/// transition time plus `requeueAfterSeconds`; `None` when no check asks.
pub fn max_retry_time(states: &[Value]) -> Option<SystemTime> {
    states
        .iter()
        .filter(|c| state(c) == RETRY)
        .filter_map(|c| {
            let after = c.get("requeueAfterSeconds")?.as_u64()?;
            let since = time::parse_timestamp(c.get("lastTransitionTime")?.as_str()?)?;
            (since > SystemTime::UNIX_EPOCH).then(|| since + Duration::from_secs(after))
        })
        .max()
}

/// How checks in `state` are described in conditions and events
/// (`buildAdmissionChecksMessage`).
pub fn checks_message(states: &[Value], wanted: &str) -> String {
    let mut matching: Vec<&Value> = states.iter().filter(|c| state(c) == wanted).collect();
    matching.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let parts: Vec<String> = matching
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default();
            match c["message"].as_str().unwrap_or_default() {
                "" => format!("{name:?}"),
                message => format!("{name:?} ({message})"),
            }
        })
        .collect();
    let noun = if matching.len() > 1 {
        "AdmissionChecks"
    } else {
        "AdmissionCheck"
    };
    format!("{noun} in {wanted} state: {}", parts.join("; "))
}

/// The checks after an eviction (`resetChecksOnEviction`): each not Pending back to Pending
/// with "Reset to Pending after eviction. Previously: <state>", a Retry one counting one more
/// retry.
pub fn reset_on_eviction(states: &[Value], now: SystemTime) -> Vec<Value> {
    states
        .iter()
        .map(|c| {
            let previous = state(c);
            if previous == PENDING {
                return c.clone();
            }
            let mut reset = json!({"name": c["name"], "state": PENDING,
                "message": format!("Reset to Pending after eviction. Previously: {previous}"),
                "lastTransitionTime": time::timestamp(now)});
            if let Some(after) = c.get("requeueAfterSeconds").filter(|v| !v.is_null()) {
                reset["requeueAfterSeconds"] = after.clone();
            }
            if previous == RETRY {
                let count = c.get("retryCount").and_then(Value::as_i64).unwrap_or(0);
                reset["retryCount"] = json!(count + 1);
            }
            reset
        })
        .collect()
}

/// What the workload controller writes about a Workload's checks, merged into one status
/// patch, with its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reconciled {
    /// The status fields to write (a merge patch of `status`); empty when nothing changes.
    pub status: serde_json::Map<String, Value>,
    /// The events recorded.
    pub events: Vec<Event>,
}

/// The workload controller's steps about admission checks for a Workload whose ClusterQueue
/// requires `required` (`None` without a ClusterQueue), in Kueue's order: the requeue time a
/// Retry check asks for (`NeedsRequeueAtUpdate`); the check states synced; while quota is
/// reserved and it is not admitted, `Admitted` (True once every check is Ready, with Kueue's
/// event, else False `UnsatisfiedAdmissionChecks`); then, holding quota, active and not
/// evicted, a Rejected check marks it `DeactivationTarget` and a Retry check evicts it
/// (`reconcileCheckBasedEviction`).
pub fn reconcile(
    object: &Value,
    required: Option<&BTreeSet<String>>,
    active: bool,
    now: SystemTime,
) -> Reconciled {
    let mut out = Reconciled::default();
    let mut states = states(object);
    if let Some(until) = max_retry_time(&states).filter(|until| *until > now) {
        let current = object
            .pointer("/status/requeueState/requeueAt")
            .and_then(Value::as_str)
            .and_then(time::parse_timestamp);
        if current.is_none_or(|at| at < until) {
            let mut requeue = object
                .pointer("/status/requeueState")
                .cloned()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({}));
            requeue["requeueAt"] = json!(time::timestamp(until));
            out.status.insert("requeueState".into(), requeue);
        }
    }
    if let Some(required) = required {
        let (synced, changed) = sync_states(&states, required, now);
        if changed {
            states = synced;
            out.status.insert("admissionChecks".into(), json!(states));
        }
    }
    let reserved = conditions::is_true(object, QUOTA_RESERVED);
    if !reserved {
        return out;
    }
    let mut list = object
        .pointer("/status/conditions")
        .cloned()
        .unwrap_or_else(|| json!([]));
    if !conditions::is_true(object, ADMITTED) {
        let ready = all_ready(&states);
        let (state, reason, message) = if ready {
            ("True", "Admitted", "The workload is admitted")
        } else {
            (
                "False",
                UNSATISFIED_ADMISSION_CHECKS,
                "The workload has not all checks ready",
            )
        };
        let (set, changed) = status::set_all(
            &with_conditions(object, &list),
            &[(ADMITTED, state, reason, message)],
            now,
        );
        if changed {
            list = json!(set);
            out.status.insert("conditions".into(), list.clone());
            if ready {
                out.events.push(admitted_event(object, now));
            }
        }
    }
    if !active || conditions::is_true(object, EVICTED) {
        return out;
    }
    if states.iter().any(|c| state(c) == REJECTED) {
        let message = checks_message(&states, REJECTED);
        let (set, changed) = status::set_all(
            &with_conditions(object, &list),
            &[(
                DEACTIVATION_TARGET,
                "True",
                EVICTED_BY_ADMISSION_CHECK,
                &message,
            )],
            now,
        );
        if changed {
            out.status.insert("conditions".into(), json!(set));
            out.events.push(Event::workload(
                object,
                "Warning",
                "AdmissionCheckRejected",
                &format!("Deactivated due to {message}"),
            ));
        }
    } else if states.iter().any(|c| state(c) == RETRY) {
        let message = format!("Evicted due to {}", checks_message(&states, RETRY));
        let (set, _) = status::set_all(
            &with_conditions(object, &list),
            &[(EVICTED, "True", EVICTED_BY_ADMISSION_CHECK, &message)],
            now,
        );
        out.status.insert("conditions".into(), json!(set));
        out.status.insert(
            "admissionChecks".into(),
            json!(reset_on_eviction(&states, now)),
        );
        out.events.push(Event::workload(
            object,
            "Normal",
            &format!("{EVICTED}DueTo{EVICTED_BY_ADMISSION_CHECK}"),
            &message,
        ));
    }
    out
}

/// `object` with its conditions replaced by `list`.
fn with_conditions(object: &Value, list: &Value) -> Value {
    let mut copy = json!({"metadata": object.get("metadata").cloned().unwrap_or(Value::Null)});
    copy["status"] = json!({"conditions": list});
    copy
}

/// The `Admitted` event once the last check is Ready: the wait since quota was reserved.
fn admitted_event(object: &Value, now: SystemTime) -> Event {
    let reserved_at = conditions::find(object, QUOTA_RESERVED)
        .and_then(|c| c["lastTransitionTime"].as_str())
        .and_then(time::parse_timestamp)
        .unwrap_or(now);
    let waited = now
        .duration_since(reserved_at)
        .unwrap_or_default()
        .as_secs_f64();
    let cluster_queue = json_read::text(object, "/status/admission/clusterQueue");
    Event::workload(
        object,
        "Normal",
        "Admitted",
        &format!(
            "Admitted by ClusterQueue {cluster_queue}, wait time since reservation was {waited:.0}s"
        ),
    )
}

#[cfg(test)]
#[path = "admission_checks_tests.rs"]
mod tests;
