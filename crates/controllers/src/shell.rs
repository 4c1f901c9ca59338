//! What every controller shell shares: the error of one reconciliation, the retry policy,
//! and write parameters that name the controller as field manager.
//!
//! Knows nothing about any kind; the shells bring their own context and reconcilers.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{PatchParams, PostParams};
use kube::runtime::controller::Action;

/// Errors of one reconciliation (retried).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The API refused or failed a request.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// An object could not be converted.
    #[error("conversion: {0}")]
    Convert(#[from] serde_json::Error),
}

/// Retry a failed reconciliation soon.
pub fn retry_soon<K, C>(_object: Arc<K>, error: &ReconcileError, _context: Arc<C>) -> Action {
    tracing::debug!(%error, "reconciliation failed; retrying");
    Action::requeue(Duration::from_millis(500))
}

/// Patch parameters writing as `manager`.
pub fn patch_params(manager: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(manager.into()),
        ..PatchParams::default()
    }
}

/// Create parameters writing as `manager`.
pub fn post_params(manager: &str) -> PostParams {
    PostParams {
        field_manager: Some(manager.into()),
        ..PostParams::default()
    }
}
