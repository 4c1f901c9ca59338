//! The node twins' simulated containers as `kubectl exec` reaches them: gathers the world a
//! command sees (Services, EndpointSlices, Pods and Nodes through the API; the devices the
//! container holds from the twins' device-plugin bookkeeping and its prepared DRA claims) and hands it with the command to the
//! `tessera-exec` interpreter.
//!
//! Decides nothing about what a command prints or where a probe goes; network policy is
//! whatever [`PolicyVerdict`] it is given (allow-all until the policy core is wired in).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;
use kube::{Api, Client};
use serde::Serialize;
use serde_json::Value;
use tessera_exec::{AllowAll, Cluster, Output, PolicyVerdict, Session};
use tessera_model::json::text;
use tessera_node::claim_devices;
use tessera_node::gpu_assignments::{GpuAssignments, Unit, unit_of_device, visible_gpus};
use tessera_node::topology::NodeSpec;

/// The containers of one set of node twins.
pub struct Containers {
    client: Client,
    nodes: BTreeMap<String, NodeSpec>,
    gpus: Arc<std::sync::Mutex<GpuAssignments>>,
    policy: Arc<dyn PolicyVerdict + Send + Sync>,
    /// Spreads Service connections over their endpoints, one after another.
    next: AtomicU64,
}

impl Containers {
    pub(crate) fn new(
        client: Client,
        nodes: BTreeMap<String, NodeSpec>,
        gpus: Arc<std::sync::Mutex<GpuAssignments>>,
    ) -> Containers {
        Containers {
            client,
            nodes,
            gpus,
            policy: Arc::new(AllowAll),
            next: AtomicU64::new(0),
        }
    }

    /// Judges connections with `policy` instead of allowing all.
    pub fn with_policy(mut self, policy: Arc<dyn PolicyVerdict + Send + Sync>) -> Containers {
        self.policy = policy;
        self
    }

    /// Runs `command` in `container` of `pod` with `stdin` as its input; an error is what the
    /// runtime answers when there is no such running container.
    pub async fn exec(
        &self,
        pod: &Value,
        container: &str,
        command: &[String],
        stdin: &[u8],
    ) -> Result<Output, String> {
        let node = text(pod, "/spec/nodeName");
        let Some(spec) = self.nodes.get(node) else {
            return Err(format!(
                "error dialing backend: no node twin runs node {node:?}"
            ));
        };
        if text(pod, "/status/phase") != "Running" {
            return Err(format!(
                "unable to upgrade connection: container not found (\"{container}\")"
            ));
        }
        let cluster = self.cluster(spec).await.map_err(|e| e.to_string())?;
        let key = (
            text(pod, "/metadata/namespace").to_string(),
            text(pod, "/metadata/name").to_string(),
        );
        let mut units = self
            .gpus
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .held_by(node, &key, container);
        units.extend(self.claimed_units(pod, spec, container).await);
        let gpus = visible_gpus(spec, &units);
        let session = Session {
            cluster: &cluster,
            pod,
            container,
            gpus: &gpus,
            policy: self.policy.as_ref(),
            seed: self.next.fetch_add(1, Ordering::Relaxed),
        };
        Ok(tessera_exec::run(&session, command, stdin))
    }

    /// The GPUs and MIG devices the container got through DRA claims.
    async fn claimed_units(&self, pod: &Value, spec: &NodeSpec, container: &str) -> Vec<Unit> {
        let Ok(typed) = serde_json::from_value::<Pod>(pod.clone()) else {
            return Vec::new();
        };
        if !claim_devices::uses_claims(&typed) {
            return Vec::new();
        }
        let Ok(claims) = crate::pods::fetch_claims(&self.client, &typed).await else {
            return Vec::new();
        };
        claim_devices::container_device_names(&typed, spec, &claims)
            .ok()
            .and_then(|mut names| names.remove(container))
            .unwrap_or_default()
            .iter()
            .filter_map(|name| unit_of_device(name))
            .collect()
    }

    async fn cluster(&self, spec: &NodeSpec) -> Result<Cluster, kube::Error> {
        let all = ListParams::default();
        let (pods, services, slices, nodes) = (
            Api::<Pod>::all(self.client.clone()),
            Api::<Service>::all(self.client.clone()),
            Api::<EndpointSlice>::all(self.client.clone()),
            Api::<Node>::all(self.client.clone()),
        );
        let (pods, services, slices, nodes) = futures::try_join!(
            pods.list(&all),
            services.list(&all),
            slices.list(&all),
            nodes.list(&all),
        )?;
        let services = values(services.items);
        let slices = values(slices.items);
        let networking = &spec.networking;
        Ok(Cluster {
            resolver: tessera_dns::Resolver::new(&networking.cluster_domain, &services, &slices),
            // kubeadm's cluster DNS address: the tenth of the service range.
            nameserver: networking.service_cidr.address(10),
            pods: values(pods.items),
            services,
            slices,
            nodes: values(nodes.items),
        })
    }
}

fn values<T: Serialize>(items: Vec<T>) -> Vec<Value> {
    items
        .into_iter()
        .filter_map(|item| serde_json::to_value(item).ok())
        .collect()
}
