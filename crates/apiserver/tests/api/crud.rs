//! Create, read, update, delete and metadata semantics through kube-rs.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{DeleteParams, PostParams, PropagationPolicy};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::{eventually, start};

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test]
async fn create_sets_server_metadata_and_rejects_duplicates() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    let created = api
        .create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.namespace().as_deref(), Some("default"));
    let error = api
        .create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("expected an API error")
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    assert_eq!(status.message, "configmaps \"a\" already exists");
}

#[tokio::test]
async fn generate_name_makes_unique_names() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    let template: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "job-"}})).unwrap();
    let a = api.create(&PostParams::default(), &template).await.unwrap();
    let b = api.create(&PostParams::default(), &template).await.unwrap();
    assert!(a.name_any().starts_with("job-") && a.name_any().len() == 9);
    assert_ne!(a.name_any(), b.name_any());
}

#[tokio::test]
async fn stale_updates_conflict_and_generation_tracks_spec() {
    let server = start();
    let api: Api<Pod> = Api::default_namespaced(server.client.clone());
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "a"}]}}))
    .unwrap();
    let created = api.create(&PostParams::default(), &pod).await.unwrap();
    let mut labelled = created.clone();
    labelled.labels_mut().insert("x".into(), "y".into());
    let updated = api
        .replace("p", &PostParams::default(), &labelled)
        .await
        .unwrap();
    assert_eq!(
        updated.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );
    let mut image = updated.clone();
    image.spec.as_mut().unwrap().containers[0].image = Some("b".into());
    let bumped = api
        .replace("p", &PostParams::default(), &image)
        .await
        .unwrap();
    assert_eq!(bumped.metadata.generation, Some(2));
    // `labelled` carries a stale resourceVersion now.
    let error = api
        .replace("p", &PostParams::default(), &labelled)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!()
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    let held: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &held).await.unwrap();
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let terminating = api.get("held").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let patch = json!([{"op": "test", "path": "/metadata/finalizers", "value": ["example.com/hold"]},
                       {"op": "remove", "path": "/metadata/finalizers"}]);
    let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
    api.patch(
        "held",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::<()>::Json(patch),
    )
    .await
    .unwrap();
    assert!(api.get_opt("held").await.unwrap().is_none());
}

fn owned(name: &str, owner: &ConfigMap) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner.name_any(),
        "uid": owner.metadata.uid, "blockOwnerDeletion": true}]}}))
    .unwrap()
}

#[tokio::test]
async fn propagation_policies_treat_dependents_as_upstream() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    for (policy, dependent_survives) in [
        (PropagationPolicy::Background, false),
        (PropagationPolicy::Foreground, false),
        (PropagationPolicy::Orphan, true),
    ] {
        let owner = api
            .create(&PostParams::default(), &config_map("owner"))
            .await
            .unwrap();
        api.create(&PostParams::default(), &owned("dependent", &owner))
            .await
            .unwrap();
        let params = DeleteParams {
            propagation_policy: Some(policy.clone()),
            ..DeleteParams::default()
        };
        api.delete("owner", &params).await.unwrap();
        let api2 = api.clone();
        assert!(
            eventually(|| {
                let api = api2.clone();
                async move { api.get_opt("owner").await.unwrap().is_none() }
            })
            .await,
            "{policy:?}: owner should go"
        );
        let api3 = api.clone();
        let settled = eventually(|| {
            let api = api3.clone();
            async move {
                match api.get_opt("dependent").await.unwrap() {
                    None => !dependent_survives,
                    Some(d) => {
                        dependent_survives
                            && d.metadata
                                .owner_references
                                .as_ref()
                                .is_none_or(Vec::is_empty)
                    }
                }
            }
        })
        .await;
        assert!(
            settled,
            "{policy:?}: dependent should {}",
            if dependent_survives {
                "be orphaned"
            } else {
                "be deleted"
            }
        );
        let _ = api.delete("dependent", &DeleteParams::default()).await;
        let api4 = api.clone();
        assert!(
            eventually(|| {
                let api = api4.clone();
                async move { api.get_opt("dependent").await.unwrap().is_none() }
            })
            .await
        );
    }
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_contents() {
    let server = start();
    let namespaces: Api<Namespace> = Api::all(server.client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client.clone(), "team-a");
    api.create(&PostParams::default(), &config_map("one"))
        .await
        .unwrap();
    namespaces
        .delete("team-a", &DeleteParams::default())
        .await
        .unwrap();
    // Creating content in a terminating namespace is forbidden (or the namespace is gone).
    let error = api
        .create(&PostParams::default(), &config_map("two"))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!()
    };
    assert!(status.code == 403 || status.code == 404, "{status:?}");
    let gone = eventually(|| {
        let namespaces = namespaces.clone();
        async move { namespaces.get_opt("team-a").await.unwrap().is_none() }
    })
    .await;
    assert!(gone, "the namespace should be finalized once empty");
    assert!(
        api.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn dry_run_persists_nothing() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = api.create(&params, &config_map("dry")).await.unwrap();
    assert_eq!(answered.name_any(), "dry");
    assert!(api.get_opt("dry").await.unwrap().is_none());
    api.create(&PostParams::default(), &config_map("real"))
        .await
        .unwrap();
    let dp = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    api.delete("real", &dp).await.unwrap();
    assert!(api.get_opt("real").await.unwrap().is_some());
}

#[tokio::test]
async fn pods_on_existing_nodes_terminate_gracefully() {
    let server = start();
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(server.client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap(),
        )
        .await
        .unwrap();
    let api: Api<Pod> = Api::default_namespaced(server.client.clone());
    for (name, node) in [("on-node", "n1"), ("on-missing-node", "nope")] {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "a"}]}}))
        .unwrap();
        api.create(&PostParams::default(), &pod).await.unwrap();
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let terminating = api.get("on-node").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    assert!(
        api.get_opt("on-missing-node").await.unwrap().is_none(),
        "no kubelet to wait for"
    );
    api.delete(
        "on-node",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    assert!(api.get_opt("on-node").await.unwrap().is_none());
}

#[tokio::test]
async fn events_recorded_through_events_k8s_io_are_core_events() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event;
    let server = start();
    let events: Api<Event> = Api::default_namespaced(server.client.clone());
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "pulled.1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web", "uid": "u-1"},
        "reason": "Pulled", "note": "image present", "type": "Normal", "action": "Pull",
        "reportingController": "example.com/agent", "reportingInstance": "agent-1"
    }))
    .unwrap();
    events.create(&PostParams::default(), &event).await.unwrap();
    // kubectl describe reads core events with involvedObject field selectors.
    let core: Api<CoreEvent> = Api::default_namespaced(server.client.clone());
    let listed = core
        .list(
            &kube::api::ListParams::default()
                .fields("involvedObject.name=web,involvedObject.uid=u-1"),
        )
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].message.as_deref(), Some("image present"));
    assert_eq!(
        listed.items[0].reporting_component.as_deref(),
        Some("example.com/agent")
    );
    // And the events.k8s.io view reads back what was written.
    let read = events.get("pulled.1").await.unwrap();
    assert_eq!(read.note.as_deref(), Some("image present"));
    assert_eq!(read.regarding.unwrap().name.as_deref(), Some("web"));
    let merged = events
        .patch(
            "pulled.1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"note": "updated"})),
        )
        .await
        .unwrap();
    assert_eq!(merged.note.as_deref(), Some("updated"));
    assert_eq!(
        core.get("pulled.1").await.unwrap().message.as_deref(),
        Some("updated")
    );
    let view = events
        .list(&kube::api::ListParams::default().fields("regarding.name=web"))
        .await
        .unwrap();
    assert_eq!(view.items.len(), 1);
}

#[tokio::test]
async fn delete_collection_removes_only_selected_objects() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    for (name, team) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": team}}}))
                .unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    api.delete_collection(
        &DeleteParams::default(),
        &kube::api::ListParams::default().labels("team=x"),
    )
    .await
    .unwrap();
    let left: Vec<String> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(left, ["c"]);
}

#[tokio::test]
async fn every_answer_carries_the_resource_version_that_was_stored() {
    // The revision of a change is given when it is queued, after the object was encoded:
    // what the writer is told, what a read returns and what the store holds must agree.
    let server = start();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::default_namespaced(server.client.clone());
    let deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    let created = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let version = created.resource_version().expect("a resourceVersion");
    let read = deployments.get("web").await.unwrap();
    assert_eq!(read.resource_version().as_deref(), Some(version.as_str()));
    // Only the object's own metadata carries it, not the pod template's.
    let template = read
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap();
    assert_eq!(template.resource_version, None);
    assert_eq!(template.labels.as_ref().unwrap()["app"], "web");
    let patched = deployments
        .patch(
            "web",
            &Default::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"tier": "front"}}})),
        )
        .await
        .unwrap();
    let patched_version = patched.resource_version().unwrap();
    assert!(patched_version.parse::<u64>().unwrap() > version.parse::<u64>().unwrap());
    let read = deployments.get("web").await.unwrap();
    assert_eq!(read.resource_version(), Some(patched_version.clone()));
    assert_eq!(read.labels()["tier"], "front");
    let key = tessera_api::resource::Resource::find("apps", "v1", "deployments")
        .unwrap()
        .key(Some("default"), "web");
    let entry = server.server.objects().store().get(&key).unwrap();
    assert_eq!(entry.revision.to_string(), patched_version);
    let bytes: serde_json::Value = serde_json::from_slice(&entry.value).unwrap();
    assert_eq!(bytes["metadata"]["resourceVersion"], json!(patched_version));
}
