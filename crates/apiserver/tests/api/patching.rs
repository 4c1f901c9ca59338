//! The patch flavours through kube-rs.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::start;

fn deployment() -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [
                                  {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
                                  {"name": "sidecar", "image": "proxy:1"}]}}}
    }))
    .unwrap()
}

#[tokio::test]
async fn strategic_merge_patch_merges_containers_by_name() {
    let server = start();
    let api: Api<Deployment> = Api::default_namespaced(server.client.clone());
    api.create(&PostParams::default(), &deployment())
        .await
        .unwrap();
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]}]}}}});
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let containers = &patched.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(containers.len(), 2, "the sidecar is kept");
    assert_eq!(containers[0].image.as_deref(), Some("app:2"));
    let env: Vec<_> = containers[0]
        .env
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(env, ["A", "B"]);
    assert_eq!(patched.metadata.generation, Some(2));
}

#[tokio::test]
async fn merge_patch_replaces_lists_and_json_patch_tests() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"x": "1"}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let merged = api
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": null, "b": "2"}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.labels().len(), 1);
    assert_eq!(merged.labels()["b"], "2");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/x", "value": "nope"}]))
            .unwrap();
    let error = api
        .patch("c", &PatchParams::default(), &Patch::<()>::Json(failing))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!()
    };
    assert_eq!(status.code, 422);
    let unchanged = api.get("c").await.unwrap();
    assert_eq!(
        unchanged.resource_version(),
        merged.resource_version(),
        "a failed patch changes nothing"
    );
}

#[tokio::test]
async fn apply_patch_creates_then_updates() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    let params = PatchParams::apply("tessera-test");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}});
    api.patch("applied", &params, &Patch::Apply(&body))
        .await
        .unwrap();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "2"}});
    let updated = api
        .patch("applied", &params, &Patch::Apply(&body))
        .await
        .unwrap();
    assert_eq!(updated.data.unwrap()["a"], "2");
}

#[tokio::test]
async fn status_subresource_keeps_spec_and_main_resource_keeps_status() {
    let server = start();
    let api: Api<Deployment> = Api::default_namespaced(server.client.clone());
    api.create(&PostParams::default(), &deployment())
        .await
        .unwrap();
    let status = json!({"status": {"replicas": 3}, "spec": {"replicas": 9}});
    let patched = api
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(patched.status.as_ref().unwrap().replicas, Some(3));
    assert_eq!(
        patched.spec.as_ref().unwrap().replicas,
        Some(1),
        "status writes ignore spec"
    );
    let main = json!({"status": {"replicas": 0}, "spec": {"replicas": 2}});
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Merge(&main))
        .await
        .unwrap();
    assert_eq!(
        patched.status.unwrap().replicas,
        Some(3),
        "main writes ignore status"
    );
    assert_eq!(patched.spec.unwrap().replicas, Some(2));
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
}

/// A resourceVersion in a merge patch is a precondition, on the status subresource too (how
/// Kueue's strict admission-status writes refuse to overwrite a newer object): a stale one
/// is a 409 Conflict and changes nothing; the current one writes.
#[tokio::test]
async fn a_resource_version_in_a_status_patch_is_a_precondition() {
    let server = start();
    let api: Api<Deployment> = Api::default_namespaced(server.client.clone());
    let created = api
        .create(&PostParams::default(), &deployment())
        .await
        .unwrap();
    let read = created.resource_version().unwrap();
    let changed = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 1}})),
        )
        .await
        .unwrap();
    let stale = json!({"metadata": {"resourceVersion": read}, "status": {"replicas": 3}});
    let error = api
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&stale))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("{error:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    let kept = api.get("web").await.unwrap();
    assert_eq!(kept.resource_version(), changed.resource_version());
    assert_eq!(kept.status.unwrap().replicas, Some(1), "nothing written");
    let current = json!({"metadata": {"resourceVersion": changed.resource_version()},
        "status": {"replicas": 3}});
    let written = api
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&current))
        .await
        .unwrap();
    assert_eq!(written.status.unwrap().replicas, Some(3));
}
