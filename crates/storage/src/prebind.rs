//! kube-scheduler's VolumeBinding PreBind after its writes: upstream's `checkBindings`, the
//! question the binding cycle polls (every second, for `bindTimeoutSeconds`, 600 by default)
//! before it binds the pod — are the claims it pre-bound and the claims it asked to provision
//! all bound now, still waiting, or has the binding failed (a claim or volume gone, a volume's
//! `claimRef` reset, the provisioner sending the claim back by removing
//! `volume.kubernetes.io/selected-node`, a volume whose node affinity misses the node)?
//!
//! Pure: the caller hands in the [`Reservation`] it wrote, the node, and the claims and volumes
//! as they are now; it polls, times out and turns a failure into the `FailedScheduling` of the
//! binding cycle ([`prebind_failure`]). It knows nothing of the waiting itself.

use std::collections::BTreeMap;

use serde_json::Value;
use tessera_model::json::text;

use crate::objects::{
    ANN_BIND_COMPLETED, ANN_SELECTED_NODE, by_name, by_namespaced_name, check_node_affinity,
    claim_ref, has_annotation, name, namespace,
};
use crate::volume_binding::Reservation;

/// How long PreBind waits for the claims (`bindTimeoutSeconds`' default), in seconds.
pub const BIND_TIMEOUT_SECONDS: u64 = 600;

/// Where a pod's volume binding stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Every claim written is bound: the pod may be bound.
    Bound,
    /// Not yet: poll again.
    Waiting,
    /// The binding failed with upstream's error; the pod goes back to the queue.
    Failed(String),
}

/// `isPVCFullyBound`: bound to a volume, and the binding completed.
fn fully_bound(claim: &Value) -> bool {
    !text(claim, "/spec/volumeName").is_empty() && has_annotation(claim, ANN_BIND_COMPLETED)
}

/// upstream's `checkBindings` for the pod scheduled to `node` (its `labels`): `written` is what
/// PreBind wrote (volumes pre-bound to claims, claims annotated for provisioning), `claims`
/// and `volumes` the objects as they are now (at least those written, and the volumes the
/// claims now name).
pub fn check_bindings(
    written: &Reservation,
    node: &str,
    labels: &BTreeMap<String, String>,
    claims: &[Value],
    volumes: &[Value],
) -> Check {
    let affinity = |volume: &Value| {
        (!check_node_affinity(volume, labels)).then(|| {
            Check::Failed(format!(
                "pv {:?} node affinity doesn't match node {node:?}: no matching NodeSelectorTerms",
                name(volume)
            ))
        })
    };
    let mut waiting = false;
    for bound in &written.volumes {
        let Some(volume) = by_name(volumes, name(bound)) else {
            return Check::Failed(format!(
                "failed to check binding: pv {:?} not found",
                name(bound)
            ));
        };
        let claim_namespace = text(bound, "/spec/claimRef/namespace");
        let claim_name = text(bound, "/spec/claimRef/name");
        let Some(claim) = by_namespaced_name(claims, claim_namespace, claim_name) else {
            return Check::Failed(format!(
                "failed to check binding: pvc \"{claim_namespace}/{claim_name}\" not found"
            ));
        };
        if let Some(failed) = affinity(volume) {
            return failed;
        }
        if claim_ref(volume).is_none_or(|r| text(r, "/uid").is_empty()) {
            return Check::Failed(format!("ClaimRef got reset for pv {:?}", name(volume)));
        }
        waiting |= !fully_bound(claim);
    }
    for provisioned in &written.claims {
        let Some(claim) = by_namespaced_name(claims, namespace(provisioned), name(provisioned))
        else {
            return Check::Failed(format!(
                "failed to check provisioning pvc: pvc \"{}/{}\" not found",
                namespace(provisioned),
                name(provisioned)
            ));
        };
        if claim
            .pointer("/metadata/annotations")
            .is_none_or(Value::is_null)
        {
            return Check::Failed(format!(
                "selectedNode annotation reset for PVC {:?}",
                name(claim)
            ));
        }
        if crate::objects::annotation(claim, ANN_SELECTED_NODE) != Some(node) {
            // The provisioner failed and sent the claim back to the scheduler.
            return Check::Failed(format!("provisioning failed for PVC {:?}", name(claim)));
        }
        let volume_name = text(claim, "/spec/volumeName");
        if !volume_name.is_empty() {
            // A volume not seen yet is tolerated: the next poll looks again.
            let Some(volume) = by_name(volumes, volume_name) else {
                waiting = true;
                continue;
            };
            if let Some(failed) = affinity(volume) {
                return failed;
            }
        }
        waiting |= !fully_bound(claim);
    }
    if waiting {
        Check::Waiting
    } else {
        Check::Bound
    }
}

/// The `FailedScheduling` message of a binding cycle whose PreBind failed with `error` (the
/// framework's wrapping of VolumeBinding's `binding volumes: …`).
pub fn prebind_failure(error: &str) -> String {
    format!("running PreBind plugin \"VolumeBinding\": binding volumes: {error}")
}

/// The error of a PreBind that waited [`BIND_TIMEOUT_SECONDS`] in vain (the poll's context).
pub const TIMED_OUT: &str = "context deadline exceeded";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::with;
    use serde_json::json;

    fn claim(name: &str, annotations: Value, volume: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "team", "uid": format!("uid-{name}"),
            "annotations": annotations}, "spec": {"volumeName": volume}})
    }

    fn volume(name: &str, claim: Option<(&str, &str)>, node: Option<&str>) -> Value {
        let mut volume = json!({"metadata": {"name": name}, "spec": {}});
        if let Some((claim, uid)) = claim {
            volume["spec"]["claimRef"] = json!({"namespace": "team", "name": claim, "uid": uid});
        }
        if let Some(node) = node {
            volume["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}});
        }
        volume
    }

    #[test]
    fn provisioned_claims_are_waited_for_until_bound_or_sent_back() {
        let labels = BTreeMap::from([("kubernetes.io/hostname".to_string(), "n1".to_string())]);
        let asked = claim("data", json!({ANN_SELECTED_NODE: "n1"}), "");
        let written = Reservation {
            volumes: vec![],
            claims: vec![asked.clone()],
        };
        let done = json!({ANN_SELECTED_NODE: "n1", ANN_BIND_COMPLETED: "yes"});
        let cases = [
            ("not provisioned yet", vec![asked.clone()], vec![], Check::Waiting),
            (
                "bound, completed, on the node",
                vec![claim("data", done.clone(), "pvc-1")],
                vec![volume("pvc-1", Some(("data", "uid-data")), Some("n1"))],
                Check::Bound,
            ),
            (
                "named a volume the poll does not see yet",
                vec![claim("data", done.clone(), "pvc-1")],
                vec![],
                Check::Waiting,
            ),
            (
                "bound but not completed",
                vec![claim("data", json!({ANN_SELECTED_NODE: "n1"}), "pvc-1")],
                vec![volume("pvc-1", Some(("data", "uid-data")), Some("n1"))],
                Check::Waiting,
            ),
            (
                "the provisioner removed selected-node",
                vec![claim("data", json!({"other": "x"}), "")],
                vec![],
                Check::Failed("provisioning failed for PVC \"data\"".into()),
            ),
            (
                "selected another node",
                vec![claim("data", json!({ANN_SELECTED_NODE: "n2"}), "")],
                vec![],
                Check::Failed("provisioning failed for PVC \"data\"".into()),
            ),
            (
                "annotations gone",
                vec![with(asked.clone(), &[("/metadata/annotations", Value::Null)])],
                vec![],
                Check::Failed("selectedNode annotation reset for PVC \"data\"".into()),
            ),
            (
                "the volume lives on another node",
                vec![claim("data", done.clone(), "pvc-1")],
                vec![volume("pvc-1", Some(("data", "uid-data")), Some("n2"))],
                Check::Failed(
                    "pv \"pvc-1\" node affinity doesn't match node \"n1\": no matching NodeSelectorTerms"
                        .into(),
                ),
            ),
            (
                "the claim was deleted",
                vec![],
                vec![],
                Check::Failed(
                    "failed to check provisioning pvc: pvc \"team/data\" not found".into(),
                ),
            ),
        ];
        for (what, claims, volumes, expected) in cases {
            assert_eq!(
                check_bindings(&written, "n1", &labels, &claims, &volumes),
                expected,
                "{what}"
            );
        }
    }

    #[test]
    fn pre_bound_volumes_are_waited_for_until_their_claims_complete() {
        let labels = BTreeMap::from([("kubernetes.io/hostname".to_string(), "n1".to_string())]);
        let written = Reservation {
            volumes: vec![volume("static", Some(("data", "uid-data")), None)],
            claims: vec![],
        };
        let pending = claim("data", json!({}), "");
        let done = claim("data", json!({ANN_BIND_COMPLETED: "yes"}), "static");
        let cases = [
            (
                "the PV controller has not bound the claim yet",
                vec![pending.clone()],
                vec![volume("static", Some(("data", "uid-data")), None)],
                Check::Waiting,
            ),
            (
                "bound",
                vec![done.clone()],
                vec![volume("static", Some(("data", "uid-data")), None)],
                Check::Bound,
            ),
            (
                "claimRef reset",
                vec![pending.clone()],
                vec![volume("static", None, None)],
                Check::Failed("ClaimRef got reset for pv \"static\"".into()),
            ),
            (
                "the volume's affinity misses the node",
                vec![pending.clone()],
                vec![volume("static", Some(("data", "uid-data")), Some("n2"))],
                Check::Failed(
                    "pv \"static\" node affinity doesn't match node \"n1\": no matching NodeSelectorTerms"
                        .into(),
                ),
            ),
            (
                "the volume was deleted",
                vec![pending.clone()],
                vec![],
                Check::Failed("failed to check binding: pv \"static\" not found".into()),
            ),
        ];
        for (what, claims, volumes, expected) in cases {
            assert_eq!(
                check_bindings(&written, "n1", &labels, &claims, &volumes),
                expected,
                "{what}"
            );
        }
        assert_eq!(
            check_bindings(&Reservation::default(), "n1", &labels, &[], &[]),
            Check::Bound,
            "nothing written, nothing to wait for"
        );
    }

    #[test]
    fn failures_read_as_the_scheduler_reports_them() {
        assert_eq!(
            prebind_failure("provisioning failed for PVC \"data\""),
            "running PreBind plugin \"VolumeBinding\": binding volumes: provisioning failed for PVC \"data\""
        );
        assert_eq!(
            prebind_failure(TIMED_OUT),
            "running PreBind plugin \"VolumeBinding\": binding volumes: context deadline exceeded"
        );
    }
}
