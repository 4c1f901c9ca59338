//! Objects every cluster starts with: the system namespaces, their default service accounts,
//! the system PriorityClasses and the bundled Kueue CustomResourceDefinitions
//! (`tessera_model::kueue::crd`, and the ProvisioningRequest check's from
//! `tessera_model::provisioning`, the network-policy-api's cluster-wide policy kinds from
//! `tessera_model::network_policy_api`, the CSI snapshot kinds and the simulated drivers'
//! VolumeSnapshotClasses from `tessera_storage::snapshots::crd`), installed when missing and
//! upgraded when Tessera bundles a different definition than the one it installed earlier;
//! and the bundled RuntimeClasses (`tessera_node::runtime_handlers`), created when missing.

use serde_json::{Value, json};
use tessera_api::Resource;
use tessera_api::write::{Part, WriteOptions};
use tessera_apiserver::Objects;
use tessera_model::kueue::crd::{BUNDLE_HASH_ANNOTATION, definitions};

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
    // Namespaces from earlier runs (or created while no controller ran) get theirs too.
    for entry in objects.list(namespaces, None).entries.iter() {
        if let Ok(namespace) = tessera_apiserver::objects::decode(entry)
            && let Some(name) = namespace.pointer("/metadata/name").and_then(|n| n.as_str())
        {
            objects.ensure_default_service_account(name);
        }
    }
    // The bootstrap RBAC policy and the identities of Tessera's own components.
    for object in tessera_api::policy::bootstrap() {
        let plural = match object["kind"].as_str() {
            Some("ClusterRole") => "clusterroles",
            _ => "clusterrolebindings",
        };
        let resource = Resource::find("rbac.authorization.k8s.io", "v1", plural)
            .ok_or_else(|| anyhow::anyhow!("{plural} are not served"))?;
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match objects.get(resource, None, &name) {
            Err(_) => {
                objects
                    .create(resource, None, object, &WriteOptions::default())
                    .map_err(|e| anyhow::anyhow!("create {plural} {name}: {e}"))?;
            }
            Ok(installed) if plural == "clusterroles" => {
                reconcile_role(objects, resource, &installed, &object)?;
            }
            Ok(_) => {}
        }
    }
    let accounts = Resource::find("", "v1", "serviceaccounts")
        .ok_or_else(|| anyhow::anyhow!("serviceaccounts are not served"))?;
    for component in tessera_api::policy::COMPONENTS {
        if objects
            .get(accounts, Some("kube-system"), component.name)
            .is_err()
        {
            let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": component.name}});
            objects
                .create(
                    accounts,
                    Some("kube-system"),
                    account,
                    &WriteOptions::default(),
                )
                .map_err(|e| anyhow::anyhow!("create service account {}: {e}", component.name))?;
        }
    }
    let classes = Resource::find("scheduling.k8s.io", "v1", "priorityclasses")
        .ok_or_else(|| anyhow::anyhow!("the priorityclasses resource is not served"))?;
    for (name, value, description) in tessera_api::admission::SYSTEM_PRIORITY_CLASSES {
        if objects.get(classes, None, name).is_ok() {
            continue;
        }
        let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "description": description});
        objects
            .create(classes, None, class, &WriteOptions::default())
            .map_err(|e| anyhow::anyhow!("create priority class {name}: {e}"))?;
    }
    ensure_storage(objects)?;
    ensure_runtime_classes(objects)?;
    ensure_bundled_definitions(objects)?;
    ensure_snapshot_classes(objects)
}

/// The simulated drivers' VolumeSnapshotClasses (`tessera_storage::snapshots::crd`), each
/// created when missing, once their definition is served.
fn ensure_snapshot_classes(objects: &Objects) -> anyhow::Result<()> {
    let resource = objects
        .registry()
        .find(
            tessera_storage::snapshots::GROUP,
            "v1",
            "volumesnapshotclasses",
        )
        .ok_or_else(|| anyhow::anyhow!("volumesnapshotclasses are not served"))?;
    create_missing(
        objects,
        resource,
        "volumesnapshotclass",
        tessera_storage::snapshots::crd::snapshot_classes(),
    )
}

/// Creates each of `wanted` (cluster-scoped objects of `resource`) not stored yet; what is
/// stored is left as the administrator made it.
fn create_missing(
    objects: &Objects,
    resource: Resource,
    kind: &str,
    wanted: impl IntoIterator<Item = serde_json::Value>,
) -> anyhow::Result<()> {
    for object in wanted {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if objects.get(resource, None, &name).is_ok() {
            continue;
        }
        objects
            .create(resource, None, object, &WriteOptions::default())
            .map_err(|e| anyhow::anyhow!("create {kind} {name}: {e}"))?;
    }
    Ok(())
}

/// The simulated CSI drivers' StorageClasses (the local one the default) and CSIDrivers
/// (`tessera_storage::csi`), each created when missing.
fn ensure_storage(objects: &Objects) -> anyhow::Result<()> {
    let bundle = [
        ("storageclasses", tessera_storage::csi::storage_classes()),
        ("csidrivers", tessera_storage::csi::csi_drivers()),
    ];
    for (plural, wanted) in bundle {
        let resource = Resource::find("storage.k8s.io", "v1", plural)
            .ok_or_else(|| anyhow::anyhow!("{plural} are not served"))?;
        create_missing(objects, resource, plural, wanted)?;
    }
    Ok(())
}

/// The bundled RuntimeClasses (`tessera_node::runtime_handlers::bundled_classes`: `nvidia`
/// and `kata`), each created when missing.
fn ensure_runtime_classes(objects: &Objects) -> anyhow::Result<()> {
    let resource = Resource::find("node.k8s.io", "v1", "runtimeclasses")
        .ok_or_else(|| anyhow::anyhow!("runtimeclasses are not served"))?;
    create_missing(
        objects,
        resource,
        "runtimeclass",
        tessera_node::runtime_handlers::bundled_classes(),
    )
}

/// The annotation that keeps a bootstrap role as its owner edited it (`"false"`).
const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// Adds the rules a bootstrap ClusterRole gained since it was installed (a newer Tessera's
/// components need more, e.g. the node twins reading network policies), as the API server's
/// auto-reconciliation does: additive only, and never for a role annotated
/// `rbac.authorization.kubernetes.io/autoupdate: "false"`.
fn reconcile_role(
    objects: &Objects,
    resource: Resource,
    installed: &Value,
    bundled: &Value,
) -> anyhow::Result<()> {
    let opted_out = installed
        .pointer(&format!(
            "/metadata/annotations/{}",
            AUTOUPDATE_ANNOTATION.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        == Some("false");
    let has = installed["rules"].as_array().cloned().unwrap_or_default();
    let missing: Vec<Value> = bundled["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|rule| !has.contains(rule))
        .cloned()
        .collect();
    if opted_out || missing.is_empty() {
        return Ok(());
    }
    let name = installed["metadata"]["name"].as_str().unwrap_or_default();
    objects
        .update_with(resource, None, name, Part::Main, |current| {
            let mut next = current.clone();
            let mut rules = next["rules"].as_array().cloned().unwrap_or_default();
            rules.extend(missing.iter().cloned());
            next["rules"] = Value::Array(rules);
            Ok(next)
        })
        .map_err(|e| anyhow::anyhow!("reconcile clusterrole {name}: {e}"))?;
    tracing::info!(role = %name, added = missing.len(), "reconciled a bootstrap role's rules");
    Ok(())
}

/// Installs each bundled CRD that is missing and upgrades the ones an earlier Tessera
/// installed (they carry [`BUNDLE_HASH_ANNOTATION`]) when the bundled definition differs. A
/// definition the user installed (Kueue's released manifests, say) is left as it is.
fn ensure_bundled_definitions(objects: &Objects) -> anyhow::Result<()> {
    let crds = Resource::find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .ok_or_else(|| anyhow::anyhow!("customresourcedefinitions are not served"))?;
    let hash = |crd: &Value| {
        crd.pointer(&format!(
            "/metadata/annotations/{}",
            BUNDLE_HASH_ANNOTATION.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .map(str::to_string)
    };
    for bundled in definitions()
        .into_iter()
        .chain(tessera_model::provisioning::definitions())
        .chain(tessera_model::multus::definitions())
        .chain(tessera_model::network_policy_api::definitions())
        .chain([tessera_maintenance::crd::definition()])
        .chain([tessera_inference::pool::definition()])
        .chain(tessera_storage::snapshots::crd::definitions())
        .chain(tessera_gateway::crd::definitions())
    {
        let name = bundled["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match objects.get(crds, None, &name) {
            Err(_) => {
                objects
                    .create(crds, None, bundled, &WriteOptions::default())
                    .map_err(|e| anyhow::anyhow!("install {name}: {e}"))?;
                tracing::info!(crd = %name, "installed the bundled definition");
            }
            Ok(installed) if hash(&installed).is_some() && hash(&installed) != hash(&bundled) => {
                objects
                    .update_with(crds, None, &name, Part::Main, |current| {
                        let mut next = current.clone();
                        next["spec"] = bundled["spec"].clone();
                        next["metadata"]["annotations"][BUNDLE_HASH_ANNOTATION] =
                            json!(hash(&bundled));
                        Ok(next)
                    })
                    .map_err(|e| anyhow::anyhow!("upgrade {name}: {e}"))?;
                tracing::info!(crd = %name, "upgraded the bundled definition");
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_store::{Store, StoreOptions};

    fn crds() -> Resource {
        Resource::find("apiextensions.k8s.io", "v1", "customresourcedefinitions").expect("served")
    }

    #[test]
    fn bootstrap_roles_regain_missing_rules_unless_opted_out() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store =
            Store::open(&dir.path().join("state.db"), StoreOptions::default()).expect("store");
        let objects = Objects::new(store);
        ensure_system_objects(&objects).expect("bootstrap");
        let roles =
            Resource::find("rbac.authorization.k8s.io", "v1", "clusterroles").expect("served");
        let twins = "system:controller:node-twins";
        let bundled = objects.get(roles, None, twins).expect("installed")["rules"].clone();
        let extra =
            json!({"apiGroups": ["example.com"], "resources": ["things"], "verbs": ["get"]});
        // An older Tessera's role: without its last rule, with one of the owner's.
        let older = |autoupdate: Option<&str>| {
            objects
                .update_with(roles, None, twins, Part::Main, |current| {
                    let mut next = current.clone();
                    let mut rules = bundled.as_array().cloned().unwrap_or_default();
                    rules.pop();
                    rules.push(extra.clone());
                    next["rules"] = json!(rules);
                    if let Some(value) = autoupdate {
                        next["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!(value);
                    }
                    Ok(next)
                })
                .expect("update");
        };
        let cases = [(None, true), (Some("true"), true), (Some("false"), false)];
        for (autoupdate, restored) in cases {
            older(autoupdate);
            ensure_system_objects(&objects).expect("bootstrap again");
            let rules = objects.get(roles, None, twins).expect("role")["rules"].clone();
            let rules = rules.as_array().cloned().unwrap_or_default();
            let last = bundled.as_array().and_then(|r| r.last()).expect("a rule");
            assert_eq!(rules.contains(last), restored, "{autoupdate:?}");
            assert!(
                rules.contains(&extra),
                "the owner's rule is kept: {autoupdate:?}"
            );
        }
    }

    #[test]
    fn bundled_definitions_are_installed_upgraded_and_users_ones_kept() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store =
            Store::open(&dir.path().join("state.db"), StoreOptions::default()).expect("store");
        let objects = Objects::new(store);
        ensure_system_objects(&objects).expect("bootstrap");
        let names: Vec<String> = definitions()
            .iter()
            .map(|d| {
                d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        assert_eq!(names.len(), 10, "Kueue's ten, MultiKueue's two among them");
        for name in &names {
            objects.get(crds(), None, name).expect("installed");
        }
        let annotation = format!(
            "/metadata/annotations/{}",
            BUNDLE_HASH_ANNOTATION.replace('/', "~1")
        );
        // An earlier bundle: older hash, a different spec. It is upgraded.
        let stale = |name: &str, hash: Option<&str>| {
            objects
                .update_with(crds(), None, name, Part::Main, |current| {
                    let mut next = current.clone();
                    next["spec"]["names"]["shortNames"] = json!(["old"]);
                    match hash {
                        Some(hash) => {
                            next["metadata"]["annotations"][BUNDLE_HASH_ANNOTATION] = json!(hash)
                        }
                        None => {
                            if let Some(annotations) = next
                                .pointer_mut("/metadata/annotations")
                                .and_then(Value::as_object_mut)
                            {
                                annotations.remove(BUNDLE_HASH_ANNOTATION);
                            }
                        }
                    }
                    Ok(next)
                })
                .expect("update");
        };
        stale(&names[1], Some("0"));
        // One the user installed (no bundle annotation): left alone.
        stale(&names[2], None);
        ensure_system_objects(&objects).expect("bootstrap again");
        let upgraded = objects.get(crds(), None, &names[1]).expect("upgraded");
        let bundled = &definitions()[1];
        assert_eq!(upgraded["spec"]["names"], bundled["spec"]["names"]);
        assert_eq!(upgraded.pointer(&annotation), bundled.pointer(&annotation));
        let kept = objects.get(crds(), None, &names[2]).expect("kept");
        assert_eq!(kept["spec"]["names"]["shortNames"], json!(["old"]));
    }
}
