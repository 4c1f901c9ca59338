//! Aggregated APIs: groups another component serves through this API server, as an
//! `APIService` makes kube-apiserver proxy a group to an extension server (Kueue's
//! `visibility.kueue.x-k8s.io`). A registered [`AggregatedApi`] names the kinds discovery
//! lists for it and answers the read-only requests of its group over the stored objects.
//!
//! Knows nothing about what any group means: the wiring (`tessera up`) registers them.

use serde_json::Value;
use tessera_api::error::ApiResult;
use tessera_api::request::{Query, ResourcePath};
use tessera_model::KindInfo;

use crate::objects::Objects;

/// A group served by another component.
pub trait AggregatedApi: Send + Sync {
    /// The API group it serves.
    fn group(&self) -> &'static str;

    /// The kinds discovery lists for it, every served version.
    fn kinds(&self) -> Vec<&'static KindInfo>;

    /// Answers a `GET` of `path` (in its group) over the stored objects.
    fn get(&self, objects: &Objects, path: &ResourcePath, query: &Query) -> ApiResult<Value>;
}
