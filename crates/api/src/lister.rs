//! The one window the core has on stored objects: a [`Lister`] the shell implements over its
//! store, so admission (quota usage, limit ranges, priority classes) and the RBAC snapshot
//! read objects without knowing where or how they are kept.

use serde_json::Value;

use crate::resource::Resource;

/// Reads stored objects, as JSON.
pub trait Lister {
    /// The objects of a resource in their stored form, in one namespace or in all (`None`);
    /// objects that cannot be decoded are left out.
    fn list(&self, resource: Resource, namespace: Option<&str>) -> Vec<Value>;

    /// The objects of a resource as their stored JSON, for a reader that decodes only the
    /// fields it needs; by default, the objects [`Lister::list`] gives, encoded.
    fn list_stored(&self, resource: Resource, namespace: Option<&str>) -> Vec<bytes::Bytes> {
        self.list(resource, namespace)
            .iter()
            .filter_map(|object| serde_json::to_vec(object).ok())
            .map(bytes::Bytes::from)
            .collect()
    }

    /// One object in the form its resource serves, if it exists.
    fn get(&self, resource: Resource, namespace: Option<&str>, name: &str) -> Option<Value>;

    /// Whether an object exists (what [`Lister::get`] finds), without reading it.
    fn exists(&self, resource: Resource, namespace: Option<&str>, name: &str) -> bool {
        self.get(resource, namespace, name).is_some()
    }

    /// Every served resource, built-in and custom.
    fn resources(&self) -> Vec<Resource>;
}
