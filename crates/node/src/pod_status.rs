//! What a kubelet posts for a pod as its containers run: the Running status (conditions, IPs,
//! container statuses with restarts and the last state), the finished status (Succeeded or
//! Failed with the exit code), the status after a device failure crashed the containers, and
//! that of a pod rejected at admission or with unusable annotations; and the decisions in
//! between: how a pod behaves (from its annotations and restart policy), whether a run that
//! ended restarts, how long a resumed run has left.
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

/// The pod conditions the kubelet owns (`kubetypes.PodConditionByKubelet`).
const KUBELET_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

/// The conditions a kubelet posts for `pod`: the pod's conditions it does not own kept as stored
/// (`DisruptionTarget`, a readiness gate's), as the status manager's `mergePodStatus` keeps
/// them, then its own.
fn conditions(pod: &Pod, ready: bool, now: &str) -> Value {
    let mut kept: Vec<Value> = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
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
    kept.extend(list);
    json!(kept)
}

/// When the pod started, as its status says (`now` when it does not).
fn start_time(pod: &Pod, now: &str) -> Value {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_else(|| json!(now))
}

/// The events (reason, message) a kubelet records as it starts `container` from `image`.
pub fn start_events(container: &str, image: &str) -> [(&'static str, String); 3] {
    [
        (
            "Pulled",
            format!("Container image \"{image}\" already present on machine"),
        ),
        ("Created", format!("Created container: {container}")),
        ("Started", format!("Started container {container}")),
    ]
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

/// The pod's IP as its status records it (empty before it has one).
pub fn pod_ip(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default()
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
    let start_time = start_time(pod, &now_text);
    let state = json!({"running": {"startedAt": now_text}});
    json!({"status": {
        "phase": "Running",
        "conditions": conditions(pod, true, &now_text),
        "hostIP": spec.internal_ip(),
        "hostIPs": [{"ip": spec.internal_ip()}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": start_time,
        "containerStatuses": container_statuses(pod, &state, last.as_ref(), restarts, true),
    }})
}

/// The status patch of a pod whose sandbox is not set up yet (a network attachment failed):
/// Pending, each container waiting in ContainerCreating.
pub fn creating_status(pod: &Pod, spec: &NodeSpec, now: SystemTime) -> Value {
    let now_text = timestamp(now);
    let state = json!({"waiting": {"reason": "ContainerCreating"}});
    json!({"status": {
        "phase": "Pending",
        "conditions": conditions(pod, false, &now_text),
        "hostIP": spec.internal_ip(),
        "hostIPs": [{"ip": spec.internal_ip()}],
        "startTime": start_time(pod, &now_text),
        "containerStatuses": container_statuses(pod, &state, None, 0, false),
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
    let started = start_time(pod, &now_text);
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
        "conditions": conditions(pod, false, &now_text),
        "containerStatuses": container_statuses(pod, &state, None, restarts, false),
    }})
}

/// The status patch of a pod the kubelet rejected at admission: Failed with `reason` and
/// `Pod was rejected: <message>`.
pub fn rejected_status(reason: &str, message: &str) -> Value {
    json!({"status": {"phase": "Failed", "reason": reason,
        "message": format!("Pod was rejected: {message}")}})
}

/// The status patch of a pod whose simulation annotations are unusable (`message` says why).
pub fn invalid_simulation_status(message: &str) -> Value {
    json!({"status": {"phase": "Failed", "reason": "InvalidSimulation", "message": message}})
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
        let ip = pod_ip(pod);
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

/// The status patch of a pod whose containers keep failing (a broken GPU operator component):
/// Running but not ready, each container waiting in `CrashLoopBackOff` after `restarts`
/// restarts with the kubelet's back-off message, its last run ended with exit code 1.
pub fn crash_loop_status(pod: &Pod, spec: &NodeSpec, restarts: i32, now: SystemTime) -> Value {
    let now_text = timestamp(now);
    let ip = pod_ip(pod);
    let pod_ref = format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    );
    let mut statuses = container_statuses(
        pod,
        &json!({"waiting": {"reason": "CrashLoopBackOff"}}),
        Some(&terminated(1, "Error", None, now)),
        restarts,
        false,
    );
    for status in &mut statuses {
        let container = status["name"].as_str().unwrap_or_default().to_string();
        status["state"]["waiting"]["message"] = json!(format!(
            "back-off 5m0s restarting failed container={container} pod={pod_ref}"
        ));
    }
    let mut conditions = conditions(pod, false, &now_text);
    for condition in conditions.as_array_mut().into_iter().flatten() {
        if condition.get("reason").is_some() {
            condition["reason"] = json!("ContainersNotReady");
        }
    }
    json!({"status": {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": spec.internal_ip(),
        "hostIPs": [{"ip": spec.internal_ip()}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": start_time(pod, &now_text),
        "containerStatuses": statuses,
    }})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn pod(status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ml", "name": "train", "uid": "u1"},
            "spec": {"nodeName": "n1", "restartPolicy": "OnFailure",
                "containers": [{"name": "main", "image": "cuda:12"}]},
            "status": status,
        }))
        .expect("pod")
    }

    #[test]
    fn runs_restart_per_policy_and_resume_where_they_were() {
        let table = [
            ("Always", 0, true),
            ("Always", 1, true),
            ("OnFailure", 0, false),
            ("OnFailure", 2, true),
            ("Never", 1, false),
        ];
        for (policy, exit_code, want) in table {
            assert_eq!(restarts(policy, exit_code), want, "{policy} {exit_code}");
        }
        assert_eq!(exit_reason(0), "Completed");
        assert_eq!(exit_reason(137), "Error");

        let started = pod(
            json!({"phase": "Running", "containerStatuses": [{"name": "main",
            "image": "cuda:12", "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {"startedAt": "1970-01-01T00:01:40Z"}}}]}),
        );
        let minute = Some(Duration::from_secs(60));
        assert_eq!(
            remaining_run(&started, minute, at(130)),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            remaining_run(&started, minute, at(500)),
            Some(Duration::ZERO)
        );
        assert_eq!(remaining_run(&started, None, at(130)), None);
        assert_eq!(remaining_run(&pod(json!({})), minute, at(130)), minute);
        assert_eq!(restart_policy(&started), "OnFailure");
        assert_eq!(pod_key(&started), ("ml".to_string(), "train".to_string()));
        assert_eq!(
            containers(&started),
            [("main".to_string(), "cuda:12".to_string())]
        );
        assert_eq!(
            behaviour(&started).map(|b| b.duration),
            Ok(Some(Duration::from_secs(1)))
        );
    }

    #[test]
    fn a_crash_looping_pod_reads_as_the_kubelet_reports_it() {
        let spec = Topology::default_lab().nodes().remove(0);
        let status = crash_loop_status(
            &pod(json!({"podIP": "10.0.0.7", "startTime": "1970-01-01T00:00:10Z"})),
            &spec,
            3,
            at(100),
        );
        let container = &status["status"]["containerStatuses"][0];
        assert_eq!(status["status"]["phase"], "Running");
        assert_eq!(status["status"]["podIP"], "10.0.0.7");
        assert_eq!(status["status"]["startTime"], "1970-01-01T00:00:10Z");
        assert_eq!(container["ready"], false);
        assert_eq!(container["restartCount"], 3);
        assert_eq!(container["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(
            container["state"]["waiting"]["message"],
            "back-off 5m0s restarting failed container=main pod=train_ml(u1)"
        );
        assert_eq!(container["lastState"]["terminated"]["exitCode"], 1);
        assert_eq!(container["lastState"]["terminated"]["reason"], "Error");
        let ready = status["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["reason"], "ContainersNotReady");
    }

    #[test]
    fn conditions_the_kubelet_does_not_own_are_kept() {
        let stamp = "1970-01-01T00:01:40Z";
        let evicted = pod(json!({"phase": "Running", "conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting", "lastTransitionTime": "1970-01-01T00:01:00Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "1970-01-01T00:00:10Z"},
            {"type": "example.com/gate", "status": "True"}]}));
        let finished = finished_status(&evicted, "Failed", 137, "Error", at(100));
        let types: Vec<&str> = finished["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(
            types,
            [
                "DisruptionTarget",
                "example.com/gate",
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled"
            ]
        );
        assert_eq!(
            tessera_model::conditions::find(&finished, "DisruptionTarget"),
            Some(&json!({"type": "DisruptionTarget", "status": "True",
                "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
                "lastTransitionTime": "1970-01-01T00:01:00Z"}))
        );
        let ready = tessera_model::conditions::find(&finished, "Ready").cloned();
        assert_eq!(
            ready,
            Some(
                json!({"type": "Ready", "status": "False", "lastTransitionTime": stamp,
                "reason": "PodCompleted"})
            )
        );
    }

    #[test]
    fn statuses_read_as_a_kubelet_posts_them() {
        let spec = Topology::default_lab().nodes().remove(0);
        let stamp = "1970-01-01T00:01:40Z";
        let running = running_status(&pod(json!({})), &spec, "10.0.0.2", at(100), 0, None);
        assert_eq!(running["status"]["phase"], "Running");
        assert_eq!(running["status"]["startTime"], stamp);
        assert_eq!(running["status"]["podIPs"], json!([{"ip": "10.0.0.2"}]));
        assert_eq!(
            running["status"]["containerStatuses"][0],
            json!({"name": "main", "image": "cuda:12", "imageID": "tessera://cuda:12",
                "containerID": "tessera://u1-main", "ready": true, "started": true,
                "restartCount": 0, "state": {"running": {"startedAt": stamp}}})
        );
        let ready = tessera_model::conditions::find(&running, "Ready").cloned();
        assert_eq!(
            ready,
            Some(json!({"type": "Ready", "status": "True", "lastTransitionTime": stamp}))
        );

        let finished = finished_status(&pod(json!({})), "Succeeded", 0, "Completed", at(100));
        assert_eq!(
            finished["status"]["containerStatuses"][0]["state"],
            json!({"terminated": {"exitCode": 0, "reason": "Completed",
                "startedAt": stamp, "finishedAt": stamp}})
        );
        let ready = tessera_model::conditions::find(&finished, "Ready").cloned();
        assert_eq!(
            ready,
            Some(
                json!({"type": "Ready", "status": "False", "lastTransitionTime": stamp,
                "reason": "PodCompleted"})
            )
        );

        let running_pod = pod(json!({"phase": "Running", "podIP": "10.0.0.9"}));
        let crashed = device_failure_status(&running_pod, &spec, "XID 79", Some(2), at(100));
        assert_eq!(crashed["status"]["phase"], "Running");
        assert_eq!(crashed["status"]["podIP"], "10.0.0.9");
        assert_eq!(crashed["status"]["containerStatuses"][0]["restartCount"], 2);
        assert_eq!(
            crashed["status"]["containerStatuses"][0]["lastState"],
            json!({"terminated": {"exitCode": 1, "reason": "Error", "message": "XID 79",
                "startedAt": stamp, "finishedAt": stamp}})
        );
        let failed = device_failure_status(&running_pod, &spec, "XID 79", None, at(100));
        assert_eq!(failed["status"]["phase"], "Failed");
        assert_eq!(
            failed["status"]["containerStatuses"][0]["state"]["terminated"]["message"],
            "XID 79"
        );

        assert_eq!(
            rejected_status("UnexpectedAdmissionError", "no GPUs"),
            json!({"status": {"phase": "Failed", "reason": "UnexpectedAdmissionError",
                "message": "Pod was rejected: no GPUs"}})
        );
        assert_eq!(
            start_events("main", "cuda:12").map(|(reason, _)| reason),
            ["Pulled", "Created", "Started"]
        );
        assert_eq!(
            start_events("main", "cuda:12")[0].1,
            "Container image \"cuda:12\" already present on machine"
        );
        assert_eq!(
            invalid_simulation_status("bad")["status"]["reason"],
            "InvalidSimulation"
        );
    }
}
