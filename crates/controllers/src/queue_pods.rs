//! The queue manager's Pod integration shell: it watches Pods and, on each pass of
//! [`crate::queue`], hands every unit of pods Kueue manages (a pod, or the pods of a group) with
//! its Workload to [`tessera_queue::api::pod::reconcile`] and carries out what it answers
//! (Workloads created, pods ungated, stopped or released from Kueue's finalizer, Workloads
//! finished, their quota released or their owners completed), recording Kueue's pod events.
//! A StatefulSet's or LeaderWorkerSet group's pods wait for the Workload their parent owns:
//! when a group has none, its parent is read and the Workload
//! [`tessera_queue::api::parent`] builds for it is created, as Kueue's parent reconcilers do.
//!
//! As the Job integration: a unit's writes are not sent again while the watch still shows the
//! pods they were sent for, and the Workloads it writes are handed back for the queue shell's
//! overlay. Decides nothing itself; knows nothing of the admission pass.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch};
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_model::clock::Clock;
use tessera_model::kueue::{GROUP, STORAGE_VERSION};
use tessera_queue::api::job::Priorities;
use tessera_queue::api::objects;
use tessera_queue::api::parent::{self, ParentKind};
use tessera_queue::api::pod::{self, PodWrite};
use tessera_queue::flavor::ResourceFlavorSpec;

use crate::queue::{MANAGER, Workloads};
use crate::shell::{EventRecorder, patch_params, post_params, watched};

/// The component Kueue's Pod integration records events as.
pub const POD_COMPONENT: &str = "pod-kueue-controller";

/// The pod watch, the event recorder and, per unit, the writes last sent with the pods'
/// resource versions then.
pub struct PodIntegration {
    pods: Store<Pod>,
    events: EventRecorder,
    sent: HashMap<String, (Vec<String>, Vec<PodWrite>)>,
    /// The warnings recorded about parents (`namespace/name` and message), so a parent whose
    /// WorkloadPriorityClass is missing is not warned about again on every pass.
    warned: std::sync::Mutex<std::collections::HashSet<(String, String)>>,
}

/// What a pass of the integrations (jobs and pods) reads besides the jobs and pods: the
/// Workloads by `namespace/name`, the flavors and the priority classes, read once a pass.
pub struct Context<'a> {
    /// The Workloads as they are now.
    pub workloads: &'a Workloads,
    /// ResourceFlavors by name.
    pub flavors: &'a BTreeMap<String, ResourceFlavorSpec>,
    /// WorkloadPriorityClasses and PriorityClasses.
    pub priorities: &'a Priorities,
}

impl PodIntegration {
    /// Starts the pod watch; its stream yields on every change.
    pub fn start(
        client: &Client,
        clock: Clock,
    ) -> (PodIntegration, futures::stream::BoxStream<'static, ()>) {
        let (pods, changes) = watched(Api::<Pod>::all(client.clone()));
        let events = EventRecorder::start(client.clone(), POD_COMPONENT, clock);
        let integration = PodIntegration {
            pods,
            events,
            sent: HashMap::new(),
            warned: std::sync::Mutex::default(),
        };
        (integration, changes)
    }

    /// Every pod as the watch shows it now.
    pub fn pods(&self) -> Vec<Value> {
        crate::queue::values(self.pods.state())
    }

    /// One pass over every unit of managed pods; answers the Workloads it wrote.
    pub async fn integrate(
        &mut self,
        client: &Client,
        context: &Context<'_>,
        now: std::time::SystemTime,
    ) -> Vec<Arc<DynamicObject>> {
        let pods: Vec<Value> = self
            .pods
            .state()
            .iter()
            .filter_map(|p| serde_json::to_value(p.as_ref()).ok())
            .collect();
        let mut written = Vec::new();
        let units = pod::units(&pods);
        // Indexed only when Kueue manages pods: a pass reads every Workload.
        let by_owner = if units.is_empty() {
            BTreeMap::new()
        } else {
            crate::queue::owned_workloads(context.workloads)
        };
        for (key, group, members) in &units {
            let workload = if *group {
                context.workloads.get(key.as_str()).map(Arc::as_ref)
            } else {
                by_owner.get(key.as_str()).copied()
            };
            if *group
                && workload.is_none()
                && let Some(created) = self
                    .create_parent_workload(client, members[0], context.priorities)
                    .await
            {
                written.push(created);
            }
            let writes = pod::reconcile(
                members,
                *group,
                workload,
                context.flavors,
                context.priorities,
                now,
            );
            let versions = members
                .iter()
                .map(|p| tessera_model::json::text(p, "/metadata/resourceVersion").to_owned())
                .collect();
            let sending = (versions, writes.clone());
            if writes.is_empty() || self.sent.get(key) == Some(&sending) {
                continue;
            }
            let namespace = objects::namespace(members[0]);
            let mut done = true;
            for write in writes {
                match self.write(client, namespace, workload, write).await {
                    Ok(Some(object)) => written.push(object),
                    Ok(None) => {}
                    Err(()) => {
                        done = false;
                        break;
                    }
                }
            }
            if done {
                self.sent.insert(key.clone(), sending);
            }
        }
        let keys: std::collections::HashSet<&str> =
            units.iter().map(|(key, _, _)| key.as_str()).collect();
        self.sent.retain(|key, _| keys.contains(key.as_str()));
        written
    }

    /// The parent's reconciler's part for a group without its prebuilt Workload: reads the
    /// StatefulSet or LeaderWorkerSet and creates the group's Workload, with Kueue's event
    /// about the parent. Answers the created Workload.
    async fn create_parent_workload(
        &self,
        client: &Client,
        pod: &Value,
        priorities: &Priorities,
    ) -> Option<Arc<DynamicObject>> {
        let (kind, name) = parent::parent_of(pod)?;
        let namespace = objects::namespace(pod);
        let parents: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &parent_resource(kind));
        let logged = |error: kube::Error| {
            tracing::debug!(%error, %namespace, %name, "queue manager: parent Workload not created");
        };
        let object = parents.get(&name).await.map_err(logged).ok()?;
        let object = serde_json::to_value(&object).ok()?;
        let (workload, event) = match parent::workload_for(kind, &object, pod, priorities)? {
            Ok(created) => created,
            Err(warning) => {
                let about = (format!("{namespace}/{name}"), warning.message.clone());
                let first = self
                    .warned
                    .lock()
                    .map(|mut warned| warned.insert(about))
                    .unwrap_or(true);
                if !first {
                    return None;
                }
                self.events
                    .record(
                        warning.involved,
                        warning.kind,
                        &warning.reason,
                        &warning.message,
                    )
                    .await;
                return None;
            }
        };
        let workload: DynamicObject = serde_json::from_value(workload).ok()?;
        let workloads: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &workload_resource());
        let created = workloads
            .create(&post_params(MANAGER), &workload)
            .await
            .map_err(logged)
            .ok()?;
        self.events
            .record(event.involved, event.kind, &event.reason, &event.message)
            .await;
        Some(Arc::new(created))
    }

    /// Carries out one write; a written Workload is answered, a failed write (logged) is an
    /// error.
    async fn write(
        &self,
        client: &Client,
        namespace: &str,
        workload: Option<&Value>,
        write: PodWrite,
    ) -> Result<Option<Arc<DynamicObject>>, ()> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let workloads: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &workload_resource());
        let logged = |error: kube::Error| {
            tracing::debug!(%error, %namespace, "queue manager: pod integration write not done");
        };
        match write {
            PodWrite::Event(event) => {
                self.events
                    .record(event.involved, event.kind, &event.reason, &event.message)
                    .await;
                Ok(None)
            }
            PodWrite::CreateWorkload(object) => {
                let object: DynamicObject = serde_json::from_value(object).map_err(|error| {
                    tracing::debug!(%error, "queue manager: a Workload that does not convert");
                })?;
                let created = workloads
                    .create(&post_params(MANAGER), &object)
                    .await
                    .map_err(logged)?;
                Ok(Some(Arc::new(created)))
            }
            PodWrite::PatchPod(name, patch) => {
                pods.patch(&name, &patch_params(MANAGER), &Patch::Merge(&patch))
                    .await
                    .map_err(logged)?;
                Ok(None)
            }
            PodWrite::StopPod(name, status) => {
                let patch = json!({"status": status});
                pods.patch_status(&name, &patch_params(MANAGER), &Patch::Merge(&patch))
                    .await
                    .map_err(logged)?;
                pods.delete(&name, &DeleteParams::default())
                    .await
                    .map_err(logged)?;
                Ok(None)
            }
            PodWrite::WorkloadOwners(owners) => {
                let name = workload.map(objects::name).unwrap_or_default();
                let patch = json!({"metadata": {"ownerReferences": owners}});
                let object = workloads
                    .patch(name, &patch_params(MANAGER), &Patch::Merge(&patch))
                    .await
                    .map_err(logged)?;
                Ok(Some(Arc::new(object)))
            }
            PodWrite::WorkloadStatus(status) => {
                let name = workload.map(objects::name).unwrap_or_default();
                let patch = json!({"status": status});
                let object = workloads
                    .patch_status(name, &patch_params(MANAGER), &Patch::Merge(&patch))
                    .await
                    .map_err(logged)?;
                Ok(Some(Arc::new(object)))
            }
        }
    }
}

/// Workloads, in the stored version.
fn workload_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, STORAGE_VERSION, "Workload"),
        "workloads",
    )
}

/// A StatefulSet or LeaderWorkerSet.
fn parent_resource(kind: ParentKind) -> ApiResource {
    let (group, version, kind, plural) = kind.resource();
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}
