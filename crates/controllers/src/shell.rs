//! What every controller shell shares: the error of one reconciliation, the retry policy,
//! write parameters that name the controller as field manager, and recording an event.
//!
//! Knows nothing about any kind; the shells bring their own context and reconcilers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tessera_model::json::Pointer as _;

use futures::{FutureExt, StreamExt, TryStreamExt};
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
use tessera_model::event_correlation::{Correlated, Correlator};
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

/// The objects a reflector's store holds, as JSON (what the cores read).
pub fn store_values<K>(store: &Store<K>) -> Vec<Value>
where
    K: kube::Resource + Clone + serde::Serialize + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store
        .state()
        .iter()
        .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
        .collect()
}

/// Runs `work`, a long stretch of computation inside an async task (a pass over thousands of
/// objects), telling a multi-threaded runtime that this worker is busy
/// ([`tokio::task::block_in_place`]): the tasks queued on it — the API server's requests,
/// the watches that feed other controllers, the task it just woke — move to another worker
/// instead of waiting for `work` to end. On a current-thread runtime (unit tests) `work`
/// simply runs.
pub fn cpu_bound<R>(work: impl FnOnce() -> R) -> R {
    let multi_threaded = tokio::runtime::Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_threaded {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
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
    if let Err(error) = create_event(client, &event).await {
        tracing::debug!(%error, "cannot record an event");
    }
}

/// The events of `namespace`.
fn events_request(namespace: &str) -> kube::core::Request {
    kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/events"))
}

/// Creates `event`, unread; a name another recorder took already (a 409) is generated by the
/// server instead.
async fn create_event(client: &Client, event: &Value) -> Result<(), kube::Error> {
    let namespace = event
        .at("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let create = |event: &Value| {
        events_request(namespace).create(
            &PostParams::default(),
            serde_json::to_vec(event).unwrap_or_default(),
        )
    };
    match send_unread(client, create(event)).await {
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let mut renamed = event.clone();
            let object = event
                .at("/involvedObject/name")
                .and_then(Value::as_str)
                .unwrap_or("event");
            renamed["metadata"] =
                json!({"generateName": format!("{object}."), "namespace": namespace});
            send_unread(client, create(&renamed)).await
        }
        other => other,
    }
}

/// Writes what the correlator decided: a new event, or a repeat counted up on the recorded
/// one (created afresh should it be gone, as client-go does).
async fn write_correlated(client: &Client, correlated: Correlated) {
    let written = match correlated {
        Correlated::Create(event) => create_event(client, &event).await,
        Correlated::Patch {
            namespace,
            name,
            patch,
            event,
        } => {
            let request = events_request(&namespace).patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            );
            match send_unread(client, request).await {
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    create_event(client, &event).await
                }
                other => other,
            }
        }
        Correlated::Skip => Ok(()),
    };
    if let Err(error) = written {
        tracing::debug!(%error, "cannot record an event");
    }
}

/// Records events without holding up the caller, as client-go's event broadcaster does: a
/// bounded queue drained by a task of its own; client-go's correlator
/// ([`tessera_model::event_correlation`]) decides first, so similar events are combined,
/// repeats counted up and a flood from one object dropped past the spam filter's rate.
/// Unlike client-go, which drops events when its queue is full, a full queue makes the
/// caller wait for room: events are not lost, and a caller that outruns the API server is
/// slowed down to its pace.
#[derive(Clone)]
pub struct EventRecorder {
    queue: tokio::sync::mpsc::Sender<Correlated>,
    component: String,
    clock: Clock,
    /// Repeats are counted up on the event recorded first.
    correlator: Arc<std::sync::Mutex<Correlator>>,
}

/// Events queued before a caller waits for room (client-go's `maxQueuedEvents`, past which it
/// drops them).
const MAX_QUEUED_EVENTS: usize = 1000;

/// Events written at once by a recorder: as many as its queue holds. client-go writes each
/// event in a goroutine of its own, without bound, so its queue drains as fast as events
/// come; with fewer writers (there were 128) a scheduler binding thousands of pods a
/// second filled the queue and waited on its events rather than binding.
const EVENT_WRITERS: usize = MAX_QUEUED_EVENTS;

impl EventRecorder {
    /// Starts a recorder for `component`, stamping events from `clock`; its task ends when the
    /// last clone is dropped.
    pub fn start(client: Client, component: &str, clock: Clock) -> EventRecorder {
        let (queue, mut events) = tokio::sync::mpsc::channel::<Correlated>(MAX_QUEUED_EVENTS);
        tokio::spawn(async move {
            // Each write is a task of its own, so that writes spread over the runtime's threads.
            let writers = Arc::new(tokio::sync::Semaphore::new(EVENT_WRITERS));
            while let Some(event) = events.recv().await {
                let Ok(permit) = writers.clone().acquire_owned().await else {
                    return;
                };
                let client = client.clone();
                tokio::spawn(async move {
                    // Boxed: the task's future stays small (see the scheduler's binds).
                    Box::pin(write_correlated(&client, event)).await;
                    drop(permit);
                });
            }
        });
        EventRecorder {
            queue,
            component: component.to_string(),
            clock,
            correlator: Arc::default(),
        }
    }

    /// Queues an event about `involved` (an object reference), waiting while the queue is
    /// full.
    pub async fn record(&self, involved: Value, kind: &str, reason: &str, message: &str) {
        let now = (self.clock)();
        let event = event(involved, kind, reason, message, &self.component, now);
        let correlated = self
            .correlator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(event, now);
        if correlated == Correlated::Skip {
            // client-go's spam filter: too many events from this source about the object.
            tracing::debug!(reason, "event over the spam filter's rate; dropped");
            return;
        }
        if self.queue.send(correlated).await.is_err() {
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

/// What a reflector can watch: a kind kube-rs decodes from the API server's answers and
/// shares between tasks.
pub trait Watchable:
    kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static
{
}

impl<K> Watchable for K where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// A reflector over `api`: the store it fills and the stream that must be polled to fill
/// it (one item per touched object).
pub fn watched<K>(api: Api<K>) -> (Store<K>, futures::stream::BoxStream<'static, ()>)
where
    K: Watchable + kube::Resource<DynamicType = ()>,
{
    watched_with(api, ())
}

/// [`watched`] for a kind known at run time (`DynamicObject` with its `ApiResource`).
pub fn watched_with<K>(
    api: Api<K>,
    dynamic: K::DynamicType,
) -> (Store<K>, futures::stream::BoxStream<'static, ()>)
where
    K: Watchable,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    reflected(
        reflector::store::Writer::new(dynamic),
        watcher(api, watcher::Config::default()).default_backoff(),
    )
}

/// [`watched_with`] whose stream leaves out the echoes of `own` writes
/// ([`crate::echoes`]): the store still shows them. Every change the store takes, echoes
/// included, is noted in `log`.
pub fn watched_except<K>(
    api: Api<K>,
    dynamic: K::DynamicType,
    own: &crate::echoes::OwnWrites,
    log: &crate::changelog::Changelog,
) -> (Store<K>, futures::stream::BoxStream<'static, ()>)
where
    K: Watchable,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    reflected_except(
        reflector::store::Writer::new(dynamic),
        watcher(api, watcher::Config::default()).default_backoff(),
        own,
        log,
    )
}

/// The store `writer` fills from a watcher's `events` and the stream that must be polled to
/// fill it (one item per touched object).
pub fn reflected<K>(
    writer: reflector::store::Writer<K>,
    events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
) -> (Store<K>, futures::stream::BoxStream<'static, ()>)
where
    K: kube::Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    let reader = writer.as_reader();
    let stream = reflector::reflector(writer, events)
        .touched_objects()
        .map(|_| ())
        .boxed();
    (reader, stream)
}

/// [`reflected`] whose stream leaves out the echoes of `own` writes (the other watches pay
/// nothing for it), noting every change the store takes in `log` (the reflector has applied
/// an event to the store when it passes it on).
fn reflected_except<K>(
    writer: reflector::store::Writer<K>,
    events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    own: &crate::echoes::OwnWrites,
    log: &crate::changelog::Changelog,
) -> (Store<K>, futures::stream::BoxStream<'static, ()>)
where
    K: kube::Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    let reader = writer.as_reader();
    let woken = own.woken();
    let own = own.clone();
    let log = log.clone();
    let stream = reflector::reflector(writer, events)
        .inspect_ok(move |event| log.note(event))
        .touched_objects()
        .filter_map(move |touched| {
            let echo = touched
                .as_ref()
                .is_ok_and(|object| own.is_echo(object.meta()));
            std::future::ready((!echo).then_some(Some(())))
        });
    // The held changes found not to be echoes join the watch's, until the watch ends.
    let ended = futures::stream::once(std::future::ready(None));
    let stream = futures::stream::select(stream.chain(ended), woken.map(Some))
        .take_while(|change| std::future::ready(change.is_some()))
        .map(|_| ())
        .boxed();
    (reader, stream)
}

/// Whether a reflector's store has been listed once (its stream polled meanwhile); never
/// waits.
pub fn listed<K>(store: &Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store
        .wait_until_ready()
        .now_or_never()
        .is_some_and(|r| r.is_ok())
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
    // The names remembered: most watched objects are passed by on their name, unkeyed, and
    // hashed by foldhash (SipHash over every watched name took half of this function).
    let names: std::collections::HashSet<String, foldhash::fast::RandomState> =
        remembered.keys().map(|(_, name)| name.clone()).collect();
    let mut overlaid: Vec<Arc<K>> = watched
        .into_iter()
        .map(|object| {
            let name = object.meta().name.as_deref().unwrap_or_default();
            if !names.contains(name) {
                return object;
            }
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

pub use crate::pacing::{Changes, next_pass, next_pass_observed};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    #[test]
    fn cpu_bound_work_lets_the_task_it_woke_run_on_a_single_worker() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let answered = runtime.block_on(async {
            tokio::spawn(async {
                let (sender, receiver) = std::sync::mpsc::channel();
                // Spawned from the worker: it waits in that worker's own slot, which only a
                // worker that is not blocked runs.
                tokio::spawn(async move {
                    let _ = sender.send(());
                });
                cpu_bound(|| {
                    receiver
                        .recv_timeout(std::time::Duration::from_secs(10))
                        .is_ok()
                })
            })
            .await
            .expect("the task")
        });
        assert!(answered, "the woken task ran while the work blocked");
    }

    #[tokio::test]
    async fn cpu_bound_work_runs_in_place_on_a_current_thread_runtime() {
        let thread = std::thread::current().id();
        assert_eq!(cpu_bound(|| std::thread::current().id()), thread);
    }

    /// A client whose API answers every request with `answer(method, path)` (a status code)
    /// and remembers each request as `METHOD path?query body`.
    pub(crate) fn recording(answer: fn(&str, &str) -> u16) -> (Client, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let open = Arc::new(tokio::sync::Semaphore::new(
            tokio::sync::Semaphore::MAX_PERMITS,
        ));
        (recording_into(answer, seen.clone(), open), seen)
    }

    /// A client like [`recording`]'s that remembers each request in `log` as it arrives and
    /// answers it once `gate` has a permit for it.
    pub(crate) fn recording_into(
        answer: fn(&str, &str) -> u16,
        log: Arc<Mutex<Vec<String>>>,
        gate: Arc<tokio::sync::Semaphore>,
    ) -> Client {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (log, gate) = (log.clone(), gate.clone());
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
                let _answered = gate.acquire().await?;
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
        Client::new(service, "default")
    }

    fn bytes_of(value: &Value) -> kube::client::Body {
        kube::client::Body::from(serde_json::to_vec(value).unwrap_or_default())
    }

    #[tokio::test]
    async fn a_flood_of_events_about_one_object_is_cut_at_the_spam_filters_burst() {
        let (client, seen) = recording(|_, _| 201);
        let at = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_323_045);
        let recorder =
            EventRecorder::start(client, "test-controller", tessera_model::clock::fixed(at));
        let pod = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": name,
                   "uid": format!("uid-{name}")})
        };
        // Distinct reasons: neither counted up nor combined; only the spam filter holds them.
        for i in 0..100 {
            recorder
                .record(pod("flood"), "Warning", &format!("Reason{i}"), "m")
                .await;
        }
        recorder.record(pod("calm"), "Normal", "Started", "m").await;
        drop(recorder);
        let about = |name: &str| {
            let wanted = format!("\"name\":\"{name}\"");
            seen.lock()
                .expect("log")
                .iter()
                .filter(|r| {
                    r.starts_with("POST /api/v1/namespaces/ns/events") && r.contains(&wanted)
                })
                .count()
        };
        // The writes run on tasks of their own: wait for them (the recorder is dropped, so
        // nothing more is queued).
        for _ in 0..500 {
            if about("flood") + about("calm") >= 26 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            about("flood"),
            tessera_model::event_correlation::SPAM_BURST as usize
        );
        assert_eq!(about("calm"), 1, "another object has a bucket of its own");
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
}
