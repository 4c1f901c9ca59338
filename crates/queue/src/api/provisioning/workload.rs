//! The ProvisioningRequest controller's Workload reconciler (`Controller.Reconcile`): for a
//! Workload holding quota, the state of each of its checks whose AdmissionCheck belongs to
//! `kueue.x-k8s.io/provisioning-request`, read from the newest request of the check that still
//! matches its config (Accepted, Provisioned, Failed, BookingExpired, CapacityRevoked →
//! Pending, Ready with `podSetUpdates`, Retry with backoff up to `backoffLimitCount`,
//! Rejected); the requests to delete (finished or evicted Workloads, stale attempts); the
//! PodTemplates and request of a new attempt; PodTemplates handed over to their request.
//!
//! Deliberate difference: a check's `lastTransitionTime` moves when its state changes (Kueue
//! carries the previous one over), so a Retry's `requeueAfterSeconds` counts from the retry.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_model::{conditions, json as json_read, time};

use super::config::{ConfigError, config_from_ref};
use super::request::{self, REQUEST_API_VERSION, REQUEST_KIND};
use super::{CHECK_INACTIVE_MESSAGE, Config, NO_REQUEST_NEEDED};
use crate::api::admission_checks::{
    PENDING, PROVISIONING_REQUEST_CONTROLLER, READY, REJECTED, RETRY,
};
use crate::api::status::{ADMITTED, EVICTED, Event, FINISHED, QUOTA_RESERVED};
use crate::flavor::ResourceFlavorSpec;

/// What the reconciler reads besides the Workload.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// AdmissionChecks by name.
    pub admission_checks: &'a BTreeMap<String, Value>,
    /// ProvisioningRequestConfigs by name.
    pub configs: &'a BTreeMap<String, Value>,
    /// ProvisioningRequests (any namespace: those the Workload owns are picked).
    pub requests: &'a [Value],
    /// PodTemplates (any namespace).
    pub pod_templates: &'a [Value],
    /// ResourceFlavors by name (their node labels and tolerations go into PodTemplates).
    pub flavors: &'a BTreeMap<String, ResourceFlavorSpec>,
}

/// One write, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Create this object (a PodTemplate or a ProvisioningRequest).
    Create(Value),
    /// Delete the ProvisioningRequest (namespace, name).
    DeleteRequest(String, String),
    /// Set a PodTemplate's (namespace, name) owner references.
    PodTemplateOwners(String, String, Vec<Value>),
    /// Set the Workload's `status.admissionChecks`.
    WorkloadChecks(Vec<Value>),
    /// Record an event (as [`super::COMPONENT`]).
    Event(Event),
}

/// The ProvisioningRequests a Workload owns (an owner reference to a Workload of its name in
/// its namespace, as Kueue's index).
fn owned_requests<'r>(workload: &Value, requests: &'r [Value]) -> Vec<&'r Value> {
    let (namespace, name) = (
        json_read::text(workload, "/metadata/namespace"),
        json_read::text(workload, "/metadata/name"),
    );
    requests
        .iter()
        .filter(|r| json_read::text(r, "/metadata/namespace") == namespace)
        .filter(|r| {
            r.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|o| o["kind"] == "Workload" && o["name"] == name)
        })
        .collect()
}

fn name_of(object: &Value) -> &str {
    json_read::text(object, "/metadata/name")
}

fn state_of(check: &Value) -> &str {
    json_read::text(check, "/state")
}

/// The message of a request condition that is True, if it is.
fn true_condition<'r>(request: &'r Value, kind: &str) -> Option<&'r str> {
    conditions::is_true(request, kind)
        .then(|| conditions::find(request, kind).map(|c| json_read::text(c, "/message")))
        .flatten()
}

/// `UpdateAdmissionCheckRequeueState`'s wait for the next retry: base × 2^(retries), at most
/// max (Kueue's jitter is below a second and truncated away).
fn backoff_seconds(retries: i64, base: i64, max: i64) -> i64 {
    let doubled = u32::try_from(retries.clamp(0, 62)).unwrap_or(62);
    base.saturating_mul(2_i64.saturating_pow(doubled)).min(max)
}

/// The reconciler for one Workload: what to write, in order.
pub fn reconcile(workload: &Value, inputs: &Inputs<'_>, now: SystemTime) -> Vec<Write> {
    // Without ProvisioningRequests nor checks of this controller there is nothing to do:
    // answered before reading the Workload, as most clusters have neither.
    let provisioning_check = |check: &Value| {
        json_read::text(check, "/spec/controllerName") == PROVISIONING_REQUEST_CONTROLLER
    };
    if inputs.requests.is_empty() && !inputs.admission_checks.values().any(provisioning_check) {
        return Vec::new();
    }
    let finished = conditions::is_true(workload, FINISHED);
    let evicted = conditions::is_true(workload, EVICTED);
    if !conditions::is_true(workload, QUOTA_RESERVED) && !finished && !evicted {
        return Vec::new();
    }
    let owned = owned_requests(workload, inputs.requests);
    let delete = |requests: &[&Value], keep: &BTreeSet<&str>| -> Vec<Write> {
        requests
            .iter()
            .filter(|r| !keep.contains(name_of(r)))
            .map(|r| {
                let namespace = json_read::text(r, "/metadata/namespace").to_owned();
                Write::DeleteRequest(namespace, name_of(r).to_owned())
            })
            .collect()
    };
    if finished || evicted {
        // CleanupProvisioningRequestsOnEviction is on by default.
        return delete(&owned, &BTreeSet::new());
    }
    let Some(configs) = check_configs(workload, inputs) else {
        return Vec::new();
    };
    let wl_name = name_of(workload);
    let mut newest: BTreeMap<&str, &Value> = BTreeMap::new();
    for (check, config) in &configs {
        let Some(config) = config else { continue };
        let Ok(needed) = request::is_needed(workload, config) else {
            return Vec::new();
        };
        for candidate in &owned {
            let Some(attempt) = request::attempt(name_of(candidate), wl_name, check) else {
                continue;
            };
            if !needed || !request::synced_with_config(candidate, config) {
                continue;
            }
            let older = newest.get(check.as_str()).is_none_or(|current| {
                request::attempt(name_of(current), wl_name, check).unwrap_or(1) < attempt
            });
            if older {
                newest.insert(check, candidate);
            }
        }
    }
    let mut writes = Vec::new();
    let states = sync_states(workload, &configs, &newest, &mut writes, now)
        .unwrap_or_else(|| request::list_at(workload, "/status/admissionChecks").to_vec());
    let keep: BTreeSet<&str> = newest.values().map(|r| name_of(r)).collect();
    writes.extend(delete(&owned, &keep));
    for (check, config) in &configs {
        let Some(config) = config else { continue };
        let state = states.iter().find(|s| s["name"] == check.as_str());
        if let Some(request) = new_attempt(
            workload,
            check,
            config,
            state,
            newest.get(check.as_str()).copied(),
        ) {
            writes.extend(create(workload, &request, config, inputs));
        } else if let Some(request) = newest.get(check.as_str()) {
            writes.extend(hand_over_templates(workload, request, inputs.pod_templates));
        }
    }
    writes
}

/// The Workload's checks of the ProvisioningRequest controller with their configs (`None`
/// when the config does not exist); `None` when a check's parameters are bad (Kueue's
/// reconcile errors out).
fn check_configs<'i>(
    workload: &Value,
    inputs: &Inputs<'i>,
) -> Option<BTreeMap<String, Option<Config<'i>>>> {
    let mut configs = BTreeMap::new();
    for state in request::list_at(workload, "/status/admissionChecks") {
        let name = json_read::text(state, "/name");
        let Some(check) = inputs.admission_checks.get(name) else {
            continue;
        };
        if json_read::text(check, "/spec/controllerName") != PROVISIONING_REQUEST_CONTROLLER {
            continue;
        }
        let config = match config_from_ref(check, inputs.configs) {
            Ok(config) => Some(config),
            Err(ConfigError::NotFound(_)) => None,
            Err(ConfigError::BadReference(_)) => return None,
        };
        configs.insert(name.to_owned(), config);
    }
    Some(configs)
}

/// `syncCheckStates`: each check's new state; the status write and events when anything
/// changed go into `writes`. The states as they are after; `None` (nothing written) while a
/// check that needs a request has none yet, as Kueue then leaves the status alone.
fn sync_states(
    workload: &Value,
    configs: &BTreeMap<String, Option<Config<'_>>>,
    newest: &BTreeMap<&str, &Value>,
    writes: &mut Vec<Write>,
    now: SystemTime,
) -> Option<Vec<Value>> {
    let current: Vec<Value> = request::list_at(workload, "/status/admissionChecks").to_vec();
    let mut states = current.clone();
    let mut updated = false;
    let mut events = Vec::new();
    let admitted = conditions::is_true(workload, ADMITTED);
    let active = workload.pointer("/spec/active") != Some(&json!(false));
    for (check, config) in configs {
        let Some(index) = states.iter().position(|s| s["name"] == check.as_str()) else {
            continue;
        };
        let before = states[index].clone();
        let mut next = before.clone();
        let mut set = |field: &str, value: Value, next: &mut Value| {
            if next.get(field) != Some(&value) {
                next[field] = value;
                updated = true;
            }
        };
        match config {
            None => {
                set("state", json!(PENDING), &mut next);
                set("message", json!(CHECK_INACTIVE_MESSAGE), &mut next);
            }
            Some(config) => {
                if !request::is_needed(workload, config).unwrap_or(false) {
                    if state_of(&next) != READY {
                        set("state", json!(READY), &mut next);
                        next["message"] = json!(NO_REQUEST_NEEDED);
                        remove(&mut next, "podSetUpdates");
                    }
                } else {
                    // A request not created yet: Kueue writes no status this time.
                    let request = newest.get(check.as_str())?;
                    let outcome =
                        from_request(workload, check, request, config, (admitted, active), &next);
                    if let Some(outcome) = outcome {
                        updated |= outcome != next;
                        next = outcome;
                    }
                }
            }
        }
        if state_of(&before) != state_of(&next) {
            next["lastTransitionTime"] = json!(time::timestamp(now));
            let mut message = format!(
                "Admission check {check} updated state from {} to {}",
                state_of(&before),
                state_of(&next)
            );
            let text = json_read::text(&next, "/message");
            if !text.is_empty() {
                message.push_str(&format!(" with message: {text}"));
            }
            events.push(Event::workload(
                workload,
                "Normal",
                "AdmissionCheckUpdated",
                &message,
            ));
        }
        states[index] = next;
    }
    if updated && states != current {
        writes.push(Write::WorkloadChecks(states.clone()));
        writes.extend(events.into_iter().map(Write::Event));
    }
    Some(states)
}

fn remove(object: &mut Value, field: &str) {
    if let Some(map) = object.as_object_mut() {
        map.remove(field);
    }
}

/// The check state a request's conditions make (the `switch` in `syncCheckStates`); `None`
/// when they change nothing.
fn from_request(
    workload: &Value,
    check: &str,
    request: &Value,
    config: &Config<'_>,
    (admitted, active): (bool, bool),
    state: &Value,
) -> Option<Value> {
    let mut next = state.clone();
    let (limit, base, max) = config.retry();
    let attempt = request::attempt(name_of(request), name_of(workload), check).unwrap_or(1);
    let retries = json_read::int(state, "/retryCount").unwrap_or(0);
    let retry_or_reject = |next: &mut Value, prefix: &str, message: &str| {
        if attempt <= limit {
            next["message"] = json!(format!("{prefix}: {message}"));
            if attempt > retries {
                next["state"] = json!(RETRY);
                next["requeueAfterSeconds"] = json!(backoff_seconds(retries, base, max));
            }
        } else {
            next["state"] = json!(REJECTED);
            next["message"] = json!(message);
        }
    };
    if let Some(message) = true_condition(request, "Failed") {
        retry_or_reject(&mut next, "Retrying after failure", message);
    } else if let Some(message) = true_condition(request, "CapacityRevoked") {
        if active {
            next["state"] = json!(REJECTED);
            next["message"] = json!(message);
        }
    } else if let Some(message) = true_condition(request, "BookingExpired") {
        if !admitted {
            retry_or_reject(&mut next, "Retrying after booking expired", message);
        }
    } else if let Some(message) = true_condition(request, "Provisioned") {
        if state_of(&next) != READY {
            next["state"] = json!(READY);
            next["podSetUpdates"] = json!(request::pod_set_updates(workload, request, config));
            next["message"] = json!(message);
        }
    } else if conditions::is_true(request, "Accepted") {
        if let Some(provisioned) = conditions::find(request, "Provisioned") {
            next["message"] = provisioned.get("message").cloned().unwrap_or(json!(""));
            next["state"] = json!(PENDING);
        }
    } else {
        next["message"] = json!("");
        next["state"] = json!(PENDING);
    }
    (next != *state).then_some(next)
}

/// `syncOwnedProvisionRequest`'s decision: the name of a new request to create for a check
/// that needs one and is not Ready — the first (attempt retryCount + 1) when none exists, the
/// next after a failed (or, not admitted, booking-expired) one while the check is Pending.
fn new_attempt(
    workload: &Value,
    check: &str,
    config: &Config<'_>,
    state: Option<&Value>,
    newest: Option<&Value>,
) -> Option<String> {
    if !request::is_needed(workload, config).unwrap_or(false)
        || state.is_some_and(|s| state_of(s) == READY)
    {
        return None;
    }
    let wl_name = name_of(workload);
    let attempt = match newest {
        None => {
            state
                .and_then(|s| json_read::int(s, "/retryCount"))
                .unwrap_or(0)
                + 1
        }
        Some(request) => {
            let retry = conditions::is_true(request, "Failed")
                || (conditions::is_true(request, "BookingExpired")
                    && !conditions::is_true(workload, ADMITTED));
            if !(retry && state.is_some_and(|s| state_of(s) == PENDING)) {
                return None;
            }
            request::attempt(name_of(request), wl_name, check).unwrap_or(1) + 1
        }
    };
    Some(request::request_name(wl_name, check, attempt))
}

/// The PodTemplates not there yet, the request, and Kueue's event.
fn create(workload: &Value, name: &str, config: &Config<'_>, inputs: &Inputs<'_>) -> Vec<Write> {
    let Ok(merged) = request::merge_pod_sets(workload, config) else {
        return Vec::new();
    };
    let namespace = json_read::text(workload, "/metadata/namespace");
    let mut writes: Vec<Write> = merged
        .iter()
        .map(|m| (request::pod_template_name(name, m.name), m))
        .filter(|(template, _)| find(inputs.pod_templates, namespace, template).is_none())
        .map(|(template, m)| {
            Write::Create(request::pod_template(
                workload,
                &template,
                m,
                inputs.flavors,
            ))
        })
        .collect();
    writes.push(Write::Create(request::provisioning_request(
        workload, name, config, &merged,
    )));
    writes.push(Write::Event(Event::workload(
        workload,
        "Normal",
        "ProvisioningRequestCreated",
        &format!("Created ProvisioningRequest: {name:?}"),
    )));
    writes
}

fn find<'v>(objects: &'v [Value], namespace: &str, name: &str) -> Option<&'v Value> {
    objects
        .iter()
        .find(|o| json_read::text(o, "/metadata/namespace") == namespace && name_of(o) == name)
}

/// `syncProvisionRequestsPodTemplates`: each of the request's PodTemplates controlled by the
/// request instead of the Workload.
fn hand_over_templates(workload: &Value, request: &Value, templates: &[Value]) -> Vec<Write> {
    let namespace = json_read::text(request, "/metadata/namespace");
    let workload_uid = json_read::text(workload, "/metadata/uid");
    let request_uid = json_read::text(request, "/metadata/uid");
    if request_uid.is_empty() {
        return Vec::new();
    }
    request::list_at(request, "/spec/podSets")
        .iter()
        .filter_map(|ps| {
            find(
                templates,
                namespace,
                json_read::text(ps, "/podTemplateRef/name"),
            )
        })
        .filter_map(|template| {
            let owners = request::list_at(template, "/metadata/ownerReferences");
            let controlled = |uid: &str| {
                owners
                    .iter()
                    .any(|o| o["controller"] == true && o["uid"] == uid)
            };
            if controlled(request_uid) && !controlled(workload_uid) {
                return None;
            }
            let mut kept: Vec<Value> = owners
                .iter()
                .filter(|o| o["uid"] != workload_uid && o["controller"] != true)
                .cloned()
                .collect();
            kept.push(request::controller_reference(
                REQUEST_API_VERSION,
                REQUEST_KIND,
                request,
            ));
            Some(Write::PodTemplateOwners(
                namespace.to_owned(),
                name_of(template).to_owned(),
                kept,
            ))
        })
        .collect()
}

/// Kueue's `handleError` when creating a PodTemplate or ProvisioningRequest (`object`) failed
/// with `error` (the API server's message): a Warning `FailedCreate` event and the message
/// "Error creating <kind> "<name>": <error>" on the check the object was for (found by its
/// name), as the Workload's new check states.
pub fn creation_failed(
    workload: &Value,
    object: &Value,
    error: &str,
    now: SystemTime,
) -> (Option<Vec<Value>>, Event) {
    let (kind, name) = (json_read::text(object, "/kind"), name_of(object));
    let message = format!("Error creating {kind} {name:?}: {error}");
    let event = Event::workload(workload, "Warning", "FailedCreate", &message);
    let wl_name = name_of(workload);
    let mut states = request::list_at(workload, "/status/admissionChecks").to_vec();
    let check = states.iter_mut().find(|s| {
        let prefix = format!("{wl_name}-{}-", json_read::text(s, "/name"));
        name.starts_with(&prefix) || name.starts_with(&format!("ppt-{prefix}"))
    });
    let Some(check) = check else {
        return (None, event);
    };
    check["message"] = json!(message);
    check["lastTransitionTime"] = json!(time::timestamp(now));
    (Some(states), event)
}
