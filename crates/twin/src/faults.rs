//! Injected faults on the twins' nodes, as they happen: when a Node's fault annotations
//! change, the node's status and its DRA devices' taints are re-published, and the containers
//! on a GPU that just turned unhealthy crash (restarting or failing, per their policy).
//!
//! Knows the API calls; what the faults are and what they make of the node, its devices and
//! its pods comes from `tessera_node::faults` and `tessera_node::pod_status`.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tessera_node::faults::{self as node_faults, Faults, NodeFault};
use tessera_node::pod_status::{self, containers, restart_policy};
use tessera_node::resource_slice;

use crate::pods::Running;
use crate::twins::NodeTwins;

impl NodeTwins {
    /// Applies the faults annotated on one of this twin's nodes when they changed: node
    /// status (allocatable, conditions), DRA device taints, and failing the containers of
    /// GPUs that just turned unhealthy.
    pub(crate) async fn apply_faults(
        &self,
        node: &Node,
        running: &mut HashMap<(String, String), Running>,
    ) -> Result<(), kube::Error> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(spec) = self.nodes.get(&name) else {
            return Ok(());
        };
        let (annotated, problems) =
            Faults::parse(&node.metadata.annotations.clone().unwrap_or_default());
        for problem in problems {
            tracing::warn!(node = %name, %problem, "ignoring a malformed fault");
        }
        let (before, faults) = {
            let mut all = self.faults.lock().unwrap_or_else(|p| p.into_inner());
            let before = all.get(&name).cloned().unwrap_or_default();
            // A GPU a fatal XID took down stays down until its annotation is removed.
            let faults = before.observe(annotated);
            if before == faults {
                return Ok(());
            }
            all.insert(name.clone(), faults.clone());
            (before, faults)
        };
        tracing::info!(node = %name, ?faults, "faults changed");
        if faults.node != Some(NodeFault::Unreachable) {
            let status = node_faults::node_status(spec, &faults, (self.clock)());
            let nodes = Api::<Node>::all(self.client.clone());
            crate::heartbeat::post_node_status(&nodes, &name, status, Some(node)).await?;
        }
        let mut slices = resource_slice::resource_slices(spec);
        if !slices.is_empty() {
            node_faults::taint_slices(&mut slices, &faults);
            crate::dra_publish::publish(&self.client, &[], &slices).await?;
        }
        let newly: Vec<usize> = faults
            .unhealthy_gpus()
            .difference(&before.unhealthy_gpus())
            .copied()
            .collect();
        for gpu in newly {
            let xid = faults.gpus.get(&gpu).copied().unwrap_or_default();
            let message = node_faults::unhealthy_message(&name, gpu, xid);
            self.node_event(&name, "Warning", "GPUUnhealthy", &message)
                .await;
            for key in self.gpu_users(&name, gpu).await? {
                self.fail_on_device(&key, &message, running).await?;
            }
        }
        Ok(())
    }

    /// Pods using GPU `gpu` of `node`: device-plugin holders and pods reserving a claim
    /// allocated one of its DRA devices.
    async fn gpu_users(
        &self,
        node: &str,
        gpu: usize,
    ) -> Result<Vec<(String, String)>, kube::Error> {
        let mut users: BTreeSet<(String, String)> = self
            .gpus
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .holders(node, gpu)
            .into_iter()
            .collect();
        let claims = Api::<ResourceClaim>::all(self.client.clone())
            .list(&Default::default())
            .await?;
        users.extend(node_faults::claim_users(&claims.items, node, gpu));
        Ok(users.into_iter().collect())
    }

    /// A running pod's containers crash because its device failed: pods that restart
    /// (`Always`) record the crash and run on, others end Failed.
    async fn fail_on_device(
        &self,
        key: &(String, String),
        message: &str,
        running: &mut HashMap<(String, String), Running>,
    ) -> Result<(), kube::Error> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
        let Some(pod) = pods.get_opt(&key.1).await? else {
            return Ok(());
        };
        if pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running") {
            return Ok(());
        }
        let Some(spec) = self.node_of(&pod) else {
            return Ok(());
        };
        let now = (self.clock)();
        for (container, _) in containers(&pod) {
            self.append_log(
                key,
                &container,
                &[format!(
                    "CUDA error: unspecified launch failure ({message})"
                )],
            )
            .await;
        }
        let restarts = if restart_policy(&pod) == "Always" {
            let restarts = running.get(key).map_or(0, |r| r.run) + 1;
            if let Some(entry) = running.get_mut(key) {
                entry.run = restarts;
            }
            Some(i32::try_from(restarts).unwrap_or(i32::MAX))
        } else {
            running.remove(key);
            self.release_gpus(&pod).await;
            None
        };
        let status = pod_status::device_failure_status(&pod, spec, message, restarts, now);
        pods.patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(())
    }
}
