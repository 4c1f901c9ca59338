//! InferencePools' status, as a shell over [`tessera_inference::pool`], written by the Gateway
//! controller's passes (`crate::gateway`, whose watches it shares): each pool's
//! `status.parents` is recomputed — one entry per Tessera Gateway of the routes that send to
//! it, mirroring whether that Gateway accepted the route, and whether `endpointPickerRef`
//! resolves — and written through the status subresource when it changed.
//!
//! Decides nothing: the entries and their conditions are the core's. Knows nothing of how
//! requests are routed to a pool (the Gateway dataplane's business).

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch};
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_inference::pool::{self, PoolSpec};

use crate::shell::patch_params;

/// InferencePools.
pub fn pool_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(pool::GROUP, pool::VERSION, pool::KIND),
        pool::PLURAL,
    )
}

/// Writes the status of every pool whose status changed, from the HTTPRoutes (as the
/// Gateway controller last wrote their status) and the Services; false when a write failed.
pub async fn sync_all(
    client: &Client,
    pools: &[Value],
    routes: &[Value],
    services: &[Value],
    now: &str,
) -> bool {
    let mut ok = true;
    for pool_object in pools {
        if let Err(error) = sync(client, pool_object, routes, services, now).await {
            tracing::debug!(%error, "InferencePool status write failed; retried");
            ok = false;
        }
    }
    ok
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
        &patch_params(crate::gateway::MANAGER),
        &Patch::Merge(&json!({"status": status})),
    )
    .await?;
    Ok(())
}
