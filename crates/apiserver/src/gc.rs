//! The garbage collector and the namespace lifecycle controller, run inside the API server
//! process as kube-controller-manager runs them beside a real API server.
//!
//! The collector keeps an index of owner references from the store's watch and deletes
//! dependents whose owners are all gone (background propagation), deletes dependents before
//! their owner (the `foregroundDeletion` finalizer), and strips owner references before the
//! owner goes (the `orphan` finalizer). The namespace controller empties a terminating
//! namespace and then releases its `kubernetes` finalizer. Works only through [`Objects`].

use std::collections::{BTreeSet, HashMap, VecDeque};

use serde_json::{Value, json};
use tessera_store::{EventKind, StoreError};

use crate::objects::{Objects, decode};
use crate::registry::Registry;
use tessera_api::meta::{finalizers, is_deleting, meta_str};
use tessera_api::resource::Resource;
use tessera_api::write::{
    DeleteOptions, FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Part, Propagation,
};

/// Where an object lives, recovered from its store key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Location {
    key: String,
}

impl Location {
    /// (resource, namespace, name) of a key `/<group>/<plural>/[<namespace>/]<name>`.
    fn parse(&self, registry: &Registry) -> Option<(Resource, Option<String>, String)> {
        let mut parts = self.key.trim_start_matches('/').splitn(3, '/');
        let group = parts.next()?;
        let plural = parts.next()?;
        let group = if group == "core" { "" } else { group };
        let resource = registry.by_storage(group, plural)?;
        let rest = parts.next()?;
        if resource.namespaced() {
            let (namespace, name) = rest.split_once('/')?;
            Some((resource, Some(namespace.to_string()), name.to_string()))
        } else {
            Some((resource, None, rest.to_string()))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Work {
    /// Check whether a dependent's owners are gone.
    Dependent(String),
    /// Process an owner that is being deleted with a foreground or orphan finalizer.
    Owner(String),
    /// Empty a terminating namespace.
    Namespace(String),
    /// Delete the objects of a CustomResourceDefinition being deleted.
    CustomResources(String),
    /// Refresh the `status.used` of a namespace's ResourceQuotas.
    Quotas(String),
}

#[derive(Default)]
struct Index {
    /// uid → key of every object.
    keys_by_uid: HashMap<String, String>,
    /// key → (uid, owner uids).
    objects: HashMap<String, (String, Vec<String>)>,
    /// owner uid → dependent keys.
    dependents: HashMap<String, BTreeSet<String>>,
    /// Namespaces being deleted.
    terminating: BTreeSet<String>,
    /// CRDs being deleted, by the store prefix of their objects.
    terminating_crds: HashMap<String, String>,
}

impl Index {
    fn remove(&mut self, key: &str) {
        if let Some((uid, owners)) = self.objects.remove(key) {
            self.keys_by_uid.remove(&uid);
            for owner in owners {
                if let Some(set) = self.dependents.get_mut(&owner) {
                    set.remove(key);
                    if set.is_empty() {
                        self.dependents.remove(&owner);
                    }
                }
            }
        }
    }

    fn insert(&mut self, key: &str, object: &Value) {
        self.remove(key);
        let uid = meta_str(object, "uid").unwrap_or_default().to_string();
        let owners = owner_uids(object);
        for owner in &owners {
            self.dependents
                .entry(owner.clone())
                .or_default()
                .insert(key.to_string());
        }
        self.keys_by_uid.insert(uid.clone(), key.to_string());
        self.objects.insert(key.to_string(), (uid, owners));
    }
}

fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid")?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn namespace_of_key(registry: &Registry, key: &str) -> Option<String> {
    let location = Location {
        key: key.to_string(),
    };
    location
        .parse(registry)
        .and_then(|(_, namespace, _)| namespace)
}

/// The garbage collector and namespace controller.
pub struct Collector {
    objects: Objects,
    index: Index,
    queue: VecDeque<Work>,
}

impl Collector {
    /// A collector over a set of objects.
    pub fn new(objects: Objects) -> Collector {
        Collector {
            objects,
            index: Index::default(),
            queue: VecDeque::new(),
        }
    }

    /// Runs until the task is dropped.
    pub async fn run(mut self) {
        loop {
            let (snapshot, mut watcher) = self.objects.store().list_and_watch("/");
            self.index = Index::default();
            for entry in snapshot.entries.iter() {
                if let Ok(object) = decode(entry) {
                    self.observe(&entry.key, Some(&object), EventKind::Created);
                }
            }
            self.drain();
            loop {
                match watcher.next_batch(1024).await {
                    Ok(events) => {
                        for event in events {
                            let object = serde_json::from_slice::<Value>(&event.entry.value).ok();
                            self.observe(&event.entry.key, object.as_ref(), event.kind);
                        }
                        self.drain();
                    }
                    Err(StoreError::Gone { .. }) => {
                        tracing::warn!(
                            "garbage collector fell behind the watch history; resyncing"
                        );
                        break;
                    }
                    Err(error) => {
                        tracing::error!(%error, "garbage collector watch failed");
                        break;
                    }
                }
            }
        }
    }

    /// Updates the index from one change and queues the work it implies.
    fn observe(&mut self, key: &str, object: Option<&Value>, kind: EventKind) {
        let namespace = namespace_of_key(self.objects.registry(), key);
        if let Some(namespace) = &namespace
            && self
                .objects
                .store()
                .count(&format!("/core/resourcequotas/{namespace}/"))
                > 0
        {
            self.queue.push_back(Work::Quotas(namespace.clone()));
        }
        if kind == EventKind::Deleted {
            let uid = self.index.objects.get(key).map(|(uid, _)| uid.clone());
            let owners = self
                .index
                .objects
                .get(key)
                .map(|(_, o)| o.clone())
                .unwrap_or_default();
            self.index.remove(key);
            if let Some(uid) = uid
                && let Some(dependents) = self.index.dependents.get(&uid)
            {
                for dependent in dependents.clone() {
                    self.queue.push_back(Work::Dependent(dependent));
                }
            }
            for owner in owners {
                if let Some(owner_key) = self.index.keys_by_uid.get(&owner) {
                    self.queue.push_back(Work::Owner(owner_key.clone()));
                }
            }
            if let Some(namespace) = namespace
                && self.index.terminating.contains(&namespace)
            {
                self.queue.push_back(Work::Namespace(namespace));
            }
            let crds: Vec<String> = self
                .index
                .terminating_crds
                .iter()
                .filter(|(prefix, _)| key.starts_with(prefix.as_str()))
                .map(|(_, crd)| crd.clone())
                .collect();
            for crd in crds {
                self.queue.push_back(Work::CustomResources(crd));
            }
            if key.starts_with("/core/namespaces/")
                && let Some(object) = object
                && let Some(name) = meta_str(object, "name")
            {
                self.index.terminating.remove(name);
            }
            return;
        }
        let Some(object) = object else { return };
        self.index.insert(key, object);
        let owners = owner_uids(object);
        if owners
            .iter()
            .any(|uid| !self.index.keys_by_uid.contains_key(uid))
        {
            self.queue.push_back(Work::Dependent(key.to_string()));
        }
        if is_deleting(object) {
            let held = finalizers(object);
            if held
                .iter()
                .any(|f| f == FOREGROUND_FINALIZER || f == ORPHAN_FINALIZER)
            {
                self.queue.push_back(Work::Owner(key.to_string()));
            }
            if key.starts_with("/core/namespaces/")
                && let Some(name) = meta_str(object, "name")
            {
                self.index.terminating.insert(name.to_string());
                self.queue.push_back(Work::Namespace(name.to_string()));
            }
            if key.starts_with(crate::registry::CRD_PREFIX)
                && held
                    .iter()
                    .any(|f| f == tessera_api::crd::CLEANUP_FINALIZER)
                && let Some(name) = meta_str(object, "name")
            {
                self.queue
                    .push_back(Work::CustomResources(name.to_string()));
            }
        }
    }

    fn drain(&mut self) {
        let mut seen = Vec::new();
        while let Some(work) = self.queue.pop_front() {
            if seen.contains(&work) {
                continue;
            }
            seen.push(work.clone());
            let outcome = match &work {
                Work::Dependent(key) => self.check_dependent(key),
                Work::Owner(key) => self.process_owner(key),
                Work::Namespace(name) => self.empty_namespace(name),
                Work::CustomResources(name) => self.delete_custom_resources(name),
                Work::Quotas(namespace) => self.refresh_quotas(namespace),
            };
            if let Err(error) = outcome
                && error.code != 404
                && error.code != 409
            {
                tracing::warn!(?work, %error, "garbage collection step failed");
            }
        }
    }

    fn load(&self, key: &str) -> Option<(Resource, Option<String>, String, Value)> {
        let (resource, namespace, name) = Location {
            key: key.to_string(),
        }
        .parse(self.objects.registry())?;
        let entry = self.objects.store().get(key)?;
        let object = decode(&entry).ok()?;
        Some((resource, namespace, name, object))
    }

    fn owner_exists(&self, uid: &str) -> Option<Value> {
        let key = self.index.keys_by_uid.get(uid)?;
        let entry = self.objects.store().get(key)?;
        decode(&entry).ok()
    }

    fn check_dependent(&mut self, key: &str) -> tessera_api::ApiResult<()> {
        let Some((resource, namespace, name, object)) = self.load(key) else {
            return Ok(());
        };
        let owners = owner_uids(&object);
        if owners.is_empty() {
            return Ok(());
        }
        let living: Vec<Value> = owners
            .iter()
            .filter_map(|uid| self.owner_exists(uid))
            .collect();
        if living.is_empty() {
            if !is_deleting(&object) {
                self.objects.delete(
                    resource,
                    namespace.as_deref(),
                    &name,
                    &DeleteOptions {
                        propagation: Some(Propagation::Background),
                        ..DeleteOptions::default()
                    },
                    false,
                )?;
            }
            return Ok(());
        }
        let foreground_owner = living.iter().any(|owner| {
            is_deleting(owner) && finalizers(owner).iter().any(|f| f == FOREGROUND_FINALIZER)
        });
        if foreground_owner && !is_deleting(&object) {
            self.objects.delete(
                resource,
                namespace.as_deref(),
                &name,
                &DeleteOptions {
                    propagation: Some(Propagation::Foreground),
                    ..DeleteOptions::default()
                },
                false,
            )?;
            return Ok(());
        }
        if living.len() < owners.len() {
            let living_uids: Vec<String> = living
                .iter()
                .filter_map(|o| meta_str(o, "uid").map(str::to_string))
                .collect();
            self.objects.update_with(
                resource,
                namespace.as_deref(),
                &name,
                Part::Main,
                |current| {
                    let mut next = current.clone();
                    if let Some(Value::Array(refs)) = next.pointer_mut("/metadata/ownerReferences")
                    {
                        refs.retain(|r| {
                            r.get("uid")
                                .and_then(Value::as_str)
                                .is_some_and(|u| living_uids.iter().any(|l| l == u))
                        });
                    }
                    Ok(next)
                },
            )?;
        }
        Ok(())
    }

    fn process_owner(&mut self, key: &str) -> tessera_api::ApiResult<()> {
        let Some((resource, namespace, name, object)) = self.load(key) else {
            return Ok(());
        };
        if !is_deleting(&object) {
            return Ok(());
        }
        let uid = meta_str(&object, "uid").unwrap_or_default().to_string();
        let held = finalizers(&object);
        let dependents: Vec<String> = self
            .index
            .dependents
            .get(&uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default();
        if held.iter().any(|f| f == ORPHAN_FINALIZER) {
            for dependent in &dependents {
                let Some((d_resource, d_namespace, d_name, _)) = self.load(dependent) else {
                    continue;
                };
                self.objects.update_with(
                    d_resource,
                    d_namespace.as_deref(),
                    &d_name,
                    Part::Main,
                    |current| {
                        let mut next = current.clone();
                        if let Some(Value::Array(refs)) =
                            next.pointer_mut("/metadata/ownerReferences")
                        {
                            refs.retain(|r| {
                                r.get("uid").and_then(Value::as_str) != Some(uid.as_str())
                            });
                            if refs.is_empty()
                                && let Some(meta) =
                                    next.get_mut("metadata").and_then(Value::as_object_mut)
                            {
                                meta.remove("ownerReferences");
                            }
                        }
                        Ok(next)
                    },
                )?;
            }
            return self.release(resource, namespace.as_deref(), &name, ORPHAN_FINALIZER);
        }
        if held.iter().any(|f| f == FOREGROUND_FINALIZER) {
            let remaining: Vec<&String> = dependents
                .iter()
                .filter(|d| self.objects.store().get(d).is_some())
                .collect();
            if remaining.is_empty() {
                return self.release(resource, namespace.as_deref(), &name, FOREGROUND_FINALIZER);
            }
            for dependent in remaining.into_iter().cloned().collect::<Vec<_>>() {
                self.queue.push_back(Work::Dependent(dependent));
            }
        }
        Ok(())
    }

    fn release(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        finalizer: &str,
    ) -> tessera_api::ApiResult<()> {
        self.objects
            .update_with(resource, namespace, name, Part::Main, |current| {
                let mut next = current.clone();
                let kept: Vec<String> = finalizers(current)
                    .into_iter()
                    .filter(|f| f != finalizer)
                    .collect();
                if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                    if kept.is_empty() {
                        meta.remove("finalizers");
                    } else {
                        meta.insert("finalizers".into(), json!(kept));
                    }
                }
                Ok(next)
            })?;
        Ok(())
    }

    fn refresh_quotas(&mut self, namespace: &str) -> tessera_api::ApiResult<()> {
        let Some(quotas) = Resource::find("", "v1", "resourcequotas") else {
            return Ok(());
        };
        for entry in self.objects.list(quotas, Some(namespace)).entries.iter() {
            let Ok(quota) = decode(entry) else { continue };
            let used =
                tessera_api::admission::usage::namespace_usage(&self.objects, namespace, &quota);
            let used: serde_json::Map<String, Value> = used
                .into_iter()
                .map(|(k, v)| (k, json!(v.to_canonical())))
                .collect();
            let hard = quota.pointer("/spec/hard").cloned().unwrap_or(json!({}));
            let name = meta_str(&quota, "name").unwrap_or_default().to_string();
            self.objects
                .update_with(quotas, Some(namespace), &name, Part::Status, |current| {
                    let mut next = current.clone();
                    next["status"] = json!({"hard": hard, "used": used});
                    Ok(next)
                })?;
        }
        Ok(())
    }

    fn delete_custom_resources(&mut self, crd_name: &str) -> tessera_api::ApiResult<()> {
        let Some(crds) = Resource::find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        else {
            return Ok(());
        };
        let Ok(crd) = self.objects.get(crds, None, crd_name) else {
            self.index
                .terminating_crds
                .retain(|_, name| name != crd_name);
            return Ok(());
        };
        if !is_deleting(&crd) {
            return Ok(());
        }
        let kinds = self.objects.registry().kinds_of_crd(crd_name);
        let Some(resource) = kinds.first().copied() else {
            self.release(crds, None, crd_name, tessera_api::crd::CLEANUP_FINALIZER)?;
            return self.reconsider_group(crds, crd_name);
        };
        let prefix = resource.prefix(None);
        self.index
            .terminating_crds
            .insert(prefix.clone(), crd_name.to_string());
        let snapshot = self.objects.store().list(&prefix);
        for entry in snapshot.entries.iter() {
            let Some((storage, namespace, name)) = (Location {
                key: entry.key.to_string(),
            })
            .parse(self.objects.registry()) else {
                continue;
            };
            let Ok(item) = decode(entry) else { continue };
            if is_deleting(&item) {
                continue;
            }
            match self.objects.delete(
                storage,
                namespace.as_deref(),
                &name,
                &DeleteOptions::default(),
                false,
            ) {
                Ok(_) => {}
                Err(error) if error.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        if self.objects.store().count(&prefix) == 0 {
            self.index.terminating_crds.remove(&prefix);
            self.release(crds, None, crd_name, tessera_api::crd::CLEANUP_FINALIZER)?;
            return self.reconsider_group(crds, crd_name);
        }
        Ok(())
    }

    /// A deleted CRD frees its names: the other CRDs of its group are written again so
    /// their status is recomputed, as upstream's naming controller requeues them.
    fn reconsider_group(&self, crds: Resource, deleted: &str) -> tessera_api::ApiResult<()> {
        let group = tessera_api::crd_status::group_of(deleted);
        let snapshot = self.objects.store().list(&crds.prefix(None));
        for entry in snapshot.entries.iter() {
            let Ok(crd) = decode(entry) else { continue };
            let name = tessera_api::meta::meta_str(&crd, "name").unwrap_or_default();
            if name == deleted || tessera_api::crd_status::group_of(name) != group {
                continue;
            }
            match self
                .objects
                .update_with(crds, None, name, Part::Main, |current| Ok(current.clone()))
            {
                Ok(_) => {}
                Err(error) if error.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    fn empty_namespace(&mut self, namespace: &str) -> tessera_api::ApiResult<()> {
        let Some(namespaces) = Resource::find("", "v1", "namespaces") else {
            return Ok(());
        };
        let Ok(object) = self.objects.get(namespaces, None, namespace) else {
            self.index.terminating.remove(namespace);
            return Ok(());
        };
        if !is_deleting(&object) {
            return Ok(());
        }
        let mut remaining = 0;
        for resource in storage_resources(self.objects.registry())
            .into_iter()
            .filter(Resource::namespaced)
        {
            let snapshot = self.objects.list(resource, Some(namespace));
            for entry in snapshot.entries.iter() {
                remaining += 1;
                let Ok(item) = decode(entry) else { continue };
                if is_deleting(&item) {
                    continue;
                }
                let name = meta_str(&item, "name").unwrap_or_default().to_string();
                match self.objects.delete(
                    resource,
                    Some(namespace),
                    &name,
                    &DeleteOptions::default(),
                    false,
                ) {
                    Ok(_) => {}
                    Err(error) if error.code == 404 => {}
                    Err(error) => return Err(error),
                }
            }
        }
        if remaining == 0 {
            self.objects
                .update_with(namespaces, None, namespace, Part::Main, |current| {
                    let mut next = current.clone();
                    next["spec"]["finalizers"] = json!([]);
                    Ok(next)
                })?;
        }
        Ok(())
    }
}

/// One resource per storage location (custom kinds serve several versions from one).
fn storage_resources(registry: &Registry) -> Vec<Resource> {
    let mut seen = BTreeSet::new();
    registry
        .all()
        .into_iter()
        .filter(|r| seen.insert(r.prefix(None)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_back_to_resources() {
        let registry = Registry::default();
        let pod = Location {
            key: "/core/pods/team-a/p1".into(),
        }
        .parse(&registry)
        .unwrap();
        assert_eq!(
            (pod.0.kind(), pod.1.as_deref(), pod.2.as_str()),
            ("Pod", Some("team-a"), "p1")
        );
        let node = Location {
            key: "/core/nodes/gpu-1".into(),
        }
        .parse(&registry)
        .unwrap();
        assert_eq!(
            (node.0.kind(), node.1, node.2.as_str()),
            ("Node", None, "gpu-1")
        );
        let rs = Location {
            key: "/apps/replicasets/default/web-1".into(),
        }
        .parse(&registry)
        .unwrap();
        assert_eq!(rs.0.kind(), "ReplicaSet");
        assert!(
            Location {
                key: "/nope/x/y".into()
            }
            .parse(&registry)
            .is_none()
        );
    }
}
