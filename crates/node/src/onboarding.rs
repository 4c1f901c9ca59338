//! Controlled admission of a new accelerator node: it joins tainted
//! `node.tessera.dev/onboarding:NoSchedule`, is inventoried and labelled, then validated — what
//! the API shows for it (device-plugin resources in allocatable, or the devices of its DRA
//! ResourceSlices, and its GPU labels) must match what its server model should offer — and only
//! then opened: the taint goes and `node.tessera.dev/onboarding` reads `complete` (or `failed`,
//! with the taint kept and the reason in a warning event).
//!
//! The check and its outcome (the patch that opens or keeps closed the node, the event) are
//! pure; the twin reads the objects and applies the outcome.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::{Value, json};

use crate::topology::NodeSpec;

/// The taint a node joins with until it is validated.
pub const ONBOARDING_TAINT: &str = "node.tessera.dev/onboarding";
/// The label recording where the node is in onboarding: `validating`, `complete`, `failed`.
pub const ONBOARDING_LABEL: &str = "node.tessera.dev/onboarding";

/// Checks that the node as the API shows it offers what its hardware should; returns a summary
/// for the event, or what is missing.
pub fn validate(spec: &NodeSpec, node: &Node, slices: &[ResourceSlice]) -> Result<String, String> {
    let Some(hardware) = &spec.hardware else {
        return Ok("no accelerators to validate".into());
    };
    let labels = node.metadata.labels.clone().unwrap_or_default();
    for (key, value) in crate::accelerators::labels(hardware, spec.devices.as_ref()) {
        if labels.get(&key) != Some(&value) {
            return Err(format!("label {key}={value} is missing"));
        }
    }
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.clone())
        .unwrap_or_default();
    let expected = crate::accelerators::extended_resources(hardware, spec.devices.as_ref());
    for (resource, count) in &expected {
        let have = allocatable.get(resource).map(|q| q.0.as_str());
        if have != Some(count.to_string().as_str()) {
            return Err(format!(
                "allocatable {resource} is {}, expected {count}",
                have.unwrap_or("absent")
            ));
        }
    }
    let wanted_devices: usize = crate::resource_slice::resource_slices(spec)
        .iter()
        .filter_map(|slice| slice.pointer("/spec/devices")?.as_array().map(Vec::len))
        .sum();
    let published: usize = slices
        .iter()
        .filter(|slice| {
            slice.spec.node_name.as_deref() == Some(spec.name.as_str())
                && slice.spec.driver == crate::resource_slice::NVIDIA_DRIVER
        })
        .map(|slice| slice.spec.devices.as_ref().map_or(0, Vec::len))
        .sum();
    if published != wanted_devices {
        return Err(format!(
            "its ResourceSlices list {published} devices, expected {wanted_devices}"
        ));
    }
    let gpus = hardware.server.gpus.len();
    let model = hardware.gpu.as_ref().map_or("-", |g| g.name.as_str());
    Ok(format!(
        "validated {gpus} GPU(s) ({model}): labels, {} extended resource(s), {published} DRA device(s); opened for workloads",
        expected.len()
    ))
}

/// What onboarding does to a node: a merge patch of its label and taints, and the event.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The merge patch of the Node.
    pub patch: Value,
    /// The event's type (`Normal` or `Warning`).
    pub kind: &'static str,
    /// The event's reason.
    pub reason: &'static str,
    /// The event's message.
    pub message: String,
}

/// What onboarding decides for a node that is `validating` (none for nodes in another state):
/// [`validate`], then `complete` without the onboarding taint, or `failed` keeping it.
pub fn decide(spec: &NodeSpec, node: &Node, slices: &[ResourceSlice]) -> Option<Outcome> {
    let state = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ONBOARDING_LABEL).cloned());
    if state.as_deref() != Some("validating") {
        return None;
    }
    let (state, kind, reason, message) = match validate(spec, node, slices) {
        Ok(message) => ("complete", "Normal", "NodeOnboarded", message),
        Err(message) => ("failed", "Warning", "NodeOnboardingFailed", message),
    };
    let taints: Vec<Value> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| state != "complete" || t.key != ONBOARDING_TAINT)
        .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect}))
        .collect();
    // An empty list is removed (merge patch null), as a node without taints has none.
    let taints = if taints.is_empty() {
        Value::Null
    } else {
        json!(taints)
    };
    let patch = json!({"metadata": {"labels": {ONBOARDING_LABEL: state}},
        "spec": {"taints": taints}});
    Some(Outcome {
        patch,
        kind,
        reason,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;
    use serde_json::json;

    fn spec(name: &str) -> NodeSpec {
        Topology::default_lab()
            .nodes()
            .into_iter()
            .find(|n| n.name == name)
            .expect("node")
    }

    fn node(spec: &NodeSpec, allocatable: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": spec.name, "labels": spec.labels},
            "status": {"allocatable": allocatable},
        }))
        .expect("node")
    }

    #[test]
    fn validation_compares_what_the_api_shows_with_the_hardware() {
        let l40s = spec("l40s-1");
        assert!(validate(&l40s, &node(&l40s, json!({"nvidia.com/gpu": "16"})), &[]).is_ok());
        assert_eq!(
            validate(&l40s, &node(&l40s, json!({"nvidia.com/gpu": "12"})), &[]),
            Err("allocatable nvidia.com/gpu is 12, expected 16".into())
        );
        let h100 = spec("h100-1");
        let slices: Vec<ResourceSlice> = crate::resource_slice::resource_slices(&h100)
            .into_iter()
            .map(|s| serde_json::from_value(s).expect("slice"))
            .collect();
        let message = validate(&h100, &node(&h100, json!({})), &slices).expect("valid");
        assert!(message.contains("8 DRA device(s)"), "{message}");
        assert_eq!(
            validate(&h100, &node(&h100, json!({})), &[]),
            Err("its ResourceSlices list 0 devices, expected 8".into())
        );
        let mut unlabelled = node(&h100, json!({}));
        unlabelled.metadata.labels = None;
        assert!(validate(&h100, &unlabelled, &slices).is_err_and(|e| e.contains("is missing")));
    }

    #[test]
    fn a_validated_node_opens_and_a_failed_one_stays_tainted() {
        let l40s = spec("l40s-1");
        let joining = |allocatable: serde_json::Value, state: &str| -> Node {
            let mut node = node(&l40s, allocatable);
            let labels = node.metadata.labels.get_or_insert_default();
            labels.insert(ONBOARDING_LABEL.into(), state.into());
            node.spec = serde_json::from_value(json!({"taints": [
                {"key": ONBOARDING_TAINT, "effect": "NoSchedule"},
                {"key": "team", "value": "a", "effect": "NoSchedule"},
            ]}))
            .ok();
            node
        };
        let open = decide(
            &l40s,
            &joining(json!({"nvidia.com/gpu": "16"}), "validating"),
            &[],
        )
        .expect("validating");
        assert_eq!((open.kind, open.reason), ("Normal", "NodeOnboarded"));
        assert_eq!(
            open.patch,
            json!({"metadata": {"labels": {ONBOARDING_LABEL: "complete"}},
                "spec": {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}]}})
        );
        let failed = decide(&l40s, &joining(json!({}), "validating"), &[]).expect("validating");
        assert_eq!(
            (failed.kind, failed.reason),
            ("Warning", "NodeOnboardingFailed")
        );
        assert_eq!(
            failed.patch["metadata"]["labels"][ONBOARDING_LABEL],
            "failed"
        );
        assert_eq!(
            failed.patch["spec"]["taints"].as_array().map(Vec::len),
            Some(2)
        );
        assert_eq!(decide(&l40s, &joining(json!({}), "complete"), &[]), None);

        let mut untainted = joining(json!({"nvidia.com/gpu": "16"}), "validating");
        untainted.spec = None;
        let open = decide(&l40s, &untainted, &[]).expect("validating");
        assert_eq!(open.patch["spec"]["taints"], serde_json::Value::Null);
    }
}
