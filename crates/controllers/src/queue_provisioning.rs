//! The queue manager's ProvisioningRequest admission check: watches of
//! ProvisioningRequestConfigs (`kueue.x-k8s.io`), ProvisioningRequests
//! (`autoscaling.x-k8s.io/v1`, once their CRDs exist) and PodTemplates; after each admission
//! pass it writes each AdmissionCheck's `Active` condition from
//! [`tessera_queue::api::provisioning::active_status`] and carries out what
//! [`tessera_queue::api::provisioning::reconcile`] answers for every Workload — PodTemplates and
//! requests created, stale requests deleted, PodTemplates handed to their request, the
//! Workload's check states written — recording events as
//! `kueue-provisioning-request-controller`. Decides nothing itself; provisioning is the
//! autoscaler's business.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::PodTemplate;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch};
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_model::clock::Clock;
use tessera_queue::api::objects;
use tessera_queue::api::provisioning::{self, Inputs, Write};
use tessera_queue::flavor::ResourceFlavorSpec;

use crate::queue::{MANAGER, Workloads, kueue_resource, values, write_check_statuses};
use crate::shell::{EventRecorder, patch_params, post_params, watched};

/// The ProvisioningRequest kind and its CRD's name.
const REQUEST: (&str, &str, &str, &str) = (
    tessera_model::provisioning::GROUP,
    tessera_model::provisioning::VERSION,
    "ProvisioningRequest",
    "provisioningrequests.autoscaling.x-k8s.io",
);

/// The watched objects and the recorder.
pub struct ProvisioningWatches {
    configs: Store<DynamicObject>,
    requests: Store<DynamicObject>,
    request_resource: ApiResource,
    templates: Store<PodTemplate>,
    events: EventRecorder,
}

impl ProvisioningWatches {
    /// Starts the reflectors; their changes join `changes`.
    pub fn start(
        client: &Client,
        clock: Clock,
        changes: &mut futures::stream::SelectAll<futures::stream::BoxStream<'static, ()>>,
    ) -> ProvisioningWatches {
        let config_resource =
            kueue_resource("ProvisioningRequestConfig", "provisioningrequestconfigs");
        let (configs, config_changes) = crate::custom::watched_once_installed(
            client,
            &config_resource,
            "provisioningrequestconfigs.kueue.x-k8s.io",
        );
        let (group, version, kind, crd) = REQUEST;
        let request_resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, kind),
            "provisioningrequests",
        );
        let (requests, request_changes) =
            crate::custom::watched_once_installed(client, &request_resource, crd);
        let (templates, template_changes) = watched(Api::<PodTemplate>::all(client.clone()));
        changes.extend([config_changes, request_changes, template_changes]);
        ProvisioningWatches {
            configs,
            requests,
            request_resource,
            templates,
            events: EventRecorder::start(client.clone(), provisioning::COMPONENT, clock),
        }
    }

    /// Writes the AdmissionChecks' `Active` conditions, then the check controller's writes
    /// for each of `workloads`; answers the Workloads written.
    pub async fn reconcile(
        &self,
        client: &Client,
        admission_checks: &[Value],
        workloads: &Workloads,
        flavors: &BTreeMap<String, ResourceFlavorSpec>,
        now: SystemTime,
    ) -> Vec<Arc<DynamicObject>> {
        let configs = objects::by_name(&values(self.configs.state()));
        write_check_statuses(client, admission_checks, |check| {
            provisioning::active_status(check, &configs, now)
        })
        .await;
        let checks = objects::by_name(admission_checks);
        let requests = values(self.requests.state());
        let templates = values(self.templates.state());
        let inputs = Inputs {
            admission_checks: &checks,
            configs: &configs,
            requests: &requests,
            pod_templates: &templates,
            flavors,
        };
        let mut written = Vec::new();
        for workload in workloads.values() {
            let mut created = true;
            for write in provisioning::reconcile(workload, &inputs, now) {
                match write {
                    // Kueue's event follows a creation that went through.
                    Write::Event(event)
                        if event.reason != "ProvisioningRequestCreated" || created =>
                    {
                        self.events
                            .record(event.involved, event.kind, &event.reason, &event.message)
                            .await;
                    }
                    Write::Event(_) => {}
                    Write::Create(object) => {
                        created = match self.create(client, &object).await {
                            Ok(created) => created,
                            Err(error) => {
                                let (states, event) =
                                    provisioning::creation_failed(workload, &object, &error, now);
                                self.events
                                    .record(
                                        event.involved,
                                        event.kind,
                                        &event.reason,
                                        &event.message,
                                    )
                                    .await;
                                if let Some(states) = states
                                    && let Some(object) =
                                        self.write_checks(client, workload, states).await
                                {
                                    written.push(object);
                                }
                                // Kueue's reconcile ends with the error; the next pass retries.
                                break;
                            }
                        }
                    }
                    Write::DeleteRequest(namespace, name) => {
                        let api: Api<DynamicObject> = Api::namespaced_with(
                            client.clone(),
                            &namespace,
                            &self.request_resource,
                        );
                        if let Err(error) = api.delete(&name, &DeleteParams::background()).await {
                            tracing::debug!(%error, %name, "provisioning: request not deleted");
                        }
                    }
                    Write::PodTemplateOwners(namespace, name, owners) => {
                        let api: Api<PodTemplate> = Api::namespaced(client.clone(), &namespace);
                        let patch = json!({"metadata": {"ownerReferences": owners}});
                        if let Err(error) = api
                            .patch(&name, &patch_params(MANAGER), &Patch::Merge(&patch))
                            .await
                        {
                            tracing::debug!(%error, %name, "provisioning: template not handed over");
                        }
                    }
                    Write::WorkloadChecks(states) => {
                        if let Some(object) = self.write_checks(client, workload, states).await {
                            written.push(object);
                        }
                    }
                }
            }
        }
        written
    }

    /// Writes a Workload's check states; the written Workload (failures logged).
    async fn write_checks(
        &self,
        client: &Client,
        workload: &Value,
        states: Vec<Value>,
    ) -> Option<Arc<DynamicObject>> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            objects::namespace(workload),
            &kueue_resource("Workload", "workloads"),
        );
        let patch = json!({"status": {"admissionChecks": states}});
        match api
            .patch_status(
                objects::name(workload),
                &patch_params(MANAGER),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(object) => Some(Arc::new(object)),
            Err(error) => {
                tracing::debug!(%error, workload = %objects::name(workload), "provisioning: checks not written");
                None
            }
        }
    }

    /// Creates a PodTemplate or a ProvisioningRequest: whether it was created (a 409 — there
    /// already, from a pass before the watch showed it — is not, and no error); the API
    /// server's message when it refused it otherwise.
    async fn create(&self, client: &Client, object: &Value) -> Result<bool, String> {
        let namespace = objects::namespace(object).to_owned();
        let resource = if object["kind"] == "PodTemplate" {
            ApiResource::erase::<PodTemplate>(&())
        } else {
            self.request_resource.clone()
        };
        let object = serde_json::from_value::<DynamicObject>(object.clone())
            .map_err(|error| error.to_string())?;
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
        match api.create(&post_params(MANAGER), &object).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(kube::Error::Api(status)) => Err(status.message),
            Err(error) => {
                // Not the API server's answer (a connection error): tried again next pass.
                tracing::debug!(%error, "provisioning: object not created");
                Ok(false)
            }
        }
    }
}
