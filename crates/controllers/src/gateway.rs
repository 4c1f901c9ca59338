//! The built-in Gateway API controller (`tessera.dev/gateway-controller`) as a shell over
//! [`tessera_gateway`]: reflectors on GatewayClasses, Gateways, HTTPRoutes, GRPCRoutes,
//! ReferenceGrants, Services, Namespaces and InferencePools (whose status it also writes,
//! through `crate::inference_pools`); after each burst of changes (and every 15 s)
//! the core decides the whole model and every status that differs from the stored one is
//! written through the status subresource (a conflict waits for the next pass).
//!
//! Decides nothing: which classes are Tessera's, listeners, addresses, attachment and every
//! condition are the core's. Objects of other controllers' classes are never written.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::Value;
use tessera_gateway::status::{class_status, gateway_status, route_status};
use tessera_gateway::{ExtraBackendKind, GROUP, Inputs, Model, RouteKind};
use tessera_model::clock::Clock;
use tessera_model::json::text;

use crate::shell::{listed, next_pass, store_values, watched, watched_with};

/// The field manager of the controller's writes.
pub const MANAGER: &str = "tessera-gateway-controller";

/// The `gateway.networking.k8s.io` resource of `kind` (`plural`) at `version`.
pub fn resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, kind), plural)
}

/// The kinds the controller and the dataplane read, as (version, kind, plural).
pub const KINDS: [(&str, &str, &str); 5] = [
    ("v1", "GatewayClass", "gatewayclasses"),
    ("v1", "Gateway", "gateways"),
    ("v1", "HTTPRoute", "httproutes"),
    ("v1", "GRPCRoute", "grpcroutes"),
    ("v1beta1", "ReferenceGrant", "referencegrants"),
];

/// InferencePools as a backend kind of routes: references resolve when the pool exists, and
/// name no port (the pool's `targetPorts` say where its servers listen).
pub fn inference_pool_backends(
    pools: impl IntoIterator<Item = (String, String)>,
) -> ExtraBackendKind {
    ExtraBackendKind {
        group: tessera_inference::pool::GROUP.into(),
        kind: tessera_inference::pool::KIND.into(),
        port_required: false,
        objects: pools.into_iter().collect(),
    }
}

/// Runs the controller until the task is dropped, reading the time from `clock`.
pub async fn run(client: Client, clock: Clock) {
    let mut stores = Vec::new();
    let mut streams = Vec::new();
    for (version, kind, plural) in KINDS {
        let resource = resource(version, kind, plural);
        let (store, stream) = watched_with(
            Api::<DynamicObject>::all_with(client.clone(), &resource),
            resource,
        );
        stores.push(store);
        streams.push(stream);
    }
    let (services, service_changes) = watched(Api::<Service>::all(client.clone()));
    let (namespaces, namespace_changes) = watched(Api::<Namespace>::all(client.clone()));
    let pool_resource = crate::inference_pools::pool_resource();
    let (pools, pool_changes) = watched_with(
        Api::<DynamicObject>::all_with(client.clone(), &pool_resource),
        pool_resource,
    );
    streams.push(service_changes);
    streams.push(namespace_changes);
    streams.push(pool_changes);
    let mut changes = futures::stream::select_all(streams);
    let mut resync = tokio::time::interval(Duration::from_secs(15));
    while next_pass(&mut changes, &mut resync).await {
        if !(stores.iter().all(listed)
            && listed(&services)
            && listed(&namespaces)
            && listed(&pools))
        {
            resync.reset_after(Duration::from_millis(200));
            continue;
        }
        let typed = |i: usize| {
            let (version, kind, _) = KINDS[i];
            store_values(&stores[i])
                .into_iter()
                .map(|mut v| {
                    v["apiVersion"] = Value::from(format!("{GROUP}/{version}"));
                    v["kind"] = Value::from(kind);
                    v
                })
                .collect::<Vec<_>>()
        };
        let inputs = Inputs {
            classes: typed(0),
            gateways: typed(1),
            http_routes: typed(2),
            grpc_routes: typed(3),
            reference_grants: typed(4),
            services: store_values(&services),
            namespaces: store_values(&namespaces),
            extra_backends: vec![inference_pool_backends(store_values(&pools).iter().map(
                |pool| {
                    (
                        text(pool, "/metadata/namespace").to_string(),
                        text(pool, "/metadata/name").to_string(),
                    )
                },
            ))],
            ..Inputs::default()
        };
        let written = pass(&client, &clock, &inputs).await;
        // InferencePools' status follows the routes' as this controller last wrote them.
        let pools_written = crate::inference_pools::sync_all(
            &client,
            &store_values(&pools),
            &inputs.http_routes,
            &inputs.services,
            &tessera_model::time::timestamp(clock()),
        )
        .await;
        if !(written && pools_written) {
            resync.reset_after(Duration::from_millis(500));
        }
    }
}

/// Writes every status that changed; false when a write failed.
async fn pass(client: &Client, clock: &Clock, inputs: &Inputs) -> bool {
    let model = Model::build(inputs);
    let now = tessera_model::time::timestamp(clock());
    let mut writes: Vec<(usize, &Value, Value)> = Vec::new();
    for class in &inputs.classes {
        if let Some(status) = class_status(&model, class, &now) {
            writes.push((0, class, status));
        }
    }
    for gateway in &inputs.gateways {
        if let Some(status) = gateway_status(&model, gateway, &now) {
            writes.push((1, gateway, status));
        }
    }
    for (i, kind, routes) in [
        (2, RouteKind::Http, &inputs.http_routes),
        (3, RouteKind::Grpc, &inputs.grpc_routes),
    ] {
        for route in routes {
            if let Some(status) = route_status(&model, kind, route, &now) {
                writes.push((i, route, status));
            }
        }
    }
    let mut ok = true;
    for (i, object, status) in writes {
        if object.get("status") == Some(&status) {
            continue;
        }
        if let Err(error) = write_status(client, i, object, status).await {
            tracing::debug!(%error, name = %text(object, "/metadata/name"),
                "gateway status write failed; retried");
            ok = false;
        }
    }
    ok
}

async fn write_status(
    client: &Client,
    kind: usize,
    object: &Value,
    status: Value,
) -> Result<(), kube::Error> {
    let (version, kind_name, plural) = KINDS[kind];
    let resource = resource(version, kind_name, plural);
    let namespace = text(object, "/metadata/namespace");
    let api = if namespace.is_empty() {
        Api::<DynamicObject>::all_with(client.clone(), &resource)
    } else {
        Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
    };
    let mut next = object.clone();
    next["status"] = status;
    let next: DynamicObject = serde_json::from_value(next).map_err(kube::Error::SerdeError)?;
    let params = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    api.replace_status(text(object, "/metadata/name"), &params, &next)
        .await?;
    tracing::info!(kind = kind_name, name = %text(object, "/metadata/name"), "wrote a Gateway API status");
    Ok(())
}
