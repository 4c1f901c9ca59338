//! The kubelet's volume mounts, as decisions: what `MountVolume.SetUp` fails with. A pod's
//! `secret`, `configMap` and `projected` volumes naming objects that do not exist (and are
//! not `optional`) fail as the kubelet's secret and configMap volume plugins fail
//! (`secret "<name>" not found`, `configmap "<name>" not found`, a projected volume's errors
//! aggregated); and the injected mount faults of `tessera fault volume` ([`MountFault`]) fail
//! a CSI volume as the kubelet's CSI mounter and a CSI node plugin would (permission denied,
//! a missing node-publish secret, no space left on device, a stale file handle).
//!
//! Pure: the caller says which secrets and config maps exist and which fault is injected; it
//! writes the `FailedMount` events. It knows nothing of claims' binding (the twin waits for
//! Bound claims first) nor of how a fault gets onto a node.

use serde_json::Value;
use tessera_model::json::text;

/// The kubelet's root directory, where pods' volumes are mounted.
const KUBELET_ROOT: &str = "/var/lib/kubelet";

/// A mount failure injected on a node (`fault.tessera.dev/volume: <value>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MountFault {
    /// The node plugin's `mount` fails (`mount failed: exit status 32`).
    MountFailure,
    /// The kubelet may not create the volume's directory (`permission denied`).
    Permission,
    /// The volume's node-publish secret cannot be fetched (`secrets "<name>" not found`).
    MissingSecret,
    /// The node's disk is full (`no space left on device`).
    FullDisk,
    /// The volume's data went stale under the mount (`stale NFS file handle`).
    StaleData,
}

impl MountFault {
    /// Every fault, in the order `tessera fault volume --kind` lists them.
    pub const ALL: [MountFault; 5] = [
        MountFault::MountFailure,
        MountFault::Permission,
        MountFault::MissingSecret,
        MountFault::FullDisk,
        MountFault::StaleData,
    ];

    /// The annotation value (and `--kind` value) naming the fault.
    pub fn as_str(self) -> &'static str {
        match self {
            MountFault::MountFailure => "mount-failure",
            MountFault::Permission => "permission",
            MountFault::MissingSecret => "missing-secret",
            MountFault::FullDisk => "full-disk",
            MountFault::StaleData => "stale-data",
        }
    }

    /// The fault an annotation value names; `None` for an unknown value.
    pub fn parse(value: &str) -> Option<MountFault> {
        MountFault::ALL.into_iter().find(|f| f.as_str() == value)
    }
}

/// The CSI volume a pod mounts: what the kubelet's mount error messages name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiMount<'a> {
    /// The PersistentVolume's name (`pvc-<uid>`), the volume the kubelet names.
    pub volume: &'a str,
    /// The pod's UID (its directory under the kubelet's root).
    pub pod_uid: &'a str,
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The volume's `spec.csi.nodePublishSecretRef` as (namespace, name), if it has one.
    pub publish_secret: Option<(&'a str, &'a str)>,
}

impl<'a> CsiMount<'a> {
    /// The mount of the PersistentVolume `volume` (JSON as the API shows it) by the pod
    /// `pod_uid` of `namespace`.
    pub fn of(volume: &'a Value, pod_uid: &'a str, namespace: &'a str) -> CsiMount<'a> {
        let secret = volume.pointer("/spec/csi/nodePublishSecretRef");
        let publish_secret = secret
            .map(|s| (text(s, "/namespace"), text(s, "/name")))
            .filter(|(_, name)| !name.is_empty());
        CsiMount {
            volume: text(volume, "/metadata/name"),
            pod_uid,
            namespace,
            publish_secret,
        }
    }
}

/// The directory the kubelet's CSI mounter creates for a volume of a pod (`getTargetPath`'s
/// parent of `mount`).
fn csi_volume_dir(mount: &CsiMount<'_>) -> String {
    format!(
        "{KUBELET_ROOT}/pods/{}/volumes/kubernetes.io~csi/{}",
        mount.pod_uid, mount.volume
    )
}

/// The kubelet's `FailedMount` message for a CSI volume under `fault`, as its operation
/// generator writes it (`MountVolume.SetUp failed for volume "<pv>" : <error>`), the error
/// being what the CSI mounter (`kubernetes.io/csi: …`) or the node plugin (a gRPC status)
/// returned.
pub fn failed_mount_message(fault: MountFault, mount: &CsiMount<'_>) -> String {
    let dir = csi_volume_dir(mount);
    let error = match fault {
        MountFault::MountFailure => {
            "rpc error: code = Internal desc = mount failed: exit status 32".to_string()
        }
        MountFault::Permission => format!(
            "kubernetes.io/csi: mounter.SetUpAt failed to create dir {dir:?}:  mkdir {dir}: permission denied"
        ),
        MountFault::MissingSecret => {
            let (namespace, name) = mount
                .publish_secret
                .unwrap_or((mount.namespace, DEFAULT_PUBLISH_SECRET));
            format!(
                "fetching NodePublishSecretRef {namespace}/{name} failed: kubernetes.io/csi: failed to find the secret {name} in the namespace {namespace} with error: secrets \"{name}\" not found"
            )
        }
        MountFault::FullDisk => {
            let file = format!("{dir}/vol_data.json");
            format!(
                "kubernetes.io/csi: mounter.SetUpAt failed to save volume info data: kubernetes.io/csi: failed to save volume data file {file}: open {file}: no space left on device"
            )
        }
        MountFault::StaleData => {
            format!("rpc error: code = Internal desc = stat {dir}/mount: stale NFS file handle")
        }
    };
    set_up_failed(mount.volume, &error)
}

/// The secret a volume without a `nodePublishSecretRef` is said to miss under
/// [`MountFault::MissingSecret`].
pub const DEFAULT_PUBLISH_SECRET: &str = "csi-node-publish-secret";

/// `MountVolume.SetUp failed for volume "<volume>" : <error>` (upstream's
/// `GenerateErrorDetailed` event text).
pub fn set_up_failed(volume: &str, error: &str) -> String {
    format!("MountVolume.SetUp failed for volume {volume:?} : {error}")
}

/// An object a volume of the pod reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source<'a> {
    /// A Secret of the pod's namespace.
    Secret(&'a str),
    /// A ConfigMap of the pod's namespace.
    ConfigMap(&'a str),
}

impl Source<'_> {
    /// The kubelet's not-found error (its secret and configMap managers name the resource
    /// in the singular).
    fn not_found(self) -> String {
        match self {
            Source::Secret(name) => format!("secret {name:?} not found"),
            Source::ConfigMap(name) => format!("configmap {name:?} not found"),
        }
    }
}

/// The Secrets and ConfigMaps the pod's volumes read, as (volume, source, optional): a
/// `secret` or `configMap` volume, or each such source of a `projected` volume.
pub fn pod_sources(pod: &Value) -> Vec<(&str, Source<'_>, bool)> {
    let optional = |v: &Value| v.get("optional").and_then(Value::as_bool).unwrap_or(false);
    let mut sources = Vec::new();
    for volume in pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = text(volume, "/name");
        if let Some(secret) = volume.get("secret") {
            sources.push((
                name,
                Source::Secret(text(secret, "/secretName")),
                optional(secret),
            ));
        }
        if let Some(map) = volume.get("configMap") {
            sources.push((name, Source::ConfigMap(text(map, "/name")), optional(map)));
        }
        for projection in volume
            .pointer("/projected/sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(secret) = projection.get("secret") {
                sources.push((
                    name,
                    Source::Secret(text(secret, "/name")),
                    optional(secret),
                ));
            }
            if let Some(map) = projection.get("configMap") {
                sources.push((name, Source::ConfigMap(text(map, "/name")), optional(map)));
            }
        }
    }
    sources
}

/// The `FailedMount` messages of the pod's secret, configMap and projected volumes whose
/// objects are missing, one per volume in the pod's order; empty when every volume can be
/// set up. `exists` says whether a source exists in the pod's namespace. A missing optional
/// source is no failure (the volume is set up without it); a projected volume missing several
/// reports them together as upstream's error aggregate (`[a, b]`, repeats once).
pub fn missing_sources(pod: &Value, exists: impl Fn(Source<'_>) -> bool) -> Vec<String> {
    let mut failures: Vec<(&str, Vec<String>)> = Vec::new();
    for (volume, source, optional) in pod_sources(pod) {
        if optional || exists(source) {
            continue;
        }
        let error = source.not_found();
        match failures.iter_mut().find(|(v, _)| *v == volume) {
            Some((_, errors)) => {
                if !errors.contains(&error) {
                    errors.push(error);
                }
            }
            None => failures.push((volume, vec![error])),
        }
    }
    failures
        .into_iter()
        .map(|(volume, errors)| {
            let error = match errors.as_slice() {
                [one] => one.clone(),
                many => format!("[{}]", many.join(", ")),
            };
            set_up_failed(volume, &error)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn volume(secret: Option<Value>) -> Value {
        let mut csi = json!({"driver": "local.csi.tessera.dev", "volumeHandle": "h"});
        if let Some(secret) = secret {
            csi["nodePublishSecretRef"] = secret;
        }
        json!({"metadata": {"name": "pvc-1234"}, "spec": {"csi": csi}})
    }

    #[test]
    fn fault_kinds_round_trip_their_annotation_values() {
        for fault in MountFault::ALL {
            assert_eq!(MountFault::parse(fault.as_str()), Some(fault));
        }
        assert_eq!(MountFault::parse("full"), None);
        assert_eq!(MountFault::parse(""), None);
    }

    #[test]
    fn each_fault_fails_the_csi_mount_as_the_kubelet_reports_it() {
        let dir = "/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/pvc-1234";
        let prefix = "MountVolume.SetUp failed for volume \"pvc-1234\" : ";
        let cases = [
            (
                MountFault::MountFailure,
                "rpc error: code = Internal desc = mount failed: exit status 32".to_string(),
            ),
            (
                MountFault::Permission,
                format!(
                    "kubernetes.io/csi: mounter.SetUpAt failed to create dir \"{dir}\":  mkdir {dir}: permission denied"
                ),
            ),
            (
                MountFault::MissingSecret,
                "fetching NodePublishSecretRef team/csi-node-publish-secret failed: kubernetes.io/csi: failed to find the secret csi-node-publish-secret in the namespace team with error: secrets \"csi-node-publish-secret\" not found".to_string(),
            ),
            (
                MountFault::FullDisk,
                format!(
                    "kubernetes.io/csi: mounter.SetUpAt failed to save volume info data: kubernetes.io/csi: failed to save volume data file {dir}/vol_data.json: open {dir}/vol_data.json: no space left on device"
                ),
            ),
            (
                MountFault::StaleData,
                format!("rpc error: code = Internal desc = stat {dir}/mount: stale NFS file handle"),
            ),
        ];
        let pv = volume(None);
        let mount = CsiMount::of(&pv, "uid-1", "team");
        for (fault, error) in cases {
            assert_eq!(
                failed_mount_message(fault, &mount),
                format!("{prefix}{error}"),
                "{fault:?}"
            );
        }
    }

    #[test]
    fn a_missing_secret_names_the_volumes_publish_secret_when_it_has_one() {
        let pv = volume(Some(json!({"namespace": "creds", "name": "nfs-auth"})));
        let mount = CsiMount::of(&pv, "uid-1", "team");
        assert_eq!(mount.publish_secret, Some(("creds", "nfs-auth")));
        assert_eq!(
            failed_mount_message(MountFault::MissingSecret, &mount),
            "MountVolume.SetUp failed for volume \"pvc-1234\" : fetching NodePublishSecretRef creds/nfs-auth failed: kubernetes.io/csi: failed to find the secret nfs-auth in the namespace creds with error: secrets \"nfs-auth\" not found"
        );
    }

    fn pod(volumes: Value) -> Value {
        json!({"metadata": {"namespace": "team", "name": "p"}, "spec": {"volumes": volumes}})
    }

    #[test]
    fn missing_secrets_and_config_maps_fail_their_volumes_unless_optional() {
        let volumes = json!([
            {"name": "creds", "secret": {"secretName": "db"}},
            {"name": "settings", "configMap": {"name": "app"}},
            {"name": "maybe", "secret": {"secretName": "extra", "optional": true}},
            {"name": "maybe-map", "configMap": {"name": "extra", "optional": true}},
            {"name": "present", "secret": {"secretName": "tls"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
            {"name": "bundle", "projected": {"sources": [
                {"secret": {"name": "db"}},
                {"configMap": {"name": "app"}},
                {"secret": {"name": "db"}},
                {"configMap": {"name": "ca", "optional": true}},
                {"serviceAccountToken": {"path": "token"}},
                {"downwardAPI": {"items": []}}
            ]}},
            {"name": "one", "projected": {"sources": [{"configMap": {"name": "app"}}, {"secret": {"name": "tls"}}]}}
        ]);
        let exists = |source: Source<'_>| source == Source::Secret("tls");
        let cases: [(&str, Value, Vec<&str>); 4] = [
            (
                "each volume in the pod's order; the projected errors aggregated, repeats once",
                volumes.clone(),
                vec![
                    "MountVolume.SetUp failed for volume \"creds\" : secret \"db\" not found",
                    "MountVolume.SetUp failed for volume \"settings\" : configmap \"app\" not found",
                    "MountVolume.SetUp failed for volume \"bundle\" : [secret \"db\" not found, configmap \"app\" not found]",
                    "MountVolume.SetUp failed for volume \"one\" : configmap \"app\" not found",
                ],
            ),
            ("no volumes", json!(null), vec![]),
            (
                "only optional and present sources",
                json!([{"name": "maybe", "secret": {"secretName": "extra", "optional": true}},
                       {"name": "present", "secret": {"secretName": "tls"}}]),
                vec![],
            ),
            (
                "optional false is required",
                json!([{"name": "creds", "secret": {"secretName": "db", "optional": false}}]),
                vec!["MountVolume.SetUp failed for volume \"creds\" : secret \"db\" not found"],
            ),
        ];
        for (what, volumes, expected) in cases {
            assert_eq!(missing_sources(&pod(volumes), exists), expected, "{what}");
        }
        // Once every object exists, nothing fails.
        assert!(missing_sources(&pod(volumes), |_| true).is_empty());
    }

    #[test]
    fn pod_sources_list_what_the_kubelet_fetches() {
        let pod = pod(json!([
            {"name": "a", "secret": {"secretName": "s"}},
            {"name": "b", "projected": {"sources": [{"configMap": {"name": "m", "optional": true}}]}}
        ]));
        assert_eq!(
            pod_sources(&pod),
            vec![
                ("a", Source::Secret("s"), false),
                ("b", Source::ConfigMap("m"), true)
            ]
        );
    }
}
