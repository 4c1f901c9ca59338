//! What a kubelet posts for a pod as its containers run: the Running status (conditions, IPs,
//! container statuses with restarts and the last state), the finished status (Succeeded or
//! Failed with the exit code), the status after a device failure crashed the containers, and
//! the decisions in between: how a pod behaves (from its annotations and restart policy),
//! whether a run that ended restarts, how long a resumed run has left.
//!
//! Pure; time is an input. The twin fetches pods, sends these statuses and runs the timers.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tessera_model::time::{parse_timestamp, timestamp};

use crate::runtime::{Behaviour, BehaviourError};
use crate::topology::NodeSpec;

/// A pod's (namespace, name).
pub fn pod_key(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// The pod's `restartPolicy` (`Always` when unset, as the API server defaults it).
pub fn restart_policy(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.clone())
        .unwrap_or_else(|| "Always".into())
}

/// The pod's containers as (name, image).
pub fn containers(pod: &Pod) -> Vec<(String, String)> {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

/// How the pod's containers behave, from its annotations and restart policy.
pub fn behaviour(pod: &Pod) -> Result<Behaviour, BehaviourError> {
    let annotations: BTreeMap<String, String> =
        pod.metadata.annotations.clone().unwrap_or_default();
    Behaviour::from_annotations(&annotations, &restart_policy(pod))
}

/// Whether a run that ended with `exit_code` restarts under `policy`.
pub fn restarts(policy: &str, exit_code: i32) -> bool {
    match policy {
        "Always" => true,
        "OnFailure" => exit_code != 0,
        _ => false,
    }
}

/// The container state reason of a run that ended with `exit_code`.
pub fn exit_reason(exit_code: i32) -> &'static str {
    if exit_code == 0 { "Completed" } else { "Error" }
}

/// A run that lasts `duration`, resumed at `now` (after the twin restarted): what is left of it,
/// counted from when the running container started (`now` when the status does not say).
pub fn remaining_run(pod: &Pod, duration: Option<Duration>, now: SystemTime) -> Option<Duration> {
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.as_ref())
        .and_then(|t| parse_timestamp(serde_json::to_value(t).ok()?.as_str()?))
        .unwrap_or(now);
    duration.map(|d| (started + d).duration_since(now).unwrap_or_default())
}

fn container_statuses(
    pod: &Pod,
    state: &Value,
    last: Option<&Value>,
    restarts: i32,
    ready: bool,
) -> Vec<Value> {
    containers(pod)
        .into_iter()
        .map(|(name, image)| {
            let mut status = json!({
                "name": name, "image": image, "imageID": format!("tessera://{image}"),
                "containerID": format!("tessera://{}-{name}", pod.metadata.uid.clone().unwrap_or_default()),
                "ready": ready, "started": ready, "restartCount": restarts, "state": state,
            });
            if let Some(last) = last {
                status["lastState"] = last.clone();
            }
            status
        })
        .collect()
}

fn conditions(ready: bool, now: &str) -> Value {
    let status = if ready { "True" } else { "False" };
    let mut list = vec![
        json!({"type": "PodReadyToStartContainers", "status": status, "lastTransitionTime": now}),
        json!({"type": "Initialized", "status": "True", "lastTransitionTime": now}),
        json!({"type": "Ready", "status": status, "lastTransitionTime": now}),
        json!({"type": "ContainersReady", "status": status, "lastTransitionTime": now}),
        json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": now}),
    ];
    if !ready {
        for condition in &mut list[2..4] {
            condition["reason"] = json!("PodCompleted");
        }
    }
    json!(list)
}

/// A container state `terminated` at `now` with `exit_code` and `reason` (and `message`).
pub fn terminated(exit_code: i32, reason: &str, message: Option<&str>, now: SystemTime) -> Value {
    let mut fields = json!({"exitCode": exit_code, "reason": reason});
    if let Some(message) = message {
        fields["message"] = json!(message);
    }
    fields["startedAt"] = json!(timestamp(now));
    fields["finishedAt"] = json!(timestamp(now));
    json!({ "terminated": fields })
}

/// The status patch of a pod whose containers (re)started at `now` on `spec` with pod IP `ip`,
/// after `restarts` restarts, `last` being the state of the previous run.
pub fn running_status(
    pod: &Pod,
    spec: &NodeSpec,
    ip: &str,
    now: SystemTime,
    restarts: i32,
    last: Option<Value>,
) -> Value {
    let now_text = timestamp(now);
    let start_time = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_else(|| json!(now_text));
    let state = json!({"running": {"startedAt": now_text}});
    json!({"status": {
        "phase": "Running",
        "conditions": conditions(true, &now_text),
        "hostIP": spec.internal_ip(),
        "hostIPs": [{"ip": spec.internal_ip()}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": start_time,
        "containerStatuses": container_statuses(pod, &state, last.as_ref(), restarts, true),
    }})
}

/// The status patch of a pod whose containers ended at `now` in `phase` with `exit_code`.
pub fn finished_status(
    pod: &Pod,
    phase: &str,
    exit_code: i32,
    reason: &str,
    now: SystemTime,
) -> Value {
    let now_text = timestamp(now);
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_else(|| json!(now_text));
    let restarts = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(0, |c| c.restart_count);
    let state = json!({"terminated": {"exitCode": exit_code, "reason": reason,
        "startedAt": started, "finishedAt": now_text}});
    json!({"status": {
        "phase": phase,
        "conditions": conditions(false, &now_text),
        "containerStatuses": container_statuses(pod, &state, None, restarts, false),
    }})
}

/// The status patch of a running pod whose containers crashed at `now` because their device
/// failed (`message`): with `restarts` (a pod that restarts, `Always`) Running on with the
/// crash as the last state; without, Failed with the message in each container's state.
pub fn device_failure_status(
    pod: &Pod,
    spec: &NodeSpec,
    message: &str,
    restarts: Option<i32>,
    now: SystemTime,
) -> Value {
    if let Some(restarts) = restarts {
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        let crash = terminated(1, "Error", Some(message), now);
        return running_status(pod, spec, &ip, now, restarts, Some(crash));
    }
    let mut status = finished_status(pod, "Failed", 1, "Error", now);
    for container in status
        .pointer_mut("/status/containerStatuses")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        container["state"]["terminated"]["message"] = json!(message);
    }
    status
}
