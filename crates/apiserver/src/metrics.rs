//! The metrics endpoints of the API server's listener and the request instrumentation:
//! `/metrics` (kube-apiserver's own, with `apiserver_storage_objects` counted at scrape
//! time), `/components/kube-scheduler/metrics`, `/components/kube-controller-manager/metrics`
//! (the controllers' and the garbage collector's, unfinished work brought up to the scrape's
//! time), `/components/kueue/metrics` (the queue
//! manager's counters and the gauges computed from Kueue's stored objects) and
//! `/components/kube-state-metrics/metrics` (computed from the store at scrape time).
//!
//! Names, labels and values are `tessera_metrics`' decisions; this module only reads the
//! store, measures time and fills the shared registries. Authorization is the request path's
//! (RBAC `nonResourceURLs`, see `tessera_api::policy`).

use std::collections::BTreeSet;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode, header};
use serde_json::Value;
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::request::{Target, attributes};
use tessera_metrics::components::{RequestInfo, RequestLabels};

use crate::objects::decode_as;
use crate::server::ApiServer;

/// The components whose metrics are served under `/components/<name>/metrics`.
pub const COMPONENTS: [&str; 4] = [
    "kube-scheduler",
    "kube-controller-manager",
    "kueue",
    "kube-state-metrics",
];

/// Whether a parsed path names something served. As kube-apiserver, which records requests
/// to routes it does not have without their path, group or resource, so that made-up URLs do
/// not make series without bound.
fn served(server: &ApiServer, target: &Target) -> bool {
    let kinds = || server.discovery_kinds();
    match target {
        Target::Resource(r) => kinds()
            .iter()
            .any(|k| k.group == r.group && k.version == r.version && k.plural == r.plural),
        Target::Group(group) => kinds().iter().any(|k| k.group == group),
        Target::GroupVersion(group, version) => kinds()
            .iter()
            .any(|k| k.group == group && k.version == version),
        Target::OpenApiDocument(document) => kinds().iter().any(|k| {
            let served = if k.group.is_empty() {
                format!("api/{}", k.version)
            } else {
                format!("apis/{}/{}", k.group, k.version)
            };
            *document == served
        }),
        Target::Metrics(Some(component)) => COMPONENTS.contains(&component.as_str()),
        Target::Version
        | Target::Health
        | Target::CoreGroup
        | Target::Groups
        | Target::OpenApiV2
        | Target::OpenApiIndex
        | Target::Metrics(None) => true,
    }
}

/// The labels kube-apiserver records a request under.
pub fn request_labels(
    server: &ApiServer,
    method: &Method,
    path: &str,
    parsed: &crate::parsed::Parsed,
    headers: &HeaderMap,
) -> RequestLabels {
    let info = match &parsed.target {
        Ok(target) if served(server, target) => {
            let attributes = attributes(target, method, path, &parsed.query);
            let version = match target {
                Target::Resource(resource) => resource.version.clone(),
                _ => String::new(),
            };
            RequestInfo {
                resource_request: attributes.resource_request,
                verb: attributes.verb,
                group: attributes.group,
                version,
                resource: attributes.resource,
                subresource: attributes.subresource,
                namespace: attributes.namespace,
                name: attributes.name,
                path: path.to_string(),
                apply: headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with("application/apply-patch")),
                dry_run: parsed
                    .query
                    .get("dryRun")
                    .map(str::to_string)
                    .into_iter()
                    .collect(),
            }
        }
        _ => RequestInfo {
            verb: method.as_str().to_ascii_lowercase(),
            ..RequestInfo::default()
        },
    };
    RequestLabels::of(&info)
}

/// Every stored object of a served resource, decoded (undecodable entries skipped).
fn list(server: &ApiServer, group: &str, version: &str, plural: &str) -> Vec<Value> {
    let Some(resource) = server.objects.registry().find(group, version, plural) else {
        return Vec::new();
    };
    server
        .objects
        .list(resource, None)
        .entries
        .iter()
        .filter_map(|entry| decode_as(resource, entry).ok())
        .collect()
}

fn text_response(body: String) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, tessera_metrics::CONTENT_TYPE)],
        body,
    )
        .into_response()
}

fn rendered(result: Result<String, tessera_metrics::Error>) -> ApiResult<Response> {
    result
        .map(text_response)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// The page of `/metrics` (`component: None`) or `/components/<component>/metrics`.
pub fn serve(server: &ApiServer, component: Option<&str>, path: &str) -> ApiResult<Response> {
    let Some(registries) = server.metrics() else {
        return Err(ApiError::no_route(path));
    };
    match component {
        None => {
            let mut counted = BTreeSet::new();
            let mut counts = Vec::new();
            for resource in server.objects.registry().all() {
                let label = if resource.group().is_empty() {
                    resource.plural().to_string()
                } else {
                    format!("{}.{}", resource.plural(), resource.group())
                };
                if resource.info.create_only || !counted.insert(label.clone()) {
                    continue;
                }
                let count = server.objects.list(resource, None).entries.len();
                counts.push((label, i64::try_from(count).unwrap_or(i64::MAX)));
            }
            registries
                .apiserver
                .set_storage_objects(counts.iter().map(|(l, c)| (l.as_str(), *c)));
            rendered(tessera_metrics::render(&[&registries.apiserver.registry]))
        }
        Some("kube-scheduler") => {
            rendered(tessera_metrics::render(&[&registries.scheduler.registry]))
        }
        Some("kube-controller-manager") => {
            let controllers = &registries.controller_manager;
            controllers.update_unfinished(server.objects.now());
            rendered(tessera_metrics::render(&[&controllers.registry]))
        }
        Some("kueue") => {
            let objects = tessera_metrics::kueue::Objects {
                cluster_queues: list(server, "kueue.x-k8s.io", "v1beta2", "clusterqueues"),
                local_queues: list(server, "kueue.x-k8s.io", "v1beta2", "localqueues"),
                workloads: list(server, "kueue.x-k8s.io", "v1beta2", "workloads"),
            };
            let gauges = tessera_metrics::kueue::families(&objects)
                .map_err(|e| ApiError::internal(e.to_string()))?;
            rendered(tessera_metrics::render(&[
                &registries.kueue.registry,
                &gauges,
            ]))
        }
        Some("kube-state-metrics") => {
            let mut objects = tessera_metrics::ksm::Objects::default();
            for (plural, group) in tessera_metrics::ksm::RESOURCES {
                let items = list(server, group, "v1", plural);
                if let Some(slot) = objects.of_mut(plural) {
                    *slot = items;
                }
            }
            rendered(tessera_metrics::ksm::render(&objects))
        }
        Some(_) => Err(ApiError::no_route(path)),
    }
}
