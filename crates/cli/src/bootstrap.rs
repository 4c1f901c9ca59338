//! Objects every cluster starts with: the system namespaces.

use serde_json::json;
use tessera_apiserver::objects::WriteOptions;
use tessera_apiserver::{Objects, Resource};

/// Namespaces created on first start, as a fresh Kubernetes cluster has them.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Creates whatever system objects are missing.
pub fn ensure_system_objects(objects: &Objects) -> anyhow::Result<()> {
    let namespaces = Resource::find("", "v1", "namespaces")
        .ok_or_else(|| anyhow::anyhow!("the namespaces resource is not served"))?;
    for name in SYSTEM_NAMESPACES {
        if objects.get(namespaces, None, name).is_ok() {
            continue;
        }
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}});
        objects
            .create(namespaces, None, namespace, &WriteOptions::default())
            .map_err(|e| anyhow::anyhow!("create namespace {name}: {e}"))?;
    }
    Ok(())
}
