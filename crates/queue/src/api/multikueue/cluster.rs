//! The MultiKueueCluster reconciler's status (`clustersReconciler.Reconcile`,
//! `updateStatus`): where the worker's kubeconfig is (a Secret, key `kubeconfig`), the
//! `Active` condition from the outcome of loading it and connecting (`Active`/`Connected`,
//! `BadKubeConfig`, `ClientConnectionFailed` with the attempts and the next attempt), and the
//! wait between connection attempts (`retryAfter`).
//!
//! Knows nothing about how a connection is made: the shell reports its outcome as a
//! [`Connection`].

use std::time::{Duration, SystemTime};

use serde_json::Value;
use tessera_model::{json as json_read, time};

use super::{CLUSTER_ACTIVE, changed_condition};

/// The Secret key holding the kubeconfig (`kubeconfigKey`).
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// The outcome of loading a worker's kubeconfig and connecting to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    /// Connected and watching.
    Connected,
    /// The kubeconfig could not be loaded (`BadKubeConfig`): the error.
    BadKubeConfig(String),
    /// Connecting failed (`ClientConnectionFailed`): the error, the failed attempts so far
    /// and when the next one is made.
    Failed {
        /// The error.
        error: String,
        /// Failed attempts since the last success or config change.
        attempts: u32,
        /// The next attempt.
        next_attempt: SystemTime,
    },
}

/// The name of the Secret holding a MultiKueueCluster's kubeconfig
/// (`spec.clusterSource.kubeConfig`, `locationType` `Secret`, the default); the error
/// `loadClientConfig` reports otherwise.
pub fn kubeconfig_secret(cluster: &Value) -> Result<&str, String> {
    let reference = cluster
        .pointer("/spec/clusterSource/kubeConfig")
        .or_else(|| cluster.pointer("/spec/kubeConfig"))
        .filter(|r| r.is_object())
        .ok_or_else(|| "spec.clusterSource.kubeConfig: Required value".to_owned())?;
    let location_type = json_read::text(reference, "/locationType");
    if !location_type.is_empty() && location_type != "Secret" {
        return Err(format!(
            "spec.clusterSource.kubeConfig.locationType: Unsupported value: {location_type:?}: supported values: \"Secret\""
        ));
    }
    match json_read::text(reference, "/location") {
        "" => Err("spec.clusterSource.kubeConfig.location: Required value".to_owned()),
        name => Ok(name),
    }
}

/// The error `getKubeConfigFromSecret` reports when the Secret lacks the key.
pub fn missing_key(secret: &str) -> String {
    format!("key {KUBECONFIG_KEY:?} not found in secret {secret:?}")
}

/// The error reading a Secret that does not exist.
pub fn missing_secret(secret: &str) -> String {
    format!("secrets {secret:?} not found")
}

/// The wait before the next connection attempt after `failed_attempts` failures
/// (`retryAfter`: 5 s doubled per failure, at most 2^6 × 5 s).
pub fn retry_after(failed_attempts: u32) -> Duration {
    if failed_attempts == 0 {
        return Duration::ZERO;
    }
    Duration::from_secs(5) * (1_u32 << (failed_attempts.min(7) - 1))
}

/// `(status, reason, message)` of the `Active` condition for a connection outcome.
fn active_condition(connection: &Connection) -> (&'static str, &'static str, String) {
    match connection {
        Connection::Connected => ("True", "Active", "Connected".to_owned()),
        Connection::BadKubeConfig(error) => (
            "False",
            "BadKubeConfig",
            format!("load client config failed: {error}"),
        ),
        Connection::Failed {
            error,
            attempts,
            next_attempt,
        } => {
            let message = if *attempts > 0 {
                format!(
                    "{error}; connection attempts: {attempts}, next connection attempt: {}",
                    time::timestamp(*next_attempt)
                )
            } else {
                error.clone()
            };
            ("False", "ClientConnectionFailed", message)
        }
    }
}

/// The MultiKueueCluster's new `status` when its `Active` condition changes for this
/// connection outcome (`updateStatus`); `None` when it is up to date.
pub fn cluster_status(cluster: &Value, connection: &Connection, now: SystemTime) -> Option<Value> {
    let (status, reason, message) = active_condition(connection);
    changed_condition(cluster, CLUSTER_ACTIVE, (status, reason, &message), now)
}
