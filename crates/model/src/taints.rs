//! Taints and tolerations as upstream's `ToleratesTaint` matches them: a non-empty toleration
//! effect must equal the taint's, a non-empty key must equal (an empty key needs `Exists` and
//! matches every taint), `Equal` (the default) compares values, `Exists` accepts any. Pure;
//! used by the scheduler's filter and the taint-eviction controller.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether `toleration` tolerates `taint`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() {
        return operator == "Exists";
    }
    if key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matching_follows_upstream() {
        let taint: Taint =
            serde_json::from_value(json!({"key": "gpu", "value": "h100", "effect": "NoSchedule"}))
                .expect("taint");
        let table = [
            (
                json!({"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}),
                true,
            ),
            (json!({"key": "gpu", "value": "h100"}), true),
            (json!({"key": "gpu", "value": "a100"}), false),
            (json!({"key": "gpu", "operator": "Exists"}), true),
            (
                json!({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}),
                false,
            ),
            (json!({"operator": "Exists"}), true),
            (json!({"operator": "Equal", "value": "h100"}), false),
            (json!({"key": "other", "operator": "Exists"}), false),
            (json!({"key": "gpu", "operator": "Gt", "value": "1"}), false),
        ];
        for (i, (toleration, want)) in table.into_iter().enumerate() {
            let toleration: Toleration = serde_json::from_value(toleration).expect("toleration");
            assert_eq!(tolerates(&toleration, &taint), want, "case {i}");
        }
    }
}
