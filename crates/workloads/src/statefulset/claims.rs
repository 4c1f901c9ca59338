//! A StatefulSet's `volumeClaimTemplates`, as upstream's StatefulSet controller carries them
//! out: one PersistentVolumeClaim per template and ordinal, named `<template>-<set>-<ordinal>`
//! and labelled with the set's selector, the pod's volume of the template's name pointing at
//! it, and the claim's owners kept in line with `persistentVolumeClaimRetentionPolicy`
//! (`whenDeleted: Delete`: owned by the set; `whenScaled: Delete`: owned by its pod once the
//! pod is scaled away, so the garbage collector takes the claim with it).
//!
//! Knows claims and owner references; does not know when pods are created or deleted (the
//! StatefulSet plan decides) nor how a write reaches the API.

use serde_json::{Value, json};
use tessera_model::json::text;

/// The name of a template's claim for the pod of `ordinal`.
pub fn claim_name(template: &str, set_name: &str, ordinal: i64) -> String {
    format!("{template}-{set_name}-{ordinal}")
}

fn templates(set: &Value) -> &[Value] {
    set.pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The claims of the pod of `ordinal`, one per template, as they are created (without owners):
/// the template with the pod's claim name and the set's namespace, its labels joined by the
/// set's selector labels.
pub fn claims_for(set: &Value, ordinal: i64) -> Vec<Value> {
    let set_name = text(set, "/metadata/name");
    let selector = set
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    templates(set)
        .iter()
        .map(|template| {
            let mut claim = template.clone();
            claim["apiVersion"] = json!("v1");
            claim["kind"] = json!("PersistentVolumeClaim");
            claim["metadata"]["name"] = json!(claim_name(
                text(template, "/metadata/name"),
                set_name,
                ordinal
            ));
            if let Some(namespace) = set.pointer("/metadata/namespace") {
                claim["metadata"]["namespace"] = namespace.clone();
            }
            if !claim["metadata"]["labels"].is_object() {
                claim["metadata"]["labels"] = json!({});
            }
            for (key, value) in &selector {
                claim["metadata"]["labels"][key] = value.clone();
            }
            claim
        })
        .collect()
}

/// Points the pod's volumes at its claims: a `persistentVolumeClaim` volume per template,
/// named as the template, in place of any volume of that name the pod template has.
pub fn add_volumes(set: &Value, ordinal: i64, pod: &mut Value) {
    let set_name = text(set, "/metadata/name");
    let names: Vec<&str> = templates(set)
        .iter()
        .map(|t| text(t, "/metadata/name"))
        .collect();
    if names.is_empty() {
        return;
    }
    let mut volumes: Vec<Value> = names
        .iter()
        .map(|name| {
            json!({"name": name, "persistentVolumeClaim": {"claimName": claim_name(name, set_name, ordinal)}})
        })
        .collect();
    if let Some(existing) = pod.pointer("/spec/volumes").and_then(Value::as_array) {
        volumes.extend(
            existing
                .iter()
                .filter(|v| !names.contains(&text(v, "/name")))
                .cloned(),
        );
    }
    pod["spec"]["volumes"] = json!(volumes);
}

/// Whether the pod's volumes cover each of the set's claims (upstream's `storageMatches`).
pub fn storage_matches(set: &Value, ordinal: i64, pod: &Value) -> bool {
    let set_name = text(set, "/metadata/name");
    let volumes = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    templates(set).iter().all(|template| {
        let name = text(template, "/metadata/name");
        volumes.iter().any(|v| {
            text(v, "/name") == name
                && text(v, "/persistentVolumeClaim/claimName")
                    == claim_name(name, set_name, ordinal)
        })
    })
}

/// The set's claim retention policy: (delete when the set is deleted, delete when scaled
/// away); both `Retain` unless set.
fn policy(set: &Value) -> (bool, bool) {
    let delete = |field: &str| {
        text(
            set,
            &format!("/spec/persistentVolumeClaimRetentionPolicy/{field}"),
        ) == "Delete"
    };
    (delete("whenDeleted"), delete("whenScaled"))
}

/// An object as a claim owner: (apiVersion, kind, name, uid).
struct Owner<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: &'a str,
}

impl<'a> Owner<'a> {
    fn set(set: &'a Value) -> Self {
        Owner {
            api_version: "apps/v1",
            kind: "StatefulSet",
            name: text(set, "/metadata/name"),
            uid: text(set, "/metadata/uid"),
        }
    }

    fn pod(pod: &'a Value) -> Self {
        Owner {
            api_version: "v1",
            kind: "Pod",
            name: text(pod, "/metadata/name"),
            uid: text(pod, "/metadata/uid"),
        }
    }

    /// The reference names this object (its kind and name, whatever the UID).
    fn matches(&self, reference: &Value) -> bool {
        text(reference, "/apiVersion") == self.api_version
            && text(reference, "/kind") == self.kind
            && text(reference, "/name") == self.name
    }

    /// The reference names this object of another UID: an earlier object of the same name.
    fn stale_in(&self, references: &[Value]) -> bool {
        references
            .iter()
            .find(|r| self.matches(r))
            .is_some_and(|r| text(r, "/uid") != self.uid)
    }

    fn referenced_by(&self, references: &[Value]) -> bool {
        references.iter().any(|r| text(r, "/uid") == self.uid)
    }

    fn controller_reference(&self) -> Value {
        json!({"apiVersion": self.api_version, "kind": self.kind, "name": self.name,
               "uid": self.uid, "controller": true, "blockOwnerDeletion": true})
    }
}

fn is_controller(reference: &Value) -> bool {
    reference.get("controller").and_then(Value::as_bool) == Some(true)
}

fn references(claim: &Value) -> Vec<Value> {
    claim
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Whether a controller other than the set and the pod holds the claim, under a policy that
/// deletes claims (under `Retain` another controller is no concern).
fn unexpected_controller(refs: &[Value], set: &Owner, pod: &Owner, deleting: bool) -> bool {
    deleting
        && refs.iter().any(|r| {
            if set.matches(r) {
                text(r, "/uid") != set.uid
            } else if pod.matches(r) {
                text(r, "/uid") != pod.uid
            } else {
                is_controller(r)
            }
        })
}

/// The owners the claim should have under the set's policy for this pod, if they are not the
/// ones it has (upstream's `isClaimOwnerUpToDate` and `updateClaimOwnerRefForSetAndPod`).
/// `condemned`: the pod's ordinal is outside the set's range (scaled away). A claim an earlier
/// set or pod of the same name still owns is left alone, as is one another controller holds
/// (bar removing the set's and the pod's references from it).
pub fn owners_due(claim: &Value, set: &Value, pod: &Value, condemned: bool) -> Option<Vec<Value>> {
    let refs = references(claim);
    let (set_owner, pod_owner) = (Owner::set(set), Owner::pod(pod));
    let (when_deleted, when_scaled) = policy(set);
    if set_owner.stale_in(&refs) || pod_owner.stale_in(&refs) {
        return None;
    }
    let unexpected =
        unexpected_controller(&refs, &set_owner, &pod_owner, when_deleted || when_scaled);
    let has_set = set_owner.referenced_by(&refs);
    let has_pod = pod_owner.referenced_by(&refs);
    let (wants_set, wants_pod) = if unexpected {
        (false, false)
    } else {
        (
            when_deleted && !(when_scaled && condemned),
            when_scaled && condemned,
        )
    };
    let non_controller = refs.iter().any(|r| {
        (text(r, "/uid") == set_owner.uid || text(r, "/uid") == pod_owner.uid) && !is_controller(r)
    });
    let up_to_date = if unexpected {
        !has_set && !has_pod
    } else {
        !non_controller && has_set == wants_set && has_pod == wants_pod
    };
    if up_to_date {
        return None;
    }
    let mut kept: Vec<Value> = refs
        .into_iter()
        .filter(|r| !set_owner.matches(r) && !pod_owner.matches(r))
        .collect();
    if wants_pod {
        kept.push(pod_owner.controller_reference());
    }
    if wants_set {
        kept.push(set_owner.controller_reference());
    }
    Some(kept)
}

/// The claims of the pod of `ordinal` that do not exist yet, each with the owners the set's
/// policy gives a pod in range.
pub fn missing(set: &Value, ordinal: i64, existing: &[Value]) -> Vec<Value> {
    let pod_name = format!("{}-{ordinal}", text(set, "/metadata/name"));
    let pod = json!({"metadata": {"name": pod_name}});
    claims_for(set, ordinal)
        .into_iter()
        .filter(|claim| {
            let name = text(claim, "/metadata/name");
            !existing.iter().any(|c| text(c, "/metadata/name") == name)
        })
        .map(|mut claim| {
            if let Some(owners) = owners_due(&claim, set, &pod, false)
                && !owners.is_empty()
            {
                claim["metadata"]["ownerReferences"] = json!(owners);
            }
            claim
        })
        .collect()
}

/// Whether any existing claim of the pod of `ordinal` is being deleted: the pod waits for it
/// to go, as upstream's controller refuses to start a pod on a terminating claim.
pub fn terminating(set: &Value, ordinal: i64, existing: &[Value]) -> bool {
    claims_for(set, ordinal).iter().any(|claim| {
        let name = text(claim, "/metadata/name");
        existing.iter().any(|c| {
            text(c, "/metadata/name") == name && c.pointer("/metadata/deletionTimestamp").is_some()
        })
    })
}

/// The existing claims of the pod of `ordinal`.
pub fn of_pod<'a>(set: &Value, ordinal: i64, existing: &'a [Value]) -> Vec<&'a Value> {
    let names: Vec<String> = claims_for(set, ordinal)
        .iter()
        .map(|c| text(c, "/metadata/name").to_string())
        .collect();
    existing
        .iter()
        .filter(|c| names.iter().any(|n| n == text(c, "/metadata/name")))
        .collect()
}

#[cfg(test)]
mod tests;
