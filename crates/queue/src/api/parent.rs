//! The Workloads Kueue's StatefulSet and LeaderWorkerSet reconcilers build for their pods'
//! groups (`pkg/controller/jobs/statefulset`, `pkg/controller/jobs/leaderworkerset`): one per
//! StatefulSet (PodSet `main` of `replicas`), one per LeaderWorkerSet group (`<name>-<index>`;
//! PodSets `leader` of 1 and `worker` of `size - 1`, or `main` of `size` without a leader
//! template), named as Kueue names them, owned by the parent (`SetOwnerReference`: neither
//! controller nor blocking), labelled with its UID and annotated as a group Workload with its
//! owner's GVK, name and (LeaderWorkerSet) group index. The pods name it through
//! `kueue.x-k8s.io/prebuilt-workload-name`, which [`parent_of`] reads with the parent to fetch.
//!
//! Knows nothing of pods' admission (that is [`crate::api::pod`]) nor of how the shell fetches
//! the parent. Not modelled: the `resource-in-use` finalizer, scale-down (deleting excess
//! LeaderWorkerSet Workloads, putting a StatefulSet's on hold), rolling-update surge, queue
//! name and priority changes, MultiKueue origin UIDs and TopologyAwareScheduling requests.

use serde_json::{Map, Value, json};
use tessera_model::json as json_read;
use tessera_model::kueue::pod::{
    self as labels, IS_GROUP_WORKLOAD, LWS_NAME, LWS_WORKER_INDEX, PREBUILT_WORKLOAD,
    SUSPENDED_BY_PARENT,
};

use crate::api::framework::{self, JOB_UID, PodSet, Priorities};
use crate::api::status;

/// `JobOwnerGVKAnnotation`.
pub const JOB_OWNER_GVK: &str = "kueue.x-k8s.io/job-owner-gvk";
/// `JobOwnerNameAnnotation`.
pub const JOB_OWNER_NAME: &str = "kueue.x-k8s.io/job-owner-name";
/// `ComponentWorkloadIndexAnnotation`.
pub const COMPONENT_INDEX: &str = "kueue.x-k8s.io/component-workload-index";

/// The LeaderWorkerSet API group.
const LWS_GROUP: &str = "leaderworkerset.x-k8s.io";
/// The prefix of the LeaderWorkerSet's own labels, which Kueue drops from PodSet templates.
const LWS_PREFIX: &str = "leaderworkerset.sigs.k8s.io";
/// The StatefulSet controller's pod index label (`appsv1.PodIndexLabel`).
const STS_POD_INDEX: &str = "apps.kubernetes.io/pod-index";

/// The kind of parent whose pods form one group per Workload it owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentKind {
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// leaderworkerset.x-k8s.io/v1 LeaderWorkerSet.
    LeaderWorkerSet,
}

impl ParentKind {
    /// `(group, version, kind, plural)`.
    pub fn resource(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            ParentKind::StatefulSet => ("apps", "v1", "StatefulSet", "statefulsets"),
            ParentKind::LeaderWorkerSet => (LWS_GROUP, "v1", "LeaderWorkerSet", "leaderworkersets"),
        }
    }

    fn api_version(self) -> String {
        let (group, version, _, _) = self.resource();
        format!("{group}/{version}")
    }

    /// Go's `GroupVersionKind.String()`.
    fn gvk(self) -> String {
        let (group, version, kind, _) = self.resource();
        format!("{group}/{version}, Kind={kind}")
    }
}

/// Which parent's Workload a managed pod waits for: its kind and name, when the pod names a
/// prebuilt Workload and is suspended by a StatefulSet (its controller) or a LeaderWorkerSet
/// (its name label).
pub fn parent_of(pod: &Value) -> Option<(ParentKind, String)> {
    labels::label(pod, PREBUILT_WORKLOAD)?;
    match labels::annotation(pod, SUSPENDED_BY_PARENT)? {
        "statefulset" => {
            let owner = pod
                .pointer("/metadata/ownerReferences")?
                .as_array()?
                .iter()
                .find(|r| r["controller"] == true && r["kind"] == "StatefulSet")?;
            Some((ParentKind::StatefulSet, owner["name"].as_str()?.to_owned()))
        }
        "leaderworkerset" => Some((
            ParentKind::LeaderWorkerSet,
            labels::label(pod, LWS_NAME)?.to_owned(),
        )),
        _ => None,
    }
}

/// What the parent's reconciler does for the pod's group: create the StatefulSet's Workload,
/// or the LeaderWorkerSet group's of the pod's group index, with its `CreatedWorkload` event;
/// or, when the parent names a missing WorkloadPriorityClass, only warn
/// (`WorkloadPriorityClassNotFound`). `None` when the pod has no group index.
pub fn workload_for(
    kind: ParentKind,
    parent: &Value,
    pod: &Value,
    priorities: &Priorities,
) -> Option<Result<(Value, status::Event), status::Event>> {
    if let Some(class) = priorities.missing_workload_class(parent) {
        let involved = (kind.api_version(), kind.resource().2);
        let event = Priorities::missing_class_event(parent, (&involved.0, involved.1), class);
        return Some(Err(event));
    }
    let workload = match kind {
        ParentKind::StatefulSet => statefulset_workload(parent, priorities),
        ParentKind::LeaderWorkerSet => {
            let index: usize = labels::lws_group_index(pod)?.parse().ok()?;
            leaderworkerset_workload(parent, index, priorities)
        }
    };
    let event = created_event(kind, parent, &workload);
    Some(Ok((workload, event)))
}

/// `GetWorkloadName` of a StatefulSet.
pub fn statefulset_workload_name(name: &str, uid: &str) -> String {
    tessera_model::kueue::workload_name("StatefulSet", "apps", name, uid)
}

/// `GetWorkloadName` of a LeaderWorkerSet group.
pub fn leaderworkerset_workload_name(name: &str, uid: &str, index: usize) -> String {
    tessera_model::kueue::workload_name(
        "LeaderWorkerSet",
        LWS_GROUP,
        &format!("{name}-{index}"),
        uid,
    )
}

/// The StatefulSet reconciler's `constructWorkload`.
pub fn statefulset_workload(sts: &Value, priorities: &Priorities) -> Value {
    let replicas = json_read::int(sts, "/spec/replicas").unwrap_or(1);
    let spec = sts
        .pointer("/spec/template/spec")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let template = sts.pointer("/spec/template").cloned().unwrap_or_default();
    let pod_sets = vec![PodSet {
        name: "main".to_owned(),
        template: json!({"spec": spec}),
        count: i32::try_from(replicas).unwrap_or(i32::MAX),
        min_count: None,
        topology_request: framework::topology_request(&template, Some(STS_POD_INDEX), None),
    }];
    let name = statefulset_workload_name(
        json_read::text(sts, "/metadata/name"),
        json_read::text(sts, "/metadata/uid"),
    );
    group_workload(ParentKind::StatefulSet, sts, &name, pod_sets, priorities)
}

/// The LeaderWorkerSet reconciler's `constructWorkload` for group `index`.
pub fn leaderworkerset_workload(lws: &Value, index: usize, priorities: &Priorities) -> Value {
    let size = json_read::int(lws, "/spec/leaderWorkerTemplate/size").unwrap_or(1);
    let size = i32::try_from(size).unwrap_or(i32::MAX);
    let template = |which: &str| {
        lws.pointer(&format!("/spec/leaderWorkerTemplate/{which}"))
            .filter(|t| !t.is_null())
    };
    let mut pod_sets = Vec::new();
    let (worker_name, worker_count) = match template("leaderTemplate") {
        Some(leader) => {
            pod_sets.push(lws_pod_set("leader", 1, leader, None));
            ("worker", size - 1)
        }
        None => ("main", size),
    };
    let worker = template("workerTemplate")
        .cloned()
        .unwrap_or_else(|| json!({}));
    pod_sets.push(lws_pod_set(
        worker_name,
        worker_count,
        &worker,
        Some(LWS_WORKER_INDEX),
    ));
    let name = leaderworkerset_workload_name(
        json_read::text(lws, "/metadata/name"),
        json_read::text(lws, "/metadata/uid"),
        index,
    );
    let mut workload = group_workload(
        ParentKind::LeaderWorkerSet,
        lws,
        &name,
        pod_sets,
        priorities,
    );
    workload["metadata"]["annotations"][COMPONENT_INDEX] = json!(index.to_string());
    workload
}

/// `newPodSet`: the template with its `leaderworkerset.sigs.k8s.io` labels and annotations
/// dropped (all but the name label), and the topology request of its annotations (ranks by
/// `pod_index_label`).
fn lws_pod_set(name: &str, count: i32, template: &Value, pod_index_label: Option<&str>) -> PodSet {
    let topology_request = framework::topology_request(template, pod_index_label, None);
    let mut template = template.clone();
    for field in ["labels", "annotations"] {
        if let Some(map) = template
            .pointer_mut(&format!("/metadata/{field}"))
            .and_then(Value::as_object_mut)
        {
            map.retain(|key, _| !key.starts_with(LWS_PREFIX) || key == LWS_NAME);
        }
    }
    PodSet {
        name: name.to_owned(),
        template,
        count,
        min_count: None,
        topology_request,
    }
}

/// `NewGroupWorkload` with the parent's UID label, owner annotations and owner reference.
fn group_workload(
    kind: ParentKind,
    parent: &Value,
    name: &str,
    pod_sets: Vec<PodSet>,
    priorities: &Priorities,
) -> Value {
    let (reference, priority) = priorities.of(parent, &pod_sets);
    let parent_name = json_read::text(parent, "/metadata/name");
    let uid = json_read::text(parent, "/metadata/uid");
    let pod_sets: Vec<Value> = pod_sets
        .into_iter()
        .map(|p| {
            let mut value = json!({"name": p.name, "count": p.count, "template": p.template});
            if let Some(request) = p.topology_request {
                value["topologyRequest"] = request;
            }
            value
        })
        .collect();
    let mut spec = json!({"podSets": pod_sets, "priority": priority});
    if let Some(queue) = framework::queue_name(parent) {
        spec["queueName"] = json!(queue);
    }
    if let Some(reference) = reference {
        spec["priorityClassRef"] = reference;
    }
    let mut annotations = Map::new();
    annotations.insert(IS_GROUP_WORKLOAD.to_owned(), json!("true"));
    annotations.insert(JOB_OWNER_GVK.to_owned(), json!(kind.gvk()));
    annotations.insert(JOB_OWNER_NAME.to_owned(), json!(parent_name));
    json!({
        "apiVersion": status::WORKLOAD_API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": json_read::text(parent, "/metadata/namespace"),
            "labels": {JOB_UID: uid},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": kind.api_version(),
                "kind": kind.resource().2, "name": parent_name, "uid": uid}],
        },
        "spec": spec,
    })
}

/// The `CreatedWorkload` event Kueue records about the parent.
fn created_event(kind: ParentKind, parent: &Value, workload: &Value) -> status::Event {
    status::Event::about(
        parent,
        (&kind.api_version(), kind.resource().2),
        ("Normal", "CreatedWorkload"),
        &format!("Created Workload: {}", framework::key_of(workload)),
    )
}

#[cfg(test)]
#[path = "parent_tests.rs"]
mod tests;
