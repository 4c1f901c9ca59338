//! The set of served resources: the built-in kinds plus the kinds of every stored
//! CustomResourceDefinition, refreshed whenever a CRD changes.
//!
//! Custom kinds are built once per CRD resourceVersion and kept for the life of the process
//! (a few kilobytes per CRD change), so `Resource` stays a cheap copyable handle.

use std::collections::HashMap;
use std::sync::RwLock;

use serde_json::Value;
use tessera_model::kinds::{self, KindInfo};
use tessera_store::Store;

use tessera_api::crd::CRD_PREFIX;
use tessera_api::resource::Resource;

#[derive(Default)]
struct Custom {
    /// CRD name → (its resourceVersion, its served kinds).
    by_crd: HashMap<String, (String, Vec<&'static KindInfo>)>,
}

/// Served resources.
#[derive(Default)]
pub struct Registry {
    custom: RwLock<Custom>,
}

impl Registry {
    /// A registry with the CRDs found in a store.
    pub fn load(store: &Store) -> Registry {
        let registry = Registry::default();
        registry.refresh(store);
        registry
    }

    /// Re-reads the CRDs from the store.
    pub fn refresh(&self, store: &Store) {
        let snapshot = store.list(CRD_PREFIX);
        let mut custom = self.custom.write().unwrap_or_else(|p| p.into_inner());
        let mut next = HashMap::new();
        for entry in snapshot.entries.iter() {
            let Ok(crd) = serde_json::from_slice::<Value>(&entry.value) else {
                continue;
            };
            // A CRD whose names were refused is stored but not served.
            if !tessera_api::crd_status::is_established(&crd) {
                continue;
            }
            let name = crd
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let version = entry.revision.to_string();
            let kinds = match custom.by_crd.remove(&name) {
                Some((known, kinds)) if known == version => kinds,
                _ => tessera_api::crd::kinds_of(&crd)
                    .into_iter()
                    .map(|kind| &*Box::leak(Box::new(kind)))
                    .collect(),
            };
            next.insert(name, (version, kinds));
        }
        custom.by_crd = next;
    }

    fn custom_kinds(&self) -> Vec<&'static KindInfo> {
        let custom = self.custom.read().unwrap_or_else(|p| p.into_inner());
        let mut kinds: Vec<&'static KindInfo> = custom
            .by_crd
            .values()
            .flat_map(|(_, k)| k.iter().copied())
            .collect();
        kinds.sort_by(|a, b| (a.group, a.plural).cmp(&(b.group, b.plural)));
        kinds
    }

    /// Every served resource: built-ins first, then custom kinds.
    pub fn all(&self) -> Vec<Resource> {
        kinds::builtin()
            .iter()
            .chain(self.custom_kinds())
            .map(|info| Resource { info })
            .collect()
    }

    /// The resource served at a group, version and plural name.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Resource> {
        Resource::find(group, version, plural).or_else(|| {
            self.custom_kinds()
                .into_iter()
                .find(|k| k.group == group && k.version == version && k.plural == plural)
                .map(|info| Resource { info })
        })
    }

    /// The resource of a group, version and kind.
    pub fn find_kind(&self, group: &str, version: &str, kind: &str) -> Option<Resource> {
        Resource::find_kind(group, version, kind).or_else(|| {
            self.custom_kinds()
                .into_iter()
                .find(|k| k.group == group && k.version == version && k.kind == kind)
                .map(|info| Resource { info })
        })
    }

    /// The resource whose objects are stored under a group and plural (the storage version
    /// for custom kinds).
    pub fn by_storage(&self, group: &str, plural: &str) -> Option<Resource> {
        if let Some(info) = kinds::builtin()
            .iter()
            .find(|k| k.group == group && k.plural == plural)
        {
            return Some(Resource { info });
        }
        let kinds = self.custom_kinds();
        kinds
            .iter()
            .find(|k| {
                k.group == group
                    && k.plural == plural
                    && k.custom
                        .as_ref()
                        .is_some_and(|c| c.storage_version == k.version)
            })
            .or_else(|| {
                kinds
                    .iter()
                    .find(|k| k.group == group && k.plural == plural)
            })
            .map(|info| Resource { info })
    }

    /// The served kinds of one CRD.
    pub fn kinds_of_crd(&self, crd: &str) -> Vec<Resource> {
        let custom = self.custom.read().unwrap_or_else(|p| p.into_inner());
        custom
            .by_crd
            .get(crd)
            .map(|(_, kinds)| kinds.iter().map(|info| Resource { info }).collect())
            .unwrap_or_default()
    }
}
