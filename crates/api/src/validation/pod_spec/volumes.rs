//! A pod spec's volumes and what its containers mount from them, as upstream's
//! `ValidateVolumes`, `ValidateVolumeMounts` and `ValidateVolumeDevices` check them: unique,
//! DNS-label names, exactly one source each, mounts and devices that name a valid volume,
//! unique mount and device paths that do not clash, relative sub-paths without `..`.
//!
//! Checks only a few fields inside each volume source; knows nothing about whether the
//! claims, secrets or config maps named exist.

use std::collections::{BTreeMap, BTreeSet};
use tessera_model::json::Pointer as _;

use serde_json::{Value, json};

use super::{formats, items, required_text, text};
use crate::error::Cause;

/// Volume sources in upstream's order, each with the name upstream's "more than 1 volume
/// type" error gives it (`cephFS` and the `downwarAPI` typo are upstream's own).
const SOURCES: &[(&str, &str)] = &[
    ("emptyDir", "emptyDir"),
    ("hostPath", "hostPath"),
    ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"),
    ("nfs", "nfs"),
    ("iscsi", "iscsi"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"),
    ("rbd", "rbd"),
    ("cinder", "cinder"),
    ("cephfs", "cephFS"),
    ("quobyte", "quobyte"),
    ("downwardAPI", "downwarAPI"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("configMap", "configMap"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("storageos", "storageos"),
    ("projected", "projected"),
    ("scaleIO", "scaleIO"),
    ("csi", "csi"),
    ("ephemeral", "ephemeral"),
    ("image", "image"),
];

const HOST_PATH_TYPES: &[&str] = &[
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];

/// What a volume's source allows a container to do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A persistent volume claim (named or ephemeral): may be a block device.
    Claim,
    /// An OCI image: no sub-paths.
    Image,
    /// Anything else.
    Other,
}

/// The volumes containers may refer to: every valid volume, by name.
#[derive(Debug, Default)]
pub struct Known {
    kinds: BTreeMap<String, Kind>,
}

/// Checks `spec.volumes`; `implied` names the claim volumes a controller adds to each pod
/// (a StatefulSet's `volumeClaimTemplates`, which replace template volumes of the same name).
pub fn check_volumes(spec: &Value, path: &str, implied: &[&str], causes: &mut Vec<Cause>) -> Known {
    let mut known = Known::default();
    for (index, volume) in items(spec, "volumes").iter().enumerate() {
        let at = format!("{path}.volumes[{index}]");
        let mut errors = Vec::new();
        let kind = check_source(volume, &at, &mut errors);
        let name = required_text(volume, "name", &at, &mut errors);
        let name_path = format!("{at}.name");
        if !name.is_empty() {
            errors.extend(
                formats::dns_label(name)
                    .into_iter()
                    .map(|problem| Cause::invalid(&name_path, &json!(name), problem)),
            );
        }
        if known.kinds.contains_key(name) {
            errors.push(Cause::duplicate(&name_path, &json!(name)));
        }
        if errors.is_empty() && !name.is_empty() {
            known.kinds.insert(name.to_string(), kind);
        }
        causes.extend(errors);
    }
    for name in implied {
        known.kinds.insert((*name).to_string(), Kind::Claim);
    }
    known
}

/// Exactly one source, and the few rules of each source this server checks.
fn check_source(volume: &Value, at: &str, errors: &mut Vec<Cause>) -> Kind {
    let mut chosen = None;
    for (key, shown) in SOURCES {
        let Some(source) = volume.get(*key) else {
            continue;
        };
        if chosen.is_some() {
            errors.push(Cause::forbidden(
                format!("{at}.{shown}"),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        chosen = Some(match *key {
            "persistentVolumeClaim" | "ephemeral" => Kind::Claim,
            "image" => Kind::Image,
            _ => Kind::Other,
        });
        let source_path = format!("{at}.{key}");
        match *key {
            "hostPath" => {
                let host_path = required_text(source, "path", &source_path, errors);
                if !host_path.is_empty() {
                    errors.extend(backsteps(host_path, &format!("{source_path}.path")));
                    if let Some(kind) = text(source, "type")
                        && !HOST_PATH_TYPES.contains(&kind)
                    {
                        errors.push(Cause::not_supported(
                            format!("{source_path}.type"),
                            &json!(kind),
                            HOST_PATH_TYPES,
                        ));
                    }
                }
            }
            "persistentVolumeClaim" => {
                required_text(source, "claimName", &source_path, errors);
            }
            "ephemeral" if source.get("volumeClaimTemplate").is_none() => {
                errors.push(Cause::required(format!(
                    "{source_path}.volumeClaimTemplate"
                )));
            }
            _ => {}
        }
    }
    if chosen.is_none() {
        errors.push(Cause::required_because(at, "must specify a volume type"));
    }
    chosen.unwrap_or(Kind::Other)
}

/// `validatePathNoBacksteps`.
fn backsteps(target: &str, at: &str) -> Option<Cause> {
    target
        .split('/')
        .any(|part| part == "..")
        .then(|| Cause::invalid(at, &json!(target), "must not contain '..'"))
}

/// `validateLocalDescendingPath`: relative, without `..`.
fn local_descending(target: &str, at: &str, causes: &mut Vec<Cause>) {
    if target.starts_with('/') {
        causes.push(Cause::invalid(
            at,
            &json!(target),
            "must be a relative path",
        ));
    }
    causes.extend(backsteps(target, at));
}

/// `(name, path)` of each entry of a container's list.
fn named_paths<'v>(container: &'v Value, list: &str, path_key: &str) -> Vec<(&'v str, &'v str)> {
    items(container, list)
        .iter()
        .map(|entry| {
            (
                text(entry, "name").unwrap_or_default(),
                text(entry, path_key).unwrap_or_default(),
            )
        })
        .collect()
}

/// A container's `volumeMounts`, against the pod's volumes and the container's devices.
pub fn check_mounts(container: &Value, at: &str, known: &Known, causes: &mut Vec<Cause>) {
    let devices = named_paths(container, "volumeDevices", "devicePath");
    let mounts_path = format!("{at}.volumeMounts");
    let mut mount_points = BTreeSet::new();
    let privileged = container
        .at("/securityContext/privileged")
        .and_then(Value::as_bool)
        == Some(true);
    for (index, mount) in items(container, "volumeMounts").iter().enumerate() {
        let entry = format!("{mounts_path}[{index}]");
        let name = required_text(mount, "name", &entry, causes);
        let kind = known.kinds.get(name);
        if kind.is_none() {
            causes.push(Cause::not_found(
                format!("{entry}.name"),
                &json!(name),
                None,
            ));
        }
        let mount_path = required_text(mount, "mountPath", &entry, causes);
        if !mount_points.insert(mount_path) {
            causes.push(Cause::invalid(
                format!("{entry}.mountPath"),
                &json!(mount_path),
                "must be unique",
            ));
        }
        if devices.iter().any(|(device, _)| *device == name) {
            causes.push(Cause::invalid(
                format!("{entry}.name"),
                &json!(name),
                "must not already exist in volumeDevices",
            ));
        }
        if devices.iter().any(|(_, path)| *path == mount_path) {
            causes.push(Cause::invalid(
                format!("{entry}.mountPath"),
                &json!(mount_path),
                "must not already exist as a path in volumeDevices",
            ));
        }
        let sub_path = text(mount, "subPath").unwrap_or_default();
        let sub_path_expr = text(mount, "subPathExpr").unwrap_or_default();
        if kind == Some(&Kind::Image) {
            for (key, value) in [("subPath", sub_path), ("subPathExpr", sub_path_expr)] {
                if !value.is_empty() {
                    causes.push(Cause::invalid(
                        format!("{entry}.{key}"),
                        &json!(value),
                        "not allowed in image volume sources",
                    ));
                }
            }
        }
        // Upstream names these paths on the list, not the entry
        // (`volumeMounts.subPath`); kept so clients see the same fields.
        if !sub_path.is_empty() {
            local_descending(sub_path, &format!("{mounts_path}.subPath"), causes);
        }
        if !sub_path_expr.is_empty() {
            if !sub_path.is_empty() {
                causes.push(Cause::invalid(
                    format!("{entry}.subPathExpr"),
                    &json!(sub_path_expr),
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            local_descending(sub_path_expr, &format!("{mounts_path}.subPathExpr"), causes);
        }
        let propagation = text(mount, "mountPropagation");
        if let Some(propagation) = propagation {
            let at = format!("{mounts_path}.mountPropagation");
            const SUPPORTED: &[&str] = &["Bidirectional", "HostToContainer", "None"];
            if !SUPPORTED.contains(&propagation) {
                causes.push(Cause::not_supported(&at, &json!(propagation), SUPPORTED));
            }
            if propagation == "Bidirectional" && !privileged {
                causes.push(Cause::forbidden(
                    at,
                    "Bidirectional mount propagation is available only to privileged containers",
                ));
            }
        }
        check_recursive_read_only(mount, propagation, &mounts_path, causes);
    }
}

/// `validateMountRecursiveReadOnly`.
fn check_recursive_read_only(
    mount: &Value,
    propagation: Option<&str>,
    mounts_path: &str,
    causes: &mut Vec<Cause>,
) {
    let Some(mode) = text(mount, "recursiveReadOnly") else {
        return;
    };
    let at = format!("{mounts_path}.recursiveReadOnly");
    match mode {
        "Disabled" => {}
        "Enabled" | "IfPossible" => {
            if mount.get("readOnly").and_then(Value::as_bool) != Some(true) {
                causes.push(Cause::forbidden(
                    &at,
                    "may only be specified when readOnly is true",
                ));
            }
            if propagation.is_some_and(|p| p != "None") {
                causes.push(Cause::forbidden(
                    &at,
                    "may only be specified when mountPropagation is None or not specified",
                ));
            }
        }
        other => causes.push(Cause::not_supported(
            &at,
            &json!(other),
            &["Disabled", "Enabled", "IfPossible"],
        )),
    }
}

/// A container's `volumeDevices`: claim volumes only, unique, not also mounted.
pub fn check_devices(container: &Value, at: &str, known: &Known, causes: &mut Vec<Cause>) {
    let mounts = named_paths(container, "volumeMounts", "mountPath");
    let devices_path = format!("{at}.volumeDevices");
    let mut names = BTreeSet::new();
    let mut paths = BTreeSet::new();
    for (index, device) in items(container, "volumeDevices").iter().enumerate() {
        let entry = format!("{devices_path}[{index}]");
        let name_path = format!("{entry}.name");
        let name = required_text(device, "name", &entry, causes);
        if names.contains(name) {
            causes.push(Cause::invalid(&name_path, &json!(name), "must be unique"));
        }
        match known.kinds.get(name) {
            Some(Kind::Claim) => {}
            Some(_) => causes.push(Cause::invalid(
                &name_path,
                &json!(name),
                "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
            )),
            None => causes.push(Cause::not_found(&name_path, &json!(name), None)),
        }
        let device_path = required_text(device, "devicePath", &entry, causes);
        let path_at = format!("{entry}.devicePath");
        if paths.contains(device_path) {
            causes.push(Cause::invalid(
                &path_at,
                &json!(device_path),
                "must be unique",
            ));
        }
        if !device_path.is_empty() && backsteps(device_path, &path_at).is_some() {
            causes.push(Cause::invalid(
                &path_at,
                &json!(device_path),
                "can not contain backsteps ('..')",
            ));
        } else {
            paths.insert(device_path);
        }
        if mounts.iter().any(|(mount, _)| *mount == name) {
            causes.push(Cause::invalid(
                &name_path,
                &json!(name),
                "must not already exist in volumeMounts",
            ));
        }
        if mounts.iter().any(|(_, path)| *path == device_path) {
            causes.push(Cause::invalid(
                &path_at,
                &json!(device_path),
                "must not already exist as a path in volumeMounts",
            ));
        }
        if !name.is_empty() {
            names.insert(name);
        }
    }
}
