//! The MultiKueue AdmissionCheck reconciler (`ACReconciler.Reconcile`): the check's `Active`
//! condition from the MultiKueueConfig its parameters name and the `Active` conditions of
//! that config's MultiKueueClusters (`Active`, `SomeActiveClusters`, `NoUsableClusters`,
//! `BadConfig`), and the worker clusters a check dispatches to.
//!
//! Knows nothing about connections: a cluster's state is its `Active` condition.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::Value;
use tessera_model::{conditions, json as json_read};

use super::{CLUSTER_ACTIVE, CONFIG_KIND, changed_condition};
use crate::api::admission_checks::{ACTIVE, MULTIKUEUE_CONTROLLER, parameters_name};

/// The clusters of the MultiKueueConfig a MultiKueue AdmissionCheck names, in the config's
/// order (`ConfigForAdmissionCheck`); Kueue's error text when there is none.
pub fn config_clusters(
    check: &Value,
    configs: &BTreeMap<String, Value>,
) -> Result<Vec<String>, String> {
    let name = parameters_name(check, CONFIG_KIND)?;
    let config = configs
        .get(name)
        .ok_or_else(|| format!("multikueueconfigs.kueue.x-k8s.io {name:?} not found"))?;
    Ok(json_read::strings_at(config, "/spec/clusters"))
}

/// Go's `%v` of a list of names.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

/// `(status, reason, message)` of a check's `Active` condition.
fn active_condition(
    check: &Value,
    configs: &BTreeMap<String, Value>,
    clusters: &BTreeMap<String, Value>,
) -> (&'static str, &'static str, String) {
    let names = match config_clusters(check, configs) {
        Ok(names) => names,
        Err(error) => {
            return (
                "False",
                "BadConfig",
                format!("Cannot load the AdmissionChecks parameters: {error}"),
            );
        }
    };
    let missing: Vec<&str> = names
        .iter()
        .filter(|n| !clusters.contains_key(n.as_str()))
        .map(String::as_str)
        .collect();
    let inactive: Vec<&str> = names
        .iter()
        .filter(|n| {
            clusters
                .get(n.as_str())
                .is_some_and(|c| !conditions::is_true(c, CLUSTER_ACTIVE))
        })
        .map(String::as_str)
        .collect();
    let unusable = missing.len() + inactive.len();
    if unusable == 0 {
        return ("True", "Active", "The admission check is active".to_owned());
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("Missing clusters: {}", go_list(&missing)));
    }
    if !inactive.is_empty() {
        parts.push(format!("Inactive clusters: {}", go_list(&inactive)));
    }
    let (status, reason) = if unusable < names.len() {
        ("True", "SomeActiveClusters")
    } else {
        ("False", "NoUsableClusters")
    };
    (status, reason, parts.join(", "))
}

/// A MultiKueue AdmissionCheck's new `status` when its `Active` condition changes; `None`
/// when it is up to date or the check belongs to another controller.
pub fn active_status(
    check: &Value,
    configs: &BTreeMap<String, Value>,
    clusters: &BTreeMap<String, Value>,
    now: SystemTime,
) -> Option<Value> {
    if json_read::text(check, "/spec/controllerName") != MULTIKUEUE_CONTROLLER {
        return None;
    }
    let (status, reason, message) = active_condition(check, configs, clusters);
    changed_condition(check, ACTIVE, (status, reason, &message), now)
}
