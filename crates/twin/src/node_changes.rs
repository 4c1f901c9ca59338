//! Maintenance changes the twins carry out on their nodes, as the machines' own agents would:
//! a new MIG layout recorded on a drained node (`maintenance.tessera.dev/mig-layout`) is applied
//! as the GPU operator's MIG manager applies `nvidia.com/mig.config` — GFD's labels, the device
//! plugin's resources and the DRA ResourceSlices (pool generation bumped) follow, and
//! `nvidia.com/mig.config.state` says `success` or `failed`; a replacement a rotation asks for
//! (`maintenance.tessera.dev/replacement` on the old node) is added as a cloud's node
//! provisioner would, and the old node, once the plan deletes it, is no longer run (its Lease
//! and slices removed). When the twins start they take up what the stored Nodes say: installed
//! layouts, replacements added, nodes rotated out.
//!
//! What a change makes of a spec is `tessera_node::node_changes`'; this module knows the API calls.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use tessera_maintenance::{REPLACEMENT_ANNOTATION, REPLACES_ANNOTATION};
use tessera_model::json::text;
use tessera_node::node_changes::{
    CLONED_FROM_ANNOTATION, INSTALLED_MIG_LAYOUT_ANNOTATION, MIG_CONFIG_STATE_LABEL,
    NODE_INDEX_ANNOTATION, parse_layout, removed,
};
use tessera_node::node_object::node_status;
use tessera_node::topology::NodeSpec;

use crate::twins::{NodeTwins, device_classes, node_slices, register_node_with};

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The MIG layout installed on `node`, when it differs from what `spec` runs.
fn layout_change(node: &Node, spec: &NodeSpec) -> Option<Vec<String>> {
    let wanted = parse_layout(annotation(node, INSTALLED_MIG_LAYOUT_ANNOTATION)?);
    (!wanted.is_empty() && spec.mig_profiles() != Some(&wanted[..])).then_some(wanted)
}

impl NodeTwins {
    /// Takes up, before registering, what the stored Nodes record of earlier maintenance:
    /// installed MIG layouts, replacements a rotation added (at their recorded address), and
    /// nodes rotated out (not registered again).
    pub(crate) async fn adopt_stored(&self) -> Result<(), kube::Error> {
        let stored = Api::<Node>::all(self.client.clone())
            .list(&Default::default())
            .await?
            .items;
        let present: BTreeSet<String> = stored
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        for node in &stored {
            let name = node.metadata.name.clone().unwrap_or_default();
            if let Some(old) = annotation(node, CLONED_FROM_ANNOTATION)
                && self.nodes.get(&name).is_none()
                && let Some(spec) = self.nodes.get(old)
            {
                let index = annotation(node, NODE_INDEX_ANNOTATION)
                    .and_then(|i| i.parse().ok())
                    .unwrap_or_else(|| self.nodes.next_index());
                self.nodes.insert(spec.replacement(&name, index));
                // The old node, deleted by the rotation, stays gone.
                if !present.contains(old) {
                    self.nodes.remove(old);
                }
            }
        }
        for node in &stored {
            let name = node.metadata.name.clone().unwrap_or_default();
            if let Some(spec) = self.nodes.get(&name)
                && let Some(profiles) = layout_change(node, &spec)
            {
                match spec.with_mig_profiles(&profiles) {
                    Ok(next) => self.nodes.insert(next),
                    Err(error) => {
                        tracing::warn!(node = %name, %error, "ignoring the installed MIG layout");
                    }
                }
            }
        }
        Ok(())
    }

    /// Carries out what a maintenance plan asked of one of these nodes: a MIG layout, a
    /// replacement.
    pub(crate) async fn apply_node_changes(&self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(spec) = self.nodes.get(&name) else {
            return;
        };
        let state = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MIG_CONFIG_STATE_LABEL))
            .map(String::as_str);
        if let Some(profiles) = layout_change(node, &spec) {
            if let Err(error) = self.repartition(&spec, &profiles, state).await {
                tracing::warn!(node = %name, %error, "MIG repartition failed");
            }
        } else if annotation(node, INSTALLED_MIG_LAYOUT_ANNOTATION).is_some()
            && state != Some("success")
        {
            // Applied already (before a restart, or a write raced ours): say so again.
            let patch = json!({"metadata": {"labels": {MIG_CONFIG_STATE_LABEL: "success"}}});
            if let Err(error) = Api::<Node>::all(self.client.clone())
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::warn!(node = %name, %error, "cannot report the MIG state");
            }
        }
        if let Some(replacement) = annotation(node, REPLACEMENT_ANNOTATION)
            && self.nodes.get(replacement).is_none()
            && let Err(error) = self.add_replacement(&spec, replacement).await
        {
            tracing::warn!(node = %name, %replacement, %error, "cannot add the replacement node");
        }
    }

    /// Applies a new MIG layout as the MIG manager does, then republishes the node.
    async fn repartition(
        &self,
        spec: &NodeSpec,
        profiles: &[String],
        state: Option<&str>,
    ) -> Result<(), kube::Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let next = match spec.with_mig_profiles(profiles) {
            Ok(next) => next,
            Err(_) if state == Some("failed") => return Ok(()), // said already
            Err(error) => {
                tracing::warn!(node = %spec.name, %error, "the MIG layout cannot be applied");
                let patch = json!({"metadata": {"labels": {MIG_CONFIG_STATE_LABEL: "failed"}}});
                return nodes
                    .patch(&spec.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(drop);
            }
        };
        let gone = removed(spec, &next);
        let mut labels: serde_json::Map<String, Value> = next
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        for key in &gone.labels {
            labels.insert(key.clone(), Value::Null);
        }
        labels.insert(MIG_CONFIG_STATE_LABEL.into(), json!("success"));
        let patch = json!({"metadata": {"labels": labels}});
        nodes
            .patch(&spec.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let stored = nodes.get_opt(&spec.name).await?;
        let mut status = node_status(&next, &tessera_model::time::timestamp((self.clock)()));
        for resource in &gone.resources {
            status["status"]["capacity"][resource] = Value::Null;
            status["status"]["allocatable"][resource] = Value::Null;
        }
        crate::heartbeat::post_node_status(&nodes, &spec.name, status, stored.as_ref()).await?;
        self.nodes.insert(next.clone());
        self.republish_slices(&next).await?;
        self.publish_numa(&next.name).await;
        tracing::info!(node = %spec.name, layout = %profiles.join(","), "MIG layout applied");
        Ok(())
    }

    /// Publishes `spec`'s ResourceSlices again under a higher pool generation and removes the
    /// node's slices the new layout no longer has.
    async fn republish_slices(&self, spec: &NodeSpec) -> Result<(), kube::Error> {
        let api: Api<ResourceSlice> = Api::all(self.client.clone());
        let existing: Vec<Value> = api
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter_map(|s| serde_json::to_value(s).ok())
            .filter(|s| text(s, "/spec/nodeName") == spec.name)
            .collect();
        let generation = existing
            .iter()
            .filter_map(|s| s.pointer("/spec/pool/generation").and_then(Value::as_i64))
            .max()
            .unwrap_or(0)
            + 1;
        let mut slices = node_slices(spec);
        for slice in &mut slices {
            slice["spec"]["pool"]["generation"] = json!(generation);
        }
        if !slices.is_empty() {
            crate::dra_publish::publish(&self.client, &device_classes(&slices), &slices).await?;
        }
        let kept: BTreeSet<&str> = slices.iter().map(|s| text(s, "/metadata/name")).collect();
        for old in &existing {
            let name = text(old, "/metadata/name");
            if !kept.contains(name) {
                delete_quietly(&api, name).await?;
            }
        }
        Ok(())
    }

    /// Adds `replacement` for the node of `spec`: the same pool and hardware at the next free
    /// address, registered, its devices published.
    async fn add_replacement(&self, spec: &NodeSpec, replacement: &str) -> Result<(), kube::Error> {
        let index = self.nodes.next_index();
        let next = spec.replacement(replacement, index);
        let annotations = BTreeMap::from([
            (REPLACES_ANNOTATION.to_string(), spec.name.clone()),
            (NODE_INDEX_ANNOTATION.to_string(), index.to_string()),
            (CLONED_FROM_ANNOTATION.to_string(), spec.name.clone()),
        ]);
        self.nodes.insert(next.clone());
        register_node_with(&self.client, &self.clock, &next, &annotations).await?;
        let slices = node_slices(&next);
        if !slices.is_empty() {
            crate::dra_publish::publish(&self.client, &device_classes(&slices), &slices).await?;
        }
        self.publish_numa(replacement).await;
        tracing::info!(node = %spec.name, %replacement, "replacement node added");
        Ok(())
    }

    /// A node of these twins was deleted: one a rotation replaced is no longer run — its spec
    /// dropped (the heartbeat stops), its Lease and ResourceSlices removed as the garbage
    /// collector removes what the Node owns. Other deletions change nothing (an autoscaler's
    /// idle node returns to standby; a deleted node is registered again on restart).
    pub(crate) async fn node_deleted(&self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        if annotation(node, REPLACEMENT_ANNOTATION).is_none() || self.nodes.get(&name).is_none() {
            return;
        }
        self.nodes.remove(&name);
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), "kube-node-lease");
        if let Err(error) = delete_quietly(&leases, &name).await {
            tracing::warn!(node = %name, %error, "cannot remove the node's Lease");
        }
        let slices: Api<ResourceSlice> = Api::all(self.client.clone());
        let owned: Vec<String> = match slices.list(&Default::default()).await {
            Ok(list) => list
                .items
                .into_iter()
                .filter(|s| s.spec.node_name.as_deref() == Some(name.as_str()))
                .filter_map(|s| s.metadata.name)
                .collect(),
            Err(error) => {
                tracing::warn!(node = %name, %error, "cannot list the node's ResourceSlices");
                Vec::new()
            }
        };
        for slice in owned {
            if let Err(error) = delete_quietly(&slices, &slice).await {
                tracing::warn!(node = %name, %slice, %error, "cannot remove a ResourceSlice");
            }
        }
        tracing::info!(node = %name, "node rotated out; no longer run");
    }
}

/// Deletes `name`, a missing object being no error.
async fn delete_quietly<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}
