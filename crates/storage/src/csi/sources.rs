//! external-provisioner's data sources for the simulated drivers: a claim whose `dataSourceRef`
//! (or `dataSource`) names a VolumeSnapshot is restored from it (`getSnapshotSource`: bound to a
//! content of the class's driver, ready, no larger than the claim), one naming a
//! PersistentVolumeClaim is cloned from it (`getPVCSource`), each refusal with upstream's
//! message. The volume created records its content source in its `volumeAttributes`
//! ([`CONTENT_SOURCE_ATTRIBUTE`]), as the CSI `VolumeContentSource` the driver was handed.
//!
//! Knows nothing of clients; other kinds are left to a volume populator.

use serde_json::Value;
use tessera_model::json::text;

use crate::objects::{is_deleting, name, namespace, requested_storage, uid};
use crate::snapshots::GROUP;

/// The volume attribute naming where a volume's data came from: `snapshot/<snapshotHandle>`
/// or `volume/<volumeHandle>`.
pub const CONTENT_SOURCE_ATTRIBUTE: &str = "csi.tessera.dev/content-source";

/// The objects a claim's data source is read from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sources<'a> {
    /// PersistentVolumeClaims (clone sources).
    pub claims: &'a [Value],
    /// PersistentVolumes (clone sources' volumes).
    pub volumes: &'a [Value],
    /// VolumeSnapshots.
    pub snapshots: &'a [Value],
    /// VolumeSnapshotContents.
    pub contents: &'a [Value],
}

/// Why a claim is not provisioned from its data source now.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Not the provisioner's business (a populator's kind).
    Ignored,
    /// Provisioning fails with this description (after `failed to provision volume with
    /// StorageClass …: `).
    Failed(String),
}

fn find<'a>(objects: &'a [Value], ns: &str, wanted: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| name(o) == wanted && (ns.is_empty() || namespace(o) == ns))
}

/// The claim's data source as (apiGroup, kind, name), `dataSourceRef` first.
fn data_source(claim: &Value) -> Option<(&str, &str, &str)> {
    ["/spec/dataSourceRef", "/spec/dataSource"]
        .iter()
        .filter_map(|p| claim.pointer(p).filter(|s| s.is_object()))
        .map(|s| (text(s, "/apiGroup"), text(s, "/kind"), text(s, "/name")))
        .next()
}

/// The content source of `claim` for a volume of `class`: `None` without a data source.
pub fn content_source(
    claim: &Value,
    class: &Value,
    sources: Sources<'_>,
) -> Result<Option<String>, Refusal> {
    let Some((group, kind, source)) = data_source(claim) else {
        return Ok(None);
    };
    if source.is_empty() {
        return Err(Refusal::Failed(format!(
            "the PVC source not found for PVC {}",
            name(claim)
        )));
    }
    let handle = |error: String| {
        Refusal::Failed(format!(
            "error getting handle for DataSource Type {kind} by Name {source}: {error}"
        ))
    };
    match kind {
        "VolumeSnapshot" => {
            if group != GROUP {
                return Err(Refusal::Failed(format!(
                    "the PVC source does not belong to the right APIGroup. Expected {GROUP}, Got {group}"
                )));
            }
            snapshot_source(claim, class, source, sources)
                .map(|h| Some(format!("snapshot/{h}")))
                .map_err(handle)
        }
        "PersistentVolumeClaim" if group.is_empty() => clone_source(claim, class, source, sources)
            .map(|h| Some(format!("volume/{h}")))
            .map_err(handle),
        _ => Err(Refusal::Ignored),
    }
}

/// upstream's `getSnapshotSource`: the snapshot handle.
fn snapshot_source(
    claim: &Value,
    class: &Value,
    source: &str,
    sources: Sources<'_>,
) -> Result<String, String> {
    let Some(snapshot) = find(sources.snapshots, namespace(claim), source) else {
        return Err(format!(
            "error getting snapshot {source} from api server: volumesnapshots.snapshot.storage.k8s.io {source:?} not found"
        ));
    };
    if is_deleting(snapshot) {
        return Err(format!("snapshot {source} is being deleted"));
    }
    let bound = text(snapshot, "/status/boundVolumeSnapshotContentName");
    if bound.is_empty() {
        return Err(format!("snapshot {source} not bound"));
    }
    let Some(content) = find(sources.contents, "", bound) else {
        return Err(format!(
            "error getting snapshotcontent {bound} for snapshot {source}"
        ));
    };
    if text(content, "/spec/volumeSnapshotRef/uid") != uid(snapshot)
        || text(content, "/spec/volumeSnapshotRef/namespace") != namespace(snapshot)
        || text(content, "/spec/volumeSnapshotRef/name") != name(snapshot)
    {
        return Err(format!(
            "snapshotcontent {bound} for snapshot {source} is bound to a different snapshot"
        ));
    }
    if text(content, "/spec/driver") != text(class, "/provisioner") {
        return Err(format!(
            "snapshotcontent {bound} for snapshot {source} is not handled by CSI driver of StorageClass {}",
            name(class)
        ));
    }
    if snapshot.pointer("/status/readyToUse") != Some(&Value::Bool(true)) {
        return Err(format!("snapshot {source} is not Ready"));
    }
    let handle = text(content, "/status/snapshotHandle");
    if handle.is_empty() {
        return Err(format!("snapshot handle {source} is not available"));
    }
    if let Some(size) = snapshot
        .pointer("/status/restoreSize")
        .and_then(Value::as_str)
        .and_then(|q| q.parse::<tessera_model::Quantity>().ok())
    {
        let requested = requested_storage(claim).value();
        if requested < size.value() {
            return Err(format!(
                "requested volume size {requested} is less than the size {} for the source snapshot {source}",
                size.value()
            ));
        }
    }
    Ok(handle.to_string())
}

/// upstream's `getPVCSource`: the source volume's handle.
fn clone_source(
    claim: &Value,
    class: &Value,
    source: &str,
    sources: Sources<'_>,
) -> Result<String, String> {
    let Some(original) = find(sources.claims, namespace(claim), source) else {
        return Err(format!(
            "error getting PVC {source} (namespace {:?}) from api server: persistentvolumeclaim {source:?} not found",
            namespace(claim)
        ));
    };
    let phase = text(original, "/status/phase");
    if phase != "Bound" {
        return Err(format!(
            "the PVC DataSource {source} must have a status of Bound.  Got &PersistentVolumeClaimStatus{{Phase:{phase},}}"
        ));
    }
    if is_deleting(original) {
        return Err(format!(
            "the PVC DataSource {source} is currently being deleted"
        ));
    }
    let requested = requested_storage(claim).value();
    let size = requested_storage(original).value();
    if requested < size {
        return Err(format!(
            "error, new PVC request must be greater than or equal in size to the specified PVC data source, requested {requested} but source is {size}"
        ));
    }
    let invalid = || "claim in dataSource not bound or invalid".to_string();
    let volume =
        find(sources.volumes, "", text(original, "/spec/volumeName")).ok_or_else(invalid)?;
    if text(volume, "/spec/csi/driver") != text(class, "/provisioner")
        || text(volume, "/spec/claimRef/uid") != uid(original)
        || text(volume, "/status/phase") != "Bound"
    {
        return Err(invalid());
    }
    Ok(text(volume, "/spec/csi/volumeHandle").to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::csi::{LOCAL_DRIVER, Provisioning, provision_from};
    use crate::objects::ANN_STORAGE_PROVISIONER;
    use crate::testing::with;

    fn claim(size: &str, source: Value) -> Value {
        json!({
            "metadata": {"namespace": "ns", "name": "restored", "uid": "r1",
                         "annotations": {ANN_STORAGE_PROVISIONER: LOCAL_DRIVER,
                                         "volume.kubernetes.io/selected-node": "n1"}},
            "spec": {"storageClassName": "tessera-local", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": size}}, "dataSourceRef": source},
            "status": {"phase": "Pending"},
        })
    }

    fn snapshot_ref() -> Value {
        json!({"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": "snap"})
    }

    fn snapshot() -> Value {
        json!({"metadata": {"namespace": "ns", "name": "snap", "uid": "s1"},
               "status": {"boundVolumeSnapshotContentName": "snapcontent-s1",
                          "readyToUse": true, "restoreSize": "2Gi"}})
    }

    fn content() -> Value {
        json!({"metadata": {"name": "snapcontent-s1"},
               "spec": {"driver": LOCAL_DRIVER,
                        "volumeSnapshotRef": {"namespace": "ns", "name": "snap", "uid": "s1"}},
               "status": {"snapshotHandle": "snapshot-k1", "readyToUse": true}})
    }

    fn classes() -> Vec<Value> {
        crate::csi::storage_classes()
    }

    fn outcome(
        claim: &Value,
        snapshots: &[Value],
        contents: &[Value],
        claims: &[Value],
        volumes: &[Value],
    ) -> String {
        let sources = Sources {
            claims,
            volumes,
            snapshots,
            contents,
        };
        let disk = |_: &str| "100Gi".parse().ok();
        match provision_from(claim, &classes(), &[], sources, disk) {
            Provisioning::Skip => "skip".into(),
            Provisioning::Create { volume, .. } => format!(
                "create {} {}",
                text(&volume, "/spec/capacity/storage"),
                text(
                    &volume,
                    "/spec/csi/volumeAttributes/csi.tessera.dev~1content-source"
                )
            ),
            Provisioning::Fail { message, .. } => format!("fail {message}"),
        }
    }

    #[test]
    fn restores_wait_for_a_ready_snapshot_and_refuse_smaller_claims() {
        let failed = |desc: &str| {
            format!(
                "fail failed to provision volume with StorageClass \"tessera-local\": error getting handle for DataSource Type VolumeSnapshot by Name snap: {desc}"
            )
        };
        // (case, claim, snapshots, contents, outcome)
        type Case = (&'static str, Value, Vec<Value>, Vec<Value>, String);
        let cases: Vec<Case> = vec![
            ("restored", claim("2Gi", snapshot_ref()), vec![snapshot()], vec![content()],
             "create 2Gi snapshot/snapshot-k1".into()),
            ("larger than the snapshot", claim("3Gi", snapshot_ref()), vec![snapshot()], vec![content()],
             "create 3Gi snapshot/snapshot-k1".into()),
            ("smaller than the snapshot", claim("1Gi", snapshot_ref()), vec![snapshot()], vec![content()],
             failed("requested volume size 1073741824 is less than the size 2147483648 for the source snapshot snap")),
            ("not ready", claim("2Gi", snapshot_ref()),
             vec![with(snapshot(), &[("/status/readyToUse", json!(false))])], vec![content()],
             failed("snapshot snap is not Ready")),
            ("not bound", claim("2Gi", snapshot_ref()), vec![with(snapshot(), &[("/status", json!({}))])], vec![],
             failed("snapshot snap not bound")),
            ("missing", claim("2Gi", snapshot_ref()), vec![], vec![],
             failed("error getting snapshot snap from api server: volumesnapshots.snapshot.storage.k8s.io \"snap\" not found")),
            ("another driver's content", claim("2Gi", snapshot_ref()), vec![snapshot()],
             vec![with(content(), &[("/spec/driver", json!("shared.csi.tessera.dev"))])],
             failed("snapshotcontent snapcontent-s1 for snapshot snap is not handled by CSI driver of StorageClass tessera-local")),
            ("wrong group", claim("2Gi", json!({"apiGroup": "example.com", "kind": "VolumeSnapshot", "name": "snap"})),
             vec![snapshot()], vec![content()],
             "fail failed to provision volume with StorageClass \"tessera-local\": the PVC source does not belong to the right APIGroup. Expected snapshot.storage.k8s.io, Got example.com".into()),
            ("a populator's kind", claim("2Gi", json!({"apiGroup": "example.com", "kind": "Populator", "name": "p"})),
             vec![], vec![], "skip".into()),
        ];
        for (case, claim, snapshots, contents, expected) in cases {
            assert_eq!(
                outcome(&claim, &snapshots, &contents, &[], &[]),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn clones_need_a_bound_source_no_larger() {
        let source = json!({
            "metadata": {"namespace": "ns", "name": "data", "uid": "c1"},
            "spec": {"volumeName": "pvc-c1", "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound"},
        });
        let volume = json!({"metadata": {"name": "pvc-c1"},
            "spec": {"claimRef": {"uid": "c1"}, "csi": {"driver": LOCAL_DRIVER, "volumeHandle": "local-c1"}},
            "status": {"phase": "Bound"}});
        let clone = |size: &str| {
            claim(
                size,
                json!({"kind": "PersistentVolumeClaim", "name": "data"}),
            )
        };
        let volumes = [volume];
        assert_eq!(
            outcome(
                &clone("1Gi"),
                &[],
                &[],
                std::slice::from_ref(&source),
                &volumes
            ),
            "create 1Gi volume/local-c1"
        );
        assert_eq!(
            outcome(
                &clone("1Gi"),
                &[],
                &[],
                &[with(source.clone(), &[("/status/phase", json!("Pending"))])],
                &volumes
            ),
            "fail failed to provision volume with StorageClass \"tessera-local\": error getting handle for DataSource Type PersistentVolumeClaim by Name data: the PVC DataSource data must have a status of Bound.  Got &PersistentVolumeClaimStatus{Phase:Pending,}"
        );
        assert_eq!(
            outcome(
                &clone("512Mi"),
                &[],
                &[],
                std::slice::from_ref(&source),
                &volumes
            ),
            "fail failed to provision volume with StorageClass \"tessera-local\": error getting handle for DataSource Type PersistentVolumeClaim by Name data: error, new PVC request must be greater than or equal in size to the specified PVC data source, requested 536870912 but source is 1073741824"
        );
    }
}
