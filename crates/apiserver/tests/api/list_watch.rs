//! Lists with selectors and pagination, and watches from revisions, through kube-rs.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::{raw, start, start_with_history};

async fn make(api: &Api<ConfigMap>, name: &str, labels: serde_json::Value) {
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    make(&api, "a", json!({"team": "a", "tier": "gpu"})).await;
    make(&api, "b", json!({"team": "b", "tier": "gpu"})).await;
    make(&api, "c", json!({"team": "b"})).await;
    let names = |list: kube::core::ObjectList<ConfigMap>| {
        list.items.iter().map(|c| c.name_any()).collect::<Vec<_>>()
    };
    let table = [
        ("team=b", vec!["b", "c"]),
        ("team in (a,b),tier", vec!["a", "b"]),
        ("!tier", vec!["c"]),
        ("team!=b", vec!["a"]),
    ];
    for (selector, want) in table {
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap();
        assert_eq!(names(list), want, "{selector}");
    }
    let list = api
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(names(list), ["b"]);
    let error = api
        .list(&ListParams::default().fields("data.k=v"))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!()
    };
    assert_eq!(status.code, 400);
}

#[tokio::test]
async fn pod_field_selectors_used_by_drain_and_describe() {
    let server = start();
    let api: Api<Pod> = Api::default_namespaced(server.client.clone());
    for (name, node) in [("p1", Some("n1")), ("p2", Some("n2")), ("p3", None)] {
        let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
        if let Some(node) = node {
            spec["nodeName"] = json!(node);
        }
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
        api.create(&PostParams::default(), &pod).await.unwrap();
    }
    let all: Api<Pod> = Api::all(server.client.clone());
    let on_n1 = all
        .list(
            &ListParams::default()
                .fields("spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed"),
        )
        .await
        .unwrap();
    assert_eq!(
        on_n1.items.iter().map(|p| p.name_any()).collect::<Vec<_>>(),
        ["p1"]
    );
    let unscheduled = all
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(
        unscheduled
            .items
            .iter()
            .map(|p| p.name_any())
            .collect::<Vec<_>>(),
        ["p3"]
    );
}

#[tokio::test]
async fn pagination_serves_one_consistent_revision() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    for i in 0..7 {
        make(&api, &format!("cm-{i}"), json!({})).await;
    }
    let first = api.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(first.items.len(), 3);
    let revision = first.metadata.resource_version.clone().unwrap();
    // A change between pages is not seen by the continuation.
    make(&api, "cm-9", json!({})).await;
    let token = first.metadata.continue_.clone().unwrap();
    let second = api
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    let token = second.metadata.continue_.clone().unwrap();
    let third = api
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(third.items.len(), 1);
    assert!(
        third
            .metadata
            .continue_
            .as_deref()
            .is_none_or(str::is_empty)
    );
    assert_eq!(
        third.metadata.resource_version.as_deref(),
        Some(revision.as_str())
    );
    let mut names: Vec<String> = [first, second, third]
        .into_iter()
        .flat_map(|l| l.items)
        .map(|c| c.name_any())
        .collect();
    names.sort();
    assert_eq!(names, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn kube_runtime_watcher_sees_initial_state_and_changes() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    make(&api, "before", json!({})).await;
    let mut stream = watcher(api.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = stream.try_next().await.unwrap().unwrap();
    assert_eq!(first.name_any(), "before");
    make(&api, "after", json!({})).await;
    let second = stream.try_next().await.unwrap().unwrap();
    assert_eq!(second.name_any(), "after");
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_a_bookmark() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    make(&api, "one", json!({})).await;
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(api.clone(), config).boxed();
    let mut seen = Vec::new();
    while let Some(event) = stream.try_next().await.unwrap() {
        match event {
            watcher::Event::InitApply(cm) => seen.push(cm.name_any()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(seen, ["one"]);
}

#[tokio::test]
async fn selector_watches_see_objects_leave_as_deletions() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    make(&api, "x", json!({"app": "web"})).await;
    let revision = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("app=web"), &revision)
        .await
        .unwrap()
        .boxed();
    let relabel = json!({"metadata": {"labels": {"app": "db"}}});
    api.patch(
        "x",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&relabel),
    )
    .await
    .unwrap();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Deleted(cm) => assert_eq!(cm.labels()["app"], "db"),
        other => panic!("expected a deletion, got {other:?}"),
    }
}

#[tokio::test]
async fn watching_from_a_compacted_revision_is_gone() {
    let server = start_with_history(3);
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    for i in 0..6 {
        make(&api, &format!("c{i}"), json!({})).await;
    }
    let mut stream = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected 410, got {other:?}"),
    }
    let (code, body, _) = raw(
        &server,
        "GET",
        "/api/v1/namespaces/default/configmaps?resourceVersion=1&resourceVersionMatch=Exact",
        None,
        vec![],
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (410, Some("Expired")));
}

#[tokio::test]
async fn watch_bookmarks_carry_the_revision() {
    let server = start();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client.clone());
    make(&api, "a", json!({})).await;
    let revision = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &revision)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Bookmark(bookmark) => assert_eq!(bookmark.metadata.resource_version, revision),
        other => panic!("expected a bookmark, got {other:?}"),
    }
}
