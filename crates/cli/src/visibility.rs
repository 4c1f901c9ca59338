//! Kueue's visibility server on `tessera up`: `visibility.kueue.x-k8s.io` (`v1beta2`,
//! `v1beta1`) served through the API server as Kueue's `APIService` makes it appear —
//! `clusterqueues/<name>/pendingworkloads` and
//! `namespaces/<ns>/localqueues/<name>/pendingworkloads` with `limit` and `offset` —
//! answered by `tessera_queue::api::visibility` over the stored Kueue objects.
//!
//! Only reads the store and translates errors; the order and the document are the core's.

use std::sync::LazyLock;
use std::time::SystemTime;

use serde_json::Value;
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::request::{Query, ResourcePath};
use tessera_api::resource::Resource;
use tessera_apiserver::{AggregatedApi, Objects};
use tessera_model::{KindInfo, Subresource};
use tessera_queue::api::objects;
use tessera_queue::api::visibility::{self, GROUP, Page, SUBRESOURCE, VERSIONS, VisibilityError};

/// Kueue's visibility group.
pub struct Visibility;

static KINDS: LazyLock<Vec<KindInfo>> = LazyLock::new(|| {
    VERSIONS
        .iter()
        .flat_map(|version| {
            [
                ("clusterqueues", "clusterqueue", false),
                ("localqueues", "localqueue", true),
            ]
            .map(|(plural, singular, namespaced)| KindInfo {
                group: GROUP,
                version,
                kind: "PendingWorkloadsSummary",
                plural,
                singular: singular.to_owned(),
                namespaced,
                short_names: &[],
                categories: &[],
                subresources: &[Subresource::PendingWorkloads],
                definition: format!(
                    "sigs.k8s.io.kueue.apis.visibility.{version}.PendingWorkloadsSummary"
                ),
                schema: None,
                custom: None,
                create_only: false,
            })
        })
        .collect()
});

/// Kueue's stored objects, in their stored version, as the queue core reads them.
pub fn stored_kueue_objects(store: &Objects) -> objects::Objects {
    let list = |group: &str, version: &str, plural: &str| -> Vec<Value> {
        let resource = store
            .registry()
            .find(group, version, plural)
            .or_else(|| Resource::find(group, version, plural));
        resource
            .map(|resource| {
                store
                    .list(resource, None)
                    .entries
                    .iter()
                    .filter_map(|entry| tessera_apiserver::objects::decode(entry).ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let kueue = |plural: &str| {
        list(
            tessera_model::kueue::GROUP,
            tessera_model::kueue::STORAGE_VERSION,
            plural,
        )
    };
    objects::Objects {
        flavors: kueue("resourceflavors"),
        cluster_queues: kueue("clusterqueues"),
        cohorts: kueue("cohorts"),
        local_queues: kueue("localqueues"),
        workloads: objects::shared(kueue("workloads")),
        namespaces: list("", "v1", "namespaces"),
        topologies: kueue("topologies"),
        nodes: objects::shared(list("", "v1", "nodes")),
        ..Default::default()
    }
}

fn api_error(error: VisibilityError) -> ApiError {
    match error {
        VisibilityError::NotFound { resource, name } => ApiError::not_found(GROUP, resource, &name),
        VisibilityError::BadParameter { .. } => ApiError::bad_request(error.to_string()),
    }
}

impl AggregatedApi for Visibility {
    fn group(&self) -> &'static str {
        GROUP
    }

    fn kinds(&self) -> Vec<&'static KindInfo> {
        KINDS.iter().collect()
    }

    fn get(&self, store: &Objects, path: &ResourcePath, query: &Query) -> ApiResult<Value> {
        let no_route = || {
            let namespace = path
                .namespace
                .as_deref()
                .map(|ns| format!("namespaces/{ns}/"))
                .unwrap_or_default();
            ApiError::no_route(&format!(
                "/apis/{}/{}/{namespace}{}",
                path.group, path.version, path.plural
            ))
        };
        if !VERSIONS.contains(&path.version.as_str())
            || path.subresource.as_deref() != Some(SUBRESOURCE)
        {
            return Err(no_route());
        }
        let name = path.name.as_deref().ok_or_else(no_route)?;
        let page = Page::from_query(query.get("limit"), query.get("offset")).map_err(api_error)?;
        let stored = stored_kueue_objects(store);
        let now = SystemTime::now();
        let items = match (path.plural.as_str(), path.namespace.as_deref()) {
            ("clusterqueues", None) => {
                visibility::pending_in_cluster_queue(&stored, name, page, now)
            }
            ("localqueues", Some(namespace)) => {
                visibility::pending_in_local_queue(&stored, namespace, name, page, now)
            }
            _ => return Err(no_route()),
        }
        .map_err(api_error)?;
        Ok(visibility::summary(&items, &path.version))
    }
}
