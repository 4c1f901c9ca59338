//! The scheduler's placements that its watches may not show yet — kube-scheduler's assumed
//! pods and the DRA plugin's in-flight allocations. The scheduler shell rebuilds its snapshot
//! from the watch cache every pass; a pass that ran before the watch delivered the last
//! pass's bindings would place those pods again and give the room and devices they took to
//! others. Each pass overlays what is remembered here on the watch cache: a pod bound here
//! counts as bound to its node, a claim allocated here as allocated, until the watch shows
//! the pod bound (or gone) and the claim allocated (or gone), or [`KEPT`] has passed.
//!
//! Knows nothing of the API; time is given.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use tokio::time::Instant;

use crate::shell::{ObjectKey, object_key, overlay};

/// How long a placement is remembered when the watch never confirms it.
pub const KEPT: Duration = Duration::from_secs(60);

fn bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

fn allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
}

/// Placements made here and not yet seen through the watch.
#[derive(Debug, Default)]
pub struct Assumed {
    /// Pod (namespace, name) → its uid, the node it was bound to, when.
    pods: HashMap<ObjectKey, ((String, String), Instant)>,
    /// Claims as written here (allocation and reservation), by (namespace, name), and
    /// whether this scheduler created them (the special claims of extended resources).
    claims: HashMap<ObjectKey, ((Arc<ResourceClaim>, bool), Instant)>,
}

impl Assumed {
    /// Remembers a binding of `pod` to `node`.
    pub fn bound(&mut self, pod: &Pod, node: &str, now: Instant) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        self.pods
            .insert(object_key(&pod.metadata), ((uid, node.to_string()), now));
    }

    /// Forgets the binding of `pod` remembered here: its binding cycle failed (upstream's
    /// `ForgetPod`), and it goes back to the queue.
    pub fn forget(&mut self, pod: &Pod) {
        self.pods.remove(&object_key(&pod.metadata));
    }

    /// Remembers a claim as written (allocated and reserved) for a pod about to be bound.
    pub fn wrote(&mut self, claim: ResourceClaim, now: Instant) {
        self.claims
            .insert(object_key(&claim.metadata), ((Arc::new(claim), false), now));
    }

    /// Remembers a claim this scheduler created, allocated and reserved (a pod's special
    /// claim for extended resources): until the watch shows it allocated it counts even
    /// where the watch does not show it at all.
    pub fn created(&mut self, claim: ResourceClaim, now: Instant) {
        self.claims
            .insert(object_key(&claim.metadata), ((Arc::new(claim), true), now));
    }

    /// Forgets a claim this scheduler deleted.
    pub fn deleted(&mut self, claim: &ResourceClaim) {
        self.claims.remove(&object_key(&claim.metadata));
    }

    /// The watched pods with those bound here shown bound; what the watch now shows bound,
    /// or no longer has, and what is too old, is forgotten.
    pub fn pods(&mut self, watched: Vec<Arc<Pod>>, now: Instant) -> Vec<Arc<Pod>> {
        overlay(
            &mut self.pods,
            watched,
            (now, KEPT),
            |pod, (uid, node): &(String, String)| {
                let same = pod.metadata.uid.as_deref().unwrap_or_default() == uid;
                (same && !bound(pod)).then(|| {
                    let mut shown = pod.clone();
                    shown.spec.get_or_insert_with(Default::default).node_name = Some(node.clone());
                    Arc::new(shown)
                })
            },
            |_| None,
        )
    }

    /// The watched claims with those allocated here shown as written here, and those created
    /// here that the watch does not show yet added; what the watch now shows allocated, or
    /// no longer has (unless created here), and what is too old, is forgotten.
    pub fn claims(
        &mut self,
        watched: Vec<Arc<ResourceClaim>>,
        now: Instant,
    ) -> Vec<Arc<ResourceClaim>> {
        overlay(
            &mut self.claims,
            watched,
            (now, KEPT),
            |claim, (ours, _)| {
                let same = claim.metadata.uid == ours.metadata.uid;
                (same && !allocated(claim)).then(|| Arc::clone(ours))
            },
            |(ours, created)| created.then(|| Arc::clone(ours)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, uid: &str, node: Option<&str>) -> Arc<Pod> {
        let mut pod = json!({"metadata": {"namespace": "ml", "name": name, "uid": uid},
            "spec": {"containers": [{"name": "c"}]}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        Arc::new(serde_json::from_value(pod).expect("pod"))
    }

    fn claim(name: &str, device: Option<&str>) -> ResourceClaim {
        let mut claim = json!({"metadata": {"namespace": "ml", "name": name, "uid": format!("uid-{name}")},
            "spec": {}});
        if let Some(device) = device {
            claim["status"] = json!({"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": device}]}}});
        }
        serde_json::from_value(claim).expect("claim")
    }

    fn nodes(pods: &[Arc<Pod>]) -> Vec<Option<String>> {
        pods.iter()
            .map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
            .collect()
    }

    #[test]
    fn a_binding_counts_until_the_watch_shows_it() {
        let start = Instant::now();
        let mut assumed = Assumed::default();
        let a = pod("a", "uid-a", None);
        assumed.wrote(claim("a-gpu", Some("gpu-0")), start);
        assumed.bound(&a, "n1", start);
        // The watch still shows the pod unbound and the claim unallocated: ours stand in.
        let pods = assumed.pods(vec![a.clone(), pod("b", "uid-b", None)], start);
        assert_eq!(nodes(&pods), [Some("n1".to_string()), None]);
        let claims = assumed.claims(vec![Arc::new(claim("a-gpu", None))], start);
        assert!(allocated(&claims[0]));
        // The watch catches up: its objects are used and the memory is dropped.
        let pods = assumed.pods(vec![pod("a", "uid-a", Some("n1"))], start);
        assert_eq!(nodes(&pods), [Some("n1".to_string())]);
        let claims = assumed.claims(vec![Arc::new(claim("a-gpu", Some("gpu-0")))], start);
        assert!(allocated(&claims[0]));
        assert!(assumed.pods.is_empty() && assumed.claims.is_empty());
    }

    #[test]
    fn a_created_claim_counts_before_the_watch_shows_it() {
        let start = Instant::now();
        let mut assumed = Assumed::default();
        assumed.created(claim("p-extended-resources-x1", Some("gpu-0")), start);
        assumed.wrote(claim("written", Some("gpu-1")), start);
        // Not watched yet: the created claim is added, a written one that vanished is not.
        let claims = assumed.claims(Vec::new(), start);
        let names: Vec<_> = claims.iter().map(|c| c.metadata.name.clone()).collect();
        assert_eq!(names, [Some("p-extended-resources-x1".to_string())]);
        assert!(allocated(&claims[0]));
        // Watched, allocated: forgotten.
        let watched = Arc::new(claim("p-extended-resources-x1", Some("gpu-0")));
        assert_eq!(assumed.claims(vec![watched], start).len(), 1);
        assert!(assumed.claims.is_empty());
        // Deleted here: no longer added.
        assumed.created(claim("gone", Some("gpu-3")), start);
        assumed.deleted(&claim("gone", None));
        assert!(assumed.claims(Vec::new(), start).is_empty());
        // Never watched: given up after a while.
        assumed.created(claim("late", Some("gpu-2")), start);
        assert!(assumed.claims(Vec::new(), start + KEPT).is_empty());
    }

    #[test]
    fn a_recreated_pod_a_vanished_one_and_an_old_binding_are_not_assumed() {
        let start = Instant::now();
        let mut assumed = Assumed::default();
        assumed.bound(&pod("a", "uid-a", None), "n1", start);
        // Same name, new uid: another pod.
        let pods = assumed.pods(vec![pod("a", "uid-new", None)], start);
        assert_eq!(nodes(&pods), [None]);
        assert!(assumed.pods.is_empty());
        // Gone from the watch: forgotten, not added back.
        assumed.bound(&pod("b", "uid-b", None), "n1", start);
        assert!(assumed.pods(Vec::new(), start).is_empty());
        assert!(assumed.pods.is_empty());
        // Never confirmed: given up after a while, so the pod can be placed again.
        assumed.bound(&pod("c", "uid-c", None), "n1", start);
        let pods = assumed.pods(vec![pod("c", "uid-c", None)], start + KEPT);
        assert_eq!(nodes(&pods), [None]);
    }
}
