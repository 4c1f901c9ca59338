//! The node twins' simulated containers as `kubectl exec` reaches them: gathers the world a
//! command sees (Services, EndpointSlices, Pods and Nodes from the watch cache in
//! `world.rs`; the devices the container holds from the twins' device-plugin bookkeeping
//! and its prepared DRA claims) and hands it with the command to the `tessera-exec`
//! interpreter.
//!
//! Decides nothing about what a command prints or where a probe goes; network policy is the
//! cluster's, enforced through [`PolicyIndex`](crate::netpol::PolicyIndex) (or whatever
//! [`PolicyVerdict`] it is given instead) and, on secondary networks, through their
//! MultiNetworkPolicies ([`SecondaryNetworks`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use serde_json::Value;
use tessera_exec::{Output, Peer, PolicyVerdict, Protocol, Session};

use crate::secondary_policy::SecondaryNetworks;
use tessera_model::json::text;
use tessera_node::claim_devices;
use tessera_node::gpu_assignments::{GpuAssignments, Unit, unit_of_device, visible_gpus};
use tessera_node::topology::NodeSpec;

/// The containers of one set of node twins.
pub struct Containers {
    client: Client,
    pub(crate) nodes: crate::specs::Specs,
    pub(crate) gpus: Arc<std::sync::Mutex<GpuAssignments>>,
    policy: Arc<dyn PolicyVerdict + Send + Sync>,
    pub(crate) world: crate::world::World,
    /// The faults the twins observed per node (a GPU a fatal XID took down stays down).
    pub(crate) faults: Arc<std::sync::Mutex<BTreeMap<String, tessera_node::faults::Faults>>>,
    /// Spreads Service connections over their endpoints, one after another.
    next: AtomicU64,
    /// The node caches, once the twins started them.
    pub(crate) models: crate::models::Slot,
    /// The model servers pods run, and the InferencePools' endpoint pickers.
    pub(crate) model_servers: Arc<crate::model_servers::SimulatedServers>,
}

impl Containers {
    /// Starts the watches of the world the containers see (on the current tokio runtime);
    /// network policy is enforced from them.
    pub(crate) fn new(
        client: Client,
        nodes: crate::specs::Specs,
        gpus: Arc<std::sync::Mutex<GpuAssignments>>,
    ) -> Containers {
        let world = crate::world::World::watch(client.clone());
        Containers {
            client,
            nodes,
            gpus,
            policy: world.policy(),
            world,
            faults: Arc::default(),
            next: AtomicU64::new(0),
            models: crate::models::Slot::default(),
            model_servers: Arc::default(),
        }
    }

    /// Reads GPU health from the twins' observed `faults` rather than the annotations alone.
    pub(crate) fn with_faults(
        mut self,
        faults: Arc<std::sync::Mutex<BTreeMap<String, tessera_node::faults::Faults>>>,
    ) -> Containers {
        self.faults = faults;
        self
    }

    /// Answers the node caches' proxy paths from `models`.
    pub(crate) fn with_models(mut self, models: crate::models::Slot) -> Containers {
        self.models = models;
        self
    }

    /// Judges connections with `policy` instead of the cluster's network policies.
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
        let spec = &*spec;
        if text(pod, "/status/phase") != "Running" {
            return Err(format!(
                "unable to upgrade connection: container not found (\"{container}\")"
            ));
        }
        let view = self.world.view(&spec.networking).await;
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
        let policy = Verdicts {
            cluster: self.policy.as_ref(),
            networks: &view.networks,
        };
        let session = Session {
            cluster: &view.cluster,
            pod,
            container,
            gpus: &gpus,
            policy: &policy,
            model_servers: self.model_servers.as_ref(),
            seed: self.next.fetch_add(1, Ordering::Relaxed),
        };
        Ok(tessera_exec::run(&session, command, stdin))
    }

    /// The GPUs and MIG devices the container got through DRA claims.
    pub(crate) async fn claimed_units(
        &self,
        pod: &Value,
        spec: &NodeSpec,
        container: &str,
    ) -> Vec<Unit> {
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
}

/// The cluster network's verdict (NetworkPolicy and the cluster-wide kinds) and the
/// secondary networks' (MultiNetworkPolicy), as one.
struct Verdicts<'a> {
    cluster: &'a (dyn PolicyVerdict + Send + Sync),
    networks: &'a SecondaryNetworks,
}

impl PolicyVerdict for Verdicts<'_> {
    fn allowed(&self, from: &Value, to: Peer<'_>, port: u16, protocol: Protocol) -> bool {
        self.cluster.allowed(from, to, port, protocol)
    }

    fn allowed_on(
        &self,
        network: &str,
        from: &Value,
        to: &Value,
        port: u16,
        protocol: Protocol,
    ) -> bool {
        self.networks.allowed(network, from, to, port, protocol)
    }
}
