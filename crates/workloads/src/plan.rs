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
}

/// One write, in the owner's namespace.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Create this object (a whole manifest).
    Create(Resource, Value),
    /// Merge-patch the named object with this patch.
    Patch(Resource, String, Value),
    /// Delete the named object; `background`: with propagation policy `Background`.
    Delete {
        /// What it is.
        resource: Resource,
        /// Its name.
        name: String,
        /// Whether its dependents are deleted in the background.
        background: bool,
    },
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

    /// Adds deletions (foreground) of the named objects.
    pub fn delete<'a>(&mut self, resource: Resource, names: impl IntoIterator<Item = &'a String>) {
        self.0.extend(names.into_iter().map(|name| Write::Delete {
            resource,
            name: name.clone(),
            background: false,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
