//! Construction of `core/v1` Events as Tessera's components record them: one place that knows
//! the fields upstream's recorders fill (source, reporting component and instance, event
//! time in microseconds, first and last timestamps, count), so every component's events read
//! alike, through `core/v1` and `events.k8s.io/v1` clients.
//!
//! Time is an input; sending the event is the caller's business.

use serde_json::{Value, json};

use std::time::SystemTime;

use crate::time::{micro_timestamp, timestamp};

/// Who records an event: the component and, for per-node agents, the host it runs on.
#[derive(Debug, Clone, Copy)]
pub struct Recorder<'a> {
    /// `source.component` and `reportingComponent`, e.g. `default-scheduler`.
    pub component: &'a str,
    /// `source.host` and `reportingInstance`, for a node's agent.
    pub host: Option<&'a str>,
}

/// A `core/v1` Event about `involved` (an object reference) of type `kind` (`Normal` or
/// `Warning`), named after the involved object with a generated suffix, in its namespace
/// (`default` for cluster-scoped objects), recorded at `now`.
pub fn core_event(
    recorder: Recorder<'_>,
    involved: Value,
    kind: &str,
    reason: &str,
    message: &str,
    now: SystemTime,
) -> Value {
    let event_time = micro_timestamp(now);
    let now = timestamp(now);
    let namespace = involved
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let name = involved
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("event")
        .to_string();
    let mut event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": format!("{name}."), "namespace": namespace},
        "involvedObject": involved,
        "reason": reason, "message": message, "type": kind,
        "source": {"component": recorder.component},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        // As upstream's events recorder fills them: clients of events.k8s.io/v1 (the Python
        // client's EventsV1Api among them) require `eventTime` and the reporting pair.
        "eventTime": event_time,
        "reportingComponent": recorder.component,
        "reportingInstance": recorder.host.unwrap_or(recorder.component),
    });
    if let Some(host) = recorder.host {
        event["source"]["host"] = json!(host);
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn events_name_their_object_namespace_and_recorder() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_323_045);
        let pod = json!({"kind": "Pod", "namespace": "team-a", "name": "p"});
        let event = core_event(
            Recorder {
                component: "kubelet",
                host: Some("n1"),
            },
            pod.clone(),
            "Normal",
            "Started",
            "Started container c",
            now,
        );
        assert_eq!(event["metadata"]["generateName"], "p.");
        assert_eq!(event["metadata"]["namespace"], "team-a");
        assert_eq!(event["involvedObject"], pod);
        assert_eq!(
            event["source"],
            json!({"component": "kubelet", "host": "n1"})
        );
        assert_eq!(event["reportingInstance"], "n1");
        assert_eq!(event["reportingComponent"], "kubelet");
        assert_eq!(event["eventTime"], "2026-01-02T03:04:05.000000Z");
        assert_eq!(event["firstTimestamp"], "2026-01-02T03:04:05Z");
        assert_eq!(event["count"], 1);

        let node = json!({"kind": "Node", "name": "n1"});
        let event = core_event(
            Recorder {
                component: "node-controller",
                host: None,
            },
            node,
            "Warning",
            "NodeNotReady",
            "m",
            now,
        );
        assert_eq!(event["metadata"]["namespace"], "default");
        assert_eq!(event["source"], json!({"component": "node-controller"}));
        assert_eq!(event["reportingInstance"], "node-controller");
        assert_eq!(event["eventTime"], "2026-01-02T03:04:05.000000Z");
    }
}
