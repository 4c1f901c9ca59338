//! kubernetes-csi/external-snapshotter's common snapshot-controller as a shell over
//! [`tessera_storage::snapshots`]: reflectors on VolumeSnapshots, VolumeSnapshotContents,
//! VolumeSnapshotClasses, PersistentVolumeClaims and PersistentVolumes; after each burst of
//! changes (and every 15 s, upstream's resync) every content, every snapshot and every claim
//! is synced and the core's actions carried out in order — snapshot and content updates
//! (main resource or status, by replace), content creations and deletions, claim finalizers —
//! with events as `snapshot-controller`, each (object, reason, message) once.
//!
//! One write per object per pass: a sync whose writes touch an object already written in the
//! pass waits for the next one (the watch shows the write), as does a sync whose write failed.
//! Decides nothing: classes, contents, finalizers, statuses and deletion are the core's.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::Value;
use tessera_model::clock::Clock;
use tessera_model::json::text;
use tessera_storage::snapshots::{
    Action, COMPONENT, Cluster, GROUP, sync_claim, sync_content, sync_snapshot,
};

use crate::shell::{EventRecorder, listed, next_pass, watched, watched_with};

/// The field manager of the controller's writes.
pub const MANAGER: &str = "snapshot-controller";

/// The `snapshot.storage.k8s.io/v1` resource of `kind` (`plural`).
pub fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", kind), plural)
}

/// VolumeSnapshots.
pub fn snapshot_resource() -> ApiResource {
    resource("VolumeSnapshot", "volumesnapshots")
}

/// VolumeSnapshotContents.
pub fn content_resource() -> ApiResource {
    resource("VolumeSnapshotContent", "volumesnapshotcontents")
}

/// VolumeSnapshotClasses.
pub fn class_resource() -> ApiResource {
    resource("VolumeSnapshotClass", "volumesnapshotclasses")
}

/// Runs the controller until the task is dropped, reading the time from `clock`.
pub async fn run(client: Client, clock: Clock) {
    let dynamic = |resource: ApiResource| {
        watched_with(
            Api::<DynamicObject>::all_with(client.clone(), &resource),
            resource,
        )
    };
    let (snapshots, snapshot_changes) = dynamic(snapshot_resource());
    let (contents, content_changes) = dynamic(content_resource());
    let (classes, class_changes) = dynamic(class_resource());
    let (claims, claim_changes) = watched(Api::<PersistentVolumeClaim>::all(client.clone()));
    let (volumes, volume_changes) = watched(Api::<PersistentVolume>::all(client.clone()));
    let mut changes = futures::stream::select_all([
        snapshot_changes,
        content_changes,
        class_changes,
        claim_changes,
        volume_changes,
    ]);
    let mut resync = tokio::time::interval(Duration::from_secs(15));
    let mut controller = Controller {
        events: EventRecorder::start(client.clone(), COMPONENT, clock.clone()),
        client,
        clock,
        recorded: HashSet::new(),
    };
    while next_pass(&mut changes, &mut resync).await {
        let all_listed = listed(&snapshots)
            && listed(&contents)
            && listed(&classes)
            && listed(&claims)
            && listed(&volumes);
        if !all_listed {
            resync.reset_after(Duration::from_millis(100));
            continue;
        }
        let world = World {
            snapshots: crate::shell::store_values(&snapshots),
            contents: crate::shell::store_values(&contents),
            classes: crate::shell::store_values(&classes),
            claims: crate::shell::store_values(&claims),
            volumes: crate::shell::store_values(&volumes),
        };
        if !controller.pass(&world).await {
            // Look again soon rather than at the next resync.
            resync.reset_after(Duration::from_millis(500));
        }
    }
}

struct World {
    snapshots: Vec<Value>,
    contents: Vec<Value>,
    classes: Vec<Value>,
    claims: Vec<Value>,
    volumes: Vec<Value>,
}

impl World {
    fn cluster(&self) -> Cluster<'_> {
        Cluster {
            snapshots: &self.snapshots,
            contents: &self.contents,
            classes: &self.classes,
            claims: &self.claims,
            volumes: &self.volumes,
        }
    }
}

struct Controller {
    client: Client,
    clock: Clock,
    events: EventRecorder,
    /// Events recorded (involved UID, reason, message): each once.
    recorded: HashSet<(String, String, String)>,
}

/// The object an action writes: (kind, namespace, name).
type Target = (&'static str, String, String);

fn target(action: &Action) -> Option<Target> {
    let of = |kind: &'static str, object: &Value| {
        Some((
            kind,
            text(object, "/metadata/namespace").to_string(),
            text(object, "/metadata/name").to_string(),
        ))
    };
    match action {
        Action::UpdateSnapshot(s) | Action::UpdateSnapshotStatus(s) => of("snapshot", s),
        Action::CreateContent(c) | Action::UpdateContent(c) => of("content", c),
        Action::DeleteContent(name) => Some(("content", String::new(), name.clone())),
        Action::UpdateClaim(c) => of("claim", c),
        Action::Event(_) => None,
    }
}

impl Controller {
    /// One pass over every content, snapshot and claim; false when a sync waits or failed.
    async fn pass(&mut self, world: &World) -> bool {
        let present: HashSet<&str> = world
            .snapshots
            .iter()
            .chain(&world.contents)
            .map(|o| text(o, "/metadata/uid"))
            .collect();
        self.recorded
            .retain(|(uid, _, _)| present.contains(uid.as_str()));
        let now = (self.clock)();
        let cluster = world.cluster();
        let mut plans: Vec<Vec<Action>> = Vec::new();
        plans.extend(world.contents.iter().map(|c| sync_content(c, cluster)));
        plans.extend(
            world
                .snapshots
                .iter()
                .map(|s| sync_snapshot(s, cluster, now)),
        );
        plans.extend(world.claims.iter().map(|c| sync_claim(c, cluster)));
        let mut touched: HashSet<Target> = HashSet::new();
        let mut ok = true;
        for actions in plans.into_iter().filter(|a| !a.is_empty()) {
            let targets: Vec<Target> = actions.iter().filter_map(target).collect();
            if targets.iter().any(|t| touched.contains(t)) {
                ok = false;
                continue;
            }
            touched.extend(targets);
            if let Err(error) = self.carry_out(actions).await {
                tracing::debug!(%error, "snapshot controller write failed; retried");
                ok = false;
            }
        }
        ok
    }

    async fn carry_out(&mut self, actions: Vec<Action>) -> Result<(), kube::Error> {
        let params = PostParams {
            field_manager: Some(MANAGER.into()),
            ..PostParams::default()
        };
        let snapshots = |namespace: &str| {
            Api::<DynamicObject>::namespaced_with(
                self.client.clone(),
                namespace,
                &snapshot_resource(),
            )
        };
        let contents = Api::<DynamicObject>::all_with(self.client.clone(), &content_resource());
        let dynamic = |object: &Value| -> Result<DynamicObject, kube::Error> {
            serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)
        };
        for action in actions {
            match action {
                Action::UpdateSnapshot(s) => {
                    snapshots(text(&s, "/metadata/namespace"))
                        .replace(text(&s, "/metadata/name"), &params, &dynamic(&s)?)
                        .await?;
                }
                Action::UpdateSnapshotStatus(s) => {
                    snapshots(text(&s, "/metadata/namespace"))
                        .replace_status(text(&s, "/metadata/name"), &params, &dynamic(&s)?)
                        .await?;
                }
                Action::CreateContent(c) => {
                    match contents.create(&params, &dynamic(&c)?).await {
                        Ok(_) => {}
                        // upstream reuses a content that exists already.
                        Err(kube::Error::Api(status)) if status.code == 409 => {}
                        Err(error) => return Err(error),
                    }
                    tracing::info!(content = %text(&c, "/metadata/name"), "created a snapshot content");
                }
                Action::UpdateContent(c) => {
                    contents
                        .replace(text(&c, "/metadata/name"), &params, &dynamic(&c)?)
                        .await?;
                }
                Action::DeleteContent(name) => {
                    match contents.delete(&name, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(status)) if status.code == 404 => {}
                        Err(error) => return Err(error),
                    }
                }
                Action::UpdateClaim(c) => {
                    let typed: PersistentVolumeClaim =
                        serde_json::from_value(c.clone()).map_err(kube::Error::SerdeError)?;
                    Api::<PersistentVolumeClaim>::namespaced(
                        self.client.clone(),
                        text(&c, "/metadata/namespace"),
                    )
                    .replace(text(&c, "/metadata/name"), &params, &typed)
                    .await?;
                }
                Action::Event(event) => {
                    let seen = (
                        text(&event.involved, "/uid").to_string(),
                        event.reason.to_string(),
                        event.message.clone(),
                    );
                    if self.recorded.insert(seen) {
                        self.events
                            .record(event.involved, event.kind, event.reason, &event.message)
                            .await;
                    }
                }
            }
        }
        Ok(())
    }
}
