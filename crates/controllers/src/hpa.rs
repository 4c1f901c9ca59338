//! The HorizontalPodAutoscaler shell: every sync period (kube-controller-manager's
//! `--horizontal-pod-autoscaler-sync-period`, 15 s) each `autoscaling/v2` autoscaler is
//! reconciled by [`tessera_workloads::hpa::reconcile`] from what this module reads — the
//! target's `/scale` subresource (any kind that serves one: Deployments, ReplicaSets,
//! StatefulSets, custom resources with a scale subresource), the pods its selector picks and
//! their PodMetrics from `metrics.k8s.io/v1beta1` — and its answer is written: the scale, the
//! autoscaler's status, and events as `horizontal-pod-autoscaler`.
//!
//! Each sync period is a pass of kube-controller-manager's work queue
//! `horizontalpodautoscaler` (the tick its add, a failed listing its retry).
//!
//! Holds each autoscaler's recommendation history between passes; decides nothing itself.

use std::collections::HashMap;
use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch};
use kube::core::GroupVersionKind;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tessera_model::clock::Clock;
use tessera_workloads::hpa::{self, Decision, History, Observed, Scale};

use crate::shell::{EventRecorder, patch_params};

/// The field manager the controller writes as.
pub const MANAGER: &str = crate::shell::KUBE_CONTROLLER_MANAGER;

/// The component named in its events (upstream's `horizontal-pod-autoscaler`).
pub const COMPONENT: &str = "horizontal-pod-autoscaler";

/// Settings.
#[derive(Clone)]
pub struct HpaConfig {
    /// How often every autoscaler is reconciled.
    pub sync_period: Duration,
    /// The core's settings (tolerance, readiness periods, downscale stabilization).
    pub core: hpa::Config,
    /// Where the controller reads the time.
    pub clock: Clock,
    /// kube-controller-manager's metrics, when the platform serves them.
    pub metrics: Option<std::sync::Arc<tessera_metrics::components::Registries>>,
}

impl HpaConfig {
    /// Upstream's defaults with the host's clock.
    pub fn new(sync_period: Duration, clock: Clock) -> HpaConfig {
        HpaConfig {
            sync_period,
            core: hpa::Config::default(),
            clock,
            metrics: None,
        }
    }
}

/// Runs the controller until the task is dropped.
pub async fn run(client: Client, config: HpaConfig) {
    let recorder = EventRecorder::start(client.clone(), COMPONENT, config.clock.clone());
    let mut histories: HashMap<String, History> = HashMap::new();
    let mut ticks = tokio::time::interval(config.sync_period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut passes = crate::workqueue::Passes::new(
        config.metrics.as_deref(),
        &[tessera_metrics::controllers::queue_name::HORIZONTAL_POD_AUTOSCALER],
        config.clock.clone(),
    );
    loop {
        ticks.tick().await;
        passes.changed();
        passes.start();
        if let Err(error) = sync_all(&client, &config, &recorder, &mut histories).await {
            tracing::debug!(%error, "horizontal pod autoscaler pass failed");
            passes.retry();
        }
        passes.finish();
    }
}

/// One pass over every autoscaler; the histories of deleted ones are forgotten.
pub async fn sync_all(
    client: &Client,
    config: &HpaConfig,
    recorder: &EventRecorder,
    histories: &mut HashMap<String, History>,
) -> Result<(), kube::Error> {
    let list = Api::<HorizontalPodAutoscaler>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let mut seen = HashSet::with_capacity(list.items.len());
    // Discovery answers once per target kind and pass.
    let mut kinds = Kinds::new();
    for item in &list.items {
        let key = format!(
            "{}/{}/{}",
            item.namespace().unwrap_or_default(),
            item.name_any(),
            item.uid().unwrap_or_default()
        );
        let Ok(object) = serde_json::to_value(item) else {
            continue;
        };
        let history = histories.entry(key.clone()).or_default();
        if let Err(error) = sync_one(client, config, recorder, &mut kinds, &object, history).await {
            tracing::debug!(%error, autoscaler = %key, "cannot write an autoscaler's decision");
        }
        seen.insert(key);
    }
    histories.retain(|key, _| seen.contains(key));
    Ok(())
}

/// Reads what one autoscaler needs, asks the core, and writes its answer.
async fn sync_one(
    client: &Client,
    config: &HpaConfig,
    recorder: &EventRecorder,
    kinds: &mut Kinds,
    object: &Value,
    history: &mut History,
) -> Result<(), kube::Error> {
    let namespace = text(object, "/metadata/namespace");
    let name = text(object, "/metadata/name");
    let target = object
        .pointer("/spec/scaleTargetRef")
        .cloned()
        .unwrap_or(Value::Null);
    let scale_api = scale_api(client, kinds, namespace, &target).await;
    let scale_read = match &scale_api {
        Ok(api) => api
            .get_scale(text(&target, "/name"))
            .await
            .map_err(|e| e.to_string()),
        Err(error) => Err(error.clone()),
    };
    let scale = scale_read
        .as_ref()
        .ok()
        .and_then(|s| serde_json::to_value(s).ok())
        .map(|s| Scale::from_json(&s));
    let (pods, metrics) = match &scale {
        Some(scale) if !scale.selector.is_empty() => {
            let pods = list_pods(client, namespace, &scale.selector).await;
            let metrics = list_pod_metrics(client, namespace, &scale.selector).await;
            (pods, metrics)
        }
        _ => (Vec::new(), Ok(Vec::new())),
    };
    let scale_result = match (&scale, &scale_read) {
        (Some(scale), _) => Ok(scale),
        (None, Err(error)) => Err(error.as_str()),
        (None, Ok(_)) => Err("the scale subresource did not decode"),
    };
    let now = (config.clock)();
    let mut decision = hpa::reconcile(
        object,
        Observed {
            scale: scale_result,
            pods: &pods,
            pod_metrics: metrics.as_deref().map_err(String::as_str),
        },
        history,
        &config.core,
        now,
    );
    if let (Some(rescale), Ok(api)) = (decision.rescale.clone(), &scale_api) {
        let patch = json!({"spec": {"replicas": rescale.to}});
        match api
            .patch_scale(
                text(&target, "/name"),
                &patch_params(MANAGER),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => decision.rescaled(history),
            Err(error) => decision.rescale_failed(&error.to_string()),
        }
    }
    for event in &decision.events {
        recorder
            .record(involved(object), event.kind, event.reason, &event.message)
            .await;
    }
    write_status(client, namespace, name, &decision).await
}

/// The autoscaler's status written if it changed (upstream's `updateStatusIfNeeded`).
async fn write_status(
    client: &Client,
    namespace: &str,
    name: &str,
    decision: &Decision,
) -> Result<(), kube::Error> {
    if !decision.status_changed() {
        return Ok(());
    }
    let mut status = decision.status();
    // A merge patch keeps fields it does not name: name the ones now absent.
    for field in ["currentMetrics", "lastScaleTime", "conditions"] {
        if status.get(field).is_none() {
            status[field] = Value::Null;
        }
    }
    Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), namespace)
        .patch_status(
            name,
            &patch_params(MANAGER),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .map(drop)
}

/// Target kinds resolved in one pass: (apiVersion, kind) → resource or why not.
type Kinds = HashMap<(String, String), Result<ApiResource, String>>;

/// The API of the target's kind, found through discovery (upstream's REST mapper).
async fn scale_api(
    client: &Client,
    kinds: &mut Kinds,
    namespace: &str,
    target: &Value,
) -> Result<Api<DynamicObject>, String> {
    let api_version = text(target, "/apiVersion");
    let kind = text(target, "/kind");
    let key = (api_version.to_string(), kind.to_string());
    if !kinds.contains_key(&key) {
        let resolved = resolve(client, api_version, kind).await;
        kinds.insert(key.clone(), resolved);
    }
    match kinds.get(&key) {
        Some(Ok(resource)) => Ok(Api::namespaced_with(client.clone(), namespace, resource)),
        Some(Err(error)) => Err(error.clone()),
        None => Err("unable to determine resource for scale target reference".into()),
    }
}

async fn resolve(client: &Client, api_version: &str, kind: &str) -> Result<ApiResource, String> {
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    };
    if version.is_empty() || kind.is_empty() {
        return Err(format!(
            "invalid API version in scale target reference: {api_version:?}"
        ));
    }
    let gvk = GroupVersionKind::gvk(group, version, kind);
    kube::discovery::pinned_kind(client, &gvk)
        .await
        .map(|(resource, _)| resource)
        .map_err(|e| format!("unable to determine resource for scale target reference: {e}"))
}

/// The pods `selector` picks in `namespace`, as JSON; none when they cannot be listed.
async fn list_pods(client: &Client, namespace: &str, selector: &str) -> Vec<Value> {
    match Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(selector))
        .await
    {
        Ok(list) => list
            .items
            .iter()
            .filter_map(|pod| serde_json::to_value(pod).ok())
            .collect(),
        Err(error) => {
            tracing::debug!(%error, "cannot list an autoscaler's pods");
            Vec::new()
        }
    }
}

/// The PodMetrics `selector` picks in `namespace` from `metrics.k8s.io/v1beta1`.
async fn list_pod_metrics(
    client: &Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Value>, String> {
    let request = kube::core::Request::new(format!(
        "/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"
    ))
    .list(&ListParams::default().labels(selector))
    .map_err(|e| e.to_string())?;
    let list: Value = client.request(request).await.map_err(|e| e.to_string())?;
    Ok(list
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// The object reference events name.
fn involved(object: &Value) -> Value {
    json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "namespace": object.pointer("/metadata/namespace"),
        "name": object.pointer("/metadata/name"),
        "uid": object.pointer("/metadata/uid"),
        "resourceVersion": object.pointer("/metadata/resourceVersion"),
    })
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}
