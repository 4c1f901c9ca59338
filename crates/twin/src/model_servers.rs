//! The node twins' simulated model servers: one [`LiveServer`] per running model-server pod
//! (made on first contact from the pod's container flags, `tessera_inference::server`), stepped
//! on a monotonic clock each time it is reached, and one endpoint picker per InferencePool
//! (with its prefix index kept between requests). Implements the
//! [`ModelServers`] seam the containers' network path asks.
//!
//! Decides nothing: what a server answers and which pod a picker takes are
//! `tessera_inference`'s. Knows nothing of routes or pools beyond their names.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tessera_inference::metrics::EndpointMetrics;
use tessera_inference::openai::{HttpAnswer, ModelServers, answer};
use tessera_inference::picker::{PickRequest, Picker, Profile};
use tessera_inference::server::{LiveServer, server_of};
use tessera_model::json::text;

/// Model servers and pickers, shared by every container of a set of twins.
pub struct SimulatedServers {
    origin: Instant,
    servers: Mutex<HashMap<String, LiveServer>>,
    pickers: Mutex<HashMap<String, Picker>>,
}

impl Default for SimulatedServers {
    fn default() -> SimulatedServers {
        SimulatedServers {
            origin: Instant::now(),
            servers: Mutex::default(),
            pickers: Mutex::default(),
        }
    }
}

impl SimulatedServers {
    fn now_us(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Runs `work` on `pod`'s server, made now if this is its first contact; None when the
    /// pod runs no model server or is not running.
    fn with_server<T>(
        &self,
        pod: &Value,
        work: impl FnOnce(&mut LiveServer, u64) -> T,
    ) -> Option<T> {
        if text(pod, "/status/phase") != "Running" {
            return None;
        }
        let uid = text(pod, "/metadata/uid");
        let key = if uid.is_empty() {
            format!(
                "{}/{}",
                text(pod, "/metadata/namespace"),
                text(pod, "/metadata/name")
            )
        } else {
            uid.to_string()
        };
        let now = self.now_us();
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        let server = match servers.entry(key) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(LiveServer::new(server_of(pod)?, now))
            }
        };
        Some(work(server, now))
    }

    /// Forgets the servers of pods not in `running` (their uids).
    pub fn retain(&self, running: &[String]) {
        self.servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|uid, _| running.contains(uid));
    }
}

impl ModelServers for SimulatedServers {
    fn serve(
        &self,
        pod: &Value,
        port: Option<u16>,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Option<HttpAnswer> {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.with_server(pod, |server, now| {
            port.is_none_or(|port| port == server.spec().port)
                .then(|| answer(server, now, unix, method, path, body))
        })
        .flatten()
    }

    fn load(&self, pod: &Value) -> Option<EndpointMetrics> {
        self.with_server(pod, |server, now| server.metrics(now))
    }

    fn pick(
        &self,
        pool: &str,
        request: PickRequest<'_>,
        candidates: &[(u64, EndpointMetrics)],
    ) -> Option<u64> {
        let mut pickers = self.pickers.lock().unwrap_or_else(|p| p.into_inner());
        let picker = pickers.entry(pool.to_string()).or_insert_with(|| {
            Picker::new(
                Profile::default(),
                tessera_model::fnv::fnv64(pool.as_bytes()),
            )
        });
        picker.pick(request, candidates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vllm_pod(uid: &str, phase: &str) -> Value {
        json!({"metadata": {"name": "vllm-0", "namespace": "serve", "uid": uid},
               "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:latest",
                                         "args": ["--model", "llama", "--port", "8000"]}]},
               "status": {"phase": phase}})
    }

    #[test]
    fn a_model_server_pod_answers_on_its_port_and_keeps_its_load() {
        let servers = SimulatedServers::default();
        let pod = vllm_pod("u1", "Running");
        let body = br#"{"model": "llama", "prompt": "hello", "max_tokens": 2000}"#;
        let answer = servers
            .serve(&pod, Some(8000), "POST", "/v1/completions", body)
            .expect("a model server");
        assert_eq!(answer.status, 200);
        let load = servers.load(&pod).expect("a model server");
        assert_eq!(
            load.running + load.waiting,
            1,
            "2,000 tokens take seconds to decode"
        );
        assert_eq!(
            servers.serve(&pod, Some(9000), "GET", "/metrics", b""),
            None,
            "wrong port"
        );
        assert_eq!(
            servers.load(&vllm_pod("u2", "Pending")),
            None,
            "not running"
        );
        let web = json!({"metadata": {"uid": "u3"}, "spec": {"containers": [{"image": "nginx"}]},
                         "status": {"phase": "Running"}});
        assert_eq!(servers.load(&web), None, "not a model server");
        servers.retain(&[]);
        let fresh = servers.load(&pod).expect("made again");
        assert_eq!(
            fresh.running + fresh.waiting,
            0,
            "a forgotten server starts idle"
        );
    }
}
