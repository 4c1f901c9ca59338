//! A ProvisioningRequestConfig as Kueue reads it, the lookup of an AdmissionCheck's config
//! from its `spec.parameters` (`ConfigHelper.ConfigFromRef`, with its error texts), and the
//! AdmissionCheck reconciler's `Active` condition (`acReconciler`). Knows nothing about
//! Workloads.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde_json::{Map, Value, json};
use tessera_model::{conditions, json as json_read, time};

use super::CONFIG_KIND;
use crate::api::admission_checks::{ACTIVE, PROVISIONING_REQUEST_CONTROLLER};

/// A ProvisioningRequestConfig's spec, read with the CRD's defaults.
#[derive(Debug, Clone, Copy)]
pub struct Config<'a> {
    /// The whole object.
    pub object: &'a Value,
}

/// The defaults of `retryStrategy`: limit 3, base 60 s, max 1800 s.
const RETRY_DEFAULTS: (i64, i64, i64) = (3, 60, 1800);

impl<'a> Config<'a> {
    /// `spec.provisioningClassName`.
    pub fn class(&self) -> &'a str {
        json_read::text(self.object, "/spec/provisioningClassName")
    }

    /// `spec.parameters`.
    pub fn parameters(&self) -> Map<String, Value> {
        self.object
            .pointer("/spec/parameters")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }

    /// `spec.managedResources` (empty: every resource).
    pub fn managed_resources(&self) -> BTreeSet<String> {
        json_read::strings_at(self.object, "/spec/managedResources")
    }

    /// `retryStrategy`: (backoffLimitCount, backoffBaseSeconds, backoffMaxSeconds).
    pub fn retry(&self) -> (i64, i64, i64) {
        let field = |name: &str, default: i64| {
            json_read::int(self.object, &format!("/spec/retryStrategy/{name}")).unwrap_or(default)
        };
        let (limit, base, max) = RETRY_DEFAULTS;
        (
            field("backoffLimitCount", limit),
            field("backoffBaseSeconds", base),
            field("backoffMaxSeconds", max),
        )
    }

    /// `podSetUpdates.nodeSelector` as (label key, provisioning class detail) pairs; `None`
    /// without `podSetUpdates`.
    pub fn node_selector_updates(&self) -> Option<Vec<(String, String)>> {
        let updates = self.object.pointer("/spec/podSetUpdates")?;
        Some(
            updates
                .get("nodeSelector")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|s| {
                    (
                        json_read::text(s, "/key").to_owned(),
                        json_read::text(s, "/valueFromProvisioningClassDetail").to_owned(),
                    )
                })
                .collect(),
        )
    }

    /// `spec.podSetMergePolicy`, if set.
    pub fn merge_policy(&self) -> Option<&'a str> {
        self.object
            .pointer("/spec/podSetMergePolicy")
            .and_then(Value::as_str)
    }
}

/// Why an AdmissionCheck has no config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The reference is missing or names something else (Kueue's error text).
    BadReference(String),
    /// The named config does not exist (the API server's NotFound text).
    NotFound(String),
}

impl ConfigError {
    /// The text Kueue shows.
    pub fn message(&self) -> &str {
        match self {
            ConfigError::BadReference(message) | ConfigError::NotFound(message) => message,
        }
    }
}

/// The config an AdmissionCheck's `spec.parameters` names, among the configs by name
/// (`ConfigFromRef`).
pub fn config_from_ref<'c>(
    check: &Value,
    configs: &'c BTreeMap<String, Value>,
) -> Result<Config<'c>, ConfigError> {
    let name = crate::api::admission_checks::parameters_name(check, CONFIG_KIND)
        .map_err(ConfigError::BadReference)?;
    configs
        .get(name)
        .map(|object| Config { object })
        .ok_or_else(|| {
            ConfigError::NotFound(format!(
                "provisioningrequestconfigs.kueue.x-k8s.io {name:?} not found"
            ))
        })
}

/// The AdmissionCheck reconciler (`acReconciler.Reconcile`): for a check of the
/// ProvisioningRequest controller, the status (`{"conditions": …}`) to write when its
/// `Active` condition's status is not yet what its config makes it — True "Active", "The
/// admission check is active", or False `BadParametersRef` with the lookup's error. `None`
/// for other controllers' checks and when the status already matches.
pub fn active_status(
    check: &Value,
    configs: &BTreeMap<String, Value>,
    now: SystemTime,
) -> Option<Value> {
    if json_read::text(check, "/spec/controllerName") != PROVISIONING_REQUEST_CONTROLLER {
        return None;
    }
    let (status, reason, message) = match config_from_ref(check, configs) {
        Ok(_) => ("True", "Active", "The admission check is active".to_owned()),
        Err(error) => ("False", "BadParametersRef", error.message().to_owned()),
    };
    let current = conditions::find(check, ACTIVE).and_then(|c| c.get("status"));
    if current.and_then(Value::as_str) == Some(status) {
        return None;
    }
    let mut list: Vec<Value> = check
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    conditions::set(
        &mut list,
        ACTIVE,
        status,
        reason,
        &message,
        &time::timestamp(now),
    );
    let generation = check
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(0));
    for condition in list.iter_mut().filter(|c| c["type"] == ACTIVE) {
        condition["observedGeneration"] = generation.clone();
    }
    Some(json!({ "conditions": list }))
}
