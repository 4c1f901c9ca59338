//! Kueue's SchedulingEquivalenceHashing (`keps/9694-scheduling-equivalence-hashing`): the
//! scheduling shape of a pending Workload — its effective priority, its PodSets as the
//! scheduler reads them (count, minCount, one pod's requests, node selector, required node
//! affinity, tolerations, topology request) and its effective total requests. Two Workloads of
//! one ClusterQueue with the same shape get the same answer from flavor assignment and
//! preemption, so when one fails with NoFit or PreemptionNoCandidates the others can wait in
//! the inadmissible set without being evaluated.
//!
//! Kueue keys a shape by the first 64 bits of a SHA-256 digest of its JSON. Here a shape
//! carries a 64-bit fingerprint of most of its fields, so that most Workloads of another shape
//! are told apart by one comparison, and equal fingerprints are confirmed by comparing the
//! shapes whole: two different shapes never share a class. [`ShapeClasses`] keeps each shape
//! of a queue's Workloads once, so a Workload is compared whole once, when it joins its class,
//! and finding a class's Workloads compares class numbers. Knows nothing about when classes
//! are recorded or cleared: the ClusterQueue's queue decides.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::queue::QueuedWorkload;
use crate::workload::{PodSet, PodSetResources};

/// A Workload's scheduling shape.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SchedulingShape {
    fingerprint: u64,
    priority: i32,
    total_requests: Vec<PodSetResources>,
    pod_sets: Vec<PodSet>,
}

impl SchedulingShape {
    /// The shape of `workload`.
    pub(super) fn of(workload: &QueuedWorkload) -> SchedulingShape {
        SchedulingShape {
            fingerprint: fingerprint(workload),
            priority: workload.info.workload.priority,
            total_requests: workload.info.total_requests.clone(),
            pod_sets: workload.info.workload.pod_sets.clone(),
        }
    }

    /// Whether `workload`, whose [`fingerprint`] is `workload_fingerprint`, has this shape
    /// (compared without copying it; the fingerprint and the cheap fields first).
    pub(super) fn matches(&self, workload: &QueuedWorkload, workload_fingerprint: u64) -> bool {
        self.fingerprint == workload_fingerprint
            && self.priority == workload.info.workload.priority
            && self.total_requests == workload.info.total_requests
            && self.pod_sets == workload.info.workload.pod_sets
    }
}

/// A 64-bit digest of `workload`'s shape: equal shapes always give equal fingerprints (it
/// reads only shape fields; node affinity terms and tolerations by their number). A fixed-key
/// hasher: the same shape gives the same fingerprint in every run.
pub(super) fn fingerprint(workload: &QueuedWorkload) -> u64 {
    let mut hasher = DefaultHasher::new();
    workload.info.workload.priority.hash(&mut hasher);
    for total in &workload.info.total_requests {
        total.name.hash(&mut hasher);
        total.requests.hash(&mut hasher);
        total.count.hash(&mut hasher);
    }
    for pod_set in &workload.info.workload.pod_sets {
        pod_set.name.hash(&mut hasher);
        pod_set.count.hash(&mut hasher);
        pod_set.min_count.hash(&mut hasher);
        pod_set.requests.hash(&mut hasher);
        pod_set.node_selector.hash(&mut hasher);
        pod_set.required_affinity.len().hash(&mut hasher);
        pod_set.tolerations.len().hash(&mut hasher);
        pod_set.group.hash(&mut hasher);
        if let Some(request) = &pod_set.topology_request {
            request.required.hash(&mut hasher);
            request.preferred.hash(&mut hasher);
            request.unconstrained.hash(&mut hasher);
            request.slices.len().hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// The shapes of the Workloads a queue holds, each kept once with how many Workloads hold it,
/// numbered; a number is reused once no Workload holds its shape.
#[derive(Debug, Clone, Default)]
pub(super) struct ShapeClasses {
    classes: Vec<Option<Class>>,
    free: Vec<usize>,
    by_fingerprint: HashMap<u64, Vec<usize>>,
}

#[derive(Debug, Clone)]
struct Class {
    shape: SchedulingShape,
    holders: usize,
}

impl ShapeClasses {
    /// The number of `workload`'s shape, if a Workload held holds it.
    pub(super) fn find(&self, workload: &QueuedWorkload) -> Option<usize> {
        let fingerprint = fingerprint(workload);
        self.by_fingerprint
            .get(&fingerprint)?
            .iter()
            .copied()
            .find(|id| {
                self.classes[*id]
                    .as_ref()
                    .is_some_and(|class| class.shape.matches(workload, fingerprint))
            })
    }

    /// Counts one more holder of `workload`'s shape; answers its number.
    pub(super) fn join(&mut self, workload: &QueuedWorkload) -> usize {
        if let Some(id) = self.find(workload) {
            if let Some(class) = self.classes[id].as_mut() {
                class.holders += 1;
            }
            return id;
        }
        let class = Class {
            shape: SchedulingShape::of(workload),
            holders: 1,
        };
        let fingerprint = class.shape.fingerprint;
        let id = match self.free.pop() {
            Some(id) => {
                self.classes[id] = Some(class);
                id
            }
            None => {
                self.classes.push(Some(class));
                self.classes.len() - 1
            }
        };
        self.by_fingerprint.entry(fingerprint).or_default().push(id);
        id
    }

    /// Counts one holder fewer of shape `id`; forgets the shape when none is left.
    pub(super) fn leave(&mut self, id: usize) {
        let Some(class) = self.classes.get_mut(id).and_then(Option::as_mut) else {
            return;
        };
        class.holders -= 1;
        if class.holders > 0 {
            return;
        }
        let fingerprint = class.shape.fingerprint;
        self.classes[id] = None;
        self.free.push(id);
        if let Some(ids) = self.by_fingerprint.get_mut(&fingerprint) {
            ids.retain(|other| *other != id);
            if ids.is_empty() {
                self.by_fingerprint.remove(&fingerprint);
            }
        }
    }

    /// How many shapes are held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.classes.iter().flatten().count()
    }
}
