//! The common shape of the workload cores' plans: the writes that bring the cluster in line
//! with one owner object (a ReplicaSet, a Job, a JobSet…), in the order they must be made.
//! Each kind's plan converts into [`Writes`]; one shell function carries them out.
//!
//! Knows which objects to create, patch or delete and the owner's new status; does not know
//! how a write reaches an API, which errors a shell tolerates, or who it writes as.

use serde_json::Value;

/// The kinds of objects a workload plan writes, in its owner's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `v1` Pods.
    Pod,
    /// `v1` Services.
    Service,
    /// `apps/v1` ReplicaSets.
    ReplicaSet,
    /// `apps/v1` StatefulSets.
    StatefulSet,
    /// `batch/v1` Jobs.
    Job,
    /// `v1` PersistentVolumeClaims.
    PersistentVolumeClaim,
    /// `discovery.k8s.io/v1` EndpointSlices.
    EndpointSlice,
    /// `v1` Endpoints.
    Endpoints,
}

/// How a deletion reaches the deleted object's dependents (`propagationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// The kind's default (none sent).
    Default,
    /// The object goes at once; the garbage collector deletes its dependents after.
    Background,
    /// The object stays, marked, until the garbage collector has deleted its dependents.
    Foreground,
}

/// One write, in the owner's namespace.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Create this object (a whole manifest).
    Create(Resource, Value),
    /// Merge-patch the named object with this patch.
    Patch(Resource, String, Value),
    /// Delete the named object.
    Delete {
        /// What it is.
        resource: Resource,
        /// Its name.
        name: String,
        /// How its dependents go.
        propagation: Propagation,
    },
    /// Delete the owner itself (a finished object whose time to live has passed).
    DeleteOwner(Propagation),
    /// Merge-patch the owner's `status` subresource with `{"status": …}`.
    Status(Value),
}

/// The writes of one reconciliation, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Writes(pub Vec<Write>);

impl Writes {
    /// Adds creations of `objects`.
    pub fn create(&mut self, resource: Resource, objects: impl IntoIterator<Item = Value>) {
        self.0
            .extend(objects.into_iter().map(|o| Write::Create(resource, o)));
    }

    /// Adds deletions of the named objects, with the kind's default propagation.
    pub fn delete<'a>(&mut self, resource: Resource, names: impl IntoIterator<Item = &'a String>) {
        self.0.extend(names.into_iter().map(|name| Write::Delete {
            resource,
            name: name.clone(),
            propagation: Propagation::Default,
        }));
    }

    /// Adds merge patches of the named objects.
    pub fn patch(
        &mut self,
        resource: Resource,
        patches: impl IntoIterator<Item = (String, Value)>,
    ) {
        self.0.extend(
            patches
                .into_iter()
                .map(|(name, patch)| Write::Patch(resource, name, patch)),
        );
    }

    /// Adds the owner's new status, unless the owner shows it already.
    pub fn status(&mut self, owner: &Value, status: Value) {
        if owner.get("status") != Some(&status) {
            self.0.push(Write::Status(status));
        }
    }
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`: changed and added fields,
/// and `null` for each field `new` no longer has; an empty object when they are equal.
pub fn merge_patch_between(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = serde_json::Map::new();
            for (key, value) in new {
                match old.get(key) {
                    Some(before) if before == value => {}
                    Some(before) if before.is_object() && value.is_object() => {
                        patch.insert(key.clone(), merge_patch_between(before, value));
                    }
                    _ => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in old.keys().filter(|key| !new.contains_key(*key)) {
                patch.insert(key.clone(), Value::Null);
            }
            Value::Object(patch)
        }
        _ => new.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_merge_patch_between_two_objects_turns_one_into_the_other() {
        let cases = [
            (json!({"a": 1}), json!({"a": 1}), json!({})),
            (
                json!({"a": 1}),
                json!({"a": 2, "b": 3}),
                json!({"a": 2, "b": 3}),
            ),
            (
                json!({"spec": {"affinity": {"x": 1}, "containers": [1]}}),
                json!({"spec": {"containers": [1, 2]}}),
                json!({"spec": {"affinity": null, "containers": [1, 2]}}),
            ),
            (json!({"a": {"b": 1}}), json!({"a": 5}), json!({"a": 5})),
        ];
        for (old, new, patch) in cases {
            let made = merge_patch_between(&old, &new);
            assert_eq!(made, patch, "{old} -> {new}");
            let mut patched = old.clone();
            json_patch::merge(&mut patched, &made);
            assert_eq!(patched, new, "{old} -> {new}");
        }
    }

    #[test]
    fn an_unchanged_status_is_not_written() {
        let owner = json!({"status": {"replicas": 1}});
        let mut writes = Writes::default();
        writes.status(&owner, json!({"replicas": 1}));
        assert!(writes.0.is_empty());
        writes.status(&owner, json!({"replicas": 2}));
        assert_eq!(writes.0, [Write::Status(json!({"replicas": 2}))]);
    }
}
