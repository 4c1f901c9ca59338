//! What the twins write down: kubelet events (built by `tessera_model::event`), container logs
//! (`<log_dir>/<namespace>/<pod>/<container>.log`, each line stamped with the clock's time),
//! and the checkpoint of the devices pods hold (written atomically, read back at start).
//!
//! Failures are logged, never fatal: a twin runs on without its records. Knows nothing of
//! what the records mean.

use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use tessera_model::event::{Recorder, core_event};
use tessera_model::json::text;
use tessera_model::time::micro_timestamp;
use tessera_node::gpu_assignments::GpuAssignments;
use tessera_node::pod_status::pod_key;
use tokio::io::AsyncWriteExt;

use crate::twins::NodeTwins;

impl NodeTwins {
    /// Appends `lines` to a container's log, each stamped with the time; failures are only
    /// logged.
    pub(crate) async fn append_log(
        &self,
        key: &(String, String),
        container: &str,
        lines: &[String],
    ) {
        let dir = self.config.log_dir.join(&key.0).join(&key.1);
        if let Err(error) = tokio::fs::create_dir_all(&dir).await {
            tracing::warn!(dir = %dir.display(), %error, "cannot create the pod log directory");
            return;
        }
        let path = dir.join(format!("{container}.log"));
        let now = micro_timestamp((self.clock)());
        let text: String = lines.iter().map(|line| format!("{now} {line}\n")).collect();
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await;
        match file {
            Ok(mut file) => {
                if let Err(error) = file.write_all(text.as_bytes()).await {
                    tracing::warn!(path = %path.display(), %error, "cannot write the container log");
                }
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot open the container log")
            }
        }
    }

    /// Records a kubelet event about `pod` (or one of its containers) on `node`.
    pub(crate) async fn event(
        &self,
        pod: &Pod,
        node: &str,
        kind: &str,
        reason: &str,
        message: &str,
        container: Option<&str>,
    ) {
        let involved = pod_reference(pod, container);
        let recorder = Recorder {
            component: "kubelet",
            host: Some(node),
        };
        self.record_event(recorder, involved, kind, reason, message)
            .await;
    }

    /// Records an event about the Node `node`.
    pub(crate) async fn node_event(&self, node: &str, kind: &str, reason: &str, message: &str) {
        let involved = json!({"kind": "Node", "name": node, "apiVersion": "v1"});
        let recorder = Recorder {
            component: "tessera-onboarding",
            host: Some(node),
        };
        self.record_event(recorder, involved, kind, reason, message)
            .await;
    }

    /// Records an event about `involved` (built by `tessera_model::event::core_event`, in the
    /// involved object's namespace, `default` for a Node); failures are only logged.
    async fn record_event(
        &self,
        recorder: Recorder<'_>,
        involved: Value,
        kind: &str,
        reason: &str,
        message: &str,
    ) {
        let event = core_event(recorder, involved, kind, reason, message, (self.clock)());
        let namespace = text(&event, "/metadata/namespace").to_string();
        let Ok(event) = serde_json::from_value::<CoreEvent>(event) else {
            return;
        };
        let events: Api<CoreEvent> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(error) = events.create(&PostParams::default(), &event).await {
            tracing::debug!(%error, "cannot record an event");
        }
    }

    /// Writes the devices pods hold to the checkpoint, atomically; a failure is logged.
    pub(crate) fn save_checkpoint(&self) {
        let Some(path) = self.config.device_checkpoint.as_deref() else {
            return;
        };
        let text = {
            let gpus = self.gpus.lock().unwrap_or_else(|p| p.into_inner());
            serde_json::to_vec(&*gpus)
        };
        let write = |text: Vec<u8>| -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let temporary = path.with_extension("tmp");
            std::fs::write(&temporary, text)?;
            std::fs::rename(&temporary, path)
        };
        if let Err(error) = text.map_err(std::io::Error::other).and_then(write) {
            tracing::warn!(path = %path.display(), %error, "cannot write the device checkpoint");
        }
    }
}

/// The object reference of an event about `pod`, or one of its containers.
fn pod_reference(pod: &Pod, container: Option<&str>) -> Value {
    let (namespace, name) = pod_key(pod);
    let mut involved = json!({"kind": "Pod", "namespace": namespace, "name": name,
        "uid": pod.metadata.uid, "apiVersion": "v1"});
    if let Some(container) = container {
        involved["fieldPath"] = json!(format!("spec.containers{{{container}}}"));
    }
    involved
}

/// The device assignments of a previous run; an unreadable checkpoint starts empty, with a
/// warning.
pub(crate) fn load_checkpoint(path: Option<&std::path::Path>) -> GpuAssignments {
    let Some(path) = path else {
        return GpuAssignments::default();
    };
    match std::fs::read(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => GpuAssignments::default(),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot read the device checkpoint");
            GpuAssignments::default()
        }
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
            tracing::warn!(path = %path.display(), %error, "ignoring an invalid device checkpoint");
            GpuAssignments::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    /// The events `tessera_model::event` builds for the twins are the ones the twins built
    /// themselves before.
    #[test]
    fn events_read_as_the_twin_built_them() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_323_045);
        let stamp = "2026-01-02T03:04:05Z";
        let pod: Pod = serde_json::from_value(
            serde_json::json!({"metadata": {"namespace": "team-a", "name": "p", "uid": "u1"}}),
        )
        .expect("pod");
        let pod = pod_reference(&pod, Some("c"));
        assert_eq!(
            pod,
            serde_json::json!({"kind": "Pod", "namespace": "team-a", "name": "p",
                "uid": "u1", "apiVersion": "v1", "fieldPath": "spec.containers{c}"})
        );
        let node = serde_json::json!({"kind": "Node", "name": "n1", "apiVersion": "v1"});
        let cases = [
            ("team-a", pod, "Normal", "Started", "kubelet", "p."),
            (
                "default",
                node,
                "Warning",
                "GPUUnhealthy",
                "tessera-onboarding",
                "n1.",
            ),
        ];
        for (namespace, involved, kind, reason, component, prefix) in cases {
            let before = serde_json::json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": prefix, "namespace": namespace},
                "involvedObject": involved,
                "reason": reason, "message": "m", "type": kind,
                "source": {"component": component, "host": "n1"},
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
                "reportingComponent": component, "reportingInstance": "n1",
                "eventTime": tessera_model::time::micro_timestamp(now),
            });
            let recorder = Recorder {
                component,
                host: Some("n1"),
            };
            let event = core_event(recorder, involved.clone(), kind, reason, "m", now);
            assert_eq!(text(&event, "/metadata/namespace"), namespace);
            assert_eq!(event, before, "{reason}");
        }
    }
}
