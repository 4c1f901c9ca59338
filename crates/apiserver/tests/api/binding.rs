//! Binding a pod: `pods/<name>/binding` and the legacy `bindings` resource, as kube-scheduler
//! and the Python client's `create_namespaced_binding` send them.

use serde_json::{Value, json};

use crate::support::{TestServer, post_json, raw, start};

const PODS: &str = "/api/v1/namespaces/default/pods";
const BINDINGS: &str = "/api/v1/namespaces/default/bindings";

async fn get(server: &TestServer, uri: &str) -> Value {
    raw(server, "GET", uri, None, Vec::new()).await.1
}

fn binding(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
           "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
}

/// (the case, where it is sent, what, the answer's code, a part of its message, the pod's
/// node after)
type Case = (
    &'static str,
    String,
    Value,
    u16,
    &'static str,
    Option<&'static str>,
);

#[tokio::test]
async fn pods_are_bound_through_the_subresource_and_the_legacy_resource() {
    let server = start();
    for name in ["a", "b", "c"] {
        let pod = json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        assert_eq!(post_json(&server, PODS, &pod).await.0, 201, "{name}");
    }
    let cases: [Case; 6] = [
        (
            "subresource",
            format!("{PODS}/a/binding"),
            binding("a", "n1"),
            201,
            "",
            Some("n1"),
        ),
        (
            "legacy resource",
            BINDINGS.into(),
            binding("b", "n2"),
            201,
            "",
            Some("n2"),
        ),
        (
            "already bound, subresource",
            format!("{PODS}/a/binding"),
            binding("a", "n3"),
            409,
            "pod a is already assigned to node \"n1\"",
            Some("n1"),
        ),
        (
            "already bound, legacy",
            BINDINGS.into(),
            binding("b", "n3"),
            409,
            "pod b is already assigned to node \"n2\"",
            Some("n2"),
        ),
        (
            "legacy without a name",
            BINDINGS.into(),
            binding("", "n1"),
            422,
            "metadata.name",
            None,
        ),
        (
            "legacy, no such pod",
            BINDINGS.into(),
            binding("z", "n1"),
            404,
            "\"z\" not found",
            None,
        ),
    ];
    for (case, uri, body, code, message, node) in cases {
        let (got, answer) = post_json(&server, &uri, &body).await;
        assert_eq!(got, code, "{case}: {answer}");
        let text = answer["message"].as_str().unwrap_or_default();
        assert!(text.contains(message), "{case}: {text}");
        let pod = body["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(node) = node {
            let stored = get(&server, &format!("{PODS}/{pod}")).await;
            assert_eq!(stored["spec"]["nodeName"], json!(node), "{case}");
        }
    }
    // As upstream's binding storage: no managed-fields entry for the binding.
    let bound = get(&server, &format!("{PODS}/a")).await;
    let managers: Vec<&str> = bound["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["subresource"].as_str())
        .collect();
    assert!(managers.is_empty(), "{managers:?}");
    // A Binding naming another pod's uid (the pod made again under its name while a binding
    // was in flight) is refused as upstream's precondition; with the pod's own uid it binds.
    let unbound = get(&server, &format!("{PODS}/c")).await;
    assert_eq!(unbound["spec"]["nodeName"], Value::Null);
    let uid = unbound["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut stale = binding("c", "n1");
    stale["metadata"]["uid"] = json!("an-earlier-pod");
    let (code, answer) = post_json(&server, &format!("{PODS}/c/binding"), &stale).await;
    assert_eq!(code, 409, "{answer}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "Precondition failed: UID in precondition: an-earlier-pod, UID in object meta: {uid}"
        )),
        "{message}"
    );
    assert_eq!(
        get(&server, &format!("{PODS}/c")).await["spec"]["nodeName"],
        Value::Null
    );
    let mut current = binding("c", "n1");
    current["metadata"]["uid"] = json!(uid);
    assert_eq!(post_json(&server, BINDINGS, &current).await.0, 201);
    assert_eq!(
        get(&server, &format!("{PODS}/c")).await["spec"]["nodeName"],
        "n1"
    );
}

/// As upstream's `setPodNodeAndMetadata`: a gated pod is refused, a Binding's
/// resourceVersion is a precondition, and the bound pod carries the Binding's annotations and
/// `PodScheduled=True` in place of the scheduler's `Unschedulable` condition.
#[tokio::test]
async fn a_binding_sets_the_scheduled_condition_and_annotations_and_checks_its_preconditions() {
    let server = start();
    let gated = json!({"metadata": {"name": "gated"}, "spec": {
        "schedulingGates": [{"name": "example.com/wait"}],
        "containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(post_json(&server, PODS, &gated).await.0, 201);
    let (code, answer) = post_json(
        &server,
        &format!("{PODS}/gated/binding"),
        &binding("gated", "n1"),
    )
    .await;
    assert_eq!(code, 409, "{answer}");
    assert_eq!(
        answer["message"],
        "Operation cannot be fulfilled on pods/binding \"gated\": pod gated has non-empty .spec.schedulingGates"
    );
    assert_eq!(answer["details"]["kind"], "pods/binding");

    let pod = json!({"metadata": {"name": "p", "annotations": {"kept": "yes"}},
                     "spec": {"containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(post_json(&server, PODS, &pod).await.0, 201);
    let unschedulable = json!({"status": {"conditions": [{"type": "PodScheduled",
        "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let (code, answer, _) = raw(
        &server,
        "PATCH",
        &format!("{PODS}/p/status"),
        Some("application/merge-patch+json"),
        serde_json::to_vec(&unschedulable).unwrap(),
    )
    .await;
    assert_eq!(code, 200, "{answer}");
    let version = answer["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut stale = binding("p", "n1");
    stale["metadata"]["resourceVersion"] = json!("1");
    let (code, answer) = post_json(&server, &format!("{PODS}/p/binding"), &stale).await;
    assert_eq!(code, 409, "{answer}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: {version}"
        )),
        "{message}"
    );
    let mut current = binding("p", "n1");
    current["metadata"]["resourceVersion"] = json!(version);
    current["metadata"]["annotations"] = json!({"scheduler.example.com/score": "42"});
    // A dry run is answered as the binding would be and changes nothing.
    assert_eq!(
        post_json(&server, &format!("{PODS}/p/binding?dryRun=All"), &current)
            .await
            .0,
        201
    );
    let unbound = get(&server, &format!("{PODS}/p")).await;
    assert_eq!(unbound["spec"]["nodeName"], Value::Null, "dry run");
    assert_eq!(
        unbound["metadata"]["resourceVersion"],
        json!(version),
        "dry run"
    );
    assert_eq!(
        post_json(&server, &format!("{PODS}/p/binding"), &current)
            .await
            .0,
        201
    );
    let bound = get(&server, &format!("{PODS}/p")).await;
    assert_eq!(bound["spec"]["nodeName"], "n1");
    assert_eq!(
        bound["metadata"]["annotations"],
        json!({"kept": "yes", "scheduler.example.com/score": "42"})
    );
    let conditions = bound["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(conditions.len(), 1, "{conditions:?}");
    assert_eq!(conditions[0]["type"], "PodScheduled");
    assert_eq!(conditions[0]["status"], "True");
    assert_eq!(conditions[0].get("reason"), None, "replaced whole");
    assert_ne!(
        conditions[0]["lastTransitionTime"], "2026-01-01T00:00:00Z",
        "the status changed, so the transition is now"
    );
}

#[tokio::test]
async fn discovery_lists_bindings_as_create_only() {
    let server = start();
    let core = get(&server, "/api/v1").await;
    let bindings = core["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == "bindings")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(bindings["kind"], "Binding", "{core}");
    assert_eq!(bindings["namespaced"], true);
    assert_eq!(bindings["verbs"], json!(["create"]));
    let pods_binding = core["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["name"] == "pods/binding");
    assert!(pods_binding, "pods/binding still listed");
}
