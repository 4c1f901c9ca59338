//! pods/eviction against PodDisruptionBudgets whose status is set by hand (no controller).

use serde_json::{Value, json};

use crate::support::{TestServer, raw, start};

const PODS: &str = "/api/v1/namespaces/default/pods";
const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

async fn send(
    server: &TestServer,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let (code, answer, _) = raw(
        server,
        method,
        uri,
        Some(content_type),
        body.to_string().into_bytes(),
    )
    .await;
    (code, answer)
}

async fn running_pod(server: &TestServer, name: &str, ready: bool) {
    let pod = json!({"metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(
        send(server, "POST", PODS, "application/json", &pod).await.0,
        201
    );
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
    let (code, _) = send(
        server,
        "PATCH",
        &format!("{PODS}/{name}/status"),
        "application/merge-patch+json",
        &status,
    )
    .await;
    assert_eq!(code, 200);
}

async fn budget(server: &TestServer, name: &str, spec: Value, status: Option<Value>) {
    let pdb = json!({"metadata": {"name": name}, "spec": spec});
    assert_eq!(
        send(server, "POST", PDBS, "application/json", &pdb).await.0,
        201
    );
    if let Some(status) = status {
        let (code, answer) = send(
            server,
            "PATCH",
            &format!("{PDBS}/{name}/status"),
            "application/merge-patch+json",
            &json!({"status": status}),
        )
        .await;
        assert_eq!(code, 200, "{answer}");
    }
}

async fn evict(server: &TestServer, name: &str) -> (u16, Value) {
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}});
    send(
        server,
        "POST",
        &format!("{PODS}/{name}/eviction"),
        "application/json",
        &eviction,
    )
    .await
}

fn allowing(allowed: i64, healthy: i64, desired: i64) -> Value {
    json!({"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": healthy,
           "desiredHealthy": desired, "expectedPods": healthy})
}

#[tokio::test]
async fn eviction_decrements_the_budget_and_then_refuses() {
    let server = start();
    running_pod(&server, "a", true).await;
    running_pod(&server, "b", true).await;
    budget(
        &server,
        "web",
        json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}),
        Some(allowing(1, 2, 1)),
    )
    .await;
    let (code, answer) = evict(&server, "a").await;
    assert_eq!(code, 201, "{answer}");
    let (_, pdb, _) = raw(&server, "GET", &format!("{PDBS}/web"), None, vec![]).await;
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
    assert!(pdb["status"]["disruptedPods"]["a"].is_string());
    let (code, answer) = evict(&server, "b").await;
    assert_eq!(code, 429, "{answer}");
    assert_eq!(answer["reason"], "TooManyRequests");
    assert_eq!(
        answer["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(answer["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        answer["details"]["causes"][0]["message"],
        "The disruption budget web needs 1 healthy pods and has 2 currently"
    );
    let (code, _, _) = raw(&server, "GET", &format!("{PODS}/b"), None, vec![]).await;
    assert_eq!(code, 200, "the refused pod stays");
}

#[tokio::test]
async fn unprocessed_budgets_and_multiple_budgets_refuse() {
    let server = start();
    running_pod(&server, "a", true).await;
    budget(
        &server,
        "fresh",
        json!({"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}}}),
        None,
    )
    .await;
    let (code, answer) = evict(&server, "a").await;
    assert_eq!(code, 429, "{answer}");
    assert!(
        answer["details"]["causes"][0]["message"]
            .as_str()
            .unwrap()
            .contains("still being processed")
    );
    budget(
        &server,
        "second",
        json!({"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}),
        Some(allowing(1, 1, 0)),
    )
    .await;
    let (code, answer) = evict(&server, "a").await;
    assert_eq!(code, 500, "{answer}");
    assert_eq!(
        answer["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
}

#[tokio::test]
async fn pods_that_are_not_running_or_not_ready_follow_the_policy() {
    let server = start();
    // A pending pod is evicted without consulting the budget.
    let pending = json!({"metadata": {"name": "pending", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    send(&server, "POST", PODS, "application/json", &pending).await;
    budget(
        &server,
        "web",
        json!({"minAvailable": 5, "selector": {"matchLabels": {"app": "web"}},
        "unhealthyPodEvictionPolicy": "AlwaysAllow"}),
        Some(allowing(0, 1, 5)),
    )
    .await;
    assert_eq!(evict(&server, "pending").await.0, 201);
    // An unready pod under AlwaysAllow is evicted although the budget allows nothing.
    running_pod(&server, "sick", false).await;
    assert_eq!(evict(&server, "sick").await.0, 201);
    // A ready one is not.
    running_pod(&server, "fine", true).await;
    assert_eq!(evict(&server, "fine").await.0, 429);
    assert_eq!(evict(&server, "missing").await.0, 404);
}

async fn evict_with(server: &TestServer, name: &str, query: &str, options: Value) -> (u16, Value) {
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"}, "deleteOptions": options});
    send(
        server,
        "POST",
        &format!("{PODS}/{name}/eviction{query}"),
        "application/json",
        &eviction,
    )
    .await
}

/// A running pod a finalizer keeps after its delete, so what the eviction wrote stays readable.
async fn held_pod(server: &TestServer, name: &str) -> Value {
    let pod = json!({"metadata": {"name": name, "finalizers": ["example.com/hold"]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(
        send(server, "POST", PODS, "application/json", &pod).await.0,
        201
    );
    let status = json!({"status": {"phase": "Running"}});
    let (code, stored) = send(
        server,
        "PATCH",
        &format!("{PODS}/{name}/status"),
        "application/merge-patch+json",
        &status,
    )
    .await;
    assert_eq!(code, 200);
    stored
}

async fn get_pod(server: &TestServer, name: &str) -> Value {
    let (code, pod, _) = raw(server, "GET", &format!("{PODS}/{name}"), None, vec![]).await;
    assert_eq!(code, 200, "{pod}");
    pod
}

fn disruption_target(pod: &Value) -> Option<Value> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .cloned()
}

#[tokio::test]
async fn an_evicted_pod_carries_the_disruption_target_condition() {
    let server = start();
    held_pod(&server, "held").await;
    let (code, answer) = evict_with(&server, "held", "", json!({})).await;
    assert_eq!(code, 201, "{answer}");
    let pod = get_pod(&server, "held").await;
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    let condition = disruption_target(&pod).expect("the eviction's condition");
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "EvictionByEvictionAPI");
    assert_eq!(condition["message"], "Eviction API: evicting");
    assert!(condition["lastTransitionTime"].is_string(), "{condition}");
    assert_eq!(
        pod["status"]["phase"], "Running",
        "the rest of the status stays"
    );
}

#[tokio::test]
async fn a_dry_run_eviction_writes_nothing() {
    let server = start();
    held_pod(&server, "dry").await;
    budget(
        &server,
        "web",
        json!({"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}),
        Some(allowing(1, 1, 0)),
    )
    .await;
    running_pod(&server, "guarded", true).await;
    for (name, query, options) in [
        ("dry", "?dryRun=All", json!({})),
        ("dry", "", json!({"dryRun": ["All"]})),
        ("guarded", "?dryRun=All", json!({})),
    ] {
        let (code, answer) = evict_with(&server, name, query, options.clone()).await;
        assert_eq!(code, 201, "{name} {query} {options}: {answer}");
        let pod = get_pod(&server, name).await;
        assert!(pod["metadata"]["deletionTimestamp"].is_null(), "{pod}");
        assert_eq!(disruption_target(&pod), None, "{pod}");
    }
    let (_, pdb, _) = raw(&server, "GET", &format!("{PDBS}/web"), None, vec![]).await;
    assert_eq!(
        pdb["status"]["disruptionsAllowed"], 1,
        "the budget is not charged"
    );
}

#[tokio::test]
async fn a_resource_version_precondition_follows_the_condition_write() {
    let server = start();
    let stored = held_pod(&server, "held").await;
    let version = stored["metadata"]["resourceVersion"].clone();
    let (code, answer) = evict_with(
        &server,
        "held",
        "",
        json!({"preconditions": {"resourceVersion": "1"}}),
    )
    .await;
    assert_eq!(code, 409, "a stale version: {answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("the ResourceVersion in the precondition (1) does not match"),
        "{answer}"
    );
    assert!(get_pod(&server, "held").await["metadata"]["deletionTimestamp"].is_null());
    let uid = stored["metadata"]["uid"].clone();
    let (code, answer) = evict_with(
        &server,
        "held",
        "",
        json!({"preconditions": {"resourceVersion": version, "uid": uid}}),
    )
    .await;
    assert_eq!(code, 201, "the current version: {answer}");
    let pod = get_pod(&server, "held").await;
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    assert!(disruption_target(&pod).is_some(), "{pod}");
}
