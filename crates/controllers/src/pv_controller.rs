//! kube-controller-manager's PersistentVolume controller (`persistentvolume-binder`) as a
//! shell over [`tessera_storage::pv_controller`]: reflectors on PersistentVolumeClaims,
//! PersistentVolumes, StorageClasses and the pods that use claims; after each burst of changes
//! (and every 15 s, upstream's resync) every claim then every volume is synced and the core's
//! actions carried out in order — claim and volume updates (spec and status), volume deletions
//! (reclaim policy Delete) and events as `persistentvolume-controller`.
//!
//! Within a pass the objects each write returns replace the snapshot's, so a later sync (and a
//! later write of the same object) goes on from what the server holds, as upstream goes on
//! with the object each write returns. A failed write ends that object's sync; the next pass
//! (the watch shows the change, or the resync) tries again. Decides nothing: binding, phases,
//! provisioning requests and reclaim are the core's.
//!
//! [`run_ephemeral`] is the ephemeral volume controller: the claims of pods' generic ephemeral
//! volumes created as [`tessera_storage::ephemeral`] builds them.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use serde_json::Value;
use tessera_model::clock::Clock;
use tessera_model::json::text;
use tessera_storage::pv_controller::{Action, COMPONENT, Cluster, sync_claim, sync_volume};

use crate::shell::{EventRecorder, listed, watched};
use crate::workqueue::Passes;

/// The field manager of the controller's writes.
pub const MANAGER: &str = crate::shell::KUBE_CONTROLLER_MANAGER;

/// Upstream's queues: the controller syncs volumes and claims in one pass.
const QUEUES: &[&str] = &["volumes", "claims"];

/// Runs the controller until the task is dropped, reading the time from `clock` and
/// recording its passes in `metrics`.
pub async fn run(
    client: Client,
    clock: Clock,
    metrics: Option<Arc<tessera_metrics::components::Registries>>,
) {
    let mut passes = Passes::new(metrics.as_deref(), QUEUES, clock.clone());
    let (volumes, volume_changes) = watched(Api::<PersistentVolume>::all(client.clone()));
    let (claims, claim_changes) = watched(Api::<PersistentVolumeClaim>::all(client.clone()));
    let (classes, class_changes) = watched(Api::<StorageClass>::all(client.clone()));
    let (pods, pod_changes) = watched(Api::<Pod>::all(client.clone()));
    let mut changes =
        futures::stream::select_all([volume_changes, claim_changes, class_changes, pod_changes]);
    let mut resync = tokio::time::interval(Duration::from_secs(15));
    let events = EventRecorder::start(client.clone(), COMPONENT, clock.clone());
    let mut controller = Controller {
        client,
        events,
        recorded: HashSet::new(),
    };
    while passes.next(&mut changes, &mut resync).await {
        // Nothing is decided over a half-listed cluster.
        // The stores fill only while their streams are polled (in `passes.next`): no waiting
        // here, a pass before every kind is listed is skipped.
        let all_listed = listed(&volumes) && listed(&claims) && listed(&classes) && listed(&pods);
        if !all_listed {
            // Look again soon rather than at the next resync.
            resync.reset_after(Duration::from_millis(100));
            continue;
        }
        if !controller.pass(&volumes, &claims, &classes, &pods).await {
            passes.retry();
        }
    }
}

/// Whether a pod names a claim (the only pods the core reads).
fn uses_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|volumes| {
            volumes
                .iter()
                .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
        })
}

struct Controller {
    client: Client,
    events: EventRecorder,
    /// Events recorded (involved UID, reason, message): each is recorded once, as
    /// client-go's correlator folds repeats into one event.
    recorded: HashSet<(String, String, String)>,
}

/// The snapshot a pass works on, updated by its own writes.
struct Snapshot {
    volumes: Vec<Value>,
    claims: Vec<Value>,
    classes: Vec<Value>,
    pods: Vec<Value>,
}

impl Snapshot {
    fn cluster(&self) -> Cluster<'_> {
        Cluster {
            volumes: &self.volumes,
            claims: &self.claims,
            classes: &self.classes,
            pods: &self.pods,
        }
    }
}

fn key(object: &Value) -> (String, String) {
    (
        text(object, "/metadata/namespace").to_string(),
        text(object, "/metadata/name").to_string(),
    )
}

/// Replaces the object of the same namespace and name in `list` (or drops it with `None`).
fn replace(list: &mut Vec<Value>, wanted: &(String, String), object: Option<Value>) {
    match (list.iter().position(|o| key(o) == *wanted), object) {
        (Some(at), Some(object)) => list[at] = object,
        (Some(at), None) => {
            list.remove(at);
        }
        (None, Some(object)) => list.push(object),
        (None, None) => {}
    }
}

impl Controller {
    /// One pass over every claim, then every volume; false when a write failed.
    async fn pass(
        &mut self,
        volumes: &Store<PersistentVolume>,
        claims: &Store<PersistentVolumeClaim>,
        classes: &Store<StorageClass>,
        pods: &Store<Pod>,
    ) -> bool {
        let mut snapshot = Snapshot {
            volumes: crate::shell::store_values(volumes),
            claims: crate::shell::store_values(claims),
            classes: crate::shell::store_values(classes),
            pods: Vec::new(),
        };
        if snapshot.volumes.is_empty() && snapshot.claims.is_empty() {
            return true;
        }
        snapshot.pods = pods
            .state()
            .iter()
            .filter(|p| uses_claims(p))
            .filter_map(|p| serde_json::to_value(p.as_ref()).ok())
            .collect();
        // Events of objects gone are forgotten.
        let present: HashSet<&str> = snapshot
            .claims
            .iter()
            .chain(&snapshot.volumes)
            .map(|o| text(o, "/metadata/uid"))
            .collect();
        self.recorded
            .retain(|(uid, _, _)| present.contains(uid.as_str()));
        let mut ok = true;
        let mut claim_keys: Vec<(String, String)> = snapshot.claims.iter().map(key).collect();
        let mut synced_again = BTreeSet::new();
        while let Some(wanted) = claim_keys.pop() {
            let Some(claim) = snapshot.claims.iter().find(|c| key(c) == wanted).cloned() else {
                continue;
            };
            let actions = match sync_claim(&claim, snapshot.cluster()) {
                Ok(actions) => actions,
                Err(error) => {
                    tracing::debug!(claim = ?wanted, %error, "claim sync failed; retried");
                    continue;
                }
            };
            match self.carry_out(actions, &mut snapshot).await {
                Ok(requeued) => {
                    for again in requeued {
                        // Each claim is synced again at most once in a pass.
                        if synced_again.insert(again.clone()) {
                            claim_keys.push(again);
                        }
                    }
                }
                Err(error) => {
                    tracing::debug!(claim = ?wanted, %error, "claim sync's write failed; retried");
                    ok = false;
                }
            }
        }
        let volume_names: Vec<(String, String)> = snapshot.volumes.iter().map(key).collect();
        for wanted in volume_names {
            let Some(volume) = snapshot.volumes.iter().find(|v| key(v) == wanted).cloned() else {
                continue;
            };
            let actions = match sync_volume(&volume, snapshot.cluster()) {
                Ok(actions) => actions,
                Err(error) => {
                    tracing::debug!(volume = %wanted.1, %error, "volume sync failed; retried");
                    continue;
                }
            };
            let requeued = match self.carry_out(actions, &mut snapshot).await {
                Ok(requeued) => requeued,
                Err(error) => {
                    tracing::debug!(volume = %wanted.1, %error, "volume sync's write failed; retried");
                    ok = false;
                    continue;
                }
            };
            for again in requeued {
                let Some(claim) = snapshot.claims.iter().find(|c| key(c) == again).cloned() else {
                    continue;
                };
                if let Ok(actions) = sync_claim(&claim, snapshot.cluster())
                    && let Err(error) = self.carry_out(actions, &mut snapshot).await
                {
                    tracing::debug!(claim = ?again, %error, "claim sync's write failed; retried");
                    ok = false;
                }
            }
        }
        ok
    }

    /// Carries out one sync's actions in order; returns the claims to sync again.
    async fn carry_out(
        &mut self,
        actions: Vec<Action>,
        snapshot: &mut Snapshot,
    ) -> Result<Vec<(String, String)>, kube::Error> {
        let mut requeued = Vec::new();
        // The resource versions this sync's writes returned, by object.
        let mut versions: Vec<((bool, String, String), String)> = Vec::new();
        let with_version =
            |mut object: Value, claim: bool, versions: &[((bool, String, String), String)]| {
                let (namespace, name) = key(&object);
                if let Some((_, version)) = versions
                    .iter()
                    .rev()
                    .find(|((c, n, m), _)| *c == claim && *n == namespace && *m == name)
                {
                    object["metadata"]["resourceVersion"] = Value::String(version.clone());
                }
                object
            };
        for action in actions {
            match action {
                Action::UpdateClaim(claim) => {
                    let claim = with_version(claim, true, &versions);
                    let written = self.write_claim(&claim, false).await?;
                    remember(&mut versions, true, &written);
                    replace(&mut snapshot.claims, &key(&written), Some(written));
                }
                Action::UpdateClaimStatus(claim) => {
                    let claim = with_version(claim, true, &versions);
                    let written = self.write_claim(&claim, true).await?;
                    remember(&mut versions, true, &written);
                    replace(&mut snapshot.claims, &key(&written), Some(written));
                }
                Action::UpdateVolume(volume) => {
                    let volume = with_version(volume, false, &versions);
                    let written = self.write_volume(&volume, false).await?;
                    remember(&mut versions, false, &written);
                    replace(&mut snapshot.volumes, &key(&written), Some(written));
                }
                Action::UpdateVolumeStatus(volume) => {
                    let volume = with_version(volume, false, &versions);
                    let written = self.write_volume(&volume, true).await?;
                    remember(&mut versions, false, &written);
                    replace(&mut snapshot.volumes, &key(&written), Some(written));
                }
                Action::DeleteVolume(name) => {
                    let api: Api<PersistentVolume> = Api::all(self.client.clone());
                    match api.delete(&name, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(status)) if status.code == 404 => {}
                        Err(error) => return Err(error),
                    }
                    tracing::info!(volume = %name, "deleted a released volume (reclaim policy Delete)");
                    replace(&mut snapshot.volumes, &(String::new(), name), None);
                }
                Action::Event(event) => {
                    let involved_uid = text(&event.involved, "/uid").to_string();
                    let seen = (
                        involved_uid,
                        event.reason.to_string(),
                        event.message.clone(),
                    );
                    if self.recorded.insert(seen) {
                        self.events
                            .record(event.involved, event.kind, event.reason, &event.message)
                            .await;
                    }
                }
                Action::SyncClaim(claim) => {
                    let (namespace, name) = claim.split_once('/').unwrap_or(("", &claim));
                    requeued.push((namespace.to_string(), name.to_string()));
                }
            }
        }
        Ok(requeued)
    }

    async fn write_claim(&self, claim: &Value, status: bool) -> Result<Value, kube::Error> {
        let (namespace, name) = key(claim);
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
        let params = PostParams {
            field_manager: Some(MANAGER.into()),
            ..PostParams::default()
        };
        let typed: PersistentVolumeClaim =
            serde_json::from_value(claim.clone()).map_err(kube::Error::SerdeError)?;
        let written = if status {
            api.replace_status(&name, &params, &typed).await?
        } else {
            api.replace(&name, &params, &typed).await?
        };
        serde_json::to_value(&written).map_err(kube::Error::SerdeError)
    }

    async fn write_volume(&self, volume: &Value, status: bool) -> Result<Value, kube::Error> {
        let (_, name) = key(volume);
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let params = PostParams {
            field_manager: Some(MANAGER.into()),
            ..PostParams::default()
        };
        let typed: PersistentVolume =
            serde_json::from_value(volume.clone()).map_err(kube::Error::SerdeError)?;
        let written = if status {
            api.replace_status(&name, &params, &typed).await?
        } else {
            api.replace(&name, &params, &typed).await?
        };
        serde_json::to_value(&written).map_err(kube::Error::SerdeError)
    }
}

fn remember(versions: &mut Vec<((bool, String, String), String)>, claim: bool, written: &Value) {
    let (namespace, name) = key(written);
    let version = text(written, "/metadata/resourceVersion").to_string();
    versions.push(((claim, namespace, name), version));
}

/// Runs kube-controller-manager's ephemeral volume controller until the task is dropped:
/// reflectors on pods and claims, and after each burst of changes (and every 15 s) the claims
/// [`tessera_storage::ephemeral::claims_to_create`] names created; a failed creation is a
/// `FailedBinding` event on the pod, as `ephemeral_volume`.
pub async fn run_ephemeral(
    client: Client,
    clock: Clock,
    metrics: Option<Arc<tessera_metrics::components::Registries>>,
) {
    use tessera_storage::ephemeral;
    let mut passes = Passes::new(metrics.as_deref(), &["ephemeral_volume"], clock.clone());
    let (claims, claim_changes) = watched(Api::<PersistentVolumeClaim>::all(client.clone()));
    let (pods, pod_changes) = watched(Api::<Pod>::all(client.clone()));
    let mut changes = futures::stream::select_all([claim_changes, pod_changes]);
    let mut resync = tokio::time::interval(Duration::from_secs(15));
    let events = EventRecorder::start(client.clone(), ephemeral::COMPONENT, clock.clone());
    while passes.next(&mut changes, &mut resync).await {
        if !listed(&claims) || !listed(&pods) {
            resync.reset_after(Duration::from_millis(100));
            continue;
        }
        let with_templates: Vec<Value> = pods
            .state()
            .iter()
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.volumes.as_ref())
                    .is_some_and(|v| v.iter().any(|v| v.ephemeral.is_some()))
            })
            .filter_map(|p| serde_json::to_value(p.as_ref()).ok())
            .collect();
        if with_templates.is_empty() {
            continue;
        }
        let existing = crate::shell::store_values(&claims);
        let mut failed = false;
        for pod in &with_templates {
            for claim in ephemeral::claims_to_create(pod, &existing) {
                let Ok(typed) = serde_json::from_value::<PersistentVolumeClaim>(claim) else {
                    continue;
                };
                let namespace = typed.metadata.namespace.clone().unwrap_or_default();
                let params = PostParams {
                    field_manager: Some(MANAGER.into()),
                    ..PostParams::default()
                };
                match Api::<PersistentVolumeClaim>::namespaced(client.clone(), &namespace)
                    .create(&params, &typed)
                    .await
                {
                    Ok(_) => {}
                    // Created already; the watch has not shown it yet.
                    Err(kube::Error::Api(status)) if status.code == 409 => {}
                    Err(error) => {
                        failed = true;
                        let involved = tessera_storage::objects::reference(pod, "Pod");
                        events
                            .record(
                                involved,
                                "Warning",
                                ephemeral::FAILED_BINDING,
                                &format!("PVC creation failed: {error}"),
                            )
                            .await;
                    }
                }
            }
        }
        if failed {
            passes.retry();
        }
    }
}
