//! kube-controller-manager's ephemeral volume controller (`pkg/controller/ephemeral`) as a
//! decision: the PersistentVolumeClaims a pod's generic ephemeral volumes need that do not
//! exist yet, each `<pod>-<volume>`, owned by the pod (so the garbage collector deletes it
//! with the pod), with the template's labels, annotations and spec.
//!
//! Knows nothing of watches or writes; a claim of that name that another owner holds is left
//! alone (the scheduler's PreFilter says why the pod waits).

use serde_json::{Value, json};
use tessera_model::json::text;

use crate::objects::{by_namespaced_name, is_deleting, name, namespace, pod_is_terminated, uid};

/// The event the controller records on the pod when a creation fails.
pub const FAILED_BINDING: &str = "FailedBinding";

/// The component that records the controller's events.
pub const COMPONENT: &str = "ephemeral_volume";

/// The claims to create for `pod`'s generic ephemeral volumes, given the claims of the
/// cluster: none for a pod that is terminated or being deleted.
pub fn claims_to_create(pod: &Value, claims: &[Value]) -> Vec<Value> {
    if is_deleting(pod) || pod_is_terminated(pod) {
        return Vec::new();
    }
    pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|volume| {
            let template = volume.pointer("/ephemeral/volumeClaimTemplate")?;
            let claim_name = format!("{}-{}", name(pod), text(volume, "/name"));
            if by_namespaced_name(claims, namespace(pod), &claim_name).is_some() {
                return None;
            }
            let mut metadata = json!({
                "name": claim_name,
                "namespace": namespace(pod),
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name(pod),
                    "uid": uid(pod), "controller": true, "blockOwnerDeletion": true}],
            });
            for field in ["labels", "annotations"] {
                if let Some(value) = template
                    .pointer(&format!("/metadata/{field}"))
                    .filter(|v| !v.is_null())
                {
                    metadata[field] = value.clone();
                }
            }
            Some(json!({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": metadata,
                "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(extra_volume: Value) -> Value {
        json!({
            "metadata": {"namespace": "ml", "name": "trainer", "uid": "p1"},
            "spec": {"volumes": [
                {"name": "config", "configMap": {"name": "c"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                    "metadata": {"labels": {"app": "train"}},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "1Gi"}}}}}},
                extra_volume,
            ]},
            "status": {"phase": "Pending"},
        })
    }

    #[test]
    fn each_template_becomes_a_claim_the_pod_owns() {
        let pod = pod(json!({"name": "data", "persistentVolumeClaim": {"claimName": "d"}}));
        let existing = json!({"metadata": {"namespace": "other", "name": "trainer-scratch"}});
        let table: [(&str, Value, Vec<Value>, Vec<&str>); 4] = [
            ("a new pod", pod.clone(), vec![], vec!["trainer-scratch"]),
            (
                "a namesake elsewhere",
                pod.clone(),
                vec![existing],
                vec!["trainer-scratch"],
            ),
            (
                "the claim exists",
                pod.clone(),
                vec![json!({"metadata": {"namespace": "ml", "name": "trainer-scratch"}})],
                vec![],
            ),
            (
                "a finished pod",
                crate::testing::with(pod.clone(), &[("/status/phase", json!("Succeeded"))]),
                vec![],
                vec![],
            ),
        ];
        for (case, pod, claims, want) in table {
            let created = claims_to_create(&pod, &claims);
            let names: Vec<&str> = created.iter().map(name).collect();
            assert_eq!(names, want, "{case}");
        }
        let claim = &claims_to_create(&pod, &[])[0];
        assert_eq!(claim["metadata"]["namespace"], "ml");
        assert_eq!(claim["metadata"]["labels"], json!({"app": "train"}));
        assert_eq!(claim["metadata"]["ownerReferences"][0]["uid"], "p1");
        assert_eq!(claim["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "1Gi");
    }
}
