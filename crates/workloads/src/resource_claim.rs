//! The ResourceClaim core: what upstream's resourceclaim controller does, and — for pods
//! created already bound to a node (`spec.nodeName`, which bypasses the scheduler) — what the
//! scheduler's DynamicResources plugin does for the others:
//!
//! - a pod claim from a ResourceClaimTemplate gets its own claim (`generateName`
//!   `<pod>-<claim>-`, annotation `resource.kubernetes.io/pod-claim-name`, owned by the pod),
//!   recorded in the pod's `status.resourceClaimStatuses`;
//! - a bound pod's unallocated claims are allocated together on its node by the structured
//!   allocator (finalizer `resource.kubernetes.io/delete-protection`), and every claim it uses
//!   is reserved for it (`status.reservedFor`);
//! - reservations of pods that are gone or finished are dropped, and a claim this controller
//!   allocated that no pod reserves any more is deallocated (and its finalizer removed).
//!
//! Pure: a snapshot in, actions out; the shell (`tessera_controllers::resource_claims`) writes them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus,
    ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use tessera_dra::allocator::{DeviceClasses, add_in_use, devices_in_use};
use tessera_dra::{Allocator, NodeView};

/// The annotation naming the pod claim a generated claim is for.
pub const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";
/// The finalizer on claims allocated here, removed when they are deallocated.
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// What the cluster looks like (a watch cache's objects, shared).
#[derive(Default)]
pub struct Snapshot {
    /// All pods.
    pub pods: Vec<Arc<Pod>>,
    /// All claims.
    pub claims: Vec<Arc<ResourceClaim>>,
    /// All templates.
    pub templates: Vec<Arc<ResourceClaimTemplate>>,
    /// All slices.
    pub slices: Vec<Arc<ResourceSlice>>,
    /// All classes.
    pub classes: Vec<Arc<DeviceClass>>,
    /// All nodes.
    pub nodes: Vec<Arc<Node>>,
}

/// A change to make.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create a claim for a pod from a template.
    CreateClaim(Box<ResourceClaim>),
    /// Record the pod's generated claims in `status.resourceClaimStatuses`.
    SetPodClaimStatuses {
        /// Namespace.
        namespace: String,
        /// Pod name.
        pod: String,
        /// (pod claim name, claim name).
        statuses: Vec<(String, String)>,
    },
    /// Add the delete-protection finalizer (before allocating).
    Protect {
        /// Namespace.
        namespace: String,
        /// Claim name.
        name: String,
    },
    /// Replace a claim's status (allocation and reservations).
    SetClaimStatus {
        /// Namespace.
        namespace: String,
        /// Claim name.
        name: String,
        /// The resourceVersion the change is based on.
        resource_version: String,
        /// The new status.
        status: Box<ResourceClaimStatus>,
    },
    /// Remove the delete-protection finalizer (after deallocating).
    Unprotect {
        /// Namespace.
        namespace: String,
        /// Claim name.
        name: String,
    },
    /// Tell the pod's owner why its claims cannot be allocated.
    Warn {
        /// Namespace.
        namespace: String,
        /// Pod name.
        pod: String,
        /// Event reason.
        reason: String,
        /// Event message.
        message: String,
    },
}

fn key(meta: &ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Where each claim of a pass is, found without a scan: by (namespace, name), and a
/// generated claim — owned by its pod, annotated with the pod claim's name — by (namespace,
/// owner pod uid, pod claim name), the first such claim winning.
struct ClaimIndex {
    by_name: HashMap<(String, String), usize>,
    generated: HashMap<(String, String, String), usize>,
}

impl ClaimIndex {
    fn new(claims: &[Arc<ResourceClaim>]) -> ClaimIndex {
        let mut by_name = HashMap::with_capacity(claims.len());
        let mut generated = HashMap::new();
        for (i, claim) in claims.iter().enumerate() {
            let (namespace, name) = key(&claim.metadata);
            let pod_claim = claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(POD_CLAIM_NAME));
            if let Some(pod_claim) = pod_claim {
                let owners = claim.metadata.owner_references.iter().flatten();
                for owner in owners.filter(|o| o.controller == Some(true)) {
                    generated
                        .entry((namespace.clone(), owner.uid.clone(), pod_claim.clone()))
                        .or_insert(i);
                }
            }
            by_name.entry((namespace, name)).or_insert(i);
        }
        ClaimIndex { by_name, generated }
    }

    /// The claim a generated pod claim resolved to.
    fn generated(&self, pod: &Pod, pod_claim: &str) -> Option<usize> {
        let uid = pod.metadata.uid.as_deref()?;
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        self.generated
            .get(&(namespace, uid.to_string(), pod_claim.to_string()))
            .copied()
    }

    fn named(&self, namespace: &str, name: &str) -> Option<usize> {
        self.by_name
            .get(&(namespace.to_string(), name.to_string()))
            .copied()
    }
}

fn allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
}

fn reserved_for(claim: &ResourceClaim, uid: &str) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|r| r.iter().any(|c| c.uid == uid))
}

/// Whether the claim carries the delete-protection finalizer.
pub fn protected(claim: &ResourceClaim) -> bool {
    claim
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == DELETE_PROTECTION)
}

/// The `reservedFor` entry of a pod.
pub fn consumer(pod: &Pod) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

/// The actions that bring the cluster in line; `now` stamps allocations.
pub fn reconcile(snapshot: &Snapshot, now: SystemTime) -> Vec<Action> {
    let now = crate::meta_time(now);
    let mut actions = Vec::new();
    // Claims as this pass leaves them, so two pods never get the same device.
    // Shared until changed (copied on write).
    let mut claims: Vec<Arc<ResourceClaim>> = snapshot.claims.clone();
    let index = ClaimIndex::new(&claims);
    let live: BTreeMap<&str, &Pod> = snapshot
        .pods
        .iter()
        .filter(|p| !finished(p))
        .filter_map(|p| Some((p.metadata.uid.as_deref()?, p.as_ref())))
        .collect();

    // Stale reservations first: devices of finished pods return to the pool.
    for claim in claims.iter_mut() {
        let Some(status) = claim.status.as_ref() else {
            continue;
        };
        let reserved = status.reserved_for.iter().flatten();
        let before = reserved.clone().count();
        let after = reserved
            .filter(|c| live.contains_key(c.uid.as_str()))
            .count();
        let release = after == 0
            && status.allocation.is_some()
            && protected(claim)
            && (before > 0 || claim.metadata.deletion_timestamp.is_some());
        if before == after && !release {
            continue;
        }
        let claim = Arc::make_mut(claim);
        let status = claim.status.get_or_insert_with(Default::default);
        if let Some(reserved) = status.reserved_for.as_mut() {
            reserved.retain(|c| live.contains_key(c.uid.as_str()));
        }
        if after == 0 {
            status.reserved_for = None;
        }
        if release {
            status.allocation = None;
        }
        let (namespace, name) = key(&claim.metadata);
        actions.push(Action::SetClaimStatus {
            namespace: namespace.clone(),
            name: name.clone(),
            resource_version: claim.metadata.resource_version.clone().unwrap_or_default(),
            status: Box::new(status.clone()),
        });
        if release {
            actions.push(Action::Unprotect { namespace, name });
        }
    }

    // What allocations hold once the stale ones are released, kept up to date through the
    // pass; the classes compiled once.
    let mut in_use = devices_in_use(claims.iter().map(AsRef::as_ref));
    let classes = DeviceClasses::new(snapshot.classes.iter().map(AsRef::as_ref));
    for pod in &snapshot.pods {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        let pod_claims = spec.resource_claims.as_deref().unwrap_or_default();
        if pod_claims.is_empty() || finished(pod) || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let (namespace, pod_name) = key(&pod.metadata);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        // Resolve every pod claim to a claim name, creating generated claims.
        let mut names: Vec<String> = Vec::new();
        let mut statuses: Vec<(String, String)> = Vec::new();
        let mut complete = true;
        for pod_claim in pod_claims {
            if let Some(name) = &pod_claim.resource_claim_name {
                names.push(name.clone());
            } else if let Some(template) = &pod_claim.resource_claim_template_name {
                match index.generated(pod, &pod_claim.name) {
                    Some(i) => {
                        let claim = &claims[i];
                        let name = claim.metadata.name.clone().unwrap_or_default();
                        statuses.push((pod_claim.name.clone(), name.clone()));
                        names.push(name);
                    }
                    None => {
                        complete = false;
                        let found = snapshot.templates.iter().find(|t| {
                            t.metadata.namespace.as_deref() == Some(namespace.as_str())
                                && t.metadata.name.as_deref() == Some(template.as_str())
                        });
                        match found {
                            Some(template) => actions.push(Action::CreateClaim(Box::new(
                                claim_from_template(template, pod, &pod_claim.name),
                            ))),
                            None => actions.push(Action::Warn {
                                namespace: namespace.clone(),
                                pod: pod_name.clone(),
                                reason: "FailedResourceClaimCreation".into(),
                                message: format!(
                                    "PodResourceClaim {}: resource claim template \"{template}\": resourceclaimtemplate.resource.k8s.io \"{template}\" not found",
                                    pod_claim.name
                                ),
                            }),
                        }
                    }
                }
            }
        }
        let recorded: Vec<(String, String)> = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .map(|all| {
                all.iter()
                    .filter_map(|s| Some((s.name.clone(), s.resource_claim_name.clone()?)))
                    .collect()
            })
            .unwrap_or_default();
        if !statuses.is_empty() && statuses.iter().any(|s| !recorded.contains(s)) {
            actions.push(Action::SetPodClaimStatuses {
                namespace: namespace.clone(),
                pod: pod_name.clone(),
                statuses: statuses.clone(),
            });
        }
        let Some(node_name) = spec.node_name.as_deref() else {
            continue;
        };
        if !complete {
            continue;
        }
        let indexes: Vec<Option<usize>> = names
            .iter()
            .map(|name| index.named(&namespace, name))
            .collect();
        if let Some(missing) = names.iter().zip(&indexes).find(|(_, i)| i.is_none()) {
            actions.push(Action::Warn {
                namespace: namespace.clone(),
                pod: pod_name.clone(),
                reason: "FailedPrepareDynamicResources".into(),
                message: format!("resourceclaim.resource.k8s.io \"{}\" not found", missing.0),
            });
            continue;
        }
        let indexes: Vec<usize> = indexes.into_iter().flatten().collect();
        let pending: Vec<usize> = indexes
            .iter()
            .copied()
            .filter(|&i| !allocated(&claims[i]))
            .collect();
        if !pending.is_empty() {
            let node = snapshot
                .nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(node_name));
            let view = NodeView {
                name: node_name.to_string(),
                labels: node
                    .and_then(|n| n.metadata.labels.clone())
                    .unwrap_or_default(),
            };
            let slices = snapshot.slices.iter().map(AsRef::as_ref);
            let allocator = Allocator::prepared(view, slices, &classes, &in_use);
            let asking: Vec<&ResourceClaim> = pending.iter().map(|&i| &*claims[i]).collect();
            let results = match allocator.allocate(&asking) {
                Ok(Some(results)) => results,
                Ok(None) => {
                    actions.push(Action::Warn {
                        namespace: namespace.clone(),
                        pod: pod_name.clone(),
                        reason: "FailedScheduling".into(),
                        message: format!("cannot allocate all claims on node {node_name}"),
                    });
                    continue;
                }
                Err(error) => {
                    actions.push(Action::Warn {
                        namespace: namespace.clone(),
                        pod: pod_name.clone(),
                        reason: "FailedScheduling".into(),
                        message: error.to_string(),
                    });
                    continue;
                }
            };
            for (&i, mut result) in pending.iter().zip(results) {
                result.allocation_timestamp = Some(now.clone());
                add_in_use(&mut in_use, Some(&result));
                let claim = Arc::make_mut(&mut claims[i]);
                if !protected(claim) {
                    let (namespace, name) = key(&claim.metadata);
                    actions.push(Action::Protect { namespace, name });
                    claim
                        .metadata
                        .finalizers
                        .get_or_insert_with(Vec::new)
                        .push(DELETE_PROTECTION.into());
                }
                claim.status.get_or_insert_with(Default::default).allocation = Some(result);
            }
        }
        // Reserve every claim for the pod (a newly allocated one in the same write).
        for &i in &indexes {
            let newly = pending.contains(&i);
            if reserved_for(&claims[i], &uid) && !newly {
                continue;
            }
            let claim = Arc::make_mut(&mut claims[i]);
            let status = claim.status.get_or_insert_with(Default::default);
            if !status.reserved_for.iter().flatten().any(|c| c.uid == uid) {
                status
                    .reserved_for
                    .get_or_insert_with(Vec::new)
                    .push(consumer(pod));
            }
            let (namespace, name) = key(&claim.metadata);
            actions.push(Action::SetClaimStatus {
                namespace,
                name,
                resource_version: claim.metadata.resource_version.clone().unwrap_or_default(),
                status: Box::new(status.clone()),
            });
        }
    }
    actions
}

/// The claim upstream's controller creates for `pod`'s claim `pod_claim` from `template`.
pub fn claim_from_template(
    template: &ResourceClaimTemplate,
    pod: &Pod,
    pod_claim: &str,
) -> ResourceClaim {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let mut annotations: BTreeMap<String, String> = template
        .spec
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    annotations.insert(POD_CLAIM_NAME.into(), pod_claim.into());
    // Upstream truncates each part so the generated name stays within 63 characters.
    let prefix: String = format!(
        "{}-{}-",
        pod_name.chars().take(28).collect::<String>(),
        pod_claim.chars().take(28).collect::<String>()
    );
    ResourceClaim {
        metadata: ObjectMeta {
            generate_name: Some(prefix),
            namespace: pod.metadata.namespace.clone(),
            labels: template
                .spec
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone()),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod_name,
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: template.spec.spec.clone(),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(
        name: &str,
        uid: &str,
        node: Option<&str>,
        phase: &str,
        claims: serde_json::Value,
    ) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ml", "name": name, "uid": uid},
            "spec": {"nodeName": node, "resourceClaims": claims, "containers": [{"name": "c"}]},
            "status": {"phase": phase},
        }))
        .expect("pod")
    }

    fn snapshot(pods: Vec<Pod>, claims: Vec<serde_json::Value>) -> Snapshot {
        Snapshot {
            pods: pods.into_iter().map(Arc::new).collect(),
            claims: claims.into_iter().map(|c| Arc::new(serde_json::from_value(c).expect("claim"))).collect(),
            templates: vec![serde_json::from_value(json!({
                "metadata": {"namespace": "ml", "name": "one-gpu"},
                "spec": {"metadata": {"labels": {"team": "a"}}, "spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
            }))
            .expect("template")].into_iter().map(Arc::new).collect(),
            slices: vec![serde_json::from_value(json!({
                "metadata": {"name": "n1-gpu"},
                "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1",
                    "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0"}]}
            }))
            .expect("slice")].into_iter().map(Arc::new).collect(),
            classes: vec![serde_json::from_value(json!({
                "metadata": {"name": "gpu.nvidia.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}
            }))
            .expect("class")].into_iter().map(Arc::new).collect(),
            nodes: Vec::new(),
        }
    }

    fn claim(name: &str, status: serde_json::Value, finalizers: &[&str]) -> serde_json::Value {
        json!({"metadata": {"namespace": "ml", "name": name, "resourceVersion": "7", "finalizers": finalizers},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": status})
    }

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH
    }

    /// The scheduler's special claim for a pod's extended resources (no pod claim names it)
    /// stays allocated and reserved while its pod runs, and is released once the pod is
    /// gone or finished; deleting it is the garbage collector's (it is owned by the pod).
    #[test]
    fn a_special_claim_for_extended_resources_lives_as_long_as_its_pod() {
        let special = |reserved_by: &str| {
            let mut claim = claim(
                "trainer-extended-resources-x1",
                json!({"allocation": {"devices": {"results": [
                        {"request": "container-0-request-0", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]}},
                    "reservedFor": [{"resource": "pods", "name": "trainer", "uid": reserved_by}]}),
                &[DELETE_PROTECTION],
            );
            claim["metadata"]["annotations"] =
                json!({"resource.kubernetes.io/extended-resource-claim": "true"});
            claim["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod",
                "name": "trainer", "uid": reserved_by, "controller": true}]);
            claim
        };
        let running = pod("trainer", "u1", Some("n1"), "Running", json!([]));
        let finished = pod("trainer", "u1", Some("n1"), "Succeeded", json!([]));
        // (pods, whether the claim is released)
        let table = [
            (vec![running], false),
            (vec![finished], true),
            (vec![], true),
        ];
        for (pods, released) in table {
            let live = pods.len();
            let actions = reconcile(&snapshot(pods, vec![special("u1")]), now());
            if !released {
                assert!(actions.is_empty(), "{live} pods: {actions:?}");
                continue;
            }
            let [
                Action::SetClaimStatus { status, .. },
                Action::Unprotect { name, .. },
            ] = actions.as_slice()
            else {
                panic!("{live} pods: {actions:?}")
            };
            assert!(status.allocation.is_none() && status.reserved_for.is_none());
            assert_eq!(name, "trainer-extended-resources-x1");
        }
    }

    #[test]
    fn a_template_claim_is_created_for_the_pod() {
        let p = pod(
            "trainer",
            "u1",
            None,
            "Pending",
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
        );
        let actions = reconcile(&snapshot(vec![p], vec![]), now());
        let [Action::CreateClaim(created)] = actions.as_slice() else {
            panic!("{actions:?}")
        };
        assert_eq!(
            created.metadata.generate_name.as_deref(),
            Some("trainer-gpu-")
        );
        assert_eq!(
            created
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(POD_CLAIM_NAME))
                .map(String::as_str),
            Some("gpu")
        );
        assert_eq!(
            created
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("team"))
                .map(String::as_str),
            Some("a")
        );
        let owner = &created.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Pod", "u1", Some(true))
        );
    }

    #[test]
    fn a_bound_pod_gets_its_claim_allocated_and_reserved() {
        let p = pod(
            "trainer",
            "u1",
            Some("n1"),
            "Pending",
            json!([{"name": "gpu", "resourceClaimName": "c1"}]),
        );
        let actions = reconcile(
            &snapshot(vec![p], vec![claim("c1", json!(null), &[])]),
            now(),
        );
        assert_eq!(actions.len(), 2, "{actions:?}");
        assert_eq!(
            actions[0],
            Action::Protect {
                namespace: "ml".into(),
                name: "c1".into()
            }
        );
        let Action::SetClaimStatus {
            status,
            resource_version,
            ..
        } = &actions[1]
        else {
            panic!("{actions:?}")
        };
        assert_eq!(resource_version, "7");
        let result = &status
            .allocation
            .as_ref()
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_ref())
            .expect("results")[0];
        assert_eq!(
            (result.pool.as_str(), result.device.as_str()),
            ("n1", "gpu-0")
        );
        assert_eq!(
            status.reserved_for.as_ref().map(|r| r[0].uid.as_str()),
            Some("u1")
        );
        // A second bound pod with its own claim finds the only GPU taken in the same pass.
        let other = pod(
            "other",
            "u2",
            Some("n1"),
            "Pending",
            json!([{"name": "gpu", "resourceClaimName": "c2"}]),
        );
        let both = reconcile(
            &snapshot(
                vec![
                    pod(
                        "trainer",
                        "u1",
                        Some("n1"),
                        "Pending",
                        json!([{"name": "gpu", "resourceClaimName": "c1"}]),
                    ),
                    other,
                ],
                vec![claim("c1", json!(null), &[]), claim("c2", json!(null), &[])],
            ),
            now(),
        );
        assert!(both.iter().any(|a| matches!(a, Action::Warn { pod, reason, .. } if pod == "other" && reason == "FailedScheduling")), "{both:?}");
    }

    #[test]
    fn finished_pods_release_and_only_own_allocations_are_deallocated() {
        let allocation = json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]}});
        let reserved = |uid: &str| json!({"allocation": allocation, "reservedFor": [{"resource": "pods", "name": "p", "uid": uid}]});
        let done = pod(
            "p",
            "u1",
            Some("n1"),
            "Succeeded",
            json!([{"name": "gpu", "resourceClaimName": "mine"}]),
        );
        let actions = reconcile(
            &snapshot(
                vec![done],
                vec![
                    claim("mine", reserved("u1"), &[DELETE_PROTECTION]),
                    // Allocated by someone else (no finalizer): reservations drop, the allocation stays.
                    claim("theirs", reserved("gone"), &[]),
                    // Allocated, never reserved, not ours: left alone.
                    claim("manual", json!({"allocation": allocation}), &[]),
                ],
            ),
            now(),
        );
        let summary: Vec<String> = actions
            .iter()
            .map(|a| match a {
                Action::SetClaimStatus { name, status, .. } => format!(
                    "{name}: allocated={} reserved={}",
                    status.allocation.is_some(),
                    status.reserved_for.as_ref().map_or(0, Vec::len)
                ),
                Action::Unprotect { name, .. } => format!("{name}: unprotect"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            summary,
            [
                "mine: allocated=false reserved=0",
                "mine: unprotect",
                "theirs: allocated=true reserved=0"
            ]
        );
    }
}
