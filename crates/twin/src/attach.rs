//! The twins' Multus: fetches the NetworkAttachmentDefinitions a starting pod selects, and
//! either writes its `k8s.v1.cni.cncf.io/network-status` or — a definition missing, a network
//! the node does not carry — leaves it in ContainerCreating with the event Multus posts.
//!
//! Knows the API calls; what a pod is attached to comes from `tessera_node::attachments`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;
use tessera_model::multus::{GROUP, NETWORK_STATUS_ANNOTATION, NetworkSelection};
use tessera_node::attachments::{self, AttachError, NO_NETWORK_FOUND};
use tessera_node::pod_status::{self, pod_key};
use tessera_node::topology::NodeSpec;

use crate::twins::NodeTwins;

/// Multus's NetworkAttachmentDefinition resource.
pub(crate) fn definitions_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, "v1", "NetworkAttachmentDefinition"),
        "network-attachment-definitions",
    )
}

impl NodeTwins {
    /// The networks `pod` selects with their definitions' CNI configs, or — when it cannot be
    /// attached — `None` after the event and the ContainerCreating status (once per attempt;
    /// the pod is attempted again when a definition appears).
    pub(crate) async fn attach_networks(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
    ) -> Result<Option<Attached>, kube::Error> {
        let checked = match attachments::selections(pod) {
            Ok(selected) if selected.is_empty() => return Ok(Some(Attached::default())),
            Ok(selected) => {
                let definitions = self.fetch_definitions(&selected).await?;
                attachments::network_status(&selected, spec, "0.0.0.0", &definitions).map(|_| {
                    Attached {
                        selected,
                        definitions,
                    }
                })
            }
            Err(error) => Err(error),
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let error = match checked {
            Ok(attached) => {
                self.failed_attachments
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&uid);
                return Ok(Some(attached));
            }
            Err(error) => error,
        };
        let first = self
            .failed_attachments
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid, pod_key(pod))
            .is_none();
        if first {
            let reason = match error {
                AttachError::NoNetworkFound { .. } => NO_NETWORK_FOUND,
                _ => "FailedCreatePodSandBox",
            };
            self.event(pod, &spec.name, "Warning", reason, &error.to_string(), None)
                .await;
            let (namespace, name) = pod_key(pod);
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
            let status = pod_status::creating_status(pod, spec, (self.clock)());
            pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
        }
        Ok(None)
    }

    async fn fetch_definitions(
        &self,
        selected: &[NetworkSelection],
    ) -> Result<BTreeMap<(String, String), String>, kube::Error> {
        let mut found = BTreeMap::new();
        for selection in selected {
            let api: Api<DynamicObject> = Api::namespaced_with(
                self.client.clone(),
                &selection.namespace,
                &definitions_resource(),
            );
            if let Some(definition) = api.get_opt(&selection.name).await? {
                let config = definition.data["spec"]["config"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                found.insert(
                    (selection.namespace.clone(), selection.name.clone()),
                    config,
                );
            }
        }
        Ok(found)
    }

    /// Writes the network-status of a pod that got `ip` (nothing for a pod without secondary
    /// networks).
    pub(crate) async fn write_network_status(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
        ip: &str,
        attached: &Attached,
    ) -> Result<(), kube::Error> {
        if attached.selected.is_empty() {
            return Ok(());
        }
        let Ok(statuses) =
            attachments::network_status(&attached.selected, spec, ip, &attached.definitions)
        else {
            return Ok(());
        };
        let text = serde_json::to_string_pretty(&statuses).unwrap_or_default();
        let (namespace, name) = pod_key(pod);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let patch = json!({"metadata": {"annotations": {NETWORK_STATUS_ANNOTATION: text}}});
        pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }
}

/// What a pod is attached to: its selections and their definitions' CNI configs.
#[derive(Debug, Default)]
pub(crate) struct Attached {
    selected: Vec<NetworkSelection>,
    definitions: BTreeMap<(String, String), String>,
}
