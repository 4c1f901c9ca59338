//! Owner references and the garbage collector's bookkeeping, as kube-controller-manager's
//! garbage collector and namespace controller keep them: an index of who owns what (from
//! the objects' `ownerReferences`), the work each change implies, what becomes of a
//! dependent whose owners are gone or deleting in the foreground, and the edits that orphan
//! dependents, release finalizers and record quota usage.
//!
//! Knows nothing about the store or its watch: the shell feeds changes in, reads the objects
//! the work names and writes what is decided here.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use tessera_model::json::Pointer as _;

use serde_json::{Value, json};
use tessera_model::Quantity;

use crate::crd::{CLEANUP_FINALIZER, CRD_PREFIX};
use crate::meta::{finalizers, is_deleting, meta_str};
use crate::write::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Propagation};

/// What the collector must look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
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

/// Who owns what, by store key and UID, and what is terminating. The hash maps are only
/// looked up, never iterated, so their order never shows.
#[derive(Debug, Default)]
pub struct OwnerIndex {
    /// uid → key of every object.
    keys_by_uid: HashMap<String, String>,
    /// key → (uid, owner uids).
    objects: HashMap<String, (String, Vec<String>)>,
    /// owner uid → dependent keys.
    dependents: HashMap<String, BTreeSet<String>>,
    /// Namespaces being deleted.
    terminating: BTreeSet<String>,
    /// CRDs being deleted, by the store prefix of their objects (ordered, so the work a
    /// change implies comes in a fixed order).
    terminating_crds: BTreeMap<String, String>,
}

impl OwnerIndex {
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

    /// The key of the object with a UID, if it is indexed.
    pub fn key_of(&self, uid: &str) -> Option<&str> {
        self.keys_by_uid.get(uid).map(String::as_str)
    }

    /// The keys of the objects an owner (by UID) owns.
    pub fn dependents_of(&self, uid: &str) -> Vec<String> {
        self.dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// A namespace is gone: it needs no more emptying.
    pub fn namespace_gone(&mut self, namespace: &str) {
        self.terminating.remove(namespace);
    }

    /// The objects of a terminating CRD live under `prefix`: their deletions requeue it.
    pub fn crd_terminating(&mut self, prefix: &str, crd: &str) {
        self.terminating_crds
            .insert(prefix.to_string(), crd.to_string());
    }

    /// A terminating CRD's objects are all gone (`prefix`), or the CRD itself is (`crd`).
    pub fn crd_done(&mut self, prefix: Option<&str>, crd: &str) {
        match prefix {
            Some(prefix) => {
                self.terminating_crds.remove(prefix);
            }
            None => self.terminating_crds.retain(|_, name| name != crd),
        }
    }

    /// Updates the index from one change of the object at `key` (`object` is its new form,
    /// or its last one when `deleted`) and queues the work it implies. `namespace` is the
    /// namespace the key is in; `has_quotas` whether that namespace has ResourceQuotas.
    pub fn observe(
        &mut self,
        key: &str,
        object: Option<&Value>,
        deleted: bool,
        namespace: Option<String>,
        has_quotas: bool,
        queue: &mut VecDeque<Work>,
    ) {
        if let Some(namespace) = &namespace
            && has_quotas
        {
            queue.push_back(Work::Quotas(namespace.clone()));
        }
        if deleted {
            let uid = self.objects.get(key).map(|(uid, _)| uid.clone());
            let owners = self
                .objects
                .get(key)
                .map(|(_, o)| o.clone())
                .unwrap_or_default();
            self.remove(key);
            if let Some(uid) = uid
                && let Some(dependents) = self.dependents.get(&uid)
            {
                for dependent in dependents.clone() {
                    queue.push_back(Work::Dependent(dependent));
                }
            }
            for owner in owners {
                if let Some(owner_key) = self.keys_by_uid.get(&owner) {
                    queue.push_back(Work::Owner(owner_key.clone()));
                }
            }
            if let Some(namespace) = namespace
                && self.terminating.contains(&namespace)
            {
                queue.push_back(Work::Namespace(namespace));
            }
            let crds: Vec<String> = self
                .terminating_crds
                .iter()
                .filter(|(prefix, _)| key.starts_with(prefix.as_str()))
                .map(|(_, crd)| crd.clone())
                .collect();
            for crd in crds {
                queue.push_back(Work::CustomResources(crd));
            }
            if key.starts_with("/core/namespaces/")
                && let Some(object) = object
                && let Some(name) = meta_str(object, "name")
            {
                self.terminating.remove(name);
            }
            return;
        }
        let Some(object) = object else { return };
        self.insert(key, object);
        let owners = owner_uids(object);
        if owners.iter().any(|uid| !self.keys_by_uid.contains_key(uid)) {
            queue.push_back(Work::Dependent(key.to_string()));
        }
        if is_deleting(object) {
            let held = finalizers(object);
            if held
                .iter()
                .any(|f| f == FOREGROUND_FINALIZER || f == ORPHAN_FINALIZER)
            {
                queue.push_back(Work::Owner(key.to_string()));
            }
            if key.starts_with("/core/namespaces/")
                && let Some(name) = meta_str(object, "name")
            {
                self.terminating.insert(name.to_string());
                queue.push_back(Work::Namespace(name.to_string()));
            }
            if key.starts_with(CRD_PREFIX)
                && held.iter().any(|f| f == CLEANUP_FINALIZER)
                && let Some(name) = meta_str(object, "name")
            {
                queue.push_back(Work::CustomResources(name.to_string()));
            }
        }
    }
}

/// The UIDs of an object's owners.
pub fn owner_uids(object: &Value) -> Vec<String> {
    object
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid")?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// What becomes of a dependent, given those of its owners that still exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DependentAction {
    /// Nothing to do.
    Keep,
    /// Delete it, with this propagation: its owners are all gone (background) or one is
    /// being deleted in the foreground.
    Delete(Propagation),
    /// Drop the references to the owners that are gone, keeping these UIDs.
    KeepOwners(Vec<String>),
}

/// Decides about a dependent with owner UIDs `owners`, of which `living` still exist.
pub fn dependent_action(object: &Value, owners: &[String], living: &[Value]) -> DependentAction {
    if owners.is_empty() {
        return DependentAction::Keep;
    }
    if living.is_empty() {
        return if is_deleting(object) {
            DependentAction::Keep
        } else {
            DependentAction::Delete(Propagation::Background)
        };
    }
    let foreground_owner = living.iter().any(|owner| {
        is_deleting(owner) && finalizers(owner).iter().any(|f| f == FOREGROUND_FINALIZER)
    });
    if foreground_owner && !is_deleting(object) {
        return DependentAction::Delete(Propagation::Foreground);
    }
    if living.len() < owners.len() {
        return DependentAction::KeepOwners(
            living
                .iter()
                .filter_map(|o| meta_str(o, "uid").map(str::to_string))
                .collect(),
        );
    }
    DependentAction::Keep
}

/// The object with only the owner references whose UIDs are `living`.
pub fn retain_owners(current: &Value, living: &[String]) -> Value {
    let mut next = current.clone();
    if let Some(Value::Array(refs)) = next.pointer_mut("/metadata/ownerReferences") {
        refs.retain(|r| {
            r.get("uid")
                .and_then(Value::as_str)
                .is_some_and(|u| living.iter().any(|l| l == u))
        });
    }
    next
}

/// The object orphaned from the owner with `uid` (`ownerReferences` dropped when empty).
pub fn without_owner(current: &Value, uid: &str) -> Value {
    let mut next = current.clone();
    if let Some(Value::Array(refs)) = next.pointer_mut("/metadata/ownerReferences") {
        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
        if refs.is_empty()
            && let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.remove("ownerReferences");
        }
    }
    next
}

/// The object with one finalizer released (`finalizers` dropped when empty).
pub fn without_finalizer(current: &Value, finalizer: &str) -> Value {
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
    next
}

/// A ResourceQuota's status: its hard limits and what its namespace uses.
pub fn quota_status(quota: &Value, used: BTreeMap<String, Quantity>) -> Value {
    let used: serde_json::Map<String, Value> = used
        .into_iter()
        .map(|(k, v)| (k, json!(v.to_canonical())))
        .collect();
    let hard = quota.at("/spec/hard").cloned().unwrap_or(json!({}));
    json!({"hard": hard, "used": used})
}
