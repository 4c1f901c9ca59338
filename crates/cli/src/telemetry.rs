//! The node twins' telemetry on `tessera up`: `metrics.k8s.io` (`v1beta1` NodeMetrics and
//! PodMetrics, as metrics-server serves them) through the API server's aggregation seam,
//! with metrics-server's `system:aggregated-metrics-reader` ClusterRole, and the proxy
//! backend that answers `nodes/proxy`, `pods/proxy` and `services/proxy` from the twins.
//!
//! Reads the store and the clock and translates errors; every number is
//! `tessera_telemetry`'s, every scrape the twins'.

use std::sync::{Arc, LazyLock};
use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::request::{Query, ResourcePath};
use tessera_api::resource::Resource;
use tessera_api::selectors::LabelSelector;
use tessera_api::write::WriteOptions;
use tessera_apiserver::proxy::{ProxyResponse, ProxyTarget};
use tessera_apiserver::{AggregatedApi, Objects, ProxyBackend};
use tessera_model::KindInfo;
use tessera_model::json::text;
use tessera_telemetry::metrics_api::{self, GROUP, VERSION};
use tessera_telemetry::usage::{self, PodUsage};

/// `metrics.k8s.io`.
pub struct MetricsApi;

static KINDS: LazyLock<Vec<KindInfo>> = LazyLock::new(|| {
    [
        ("NodeMetrics", "nodes", "node", false),
        ("PodMetrics", "pods", "pod", true),
    ]
    .map(|(kind, plural, singular, namespaced)| KindInfo {
        group: GROUP,
        version: VERSION,
        kind,
        plural,
        singular: singular.to_owned(),
        namespaced,
        short_names: &[],
        categories: &[],
        subresources: &[],
        definition: format!("io.k8s.metrics.pkg.apis.metrics.{VERSION}.{kind}"),
        schema: None,
        custom: None,
        create_only: false,
    })
    .into_iter()
    .collect()
});

fn decoded(objects: &Objects, plural: &str, namespace: Option<&str>) -> Vec<Value> {
    Resource::find("", "v1", plural)
        .map(|resource| {
            objects
                .list(resource, namespace)
                .entries
                .iter()
                .filter_map(|entry| tessera_apiserver::objects::decode(entry).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// NodeMetrics of every node (or `name`) selected.
fn nodes(
    objects: &Objects,
    name: Option<&str>,
    selector: &LabelSelector,
    now: SystemTime,
) -> ApiResult<Value> {
    let pods = decoded(objects, "pods", None);
    let items: Vec<Value> = decoded(objects, "nodes", None)
        .iter()
        .filter(|node| name.is_none_or(|n| text(node, "/metadata/name") == n))
        .filter(|node| selector.matches(&usage::labels(node)))
        .map(|node| {
            let node_name = text(node, "/metadata/name");
            let on_node: Vec<PodUsage> = pods
                .iter()
                .filter(|p| text(p, "/spec/nodeName") == node_name)
                .filter_map(|p| usage::pod_usage(p, now))
                .collect();
            metrics_api::node_metrics(&usage::node_usage(node, &on_node, now), now)
        })
        .collect();
    match name {
        Some(name) => items
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::not_found(GROUP, "nodemetrics", name)),
        None => Ok(metrics_api::list("NodeMetricsList", items)),
    }
}

/// PodMetrics of every running pod (or `name`) selected in `namespace` (all: `None`).
fn pods(
    objects: &Objects,
    namespace: Option<&str>,
    name: Option<&str>,
    selector: &LabelSelector,
    now: SystemTime,
) -> ApiResult<Value> {
    let items: Vec<Value> = decoded(objects, "pods", namespace)
        .iter()
        .filter(|pod| name.is_none_or(|n| text(pod, "/metadata/name") == n))
        .filter(|pod| selector.matches(&usage::labels(pod)))
        .filter_map(|pod| usage::pod_usage(pod, now))
        .map(|usage| metrics_api::pod_metrics(&usage, now))
        .collect();
    match name {
        Some(name) => items.into_iter().next().ok_or_else(|| {
            ApiError::not_found(
                GROUP,
                "podmetrics",
                &format!("{}/{name}", namespace.unwrap_or_default()),
            )
        }),
        None => Ok(metrics_api::list("PodMetricsList", items)),
    }
}

impl AggregatedApi for MetricsApi {
    fn group(&self) -> &'static str {
        GROUP
    }

    fn kinds(&self) -> Vec<&'static KindInfo> {
        KINDS.iter().collect()
    }

    fn get(&self, objects: &Objects, path: &ResourcePath, query: &Query) -> ApiResult<Value> {
        let no_route = || {
            ApiError::no_route(&format!(
                "/apis/{}/{}/{}",
                path.group, path.version, path.plural
            ))
        };
        if path.version != VERSION || path.subresource.is_some() {
            return Err(no_route());
        }
        let selector = LabelSelector::parse(query.get("labelSelector").unwrap_or_default())?;
        let now = SystemTime::now();
        match (path.plural.as_str(), path.namespace.as_deref()) {
            ("nodes", None) => nodes(objects, path.name.as_deref(), &selector, now),
            ("pods", namespace) => pods(objects, namespace, path.name.as_deref(), &selector, now),
            _ => Err(no_route()),
        }
    }
}

/// metrics-server's ClusterRole letting `view`, `edit` and `admin` read the metrics.
pub fn reader_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": "system:aggregated-metrics-reader",
            "labels": {
                "k8s-app": "metrics-server",
                "rbac.authorization.k8s.io/aggregate-to-admin": "true",
                "rbac.authorization.k8s.io/aggregate-to-edit": "true",
                "rbac.authorization.k8s.io/aggregate-to-view": "true",
            },
        },
        "rules": [{"apiGroups": [GROUP], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]}],
    })
}

/// Creates `object` (of `group`/`version`/`plural`) unless one of its name is there.
fn ensure(
    objects: &Objects,
    group: &str,
    version: &str,
    plural: &str,
    object: Value,
) -> anyhow::Result<()> {
    let resource = Resource::find(group, version, plural)
        .ok_or_else(|| anyhow::anyhow!("{plural} are not served"))?;
    let name = text(&object, "/metadata/name").to_string();
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_string);
    if objects.get(resource, namespace.as_deref(), &name).is_err() {
        objects
            .create(
                resource,
                namespace.as_deref(),
                object,
                &WriteOptions::default(),
            )
            .map_err(|e| anyhow::anyhow!("create {plural} {name}: {e}"))?;
    }
    Ok(())
}

/// Installs [`reader_role`] unless it is there.
pub fn ensure_reader_role(objects: &Objects) -> anyhow::Result<()> {
    ensure(
        objects,
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        reader_role(),
    )
}

/// Installs the GPU operator's components (`tessera up --gpu-operator`) unless they are
/// there.
pub fn ensure_gpu_operator(objects: &Objects) -> anyhow::Result<()> {
    for object in tessera_telemetry::operator::objects() {
        let (group, version, plural) = match text(&object, "/kind") {
            "Namespace" => ("", "v1", "namespaces"),
            "ServiceAccount" => ("", "v1", "serviceaccounts"),
            "DaemonSet" => ("apps", "v1", "daemonsets"),
            _ => ("", "v1", "services"),
        };
        ensure(objects, group, version, plural, object)?;
    }
    Ok(())
}

/// The proxy subresources, answered by the node twins' kubelets and containers.
pub(crate) struct TwinProxy(pub(crate) Arc<tessera_twin::containers::Containers>);

impl ProxyBackend for TwinProxy {
    fn get(
        &self,
        target: ProxyTarget,
        path: String,
        query: Option<String>,
    ) -> futures::future::BoxFuture<'static, Result<ProxyResponse, String>> {
        let containers = self.0.clone();
        Box::pin(async move {
            let now = SystemTime::now();
            let (status, content_type, body) = match target {
                ProxyTarget::Node(node) => {
                    containers
                        .kubelet_request(
                            text(&node, "/metadata/name"),
                            &path,
                            query.as_deref(),
                            now,
                        )
                        .await?
                }
                ProxyTarget::Pod { pod, port } => {
                    containers.pod_get(&pod, port, &path, now).await?
                }
            };
            Ok(ProxyResponse {
                status,
                content_type: content_type.to_string(),
                body: body.into_bytes(),
            })
        })
    }
}
