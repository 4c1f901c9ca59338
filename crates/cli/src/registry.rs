//! The image registry `tessera up` serves (`tessera_model_store::registry`), and how it is
//! published: namespace `tessera-system`, Service `registry` (port 5000, no selector) with an
//! EndpointSlice at the registry's address on the pod network, ConfigMap `registry` (the
//! in-cluster host and the pull Secret's name), the `kubernetes.io/dockerconfigjson` Secret
//! `registry-pull`, and for the machine's clients `<data-dir>/registry.env` (host, endpoint,
//! user name, password) and `<data-dir>/registry-auth.json` (a `.dockerconfigjson` naming
//! both the in-cluster host and the machine's endpoint).
//!
//! What the objects hold is `tessera_node::registry`'s; this module starts the server, writes
//! the objects through `Objects` and the files, and hands the twins the registry's files.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use serde_json::Value;
use tessera_api::Resource;
use tessera_api::write::{Part, WriteOptions};
use tessera_apiserver::Objects;
use tessera_model::net::Ipv4Cidr;
use tessera_model_store::credentials::write_private;
use tessera_model_store::registry::Registry;
use tessera_node::registry as published;

/// The env file's name in the data directory.
pub const ENV_FILE: &str = "registry.env";
/// The `.dockerconfigjson` file's name in the data directory.
pub const AUTH_FILE: &str = "registry-auth.json";

/// Starts the registry on `listen` and publishes it; the server (stopped when dropped) and
/// what the twins need to pull from it.
pub async fn start_for_up(
    listen: SocketAddr,
    data_dir: &Path,
    objects: &Objects,
    pod_cidr: Ipv4Cidr,
) -> anyhow::Result<(Registry, tessera_twin::RegistryConfig)> {
    let registry = Registry::start(data_dir, listen)
        .await
        .context("start the image registry")?;
    let credentials = registry.credentials().clone();
    let endpoint = format!("http://{}", registry.address());
    let (user, password) = (
        credentials.access_key_id.as_str(),
        credentials.secret_access_key.as_str(),
    );
    let machine_host = registry.address().to_string();
    write_private(
        &data_dir.join(ENV_FILE),
        format!(
            "REGISTRY_HOST={}\nREGISTRY_ENDPOINT={endpoint}\nREGISTRY_USERNAME={user}\nREGISTRY_PASSWORD={password}\n",
            published::HOST
        )
        .as_bytes(),
    )?;
    write_private(
        &data_dir.join(AUTH_FILE),
        published::docker_config_json(&[published::HOST, &machine_host], user, password).as_bytes(),
    )?;
    let config = published::docker_config_json(&[published::HOST], user, password);
    publish(
        objects,
        &[
            published::namespace(),
            published::service(),
            published::endpoint_slice(published::endpoint_address(pod_cidr)),
            published::config_map(),
            published::pull_secret(published::NAMESPACE, published::PULL_SECRET, &config),
        ],
    )?;
    let twins = tessera_twin::RegistryConfig {
        storage: registry.storage(),
        credentials,
    };
    Ok((registry, twins))
}

fn resource_of(object: &Value) -> anyhow::Result<Resource> {
    let (group, version) = match object["apiVersion"].as_str().unwrap_or_default() {
        api if api.contains('/') => api.split_once('/').unwrap_or_default(),
        api => ("", api),
    };
    let plural = match object["kind"].as_str().unwrap_or_default() {
        "Namespace" => "namespaces",
        "Service" => "services",
        "EndpointSlice" => "endpointslices",
        "ConfigMap" => "configmaps",
        "Secret" => "secrets",
        other => anyhow::bail!("the registry publishes no {other}"),
    };
    Resource::find(group, version, plural).with_context(|| format!("{plural} are not served"))
}

/// Creates each object when missing; an existing one gets the fields Tessera sets (a
/// Service's ports, an EndpointSlice's endpoints, data) only when they differ, so restarts
/// write nothing.
fn publish(objects: &Objects, wanted: &[Value]) -> anyhow::Result<()> {
    for object in wanted {
        let resource = resource_of(object)?;
        let namespace = object["metadata"]["namespace"].as_str();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let fields: &[&str] = match kind {
            "Service" => &["spec"],
            "EndpointSlice" => &["endpoints", "ports"],
            "ConfigMap" => &["data"],
            "Secret" => &["data", "type"],
            _ => &[],
        };
        let Ok(current) = objects.get(resource, namespace, name) else {
            objects
                .create(
                    resource,
                    namespace,
                    object.clone(),
                    &WriteOptions::default(),
                )
                .map_err(|e| anyhow::anyhow!("create the registry's {kind} {name}: {e}"))?;
            continue;
        };
        let differs = fields.iter().any(|field| match *field {
            // The Service's allocated address is the API's; only its ports are Tessera's.
            "spec" => current["spec"]["ports"] != object["spec"]["ports"],
            field => current[field] != object[field],
        });
        if !differs {
            continue;
        }
        objects
            .update_with(resource, namespace, name, Part::Main, |current| {
                let mut next = current.clone();
                for field in fields {
                    if *field == "spec" {
                        next["spec"]["ports"] = object["spec"]["ports"].clone();
                        if let Some(spec) = next["spec"].as_object_mut() {
                            spec.remove("selector");
                        }
                    } else {
                        next[*field] = object[*field].clone();
                    }
                }
                Ok(next)
            })
            .map_err(|e| anyhow::anyhow!("update the registry's {kind} {name}: {e}"))?;
    }
    Ok(())
}
