//! The RuntimeClass admission plugin, as upstream's `plugin/pkg/admission/runtimeclass`
//! decides it on pod CREATE: a pod naming an unknown class is refused; the class's
//! `overhead.podFixed` becomes the pod's `spec.overhead` (a pod that states a different one,
//! or one without a class defining it, is refused); the class's `scheduling.nodeSelector` is
//! merged into the pod's (a key with another value is a conflict) and its
//! `scheduling.tolerations` merged with the pod's as `tolerations.MergeTolerations` does.
//! Messages are upstream's, each refusal a 403 Forbidden.
//!
//! Pure: the caller looks the class up (the admission chain through its `Lister`); knows
//! nothing of the store, of nodes or of runtime handlers.

use std::collections::BTreeMap;
use tessera_model::json::Pointer as _;

use serde_json::{Map, Value, json};
use tessera_model::Quantity;

/// Why the plugin refuses a pod; `Display` is upstream's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `spec.runtimeClassName` names no RuntimeClass.
    #[error("pod rejected: RuntimeClass {0:?} not found")]
    NotFound(String),
    /// The pod states an overhead other than its class's.
    #[error("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")]
    OverheadMismatch,
    /// The pod states an overhead its class (or its lack of one) does not define.
    #[error("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")]
    OverheadWithoutClass,
    /// The class's node selector and the pod's disagree on a key.
    #[error(
        "conflict: runtimeClass.scheduling.nodeSelector[{key}] = {class}; pod.spec.nodeSelector[{key}] = {pod}"
    )]
    NodeSelectorConflict {
        /// The label key.
        key: String,
        /// The class's value.
        class: String,
        /// The pod's value.
        pod: String,
    },
}

/// The class a pod names (`spec.runtimeClassName`), if any.
pub fn class_name(pod: &Value) -> Option<&str> {
    pod.at("/spec/runtimeClassName").and_then(Value::as_str)
}

/// Admits a new pod against the RuntimeClass it names: `lookup` finds a class by name.
/// Mutates the pod (overhead, node selector, tolerations) as the plugin's `Admit` does, then
/// checks it as its `Validate` does.
pub fn admit(pod: &mut Value, lookup: impl Fn(&str) -> Option<Value>) -> Result<(), Refusal> {
    let class = match class_name(pod) {
        Some(name) => Some(lookup(name).ok_or_else(|| Refusal::NotFound(name.to_string()))?),
        None => None,
    };
    if let Some(class) = &class {
        set_overhead(pod, class)?;
        set_scheduling(pod, class)?;
    }
    validate_overhead(pod, class.as_ref())
}

/// A resource list read semantically: quantities by resource name (unreadable ones as
/// written, so they still compare unequal to anything else).
fn resource_list(value: &Value) -> BTreeMap<String, Result<Quantity, String>> {
    value
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, q)| {
            let text = q
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| q.to_string());
            (name.clone(), text.parse::<Quantity>().map_err(|_| text))
        })
        .collect()
}

/// `apiequality.Semantic.DeepEqual` of two resource lists: quantities by value, an absent
/// list the same as an empty one.
fn same_resources(a: Option<&Value>, b: Option<&Value>) -> bool {
    let read = |v: Option<&Value>| v.map(resource_list).unwrap_or_default();
    read(a) == read(b)
}

/// The class's `overhead.podFixed` when the class defines an overhead (`Some(Null)` for an
/// overhead without `podFixed`).
fn class_overhead(class: &Value) -> Option<Value> {
    let overhead = class.get("overhead").filter(|o| !o.is_null())?;
    Some(overhead.get("podFixed").cloned().unwrap_or(Value::Null))
}

/// The pod's `spec.overhead` when set.
fn pod_overhead(pod: &Value) -> Option<&Value> {
    pod.at("/spec/overhead").filter(|o| !o.is_null())
}

/// Upstream's `setOverhead`.
fn set_overhead(pod: &mut Value, class: &Value) -> Result<(), Refusal> {
    let Some(fixed) = class_overhead(class) else {
        return Ok(());
    };
    let fixed = Some(&fixed).filter(|f| !f.is_null());
    if let Some(given) = pod_overhead(pod)
        && !same_resources(fixed, Some(given))
    {
        return Err(Refusal::OverheadMismatch);
    }
    let Some(spec) = spec_mut(pod) else {
        return Ok(());
    };
    match fixed {
        Some(fixed) => {
            spec.insert("overhead".into(), fixed.clone());
        }
        None => {
            spec.remove("overhead");
        }
    }
    Ok(())
}

/// Upstream's `validateOverhead`.
fn validate_overhead(pod: &Value, class: Option<&Value>) -> Result<(), Refusal> {
    match class.and_then(class_overhead) {
        Some(fixed) => {
            let fixed = Some(&fixed).filter(|f| !f.is_null());
            if same_resources(fixed, pod_overhead(pod)) {
                Ok(())
            } else {
                Err(Refusal::OverheadMismatch)
            }
        }
        None if pod_overhead(pod).is_some() => Err(Refusal::OverheadWithoutClass),
        None => Ok(()),
    }
}

/// Upstream's `setScheduling`.
fn set_scheduling(pod: &mut Value, class: &Value) -> Result<(), Refusal> {
    let Some(scheduling) = class.get("scheduling").filter(|s| !s.is_null()) else {
        return Ok(());
    };
    let class_selector = scheduling
        .get("nodeSelector")
        .and_then(Value::as_object)
        .cloned();
    let pod_selector = pod
        .at("/spec/nodeSelector")
        .and_then(Value::as_object)
        .cloned();
    let selector = match (pod_selector, class_selector) {
        (None, class_selector) => class_selector,
        (Some(mut selector), class_selector) => {
            for (key, class_value) in class_selector.into_iter().flatten() {
                if let Some(pod_value) = selector.get(&key)
                    && pod_value != &class_value
                {
                    return Err(Refusal::NodeSelectorConflict {
                        class: plain(&class_value),
                        pod: plain(pod_value),
                        key,
                    });
                }
                selector.insert(key, class_value);
            }
            Some(selector)
        }
    };
    let class_tolerations: Vec<Value> = scheduling
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let pod_tolerations: Vec<Value> = pod
        .at("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tolerations = merge_tolerations(&pod_tolerations, &class_tolerations);
    let Some(spec) = spec_mut(pod) else {
        return Ok(());
    };
    match selector {
        Some(selector) => {
            spec.insert("nodeSelector".into(), Value::Object(selector));
        }
        None => {
            spec.remove("nodeSelector");
        }
    }
    if tolerations.is_empty() {
        spec.remove("tolerations");
    } else {
        spec.insert("tolerations".into(), Value::Array(tolerations));
    }
    Ok(())
}

/// A label value as Go's `%s` prints a string.
fn plain(value: &Value) -> String {
    value
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| value.to_string())
}

/// A toleration's identity in `tolerations.ConvertTolerationToAMap`: key and effect.
fn toleration_key(toleration: &Value) -> (String, String) {
    let field = |name: &str| {
        toleration
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (field("key"), field("effect"))
}

/// `tolerations.MergeTolerations(first, second)`: every toleration of `second`, then those
/// of `first` whose key and effect `second` does not have (one per key and effect, the last
/// one given, in the order first seen; upstream's map leaves that order unspecified).
pub fn merge_tolerations(first: &[Value], second: &[Value]) -> Vec<Value> {
    let mut merged: Vec<Value> = second.to_vec();
    let taken: Vec<(String, String)> = second.iter().map(toleration_key).collect();
    let mut rest: Vec<((String, String), Value)> = Vec::new();
    for toleration in first {
        let key = toleration_key(toleration);
        if taken.contains(&key) {
            continue;
        }
        match rest.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = toleration.clone(),
            None => rest.push((key, toleration.clone())),
        }
    }
    merged.extend(rest.into_iter().map(|(_, t)| t));
    merged
}

/// The pod's `spec` as an object (made one if it is not); `None` when the pod is no object.
fn spec_mut(pod: &mut Value) -> Option<&mut Map<String, Value>> {
    let spec = pod
        .as_object_mut()?
        .entry("spec")
        .or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    spec.as_object_mut()
}

#[cfg(test)]
#[path = "runtime_class_tests.rs"]
mod tests;
