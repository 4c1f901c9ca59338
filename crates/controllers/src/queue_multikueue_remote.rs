//! MultiKueue's view of one connected worker: watch caches of the Workloads, Jobs and JobSets
//! this manager created there (label `kueue.x-k8s.io/multikueue-origin=<origin>`, as Kueue's
//! remote watchers select them; JobSets once the worker has their CRD), filled by a task of
//! their own that marks what each change touched and wakes MultiKueue's loop, marks the
//! worker troubled when a watch fails and lets the watcher start again with backoff. The
//! task ends when the caches are dropped.
//!
//! Knows nothing of what MultiKueue decides, nor of connecting and probing a worker
//! ([`crate::queue_multikueue`] owns both). Objects another origin created on the worker are
//! not seen: creating over one fails with a conflict, which leaves it alone as Kueue does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use tessera_queue::api::multikueue::{ORIGIN_LABEL, OwnerKind};

use crate::custom::{JOBSET, ReflectedEvents, reflected_once_installed};
use crate::queue::kueue_resource;
use crate::queue_multikueue_touched::Touched;

/// How many wake-ups may wait for MultiKueue's loop; more would not make it run sooner.
const PENDING_WAKES: usize = 64;

/// Wakes MultiKueue's loop (a pass follows).
#[derive(Clone)]
pub(crate) struct Wake(tokio::sync::mpsc::Sender<()>);

impl Wake {
    /// A wake-up and the stream the loop polls for it.
    pub(crate) fn channel() -> (Wake, futures::stream::BoxStream<'static, ()>) {
        let (sender, receiver) = tokio::sync::mpsc::channel(PENDING_WAKES);
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|()| ((), receiver))
        })
        .boxed();
        (Wake(sender), stream)
    }

    pub(crate) fn wake(&self) {
        // A full queue already holds a wake-up.
        let _ = self.0.try_send(());
    }
}

/// What a worker's caches show of one Workload.
pub(crate) enum Remote {
    /// The caches have not listed everything yet.
    Syncing,
    /// The worker's Workload of that name and its owner's copy, where they exist.
    Shown(Option<Arc<DynamicObject>>, Option<Arc<DynamicObject>>),
}

/// One kind's watch cache.
struct Cache {
    store: Store<DynamicObject>,
    resource: ApiResource,
}

impl Cache {
    /// The object `namespace/name` (`Some(None)` when absent), or `None` while the cache has
    /// not listed everything yet.
    fn shown(&self, namespace: &str, name: &str) -> Option<Option<Arc<DynamicObject>>> {
        self.store.wait_until_ready().now_or_never()?.ok()?;
        let key = ObjectRef::new_with(name, self.resource.clone()).within(namespace);
        Some(self.store.get(&key))
    }
}

/// The watch caches of one worker and the task that fills them.
pub(crate) struct RemoteCaches {
    workloads: Cache,
    jobs: Cache,
    jobsets: Cache,
    troubled: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RemoteCaches {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The resource of a MultiKueue owner kind.
pub(crate) fn owner_resource(kind: OwnerKind) -> ApiResource {
    match kind {
        OwnerKind::Job => ApiResource::erase::<Job>(&()),
        OwnerKind::JobSet => jobset_resource(),
    }
}

fn jobset_resource() -> ApiResource {
    let (group, version, kind, _) = JOBSET;
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        "jobsets",
    )
}

/// A reflector over `resource`'s objects that `config` selects, on every namespace.
fn reflected(
    client: &Client,
    resource: ApiResource,
    config: watcher::Config,
) -> (Cache, ReflectedEvents) {
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let events = reflector(writer, watcher(api, config).default_backoff()).boxed();
    (Cache { store, resource }, events)
}

impl RemoteCaches {
    /// Starts watching the worker behind `client` for the objects of `origin`; every change
    /// is marked in `touched` and wakes `wake`.
    pub(crate) fn start(
        client: &Client,
        origin: &str,
        (wake, touched): (Wake, Touched),
    ) -> RemoteCaches {
        let config = || watcher::Config::default().labels(&format!("{ORIGIN_LABEL}={origin}"));
        let (workloads, workload_events) =
            reflected(client, kueue_resource("Workload", "workloads"), config());
        let (jobs, job_events) = reflected(client, owner_resource(OwnerKind::Job), config());
        let resource = jobset_resource();
        let (store, jobset_events) =
            reflected_once_installed(client, &resource, JOBSET.3, config());
        let jobsets = Cache { store, resource };
        let troubled = Arc::new(AtomicBool::new(false));
        let flag = troubled.clone();
        let mut events = futures::stream::select_all([workload_events, job_events, jobset_events]);
        let task = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                touched.event(&event);
                if let Err(error) = event {
                    tracing::debug!(%error, "multikueue: a worker's watch failed; it starts again");
                    flag.store(true, Ordering::Relaxed);
                }
                wake.wake();
            }
        });
        RemoteCaches {
            workloads,
            jobs,
            jobsets,
            troubled,
            task,
        }
    }

    /// Whether a watch failed since the last call.
    pub(crate) fn take_trouble(&self) -> bool {
        self.troubled.swap(false, Ordering::Relaxed)
    }

    /// The worker's Workload `name` in `namespace` and its owner's copy (`kind`, name), as the
    /// caches show them once the caches consulted have listed everything.
    pub(crate) fn read(
        &self,
        namespace: &str,
        name: &str,
        owner: Option<&(OwnerKind, String)>,
    ) -> Remote {
        let workload = match self.workloads.shown(namespace, name) {
            Some(workload) => workload,
            None => return Remote::Syncing,
        };
        let owner = match owner {
            Some((kind, owner_name)) => {
                let cache = match kind {
                    OwnerKind::Job => &self.jobs,
                    OwnerKind::JobSet => &self.jobsets,
                };
                match cache.shown(namespace, owner_name) {
                    Some(owner) => owner,
                    None => return Remote::Syncing,
                }
            }
            None => None,
        };
        Remote::Shown(workload, owner)
    }
}
