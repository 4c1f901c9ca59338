//! A pod watch that leaves out `metadata.managedFields`, as kube-scheduler's informers do
//! (client-go's `TransformStripManagedFields`): the scheduler never reads them, and decoding
//! each pod's FieldsV1 tree was a good part of what a pod event cost it.
//!
//! The fields are skipped while the event is decoded, not removed after: [`TrimmedPod`]
//! decodes a Pod's JSON with every field but `managedFields`, which the decoder passes over
//! unbuilt. The store it fills ([`PodStore`]) holds ordinary [`Pod`]s, moved in rather than
//! cloned.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use serde::Deserialize;

/// A Pod decoded without its managed fields.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "PodFields")]
pub struct TrimmedPod(pub Pod);

/// The Pod's fields as the decoder reads them.
#[derive(Deserialize)]
struct PodFields {
    #[serde(default)]
    metadata: MetaFields,
    spec: Option<PodSpec>,
    status: Option<PodStatus>,
}

/// ObjectMeta's fields but `managedFields` (an unknown field to serde, skipped unbuilt).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaFields {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<PodFields> for TrimmedPod {
    fn from(fields: PodFields) -> TrimmedPod {
        let meta = fields.metadata;
        TrimmedPod(Pod {
            metadata: ObjectMeta {
                annotations: meta.annotations,
                creation_timestamp: meta.creation_timestamp,
                deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
                deletion_timestamp: meta.deletion_timestamp,
                finalizers: meta.finalizers,
                generate_name: meta.generate_name,
                generation: meta.generation,
                labels: meta.labels,
                managed_fields: None,
                name: meta.name,
                namespace: meta.namespace,
                owner_references: meta.owner_references,
                resource_version: meta.resource_version,
                self_link: meta.self_link,
                uid: meta.uid,
            },
            spec: fields.spec,
            status: fields.status,
        })
    }
}

impl kube::Resource for TrimmedPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(dynamic: &()) -> Cow<'_, str> {
        Pod::kind(dynamic)
    }

    fn group(dynamic: &()) -> Cow<'_, str> {
        Pod::group(dynamic)
    }

    fn version(dynamic: &()) -> Cow<'_, str> {
        Pod::version(dynamic)
    }

    fn plural(dynamic: &()) -> Cow<'_, str> {
        Pod::plural(dynamic)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// The scheduler's pods, as kube's reflector store holds them but filled by value: kube's
/// `Writer` clones every object it stores (it is handed each event by reference), and those
/// clones of whole pods were a good part of what the scheduler's watch cost.
#[derive(Clone)]
pub struct PodStore {
    pods: Arc<RwLock<HashMap<PodKey, Arc<Pod>>>>,
    listed: Arc<tokio::sync::watch::Sender<bool>>,
}

/// A pod's (namespace, name).
type PodKey = (String, String);

fn key(pod: &Pod) -> PodKey {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

impl PodStore {
    fn new() -> PodStore {
        PodStore {
            pods: Arc::default(),
            listed: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// Every pod held now.
    pub fn state(&self) -> Vec<Arc<Pod>> {
        let pods = self.pods.read().unwrap_or_else(|p| p.into_inner());
        pods.values().cloned().collect()
    }

    /// Waits until the pods have been listed once (kube's `Store::wait_until_ready`).
    pub async fn wait_until_ready(&self) -> Result<(), tokio::sync::watch::error::RecvError> {
        let mut listed = self.listed.subscribe();
        listed.wait_for(|listed| *listed).await.map(drop)
    }

    /// Takes in one watch event as kube's `Writer::apply_watcher_event` does: a relist fills
    /// a buffer (`listing`) that replaces the pods at its end.
    fn apply(&self, listing: &mut Option<HashMap<PodKey, Arc<Pod>>>, event: watcher::Event<Pod>) {
        let pods = || self.pods.write().unwrap_or_else(|p| p.into_inner());
        match event {
            watcher::Event::Apply(pod) => {
                pods().insert(key(&pod), Arc::new(pod));
            }
            watcher::Event::Delete(pod) => {
                pods().remove(&key(&pod));
            }
            watcher::Event::Init => *listing = Some(HashMap::new()),
            watcher::Event::InitApply(pod) => {
                listing
                    .get_or_insert_default()
                    .insert(key(&pod), Arc::new(pod));
            }
            watcher::Event::InitDone => {
                *pods() = listing.take().unwrap_or_default();
                self.listed.send_replace(true);
            }
        }
    }
}

/// What [`crate::shell::watched`] gives for `Api::<Pod>::all(client)`, the pods decoded
/// without their managed fields and stored without a copy.
pub fn watched_trimmed(
    client: kube::Client,
) -> (PodStore, futures::stream::BoxStream<'static, ()>) {
    let store = PodStore::new();
    let writer = store.clone();
    let mut listing = None;
    let events = watcher(Api::<TrimmedPod>::all(client), watcher::Config::default())
        .default_backoff()
        .map(move |event| {
            // An error is retried by the backoff; it changes nothing here.
            if let Ok(event) = event {
                writer.apply(&mut listing, untrimmed(event));
            }
        })
        .boxed();
    (store, events)
}

fn untrimmed(event: watcher::Event<TrimmedPod>) -> watcher::Event<Pod> {
    match event {
        watcher::Event::Apply(pod) => watcher::Event::Apply(pod.0),
        watcher::Event::Delete(pod) => watcher::Event::Delete(pod.0),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(pod) => watcher::Event::InitApply(pod.0),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use serde_json::json;

    #[test]
    fn a_pod_decodes_whole_but_for_its_managed_fields() {
        let stored = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "team-a", "uid": "u1", "resourceVersion": "7",
                "generateName": "p-", "generation": 2, "selfLink": "/x",
                "creationTimestamp": "2026-12-04T10:00:00Z",
                "deletionTimestamp": "2026-12-04T11:00:00Z", "deletionGracePeriodSeconds": 30,
                "labels": {"app": "a"}, "annotations": {"note": "n"}, "finalizers": ["f"],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                     "uid": "ju", "controller": true}],
                "managedFields": [{"manager": "kubectl", "operation": "Update",
                                   "apiVersion": "v1", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:spec": {"f:containers": {}}}}]
            },
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n1",
                     "priority": 5},
            "status": {"phase": "Pending"}
        });
        let trimmed: TrimmedPod = serde_json::from_value(stored.clone()).unwrap();
        let mut whole: Pod = serde_json::from_value(stored).unwrap();
        assert!(whole.metadata.managed_fields.is_some());
        whole.metadata.managed_fields = None;
        assert_eq!(trimmed.0, whole, "every other field kept");
        // A pod written with no metadata at all still decodes.
        let bare: TrimmedPod = serde_json::from_value(json!({"spec": null})).unwrap();
        assert_eq!(bare.0.metadata, ObjectMeta::default());
    }

    fn pod(name: &str, version: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("ns".into());
        pod.metadata.name = Some(name.into());
        pod.metadata.resource_version = Some(version.into());
        pod
    }

    fn held(store: &PodStore) -> Vec<(String, String)> {
        let mut held: Vec<(String, String)> = store
            .state()
            .iter()
            .map(|p| {
                let meta = &p.metadata;
                (
                    meta.name.clone().unwrap_or_default(),
                    meta.resource_version.clone().unwrap_or_default(),
                )
            })
            .collect();
        held.sort();
        held
    }

    #[tokio::test]
    async fn the_store_follows_the_watch_as_kubes_reflector_does() {
        let store = PodStore::new();
        let mut listing = None;
        use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
        let listed = |store: &PodStore| store.wait_until_ready().now_or_never().is_some();
        store.apply(&mut listing, Init);
        store.apply(&mut listing, InitApply(pod("a", "1")));
        store.apply(&mut listing, InitApply(pod("b", "1")));
        assert!(
            held(&store).is_empty(),
            "a list is held back until it is whole"
        );
        assert!(!listed(&store));
        store.apply(&mut listing, InitDone);
        assert!(listed(&store));
        store.apply(&mut listing, Apply(pod("a", "2")));
        store.apply(&mut listing, Apply(pod("c", "1")));
        store.apply(&mut listing, Delete(pod("b", "1")));
        let s = |n: &str, v: &str| (n.to_string(), v.to_string());
        assert_eq!(held(&store), [s("a", "2"), s("c", "1")]);
        // A relist replaces everything at its end.
        store.apply(&mut listing, Init);
        store.apply(&mut listing, InitApply(pod("d", "5")));
        assert_eq!(held(&store), [s("a", "2"), s("c", "1")]);
        store.apply(&mut listing, InitDone);
        assert_eq!(held(&store), [s("d", "5")]);
    }
}
