//! What the node twins answer through the API server's proxy subresources: each node's
//! kubelet (`/metrics/resource`, `/healthz`) and the ports of its simulated containers —
//! a dcgm-exporter container (an image named `dcgm-exporter`) answers `GET :9400/metrics`
//! with its node's dcgm text. Gathers the inputs (the pods and Node from the containers'
//! watch-fed view, the GPU units pods hold, the faults the twins observed) and hands them to
//! `tessera-telemetry`, which decides every number.
//!
//! Knows nothing of HTTP routing; the caller supplies the time.

use std::time::SystemTime;

use serde_json::Value;
use tessera_model::json::text;
use tessera_node::faults::Faults;
use tessera_telemetry::usage::{self, Holder, PodUsage};
use tessera_telemetry::{TEXT_CONTENT_TYPE, dcgm, resource};

use crate::containers::Containers;

/// An answer: status, content type, body.
pub type Answer = (u16, &'static str, String);

fn not_found() -> Answer {
    (
        404,
        "text/plain; charset=utf-8",
        "404 page not found\n".to_string(),
    )
}

/// Whether a pod runs dcgm-exporter.
pub fn runs_dcgm_exporter(pod: &Value) -> bool {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| text(c, "/image").contains("dcgm-exporter"))
}

/// One node's inputs, from the containers' view of the cluster.
struct NodeState {
    node: Value,
    pods: Vec<Value>,
}

impl Containers {
    async fn node_state(&self, name: &str) -> Result<NodeState, String> {
        let spec = self
            .nodes
            .get(name)
            .ok_or_else(|| format!("no node twin runs node {name:?}"))?;
        let view = self.world.view(&spec.networking).await;
        let node = view
            .cluster
            .nodes
            .iter()
            .find(|n| text(n, "/metadata/name") == name)
            .cloned()
            .ok_or_else(|| format!("node {name:?} is not registered"))?;
        let pods = view
            .cluster
            .pods
            .iter()
            .filter(|p| text(p, "/spec/nodeName") == name)
            .cloned()
            .collect();
        Ok(NodeState { node, pods })
    }

    /// The kubelet's `/metrics/resource` text of `node` at `now`.
    pub async fn resource_metrics(&self, node: &str, now: SystemTime) -> Result<String, String> {
        let state = self.node_state(node).await?;
        let pods: Vec<PodUsage> = state
            .pods
            .iter()
            .filter_map(|p| usage::pod_usage(p, now))
            .collect();
        let node_usage = usage::node_usage(&state.node, &pods, now);
        Ok(resource::render(&node_usage, &pods, now))
    }

    /// dcgm-exporter's text of `node` at `now`.
    pub async fn dcgm_metrics(&self, node: &str, now: SystemTime) -> Result<String, String> {
        let state = self.node_state(node).await?;
        let Some(spec) = self.nodes.get(node) else {
            return Err(format!("no node twin runs node {node:?}"));
        };
        let spec = &*spec;
        let mut holders = Vec::new();
        for pod in state
            .pods
            .iter()
            .filter(|p| text(p, "/status/phase") == "Running")
        {
            let key = (
                text(pod, "/metadata/namespace").to_string(),
                text(pod, "/metadata/name").to_string(),
            );
            let containers = pod.pointer("/spec/containers").and_then(Value::as_array);
            for container in containers.into_iter().flatten() {
                let name = text(container, "/name");
                let mut units = self
                    .gpus
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .held_by(node, &key, name);
                units.extend(self.claimed_units(pod, spec, name).await);
                holders.extend(
                    units
                        .into_iter()
                        .map(|unit| Holder::new(pod, name, unit, now)),
                );
            }
        }
        // The twins' observed faults (sticky GPU health), else the annotations as they are.
        let observed = self
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(node)
            .cloned();
        let faults = observed
            .unwrap_or_else(|| Faults::parse(&tessera_telemetry::load::annotations(&state.node)).0);
        let boot = usage::booted(&state.node, now);
        let gpus = usage::gpu_usage(spec, &faults, &holders, boot, now);
        Ok(dcgm::render(node, &gpus))
    }

    /// `GET path` of `node`'s kubelet.
    pub async fn kubelet_get(
        &self,
        node: &str,
        path: &str,
        now: SystemTime,
    ) -> Result<Answer, String> {
        self.kubelet_request(node, path, None, now).await
    }

    /// `GET path?query` of `node`'s kubelet, the node cache's paths (`/cache/status`,
    /// `/cache/pull?model=…&revision=…`) included.
    pub async fn kubelet_request(
        &self,
        node: &str,
        path: &str,
        query: Option<&str>,
        now: SystemTime,
    ) -> Result<Answer, String> {
        if let Some(cache_path) = path.strip_prefix("/cache/") {
            let Some(models) = self.models.get() else {
                return Err(format!("node {node} has no model cache"));
            };
            let (code, body) = models
                .proxy_get(node, cache_path.trim_end_matches('/'), query)
                .await;
            return Ok((code, "application/json", body.to_string()));
        }
        match path.trim_end_matches('/') {
            "/metrics/resource" => Ok((
                200,
                TEXT_CONTENT_TYPE,
                self.resource_metrics(node, now).await?,
            )),
            "/healthz" => Ok((200, "text/plain; charset=utf-8", "ok".to_string())),
            _ => Ok(not_found()),
        }
    }

    /// `GET path` of `port` of `pod`: a running dcgm-exporter's metrics, or refused.
    pub async fn pod_get(
        &self,
        pod: &Value,
        port: u16,
        path: &str,
        now: SystemTime,
    ) -> Result<Answer, String> {
        let ip = text(pod, "/status/podIP");
        let refused = || format!("dial tcp {ip}:{port}: connect: connection refused");
        if text(pod, "/status/phase") != "Running" || ip.is_empty() {
            return Err(refused());
        }
        if !(runs_dcgm_exporter(pod) && port == dcgm::PORT) {
            return Err(refused());
        }
        match path.trim_end_matches('/') {
            "/metrics" => {
                let node = text(pod, "/spec/nodeName");
                Ok((200, TEXT_CONTENT_TYPE, self.dcgm_metrics(node, now).await?))
            }
            _ => Ok(not_found()),
        }
    }
}
