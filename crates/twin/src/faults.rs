//! Injected faults on the twins' nodes, as they happen: when a Node's fault annotations
//! change, the node's status and its DRA devices' taints are re-published, and the containers
//! on a GPU that just turned unhealthy crash (restarting or failing, per their policy).
//!
//! Knows the API calls; what the faults are and what they make of the node, its devices and
//! its pods comes from `tessera_node::faults` and `tessera_node::pod_status`.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
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
        let spec = &*spec;
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
            let stale = if faults.operator.slices_stale {
                node_faults::stale_slices(&mut slices)
            } else {
                Vec::new()
            };
            crate::dra_publish::publish(&self.client, &[], &slices).await?;
            crate::dra_publish::publish(&self.client, &[], &stale).await?;
            if before.operator.slices_stale && !faults.operator.slices_stale {
                self.delete_stale_slices(&slices).await?;
            }
        }
        self.apply_operator_faults(&name, spec, &before.operator, &faults.operator)
            .await?;
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

    /// Whether `pod` is a GPU operator component that crash-loops on `node` by an injected
    /// fault (`tessera fault operator --crash-loop`): its namespace is the operator's and its
    /// `app` label names the component.
    pub(crate) fn crash_looping(&self, node: &str, pod: &Pod) -> bool {
        if pod.metadata.namespace.as_deref() != Some(tessera_telemetry::operator::NAMESPACE) {
            return false;
        }
        let Some(app) = pod.metadata.labels.as_ref().and_then(|l| l.get("app")) else {
            return false;
        };
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(node)
            .is_some_and(|f| f.operator.crash_loop.contains(app))
    }

    /// Removes the stale copies `stale_slices` left beside `slices`.
    async fn delete_stale_slices(&self, slices: &[serde_json::Value]) -> Result<(), kube::Error> {
        let api = Api::<ResourceSlice>::all(self.client.clone());
        for slice in slices {
            let name = format!(
                "{}-stale",
                slice
                    .pointer("/metadata/name")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
            );
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Breaks or mends the GPU operator's components on a node: GPU feature discovery's
    /// labels removed or put back, and the pods of components that start or stop
    /// crash-looping given the status the kubelet would report.
    async fn apply_operator_faults(
        &self,
        node: &str,
        spec: &tessera_node::topology::NodeSpec,
        before: &node_faults::OperatorFaults,
        now_faults: &node_faults::OperatorFaults,
    ) -> Result<(), kube::Error> {
        if before.labels_missing != now_faults.labels_missing {
            let patch = node_faults::gfd_labels_patch(spec, now_faults.labels_missing);
            Api::<Node>::all(self.client.clone())
                .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        let changed: BTreeSet<&String> = before
            .crash_loop
            .symmetric_difference(&now_faults.crash_loop)
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        let pods =
            Api::<Pod>::namespaced(self.client.clone(), tessera_telemetry::operator::NAMESPACE);
        let now = (self.clock)();
        for component in changed {
            let params = kube::api::ListParams::default()
                .labels(&format!("app={component}"))
                .fields(&format!("spec.nodeName={node}"));
            for pod in pods.list(&params).await?.items {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let restarts = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .and_then(|c| c.first())
                    .map_or(0, |c| c.restart_count);
                let status = if now_faults.crash_loop.contains(component) {
                    pod_status::crash_loop_status(&pod, spec, restarts.saturating_add(1), now)
                } else {
                    let ip = pod_status::pod_ip(&pod);
                    pod_status::running_status(&pod, spec, &ip, now, restarts, None)
                };
                pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await?;
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
        let spec = &*spec;
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
