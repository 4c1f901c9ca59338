//! The ResourceClaim shell: watches pods, claims, templates, slices, classes and nodes, runs
//! [`tessera_workloads::resource_claim::reconcile`] over a snapshot after each burst of changes (and
//! every few seconds), and writes its actions — claims created, finalizers, claim status by
//! update with the resourceVersion it was computed from (a conflict waits for the next pass),
//! pod claim statuses, and warning events (each message once per pod).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::Patch;
use kube::{Api, Client};
use serde_json::json;
use tessera_model::clock::Clock;

use crate::shell::{
    ObjectKey, object_key, overlay, patch_params, post_params, record_event, send_unread, watched,
};
use crate::workqueue::Passes;
use tessera_workloads::resource_claim::{
    Action, DELETE_PROTECTION, Snapshot, consumer, protected, reconcile,
};

/// The field manager the controller writes as.
pub const MANAGER: &str = crate::shell::KUBE_CONTROLLER_MANAGER;

/// Runs the controller until the task is dropped, stamping allocations and events from
/// `clock` and recording its passes in `metrics` (queue `resource_claim`).
pub async fn run(
    client: Client,
    clock: Clock,
    metrics: Option<Arc<tessera_metrics::components::Registries>>,
) {
    let mut passes = Passes::new(
        metrics.as_deref(),
        &[tessera_metrics::controllers::queue_name::RESOURCE_CLAIM],
        clock.clone(),
    );
    let (pods, pod_changes) = watched(Api::<Pod>::all(client.clone()));
    let (claims, claim_changes) = watched(Api::<ResourceClaim>::all(client.clone()));
    let (templates, template_changes) = watched(Api::<ResourceClaimTemplate>::all(client.clone()));
    let (slices, slice_changes) = watched(Api::<ResourceSlice>::all(client.clone()));
    let (classes, class_changes) = watched(Api::<DeviceClass>::all(client.clone()));
    let (nodes, node_changes) = watched(Api::<Node>::all(client.clone()));
    let mut changes = futures::stream::select_all([
        pod_changes,
        claim_changes,
        template_changes,
        slice_changes,
        class_changes,
        node_changes,
    ]);
    let mut resync = tokio::time::interval(Duration::from_secs(5));
    let mut warned: HashMap<(String, String), String> = HashMap::new();
    let mut own = OwnClaims::default();
    while passes.next(&mut changes, &mut resync).await {
        let snapshot = Snapshot {
            pods: pods.state(),
            claims: own.with(claims.state(), tokio::time::Instant::now()),
            templates: templates.state(),
            slices: slices.state(),
            classes: classes.state(),
            nodes: nodes.state(),
        };
        let actions = reconcile(&snapshot, clock());
        let created = std::sync::Mutex::new(Vec::new());
        let result = apply(&client, &snapshot, actions, &mut warned, &created, &clock).await;
        own.remember(
            created.into_inner().unwrap_or_else(|p| p.into_inner()),
            tokio::time::Instant::now(),
        );
        if let Err(error) = result {
            tracing::debug!(%error, "resource claim pass stopped; retrying on the next change");
            passes.retry();
        }
    }
}

/// How long a created claim is remembered when the watch never shows it (deleted at once).
const OWN_CLAIMS_KEPT: Duration = Duration::from_secs(600);

/// Claims this controller created that its watch may not have delivered yet, kept as
/// client-go's MutationCache keeps them for upstream's controller: a pass that did not see
/// them would create a pod's claim a second time.
#[derive(Default)]
struct OwnClaims {
    created: HashMap<ObjectKey, (Arc<ResourceClaim>, tokio::time::Instant)>,
}

impl OwnClaims {
    fn remember(&mut self, claims: Vec<ResourceClaim>, now: tokio::time::Instant) {
        for claim in claims {
            self.created
                .insert(object_key(&claim.metadata), (Arc::new(claim), now));
        }
    }

    /// The watched claims and the created ones the watch has not shown yet; those it shows,
    /// and those kept too long, are forgotten.
    fn with(
        &mut self,
        watched: Vec<Arc<ResourceClaim>>,
        now: tokio::time::Instant,
    ) -> Vec<Arc<ResourceClaim>> {
        overlay(
            &mut self.created,
            watched,
            (now, OWN_CLAIMS_KEPT),
            |_, _| None,
            |created| Some(Arc::clone(created)),
        )
    }
}

/// Writes in flight at once: subjects (a pod, a claim) are written concurrently, each one's
/// writes in the order the pass gave them.
const WRITES_IN_FLIGHT: usize = 64;

/// What a write is about: its writes stay in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Subject {
    Pod(String, String),
    Claim(String, String),
}

fn subject(action: &Action) -> Subject {
    match action {
        Action::CreateClaim(claim) => {
            // A generated claim belongs with its pod's other writes.
            let owner = claim
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true));
            let namespace = claim.metadata.namespace.clone().unwrap_or_default();
            match owner {
                Some(owner) => Subject::Pod(namespace, owner.name.clone()),
                None => Subject::Claim(
                    namespace,
                    claim.metadata.generate_name.clone().unwrap_or_default(),
                ),
            }
        }
        Action::SetPodClaimStatuses { namespace, pod, .. }
        | Action::Warn { namespace, pod, .. } => Subject::Pod(namespace.clone(), pod.clone()),
        Action::Protect { namespace, name }
        | Action::Unprotect { namespace, name }
        | Action::SetClaimStatus {
            namespace, name, ..
        } => Subject::Claim(namespace.clone(), name.clone()),
    }
}

/// The snapshot's objects by (namespace, name), for the writes that start from them.
struct Lookup<'s> {
    claims: HashMap<(&'s str, &'s str), &'s ResourceClaim>,
    pods: HashMap<(&'s str, &'s str), &'s Pod>,
}

impl<'s> Lookup<'s> {
    fn new(snapshot: &'s Snapshot) -> Lookup<'s> {
        fn by_key<K: kube::Resource>(items: &[Arc<K>]) -> HashMap<(&str, &str), &K> {
            items
                .iter()
                .map(AsRef::as_ref)
                .map(|item| {
                    let meta = item.meta();
                    let namespace = meta.namespace.as_deref().unwrap_or_default();
                    ((namespace, meta.name.as_deref().unwrap_or_default()), item)
                })
                .collect()
        }
        Lookup {
            claims: by_key(&snapshot.claims),
            pods: by_key(&snapshot.pods),
        }
    }

    fn claim(&self, namespace: &str, name: &str) -> Option<&'s ResourceClaim> {
        self.claims.get(&(namespace, name)).copied()
    }
}

/// A pass's actions grouped by subject, each group in the pass's order, groups in the order
/// of their first action; a warning already given for the pod is dropped.
fn by_subject(
    actions: Vec<Action>,
    warned: &mut HashMap<(String, String), String>,
) -> Vec<Vec<Action>> {
    let mut groups: Vec<Vec<Action>> = Vec::new();
    let mut group_of: HashMap<Subject, usize> = HashMap::new();
    for action in actions {
        if let Action::Warn {
            namespace,
            pod,
            message,
            ..
        } = &action
        {
            let key = (namespace.clone(), pod.clone());
            if warned.get(&key) == Some(message) {
                continue;
            }
            warned.insert(key, message.clone());
        }
        let next = groups.len();
        let group = *group_of.entry(subject(&action)).or_insert(next);
        if group == next {
            groups.push(Vec::new());
        }
        groups[group].push(action);
    }
    groups
}

async fn apply(
    client: &Client,
    snapshot: &Snapshot,
    actions: Vec<Action>,
    warned: &mut HashMap<(String, String), String>,
    created: &std::sync::Mutex<Vec<ResourceClaim>>,
    clock: &Clock,
) -> Result<(), kube::Error> {
    use futures::StreamExt;
    let groups = by_subject(actions, warned);
    let lookup = Lookup::new(snapshot);
    let results: Vec<Result<(), kube::Error>> = futures::stream::iter(groups)
        .map(|group| write_in_order(client, &lookup, group, created, clock))
        .buffer_unordered(WRITES_IN_FLIGHT)
        .collect()
        .await;
    results.into_iter().collect()
}

/// One subject's writes, in order; the first failure ends them (the next pass retries).
/// Claims created are added to `created`.
async fn write_in_order(
    client: &Client,
    lookup: &Lookup<'_>,
    actions: Vec<Action>,
    created: &std::sync::Mutex<Vec<ResourceClaim>>,
    clock: &Clock,
) -> Result<(), kube::Error> {
    // resourceVersions written here, so a status update follows its own finalizer write.
    let mut written: HashMap<(String, String), String> = HashMap::new();
    for action in actions {
        match action {
            Action::CreateClaim(claim) => {
                let namespace = claim.metadata.namespace.clone().unwrap_or_default();
                // Read back: its generated name is what the next pass must find.
                let made = Api::<ResourceClaim>::namespaced(client.clone(), &namespace)
                    .create(&post_params(MANAGER), &claim)
                    .await?;
                created.lock().unwrap_or_else(|p| p.into_inner()).push(made);
            }
            Action::SetPodClaimStatuses {
                namespace,
                pod,
                statuses,
            } => {
                let statuses: Vec<_> = statuses
                    .iter()
                    .map(|(name, claim)| json!({"name": name, "resourceClaimName": claim}))
                    .collect();
                let path = format!("/api/v1/namespaces/{namespace}/pods");
                let request = kube::core::Request::new(path).patch_subresource(
                    "status",
                    &pod,
                    &patch_params(MANAGER),
                    &Patch::Merge(json!({"status": {"resourceClaimStatuses": statuses}})),
                );
                send_unread(client, request).await?;
            }
            Action::Protect { namespace, name } | Action::Unprotect { namespace, name } => {
                let mut finalizers: Vec<String> = lookup
                    .claim(&namespace, &name)
                    .and_then(|c| c.metadata.finalizers.clone())
                    .unwrap_or_default();
                let protect = !finalizers.iter().any(|f| f == DELETE_PROTECTION);
                if protect {
                    finalizers.push(DELETE_PROTECTION.into());
                } else {
                    finalizers.retain(|f| f != DELETE_PROTECTION);
                }
                let updated = Api::<ResourceClaim>::namespaced(client.clone(), &namespace)
                    .patch(
                        &name,
                        &patch_params(MANAGER),
                        &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
                    )
                    .await?;
                if let Some(version) = updated.metadata.resource_version {
                    written.insert((namespace, name), version);
                }
            }
            Action::SetClaimStatus {
                namespace,
                name,
                resource_version,
                status,
            } => {
                let api = Api::<ResourceClaim>::namespaced(client.clone(), &namespace);
                let version = written
                    .get(&(namespace.clone(), name.clone()))
                    .cloned()
                    .unwrap_or(resource_version);
                let Some(mut claim) = lookup.claim(&namespace, &name).cloned() else {
                    continue;
                };
                claim.metadata.resource_version = Some(version);
                claim.metadata.managed_fields = None;
                claim.status = Some(*status);
                let updated = api
                    .replace_status(&name, &post_params(MANAGER), &claim)
                    .await?;
                if let Some(version) = updated.metadata.resource_version {
                    written.insert((namespace, name), version);
                }
            }
            Action::Warn {
                namespace,
                pod,
                reason,
                message,
            } => {
                let uid = lookup
                    .pods
                    .get(&(namespace.as_str(), pod.as_str()))
                    .and_then(|p| p.metadata.uid.clone())
                    .unwrap_or_default();
                let involved = json!({"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod, "uid": uid});
                record_event(
                    client,
                    involved,
                    ("Warning", &reason, &message),
                    "resourceclaim-controller",
                    clock(),
                )
                .await;
            }
        }
    }
    Ok(())
}

/// Allocates (when `allocation` is given) and reserves `claim` for `pod`, as the scheduler's
/// PreBind does: the delete-protection finalizer first, then the status, each write
/// conditional on the version read, so a concurrent change makes it fail rather than clobber.
/// Gives back the claim as written.
pub async fn allocate_and_reserve(
    client: &Client,
    claim: &ResourceClaim,
    allocation: Option<&AllocationResult>,
    pod: &Pod,
    manager: &str,
) -> Result<ResourceClaim, kube::Error> {
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    let api = Api::<ResourceClaim>::namespaced(client.clone(), &namespace);
    let mut claim = claim.clone();
    if allocation.is_some() && !protected(&claim) {
        let mut finalizers = claim.metadata.finalizers.clone().unwrap_or_default();
        finalizers.push(DELETE_PROTECTION.into());
        claim = api
            .patch(
                &name,
                &patch_params(manager),
                &Patch::Merge(json!({"metadata": {
                    "finalizers": finalizers,
                    "resourceVersion": claim.metadata.resource_version,
                }})),
            )
            .await?;
    }
    let status = claim.status.get_or_insert_with(Default::default);
    if let Some(allocation) = allocation {
        status.allocation = Some(allocation.clone());
    }
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let reserved = status.reserved_for.get_or_insert_with(Vec::new);
    if !reserved.iter().any(|c| c.uid == uid) {
        reserved.push(consumer(pod));
    }
    claim.metadata.managed_fields = None;
    // The claim written is not read back.
    let body = serde_json::to_vec(&claim).map_err(kube::Error::SerdeError)?;
    let path = format!("/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims");
    let request = kube::core::Request::new(path).replace_subresource(
        "status",
        &name,
        &post_params(manager),
        body,
    );
    send_unread(client, request).await?;
    Ok(claim)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim_status(name: &str, version: &str) -> Action {
        Action::SetClaimStatus {
            namespace: "ml".into(),
            name: name.into(),
            resource_version: version.into(),
            status: Box::default(),
        }
    }

    fn generated(pod: &str) -> Action {
        let claim: ResourceClaim = serde_json::from_value(json!({
            "metadata": {"namespace": "ml", "generateName": format!("{pod}-gpu-"),
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": format!("uid-{pod}"), "controller": true}]},
            "spec": {}
        }))
        .expect("claim");
        Action::CreateClaim(Box::new(claim))
    }

    fn warn(pod: &str, message: &str) -> Action {
        Action::Warn {
            namespace: "ml".into(),
            pod: pod.into(),
            reason: "FailedResourceClaimCreation".into(),
            message: message.into(),
        }
    }

    fn named_claim(name: &str) -> ResourceClaim {
        serde_json::from_value(json!({"metadata": {"namespace": "ml", "name": name}, "spec": {}}))
            .expect("claim")
    }

    fn names(claims: &[Arc<ResourceClaim>]) -> Vec<String> {
        let mut names: Vec<String> = claims
            .iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_pass_sees_the_claims_it_created_until_the_watch_does() {
        let start = tokio::time::Instant::now();
        let mut own = OwnClaims::default();
        own.remember(vec![named_claim("a-gpu-1"), named_claim("b-gpu-2")], start);
        let watched = vec![Arc::new(named_claim("old"))];
        // Not watched yet: both are added.
        assert_eq!(
            names(&own.with(watched.clone(), start)),
            ["a-gpu-1", "b-gpu-2", "old"]
        );
        // The watch shows one: it comes from the watch alone, once, and is forgotten.
        let watched = vec![
            Arc::new(named_claim("old")),
            Arc::new(named_claim("a-gpu-1")),
        ];
        assert_eq!(
            names(&own.with(watched, start)),
            ["a-gpu-1", "b-gpu-2", "old"]
        );
        assert_eq!(own.created.len(), 1);
        // One the watch never shows (deleted at once) is forgotten after a while.
        let later = start + OWN_CLAIMS_KEPT;
        assert_eq!(
            names(&own.with(vec![Arc::new(named_claim("old"))], later)),
            ["old"]
        );
        assert!(own.created.is_empty());
    }

    #[test]
    fn writes_keep_their_order_per_subject_and_warnings_are_not_repeated() {
        let statuses = Action::SetPodClaimStatuses {
            namespace: "ml".into(),
            pod: "a".into(),
            statuses: vec![("gpu".into(), "a-gpu-x".into())],
        };
        let protect = Action::Protect {
            namespace: "ml".into(),
            name: "c1".into(),
        };
        let mut warned = HashMap::from([(("ml".into(), "b".into()), "old".to_string())]);
        let groups = by_subject(
            vec![
                generated("a"),
                protect.clone(),
                claim_status("c2", "7"),
                statuses.clone(),
                claim_status("c1", "5"),
                warn("b", "old"),
                warn("b", "new"),
            ],
            &mut warned,
        );
        assert_eq!(
            groups,
            vec![
                // A pod's generated claim before its claim statuses.
                vec![generated("a"), statuses],
                // A claim's finalizer before its status (which follows the finalizer's version).
                vec![protect, claim_status("c1", "5")],
                vec![claim_status("c2", "7")],
                // The warning given before is dropped; a new message is written and remembered.
                vec![warn("b", "new")],
            ]
        );
        assert_eq!(warned[&("ml".to_string(), "b".to_string())], "new");
    }
}
