//! The simulated drivers' csi-snapshotter sidecars ([`tessera_storage::snapshots::sidecar`]):
//! a reflector on VolumeSnapshotContents and PersistentVolumes, and after each burst of changes
//! (and every 15 s) each content of a driver that takes snapshots gets what its sidecar does —
//! CreateSnapshot or ListSnapshots written to the content's status (`SnapshotCreationFailed`
//! on the content when the source volume is gone or the snapshot does not fit its node's
//! disk), DeleteSnapshot and the content's finalizer
//! removed once the snapshot-controller released it. Also the snapshots and contents
//! external-provisioner reads to restore a claim from a snapshot ([`RestoreSources`]).
//!
//! A shell: the watches, the writes, the events. Which handle, size and time a snapshot gets
//! and when it goes are the core's; there is no storage behind a snapshot.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, PersistentVolume};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use serde_json::Value;
use tessera_controllers::shell::{listed, next_pass, store_values, watched, watched_with};
use tessera_model::clock::Clock;
use tessera_model::event::{Recorder, core_event};
use tessera_model::json::text;
use tessera_storage::snapshots::GROUP;
use tessera_storage::snapshots::sidecar::{self, Step};

/// The field manager of the sidecars' writes.
const MANAGER: &str = "csi-snapshotter";

/// How often the sidecars look again without a change.
const RESYNC: Duration = Duration::from_secs(15);

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", kind), plural)
}

fn content_resource() -> ApiResource {
    resource("VolumeSnapshotContent", "volumesnapshotcontents")
}

type Changes = futures::stream::BoxStream<'static, ()>;

fn dynamic_store(client: &Client, resource: ApiResource) -> (Store<DynamicObject>, Changes) {
    watched_with(Api::all_with(client.clone(), &resource), resource)
}

/// The VolumeSnapshots and VolumeSnapshotContents external-provisioner reads to restore a
/// claim from a snapshot.
pub(crate) struct RestoreSources {
    snapshots: Store<DynamicObject>,
    contents: Store<DynamicObject>,
}

impl RestoreSources {
    /// Starts watching; the stream must be polled for the stores to fill.
    pub(crate) fn watch(client: &Client) -> (RestoreSources, Changes) {
        let (snapshots, snapshot_changes) =
            dynamic_store(client, resource("VolumeSnapshot", "volumesnapshots"));
        let (contents, content_changes) = dynamic_store(client, content_resource());
        let changes = futures::stream::select(snapshot_changes, content_changes).boxed();
        (
            RestoreSources {
                snapshots,
                contents,
            },
            changes,
        )
    }

    /// The snapshots and contents now, once both are listed (empty before).
    pub(crate) fn values(&self) -> (Vec<Value>, Vec<Value>) {
        if !listed(&self.snapshots) || !listed(&self.contents) {
            return (Vec::new(), Vec::new());
        }
        (store_values(&self.snapshots), store_values(&self.contents))
    }
}

/// The csi-snapshotter sidecars of the simulated drivers, until the task is dropped.
/// `nodes` gives each node's spec (its local disk, which a local snapshot takes room of).
pub(crate) async fn run_snapshotter(client: Client, nodes: crate::specs::Specs, clock: Clock) {
    let (contents, content_changes) = dynamic_store(&client, content_resource());
    let (volumes, volume_changes) = watched(Api::<PersistentVolume>::all(client.clone()));
    let mut changes = futures::stream::select_all([content_changes, volume_changes]);
    let mut resync = tokio::time::interval(RESYNC);
    let mut failures: HashSet<(String, String)> = HashSet::new();
    // A pass per burst of changes and at each resync.
    while next_pass(&mut changes, &mut resync).await {
        if !listed(&contents) || !listed(&volumes) {
            resync.reset_after(Duration::from_millis(100));
            continue;
        }
        let (mut all, volumes) = (store_values(&contents), store_values(&volumes));
        let disk_of = |node: &str| Some(crate::csi::local_disk(&*nodes.get(node)?));
        for at in 0..all.len() {
            let step = sidecar::sync(&all[at], &volumes, &all, disk_of, clock());
            // A snapshot taken in this pass takes its room before the next is looked at.
            let taken = match &step {
                Step::Status(next) => Some(next.clone()),
                _ => None,
            };
            match carry_out(&client, &clock, &all[at], step, &mut failures).await {
                Ok(()) => {
                    if let Some(taken) = taken {
                        all[at] = taken;
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, content = %text(&all[at], "/metadata/name"), "csi-snapshotter write failed; retried");
                    resync.reset_after(Duration::from_millis(500));
                }
            }
        }
    }
}

async fn carry_out(
    client: &Client,
    clock: &Clock,
    content: &Value,
    step: Step,
    failures: &mut HashSet<(String, String)>,
) -> Result<(), kube::Error> {
    let api = Api::<DynamicObject>::all_with(client.clone(), &content_resource());
    let params = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    let name = text(content, "/metadata/name").to_string();
    let driver = text(content, "/spec/driver").to_string();
    match step {
        Step::Skip => {}
        Step::Status(next) => {
            let body: DynamicObject =
                serde_json::from_value(next.clone()).map_err(kube::Error::SerdeError)?;
            api.replace_status(&name, &params, &body).await?;
            tracing::info!(content = %name, handle = %text(&next, "/status/snapshotHandle"), "took a snapshot");
        }
        Step::Failed {
            content: next,
            message,
        } => {
            let body: DynamicObject =
                serde_json::from_value(next).map_err(kube::Error::SerdeError)?;
            let written = api.replace_status(&name, &params, &body).await;
            // The event goes even when the status write fails, as upstream's does.
            if failures.insert((text(content, "/metadata/uid").to_string(), message.clone())) {
                record(
                    client,
                    clock,
                    &driver,
                    content,
                    "SnapshotCreationFailed",
                    &message,
                )
                .await;
            }
            written?;
        }
        Step::Delete {
            handle,
            content: next,
        } => {
            if let Some(handle) = handle {
                tracing::info!(content = %name, %handle, "deleted a snapshot");
            }
            let typed: DynamicObject =
                serde_json::from_value(next).map_err(kube::Error::SerdeError)?;
            api.replace(&name, &params, &typed).await?;
        }
    }
    Ok(())
}

/// Records a Warning event about `content` as the driver's sidecar; a failure is only logged.
async fn record(
    client: &Client,
    clock: &Clock,
    driver: &str,
    content: &Value,
    reason: &str,
    message: &str,
) {
    let component = sidecar::component(driver);
    let recorder = Recorder {
        component: &component,
        host: None,
    };
    let involved = serde_json::json!({
        "apiVersion": text(content, "/apiVersion"), "kind": "VolumeSnapshotContent",
        "name": text(content, "/metadata/name"), "uid": text(content, "/metadata/uid"),
        "resourceVersion": text(content, "/metadata/resourceVersion"),
    });
    let event = core_event(recorder, involved, "Warning", reason, message, clock());
    let namespace = match text(&event, "/metadata/namespace") {
        "" => "default".to_string(),
        namespace => namespace.to_string(),
    };
    let Ok(event) = serde_json::from_value::<CoreEvent>(event) else {
        return;
    };
    if let Err(error) = Api::<CoreEvent>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &event)
        .await
    {
        tracing::debug!(%error, "cannot record an event");
    }
}
