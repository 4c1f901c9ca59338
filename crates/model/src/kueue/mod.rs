//! Kueue's API (`kueue.x-k8s.io`) as Tessera bundles it: the `v1beta2` types of
//! ResourceFlavor, ClusterQueue, LocalQueue, Cohort, Workload, WorkloadPriorityClass,
//! AdmissionCheck, Topology, MultiKueueConfig and MultiKueueCluster (serde + schemars,
//! [`queues`], [`workload`], [`topology`] and [`multikueue`]) and the
//! CustomResourceDefinitions generated from them ([`crd::definitions`]: `v1beta2` stored,
//! `v1beta1` served), so that users' Kueue YAML works unchanged against `tessera up`.
//!
//! Knows nothing about storing, converting or validating objects beyond their schemas:
//! conversion between versions and Kueue's webhook checks live in `tessera-api`.

pub mod crd;
pub mod go_shape;
pub mod multikueue;
pub mod pod;
pub mod queues;
mod refine;
pub mod topology;
pub mod topology_assignment;
mod versions;
pub mod workload;

/// Kueue's API group.
pub const GROUP: &str = "kueue.x-k8s.io";
/// The version objects are stored in.
pub const STORAGE_VERSION: &str = "v1beta2";
/// The older version still served (converted on the way in and out).
pub const SERVED_VERSION: &str = "v1beta1";
/// The label naming the LocalQueue of a job (`constants.QueueLabel`).
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// The label naming the WorkloadPriorityClass of a job (`constants.WorkloadPriorityClassLabel`).
pub const PRIORITY_CLASS_LABEL: &str = "kueue.x-k8s.io/priority-class";

#[cfg(test)]
mod tests;

/// `GetWorkloadNameForOwnerWithGVK`: `<kind in lower case>-<owner>` (truncated to 247
/// characters) and the first five hex digits of a SHA-1 over the owner's kind, group, name and
/// UID, one a line.
pub fn workload_name(kind: &str, group: &str, owner_name: &str, owner_uid: &str) -> String {
    const HASH_LENGTH: usize = 5;
    const MAX_PREFIX: usize = 253 - 1 - HASH_LENGTH;
    let mut prefix = format!("{}-{owner_name}", kind.to_lowercase());
    if prefix.len() > MAX_PREFIX {
        let mut end = MAX_PREFIX;
        while !prefix.is_char_boundary(end) {
            end -= 1;
        }
        prefix.truncate(end);
    }
    let mut hash = sha1_smol::Sha1::new();
    hash.update(format!("{kind}\n{group}\n{owner_name}\n{owner_uid}").as_bytes());
    let digest = hash.digest().to_string();
    format!("{prefix}-{}", &digest[..HASH_LENGTH])
}
