//! The garbage collector and the namespace lifecycle controller, run inside the API server
//! process as kube-controller-manager runs them beside a real API server.
//!
//! The collector keeps an index of owner references from the store's watch and deletes
//! dependents whose owners are all gone (background propagation), deletes dependents before
//! their owner (the `foregroundDeletion` finalizer), and strips owner references before the
//! owner goes (the `orphan` finalizer). The namespace controller empties a terminating
//! namespace and then releases its `kubernetes` finalizer. Works only through [`Objects`];
//! the owner index and what each change and each dependent call for are
//! `tessera_api::owners`'.
//!
//! With metrics ([`Collector::with_metrics`]), the dependents queued for a check are
//! kube-controller-manager's work queue `garbage_collector_attempt_to_delete`: each one queued
//! is an add (and waits, in its depth), each check is timed. A failed step is logged, not
//! retried, so its retries stay 0; how long an item waited is not kept, so no queue duration
//! is observed.

use std::collections::{BTreeSet, VecDeque};

use serde_json::{Value, json};
use tessera_metrics::components::Registries;
use tessera_metrics::controllers::{QueueMetrics, queue_name};
use tessera_store::{EventKind, StoreError};

use crate::objects::{Objects, decode};
use crate::registry::Registry;
use tessera_api::meta::{finalizers, is_deleting, meta_str};
use tessera_api::owners::{
    DependentAction, OwnerIndex, Work, dependent_action, owner_uids, quota_status, retain_owners,
    without_finalizer, without_owner,
};
use tessera_api::resource::Resource;
use tessera_api::write::{DeleteOptions, FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Part};

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

fn is_dependent(work: &Work) -> bool {
    matches!(work, Work::Dependent(_))
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
    index: OwnerIndex,
    queue: VecDeque<Work>,
    attempt_to_delete: Option<QueueMetrics>,
}

impl Collector {
    /// A collector over a set of objects.
    pub fn new(objects: Objects) -> Collector {
        Collector {
            objects,
            index: OwnerIndex::default(),
            queue: VecDeque::new(),
            attempt_to_delete: None,
        }
    }

    /// Records the dependents' checks in kube-controller-manager's metrics.
    pub fn with_metrics(mut self, metrics: &Registries) -> Collector {
        self.attempt_to_delete = Some(
            metrics
                .controller_manager
                .queue(queue_name::GARBAGE_COLLECTOR_ATTEMPT_TO_DELETE),
        );
        self
    }

    /// Runs until the task is dropped.
    pub async fn run(mut self) {
        loop {
            let (snapshot, mut watcher) = self.objects.store().list_and_watch("/");
            self.index = OwnerIndex::default();
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
        let has_quotas = namespace.as_ref().is_some_and(|namespace| {
            self.objects
                .store()
                .count(&format!("/core/resourcequotas/{namespace}/"))
                > 0
        });
        let queued = self.queue.len();
        self.index.observe(
            key,
            object,
            kind == EventKind::Deleted,
            namespace,
            has_quotas,
            &mut self.queue,
        );
        if let Some(metrics) = &self.attempt_to_delete {
            let added = self
                .queue
                .range(queued..)
                .filter(|w| is_dependent(w))
                .count();
            metrics.add(u64::try_from(added).unwrap_or(u64::MAX));
        }
    }

    fn drain(&mut self) {
        let mut seen = Vec::new();
        while let Some(work) = self.queue.pop_front() {
            let metrics = self
                .attempt_to_delete
                .as_ref()
                .filter(|_| is_dependent(&work));
            if seen.contains(&work) {
                if let Some(metrics) = metrics {
                    metrics.fold(1);
                }
                continue;
            }
            seen.push(work.clone());
            let check = metrics.map(|m| (m.clone(), m.get(1, None, self.objects.now())));
            let outcome = match &work {
                Work::Dependent(key) => self.check_dependent(key),
                Work::Owner(key) => self.process_owner(key),
                Work::Namespace(name) => self.empty_namespace(name),
                Work::CustomResources(name) => self.delete_custom_resources(name),
                Work::Quotas(namespace) => self.refresh_quotas(namespace),
            };
            if let Some((metrics, check)) = check {
                metrics.done(check, self.objects.now());
            }
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
        let key = self.index.key_of(uid)?;
        let entry = self.objects.store().get(key)?;
        decode(&entry).ok()
    }

    fn check_dependent(&mut self, key: &str) -> tessera_api::ApiResult<()> {
        let Some((resource, namespace, name, object)) = self.load(key) else {
            return Ok(());
        };
        let owners = owner_uids(&object);
        let living: Vec<Value> = owners
            .iter()
            .filter_map(|uid| self.owner_exists(uid))
            .collect();
        match dependent_action(&object, &owners, &living) {
            DependentAction::Keep => {}
            DependentAction::Delete(propagation) => {
                self.objects.delete(
                    resource,
                    namespace.as_deref(),
                    &name,
                    &DeleteOptions {
                        propagation: Some(propagation),
                        ..DeleteOptions::default()
                    },
                    false,
                )?;
            }
            DependentAction::KeepOwners(living) => {
                self.objects.update_with(
                    resource,
                    namespace.as_deref(),
                    &name,
                    Part::Main,
                    |current| Ok(retain_owners(current, &living)),
                )?;
            }
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
        let dependents = self.index.dependents_of(&uid);
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
                    |current| Ok(without_owner(current, &uid)),
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
                Ok(without_finalizer(current, finalizer))
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
            let status = quota_status(&quota, used);
            let name = meta_str(&quota, "name").unwrap_or_default().to_string();
            self.objects
                .update_with(quotas, Some(namespace), &name, Part::Status, |current| {
                    let mut next = current.clone();
                    next["status"] = status.clone();
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
            self.index.crd_done(None, crd_name);
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
        self.index.crd_terminating(&prefix, crd_name);
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
            self.index.crd_done(Some(&prefix), crd_name);
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
            self.index.namespace_gone(namespace);
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
