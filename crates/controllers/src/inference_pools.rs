//! The InferencePool status controller, as a shell over [`tessera_inference::pool`]:
//! reflectors on InferencePools, HTTPRoutes and Services; after each burst of changes (and
//! every 15 s) each pool's `status.parents` is recomputed — one entry per Tessera Gateway of
//! the routes that send to it, mirroring whether that Gateway accepted the route, and whether
//! `endpointPickerRef` resolves — and written through the status subresource when it changed.
//!
//! Decides nothing: the entries and their conditions are the core's. Knows nothing of how
//! requests are routed to a pool (the Gateway dataplane's business).

use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch};
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_inference::pool::{self, PoolSpec};
use tessera_model::clock::Clock;

use crate::shell::{listed, next_pass, patch_params, store_values, watched, watched_with};

/// The field manager of the controller's writes.
pub const MANAGER: &str = "tessera-gateway-controller";

/// InferencePools.
pub fn pool_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(pool::GROUP, pool::VERSION, pool::KIND),
        pool::PLURAL,
    )
}

/// HTTPRoutes, whose status says which Gateways accepted them.
pub fn route_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
        "httproutes",
    )
}

/// Runs the controller until the task is dropped, reading the time from `clock`.
pub async fn run(client: Client, clock: Clock) {
    let dynamic = |resource: ApiResource| {
        watched_with(
            Api::<DynamicObject>::all_with(client.clone(), &resource),
            resource,
        )
    };
    let (pools, pool_changes) = dynamic(pool_resource());
    let (routes, route_changes) = dynamic(route_resource());
    let (services, service_changes) = watched(Api::<k8s_openapi::api::core::v1::Service>::all(
        client.clone(),
    ));
    let mut changes = futures::stream::select_all([pool_changes, route_changes, service_changes]);
    let mut resync = tokio::time::interval(Duration::from_secs(15));
    while next_pass(&mut changes, &mut resync).await {
        if !(listed(&pools) && listed(&routes) && listed(&services)) {
            resync.reset_after(Duration::from_millis(200));
            continue;
        }
        let now = tessera_model::time::timestamp(clock());
        let routes = store_values(&routes);
        let services = store_values(&services);
        for pool_object in store_values(&pools) {
            if let Err(error) = sync(&client, &pool_object, &routes, &services, &now).await {
                tracing::warn!(%error, "InferencePool status write failed");
                resync.reset_after(Duration::from_millis(500));
            }
        }
    }
}

fn in_namespace(objects: &[Value], namespace: &str) -> Vec<Value> {
    objects
        .iter()
        .filter(|o| o["metadata"]["namespace"].as_str() == Some(namespace))
        .cloned()
        .collect()
}

async fn sync(
    client: &Client,
    pool_object: &Value,
    routes: &[Value],
    services: &[Value],
    now: &str,
) -> Result<(), kube::Error> {
    let namespace = pool_object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let name = pool_object["metadata"]["name"].as_str().unwrap_or_default();
    let spec = match PoolSpec::from_object(pool_object) {
        Ok(spec) => spec,
        Err(error) => {
            // The definition's schema refuses such pools; one stored before it is skipped.
            tracing::warn!(pool = %name, %namespace, %error, "InferencePool spec unreadable");
            return Ok(());
        }
    };
    let services = in_namespace(services, namespace);
    let entries = pool::parent_entries(pool_object, &spec, routes, &services);
    let Some(status) = pool::status(pool_object, &entries, now) else {
        return Ok(());
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &pool_resource());
    api.patch_status(
        name,
        &patch_params(MANAGER),
        &Patch::Merge(&json!({"status": status})),
    )
    .await?;
    Ok(())
}
