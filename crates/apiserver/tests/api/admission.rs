//! Admission: service accounts, priority classes, limit ranges and resource quotas.

use serde_json::{Value, json};

use crate::support::{TestServer, eventually, post_json, raw, start};

const PODS: &str = "/api/v1/namespaces/default/pods";

async fn post(server: &TestServer, uri: &str, body: Value) -> (u16, Value) {
    post_json(server, uri, &body).await
}

fn pod(name: &str, resources: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "main", "image": "i", "resources": resources}]}})
}

#[tokio::test]
async fn pods_get_the_default_service_account_and_missing_ones_are_refused() {
    let server = start();
    let (code, created) = post(&server, PODS, pod("a", json!({}))).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["serviceAccountName"], "default");
    let mut other = pod("b", json!({}));
    other["spec"]["serviceAccountName"] = json!("robot");
    let (code, answer) = post(&server, PODS, other).await;
    assert_eq!(code, 403);
    assert_eq!(
        answer["message"],
        "pods \"b\" is forbidden: error looking up service account default/robot: serviceaccount \"robot\" not found"
    );
}

#[tokio::test]
async fn priority_classes_resolve_into_pod_priority() {
    let server = start();
    let classes = "/apis/scheduling.k8s.io/v1/priorityclasses";
    assert_eq!(
        post(
            &server,
            classes,
            json!({"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"})
        )
        .await
        .0,
        201
    );
    let mut high = pod("high", json!({}));
    high["spec"]["priorityClassName"] = json!("high");
    let (code, created) = post(&server, PODS, high).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        (
            created["spec"]["priority"].as_i64(),
            created["spec"]["preemptionPolicy"].as_str()
        ),
        (Some(1000), Some("Never"))
    );
    let (_, plain) = post(&server, PODS, pod("plain", json!({}))).await;
    assert_eq!(plain["spec"]["priority"], 0);
    let mut unknown = pod("unknown", json!({}));
    unknown["spec"]["priorityClassName"] = json!("nope");
    let (code, answer) = post(&server, PODS, unknown).await;
    assert_eq!(code, 403);
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .ends_with("no PriorityClass with name nope was found")
    );
    let mut forged = pod("forged", json!({}));
    forged["spec"]["priorityClassName"] = json!("high");
    forged["spec"]["priority"] = json!(5);
    let (code, answer) = post(&server, PODS, forged).await;
    assert_eq!(code, 403, "{answer}");
    assert_eq!(
        post(
            &server,
            classes,
            json!({"metadata": {"name": "default-pc"}, "value": 7, "globalDefault": true})
        )
        .await
        .0,
        201
    );
    let (_, defaulted) = post(&server, PODS, pod("defaulted", json!({}))).await;
    assert_eq!(
        (
            defaulted["spec"]["priorityClassName"].as_str(),
            defaulted["spec"]["priority"].as_i64()
        ),
        (Some("default-pc"), Some(7))
    );
}

#[tokio::test]
async fn limit_ranges_default_and_bound_containers() {
    let server = start();
    let range = json!({"metadata": {"name": "limits"}, "spec": {"limits": [{"type": "Container",
        "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "250m"},
        "min": {"cpu": "100m"}, "max": {"cpu": "2", "memory": "1Gi"}, "maxLimitRequestRatio": {"cpu": "4"}}]}});
    assert_eq!(
        post(&server, "/api/v1/namespaces/default/limitranges", range)
            .await
            .0,
        201
    );
    let (code, created) = post(&server, PODS, pod("defaults", json!({}))).await;
    assert_eq!(code, 201, "{created}");
    let resources = &created["spec"]["containers"][0]["resources"];
    assert_eq!(
        resources,
        &json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "250m", "memory": "256Mi"}})
    );
    let table = [
        (
            json!({"requests": {"cpu": "50m"}}),
            "minimum cpu usage per Container is 100m, but request is 50m",
        ),
        (
            json!({"limits": {"cpu": "3"}}),
            "maximum cpu usage per Container is 2, but limit is 3",
        ),
        (
            json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}),
            "cpu max limit to request ratio per Container is 4, but provided ratio is 10.000000",
        ),
    ];
    for (index, (resources, message)) in table.into_iter().enumerate() {
        let (code, answer) = post(&server, PODS, pod(&format!("bad-{index}"), resources)).await;
        assert_eq!(code, 403, "{answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(message),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn resource_quotas_refuse_what_exceeds_them() {
    let server = start();
    let quotas = "/api/v1/namespaces/default/resourcequotas";
    let quota = json!({"metadata": {"name": "compute"}, "spec": {"hard": {
        "requests.cpu": "2", "requests.nvidia.com/gpu": "4", "pods": "3", "count/configmaps": "1"}}});
    assert_eq!(post(&server, quotas, quota).await.0, 201);
    let gpu_pod = |name: &str, cpu: &str, gpus: &str| {
        pod(
            name,
            json!({"requests": {"cpu": cpu, "nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}),
        )
    };
    assert_eq!(post(&server, PODS, gpu_pod("a", "1", "2")).await.0, 201);
    let (code, answer) = post(&server, PODS, gpu_pod("b", "500m", "3")).await;
    assert_eq!(code, 403, "{answer}");
    assert_eq!(
        answer["message"],
        "pods \"b\" is forbidden: exceeded quota: compute, requested: requests.nvidia.com/gpu=3, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=4"
    );
    let (code, answer) = post(&server, PODS, pod("no-request", json!({}))).await;
    assert_eq!(code, 403);
    assert_eq!(
        answer["message"],
        "pods \"no-request\" is forbidden: failed quota: compute: must specify requests.cpu for: main"
    );
    assert_eq!(
        post(
            &server,
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "one"}})
        )
        .await
        .0,
        201
    );
    let (code, answer) = post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "two"}}),
    )
    .await;
    assert_eq!(code, 403);
    assert!(answer["message"].as_str().unwrap().contains("exceeded quota: compute, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"));
    let refreshed = eventually(|| async {
        let (_, quota, _) = raw(&server, "GET", &format!("{quotas}/compute"), None, vec![]).await;
        quota["status"]["used"] == json!({"count/configmaps": "1", "pods": "1", "requests.cpu": "1", "requests.nvidia.com/gpu": "2"})
    })
    .await;
    assert!(refreshed, "status.used follows the namespace");
}

#[tokio::test]
async fn quota_scopes_select_pods() {
    let server = start();
    let classes = "/apis/scheduling.k8s.io/v1/priorityclasses";
    post(
        &server,
        classes,
        json!({"metadata": {"name": "batch"}, "value": 10}),
    )
    .await;
    let quotas = "/api/v1/namespaces/default/resourcequotas";
    post(&server, quotas, json!({"metadata": {"name": "best-effort"}, "spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}})).await;
    post(&server, quotas, json!({"metadata": {"name": "batch"}, "spec": {"hard": {"pods": "0"},
        "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["batch"]}]}}})).await;
    assert_eq!(post(&server, PODS, pod("be-1", json!({}))).await.0, 201);
    let (code, answer) = post(&server, PODS, pod("be-2", json!({}))).await;
    assert_eq!(code, 403);
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("exceeded quota: best-effort")
    );
    assert_eq!(
        post(
            &server,
            PODS,
            pod("burstable", json!({"requests": {"cpu": "1"}}))
        )
        .await
        .0,
        201,
        "not BestEffort"
    );
    let mut batch = pod("batch", json!({"requests": {"cpu": "1"}}));
    batch["spec"]["priorityClassName"] = json!("batch");
    let (code, answer) = post(&server, PODS, batch).await;
    assert_eq!(code, 403, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("exceeded quota: batch")
    );
}
