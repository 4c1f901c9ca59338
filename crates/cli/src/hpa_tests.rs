//! The horizontal pod autoscaler against the in-process API server, with a stand-in
//! `metrics.k8s.io` (an [`AggregatedApi`] registered in this test only, answering PodMetrics
//! with the usage the test sets): a Deployment scales up when its pods' CPU is above target
//! and back down once the downscale stabilization window has passed, time read from an
//! injected clock; the controller acts under its own least-privilege identity.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::request::{Query, ResourcePath};
use tessera_api::resource::Resource;
use tessera_apiserver::authn::IdentityLayer;
use tessera_apiserver::{AggregatedApi, Objects};
use tessera_controllers::hpa::{COMPONENT, HpaConfig, sync_all};
use tessera_controllers::shell::EventRecorder;
use tessera_model::KindInfo;
use tessera_model::time::timestamp;

static KINDS: LazyLock<Vec<KindInfo>> = LazyLock::new(|| {
    vec![KindInfo {
        group: "metrics.k8s.io",
        version: "v1beta1",
        kind: "PodMetrics",
        plural: "pods",
        singular: String::new(),
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        definition: "io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics".into(),
        schema: None,
        custom: None,
        create_only: false,
    }]
});

/// PodMetrics for every stored pod of the namespace that has a usage set.
struct StandInMetrics {
    usage: Arc<Mutex<BTreeMap<String, String>>>,
    clock: Arc<Mutex<SystemTime>>,
}

impl AggregatedApi for StandInMetrics {
    fn group(&self) -> &'static str {
        "metrics.k8s.io"
    }

    fn kinds(&self) -> Vec<&'static KindInfo> {
        KINDS.iter().collect()
    }

    fn get(&self, objects: &Objects, path: &ResourcePath, _query: &Query) -> ApiResult<Value> {
        if path.plural != "pods" || path.name.is_some() {
            return Err(ApiError::no_route(&path.plural));
        }
        let pods = Resource::find("", "v1", "pods").ok_or_else(|| ApiError::no_route("pods"))?;
        let usage = self.usage.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let now = *self.clock.lock().unwrap_or_else(|e| e.into_inner());
        let items: Vec<Value> = objects
            .list(pods, path.namespace.as_deref())
            .entries
            .iter()
            .filter_map(|entry| tessera_apiserver::objects::decode(entry).ok())
            .filter_map(|pod| {
                let name = pod.pointer("/metadata/name")?.as_str()?.to_string();
                let cpu = usage.get(&name)?;
                Some(json!({
                    "metadata": {"name": name, "namespace": pod.pointer("/metadata/namespace")},
                    "timestamp": timestamp(now), "window": "30s",
                    "containers": [{"name": "app", "usage": {"cpu": cpu, "memory": "10Mi"}}],
                }))
            })
            .collect();
        Ok(
            json!({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {}, "items": items}),
        )
    }
}

async fn send(client: &kube::Client, method: &str, uri: &str, body: Option<Value>) -> Value {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .header("accept", "application/json")
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .expect("request");
    let text = client.request_text(request).await.expect(uri);
    serde_json::from_str(&text).expect("JSON")
}

async fn table_targets(client: &kube::Client) -> String {
    let request = http::Request::builder()
        .uri("/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/web")
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .expect("request");
    let table: Value =
        serde_json::from_str(&client.request_text(request).await.expect("table")).expect("JSON");
    table["rows"][0]["cells"][2]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn replicas(client: &kube::Client) -> i64 {
    send(
        client,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/web",
        None,
    )
    .await["spec"]["replicas"]
        .as_i64()
        .unwrap_or(-1)
}

/// The autoscaler's events once `count` have been written (the recorder writes them on a task
/// of its own).
async fn events(client: &kube::Client, count: usize) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for _ in 0..200 {
        let list = send(client, "GET", "/api/v1/namespaces/default/events", None).await;
        found = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["source"]["component"] == COMPONENT)
            .map(|e| {
                let field = |name: &str| e[name].as_str().unwrap_or_default().to_string();
                (field("reason"), field("message"))
            })
            .collect();
        if found.len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_scales_up_above_target_and_down_after_the_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = tessera_store::Store::open(&dir.path().join("state.db"), Default::default())
        .expect("store");
    let server = crate::bench::bench_server(store, dir.path()).expect("server");
    let usage = Arc::new(Mutex::new(BTreeMap::new()));
    let start = SystemTime::now();
    let time = Arc::new(Mutex::new(start));
    server.register_aggregated(Arc::new(StandInMetrics {
        usage: usage.clone(),
        clock: time.clone(),
    }));
    let admin = kube::Client::new(crate::bench::as_admin(&server), "default");
    let controller = kube::Client::new(
        tower::ServiceBuilder::new()
            .layer(IdentityLayer::new(tessera_api::policy::identity(COMPONENT)))
            .service(server.router()),
        "default",
    );

    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
            "resources": {"requests": {"cpu": "1"}}}]}});
    send(&admin, "POST", "/apis/apps/v1/namespaces/default/deployments", Some(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}})))
    .await;
    // The Deployment's pods, running and ready for long (no apps controller runs here).
    for name in ["web-a", "web-b"] {
        let mut pod = template.clone();
        pod["metadata"]["name"] = json!(name);
        send(&admin, "POST", "/api/v1/namespaces/default/pods", Some(pod)).await;
        send(
            &admin,
            "PATCH",
            &format!("/api/v1/namespaces/default/pods/{name}/status"),
            Some(json!({
            "status": {"phase": "Running", "startTime": "2020-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2020-01-01T00:00:10Z"}]}})),
        )
        .await;
    }
    send(
        &admin,
        "POST",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
        Some(json!({
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}]}})),
    )
    .await;

    let clock_time = time.clone();
    let clock: tessera_model::clock::Clock =
        Arc::new(move || *clock_time.lock().unwrap_or_else(|e| e.into_inner()));
    let config = HpaConfig::new(Duration::from_secs(15), clock.clone());
    let recorder = EventRecorder::start(controller.clone(), COMPONENT, clock);
    let mut histories = HashMap::new();
    let set_usage = |cpu: &str| {
        let mut usage = usage.lock().unwrap_or_else(|e| e.into_inner());
        for name in ["web-a", "web-b"] {
            usage.insert(name.to_string(), cpu.to_string());
        }
    };
    let advance = |seconds: u64| {
        *time.lock().unwrap_or_else(|e| e.into_inner()) = start + Duration::from_secs(seconds);
    };
    let hpa_path = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/web";

    // 90% of the request against 50%: 2 → ceil(1.8 × 2) = 4.
    set_usage("900m");
    sync_all(&controller, &config, &recorder, &mut histories)
        .await
        .expect("pass");
    assert_eq!(replicas(&admin).await, 4);
    let hpa = send(&admin, "GET", hpa_path, None).await;
    assert_eq!(hpa["status"]["desiredReplicas"], 4, "{hpa}");
    assert_eq!(hpa["status"]["currentReplicas"], 2, "{hpa}");
    assert_eq!(
        hpa["status"]["currentMetrics"][0]["resource"]["current"],
        json!({"averageUtilization": 90, "averageValue": "900m"})
    );
    assert_eq!(table_targets(&admin).await, "cpu: 90%/50%");
    assert_eq!(
        events(&admin, 1).await,
        [(
            "SuccessfulRescale".to_string(),
            "New size: 4; reason: cpu resource utilization (percentage of request) above target"
                .to_string()
        )]
    );

    // Idle, a minute later: held by the 5-minute downscale stabilization.
    set_usage("50m");
    advance(60);
    sync_all(&controller, &config, &recorder, &mut histories)
        .await
        .expect("pass");
    assert_eq!(replicas(&admin).await, 4);
    let hpa = send(&admin, "GET", hpa_path, None).await;
    assert_eq!(
        hpa["status"]["conditions"][0]["reason"], "ScaleDownStabilized",
        "{hpa}"
    );
    assert_eq!(table_targets(&admin).await, "cpu: 5%/50%");

    // Past the window: down to minReplicas.
    advance(60 + 301);
    sync_all(&controller, &config, &recorder, &mut histories)
        .await
        .expect("pass");
    assert_eq!(replicas(&admin).await, 1);
    let hpa = send(&admin, "GET", hpa_path, None).await;
    assert_eq!(hpa["status"]["desiredReplicas"], 1, "{hpa}");
    assert_eq!(
        hpa["status"]["conditions"][0]["reason"], "SucceededRescale",
        "{hpa}"
    );
    let events = events(&admin, 2).await;
    assert!(
        events.contains(&(
            "SuccessfulRescale".to_string(),
            "New size: 1; reason: All metrics below target".to_string()
        )),
        "{events:?}"
    );
}
