//! A pod watch that leaves out `metadata.managedFields`, as kube-scheduler's informers do
//! (client-go's `TransformStripManagedFields`): the scheduler never reads them, and decoding
//! each pod's FieldsV1 tree was a good part of what a pod event cost it.
//!
//! The fields are skipped while the event is decoded, not removed after: [`TrimmedPod`]
//! decodes a Pod's JSON with every field but `managedFields`, which the decoder passes over
//! unbuilt. The store it fills holds ordinary [`Pod`]s.

use std::borrow::Cow;
use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
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

/// What [`crate::shell::watched`] gives for `Api::<Pod>::all(client)`, the pods decoded
/// without their managed fields.
pub fn watched_trimmed(
    client: kube::Client,
) -> (Store<Pod>, futures::stream::BoxStream<'static, ()>) {
    let events = watcher(Api::<TrimmedPod>::all(client), watcher::Config::default())
        .default_backoff()
        .map(|event| event.map(untrimmed));
    crate::shell::reflected(reflector::store::Writer::default(), events)
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
}
