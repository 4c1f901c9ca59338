//! What every controller shell shares: the error of one reconciliation, the retry policy,
//! write parameters that name the controller as field manager, and recording an event.
//!
//! Knows nothing about any kind; the shells bring their own context and reconcilers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Endpoints, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_model::clock::Clock;
use tessera_model::event::{Recorder, core_event};
use tessera_workloads::plan::{Propagation, Resource, Write, Writes};

/// Errors of one reconciliation (retried).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The API refused or failed a request.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// An object could not be converted.
    #[error("conversion: {0}")]
    Convert(#[from] serde_json::Error),
}

/// Retry a failed reconciliation soon.
pub fn retry_soon<K, C>(_object: Arc<K>, error: &ReconcileError, _context: Arc<C>) -> Action {
    tracing::debug!(%error, "reconciliation failed; retrying");
    Action::requeue(Duration::from_millis(500))
}

/// The field manager of the built-in controllers' writes: upstream's run in
/// kube-controller-manager, whose User-Agent names that manager.
pub const KUBE_CONTROLLER_MANAGER: &str = tessera_model::managers::KUBE_CONTROLLER_MANAGER;

/// Patch parameters writing as `manager`.
pub fn patch_params(manager: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(manager.into()),
        ..PatchParams::default()
    }
}

/// Create parameters writing as `manager`.
pub fn post_params(manager: &str) -> PostParams {
    PostParams {
        field_manager: Some(manager.into()),
        ..PostParams::default()
    }
}

/// Records a `core/v1` event about `involved` (an object reference) from `component`, at
/// `now`; a failure is logged, never fatal.
pub async fn record_event(
    client: &Client,
    involved: Value,
    (kind, reason, message): (&str, &str, &str),
    component: &str,
    now: SystemTime,
) {
    post_event(
        client,
        event(involved, kind, reason, message, component, now),
    )
    .await;
}

/// A `core/v1` event about `involved` (an object reference) from `component`.
fn event(
    involved: Value,
    kind: &str,
    reason: &str,
    message: &str,
    component: &str,
    now: SystemTime,
) -> Value {
    let recorder = Recorder {
        component,
        host: None,
    };
    core_event(recorder, involved, kind, reason, message, now)
}

/// Sends a write whose answer the caller does not read: decoding the written object back
/// into its type is a good part of a small write's cost on the client.
pub async fn send_unread(
    client: &Client,
    request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> Result<(), kube::Error> {
    let request = request.map_err(kube::Error::BuildRequest)?;
    client.request_text(request).await.map(drop)
}

/// Creates an event; the stored event is not read back.
async fn post_event(client: &Client, event: Value) {
    let namespace = event
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/events"))
        .create(
            &PostParams::default(),
            serde_json::to_vec(&event).unwrap_or_default(),
        );
    if let Err(error) = send_unread(client, request).await {
        tracing::debug!(%error, "cannot record an event");
    }
}

/// Records events without holding up the caller, as client-go's event broadcaster does: a
/// bounded queue drained by a task of its own. Unlike client-go, which drops events when its
/// queue is full, a full queue makes the caller wait for room: events are not lost, and a
/// caller that outruns the API server is slowed down to its pace.
#[derive(Clone)]
pub struct EventRecorder {
    queue: tokio::sync::mpsc::Sender<Value>,
    component: String,
    clock: Clock,
}

/// Events queued before new ones are dropped (client-go's `maxQueuedEvents`).
const MAX_QUEUED_EVENTS: usize = 1000;

/// Events written at once by a recorder.
const EVENT_WRITERS: usize = 128;

impl EventRecorder {
    /// Starts a recorder for `component`, stamping events from `clock`; its task ends when the
    /// last clone is dropped.
    pub fn start(client: Client, component: &str, clock: Clock) -> EventRecorder {
        let (queue, mut events) = tokio::sync::mpsc::channel::<Value>(MAX_QUEUED_EVENTS);
        tokio::spawn(async move {
            // Each write is a task of its own, so that writes spread over the runtime's threads.
            let writers = Arc::new(tokio::sync::Semaphore::new(EVENT_WRITERS));
            while let Some(event) = events.recv().await {
                let Ok(permit) = writers.clone().acquire_owned().await else {
                    return;
                };
                let client = client.clone();
                tokio::spawn(async move {
                    post_event(&client, event).await;
                    drop(permit);
                });
            }
        });
        EventRecorder {
            queue,
            component: component.to_string(),
            clock,
        }
    }

    /// Queues an event about `involved` (an object reference), waiting while the queue is
    /// full.
    pub async fn record(&self, involved: Value, kind: &str, reason: &str, message: &str) {
        let event = event(
            involved,
            kind,
            reason,
            message,
            &self.component,
            (self.clock)(),
        );
        if self.queue.send(event).await.is_err() {
            tracing::debug!(reason, "the event recorder has stopped; event dropped");
        }
    }
}

/// Which API error codes a shell takes as done rather than failed, by kind of write (a 404 on
/// a deletion: gone already; a 409 on a creation: there already).
#[derive(Debug, Clone, Copy)]
pub struct Tolerated {
    /// On creations.
    pub create: &'static [u16],
    /// On patches and deletions of owned objects.
    pub change: &'static [u16],
    /// On the owner's status, and on deleting the owner.
    pub status: &'static [u16],
}

/// The object a plan is for: where its status is written.
pub struct Owner<'a> {
    /// Its kind's API.
    pub resource: &'a ApiResource,
    /// Its namespace, that of every write.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
}

/// Carries out a workload core's plan: each write in order, as `manager`; an API error of a
/// code in `tolerated` counts as done, any other ends it (and the reconciliation is retried).
pub async fn apply(
    client: &Client,
    owner: Owner<'_>,
    writes: Writes,
    manager: &str,
    tolerated: Tolerated,
) -> Result<(), ReconcileError> {
    for write in writes.0 {
        let (resource, codes) = match &write {
            Write::Create(resource, _) => (Some(*resource), tolerated.create),
            Write::Patch(resource, ..) | Write::Delete { resource, .. } => {
                (Some(*resource), tolerated.change)
            }
            Write::Status(_) | Write::DeleteOwner(_) => (None, tolerated.status),
        };
        let namespace = owner.namespace;
        let result = match resource {
            Some(Resource::Pod) => write_owned::<Pod>(client, namespace, write, manager).await,
            Some(Resource::Service) => {
                write_owned::<Service>(client, namespace, write, manager).await
            }
            Some(Resource::ReplicaSet) => {
                write_owned::<ReplicaSet>(client, namespace, write, manager).await
            }
            Some(Resource::StatefulSet) => {
                write_owned::<StatefulSet>(client, namespace, write, manager).await
            }
            Some(Resource::Job) => write_owned::<Job>(client, namespace, write, manager).await,
            Some(Resource::PersistentVolumeClaim) => {
                write_owned::<PersistentVolumeClaim>(client, namespace, write, manager).await
            }
            Some(Resource::EndpointSlice) => {
                write_owned::<EndpointSlice>(client, namespace, write, manager).await
            }
            Some(Resource::Endpoints) => {
                write_owned::<Endpoints>(client, namespace, write, manager).await
            }
            None => write_owner(client, &owner, write, manager).await,
        };
        match result {
            Err(ReconcileError::Api(kube::Error::Api(status))) if codes.contains(&status.code) => {}
            other => other?,
        }
    }
    Ok(())
}

/// Creates, patches or deletes an object the owner owns, through its typed API.
async fn write_owned<K>(
    client: &Client,
    namespace: &str,
    write: Write,
    manager: &str,
) -> Result<(), ReconcileError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    match write {
        Write::Create(_, object) => {
            let object: K = serde_json::from_value(object)?;
            api.create(&post_params(manager), &object).await?;
        }
        Write::Patch(_, name, patch) => {
            api.patch(&name, &patch_params(manager), &Patch::Merge(&patch))
                .await?;
        }
        Write::Delete {
            name, propagation, ..
        } => {
            api.delete(&name, &delete_params(propagation)).await?;
        }
        Write::Status(_) | Write::DeleteOwner(_) => {}
    }
    Ok(())
}

/// Delete parameters with `propagation`.
fn delete_params(propagation: Propagation) -> DeleteParams {
    DeleteParams {
        propagation_policy: match propagation {
            Propagation::Default => None,
            Propagation::Background => Some(PropagationPolicy::Background),
            Propagation::Foreground => Some(PropagationPolicy::Foreground),
        },
        ..DeleteParams::default()
    }
}

/// Merge-patches the owner's status subresource, or deletes the owner.
async fn write_owner(
    client: &Client,
    owner: &Owner<'_>,
    write: Write,
    manager: &str,
) -> Result<(), ReconcileError> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), owner.namespace, owner.resource);
    match write {
        Write::Status(status) => {
            api.patch_status(
                owner.name,
                &patch_params(manager),
                &Patch::Merge(&json!({"status": status})),
            )
            .await?;
        }
        Write::DeleteOwner(propagation) => {
            api.delete(owner.name, &delete_params(propagation)).await?;
        }
        Write::Create(..) | Write::Patch(..) | Write::Delete { .. } => {}
    }
    Ok(())
}

/// The objects of a list (as JSON) whose controller reference is the owner's UID.
pub fn owned_by<K: serde::Serialize + kube::Resource>(
    items: &[K],
    owner_uid: &str,
) -> Result<Vec<Value>, serde_json::Error> {
    let mut owned = Vec::new();
    for item in items {
        let controlled = item
            .meta()
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && r.uid == owner_uid);
        if controlled {
            owned.push(serde_json::to_value(item)?);
        }
    }
    Ok(owned)
}

/// A reflector over `api`: the store it fills and the stream that must be polled to fill
/// it (one item per touched object).
pub fn watched<K>(api: Api<K>) -> (Store<K>, futures::stream::BoxStream<'static, ()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    watched_with(api, ())
}

/// [`watched`] for a kind known at run time (`DynamicObject` with its `ApiResource`).
pub fn watched_with<K>(
    api: Api<K>,
    dynamic: K::DynamicType,
) -> (Store<K>, futures::stream::BoxStream<'static, ()>)
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    let writer = reflector::store::Writer::new(dynamic);
    let reader = writer.as_reader();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    )
    .touched_objects()
    .map(|_| ())
    .boxed();
    (reader, stream)
}

/// Everything a store holds now.
pub fn all<K>(store: &Store<K>) -> Vec<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    store.state().iter().map(|k| k.as_ref().clone()).collect()
}

/// An object's (namespace, name).
pub type ObjectKey = (String, String);

/// An object's (namespace, name) from its metadata.
pub fn object_key(meta: &kube::api::ObjectMeta) -> ObjectKey {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// Overlays a shell's own writes on its watch cache until the watch shows them (client-go's
/// MutationCache, kube-scheduler's assumed pods). Each object of `watched` still
/// `remembered` (for less than `kept`) is replaced by what `ours` makes of it; `ours` gives
/// nothing once the watch shows the write, and the memory is dropped. A remembered object
/// the watch does not have is added as `unseen` makes it (a creation not delivered yet), or
/// dropped when `unseen` gives nothing (an object since deleted).
pub fn overlay<K: kube::Resource, V>(
    remembered: &mut HashMap<ObjectKey, (V, tokio::time::Instant)>,
    watched: Vec<Arc<K>>,
    (now, kept): (tokio::time::Instant, std::time::Duration),
    ours: impl Fn(&K, &V) -> Option<Arc<K>>,
    unseen: impl Fn(&V) -> Option<Arc<K>>,
) -> Vec<Arc<K>> {
    if remembered.is_empty() {
        return watched;
    }
    let fresh = |at: &tokio::time::Instant| now.saturating_duration_since(*at) < kept;
    let mut still = HashMap::with_capacity(remembered.len());
    let mut overlaid: Vec<Arc<K>> = watched
        .into_iter()
        .map(|object| {
            let key = object_key(object.meta());
            let Some((value, at)) = remembered.remove(&key) else {
                return object;
            };
            if !fresh(&at) {
                return object;
            }
            match ours(&object, &value) {
                Some(shown) => {
                    still.insert(key, (value, at));
                    shown
                }
                None => object,
            }
        })
        .collect();
    for (key, (value, at)) in remembered.drain() {
        if let Some(added) = unseen(&value).filter(|_| fresh(&at)) {
            overlaid.push(added);
            still.insert(key, (value, at));
        }
    }
    *remembered = still;
    overlaid
}

/// How long a burst of changes may keep postponing a pass: under steady churn (a scheduler
/// binding thousands of pods) a pass still runs this often.
const LONGEST_BURST: std::time::Duration = std::time::Duration::from_millis(200);

/// The merged watch changes a pass-running controller waits on.
pub type Changes = futures::stream::SelectAll<futures::stream::BoxStream<'static, ()>>;

/// Waits until the next reconciliation pass is due: a change (after letting a burst of
/// changes settle — 20 ms without one, at most [`LONGEST_BURST`] — so a burst makes one
/// pass) or the resync tick. False once the watches have ended.
pub async fn next_pass(changes: &mut Changes, resync: &mut tokio::time::Interval) -> bool {
    next_pass_observed(changes, resync, || {}).await
}

/// [`next_pass`], calling `consumed` for each change it takes and for a resync tick (what
/// `crate::workqueue::Passes` counts as adds).
pub async fn next_pass_observed(
    changes: &mut Changes,
    resync: &mut tokio::time::Interval,
    mut consumed: impl FnMut(),
) -> bool {
    tokio::select! {
        change = changes.next() => {
            if change.is_none() {
                return false;
            }
            consumed();
            let until = tokio::time::Instant::now() + LONGEST_BURST;
            let quiet = std::time::Duration::from_millis(20);
            loop {
                let left = until.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                match tokio::time::timeout(quiet.min(left), changes.next()).await {
                    Ok(Some(())) => consumed(),
                    _ => break,
                }
            }
            true
        }
        _ = resync.tick() => {
            consumed();
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    /// A client whose API answers every request with `answer(method, path)` (a status code)
    /// and remembers each request as `METHOD path?query body`.
    fn recording(answer: fn(&str, &str) -> u16) -> (Client, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let log = log.clone();
            async move {
                use http_body_util::BodyExt;
                let (parts, body) = request.into_parts();
                let body = body.collect().await?.to_bytes();
                let path = parts.uri.path_and_query().map(|p| p.as_str().to_string());
                let path = path.unwrap_or_default();
                let code = answer(parts.method.as_str(), parts.uri.path());
                log.lock().expect("log").push(format!(
                    "{} {path} {}",
                    parts.method,
                    String::from_utf8_lossy(&body)
                ));
                let body = if code < 300 && parts.uri.path().contains("/jobs") {
                    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}})
                } else if code < 300 {
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}})
                } else {
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "code": code, "reason": "NotFound", "message": "no"})
                };
                let response = http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(bytes_of(&body))?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
            }
        });
        (Client::new(service, "default"), seen)
    }

    fn bytes_of(value: &Value) -> kube::client::Body {
        kube::client::Body::from(serde_json::to_vec(value).unwrap_or_default())
    }

    #[tokio::test]
    async fn a_plan_is_written_in_order_as_the_manager_with_tolerated_codes() {
        // Deletions of `gone` answer 404; everything else succeeds.
        let (client, seen) = recording(|method, path| {
            if method == "DELETE" && path.ends_with("/gone") {
                404
            } else {
                200
            }
        });
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "j-"},
            "spec": {"containers": []}});
        let writes = Writes(vec![
            Write::Patch(
                Resource::Pod,
                "gone".into(),
                json!({"metadata": {"finalizers": []}}),
            ),
            Write::Delete {
                resource: Resource::Pod,
                name: "gone".into(),
                propagation: Propagation::Default,
            },
            Write::Status(json!({"active": 1})),
            Write::Create(Resource::Pod, pod),
            Write::Delete {
                resource: Resource::Job,
                name: "j".into(),
                propagation: Propagation::Background,
            },
            Write::DeleteOwner(Propagation::Foreground),
        ]);
        let resource = ApiResource::erase::<Job>(&());
        let owner = Owner {
            resource: &resource,
            namespace: "ml",
            name: "j",
        };
        let tolerated = Tolerated {
            create: &[],
            change: &[404],
            status: &[],
        };
        apply(&client, owner, writes, "tester", tolerated)
            .await
            .expect("a 404 on a deletion is tolerated");
        let seen = seen.lock().expect("log").clone();
        let lines: Vec<&str> = seen
            .iter()
            .map(|l| l.split(' ').next().unwrap_or(""))
            .collect();
        assert_eq!(
            lines,
            ["PATCH", "DELETE", "PATCH", "POST", "DELETE", "DELETE"],
            "{seen:#?}"
        );
        assert!(
            seen[0].starts_with("PATCH /api/v1/namespaces/ml/pods/gone?&fieldManager=tester"),
            "{seen:#?}"
        );
        assert!(seen[2].starts_with("PATCH /apis/batch/v1/namespaces/ml/jobs/j/status?&fieldManager=tester {\"status\":{\"active\":1}}"), "{seen:#?}");
        assert!(
            seen[3].starts_with("POST /api/v1/namespaces/ml/pods?&fieldManager=tester"),
            "{seen:#?}"
        );
        assert!(
            seen[4].contains("\"propagationPolicy\":\"Background\""),
            "{seen:#?}"
        );
        assert!(!seen[1].contains("propagationPolicy"), "{seen:#?}");
        assert!(
            seen[5].starts_with("DELETE /apis/batch/v1/namespaces/ml/jobs/j?")
                && seen[5].contains("\"propagationPolicy\":\"Foreground\""),
            "the owner itself, in the foreground: {seen:#?}"
        );

        // An untolerated code ends the plan there.
        let (client, seen) = recording(|_, _| 409);
        let writes = Writes(vec![
            Write::Create(
                Resource::Service,
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}),
            ),
            Write::Status(json!({})),
        ]);
        let owner = Owner {
            resource: &resource,
            namespace: "ml",
            name: "j",
        };
        let failed = apply(&client, owner, writes, "tester", tolerated).await;
        assert!(matches!(failed, Err(ReconcileError::Api(kube::Error::Api(s))) if s.code == 409));
        assert_eq!(seen.lock().expect("log").len(), 1);
    }

    #[tokio::test]
    async fn steady_changes_cannot_postpone_a_pass_forever() {
        // A change every 5 ms, without end: the burst never settles for 20 ms, yet a pass is
        // due once the burst has lasted its longest.
        let ticking = futures::stream::unfold((), |()| async {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            Some(((), ()))
        })
        .boxed();
        let mut changes = futures::stream::select_all([ticking]);
        let mut resync = tokio::time::interval(std::time::Duration::from_secs(3600));
        resync.tick().await;
        let due = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            next_pass(&mut changes, &mut resync),
        )
        .await;
        assert_eq!(due.ok(), Some(true));
    }
}
